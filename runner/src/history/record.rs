//! What a finished run leaves in the history folder: a PR test's saved measurements
//! ([`save_run`], waiting for its PR to merge) and an anchor run's line ([`record_anchor_run`],
//! with the merged PRs its head holds, read from git). The lines' shapes and the measurements'
//! reading of a verdict are the gate's ([`prgate_gate::history`]); the reference in force is
//! the drift chain's ([`prgate_gate::drift`]); the command lines are the binary's.

use std::fmt;
use std::path::{Path, PathBuf};

use prgate_gate::history::{Anchor, LEDGER_VERSION, Line, RunRecord};
use prgate_gate::{Evidence, GateConfig, Verdict};
use prgate_scope::Plan;

use super::{HistoryDir, HistoryError, now};

/// The facts of a finished PR test that its saved run keeps.
#[derive(Debug, Clone, Copy)]
pub struct RunFacts<'a> {
    pub pr: u64,
    pub title: &'a str,
    pub tested_commit: &'a str,
    pub base_commit: &'a str,
    pub merge_queue: bool,
    pub run_url: Option<&'a str>,
}

/// Saves what a finished PR test measured for its PR's ledger line (`prgate ci`, the demo).
/// A history that cannot be written should not fail the run: `prgate ci` says the error and
/// goes on; the demo, whose history is its own, stops.
pub fn save_run(
    dir: &Path,
    facts: &RunFacts<'_>,
    verdict: &Verdict,
    evidence: &[Evidence],
) -> Result<Saved, HistoryError> {
    let (speed, accuracy) = prgate_gate::history::measurements(verdict, evidence);
    let run = RunRecord {
        version: LEDGER_VERSION,
        at: now(),
        pr: facts.pr,
        title: facts.title.to_owned(),
        tested_commit: facts.tested_commit.to_owned(),
        base_commit: facts.base_commit.to_owned(),
        merge_queue: facts.merge_queue,
        run: facts.run_url.map(str::to_owned),
        verdict: verdict.result,
        speed,
        accuracy,
    };
    let path = HistoryDir::new(dir).save_run(&run)?;
    Ok(Saved { speed_cells: run.speed.len(), accuracy_benchmarks: run.accuracy.len(), path })
}

/// A run saved for the history ledger: what it kept, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    pub speed_cells: usize,
    pub accuracy_benchmarks: usize,
    pub path: PathBuf,
}

impl fmt::Display for Saved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "saved this run's {} speed cell(s) and {} accuracy benchmark(s) for the history ledger: {}",
            self.speed_cells,
            self.accuracy_benchmarks,
            self.path.display()
        )
    }
}

/// Why an anchor run was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum AnchorError {
    #[error(transparent)]
    History(#[from] HistoryError),
    #[error("opening the repository {}", path.display())]
    Repository { path: std::path::PathBuf, source: git2::Error },
    #[error("the plan's head {head}")]
    Head { head: String, source: git2::Error },
}

/// What an anchor run is: its plan (base: the reference; head: main's tip), the gate's verdict
/// on it and its evidence, the repository the plan was made in, and its page.
#[derive(Debug, Clone, Copy)]
pub struct AnchorRun<'a> {
    pub repo: &'a Path,
    pub plan: &'a Plan,
    pub verdict: &'a Verdict,
    pub evidence: &'a [Evidence],
    pub config: &'a GateConfig,
    pub run_url: Option<&'a str>,
}

/// Records an anchor run in `history`, with the merged PRs its head holds (from git); refused
/// unless it measured from the reference in force.
pub fn record_anchor_run(history: &HistoryDir, run: &AnchorRun<'_>) -> Result<Anchor, AnchorError> {
    let (speed, accuracy) = prgate_gate::history::measurements(run.verdict, run.evidence);
    let lines = history.lines()?;
    let head = run.plan.head.sha.clone();
    let repository = git2::Repository::discover(run.repo)
        .map_err(|source| AnchorError::Repository { path: run.repo.to_path_buf(), source })?;
    let covers = covered_prs(&repository, &lines, &head)?;
    let anchor = Anchor {
        version: LEDGER_VERSION,
        at: now(),
        reference_commit: run.plan.base_side_commit().to_owned(),
        head_commit: head,
        run: run.run_url.map(str::to_owned),
        covers,
        speed,
        accuracy,
    };
    history.record_anchor(&anchor, |lines| {
        prgate_gate::drift::history(lines, run.config).reference.map(|reference| reference.commit)
    })?;
    Ok(anchor)
}

/// The merged PRs of `lines` whose merge commit `head` holds.
fn covered_prs(
    repository: &git2::Repository,
    lines: &[Line],
    head: &str,
) -> Result<Vec<u64>, AnchorError> {
    let head = git2::Oid::from_str(head)
        .map_err(|source| AnchorError::Head { head: head.to_owned(), source })?;
    let mut covers = Vec::new();
    for line in lines {
        let Line::Merged(merged) = line else { continue };
        let Ok(merge) = git2::Oid::from_str(&merged.merge_commit) else { continue };
        let held = merge == head || repository.graph_descendant_of(head, merge).unwrap_or(false);
        if held {
            covers.push(merged.pr);
        }
    }
    Ok(covers)
}
