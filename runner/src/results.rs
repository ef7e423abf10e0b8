//! The results directory of a run: the evidence, one file per finished step, the steps' logs,
//! and the event stream that shows a run's progress as it goes.
//!
//! # Layout
//!
//! ```text
//! DIR/job.json               the job plan (prgate_gate::job): what the run must produce
//! DIR/evidence/<step>.json   one evidence record (prgate_gate::evidence) per finished step
//! DIR/logs/<step>/           the logs of that step (server output, pytest, benchmarks)
//! DIR/gpu-time/<target>.json the GPU time of a model (or `~common`) by phase, against its
//!                            estimate (`crate::gpu_time`, docs/gpu-hours.md)
//! ```
//!
//! A record taken over from an earlier run of the same commits (`crate::reuse`,
//! docs/rerun.md) is in `DIR/evidence` like any other, with `provenance.reused` naming the run
//! that measured it.
//!
//! `<step>` is the [`StepId`]'s [file stem](file_stem): model, check, side and part,
//! so a rerun of a step replaces its file. A record is written to a temporary file in the same
//! folder (a name that starts with a dot and does not end in `.json`), flushed to disk and
//! renamed over the step's file, and the folder is flushed too: a run killed at any moment
//! leaves each step's file whole or absent, never half-written, and what the temporary files
//! of a killed write hold is ignored. [`ResultsDir::completed_steps`] tells a resumed run what
//! is done. Give the gate `DIR/evidence` ([`ResultsDir::evidence_dir`]): the logs may hold
//! JSON files of their own. Nothing is written once a signal is stopping the runner: a step
//! that failed because the stop killed its server is not a crash.
//!
//! # The event stream (`--events FILE`, `schema_version` 1)
//!
//! [`EventWriter`] appends one JSON object per line and hands each line to the kernel at once,
//! so a reader (the report's live progress) sees every event as it happens:
//!
//! The lines' format is `prgate_gate::events`'s (its page shows them): a wire format the
//! estimate's history and the binary's live progress read too. Here each event gets its time
//! from the clock ([`event_started`] and the rest).
//!
//! What it leaves to others: running the steps (the runner), judging the records (the gate).

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use prgate_gate::evidence::{self, Check, Evidence, NotRunReason, Outcome, Side};
/// A record, an event file's replacement, a ledger: written whole or not at all (the sandbox's
/// atomic write).
pub(crate) use prgate_sandbox::atomic::write_atomically;
use serde::Serialize;

/// The event stream's lines are the gate's wire format (`prgate_gate::events`): the runner
/// writes them ([`EventWriter`], [`event_started`] and the rest), the estimate's history and
/// the binary's live progress read them.
pub use prgate_gate::events::{EVENTS_SCHEMA_VERSION, Event, EventKind};

use prgate_gate::job::JobPlan;
pub use prgate_gate::job::{Part, StepId};

/// How long a broken step's record waits for a stop signal that may be on its way.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_millis(300);

/// The job plan's file in a results directory.
pub const JOB_FILE: &str = "job.json";

/// The name of a step's files: `MODEL.CHECK.SIDE[.PART]`, with `~common` for the common checks,
/// and every byte of the model and the part other than ASCII letters, digits, `_` and `-`
/// written as `%XX`; so two steps never share a name, and a name never starts with a dot.
pub fn file_stem(step: &StepId) -> String {
    let model = step.model().map_or_else(|| "~common".to_owned(), escape);
    let mut stem = format!("{model}.{}.{}", wire_name(&step.check()), wire_name(&step.side()));
    if let Some(part) = step.part() {
        stem.push('.');
        stem.push_str(&escape(&part.to_string()));
    }
    stem
}

/// Why the results directory or the event stream could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error("cannot create {path}: {source}")]
    Create { path: PathBuf, source: io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path} is not an evidence record: {source}")]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error(
        "{path} holds the {step}, whose file is {expected}\nhint: move it there, or remove it to run the step again"
    )]
    Misplaced { path: PathBuf, step: String, expected: String },
    #[error("refusing to write evidence the gate would refuse, for the {step}: {problem}")]
    Invalid { step: String, problem: String },
    #[error("{path} is not a job plan: {source}")]
    NotAJob { path: PathBuf, source: serde_json::Error },
    #[error("the job plan {path} has schema_version {found}; this prgate reads {reads}")]
    JobSchema { path: PathBuf, found: u32, reads: u32 },
}

/// Reads the job plan at `path` (a results directory's `job.json`), refusing one of another
/// `schema_version`.
pub fn read_job(path: &Path) -> Result<JobPlan, ResultsError> {
    let bytes = std::fs::read(path)
        .map_err(|source| ResultsError::Read { path: path.to_path_buf(), source })?;
    let job: JobPlan = serde_json::from_slice(&bytes)
        .map_err(|source| ResultsError::NotAJob { path: path.to_path_buf(), source })?;
    let reads = prgate_gate::job::SCHEMA_VERSION;
    if job.schema_version != reads {
        let found = job.schema_version;
        return Err(ResultsError::JobSchema { path: path.to_path_buf(), found, reads });
    }
    Ok(job)
}

/// A run's results directory.
#[derive(Debug, Clone)]
pub struct ResultsDir {
    root: PathBuf,
    evidence: PathBuf,
    logs: PathBuf,
    /// Where the node exports the trees (`<work-dir>/trees`), as given and resolved: a path
    /// below it is written as its path in its tree ([`TreePaths`]).
    trees: TreePaths,
}

/// The folder the node exports a run's trees into (`<work-dir>/trees/<commit>`), as given and
/// resolved. What prgate writes names a file of a tree by its path in the tree
/// (`test/e2e/alpha.toml`; the tree itself `.`), never by where one node exported it: an error
/// about a PR's file (a link refused, a recipe that does not parse) or a command's output that
/// printed an absolute path.
#[derive(Debug, Clone, Default)]
pub struct TreePaths {
    prefixes: Vec<String>,
}

impl TreePaths {
    /// The trees folder `trees` (it need not exist yet).
    pub fn new(trees: &Path) -> TreePaths {
        let mut prefixes = vec![format!("{}/", trees.display())];
        if let Ok(resolved) = trees.canonicalize() {
            prefixes.push(format!("{}/", resolved.display()));
        }
        prefixes.retain(|prefix| prefix.len() > 1);
        prefixes.sort_by_key(|prefix| std::cmp::Reverse(prefix.len()));
        prefixes.dedup();
        TreePaths { prefixes }
    }

    /// `text` with every `<trees>/<commit>/<path>` written as `<path>`, and every
    /// `<trees>/<commit>` that is not followed by a `/` as `.`.
    pub fn relative<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        let mut text = std::borrow::Cow::Borrowed(text);
        for prefix in &self.prefixes {
            if !text.contains(prefix.as_str()) {
                continue;
            }
            let mut out = String::with_capacity(text.len());
            let mut rest: &str = &text;
            while let Some(at) = rest.find(prefix.as_str()) {
                out.push_str(&rest[..at]);
                let after = &rest[at + prefix.len()..];
                let commit =
                    after.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(after.len());
                match after[commit..].strip_prefix('/') {
                    Some(inside) => rest = inside,
                    None => {
                        out.push('.');
                        rest = &after[commit..];
                    }
                }
            }
            out.push_str(rest);
            text = std::borrow::Cow::Owned(out);
        }
        text
    }

    /// [`TreePaths::relative`] for bytes that are UTF-8 (what serde_json writes); other bytes
    /// are left as they are.
    fn relative_bytes<'b>(&self, bytes: &'b [u8]) -> std::borrow::Cow<'b, [u8]> {
        match std::str::from_utf8(bytes).map(|text| self.relative(text)) {
            Ok(std::borrow::Cow::Owned(text)) => std::borrow::Cow::Owned(text.into_bytes()),
            _ => std::borrow::Cow::Borrowed(bytes),
        }
    }
}

impl ResultsDir {
    /// Opens the results directory at `root`, creating it and its folders when missing. What
    /// an earlier run wrote there stays: that is how a run resumes.
    pub fn open(root: &Path) -> Result<ResultsDir, ResultsError> {
        let dir = ResultsDir {
            root: root.to_path_buf(),
            evidence: root.join("evidence"),
            logs: root.join("logs"),
            trees: TreePaths::default(),
        };
        for path in [&dir.evidence, &dir.logs] {
            std::fs::create_dir_all(path)
                .map_err(|source| ResultsError::Create { path: path.clone(), source })?;
        }
        // A run killed in the middle of a write leaves its temporary file: never a record.
        if let Ok(entries) = std::fs::read_dir(&dir.evidence) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.starts_with('.') && name.contains(".json.tmp-") {
                    let _gone = std::fs::remove_file(entry.path());
                }
            }
        }
        Ok(dir)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// This directory, writing paths below `trees` (the node's `<work-dir>/trees`) as paths in
    /// their trees ([`TreePaths`]) in the records and the job plan.
    pub fn naming_trees(mut self, trees: &TreePaths) -> ResultsDir {
        self.trees = trees.clone();
        self
    }

    /// The folder of the evidence records: what the gate reads.
    pub fn evidence_dir(&self) -> &Path {
        &self.evidence
    }

    /// Where the record of `step` is (or will be).
    pub fn evidence_path(&self, step: &StepId) -> PathBuf {
        self.evidence.join(format!("{}.json", file_stem(step)))
    }

    /// Writes `record` atomically as its step's file, replacing what an earlier run wrote for
    /// that step, and returns the file's path. A record the gate would refuse on its own (an
    /// outcome that does not fit its check, numbers out of range) is not written.
    ///
    /// Once a signal is stopping the runner ([`crate::process::stop_all_on_signal`]), it
    /// writes nothing and does not return: the process dies of the signal. What failed while
    /// the runner stopped its children failed because of the stop, and is no evidence.
    pub fn write(&self, record: &Evidence) -> Result<PathBuf, ResultsError> {
        crate::process::block_while_stopping();
        // A signal that stops the run may reach its children first (SLURM's `scancel` signals
        // every process of a job at once): a step that broke in that instant broke because of
        // the stop. A broken step's record waits a moment for the signal to be seen.
        if let Outcome::NotRun { reason, .. } = &record.outcome
            && reason.kind() == evidence::NotRunKind::Broken
        {
            std::thread::sleep(STOP_GRACE);
            crate::process::block_while_stopping();
        }
        let record = &self.with_artifact_paths(record);
        let step = StepId::of(record);
        evidence::validate(std::slice::from_ref(record)).map_err(|error| {
            ResultsError::Invalid { step: step.to_string(), problem: error.problem }
        })?;
        let path = self.evidence_path(&step);
        let mut json = serde_json::to_vec_pretty(record)
            .map_err(|error| ResultsError::Write { path: path.clone(), source: error.into() })?;
        json.push(b'\n');
        // The node's secret values never reach a record (`crate::redact`), nor where the node
        // exported the trees.
        let json = crate::redact::redact_bytes(&json);
        let json = self.trees.relative_bytes(&json);
        write_atomically(&path, &json)
            .map_err(|source| ResultsError::Write { path: path.clone(), source })?;
        Ok(path)
    }

    /// `record` with the node's paths of this directory's files written as their artifact
    /// paths (`logs/<step>/pytest.log`): a record names the run's files, not where one node
    /// kept them.
    fn with_artifact_paths(&self, record: &Evidence) -> Evidence {
        let mut record = record.clone();
        if let Outcome::NotRun { detail, .. } = &mut record.outcome {
            let mut roots = vec![self.root.clone()];
            if let Ok(canonical) = self.root.canonicalize() {
                roots.push(canonical);
            }
            for root in roots {
                let prefix = format!("{}/", root.display());
                if prefix.len() > 1 {
                    *detail = detail.replace(&prefix, "");
                }
            }
        }
        record
    }

    /// Where the job plan is: `DIR/job.json`.
    pub fn job_path(&self) -> PathBuf {
        self.root.join(JOB_FILE)
    }

    /// Writes the job plan atomically (a resumed run writes the same plan again).
    pub fn write_job(&self, job: &JobPlan) -> Result<PathBuf, ResultsError> {
        let path = self.job_path();
        let mut json = serde_json::to_vec_pretty(job)
            .map_err(|error| ResultsError::Write { path: path.clone(), source: error.into() })?;
        json.push(b'\n');
        let json = self.trees.relative_bytes(&json);
        write_atomically(&path, &json)
            .map_err(|source| ResultsError::Write { path: path.clone(), source })?;
        Ok(path)
    }

    /// Every record in the directory, with its step, sorted by file name.
    pub fn records(&self) -> Result<Vec<(StepId, Evidence)>, ResultsError> {
        let read_error = |source| ResultsError::Read { path: self.evidence.clone(), source };
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(&self.evidence).map_err(read_error)? {
            let path = entry.map_err(read_error)?.path();
            let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
            if name.ends_with(".json") && !name.starts_with('.') && path.is_file() {
                paths.push(path);
            }
        }
        paths.sort();
        paths
            .into_iter()
            .map(|path| {
                let text = std::fs::read(&path)
                    .map_err(|source| ResultsError::Read { path: path.clone(), source })?;
                let record: Evidence = serde_json::from_slice(&text)
                    .map_err(|source| ResultsError::Parse { path: path.clone(), source })?;
                let step = StepId::of(&record);
                let expected = self.evidence_path(&step);
                if expected != path {
                    return Err(ResultsError::Misplaced {
                        path,
                        step: step.to_string(),
                        expected: expected.display().to_string(),
                    });
                }
                Ok((step, record))
            })
            .collect()
    }

    /// The steps that have a record: what a resumed run skips.
    pub fn completed_steps(&self) -> Result<BTreeSet<StepId>, ResultsError> {
        Ok(self.records()?.into_iter().map(|(step, _)| step).collect())
    }

    /// The log folder of `step`, created when missing.
    pub fn step_log_dir(&self, step: &StepId) -> Result<PathBuf, ResultsError> {
        let path = self.logs.join(file_stem(step));
        std::fs::create_dir_all(&path)
            .map_err(|source| ResultsError::Create { path: path.clone(), source })?;
        Ok(path)
    }
}

/// The writer of the event stream; it can be shared between threads.
#[derive(Debug)]
pub struct EventWriter {
    path: PathBuf,
    file: Mutex<File>,
    trees: TreePaths,
}

/// When a step started, for its finished event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepStarted {
    time_ms: u64,
}

impl StepStarted {
    /// When `started`, a step's started event, happened.
    pub fn of(started: &Event) -> StepStarted {
        StepStarted { time_ms: started.time_ms }
    }
}

impl EventWriter {
    /// Opens `path` to append events (a resumed run goes on with the same file), creating it.
    pub fn create(path: &Path) -> Result<EventWriter, ResultsError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| ResultsError::Create { path: path.to_path_buf(), source })?;
        Ok(EventWriter {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            trees: TreePaths::default(),
        })
    }

    /// This writer, writing paths below the node's trees as paths in their trees.
    pub fn naming_trees(mut self, trees: &TreePaths) -> EventWriter {
        self.trees = trees.clone();
        self
    }

    /// Appends `event` as it is: one stamped by [`event_started`] and its kin, or one another
    /// writer recorded (a SLURM job's events, passed on to the run's stream).
    pub fn append(&self, event: &Event) -> Result<(), ResultsError> {
        self.emit(event)
    }

    fn emit(&self, event: &Event) -> Result<(), ResultsError> {
        let write_error = |source| ResultsError::Write { path: self.path.clone(), source };
        let mut line = serde_json::to_vec(event).map_err(|error| write_error(error.into()))?;
        line.push(b'\n');
        let line = crate::redact::redact_bytes(&line);
        let line = self.trees.relative_bytes(&line);
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        file.write_all(&line).and_then(|()| file.flush()).map_err(write_error)
    }
}

/// What watches a run's steps as they happen, besides the event stream's file: the terminal's
/// progress line, the PR comment. The step loop hands every event, once, to each.
pub trait StepObserver: fmt::Debug {
    fn observe(&self, event: &Event);
}

// The event stream's events stamped with the clock: the format (`prgate_gate::events`) is
// plain data and takes a time; these give it now.

/// The event: `step` starts now.
pub fn event_started(step: &StepId) -> Event {
    Event::at(EventKind::StepStarted, step, now_ms())
}

/// The event: `step`, started at `started`, finished now with `record`.
pub fn event_finished(step: &StepId, started: StepStarted, record: &Evidence) -> Event {
    let mut event = Event::at(EventKind::StepFinished, step, now_ms());
    event.started_ms = Some(started.time_ms);
    event.outcome = Some(outcome_kind(&record.outcome));
    if let Outcome::NotRun { reason, .. } = record.outcome {
        event.reason = Some(reason);
    }
    event
}

/// The event: `step` was done by an earlier run (noticed now).
pub fn event_skipped(step: &StepId) -> Event {
    Event::at(EventKind::StepSkipped, step, now_ms())
}

/// A server event of `kind` for `model`'s `side`, begun at `started_ms` and ending now;
/// `failure` when it did not come up.
pub fn event_server(
    kind: EventKind,
    model: Option<&str>,
    side: Side,
    started_ms: u64,
    failure: Option<NotRunReason>,
) -> Event {
    let step = StepId::new(model, Check::Routing, side, None);
    let mut event = Event::at(kind, &step, now_ms());
    event.started_ms = Some(started_ms);
    event.reason = failure;
    event
}

/// `%XX` for every byte but ASCII letters, digits, `_` and `-`.
pub(crate) fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' {
            escaped.push(char::from(byte));
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    escaped
}

/// The name of a check, side or outcome in the evidence format.
fn wire_name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => "unknown".to_owned(),
    }
}

fn outcome_kind(outcome: &Outcome) -> String {
    match serde_json::to_value(outcome) {
        Ok(serde_json::Value::Object(fields)) => match fields.get("kind") {
            Some(serde_json::Value::String(kind)) => kind.clone(),
            _ => "unknown".to_owned(),
        },
        _ => "unknown".to_owned(),
    }
}

/// Now in milliseconds since the Unix epoch, as events and history lines write it.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}
