//! `prgate trigger`: decides, from a GitHub event, whether a run starts and on which commit.
//!
//! A run starts from a `pull_request_target` event `labeled` with the trigger label, or a
//! `workflow_dispatch` with a PR number and the head SHA the maintainer expects. Whoever added
//! the label must have write, maintain or admin permission (triage can label too). The label is
//! removed, the head SHA is pinned from the event, and the PR is read again after the label is
//! gone: if its head moved, the run stops, so a later push always needs a maintainer again.
//! The run only ever reports on the pinned SHA.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::github::GitHub;

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
}

/// The parts of an event payload prgate reads.
#[derive(Debug, Deserialize)]
pub(crate) struct Event {
    action: Option<String>,
    label: Option<Named>,
    sender: Option<Login>,
    pull_request: Option<EventPullRequest>,
    inputs: Option<DispatchInputs>,
}

impl Event {
    /// A `workflow_dispatch` of PR `pr` at the expected head `sha`, by `actor`.
    pub(crate) fn dispatch(pr: u64, sha: &str, actor: &str) -> Event {
        Event {
            action: None,
            label: None,
            sender: Some(Login { login: actor.to_owned() }),
            pull_request: None,
            inputs: Some(DispatchInputs {
                pr: Some(serde_json::Value::from(pr)),
                sha: Some(sha.to_owned()),
            }),
        }
    }
}

#[derive(Debug, Deserialize)]
struct Named {
    name: String,
}

#[derive(Debug, Deserialize)]
struct Login {
    login: String,
}

#[derive(Debug, Deserialize)]
struct EventPullRequest {
    number: u64,
    head: EventRef,
}

#[derive(Debug, Deserialize)]
struct EventRef {
    sha: String,
}

#[derive(Debug, Deserialize)]
struct DispatchInputs {
    pr: Option<serde_json::Value>,
    sha: Option<String>,
}

/// What a started run is pinned to: written as `trigger.json`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Pinned {
    pub(crate) number: u64,
    pub(crate) sha: String,
    pub(crate) title: String,
    pub(crate) base_ref: String,
    pub(crate) base_sha: String,
    pub(crate) triggered_by: String,
    pub(crate) files_truncated: bool,
}

/// Writes the pin (`trigger.json`) and the PR's files (`files.txt`) into `dir`.
pub(crate) fn write_pin(
    dir: &std::path::Path,
    pinned: &Pinned,
    files: &[String],
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut list = files.join("\n");
    list.push('\n');
    std::fs::write(dir.join("files.txt"), list).context("writing files.txt")?;
    let json = serde_json::to_string_pretty(pinned).context("writing trigger.json")?;
    std::fs::write(dir.join("trigger.json"), json + "\n").context("writing trigger.json")
}

/// Whether a run starts.
pub(crate) enum Decision {
    Start(Pinned, Vec<String>),
    Refuse(String),
}

pub(crate) fn run(args: &TriggerArgs) -> anyhow::Result<bool> {
    let event: Event = crate::files::read_json(&args.event, "event")?;
    let (runtime, github) = crate::github::connect(&args.repository)?;
    match runtime.block_on(decide(&github, &event, &args.label))? {
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

pub(crate) async fn decide(
    github: &GitHub,
    event: &Event,
    label: &str,
) -> anyhow::Result<Decision> {
    let sender = event.sender.as_ref().map(|sender| sender.login.clone()).unwrap_or_default();
    let (number, expected_sha, labeled) = match (&event.pull_request, &event.inputs) {
        (Some(pr), _) => {
            if event.action.as_deref() != Some("labeled") {
                return Ok(Decision::Refuse(format!(
                    "the event is '{}', not 'labeled'",
                    event.action.as_deref().unwrap_or("none")
                )));
            }
            let name = event.label.as_ref().map(|label| label.name.as_str()).unwrap_or_default();
            if name != label {
                return Ok(Decision::Refuse(format!("the label added is '{name}', not '{label}'")));
            }
            (pr.number, pr.head.sha.clone(), true)
        }
        (None, Some(inputs)) => {
            let number = match &inputs.pr {
                Some(serde_json::Value::Number(number)) => number.as_u64(),
                Some(serde_json::Value::String(text)) => {
                    text.trim().trim_start_matches('#').parse().ok()
                }
                _ => None,
            };
            let Some(number) = number else { bail!("the dispatch has no PR number in inputs.pr") };
            let Some(sha) = inputs
                .sha
                .clone()
                .filter(|sha| sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()))
            else {
                bail!("the dispatch needs the expected head SHA (40 hex digits) in inputs.sha");
            };
            (number, sha, false)
        }
        (None, None) => bail!("the event is neither a pull_request_target nor a workflow_dispatch"),
    };
    if sender.is_empty() {
        bail!("the event names no sender");
    }
    let (allowed, role) = github.can_start_runs(&sender).await?;
    if !allowed {
        if labeled {
            github.remove_label(number, label).await?;
        }
        return Ok(Decision::Refuse(format!(
            "{sender} has the {role} role; starting a run needs write, maintain or admin"
        )));
    }
    if labeled {
        github.remove_label(number, label).await?;
    }
    // Read the PR again only now that the label is gone: a push after this point is not ours.
    let pr = github.pull_request(number).await?;
    if pr.head.sha != expected_sha {
        return Ok(Decision::Refuse(format!(
            "the head of #{number} moved from {expected_sha} to {}; a maintainer must start the run again",
            pr.head.sha
        )));
    }
    let files = github.pull_request_files(&pr).await?;
    // The files are the head's at the time they were listed: make sure it is still the pinned
    // one, or the plan could come from another commit than the one tested.
    let again = github.pull_request(number).await?;
    if again.head.sha != expected_sha {
        return Ok(Decision::Refuse(format!(
            "the head of #{number} moved from {expected_sha} to {} while its files were read; a maintainer must start the run again",
            again.head.sha
        )));
    }
    let pinned = Pinned {
        number,
        sha: expected_sha,
        title: pr.title.clone(),
        base_ref: pr.base.reference.clone(),
        base_sha: pr.base.sha.clone(),
        triggered_by: sender,
        files_truncated: files.truncated,
    };
    Ok(Decision::Start(pinned, files.paths))
}
