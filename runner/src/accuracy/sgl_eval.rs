//! sgl-eval's results, the runner's half: the run directory found under sgl-eval's `--out-dir`
//! and its files read as untrusted files; the parsing is `prgate_measure::accuracy::sgl_eval`'s,
//! re-exported here.

use std::path::{Path, PathBuf};

use prgate_gate::evidence::Outcome;
pub use prgate_measure::accuracy::sgl_eval::*;

use super::{AccuracyError, ParseError};

/// The one run directory (`sgl_eval_*` holding a `metrics.json`) under sgl-eval's `--out-dir`.
/// Give every run a fresh out-dir: two run directories are an error.
pub fn find_run_dir(out_dir: &Path) -> Result<PathBuf, AccuracyError> {
    let read = |source| AccuracyError::Read { path: out_dir.to_owned(), source };
    let mut runs = Vec::new();
    for entry in std::fs::read_dir(out_dir).map_err(read)? {
        let entry = entry.map_err(read)?;
        let path = entry.path();
        // A link is not a run directory (the file type is the entry's own, not its target's).
        let is_directory = entry.file_type().is_ok_and(|kind| kind.is_dir());
        let is_run = is_directory
            && path.file_name().and_then(|name| name.to_str()).is_some_and(|name| {
                name.starts_with("sgl_eval_")
                    && crate::untrusted::open_path(out_dir, &path.join(METRICS_FILE)).is_ok()
            });
        if is_run {
            runs.push(path);
        }
    }
    match runs.len() {
        1 => Ok(runs.remove(0)),
        found => Err(AccuracyError::Parse {
            path: out_dir.to_owned(),
            error: ParseError {
                line: None,
                field: None,
                problem: format!(
                    "{found} sgl-eval run directories (sgl_eval_*/{METRICS_FILE}); expected one"
                ),
            },
        }),
    }
}

/// Reads a run directory `run_dir` below `out_dir` (the folder the command wrote into): its
/// `metrics.json`, and its `output-rs0.jsonl` when there is one. Both are read as untrusted
/// files below `out_dir` (regular files, no link followed, at most
/// [`MAX_RESULT_FILE`](crate::untrusted::MAX_RESULT_FILE) bytes).
pub fn read_run(out_dir: &Path, run_dir: &Path, benchmark: &str) -> Result<Outcome, AccuracyError> {
    let metrics_path = run_dir.join(METRICS_FILE);
    let parse_error = |path: &Path| {
        let path = path.to_owned();
        move |error| AccuracyError::Parse { path, error }
    };
    let metrics =
        parse_metrics(&read(out_dir, &metrics_path)?).map_err(parse_error(&metrics_path))?;
    let predictions_path = run_dir.join(PREDICTIONS_FILE);
    let per_question = match read(out_dir, &predictions_path) {
        Ok(text) => Some(parse_predictions(&text).map_err(parse_error(&predictions_path))?),
        Err(AccuracyError::Untrusted(error))
            if matches!(error.problem, crate::untrusted::Problem::Missing) =>
        {
            None
        }
        Err(error) => return Err(error),
    };
    outcome(benchmark, &metrics, per_question).map_err(parse_error(&metrics_path))
}

fn read(out_dir: &Path, path: &Path) -> Result<String, AccuracyError> {
    let bytes = crate::untrusted::read_path(out_dir, path, crate::untrusted::MAX_RESULT_FILE)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
