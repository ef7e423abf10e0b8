//! `prgate ci`: the whole PR test in one command, as the workflow calls it.
//!
//! In order: the trigger (the event's label or dispatch, the sender's role, the label removed,
//! the head SHA pinned; `trigger`), the plan from the base side's manifest, at once a `pending`
//! status and the comment, the run on this node with the comment edited as checks finish (at
//! most once per `--update-every`), the gate, then the final comment and status, the job
//! summary and the full report file; then the run's measurements are saved in the history
//! folder for the PR's ledger line when it merges, and the comment's header names the drift
//! guards over their budget (docs/history.md).
//!
//! Whatever happens after the pin, the status never stays `pending`: an error, a panic, a
//! `SIGINT`/`SIGTERM` (a cancelled job) or a run that ends with checks still pending posts
//! `error` with the reason, and the comment says what was done and what was not. Only a
//! `SIGKILL` cannot be answered from inside; the workflow's `finish` stage (`if: always()`)
//! answers it (docs/workflow.md).
//!
//! Files, under `--work` (default `.prgate`): `state/trigger.json`, `state/files.txt`,
//! `state/plan.json`, `results/` (evidence, logs), `events.jsonl`, `verdict.json`,
//! `comment.md` (the last comment posted), `prgate-report.md` (the full report).
//!
//! This file turns the flags into [`Settings`] once and picks the stage; the stages are in
//! [`stages`], what is posted to the PR in [`reporter`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

mod reporter;
mod stages;

pub(crate) use reporter::gpu_time_words;

use crate::gate::Outcome;
use crate::run::{ExecutorSettings, RunOptions, RunSettings, Switch};
use prgate_github::actions::JobsResult;
use prgate_runner::reuse::ReuseMode;

/// Run the whole PR test: trigger, plan, pending status and comment, the run on this node with
/// the comment kept up to date, the gate, the final comment and status, the job summary and
/// the full report (docs/workflow.md).
///
/// Exit status: 0 the PR passed, 1 it failed (or no run started: the reason on stderr), 2 an
/// error (the status was set to `error`). The token is read from GITHUB_TOKEN, the API from
/// GITHUB_API_URL.
#[derive(Debug, Args)]
pub(crate) struct CiArgs {
    /// The event payload (GITHUB_EVENT_PATH): a `pull_request_target` labeled with --label, a
    /// `workflow_dispatch` with inputs `pr` and `sha`, or a merge queue's `merge_group`.
    #[arg(long, value_name = "FILE")]
    event: Option<PathBuf>,
    /// A dispatch from the command line: the PR's number (with --sha).
    #[arg(long, value_name = "N", requires = "sha", conflicts_with = "event")]
    pr: Option<u64>,
    /// The head SHA the dispatch expects (40 hex digits).
    #[arg(long, value_name = "SHA", requires = "pr")]
    sha: Option<String>,
    /// Who dispatched (their role is checked).
    #[arg(long, value_name = "LOGIN", env = "GITHUB_ACTOR")]
    actor: Option<String>,
    /// The repository, owner/name.
    #[arg(long, value_name = "OWNER/NAME", env = "GITHUB_REPOSITORY")]
    repository: String,
    /// A checkout of the base branch that also has the PR's head commit (fetched as a ref).
    #[arg(long, value_name = "DIR", default_value = ".")]
    repo: PathBuf,
    /// This node's profile.
    #[arg(long, value_name = "FILE", default_value = crate::files::DEFAULT_NODE_PROFILE)]
    node: PathBuf,
    /// Where the state, results and report files go (a relative path is taken from the
    /// current directory).
    #[arg(long, value_name = "DIR", default_value = ".prgate", value_parser = crate::run::parse_absolute_path)]
    work: PathBuf,
    /// The label that starts a run.
    #[arg(long, default_value = crate::trigger::DEFAULT_LABEL)]
    label: String,
    /// The workflow run's page, linked from the comment and the status.
    #[arg(long, value_name = "URL")]
    run_url: Option<String>,
    /// Edit the comment at most this often while checks finish.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = prgate_runner::recipe::parse_duration)]
    update_every: Duration,
    /// The login our comments are written by [default: the token's user; for an App's
    /// installation token, GraphQL's viewer, e.g. `my-app[bot]`].
    #[arg(long, value_name = "LOGIN", env = "PRGATE_BOT_LOGIN")]
    bot_login: Option<String>,
    /// Also keep a check run on the pinned SHA (`AMD PR test details`: the summary and the
    /// annotations): needs a GitHub App's token (`checks: write`); the status stays the
    /// required check.
    #[arg(long, value_enum, default_value_t = Switch::Off)]
    check_run: Switch,
    /// Which part of the test to run: `all` (one job on one node), or the two-node workflow's
    /// `start` (trigger, plan, schedule, pending status), `run` (this node's share, no GitHub)
    /// and `finish` (gather, gate, post) (docs/workflow.md).
    #[arg(long, value_enum, default_value_t = Stage::All)]
    stage: Stage,
    /// The state folder the start stage writes and the others read [default: WORK/state].
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// start: the nodes to schedule on (`[[node]]` tables of `name` and `hardware`, optionally
    /// `gpus` and `checkpoints`) [default: this node's profile].
    #[arg(long, value_name = "FILE")]
    nodes: Option<PathBuf>,
    /// finish: a node job's results folder (its `evidence/`); once per node.
    #[arg(long = "evidence", value_name = "DIR")]
    evidence: Vec<PathBuf>,
    /// finish: how the node jobs ended (success, failure, cancelled, skipped): anything but
    /// success or skipped posts `error`.
    #[arg(long, value_name = "RESULT", value_parser = JobsResult::parse)]
    jobs: Option<JobsResult>,
    /// How the run runs, as `prgate run` takes it (with --stage all, --executor slurm runs a
    /// SLURM job per model, docs/slurm.md).
    /// A second run of the same pinned PR commit and base on this node takes over every step
    /// the earlier run judged with unchanged inputs and runs only what failed, could not be
    /// judged or is missing (docs/rerun.md). Local executor and `--stage run`.
    #[arg(long, value_enum, default_value_t = Switch::On)]
    reuse: Switch,
    /// The history folder (docs/history.md): the final verdict's measurements are saved there
    /// for the PR's ledger line when it merges, and the comment names the drift guards over
    /// their budget [default: PRGATE_HISTORY_DIR when set and not empty, else <cache-dir>/history
    /// of the --node profile].
    #[arg(long, value_name = "DIR")]
    history: Option<PathBuf>,
    #[command(flatten)]
    run: RunOptions,
}

/// `prgate ci`'s settings: its flags, checked once; every stage takes these, not the flags.
#[derive(Debug)]
struct Settings {
    event: Option<PathBuf>,
    pr: Option<u64>,
    sha: Option<String>,
    actor: Option<String>,
    repository: String,
    repo: PathBuf,
    node: PathBuf,
    work: PathBuf,
    /// The state folder (`--state`, else WORK/state).
    state: PathBuf,
    label: String,
    run_url: Option<String>,
    update_every: Duration,
    bot_login: Option<String>,
    /// `--check-run on`.
    check_run: bool,
    stage: Stage,
    nodes: Option<PathBuf>,
    evidence: Vec<PathBuf>,
    jobs: Option<JobsResult>,
    /// `--reuse`.
    reuse: Switch,
    /// `--history`.
    history: Option<PathBuf>,
    run: RunSettings,
}

impl Settings {
    /// The settings of a status a stage posts itself (the queue's): it links the run's page.
    fn status_settings(&self) -> prgate_report::status::StatusSettings {
        prgate_report::status::StatusSettings {
            target_url: self.run_url.clone(),
            ..Default::default()
        }
    }

    /// Whether this run reuses (and saves) judged steps; the run's page names it, else its
    /// results directory.
    fn reuse(&self, results: &Path) -> ReuseMode {
        crate::run::reuse_mode(
            self.reuse,
            &self.run_url.clone().unwrap_or_else(|| results.display().to_string()),
        )
    }

    fn new(args: &CiArgs) -> anyhow::Result<Settings> {
        let run = args.run.settings()?;
        anyhow::ensure!(
            args.stage != Stage::Run || matches!(run.executor, ExecutorSettings::Local),
            "--stage run runs this node's share itself: --executor slurm is for --stage all"
        );
        Ok(Settings {
            event: args.event.clone(),
            pr: args.pr,
            sha: args.sha.clone(),
            actor: args.actor.clone(),
            repository: args.repository.clone(),
            repo: args.repo.clone(),
            node: args.node.clone(),
            work: args.work.clone(),
            state: args.state.clone().unwrap_or_else(|| args.work.join("state")),
            label: args.label.clone(),
            run_url: args.run_url.clone(),
            update_every: args.update_every,
            bot_login: args.bot_login.clone(),
            check_run: args.check_run == Switch::On,
            stage: args.stage,
            nodes: args.nodes.clone(),
            evidence: args.evidence.clone(),
            jobs: args.jobs.clone(),
            reuse: args.reuse,
            history: args.history.clone(),
            run,
        })
    }
}

/// The parts of `prgate ci`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Stage {
    All,
    Start,
    Run,
    Finish,
}

/// `prgate ci`: the flags turned into settings once, then the stage.
pub(crate) fn run(args: &CiArgs) -> anyhow::Result<Outcome> {
    let ci = Settings::new(args)?;
    match ci.stage {
        Stage::All => stages::all(&ci),
        Stage::Start => stages::start(&ci),
        Stage::Run => stages::node_run(&ci),
        Stage::Finish => stages::finish(&ci),
    }
}

/// Writes `text` to `path`, the node's secret values redacted.
fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    // The node's secret values are redacted from everything prgate writes.
    let text = prgate_runner::redact::redact(text);
    std::fs::write(path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}
