//! Gathering a finished job: its evidence copied into the run's results directory, and a
//! `not-run` record for every step it did not record when it did not complete.
//!
//! What a job must record is its target's steps in the job plan ([`prgate_gate::job`]), made
//! before any job starts; a step is accounted for as the gate accounts for it
//! ([`prgate_gate::job::accounted`]).

use std::collections::BTreeSet;

use prgate_gate::evidence::{Evidence, NotRunReason, Outcome, Provenance, SCHEMA_VERSION};
use prgate_gate::job::{Target, accounted};

use crate::results::StepId;

/// The steps of `target` that `records` leave unaccounted for.
pub(super) fn unrecorded(target: &Target, records: &[Evidence]) -> Vec<StepId> {
    target.evidence_steps().filter(|step| !accounted(step, records)).collect()
}

/// A `not-run` record of `step`.
pub(super) fn not_run_record(
    step: &StepId,
    provenance: &Provenance,
    reason: NotRunReason,
    detail: &str,
) -> Evidence {
    Evidence {
        schema_version: SCHEMA_VERSION,
        model: step.model().map(str::to_owned),
        check: step.check(),
        side: step.side(),
        provenance: provenance.clone(),
        outcome: Outcome::NotRun {
            reason,
            detail: detail.to_owned(),
            subject: step.part().map(ToString::to_string),
            failed_on: None,
        },
    }
}

/// The steps of `records`, for removing what a job no longer has.
pub(super) fn steps_of(records: &[Evidence]) -> BTreeSet<StepId> {
    records.iter().map(StepId::of).collect()
}
