//! The simulated server's profile: how fast, how noisy, how broken and how right it is.
//!
//! A profile file (TOML or JSON, kebab-case keys) goes through the private `ProfileFile` and is
//! converted into the validated [`Profile`]; command-line flags are [`crate::Overrides`], set
//! on a profile by the same checks (`overrides.rs`). The defaults are in
//! `default-profile.toml`, which a test checks against [`Profile::default`]. Serving the profile
//! is the parent module's work.

use std::marker::PhantomData;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::SimServerError;

/// The defaults of every profile key, commented: the reference for profile files.
pub const DEFAULT_PROFILE: &str = include_str!("default-profile.toml");

/// How a simulated server behaves. `docs/sim-server.md` describes every field by its file key.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "ProfileFile")]
pub struct Profile {
    /// The model name the server reports (`model`).
    pub model: String,
    /// From a generation request's start to its first token (`ttft-ms`).
    pub time_to_first_token: Duration,
    /// The spacing of output tokens after the first (`tpot-ms`).
    pub time_per_output_token: Duration,
    /// The spacing on SGLang's own path, when the monokernels are off (`sglang-tpot-ms`);
    /// `None` is the same as with them on.
    pub sglang_time_per_output_token: Option<Duration>,
    /// Per-request noise on both times (`noise-cv`).
    pub noise: CoefficientOfVariation,
    /// The seed of every random draw (`seed`).
    pub seed: u64,
    /// How long the health checks answer 503 after start (`startup-delay-ms`).
    pub startup_delay: Duration,
    /// How long taking released memory back takes (`wake-delay-ms`): SGLang's
    /// `/resume_memory_occupation`, vLLM's `/wake_up`.
    pub wake_delay: Duration,
    /// Which engine's memory-release API it speaks (`memory-api`).
    pub memory_api: MemoryApi,
    /// The folder of a fake GPU's memory, where the server keeps what it holds (`vram-dir`,
    /// `crate::vram`); `None` holds none.
    pub vram_dir: Option<PathBuf>,
    /// The bytes of GPU memory it holds once loaded (`vram-bytes`).
    pub vram_bytes: u64,
    /// Whether it answers a memory release and keeps its memory (`release-keeps-memory`): a
    /// server that lies.
    pub release_keeps_memory: bool,
    /// How long after a release it takes its memory back unasked, unless it is paused by then
    /// (`retake-memory-after-ms`): a server that lies later; `None` never does.
    pub retake_memory_after: Option<Duration>,
    /// How long its fake GPU stays busy after a release, paused or not
    /// (`busy-after-release-ms`): a server that frees its memory and queues GPU work before it
    /// answers; `None` leaves it idle.
    pub busy_after_release: Option<Duration>,
    /// Whether the server never becomes healthy (`never-healthy`).
    pub never_healthy: bool,
    /// How many generation requests the server answers before the next one kills it
    /// (`die-after-requests`); `None` never dies.
    pub die_after_requests: Option<u64>,
    /// The most tokens an answer has, whatever `max_tokens` and `ignore_eos` ask
    /// (`eos-after-tokens`): a server that ignores `ignore_eos`; `None` honours it.
    pub eos_after_tokens: Option<usize>,
    /// The fraction of generation requests answered with a 500 (`error-rate`).
    pub error_rate: Probability,
    /// The probability that an answer with an `expected:` line is right (`accuracy`).
    pub accuracy: Probability,
    /// Whether the server logs monokernel routing lines (`monokernel`).
    pub monokernel: bool,
    /// Where the log goes (`log-file`); `None` is standard error.
    pub log_file: Option<PathBuf>,
    /// How many generation requests run at once (`max-concurrency`); `None` is no limit.
    pub max_concurrency: Option<NonZeroUsize>,
    /// The server's part in a disaggregated model (`[disaggregation]`); `None` serves whole
    /// requests.
    pub disaggregation: Option<super::disaggregation::Disaggregation>,
}

/// Which engines' memory-release endpoints a server answers (`memory-api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryApi {
    /// SGLang's and vLLM's both.
    Both,
    /// `/release_memory_occupation`, `/resume_memory_occupation`.
    Sglang,
    /// `/sleep`, `/wake_up`, `/is_sleeping`.
    Vllm,
    /// Neither: a server that can only be stopped and started again.
    None,
}

impl MemoryApi {
    pub fn sglang(self) -> bool {
        matches!(self, MemoryApi::Both | MemoryApi::Sglang)
    }

    pub fn vllm(self) -> bool {
        matches!(self, MemoryApi::Both | MemoryApi::Vllm)
    }
}

impl std::str::FromStr for MemoryApi {
    type Err = NotAMemoryApi;

    fn from_str(text: &str) -> Result<MemoryApi, NotAMemoryApi> {
        match text {
            "both" => Ok(MemoryApi::Both),
            "sglang" => Ok(MemoryApi::Sglang),
            "vllm" => Ok(MemoryApi::Vllm),
            "none" => Ok(MemoryApi::None),
            other => Err(NotAMemoryApi { text: other.to_owned() }),
        }
    }
}

/// A word that is not a [`MemoryApi`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a memory API (both, sglang, vllm, none)")]
pub struct NotAMemoryApi {
    pub text: String,
}

/// A probability: a number from 0 to 1.
pub type Probability = Bounded<ZeroToOne>;

/// A coefficient of variation: a finite number, zero or more.
pub type CoefficientOfVariation = Bounded<NonNegative>;

/// A number of the profile that its range `R` has checked; made only by [`TryFrom<f64>`] (or a
/// named constant).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Bounded<R>(f64, PhantomData<R>);

/// A range of [`Bounded`] numbers: the one place that says what is in it and which
/// [`InvalidNumber`] names a value that is not.
pub trait Range {
    /// `value` when it is in the range, else what is wrong with it.
    fn check(value: f64) -> Result<f64, InvalidNumber>;
}

/// From 0 to 1: [`Probability`].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub enum ZeroToOne {}

/// A finite number, zero or more: [`CoefficientOfVariation`].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub enum NonNegative {}

/// A profile value of the right type that is out of its range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidNumber {
    /// A probability outside 0 to 1.
    #[error("{0} is not a probability from 0 to 1")]
    NotAProbability(f64),
    /// A negative, infinite or NaN number where zero or more is needed.
    #[error("{0} is not a finite number, zero or more")]
    NotNonNegative(f64),
    /// Milliseconds beyond what a duration holds.
    #[error("{0:e} ms is too long")]
    TooLong(f64),
}

/// A profile key whose value is out of its range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("'{key}': {problem}")]
pub struct ProfileError {
    key: &'static str,
    problem: InvalidNumber,
}

impl<R> Bounded<R> {
    /// The number: a probability from 0 to 1, a coefficient as a fraction (0.02 is 2%).
    pub fn value(self) -> f64 {
        self.0
    }
}

impl<R: Range> TryFrom<f64> for Bounded<R> {
    type Error = InvalidNumber;

    fn try_from(value: f64) -> Result<Bounded<R>, InvalidNumber> {
        R::check(value).map(|value| Bounded(value, PhantomData))
    }
}

impl Probability {
    /// Never (0).
    pub const NEVER: Probability = Bounded(0.0, PhantomData);
    /// Always (1).
    pub const ALWAYS: Probability = Bounded(1.0, PhantomData);
}

impl CoefficientOfVariation {
    /// No noise.
    pub const NONE: CoefficientOfVariation = Bounded(0.0, PhantomData);
}

impl Range for ZeroToOne {
    fn check(value: f64) -> Result<f64, InvalidNumber> {
        if (0.0..=1.0).contains(&value) {
            Ok(value)
        } else {
            Err(InvalidNumber::NotAProbability(value))
        }
    }
}

impl Range for NonNegative {
    fn check(value: f64) -> Result<f64, InvalidNumber> {
        if value.is_finite() && value >= 0.0 {
            Ok(value)
        } else {
            Err(InvalidNumber::NotNonNegative(value))
        }
    }
}

impl ProfileError {
    /// The profile key, as written in a profile file.
    pub fn key(&self) -> &str {
        self.key
    }

    /// What is wrong with its value.
    pub fn problem(&self) -> &InvalidNumber {
        &self.problem
    }
}

impl Default for Profile {
    fn default() -> Profile {
        Profile::try_from(ProfileFile::default())
            .expect("the built-in profile defaults are in range")
    }
}

impl Profile {
    /// Reads a profile file: JSON when its name ends in `.json`, TOML otherwise.
    pub fn load(path: &Path) -> Result<Profile, SimServerError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| SimServerError::ReadProfile { path: path.to_owned(), source })?;
        let is_json = path.extension().is_some_and(|extension| extension == "json");
        let parsed =
            if is_json { Profile::from_json_str(&text) } else { Profile::from_toml_str(&text) };
        parsed.map_err(|error| SimServerError::ParseProfile {
            path: path.to_owned(),
            message: error.to_string(),
        })
    }

    /// Parses a profile from TOML text; the error is a message for the user.
    pub fn from_toml_str(text: &str) -> Result<Profile, ProfileSyntaxError> {
        toml::from_str(text).map_err(|error| ProfileSyntaxError {
            message: error.to_string().trim_end().to_owned(),
        })
    }

    /// The spacing of output tokens this server uses: SGLang's own when the monokernels are
    /// off and the profile gives one.
    pub fn effective_time_per_output_token(&self) -> Duration {
        match (self.monokernel, self.sglang_time_per_output_token) {
            (false, Some(sglang)) => sglang,
            _ => self.time_per_output_token,
        }
    }

    /// Parses a profile from JSON text; the error is a message for the user.
    pub fn from_json_str(text: &str) -> Result<Profile, ProfileSyntaxError> {
        serde_json::from_str(text)
            .map_err(|error| ProfileSyntaxError { message: error.to_string() })
    }
}

/// Profile text that does not read as a profile: the TOML or JSON parser's message, which
/// names the key and the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ProfileSyntaxError {
    pub message: String,
}

/// A profile file as written: kebab-case keys, times in milliseconds.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
struct ProfileFile {
    model: String,
    ttft_ms: f64,
    tpot_ms: f64,
    sglang_tpot_ms: Option<f64>,
    noise_cv: f64,
    seed: u64,
    startup_delay_ms: f64,
    wake_delay_ms: f64,
    memory_api: MemoryApi,
    vram_dir: Option<PathBuf>,
    vram_bytes: u64,
    release_keeps_memory: bool,
    retake_memory_after_ms: Option<f64>,
    busy_after_release_ms: Option<f64>,
    never_healthy: bool,
    die_after_requests: Option<u64>,
    eos_after_tokens: Option<usize>,
    error_rate: f64,
    accuracy: f64,
    monokernel: bool,
    log_file: Option<PathBuf>,
    max_concurrency: Option<NonZeroUsize>,
    disaggregation: Option<super::disaggregation::Disaggregation>,
}

impl Default for ProfileFile {
    /// The defaults, as `default-profile.toml` documents them.
    fn default() -> ProfileFile {
        ProfileFile {
            model: "sim-model".to_owned(),
            ttft_ms: 50.0,
            tpot_ms: 10.0,
            sglang_tpot_ms: None,
            noise_cv: 0.0,
            seed: 0,
            startup_delay_ms: 0.0,
            wake_delay_ms: 0.0,
            memory_api: MemoryApi::Both,
            vram_dir: None,
            vram_bytes: 0,
            release_keeps_memory: false,
            retake_memory_after_ms: None,
            busy_after_release_ms: None,
            never_healthy: false,
            die_after_requests: None,
            eos_after_tokens: None,
            error_rate: 0.0,
            accuracy: 1.0,
            monokernel: false,
            log_file: None,
            max_concurrency: None,
            disaggregation: None,
        }
    }
}

impl TryFrom<ProfileFile> for Profile {
    type Error = ProfileError;

    fn try_from(file: ProfileFile) -> Result<Profile, ProfileError> {
        Ok(Profile {
            model: file.model,
            time_to_first_token: milliseconds("ttft-ms", file.ttft_ms)?,
            time_per_output_token: milliseconds("tpot-ms", file.tpot_ms)?,
            sglang_time_per_output_token: file
                .sglang_tpot_ms
                .map(|ms| milliseconds("sglang-tpot-ms", ms))
                .transpose()?,
            noise: bounded("noise-cv", file.noise_cv)?,
            seed: file.seed,
            startup_delay: milliseconds("startup-delay-ms", file.startup_delay_ms)?,
            wake_delay: milliseconds("wake-delay-ms", file.wake_delay_ms)?,
            memory_api: file.memory_api,
            vram_dir: file.vram_dir,
            vram_bytes: file.vram_bytes,
            release_keeps_memory: file.release_keeps_memory,
            retake_memory_after: file
                .retake_memory_after_ms
                .map(|ms| milliseconds("retake-memory-after-ms", ms))
                .transpose()?,
            busy_after_release: file
                .busy_after_release_ms
                .map(|ms| milliseconds("busy-after-release-ms", ms))
                .transpose()?,
            never_healthy: file.never_healthy,
            die_after_requests: file.die_after_requests,
            eos_after_tokens: file.eos_after_tokens,
            error_rate: bounded("error-rate", file.error_rate)?,
            accuracy: bounded("accuracy", file.accuracy)?,
            monokernel: file.monokernel,
            log_file: file.log_file,
            max_concurrency: file.max_concurrency,
            disaggregation: file.disaggregation,
        })
    }
}

pub(crate) fn milliseconds(key: &'static str, value: f64) -> Result<Duration, ProfileError> {
    let problem = |problem| ProfileError { key, problem };
    let value = NonNegative::check(value).map_err(problem)?;
    Duration::try_from_secs_f64(value / 1000.0).map_err(|_| problem(InvalidNumber::TooLong(value)))
}

/// The bounded number (a [`Probability`], a [`CoefficientOfVariation`]) profile key `key`
/// gives, or the error that names the key.
pub(crate) fn bounded<T: TryFrom<f64, Error = InvalidNumber>>(
    key: &'static str,
    value: f64,
) -> Result<T, ProfileError> {
    T::try_from(value).map_err(|problem| ProfileError { key, problem })
}
