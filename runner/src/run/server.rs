//! A model's server for one side: started from the recipe on a leased port, let through the
//! health gate, and read for routing lines. Stopping it is dropping it.

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use prgate_gate::evidence::{NotRunReason, Outcome};

use super::StepFailure;
use super::exec::{Exec, ServerCommand, ServerProcess};
use super::leftovers::Entry;
use crate::container::NetworkSide;
use crate::node::NodeProfile;
use crate::process::{HealthError, PortLease, PortRange, tail, wait_healthy};
use crate::recipe::{Recipe, ServerSide};

/// How much of a server's log is searched for a routing line: 256 MiB.
const MAX_ROUTING_SCAN: u64 = 256 * 1024 * 1024;

/// How many lines of a log a `not-run` record's detail carries.
pub(super) const TAIL_LINES: usize = 40;

/// A healthy server. Dropping it stops it (its process group, or its container) and lets its
/// port go; a topology's ([`super::topology`]) stops its router and every instance.
#[derive(Debug)]
pub(super) struct Server {
    inner: Inner,
    /// Where prgate reaches it: `http://127.0.0.1:<port>` on the host, `http://<address>:<port>`
    /// in a container (its address on its side's internal network).
    pub url: String,
    /// The port it listens on, as it and the commands that join it see it.
    pub port: u16,
    log: PathBuf,
    /// Where in its log this start wrote, as prgate measured it (not the server's own note).
    pub window: LogWindow,
}

/// One start of a server in its side's log (which every start appends to): the log's length
/// when it was started and when it became healthy. Only lines written after it was healthy and
/// before the next start count as its routing lines: a line it printed while starting (an
/// `echo` in its command) was not the answer to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LogWindow {
    pub started: u64,
    pub healthy: u64,
}

impl LogWindow {
    /// The whole log, for the logs whose starts prgate does not measure (a topology's instances:
    /// their lines are read as written).
    pub(super) const WHOLE: LogWindow = LogWindow { started: 0, healthy: 0 };
}

/// One server, or a topology of them behind a router.
#[derive(Debug)]
enum Inner {
    One {
        process: Box<ServerProcess>,
        /// Crossed out once the process is stopped: declared after it, so dropped after it.
        _entry: Entry,
        _lease: PortLease,
    },
    Topology(Box<super::topology::Deployment>),
}

impl Drop for Server {
    /// Stops the server, then redacts the node's secret values from its log (a server prints
    /// what it likes; `crate::redact`). The fields drop after this: the entry is crossed out
    /// and the port let go once the process is stopped.
    fn drop(&mut self) {
        if let Inner::One { process, .. } = &mut self.inner {
            process.stop();
            let _unredacted = crate::redact::redact_log(&self.log);
        }
    }
}

/// How one side's server is started.
#[derive(Debug, Clone)]
pub(super) struct Launch<'a> {
    /// The tree it runs in (installed).
    pub tree: &'a Path,
    /// Monokernels on (the flag appended) or off (SGLang's own path).
    pub monokernel: bool,
    /// The GPUs it may use, as `HIP_VISIBLE_DEVICES` counts them.
    pub gpus: &'a [u32],
    /// The side's variables (without the GPUs).
    pub env: Vec<(String, String)>,
    /// Its log; a restarted server appends to it. Its folder is the server's output directory.
    pub log: PathBuf,
    /// What it is, unique in the run while it lives (`kimi_k3-base-server`).
    pub purpose: String,
    /// The side it serves: in a container, it (a topology: each of its servers) is on that
    /// side's network alone.
    pub side: NetworkSide,
}

impl Server {
    /// Starts the recipe's server as `launch` says and waits until it is healthy, for at most
    /// `startup_limit` (the recipe's startup timeout, or less when the run's time runs out).
    pub(super) fn start(
        recipe: &Recipe,
        exec: &Exec<'_>,
        launch: &Launch<'_>,
        startup_limit: Duration,
    ) -> Result<Server, StepFailure> {
        if let Some(topology) = recipe.topology() {
            let bring =
                super::topology::Bring { recipe, topology, exec, launch, startup: startup_limit };
            let started = log_length(&launch.log);
            let deployment = bring.up()?;
            return Ok(Server {
                url: deployment.url.clone(),
                port: deployment.port,
                log: launch.log.clone(),
                window: LogWindow { started, healthy: log_length(&launch.log) },
                inner: Inner::Topology(Box::new(deployment)),
            });
        }
        let started = Instant::now();
        let lease = Ports::of(exec.node)?.lease()?;
        let port = lease.port();
        let checkpoint = exec.checkpoint_view(recipe);
        let argv =
            recipe.server_command(ServerSide { monokernel: launch.monokernel }, port, &checkpoint);
        let out = launch.log.parent().unwrap_or(launch.tree);
        let command = ServerCommand {
            argv,
            tree: launch.tree,
            out,
            env: launch.env.clone(),
            log: launch.log.clone(),
            gpus: launch.gpus,
            purpose: launch.purpose.clone(),
            port,
            side: launch.side,
            startup: startup_limit,
        };
        record_start(&launch.log);
        let began_at = log_length(&launch.log);
        let (mut process, url) = exec.start_server(&command)?;
        let entry = Entry::write(exec.processes, process.group().id());
        let health = format!("{url}{}", recipe.server().health_path);
        let left = startup_limit.saturating_sub(started.elapsed());
        if let Err(error) = wait_healthy(&health, left, process.group()) {
            drop(process);
            drop(entry);
            return Err(StepFailure { reason: unhealthy(&error), detail: error.to_string() });
        }
        Ok(Server {
            inner: Inner::One { process: Box::new(process), _entry: entry, _lease: lease },
            url,
            port,
            log: launch.log.clone(),
            window: LogWindow { started: began_at, healthy: log_length(&launch.log) },
        })
    }

    /// The container a command joins to reach it (`None` on the host).
    pub(super) fn container(&self) -> Option<String> {
        match &self.inner {
            Inner::One { process, .. } => process.container().map(str::to_owned),
            Inner::Topology(deployment) => deployment.container.clone(),
        }
    }

    /// Whether it is a topology (several servers behind a router), which is never released.
    pub(super) fn is_topology(&self) -> bool {
        matches!(self.inner, Inner::Topology(_))
    }

    /// Freezes a released server while the other side is measured, or thaws it
    /// ([`ServerProcess::set_paused`]); a topology is never released, so never paused.
    pub(super) fn set_paused(&mut self, paused: bool) -> Result<(), StepFailure> {
        match &mut self.inner {
            Inner::One { process, .. } => process.set_paused(paused),
            Inner::Topology(_) => Ok(()),
        }
    }

    /// Whether the server's process (a topology: any of its processes) has exited.
    pub(super) fn exited(&mut self) -> bool {
        match &mut self.inner {
            Inner::One { process, .. } => !matches!(process.group().try_wait(), Ok(None)),
            Inner::Topology(deployment) => deployment.exited().is_some(),
        }
    }

    /// The last lines of its log (a topology: which process exited, and the router's), or why
    /// they cannot be read. A server whose process has exited is stopped first (its log's tail
    /// is written then); one that runs shows its log as a live reader sees it.
    pub(super) fn log_tail(&mut self) -> String {
        match &mut self.inner {
            Inner::One { process, .. } => {
                // An exited server's log is complete once its group is stopped.
                if !matches!(process.group().try_wait(), Ok(None)) {
                    process.stop();
                }
                server_log_tail(&self.log)
            }
            Inner::Topology(deployment) => match deployment.exited() {
                Some(name) => {
                    format!("{name} exited; the router's log:\n{}", deployment.log_tail())
                }
                None => deployment.log_tail(),
            },
        }
    }
}

/// `problem`, then the last lines of `log`: the detail of a step that failed.
pub(super) fn with_log_tail(problem: impl std::fmt::Display, log: &Path) -> String {
    format!(
        "{problem}\nlast lines of {}:\n{}",
        log.display(),
        tail(log, TAIL_LINES).unwrap_or_default()
    )
}

/// Where a side's server log records the byte offset each start of the server began at (one
/// number a line), so that a step's tail shows the server it used, not the one before it (a
/// side's log holds every start: the accuracy server's crash is not the speed server's).
fn starts_of(log: &Path) -> PathBuf {
    let mut name = log.file_name().unwrap_or_default().to_os_string();
    name.push(".starts");
    log.with_file_name(name)
}

/// The length of the log at `log` now; 0 when it is not a file (yet).
fn log_length(log: &Path) -> u64 {
    std::fs::symlink_metadata(log)
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map_or(0, |metadata| metadata.len())
}

/// Notes that a server is about to start writing to `log`: its length now. Best effort: without
/// the note a tail shows the whole log's end, as it did before.
fn record_start(log: &Path) {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let length = log_length(log);
    let _unrecorded = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits().cast_signed())
        .open(starts_of(log))
        .and_then(|mut file| writeln!(file, "{length}"));
}

/// The offset the latest start began at; 0 when none was recorded (or the note is not a number:
/// the folder is the server's to write, so the note is read as untrusted and only bounds a tail).
fn last_start(log: &Path) -> u64 {
    let Ok(opened) = crate::untrusted::open_in_parent(&starts_of(log)) else { return 0 };
    let Ok((bytes, _cut)) = crate::untrusted::read_tail(opened, 4096) else { return 0 };
    let text = String::from_utf8_lossy(&bytes);
    text.lines().rev().find_map(|line| line.trim().parse().ok()).unwrap_or(0)
}

/// The last lines a server's `log` holds since the server's latest start, or why they cannot be
/// read.
pub(super) fn server_log_tail(log: &Path) -> String {
    let cannot = |error: &dyn std::fmt::Display| format!("(the log cannot be read: {error})");
    let start = last_start(log);
    let whole = || tail(log, TAIL_LINES).unwrap_or_else(|error| cannot(&error));
    if start == 0 {
        return whole();
    }
    let opened = match crate::untrusted::open_in_parent(log) {
        Ok(opened) => opened,
        Err(error) => return cannot(&error),
    };
    // Past the tail's window, the window holds only the latest start's lines anyway.
    if start >= opened.len || opened.len - start > crate::process::MAX_TAIL_BYTES {
        return whole();
    }
    let since = opened.len - start;
    let (bytes, _cut) = match crate::untrusted::read_tail(opened, since) {
        Ok(read) => read,
        Err(error) => return cannot(&error),
    };
    crate::process::last_lines(&bytes, false, TAIL_LINES)
}

/// Whether the server log `log` has a line that matches the routing `pattern` (checked by the
/// recipe) in one of `windows`: written after a start of the server was healthy and before the
/// next start. A side's log holds every start of its server.
pub(super) fn routing(log: &Path, pattern: &str, windows: &[LogWindow]) -> Outcome {
    routing_in(log, pattern, windows)
}

/// What a side's routing check reads: its recipe, its server's log and the starts prgate
/// measured in it, and (the PR side) base's server command, against which the PR's is read.
pub(super) struct RoutingRead<'a> {
    pub recipe: &'a Recipe,
    pub log: &'a Path,
    pub pattern: &'a str,
    pub windows: &'a [LogWindow],
    /// Base's server command, on the PR side when the PR's differs from it.
    pub base_command: Option<&'a str>,
}

/// A side's routing check: one server's line, or (a topology) every instance's required lines
/// and routing line ([`super::topology::routing`]). A PR server command that itself holds text
/// the routing pattern matches, where base's does not, proves nothing: it can print the line
/// without routing anything, so the check fails naming it.
pub(super) fn side_routing(read: &RoutingRead<'_>) -> Outcome {
    if let (Some(base), Ok(regex)) = (read.base_command, regex::Regex::new(read.pattern)) {
        let ours = read.recipe.server().command_text();
        if let Some(found) = regex.find(ours).filter(|_| !regex.is_match(base)) {
            let line = format!(
                "the PR's own server command holds the routing line itself ({:?}), which it can print without routing anything; base's command does not",
                found.as_str()
            );
            return Outcome::Routing { routed: false, line: Some(line) };
        }
    }
    match (read.recipe.topology(), read.log.parent()) {
        (Some(topology), Some(dir)) => super::topology::routing(dir, topology, read.pattern),
        _ => routing(read.log, read.pattern, read.windows),
    }
}

/// The first line of `log` in one of `windows` that matches `pattern`, as a routing outcome.
fn routing_in(log: &Path, pattern: &str, windows: &[LogWindow]) -> Outcome {
    let Ok(regex) = regex::Regex::new(pattern) else {
        return Outcome::Routing { routed: false, line: None };
    };
    // The log is in the server's output folder, which its container may write: it is read as
    // an untrusted file (no link followed), and at most `MAX_ROUTING_SCAN` bytes of it.
    let Ok(opened) = crate::untrusted::open_in_parent(log) else {
        return Outcome::Routing { routed: false, line: None };
    };
    let counts = |at: u64| {
        windows.iter().enumerate().any(|(index, window)| {
            let next = windows.get(index + 1).map_or(u64::MAX, |next| next.started);
            (window.healthy..next).contains(&at)
        })
    };
    let mut reader = std::io::BufReader::new(opened.file.take(MAX_ROUTING_SCAN));
    let mut at = 0u64;
    let mut bytes = Vec::new();
    let line = loop {
        bytes.clear();
        let Ok(read) = reader.read_until(b'\n', &mut bytes) else { break None };
        if read == 0 {
            break None;
        }
        let begins = at;
        at += read as u64;
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim_end_matches('\n').trim_end_matches('\r');
        if counts(begins) && regex.is_match(text) {
            break Some(text.to_owned());
        }
    };
    Outcome::Routing { routed: line.is_some(), line }
}

/// The node's port range (its profile's `ports`, else the default), leased from its cache
/// folder's leases.
pub(super) struct Ports {
    dir: PathBuf,
    range: PortRange,
}

impl Ports {
    pub(super) fn of(node: &NodeProfile) -> Result<Ports, StepFailure> {
        let range = match node.ports() {
            Some(ports) => PortRange::new(*ports.start(), *ports.end())
                .map_err(|error| StepFailure::other(&error))?,
            None => PortRange::DEFAULT,
        };
        Ok(Ports { dir: node.cache_dir().join("ports"), range })
    }

    pub(super) fn lease(&self) -> Result<PortLease, StepFailure> {
        PortLease::acquire(&self.dir, self.range).map_err(|error| StepFailure::other(&error))
    }
}

/// The not-run reason of a server that did not come up healthy.
pub(super) fn unhealthy(error: &HealthError) -> NotRunReason {
    match error {
        HealthError::Exited { .. } => NotRunReason::Crash,
        HealthError::TimedOut { .. } => NotRunReason::Timeout,
        HealthError::Process(_) => NotRunReason::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_routing_line_is_read_from_the_log_but_never_through_a_link() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = dir.path().join("server.log");
        std::fs::write(&log, "starting\r\nmonokernel route: kimi\n").expect("a log");
        let routed = Outcome::Routing { routed: true, line: Some("monokernel route: kimi".into()) };
        let whole = [LogWindow { started: 0, healthy: 0 }];
        assert_eq!(routing(&log, "monokernel route", &whole), routed);
        let host = dir.path().join("host-file");
        std::fs::write(&host, "monokernel route: host secret\n").expect("a host file");
        std::fs::remove_file(&log).expect("removed");
        std::os::unix::fs::symlink(&host, &log).expect("a link");
        let unrouted = Outcome::Routing { routed: false, line: None };
        assert_eq!(routing(&log, "monokernel", &whole), unrouted);
        assert!(server_log_tail(&log).contains("is a symbolic link"), "{}", server_log_tail(&log));
    }

    /// A routing line counts only when a start wrote it after it was healthy: one it printed
    /// while starting (an `echo` in its command) does not, in the first start or a later one.
    #[test]
    fn a_routing_line_printed_before_the_server_was_healthy_does_not_count() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = dir.path().join("server.log");
        let first = "[monokernel] routed (echoed)\nloading\n";
        let served = "GET /generate\n";
        let second = "[monokernel] routed (echoed again)\nloading\n";
        let routed = "[monokernel] routed kimi\n";
        std::fs::write(&log, format!("{first}{served}")).expect("a log");
        let at = |text: &str| text.len() as u64;
        let first_start = LogWindow { started: 0, healthy: at(first) };
        let second_start = LogWindow {
            started: at(first) + at(served),
            healthy: at(first) + at(served) + at(second),
        };
        let pattern = r"\[monokernel\] routed";
        let unrouted = Outcome::Routing { routed: false, line: None };
        assert_eq!(routing(&log, pattern, &[first_start]), unrouted.clone());
        std::fs::write(&log, format!("{first}{served}{second}{routed}")).expect("a longer log");
        // Only the second start's line after it was healthy counts.
        let found = routing(&log, pattern, &[first_start, second_start]);
        let line = Some("[monokernel] routed kimi".to_owned());
        assert_eq!(found, Outcome::Routing { routed: true, line });
        // Without a start that became healthy, nothing counts.
        assert_eq!(routing(&log, pattern, &[]), unrouted);
    }

    /// A side's log holds every start of its server; a step's tail is the latest start's.
    #[test]
    fn a_tail_shows_the_latest_start_of_the_server_only() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = dir.path().join("server.log");
        assert!(server_log_tail(&log).contains("cannot be read"));
        record_start(&log);
        std::fs::write(&log, "accuracy server up\naccuracy server died\n").expect("a log");
        assert_eq!(server_log_tail(&log), "accuracy server up\naccuracy server died");
        record_start(&log);
        let mut text = std::fs::read_to_string(&log).expect("read");
        text.push_str("speed server up\r\nspeed server died\n");
        std::fs::write(&log, text).expect("appended");
        assert_eq!(server_log_tail(&log), "speed server up\nspeed server died");
        // A note the server's folder holds that is not a number bounds nothing.
        std::fs::write(starts_of(&log), "garbage\n").expect("a bad note");
        assert!(server_log_tail(&log).starts_with("accuracy server up"));
    }
}
