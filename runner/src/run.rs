//! The step loop (`prgate run`): a plan, the recipes from the PR's tree and this node's profile
//! turned into evidence, one record per finished step.
//!
//! Every command from the PR's tree (installs, pytest, the servers, the timing scripts, external
//! evaluators and benchmarks) runs where [`Isolation`] says: in the node profile's image through
//! the container engine (`crate::container`; the default of `prgate run`), or, for trusted trees
//! (the tests, the demo), on the host under [`ChildGroup`](crate::process::ChildGroup). The
//! run's containers are named by its run id and removed at its start (a killed attempt's) and
//! its end. Files a command hands back (JUnit XML, timings, metrics, results) are read only when
//! they are regular files of at most 64 MiB.
//!
//! # What a run does
//!
//! The base side is the plan's merge-base (else its base); the PR side is its head. Both are
//! exported once per run into `<work-dir>/trees/<commit>`, and the job plan is built from
//! them ([`crate::job`], written as `job.json`): every target (the common checks, then every
//! model of tier full or smoke that the PR does not remove, in the plan's order) and every step
//! it must account for. The step loop takes each target's steps from the job plan
//! (`run/steps/queue`) and never decides again which exist: a step the plan knows is `blocked`
//! is recorded `not-run` with the plan's reason (the PR removed the recipe its base side has:
//! `recipe-removed`; neither side has one: `no-recipe`; the PR's does not parse or is not
//! valid: `recipe-invalid`; base's file of a model base has, or of the common checks, is
//! there but not valid: `base-recipe-invalid`; what
//! [`Recipe::check_runs_on`](crate::recipe::Recipe::check_runs_on) says this node cannot run:
//! `hardware-absent`, `no-checkpoint` or `gated-dataset`), one it expects nothing of (a suite
//! the recipe selects nothing for, no timing script, no benchmark, no sweep) is `not-run`
//! (`nothing-to-check`), a step it queues that the recipe does not describe is `not-run`
//! (`other`: the plan and the recipe disagree), and the steps to run run phase by phase:
//!
//! 1. tests: the unit and kernel suites on each side under pytest with JUnit XML, in the side's
//!    tree, with the recipe's timeout;
//! 2. kernel timing (full tier): every script on each side; their kernels are recorded together
//!    per side as `<script>/<kernel>`;
//! 3. servers, when a step still needs one, each on a leased port with the node's checkpoint:
//!    both up at once on disjoint GPUs when the node has twice the recipe's `tp`, else one at
//!    a time (docs/recipe.md, "How the runner uses a recipe"). The base server has the
//!    monokernels on, except for a model new in the PR, whose baseline is SGLang's own path:
//!    the PR tree with the monokernel flag off. A server that is not healthy makes every step
//!    that needed it `not-run` (`crash` when it exited, `timeout` when it never became
//!    healthy, `other` when it could not be started; the log's tail in `detail`). While a
//!    side's server is up: its serving tests (which find it in `PRGATE_SERVER_URL`), then
//!    accuracy (full tier): each benchmark, built-in or external; a base result may come from
//!    the node's cache ([`crate::cache`]);
//! 4. speed: for each cell of the job plan (every concurrency of the sweep, the covered ones on
//!    the smoke tier), pairs of runs of the built-in client or the recipe's external benchmark
//!    until the gate's [`needs_another_pair`](prgate_gate::speed::needs_another_pair) says the
//!    cell is decided; every pair's `family` is the number of covered cells of the whole run,
//!    counted before the first model starts; a cell starts with the node's calibrated
//!    `speed-noise` when the cache has one;
//! 5. routing: each server's log against the recipe's routing pattern; then both servers are
//!    stopped.
//!
//! A step that ran but could not be judged is `not-run` too: its side's install failed
//! (`crash`); the base side's tree has no recipe file, or its recipe no command for a
//! benchmark, to take its commands from (`no-recipe`: they never come from the PR); a benchmark names a gated
//! dataset the base side's own recipe does not (`gated-dataset`); the command left no result
//! (`no-result`); pytest itself cannot start on the node (`harness`); the command timed out
//! (`timeout`) or stalled (`stalled`); the node failed it, e.g. a full disk (`node`).
//!
//! A model new in the PR has no base tree: its job plan has no base-side tests or kernel
//! timing (nothing is recorded for them), and its base server is the PR tree with monokernels
//! off. At the end, the run checks that the loop recorded every step the job plan expects
//! ([`RunError::Unrecorded`] when it did not: a fault of the loop, never a pass).
//!
//! Every step whose record the results directory already holds is skipped
//! ([`ResultsDir::completed_steps`]), so a run killed at any moment resumes where it stopped;
//! a speed cell goes on from the pairs it has. Every child's process group is written down in
//! `<results>/processes` while it runs, and a run first stops the groups an earlier run in the
//! same results directory left running (a runner killed with `SIGKILL` cannot stop its
//! children, which run in groups of their own). When the plan selects the common checks, the
//! common recipe (`test/e2e/common.toml`) runs first, on both sides. Before a side's first step
//! its tree is installed with the recipe's `install.command`, once per run.
//!
//! A whole-run time limit (`RunRequest::time_limit`) cuts every command to the time left; once
//! it has passed, the steps still to run are recorded `run-time-limit` without running.
//!
//! Every command also has a progress watchdog (`crate::process::ProgressWatch`): one whose log
//! and output folder do not change for the recipe's `timeouts.stall` (20 minutes unless it
//! says otherwise) is stopped and recorded `stalled`, a failure like `timeout`, whose detail
//! names the limit that ended it.
//!
//! # Provenance
//!
//! Every record names the node, the image (its digest when the profile pins one, else its
//! name), the base and PR commits, and the recipe's hash: the [`crate::key::Key`] of the recipe
//! file's bytes, `sha256:` and 64 hex digits (none when there is no recipe).
//!
//! The run's stages (the lock, the export and the job plan, what an earlier run judged taken
//! over, the preflight, the loop, the check that it recorded every step, the GPU time, the
//! cleanup) are `run/session`'s, each a function of its own.
//!
//! A run first takes the host lock ([`crate::lock`]: one run per node; `wait_lock` says how long
//! to wait for another) and refuses when the node's health ledger has it drained
//! ([`crate::health`]; a ledger that cannot be read refuses too), then, after the trees are
//! exported and the recipes read, runs the preflight ([`crate::preflight`]) unless it is off: a
//! finding that stops the whole run records every check of every target `not-run` with its
//! reason (`hardware-absent`, `node`, `no-checkpoint` or `other`), one whole-check record each;
//! a checkpoint missing on disk stops only the served steps of the models that need it
//! (`no-checkpoint`). Those records start with [`PREFLIGHT_PREFIX`]; a later run removes them
//! and runs their steps again, as it does a step that ran on a full disk ([`DISK_FULL_PREFIX`]).
//!
//! The executor is local: this node runs the whole plan, or the part
//! [`RunRequest::only_models`] names: the SLURM executor ([`crate::slurm`]) runs this loop
//! once per model, each in a job of its own.

mod emit;
mod exec;
mod failure;
mod leftovers;
mod memory;
pub(crate) mod progress;
mod server;
mod session;
mod steps;
mod topology;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use prgate_gate::GateConfig;
use prgate_gate::evidence::{
    Check, Evidence, NotRunReason, Outcome, Provenance, SCHEMA_VERSION, Side,
};
use prgate_gate::job::Target;
use prgate_scope::plan::Plan;

use crate::export::{ExportError, export_tree};
use crate::job::{Job, JobRequest, RecipePaths};
use crate::lock::LockError;
use crate::node::NodeProfile;
use crate::preflight::Thresholds;
use crate::process::ProcessError;
use crate::results::{Part, ResultsDir, ResultsError, StepId};
use crate::reuse::ReuseMode;
pub use exec::Isolation;
use failure::StepFailure;
use session::{Facts, Selection, Session};

/// Where a model's recipe is in the PR's tree unless the request says otherwise.
pub const DEFAULT_RECIPE_PATH: &str = "test/e2e/{model}.toml";
/// Where the common checks' recipe is in the PR's tree unless the request says otherwise.
pub const DEFAULT_COMMON_RECIPE_PATH: &str = "test/e2e/common.toml";
/// The name of the common checks in [`RunRequest::only_models`] (and in the results' file
/// names): no model is named so. The schedule's, whose assignment names targets so too.
pub use prgate_schedule::schedule::assignment::COMMON_CHECKS;

/// Whether `name` names a target of `plan` as [`RunRequest::only_models`] (`--only-model`)
/// takes it: one of the plan's models, or [`COMMON_CHECKS`].
pub fn names_a_target(plan: &Plan, name: &str) -> bool {
    name == COMMON_CHECKS || plan.models.iter().any(|model| model.name == name)
}

/// What a run is of and where its evidence goes: the part of a request the local step loop
/// ([`RunRequest`]) and the SLURM executor ([`crate::slurm::SlurmRequest`]) share, and what
/// [`build_job`] makes the job plan from.
#[derive(Debug, Clone, Copy)]
pub struct RunInputs<'a> {
    pub plan: &'a Plan,
    /// The git repository that holds both commits (the SLURM executor reads the recipes of a
    /// job that did not complete from it, to know the steps it left).
    pub repo: &'a Path,
    pub node: &'a NodeProfile,
    /// The results directory ([`ResultsDir`]); with the SLURM executor, on a filesystem every
    /// compute node sees at this path.
    pub results: &'a Path,
    /// The JSON-lines event stream, when wanted (the SLURM executor passes its jobs' events
    /// on to it).
    pub events: Option<&'a Path>,
    /// Where the recipes are in the PR tree.
    pub recipes: RecipePaths<'a>,
    /// A maintainer accepted the PR's narrowing of the base recipe's contract (the
    /// `accept-narrowing` label; `docs/recipe.md`): the job plan records it for the gate.
    pub accept_narrowing: bool,
}

/// What to run, where, and where the evidence goes.
#[derive(Debug, Clone, Copy)]
pub struct RunRequest<'a> {
    pub inputs: RunInputs<'a>,
    /// The gate's settings: when a speed cell is decided.
    pub gate: &'a GateConfig,
    /// Whether the PR must show a speed gain (its title type): a cell stays open until that
    /// question is decided too.
    pub gain_required: bool,
    /// The Python interpreter that runs pytest (`python3`).
    pub python: &'a Path,
    /// The whole run's time limit: once it has passed, every step still to run is recorded
    /// `run-time-limit` without running, and running commands are given no more than the time
    /// left.
    pub time_limit: Option<Duration>,
    /// Show progress on standard error (a terminal).
    pub progress: bool,
    /// Where commands run: the node's container, or (trusted trees only) the host.
    pub isolation: &'a Isolation,
    /// How long to wait for the host lock when another run holds it (`None`: refuse at once).
    pub wait_lock: Option<Duration>,
    /// Whether (and where) the node is checked before any install.
    pub preflight: &'a PreflightMode,
    /// Who else watches the step loop's events as they happen (the PR comment).
    pub observer: Option<&'a dyn crate::results::StepObserver>,
    /// Run only these models of the plan, and the common checks only when it holds
    /// [`COMMON_CHECKS`]; `None` runs them all. A speed pair's `family` still counts the
    /// covered cells of every model, so a run split by model (a SLURM job per model) records
    /// what one whole run would.
    pub only_models: Option<&'a [String]>,
    /// Whether the run takes over what an earlier run of the same commits judged, and saves
    /// what it judged for a later one ([`crate::reuse`], docs/rerun.md).
    pub reuse: &'a ReuseMode,
}

/// Whether a run checks the node first ([`crate::preflight`]).
#[derive(Debug, Clone)]
pub enum PreflightMode {
    /// No preflight (the tests and the demo, which have no GPU).
    Off,
    /// Check, reading device nodes and sysfs under `root` (`/` on a node).
    On { root: PathBuf, thresholds: Thresholds },
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Steps run and recorded by this run.
    pub recorded: usize,
    /// Steps skipped because an earlier run recorded them.
    pub skipped: usize,
    /// What the run could not do and did not record, for the user.
    pub notes: Vec<String>,
    /// Of the skipped steps, those another results directory measured ([`crate::reuse`]):
    /// never more than `skipped`.
    pub reused: usize,
}

/// Why a run stopped before its end. A step that fails is evidence, not an error: these are
/// the problems that leave no step to record.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Results(#[from] ResultsError),
    #[error("exporting {commit}: {source}")]
    Export { commit: String, source: ExportError },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Process(#[from] ProcessError),
    #[error("cannot watch for signals: {0}")]
    Signals(std::io::Error),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(
        "node {node} is drained: it takes no work until it is admitted\n  {summary}\nhint: {hint}",
        hint = crate::health::how_to_readmit(node)
    )]
    Drained { node: String, summary: String },
    #[error(
        "the health ledger of node {node}: {source}\nhint: a ledger that cannot be read is never read as healthy; mend or move the file"
    )]
    Health { node: String, source: crate::health::HealthError },
    /// The step loop ended with steps of the job plan it did not record: a fault of the loop,
    /// which takes every step from the plan (the run's evidence is incomplete, never a pass).
    #[error(
        "the step loop left {} step(s) of the job plan without a record: {}\nhint: this is a fault of prgate's step loop; the results directory does not account for the job plan",
        steps.len(),
        steps.join("; ")
    )]
    Unrecorded { steps: Vec<String> },
}

/// Refuses to run on a node its health ledger drained (docs/node.md): the same ledger the
/// SLURM executor's `--exclude` and the workflow's `prgate node status` read, by this
/// machine's name for it ([`crate::health::ledger_name`]).
fn refuse_drained(node: &NodeProfile) -> Result<(), RunError> {
    let name = crate::health::ledger_name(node);
    let health = crate::health::Ledger::new(&crate::health::health_dir(node), &name)
        .and_then(|ledger| ledger.health())
        .map_err(|source| RunError::Health { node: name.clone(), source })?;
    if health.is_drained() {
        return Err(RunError::Drained { node: name, summary: health.summary() });
    }
    Ok(())
}

/// Runs `request.inputs.plan` on this node; returns once every step is recorded or skipped.
/// Its stages are `session`'s, in this order.
pub fn run(request: &RunRequest<'_>) -> Result<RunSummary, RunError> {
    let mut session = Session::open(request)?;
    if session.nothing_to_run()? {
        return Ok(session.summary);
    }
    // What the run must produce, once, before anything runs.
    let exported = build_job(&request.inputs)?;
    session.results.write_job(&exported.job.plan)?;
    let family = exported.job.plan.family;
    let selection = Selection::of(request, &exported);
    let facts = Facts::of(request);
    session.take_over(&selection, &exported.job, &facts)?;
    let accuracy_family = exported.job.plan.accuracy_family();
    let mut runner = session.runner(&selection, family, accuracy_family)?;
    let failure = session::preflight(&mut runner, &selection);
    let stops_run = failure.as_ref().filter(|failure| failure.blocks_run());
    let times = match stops_run {
        Some(failure) => {
            session::stop_for_preflight(&mut runner, &selection, &facts, failure)?;
            None
        }
        None => Some(session::run_targets(&mut runner, &selection, &facts, failure.as_ref())?),
    };
    let skipped = runner.finish();
    session.count_skipped(&skipped)?;
    let Some(times) = times else { return Ok(session.summary) };
    session.check_recorded(&selection)?;
    session.save_gpu_time(times, &facts);
    session.save_for_reuse(&selection, family, &facts)?;
    Ok(session.close())
}

/// A job plan and the trees it was made from.
#[derive(Debug)]
pub struct Exported {
    pub job: Job,
    pub base_tree: PathBuf,
    pub pr_tree: PathBuf,
}

/// The job plan of `source` (its results and events are not used), from both sides' trees
/// exported afresh into the node's work folder (the SLURM executor needs the list before its
/// jobs start, too).
pub fn build_job(source: &RunInputs<'_>) -> Result<Exported, RunError> {
    let plan = source.plan;
    let trees = source.node.work_dir().join("trees");
    let base_commit = plan.base_side_commit();
    let base_tree = export(source.repo, base_commit, &trees)?;
    let pr_tree = if plan.head.sha == base_commit {
        base_tree.clone()
    } else {
        export(source.repo, &plan.head.sha, &trees)?
    };
    let job = Job::build(&JobRequest {
        plan,
        base_tree: &base_tree,
        pr_tree: &pr_tree,
        recipes: source.recipes,
        node: source.node,
        accept_narrowing: source.accept_narrowing,
    });
    Ok(Exported { job, base_tree, pr_tree })
}

/// The start of the detail of a step the preflight stopped: such a step is run again by a
/// later run (the node may have been mended).
pub const PREFLIGHT_PREFIX: &str = "preflight: ";

/// The start of the detail of a step that ran while its log folder's disk was full: its
/// outcome is the node's, not the suite's, and a later run runs it again.
pub const DISK_FULL_PREFIX: &str = "disk full: ";

/// The free space below which a step's log folder counts as full: a log, a JUnit file or a
/// result that could not be written makes whatever the step recorded meaningless.
const DISK_FULL_BELOW: u64 = 1 << 20;

/// The outcome of a step that ran with its output in `log_dir`: `outcome`, unless the disk
/// is full there, when it is the node's `not-run` (a crash, no result or "pytest cannot
/// start" would blame the code, or a harness, for the node's disk).
pub(crate) fn unless_disk_full(log_dir: &Path, outcome: Outcome) -> Outcome {
    if let Outcome::NotRun { reason, .. } = &outcome
        && !matches!(
            reason.kind(),
            prgate_gate::evidence::NotRunKind::Broken
                | prgate_gate::evidence::NotRunKind::CannotJudge
        )
    {
        return outcome;
    }
    match crate::preflight::free_bytes(log_dir) {
        Ok(free) if free < DISK_FULL_BELOW => Outcome::NotRun {
            reason: NotRunReason::Node,
            detail: format!(
                "{DISK_FULL_PREFIX}{} has {free} bytes free, so the step's output could not be written: the node's disk, not the code; free space there and run again (a rerun runs this step again)",
                log_dir.display()
            ),
            subject: None,
            failed_on: None,
        },
        _ => outcome,
    }
}

/// Whether a later run runs a recorded step again: the preflight stopped it, or it ran on a
/// full disk (the node may have been mended).
fn runs_again(record: &Evidence) -> bool {
    matches!(&record.outcome, Outcome::NotRun { detail, .. }
        if detail.starts_with(PREFLIGHT_PREFIX) || detail.starts_with(DISK_FULL_PREFIX))
}

/// Removes the records a run runs again ([`runs_again`]) before it starts: they are not
/// results, and a step that is now recorded in parts (a speed check's pairs) must not keep a
/// whole-check record beside them. A step stopped again is recorded again.
fn discard_runs_again(results: &ResultsDir) -> Result<(), RunError> {
    for (step, _record) in results.records()?.iter().filter(|(_, record)| runs_again(record)) {
        let path = results.evidence_path(step);
        std::fs::remove_file(&path).map_err(|source| RunError::Io { path, source })?;
    }
    Ok(())
}

/// The folder of the running prgate, as a host step's `PATH` ends with it (so that a trusted
/// recipe can name `prgate` as a container's would); `None` when it has no such folder or its
/// path cannot stand in a `PATH` (not UTF-8, or holding a `:`).
pub fn own_folder() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    exe.parent().and_then(Path::to_str).filter(|dir| !dir.contains(':')).map(str::to_owned)
}

/// The checks a model's tier runs, and the `not-run` records of a target that does not run (no
/// node can take it; a run not started): the schedule's (where the unschedulable reasons are),
/// as `crate::run::…` before.
pub use prgate_schedule::schedule::assignment::{
    every_check_not_run, not_run_evidence, planned_checks,
};

/// About how many steps a run takes, for the progress line's estimate: the job plan's steps
/// that produce evidence, a speed cell counting as its expected pairs.
fn expected_steps(targets: &[&Target]) -> usize {
    targets
        .iter()
        .flat_map(|target| target.evidence_steps())
        .map(|step| match step.part() {
            Some(Part::Cell { .. }) => crate::schedule::EXPECTED_PAIRS as usize,
            _ => 1,
        })
        .sum()
}

/// Exports `commit` afresh into `<trees>/<commit>`: a tree left by an earlier run (perhaps cut
/// short, perhaps written into by its tests) is replaced.
fn export(repo: &Path, commit: &str, trees: &Path) -> Result<PathBuf, RunError> {
    let dest = trees.join(commit);
    if dest.exists() {
        std::fs::remove_dir_all(&dest)
            .map_err(|source| RunError::Io { path: dest.clone(), source })?;
    }
    std::fs::create_dir_all(trees)
        .map_err(|source| RunError::Io { path: trees.to_path_buf(), source })?;
    export_tree(repo, commit, &dest)
        .map_err(|source| RunError::Export { commit: commit.to_owned(), source })?;
    Ok(dest)
}

/// A record of `outcome` for one step.
fn evidence(
    model: Option<&str>,
    check: Check,
    side: Side,
    provenance: &Provenance,
    outcome: Outcome,
) -> Evidence {
    Evidence {
        schema_version: SCHEMA_VERSION,
        model: model.map(str::to_owned),
        check,
        side,
        provenance: provenance.clone(),
        outcome,
    }
}

/// A `not-run` outcome.
fn not_run(reason: NotRunReason, detail: impl Into<String>, subject: Option<&str>) -> Outcome {
    Outcome::NotRun {
        reason,
        detail: detail.into(),
        subject: subject.map(str::to_owned),
        failed_on: None,
    }
}

/// What a cell's records hold so far.
#[derive(Debug, Default)]
struct RecordedCell {
    /// Its pairs by index, in order.
    pairs: Vec<(u32, prgate_gate::speed::Pair)>,
    /// Its calibrated noise.
    noise: Option<prgate_gate::speed::Calibration>,
}

/// The speed records of a model, by concurrency: the pairs a resumed cell goes on from.
fn recorded_pairs(
    results: &ResultsDir,
    model: &str,
) -> Result<BTreeMap<u32, RecordedCell>, RunError> {
    let mut cells: BTreeMap<u32, RecordedCell> = BTreeMap::new();
    for (_step, record) in results.records()? {
        if record.model.as_deref() != Some(model) {
            continue;
        }
        match record.outcome {
            Outcome::SpeedPair {
                concurrency,
                index,
                base_tpot_ms,
                pr_tpot_ms,
                base_runs_ms,
                ..
            } => {
                let pair = match base_runs_ms {
                    Some([before, after]) => {
                        prgate_gate::speed::Pair::bracketed(before, pr_tpot_ms, after)
                    }
                    None => prgate_gate::speed::Pair::single(base_tpot_ms, pr_tpot_ms),
                };
                cells.entry(concurrency).or_default().pairs.push((index, pair));
            }
            Outcome::SpeedNoise { concurrency, log_ratio_variance, samples } => {
                cells.entry(concurrency).or_default().noise =
                    Some(prgate_gate::speed::Calibration {
                        log_ratio_variance,
                        samples: samples.unwrap_or(prgate_gate::speed::LEGACY_CALIBRATION_SAMPLES),
                    });
            }
            _ => {}
        }
    }
    for cell in cells.values_mut() {
        cell.pairs.sort_by_key(|(index, _)| *index);
    }
    Ok(cells)
}

/// Whether any of `steps` has no record yet.
fn any_missing(completed: &BTreeSet<StepId>, steps: &[StepId]) -> bool {
    steps.iter().any(|step| !completed.contains(step))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::tests::{model, plan};
    use prgate_scope::plan::Tier;

    #[test]
    fn a_target_is_a_model_of_the_plan_or_the_common_checks() {
        let plan = plan(vec![model("kimi", Tier::Smoke, false)], false);
        for (name, named) in [("kimi", true), (COMMON_CHECKS, true), ("glm", false), ("", false)] {
            assert_eq!(names_a_target(&plan, name), named, "{name:?}");
        }
    }

    #[test]
    fn a_target_no_node_can_take_is_a_not_run_record_per_planned_check() {
        let plan = plan(vec![model("kimi", Tier::Smoke, false)], true);
        let records =
            not_run_evidence(&plan, Some("kimi"), NotRunReason::NoCheckpoint, "no node: n1: x");
        let checks: Vec<(Check, Side)> =
            records.iter().map(|record| (record.check, record.side)).collect();
        // The smoke tier's checks, each whole-check record on the PR side, speed on both.
        let expect = [
            (Check::UnitTests, Side::Pr),
            (Check::KernelTests, Side::Pr),
            (Check::ServingTests, Side::Pr),
            (Check::Routing, Side::Pr),
            (Check::Speed, Side::Both),
        ];
        assert_eq!(planned_checks(&plan.models[0]).len(), expect.len());
        assert_eq!(checks, expect);
        for record in &records {
            assert_eq!(record.model.as_deref(), Some("kimi"));
            assert_eq!(record.provenance.base_commit.as_deref(), Some(plan.base_side_commit()));
            assert_eq!(record.outcome, not_run(NotRunReason::NoCheckpoint, "no node: n1: x", None));
        }
        let common = not_run_evidence(&plan, None, NotRunReason::HardwareAbsent, "none");
        assert_eq!(common.len(), 1);
        assert_eq!((common[0].model.as_deref(), common[0].check), (None, Check::CommonTests));
        assert!(not_run_evidence(&plan, Some("gone"), NotRunReason::HardwareAbsent, "").is_empty());
        // A run not started: every running model's checks and the common checks.
        let all = every_check_not_run(&plan, NotRunReason::BaseMoved, "moved");
        assert_eq!(all.len(), expect.len() + 1);
        assert!(
            all.iter()
                .all(|record| record.outcome == not_run(NotRunReason::BaseMoved, "moved", None))
        );
    }
}
