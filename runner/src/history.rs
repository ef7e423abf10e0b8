//! The history folder: the ledger of merged changes and the PR tests' saved results waiting for
//! their PR to merge (docs/history.md).
//!
//! ```text
//! <history-dir>/ledger.jsonl         the ledger (prgate_gate::history::Line, one a line)
//! <history-dir>/ledger.lock          its lock (crate::ledger)
//! <history-dir>/runs/<commit>.jsonl  what each finished PR test of that commit measured, one
//!                                    prgate_gate::history::RunRecord a line (and its lock)
//! ```
//!
//! The ledger is appended through [`crate::ledger::LedgerFile`] (an exclusive `flock`, the old
//! bytes and the new line written to a temporary file renamed over it), the health ledger's
//! machinery: a reader sees the old ledger or the new one, never half a line. The checks that
//! keep it honest are made under the lock, against what the ledger holds then: a PR is recorded
//! once (a second merge event of it, a re-run of the job, a merge queue's second result: its
//! run already counted); an anchor run is recorded only against the reference in force. A saved
//! run is appended the same way to its commit's file: a PR run again after a failure keeps every
//! run, and its line pools them (`merged_line`), so that re-running until a pass does not bias
//! the chain.
//!
//! The folder is `<cache-dir>/history` unless the command line names another: point the nodes
//! and the orchestrator at one shared folder, as for the health ledger (docs/node.md).
//!
//! What it leaves to others: the lines' meaning and the chain's statistics
//! ([`prgate_gate::history`], [`prgate_gate::drift`]), the merge event (`prgate_github`). What
//! a finished run saves, and an anchor run's line with the git facts it needs, are `record`'s.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use prgate_gate::history::{
    Anchor, Line, LineError, MergeFacts, Merged, Reset, RunRecord, merged_line, parse_ledger,
};

use crate::ledger::{LedgerFile, LedgerIoError};
use crate::node::NodeProfile;

/// The history folder under the cache directory when the command line names none.
pub const DEFAULT_DIR_NAME: &str = "history";

/// The ledger's name in the folder (`ledger.jsonl`).
const LEDGER_NAME: &str = "ledger";

/// Why the history could not be read or written, or refused a line.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(transparent)]
    Ledger(#[from] LedgerIoError),
    #[error("{path}, {error}")]
    Line { path: PathBuf, error: LineError },
    #[error("{path}: {problem}")]
    Run { path: PathBuf, problem: String },
    #[error("{commit:?} is not a commit (40 hex digits)")]
    Commit { commit: String },
    #[error(
        "the anchor run measured from {anchor}, but the reference is {reference}\nhint: run the anchor again from `prgate history reference`"
    )]
    OtherReference { anchor: String, reference: String },
}

/// The history folder of `node`: `<cache-dir>/history`.
pub fn history_dir(node: &NodeProfile) -> PathBuf {
    node.cache_dir().join(DEFAULT_DIR_NAME)
}

/// What [`HistoryDir::record_merged`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Recorded {
    /// The PR's line was appended.
    Appended(Box<Merged>),
    /// The ledger already has the PR: nothing was written.
    AlreadyRecorded { pr: u64 },
}

/// One history folder.
#[derive(Debug, Clone)]
pub struct HistoryDir {
    dir: PathBuf,
}

impl HistoryDir {
    /// The folder `dir`; nothing is read or created yet.
    pub fn new(dir: &Path) -> HistoryDir {
        HistoryDir { dir: dir.to_path_buf() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn ledger(&self) -> LedgerFile {
        LedgerFile::new(&self.dir, LEDGER_NAME)
    }

    /// The ledger file.
    pub fn ledger_path(&self) -> PathBuf {
        self.ledger().path()
    }

    /// Every line of the ledger, oldest first; none when it does not exist yet.
    pub fn lines(&self) -> Result<Vec<Line>, HistoryError> {
        self.parse(&self.ledger().read()?)
    }

    fn parse(&self, text: &str) -> Result<Vec<Line>, HistoryError> {
        parse_ledger(text).map_err(|error| HistoryError::Line { path: self.ledger_path(), error })
    }

    /// The saved runs of `commit`: `runs/<commit>.jsonl`.
    fn runs_file(&self, commit: &str) -> Result<LedgerFile, HistoryError> {
        let plain = commit.len() == 40 && commit.bytes().all(|byte| byte.is_ascii_hexdigit());
        if !plain {
            return Err(HistoryError::Commit { commit: commit.to_owned() });
        }
        Ok(LedgerFile::new(&self.dir.join("runs"), &commit.to_ascii_lowercase()))
    }

    /// The file of `commit`'s saved runs.
    pub fn runs_path(&self, commit: &str) -> Result<PathBuf, HistoryError> {
        Ok(self.runs_file(commit)?.path())
    }

    /// Saves what a finished PR test measured, after the earlier runs of the same commit.
    pub fn save_run(&self, run: &RunRecord) -> Result<PathBuf, HistoryError> {
        let file = self.runs_file(&run.tested_commit)?;
        let line = serde_json::to_string(run).unwrap_or_default();
        file.append(|_text| Ok::<_, HistoryError>((vec![line], ())))?;
        Ok(file.path())
    }

    /// The saved runs of `commit`, oldest first; none when it has none.
    pub fn runs(&self, commit: &str) -> Result<Vec<RunRecord>, HistoryError> {
        let file = self.runs_file(commit)?;
        let path = file.path();
        let mut runs = Vec::new();
        for (index, line) in file.read()?.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let problem = |problem: String| HistoryError::Run {
                path: path.clone(),
                problem: format!("line {}: {problem}", index + 1),
            };
            let run: RunRecord =
                serde_json::from_str(line).map_err(|error| problem(error.to_string()))?;
            if run.version != prgate_gate::history::LEDGER_VERSION {
                return Err(problem(format!(
                    "version {} is not one this prgate reads",
                    run.version
                )));
            }
            runs.push(run);
        }
        Ok(runs)
    }

    /// Records a merged PR once: its line from the saved runs of its head and, when the merge
    /// commit was a merge queue's and has saved runs, those ([`merged_line`]: each model counts
    /// once; a commit's runs are pooled).
    pub fn record_merged(&self, facts: &MergeFacts) -> Result<Recorded, HistoryError> {
        let pr_runs = self.runs(&facts.head_commit)?;
        let mut queue_runs = self.runs(&facts.merge_commit)?;
        queue_runs.retain(|run| run.merge_queue);
        self.ledger().append(|text| {
            let lines = self.parse(text)?;
            let known =
                lines.iter().any(|line| matches!(line, Line::Merged(m) if m.pr == facts.pr));
            if known {
                return Ok((Vec::new(), Recorded::AlreadyRecorded { pr: facts.pr }));
            }
            let merged = merged_line(facts, &pr_runs, &queue_runs);
            Ok((vec![Line::Merged(merged.clone()).to_json()], Recorded::Appended(Box::new(merged))))
        })
    }

    /// Records an anchor run, refused unless it measured from the reference in force.
    pub fn record_anchor(
        &self,
        anchor: &Anchor,
        reference: impl FnOnce(&[Line]) -> Option<String>,
    ) -> Result<(), HistoryError> {
        self.ledger().append(|text| {
            let lines = self.parse(text)?;
            if let Some(reference) = reference(&lines)
                && reference != anchor.reference_commit
            {
                return Err(HistoryError::OtherReference {
                    anchor: anchor.reference_commit.clone(),
                    reference,
                });
            }
            Ok((vec![Line::Anchor(anchor.clone()).to_json()], ()))
        })
    }

    /// Records a new reference.
    pub fn reset(&self, reset: &Reset) -> Result<(), HistoryError> {
        self.ledger().append(|text| {
            self.parse(text)?;
            Ok((vec![Line::Reset(reset.clone()).to_json()], ()))
        })
    }
}

/// Now as the ledger writes it: RFC 3339 in UTC, to the second.
pub fn now() -> String {
    crate::health::rfc3339_utc(SystemTime::now())
}

mod record;
pub use record::{AnchorError, AnchorRun, RunFacts, Saved, record_anchor_run, save_run};

#[cfg(test)]
mod tests;
