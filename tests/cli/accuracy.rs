//! Accuracy decided by repeats, end to end: `prgate run` on a real repository with the real
//! simulated server, whose answers are drawn per (question, seed) at its profile's accuracy,
//! then `prgate gate`. A PR that drops accuracy by twice the tolerance fails after more than
//! one repeat; an unchanged PR passes; a benchmark its cap of repeats leaves undecided makes
//! the verdict `error`, never a pass.

use crate::run::{Fixture, Sample, settle};
use crate::support::Repo;

/// The simulated server's profile in the base tree; the PR may change its own.
const PROFILE: &str = "pkg/models/alpha/sim.toml";
/// Base answers 90% of the sums right; a PR's profile with another `seed` draws its answers
/// independently of base's (the same seed would draw alike, and leave no noise to judge).
const BASE_PROFILE: &str = "tpot-ms = 2.0\naccuracy = 0.9\n";
/// Twice the tolerance below base, drawn independently.
const DROPPED: &str = "tpot-ms = 2.0\naccuracy = 0.8\nseed = 7\n";
const DATASET: &str = "test/e2e/data/sums.jsonl";

/// Two speed pairs a cell in a wide zone (the run, not the speed rule, is under test), and a
/// tolerance of 5 points for `sums`: twice it is a drop from 90% to 80%.
const GATE: &str = "\n[gate.speed]\nmax-loss = 0.5\nzone = 0.45\nmin-pairs = 2\nmax-pairs = 2\nmax-outliers = 0\n\n[gate.accuracy.tolerance]\nsums = 0.05\n";

/// 200 sums, each with the `expected:` line the simulated server answers at its accuracy.
fn sums() -> String {
    (1..=200)
        .map(|q| {
            format!(
                "{{\"id\": \"s{q}\", \"question\": \"{q} + 1?\\nexpected: {}\", \"answer\": \"{}\"}}\n",
                q + 1,
                q + 1
            )
        })
        .collect()
}

fn sample(pr: fn(&Repo), recipe_extra: &'static str) -> Sample {
    let files: Vec<(&'static str, &'static str)> =
        vec![(PROFILE, BASE_PROFILE), (DATASET, sums().leak())];
    Sample {
        server_flags: "--profile pkg/models/alpha/sim.toml",
        gate: GATE,
        base_files: files.leak(),
        recipe_extra,
        pr,
        ..Sample::default()
    }
}

const SUMS: &str = "\n[[accuracy]]\nname = \"sums\"\nevaluator = \"builtin\"\ndataset = \"test/e2e/data/sums.jsonl\"\n";
const SUMS_ONE_REPEAT: &str = "\n[[accuracy]]\nname = \"sums\"\nevaluator = \"builtin\"\ndataset = \"test/e2e/data/sums.jsonl\"\nlimit = 60\nrepeats = 1\n";

/// Runs and gates the fixture: the gate's exit code, its verdict, and the `sums` item.
fn run_and_gate(fixture: &Fixture) -> (i32, serde_json::Value, serde_json::Value) {
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "the run itself works: {}", run.stderr);
    let (gate, verdict) = fixture.gate_json("results");
    assert_eq!(settle(fixture), Vec::<String>::new(), "processes left after the run");
    let item = verdict["sections"]
        .as_array()
        .expect("sections")
        .iter()
        .flat_map(|section| section["items"].as_array().expect("items").iter())
        .find(|item| item["check"] == "accuracy sums")
        .cloned()
        .unwrap_or_else(|| panic!("no item of sums: {verdict:#}"));
    (gate.code, verdict, item)
}

/// The repeat records of `sums` on `side`: (index, seed, cap, correct).
fn repeats(fixture: &Fixture, side: &str) -> Vec<(u64, u64, u64, u64)> {
    let mut found = Vec::new();
    for index in 0..64 {
        let path = fixture
            .evidence("results")
            .join(format!("alpha.accuracy.{side}.sums%40repeat-{index}.json"));
        let Ok(text) = std::fs::read_to_string(&path) else { break };
        let record: serde_json::Value = serde_json::from_str(&text).expect("a record");
        let outcome = &record["outcome"];
        let repeat = &outcome["repeat"];
        let number = |value: &serde_json::Value| value.as_u64().expect("a number");
        found.push((
            number(&repeat["index"]),
            number(&repeat["seed"]),
            number(&repeat["cap"]),
            number(&outcome["correct"]),
        ));
    }
    found
}

#[test]
fn a_drop_of_twice_the_tolerance_fails_after_repeats() {
    let fixture = Fixture::new(&sample(
        |repo| {
            repo.write(PROFILE, DROPPED);
        },
        SUMS,
    ));
    let (code, verdict, item) = run_and_gate(&fixture);
    assert_eq!((code, &verdict["result"]), (1, &serde_json::json!("fail")), "{verdict:#}");
    assert_eq!(item["state"], "fail", "{item:#}");
    let base = repeats(&fixture, "base");
    let pr = repeats(&fixture, "pr");
    // More than one repeat was needed, both sides ran each, with seed = index, at the
    // default cap, and the gate stopped as soon as it was decided.
    assert!(pr.len() > 1 && pr.len() < 20, "{pr:?}");
    assert_eq!(base.len(), pr.len(), "{base:?} {pr:?}");
    for (at, (index, seed, cap, _)) in pr.iter().enumerate() {
        assert_eq!((*index, *seed, *cap), (at as u64, at as u64, 20), "{pr:?}");
    }
    // Each side near its accuracy, a different share on each seed.
    let base_correct: Vec<u64> = base.iter().map(|repeat| repeat.3).collect();
    assert!(base_correct.iter().all(|c| (160..=200).contains(c)), "{base_correct:?}");
    let pr_correct: Vec<u64> = pr.iter().map(|repeat| repeat.3).collect();
    assert!(pr_correct.iter().all(|c| (130..190).contains(c)), "{pr_correct:?}");
    assert!(pr_correct.windows(2).any(|w| w[0] != w[1]), "the seeds drew alike: {pr_correct:?}");
    let numbers = &item["numbers"]["repeats"];
    assert_eq!(numbers["judged"], pr.len(), "{item:#}");
    // The next run's base repeats come from the cache, keyed with their seeds.
    let again = fixture.run("again");
    assert_eq!(again.code, 0, "{}", again.stderr);
    let cached = fixture.record("again", "alpha.accuracy.base.sums%40repeat-1");
    assert_eq!(cached["outcome"]["cached"], true, "{cached}");
    assert_eq!(cached["outcome"]["repeat"]["seed"], 1, "{cached}");
}

#[test]
fn an_unchanged_pr_passes_at_its_first_repeat() {
    let fixture = Fixture::new(&sample(
        |repo| {
            repo.write("pkg/models/alpha/layer.py", "# alpha, tidier\n");
        },
        SUMS,
    ));
    let (code, verdict, item) = run_and_gate(&fixture);
    assert_eq!((code, &verdict["result"]), (0, &serde_json::json!("pass")), "{verdict:#}");
    assert_eq!(item["state"], "pass", "{item:#}");
    assert_eq!(repeats(&fixture, "pr").len(), 1, "{item:#}");
    assert_eq!(repeats(&fixture, "base").len(), 1, "{item:#}");
}

#[test]
fn a_benchmark_undecided_at_its_cap_is_an_error_not_a_pass() {
    // One repeat of 60 questions, a quarter of them in disagreement, cannot tell a 10-point
    // drop from none: its interval is about ±20 points.
    let fixture = Fixture::new(&sample(
        |repo| {
            repo.write(PROFILE, DROPPED);
        },
        SUMS_ONE_REPEAT,
    ));
    let (code, verdict, item) = run_and_gate(&fixture);
    assert_eq!((code, &verdict["result"]), (2, &serde_json::json!("error")), "{verdict:#}");
    assert_eq!(item["state"], "error", "{item:#}");
    let summary = item["summary"].as_str().expect("a summary");
    assert!(summary.contains("undecided at the cap of 1 repeats"), "{summary}");
    assert!(summary.contains("repeats in all would decide it"), "{summary}");
    assert_eq!(repeats(&fixture, "pr").len(), 1);
}
