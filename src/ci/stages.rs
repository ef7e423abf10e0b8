//! The stages of `prgate ci` (docs/workflow.md): the trigger's pin, then `all` (everything on
//! this node), or the two-node workflow's `start` (plan, schedule onto the nodes, pending
//! status), `run` (this node's share, talking to no one) and `finish` (gather every node's
//! evidence, judge, post).
//!
//! Each stage wires crates together: the plan is scope's, the schedule and its assignment of
//! targets to nodes the runner's (`prgate_runner::schedule::assignment`, with the scheduled
//! nodes that sent nothing back: `Assignment::silent`), whether the node jobs ran to their end
//! GitHub's (`prgate_github::actions::JobsResult::completed`), a split run's job plan merged by
//! the runner (`prgate_runner::job::merge_node_job`), the progress table report's
//! (`prgate_report::progress`), the verdict the gate's (`prgate_gate::BaseSide::judge`), and the
//! checks of a final verdict that never reported too (`prgate_gate::pending`); a merge queue's
//! commit is judged by scope (`prgate_scope::queue`, wired by `crate::trigger::queue`); a PR
//! the gate says not to start (`prgate_gate::BaseSide::not_started`: the base moved) is run on
//! no node, every check recorded not run (`prgate_runner::run::every_check_not_run`). The
//! state folder's files are named once ([`StateFolder`]). Every stage after the pin runs under
//! [`guarded`], so an error, a panic or a signal is posted as the `error` status.
//!
//! What it leaves to others: the flags (`super`), posting to the PR (`super::reporter`), the
//! trigger's decisions (`prgate_github::trigger`, called by `crate::trigger`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;

use prgate_gate::evidence::Evidence;
use prgate_report::status::error_status;
use prgate_runner::node::NodeProfile;
use prgate_runner::run::DEFAULT_COMMON_RECIPE_PATH;
use prgate_runner::schedule::assignment::Assignment;
use prgate_runner::schedule::{History, Node as ScheduleNode};
use prgate_scope::{Plan, PlanRequest};

use super::reporter::{CommentObserver, Reporter, gpu_time_words};
use super::{Settings, write};
use crate::gate::Outcome;
use crate::run::{ExecutorSettings, LocalRun, RunFiles};
use crate::trigger::Decision;
use prgate_gate::JobPlan;
use prgate_github::GitHub;
use prgate_github::event::Event;
use prgate_github::pin::{Pinned, QueuePin};
use prgate_report::progress::CheckStates;
use prgate_scope::queue::QueueVerdict;

/// What the trigger gave.
enum Pin {
    /// No run starts (the reason is on stderr).
    NoRun,
    /// Nothing needs to run: a merge queue's commit keeps the PR's result (its status posted).
    Settled,
    /// A run starts: the reporter that will never let the status stay pending, and the files.
    Started(Arc<Reporter>, Vec<String>),
}

/// The state folder (`--state`, docs/workflow.md): the start stage writes it, the run and
/// finish stages read it; each of its files is named here once (the pin's name is
/// `prgate_github::pin`'s, which writes it).
struct StateFolder<'a>(&'a Path);

/// The plan (`prgate plan --format json`'s), which the node jobs and the finish stage read.
const PLAN_FILE: &str = "plan.json";
/// Which node runs which targets (`prgate_schedule`'s `Assignment`).
const SCHEDULE_FILE: &str = "schedule.json";
/// The nodes with work, for the workflow's matrix of node jobs.
const NODES_FILE: &str = "nodes.json";
/// The plan's estimate, as `prgate plan --estimate --format json` writes it.
const ESTIMATE_FILE: &str = "estimate.json";
/// A merge queue's commit whose PR result holds: why, and no node job runs.
const SETTLED_FILE: &str = "settled.txt";

impl StateFolder<'_> {
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn plan_path(&self) -> PathBuf {
        self.path(PLAN_FILE)
    }

    fn plan(&self) -> anyhow::Result<Plan> {
        crate::files::read_json(&self.plan_path(), "plan")
    }

    fn pin(&self) -> anyhow::Result<Pinned> {
        crate::files::read_json(&self.path(prgate_github::pin::PIN_FILE), "trigger")
    }

    fn schedule(&self) -> anyhow::Result<Assignment> {
        crate::files::read_json(&self.path(SCHEDULE_FILE), "schedule")
    }
}

/// The trigger. On a start, the pin is written to the state folder. A merge queue's commit is
/// judged first (`trigger::queue`): the PR's result holds (`success` is posted, and the state
/// folder gets `settled.txt`), or the paths that run again replace the PR's files.
fn pin(args: &Settings) -> anyhow::Result<Pin> {
    let state = args.state.clone();
    std::fs::create_dir_all(&state).with_context(|| format!("creating {}", state.display()))?;
    let event = read_event(args)?;
    let (runtime, github) = prgate_github::connect(&args.repository)?;
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
        match judge_queue(args, &runtime, &github, &pinned, &queue, &files)? {
            QueueVerdict::Holds(description) => {
                settle(args, &runtime, &github, &pinned, &files, &description)?;
                return Ok(Pin::Settled);
            }
            QueueVerdict::Rerun { files: again, note } => {
                eprintln!("prgate: {note}");
                files = again;
                if let Some(queue) = pinned.merge_group.as_mut() {
                    queue.note = Some(note);
                }
            }
        }
    }
    prgate_github::pin::write_pin(&state, &pinned, &files)?;
    eprintln!(
        "prgate: run #{} at {} (started by {})",
        pinned.number, pinned.sha, pinned.triggered_by
    );
    Ok(Pin::Started(Reporter::new(args, runtime, github, pinned), files))
}

/// The event: `--event FILE`, or a dispatch from the command line (`--pr`, `--sha`, `--actor`).
fn read_event(args: &Settings) -> anyhow::Result<Event> {
    match (&args.event, args.pr, &args.sha) {
        (Some(path), _, _) => crate::files::read_json(path, "event"),
        (None, Some(pr), Some(sha)) => {
            let actor = args.actor.as_deref().context("a dispatch needs --actor (GITHUB_ACTOR)")?;
            Ok(Event::dispatch(pr, sha, actor))
        }
        _ => anyhow::bail!("give --event FILE, or --pr N --sha SHA"),
    }
}

/// The merge queue's judgement of the pinned merge commit; an error is also posted as the
/// `error` status there (the queue waits on it).
fn judge_queue(
    args: &Settings,
    runtime: &tokio::runtime::Runtime,
    github: &GitHub,
    pinned: &Pinned,
    queue: &QueuePin,
    files: &[String],
) -> anyhow::Result<QueueVerdict> {
    let context = prgate_report::status::DEFAULT_CONTEXT;
    let judged = runtime
        .block_on(crate::trigger::queue::judge(github, &args.repo, pinned, queue, files, context));
    if let Err(error) = &judged {
        let settings = args.status_settings();
        let status = error_status(&format!("{error:#}"), &settings);
        let posted = runtime.block_on(crate::publish::set_status(github, &pinned.sha, &status));
        if let Err(also) = posted {
            eprintln!("prgate: could not post the error status: {also:#}");
        }
    }
    judged
}

/// The PR's result holds for the merge commit: `success` posted there with `description`, and
/// the state folder says so (the pin, `settled.txt`, no nodes).
fn settle(
    args: &Settings,
    runtime: &tokio::runtime::Runtime,
    github: &GitHub,
    pinned: &Pinned,
    files: &[String],
    description: &str,
) -> anyhow::Result<()> {
    let settings = args.status_settings();
    let status = prgate_report::status::queue_holds(description, &settings);
    runtime.block_on(crate::publish::set_status(github, &pinned.sha, &status))?;
    let description = status.description;
    let state = StateFolder(&args.state);
    prgate_github::pin::write_pin(state.0, pinned, files)?;
    write(&state.path(SETTLED_FILE), &(description.clone() + "\n"))?;
    write(&state.path(NODES_FILE), "[]\n")?;
    eprintln!("prgate: merge queue: {description}");
    Ok(())
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
pub(super) fn all(args: &Settings) -> anyhow::Result<Outcome> {
    let (reporter, files) = match pin(args)? {
        Pin::NoRun => return Ok(Outcome::NotPass),
        Pin::Settled => return Ok(Outcome::Pass),
        Pin::Started(reporter, files) => (reporter, files),
    };
    guarded(&reporter, || pipeline(args, &reporter, files))
}

/// `--stage start`: the trigger, the plan, the schedule onto the nodes, and the pending status
/// and comment. Writes `nodes.json` (the nodes with work) and `schedule.json`.
pub(super) fn start(args: &Settings) -> anyhow::Result<Outcome> {
    let (reporter, files) = match pin(args)? {
        Pin::NoRun => return Ok(Outcome::NotPass),
        Pin::Settled => return Ok(Outcome::Pass),
        Pin::Started(reporter, files) => (reporter, files),
    };
    guarded(&reporter, || {
        let (plan, base) = make_plan(args, &reporter, files)?;
        let nodes = read_nodes(args)?;
        let state = StateFolder(&args.state);
        // A run not started (the finish stage records why) is scheduled on no node.
        let assignment = if base.not_started().is_some() {
            Assignment::default()
        } else {
            let estimate = prgate_runner::estimate::estimate_plan(
                &args.repo,
                &plan,
                &nodes,
                &History::default(),
            )?;
            let output = crate::estimate::output(&estimate, &nodes, 0);
            let words = prgate_report::estimate::estimate_words(&output);
            reporter.update(|state| state.estimate = Some(words.clone()));
            write(&state.path(ESTIMATE_FILE), &(serde_json::to_string_pretty(&output)? + "\n"))?;
            Assignment::of(&estimate, Some(words))
        };
        let names: Vec<&str> = assignment.nodes().collect();
        write(&state.path(NODES_FILE), &(serde_json::to_string(&names)? + "\n"))?;
        write(&state.path(SCHEDULE_FILE), &(serde_json::to_string_pretty(&assignment)? + "\n"))?;
        reporter.update(|state| state.nodes = names.iter().map(|&name| name.to_owned()).collect());
        reporter.post_progress()?;
        eprintln!("prgate: scheduled on {}", serde_json::to_string(assignment.by_node())?);
        Ok(Outcome::Pass)
    })
}

/// `--stage run`: this node's share of the schedule, into `<work>/results/<node>`. Talks to
/// no one: the finish stage reports.
pub(super) fn node_run(args: &Settings) -> anyhow::Result<Outcome> {
    let state = StateFolder(&args.state);
    let (plan, pinned, schedule) = (state.plan()?, state.pin()?, state.schedule()?);
    let node = crate::files::read_node_profile(&args.node)?;
    let models = schedule.targets(node.name());
    let results = args.work.join("results").join(node.name());
    std::fs::create_dir_all(results.join("evidence"))
        .with_context(|| format!("creating {}", results.display()))?;
    if models.is_empty() {
        eprintln!("prgate: nothing is scheduled on {}", node.name());
        return Ok(Outcome::Pass);
    }
    let base = crate::gate::base_side(&args.repo, &plan)?;
    let events = results.join("events.jsonl");
    let summary = local_run(args, &plan, (&base, &pinned), &node, None)
        .run(&results, Some(&events), Some(models), &args.reuse(&results))
        .context("running this node's models")?;
    for note in &summary.notes {
        eprintln!("note: {note}");
    }
    eprintln!("prgate: {} steps recorded on {}", summary.recorded, node.name());
    Ok(Outcome::Pass)
}

/// `--stage finish`: the evidence of every node job gathered, judged and posted; `error` when
/// a job failed or was cancelled, a scheduled node sent nothing, or a check never reported.
pub(super) fn finish(args: &Settings) -> anyhow::Result<Outcome> {
    let state = StateFolder(&args.state);
    let pinned = state.pin()?;
    let (runtime, github) = prgate_github::connect(&args.repository)?;
    let reporter = Reporter::new(args, runtime, github, pinned);
    guarded(&reporter, || {
        let plan_path = state.plan_path();
        anyhow::ensure!(plan_path.is_file(), "the start stage ended before it made a plan");
        let plan = state.plan()?;
        let base = crate::gate::base_side(&args.repo, &plan)?;
        let drift = drift_alarms(args, &plan, &base);
        reporter.update(|state| {
            state.plan = Some(plan.clone());
            state.drift = drift;
        });
        let schedule = if state.path(SCHEDULE_FILE).is_file() {
            state.schedule()?
        } else {
            Assignment::default()
        };
        reporter.update(|state| {
            state.nodes = schedule.nodes().map(str::to_owned).collect();
            state.estimate = schedule.estimate().map(str::to_owned);
        });
        let Gathered { mut evidence, job } = gather(&args.evidence, &plan)?;
        let silent = schedule.silent(&evidence);
        evidence.extend(schedule.unplaced_evidence(&plan));
        if let Some((reason, detail)) = base.not_started() {
            evidence.extend(prgate_runner::run::every_check_not_run(&plan, reason, &detail));
        }
        reporter.update(|state| {
            state.progress = prgate_report::progress::from_evidence(&plan, &evidence);
            state.image = prgate_report::comment::Header::image_of(&evidence);
            state.gpu_time = gpu_time_words(&args.evidence);
        });
        if let Some(result) = args.jobs.as_ref().filter(|result| !result.completed()) {
            anyhow::bail!(
                "the node jobs ended as '{}': what they recorded is shown, the rest did not run",
                result.as_str()
            );
        }
        anyhow::ensure!(silent.is_empty(), "no evidence came back from {}", silent.join(", "));
        judge_and_post(args, &reporter, &plan, &base, job.as_ref(), &evidence)
    })
}

/// What the node jobs sent back.
struct Gathered {
    evidence: Vec<Evidence>,
    /// Their job plans, merged.
    job: Option<JobPlan>,
}

/// The evidence and job plans of the node jobs' results folders `dirs` (each `DIR/evidence`,
/// or `DIR` itself); a folder that is not there is skipped (the finish stage names its node).
fn gather(dirs: &[PathBuf], plan: &Plan) -> anyhow::Result<Gathered> {
    let mut gathered = Gathered { evidence: Vec::new(), job: None };
    for dir in dirs {
        let records = dir.join("evidence");
        let records = if records.is_dir() { records } else { dir.clone() };
        if !records.is_dir() {
            // Nothing came back from that job: `finish` names its node.
            continue;
        }
        let (_files, found) = crate::gate::read_evidence(&records)?;
        if let Some(node_job) = crate::gate::read_job_in(dir, plan)? {
            let merged = prgate_runner::job::merge_node_job(gathered.job.take(), node_job, &found);
            gathered.job = Some(merged);
        }
        gathered.evidence.extend(found);
    }
    Ok(gathered)
}

/// The nodes of `--nodes FILE` (`[[node]]` tables of `name`, `hardware`, and optionally `gpus`
/// and `checkpoints`), else this node's profile.
fn read_nodes(args: &Settings) -> anyhow::Result<Vec<ScheduleNode>> {
    let Some(path) = &args.nodes else {
        return Ok(vec![ScheduleNode::from(&crate::files::read_node_profile(&args.node)?)]);
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the nodes {}", path.display()))?;
    Ok(prgate_runner::schedule::nodes_file::parse(&text, &path.display().to_string())?)
}

/// The plan from the base side's manifest, over the PR's files as the API listed them; the
/// reporter keeps it (the caller posts the pending status and the comment once it has the
/// estimate).
fn make_plan(
    args: &Settings,
    reporter: &Arc<Reporter>,
    files: Vec<String>,
) -> anyhow::Result<(Plan, prgate_gate::BaseSide)> {
    let pinned = &reporter.pinned;
    prgate_scope::git::require_commits(
        &args.repo,
        &[("the PR's head", &pinned.sha), ("the base", &pinned.base_sha)],
        &format!(" (git fetch origin pull/{}/head)", pinned.number),
    )?;
    let base_sha = if pinned.base_is_exact() {
        pinned.base_sha.clone()
    } else {
        let base = ("the base", pinned.base_sha.as_str());
        prgate_scope::git::newest_base(&args.repo, base, &pinned.base_ref)?
    };
    if base_sha != pinned.base_sha {
        eprintln!(
            "prgate: the base branch {} is at {base_sha}, past GitHub's base.sha {}: planned against it",
            pinned.base_ref, pinned.base_sha
        );
    }
    let sides = (base_sha.as_str(), pinned.sha.as_str());
    let request = PlanRequest::pinned(&args.repo, sides, &files, pinned.files_truncated)
        .context("the PR's file list")?;
    let mut plan = prgate_scope::plan(&request)?;
    // A merge queue's run says why it runs what it runs; the trigger, a label it did not let
    // count.
    if let Some(note) = pinned.merge_group.as_ref().and_then(|queue| queue.note.clone()) {
        plan.warnings.push(note);
    }
    plan.warnings.extend(pinned.notes.iter().cloned());
    let plan_path = StateFolder(&args.state).plan_path();
    write(&plan_path, &(serde_json::to_string_pretty(&plan)? + "\n"))?;
    let base = crate::gate::base_side(&args.repo, &plan)?;
    let drift = drift_alarms(args, &plan, &base);
    reporter.update(|state| {
        state.plan = Some(plan.clone());
        state.progress = prgate_report::progress::planned(&plan);
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
fn drift_alarms(args: &Settings, plan: &Plan, base: &prgate_gate::BaseSide) -> Vec<String> {
    let Some(dir) = history_dir(args) else { return Vec::new() };
    crate::history::alarms(&dir, plan, &base.config)
}

/// The gate on `evidence`, then the final comment and status.
fn judge_and_post(
    args: &Settings,
    reporter: &Reporter,
    plan: &Plan,
    base: &prgate_gate::BaseSide,
    job: Option<&JobPlan>,
    evidence: &[Evidence],
) -> anyhow::Result<Outcome> {
    let title = Some(reporter.pinned.title.as_str());
    let verdict = base
        .judge(plan, job, evidence, title, prgate_gate::Completion::Final)
        .map_err(|error| anyhow::anyhow!("evidence record {}: {}", error.record, error.problem))?;
    write(&args.work.join("verdict.json"), &(serde_json::to_string_pretty(&verdict)? + "\n"))?;
    reporter.update(|state| {
        state.reuse = job
            .and_then(|job| prgate_report::rerun::Reuse::of(job, evidence))
            .map(|reuse| reuse.words());
    });
    // The run is over: a check still pending will never report.
    if let Some(never) = prgate_gate::pending::NeverReported::of(&verdict) {
        return Err(never.into());
    }
    reporter.post_final(&verdict)?;
    if let Some(dir) = history_dir(args) {
        let pinned = &reporter.pinned;
        let facts = prgate_runner::history::RunFacts {
            pr: pinned.number,
            title: &pinned.title,
            tested_commit: &pinned.sha,
            base_commit: plan.base_side_commit(),
            merge_queue: pinned.merge_group.is_some(),
            run_url: args.run_url.as_deref(),
        };
        // A history that cannot be written does not fail the PR's run: it is said, and the run
        // goes on.
        match prgate_runner::history::save_run(&dir, &facts, &verdict, evidence) {
            Ok(saved) => eprintln!("prgate: {saved}"),
            Err(error) => eprintln!("prgate: the history: {error}"),
        }
    }
    Ok(Outcome::of(&verdict))
}

/// Everything after the pin, on this node; any error here is posted as the `error` status.
fn pipeline(
    args: &Settings,
    reporter: &Arc<Reporter>,
    files: Vec<String>,
) -> anyhow::Result<Outcome> {
    let node = crate::files::read_node_profile(&args.node)?;
    reporter.update(|state| {
        state.nodes = vec![node.name().to_owned()];
        state.image = Some(node.image().name.clone());
    });
    let (plan, base) = make_plan(args, reporter, files)?;
    if let Some((reason, detail)) = base.not_started() {
        let evidence = prgate_runner::run::every_check_not_run(&plan, reason, &detail);
        reporter.update(|state| {
            state.progress = prgate_report::progress::from_evidence(&plan, &evidence);
        });
        return judge_and_post(args, reporter, &plan, &base, None, &evidence);
    }
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
    let comment = CommentObserver {
        reporter,
        plan: &plan,
        every: args.update_every,
        state: Mutex::new((CheckStates::default(), Instant::now())),
    };
    run_observed(args, &node, &base, &results, &comment).context("running the plan")?;
    reporter.update(|state| {
        state.progress = comment.progress();
        state.gpu_time = gpu_time_words(std::slice::from_ref(&results));
    });
    let (_files, evidence) = crate::gate::read_evidence(&results.join("evidence"))?;
    let job = crate::gate::read_job_in(&results, &plan)?;
    judge_and_post(args, reporter, &plan, &base, job.as_ref(), &evidence)
}

/// The comment's plan run on this node into `results`, by the executor the command line names,
/// with `comment` observing the step loop.
fn run_observed(
    args: &Settings,
    node: &NodeProfile,
    base: &prgate_gate::BaseSide,
    results: &Path,
    comment: &CommentObserver<'_>,
) -> anyhow::Result<()> {
    let (plan, pinned) = (comment.plan, &comment.reporter.pinned);
    let events = args.work.join("events.jsonl");
    let reuse = args.reuse(results);
    match &args.run.executor {
        ExecutorSettings::Local => local_run(args, plan, (base, pinned), node, Some(comment))
            .run(results, Some(&events), None, &reuse)
            .map(|summary| {
                for note in &summary.notes {
                    eprintln!("note: {note}");
                }
            }),
        ExecutorSettings::Slurm(slurm) => {
            // The jobs read the plan the start of this stage wrote.
            let plan_path = StateFolder(&args.state).plan_path();
            let files = RunFiles {
                plan: &plan_path,
                node: &args.node,
                results,
                repo: &args.repo,
                events: Some(&events),
                title: Some(&pinned.title),
                common_recipe: DEFAULT_COMMON_RECIPE_PATH,
            };
            // The jobs get the PR's (vetted) accept-narrowing label as the flag, as a local run.
            let mut settings = args.run.clone();
            settings.accept_narrowing |= pinned.has_label(prgate_gate::job::ACCEPT_NARROWING_LABEL);
            crate::run::run_slurm(&settings, slurm, &files, plan, node, &reuse, Some(comment))
        }
    }
}

/// `plan` run on this node by the local executor, as `prgate run` runs it: the PR's title for
/// the gain rule, its `accept-narrowing` label besides the flag, and `observer` (the comment)
/// watching the step loop's events; the progress line on a terminal only when nothing watches.
fn local_run<'a>(
    args: &'a Settings,
    plan: &'a Plan,
    (base, pinned): (&'a prgate_gate::BaseSide, &'a Pinned),
    node: &'a NodeProfile,
    observer: Option<&'a dyn prgate_runner::results::StepObserver>,
) -> LocalRun<'a> {
    LocalRun {
        settings: &args.run,
        plan,
        node,
        repo: &args.repo,
        base,
        title: Some(&pinned.title),
        common_recipe: DEFAULT_COMMON_RECIPE_PATH,
        progress: observer.is_none() && std::io::IsTerminal::is_terminal(&std::io::stderr()),
        observer,
        label_accepts_narrowing: pinned.has_label(prgate_gate::job::ACCEPT_NARROWING_LABEL),
    }
}
