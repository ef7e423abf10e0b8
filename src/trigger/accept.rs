//! `prgate accept`: records a maintainer's `accept-narrowing` on the commit it was given for.
//!
//! A label stays on a PR across pushes; an acceptance must not. When a maintainer adds the
//! label, the workflow's `accept` job runs this: the event must add that label
//! (`prgate_github::trigger::acceptance_request`), the PR must still be open and at the head
//! the event names, and whoever added it must count (`accepting_label_refusal`: write,
//! maintain or admin, and not the PR's author). Then the status
//! `AMD PR test / accept-narrowing` (`prgate_report::status::acceptance_status`) is posted on
//! that head. A run counts the label only where its head has that status from prgate
//! (`super::vet_accepting_label`), so a push after the acceptance takes it away until a
//! maintainer adds the label again.
//!
//! What it leaves to others: the decisions (`prgate_github::trigger`), the status's words
//! (`prgate_report::status`), and counting the label in a run (the trigger's pin).

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

use prgate_gate::job::ACCEPT_NARROWING_LABEL;
use prgate_github::GitHub;
use prgate_github::event::Event;
use prgate_github::trigger;

/// Record a maintainer's accept-narrowing label on the PR head it was added at (the
/// `AMD PR test / accept-narrowing` status), from the `labeled` event that added it.
///
/// Exit status: 0 recorded, 1 not (it does not count; why on stderr), 2 an error. The token
/// is read from GITHUB_TOKEN; the API from GITHUB_API_URL (default https://api.github.com).
#[derive(Debug, Args)]
pub(crate) struct AcceptArgs {
    /// The event payload (GITHUB_EVENT_PATH): a pull_request_target `labeled` event.
    #[arg(long, value_name = "FILE")]
    event: PathBuf,
    /// The repository, owner/name (GITHUB_REPOSITORY).
    #[arg(long, value_name = "OWNER/NAME", env = "GITHUB_REPOSITORY")]
    repository: String,
}

pub(crate) fn run(args: &AcceptArgs) -> anyhow::Result<bool> {
    let event: Event = crate::files::read_json(&args.event, "event")?;
    let (runtime, github) = prgate_github::connect(&args.repository)?;
    let recorded = runtime.block_on(accept(&github, &event));
    match recorded.with_context(|| format!("accepting from the event {}", args.event.display()))? {
        Ok(said) => {
            println!("{said}");
            Ok(true)
        }
        Err(refusal) => {
            eprintln!("prgate: not recorded: {refusal}");
            Ok(false)
        }
    }
}

/// What `event` records: `Ok(what was recorded)`, or `Err(why it does not count)`.
async fn accept(
    github: &GitHub,
    event: &Event,
) -> anyhow::Result<std::result::Result<String, String>> {
    let label = ACCEPT_NARROWING_LABEL;
    let asked = match trigger::acceptance_request(event, label)? {
        Ok(asked) => asked,
        Err(reason) => return Ok(Err(reason)),
    };
    let sender = trigger::sender(event)?;
    if let Some(refusal) = trigger::bot_refusal(sender) {
        return Ok(Err(refusal));
    }
    let access = github.access(&sender.login).await?;
    let pr = github.pull_request(asked.number).await?;
    let author = pr.user.as_ref().map(|user| user.login.as_str());
    let refusal = trigger::acceptance_pr_refusal(asked.number, &asked.sha, &pr).or_else(|| {
        trigger::accepting_label_refusal(label, Ok(Some(&sender.login)), author, Some(&access))
    });
    if let Some(refusal) = refusal {
        return Ok(Err(refusal));
    }
    let status = prgate_report::status::acceptance_status(label, &sender.login);
    crate::publish::set_status(github, &asked.sha, &status).await?;
    Ok(Ok(format!(
        "{label} of #{} recorded on {} ({}, by {})",
        asked.number, asked.sha, status.context, sender.login
    )))
}
