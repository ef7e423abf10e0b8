//! `prgate run` end to end: a real repository, real pytest, the real simulated server started
//! by the runner from the recipe, then `prgate gate` on the evidence, and a second run that
//! resumes; then the failures a node sees: a server that never becomes healthy, one that dies
//! mid-benchmark, missing routing lines, a test failing on both sides, a node without the
//! checkpoint, a run killed with `SIGKILL` and resumed, and a Ctrl-C. Its fixture is shared
//! with the SLURM executor's tests (`slurm.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use tempfile::TempDir;

use prgate_runner::schedule::cost::Switching;

use crate::support::{Repo, Run, prgate};

const MANIFEST: &str = r#"[scope]
models = ["pkg/models/{model}/**", "test/unit/{model}/**", "test/kernels/*_{model}_*.py",
          "test/kernels/{model}_*.py", "test/e2e/{model}.toml", "test/e2e/test_{model}_*.py"]
shared = ["pkg/__init__.py"]
"#;

/// The speed rule these tests judge with: a loss over 50% fails, decided in 5%..95%. A cell
/// still undecided at its pair cap is an `error` (docs/gate.md), and the sim-server's 2 ms
/// TPOT over 8 tokens measures with a run CV of 6–11% on a loaded 2-core machine, which the
/// default 0%..4% zone cannot decide in 16 pairs; this zone passes an unchanged PR in a few
/// pairs and fails one 10 times slower. These tests are about the run, not the statistics
/// (gate/src/speed.rs and gate/src/simulate.rs are).
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
    /// Flags added to every `prgate sim-server` the recipe starts.
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
            output_len: 8,
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
        }
    }
}

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
        let repo = Repo::new();
        repo.write("prgate.toml", &format!("{MANIFEST}{}", sample.gate))
            .write("pkg/__init__.py", "")
            .write("pkg/models/alpha/layer.py", "# alpha\n")
            .write("test/unit/alpha/test_layer.py", sample.unit_test)
            .write("test/kernels/test_alpha_k1.py", "def test_k1():\n    assert 1 + 1 == 2\n")
            .write("test/kernels/alpha_timing.py", TIMING_SCRIPT)
            .write("test/e2e/test_alpha_serving.py", SERVING_TEST)
            .write("test/e2e/data/alpha.jsonl", &alpha_questions())
            .write("test/e2e/alpha.toml", &recipe(sample));
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

        let work = tempfile::tempdir().expect("a temporary directory");
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
    // group's watchdog stops it (runner/src/process/watchdog.rs).
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

const EXTERNAL_ACCURACY: &str = r#"
[[accuracy]]
name = "ext"
evaluator = "external"
command = "python3 test/e2e/fake_sgl_eval.py {port} {results}"
metrics = "metrics.json"
"#;

const EXTERNAL_SPEED: &str = r#"[speed]
concurrencies = [1]
covered = [1]
input-len = 8
output-len = 8
benchmark = "external"
command = "python3 test/e2e/fake_bench_serving.py {port} {concurrency} {results}/result.jsonl {requests}"
format = "bench-serving"
result = "result.jsonl"
"#;

#[test]
fn external_evaluators_and_benchmarks_run_against_the_server_and_are_read() {
    let fixture = Fixture::new(&Sample {
        recipe_extra: EXTERNAL_ACCURACY,
        speed: Some(EXTERNAL_SPEED),
        gate: TWO_PAIRS,
        pr: |repo| {
            repo.write("pkg/models/alpha/layer.py", "# alpha, faster\n")
                .write("test/e2e/fake_sgl_eval.py", FAKE_SGL_EVAL)
                .write("test/e2e/fake_bench_serving.py", FAKE_BENCH_SERVING);
        },
        ..Sample::default()
    });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    for side in ["base", "pr"] {
        let accuracy = fixture.record("results", &format!("alpha.accuracy.{side}.ext%40repeat-0"));
        // The base tree has no stand-in script: the command fails there, and says so.
        if side == "pr" {
            assert_eq!(accuracy["outcome"]["kind"], "accuracy", "{accuracy}");
            assert_eq!(accuracy["outcome"]["questions"], 4, "{accuracy}");
            assert_eq!(accuracy["outcome"]["correct"], 3, "{accuracy}");
            assert_eq!(accuracy["outcome"]["per_question"][2]["correct"], false, "{accuracy}");
        } else {
            assert_eq!(accuracy["outcome"]["kind"], "not-run", "{accuracy}");
            let detail = accuracy["outcome"]["detail"].as_str().expect("a detail");
            assert!(detail.contains("fake_sgl_eval.py"), "{detail}");
        }
    }
    // The speed benchmark runs in each side's own tree: the base tree lacks it too.
    let speed = fixture.record("results", "alpha.speed.both.concurrency-1");
    assert_eq!(speed["outcome"]["kind"], "not-run", "{speed}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn an_external_speed_benchmark_gives_the_pairs() {
    let fixture = Fixture::new(&Sample {
        speed: Some(EXTERNAL_SPEED),
        gate: TWO_PAIRS,
        pr: |repo| {
            repo.write("pkg/models/alpha/layer.py", "# alpha, faster\n");
        },
        ..Sample::with_scripts()
    });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    for index in 0..2 {
        let pair =
            fixture.record("results", &format!("alpha.speed.both.concurrency-1-pair-{index}"));
        assert_eq!(pair["outcome"]["kind"], "speed-pair", "{pair}");
        let tpot = pair["outcome"]["pr_tpot_ms"].as_f64().expect("a TPOT");
        // The simulated server streams a token every 2 ms.
        assert!((1.0..50.0).contains(&tpot), "{pair}");
    }
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn a_second_run_takes_the_base_accuracy_from_the_cache() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    let first = fixture.run("first");
    assert_eq!(first.code, 0, "{}", first.stderr);
    let measured = fixture.record("first", "alpha.accuracy.base.tiny%40repeat-0");
    assert_eq!(measured["outcome"]["cached"], false, "{measured}");
    let second = fixture.run("second");
    assert_eq!(second.code, 0, "{}", second.stderr);
    let cached = fixture.record("second", "alpha.accuracy.base.tiny%40repeat-0");
    assert_eq!(cached["outcome"]["cached"], true, "{cached}");
    assert_eq!(cached["outcome"]["correct"], measured["outcome"]["correct"]);
    // Only the base side is ever cached.
    let pr = fixture.record("second", "alpha.accuracy.pr.tiny%40repeat-0");
    assert_eq!(pr["outcome"]["cached"], false, "{pr}");
    let gate = fixture.gate("second");
    assert!(gate.code == 0 || gate.code == 1, "{}{}", gate.stdout, gate.stderr);
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn a_new_model_is_compared_with_sglangs_own_path() {
    let fixture = Fixture::new(&Sample {
        gate: TWO_PAIRS,
        pr: |repo| {
            let recipe = std::fs::read_to_string(repo.path().join("test/e2e/alpha.toml"))
                .expect("the alpha recipe");
            repo.write("pkg/models/beta/layer.py", "# beta\n").write("test/e2e/beta.toml", &recipe);
        },
        ..Sample::default()
    });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let names = evidence_names(&fixture.evidence("results"));
    // No base tree for a new model: its tests ran on the PR only.
    assert!(names.contains("beta.unit-tests.pr.json"), "{names:#?}");
    assert!(!names.contains("beta.unit-tests.base.json"), "{names:#?}");
    // Its baseline is the PR tree with the monokernels off: no routing lines there.
    let base = fixture.record("results", "beta.routing.base");
    assert_eq!(base["outcome"]["routed"], false, "{base}");
    let pr = fixture.record("results", "beta.routing.pr");
    assert_eq!(pr["outcome"]["routed"], true, "{pr}");
    let accuracy = fixture.record("results", "beta.accuracy.base.tiny%40repeat-0");
    assert_eq!(accuracy["outcome"]["kind"], "accuracy", "{accuracy}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn the_servers_get_disjoint_gpus_or_take_turns_with_base_runs_bracketing() {
    // Two GPUs, tp 1: both servers up at once, one GPU each.
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let log = |side: &str| {
        std::fs::read_to_string(
            fixture.results("results").join(format!("logs/alpha.routing.{side}/server.log")),
        )
        .expect("the server's log")
    };
    assert!(log("base").contains("HIP_VISIBLE_DEVICES=0\n"), "{}", log("base"));
    assert!(log("pr").contains("HIP_VISIBLE_DEVICES=1\n"), "{}", log("pr"));
    // Every pair is bracketed, together too: base, PR, base, with base runs of its own.
    let second = fixture.record("results", "alpha.speed.both.concurrency-1-pair-1");
    assert_eq!(second["outcome"]["first"], "base", "{second}");
    let runs = second["outcome"]["base_runs_ms"].as_array().expect("two base runs");
    let geometric = (runs[0].as_f64().expect("ms") * runs[1].as_f64().expect("ms")).sqrt();
    let base = second["outcome"]["base_tpot_ms"].as_f64().expect("ms");
    assert!((geometric / base - 1.0).abs() < 1e-9, "{second}");

    // The chain, together: the second pair opens with the first one's closing base run.
    let first = fixture.record("results", "alpha.speed.both.concurrency-1-pair-0");
    assert_eq!(first["outcome"]["base_runs_ms"][1], second["outcome"]["base_runs_ms"][0]);
    // Both up at once: each side's server loaded once.
    assert_eq!(server_loads(&fixture, "results"), [("base".to_owned(), 1), ("pr".to_owned(), 1)]);

    // One GPU, servers without a memory API: one server at a time on GPU 0, each switch a
    // reload, so the blocked design: each cell's runs in blocks of two on each load, every PR
    // block bracketed by base blocks, a pair's closing base block opening the next (2n + 1
    // blocks per cell).
    let fixture = Fixture::new(&Sample {
        gate: TWO_PAIRS,
        gpus: 1,
        server_flags: "--memory-api none",
        ..Sample::default()
    });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    for side in ["base", "pr"] {
        let text = std::fs::read_to_string(
            fixture.results("results").join(format!("logs/alpha.routing.{side}/server.log")),
        )
        .expect("the server's log");
        let starts = text.matches("HIP_VISIBLE_DEVICES=0\n").count();
        assert!(starts >= 2, "{side}'s server was not restarted in turns:\n{text}");
    }
    let pairs: Vec<serde_json::Value> = (0..2)
        .map(|index| {
            fixture.record("results", &format!("alpha.speed.both.concurrency-1-pair-{index}"))
        })
        .collect();
    for pair in &pairs {
        assert_eq!(pair["outcome"]["first"], "base", "{pair}");
        assert_eq!(pair["outcome"]["base_runs_ms"].as_array().map(Vec::len), Some(2), "{pair}");
    }
    assert_eq!(pairs[0]["outcome"]["base_runs_ms"][1], pairs[1]["outcome"]["base_runs_ms"][0]);
    // The loads, from the events: the PR's side first (serving tests, accuracy), then base's,
    // whose server opens the speed pairs; then PR, base per block pair; the routing lines are
    // read from the logs the servers wrote (no restart). 2 + 2n loads for n block pairs: base
    // 3, PR 3 (before: a restart for the first opening base run and one for the PR's routing
    // line, 8).
    assert_eq!(server_loads(&fixture, "results"), [("base".to_owned(), 3), ("pr".to_owned(), 3)]);
    // The estimate's formula counts the same: loads, and runs (from the evidence: each cell's
    // PR blocks and its distinct base blocks, 2n + 1, of two runs each).
    let counted = one_at_a_time_counts(Switching::Blocked { runs: 2 });
    assert_eq!(counted.loads(), 6);
    let mut blocks = 0;
    for concurrency in [1, 2] {
        let mut base: Vec<u64> = Vec::new();
        for index in 0..2 {
            let name = format!("alpha.speed.both.concurrency-{concurrency}-pair-{index}");
            let pair = fixture.record("results", &name);
            blocks += 1;
            for block in pair["outcome"]["base_runs_ms"].as_array().expect("two base blocks") {
                base.push(block.as_f64().expect("ms").to_bits());
            }
        }
        base.dedup();
        blocks += base.len();
    }
    assert_eq!(u32::try_from(2 * blocks).ok(), Some(counted.runs));
    // A blocked cell is judged without the node's run-to-run calibration: none is recorded.
    let noise = fixture.evidence("results").join("alpha.speed.both.concurrency-1-noise.json");
    assert!(!noise.exists(), "a blocked cell recorded a calibration");
    // Which design ran, how many loads and switches, and why: in the run's notes and its
    // GPU-time file (which the comment shows).
    let words = "one server at a time, blocked reloads (blocks of 2 runs): 6 loads, 0 wakes, 5 switches, because the PR server answered neither SGLang's nor vLLM's memory API";
    assert!(run.stderr.contains(words), "{}", run.stderr);
    let time = std::fs::read_to_string(fixture.results("results").join("gpu-time/alpha.json"))
        .expect("the GPU-time file");
    let time: serde_json::Value = serde_json::from_str(&time).expect("JSON");
    assert_eq!(time["servers"]["design"], "blocked", "{time}");
    assert_eq!(time["servers"]["loads"], 6, "{time}");
    assert_eq!(time["servers"]["block_runs"], 2, "{time}");
    for side in ["base", "pr"] {
        let routing = fixture.record("results", &format!("alpha.routing.{side}"));
        assert_eq!(routing["outcome"]["routed"], true, "{routing}");
    }
    // The speed records split the speed phase's time: each starts when the previous closed,
    // so the history prices every run and switch.
    let text = std::fs::read_to_string(fixture.events("results")).expect("the event stream");
    let speed: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("an event"))
        .filter(|event| event["event"] == "step-finished" && event["check"] == "speed")
        .collect();
    let pairs = speed
        .iter()
        .filter(|event| event["part"].as_str().is_some_and(|part| part.contains("pair")));
    assert_eq!(pairs.count(), 4, "two cells of two pairs:\n{text}");
    for two in speed.windows(2) {
        assert_eq!(two[1]["started_ms"], two[0]["time_ms"], "{text}");
    }
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

/// What the cost formula counts for these tests' sample: one server at a time, the PR side's
/// server work first, two cells of two pairs; switching by wakes or by loads in blocks.
fn one_at_a_time_counts(switching: Switching) -> prgate_runner::schedule::cost::Counts {
    use prgate_runner::schedule::cost::{Layout, Work, counts};
    counts(&Work {
        layout: Layout::OneAtATime,
        pr_work_first: true,
        cells: 2,
        pairs: 2,
        probed: false,
        switching,
        // The fixture's benchmark is decided at its first repeat: one round.
        accuracy_rounds: 1,
    })
}

#[test]
fn one_server_at_a_time_loads_each_side_once_and_switches_by_its_memory_api() {
    for (api, words) in [
        ("sglang", "switched by SGLang's memory release and resume"),
        ("vllm", "switched by vLLM's sleep and wake-up"),
    ] {
        let flags = if api == "sglang" { "--memory-api sglang" } else { "--memory-api vllm" };
        let fixture = Fixture::new(&Sample {
            gate: TWO_PAIRS,
            gpus: 1,
            server_flags: flags,
            ..Sample::default()
        });
        let run = fixture.run("results");
        assert_eq!(run.code, 0, "{api}: {}", run.stderr);
        // Each side loaded once; every later switch a release and a wake (2n for n rounds).
        let loads = server_loads(&fixture, "results");
        assert_eq!(loads, [("base".to_owned(), 1), ("pr".to_owned(), 1)], "{api}");
        let wakes = server_events(&fixture, "results", "server-woken");
        assert_eq!(wakes, [("base".to_owned(), 2), ("pr".to_owned(), 2)], "{api}");
        // The cost formula counts the same, switching by wakes.
        let counted = one_at_a_time_counts(Switching::Wake);
        assert_eq!((counted.loads(), counted.wakes), (2, 4), "{api}");
        let released = server_events(&fixture, "results", "server-released");
        assert_eq!(released, [("base".to_owned(), 2), ("pr".to_owned(), 3)], "{api}");
        // No run met a released server: every pair measured, chained; routing from the logs.
        for concurrency in [1, 2] {
            let pair = |index| {
                fixture.record(
                    "results",
                    &format!("alpha.speed.both.concurrency-{concurrency}-pair-{index}"),
                )
            };
            let (first, second) = (pair(0), pair(1));
            assert_eq!(first["outcome"]["kind"], "speed-pair", "{first}");
            assert_eq!(first["outcome"]["base_runs_ms"][1], second["outcome"]["base_runs_ms"][0]);
        }
        for side in ["base", "pr"] {
            let routing = fixture.record("results", &format!("alpha.routing.{side}"));
            assert_eq!(routing["outcome"]["routed"], true, "{routing}");
        }
        // The run says which design ran and what it took.
        assert!(run.stderr.contains(words), "{api}: {}", run.stderr);
        assert!(run.stderr.contains("2 loads, 4 wakes, 5 switches"), "{api}: {}", run.stderr);
        let time = std::fs::read_to_string(fixture.results("results").join("gpu-time/alpha.json"))
            .expect("the GPU-time file");
        let time: serde_json::Value = serde_json::from_str(&time).expect("JSON");
        assert_eq!(time["servers"]["design"], api, "{time}");
        assert_eq!(time["servers"]["block_runs"], 1, "{time}");
        assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
    }
}

#[test]
fn a_recipe_that_names_its_memory_api_is_not_probed() {
    // The server speaks SGLang's API; the recipe says which one it uses: `none` stops a server
    // to make room (as if it spoke neither), `vllm` asks only vLLM's sleep (which this server
    // refuses: stopped, never probed for SGLang's). Either way each switch is a reload: 3 loads
    // a side, no wake (a probe would have found SGLang's release: 1 load a side and wakes).
    for declared in ["memory-api = \"none\"", "memory-api = \"vllm\""] {
        let fixture = Fixture::new(&Sample {
            gate: TWO_PAIRS,
            gpus: 1,
            server_flags: "--memory-api sglang",
            server_keys: declared,
            ..Sample::default()
        });
        let run = fixture.run("results");
        assert_eq!(run.code, 0, "{declared}: {}", run.stderr);
        let loads = server_loads(&fixture, "results");
        assert_eq!(loads, [("base".to_owned(), 3), ("pr".to_owned(), 3)], "{declared}");
        let woken = server_events(&fixture, "results", "server-woken");
        assert_eq!(woken, Vec::<(String, usize)>::new(), "{declared}");
        let released = server_events(&fixture, "results", "server-released");
        assert_eq!(released, Vec::<(String, usize)>::new(), "{declared}");
        // The blocked design, and why: the recipe's word, or the API it named refused.
        let why = if declared.contains("none") {
            "base's recipe says server.memory-api = \"none\""
        } else {
            "the PR server refused the vllm memory API its recipe names"
        };
        let words = format!(
            "one server at a time, blocked reloads (blocks of 2 runs): 6 loads, 0 wakes, 5 switches, because {why}"
        );
        assert!(run.stderr.contains(&words), "{declared}: {}", run.stderr);
        assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
    }
    // Declared and spoken alike: switched by wakes from the first release, as when probed.
    let fixture = Fixture::new(&Sample {
        gate: TWO_PAIRS,
        gpus: 1,
        server_flags: "--memory-api vllm",
        server_keys: "memory-api = \"vllm\"",
        ..Sample::default()
    });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(server_loads(&fixture, "results"), [("base".to_owned(), 1), ("pr".to_owned(), 1)]);
    let woken = server_events(&fixture, "results", "server-woken");
    assert_eq!(woken, [("base".to_owned(), 2), ("pr".to_owned(), 2)]);
    assert!(run.stderr.contains("switched by vLLM's sleep and wake-up"), "{}", run.stderr);
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

/// Each side's server loads (`server-started` events) in a run's event stream, by side.
pub(crate) fn server_loads(fixture: &Fixture, results: &str) -> Vec<(String, usize)> {
    server_events(fixture, results, "server-started")
}

/// Each side's server events of `kind` in a run's event stream, by side.
pub(crate) fn server_events(fixture: &Fixture, results: &str, kind: &str) -> Vec<(String, usize)> {
    let text = std::fs::read_to_string(fixture.events(results)).expect("the event stream");
    let mut loads: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for line in text.lines() {
        let event: serde_json::Value = serde_json::from_str(line).expect("an event");
        if event["event"] == kind {
            let side = event["side"].as_str().expect("a side").to_owned();
            *loads.entry(side).or_default() += 1;
        }
    }
    loads.into_iter().collect()
}

#[test]
fn the_common_checks_run_the_common_recipe_on_both_sides() {
    let fixture = Fixture::new(&Sample {
        gate: TWO_PAIRS,
        pr: |repo| {
            repo.write("pkg/__init__.py", "# shared\n").write(
                "test/e2e/common.toml",
                "[tests]\nunit = [\"test/unit/alpha\"]\nkernel = [\"test/kernels/test_alpha_k1.py\"]\n",
            );
        },
        ..Sample::default()
    });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    for side in ["base", "pr"] {
        let common = fixture.record("results", &format!("~common.common-tests.{side}"));
        assert_eq!(common["outcome"]["kind"], "tests", "{common}");
        assert_eq!(common["outcome"]["results"].as_array().map(Vec::len), Some(2), "{common}");
        assert_eq!(common["model"], serde_json::Value::Null, "{common}");
    }
    let gate = fixture.gate("results");
    assert!(gate.stdout.contains("common"), "{}", gate.stdout);
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn the_runs_time_limit_records_what_is_left_as_timeouts() {
    let fixture = Fixture::new(&Sample::default());
    let mut args = fixture.run_args("results");
    args.extend(["--time-limit".to_owned(), "1s".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = Instant::now();
    let run = prgate(fixture.repo.path(), &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    let routing = fixture.record("results", "alpha.routing.pr");
    assert_eq!(routing["outcome"]["kind"], "not-run", "{routing}");
    assert_eq!(routing["outcome"]["reason"], "run-time-limit", "{routing}");
    let detail = routing["outcome"]["detail"].as_str().expect("a detail");
    assert!(detail.contains("time limit"), "{detail}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

/// A stand-in container engine (runner/tests/fixtures/fake-engine) in `dir`, with the node's
/// image: a wrapper script that names its state folder, and the state.
fn fake_engine(dir: &Path) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("runner/tests/fixtures/fake-engine");
    let images = serde_json::json!([{
        "id": "sha256:1111111111111111111111111111111111111111111111111111111111111111",
        "names": ["local:none"],
        "repo_digests": [format!("local@{IMAGE_DIGEST}")],
    }]);
    let status = Command::new(&fixture)
        .args(["install", path_str(dir), path_str(&dir.join("engine-state"))])
        .arg(images.to_string())
        .status()
        .expect("the stand-in engine runs");
    assert!(status.success(), "fake-engine install: {status}");
    dir.join("docker")
}

/// `prgate run`'s arguments for `results` with the stand-in `engine` instead of the host (and
/// so without the host's `--trust-pr-code`).
fn contained_args(fixture: &Fixture, results: &str, engine: &Path) -> Vec<String> {
    let mut args = fixture.run_args(results);
    let at = args.iter().position(|arg| arg == "host").expect("--isolation host");
    args[at] = "container".to_owned();
    args.retain(|arg| arg != "--trust-pr-code");
    args.extend(["--engine".to_owned(), path_str(engine).to_owned()]);
    args
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("UTF-8")
}

/// Host isolation is for trees the runner trusts: nothing stands between the PR's commands and
/// prgate's own environment there (`/proc/PID/environ`), nor stops a daemon it leaves. Without
/// the runner's word (`--trust-pr-code`) `prgate run` and `prgate ci` refuse it before anything
/// runs, naming the flag; the word is refused where it means nothing (containers).
#[test]
fn host_isolation_is_refused_for_pr_code_without_the_runners_word() {
    let fixture = Fixture::new(&Sample::default());
    let mut args = fixture.run_args("untrusted");
    args.retain(|arg| arg != "--trust-pr-code");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = prgate(fixture.repo.path(), &args);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--isolation host is refused for PR code")
            && run.stderr.contains("/proc/PID/environ")
            && run.stderr.contains("hint: ")
            && run.stderr.contains("--trust-pr-code"),
        "{}",
        run.stderr
    );
    assert!(!fixture.results("untrusted").exists(), "nothing ran");
    assert!(!fixture.events("untrusted").exists(), "nothing ran");

    let mut args = fixture.run_args("contained");
    let at = args.iter().position(|arg| arg == "host").expect("--isolation host");
    args[at] = "container".to_owned();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = prgate(fixture.repo.path(), &args);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--trust-pr-code is for --isolation host"), "{}", run.stderr);

    // `prgate ci` refuses it before it reads its event or talks to GitHub.
    let work = fixture.work.path();
    let ci = prgate(
        fixture.repo.path(),
        &[
            "ci",
            "--event",
            path_str(&work.join("no-such-event.json")),
            "--repository",
            "amd/mono",
            "--repo",
            path_str(fixture.repo.path()),
            "--node",
            path_str(&fixture.node),
            "--work",
            path_str(&work.join("ci")),
            "--isolation",
            "host",
        ],
    );
    assert_eq!(ci.code, 2, "{}", ci.stderr);
    assert!(ci.stderr.contains("--isolation host is refused for PR code"), "{}", ci.stderr);
    assert!(!ci.stderr.contains("no-such-event"), "refused first: {}", ci.stderr);
}

#[test]
fn in_containers_every_command_from_the_pr_goes_through_the_engine() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    let host = fixture.run("host");
    assert_eq!(host.code, 0, "{}", host.stderr);

    let engine = fake_engine(fixture.work.path());
    let args = contained_args(&fixture, "contained", &engine);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = prgate(fixture.repo.path(), &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The same steps as on the host.
    assert_eq!(
        evidence_names(&fixture.evidence("contained")),
        evidence_names(&fixture.evidence("host"))
    );
    for side in ["base", "pr"] {
        for stem in [format!("alpha.unit-tests.{side}"), format!("alpha.serving-tests.{side}")] {
            let record = fixture.record("contained", &stem);
            assert_eq!(record["outcome"]["results"][0]["outcome"], "passed", "{record}");
        }
        let routing = fixture.record("contained", &format!("alpha.routing.{side}"));
        assert_eq!(routing["outcome"]["routed"], true, "{routing}");
    }

    let log = std::fs::read_to_string(fixture.work.path().join("engine-state/log.jsonl"))
        .expect("the engine's log");
    let runs: Vec<serde_json::Value> = log
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("JSON"))
        .filter(|entry| entry["argv"][0] == "run")
        .collect();
    let commands: Vec<String> = runs
        .iter()
        .map(|entry| {
            let argv: Vec<&str> =
                entry["argv"].as_array().expect("argv").iter().filter_map(|a| a.as_str()).collect();
            argv.join(" ")
        })
        .collect();
    let count = |needle: &str| commands.iter().filter(|command| command.contains(needle)).count();
    // Unit tests, kernel tests and serving tests on both sides, kernel timing on both, and
    // both servers: all in containers.
    assert_eq!(count("-m pytest"), 6, "{commands:#?}");
    assert_eq!(count("alpha_timing.py"), 2, "{commands:#?}");
    assert_eq!(count("sim-server"), 2, "{commands:#?}");
    // Before each server, the gateway check's probe on the run's network (it found the host
    // closed: the stand-in's firewall drops).
    assert_eq!(count("prgate-probe"), 2, "{commands:#?}");
    for command in &commands {
        assert!(command.contains("--rm --init"), "{command}");
        assert!(command.contains(&format!("local:none@{IMAGE_DIGEST}")), "{command}");
        assert!(command.contains(",dst=/models,readonly"), "{command}");
        assert!(!command.contains("--privileged"), "{command}");
        assert!(!command.contains("docker.sock"), "{command}");
    }
    // Serving tests reach their server on its own loopback, inside its network namespace.
    let serving: Vec<&String> =
        commands.iter().filter(|command| command.contains("test_alpha_serving")).collect();
    assert_eq!(serving.len(), 2);
    for command in serving {
        assert!(command.contains("--network container:prgate-"), "{command}");
        assert!(command.contains("/work/out/junit.xml"), "{command}");
    }
    // The servers are on the run's internal network and publish nothing; every other
    // container has no network or a server's.
    for command in &commands {
        let network = if command.contains("sim-server") || command.contains("prgate-probe") {
            " --network prgate-"
        } else if command.contains("test_alpha_serving") {
            " --network container:prgate-"
        } else {
            " --network none "
        };
        let (options, _image_and_command) = command.split_once(" local:none@").expect("an image");
        assert!(options.contains(network), "{network} in {command}");
        assert!(!options.contains(" -p ") && !options.contains("--publish"), "{command}");
    }
    // Nothing of the run is left: no container, no network.
    let state: serde_json::Value = read_json(&fixture.work.path().join("engine-state/state.json"));
    assert_eq!(state["containers"].as_array().map(Vec::len), Some(0), "{state}");
    assert_eq!(state["networks"].as_array().map(Vec::len), Some(0), "{state}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn a_node_whose_host_answers_on_the_runs_network_starts_no_server() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    let engine = fake_engine(fixture.work.path());
    // The stand-in's node has no firewall rule: the host answers at the gateway.
    std::fs::write(fixture.work.path().join("engine-state/gateway-open"), "").expect("written");
    let args = contained_args(&fixture, "contained", &engine);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = prgate(fixture.repo.path(), &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for side in ["base", "pr"] {
        // What needs no server runs as before.
        let unit = fixture.record("contained", &format!("alpha.unit-tests.{side}"));
        assert_eq!(unit["outcome"]["results"][0]["outcome"], "passed", "{unit}");
        // What needs one is the node's failure, with the fix.
        for stem in [format!("alpha.serving-tests.{side}"), format!("alpha.routing.{side}")] {
            let record = fixture.record("contained", &stem);
            assert_eq!(record["outcome"]["kind"], "not-run", "{record}");
            assert_eq!(record["outcome"]["reason"], "node", "{record}");
            let detail = record["outcome"]["detail"].as_str().expect("a detail");
            assert!(detail.contains("the node is not isolated"), "{detail}");
            assert!(detail.contains("accepted a connection"), "{detail}");
            assert!(
                detail.contains("iptables -I INPUT -i podman+ -m conntrack --ctstate NEW -j DROP"),
                "{detail}"
            );
        }
    }
    // No server of either side was started: only the probes were on the run's network.
    let log = std::fs::read_to_string(fixture.work.path().join("engine-state/log.jsonl"))
        .expect("the engine's log");
    let runs: Vec<String> = log
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("JSON"))
        .filter(|entry| entry["argv"][0] == "run")
        .map(|entry| entry["argv"].to_string())
        .collect();
    assert_eq!(runs.iter().filter(|run| run.contains("sim-server")).count(), 0, "{runs:#?}");
    assert_eq!(runs.iter().filter(|run| run.contains("prgate-probe")).count(), 2, "{runs:#?}");
    let state: serde_json::Value = read_json(&fixture.work.path().join("engine-state/state.json"));
    assert_eq!(state["containers"].as_array().map(Vec::len), Some(0), "{state}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

/// `prgate run` with the preflight on, reading the machine under `root`.
fn run_with_preflight(fixture: &Fixture, results: &str, root: &Path) -> Run {
    let mut args = fixture.run_args(results);
    let at = args.iter().position(|arg| arg == "off").expect("--preflight off");
    args[at] = "on".to_owned();
    args.extend([
        "--preflight-root".to_owned(),
        root.to_str().expect("UTF-8").to_owned(),
        "--min-free-disk".to_owned(),
        "0".to_owned(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    prgate(fixture.repo.path(), &args)
}

#[test]
fn a_node_that_fails_the_preflight_records_why_and_a_mended_node_runs_again() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    // A machine without its GPUs: no render node, no /dev/kfd.
    let bare = fixture.work.path().join("bare-machine");
    std::fs::create_dir_all(&bare).expect("the fake root");
    let run = run_with_preflight(&fixture, "results", &bare);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let names = evidence_names(&fixture.evidence("results"));
    assert!(!names.is_empty());
    for name in &names {
        let record = fixture.record("results", name.trim_end_matches(".json"));
        assert_eq!(record["outcome"]["kind"], "not-run", "{record}");
        assert_eq!(record["outcome"]["reason"], "hardware-absent", "{record}");
        let detail = record["outcome"]["detail"].as_str().expect("a detail");
        assert!(detail.starts_with("preflight: "), "{detail}");
        assert!(detail.contains("renderD128"), "{detail}");
    }
    assert!(run.stderr.contains("the preflight found"), "{}", run.stderr);

    // The node is mended: its GPU is there, idle. The same results folder runs every step.
    let mended = healthy_machine(&fixture);
    let run = run_with_preflight(&fixture, "results", &mended);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let tests = fixture.record("results", "alpha.unit-tests.pr");
    assert_eq!(tests["outcome"]["kind"], "tests", "{tests}");
    let routing = fixture.record("results", "alpha.routing.pr");
    assert_eq!(routing["outcome"]["routed"], true, "{routing}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

/// A machine under the fixture's work folder whose two GPUs are there and idle (sysfs).
fn healthy_machine(fixture: &Fixture) -> PathBuf {
    let root = fixture.work.path().join("mended-machine");
    std::fs::create_dir_all(root.join("dev/dri")).expect("dev/dri");
    std::fs::write(root.join("dev/kfd"), "").expect("kfd");
    for render in ["renderD128", "renderD136"] {
        let device = root.join(format!("sys/class/drm/{render}/device"));
        std::fs::create_dir_all(&device).expect("sysfs");
        std::fs::write(root.join("dev/dri").join(render), "").expect("the render node");
        std::fs::write(device.join("mem_info_vram_total"), "309220868096\n").expect("total");
        std::fs::write(device.join("mem_info_vram_used"), "296747008\n").expect("used");
    }
    root
}

#[test]
fn an_empty_checkpoint_folder_stops_its_models_server_steps_until_it_is_filled() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    let machine = healthy_machine(&fixture);
    // The profile lists the checkpoint, but its folder is empty (a copy that never finished).
    let file = fixture.work.path().join("checkpoints/alpha/config.json");
    std::fs::remove_file(&file).expect("an empty checkpoint folder");
    let run = run_with_preflight(&fixture, "results", &machine);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let server_steps =
        ["alpha.serving-tests.pr", "alpha.routing.pr", "alpha.accuracy.pr", "alpha.speed.both"];
    for stem in server_steps {
        let record = fixture.record("results", stem);
        assert_eq!(record["outcome"]["reason"], "no-checkpoint", "{stem}: {record}");
        let detail = record["outcome"]["detail"].as_str().expect("a detail");
        assert!(detail.starts_with("preflight: alpha-ckpt: "), "{detail}");
        assert!(detail.ends_with("is empty"), "{detail}");
    }
    // No server started; the steps that need no checkpoint ran.
    assert!(!fixture.results("results").join("logs/alpha.routing.base/server.log").exists());
    let tests = fixture.record("results", "alpha.unit-tests.base");
    assert_eq!(tests["outcome"]["kind"], "tests", "{tests}");
    // A coverage gap the author provides for (docs/gate.md), each naming the finding.
    let (_gate, verdict) = fixture.gate_json("results");
    let provide = verdict["author_must_provide"].as_array().expect("a list");
    assert_eq!(provide.len(), 4, "{verdict}");
    for item in provide {
        assert!(item.as_str().is_some_and(|item| item.ends_with("is empty")), "{verdict}");
    }

    // The copy finishes: the same results folder runs the server steps.
    std::fs::write(&file, "{}\n").expect("the checkpoint");
    let run = run_with_preflight(&fixture, "results", &machine);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let routing = fixture.record("results", "alpha.routing.pr");
    assert_eq!(routing["outcome"]["routed"], true, "{routing}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn a_full_results_disk_is_the_nodes_fault_and_a_rerun_runs_those_steps_again() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    // The run's log folders are on a disk that is full: a 64 KiB tmpfs filled to the brim, in
    // a mount namespace of the run's own (util-linux's unshare).
    let logs = fixture.results("results").join("logs");
    std::fs::create_dir_all(&logs).expect("the logs folder");
    let script = "mount -t tmpfs -o size=64k prgate-full \"$0\" && { cat /dev/zero > \"$0/ballast\" 2>/dev/null; exec \"$@\"; }";
    let output = Command::new("unshare")
        .args(["--mount", "--", "sh", "-c", script])
        .arg(&logs)
        .arg(env!("CARGO_BIN_EXE_prgate"))
        .args(fixture.run_args("results"))
        .current_dir(fixture.repo.path())
        .env("NO_COLOR", "1")
        .output()
        .expect("unshare runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let names = evidence_names(&fixture.evidence("results"));
    let mut node_records = 0;
    for name in &names {
        let record = fixture.record("results", name.trim_end_matches(".json"));
        let detail = record["outcome"]["detail"].as_str().unwrap_or_default();
        assert!(!detail.contains("pytest cannot start here"), "{name}: {record}");
        if detail.starts_with("disk full: ") {
            assert_eq!(record["outcome"]["reason"], "node", "{name}: {record}");
            node_records += 1;
        }
    }
    let tests = fixture.record("results", "alpha.unit-tests.base");
    assert_eq!(tests["outcome"]["reason"], "node", "{tests}");
    assert!(node_records >= 6, "{node_records} of {names:?}");
    let (_gate, verdict) = fixture.gate_json("results");
    assert_eq!(verdict["result"], "error", "{verdict}");

    // The disk has room again: the same results folder runs those steps again.
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let tests = fixture.record("results", "alpha.unit-tests.base");
    assert_eq!(tests["outcome"]["kind"], "tests", "{tests}");
    for name in evidence_names(&fixture.evidence("results")) {
        let record = fixture.record("results", name.trim_end_matches(".json"));
        let detail = record["outcome"]["detail"].as_str().unwrap_or_default();
        assert!(!detail.starts_with("disk full: "), "{name}: {record}");
    }
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the runs");
}

#[test]
fn one_run_per_host_and_a_killed_holder_leaves_no_lock() {
    let fixture = Fixture::new(&Sample { output_len: 64, ..Sample::default() });
    let mut first = fixture.spawn_run("first");
    fixture.wait_for_event("first", &["\"step-started\""], &mut first);
    // A second run on the same node refuses at once, naming the holder.
    let refused = fixture.run("second");
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("the host is busy"), "{}", refused.stderr);
    assert!(refused.stderr.contains("--wait-lock"), "{}", refused.stderr);
    assert!(!fixture.evidence("second").exists(), "the refused run wrote evidence");

    // The holder dies without a chance to clean up: its lock goes with it.
    signal(&first, "KILL");
    let _status = wait_at_most(&mut first, Duration::from_secs(10));
    let mut args = fixture.run_args("second");
    args.extend(["--wait-lock".to_owned(), "30s".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let second = prgate(fixture.repo.path(), &args);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(fixture.evidence("second").join("alpha.routing.pr.json").exists());
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the runs");
}

/// The secret's value in the tests: long enough to be redacted, and found by the scan.
const SECRET_VALUE: &str = "hf_TESTSECRETvalue0123456789";
/// What the "host file" holds: a file outside every tree that a hostile PR points links at.
const HOST_CONTENT: &str = "HOST-ONLY-CONTENT-7f3a";

/// A hostile gated evaluation: it looks for the token everywhere it can (its environment, by
/// name and by value), prints its whole environment, then scores the dataset prgate fetched for
/// it (`PRGATE_DATASET`); and it tries to hand back a host file through a link.
const FAKE_GATED_EVAL: &str = r#"import json, os, sys
env = dict(os.environ)
print("environment:", json.dumps(env, sort_keys=True))
assert "HF_TOKEN" not in env, "the command got the token"
assert not any(name.startswith("PRGATE_SECRET_") for name in env), "the command got a secret"
rows = [json.loads(line) for line in open(os.path.join(env["PRGATE_DATASET"], "data/test.jsonl"))]
run = os.path.join(sys.argv[1], "sgl_eval_gated_20261129_120000")
os.makedirs(run)
json.dump({"name": "gated", "num_examples": len(rows), "n_repeats": 1, "aggregate": {"score": 1.0}},
          open(os.path.join(run, "metrics.json"), "w"))
os.symlink(sys.argv[3], os.path.join(sys.argv[1], "stolen.json"))
"#;

/// A hostile evaluation that knows the token's value (a guess, a leak elsewhere) and prints
/// it before it fails: its log's tail goes into the evidence, redacted.
const FAKE_LEAKY_EVAL: &str = r#"import sys
print("the token is " + sys.argv[2])
sys.exit(3)
"#;

fn gated_accuracy(host_file: &Path) -> String {
    format!(
        r#"
[[accuracy]]
name = "gated"
evaluator = "external"
command = "python3 test/e2e/fake_gated_eval.py {{results}} {{port}} {host}"
metrics = "stolen.json"
token = "HF_TOKEN"
hub-dataset = "org/gated-set@{HUB_REVISION}"

[[accuracy]]
name = "leaky"
evaluator = "external"
command = "python3 test/e2e/fake_leaky_eval.py {{results}} {SECRET_VALUE} {{port}}"
metrics = "metrics.json"
"#,
        host = host_file.display()
    )
}

const HUB_REVISION: &str = "0123456789abcdef0123456789abcdef01234567";

/// A hub on loopback for `org/gated-set`: its file list and one file, to a request that
/// carries `Bearer <SECRET_VALUE>`; 401 to any other. Serves until the test ends.
fn fake_hub() -> String {
    use std::io::{BufRead as _, BufReader, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().expect("a clone"));
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            let mut authorized = false;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
                // Header names are case-insensitive (RFC 9110): prgate's client sends them
                // lowercase.
                authorized |= line.trim().split_once(':').is_some_and(|(name, value)| {
                    name.eq_ignore_ascii_case("authorization")
                        && value.trim() == format!("Bearer {SECRET_VALUE}")
                });
            }
            let path = first.split(' ').nth(1).unwrap_or_default().to_owned();
            let body = if !authorized {
                None
            } else if path == format!("/api/datasets/org/gated-set/revision/{HUB_REVISION}") {
                Some(r#"{"siblings": [{"rfilename": "data/test.jsonl"}]}"#.to_owned())
            } else if path
                == format!("/datasets/org/gated-set/resolve/{HUB_REVISION}/data/test.jsonl")
            {
                Some("{\"q\": 1}\n{\"q\": 2}\n".to_owned())
            } else {
                None
            };
            let (status, body) = match body {
                Some(body) => ("200 OK", body),
                None => ("401 Unauthorized", String::new()),
            };
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// Every file below `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file()
                && std::fs::read(&path).is_ok_and(|bytes| {
                    bytes.windows(needle.len()).any(|window| window == needle.as_bytes())
                })
            {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn a_gated_dataset_is_fetched_by_prgate_and_no_secret_or_host_file_reaches_any_output() {
    let hub = fake_hub();
    let host = tempfile::tempdir().expect("a temporary directory");
    let host_file = host.path().join("host-secret.json");
    std::fs::write(&host_file, format!("{{\"stolen\": \"{HOST_CONTENT}\"}}\n")).expect("written");
    let recipe = gated_accuracy(&host_file);
    let recipe: &'static str = Box::leak(recipe.into_boxed_str());
    let fixture = Fixture::new(&Sample {
        recipe_extra: recipe,
        gate: TWO_PAIRS,
        pr: |repo| {
            repo.write("pkg/models/alpha/layer.py", "# alpha, faster\n")
                .write("test/e2e/fake_gated_eval.py", FAKE_GATED_EVAL)
                .write("test/e2e/fake_leaky_eval.py", FAKE_LEAKY_EVAL);
        },
        ..Sample::default()
    });
    // The node lists the secret, but this run has no value for it.
    let args = fixture.run_args("without");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = crate::support::prgate_with_env(
        fixture.repo.path(),
        &args,
        &[("PRGATE_SECRET_HF_TOKEN", ""), ("HF_ENDPOINT", &hub)],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let record = fixture.record("without", "alpha.accuracy.pr.gated%40repeat-0");
    assert_eq!(record["outcome"]["reason"], "gated-dataset", "{record}");
    let builtin = fixture.record("without", "alpha.accuracy.pr.tiny%40repeat-0");
    assert_eq!(builtin["outcome"]["kind"], "accuracy", "{builtin}");

    // With the value, prgate fetches the dataset with it; the command gets the dataset, never
    // the token (it asserts so), and the link it hands back is not followed.
    let args = fixture.run_args("with");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = crate::support::prgate_with_env(
        fixture.repo.path(),
        &args,
        &[("PRGATE_SECRET_HF_TOKEN", SECRET_VALUE), ("HF_ENDPOINT", &hub)],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let record = fixture.record("with", "alpha.accuracy.pr.gated%40repeat-0");
    // `stolen.json` is a link to the host file: not read, so sgl-eval's run directory is.
    assert_eq!(record["outcome"]["kind"], "accuracy", "{record}");
    assert_eq!(record["outcome"]["questions"], 2, "{record}");
    let leaky = fixture.record("with", "alpha.accuracy.pr.leaky%40repeat-0");
    assert_eq!(leaky["outcome"]["reason"], "no-result", "{leaky}");
    let detail = leaky["outcome"]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("the token is [redacted HF_TOKEN]"), "{detail}");

    // The scan: no file the run with the secret wrote holds its value or the host file's
    // content. (The run without it has no value to redact: the leaky command's own guess is
    // just text there.)
    for needle in [SECRET_VALUE, HOST_CONTENT] {
        let mut found = files_containing(&fixture.results("with"), needle);
        let events = std::fs::read_to_string(fixture.events("with")).expect("the events");
        assert!(events.contains("step-finished"), "the events were scanned: {events}");
        if events.contains(needle) {
            found.push(fixture.events("with"));
        }
        assert!(found.is_empty(), "{needle} found in {found:#?}");
    }
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

/// The PR's change of the sample: a longer unit-test timeout, and a comment with the node's
/// secret value in the recipe.
fn change_the_recipe(repo: &Repo) {
    let recipe = std::fs::read_to_string(repo.path().join("test/e2e/alpha.toml")).expect("it");
    let changed = recipe.replace("unit-tests = \"2m\"", "unit-tests = \"3m\"");
    repo.write("test/e2e/alpha.toml", &format!("{changed}# the token: {SECRET_VALUE}\n"));
}

#[test]
fn a_changed_recipe_shows_its_redacted_diff_and_no_output_names_the_work_dir_or_the_secret() {
    let fixture =
        Fixture::new(&Sample { gate: TWO_PAIRS, pr: change_the_recipe, ..Sample::default() });
    let args = fixture.run_args("changed");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let secret = [("PRGATE_SECRET_HF_TOKEN", SECRET_VALUE)];
    let run = crate::support::prgate_with_env(fixture.repo.path(), &args, &secret);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The job plan carries the diff, redacted.
    let job = read_json(&fixture.results("changed").join("job.json"));
    let diff = job["targets"][0]["recipe"]["diff"]["text"].as_str().expect("a diff").to_owned();
    assert!(diff.contains("\n-unit-tests = \"2m\"\n+unit-tests = \"3m\"\n"), "{diff}");
    assert!(diff.contains("\n+# the token: [redacted HF_TOKEN]\n"), "{diff}");

    // The verdict, the comment and the full report show it.
    let gate = fixture.gate("changed");
    let plan = fixture.plan.to_str().expect("UTF-8");
    let evidence = fixture.evidence("changed");
    let verdict = crate::support::prgate_with_env(
        fixture.repo.path(),
        &[
            "gate",
            "--plan",
            plan,
            "--evidence",
            evidence.to_str().expect("UTF-8"),
            "--format",
            "json",
        ],
        &secret,
    );
    assert!(verdict.stdout.contains("recipe_changes"), "{}{}", gate.stdout, verdict.stderr);
    let verdict_path = fixture.work.path().join("verdict.json");
    std::fs::write(&verdict_path, &verdict.stdout).expect("the verdict");
    let report = crate::support::prgate_with_env(
        fixture.repo.path(),
        &[
            "report",
            "--pr",
            "7",
            "--plan",
            plan,
            "--verdict",
            verdict_path.to_str().expect("UTF-8"),
        ],
        &secret,
    );
    assert_eq!(report.code, 0, "{}", report.stderr);
    let comment = report.stdout;
    let at = comment.find("### Recipes changed against base").expect("the diff's section");
    let section = &comment[at..];
    assert!(section.contains("<code>alpha</code>: <code>test/e2e/alpha.toml</code>"), "{section}");
    assert!(section.contains("```diff\n"), "{section}");
    assert!(section.contains("\n-unit-tests = \"2m\"\n+unit-tests = \"3m\"\n"), "{section}");
    assert!(section.contains("+# the token: [redacted HF_TOKEN]"), "{section}");
    std::fs::write(fixture.work.path().join("comment.md"), &comment).expect("the comment");

    // No output of the run names the node's work directory (where the trees are exported)
    // or holds the secret's value: the evidence, the job plan, the events, the verdict, the
    // comment.
    let work_dir = fixture.work.path().join("work").display().to_string();
    let outputs = [
        fixture.evidence("changed"),
        fixture.results("changed").join("job.json"),
        fixture.events("changed"),
        verdict_path,
        fixture.work.path().join("comment.md"),
    ];
    for needle in [SECRET_VALUE, work_dir.as_str()] {
        let found: Vec<PathBuf> = outputs
            .iter()
            .flat_map(|output| {
                if output.is_dir() {
                    files_containing(output, needle)
                } else {
                    let text = std::fs::read_to_string(output).unwrap_or_default();
                    if text.contains(needle) { vec![output.clone()] } else { Vec::new() }
                }
            })
            .collect();
        assert!(found.is_empty(), "{needle} found in {found:#?}");
    }

    // An unchanged recipe has no diff and no section.
    let same = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    let run = same.run("same");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let job = read_json(&same.results("same").join("job.json"));
    assert!(job["targets"][0]["recipe"].get("diff").is_none(), "{job}");
}

/// The PR's change of the sample: its recipe is a link to a file of the node.
fn link_the_recipe(repo: &Repo) {
    let recipe = repo.path().join("test/e2e/alpha.toml");
    std::fs::remove_file(&recipe).expect("the recipe goes");
    std::os::unix::fs::symlink("/etc/hostname", &recipe).expect("a link");
}

#[test]
fn a_refused_recipe_is_named_by_its_path_in_the_tree_not_where_the_node_exported_it() {
    let fixture =
        Fixture::new(&Sample { gate: TWO_PAIRS, pr: link_the_recipe, ..Sample::default() });
    let run = fixture.run("linked");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let job = std::fs::read_to_string(fixture.results("linked").join("job.json")).expect("it");
    assert!(
        job.contains("\"test/e2e/alpha.toml: `test/e2e/alpha.toml` is a symbolic link"),
        "{job}"
    );
    let gate = fixture.gate("linked");
    assert!(gate.stdout.contains("test/e2e/alpha.toml"), "{}{}", gate.stdout, gate.stderr);
    let work_dir = fixture.work.path().join("work").display().to_string();
    let mut found = files_containing(&fixture.results("linked"), &work_dir);
    for output in [fixture.events("linked")] {
        if std::fs::read_to_string(&output).unwrap_or_default().contains(&work_dir) {
            found.push(output);
        }
    }
    if gate.stdout.contains(&work_dir) {
        found.push("the verdict".into());
    }
    assert!(found.is_empty(), "{work_dir} found in {found:#?}");
}
