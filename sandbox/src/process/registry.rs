//! The registry of live process groups, and the thread that stops them all when the runner is
//! told to stop.
//!
//! A group is registered under the registry's lock in the same breath as it is started, so a
//! signal cannot fall between the two; the watcher keeps the lock from the signal until the
//! process dies, so no child starts while it stops the others.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::group::{self, Signal};

/// Starts a thread that, when the runner gets `SIGINT`, `SIGTERM` or `SIGHUP`, stops every
/// live [`ChildGroup`](super::ChildGroup) (`SIGTERM` to each group, `SIGKILL` to what is left
/// after the longest grace period among them, at once on a second signal), then lets the
/// runner die of the signal it got, as if it had not caught it (exit status 130 for a Ctrl-C
/// in a shell). No child starts once a signal has come. Calling it again does nothing.
///
/// Evidence already written stays (it is written atomically), so a run stopped this way
/// resumes where it stopped.
pub fn stop_all_on_signal() -> io::Result<()> {
    // The first call's error, kept for every later call (an `io::Error` is not `Clone`).
    static WATCHER: OnceLock<Result<(), Arc<io::Error>>> = OnceLock::new();
    WATCHER
        .get_or_init(|| watch().map_err(Arc::new))
        .as_ref()
        .map(drop)
        .map_err(|error| io::Error::new(error.kind(), format!("cannot watch for signals: {error}")))
}

/// What to do, once every child is stopped, before the runner dies of a signal: a caller
/// that must leave word (`prgate ci` sets the PR's status to `error`). It gets the signal's
/// name; it should finish within a few seconds. Setting it again replaces it.
pub fn before_dying_of_signal(hook: Box<dyn Fn(&str) + Send + Sync>) {
    *last_words().lock().unwrap_or_else(PoisonError::into_inner) = Some(hook);
}

type LastWords = Mutex<Option<Box<dyn Fn(&str) + Send + Sync>>>;

/// How to thaw each frozen thing outside this registry's groups (a paused container), by a
/// name of its own.
type Thaws = Mutex<BTreeMap<String, Box<dyn Fn() + Send + Sync>>>;

fn thaws() -> &'static Thaws {
    static THAWS: OnceLock<Thaws> = OnceLock::new();
    THAWS.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// Remembers how to thaw `name` (a paused container: `<engine> unpause`), which the signal
/// watcher ([`stop_all_on_signal`]) does before it stops the groups: a paused container would
/// hold the `SIGTERM` its engine client passes on, outlive the client and its `--rm`, and keep
/// the node's memory. [`forget_thaw`] once it is thawed or gone.
pub fn remember_thaw(name: &str, thaw: Box<dyn Fn() + Send + Sync>) {
    thaws().lock().unwrap_or_else(PoisonError::into_inner).insert(name.to_owned(), thaw);
}

/// Forgets what [`remember_thaw`] remembered of `name`.
pub fn forget_thaw(name: &str) {
    thaws().lock().unwrap_or_else(PoisonError::into_inner).remove(name);
}

fn last_words() -> &'static LastWords {
    static HOOK: OnceLock<LastWords> = OnceLock::new();
    HOOK.get_or_init(|| Mutex::new(None))
}

/// Returns at once, unless a signal is stopping the runner ([`stop_all_on_signal`]): then it
/// never returns, since the process dies of that signal. The evidence writer calls it before
/// each record, so that a step whose children the stop killed (a server gone mid-benchmark)
/// is not recorded as a crash: once stopped, a run records nothing more, and a rerun runs the
/// step again.
pub fn block_while_stopping() {
    // The flag is set by the signal handler itself, before the watcher thread wakes: a child
    // that died of the same signal (SLURM signals every process of a job) counts too.
    if STOPPING.load(Ordering::SeqCst) {
        loop {
            thread::sleep(Duration::from_secs(1));
        }
    }
    drop(live());
}

/// The ids of the process groups started and not yet stopped, sorted.
pub fn live_groups() -> Vec<u32> {
    live().keys().filter_map(|pgid| u32::try_from(*pgid).ok()).collect()
}

/// Spawns `command` (already set to start its own group) and registers its group.
pub(super) fn spawn_registered(command: &mut Command, grace: Duration) -> io::Result<Child> {
    let mut live = live();
    let child = command.spawn()?;
    if let Ok(pgid) = i32::try_from(child.id()) {
        live.insert(pgid, grace);
    }
    Ok(child)
}

/// Takes a group out of the registry once it is stopped.
pub(super) fn forget(pgid: i32) {
    live().remove(&pgid);
}

/// How long a runner about to die of a signal waits for its children's logs to be written.
const PUMPS_SETTLE: Duration = Duration::from_secs(2);

/// Set when one of the signals [`stop_all_on_signal`] watches for has come.
static STOPPING: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// Every live group and its grace period.
static LIVE: Mutex<BTreeMap<i32, Duration>> = Mutex::new(BTreeMap::new());

fn live() -> MutexGuard<'static, BTreeMap<i32, Duration>> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn watch() -> io::Result<()> {
    for signal in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(signal, Arc::clone(&STOPPING))?;
    }
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    thread::Builder::new().name("prgate-signals".to_owned()).spawn(move || {
        let signal = signals.forever().next();
        if let Some(signal) = signal {
            stop_all_and_die(signal, &mut signals);
        }
    })?;
    Ok(())
}

fn stop_all_and_die(signal: i32, signals: &mut Signals) {
    // Held until the process is gone: no child starts from here on.
    let live = live();
    let name = signal_hook::low_level::signal_name(signal).unwrap_or("a signal");
    let grace = live.values().max().copied().unwrap_or_default();
    if !live.is_empty() {
        let _ = writeln!(
            io::stderr(),
            "prgate: got {name}: stopping {} process group(s) (SIGTERM, then SIGKILL after {:.1}s)",
            live.len(),
            grace.as_secs_f64()
        );
    }
    for thaw in thaws().lock().unwrap_or_else(PoisonError::into_inner).values() {
        thaw();
    }
    for pgid in live.keys() {
        let _ = group::signal(*pgid, Signal::Term);
        // A frozen group (an idle server, `ChildGroup::freeze`) gets its `SIGTERM` once
        // thawed; one that is not frozen ignores this.
        let _ = group::signal(*pgid, Signal::Cont);
    }
    let deadline = Instant::now() + grace;
    while live.keys().any(|pgid| group::alive(*pgid)) {
        if Instant::now() >= deadline || signals.pending().next().is_some() {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    for pgid in live.keys() {
        if group::alive(*pgid) {
            let _ = group::signal(*pgid, Signal::Kill);
        }
    }
    // The groups are gone: their logs' pumps write the tails, unless a process outside a
    // group holds its pipe.
    super::capped_log::wait_for_pumps(PUMPS_SETTLE);
    if let Some(hook) = last_words().lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
        hook(name);
    }
    let _ = signal_hook::low_level::emulate_default_handler(signal);
    // Only reached if the default action of the signal does not end the process.
    std::process::exit(128 + signal);
}
