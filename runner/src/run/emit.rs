//! The step loop's events, emitted once each to every observer: the event stream's file
//! (`--events`), the terminal's progress line, and whatever the caller watches with (the PR
//! comment of `prgate ci`). No observer reads another's output back.

use std::collections::BTreeSet;

use prgate_gate::evidence::Evidence;

use super::RunError;
use super::progress::Progress;
use crate::results::{Event, EventWriter, StepId, StepObserver, StepStarted};

/// Hands the step loop's events to its observers.
pub(super) struct Emitter<'r> {
    pub file: Option<&'r EventWriter>,
    pub progress: Progress,
    pub observer: Option<&'r dyn StepObserver>,
    /// The steps said to be skipped: what the run's summary counts as already recorded.
    pub skipped: BTreeSet<StepId>,
}

impl Emitter<'_> {
    /// `step` starts.
    pub(super) fn started(&mut self, step: &StepId) -> Result<StepStarted, RunError> {
        let event = Event::started(step);
        self.emit(&event)?;
        Ok(event.as_started())
    }

    /// `step` finished with `record`.
    pub(super) fn finished(
        &mut self,
        step: &StepId,
        started: StepStarted,
        record: &Evidence,
    ) -> Result<(), RunError> {
        self.emit(&Event::finished(step, started, record))
    }

    /// An earlier run did `step`.
    pub(super) fn skipped(&mut self, step: &StepId) -> Result<(), RunError> {
        self.skipped.insert(step.clone());
        self.emit(&Event::skipped(step))
    }

    /// Ends the progress line.
    pub(super) fn close(&self) {
        self.progress.close();
    }

    fn emit(&mut self, event: &Event) -> Result<(), RunError> {
        if let Some(file) = self.file {
            file.append(event)?;
        }
        self.progress.observe(event);
        if let Some(observer) = self.observer {
            observer.observe(event);
        }
        Ok(())
    }
}
