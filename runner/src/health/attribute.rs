//! What a run's results directory holds against its node ([`attribute`]): the strikes no PR
//! can cause, and the failures that looked like the node's but were passed over because a PR
//! could have caused them.
//!
//! Two kinds of evidence are read: a step broken on both sides, and a GPU error in a base-side
//! server's log. Both count only for a target whose recipe the PR left as the base side has it
//! (the job plan's `recipe.base` and `recipe.pr` parsed, with the same hash): when the PR
//! changes the recipe, what the base side runs can carry the PR's choices (its test selection,
//! whose paths pytest echoes; the command of a model new in the PR), and a PR must never move
//! a node's health. Only the servers' logs are scanned (the base side's routing step's log
//! folder: `server.log` and a topology's per-server logs), never pytest's or a client's output,
//! which repeat the names a PR selected.
//!
//! What it leaves to others: writing the strikes ([`super::record`]), the SLURM job's own
//! `NODE_FAIL` ([`crate::slurm`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use prgate_gate::evidence::{Check, Evidence, NotRunKind, Outcome, Side};
use prgate_gate::job::{JobPlan, RecipeState, StepId};

use super::{GPU_ERROR_PATTERNS, Source, Strike};
use crate::results::{ResultsDir, ResultsError};

/// What [`attribute`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attribution {
    /// The strikes against the node.
    pub strikes: Vec<Strike>,
    /// What looked like the node's fault but is not struck, and why, one sentence each.
    pub passed_over: Vec<String>,
}

/// The strikes a run's results directory holds against its node:
///
/// - each step (model, check and part) whose base and PR records are both `not-run` for a
///   reason that means the step broke (`crash`, `timeout`, `no-result`, ...): the PR cannot
///   break the base side, so both breaking is the node's;
/// - each base-side server log (`logs/<model>.routing.base/`, its files, not its folders) with
///   a line that has one of [`GPU_ERROR_PATTERNS`]: only the base side's, since a PR's code
///   could print the words to have a node drained.
///
/// Each counts only when the target's recipe is the same on both sides (the job plan,
/// `job.json`); else it is [passed over](Attribution::passed_over). A results directory
/// without a readable job plan strikes nothing. A step is struck once, whatever it matches;
/// the detail names the step, and for a log the pattern and the file. With `since`, only
/// records written since then count (a resumed run's older records were struck by the run that
/// wrote them).
pub fn attribute(results: &Path, since: Option<SystemTime>) -> Result<Attribution, ResultsError> {
    let dir = ResultsDir::open(results)?;
    let records = records_since(&dir, since)?;
    let job = crate::results::read_job(&dir.job_path());
    let mut found = Vec::new();
    for ((model, check, part), sides) in broken_steps(&records) {
        if sides == [true, true] {
            let name = model.as_deref().unwrap_or("the common checks");
            let part = part.map(|part| format!(" ({part})")).unwrap_or_default();
            let detail = format!("{check} of {name}{part} broke on base and on the PR");
            found.push((model, Strike { source: Source::BothSidesBroken, detail }));
        }
    }
    let servers = records
        .iter()
        .filter(|(step, _)| step.side() == Side::Base && step.check() == Check::Routing);
    for (step, _record) in servers {
        let folder = results.join("logs").join(crate::results::file_stem(step));
        if let Some((pattern, file)) = first_gpu_error(&folder) {
            let detail = format!("{step}: {pattern:?} in {}", file.display());
            let strike = Strike { source: Source::GpuErrorInLog, detail };
            found.push((step.model().map(str::to_owned), strike));
        }
    }
    let mut attribution = Attribution::default();
    for (model, strike) in found {
        match pr_influence(job.as_ref(), model.as_deref()) {
            None => attribution.strikes.push(strike),
            Some(why) => attribution.passed_over.push(format!(
                "not a strike ({}): {}: {why}",
                strike.source.name(),
                strike.detail
            )),
        }
    }
    Ok(attribution)
}

/// The records of `dir`, only those written since `since` when it is given.
fn records_since(
    dir: &ResultsDir,
    since: Option<SystemTime>,
) -> Result<Vec<(StepId, Evidence)>, ResultsError> {
    let mut records = dir.records()?;
    if let Some(since) = since {
        records.retain(|(step, _record)| {
            std::fs::metadata(dir.evidence_path(step))
                .and_then(|metadata| metadata.modified())
                .is_ok_and(|written| written >= since)
        });
    }
    Ok(records)
}

/// Why what the base side of `model`'s target ran may carry the PR's choices; `None` when the
/// PR left its recipe as the base side has it.
fn pr_influence(job: Result<&JobPlan, &ResultsError>, model: Option<&str>) -> Option<String> {
    let job = match job {
        Ok(job) => job,
        Err(problem) => return Some(format!("no job plan says what the PR changed ({problem})")),
    };
    let Some(target) = job.target(model) else {
        return Some("the job plan has no target of it".to_owned());
    };
    match (&target.recipe.base, &target.recipe.pr) {
        (RecipeState::Parsed { hash: base, .. }, RecipeState::Parsed { hash: pr, .. })
            if base == pr =>
        {
            None
        }
        (RecipeState::Parsed { .. }, RecipeState::Parsed { path, .. }) => Some(format!(
            "the PR changes its recipe ({path}), so the base side ran PR-chosen settings"
        )),
        _ => Some("the base side has no recipe of its own to run".to_owned()),
    }
}

/// Per step (model, check, part), whether its base and PR records are broken.
type BrokenSteps = BTreeMap<(Option<String>, String, Option<String>), [bool; 2]>;

fn broken_steps(records: &[(StepId, Evidence)]) -> BrokenSteps {
    let mut broken = BrokenSteps::new();
    for (step, record) in records {
        if let Some(side) = broken_side(record) {
            let key = (
                step.model().map(str::to_owned),
                step.check().describe().to_owned(),
                step.part().map(ToString::to_string),
            );
            broken.entry(key).or_default()[side] = true;
        }
    }
    broken
}

/// 0 for base, 1 for the PR, when `record` is a not-run that means the step broke.
fn broken_side(record: &Evidence) -> Option<usize> {
    let Outcome::NotRun { reason, .. } = &record.outcome else { return None };
    if reason.kind() != NotRunKind::Broken {
        return None;
    }
    match record.side {
        Side::Base => Some(0),
        Side::Pr => Some(1),
        Side::Both => None,
    }
}

/// The first of [`GPU_ERROR_PATTERNS`] a file in `folder` (not below it) has, with the file.
fn first_gpu_error(folder: &Path) -> Option<(&'static str, PathBuf)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
        .ok()?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
        .map(|entry| entry.path())
        .collect();
    files.sort();
    files.into_iter().find_map(|file| {
        let bytes = std::fs::read(&file).ok()?;
        let text = String::from_utf8_lossy(&bytes);
        let pattern = GPU_ERROR_PATTERNS.iter().find(|pattern| text.contains(*pattern))?;
        Some((*pattern, file))
    })
}
