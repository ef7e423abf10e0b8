//! Re-running only what is missing: a second run of the same PR commit on the same base takes
//! over every step an earlier run judged whose inputs are unchanged, and runs only what failed,
//! could not be judged, or has no record.
//!
//! # The store (`<cache-dir>/reuse/<hash>.json`)
//!
//! At the end of a run with reuse on, the runner saves each target of its job plan (a model, or
//! the common checks) as one JSON file, written atomically, named by the SHA-256 (`crate::key`) of
//! the PR commit, the base commit and the target's name:
//!
//! ```json
//! { "schema_version": 1,
//!   "key": { "prgate_version": "0.1.0", "pr_commit": "...", "base_commit": "...",
//!            "target": "kimi_k31", "node": "mi355x-1", "node_profile": "sha256:...",
//!            "image": "sha256:...", "isolation": "container", "family": 4 },
//!   "run": "https://github.com/org/repo/actions/runs/123",
//!   "target": { ... the job plan's target (docs/job.md) ... },
//!   "records": [ ... its evidence records (docs/gate.md) ... ] }
//! ```
//!
//! Only prgate writes it, from the records it wrote itself, so a PR cannot plant one (the same
//! rule as the cache, `crate::cache`). A file that cannot be read or parsed, of another schema,
//! or whose key differs from this run's in anything is no reuse at all.
//!
//! # What is reused (fail closed)
//!
//! The earlier run's entry counts only when its **key** is this run's: the prgate version, both
//! commits, the target, the node's name and a hash of its whole profile (GPUs, checkpoints,
//! ports), the image (its digest, else its name), the isolation (host with its Python, or
//! container), and the speed family; and when its **target** (docs/job.md: tier, whether the
//! model is new, both sides' recipe states with their hashes, every expected step and what is
//! expected of it) is equal to this run's. Then a step of this run's target that must run is
//! taken over when the entry has, for the same step id:
//!
//! - one record whose provenance is this run's (node, image, commits, the PR side's recipe
//!   hash), and
//! - which judged it and did not fail: a test suite with at least one passing test and no
//!   failed or erroring one; a server that logged its routing; an accuracy result; kernel
//!   timings;
//! - for a speed cell, the whole cell: its pairs `0..n` and its calibration, no not-run of it,
//!   and the gate's sequential test finds it decided with this run's settings, title and family
//!   (base and PR runs of a pair are interleaved on one node: one side is never reused without
//!   the other, and a cell is never topped up with pairs of another session).
//!
//! Anything else runs again: a `not-run` of any reason, a failed test, a server without its
//! routing line, a cell left open. A step the results directory already has (a resumed run) is
//! left as it is. A reused record is written into the results directory unchanged but for
//! `provenance.reused = {"run": ...}`, the run that measured it (kept when that run had reused
//! it too). The gate judges it as any other record; the comment says how many steps were reused
//! and from which run.
//!
//! What it leaves to others: running the steps (`crate::run`), judging (the gate), saying what
//! was reused (the report).

use std::path::{Path, PathBuf};

use prgate_gate::evidence::{Check, Evidence, Outcome, Provenance, Reused, TestOutcome};
use prgate_gate::job::{Expect, Part, StepId, Target};
use prgate_gate::speed::{Calibration, Pair};
use serde::{Deserialize, Serialize};

use crate::key::Key;

/// The version of a store entry's format.
pub const SCHEMA_VERSION: u32 = 1;

/// Whether a run reuses what an earlier run of the same commits judged, and saves what it
/// judged for a later one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReuseMode {
    /// Neither reuse nor save.
    Off,
    /// Reuse from the node's store and save into it; `run` names this run in the records a
    /// later run takes over (a workflow run's page, or the results directory).
    Node { run: String },
}

/// Everything outside the job plan's target that must be the same for a record to be reused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunKey {
    pub prgate_version: String,
    pub pr_commit: String,
    pub base_commit: String,
    /// The target's name: its model, or `~common`.
    pub target: String,
    pub node: String,
    /// A hash of the node's whole profile.
    pub node_profile: String,
    /// The image's digest, else its name.
    pub image: String,
    /// `container`, or `host` with the Python interpreter that runs pytest.
    pub isolation: String,
    /// The run's speed family (covered cells of the whole run).
    pub family: u32,
}

impl RunKey {
    /// The hash of a node profile as [`RunKey::node_profile`] has it: every field, as this
    /// version of prgate reads it.
    pub fn profile_hash(node: &crate::node::NodeProfile) -> String {
        Key::of(format!("{node:?}").as_bytes()).to_string()
    }
}

/// One target as an earlier run saved it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub schema_version: u32,
    pub key: RunKey,
    /// The run that saved it.
    pub run: String,
    pub target: Target,
    pub records: Vec<Evidence>,
}

/// The node's store of earlier runs' judged targets.
#[derive(Debug, Clone)]
pub struct ReuseStore {
    root: PathBuf,
}

/// What [`select`] takes over.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    /// The steps taken over, in the target's order.
    pub steps: Vec<StepId>,
    /// Their records, marked reused.
    pub records: Vec<Evidence>,
    /// Why nothing of the target was reused, when nothing was.
    pub refused: Option<String>,
}

impl ReuseStore {
    /// The store under a node's cache directory.
    pub fn new(cache_dir: &Path) -> ReuseStore {
        ReuseStore { root: cache_dir.join("reuse") }
    }

    /// Where the entry of `key`'s commits and target is.
    pub fn entry_path(&self, key: &RunKey) -> PathBuf {
        let name = format!("{}\0{}\0{}", key.pr_commit, key.base_commit, key.target);
        self.root.join(format!("{}.json", Key::of(name.as_bytes()).hex()))
    }

    /// The entry saved for `key`'s commits and target, when there is one that can be read.
    pub fn load(&self, key: &RunKey) -> Option<Entry> {
        let bytes = std::fs::read(self.entry_path(key)).ok()?;
        let entry: Entry = serde_json::from_slice(&bytes).ok()?;
        (entry.schema_version == SCHEMA_VERSION).then_some(entry)
    }

    /// Saves a target's records for a later run, replacing what was there.
    pub fn save(
        &self,
        key: &RunKey,
        run: &str,
        target: &Target,
        records: &[Evidence],
    ) -> Result<(), SaveError> {
        let entry = Entry {
            schema_version: SCHEMA_VERSION,
            key: key.clone(),
            run: run.to_owned(),
            target: target.clone(),
            records: records.to_vec(),
        };
        let path = self.entry_path(key);
        let saved = std::fs::create_dir_all(&self.root)
            .and_then(|()| serde_json::to_vec(&entry).map_err(std::io::Error::from))
            .and_then(|json| {
                crate::results::write_atomically(&path, &crate::redact::redact_bytes(&json))
            });
        saved.map_err(|source| SaveError { path, source })
    }
}

/// A target's records could not be saved in the store.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct SaveError {
    path: std::path::PathBuf,
    source: std::io::Error,
}

/// What this run is, for [`select`].
#[derive(Clone, Copy)]
pub struct Current<'a> {
    pub key: &'a RunKey,
    pub target: &'a Target,
    /// The provenance this run writes for the target's records.
    pub provenance: &'a Provenance,
    /// Whether a speed cell with these pairs, this calibration, covered or not, still needs
    /// another pair by the gate's rule with this run's settings.
    pub cell_open: &'a CellOpen<'a>,
}

/// The gate's "another pair?" question of a speed cell: its pairs, its calibration, whether the
/// monokernels cover it.
pub type CellOpen<'a> = dyn Fn(&[Pair], Option<Calibration>, bool) -> bool + 'a;

impl std::fmt::Debug for Current<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Current")
            .field("key", self.key)
            .field("target", self.target)
            .field("provenance", self.provenance)
            .finish_non_exhaustive()
    }
}

/// The records of `entry` this run may take over for `current`'s target; see the
/// [module documentation](self).
pub fn select(entry: &Entry, current: &Current<'_>) -> Selection {
    let refuse = |why: String| Selection { refused: Some(why), ..Selection::default() };
    if entry.key != *current.key {
        return refuse(format!(
            "the earlier run {} differs: {}",
            entry.run,
            differences(&entry.key, current.key)
        ));
    }
    if entry.target != *current.target {
        return refuse(format!(
            "the earlier run {} planned {} differently (its recipes or expected steps)",
            entry.run,
            current.target.name()
        ));
    }
    let mut selection = Selection::default();
    for step in &current.target.steps {
        if step.expect != Expect::Run {
            continue;
        }
        let id = current.target.step_id(step);
        let taken = match &step.part {
            Some(Part::Cell { concurrency }) => cell(entry, &id, *concurrency, current),
            Some(Part::Named(name)) if step.check == Check::Accuracy => {
                repeats(entry, &id, name, current.provenance)
            }
            _ => single(entry, &id, current.provenance),
        };
        if let Some(records) = taken {
            let run = entry.run.clone();
            selection.records.extend(records.into_iter().map(|record| mark(record, &run)));
            selection.steps.push(id);
        }
    }
    selection
}

/// The one record of a step that is not a speed cell, when it judged the step without failing.
fn single(entry: &Entry, id: &StepId, provenance: &Provenance) -> Option<Vec<Evidence>> {
    let mut records = entry.records.iter().filter(|record| StepId::of(record) == *id);
    let record = records.next()?;
    if records.next().is_some() || !same_provenance(record, provenance) {
        return None;
    }
    let judged = match &record.outcome {
        Outcome::Tests { results } => {
            results.iter().any(|test| test.outcome == TestOutcome::Passed)
                && !results
                    .iter()
                    .any(|test| matches!(test.outcome, TestOutcome::Failed | TestOutcome::Error))
        }
        Outcome::Routing { routed, .. } => *routed,
        Outcome::Accuracy { .. } => true,
        Outcome::KernelTiming { kernels } => !kernels.is_empty(),
        Outcome::SpeedPair { .. } | Outcome::SpeedNoise { .. } | Outcome::NotRun { .. } => false,
    };
    judged.then(|| vec![record.clone()])
}

/// An accuracy benchmark's records: its repeats measured so far (or its one record, written
/// before repeats), when each is a measurement of this provenance; the run goes on from them
/// (the gate decides whether more repeats are needed). `None` when it has none or one broke.
fn repeats(
    entry: &Entry,
    id: &StepId,
    benchmark: &str,
    provenance: &Provenance,
) -> Option<Vec<Evidence>> {
    let records: Vec<&Evidence> = entry
        .records
        .iter()
        .filter(|record| {
            let of = StepId::of(record);
            of.model() == id.model()
                && of.check() == id.check()
                && of.side() == id.side()
                && of.part().and_then(Part::benchmark) == Some(benchmark)
        })
        .collect();
    let judged = !records.is_empty()
        && records.iter().all(|record| {
            matches!(record.outcome, Outcome::Accuracy { .. })
                && same_provenance(record, provenance)
        });
    judged.then(|| records.into_iter().cloned().collect())
}

/// A whole speed cell's records, when the cell was decided and nothing of it broke.
fn cell(
    entry: &Entry,
    id: &StepId,
    concurrency: u32,
    current: &Current<'_>,
) -> Option<Vec<Evidence>> {
    let CellRecords { mut pairs, noise, records } =
        cell_records(entry, id, concurrency, current.provenance)?;
    pairs.sort_by_key(|(index, _, _)| *index);
    let contiguous = pairs.iter().enumerate().all(|(at, (index, _, _))| *index as usize == at);
    let covered = pairs.first().map(|(_, _, covered)| *covered)?;
    if !contiguous || pairs.iter().any(|(_, _, other)| *other != covered) {
        return None;
    }
    let measured: Vec<Pair> = pairs.iter().map(|(_, pair, _)| *pair).collect();
    (!(current.cell_open)(&measured, noise, covered)).then_some(records)
}

/// What an earlier run recorded of one speed cell: its pairs (by index, with whether the
/// monokernels cover them), its calibration, and the records themselves.
struct CellRecords {
    pairs: Vec<(u32, Pair, bool)>,
    noise: Option<Calibration>,
    records: Vec<Evidence>,
}

/// The records of the speed cell at `concurrency` of step `id` in `entry`; `None` when the
/// check or the cell did not run there, or a record of it was written with another provenance.
fn cell_records(
    entry: &Entry,
    id: &StepId,
    concurrency: u32,
    provenance: &Provenance,
) -> Option<CellRecords> {
    let mut cell = CellRecords { pairs: Vec::new(), noise: None, records: Vec::new() };
    for record in &entry.records {
        if record.check != id.check() || record.model.as_deref() != id.model() {
            continue;
        }
        match &record.outcome {
            // A not-run of the whole check, or of this cell: it runs again.
            Outcome::NotRun { subject, .. } => {
                let part = subject.as_deref().and_then(Part::parse);
                if part.is_none() || part.and_then(|part| part.concurrency()) == Some(concurrency) {
                    return None;
                }
                continue;
            }
            Outcome::SpeedPair {
                concurrency: at,
                index,
                covered,
                base_tpot_ms,
                pr_tpot_ms,
                base_runs_ms,
                ..
            } if *at == concurrency => {
                let pair = match base_runs_ms {
                    Some([before, after]) => Pair::bracketed(*before, *pr_tpot_ms, *after),
                    None => Pair::single(*base_tpot_ms, *pr_tpot_ms),
                };
                cell.pairs.push((*index, pair, *covered));
            }
            Outcome::SpeedNoise { concurrency: at, log_ratio_variance, samples }
                if *at == concurrency =>
            {
                cell.noise = Some(Calibration {
                    log_ratio_variance: *log_ratio_variance,
                    samples: samples.unwrap_or(prgate_gate::speed::LEGACY_CALIBRATION_SAMPLES),
                });
            }
            _ => continue,
        }
        if !same_provenance(record, provenance) {
            return None;
        }
        cell.records.push(record.clone());
    }
    Some(cell)
}

/// Whether a record was written with `provenance` (what it says of an earlier reuse aside).
fn same_provenance(record: &Evidence, provenance: &Provenance) -> bool {
    let mut theirs = record.provenance.clone();
    theirs.reused = None;
    let mut ours = provenance.clone();
    ours.reused = None;
    theirs == ours
}

/// `record`, marked as measured by `run` (or by the run that measured it first).
fn mark(mut record: Evidence, run: &str) -> Evidence {
    if record.provenance.reused.is_none() {
        record.provenance.reused = Some(Reused { run: run.to_owned() });
    }
    record
}

/// What differs between two keys, in words.
fn differences(earlier: &RunKey, now: &RunKey) -> String {
    let fields = [
        ("prgate version", &earlier.prgate_version, &now.prgate_version),
        ("PR commit", &earlier.pr_commit, &now.pr_commit),
        ("base commit", &earlier.base_commit, &now.base_commit),
        ("target", &earlier.target, &now.target),
        ("node", &earlier.node, &now.node),
        ("node profile", &earlier.node_profile, &now.node_profile),
        ("image", &earlier.image, &now.image),
        ("isolation", &earlier.isolation, &now.isolation),
    ];
    let mut said: Vec<String> = fields
        .iter()
        .filter(|(_, a, b)| a != b)
        .map(|(what, a, b)| format!("its {what} was {a}, this run's is {b}"))
        .collect();
    if earlier.family != now.family {
        said.push(format!("its speed family was {}, this run's is {}", earlier.family, now.family));
    }
    said.join("; ")
}

#[cfg(test)]
mod tests;
