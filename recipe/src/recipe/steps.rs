//! The steps a recipe makes a model's run take, by its tier: the one rule the job plan
//! (`runner::job`, which the step loop runs) and the estimate (`schedule`) both follow.
//!
//! One rule per check, for the checks of the model's tier (`gate::job::tier_checks`: kernel
//! timing and accuracy on the full tier only): a suite the recipe selects nothing for, no
//! timing script, no accuracy benchmark or no sweep expects nothing; a new model's tree steps
//! run on the PR's side alone (its baseline is SGLang's own path on the PR's tree); the speed
//! cells are the sweep's for the tier; what the node cannot run ([`Recipe::check_runs_on`]) is
//! `blocked` with its reason, and everything that needs the servers stops together when the
//! node cannot serve the model. Without a node (an estimate) nothing is blocked.
//!
//! What it leaves to others: which recipe a side runs (`contract`), a recipe that did not parse
//! (the job plan), and what the steps cost (`schedule`).

use prgate_gate::evidence::{Check, Side};
use prgate_gate::job::{Expect, ExpectedStep, Part, tier_checks, whole_check_side};
use prgate_scope::plan::Tier;

use crate::node::NodeProfile;

use super::{NotRunnable, Recipe};

/// A model's steps, and how many covered speed cells its sweep judges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipeSteps {
    pub steps: Vec<ExpectedStep>,
    pub covered_cells: u32,
}

impl Recipe {
    /// The steps this recipe makes a model of `tier` take (`new`: a model new in the PR) on
    /// `node`, or with `None` wherever it runs.
    pub fn steps(&self, tier: Tier, new: bool, node: Option<&NodeProfile>) -> RecipeSteps {
        let of = StepsOf {
            checks: tier_checks(tier),
            full: tier == Tier::Full,
            tree_sides: if new { &[Side::Pr] } else { &[Side::Base, Side::Pr] },
            recipe: self,
            blockers: node.and_then(|node| self.check_runs_on(node).err()),
        };
        let mut steps = of.tree_steps();
        // Everything that needs the servers stops together when the node cannot serve the model.
        if let Some(blocked) = of.blocked(Check::Routing, None) {
            for check in [Check::ServingTests, Check::Routing, Check::Accuracy, Check::Speed] {
                if of.in_tier(check) {
                    steps.push(step(check, whole_check_side(check), None, blocked.clone()));
                }
            }
            return RecipeSteps { steps, covered_cells: 0 };
        }
        let covered_cells = of.served_steps(&mut steps);
        RecipeSteps { steps, covered_cells }
    }
}

/// What decides a model's steps: its tier, the sides its tree runs on (the PR's alone for a
/// new model), its recipe and what the node lacks for it.
struct StepsOf<'r> {
    /// The checks the tier runs (`gate::job::tier_checks`).
    checks: &'static [Check],
    /// The full tier: the sweep's every cell, not its smoke subset.
    full: bool,
    tree_sides: &'static [Side],
    recipe: &'r Recipe,
    blockers: Option<NotRunnable>,
}

impl StepsOf<'_> {
    fn in_tier(&self, check: Check) -> bool {
        self.checks.contains(&check)
    }

    /// What blocks `check` (of `part`) on this node, as the step's expectation.
    fn blocked(&self, check: Check, part: Option<&str>) -> Option<Expect> {
        let blocker = self.blockers.as_ref()?.blocker_for(check, part)?;
        Some(Expect::Blocked { reason: blocker.reason(), detail: blocker.to_string() })
    }

    /// The steps that run in a side's tree without a server: unit and kernel tests, and (full
    /// tier) kernel timing.
    fn tree_steps(&self) -> Vec<ExpectedStep> {
        let mut steps = Vec::new();
        let tests = self.recipe.tests();
        for (check, selection) in
            [(Check::UnitTests, &tests.unit), (Check::KernelTests, &tests.kernel)]
        {
            if !self.in_tier(check) {
                continue;
            }
            if selection.is_empty() {
                let why = format!("the recipe selects no {}", check.describe());
                steps.push(step(check, Side::Pr, None, nothing(&why)));
            } else {
                steps.extend(
                    self.tree_sides.iter().map(|&side| step(check, side, None, Expect::Run)),
                );
            }
        }
        if self.in_tier(Check::KernelTiming) {
            if let Some(blocked) = self.blocked(Check::KernelTiming, None) {
                steps.push(step(Check::KernelTiming, Side::Pr, None, blocked));
            } else if self.recipe.kernel_timing().is_empty() {
                let why = nothing("the recipe has no kernel timing scripts");
                steps.push(step(Check::KernelTiming, Side::Pr, None, why));
            } else {
                steps.extend(
                    self.tree_sides
                        .iter()
                        .map(|&side| step(Check::KernelTiming, side, None, Expect::Run)),
                );
            }
        }
        steps
    }

    /// The steps against the servers: serving tests, (full tier) accuracy, routing and the
    /// speed cells; returns how many covered cells the sweep has.
    fn served_steps(&self, steps: &mut Vec<ExpectedStep>) -> u32 {
        let both = [Side::Base, Side::Pr];
        if self.in_tier(Check::ServingTests) {
            if self.recipe.tests().serving.is_empty() {
                let why = nothing("the recipe selects no serving tests");
                steps.push(step(Check::ServingTests, Side::Pr, None, why));
            } else {
                steps.extend(both.map(|side| step(Check::ServingTests, side, None, Expect::Run)));
            }
        }
        if self.in_tier(Check::Accuracy) {
            if self.recipe.accuracy().is_empty() {
                let why = nothing("the recipe has no accuracy benchmarks");
                steps.push(step(Check::Accuracy, Side::Pr, None, why));
            }
            for benchmark in self.recipe.accuracy() {
                let part = || Some(Part::named(&benchmark.name));
                match self.blocked(Check::Accuracy, Some(&benchmark.name)) {
                    Some(blocked) => steps.push(step(Check::Accuracy, Side::Pr, part(), blocked)),
                    None => steps
                        .extend(both.map(|side| step(Check::Accuracy, side, part(), Expect::Run))),
                }
            }
        }
        if self.in_tier(Check::Routing) {
            steps.extend(both.map(|side| step(Check::Routing, side, None, Expect::Run)));
        }
        if !self.in_tier(Check::Speed) {
            return 0;
        }
        let Some(sweep) = self.recipe.speed() else {
            let why = nothing("the recipe has no speed sweep");
            steps.push(step(Check::Speed, Side::Both, None, why));
            return 0;
        };
        for &concurrency in sweep.concurrencies_for(!self.full) {
            let cell = Some(Part::Cell { concurrency });
            steps.push(step(Check::Speed, Side::Both, cell, Expect::Run));
        }
        u32::try_from(sweep.covered.len()).unwrap_or(u32::MAX)
    }
}

fn step(check: Check, side: Side, part: Option<Part>, expect: Expect) -> ExpectedStep {
    ExpectedStep { check, side, part, expect }
}

fn nothing(why: &str) -> Expect {
    Expect::Nothing { why: why.to_owned() }
}
