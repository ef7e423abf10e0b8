//! `prgate run` checks every memory release against the GPUs, on a fake machine whose `amd-smi`
//! (a script the node profile names, a real process) reads GPU 0's memory and how busy it is
//! from the simulated servers' fake GPU (`prgate sim-server --vram-dir`, docs/sim-server.md):
//! the servers hold 180 of its 288 GiB each, so two never fit at once, and one that queued work
//! before its release leaves it busy (`--busy-after-release-ms`). A PR server that answers the
//! release and keeps its memory is stopped and loaded again, the design's words say why, and
//! base's server loads with its memory; so is one that frees its memory for the reading and
//! takes it back before its pause, and one whose GPU stays busy once it is paused (base is then
//! measured on an idle GPU); an honest server is still switched by its release, each release
//! read before and after its pause, and so is one whose queued work drains within the settle
//! time; a reading that cannot be made, of the memory or of the activity, stops the server.

use super::servers::{server_events, server_loads};
use super::*;

const GIB: u64 = 1024 * 1024 * 1024;

/// The servers' flags: SGLang's memory API, 180 GiB of the fixture's fake GPU once loaded.
const ON_THE_FAKE_GPU: &str = "--memory-api sglang --vram-dir {work}/gpu --vram-bytes 193273528320";

/// The fake GPU's size: 288 GiB, an MI355X's.
const TOTAL: u64 = 288 * GIB;

/// A fake `amd-smi`: `metric --mem-usage --json` (the preflight's) or `metric --mem-usage
/// --usage --json` (a release check's) of GPU 0, its used memory the sum of what the live
/// simulated servers in the fake GPU's folder hold (`<pid>-<port>` files, their first line)
/// over an idle GPU's 283 MiB, and with `--usage` its `gfx_activity` 100% while a live server's
/// file says its GPU is busy (a second line `busy-until-ms T`, T not yet passed), else 0%;
/// every reading is a line of `readings` (`reading` and its arguments). With `answers-once` in
/// the folder it answers the first reading (the preflight's) and fails from then on; with
/// `no-activity`, it never gives `usage`; with `slow`, it takes that many seconds to exit after
/// it has read the memory (a slow tool). Anything else it is asked (ECC counts, processes) it
/// does not answer, so the preflight does without.
const FAKE_AMD_SMI: &str = r#"#!/bin/sh
gpu='GPU'
case "$*" in
  "metric --mem-usage --json" | "metric --mem-usage --usage --json") ;;
  *) echo "amd-smi: not here: $*" >&2; exit 1 ;;
esac
echo "reading $*" >> "$gpu/readings"
if [ -e "$gpu/answers-once" ] && [ -e "$gpu/answered" ]; then
  echo "amd-smi: GPU 0 does not answer" >&2
  exit 1
fi
: > "$gpu/answered"
used=296747008
busy=0
now=$(date +%s%3N)
for held in "$gpu"/[0-9]*-[0-9]*; do
  [ -f "$held" ] || continue
  name=${held##*/}
  [ -d "/proc/${name%%-*}" ] || continue
  bytes=0 until=
  { read -r bytes; read -r _ until; } < "$held"
  used=$((used + bytes))
  if [ -n "$until" ] && [ "$until" -gt "$now" ]; then busy=100; fi
done
total=$(cat "$gpu/total")
usage=
case "$*" in
  *--usage*) [ -e "$gpu/no-activity" ] ||
    usage=$(printf '"usage": {"gfx_activity": {"value": %d, "unit": "%%"}}, ' "$busy") ;;
esac
printf '[{"gpu": 0, %s"mem_usage": {"total_vram": {"value": %d, "unit": "MB"}, "used_vram": {"value": %d, "unit": "MB"}}}]\n' \
  "$usage" $((total / 1048576)) $((used / 1048576))
if [ -e "$gpu/slow" ]; then sleep "$(cat "$gpu/slow")"; fi
"#;

/// What the fake `amd-smi` does besides reading the memory.
#[derive(Debug, Clone, Copy)]
enum Tool {
    /// Answers every reading at once.
    Answers,
    /// Answers the first reading (the preflight's) and fails from then on.
    AnswersOnce,
    /// Answers every reading with the memory, never with how busy the GPU is.
    NoActivity,
    /// Takes this many seconds to exit after it has read the memory.
    SlowBy(u32),
}

/// The fake machine: GPU 0's render node and `/dev/kfd` under `root` (no sysfs figures: the
/// fake `amd-smi` is the one source), and the fake GPU's folder.
struct FakeGpu {
    root: PathBuf,
    dir: PathBuf,
}

impl FakeGpu {
    /// The machine for `fixture` (one GPU), its node profile's `[health]` naming the fake
    /// `amd-smi`, which does what `tool` says.
    fn new(fixture: &Fixture, tool: Tool) -> FakeGpu {
        let work = fixture.work.path();
        let root = work.join("machine");
        std::fs::create_dir_all(root.join("dev/dri")).expect("dev/dri");
        std::fs::write(root.join("dev/dri/renderD128"), "").expect("the render node");
        std::fs::write(root.join("dev/kfd"), "").expect("kfd");
        let dir = work.join("gpu");
        std::fs::create_dir_all(&dir).expect("the fake GPU");
        std::fs::write(dir.join("total"), format!("{TOTAL}\n")).expect("its size");
        match tool {
            Tool::Answers => {}
            Tool::AnswersOnce => std::fs::write(dir.join("answers-once"), "").expect("the switch"),
            Tool::NoActivity => std::fs::write(dir.join("no-activity"), "").expect("the switch"),
            Tool::SlowBy(seconds) => {
                std::fs::write(dir.join("slow"), format!("{seconds}\n")).expect("the switch");
            }
        }
        let bin = work.join("bin");
        std::fs::create_dir_all(&bin).expect("bin");
        let script = FAKE_AMD_SMI.replace("'GPU'", &format!("'{}'", dir.display()));
        crate::node::executable(&bin.join("amd-smi"), &script);
        let profile = std::fs::read_to_string(&fixture.node).expect("the profile");
        let table = format!(
            "\n[health]\namd-smi = \"{}\"\nrocm-smi = \"{}\"\ndir = \"{}\"\n",
            bin.join("amd-smi").display(),
            bin.join("rocm-smi-absent").display(),
            work.join("health").display(),
        );
        std::fs::write(&fixture.node, profile + &table).expect("the profile's health table");
        FakeGpu { root, dir }
    }

    /// How many times the run read the GPU's memory.
    fn readings(&self) -> usize {
        self.asked().len()
    }

    /// What each reading asked the tool, in order.
    fn asked(&self) -> Vec<String> {
        let readings = std::fs::read_to_string(self.dir.join("readings")).unwrap_or_default();
        readings.lines().map(|line| line.trim_start_matches("reading ").to_owned()).collect()
    }
}

/// A run on the fake GPU, ended.
struct Ran {
    fixture: Fixture,
    gpu: FakeGpu,
    run: Run,
    /// The GPU-time file's `servers`: the design, its loads, wakes and why.
    servers: serde_json::Value,
}

impl Ran {
    /// The design's `why`.
    fn why(&self) -> &str {
        self.servers["why"].as_str().unwrap_or_default()
    }

    /// The design's `why`, the design blocked because a server was stopped to make room.
    fn blocked_why(&self) -> &str {
        assert_eq!(self.servers["design"], "blocked", "{}", self.servers);
        let why = self.why();
        assert!(why.ends_with(", so it is stopped to make room"), "{why}");
        why
    }

    /// `side`'s server log.
    fn server_log(&self, side: &str) -> String {
        let log = format!("logs/alpha.routing.{side}/server.log");
        std::fs::read_to_string(self.fixture.results("results").join(log)).expect("a server log")
    }

    /// Every release counted: each side's server loaded once and switched by SGLang's memory
    /// API (base's twice released, the PR's three times), as without the check
    /// (cli run::servers).
    fn assert_switched_by_releases(&self) {
        let loads = server_loads(&self.fixture, "results");
        assert_eq!(loads, [("base".to_owned(), 1), ("pr".to_owned(), 1)]);
        let released = server_events(&self.fixture, "results", "server-released");
        assert_eq!(released, [("base".to_owned(), 2), ("pr".to_owned(), 3)]);
        assert_eq!(self.servers["design"], "sglang", "{}", self.servers);
        assert_eq!(self.why(), "the base server answered that memory API");
    }

    /// Neither side's release counted: no `server-released` event, and each side's server
    /// loaded again (stopped at its first release).
    fn assert_no_release_counted(&self) {
        let released = server_events(&self.fixture, "results", "server-released");
        assert_eq!(released, Vec::<(String, usize)>::new());
        let loads = server_loads(&self.fixture, "results");
        assert!(loads.iter().all(|(_, loads)| *loads >= 2), "{loads:?}");
    }

    /// No record of the run is `not-run` (both sides' servers loaded and served), both sides'
    /// routing was seen, and no process is left.
    fn assert_every_step_ran(&self) {
        let fixture = &self.fixture;
        for name in evidence_names(&fixture.evidence("results")) {
            let record = fixture.record("results", name.trim_end_matches(".json"));
            assert_ne!(record["outcome"]["kind"], "not-run", "{name}: {record}");
        }
        for side in ["base", "pr"] {
            let routing = fixture.record("results", &format!("alpha.routing.{side}"));
            assert_eq!(routing["outcome"]["routed"], true, "{routing}");
        }
        assert_eq!(settle(fixture), Vec::<String>::new(), "processes left after the run");
    }
}

/// The fixture on one GPU, its servers on the fake GPU, with the PR's change `pr`, run to its
/// end with the preflight on and the fake `amd-smi` doing what `tool` says.
fn run_on_the_fake_gpu(pr: fn(&crate::support::Repo), tool: Tool) -> Ran {
    let fixture = Fixture::new(&Sample {
        gate: TWO_PAIRS,
        gpus: 1,
        server_flags: ON_THE_FAKE_GPU,
        pr,
        ..Sample::default()
    });
    let gpu = FakeGpu::new(&fixture, tool);
    let run = fixture.run_with_preflight("results", &gpu.root);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let time = std::fs::read_to_string(fixture.results("results").join("gpu-time/alpha.json"))
        .expect("the GPU-time file");
    let time: serde_json::Value = serde_json::from_str(&time).expect("JSON");
    let servers = time["servers"].clone();
    Ran { fixture, gpu, run, servers }
}

/// The PR's change: the model's code, and its server's command given `flag` (the PR's own
/// side, which it may change).
fn with_server_flag(repo: &crate::support::Repo, flag: &str) {
    let path = repo.path().join("test/e2e/alpha.toml");
    let recipe = std::fs::read_to_string(&path).expect("the recipe");
    let changed = recipe.replace("--vram-bytes", &format!("{flag} --vram-bytes"));
    repo.write("test/e2e/alpha.toml", &changed).write("pkg/models/alpha/layer.py", "# faster\n");
}

/// The PR's change: the model's code only.
fn faster(repo: &crate::support::Repo) {
    repo.write("pkg/models/alpha/layer.py", "# alpha, faster\n");
}

#[test]
fn a_pr_server_that_keeps_its_memory_after_the_release_is_stopped_and_base_loads_with_its_own() {
    // The PR's server answers the release and keeps its 180 GiB.
    let ran =
        run_on_the_fake_gpu(|repo| with_server_flag(repo, "--release-keeps-memory"), Tool::Answers);
    // Its release did not count: stopped, never released again, loaded again when needed.
    assert_eq!(ran.servers["design"], "blocked", "{}", ran.servers);
    let why = ran.why();
    assert!(
        why.starts_with("the PR server answered the memory release but kept its GPU memory (GPU 0: 180.3 GiB of 288.0 GiB used (amd-smi) "),
        "{why}"
    );
    assert!(
        why.ends_with(
            " s after the release, where a released server must leave 90% free), so it is stopped to make room"
        ),
        "{why}"
    );
    assert!(ran.run.stderr.contains(why), "{}", ran.run.stderr);
    let released = server_events(&ran.fixture, "results", "server-released");
    assert!(!released.is_empty(), "base's releases count");
    assert!(released.iter().all(|(side, _)| side == "base"), "{released:?}");
    assert_eq!(ran.server_log("pr").matches("but keeps its GPU memory").count(), 1);
    // Base's server loaded once, beside no PR server holding memory, and every step ran on
    // both sides; its own honest releases still switch it (woken, never reloaded). Without the
    // check it loads beside the PR's 180 GiB: out of memory, and every base step a crash.
    let loads = server_loads(&ran.fixture, "results");
    assert_eq!(loads[0], ("base".to_owned(), 1), "{loads:?}");
    assert!(loads[1].1 >= 2, "{loads:?}");
    assert!(!server_events(&ran.fixture, "results", "server-woken").is_empty());
    assert!(!ran.server_log("base").contains("out of memory"), "{}", ran.server_log("base"));
    ran.assert_every_step_ran();
}

#[test]
fn an_honest_server_is_still_switched_by_its_release_and_every_release_is_read() {
    let ran = run_on_the_fake_gpu(faster, Tool::Answers);
    // As without the check (cli run::servers): each side loaded once, switched by wakes.
    ran.assert_switched_by_releases();
    let words = "switched by SGLang's memory release and resume";
    assert!(ran.run.stderr.contains(words), "{}", ran.run.stderr);
    // The GPU read once by the preflight, and twice a release: after it (freed at once) and
    // once the server is paused.
    assert_eq!(ran.gpu.readings(), 1 + 2 * 5);
    ran.assert_every_step_ran();
}

#[test]
fn a_pr_server_that_takes_its_memory_back_before_its_pause_is_stopped() {
    // The PR's server gives its memory back for the reading and takes it again a second later;
    // the tool takes 3 s to exit after it has read the memory, so the server is paused after
    // it took the memory back: only the reading once it is paused sees it.
    let retakes = |repo: &crate::support::Repo| {
        with_server_flag(repo, "--retake-memory-after-ms 1000");
    };
    let ran = run_on_the_fake_gpu(retakes, Tool::SlowBy(3));
    assert_eq!(ran.servers["design"], "blocked", "{}", ran.servers);
    assert_eq!(
        ran.why(),
        "the PR server took its GPU memory back after its release (GPU 0: 180.3 GiB of 288.0 GiB used (amd-smi) once it was paused, where a released server must leave 90% free), so it is stopped to make room"
    );
    let taken = "takes its GPU memory back unasked (retake-memory-after-ms): done";
    assert!(ran.server_log("pr").contains(taken), "{}", ran.server_log("pr"));
    // Base's server loaded once, beside no PR server holding memory; every step ran.
    assert_eq!(server_loads(&ran.fixture, "results")[0], ("base".to_owned(), 1));
    ran.assert_every_step_ran();
}

#[test]
fn a_release_whose_memory_cannot_be_read_stops_the_server() {
    // The tool answers the preflight, then no more; the machine has no sysfs figures. The GPU
    // is read by the preflight, then once a release (an unreadable reading is not waited for).
    unreadable_readings_stop_both_servers(
        Tool::AnswersOnce,
        "the PR server's memory release could not be checked, its GPUs' memory unreadable (GPU 0: ",
        &["amd-smi: GPU 0 does not answer", "sysfs: cannot read"],
        1 + 2,
    );
}

#[test]
fn a_pr_server_that_leaves_its_gpus_busy_after_its_release_is_stopped_and_base_is_measured() {
    // The PR's server frees its memory at the release but leaves the GPU busy for ten minutes,
    // paused or not: work it queued before it answered.
    let busy = |repo: &crate::support::Repo| {
        with_server_flag(repo, "--busy-after-release-ms 600000");
    };
    let ran = run_on_the_fake_gpu(busy, Tool::Answers);
    // Its release did not count: stopped (its queued work with it), never released again.
    let why = ran.blocked_why();
    assert!(
        why.starts_with("the PR server kept its GPUs busy after its release, with work queued before its pause (GPU 0: 100% busy (amd-smi) "),
        "{why}"
    );
    assert!(
        why.ends_with(
            " s after it was paused, where a released server's GPUs must be at most 2% busy), so it is stopped to make room"
        ),
        "{why}"
    );
    assert!(ran.run.stderr.contains(why), "{}", ran.run.stderr);
    let released = server_events(&ran.fixture, "results", "server-released");
    assert!(!released.is_empty(), "base's releases count");
    assert!(released.iter().all(|(side, _)| side == "base"), "{released:?}");
    assert_eq!(ran.server_log("pr").matches("leaves its GPU busy for 600000 ms").count(), 1);
    // The busy GPU was read again once the PR's server was paused, for the settle time (every
    // second for 10 s: 10 readings or more), before it was stopped.
    assert!(ran.gpu.readings() >= 1 + 2 + 10, "{:?}", ran.gpu.asked());
    // Base's server loaded once and every step ran on both sides, base's measured once the
    // PR's server was gone; its own honest releases still switch it.
    let loads = server_loads(&ran.fixture, "results");
    assert_eq!(loads[0], ("base".to_owned(), 1), "{loads:?}");
    assert!(loads[1].1 >= 2, "{loads:?}");
    assert!(!server_events(&ran.fixture, "results", "server-woken").is_empty());
    ran.assert_every_step_ran();
}

#[test]
fn a_server_whose_queued_work_drains_within_the_settle_time_is_still_switched_by_its_release() {
    // The PR's server leaves the GPU busy for 2.5 s after each release: read again once it is
    // paused until the GPU is idle, and switched by its release.
    let drains = |repo: &crate::support::Repo| {
        with_server_flag(repo, "--busy-after-release-ms 2500");
    };
    let ran = run_on_the_fake_gpu(drains, Tool::Answers);
    ran.assert_switched_by_releases();
    // The preflight asked for the memory; every release check for the memory and the activity
    // in one call: twice a release (before the pause, once paused), and the PR's three
    // releases at least twice more each, while the GPU was busy (2.5 s, read every second).
    let asked = ran.gpu.asked();
    assert_eq!(asked[0], "metric --mem-usage --json");
    assert!(asked[1..].iter().all(|args| args == "metric --mem-usage --usage --json"), "{asked:?}");
    assert!(asked.len() >= 1 + 2 * 5 + 3 * 2, "{asked:?}");
    ran.assert_every_step_ran();
}

#[test]
fn a_release_whose_gpus_activity_cannot_be_read_stops_the_server() {
    // The tool gives the memory and never how busy the GPU is; the machine has no sysfs. The
    // GPU is read by the preflight, then twice a release (its memory freed before the pause,
    // its activity unreadable once paused, not waited for).
    unreadable_readings_stop_both_servers(
        Tool::NoActivity,
        "the PR server's memory release could not be checked, its GPUs' activity unreadable (GPU 0: amd-smi gives no activity; sysfs: cannot read ",
        &["/sys/class/drm/renderD128/device/gpu_busy_percent: No such file"],
        1 + 2 * 2,
    );
}

/// A run on the fake GPU whose tool does what `tool` says, the PR changing the model's code
/// only: the design's words start with `why_starts` and say each of `why_says`; neither side's
/// release counted (each is stopped at its first, and loaded again); the GPU was read
/// `readings` times; every step ran.
fn unreadable_readings_stop_both_servers(
    tool: Tool,
    why_starts: &str,
    why_says: &[&str],
    readings: usize,
) {
    let ran = run_on_the_fake_gpu(faster, tool);
    let why = ran.blocked_why();
    assert!(why.starts_with(why_starts), "{why}");
    for says in why_says {
        assert!(why.contains(says), "{why}");
    }
    assert!(why.ends_with("), so it is stopped to make room"), "{why}");
    ran.assert_no_release_counted();
    assert_eq!(ran.gpu.readings(), readings);
    ran.assert_every_step_ran();
}
