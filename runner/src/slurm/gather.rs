//! Gathering a finished job: its evidence copied into the run's results directory, and a
//! `not-run` record for every step it did not record when it did not complete.
//!
//! What a job must record is known before it runs, from the plan and the model's recipe, as
//! *slots*: a check on a side, with a part for each accuracy benchmark and speed concurrency.
//! A slot is filled by a record of its check and side (for a speed cell: a pair or its
//! `not-run`), or by a `not-run` record of the check (or of that part) on the side the step loop
//! writes whole-check records on. Serving tests, routing and accuracy have both sides even for
//! a model new in the PR (its base server is the PR tree); its tests and kernel timing have
//! the PR side only.

use std::collections::BTreeSet;

use prgate_gate::evidence::{
    Check, Evidence, NotRunReason, Outcome, Provenance, SCHEMA_VERSION, Side,
};
use prgate_scope::plan::{ModelPlan, Tier};

use crate::recipe::Recipe;
use crate::results::StepId;

/// What a target's job must record, before it runs.
#[derive(Debug)]
pub(super) enum Expected {
    /// The common checks: one pytest session per side.
    Common,
    /// A model of the plan, with its recipe when the orchestrator could read it.
    Model { plan: ModelPlan, recipe: Option<Box<Recipe>> },
}

/// The steps of `expected` (of `model`, `None` for the common checks) that `records` leave
/// unrecorded.
pub(super) fn unrecorded(
    model: Option<&str>,
    expected: &Expected,
    records: &[Evidence],
) -> Vec<StepId> {
    slots(model, expected).into_iter().filter(|slot| !filled(slot, records)).collect()
}

/// A `not-run` record of `step`.
pub(super) fn not_run_record(
    step: &StepId,
    provenance: &Provenance,
    reason: NotRunReason,
    detail: &str,
) -> Evidence {
    Evidence {
        schema_version: SCHEMA_VERSION,
        model: step.model().map(str::to_owned),
        check: step.check(),
        side: step.side(),
        provenance: provenance.clone(),
        outcome: Outcome::NotRun {
            reason,
            detail: detail.to_owned(),
            subject: step.part().map(str::to_owned),
        },
    }
}

fn slots(model: Option<&str>, expected: &Expected) -> Vec<StepId> {
    let both = [Side::Base, Side::Pr];
    let (plan, recipe) = match expected {
        Expected::Common => {
            return both.map(|side| StepId::new(None, Check::CommonTests, side, None)).to_vec();
        }
        Expected::Model { plan, recipe } => (plan, recipe.as_deref()),
    };
    let tree_sides: &[Side] = if plan.new { &[Side::Pr] } else { &both };
    let full = plan.tier == Tier::Full;
    let mut slots = Vec::new();
    let mut add = |check: Check, sides: &[Side], part: Option<&str>| {
        for &side in sides {
            slots.push(StepId::new(model, check, side, part));
        }
    };
    add(Check::UnitTests, tree_sides, None);
    add(Check::KernelTests, tree_sides, None);
    add(Check::ServingTests, &both, None);
    add(Check::Routing, &both, None);
    if full {
        add(Check::KernelTiming, tree_sides, None);
        match recipe.map(Recipe::accuracy).filter(|benchmarks| !benchmarks.is_empty()) {
            Some(benchmarks) => {
                for benchmark in benchmarks {
                    add(Check::Accuracy, &both, Some(&benchmark.name));
                }
            }
            None => add(Check::Accuracy, &both, None),
        }
    }
    match recipe.and_then(Recipe::speed) {
        Some(sweep) => {
            for concurrency in sweep.concurrencies_for(!full) {
                add(Check::Speed, &[Side::Both], Some(&format!("concurrency-{concurrency}")));
            }
        }
        None => add(Check::Speed, &[Side::Both], None),
    }
    slots
}

/// Whether a record fills `slot`.
fn filled(slot: &StepId, records: &[Evidence]) -> bool {
    records.iter().any(|record| {
        let step = StepId::of(record);
        if step.check() != slot.check() || step.model() != slot.model() {
            return false;
        }
        let not_run = matches!(record.outcome, Outcome::NotRun { .. });
        // A whole-check (or whole-part) not-run on the side the step loop writes them on.
        if not_run && step.side() == whole_check_side(slot.check()) {
            match (step.part(), slot.part()) {
                (None, _) => return true,
                (Some(part), Some(wanted)) if part == wanted => return true,
                _ => {}
            }
        }
        if step.side() != slot.side() {
            return false;
        }
        match (slot.check(), slot.part(), step.part()) {
            (_, None, _) => true,
            // A speed cell: one of its pairs, or its not-run.
            (Check::Speed, Some(cell), Some(part)) => {
                part == cell
                    || (part.starts_with(&format!("{cell}-pair-"))
                        && matches!(record.outcome, Outcome::SpeedPair { .. }))
            }
            (_, Some(wanted), Some(part)) => part == wanted,
            (_, Some(_), None) => false,
        }
    })
}

/// The side a whole-check `not-run` record is written on, as the step loop does.
fn whole_check_side(check: Check) -> Side {
    if check == Check::Speed { Side::Both } else { Side::Pr }
}

/// The steps of `records`, for removing what a job no longer has.
pub(super) fn steps_of(records: &[Evidence]) -> BTreeSet<StepId> {
    records.iter().map(StepId::of).collect()
}

#[cfg(test)]
mod tests {
    use prgate_gate::evidence::TestResult;
    use prgate_scope::plan::ModelPlan;

    use super::*;

    const RECIPE: &str = r#"hardware = ["cpu-sim"]
checkpoint = "alpha-ckpt"
tp = 1

[server]
command = "server --port {port} {extra_args}"
monokernel-flag = "--mono"
routing-pattern = 'routed'

[tests]
unit = ["test/unit"]

[[accuracy]]
name = "gsm8k"
evaluator = "builtin"
dataset = "data.jsonl"

[[accuracy]]
name = "mmlu"
evaluator = "builtin"
dataset = "data.jsonl"

[speed]
concurrencies = [1, 2, 16]
covered = [1]
input-len = 8
output-len = 8
"#;

    fn model(tier: Tier, new: bool, recipe: bool) -> Expected {
        let plan = ModelPlan {
            name: "alpha".to_owned(),
            tier,
            new,
            removed: false,
            readme: None,
            reasons: Vec::new(),
        };
        let recipe =
            recipe.then(|| Box::new(Recipe::parse(RECIPE, "alpha.toml").expect("the recipe")));
        Expected::Model { plan, recipe }
    }

    /// A record given as `check.side[.part]=kind`: kind `tests`, `routing`, `accuracy`,
    /// `pair`, `noise` or `not-run`.
    fn record(text: &str) -> Evidence {
        let (step, kind) = text.split_once('=').expect("step=kind");
        let mut words = step.splitn(3, '.');
        let check: Check = serde_json::from_value(serde_json::json!(words.next())).expect("check");
        let side: Side = serde_json::from_value(serde_json::json!(words.next())).expect("side");
        let part = words.next().map(str::to_owned);
        // Speed parts are made from the outcome: `concurrency-C-pair-I`, `concurrency-C-noise`.
        let concurrency = part
            .as_deref()
            .and_then(|part| part.strip_prefix("concurrency-")?.split('-').next()?.parse().ok())
            .unwrap_or(0);
        let outcome = match kind {
            "tests" => Outcome::Tests { results: Vec::<TestResult>::new() },
            "routing" => Outcome::Routing { routed: true, line: None },
            "pair" => Outcome::SpeedPair {
                concurrency,
                index: 0,
                covered: true,
                base_tpot_ms: 1.0,
                pr_tpot_ms: 1.0,
                first: Side::Base,
                family: None,
                base_runs_ms: None,
            },
            "noise" => Outcome::SpeedNoise { concurrency, log_ratio_variance: 0.0, samples: None },
            "accuracy" => Outcome::Accuracy {
                benchmark: part.clone().unwrap_or_default(),
                questions: 1,
                correct: 1,
                per_question: None,
                cached: false,
            },
            "not-run" => Outcome::NotRun {
                reason: NotRunReason::Other,
                detail: String::new(),
                subject: part,
            },
            _ => panic!("unknown kind {kind}"),
        };
        Evidence {
            schema_version: SCHEMA_VERSION,
            model: Some("alpha".to_owned()),
            check,
            side,
            provenance: Provenance::default(),
            outcome,
        }
    }

    fn check(expected: &Expected, records: &[&str], expect: &[&str]) {
        let records: Vec<Evidence> = records.iter().map(|text| record(text)).collect();
        let got: Vec<String> = unrecorded(Some("alpha"), expected, &records)
            .iter()
            .map(|step| step.file_stem().trim_start_matches("alpha.").to_owned())
            .collect();
        assert_eq!(got, expect, "records {records:#?}");
    }

    #[test]
    fn a_job_that_recorded_nothing_leaves_every_slot() {
        check(
            &model(Tier::Full, false, true),
            &[],
            &[
                "unit-tests.base",
                "unit-tests.pr",
                "kernel-tests.base",
                "kernel-tests.pr",
                "serving-tests.base",
                "serving-tests.pr",
                "routing.base",
                "routing.pr",
                "kernel-timing.base",
                "kernel-timing.pr",
                "accuracy.base.gsm8k",
                "accuracy.pr.gsm8k",
                "accuracy.base.mmlu",
                "accuracy.pr.mmlu",
                "speed.both.concurrency-1",
                "speed.both.concurrency-2",
                "speed.both.concurrency-16",
            ],
        );
        // The smoke tier: no kernel timing or accuracy, the covered concurrencies only; a new
        // model has no base tree for its tests.
        check(
            &model(Tier::Smoke, true, true),
            &[],
            &[
                "unit-tests.pr",
                "kernel-tests.pr",
                "serving-tests.base",
                "serving-tests.pr",
                "routing.base",
                "routing.pr",
                "speed.both.concurrency-1",
            ],
        );
        // Without its recipe, a check is a slot as a whole.
        check(
            &model(Tier::Full, false, false),
            &[],
            &[
                "unit-tests.base",
                "unit-tests.pr",
                "kernel-tests.base",
                "kernel-tests.pr",
                "serving-tests.base",
                "serving-tests.pr",
                "routing.base",
                "routing.pr",
                "kernel-timing.base",
                "kernel-timing.pr",
                "accuracy.base",
                "accuracy.pr",
                "speed.both",
            ],
        );
    }

    #[test]
    fn what_fills_a_slot() {
        let smoke = model(Tier::Smoke, false, true);
        let rest = ["serving-tests.base", "serving-tests.pr", "routing.base", "routing.pr"];
        let all_but_speed = [
            "unit-tests.base=tests",
            "unit-tests.pr=tests",
            "kernel-tests.base=tests",
            "kernel-tests.pr=tests",
            "serving-tests.base=tests",
            "serving-tests.pr=tests",
            "routing.base=routing",
            "routing.pr=routing",
        ];
        // Died on the PR side of the unit tests.
        let mut expect = vec!["unit-tests.pr", "kernel-tests.base", "kernel-tests.pr"];
        expect.extend(rest);
        expect.push("speed.both.concurrency-1");
        check(&smoke, &["unit-tests.base=tests"], &expect);
        // A whole-check not-run on the PR side fills both sides.
        let mut expect = vec!["kernel-tests.base", "kernel-tests.pr"];
        expect.extend(rest);
        expect.push("speed.both.concurrency-1");
        check(&smoke, &["unit-tests.pr=not-run"], &expect);
        // A speed cell: a pair or its not-run fills it, its noise does not.
        check(&smoke, &all_but_speed, &["speed.both.concurrency-1"]);
        let mut records = all_but_speed.to_vec();
        records.push("speed.both.concurrency-1-noise=noise");
        check(&smoke, &records, &["speed.both.concurrency-1"]);
        records.push("speed.both.concurrency-1-pair-0=pair");
        check(&smoke, &records, &[]);
        let mut records = all_but_speed.to_vec();
        records.push("speed.both.concurrency-1=not-run");
        check(&smoke, &records, &[]);
        // A whole speed not-run fills every cell.
        let mut records = all_but_speed.to_vec();
        records.push("speed.both=not-run");
        check(&smoke, &records, &[]);
        // An accuracy benchmark: its records, or its not-run on the PR side, fill it.
        let full = model(Tier::Full, false, true);
        let mut records = all_but_speed.to_vec();
        records.extend([
            "kernel-timing.base=not-run",
            "kernel-timing.pr=not-run",
            "accuracy.base.gsm8k=accuracy",
            "accuracy.pr.mmlu=not-run",
            "speed.both.concurrency-1=not-run",
            "speed.both.concurrency-2-pair-0=pair",
        ]);
        check(&full, &records, &["accuracy.pr.gsm8k", "speed.both.concurrency-16"]);
    }

    #[test]
    fn the_common_checks_have_a_slot_a_side() {
        let records: Vec<Evidence> = Vec::new();
        let got: Vec<String> =
            unrecorded(None, &Expected::Common, &records).iter().map(StepId::file_stem).collect();
        assert_eq!(got, ["~common.common-tests.base", "~common.common-tests.pr"]);
    }
}
