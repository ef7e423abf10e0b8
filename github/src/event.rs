//! GitHub's webhook payloads, as far as prgate reads them: the event that may start a run
//! (`pull_request_target` `labeled`, `workflow_dispatch`, a `check_run`'s `requested_action`,
//! a `merge_group`, a `check_suite`), and a merged PR's `closed` event for the history ledger
//! (what it reports: [`MergeEvent::merge`]).
//! Serde shapes of GitHub's JSON, plus the facts of GitHub's own naming: a SHA as git writes
//! it, a dispatch's PR number as a maintainer types it, a merge queue's branch name. Whether a
//! run starts is [`crate::trigger`]'s decision, not this module's.

use crate::{GitHubError, Result};
use serde::Deserialize;

/// The parts of an event payload prgate reads.
#[derive(Debug, Deserialize)]
pub struct Event {
    pub action: Option<String>,
    pub label: Option<Named>,
    pub sender: Option<Login>,
    pub pull_request: Option<EventPullRequest>,
    pub inputs: Option<DispatchInputs>,
    pub merge_group: Option<MergeGroup>,
    /// A `check_run` event: the "Re-run" button of prgate's check run.
    pub check_run: Option<EventCheckRun>,
    pub requested_action: Option<RequestedAction>,
    /// A `check_suite` event (GitHub's "Re-run all checks" sends `rerequested`): never a run.
    pub check_suite: Option<serde::de::IgnoredAny>,
}

impl Event {
    /// A `workflow_dispatch` of PR `pr` at the expected head `sha`, by `actor`.
    pub fn dispatch(pr: u64, sha: &str, actor: &str) -> Event {
        Event {
            action: None,
            label: None,
            sender: Some(Login { login: actor.to_owned(), kind: None }),
            pull_request: None,
            merge_group: None,
            check_run: None,
            requested_action: None,
            check_suite: None,
            inputs: Some(DispatchInputs {
                pr: Some(serde_json::Value::from(pr)),
                sha: Some(sha.to_owned()),
            }),
        }
    }
}

/// A `check_run` of the event: the check run's SHA and the PRs GitHub links it to.
#[derive(Debug, Deserialize)]
pub struct EventCheckRun {
    pub head_sha: String,
    #[serde(default)]
    pub pull_requests: Vec<Numbered>,
}

/// A pull request as a check run names it: its number only.
#[derive(Debug, Deserialize)]
pub struct Numbered {
    pub number: u64,
}

/// The button of a check run that was pressed.
#[derive(Debug, Deserialize)]
pub struct RequestedAction {
    pub identifier: String,
}

/// A label as the event names it.
#[derive(Debug, Deserialize)]
pub struct Named {
    pub name: String,
}

/// The event's sender (and a PR's author, an issue event's actor).
#[derive(Debug, Clone, Deserialize)]
pub struct Login {
    pub login: String,
    /// `User`, `Bot` or `Organization`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

impl Login {
    /// Whether GitHub says the sender is a bot (an App, or a bot account).
    pub fn is_bot(&self) -> bool {
        self.kind.as_deref() == Some("Bot")
    }
}

/// The pull request of a `pull_request_target` event.
#[derive(Debug, Deserialize)]
pub struct EventPullRequest {
    pub number: u64,
    pub head: EventRef,
}

/// A commit the event names.
#[derive(Debug, Deserialize)]
pub struct EventRef {
    pub sha: String,
}

/// A `workflow_dispatch`'s inputs: the PR and the head SHA the maintainer expects.
#[derive(Debug, Deserialize)]
pub struct DispatchInputs {
    pub pr: Option<serde_json::Value>,
    pub sha: Option<String>,
}

impl DispatchInputs {
    /// The PR's number: a number, or text as a maintainer types it (`12`, `#12`).
    pub fn pr_number(&self) -> Option<u64> {
        match &self.pr {
            Some(serde_json::Value::Number(number)) => number.as_u64(),
            Some(serde_json::Value::String(text)) => {
                text.trim().trim_start_matches('#').parse().ok()
            }
            _ => None,
        }
    }
}

/// The `merge_group` of the event payload.
#[derive(Debug, Deserialize)]
pub struct MergeGroup {
    pub head_sha: String,
    pub head_ref: String,
    pub base_sha: String,
    pub base_ref: String,
}

impl MergeGroup {
    /// The PR's number and head from the queue's branch,
    /// `refs/heads/gh-readonly-queue/<base>/pr-<N>-<head SHA>`.
    pub fn pr_and_head(&self) -> Result<(u64, String)> {
        queue_branch(&self.head_ref)
    }
}

/// The PR's number and head from a merge queue's branch name `head_ref`.
pub fn queue_branch(head_ref: &str) -> Result<(u64, String)> {
    let last = head_ref.rsplit('/').next().unwrap_or_default();
    let parsed = last
        .strip_prefix("pr-")
        .and_then(|rest| rest.split_once('-'))
        .and_then(|(number, sha)| Some((number.parse::<u64>().ok()?, normal_sha(sha)?)));
    match parsed {
        Some(found) if head_ref.contains("/gh-readonly-queue/") => Ok(found),
        _ => Err(GitHubError::Event(format!(
            "the merge group's head_ref '{head_ref}' is not a merge queue branch (refs/heads/gh-readonly-queue/<base>/pr-<N>-<sha>)"
        ))),
    }
}

/// The parts of a merged PR's `closed` event (`pull_request_target` or `pull_request`) that
/// the history ledger reads.
#[derive(Debug, Deserialize)]
pub struct MergeEvent {
    pub pull_request: MergedPullRequest,
}

/// The pull request of a `closed` event.
#[derive(Debug, Deserialize)]
pub struct MergedPullRequest {
    pub number: u64,
    #[serde(default)]
    pub title: String,
    pub html_url: Option<String>,
    /// False when the PR was closed without a merge.
    #[serde(default)]
    pub merged: bool,
    pub merge_commit_sha: Option<String>,
    pub head: EventRef,
}

/// A merged PR, as its `closed` event names it: its commits full SHAs, lowercase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merge {
    pub number: u64,
    pub title: String,
    pub url: Option<String>,
    /// The commit the merge put on the branch.
    pub merge_commit: String,
    /// The PR's head commit when it merged.
    pub head_commit: String,
}

impl MergeEvent {
    /// The merge the event reports; `None` for a PR closed without one. An error names a
    /// merged PR whose event names no merge commit, or a commit that is not a full SHA.
    pub fn merge(self) -> Result<Option<Merge>> {
        let pr = self.pull_request;
        if !pr.merged {
            return Ok(None);
        }
        let merge = pr.merge_commit_sha.ok_or_else(|| {
            GitHubError::Event(format!(
                "the event of PR #{} says it merged but names no merge_commit_sha",
                pr.number
            ))
        })?;
        Ok(Some(Merge {
            number: pr.number,
            merge_commit: full_sha(&merge, "merge_commit_sha")?,
            head_commit: full_sha(&pr.head.sha, "head.sha")?,
            title: pr.title,
            url: pr.html_url,
        }))
    }
}

/// `sha` as a full commit SHA, lowercase ([`normal_sha`]); an error names it as `what` (a
/// payload's field, a flag).
pub fn full_sha(sha: &str, what: &str) -> Result<String> {
    normal_sha(sha).ok_or_else(|| {
        GitHubError::Event(format!("{what} {sha:?} is not a full commit SHA (40 hex digits)"))
    })
}

/// A SHA as git writes it: 40 lowercase hex digits (GitHub accepts, and a maintainer may paste,
/// uppercase ones).
pub fn normal_sha(sha: &str) -> Option<String> {
    let sha = sha.trim();
    (sha.len() == 40 && sha.bytes().all(|byte| byte.is_ascii_hexdigit()))
        .then(|| sha.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_event_is_a_merge_with_full_commits_or_nothing() {
        let event = |merged: bool, merge: Option<&str>, head: &str| MergeEvent {
            pull_request: MergedPullRequest {
                number: 7,
                title: "[Fix] x: y".to_owned(),
                html_url: None,
                merged,
                merge_commit_sha: merge.map(str::to_owned),
                head: EventRef { sha: head.to_owned() },
            },
        };
        let (merge, head) = ("A".repeat(40), "b".repeat(40));
        let merged = event(true, Some(&merge), &head).merge().expect("a merge").expect("merged");
        assert_eq!((merged.number, merged.title.as_str()), (7, "[Fix] x: y"));
        assert_eq!((merged.merge_commit, merged.head_commit), ("a".repeat(40), head.clone()));
        assert_eq!(event(false, None, "not a sha").merge().expect("closed"), None);
        for (merge, head, problem) in [
            (
                None,
                head.as_str(),
                "the event of PR #7 says it merged but names no merge_commit_sha",
            ),
            (
                Some("abc"),
                head.as_str(),
                "merge_commit_sha \"abc\" is not a full commit SHA (40 hex digits)",
            ),
            (Some(merge.as_str()), "", "head.sha \"\" is not a full commit SHA (40 hex digits)"),
        ] {
            let error = event(true, merge, head).merge().expect_err(problem);
            assert_eq!(error.to_string(), problem);
        }
    }

    #[test]
    fn the_queue_branch_names_the_pr_and_its_head() {
        // The real payload's head_ref (octokit/webhooks, merge_group.json).
        let real =
            "refs/heads/gh-readonly-queue/main/pr-104-929f8209d40f77f4abc622a499c93a83babdbe64";
        assert_eq!(
            queue_branch(real).expect("a queue branch"),
            (104, "929f8209d40f77f4abc622a499c93a83babdbe64".to_owned())
        );
        let nested =
            "refs/heads/gh-readonly-queue/release/v2/pr-7-929F8209D40F77F4ABC622A499C93A83BABDBE64";
        assert_eq!(queue_branch(nested).expect("a queue branch").0, 7);
        for bad in ["refs/heads/main", "refs/heads/gh-readonly-queue/main/pr-x-abc", "pr-1-abc"] {
            assert!(queue_branch(bad).is_err(), "{bad}");
        }
    }
}
