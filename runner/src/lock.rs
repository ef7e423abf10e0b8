//! One host, one run: the host lock every `prgate run` takes before it touches the GPUs.
//!
//! [`HostLock::acquire`] takes an exclusive lock on a lock file (by default
//! `<cache-dir>/prgate.lock`, [`lock_path`]) with std's [`File::try_lock`], which is `flock(2)`
//! on Linux. A second run on the host is refused at once, or polls until its `wait` has passed,
//! and its error names the holder. The lock belongs to the open file, so the kernel releases it
//! when the holder's process ends however it ends, `SIGKILL` included: a lock left by a dead
//! run never blocks, and there is no stale-lock cleanup to get wrong. The file is opened
//! close-on-exec (std does so for every file), so the runner's children, which may outlive a
//! runner killed with `SIGKILL`, never hold it.
//!
//! The holder writes who it is into the file after locking ([`Holder`]: pid, host, the run's
//! description and its start time, as TOML), so a refused run can say who is in the way:
//!
//! ```text
//! the host is busy: prgate run for PR #12 (pid 4242 on mi355x-1) since 2026-11-29T18:00:00Z
//! hint: wait for it with --wait-lock DURATION
//! ```
//!
//! The content is information only: the lock is the `flock`, never the file's text, so a file
//! with garbage in it (or a dead run's details) blocks nobody and is overwritten by the next
//! holder. The holder empties the file when it lets go.
//!
//! What it leaves to others: what the host is busy with (a GPU used by something that is not
//! prgate is the preflight's finding), and the command line's
//! `--wait-lock` flag, which gives `wait`.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::health::rfc3339_utc;
use crate::node::{NodeProfile, Spelling, write_duration};

/// The lock file's name in the node's cache directory.
pub const LOCK_FILE_NAME: &str = "prgate.lock";

/// The host lock of `node`: `<cache-dir>/prgate.lock`.
pub fn lock_path(node: &NodeProfile) -> PathBuf {
    node.cache_dir().join(LOCK_FILE_NAME)
}

/// The host lock, held until it is dropped (or [released](HostLock::release)).
#[derive(Debug)]
pub struct HostLock {
    file: File,
    path: PathBuf,
    holder: Holder,
}

/// Who holds the lock, as its holder wrote it into the lock file. Read leniently (unknown
/// keys are ignored), since it is information, never the lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Holder {
    /// The holder's process id.
    pub pid: u32,
    /// The host's name, as `uname -n` gives it.
    pub host: String,
    /// What the holder is doing, in words: `prgate run for PR #12`.
    pub run: String,
    /// When it took the lock: RFC 3339, UTC, to the second.
    pub since: String,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock (and still did when the wait, if any, ran out).
    #[error("{}", busy_message(.holder.as_ref(), .path, *.waited))]
    Busy {
        /// The lock file.
        path: PathBuf,
        /// Who holds it, when the lock file says so.
        holder: Option<Holder>,
        /// How long this process waited; `None` when it did not.
        waited: Option<Duration>,
    },
    /// The lock file could not be created, opened, locked or written.
    #[error("host lock {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl HostLock {
    /// Takes the host lock at `path` for the run `description` (`prgate run for PR #12`),
    /// creating the file and its folder when they are missing. When another process holds it,
    /// polls until `wait` has passed; `None` or zero refuses at once.
    pub fn acquire(
        path: &Path,
        description: &str,
        wait: Option<Duration>,
    ) -> Result<HostLock, LockError> {
        let io_error = |source| LockError::Io { path: path.to_path_buf(), source };
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).map_err(io_error)?;
        }
        // Opened without truncating: until the lock is ours, the text is the holder's.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_error)?;
        let wait = wait.filter(|wait| !wait.is_zero());
        let started = Instant::now();
        let mut pause = FIRST_PAUSE;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(source)) => return Err(io_error(source)),
            }
            let waited = started.elapsed();
            let left = wait.and_then(|wait| wait.checked_sub(waited)).unwrap_or_default();
            if left.is_zero() {
                return Err(LockError::Busy {
                    path: path.to_path_buf(),
                    holder: read_holder(&mut file),
                    waited: wait.map(|_| waited),
                });
            }
            thread::sleep(pause.min(left));
            pause = (pause * 2).min(MAX_PAUSE);
        }
        let holder = Holder {
            pid: std::process::id(),
            host: host_name(),
            run: description.to_owned(),
            since: rfc3339_utc(SystemTime::now()),
        };
        write_holder(&mut file, &holder).map_err(io_error)?;
        Ok(HostLock { file, path: path.to_path_buf(), holder })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What this process wrote into the lock file.
    pub fn holder(&self) -> &Holder {
        &self.holder
    }

    /// Lets the lock go: empties the file and unlocks it. Dropping the lock does the same.
    pub fn release(self) {
        drop(self);
    }
}

impl Drop for HostLock {
    fn drop(&mut self) {
        // Emptied while still locked, so no reader sees a holder that has gone. The lock
        // itself goes with the file; neither step can fail in a way worth reporting.
        let _ignored = self.file.set_len(0);
        let _ignored = self.file.unlock();
    }
}

/// The first pause between two tries of a busy lock; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
/// The longest pause between two tries of a busy lock.
const MAX_PAUSE: Duration = Duration::from_secs(1);

fn busy_message(holder: Option<&Holder>, path: &Path, waited: Option<Duration>) -> String {
    let busy = match waited {
        Some(waited) => format!("the host is still busy after {}", format_duration(waited)),
        None => "the host is busy".to_owned(),
    };
    let who = match holder {
        Some(holder) => {
            format!("{} (pid {} on {}) since {}", holder.run, holder.pid, holder.host, holder.since)
        }
        None => format!("another process holds {} and has not said who it is", path.display()),
    };
    format!("{busy}: {who}\nhint: wait for it with --wait-lock DURATION")
}

/// The holder as the lock file says, when it says so in the expected form.
fn read_holder(file: &mut File) -> Option<Holder> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    toml::from_str(&text).ok()
}

fn write_holder(file: &mut File, holder: &Holder) -> io::Result<()> {
    let text = toml::to_string(holder).map_err(io::Error::other)?;
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(text.as_bytes())?;
    file.sync_data()
}

fn host_name() -> String {
    let name = rustix::system::uname().nodename().to_string_lossy().into_owned();
    if name.is_empty() { "an unnamed host".to_owned() } else { name }
}

/// A duration in hours, minutes and seconds, as `--wait-lock` takes it: `1h30m`, `45s`.
fn format_duration(duration: Duration) -> String {
    write_duration(duration, Spelling::Units)
}

#[cfg(test)]
mod tests;
