//! `prgate run --executor slurm` end to end on this machine's real SLURM (`.ci/slurm-up`), on
//! the simulated servers of `run.rs`'s fixture: the gathered evidence is what the local
//! executor records; a job cancelled with `scancel`, an orchestrator stopped with Ctrl-C and a
//! job over its time limit become evidence, and leave no process behind; with `--reuse on` a
//! second run's jobs take over what the first run's judged.
//!
//! SLURM must be up: without it these tests fail and say how to start it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::run::{
    Fixture, SERVED, Sample, TWO_PAIRS, evidence_names, settle, signal, wait_at_most,
};
use crate::support::prgate;

/// The common checks' recipe: unit and kernel tests of the sample.
const COMMON_RECIPE: &str =
    "[tests]\nunit = [\"test/unit/alpha\"]\nkernel = [\"test/kernels/test_alpha_k1.py\"]\n";

/// Fails the test, saying how to start SLURM, unless SLURM answers and its node is up.
pub(crate) fn require_slurm() {
    let output = Command::new("sinfo").args(["--noheader", "--format=%T"]).output();
    let problem = match output {
        Err(error) => format!("sinfo cannot run: {error}"),
        Ok(output) if !output.status.success() => {
            format!("sinfo failed: {}", String::from_utf8_lossy(&output.stderr).trim())
        }
        Ok(output) => {
            let states = String::from_utf8_lossy(&output.stdout).trim().to_owned();
            let up = states.lines().any(|state| {
                ["idle", "mixed", "allocated", "completing"]
                    .iter()
                    .any(|good| state.trim_end_matches(['*', '~', '#', '+']) == *good)
            });
            if up {
                return;
            }
            format!("its node is not up (sinfo says {states:?})")
        }
    };
    panic!(
        "SLURM is not running on this machine: {problem}\nrun .ci/slurm-up (it installs and starts a single-node SLURM), then the tests again"
    );
}

/// `prgate run --executor slurm` arguments for `results`, with `extra` after them.
fn slurm_args(fixture: &Fixture, results: &str, extra: &[&str]) -> Vec<String> {
    let mut args = fixture.run_args(results);
    args.extend(["--executor", "slurm"].map(str::to_owned));
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    args
}

/// Cancels the jobs of a run when a test ends, whatever happened: a failed test leaves no
/// job running.
struct CancelJobs {
    results: PathBuf,
}

impl CancelJobs {
    fn new(fixture: &Fixture, results: &str) -> CancelJobs {
        CancelJobs { results: fixture.results(results) }
    }

    /// The jobs' name, once the run has written its id.
    fn job_name(&self) -> Option<String> {
        let id = std::fs::read_to_string(self.results.join("slurm/run-id")).ok()?;
        Some(format!("prgate-{}", id.trim()))
    }
}

impl Drop for CancelJobs {
    fn drop(&mut self) {
        if let Some(name) = self.job_name() {
            let _ = Command::new("scancel").arg(format!("--name={name}")).status();
        }
    }
}

/// The id of a model's job, from its output file `slurm-<id>.out`.
fn job_id(fixture: &Fixture, results: &str, model: &str) -> String {
    let dir = fixture.results(results).join("slurm").join(model);
    let ids: Vec<String> = std::fs::read_dir(&dir)
        .expect("the job's folder")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            Some(name.strip_prefix("slurm-")?.strip_suffix(".out")?.to_owned())
        })
        .collect();
    assert_eq!(ids.len(), 1, "one output file in {}: {ids:?}", dir.display());
    ids[0].clone()
}

/// `prgate run --executor slurm` started and left running; its standard error goes to
/// `<work>/<results>.stderr`.
fn spawn_slurm_run(fixture: &Fixture, results: &str) -> Child {
    let stderr = std::fs::File::create(stderr_path(fixture, results)).expect("a stderr file");
    Command::new(env!("CARGO_BIN_EXE_prgate"))
        .args(slurm_args(fixture, results, &[]))
        .current_dir(fixture.repo.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("prgate starts")
}

fn stderr_path(fixture: &Fixture, results: &str) -> PathBuf {
    fixture.work.path().join(format!("{results}.stderr"))
}

/// The states SLURM has for the jobs named `name`.
fn states(name: &str) -> Vec<String> {
    let output = Command::new("squeue")
        .args(["--noheader", "--states=all", &format!("--name={name}"), "--format=%T"])
        .output()
        .expect("squeue runs");
    String::from_utf8_lossy(&output.stdout).lines().map(str::to_owned).collect()
}

/// The `outcome.kind` of every record of `results`, by file name.
fn kinds(fixture: &Fixture, results: &str) -> Vec<(String, String)> {
    evidence_names(&fixture.evidence(results))
        .into_iter()
        .map(|name| {
            let record = fixture.record(results, name.trim_end_matches(".json"));
            (name, record["outcome"]["kind"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn the_slurm_executor_records_what_the_local_executor_records() {
    require_slurm();
    let fixture = Fixture::new(&Sample {
        gate: TWO_PAIRS,
        pr: |repo| {
            repo.write("pkg/models/alpha/layer.py", "# alpha, faster\n")
                .write("pkg/__init__.py", "# shared\n")
                .write("test/e2e/common.toml", COMMON_RECIPE);
        },
        ..Sample::default()
    });
    let _cancel = CancelJobs::new(&fixture, "slurm");
    let local = fixture.run("local");
    assert_eq!(local.code, 0, "{}", local.stderr);

    let args = slurm_args(&fixture, "slurm", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let slurm = prgate(fixture.repo.path(), &args);
    assert_eq!(slurm.code, 0, "{}", slurm.stderr);
    assert!(slurm.stderr.contains("from 2 SLURM job(s)"), "{}", slurm.stderr);
    // Not a terminal: a line per change of a job's state.
    assert!(slurm.stderr.contains("(alpha): COMPLETED"), "{}", slurm.stderr);
    assert!(slurm.stderr.contains("(~common): COMPLETED"), "{}", slurm.stderr);

    let expected = kinds(&fixture, "local");
    assert!(expected.iter().any(|(name, _)| name.starts_with("~common.")), "{expected:#?}");
    assert_eq!(kinds(&fixture, "slurm"), expected, "{}", slurm.stderr);
    for stem in ["alpha.speed.both.concurrency-1-pair-0", "~common.common-tests.pr"] {
        let (local, slurm) = (fixture.record("local", stem), fixture.record("slurm", stem));
        assert_eq!(slurm["provenance"], local["provenance"], "{stem}");
        assert_eq!(slurm["outcome"]["family"], local["outcome"]["family"], "{stem}");
    }
    // The jobs' events are passed on to the run's stream.
    let events = read(&fixture.events("slurm"));
    let finished = events.lines().filter(|line| line.contains("\"step-finished\"")).count();
    assert_eq!(finished, expected.len(), "{events}");
    let script = read(&fixture.results("slurm").join("slurm/alpha/job.sh"));
    assert!(script.contains("\nexec "), "{script}");
    assert!(script.contains("--only-model alpha"), "{script}");
    // No limit given: twice the estimate from the recipe, plus a quarter of an hour.
    assert!(script.contains("#SBATCH --time="), "{script}");
    // The jobs' GPU time is the run's, target by target, as a local run writes it.
    let gpu_time = |results: &str| -> Vec<String> {
        let dir = fixture.results(results).join("gpu-time");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
            .filter_map(Result::ok)
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(gpu_time("slurm"), gpu_time("local"));
    let alpha = read(&fixture.results("slurm").join("gpu-time/alpha.json"));
    assert_eq!(
        alpha,
        read(&fixture.results("slurm").join("slurm/alpha/gpu-time/alpha.json")),
        "the job's file, copied"
    );

    // A second run resubmits; each job resumes from its own directory and records nothing.
    let again = prgate(fixture.repo.path(), &args);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(kinds(&fixture, "slurm"), expected);
    let output = std::fs::read_dir(fixture.results("slurm").join("slurm/alpha"))
        .expect("the job's folder")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "out"))
        .map(|path| read(&path))
        .find(|text| text.contains("0 steps recorded"));
    assert!(output.is_some(), "no resumed job said so");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the run");
}

#[test]
fn a_job_cancelled_midway_is_evidence_and_leaves_no_process() {
    require_slurm();
    let fixture = Fixture::new(&Sample { output_len: 64, ..Sample::default() });
    let cancel = CancelJobs::new(&fixture, "results");
    let mut child = spawn_slurm_run(&fixture, "results");
    fixture.wait_for_event("results", &["\"step-started\"", "\"speed\""], &mut child);
    let id = job_id(&fixture, "results", "alpha");
    let status = Command::new("scancel").arg(&id).status().expect("scancel runs");
    assert!(status.success());
    let status = wait_at_most(&mut child, Duration::from_secs(60));
    let stderr = read(&stderr_path(&fixture, "results"));
    assert!(status.success(), "{status:?}\n{stderr}");
    assert!(stderr.contains(&format!("job {id} (alpha): CANCELLED")), "{stderr}");

    // What the job recorded before is there; what it did not is not-run, with the job's word.
    let tests = fixture.record("results", "alpha.unit-tests.pr");
    assert_eq!(tests["outcome"]["kind"], "tests", "{tests}");
    for stem in ["alpha.routing.base", "alpha.routing.pr"] {
        let record = fixture.record("results", stem);
        assert_eq!(record["outcome"]["kind"], "not-run", "{stem}: {record}");
        assert_eq!(record["outcome"]["reason"], "node", "{stem}: {record}");
        let detail = record["outcome"]["detail"].as_str().expect("a detail");
        assert!(detail.contains(&format!("SLURM job {id} ")), "{detail}");
        assert!(detail.contains("ended CANCELLED"), "{detail}");
        assert!(detail.contains("exit code 0:15"), "{detail}");
        assert!(detail.contains(&format!("*** JOB {id} ON ")), "no output tail: {detail}");
        assert_eq!(record["provenance"], tests["provenance"], "{stem}");
    }
    // The job stopped its servers when it was cancelled: what failed then is no crash.
    for (name, kind) in kinds(&fixture, "results") {
        let record = fixture.record("results", name.trim_end_matches(".json"));
        let reason = &record["outcome"]["reason"];
        assert!(kind != "not-run" || reason == "node", "{name}: {record}");
    }
    let name = cancel.job_name().expect("the run's id");
    assert_eq!(states(&name), ["CANCELLED"]);
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the cancel");
}

#[test]
fn ctrl_c_cancels_the_runs_jobs_and_keeps_what_they_recorded() {
    require_slurm();
    let fixture = Fixture::new(&Sample { output_len: 64, ..Sample::default() });
    let cancel = CancelJobs::new(&fixture, "results");
    let mut child = spawn_slurm_run(&fixture, "results");
    fixture.wait_for_event("results", &["\"step-started\"", "\"speed\""], &mut child);
    signal(&child, "INT");
    let status = wait_at_most(&mut child, Duration::from_secs(60));
    let stderr = read(&stderr_path(&fixture, "results"));
    assert!(!status.success(), "{status:?}\n{stderr}");
    assert!(stderr.contains("got SIGINT: cancelling the run's SLURM jobs"), "{stderr}");
    let name = cancel.job_name().expect("the run's id");
    assert_eq!(states(&name), ["CANCELLED"], "{stderr}");
    let tests = fixture.record("results", "alpha.unit-tests.pr");
    assert_eq!(tests["outcome"]["kind"], "tests", "{tests}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after Ctrl-C");
}

#[test]
fn a_job_over_its_time_limit_is_a_timeout_with_the_jobs_output() {
    require_slurm();
    // The servers are not ready for ten minutes and the recipe would wait for them: SLURM's
    // one-minute limit ends the job first (checked on a 30 s timer: 60 to 90 s).
    let fixture = Fixture::new(&Sample {
        server_flags: "--startup-delay-ms 600000",
        startup_timeout: "20m",
        ..Sample::default()
    });
    let _cancel = CancelJobs::new(&fixture, "results");
    let args = slurm_args(&fixture, "results", &["--job-time-limit", "1m"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = Instant::now();
    let run = prgate(fixture.repo.path(), &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(150), "took {:?}", started.elapsed());
    assert!(run.stderr.contains("did not complete: alpha"), "{}", run.stderr);
    let script = read(&fixture.results("results").join("slurm/alpha/job.sh"));
    assert!(script.contains("#SBATCH --time=0:01:00\n"), "{script}");

    // The job died before its steps: the gather records each step of the job plan, a
    // benchmark's by its name (not by a repeat).
    let stems = SERVED
        .into_iter()
        .chain(["alpha.speed.both.concurrency-1", "alpha.speed.both.concurrency-2"])
        .map(|stem| stem.replace("%40repeat-0", ""));
    for stem in stems {
        let stem = stem.as_str();
        let record = fixture.record("results", stem);
        assert_eq!(record["outcome"]["kind"], "not-run", "{stem}: {record}");
        assert_eq!(record["outcome"]["reason"], "run-time-limit", "{stem}: {record}");
        let detail = record["outcome"]["detail"].as_str().expect("a detail");
        assert!(detail.contains("ended TIMEOUT (reason TimeLimit"), "{detail}");
        assert!(detail.contains("DUE TO TIME LIMIT"), "no output tail: {detail}");
    }
    let tests = fixture.record("results", "alpha.unit-tests.pr");
    assert_eq!(tests["outcome"]["kind"], "tests", "{tests}");
    let gate = crate::support::prgate(
        fixture.repo.path(),
        &[
            "gate",
            "--plan",
            fixture.plan.to_str().expect("UTF-8"),
            "--evidence",
            fixture.evidence("results").to_str().expect("UTF-8"),
        ],
    );
    // A cluster job cut by its time limit is the node's, not the PR's: the run cannot be judged.
    assert!(
        gate.stdout.contains("the run's time limit passed first"),
        "{}{}",
        gate.stdout,
        gate.stderr
    );
    assert_eq!(gate.code, 2, "{}{}", gate.stdout, gate.stderr);
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the time limit");
}

#[test]
fn slurm_flags_are_checked_before_any_job() {
    let fixture = Fixture::new(&Sample::default());
    let cases: [(&[&str], &str); 3] = [
        (
            &["--executor", "slurm", "--slurm-bin", "/nonexistent/slurm"],
            "cannot run /nonexistent/slurm/squeue",
        ),
        (&["--executor", "slurm", "--only-model", "alpha"], "is for --executor local"),
        (&["--job-time-limit", "1m"], "are for --executor slurm"),
    ];
    for (extra, expect) in cases {
        let mut args = fixture.run_args("results");
        args.extend(extra.iter().map(|arg| (*arg).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = prgate(fixture.repo.path(), &args);
        assert_eq!(run.code, 2, "{extra:?}: {}", run.stderr);
        assert!(run.stderr.contains(expect), "{extra:?}: {}", run.stderr);
    }
}

#[test]
fn with_reuse_on_a_second_runs_jobs_take_over_what_the_first_runs_judged() {
    require_slurm();
    let fixture = Fixture::new(&Sample {
        gate: TWO_PAIRS,
        pr: |repo| {
            repo.write("pkg/models/alpha/layer.py", "# alpha, faster\n")
                .write("test/e2e/common.toml", COMMON_RECIPE);
        },
        ..Sample::default()
    });
    let _first_jobs = CancelJobs::new(&fixture, "first");
    let _second_jobs = CancelJobs::new(&fixture, "second");
    for (results, run) in [("first", "run-1"), ("second", "run-2")] {
        let args = slurm_args(&fixture, results, &["--reuse", "on", "--reuse-run", run]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let slurm = prgate(fixture.repo.path(), &args);
        assert_eq!(slurm.code, 0, "{results}: {}", slurm.stderr);
    }
    let first = kinds(&fixture, "first");
    assert_eq!(kinds(&fixture, "second"), first);
    // The first run's jobs saved what they judged; the second's took every record over, each
    // naming the run that measured it, and ran no step.
    for (name, _) in &first {
        let stem = name.trim_end_matches(".json");
        let record = fixture.record("second", stem);
        assert_eq!(record["provenance"]["reused"]["run"], "run-1", "{stem}: {record}");
        assert_eq!(fixture.record("first", stem)["provenance"]["reused"], serde_json::Value::Null);
    }
    let events = read(&fixture.events("second"));
    let ran = events.lines().filter(|line| line.contains("\"step-finished\"")).count();
    assert_eq!(ran, 0, "{events}");
    assert_eq!(settle(&fixture), Vec::<String>::new(), "processes left after the runs");
}

#[test]
fn a_pr_title_that_reads_as_a_flag_is_the_jobs_title_and_the_job_runs() {
    require_slurm();
    let fixture = Fixture::new(&Sample { gate: TWO_PAIRS, ..Sample::default() });
    let _cancel = CancelJobs::new(&fixture, "slurm");
    // The PR's title is its author's text: `--help` as the job's flag would print the help and
    // run nothing.
    let args = slurm_args(&fixture, "slurm", &["--title=--help"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let slurm = prgate(fixture.repo.path(), &args);
    assert_eq!(slurm.code, 0, "{}", slurm.stderr);
    let script = read(&fixture.results("slurm").join("slurm/alpha/job.sh"));
    assert!(script.contains("--title=--help"), "{script}");
    let routing = fixture.record("slurm", "alpha.routing.pr");
    assert_eq!(routing["outcome"]["kind"], "routing", "{routing}");
}
