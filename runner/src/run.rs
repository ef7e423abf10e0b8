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
//! exported once per run into `<work-dir>/trees/<commit>`. Then, for every model of tier full or
//! smoke that the PR does not remove, in the plan's order:
//!
//! 1. its recipe is read from the PR tree (`test/e2e/<model>.toml` unless the request says
//!    otherwise). Without one, every check is recorded `not-run` (`no-recipe`); a recipe that does
//!    not parse is `not-run` (`other`) with the error. [`Recipe::check_runs_on`] gives the checks
//!    this node cannot run, recorded `not-run` with the recipe's reasons;
//! 2. tests: each suite (unit, kernel, serving) on each side under pytest with JUnit XML, in
//!    the side's tree, with the recipe's timeout; a suite the recipe selects nothing for is
//!    `not-run` (`other`). Serving tests run while the side's server is up and find it in
//!    `PRGATE_SERVER_URL`;
//! 3. kernel timing (full tier): every script on each side; their kernels are recorded together
//!    per side as `<script>/<kernel>`;
//! 4. servers, when a step still needs one, each on a leased port with the node's checkpoint:
//!    both up at once on disjoint GPUs when the node has twice the recipe's `tp`, else one at
//!    a time (docs/recipe.md, "How the runner uses a recipe"). The base server has the
//!    monokernels on, except for a model new in the PR, whose baseline is SGLang's own path:
//!    the PR tree with the monokernel flag off. A server that is not healthy makes every step
//!    that needed it `not-run` (`crash` or `timeout`, the log's tail in `detail`);
//! 5. accuracy (full tier): each benchmark against each server, built-in or external; a base
//!    result may come from the node's cache ([`crate::cache`]);
//! 6. speed: for each concurrency of the sweep (the covered ones on the smoke tier), pairs of
//!    runs of the built-in client or the recipe's external benchmark until the gate's
//!    [`needs_another_pair`](prgate_gate::speed::needs_another_pair) says the cell is decided; every pair's `family` is the number of
//!    covered cells of the whole run, counted before the first model starts; a cell starts with
//!    the node's calibrated `speed-noise` when the cache has one;
//! 7. routing: each server's log against the recipe's routing pattern; then both servers are
//!    stopped.
//!
//! A model new in the PR has no base tree: its base-side tests and kernel timing are not run
//! (nothing is recorded for them), and its base server is the PR tree with monokernels off.
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
//! it has passed, the steps still to run are recorded `timeout` without running.
//!
//! # Provenance
//!
//! Every record names the node, the image (its digest when the profile pins one, else its
//! name), the base and PR commits, and the recipe's hash: `fnv1a64:` and the 16 hex digits of
//! the 64-bit FNV-1a hash of the recipe file's bytes (none when there is no recipe).
//!
//! A run first takes the host lock ([`crate::lock`]: one run per node; `wait_lock` says how long
//! to wait for another), then, after the trees are exported and the recipes read, runs the
//! preflight ([`crate::preflight`]) unless it is off: a finding that stops the whole run records
//! every planned step `not-run` with it; a checkpoint missing on disk stops only the models that
//! need it. Those records start with [`PREFLIGHT_PREFIX`] and are run again by a later run.
//!
//! The executor is local: this node runs the whole plan, or the part
//! [`RunRequest::only_models`] names: the SLURM executor ([`crate::slurm`]) runs this loop
//! once per model, each in a job of its own.

mod exec;
mod leftovers;
pub(crate) mod progress;
mod server;
mod steps;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use prgate_gate::GateConfig;
use prgate_gate::evidence::{
    Check, Evidence, NotRunReason, Outcome, Provenance, SCHEMA_VERSION, Side,
};
use prgate_scope::plan::{ModelPlan, Plan, Tier};

use crate::cache::Cache;
use crate::export::{ExportError, export_tree};
use crate::lock::{HostLock, LockError, lock_path};
use crate::node::NodeProfile;
use crate::preflight::{ImageCheck, Preflight, Probes, SystemCommands, Thresholds};
use crate::process::ProcessError;
use crate::recipe::Recipe;
use crate::recipe::common::CommonRecipe;
use crate::results::{EventWriter, ResultsDir, ResultsError, StepId};
pub use exec::Isolation;

/// Where a model's recipe is in the PR's tree unless the request says otherwise.
pub const DEFAULT_RECIPE_PATH: &str = "test/e2e/{model}.toml";
/// Where the common checks' recipe is in the PR's tree unless the request says otherwise.
pub const DEFAULT_COMMON_RECIPE_PATH: &str = "test/e2e/common.toml";
/// The name of the common checks in [`RunRequest::only_models`] (and in the results' file
/// names): no model is named so.
pub const COMMON_CHECKS: &str = "~common";

/// What to run, where, and where the evidence goes.
#[derive(Debug, Clone, Copy)]
pub struct RunRequest<'a> {
    pub plan: &'a Plan,
    /// The git repository that holds both commits.
    pub repo: &'a Path,
    pub node: &'a NodeProfile,
    /// The results directory ([`ResultsDir`]).
    pub results: &'a Path,
    /// The JSON-lines event stream, when wanted.
    pub events: Option<&'a Path>,
    /// Where a model's recipe is in the PR tree; `{model}` is the model's name.
    pub recipe_path: &'a str,
    /// The gate's settings: when a speed cell is decided.
    pub gate: &'a GateConfig,
    /// Whether the PR must show a speed gain (its title type): a cell stays open until that
    /// question is decided too.
    pub gain_required: bool,
    /// The Python interpreter that runs pytest (`python3`).
    pub python: &'a Path,
    /// Where the common checks' recipe is in the PR tree.
    pub common_recipe_path: &'a str,
    /// The whole run's time limit: once it has passed, every step still to run is recorded
    /// `timeout` without running, and running commands are given no more than the time left.
    pub time_limit: Option<Duration>,
    /// Show progress on standard error (a terminal).
    pub progress: bool,
    /// Where commands run: the node's container, or (trusted trees only) the host.
    pub isolation: &'a Isolation,
    /// How long to wait for the host lock when another run holds it (`None`: refuse at once).
    pub wait_lock: Option<Duration>,
    /// Whether (and where) the node is checked before any install.
    pub preflight: &'a PreflightMode,
    /// Run only these models of the plan, and the common checks only when it holds
    /// [`COMMON_CHECKS`]; `None` runs them all. A speed pair's `family` still counts the
    /// covered cells of every model, so a run split by model (a SLURM job per model) records
    /// what one whole run would.
    pub only_models: Option<&'a [String]>,
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
}

/// Runs `request.plan` on this node; returns once every step is recorded or skipped.
pub fn run(request: &RunRequest<'_>) -> Result<RunSummary, RunError> {
    crate::process::stop_all_on_signal().map_err(RunError::Signals)?;
    // One run per host: held until the run returns.
    let description = format!(
        "prgate run of {} into {}",
        request.plan.head.sha.get(..12).unwrap_or(&request.plan.head.sha),
        request.results.display()
    );
    let _lock = HostLock::acquire(&lock_path(request.node), &description, request.wait_lock)?;
    let results = ResultsDir::open(request.results)?;
    let events = request.events.map(EventWriter::create).transpose()?;
    let processes = leftovers::folder(results.root());
    let stopped_leftovers = leftovers::stop_leftovers(&processes);
    let plan = request.plan;
    let base_commit = plan.merge_base.clone().unwrap_or_else(|| plan.base.sha.clone());
    let pr_commit = plan.head.sha.clone();

    let models: Vec<&ModelPlan> = plan
        .models
        .iter()
        .filter(|model| matches!(model.tier, Tier::Full | Tier::Smoke) && !model.removed)
        .collect();
    let mut summary = RunSummary { notes: stopped_leftovers, ..RunSummary::default() };
    let chosen = |name: &str| request.only_models.is_none_or(|only| only.iter().any(|m| m == name));
    let common = plan.common.selected && chosen(COMMON_CHECKS);
    if !models.iter().any(|model| chosen(&model.name)) && !common {
        return Ok(summary);
    }

    let trees = request.node.work_dir().join("trees");
    let base_tree = export(request.repo, &base_commit, &trees)?;
    let pr_tree = if pr_commit == base_commit {
        base_tree.clone()
    } else {
        export(request.repo, &pr_commit, &trees)?
    };

    let recipes: Vec<RecipeSource> = models
        .iter()
        .map(|model| RecipeSource::read(&pr_tree, request.recipe_path, &model.name, &pr_commit))
        .collect();
    let family = covered_cells(&models, &recipes, request.node);
    let (models, recipes): (Vec<&ModelPlan>, Vec<RecipeSource>) =
        models.into_iter().zip(recipes).filter(|(model, _)| chosen(&model.name)).unzip();
    let node = request.node;
    let provenance = |recipe_hash: Option<String>| Provenance {
        node: Some(node.name().to_owned()),
        image_digest: Some(
            node.image().digest.clone().unwrap_or_else(|| node.image().name.clone()),
        ),
        base_commit: Some(base_commit.clone()),
        pr_commit: Some(pr_commit.clone()),
        recipe_hash,
    };

    let mut runner = steps::Runner {
        request,
        results: &results,
        events: events.as_ref(),
        completed: completed_steps(&results)?,
        summary: &mut summary,
        family,
        cache: Cache::new(node.cache_dir()),
        deadline: request.time_limit.map(|limit| Instant::now() + limit),
        progress: progress::Progress::new(
            request.progress,
            expected_steps(&models, &recipes, common),
        ),
        installed: BTreeMap::new(),
        exec: exec::Exec {
            isolation: request.isolation,
            node,
            processes: &processes,
            python: request.python,
        },
    };
    let removed = runner.exec.remove_leftovers();
    runner.summary.notes.extend(removed);

    // The preflight, before any install: what the node lacks is evidence, not a crash.
    let preflight = match request.preflight {
        PreflightMode::Off => Ok(()),
        PreflightMode::On { root, thresholds } => {
            let mut checkpoints: Vec<String> = recipes
                .iter()
                .filter_map(|recipe| match recipe {
                    RecipeSource::Parsed { recipe, .. } => Some(recipe.checkpoint().to_owned()),
                    _ => None,
                })
                .filter(|name| node.checkpoint_path(name).is_some())
                .collect();
            checkpoints.sort();
            checkpoints.dedup();
            let commands = SystemCommands::new(&results.root().join("logs").join("preflight"));
            let image_check: Option<&dyn ImageCheck> = match request.isolation {
                Isolation::Container { engine, .. } => Some(engine),
                Isolation::Host => None,
            };
            Preflight {
                node,
                checkpoints: &checkpoints,
                thresholds: *thresholds,
                probes: Probes { commands: &commands, root },
                image_check,
            }
            .run()
        }
    };
    let failure = preflight.err();
    if let Some(failure) = &failure {
        runner.summary.notes.push(format!("the preflight found: {}", failure.to_not_run().1));
    }
    if let Some(failure) = failure.as_ref().filter(|failure| failure.blocks_run()) {
        let (reason, detail) = failure.to_not_run();
        if common {
            let subject = steps::Subject { model: None, provenance: provenance(None) };
            runner.not_run_common(&subject, reason, &detail)?;
        }
        for (model, recipe) in models.iter().zip(&recipes) {
            let job = model_job(model, recipe, &base_tree, &pr_tree, &provenance);
            runner.not_run_model(&job, reason, &detail)?;
        }
        runner.progress.close();
        return Ok(summary);
    }

    if common {
        let common = CommonSource::read(&pr_tree, request.common_recipe_path, &pr_commit);
        let hash = match &common {
            CommonSource::Parsed(recipe) => Some(recipe.hash.clone()),
            CommonSource::Invalid { hash, .. } => Some(hash.clone()),
            CommonSource::Missing { .. } => None,
        };
        let subject = steps::Subject { model: None, provenance: provenance(hash) };
        runner.common(&subject, &common, &[(Side::Base, &base_tree), (Side::Pr, &pr_tree)])?;
    }
    for (model, recipe) in models.iter().zip(&recipes) {
        let base_side_tree = if model.new { None } else { Some(base_tree.as_path()) };
        let hash = match recipe {
            RecipeSource::Parsed { hash, .. } | RecipeSource::Invalid { hash, .. } => {
                Some(hash.clone())
            }
            RecipeSource::Missing { .. } => None,
        };
        let job = steps::ModelJob {
            model,
            recipe,
            base_tree: base_side_tree,
            pr_tree: &pr_tree,
            subject: steps::Subject {
                model: Some(model.name.clone()),
                provenance: provenance(hash),
            },
        };
        runner.model(&job)?;
    }
    runner.progress.close();
    let removed = runner.exec.remove_leftovers();
    runner.summary.notes.extend(removed);
    Ok(summary)
}

/// The start of the detail of a step the preflight stopped: such a step is run again by a
/// later run (the node may have been mended).
pub const PREFLIGHT_PREFIX: &str = "preflight: ";

/// The steps a run skips: those recorded, except those the preflight stopped.
fn completed_steps(results: &ResultsDir) -> Result<BTreeSet<StepId>, RunError> {
    Ok(results
        .records()?
        .into_iter()
        .filter(|(_step, record)| {
            !matches!(&record.outcome, Outcome::NotRun { detail, .. } if detail.starts_with(PREFLIGHT_PREFIX))
        })
        .map(|(step, _record)| step)
        .collect())
}

/// A model's job.
fn model_job<'j>(
    model: &'j ModelPlan,
    recipe: &'j RecipeSource,
    base_tree: &'j Path,
    pr_tree: &'j Path,
    provenance: &dyn Fn(Option<String>) -> Provenance,
) -> steps::ModelJob<'j> {
    let hash = match recipe {
        RecipeSource::Parsed { hash, .. } | RecipeSource::Invalid { hash, .. } => {
            Some(hash.clone())
        }
        RecipeSource::Missing { .. } => None,
    };
    steps::ModelJob {
        model,
        recipe,
        base_tree: if model.new { None } else { Some(base_tree) },
        pr_tree,
        subject: steps::Subject { model: Some(model.name.clone()), provenance: provenance(hash) },
    }
}

/// The checks a model's tier runs, in the order the report lists them; none for a model on no
/// tier or removed by the PR.
pub fn planned_checks(model: &ModelPlan) -> &'static [Check] {
    match model.tier {
        Tier::Full if !model.removed => &[
            Check::UnitTests,
            Check::KernelTests,
            Check::KernelTiming,
            Check::ServingTests,
            Check::Accuracy,
            Check::Speed,
            Check::Routing,
        ],
        Tier::Smoke if !model.removed => &[
            Check::UnitTests,
            Check::KernelTests,
            Check::ServingTests,
            Check::Speed,
            Check::Routing,
        ],
        _ => &[],
    }
}

/// About how many steps a run takes, for the progress line's estimate.
fn expected_steps(models: &[&ModelPlan], recipes: &[RecipeSource], common: bool) -> usize {
    let mut steps = if common { 2 } else { 0 };
    for (model, recipe) in models.iter().zip(recipes) {
        let RecipeSource::Parsed { recipe, .. } = recipe else {
            steps += 6;
            continue;
        };
        let full = model.tier == Tier::Full;
        // Unit, kernel and serving tests and routing on two sides.
        steps += 8;
        if full {
            steps += 2 + 2 * recipe.accuracy().len();
        }
        if let Some(sweep) = recipe.speed() {
            steps += sweep.concurrencies_for(!full).len() * progress::EXPECTED_PAIRS;
        }
    }
    steps
}

/// The common checks' recipe as the PR tree has it.
#[derive(Debug)]
enum CommonSource {
    Parsed(Box<ParsedCommon>),
    Missing { path: String },
    Invalid { error: String, hash: String },
}

/// A parsed common recipe and its hash.
#[derive(Debug)]
struct ParsedCommon {
    recipe: CommonRecipe,
    hash: String,
}

impl std::ops::Deref for ParsedCommon {
    type Target = CommonRecipe;

    fn deref(&self) -> &CommonRecipe {
        &self.recipe
    }
}

impl CommonSource {
    fn read(pr_tree: &Path, path: &str, pr_commit: &str) -> CommonSource {
        let Ok(bytes) = std::fs::read(pr_tree.join(path)) else {
            return CommonSource::Missing { path: path.to_owned() };
        };
        let hash = recipe_hash(&bytes);
        let short = pr_commit.get(..7).unwrap_or(pr_commit);
        match CommonRecipe::parse(&String::from_utf8_lossy(&bytes), &format!("{path} at {short}")) {
            Ok(recipe) => CommonSource::Parsed(Box::new(ParsedCommon { recipe, hash })),
            Err(error) => CommonSource::Invalid { error: error.to_string(), hash },
        }
    }
}

/// A model's recipe as the PR tree has it.
#[derive(Debug)]
enum RecipeSource {
    Parsed { recipe: Box<Recipe>, hash: String },
    Missing { path: String },
    Invalid { error: String, hash: String },
}

impl RecipeSource {
    fn read(pr_tree: &Path, recipe_path: &str, model: &str, pr_commit: &str) -> RecipeSource {
        let relative = recipe_path.replace("{model}", model);
        let Ok(bytes) = std::fs::read(pr_tree.join(&relative)) else {
            return RecipeSource::Missing { path: relative };
        };
        let hash = recipe_hash(&bytes);
        let short = pr_commit.get(..7).unwrap_or(pr_commit);
        let text = String::from_utf8_lossy(&bytes);
        match Recipe::parse(&text, &format!("{relative} at {short}")) {
            Ok(recipe) => RecipeSource::Parsed { recipe: Box::new(recipe), hash },
            Err(error) => RecipeSource::Invalid { error: error.to_string(), hash },
        }
    }
}

/// `fnv1a64:` and the 64-bit FNV-1a hash of `bytes` in 16 hex digits: stable across runs,
/// machines and Rust versions (std's hashers are not).
pub fn recipe_hash(bytes: &[u8]) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash =
        bytes.iter().fold(OFFSET, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(PRIME));
    format!("fnv1a64:{hash:016x}")
}

/// How many covered speed cells the run judges: every model's covered concurrencies whose
/// speed check this node can run.
fn covered_cells(models: &[&ModelPlan], recipes: &[RecipeSource], node: &NodeProfile) -> u32 {
    let mut cells = 0;
    for (_model, recipe) in models.iter().zip(recipes) {
        let RecipeSource::Parsed { recipe, .. } = recipe else { continue };
        let blocked = recipe
            .check_runs_on(node)
            .err()
            .is_some_and(|blockers| blockers.blocker_for(Check::Speed, None).is_some());
        if let (Some(sweep), false) = (recipe.speed(), blocked) {
            cells += u32::try_from(sweep.covered.len()).unwrap_or(u32::MAX);
        }
    }
    cells
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
    Outcome::NotRun { reason, detail: detail.into(), subject: subject.map(str::to_owned) }
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
    use super::recipe_hash;

    #[test]
    fn the_recipe_hash_is_fnv1a_64() {
        // The published FNV-1a test vectors.
        let cases = [("", "fnv1a64:cbf29ce484222325"), ("a", "fnv1a64:af63dc4c8601ec8c")];
        for (text, expect) in cases {
            assert_eq!(recipe_hash(text.as_bytes()), expect, "{text:?}");
        }
    }
}
