//! Evidence: what the runner measured on the GPU nodes, one record per finished step.
//!
//! # The JSON format (`schema_version` 1)
//!
//! The runner writes one file per finished step (atomically, so a killed run loses nothing and
//! a rerun resumes) under a results directory; the gate reads every `*.json` file there. Each
//! file is one [`Evidence`] record:
//!
//! ```json
//! {
//!   "schema_version": 1,
//!   "model": "kimi_k31",              // null for the common checks
//!   "check": "speed",                 // unit-tests, kernel-tests, serving-tests, common-tests,
//!                                     // routing, accuracy, kernel-timing, speed
//!   "side": "both",                   // base, pr, or both (a speed pair)
//!   "provenance": { "node": "mi355x-1", "image_digest": "sha256:...", "base_commit": "...",
//!                   "pr_commit": "...", "recipe_hash": "..." },
//!   "outcome": { "kind": "speed-pair", "concurrency": 64, "index": 0, "covered": true,
//!                "base_tpot_ms": 21.4, "pr_tpot_ms": 20.9, "first": "base" }
//! }
//! ```
//!
//! `provenance.reused`, when present, is `{"run": "..."}`: the record was measured by an
//! earlier run of the same PR commit and base (that run's name: its workflow run's page or its
//! results directory) and taken over unchanged, because every input of its step was the same
//! (docs/rerun.md). It is absent on what this run measured; added in place, so readers that do
//! not know it judge the record as they would have.
//!
//! The outcomes, by `kind`:
//! - `tests`: `results` [{`id`, `outcome` (`passed`, `failed`, `skipped`, `error`),
//!   `message`, and `flaky: true` for a test that passed only on a rerun (absent otherwise;
//!   added in place, as readers ignore fields they do not know)}]: one per test, one record
//!   per suite and side;
//! - `routing`: `routed` (whether the server logged monokernel routing) and `line` (the line
//!   seen, when one was);
//! - `accuracy`: `benchmark`, `questions`, `correct`, `per_question` ([{`id`, `correct`}] when
//!   known, so base and PR can be paired), `cached` (a base result taken from the cache), and
//!   `repeat` ({`index`, `seed`, `cap`, `family`}; added in place, optional): which repeat of
//!   the benchmark the record is, the seed it ran with, the cap of repeats base's recipe set
//!   (the looks the gate spends its error rates over) and the benchmarks the run judges
//!   together. One record per repeat and side; a record without `repeat` is repeat 0 of a cap
//!   of 1 (docs/gate.md, "Accuracy");
//! - `kernel-timing`: `kernels` [{`name`, `samples_us`}]: the timing script's samples per
//!   kernel, on one side;
//! - `speed-pair`: one base run and one PR run at a `concurrency`, the `index` of the pair in
//!   the order run, whether the monokernels `covered` that concurrency, each run's median TPOT
//!   (`base_tpot_ms`, `pr_tpot_ms`), which side ran `first`, and `family`: how many covered
//!   cells the run judges together, fixed before it starts (the gate divides alpha over them;
//!   without it, over the covered cells the evidence holds, which may grow as evidence comes),
//!   and, for a bracketed pair (base, PR, base), `base_runs_ms`: its two base runs in order,
//!   whose geometric mean is `base_tpot_ms` and whose ratio is an in-band A/A difference (added
//!   in place, optional: readers that do not know it see the pair's base);
//! - `speed-noise`: the node's stored calibration of a cell: the variance of the log-ratio of
//!   two base runs at a `concurrency` (`log_ratio_variance`, a robust median/MAD estimate) and
//!   `samples`, the base-vs-base differences behind it (optional; without it, 8);
//! - `not-run`: the check could not run: `reason`, `detail`, `subject` when only a part of the
//!   check could not run (a benchmark's name, `concurrency-C` for a speed cell), and `failed_on`
//!   (`base` or `pr`) when a step of both sides broke on one of them. The reasons, by what they
//!   mean for the verdict ([`NotRunKind`], docs/gate.md "Not run"):
//!   - a coverage gap, author-provided: `no-checkpoint`, `hardware-absent`, `no-recipe` (none on
//!     either side), `gated-dataset`;
//!   - broken by what it runs, a failure on the PR side: `timeout` (its wall-clock limit),
//!     `stalled` (no progress for its stall limit: no new output in its log, no file written
//!     in its output folder; added in place, an older gate reads it as `other`), `crash`,
//!     `recipe-removed`, `recipe-invalid`, `no-result`;
//!   - the node cannot judge, the run ends in `error`: `harness`, `run-time-limit`, `node`,
//!     `no-evidence`, `base-recipe-invalid` (base's recipe of a model base has, or of the
//!     common checks, is there but not valid; added in place, an older gate reads it as
//!     `other`), `base-moved` (not started: the judging files moved on the base branch, so the
//!     rule `base-moved` fails the PR; added in place), `other` (and any reason this gate does
//!     not know);
//!   - `nothing-to-check`: the recipe asks nothing of the check.
//!
//! A step is identified by its model, check, side and part (the benchmark of an accuracy
//! record, with its repeat's index when it has one, or a not-run's subject, the concurrency and index of a speed pair, the concurrency of
//! a noise record); two records of one step are an error, since a rerun replaces its file.
//!
//! Readers ignore fields they do not know, and read a `not-run` reason they do not know as
//! `other`; a field is never removed or changed in meaning, and no new outcome `kind` added,
//! without raising `schema_version`. The runner records provenance as it knows it; the gate
//! refuses records whose PR commit is not the plan's head, whose base commit is neither its
//! merge-base nor its base, or whose node, image or recipe differs from another record of the
//! same model's.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The version of the evidence format this gate reads and the runner writes.
pub const SCHEMA_VERSION: u32 = 1;

/// One finished step of one check of one model (or of the common checks), on one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    pub schema_version: u32,
    /// The model, or `None` for the common checks.
    pub model: Option<String>,
    pub check: Check,
    pub side: Side,
    #[serde(default)]
    pub provenance: Provenance,
    pub outcome: Outcome,
}

/// The planned checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    UnitTests,
    KernelTests,
    ServingTests,
    CommonTests,
    Routing,
    Accuracy,
    KernelTiming,
    Speed,
}

/// Which install a step ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    Base,
    Pr,
    /// A speed pair: one run of each.
    Both,
}

impl Side {
    /// The side as the evidence's JSON spells it (its serde name), for file names and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Base => "base",
            Side::Pr => "pr",
            Side::Both => "both",
        }
    }
}

/// What ran: where, with which image, commits and recipe.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    pub node: Option<String>,
    pub image_digest: Option<String>,
    pub base_commit: Option<String>,
    pub pr_commit: Option<String>,
    pub recipe_hash: Option<String>,
    /// The record was measured by an earlier run of the same PR commit and base, and taken
    /// over unchanged by this one (re-running only what is missing); absent when this run
    /// measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused: Option<Reused>,
}

/// Where a reused record was measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reused {
    /// The run that measured it, as that run named itself (its workflow run's page, or its
    /// results directory).
    pub run: String,
}

/// What a step measured, or why it could not run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Outcome {
    Tests {
        results: Vec<TestResult>,
    },
    Routing {
        routed: bool,
        line: Option<String>,
    },
    Accuracy {
        benchmark: String,
        questions: u64,
        correct: u64,
        per_question: Option<Vec<QuestionResult>>,
        #[serde(default)]
        cached: bool,
        /// Which repeat of the benchmark this is, with its seed; `None`: the benchmark's one
        /// run, unseeded (a record written before repeats, read as repeat 0 of a cap of 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repeat: Option<Repeat>,
    },
    KernelTiming {
        kernels: Vec<KernelSamples>,
    },
    SpeedPair {
        concurrency: u32,
        index: u32,
        covered: bool,
        base_tpot_ms: f64,
        pr_tpot_ms: f64,
        first: Side,
        /// How many covered cells (all models' covered concurrencies) the run judges together,
        /// fixed before it starts: the error rate is divided over them.
        #[serde(default)]
        family: Option<u32>,
        /// A bracketed pair's two base runs, before and after its PR run; `base_tpot_ms` is
        /// their geometric mean. `None`: one base run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base_runs_ms: Option<[f64; 2]>,
    },
    SpeedNoise {
        concurrency: u32,
        log_ratio_variance: f64,
        /// The base-vs-base differences behind the variance (its degrees of freedom follow).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        samples: Option<u32>,
    },
    NotRun {
        reason: NotRunReason,
        detail: String,
        /// What exactly could not run, when the check has parts (a benchmark's name).
        #[serde(default)]
        subject: Option<String>,
        /// The side a step of both sides (a speed cell) broke on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed_on: Option<Side>,
    },
}

/// One repeat of an accuracy benchmark: its index (0, 1, ...), the seed it ran with (the
/// runner's is the index), the cap of repeats base's recipe sets, and how many benchmarks the
/// run judges together (fixed before it starts; the gate divides alpha over them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repeat {
    pub index: u32,
    pub seed: u64,
    pub cap: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<u32>,
}

/// One test's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestResult {
    pub id: String,
    pub outcome: TestOutcome,
    pub message: Option<String>,
    /// The test passed, but only on a rerun (pytest-rerunfailures): it failed at least once
    /// first. Written only when true; a record without it is not flaky.
    #[serde(default, skip_serializing_if = "is_false")]
    pub flaky: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// How a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TestOutcome {
    Passed,
    Failed,
    Skipped,
    Error,
}

/// Whether one question was answered right.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuestionResult {
    pub id: String,
    pub correct: bool,
}

/// The timing samples of one kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelSamples {
    pub name: String,
    pub samples_us: Vec<f64>,
}

/// Why a check could not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NotRunReason {
    NoCheckpoint,
    HardwareAbsent,
    NoRecipe,
    GatedDataset,
    /// The step ran past its wall-clock limit.
    Timeout,
    /// The step made no progress (no new output, no file written) for its stall limit and was
    /// stopped before its wall-clock limit.
    Stalled,
    Crash,
    /// The PR removed a recipe the base side has.
    RecipeRemoved,
    /// The PR's recipe does not parse or is not valid.
    RecipeInvalid,
    /// Base's recipe of a model that exists on base (or of the common checks) is there but not
    /// valid: nothing holds the PR to what base measures, so the check cannot be judged.
    BaseRecipeInvalid,
    /// The command ran but left no result to read (no JUnit, no metrics, no timings).
    NoResult,
    /// Not started: files that judge the PR changed on the base branch since it branched
    /// ([`crate::base_side::BaseMoved`]), so the rule `base-moved` fails it whatever it measures.
    BaseMoved,
    /// The recipe asks nothing of this check (no tests selected, no timing scripts, no sweep).
    NothingToCheck,
    /// A harness prgate needs could not start (pytest missing on the node or in the image).
    Harness,
    /// The run's own time limit passed before the step could run.
    RunTimeLimit,
    /// The node could not run it (a preflight finding, a lost cluster job).
    Node,
    /// The run ended without recording the step.
    NoEvidence,
    /// Any other reason, and any reason a newer runner writes that this gate does not know.
    #[serde(other)]
    Other,
}

/// What a not-run record means for the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NotRunKind {
    /// Nothing these nodes can do about it (no checkpoint, hardware, recipe on either side, or
    /// token): a warning, and the author provides the evidence.
    CoverageGap,
    /// The step could not run because of what it runs (a crash, a timeout, a server never
    /// healthy, no result, a removed or broken recipe): on the PR side, a failure.
    Broken,
    /// The node could not judge it (a harness that cannot start, the run's time limit, a lost
    /// job, no evidence at all, a reason this gate does not know): the run ends in `error`.
    CannotJudge,
    /// The recipe asks nothing of it.
    NothingToCheck,
}

impl NotRunReason {
    /// The reason in words.
    pub fn describe(self) -> &'static str {
        match self {
            NotRunReason::NoCheckpoint => "no checkpoint on these nodes",
            NotRunReason::HardwareAbsent => "the hardware it needs is not on these nodes",
            NotRunReason::NoRecipe => "no serving recipe",
            NotRunReason::GatedDataset => "a gated dataset and no token on the runner",
            NotRunReason::Timeout => "timed out",
            NotRunReason::Stalled => "made no progress and was stopped",
            NotRunReason::Crash => "crashed",
            NotRunReason::RecipeRemoved => "the PR removed its recipe",
            NotRunReason::RecipeInvalid => "the PR's recipe is not valid",
            NotRunReason::BaseRecipeInvalid => "base's recipe is not valid",
            NotRunReason::NoResult => "left no result",
            NotRunReason::BaseMoved => "not started: the base branch moved; update the branch",
            NotRunReason::NothingToCheck => "nothing to check",
            NotRunReason::Harness => "the test harness could not start on the node",
            NotRunReason::RunTimeLimit => "the run's time limit passed first",
            NotRunReason::Node => "the node could not run it",
            NotRunReason::NoEvidence => "the run ended without recording it",
            NotRunReason::Other => "could not run",
        }
    }

    /// What the reason means for the verdict, before the other side is looked at.
    pub fn kind(self) -> NotRunKind {
        match self {
            NotRunReason::NoCheckpoint
            | NotRunReason::HardwareAbsent
            | NotRunReason::NoRecipe
            | NotRunReason::GatedDataset => NotRunKind::CoverageGap,
            NotRunReason::Timeout
            | NotRunReason::Stalled
            | NotRunReason::Crash
            | NotRunReason::RecipeRemoved
            | NotRunReason::RecipeInvalid
            | NotRunReason::NoResult => NotRunKind::Broken,
            NotRunReason::NothingToCheck => NotRunKind::NothingToCheck,
            NotRunReason::Harness
            | NotRunReason::RunTimeLimit
            | NotRunReason::Node
            | NotRunReason::NoEvidence
            | NotRunReason::BaseRecipeInvalid
            | NotRunReason::BaseMoved
            | NotRunReason::Other => NotRunKind::CannotJudge,
        }
    }
}

impl Check {
    /// The check in words, for tables.
    pub fn describe(self) -> &'static str {
        match self {
            Check::UnitTests => "unit tests",
            Check::KernelTests => "kernel tests",
            Check::ServingTests => "serving tests",
            Check::CommonTests => "common tests",
            Check::Routing => "monokernel routing",
            Check::Accuracy => "accuracy",
            Check::KernelTiming => "kernel timing",
            Check::Speed => "E2E speed",
        }
    }
}

/// Why a set of evidence records cannot be judged. `record` is the index of the offending
/// record in the order given, so the caller can name its file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem}")]
pub struct EvidenceError {
    pub record: usize,
    pub problem: String,
}

/// Checks records for what the gate cannot judge: an unknown schema version, an outcome that
/// does not fit its check or side, numbers that are not positive and finite, two records of
/// the same speed pair, counts that do not add up.
pub fn validate(records: &[Evidence]) -> Result<(), EvidenceError> {
    let mut steps = BTreeSet::new();
    for (index, record) in records.iter().enumerate() {
        check_shape(index, record)?;
        check_numbers(index, &record.outcome)?;
        let step = (record.model.clone(), record.check, record.side, step_part(&record.outcome));
        if !steps.insert(step) {
            let part = step_part(&record.outcome);
            let part = if part.is_empty() { String::new() } else { format!(" ({part})") };
            return Err(EvidenceError {
                record: index,
                problem: format!(
                    "{} of {} on the {:?} side{part} appears twice",
                    record.check.describe(),
                    record.model.as_deref().unwrap_or("the common checks"),
                    record.side
                ),
            });
        }
    }
    Ok(())
}

/// The record's schema version, and whether its outcome fits its check and side and its model
/// its check.
fn check_shape(index: usize, record: &Evidence) -> Result<(), EvidenceError> {
    let fail = |problem: String| Err(EvidenceError { record: index, problem });
    if record.schema_version != SCHEMA_VERSION {
        return fail(format!(
            "schema_version {} is not one this gate reads ({SCHEMA_VERSION})",
            record.schema_version
        ));
    }
    let fits = match (&record.outcome, record.check) {
        (Outcome::NotRun { .. }, _) => true,
        (Outcome::Tests { .. }, check) => {
            matches!(
                check,
                Check::UnitTests | Check::KernelTests | Check::ServingTests | Check::CommonTests
            )
        }
        (Outcome::Routing { .. }, check) => check == Check::Routing,
        (Outcome::Accuracy { .. }, check) => check == Check::Accuracy,
        (Outcome::KernelTiming { .. }, check) => check == Check::KernelTiming,
        (Outcome::SpeedPair { .. } | Outcome::SpeedNoise { .. }, check) => check == Check::Speed,
    };
    if !fits {
        return fail(format!(
            "a {} outcome cannot be evidence of {}",
            outcome_name(&record.outcome),
            record.check.describe()
        ));
    }
    let side_fits = match record.outcome {
        Outcome::SpeedPair { .. } | Outcome::SpeedNoise { .. } => record.side == Side::Both,
        Outcome::NotRun { .. } => true,
        _ => record.side != Side::Both,
    };
    if !side_fits {
        return fail(format!(
            "side {:?} does not fit a {} outcome",
            record.side,
            outcome_name(&record.outcome)
        ));
    }
    if record.model.is_none() != (record.check == Check::CommonTests) {
        return fail("common tests have no model, and every other check has one".to_owned());
    }
    Ok(())
}

/// Whether the outcome's numbers are ones a statistic can be made of.
fn check_numbers(index: usize, outcome: &Outcome) -> Result<(), EvidenceError> {
    let fail = |problem: String| Err(EvidenceError { record: index, problem });
    match outcome {
        Outcome::SpeedPair { base_tpot_ms, pr_tpot_ms, base_runs_ms, .. } => {
            let runs = base_runs_ms.unwrap_or([*base_tpot_ms; 2]);
            for (name, value) in [
                ("base_tpot_ms", base_tpot_ms),
                ("pr_tpot_ms", pr_tpot_ms),
                ("base_runs_ms", &runs[0]),
                ("base_runs_ms", &runs[1]),
            ] {
                if !(1e-6..=1e9).contains(value) {
                    return fail(format!(
                        "{name} = {value} is not a time in milliseconds (1e-6 to 1e9)"
                    ));
                }
            }
            let geometric = (runs[0] * runs[1]).sqrt();
            if (geometric / base_tpot_ms - 1.0).abs() > 1e-6 {
                return fail(format!(
                    "base_tpot_ms = {base_tpot_ms} is not the geometric mean of base_runs_ms {runs:?}"
                ));
            }
        }
        Outcome::SpeedNoise { log_ratio_variance, .. } => {
            if !(log_ratio_variance.is_finite() && *log_ratio_variance >= 0.0) {
                return fail(format!(
                    "log_ratio_variance = {log_ratio_variance} is not a variance"
                ));
            }
        }
        Outcome::Accuracy { .. } => return check_accuracy(index, outcome),
        Outcome::KernelTiming { kernels } => {
            for kernel in kernels {
                if kernel.samples_us.is_empty()
                    || kernel.samples_us.iter().any(|t| !(t.is_finite() && *t > 0.0))
                {
                    return fail(format!(
                        "kernel {} has no samples or a sample that is not a positive number",
                        kernel.name
                    ));
                }
            }
        }
        Outcome::Tests { .. } | Outcome::Routing { .. } | Outcome::NotRun { .. } => {}
    }
    Ok(())
}

/// An accuracy record's repeat and counts, and its answers when it lists them.
fn check_accuracy(index: usize, outcome: &Outcome) -> Result<(), EvidenceError> {
    let fail = |problem: String| Err(EvidenceError { record: index, problem });
    let Outcome::Accuracy { questions, correct, per_question, repeat, .. } = outcome else {
        return Ok(());
    };
    if let Some(repeat) = repeat
        && (repeat.cap == 0 || repeat.index >= repeat.cap)
    {
        return fail(format!(
            "repeat {} of a cap of {} repeats is not one",
            repeat.index, repeat.cap
        ));
    }
    if correct > questions || *questions == 0 || *questions > 1_000_000_000 {
        return fail(format!("{correct} correct of {questions} questions"));
    }
    if let Some(per_question) = per_question {
        let right = per_question.iter().filter(|q| q.correct).count() as u64;
        let ids: BTreeSet<&str> = per_question.iter().map(|q| q.id.as_str()).collect();
        if ids.len() != per_question.len() {
            return fail("per_question names a question twice".to_owned());
        }
        if per_question.len() as u64 != *questions || right != *correct {
            return fail(format!(
                "per_question has {} answers with {right} right, but the totals say {correct} of {questions}",
                per_question.len()
            ));
        }
    }
    Ok(())
}

/// What tells apart the records of one check on one side.
fn step_part(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Accuracy { benchmark, repeat, .. } => match repeat {
            Some(repeat) => format!("{} repeat {}", benchmark.to_ascii_lowercase(), repeat.index),
            None => benchmark.to_ascii_lowercase(),
        },
        Outcome::SpeedPair { concurrency, index, .. } => {
            format!("pair {index} at concurrency {concurrency}")
        }
        Outcome::SpeedNoise { concurrency, .. } => format!("noise at concurrency {concurrency}"),
        Outcome::NotRun { subject, .. } => {
            format!("not run: {}", subject.as_deref().unwrap_or("all"))
        }
        Outcome::Tests { .. } | Outcome::Routing { .. } | Outcome::KernelTiming { .. } => {
            String::new()
        }
    }
}

fn outcome_name(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Tests { .. } => "tests",
        Outcome::Routing { .. } => "routing",
        Outcome::Accuracy { .. } => "accuracy",
        Outcome::KernelTiming { .. } => "kernel-timing",
        Outcome::SpeedPair { .. } => "speed-pair",
        Outcome::SpeedNoise { .. } => "speed-noise",
        Outcome::NotRun { .. } => "not-run",
    }
}

#[cfg(test)]
mod tests {
    use super::Side;

    #[test]
    fn a_sides_word_is_its_serde_name() {
        for side in [Side::Base, Side::Pr, Side::Both] {
            let json = serde_json::to_string(&side).expect("a side serializes");
            assert_eq!(json, format!("\"{}\"", side.as_str()));
        }
    }
}
