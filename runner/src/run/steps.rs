//! The steps of one model's job and of the common checks, each recorded (or skipped, when an
//! earlier run recorded it) through [`Runner::step`].
//!
//! Which steps there are is the job plan's: a target's steps are taken from its [`Queue`]
//! (`queue`), phase by phase; a step the plan knows the outcome of is recorded as it says, and
//! one it queues is run by the recipe's commands. The recipe says how to run a step, never
//! whether it exists. What it leaves to others: the job plan (`crate::job`), the run's stages
//! (`super::session`).

mod queue;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use prgate_gate::accuracy::{
    self as accuracy_rule, BenchmarkRepeats, Looks, SideResult, needs_another_repeat,
};
use prgate_gate::evidence::{
    Check, KernelSamples, NotRunReason, Outcome, Provenance, Repeat, Side,
};
use prgate_gate::speed::{Calibration, CellContext, Pair, blocks, judge_cell, needs_another_pair};
use prgate_scope::plan::ModelPlan;

use super::emit::{Emitter, ServerEvents};
use super::exec::{Command, Exec};
use super::memory::{self, MemoryApi};
use super::server::{
    Launch, LogWindow, RoutingRead, Server, ServerFailure, server_log_tail, side_routing,
    with_log_tail,
};
use super::{RunError, RunRequest, RunSummary, any_missing, evidence, not_run, recorded_pairs};
use crate::accuracy::{self, EvalConfig, gated, sgl_eval};
use crate::bench::{self, BenchConfig, Endpoint};
use crate::cache::{AccuracyKey, Cache, NoiseKey};
use crate::gpu_time::{Phase, PhaseClock, ServerDesign, ServersUsed};
use crate::job::{CommonSource, RecipeSource};
use crate::junit::{self, PytestCommand};
use crate::key::Key;
use crate::recipe::memory_api::MemoryApiKey;
use crate::recipe::timing::parse_timing_output;
use crate::recipe::{
    AccuracyBenchmark, Evaluator, ExternalSpeed, Install, Recipe, RoutingLogged, SpeedBenchmark,
    SpeedFormat, SpeedRun, SpeedSweep,
};
use crate::results::{Event, EventKind, Part, ResultsDir, StepId, StepStarted, now_ms};
use crate::schedule::cost::Layout;
use crate::untrusted::{self, MAX_RESULT_FILE};
use prgate_gate::job::{ExpectedStep, Target, whole_check_side};
use queue::{Queue, Queued};

/// A step's time limit when the recipe gives none.
const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(60 * 60);
/// The `model` sent to a server: SGLang serves any name it is given as its one model.
const SERVED_MODEL: &str = "default";

/// The run's state across models.
pub(super) struct Runner<'r> {
    pub request: &'r RunRequest<'r>,
    pub results: &'r ResultsDir,
    /// Where the step loop's events go: the event stream, the progress line, the caller.
    pub emit: Emitter<'r>,
    pub completed: BTreeSet<StepId>,
    pub summary: &'r mut RunSummary,
    pub family: u32,
    /// How many accuracy benchmarks the whole run judges together (the job plan's): the gate
    /// divides alpha over them.
    pub accuracy_family: u32,
    pub cache: Cache,
    /// When the run's time is up.
    pub deadline: Option<Instant>,
    /// The installs this run did, by tree and command: `Err` with why one failed.
    pub installed: BTreeMap<(PathBuf, Vec<String>), Result<(), String>>,
    /// Where commands run.
    pub exec: Exec<'r>,
    /// Which phase the wall time goes to (`crate::gpu_time`).
    pub clock: PhaseClock,
    /// In a model's speed phase, when its last speed record closed (or the phase began): the
    /// next record's step started then, so the records split the phase's time between them.
    pub speed_since: Option<u64>,
    /// How the last model's servers shared the node, for its GPU-time file (taken by the
    /// session after each model).
    pub servers_used: Option<ServersUsed>,
}

/// A step whose `step-started` is out, whose work runs before [`Runner::close_step`].
pub(super) struct OpenStep {
    id: StepId,
    started: StepStarted,
    log_dir: PathBuf,
    /// Why its work may not run: the run's time is up.
    expired: Option<String>,
}

/// Whose steps these are: a model's, or the common checks' (`model` is `None`).
pub(super) struct Subject {
    pub model: Option<String>,
    pub provenance: Provenance,
}

/// One model's job.
pub(super) struct ModelJob<'j> {
    pub model: &'j ModelPlan,
    pub recipe: &'j RecipeSource,
    /// What the base side runs ([`crate::recipe::contract::decide`]): its own recipe, or why
    /// the base side has nothing to run.
    pub base_recipe: Result<&'j Recipe, &'j str>,
    /// Whether the base side's results may go into the node's cache: both sides' recipes are
    /// the same file, so nothing of the PR's produced them.
    pub cacheable: bool,
    /// The base tree's own recipe: a gated dataset is fetched with the node's token only when
    /// it names it (a PR cannot point the token at another dataset).
    pub base_own: Option<&'j Recipe>,
    /// What the job plan expects of it.
    pub target: &'j Target,
    /// The base tree; `None` for a model new in the PR.
    pub base_tree: Option<&'j Path>,
    pub pr_tree: &'j Path,
    pub subject: Subject,
    /// The preflight found the recipe's checkpoint missing or empty on disk: the steps that
    /// need a server are recorded `not-run` with this reason and detail.
    pub no_checkpoint: Option<(NotRunReason, String)>,
}

impl ModelJob<'_> {
    fn name(&self) -> &str {
        &self.model.name
    }

    /// The tree of `side`'s tests and timing scripts: none on the base side of a model new in
    /// the PR, nor on `both`.
    fn tree(&self, side: Side) -> Option<&Path> {
        match side {
            Side::Base => self.base_tree,
            Side::Pr => Some(self.pr_tree),
            Side::Both => None,
        }
    }

    /// The tree each side's server runs in: a new model's baseline is the PR tree.
    fn server_tree(&self, side: Side) -> &Path {
        match side {
            Side::Base => self.base_tree.unwrap_or(self.pr_tree),
            Side::Pr | Side::Both => self.pr_tree,
        }
    }

    /// The recipe `side` runs: the PR side the PR's (`pr`), the base side its own commands.
    fn side_recipe<'a>(&'a self, pr: &'a Recipe, side: Side) -> Result<&'a Recipe, String> {
        match side {
            Side::Base => self.base_recipe.map_err(str::to_owned),
            Side::Pr | Side::Both => Ok(pr),
        }
    }
}

/// The index of a server side.
fn slot(side: Side) -> usize {
    usize::from(side != Side::Base)
}

impl Runner<'_> {
    /// Ends the loop: its progress line closed, the steps it skipped handed back.
    pub(super) fn finish(mut self) -> BTreeSet<StepId> {
        self.emit.close();
        std::mem::take(&mut self.emit.skipped)
    }

    /// Records one step: skips it when an earlier run did, else runs `work` in its log folder
    /// and writes its outcome. Once the run's time is up, a step is recorded `timeout`
    /// without running. Returns the outcome when the step ran.
    fn step(
        &mut self,
        subject: &Subject,
        check: Check,
        side: Side,
        part: Option<&Part>,
        work: impl FnOnce(&Path) -> Outcome,
    ) -> Result<Option<Outcome>, RunError> {
        let Some(open) = self.open_step(subject, check, side, part)? else { return Ok(None) };
        let outcome = match open.expired.clone() {
            Some(detail) => not_run(NotRunReason::RunTimeLimit, detail, None),
            None => work(&open.log_dir),
        };
        self.close_step(subject, part, open, outcome).map(Some)
    }

    /// Starts a step (its `step-started` goes out now, or at `speed_since` for a speed
    /// record), or skips it when an earlier run did it (`None`).
    fn open_step(
        &mut self,
        subject: &Subject,
        check: Check,
        side: Side,
        part: Option<&Part>,
    ) -> Result<Option<OpenStep>, RunError> {
        let id = StepId::new(subject.model.as_deref(), check, side, part.cloned());
        if self.completed.contains(&id) {
            self.emit.skipped(&id)?;
            return Ok(None);
        }
        let log_dir = self.results.step_log_dir(&id)?;
        let since = if check == Check::Speed { self.speed_since } else { None };
        let started = self.emit.started(&id, since)?;
        let expired = self.out_of_time();
        Ok(Some(OpenStep { id, started, log_dir, expired }))
    }

    /// Writes an open step's `outcome` and its `step-finished`.
    fn close_step(
        &mut self,
        subject: &Subject,
        part: Option<&Part>,
        open: OpenStep,
        outcome: Outcome,
    ) -> Result<Outcome, RunError> {
        // Whatever ran while the step's log folder was full is the node's, not the code's.
        let mut outcome = super::unless_disk_full(&open.log_dir, outcome);
        // A not-run record of a step with a part names it, so that it is the same step.
        if let Outcome::NotRun { subject, .. } = &mut outcome
            && subject.is_none()
        {
            *subject = part.map(ToString::to_string);
        }
        let model = subject.model.as_deref();
        let (check, side) = (open.id.check(), open.id.side());
        let record = evidence(model, check, side, &subject.provenance, outcome.clone());
        self.results.write(&record)?;
        let finished_ms = self.emit.finished(&open.id, open.started, &record)?;
        if check == Check::Speed && self.speed_since.is_some() {
            // The next speed record starts when this one closed: one clock reading for both.
            self.speed_since = Some(finished_ms);
        }
        self.summary.recorded += 1;
        self.completed.insert(open.id);
        Ok(outcome)
    }

    fn record(
        &mut self,
        subject: &Subject,
        check: Check,
        side: Side,
        part: Option<&Part>,
        outcome: Outcome,
    ) -> Result<(), RunError> {
        self.step(subject, check, side, part, |_log| outcome).map(drop)
    }

    fn done(&self, subject: &Subject, check: Check, side: Side, part: Option<&Part>) -> bool {
        self.completed.contains(&StepId::new(subject.model.as_deref(), check, side, part.cloned()))
    }

    /// Skips a step an earlier run recorded (saying so) and returns whether it did: for steps
    /// whose preparation (an install) should not happen when they are done.
    fn skip_if_done(
        &mut self,
        subject: &Subject,
        check: Check,
        side: Side,
        part: Option<&Part>,
    ) -> Result<bool, RunError> {
        if !self.done(subject, check, side, part) {
            return Ok(false);
        }
        let id = StepId::new(subject.model.as_deref(), check, side, part.cloned());
        self.emit.skipped(&id)?;
        Ok(true)
    }

    /// Why nothing more may start: the run's time limit has passed.
    fn out_of_time(&self) -> Option<String> {
        let deadline = self.deadline?;
        (Instant::now() >= deadline).then(|| {
            let limit = self.request.time_limit.unwrap_or_default();
            format!("the run's time limit ({}s) passed before this step could run", limit.as_secs())
        })
    }

    /// `limit`, cut to the time the run has left.
    fn limit(&self, limit: Duration) -> Duration {
        match self.deadline {
            Some(deadline) => limit.min(deadline.saturating_duration_since(Instant::now())),
            None => limit,
        }
    }

    /// Installs `tree` with `install` once per run; the outcome is remembered.
    fn install(
        &mut self,
        install: Option<&Install>,
        timeout: Option<Duration>,
        side: Side,
        tree: &Path,
    ) -> Result<(), String> {
        let Some(install) = install else { return Ok(()) };
        let argv = install.command();
        let key = (tree.to_path_buf(), argv.clone());
        if let Some(done) = self.installed.get(&key) {
            return done.clone();
        }
        let _phase = self.clock.enter(Phase::Install);
        let stem = Key::of(argv.join("\0").as_bytes()).short();
        let side_name = side_name(side);
        let log = self
            .results
            .root()
            .join("logs")
            .join("install")
            .join(format!("{side_name}-{stem}.log"));
        let out = log.with_extension("out");
        let command = Command {
            argv,
            tree,
            out: &out,
            env: self.exec.side_env(tree),
            datasets: None,
            log: log.clone(),
            timeout: self.limit(timeout.unwrap_or(DEFAULT_STEP_TIMEOUT)),
            gpus: &[],
            purpose: format!("{side_name}-install-{stem}"),
            server: None,
        };
        let outcome = std::fs::create_dir_all(&out)
            .map_err(|error| format!("{}: {error}", out.display()))
            .and_then(|()| {
                self.exec.run(&command).map_err(|outcome| match outcome {
                    Outcome::NotRun { detail, .. } => detail,
                    _ => String::new(),
                })
            })
            .and_then(
                |status| {
                    if status.success() { Ok(()) } else { Err(with_log_tail(status, &log)) }
                },
            )
            .map_err(|detail| format!("installing the {side_name} tree failed: {detail}"));
        self.installed.insert(key, outcome.clone());
        outcome
    }

    /// The common checks: the job plan's steps, one pytest session per side it queues over the
    /// common recipe's selections.
    pub(super) fn common(
        &mut self,
        subject: &Subject,
        recipe: &CommonSource,
        target: &Target,
        sides: &[(Side, &Path)],
    ) -> Result<(), RunError> {
        let queue = Queue::of(target);
        let CommonSource::Parsed { recipe, .. } = recipe else {
            return self.without_recipe(subject, &queue);
        };
        // The common recipe has no stall limit of its own.
        self.exec.stall = crate::process::StallLimit::default();
        for queued in queue.all() {
            let Some(step) = self.take(subject, queued)? else { continue };
            let tree = sides.iter().find(|(side, _)| *side == step.side).map(|&(_, tree)| tree);
            let (Some(tree), Check::CommonTests, None) = (tree, step.check, &step.part) else {
                self.record_not_described(subject, step)?;
                continue;
            };
            let side = step.side;
            if self.skip_if_done(subject, Check::CommonTests, side, None)? {
                continue;
            }
            let installed =
                self.install(recipe.install.as_ref(), recipe.install_timeout, side, tree);
            let timeout = self.limit(recipe.tests_timeout.unwrap_or(DEFAULT_STEP_TIMEOUT));
            let exec = self.exec;
            let run =
                TestRun { selection: &recipe.selections, tree, timeout, server: None, gpus: &[] };
            let purpose = format!("common-{}-tests", side_name(side));
            let _phase = self.clock.enter(Phase::Tests);
            self.step(subject, Check::CommonTests, side, None, |log| match installed {
                Ok(()) => pytest(&exec, &run, log, purpose),
                Err(detail) => not_run(NotRunReason::Crash, detail, None),
            })?;
        }
        Ok(())
    }

    /// Runs one model's job: its job plan's steps, phase by phase (tests, kernel timing, what
    /// needs the servers); what the plan knows before the run is recorded as it says.
    pub(super) fn model(&mut self, job: &ModelJob<'_>) -> Result<(), RunError> {
        let queue = Queue::of(job.target);
        let RecipeSource::Parsed { recipe, .. } = job.recipe else {
            return self.without_recipe(&job.subject, &queue);
        };
        // Every command of the model's steps is stopped when it stalls for the recipe's limit.
        self.exec.stall = recipe.timeouts().stall.unwrap_or_default();
        for phase in queue.phases() {
            match phase {
                queue::Phase::Tests => self.tests(job, recipe, &queue)?,
                queue::Phase::KernelTiming => self.kernel_timing(job, recipe, &queue)?,
                queue::Phase::Served => self.served(job, recipe, &queue)?,
            }
        }
        Ok(())
    }

    /// Records every check of the common checks as not run.
    pub(super) fn not_run_common(
        &mut self,
        subject: &Subject,
        reason: NotRunReason,
        detail: &str,
    ) -> Result<(), RunError> {
        let check = Check::CommonTests;
        let outcome = not_run(reason, detail, None);
        self.record(subject, check, whole_check_side(check), None, outcome)
    }

    /// Records every check of a model as not run (the preflight stopped it), one whole-check
    /// record each.
    pub(super) fn not_run_model(
        &mut self,
        job: &ModelJob<'_>,
        reason: NotRunReason,
        detail: &str,
    ) -> Result<(), RunError> {
        for check in job.target.checks() {
            let outcome = not_run(reason, detail, None);
            self.record(&job.subject, check, whole_check_side(check), None, outcome)?;
        }
        Ok(())
    }

    /// Takes a queued step: one the plan knows the outcome of is recorded as it says (`None`),
    /// one to run is handed back.
    fn take<'q>(
        &mut self,
        subject: &Subject,
        queued: &'q Queued<'_>,
    ) -> Result<Option<&'q ExpectedStep>, RunError> {
        match queued {
            Queued::Record { step, outcome } => {
                let part = step.part.as_ref();
                self.record(subject, step.check, step.side, part, outcome.clone())?;
                Ok(None)
            }
            Queued::Run(step) => Ok(Some(step)),
        }
    }

    /// Records a step the plan queues that the recipe does not describe (`not-run`, `other`).
    fn record_not_described(
        &mut self,
        subject: &Subject,
        step: &ExpectedStep,
    ) -> Result<(), RunError> {
        let part = step.part.as_ref();
        let id = StepId::new(subject.model.as_deref(), step.check, step.side, part.cloned());
        self.record(subject, step.check, step.side, part, queue::not_described(&id))
    }

    /// A target whose PR recipe is missing or not valid: the plan's steps are known (`blocked`)
    /// and recorded as it says; one it queues to run has no recipe to run by.
    fn without_recipe(&mut self, subject: &Subject, queue: &Queue<'_>) -> Result<(), RunError> {
        for queued in queue.all() {
            if let Some(step) = self.take(subject, queued)? {
                self.record_not_described(subject, step)?;
            }
        }
        Ok(())
    }

    /// Installs a side's tree with that side's recipe; the reason and detail when it cannot
    /// (no recipe on the base side to take the command from, or the install failed).
    fn install_side(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        side: Side,
        tree: &Path,
    ) -> Result<(), (NotRunReason, String)> {
        let recipe = job.side_recipe(recipe, side).map_err(|why| (NotRunReason::NoRecipe, why))?;
        self.install(recipe.install(), recipe.timeouts().install, side, tree)
            .map_err(|detail| (NotRunReason::Crash, detail))
    }

    /// The unit and kernel tests the job plan queues, each on its side (serving tests need
    /// the servers: see `served`).
    fn tests(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        queue: &Queue<'_>,
    ) -> Result<(), RunError> {
        let tests = recipe.tests();
        let timeouts = recipe.timeouts();
        for queued in queue.phase(queue::Phase::Tests) {
            let Some(step) = self.take(&job.subject, queued)? else { continue };
            let (check, side) = (step.check, step.side);
            let (selection, timeout) = match check {
                Check::UnitTests => (tests.unit.as_slice(), timeouts.unit_tests),
                Check::KernelTests => (tests.kernel.as_slice(), timeouts.kernel_tests),
                _ => (&[][..], None),
            };
            let tree = job.tree(side).filter(|_| !selection.is_empty() && step.part.is_none());
            let Some(tree) = tree else {
                self.record_not_described(&job.subject, step)?;
                continue;
            };
            if self.skip_if_done(&job.subject, check, side, None)? {
                continue;
            }
            let installed = self.install_side(job, recipe, side, tree);
            let timeout = self.limit(timeout.unwrap_or(DEFAULT_STEP_TIMEOUT));
            let gpus = recipe_gpus(self.request.inputs.node, recipe);
            let exec = self.exec;
            let run = TestRun { selection, tree, timeout, server: None, gpus: &gpus };
            let purpose = format!("{}-{}-{}", job.name(), side_name(side), check_slug(check));
            let _phase = self.clock.enter(Phase::Tests);
            self.step(&job.subject, check, side, None, |log| match installed {
                Ok(()) => pytest(&exec, &run, log, purpose),
                Err((reason, detail)) => not_run(reason, detail, None),
            })?;
        }
        Ok(())
    }

    /// The kernel timing the job plan queues: every script of the recipe, on each side.
    fn kernel_timing(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        queue: &Queue<'_>,
    ) -> Result<(), RunError> {
        for queued in queue.phase(queue::Phase::KernelTiming) {
            let Some(step) = self.take(&job.subject, queued)? else { continue };
            let side = step.side;
            let scripts = !recipe.kernel_timing().is_empty();
            let tree = job.tree(side).filter(|_| scripts && step.part.is_none());
            let (Some(tree), Check::KernelTiming) = (tree, step.check) else {
                self.record_not_described(&job.subject, step)?;
                continue;
            };
            if self.skip_if_done(&job.subject, Check::KernelTiming, side, None)? {
                continue;
            }
            let installed = self.install_side(job, recipe, side, tree);
            let side_recipe = job.side_recipe(recipe, side).unwrap_or(recipe);
            let timeout =
                self.limit(recipe.timeouts().kernel_timing.unwrap_or(DEFAULT_STEP_TIMEOUT));
            let gpus = recipe_gpus(self.request.inputs.node, recipe);
            let exec = self.exec;
            let purpose = format!("{}-{}-kernel-timing", job.name(), side_name(side));
            let _phase = self.clock.enter(Phase::Tests);
            self.step(&job.subject, Check::KernelTiming, side, None, |log| match installed {
                Ok(()) => timing(&exec, side_recipe, tree, log, timeout, &gpus, &purpose),
                Err((reason, detail)) => not_run(reason, detail, None),
            })?;
        }
        Ok(())
    }

    /// Everything that needs the servers and the job plan queues: serving tests, accuracy,
    /// speed and routing.
    fn served(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        queue: &Queue<'_>,
    ) -> Result<(), RunError> {
        let subject = &job.subject;
        let runs_any = queue.phase(queue::Phase::Served).any(|q| matches!(q, Queued::Run(_)));
        if let Some((reason, detail)) = job.no_checkpoint.clone().filter(|_| runs_any) {
            // The preflight found no checkpoint: nothing of this phase can start.
            for check in [Check::ServingTests, Check::Routing, Check::Accuracy, Check::Speed] {
                if queue.has(check) {
                    let outcome = not_run(reason, detail.clone(), None);
                    self.record(subject, check, whole_check_side(check), None, outcome)?;
                }
            }
            return Ok(());
        }
        let sides = [Side::Base, Side::Pr];
        let (needed, benchmarks) = self.served_steps(job, recipe, queue)?;
        let name = job.name().to_owned();
        let id =
            |check, side, part: Option<&Part>| StepId::new(Some(&name), check, side, part.cloned());
        let cells = self.open_cells(job, recipe, &queue.cells())?;
        let mut open_accuracy = false;
        for benchmark in &benchmarks {
            open_accuracy |= self.next_repeat(job, benchmark)?.is_some();
        }
        let other_steps: Vec<StepId> =
            needed.iter().filter(|step| step.check() != Check::Accuracy).cloned().collect();
        if !any_missing(&self.completed, &other_steps) && !open_accuracy && cells.is_empty() {
            // Everything the servers would do is recorded: skip them, and say so (a
            // benchmark's step by its repeats' records).
            for step in needed {
                let benchmark = step.part().and_then(Part::benchmark).map(str::to_owned);
                let Some(benchmark) = benchmark.filter(|_| step.check() == Check::Accuracy) else {
                    self.emit.skipped(&step)?;
                    continue;
                };
                let repeats: Vec<StepId> = self
                    .completed
                    .iter()
                    .filter(|done| {
                        done.model() == step.model()
                            && done.check() == step.check()
                            && done.side() == step.side()
                            && done.part().and_then(Part::benchmark) == Some(benchmark.as_str())
                    })
                    .cloned()
                    .collect();
                for repeat in &repeats {
                    self.emit.skipped(repeat)?;
                }
            }
            return Ok(());
        }

        let gpus: Vec<u32> = self.request.inputs.node.gpus().iter().map(|gpu| gpu.id).collect();
        let mut servers = self.servers(job, recipe, &gpus)?;
        // One at a time, the PR's side goes first: the base server is then up when the speed
        // pairs open with a base run, and no server starts twice before them.
        let order = if servers.together { sides } else { [Side::Pr, Side::Base] };
        for side in order {
            if needed.contains(&id(Check::ServingTests, side, None))
                && !self.skip_if_done(subject, Check::ServingTests, side, None)?
            {
                self.serving_tests(job, recipe, &mut servers, side)?;
            }
            // The first repeat of every benchmark while this side's server is up.
            for benchmark in &benchmarks {
                let part = Some(Part::named(&benchmark.name));
                if needed.contains(&id(Check::Accuracy, side, part.as_ref()))
                    && self.next_repeat(job, benchmark)? == Some(0)
                {
                    self.accuracy_on(job, recipe, &mut servers, side, benchmark, 0)?;
                }
            }
        }
        let accuracy_sides: Vec<(Side, &AccuracyBenchmark)> = order
            .iter()
            .flat_map(|side| benchmarks.iter().map(move |benchmark| (*side, *benchmark)))
            .filter(|(side, benchmark)| {
                let part = Some(Part::named(&benchmark.name));
                needed.contains(&id(Check::Accuracy, *side, part.as_ref()))
            })
            .collect();
        self.more_repeats(job, recipe, &mut servers, &accuracy_sides)?;
        if !cells.is_empty() {
            let _phase = self.clock.enter(Phase::Speed);
            self.speed_since = Some(now_ms());
            let measured = self.speed(job, recipe, cells, &mut servers);
            self.speed_since = None;
            measured?;
        }
        for side in sides {
            if needed.contains(&id(Check::Routing, side, None))
                && !self.skip_if_done(subject, Check::Routing, side, None)?
            {
                self.routing(job, recipe, &mut servers, side)?;
            }
        }
        let used = servers.used();
        if let Some(used) = used.as_ref().filter(|used| used.design != ServerDesign::Together) {
            self.summary.notes.push(format!("{}: {}", job.name(), used.words()));
        }
        self.servers_used = used;
        // Dropping the servers stops them.
        let _phase = self.clock.enter(Phase::Servers);
        drop(servers);
        Ok(())
    }

    /// A side's serving tests, against its server (started when it is not up).
    fn serving_tests(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        servers: &mut Servers<'_>,
        side: Side,
    ) -> Result<(), RunError> {
        let tree = job.server_tree(side);
        let selection = &recipe.tests().serving;
        let server = self.server(servers, side);
        let timeout = self.limit(recipe.timeouts().serving_tests.unwrap_or(DEFAULT_STEP_TIMEOUT));
        let exec = self.exec;
        let purpose = format!("{}-{}-serving-tests", job.name(), side_name(side));
        let _phase = self.clock.enter(Phase::Tests);
        self.step(&job.subject, Check::ServingTests, side, None, |log| match server {
            Ok(serving) => {
                let run = TestRun { selection, tree, timeout, server: Some(&serving), gpus: &[] };
                pytest(&exec, &run, log, purpose)
            }
            Err(failure) => failed(&failure),
        })
        .map(drop)
    }

    /// One accuracy benchmark on one side, by that side's recipe's evaluator of the same name.
    fn accuracy_on(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        servers: &mut Servers<'_>,
        side: Side,
        benchmark: &AccuracyBenchmark,
        repeat: u32,
    ) -> Result<(), RunError> {
        let subject = &job.subject;
        let this_repeat = Part::repeat(&benchmark.name, repeat);
        let part = Some(&this_repeat);
        let stamp = Repeat {
            index: repeat,
            seed: u64::from(repeat),
            cap: benchmark.repeat_cap(self.request.gate),
            family: Some(self.accuracy_family),
        };
        // A base repeat the cache has (keyed with its seed) needs no server.
        if side == Side::Base
            && let Some(cached) = self.cached_accuracy(job, recipe, benchmark, stamp)
        {
            return self.record(subject, Check::Accuracy, side, part, cached);
        }
        // The base side runs its own recipe's evaluator of the same name.
        let side_benchmark = servers.recipes[slot(side)]
            .accuracy()
            .iter()
            .find(|other| other.name == benchmark.name);
        let gated_elsewhere =
            side_benchmark.and_then(|b| b.hub_dataset.as_ref()).filter(|dataset| {
                !job.base_own.is_some_and(|own| {
                    own.accuracy().iter().any(|other| {
                        other.name == benchmark.name && other.hub_dataset.as_ref() == Some(*dataset)
                    })
                })
            });
        // The server first (its load is a server event of its own), then the step, whose
        // events bracket the evaluation (and the history prices it).
        let expired = |detail| ServerFailure { reason: NotRunReason::RunTimeLimit, detail };
        let mut server = match self.out_of_time() {
            Some(detail) => Err(expired(detail)),
            None => self.server(servers, side),
        };
        let Some(open) = self.open_step(subject, Check::Accuracy, side, part)? else {
            return Ok(());
        };
        if let Some(detail) = open.expired.clone() {
            server = Err(expired(detail));
        }
        let outcome = match (server, side_benchmark) {
            (Ok(_), Some(_)) if gated_elsewhere.is_some() => not_run(
                NotRunReason::GatedDataset,
                format!(
                    "benchmark {} names the gated dataset {}, which the base side's own recipe does not: the node's token fetches only what the base side names",
                    benchmark.name,
                    gated_elsewhere.map(ToString::to_string).unwrap_or_default()
                ),
                Some(&benchmark.name),
            ),
            (Ok(serving), Some(side_benchmark)) => {
                let _phase = self.clock.enter(Phase::Accuracy);
                self.evaluate(
                    servers.recipes[slot(side)],
                    side_benchmark,
                    &serving,
                    &servers.launches[slot(side)],
                    job.base_tree.unwrap_or(job.pr_tree),
                    stamp.seed,
                )
            }
            (Ok(_), None) => not_run(
                NotRunReason::NoRecipe,
                format!(
                    "the base side's recipe has no command for benchmark {}: the base side never runs the PR's",
                    benchmark.name
                ),
                Some(&benchmark.name),
            ),
            (Err(failure), _) => failed(&failure),
        };
        let outcome = match outcome {
            Outcome::Accuracy { benchmark, questions, correct, per_question, cached, .. } => {
                let repeat = Some(stamp);
                Outcome::Accuracy { benchmark, questions, correct, per_question, cached, repeat }
            }
            // A repeat that could not run is that repeat's: its subject names it.
            Outcome::NotRun { reason, detail, failed_on, .. } => Outcome::NotRun {
                reason,
                detail,
                subject: Some(this_repeat.to_string()),
                failed_on,
            },
            other => other,
        };
        if side == Side::Base && !job.model.new && job.cacheable {
            self.store_accuracy(job, recipe, benchmark, stamp.seed, &outcome);
        }
        self.close_step(subject, part, open, outcome).map(drop)
    }

    /// The repeats after the first: round by round, each benchmark still open (the gate's
    /// [`needs_another_repeat`]) gets its next repeat on both sides, until every one is
    /// decided, at its cap, or broken (a repeat that could not run ends its benchmark's
    /// repeats: its not-run record is its verdict). `sides` are the (side, benchmark) pairs
    /// the job plan runs, in the order of the first round; later rounds alternate it, so that
    /// the server that is up goes first.
    fn more_repeats(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        servers: &mut Servers<'_>,
        sides: &[(Side, &AccuracyBenchmark)],
    ) -> Result<(), RunError> {
        let mut order: Vec<(Side, &AccuracyBenchmark)> = sides.to_vec();
        loop {
            order.reverse();
            let mut ran = false;
            for (side, benchmark) in order.clone() {
                let Some(repeat) = self.next_repeat(job, benchmark)? else { continue };
                let part = Part::repeat(&benchmark.name, repeat);
                if self.done(&job.subject, Check::Accuracy, side, Some(&part)) {
                    continue;
                }
                self.accuracy_on(job, recipe, servers, side, benchmark, repeat)?;
                ran = true;
            }
            if !ran {
                return Ok(());
            }
        }
    }

    /// The repeat `benchmark` needs next, or `None` when it needs none: the lowest index a side
    /// has not recorded (repeat 0 always, on every side the job plan runs it), while the gate
    /// says the repeats both sides have leave it open; no later one once a repeat of it could
    /// not run.
    fn next_repeat(
        &self,
        job: &ModelJob<'_>,
        benchmark: &AccuracyBenchmark,
    ) -> Result<Option<u32>, RunError> {
        let cap = benchmark.repeat_cap(self.request.gate);
        let records = self.results.records()?;
        let mut repeats = BenchmarkRepeats::default();
        // A repeat that could not run (on either side) ends the benchmark's repeats: the first
        // one still runs on both sides, so that each side has its evidence.
        let mut broken = false;
        for (_, record) in &records {
            if record.model.as_deref() != Some(job.name()) || record.check != Check::Accuracy {
                continue;
            }
            match &record.outcome {
                Outcome::Accuracy { benchmark: name, .. }
                    if name.eq_ignore_ascii_case(&benchmark.name) =>
                {
                    repeats.add(record);
                }
                Outcome::NotRun { subject: Some(subject), .. } => {
                    let part = Part::parse(subject);
                    let named = part.as_ref().and_then(Part::benchmark);
                    broken |= named.is_some_and(|name| name.eq_ignore_ascii_case(&benchmark.name));
                }
                _ => {}
            }
        }
        let expected = |side: Side| {
            let part = Some(Part::named(&benchmark.name));
            let id = StepId::new(Some(job.name()), Check::Accuracy, side, part);
            job.target.evidence_steps().any(|step| step == id)
        };
        let (base_wanted, pr_wanted) = (expected(Side::Base), expected(Side::Pr));
        let mut both = Vec::new();
        for index in 0..cap {
            let (base, pr) = (repeats.base.get(&index), repeats.pr.get(&index));
            if (base_wanted && base.is_none()) || (pr_wanted && pr.is_none()) {
                if index == 0 || (!broken && self.repeat_open(benchmark, cap, &both)) {
                    return Ok(Some(index));
                }
                return Ok(None);
            }
            if let (Some(base), Some(pr)) = (base, pr) {
                both.push((*base, *pr));
            }
        }
        Ok(None)
    }

    /// The gate's answer on the repeats both sides have: does the benchmark need another?
    fn repeat_open(
        &self,
        benchmark: &AccuracyBenchmark,
        cap: u32,
        repeats: &[(SideResult<'_>, SideResult<'_>)],
    ) -> bool {
        let Some(pooled) = accuracy_rule::pool(repeats) else { return false };
        let looks = Looks {
            repeats: u32::try_from(repeats.len()).unwrap_or(u32::MAX),
            cap,
            benchmarks: usize::try_from(self.accuracy_family.max(1)).unwrap_or(usize::MAX),
        };
        needs_another_repeat(self.request.gate, &benchmark.name, pooled, looks)
    }

    /// A side's routing: its server's log against the recipe's routing pattern, the lines each
    /// start wrote once it was healthy. A server that came up has logged its routing line: its
    /// log is read, whether it is still up, stopped to make room or failed later (no restart to
    /// read a line it already wrote). A side whose server never came up is started now.
    fn routing(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        servers: &mut Servers<'_>,
        side: Side,
    ) -> Result<(), RunError> {
        let pattern = &recipe.server().routing_pattern;
        let outcome = if servers.served[slot(side)].is_empty()
            && let Err(failure) = self.server(servers, side)
        {
            failed(&failure)
        } else {
            side_routing(&servers.routing_read(side, pattern))
        };
        self.record(&job.subject, Check::Routing, side, None, outcome)
    }

    /// The steps of the served phase: what the plan knows is recorded as it says (a cached
    /// base accuracy result too, which needs no server); returned are the steps the servers
    /// run (serving tests, accuracy and routing, each on its side; the speed cells are
    /// [`Queue::cells`]) and the recipe's benchmarks among them, in the plan's order.
    fn served_steps<'r>(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &'r Recipe,
        queue: &Queue<'_>,
    ) -> Result<(Vec<StepId>, Vec<&'r AccuracyBenchmark>), RunError> {
        let subject = &job.subject;
        let mut needed: Vec<StepId> = Vec::new();
        let mut benchmarks: Vec<&AccuracyBenchmark> = Vec::new();
        for queued in queue.phase(queue::Phase::Served) {
            let Some(step) = self.take(subject, queued)? else { continue };
            let id = job.target.step_id(step);
            let benchmark = step.part.as_ref().and_then(|part| {
                recipe.accuracy().iter().find(|benchmark| Part::named(&benchmark.name) == *part)
            });
            let runs = match (step.check, &step.part, step.side) {
                (Check::Speed, Some(Part::Cell { .. }), Side::Both) => recipe.speed().is_some(),
                (_, _, Side::Both) => false,
                (Check::ServingTests, None, _) => !recipe.tests().serving.is_empty(),
                (Check::Routing, None, _) => true,
                (Check::Accuracy, Some(_), _) => match benchmark {
                    Some(benchmark) => {
                        // A cached base repeat needs no server (`accuracy_on`).
                        if !benchmarks.iter().any(|kept| kept.name == benchmark.name) {
                            benchmarks.push(benchmark);
                        }
                        true
                    }
                    None => false,
                },
                _ => false,
            };
            match (runs, step.check) {
                (false, _) => self.record_not_described(subject, step)?,
                // The cells are the queue's: `open_cells` takes them.
                (true, Check::Speed) => {}
                (true, _) => needed.push(id),
            }
        }
        Ok((needed, benchmarks))
    }

    /// `side`'s server, started when it is not up (and, one at a time, the other side's
    /// stopped first).
    fn server(&self, servers: &mut Servers<'_>, side: Side) -> Result<Serving, ServerFailure> {
        let _phase = self.clock.enter(Phase::Servers);
        let startup = self.limit(servers.recipe.server().startup_timeout);
        servers.get(&self.exec, side, startup)
    }

    /// The key of a base-side accuracy result; `None` when it may not be cached (no pinned
    /// image digest, a new model, or a dataset that cannot be read).
    fn accuracy_key(
        &self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        benchmark: &AccuracyBenchmark,
        seed: u64,
    ) -> Option<AccuracyKey> {
        // What the base side runs: its own commands.
        let recipe = job.side_recipe(recipe, Side::Base).ok()?;
        let image_digest = self.request.inputs.node.image().digest.clone()?;
        let base_tree = job.base_tree?;
        let evaluator = match &benchmark.evaluator {
            Evaluator::Builtin(builtin) => {
                let dataset = untrusted::read(
                    base_tree,
                    Path::new(&builtin.dataset),
                    accuracy::MAX_DATASET_FILE,
                )
                .ok()?;
                format!(
                    "builtin dataset={:?} {} limit={:?}",
                    builtin.dataset,
                    Key::of(&dataset),
                    builtin.limit
                )
            }
            Evaluator::External(external) => format!(
                "external command={:?} metrics={:?} hub-dataset={:?}",
                external.command_text(),
                external.metrics,
                benchmark.hub_dataset.as_ref().map(ToString::to_string)
            ),
        };
        let server = recipe.server();
        let recipe_parts = format!(
            "checkpoint={:?} tp={} server={:?} monokernel-flag={:?} install={:?} {evaluator}",
            recipe.checkpoint(),
            recipe.tp(),
            server.command_text(),
            server.monokernel_flag(),
            recipe.install().map(Install::command_text),
        );
        Some(AccuracyKey {
            image_digest,
            base_commit: job.subject.provenance.base_commit.clone()?,
            model: job.model.base_name().to_owned(),
            benchmark: benchmark.name.clone(),
            recipe_parts,
            seed: Some(seed),
        })
    }

    /// The cached base repeat of `benchmark` (its seed's), marked as cached and stamped with
    /// this run's repeat, when the base step is still to run.
    fn cached_accuracy(
        &self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        benchmark: &AccuracyBenchmark,
        stamp: Repeat,
    ) -> Option<Outcome> {
        let part = Part::repeat(&benchmark.name, stamp.index);
        if job.model.new
            || !job.cacheable
            || self.done(&job.subject, Check::Accuracy, Side::Base, Some(&part))
        {
            return None;
        }
        let key = self.accuracy_key(job, recipe, benchmark, stamp.seed)?;
        let mut outcome = self.cache.accuracy(&key)?;
        if let Outcome::Accuracy { cached, repeat, .. } = &mut outcome {
            *cached = true;
            *repeat = Some(stamp);
        }
        Some(outcome)
    }

    /// Caches a base-side repeat measured by this run, under its seed.
    fn store_accuracy(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        benchmark: &AccuracyBenchmark,
        seed: u64,
        outcome: &Outcome,
    ) {
        let Some(key) = self.accuracy_key(job, recipe, benchmark, seed) else { return };
        if let Err(error) = self.cache.store_accuracy(&key, outcome) {
            self.summary.notes.push(format!(
                "the base accuracy of {} could not be cached: {error}",
                benchmark.name
            ));
        }
    }

    /// One benchmark against one side's server.
    fn evaluate(
        &self,
        recipe: &Recipe,
        benchmark: &AccuracyBenchmark,
        serving: &Serving,
        launch: &Launch<'_>,
        data_tree: &Path,
        seed: u64,
    ) -> Outcome {
        let name = benchmark.name.as_str();
        let server_tail = || server_log_tail(&launch.log);
        match &benchmark.evaluator {
            Evaluator::Builtin(builtin) => {
                let questions =
                    // Both sides are asked the base tree's questions: the PR cannot keep only
                    // those it gets right.
                    match accuracy::read_dataset(data_tree, Path::new(&builtin.dataset)) {
                        Ok(questions) => questions,
                        Err(error) => {
                            let reason = NotRunReason::RecipeInvalid;
                            return not_run(reason, error.to_string(), Some(name));
                        }
                    };
                let mut config = EvalConfig::new(&serving.url, SERVED_MODEL);
                config.limit = builtin.limit.map(|limit| limit as usize);
                config.seed = Some(seed);
                match accuracy::evaluate(&config, &questions) {
                    Ok(evaluation) if evaluation.questions() > 0 => evaluation.outcome(name),
                    Ok(_empty) => {
                        let detail = "the dataset has no questions";
                        not_run(NotRunReason::RecipeInvalid, detail, Some(name))
                    }
                    Err(error) => not_run(
                        NotRunReason::Crash,
                        format!("{error}\nlast lines of the server's log:\n{}", server_tail()),
                        Some(name),
                    ),
                }
            }
            Evaluator::External(external) => {
                // The node lists the secret, but its value must be there at run time too.
                let mut token_value = None;
                if let Some(token) = &benchmark.token {
                    let variable = crate::node::secret_env_var(token);
                    match std::env::var(&variable) {
                        Ok(value) if !value.is_empty() => token_value = Some(value),
                        _ => {
                            let detail = format!(
                                "benchmark {name} reads a gated dataset: the node lists the secret {token}, but {variable} is not set for this run"
                            );
                            return not_run(NotRunReason::GatedDataset, detail, Some(name));
                        }
                    }
                }
                // A hub dataset is fetched here, by prgate, with the token; the command gets
                // the dataset read-only and never the token (accuracy::gated).
                let datasets = gated::cache_root(self.request.inputs.node.cache_dir());
                let mut dataset_env = Vec::new();
                if let Some(dataset) = &benchmark.hub_dataset {
                    match gated::fetch(
                        &gated::endpoint(),
                        dataset,
                        token_value.as_deref(),
                        &datasets,
                    ) {
                        Ok(snapshot) => dataset_env.push((
                            "PRGATE_DATASET".to_owned(),
                            self.exec.dataset_view(&datasets, &snapshot),
                        )),
                        Err(error) => {
                            let reason = NotRunReason::GatedDataset;
                            return not_run(reason, error.to_string(), Some(name));
                        }
                    }
                }
                let results = launch.log.with_file_name(format!("accuracy-{name}"));
                let _stale = std::fs::remove_dir_all(&results);
                if let Err(error) = std::fs::create_dir_all(&results) {
                    let detail = format!("{}: {error}", results.display());
                    return not_run(NotRunReason::Node, detail, Some(name));
                }
                let checkpoint = self.exec.checkpoint_view(recipe);
                let argv = external.command(
                    serving.port,
                    &checkpoint,
                    &self.exec.out_view(&results, ""),
                    seed,
                );
                let log = results.join("command.log");
                let command = Command {
                    argv,
                    tree: launch.tree,
                    out: &results,
                    env: launch.env.iter().cloned().chain(dataset_env).collect(),
                    datasets: benchmark.hub_dataset.as_ref().map(|_| datasets.as_path()),
                    log: log.clone(),
                    timeout: self.limit(recipe.timeouts().accuracy.unwrap_or(DEFAULT_STEP_TIMEOUT)),
                    gpus: &[],
                    purpose: format!("{}-accuracy-{name}", launch.purpose),
                    server: serving.container.as_deref(),
                };
                if let Err(outcome) = self.exec.run(&command) {
                    return outcome;
                }
                // The recipe's metrics file, else sgl-eval's one run directory under it.
                let metrics = results.join(&external.metrics);
                let run_dir = if metrics.file_name() == Some(sgl_eval::METRICS_FILE.as_ref())
                    && untrusted::open_path(&results, &metrics).is_ok()
                {
                    Ok(metrics.parent().unwrap_or(&results).to_path_buf())
                } else {
                    sgl_eval::find_run_dir(&results)
                };
                match run_dir.and_then(|run_dir| sgl_eval::read_run(&results, &run_dir, name)) {
                    Ok(outcome) => outcome,
                    Err(error) => {
                        not_run(NotRunReason::NoResult, with_log_tail(error, &log), Some(name))
                    }
                }
            }
        }
    }

    /// The job plan's speed cells (`concurrencies`) still open, each with the pairs it has and
    /// its calibrated noise (when the cache has one and the cell has none yet, its `speed-noise`
    /// record is written with the cell's first pair, and dropped when that pair is of blocks).
    fn open_cells(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        concurrencies: &[u32],
    ) -> Result<Vec<Cell>, RunError> {
        let subject = &job.subject;
        let Some(sweep) = recipe.speed() else { return Ok(Vec::new()) };
        if concurrencies.is_empty() || self.done(subject, Check::Speed, Side::Both, None) {
            return Ok(Vec::new());
        }
        let recorded = recorded_pairs(self.results, job.name())?;
        let mut cells = Vec::new();
        for &concurrency in concurrencies {
            if self.done(subject, Check::Speed, Side::Both, Some(&Part::Cell { concurrency })) {
                continue;
            }
            let recorded = recorded.get(&concurrency);
            // The calibration is fixed before a cell's first pair, never added to a cell
            // judged already.
            let noise_key = self.noise_key(job, recipe, sweep, concurrency);
            let mut noise = recorded.and_then(|cell| cell.noise);
            let mut unrecorded_noise = false;
            if recorded.is_none_or(|cell| cell.pairs.is_empty())
                && noise.is_none()
                && let Some(calibration) = self.cache.noise(&noise_key)
            {
                // Recorded with the cell's first pair, unless that pair is of blocks
                // (`record_pair`).
                noise = Some(calibration);
                unrecorded_noise = true;
            }
            let pairs: Vec<Pair> = recorded
                .map(|cell| cell.pairs.iter().map(|(_, pair)| *pair).collect())
                .unwrap_or_default();
            let covered = sweep.is_covered(concurrency);
            let cell = Cell {
                concurrency,
                covered,
                pairs,
                noise,
                unrecorded_noise,
                noise_key,
                aa_differences: Vec::new(),
                closed: false,
                blocked: false,
            };
            if self.cell_open(&cell) {
                cells.push(cell);
            } else {
                for index in 0..cell.pairs.len() {
                    let index = u32::try_from(index).unwrap_or(u32::MAX);
                    let part = Part::Pair { concurrency, index };
                    let step = StepId::new(Some(job.name()), Check::Speed, Side::Both, Some(part));
                    self.emit.skipped(&step)?;
                }
            }
        }
        Ok(cells)
    }

    /// What makes base runs of a cell comparable across runs.
    fn noise_key(
        &self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        sweep: &SpeedSweep,
        concurrency: u32,
    ) -> NoiseKey {
        // What the base side runs: its own commands.
        let recipe = job.side_recipe(recipe, Side::Base).unwrap_or(recipe);
        let node = self.request.inputs.node;
        let benchmark = match &sweep.benchmark {
            SpeedBenchmark::Builtin => "builtin".to_owned(),
            SpeedBenchmark::External(external) => format!("external {:?}", external.command_text()),
        };
        NoiseKey {
            node: node.name().to_owned(),
            image: node.image().digest.clone().unwrap_or_else(|| node.image().name.clone()),
            model: job.model.base_name().to_owned(),
            concurrency,
            // The pairing order is part of the key: a bracketed pair's two base runs are one PR
            // run apart, which is what the calibration's differences measure.
            recipe_parts: format!(
                "order=bracketed base={:?} install={:?} checkpoint={:?} tp={} server={:?} monokernel={} in={} out={} requests={} warmup={} {benchmark}",
                job.subject.provenance.base_commit,
                recipe.install().map(Install::command_text),
                recipe.checkpoint(),
                recipe.tp(),
                recipe.server().command_text(),
                !job.model.new,
                sweep.input_len,
                sweep.output_len,
                sweep.requests_per_concurrency,
                sweep.warmup_per_concurrency,
            ),
        }
    }

    /// Whether the gate wants another pair of the cell. The gate's own cap (`max-pairs` kept
    /// pairs, outliers re-measured at most `max-outliers` times) ends every cell; the bound
    /// here only guards against a gate that never decides.
    fn cell_open(&self, cell: &Cell) -> bool {
        cell_needs_pair(self.request, self.family, &cell.pairs, cell.noise, cell.covered)
    }

    /// Runs pairs in every open cell until the gate has decided each. Every pair is
    /// bracketed: a base run, the PR run, another base run; the closing base run of a pair
    /// opens the cell's next one (a chain: 2n + 1 runs for n pairs; the gate accounts for the
    /// shared runs, `docs/gate.md`). The pair's base is the two base runs' geometric mean,
    /// which cancels a linear drift, and their ratio is the in-band A/A difference that
    /// measures the node's noise inside the run. With both servers up the runs go in turn;
    /// one server at a time, in rounds: an opening base run for every open cell that has
    /// none, a PR run for each, a closing base run for each (the base server stays up into
    /// the next round, whose pairs it opens).
    fn speed(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        mut cells: Vec<Cell>,
        servers: &mut Servers<'_>,
    ) -> Result<(), RunError> {
        let Some(sweep) = recipe.speed() else { return Ok(()) };
        // A side whose server never came up measures nothing: one record for the whole check.
        for side in [Side::Base, Side::Pr] {
            if let Slot::Failed(failure) = &servers.slots[slot(side)]
                && servers.served[slot(side)].is_empty()
            {
                let outcome = failed_on(failed(failure), side);
                return self.record(&job.subject, Check::Speed, Side::Both, None, outcome);
            }
        }
        if servers.together {
            for cell in &mut cells {
                self.speed_together(job, sweep, servers, cell)?;
                if job.cacheable {
                    self.calibrate(cell);
                }
            }
            return Ok(());
        }
        // One server at a time, in rounds of blocks (a block: a cell's runs on one load of a
        // side, one run when switching does not reload): an opening base block for each cell
        // that has none, a PR block for each open cell, then a base block for each that closes
        // its pair and opens the cell's next one (2n + 1 blocks for n pairs).
        let mut opening: BTreeMap<u32, f64> = BTreeMap::new();
        loop {
            let open: Vec<usize> = (0..cells.len())
                .filter(|&at| !cells[at].closed && self.cell_open(&cells[at]))
                .collect();
            if open.is_empty() {
                break;
            }
            for &at in &open {
                let concurrency = cells[at].concurrency;
                if opening.contains_key(&concurrency) {
                    continue;
                }
                match self.measure_block(job, sweep, servers, Side::Base, &cells[at]) {
                    Ok(block) => {
                        opening.insert(concurrency, block);
                    }
                    Err(failure) => self.cell_failed(job, &mut cells[at], Side::Base, failure)?,
                }
            }
            let mut pr_blocks: BTreeMap<u32, f64> = BTreeMap::new();
            for &at in &open {
                if cells[at].closed {
                    continue;
                }
                match self.measure_block(job, sweep, servers, Side::Pr, &cells[at]) {
                    Ok(block) => {
                        pr_blocks.insert(cells[at].concurrency, block);
                    }
                    Err(failure) => self.cell_failed(job, &mut cells[at], Side::Pr, failure)?,
                }
            }
            for &at in &open {
                let concurrency = cells[at].concurrency;
                let (Some(&pr), Some(&before)) =
                    (pr_blocks.get(&concurrency), opening.get(&concurrency))
                else {
                    continue;
                };
                match self.measure_block(job, sweep, servers, Side::Base, &cells[at]) {
                    Ok(after) => {
                        let blocked = servers.block_runs() > 1;
                        self.record_pair(job, &mut cells[at], [before, after], pr, blocked)?;
                        opening.insert(concurrency, after);
                    }
                    Err(failure) => self.cell_failed(job, &mut cells[at], Side::Base, failure)?,
                }
            }
        }
        // Only a base side that ran nothing of the PR's calibrates the node, and only with runs
        // on one load: a blocked cell's A/A differences are between loads.
        if job.cacheable {
            for cell in cells.iter().filter(|cell| !cell.blocked) {
                self.calibrate(cell);
            }
        }
        Ok(())
    }

    /// One cell's pairs with both servers up: base, PR, base, PR, base, ...; each pair's
    /// closing base run opens the next (2n + 1 runs for n pairs).
    fn speed_together(
        &mut self,
        job: &ModelJob<'_>,
        sweep: &SpeedSweep,
        servers: &mut Servers<'_>,
        cell: &mut Cell,
    ) -> Result<(), RunError> {
        let mut opening: Option<f64> = None;
        while self.cell_open(cell) {
            let measured = match opening.take() {
                Some(before) => Ok(before),
                None => self.measure(job, sweep, servers, Side::Base, cell),
            }
            .map_err(|failure| (Side::Base, failure))
            .and_then(|before| {
                let pr = self
                    .measure(job, sweep, servers, Side::Pr, cell)
                    .map_err(|failure| (Side::Pr, failure))?;
                let after = self
                    .measure(job, sweep, servers, Side::Base, cell)
                    .map_err(|failure| (Side::Base, failure))?;
                Ok((before, pr, after))
            });
            match measured {
                Ok((before, pr, after)) => {
                    self.record_pair(job, cell, [before, after], pr, false)?;
                    opening = Some(after);
                }
                Err((side, failure)) => return self.cell_failed(job, cell, side, failure),
            }
        }
        Ok(())
    }

    /// Records a bracketed pair: its two base runs (before and after) and its PR run, or with
    /// `blocked` its three blocks' values (`prgate_gate::speed::blocks`). The cell's first pair
    /// records its calibration from the cache, unless it is of blocks: a blocked cell is judged
    /// without one.
    fn record_pair(
        &mut self,
        job: &ModelJob<'_>,
        cell: &mut Cell,
        base_runs_ms: [f64; 2],
        pr_tpot_ms: f64,
        blocked: bool,
    ) -> Result<(), RunError> {
        if blocked {
            cell.blocked = true;
            cell.noise = blocks::blocked_context(&CellContext {
                cells: 1,
                gain_required: false,
                calibration: cell.noise,
            })
            .calibration;
        }
        if std::mem::take(&mut cell.unrecorded_noise)
            && let Some(calibration) = cell.noise
        {
            let outcome = Outcome::SpeedNoise {
                concurrency: cell.concurrency,
                log_ratio_variance: calibration.log_ratio_variance,
                samples: Some(calibration.samples),
            };
            let part = Part::Noise { concurrency: cell.concurrency };
            self.record(&job.subject, Check::Speed, Side::Both, Some(&part), outcome)?;
        }
        let index = u32::try_from(cell.pairs.len()).unwrap_or(u32::MAX);
        let part = Part::Pair { concurrency: cell.concurrency, index };
        let [before, after] = base_runs_ms;
        let pair = blocks::block_pair(before, pr_tpot_ms, after);
        let outcome = Outcome::SpeedPair {
            concurrency: cell.concurrency,
            index,
            covered: cell.covered,
            base_tpot_ms: pair.base_tpot_ms,
            pr_tpot_ms,
            first: Side::Base,
            family: Some(self.family),
            base_runs_ms: Some(base_runs_ms),
        };
        self.record(&job.subject, Check::Speed, Side::Both, Some(&part), outcome)?;
        cell.aa_differences.push((after / before).ln());
        cell.pairs.push(pair);
        Ok(())
    }

    fn cell_failed(
        &mut self,
        job: &ModelJob<'_>,
        cell: &mut Cell,
        side: Side,
        failure: ServerFailure,
    ) -> Result<(), RunError> {
        cell.closed = true;
        let part = Part::Cell { concurrency: cell.concurrency };
        let outcome = failed_on(not_run(failure.reason, failure.detail, None), side);
        self.record(&job.subject, Check::Speed, Side::Both, Some(&part), outcome)
    }

    /// Adds a cell's in-band A/A differences of this run to the node's noise calibration, or,
    /// when the gate found the stored calibration contradicted by them (stale), starts the
    /// node's record afresh from them.
    fn calibrate(&mut self, cell: &Cell) {
        let stale = calibration_stale(self.request, self.family, &cell.pairs, cell.noise);
        let saved = if stale {
            self.cache.replace_noise(&cell.noise_key, &cell.aa_differences)
        } else {
            self.cache.add_noise(&cell.noise_key, &cell.aa_differences)
        };
        if let Err(error) = saved {
            self.summary.notes.push(format!(
                "the speed noise at concurrency {} could not be saved: {error}",
                cell.concurrency
            ));
        }
    }

    /// One block of `side`'s runs of `cell` on one load of its server: one run when switching
    /// does not reload, else [`blocks::BLOCK_RUNS`] (the blocked design, known after the
    /// block's first run, whose switch probes the other server's memory API); the block's
    /// value, its runs' median.
    fn measure_block(
        &self,
        job: &ModelJob<'_>,
        sweep: &SpeedSweep,
        servers: &mut Servers<'_>,
        side: Side,
        cell: &Cell,
    ) -> Result<f64, ServerFailure> {
        let mut runs = vec![self.measure(job, sweep, servers, side, cell)?];
        while runs.len() < servers.block_runs() {
            runs.push(self.measure(job, sweep, servers, side, cell)?);
        }
        blocks::block_value(&runs).ok_or_else(|| ServerFailure {
            reason: NotRunReason::Crash,
            detail: format!("no finite median TPOT in the block's runs: {runs:?}"),
        })
    }

    /// One speed run on `side`: its median TPOT, or why there is none.
    fn measure(
        &self,
        job: &ModelJob<'_>,
        sweep: &SpeedSweep,
        servers: &mut Servers<'_>,
        side: Side,
        cell: &Cell,
    ) -> Result<f64, ServerFailure> {
        let concurrency = cell.concurrency;
        if let Some(detail) = self.out_of_time() {
            return Err(ServerFailure { reason: NotRunReason::RunTimeLimit, detail });
        }
        let serving = self.server(servers, side)?;
        let timeout =
            self.limit(servers.recipe.timeouts().speed_run.unwrap_or(DEFAULT_STEP_TIMEOUT));
        let requests = sweep.requests_per_concurrency.saturating_mul(concurrency);
        let warmup = sweep.warmup_per_concurrency.saturating_mul(concurrency);
        let launch = &servers.launches[slot(side)];
        let log = launch.log.clone();
        let server_tail = || server_log_tail(&log);
        let crash = |detail: String| ServerFailure { reason: NotRunReason::Crash, detail };
        // Each side measures with its own recipe's benchmark: the base side never runs the PR's
        // command.
        let Some(benchmark) = servers.recipes[slot(side)].speed().map(|sweep| &sweep.benchmark)
        else {
            let detail = "the base side's recipe has no speed benchmark to run: the base side never runs the PR's".to_owned();
            return Err(ServerFailure { reason: NotRunReason::NoRecipe, detail });
        };
        let measured = match benchmark {
            SpeedBenchmark::Builtin => {
                let config = BenchConfig {
                    base_url: serving.url.clone(),
                    model: SERVED_MODEL.to_owned(),
                    endpoint: Endpoint::Completions,
                    input_len: sweep.input_len,
                    output_len: sweep.output_len,
                    concurrency,
                    requests,
                    warmup,
                    timeout,
                };
                match bench::run(&config) {
                    Ok(result) if result.failed == 0 && result.median_tpot_ms.is_some() => {
                        result.median_tpot_ms.ok_or_else(String::new)
                    }
                    // A run some of whose requests failed measured a server in trouble (it
                    // died, it errs): no pair of it is evidence of speed.
                    Ok(result) => Err(format!(
                        "{} of {} requests of the run at concurrency {concurrency} on {} failed: {}",
                        result.failed,
                        result.failed + result.completed,
                        serving.url,
                        result.errors.join("; "),
                    )),
                    Err(error) => Err(error.to_string()),
                }
            }
            SpeedBenchmark::External(external) => {
                let index = u32::try_from(cell.pairs.len()).unwrap_or(u32::MAX);
                let part = Part::Pair { concurrency, index };
                let step = StepId::new(Some(job.name()), Check::Speed, Side::Both, Some(part));
                let side_name = side_name(side);
                let results = self
                    .results
                    .step_log_dir(&step)
                    .map(|dir| fresh_folder(&dir, side_name))
                    .map_err(|error| crash(error.to_string()))?;
                let run = SpeedRun {
                    port: serving.port,
                    checkpoint_path: &self.exec.checkpoint_view(servers.recipe),
                    results: &self.exec.out_view(&results, ""),
                    concurrency,
                    input_len: sweep.input_len,
                    output_len: sweep.output_len,
                    requests,
                    warmup,
                };
                self.external_speed(external, &run, launch, &results, timeout, &serving)
            }
        };
        measured.map_err(|detail| {
            let detail = format!("{detail}\nlast lines of the server's log:\n{}", server_tail());
            servers.failure(side, detail)
        })
    }

    /// One run of an external speed benchmark: its median TPOT at `run.concurrency`.
    fn external_speed(
        &self,
        external: &ExternalSpeed,
        run: &SpeedRun<'_>,
        launch: &Launch<'_>,
        results: &Path,
        timeout: Duration,
        serving: &Serving,
    ) -> Result<f64, String> {
        let _stale = std::fs::remove_dir_all(results);
        std::fs::create_dir_all(results)
            .map_err(|error| format!("{}: {error}", results.display()))?;
        let log = results.join("command.log");
        let command = Command {
            argv: external.command(run),
            tree: launch.tree,
            out: results,
            env: launch.env.clone(),
            datasets: None,
            log: log.clone(),
            timeout,
            gpus: &[],
            purpose: format!("{}-speed-{}", launch.purpose, run.concurrency),
            server: serving.container.as_deref(),
        };
        self.exec.run(&command).map_err(|outcome| match outcome {
            Outcome::NotRun { detail, .. } => detail,
            _ => String::new(),
        })?;
        let path = results.join(&external.result);
        let text = untrusted::read_to_string(results, Path::new(&external.result), MAX_RESULT_FILE)
            .map_err(|error| with_log_tail(error.to_string(), &log))?;
        let records = match external.format {
            SpeedFormat::BenchServing => bench::parse_bench_serving_jsonl(&text),
            SpeedFormat::Inferencex => bench::parse_inferencex_json(&text),
        }
        .map_err(|error| format!("{}: {error}", path.display()))?;
        // The run's record, which must have measured the lengths it asked for.
        bench::record_at(&records, run.concurrency, u64::from(run.requests))
            .and_then(|record| {
                let asked = (u64::from(run.input_len), u64::from(run.output_len));
                bench::check_workload(record, asked.0, asked.1).map(|()| record.median_tpot_ms)
            })
            .map_err(|error| format!("{}: {error}", path.display()))
    }
}

impl<'r> Runner<'r> {
    /// Both sides' servers of a model, none started yet: both up at once on disjoint GPUs of
    /// `gpus` when the node has room, else one at a time on the same GPUs. A side whose install
    /// failed has no server.
    fn servers<'a>(
        &mut self,
        job: &'a ModelJob<'_>,
        recipe: &'a Recipe,
        gpus: &'a [u32],
    ) -> Result<Servers<'a>, RunError>
    where
        'r: 'a,
    {
        let tp = (recipe.tp() as usize).min(gpus.len());
        // A topology has the nodes to itself: base's and PR's run in turn.
        let node_gpus = u32::try_from(gpus.len()).ok();
        let together = Layout::of(node_gpus, recipe) == Layout::Together;
        let gpu_sets =
            if together { [&gpus[..tp], &gpus[tp..2 * tp]] } else { [&gpus[..tp], &gpus[..tp]] };
        let mut launches = Vec::new();
        let mut slots = [Slot::Idle, Slot::Idle];
        for side in [Side::Base, Side::Pr] {
            let tree = job.server_tree(side);
            if let Err((reason, detail)) = self.install_side(job, recipe, side, tree) {
                slots[slot(side)] = Slot::Failed(ServerFailure { reason, detail });
            }
            let routing = StepId::new(Some(job.name()), Check::Routing, side, None);
            let log = self.results.step_log_dir(&routing)?.join("server.log");
            launches.push(Launch {
                tree,
                // The baseline of a model new in the PR is SGLang's own path.
                monokernel: side == Side::Pr || !job.model.new,
                gpus: gpu_sets[slot(side)],
                env: self.exec.side_env(tree),
                log,
                purpose: format!("{}-{}-server", job.name(), side_name(side)),
            });
        }
        let recipes = [job.side_recipe(recipe, Side::Base).unwrap_or(recipe), recipe];
        let declared = recipes.map(|side| memory::declared(side.server().memory_api));
        Ok(Servers {
            recipe,
            recipes,
            launches,
            slots,
            together,
            served: [Vec::new(), Vec::new()],
            model: job.name().to_owned(),
            events: self.emit.servers(),
            apis: declared.map(|(api, _)| api),
            no_api: declared.map(|(_, none)| none),
            keys: recipes.map(|side| side.server().memory_api),
            loads: [0, 0],
            wakes: [0, 0],
        })
    }
}

/// A server's address, as the steps that use it need it.
#[derive(Debug, Clone)]
pub(super) struct Serving {
    /// Where prgate reaches it: `http://127.0.0.1:<port>`.
    pub url: String,
    /// The port it listens on, as a command that joins it sees it.
    pub port: u16,
    /// Its container, which such a command joins (`None` on the host).
    pub container: Option<String>,
}

/// A side's server: not started (or stopped to make room), up, loaded but its memory released
/// to make room, or failed for good.
#[derive(Debug)]
enum Slot {
    Idle,
    Up(Server),
    Released(Server),
    Failed(ServerFailure),
}

/// Both sides' servers of one model.
pub(super) struct Servers<'a> {
    /// The PR's recipe: what is measured (lengths, timeouts, the checkpoint).
    recipe: &'a Recipe,
    /// What each side runs (base, PR): the base side's commands come from its own recipe.
    recipes: [&'a Recipe; 2],
    /// How each side's server starts: base, PR.
    launches: Vec<Launch<'a>>,
    slots: [Slot; 2],
    /// Both up at once (on disjoint GPUs), else one at a time.
    together: bool,
    /// Each side's starts that became healthy in this run, where they wrote in its log.
    served: [Vec<LogWindow>; 2],
    /// The model, which its servers' events name.
    model: String,
    /// Where its loads (and wakes and releases) are told.
    events: ServerEvents<'a>,
    /// Each side's memory API, once a release found it; `no_api` once a probe found none.
    apis: [Option<MemoryApi>; 2],
    no_api: [bool; 2],
    /// What each side's recipe says of its memory API (`server.memory-api`).
    keys: [MemoryApiKey; 2],
    /// Each side's loads and wakes so far.
    loads: [u32; 2],
    wakes: [u32; 2],
}

impl Servers<'_> {
    /// What `side`'s routing check reads: its recipe, log and measured starts, and on the PR
    /// side base's server command when the PR's differs from it.
    fn routing_read<'s>(&'s self, side: Side, pattern: &'s str) -> RoutingRead<'s> {
        let at = slot(side);
        let recipe = self.recipes[at];
        let base = self.recipes[slot(Side::Base)].server().command_text();
        let base_command =
            (side == Side::Pr && recipe.server().command_text() != base).then_some(base);
        RoutingRead {
            recipe,
            log: &self.launches[at].log,
            pattern,
            windows: match recipe.server().routing_logged {
                RoutingLogged::Serving => &self.served[at],
                RoutingLogged::Any => std::slice::from_ref(&LogWindow::WHOLE),
            },
            base_command,
        }
    }

    /// `side`'s server, started when it is idle (one at a time: the other side's is stopped
    /// first). A server whose process has exited, or that once failed to start, is failed for
    /// good.
    fn get(
        &mut self,
        exec: &Exec<'_>,
        side: Side,
        startup: Duration,
    ) -> Result<Serving, ServerFailure> {
        let at = slot(side);
        if let Slot::Up(server) = &mut self.slots[at]
            && server.exited()
        {
            let detail = format!(
                "the server exited while it was in use\nlast lines of its log:\n{}",
                server.log_tail()
            );
            self.slots[at] = Slot::Failed(ServerFailure { reason: NotRunReason::Crash, detail });
        }
        if matches!(self.slots[at], Slot::Idle | Slot::Released(_)) && !self.together {
            self.make_room(1 - at);
        }
        if matches!(self.slots[at], Slot::Released(_)) {
            self.wake(side);
        }
        if matches!(self.slots[at], Slot::Idle) {
            let began = now_ms();
            let started = Server::start(self.recipes[at], exec, &self.launches[at], startup);
            let failure = started.as_ref().err().map(|failure| failure.reason);
            let model = Some(self.model.as_str());
            self.events.emit(&Event::server(EventKind::ServerStarted, model, side, began, failure));
            self.slots[at] = match started {
                Ok(server) => {
                    self.served[at].push(server.window);
                    self.loads[at] += 1;
                    Slot::Up(server)
                }
                Err(failure) => Slot::Failed(failure),
            };
        }
        match &self.slots[at] {
            Slot::Up(server) => Ok(Serving {
                url: server.url.clone(),
                port: server.port,
                container: server.container(),
            }),
            Slot::Failed(failure) => Err(failure.clone()),
            Slot::Idle | Slot::Released(_) => Err(ServerFailure {
                reason: NotRunReason::Other,
                detail: "the server was not started".to_owned(),
            }),
        }
    }

    /// Makes room on the GPUs by the `other` side's server, when it is up: its memory released
    /// when it speaks an engine's memory API (found by probing at its first release), else
    /// stopped (dropping it lets its GPUs go).
    fn make_room(&mut self, other: usize) {
        match std::mem::replace(&mut self.slots[other], Slot::Idle) {
            Slot::Up(server) if !server.is_topology() && !self.no_api[other] => {
                let began = now_ms();
                match memory::release(&server.url, self.apis[other]) {
                    Some(api) => {
                        self.apis[other] = Some(api);
                        let model = Some(self.model.as_str());
                        let side = if other == 0 { Side::Base } else { Side::Pr };
                        let event =
                            Event::server(EventKind::ServerReleased, model, side, began, None);
                        self.events.emit(&event);
                        self.slots[other] = Slot::Released(server);
                    }
                    None => self.no_api[other] = true,
                }
            }
            Slot::Up(_stopped) => {}
            kept => self.slots[other] = kept,
        }
    }

    /// Wakes `side`'s released server and warms it up; one that does not come back is
    /// stopped, to be loaded again.
    fn wake(&mut self, side: Side) {
        let at = slot(side);
        let Slot::Released(mut server) = std::mem::replace(&mut self.slots[at], Slot::Idle) else {
            return;
        };
        let began = now_ms();
        let api = self.apis[at].unwrap_or(MemoryApi::Sglang);
        let woke = memory::wake(&server.url, api, SERVED_MODEL) && !server.exited();
        let failure = (!woke).then_some(NotRunReason::Crash);
        let model = Some(self.model.as_str());
        self.events.emit(&Event::server(EventKind::ServerWoken, model, side, began, failure));
        if woke {
            self.wakes[at] += 1;
            self.slots[at] = Slot::Up(server);
        }
    }

    /// The runs of a block: [`blocks::BLOCK_RUNS`] one at a time when a switch reloads a
    /// server (a side's is known to speak no memory API, or the model is a topology, whose
    /// servers are stopped): the blocked design; else one.
    fn block_runs(&self) -> usize {
        let reloads = self.no_api.iter().any(|&none| none) || self.recipe.topology().is_some();
        if !self.together && reloads { blocks::BLOCK_RUNS } else { 1 }
    }

    /// Which design ran, what it took and why, for the GPU-time file and the comment; `None`
    /// when no server was loaded (none was needed, or none came up).
    fn used(&self) -> Option<ServersUsed> {
        let loads = self.loads[0] + self.loads[1];
        let wakes = self.wakes[0] + self.wakes[1];
        if loads == 0 {
            return None;
        }
        let block_runs = u32::try_from(self.block_runs()).unwrap_or(u32::MAX);
        let side_name = |at: usize| if at == 0 { "base" } else { "PR" };
        let (design, why) = if self.together {
            (ServerDesign::Together, "the node has GPUs for both servers at once".to_owned())
        } else if self.recipe.topology().is_some() {
            (ServerDesign::Blocked, "a topology's servers are stopped and loaded again".to_owned())
        } else if let Some(at) = [0, 1].into_iter().find(|&at| self.keys[at] == MemoryApiKey::None)
        {
            let why = format!("{}'s recipe says server.memory-api = \"none\"", side_name(at));
            (ServerDesign::Blocked, why)
        } else if let Some(at) = [1, 0].into_iter().find(|&at| self.no_api[at]) {
            // One at a time, the PR's server is released (probed) first.
            let why = match self.keys[at] {
                MemoryApiKey::Sglang | MemoryApiKey::Vllm => format!(
                    "the {} server refused the {} memory API its recipe names",
                    side_name(at),
                    self.keys[at].name()
                ),
                _ => format!(
                    "the {} server answered neither SGLang's nor vLLM's memory API",
                    side_name(at)
                ),
            };
            (ServerDesign::Blocked, why)
        } else {
            let at = if self.apis[0].is_some() { 0 } else { 1 };
            let design = match self.apis[at] {
                Some(MemoryApi::Vllm) => ServerDesign::Vllm,
                _ => ServerDesign::Sglang,
            };
            let why = match self.keys[at] {
                MemoryApiKey::Sglang | MemoryApiKey::Vllm => format!(
                    "{}'s recipe says server.memory-api = \"{}\"",
                    side_name(at),
                    self.keys[at].name()
                ),
                _ if self.apis[at].is_some() => {
                    format!("the {} server answered that memory API", side_name(at))
                }
                _ => "no switch needed a memory API".to_owned(),
            };
            (design, why)
        };
        let switches = (loads + wakes).saturating_sub(1);
        Some(ServersUsed { design, loads, wakes, switches, block_runs, why })
    }

    /// The failure of a run on `side`'s server; when its process has exited, the server is
    /// failed for good.
    fn failure(&mut self, side: Side, detail: String) -> ServerFailure {
        let at = slot(side);
        let failure = ServerFailure { reason: NotRunReason::Crash, detail };
        if let Slot::Up(server) = &mut self.slots[at]
            && server.exited()
        {
            self.slots[at] = Slot::Failed(failure.clone());
        }
        failure
    }
}

/// A speed cell of a model: one concurrency.
pub(super) struct Cell {
    concurrency: u32,
    covered: bool,
    /// Its pairs so far, earlier runs' included, in order.
    pairs: Vec<Pair>,
    /// The node's stored calibration, when a `speed-noise` record has it.
    noise: Option<Calibration>,
    noise_key: NoiseKey,
    /// The in-band A/A differences of this run (`ln(after / before)` of each pair's base
    /// runs): the noise calibration's input.
    aa_differences: Vec<f64>,
    /// Failed: no more pairs.
    closed: bool,
    /// `noise` came from the cache and its `speed-noise` record is not written yet.
    unrecorded_noise: bool,
    /// Some pair of this run is of blocks (`prgate_gate::speed::blocks`).
    blocked: bool,
}

/// Whether a cell with `pairs` and `noise` (covered or not) needs another pair: the gate's
/// rule with the request's settings, title and the run's `family`, within the gate's cap.
pub(super) fn cell_needs_pair(
    request: &RunRequest<'_>,
    family: u32,
    pairs: &[Pair],
    noise: Option<Calibration>,
    covered: bool,
) -> bool {
    let speed = &request.gate.speed;
    let context = CellContext {
        cells: usize::try_from(family.max(1)).unwrap_or(usize::MAX),
        gain_required: request.gain_required && covered,
        calibration: noise,
    };
    pairs.len() < speed.max_pairs + speed.max_outliers
        && needs_another_pair(pairs, request.gate, &context)
}

/// Whether the gate judges a cell's stored calibration contradicted by the run's own in-band
/// A/A differences (`prgate_gate::speed::CellJudgement::calibration_stale`).
pub(super) fn calibration_stale(
    request: &RunRequest<'_>,
    family: u32,
    pairs: &[Pair],
    noise: Option<Calibration>,
) -> bool {
    let context = CellContext {
        cells: usize::try_from(family.max(1)).unwrap_or(usize::MAX),
        gain_required: false,
        calibration: noise,
    };
    noise.is_some() && judge_cell(pairs, request.gate, &context).calibration_stale
}

/// The first `<dir>/<stem>-<n>` that does not exist yet, `n` from 1.
fn fresh_folder(dir: &Path, stem: &str) -> PathBuf {
    (1..)
        .map(|n| dir.join(format!("{stem}-{n}")))
        .find(|path| !path.exists())
        .unwrap_or_else(|| dir.join(stem))
}

/// The GPUs the recipe's tests and timing scripts get: the first `tp` of the node's.
fn recipe_gpus(node: &crate::node::NodeProfile, recipe: &Recipe) -> Vec<u32> {
    node.gpus().iter().take(recipe.tp() as usize).map(|gpu| gpu.id).collect()
}

fn side_name(side: Side) -> &'static str {
    match side {
        Side::Base => "base",
        Side::Pr => "pr",
        Side::Both => "both",
    }
}

fn check_slug(check: Check) -> &'static str {
    match check {
        Check::UnitTests => "unit-tests",
        Check::KernelTests => "kernel-tests",
        _ => "tests",
    }
}

/// `outcome`, a not-run of a step of both sides, marked as broken on `side`.
fn failed_on(mut outcome: Outcome, side: Side) -> Outcome {
    if let Outcome::NotRun { failed_on, .. } = &mut outcome {
        *failed_on = Some(side);
    }
    outcome
}

/// The not-run outcome of a step whose server did not come up.
fn failed(failure: &ServerFailure) -> Outcome {
    not_run(failure.reason, format!("the server is not serving: {}", failure.detail), None)
}

/// A pytest session to run.
struct TestRun<'a> {
    selection: &'a [String],
    tree: &'a Path,
    timeout: Duration,
    /// The server the tests talk to (`PRGATE_SERVER_URL`).
    server: Option<&'a Serving>,
    gpus: &'a [u32],
}

/// Runs a pytest selection in its tree; with a server, the tests find it in
/// `PRGATE_SERVER_URL`. The JUnit XML comes back through the step's log folder.
fn pytest(exec: &Exec<'_>, run: &TestRun<'_>, log_dir: &Path, purpose: String) -> Outcome {
    let junit_xml = log_dir.join("junit.xml");
    let _absent = std::fs::remove_file(&junit_xml);
    let command = PytestCommand {
        python: PathBuf::from(exec.python()),
        selection: run.selection.to_vec(),
        junit_xml: PathBuf::from(exec.out_view(log_dir, "junit.xml")),
        extra_args: Vec::new(),
    };
    let argv = match junit::pytest_argv(&command) {
        Ok(argv) => argv.into_iter().map(|arg| arg.to_string_lossy().into_owned()).collect(),
        Err(error) => return not_run(NotRunReason::RecipeInvalid, error.to_string(), None),
    };
    let mut env = exec.side_env(run.tree);
    if let Some(server) = run.server {
        env.push(("PRGATE_SERVER_URL".to_owned(), format!("http://127.0.0.1:{}", server.port)));
    }
    let log = log_dir.join("pytest.log");
    let command = Command {
        argv,
        tree: run.tree,
        out: log_dir,
        env,
        datasets: None,
        log: log.clone(),
        timeout: run.timeout,
        gpus: run.gpus,
        purpose,
        server: run.server.and_then(|server| server.container.as_deref()),
    };
    if let Err(outcome) = exec.run(&command) {
        return outcome;
    }
    match untrusted::read_path(log_dir, &junit_xml, MAX_RESULT_FILE)
        .map_err(|problem| problem.to_string())
        .and_then(|xml| {
            junit::parse_junit(&xml).map_err(|error| format!("{}: {error}", junit_xml.display()))
        }) {
        Ok(results) => Outcome::Tests { results },
        // No JUnit: either pytest itself cannot start here (the node cannot judge), or the
        // suite broke it.
        Err(error) => match pytest_starts(exec, run, log_dir) {
            Ok(()) => not_run(NotRunReason::NoResult, with_log_tail(error, &log), None),
            Err(detail) => not_run(NotRunReason::Harness, detail, None),
        },
    }
}

/// Whether `python -m pytest --version` runs where the suite ran; the reason when it does not.
fn pytest_starts(exec: &Exec<'_>, run: &TestRun<'_>, log_dir: &Path) -> Result<(), String> {
    let log = log_dir.join("pytest-version.log");
    let command = Command {
        argv: vec![exec.python().to_owned(), "-m".into(), "pytest".into(), "--version".into()],
        tree: run.tree,
        out: log_dir,
        env: exec.side_env(run.tree),
        datasets: None,
        log: log.clone(),
        timeout: run.timeout.min(Duration::from_secs(120)),
        gpus: &[],
        purpose: "pytest-version".to_owned(),
        server: None,
    };
    match exec.run(&command) {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(with_log_tail(
            format!("pytest cannot start here: `{} -m pytest --version` {status}", exec.python()),
            &log,
        )),
        Err(outcome) => Err(match outcome {
            Outcome::NotRun { detail, .. } => format!("pytest cannot start here: {detail}"),
            _ => "pytest cannot start here".to_owned(),
        }),
    }
}

/// Runs every timing script of `recipe` in `tree`; their kernels are named `<script>/<kernel>`.
fn timing(
    exec: &Exec<'_>,
    recipe: &Recipe,
    tree: &Path,
    log_dir: &Path,
    timeout: Duration,
    gpus: &[u32],
    purpose: &str,
) -> Outcome {
    let mut kernels: Vec<KernelSamples> = Vec::new();
    for script in recipe.kernel_timing() {
        let file = format!("{}.json", script.name);
        let output = log_dir.join(&file);
        let _absent = std::fs::remove_file(&output);
        let log = log_dir.join(format!("{}.log", script.name));
        let command = Command {
            argv: script.command(&exec.out_view(log_dir, &file)),
            tree,
            out: log_dir,
            env: exec.side_env(tree),
            datasets: None,
            log: log.clone(),
            timeout,
            gpus,
            purpose: format!("{purpose}-{}", script.name),
            server: None,
        };
        if let Err(outcome) = exec.run(&command) {
            return outcome;
        }
        let parsed = untrusted::read_to_string(log_dir, Path::new(&file), MAX_RESULT_FILE)
            .map_err(|error| error.to_string())
            .and_then(|text| {
                parse_timing_output(&text, &script.name).map_err(|error| error.to_string())
            });
        match parsed {
            Ok(samples) => kernels.extend(samples.into_iter().map(|kernel| KernelSamples {
                name: format!("{}/{}", script.name, kernel.name),
                samples_us: kernel.samples_us,
            })),
            Err(problem) => {
                return not_run(NotRunReason::NoResult, with_log_tail(problem, &log), None);
            }
        }
    }
    Outcome::KernelTiming { kernels }
}
