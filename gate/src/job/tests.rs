//! The job plan's parts and its accounting, as tables.

use proptest::prelude::*;

use super::*;
use crate::evidence::{Provenance, SCHEMA_VERSION as EVIDENCE_SCHEMA};

fn record(check: Check, side: Side, outcome: Outcome) -> Evidence {
    Evidence {
        schema_version: EVIDENCE_SCHEMA,
        model: Some("m".to_owned()),
        check,
        side,
        provenance: Provenance::default(),
        outcome,
    }
}

fn not_run(subject: Option<&str>) -> Outcome {
    Outcome::NotRun {
        reason: NotRunReason::Crash,
        detail: String::new(),
        subject: subject.map(str::to_owned),
        failed_on: None,
    }
}

fn pair(concurrency: u32, index: u32) -> Outcome {
    Outcome::SpeedPair {
        concurrency,
        index,
        covered: true,
        base_tpot_ms: 1.0,
        pr_tpot_ms: 1.0,
        first: Side::Base,
        family: None,
        base_runs_ms: None,
    }
}

#[test]
fn parts_read_back_as_they_are_written() {
    let cases = [
        ("gsm8k", Part::Named("gsm8k".to_owned())),
        ("GSM8K", Part::Named("gsm8k".to_owned())),
        ("concurrency-64", Part::Cell { concurrency: 64 }),
        ("concurrency-64-pair-3", Part::Pair { concurrency: 64, index: 3 }),
        ("concurrency-1-noise", Part::Noise { concurrency: 1 }),
        ("GSM8K@repeat-2", Part::Repeat { benchmark: "gsm8k".to_owned(), index: 2 }),
        // Not a repeat: a name.
        ("gsm8k@repeat-x", Part::Named("gsm8k@repeat-x".to_owned())),
        // Not a speed form: a name.
        ("concurrency-x", Part::Named("concurrency-x".to_owned())),
        ("concurrency-4-pair-", Part::Named("concurrency-4-pair-".to_owned())),
    ];
    for (text, expect) in cases {
        assert_eq!(Part::parse(text), Some(expect), "{text}");
    }
    assert_eq!(Part::parse(""), None);
}

proptest! {
    #[test]
    fn a_part_round_trips_through_its_text(concurrency in 0u32..100_000, index in 0u32..1000, name in "[a-z0-9_]{1,12}") {
        for part in [
            Part::Cell { concurrency },
            Part::Pair { concurrency, index },
            Part::Noise { concurrency },
            Part::Named(name.clone()),
            Part::Repeat { benchmark: name.clone(), index },
        ] {
            prop_assert_eq!(Part::parse(&part.to_string()), Some(part));
        }
    }
}

#[test]
fn what_accounts_for_a_step() {
    let step = |check, side, part: Option<Part>| StepId::new(Some("m"), check, side, part);
    let cell = || Some(Part::Cell { concurrency: 8 });
    let bench = || Some(Part::named("gsm8k"));
    let accuracy = |benchmark: &str| Outcome::Accuracy {
        benchmark: benchmark.to_owned(),
        questions: 1,
        correct: 1,
        per_question: None,
        cached: false,
        repeat: None,
    };
    let repeat = |benchmark: &str, index: u32| {
        let mut outcome = accuracy(benchmark);
        if let Outcome::Accuracy { repeat, .. } = &mut outcome {
            *repeat = Some(crate::evidence::Repeat {
                index,
                seed: u64::from(index),
                cap: 20,
                family: None,
            });
        }
        outcome
    };
    let tests = || Outcome::Tests { results: vec![] };
    let cases: Vec<(StepId, Vec<Evidence>, bool)> = vec![
        // The step's own record.
        (
            step(Check::UnitTests, Side::Base, None),
            vec![record(Check::UnitTests, Side::Base, tests())],
            true,
        ),
        (
            step(Check::UnitTests, Side::Base, None),
            vec![record(Check::UnitTests, Side::Pr, tests())],
            false,
        ),
        // A whole-check not-run on the PR side stands for both sides.
        (
            step(Check::UnitTests, Side::Base, None),
            vec![record(Check::UnitTests, Side::Pr, not_run(None))],
            true,
        ),
        // Another model's record does not.
        (
            step(Check::Accuracy, Side::Pr, bench()),
            vec![record(Check::Accuracy, Side::Pr, accuracy("other"))],
            false,
        ),
        (
            step(Check::Accuracy, Side::Pr, bench()),
            vec![record(Check::Accuracy, Side::Pr, accuracy("GSM8K"))],
            true,
        ),
        (
            step(Check::Accuracy, Side::Base, bench()),
            vec![record(Check::Accuracy, Side::Pr, not_run(Some("gsm8k")))],
            true,
        ),
        // A benchmark: any of its repeats, on its side, or a repeat's not-run.
        (
            step(Check::Accuracy, Side::Pr, bench()),
            vec![record(Check::Accuracy, Side::Pr, repeat("GSM8K", 3))],
            true,
        ),
        (
            step(Check::Accuracy, Side::Base, bench()),
            vec![record(Check::Accuracy, Side::Pr, repeat("gsm8k", 0))],
            false,
        ),
        (
            step(Check::Accuracy, Side::Pr, bench()),
            vec![record(Check::Accuracy, Side::Pr, repeat("other", 0))],
            false,
        ),
        (
            step(Check::Accuracy, Side::Pr, bench()),
            vec![record(Check::Accuracy, Side::Pr, not_run(Some("gsm8k@repeat-1")))],
            true,
        ),
        // A speed cell: one of its pairs or its not-run; its calibration alone is not evidence.
        (
            step(Check::Speed, Side::Both, cell()),
            vec![record(Check::Speed, Side::Both, pair(8, 0))],
            true,
        ),
        (
            step(Check::Speed, Side::Both, cell()),
            vec![record(Check::Speed, Side::Both, pair(16, 0))],
            false,
        ),
        (
            step(Check::Speed, Side::Both, cell()),
            vec![record(
                Check::Speed,
                Side::Both,
                Outcome::SpeedNoise { concurrency: 8, log_ratio_variance: 0.1, samples: None },
            )],
            false,
        ),
        (
            step(Check::Speed, Side::Both, cell()),
            vec![record(Check::Speed, Side::Both, not_run(Some("concurrency-8")))],
            true,
        ),
        (
            step(Check::Speed, Side::Both, cell()),
            vec![record(Check::Speed, Side::Both, not_run(None))],
            true,
        ),
        (step(Check::Speed, Side::Both, cell()), vec![], false),
    ];
    for (step, records, expect) in cases {
        assert_eq!(accounted(&step, &records), expect, "{step} with {records:?}");
    }
}

#[test]
fn the_format_reads_back() {
    let job = JobPlan {
        schema_version: SCHEMA_VERSION,
        pr_commit: "a".repeat(40),
        base_commit: "b".repeat(40),
        family: 2,
        accept_narrowing: false,
        targets: vec![Target {
            model: Some("m".to_owned()),
            tier: Tier::Full,
            new: false,
            recipe: Recipes {
                base: RecipeState::Parsed { path: "r.toml".to_owned(), hash: "h".to_owned() },
                pr: RecipeState::Missing { path: "r.toml".to_owned() },
                diff: Some(RecipeDiff { text: "@@ -1 +1 @@\n-a\n+b\n".to_owned(), omitted: 2 }),
                contract: Default::default(),
                pr_scripts: Vec::new(),
                pr_tests: Vec::new(),
            },
            steps: vec![
                ExpectedStep {
                    check: Check::UnitTests,
                    side: Side::Pr,
                    part: None,
                    expect: Expect::Run,
                },
                ExpectedStep {
                    check: Check::Speed,
                    side: Side::Both,
                    part: Some(Part::Cell { concurrency: 4 }),
                    expect: Expect::Blocked {
                        reason: NotRunReason::NoCheckpoint,
                        detail: "d".to_owned(),
                    },
                },
                ExpectedStep {
                    check: Check::KernelTiming,
                    side: Side::Pr,
                    part: None,
                    expect: Expect::Nothing { why: "none".to_owned() },
                },
            ],
        }],
    };
    let text = serde_json::to_string(&job).expect("serializes");
    assert!(text.contains(r#""part":"concurrency-4""#), "{text}");
    let back: JobPlan = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, job);
    assert_eq!(job.evidence_steps().count(), 2);
    assert_eq!(job.unaccounted(&[]).len(), 2);
}

#[test]
fn an_empty_job_plan_expects_nothing_and_reads_back() {
    let job = JobPlan::empty(&"a".repeat(40), &"b".repeat(40));
    let text = serde_json::to_string(&job).expect("serializes");
    assert_eq!(
        text,
        format!(
            r#"{{"schema_version":{SCHEMA_VERSION},"pr_commit":"{}","base_commit":"{}","family":0,"targets":[]}}"#,
            "a".repeat(40),
            "b".repeat(40)
        )
    );
    let back: JobPlan = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, job);
    assert_eq!(job.evidence_steps().count(), 0);
    assert!(job.unaccounted(&[]).is_empty());
}

/// prgate's own formats refuse a key they do not know (docs/job.md, "Unknown keys"): a key a
/// newer or a broken writer added is an error naming it, not silently dropped evidence.
#[test]
fn the_job_plan_and_the_evidence_refuse_unknown_keys() {
    let refused = |mut value: serde_json::Value, at: &str, read: fn(&str) -> String| {
        value
            .pointer_mut(at)
            .expect("the path exists")
            .as_object_mut()
            .expect("an object")
            .insert("hardwre".to_owned(), serde_json::json!(1));
        read(&value.to_string())
    };
    let read_job = |text: &str| match serde_json::from_str::<JobPlan>(text) {
        Ok(_) => "read".to_owned(),
        Err(error) => error.to_string(),
    };
    let read_evidence = |text: &str| match serde_json::from_str::<Evidence>(text) {
        Ok(_) => "read".to_owned(),
        Err(error) => error.to_string(),
    };
    let job = JobPlan {
        schema_version: SCHEMA_VERSION,
        pr_commit: "a".repeat(40),
        base_commit: "b".repeat(40),
        family: 1,
        accept_narrowing: false,
        targets: vec![Target {
            model: Some("m".to_owned()),
            tier: Tier::Full,
            new: false,
            recipe: Recipes {
                base: RecipeState::Parsed { path: "r.toml".to_owned(), hash: "h".to_owned() },
                pr: RecipeState::Parsed { path: "r.toml".to_owned(), hash: "h".to_owned() },
                diff: None,
                contract: Default::default(),
                pr_scripts: Vec::new(),
                pr_tests: Vec::new(),
            },
            steps: vec![ExpectedStep {
                check: Check::UnitTests,
                side: Side::Pr,
                part: None,
                expect: Expect::Run,
            }],
        }],
    };
    let job = serde_json::to_value(&job).expect("serializes");
    assert_eq!(read_job(&job.to_string()), "read");
    for at in ["", "/targets/0", "/targets/0/steps/0", "/targets/0/recipe"] {
        let error = refused(job.clone(), at, read_job);
        assert!(error.contains("unknown field `hardwre`"), "{at:?}: {error}");
    }
    let evidence =
        serde_json::to_value(record(Check::Speed, Side::Both, pair(4, 0))).expect("serializes");
    assert_eq!(read_evidence(&evidence.to_string()), "read");
    for at in ["", "/outcome", "/provenance"] {
        let error = refused(evidence.clone(), at, read_evidence);
        assert!(error.contains("unknown field `hardwre`"), "{at:?}: {error}");
    }
}

#[test]
fn a_job_plan_is_of_the_plans_head_and_base_side_commit() {
    // The fixture's head, base and merge-base are all this commit.
    let plan = crate::verdict::tests::plan(Vec::new(), false, true);
    let sha = plan.head.sha.clone();
    let other = "f".repeat(40);
    for (pr, base, is_of) in [
        (sha.as_str(), sha.as_str(), true),
        (other.as_str(), sha.as_str(), false),
        (sha.as_str(), other.as_str(), false),
    ] {
        assert_eq!(JobPlan::empty(pr, base).is_of(&plan), is_of, "{pr} on {base}");
    }
    // Without a merge-base the base side is the base itself.
    let mut untrusted = crate::verdict::tests::plan(Vec::new(), false, false);
    untrusted.base.sha.clone_from(&other);
    assert!(JobPlan::empty(&sha, &other).is_of(&untrusted));
    assert!(!JobPlan::empty(&sha, &sha).is_of(&untrusted));
}
