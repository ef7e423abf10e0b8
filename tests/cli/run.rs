//! `prgate run` end to end: a real repository, real pytest, the real simulated server started
//! by the runner from the recipe, then `prgate gate` on the evidence, and a second run that
//! resumes; then the failures a node sees: a server that never becomes healthy, one that dies
//! mid-benchmark, missing routing lines, a test failing on both sides, a node without the
//! checkpoint, a run killed with `SIGKILL` and resumed, and a Ctrl-C. Its fixture is shared
//! with the SLURM executor's tests (`slurm.rs`).
//!
//! This file holds the fixture and its helpers; the tests are in submodules by topic.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use tempfile::TempDir;

use prgate_runner::schedule::cost::Switching;

use crate::support::{Repo, Run, prgate};

mod benchmarks;
mod containers;
mod lifecycle;
mod node_faults;
mod secrets;
mod servers;
mod vram;

const MANIFEST: &str = r#"[scope]
models = ["pkg/models/{model}/**", "test/unit/{model}/**", "test/kernels/*_{model}_*.py",
          "test/kernels/{model}_*.py", "test/e2e/{model}.toml", "test/e2e/test_{model}_*.py"]
shared = ["pkg/__init__.py"]
"#;

/// The speed rule these tests judge with: a loss over 50% fails, decided in 5%..95%. A cell
/// still undecided at its pair cap is an `error` (docs/gate.md). The sample's speed runs ask 32
/// tokens of a sim-server that streams one every 2 ms: over 8 tokens, a 2-core machine loaded by
/// a build measured runs with a CV of 20–60% (its scheduler's wake-ups are milliseconds, a few
/// of them in 7 gaps), which left cells undecided; 31 gaps dilute them (10 ms a token did too,
/// but made every accuracy answer and long run five times slower: the suite took 2,065 s, not
/// about 1,200). The default 0%..4% zone cannot decide even a quiet machine's 6–11% in 16
/// pairs; this zone passes an unchanged PR in a few pairs and fails one 10 times slower. These
/// tests are about the run, not the statistics (gate/src/speed.rs and gate/src/simulate.rs are).
pub(crate) const WIDE_ZONE: &str = "\n[gate.speed]\nmax-loss = 0.5\nzone = 0.45\n";

/// [`WIDE_ZONE`] with exactly two speed pairs per cell: no outlier re-measured either, so the
/// steps a run records do not depend on how loaded the machine is.
pub(crate) const TWO_PAIRS: &str =
    "\n[gate.speed]\nmax-loss = 0.5\nzone = 0.45\nmin-pairs = 2\nmax-pairs = 2\nmax-outliers = 0\n";

/// [`TWO_PAIRS`] with three: what a test needs whose PR must **fail** on speed. A fail needs the
/// pairs' own variance to show the loss too (docs/gate.md, "The variance"), and two chained
/// pairs leave it under one degree of freedom; three give it almost two.
pub(crate) const THREE_PAIRS: &str =
    "\n[gate.speed]\nmax-loss = 0.5\nzone = 0.45\nmin-pairs = 3\nmax-pairs = 3\nmax-outliers = 0\n";

const TIMING_SCRIPT: &str = r#"import json, sys
json.dump({"kernels": [{"name": "k1", "samples_us": [10.0, 10.5, 9.8]}]}, open(sys.argv[1], "w"))
"#;

const SERVING_TEST: &str = r#"import os, urllib.request

def test_the_server_is_healthy():
    url = os.environ["PRGATE_SERVER_URL"] + "/health"
    assert urllib.request.urlopen(url, timeout=10).status == 200
"#;

const PASSING_UNIT_TEST: &str = "def test_passes():\n    assert True\n";
const ROUTING_PATTERN: &str = r"\[monokernel\] routed";

/// What a test changes in the sample repository, its recipe and the node.
pub(crate) struct Sample {
    /// Flags added to every `prgate sim-server` the recipe starts; [`WORK`] in them stands for
    /// the fixture's work folder.
    pub(crate) server_flags: &'static str,
    /// More keys of the recipe's `[server]` table, one a line.
    pub(crate) server_keys: &'static str,
    pub(crate) startup_timeout: &'static str,
    pub(crate) routing_pattern: &'static str,
    /// The output length of the speed sweep.
    pub(crate) output_len: u32,
    /// The unit tests of the base commit (the PR keeps them).
    pub(crate) unit_test: &'static str,
    /// Whether the node has the recipe's checkpoint.
    pub(crate) checkpoint: bool,
    /// Appended to the manifest (the gate's settings).
    pub(crate) gate: &'static str,
    /// The node's GPUs: two hold both servers at once (the recipe's tp is 1).
    pub(crate) gpus: u32,
    /// Appended to the recipe.
    pub(crate) recipe_extra: &'static str,
    /// Replaces the recipe's `[speed]` table, when set.
    pub(crate) speed: Option<&'static str>,
    /// What the PR changes (on top of the base commit), then commits.
    pub(crate) pr: fn(&Repo),
    /// Whether the base commit has the stand-ins of sgl-eval and bench_serving.
    pub(crate) base_scripts: bool,
    /// More files of the base commit, by path.
    pub(crate) base_files: &'static [(&'static str, &'static str)],
    /// Whether the base commit has alpha's recipe (without it, a true coverage gap).
    pub(crate) base_recipe: bool,
}

impl Sample {
    /// The default sample whose base commit has the stand-ins of the external programs too.
    fn with_scripts() -> Sample {
        Sample { base_scripts: true, ..Sample::default() }
    }
}

impl Default for Sample {
    fn default() -> Sample {
        Sample {
            server_flags: "",
            server_keys: "",
            startup_timeout: "60s",
            routing_pattern: ROUTING_PATTERN,
            output_len: 32,
            unit_test: PASSING_UNIT_TEST,
            checkpoint: true,
            gate: WIDE_ZONE,
            gpus: 2,
            recipe_extra: "",
            speed: None,
            pr: |repo| {
                repo.write("pkg/models/alpha/layer.py", "# alpha, faster\n");
            },
            base_scripts: false,
            base_files: &[],
            base_recipe: true,
        }
    }
}

/// What stands for the fixture's work folder in [`Sample::server_flags`].
pub(crate) const WORK: &str = "{work}";

/// A recipe whose server is the real `prgate sim-server`.
fn recipe(sample: &Sample) -> String {
    let prgate = env!("CARGO_BIN_EXE_prgate");
    format!(
        r#"hardware = ["cpu-sim"]
checkpoint = "alpha-ckpt"
tp = 1

[server]
command = "{prgate} sim-server --listen 127.0.0.1:{{port}} --tpot-ms 2 {flags} {{extra_args}}"
monokernel-flag = "--enable-amd-monokernel"
startup-timeout = "{startup}"
routing-pattern = '{pattern}'
{server_keys}
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

{speed}
[timeouts]
unit-tests = "2m"
speed-run = "1m"
{extra}"#,
        flags = sample.server_flags,
        server_keys = sample.server_keys,
        startup = sample.startup_timeout,
        pattern = sample.routing_pattern,
        speed = sample.speed.map_or_else(
            || {
                format!(
                    "[speed]\nconcurrencies = [1, 2]\ncovered = [1]\ninput-len = 8\noutput-len = {}\nrequests-per-concurrency = 2\nwarmup-per-concurrency = 1\n",
                    sample.output_len
                )
            },
            str::to_owned
        ),
        extra = sample.recipe_extra,
    )
}

/// The node's image digest: pinned, so base accuracy is cached.
const IMAGE_DIGEST: &str =
    "sha256:4f1c2a9e0b7d3c5a8e6f1b2d4c9a7e3f5b8d1c6a2e9f4b7d3c5a8e1f6b2d9c4a";

fn node_profile(work: &Path, checkpoint: bool, gpus: u32) -> String {
    let checkpoints = work.join("checkpoints");
    std::fs::create_dir_all(checkpoints.join("alpha")).expect("a checkpoint folder");
    std::fs::write(checkpoints.join("alpha/config.json"), "{}\n").expect("a checkpoint file");
    let listed = if checkpoint { "\"alpha-ckpt\" = \"alpha\"\n" } else { "" };
    let ids: Vec<String> = (0..gpus).map(|id| id.to_string()).collect();
    let devices: Vec<String> =
        (0..gpus).map(|id| format!("\"/dev/dri/renderD{}\"", 128 + 8 * id)).collect();
    format!(
        r#"name = "ci-node"
hardware = "cpu-sim"
checkpoint-store = "{}"
cache-dir = "{}"
work-dir = "{}"
secrets = ["HF_TOKEN"]

[gpus]
ids = [{ids}]
render-devices = [{devices}]

[image]
name = "local:none"
digest = "{IMAGE_DIGEST}"

[checkpoints]
{listed}"#,
        checkpoints.display(),
        work.join("cache").display(),
        work.join("work").display(),
        ids = ids.join(", "),
        devices = devices.join(", "),
    )
}

/// The accuracy benchmark: 300 questions, which the simulated server answers alike on both
/// sides of an unchanged PR (none has an `expected:` line), so that one repeat decides it: the
/// pass side's bound with no question in disagreement is about `-9 / 300` points, above twice
/// the default tolerance (docs/gate.md, "Accuracy"); one question would need more repeats than
/// the cap.
fn alpha_questions() -> String {
    (1..=300)
        .map(|q| {
            format!("{{\"id\": \"q{q}\", \"question\": \"6 x 7 ({q})?\", \"answer\": \"42\"}}\n")
        })
        .collect()
}

/// The sample repository (base `main`, PR `pr` changing the model's code), its plan and a node
/// profile in a work folder: everything `prgate run` needs.
pub(crate) struct Fixture {
    pub(crate) repo: Repo,
    pub(crate) work: TempDir,
    pub(crate) plan: PathBuf,
    pub(crate) node: PathBuf,
}

impl Fixture {
    pub(crate) fn new(sample: &Sample) -> Fixture {
        let work = tempfile::tempdir().expect("a temporary directory");
        let repo = Repo::new();
        repo.write("prgate.toml", &format!("{MANIFEST}{}", sample.gate))
            .write("pkg/__init__.py", "")
            .write("pkg/models/alpha/layer.py", "# alpha\n")
            .write("test/unit/alpha/test_layer.py", sample.unit_test)
            .write("test/kernels/test_alpha_k1.py", "def test_k1():\n    assert 1 + 1 == 2\n")
            .write("test/kernels/alpha_timing.py", TIMING_SCRIPT)
            .write("test/e2e/test_alpha_serving.py", SERVING_TEST)
            .write("test/e2e/data/alpha.jsonl", &alpha_questions());
        if sample.base_recipe {
            let work = work.path().to_str().expect("UTF-8");
            repo.write("test/e2e/alpha.toml", &recipe(sample).replace(WORK, work));
        }
        if sample.base_scripts {
            repo.write("test/e2e/fake_sgl_eval.py", FAKE_SGL_EVAL)
                .write("test/e2e/fake_bench_serving.py", FAKE_BENCH_SERVING);
        }
        for (path, text) in sample.base_files {
            repo.write(path, text);
        }
        repo.commit("base");
        repo.branch("pr", "main");
        (sample.pr)(&repo);
        repo.commit("pr");

        let plan =
            prgate(repo.path(), &["plan", "--base", "main", "--head", "pr", "--format", "json"]);
        assert_eq!(plan.code, 0, "{}", plan.stderr);
        let plan_path = work.path().join("plan.json");
        std::fs::write(&plan_path, &plan.stdout).expect("write the plan");
        let node = work.path().join("node.toml");
        std::fs::write(&node, node_profile(work.path(), sample.checkpoint, sample.gpus))
            .expect("write the node profile");
        Fixture { repo, work, plan: plan_path, node }
    }

    /// The results folder `name` in the work folder.
    pub(crate) fn results(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    pub(crate) fn evidence(&self, results: &str) -> PathBuf {
        self.results(results).join("evidence")
    }

    pub(crate) fn events(&self, results: &str) -> PathBuf {
        self.work.path().join(format!("{results}.events.jsonl"))
    }

    pub(crate) fn run_args(&self, results: &str) -> Vec<String> {
        let path = |path: &Path| path.to_str().expect("UTF-8").to_owned();
        vec![
            "run".to_owned(),
            "--plan".to_owned(),
            path(&self.plan),
            "--node".to_owned(),
            path(&self.node),
            "--results".to_owned(),
            path(&self.results(results)),
            "--events".to_owned(),
            path(&self.events(results)),
            // The sample trees are the test's own, so trusted; one test runs them in containers.
            "--isolation".to_owned(),
            "host".to_owned(),
            "--trust-pr-code".to_owned(),
            // No GPU here; the preflight's tests give it a fake machine.
            "--preflight".to_owned(),
            "off".to_owned(),
        ]
    }

    /// `prgate run` into `results` with the preflight on, reading the machine under `root`
    /// (device nodes, sysfs) and no floor of free disk.
    pub(crate) fn run_with_preflight(&self, results: &str, root: &Path) -> Run {
        let mut args = self.run_args(results);
        let at = args.iter().position(|arg| arg == "off").expect("--preflight off");
        args[at] = "on".to_owned();
        args.extend([
            "--preflight-root".to_owned(),
            root.to_str().expect("UTF-8").to_owned(),
            "--min-free-disk".to_owned(),
            "0".to_owned(),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        prgate(self.repo.path(), &args)
    }

    /// `prgate run` into the results folder `results`, to its end.
    pub(crate) fn run(&self, results: &str) -> Run {
        let args = self.run_args(results);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        prgate(self.repo.path(), &args)
    }

    /// `prgate run` into `results`, started and left running.
    pub(crate) fn spawn_run(&self, results: &str) -> Child {
        Command::new(env!("CARGO_BIN_EXE_prgate"))
            .args(self.run_args(results))
            .current_dir(self.repo.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prgate starts")
    }

    /// `prgate gate` on the evidence of `results`.
    pub(crate) fn gate(&self, results: &str) -> Run {
        let plan = self.plan.to_str().expect("UTF-8");
        let evidence = self.evidence(results);
        prgate(
            self.repo.path(),
            &["gate", "--plan", plan, "--evidence", evidence.to_str().expect("UTF-8")],
        )
    }

    /// `prgate gate --format json` on `results`: the gate's run and its verdict.
    pub(crate) fn gate_json(&self, results: &str) -> (Run, serde_json::Value) {
        let plan = self.plan.to_str().expect("UTF-8");
        let evidence = self.evidence(results);
        let gate = prgate(
            self.repo.path(),
            &[
                "gate",
                "--plan",
                plan,
                "--evidence",
                evidence.to_str().expect("UTF-8"),
                "--format",
                "json",
            ],
        );
        let verdict: serde_json::Value = serde_json::from_str(&gate.stdout)
            .unwrap_or_else(|error| panic!("a verdict ({error}): {}{}", gate.stdout, gate.stderr));
        (gate, verdict)
    }

    /// One evidence record of `results`, by its file stem.
    pub(crate) fn record(&self, results: &str, stem: &str) -> serde_json::Value {
        read_json(&self.evidence(results).join(format!("{stem}.json")))
    }

    /// Waits until the event stream of `results` has a line with all of `needles`.
    pub(crate) fn wait_for_event(&self, results: &str, needles: &[&str], child: &mut Child) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let events = std::fs::read_to_string(self.events(results)).unwrap_or_default();
            if events.lines().any(|line| needles.iter().all(|needle| line.contains(needle))) {
                return;
            }
            let exited = child.try_wait().expect("try_wait");
            assert!(exited.is_none(), "the run ended ({exited:?}) before {needles:?}:\n{events}");
            assert!(Instant::now() < deadline, "no event with {needles:?}:\n{events}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The processes whose working folder is in the work folder: the runner's children (they
    /// run in the exported trees), never the runner itself (it runs in the repository).
    pub(crate) fn children_alive(&self) -> Vec<String> {
        processes_under(self.work.path())
    }
}

impl Drop for Fixture {
    /// Whatever a failed test left running goes.
    fn drop(&mut self) {
        for pid in processes_under(self.work.path()) {
            let pid = pid.split(' ').next().unwrap_or_default().to_owned();
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
    }
}

/// The live processes (not zombies) whose working folder is under `dir`, as `pid cmdline`.
pub(crate) fn processes_under(dir: &Path) -> Vec<String> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").filter_map(Result::ok) {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rfind(')').and_then(|end| stat[end + 1..].trim_start().chars().next());
        if matches!(state, None | Some('Z' | 'X')) {
            continue;
        }
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
        if cwd.starts_with(&dir) {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            found.push(format!("{pid} {cmdline}"));
        }
    }
    found
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

pub(crate) fn evidence_names(dir: &Path) -> BTreeSet<String> {
    evidence_files(dir).into_keys().collect()
}

pub(crate) fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("JSON")
}

/// Sends `signal` (a `kill` name: `INT`, `KILL`) to `child`.
pub(crate) fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} failed");
}

/// Waits for `child` to exit, for at most `limit`.
pub(crate) fn wait_at_most(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("the run did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for the processes under the work folder to go (a stopped group's last members may
/// take a moment to be reaped), for at most a few seconds; returns those left.
pub(crate) fn settle(fixture: &Fixture) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let alive = fixture.children_alive();
        if alive.is_empty() || Instant::now() >= deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The records of the checks that need a server, on the side(s) they are written on.
pub(crate) const SERVED: [&str; 6] = [
    "alpha.serving-tests.base",
    "alpha.serving-tests.pr",
    "alpha.accuracy.base.tiny%40repeat-0",
    "alpha.accuracy.pr.tiny%40repeat-0",
    "alpha.routing.base",
    "alpha.routing.pr",
];

/// A stand-in for sgl-eval: asks the server for its models (so `{port}` must be right), then
/// writes a run directory the way sgl-eval does.
const FAKE_SGL_EVAL: &str = r#"import json, os, sys, urllib.request
port, out = sys.argv[1], sys.argv[2]
urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10).read()
run = os.path.join(out, "sgl_eval_ext_20261129_120000")
os.makedirs(run)
json.dump({"name": "ext", "num_examples": 4, "n_repeats": 1, "aggregate": {"score": 0.75}},
          open(os.path.join(run, "metrics.json"), "w"))
with open(os.path.join(run, "output-rs0.jsonl"), "w") as f:
    for i, right in enumerate([True, True, False, True]):
        f.write(json.dumps({"id": f"q{i}", "symbolic_correct": right}) + "\n")
"#;

/// A stand-in for sglang's bench_serving: times one streamed completion against the server
/// and appends a result line with bench_serving's field names, saying that the run's
/// requests (argv[4]) completed.
const FAKE_BENCH_SERVING: &str = r#"import json, sys, time, urllib.request
port, concurrency, out, requests = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
body = json.dumps({"model": "default", "prompt": "hi", "max_tokens": 8, "stream": True}).encode()
request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
start = time.monotonic()
chunks = [line for line in urllib.request.urlopen(request, timeout=30) if line.startswith(b"data:")]
elapsed_ms = (time.monotonic() - start) * 1000
with open(out, "a") as f:
    f.write(json.dumps({"max_concurrency": concurrency, "random_input_len": 8,
                        "random_output_len": 8, "completed": requests,
                        "median_tpot_ms": elapsed_ms / max(len(chunks) - 1, 1),
                        "request_rate": float("inf")}) + "\n")
"#;
