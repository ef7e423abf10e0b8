//! `prgate trigger`: from a GitHub event, whether a run starts and on which commit.
//!
//! The decisions are `prgate_github::trigger`'s (which events ask for a run, the label compared
//! as GitHub's `if:` compares it, who may start one, the PR read again after the label): this
//! file makes GitHub's calls in the order they need, hands the answers over, and acts. The
//! label is removed before anything is said on the PR; from then on no failure is silent: a refusal on the PR (a labeller
//! without the role included) is said in a comment, and an error also as the `error` status on
//! the expected SHA. The run only ever reports on the pinned SHA. A merge queue's commit is
//! [`queue`]'s. Exit 1, "no run", for an event that starts nothing (a `check_suite`'s "Re-run
//! all checks" included).

pub(crate) mod accept;
pub(crate) mod queue;

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

use prgate_github::event::Event;
use prgate_github::pin::{Pinned, write_pin};
use prgate_github::trigger::{self, Request, RunRequest};
use prgate_github::{GitHub, PullRequest};
use prgate_report::not_started;

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
    #[arg(long, default_value = DEFAULT_LABEL)]
    label: String,
    /// Where to write trigger.json and files.txt.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
    /// The login our comments are written by, for the comment of a refusal [default: the
    /// token's user; an App's installation token: GraphQL's viewer, e.g. `my-app[bot]`].
    #[arg(long, value_name = "LOGIN", env = "PRGATE_BOT_LOGIN")]
    bot_login: Option<String>,
}

/// The label that starts a run unless `--label` names another (`prgate trigger`, `prgate ci`).
pub(crate) const DEFAULT_LABEL: &str = "run-ci";

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

/// What `event` decides, `label` being the label that starts a run: the calls to GitHub in
/// the order the decision needs them (`prgate_github::trigger` decides), the label removed, and
/// the refusal or failure said on the PR once it is gone.
pub(crate) async fn decide(
    github: &GitHub,
    event: &Event,
    label: &str,
) -> anyhow::Result<Decision> {
    let run = match trigger::request(event, label)? {
        Request::Run(run) => run,
        Request::Refuse(reason) => return Ok(Decision::Refuse(reason)),
        Request::Queue(queue) => return queue::decide(github, queue).await,
        Request::RerunOfHead(sha) => {
            match trigger::rerun_of(&sha, &github.open_pulls_of(&sha).await?) {
                Some(run) => run,
                None => return Ok(Decision::Refuse(trigger::no_open_pull(&sha))),
            }
        }
    };
    let sender = trigger::sender(event)?;
    let refusal = match trigger::bot_refusal(sender) {
        Some(refusal) => Some(refusal),
        None => trigger::refusal(&sender.login, &github.access(&sender.login).await?),
    };
    if let Some(added) = &run.label {
        github.remove_label(run.number, added).await?;
    }
    if let Some(reason) = refusal {
        // The label is gone: the labeller learns why on the PR, not only in the job's log.
        if run.label.is_some() {
            leave_word(github, run.number, None, &not_started::refused(&reason)).await;
        }
        return Ok(Decision::Refuse(reason));
    }
    after_label(github, &run, &sender.login, label).await
}

/// The pin once the label is gone: from here on, no failure and no refusal may go unsaid on
/// the PR (an error also as the `error` status on the expected SHA).
async fn after_label(
    github: &GitHub,
    run: &RunRequest,
    sender: &str,
    label: &str,
) -> anyhow::Result<Decision> {
    let number = run.number;
    match pin_after_label(github, run, sender).await {
        Ok(Decision::Refuse(reason)) => {
            leave_word(github, number, None, &not_started::refused(&reason)).await;
            Ok(Decision::Refuse(reason))
        }
        Ok(decision) => Ok(decision),
        Err(error) => {
            let text = not_started::failed(&run.sha, &format!("{error:#}"), label);
            leave_word(github, number, Some(&run.sha), &text).await;
            Err(error)
        }
    }
}

/// The PR read again now that the label is gone (still open, still at the expected head), its
/// files, and its head once more after them.
async fn pin_after_label(
    github: &GitHub,
    run: &RunRequest,
    sender: &str,
) -> anyhow::Result<Decision> {
    let pr = github.pull_request(run.number).await?;
    if let Some(reason) = trigger::pr_refusal(run.number, &run.sha, &pr) {
        return Ok(Decision::Refuse(reason));
    }
    let files = github.pull_request_files(&pr).await?;
    let again = github.pull_request(run.number).await?;
    if let Some(reason) = trigger::moved_while_listed(run.number, &run.sha, &again) {
        return Ok(Decision::Refuse(reason));
    }
    let mut pinned = trigger::run_pin(run, &pr, &again, &files, sender);
    vet_accepting_label(github, &mut pinned, &again).await;
    Ok(Decision::Start(Box::new(pinned), files.paths))
}

/// The `accept-narrowing` label of `pinned` counts only when a maintainer other than `pr`'s
/// author added it (`prgate_github::trigger::accepting_label_refusal` decides) and prgate
/// recorded it on the PR's head (`unrecorded_acceptance`, [`accept`]): one that does not is
/// taken off the pin, and why is in its notes (the plan's warnings show them).
pub(crate) async fn vet_accepting_label(github: &GitHub, pinned: &mut Pinned, pr: &PullRequest) {
    let label = prgate_gate::job::ACCEPT_NARROWING_LABEL;
    if !pinned.has_label(label) {
        return;
    }
    let adder = github.label_added_by(pinned.number, label).await;
    let adder = adder.as_ref().map(Option::as_deref).map_err(|error| format!("{error:#}"));
    let access = match adder {
        Ok(Some(login)) => github.access(login).await.ok(),
        _ => None,
    };
    let author = pr.user.as_ref().map(|user| user.login.as_str());
    let mut refusal = trigger::accepting_label_refusal(label, adder, author, access.as_ref());
    if refusal.is_none() {
        let head = pinned.pr_head();
        let statuses = github.statuses(head).await;
        let statuses = statuses.as_deref().map_err(|error| format!("{error:#}"));
        let ours = github.comment_login(None).await.ok();
        let context = prgate_report::status::acceptance_context(label);
        refusal = trigger::unrecorded_acceptance(label, head, statuses, &context, ours.as_deref());
    }
    if let Some(why) = refusal {
        eprintln!("prgate: {why}");
        pinned.drop_label(label, why);
    }
}

/// Says `text` on PR `number` in prgate's one "not started" comment and, with `sha`, as the
/// `error` status there (`prgate_report::not_started` writes both). Never fails: what cannot be
/// posted is said on stderr.
pub(crate) async fn leave_word(github: &GitHub, number: u64, sha: Option<&str>, text: &str) {
    eprintln!("prgate: {text}");
    if let Some(sha) = sha {
        let status = not_started::error_status(text);
        let posted = crate::publish::set_status(github, sha, &status).await;
        if let Err(error) = posted {
            eprintln!("prgate: could not post the error status either: {error:#}");
        }
    }
    let body = not_started::comment(text);
    let posted = match github.comment_login(None).await {
        Ok(login) => {
            github.upsert_comment(number, not_started::MARKER, &login, &body).await.map(drop)
        }
        Err(error) => Err(error),
    };
    if let Err(error) = posted {
        eprintln!("prgate: could not comment on #{number} either: {error:#}");
    }
}
