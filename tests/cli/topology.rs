//! Models served by a topology (docs/topology.md): prefill and decode instances of the real
//! `prgate sim-server` behind the real `sglang-router` (installed from PyPI by `.ci/test`,
//! pinned, and found through `PRGATE_TEST_SGLANG_ROUTER`), base and PR, judged by the gate:
//! on one node with room, and across the nodes of the real multi-node SLURM
//! (`.ci/slurm-multi-up`). A required transport line that is missing fails the run; a measurement
//! through the router equals the direct one where the router adds nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::run::{Fixture, Sample, TWO_PAIRS, settle};
use crate::support::prgate;

/// The variable that names a Python with sglang-router installed (`.ci/test` sets it).
pub(crate) const ROUTER_VARIABLE: &str = "PRGATE_TEST_SGLANG_ROUTER";

/// The Python of the real sglang-router; the test fails, saying how to install it, without it.
pub(crate) fn router_python() -> PathBuf {
    let problem = match std::env::var(ROUTER_VARIABLE) {
        Err(_) => format!("{ROUTER_VARIABLE} is not set"),
        Ok(python) => {
            let probe = Command::new(&python)
                .args(["-c", "import sglang_router, importlib.metadata as m; print(m.version('sglang-router'))"])
                .output();
            match probe {
                Ok(output) if output.status.success() => return PathBuf::from(python),
                Ok(output) => format!(
                    "{python} cannot import sglang_router: {}",
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
                Err(error) => format!("{python} cannot run: {error}"),
            }
        }
    };
    panic!(
        "the real sglang-router is needed: {problem}\nrun .ci/test (it installs sglang-router==0.3.2 into a virtualenv and sets {ROUTER_VARIABLE}), or set it to a python with sglang-router installed"
    );
}

/// The `[topology]` of `prefills` prefill instances and one decode instance of the sim-server
/// behind the real router, each decode with `decode_flags`.
pub(crate) fn pd_topology(prefills: u32, decode_flags: &str) -> String {
    let prgate = env!("CARGO_BIN_EXE_prgate");
    let router = router_python();
    format!(
        r#"
[topology.prefill]
instances = {prefills}
command = "{prgate} sim-server --listen {{host}}:{{port}} --tpot-ms 2 --disaggregation-mode prefill --disaggregation-bootstrap-port {{bootstrap_port}} {{extra_args}}"
required-log = ['transfer-backend=mooncake transport=rdma']

[topology.decode]
instances = 1
command = "{prgate} sim-server --listen {{host}}:{{port}} --tpot-ms 2 --disaggregation-mode decode {decode_flags} {{extra_args}}"
required-log = ['kv from \S+ transfer-backend=mooncake transport=rdma']

[topology.router]
command = "{router} -m sglang_router.launch_router --pd-disaggregation --host {{host}} --port {{port}} --prometheus-port {{metrics_port}} --policy round_robin --log-level warn {{extra_args}}"
startup-timeout = "2m"
"#,
        router = router.display()
    )
}

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// The sample with a PD topology of `prefills` prefill instances, on a node of `gpus` GPUs.
fn pd_sample(prefills: u32, decode_flags: &str, gpus: u32) -> Sample {
    Sample {
        recipe_extra: leak(pd_topology(prefills, decode_flags)),
        gate: TWO_PAIRS,
        gpus,
        ..Sample::default()
    }
}

fn verdict_of(fixture: &Fixture, results: &str) -> (String, serde_json::Value) {
    let (_gate, verdict) = fixture.gate_json(results);
    let state = verdict["result"].as_str().unwrap_or_default().to_owned();
    (state, verdict)
}

/// The items of the verdict that did not pass, as `check: summary` lines.
fn not_passed(verdict: &serde_json::Value) -> Vec<String> {
    verdict["sections"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|section| section["items"].as_array().into_iter().flatten())
        .filter(|item| item["state"] != "pass")
        .map(|item| format!("{}: {}", item["check"], item["summary"]))
        .collect()
}

/// The verdict's item of `check` for the model.
fn item<'a>(verdict: &'a serde_json::Value, check: &str) -> &'a serde_json::Value {
    verdict["sections"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|section| section["items"].as_array().into_iter().flatten())
        .find(|item| item["check"] == check)
        .unwrap_or_else(|| panic!("no {check} item in {verdict:#}"))
}

#[test]
fn a_1p1d_topology_on_one_node_runs_base_and_pr_through_the_real_router_and_passes() {
    let fixture = Fixture::new(&pd_sample(1, "", 2));
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let (state, verdict) = verdict_of(&fixture, "results");
    assert_eq!(state, "pass", "{:#?}\n{}", not_passed(&verdict), run.stderr);
    let routing = fixture.record("results", "alpha.routing.pr");
    let logs = fixture.results("results").join("logs/alpha.routing.pr");
    let decode = std::fs::read_to_string(logs.join("decode-0.log")).unwrap_or_default();
    let router = std::fs::read_to_string(logs.join("server.log")).unwrap_or_default();
    assert_eq!(routing["outcome"]["routed"], true, "{routing:#}\n{decode}\n{router}");
    // Every instance and the router were stopped: nothing is left.
    assert_eq!(settle(&fixture), Vec::<String>::new());
    // The logs of both sides' instances are in the routing step's folder.
    for side in ["base", "pr"] {
        let logs = fixture.results("results").join("logs").join(format!("alpha.routing.{side}"));
        for file in ["prefill-0.log", "decode-0.log", "server.log"] {
            assert!(logs.join(file).is_file(), "{} has no {file}", logs.display());
        }
        let decode = std::fs::read_to_string(logs.join("decode-0.log")).expect("decode log");
        assert!(decode.contains("kv from 127.0.0.1:"), "{decode}");
    }
}

#[test]
fn a_decode_that_falls_back_to_tcp_fails_the_routing_check_naming_the_instance() {
    let fixture = Fixture::new(&pd_sample(1, "--disaggregation-transport tcp", 2));
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let routing = fixture.record("results", "alpha.routing.pr");
    assert_eq!(routing["outcome"]["routed"], false, "{routing:#}");
    let line = routing["outcome"]["line"].as_str().unwrap_or_default();
    assert!(line.contains("decode instance 0") && line.contains("transport=rdma"), "{line}");
    let (state, verdict) = verdict_of(&fixture, "results");
    assert_eq!(state, "fail", "{:#?}", not_passed(&verdict));
    let summary = item(&verdict, "routing")["summary"].as_str().unwrap_or_default().to_owned();
    assert!(summary.contains("decode instance 0"), "{summary}");
}

#[test]
fn a_router_that_has_not_registered_its_workers_is_not_up_though_it_listens() {
    // The decode answers prgate's health path (`/server_info`) but never the router's own
    // check of it (`/health`): the real router listens, answers its `/health`, and registers
    // no decode. Its `/readiness` (the default) keeps saying so: the side never counts as up,
    // and no step sends it a request it cannot route.
    let topology = pd_topology(1, "--never-healthy")
        .replace("[topology.router]", "health-path = \"/server_info\"\n\n[topology.router]")
        .replace("startup-timeout = \"2m\"", "startup-timeout = \"8s\"");
    let sample =
        Sample { recipe_extra: leak(topology), gate: TWO_PAIRS, gpus: 2, ..Sample::default() };
    let fixture = Fixture::new(&sample);
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let routing = fixture.record("results", "alpha.routing.base");
    let detail = routing["outcome"]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("the router") && detail.contains("/readiness"), "{routing:#}");
    assert_eq!(routing["outcome"]["reason"], "timeout", "{routing:#}");
    assert_eq!(settle(&fixture), Vec::<String>::new());
}

#[test]
fn a_topology_bigger_than_the_node_is_not_run_naming_what_it_needs() {
    let fixture = Fixture::new(&pd_sample(2, "", 2));
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let routing = fixture.record("results", "alpha.routing.pr");
    let detail = routing["outcome"]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("needs 3 GPUs on this node, which has 2"), "{routing:#}");
    assert_eq!(settle(&fixture), Vec::<String>::new());
}

/// Whether `GET path` on 127.0.0.1:`port` answers 200.
fn answers_200(port: u16, path: &str) -> bool {
    use std::io::{Read as _, Write as _};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    let mut answer = String::new();
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_to_string(&mut answer).is_ok()
        && answer.starts_with("HTTP/1.1 200")
}

/// Median TPOT and TTFT of `prgate bench` against `url`.
fn bench(url: &str) -> (f64, f64) {
    let run = prgate(
        Path::new("."),
        &[
            "bench",
            "--url",
            url,
            "--input-len",
            "16",
            "--output-len",
            "48",
            "--requests",
            "12",
            "--warmup",
            "2",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let result: serde_json::Value = serde_json::from_str(&run.stdout).expect("a result");
    assert_eq!(result["failed"], 0, "{result:#}");
    let number = |key: &str| result[key].as_f64().unwrap_or_else(|| panic!("{key}: {result:#}"));
    (number("median_tpot_ms"), number("median_ttft_ms"))
}

#[test]
fn a_measurement_through_the_router_equals_the_direct_one() {
    let router = router_python();
    let dir = tempfile::tempdir().expect("a folder");
    let free = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .expect("a port")
            .local_addr()
            .expect("addr")
            .port()
    };
    let (worker_port, router_port) = (free(), free());
    let spawn = |program: &Path, args: &[String], log: &str| {
        let log = std::fs::File::create(dir.path().join(log)).expect("a log");
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a log"))
            .stderr(log)
            .spawn()
            .expect("it starts")
    };
    let worker_args: Vec<String> = [
        "sim-server",
        "--listen",
        &format!("127.0.0.1:{worker_port}"),
        "--ttft-ms",
        "20",
        "--tpot-ms",
        "10",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut worker = spawn(Path::new(env!("CARGO_BIN_EXE_prgate")), &worker_args, "worker.log");
    let router_args: Vec<String> = [
        "-m",
        "sglang_router.launch_router",
        "--worker-urls",
        &format!("http://127.0.0.1:{worker_port}"),
        "--host",
        "127.0.0.1",
        "--port",
        &router_port.to_string(),
        "--policy",
        "round_robin",
        "--log-level",
        "warn",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut router_process = spawn(&router, &router_args, "router.log");
    let healthy = (0..600).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        answers_200(router_port, "/health")
    });
    let direct = bench(&format!("http://127.0.0.1:{worker_port}"));
    let routed = healthy.then(|| bench(&format!("http://127.0.0.1:{router_port}")));
    let _ = router_process.kill();
    let _ = worker.kill();
    let _ = (router_process.wait(), worker.wait());
    let (routed_tpot, routed_ttft) = routed.expect("the router became healthy");
    let (direct_tpot, direct_ttft) = direct;
    // A kept-alive connection made the first tokens come in a burst through the router: the
    // TPOT a fifth too low and the TTFT 40 ms too high. A fresh connection per request agrees.
    assert!(
        (routed_tpot / direct_tpot - 1.0).abs() < 0.1,
        "TPOT {routed_tpot} through the router, {direct_tpot} direct"
    );
    assert!(
        routed_ttft - direct_ttft < 25.0,
        "TTFT {routed_ttft} through the router, {direct_ttft} direct"
    );
}

// ---------------------------------------------------------------------------------------------
// Across the nodes of the real multi-node SLURM (`.ci/slurm-multi-up`).

/// The script that brings the multi-node cluster up, kills a node's slurmd, and mends it.
const MULTI_UP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/slurm-multi-up");
/// The multi-node cluster's configuration: SLURM's commands find it through `SLURM_CONF`.
const MULTI_CONF: &str = "/etc/slurm-multi/slurm.conf";
/// Its nodes.
const MULTI_NODES: [&str; 4] = ["pn1", "pn2", "pn3", "pn4"];

/// One test at a time on the multi-node cluster: each takes most of its nodes.
static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Brings the cluster up (idempotent: it starts only what is missing, a killed node's slurmd
/// too, and waits until every node is idle); fails the test, saying how, when it cannot.
fn require_multi_node_slurm() {
    let output = Command::new(MULTI_UP).output().expect(".ci/slurm-multi-up runs");
    assert!(
        output.status.success(),
        "the multi-node SLURM is not up: {}\nrun .ci/slurm-up (it installs SLURM and starts both clusters)",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `prgate run --executor slurm` on the multi-node cluster into `results`, to its end.
fn multi_node_run(fixture: &Fixture, results: &str) -> crate::support::Run {
    let mut args = fixture.run_args(results);
    args.extend(["--executor", "slurm", "--job-time-limit", "20m"].map(str::to_owned));
    let output = Command::new(env!("CARGO_BIN_EXE_prgate"))
        .args(&args)
        .current_dir(fixture.repo.path())
        .env("SLURM_CONF", MULTI_CONF)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("prgate runs");
    crate::support::Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// What `scontrol show job` says of the model's job: its nodes, state and reason.
fn model_job(fixture: &Fixture, results: &str) -> String {
    let dir = fixture.results(results).join("slurm/alpha");
    let id = std::fs::read_dir(&dir)
        .expect("the job's folder")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            Some(name.strip_prefix("slurm-")?.strip_suffix(".out")?.to_owned())
        })
        .next()
        .expect("the job's output");
    let output = Command::new("scontrol")
        .args(["show", "job", &id, "--oneliner"])
        .env("SLURM_CONF", MULTI_CONF)
        .output()
        .expect("scontrol runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The processes in node `node`'s namespace other than its slurmd: what a job left there.
fn left_on(node: &str) -> Vec<String> {
    let output = Command::new("ip")
        .args(["netns", "pids", &format!("prgate-{node}")])
        .output()
        .expect("ip runs");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .filter_map(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            let comm = comm.trim().to_owned();
            (comm != "slurmd").then(|| format!("{pid} {comm}"))
        })
        .collect()
}

/// Waits until no node has anything but its slurmd, for at most a while; returns what is left.
fn settle_nodes() -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left: Vec<String> = MULTI_NODES.iter().flat_map(|node| left_on(node)).collect();
        if left.is_empty() || std::time::Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn across_nodes(prefills: u32) {
    let _cluster = CLUSTER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    require_multi_node_slurm();
    let fixture = Fixture::new(&pd_sample(prefills, "", 2));
    let run = multi_node_run(&fixture, "results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let job = model_job(&fixture, "results");
    let expect_nodes = format!("NumNodes={}", prefills + 1);
    assert!(job.contains(&expect_nodes) && job.contains("JobState=COMPLETED"), "{job}");
    let (state, verdict) = verdict_of(&fixture, "results");
    assert_eq!(state, "pass", "{:#?}\n{}", not_passed(&verdict), run.stderr);
    // Each instance ran on a node of its own: the decode took its KV from another node.
    let logs = fixture.results("results").join("slurm/alpha/logs/alpha.routing.pr");
    let decode = std::fs::read_to_string(logs.join("decode-0.log")).expect("the decode's log");
    assert!(decode.contains("kv from 198.18.27.11:"), "{decode}");
    assert!(
        decode.contains(&format!("listening on http://198.18.27.{}:", 11 + prefills)),
        "{decode}"
    );
    assert_eq!(settle_nodes(), Vec::<String>::new(), "left on the nodes");
    assert_eq!(settle(&fixture), Vec::<String>::new());
}

#[test]
fn a_1p1d_topology_runs_across_two_nodes_with_the_real_router_and_passes() {
    across_nodes(1);
}

#[test]
fn a_2p1d_topology_runs_across_three_nodes_with_the_real_router_and_passes() {
    across_nodes(2);
}

#[test]
fn a_drained_node_is_left_out_of_the_allocation() {
    let _cluster = CLUSTER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    require_multi_node_slurm();
    let fixture = Fixture::new(&pd_sample(2, "", 2));
    let node = fixture.node.to_str().expect("UTF-8");
    let drain = prgate(
        fixture.repo.path(),
        &["node", "drain", "--node", node, "--name", "pn2", "--reason", "a test drains it"],
    );
    assert_eq!(drain.code, 0, "{}", drain.stderr);
    let run = multi_node_run(&fixture, "results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let job = model_job(&fixture, "results");
    assert!(job.contains("ExcNodeList=pn2") && job.contains("NodeList=pn[1,3-4]"), "{job}");
    assert!(run.stderr.contains("pn2"), "the run says it left pn2 out: {}", run.stderr);
    let (state, verdict) = verdict_of(&fixture, "results");
    assert_eq!(state, "pass", "{:#?}", not_passed(&verdict));
}

/// Puts the killed node back (its slurmd started again, which kills what the job left there),
/// whatever the test did.
struct MendNode;

impl Drop for MendNode {
    fn drop(&mut self) {
        let _ = Command::new(MULTI_UP).status();
    }
}

#[test]
fn a_decode_node_killed_mid_run_is_struck_and_the_verdict_is_an_error_naming_it() {
    let _cluster = CLUSTER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    require_multi_node_slurm();
    // Long runs (a 1000-token answer takes 2 s, a run 11 of them): the base side's speed
    // runs take minutes, so the job is still running when SLURM finds its node dead.
    let speed = "[speed]\nconcurrencies = [1]\ncovered = [1]\ninput-len = 8\noutput-len = 1000\nrequests-per-concurrency = 10\nwarmup-per-concurrency = 1\n";
    let sample = Sample { speed: Some(speed), ..pd_sample(2, "", 2) };
    let fixture = Fixture::new(&sample);
    let mut args = fixture.run_args("results");
    args.extend(["--executor", "slurm", "--job-time-limit", "20m"].map(str::to_owned));
    let stderr = std::fs::File::create(fixture.work.path().join("run.stderr")).expect("a file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_prgate"))
        .args(&args)
        .current_dir(fixture.repo.path())
        .env("SLURM_CONF", MULTI_CONF)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("prgate starts");
    let _mend = MendNode;
    // The base side's decode instance (on pn3: the third instance, on the third node) has
    // served a room: its speed runs take minutes more, so SLURM finds the node dead
    // (SlurmdTimeout) while the job runs.
    let decode =
        fixture.results("results").join("slurm/alpha/logs/alpha.routing.base/decode-0.log");
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while !std::fs::read_to_string(&decode).unwrap_or_default().contains("kv from") {
        assert!(std::time::Instant::now() < deadline, "the decode never served a room");
        assert!(child.try_wait().expect("try_wait").is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(std::fs::read_to_string(&decode).unwrap_or_default().contains("198.18.27.13"));
    let killed = Command::new(MULTI_UP).args(["--kill", "pn3"]).status().expect("it runs");
    assert!(killed.success());
    let status = crate::run::wait_at_most(&mut child, Duration::from_secs(300));
    let stderr =
        std::fs::read_to_string(fixture.work.path().join("run.stderr")).unwrap_or_default();
    assert!(status.success(), "{stderr}");
    // Whoever sees it first: SLURM ends the job NODE_FAIL once pn3 misses its SlurmdTimeout
    // (the steps the job did not record say so), or the step loop finds pn3's slurmd gone when
    // an instance there stops answering or cannot start (its steps are `node`).
    // The steps after the kill are the node's: which ones depends on the step order (the PR
    // side's server work runs first, one side at a time), so every record is read.
    let job = model_job(&fixture, "results");
    let evidence = fixture.evidence("results");
    let mut nodes: Vec<serde_json::Value> = std::fs::read_dir(&evidence)
        .expect("the evidence folder")
        .filter_map(|entry| {
            let text = std::fs::read_to_string(entry.ok()?.path()).ok()?;
            serde_json::from_str::<serde_json::Value>(&text).ok()
        })
        .filter(|record| record["outcome"]["reason"] == "node")
        .collect();
    assert!(!nodes.is_empty(), "no step is the node's\n{job}");
    let routing = nodes.remove(0);
    let detail = routing["outcome"]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("node pn3 failed"), "{routing:#}");
    if job.contains("JobState=NODE_FAIL") {
        assert!(detail.contains("NODE_FAIL"), "{routing:#}");
    } else {
        assert!(job.contains("JobState=COMPLETED"), "{job}");
        assert!(detail.contains("its slurmd does not answer"), "{routing:#}");
    }
    // A strike for pn3, and for no other node.
    let node = fixture.node.to_str().expect("UTF-8");
    for name in MULTI_NODES {
        let strikes =
            prgate(fixture.repo.path(), &["node", "strikes", "--node", node, "--name", name]);
        let struck = strikes.stdout.contains("node pn3 failed");
        assert_eq!(struck, name == "pn3", "{name}: {}{}", strikes.stdout, strikes.stderr);
    }
    let (state, verdict) = verdict_of(&fixture, "results");
    assert_eq!(state, "error", "{:#?}", not_passed(&verdict));
    assert!(
        not_passed(&verdict).iter().any(|item| item.contains("pn3")),
        "{:#?}",
        not_passed(&verdict)
    );
    // Mended, the node kills what the job left on it.
    drop(_mend);
    assert_eq!(settle_nodes(), Vec::<String>::new(), "left on the nodes");
}
