//! Accuracy evidence, the runner's half: reading a dataset from a tree and sgl-eval's files
//! from a container's folder as untrusted files, and fetching a gated dataset ([`gated`]).
//!
//! The evaluator and the parsers are `prgate_measure::accuracy`'s, re-exported here so that
//! `accuracy::evaluate`, `accuracy::parse_dataset`, ... read as before: this module reads the
//! files (a regular file below its root, no link followed, size-capped: [`crate::untrusted`])
//! and hands their text over.

pub mod gated;
pub mod sgl_eval;

use std::path::{Path, PathBuf};

pub use prgate_measure::accuracy::*;

/// Why an accuracy file cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum AccuracyError {
    /// A file cannot be read.
    #[error("error reading {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file of an untrusted tree (a dataset, a command's metrics) is not read.
    #[error(transparent)]
    Untrusted(#[from] crate::untrusted::UntrustedFileError),
    /// A file cannot be parsed.
    #[error("error parsing {}: {error}", path.display())]
    Parse { path: PathBuf, error: ParseError },
}

/// The largest dataset file the built-in evaluator reads: 64 MiB.
pub const MAX_DATASET_FILE: u64 = 64 * 1024 * 1024;

/// Reads the JSON Lines dataset file `relative` of `tree` (a PR's or the base's tree): a
/// regular file below it of at most [`MAX_DATASET_FILE`] bytes, reached without following a
/// link, so a dataset that is a link to a host file is refused, not sent to the server.
pub fn read_dataset(tree: &Path, relative: &Path) -> Result<Vec<Question>, AccuracyError> {
    let text = crate::untrusted::read_to_string(tree, relative, MAX_DATASET_FILE)?;
    let path = tree.join(relative);
    parse_dataset(&text).map_err(|error| AccuracyError::Parse { path, error })
}
