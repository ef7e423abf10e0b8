//! `prgate run` on a node at fault: a failed preflight recorded and a mended node running
//! again, an empty checkpoint folder, a full results disk, and one run per host with a killed
//! holder's lock left behind.

use super::*;

#[test]
fn a_node_that_fails_the_preflight_records_why_and_a_mended_node_runs_again() {
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    // A machine without its GPUs: no render node, no /dev/kfd.
    let bare = fixture.work.path().join("bare-machine");
    std::fs::create_dir_all(&bare).expect("the fake root");
    let run = fixture.run_with_preflight("results", &bare);
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
    let run = fixture.run_with_preflight("results", &mended);
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
    let run = fixture.run_with_preflight("results", &machine);
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
    let run = fixture.run_with_preflight("results", &machine);
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
