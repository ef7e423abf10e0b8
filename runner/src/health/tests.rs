//! Tests of the health ledger: strikes, drains and admits over time as tables, the file's
//! lines, errors that name the line, and what a results directory is struck for.

use std::time::{Duration, UNIX_EPOCH};

use prgate_gate::evidence::{
    Check, Evidence, NotRunReason, Outcome, Provenance, SCHEMA_VERSION, Side,
};

use super::*;

const DAY: u64 = 86_400;
/// 2026-12-01T00:00:00Z.
const T0: u64 = 1_796_083_200;

fn at(seconds: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(seconds)
}

/// What a test does to the ledger, at a time in days after [`T0`].
enum Step {
    Strike(u64),
    Admit(u64),
    Drain(u64),
}

/// Runs `steps` on a fresh ledger under `policy`; returns, per step, `in-window/drained-now`
/// for a strike, then the node's state.
fn check(policy: HealthPolicy, steps: &[Step]) -> (Vec<String>, String) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let ledger = Ledger::new(dir.path(), "mi355x-2").expect("a ledger");
    let mut outcomes = Vec::new();
    for step in steps {
        match step {
            Step::Strike(day) => {
                let strike = Strike { source: Source::Preflight, detail: format!("day {day}") };
                let outcome = ledger
                    .strike(&strike, Some("a run"), &policy, at(T0 + day * DAY))
                    .expect("a strike");
                outcomes.push(format!(
                    "{}{}",
                    outcome.in_window,
                    if outcome.drained_now { " drained" } else { "" }
                ));
            }
            Step::Admit(day) => {
                ledger.admit(Source::Canary, "canary", at(T0 + day * DAY)).expect("an admit");
            }
            Step::Drain(day) => {
                ledger.drain("by hand", at(T0 + day * DAY)).expect("a drain");
            }
        }
    }
    (outcomes, ledger.health().expect("the state").summary())
}

/// A case: its name, the policy, the steps, each strike's outcome, the state at the end.
type Case = (&'static str, HealthPolicy, Vec<Step>, &'static [&'static str], &'static str);

#[test]
fn strikes_drain_a_node_and_an_admit_forgives_them() {
    use Step::*;
    let default = HealthPolicy::default();
    let cases: Vec<Case> = vec![
        (
            "three strikes in a week drain",
            default,
            vec![Strike(0), Strike(1), Strike(2)],
            &["1", "2", "3 drained"],
            "mi355x-2: drained since 2026-12-03T00:00:00Z (3 strikes within 7d); 3 strike(s) since it was last admitted",
        ),
        (
            "strikes older than the window do not count",
            default,
            vec![Strike(0), Strike(1), Strike(9)],
            &["1", "2", "1"],
            "mi355x-2: admitted; 3 strike(s) since it was last admitted",
        ),
        (
            "a drain stays after its strikes age, until an admit",
            default,
            vec![Strike(0), Strike(0), Strike(0), Strike(30), Admit(31)],
            &["1", "2", "3 drained", "1"],
            "mi355x-2: admitted; no strike since it was last admitted",
        ),
        (
            "strikes before an admit no longer count",
            default,
            vec![Strike(0), Strike(0), Admit(1), Strike(1), Strike(2)],
            &["1", "2", "1", "2"],
            "mi355x-2: admitted; 2 strike(s) since it was last admitted",
        ),
        (
            "one strike drains with a policy of one",
            HealthPolicy { strikes: 1, window: Duration::from_secs(3600) },
            vec![Strike(0)],
            &["1 drained"],
            "mi355x-2: drained since 2026-12-01T00:00:00Z (1 strikes within 1h); 1 strike(s) since it was last admitted",
        ),
        (
            "a drain by hand, without strikes",
            default,
            vec![Drain(0)],
            &[],
            "mi355x-2: drained since 2026-12-01T00:00:00Z (by hand); no strike since it was last admitted",
        ),
        (
            "strikes on a drained node do not drain it again",
            default,
            vec![Drain(0), Strike(0), Strike(0), Strike(0), Strike(0)],
            &["1", "2", "3", "4"],
            "mi355x-2: drained since 2026-12-01T00:00:00Z (by hand); 4 strike(s) since it was last admitted",
        ),
    ];
    for (name, policy, steps, outcomes, state) in cases {
        let (got, summary) = check(policy, &steps);
        assert_eq!(got, outcomes, "{name}");
        assert_eq!(summary, state, "{name}");
    }
}

#[test]
fn the_ledgers_lines_and_files() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let ledger = Ledger::new(dir.path(), "vm").expect("a ledger");
    let policy = HealthPolicy { strikes: 2, ..HealthPolicy::default() };
    let strike =
        Strike { source: Source::GpuErrorInLog, detail: "\"hipErrorNoDevice\"".to_owned() };
    ledger.strike(&strike, Some("PR #12"), &policy, at(T0)).expect("a strike");
    ledger.strike(&strike, None, &policy, at(T0 + 60)).expect("a strike");
    ledger.admit(Source::Manual, "mended", at(T0 + 120)).expect("an admit");
    let text = std::fs::read_to_string(dir.path().join("vm.jsonl")).expect("the ledger");
    insta::assert_snapshot!(text, @r#"
    {"version":1,"at":"2026-12-01T00:00:00Z","node":"vm","event":"strike","source":"gpu-error-in-log","detail":"\"hipErrorNoDevice\"","run":"PR #12"}
    {"version":1,"at":"2026-12-01T00:01:00Z","node":"vm","event":"strike","source":"gpu-error-in-log","detail":"\"hipErrorNoDevice\""}
    {"version":1,"at":"2026-12-01T00:01:00Z","node":"vm","event":"drain","source":"strikes","detail":"2 strikes within 7d"}
    {"version":1,"at":"2026-12-01T00:02:00Z","node":"vm","event":"admit","source":"manual","detail":"mended"}
    "#);
    // No temporary file is left beside it; the lock file stays (it is never the lock).
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("the folder")
        .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["vm.jsonl", "vm.lock"]);

    let other = Ledger::new(dir.path(), "mi355x-1").expect("a ledger");
    other.drain("by hand", at(T0)).expect("a drain");
    let all: Vec<String> = all_nodes(dir.path())
        .expect("the ledgers")
        .iter()
        .map(|health| format!("{} {}", health.node, health.is_drained()))
        .collect();
    assert_eq!(all, ["mi355x-1 true", "vm false"]);
    let drained: Vec<String> =
        drained_nodes(dir.path()).expect("the ledgers").into_iter().map(|h| h.node).collect();
    assert_eq!(drained, ["mi355x-1"]);
    assert_eq!(all_nodes(&dir.path().join("none")).expect("no folder"), []);
}

#[test]
fn a_ledger_that_does_not_read_is_an_error_naming_its_line() {
    let good = r#"{"version":1,"at":"2026-12-01T00:00:00Z","node":"vm","event":"admit","source":"manual","detail":"x"}"#;
    let cases = [
        ("{", "line 1: EOF while parsing an object"),
        (
            &good.replace("\"version\":1", "\"version\":2"),
            "line 1: version 2 is not one this prgate reads (1)",
        ),
        (&good.replace("2026-12-01T00", "2026-02-30T00"), "line 1: at = \"2026-02-30T00:00:00Z\""),
        (&good.replace("12-01T00:00:00Z", "12-01 00:00"), "line 1: at = \"2026-12-01 00:00\""),
        (&good.replace("admit", "pardon"), "line 1: unknown variant `pardon`"),
        (
            &format!("{good}\n\n{}", good.replace("}", ",\"extra\":1}")),
            "line 3: unknown field `extra`",
        ),
    ];
    for (text, expect) in cases {
        let dir = tempfile::tempdir().expect("a temp dir");
        std::fs::write(dir.path().join("vm.jsonl"), text).expect("a ledger");
        let error = Ledger::new(dir.path(), "vm").expect("a ledger").health().expect_err(text);
        let message = error.to_string();
        assert!(message.contains(expect), "{text}: {message}");
        assert!(message.starts_with(&dir.path().join("vm.jsonl").display().to_string()));
    }
    for name in ["", "..", "a/b", "x y"] {
        assert!(Ledger::new(Path::new("/tmp"), name).is_err(), "{name:?}");
    }
}

#[test]
fn times_and_windows_in_words() {
    for seconds in [0, T0, T0 + 86_399, 951_782_400 /* 2000-02-29 */] {
        assert_eq!(parse_rfc3339(&rfc3339(seconds)), Some(seconds), "{seconds}");
    }
    let cases =
        [(7 * DAY, "7d"), (36 * 3600, "36h"), (90 * 60, "90m"), (45, "45s"), (DAY + 1, "86401s")];
    for (seconds, expect) in cases {
        assert_eq!(format_window(Duration::from_secs(seconds)), expect);
    }
}

/// A record of `check` on `side` of model `alpha`.
fn record(check: Check, side: Side, outcome: Outcome) -> Evidence {
    Evidence {
        schema_version: SCHEMA_VERSION,
        model: Some("alpha".to_owned()),
        check,
        side,
        provenance: Provenance::default(),
        outcome,
    }
}

fn not_run(reason: NotRunReason) -> Outcome {
    Outcome::NotRun { reason, detail: "d".to_owned(), subject: None, failed_on: None }
}

#[test]
fn a_results_directory_is_struck_for_what_the_pr_cannot_cause() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let results = crate::results::ResultsDir::open(dir.path()).expect("a results dir");
    let records = [
        // Broken on both sides: the node's.
        record(Check::ServingTests, Side::Base, not_run(NotRunReason::Crash)),
        record(Check::ServingTests, Side::Pr, not_run(NotRunReason::Timeout)),
        // Broken on the PR only: the PR's.
        record(Check::Routing, Side::Base, Outcome::Routing { routed: true, line: None }),
        record(Check::Routing, Side::Pr, not_run(NotRunReason::Crash)),
        // Not judgeable on both sides, but not broken: not a strike.
        record(Check::UnitTests, Side::Base, not_run(NotRunReason::Harness)),
        record(Check::UnitTests, Side::Pr, not_run(NotRunReason::Harness)),
        record(Check::KernelTests, Side::Base, not_run(NotRunReason::NoResult)),
        record(Check::KernelTests, Side::Pr, not_run(NotRunReason::NoResult)),
    ];
    for record in &records {
        results.write(record).expect("a record");
    }
    let log = |record: &Evidence, name: &str, text: &str| {
        let step = prgate_gate::job::StepId::of(record);
        let folder = results.step_log_dir(&step).expect("a log folder");
        std::fs::write(folder.join(name), text).expect("a log");
    };
    // A GPU error in the base side's server log strikes; the same words from the PR do not.
    log(&records[2], "server.log", "loading\nRuntimeError: HIP error: hipErrorNoDevice\n");
    log(&records[3], "server.log", "Memory access fault by GPU node-2\n");
    // pytest echoes the paths a PR's selection names: its output is never scanned.
    log(
        &records[4],
        "pytest.log",
        "ERROR: file or directory not found: test/unit/hipErrorNoDevice\n",
    );
    // Without a job plan nothing says the PR left the recipe alone: nothing is struck.
    let unknown = attribute(dir.path(), None).expect("read");
    assert_eq!(unknown.strikes, []);
    assert_eq!(unknown.passed_over.len(), 3, "{:?}", unknown.passed_over);
    assert!(unknown.passed_over[0].contains("no job plan says what the PR changed"));
    write_job(&results, "sha256:aa", "sha256:aa");
    // Records written before a resumed run started are not struck again.
    assert_eq!(
        attribute(dir.path(), Some(SystemTime::now() + Duration::from_secs(60)))
            .expect("none")
            .strikes,
        []
    );
    let strikes: Vec<String> = attribute(dir.path(), Some(UNIX_EPOCH))
        .expect("the strikes")
        .strikes
        .iter()
        .map(|strike| format!("{}: {}", strike.source.name(), strike.detail))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|line| line.replace(&dir.path().display().to_string(), "[results]"))
        .collect();
    assert_eq!(
        strikes,
        [
            "both-sides-broken: kernel tests of alpha broke on base and on the PR",
            "both-sides-broken: serving tests of alpha broke on base and on the PR",
            "gpu-error-in-log: monokernel routing of alpha on the base side: \"hipErrorNoDevice\" in [results]/logs/alpha.routing.base/server.log",
        ]
    );
    // A PR that changes the recipe could have put its words on the base side: nothing is
    // struck, and each passed-over finding says why.
    write_job(&results, "sha256:aa", "sha256:bb");
    let changed = attribute(dir.path(), None).expect("read");
    assert_eq!(changed.strikes, []);
    assert_eq!(changed.passed_over.len(), 3);
    assert!(
        changed.passed_over[2].starts_with("not a strike (gpu-error-in-log): monokernel routing of alpha on the base side: \"hipErrorNoDevice\""),
        "{}",
        changed.passed_over[2]
    );
    assert!(
        changed.passed_over[2].ends_with("the PR changes its recipe (test/e2e/alpha.toml), so the base side ran PR-chosen settings"),
        "{}",
        changed.passed_over[2]
    );
}

/// A job plan of model `alpha` whose recipe hashes on the base side and the PR's are these.
fn write_job(results: &crate::results::ResultsDir, base: &str, pr: &str) {
    let state = |hash: &str| prgate_gate::job::RecipeState::Parsed {
        path: "test/e2e/alpha.toml".to_owned(),
        hash: hash.to_owned(),
    };
    let job = prgate_gate::job::JobPlan {
        schema_version: prgate_gate::job::SCHEMA_VERSION,
        pr_commit: "b".repeat(40),
        base_commit: "a".repeat(40),
        family: 1,
        targets: vec![prgate_gate::job::Target {
            model: Some("alpha".to_owned()),
            tier: prgate_scope::plan::Tier::Full,
            new: false,
            recipe: prgate_gate::job::Recipes {
                base: state(base),
                pr: state(pr),
                diff: None,
                contract: Default::default(),
                pr_scripts: Vec::new(),
                pr_tests: Vec::new(),
            },
            steps: Vec::new(),
        }],
        accept_narrowing: false,
    };
    results.write_job(&job).expect("the job plan");
}

#[test]
fn a_nodes_file_without_its_drained_nodes() {
    let nodes = "[[node]]\nname = \"mi355x-1\"\nhardware = \"mi355x\"\ngpus = 8\n\n[[node]]\nname = \"mi355x-2\"\nhardware = \"mi355x\"\n";
    let drained = |names: &[&str]| names.iter().map(|name| (*name).to_owned()).collect::<Vec<_>>();
    let filter = |text: &str, drained: &[String]| without_drained(text, "nodes.toml", drained);
    let (text, left_out) = filter(nodes, &drained(&["mi355x-2", "elsewhere"])).expect("a file");
    assert_eq!(left_out, ["mi355x-2"]);
    // The same values, keys in order (comments are not kept).
    assert_eq!(text, "[[node]]\ngpus = 8\nhardware = \"mi355x\"\nname = \"mi355x-1\"\n");
    let (text, left_out) = filter(nodes, &[]).expect("a file");
    assert!(left_out.is_empty());
    assert_eq!(text.matches("[[node]]").count(), 2, "{text}");
    let every = filter(nodes, &drained(&["mi355x-1", "mi355x-2"])).expect_err("none left");
    let every = every.to_string();
    assert!(
        every.starts_with("the nodes nodes.toml: every node is drained (mi355x-1, mi355x-2)"),
        "{every}"
    );
    let none = filter("", &[]).expect_err("no nodes").to_string();
    assert_eq!(none, "the nodes nodes.toml: it has no [[node]] tables");
    assert!(filter("[[node]", &[]).is_err());
    // A key the format lacks is refused here too, not only by the stage that schedules.
    let typo = filter("[[node]]\nname = \"a\"\nhardwre = \"mi355x\"\n", &[]).expect_err("a typo");
    assert!(typo.to_string().contains("unknown field `hardwre`"), "{typo}");
}

/// The canary's commands: amd-smi's ECC answer, and the canary command's exit.
#[derive(Debug)]
struct CanaryCommands {
    ecc: &'static str,
    canary_fails: bool,
}

impl crate::preflight::CommandRunner for CanaryCommands {
    fn run(&self, _log: &str, argv: &[&str]) -> Result<String, crate::preflight::CommandError> {
        let error = |problem: &str| crate::preflight::CommandError {
            program: argv[0].to_owned(),
            problem: problem.to_owned(),
            timed_out_after: None,
        };
        match argv {
            ["amd-smi", "metric", "--ecc", "--json"] => Ok(self.ecc.to_owned()),
            ["/opt/canary", "--quick"] if self.canary_fails => {
                Err(error("exit status: 3: NaN in the matmul"))
            }
            ["/opt/canary", "--quick"] => Ok(String::new()),
            _ => Err(error("cannot start")),
        }
    }
}

#[test]
fn a_canary_admits_a_mended_node_and_strikes_one_that_is_not() {
    const CLEAN: &str =
        r#"[{"gpu": 0, "ecc": {"total_correctable_count": 0, "total_uncorrectable_count": 0}}]"#;
    const BAD: &str =
        r#"[{"gpu": 0, "ecc": {"total_correctable_count": 0, "total_uncorrectable_count": 1}}]"#;
    let cases = [
        (CLEAN, false, "", Ok(()), "mi355x-2: admitted; no strike since it was last admitted"),
        (
            CLEAN,
            false,
            "canary = [\"/opt/canary\", \"--quick\"]",
            Ok(()),
            "mi355x-2: admitted; no strike since it was last admitted",
        ),
        (
            CLEAN,
            true,
            "canary = [\"/opt/canary\", \"--quick\"]\nstrikes = 9",
            Err(
                "the canary command `/opt/canary --quick`: /opt/canary: exit status: 3: NaN in the matmul",
            ),
            "mi355x-2: drained since 2026-12-01T00:00:00Z (by hand); 1 strike(s) since it was last admitted",
        ),
        (
            BAD,
            false,
            "canary = [\"/opt/canary\", \"--quick\"]\nstrikes = 9",
            Err(
                "preflight: GPU 0 (/dev/dri/renderD128): 1 uncorrectable ECC error(s) (amd-smi): its memory has corrupted data; reset the GPU, and replace it if they come back",
            ),
            "mi355x-2: drained since 2026-12-01T00:00:00Z (by hand); 1 strike(s) since it was last admitted",
        ),
    ];
    for (index, (ecc, canary_fails, health, expect, state)) in cases.into_iter().enumerate() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("dev/dri")).expect("dev/dri");
        std::fs::write(root.join("dev/dri/renderD128"), "").expect("a render node");
        std::fs::write(root.join("dev/kfd"), "").expect("kfd");
        let device = root.join("sys/class/drm/renderD128/device");
        std::fs::create_dir_all(&device).expect("sysfs");
        std::fs::write(device.join("mem_info_vram_total"), "1000\n").expect("total");
        std::fs::write(device.join("mem_info_vram_used"), "1\n").expect("used");
        let profile = format!(
            "name = \"mi355x-2\"\nhardware = \"mi355x\"\ncheckpoint-store = \"/data\"\ncache-dir = \"{tmp}/cache\"\nwork-dir = \"{tmp}/work\"\n[gpus]\nids = [0]\nrender-devices = [\"/dev/dri/renderD128\"]\n[image]\nname = \"x:y\"\n[health]\n{health}\n",
            tmp = dir.path().display()
        );
        let node = NodeProfile::parse(&profile, "node.toml").expect("a profile");
        let ledger = Ledger::new(&health_dir(&node), "mi355x-2").expect("a ledger");
        ledger.drain("by hand", at(T0)).expect("a drain");
        let commands = CanaryCommands { ecc, canary_fails };
        let report = Canary { node: &node, ledger: &ledger, commands: &commands, root: &root }
            .run(at(T0 + 60))
            .expect("a canary");
        match expect {
            Ok(()) => assert!(report.passed && report.failures.is_empty(), "{index}: {report:?}"),
            Err(failure) => {
                assert!(!report.passed, "{index}");
                assert_eq!(report.failures, [failure], "{index}");
            }
        }
        assert_eq!(ledger.health().expect("the state").summary(), state, "{index}");
    }
}
