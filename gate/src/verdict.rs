//! The verdict: the review checklist in the guideline's order — rules, scope, accuracy, kernel
//! microbenchmark, E2E performance, tests, doc — each item pass, fail, warn, pending or
//! author-provided, with its numbers and the rule that decided it.
//!
//! # The JSON format (`schema_version` 1)
//!
//! ```json
//! {
//!   "schema_version": 1,
//!   "pr_sha": "<40 hex>",                   // the plan's head: the commit judged
//!   "result": "fail",                       // pass, fail or pending (warnings do not block)
//!   "rules": [ { "name": "title", "verdict": "pass", "findings": [] } ],
//!   "sections": [
//!     { "name": "e2e-performance", "state": "fail", "items": [
//!       { "model": "kimi_k31", "check": "speed", "state": "fail",
//!         "rule": "median-TPOT loss over 2% at a covered concurrency fails",
//!         "summary": "TPOT +3.1% [+2.2%, +4.0%] at c=64, 4 pairs",
//!         "numbers": { "kind": "speed", "concurrency": 64, "covered": true, "base_ms": 20.1,
//!                      "pr_ms": 20.7, "change": 0.031, "interval": [0.022, 0.040],
//!                      "pairs": 4, "confidence": "high",
//!                      "test": { "run_cv": 0.012, "degrees_of_freedom": 7.0,
//!                                "in_band_differences": 4, "calibration_samples": null,
//!                                "calibration_df": 0.0, "alpha": 0.005, "beta": 0.05,
//!                                "outliers": [] },
//!                      "thresholds": { "max_loss": 0.02, "min_gain": 0.05,
//!                                      "gain_required": false } } } ] } ],
//!   "author_must_provide": [ "kimi_k31: accuracy (gpqa-diamond): a gated dataset and no token on the runner" ]
//! }
//! ```
//!
//! Section names: `rules`, `scope`, `accuracy`, `kernel-microbenchmark`, `e2e-performance`,
//! `tests`, `doc`. Item and section states: `pass`, `warn`, `author-provided`, `pending`,
//! `fail`; a section's state is its worst item's. `numbers` is one of `speed`, `accuracy`,
//! `kernel`, `tests` (see [`Numbers`]) or `null`. A speed item's interval is the two-sided 95%
//! Student-t interval of the change on the test's pooled variance, for the reader: the decision
//! is the sequential test's, whose noise, calibration and error bounds are in `test` (added in
//! place, optional: see [`SpeedTest`]), and the rule's lines it was judged against in
//! `thresholds` (`max_loss` and `min_gain` as fractions, whether the title claims a gain; added
//! in place, optional: see [`SpeedThresholds`]); a covered cell its pair cap left undecided
//! (state `error`, confidence `low`) also has `undecided` (added in place, optional: see
//! [`SpeedUndecided`]). An accuracy item's interval is the score
//! interval whose one-sided bounds are at `alpha`, and its `p_value` that test's (see
//! `docs/gate.md`). `recipe_changes` (added in place, left out when empty) lists the recipes
//! the PR changed against base, from the job plan: `{"model": "kimi_k31", "path":
//! "test/e2e/kimi_k31.toml", "diff": {"text": "@@ ...", "omitted": 0}}` ([`RecipeChange`]).
//! Readers ignore fields they do not know; a new value of an enumeration raises
//! `schema_version`.

use std::collections::{BTreeMap, BTreeSet};

use prgate_scope::plan::{Plan, Tier};
use serde::{Deserialize, Serialize};

use crate::accuracy::{
    self, AccuracyAnswer, BenchmarkRepeats, Looks, Pooled, RepeatsToDecide, judge_benchmark,
};
use crate::config::{GateConfig, Severity};
use crate::evidence::{
    Check, Evidence, EvidenceError, NotRunKind, Outcome, Side, TestOutcome, validate,
};
use crate::job::{Expect, ExpectedStep, JobPlan, Part, RecipeDiff, Target, tier_checks};
use crate::rules::RuleOutcome;
use crate::speed::{
    Answer, Calibration, CellContext, CellJudgement, LEGACY_CALIBRATION_SAMPLES, Pair, ToDecide,
    judge_cell,
};
use crate::stats::median;

/// The version of the verdict's JSON format.
pub const SCHEMA_VERSION: u32 = 1;

/// The gate's judgement of a PR.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub schema_version: u32,
    /// The PR commit judged: the plan's head.
    #[serde(default)]
    pub pr_sha: Option<String>,
    pub result: State,
    pub rules: Vec<RuleOutcome>,
    pub sections: Vec<Section>,
    pub author_must_provide: Vec<String>,
    /// How many checks were judged (pass, warn or fail) of those expected (every item but
    /// "nothing to check" and "not judged").
    #[serde(default)]
    pub checks: CheckCounts,
    /// The recipes the PR changed against base, from the job plan (`Recipes::diff`), in its
    /// order: what the comment shows a reviewer. Empty without a job plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recipe_changes: Vec<RecipeChange>,
}

/// A recipe the PR changed: its model (`None`: the common recipe), its path and the diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecipeChange {
    pub model: Option<String>,
    pub path: String,
    pub diff: RecipeDiff,
}

/// How many checks the verdict judged of those it expected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckCounts {
    pub judged: usize,
    pub expected: usize,
}

/// Whether the run the evidence comes from is over: a step without evidence is then one the
/// node could not judge (`error`), not one still to come (`pending`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// The run is over: every expected step should have its evidence.
    Final,
    /// The run is still going (a progress update).
    InProgress,
}

/// What the gate judges.
#[derive(Debug, Clone)]
pub struct JudgeRequest<'a> {
    pub plan: &'a Plan,
    /// What the run had to produce; without it, a tier's checks are expected
    /// ([`tier_checks`]).
    pub job: Option<&'a JobPlan>,
    pub evidence: &'a [Evidence],
    pub rules: Vec<RuleOutcome>,
    /// Whether the PR's title type needs a speed gain.
    pub gain_required: bool,
    pub config: &'a GateConfig,
    pub completion: Completion,
}

/// The state of an item, a section or the whole verdict, from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// The recipe asks nothing of the check.
    NothingToCheck,
    /// Measured and shown, but no rule judges it (a concurrency the monokernels do not cover).
    NotJudged,
    Pass,
    Warn,
    AuthorProvided,
    Pending,
    /// The node could not judge it: the run cannot end in `success`.
    Error,
    Fail,
}

/// The checklist's sections, in the review guideline's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SectionName {
    Rules,
    Scope,
    Accuracy,
    KernelMicrobenchmark,
    E2ePerformance,
    Tests,
    Doc,
}

/// One section of the checklist.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Section {
    pub name: SectionName,
    pub state: State,
    pub items: Vec<Item>,
}

/// One line of the checklist.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// The model, or `None` for the whole PR and the common checks.
    pub model: Option<String>,
    /// What was checked (`speed`, `accuracy`, `title`, ...).
    pub check: String,
    pub state: State,
    /// The rule that decided, in words.
    pub rule: String,
    /// What decided it, with the numbers.
    pub summary: String,
    pub numbers: Option<Numbers>,
}

/// The numbers behind an item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Numbers {
    /// One speed cell: medians of base and PR runs' median TPOT (over the kept pairs; a
    /// bracketed pair's base is the geometric mean of its two base runs), the PR's change
    /// (`exp(mean log-ratio) - 1`, the tested quantity) and its interval, the pairs used and
    /// the confidence, and the test: the noise and calibration it used and its error rates.
    Speed {
        concurrency: u32,
        covered: bool,
        base_ms: Option<f64>,
        pr_ms: Option<f64>,
        change: Option<f64>,
        interval: Option<(f64, f64)>,
        pairs: usize,
        confidence: Confidence,
        #[serde(default)]
        test: Option<Box<SpeedTest>>,
        /// The rule's lines the gate judged this cell against (added in place, optional: a
        /// verdict written before it has none).
        #[serde(default)]
        thresholds: Option<SpeedThresholds>,
        /// What would decide a covered cell the pair cap left undecided (added in place,
        /// optional; absent for every other cell).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        undecided: Option<SpeedUndecided>,
    },
    /// One benchmark: accuracies as fractions, PR minus base and its interval (each bound
    /// one-sided at `alpha`), the questions, whether the comparison was paired, the p-value
    /// of the same test ("the PR is at most the tolerance below base"; below `alpha` exactly
    /// when the interval lies below `-tolerance`) and the tolerance.
    Accuracy {
        benchmark: String,
        base: f64,
        pr: f64,
        difference: f64,
        interval: (f64, f64),
        questions: u64,
        paired: bool,
        p_value: f64,
        tolerance: f64,
        /// The level of each of the interval's one-sided bounds: the PR's accuracy alpha over
        /// the benchmarks judged and the looks (the cap of repeats).
        #[serde(default)]
        alpha: Option<f64>,
        /// The repeats behind it and the sequential rule's numbers (added in place, optional:
        /// a verdict written before repeats has none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repeats: Option<AccuracyRepeats>,
    },
    /// One kernel: median time on each side and the PR's change.
    Kernel { kernel: String, base_us: f64, pr_us: f64, change: f64 },
    /// One test suite on the PR side.
    Tests { passed: usize, failed: usize, skipped: usize, errors: usize, pre_existing: usize },
}

/// An accuracy benchmark's repeats and what its sequential rule guarantees
/// (`prgate_gate::accuracy`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AccuracyRepeats {
    /// The repeats judged (both sides'), and the cap.
    pub judged: u32,
    pub cap: u32,
    /// P(fail | within the tolerance) for this benchmark over all looks (the PR's alpha over
    /// the benchmarks), and P(pass | `beta_drop` below base).
    pub alpha: f64,
    pub beta: f64,
    /// The drop the pass side guards against (beta-at tolerances), a fraction.
    pub beta_drop: f64,
    /// The lower bound at the look's beta: a pass needs it above `-beta_drop`.
    pub pass_bound: f64,
    /// For a benchmark undecided at its cap: the repeats in all that would decide it at the
    /// difference and noise measured, and how many more (`None`: over 1,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats_to_decide: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more_repeats: Option<u32>,
}

/// What a speed cell's test used and guarantees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedTest {
    /// The run-to-run CV the test used (pooled, floored at `min-cv`).
    pub run_cv: Option<f64>,
    /// The degrees of freedom behind it.
    pub degrees_of_freedom: Option<f64>,
    /// In-band A/A differences (bracketed pairs' base runs) among them.
    pub in_band_differences: usize,
    /// The node's stored calibration: its base-vs-base differences, and the degrees of
    /// freedom they counted for. `None`: the node had none for this cell.
    pub calibration_samples: Option<u32>,
    pub calibration_df: f64,
    /// The bound on P(fail | no loss) for this cell, and on P(pass | a loss at the zone's top).
    pub alpha: f64,
    pub beta: f64,
    /// Pairs (by index in run order) excluded as outliers and re-measured: the node's.
    pub outliers: Vec<u32>,
    /// The bound on P(some covered cell of the PR fails | no loss anywhere): `speed.alpha`
    /// (added in place, optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family_alpha: Option<f64>,
    /// The PR's run-to-run noise as a multiple of base's, estimated (added in place,
    /// optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_noise_ratio: Option<f64>,
    /// Whether the pairs' spread was shown larger than base's noise predicts, so the test used
    /// their own variance (added in place; absent is false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_variance: bool,
    /// Whether the run's A/A differences contradicted the node's stored calibration, which was
    /// not used (added in place; absent is false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub calibration_stale: bool,
    /// Pairs (by index) whose PR run was slow against its own clean base runs: the PR's, kept
    /// as evidence (added in place; absent is none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pr_slow: Vec<u32>,
}

/// What would decide a speed cell its pair cap left undecided, at the mean and the noise it
/// measured (`prgate_gate::speed::ToDecide`). Changes are fractions: 0.03 is 3% slower.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpeedUndecided {
    /// The loss test's bounds at the last look: a fail needs the lower above `zone.0`, a pass
    /// needs the upper below `zone.1`.
    pub bounds: (f64, f64),
    /// The test's indifference zone.
    pub zone: (f64, f64),
    /// The kept pairs in all at which a bound would pass, with `max-pairs` raised to it;
    /// `None`: more than 10,000.
    pub pairs_to_decide: Option<usize>,
    /// The pairs to add, and their runs (two each: a PR run and the base run closing it).
    pub more_pairs: Option<usize>,
    pub more_runs: Option<usize>,
}

/// The speed rule's lines as the gate used them for a cell, from the `[gate.speed]` and
/// `[gate.gain]` settings: what a chart of the change draws its lines at.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpeedThresholds {
    /// The largest TPOT loss allowed, a fraction (`speed.max-loss`): a change over it fails a
    /// covered concurrency.
    pub max_loss: f64,
    /// The TPOT gain, a fraction (`gain.min-gain`), that a PR whose title type claims one must
    /// show at one covered concurrency (a chart draws it at a change of `-min_gain`).
    pub min_gain: f64,
    /// Whether this PR's title type claims a gain, so that `min_gain` is judged.
    pub gain_required: bool,
}

/// How sure a speed decision is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Confidence {
    /// The sequential test reached its bound: the error rates of `SpeedTest` hold.
    High,
    /// The test reached its pair cap without passing either bound: undecided, so the cell is
    /// an `error`, never a pass (`numbers.undecided` says what would decide it). A verdict
    /// written before 2026-12 passed such a cell.
    Low,
    /// Not decided: more pairs were needed.
    Open,
}

impl From<Severity> for State {
    fn from(severity: Severity) -> State {
        match severity {
            Severity::Pass => State::Pass,
            Severity::Warn => State::Warn,
            Severity::Fail => State::Fail,
        }
    }
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pass => "pass",
            State::Warn => "warn",
            State::AuthorProvided => "author-provided",
            State::Pending => "pending",
            State::Error => "error",
            State::Fail => "fail",
            State::NothingToCheck => "nothing-to-check",
            State::NotJudged => "not-judged",
        }
    }
}

impl SectionName {
    pub fn title(self) -> &'static str {
        match self {
            SectionName::Rules => "Rules",
            SectionName::Scope => "Scope",
            SectionName::Accuracy => "Accuracy",
            SectionName::KernelMicrobenchmark => "Kernel microbenchmark",
            SectionName::E2ePerformance => "E2E performance",
            SectionName::Tests => "Tests",
            SectionName::Doc => "Doc",
        }
    }
}

/// The checks a model runs on its tier; none on tier `none`.
pub fn planned_checks(tier: Tier) -> &'static [Check] {
    tier_checks(tier)
}

/// Judges a plan, its evidence and the rules' outcomes. Errors name the evidence record (by
/// its index in `evidence`) that cannot be judged.
///
/// Judged as a progress update would ([`Completion::InProgress`]: missing evidence is pending)
/// and without a job plan; [`judge_with`] says both.
pub fn judge(
    plan: &Plan,
    evidence: &[Evidence],
    rules: Vec<RuleOutcome>,
    gain_required: bool,
    config: &GateConfig,
) -> Result<Verdict, EvidenceError> {
    judge_with(JudgeRequest {
        plan,
        job: None,
        evidence,
        rules,
        gain_required,
        config,
        completion: Completion::InProgress,
    })
}

/// Judges what `request` holds. Errors name the evidence record (by its index) that cannot be
/// judged.
pub fn judge_with(request: JudgeRequest<'_>) -> Result<Verdict, EvidenceError> {
    let JudgeRequest { plan, job, evidence, rules, gain_required, config, completion } = request;
    validate(evidence)?;
    check_against_plan(plan, evidence)?;
    let mut by_step: BTreeMap<(Option<String>, Check), Vec<&Evidence>> = BTreeMap::new();
    for record in evidence {
        by_step.entry((record.model.clone(), record.check)).or_default().push(record);
    }
    let new_models: BTreeSet<String> =
        plan.models.iter().filter(|model| model.new).map(|model| model.name.clone()).collect();
    let accuracy_family = evidence
        .iter()
        .filter_map(|record| match &record.outcome {
            Outcome::Accuracy { benchmark, .. } => {
                Some((record.model.clone(), benchmark.to_ascii_lowercase()))
            }
            _ => None,
        })
        .collect::<BTreeSet<_>>()
        .len();
    let mut judge = Judge {
        config,
        moved_modules: moved_test_modules(plan),
        pr_scripts: job
            .into_iter()
            .flat_map(|job| &job.targets)
            .filter_map(|target| Some((target.model.clone()?, target.recipe.pr_scripts.clone())))
            .filter(|(_, scripts)| !scripts.is_empty())
            .collect(),
        by_step,
        items: BTreeMap::new(),
        author: BTreeSet::new(),
        new_models,
        completion,
        evidence,
        accuracy_family,
        gain_required,
        accept_narrowing: job.is_some_and(|job| job.accept_narrowing),
    };

    let rule_items: Vec<Item> = rules
        .iter()
        .map(|rule| Item {
            model: None,
            check: rule.name.clone(),
            state: rule.verdict.into(),
            rule: rule_text(&rule.name),
            summary: if rule.findings.is_empty() {
                "no findings".to_owned()
            } else {
                findings_text(&rule.findings)
            },
            numbers: None,
        })
        .collect();
    judge.items.insert(SectionName::Rules, rule_items);
    judge.scope(plan);
    if let Some(job) = job {
        for target in &job.targets {
            judge.contract(target, job.accept_narrowing);
        }
    }

    let models: Vec<_> = plan.running_models().collect();
    // The family the run declared, else the covered cells seen so far.
    let declared = evidence
        .iter()
        .filter_map(|record| match record.outcome {
            Outcome::SpeedPair { family, .. } => family,
            _ => None,
        })
        .max();
    let covered_cells =
        declared.map_or_else(|| judge.covered_cells(&models), |family| family as usize);
    for model in &models {
        let target = job.map(|job| job.target(Some(&model.name)));
        for &check in tier_checks(model.tier) {
            match target {
                Some(Some(target)) => {
                    if judge.accounted(target, check) {
                        judge.check(&model.name, check, covered_cells);
                    }
                }
                Some(None) => {
                    judge.missing(
                        Some(&model.name),
                        check,
                        Some("the job plan has no entry for it"),
                    );
                }
                None => judge.check(&model.name, check, covered_cells),
            }
        }
        if model.tier == Tier::Full && model.readme == Some(false) {
            judge.push(
                SectionName::Doc,
                Item {
                    model: Some(model.name.clone()),
                    check: "readme".to_owned(),
                    state: config.missing_readme.into(),
                    rule: "a model on the full tier needs a README".to_owned(),
                    summary: "no README".to_owned(),
                    numbers: None,
                },
            );
        }
    }
    if gain_required {
        judge.gain_verdict(&models);
    }
    if plan.common.selected {
        match job.map(|job| job.target(None)) {
            Some(Some(target)) => {
                if judge.accounted(target, Check::CommonTests) {
                    judge.tests(None, Check::CommonTests);
                }
            }
            Some(None) => {
                judge.missing(None, Check::CommonTests, Some("the job plan has no entry for it"));
            }
            None => judge.tests(None, Check::CommonTests),
        }
    }

    let order = [
        SectionName::Rules,
        SectionName::Scope,
        SectionName::Accuracy,
        SectionName::KernelMicrobenchmark,
        SectionName::E2ePerformance,
        SectionName::Tests,
        SectionName::Doc,
    ];
    let sections: Vec<Section> = order
        .iter()
        .map(|name| {
            let mut items = judge.items.remove(name).unwrap_or_default();
            // Once the run is over, nothing is still to come: what is open could not be judged.
            if completion == Completion::Final {
                for item in items.iter_mut().filter(|item| item.state == State::Pending) {
                    item.state = State::Error;
                    item.summary.push_str("; the run ended before it was decided");
                }
            }
            let state = items.iter().map(|item| item.state).max().unwrap_or(State::NothingToCheck);
            Section { name: *name, state, items }
        })
        .collect();
    let worst = sections.iter().map(|section| section.state).max().unwrap_or(State::Pass);
    let result = match worst {
        State::Fail => State::Fail,
        State::Error => State::Error,
        State::Pending => State::Pending,
        _ => State::Pass,
    };
    let items = || sections.iter().flat_map(|section| section.items.iter());
    let checks = CheckCounts {
        judged: items()
            .filter(|item| matches!(item.state, State::Pass | State::Warn | State::Fail))
            .count(),
        expected: items()
            .filter(|item| !matches!(item.state, State::NothingToCheck | State::NotJudged))
            .count(),
    };
    Ok(Verdict {
        schema_version: SCHEMA_VERSION,
        pr_sha: Some(plan.head.sha.clone()),
        result,
        rules,
        sections,
        author_must_provide: judge.author.into_iter().collect(),
        checks,
        recipe_changes: job.map(recipe_changes).unwrap_or_default(),
    })
}

/// The job plan's recipe diffs, target by target.
fn recipe_changes(job: &JobPlan) -> Vec<RecipeChange> {
    job.targets
        .iter()
        .filter_map(|target| {
            let diff = target.recipe.diff.clone()?;
            let path = match &target.recipe.pr {
                crate::job::RecipeState::Parsed { path, .. }
                | crate::job::RecipeState::Missing { path }
                | crate::job::RecipeState::Invalid { path, .. } => path.clone(),
                crate::job::RecipeState::NoTree => String::new(),
            };
            Some(RecipeChange { model: target.model.clone(), path, diff })
        })
        .collect()
}

/// The test modules the diff renamed, as pytest's dotted module names (`test/unit/a/t.py` is
/// `test.unit.a.t`): old and new.
fn moved_test_modules(plan: &Plan) -> Vec<(String, String)> {
    let module = |path: &str| path.strip_suffix(".py").map(|stem| stem.replace('/', "."));
    plan.renamed_files().filter_map(|(old, new)| Some((module(old)?, module(new)?))).collect()
}

/// A base test id (`module::name`, or `module.Class::name`) as the PR side names it: under its
/// module's new name when the diff renamed the module.
fn moved_test_id<'a>(moved: &[(String, String)], id: &'a str) -> std::borrow::Cow<'a, str> {
    for (old, new) in moved {
        if let Some(rest) = id.strip_prefix(old.as_str())
            && (rest.starts_with("::") || rest.starts_with('.'))
        {
            return std::borrow::Cow::Owned(format!("{new}{rest}"));
        }
    }
    std::borrow::Cow::Borrowed(id)
}

/// The files pytest reads its configuration and plugins from: `conftest.py`, `pytest.ini`,
/// `pyproject.toml`, `setup.cfg`, `tox.ini`, at any depth.
fn is_test_harness(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(name, "conftest.py" | "pytest.ini" | "pyproject.toml" | "setup.cfg" | "tox.ini")
}

/// A recipe value as a verdict line shows it: at most 80 characters, `…` where it was cut.
fn clip(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// The share right over some (correct, questions) counts; 0 without questions.
fn ratio(counts: impl Iterator<Item = (u64, u64)>) -> f64 {
    let (correct, questions) =
        counts.fold((0u64, 0u64), |(c, q), (correct, questions)| (c + correct, q + questions));
    if questions == 0 { 0.0 } else { correct as f64 / questions as f64 }
}

/// What would decide an undecided benchmark, in words.
fn undecided_words(to_decide: Option<RepeatsToDecide>) -> String {
    match to_decide.map(|t| (t.repeats, t.more_repeats(), t.more_runs())) {
        Some((Some(repeats), Some(more), Some(runs))) => format!(
            "at the difference and noise measured, {repeats} repeats in all would decide it ({more} more: {runs} benchmark runs, half of them base's unless cached), with the recipe's `repeats` raised to {repeats}"
        ),
        _ => format!(
            "at the difference measured, more than {} repeats would be needed: the difference is about at the tolerance",
            crate::accuracy::TO_DECIDE_LIMIT
        ),
    }
}

/// Evidence that does not belong to this plan: a model it does not have, or a PR commit that
/// is not its head (a rerun's leftovers, another PR's results).
fn check_against_plan(plan: &Plan, evidence: &[Evidence]) -> Result<(), EvidenceError> {
    for (index, record) in evidence.iter().enumerate() {
        let fail = |problem: String| Err(EvidenceError { record: index, problem });
        if let Some(model) = &record.model
            && !plan.models.iter().any(|planned| &planned.name == model)
        {
            return fail(format!("model {model} is not in the plan"));
        }
        if let Some(commit) = &record.provenance.pr_commit
            && commit != &plan.head.sha
        {
            return fail(format!(
                "it was measured on PR commit {commit}, but the plan is for {}",
                plan.head.sha
            ));
        }
        if let Some(commit) = &record.provenance.base_commit
            && Some(commit) != plan.merge_base.as_ref()
            && commit != &plan.base.sha
        {
            return fail(format!(
                "it was measured on base commit {commit}, which is neither the plan's merge-base nor its base"
            ));
        }
    }
    // Base and PR of one model run side by side: on one node, one image, one recipe.
    let mut seen: BTreeMap<(Option<&str>, &str), (&str, usize)> = BTreeMap::new();
    for (index, record) in evidence.iter().enumerate() {
        let provenance = &record.provenance;
        for (what, value) in [
            ("node", provenance.node.as_deref()),
            ("image", provenance.image_digest.as_deref()),
            ("recipe", provenance.recipe_hash.as_deref()),
        ] {
            let Some(value) = value else { continue };
            match seen.get(&(record.model.as_deref(), what)) {
                Some((first, first_index)) if *first != value => {
                    return Err(EvidenceError {
                        record: index,
                        problem: format!(
                            "its {what} is {value}, but record {first_index} of the same model has {first}: base and PR must run side by side with the same {what}"
                        ),
                    });
                }
                Some(_) => {}
                None => {
                    seen.insert((record.model.as_deref(), what), (value, index));
                }
            }
        }
    }
    Ok(())
}

fn rule_text(name: &str) -> String {
    match name {
        "title" => "titles read `[Type] [Hardware] scope: summary`".to_owned(),
        "codeowners" => {
            "the CODEOWNERS policy (the repository's CODEOWNERS.rules, or prgate's)".to_owned()
        }
        other => other.to_owned(),
    }
}

/// One concurrency of one model: whether the monokernels cover it, its pairs by index, and its
/// calibrated base-vs-base variance.
#[derive(Default)]
struct SpeedCell {
    covered: bool,
    pairs: Vec<(u32, Pair)>,
    noise: Option<Calibration>,
}

struct Judge<'a> {
    config: &'a GateConfig,
    /// The diff's renamed test modules (old, new), dotted as pytest's ids name them: a base
    /// test id is read under its new name on the PR side ([`moved_test_id`]).
    moved_modules: Vec<(String, String)>,
    /// Per model, the timing scripts that measure the PR side with the PR's own files (the job
    /// plan's `pr_scripts`).
    pr_scripts: BTreeMap<String, Vec<crate::job::PrScript>>,
    by_step: BTreeMap<(Option<String>, Check), Vec<&'a Evidence>>,
    items: BTreeMap<SectionName, Vec<Item>>,
    author: BTreeSet<String>,
    /// Models new in the PR: no base tree, so their kernels have no base timing.
    new_models: BTreeSet<String>,
    completion: Completion,
    evidence: &'a [Evidence],
    /// How many benchmarks (of every model) are judged together: accuracy's alpha is divided
    /// over them.
    accuracy_family: usize,
    /// Whether the PR's title type claims a speed gain.
    gain_required: bool,
    /// A maintainer accepted the PR's narrowing (the job plan's `accept_narrowing`).
    accept_narrowing: bool,
}

fn section_of(check: Check) -> SectionName {
    match check {
        Check::Accuracy => SectionName::Accuracy,
        Check::KernelTiming => SectionName::KernelMicrobenchmark,
        Check::Speed => SectionName::E2ePerformance,
        Check::UnitTests
        | Check::KernelTests
        | Check::ServingTests
        | Check::CommonTests
        | Check::Routing => SectionName::Tests,
    }
}

fn check_name(check: Check) -> String {
    serde_json::to_value(check)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl<'a> Judge<'a> {
    fn push(&mut self, section: SectionName, item: Item) {
        self.items.entry(section).or_default().push(item);
    }

    fn records(&self, model: Option<&str>, check: Check) -> &[&'a Evidence] {
        self.by_step.get(&(model.map(str::to_owned), check)).map(Vec::as_slice).unwrap_or_default()
    }

    fn scope(&mut self, plan: &Plan) {
        let count = |tier: Tier| plan.models.iter().filter(|model| model.tier == tier).count();
        let mut summary = format!(
            "{} full, {} smoke, {} none; common checks {}",
            count(Tier::Full),
            count(Tier::Smoke),
            count(Tier::None),
            if plan.common.selected { "run" } else { "skipped" }
        );
        let state = if plan.diff.trusted {
            State::Pass
        } else {
            summary
                .push_str(&format!("; the diff is not trusted: {}", plan.diff.warnings.join("; ")));
            State::Warn
        };
        self.push(SectionName::Scope, Item {
            model: None,
            check: "scope".to_owned(),
            state,
            rule: "a model's own change runs its full tier, a shared change every model's smoke tier".to_owned(),
            summary,
            numbers: None,
        });
        self.removed_models(plan);
        let harness: Vec<&str> = plan
            .changed
            .iter()
            .flat_map(|changed| std::iter::once(&changed.path).chain(changed.old_path.as_ref()))
            .map(String::as_str)
            .filter(|path| is_test_harness(path))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !harness.is_empty() {
            self.push(SectionName::Scope, Item {
                model: None,
                check: "test-harness".to_owned(),
                state: State::Warn,
                rule: "a change to pytest's own configuration or plugins is read by a reviewer: it can skip, deselect or rewrite tests on the PR side".to_owned(),
                summary: format!("the PR changes the test harness: {}", harness.join(", ")),
                numbers: None,
            });
        }
    }

    /// A model the PR removes leaves the verdict: it is said, never silent. A model whose files
    /// the PR renamed (`renamed_to` in the plan) is the same model under its new name: it is
    /// judged there, held to this name's base recipe and base results.
    fn removed_models(&mut self, plan: &Plan) {
        for model in plan.models.iter().filter(|model| model.removed) {
            let summary = match &model.renamed_to {
                None => format!("{}: removed by the PR; its checks no longer run", model.name),
                Some(to) => format!(
                    "{}: renamed by the PR to {to}; it is judged as {to}, held to {}'s base recipe and base results",
                    model.name, model.name
                ),
            };
            self.push(
                SectionName::Scope,
                Item {
                    model: Some(model.name.clone()),
                    check: if model.renamed_to.is_some() {
                        "model-renamed"
                    } else {
                        "model-removed"
                    }
                    .to_owned(),
                    state: State::Warn,
                    rule: "a model that leaves the verdict is said, for a reviewer to confirm"
                        .to_owned(),
                    summary,
                    numbers: None,
                },
            );
        }
    }

    /// The contract of a model's recipe: a model without a base recipe runs by its own; every
    /// difference of the PR's recipe from base's is listed, and a narrowing fails unless a
    /// maintainer accepted it (`accept_narrowing`).
    fn contract(&mut self, target: &Target, accept_narrowing: bool) {
        let contract = &target.recipe.contract;
        if contract.is_empty() {
            return;
        }
        let narrowing = contract.narrowings().count();
        let (state, mut summary) = if contract.own {
            let text = if target.new {
                "new model (its own recipe): no base recipe to hold it to"
            } else {
                "its own recipe: the base side has no valid recipe to hold it to"
            };
            (State::Pass, text.to_owned())
        } else if narrowing == 0 {
            (State::Pass, "base's recipe measures both sides".to_owned())
        } else if accept_narrowing {
            let label = crate::job::ACCEPT_NARROWING_LABEL;
            let text = format!(
                "the PR's recipe narrows base's in {narrowing} place(s), accepted by a maintainer (the {label} label); base's recipe measures both sides"
            );
            (State::Warn, text)
        } else {
            let text = format!(
                "the PR's recipe narrows what base's measures in {narrowing} place(s): base's recipe still measures both sides, and a narrowing needs a maintainer's {} label",
                crate::job::ACCEPT_NARROWING_LABEL
            );
            (State::Fail, text)
        };
        for change in &contract.changes {
            summary.push_str(&format!(
                "; {} ({}): base {}, PR {}",
                change.key,
                change.effect.as_str(),
                clip(&change.base),
                clip(&change.pr)
            ));
        }
        self.push(SectionName::Scope, Item {
            model: target.model.clone(),
            check: "recipe-contract".to_owned(),
            state,
            rule: "base's recipe decides what is measured, how and how much, for both sides; the PR decides only its own server command".to_owned(),
            summary,
            numbers: None,
        });
    }

    /// Not-run records become items by what they mean ([`NotRunKind`]): a coverage gap is
    /// author-provided, a step broken by what it runs fails on the PR side (and cannot be
    /// judged when the base side broke too), and what the node could not judge is an error.
    /// Returns whether they stand for the whole check (the PR side measured nothing of it).
    fn not_run(&mut self, model: Option<&str>, check: Check) -> bool {
        let records: Vec<&Evidence> = self.records(model, check).to_vec();
        // The PR's own results are always judged: a not-run record only stands for the check
        // when the PR side measured nothing.
        let measured_pr = records.iter().any(|record| {
            record.side != Side::Base && !matches!(record.outcome, Outcome::NotRun { .. })
        });
        let mut whole = false;
        for record in &records {
            let Outcome::NotRun { reason, detail, subject, failed_on } = &record.outcome else {
                continue;
            };
            let what = match subject {
                Some(subject) => format!("{} ({subject})", check.describe()),
                None => check.describe().to_owned(),
            };
            let detail = if detail.is_empty() { String::new() } else { format!(" — {detail}") };
            let item = |state: State, rule: &str, summary: String| Item {
                model: model.map(str::to_owned),
                check: check_name(check),
                state,
                rule: rule.to_owned(),
                summary,
                numbers: None,
            };
            let base_side = record.side == Side::Base || *failed_on == Some(Side::Base);
            whole |= subject.is_none() && !measured_pr;
            match reason.kind() {
                NotRunKind::NothingToCheck => {
                    let summary = format!("{what}: nothing to check{detail}");
                    self.push(
                        section_of(check),
                        item(State::NothingToCheck, "the recipe asks nothing of it", summary),
                    );
                }
                kind if judged_without_base(kind, base_side, measured_pr, check) => {
                    let summary = format!(
                        "{what} could not run on the base side: {}{detail}; the PR's results are judged without base",
                        reason.describe()
                    );
                    self.push(
                        section_of(check),
                        item(State::Warn, "base and PR are compared side by side", summary),
                    );
                }
                NotRunKind::CoverageGap => {
                    let owner = model.unwrap_or("common");
                    self.author.insert(format!("{owner}: {what}: {}{detail}", reason.describe()));
                    let state = match self.config.not_run {
                        Severity::Pass => State::Pass,
                        Severity::Warn => State::AuthorProvided,
                        Severity::Fail => State::Fail,
                    };
                    let summary = format!("{what} could not run: {}{detail}", reason.describe());
                    let rule = "a check that cannot run on these nodes is provided by the author";
                    self.push(section_of(check), item(state, rule, summary));
                }
                NotRunKind::Broken if base_side => {
                    let summary = format!(
                        "{what} broke on the base side ({}){detail}; without base there is nothing to compare the PR with",
                        reason.describe()
                    );
                    let rule = "base and PR are compared side by side";
                    self.push(section_of(check), item(State::Error, rule, summary));
                }
                NotRunKind::Broken if broke_on_base(&records, record) => {
                    let summary = format!(
                        "{what} broke on both sides ({}){detail}; the base side broke the same way, so the node cannot judge the PR",
                        reason.describe()
                    );
                    let rule = "a step that breaks on base too cannot be judged";
                    self.push(section_of(check), item(State::Error, rule, summary));
                }
                NotRunKind::Broken => {
                    let summary = format!("{what}: {}{detail}", reason.describe());
                    let rule = "a check the PR broke (crash, timeout, no result, a removed or broken recipe) fails";
                    self.push(section_of(check), item(State::Fail, rule, summary));
                }
                NotRunKind::CannotJudge => {
                    let summary =
                        format!("{what} could not be judged: {}{detail}", reason.describe());
                    let rule = "every expected step is judged, or the run ends in error";
                    self.push(section_of(check), item(State::Error, rule, summary));
                }
            }
        }
        whole
    }

    /// A check that has no evidence: pending while the run goes on, an error once it is over;
    /// `why`, when known, after a colon.
    fn missing(&mut self, model: Option<&str>, check: Check, why: Option<&str>) {
        let state = match self.completion {
            Completion::InProgress => State::Pending,
            Completion::Final => State::Error,
        };
        let why = why.map(|why| format!(": {why}")).unwrap_or_default();
        let summary = match self.completion {
            Completion::InProgress => format!("no evidence of {} yet{why}", check.describe()),
            Completion::Final => {
                format!("no evidence of {}: the run ended without it{why}", check.describe())
            }
        };
        self.push(
            section_of(check),
            Item {
                model: model.map(str::to_owned),
                check: check_name(check),
                state,
                rule: "every planned check reports".to_owned(),
                summary,
                numbers: None,
            },
        );
    }

    fn pending(&mut self, model: Option<&str>, check: Check) {
        self.missing(model, check, None);
    }

    /// Whether the job plan's steps of `check` are accounted for by the evidence, so the check
    /// can be judged; when they are not (or the recipe asks nothing of it), says so in an item.
    fn accounted(&mut self, target: &Target, check: Check) -> bool {
        let steps: Vec<&ExpectedStep> = target.steps_of(check).collect();
        if steps.is_empty() {
            self.missing(
                target.model.as_deref(),
                check,
                Some("the job plan expects no step of it"),
            );
            return false;
        }
        if let Some(why) = steps.iter().find_map(|step| match &step.expect {
            Expect::Nothing { why } => Some(why),
            _ => None,
        }) && steps.iter().all(|step| matches!(step.expect, Expect::Nothing { .. }))
        {
            self.push(
                section_of(check),
                Item {
                    model: target.model.clone(),
                    check: check_name(check),
                    state: State::NothingToCheck,
                    rule: "the recipe asks nothing of it".to_owned(),
                    summary: format!("{}: nothing to check ({why})", check.describe()),
                    numbers: None,
                },
            );
            return false;
        }
        let unaccounted: Vec<String> = steps
            .iter()
            .filter(|step| !matches!(step.expect, Expect::Nothing { .. }))
            .map(|step| target.step_id(step))
            .filter(|id| !crate::job::accounted(id, self.evidence))
            .map(|id| id.to_string())
            .collect();
        if unaccounted.is_empty() {
            return true;
        }
        self.missing(target.model.as_deref(), check, Some(&unaccounted.join("; ")));
        false
    }

    fn check(&mut self, model: &str, check: Check, covered_cells: usize) {
        if self.records(Some(model), check).is_empty() {
            self.pending(Some(model), check);
            return;
        }
        if self.not_run(Some(model), check) {
            return;
        }
        // Only not-run parts (a benchmark, a cell): their items stand for the check.
        let measured = self
            .records(Some(model), check)
            .iter()
            .any(|record| !matches!(record.outcome, Outcome::NotRun { .. }));
        if !measured {
            return;
        }
        match check {
            Check::UnitTests | Check::KernelTests | Check::ServingTests | Check::CommonTests => {
                self.tests(Some(model), check)
            }
            Check::Routing => self.routing(model),
            Check::Accuracy => self.accuracy(model),
            Check::KernelTiming => self.kernels(model),
            Check::Speed => self.speed(model, covered_cells),
        }
    }

    fn tests(&mut self, model: Option<&str>, check: Check) {
        let records = self.records(model, check).to_vec();
        if records.is_empty() {
            self.pending(model, check);
            return;
        }
        if model.is_none() && self.not_run(None, check) {
            return;
        }
        let results = |side: Side| -> Option<&Vec<crate::evidence::TestResult>> {
            records.iter().find(|record| record.side == side).and_then(|record| {
                match &record.outcome {
                    Outcome::Tests { results } => Some(results),
                    _ => None,
                }
            })
        };
        let Some(pr) = results(Side::Pr) else {
            self.pending(model, check);
            return;
        };
        let failing =
            |outcome: TestOutcome| matches!(outcome, TestOutcome::Failed | TestOutcome::Error);
        let moved = |id: &'a str| moved_test_id(&self.moved_modules, id);
        let base_failures: Option<BTreeSet<std::borrow::Cow<'a, str>>> =
            results(Side::Base).map(|base| {
                base.iter()
                    .filter(|test| failing(test.outcome))
                    .map(|test| moved(&test.id))
                    .collect()
            });
        let count = |outcome: TestOutcome| pr.iter().filter(|test| test.outcome == outcome).count();
        let pr_failures: Vec<&str> =
            pr.iter().filter(|test| failing(test.outcome)).map(|test| test.id.as_str()).collect();
        let (pre_existing, new): (Vec<&str>, Vec<&str>) = pr_failures
            .iter()
            .partition(|id| base_failures.as_ref().is_some_and(|base| base.contains(**id)));

        // A suite that ran no test proves nothing: the PR broke it, or, when base ran none
        // either, the node cannot judge it.
        let executed = |results: &[crate::evidence::TestResult]| {
            results.iter().filter(|test| test.outcome != TestOutcome::Skipped).count()
        };
        // A test that passed on base and is skipped, deselected or gone on the PR side is hidden
        // by the PR (a conftest.py, an ini file, a test removed): it fails unless accepted.
        let hidden: Vec<&str> = results(Side::Base)
            .map(|base| {
                base.iter()
                    .filter(|test| test.outcome == TestOutcome::Passed)
                    .filter(|test| {
                        let id = moved(&test.id);
                        !pr.iter().any(|ours| {
                            ours.id == id.as_ref() && ours.outcome != TestOutcome::Skipped
                        })
                    })
                    .map(|test| test.id.as_str())
                    .collect()
            })
            .unwrap_or_default();
        let none_ran = executed(pr) == 0;
        let none_ran_on_base = results(Side::Base).is_some_and(|base| executed(base) == 0);
        let state = if !new.is_empty() || (!hidden.is_empty() && !self.accept_narrowing) {
            State::Fail
        } else if none_ran && none_ran_on_base {
            State::Error
        } else if none_ran {
            State::Fail
        } else if !pre_existing.is_empty() {
            self.config.pre_existing_failure.into()
        } else if !hidden.is_empty() {
            State::Warn
        } else {
            State::Pass
        };
        let mut summary = format!(
            "{} passed, {} failed, {} errors, {} skipped",
            count(TestOutcome::Passed),
            count(TestOutcome::Failed),
            count(TestOutcome::Error),
            count(TestOutcome::Skipped)
        );
        let flaky: Vec<&str> =
            pr.iter().filter(|test| test.flaky).map(|test| test.id.as_str()).collect();
        if !flaky.is_empty() {
            summary.push_str(&format!("; flaky (passed on a rerun): {}", list(&flaky)));
        }
        if !new.is_empty() {
            summary.push_str(&format!("; failing on the PR: {}", list(&new)));
        }
        if !hidden.is_empty() {
            let accepted = if self.accept_narrowing {
                format!(" (accepted by a maintainer: {})", crate::job::ACCEPT_NARROWING_LABEL)
            } else {
                String::new()
            };
            summary.push_str(&format!(
                "; passed on base but skipped, deselected or missing on the PR{accepted}: {}",
                list(&hidden)
            ));
        }
        if !pre_existing.is_empty() {
            summary.push_str(&format!(
                "; also failing on base (pre-existing): {}",
                list(&pre_existing)
            ));
        }
        if none_ran {
            summary.push_str(if none_ran_on_base {
                "; no test ran on either side, so the node cannot judge the suite"
            } else {
                "; no test ran on the PR side: a suite that runs nothing proves nothing"
            });
        }
        if base_failures.is_none() && !new.is_empty() {
            summary.push_str("; base was not run, so no failure could be found pre-existing");
        }
        self.push(
            SectionName::Tests,
            Item {
                model: model.map(str::to_owned),
                check: check_name(check),
                state,
                rule: "a failing test fails, unless it fails on base too".to_owned(),
                summary,
                numbers: Some(Numbers::Tests {
                    passed: count(TestOutcome::Passed),
                    failed: count(TestOutcome::Failed),
                    skipped: count(TestOutcome::Skipped),
                    errors: count(TestOutcome::Error),
                    pre_existing: pre_existing.len(),
                }),
            },
        );
    }

    fn routing(&mut self, model: &str) {
        let pr = self.records(Some(model), Check::Routing).iter().find_map(|record| match &record
            .outcome
        {
            Outcome::Routing { routed, line } if record.side == Side::Pr => {
                Some((*routed, line.clone()))
            }
            _ => None,
        });
        let Some((routed, line)) = pr else {
            self.pending(Some(model), Check::Routing);
            return;
        };
        let (state, summary) = match (routed, line) {
            (true, line) => {
                (State::Pass, format!("the PR server logged: {}", line.unwrap_or_default()))
            }
            // A topology names the instance and the required line it lacks.
            (false, Some(missing)) => (
                self.config.missing_routing.into(),
                format!("the PR server logged no monokernel routing: {missing}"),
            ),
            (false, None) => (
                self.config.missing_routing.into(),
                "the PR server logged no monokernel routing".to_owned(),
            ),
        };
        self.push(
            SectionName::Tests,
            Item {
                model: Some(model.to_owned()),
                check: "routing".to_owned(),
                state,
                rule: "the PR server must route through the monokernels".to_owned(),
                summary,
                numbers: None,
            },
        );
    }

    fn accuracy(&mut self, model: &str) {
        let mut sides: BTreeMap<String, BenchmarkRepeats<'_>> = BTreeMap::new();
        for record in self.records(Some(model), Check::Accuracy) {
            if let Outcome::Accuracy { benchmark, .. } = &record.outcome {
                sides.entry(benchmark.to_ascii_lowercase()).or_default().add(record);
            }
        }
        for (benchmark, records) in sides {
            if records.base.is_empty() || records.pr.is_empty() {
                // The other side's not-run record, when there is one, is its item already.
                let not_run = self.records(Some(model), Check::Accuracy).iter().any(|record| {
                    matches!(&record.outcome, Outcome::NotRun { subject: Some(subject), .. }
                        if Part::parse(subject).as_ref().and_then(Part::benchmark)
                            == Some(benchmark.as_str()))
                });
                if not_run {
                    continue;
                }
                self.push(
                    SectionName::Accuracy,
                    Item {
                        model: Some(model.to_owned()),
                        check: format!("accuracy {benchmark}"),
                        state: State::Pending,
                        rule: "every planned check reports".to_owned(),
                        summary: "only one side has reported".to_owned(),
                        numbers: None,
                    },
                );
                continue;
            }
            if let Some(item) = self.accuracy_item(model, &benchmark, &records) {
                self.push(SectionName::Accuracy, item);
            }
        }
    }

    /// One benchmark's item from its repeats (those both sides have, paired by index).
    fn accuracy_item(
        &self,
        model: &str,
        benchmark: &str,
        records: &BenchmarkRepeats<'_>,
    ) -> Option<Item> {
        let repeats = records.paired();
        let looks = Looks {
            repeats: u32::try_from(repeats.len()).unwrap_or(u32::MAX),
            cap: records.cap,
            benchmarks: self.accuracy_family.max(records.family as usize),
        };
        let pooled = accuracy::pool(&repeats)?;
        let judgement = judge_benchmark(self.config, benchmark, pooled, looks)?;
        let comparison = judgement.comparison;
        let tolerance = judgement.tolerance;
        let paired = matches!(pooled, Pooled::Paired { .. });
        let points = |x: f64| format!("{:.1}", x * 100.0);
        let p_value = if comparison.p_beyond < 0.001 {
            "p < 0.001".to_owned()
        } else {
            format!("p = {:.3}", comparison.p_beyond)
        };
        let repeats_text = format!(
            "{} of at most {} repeat{}",
            looks.repeats,
            looks.cap,
            if looks.cap == 1 { "" } else { "s" }
        );
        let (state, mut summary) = match judgement.answer {
            AccuracyAnswer::Beyond => (
                State::Fail,
                format!(
                    "the PR is below base by more than the tolerance of {} points ({p_value}, {repeats_text})",
                    points(tolerance)
                ),
            ),
            AccuracyAnswer::Within => (
                State::Pass,
                format!(
                    "not {} points below base (the lower bound {} is above -{}; {repeats_text})",
                    points(judgement.beta_drop),
                    signed_points(judgement.pass_bound),
                    points(judgement.beta_drop)
                ),
            ),
            AccuracyAnswer::Undecided => (
                State::Error,
                format!(
                    "undecided at the cap of {} repeats, low confidence: not a pass; the interval holds -{} points ({p_value}) and its lower bound {} is not above -{} points; {}",
                    looks.cap,
                    points(tolerance),
                    signed_points(judgement.pass_bound),
                    points(judgement.beta_drop),
                    undecided_words(judgement.to_decide),
                ),
            ),
            AccuracyAnswer::Open => (
                if self.completion == Completion::Final { State::Error } else { State::Pending },
                format!("open after {repeats_text}: another repeat is needed"),
            ),
        };
        let base_accuracy = ratio(repeats.iter().map(|(base, _)| (base.correct, base.questions)));
        let pr_accuracy = ratio(repeats.iter().map(|(_, pr)| (pr.correct, pr.questions)));
        let questions = repeats.first().map_or(0, |(_, pr)| pr.questions);
        summary.push_str(&format!(
            "; base {}%, PR {}%, difference {} [{}, {}] ({:.2}% interval, {}) over {} questions",
            points(base_accuracy),
            points(pr_accuracy),
            signed_points(comparison.difference),
            signed_points(comparison.interval.0),
            signed_points(comparison.interval.1),
            (1.0 - 2.0 * judgement.alpha_look) * 100.0,
            if paired { "paired, Tango's score" } else { "unpaired, Newcombe's score" },
            questions,
        ));
        Some(Item {
            model: Some(model.to_owned()),
            check: format!("accuracy {benchmark}"),
            state,
            rule: "accuracy may not drop below base by more than the benchmark's tolerance; a benchmark still undecided at its cap of repeats is not a pass".to_owned(),
            summary,
            numbers: Some(Numbers::Accuracy {
                benchmark: benchmark.to_owned(),
                base: base_accuracy,
                pr: pr_accuracy,
                difference: comparison.difference,
                interval: comparison.interval,
                questions,
                paired,
                p_value: comparison.p_beyond,
                tolerance,
                alpha: Some(judgement.alpha_look),
                repeats: Some(AccuracyRepeats {
                    judged: looks.repeats,
                    cap: looks.cap,
                    alpha: judgement.alpha,
                    beta: judgement.beta,
                    beta_drop: judgement.beta_drop,
                    pass_bound: judgement.pass_bound,
                    repeats_to_decide: judgement.to_decide.and_then(|t| t.repeats),
                    more_repeats: judgement.to_decide.and_then(|t| t.more_repeats()),
                }),
            }),
        })
    }

    fn kernels(&mut self, model: &str) {
        let samples = |side: Side| -> BTreeMap<String, f64> {
            self.records(Some(model), Check::KernelTiming)
                .iter()
                .filter(|record| record.side == side)
                .flat_map(|record| match &record.outcome {
                    Outcome::KernelTiming { kernels } => kernels.as_slice(),
                    _ => &[],
                })
                .filter_map(|kernel| median(&kernel.samples_us).map(|m| (kernel.name.clone(), m)))
                .collect()
        };
        let (base, pr) = (samples(Side::Base), samples(Side::Pr));
        let base_reported = self
            .records(Some(model), Check::KernelTiming)
            .iter()
            .any(|record| record.side == Side::Base);
        if !base_reported && !self.new_models.contains(model) {
            // Without base's timings no kernel can be compared yet.
            self.pending(Some(model), Check::KernelTiming);
            return;
        }
        let limit = self.config.kernel_max_regression.get();
        for (kernel, pr_us) in &pr {
            let (state, summary, numbers) = match base.get(kernel) {
                Some(base_us) => {
                    let change = pr_us / base_us - 1.0;
                    let state = if change > limit { State::Warn } else { State::Pass };
                    (
                        state,
                        format!(
                            "{kernel}: {base_us:.1} µs → {pr_us:.1} µs ({:+.1}%)",
                            change * 100.0
                        ),
                        Some(Numbers::Kernel {
                            kernel: kernel.clone(),
                            base_us: *base_us,
                            pr_us: *pr_us,
                            change,
                        }),
                    )
                }
                None => {
                    (State::Pass, format!("{kernel}: {pr_us:.1} µs (new: no base timing)"), None)
                }
            };
            let (state, summary) = match self.pr_script_of(model, kernel) {
                // Base's command ran the PR's own files: its number is the PR's measurement.
                Some(own) => (
                    state.max(State::Warn),
                    format!(
                        "{summary}; the PR side measured by the PR's own script (it changes {}): a reviewer reads it",
                        own.files.join(", ")
                    ),
                ),
                None => (state, summary),
            };
            self.push(
                SectionName::KernelMicrobenchmark,
                Item {
                    model: Some(model.to_owned()),
                    check: "kernel-timing".to_owned(),
                    state,
                    rule: format!("a kernel more than {:.0}% slower is a warning", limit * 100.0),
                    summary,
                    numbers,
                },
            );
        }
        if pr.is_empty() {
            self.pending(Some(model), Check::KernelTiming);
        }
    }

    /// The timing script of `kernel` (`<script>/<kernel>`) when it measures `model`'s PR side
    /// with files the PR changes.
    fn pr_script_of(&self, model: &str, kernel: &str) -> Option<&crate::job::PrScript> {
        let script = kernel.split_once('/').map_or(kernel, |(script, _)| script);
        self.pr_scripts.get(model)?.iter().find(|own| own.script == script)
    }

    /// Speed pairs and known noise of a model, per concurrency.
    fn cells(&self, model: &str) -> BTreeMap<u32, SpeedCell> {
        let mut cells: BTreeMap<u32, SpeedCell> = BTreeMap::new();
        for record in self.records(Some(model), Check::Speed) {
            match &record.outcome {
                Outcome::SpeedPair {
                    concurrency,
                    index,
                    covered,
                    base_tpot_ms,
                    pr_tpot_ms,
                    base_runs_ms,
                    ..
                } => {
                    let cell = cells.entry(*concurrency).or_default();
                    cell.covered |= *covered;
                    let pair = match base_runs_ms {
                        Some([before, after]) => Pair::bracketed(*before, *pr_tpot_ms, *after),
                        None => Pair::single(*base_tpot_ms, *pr_tpot_ms),
                    };
                    cell.pairs.push((*index, pair));
                }
                Outcome::SpeedNoise { concurrency, log_ratio_variance, samples } => {
                    cells.entry(*concurrency).or_default().noise = Some(Calibration {
                        log_ratio_variance: *log_ratio_variance,
                        samples: samples.unwrap_or(LEGACY_CALIBRATION_SAMPLES),
                    });
                }
                _ => {}
            }
        }
        for cell in cells.values_mut() {
            cell.pairs.sort_by_key(|(index, _)| *index);
        }
        cells
    }

    fn covered_cells(&self, models: &[&prgate_scope::plan::ModelPlan]) -> usize {
        models
            .iter()
            .map(|model| {
                self.cells(&model.name)
                    .values()
                    .filter(|cell| cell.covered && !cell.pairs.is_empty())
                    .count()
            })
            .sum()
    }

    fn speed(&mut self, model: &str, covered_cells: usize) {
        let cells = self.cells(model);
        if cells.values().all(|cell| cell.pairs.is_empty()) {
            self.pending(Some(model), Check::Speed);
            return;
        }
        let loss_limit = self.config.speed.threshold.get();
        for (concurrency, SpeedCell { covered, pairs, noise }) in cells {
            if pairs.is_empty() {
                continue;
            }
            let indices: Vec<u32> = pairs.iter().map(|(index, _)| *index).collect();
            let pairs: Vec<Pair> = pairs.into_iter().map(|(_, pair)| pair).collect();
            let context =
                CellContext { cells: covered_cells, gain_required: false, calibration: noise };
            let judgement = judge_cell(&pairs, self.config, &context);
            let confidence = confidence_of(judgement.loss);
            // Undecided at the cap is not a pass: neither the loss nor its absence was shown,
            // so the cell is one the run could not judge (docs/gate.md, "Fail closed").
            // A PR whose runs are shown noisier than base's by more than the stated factor is
            // reported: a passing cell warns.
            let state = match (covered, judgement.loss) {
                (false, _) => State::NotJudged,
                (true, Answer::Yes) => State::Fail,
                (true, Answer::No) if judgement.noise_growth.is_some() => State::Warn,
                (true, Answer::No) => State::Pass,
                (true, Answer::Open) => State::Pending,
                (true, Answer::Undecided) => State::Error,
            };
            let mut summary = format!(
                "TPOT {} at c={concurrency}",
                change_text(judgement.change, judgement.change_interval)
            );
            summary.push_str(&format!(", {} pairs", judgement.pairs));
            let outliers: Vec<u32> =
                judgement.outliers.iter().filter_map(|at| indices.get(*at).copied()).collect();
            if !outliers.is_empty() {
                let list: Vec<String> = outliers.iter().map(u32::to_string).collect();
                summary.push_str(&format!(
                    " ({} excluded as outliers and re-measured: pair {})",
                    outliers.len(),
                    list.join(", ")
                ));
            }
            summary.push_str(&match (covered, confidence) {
                (false, _) => "; not covered by the monokernels, so not judged".to_owned(),
                (true, Confidence::Low) => {
                    format!("; {}", undecided_text(judgement.to_decide, &self.config.speed))
                }
                (true, Confidence::Open) => "; open: more pairs are needed".to_owned(),
                (true, Confidence::High) => format!(
                    "; high confidence: P(fail | no loss) ≤ {}{}, P(pass | {:.0}% loss) ≤ {}",
                    rate(judgement.alpha),
                    if covered_cells > 1 {
                        format!(
                            " (≤ {} for the PR's {covered_cells} covered cells together)",
                            rate(judgement.family_alpha)
                        )
                    } else {
                        String::new()
                    },
                    self.config.speed.high * 100.0,
                    rate(judgement.beta)
                ),
            });
            if covered && !judgement.pr_slow.is_empty() {
                let list: Vec<String> = judgement
                    .pr_slow
                    .iter()
                    .filter_map(|at| indices.get(*at))
                    .map(u32::to_string)
                    .collect();
                summary.push_str(&format!(
                    "; {} PR run{} slow against {} own base runs, kept as the PR's: pair {}",
                    list.len(),
                    if list.len() == 1 { "" } else { "s" },
                    if list.len() == 1 { "its" } else { "their" },
                    list.join(", ")
                ));
            }
            if let (true, Some(growth)) = (covered, judgement.noise_growth) {
                summary.push_str(&format!(
                    "; the PR's runs are {growth:.1}× as noisy as base's (over the {:.1}× of speed.max-noise-growth), so the test used the pairs' own variance",
                    self.config.speed.max_noise_growth
                ));
            }
            if covered {
                summary.push_str(&format!("; {}", noise_text(&judgement, noise)));
            }
            let test = SpeedTest {
                run_cv: judgement.noise.map(|n| n.run_cv),
                degrees_of_freedom: judgement.noise.map(|n| n.degrees_of_freedom),
                in_band_differences: judgement.noise.map_or(0, |n| n.in_band_differences),
                calibration_samples: noise.map(|c| c.samples),
                calibration_df: judgement.noise.map_or(0.0, |n| n.calibration_df),
                alpha: judgement.alpha,
                beta: judgement.beta,
                outliers,
                family_alpha: Some(judgement.family_alpha),
                pr_noise_ratio: judgement.noise.and_then(|n| n.pr_noise_ratio),
                own_variance: judgement.noise.is_some_and(|n| n.own_variance),
                calibration_stale: judgement.calibration_stale,
                pr_slow: judgement
                    .pr_slow
                    .iter()
                    .filter_map(|at| indices.get(*at).copied())
                    .collect(),
            };
            self.push(
                SectionName::E2ePerformance,
                Item {
                    model: Some(model.to_owned()),
                    check: "speed".to_owned(),
                    state,
                    rule: format!(
                        "a median-TPOT loss over {:.0}% at a covered concurrency fails",
                        loss_limit * 100.0
                    ),
                    summary,
                    numbers: Some(Numbers::Speed {
                        concurrency,
                        covered,
                        base_ms: judgement.base_median_ms,
                        pr_ms: judgement.pr_median_ms,
                        change: judgement.change,
                        interval: judgement.change_interval,
                        pairs: judgement.pairs,
                        confidence,
                        test: Some(Box::new(test)),
                        thresholds: Some(SpeedThresholds {
                            max_loss: loss_limit,
                            min_gain: self.config.gain.test.threshold.get(),
                            gain_required: self.gain_required,
                        }),
                        undecided: judgement.to_decide.filter(|_| covered).map(|to_decide| {
                            SpeedUndecided {
                                bounds: (to_decide.lower, to_decide.upper),
                                zone: (to_decide.low, to_decide.high),
                                pairs_to_decide: to_decide.pairs,
                                more_pairs: to_decide.more_pairs(),
                                more_runs: to_decide.more_runs(),
                            }
                        }),
                    }),
                },
            );
        }
    }

    /// The gain rule: one covered cell of a full-tier model must show the required gain.
    fn gain_verdict(&mut self, models: &[&prgate_scope::plan::ModelPlan]) {
        // The models the PR changed; a PR that changed only shared code shows its gain on any.
        let full: Vec<&prgate_scope::plan::ModelPlan> =
            models.iter().copied().filter(|model| model.tier == Tier::Full).collect();
        let full = if self.covered_cells(&full) > 0 { full } else { models.to_vec() };
        let cells = self.covered_cells(&full);
        // Speed evidence still to come could yet show the gain.
        let missing =
            full.iter().any(|model| self.records(Some(&model.name), Check::Speed).is_empty());
        let min_gain = self.config.gain.test.threshold.get();
        let rule = format!(
            "a [Perf] or [Feat] PR needs a {:.0}% median-TPOT gain at one covered concurrency",
            min_gain * 100.0
        );
        let mut best: Option<(State, String)> = None;
        let mut open = false;
        for model in &full {
            for (concurrency, SpeedCell { covered, pairs, noise }) in self.cells(&model.name) {
                if !covered || pairs.is_empty() {
                    continue;
                }
                let pairs: Vec<Pair> = pairs.into_iter().map(|(_, pair)| pair).collect();
                let context = CellContext { cells, gain_required: true, calibration: noise };
                let judgement = judge_cell(&pairs, self.config, &context);
                let where_ = format!(
                    "{} c={concurrency}: TPOT {}",
                    model.name,
                    change_text(judgement.change, judgement.change_interval)
                );
                // A gain still undecided at the cap was not shown: it counts as none.
                match judgement.gain {
                    Some(Answer::Yes) => best = Some((State::Pass, where_)),
                    Some(Answer::Open) => open = true,
                    Some(Answer::No | Answer::Undecided) | None => {}
                }
            }
        }
        let (state, summary) = match best {
            Some(found) => found,
            None if open || missing => (
                State::Pending,
                "no covered concurrency has shown the gain yet; more pairs or models are to come"
                    .to_owned(),
            ),
            None if cells == 0 => {
                (State::Pending, "no covered concurrency has speed evidence".to_owned())
            }
            None => (
                State::Fail,
                format!("no covered concurrency shows a {:.0}% gain", min_gain * 100.0),
            ),
        };
        self.push(
            SectionName::E2ePerformance,
            Item { model: None, check: "gain".to_owned(), state, rule, summary, numbers: None },
        );
    }
}

/// Whether a base-side not-run of `kind` leaves the PR's own results to be judged without base
/// (a warning): a coverage gap, or a test suite that broke on base while the PR's ran.
fn judged_without_base(kind: NotRunKind, base_side: bool, measured_pr: bool, check: Check) -> bool {
    base_side
        && measured_pr
        && match kind {
            NotRunKind::CoverageGap => true,
            NotRunKind::Broken => is_tests(check),
            NotRunKind::CannotJudge | NotRunKind::NothingToCheck => false,
        }
}

/// Whether `check` is a test suite (judged on the PR's results alone when base is missing).
fn is_tests(check: Check) -> bool {
    matches!(
        check,
        Check::UnitTests | Check::KernelTests | Check::ServingTests | Check::CommonTests
    )
}

/// Whether the base side of `record`'s step broke too (a broken or unjudgeable not-run of the
/// same part on the base side).
fn broke_on_base(records: &[&Evidence], record: &Evidence) -> bool {
    let Outcome::NotRun { subject, .. } = &record.outcome else { return false };
    records.iter().any(|other| {
        other.side == Side::Base
            && matches!(&other.outcome, Outcome::NotRun { reason, subject: base_subject, .. }
                if base_subject == subject
                    && matches!(reason.kind(), NotRunKind::Broken | NotRunKind::CannotJudge))
    })
}

/// A rule's findings as one line: a finding written as sentences is followed by a space, a
/// phrase by `; `.
fn findings_text(findings: &[crate::rules::Finding]) -> String {
    let mut text = String::new();
    for finding in findings {
        if !text.is_empty() {
            text.push_str(if text.ends_with('.') { " " } else { "; " });
        }
        text.push_str(&finding.message);
    }
    text
}

/// An error rate as a percentage.
fn rate(rate: f64) -> String {
    let percent = rate * 100.0;
    if percent >= 1.0 { format!("{percent:.0}%") } else { format!("{percent:.2}%") }
}

/// The noise a cell's test used, in words: what the comment shows as its calibration.
fn noise_text(judgement: &CellJudgement, calibration: Option<Calibration>) -> String {
    let stored = match calibration {
        Some(c) if judgement.calibration_stale => format!(
            "the node's calibration ({} differences, CV {:.1}%) not used: this run's A/A contradicts it, so the runner records it afresh",
            c.samples,
            (c.log_ratio_variance / 2.0).sqrt() * 100.0
        ),
        Some(c) => format!("the node's calibration ({} differences)", c.samples),
        None => "no node calibration".to_owned(),
    };
    match judgement.noise {
        Some(noise) if noise.own_variance => format!(
            "noise CV {:.1}%{} from {} degrees of freedom (the pairs' own spread: larger than base's {} in-band A/A predict; {stored})",
            noise.run_cv * 100.0,
            if noise.floored { " (the min-cv floor)" } else { "" },
            noise.degrees_of_freedom.round(),
            noise.in_band_differences,
        ),
        Some(noise) => format!(
            "noise CV {:.1}%{} from {} degrees of freedom ({} in-band A/A, {stored})",
            noise.run_cv * 100.0,
            if noise.floored { " (the min-cv floor)" } else { "" },
            noise.degrees_of_freedom.round(),
            noise.in_band_differences,
        ),
        None => format!("noise not yet known ({stored})"),
    }
}

fn confidence_of(answer: Answer) -> Confidence {
    match answer {
        Answer::Yes | Answer::No => Confidence::High,
        Answer::Undecided => Confidence::Low,
        Answer::Open => Confidence::Open,
    }
}

/// A cell undecided at the pair cap, in words: the bounds its test reached, and what more
/// pairs would decide it and what they cost in runs.
fn undecided_text(to_decide: Option<ToDecide>, speed: &crate::config::SequentialConfig) -> String {
    let percent = |x: f64| format!("{:+.1}%", x * 100.0);
    let cap = speed.max_pairs;
    let Some(to_decide) = to_decide else {
        return format!(
            "undecided at the pair cap ({cap} kept pairs) with no noise estimate: not a pass"
        );
    };
    let reached = format!(
        "undecided at the pair cap ({cap} kept pairs), so not a pass: the loss test's bounds reached [{}, {}], and a fail needs the lower above {}, a pass the upper below {}",
        percent(to_decide.lower),
        percent(to_decide.upper),
        percent(to_decide.low),
        percent(to_decide.high),
    );
    match (to_decide.pairs, to_decide.more_pairs(), to_decide.more_runs()) {
        (Some(pairs), Some(more), Some(runs)) => format!(
            "{reached}; at this noise and change about {more} more pairs ({runs} more runs) would decide it: speed.max-pairs = {pairs} in base's [gate.speed] table, or a quieter node"
        ),
        _ => format!(
            "{reached}; at this noise and change even {} pairs would not decide it: the change sits on the loss line, or the node is too noisy",
            crate::speed::TO_DECIDE_LIMIT
        ),
    }
}

fn change_text(change: Option<f64>, interval: Option<(f64, f64)>) -> String {
    let percent = |x: f64| format!("{:+.1}%", x * 100.0);
    match (change, interval) {
        (Some(change), Some((low, high))) => {
            format!("{} [{}, {}]", percent(change), percent(low), percent(high))
        }
        (Some(change), None) => percent(change),
        _ => "unknown".to_owned(),
    }
}

fn signed_points(x: f64) -> String {
    format!("{:+.1}", x * 100.0)
}

fn list(ids: &[&str]) -> String {
    const SHOWN: usize = 10;
    let mut text = ids.iter().take(SHOWN).copied().collect::<Vec<_>>().join(", ");
    if ids.len() > SHOWN {
        text.push_str(&format!(" and {} more", ids.len() - SHOWN));
    }
    text
}

#[cfg(test)]
mod tests;
