//! A recipe's measurements: the kernel timing scripts, the accuracy benchmarks (an external
//! command or prgate's built-in evaluator, gated datasets, repeats) and the speed sweep
//! (concurrencies, the covered ones, prgate's client or an external command and its result
//! format). Each is checked from its private serde type into a validated one whose errors
//! name the file, the key and the value. Running them is the runner's; judging them is the
//! gate's.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::node::{check_name, check_relative_path, check_secret_name};

use super::template::{Placeholder, Template};
use super::{
    Checker, DEFAULT_REQUESTS_PER_CONCURRENCY, DEFAULT_WARMUP_PER_CONCURRENCY, RecipeError,
};

impl Checker<'_> {
    pub(super) fn kernel_timing(
        &self,
        raw: Vec<RawTiming>,
    ) -> Result<Vec<TimingScript>, RecipeError> {
        let mut scripts: Vec<TimingScript> = Vec::with_capacity(raw.len());
        for (index, raw) in raw.into_iter().enumerate() {
            let key = |field: &str| format!("kernel-timing[{index}].{field}");
            check_name(&raw.name)
                .map_err(|problem| self.value(&key("name"), &raw.name, problem))?;
            if scripts.iter().any(|script| script.name == raw.name) {
                return Err(self.value(&key("name"), &raw.name, "is used twice"));
            }
            let command = self.template(
                &key("command"),
                &raw.command,
                &TIMING_PLACEHOLDERS,
                &TIMING_PLACEHOLDERS,
            )?;
            scripts.push(TimingScript { name: raw.name, command });
        }
        Ok(scripts)
    }

    pub(super) fn accuracy(
        &self,
        raw: Vec<RawAccuracy>,
    ) -> Result<Vec<AccuracyBenchmark>, RecipeError> {
        let mut benchmarks: Vec<AccuracyBenchmark> = Vec::with_capacity(raw.len());
        for (index, raw) in raw.into_iter().enumerate() {
            let benchmark = self.benchmark(&format!("accuracy[{index}]"), raw, &benchmarks)?;
            benchmarks.push(benchmark);
        }
        Ok(benchmarks)
    }

    /// One accuracy benchmark (`table`, `accuracy[i]`), checked: a name not used `before`, a
    /// token only with the dataset prgate fetches with it, its evaluator, its repeats.
    fn benchmark(
        &self,
        table: &str,
        raw: RawAccuracy,
        before: &[AccuracyBenchmark],
    ) -> Result<AccuracyBenchmark, RecipeError> {
        let key = |field: &str| format!("{table}.{field}");
        check_name(&raw.name).map_err(|problem| self.value(&key("name"), &raw.name, problem))?;
        if before.iter().any(|benchmark| benchmark.name == raw.name) {
            return Err(self.value(&key("name"), &raw.name, "is used twice"));
        }
        if let Some(token) = &raw.token {
            check_secret_name(token)
                .map_err(|problem| self.value(&key("token"), token, problem))?;
        }
        let hub_dataset = raw
            .hub_dataset
            .as_deref()
            .map(|text| {
                super::HubDataset::parse(text)
                    .map_err(|problem| self.value(&key("hub-dataset"), &text, problem))
            })
            .transpose()?;
        if raw.token.is_some() && hub_dataset.is_none() {
            return Err(self.key(
                &key("hub-dataset"),
                "is missing: a benchmark with a token names the dataset prgate fetches with it (org/name@<commit>); its command never gets the token",
            ));
        }
        if hub_dataset.is_some() && matches!(raw.evaluator, RawEvaluator::Builtin) {
            return Err(self.key(&key("hub-dataset"), "only the external evaluator has it"));
        }
        let evaluator = self.evaluator(table, &raw)?;
        let repeats = raw
            .repeats
            .map(|repeats| {
                u32::try_from(repeats)
                    .ok()
                    .filter(|repeats| (1..=MAX_ACCURACY_REPEATS).contains(repeats))
                    .ok_or_else(|| {
                        self.value(
                            &key("repeats"),
                            &repeats,
                            format!("must be a number of repeats in 1..={MAX_ACCURACY_REPEATS}"),
                        )
                    })
            })
            .transpose()?;
        Ok(AccuracyBenchmark { name: raw.name, evaluator, token: raw.token, hub_dataset, repeats })
    }

    /// A benchmark's evaluator: the external one's command and metrics file, or the built-in
    /// one's dataset and limit; a key of the other kind is refused.
    fn evaluator(&self, table: &str, raw: &RawAccuracy) -> Result<Evaluator, RecipeError> {
        let key = |field: &str| format!("{table}.{field}");
        let misplaced = |field: &str, kind: &str| {
            self.key(&key(field), format!("only the {kind} evaluator has it"))
        };
        let missing = |field: &str, kind: &str| {
            self.key(&key(field), format!("is missing: the {kind} evaluator needs it"))
        };
        match raw.evaluator {
            RawEvaluator::External => {
                if raw.dataset.is_some() {
                    return Err(misplaced("dataset", "builtin"));
                }
                if raw.limit.is_some() {
                    return Err(misplaced("limit", "builtin"));
                }
                let command = raw.command.as_ref().ok_or_else(|| missing("command", "external"))?;
                let command = self.template(
                    &key("command"),
                    command,
                    &ACCURACY_PLACEHOLDERS,
                    &[Placeholder::Port, Placeholder::Results],
                )?;
                let metrics = raw.metrics.clone().ok_or_else(|| missing("metrics", "external"))?;
                check_relative_path(&metrics)
                    .map_err(|problem| self.value(&key("metrics"), &metrics, problem))?;
                Ok(Evaluator::External(ExternalEvaluator { command, metrics }))
            }
            RawEvaluator::Builtin => {
                if raw.command.is_some() {
                    return Err(misplaced("command", "external"));
                }
                if raw.metrics.is_some() {
                    return Err(misplaced("metrics", "external"));
                }
                let dataset = raw.dataset.clone().ok_or_else(|| missing("dataset", "builtin"))?;
                check_relative_path(&dataset)
                    .map_err(|problem| self.value(&key("dataset"), &dataset, problem))?;
                if raw.limit == Some(0) {
                    return Err(self.value(&key("limit"), &0, "must be 1 or more"));
                }
                Ok(Evaluator::Builtin(BuiltinEvaluator { dataset, limit: raw.limit }))
            }
        }
    }

    pub(super) fn speed(&self, raw: RawSpeed) -> Result<SpeedSweep, RecipeError> {
        let ascending = |key: &str, values: &[u32]| -> Result<(), RecipeError> {
            for (index, value) in values.iter().enumerate() {
                if *value == 0 {
                    return Err(self.value(&format!("{key}[{index}]"), value, "must be 1 or more"));
                }
                if index > 0 && values[index - 1] >= *value {
                    return Err(self.value(
                        &format!("{key}[{index}]"),
                        value,
                        "is not above the one before: list concurrencies ascending, once each",
                    ));
                }
            }
            Ok(())
        };
        if raw.concurrencies.is_empty() {
            return Err(self.key("speed.concurrencies", "is empty: list at least one concurrency"));
        }
        ascending("speed.concurrencies", &raw.concurrencies)?;
        ascending("speed.covered", &raw.covered)?;
        let all: BTreeSet<u32> = raw.concurrencies.iter().copied().collect();
        if let Some((index, value)) =
            raw.covered.iter().enumerate().find(|(_, value)| !all.contains(value))
        {
            return Err(self.value(
                &format!("speed.covered[{index}]"),
                value,
                "is not in speed.concurrencies",
            ));
        }
        for (key, value) in
            [("speed.input-len", raw.input_len), ("speed.output-len", raw.output_len)]
        {
            if value == 0 {
                return Err(self.value(key, &value, "must be 1 or more"));
            }
        }
        let requests = raw.requests_per_concurrency.unwrap_or(DEFAULT_REQUESTS_PER_CONCURRENCY);
        if requests == 0 {
            return Err(self.value(
                "speed.requests-per-concurrency",
                &requests,
                "must be 1 or more",
            ));
        }
        let benchmark = self.speed_benchmark(&raw)?;
        Ok(SpeedSweep {
            benchmark,
            concurrencies: raw.concurrencies,
            covered: raw.covered,
            input_len: raw.input_len,
            output_len: raw.output_len,
            requests_per_concurrency: requests,
            warmup_per_concurrency: raw
                .warmup_per_concurrency
                .unwrap_or(DEFAULT_WARMUP_PER_CONCURRENCY),
        })
    }

    fn speed_benchmark(&self, raw: &RawSpeed) -> Result<SpeedBenchmark, RecipeError> {
        let misplaced =
            |field: &str| self.key(&format!("speed.{field}"), "only an external benchmark has it");
        let missing = |field: &str| {
            self.key(&format!("speed.{field}"), "is missing: an external benchmark needs it")
        };
        match raw.benchmark.unwrap_or(RawBenchmark::Builtin) {
            RawBenchmark::Builtin => {
                for (field, set) in [
                    ("command", raw.command.is_some()),
                    ("format", raw.format.is_some()),
                    ("result", raw.result.is_some()),
                ] {
                    if set {
                        return Err(misplaced(field));
                    }
                }
                Ok(SpeedBenchmark::Builtin)
            }
            RawBenchmark::External => {
                let command = raw.command.as_ref().ok_or_else(|| missing("command"))?;
                let command = self.template(
                    "speed.command",
                    command,
                    &SPEED_PLACEHOLDERS,
                    &[Placeholder::Port, Placeholder::Results, Placeholder::Concurrency],
                )?;
                let format = match raw.format.ok_or_else(|| missing("format"))? {
                    RawSpeedFormat::BenchServing => SpeedFormat::BenchServing,
                    RawSpeedFormat::Inferencex => SpeedFormat::Inferencex,
                };
                let result = raw.result.clone().ok_or_else(|| missing("result"))?;
                check_relative_path(&result)
                    .map_err(|problem| self.value("speed.result", &result, problem))?;
                Ok(SpeedBenchmark::External(ExternalSpeed { command, format, result }))
            }
        }
    }
}

/// A kernel timing script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimingScript {
    /// Its name, unique in the recipe.
    pub name: String,
    pub(super) command: Template,
}

/// An accuracy benchmark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccuracyBenchmark {
    /// Its name, unique in the recipe; the gate's tolerances are keyed by it.
    pub name: String,
    /// Who scores the answers.
    pub evaluator: Evaluator,
    /// The secret a gated dataset needs (e.g. `HF_TOKEN`); `None` when it is not gated. Only
    /// prgate's own fetch of [`AccuracyBenchmark::hub_dataset`] uses it: the command never
    /// gets it.
    pub token: Option<String>,
    /// The hub dataset prgate fetches for the command before it runs (`org/name@<commit>`),
    /// read-only at `/datasets` in its container; required with `token`.
    pub hub_dataset: Option<super::HubDataset>,
    /// The cap of repeats (`repeats`, 1..=64; repeat `r` runs with seed `r`); `None`: the
    /// gate's `accuracy.repeats`. Base's recipe sets it for both sides.
    pub repeats: Option<u32>,
}

impl AccuracyBenchmark {
    /// The cap of repeats: the recipe's, else the gate's default.
    pub fn repeat_cap(&self, gate: &prgate_gate::GateConfig) -> u32 {
        self.repeats.unwrap_or(gate.accuracy_repeats)
    }
}

/// Who scores an accuracy benchmark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evaluator {
    /// An external command (sgl-eval, say) that writes a `metrics.json`.
    External(ExternalEvaluator),
    /// prgate's exact-match evaluator over a JSONL dataset.
    Builtin(BuiltinEvaluator),
}

/// An external accuracy command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalEvaluator {
    pub(super) command: Template,
    /// Where the command writes its metrics, relative to its `{results}` directory.
    pub metrics: String,
}

/// The built-in evaluator's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinEvaluator {
    /// The JSONL dataset, relative to the repository's root.
    pub dataset: String,
    /// At most this many questions, the first ones of the dataset; `None` for all.
    pub limit: Option<u32>,
}

/// The speed sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeedSweep {
    /// The concurrencies of the full sweep, ascending.
    pub concurrencies: Vec<u32>,
    /// The concurrencies the monokernels cover, ascending: a subset of `concurrencies`, the
    /// smoke tier's sweep, and the only cells the gain rule looks at.
    pub covered: Vec<u32>,
    /// Input tokens per request.
    pub input_len: u32,
    /// Output tokens per request.
    pub output_len: u32,
    /// Measured requests per run: this times the concurrency.
    pub requests_per_concurrency: u32,
    /// Warm-up requests per run, not measured: this times the concurrency.
    pub warmup_per_concurrency: u32,
    /// Who measures a run.
    pub benchmark: SpeedBenchmark,
}

/// Who measures a speed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpeedBenchmark {
    /// prgate's own client (`prgate bench`).
    Builtin,
    /// A command that writes a result file of a known format.
    External(ExternalSpeed),
}

/// An external speed benchmark: its command and what it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalSpeed {
    pub(super) command: Template,
    /// The format of its result file.
    pub format: SpeedFormat,
    /// The result file, relative to the command's `{results}` directory.
    pub result: String,
}

/// The result formats an external speed benchmark may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpeedFormat {
    /// sglang `bench_serving`'s `--output-file` JSONL.
    BenchServing,
    /// InferenceX's result JSON (raw, `agg_*.json`, or the collected array).
    Inferencex,
}

/// The values of one external speed run's placeholders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeedRun<'a> {
    /// `{port}`: the measured server's.
    pub port: u16,
    /// `{checkpoint}`: the checkpoint's path as the command sees it.
    pub checkpoint_path: &'a str,
    /// `{results}`: the folder the command writes its result file into.
    pub results: &'a str,
    /// `{concurrency}`, `{input_len}`, `{output_len}`: the cell.
    pub concurrency: u32,
    pub input_len: u32,
    pub output_len: u32,
    /// `{requests}`, `{warmup}`: the measured requests, and the warm-up requests before them
    /// (not measured).
    pub requests: u32,
    pub warmup: u32,
}

impl ExternalSpeed {
    /// The command's argv for one run.
    pub fn command(&self, run: &SpeedRun<'_>) -> Vec<String> {
        self.command.expand(
            |placeholder| match placeholder {
                Placeholder::Port => run.port.to_string(),
                Placeholder::Checkpoint => run.checkpoint_path.to_owned(),
                Placeholder::Results => run.results.to_owned(),
                Placeholder::Concurrency => run.concurrency.to_string(),
                Placeholder::InputLen => run.input_len.to_string(),
                Placeholder::OutputLen => run.output_len.to_string(),
                Placeholder::Requests => run.requests.to_string(),
                Placeholder::Warmup => run.warmup.to_string(),
                // The speed command allows no other placeholder.
                _ => String::new(),
            },
            &[],
        )
    }

    /// The command as the recipe wrote it.
    pub fn command_text(&self) -> &str {
        self.command.text()
    }
}

impl TimingScript {
    /// The script's argv, writing its JSON (see [`timing`](super::timing)) to `output`, a path as the script
    /// sees it.
    pub fn command(&self, output: &str) -> Vec<String> {
        self.command.expand(|_output| output.to_owned(), &[])
    }

    /// The command as the recipe wrote it.
    pub fn command_text(&self) -> &str {
        self.command.text()
    }

    /// The words of its command that are only literal text (the files and modules it names).
    pub fn literal_words(&self) -> impl Iterator<Item = &str> {
        self.command.literal_words()
    }
}

impl ExternalEvaluator {
    /// The command's argv against a server on `port` serving `checkpoint_path`, writing into the
    /// directory `results` (paths as the command sees them), for the repeat of `seed`.
    pub fn command(
        &self,
        port: u16,
        checkpoint_path: &str,
        results: &str,
        seed: u64,
    ) -> Vec<String> {
        self.command.expand(
            |placeholder| match placeholder {
                Placeholder::Port => port.to_string(),
                Placeholder::Checkpoint => checkpoint_path.to_owned(),
                Placeholder::Results => results.to_owned(),
                Placeholder::Seed => seed.to_string(),
                // The accuracy command allows no other placeholder.
                _ => String::new(),
            },
            &[],
        )
    }

    /// The command as the recipe wrote it.
    pub fn command_text(&self) -> &str {
        self.command.text()
    }
}

impl SpeedSweep {
    /// The concurrencies a tier sweeps: all of them, or only the covered ones (smoke).
    pub fn concurrencies_for(&self, covered_only: bool) -> &[u32] {
        if covered_only { &self.covered } else { &self.concurrencies }
    }

    /// Whether the monokernels cover `concurrency`.
    pub fn is_covered(&self, concurrency: u32) -> bool {
        self.covered.contains(&concurrency)
    }
}

const TIMING_PLACEHOLDERS: [Placeholder; 1] = [Placeholder::Output];

use prgate_gate::config::MAX_ACCURACY_REPEATS;

const ACCURACY_PLACEHOLDERS: [Placeholder; 4] =
    [Placeholder::Port, Placeholder::Checkpoint, Placeholder::Results, Placeholder::Seed];

const SPEED_PLACEHOLDERS: [Placeholder; 8] = [
    Placeholder::Port,
    Placeholder::Checkpoint,
    Placeholder::Results,
    Placeholder::Concurrency,
    Placeholder::InputLen,
    Placeholder::OutputLen,
    Placeholder::Requests,
    Placeholder::Warmup,
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawTiming {
    name: String,
    command: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawAccuracy {
    name: String,
    evaluator: RawEvaluator,
    token: Option<String>,
    hub_dataset: Option<String>,
    command: Option<String>,
    metrics: Option<String>,
    dataset: Option<String>,
    limit: Option<u32>,
    repeats: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum RawEvaluator {
    External,
    Builtin,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawSpeed {
    concurrencies: Vec<u32>,
    covered: Vec<u32>,
    input_len: u32,
    output_len: u32,
    requests_per_concurrency: Option<u32>,
    warmup_per_concurrency: Option<u32>,
    benchmark: Option<RawBenchmark>,
    command: Option<String>,
    format: Option<RawSpeedFormat>,
    result: Option<String>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum RawBenchmark {
    Builtin,
    External,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum RawSpeedFormat {
    BenchServing,
    Inferencex,
}
