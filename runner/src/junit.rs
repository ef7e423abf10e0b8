//! pytest's JUnit XML, the runner's half: a file read and handed to
//! `prgate_measure::junit::parse_junit`; the argv and the parser are `prgate_measure::junit`'s,
//! re-exported here.

use std::path::{Path, PathBuf};

use prgate_gate::evidence::TestResult;
pub use prgate_measure::junit::*;

/// Why a JUnit XML file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum JunitError {
    /// The file cannot be read (pytest did not write it: it crashed, or never ran).
    #[error("error reading the JUnit XML file {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not JUnit XML, or is cut short.
    #[error("error parsing the JUnit XML file {}: {error}", path.display())]
    Parse { path: PathBuf, error: ParseError },
}

/// Reads the JUnit XML file at `path` into one result per test case, in the file's order.
pub fn read_junit_file(path: &Path) -> Result<Vec<TestResult>, JunitError> {
    let bytes =
        std::fs::read(path).map_err(|source| JunitError::Read { path: path.to_owned(), source })?;
    parse_junit(&bytes).map_err(|error| JunitError::Parse { path: path.to_owned(), error })
}
