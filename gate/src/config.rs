//! The gate's configuration: the defaults in `gate/default-config.toml`, overridden key by key
//! by the `[gate]` table of the repository's `prgate.toml` (read from the base side).
//!
//! A key the defaults do not have is an error that names it, so a typo never silently keeps a
//! default; so is a value of the wrong type or out of range. Bounded numbers are newtypes.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Why the gate's configuration was refused: the shape every config file's errors share, its
/// key written from the manifest's root (`gate.speed.max-loss`).
pub use prgate_scope::ConfigError;

/// The embedded defaults, with a comment for every key.
pub const DEFAULT_CONFIG: &str = include_str!("../default-config.toml");

/// What a finding does to the verdict.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    Pass,
    Warn,
    Fail,
}

/// A fraction in `[0, 1)`: a loss, a gain, a tolerance.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Fraction(f64);

/// An error rate in `(0, 0.5)`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct ErrorRate(f64);

/// A number that is not a [`Fraction`].
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("{value} is not a fraction in [0, 1) (write 2% as 0.02)")]
pub struct NotAFraction {
    pub value: f64,
}

/// A number that is not an [`ErrorRate`].
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("{value} is not an error rate in (0, 0.5)")]
pub struct NotAnErrorRate {
    pub value: f64,
}

impl TryFrom<f64> for Fraction {
    type Error = NotAFraction;
    fn try_from(value: f64) -> Result<Fraction, NotAFraction> {
        if (0.0..1.0).contains(&value) { Ok(Fraction(value)) } else { Err(NotAFraction { value }) }
    }
}

impl TryFrom<f64> for ErrorRate {
    type Error = NotAnErrorRate;
    fn try_from(value: f64) -> Result<ErrorRate, NotAnErrorRate> {
        if value > 0.0 && value < 0.5 {
            Ok(ErrorRate(value))
        } else {
            Err(NotAnErrorRate { value })
        }
    }
}

impl Fraction {
    pub fn get(self) -> f64 {
        self.0
    }
}

impl ErrorRate {
    pub fn get(self) -> f64 {
        self.0
    }
}

/// The most repeats of an accuracy benchmark a cap may ask for (the gate's default and a
/// recipe's `repeats`).
pub const MAX_ACCURACY_REPEATS: u32 = 64;

/// Every setting of the gate, checked.
#[derive(Debug, Clone)]
pub struct GateConfig {
    pub pre_existing_failure: Severity,
    pub missing_routing: Severity,
    pub speed: SequentialConfig,
    pub gain: GainConfig,
    pub accuracy_alpha: ErrorRate,
    /// P(pass | the PR is `accuracy_beta_at` tolerances below base), per benchmark.
    pub accuracy_beta: ErrorRate,
    /// The drop, in tolerances, that the pass side guards against.
    pub accuracy_beta_at: f64,
    /// The repeats a benchmark may take when base's recipe does not set its own cap.
    pub accuracy_repeats: u32,
    accuracy_tolerance: BTreeMap<String, Fraction>,
    pub kernel_max_regression: Fraction,
    pub missing_readme: Severity,
    pub not_run: Severity,
    pub title: TitleConfig,
    pub drift: DriftConfig,
}

/// The cumulative drift guard (`[drift]`, docs/history.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriftConfig {
    /// The largest chained TPOT loss allowed since the reference, a fraction.
    pub speed_budget: Fraction,
    /// The largest chained accuracy drop allowed, in tolerances of the benchmark.
    pub accuracy_budget: f64,
    /// The one-sided error rate of one cell's check.
    pub alpha: ErrorRate,
    /// How many contributing PRs an alarm names.
    pub top: usize,
}

/// A sequential test with an indifference zone `[low, high]` around a threshold.
#[derive(Debug, Clone, Copy)]
pub struct SequentialConfig {
    /// The threshold the rule is about (a 2% loss, a 5% gain).
    pub threshold: Fraction,
    /// The lower edge of the zone, `threshold - zone`: for speed, a loss this small should pass;
    /// for gain, a gain this small should not count. May be below zero.
    pub low: f64,
    /// The upper edge, `threshold + zone`: for speed, a loss this large should fail; for gain, a
    /// gain this large should count.
    pub high: f64,
    pub alpha: ErrorRate,
    pub beta: ErrorRate,
    /// The first look: pairs before a cell can be decided. Every pair from here to
    /// `max_pairs` is a look; the error rates are divided over the looks.
    pub min_pairs: usize,
    /// The last look: a cell still undecided at it is [`crate::speed::Answer::Undecided`].
    pub max_pairs: usize,
    /// The smallest run-to-run coefficient of variation assumed.
    pub min_cv: Fraction,
    /// A pair further than this many robust scales from the cell's median is an outlier.
    pub outlier_threshold: f64,
    /// The most pairs of a cell excluded as outliers (each re-measured).
    pub max_outliers: usize,
    /// The most degrees of freedom a node's stored calibration counts for.
    pub calibration_df: f64,
    /// The level of the F-test that the pairs' own spread is larger than base's noise
    /// predicts (the PR's runs are noisier): then the test uses the pairs' own variance.
    pub noise_level: ErrorRate,
    /// How many times base's run-to-run noise the PR's may be before a cell reports it.
    pub max_noise_growth: f64,
    /// The level of the two-sided F-test that the run's in-band A/A differences contradict
    /// the node's stored calibration: then the calibration is not used.
    pub stale_level: ErrorRate,
}

impl SequentialConfig {
    /// How many looks the test has: one after every pair from `min_pairs` to `max_pairs`.
    pub fn looks(&self) -> usize {
        self.max_pairs - self.min_pairs + 1
    }
}

/// The gain rule: which PR types need a gain, and its test.
#[derive(Debug, Clone)]
pub struct GainConfig {
    pub types: Vec<String>,
    pub test: SequentialConfig,
}

/// The title rule.
#[derive(Debug, Clone)]
pub struct TitleConfig {
    pub types: Vec<String>,
    pub unknown_type: Severity,
    pub malformed: Severity,
    pub scope_mismatch: Severity,
    pub other_scopes: Vec<String>,
}

impl GateConfig {
    /// The defaults alone.
    pub fn defaults() -> GateConfig {
        // The embedded defaults are checked by a test; they cannot fail here.
        GateConfig::with_overrides(None, "the built-in defaults")
            .unwrap_or_else(|error| unreachable!("the embedded defaults are valid: {error}"))
    }

    /// The defaults with a repository's `[gate]` table over them. `file` names the manifest in
    /// errors.
    pub fn with_overrides(
        overrides: Option<&toml::Table>,
        file: &str,
    ) -> Result<GateConfig, ConfigError> {
        let error = |key: &str, problem: String| ConfigError::key(file, &gate_key(key), problem);
        let mut merged: toml::Table = toml::from_str(DEFAULT_CONFIG)
            .map_err(|e| error("", format!("the built-in defaults: {e}")))?;
        if let Some(overrides) = overrides {
            merge(&mut merged, overrides, "").map_err(|(key, problem)| error(&key, problem))?;
        }
        let raw: RawConfig = serde_path_to_error::deserialize(toml::Value::Table(merged))
            .map_err(|e| error(&e.path().to_string(), e.inner().message().to_owned()))?;
        raw.check().map_err(|(key, problem)| error(&key, problem))
    }

    /// The tolerance of a benchmark (case-insensitive), or the default one.
    pub fn accuracy_tolerance(&self, benchmark: &str) -> Fraction {
        let key = benchmark.to_ascii_lowercase();
        self.accuracy_tolerance
            .get(&key)
            .or_else(|| self.accuracy_tolerance.get("default"))
            .copied()
            .unwrap_or(Fraction(0.02))
    }
}

/// Lays `overrides` over `base`, refusing keys and types the defaults do not have.
fn merge(
    base: &mut toml::Table,
    overrides: &toml::Table,
    prefix: &str,
) -> Result<(), (String, String)> {
    for (key, value) in overrides {
        let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        // Any benchmark may have a tolerance; benchmark names are not case-sensitive.
        let open_table = prefix == "accuracy.tolerance";
        let key = if open_table { &key.to_ascii_lowercase() } else { key };
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(value)) => {
                merge(inner, value, &path)?
            }
            (Some(toml::Value::Table(_)), _) => return Err((path, "must be a table".to_owned())),
            (Some(existing), value) => {
                let value = match (&*existing, value) {
                    (toml::Value::Float(_), toml::Value::Integer(int)) => {
                        toml::Value::Float(*int as f64)
                    }
                    _ => value.clone(),
                };
                if existing.type_str() != value.type_str() {
                    return Err((
                        path,
                        format!(
                            "must be {} {}, not {}",
                            article(existing.type_str()),
                            existing.type_str(),
                            value.type_str()
                        ),
                    ));
                }
                *existing = value;
            }
            (None, value) if open_table => {
                let value = match value {
                    toml::Value::Integer(int) => toml::Value::Float(*int as f64),
                    other => other.clone(),
                };
                base.insert(key.clone(), value);
            }
            (None, _) => {
                let known: Vec<&str> = base.keys().map(String::as_str).collect();
                return Err((path, format!("unknown key; expected one of {}", known.join(", "))));
            }
        }
    }
    Ok(())
}

fn gate_key(key: &str) -> String {
    if key.is_empty() { "gate".to_owned() } else { format!("gate.{key}") }
}

fn article(type_name: &str) -> &'static str {
    if type_name.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawConfig {
    tests: RawTests,
    routing: RawRouting,
    speed: RawSpeed,
    gain: RawGain,
    accuracy: RawAccuracy,
    kernel: RawKernel,
    doc: RawDoc,
    not_run: RawNotRun,
    title: RawTitle,
    drift: RawDrift,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawDrift {
    speed_budget: f64,
    accuracy_budget: f64,
    alpha: f64,
    top: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawTests {
    pre_existing_failure: Severity,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawRouting {
    missing: Severity,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawSpeed {
    max_loss: f64,
    zone: f64,
    alpha: f64,
    beta: f64,
    min_cv: f64,
    min_pairs: i64,
    max_pairs: i64,
    outlier_threshold: f64,
    max_outliers: i64,
    calibration_df: f64,
    noise_test_level: f64,
    max_noise_growth: f64,
    stale_calibration_level: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawGain {
    types: Vec<String>,
    min_gain: f64,
    zone: f64,
    alpha: f64,
    beta: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawAccuracy {
    alpha: f64,
    beta: f64,
    beta_at: f64,
    repeats: i64,
    tolerance: BTreeMap<String, f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawKernel {
    max_regression: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawDoc {
    missing_readme: Severity,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawNotRun {
    verdict: Severity,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawTitle {
    types: Vec<String>,
    unknown_type: Severity,
    malformed: Severity,
    scope_mismatch: Severity,
    other_scopes: Vec<String>,
}

type Checked<T> = Result<T, (String, String)>;

fn fraction(key: &str, value: f64) -> Checked<Fraction> {
    Fraction::try_from(value).map_err(|problem| (key.to_owned(), problem.to_string()))
}

fn error_rate(key: &str, value: f64) -> Checked<ErrorRate> {
    ErrorRate::try_from(value).map_err(|problem| (key.to_owned(), problem.to_string()))
}

/// The edges of an indifference zone of half-width `zone` around `threshold`.
fn zone(key: &str, threshold: Fraction, zone: f64) -> Checked<(f64, f64)> {
    let (low, high) = (threshold.get() - zone, threshold.get() + zone);
    if zone > 0.0 && low > -1.0 && high < 1.0 {
        Ok((low, high))
    } else {
        Err((
            key.to_owned(),
            format!(
                "{zone} is not a half-width in (0, 1) that keeps the zone within (-100%, 100%)"
            ),
        ))
    }
}

/// A key and what is wrong with its value.
fn invalid<T>(key: &str, problem: String) -> Checked<T> {
    Err((key.to_owned(), problem))
}

impl RawConfig {
    fn check(self) -> Checked<GateConfig> {
        let shared = self.speed.shared()?;
        let speed = &self.speed;
        let speed_test = shared.test(
            "speed",
            "max-loss",
            speed.max_loss,
            speed.zone,
            speed.alpha,
            speed.beta,
        )?;
        let gain = self.gain;
        let gain_test =
            shared.test("gain", "min-gain", gain.min_gain, gain.zone, gain.alpha, gain.beta)?;
        let drift = self.drift.check()?;
        let accuracy = self.accuracy.check()?;
        Ok(GateConfig {
            pre_existing_failure: self.tests.pre_existing_failure,
            missing_routing: self.routing.missing,
            speed: speed_test,
            gain: GainConfig { types: gain.types, test: gain_test },
            accuracy_alpha: accuracy.alpha,
            accuracy_beta: accuracy.beta,
            accuracy_beta_at: accuracy.beta_at,
            accuracy_repeats: accuracy.repeats,
            accuracy_tolerance: accuracy.tolerance,
            kernel_max_regression: fraction("kernel.max-regression", self.kernel.max_regression)?,
            missing_readme: self.doc.missing_readme,
            not_run: self.not_run.verdict,
            title: TitleConfig {
                types: self.title.types,
                unknown_type: self.title.unknown_type,
                malformed: self.title.malformed,
                scope_mismatch: self.title.scope_mismatch,
                other_scopes: self.title.other_scopes,
            },
            drift,
        })
    }
}

/// The settings of `[speed]` that the loss test and the gain test share.
struct SharedSequential {
    min_pairs: usize,
    max_pairs: usize,
    min_cv: Fraction,
    outlier_threshold: f64,
    max_outliers: usize,
    calibration_df: f64,
    noise_level: ErrorRate,
    max_noise_growth: f64,
    stale_level: ErrorRate,
}

impl RawSpeed {
    /// The pairs, the outlier rule, the calibration and the noise tests, checked.
    fn shared(&self) -> Checked<SharedSequential> {
        let pairs = |key: &str, value: i64| -> Checked<usize> {
            usize::try_from(value).ok().filter(|pairs| (2..=1000).contains(pairs)).ok_or_else(
                || (key.to_owned(), format!("{value} is not a number of pairs in 2..=1000")),
            )
        };
        let min_pairs = pairs("speed.min-pairs", self.min_pairs)?;
        let max_pairs = pairs("speed.max-pairs", self.max_pairs)?;
        if max_pairs < min_pairs {
            return invalid(
                "speed.max-pairs",
                format!("{max_pairs} is below speed.min-pairs ({min_pairs})"),
            );
        }
        let min_cv = fraction("speed.min-cv", self.min_cv)?;
        let outlier_threshold = self.outlier_threshold;
        if !(outlier_threshold.is_finite() && outlier_threshold >= 2.0) {
            return invalid(
                "speed.outlier-threshold",
                format!("{outlier_threshold} is not a number of robust scales of at least 2"),
            );
        }
        let Some(max_outliers) =
            usize::try_from(self.max_outliers).ok().filter(|outliers| *outliers <= 10)
        else {
            return invalid(
                "speed.max-outliers",
                format!("{} is not a number of pairs in 0..=10", self.max_outliers),
            );
        };
        let calibration_df = self.calibration_df;
        if !(calibration_df.is_finite() && (0.0..=1000.0).contains(&calibration_df)) {
            return invalid(
                "speed.calibration-df",
                format!("{calibration_df} is not a number of degrees of freedom in 0..=1000"),
            );
        }
        let noise_level = error_rate("speed.noise-test-level", self.noise_test_level)?;
        let stale_level =
            error_rate("speed.stale-calibration-level", self.stale_calibration_level)?;
        let max_noise_growth = self.max_noise_growth;
        if !(max_noise_growth.is_finite() && max_noise_growth > 0.0) {
            return invalid(
                "speed.max-noise-growth",
                format!("{max_noise_growth} is not a positive factor"),
            );
        }
        Ok(SharedSequential {
            min_pairs,
            max_pairs,
            min_cv,
            outlier_threshold,
            max_outliers,
            calibration_df,
            noise_level,
            max_noise_growth,
            stale_level,
        })
    }
}

impl SharedSequential {
    /// One sequential test of `section`: the loss test and the gain test differ only in their
    /// threshold and their section.
    fn test(
        &self,
        section: &str,
        threshold_key: &str,
        threshold: f64,
        zone_width: f64,
        alpha: f64,
        beta: f64,
    ) -> Checked<SequentialConfig> {
        let threshold = fraction(&format!("{section}.{threshold_key}"), threshold)?;
        let (low, high) = zone(&format!("{section}.zone"), threshold, zone_width)?;
        Ok(SequentialConfig {
            threshold,
            low,
            high,
            alpha: error_rate(&format!("{section}.alpha"), alpha)?,
            beta: error_rate(&format!("{section}.beta"), beta)?,
            min_pairs: self.min_pairs,
            max_pairs: self.max_pairs,
            min_cv: self.min_cv,
            outlier_threshold: self.outlier_threshold,
            max_outliers: self.max_outliers,
            calibration_df: self.calibration_df,
            noise_level: self.noise_level,
            max_noise_growth: self.max_noise_growth,
            stale_level: self.stale_level,
        })
    }
}

impl RawDrift {
    fn check(self) -> Checked<DriftConfig> {
        let speed_budget = fraction("drift.speed-budget", self.speed_budget)?;
        if speed_budget.get() <= 0.0 {
            return invalid(
                "drift.speed-budget",
                format!("{} is not a loss above 0 (write 3% as 0.03)", self.speed_budget),
            );
        }
        if !(self.accuracy_budget.is_finite() && self.accuracy_budget > 0.0) {
            return invalid(
                "drift.accuracy-budget",
                format!("{} is not a positive number of tolerances", self.accuracy_budget),
            );
        }
        let Some(top) = usize::try_from(self.top).ok().filter(|top| (1..=20).contains(top)) else {
            return invalid("drift.top", format!("{} is not a number of PRs in 1..=20", self.top));
        };
        Ok(DriftConfig {
            speed_budget,
            accuracy_budget: self.accuracy_budget,
            alpha: error_rate("drift.alpha", self.alpha)?,
            top,
        })
    }
}

/// The settings of `[accuracy]`, checked.
struct AccuracySettings {
    alpha: ErrorRate,
    beta: ErrorRate,
    beta_at: f64,
    repeats: u32,
    tolerance: BTreeMap<String, Fraction>,
}

impl RawAccuracy {
    fn check(self) -> Checked<AccuracySettings> {
        let mut tolerance = BTreeMap::new();
        for (benchmark, value) in self.tolerance {
            let key = format!("accuracy.tolerance.{benchmark}");
            tolerance.insert(benchmark.to_ascii_lowercase(), fraction(&key, value)?);
        }
        let beta_at = self.beta_at;
        if !(beta_at.is_finite() && beta_at > 1.0 && beta_at <= 10.0) {
            return invalid(
                "accuracy.beta-at",
                format!("{beta_at} is not a number of tolerances above 1 and at most 10"),
            );
        }
        let Some(repeats) = u32::try_from(self.repeats)
            .ok()
            .filter(|repeats| (1..=MAX_ACCURACY_REPEATS).contains(repeats))
        else {
            return invalid(
                "accuracy.repeats",
                format!(
                    "{} is not a number of repeats in 1..={MAX_ACCURACY_REPEATS}",
                    self.repeats
                ),
            );
        };
        Ok(AccuracySettings {
            alpha: error_rate("accuracy.alpha", self.alpha)?,
            beta: error_rate("accuracy.beta", self.beta)?,
            beta_at,
            repeats,
            tolerance,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(overrides: &str) -> String {
        let table: toml::Table = toml::from_str(overrides).expect("test TOML parses");
        match GateConfig::with_overrides(Some(&table), "prgate.toml") {
            Ok(config) => format!(
                "ok: max-loss {} zone [{}, {}] pairs {}..={} gsm8k {} mystery {}",
                config.speed.threshold.get(),
                config.speed.low,
                config.speed.high,
                config.speed.min_pairs,
                config.speed.max_pairs,
                config.accuracy_tolerance("GSM8K").get(),
                config.accuracy_tolerance("mystery").get(),
            ),
            Err(error) => format!("error: {error}"),
        }
    }

    #[test]
    fn the_embedded_defaults_are_valid_and_documented() {
        let config = GateConfig::defaults();
        let speed = &config.speed;
        // Every number the statistics use, pinned: bench/speed-rule.md measured these.
        assert_eq!(
            (speed.threshold.get(), speed.low, speed.high, speed.alpha.get(), speed.beta.get()),
            (0.02, 0.0, 0.04, 0.02, 0.05)
        );
        assert_eq!((speed.min_pairs, speed.max_pairs, speed.looks()), (3, 16, 14));
        assert_eq!(
            (speed.min_cv.get(), speed.outlier_threshold, speed.max_outliers, speed.calibration_df),
            (0.01, 6.0, 2, 10.0)
        );
        assert_eq!(
            (speed.noise_level.get(), speed.max_noise_growth, speed.stale_level.get()),
            (0.05, 1.5, 0.01)
        );
        let gain = &config.gain.test;
        assert_eq!((gain.threshold.get(), gain.alpha.get(), gain.beta.get()), (0.05, 0.05, 0.05));
        assert!((gain.low - 0.03).abs() < 1e-12 && (gain.high - 0.07).abs() < 1e-12);
        // bench/accuracy-rule.md measured these.
        assert_eq!(
            (
                config.accuracy_alpha.get(),
                config.accuracy_beta.get(),
                config.accuracy_beta_at,
                config.accuracy_repeats
            ),
            (0.02, 0.025, 2.0, 20)
        );
        // bench/drift-guard.md measured these.
        let drift = &config.drift;
        assert_eq!(
            (drift.speed_budget.get(), drift.accuracy_budget, drift.alpha.get(), drift.top),
            (0.03, 1.0, 0.05, 3)
        );
        // Every key has a comment line somewhere above it in its table.
        assert!(DEFAULT_CONFIG.lines().filter(|line| line.starts_with('#')).count() > 20);
    }

    #[test]
    fn overrides_replace_defaults_key_by_key_and_bad_ones_are_named() {
        let cases = [
            ("", "ok: max-loss 0.02 zone [0, 0.04] pairs 3..=16 gsm8k 0.015 mystery 0.02"),
            (
                "[speed]\nmax-loss = 0.03\nzone = 0.03",
                "ok: max-loss 0.03 zone [0, 0.06] pairs 3..=16 gsm8k 0.015 mystery 0.02",
            ),
            (
                "[accuracy.tolerance]\nmystery = 0.1\nGSM8K = 0",
                "ok: max-loss 0.02 zone [0, 0.04] pairs 3..=16 gsm8k 0 mystery 0.1",
            ),
            (
                "[speed]\nmax-los = 0.03",
                "error: prgate.toml: gate.speed.max-los: unknown key; expected one of alpha, beta, calibration-df, max-loss, max-noise-growth, max-outliers, max-pairs, min-cv, min-pairs, noise-test-level, outlier-threshold, stale-calibration-level, zone",
            ),
            (
                "[speed]\noutlier-threshold = 1.5",
                "error: prgate.toml: gate.speed.outlier-threshold: 1.5 is not a number of robust scales of at least 2",
            ),
            (
                "[speed]\nmax-noise-growth = 0",
                "error: prgate.toml: gate.speed.max-noise-growth: 0 is not a positive factor",
            ),
            (
                "[speed]\nstale-calibration-level = 0",
                "error: prgate.toml: gate.speed.stale-calibration-level: 0 is not an error rate in (0, 0.5)",
            ),
            (
                "[speed]\nmax-outliers = 11",
                "error: prgate.toml: gate.speed.max-outliers: 11 is not a number of pairs in 0..=10",
            ),
            (
                "[sped]\nmax-loss = 0.03",
                "error: prgate.toml: gate.sped: unknown key; expected one of accuracy, doc, drift, gain, kernel, not-run, routing, speed, tests, title",
            ),
            (
                "[speed]\nmax-loss = \"2%\"",
                "error: prgate.toml: gate.speed.max-loss: must be a float, not string",
            ),
            (
                "[speed]\nmax-loss = 2",
                "error: prgate.toml: gate.speed.max-loss: 2 is not a fraction in [0, 1) (write 2% as 0.02)",
            ),
            (
                "[speed]\nzone = 0",
                "error: prgate.toml: gate.speed.zone: 0 is not a half-width in (0, 1) that keeps the zone within (-100%, 100%)",
            ),
            (
                "[speed]\nalpha = 0.7",
                "error: prgate.toml: gate.speed.alpha: 0.7 is not an error rate in (0, 0.5)",
            ),
            (
                "[speed]\nmin-pairs = 17",
                "error: prgate.toml: gate.speed.max-pairs: 16 is below speed.min-pairs (17)",
            ),
            (
                "[tests]\npre-existing-failure = \"maybe\"",
                "error: prgate.toml: gate.tests.pre-existing-failure: unknown variant `maybe`, expected one of `pass`, `warn`, `fail`",
            ),
            ("speed = 1", "error: prgate.toml: gate.speed: must be a table"),
            (
                "[drift]\nspeed-budget = 0",
                "error: prgate.toml: gate.drift.speed-budget: 0 is not a loss above 0 (write 3% as 0.03)",
            ),
            (
                "[drift]\naccuracy-budget = -1",
                "error: prgate.toml: gate.drift.accuracy-budget: -1 is not a positive number of tolerances",
            ),
            (
                "[drift]\ntop = 0",
                "error: prgate.toml: gate.drift.top: 0 is not a number of PRs in 1..=20",
            ),
            (
                "[drift]\nalpha = 0.5",
                "error: prgate.toml: gate.drift.alpha: 0.5 is not an error rate in (0, 0.5)",
            ),
        ];
        for (overrides, expected) in cases {
            assert_eq!(check(overrides), expected, "overrides: {overrides}");
        }
    }
}
