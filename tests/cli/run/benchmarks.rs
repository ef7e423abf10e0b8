//! `prgate run` with the recipe's other measurements: external evaluators and speed
//! benchmarks run against the server, base accuracy taken from the cache on a second run, and
//! a model new in the PR compared with SGLang's own path.

use super::*;

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

/// An evaluator the PR writes over base's stand-in: every answer right, whatever the server says.
const FORGED_SGL_EVAL: &str = r#"import json, os, sys
out = sys.argv[2]
run = os.path.join(out, "sgl_eval_ext_20261129_120000")
os.makedirs(run)
json.dump({"name": "ext", "num_examples": 4, "n_repeats": 1, "aggregate": {"score": 1.0}},
          open(os.path.join(run, "metrics.json"), "w"))
with open(os.path.join(run, "output-rs0.jsonl"), "w") as f:
    for i in range(4):
        f.write(json.dumps({"id": f"q{i}", "symbolic_correct": True}) + "\n")
"#;

#[test]
fn external_evaluators_and_benchmarks_run_against_the_server_and_are_read() {
    // The measuring tools are base's, run from base's tree on both sides: the PR's own copy
    // of the evaluator (every answer right) and of the benchmark (a script that only sleeps)
    // measure nothing.
    let fixture = Fixture::new(&Sample {
        recipe_extra: EXTERNAL_ACCURACY,
        speed: Some(EXTERNAL_SPEED),
        gate: TWO_PAIRS,
        pr: |repo| {
            repo.write("pkg/models/alpha/layer.py", "# alpha, faster\n")
                .write("test/e2e/fake_sgl_eval.py", FORGED_SGL_EVAL)
                .write("test/e2e/fake_bench_serving.py", "import time\ntime.sleep(300)\n");
        },
        ..Sample::with_scripts()
    });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    for side in ["base", "pr"] {
        let accuracy = fixture.record("results", &format!("alpha.accuracy.{side}.ext%40repeat-0"));
        assert_eq!(accuracy["outcome"]["kind"], "accuracy", "{accuracy}");
        assert_eq!(accuracy["outcome"]["questions"], 4, "{accuracy}");
        assert_eq!(accuracy["outcome"]["correct"], 3, "{side}: base's evaluator: {accuracy}");
        assert_eq!(accuracy["outcome"]["per_question"][2]["correct"], false, "{accuracy}");
    }
    let pair = fixture.record("results", "alpha.speed.both.concurrency-1-pair-0");
    assert_eq!(pair["outcome"]["kind"], "speed-pair", "base's benchmark, on both sides: {pair}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

/// The PR's own server command: plants a forged `metrics.json` (every answer right) in every
/// folder that appears below its own output folder (its log's, `/work/out` in a container),
/// then runs the server it is given.
const PLANTING_SERVER: &str = r#"import json, os, subprocess, sys, threading, time
forged = {"name": "ext", "num_examples": 4, "n_repeats": 1, "aggregate": {"score": 1.0}}
def out_folder():
    # In a container it is /work/out; on the host, the folder of the log prgate writes for it.
    fds = f"/proc/{os.getppid()}/fd"
    for fd in os.listdir(fds):
        try:
            target = os.readlink(os.path.join(fds, fd))
        except OSError:
            continue
        if target.endswith("alpha.routing.pr/server.log"):
            return os.path.dirname(target)
def plant():
    out = None
    while True:
        out = out or out_folder()
        for folder, _dirs, files in os.walk(out or "/nonexistent"):
            if folder != out and "metrics.json" not in files:
                try:
                    json.dump(forged, open(os.path.join(folder, "metrics.json"), "w"))
                except OSError:
                    pass
        time.sleep(0.005)
threading.Thread(target=plant, daemon=True).start()
sys.exit(subprocess.call(sys.argv[1:]))
"#;

#[test]
fn the_prs_server_cannot_write_the_results_of_the_evaluator_that_grades_it() {
    let fixture = Fixture::new(&Sample {
        recipe_extra: EXTERNAL_ACCURACY,
        pr: |repo| {
            let recipe = repo.path().join("test/e2e/alpha.toml");
            let text = std::fs::read_to_string(recipe).expect("alpha's recipe");
            let own =
                text.replacen("command = \"", "command = \"python3 pkg/models/alpha/serve.py ", 1);
            repo.write("pkg/models/alpha/serve.py", PLANTING_SERVER)
                .write("test/e2e/alpha.toml", &own);
        },
        ..Sample::with_scripts()
    });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let accuracy = fixture.record("results", "alpha.accuracy.pr.ext%40repeat-0");
    assert_eq!(accuracy["outcome"]["correct"], 3, "base's evaluator's count: {accuracy}");
    // The evaluator's results are in the accuracy step's own folder, not below the server's.
    let logs = fixture.results("results").join("logs");
    let server_out = logs.join("alpha.routing.pr");
    assert!(server_out.join("server.log").is_file(), "the PR server ran there");
    let below_server: Vec<String> = std::fs::read_dir(&server_out)
        .expect("the server's folder")
        .flatten()
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(below_server, Vec::<String>::new(), "nothing of a step below the server's folder");
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
fn a_speed_run_that_goes_silent_is_recorded_stalled_not_a_crash() {
    let fixture = Fixture::new(&Sample {
        speed: Some(EXTERNAL_SPEED),
        gate: TWO_PAIRS,
        // Under the recipe's `[timeouts]`: a minute a speed run, three seconds of silence.
        recipe_extra: "stall = \"3s\"\n",
        pr: |repo| {
            repo.write("pkg/models/alpha/layer.py", "# alpha, faster\n");
        },
        // The benchmark (base's: it measures both sides) hangs.
        base_files: &[("test/e2e/fake_bench_serving.py", "import time\ntime.sleep(300)\n")],
        ..Sample::with_scripts()
    });
    let run = fixture.run("results");
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The benchmark hangs while a server runs: the run is stopped and says why, as
    // docs/recipe.md promises, not called the server's crash.
    let speed = fixture.record("results", "alpha.speed.both.concurrency-1");
    assert_eq!(speed["outcome"]["kind"], "not-run", "{speed}");
    assert_eq!(speed["outcome"]["reason"], "stalled", "{speed}");
    let detail = speed["outcome"]["detail"].as_str().expect("a detail");
    assert!(detail.contains("stopped after 3s without progress"), "{detail}");
    assert!(detail.contains("last lines of the server's log"), "{detail}");
    // The hanging tool is base's: the cell could not be judged (an error, exit 2), not the
    // PR's failure.
    let gate = fixture.gate("results");
    assert_eq!(gate.code, 2, "{}{}", gate.stdout, gate.stderr);
    assert!(gate.stdout.contains("made no progress and was stopped"), "{}", gate.stdout);
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
