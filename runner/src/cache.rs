//! What outlives a run on a node, under the profile's `cache-dir`: the cache of base-side
//! accuracy results, and the base-vs-base speed noise the gate calibrates with.
//!
//! Both are written only from base-side measurements, by prgate itself (never by a command
//! from the PR), so a PR cannot plant a result that a later run would trust. Each entry is one
//! JSON file, written to a temporary name and renamed, named by the SHA-256 of its key
//! ([`Key::hex`]); the key itself is stored in the file and compared on every read, so that a collision
//! or a hand-edited file is a miss, never a wrong hit. A file that cannot be read or parsed is
//! a miss too: the cache only ever saves time.
//!
//! # Accuracy (`<cache-dir>/accuracy/<hash>.json`)
//!
//! `{"key": AccuracyKey, "outcome": Outcome}`. The key is everything that produced the
//! number: the image digest, the base commit, the model, the benchmark, and the recipe parts
//! that matter (checkpoint, tensor parallelism, the server command and monokernel flag, the
//! evaluator's settings, and the hash of the dataset's bytes for the built-in evaluator). A
//! node profile without a pinned image digest caches nothing: a tag can move.
//!
//! # Speed noise (`<cache-dir>/speed-noise/<hash>.json`)
//!
//! `{"key": NoiseKey, "log_differences": [f64]}`: in-band A/A differences of one cell (same
//! node, image, model, server, load and pairing order): the log-ratio of the two base runs
//! that bracket each PR run, the last [`NOISE_KEPT`] of them. Once there are
//! [`NOISE_MIN_SAMPLES`], their robust variance (`prgate_gate::stats::robust_log_ratio_variance`:
//! median/MAD, differences more than 5 scales out rejected) and their count are the cell's
//! `speed-noise` calibration, which the gate pools with the run's own pairs at a capped number
//! of degrees of freedom. A run without a calibration measures its own noise the same way. When
//! the gate finds a cell's calibration contradicted by the run's own differences
//! (`CellJudgement::calibration_stale`: a stale record), the runner starts the record afresh
//! from them ([`Cache::replace_noise`]) instead of adding them to it.

use std::path::{Path, PathBuf};

use prgate_gate::evidence::Outcome;
use prgate_gate::speed::Calibration;
use prgate_gate::stats::robust_log_ratio_variance;
use serde::{Deserialize, Serialize};

use crate::key::Key;

/// How many base-vs-base differences a noise entry keeps (the newest).
pub const NOISE_KEPT: usize = 64;
/// How many differences a noise entry needs before it is used.
pub const NOISE_MIN_SAMPLES: usize = 8;

/// Everything that produced a base-side accuracy result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccuracyKey {
    pub image_digest: String,
    pub base_commit: String,
    pub model: String,
    pub benchmark: String,
    /// The recipe's parts that matter, as one canonical text.
    pub recipe_parts: String,
    /// The repeat's seed: each repeat of a benchmark is its own entry. `None`: an unseeded run
    /// (an entry written before repeats, never taken for a seeded one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// Everything that makes two base runs of a cell comparable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoiseKey {
    pub node: String,
    pub image: String,
    pub model: String,
    pub concurrency: u32,
    /// The recipe's parts that matter (server, load), as one canonical text.
    pub recipe_parts: String,
}

#[derive(Serialize, Deserialize)]
struct AccuracyEntry {
    key: AccuracyKey,
    outcome: Outcome,
}

#[derive(Serialize, Deserialize)]
struct NoiseEntry {
    key: NoiseKey,
    log_differences: Vec<f64>,
}

/// A node's cache directory.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    pub fn new(root: &Path) -> Cache {
        Cache { root: root.to_path_buf() }
    }

    /// The cached base result for `key`, if any.
    pub fn accuracy(&self, key: &AccuracyKey) -> Option<Outcome> {
        let entry: AccuracyEntry = read(&self.accuracy_path(key))?;
        (entry.key == *key).then_some(entry.outcome)
    }

    /// Stores a base-side result; only an `accuracy` outcome is stored.
    pub fn store_accuracy(&self, key: &AccuracyKey, outcome: &Outcome) -> std::io::Result<()> {
        if !matches!(outcome, Outcome::Accuracy { .. }) {
            return Ok(());
        }
        let entry = AccuracyEntry { key: key.clone(), outcome: outcome.clone() };
        write(&self.accuracy_path(key), &entry)
    }

    /// The calibration of `key` (robust variance of base-vs-base log-ratios, and how many
    /// differences it is from), once there are enough differences.
    pub fn noise(&self, key: &NoiseKey) -> Option<Calibration> {
        let entry: NoiseEntry = read(&self.noise_path(key))?;
        if entry.key != *key || entry.log_differences.len() < NOISE_MIN_SAMPLES {
            return None;
        }
        let variance = robust_log_ratio_variance(&entry.log_differences)?;
        let samples = u32::try_from(entry.log_differences.len()).unwrap_or(u32::MAX);
        Some(Calibration { log_ratio_variance: variance, samples })
    }

    /// Adds base-vs-base log differences (`ln(after / before)` of bracketing base runs).
    pub fn add_noise(&self, key: &NoiseKey, log_differences: &[f64]) -> std::io::Result<()> {
        let differences: Vec<f64> =
            log_differences.iter().copied().filter(|d| d.is_finite()).collect();
        if differences.is_empty() {
            return Ok(());
        }
        let path = self.noise_path(key);
        let mut entry = read::<NoiseEntry>(&path)
            .filter(|entry| entry.key == *key)
            .unwrap_or(NoiseEntry { key: key.clone(), log_differences: Vec::new() });
        entry.log_differences.extend(differences);
        let excess = entry.log_differences.len().saturating_sub(NOISE_KEPT);
        entry.log_differences.drain(..excess);
        write(&path, &entry)
    }

    /// Starts the record of `key` afresh from `log_differences`: the gate found the stored
    /// calibration contradicted by a run's own differences (stale), so the older ones go.
    pub fn replace_noise(&self, key: &NoiseKey, log_differences: &[f64]) -> std::io::Result<()> {
        let mut differences: Vec<f64> =
            log_differences.iter().copied().filter(|d| d.is_finite()).collect();
        let excess = differences.len().saturating_sub(NOISE_KEPT);
        differences.drain(..excess);
        let entry = NoiseEntry { key: key.clone(), log_differences: differences };
        write(&self.noise_path(key), &entry)
    }

    fn accuracy_path(&self, key: &AccuracyKey) -> PathBuf {
        self.root.join("accuracy").join(file_name(key))
    }

    fn noise_path(&self, key: &NoiseKey) -> PathBuf {
        self.root.join("speed-noise").join(file_name(key))
    }
}

fn file_name(key: &impl Serialize) -> String {
    let text = serde_json::to_vec(key).unwrap_or_default();
    format!("{}.json", Key::of(&text).hex())
}

fn read<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn write(path: &Path, value: &impl Serialize) -> std::io::Result<()> {
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
    let bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    crate::results::write_atomically(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accuracy_key() -> AccuracyKey {
        AccuracyKey {
            image_digest: "sha256:ab".to_owned(),
            base_commit: "c0ffee".to_owned(),
            model: "kimi_k3".to_owned(),
            benchmark: "gsm8k".to_owned(),
            recipe_parts: "builtin".to_owned(),
            seed: Some(0),
        }
    }

    fn outcome() -> Outcome {
        Outcome::Accuracy {
            benchmark: "gsm8k".to_owned(),
            questions: 10,
            correct: 9,
            per_question: None,
            cached: false,
            repeat: None,
        }
    }

    #[test]
    fn an_accuracy_entry_is_found_only_under_its_whole_key() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let cache = Cache::new(dir.path());
        let key = accuracy_key();
        assert_eq!(cache.accuracy(&key), None);
        cache.store_accuracy(&key, &outcome()).expect("the entry is written");
        assert_eq!(cache.accuracy(&key), Some(outcome()));
        for other in [
            AccuracyKey { base_commit: "beef".to_owned(), ..key.clone() },
            AccuracyKey { image_digest: "sha256:cd".to_owned(), ..key.clone() },
            AccuracyKey { recipe_parts: "limit 5".to_owned(), ..key.clone() },
            // Each repeat's seed is its own entry; an unseeded one is never a seeded one's.
            AccuracyKey { seed: Some(1), ..key.clone() },
            AccuracyKey { seed: None, ..key.clone() },
        ] {
            assert_eq!(cache.accuracy(&other), None, "{other:?}");
        }
    }

    #[test]
    fn the_repeats_of_one_benchmark_are_cached_each_under_its_seed() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let cache = Cache::new(dir.path());
        let repeat = |seed: u64| AccuracyKey { seed: Some(seed), ..accuracy_key() };
        let scored = |correct: u64| Outcome::Accuracy {
            benchmark: "gsm8k".to_owned(),
            questions: 10,
            correct,
            per_question: None,
            cached: false,
            repeat: None,
        };
        for seed in 0..3 {
            cache.store_accuracy(&repeat(seed), &scored(7 + seed)).expect("the entry is written");
        }
        for seed in 0..3 {
            assert_eq!(cache.accuracy(&repeat(seed)), Some(scored(7 + seed)), "seed {seed}");
        }
        assert_eq!(cache.accuracy(&repeat(3)), None);
        // An entry written before seeds (no `seed` in its key) still reads as the unseeded one.
        let unseeded = AccuracyKey { seed: None, ..accuracy_key() };
        let text = serde_json::to_string(&unseeded).expect("serializes");
        assert!(!text.contains("seed"), "{text}");
    }

    #[test]
    fn a_not_run_outcome_is_never_cached_and_a_broken_file_is_a_miss() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let cache = Cache::new(dir.path());
        let key = accuracy_key();
        let not_run = Outcome::NotRun {
            reason: prgate_gate::evidence::NotRunReason::Crash,
            detail: "x".to_owned(),
            subject: None,
            failed_on: None,
        };
        cache.store_accuracy(&key, &not_run).expect("the entry is written");
        assert_eq!(cache.accuracy(&key), None);
        std::fs::create_dir_all(dir.path().join("accuracy")).expect("the folder is made");
        std::fs::write(cache.accuracy_path(&key), "{not json").expect("the file is written");
        assert_eq!(cache.accuracy(&key), None);
    }

    #[test]
    fn an_entry_of_the_older_hash_naming_is_a_miss_and_is_written_again() {
        // Before the SHA-256 keys, an entry was named by 16 hex digits of FNV-1a; such a file,
        // even holding this very key, is never read: a miss, not an error.
        let dir = tempfile::tempdir().expect("a temporary directory");
        let cache = Cache::new(dir.path());
        let key = accuracy_key();
        let entry = serde_json::json!({ "key": key, "outcome": outcome() });
        std::fs::create_dir_all(dir.path().join("accuracy")).expect("the folder is made");
        std::fs::write(dir.path().join("accuracy/cbf29ce484222325.json"), entry.to_string())
            .expect("the old file is written");
        assert_eq!(cache.accuracy(&key), None);
        cache.store_accuracy(&key, &outcome()).expect("the entry is written");
        assert_eq!(cache.accuracy(&key), Some(outcome()));
        let name = cache.accuracy_path(&key);
        let stem = name.file_stem().and_then(|stem| stem.to_str()).expect("a UTF-8 name");
        assert_eq!(stem.len(), 64, "{stem}");
    }

    #[test]
    fn noise_needs_enough_differences_is_robust_and_keeps_the_newest() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let cache = Cache::new(dir.path());
        let key = NoiseKey {
            node: "n".to_owned(),
            image: "i".to_owned(),
            model: "m".to_owned(),
            concurrency: 4,
            recipe_parts: "r".to_owned(),
        };
        // Differences of ±ln(1.02), alternating: the MAD about the median 0 is ln(1.02).
        let step = (1.02f64).ln();
        let differences: Vec<f64> = (0..4).map(|i| if i % 2 == 0 { step } else { -step }).collect();
        cache.add_noise(&key, &differences).expect("the noise is written");
        assert_eq!(cache.noise(&key), None, "4 differences are not enough");
        cache.add_noise(&key, &differences).expect("the noise is written");
        let calibration = cache.noise(&key).expect("enough differences");
        let expect = (1.4826 * step).powi(2);
        assert!((calibration.log_ratio_variance - expect).abs() < 1e-12, "{calibration:?}");
        assert_eq!(calibration.samples, 8);
        // One 32%-fast run is rejected: the calibration does not move.
        cache.add_noise(&key, &[(0.68f64).ln()]).expect("the noise is written");
        let with_outlier = cache.noise(&key).expect("enough differences");
        assert!(
            (with_outlier.log_ratio_variance - expect).abs() < 1e-12,
            "{with_outlier:?} against {expect}"
        );
        assert_eq!(with_outlier.samples, 9);
        for _ in 0..40 {
            cache.add_noise(&key, &differences).expect("the noise is written");
        }
        let entry: NoiseEntry = read(&cache.noise_path(&key)).expect("the entry reads");
        assert_eq!(entry.log_differences.len(), NOISE_KEPT);
        // Another key (another concurrency) is another calibration.
        assert_eq!(cache.noise(&NoiseKey { concurrency: 8, ..key.clone() }), None);
        // A stale record starts afresh from the run's differences: too few to be used yet,
        // then the new noise alone.
        cache.replace_noise(&key, &[0.05, -0.05, 0.05]).expect("the noise is written");
        assert_eq!(cache.noise(&key), None, "3 differences are not enough");
        let noisy: Vec<f64> = (0..8).map(|i| if i % 2 == 0 { 0.05 } else { -0.05 }).collect();
        cache.replace_noise(&key, &noisy).expect("the noise is written");
        let fresh = cache.noise(&key).expect("enough differences");
        assert_eq!(fresh.samples, 8);
        assert!((fresh.log_ratio_variance - (1.4826f64 * 0.05).powi(2)).abs() < 1e-12);
    }
}
