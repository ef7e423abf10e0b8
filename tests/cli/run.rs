//! `prgate run` end to end: a real repository, real pytest, the real simulated server started
//! by the runner from the recipe, then `prgate gate` on the evidence, and a second run that
//! resumes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use crate::support::{Repo, prgate};

const MANIFEST: &str = r#"[scope]
models = ["pkg/models/{model}/**", "test/unit/{model}/**", "test/kernels/*_{model}_*.py",
          "test/kernels/{model}_*.py", "test/e2e/{model}.toml", "test/e2e/test_{model}_*.py"]
shared = ["pkg/__init__.py"]
"#;

const TIMING_SCRIPT: &str = r#"import json, sys
json.dump({"kernels": [{"name": "k1", "samples_us": [10.0, 10.5, 9.8]}]}, open(sys.argv[1], "w"))
"#;

const SERVING_TEST: &str = r#"import os, urllib.request

def test_the_server_is_healthy():
    url = os.environ["PRGATE_SERVER_URL"] + "/health"
    assert urllib.request.urlopen(url, timeout=10).status == 200
"#;

/// A recipe whose server is the real `prgate sim-server`.
fn recipe() -> String {
    let prgate = env!("CARGO_BIN_EXE_prgate");
    format!(
        r#"hardware = ["cpu-sim"]
checkpoint = "alpha-ckpt"
tp = 1

[server]
command = "{prgate} sim-server --listen 127.0.0.1:{{port}} --tpot-ms 2 {{extra_args}}"
monokernel-flag = "--enable-amd-monokernel"
startup-timeout = "60s"
routing-pattern = '\[monokernel\] routed'

[tests]
unit = ["test/unit/alpha"]
kernel = ["test/kernels/test_alpha_k1.py"]
serving = ["test/e2e/test_alpha_serving.py"]

[[kernel-timing]]
name = "layer"
command = "python3 test/kernels/alpha_timing.py {{output}}"

[[accuracy]]
name = "tiny"
evaluator = "builtin"
dataset = "test/e2e/data/alpha.jsonl"

[speed]
concurrencies = [1, 2]
covered = [1]
input-len = 8
output-len = 8
requests-per-concurrency = 2
warmup-per-concurrency = 1

[timeouts]
unit-tests = "2m"
speed-run = "1m"
"#
    )
}

fn node_profile(work: &Path) -> String {
    let checkpoints = work.join("checkpoints");
    std::fs::create_dir_all(checkpoints.join("alpha")).expect("a checkpoint folder");
    format!(
        r#"name = "ci-node"
hardware = "cpu-sim"
checkpoint-store = "{}"
cache-dir = "{}"
work-dir = "{}"

[gpus]
ids = [0]
render-devices = ["/dev/dri/renderD128"]

[image]
name = "local:none"

[checkpoints]
"alpha-ckpt" = "alpha"
"#,
        checkpoints.display(),
        work.join("cache").display(),
        work.join("work").display(),
    )
}

/// Every evidence file with its modification time.
fn evidence_files(dir: &Path) -> BTreeMap<String, SystemTime> {
    std::fs::read_dir(dir)
        .expect("the evidence folder")
        .map(|entry| {
            let entry = entry.expect("an entry");
            let modified = entry.metadata().expect("metadata").modified().expect("an mtime");
            (entry.file_name().to_string_lossy().into_owned(), modified)
        })
        .collect()
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("JSON")
}

#[test]
fn a_run_records_every_check_on_both_sides_and_a_second_run_resumes() {
    let repo = Repo::new();
    repo.write("prgate.toml", MANIFEST)
        .write("pkg/__init__.py", "")
        .write("pkg/models/alpha/layer.py", "# alpha\n")
        .write("test/unit/alpha/test_layer.py", "def test_passes():\n    assert True\n")
        .write("test/kernels/test_alpha_k1.py", "def test_k1():\n    assert 1 + 1 == 2\n")
        .write("test/kernels/alpha_timing.py", TIMING_SCRIPT)
        .write("test/e2e/test_alpha_serving.py", SERVING_TEST)
        .write(
            "test/e2e/data/alpha.jsonl",
            "{\"id\": \"q1\", \"question\": \"6 x 7?\", \"answer\": \"42\"}\n",
        )
        .write("test/e2e/alpha.toml", &recipe());
    repo.commit("base");
    repo.branch("pr", "main");
    repo.write("pkg/models/alpha/layer.py", "# alpha, faster\n");
    repo.commit("pr");

    let work = tempfile::tempdir().expect("a temporary directory");
    let plan = prgate(repo.path(), &["plan", "--base", "main", "--head", "pr", "--format", "json"]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let plan_path = work.path().join("plan.json");
    std::fs::write(&plan_path, &plan.stdout).expect("write the plan");
    let node_path = work.path().join("node.toml");
    std::fs::write(&node_path, node_profile(work.path())).expect("write the node profile");
    let results = work.path().join("results");
    let events = work.path().join("events.jsonl");
    let run_args = [
        "run",
        "--plan",
        plan_path.to_str().expect("UTF-8"),
        "--node",
        node_path.to_str().expect("UTF-8"),
        "--results",
        results.to_str().expect("UTF-8"),
        "--events",
        events.to_str().expect("UTF-8"),
    ];

    let first = prgate(repo.path(), &run_args);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let evidence = results.join("evidence");
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
        "alpha.accuracy.base.tiny.json",
        "alpha.accuracy.pr.tiny.json",
        "alpha.kernel-timing.base.json",
        "alpha.kernel-timing.pr.json",
        "alpha.speed.both.concurrency-1-pair-0.json",
        "alpha.speed.both.concurrency-2-pair-0.json",
    ] {
        assert!(files.contains_key(expected), "no {expected} in {files:#?}\n{}", first.stderr);
    }
    for side in ["base", "pr"] {
        let tests = read_json(&evidence.join(format!("alpha.unit-tests.{side}.json")));
        assert_eq!(tests["outcome"]["kind"], "tests", "{tests}");
        assert_eq!(tests["outcome"]["results"][0]["outcome"], "passed", "{tests}");
        let serving = read_json(&evidence.join(format!("alpha.serving-tests.{side}.json")));
        assert_eq!(serving["outcome"]["results"][0]["outcome"], "passed", "{serving}");
        let routing = read_json(&evidence.join(format!("alpha.routing.{side}.json")));
        assert_eq!(routing["outcome"]["routed"], true, "{routing}");
        assert_eq!(routing["provenance"]["node"], "ci-node");
        assert!(
            routing["provenance"]["recipe_hash"].as_str().expect("a hash").starts_with("fnv1a64:")
        );
    }
    let pair = read_json(&evidence.join("alpha.speed.both.concurrency-1-pair-0.json"));
    assert_eq!(pair["outcome"]["kind"], "speed-pair", "{pair}");
    assert_eq!(pair["outcome"]["covered"], true);
    assert_eq!(pair["outcome"]["family"], 1, "one covered cell in the whole run");

    let gate = prgate(
        repo.path(),
        &[
            "gate",
            "--plan",
            plan_path.to_str().expect("UTF-8"),
            "--evidence",
            evidence.to_str().expect("UTF-8"),
        ],
    );
    assert!(gate.code == 0 || gate.code == 1, "the gate failed: {}{}", gate.stdout, gate.stderr);

    let started_before = std::fs::read_to_string(&events)
        .expect("the events")
        .lines()
        .filter(|line| line.contains("\"step-started\""))
        .count();
    assert!(started_before >= files.len());
    let second = prgate(repo.path(), &run_args);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(second.stderr.contains("0 steps recorded"), "{}", second.stderr);
    assert_eq!(evidence_files(&evidence), files, "a resumed run rewrote evidence");
    let events_text = std::fs::read_to_string(&events).expect("the events");
    let started_after =
        events_text.lines().filter(|line| line.contains("\"step-started\"")).count();
    assert_eq!(started_after, started_before, "a resumed run started steps");
    assert!(events_text.contains("\"step-skipped\""));
}
