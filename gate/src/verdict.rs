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
//!
//! This module holds the format's types and the judging loop; each section's items are built
//! in its own submodule (`scope`, `test_results`, `accuracy_scores`, `kernels`,
//! `e2e_performance`).

use std::collections::{BTreeMap, BTreeSet};

use prgate_scope::plan::{ModelPlan, Plan, Tier};
use serde::{Deserialize, Serialize};

use crate::config::{GateConfig, Severity};
use crate::evidence::{Check, Evidence, EvidenceError, Outcome, validate};
use crate::job::{JobPlan, RecipeDiff, tier_checks};
use crate::rules::RuleOutcome;
use crate::speed::{Calibration, Pair};

mod accuracy_scores;
mod e2e_performance;
mod kernels;
mod scope;
mod test_results;

use scope::check_against_plan;
use test_results::moved_test_modules;

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

impl Item {
    /// An item decided in words alone: a rule stated, with no numbers behind it.
    pub(crate) fn worded(
        model: Option<String>,
        check: impl Into<String>,
        state: State,
        rule: impl Into<String>,
        summary: impl Into<String>,
    ) -> Item {
        Item {
            model,
            check: check.into(),
            state,
            rule: rule.into(),
            summary: summary.into(),
            numbers: None,
        }
    }
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
    pub repeats_to_decide: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more_repeats: Option<usize>,
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

/// A verdict's result as a reader is told it: `result_of` folds a section's warning or
/// author-provided check into a pass, and the headline tells that pass apart again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Headline {
    /// Passed, and no section warned. This and [`Headline::PassWithWarnings`] are what the exit
    /// code and the commit status count as a pass.
    Pass,
    /// Passed, and some section is [`State::Warn`] or [`State::AuthorProvided`].
    PassWithWarnings,
    /// Checks are still open.
    Pending,
    /// Some check could not be judged ([`State::Error`]): never a pass.
    CannotJudge,
    Fail,
}

impl Verdict {
    /// The result as a reader is told it. A result of `warn` or `author-provided` (which
    /// `result_of` does not give) is a pass with warnings; `nothing-to-check` and `not-judged`
    /// are a pass.
    pub fn headline(&self) -> Headline {
        match self.result {
            State::Fail => Headline::Fail,
            State::Error => Headline::CannotJudge,
            State::Pending => Headline::Pending,
            State::Warn | State::AuthorProvided => Headline::PassWithWarnings,
            State::Pass | State::NothingToCheck | State::NotJudged => {
                let warned = self
                    .sections
                    .iter()
                    .any(|section| matches!(section.state, State::Warn | State::AuthorProvided));
                if warned { Headline::PassWithWarnings } else { Headline::Pass }
            }
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
    let inputs = JudgeInputs { plan, job, evidence, config };
    let mut judge = Judge::new(&inputs, completion, gain_required);
    judge.items.insert(SectionName::Rules, rule_items(&rules));
    judge.scope(plan);
    if let Some(job) = job {
        for target in &job.targets {
            judge.contract(target);
            judge.pr_tests(target);
        }
    }
    let models: Vec<_> = plan.running_models().collect();
    judge.models(&models, job);
    if gain_required {
        judge.gain_verdict(&models);
    }
    if plan.common.selected {
        judge.common_tests(job);
    }
    let sections = judge.sections();
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
        result: result_of(&sections),
        rules,
        sections,
        author_must_provide: judge.author.into_iter().collect(),
        checks,
        recipe_changes: job.map(recipe_changes).unwrap_or_default(),
    })
}

/// What a [`Judge`] is built from.
struct JudgeInputs<'a> {
    plan: &'a Plan,
    job: Option<&'a JobPlan>,
    evidence: &'a [Evidence],
    config: &'a GateConfig,
}

/// The rules' outcomes as items of the Rules section.
fn rule_items(rules: &[RuleOutcome]) -> Vec<Item> {
    rules
        .iter()
        .map(|rule| {
            Item::worded(
                None,
                rule.name.clone(),
                rule.verdict.into(),
                rule_text(&rule.name),
                if rule.findings.is_empty() {
                    "no findings".to_owned()
                } else {
                    findings_text(&rule.findings)
                },
            )
        })
        .collect()
}

/// The verdict's result: the worst section's state, where a warning still passes (the
/// [`Verdict::headline`] tells it apart).
fn result_of(sections: &[Section]) -> State {
    let worst = sections.iter().map(|section| section.state).max().unwrap_or(State::Pass);
    match worst {
        State::Fail => State::Fail,
        State::Error => State::Error,
        State::Pending => State::Pending,
        _ => State::Pass,
    }
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
    /// test id is read under its new name on the PR side (`test_results::moved_test_id`).
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
    fn new(inputs: &JudgeInputs<'a>, completion: Completion, gain_required: bool) -> Judge<'a> {
        let JudgeInputs { plan, job, evidence, config } = *inputs;
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
        Judge {
            config,
            moved_modules: moved_test_modules(plan),
            pr_scripts: job
                .into_iter()
                .flat_map(|job| &job.targets)
                .filter_map(|target| {
                    Some((target.model.clone()?, target.recipe.pr_scripts.clone()))
                })
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
        }
    }

    /// Every running model's checks (those the job plan accounts for, when there is one) and
    /// its README.
    fn models(&mut self, models: &[&ModelPlan], job: Option<&JobPlan>) {
        // The family the run declared, else the covered cells seen so far.
        let declared = self
            .evidence
            .iter()
            .filter_map(|record| match record.outcome {
                Outcome::SpeedPair { family, .. } => family,
                _ => None,
            })
            .max();
        let covered_cells =
            declared.map_or_else(|| self.covered_cells(models), |family| family as usize);
        for model in models {
            let target = job.map(|job| job.target(Some(&model.name)));
            for &check in tier_checks(model.tier) {
                match target {
                    Some(Some(target)) => {
                        if self.accounted(target, check) {
                            self.check(&model.name, check, covered_cells);
                        }
                    }
                    Some(None) => {
                        self.missing(
                            Some(&model.name),
                            check,
                            Some("the job plan has no entry for it"),
                        );
                    }
                    None => self.check(&model.name, check, covered_cells),
                }
            }
            if model.tier == Tier::Full && model.readme == Some(false) {
                self.push(
                    SectionName::Doc,
                    Item::worded(
                        Some(model.name.clone()),
                        "readme",
                        self.config.missing_readme.into(),
                        "a model on the full tier needs a README",
                        "no README",
                    ),
                );
            }
        }
    }

    /// The common tests, when the plan selects them.
    fn common_tests(&mut self, job: Option<&JobPlan>) {
        match job.map(|job| job.target(None)) {
            Some(Some(target)) => {
                if self.accounted(target, Check::CommonTests) {
                    self.tests(None, Check::CommonTests);
                }
            }
            Some(None) => {
                self.missing(None, Check::CommonTests, Some("the job plan has no entry for it"));
            }
            None => self.tests(None, Check::CommonTests),
        }
    }

    /// The sections in the comment's order, each as bad as its worst item. Once the run is
    /// over, nothing is still to come: what is open could not be judged.
    fn sections(&mut self) -> Vec<Section> {
        let order = [
            SectionName::Rules,
            SectionName::Scope,
            SectionName::Accuracy,
            SectionName::KernelMicrobenchmark,
            SectionName::E2ePerformance,
            SectionName::Tests,
            SectionName::Doc,
        ];
        order
            .iter()
            .map(|name| {
                let mut items = self.items.remove(name).unwrap_or_default();
                if self.completion == Completion::Final {
                    for item in items.iter_mut().filter(|item| item.state == State::Pending) {
                        item.state = State::Error;
                        item.summary.push_str("; the run ended before it was decided");
                    }
                }
                let state =
                    items.iter().map(|item| item.state).max().unwrap_or(State::NothingToCheck);
                Section { name: *name, state, items }
            })
            .collect()
    }

    fn push(&mut self, section: SectionName, item: Item) {
        self.items.entry(section).or_default().push(item);
    }

    fn records(&self, model: Option<&str>, check: Check) -> &[&'a Evidence] {
        self.by_step.get(&(model.map(str::to_owned), check)).map(Vec::as_slice).unwrap_or_default()
    }
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

fn list(ids: &[&str]) -> String {
    const SHOWN: usize = 10;
    let mut text = ids.iter().take(SHOWN).copied().collect::<Vec<_>>().join(", ");
    if ids.len() > SHOWN {
        text.push_str(&format!(" and {} more", ids.len() - SHOWN));
    }
    text
}

#[cfg(test)]
pub(crate) mod tests;
