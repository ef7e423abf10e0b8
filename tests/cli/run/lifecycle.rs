//! `prgate run` from start to end on the shared fixture: every check recorded on both sides and
//! a second run that resumes, then the failures a node sees — a server that never becomes
//! healthy or dies mid-benchmark, missing routing lines, a test failing on both sides, a
//! silent test, a node without the checkpoint, a run killed with `SIGKILL`, and a Ctrl-C.

use super::*;

#[test]
fn a_run_records_every_check_on_both_sides_and_a_second_run_resumes() {
    let fixture = Fixture::new(&Sample::default());
    let first = fixture.run("results");
    assert_eq!(first.code, 0, "{}", first.stderr);
    let evidence = fixture.evidence("results");
    let files = evidence_files(&evidence);
    for expected in [
        "alpha.unit-tests.base.json",
        "alpha.unit-tests.pr.json",
        "alpha.kernel-tests.base.json",
        "alpha.kernel-tests.pr.json",
        "alpha.serving-tests.base.json",
        "alpha.serving-tests.pr.json",
        "alpha.routing.base.json",
        "alpha.routing.pr.json",
        "alpha.accuracy.base.tiny%40repeat-0.json",
        "alpha.accuracy.pr.tiny%40repeat-0.json",
        "alpha.kernel-timing.base.json",
        "alpha.kernel-timing.pr.json",
        "alpha.speed.both.concurrency-1-pair-0.json",
        "alpha.speed.both.concurrency-2-pair-0.json",
    ] {
        assert!(files.contains_key(expected), "no {expected} in {files:#?}\n{}", first.stderr);
    }
    for side in ["base", "pr"] {
        let tests = fixture.record("results", &format!("alpha.unit-tests.{side}"));
        assert_eq!(tests["outcome"]["kind"], "tests", "{tests}");
        assert_eq!(tests["outcome"]["results"][0]["outcome"], "passed", "{tests}");
        let serving = fixture.record("results", &format!("alpha.serving-tests.{side}"));
        assert_eq!(serving["outcome"]["results"][0]["outcome"], "passed", "{serving}");
        let routing = fixture.record("results", &format!("alpha.routing.{side}"));
        assert_eq!(routing["outcome"]["routed"], true, "{routing}");
        assert_eq!(routing["provenance"]["node"], "ci-node");
        assert!(
            routing["provenance"]["recipe_hash"].as_str().expect("a hash").starts_with("sha256:")
        );
    }
    let pair = fixture.record("results", "alpha.speed.both.concurrency-1-pair-0");
    assert_eq!(pair["outcome"]["kind"], "speed-pair", "{pair}");
    assert_eq!(pair["outcome"]["covered"], true);
    assert_eq!(pair["outcome"]["family"], 1, "one covered cell in the whole run");

    let gate = fixture.gate("results");
    assert!(gate.code == 0 || gate.code == 1, "the gate failed: {}{}", gate.stdout, gate.stderr);

    let events = fixture.events("results");
    let started_before = std::fs::read_to_string(&events)
        .expect("the events")
        .lines()
        .filter(|line| line.contains("\"step-started\""))
        .count();
    assert!(started_before >= files.len());
    let second = fixture.run("results");
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(
        second.stderr.contains("0 steps recorded"),
        "{}\nbefore: {files:#?}\nafter: {:#?}",
        second.stderr,
        evidence_files(&evidence)
    );
    assert_eq!(evidence_files(&evidence), files, "a resumed run rewrote evidence");
    let events_text = std::fs::read_to_string(&events).expect("the events");
    let started_after =
        events_text.lines().filter(|line| line.contains("\"step-started\"")).count();
    assert_eq!(started_after, started_before, "a resumed run started steps");
    assert!(events_text.contains("\"step-skipped\""));
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn a_relative_results_folder_is_taken_from_the_current_directory() {
    let fixture = Fixture::new(&Sample::default());
    let mut args = fixture.run_args("unused");
    let at = args.iter().position(|arg| arg == "--results").expect("--results") + 1;
    args[at] = "relative/results".to_owned();
    args.extend(["--repo".to_owned(), fixture.repo.path().to_str().expect("UTF-8").to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // From the work folder: the steps run in the exported trees, elsewhere.
    let run = prgate(fixture.work.path(), &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let evidence = fixture.results("relative/results").join("evidence");
    let files = evidence_files(&evidence);
    assert!(files.len() >= 10, "{files:#?}\n{}", run.stderr);
    for name in files.keys() {
        let text = std::fs::read_to_string(evidence.join(name)).expect("a record");
        assert!(!text.contains("\"not-run\""), "{name}: {text}");
    }
    assert!(run.stderr.contains(&evidence.display().to_string()), "{}", run.stderr);
}

#[test]
fn a_server_that_never_becomes_healthy_is_a_timeout_with_its_log() {
    let fixture = Fixture::new(&Sample {
        server_flags: "--never-healthy",
        startup_timeout: "1s",
        ..Sample::default()
    });
    let started = Instant::now();
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    for stem in SERVED.into_iter().chain(["alpha.speed.both"]) {
        let record = fixture.record("results", stem);
        assert_eq!(record["outcome"]["kind"], "not-run", "{stem}: {record}");
        assert_eq!(record["outcome"]["reason"], "timeout", "{stem}: {record}");
        let detail = record["outcome"]["detail"].as_str().expect("a detail");
        assert!(detail.contains("did not answer healthy within"), "{stem}: {detail}");
        assert!(detail.contains("[sim-server] listening on"), "no log tail in {stem}: {detail}");
    }
    // What needs no server ran.
    let tests = fixture.record("results", "alpha.unit-tests.pr");
    assert_eq!(tests["outcome"]["kind"], "tests", "{tests}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn a_server_that_dies_mid_benchmark_is_evidence_with_the_reason() {
    // 300 accuracy questions (one repeat decides them), one warm-up request, one measured
    // request: the next one kills it.
    let fixture =
        Fixture::new(&Sample { server_flags: "--die-after-requests 302", ..Sample::default() });
    let started = Instant::now();
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(90), "took {:?}", started.elapsed());
    let names = evidence_names(&fixture.evidence("results"));
    assert!(
        !names.iter().any(|name| name.contains("-pair-")),
        "a pair of a dying server: {names:#?}"
    );
    for concurrency in [1, 2] {
        let stem = format!("alpha.speed.both.concurrency-{concurrency}");
        let record = fixture.record("results", &stem);
        assert_eq!(record["outcome"]["kind"], "not-run", "{stem}: {record}");
        assert_eq!(record["outcome"]["reason"], "crash", "{stem}: {record}");
        let detail = record["outcome"]["detail"].as_str().expect("a detail");
        assert!(detail.contains("dying after 302 generation requests"), "{stem}: {detail}");
    }
    let accuracy = fixture.record("results", "alpha.accuracy.pr.tiny%40repeat-0");
    assert_eq!(accuracy["outcome"]["kind"], "accuracy", "{accuracy}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn missing_routing_lines_are_not_routed_and_fail_the_gate() {
    let fixture = Fixture::new(&Sample {
        routing_pattern: r"\[monokernel\] dispatched",
        gate: TWO_PAIRS,
        ..Sample::default()
    });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    for side in ["base", "pr"] {
        let routing = fixture.record("results", &format!("alpha.routing.{side}"));
        assert_eq!(routing["outcome"]["kind"], "routing", "{routing}");
        assert_eq!(routing["outcome"]["routed"], false, "{routing}");
    }
    let gate = fixture.gate("results");
    assert_eq!(gate.code, 1, "{}{}", gate.stdout, gate.stderr);
    assert!(gate.stdout.to_lowercase().contains("routing"), "{}", gate.stdout);
}

#[test]
fn a_test_failing_on_base_too_is_pre_existing() {
    let fixture = Fixture::new(&Sample {
        unit_test: "def test_broken():\n    assert 1 == 2\n",
        gate: TWO_PAIRS,
        ..Sample::default()
    });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    for side in ["base", "pr"] {
        let tests = fixture.record("results", &format!("alpha.unit-tests.{side}"));
        assert_eq!(tests["outcome"]["kind"], "tests", "{tests}");
        assert_eq!(tests["outcome"]["results"][0]["outcome"], "failed", "{side}: {tests}");
    }
    let gate = fixture.gate("results");
    assert!(gate.code == 0 || gate.code == 1, "{}{}", gate.stdout, gate.stderr);
    assert!(
        gate.stdout.contains("also failing on base (pre-existing)"),
        "{}{}",
        gate.stdout,
        gate.stderr
    );
    assert!(!gate.stdout.contains("failing on the PR:"), "{}", gate.stdout);
}

#[test]
fn a_pr_test_that_goes_silent_is_stopped_at_the_stall_limit_and_recorded_stalled() {
    let fixture = Fixture::new(&Sample {
        gate: TWO_PAIRS,
        // Under the recipe's `[timeouts]`: two minutes of wall clock, three seconds of silence.
        recipe_extra: "stall = \"3s\"\n",
        pr: |repo| {
            repo.write(
                "test/unit/alpha/test_layer.py",
                "import time\n\ndef test_hangs():\n    time.sleep(300)\n",
            );
        },
        ..Sample::default()
    });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let pr = fixture.record("results", "alpha.unit-tests.pr");
    assert_eq!(pr["outcome"]["kind"], "not-run", "{pr}");
    assert_eq!(pr["outcome"]["reason"], "stalled", "{pr}");
    let detail = pr["outcome"]["detail"].as_str().expect("a detail");
    assert!(detail.contains("stopped after 3s without progress"), "{detail}");
    assert!(detail.contains("before its time limit of 120s"), "{detail}");
    // The base side's suite, and every other command, made progress and ran to its end.
    let base = fixture.record("results", "alpha.unit-tests.base");
    assert_eq!(base["outcome"]["kind"], "tests", "{base}");
    let gate = fixture.gate("results");
    assert_eq!(gate.code, 1, "{}{}", gate.stdout, gate.stderr);
    assert!(gate.stdout.contains("made no progress and was stopped"), "{}", gate.stdout);
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn a_node_without_the_checkpoint_records_no_checkpoint() {
    let fixture = Fixture::new(&Sample { checkpoint: false, ..Sample::default() });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    for stem in
        ["alpha.serving-tests.pr", "alpha.routing.pr", "alpha.speed.both", "alpha.accuracy.pr"]
    {
        let record = fixture.record("results", stem);
        assert_eq!(record["outcome"]["kind"], "not-run", "{stem}: {record}");
        assert_eq!(record["outcome"]["reason"], "no-checkpoint", "{stem}: {record}");
    }
    let tests = fixture.record("results", "alpha.unit-tests.base");
    assert_eq!(tests["outcome"]["kind"], "tests", "{tests}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn a_run_killed_with_sigkill_resumes_to_the_same_steps_and_leaves_no_process() {
    let fixture = Fixture::new(&Sample { output_len: 32, gate: TWO_PAIRS, ..Sample::default() });
    let whole = fixture.run("uninterrupted");
    assert_eq!(whole.code, 0, "{}", whole.stderr);
    let expected = evidence_names(&fixture.evidence("uninterrupted"));
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");

    let mut child = fixture.spawn_run("killed");
    fixture.wait_for_event("killed", &["\"step-started\"", "\"speed\""], &mut child);
    signal(&child, "KILL");
    let status = wait_at_most(&mut child, Duration::from_secs(10));
    assert!(status.code().is_none(), "the run was not killed: {status:?}");
    let partial = evidence_names(&fixture.evidence("killed"));
    assert!(partial.len() < expected.len(), "the run was not cut short: {partial:#?}");
    // Its servers run in their own groups, which a SIGKILL of the runner does not reach: each
    // group's watchdog stops it (sandbox/src/process/watchdog.rs).
    assert_eq!(settle(&fixture), Vec::<String>::new(), "the killed run's servers outlived it");

    let resumed = fixture.run("killed");
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(evidence_names(&fixture.evidence("killed")), expected);
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the resumed run");
}

#[test]
fn ctrl_c_stops_the_run_and_every_child() {
    let fixture = Fixture::new(&Sample { output_len: 64, ..Sample::default() });
    let mut child = fixture.spawn_run("results");
    fixture.wait_for_event("results", &["\"step-started\"", "\"speed\""], &mut child);
    assert!(!fixture.children_alive().is_empty(), "no server is running");
    signal(&child, "INT");
    let status = wait_at_most(&mut child, Duration::from_secs(30));
    assert!(!status.success(), "{status:?}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after Ctrl-C");
}
