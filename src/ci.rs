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

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use std::collections::{BTreeMap, BTreeSet};

use prgate_gate::evidence::{Evidence, NotRunReason};
use prgate_gate::{State, Verdict};
use prgate_report::comment::{
    CommentInput, Header, Progress, ReportLink, StepProgress, StepState, render_comment,
    render_full_report,
};
use prgate_report::status::{StatusSettings, commit_status, error_status};
use prgate_runner::job::RecipePaths;
use prgate_runner::node::NodeProfile;
use prgate_runner::results::{Event as RunEvent, EventKind};
use prgate_runner::run::{COMMON_CHECKS, planned_checks};
use prgate_runner::run::{DEFAULT_COMMON_RECIPE_PATH, DEFAULT_RECIPE_PATH, RunInputs, RunRequest};
use prgate_runner::schedule::{History, Node as ScheduleNode};
use prgate_scope::{FileList, Plan, PlanRequest};
use serde::{Deserialize, Serialize};

use crate::gate::Outcome;
use crate::github::GitHub;
use crate::run::{ExecutorSettings, RunFiles, RunOptions, RunSettings, Switch, parse_time_limit};
use crate::trigger::queue::QueueVerdict;
use crate::trigger::{Decision, Event, Pinned};
use prgate_gate::JobPlan;

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
    #[arg(long, value_name = "FILE", default_value = "/etc/prgate/node.toml")]
    node: PathBuf,
    /// Where the state, results and report files go (a relative path is taken from the
    /// current directory).
    #[arg(long, value_name = "DIR", default_value = ".prgate", value_parser = crate::run::parse_absolute_path)]
    work: PathBuf,
    /// The label that starts a run.
    #[arg(long, default_value = "run-ci")]
    label: String,
    /// The workflow run's page, linked from the comment and the status.
    #[arg(long, value_name = "URL")]
    run_url: Option<String>,
    /// Edit the comment at most this often while checks finish.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_time_limit)]
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

/// How the node jobs ended, as the workflow's `needs.<job>.result` says (`--jobs`). Any other
/// word is kept, not refused: a finish stage that cannot parse its flags would leave the
/// status pending, so an unknown result is an error posted like a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JobsResult {
    Success,
    Skipped,
    Failure,
    Cancelled,
    Other(String),
}

impl JobsResult {
    fn parse(text: &str) -> Result<JobsResult, std::convert::Infallible> {
        Ok(match text {
            "success" => JobsResult::Success,
            "skipped" => JobsResult::Skipped,
            "failure" => JobsResult::Failure,
            "cancelled" => JobsResult::Cancelled,
            other => JobsResult::Other(other.to_owned()),
        })
    }

    fn as_str(&self) -> &str {
        match self {
            JobsResult::Success => "success",
            JobsResult::Skipped => "skipped",
            JobsResult::Failure => "failure",
            JobsResult::Cancelled => "cancelled",
            JobsResult::Other(other) => other,
        }
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
        Stage::All => all(&ci),
        Stage::Start => start(&ci),
        Stage::Run => node_run(&ci),
        Stage::Finish => finish(&ci),
    }
}

/// What the trigger gave.
enum Pin {
    /// No run starts (the reason is on stderr).
    NoRun,
    /// Nothing needs to run: a merge queue's commit keeps the PR's result (its status posted).
    Settled,
    /// A run starts: the reporter that will never let the status stay pending, and the files.
    Started(Arc<Reporter>, Vec<String>),
}

/// The trigger. On a start, the pin is written to the state folder. A merge queue's commit is
/// judged first (`trigger::queue`): the PR's result holds (`success` is posted, and the state
/// folder gets `settled.txt`), or the paths that run again replace the PR's files.
fn pin(args: &Settings) -> anyhow::Result<Pin> {
    let state = args.state.clone();
    std::fs::create_dir_all(&state).with_context(|| format!("creating {}", state.display()))?;
    let event = match (&args.event, args.pr, &args.sha) {
        (Some(path), _, _) => crate::files::read_json(path, "event")?,
        (None, Some(pr), Some(sha)) => {
            let actor = args.actor.as_deref().context("a dispatch needs --actor (GITHUB_ACTOR)")?;
            Event::dispatch(pr, sha, actor)
        }
        _ => anyhow::bail!("give --event FILE, or --pr N --sha SHA"),
    };
    let (runtime, github) = crate::github::connect(&args.repository)?;
    github.remember_login(args.bot_login.as_deref());
    let (mut pinned, mut files) =
        match runtime.block_on(crate::trigger::decide(&github, &event, &args.label))? {
            Decision::Refuse(reason) => {
                eprintln!("prgate: no run: {reason}");
                return Ok(Pin::NoRun);
            }
            Decision::Start(pinned, files) => (*pinned, files),
        };
    if let Some(queue) = pinned.merge_group.clone() {
        let context = prgate_report::status::DEFAULT_CONTEXT;
        let judged = runtime.block_on(crate::trigger::queue::judge(
            &github, &args.repo, &pinned, &queue, &files, context,
        ));
        match judged {
            Ok(QueueVerdict::Holds(description)) => {
                let description = prgate_report::status::fit_description(&description);
                runtime.block_on(github.set_status(
                    &pinned.sha,
                    "success",
                    &description,
                    context,
                    args.run_url.as_deref(),
                ))?;
                crate::trigger::write_pin(&state, &pinned, &files)?;
                write(&state.join("settled.txt"), &(description.clone() + "\n"))?;
                write(&state.join("nodes.json"), "[]\n")?;
                eprintln!("prgate: merge queue: {description}");
                return Ok(Pin::Settled);
            }
            Ok(QueueVerdict::Rerun { files: again, note }) => {
                eprintln!("prgate: {note}");
                files = again;
                if let Some(queue) = pinned.merge_group.as_mut() {
                    queue.note = Some(note);
                }
            }
            Err(error) => {
                let status = error_status(&format!("{error:#}"), &StatusSettings::default());
                let posted = runtime.block_on(github.set_status(
                    &pinned.sha,
                    status.state.as_str(),
                    &status.description,
                    &status.context,
                    args.run_url.as_deref(),
                ));
                if let Err(also) = posted {
                    eprintln!("prgate: could not post the error status: {also:#}");
                }
                return Err(error);
            }
        }
    }
    crate::trigger::write_pin(&state, &pinned, &files)?;
    eprintln!(
        "prgate: run #{} at {} (started by {})",
        pinned.number, pinned.sha, pinned.triggered_by
    );
    Ok(Pin::Started(Reporter::new(args, runtime, github, pinned), files))
}

/// Runs `work`; whatever it ends in other than a result (an error, a panic) is posted as the
/// `error` status with the comment of what was done.
fn guarded(
    reporter: &Arc<Reporter>,
    work: impl FnOnce() -> anyhow::Result<Outcome>,
) -> anyhow::Result<Outcome> {
    // A cancelled job (SIGINT, SIGTERM): the runner stops every child, then this leaves word.
    // Watched from now on, not only once the run starts: a signal while planning counts too.
    let last_words = Arc::clone(reporter);
    prgate_runner::process::before_dying_of_signal(Box::new(move |signal| {
        last_words.error(&format!("the run was stopped by {signal} (the job was cancelled?)"));
    }));
    prgate_runner::process::stop_all_on_signal()?;
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        Ok(Ok(outcome)) => Ok(outcome),
        Ok(Err(error)) => {
            reporter.error(&format!("{error:#}"));
            Err(error)
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_owned()))
                .unwrap_or_else(|| "a panic".to_owned());
            reporter.error(&format!("prgate crashed: {what}"));
            Err(anyhow::anyhow!("prgate crashed: {what}"))
        }
    }
}

/// `--stage all`: everything, on this node.
fn all(args: &Settings) -> anyhow::Result<Outcome> {
    let (reporter, files) = match pin(args)? {
        Pin::NoRun => return Ok(Outcome::NotPass),
        Pin::Settled => return Ok(Outcome::Pass),
        Pin::Started(reporter, files) => (reporter, files),
    };
    guarded(&reporter, || pipeline(args, &reporter, files))
}

/// `--stage start`: the trigger, the plan, the schedule onto the nodes, and the pending status
/// and comment. Writes `nodes.json` (the nodes with work) and `schedule.json`.
fn start(args: &Settings) -> anyhow::Result<Outcome> {
    let (reporter, files) = match pin(args)? {
        Pin::NoRun => return Ok(Outcome::NotPass),
        Pin::Settled => return Ok(Outcome::Pass),
        Pin::Started(reporter, files) => (reporter, files),
    };
    guarded(&reporter, || {
        let (plan, _base) = make_plan(args, &reporter, files)?;
        let nodes = read_nodes(args)?;
        let estimate =
            crate::estimate::estimate_plan(&args.repo, &plan, &nodes, &History::default(), 0)?;
        let mut assignment = ScheduleFile::default();
        for node in &estimate.nodes {
            let models: Vec<String> = node
                .jobs
                .iter()
                .map(|job| job.clone().unwrap_or_else(|| COMMON_CHECKS.to_owned()))
                .collect();
            if !models.is_empty() {
                assignment.nodes.insert(node.name.clone(), models);
            }
        }
        for job in &estimate.jobs {
            if let (Some(reason), Some(not_run)) = (&job.unschedulable, job.not_run) {
                assignment.unschedulable.push(Unplaced {
                    model: job.model.clone().unwrap_or_else(|| COMMON_CHECKS.to_owned()),
                    reason: reason.clone(),
                    not_run,
                });
            }
        }
        assignment.estimate = Some(prgate_report::estimate::estimate_words(&estimate));
        reporter.update(|state| state.estimate = assignment.estimate.clone());
        let state = args.state.clone();
        let names: Vec<&String> = assignment.nodes.keys().collect();
        write(&state.join("nodes.json"), &(serde_json::to_string(&names)? + "\n"))?;
        write(&state.join("schedule.json"), &(serde_json::to_string_pretty(&assignment)? + "\n"))?;
        write(&state.join("estimate.json"), &(serde_json::to_string_pretty(&estimate)? + "\n"))?;
        reporter.update(|state| state.nodes = names.iter().map(|name| (*name).clone()).collect());
        reporter.post_progress()?;
        eprintln!("prgate: scheduled on {}", serde_json::to_string(&assignment.nodes)?);
        Ok(Outcome::Pass)
    })
}

/// `--stage run`: this node's share of the schedule, into `<work>/results/<node>`. Talks to
/// no one: the finish stage reports.
fn node_run(args: &Settings) -> anyhow::Result<Outcome> {
    let state = args.state.clone();
    let plan: Plan = crate::files::read_json(&state.join("plan.json"), "plan")?;
    let pinned: Pinned = crate::files::read_json(&state.join("trigger.json"), "trigger")?;
    let schedule: ScheduleFile = crate::files::read_json(&state.join("schedule.json"), "schedule")?;
    let node = read_node(&args.node)?;
    let models = schedule.nodes.get(node.name()).cloned().unwrap_or_default();
    let results = args.work.join("results").join(node.name());
    std::fs::create_dir_all(results.join("evidence"))
        .with_context(|| format!("creating {}", results.display()))?;
    if models.is_empty() {
        eprintln!("prgate: nothing is scheduled on {}", node.name());
        return Ok(Outcome::Pass);
    }
    let base = crate::gate::BaseSide::read(&args.repo, &plan)?;
    let events = results.join("events.jsonl");
    let target = Target {
        node: &node,
        results: &results,
        events: &events,
        only_models: Some(&models),
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        observer: None,
    };
    let summary =
        run_plan(args, &plan, &base, &pinned, &target).context("running this node's models")?;
    for note in &summary.notes {
        eprintln!("note: {note}");
    }
    eprintln!("prgate: {} steps recorded on {}", summary.recorded, node.name());
    Ok(Outcome::Pass)
}

/// `--stage finish`: the evidence of every node job gathered, judged and posted; `error` when
/// a job failed or was cancelled, a scheduled node sent nothing, or a check never reported.
fn finish(args: &Settings) -> anyhow::Result<Outcome> {
    let state = args.state.clone();
    let pinned: Pinned = crate::files::read_json(&state.join("trigger.json"), "trigger")?;
    let (runtime, github) = crate::github::connect(&args.repository)?;
    let reporter = Reporter::new(args, runtime, github, pinned);
    guarded(&reporter, || {
        let plan_path = state.join("plan.json");
        anyhow::ensure!(plan_path.is_file(), "the start stage ended before it made a plan");
        let plan: Plan = crate::files::read_json(&plan_path, "plan")?;
        let base = crate::gate::BaseSide::read(&args.repo, &plan)?;
        let drift = drift_alarms(args, &plan, &base);
        reporter.update(|state| {
            state.plan = Some(plan.clone());
            state.drift = drift;
        });
        let schedule: ScheduleFile = match state.join("schedule.json") {
            path if path.is_file() => crate::files::read_json(&path, "schedule")?,
            _ => ScheduleFile::default(),
        };
        reporter.update(|state| {
            state.nodes = schedule.nodes.keys().cloned().collect();
            state.estimate = schedule.estimate.clone();
        });
        let mut evidence = Vec::new();
        let mut reported = BTreeSet::new();
        let mut job: Option<JobPlan> = None;
        for dir in &args.evidence {
            let records = dir.join("evidence");
            let records = if records.is_dir() { records } else { dir.clone() };
            if !records.is_dir() {
                // Nothing came back from that job: the check below names its node.
                continue;
            }
            let (_files, found) = crate::gate::read_evidence(&records)?;
            for record in &found {
                if let Some(node) = &record.provenance.node {
                    reported.insert(node.clone());
                }
            }
            // Each node's job plan holds every target as that node sees it: a target is taken
            // from the node that ran it.
            let job_path = dir.join(prgate_runner::results::JOB_FILE);
            if job_path.is_file() {
                let node_job = crate::gate::read_job(&job_path, &plan)?;
                let merged = job.get_or_insert_with(|| node_job.clone());
                for target in node_job.targets {
                    if found.iter().any(|record| record.model == target.model)
                        && let Some(slot) =
                            merged.targets.iter_mut().find(|t| t.model == target.model)
                    {
                        *slot = target;
                    }
                }
            }
            evidence.extend(found);
        }
        evidence.extend(unplaced_evidence(&plan, &schedule));
        reporter.update(|state| {
            state.progress = progress_from_evidence(&plan, &evidence);
            state.image = images(&evidence);
            state.gpu_time = gpu_time_words(&args.evidence);
        });
        match &args.jobs {
            None | Some(JobsResult::Success | JobsResult::Skipped) => {}
            Some(result) => anyhow::bail!(
                "the node jobs ended as '{}': what they recorded is shown, the rest did not run",
                result.as_str()
            ),
        }
        let silent: Vec<&String> =
            schedule.nodes.keys().filter(|node| !reported.contains(*node)).collect();
        anyhow::ensure!(
            silent.is_empty(),
            "no evidence came back from {}",
            silent.iter().map(|node| node.as_str()).collect::<Vec<_>>().join(", ")
        );
        judge_and_post(args, &reporter, &plan, &base, job.as_ref(), &evidence)
    })
}

/// The GPU time the runs in `results` folders measured (`prgate_runner::gpu_time`), in words.
pub(crate) fn gpu_time_words(results: &[PathBuf]) -> Option<String> {
    use prgate_report::gpu_hours::{ModelTime, PhaseTime};
    let models: Vec<ModelTime> = results
        .iter()
        .flat_map(|dir| prgate_runner::gpu_time::TargetTime::read_all(dir))
        .map(|target| ModelTime {
            model: target.model,
            gpus: target.gpus,
            phases: target
                .phases
                .iter()
                .map(|phase| PhaseTime {
                    phase: phase.phase.as_str().to_owned(),
                    gpu_seconds: phase.gpu_seconds,
                    estimate_gpu_seconds: phase.estimate_gpu_seconds,
                })
                .collect(),
            servers: target.servers.as_ref().map(prgate_runner::gpu_time::ServersUsed::words),
        })
        .collect();
    prgate_report::gpu_hours::words(&models)
}

/// The `not-run` records of the models no node could take, so that the verdict says why.
fn unplaced_evidence(plan: &Plan, schedule: &ScheduleFile) -> Vec<Evidence> {
    schedule
        .unschedulable
        .iter()
        .flat_map(|unplaced| {
            let model = (unplaced.model != COMMON_CHECKS).then_some(unplaced.model.as_str());
            prgate_runner::run::unplaced_evidence(plan, model, unplaced.not_run, &unplaced.reason)
        })
        .collect()
}

/// The plan's checks, done when a record of them is in `evidence`.
fn progress_from_evidence(plan: &Plan, evidence: &[Evidence]) -> Progress {
    let mut progress = planned_progress(plan);
    for step in &mut progress.steps {
        let recorded = evidence
            .iter()
            .any(|record| record.model == step.model && record.check.describe() == step.check);
        if recorded {
            step.state = StepState::Done;
        }
    }
    progress
}

/// Which models each node runs, as the start stage decided (`state/schedule.json`).
#[derive(Debug, Default, Serialize, Deserialize)]
struct ScheduleFile {
    /// Node name → the models it runs (`~common` for the common checks).
    nodes: BTreeMap<String, Vec<String>>,
    /// What no node can run, and why.
    unschedulable: Vec<Unplaced>,
    /// The estimate in words, for the comment.
    #[serde(default)]
    estimate: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Unplaced {
    model: String,
    /// Each node's reason, in words.
    reason: String,
    /// What the model's `not-run` records say.
    not_run: NotRunReason,
}

/// The nodes of `--nodes FILE` (`[[node]]` tables of `name`, `hardware`, and optionally `gpus`
/// and `checkpoints`), else this node's profile.
fn read_nodes(args: &Settings) -> anyhow::Result<Vec<ScheduleNode>> {
    let Some(path) = &args.nodes else {
        return Ok(vec![ScheduleNode::from(&read_node(&args.node)?)]);
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the nodes {}", path.display()))?;
    Ok(prgate_runner::schedule::nodes_file::parse(&text, &path.display().to_string())?)
}

fn read_node(path: &Path) -> anyhow::Result<NodeProfile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the node profile {}", path.display()))?;
    Ok(NodeProfile::parse(&text, &path.display().to_string())?)
}

/// The plan from the base side's manifest, over the PR's files as the API listed them; the
/// reporter keeps it (the caller posts the pending status and the comment once it has the
/// estimate).
fn make_plan(
    args: &Settings,
    reporter: &Arc<Reporter>,
    files: Vec<String>,
) -> anyhow::Result<(Plan, crate::gate::BaseSide)> {
    let pinned = &reporter.pinned;
    let repository = git2::Repository::open(&args.repo)
        .with_context(|| format!("opening the repository {}", args.repo.display()))?;
    for (what, sha) in [("the PR's head", &pinned.sha), ("the base", &pinned.base_sha)] {
        let oid = git2::Oid::from_str(sha).with_context(|| format!("{what} {sha}"))?;
        repository.find_commit(oid).with_context(|| {
            format!(
                "{what} {sha} is not in {}; fetch it first (git fetch origin pull/{}/head)",
                args.repo.display(),
                pinned.number
            )
        })?;
    }
    drop(repository);
    let changes = prgate_scope::change::parse_file_list(&(files.join("\n") + "\n"))
        .context("the PR's file list")?;
    let mut plan = prgate_scope::plan(&PlanRequest {
        repo: args.repo.clone(),
        base: Some(pinned.base_sha.clone()),
        head: Some(pinned.sha.clone()),
        worktree: false,
        files: Some(FileList { changes, truncated: pinned.files_truncated }),
    })?;
    // A merge queue's run says why it runs what it runs.
    if let Some(note) = pinned.merge_group.as_ref().and_then(|queue| queue.note.clone()) {
        plan.warnings.push(note);
    }
    write(&args.state.clone().join("plan.json"), &(serde_json::to_string_pretty(&plan)? + "\n"))?;
    let base = crate::gate::BaseSide::read(&args.repo, &plan)?;
    let drift = drift_alarms(args, &plan, &base);
    reporter.update(|state| {
        state.plan = Some(plan.clone());
        state.progress = planned_progress(&plan);
        state.drift = drift;
    });
    Ok((plan, base))
}

/// The history folder: `--history`, else the node profile's; `None` (said on stderr) when
/// neither can be had.
fn history_dir(args: &Settings) -> Option<PathBuf> {
    crate::history::history_dir(args.history.as_deref(), &args.node)
        .map_err(|error| eprintln!("prgate: no history folder: {error:#}"))
        .ok()
}

/// The drift guards over their budget, for the comment's header (docs/history.md).
fn drift_alarms(args: &Settings, plan: &Plan, base: &crate::gate::BaseSide) -> Vec<String> {
    let Some(dir) = history_dir(args) else { return Vec::new() };
    let models: Vec<String> = plan.running_models().map(|model| model.name.clone()).collect();
    crate::history::alarms(&dir, &models, &base.config)
}

/// The gate on `evidence`, then the final comment and status.
fn judge_and_post(
    args: &Settings,
    reporter: &Reporter,
    plan: &Plan,
    base: &crate::gate::BaseSide,
    job: Option<&JobPlan>,
    evidence: &[Evidence],
) -> anyhow::Result<Outcome> {
    let title = Some(reporter.pinned.title.as_str());
    let verdict = crate::gate::judge_final(plan, job, evidence, title, base)
        .map_err(|error| anyhow::anyhow!("evidence record {}: {}", error.record, error.problem))?;
    write(&args.work.join("verdict.json"), &(serde_json::to_string_pretty(&verdict)? + "\n"))?;
    reporter.update(|state| {
        state.reuse = job
            .and_then(|job| prgate_report::rerun::Reuse::of(job, evidence))
            .map(|reuse| reuse.words());
    });
    if verdict.result == State::Pending {
        // The run is over: a check still pending will never report.
        let missing: Vec<String> = verdict
            .sections
            .iter()
            .flat_map(|section| section.items.iter())
            .filter(|item| item.state == State::Pending)
            .map(|item| format!("{} {}", item.model.as_deref().unwrap_or("common"), item.check))
            .collect();
        anyhow::bail!("the run ended with checks that never reported: {}", missing.join(", "));
    }
    reporter.post_final(&verdict)?;
    if let Some(dir) = history_dir(args) {
        let pinned = &reporter.pinned;
        let facts = crate::history::RunFacts {
            pr: pinned.number,
            title: &pinned.title,
            tested_commit: &pinned.sha,
            base_commit: plan.base_side_commit(),
            merge_queue: pinned.merge_group.is_some(),
            run_url: args.run_url.as_deref(),
        };
        eprintln!("prgate: {}", crate::history::save_run(&dir, &facts, &verdict, evidence));
    }
    Ok(Outcome::of(&verdict))
}

/// Everything after the pin, on this node; any error here is posted as the `error` status.
fn pipeline(
    args: &Settings,
    reporter: &Arc<Reporter>,
    files: Vec<String>,
) -> anyhow::Result<Outcome> {
    let pinned = &reporter.pinned;
    let node = read_node(&args.node)?;
    reporter.update(|state| {
        state.nodes = vec![node.name().to_owned()];
        state.image = Some(node.image().name.clone());
    });
    let (plan, base) = make_plan(args, reporter, files)?;
    let this_node = [ScheduleNode::from(&node)];
    let estimate =
        crate::estimate::estimate_plan(&args.repo, &plan, &this_node, &History::default(), 0)?;
    reporter.update(|state| {
        state.estimate = Some(prgate_report::estimate::estimate_words(&estimate));
    });
    reporter.post_progress()?;

    // The run, with the comment observing the step loop's events: the local executor's, or the
    // SLURM jobs' as the executor passes them on.
    let results = args.work.join("results");
    let events = args.work.join("events.jsonl");
    let comment = CommentObserver {
        reporter,
        plan: &plan,
        every: args.update_every,
        state: Mutex::new((CheckStates::default(), Instant::now())),
    };
    let target = Target {
        node: &node,
        results: &results,
        events: &events,
        only_models: None,
        progress: false,
        observer: Some(&comment),
    };
    match &args.run.executor {
        ExecutorSettings::Local => run_plan(args, &plan, &base, pinned, &target).map(|summary| {
            for note in &summary.notes {
                eprintln!("note: {note}");
            }
        }),
        ExecutorSettings::Slurm(slurm) => {
            // The jobs read the plan the start of this stage wrote.
            let plan_path = args.state.join("plan.json");
            let files = RunFiles {
                plan: &plan_path,
                node: &args.node,
                results: &results,
                repo: &args.repo,
                events: Some(&events),
                title: Some(&pinned.title),
                common_recipe: DEFAULT_COMMON_RECIPE_PATH,
            };
            let reuse = crate::run::reuse_mode(
                args.reuse,
                &args.run_url.clone().unwrap_or_else(|| results.display().to_string()),
            );
            crate::run::run_slurm(&args.run, slurm, &files, &plan, &node, &reuse, Some(&comment))
        }
    }
    .context("running the plan")?;
    reporter.update(|state| {
        state.progress = comment.progress();
        state.gpu_time = gpu_time_words(std::slice::from_ref(&results));
    });
    let (_files, evidence) = crate::gate::read_evidence(&results.join("evidence"))?;
    let job_path = results.join(prgate_runner::results::JOB_FILE);
    let job = job_path.is_file().then(|| crate::gate::read_job(&job_path, &plan)).transpose()?;
    judge_and_post(args, reporter, &plan, &base, job.as_ref(), &evidence)
}

/// Where and what a run of the plan runs.
struct Target<'a> {
    node: &'a NodeProfile,
    results: &'a Path,
    events: &'a Path,
    only_models: Option<&'a [String]>,
    progress: bool,
    /// Who watches the step loop's events (the comment), besides the events file.
    observer: Option<&'a dyn prgate_runner::results::StepObserver>,
}

/// Runs `plan` on this node as the command line says.
fn run_plan(
    args: &Settings,
    plan: &Plan,
    base: &crate::gate::BaseSide,
    pinned: &Pinned,
    target: &Target<'_>,
) -> anyhow::Result<prgate_runner::run::RunSummary> {
    let gain_required =
        prgate_gate::title::requires_gain(Some(pinned.title.as_str()), &base.config.gain.types);
    let isolation = args.run.isolation(plan, target.results)?;
    let preflight = args.run.preflight_mode();
    let request = RunRequest {
        inputs: RunInputs {
            plan,
            repo: &args.repo,
            node: target.node,
            results: target.results,
            events: Some(target.events),
            recipes: RecipePaths { model: DEFAULT_RECIPE_PATH, common: DEFAULT_COMMON_RECIPE_PATH },
            accept_narrowing: args.run.accept_narrowing
                || pinned.labels.iter().any(|label| {
                    label.eq_ignore_ascii_case(prgate_gate::job::ACCEPT_NARROWING_LABEL)
                }),
        },
        gate: &base.config,
        gain_required,
        python: &args.run.python,
        time_limit: args.run.time_limit,
        progress: target.progress,
        isolation: &isolation,
        wait_lock: args.run.wait_lock,
        preflight: &preflight,
        only_models: target.only_models,
        observer: target.observer,
        reuse: &crate::run::reuse_mode(
            args.reuse,
            &args.run_url.clone().unwrap_or_else(|| target.results.display().to_string()),
        ),
    };
    Ok(prgate_runner::run::run(&request)?)
}

/// Every check the plan runs, waiting: one line per model and check (the comment's table).
fn planned_progress(plan: &Plan) -> Progress {
    let mut steps = Vec::new();
    if plan.common.selected {
        steps.push(StepProgress {
            model: None,
            check: prgate_gate::evidence::Check::CommonTests.describe().to_owned(),
            state: StepState::Waiting,
        });
    }
    for model in &plan.models {
        for check in planned_checks(model) {
            steps.push(StepProgress {
                model: Some(model.name.clone()),
                check: check.describe().to_owned(),
                state: StepState::Waiting,
            });
        }
    }
    Progress { steps }
}

/// Which checks have started and how many of their steps are running, from the step loop's
/// events.
#[derive(Debug, Default)]
struct CheckStates {
    open: BTreeMap<(Option<String>, String), i64>,
}

impl CheckStates {
    fn follow(&mut self, event: &RunEvent) {
        let key = (event.model.clone(), event.check.describe().to_owned());
        let count = self.open.entry(key).or_default();
        match event.event {
            EventKind::StepStarted => *count += 1,
            EventKind::StepFinished => *count -= 1,
            EventKind::StepSkipped
            | EventKind::ServerStarted
            | EventKind::ServerWoken
            | EventKind::ServerReleased => {}
        }
    }

    /// The plan's checks: running once a step of it started, done once every step of it that
    /// started has finished.
    fn progress(&self, plan: &Plan) -> Progress {
        let mut progress = planned_progress(plan);
        for step in &mut progress.steps {
            let key = (step.model.clone(), step.check.clone());
            if let Some(&running) = self.open.get(&key) {
                step.state = if running > 0 { StepState::Running } else { StepState::Done };
            }
        }
        progress
    }
}

/// The PR comment as an observer of the step loop: every event moves its checks on, and the
/// comment is edited at most once per `every` (and at the end).
struct CommentObserver<'r> {
    reporter: &'r Reporter,
    plan: &'r Plan,
    every: Duration,
    state: Mutex<(CheckStates, Instant)>,
}

impl CommentObserver<'_> {
    /// The plan's checks as the events so far leave them.
    fn progress(&self) -> Progress {
        lock(&self.state).0.progress(self.plan)
    }
}

impl std::fmt::Debug for CommentObserver<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommentObserver").field("every", &self.every).finish_non_exhaustive()
    }
}

impl prgate_runner::results::StepObserver for CommentObserver<'_> {
    fn observe(&self, event: &RunEvent) {
        let mut state = lock(&self.state);
        state.0.follow(event);
        if state.1.elapsed() < self.every {
            return;
        }
        let progress = state.0.progress(self.plan);
        let changed = self.reporter.update(|shown| {
            let changed = shown.progress != progress;
            shown.progress = progress;
            changed
        });
        if !changed {
            return;
        }
        match self.reporter.post_progress() {
            Ok(()) => state.1 = Instant::now(),
            // A comment that cannot be edited now is edited at the next step or at the end.
            Err(error) => eprintln!("prgate: could not update the comment: {error:#}"),
        }
    }
}

/// What the reporter needs of the command line.
struct ReporterArgs {
    run_url: Option<String>,
    bot_login: Option<String>,
    work: PathBuf,
    /// `--check-run on`: keep a check run beside the status; its id is kept in
    /// `check-run.txt` of this state folder, so the finish stage edits the start's.
    check_run: Option<PathBuf>,
    /// The node profile, whose health ledger names the drained nodes (docs/node.md).
    node: PathBuf,
}

/// What the comment shows besides the verdict, in one place: the plan, the checks' progress
/// (from the step loop's events, or from the evidence in the finish stage), and the header's
/// nodes, image and estimate.
#[derive(Debug, Clone, Default)]
struct CommentState {
    plan: Option<Plan>,
    progress: Progress,
    /// The image the checks ran in: the node's, or what the evidence names.
    image: Option<String>,
    /// The nodes the run uses.
    nodes: Vec<String>,
    /// What the run is expected to take.
    estimate: Option<String>,
    /// The GPU time the run measured, for the comment's header.
    gpu_time: Option<String>,
    /// What the run reused from an earlier one.
    reuse: Option<String>,
    /// The drift guards over their budget (docs/history.md).
    drift: Vec<String>,
}

/// The images the evidence names (a digest, or a tag when the profile pins none), in order,
/// each once; `None` when no record names one.
fn images(evidence: &[Evidence]) -> Option<String> {
    let mut images: Vec<&str> = Vec::new();
    for image in evidence.iter().filter_map(|record| record.provenance.image_digest.as_deref()) {
        if !images.contains(&image) {
            images.push(image);
        }
    }
    (!images.is_empty()).then(|| images.join(", "))
}

/// Posts to the PR: the progress while the run goes, the final verdict, or the error.
struct Reporter {
    runtime: tokio::runtime::Runtime,
    github: GitHub,
    pinned: Pinned,
    args: ReporterArgs,
    /// What the comment shows besides the verdict, changed only through [`Reporter::update`].
    state: Mutex<CommentState>,
    /// The final status is posted: nothing may replace it.
    finished: AtomicBool,
}

impl Reporter {
    fn new(
        args: &Settings,
        runtime: tokio::runtime::Runtime,
        github: GitHub,
        pinned: Pinned,
    ) -> Arc<Reporter> {
        Arc::new(Reporter {
            runtime,
            github,
            pinned,
            args: ReporterArgs {
                run_url: args.run_url.clone(),
                bot_login: args.bot_login.clone(),
                work: args.work.clone(),
                check_run: args.check_run.then(|| args.state.clone()),
                node: args.node.clone(),
            },
            state: Mutex::new(CommentState::default()),
            finished: AtomicBool::new(false),
        })
    }

    /// Changes what the comment shows; returns what `change` returns.
    fn update<T>(&self, change: impl FnOnce(&mut CommentState) -> T) -> T {
        change(&mut lock(&self.state))
    }

    /// What the comment shows now.
    fn state(&self) -> CommentState {
        lock(&self.state).clone()
    }

    fn header(&self, state: &CommentState, plan: &Plan) -> Header {
        Header {
            pr_number: self.pinned.number,
            title: Some(self.pinned.title.clone()),
            pr_sha: self.pinned.sha.clone(),
            base_sha: plan.base_side_commit().to_owned(),
            nodes: state.nodes.clone(),
            image: state.image.clone(),
            run_url: self.args.run_url.clone(),
            estimate: state.estimate.clone(),
            gpu_time: state.gpu_time.clone(),
            reuse: state.reuse.clone(),
            drained: crate::node::drained_for_report(&self.args.node),
            drift: state.drift.clone(),
        }
    }

    fn settings(&self) -> StatusSettings {
        StatusSettings { target_url: self.args.run_url.clone(), ..StatusSettings::default() }
    }

    /// What the comment shows now, with `verdict` (the final comment: no progress) or
    /// `error`, handed to `then`; `None` while there is no plan yet (no comment to show).
    fn show<T>(
        &self,
        verdict: Option<&Verdict>,
        error: Option<&str>,
        then: impl FnOnce(&Plan, &CommentInput<'_>) -> T,
    ) -> Option<T> {
        let state = self.state();
        let plan = state.plan.as_ref()?;
        let header = self.header(&state, plan);
        let link = self.report_link();
        let input = CommentInput {
            verdict,
            plan,
            header: &header,
            progress: verdict.is_none().then_some(&state.progress),
            full_report: Some(&link),
            error,
        };
        Some(then(plan, &input))
    }

    /// The pending status and the comment with the run's progress.
    fn post_progress(&self) -> anyhow::Result<()> {
        self.show(None, None, |plan, input| {
            let status = commit_status(None, plan, input.progress, &self.settings());
            self.post(input, &status)
        })
        .unwrap_or(Ok(()))
    }

    /// The final comment and status, the full report and the job summary.
    fn post_final(&self, verdict: &Verdict) -> anyhow::Result<()> {
        self.show(Some(verdict), None, |plan, input| {
            write(&self.args.work.join(REPORT_NAME), &render_full_report(input)?)?;
            crate::publish::actions_outputs(input)?;
            let status = commit_status(Some(verdict), plan, None, &self.settings());
            self.post(input, &status)?;
            self.finished.store(true, Ordering::SeqCst);
            Ok(())
        })
        .unwrap_or(Ok(()))
    }

    /// The `error` status with `problem`, and the comment with what was done and what was
    /// not. Never fails: what cannot be posted is said on stderr.
    fn error(&self, problem: &str) {
        if self.finished.swap(true, Ordering::SeqCst) {
            return;
        }
        eprintln!("prgate: error: {problem}");
        let status = error_status(problem, &self.settings());
        let posted = self.show(None, Some(problem), |_plan, input| {
            let _written = render_full_report(input)
                .map_err(anyhow::Error::from)
                .and_then(|report| write(&self.args.work.join(REPORT_NAME), &report));
            self.post(input, &status)
        });
        // No plan yet: no comment to show, the status says it all.
        let result = posted.unwrap_or_else(|| {
            self.runtime.block_on(async {
                self.github
                    .set_status(
                        &self.pinned.sha,
                        status.state.as_str(),
                        &status.description,
                        &status.context,
                        status.target_url.as_deref(),
                    )
                    .await
            })
        });
        if let Err(error) = result {
            eprintln!("prgate: could not post the error status: {error:#}");
        }
    }

    fn post(
        &self,
        input: &CommentInput<'_>,
        status: &prgate_report::status::Status,
    ) -> anyhow::Result<()> {
        let body = prgate_runner::redact::redact(&render_comment(input)?).into_owned();
        write(&self.args.work.join("comment.md"), &body)?;
        self.runtime.block_on(crate::publish::post(
            &self.github,
            &self.pinned.sha,
            status,
            self.pinned.number,
            self.args.bot_login.as_deref(),
            &body,
        ))?;
        if let Some(state) = &self.args.check_run {
            // Optional beside the required status: a check run that fails is said, not fatal.
            let file = state.join("check-run.txt");
            let existing =
                std::fs::read_to_string(&file).ok().and_then(|id| id.trim().parse().ok());
            let posted = self.runtime.block_on(crate::publish::check_run(
                &self.github,
                existing,
                &self.pinned.sha,
                input,
                status,
            ));
            match posted {
                Ok(id) => write(&file, &format!("{id}\n"))?,
                Err(error) => eprintln!("prgate: could not post the check run: {error:#}"),
            }
        }
        Ok(())
    }

    fn report_link(&self) -> ReportLink {
        ReportLink { name: REPORT_NAME.to_owned(), url: None }
    }
}

/// The full report's file name under `--work`, as the workflow uploads it.
const REPORT_NAME: &str = "prgate-report.md";

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    // The node's secret values are redacted from everything prgate writes.
    let text = prgate_runner::redact::redact(text);
    std::fs::write(path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::JobsResult;

    #[test]
    fn every_jobs_result_reads_back_and_an_unknown_one_is_kept() {
        for word in ["success", "skipped", "failure", "cancelled", "", "timed_out"] {
            let result = JobsResult::parse(word).unwrap_or_else(|never| match never {});
            assert_eq!(result.as_str(), word);
            let known = !matches!(result, JobsResult::Other(_));
            assert_eq!(known, ["success", "skipped", "failure", "cancelled"].contains(&word));
        }
    }
}
