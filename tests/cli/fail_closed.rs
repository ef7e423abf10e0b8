//! Fail closed, end to end: what a PR (or the node) does that once turned the status green,
//! each through `prgate run` and `prgate gate` on a real repository, with real pytest and the
//! real simulated server. Every row fails (exit 1) or, where the node cannot judge, ends in
//! `error` (exit 2); none passes.

use std::path::Path;

use crate::run::{Fixture, Sample, TWO_PAIRS, settle};
use crate::support::{Repo, Run, prgate};

/// The base tree's simulated-server profile: the recipe's server reads it from its side's tree,
/// so a PR can change how its own server behaves and not the base side's.
const PROFILE: &str = "pkg/models/alpha/sim.toml";
const HEALTHY: &str = "tpot-ms = 2.0\n";

fn with_profile(pr: fn(&Repo)) -> Sample {
    Sample {
        server_flags: "--profile pkg/models/alpha/sim.toml",
        startup_timeout: "3s",
        gate: TWO_PAIRS,
        base_files: &[(PROFILE, HEALTHY)],
        pr,
        ..Sample::default()
    }
}

/// `prgate run` then `prgate gate --format json` on the fixture: the gate's run and verdict.
fn run_and_gate(fixture: &Fixture, extra: &[&str]) -> (Run, serde_json::Value) {
    let mut args = fixture.run_args("results");
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = prgate(fixture.repo.path(), &args);
    assert_eq!(run.code, 0, "the run itself works: {}", run.stderr);
    assert!(fixture.results("results").join("job.json").is_file(), "no job plan");
    let (gate, verdict) = fixture.gate_json("results");
    assert_eq!(settle(fixture), Vec::<String>::new(), "processes left after the run");
    (gate, verdict)
}

/// Every item in `state`, as `check: summary`.
fn items(verdict: &serde_json::Value, state: &str) -> Vec<String> {
    verdict["sections"]
        .as_array()
        .expect("sections")
        .iter()
        .flat_map(|section| section["items"].as_array().expect("items").iter())
        .filter(|item| item["state"] == state)
        .map(|item| {
            format!(
                "{}: {}",
                item["check"].as_str().unwrap_or(""),
                item["summary"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn assert_fails_with(gate: &Run, verdict: &serde_json::Value, needle: &str) {
    assert_eq!(verdict["result"], "fail", "{verdict:#}");
    assert_eq!(gate.code, 1, "{}", gate.stderr);
    let failed = items(verdict, "fail");
    assert!(
        failed.iter().any(|item| item.contains(needle)),
        "no failure with {needle:?}: {failed:#?}"
    );
}

#[test]
fn a_pr_that_deletes_its_recipe_fails() {
    let fixture = Fixture::new(&Sample {
        pr: |repo| {
            repo.git(&["rm", "-q", "test/e2e/alpha.toml"]);
        },
        ..Sample::default()
    });
    let (gate, verdict) = run_and_gate(&fixture, &[]);
    assert_fails_with(&gate, &verdict, "the PR removed its recipe");
    assert!(items(&verdict, "author-provided").is_empty(), "{verdict:#}");
}

#[test]
fn a_pr_whose_recipe_is_not_valid_fails() {
    let fixture = Fixture::new(&Sample {
        pr: |repo| {
            repo.write("test/e2e/alpha.toml", "hardware = [\"cpu-sim\"]\ntp = \"one\"\n");
        },
        ..Sample::default()
    });
    let (gate, verdict) = run_and_gate(&fixture, &[]);
    assert_fails_with(&gate, &verdict, "the PR's recipe is not valid");
}

#[test]
fn a_pr_whose_server_never_becomes_healthy_fails() {
    let fixture = Fixture::new(&with_profile(|repo| {
        repo.write(PROFILE, "tpot-ms = 2.0\nnever-healthy = true\n");
    }));
    let (gate, verdict) = run_and_gate(&fixture, &[]);
    assert_fails_with(&gate, &verdict, "timed out");
    // The base side's server was fine: nothing here is the node's.
    assert!(items(&verdict, "error").is_empty(), "{:#?}", items(&verdict, "error"));
}

#[test]
fn a_pr_whose_server_dies_in_the_middle_of_the_speed_benchmark_fails() {
    // The 300 accuracy questions (one repeat), the serving test's /health does not count; the
    // warm-up and the first measured requests do: the PR's server dies within its first speed
    // run.
    let fixture = Fixture::new(&with_profile(|repo| {
        repo.write(PROFILE, "tpot-ms = 2.0\ndie-after-requests = 302\n");
    }));
    let (gate, verdict) = run_and_gate(&fixture, &[]);
    assert_fails_with(&gate, &verdict, "crashed");
    let record = fixture.record("results", "alpha.speed.both.concurrency-1");
    assert_eq!(record["outcome"]["failed_on"], "pr", "{record}");
}

#[test]
fn a_test_suite_with_zero_test_cases_fails() {
    let fixture = Fixture::new(&Sample {
        pr: |repo| {
            repo.write("test/unit/alpha/test_layer.py", "# every test removed\n");
        },
        gate: TWO_PAIRS,
        ..Sample::default()
    });
    let (gate, verdict) = run_and_gate(&fixture, &[]);
    assert_fails_with(&gate, &verdict, "no test ran on the PR side");
}

/// A `python3` that cannot import pytest (no site-packages), as on a node without it.
fn python_without_pytest(dir: &Path) -> String {
    let path = dir.join("python-without-pytest");
    std::fs::write(&path, "#!/bin/sh\nexec python3 -S \"$@\"\n").expect("the wrapper");
    let mut permissions = std::fs::metadata(&path).expect("metadata").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&path, permissions).expect("executable");
    path.to_str().expect("UTF-8").to_owned()
}

#[test]
fn a_node_without_pytest_cannot_judge_and_never_passes() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    let python = python_without_pytest(fixture.work.path());
    let (gate, verdict) = run_and_gate(&fixture, &["--python", &python]);
    assert_eq!(verdict["result"], "error", "{verdict:#}");
    assert_eq!(gate.code, 2, "{}", gate.stderr);
    let errors = items(&verdict, "error");
    assert!(
        errors.iter().any(|item| item.contains("the test harness could not start")),
        "{errors:#?}"
    );
    let record = fixture.record("results", "alpha.unit-tests.pr");
    assert_eq!(record["outcome"]["reason"], "harness", "{record}");
    assert!(
        verdict["checks"]["judged"].as_u64() < verdict["checks"]["expected"].as_u64(),
        "{verdict:#}"
    );
}

#[test]
fn an_untouched_pr_passes_with_every_check_judged() {
    let fixture = Fixture::new(&with_profile(|repo| {
        repo.write("pkg/models/alpha/layer.py", "# alpha, same speed\n");
    }));
    let (gate, verdict) = run_and_gate(&fixture, &[]);
    assert_eq!(verdict["result"], "pass", "{verdict:#}");
    assert_eq!(gate.code, 0, "{}", gate.stderr);
    assert_eq!(verdict["checks"]["judged"], verdict["checks"]["expected"], "{verdict:#}");
}

#[test]
fn the_base_side_runs_its_own_commands_and_a_changed_recipe_is_never_cached() {
    // The PR's recipe starts its server ten times slower: only the PR side may run that
    // command (were the base side to run it too, both sides would measure 20 ms a token).
    let fixture = Fixture::new(&Sample {
        gate: TWO_PAIRS,
        pr: |repo| {
            let path = repo.path().join("test/e2e/alpha.toml");
            let recipe = std::fs::read_to_string(&path).expect("the recipe");
            assert!(recipe.contains("--tpot-ms 2 "), "{recipe}");
            repo.write("test/e2e/alpha.toml", &recipe.replace("--tpot-ms 2 ", "--tpot-ms 20 "));
        },
        ..Sample::default()
    });
    for results in ["first", "second"] {
        let run = fixture.run(results);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let pair = fixture.record(results, "alpha.speed.both.concurrency-1-pair-0");
        let (base, pr) = (&pair["outcome"]["base_tpot_ms"], &pair["outcome"]["pr_tpot_ms"]);
        let (base, pr) = (base.as_f64().expect("a number"), pr.as_f64().expect("a number"));
        // The base side measured its own command (2 ms a token), not the PR's (20 ms).
        assert!(pr > 3.0 * base, "base {base} ms, PR {pr} ms: the base side ran the PR's command");
        // Nothing measured with a PR-changed recipe goes into the node's cache.
        let accuracy = fixture.record(results, "alpha.accuracy.base.tiny%40repeat-0");
        assert_eq!(accuracy["outcome"]["cached"], false, "{accuracy}");
    }
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}
