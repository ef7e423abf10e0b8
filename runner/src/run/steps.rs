//! The steps of one model's job, each recorded (or skipped, when an earlier run recorded it)
//! through [`Runner::step`].

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use prgate_gate::evidence::{Check, KernelSamples, NotRunReason, Outcome, Provenance, Side};
use prgate_gate::speed::{CellContext, Pair, needs_another_pair};
use prgate_scope::plan::{ModelPlan, Tier};

use super::leftovers::Entry;
use super::server::{Server, ServerFailure, TAIL_LINES};
use super::{
    RecipeSource, RunError, RunRequest, RunSummary, any_missing, evidence, not_run, recorded_pairs,
};
use crate::accuracy::{self, EvalConfig};
use crate::bench::{self, BenchConfig, Endpoint};
use crate::junit::{self, PytestCommand};
use crate::process::{ChildGroup, Environment, Finished, ProcessSpec, tail};
use crate::recipe::timing::parse_timing_output;
use crate::recipe::{Evaluator, NotRunnable, Recipe};
use crate::results::{EventWriter, ResultsDir, StepId};

/// A step's time limit when the recipe gives none.
const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(60 * 60);
/// The `model` sent to a server: SGLang serves any name it is given as its one model.
const SERVED_MODEL: &str = "default";

/// The run's state across models.
pub(super) struct Runner<'r> {
    pub request: &'r RunRequest<'r>,
    pub results: &'r ResultsDir,
    pub events: Option<&'r EventWriter>,
    pub completed: BTreeSet<StepId>,
    pub summary: &'r mut RunSummary,
    pub family: u32,
    /// Where the live process groups are written down.
    pub processes: &'r Path,
}

/// One model's job.
pub(super) struct ModelJob<'j> {
    pub model: &'j ModelPlan,
    pub recipe: &'j RecipeSource,
    /// The base tree; `None` for a model new in the PR.
    pub base_tree: Option<&'j Path>,
    pub pr_tree: &'j Path,
    pub provenance: Provenance,
}

impl ModelJob<'_> {
    fn name(&self) -> &str {
        &self.model.name
    }

    fn full(&self) -> bool {
        self.model.tier == Tier::Full
    }

    /// The sides whose trees exist: base (unless the model is new) and PR.
    fn tree_sides(&self) -> Vec<(Side, &Path)> {
        let mut sides = Vec::new();
        if let Some(base) = self.base_tree {
            sides.push((Side::Base, base));
        }
        sides.push((Side::Pr, self.pr_tree));
        sides
    }

    /// The checks of its tier.
    fn checks(&self) -> Vec<Check> {
        let mut checks =
            vec![Check::UnitTests, Check::KernelTests, Check::ServingTests, Check::Routing];
        if self.full() {
            checks.extend([Check::KernelTiming, Check::Accuracy]);
        }
        checks.push(Check::Speed);
        checks
    }
}

/// The side a whole-check `not-run` record is written on.
fn not_run_side(check: Check) -> Side {
    if check == Check::Speed { Side::Both } else { Side::Pr }
}

impl Runner<'_> {
    /// Records one step: skips it when an earlier run did, else runs `work` in its log folder
    /// and writes its outcome. Returns the outcome when the step ran.
    fn step(
        &mut self,
        job: &ModelJob<'_>,
        check: Check,
        side: Side,
        part: Option<&str>,
        work: impl FnOnce(&Path) -> Outcome,
    ) -> Result<Option<Outcome>, RunError> {
        let id = StepId::new(Some(job.name()), check, side, part);
        if self.completed.contains(&id) {
            if let Some(events) = self.events {
                events.step_skipped(&id)?;
            }
            self.summary.skipped += 1;
            return Ok(None);
        }
        let log_dir = self.results.step_log_dir(&id)?;
        let started = self.events.map(|events| events.step_started(&id)).transpose()?;
        let mut outcome = work(&log_dir);
        // A not-run record of a step with a part names it, so that it is the same step.
        if let Outcome::NotRun { subject, .. } = &mut outcome
            && subject.is_none()
        {
            *subject = part.map(str::to_owned);
        }
        let record = evidence(job.name(), check, side, &job.provenance, outcome.clone());
        self.results.write(&record)?;
        if let (Some(events), Some(started)) = (self.events, started) {
            events.step_finished(&id, started, &record)?;
        }
        self.summary.recorded += 1;
        self.completed.insert(id);
        Ok(Some(outcome))
    }

    fn record(
        &mut self,
        job: &ModelJob<'_>,
        check: Check,
        side: Side,
        part: Option<&str>,
        outcome: Outcome,
    ) -> Result<(), RunError> {
        self.step(job, check, side, part, |_log| outcome).map(drop)
    }

    fn done(&self, job: &ModelJob<'_>, check: Check, side: Side, part: Option<&str>) -> bool {
        self.completed.contains(&StepId::new(Some(job.name()), check, side, part))
    }

    /// Runs every step of one model.
    pub(super) fn model(&mut self, job: &ModelJob<'_>) -> Result<(), RunError> {
        let recipe = match job.recipe {
            RecipeSource::Parsed { recipe, .. } => recipe,
            RecipeSource::Missing { path } => {
                let detail = format!("the PR's tree has no recipe at {path}");
                return self.not_run_all(job, NotRunReason::NoRecipe, &detail);
            }
            RecipeSource::Invalid { error, .. } => {
                let detail = format!("the recipe is not valid: {error}");
                return self.not_run_all(job, NotRunReason::Other, &detail);
            }
        };
        let blockers = recipe.check_runs_on(self.request.node).err();
        self.tests(job, recipe)?;
        if job.full() {
            self.kernel_timing(job, recipe, blockers.as_ref())?;
        }
        self.served(job, recipe, blockers.as_ref())
    }

    fn not_run_all(
        &mut self,
        job: &ModelJob<'_>,
        reason: NotRunReason,
        detail: &str,
    ) -> Result<(), RunError> {
        for check in job.checks() {
            self.record(job, check, not_run_side(check), None, not_run(reason, detail, None))?;
        }
        Ok(())
    }

    /// Unit and kernel tests on each side (serving tests need the servers: see `served`).
    fn tests(&mut self, job: &ModelJob<'_>, recipe: &Recipe) -> Result<(), RunError> {
        let tests = recipe.tests();
        let timeouts = recipe.timeouts();
        for (check, selection, timeout) in [
            (Check::UnitTests, &tests.unit, timeouts.unit_tests),
            (Check::KernelTests, &tests.kernel, timeouts.kernel_tests),
        ] {
            if selection.is_empty() {
                let detail = format!("the recipe selects no {}", check.describe());
                self.record(
                    job,
                    check,
                    Side::Pr,
                    None,
                    not_run(NotRunReason::Other, detail, None),
                )?;
                continue;
            }
            for (side, tree) in job.tree_sides() {
                let python = self.request.python;
                let timeout = timeout.unwrap_or(DEFAULT_STEP_TIMEOUT);
                let processes = self.processes;
                self.step(job, check, side, None, |log| {
                    pytest(python, selection, tree, log, timeout, None, processes)
                })?;
            }
        }
        Ok(())
    }

    fn kernel_timing(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        blockers: Option<&NotRunnable>,
    ) -> Result<(), RunError> {
        if let Some(blocker) = blockers.and_then(|b| b.blocker_for(Check::KernelTiming, None)) {
            let outcome = not_run(blocker.reason(), blocker.to_string(), None);
            return self.record(job, Check::KernelTiming, Side::Pr, None, outcome);
        }
        if recipe.kernel_timing().is_empty() {
            let outcome =
                not_run(NotRunReason::Other, "the recipe has no kernel timing scripts", None);
            return self.record(job, Check::KernelTiming, Side::Pr, None, outcome);
        }
        let timeout = recipe.timeouts().kernel_timing.unwrap_or(DEFAULT_STEP_TIMEOUT);
        let processes = self.processes;
        for (side, tree) in job.tree_sides() {
            self.step(job, Check::KernelTiming, side, None, |log| {
                timing(recipe, tree, log, timeout, processes)
            })?;
        }
        Ok(())
    }

    /// Everything that needs the servers: serving tests, accuracy, speed and routing.
    fn served(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        blockers: Option<&NotRunnable>,
    ) -> Result<(), RunError> {
        if let Some(blocker) = blockers.and_then(|b| b.blocker_for(Check::Routing, None)) {
            for check in [Check::ServingTests, Check::Routing, Check::Accuracy, Check::Speed] {
                if check == Check::Accuracy && !job.full() {
                    continue;
                }
                let outcome = not_run(blocker.reason(), blocker.to_string(), None);
                self.record(job, check, not_run_side(check), None, outcome)?;
            }
            return Ok(());
        }
        let sides = [Side::Base, Side::Pr];
        let mut needed: Vec<StepId> = Vec::new();
        let name = job.name().to_owned();
        let id = |check, side, part: Option<&str>| StepId::new(Some(&name), check, side, part);
        if recipe.tests().serving.is_empty() {
            let detail = "the recipe selects no serving tests";
            self.record(
                job,
                Check::ServingTests,
                Side::Pr,
                None,
                not_run(NotRunReason::Other, detail, None),
            )?;
        } else {
            needed.extend(sides.map(|side| id(Check::ServingTests, side, None)));
        }
        let mut benchmarks = Vec::new();
        if job.full() {
            if recipe.accuracy().is_empty() {
                let detail = "the recipe has no accuracy benchmarks";
                self.record(
                    job,
                    Check::Accuracy,
                    Side::Pr,
                    None,
                    not_run(NotRunReason::Other, detail, None),
                )?;
            }
            for benchmark in recipe.accuracy() {
                let part = Some(benchmark.name.as_str());
                if let Some(blocker) = blockers.and_then(|b| b.blocker_for(Check::Accuracy, part)) {
                    let outcome = not_run(blocker.reason(), blocker.to_string(), part);
                    self.record(job, Check::Accuracy, Side::Pr, part, outcome)?;
                    continue;
                }
                match &benchmark.evaluator {
                    Evaluator::External(_) => {
                        let detail =
                            "external evaluators are not run yet: only the built-in one is";
                        self.record(
                            job,
                            Check::Accuracy,
                            Side::Pr,
                            part,
                            not_run(NotRunReason::Other, detail, part),
                        )?;
                    }
                    Evaluator::Builtin(builtin) => {
                        needed.extend(sides.map(|side| id(Check::Accuracy, side, part)));
                        benchmarks.push((benchmark.name.clone(), builtin.clone()));
                    }
                }
            }
        }
        needed.extend(sides.map(|side| id(Check::Routing, side, None)));
        let cells = self.open_cells(job, recipe)?;
        if !any_missing(&self.completed, &needed) && cells.is_empty() {
            // Everything the servers would do is recorded: skip them, and say so.
            for step in needed {
                if let Some(events) = self.events {
                    events.step_skipped(&step)?;
                }
                self.summary.skipped += 1;
            }
            return Ok(());
        }

        // The servers: base first (SGLang's own path for a new model), then PR.
        let base_tree = job.base_tree.unwrap_or(job.pr_tree);
        let base_log =
            self.results.step_log_dir(&id(Check::Routing, Side::Base, None))?.join("server.log");
        let base = Server::start(
            recipe,
            self.request.node,
            base_tree,
            !job.model.new,
            base_log,
            self.processes,
        );
        let pr_log =
            self.results.step_log_dir(&id(Check::Routing, Side::Pr, None))?.join("server.log");
        let pr =
            Server::start(recipe, self.request.node, job.pr_tree, true, pr_log, self.processes);
        let servers = [(Side::Base, base_tree, &base), (Side::Pr, job.pr_tree, &pr)];

        for (side, tree, server) in servers {
            let selection = &recipe.tests().serving;
            if !selection.is_empty() {
                let python = self.request.python;
                let timeout = recipe.timeouts().serving_tests.unwrap_or(DEFAULT_STEP_TIMEOUT);
                let processes = self.processes;
                self.step(job, Check::ServingTests, side, None, |log| match server {
                    Ok(server) => {
                        pytest(python, selection, tree, log, timeout, Some(&server.url), processes)
                    }
                    Err(failure) => failed(failure),
                })?;
            }
            for (benchmark, builtin) in &benchmarks {
                let part = Some(benchmark.as_str());
                self.step(job, Check::Accuracy, side, part, |_log| match server {
                    Ok(server) => evaluate(server, tree, benchmark, builtin),
                    Err(failure) => failed(failure),
                })?;
            }
        }
        if !cells.is_empty() {
            match (&base, &pr) {
                (Ok(base), Ok(pr)) => self.speed(job, recipe, cells, base, pr)?,
                (Err(failure), _) | (_, Err(failure)) => {
                    self.record(job, Check::Speed, Side::Both, None, failed(failure))?;
                }
            }
        }
        let pattern = &recipe.server().routing_pattern;
        for (side, _tree, server) in servers {
            self.step(job, Check::Routing, side, None, |_log| match server {
                Ok(server) => server.routing(pattern),
                Err(failure) => failed(failure),
            })?;
        }
        // Dropping the servers stops them.
        drop((base, pr));
        Ok(())
    }

    /// The speed cells still open: `(concurrency, covered, pairs so far)`.
    fn open_cells(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
    ) -> Result<Vec<(u32, bool, Vec<Pair>)>, RunError> {
        let Some(sweep) = recipe.speed() else {
            let detail = "the recipe has no speed sweep";
            self.record(
                job,
                Check::Speed,
                Side::Both,
                None,
                not_run(NotRunReason::Other, detail, None),
            )?;
            return Ok(Vec::new());
        };
        if self.done(job, Check::Speed, Side::Both, None) {
            return Ok(Vec::new());
        }
        let recorded = recorded_pairs(self.results, job.name())?;
        let mut cells = Vec::new();
        for &concurrency in sweep.concurrencies_for(job.model.tier == Tier::Smoke) {
            if self.done(job, Check::Speed, Side::Both, Some(&format!("concurrency-{concurrency}")))
            {
                continue;
            }
            let pairs: Vec<Pair> = recorded
                .get(&concurrency)
                .map(|pairs| pairs.iter().map(|(_, pair)| *pair).collect())
                .unwrap_or_default();
            let covered = sweep.is_covered(concurrency);
            if self.cell_open(&pairs, covered) {
                cells.push((concurrency, covered, pairs));
            } else if let Some(events) = self.events {
                for index in 0..pairs.len() {
                    events.step_skipped(&StepId::new(
                        Some(job.name()),
                        Check::Speed,
                        Side::Both,
                        Some(&format!("concurrency-{concurrency}-pair-{index}")),
                    ))?;
                }
            }
        }
        Ok(cells)
    }

    fn cell_open(&self, pairs: &[Pair], covered: bool) -> bool {
        let context = CellContext {
            cells: usize::try_from(self.family.max(1)).unwrap_or(usize::MAX),
            gain_required: self.request.gain_required && covered,
            known_variance: None,
        };
        pairs.len() < self.request.gate.speed.max_pairs
            && needs_another_pair(pairs, self.request.gate, &context)
    }

    fn speed(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        cells: Vec<(u32, bool, Vec<Pair>)>,
        base: &Server,
        pr: &Server,
    ) -> Result<(), RunError> {
        let Some(sweep) = recipe.speed() else { return Ok(()) };
        let timeout = recipe.timeouts().speed_run.unwrap_or(DEFAULT_STEP_TIMEOUT);
        let family = self.family;
        for (concurrency, covered, mut pairs) in cells {
            let config = |url: &str| BenchConfig {
                base_url: url.to_owned(),
                model: SERVED_MODEL.to_owned(),
                endpoint: Endpoint::Completions,
                input_len: sweep.input_len,
                output_len: sweep.output_len,
                concurrency,
                requests: sweep.requests_per_concurrency.saturating_mul(concurrency),
                warmup: sweep.warmup_per_concurrency.saturating_mul(concurrency),
                timeout,
            };
            while self.cell_open(&pairs, covered) {
                let index = u32::try_from(pairs.len()).unwrap_or(u32::MAX);
                let first = if index % 2 == 0 { Side::Base } else { Side::Pr };
                let mut failure = None;
                let mut tpot = |server: &Server| -> Option<f64> {
                    match bench::run(&config(&server.url)) {
                        Ok(result) if result.failed == 0 && result.median_tpot_ms.is_some() => {
                            result.median_tpot_ms
                        }
                        Ok(result) => {
                            // A run some of whose requests failed measured a server in
                            // trouble (it died, it errs): no pair of it is evidence of speed.
                            failure = Some(format!(
                                "{} of {} requests of the run at concurrency {concurrency} on {} failed: {}\nlast lines of the server's log:\n{}",
                                result.failed,
                                result.failed + result.completed,
                                server.url,
                                result.errors.join("; "),
                                server.log_tail()
                            ));
                            None
                        }
                        Err(error) => {
                            failure = Some(format!(
                                "{error}\nlast lines of the server's log:\n{}",
                                server.log_tail()
                            ));
                            None
                        }
                    }
                };
                let (base_tpot, pr_tpot) = if first == Side::Base {
                    let base_tpot = tpot(base);
                    (base_tpot, base_tpot.and_then(|_| tpot(pr)))
                } else {
                    let pr_tpot = tpot(pr);
                    (pr_tpot.and_then(|_| tpot(base)), pr_tpot)
                };
                let (Some(base_tpot_ms), Some(pr_tpot_ms)) = (base_tpot, pr_tpot) else {
                    let part = format!("concurrency-{concurrency}");
                    let detail = failure.unwrap_or_default();
                    self.record(
                        job,
                        Check::Speed,
                        Side::Both,
                        Some(&part),
                        not_run(NotRunReason::Crash, detail, None),
                    )?;
                    break;
                };
                let part = format!("concurrency-{concurrency}-pair-{index}");
                let outcome = Outcome::SpeedPair {
                    concurrency,
                    index,
                    covered,
                    base_tpot_ms,
                    pr_tpot_ms,
                    first,
                    family: Some(family),
                };
                self.record(job, Check::Speed, Side::Both, Some(&part), outcome)?;
                pairs.push(Pair { base_tpot_ms, pr_tpot_ms });
            }
        }
        Ok(())
    }
}

/// The not-run outcome of a step whose server did not come up.
fn failed(failure: &ServerFailure) -> Outcome {
    not_run(failure.reason, format!("the server is not serving: {}", failure.detail), None)
}

/// What a command's run came to, when it is not a normal exit.
fn run_command(
    argv: Vec<OsString>,
    cwd: &Path,
    env: Environment,
    log: PathBuf,
    timeout: Duration,
    processes: &Path,
) -> Result<(), Outcome> {
    let mut spec = ProcessSpec::new(argv, cwd, log.clone());
    spec.env = env;
    let tail_of = |log: &Path| tail(log, TAIL_LINES).unwrap_or_default();
    let mut group = ChildGroup::spawn(&spec)
        .map_err(|error| not_run(NotRunReason::Crash, error.to_string(), None))?;
    let _entry = Entry::write(processes, group.id());
    let finished = group.wait_with_timeout(timeout);
    // Stopped before it is crossed out, whatever the wait gave.
    drop(group);
    match finished {
        Ok(Finished::Exited(_status)) => Ok(()),
        Ok(Finished::TimedOut(_stopped)) => Err(not_run(
            NotRunReason::Timeout,
            format!(
                "stopped after {timeout:?}\nlast lines of {}:\n{}",
                log.display(),
                tail_of(&log)
            ),
            None,
        )),
        Err(error) => Err(not_run(NotRunReason::Other, error.to_string(), None)),
    }
}

/// The environment of a command run in a tree: the minimal one, no bytecode written into the
/// tree.
fn tree_environment() -> Environment {
    Environment::minimal().set("PYTHONDONTWRITEBYTECODE", "1")
}

/// Runs a pytest selection in `tree`; with `server`, the tests find it in `PRGATE_SERVER_URL`.
fn pytest(
    python: &Path,
    selection: &[String],
    tree: &Path,
    log_dir: &Path,
    timeout: Duration,
    server: Option<&str>,
    processes: &Path,
) -> Outcome {
    let junit_xml = log_dir.join("junit.xml");
    let _absent = std::fs::remove_file(&junit_xml);
    let command = PytestCommand {
        python: python.to_path_buf(),
        selection: selection.to_vec(),
        junit_xml: junit_xml.clone(),
        extra_args: Vec::new(),
    };
    let argv = match junit::pytest_argv(&command) {
        Ok(argv) => argv,
        Err(error) => return not_run(NotRunReason::Other, error.to_string(), None),
    };
    let mut env = tree_environment();
    if let Some(url) = server {
        env = env.set("PRGATE_SERVER_URL", url);
    }
    let log = log_dir.join("pytest.log");
    if let Err(outcome) = run_command(argv, tree, env, log.clone(), timeout, processes) {
        return outcome;
    }
    match junit::read_junit_file(&junit_xml) {
        Ok(results) => Outcome::Tests { results },
        Err(error) => not_run(
            NotRunReason::Crash,
            format!(
                "{error}\nlast lines of {}:\n{}",
                log.display(),
                tail(&log, TAIL_LINES).unwrap_or_default()
            ),
            None,
        ),
    }
}

/// Runs every timing script of `recipe` in `tree`; their kernels are named `<script>/<kernel>`.
fn timing(
    recipe: &Recipe,
    tree: &Path,
    log_dir: &Path,
    timeout: Duration,
    processes: &Path,
) -> Outcome {
    let mut kernels: Vec<KernelSamples> = Vec::new();
    for script in recipe.kernel_timing() {
        let output = log_dir.join(format!("{}.json", script.name));
        let _absent = std::fs::remove_file(&output);
        let argv: Vec<OsString> =
            script.command(&output.display().to_string()).into_iter().map(OsString::from).collect();
        let log = log_dir.join(format!("{}.log", script.name));
        if let Err(outcome) =
            run_command(argv, tree, tree_environment(), log.clone(), timeout, processes)
        {
            return outcome;
        }
        let parsed = std::fs::read_to_string(&output)
            .map_err(|error| format!("{}: {error}", output.display()))
            .and_then(|text| {
                parse_timing_output(&text, &script.name).map_err(|error| error.to_string())
            });
        match parsed {
            Ok(samples) => kernels.extend(samples.into_iter().map(|kernel| KernelSamples {
                name: format!("{}/{}", script.name, kernel.name),
                samples_us: kernel.samples_us,
            })),
            Err(problem) => {
                return not_run(
                    NotRunReason::Crash,
                    format!(
                        "{problem}\nlast lines of {}:\n{}",
                        log.display(),
                        tail(&log, TAIL_LINES).unwrap_or_default()
                    ),
                    None,
                );
            }
        }
    }
    Outcome::KernelTiming { kernels }
}

/// The built-in evaluator against `server`, with the dataset from `tree`.
fn evaluate(
    server: &Server,
    tree: &Path,
    benchmark: &str,
    builtin: &crate::recipe::BuiltinEvaluator,
) -> Outcome {
    let questions = match accuracy::read_dataset(&tree.join(&builtin.dataset)) {
        Ok(questions) => questions,
        Err(error) => return not_run(NotRunReason::Other, error.to_string(), Some(benchmark)),
    };
    let mut config = EvalConfig::new(&server.url, SERVED_MODEL);
    config.limit = builtin.limit.map(|limit| limit as usize);
    match accuracy::evaluate(&config, &questions) {
        Ok(evaluation) if evaluation.questions() > 0 => evaluation.outcome(benchmark),
        Ok(_empty) => not_run(NotRunReason::Other, "the dataset has no questions", Some(benchmark)),
        Err(error) => not_run(
            NotRunReason::Crash,
            format!("{error}\nlast lines of the server's log:\n{}", server.log_tail()),
            Some(benchmark),
        ),
    }
}
