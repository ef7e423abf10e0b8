//! Past runs, read from the runner's event stream (`prgate run --events FILE`, its lines
//! `prgate_gate::events`'s): how long each step of each model took.
//!
//! Only `step-finished` events count; a step's duration is `time_ms - started_ms`. The events
//! of all the files given are put in the order they finished. A model's **runs** are told apart
//! by repetition: a new run starts when a step finishes that already finished in the current
//! run. A resumed run (a rerun into the same results directory) finishes only the steps its
//! predecessor did not, so it continues the same run; a fresh run finishes every step again.
//!
//! A part of an estimate ([`super::Part`]) takes its duration from the most recent run that
//! has it: a smoke run after a full one leaves the full run's accuracy benchmarks in use. A
//! speed cell is the sum of its pairs (and its noise calibration) in that run.
//!
//! It parses the stream's text with the gate's type of its lines, the one the runner writes
//! with (`prgate_gate::events`: a wire format, so the writer and its readers share it and this
//! crate needs nothing of the runner's); reading the files is the caller's (the binary's).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use prgate_gate::evidence::{Check, Side};
use prgate_gate::job::Part;

use prgate_gate::events::{EVENTS_SCHEMA_VERSION, Event, EventKind};

/// The finished steps of past runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    steps: Vec<FinishedStep>,
    /// The torn last lines skipped, each said in words ([`History::skipped`]).
    skipped: Vec<String>,
    /// Each server load's model and duration (`server-started` events).
    loads: Vec<(Option<String>, Duration)>,
    /// Each wake's model and duration (`server-woken` events).
    wakes: Vec<(Option<String>, Duration)>,
}

/// Why an event stream could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    /// A line is not an event.
    #[error("{file}:{line}: not an event of prgate run's event stream: {message}")]
    Line { file: String, line: usize, message: String },
    /// A line is of a later version of the format than this prgate reads.
    #[error(
        "{file}:{line}: schema_version {version} is newer than this prgate reads ({EVENTS_SCHEMA_VERSION})\nhint: use the prgate that wrote it"
    )]
    Version { file: String, line: usize, version: u32 },
}

/// A step of the event stream: a part's key in [`History`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct StepKey {
    pub(super) check: Check,
    pub(super) side: Side,
    /// The step's part, with a speed cell's pairs and noise as one: `concurrency-C`.
    pub(super) part: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FinishedStep {
    model: Option<String>,
    check: Check,
    side: Side,
    part: Option<String>,
    finished_ms: u64,
    duration: Duration,
}

impl History {
    /// Reads one event stream; `file` names it in errors. Blank lines are skipped, and so is a
    /// last line without its newline that is not an event (a write cut short by a kill), which
    /// [`History::skipped`] says.
    pub fn parse(text: &str, file: &str) -> Result<History, HistoryError> {
        let mut steps = Vec::new();
        let mut skipped = Vec::new();
        let mut loads = Vec::new();
        let mut wakes = Vec::new();
        let complete = text.ends_with('\n');
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let number = index + 1;
            let event: Event = match serde_json::from_str(line) {
                Ok(event) => event,
                Err(error) if !complete && number == lines.len() => {
                    skipped.push(format!(
                        "{file}:{number}: the last line is cut short (a write a kill stopped), so it is skipped: {error}"
                    ));
                    continue;
                }
                Err(error) => {
                    return Err(HistoryError::Line {
                        file: file.to_owned(),
                        line: number,
                        message: error.to_string(),
                    });
                }
            };
            if event.schema_version > EVENTS_SCHEMA_VERSION {
                return Err(HistoryError::Version {
                    file: file.to_owned(),
                    line: number,
                    version: event.schema_version,
                });
            }
            if event.reason.is_none()
                && let Some(took) = event.took()
            {
                match event.event {
                    EventKind::ServerStarted => loads.push((event.model.clone(), took)),
                    EventKind::ServerWoken => wakes.push((event.model.clone(), took)),
                    _ => {}
                }
            }
            if event.event != EventKind::StepFinished {
                continue;
            }
            let Some(started_ms) = event.started_ms else { continue };
            steps.push(FinishedStep {
                model: event.model,
                check: event.check,
                side: event.side,
                part: event.part,
                finished_ms: event.time_ms,
                duration: Duration::from_millis(event.time_ms.saturating_sub(started_ms)),
            });
        }
        Ok(History { steps, skipped, loads, wakes })
    }

    /// The histories of several files as one.
    pub fn merge(histories: impl IntoIterator<Item = History>) -> History {
        let mut merged = History::default();
        for history in histories {
            merged.steps.extend(history.steps);
            merged.skipped.extend(history.skipped);
            merged.loads.extend(history.loads);
            merged.wakes.extend(history.wakes);
        }
        merged
    }

    /// What was skipped while reading, one sentence a torn last line, for the user.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }

    /// Whether it holds no finished step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The models (`None`: the common checks) it has finished steps of.
    pub fn models(&self) -> Vec<Option<&str>> {
        let mut models: Vec<Option<&str>> =
            self.steps.iter().map(|step| step.model.as_deref()).collect();
        models.sort_unstable();
        models.dedup();
        models
    }

    /// The mean time a server of `model` took to load, over the loads the history has.
    pub(super) fn load_time(&self, model: Option<&str>) -> Option<Duration> {
        mean_of(&self.loads, model)
    }

    /// The mean time a released server of `model` took to wake, over the wakes the history
    /// has.
    pub(super) fn wake_time(&self, model: Option<&str>) -> Option<Duration> {
        mean_of(&self.wakes, model)
    }

    /// The accuracy rounds of `model`'s most recent run that had accuracy repeats: the most
    /// repeats any benchmark took on a side (`gsm8k@repeat-R`, R from 0); `None` when no run
    /// has any.
    pub(super) fn accuracy_rounds(&self, model: Option<&str>) -> Option<u32> {
        self.model_runs(model).iter().rev().find_map(|run| {
            run.iter()
                .filter(|step| step.check == Check::Accuracy)
                .filter_map(|step| match Part::parse(step.part.as_deref()?)? {
                    Part::Repeat { index, .. } => Some(index.saturating_add(1)),
                    _ => None,
                })
                .max()
        })
    }

    /// `model`'s finished steps cut into runs, oldest first: a step finished twice starts a
    /// new run.
    fn model_runs(&self, model: Option<&str>) -> Vec<Vec<&FinishedStep>> {
        let mut mine: Vec<&FinishedStep> =
            self.steps.iter().filter(|step| step.model.as_deref() == model).collect();
        // Stable: steps that finished in the same millisecond keep the files' order.
        mine.sort_by_key(|step| step.finished_ms);
        let mut runs: Vec<Vec<&FinishedStep>> = vec![Vec::new()];
        let mut finished_in_run: BTreeSet<(Check, Side, Option<&str>)> = BTreeSet::new();
        for step in mine {
            if !finished_in_run.insert((step.check, step.side, step.part.as_deref())) {
                runs.push(Vec::new());
                finished_in_run.clear();
                finished_in_run.insert((step.check, step.side, step.part.as_deref()));
            }
            if let Some(run) = runs.last_mut() {
                run.push(step);
            }
        }
        runs
    }

    /// Each step's duration in the most recent run of `model` that has it.
    pub(super) fn model_steps(&self, model: Option<&str>) -> BTreeMap<StepKey, Duration> {
        let runs = self.model_runs(model);
        let mut durations: BTreeMap<StepKey, Duration> = BTreeMap::new();
        for run in runs.iter().rev() {
            let mut this_run: BTreeMap<StepKey, Duration> = BTreeMap::new();
            for step in run {
                let key = StepKey { check: step.check, side: step.side, part: group(step) };
                let total = this_run.entry(key).or_default();
                *total = total.saturating_add(step.duration);
            }
            for (key, duration) in this_run {
                durations.entry(key).or_insert(duration);
            }
        }
        durations
    }
}

/// The mean of `model`'s durations in `took`; `None` when it has none.
fn mean_of(took: &[(Option<String>, Duration)], model: Option<&str>) -> Option<Duration> {
    let mine: Vec<Duration> =
        took.iter().filter(|(of, _)| of.as_deref() == model).map(|(_, took)| *took).collect();
    let count = u32::try_from(mine.len()).ok().filter(|&count| count > 0)?;
    Some(mine.iter().sum::<Duration>() / count)
}

/// The part name of a speed cell: what its pairs' and noise's parts start with.
pub(super) fn speed_cell(concurrency: u32) -> String {
    format!("concurrency-{concurrency}")
}

/// A step's part as a [`StepKey`] has it: a speed step's part without its pair or noise, an
/// accuracy repeat's its benchmark (a run's repeats add up to the benchmark's time).
fn group(step: &FinishedStep) -> Option<String> {
    let text = step.part.as_deref()?;
    let part = Part::parse(text)?;
    match (step.check, part.concurrency(), &part) {
        (Check::Speed, Some(concurrency), _) => Some(speed_cell(concurrency)),
        (Check::Accuracy, _, Part::Repeat { benchmark, .. }) => Some(benchmark.clone()),
        _ => Some(text.to_owned()),
    }
}
