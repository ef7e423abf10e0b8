//! A container's life and the engine's answers: a timed-out container stopped and removed,
//! cleanup by the run's label, the image checked against its pinned digest, engine errors
//! naming the engine and the command, the client's exit status, and what the stand-in
//! refuses.

use super::*;

#[test]
fn a_timed_out_container_is_stopped_and_removed() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("timeout");
        let step = Step::plain(
            &node,
            "slow-tests",
            &["python3", "-c", "import time; print('sleeping', flush=True); time.sleep(600)"],
        );
        let launch = launch(harness, &site, &node, &run, &step);
        let mut container = Container::start(&harness.engine, &launch).expect("it starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !site.logs().contains("sleeping") {
            assert!(Instant::now() < deadline, "it never started: {}", site.logs());
            std::thread::sleep(Duration::from_millis(20));
        }
        let pid = (!harness.real()).then(|| {
            let state = harness.state();
            state["containers"][0]["pid"].as_u64().expect("the command's pid")
        });
        let started = Instant::now();
        let finished = container.wait_with_timeout(Duration::from_secs(1)).expect("it ends");
        assert!(matches!(finished, Finished::TimedOut(_)), "{finished:?}");
        assert!(started.elapsed() < Duration::from_secs(40), "stopped within the grace period");
        assert!(!harness.exists(container.name()), "the container is gone");
        if let Some(pid) = pid {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            assert!(stat.is_empty() || stat.contains(") Z"), "the command still runs: {stat}");
        }
        assert!(harness.engine.remove_run(&run).expect("the cleanup").is_empty());
    });
}

#[test]
fn cleanup_removes_the_runs_containers_and_no_one_elses() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("cleanup");
        let other = run_id("other");
        let image = image_reference(node.image());
        let create = |name: &str, label: Option<String>| {
            let mut args = vec!["create", "--name", name];
            if let Some(label) = &label {
                args.extend(["--label", label]);
            }
            args.extend([image.as_str(), "python3", "-c", "pass"]);
            let output = harness.client(&args);
            assert!(output.status.success(), "create {name}: {output:?}");
        };
        let foreign = format!("prgate-{other}-server");
        let unlabelled = format!("someone-elses-{run}");
        let leftover = format!("prgate-{run}-leftover");
        create(&foreign, Some(format!("prgate.run={other}")));
        create(&unlabelled, None);
        create(&leftover, Some(format!("prgate.run={run}")));

        let step = Step::plain(&node, "server", &["python3", "-c", "import time; time.sleep(600)"]);
        let launch = launch(harness, &site, &node, &run, &step);
        let mut running = Container::start(&harness.engine, &launch).expect("it starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !harness.exists(running.name()) {
            assert!(Instant::now() < deadline, "it never started: {}", site.logs());
            std::thread::sleep(Duration::from_millis(20));
        }

        let removed = harness.engine.remove_run(&run).expect("the cleanup");
        assert_eq!(removed.len(), 2, "{removed:?}");
        assert!(!harness.exists(&leftover), "our leftover is removed");
        assert!(!harness.exists(running.name()), "our running container is removed");
        assert!(harness.exists(&foreign), "another run's container stays");
        assert!(harness.exists(&unlabelled), "an unlabelled container stays");
        let finished = running.wait_with_timeout(Duration::from_secs(60)).expect("it ends");
        assert!(matches!(finished, Finished::Exited(_)), "{finished:?}");
        assert!(harness.engine.remove_run(&run).expect("again").is_empty());

        let output = harness.client(&["rm", "-f", &foreign, &unlabelled]);
        assert!(output.status.success(), "{output:?}");

        // Networks likewise: the run's go (both sides'), another run's stays.
        let ours = [NetworkSide::Base, NetworkSide::Pr]
            .map(|side| harness.engine.create_side_network(&run, side).expect("ours"));
        let theirs = harness.engine.create_side_network(&other, NetworkSide::Pr).expect("theirs");
        let mut removed = harness.engine.remove_run_networks(&run).expect("removed");
        removed.sort();
        assert_eq!(removed, ours);
        assert_eq!(harness.engine.remove_run_networks(&other).expect("removed"), vec![theirs]);
        assert!(harness.engine.remove_run_networks(&run).expect("again").is_empty());
    });
}

#[test]
fn the_image_is_checked_against_its_pinned_digest() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let info = harness.engine.check_image(node.image()).expect("the image is here");
        assert!(info.id.starts_with("sha256:") && info.id.len() == 71, "{info:?}");
        if let Some(digest) = &harness.digest {
            assert!(info.has_digest(digest), "{info:?}");
        }
        if !harness.real() {
            assert_eq!(info.id, STAND_IN_ID);
        }
        let mut wrong = node.image().clone();
        wrong.digest = Some(format!("sha256:{}", "9".repeat(64)));
        let error = harness.engine.check_image(&wrong).expect_err("another digest is refused");
        assert!(
            matches!(error, ContainerError::DigestMismatch { .. } | ContainerError::Failed { .. }),
            "{error}"
        );

        let error = harness.engine.image_info("prgate-test/no-such-image:0").expect_err("missing");
        let message = error.to_string();
        assert!(message.contains(&harness.engine.program().display().to_string()), "{message}");
        assert!(message.contains("image inspect"), "{message}");
        let said = message.to_lowercase();
        assert!(said.contains("no such image") || said.contains("image not known"), "{message}");
    });
}

#[test]
fn engine_errors_name_the_engine_the_command_and_what_it_said() {
    for_each_engine(|harness| {
        let name = "prgate-no-such-container-here";
        let error = harness.engine.stop(name, Duration::from_millis(1500)).expect_err("no such");
        assert!(error.is_no_such_container(), "{error}");
        let message = error.to_string();
        assert!(message.contains(&harness.engine.program().display().to_string()), "{message}");
        assert!(message.contains(&format!("stop --time 2 {name}")), "{message}");
        let error = harness.engine.address(name, "prgate-net").expect_err("no such container");
        assert!(error.to_string().contains("inspect --format"), "{error}");
        assert!(error.to_string().contains(name), "{error}");
    });
}

#[test]
fn the_clients_exit_status_is_the_commands() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("status");
        let cases: [(&str, &[&str], i32); 3] = [
            ("passes", &["python3", "-c", "pass"], 0),
            ("fails", &["python3", "-c", "import sys; sys.exit(3)"], 3),
            ("missing", &["prgate-no-such-command"], 127),
        ];
        for (purpose, command, expected) in cases {
            let step = Step::plain(&node, purpose, command);
            let launch = launch(harness, &site, &node, &run, &step);
            // Podman's default init (catatonit) exits 1 when the command is missing; tini,
            // docker's, exits 127: a podman node names tini in containers.conf (`init_path`).
            let hint = "hint: podman reports a missing command as 127 only with tini as its init \
                        (init_path in containers.conf, docs/container.md)";
            assert_eq!(
                run_to_end(harness, &site, &launch),
                expected,
                "{purpose}: {}\n{hint}",
                site.logs()
            );
        }
    });
}

/// The stand-in's own check: what prgate must never ask for, it refuses as an engine
/// refuses a bad flag (status 125), so a launcher that asked for it would fail every test.
#[test]
fn the_stand_in_refuses_what_prgate_must_never_ask_for() {
    let harness = stand_in();
    let site = Site::new();
    let node = harness.node(&site);
    let run = run_id("refusals");
    let launch = launch(&harness, &site, &node, &run, &Step::probe(&node));
    let good: Vec<String> = argv(&launch)[1..].to_vec();
    let bad: [&[&str]; 15] = [
        &["--privileged"],
        &["--network", "host"],
        &["--network", "bridge"],
        &["--ipc=host"],
        &["--cap-add", "SYS_ADMIN"],
        &["-p", "8000:8000"],
        &["-p", "0.0.0.0::8000"],
        &["--device", "/dev/sda"],
        &["--device", "/dev/dri"],
        &["-v", "/var/run/docker.sock:/var/run/docker.sock"],
        &["--env-file", "/etc/environment"],
        &["--mount", "type=volume,src=x,dst=/y"],
        &["--pull", "always"],
        &["--security-opt", "seccomp=unconfined"],
        &["--group-add", "docker"],
    ];
    for options in bad {
        let mut args: Vec<&str> = vec!["run"];
        args.extend(options);
        args.extend(good[1..].iter().map(String::as_str));
        let output = harness.client(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(125), "{options:?} was accepted: {stderr}");
        assert!(stderr.starts_with("fake-engine: "), "{stderr}");
    }
    let mut missing_image = good.clone();
    let image = missing_image.iter().position(|arg| arg.starts_with(STAND_IN_IMAGE)).expect("it");
    missing_image[image] = "prgate-test/other:1".to_owned();
    let output = harness.client(&missing_image.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(output.status.code(), Some(125), "a missing image is never pulled");

    let output = harness.client(&good.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(output.status.success(), "the launcher's own command line runs: {output:?}");
}

#[test]
fn a_paused_container_does_nothing_until_resumed_and_stops_even_when_paused() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("pause");
        // A command that keeps working: a tick into its output folder every 20 ms.
        let tick = "import sys, time\nwhile True:\n    open(sys.argv[1], 'a').write('x')\n    time.sleep(0.02)";
        let step = Step::plain(&node, "busy-server", &["python3", "-c", tick, "/work/out/ticks"]);
        let launch = launch(harness, &site, &node, &run, &step);
        let mut container = Container::start(&harness.engine, &launch).expect("it starts");
        let ticks = || std::fs::read_to_string(site.out.join("ticks")).unwrap_or_default().len();
        let deadline = Instant::now() + Duration::from_secs(60);
        while ticks() < 3 {
            assert!(Instant::now() < deadline, "it never worked: {}", site.logs());
            std::thread::sleep(Duration::from_millis(20));
        }
        container.pause().expect("it pauses");
        // A tick in flight may land; then nothing, for half a second.
        std::thread::sleep(Duration::from_millis(200));
        let frozen = ticks();
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(ticks(), frozen, "the paused command kept working");
        container.resume().expect("it resumes");
        let deadline = Instant::now() + Duration::from_secs(30);
        while ticks() <= frozen {
            assert!(Instant::now() < deadline, "it never worked again: {}", site.logs());
            std::thread::sleep(Duration::from_millis(20));
        }
        // Paused again, it still stops (an engine refuses to stop a paused container).
        container.pause().expect("it pauses again");
        let started = Instant::now();
        container.stop().expect("it stops");
        assert!(started.elapsed() < Duration::from_secs(40), "stopped within the grace period");
        assert!(!harness.exists(container.name()), "the container is gone");
        if !harness.real() {
            let subcommands: Vec<String> = harness
                .invocations()
                .iter()
                .filter_map(|call| call["argv"][0].as_str().map(str::to_owned))
                .filter(|sub| sub.contains("pause"))
                .collect();
            assert_eq!(subcommands, ["pause", "unpause", "pause", "unpause"]);
        }
        assert!(harness.engine.remove_run(&run).expect("the cleanup").is_empty());
    });
}
