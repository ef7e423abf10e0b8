//! `prgate gate` on real plans and evidence files: exit codes, the base side's settings, and
//! errors that name the file.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{MANIFEST, Repo, prgate};

/// A repository whose `pr` branch changes model `alpha` (full) and `pkg/common` (so `beta`
/// and `beta_x` run smoke), and its plan written to `plan.json` beside the evidence folder.
fn planned(manifest_extra: &str) -> (Repo, tempfile::TempDir) {
    let repo = Repo::standard();
    if !manifest_extra.is_empty() {
        repo.write("prgate.toml", &format!("{MANIFEST}{manifest_extra}"));
        repo.commit("settings");
    }
    repo.branch("pr", "main");
    repo.write("pkg/models/alpha/layer.py", "# faster\n")
        .write("pkg/common/guard.py", "# shared\n");
    repo.commit("pr");
    let work = tempfile::tempdir().expect("a temporary directory");
    let plan = prgate(repo.path(), &["plan", "--base", "main", "--head", "pr", "--format", "json"]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    std::fs::write(work.path().join("plan.json"), plan.stdout).expect("write the plan");
    std::fs::create_dir(work.path().join("evidence")).expect("an evidence folder");
    (repo, work)
}

fn record(model: Option<&str>, check: &str, side: &str, outcome: Value) -> Value {
    json!({
        "schema_version": 1,
        "model": model,
        "check": check,
        "side": side,
        "provenance": { "node": "mi355x-1", "image_digest": "sha256:abc", "base_commit": null, "pr_commit": null, "recipe_hash": "r1" },
        "outcome": outcome,
    })
}

/// Writes one evidence file per step for every planned check, all passing; `tpot_change` is
/// the PR's speed change at the covered concurrency.
fn write_passing(dir: &Path, tpot_change: f64) {
    let mut files: Vec<(String, Value)> = Vec::new();
    let passing_tests = json!({ "kind": "tests", "results": [ { "id": "test_a", "outcome": "passed", "message": null } ] });
    for model in ["alpha", "beta", "beta_x"] {
        for check in ["unit-tests", "kernel-tests", "serving-tests"] {
            for side in ["base", "pr"] {
                files.push((
                    format!("{model}/{check}-{side}.json"),
                    record(Some(model), check, side, passing_tests.clone()),
                ));
            }
        }
        files.push((
            format!("{model}/routing-pr.json"),
            record(
                Some(model),
                "routing",
                "pr",
                json!({ "kind": "routing", "routed": true, "line": "[monokernel] routed decode" }),
            ),
        ));
        let change = if model == "alpha" { tpot_change } else { 0.0 };
        // Bracketed pairs, as the runner writes them: two base runs 0.5% either side of 20 ms.
        // Eight: the fail bound spends little of alpha at the first looks (O'Brien-Fleming-type,
        // docs/gate.md), so an 8% loss at the 1% noise floor is decided after a few more than
        // min-pairs.
        for (index, wobble) in
            [0.001, -0.001, 0.0, 0.002, -0.002, 0.0, 0.001, -0.001].iter().enumerate()
        {
            let spread: f64 = if index % 2 == 0 { 0.005 } else { -0.005 };
            files.push((
                format!("{model}/speed-c64-{index}.json"),
                record(Some(model), "speed", "both", json!({
                    "kind": "speed-pair", "concurrency": 64, "index": index, "covered": true,
                    "base_tpot_ms": 20.0, "pr_tpot_ms": 20.0 * (1.0 + change + wobble), "first": "base",
                    "base_runs_ms": [20.0 * spread.exp(), 20.0 / spread.exp()]
                })),
            ));
        }
    }
    // GSM8K's 1,319 questions, the same answers on both sides: within any tolerance.
    let per_question: Vec<Value> =
        (0..1319).map(|i| json!({ "id": format!("q{i}"), "correct": i % 4 != 0 })).collect();
    for side in ["base", "pr"] {
        files.push((format!("alpha/accuracy-{side}.json"), record(Some("alpha"), "accuracy", side, json!({
            "kind": "accuracy", "benchmark": "gsm8k", "questions": 1319, "correct": 989, "cached": false,
            "per_question": per_question
        }))));
        files.push((format!("alpha/kernel-timing-{side}.json"), record(Some("alpha"), "kernel-timing", side, json!({
            "kind": "kernel-timing", "kernels": [ { "name": "k1", "samples_us": [10.0, 10.1, 9.9] } ]
        }))));
        files.push((
            format!("common/tests-{side}.json"),
            record(None, "common-tests", side, passing_tests.clone()),
        ));
    }
    for (name, value) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create folders");
        std::fs::write(path, serde_json::to_string_pretty(&value).expect("JSON"))
            .expect("write evidence");
    }
}

fn gate(repo: &Repo, work: &Path, extra: &[&str]) -> crate::support::Run {
    let plan = work.join("plan.json");
    let evidence = work.join("evidence");
    let mut args = vec![
        "gate",
        "--plan",
        plan.to_str().expect("UTF-8"),
        "--evidence",
        evidence.to_str().expect("UTF-8"),
    ];
    args.extend_from_slice(extra);
    prgate(repo.path(), &args)
}

#[test]
fn passing_evidence_passes_with_exit_zero() {
    let (repo, work) = planned("");
    write_passing(&work.path().join("evidence"), 0.0);
    let run = gate(&repo, work.path(), &["--title", "[Fix] [MI355X] alpha: a fix"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.starts_with("AMD PR test: PASS"), "{}", run.stdout);
    let order: Vec<&str> =
        run.stdout.lines().filter(|line| line.ends_with(']') && !line.starts_with(' ')).collect();
    assert_eq!(
        order,
        [
            "Rules [pass]",
            "Scope [pass]",
            "Accuracy [pass]",
            "Kernel microbenchmark [pass]",
            "E2E performance [pass]",
            "Tests [pass]",
            "Doc [none]",
        ]
    );
}

#[test]
fn a_tpot_regression_fails_with_exit_one_unless_the_base_side_allows_it() {
    let (repo, work) = planned("");
    write_passing(&work.path().join("evidence"), 0.08);
    let run = gate(&repo, work.path(), &[]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("[FAIL] alpha: speed: TPOT +8.0%"), "{}", run.stdout);

    let (repo, work) = planned("\n[gate.speed]\nmax-loss = 0.10\n");
    write_passing(&work.path().join("evidence"), 0.08);
    let run = gate(&repo, work.path(), &["--format", "json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let verdict: Value = serde_json::from_str(&run.stdout).expect("the verdict is JSON");
    assert_eq!(verdict["result"], "pass");
    assert_eq!(verdict["schema_version"], 1);
    let names: Vec<&str> = verdict["sections"]
        .as_array()
        .expect("sections")
        .iter()
        .map(|s| s["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(
        names,
        ["rules", "scope", "accuracy", "kernel-microbenchmark", "e2e-performance", "tests", "doc"]
    );
}

#[test]
fn a_perf_pr_needs_a_gain() {
    let (repo, work) = planned("");
    write_passing(&work.path().join("evidence"), 0.0);
    let run = gate(&repo, work.path(), &["--title", "[Perf] alpha: faster"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains("no covered concurrency shows a 5% gain"), "{}", run.stdout);

    let (repo, work) = planned("");
    write_passing(&work.path().join("evidence"), -0.12);
    let run = gate(&repo, work.path(), &["--title", "[Perf] alpha: faster"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
}

#[test]
fn missing_evidence_is_pending_and_not_a_pass() {
    let (repo, work) = planned("");
    // Once the run is over, a check without evidence could not be judged.
    let over = gate(&repo, work.path(), &[]);
    assert_eq!(over.code, 2, "{}", over.stdout);
    assert!(over.stdout.starts_with("AMD PR test: ERROR"), "{}", over.stdout);
    let run = gate(&repo, work.path(), &["--in-progress"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.starts_with("AMD PR test: PENDING"), "{}", run.stdout);
    assert!(
        run.stdout.contains("[pending] alpha: accuracy: no evidence of accuracy yet"),
        "{}",
        run.stdout
    );
}

#[test]
fn bad_input_is_an_error_that_names_the_file_or_key() {
    let (repo, work) = planned("");
    let evidence = work.path().join("evidence");
    write_passing(&evidence, 0.0);
    std::fs::write(evidence.join("alpha/broken.json"), "{ not json").expect("write");
    let run = gate(&repo, work.path(), &[]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("alpha/broken.json is not valid"), "{}", run.stderr);

    std::fs::remove_file(evidence.join("alpha/broken.json")).expect("remove");
    let copy = std::fs::read_to_string(evidence.join("alpha/routing-pr.json")).expect("read");
    std::fs::write(evidence.join("alpha/routing-pr-again.json"), copy).expect("write");
    let run = gate(&repo, work.path(), &[]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("routing-pr.json: monokernel routing of alpha on the Pr side appears twice"),
        "{}",
        run.stderr
    );

    // A link loop (and any link) in the evidence folder is an error, not an endless walk.
    std::fs::remove_file(evidence.join("alpha/routing-pr-again.json")).expect("remove");
    std::os::unix::fs::symlink("..", evidence.join("alpha/loop")).expect("a link loop");
    let run = gate(&repo, work.path(), &[]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("alpha/loop is a symbolic link; evidence is read from regular files"),
        "{}",
        run.stderr
    );

    let repo = Repo::standard();
    repo.write("prgate.toml", &format!("{MANIFEST}\n[gate.speed]\nmax-los = 0.03\n"));
    repo.commit("a typo in the settings");
    let run = prgate(repo.path(), &["plan"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains(
            "gate.speed.max-los: unknown key; expected one of alpha, beta, calibration-df, max-loss"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn plan_judges_the_title_at_once() {
    let (repo, _work) = planned("");
    let run = prgate(
        repo.path(),
        &[
            "plan",
            "--base",
            "main",
            "--head",
            "pr",
            "--format",
            "json",
            "--title",
            "[Speedup] beta: x",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(plan["rules"][0]["name"], "codeowners");
    assert_eq!(plan["rules"][0]["verdict"], "pass");
    assert_eq!(plan["rules"][1]["name"], "title");
    assert_eq!(plan["rules"][1]["verdict"], "fail");
    let human = prgate(
        repo.path(),
        &["plan", "--base", "main", "--head", "pr", "--title", "[Speedup] beta: x"],
    );
    assert!(human.stdout.contains("FAIL: [Speedup] is not a known type"), "{}", human.stdout);
}

#[test]
fn the_simulation_prints_its_tables() {
    let run = prgate(Path::new("."), &["gate", "simulate", "--trials", "20", "--seed", "3"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("| condition | measured | 95% interval | target | met | undecided |"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("| CV | true change | cells | P(cell fails)"), "{}", run.stdout);
    let rows = |prefix: &str| run.stdout.lines().filter(|line| line.starts_with(prefix)).count();
    // The targets: issue 23's speed rows (19), then 6 accuracy rows for each of the 3 benchmark
    // sizes (issue 23's accuracy half), each with its interval.
    let targets: Vec<&str> = run
        .stdout
        .lines()
        .skip_while(|line| !line.starts_with("| condition |"))
        .skip(2)
        .take_while(|line| line.starts_with("| "))
        .collect();
    let accuracy = rows("| GSM8K-sized") + rows("| GPQA-sized") + rows("| AIME-sized");
    assert_eq!((targets.len(), accuracy), (37, 18), "{}", run.stdout);
    assert!(targets.iter().all(|row| row.split(" | ").count() == 6), "{}", run.stdout);
    // 4 noise levels × 4 changes × 2 family sizes.
    assert_eq!(rows("| 1%") + rows("| 2%") + rows("| 3%") + rows("| 5%"), 32, "{}", run.stdout);
    // Seeded: the same seed prints the same tables.
    let again = prgate(Path::new("."), &["gate", "simulate", "--trials", "20", "--seed", "3"]);
    assert_eq!(run.stdout, again.stdout);
}
