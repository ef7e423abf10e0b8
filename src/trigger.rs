//! `prgate trigger`: decides, from a GitHub event, whether a run starts and on which commit.
//!
//! A run starts from a `pull_request_target` event `labeled` with the trigger label (compared
//! as GitHub's `if:` compares it: case-insensitively), a `workflow_dispatch` with a PR number
//! and the head SHA the maintainer expects, the "Re-run" button of prgate's check run (a
//! `check_run` `requested_action`, like a dispatch of its SHA), or a merge queue's
//! `merge_group` (`queue`).
//! Whoever added the label must have GitHub's `write` or `admin` permission (maintain and custom
//! roles based on them included; triage can label too, and may not); a bot may not. The label
//! is removed, the head SHA is pinned from the event, and the PR is read again after the label
//! is gone: if its head moved, or it is closed or merged, the run stops, so a later push always
//! needs a maintainer again. Once the label is gone, no failure is silent: a refusal on the PR
//! (a labeller without the role included) is said in a comment, and an error also as the
//! `error` status on the expected SHA. The run only ever reports on the pinned SHA. A
//! `check_suite` event (GitHub's "Re-run all checks") starts nothing: exit 1, "no run".

pub(crate) mod queue;

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::Args;

use prgate_github::GitHub;
use prgate_github::event::{Event, EventCheckRun, normal_sha};
use prgate_github::pin::{Pinned, write_pin};

/// Decide from a GitHub event whether a run starts, pin the PR's head SHA, and write the PR's
/// files (`files.txt`, for `prgate plan --files`) and the pinned facts (`trigger.json`).
///
/// Exit status: 0 the run starts, 1 it does not (the reason on stderr), 2 an error. The token
/// is read from GITHUB_TOKEN; the API from GITHUB_API_URL (default https://api.github.com).
#[derive(Debug, Args)]
pub(crate) struct TriggerArgs {
    /// The event payload (GITHUB_EVENT_PATH).
    #[arg(long, value_name = "FILE")]
    event: PathBuf,
    /// The repository, owner/name (GITHUB_REPOSITORY).
    #[arg(long, value_name = "OWNER/NAME", env = "GITHUB_REPOSITORY")]
    repository: String,
    /// The label that starts a run.
    #[arg(long, default_value = "run-ci")]
    label: String,
    /// Where to write trigger.json and files.txt.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
    /// The login our comments are written by, for the comment of a refusal [default: the
    /// token's user; an App's installation token: GraphQL's viewer, e.g. `my-app[bot]`].
    #[arg(long, value_name = "LOGIN", env = "PRGATE_BOT_LOGIN")]
    bot_login: Option<String>,
}

/// Whether a run starts.
pub(crate) enum Decision {
    Start(Box<Pinned>, Vec<String>),
    Refuse(String),
}

pub(crate) fn run(args: &TriggerArgs) -> anyhow::Result<bool> {
    let event: Event = crate::files::read_json(&args.event, "event")?;
    let (runtime, github) = prgate_github::connect(&args.repository)?;
    github.remember_login(args.bot_login.as_deref());
    let decided = runtime.block_on(decide(&github, &event, &args.label));
    match decided.with_context(|| format!("deciding from the event {}", args.event.display()))? {
        Decision::Refuse(reason) => {
            eprintln!("prgate: no run: {reason}");
            Ok(false)
        }
        Decision::Start(pinned, files) => {
            write_pin(&args.out, &pinned, &files)?;
            let mut stdout = std::io::stdout().lock();
            writeln!(
                stdout,
                "run #{} at {} (started by {})",
                pinned.number, pinned.sha, pinned.triggered_by
            )?;
            if pinned.files_truncated {
                writeln!(
                    stdout,
                    "the PR has more files than the API lists: plan with --files-truncated"
                )?;
            }
            Ok(true)
        }
    }
}

/// The hidden marker of the comment that says why a run did not start (one, edited in place;
/// never the verdict's comment, which it would replace).
pub(crate) const REFUSAL_MARKER: &str = "<!-- prgate:amd-pr-test:not-started -->";

pub(crate) async fn decide(
    github: &GitHub,
    event: &Event,
    label: &str,
) -> anyhow::Result<Decision> {
    if let Some(group) = &event.merge_group {
        return queue::decide(github, group, event.action.as_deref()).await;
    }
    let sender = event.sender.as_ref().map(|sender| sender.login.clone()).unwrap_or_default();
    let (number, expected_sha, labeled) = match (
        &event.check_run,
        &event.pull_request,
        &event.inputs,
    ) {
        (Some(check), _, _) => match rerun_target(github, event, check).await? {
            Ok((number, sha)) => (number, sha, false),
            Err(reason) => return Ok(Decision::Refuse(reason)),
        },
        (None, pr, inputs) => match (pr, inputs) {
            (Some(pr), _) => {
                if event.action.as_deref() != Some("labeled") {
                    return Ok(Decision::Refuse(format!(
                        "the event is '{}', not 'labeled'",
                        event.action.as_deref().unwrap_or("none")
                    )));
                }
                let name =
                    event.label.as_ref().map(|label| label.name.as_str()).unwrap_or_default();
                // As the workflow's `if:` compares them: `Run-CI` is `run-ci`.
                if name.to_lowercase() != label.to_lowercase() {
                    return Ok(Decision::Refuse(format!(
                        "the label added is '{name}', not '{label}'"
                    )));
                }
                let Some(sha) = normal_sha(&pr.head.sha) else {
                    bail!("the event's head SHA '{}' is not 40 hex digits", pr.head.sha);
                };
                (pr.number, sha, true)
            }
            (None, Some(inputs)) => {
                let Some(number) = inputs.pr_number() else {
                    bail!("the dispatch has no PR number in inputs.pr")
                };
                let Some(sha) = inputs.sha.as_deref().and_then(normal_sha) else {
                    bail!("the dispatch needs the expected head SHA (40 hex digits) in inputs.sha");
                };
                (number, sha, false)
            }
            (None, None) if event.check_suite.is_some() => {
                return Ok(Decision::Refuse(format!(
                    "the check_suite event is '{}': prgate starts from its label, a dispatch or its check run's Re-run button, not from a check suite",
                    event.action.as_deref().unwrap_or("none")
                )));
            }
            (None, None) => bail!(
                "the event is neither a pull_request_target, a workflow_dispatch, a merge_group nor a check_run"
            ),
        },
    };
    if sender.is_empty() {
        bail!("the event names no sender");
    }
    let bot = event.sender.as_ref().is_some_and(prgate_github::event::Login::is_bot);
    let refusal = if bot {
        // A bot is no collaborator (the permission endpoint answers 404): judged by its type.
        Some(format!("{sender} is a bot; a maintainer (write, maintain or admin) must start runs"))
    } else {
        let access = github.access(&sender).await?;
        (!access.allowed).then(|| {
            format!(
                "{sender} has the {} role; starting a run needs write, maintain or admin (GitHub's write or admin permission)",
                access.role
            )
        })
    };
    if labeled {
        // The label as it was added (`Run-CI`), not as configured.
        let added = event.label.as_ref().map_or(label, |added| added.name.as_str());
        github.remove_label(number, added).await?;
    }
    if let Some(reason) = refusal {
        // The label is gone: the labeller learns why on the PR, not only in the job's log.
        if labeled {
            leave_word(github, number, None, &format!("prgate did not start a run: {reason}."))
                .await;
        }
        return Ok(Decision::Refuse(reason));
    }
    // The label is gone: from here on, no failure and no refusal may go unsaid on the PR.
    match pin_after_label(github, number, &expected_sha, sender).await {
        Ok(Decision::Refuse(reason)) => {
            leave_word(github, number, None, &format!("prgate did not start a run: {reason}."))
                .await;
            Ok(Decision::Refuse(reason))
        }
        Ok(decision) => Ok(decision),
        Err(error) => {
            let problem = format!("{error:#}");
            leave_word(
                github,
                number,
                Some(&expected_sha),
                &format!(
                    "prgate could not start the run on {expected_sha}: {problem}\n\nThe `{label}` label was removed: add it again (or dispatch the workflow) to retry."
                ),
            )
            .await;
            Err(error)
        }
    }
}

/// The PR and SHA of a check run's "Re-run" button, like a dispatch's: the check run's SHA,
/// and its PR (from the event, else the open PR whose head it is). `Err` is a refusal.
async fn rerun_target(
    github: &GitHub,
    event: &Event,
    check: &EventCheckRun,
) -> anyhow::Result<Result<(u64, String), String>> {
    let identifier = event.requested_action.as_ref().map(|action| action.identifier.as_str());
    if event.action.as_deref() != Some("requested_action")
        || identifier != Some(prgate_github::RERUN_ACTION)
    {
        return Ok(Err(format!(
            "the check_run event is '{}' ({}), not prgate's re-run button",
            event.action.as_deref().unwrap_or("none"),
            identifier.unwrap_or("no action")
        )));
    }
    let Some(sha) = normal_sha(&check.head_sha) else {
        bail!("the check run's head SHA '{}' is not 40 hex digits", check.head_sha);
    };
    let number = match check.pull_requests.first() {
        Some(pr) => pr.number,
        None => match github.open_pulls_of(&sha).await?.first() {
            Some(number) => *number,
            None => return Ok(Err(format!("no open pull request has the head {sha}"))),
        },
    };
    Ok(Ok((number, sha)))
}

/// The PR read again now that the label is gone: still open, still at the expected head, its
/// files, and its head once more after them.
async fn pin_after_label(
    github: &GitHub,
    number: u64,
    expected_sha: &str,
    sender: String,
) -> anyhow::Result<Decision> {
    let pr = github.pull_request(number).await?;
    if let Some(why) = pr.not_open() {
        return Ok(Decision::Refuse(format!(
            "#{number} is {why}; runs are for open pull requests"
        )));
    }
    let head = normal_sha(&pr.head.sha).unwrap_or_else(|| pr.head.sha.clone());
    if head != expected_sha {
        return Ok(Decision::Refuse(format!(
            "the head of #{number} moved from {expected_sha} to {head}; a maintainer must start the run again"
        )));
    }
    let files = github.pull_request_files(&pr).await?;
    // The files are the head's at the time they were listed: make sure it is still the pinned
    // one, or the plan could come from another commit than the one tested.
    let again = github.pull_request(number).await?;
    let head = normal_sha(&again.head.sha).unwrap_or_else(|| again.head.sha.clone());
    if head != expected_sha {
        return Ok(Decision::Refuse(format!(
            "the head of #{number} moved from {expected_sha} to {head} while its files were read; a maintainer must start the run again"
        )));
    }
    let pinned = Pinned {
        number,
        sha: expected_sha.to_owned(),
        title: pr.title.clone(),
        base_ref: pr.base.reference.clone(),
        base_sha: normal_sha(&pr.base.sha).unwrap_or_else(|| pr.base.sha.clone()),
        triggered_by: sender,
        files_truncated: files.truncated,
        merge_group: None,
        labels: again.labels.iter().map(|label| label.name.clone()).collect(),
    };
    Ok(Decision::Start(Box::new(pinned), files.paths))
}

/// Says `text` on PR `number` in prgate's one "not started" comment and, with `sha`, as the
/// `error` status there. Never fails: what cannot be posted is said on stderr.
pub(crate) async fn leave_word(github: &GitHub, number: u64, sha: Option<&str>, text: &str) {
    eprintln!("prgate: {text}");
    if let Some(sha) = sha {
        let description = prgate_report::status::fit_description(&prgate_report::escape::terminal(
            &format!("prgate could not start: {text}"),
        ));
        let context = prgate_report::status::DEFAULT_CONTEXT;
        if let Err(error) = github.set_status(sha, "error", &description, context, None).await {
            eprintln!("prgate: could not post the error status either: {error:#}");
        }
    }
    let body = format!(
        "{REFUSAL_MARKER}\n{}\n",
        prgate_report::escape::markdown_text(text, prgate_report::escape::MarkdownPlace::Paragraph)
    );
    let posted = match github.comment_login(None).await {
        Ok(login) => github.upsert_comment(number, REFUSAL_MARKER, &login, &body).await.map(drop),
        Err(error) => Err(error),
    };
    if let Err(error) = posted {
        eprintln!("prgate: could not comment on #{number} either: {error:#}");
    }
}
