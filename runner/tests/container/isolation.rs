//! What a container gets and nothing more: the tree as its working folder and only the
//! given environment, the checkpoint store mounted read-only, and only the GPUs it asks for.

use super::*;

#[test]
fn the_command_runs_in_the_tree_with_only_the_given_environment() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("env");
        let mut step = Step::probe(&node);
        step.env = ContainerEnv::new(&node)
            .set("PRGATE_SERVER_URL", "http://127.0.0.1:30000")
            .and_then(|env| env.set("CHECKPOINT", "/models/org/ckpt"))
            .expect("plain variables");
        let launch = launch(harness, &site, &node, &run, &step);
        assert_isolated(&argv(&launch), &node, &run, &step.command);
        assert_eq!(run_to_end(harness, &site, &launch), 0, "{}", site.logs());

        let probe = site.probe();
        let cwd =
            if harness.real() { "/work/tree".to_owned() } else { site.tree.display().to_string() };
        assert_eq!(probe["cwd"], cwd.as_str());
        assert_eq!(probe["checkpoint"], "{\"layers\": 2}");
        let env = probe["env"].as_object().expect("the environment");
        assert_eq!(env["PRGATE_SERVER_URL"], "http://127.0.0.1:30000");
        assert_eq!(env["HF_HUB_OFFLINE"], "1");
        assert_eq!(env["TRANSFORMERS_OFFLINE"], "1");
        assert!(env["CHECKPOINT"].as_str().is_some_and(
            |path| path.ends_with("/models/org/ckpt") || path.ends_with("/store/org/ckpt")
        ));
        assert!(!env.contains_key("HIP_VISIBLE_DEVICES"), "no GPU, no GPU variable");
        let mut allowed = harness.baseline_variables();
        // Python sets LC_CTYPE itself when no locale is set (PEP 538).
        allowed.extend(strings(&[
            "PRGATE_SERVER_URL",
            "CHECKPOINT",
            "HF_HUB_OFFLINE",
            "TRANSFORMERS_OFFLINE",
            "LC_CTYPE",
        ]));
        for name in env.keys() {
            assert!(allowed.contains(name), "{name} reached the container");
        }

        if !harness.real() {
            let recorded = harness.invocations();
            let run_call = recorded.iter().find(|call| call["argv"][0] == "run").expect("a run");
            let recorded: Vec<String> = run_call["argv"]
                .as_array()
                .expect("argv")
                .iter()
                .map(|arg| arg.as_str().expect("text").to_owned())
                .collect();
            assert_eq!(recorded, argv(&launch)[1..], "the engine got the launch's arguments");
        }
    });
}

#[test]
fn the_checkpoint_store_is_mounted_read_only() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("readonly");
        let step = Step::probe(&node);
        let launch = launch(harness, &site, &node, &run, &step);
        assert_eq!(run_to_end(harness, &site, &launch), 0, "{}", site.logs());
        let probe = site.probe();
        assert_eq!(probe["checkpoint"], "{\"layers\": 2}", "the checkpoint is readable");
        if harness.real() {
            const EROFS: i64 = 30;
            assert_eq!(probe["models_write"], EROFS, "the store refused the write");
            assert!(!site.store.join("written-by-a-container").exists());
        } else {
            let mounts = parsed_run(harness)["mounts"].as_array().expect("mounts").clone();
            let by_destination = |dst: &str| {
                mounts.iter().find(|mount| mount["dst"] == dst).expect("the mount").clone()
            };
            assert_eq!(by_destination("/models")["readonly"], true);
            assert_eq!(by_destination("/models")["src"], site.store.display().to_string());
            assert_eq!(by_destination("/work/tree")["readonly"], false);
            assert_eq!(by_destination("/work/out")["readonly"], false);
        }
        assert!(site.out.join("probe.json").exists(), "the output directory is writable");
    });
}

/// What the stand-in understood of the last `run` it was given.
fn parsed_run(harness: &Harness) -> Value {
    let dir = harness.stand_in.as_ref().expect("the stand-in");
    let log = std::fs::read_to_string(dir.join("log.jsonl")).expect("the log");
    let last = log.lines().rev().find(|line| line.starts_with("{\"parsed\"")).expect("a run");
    serde_json::from_str::<Value>(last).expect("JSON")["parsed"].clone()
}

#[test]
fn a_container_gets_only_the_gpus_it_asks_for() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("gpus");
        let chosen = node.gpus().last().expect("the node has GPUs").clone();
        let ids = [chosen.id];
        let mut step = Step::probe(&node);
        step.gpus = &ids;
        let launch = launch(harness, &site, &node, &run, &step);
        let args = argv(&launch);
        assert_isolated(&args, &node, &run, &step.command);
        let device = chosen.render_device.display().to_string();
        assert_eq!(values(&args, "--device"), ["/dev/kfd", device.as_str()]);
        assert_eq!(values(&args, "--group-add"), ["video"]);
        assert!(values(&args, "-e").contains(&"HIP_VISIBLE_DEVICES=0"), "{args:?}");
        let gpus_label = format!("prgate.gpus={}", chosen.id);
        assert!(values(&args, "--label").contains(&gpus_label.as_str()), "{args:?}");
        for other in node.gpus().iter().filter(|gpu| gpu.id != chosen.id) {
            let other = other.render_device.display().to_string();
            assert!(!args.iter().any(|arg| arg.contains(&other)), "{other} is not given");
        }
        assert!(!args.iter().any(|arg| arg == "/dev/dri"), "never the whole of /dev/dri");

        if harness.gpus_usable {
            assert_eq!(run_to_end(harness, &site, &launch), 0, "{}", site.logs());
            assert_eq!(site.probe()["env"]["HIP_VISIBLE_DEVICES"], "0");
            if !harness.real() {
                let parsed = parsed_run(harness);
                assert_eq!(parsed["devices"], serde_json::json!(["/dev/kfd", device]));
                assert_eq!(parsed["groups"], serde_json::json!(["video"]));
            }
        }
    });
}
