//! `prgate node` and node health end to end: the real `prgate` on a fake machine whose
//! `amd-smi` (a script the node profile names, a real process) reports ECC errors; the
//! strikes its preflights record in the ledger, the drain after three, the SLURM executor
//! that leaves the drained node out of its jobs on this machine's real SLURM (`.ci/slurm-up`),
//! and the canary that re-admits it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::run::{Fixture, Sample};
use crate::slurm::require_slurm;
use crate::support::prgate;

/// `amd-smi metric --ecc --json` of a GPU with two uncorrectable errors, and of a clean one.
const ECC_BAD: &str = r#"[{"gpu": 0, "ecc": {"total_correctable_count": 0, "total_uncorrectable_count": 2, "total_deferred_count": 0}},
 {"gpu": 1, "ecc": {"total_correctable_count": 0, "total_uncorrectable_count": 0, "total_deferred_count": 0}}]"#;
const ECC_CLEAN: &str = r#"[{"gpu": 0, "ecc": {"total_correctable_count": 0, "total_uncorrectable_count": 0, "total_deferred_count": 0}},
 {"gpu": 1, "ecc": {"total_correctable_count": 0, "total_uncorrectable_count": 0, "total_deferred_count": 0}}]"#;

/// A fake machine for the fixture's node: its two GPUs visible and idle (sysfs), and an
/// `amd-smi` that answers `metric --ecc --json` from `ecc.json` (and nothing else, so the
/// memory comes from sysfs). The node profile gets a `[health]` table naming it.
struct Machine {
    root: PathBuf,
    ecc: PathBuf,
}

impl Machine {
    fn new(fixture: &Fixture, health: &str) -> Machine {
        let work = fixture.work.path();
        let root = work.join("machine");
        std::fs::create_dir_all(root.join("dev/dri")).expect("dev/dri");
        std::fs::write(root.join("dev/kfd"), "").expect("kfd");
        for render in ["renderD128", "renderD136"] {
            let device = root.join(format!("sys/class/drm/{render}/device"));
            std::fs::create_dir_all(&device).expect("sysfs");
            std::fs::write(root.join("dev/dri").join(render), "").expect("the render node");
            std::fs::write(device.join("mem_info_vram_total"), "309220868096\n").expect("total");
            std::fs::write(device.join("mem_info_vram_used"), "296747008\n").expect("used");
        }
        let bin = work.join("bin");
        std::fs::create_dir_all(&bin).expect("bin");
        let ecc = work.join("ecc.json");
        std::fs::write(&ecc, ECC_BAD).expect("the ECC answer");
        let script = format!(
            "#!/bin/sh\ncase \"$*\" in\n  \"metric --ecc --json\") cat '{}' ;;\n  *) echo \"not here: $*\" >&2; exit 1 ;;\nesac\n",
            ecc.display()
        );
        executable(&bin.join("amd-smi"), &script);
        let profile = std::fs::read_to_string(&fixture.node).expect("the profile");
        let table = format!(
            "\n[health]\namd-smi = \"{}\"\nrocm-smi = \"{}\"\ndir = \"{}\"\n{health}",
            bin.join("amd-smi").display(),
            bin.join("rocm-smi-absent").display(),
            work.join("health").display(),
        );
        std::fs::write(&fixture.node, profile + &table).expect("the profile's health table");
        Machine { root, ecc }
    }

    /// The GPU's ECC errors are gone (the GPU was reset or replaced).
    fn mend(&self) {
        std::fs::write(&self.ecc, ECC_CLEAN).expect("the ECC answer");
    }
}

/// Writes `text` to `path` as an executable script.
pub(crate) fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).expect("a script");
    let mut permissions = std::fs::metadata(path).expect("the script").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(path, permissions).expect("an executable script");
}

/// `prgate node ARGS --node <the fixture's>`.
fn node(fixture: &Fixture, args: &[&str]) -> crate::support::Run {
    let mut all: Vec<&str> = vec!["node"];
    all.extend_from_slice(args);
    let profile = fixture.node.to_str().expect("UTF-8");
    all.extend(["--node", profile]);
    prgate(fixture.repo.path(), &all)
}

/// The node's state as `prgate node status --format json` prints it.
fn status(fixture: &Fixture, name: &str) -> (i32, serde_json::Value) {
    let run = node(fixture, &["status", "--format", "json", "--name", name]);
    let value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}{}", run.stdout, run.stderr));
    (run.code, value)
}

/// `prgate run --executor slurm` of the fixture with the preflight on the fake machine.
fn slurm_run(
    fixture: &Fixture,
    machine: &Machine,
    results: &str,
    extra: &[&str],
) -> crate::support::Run {
    let mut args = fixture.run_args(results);
    let at = args.iter().position(|arg| arg == "off").expect("--preflight off");
    args[at] = "on".to_owned();
    args.extend(
        [
            "--preflight-root",
            machine.root.to_str().expect("UTF-8"),
            "--min-free-disk",
            "0",
            "--executor",
            "slurm",
        ]
        .map(str::to_owned),
    );
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    prgate(fixture.repo.path(), &args)
}

/// The name of this machine's SLURM node.
fn slurm_node() -> String {
    let output =
        Command::new("sinfo").args(["--noheader", "--format=%N"]).output().expect("sinfo runs");
    let name = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(!name.is_empty() && !name.contains([',', '[']), "one node: {name:?}");
    name
}

/// Cancels a results directory's jobs when the test ends.
struct CancelJobs(PathBuf);

impl Drop for CancelJobs {
    fn drop(&mut self) {
        if let Ok(id) = std::fs::read_to_string(self.0.join("slurm/run-id")) {
            let _ = Command::new("scancel").arg(format!("--name=prgate-{}", id.trim())).status();
        }
    }
}

#[test]
fn a_node_struck_three_times_is_left_out_of_slurm_jobs_until_a_canary_admits_it() {
    require_slurm();
    let vm = slurm_node();
    let fixture = Fixture::new(&Sample::default());
    let machine = Machine::new(&fixture, "");
    let _cancel = CancelJobs(fixture.results("results"));

    // Each run's job finds the uncorrectable ECC errors in its preflight, on the SLURM node:
    // a strike in that node's ledger, until three drain it.
    let mut runs = 0;
    loop {
        runs += 1;
        let run = slurm_run(&fixture, &machine, "results", &[]);
        assert_eq!(run.code, 0, "run {runs}: {}", run.stderr);
        let record = fixture.record("results", "alpha.unit-tests.pr");
        assert_eq!(record["outcome"]["reason"], "node", "{record}");
        let detail = record["outcome"]["detail"].as_str().expect("a detail");
        assert!(detail.contains("2 uncorrectable ECC error(s) (amd-smi)"), "{detail}");
        let (code, state) = status(&fixture, &vm);
        if state["drained"] == true {
            assert_eq!(code, 1, "a drained node's status exits 1: {state}");
            break;
        }
        assert_eq!(code, 0, "{state}");
        assert!(runs < 3, "three runs and not drained: {state}");
    }
    let (_code, state) = status(&fixture, &vm);
    assert_eq!(state["strikes"], 3, "{state}");
    assert_eq!(state["drained-because"], "3 strikes within 7d", "{state}");
    let strikes = node(&fixture, &["strikes", "--name", &vm]);
    assert_eq!(strikes.code, 0, "{}", strikes.stderr);
    assert_eq!(
        strikes
            .stdout
            .matches(" strike (preflight): GPU 0 (/dev/dri/renderD128): 2 uncorrectable")
            .count(),
        3,
        "{}",
        strikes.stdout
    );
    assert!(strikes.stdout.contains(" drain (strikes): 3 strikes within 7d"), "{}", strikes.stdout);

    // The next run leaves the drained node out: on this one-node cluster no node is left, and
    // the run says so at once, with the sbatch command and the way back.
    let refused = slurm_run(&fixture, &machine, "results", &[]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    let stderr = &refused.stderr;
    assert!(stderr.contains(&format!("--exclude={vm} ")), "{stderr}");
    assert!(stderr.contains("Requested node configuration is not available"), "{stderr}");
    assert!(stderr.contains("prgate left these drained nodes out of the job"), "{stderr}");
    assert!(stderr.contains(&format!("{vm}: drained since ")), "{stderr}");
    assert!(stderr.contains("prgate node canary"), "{stderr}");

    // A canary on the unmended node fails, strikes it again and leaves it drained.
    let canary =
        ["canary", "--name", &vm, "--preflight-root", machine.root.to_str().expect("UTF-8")];
    let failed = node(&fixture, &canary);
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    assert!(failed.stderr.contains("canary: preflight: GPU 0"), "{}", failed.stderr);
    assert_eq!(status(&fixture, &vm).0, 1);

    // Mended, the canary passes and admits it; the next run's jobs run on it again.
    machine.mend();
    let passed = node(&fixture, &canary);
    assert_eq!(passed.code, 0, "{}", passed.stderr);
    assert!(passed.stderr.contains("the canary passed"), "{}", passed.stderr);
    let (code, state) = status(&fixture, &vm);
    assert_eq!(
        (code, &state["drained"], &state["strikes"]),
        (0, &serde_json::json!(false), &serde_json::json!(0)),
        "{state}"
    );
    let again = slurm_run(&fixture, &machine, "results", &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(!again.stderr.contains("--exclude"), "{}", again.stderr);
    assert!(again.stderr.contains("(alpha): COMPLETED"), "{}", again.stderr);
    let tests = fixture.record("results", "alpha.unit-tests.pr");
    assert_eq!(tests["outcome"]["kind"], "tests", "{tests}");
}

#[test]
fn with_slurm_drain_the_executor_drains_the_node_in_slurm_and_an_admit_resumes_it() {
    require_slurm();
    let vm = slurm_node();
    let fixture = Fixture::new(&Sample::default());
    let machine = Machine::new(&fixture, "slurm-drain = true\n");
    let _cancel = CancelJobs(fixture.results("results"));
    // SLURM's own programs, but an scontrol whose `update` is written down instead of done:
    // this machine's one node serves other tests too.
    let bin = fixture.work.path().join("slurm-bin");
    std::fs::create_dir_all(&bin).expect("slurm-bin");
    let log = fixture.work.path().join("scontrol-updates.log");
    for program in ["sbatch", "squeue", "scancel"] {
        let real = which(program);
        executable(&bin.join(program), &format!("#!/bin/sh\nexec '{}' \"$@\"\n", real.display()));
    }
    executable(
        &bin.join("scontrol"),
        &format!(
            "#!/bin/sh\nif [ \"$1\" = update ]; then printf '%s\\n' \"$*\" >> '{}'; exit 0; fi\nexec '{}' \"$@\"\n",
            log.display(),
            which("scontrol").display()
        ),
    );
    let drain = node(&fixture, &["drain", "--name", &vm, "--reason", "fans failing"]);
    assert_eq!(drain.code, 0, "{}", drain.stderr);
    let slurm_bin = bin.to_str().expect("UTF-8");
    let refused = slurm_run(&fixture, &machine, "results", &["--slurm-bin", slurm_bin]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains(&format!("--exclude={vm} ")), "{}", refused.stderr);
    let admit = node(
        &fixture,
        &["admit", "--name", &vm, "--reason", "fans replaced", "--slurm-bin", slurm_bin],
    );
    assert_eq!(admit.code, 0, "{}", admit.stderr);
    let updates = std::fs::read_to_string(&log).expect("scontrol was asked to update");
    assert_eq!(
        updates,
        format!(
            "update NodeName={vm} State=DRAIN Reason=prgate: fans failing\nupdate NodeName={vm} State=RESUME\n"
        )
    );
}

fn which(program: &str) -> PathBuf {
    let output = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .expect("sh runs");
    let path = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(!path.is_empty(), "{program} is not installed");
    PathBuf::from(path)
}

#[test]
fn the_ledger_from_the_command_line() {
    let fixture = Fixture::new(&Sample::default());
    let _machine = Machine::new(&fixture, "strikes = 2\nwindow = \"1d\"\n");
    let (code, state) = status(&fixture, "mi355x-9");
    assert_eq!(code, 0);
    assert_eq!(
        state,
        serde_json::json!({"node": "mi355x-9", "drained": false, "drained-since": null, "drained-because": null, "strikes": 0})
    );
    // The profile's name is the default ledger.
    let drain = node(&fixture, &["drain", "--reason", "by hand"]);
    assert_eq!(drain.code, 0, "{}", drain.stderr);
    assert!(drain.stderr.contains("ci-node: drained since "), "{}", drain.stderr);
    let all = node(&fixture, &["status", "--all"]);
    assert_eq!(all.code, 1, "{}", all.stderr);
    assert!(all.stdout.starts_with("ci-node: drained since "), "{}", all.stdout);
    let admit = node(&fixture, &["admit", "--reason", "checked"]);
    assert_eq!(admit.code, 0, "{}", admit.stderr);
    assert_eq!(node(&fixture, &["status"]).code, 0);

    // A run's results: a step broken on both sides is a strike; two drain (strikes = 2).
    let results = fixture.results("results");
    let evidence = results.join("evidence");
    std::fs::create_dir_all(&evidence).expect("evidence");
    // The job plan: the PR left the recipe as base has it (the same hash on both sides).
    let recipe =
        serde_json::json!({"state": "parsed", "path": "test/e2e/alpha.toml", "hash": "sha256:aa"});
    let job = serde_json::json!({
        "schema_version": 1, "pr_commit": "b", "base_commit": "a", "family": 0,
        "targets": [{"model": "alpha", "tier": "full", "recipe": {"base": recipe, "pr": recipe}, "steps": []}]
    });
    std::fs::write(results.join("job.json"), job.to_string()).expect("the job plan");
    for side in ["base", "pr"] {
        let record = serde_json::json!({
            "schema_version": 1, "model": "alpha", "check": "serving-tests", "side": side,
            "provenance": {}, "outcome": {"kind": "not-run", "reason": "crash", "detail": "segfault"}
        });
        std::fs::write(
            evidence.join(format!("alpha.serving-tests.{side}.json")),
            record.to_string(),
        )
        .expect("a record");
    }
    let results_arg = results.to_str().expect("UTF-8");
    for round in 1..=2 {
        let scan = node(&fixture, &["scan", "--results", results_arg, "--run", "PR #7"]);
        assert_eq!(scan.code, 0, "{}", scan.stderr);
        assert!(
            scan.stderr.contains("serving tests of alpha broke on base and on the PR"),
            "{}",
            scan.stderr
        );
        assert_eq!(
            scan.stderr.contains("node ci-node is drained: 2 strikes within 1d"),
            round == 2,
            "{}",
            scan.stderr
        );
    }
    assert_eq!(node(&fixture, &["status"]).code, 1);

    let broken = fixture.work.path().join("health/ci-node.jsonl");
    std::fs::write(&broken, "{\"version\": 1}\n").expect("a broken ledger");
    let unreadable = node(&fixture, &["status"]);
    assert_eq!(unreadable.code, 2, "{}", unreadable.stderr);
    assert!(
        unreadable.stderr.contains("ci-node.jsonl, line 1: missing field"),
        "{}",
        unreadable.stderr
    );
}

#[test]
fn the_schedule_leaves_drained_nodes_out_of_the_nodes_file() {
    let fixture = Fixture::new(&Sample::default());
    let _machine = Machine::new(&fixture, "");
    let nodes = fixture.work.path().join("nodes.toml");
    std::fs::write(
        &nodes,
        "[[node]]\nname = \"mi355x-1\"\nhardware = \"mi355x\"\n\n[[node]]\nname = \"mi355x-2\"\nhardware = \"mi355x\"\n",
    )
    .expect("a nodes file");
    let nodes_arg = nodes.to_str().expect("UTF-8");
    let all = node(&fixture, &["filter", "--nodes", nodes_arg]);
    assert_eq!(all.code, 0, "{}", all.stderr);
    assert_eq!(all.stdout.matches("[[node]]").count(), 2, "{}", all.stdout);
    let drain = node(&fixture, &["drain", "--name", "mi355x-2", "--reason", "ECC"]);
    assert_eq!(drain.code, 0, "{}", drain.stderr);
    let one = node(&fixture, &["filter", "--nodes", nodes_arg]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    assert_eq!(one.stdout, "[[node]]\nhardware = \"mi355x\"\nname = \"mi355x-1\"\n");
    assert!(one.stderr.contains("left out: mi355x-2: drained since "), "{}", one.stderr);
    let drain = node(&fixture, &["drain", "--name", "mi355x-1", "--reason", "fans"]);
    assert_eq!(drain.code, 0, "{}", drain.stderr);
    let none = node(&fixture, &["filter", "--nodes", nodes_arg]);
    assert_eq!(none.code, 2, "{}", none.stderr);
    assert!(none.stderr.contains("every node is drained (mi355x-1, mi355x-2)"), "{}", none.stderr);
    // A typo is refused by the filter, the file named, as the start stage would refuse it.
    std::fs::write(&nodes, "[[node]]\nname = \"mi355x-3\"\nhardwre = \"mi355x\"\n")
        .expect("a nodes file with a typo");
    let typo = node(&fixture, &["filter", "--nodes", nodes_arg]);
    assert_eq!(typo.code, 2, "{}", typo.stderr);
    assert!(
        typo.stderr.contains(&format!("the nodes {nodes_arg}: unknown field `hardwre`")),
        "{}",
        typo.stderr
    );
}

#[test]
fn a_slurm_job_whose_steps_break_on_both_sides_strikes_the_node_it_ran_on() {
    require_slurm();
    let vm = slurm_node();
    // Neither side's server ever answers healthy: what needs it breaks on base and PR alike,
    // which no PR can cause.
    let fixture = Fixture::new(&Sample {
        server_flags: "--never-healthy",
        startup_timeout: "1s",
        ..Sample::default()
    });
    let machine = Machine::new(&fixture, "strikes = 100\n");
    machine.mend();
    let _cancel = CancelJobs(fixture.results("results"));
    let run = slurm_run(&fixture, &machine, "results", &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("a strike against node {vm} (both-sides-broken)")),
        "{}",
        run.stderr
    );
    let strikes = node(&fixture, &["strikes", "--name", &vm]);
    assert_eq!(strikes.code, 0, "{}", strikes.stderr);
    // Each names the SLURM job that saw it.
    let lines: Vec<&str> = strikes
        .stdout
        .lines()
        .map(|line| line.split_once(" strike ").map_or(line, |(_at, rest)| rest))
        .map(|line| line.split_once(" [job ").map_or(line, |(strike, _job)| strike))
        .collect();
    assert_eq!(
        lines,
        [
            // A benchmark's steps are its repeats (issue 23): the first one broke.
            "(both-sides-broken): accuracy of alpha (tiny@repeat-0) broke on base and on the PR",
            "(both-sides-broken): monokernel routing of alpha broke on base and on the PR",
            "(both-sides-broken): serving tests of alpha broke on base and on the PR",
        ],
        "{}",
        strikes.stdout
    );
}

/// The PR's recipe selects unit tests at a path named like a GPU error: the base side's pytest
/// prints it back ("file or directory not found: test/unit/hipErrorNoDevice").
fn select_a_gpu_error(repo: &crate::support::Repo) {
    let path = repo.path().join("test/e2e/alpha.toml");
    let recipe = std::fs::read_to_string(&path).expect("the recipe");
    let changed =
        recipe.replace("unit = [\"test/unit/alpha\"]", "unit = [\"test/unit/hipErrorNoDevice\"]");
    assert_ne!(changed, recipe, "the sample's unit selection");
    repo.write("test/e2e/alpha.toml", &changed);
}

#[test]
fn a_drained_node_refuses_a_run_until_admitted_and_no_pr_can_drain_it() {
    let fixture = Fixture::new(&Sample { pr: select_a_gpu_error, ..Sample::default() });
    // A drained node takes no local run: it refuses before anything runs, naming the node
    // and the commands that admit it.
    let drain = node(&fixture, &["drain", "--reason", "fans"]);
    assert_eq!(drain.code, 0, "{}", drain.stderr);
    let refused = fixture.run("refused");
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("node ci-node is drained: it takes no work until it is admitted"),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains("ci-node: drained since "), "{}", refused.stderr);
    let hint = "`prgate node admit --node FILE --name ci-node --reason TEXT`";
    assert!(refused.stderr.contains(hint), "{}", refused.stderr);
    assert!(!fixture.evidence("refused").exists(), "nothing ran");
    // The command the hint names admits it.
    let profile = fixture.node.to_str().expect("UTF-8");
    let admit = prgate(
        fixture.repo.path(),
        &["node", "admit", "--node", profile, "--name", "ci-node", "--reason", "fans mended"],
    );
    assert_eq!(admit.code, 0, "{}", admit.stderr);

    // Three PRs whose selection names `test/unit/hipErrorNoDevice`: base's recipe is the
    // contract (docs/recipe.md), so base's pytest never sees the words; and were they in a
    // base-side log, the scan reads only base's server logs of an unchanged recipe. The node's
    // health does not move.
    let run = fixture.run("results");
    assert_ne!(run.code, 2, "{}", run.stderr);
    let pytest_log = fixture.results("results").join("logs/alpha.unit-tests.base/pytest.log");
    let pytest_log = std::fs::read_to_string(&pytest_log).expect("base's pytest log");
    assert!(
        !pytest_log.contains("hipErrorNoDevice"),
        "the PR's selection reached base: {pytest_log}"
    );
    let results = fixture.results("results");
    for pr in 1..=3 {
        let run_name = format!("PR #{pr}");
        let scan = node(
            &fixture,
            &["scan", "--results", results.to_str().expect("UTF-8"), "--run", &run_name],
        );
        assert_eq!(scan.code, 0, "{}", scan.stderr);
        assert!(scan.stderr.contains("0 strike(s) found"), "{}", scan.stderr);
        assert!(!scan.stderr.contains("a strike against"), "{}", scan.stderr);
    }
    let (code, state) = status(&fixture, "ci-node");
    assert_eq!((code, &state["drained"], &state["strikes"]), (0, &false.into(), &0.into()));
}
