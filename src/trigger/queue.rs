//! The merge queue: a `merge_group` event (`checks_requested`) asks for `AMD PR test` on the
//! queue's merge commit, which is the queue's base, the PRs ahead in the queue, and this PR.
//!
//! The PR's own result, the `AMD PR test` status on its head, stays valid for the merge commit
//! when what the queue adds (the tree difference between the PR's head and the merge commit:
//! the base's new commits and the PRs ahead) selects none of the models, nor the common checks,
//! that the PR's own plan selects: then the status on the merge commit is `success` and says
//! why. Otherwise the models both select (and the common checks, when both select them) run
//! again on the merge commit, against the queue's base; and with no passing result on the PR's
//! head, everything the PR or the queue selects runs. The decision reads git (the commits must
//! be fetched) and the plan's scope (what both plans select is scope's
//! `prgate_scope::plan::overlap`); GitHub only for the PR and its statuses. Only a status
//! prgate posted counts (its creator is prgate's own login).

use std::collections::BTreeSet;
use std::path::Path;

use super::Decision;
use anyhow::Context as _;
use prgate_github::GitHub;
use prgate_github::event::{MergeGroup, normal_sha};
use prgate_github::pin::{Pinned, QueuePin};
use prgate_scope::plan::overlap::Overlap;
use prgate_scope::{FileList, Plan, PlanRequest};

/// What the merge commit needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum QueueVerdict {
    /// The PR's result holds: post `success` with this description.
    Holds(String),
    /// These changed paths run again on the merge commit; the note says why (for the plan).
    Rerun { files: Vec<String>, note: String },
}

/// A `merge_group` event: pinned to the merge commit, with the PR's files.
pub(crate) async fn decide(
    github: &GitHub,
    group: &MergeGroup,
    action: Option<&str>,
) -> anyhow::Result<Decision> {
    if action != Some("checks_requested") {
        return Ok(Decision::Refuse(format!(
            "the merge_group event is '{}', not 'checks_requested'",
            action.unwrap_or("none")
        )));
    }
    let (number, pr_head) = group.pr_and_head()?;
    let sha = normal_sha(&group.head_sha)
        .with_context(|| format!("the merge group's head SHA '{}'", group.head_sha))?;
    let base_sha = normal_sha(&group.base_sha)
        .with_context(|| format!("the merge group's base SHA '{}'", group.base_sha))?;
    let pr = github.pull_request(number).await?;
    let files = github.pull_request_files(&pr).await?;
    let pinned = Pinned {
        number,
        sha,
        title: pr.title.clone(),
        base_ref: group.base_ref.trim_start_matches("refs/heads/").to_owned(),
        base_sha,
        triggered_by: "the merge queue".to_owned(),
        files_truncated: files.truncated,
        merge_group: Some(QueuePin { pr_head, head_ref: group.head_ref.clone(), note: None }),
        labels: pr.labels.iter().map(|label| label.name.clone()).collect(),
    };
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
    let number = pinned.number;
    let short = &queue.pr_head[..7];
    let added = queue_added(repo, &queue.pr_head, &pinned.sha)?;
    let statuses = github.statuses(&queue.pr_head).await?;
    // Ours only: anyone with `statuses: write` can post a status of that name. A login that
    // cannot be told makes no status ours, and everything runs.
    let ours = github.comment_login(None).await.ok();
    let result = statuses.iter().find(|status| status.context == context);
    let passed = result.is_some_and(|status| {
        status.state == "success" && ours.is_some() && status.creator() == ours.as_deref()
    });
    if !passed {
        let state = match result {
            Some(status) if status.creator() != ours.as_deref() => {
                format!("posted by {}, not prgate", status.creator().unwrap_or("nobody"))
            }
            Some(status) => status.state.clone(),
            None => "none".to_owned(),
        };
        let mut files: BTreeSet<String> = pr_files.iter().cloned().collect();
        files.extend(added);
        return Ok(QueueVerdict::Rerun {
            files: files.into_iter().collect(),
            note: format!(
                "merge queue: #{number} has no passing {context} on its head {short} ({state}): everything it or the queue changes runs on the merge commit"
            ),
        });
    }
    let pr_plan = plan(repo, &pinned.base_sha, &queue.pr_head, pr_files)?;
    let queue_plan = plan(repo, &pinned.base_sha, &pinned.sha, &added)?;
    let overlap = Overlap::of(&pr_plan, &queue_plan);
    let count = added.len();
    let plural = if count == 1 { "" } else { "s" };
    if overlap.is_empty() {
        return Ok(QueueVerdict::Holds(format!(
            "#{number} passed at {short}; the queue adds {count} path{plural}, none in the scope it was tested for"
        )));
    }
    let mut what: Vec<String> = overlap.models.iter().cloned().collect();
    if overlap.common {
        what.push("the common checks".to_owned());
    }
    Ok(QueueVerdict::Rerun {
        files: overlap.paths.into_iter().collect(),
        note: format!(
            "merge queue: #{number} passed at {short}, but the queue adds {count} path{plural} that touch what it was tested for: {} run again on the merge commit",
            what.join(", ")
        ),
    })
}

/// The paths where the merge commit's tree differs from the PR head's: what the queue adds.
fn queue_added(repo: &Path, pr_head: &str, merge: &str) -> anyhow::Result<Vec<String>> {
    let repository = git2::Repository::open(repo)
        .with_context(|| format!("opening the repository {}", repo.display()))?;
    let tree = |what: &str, sha: &str| -> anyhow::Result<git2::Tree<'_>> {
        let oid = git2::Oid::from_str(sha).with_context(|| format!("{what} {sha}"))?;
        let commit = repository.find_commit(oid).with_context(|| {
            format!("{what} {sha} is not in {}; fetch it first", repo.display())
        })?;
        Ok(commit.tree()?)
    };
    let old = tree("the PR's head", pr_head)?;
    let new = tree("the merge group's commit", merge)?;
    let diff = repository.diff_tree_to_tree(Some(&old), Some(&new), None)?;
    let mut paths = BTreeSet::new();
    for delta in diff.deltas() {
        for file in [delta.old_file(), delta.new_file()] {
            if let Some(path) = file.path().and_then(Path::to_str) {
                paths.insert(path.to_owned());
            }
        }
    }
    Ok(paths.into_iter().collect())
}

fn plan(repo: &Path, base: &str, head: &str, files: &[String]) -> anyhow::Result<Plan> {
    let mut list = files.join("\n");
    list.push('\n');
    let changes = prgate_scope::change::parse_file_list(&list).context("a file list")?;
    Ok(prgate_scope::plan(&PlanRequest {
        repo: repo.to_path_buf(),
        base: Some(base.to_owned()),
        head: Some(head.to_owned()),
        worktree: false,
        files: Some(FileList { changes, truncated: false }),
    })?)
}
