//! Real processes, process groups, signals and sockets through `prgate_runner::process`.
//!
//! Whether a process is left is read from `/proc/PID/stat` (a zombie waiting for its parent
//! counts as gone: it runs nothing and holds no socket).

#![expect(clippy::disallowed_methods, reason = "the tests start the real processes they supervise")]

use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use prgate_runner::process::{
    ChildGroup, Environment, Finished, HealthError, Limits, PortError, PortLease, PortRange,
    ProcessError, ProcessSpec, StallLimit, group_members, live_groups, stop_all_on_signal,
    wait_healthy,
};

const SIGINT: i32 = 2;
const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

fn spec(dir: &Path, argv: &[&str]) -> ProcessSpec {
    let mut spec = ProcessSpec::new(argv, dir, dir.join("logs").join("child.log"));
    spec.grace = Duration::from_millis(400);
    spec
}

fn shell(dir: &Path, script: &str) -> ProcessSpec {
    spec(dir, &["sh", "-c", script])
}

/// Whether `pid` is a process that still runs (not gone, not a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_ascii_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

fn wait_for_log(log: &Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(Instant::now() < deadline, "{needle:?} never appeared in the log: {text:?}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// The members of a group once it has at least `count` of them.
fn members_when(pgid: u32, count: usize) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let members = group_members(i32::try_from(pgid).expect("a pid"));
        if members.len() >= count {
            return members;
        }
        assert!(Instant::now() < deadline, "group {pgid} has only {members:?}");
        thread::sleep(Duration::from_millis(10));
    }
}

fn assert_all_gone(pids: &[u32]) {
    let left: Vec<u32> = pids.iter().copied().filter(|pid| running(*pid)).collect();
    assert!(left.is_empty(), "still running: {left:?}");
}

#[test]
fn a_plain_child_stops_on_term() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut child = ChildGroup::spawn(&spec(dir.path(), &["sleep", "100"])).expect("it starts");
    let pid = child.id();
    assert!(live_groups().contains(&pid));
    let stopped = child.stop().expect("it stops");
    assert!(!stopped.killed);
    assert_eq!(stopped.status.signal(), Some(SIGTERM));
    assert!(!running(pid));
    assert!(!live_groups().contains(&pid));
    assert_eq!(child.stop().expect("a second stop answers the same"), stopped);
}

#[test]
fn a_frozen_group_does_nothing_until_thawed_and_a_frozen_group_stops_on_term() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ticks = dir.path().join("ticks");
    let script = format!("while :; do printf x >> {}; sleep 0.02; done", ticks.display());
    // A long grace: ending on `SIGTERM` in it holds however loaded the machine is.
    let mut spec = shell(dir.path(), &script);
    spec.grace = Duration::from_secs(20);
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    let count = || std::fs::read_to_string(&ticks).unwrap_or_default().len();
    let deadline = Instant::now() + Duration::from_secs(20);
    while count() < 3 {
        assert!(Instant::now() < deadline, "it never ticked");
        thread::sleep(Duration::from_millis(10));
    }
    child.freeze().expect("it freezes");
    thread::sleep(Duration::from_millis(100));
    let frozen = count();
    thread::sleep(Duration::from_millis(400));
    assert_eq!(count(), frozen, "a frozen group kept working");
    child.thaw().expect("it thaws");
    let deadline = Instant::now() + Duration::from_secs(20);
    while count() <= frozen {
        assert!(Instant::now() < deadline, "it never ticked again");
        thread::sleep(Duration::from_millis(10));
    }
    // Frozen again, it still ends on `SIGTERM` within its grace: no `SIGKILL` needed.
    child.freeze().expect("it freezes again");
    let stopped = child.stop().expect("it stops");
    assert!(!stopped.killed, "{stopped:?}");
    assert_eq!(stopped.status.signal(), Some(SIGTERM));
}

#[test]
fn a_child_that_ignores_term_is_killed_after_the_grace_period() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let spec = shell(dir.path(), "trap '' TERM; echo ready; sleep 100; echo survived");
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    wait_for_log(&spec.log, "ready");
    let members = members_when(child.id(), 2);
    let started = Instant::now();
    let stopped = child.stop().expect("it stops");
    assert!(stopped.killed, "SIGKILL was needed");
    assert_eq!(stopped.status.signal(), Some(SIGKILL));
    assert!(started.elapsed() >= spec.grace, "it had its grace period first");
    assert!(started.elapsed() < spec.grace + Duration::from_secs(5));
    assert_all_gone(&members);
    assert!(!std::fs::read_to_string(&spec.log).expect("the log").contains("survived"));
}

#[test]
fn grandchildren_are_stopped_with_the_group() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let spec = shell(dir.path(), "sleep 100 & sleep 100 & echo started; wait");
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    wait_for_log(&spec.log, "started");
    let members = members_when(child.id(), 3);
    assert!(members.contains(&child.id()));
    let stopped = child.stop().expect("it stops");
    assert!(!stopped.killed);
    assert_all_gone(&members);
    assert!(group_members(i32::try_from(child.id()).expect("a pid")).is_empty());
}

#[test]
fn a_timeout_stops_the_group() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let spec = shell(dir.path(), "sleep 100 & sleep 100");
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    let members = members_when(child.id(), 2);
    let started = Instant::now();
    let finished = child.wait_with_timeout(Duration::from_millis(300)).expect("it is waited for");
    let Finished::TimedOut(stopped) = finished else { panic!("no timeout: {finished:?}") };
    assert!(stopped.status.signal().is_some());
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_all_gone(&members);
}

/// Limits of a long wall clock (a minute) and a stall limit of `stall_seconds`, watching the
/// child's log and `out`.
fn stall_limits(spec: &ProcessSpec, out: &Path, stall_seconds: u64) -> Limits {
    let stall = StallLimit::try_from(Duration::from_secs(stall_seconds)).expect("in bounds");
    Limits {
        timeout: Duration::from_secs(60),
        stall: Some((stall, vec![spec.log.clone(), out.to_path_buf()])),
    }
}

#[test]
fn a_child_that_prints_then_goes_silent_is_stopped_at_its_stall_limit_not_its_timeout() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).expect("an output folder");
    let spec = shell(dir.path(), "echo working; sleep 100 & sleep 100");
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    let members = members_when(child.id(), 2);
    let finished = child.wait_with_limits(&stall_limits(&spec, &out, 1)).expect("waited for");
    let Finished::Stalled { stopped, silent } = finished else {
        panic!("not stopped as stalled: {finished:?}")
    };
    assert_eq!(silent, Duration::from_secs(1), "the limit that ended it");
    assert!(stopped.status.signal().is_some(), "it was signalled");
    assert_eq!(wait_for_log(&spec.log, "working"), "working\n");
    assert_all_gone(&members);
}

#[test]
fn a_child_that_keeps_printing_slowly_outlives_its_stall_limit() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).expect("an output folder");
    // Fifteen lines 0.2 s apart: three seconds in all, past the stall limit of two, with never
    // more than a tenth of it between two lines.
    let spec = shell(dir.path(), "for i in $(seq 15); do echo line $i; sleep 0.2; done");
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    let finished = child.wait_with_limits(&stall_limits(&spec, &out, 2)).expect("waited for");
    let Finished::Exited(status) = finished else { panic!("it was stopped: {finished:?}") };
    assert!(status.success());
    let log = std::fs::read_to_string(&spec.log).expect("the log");
    assert_eq!(log.lines().count(), 15, "{log}");
}

#[test]
fn files_written_in_the_output_folder_are_progress_too() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("run")).expect("an output folder");
    // Silent on its log: a result file a line longer every 0.2 s, three seconds in all.
    let script = format!(
        "for i in $(seq 15); do echo $i >> {}/run/results.jsonl; sleep 0.2; done",
        out.display()
    );
    let spec = shell(dir.path(), &script);
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    let finished = child.wait_with_limits(&stall_limits(&spec, &out, 2)).expect("waited for");
    assert!(matches!(finished, Finished::Exited(status) if status.success()), "{finished:?}");
}

#[test]
fn progress_does_not_extend_the_wall_clock_limit() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).expect("an output folder");
    let spec = shell(dir.path(), "while true; do echo busy; sleep 0.1; done");
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    let mut limits = stall_limits(&spec, &out, 30);
    limits.timeout = Duration::from_millis(500);
    let finished = child.wait_with_limits(&limits).expect("waited for");
    assert!(matches!(finished, Finished::TimedOut(_)), "{finished:?}");
}

#[test]
fn an_exit_is_reported_and_what_it_left_behind_is_stopped() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let spec = shell(dir.path(), "sleep 100 & echo \"left $!\"; exit 3");
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    let finished = child.wait_with_timeout(Duration::from_secs(20)).expect("it is waited for");
    let Finished::Exited(status) = finished else { panic!("no exit: {finished:?}") };
    assert_eq!(status.code(), Some(3));
    let log = wait_for_log(&spec.log, "left ");
    let left: u32 = log
        .trim()
        .strip_prefix("left ")
        .and_then(|pid| pid.parse().ok())
        .expect("the background pid is logged");
    assert!(!running(left), "the background sleep {left} was stopped");
}

#[test]
fn dropping_a_child_stops_its_group() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let child = ChildGroup::spawn(&shell(dir.path(), "sleep 100 & sleep 100")).expect("it starts");
    let pid = child.id();
    let members = members_when(pid, 2);
    drop(child);
    assert_all_gone(&members);
    assert!(!live_groups().contains(&pid));
}

#[test]
fn the_environment_is_only_what_is_given() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let script = "echo \"$GREETING|${HOME-unset}|$(pwd)\"";
    let mut spec = spec(dir.path(), &["/bin/sh", "-c", script]);
    spec.env = Environment::empty().set("GREETING", "hi");
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    assert!(matches!(child.wait_with_timeout(Duration::from_secs(20)), Ok(Finished::Exited(_))));
    let cwd = dir.path().canonicalize().expect("the directory exists");
    let expect = format!("hi|unset|{}\n", cwd.display());
    assert_eq!(std::fs::read_to_string(&spec.log).expect("the log"), expect);

    // A variable of the runner's reaches the child only when it is listed; the log is
    // appended to.
    spec.env = Environment::empty().inherit("HOME");
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    assert!(matches!(child.wait_with_timeout(Duration::from_secs(20)), Ok(Finished::Exited(_))));
    let home = std::env::var("HOME").unwrap_or_else(|_| "unset".to_owned());
    let expect = format!("{expect}|{home}|{}\n", cwd.display());
    assert_eq!(std::fs::read_to_string(&spec.log).expect("the log"), expect);
}

#[test]
fn what_cannot_start_says_so() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let empty: &[&str] = &[];
    let error = ChildGroup::spawn(&spec(dir.path(), empty)).expect_err("nothing to start");
    assert!(matches!(error, ProcessError::EmptyCommand));
    let error = ChildGroup::spawn(&spec(dir.path(), &["/nonexistent/prgate-server"]))
        .expect_err("no such program");
    assert!(error.to_string().contains("/nonexistent/prgate-server"), "{error}");
}

fn lock_dir(dir: &Path) -> PathBuf {
    dir.join("port-locks")
}

#[test]
fn a_server_passes_the_health_gate_and_its_port_is_free_after_stop() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let lease = PortLease::acquire(&lock_dir(dir.path()), PortRange::DEFAULT).expect("a port");
    let port = lease.port().to_string();
    let mut spec =
        spec(dir.path(), &["python3", "-u", "-m", "http.server", &port, "--bind", "127.0.0.1"]);
    spec.grace = Duration::from_secs(5);
    let mut server = ChildGroup::spawn(&spec).expect("the server starts");
    let url = format!("http://127.0.0.1:{port}/");
    let healthy = wait_healthy(&url, Duration::from_secs(60), &mut server)
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(healthy.attempts >= 1);
    let members = members_when(server.id(), 1);
    let stopped = server.stop().expect("the server stops");
    assert!(!stopped.killed);
    assert_all_gone(&members);
    TcpListener::bind((Ipv4Addr::LOCALHOST, lease.port())).expect("nothing listens on the port");
}

#[test]
fn a_server_that_exits_fails_the_health_gate_at_once_with_its_status_and_log() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let lease = PortLease::acquire(&lock_dir(dir.path()), PortRange::DEFAULT).expect("a port");
    let script = "echo loading weights; echo 'RuntimeError: no GPU found' >&2; exit 7";
    let mut server = ChildGroup::spawn(&shell(dir.path(), script)).expect("it starts");
    let started = Instant::now();
    let url = format!("http://127.0.0.1:{}/health", lease.port());
    let error = wait_healthy(&url, Duration::from_secs(120), &mut server)
        .expect_err("a dead server is not healthy");
    assert!(started.elapsed() < Duration::from_secs(10), "it failed fast");
    let HealthError::Exited { status, tail, .. } = &error else { panic!("{error}") };
    assert_eq!(status.code(), Some(7));
    assert_eq!(tail, "loading weights\nRuntimeError: no GPU found");
    assert!(error.to_string().contains("exit status: 7"), "{error}");
}

#[test]
fn a_server_that_never_answers_times_out_with_its_log() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let lease = PortLease::acquire(&lock_dir(dir.path()), PortRange::DEFAULT).expect("a port");
    let spec = shell(dir.path(), "echo still loading; sleep 100");
    let mut server = ChildGroup::spawn(&spec).expect("it starts");
    let pid = server.id();
    wait_for_log(&spec.log, "still loading");
    let url = format!("http://127.0.0.1:{}/health", lease.port());
    let error =
        wait_healthy(&url, Duration::from_millis(800), &mut server).expect_err("nothing answers");
    let HealthError::TimedOut { tail, last, .. } = &error else { panic!("{error}") };
    assert_eq!(tail, "still loading");
    assert!(!last.is_empty());
    assert!(running(pid), "the health gate leaves the decision to stop to the caller");
    drop(server);
    assert!(!running(pid));
}

#[test]
fn leases_never_share_a_port_and_skip_ports_in_use() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let locks = lock_dir(dir.path());
    // Two neighbouring ports that are free now, outside the default range the other tests of
    // this binary lease from at the same time (and below the kernel's ephemeral ports).
    let first = (30_000..31_000)
        .find(|port: &u16| {
            TcpListener::bind((Ipv4Addr::UNSPECIFIED, *port)).is_ok()
                && TcpListener::bind((Ipv4Addr::UNSPECIFIED, *port + 1)).is_ok()
        })
        .expect("two free ports");
    let range = PortRange::new(first, first + 1).expect("a range");
    let _in_use = TcpListener::bind((Ipv4Addr::LOCALHOST, first)).expect("the port is taken");
    let lease = PortLease::acquire(&locks, range).expect("the other port");
    assert_eq!(lease.port(), first + 1);
    let error = PortLease::acquire(&locks, range).expect_err("both ports are taken");
    assert!(matches!(error, PortError::Exhausted { .. }), "{error}");
    drop(lease);
    let again = PortLease::acquire(&locks, range).expect("a released port is free again");
    assert_eq!(again.port(), first + 1);

    let leases: Vec<PortLease> =
        (0..20).map(|_| PortLease::acquire(&locks, PortRange::DEFAULT).expect("a port")).collect();
    let mut ports: Vec<u16> = leases.iter().map(PortLease::port).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), leases.len());
    assert!(matches!(PortRange::new(10, 9), Err(PortError::EmptyRange { .. })));
}

/// Starts this test binary again as the runner test `test` plays, with `variable` set to
/// `dir`, and waits until it has written its groups' ids (`<dir>/groups`): the runner and them.
fn spawn_playing_runner(test: &str, variable: &str, dir: &Path) -> (std::process::Child, String) {
    let mut runner = Command::new(std::env::current_exe().expect("the test binary"))
        .args([test, "--exact", "--nocapture"])
        .env(variable, dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the runner starts");
    let ready = dir.join("groups");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready.exists() {
        if Instant::now() > deadline || runner.try_wait().ok().flatten().is_some() {
            let _ = runner.kill();
            panic!("the runner never started its children");
        }
        thread::sleep(Duration::from_millis(20));
    }
    (runner, std::fs::read_to_string(&ready).expect("the groups"))
}

/// Set in the copy of this test binary that plays the runner getting Ctrl-C.
const SIGNALLED_RUNNER: &str = "PRGATE_TEST_SIGNALLED_RUNNER";

#[test]
fn ctrl_c_stops_every_live_group_then_the_runner() {
    if let Some(dir) = std::env::var_os(SIGNALLED_RUNNER) {
        play_the_signalled_runner(Path::new(&dir));
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let test = "ctrl_c_stops_every_live_group_then_the_runner";
    let (mut runner, groups) = spawn_playing_runner(test, SIGNALLED_RUNNER, dir.path());
    let members: Vec<u32> = groups
        .split_ascii_whitespace()
        .flat_map(|pgid| group_members(pgid.parse().expect("a group id")))
        .collect();
    assert!(members.len() >= 4, "two groups of two: {members:?}");

    let sent = Command::new("kill").args(["-INT", &runner.id().to_string()]).status();
    assert!(sent.is_ok_and(|status| status.success()));
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = runner.try_wait().expect("the runner is waited for") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = runner.kill();
            panic!("the runner did not stop on SIGINT");
        }
        thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.signal(), Some(SIGINT), "the runner died of the signal: {status}");
    assert_all_gone(&members);
}

/// The runner's side: two groups, one of which ignores SIGTERM, then wait for the signal.
fn play_the_signalled_runner(dir: &Path) -> ! {
    stop_all_on_signal().expect("the watcher starts");
    let plain = ChildGroup::spawn(&shell(dir, "sleep 100 & sleep 100")).expect("it starts");
    let stubborn_spec = shell(dir, "trap '' TERM; sleep 100 & sleep 100");
    let stubborn = ChildGroup::spawn(&stubborn_spec).expect("it starts");
    members_when(plain.id(), 2);
    members_when(stubborn.id(), 2);
    let groups = dir.join("groups");
    let temporary = dir.join("groups.tmp");
    std::fs::write(&temporary, format!("{} {}", plain.id(), stubborn.id())).expect("written");
    std::fs::rename(&temporary, &groups).expect("renamed");
    thread::sleep(Duration::from_secs(60));
    panic!("the signal never came");
}

/// Set in the copy of this test binary that plays the runner killed with `SIGKILL`.
const KILLED_RUNNER: &str = "PRGATE_TEST_KILLED_RUNNER";

#[test]
fn a_runner_killed_with_sigkill_leaves_no_group_running() {
    if let Some(dir) = std::env::var_os(KILLED_RUNNER) {
        play_the_signalled_runner(Path::new(&dir));
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let test = "a_runner_killed_with_sigkill_leaves_no_group_running";
    let (mut runner, groups) = spawn_playing_runner(test, KILLED_RUNNER, dir.path());
    let pgids: Vec<i32> =
        groups.split_ascii_whitespace().map(|pgid| pgid.parse().expect("a group id")).collect();
    let members: Vec<u32> = pgids.iter().flat_map(|pgid| group_members(*pgid)).collect();
    assert!(members.len() >= 4, "two groups of two: {members:?}");

    // SIGKILL: the runner cannot catch it, stop its children or leave word.
    runner.kill().expect("the runner is killed");
    let status = runner.wait().expect("the runner is waited for");
    assert_eq!(status.signal(), Some(9), "the runner died of SIGKILL: {status}");
    // The watchdogs stop both groups (one of them ignores SIGTERM: it takes its grace period,
    // 400 ms here, then SIGKILL). The wait is generous; what is asserted is that they go.
    let deadline = Instant::now() + Duration::from_secs(60);
    while members.iter().any(|pid| running(*pid)) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    assert_all_gone(&members);
}

#[test]
fn a_timeout_too_large_to_add_to_an_instant_does_not_panic() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut child = ChildGroup::spawn(&shell(dir.path(), "exit 4")).expect("it starts");
    let finished = child.wait_with_timeout(Duration::MAX).expect("it is waited for");
    let Finished::Exited(status) = finished else { panic!("no exit: {finished:?}") };
    assert_eq!(status.code(), Some(4));
}

/// The log a capped log writes for `output`: its first and last MiB (written here as numbers,
/// not as the crate's constants, so that a change of either shows), with the cut line between.
fn capped(output: &[u8]) -> Vec<u8> {
    const MIB: usize = 1_048_576;
    if output.len() <= 2 * MIB {
        return output.to_vec();
    }
    let (head, rest) = output.split_at(MIB);
    let (cut, tail) = rest.split_at(rest.len() - MIB);
    let lines = cut.iter().filter(|byte| **byte == b'\n').count();
    let mut log = head.to_vec();
    if !head.ends_with(b"\n") {
        log.push(b'\n');
    }
    let grouped = |number: usize| {
        let digits = number.to_string();
        let mut out = String::new();
        for (index, digit) in digits.chars().enumerate() {
            if index > 0 && (digits.len() - index).is_multiple_of(3) {
                out.push(',');
            }
            out.push(digit);
        }
        out
    };
    log.extend_from_slice(
        format!(
            "[prgate: {} bytes in {} lines cut here; the log keeps its first 1 MiB and its last 1 MiB]\n",
            grouped(cut.len()),
            grouped(lines)
        )
        .as_bytes(),
    );
    log.extend_from_slice(tail);
    log
}

/// Lines `line 0000001` to `line <count>`, 13 bytes each.
fn numbered_lines(count: usize) -> Vec<u8> {
    (1..=count).flat_map(|number| format!("line {number:07}\n").into_bytes()).collect()
}

#[test]
fn a_flood_keeps_its_first_and_last_lines_with_the_cut_between() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // 5 MiB and a little more of numbered lines.
    let count = 403_300;
    let script =
        format!("awk 'BEGIN {{ for (i = 1; i <= {count}; i++) printf \"line %07d\\n\", i }}'");
    let spec = shell(dir.path(), &script);
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    let finished = child.wait_with_timeout(Duration::from_secs(120)).expect("waited for");
    assert!(matches!(finished, Finished::Exited(status) if status.success()), "{finished:?}");
    let log = std::fs::read(&spec.log).expect("the log");
    let output = numbered_lines(count);
    assert_eq!(output.len(), 5_242_900);
    let text = String::from_utf8_lossy(&log);
    assert!(text.starts_with("line 0000001\nline 0000002\n"), "{}", &text[..40]);
    assert!(text.ends_with("line 0403299\nline 0403300\n"));
    // 1 MiB is 80,659 lines and 9 bytes of line 80,660; the last 1 MiB starts 4 bytes into a
    // line: 3,145,748 bytes are cut, with 241,981 newlines.
    assert!(
        text.contains("\nline 0080\n[prgate: 3,145,748 bytes in 241,981 lines cut here; the log keeps its first 1 MiB and its last 1 MiB]\n 0322641\nline 0322642\n"),
        "{}",
        &text[1_048_500..1_048_800]
    );
    assert!(log == capped(&output), "the log is the output's head, the cut line and its tail");
}

#[test]
fn a_short_log_is_written_unchanged() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let spec = shell(dir.path(), "printf 'one\\ntwo\\n'; printf 'three' >&2");
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    child.wait_with_timeout(Duration::from_secs(20)).expect("waited for");
    assert_eq!(std::fs::read_to_string(&spec.log).expect("the log"), "one\ntwo\nthree");
    // Exactly the first and the last MiB of the second command (7 bytes and 2,097,145): nothing
    // is cut, so there is no cut line; one byte more would be cut.
    let spec = shell(dir.path(), "echo second; head -c 2097145 /dev/zero | tr '\\0' z");
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    child.wait_with_timeout(Duration::from_secs(20)).expect("waited for");
    let log = std::fs::read(&spec.log).expect("the log");
    let mut expect = b"one\ntwo\nthreesecond\n".to_vec();
    expect.extend_from_slice(&[b'z'; 2_097_152 - 7]);
    assert!(log == expect, "the second command's output is added unchanged, cut nowhere");
}

#[test]
fn a_child_killed_mid_flood_still_gets_its_tail() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let script = "yes flood | head -c 3145728; echo 'last words before the crash'; kill -KILL $$";
    let spec = shell(dir.path(), script);
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    let finished = child.wait_with_timeout(Duration::from_secs(60)).expect("waited for");
    assert!(
        matches!(finished, Finished::Exited(status) if status.signal() == Some(SIGKILL)),
        "{finished:?}"
    );
    let mut output = b"flood\n".repeat(3_145_728 / 6 + 1);
    output.truncate(3_145_728);
    output.extend_from_slice(b"last words before the crash\n");
    let log = std::fs::read(&spec.log).expect("the log");
    assert!(log == capped(&output), "{}", String::from_utf8_lossy(&log[1_048_570..1_048_700]));
}

#[test]
fn a_server_that_floods_then_exits_fails_the_health_gate_with_its_last_lines() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let lease = PortLease::acquire(&lock_dir(dir.path()), PortRange::DEFAULT).expect("a port");
    let script = "yes warning | head -c 4000000; echo 'RuntimeError: out of memory' >&2; exit 7";
    let mut server = ChildGroup::spawn(&shell(dir.path(), script)).expect("it starts");
    let url = format!("http://127.0.0.1:{}/health", lease.port());
    let error = wait_healthy(&url, Duration::from_secs(120), &mut server)
        .expect_err("a dead server is not healthy");
    let HealthError::Exited { tail, .. } = &error else { panic!("{error}") };
    assert_eq!(tail.lines().last(), Some("RuntimeError: out of memory"), "{tail}");
    assert_eq!(tail.lines().count(), 40);
}

#[test]
fn a_stopped_flood_keeps_its_tail_and_a_live_reader_sees_the_latest_lines() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let script = "yes flood | head -c 3145728; echo 'now waiting'; sleep 100 & wait";
    let spec = shell(dir.path(), script);
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    // While it runs: the head, the cut so far and its latest 64 KiB, once its output pauses.
    let live = wait_for_log(&spec.log, "now waiting\n");
    assert!(live.ends_with("flood\nnow waiting\n"), "{}", &live[live.len() - 40..]);
    let cut_line = live.lines().find(|line| line.starts_with("[prgate:")).expect("a cut line");
    assert!(
        cut_line.ends_with(
            " cut here so far; while the command runs the log shows its latest 64 KiB, once it ends its last 1 MiB]"
        ),
        "{cut_line}"
    );
    let head_and_cut = live.find(cut_line).expect("there") + cut_line.len() + 1;
    assert_eq!(live.len() - head_and_cut, 65_536, "the live view's tail is 64 KiB");
    // Stopped: the whole last MiB.
    child.stop().expect("it stops");
    let mut output = b"flood\n".repeat(3_145_728 / 6 + 1);
    output.truncate(3_145_728);
    output.extend_from_slice(b"now waiting\n");
    let log = std::fs::read(&spec.log).expect("the log");
    assert!(log == capped(&output), "{}", String::from_utf8_lossy(&log[1_048_570..1_048_700]));
}

#[test]
fn a_flooding_child_that_keeps_printing_is_not_stalled() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).expect("an output folder");
    // Past the kept bytes, the log's size stays the same; it is rewritten while lines come.
    let script =
        "yes flood | head -c 3145728; for i in 1 2 3 4 5 6 7 8; do sleep 0.3; echo tick $i; done";
    let spec = shell(dir.path(), script);
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    let finished = child.wait_with_limits(&stall_limits(&spec, &out, 1)).expect("waited for");
    assert!(matches!(finished, Finished::Exited(status) if status.success()), "{finished:?}");
    assert!(std::fs::read_to_string(&spec.log).expect("the log").ends_with("tick 7\ntick 8\n"));
}

#[test]
fn a_process_that_left_the_group_and_holds_the_log_does_not_hold_up_the_stop() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // `setsid` in a background job of `sh -c` (not a group leader) execs `sleep` in a new
    // session: it is outside the group and has the log's pipe as its output.
    let spec = shell(dir.path(), "setsid sleep 100 & echo \"escaped $!\"; sleep 100");
    let mut child = ChildGroup::spawn(&spec).expect("it starts");
    let log = wait_for_log(&spec.log, "escaped ");
    let escaped: u32 = log
        .trim()
        .strip_prefix("escaped ")
        .and_then(|pid| pid.parse().ok())
        .expect("the escaped pid is logged");
    child.stop().expect("it stops, though the pipe is still open");
    assert_eq!(std::fs::read_to_string(&spec.log).expect("the log"), log);
    assert!(running(escaped), "it left the group, so the stop did not reach it");
    let killed = Command::new("kill").arg("-KILL").arg(escaped.to_string()).status();
    assert!(killed.is_ok_and(|status| status.success()));
}

/// Set in the copy of this test binary that plays a runner whose one group is frozen.
const FROZEN_RUNNER: &str = "PRGATE_TEST_FROZEN_RUNNER";

/// The runner's side: one group that writes `termed` when it gets `SIGTERM`, frozen (an idle
/// server), then wait for the signal.
fn play_the_runner_with_a_frozen_group(dir: &Path) -> ! {
    stop_all_on_signal().expect("the watcher starts");
    let script = format!(
        "trap 'echo term > {}; exit 0' TERM; while :; do sleep 0.05; done",
        dir.join("termed").display()
    );
    // A long grace: the trap has time to run however loaded the machine is (the group ends
    // as soon as it has run).
    let mut spec = shell(dir, &script);
    spec.grace = Duration::from_secs(20);
    let mut group = ChildGroup::spawn(&spec).expect("it starts");
    members_when(group.id(), 2);
    group.freeze().expect("it freezes");
    let temporary = dir.join("groups.tmp");
    std::fs::write(&temporary, group.id().to_string()).expect("written");
    std::fs::rename(&temporary, dir.join("groups")).expect("renamed");
    thread::sleep(Duration::from_secs(60));
    panic!("the signal never came");
}

#[test]
fn a_frozen_group_gets_its_term_when_the_runner_is_stopped_by_a_signal_or_killed() {
    if let Some(dir) = std::env::var_os(FROZEN_RUNNER) {
        play_the_runner_with_a_frozen_group(Path::new(&dir));
    }
    // Ctrl-C: the runner's watcher stops the group; SIGKILL: the group's watchdog does.
    for signal in ["-INT", "-KILL"] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let test = "a_frozen_group_gets_its_term_when_the_runner_is_stopped_by_a_signal_or_killed";
        let (mut runner, group) = spawn_playing_runner(test, FROZEN_RUNNER, dir.path());
        let pgid: i32 = group.parse().expect("a group id");
        let members = group_members(pgid);
        let sent = Command::new("kill").args([signal, &runner.id().to_string()]).status();
        assert!(sent.is_ok_and(|status| status.success()));
        let _ = runner.wait();
        let deadline = Instant::now() + Duration::from_secs(30);
        while members.iter().any(|pid| running(*pid)) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(50));
        }
        assert_all_gone(&members);
        // Stopped by the watcher, it ran its trap: thawed, it got the `SIGTERM`, not only the
        // `SIGKILL` after its grace. (A killed runner orphans the group, and the kernel sends
        // an orphaned group with a stopped process `SIGHUP` and `SIGCONT` itself: it is gone
        // before the watchdog's `SIGTERM`.)
        if signal == "-INT" {
            let termed = std::fs::read_to_string(dir.path().join("termed")).unwrap_or_default();
            assert_eq!(termed, "term\n", "the frozen group never handled its SIGTERM");
        }
    }
}
