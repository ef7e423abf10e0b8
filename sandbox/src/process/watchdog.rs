//! The watchdog of a process group: a small `sh` that stops the group when the runner dies
//! without stopping it itself (`SIGKILL`, an out-of-memory kill, a crash), so that no server
//! outlives a killed `prgate run`.
//!
//! It holds the read end of a pipe whose write end only the runner has (close-on-exec, so no
//! other child inherits it). It reads the group's id, then waits for one more line: `stopped`
//! when the runner stopped the group itself (the watchdog exits), or the end of the pipe,
//! which the kernel gives when the runner dies however it dies. Then it sends `SIGTERM` to the
//! group (and `SIGCONT`, so that a frozen group, an idle server, gets it), waits up to the
//! group's grace period, and sends `SIGKILL` to what is left. The
//! watchdog is in a process group of its own (a Ctrl-C at the terminal does not reach it) and
//! has an empty environment but `PATH`.
//!
//! `PR_SET_PDEATHSIG` would need `unsafe` (`pre_exec`), which the workspace forbids, and it
//! reaches only the group's leader, not what the leader started.

use std::io::{self, Write as _};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

/// The script: `$1` is the number of tenths of a second of grace.
const SCRIPT: &str = r#"read -r group || exit 0
case "$group" in ''|*[!0-9]*) exit 0 ;; esac
if read -r word && [ "$word" = stopped ]; then exit 0; fi
kill -TERM -"$group" 2>/dev/null || exit 0
kill -CONT -"$group" 2>/dev/null
tenths=0
while kill -0 -"$group" 2>/dev/null && [ "$tenths" -lt "$1" ]; do
  sleep 0.1
  tenths=$((tenths + 1))
done
kill -KILL -"$group" 2>/dev/null
exit 0
"#;

/// A started watchdog, not yet told which group it watches.
#[derive(Debug)]
pub(super) struct Watchdog {
    child: Child,
    pipe: Option<ChildStdin>,
}

impl Watchdog {
    /// Starts a watchdog that will give its group `grace` between `SIGTERM` and `SIGKILL`.
    pub(super) fn start(grace: Duration) -> io::Result<Watchdog> {
        let tenths = grace.as_millis().div_ceil(100).min(u128::from(u32::MAX)).to_string();
        let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
        #[expect(
            clippy::disallowed_methods,
            reason = "the watchdog: prgate's own script, which stops the groups a killed runner leaves"
        )]
        let mut child = Command::new("/bin/sh")
            .args(["-c", SCRIPT, "prgate-watchdog", &tenths])
            .env_clear()
            .env("PATH", path)
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        let pipe = child.stdin.take();
        Ok(Watchdog { child, pipe })
    }

    /// Tells the watchdog which group it watches.
    pub(super) fn watch(&mut self, pgid: i32) -> io::Result<()> {
        match &mut self.pipe {
            Some(pipe) => writeln!(pipe, "{pgid}").and_then(|()| pipe.flush()),
            None => Err(io::Error::other("the watchdog was dismissed")),
        }
    }

    /// The group was stopped by the runner: the watchdog exits without signalling anyone.
    pub(super) fn dismiss(&mut self) {
        if let Some(mut pipe) = self.pipe.take() {
            let _ = writeln!(pipe, "stopped").and_then(|()| pipe.flush());
            drop(pipe);
            let _ = self.child.wait();
        }
    }

    /// The watchdog's pid.
    #[cfg(test)]
    pub(super) fn id(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.dismiss();
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::time::{Duration, Instant};

    use super::*;

    fn alive(pgid: i32) -> bool {
        super::super::group::alive(pgid)
    }

    /// Waits until `check` holds, for at most 30 s (generous: the assertion is about what
    /// happens, not how fast).
    fn eventually(check: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if check() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn group() -> std::process::Child {
        #[expect(
            clippy::disallowed_methods,
            reason = "a test starts the group the watchdog must stop"
        )]
        Command::new("sh")
            .args(["-c", "trap '' TERM; sleep 100 & sleep 100"])
            .process_group(0)
            .spawn()
            .expect("a group starts")
    }

    #[test]
    fn a_watchdog_whose_runner_is_gone_stops_the_group_even_one_that_ignores_term() {
        let mut leader = group();
        let pgid = i32::try_from(leader.id()).expect("a pid");
        let mut watchdog = Watchdog::start(Duration::from_millis(200)).expect("it starts");
        watchdog.watch(pgid).expect("told");
        // The runner dying closes the pipe without the word `stopped`.
        drop(watchdog.pipe.take());
        let _ = leader.wait();
        assert!(eventually(|| !alive(pgid)), "the group {pgid} outlived its runner");
        let _ = watchdog.child.wait();
    }

    #[test]
    fn a_dismissed_watchdog_signals_no_one() {
        let mut leader = group();
        let pgid = i32::try_from(leader.id()).expect("a pid");
        let mut watchdog = Watchdog::start(Duration::from_millis(200)).expect("it starts");
        watchdog.watch(pgid).expect("told");
        let id = watchdog.id();
        watchdog.dismiss();
        assert!(!std::path::Path::new(&format!("/proc/{id}")).exists(), "the watchdog exited");
        assert!(alive(pgid), "the group was left alone");
        super::super::group::signal(pgid, super::super::group::Signal::Kill).expect("killed");
        let _ = leader.wait();
        assert!(eventually(|| !alive(pgid)));
    }
}
