//! How long each model's run takes on a GPU node, and which node runs which model.
//!
//! Pure: plain data in, plain data out, no I/O. The runner reads the recipes from head's tree
//! (`prgate_runner::estimate`), the binary the node profiles, the nodes file and the history
//! files (`prgate plan --estimate`); this module decides.
//!
//! - [`estimate_model`] and [`estimate_common`]: a job's GPU time, from the steps the recipe
//!   gives the model's tier (`Recipe::steps`, the rule the job plan follows) and the constants
//!   below, or better from the durations of its steps in past runs
//!   ([`History`], read from the runner's event stream). Every part of an estimate says where
//!   its number came from.
//! - [`schedule`]: the jobs onto nodes. A model is one job (its base and PR sides run on one
//!   node), and a model runs only on a node whose hardware its recipe supports (and, when the
//!   node's profile says, that has its GPUs and checkpoint). Longest-processing-time-first,
//!   then a local search of moves and swaps, then an exact branch-and-bound search within a
//!   fixed budget; the result comes with a lower bound on every schedule's makespan.
//! - [`assignment`]: which node runs which targets, as `prgate ci`'s stages share it.
//!
//! What it leaves to others: reading files (the binary), running the jobs (the runner and,
//! later, the cluster's scheduler). The rest of this page is `docs/schedule.md`.
//!
#![doc = include_str!("../../docs/schedule.md")]

pub mod assignment;
pub mod cost;
mod history;
pub mod nodes_file;
mod search;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use prgate_gate::evidence::{Check, NotRunReason, Side};
use prgate_gate::job::{Expect, ExpectedStep, Part as StepPart};
use prgate_scope::plan::ModelPlan;

use crate::node::NodeProfile;
use crate::recipe::common::CommonRecipe;
use crate::recipe::{Blocker, Recipe};

pub use history::{History, HistoryError};

/// A server's start, until it answers its health check; how many a model takes is
/// [`cost::counts`]'s.
pub const SERVER_STARTUP: Duration = Duration::from_secs(10 * 60);
/// A released server taking its memory back (SGLang's resume, vLLM's wake-up) and its warm-up
/// request: tens of seconds on a real node, where a load takes minutes.
pub const SERVER_WAKE: Duration = Duration::from_secs(30);
/// The gateway probe before a server starts in a container (`docs/container.md`; 3.7 s
/// measured on the demo's node).
pub const GATEWAY_PROBE: Duration = Duration::from_secs(4);
/// Installing one side's tree with the recipe's `install.command`.
pub const INSTALL: Duration = Duration::from_secs(5 * 60);
/// One pytest suite (unit, kernel or serving) on one side; the common checks' session too.
pub const TEST_SUITE: Duration = Duration::from_secs(5 * 60);
/// One kernel timing script on one side.
pub const KERNEL_TIMING_SCRIPT: Duration = Duration::from_secs(5 * 60);
/// One accuracy benchmark run (one repeat) against one server.
pub const ACCURACY_BENCHMARK: Duration = Duration::from_secs(20 * 60);
/// The repeats an accuracy benchmark takes before the gate decides it, a side (the recipe's
/// `repeats` when it is lower): from the gate's simulation (`bench/accuracy-rule.md`), an
/// unchanged PR takes 1.4 on GSM8K-sized, 2.1 on GPQA-sized and 3.2 on AIME-sized benchmarks
/// on average (at most 2, 3 and 5 in 90% of them); a drop of twice the tolerance takes 5–12.
pub const EXPECTED_ACCURACY_REPEATS: u32 = 3;
/// The pairs a speed cell takes before the gate decides it (the runner's progress estimate,
/// from the gate's simulation: 4.9 on average at a CV of 2%).
pub const EXPECTED_PAIRS: u32 = 5;
/// The block pairs a speed cell takes in the blocked design (a server with no memory API; from
/// `prgate_gate::speed::blocks`'s simulation: 4.75 on average at a run CV of 2% and no
/// load-to-load effect, 3.7 at 1%, more with a load effect).
pub const EXPECTED_BLOCK_PAIRS: u32 = 5;
/// The time per output token assumed for a speed run.
pub const ASSUMED_TPOT: Duration = Duration::from_millis(20);
/// What a speed run takes besides its decoding: the client's start, prefill, the tail.
pub const SPEED_RUN_OVERHEAD: Duration = Duration::from_secs(30);

/// How long one job is expected to take, part by part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Estimate {
    duration: Duration,
    source: EstimateSource,
    parts: Vec<EstimatePart>,
}

/// Where an estimate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EstimateSource {
    /// Every part from the recipe and the constants.
    Recipe,
    /// Every part from past runs.
    History,
    /// Some parts from past runs, the others from the recipe.
    Mixed,
    /// No usable recipe: the runner records every check `not-run` at once.
    NoRecipe,
}

/// One part of an estimate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EstimatePart {
    pub part: Part,
    pub duration: Duration,
    pub source: PartSource,
}

/// Where a part's duration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PartSource {
    /// The recipe's shape and the constants.
    Recipe,
    /// The most recent past run that had this part. For [`Part::Install`] and
    /// [`Part::ServerStartups`], whose time a run counts inside the step that needed them: zero,
    /// because a part from history already holds it.
    History,
}

/// What a part of a job is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// Installing the trees of both sides.
    Install,
    /// Starting the base and PR servers.
    ServerStartups,
    /// A test suite (unit, kernel or serving) on one side.
    Tests { check: Check, side: Side },
    /// Every kernel timing script on one side.
    KernelTiming { side: Side },
    /// An accuracy benchmark against one side's server.
    Accuracy { benchmark: String, side: Side },
    /// Every pair of a speed cell.
    SpeedCell { concurrency: u32 },
    /// The common checks' pytest session on one side.
    CommonTests { side: Side },
}

/// A job: what runs on one node from start to end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The model, or `None` for the common checks.
    pub model: Option<String>,
    pub duration: Duration,
    pub needs: Needs,
}

/// What a node must have to run a job; `None` asks nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// The hardware the recipe supports: the node's must be one of them.
    pub hardware: Option<Vec<String>>,
    /// The recipe's tensor parallelism: the node needs this many GPUs, when its count is known.
    pub gpus: Option<u32>,
    /// The checkpoint: the node must have it, when its list is known.
    pub checkpoint: Option<String>,
}

/// A node that runs jobs one after the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    /// Its hardware, lowercase (`mi355x`).
    pub hardware: String,
    /// How many GPUs it has, when known.
    pub gpus: Option<u32>,
    /// The checkpoints it has, when known.
    pub checkpoints: Option<BTreeSet<String>>,
}

impl Node {
    /// `count` identical nodes of `hardware` (any case), named `node-1` to `node-N`, their
    /// GPUs and checkpoints unknown: the nodes of `prgate plan --estimate --nodes N`.
    pub fn identical(count: u32, hardware: &str) -> Vec<Node> {
        let hardware = hardware.to_lowercase();
        (1..=count)
            .map(|index| Node {
                name: format!("node-{index}"),
                hardware: hardware.clone(),
                gpus: None,
                checkpoints: None,
            })
            .collect()
    }
}

impl From<&NodeProfile> for Node {
    /// The node a profile describes: everything known (its GPUs and checkpoints).
    fn from(profile: &NodeProfile) -> Node {
        Node {
            name: profile.name().to_owned(),
            hardware: profile.hardware().to_owned(),
            gpus: Some(u32::try_from(profile.gpu_count()).unwrap_or(u32::MAX)),
            checkpoints: Some(profile.checkpoints().keys().cloned().collect()),
        }
    }
}

/// How hard [`schedule`] works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Longest-processing-time-first only.
    Lpt,
    /// LPT, then moves and swaps off the busiest node while they shorten it.
    LocalSearch,
    /// LPT and the local search, then branch and bound over assignments, stopped after
    /// [`EXACT_SEARCH_BUDGET`] search nodes.
    Exact,
}

/// The search nodes the exact search may visit before it settles for the best it found.
pub const EXACT_SEARCH_BUDGET: u64 = 2_000_000;

/// Jobs assigned to nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    nodes: Vec<NodeLoad>,
    unschedulable: Vec<Unschedulable>,
    makespan: Duration,
    lower_bound: LowerBound,
    optimal: bool,
}

/// One node's jobs, longest first, and their total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLoad {
    pub node: String,
    pub hardware: String,
    /// Indexes into the jobs given to [`schedule`].
    pub jobs: Vec<usize>,
    pub total: Duration,
}

/// A job no node can run, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unschedulable {
    /// An index into the jobs given to [`schedule`].
    pub job: usize,
    /// Each node's reason, in words.
    pub reason: String,
    /// What its checks' `not-run` records say: no checkpoint when some node lacks only that
    /// (it has the hardware and the GPUs), else absent hardware.
    pub not_run: NotRunReason,
}

/// A duration no schedule of the jobs onto the nodes can beat, and the argument that gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LowerBound {
    pub duration: Duration,
    pub basis: BoundBasis,
}

/// The argument behind a lower bound. Each holds for every schedule; the bound is the largest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoundBasis {
    /// There are no jobs.
    Nothing,
    /// The longest job runs on some node.
    LongestJob { job: usize },
    /// The jobs that only `nodes` nodes can run, spread evenly over them. With `nodes` = all
    /// nodes, the average load.
    Average { nodes: usize, jobs: usize },
    /// The job runs on one of its nodes, each of which also runs the jobs that only it can run.
    Forced { job: usize },
    /// Of the `top` longest of the jobs that only `nodes` nodes can run, some node runs at
    /// least `share` (pigeonhole); its load is at least the `share` shortest of them.
    Pigeonhole { nodes: usize, top: usize, share: usize },
}

/// Estimates one model's job: `recipe` is its recipe from the PR's tree, `None` when it has
/// none or it is not valid (the runner then records every check `not-run` at once).
///
/// Its parts follow the runner's steps for the model's tier (docs/schedule.md): for each part,
/// the most recent past run that had it (`history`) if any, else the recipe's shape and the
/// constants of this module.
pub fn estimate_model(model: &ModelPlan, recipe: Option<&Recipe>, history: &History) -> Estimate {
    estimate_model_on(model, recipe, history, &[])
}

/// [`estimate_model`] for a job that runs on one of nodes of `node_gpus` GPUs: its servers'
/// [`cost::Layout`] on the costliest of them (one at a time when none is known).
pub fn estimate_model_on(
    model: &ModelPlan,
    recipe: Option<&Recipe>,
    history: &History,
    node_gpus: &[Option<u32>],
) -> Estimate {
    let Some(recipe) = recipe else {
        return Estimate {
            duration: Duration::ZERO,
            source: EstimateSource::NoRecipe,
            parts: Vec::new(),
        };
    };
    // The steps the job plan would give the model, wherever it runs: what takes time.
    let planned = recipe.steps(model.tier, model.new, None).steps;
    let mut steps = StepParts::of(recipe, &planned);
    // A past run's own rounds, when it had repeats: what this model's benchmarks took.
    if steps.accuracy_rounds > 0
        && let Some(past) = history.accuracy_rounds(Some(&model.name))
    {
        steps.accuracy_rounds = past;
    }
    // Base's recipe is the contract: what it says of the memory API is what the run uses.
    let switching = cost::Switching::of(recipe);
    let pairs = match switching {
        cost::Switching::Wake => EXPECTED_PAIRS,
        cost::Switching::Blocked { .. } => EXPECTED_BLOCK_PAIRS,
    };
    let counts = cost::counts(&cost::Work {
        layout: cost::Layout::on_any_of(node_gpus.iter().copied(), recipe),
        pr_work_first: steps.pr_work_first,
        cells: steps.cells,
        pairs,
        probed: true,
        switching,
        accuracy_rounds: steps.accuracy_rounds,
    });
    if let Some(cell) = speed_cell_time(recipe, &counts, steps.cells) {
        for step in &planned {
            if let (Check::Speed, Some(StepPart::Cell { concurrency }), Expect::Run) =
                (step.check, &step.part, &step.expect)
            {
                steps.measured.push((Part::SpeedCell { concurrency: *concurrency }, cell));
            }
        }
    }

    let past = history.model_steps(Some(&model.name));
    let mut parts: Vec<EstimatePart> = (steps.measured.into_iter())
        .map(|(part, constant)| past_or(part, constant, &past))
        .collect();
    let any_history = parts.iter().any(|part| part.source == PartSource::History);
    let served_history =
        parts[steps.served_from..].iter().any(|part| part.source == PartSource::History);
    let setup = setup_parts(model, recipe, history, &counts, (any_history, served_history));
    parts.splice(0..0, setup);
    Estimate::from_parts(parts)
}

/// The parts of a model's planned steps that run (`Expect::Run`), before the speed cells' time
/// is known, and what the cost formula needs of them.
struct StepParts {
    /// Each part with its time from the recipe and the constants (the speed cells to come).
    measured: Vec<(Part, Duration)>,
    /// Where the parts against the servers start in `measured`.
    served_from: usize,
    /// The repeats of the benchmark that takes the most.
    accuracy_rounds: u32,
    cells: u32,
    /// Whether the PR's server has work before the speed phase (serving tests, accuracy).
    pr_work_first: bool,
}

impl StepParts {
    fn of(recipe: &Recipe, planned: &[ExpectedStep]) -> StepParts {
        let mut parts = StepParts {
            measured: Vec::new(),
            served_from: 0,
            accuracy_rounds: 0,
            cells: 0,
            pr_work_first: false,
        };
        let mut served_from = None;
        for step in planned.iter().filter(|step| step.expect == Expect::Run) {
            let side = step.side;
            if matches!(step.check, Check::ServingTests | Check::Accuracy | Check::Speed) {
                served_from.get_or_insert(parts.measured.len());
            }
            parts.pr_work_first |= matches!(step.check, Check::ServingTests | Check::Accuracy);
            match (step.check, &step.part) {
                (Check::UnitTests | Check::KernelTests | Check::ServingTests, _) => {
                    parts.measured.push((Part::Tests { check: step.check, side }, TEST_SUITE));
                }
                (Check::KernelTiming, _) => {
                    let scripts = count(recipe.kernel_timing().len());
                    let duration = KERNEL_TIMING_SCRIPT.saturating_mul(scripts);
                    parts.measured.push((Part::KernelTiming { side }, duration));
                }
                (Check::Accuracy, Some(StepPart::Named(name))) => {
                    let repeats = accuracy_repeats(recipe, name);
                    parts.accuracy_rounds = parts.accuracy_rounds.max(repeats);
                    let part = Part::Accuracy { benchmark: name.clone(), side };
                    parts.measured.push((part, ACCURACY_BENCHMARK * repeats));
                }
                (Check::Speed, Some(StepPart::Cell { .. })) => parts.cells += 1,
                _ => {}
            }
        }
        parts.served_from = served_from.unwrap_or(parts.measured.len());
        parts
    }
}

/// The repeats benchmark `name` (lowercase) is expected to take: [`EXPECTED_ACCURACY_REPEATS`],
/// or the recipe's `repeats` when it is lower.
fn accuracy_repeats(recipe: &Recipe, name: &str) -> u32 {
    let benchmark =
        recipe.accuracy().iter().find(|benchmark| benchmark.name.to_lowercase() == name);
    (benchmark.and_then(|benchmark| benchmark.repeats))
        .map_or(EXPECTED_ACCURACY_REPEATS, |cap| cap.min(EXPECTED_ACCURACY_REPEATS))
}

/// One speed cell's time: its runs, and its share of the speed phase's server switches (one at
/// a time); `None` without a sweep.
fn speed_cell_time(recipe: &Recipe, counts: &cost::Counts, cells: u32) -> Option<Duration> {
    let sweep = recipe.speed()?;
    // Requests go `concurrency` at a time: a run is about (warm-up + measured requests per
    // unit of concurrency) waves of `output_len` tokens each.
    let waves = sweep.warmup_per_concurrency.saturating_add(sweep.requests_per_concurrency);
    let run = ASSUMED_TPOT
        .saturating_mul(waves)
        .saturating_mul(sweep.output_len)
        .saturating_add(SPEED_RUN_OVERHEAD);
    let cells = cells.max(1);
    let switches = ((SERVER_STARTUP + GATEWAY_PROBE).saturating_mul(counts.speed_loads)
        + SERVER_WAKE.saturating_mul(counts.wakes))
        / cells;
    Some(run.saturating_mul(counts.runs / cells).saturating_add(switches))
}

/// The install and the server startups before the speed phase (the phase's own switches are
/// in its cells). The servers start in the first step that needs them, and a side's tree is
/// installed in its first step: past durations hold both (`history`: whether any part came
/// from past runs, and whether any part against the servers did).
fn setup_parts(
    model: &ModelPlan,
    recipe: &Recipe,
    history: &History,
    counts: &cost::Counts,
    (any_history, served_history): (bool, bool),
) -> Vec<EstimatePart> {
    let mut setup = Vec::new();
    if recipe.install().is_some() {
        // A new model's baseline runs in the PR's tree: one install.
        let trees = if model.new { 1 } else { 2 };
        setup.push(setup_part(Part::Install, INSTALL * trees, any_history));
    }
    // The loads before the speed phase: from past runs' load events when they have some, else
    // the constants. The accuracy rounds' wakes go with them.
    let (setup_loads, setup_wakes) = (counts.setup_loads, counts.setup_wakes);
    let mine = Some(model.name.as_str());
    setup.push(match history.load_time(mine) {
        Some(load) => EstimatePart {
            part: Part::ServerStartups,
            duration: load.saturating_mul(setup_loads)
                + history.wake_time(mine).unwrap_or(SERVER_WAKE).saturating_mul(setup_wakes),
            source: PartSource::History,
        },
        None => setup_part(
            Part::ServerStartups,
            (SERVER_STARTUP + GATEWAY_PROBE).saturating_mul(setup_loads)
                + SERVER_WAKE.saturating_mul(setup_wakes),
            served_history,
        ),
    });
    setup
}

/// Estimates the common checks' job: one pytest session on each side, after an install when
/// the common recipe has one; `recipe` is `None` when the PR's tree has none or it is not
/// valid.
pub fn estimate_common(recipe: Option<&CommonRecipe>, history: &History) -> Estimate {
    let Some(recipe) = recipe else {
        return Estimate {
            duration: Duration::ZERO,
            source: EstimateSource::NoRecipe,
            parts: Vec::new(),
        };
    };
    let steps = history.model_steps(None);
    let mut parts: Vec<EstimatePart> = [Side::Base, Side::Pr]
        .into_iter()
        .map(|side| past_or(Part::CommonTests { side }, TEST_SUITE, &steps))
        .collect();
    if recipe.install.is_some() {
        let any_history = parts.iter().any(|part| part.source == PartSource::History);
        parts.insert(0, setup_part(Part::Install, INSTALL * 2, any_history));
    }
    Estimate::from_parts(parts)
}

/// Schedules `jobs` onto `nodes`: every job that some node can run goes to exactly one such
/// node; the others are [`Unschedulable`], with the reason. Deterministic: the same jobs and
/// nodes in the same order give the same schedule.
pub fn schedule(jobs: &[Job], nodes: &[Node], method: Method) -> Schedule {
    let mut eligible: Vec<Vec<usize>> = Vec::with_capacity(jobs.len());
    let mut unschedulable = Vec::new();
    for (index, job) in jobs.iter().enumerate() {
        let fits: Vec<usize> =
            (0..nodes.len()).filter(|&node| job.needs.blocker(&nodes[node]).is_none()).collect();
        if fits.is_empty() {
            let lacks_checkpoint = nodes
                .iter()
                .any(|node| matches!(job.needs.blocker(node), Some(Blocker::NoCheckpoint { .. })));
            unschedulable.push(Unschedulable {
                job: index,
                reason: why_none_fits(&job.needs, nodes),
                not_run: if lacks_checkpoint {
                    NotRunReason::NoCheckpoint
                } else {
                    NotRunReason::HardwareAbsent
                },
            });
        }
        eligible.push(fits);
    }
    let times: Vec<u64> =
        jobs.iter().map(|job| whole_seconds(job.duration).min(LONGEST_JOB_SECONDS)).collect();
    let schedulable: Vec<usize> =
        (0..jobs.len()).filter(|&job| !eligible[job].is_empty()).collect();
    let problem = search::Problem {
        times: &times,
        eligible: &eligible,
        jobs: &schedulable,
        nodes: nodes.len(),
    };
    let (bound_seconds, basis) = search::lower_bound(&problem);
    let found = search::assign(&problem, method, bound_seconds);

    let mut loads: Vec<NodeLoad> = nodes
        .iter()
        .map(|node| NodeLoad {
            node: node.name.clone(),
            hardware: node.hardware.clone(),
            jobs: Vec::new(),
            total: Duration::ZERO,
        })
        .collect();
    for (&job, &node) in schedulable.iter().zip(&found.assignment) {
        loads[node].jobs.push(job);
        loads[node].total += Duration::from_secs(times[job]);
    }
    for load in &mut loads {
        load.jobs.sort_by(|&a, &b| times[b].cmp(&times[a]).then(a.cmp(&b)));
    }
    let makespan = loads.iter().map(|load| load.total).max().unwrap_or_default();
    Schedule {
        nodes: loads,
        unschedulable,
        makespan,
        lower_bound: LowerBound { duration: Duration::from_secs(bound_seconds), basis },
        optimal: found.optimal,
    }
}

/// Whole seconds, rounded up: the unit of the schedule, where a job of any length counts.
pub fn whole_seconds(duration: Duration) -> u64 {
    duration.as_secs().saturating_add(u64::from(duration.subsec_nanos() > 0))
}

impl Estimate {
    fn from_parts(parts: Vec<EstimatePart>) -> Estimate {
        let duration =
            parts.iter().fold(Duration::ZERO, |sum, part| sum.saturating_add(part.duration));
        let from = |source| parts.iter().any(|part| part.source == source);
        let source = match (from(PartSource::History), from(PartSource::Recipe)) {
            (true, false) => EstimateSource::History,
            (true, true) => EstimateSource::Mixed,
            (false, _) => EstimateSource::Recipe,
        };
        Estimate { duration, source, parts }
    }

    /// The whole job's time.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    pub fn source(&self) -> EstimateSource {
        self.source
    }

    /// The parts, setup first, then in the runner's order.
    pub fn parts(&self) -> &[EstimatePart] {
        &self.parts
    }
}

impl EstimateSource {
    /// Its name as the JSON and the tables show it.
    pub fn as_str(self) -> &'static str {
        match self {
            EstimateSource::Recipe => "recipe",
            EstimateSource::History => "history",
            EstimateSource::Mixed => "history+recipe",
            EstimateSource::NoRecipe => "no-recipe",
        }
    }
}

impl PartSource {
    /// Its name as the JSON shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            PartSource::Recipe => "recipe",
            PartSource::History => "history",
        }
    }
}

impl Part {
    /// The step of the event stream a past duration of this part is read from: check, side
    /// and part, where a speed cell's pairs count as one part `concurrency-C`.
    fn history_key(&self) -> Option<history::StepKey> {
        let key = |check, side, part: Option<String>| Some(history::StepKey { check, side, part });
        match self {
            Part::Install | Part::ServerStartups => None,
            Part::Tests { check, side } => key(*check, *side, None),
            Part::KernelTiming { side } => key(Check::KernelTiming, *side, None),
            Part::Accuracy { benchmark, side } => {
                key(Check::Accuracy, *side, Some(benchmark.clone()))
            }
            Part::SpeedCell { concurrency } => {
                key(Check::Speed, Side::Both, Some(history::speed_cell(*concurrency)))
            }
            Part::CommonTests { side } => key(Check::CommonTests, *side, None),
        }
    }
}

impl fmt::Display for Part {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = |side: &Side| side.as_str();
        match self {
            Part::Install => write!(formatter, "install"),
            Part::ServerStartups => write!(formatter, "server startups"),
            Part::Tests { check, side: which } => {
                write!(formatter, "{} ({})", check.describe(), side(which))
            }
            Part::KernelTiming { side: which } => {
                write!(formatter, "kernel timing ({})", side(which))
            }
            Part::Accuracy { benchmark, side: which } => {
                write!(formatter, "accuracy {benchmark} ({})", side(which))
            }
            Part::SpeedCell { concurrency } => {
                write!(formatter, "speed at concurrency {concurrency}")
            }
            Part::CommonTests { side: which } => {
                write!(formatter, "common tests ({})", side(which))
            }
        }
    }
}

impl Job {
    /// A model's job: its estimate, and what its recipe asks of a node (nothing without one).
    pub fn for_model(name: &str, estimate: &Estimate, recipe: Option<&Recipe>) -> Job {
        let needs = recipe.map_or_else(Needs::default, |recipe| Needs {
            hardware: Some(recipe.hardware().to_vec()),
            gpus: Some(recipe.tp()),
            checkpoint: Some(recipe.checkpoint().to_owned()),
        });
        Job { model: Some(name.to_owned()), duration: estimate.duration(), needs }
    }

    /// The common checks' job: any node runs it.
    pub fn for_common_checks(estimate: &Estimate) -> Job {
        Job { model: None, duration: estimate.duration(), needs: Needs::default() }
    }
}

impl Needs {
    /// Why `node` cannot run the job (the first reason, as a recipe's [`Blocker`]), or `None`
    /// when it can.
    pub fn blocker(&self, node: &Node) -> Option<Blocker> {
        if let Some(supported) = &self.hardware
            && !supported.contains(&node.hardware)
        {
            return Some(Blocker::HardwareAbsent {
                node: node.name.clone(),
                hardware: node.hardware.clone(),
                supported: supported.clone(),
            });
        }
        if let (Some(tp), Some(gpus)) = (self.gpus, node.gpus)
            && gpus < tp
        {
            let gpus = usize::try_from(gpus).unwrap_or(usize::MAX);
            return Some(Blocker::TooFewGpus { node: node.name.clone(), gpus, tp });
        }
        if let (Some(checkpoint), Some(has)) = (&self.checkpoint, &node.checkpoints)
            && !has.contains(checkpoint)
        {
            return Some(Blocker::NoCheckpoint {
                node: node.name.clone(),
                checkpoint: checkpoint.clone(),
            });
        }
        None
    }
}

impl Schedule {
    /// Every node, in the order given, with its jobs.
    pub fn nodes(&self) -> &[NodeLoad] {
        &self.nodes
    }

    /// The jobs no node can run.
    pub fn unschedulable(&self) -> &[Unschedulable] {
        &self.unschedulable
    }

    /// When the last node finishes: its total.
    pub fn makespan(&self) -> Duration {
        self.makespan
    }

    /// What no schedule can beat.
    pub fn lower_bound(&self) -> &LowerBound {
        &self.lower_bound
    }

    /// The makespan over the lower bound; `None` when the bound is zero (no work).
    pub fn ratio(&self) -> Option<f64> {
        let bound = self.lower_bound.duration.as_secs_f64();
        (bound > 0.0).then(|| self.makespan.as_secs_f64() / bound)
    }

    /// Whether no schedule has a shorter makespan: the search finished, or the makespan is the
    /// lower bound.
    pub fn optimal(&self) -> bool {
        self.optimal
    }

    /// The node each job runs on (an index into the nodes), `None` for an unschedulable one.
    pub fn node_of(&self, job: usize) -> Option<usize> {
        self.nodes.iter().position(|load| load.jobs.contains(&job))
    }
}

impl BoundBasis {
    /// The argument in words; `names` gives a job's name.
    pub fn describe(&self, name: impl Fn(usize) -> String, all_nodes: usize) -> String {
        let nodes_text = |nodes: usize| {
            if nodes == all_nodes {
                format!("the {nodes} node{}", if nodes == 1 { "" } else { "s" })
            } else {
                format!(
                    "the only {nodes} node{} that can run them",
                    if nodes == 1 { "" } else { "s" }
                )
            }
        };
        match self {
            BoundBasis::Nothing => "no jobs".to_owned(),
            BoundBasis::LongestJob { job } => format!("the longest job ({})", name(*job)),
            BoundBasis::Average { nodes, jobs } => {
                format!("{jobs} jobs spread evenly over {}", nodes_text(*nodes))
            }
            BoundBasis::Forced { job } => format!(
                "{} plus the jobs only its node can run, on the least busy of its nodes",
                name(*job)
            ),
            BoundBasis::Pigeonhole { nodes, top, share } => {
                format!("{share} of the {top} longest jobs share one of {}", nodes_text(*nodes))
            }
        }
    }
}

/// Why no node can run a job: each node's reason, or that there are no nodes.
fn why_none_fits(needs: &Needs, nodes: &[Node]) -> String {
    if nodes.is_empty() {
        return "there are no nodes".to_owned();
    }
    if let Some(supported) = &needs.hardware
        && nodes.iter().all(|node| !supported.contains(&node.hardware))
    {
        // Say it once, not once per node.
        let mut by_hardware: BTreeMap<&str, usize> = BTreeMap::new();
        for node in nodes {
            *by_hardware.entry(node.hardware.as_str()).or_default() += 1;
        }
        let have: Vec<String> =
            by_hardware.iter().map(|(hardware, count)| format!("{count} {hardware}")).collect();
        return format!(
            "no node has hardware the recipe supports ({}); the nodes are {}",
            supported.join(", "),
            have.join(", ")
        );
    }
    let reasons: Vec<String> = nodes
        .iter()
        .filter_map(|node| needs.blocker(node))
        .map(|blocker| blocker.to_string())
        .collect();
    reasons.join("; ")
}

/// A part from its most recent past run in `steps`, else `constant` from the recipe.
fn past_or(
    part: Part,
    constant: Duration,
    steps: &BTreeMap<history::StepKey, Duration>,
) -> EstimatePart {
    match part.history_key().and_then(|key| steps.get(&key)) {
        Some(&past) => EstimatePart { part, duration: past, source: PartSource::History },
        None => EstimatePart { part, duration: constant, source: PartSource::Recipe },
    }
}

fn setup_part(part: Part, constant: Duration, in_history: bool) -> EstimatePart {
    if in_history {
        EstimatePart { part, duration: Duration::ZERO, source: PartSource::History }
    } else {
        EstimatePart { part, duration: constant, source: PartSource::Recipe }
    }
}

fn count(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// The longest a job counts as, in seconds (about 35,000 years): sums of job times never
/// overflow.
const LONGEST_JOB_SECONDS: u64 = 1 << 40;
