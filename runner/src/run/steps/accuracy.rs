//! Accuracy (full tier): each benchmark's seeded repeats on both sides, the first while each
//! side's server is up, later ones round by round while the gate's `needs_another_repeat` says
//! the benchmark is open; a base repeat from the node's cache when both sides' recipes are the
//! same file; the built-in evaluator or an external one (sgl-eval) against a side's server.
//!
//! What it leaves to others: deciding a benchmark (`prgate_gate::accuracy`), the evaluators
//! (`crate::accuracy`), the servers (`servers`).

use std::path::Path;

use prgate_gate::accuracy::{
    self as accuracy_rule, BenchmarkRepeats, Looks, SideResult, needs_another_repeat,
};
use prgate_gate::evidence::{Check, NotRunReason, Outcome, Repeat, Side};

use crate::accuracy::gated::HubDataset;
use crate::accuracy::{self, EvalConfig, gated, sgl_eval};
use crate::cache::AccuracyKey;
use crate::gpu_time::Phase;
use crate::key::Key;
use crate::recipe::{
    AccuracyBenchmark, BuiltinEvaluator, Evaluator, ExternalEvaluator, Install, Recipe,
};
use crate::results::{Part, StepId};
use crate::run::exec::Command;
use crate::run::server::{Launch, server_log_tail, with_log_tail};
use crate::run::{RunError, StepFailure, not_run};
use crate::untrusted;

use super::served::Served;
use super::servers::Serving;
use super::{DEFAULT_STEP_TIMEOUT, ModelJob, Runner, SERVED_MODEL, failed, slot};

impl Runner<'_> {
    /// One accuracy benchmark on one side, by that side's recipe's evaluator of the same name.
    pub(super) fn accuracy_on(
        &mut self,
        served: &mut Served<'_>,
        side: Side,
        benchmark: &AccuracyBenchmark,
        repeat: u32,
    ) -> Result<(), RunError> {
        let (job, recipe) = (served.job, served.servers.recipe);
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
        // The server first (its load is a server event of its own), then the step, whose
        // events bracket the evaluation (and the history prices it).
        let expired = |detail| StepFailure::new(NotRunReason::RunTimeLimit, detail);
        let mut server = match self.out_of_time() {
            Some(detail) => Err(expired(detail)),
            None => self.server(&mut served.servers, side),
        };
        let Some(open) = self.open_step(subject, Check::Accuracy, side, part)? else {
            return Ok(());
        };
        if let Some(detail) = open.expired.clone() {
            server = Err(expired(detail));
        }
        let outcome = match server {
            Ok(serving) => {
                let step = StepId::new(Some(job.name()), Check::Accuracy, side, part.cloned());
                self.repeat_on(served, (side, &step), benchmark, &serving, stamp.seed)
            }
            Err(failure) => failed(&failure),
        };
        let outcome = stamped(outcome, stamp, &this_repeat);
        if side == Side::Base && !job.model.new && job.cacheable {
            self.store_accuracy(job, recipe, benchmark, stamp.seed, &outcome);
        }
        self.close_step(subject, part, open, outcome).map(drop)
    }

    /// One repeat (`seed`) of `benchmark` against `side`'s server, by that side's recipe's
    /// evaluator of the same name, as the step `step`: the base side never runs the PR's
    /// command, nor fetches a gated dataset its own recipe does not name.
    fn repeat_on(
        &self,
        served: &Served<'_>,
        (side, step): (Side, &StepId),
        benchmark: &AccuracyBenchmark,
        serving: &Serving,
        seed: u64,
    ) -> Outcome {
        let Served { job, servers } = served;
        let name = benchmark.name.as_str();
        let recipe = match servers.side_recipe(side) {
            Ok(recipe) => recipe,
            Err(failure) => return failure.not_run(Some(name)),
        };
        let Some(side_benchmark) = recipe.accuracy().iter().find(|other| other.name == name) else {
            let detail = format!(
                "the base side's recipe has no command for benchmark {name}: the base side never runs the PR's"
            );
            return not_run(NotRunReason::NoRecipe, detail, Some(name));
        };
        if let Some(dataset) = gated_elsewhere(job.base_own, side_benchmark) {
            let detail = format!(
                "benchmark {name} names the gated dataset {dataset}, which the base side's own recipe does not: the node's token fetches only what the base side names"
            );
            return not_run(NotRunReason::GatedDataset, detail, Some(name));
        }
        let _phase = self.clock.enter(Phase::Accuracy);
        let launch = &servers.launches[slot(side)];
        // An external evaluator writes its results into the step's own log folder, which no
        // server mounts: the server's output folder is PR code's to write (its `/work/out`),
        // so results there could be the PR's, not the evaluator's.
        let step_dir = match self.results.step_log_dir(step) {
            Ok(dir) => dir,
            Err(error) => return not_run(NotRunReason::Node, error.to_string(), Some(name)),
        };
        let on = (serving, launch, step_dir.as_path());
        self.evaluate(recipe, side_benchmark, on, job.measuring_tree(), seed)
    }

    /// The repeats after the first: round by round, each benchmark still open (the gate's
    /// [`needs_another_repeat`]) gets its next repeat on both sides, until every one is
    /// decided, at its cap, or broken (a repeat that could not run ends its benchmark's
    /// repeats: its not-run record is its verdict). `sides` are the (side, benchmark) pairs
    /// the job plan runs, in the order of the first round; later rounds alternate it, so that
    /// the server that is up goes first.
    pub(super) fn more_repeats(
        &mut self,
        served: &mut Served<'_>,
        sides: &[(Side, &AccuracyBenchmark)],
    ) -> Result<(), RunError> {
        let job = served.job;
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
                self.accuracy_on(served, side, benchmark, repeat)?;
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
    pub(super) fn next_repeat(
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

    /// One benchmark against one side's server (`serving`, `launch`), the step's own log
    /// folder `step_dir` for an external evaluator's results.
    fn evaluate(
        &self,
        recipe: &Recipe,
        benchmark: &AccuracyBenchmark,
        (serving, launch, step_dir): (&Serving, &Launch<'_>, &Path),
        data_tree: &Path,
        seed: u64,
    ) -> Outcome {
        match &benchmark.evaluator {
            Evaluator::Builtin(builtin) => {
                evaluate_builtin(builtin, &benchmark.name, serving, launch, data_tree, seed)
            }
            Evaluator::External(external) => {
                let on = (serving, launch, data_tree);
                self.evaluate_external(recipe, benchmark, external, on, step_dir, seed)
            }
        }
    }

    /// A benchmark of an external evaluator: its gated dataset fetched first (by prgate, with
    /// the node's token), then its command against the side's server, run from `tool_tree`
    /// (base's, `ModelJob::measuring_tree`) with that tree's variables, its metrics read back
    /// from `step_dir/results`, a folder of the step's own that no server mounts.
    fn evaluate_external(
        &self,
        recipe: &Recipe,
        benchmark: &AccuracyBenchmark,
        external: &ExternalEvaluator,
        (serving, launch, tool_tree): (&Serving, &Launch<'_>, &Path),
        step_dir: &Path,
        seed: u64,
    ) -> Outcome {
        let name = benchmark.name.as_str();
        let datasets = gated::cache_root(self.request.inputs.node.cache_dir());
        let dataset_env = match self.gated_dataset(benchmark, &datasets) {
            Ok(env) => env,
            Err(outcome) => return outcome,
        };
        let results = step_dir.join("results");
        let _stale = std::fs::remove_dir_all(&results);
        if let Err(error) = std::fs::create_dir_all(&results) {
            let detail = format!("{}: {error}", results.display());
            return not_run(NotRunReason::Node, detail, Some(name));
        }
        let checkpoint = self.exec.checkpoint_view(recipe);
        let argv =
            external.command(serving.port, &checkpoint, &self.exec.out_view(&results, ""), seed);
        let log = results.join("command.log");
        let command = Command {
            argv,
            tree: tool_tree,
            out: &results,
            env: self.exec.side_env(tool_tree).into_iter().chain(dataset_env).collect(),
            datasets: benchmark.hub_dataset.as_ref().map(|_| datasets.as_path()),
            log: log.clone(),
            timeout: self.limit(recipe.timeouts().accuracy.unwrap_or(DEFAULT_STEP_TIMEOUT)),
            gpus: &[],
            purpose: format!("{}-accuracy-{name}", launch.purpose),
            server: serving.container.as_deref(),
        };
        if let Err(failure) = self.exec.run(&command) {
            return failure.not_run(None);
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
            Err(error) => not_run(NotRunReason::NoResult, with_log_tail(error, &log), Some(name)),
        }
    }

    /// The environment that hands an external benchmark its hub dataset, fetched into
    /// `datasets` by prgate with the node's token (the command gets the dataset read-only and
    /// never the token: `accuracy::gated`); none when it names no dataset. The `not-run`
    /// outcome (`gated-dataset`) when the token's value is not set or the fetch fails.
    fn gated_dataset(
        &self,
        benchmark: &AccuracyBenchmark,
        datasets: &Path,
    ) -> Result<Vec<(String, String)>, Outcome> {
        let name = benchmark.name.as_str();
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
                    return Err(not_run(NotRunReason::GatedDataset, detail, Some(name)));
                }
            }
        }
        let Some(dataset) = &benchmark.hub_dataset else { return Ok(Vec::new()) };
        match gated::fetch(&gated::endpoint(), dataset, token_value.as_deref(), datasets) {
            Ok(snapshot) => {
                Ok(vec![("PRGATE_DATASET".to_owned(), self.exec.dataset_view(datasets, &snapshot))])
            }
            Err(error) => Err(not_run(NotRunReason::GatedDataset, error.to_string(), Some(name))),
        }
    }
}

/// A benchmark of the built-in exact-match evaluator against a side's server. Both sides are
/// asked the base tree's questions (`data_tree`): the PR cannot keep only those it gets right.
fn evaluate_builtin(
    builtin: &BuiltinEvaluator,
    name: &str,
    serving: &Serving,
    launch: &Launch<'_>,
    data_tree: &Path,
    seed: u64,
) -> Outcome {
    let questions = match accuracy::read_dataset(data_tree, Path::new(&builtin.dataset)) {
        Ok(questions) => questions,
        Err(error) => return not_run(NotRunReason::RecipeInvalid, error.to_string(), Some(name)),
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
            format!("{error}\nlast lines of the server's log:\n{}", server_log_tail(&launch.log)),
            Some(name),
        ),
    }
}

/// The hub dataset `benchmark` (what a side runs of a benchmark) names that the base tree's
/// own recipe (`base_own`) does not name for the same benchmark: the node's token fetches only
/// what the base side names.
fn gated_elsewhere<'b>(
    base_own: Option<&Recipe>,
    benchmark: &'b AccuracyBenchmark,
) -> Option<&'b HubDataset> {
    benchmark.hub_dataset.as_ref().filter(|dataset| {
        !base_own.is_some_and(|own| {
            own.accuracy().iter().any(|other| {
                other.name == benchmark.name && other.hub_dataset.as_ref() == Some(*dataset)
            })
        })
    })
}

/// A repeat's `outcome` as it is recorded: a result carries its `stamp`; one that could not
/// run is that repeat's, its subject naming it (`this_repeat`).
fn stamped(outcome: Outcome, stamp: Repeat, this_repeat: &Part) -> Outcome {
    match outcome {
        Outcome::Accuracy { benchmark, questions, correct, per_question, cached, .. } => {
            let repeat = Some(stamp);
            Outcome::Accuracy { benchmark, questions, correct, per_question, cached, repeat }
        }
        Outcome::NotRun { reason, detail, failed_on, .. } => {
            Outcome::NotRun { reason, detail, subject: Some(this_repeat.to_string()), failed_on }
        }
        other => other,
    }
}
