//! The merge queue's judgement: whether a PR's own result holds for the queue's merge commit
//! (the queue's base, the PRs ahead in the queue, and this PR), or what runs again there.
//!
//! The PR's result stays valid for the merge commit when what the queue adds (the tree
//! difference between the PR's head and the merge commit, [`crate::git::paths_between`])
//! selects none of the models, nor the common checks, that the PR's own plan selects: then the
//! merge commit's status is `success` and says why. Otherwise the models both select (and the
//! common checks, when both select them) run again on the merge commit, against the queue's
//! base ([`crate::plan::overlap`]); and with no passing result on the PR's head, everything the
//! PR or the queue changes runs. A queue that changes a file that judges the PR (its manifest,
//! policy or recipes, [`Queued::judging`]) never keeps the result: the PR was judged by rules it
//! will not merge under, so everything it changes runs again. Pure: the PR's and the queue's paths and plans in, a
//! [`QueueVerdict`] out.
//!
//! What it leaves to others: whether the PR's result on its head is a pass of prgate's own (its
//! statuses, `prgate_github::trigger::own_result`), making the plans (git, [`crate::plan()`]),
//! and posting the status (the binary).

use std::collections::BTreeSet;

use crate::Plan;
use crate::plan::overlap::Overlap;

/// What the merge commit needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueVerdict {
    /// The PR's result holds: post `success` with this description.
    Holds(String),
    /// These changed paths run again on the merge commit; the note says why (for the plan).
    Rerun { files: Vec<String>, note: String },
}

/// A queued PR as its judgement names it.
#[derive(Debug, Clone, Copy)]
pub struct Queued<'a> {
    /// The PR's number.
    pub number: u64,
    /// The PR's own head (40 hex digits).
    pub pr_head: &'a str,
    /// The status's context, `AMD PR test`.
    pub context: &'a str,
    /// The paths the queue adds: where the merge commit's tree differs from the PR head's.
    pub added: &'a [String],
    /// The files that judge the PR's run (the runner's `RecipePaths::judging_files`: the
    /// manifest, the policy, the common recipe, its models' recipes).
    pub judging: &'a [String],
}

impl QueueVerdict {
    /// The PR has no passing result of its own on its head (`state`, in words): everything the
    /// PR (`pr_files`) or the queue changes runs on the merge commit.
    pub fn without_result(queued: &Queued<'_>, state: &str, pr_files: &[String]) -> QueueVerdict {
        let Queued { number, context, .. } = *queued;
        let short = short(queued);
        let mut files: BTreeSet<String> = pr_files.iter().cloned().collect();
        files.extend(queued.added.iter().cloned());
        QueueVerdict::Rerun {
            files: files.into_iter().collect(),
            note: format!(
                "merge queue: #{number} has no passing {context} on its head {short} ({state}): everything it or the queue changes runs on the merge commit"
            ),
        }
    }

    /// The PR passed on its head: its result holds unless the queue's plan (`queue_plan`, of
    /// the added paths) selects what the PR's plan (`pr_plan`) selects; then that runs again.
    pub fn of_plans(queued: &Queued<'_>, pr_plan: &Plan, queue_plan: &Plan) -> QueueVerdict {
        let pr_files = pr_plan.changed.iter().flat_map(|changed| {
            std::iter::once(changed.path.clone()).chain(changed.old_path.clone())
        });
        let pr_files: Vec<String> = pr_files.collect();
        QueueVerdict::judging_moved(queued, &pr_files)
            .unwrap_or_else(|| QueueVerdict::of_overlap(queued, Overlap::of(pr_plan, queue_plan)))
    }

    /// The queue changes files that judge the PR: everything it changes (`pr_files`) runs again
    /// on the merge commit, by the rules it will merge under. `None` when it changes none.
    fn judging_moved(queued: &Queued<'_>, pr_files: &[String]) -> Option<QueueVerdict> {
        let moved: Vec<&str> = (queued.added.iter())
            .filter(|path| queued.judging.contains(path))
            .map(String::as_str)
            .collect();
        if moved.is_empty() {
            return None;
        }
        let files: BTreeSet<String> = pr_files.iter().cloned().collect();
        Some(QueueVerdict::Rerun {
            files: files.into_iter().collect(),
            note: format!(
                "merge queue: #{} passed at {}, but the queue changes {}, which judge it: everything it changes runs again on the merge commit",
                queued.number,
                short(queued),
                moved.join(", ")
            ),
        })
    }

    /// The PR passed on its head, and `overlap` is what its plan and the queue's both select.
    fn of_overlap(queued: &Queued<'_>, overlap: Overlap) -> QueueVerdict {
        let number = queued.number;
        let short = short(queued);
        let count = queued.added.len();
        let plural = if count == 1 { "" } else { "s" };
        if overlap.is_empty() {
            return QueueVerdict::Holds(format!(
                "#{number} passed at {short}; the queue adds {count} path{plural}, none in the scope it was tested for"
            ));
        }
        let mut what: Vec<String> = overlap.models.iter().cloned().collect();
        if overlap.common {
            what.push("the common checks".to_owned());
        }
        QueueVerdict::Rerun {
            files: overlap.paths.into_iter().collect(),
            note: format!(
                "merge queue: #{number} passed at {short}, but the queue adds {count} path{plural} that touch what it was tested for: {} run again on the merge commit",
                what.join(", ")
            ),
        }
    }
}

/// The PR's head, short.
fn short<'a>(queued: &Queued<'a>) -> &'a str {
    crate::git::short_sha(queued.pr_head)
}

#[cfg(test)]
mod tests;
