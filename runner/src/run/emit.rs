//! The step loop's events, emitted once each to every observer: the event stream's file
//! (`--events`), the terminal's progress line, and whatever the caller watches with (the PR
//! comment of `prgate ci`). No observer reads another's output back.

use std::collections::BTreeSet;

use prgate_gate::evidence::Evidence;

use super::RunError;
use super::progress::Progress;
use crate::results::{
    Event, EventWriter, StepId, StepObserver, StepStarted, event_finished, event_skipped,
    event_started,
};

/// Hands the step loop's events to its observers.
pub(super) struct Emitter<'r> {
    pub file: Option<&'r EventWriter>,
    pub progress: Progress,
    pub observer: Option<&'r dyn StepObserver>,
    /// The steps said to be skipped: what the run's summary counts as already recorded.
    pub skipped: BTreeSet<StepId>,
}

impl<'r> Emitter<'r> {
    /// `step` starts now, or started at `since` (milliseconds since the epoch).
    pub(super) fn started(
        &mut self,
        step: &StepId,
        since: Option<u64>,
    ) -> Result<StepStarted, RunError> {
        let mut event = event_started(step);
        if let Some(since) = since {
            event.time_ms = since;
        }
        self.emit(&event)?;
        Ok(StepStarted::of(&event))
    }

    /// `step` finished with `record`; returns when (milliseconds since the epoch), so that what
    /// starts at its end starts at that very time.
    pub(super) fn finished(
        &mut self,
        step: &StepId,
        started: StepStarted,
        record: &Evidence,
    ) -> Result<u64, RunError> {
        let event = event_finished(step, started, record);
        self.emit(&event)?;
        Ok(event.time_ms)
    }

    /// An earlier run did `step`.
    pub(super) fn skipped(&mut self, step: &StepId) -> Result<(), RunError> {
        self.skipped.insert(step.clone());
        self.emit(&event_skipped(step))
    }

    /// Where the servers' events go: the stream's file and the caller's observer (the
    /// progress line counts steps only).
    pub(super) fn servers(&self) -> ServerEvents<'r> {
        ServerEvents { file: self.file, observer: self.observer }
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

/// The observers of the servers' events (loads, wakes, releases), which the servers emit
/// themselves as they happen.
#[derive(Clone, Copy)]
pub(super) struct ServerEvents<'r> {
    file: Option<&'r EventWriter>,
    observer: Option<&'r dyn StepObserver>,
}

impl ServerEvents<'_> {
    /// Emits a server's `event`; a stream that cannot be written loses it (the step's own
    /// events report that error).
    pub(super) fn emit(&self, event: &Event) {
        if let Some(file) = self.file {
            let _unwritten = file.append(event);
        }
        if let Some(observer) = self.observer {
            observer.observe(event);
        }
    }
}
