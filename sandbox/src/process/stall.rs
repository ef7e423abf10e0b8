//! The progress watchdog: a command that stops making progress is stopped, not only one that
//! runs past its wall-clock limit.
//!
//! Progress is what a command leaves on disk: its log growing (a new line, a test's dot, a
//! benchmark's line per request) or any file of its output folder written (JUnit XML, a result
//! file, a metrics file). [`ProgressWatch`] looks at the sizes and modification times of the
//! watched paths at most every [`CHECK_EVERY`]; a folder is looked into [`MAX_DEPTH`] levels
//! deep and at most [`MAX_ENTRIES`] entries, through no symbolic link (a link is one entry, its
//! own metadata; the folders are a container's to write). When nothing of it changed for the
//! [`StallLimit`], the command has stalled. Reading metadata only, the watch never opens a
//! file of the command's.
//!
//! What it leaves to others: stopping the group (`ChildGroup::wait_with_limits`, and the
//! container's `Container::wait_with_limits`), the limit's value (the recipe's
//! `timeouts.stall`), and what a stall means for the verdict (`not-run`, reason `stalled`).

use std::hash::{Hash as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The limit's value and bounds are the recipe's (`timeouts.stall`).
pub use prgate_recipe::recipe::stall::{
    DEFAULT_STALL, MAX_STALL, MIN_STALL, StallLimit, StallLimitError,
};

/// How often the watched paths are looked at.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(250);
/// How deep a watched folder is looked into.
pub(crate) const MAX_DEPTH: usize = 3;
/// How many entries of a watched folder are looked at, at most.
pub(crate) const MAX_ENTRIES: usize = 4096;

/// The limits of one wait: the wall clock, and, when set, progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The wall-clock limit.
    pub timeout: Duration,
    /// Stop the command when nothing of `watched` changed for this long.
    pub stall: Option<(StallLimit, Vec<PathBuf>)>,
}

impl Limits {
    /// Only a wall-clock limit.
    pub fn wall_clock(timeout: Duration) -> Limits {
        Limits { timeout, stall: None }
    }
}

/// Watches paths for progress.
#[derive(Debug)]
pub struct ProgressWatch {
    watched: Vec<PathBuf>,
    limit: Duration,
    fingerprint: u64,
    last_change: Instant,
    last_check: Instant,
}

impl ProgressWatch {
    /// Starts watching `watched`: what they hold now is the starting point.
    pub fn new(limit: StallLimit, watched: &[PathBuf]) -> ProgressWatch {
        let now = Instant::now();
        ProgressWatch {
            watched: watched.to_vec(),
            limit: limit.get(),
            fingerprint: fingerprint(watched),
            last_change: now,
            last_check: now,
        }
    }

    /// How long nothing changed, looking again when `CHECK_EVERY` has passed.
    pub fn silent_for(&mut self, now: Instant) -> Duration {
        if now.saturating_duration_since(self.last_check) >= CHECK_EVERY {
            self.last_check = now;
            let fingerprint = fingerprint(&self.watched);
            if fingerprint != self.fingerprint {
                self.fingerprint = fingerprint;
                self.last_change = now;
            }
        }
        now.saturating_duration_since(self.last_change)
    }

    /// Whether the command has stalled: nothing changed for the limit.
    pub fn stalled(&mut self, now: Instant) -> bool {
        self.silent_for(now) >= self.limit
    }

    /// The limit.
    pub fn limit(&self) -> Duration {
        self.limit
    }
}

/// A hash of the sizes and modification times of everything under `paths`.
fn fingerprint(paths: &[PathBuf]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut budget = MAX_ENTRIES;
    for path in paths {
        path.hash(&mut hasher);
        visit(path, 0, &mut budget, &mut hasher);
    }
    hasher.finish()
}

fn visit(path: &Path, depth: usize, budget: &mut usize, hasher: &mut impl std::hash::Hasher) {
    if *budget == 0 {
        return;
    }
    *budget -= 1;
    // Never through a link: its own metadata only.
    let Ok(metadata) = std::fs::symlink_metadata(path) else {
        0u8.hash(hasher);
        return;
    };
    metadata.len().hash(hasher);
    metadata
        .modified()
        .ok()
        .and_then(|time| time.duration_since(SystemTime::UNIX_EPOCH).ok())
        .hash(hasher);
    if metadata.is_dir() && depth < MAX_DEPTH {
        let Ok(entries) = std::fs::read_dir(path) else { return };
        let mut names: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
        names.sort();
        for name in names {
            name.hash(hasher);
            visit(&name, depth + 1, budget, hasher);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_growing_file_or_a_new_file_in_a_folder_is_progress() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = dir.path().join("log");
        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join("deep")).expect("folders");
        std::fs::write(&log, "one\n").expect("a log");
        let watched = [log.clone(), out.clone()];
        let before = fingerprint(&watched);
        assert_eq!(fingerprint(&watched), before, "nothing changed");
        std::fs::write(&log, "one\ntwo\n").expect("a line more");
        let grown = fingerprint(&watched);
        assert_ne!(grown, before, "the log grew");
        std::fs::write(out.join("deep").join("result.json"), "{}").expect("a result");
        assert_ne!(fingerprint(&watched), grown, "a file appeared in the output folder");
    }
}
