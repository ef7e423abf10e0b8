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
pub mod stall;
pub mod template;
pub mod timing;
pub mod topology;

mod benchmarks;
mod hub_dataset;
mod runnable;
mod server;
mod steps;

pub use benchmarks::{
    AccuracyBenchmark, BuiltinEvaluator, Evaluator, ExternalEvaluator, ExternalSpeed,
    SpeedBenchmark, SpeedFormat, SpeedRun, SpeedSweep, TimingScript,
};
pub use hub_dataset::{HubDataset, NotAHubDataset};
pub use runnable::{Blocker, NotRunnable};
pub use server::{RoutingLogged, Server, ServerSide};
pub use steps::RecipeSteps;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use crate::node::{ValueProblem, check_hardware, check_name, check_relative_path};
use benchmarks::{RawAccuracy, RawSpeed, RawTiming};
use server::RawServer;
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

/// The pytest selections of each suite: node ids (`path::test`) or paths, relative to the
/// repository's root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestSelections {
    pub unit: Vec<String>,
    pub kernel: Vec<String>,
    pub serving: Vec<String>,
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
    /// (the runner's `process::ProgressWatch`); `None` leaves the default
    /// ([`stall::DEFAULT_STALL`]).
    pub stall: Option<stall::StallLimit>,
}

/// Why a recipe was refused: the file and what is wrong, as every config file says it.
pub type RecipeError = prgate_scope::ConfigError;

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
}

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
                    stall::StallLimit::try_from(self.duration("timeouts.stall", text)?)
                        .map_err(|error| self.value("timeouts.stall", text, error.to_string()))?,
                ),
            },
        })
    }
}

/// A pytest selection: a relative path, optionally followed by `::` and a test's name. It may
/// not start with `-`, so that it is never read as one of pytest's options.
fn check_selection(selection: &str) -> Result<(), SelectionProblem> {
    if selection.starts_with('-') {
        return Err(SelectionProblem::LikeAnOption);
    }
    if selection.contains(|char: char| char.is_control()) {
        return Err(SelectionProblem::ControlCharacter);
    }
    let path = selection.split("::").next().unwrap_or_default();
    check_relative_path(path.strip_suffix('/').unwrap_or(path)).map_err(SelectionProblem::Path)
}

/// Why a pytest selection of a recipe is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum SelectionProblem {
    #[error("starts with -, which pytest would read as an option")]
    LikeAnOption,
    #[error("has a control character")]
    ControlCharacter,
    #[error("{0} (a path from the repository's root, then ::test)")]
    Path(ValueProblem),
}

/// The longest duration a recipe may give: a week (168h). Longer is an error, so that no
/// deadline computed from a PR's recipe overflows (`u64::MAX` seconds would panic when added
/// to an instant); the runner's deadlines saturate as well (`process::deadline_after`).
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Reads a duration written as numbers with units, largest first: `90s`, `20m`, `1h30m`; at
/// most [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
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
            _ => return Err(DurationError::NotADuration),
        };
        if number.is_empty() || unit >= last_unit {
            return Err(DurationError::NotADuration);
        }
        let value: u64 = number.parse().map_err(|_too_big| DurationError::NotADuration)?;
        seconds = value
            .checked_mul(unit)
            .and_then(|value| seconds.checked_add(value))
            .ok_or(DurationError::NotADuration)?;
        number.clear();
        last_unit = unit;
    }
    if !number.is_empty() || last_unit == u64::MAX {
        return Err(DurationError::NotADuration);
    }
    if seconds == 0 {
        return Err(DurationError::Zero);
    }
    if seconds > MAX_DURATION.as_secs() {
        return Err(DurationError::TooLong);
    }
    Ok(Duration::from_secs(seconds))
}

/// Why a text is not a duration a recipe (or `--time-limit`) may give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("must be a duration such as \"90s\", \"20m\" or \"1h30m\"")]
    NotADuration,
    #[error("must be longer than zero")]
    Zero,
    #[error("must be at most {}h (a week)", MAX_DURATION.as_secs() / 3600)]
    TooLong,
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
