//! The served phase of a model: the steps that need its servers (serving tests, accuracy,
//! speed, routing) as the job plan queues them, each side's server started when a step first
//! needs it, and everything skipped, servers unstarted, when an earlier run recorded it all.
//!
//! The order: per side (both at once, or the PR's first when one at a time), its serving tests
//! and every benchmark's first repeat; then the later repeats; then the speed cells; then each
//! side's routing from its server's log. What it leaves to others: the servers themselves
//! (`servers`), accuracy (`accuracy`), speed (`speed`).

use prgate_gate::evidence::{Check, Side};
use prgate_gate::job::whole_check_side;

use crate::gpu_time::{Phase, ServerDesign};
use crate::recipe::{AccuracyBenchmark, Recipe};
use crate::results::{Part, StepId, now_ms};
use crate::run::server::side_routing;
use crate::run::{RunError, StepFailure, any_missing};

use super::pytest::{TestRun, pytest};
use super::queue::{self, Queue, Queued};
use super::servers::{Servers, Serving};
use super::speed::Cell;
use super::{DEFAULT_STEP_TIMEOUT, ModelJob, Runner, Subject, failed, side_name, slot};

impl Runner<'_> {
    /// Everything that needs the servers and the job plan queues: serving tests, accuracy,
    /// speed and routing.
    pub(super) fn served(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        queue: &Queue<'_>,
    ) -> Result<(), RunError> {
        let runs_any = queue.phase(queue::Phase::Served).any(|q| matches!(q, Queued::Run(_)));
        if let Some(failure) = job.no_checkpoint.as_ref().filter(|_| runs_any) {
            return self.record_no_checkpoint(&job.subject, queue, failure);
        }
        let (needed, benchmarks) = self.served_steps(job, recipe, queue)?;
        let cells = self.open_cells(job, recipe, &queue.cells())?;
        let mut open_accuracy = false;
        for benchmark in &benchmarks {
            open_accuracy |= self.next_repeat(job, benchmark)?.is_some();
        }
        let other_steps: Vec<StepId> =
            needed.iter().filter(|step| step.check() != Check::Accuracy).cloned().collect();
        if !any_missing(&self.completed, &other_steps) && !open_accuracy && cells.is_empty() {
            // Everything the servers would do is recorded: skip them, and say so.
            return self.skip_served(&needed);
        }

        let gpus: Vec<u32> = self.request.inputs.node.gpus().iter().map(|gpu| gpu.id).collect();
        let servers = self.servers(job, recipe, &gpus)?;
        let mut served = Served { job, servers };
        // One at a time, the PR's side goes first: the base server is then up when the speed
        // pairs open with a base run, and no server starts twice before them.
        let sides = [Side::Base, Side::Pr];
        let order = if served.servers.together { sides } else { [Side::Pr, Side::Base] };
        for side in order {
            self.first_round(&mut served, side, &needed, &benchmarks)?;
        }
        let accuracy_sides: Vec<(Side, &AccuracyBenchmark)> = order
            .iter()
            .flat_map(|side| benchmarks.iter().map(move |benchmark| (*side, *benchmark)))
            .filter(|(side, benchmark)| {
                let part = Part::named(&benchmark.name);
                needs(&needed, job, Check::Accuracy, *side, Some(&part))
            })
            .collect();
        self.more_repeats(&mut served, &accuracy_sides)?;
        if !cells.is_empty() {
            self.speed_phase(&mut served, cells)?;
        }
        for side in sides {
            if needs(&needed, job, Check::Routing, side, None)
                && !self.skip_if_done(&job.subject, Check::Routing, side, None)?
            {
                self.routing(&mut served, side)?;
            }
        }
        self.stop_servers(served);
        Ok(())
    }

    /// What a side does first while its server is up: its serving tests, then the first
    /// repeat of every benchmark, as far as the served phase `needed` them.
    fn first_round(
        &mut self,
        served: &mut Served<'_>,
        side: Side,
        needed: &[StepId],
        benchmarks: &[&AccuracyBenchmark],
    ) -> Result<(), RunError> {
        let job = served.job;
        if needs(needed, job, Check::ServingTests, side, None)
            && !self.skip_if_done(&job.subject, Check::ServingTests, side, None)?
        {
            self.serving_tests(served, side)?;
        }
        for benchmark in benchmarks {
            let part = Part::named(&benchmark.name);
            if needs(needed, job, Check::Accuracy, side, Some(&part))
                && self.next_repeat(job, benchmark)? == Some(0)
            {
                self.accuracy_on(served, side, benchmark, 0)?;
            }
        }
        Ok(())
    }

    /// The speed cells still open, in the speed phase's time: each speed record's step starts
    /// when the one before it closed.
    fn speed_phase(&mut self, served: &mut Served<'_>, cells: Vec<Cell>) -> Result<(), RunError> {
        let _phase = self.clock.enter(Phase::Speed);
        self.speed_since = Some(now_ms());
        let measured = self.speed(served, cells);
        self.speed_since = None;
        measured
    }

    /// The served phase when the preflight found the model's checkpoint missing: nothing of it
    /// can start, so each of its checks the plan has is recorded `not-run` as the preflight
    /// says (`failure`), one whole-check record each.
    fn record_no_checkpoint(
        &mut self,
        subject: &Subject,
        queue: &Queue<'_>,
        failure: &StepFailure,
    ) -> Result<(), RunError> {
        for check in [Check::ServingTests, Check::Routing, Check::Accuracy, Check::Speed] {
            if queue.has(check) {
                let outcome = failure.clone().not_run(None);
                self.record(subject, check, whole_check_side(check), None, outcome)?;
            }
        }
        Ok(())
    }

    /// Skips the served phase's `needed` steps, all recorded by an earlier run, saying so: a
    /// benchmark's step by its repeats' records.
    fn skip_served(&mut self, needed: &[StepId]) -> Result<(), RunError> {
        for step in needed {
            let benchmark = step.part().and_then(Part::benchmark).map(str::to_owned);
            let Some(benchmark) = benchmark.filter(|_| step.check() == Check::Accuracy) else {
                self.emit.skipped(step)?;
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
        Ok(())
    }

    /// Stops a model's servers at the end of its served phase, keeping how they shared the
    /// node for its GPU-time file (and, when they took turns, a note that says so).
    fn stop_servers(&mut self, served: Served<'_>) {
        let Served { job, servers } = served;
        let used = servers.used();
        if let Some(used) = used.as_ref().filter(|used| used.design != ServerDesign::Together) {
            self.summary.notes.push(format!("{}: {}", job.name(), used.words()));
        }
        self.servers_used = used;
        // Dropping the servers stops them.
        let _phase = self.clock.enter(Phase::Servers);
        drop(servers);
    }

    /// A side's serving tests, against its server (started when it is not up).
    fn serving_tests(&mut self, served: &mut Served<'_>, side: Side) -> Result<(), RunError> {
        let (job, recipe) = (served.job, served.servers.recipe);
        let tree = job.server_tree(side);
        let selection = &recipe.tests().serving;
        let server = self.server(&mut served.servers, side);
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

    /// A side's routing: its server's log against the recipe's routing pattern, the lines each
    /// start wrote once it was healthy. A server that came up has logged its routing line: its
    /// log is read, whether it is still up, stopped to make room or failed later (no restart to
    /// read a line it already wrote). A side whose server never came up is started now.
    fn routing(&mut self, served: &mut Served<'_>, side: Side) -> Result<(), RunError> {
        let Served { job, servers } = served;
        let pattern = &servers.recipe.server().routing_pattern;
        let outcome = if servers.served[slot(side)].is_empty()
            && let Err(failure) = self.server(servers, side)
        {
            failed(&failure)
        } else {
            match servers.routing_read(side, pattern) {
                Ok(read) => side_routing(&read),
                Err(failure) => failed(&failure),
            }
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
    pub(super) fn server(
        &self,
        servers: &mut Servers<'_>,
        side: Side,
    ) -> Result<Serving, StepFailure> {
        let _phase = self.clock.enter(Phase::Servers);
        let startup = self.limit(servers.recipe.server().startup_timeout);
        servers.get(&self.exec, side, startup)
    }
}

/// One model's served phase: its job and both sides' servers, which every step of the phase
/// works with.
pub(super) struct Served<'a> {
    pub(super) job: &'a ModelJob<'a>,
    pub(super) servers: Servers<'a>,
}

/// Whether the served phase's `needed` steps hold `job`'s step of `check` on `side` (of `part`).
fn needs(
    needed: &[StepId],
    job: &ModelJob<'_>,
    check: Check,
    side: Side,
    part: Option<&Part>,
) -> bool {
    needed.contains(&StepId::new(Some(job.name()), check, side, part.cloned()))
}
