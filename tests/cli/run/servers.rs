//! How `prgate run` places the servers: disjoint GPUs or turns with base runs bracketing, one
//! server at a time switching by its memory API (or not probing one the recipe names, and
//! naming the recipe that said so, never the PR's as base's), the common checks' recipe on both
//! sides, and the run's time limit.

use super::*;

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
fn a_common_recipe_the_pr_adds_runs_its_install_command_only_in_the_prs_tree() {
    // Base has no common recipe: the PR's is its own, and its command never runs in base's
    // tree (base's side runs its selections uninstalled).
    let fixture = Fixture::new(&Sample {
        gate: TWO_PAIRS,
        pr: |repo| {
            repo.write("pkg/__init__.py", "# shared\n").write(
                "test/e2e/common.toml",
                "[install]\ncommand = \"python3 -c pass\"\n[tests]\nunit = [\"test/unit/alpha\"]\n",
            );
        },
        ..Sample::default()
    });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let installs: Vec<String> = std::fs::read_dir(fixture.results("results").join("logs/install"))
        .expect("the install logs")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".log"))
        .collect();
    assert!(installs.iter().all(|name| name.starts_with("pr-")), "{installs:?}");
    assert!(!installs.is_empty(), "the PR's side was installed");
    let base = fixture.record("results", "~common.common-tests.base");
    assert_eq!(base["outcome"]["kind"], "tests", "{base}");
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

#[test]
fn a_base_side_without_a_recipe_is_never_named_for_the_prs_memory_api() {
    // Base has no recipe for alpha (a true coverage gap: one that is there but does not parse
    // now blocks every check, docs/gate.md); the PR's says its server has no memory API. The
    // base side starts no server (it has no recipe to take the command from), and the note on
    // how the servers shared the node names the PR's recipe, never base's in its place.
    let fixture = Fixture::new(&Sample {
        gpus: 1,
        base_recipe: false,
        pr: |repo| {
            let none = Sample { server_keys: "memory-api = \"none\"", ..Sample::default() };
            repo.write("test/e2e/alpha.toml", &recipe(&none))
                .write("pkg/models/alpha/layer.py", "# alpha, faster\n");
        },
        ..Sample::default()
    });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let loads = server_loads(&fixture, "results");
    assert!(loads.iter().all(|(side, _)| side == "pr"), "{loads:?}");
    assert!(!loads.is_empty(), "the PR's server ran: {}", run.stderr);
    assert!(
        run.stderr.contains("because PR's recipe says server.memory-api = \"none\""),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("base's recipe says"), "{}", run.stderr);
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}
