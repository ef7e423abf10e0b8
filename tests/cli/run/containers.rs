//! `prgate run`'s isolation: host isolation refused without the runner's `--trust-pr-code`,
//! every PR command through the (stand-in) container engine, base's and the PR's servers on
//! networks of their own, and no server on a node whose host answers on a side's network.

use super::*;

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

/// Base's and the PR's servers, up together on two GPUs, are on networks of their own, so that
/// the PR's server cannot reach base's: each side's network is made internal, checked by that
/// side's gateway probe and joined only by that side's server and its clients; both are
/// removed when the run ends.
#[test]
fn in_containers_each_sides_server_is_on_a_network_of_its_own() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, gpus: 2, ..Sample::default() });
    let engine = fake_engine(fixture.work.path());
    let run = run_contained(&fixture, &engine);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let calls = engine_calls(&fixture);
    // Each `run`'s container name and network.
    let option = |argv: &[String], flag: &str| {
        let at = argv.iter().position(|arg| arg == flag).expect("the option") + 1;
        argv[at].clone()
    };
    let networks: Vec<(String, String)> = calls
        .iter()
        .filter(|argv| argv[0] == "run")
        .map(|argv| (option(argv, "--name"), option(argv, "--network")))
        .collect();
    let network_of = |suffix: &str| -> Vec<&str> {
        networks
            .iter()
            .filter(|(name, _)| name.ends_with(suffix))
            .map(|(_, network)| network.as_str())
            .collect()
    };
    let base = network_of("-alpha-base-server");
    let pr = network_of("-alpha-pr-server");
    assert_eq!((base.len(), pr.len()), (1, 1), "one server a side: {networks:#?}");
    let (base, pr) = (base[0], pr[0]);
    let run_id = base.strip_prefix("prgate-").and_then(|rest| rest.strip_suffix("-base"));
    let run_id = run_id.unwrap_or_else(|| panic!("base's network {base} is prgate-<run>-base"));
    assert_eq!(pr, format!("prgate-{run_id}-pr"), "{networks:#?}");
    let called = |words: &[&str]| {
        calls.iter().any(|argv| argv.iter().map(String::as_str).eq(words.iter().copied()))
    };
    let label = format!("prgate.run={run_id}");
    for (side, network) in [("base", base), ("pr", pr)] {
        // Made internal, labelled with the run (what the cleanup of a killed run removes by).
        let made = ["network", "create", "--internal", "--label", &label, network];
        assert!(called(&made), "{network} was not made internal: {calls:#?}");
        // The side's gateway probe checked the side's network before its server started.
        assert_eq!(network_of(&format!("-alpha-{side}-server-gateway-probe")), [network]);
        // Its serving tests join its own server, nothing else.
        let server = format!("container:prgate-{run_id}-alpha-{side}-server");
        assert_eq!(network_of(&format!("-alpha-{side}-serving-tests")), [server.as_str()]);
        // Removed when the run ended.
        assert!(called(&["network", "rm", "-f", network]), "{network} is left: {calls:#?}");
    }
    let state: serde_json::Value = read_json(&fixture.work.path().join("engine-state/state.json"));
    assert_eq!(state["networks"].as_array().map(Vec::len), Some(0), "{state}");
    assert_eq!(state["containers"].as_array().map(Vec::len), Some(0), "{state}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");

    // What a killed attempt leaves, both sides' networks, the run's next attempt removes.
    for network in [base, pr] {
        let made = Command::new(&engine)
            .args(["network", "create", "--internal", "--label", &label, network])
            .status()
            .expect("the stand-in runs");
        assert!(made.success(), "network create {network}: {made}");
    }
    let again = run_contained(&fixture, &engine);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let state: serde_json::Value = read_json(&fixture.work.path().join("engine-state/state.json"));
    assert_eq!(state["networks"].as_array().map(Vec::len), Some(0), "{state}");
}

/// Every call the stand-in engine took, in order: its arguments.
fn engine_calls(fixture: &Fixture) -> Vec<Vec<String>> {
    let log = std::fs::read_to_string(fixture.work.path().join("engine-state/log.jsonl"))
        .expect("the engine's log");
    log.lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("JSON"))
        .filter_map(|entry| {
            let argv = entry["argv"].as_array()?;
            Some(argv.iter().map(|arg| arg.as_str().unwrap_or_default().to_owned()).collect())
        })
        .collect()
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

/// One GPU: one server at a time, switched by SGLang's memory API; the stand-in engine.
fn one_gpu_switched_by_sglangs_api() -> (Fixture, PathBuf) {
    let fixture = Fixture::new(&Sample {
        gate: TWO_PAIRS,
        gpus: 1,
        server_flags: "--memory-api sglang",
        ..Sample::default()
    });
    let engine = fake_engine(fixture.work.path());
    (fixture, engine)
}

/// `prgate run` of the fixture in the stand-in engine's containers, into `results/contained`.
fn run_contained(fixture: &Fixture, engine: &Path) -> Run {
    let args = contained_args(fixture, "contained", engine);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    prgate(fixture.repo.path(), &args)
}

#[test]
fn a_server_the_engine_cannot_pause_is_stopped_and_the_design_says_why() {
    let (fixture, engine) = one_gpu_switched_by_sglangs_api();
    std::fs::write(fixture.work.path().join("engine-state/pause-refused"), "").expect("the switch");
    let run = run_contained(&fixture, &engine);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Never left running while the other side is measured: stopped, and loaded again.
    let time = std::fs::read_to_string(fixture.results("contained").join("gpu-time/alpha.json"))
        .expect("the GPU-time file");
    let time: serde_json::Value = serde_json::from_str(&time).expect("JSON");
    assert_eq!(time["servers"]["design"], "blocked", "{time}");
    let why = time["servers"]["why"].as_str().unwrap_or_default();
    assert!(why.starts_with("the PR server could not be paused while idle ("), "{time}");
    assert!(why.contains("pause is not supported for rootless containers"), "{why}");
    assert!(run.stderr.contains(why), "{}", run.stderr);
    let state: serde_json::Value = read_json(&fixture.work.path().join("engine-state/state.json"));
    assert_eq!(state["containers"].as_array().map(Vec::len), Some(0), "{state}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn in_containers_together_the_idle_server_is_paused_while_the_other_is_measured() {
    // Two GPUs: both servers up at once, one on each.
    for refused in [false, true] {
        let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, gpus: 2, ..Sample::default() });
        let engine = fake_engine(fixture.work.path());
        if refused {
            std::fs::write(fixture.work.path().join("engine-state/pause-refused"), "")
                .expect("the switch");
        }
        let run = run_contained(&fixture, &engine);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let time =
            std::fs::read_to_string(fixture.results("contained").join("gpu-time/alpha.json"))
                .expect("the GPU-time file");
        let time: serde_json::Value = serde_json::from_str(&time).expect("JSON");
        assert_eq!(time["servers"]["design"], "together", "{time}");
        assert_eq!(time["servers"]["loads"], 2, "{time}");
        let why = time["servers"]["why"].as_str().unwrap_or_default();
        let calls = pause_calls(&fixture);
        if refused {
            assert!(why.contains("could not be paused (") && why.contains("kept running"), "{why}");
            assert!(calls.values().all(|subs| subs.iter().all(|sub| sub == "pause")), "{calls:#?}");
            continue;
        }
        assert!(why.ends_with("the idle one is paused while the other is measured"), "{why}");
        // Both servers are paused while the other side runs, and resumed before their own:
        // per container pause, unpause, pause...; the one paused at the end is unpaused to stop.
        assert_eq!(calls.len(), 2, "both sides' servers: {calls:#?}");
        for (name, subs) in &calls {
            assert!(subs.len() >= 2, "{name}: {subs:?}");
            assert!(subs.chunks(2).all(|pair| pair == ["pause", "unpause"]), "{name}: {subs:?}");
        }
        let state: serde_json::Value =
            read_json(&fixture.work.path().join("engine-state/state.json"));
        assert_eq!(state["containers"].as_array().map(Vec::len), Some(0), "{state}");
        assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
    }
}

/// The stand-in engine's pause and unpause calls, per container, in order.
fn pause_calls(fixture: &Fixture) -> std::collections::BTreeMap<String, Vec<String>> {
    let log = std::fs::read_to_string(fixture.work.path().join("engine-state/log.jsonl"))
        .expect("the engine's log");
    let mut calls: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for entry in
        log.lines().map(|line| serde_json::from_str::<serde_json::Value>(line).expect("JSON"))
    {
        let sub = entry["argv"][0].as_str().unwrap_or_default();
        if sub == "pause" || sub == "unpause" {
            let name = entry["argv"][1].as_str().unwrap_or_default().to_owned();
            calls.entry(name).or_default().push(sub.to_owned());
        }
    }
    calls
}

#[test]
fn in_containers_a_released_server_is_paused_until_it_is_woken() {
    let (fixture, engine) = one_gpu_switched_by_sglangs_api();
    let run = run_contained(&fixture, &engine);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let events = std::fs::read_to_string(fixture.events("contained")).expect("the events");
    let count = |kind: &str| events.lines().filter(|line| line.contains(kind)).count();
    let (released, woken) = (count("\"server-released\""), count("\"server-woken\""));
    assert!(released > 0 && woken > 0, "{events}");

    // Every release pauses the server's container, every wake unpauses it first, and the one
    // still paused at the end is unpaused to be stopped: per container, pause then unpause.
    let calls = pause_calls(&fixture);
    assert_eq!(calls.len(), 2, "both sides' servers: {calls:#?}");
    for (name, subs) in &calls {
        assert!(name.contains("server"), "{name}");
        assert!(subs.chunks(2).all(|pair| pair == ["pause", "unpause"]), "{name}: {subs:?}");
    }
    let pauses: usize = calls.values().map(|subs| subs.len() / 2).sum();
    assert_eq!(pauses, released, "a pause per release: {calls:#?}");
    assert_eq!(pauses, woken + 1, "an unpause per wake, and one to stop the last: {calls:#?}");
    let state: serde_json::Value = read_json(&fixture.work.path().join("engine-state/state.json"));
    assert_eq!(state["containers"].as_array().map(Vec::len), Some(0), "{state}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}
