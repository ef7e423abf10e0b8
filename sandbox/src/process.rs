//! Children that cannot outlive the runner: every command prgate starts on a node goes
//! through [`ChildGroup`].
//!
//! A [`ChildGroup`] starts a command from its argument list (no shell) as the leader of a new
//! process group, with standard input closed, standard output and error going to one capped
//! log file (`process/capped_log.rs`: its first and last MiB, the cut said), an environment given in full ([`Environment`]: nothing of the runner's own environment
//! reaches the child unless it is listed, so a node's secrets stay with the runner) and a
//! working directory. Stopping it stops the whole group, the children's children included:
//! `SIGTERM` to the group, then `SIGKILL` to what is left after a grace period. It is stopped
//! when its leader exits (whatever it left running in the background goes too), when a wait
//! times out, when [`ChildGroup::stop`] is called and when it is dropped, so an error path or a
//! panic leaves nothing running or listening.
//!
//! Every live group is also in a registry of this process; [`stop_all_on_signal`] starts a
//! thread that, on `SIGINT`, `SIGTERM` or `SIGHUP` to the runner, stops them all and then lets
//! the runner die of that signal. It matters because the children are in their own groups: a
//! Ctrl-C on the terminal reaches the runner's group, not theirs. A signal that cannot be
//! caught (`SIGKILL`) is covered by each group's watchdog (`process/watchdog.rs`): a small
//! `sh` that stops the group when the runner dies without having stopped it.
//!
//! A child's output goes through a pipe that a pump thread copies into the log; stopping the
//! group ends the pump once the group is gone (after writing the log's tail), so a log read
//! after [`ChildGroup::stop`] is complete, and one read while the command runs shows its head
//! and its latest output (`process/capped_log.rs` says what a live reader sees).
//!
//! Around the children: [`tail()`] reads the last lines of a log (the evidence of a crash,
//! without the terminal's escape sequences), [`PortLease`] hands out a TCP port no other prgate
//! on the node holds, and [`wait_healthy`] polls a server's health endpoint and fails fast when
//! the server exits.
//!
//! What it leaves to others: what to run and when (the runner's steps), what a log means (the
//! routing check), containers (a container's command is started here like any other).
//!
//! It is Unix-only in spirit: process groups and signals. The membership of a group is read
//! from `/proc` where there is one (Linux, the GPU nodes), so that zombies, which cannot be
//! signalled away, do not count as alive; elsewhere a group with an unreaped zombie counts as
//! alive until its grace period ends.

mod capped_log;
mod group;
mod health;
mod port;
mod registry;
mod stall;
mod tail;
mod watchdog;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

pub use capped_log::{
    HEAD as LOG_HEAD, LIVE_EVERY as LOG_LIVE_EVERY, LIVE_TAIL as LOG_LIVE_TAIL,
    READ_CHUNK as LOG_READ_CHUNK, TAIL as LOG_TAIL,
};
pub use group::group_members;
pub use health::{HEALTH_TAIL_LINES, HealthError, Healthy, wait_healthy};
pub use port::{PortError, PortLease, PortRange};
pub use registry::{
    before_dying_of_signal, block_while_stopping, forget_thaw, live_groups, remember_thaw,
    stop_all_on_signal,
};
pub use stall::{
    DEFAULT_STALL, Limits, MAX_STALL, MIN_STALL, ProgressWatch, StallLimit, StallLimitError,
};
pub use tail::{MAX_TAIL_BYTES, last_lines, tail};

/// How long a group has between `SIGTERM` and `SIGKILL` unless its spec says otherwise.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// The variables of the runner's environment that [`Environment::minimal`] passes on: what a
/// program needs to find its tools and speak a language, and nothing that holds a secret.
pub const BASE_VARIABLES: &[&str] =
    &["PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"];

/// What to start: the command, its environment, where it runs and where its output goes.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// The program and its arguments; the program is looked up in the spec's `PATH` when it
    /// has no slash.
    pub argv: Vec<OsString>,
    /// The child's whole environment.
    pub env: Environment,
    /// The working directory.
    pub cwd: PathBuf,
    /// The log file: standard output and error are added at its end, capped
    /// (`process/capped_log.rs`); its folder is created.
    pub log: PathBuf,
    /// How long the group has between `SIGTERM` and `SIGKILL` when it is stopped.
    pub grace: Duration,
}

impl ProcessSpec {
    /// A spec with the [minimal environment](Environment::minimal) and the
    /// [default grace period](DEFAULT_GRACE).
    pub fn new<I, S>(argv: I, cwd: impl Into<PathBuf>, log: impl Into<PathBuf>) -> ProcessSpec
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        ProcessSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            env: Environment::minimal(),
            cwd: cwd.into(),
            log: log.into(),
            grace: DEFAULT_GRACE,
        }
    }
}

/// A child's whole environment, given explicitly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    vars: BTreeMap<OsString, OsString>,
}

impl Environment {
    /// No variables at all.
    pub fn empty() -> Environment {
        Environment::default()
    }

    /// The runner's [`BASE_VARIABLES`] that are set, and nothing else.
    pub fn minimal() -> Environment {
        BASE_VARIABLES.iter().fold(Environment::empty(), |env, name| env.inherit(name))
    }

    /// Sets `name` to `value`.
    pub fn set(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Environment {
        self.vars.insert(name.into(), value.into());
        self
    }

    /// Passes the runner's own `name` on, when the runner has it: the way to hand a child a
    /// secret it is meant to have (a dataset token), by name.
    pub fn inherit(mut self, name: &str) -> Environment {
        if let Some(value) = std::env::var_os(name) {
            self.vars.insert(name.into(), value);
        }
        self
    }

    /// The value of `name`, when it is set.
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars.get(OsStr::new(name)).map(OsString::as_os_str)
    }

    /// Every variable, sorted by name.
    pub fn vars(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.vars.iter().map(|(name, value)| (name.as_os_str(), value.as_os_str()))
    }
}

/// A running command, leader of its own process group, and everything it started.
///
/// Dropping it stops the group (see [`ChildGroup::stop`]); dropping blocks for up to the grace
/// period when the group does not stop on `SIGTERM`.
#[derive(Debug)]
pub struct ChildGroup {
    child: Child,
    /// The group's id: the leader's pid.
    pgid: i32,
    program: String,
    log: PathBuf,
    grace: Duration,
    /// The leader's exit status, once it has been reaped.
    exit: Option<ExitStatus>,
    /// How the group ended, once nothing of it is left.
    stopped: Option<Stopped>,
    /// Stops the group if the runner dies without stopping it (`SIGKILL`).
    watchdog: watchdog::Watchdog,
    /// Copies the group's output into the log; ended once the group is stopped.
    pump: capped_log::Pump,
    /// Frozen by [`ChildGroup::freeze`] and not thawed since.
    frozen: bool,
}

/// How a stopped group ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    /// The leader's exit status.
    pub status: ExitStatus,
    /// Whether `SIGKILL` was needed: something in the group outlived the grace period.
    pub killed: bool,
}

/// How a [`ChildGroup::wait_with_timeout`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// The leader exited by itself with this status (what it left running was stopped).
    Exited(ExitStatus),
    /// The time ran out and the group was stopped.
    TimedOut(Stopped),
    /// Nothing it watched changed for `silent` (its stall limit), and the group was stopped.
    Stalled { stopped: Stopped, silent: Duration },
}

/// Why a child could not be started, waited for or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("no command to start: the argument list is empty")]
    EmptyCommand,
    #[error("cannot open the log file {path}: {source}")]
    Log { path: PathBuf, source: io::Error },
    #[error("cannot start the thread that writes the log file {path}: {source}")]
    LogPump { path: PathBuf, source: io::Error },
    #[error("cannot start {program} in {cwd}: {source}")]
    Spawn { program: String, cwd: PathBuf, source: io::Error },
    #[error("cannot wait for {program} (pid {pid}): {source}")]
    Wait { program: String, pid: i32, source: io::Error },
    #[error("cannot signal the process group {pgid} of {program}: {source}")]
    Signal { program: String, pgid: i32, source: io::Error },
    #[error(
        "the process group {pgid} of {program} still has processes {members:?} after SIGKILL\nhint: they may be stuck in the kernel (state D); see /proc/PID/stack"
    )]
    Survived { program: String, pgid: i32, members: Vec<u32> },
}

impl ChildGroup {
    /// Starts `spec` as the leader of a new process group.
    pub fn spawn(spec: &ProcessSpec) -> Result<ChildGroup, ProcessError> {
        let (program, args) = spec.argv.split_first().ok_or(ProcessError::EmptyCommand)?;
        let display = program.to_string_lossy().into_owned();
        let log = capped_log::CappedLog::open(&spec.log, capped_log::Caps::DEFAULT)
            .map_err(|source| ProcessError::Log { path: spec.log.clone(), source })?;
        // The watchdog and the log's pump first: when they cannot start, nothing has started.
        let mut watchdog =
            watchdog::Watchdog::start(spec.grace).map_err(|source| ProcessError::Spawn {
                program: "/bin/sh (the watchdog)".to_owned(),
                cwd: "/".into(),
                source,
            })?;
        let pump_error = |source| ProcessError::LogPump { path: spec.log.clone(), source };
        let (pump, output) = capped_log::Pump::start(log).map_err(pump_error)?;
        let output_too = output.try_clone().map_err(pump_error)?;
        #[expect(
            clippy::disallowed_methods,
            reason = "the one starter of a step's command: runner::run::exec decides where it runs (in the container for PR code)"
        )]
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(spec.env.vars())
            .current_dir(&spec.cwd)
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(output_too)
            .process_group(0);
        let spawned = registry::spawn_registered(&mut command, spec.grace);
        // The child has its copies of the pipe's writing end; prgate's own close with the
        // command, so the pipe closes when the group is gone.
        drop(command);
        let child = spawned.map_err(|source| ProcessError::Spawn {
            program: display.clone(),
            cwd: spec.cwd.clone(),
            source,
        })?;
        let pgid = i32::try_from(child.id()).unwrap_or(i32::MAX);
        let told = watchdog.watch(pgid);
        let mut group = ChildGroup {
            child,
            pgid,
            program: display.clone(),
            log: spec.log.clone(),
            grace: spec.grace,
            exit: None,
            stopped: None,
            watchdog,
            pump,
            frozen: false,
        };
        if let Err(source) = told {
            let _ = group.stop();
            return Err(ProcessError::Spawn { program: display, cwd: spec.cwd.clone(), source });
        }
        Ok(group)
    }

    /// The leader's pid, which is also the group's id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The leader's exit status if it has exited, without waiting. The rest of the group may
    /// still be running.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>, ProcessError> {
        self.reap()?;
        Ok(self.exit)
    }

    /// Waits for the leader to exit, then stops what it left running; when `timeout` passes
    /// first, stops the group.
    pub fn wait_with_timeout(&mut self, timeout: Duration) -> Result<Finished, ProcessError> {
        self.wait_with_limits(&Limits::wall_clock(timeout))
    }

    /// Waits for the leader to exit, then stops what it left running; when `limits.timeout`
    /// passes first, or nothing of what `limits.stall` watches changes for its limit, stops
    /// the group.
    pub fn wait_with_limits(&mut self, limits: &Limits) -> Result<Finished, ProcessError> {
        let mut waiter = Waiter::new(limits);
        loop {
            if let Some(status) = self.try_wait()? {
                self.stop()?;
                return Ok(Finished::Exited(status));
            }
            if let Some(ending) = waiter.ended() {
                return self.stop().map(|stopped| ending.finished(stopped));
            }
            waiter.pause();
        }
    }

    /// Freezes every process of the group (`SIGSTOP`) until [`ChildGroup::thaw`]: an idle
    /// server that must not run while another is measured. [`ChildGroup::stop`] thaws it.
    pub fn freeze(&mut self) -> Result<(), ProcessError> {
        self.signal(group::Signal::Stop)?;
        self.frozen = true;
        Ok(())
    }

    /// Thaws a group [`ChildGroup::freeze`] froze (`SIGCONT`); nothing for one that is not.
    pub fn thaw(&mut self) -> Result<(), ProcessError> {
        if std::mem::take(&mut self.frozen) {
            self.signal(group::Signal::Cont)?;
        }
        Ok(())
    }

    /// Stops the group: `SIGTERM` to every process in it, then, when anything is left after
    /// the grace period, `SIGKILL`. Returns once the leader is reaped, no process of the
    /// group is left (zombies that another parent has yet to reap aside) and the log is
    /// complete (its tail written, `process/capped_log.rs`); a second call returns the first one's
    /// answer.
    pub fn stop(&mut self) -> Result<Stopped, ProcessError> {
        if let Some(stopped) = self.stopped {
            return Ok(stopped);
        }
        let stopped = self.stop_group();
        // The group is gone: what it printed is in the pipe, and the pump does not wait for a
        // process outside the group that still holds it. A log that cannot be written is the
        // log's loss, not the stop's failure.
        let _unwritten = self.pump.finish();
        let stopped = stopped?;
        self.stopped = Some(stopped);
        registry::forget(self.pgid);
        self.watchdog.dismiss();
        Ok(stopped)
    }

    fn stop_group(&mut self) -> Result<Stopped, ProcessError> {
        if let Some(stopped) = self.ended(false)? {
            return Ok(stopped);
        }
        self.signal(group::Signal::Term)?;
        // A frozen group gets its `SIGTERM` once thawed: it may still end in its grace.
        self.thaw()?;
        let deadline = Instant::now() + self.grace;
        let mut pause = FIRST_PAUSE;
        loop {
            if let Some(stopped) = self.ended(false)? {
                return Ok(stopped);
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(MAX_PAUSE);
        }
        self.signal(group::Signal::Kill)?;
        if self.exit.is_none() {
            let status = self.child.wait().map_err(|source| self.wait_error(source))?;
            self.exit = Some(status);
        }
        let settle = Instant::now() + KILL_SETTLE;
        loop {
            if let Some(stopped) = self.ended(true)? {
                return Ok(stopped);
            }
            if Instant::now() >= settle {
                return Err(ProcessError::Survived {
                    program: self.program.clone(),
                    pgid: self.pgid,
                    members: group_members(self.pgid),
                });
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// How the group ended, when the leader has exited and nothing else of it is left.
    fn ended(&mut self, killed: bool) -> Result<Option<Stopped>, ProcessError> {
        self.reap()?;
        Ok(match self.exit {
            Some(status) if !group::alive(self.pgid) => Some(Stopped { status, killed }),
            _ => None,
        })
    }

    fn reap(&mut self) -> Result<(), ProcessError> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().map_err(|source| self.wait_error(source))?;
        }
        Ok(())
    }

    fn signal(&self, signal: group::Signal) -> Result<(), ProcessError> {
        group::signal(self.pgid, signal).map_err(|source| ProcessError::Signal {
            program: self.program.clone(),
            pgid: self.pgid,
            source,
        })
    }

    fn wait_error(&self, source: io::Error) -> ProcessError {
        ProcessError::Wait { program: self.program.clone(), pid: self.pgid, source }
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        if self.stopped.is_none() {
            // Nobody is left to tell; the registry forgets the group either way, so a stale
            // id is never signalled later.
            let _ = self.stop();
            registry::forget(self.pgid);
        }
    }
}

/// The instant `timeout` from now, saturating: a timeout too large to add (a recipe's
/// `u64::MAX` seconds) gives a deadline about a century away instead of a panic.
pub fn deadline_after(timeout: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    let now = Instant::now();
    now.checked_add(timeout).or_else(|| now.checked_add(CENTURY)).unwrap_or(now)
}

/// Why a wait stops a command that has not exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The wall-clock limit passed.
    TimedOut,
    /// Nothing watched changed for this long.
    Stalled(Duration),
}

impl Ending {
    /// How the wait finished, once the command was stopped.
    pub fn finished(self, stopped: Stopped) -> Finished {
        match self {
            Ending::TimedOut => Finished::TimedOut(stopped),
            Ending::Stalled(silent) => Finished::Stalled { stopped, silent },
        }
    }
}

/// The clock of a wait for a child (a group, a container's client): the caller asks it, each
/// time the child has not exited, whether a limit has ended the wait, and pauses.
#[derive(Debug)]
pub struct Waiter {
    deadline: Instant,
    watch: Option<ProgressWatch>,
    pause: Duration,
}

impl Waiter {
    /// A wait under `limits`, from now.
    pub fn new(limits: &Limits) -> Waiter {
        Waiter {
            deadline: deadline_after(limits.timeout),
            watch: limits
                .stall
                .as_ref()
                .map(|(limit, watched)| ProgressWatch::new(*limit, watched)),
            pause: FIRST_PAUSE,
        }
    }

    /// Whether a limit has ended the wait.
    pub fn ended(&mut self) -> Option<Ending> {
        let now = Instant::now();
        if now >= self.deadline {
            return Some(Ending::TimedOut);
        }
        let watch = self.watch.as_mut()?;
        watch.stalled(now).then(|| Ending::Stalled(watch.limit()))
    }

    /// Sleeps a little: pauses double up to `MAX_PAUSE`, never past the deadline.
    pub fn pause(&mut self) {
        thread::sleep(self.pause.min(self.deadline.saturating_duration_since(Instant::now())));
        self.pause = (self.pause * 2).min(MAX_PAUSE);
    }
}

/// The first pause between two looks at a child; pauses double up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(5);
const MAX_PAUSE: Duration = Duration::from_millis(100);
/// How long processes have to disappear after `SIGKILL`.
const KILL_SETTLE: Duration = Duration::from_secs(5);
