//! One target's queue: its steps as the job plan lists them, taken by the step loop phase by
//! phase.
//!
//! The job plan (`crate::job`) is the one place that decides which steps a target has and
//! what each is expected to produce. The queue only sorts them for the loop: a step the plan
//! expects to `run` is queued, one it expects `nothing` of or knows is `blocked` is recorded as
//! the plan says ([`planned_outcome`]), and the phases (tests, kernel timing, what needs the
//! servers) keep the plan's order inside them. Like nextest's executor, which runs the list its
//! list phase built, the loop never asks the recipe which steps exist; it asks the recipe only
//! how to run a queued one, and records a queued step the recipe does not describe as such.
//!
//! What it leaves to others: deciding the steps (`crate::job`), running them (`super`).

use prgate_gate::evidence::{Check, NotRunReason, Outcome};
use prgate_gate::job::{Expect, ExpectedStep, Part, StepId, Target};

/// When a step runs in a target's job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(in crate::run) enum Phase {
    /// The test suites that need no server: unit and kernel tests, the common checks.
    Tests,
    /// The kernel timing scripts.
    KernelTiming,
    /// Everything that needs the servers: serving tests, accuracy, routing and speed.
    Served,
}

impl Phase {
    /// The phase the steps of `check` run in.
    pub(in crate::run) fn of(check: Check) -> Phase {
        match check {
            Check::UnitTests | Check::KernelTests | Check::CommonTests => Phase::Tests,
            Check::KernelTiming => Phase::KernelTiming,
            Check::ServingTests | Check::Routing | Check::Accuracy | Check::Speed => Phase::Served,
        }
    }
}

/// One step of the job plan as the loop takes it.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::run) enum Queued<'t> {
    /// Known before the run (`blocked`, `nothing`): recorded with this outcome.
    Record { step: &'t ExpectedStep, outcome: Outcome },
    /// To run: its work produces its record.
    Run(&'t ExpectedStep),
}

/// A target's steps, by phase, in the job plan's order inside each phase.
#[derive(Debug)]
pub(in crate::run) struct Queue<'t> {
    items: Vec<(Phase, Queued<'t>)>,
}

impl<'t> Queue<'t> {
    /// The queue of `target`: every step of its job plan, once.
    pub(in crate::run) fn of(target: &'t Target) -> Queue<'t> {
        let mut items: Vec<(Phase, Queued<'t>)> = target
            .steps
            .iter()
            .map(|step| {
                let queued = match planned_outcome(&step.expect) {
                    Some(outcome) => Queued::Record { step, outcome },
                    None => Queued::Run(step),
                };
                (Phase::of(step.check), queued)
            })
            .collect();
        // Stable: the plan's order stays inside a phase.
        items.sort_by_key(|(phase, _)| *phase);
        Queue { items }
    }

    /// The phases that have steps, in the order they run.
    pub(in crate::run) fn phases(&self) -> Vec<Phase> {
        let mut phases: Vec<Phase> = self.items.iter().map(|(phase, _)| *phase).collect();
        phases.dedup();
        phases
    }

    /// The steps of `phase`, in the plan's order.
    pub(in crate::run) fn phase(&self, phase: Phase) -> impl Iterator<Item = &Queued<'t>> {
        self.items.iter().filter(move |(at, _)| *at == phase).map(|(_, queued)| queued)
    }

    /// Every step of the queue, in the order the phases run.
    pub(in crate::run) fn all(&self) -> impl Iterator<Item = &Queued<'t>> {
        self.items.iter().map(|(_, queued)| queued)
    }

    /// Whether the plan has any step of `check` (whatever it expects of it).
    pub(in crate::run) fn has(&self, check: Check) -> bool {
        self.all().any(|queued| queued.step().check == check)
    }

    /// The speed cells the loop runs, in the plan's order.
    pub(in crate::run) fn cells(&self) -> Vec<u32> {
        self.all()
            .filter_map(|queued| match queued {
                Queued::Run(ExpectedStep {
                    check: Check::Speed,
                    part: Some(Part::Cell { concurrency }),
                    ..
                }) => Some(*concurrency),
                _ => None,
            })
            .collect()
    }
}

impl Queued<'_> {
    /// The plan's step.
    pub(in crate::run) fn step(&self) -> &ExpectedStep {
        match self {
            Queued::Record { step, .. } | Queued::Run(step) => step,
        }
    }
}

/// What the loop records for a step the plan knows the outcome of before the run: a `blocked`
/// step is `not-run` with the plan's reason and detail, a step it expects `nothing` of is
/// `not-run` (`nothing-to-check`) with the plan's why. `None` for a step to run.
pub(in crate::run) fn planned_outcome(expect: &Expect) -> Option<Outcome> {
    let (reason, detail) = match expect {
        Expect::Run => return None,
        Expect::Blocked { reason, detail } => (*reason, detail),
        Expect::Nothing { why } => (NotRunReason::NothingToCheck, why),
    };
    Some(Outcome::NotRun { reason, detail: detail.clone(), subject: None, failed_on: None })
}

/// The `not-run` outcome of a step the plan has the loop run but that the recipe does not
/// describe (a benchmark, a cell or a suite it has no entry for): the plan and the recipe
/// disagree, so the step is the node's to judge again, never a pass.
pub(in crate::run) fn not_described(step: &StepId) -> Outcome {
    Outcome::NotRun {
        reason: NotRunReason::Other,
        detail: format!("the job plan expects {step}, which the recipe does not describe"),
        subject: None,
        failed_on: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prgate_gate::evidence::Side;
    use prgate_gate::job::{RecipeState, Recipes};
    use prgate_scope::plan::Tier;

    fn step(check: Check, side: Side, part: Option<Part>, expect: Expect) -> ExpectedStep {
        ExpectedStep { check, side, part, expect }
    }

    fn target(steps: Vec<ExpectedStep>) -> Target {
        let state = RecipeState::Missing { path: "r.toml".to_owned() };
        Target {
            model: Some("m".to_owned()),
            tier: Tier::Full,
            new: false,
            recipe: Recipes {
                base: state.clone(),
                pr: state,
                diff: None,
                contract: Default::default(),
                pr_scripts: Vec::new(),
                pr_tests: Vec::new(),
            },
            steps,
        }
    }

    /// A step as the test reads it: its check, side, part and what the queue does with it.
    fn check(target: &Target, expect: &[(Phase, &str)]) {
        let queue = Queue::of(target);
        let got: Vec<(Phase, String)> = queue
            .phases()
            .into_iter()
            .flat_map(|phase| {
                let queue = &queue;
                queue.phase(phase).map(move |queued| {
                    let step = queued.step();
                    let what = match queued {
                        Queued::Run(_) => "run".to_owned(),
                        Queued::Record { outcome: Outcome::NotRun { reason, .. }, .. } => {
                            format!("record {reason:?}")
                        }
                        Queued::Record { .. } => "record".to_owned(),
                    };
                    let part = step.part.as_ref().map(ToString::to_string).unwrap_or_default();
                    (phase, format!("{:?} {:?} {part} {what}", step.check, step.side))
                })
            })
            .collect();
        let expect: Vec<(Phase, String)> =
            expect.iter().map(|(phase, text)| (*phase, (*text).to_owned())).collect();
        assert_eq!(got, expect);
    }

    #[test]
    fn the_queue_takes_every_step_of_the_plan_by_phase_in_the_plans_order() {
        let blocked =
            || Expect::Blocked { reason: NotRunReason::GatedDataset, detail: "no token".into() };
        let nothing = || Expect::Nothing { why: "none".into() };
        // Out of phase order on purpose: the queue sorts by phase and keeps the order inside.
        let target = target(vec![
            step(Check::Routing, Side::Base, None, Expect::Run),
            step(Check::UnitTests, Side::Base, None, Expect::Run),
            step(Check::KernelTiming, Side::Pr, None, nothing()),
            step(Check::Accuracy, Side::Pr, Some(Part::named("gpqa")), blocked()),
            step(Check::UnitTests, Side::Pr, None, Expect::Run),
            step(Check::Speed, Side::Both, Some(Part::Cell { concurrency: 8 }), Expect::Run),
        ]);
        check(
            &target,
            &[
                (Phase::Tests, "UnitTests Base  run"),
                (Phase::Tests, "UnitTests Pr  run"),
                (Phase::KernelTiming, "KernelTiming Pr  record NothingToCheck"),
                (Phase::Served, "Routing Base  run"),
                (Phase::Served, "Accuracy Pr gpqa record GatedDataset"),
                (Phase::Served, "Speed Both concurrency-8 run"),
            ],
        );
        let queue = Queue::of(&target);
        assert_eq!(queue.cells(), vec![8]);
        assert!(queue.has(Check::Accuracy) && !queue.has(Check::ServingTests));
    }

    #[test]
    fn a_planned_outcome_says_what_the_plan_says() {
        assert_eq!(planned_outcome(&Expect::Run), None);
        let blocked = Expect::Blocked { reason: NotRunReason::NoCheckpoint, detail: "d".into() };
        let nothing = Expect::Nothing { why: "the recipe selects no unit tests".into() };
        let not_run = |reason, detail: &str| Outcome::NotRun {
            reason,
            detail: detail.to_owned(),
            subject: None,
            failed_on: None,
        };
        assert_eq!(planned_outcome(&blocked), Some(not_run(NotRunReason::NoCheckpoint, "d")));
        assert_eq!(
            planned_outcome(&nothing),
            Some(not_run(NotRunReason::NothingToCheck, "the recipe selects no unit tests"))
        );
        let cell =
            StepId::new(Some("m"), Check::Speed, Side::Both, Some(Part::Cell { concurrency: 4 }));
        assert_eq!(
            not_described(&cell),
            not_run(
                NotRunReason::Other,
                "the job plan expects E2E speed of m on the both side (concurrency-4), which the recipe does not describe"
            )
        );
    }
}
