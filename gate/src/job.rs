//! The job plan: what a run must produce, made once from the plan, the recipes of both sides
//! and the node, before any step runs.
//!
//! Everything downstream reads it: the step loop iterates its targets, the progress line and
//! the comment count its steps, the SLURM executor knows from it what a job that died left
//! unrecorded, and the gate checks that every expected step has evidence
//! ([`JobPlan::unaccounted`]). Nothing re-derives "what this plan must produce". The runner
//! builds it (`prgate_runner::job`, which reads the recipes); this module is its wire format
//! and the rules that read it, so that the gate, which does no I/O, can judge against it.
//!
//! # The JSON format (`job.json` in the results directory, `schema_version` 1)
//!
//! ```json
//! {
//!   "schema_version": 1,
//!   "pr_commit": "<40 hex>", "base_commit": "<40 hex>",
//!   "family": 4,                         // covered speed cells of the whole run
//!   "targets": [
//!     { "model": "kimi_k31",             // null for the common checks
//!       "tier": "full", "new": false,
//!       "recipe": { "base": { "state": "parsed", "path": "test/e2e/kimi_k31.toml",
//!                             "hash": "sha256:..." },
//!                   "pr":   { "state": "missing", "path": "test/e2e/kimi_k31.toml" } },
//!       "steps": [
//!         { "check": "unit-tests", "side": "pr", "part": null, "expect": { "kind": "run" } },
//!         { "check": "accuracy", "side": "pr", "part": "gpqa",
//!           "expect": { "kind": "blocked", "reason": "gated-dataset", "detail": "..." } },
//!         { "check": "kernel-timing", "side": "pr", "part": null,
//!           "expect": { "kind": "nothing", "why": "the recipe has no kernel timing scripts" } },
//!         { "check": "speed", "side": "both", "part": "concurrency-64",
//!           "expect": { "kind": "run" } } ] } ]
//! }
//! ```
//!
//! A recipe `state` is `parsed` (with its `hash`), `missing`, `invalid` (with `hash` and
//! `error`), or `no-tree` (the base side of a model new in the PR). When both sides' trees have
//! the recipe file and its bytes differ, `recipe` also has a `diff` ([`RecipeDiff`]:
//! `{"text": "@@ -3,1 +3,1 @@\n-tp = 8\n+tp = 4\n", "omitted": 0}`), which the comment shows,
//! and a `contract` ([`Contract`], left out when empty): the differences of the PR's recipe
//! from base's and what each does. `accept_narrowing` (left out when false) is a maintainer's
//! acceptance of a narrowing. A step is a [`StepId`]
//! without its model (the target's); `part` is a benchmark's name (lowercase), or
//! `concurrency-C` for a speed cell (whose evidence is its pairs `concurrency-C-pair-I`, its
//! calibration `concurrency-C-noise`, or its not-run); an accuracy benchmark's evidence is its
//! repeats, `<benchmark>@repeat-R` (or, written before repeats, one record named by it). `expect` is `run` (it must produce
//! evidence), `blocked` (known before the run not to be able to run here: the runner records it
//! not-run with that `reason`) or `nothing` (the recipe asks nothing of it: no evidence, and the
//! verdict says "nothing to check"). Readers ignore fields they do not know; a field is never
//! removed or changed in meaning without raising `schema_version`.
//!
//! What it leaves to others: reading recipes and trees (the runner), judging evidence (the
//! verdict).

use std::fmt;

use prgate_scope::plan::Tier;
use serde::{Deserialize, Serialize};

use crate::evidence::{Check, Evidence, NotRunReason, Outcome, Side};

/// The PR label by which a maintainer accepts a narrowing of the contract ([`Contract`]).
pub const ACCEPT_NARROWING_LABEL: &str = "accept-narrowing";

/// The version of the job plan's format.
pub const SCHEMA_VERSION: u32 = 1;

/// What a run must produce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobPlan {
    pub schema_version: u32,
    pub pr_commit: String,
    pub base_commit: String,
    /// How many covered speed cells the whole run judges together (the speed family).
    pub family: u32,
    pub targets: Vec<Target>,
    /// A maintainer approved the PR's narrowing of the contract (the `accept-narrowing` label,
    /// `prgate run --accept-narrowing`): a narrowing is then a warning, not a failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accept_narrowing: bool,
}

/// A model of the plan, or the common checks (`model` is `None`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub model: Option<String>,
    pub tier: Tier,
    /// New in the PR: no base tree.
    #[serde(default)]
    pub new: bool,
    pub recipe: Recipes,
    pub steps: Vec<ExpectedStep>,
}

/// A target's recipe on each side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipes {
    pub base: RecipeState,
    pub pr: RecipeState,
    /// The PR's recipe file against the base side's, when both trees have one and their bytes
    /// differ; `None` otherwise (and in a job plan written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<RecipeDiff>,
    /// What both sides run by: the base side's recipe (the contract) and how the PR's differs.
    #[serde(default, skip_serializing_if = "Contract::is_empty")]
    pub contract: Contract,
    /// The kernel timing scripts whose files the PR changes: on the PR side base's command runs
    /// the PR's own script, so its timings are marked as measured by it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pr_scripts: Vec<PrScript>,
    /// The files the PR changes that base's test selections run on the PR side (the file a
    /// selection names, or one below a folder it names): there the PR's tests are its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pr_tests: Vec<String>,
}

impl Recipes {
    /// Both sides' recipe states, before the diff, the contract and the PR's scripts are known.
    pub fn of(base: RecipeState, pr: RecipeState) -> Recipes {
        let (diff, contract) = (None, Contract::default());
        Recipes { base, pr, diff, contract, pr_scripts: Vec::new(), pr_tests: Vec::new() }
    }
}

/// A kernel timing script of base's recipe that runs, on the PR side, files the PR changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrScript {
    /// The script's name in the recipe (its kernels are `<script>/<kernel>`).
    pub script: String,
    /// The changed files its command names.
    pub files: Vec<String>,
}

/// The contract a model is measured by: the base side's recipe, for both sides. The PR decides
/// only its own side's server command; every other difference of its recipe is a change
/// listed here (`prgate_runner::recipe::contract` decides them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contract {
    /// The model has no base recipe (new in the PR, or none on base): it runs by its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own: bool,
    /// Every difference of the PR's recipe from base's, in the recipe's key order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ContractChange>,
}

impl Contract {
    /// Nothing to say: the model runs by base's recipe and the PR's is the same.
    pub fn is_empty(&self) -> bool {
        !self.own && self.changes.is_empty()
    }

    /// The changes that narrow what is measured.
    pub fn narrowings(&self) -> impl Iterator<Item = &ContractChange> {
        self.changes.iter().filter(|change| change.effect == Effect::Narrowing)
    }
}

/// One difference of the PR's recipe from base's: the key (`speed.covered`,
/// `accuracy.gsm8k.limit`), both values as text (`-` when a side has none), and what it does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContractChange {
    pub key: String,
    pub base: String,
    pub pr: String,
    pub effect: Effect,
}

/// What a difference of the PR's recipe does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Effect {
    /// The PR's own side: its server command. Used on the PR side.
    Own,
    /// Measures more (a cell added, a request count raised): shown; added cells run.
    Widening,
    /// Changes how it is measured, neither more nor less: shown, base's value is used.
    Changed,
    /// Measures less (a cell, benchmark, suite or test removed, a limit or request count
    /// lowered, a requirement this node cannot meet that base's can): base's value is used,
    /// and the verdict fails unless a maintainer accepted it.
    Narrowing,
}

impl Effect {
    /// The word the comment shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Own => "PR's own side",
            Effect::Widening => "widening",
            Effect::Changed => "changed, base's used",
            Effect::Narrowing => "narrowing",
        }
    }
}

/// A recipe's change against the base side's, as a reviewer reads it: the hunks of a unified
/// diff of the two files' text (`@@ -a,b +c,d @@` lines, then lines that start with ` `, `-`
/// or `+`), with two lines of context. The runner makes it (`prgate_runner::job`): the node's
/// secret values redacted, then cut to a few lines; `omitted` says how many lines were left out
/// at the end. Like all PR text, it is data: shown escaped, in a code block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeDiff {
    pub text: String,
    #[serde(default)]
    pub omitted: usize,
}

/// A recipe as one side's tree has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum RecipeState {
    Parsed {
        path: String,
        hash: String,
    },
    Missing {
        path: String,
    },
    Invalid {
        path: String,
        hash: String,
        error: String,
    },
    /// The base side of a model new in the PR: there is no tree to read.
    NoTree,
}

/// One step a target must account for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedStep {
    pub check: Check,
    pub side: Side,
    #[serde(default, with = "part_text")]
    pub part: Option<Part>,
    pub expect: Expect,
}

/// What a step is expected to produce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Expect {
    /// Evidence: a measurement, or a not-run record that says why there is none.
    Run,
    /// Known before the run not to be able to run here: recorded not-run with this reason.
    Blocked { reason: NotRunReason, detail: String },
    /// The recipe asks nothing of it.
    Nothing { why: String },
}

/// What tells apart several steps of one check on one side.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// An accuracy benchmark (lowercase), or any other named part of a check.
    Named(String),
    /// A speed cell: one concurrency, judged from its pairs.
    Cell { concurrency: u32 },
    /// One pair of a speed cell.
    Pair { concurrency: u32, index: u32 },
    /// A speed cell's calibration.
    Noise { concurrency: u32 },
    /// One repeat of an accuracy benchmark (lowercase): the benchmark's step is judged from
    /// its repeats, as a speed cell from its pairs.
    Repeat { benchmark: String, index: u32 },
}

impl Part {
    /// A named part (lowercased).
    pub fn named(name: &str) -> Part {
        Part::Named(name.to_lowercase())
    }

    /// Reads a part's text (the events' and the not-run records' `subject`): the speed forms
    /// `concurrency-C`, `concurrency-C-pair-I` and `concurrency-C-noise`, else a name. `None`
    /// for an empty text.
    pub fn parse(text: &str) -> Option<Part> {
        if text.is_empty() {
            return None;
        }
        if let Some((benchmark, index)) = text.rsplit_once(REPEAT_SEPARATOR)
            && let Ok(index) = index.parse::<u32>()
            && !benchmark.is_empty()
        {
            return Some(Part::Repeat { benchmark: benchmark.to_lowercase(), index });
        }
        let speed = text.strip_prefix("concurrency-").and_then(|rest| {
            let (number, tail) = rest.split_once('-').unwrap_or((rest, ""));
            let concurrency: u32 = number.parse().ok()?;
            if tail.is_empty() {
                return Some(Part::Cell { concurrency });
            }
            if tail == "noise" {
                return Some(Part::Noise { concurrency });
            }
            let index: u32 = tail.strip_prefix("pair-")?.parse().ok()?;
            Some(Part::Pair { concurrency, index })
        });
        Some(speed.unwrap_or_else(|| Part::named(text)))
    }

    /// One repeat of a benchmark (lowercased).
    pub fn repeat(benchmark: &str, index: u32) -> Part {
        Part::Repeat { benchmark: benchmark.to_lowercase(), index }
    }

    /// The accuracy benchmark this part is, or is a repeat of.
    pub fn benchmark(&self) -> Option<&str> {
        match self {
            Part::Named(name) | Part::Repeat { benchmark: name, .. } => Some(name),
            Part::Cell { .. } | Part::Pair { .. } | Part::Noise { .. } => None,
        }
    }

    /// The speed cell this part belongs to, when it is one of a cell's.
    pub fn concurrency(&self) -> Option<u32> {
        match self {
            Part::Named(_) | Part::Repeat { .. } => None,
            Part::Cell { concurrency }
            | Part::Pair { concurrency, .. }
            | Part::Noise { concurrency } => Some(*concurrency),
        }
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Part::Named(name) => f.write_str(name),
            Part::Cell { concurrency } => write!(f, "concurrency-{concurrency}"),
            Part::Pair { concurrency, index } => {
                write!(f, "concurrency-{concurrency}-pair-{index}")
            }
            Part::Noise { concurrency } => write!(f, "concurrency-{concurrency}-noise"),
            Part::Repeat { benchmark, index } => write!(f, "{benchmark}{REPEAT_SEPARATOR}{index}"),
        }
    }
}

/// What joins a benchmark's name and a repeat's index in a part's text (`gsm8k@repeat-2`): a
/// benchmark's name has no `@` (letters, digits, `.`, `_`, `-`).
const REPEAT_SEPARATOR: &str = "@repeat-";

/// A part as its text in JSON.
mod part_text {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Part;

    pub(super) fn serialize<S: Serializer>(part: &Option<Part>, s: S) -> Result<S::Ok, S::Error> {
        match part {
            Some(part) => s.collect_str(part),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Part>, D::Error> {
        Ok(Option::<String>::deserialize(d)?.as_deref().and_then(Part::parse))
    }
}

/// The identity of a step: its model (none for the common checks), check, side and part.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StepId {
    model: Option<String>,
    check: Check,
    side: Side,
    part: Option<Part>,
}

impl StepId {
    pub fn new(model: Option<&str>, check: Check, side: Side, part: Option<Part>) -> StepId {
        StepId { model: model.map(str::to_owned), check, side, part }
    }

    /// The step a record is the evidence of.
    pub fn of(record: &Evidence) -> StepId {
        let part = match &record.outcome {
            Outcome::Accuracy { benchmark, repeat: Some(repeat), .. } => {
                Some(Part::repeat(benchmark, repeat.index))
            }
            Outcome::Accuracy { benchmark, repeat: None, .. } => Some(Part::named(benchmark)),
            Outcome::NotRun { subject, .. } => subject.as_deref().and_then(Part::parse),
            Outcome::SpeedPair { concurrency, index, .. } => {
                Some(Part::Pair { concurrency: *concurrency, index: *index })
            }
            Outcome::SpeedNoise { concurrency, .. } => {
                Some(Part::Noise { concurrency: *concurrency })
            }
            Outcome::Tests { .. } | Outcome::Routing { .. } | Outcome::KernelTiming { .. } => None,
        };
        StepId::new(record.model.as_deref(), record.check, record.side, part)
    }

    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    pub fn check(&self) -> Check {
        self.check
    }

    pub fn side(&self) -> Side {
        self.side
    }

    pub fn part(&self) -> Option<&Part> {
        self.part.as_ref()
    }
}

impl fmt::Display for StepId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let model = self.model.as_deref().unwrap_or("the common checks");
        let side = self.side.as_str();
        write!(f, "{} of {model} on the {side} side", self.check.describe())?;
        match &self.part {
            Some(part) => write!(f, " ({part})"),
            None => Ok(()),
        }
    }
}

/// The checks a tier runs, in the order the report lists them (none on tier `none`).
pub fn tier_checks(tier: Tier) -> &'static [Check] {
    match tier {
        Tier::Full => &[
            Check::UnitTests,
            Check::KernelTests,
            Check::ServingTests,
            Check::Routing,
            Check::Accuracy,
            Check::KernelTiming,
            Check::Speed,
        ],
        Tier::Smoke => &[
            Check::UnitTests,
            Check::KernelTests,
            Check::ServingTests,
            Check::Routing,
            Check::Speed,
        ],
        Tier::None => &[],
    }
}

/// The side a whole-check not-run record is written on.
pub fn whole_check_side(check: Check) -> Side {
    if check == Check::Speed { Side::Both } else { Side::Pr }
}

impl Target {
    /// The target's name in words: its model, or `common`.
    pub fn name(&self) -> &str {
        self.model.as_deref().unwrap_or("common")
    }

    /// The checks this target has steps of, in the report's order.
    pub fn checks(&self) -> Vec<Check> {
        let mut checks: Vec<Check> = Vec::new();
        for step in &self.steps {
            if !checks.contains(&step.check) {
                checks.push(step.check);
            }
        }
        checks
    }

    /// Its steps of `check`.
    pub fn steps_of(&self, check: Check) -> impl Iterator<Item = &ExpectedStep> {
        self.steps.iter().filter(move |step| step.check == check)
    }

    /// The id of one of its steps.
    pub fn step_id(&self, step: &ExpectedStep) -> StepId {
        StepId::new(self.model.as_deref(), step.check, step.side, step.part.clone())
    }

    /// The steps that must produce evidence (`run` or `blocked`).
    pub fn evidence_steps(&self) -> impl Iterator<Item = StepId> + '_ {
        self.steps
            .iter()
            .filter(|step| !matches!(step.expect, Expect::Nothing { .. }))
            .map(|step| self.step_id(step))
    }
}

impl JobPlan {
    /// The job plan of a plan that runs nothing (no model on a tier, no common checks): no
    /// target, no covered cell.
    pub fn empty(pr_commit: &str, base_commit: &str) -> JobPlan {
        JobPlan {
            schema_version: SCHEMA_VERSION,
            pr_commit: pr_commit.to_owned(),
            base_commit: base_commit.to_owned(),
            family: 0,
            targets: Vec::new(),
            accept_narrowing: false,
        }
    }

    /// Whether this is a job plan of `plan`: made for its head (the PR's commit) and its
    /// base-side commit (the merge-base, else the base). A job plan of other commits says
    /// nothing about what a run of `plan` had to produce.
    pub fn is_of(&self, plan: &prgate_scope::Plan) -> bool {
        self.pr_commit == plan.head.sha && self.base_commit == plan.base_side_commit()
    }

    /// The target of `model` (`None`: the common checks).
    pub fn target(&self, model: Option<&str>) -> Option<&Target> {
        self.targets.iter().find(|target| target.model.as_deref() == model)
    }

    /// How many accuracy benchmarks the run judges together: the (model, benchmark) steps the
    /// PR side must produce evidence of. The gate divides accuracy's alpha over them.
    pub fn accuracy_family(&self) -> u32 {
        let benchmarks = self
            .evidence_steps()
            .filter(|step| step.check() == Check::Accuracy && step.side() == Side::Pr)
            .count();
        u32::try_from(benchmarks).unwrap_or(u32::MAX)
    }

    /// Every step that must produce evidence, over all targets.
    pub fn evidence_steps(&self) -> impl Iterator<Item = StepId> + '_ {
        self.targets.iter().flat_map(Target::evidence_steps)
    }

    /// The expected steps that no record of `records` accounts for.
    pub fn unaccounted(&self, records: &[Evidence]) -> Vec<StepId> {
        self.evidence_steps().filter(|step| !accounted(step, records)).collect()
    }
}

/// Whether a record accounts for `step`: a record of the step itself; for a speed cell, one of
/// its pairs or its not-run; for an accuracy benchmark, one of its repeats; or a not-run of the whole check (or of the step's part) on the side
/// the step loop writes whole-check records on.
pub fn accounted(step: &StepId, records: &[Evidence]) -> bool {
    records.iter().any(|record| {
        if record.check != step.check || record.model.as_deref() != step.model() {
            return false;
        }
        let id = StepId::of(record);
        let not_run = matches!(record.outcome, Outcome::NotRun { .. });
        if not_run && record.side == whole_check_side(step.check) {
            match (id.part(), step.part()) {
                (None, _) => return true,
                (Some(part), Some(wanted)) if part == wanted => return true,
                _ => {}
            }
        }
        if record.side != step.side {
            return false;
        }
        match (step.part(), id.part()) {
            (None, _) => true,
            (Some(Part::Cell { concurrency }), Some(part)) => {
                part.concurrency() == Some(*concurrency) && !matches!(part, Part::Noise { .. })
            }
            // A benchmark is accounted for by any of its repeats.
            (Some(Part::Named(name)), Some(Part::Repeat { benchmark, .. })) => name == benchmark,
            (Some(wanted), Some(part)) => part == wanted,
            (Some(_), None) => false,
        }
    })
}

#[cfg(test)]
mod tests;
