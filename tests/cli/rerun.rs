//! Re-running only what is missing (`prgate run --reuse on`, docs/rerun.md): a second run of
//! the same commits on the same node takes over what the first judged and runs only what
//! failed or is missing; the verdict is what one whole run would give.

use std::path::PathBuf;

use crate::run::{Fixture, Sample, TWO_PAIRS, settle};
use crate::support::{Run, prgate};

/// A PR unit test that fails on its first run and passes afterwards: a flaky test. Its marker
/// is in the node's `trees/` folder, which outlives a run (each run exports its trees afresh
/// below it).
/// Base's one unit test (`test_passes`, by the same name: a test the PR drops is a finding),
/// failing on its first run only.
const FLAKY_ONCE: &str = "from pathlib import Path\n\n\ndef test_passes():\n    mark = Path(__file__).resolve().parents[4] / 'flaky-once'\n    if not mark.exists():\n        mark.write_text('failed once')\n        assert False, 'fails on its first run only'\n";

fn run_reusing(fixture: &Fixture, results: &str) -> Run {
    let mut args = fixture.run_args(results);
    args.extend(["--reuse".to_owned(), "on".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = prgate(fixture.repo.path(), &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run
}

/// The steps a run's event stream says finished (ran), as `model check side part`.
fn finished(fixture: &Fixture, results: &str) -> Vec<String> {
    let text = std::fs::read_to_string(fixture.events(results)).expect("the events");
    let mut steps: Vec<String> = text
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("an event"))
        .filter(|event| event["event"] == "step-finished")
        .map(|event| {
            let part = event["part"].as_str().unwrap_or("-").to_owned();
            format!("{} {} {} {part}", event["model"], event["check"], event["side"])
        })
        .collect();
    steps.sort();
    steps
}

/// How many distinct steps a run's event stream says were skipped.
fn skipped(fixture: &Fixture, results: &str) -> usize {
    let text = std::fs::read_to_string(fixture.events(results)).expect("the events");
    let steps: std::collections::BTreeSet<String> = text
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("an event"))
        .filter(|event| event["event"] == "step-skipped")
        .map(|event| {
            format!("{} {} {} {}", event["model"], event["check"], event["side"], event["part"])
        })
        .collect();
    steps.len()
}

/// The run's closing line up to the evidence folder: the counts it gives.
fn counts_line(run: &Run) -> &str {
    let line = run.stderr.lines().find(|line| line.contains(" steps recorded, ")).expect("counts");
    line.split_once("; evidence in").map_or(line, |(counts, _)| counts)
}

/// The verdict's result and every item's state, as `prgate gate --format json` gives them.
fn states(fixture: &Fixture, results: &str) -> (i32, Vec<String>) {
    let (gate, verdict) = fixture.gate_json(results);
    let mut states = vec![format!("result {}", verdict["result"])];
    for section in verdict["sections"].as_array().expect("sections") {
        for item in section["items"].as_array().expect("items") {
            states.push(format!("{} {} {}", item["model"], item["check"], item["state"]));
        }
    }
    (gate.code, states)
}

/// The node's one saved entry (the sample has one model and no common checks).
fn store_entry(fixture: &Fixture) -> PathBuf {
    let store = fixture.work.path().join("cache").join("reuse");
    let entries: Vec<PathBuf> = std::fs::read_dir(&store)
        .expect("the store")
        .map(|entry| entry.expect("an entry").path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries.into_iter().next().expect("one entry")
}

/// The GPU time a run measured for the sample's model (`DIR/gpu-time/alpha.json`).
pub(crate) fn gpu_time(fixture: &Fixture, results: &str) -> serde_json::Value {
    let path = fixture.results(results).join("gpu-time").join("alpha.json");
    serde_json::from_slice(&std::fs::read(&path).expect("the GPU time")).expect("JSON")
}

pub(crate) fn phase_seconds(spent: &serde_json::Value, phase: &str) -> f64 {
    let phases = spent["phases"].as_array().expect("phases");
    let found = phases.iter().find(|p| p["phase"] == phase).expect("every phase is listed");
    found["seconds"].as_f64().expect("seconds")
}

fn reused_from(fixture: &Fixture, results: &str, stem: &str) -> serde_json::Value {
    fixture.record(results, stem)["provenance"]["reused"]["run"].clone()
}

#[test]
fn a_rerun_runs_only_the_failed_step_and_takes_the_rest_over() {
    let fixture = Fixture::new(&Sample {
        gate: TWO_PAIRS,
        pr: |repo| {
            repo.write("test/unit/alpha/test_layer.py", FLAKY_ONCE);
        },
        ..Sample::default()
    });
    run_reusing(&fixture, "first");
    let (code, first) = states(&fixture, "first");
    assert_eq!(code, 1, "the flaky test failed the first run: {first:#?}");
    let second = run_reusing(&fixture, "second");
    assert_eq!(
        finished(&fixture, "second"),
        ["\"alpha\" \"unit-tests\" \"pr\" -"],
        "only the failed step ran again\n{}",
        second.stderr
    );
    // The closing line's counts are the event stream's: every skipped step was taken over.
    let taken = skipped(&fixture, "second");
    assert!(taken > 10, "{taken}");
    assert_eq!(
        counts_line(&second),
        format!(
            "1 steps recorded, {taken} already recorded by an earlier run ({taken} of them reused from another results directory)"
        )
    );
    let (code, verdict) = states(&fixture, "second");
    assert_eq!(code, 0, "{verdict:#?}");
    let first_run = fixture.results("first").display().to_string();
    for stem in
        ["alpha.unit-tests.base", "alpha.routing.pr", "alpha.speed.both.concurrency-2-pair-1"]
    {
        assert_eq!(reused_from(&fixture, "second", stem), first_run.as_str(), "{stem}");
    }
    assert_eq!(reused_from(&fixture, "second", "alpha.unit-tests.pr"), serde_json::Value::Null);
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
    // The rerun's GPU time is the one suite's: no server started, nothing measured again.
    let spent = gpu_time(&fixture, "second");
    assert!(phase_seconds(&spent, "tests") > 0.0, "{spent}");
    for phase in ["install", "servers", "accuracy", "speed"] {
        assert_eq!(phase_seconds(&spent, phase), 0.0, "{phase}: {spent}");
    }

    // A third run takes everything over, the second run's own measurement included, each
    // record naming the run that measured it.
    let third = run_reusing(&fixture, "third");
    assert_eq!(finished(&fixture, "third"), Vec::<String>::new());
    let all = skipped(&fixture, "third");
    assert_eq!(all, taken + 1);
    assert_eq!(
        counts_line(&third),
        format!(
            "0 steps recorded, {all} already recorded by an earlier run ({all} of them reused from another results directory)"
        )
    );
    let second_run = fixture.results("second").display().to_string();
    assert_eq!(reused_from(&fixture, "third", "alpha.unit-tests.pr"), second_run.as_str());
    assert_eq!(reused_from(&fixture, "third", "alpha.unit-tests.base"), first_run.as_str());
    assert_eq!(states(&fixture, "third"), (0, verdict));
}

#[test]
fn steps_missing_from_the_earlier_run_run_again_and_the_verdict_is_the_same() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    run_reusing(&fixture, "first");
    let first = states(&fixture, "first");
    // The earlier run lost the PR's accuracy result and a pair of the cell at concurrency 2.
    let entry = store_entry(&fixture);
    let mut saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&entry).expect("the entry")).expect("JSON");
    let records = saved["records"].as_array_mut().expect("records");
    let before = records.len();
    records.retain(|record| {
        let outcome = &record["outcome"];
        let accuracy_pr = record["check"] == "accuracy" && record["side"] == "pr";
        let pair =
            outcome["kind"] == "speed-pair" && outcome["concurrency"] == 2 && outcome["index"] == 1;
        !(accuracy_pr || pair)
    });
    assert_eq!(records.len(), before - 2);
    std::fs::write(&entry, serde_json::to_vec(&saved).expect("JSON")).expect("written");

    let second = run_reusing(&fixture, "second");
    assert_eq!(
        finished(&fixture, "second"),
        [
            "\"alpha\" \"accuracy\" \"pr\" tiny@repeat-0",
            "\"alpha\" \"speed\" \"both\" concurrency-2-pair-0",
            "\"alpha\" \"speed\" \"both\" concurrency-2-pair-1",
        ],
        "the lost steps ran again, and the whole cell whose pair was lost\n{}",
        second.stderr
    );
    assert_eq!(states(&fixture, "second"), first);
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn nothing_is_reused_when_the_node_profile_changed() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    run_reusing(&fixture, "first");
    let all = finished(&fixture, "first");
    // The same node with one GPU less: servers take turns, which the first run's pairs did not.
    let profile = std::fs::read_to_string(&fixture.node).expect("the profile");
    let fewer =
        profile.replace("ids = [0, 1]", "ids = [0]").replace(", \"/dev/dri/renderD136\"", "");
    assert_ne!(fewer, profile);
    std::fs::write(&fixture.node, fewer).expect("written");
    let second = run_reusing(&fixture, "second");
    assert_eq!(finished(&fixture, "second"), all, "everything ran again");
    assert!(second.stderr.contains("nothing of alpha reused"), "{}", second.stderr);
    assert!(second.stderr.contains("its node profile was"), "{}", second.stderr);
    assert_eq!(reused_from(&fixture, "second", "alpha.unit-tests.base"), serde_json::Value::Null);
}

#[test]
fn a_run_records_its_gpu_time_by_phase_and_appends_the_nodes_history() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    run_reusing(&fixture, "first");
    let spent = gpu_time(&fixture, "first");
    // tp 1 on a node of two GPUs: both servers at once, so the run holds two.
    assert_eq!(spent["gpus"], 2, "{spent}");
    let phases: Vec<&str> = spent["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|phase| phase["phase"].as_str().expect("a name"))
        .collect();
    assert_eq!(phases, ["install", "servers", "tests", "accuracy", "speed"]);
    // The sample has no install command; everything else ran.
    assert_eq!(phase_seconds(&spent, "install"), 0.0);
    for phase in ["servers", "tests", "accuracy", "speed"] {
        assert!(phase_seconds(&spent, phase) > 0.0, "{phase}: {spent}");
    }
    for phase in spent["phases"].as_array().expect("phases") {
        let seconds = phase["seconds"].as_f64().expect("seconds");
        assert_eq!(phase["gpu_seconds"].as_f64(), Some(seconds * 2.0), "{phase}");
        let estimate = phase["estimate_seconds"].as_u64().expect("an estimate from the recipe");
        assert_eq!(phase["estimate_gpu_seconds"].as_u64(), Some(estimate * 2), "{phase}");
    }
    // The node's history: one line per phase that took time, with the run's commits; what a
    // maintainer sums is what the run measured.
    let history =
        std::fs::read_to_string(fixture.work.path().join("cache").join("gpu-hours.jsonl"))
            .expect("the history");
    let lines: Vec<serde_json::Value> =
        history.lines().map(|line| serde_json::from_str(line).expect("a line")).collect();
    assert_eq!(lines.len(), 4, "{history}");
    let head = fixture.repo.git(&["rev-parse", "pr"]).trim().to_owned();
    for line in &lines {
        assert_eq!(line["pr_commit"], head.as_str(), "{line}");
        assert_eq!(line["model"], "alpha", "{line}");
        assert_eq!(line["node"], "ci-node", "{line}");
        assert_eq!(line["run"], fixture.results("first").display().to_string().as_str());
    }
    let summed: f64 =
        lines.iter().map(|line| line["gpu_seconds"].as_f64().expect("a number")).sum();
    let measured: f64 = spent["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|phase| phase["gpu_seconds"].as_f64().expect("a number"))
        .sum();
    assert!((summed - measured).abs() < 1e-9, "{summed} {measured}");
    // A second run (reusing nothing) appends its own lines.
    let second = fixture.run("second");
    assert_eq!(second.code, 0, "{}", second.stderr);
    let again = std::fs::read_to_string(fixture.work.path().join("cache").join("gpu-hours.jsonl"))
        .expect("the history");
    assert!(again.starts_with(&history) && again.len() > history.len(), "{again}");
}
