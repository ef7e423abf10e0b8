use std::collections::BTreeSet;

use prgate_gate::evidence::{
    Check, Evidence, NotRunReason, Outcome, Provenance, SCHEMA_VERSION, Side, TestOutcome,
    TestResult,
};

use super::*;

fn record(model: Option<&str>, check: Check, side: Side, outcome: Outcome) -> Evidence {
    Evidence {
        schema_version: SCHEMA_VERSION,
        model: model.map(str::to_owned),
        check,
        side,
        provenance: Provenance::default(),
        outcome,
    }
}

fn tests_outcome(passed: bool) -> Outcome {
    let outcome = if passed { TestOutcome::Passed } else { TestOutcome::Failed };
    Outcome::Tests {
        results: vec![TestResult {
            id: "test_a.py::test_one".into(),
            outcome,
            message: None,
            flaky: false,
        }],
    }
}

fn accuracy(benchmark: &str, correct: u64) -> Outcome {
    Outcome::Accuracy {
        benchmark: benchmark.into(),
        questions: 10,
        correct,
        per_question: None,
        cached: false,
        repeat: None,
    }
}

fn pair(concurrency: u32, index: u32) -> Outcome {
    Outcome::SpeedPair {
        concurrency,
        index,
        covered: true,
        base_tpot_ms: 20.0,
        pr_tpot_ms: 19.5,
        first: Side::Base,
        family: None,
        base_runs_ms: None,
    }
}

fn not_run(subject: Option<&str>) -> Outcome {
    Outcome::NotRun {
        reason: NotRunReason::Timeout,
        detail: "the server never became healthy".into(),
        subject: subject.map(str::to_owned),
        failed_on: None,
    }
}

#[test]
fn file_stems_name_each_step_once() {
    let check = |record: Evidence, expect: &str| {
        assert_eq!(file_stem(&StepId::of(&record)), expect);
    };
    check(
        record(Some("kimi_k31"), Check::UnitTests, Side::Pr, tests_outcome(true)),
        "kimi_k31.unit-tests.pr",
    );
    check(
        record(None, Check::CommonTests, Side::Base, tests_outcome(true)),
        "~common.common-tests.base",
    );
    check(
        record(Some("kimi_k31"), Check::Accuracy, Side::Pr, accuracy("GSM8K", 9)),
        "kimi_k31.accuracy.pr.gsm8k",
    );
    check(
        record(Some("kimi_k31"), Check::Accuracy, Side::Pr, not_run(Some("gsm8k"))),
        "kimi_k31.accuracy.pr.gsm8k",
    );
    check(
        record(Some("kimi_k31"), Check::Speed, Side::Both, pair(64, 2)),
        "kimi_k31.speed.both.concurrency-64-pair-2",
    );
    check(
        record(
            Some("kimi_k31"),
            Check::Speed,
            Side::Both,
            Outcome::SpeedNoise { concurrency: 8, log_ratio_variance: 0.01, samples: None },
        ),
        "kimi_k31.speed.both.concurrency-8-noise",
    );
    check(record(Some("a/b.c"), Check::Routing, Side::Pr, not_run(None)), "a%2Fb%2Ec.routing.pr");
    check(
        record(Some("~common"), Check::Routing, Side::Pr, not_run(Some("GPQA Diamond"))),
        "%7Ecommon.routing.pr.gpqa%20diamond",
    );
}

#[test]
fn a_step_and_its_record_agree() {
    let step =
        StepId::new(Some("kimi_k31"), Check::Accuracy, Side::Base, Some(Part::named("GSM8K")));
    let written = record(Some("kimi_k31"), Check::Accuracy, Side::Base, accuracy("gsm8k", 7));
    assert_eq!(StepId::of(&written), step);
    assert_eq!(step.part(), Some(&Part::Named("gsm8k".to_owned())));
    assert_eq!(step.to_string(), "accuracy of kimi_k31 on the base side (gsm8k)");
    assert_eq!(Part::parse(""), None);
}

#[test]
fn a_killed_run_resumes_with_exactly_the_finished_steps() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let first = ResultsDir::open(root.path()).expect("the results directory opens");
    let records = [
        record(Some("kimi_k31"), Check::UnitTests, Side::Base, tests_outcome(true)),
        record(Some("kimi_k31"), Check::UnitTests, Side::Pr, tests_outcome(false)),
        record(Some("kimi_k31"), Check::Speed, Side::Both, pair(64, 0)),
    ];
    for written in &records {
        let path = first.write(written).expect("the record is written");
        assert!(path.starts_with(first.evidence_dir()));
    }
    // The run is killed while writing a fourth record: its temporary file stays behind,
    // half-written.
    let orphan = first.evidence_dir().join(".kimi_k31.routing.pr.json.tmp-4242-7");
    std::fs::write(&orphan, b"{\"schema_version\": 1, \"mod").expect("the orphan is written");
    drop(first);

    let resumed = ResultsDir::open(root.path()).expect("the results directory opens again");
    let done = resumed.completed_steps().expect("the finished steps are read");
    let expect: BTreeSet<StepId> = records.iter().map(StepId::of).collect();
    assert_eq!(done, expect);
    let read: Vec<Evidence> =
        resumed.records().expect("the records are read").into_iter().map(|(_, r)| r).collect();
    assert_eq!(read.len(), 3);
    for written in &records {
        assert!(read.contains(written));
    }
    assert!(prgate_gate::evidence::validate(&read).is_ok());

    // A rerun of a step replaces its file rather than adding one.
    let rerun = record(Some("kimi_k31"), Check::UnitTests, Side::Pr, tests_outcome(true));
    resumed.write(&rerun).expect("the rerun is written");
    let read = resumed.records().expect("the records are read");
    assert_eq!(read.len(), 3);
    assert!(read.iter().any(|(_, r)| *r == rerun));
    let names: Vec<String> = std::fs::read_dir(resumed.evidence_dir())
        .expect("the folder is listed")
        .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect();
    assert_eq!(names.len(), 3, "no temporary file of a finished write is left: {names:?}");
}

#[test]
fn a_step_that_could_not_run_is_replaced_by_its_result() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let results = ResultsDir::open(root.path()).expect("the results directory opens");
    let failed = record(Some("m"), Check::Accuracy, Side::Pr, not_run(Some("gsm8k")));
    let first = results.write(&failed).expect("the not-run record is written");
    let second = results
        .write(&record(Some("m"), Check::Accuracy, Side::Pr, accuracy("gsm8k", 8)))
        .expect("the result is written");
    assert_eq!(first, second);
    assert_eq!(results.completed_steps().expect("the steps are read").len(), 1);
}

#[test]
fn refuses_what_the_gate_would_refuse_and_what_it_cannot_read() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let results = ResultsDir::open(root.path()).expect("the results directory opens");
    let wrong = record(Some("m"), Check::Routing, Side::Pr, accuracy("gsm8k", 3));
    let error = results.write(&wrong).expect_err("an accuracy outcome is no routing evidence");
    assert!(matches!(error, ResultsError::Invalid { .. }), "{error}");
    assert!(results.completed_steps().expect("the steps are read").is_empty());

    std::fs::write(results.evidence_dir().join("m.routing.pr.json"), b"{ not json")
        .expect("a broken file is written");
    let error = results.completed_steps().expect_err("a broken record is an error");
    assert!(matches!(error, ResultsError::Parse { .. }), "{error}");
}

#[test]
fn a_record_under_another_steps_name_is_an_error() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let results = ResultsDir::open(root.path()).expect("the results directory opens");
    let path = results
        .write(&record(Some("m"), Check::UnitTests, Side::Pr, tests_outcome(true)))
        .expect("the record is written");
    std::fs::rename(&path, results.evidence_dir().join("m.unit-tests.base.json"))
        .expect("the file is moved");
    let error = results.completed_steps().expect_err("the file name lies");
    assert!(matches!(error, ResultsError::Misplaced { .. }), "{error}");
}

#[test]
fn step_logs_have_a_folder_each() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let results = ResultsDir::open(root.path()).expect("the results directory opens");
    let step = StepId::new(Some("m"), Check::ServingTests, Side::Base, None);
    let logs = results.step_log_dir(&step).expect("the log folder is made");
    assert_eq!(logs, root.path().join("logs").join("m.serving-tests.base"));
    assert!(logs.is_dir());
}

#[test]
fn events_are_json_lines_appended_per_event() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let path = root.path().join("events.jsonl");
    let step = StepId::new(Some("kimi_k31"), Check::Accuracy, Side::Pr, Some(Part::named("gsm8k")));
    let common = StepId::new(None, Check::CommonTests, Side::Base, None);
    {
        let events = EventWriter::create(&path).expect("the event stream opens");
        let started_event = event_started(&step);
        events.append(&started_event).expect("an event is written");
        let started = StepStarted::of(&started_event);
        // Each line is in the file as soon as it is written.
        let text = std::fs::read_to_string(&path).expect("the stream is read");
        assert_eq!(text.lines().count(), 1);
        let done = record(Some("kimi_k31"), Check::Accuracy, Side::Pr, not_run(Some("gsm8k")));
        events.append(&event_finished(&step, started, &done)).expect("an event is written");
    }
    // A resumed run appends.
    EventWriter::create(&path)
        .expect("the event stream opens again")
        .append(&event_skipped(&common))
        .expect("an event is written");

    let text = std::fs::read_to_string(&path).expect("the stream is read");
    let events: Vec<Event> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is one event"))
        .collect();
    let kinds: Vec<EventKind> = events.iter().map(|event| event.event).collect();
    assert_eq!(kinds, [EventKind::StepStarted, EventKind::StepFinished, EventKind::StepSkipped]);
    let finished = &events[1];
    assert_eq!(finished.model.as_deref(), Some("kimi_k31"));
    assert_eq!((finished.check, finished.side), (Check::Accuracy, Side::Pr));
    assert_eq!(finished.part.as_deref(), Some("gsm8k"));
    assert_eq!(finished.started_ms, Some(events[0].time_ms));
    assert!(finished.time_ms >= events[0].time_ms);
    assert_eq!(finished.outcome.as_deref(), Some("not-run"));
    assert_eq!(finished.reason, Some(NotRunReason::Timeout));
    assert!(events.iter().all(|event| event.schema_version == EVENTS_SCHEMA_VERSION));
    let skipped: serde_json::Value =
        serde_json::from_str(text.lines().nth(2).expect("a third line")).expect("json");
    assert_eq!(
        skipped,
        serde_json::json!({
            "schema_version": 1, "event": "step-skipped", "model": null,
            "check": "common-tests", "side": "base", "part": null, "time_ms": events[2].time_ms,
        })
    );
}

#[test]
fn paths_in_the_nodes_trees_are_written_as_paths_in_their_tree() {
    let trees = TreePaths::new(Path::new("/var/lib/prgate/trees"));
    let sha = "1286a51c82de1679dc7cd7cc1f810a755079c5d2";
    let cases = [
        (
            format!("/var/lib/prgate/trees/{sha}/test/e2e/alpha.toml: `test` is a symbolic link"),
            "test/e2e/alpha.toml: `test` is a symbolic link".to_owned(),
        ),
        (
            format!("cannot start in /var/lib/prgate/trees/{sha}: gone"),
            "cannot start in .: gone".to_owned(),
        ),
        (
            format!(
                "File \"/var/lib/prgate/trees/{sha}/a.py\", and /var/lib/prgate/trees/{sha}/b.py"
            ),
            "File \"a.py\", and b.py".to_owned(),
        ),
        (
            "/var/lib/prgate/cache/x and /var/lib/prgate/treesx".to_owned(),
            "/var/lib/prgate/cache/x and /var/lib/prgate/treesx".to_owned(),
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(trees.relative(&text), expected, "{text}");
    }
    assert_eq!(
        TreePaths::default().relative("/var/lib/prgate/trees/a/b"),
        "/var/lib/prgate/trees/a/b"
    );
}

/// An event line with a key the format does not have is refused, naming it (docs/job.md,
/// "Unknown keys"): prgate's own files are read strictly.
#[test]
fn an_event_with_an_unknown_key_is_refused() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let path = root.path().join("events.jsonl");
    let step = StepId::new(Some("kimi_k31"), Check::Accuracy, Side::Pr, Some(Part::named("gsm8k")));
    EventWriter::create(&path).expect("opens").append(&event_skipped(&step)).expect("written");
    let line = std::fs::read_to_string(&path).expect("read");
    let mut value: serde_json::Value = serde_json::from_str(line.trim()).expect("an event");
    serde_json::from_value::<Event>(value.clone()).expect("the written event reads back");
    value.as_object_mut().expect("an object").insert("tme_ms".to_owned(), 1.into());
    let error = serde_json::from_value::<Event>(value).expect_err("an unknown key is refused");
    assert!(error.to_string().contains("unknown field `tme_ms`"), "{error}");
}
