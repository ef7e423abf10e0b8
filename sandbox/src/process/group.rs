//! Signals to a whole process group, and which processes are still in one.
//!
//! Sending goes through `rustix` (`kill(-pgid, sig)`) since the workspace forbids `unsafe`
//! and the standard library only signals single children; the membership comes from `/proc`.

use std::io;
use std::path::Path;

use rustix::io::Errno;
use rustix::process::{Pid, kill_process_group, test_kill_process_group};

/// The signals prgate sends to a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Term,
    Kill,
    /// Freezes the group (`SIGSTOP`, which no process can catch or ignore).
    Stop,
    /// Thaws a frozen group (`SIGCONT`).
    Cont,
}

/// Sends `signal` to every process of the group `pgid`; a group that is already gone is not
/// an error.
pub(crate) fn signal(pgid: i32, signal: Signal) -> io::Result<()> {
    let pid = group_id(pgid)?;
    let signal = match signal {
        Signal::Term => rustix::process::Signal::TERM,
        Signal::Kill => rustix::process::Signal::KILL,
        Signal::Stop => rustix::process::Signal::STOP,
        Signal::Cont => rustix::process::Signal::CONT,
    };
    match kill_process_group(pid, signal) {
        Ok(()) | Err(Errno::SRCH) => Ok(()),
        Err(errno) => Err(errno.into()),
    }
}

/// Whether the group `pgid` still has a process that is not a zombie. Where there is no
/// `/proc`, a zombie counts as alive.
pub(crate) fn alive(pgid: i32) -> bool {
    let Ok(pid) = group_id(pgid) else { return false };
    match test_kill_process_group(pid) {
        Err(Errno::SRCH) => false,
        Ok(()) | Err(_) if Path::new("/proc/self/stat").exists() => !group_members(pgid).is_empty(),
        Ok(()) | Err(_) => true,
    }
}

/// The pids of the processes of group `pgid` that are not zombies, sorted, read from `/proc`;
/// empty where there is no `/proc`.
pub fn group_members(pgid: i32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut members: Vec<u32> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|stat| {
                let (state, group) = parse_stat(&stat)?;
                Some(state != 'Z' && state != 'X' && group == pgid)
            }) == Some(true)
        })
        .collect();
    members.sort_unstable();
    members
}

/// The state and the process group from the text of `/proc/PID/stat`:
/// `pid (comm) state ppid pgrp ...`, where `comm` may hold spaces and parentheses.
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let _parent = fields.next()?;
    let group = fields.next()?.parse().ok()?;
    Some((state, group))
}

/// The group as a pid; never 0 or 1, which `kill` reads as "my group" and "everyone".
fn group_id(pgid: i32) -> io::Result<Pid> {
    Pid::from_raw(pgid).filter(|_| pgid > 1).ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("{pgid} is not a process group"))
    })
}

#[cfg(test)]
mod tests {
    use super::parse_stat;

    #[test]
    fn parses_state_and_group_even_with_odd_names() {
        let check = |stat: &str, expect: Option<(char, i32)>| assert_eq!(parse_stat(stat), expect);
        check("42 (sleep) S 1 42 42 0 -1", Some(('S', 42)));
        check("7 (a b) c) (Z) Z 3 9 9", Some(('Z', 9)));
        check("garbage", None);
    }
}
