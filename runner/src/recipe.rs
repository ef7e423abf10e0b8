//! The recipe: how one model is served, tested and measured, from the PR's tree
//! (`test/e2e/<model>.toml` by default; the manifest says where).
//!
//! A recipe is PR-controlled input. It is parsed through private serde types that reject
//! unknown keys and checked into a [`Recipe`]; every error names the file, the key and the bad
//! value. Commands are split into argv here, without a shell ([`template`]), and the runner
//! runs every one of them inside the container only. Whether a recipe can run on a node is
//! [`Recipe::check_runs_on`]; running it is the runner's. The rest of this page is
//! `docs/recipe.md`.
//!
#![doc = include_str!("../../docs/recipe.md")]

pub mod common;
pub mod contract;
pub mod memory_api;
pub mod renames;
pub mod template;
pub mod timing;
pub mod topology;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use prgate_gate::evidence::{Check, NotRunReason};
use serde::Deserialize;

use crate::node::{
    NodeProfile, check_hardware, check_name, check_relative_path, check_secret_name,
};
use template::{Placeholder, Template};

/// A realistic recipe for an MI355X model, with a comment on every key; the optional keys it
/// sets hold their defaults (a test checks it).
pub const EXAMPLE: &str = include_str!("recipe/example.toml");

/// The health endpoint polled when the recipe names none.
pub const DEFAULT_HEALTH_PATH: &str = "/health";
/// How long a server may take to become healthy when the recipe does not say.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// Measured requests per run, per unit of concurrency, when the recipe does not say.
pub const DEFAULT_REQUESTS_PER_CONCURRENCY: u32 = 10;
/// Warm-up requests per run, per unit of concurrency, when the recipe does not say.
pub const DEFAULT_WARMUP_PER_CONCURRENCY: u32 = 1;

/// A checked recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    hardware: Vec<String>,
    checkpoint: String,
    tp: u32,
    server: Server,
    tests: TestSelections,
    kernel_timing: Vec<TimingScript>,
    accuracy: Vec<AccuracyBenchmark>,
    speed: Option<SpeedSweep>,
    timeouts: StepTimeouts,
    install: Option<Install>,
    topology: Option<topology::Topology>,
}

/// How a side's tree is installed before anything runs in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Install {
    command: Template,
}

impl Install {
    /// The install command's argv, for `exec`.
    pub fn command(&self) -> Vec<String> {
        self.command.expand(|_none| String::new(), &[])
    }

    /// The command as the recipe wrote it.
    pub fn command_text(&self) -> &str {
        self.command.text()
    }
}

/// How the model's server starts and proves itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    command: Template,
    monokernel_flag: Vec<String>,
    /// The path polled until it answers 200, e.g. `/health`.
    pub health_path: String,
    /// How long the server may take to become healthy.
    pub startup_timeout: Duration,
    /// The regular expression a line of the server's log matches when a request was routed
    /// through a monokernel.
    pub routing_pattern: String,
    /// Which engine memory API the server speaks (`server.memory-api`, default `probe`).
    pub memory_api: memory_api::MemoryApiKey,
    /// When a routing line counts (`server.routing-logged`, default `serving`).
    pub routing_logged: RoutingLogged,
}

/// When a line of the server's log counts as its routing line (`server.routing-logged`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RoutingLogged {
    /// `serving`: only lines written after the server was healthy (each start's), so a line
    /// its command prints while it starts (an `echo`) is no proof of routing.
    #[default]
    Serving,
    /// `any`: any line of its log, for monokernels that log their routing while they load (a
    /// graph capture before the server is healthy). Base's contract decides it.
    Any,
}

impl RoutingLogged {
    /// The value as the recipe writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            RoutingLogged::Serving => "serving",
            RoutingLogged::Any => "any",
        }
    }
}

/// Which side of a comparison a server is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSide {
    /// Whether the monokernels are on: the recipe's `monokernel-flag` is added. Off only for
    /// SGLang's own path, the baseline of a model new in the PR.
    pub monokernel: bool,
}

/// The pytest selections of each suite: node ids (`path::test`) or paths, relative to the
/// repository's root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestSelections {
    pub unit: Vec<String>,
    pub kernel: Vec<String>,
    pub serving: Vec<String>,
}

/// A kernel timing script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimingScript {
    /// Its name, unique in the recipe.
    pub name: String,
    command: Template,
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
    pub hub_dataset: Option<crate::accuracy::gated::HubDataset>,
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
    command: Template,
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
    command: Template,
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
    pub port: u16,
    pub checkpoint_path: &'a str,
    pub results: &'a str,
    pub concurrency: u32,
    pub input_len: u32,
    pub output_len: u32,
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

/// Per-step time limits; `None` leaves the runner's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepTimeouts {
    pub install: Option<Duration>,
    pub unit_tests: Option<Duration>,
    pub kernel_tests: Option<Duration>,
    pub serving_tests: Option<Duration>,
    pub kernel_timing: Option<Duration>,
    pub accuracy: Option<Duration>,
    pub speed_run: Option<Duration>,
    /// How long any command of the recipe may go without progress before it is stopped
    /// (`crate::process::ProgressWatch`); `None` leaves the runner's default
    /// ([`crate::process::DEFAULT_STALL`]).
    pub stall: Option<crate::process::StallLimit>,
}

/// Why a recipe was refused: the file and what is wrong, as every config file says it.
pub type RecipeError = prgate_scope::ConfigError;

/// Why a recipe cannot run, wholly or in part, on a node: what the runner records as not-run
/// evidence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe_blockers(.blockers))]
pub struct NotRunnable {
    blockers: Vec<Blocker>,
}

/// One reason a recipe cannot run on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    /// The node's hardware is not in the recipe's list.
    HardwareAbsent { node: String, hardware: String, supported: Vec<String> },
    /// The node has fewer GPUs than the recipe's tensor parallelism.
    TooFewGpus { node: String, gpus: usize, tp: u32 },
    /// The node does not have the checkpoint.
    NoCheckpoint { node: String, checkpoint: String },
    /// An accuracy benchmark's dataset is gated and the node lacks its token.
    GatedDataset { node: String, benchmark: String, token: String },
}

impl Recipe {
    /// Parses and checks the text of a recipe. `file` names it in errors, e.g.
    /// `test/e2e/kimi_k3.toml at 9f8e7d6`.
    pub fn parse(text: &str, file: &str) -> Result<Recipe, RecipeError> {
        let checker = Checker { file };
        checker.recipe(checker.toml(text)?)
    }

    /// The hardware the recipe supports, lowercase, e.g. `["mi355x", "mi350x"]`.
    pub fn hardware(&self) -> &[String] {
        &self.hardware
    }

    /// The checkpoint it needs: a name the node profile maps to a path.
    pub fn checkpoint(&self) -> &str {
        &self.checkpoint
    }

    /// Tensor parallelism: how many GPUs one server takes.
    pub fn tp(&self) -> u32 {
        self.tp
    }

    /// The server's settings.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The test selections.
    pub fn tests(&self) -> &TestSelections {
        &self.tests
    }

    /// The kernel timing scripts, in the recipe's order.
    pub fn kernel_timing(&self) -> &[TimingScript] {
        &self.kernel_timing
    }

    /// The accuracy benchmarks, in the recipe's order.
    pub fn accuracy(&self) -> &[AccuracyBenchmark] {
        &self.accuracy
    }

    /// The speed sweep, when the recipe has one.
    pub fn speed(&self) -> Option<&SpeedSweep> {
        self.speed.as_ref()
    }

    /// The servers behind a router (or the server across nodes) the model is served by, when
    /// one server does not serve it (`[topology]`, `docs/topology.md`).
    pub fn topology(&self) -> Option<&topology::Topology> {
        self.topology.as_ref()
    }

    /// The per-step time limits.
    pub fn install(&self) -> Option<&Install> {
        self.install.as_ref()
    }

    pub fn timeouts(&self) -> &StepTimeouts {
        &self.timeouts
    }

    /// The server's argv for one side: the command's placeholders filled in, and the
    /// monokernel flag at `{extra_args}` (or at the end) when `side.monokernel`.
    /// `checkpoint_path` is the checkpoint's path as the server sees it (inside the container).
    /// The argv is for `exec`, never for a shell.
    pub fn server_command(
        &self,
        side: ServerSide,
        port: u16,
        checkpoint_path: &str,
    ) -> Vec<String> {
        let extra: &[String] = if side.monokernel { &self.server.monokernel_flag } else { &[] };
        self.server.command.expand(
            |placeholder| match placeholder {
                Placeholder::Checkpoint => checkpoint_path.to_owned(),
                Placeholder::Port => port.to_string(),
                Placeholder::Tp => self.tp.to_string(),
                // The server command allows no other placeholder.
                _ => String::new(),
            },
            extra,
        )
    }

    /// Whether the recipe can run on `node`: every reason it cannot, in whole or in part.
    /// Secrets are checked by name only; whether their environment variables are set is the
    /// runner's question at run time.
    pub fn check_runs_on(&self, node: &NodeProfile) -> Result<(), NotRunnable> {
        let mut blockers = Vec::new();
        if !self.hardware.iter().any(|hardware| hardware == node.hardware()) {
            blockers.push(Blocker::HardwareAbsent {
                node: node.name().to_owned(),
                hardware: node.hardware().to_owned(),
                supported: self.hardware.clone(),
            });
        }
        if node.gpu_count() < self.tp as usize {
            blockers.push(Blocker::TooFewGpus {
                node: node.name().to_owned(),
                gpus: node.gpu_count(),
                tp: self.tp,
            });
        }
        if node.checkpoint_path(&self.checkpoint).is_none() {
            blockers.push(Blocker::NoCheckpoint {
                node: node.name().to_owned(),
                checkpoint: self.checkpoint.clone(),
            });
        }
        for benchmark in &self.accuracy {
            if let Some(token) = &benchmark.token
                && !node.has_secret(token)
            {
                blockers.push(Blocker::GatedDataset {
                    node: node.name().to_owned(),
                    benchmark: benchmark.name.clone(),
                    token: token.clone(),
                });
            }
        }
        if blockers.is_empty() { Ok(()) } else { Err(NotRunnable { blockers }) }
    }
}

impl Server {
    /// The command as the recipe wrote it.
    pub fn command_text(&self) -> &str {
        self.command.text()
    }

    /// The arguments that turn the monokernels on.
    pub fn monokernel_flag(&self) -> &[String] {
        &self.monokernel_flag
    }
}

impl TimingScript {
    /// The script's argv, writing its JSON (see [`timing`]) to `output`, a path as the script
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

impl NotRunnable {
    /// Every reason, in the order found: hardware, GPUs, checkpoint, then benchmarks.
    pub fn blockers(&self) -> &[Blocker] {
        &self.blockers
    }

    /// The first reason `check` cannot run; for an accuracy check, `part` is the benchmark's
    /// name (a gated dataset blocks only its own benchmark).
    pub fn blocker_for(&self, check: Check, part: Option<&str>) -> Option<&Blocker> {
        self.blockers.iter().find(|blocker| {
            blocker.blocks(check)
                && match (blocker.subject(), part) {
                    (None, _) => true,
                    (Some(subject), Some(part)) => subject == part,
                    (Some(_), None) => false,
                }
        })
    }
}

impl Blocker {
    /// The reason as evidence records it.
    pub fn reason(&self) -> NotRunReason {
        match self {
            Blocker::HardwareAbsent { .. } | Blocker::TooFewGpus { .. } => {
                NotRunReason::HardwareAbsent
            }
            Blocker::NoCheckpoint { .. } => NotRunReason::NoCheckpoint,
            Blocker::GatedDataset { .. } => NotRunReason::GatedDataset,
        }
    }

    /// The part of a check it blocks (a benchmark's name), or `None` for the whole check.
    pub fn subject(&self) -> Option<&str> {
        match self {
            Blocker::GatedDataset { benchmark, .. } => Some(benchmark),
            _ => None,
        }
    }

    /// Whether it stops `check`. Unit and kernel tests need neither a server nor the
    /// recipe's hardware, so nothing here stops them; every check that needs the model's
    /// server (routing, serving tests, accuracy, speed) stops without the hardware, the GPUs
    /// or the checkpoint; kernel timing stops on hardware the recipe does not support; a gated
    /// dataset stops its own benchmark.
    pub fn blocks(&self, check: Check) -> bool {
        let needs_server =
            matches!(check, Check::Routing | Check::ServingTests | Check::Accuracy | Check::Speed);
        match self {
            Blocker::HardwareAbsent { .. } => needs_server || check == Check::KernelTiming,
            Blocker::TooFewGpus { .. } | Blocker::NoCheckpoint { .. } => needs_server,
            Blocker::GatedDataset { .. } => check == Check::Accuracy,
        }
    }
}

impl fmt::Display for Blocker {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocker::HardwareAbsent { node, hardware, supported } => write!(
                formatter,
                "node {node} is {hardware}; the recipe supports {}",
                supported.join(", ")
            ),
            Blocker::TooFewGpus { node, gpus, tp } => {
                let plural = if *gpus == 1 { "" } else { "s" };
                write!(formatter, "node {node} has {gpus} GPU{plural}; the recipe needs {tp} (tp)")
            }
            Blocker::NoCheckpoint { node, checkpoint } => {
                write!(formatter, "node {node} has no checkpoint {checkpoint}")
            }
            Blocker::GatedDataset { node, benchmark, token } => write!(
                formatter,
                "benchmark {benchmark} reads a gated dataset and node {node} has no secret {token}"
            ),
        }
    }
}

fn describe_blockers(blockers: &[Blocker]) -> String {
    let described: Vec<String> = blockers.iter().map(ToString::to_string).collect();
    described.join("; ")
}

const SERVER_PLACEHOLDERS: [Placeholder; 4] =
    [Placeholder::Checkpoint, Placeholder::Port, Placeholder::Tp, Placeholder::ExtraArgs];
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

/// Turns raw values into checked ones, naming the file in every error.
struct Checker<'a> {
    file: &'a str,
}

impl Checker<'_> {
    /// `text` read as TOML into `T`; a syntax or shape error names the file.
    fn toml<T: serde::de::DeserializeOwned>(&self, text: &str) -> Result<T, RecipeError> {
        RecipeError::parse_toml(text, self.file)
    }

    fn value(&self, key: &str, value: &dyn fmt::Debug, problem: impl fmt::Display) -> RecipeError {
        RecipeError::value(self.file, key, value, problem)
    }

    fn key(&self, key: &str, problem: impl fmt::Display) -> RecipeError {
        RecipeError::key(self.file, key, problem)
    }

    fn template(
        &self,
        key: &str,
        text: &str,
        allowed: &[Placeholder],
        required: &[Placeholder],
    ) -> Result<Template, RecipeError> {
        Template::parse(text, allowed, required).map_err(|error| self.value(key, &text, error))
    }

    fn duration(&self, key: &str, text: &str) -> Result<Duration, RecipeError> {
        parse_duration(text).map_err(|problem| self.value(key, &text, problem))
    }

    fn optional_duration(
        &self,
        key: &str,
        text: Option<&String>,
    ) -> Result<Option<Duration>, RecipeError> {
        text.map(|text| self.duration(key, text)).transpose()
    }

    fn recipe(&self, raw: RawRecipe) -> Result<Recipe, RecipeError> {
        if raw.hardware.is_empty() {
            return Err(self.key("hardware", "is empty: list the hardware the recipe runs on"));
        }
        for (index, hardware) in raw.hardware.iter().enumerate() {
            let key = format!("hardware[{index}]");
            check_hardware(hardware).map_err(|problem| self.value(&key, hardware, problem))?;
            if raw.hardware[..index].contains(hardware) {
                return Err(self.value(&key, hardware, "is listed twice"));
            }
        }
        check_name(&raw.checkpoint)
            .map_err(|problem| self.value("checkpoint", &raw.checkpoint, problem))?;
        if raw.tp == 0 {
            return Err(self.value("tp", &raw.tp, "must be 1 or more"));
        }
        let server = self.server(raw.server)?;
        let topology = raw
            .topology
            .map(|raw_topology| {
                let defaults = topology::Defaults {
                    file: self.file,
                    tp: raw.tp,
                    health_path: &server.health_path,
                };
                topology::check(raw_topology, &defaults)
            })
            .transpose()?;
        Ok(Recipe {
            hardware: raw.hardware,
            checkpoint: raw.checkpoint,
            tp: raw.tp,
            server,
            topology,
            tests: self.tests(raw.tests)?,
            kernel_timing: self.kernel_timing(raw.kernel_timing)?,
            accuracy: self.accuracy(raw.accuracy)?,
            speed: raw.speed.map(|speed| self.speed(speed)).transpose()?,
            timeouts: self.timeouts(raw.timeouts)?,
            install: raw
                .install
                .map(|install| {
                    self.template("install.command", &install.command, &[], &[])
                        .map(|command| Install { command })
                })
                .transpose()?,
        })
    }

    fn server(&self, raw: RawServer) -> Result<Server, RecipeError> {
        let command = self.template(
            "server.command",
            &raw.command,
            &SERVER_PLACEHOLDERS,
            &[Placeholder::Port],
        )?;
        let flag = self.template("server.monokernel-flag", &raw.monokernel_flag, &[], &[])?;
        let monokernel_flag = flag.expand(|_none| String::new(), &[]);
        let health_path = raw.health_path.unwrap_or_else(|| DEFAULT_HEALTH_PATH.to_owned());
        if !health_path.starts_with('/')
            || health_path.contains(|char: char| char.is_whitespace() || char.is_control())
        {
            return Err(self.value(
                "server.health-path",
                &health_path,
                "must be a URL path that starts with /, such as \"/health\"",
            ));
        }
        let startup_timeout = match &raw.startup_timeout {
            Some(text) => self.duration("server.startup-timeout", text)?,
            None => DEFAULT_STARTUP_TIMEOUT,
        };
        if raw.routing_pattern.trim().is_empty() {
            return Err(self.value(
                "server.routing-pattern",
                &raw.routing_pattern,
                "is empty: write a regular expression that only a monokernel routing line matches",
            ));
        }
        if let Err(error) = regex::Regex::new(&raw.routing_pattern) {
            return Err(self.value(
                "server.routing-pattern",
                &raw.routing_pattern,
                format!("is not a regular expression: {error}"),
            ));
        }
        let memory_api = match raw.memory_api.as_deref() {
            None => memory_api::MemoryApiKey::Probe,
            Some(text) => memory_api::MemoryApiKey::parse(text).ok_or_else(|| {
                self.value("server.memory-api", &text, "must be sglang, vllm, none or probe")
            })?,
        };
        let routing_logged = match raw.routing_logged.as_deref() {
            None | Some("serving") => RoutingLogged::Serving,
            Some("any") => RoutingLogged::Any,
            Some(text) => {
                return Err(self.value("server.routing-logged", &text, "must be serving or any"));
            }
        };
        Ok(Server {
            command,
            monokernel_flag,
            health_path,
            startup_timeout,
            routing_pattern: raw.routing_pattern,
            memory_api,
            routing_logged,
        })
    }

    fn tests(&self, raw: Option<RawTests>) -> Result<TestSelections, RecipeError> {
        let raw = raw.unwrap_or_default();
        for (suite, selections) in
            [("unit", &raw.unit), ("kernel", &raw.kernel), ("serving", &raw.serving)]
        {
            for (index, selection) in selections.iter().enumerate() {
                check_selection(selection).map_err(|problem| {
                    self.value(&format!("tests.{suite}[{index}]"), selection, problem)
                })?;
            }
        }
        Ok(TestSelections { unit: raw.unit, kernel: raw.kernel, serving: raw.serving })
    }

    fn kernel_timing(&self, raw: Vec<RawTiming>) -> Result<Vec<TimingScript>, RecipeError> {
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

    fn accuracy(&self, raw: Vec<RawAccuracy>) -> Result<Vec<AccuracyBenchmark>, RecipeError> {
        let mut benchmarks: Vec<AccuracyBenchmark> = Vec::with_capacity(raw.len());
        for (index, raw) in raw.into_iter().enumerate() {
            let key = |field: &str| format!("accuracy[{index}].{field}");
            check_name(&raw.name)
                .map_err(|problem| self.value(&key("name"), &raw.name, problem))?;
            if benchmarks.iter().any(|benchmark| benchmark.name == raw.name) {
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
                    crate::accuracy::gated::HubDataset::parse(text)
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
            let misplaced = |field: &str, kind: &str| {
                self.key(&key(field), format!("only the {kind} evaluator has it"))
            };
            let missing = |field: &str, kind: &str| {
                self.key(&key(field), format!("is missing: the {kind} evaluator needs it"))
            };
            let evaluator = match raw.evaluator {
                RawEvaluator::External => {
                    if raw.dataset.is_some() {
                        return Err(misplaced("dataset", "builtin"));
                    }
                    if raw.limit.is_some() {
                        return Err(misplaced("limit", "builtin"));
                    }
                    let command = raw.command.ok_or_else(|| missing("command", "external"))?;
                    let command = self.template(
                        &key("command"),
                        &command,
                        &ACCURACY_PLACEHOLDERS,
                        &[Placeholder::Port, Placeholder::Results],
                    )?;
                    let metrics = raw.metrics.ok_or_else(|| missing("metrics", "external"))?;
                    check_relative_path(&metrics)
                        .map_err(|problem| self.value(&key("metrics"), &metrics, problem))?;
                    Evaluator::External(ExternalEvaluator { command, metrics })
                }
                RawEvaluator::Builtin => {
                    if raw.command.is_some() {
                        return Err(misplaced("command", "external"));
                    }
                    if raw.metrics.is_some() {
                        return Err(misplaced("metrics", "external"));
                    }
                    let dataset = raw.dataset.ok_or_else(|| missing("dataset", "builtin"))?;
                    check_relative_path(&dataset)
                        .map_err(|problem| self.value(&key("dataset"), &dataset, problem))?;
                    if raw.limit == Some(0) {
                        return Err(self.value(&key("limit"), &0, "must be 1 or more"));
                    }
                    Evaluator::Builtin(BuiltinEvaluator { dataset, limit: raw.limit })
                }
            };
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
                                format!(
                                    "must be a number of repeats in 1..={MAX_ACCURACY_REPEATS}"
                                ),
                            )
                        })
                })
                .transpose()?;
            benchmarks.push(AccuracyBenchmark {
                name: raw.name,
                evaluator,
                token: raw.token,
                hub_dataset,
                repeats,
            });
        }
        Ok(benchmarks)
    }

    fn speed(&self, raw: RawSpeed) -> Result<SpeedSweep, RecipeError> {
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

    fn timeouts(&self, raw: Option<RawTimeouts>) -> Result<StepTimeouts, RecipeError> {
        let raw = raw.unwrap_or_default();
        Ok(StepTimeouts {
            install: self.optional_duration("timeouts.install", raw.install.as_ref())?,
            unit_tests: self.optional_duration("timeouts.unit-tests", raw.unit_tests.as_ref())?,
            kernel_tests: self
                .optional_duration("timeouts.kernel-tests", raw.kernel_tests.as_ref())?,
            serving_tests: self
                .optional_duration("timeouts.serving-tests", raw.serving_tests.as_ref())?,
            kernel_timing: self
                .optional_duration("timeouts.kernel-timing", raw.kernel_timing.as_ref())?,
            accuracy: self.optional_duration("timeouts.accuracy", raw.accuracy.as_ref())?,
            speed_run: self.optional_duration("timeouts.speed-run", raw.speed_run.as_ref())?,
            stall: match raw.stall.as_ref() {
                None => None,
                Some(text) => Some(
                    crate::process::StallLimit::try_from(self.duration("timeouts.stall", text)?)
                        .map_err(|error| self.value("timeouts.stall", text, error.to_string()))?,
                ),
            },
        })
    }
}

/// A pytest selection: a relative path, optionally followed by `::` and a test's name. It may
/// not start with `-`, so that it is never read as one of pytest's options.
fn check_selection(selection: &str) -> Result<(), String> {
    if selection.starts_with('-') {
        return Err("starts with -, which pytest would read as an option".to_owned());
    }
    if selection.contains(|char: char| char.is_control()) {
        return Err("has a control character".to_owned());
    }
    let path = selection.split("::").next().unwrap_or_default();
    check_relative_path(path.strip_suffix('/').unwrap_or(path))
        .map_err(|problem| format!("{problem} (a path from the repository's root, then ::test)"))
}

/// The longest duration a recipe may give: a week (168h). Longer is an error, so that no
/// deadline computed from a PR's recipe overflows (`u64::MAX` seconds would panic when added
/// to an instant); the deadlines saturate as well (`crate::process::deadline_after`).
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Reads a duration written as numbers with units, largest first: `90s`, `20m`, `1h30m`; at
/// most [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let problem = || "must be a duration such as \"90s\", \"20m\" or \"1h30m\"".to_owned();
    let mut seconds: u64 = 0;
    let mut number = String::new();
    let mut last_unit = u64::MAX;
    for char in text.chars() {
        if char.is_ascii_digit() {
            number.push(char);
            continue;
        }
        let unit = match char {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(problem()),
        };
        if number.is_empty() || unit >= last_unit {
            return Err(problem());
        }
        let value: u64 = number.parse().map_err(|_too_big| problem())?;
        seconds = value
            .checked_mul(unit)
            .and_then(|value| seconds.checked_add(value))
            .ok_or_else(problem)?;
        number.clear();
        last_unit = unit;
    }
    if !number.is_empty() || last_unit == u64::MAX {
        return Err(problem());
    }
    if seconds == 0 {
        return Err("must be longer than zero".to_owned());
    }
    if seconds > MAX_DURATION.as_secs() {
        return Err(format!("must be at most {}h (a week)", MAX_DURATION.as_secs() / 3600));
    }
    Ok(Duration::from_secs(seconds))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawRecipe {
    hardware: Vec<String>,
    checkpoint: String,
    tp: u32,
    server: RawServer,
    tests: Option<RawTests>,
    #[serde(default)]
    kernel_timing: Vec<RawTiming>,
    #[serde(default)]
    accuracy: Vec<RawAccuracy>,
    speed: Option<RawSpeed>,
    timeouts: Option<RawTimeouts>,
    install: Option<RawInstall>,
    topology: Option<topology::RawTopology>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct RawInstall {
    pub(crate) command: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawServer {
    command: String,
    monokernel_flag: String,
    health_path: Option<String>,
    startup_timeout: Option<String>,
    routing_pattern: String,
    memory_api: Option<String>,
    routing_logged: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawTests {
    #[serde(default)]
    unit: Vec<String>,
    #[serde(default)]
    kernel: Vec<String>,
    #[serde(default)]
    serving: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawTiming {
    name: String,
    command: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawAccuracy {
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
struct RawSpeed {
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

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawTimeouts {
    install: Option<String>,
    unit_tests: Option<String>,
    kernel_tests: Option<String>,
    serving_tests: Option<String>,
    kernel_timing: Option<String>,
    accuracy: Option<String>,
    speed_run: Option<String>,
    stall: Option<String>,
}
