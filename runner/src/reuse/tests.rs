//! Which records of an earlier run [`select`] takes over: one table, one `check`.

use prgate_gate::evidence::{
    Check, Evidence, NotRunReason, Outcome, Provenance, SCHEMA_VERSION as EVIDENCE_SCHEMA, Side,
    TestOutcome, TestResult,
};
use prgate_gate::job::{Expect, ExpectedStep, Part, RecipeState, Recipes, Target};
use prgate_gate::speed::{Calibration, Pair};
use prgate_scope::plan::Tier;

use super::*;

fn key() -> RunKey {
    RunKey {
        prgate_version: "0.1.0".into(),
        pr_commit: "p".repeat(40),
        base_commit: "b".repeat(40),
        target: "alpha".into(),
        node: "mi355x-1".into(),
        node_profile: "sha256:01".into(),
        image: "sha256:abc".into(),
        isolation: "container".into(),
        family: 1,
    }
}

fn provenance() -> Provenance {
    Provenance {
        node: Some("mi355x-1".into()),
        image_digest: Some("sha256:abc".into()),
        base_commit: Some("b".repeat(40)),
        pr_commit: Some("p".repeat(40)),
        recipe_hash: Some("sha256:aa".into()),
        reused: None,
    }
}

fn run_step(check: Check, side: Side, part: Option<Part>) -> ExpectedStep {
    ExpectedStep { check, side, part, expect: Expect::Run }
}

fn target() -> Target {
    let recipe = RecipeState::Parsed { path: "test/e2e/alpha.toml".into(), hash: "h".into() };
    Target {
        model: Some("alpha".into()),
        tier: Tier::Full,
        new: false,
        recipe: Recipes {
            base: recipe.clone(),
            pr: recipe,
            diff: None,
            contract: Default::default(),
            pr_scripts: Vec::new(),
            pr_tests: Vec::new(),
        },
        steps: vec![
            run_step(Check::UnitTests, Side::Base, None),
            run_step(Check::UnitTests, Side::Pr, None),
            run_step(Check::Routing, Side::Pr, None),
            run_step(Check::Accuracy, Side::Pr, Some(Part::named("tiny"))),
            run_step(Check::Speed, Side::Both, Some(Part::Cell { concurrency: 4 })),
            ExpectedStep {
                check: Check::KernelTiming,
                side: Side::Pr,
                part: None,
                expect: Expect::Nothing { why: "no scripts".into() },
            },
        ],
    }
}

fn record(check: Check, side: Side, outcome: Outcome) -> Evidence {
    Evidence {
        schema_version: EVIDENCE_SCHEMA,
        model: Some("alpha".into()),
        check,
        side,
        provenance: provenance(),
        outcome,
    }
}

fn tests(outcomes: &[TestOutcome]) -> Outcome {
    Outcome::Tests {
        results: outcomes
            .iter()
            .enumerate()
            .map(|(at, outcome)| TestResult {
                id: format!("t{at}"),
                outcome: *outcome,
                message: None,
                flaky: false,
            })
            .collect(),
    }
}

fn pair(index: u32) -> Evidence {
    record(
        Check::Speed,
        Side::Both,
        Outcome::SpeedPair {
            concurrency: 4,
            index,
            covered: true,
            base_tpot_ms: 10.0,
            pr_tpot_ms: 9.0,
            first: Side::Base,
            family: Some(1),
            base_runs_ms: None,
        },
    )
}

/// Everything of the target judged: tests passed, routed, accuracy, a cell of two pairs.
fn judged() -> Vec<Evidence> {
    vec![
        record(Check::UnitTests, Side::Base, tests(&[TestOutcome::Passed])),
        record(Check::UnitTests, Side::Pr, tests(&[TestOutcome::Passed, TestOutcome::Skipped])),
        record(Check::Routing, Side::Pr, Outcome::Routing { routed: true, line: None }),
        record(
            Check::Accuracy,
            Side::Pr,
            Outcome::Accuracy {
                benchmark: "tiny".into(),
                questions: 2,
                correct: 1,
                per_question: None,
                cached: false,
                repeat: None,
            },
        ),
        pair(0),
        pair(1),
    ]
}

fn not_run(check: Check, side: Side, subject: Option<&str>) -> Evidence {
    record(
        check,
        side,
        Outcome::NotRun {
            reason: NotRunReason::Stalled,
            detail: String::new(),
            subject: subject.map(str::to_owned),
            failed_on: None,
        },
    )
}

/// What [`select`] takes over when the earlier run saved `records` under `saved_key` and
/// `saved_target`; a cell is decided once it has two pairs.
fn selection_of(saved_key: RunKey, saved_target: Target, records: Vec<Evidence>) -> Selection {
    let entry = Entry {
        schema_version: SCHEMA_VERSION,
        key: saved_key,
        run: "run-1".into(),
        target: saved_target,
        records,
    };
    let cell_open = |pairs: &[Pair], _noise: Option<Calibration>, _covered: bool| pairs.len() < 2;
    let current = Current {
        key: &key(),
        target: &target(),
        provenance: &provenance(),
        cell_open: &cell_open,
    };
    select(&entry, &current)
}

/// The steps taken over from `records` saved under this run's key and target are `expect`,
/// each record marked as the earlier run's.
fn check(records: Vec<Evidence>, expect: &[&str]) -> Selection {
    let selection = selection_of(key(), target(), records);
    assert_eq!(selection.refused, None);
    let got: Vec<String> = selection.steps.iter().map(ToString::to_string).collect();
    assert_eq!(got, expect);
    for record in &selection.records {
        assert!(record.provenance.reused.is_some(), "{record:?}");
    }
    selection
}

const ALL: [&str; 5] = [
    "unit tests of alpha on the base side",
    "unit tests of alpha on the pr side",
    "monokernel routing of alpha on the pr side",
    "accuracy of alpha on the pr side (tiny)",
    "E2E speed of alpha on the both side (concurrency-4)",
];

#[test]
fn every_judged_step_with_the_same_inputs_is_taken_over() {
    let selection = check(judged(), &ALL);
    assert_eq!(selection.records.len(), 6, "the cell's two pairs come together");
}

#[test]
fn a_failed_broken_or_open_step_runs_again() {
    let without = |drop: &dyn Fn(&Evidence) -> bool, add: Vec<Evidence>| {
        let mut records: Vec<Evidence> = judged().into_iter().filter(|r| !drop(r)).collect();
        records.extend(add);
        records
    };
    let unit_pr = |r: &Evidence| r.check == Check::UnitTests && r.side == Side::Pr;
    // A failed test, an erroring one, a suite that ran nothing but skips.
    for outcomes in [
        &[TestOutcome::Passed, TestOutcome::Failed][..],
        &[TestOutcome::Error],
        &[TestOutcome::Skipped],
        &[],
    ] {
        let failing = record(Check::UnitTests, Side::Pr, tests(outcomes));
        check(without(&unit_pr, vec![failing]), &[ALL[0], ALL[2], ALL[3], ALL[4]]);
    }
    // A not-run of the step.
    check(
        without(&unit_pr, vec![not_run(Check::UnitTests, Side::Pr, None)]),
        &[ALL[0], ALL[2], ALL[3], ALL[4]],
    );
    // A server that logged no routing.
    let routing = |r: &Evidence| r.check == Check::Routing;
    let unrouted = record(Check::Routing, Side::Pr, Outcome::Routing { routed: false, line: None });
    check(without(&routing, vec![unrouted]), &[ALL[0], ALL[1], ALL[3], ALL[4]]);
    // A cell still open (one pair), with a gap in its pairs, or with a not-run of it or of the
    // whole speed check.
    let second_pair = |r: &Evidence| matches!(r.outcome, Outcome::SpeedPair { index: 1, .. });
    check(without(&second_pair, vec![]), &ALL[..4]);
    check(without(&second_pair, vec![pair(2)]), &ALL[..4]);
    let broken_cell = not_run(Check::Speed, Side::Both, Some("concurrency-4"));
    check(without(&|_| false, vec![broken_cell]), &ALL[..4]);
    let broken_speed = not_run(Check::Speed, Side::Both, None);
    check(without(&|_| false, vec![broken_speed]), &ALL[..4]);
    // A not-run of another cell is not this one's.
    let other_cell = not_run(Check::Speed, Side::Both, Some("concurrency-64"));
    check(without(&|_| false, vec![other_cell]), &ALL);
}

#[test]
fn a_record_of_other_provenance_or_a_duplicate_runs_again() {
    let mut records = judged();
    records[0].provenance.recipe_hash = Some("sha256:bb".into());
    records[2].provenance.node = Some("mi355x-2".into());
    records[4].provenance.image_digest = Some("sha256:def".into());
    check(records, &[ALL[1], ALL[3]]);
    let mut twice = judged();
    twice.push(twice[0].clone());
    check(twice, &ALL[1..]);
    // A record an earlier run had reused itself is taken over with its first run's name.
    let mut reused = judged();
    reused[0].provenance.reused = Some(Reused { run: "run-0".into() });
    let selection = check(reused, &ALL);
    assert_eq!(selection.records[0].provenance.reused, Some(Reused { run: "run-0".into() }));
}

#[test]
fn another_key_or_target_reuses_nothing() {
    let cases: Vec<(RunKey, &str)> = vec![
        (RunKey { prgate_version: "0.0.9".into(), ..key() }, "its prgate version was 0.0.9"),
        (RunKey { base_commit: "c".repeat(40), ..key() }, "its base commit was cccc"),
        (RunKey { node_profile: "sha256:02".into(), ..key() }, "its node profile"),
        (RunKey { image: "local:tag".into(), ..key() }, "its image was local:tag"),
        (RunKey { isolation: "host python=python3".into(), ..key() }, "its isolation was host"),
        (RunKey { family: 2, ..key() }, "its speed family was 2, this run's is 1"),
    ];
    for (saved, said) in cases {
        let selection = selection_of(saved, target(), judged());
        let refused = selection.refused.unwrap_or_default();
        assert!(refused.contains(said), "{said}: {refused}");
        assert_eq!(selection.records, Vec::<Evidence>::new());
    }
    let mut changed = target();
    changed.recipe.pr =
        RecipeState::Parsed { path: "test/e2e/alpha.toml".into(), hash: "h2".into() };
    let selection = selection_of(key(), changed, judged());
    assert!(selection.refused.is_some_and(|why| why.contains("planned alpha differently")));
}
