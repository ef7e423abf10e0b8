//! Who and what may start a run: the trigger's decisions, made from an event payload and the
//! facts GitHub gave about it (the sender's access, the PR as read again, its statuses), with
//! no call of its own.
//!
//! A run starts from a `pull_request_target` event `labeled` with the trigger label (compared
//! as GitHub's `if:` compares it: case-insensitively), a `workflow_dispatch` with a PR number
//! and the head SHA the maintainer expects, the "Re-run" button of prgate's check run (a
//! `check_run` `requested_action`, like a dispatch of its SHA), or a merge queue's
//! `merge_group` `checks_requested`. A `check_suite` event starts nothing. Whoever sent any
//! event but a merge queue's must have GitHub's `write` or `admin` permission, and a bot may not
//! (only someone with write access can add a PR to the queue). After the label is gone the
//! PR must still be open and at the expected head, before and after its files are read. A
//! queued PR's own result counts only when prgate posted it. A label that accepts something
//! the verdict would fail (`accept-narrowing`) counts only when whoever last added it has that
//! same access and is not the PR's author ([`accepting_label_refusal`]): GitHub lets triage
//! label, and an author must not accept their own PR's narrowing.
//!
//! What it leaves to others: reading the PR, the sender's access, the open PRs of a SHA and the
//! statuses ([`crate::GitHub`]), removing the label and saying a refusal on the PR (the binary's
//! `trigger`), and what a merge commit must run again (`prgate_scope::queue`).

use crate::event::{Event, EventCheckRun, Login, MergeGroup, normal_sha};
use crate::pin::{Pinned, QueuePin};
use crate::{Access, CommitStatus, GitHubError, PrFiles, PullRequest, Result};

/// What an event asks for, before anyone's access is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// No run: why.
    Refuse(String),
    /// A merge queue's commit: pinned to it, with the PR's facts ([`queue_pin`]).
    Queue(QueueRequest),
    /// The check run's "Re-run" button on a SHA whose PR the event does not name: the open PR
    /// whose head it is ([`rerun_of`]).
    RerunOfHead(String),
    /// A run of a PR at an expected head.
    Run(RunRequest),
}

/// A run of PR `number` at the expected head `sha`, as the event asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRequest {
    pub number: u64,
    pub sha: String,
    /// The label as it was added (`Run-CI`), when a label asked: it is removed before anything
    /// else happens on the PR.
    pub label: Option<String>,
}

/// A merge queue's `checks_requested`: the PR, its own head, and the queue's commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRequest {
    pub number: u64,
    pub pr_head: String,
    /// The queue's merge commit.
    pub sha: String,
    /// The queue's base.
    pub base_sha: String,
    /// The branch the queue merges into (`main`).
    pub base_ref: String,
    /// The queue's branch, `refs/heads/gh-readonly-queue/<base>/pr-<N>-<head>`.
    pub head_ref: String,
}

/// What `event` asks for, with `label` the label that starts a run. An event that is not what
/// GitHub sends (a SHA that is not 40 hex digits, a dispatch without its inputs) is an error.
pub fn request(event: &Event, label: &str) -> Result<Request> {
    let action = event.action.as_deref();
    if let Some(group) = &event.merge_group {
        return queue_request(group, action);
    }
    if let Some(check) = &event.check_run {
        return rerun_request(event, check);
    }
    if let Some(pr) = &event.pull_request {
        if action != Some("labeled") {
            return Ok(Request::Refuse(format!(
                "the event is '{}', not 'labeled'",
                action.unwrap_or("none")
            )));
        }
        let name = event.label.as_ref().map(|label| label.name.as_str()).unwrap_or_default();
        // As the workflow's `if:` compares them: `Run-CI` is `run-ci`.
        if name.to_lowercase() != label.to_lowercase() {
            return Ok(Request::Refuse(format!("the label added is '{name}', not '{label}'")));
        }
        let sha = normal_sha(&pr.head.sha).ok_or_else(|| {
            invalid(format!("the event's head SHA '{}' is not 40 hex digits", pr.head.sha))
        })?;
        return Ok(Request::Run(RunRequest {
            number: pr.number,
            sha,
            label: Some(name.to_owned()),
        }));
    }
    if let Some(inputs) = &event.inputs {
        let number = inputs
            .pr_number()
            .ok_or_else(|| invalid("the dispatch has no PR number in inputs.pr"))?;
        let sha = inputs.sha.as_deref().and_then(normal_sha).ok_or_else(|| {
            invalid("the dispatch needs the expected head SHA (40 hex digits) in inputs.sha")
        })?;
        return Ok(Request::Run(RunRequest { number, sha, label: None }));
    }
    if event.check_suite.is_some() {
        return Ok(Request::Refuse(format!(
            "the check_suite event is '{}': prgate starts from its label, a dispatch or its check run's Re-run button, not from a check suite",
            action.unwrap_or("none")
        )));
    }
    Err(invalid(
        "the event is neither a pull_request_target, a workflow_dispatch, a merge_group nor a check_run",
    ))
}

/// The check run's "Re-run" button: its SHA, and its PR when the event names one.
fn rerun_request(event: &Event, check: &EventCheckRun) -> Result<Request> {
    let identifier = event.requested_action.as_ref().map(|action| action.identifier.as_str());
    if event.action.as_deref() != Some("requested_action")
        || identifier != Some(crate::RERUN_ACTION)
    {
        return Ok(Request::Refuse(format!(
            "the check_run event is '{}' ({}), not prgate's re-run button",
            event.action.as_deref().unwrap_or("none"),
            identifier.unwrap_or("no action")
        )));
    }
    let sha = normal_sha(&check.head_sha).ok_or_else(|| {
        invalid(format!("the check run's head SHA '{}' is not 40 hex digits", check.head_sha))
    })?;
    Ok(match check.pull_requests.first() {
        Some(pr) => Request::Run(RunRequest { number: pr.number, sha, label: None }),
        None => Request::RerunOfHead(sha),
    })
}

/// The re-run of `sha` given the open PRs whose head it is (`GitHub::open_pulls_of`): of the
/// first; `None` when there is none ([`no_open_pull`] says so).
pub fn rerun_of(sha: &str, open_pulls: &[u64]) -> Option<RunRequest> {
    let &number = open_pulls.first()?;
    Some(RunRequest { number, sha: sha.to_owned(), label: None })
}

/// Why the re-run of `sha` starts nothing: no open PR has that head.
pub fn no_open_pull(sha: &str) -> String {
    format!("no open pull request has the head {sha}")
}

/// A `merge_group` event: only `checks_requested` asks for a run.
fn queue_request(group: &MergeGroup, action: Option<&str>) -> Result<Request> {
    if action != Some("checks_requested") {
        return Ok(Request::Refuse(format!(
            "the merge_group event is '{}', not 'checks_requested'",
            action.unwrap_or("none")
        )));
    }
    let (number, pr_head) = group.pr_and_head()?;
    let sha = normal_sha(&group.head_sha)
        .ok_or_else(|| invalid(format!("the merge group's head SHA '{}'", group.head_sha)))?;
    let base_sha = normal_sha(&group.base_sha)
        .ok_or_else(|| invalid(format!("the merge group's base SHA '{}'", group.base_sha)))?;
    Ok(Request::Queue(QueueRequest {
        number,
        pr_head,
        sha,
        base_sha,
        base_ref: group.base_ref.trim_start_matches("refs/heads/").to_owned(),
        head_ref: group.head_ref.clone(),
    }))
}

/// The pin of a merge queue's run: the queue's commits, the PR's title, labels and files.
pub fn queue_pin(queue: QueueRequest, pr: &PullRequest, files: &PrFiles) -> Pinned {
    Pinned {
        number: queue.number,
        sha: queue.sha,
        title: pr.title.clone(),
        base_ref: queue.base_ref,
        base_sha: queue.base_sha,
        triggered_by: "the merge queue".to_owned(),
        files_truncated: files.truncated,
        merge_group: Some(QueuePin {
            pr_head: queue.pr_head,
            head_ref: queue.head_ref,
            note: None,
        }),
        labels: pr.labels.iter().map(|label| label.name.clone()).collect(),
        notes: Vec::new(),
    }
}

/// Who sent the event: an event without a sender's login is not what GitHub sends.
pub fn sender(event: &Event) -> Result<&Login> {
    event
        .sender
        .as_ref()
        .filter(|sender| !sender.login.is_empty())
        .ok_or_else(|| invalid("the event names no sender"))
}

/// Why a bot may not start a run: it is no collaborator (the permission endpoint answers 404),
/// so it is judged by its type. `None` for anyone else: their access decides ([`refusal`]).
pub fn bot_refusal(sender: &Login) -> Option<String> {
    sender.is_bot().then(|| {
        format!(
            "{} is a bot; a maintainer (write, maintain or admin) must start runs",
            sender.login
        )
    })
}

/// Why `login`, with `access`, may not start a run; `None` when they may.
pub fn refusal(login: &str, access: &Access) -> Option<String> {
    (!access.allowed).then(|| {
        format!(
            "{login} has the {} role; starting a run needs write, maintain or admin (GitHub's write or admin permission)",
            access.role
        )
    })
}

/// Why the label `label` on a PR does not count as a maintainer's acceptance: who added it
/// could not be read (`adder`'s error), nobody is named as having added it, or they are the
/// PR's `author`, or their `access` is not write, maintain or admin. `None` when it counts.
pub fn accepting_label_refusal(
    label: &str,
    adder: std::result::Result<Option<&str>, String>,
    author: Option<&str>,
    access: Option<&Access>,
) -> Option<String> {
    let not_counted = |why: String| format!("the {label} label does not count: {why}");
    let adder = match adder {
        Err(error) => return Some(not_counted(format!("who added it could not be read: {error}"))),
        Ok(None) => return Some(not_counted("GitHub names nobody who added it".to_owned())),
        Ok(Some(adder)) => adder,
    };
    if author.is_some_and(|author| author.eq_ignore_ascii_case(adder)) {
        return Some(not_counted(format!(
            "{adder}, the PR's author, added it; another maintainer must accept"
        )));
    }
    match access {
        Some(access) if access.allowed => None,
        Some(access) => Some(not_counted(format!(
            "{adder} added it with the {} role; accepting needs write, maintain or admin",
            access.role
        ))),
        None => Some(not_counted(format!("{adder}'s access could not be read"))),
    }
}

/// Why the label `label` on a PR whose head is `head` does not count there although a
/// maintainer added it: an acceptance is of the commit it was given for, and prgate records it
/// there as the status `context` (`prgate accept`, [`acceptance_request`]). None on `head`
/// (a push since, or the record failed), one posted by someone other than prgate (`ours`),
/// or statuses that could not be read (`statuses`' error): it does not count. `None` when it
/// does.
pub fn unrecorded_acceptance(
    label: &str,
    head: &str,
    statuses: std::result::Result<&[CommitStatus], String>,
    context: &str,
    ours: Option<&str>,
) -> Option<String> {
    let not_counted = |why: String| {
        format!(
            "the {label} label does not count: {why}; a maintainer accepts the head they saw, so after a push they remove the label and add it again"
        )
    };
    let statuses = match statuses {
        Ok(statuses) => statuses,
        Err(error) => {
            return Some(not_counted(format!("the statuses of {head} could not be read: {error}")));
        }
    };
    match own_result(statuses, context, ours) {
        OwnResult::Passed => None,
        OwnResult::NotPassed(state) if state == "none" => Some(not_counted(format!(
            "it was not given for {head} (that commit has no `{context}` status from prgate)"
        ))),
        OwnResult::NotPassed(state) => {
            Some(not_counted(format!("the `{context}` status of {head} is {state}")))
        }
    }
}

/// What a `labeled` event adding the label `label` asks to record (`prgate accept`): the PR
/// and the head the maintainer saw; or why it records nothing (another label, another event).
pub fn acceptance_request(
    event: &Event,
    label: &str,
) -> Result<std::result::Result<RunRequest, String>> {
    Ok(match request(event, label)? {
        Request::Run(run) if run.label.is_some() => Ok(run),
        Request::Refuse(reason) => Err(reason),
        _ => Err(format!(
            "the {label} label is recorded from the pull_request_target event that adds it, not from another event"
        )),
    })
}

/// Why an acceptance given at `seen` on PR `number` is not recorded: the PR is closed or
/// merged, or its head moved as the label was added (what was accepted is no longer what the
/// PR would merge). `None` when it is recorded.
pub fn acceptance_pr_refusal(number: u64, seen: &str, pr: &PullRequest) -> Option<String> {
    Some(match not_open_at(seen, pr)? {
        NotOpenAt::Closed(why) => format!("#{number} is {why}; only an open PR's head is accepted"),
        NotOpenAt::Moved(head) => format!(
            "the head of #{number} moved from {seen} to {head} as the label was added; the acceptance was of {seen}: remove the label and add it again to accept {head}"
        ),
    })
}

/// Why PR `number`, read again once the label is gone, may not run at `expected_sha`: it is
/// closed or merged, or its head moved. `None` when it may.
pub fn pr_refusal(number: u64, expected_sha: &str, pr: &PullRequest) -> Option<String> {
    Some(match not_open_at(expected_sha, pr)? {
        NotOpenAt::Closed(why) => format!("#{number} is {why}; runs are for open pull requests"),
        NotOpenAt::Moved(head) => format!(
            "the head of #{number} moved from {expected_sha} to {head}; a maintainer must start the run again"
        ),
    })
}

/// How a PR is not open at an expected head.
enum NotOpenAt {
    /// Closed or merged: which.
    Closed(&'static str),
    /// Open, at this other head.
    Moved(String),
}

/// How `pr` is not open at `expected`; `None` when it is.
fn not_open_at(expected: &str, pr: &PullRequest) -> Option<NotOpenAt> {
    if let Some(why) = pr.not_open() {
        return Some(NotOpenAt::Closed(why));
    }
    let head = head_of(pr);
    (head != expected).then_some(NotOpenAt::Moved(head))
}

/// Why PR `number`, read once more after its files, may not run: the files are the head's at
/// the time they were listed, and it moved since (the plan could come from another commit than
/// the one tested). `None` when it is still at `expected_sha`.
pub fn moved_while_listed(number: u64, expected_sha: &str, again: &PullRequest) -> Option<String> {
    let head = head_of(again);
    (head != expected_sha).then(|| {
        format!(
            "the head of #{number} moved from {expected_sha} to {head} while its files were read; a maintainer must start the run again"
        )
    })
}

/// The pin of the run `request` asked for, started by `sender`: `pr` as read after the label,
/// `again` as read after its `files` (its labels are the newest).
pub fn run_pin(
    request: &RunRequest,
    pr: &PullRequest,
    again: &PullRequest,
    files: &PrFiles,
    sender: &str,
) -> Pinned {
    Pinned {
        number: request.number,
        sha: request.sha.clone(),
        title: pr.title.clone(),
        base_ref: pr.base.reference.clone(),
        base_sha: as_written(&pr.base.sha),
        triggered_by: sender.to_owned(),
        files_truncated: files.truncated,
        merge_group: None,
        labels: again.labels.iter().map(|label| label.name.clone()).collect(),
        notes: Vec::new(),
    }
}

/// A queued PR's own result on its head, as the merge queue may keep it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnResult {
    /// prgate posted `success` there.
    Passed,
    /// No passing result of prgate's: the state in words (`none`, `failure`, `posted by
    /// someone, not prgate`).
    NotPassed(String),
}

/// The result of `context` among a head's `statuses` (newest first), counting only what `ours`
/// posted: anyone with `statuses: write` can post a status of that name, and a login that
/// cannot be told makes no status ours.
pub fn own_result(statuses: &[CommitStatus], context: &str, ours: Option<&str>) -> OwnResult {
    let result = statuses.iter().find(|status| status.context == context);
    let passed = result.is_some_and(|status| {
        status.state == "success" && ours.is_some() && status.creator() == ours
    });
    if passed {
        return OwnResult::Passed;
    }
    OwnResult::NotPassed(match result {
        Some(status) if status.creator() != ours => {
            format!("posted by {}, not prgate", status.creator().unwrap_or("nobody"))
        }
        Some(status) => status.state.clone(),
        None => "none".to_owned(),
    })
}

/// A PR's head as git writes it (as GitHub sent it, when that is not a SHA).
fn head_of(pr: &PullRequest) -> String {
    as_written(&pr.head.sha)
}

/// A SHA as git writes it, or as GitHub sent it when it is not one.
fn as_written(sha: &str) -> String {
    normal_sha(sha).unwrap_or_else(|| sha.to_owned())
}

fn invalid(text: impl Into<String>) -> GitHubError {
    GitHubError::Event(text.into())
}

#[cfg(test)]
mod tests;
