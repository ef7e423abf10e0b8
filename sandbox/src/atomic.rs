//! Replacing a file whole or not at all: the one way prgate writes a file a reader or a rerun
//! may see (an evidence record, a redacted log, a ledger, a cache entry).
//!
//! The bytes go to a temporary file in the same folder (a name that starts with a dot and does
//! not end in the target's extension), flushed to disk, renamed over the path, and the folder
//! is flushed so the rename survives a crash of the machine: a write killed at any moment leaves
//! the old content or all of the new, never half of it.
//!
//! What it leaves to others: what is written and when (`prgate_runner::results`, `ledger`,
//! `cache`, and [`crate::redact`]'s redacted copies).

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `bytes` to `path` so that `path` is either its old content or all of `bytes`: a
/// temporary file in the same folder, flushed to disk, renamed over `path`, then the folder
/// flushed so the rename survives a crash of the machine.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomically_with(path, |file| file.write_all(bytes).map(|()| true)).map(|_kept| ())
}

/// [`write_atomically`] with what `write` writes to the temporary file; `path` is replaced
/// only when `write` says so (`Ok(true)`), else the temporary file is removed. Returns whether
/// `path` was replaced.
pub fn write_atomically_with(
    path: &Path,
    write: impl FnOnce(&mut File) -> io::Result<bool>,
) -> io::Result<bool> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let folder = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|name| name.to_str()).unwrap_or("record");
    let temporary = folder.join(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&temporary)?;
        if !write(&mut file)? {
            return Ok(false);
        }
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temporary, path)?;
        File::open(folder)?.sync_all()?;
        Ok(true)
    })();
    if !matches!(written, Ok(true)) {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}
