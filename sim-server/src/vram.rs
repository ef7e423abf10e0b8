//! A fake GPU's memory, for the tests of what reads a node's GPU memory (the runner's check that
//! a released server gave its GPUs back).
//!
//! A server whose profile has a `vram-dir` keeps the bytes of GPU memory it holds in a file of
//! that folder named `<pid>-<port>`, written whole (a temporary file renamed): `vram-bytes` from
//! its load on, `0` while its memory is released, and `vram-bytes` again once it is woken. A
//! server with `release-keeps-memory` answers the release as the engines do and keeps its
//! memory (its file does not change): the server that lies; one with `retake-memory-after-ms`
//! gives it back and takes it again that long after (`memory`). One with `busy-after-release-ms`
//! leaves its GPU busy that long after a release, as work it queued before its answer would keep
//! a real GPU busy whether or not its process is paused: its file's second line says until when
//! (`busy-until-ms <milliseconds since the Unix epoch>`), a deadline the reader compares with its
//! own clock, since a paused server writes nothing. When the folder has a file `total`
//! (bytes), a load or a wake that does not fit beside what the folder's other live servers hold
//! fails, as a real GPU's out-of-memory does; a server is live while its process runs
//! (`/proc/<pid>`), so a killed server's memory is free, as the driver frees it. A stopped
//! server's file is removed.
//!
//! What it leaves to others: the memory endpoints (`memory`), and reading the folder as a
//! GPU's memory (a test's fake `amd-smi` sums the same files).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use crate::Profile;

/// The name of the fake GPU's size in a `vram-dir`: a decimal number of bytes.
pub const TOTAL_FILE: &str = "total";

/// The word that starts a server file's second line: until when its GPU is busy.
pub const BUSY_UNTIL: &str = "busy-until-ms";

/// A server's share of a fake GPU's memory.
#[derive(Debug)]
pub(crate) struct FakeVram {
    dir: PathBuf,
    /// `<dir>/<pid>-<port>`.
    file: PathBuf,
    bytes: u64,
    keeps_on_release: bool,
    /// How long its GPU stays busy after a release (`busy-after-release-ms`).
    busy_after_release: Option<Duration>,
    /// Until when its GPU is busy, in milliseconds since the Unix epoch; 0 when it never was.
    busy_until_ms: AtomicU64,
}

/// What went wrong with a fake GPU's memory.
#[derive(Debug, thiserror::Error)]
pub enum VramError {
    #[error("error writing the fake GPU memory file {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("error reading the fake GPU memory folder {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} holds {text:?}, not a number of bytes", path.display())]
    NotBytes { path: PathBuf, text: String },
    #[error(
        "out of memory: {asked} bytes asked of the fake GPU {}, whose other servers hold {held} of its {total} bytes",
        dir.display()
    )]
    OutOfMemory { asked: u64, held: u64, total: u64, dir: PathBuf },
}

impl FakeVram {
    /// The share of a server listening on `port`, when its profile has a `vram-dir`.
    pub(crate) fn of(profile: &Profile, port: u16) -> Option<FakeVram> {
        let dir = profile.vram_dir.clone()?;
        let file = dir.join(format!("{}-{port}", std::process::id()));
        Some(FakeVram {
            dir,
            file,
            bytes: profile.vram_bytes,
            keeps_on_release: profile.release_keeps_memory,
            busy_after_release: profile.busy_after_release,
            busy_until_ms: AtomicU64::new(0),
        })
    }

    /// Takes the profile's `vram-bytes` (a load, a wake), or says why the fake GPU has no room.
    pub(crate) fn take(&self) -> Result<(), VramError> {
        if let Some(total) = read_bytes(&self.dir.join(TOTAL_FILE))? {
            let held = self.held_by_others()?;
            if held.saturating_add(self.bytes) > total {
                let dir = self.dir.clone();
                return Err(VramError::OutOfMemory { asked: self.bytes, held, total, dir });
            }
        }
        self.write(self.bytes)
    }

    /// Gives the memory back (a release), unless the profile keeps it, and leaves the GPU busy
    /// for the profile's `busy-after-release-ms`: whether the memory was kept.
    pub(crate) fn release(&self) -> Result<bool, VramError> {
        if let Some(busy) = self.busy_after_release {
            let until =
                unix_ms().saturating_add(u64::try_from(busy.as_millis()).unwrap_or(u64::MAX));
            self.busy_until_ms.store(until, Ordering::Release);
        }
        let held = if self.keeps_on_release { self.bytes } else { 0 };
        self.write(held).map(|()| self.keeps_on_release)
    }

    /// What the folder's other live servers hold, in bytes.
    fn held_by_others(&self) -> Result<u64, VramError> {
        let read_error = |source| VramError::Read { path: self.dir.clone(), source };
        let mut held = 0_u64;
        for entry in std::fs::read_dir(&self.dir).map_err(read_error)? {
            let path = entry.map_err(read_error)?.path();
            if path == self.file || !live(&path) {
                continue;
            }
            held = held.saturating_add(read_bytes(&path)?.unwrap_or(0));
        }
        Ok(held)
    }

    /// Writes the file: the bytes held, and until when the GPU is busy when it ever was.
    fn write(&self, bytes: u64) -> Result<(), VramError> {
        let name = self.file.file_name().unwrap_or_default().to_string_lossy();
        let temporary = self.dir.join(format!(".{name}.new"));
        let busy_until = self.busy_until_ms.load(Ordering::Acquire);
        let busy =
            if busy_until > 0 { format!("{BUSY_UNTIL} {busy_until}\n") } else { String::new() };
        std::fs::write(&temporary, format!("{bytes}\n{busy}"))
            .and_then(|()| std::fs::rename(&temporary, &self.file))
            .map_err(|source| VramError::Write { path: self.file.clone(), source })
    }
}

impl Drop for FakeVram {
    /// A stopped server holds nothing.
    fn drop(&mut self) {
        let _gone = std::fs::remove_file(&self.file);
    }
}

/// Whether `path` is a server's file (`<pid>-<port>`) whose process still runs.
fn live(path: &Path) -> bool {
    let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
    match name.split_once('-') {
        Some((pid, port)) if pid.parse::<u32>().is_ok() && port.parse::<u16>().is_ok() => {
            Path::new("/proc").join(pid).exists()
        }
        _ => false,
    }
}

/// The number of bytes `path` holds (its first line); `None` when there is no such file.
fn read_bytes(path: &Path) -> Result<Option<u64>, VramError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(source) if source.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(VramError::Read { path: path.to_owned(), source }),
    };
    let first = text.lines().next().unwrap_or_default().trim();
    let bytes = first.parse().map_err(|_not_a_number| VramError::NotBytes {
        path: path.to_owned(),
        text: first.to_owned(),
    })?;
    Ok(Some(bytes))
}

/// Now, in milliseconds since the Unix epoch (0 for a clock before it).
fn unix_ms() -> u64 {
    let since = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}
