//! TCP ports for servers, handed out without races between the prgate runs on a node.
//!
//! A [`PortLease`] is a port from a range plus an exclusive lock (`flock`) on that port's lock
//! file in a directory all runs on the node share. The lock lives as long as the lease and dies
//! with the process, so a killed run leaves no stale lock. Before a port is handed out it is
//! bound once on all interfaces and let go, so a port some other program listens on is
//! skipped; ports in the kernel's ephemeral range (`ip_local_port_range`) are skipped too, so
//! the kernel does not give them to outgoing connections or to `bind(port 0)`.
//!
//! The race that is left: between that probe and the server's own `bind`, a program that is
//! not prgate and that picks this very port by number can take it. The server then fails to
//! start, which the health gate reports with the server's log, and the step can be retried on
//! another lease. Keeping the probe socket open until the server starts would not close that
//! gap (the server cannot inherit it) and would make the server's own `bind` fail.

use std::fs::{File, OpenOptions};
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// An inclusive range of TCP ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    first: u16,
    last: u16,
}

impl PortRange {
    /// 20000 to 29999: clear of the privileged ports and of Linux's default ephemeral range
    /// (32768 to 60999).
    pub const DEFAULT: PortRange = PortRange { first: 20000, last: 29999 };

    /// The ports `first` to `last`, both included.
    pub fn new(first: u16, last: u16) -> Result<PortRange, PortError> {
        if first == 0 || first > last {
            return Err(PortError::EmptyRange { first, last });
        }
        Ok(PortRange { first, last })
    }

    pub fn first(&self) -> u16 {
        self.first
    }

    pub fn last(&self) -> u16 {
        self.last
    }
}

impl Default for PortRange {
    fn default() -> PortRange {
        PortRange::DEFAULT
    }
}

/// A port held for one server: no other lease in the same lock directory gets it while this
/// one lives.
#[derive(Debug)]
pub struct PortLease {
    port: u16,
    /// Holds the lock; closing it releases the lock.
    _lock: File,
}

/// Why no port could be leased.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error("the port range {first}..={last} is empty")]
    EmptyRange { first: u16, last: u16 },
    #[error("cannot use the port lock directory {path}: {source}")]
    LockDirectory { path: PathBuf, source: io::Error },
    #[error(
        "no free port in {first}..={last}: each is leased by another prgate, in use, or in the ephemeral range\nhint: give the node a wider port range"
    )]
    Exhausted { first: u16, last: u16 },
}

impl PortLease {
    /// Leases a free port of `range`, with its lock file in `lock_dir` (created when missing),
    /// starting the search at a place that differs between runs so that runs do not queue up
    /// on the first ports.
    pub fn acquire(lock_dir: &Path, range: PortRange) -> Result<PortLease, PortError> {
        let directory_error =
            |source| PortError::LockDirectory { path: lock_dir.to_path_buf(), source };
        std::fs::create_dir_all(lock_dir).map_err(directory_error)?;
        let ephemeral = ephemeral_range();
        let size = u32::from(range.last - range.first) + 1;
        let start = search_start() % size;
        let candidates = (0..size)
            .filter_map(|step| u16::try_from(u32::from(range.first) + (start + step) % size).ok());
        let outside: Vec<u16> = candidates
            .filter(|port| !ephemeral.is_some_and(|(low, high)| (low..=high).contains(port)))
            .collect();
        for port in outside {
            let path = lock_dir.join(format!("port-{port}.lock"));
            let Ok(file) = OpenOptions::new().create(true).truncate(false).write(true).open(&path)
            else {
                continue;
            };
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => continue,
                Err(std::fs::TryLockError::Error(source)) => return Err(directory_error(source)),
            }
            if TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok() {
                return Ok(PortLease { port, _lock: file });
            }
        }
        Err(PortError::Exhausted { first: range.first, last: range.last })
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

/// The kernel's ephemeral port range, where it is known.
fn ephemeral_range() -> Option<(u16, u16)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut numbers = text.split_ascii_whitespace().map(str::parse::<u16>);
    Some((numbers.next()?.ok()?, numbers.next()?.ok()?))
}

/// A number that differs between processes and over time.
fn search_start() -> u32 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |time| time.subsec_nanos());
    nanos ^ std::process::id().wrapping_mul(2_654_435_761)
}
