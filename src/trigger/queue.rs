//! The merge queue, wired: a `merge_group` event (`checks_requested`) asks for `AMD PR test` on
//! the queue's merge commit. [`decide`] pins it (`prgate_github::trigger::queue_pin`, with the
//! PR as GitHub has it); [`judge`] reads what the judgement needs (the paths the queue adds,
//! `prgate_scope::git::paths_between`; the PR head's statuses and prgate's own login; the two
//! plans) and hands it to the deciders: whether the PR's own result is a pass of prgate's
//! (`prgate_github::trigger::own_result`) and what the merge commit needs
//! (`prgate_scope::queue::QueueVerdict`). Posting the verdict is `crate::ci`'s.

use std::path::Path;

use super::Decision;
use anyhow::Context as _;
use prgate_github::GitHub;
use prgate_github::pin::{Pinned, QueuePin};
use prgate_github::trigger::{OwnResult, QueueRequest, own_result, queue_pin};
use prgate_scope::queue::{QueueVerdict, Queued};
use prgate_scope::{Plan, PlanRequest};

/// A merge queue's `checks_requested`: pinned to the merge commit, with the PR's files.
pub(crate) async fn decide(github: &GitHub, queue: QueueRequest) -> anyhow::Result<Decision> {
    let pr = github.pull_request(queue.number).await?;
    let files = github.pull_request_files(&pr).await?;
    let mut pinned = queue_pin(queue, &pr, &files);
    super::vet_accepting_label(github, &mut pinned, &pr).await;
    Ok(Decision::Start(Box::new(pinned), files.paths))
}

/// Whether the PR's result holds for the merge commit of `pinned`, or what runs again.
pub(crate) async fn judge(
    github: &GitHub,
    repo: &Path,
    pinned: &Pinned,
    queue: &QueuePin,
    pr_files: &[String],
    context: &str,
) -> anyhow::Result<QueueVerdict> {
    let added = prgate_scope::git::paths_between(
        repo,
        ("the PR's head", &queue.pr_head),
        ("the merge group's commit", &pinned.sha),
    )?;
    let statuses = github.statuses(&queue.pr_head).await?;
    // A login that cannot be told makes no status ours, and everything runs.
    let ours = github.comment_login(None).await.ok();
    let queued = Queued {
        number: pinned.number,
        pr_head: &queue.pr_head,
        context,
        added: &added,
        judging: &[],
    };
    Ok(match own_result(&statuses, context, ours.as_deref()) {
        OwnResult::NotPassed(state) => QueueVerdict::without_result(&queued, &state, pr_files),
        OwnResult::Passed => {
            let pr_plan = plan(repo, &pinned.base_sha, &queue.pr_head, pr_files)?;
            let queue_plan = plan(repo, &pinned.base_sha, &pinned.sha, &added)?;
            let judging = prgate_runner::job::RecipePaths::DEFAULT.judging_files(&pr_plan);
            let queued = Queued { judging: &judging, ..queued };
            QueueVerdict::of_plans(&queued, &pr_plan, &queue_plan)
        }
    })
}

/// The plan from `base` to `head` over `files`.
fn plan(repo: &Path, base: &str, head: &str, files: &[String]) -> anyhow::Result<Plan> {
    let request = PlanRequest::pinned(repo, (base, head), files, false).context("a file list")?;
    Ok(prgate_scope::plan(&request)?)
}
