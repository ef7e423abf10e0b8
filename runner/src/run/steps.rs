//! The step loop of one model's job and of the common checks: each step recorded (or skipped,
//! when an earlier run recorded it) through [`Runner::step`].
//!
//! Which steps there are is the job plan's: a target's steps are taken from its [`Queue`]
//! (`queue`), phase by phase; a step the plan knows the outcome of is recorded as it says, and
//! one it queues is run by the recipe's commands. The recipe says how to run a step, never
//! whether it exists. This file holds the loop and what every step shares (opening, closing
//! and recording a step, the run's time limit, a tree's install); each phase's work is a file
//! of its own: the tests phase and pytest (`pytest`), kernel timing (`timing`), the served
//! phase (`served`) with its servers (`servers`), accuracy's repeats (`accuracy`) and speed's
//! cells (`speed`).
//!
//! What it leaves to others: the job plan (`crate::job`), the run's stages
//! (`super::session`).

mod accuracy;
mod pytest;
mod queue;
mod served;
mod servers;
mod speed;
mod timing;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use prgate_gate::evidence::{Check, NotRunReason, Outcome, Provenance, Side};
use prgate_scope::plan::ModelPlan;

use super::emit::Emitter;
use super::exec::{Command, Exec};
use super::server::with_log_tail;
use super::{RunError, RunRequest, RunSummary, StepFailure, evidence, not_run};
use crate::cache::Cache;
use crate::gpu_time::{Phase, PhaseClock, ServersUsed};
use crate::job::{CommonSource, NoBaseRecipe, RecipeSource};
use crate::key::Key;
use crate::recipe::{Install, Recipe};
use crate::results::{Part, ResultsDir, StepId, StepStarted};
use prgate_gate::job::{ExpectedStep, Target, whole_check_side};

use pytest::{TestRun, pytest};
use queue::{Queue, Queued};
pub(super) use speed::cell_needs_pair;

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
    pub installed: BTreeMap<(PathBuf, Vec<String>), Result<(), StepFailure>>,
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
    pub base_recipe: Result<&'j Recipe, &'j NoBaseRecipe>,
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
    /// need a server are recorded `not-run` so.
    pub no_checkpoint: Option<StepFailure>,
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

    /// The tree base's measuring inputs come from on both sides: a builtin benchmark's dataset,
    /// and the working directory and user site of an external evaluator or speed benchmark. It
    /// is base's, so that the PR's tree can neither edit the questions nor shadow or wrap the
    /// tool that measures its server (a module of the same name found first from the working
    /// directory, a `.pth` in the side's user site); the PR's for a model new in the PR, which
    /// has no other: the tree base's server runs in.
    fn measuring_tree(&self) -> &Path {
        self.server_tree(Side::Base)
    }

    /// The tree each side's server runs in: a new model's baseline is the PR tree.
    fn server_tree(&self, side: Side) -> &Path {
        match side {
            Side::Base => self.base_tree.unwrap_or(self.pr_tree),
            Side::Pr | Side::Both => self.pr_tree,
        }
    }

    /// The recipe `side` runs: the PR side the PR's (`pr`), the base side its own commands;
    /// `no-recipe` when the base side has none to take them from. The one lookup of a side's
    /// recipe: a base side without one has no recipe at all, never the PR's in its place.
    fn side_recipe<'a>(&'a self, pr: &'a Recipe, side: Side) -> Result<&'a Recipe, StepFailure> {
        match side {
            Side::Base => self
                .base_recipe
                .map_err(|why| StepFailure::new(NotRunReason::NoRecipe, why.to_string())),
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

    /// Installs `tree` with `install` once per run; the outcome is remembered. A failed
    /// install is a `crash` of the steps that needed it.
    fn install(
        &mut self,
        install: Option<&Install>,
        timeout: Option<Duration>,
        side: Side,
        tree: &Path,
    ) -> Result<(), StepFailure> {
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
        let failed = |detail: &dyn std::fmt::Display| {
            StepFailure::crash(format!("installing the {side_name} tree failed: {detail}"))
        };
        let outcome = match std::fs::create_dir_all(&out) {
            Err(error) => Err(failed(&format_args!("{}: {error}", out.display()))),
            // The command's own reason (a timeout, a stall) is a crash of the install too.
            Ok(()) => match self.exec.run(&command) {
                Err(failure) => Err(failed(&failure.detail)),
                Ok(status) if status.success() => Ok(()),
                Ok(status) => Err(failed(&with_log_tail(status, &log))),
            },
        };
        self.installed.insert(key, outcome.clone());
        outcome
    }

    /// The common checks: the job plan's steps, one pytest session per side it queues over the
    /// common recipe's selections (base's, when it has a valid one: `job::common_target`).
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
            // A recipe that is the PR's own (base has no valid one) never runs its install
            // command in base's tree: the PR's commands stay off the base side.
            let own = target.recipe.contract.own && side == Side::Base;
            let install = recipe.install.as_ref().filter(|_| !own);
            let installed = self.install(install, recipe.install_timeout, side, tree);
            let timeout = self.limit(recipe.tests_timeout.unwrap_or(DEFAULT_STEP_TIMEOUT));
            let exec = self.exec;
            let run =
                TestRun { selection: &recipe.selections, tree, timeout, server: None, gpus: &[] };
            let purpose = format!("common-{}-tests", side_name(side));
            let _phase = self.clock.enter(Phase::Tests);
            self.step(subject, Check::CommonTests, side, None, |log| match installed {
                Ok(()) => pytest(&exec, &run, log, purpose),
                Err(failure) => failure.not_run(None),
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

    /// Installs a side's tree with that side's recipe, and returns that recipe: the one the
    /// side's commands come from. Why it cannot when it cannot (no recipe on the base side to
    /// take the command from, or the install failed).
    fn install_side<'a>(
        &mut self,
        job: &'a ModelJob<'_>,
        recipe: &'a Recipe,
        side: Side,
        tree: &Path,
    ) -> Result<&'a Recipe, StepFailure> {
        let recipe = job.side_recipe(recipe, side)?;
        self.install(recipe.install(), recipe.timeouts().install, side, tree)?;
        Ok(recipe)
    }
}

/// The GPUs the recipe's tests and timing scripts get: the first `tp` of the node's.
fn recipe_gpus(node: &crate::node::NodeProfile, recipe: &Recipe) -> Vec<u32> {
    node.gpus().iter().take(recipe.tp() as usize).map(|gpu| gpu.id).collect()
}

fn side_name(side: Side) -> &'static str {
    side.as_str()
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
fn failed(failure: &StepFailure) -> Outcome {
    not_run(failure.reason, format!("the server is not serving: {}", failure.detail), None)
}
