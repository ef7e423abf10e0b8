//! Speed: the job plan's cells of a model, each measured in pairs of base and PR runs (or
//! blocks of runs, when a switch reloads the servers) until the gate's `needs_another_pair`
//! says it is decided; a cell's calibrated noise from the node's cache, and the run's own
//! A/A differences saved back; the built-in client or the recipe's external benchmark.
//!
//! What it leaves to others: deciding a cell (`prgate_gate::speed`), the client
//! (`crate::bench`), the servers (`servers`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use prgate_gate::evidence::{Check, NotRunReason, Outcome, Side};
use prgate_gate::speed::{Calibration, CellContext, Pair, blocks, judge_cell, needs_another_pair};

use crate::bench::{self, BenchConfig, Endpoint};
use crate::cache::NoiseKey;
use crate::recipe::{
    ExternalSpeed, Install, Recipe, SpeedBenchmark, SpeedFormat, SpeedRun, SpeedSweep,
};
use crate::results::{Part, StepId};
use crate::run::exec::Command;
use crate::run::server::{server_log_tail, with_log_tail};
use crate::run::{RunError, RunRequest, StepFailure, recorded_pairs};
use crate::untrusted::{self, MAX_RESULT_FILE};

use super::served::Served;
use super::servers::{Serving, Slot};
use super::{
    DEFAULT_STEP_TIMEOUT, ModelJob, Runner, SERVED_MODEL, failed, failed_on, side_name, slot,
};

impl Runner<'_> {
    /// The job plan's speed cells (`concurrencies`) still open, each with the pairs it has and
    /// its calibrated noise (when the cache has one and the cell has none yet, its `speed-noise`
    /// record is written with the cell's first pair, and dropped when that pair is of blocks).
    pub(super) fn open_cells(
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
                && let Some(calibration) = noise_key.as_ref().and_then(|key| self.cache.noise(key))
            {
                // Recorded with the cell's first pair, unless that pair is of blocks
                // (`record_pair`).
                noise = Some(calibration);
                unrecorded_noise = true;
            }
            let pairs: Vec<Pair> = recorded
                .map(|cell| cell.pairs.iter().map(|(_, pair)| *pair).collect())
                .unwrap_or_default();
            let cell = Cell {
                concurrency,
                size: RunSize::of(sweep, concurrency),
                covered: sweep.is_covered(concurrency),
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

    /// What makes base runs of a cell comparable across runs; `None` when the base side has no
    /// recipe (it runs nothing, so nothing of it is calibrated).
    fn noise_key(
        &self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        sweep: &SpeedSweep,
        concurrency: u32,
    ) -> Option<NoiseKey> {
        // What the base side runs: its own commands.
        let recipe = job.side_recipe(recipe, Side::Base).ok()?;
        let node = self.request.inputs.node;
        let benchmark = match &sweep.benchmark {
            SpeedBenchmark::Builtin => "builtin".to_owned(),
            SpeedBenchmark::External(external) => format!("external {:?}", external.command_text()),
        };
        Some(NoiseKey {
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
        })
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
    pub(super) fn speed(
        &mut self,
        served: &mut Served<'_>,
        mut cells: Vec<Cell>,
    ) -> Result<(), RunError> {
        let (job, servers) = (served.job, &served.servers);
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
                self.speed_together(served, cell)?;
                if job.cacheable {
                    self.calibrate(cell);
                }
            }
            return Ok(());
        }
        self.speed_in_turns(served, &mut cells)?;
        // Only a base side that ran nothing of the PR's calibrates the node, and only with runs
        // on one load: a blocked cell's A/A differences are between loads.
        if job.cacheable {
            for cell in cells.iter().filter(|cell| !cell.blocked) {
                self.calibrate(cell);
            }
        }
        Ok(())
    }

    /// The cells measured one server at a time, in rounds of blocks (a block: a cell's runs on
    /// one load of a side, one run when switching does not reload): an opening base block for
    /// each cell that has none, a PR block for each open cell, then a base block for each that
    /// closes its pair and opens the cell's next one (2n + 1 blocks for n pairs).
    fn speed_in_turns(
        &mut self,
        served: &mut Served<'_>,
        cells: &mut [Cell],
    ) -> Result<(), RunError> {
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
                if let Some(block) = self.block(served, Side::Base, &mut cells[at])? {
                    opening.insert(concurrency, block);
                }
            }
            let mut pr_blocks: BTreeMap<u32, f64> = BTreeMap::new();
            for &at in &open {
                if cells[at].closed {
                    continue;
                }
                if let Some(block) = self.block(served, Side::Pr, &mut cells[at])? {
                    pr_blocks.insert(cells[at].concurrency, block);
                }
            }
            for &at in &open {
                let concurrency = cells[at].concurrency;
                let (Some(&pr), Some(&before)) =
                    (pr_blocks.get(&concurrency), opening.get(&concurrency))
                else {
                    continue;
                };
                if let Some(after) = self.block(served, Side::Base, &mut cells[at])? {
                    let blocked = served.servers.block_runs() > 1;
                    self.record_pair(served.job, &mut cells[at], [before, after], pr, blocked)?;
                    opening.insert(concurrency, after);
                }
            }
        }
        Ok(())
    }

    /// One cell's pairs with both servers up: base, PR, base, PR, base, ...; each pair's
    /// closing base run opens the next (2n + 1 runs for n pairs).
    fn speed_together(&mut self, served: &mut Served<'_>, cell: &mut Cell) -> Result<(), RunError> {
        let job = served.job;
        let mut opening: Option<f64> = None;
        while self.cell_open(cell) {
            let measured = match opening.take() {
                Some(before) => Ok(before),
                None => self.measure(served, Side::Base, cell),
            }
            .map_err(|failure| (Side::Base, failure))
            .and_then(|before| {
                let pr =
                    self.measure(served, Side::Pr, cell).map_err(|failure| (Side::Pr, failure))?;
                let after = self
                    .measure(served, Side::Base, cell)
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
        failure: StepFailure,
    ) -> Result<(), RunError> {
        cell.closed = true;
        let part = Part::Cell { concurrency: cell.concurrency };
        let outcome = failed_on(failure.not_run(None), side);
        self.record(&job.subject, Check::Speed, Side::Both, Some(&part), outcome)
    }

    /// Adds a cell's in-band A/A differences of this run to the node's noise calibration, or,
    /// when the gate found the stored calibration contradicted by them (stale), starts the
    /// node's record afresh from them.
    fn calibrate(&mut self, cell: &Cell) {
        let Some(noise_key) = &cell.noise_key else { return };
        let stale = calibration_stale(self.request, self.family, &cell.pairs, cell.noise);
        let saved = if stale {
            self.cache.replace_noise(noise_key, &cell.aa_differences)
        } else {
            self.cache.add_noise(noise_key, &cell.aa_differences)
        };
        if let Err(error) = saved {
            self.summary.notes.push(format!(
                "the speed noise at concurrency {} could not be saved: {error}",
                cell.concurrency
            ));
        }
    }

    /// A block of `side` for `cell`, or `None` when it failed (the cell is then closed with
    /// the failure's records, [`Self::cell_failed`]).
    fn block(
        &mut self,
        served: &mut Served<'_>,
        side: Side,
        cell: &mut Cell,
    ) -> Result<Option<f64>, RunError> {
        match self.measure_block(served, side, cell) {
            Ok(block) => Ok(Some(block)),
            Err(failure) => self.cell_failed(served.job, cell, side, failure).map(|()| None),
        }
    }

    /// One block of `side`'s runs of `cell` on one load of its server: one run when switching
    /// does not reload, else [`blocks::BLOCK_RUNS`] (the blocked design, known after the
    /// block's first run, whose switch probes the other server's memory API); the block's
    /// value, its runs' median.
    fn measure_block(
        &self,
        served: &mut Served<'_>,
        side: Side,
        cell: &Cell,
    ) -> Result<f64, StepFailure> {
        let mut runs = vec![self.measure(served, side, cell)?];
        while runs.len() < served.servers.block_runs() {
            runs.push(self.measure(served, side, cell)?);
        }
        blocks::block_value(&runs).ok_or_else(|| {
            StepFailure::crash(format!("no finite median TPOT in the block's runs: {runs:?}"))
        })
    }

    /// One speed run on `side`: its median TPOT, or why there is none.
    fn measure(
        &self,
        served: &mut Served<'_>,
        side: Side,
        cell: &Cell,
    ) -> Result<f64, StepFailure> {
        let Served { job, servers } = served;
        let (concurrency, size) = (cell.concurrency, cell.size);
        if let Some(detail) = self.out_of_time() {
            return Err(StepFailure::new(NotRunReason::RunTimeLimit, detail));
        }
        let serving = self.server(servers, side)?;
        let timeout =
            self.limit(servers.recipe.timeouts().speed_run.unwrap_or(DEFAULT_STEP_TIMEOUT));
        let launch = &servers.launches[slot(side)];
        let log = launch.log.clone();
        // Each side measures with its own recipe's benchmark: the base side never runs the PR's
        // command.
        let Some(benchmark) = servers.side_recipe(side)?.speed().map(|sweep| &sweep.benchmark)
        else {
            let detail = "the base side's recipe has no speed benchmark to run: the base side never runs the PR's";
            return Err(StepFailure::new(NotRunReason::NoRecipe, detail));
        };
        let measured = match benchmark {
            SpeedBenchmark::Builtin => {
                builtin_speed(&builtin_config(size, &serving, concurrency, timeout))
            }
            SpeedBenchmark::External(external) => {
                let results = self.speed_results(job, cell, side)?;
                let run = SpeedRun {
                    port: serving.port,
                    checkpoint_path: &self.exec.checkpoint_view(servers.recipe),
                    results: &self.exec.out_view(&results, ""),
                    concurrency,
                    input_len: size.input_len,
                    output_len: size.output_len,
                    requests: size.requests,
                    warmup: size.warmup,
                };
                let tool = (job.measuring_tree(), launch.purpose.as_str());
                self.external_speed(external, &run, tool, &results, timeout, &serving)
            }
        };
        // A failed run keeps its own reason, as every step's work does (a `timeout`, `stalled`,
        // a `crash`), with the server's log's tail in the detail.
        measured.map_err(|failure| {
            let tail = server_log_tail(&log);
            let detail = format!("{}\nlast lines of the server's log:\n{tail}", failure.detail);
            servers.failure(side, StepFailure { detail, ..failure })
        })
    }

    /// A fresh folder for the results of `side`'s next external speed run of `cell`, in the
    /// log folder of the cell's next pair.
    fn speed_results(
        &self,
        job: &ModelJob<'_>,
        cell: &Cell,
        side: Side,
    ) -> Result<PathBuf, StepFailure> {
        let index = u32::try_from(cell.pairs.len()).unwrap_or(u32::MAX);
        let part = Part::Pair { concurrency: cell.concurrency, index };
        let step = StepId::new(Some(job.name()), Check::Speed, Side::Both, Some(part));
        self.results
            .step_log_dir(&step)
            .map(|dir| fresh_folder(&dir, side_name(side)))
            .map_err(|error| StepFailure::crash(error.to_string()))
    }

    /// One run of an external speed benchmark: its median TPOT at `run.concurrency`. It runs
    /// from `tool_tree` (base's, `ModelJob::measuring_tree`) with that tree's variables, named
    /// after the side's server (`purpose`).
    fn external_speed(
        &self,
        external: &ExternalSpeed,
        run: &SpeedRun<'_>,
        (tool_tree, purpose): (&Path, &str),
        results: &Path,
        timeout: Duration,
        serving: &Serving,
    ) -> Result<f64, StepFailure> {
        let _stale = std::fs::remove_dir_all(results);
        std::fs::create_dir_all(results)
            .map_err(|error| StepFailure::crash(format!("{}: {error}", results.display())))?;
        let log = results.join("command.log");
        let command = Command {
            argv: external.command(run),
            tree: tool_tree,
            out: results,
            env: self.exec.side_env(tool_tree),
            datasets: None,
            log: log.clone(),
            timeout,
            gpus: &[],
            purpose: format!("{purpose}-speed-{}", run.concurrency),
            server: serving.container.as_deref(),
        };
        self.exec.run(&command)?;
        let path = results.join(&external.result);
        let text = untrusted::read_to_string(results, Path::new(&external.result), MAX_RESULT_FILE)
            .map_err(|error| StepFailure::crash(with_log_tail(error.to_string(), &log)))?;
        let records = match external.format {
            SpeedFormat::BenchServing => bench::parse_bench_serving_jsonl(&text),
            SpeedFormat::Inferencex => bench::parse_inferencex_json(&text),
        }
        .map_err(|error| StepFailure::crash(format!("{}: {error}", path.display())))?;
        // The run's record, which must have measured the lengths it asked for.
        bench::record_at(&records, run.concurrency, u64::from(run.requests))
            .and_then(|record| {
                let asked = (u64::from(run.input_len), u64::from(run.output_len));
                bench::check_workload(record, asked.0, asked.1).map(|()| record.median_tpot_ms)
            })
            .map_err(|error| StepFailure::crash(format!("{}: {error}", path.display())))
    }
}

/// A speed cell of a model: one concurrency.
pub(super) struct Cell {
    pub(super) concurrency: u32,
    /// What each of its runs sends.
    size: RunSize,
    covered: bool,
    /// Its pairs so far, earlier runs' included, in order.
    pub(super) pairs: Vec<Pair>,
    /// The node's stored calibration, when a `speed-noise` record has it.
    pub(super) noise: Option<Calibration>,
    /// Where its calibration is kept; `None` when the base side has no recipe.
    noise_key: Option<NoiseKey>,
    /// The in-band A/A differences of this run (`ln(after / before)` of each pair's base
    /// runs): the noise calibration's input.
    aa_differences: Vec<f64>,
    /// Failed: no more pairs.
    pub(super) closed: bool,
    /// `noise` came from the cache and its `speed-noise` record is not written yet.
    unrecorded_noise: bool,
    /// Some pair of this run is of blocks (`prgate_gate::speed::blocks`).
    blocked: bool,
}

/// Whether a cell with `pairs` and `noise` (covered or not) needs another pair: the gate's
/// rule with the request's settings, title and the run's `family`, within the gate's cap.
pub(in crate::run) fn cell_needs_pair(
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
fn calibration_stale(
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

/// What one run of a cell sends: the sweep's lengths, and its measured and warm-up requests a
/// concurrency scaled by the cell's.
#[derive(Debug, Clone, Copy)]
struct RunSize {
    input_len: u32,
    output_len: u32,
    requests: u32,
    warmup: u32,
}

impl RunSize {
    /// One run of `sweep`'s cell at `concurrency`.
    fn of(sweep: &SpeedSweep, concurrency: u32) -> RunSize {
        RunSize {
            input_len: sweep.input_len,
            output_len: sweep.output_len,
            requests: sweep.requests_per_concurrency.saturating_mul(concurrency),
            warmup: sweep.warmup_per_concurrency.saturating_mul(concurrency),
        }
    }
}

/// The built-in client's settings for one run of `size` at `concurrency` against `serving`.
fn builtin_config(
    size: RunSize,
    serving: &Serving,
    concurrency: u32,
    timeout: Duration,
) -> BenchConfig {
    BenchConfig {
        base_url: serving.url.clone(),
        model: SERVED_MODEL.to_owned(),
        endpoint: Endpoint::Completions,
        input_len: size.input_len,
        output_len: size.output_len,
        concurrency,
        requests: size.requests,
        warmup: size.warmup,
        timeout,
        // Each run's own: the PR's server cannot know the measured prompts before they come.
        prompt_seed: bench::fresh_prompt_seed(),
    }
}

/// One run of the built-in client by `config`: its median TPOT in milliseconds, or why it is
/// no evidence of speed.
fn builtin_speed(config: &BenchConfig) -> Result<f64, StepFailure> {
    let result = bench::run(config).map_err(|error| StepFailure::crash(error.to_string()))?;
    match result.median_tpot_ms {
        Some(median_tpot_ms) if result.failed == 0 => Ok(median_tpot_ms),
        // A run some of whose requests failed measured a server in trouble (it died, it errs):
        // no pair of it is evidence of speed.
        _ => Err(StepFailure::crash(format!(
            "{} of {} requests of the run at concurrency {} on {} failed: {}",
            result.failed,
            result.failed + result.completed,
            config.concurrency,
            config.base_url,
            result.errors.join("; "),
        ))),
    }
}
