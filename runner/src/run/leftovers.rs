//! The process groups a run started, written down so that the next run in the same results
//! directory can stop what a run killed outright left behind.
//!
//! The children run in their own process groups (so that a Ctrl-C reaches the runner, which
//! stops them itself), which also means that a runner killed with `SIGKILL` takes none of them
//! with it: its servers would go on listening for ever. So every group is written down in
//! `<results>/processes/<pgid>` while it lives (with its leader's start time, from `/proc`),
//! and a run starts by stopping every group a file names that is still there: `SIGTERM`, then
//! `SIGKILL` after a grace period. A group is only signalled when it is still the one written
//! down: its leader has the start time of the file, or is gone while processes of its group are
//! left (Linux does not hand out an id that is still a group's).

use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

use crate::process::group_members;

/// How long a leftover group has between `SIGTERM` and `SIGKILL`.
const GRACE: Duration = Duration::from_secs(10);
/// How long its processes have to disappear after `SIGKILL`.
const KILL_SETTLE: Duration = Duration::from_secs(5);

/// The folder of the written-down groups of a results directory.
pub(super) fn folder(results: &Path) -> PathBuf {
    results.join("processes")
}

/// A group written down; dropping it crosses it out. Drop it once the group is stopped.
#[derive(Debug)]
pub(super) struct Entry {
    path: Option<PathBuf>,
}

impl Entry {
    /// Writes down the group `pgid` (the pid of its leader) in `folder`. A group that cannot
    /// be written down still runs: the entry is then empty, and only a `SIGKILL` of the runner
    /// can leave that group behind.
    pub(super) fn write(folder: &Path, pgid: u32) -> Entry {
        let path = folder.join(pgid.to_string());
        let start = start_time(pgid).map(|start| start.to_string()).unwrap_or_default();
        let written = std::fs::create_dir_all(folder).and_then(|()| std::fs::write(&path, start));
        Entry { path: written.ok().map(|()| path) }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            let _gone = std::fs::remove_file(path);
        }
    }
}

/// Stops every group written down in `folder` that is still running, and crosses them all
/// out. Returns a note per group it had to stop.
pub(super) fn stop_leftovers(folder: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(folder) else { return Vec::new() };
    let mut notes = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name();
        let Some(pgid) = name.to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        let recorded =
            std::fs::read_to_string(&path).ok().and_then(|text| text.trim().parse().ok());
        if still_ours(pgid, recorded) {
            let members = group_members(i32::try_from(pgid).unwrap_or(i32::MAX));
            stop_group(pgid);
            notes.push(format!(
                "stopped process group {pgid} ({} process(es)), left running by an earlier run that was killed",
                members.len()
            ));
        }
        let _gone = std::fs::remove_file(&path);
    }
    notes
}

/// Whether the group `pgid` still runs and is the one started with its leader at `recorded`.
fn still_ours(pgid: u32, recorded: Option<u64>) -> bool {
    let Ok(group) = i32::try_from(pgid) else { return false };
    if group_members(group).is_empty() {
        return false;
    }
    match (start_time(pgid), recorded) {
        // The leader is gone but its group is not: nobody else can have that id.
        (None, _) => true,
        (Some(now), Some(recorded)) => now == recorded,
        (Some(_), None) => false,
    }
}

/// `SIGTERM` to the group, then `SIGKILL` to what is left after the grace period.
fn stop_group(pgid: u32) {
    let (Some(pid), Ok(group)) = (Pid::from_raw(pgid.cast_signed()), i32::try_from(pgid)) else {
        return;
    };
    let _ = kill_process_group(pid, Signal::TERM);
    let gone = |limit: Duration| {
        let deadline = Instant::now() + limit;
        while !group_members(group).is_empty() {
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
        true
    };
    if !gone(GRACE) {
        let _ = kill_process_group(pid, Signal::KILL);
        gone(KILL_SETTLE);
    }
}

/// The start time of process `pid` (clock ticks after boot, field 22 of `/proc/PID/stat`).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Fields from the third on: state is field 3, start time field 22.
    after_name.split_ascii_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt as _;

    use super::*;

    #[test]
    fn a_written_down_group_is_stopped_by_the_next_run() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let folder = folder(dir.path());
        #[expect(
            clippy::disallowed_methods,
            reason = "a test starts the group a killed run leaves"
        )]
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .process_group(0)
            .spawn()
            .expect("sleep starts");
        let entry = Entry::write(&folder, child.id());
        std::mem::forget(entry);
        assert!(start_time(child.id()).is_some());
        let notes = stop_leftovers(&folder);
        assert_eq!(notes.len(), 1, "{notes:?}");
        let status = child.wait().expect("sleep is reaped");
        assert!(!status.success());
        assert_eq!(std::fs::read_dir(&folder).expect("the folder").count(), 0);
        // A group that is gone is crossed out without a word.
        std::mem::forget(Entry::write(&folder, child.id()));
        assert!(stop_leftovers(&folder).is_empty());
    }
}
