//! Why a step's work gave no evidence: [`StepFailure`], the reason and detail of the `not-run`
//! record it becomes. A command that could not run or was stopped ([`super::exec`]), a server
//! that is not serving ([`super::server`]), an install that failed, a base side without a
//! recipe to take its commands from, a benchmark run that measured nothing: each is one of
//! these, and the step that needed the work records it with [`StepFailure::not_run`].
//!
//! What it leaves to others: which reason a failure has (the code that meets it), the words of
//! its detail (idem), the record itself (`super::steps`).

use prgate_gate::evidence::{NotRunReason, Outcome};

/// Why a step's work gave no evidence: what its `not-run` record says.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{detail}")]
pub(super) struct StepFailure {
    pub reason: NotRunReason,
    pub detail: String,
}

impl StepFailure {
    pub(super) fn new(reason: NotRunReason, detail: impl Into<String>) -> StepFailure {
        StepFailure { reason, detail: detail.into() }
    }

    /// The work crashed (or could not start).
    pub(super) fn crash(detail: impl Into<String>) -> StepFailure {
        StepFailure::new(NotRunReason::Crash, detail)
    }

    /// A failure of prgate's own setup around the work (a server's port), not of the work.
    pub(super) fn other(error: &dyn std::fmt::Display) -> StepFailure {
        StepFailure::new(NotRunReason::Other, error.to_string())
    }

    /// The `not-run` outcome of a step that failed so, about `subject` when it names one.
    pub(super) fn not_run(self, subject: Option<&str>) -> Outcome {
        super::not_run(self.reason, self.detail, subject)
    }
}
