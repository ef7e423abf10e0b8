//! An append-only JSON-lines ledger: one file, one JSON object a line, oldest first, to which
//! writers only ever add lines. The node health ledger ([`crate::health`]) and the history of
//! merged changes ([`crate::history`]) are two of them.
//!
//! A writer takes an exclusive `flock` on the ledger's lock file (`<dir>/<name>.lock`, the
//! [host lock]'s model: the kernel lets it go when the holder dies, so a killed writer never
//! blocks the next one), reads the file, and replaces it with its old bytes and the new lines
//! through [`crate::results::write_atomically`] (a temporary file in the same folder, flushed,
//! renamed over the ledger, the folder flushed). A reader takes no lock and sees the old file or
//! the new one, never half a line; a writer killed at any moment loses nothing already written.
//!
//! What it leaves to others: what the lines say, their format and their checks.
//!
//! [host lock]: crate::lock

use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};

/// A ledger that could not be read or written: the file and what the system said (in the
/// message only, so that a chain printed with `{:#}` says it once).
#[derive(Debug, thiserror::Error)]
#[error("{path}: {error}")]
pub struct LedgerIoError {
    pub path: PathBuf,
    pub error: io::Error,
}

/// One ledger file, `<dir>/<name>.jsonl`, and its lock, `<dir>/<name>.lock`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerFile {
    dir: PathBuf,
    name: String,
}

impl LedgerFile {
    /// The ledger `name` in `dir`; nothing is read or created yet. `name` is a plain file
    /// name (the caller checks it).
    pub fn new(dir: &Path, name: &str) -> LedgerFile {
        LedgerFile { dir: dir.to_path_buf(), name: name.to_owned() }
    }

    /// The ledger's file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(format!("{}.jsonl", self.name))
    }

    /// The file's text; empty when it does not exist.
    pub fn read(&self) -> Result<String, LedgerIoError> {
        let path = self.path();
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(text),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(String::new()),
            Err(error) => Err(LedgerIoError { path, error }),
        }
    }

    /// Under the ledger's lock: hands `change` the file's text (empty when it does not exist
    /// yet), and appends the lines it returns (each without its newline), atomically; returns
    /// what `change` answered. Nothing is written when it returns no line or an error.
    pub fn append<T, E>(
        &self,
        change: impl FnOnce(&str) -> Result<(Vec<String>, T), E>,
    ) -> Result<T, E>
    where
        E: From<LedgerIoError>,
    {
        let io_error = |path: &Path| {
            let path = path.to_path_buf();
            move |error| LedgerIoError { path, error }
        };
        std::fs::create_dir_all(&self.dir).map_err(io_error(&self.dir))?;
        let lock_path = self.dir.join(format!("{}.lock", self.name));
        let lock = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(io_error(&lock_path))?;
        lock.lock().map_err(io_error(&lock_path))?;
        let mut text = self.read()?;
        let (lines, answer) = change(&text)?;
        if !lines.is_empty() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            for line in &lines {
                text.push_str(line);
                text.push('\n');
            }
            let path = self.path();
            crate::results::write_atomically(&path, text.as_bytes()).map_err(io_error(&path))?;
        }
        drop(lock);
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    enum Problem {
        Io,
        Refused,
    }

    impl From<LedgerIoError> for Problem {
        fn from(_error: LedgerIoError) -> Problem {
            Problem::Io
        }
    }

    #[test]
    fn lines_are_appended_under_the_lock_and_a_refusal_writes_nothing() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let ledger = LedgerFile::new(dir.path(), "book");
        assert_eq!(ledger.read().expect("an absent ledger reads as empty"), "");
        let seen = ledger
            .append(|text| Ok::<_, Problem>((vec!["{\"a\":1}".to_owned()], text.to_owned())))
            .expect("appended");
        assert_eq!(seen, "");
        ledger
            .append(|text| {
                assert_eq!(text, "{\"a\":1}\n");
                Ok::<_, Problem>((vec!["{\"b\":2}".to_owned(), "{\"c\":3}".to_owned()], ()))
            })
            .expect("appended");
        let refused = ledger.append(|_text| Err::<(Vec<String>, ()), _>(Problem::Refused));
        assert!(matches!(refused, Err(Problem::Refused)));
        ledger.append(|_text| Ok::<_, Problem>((Vec::new(), ()))).expect("nothing to add");
        assert_eq!(ledger.read().expect("read"), "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n");
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("listed")
            .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        // No temporary file is left beside the ledger and its lock.
        assert_eq!(names, ["book.jsonl", "book.lock"]);
    }

    #[test]
    fn a_file_without_a_last_newline_gets_one_before_the_new_line() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let ledger = LedgerFile::new(dir.path(), "book");
        std::fs::write(ledger.path(), "{\"a\":1}").expect("written");
        ledger.append(|_text| Ok::<_, Problem>((vec!["{\"b\":2}".to_owned()], ()))).expect("ok");
        assert_eq!(ledger.read().expect("read"), "{\"a\":1}\n{\"b\":2}\n");
    }
}
