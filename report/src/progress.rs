//! Where a run is, for the comment's table of checks: every check the plan runs, waiting,
//! running or done.
//!
//! Built two ways, both from the plan's checks (the common checks when selected, then each
//! running model's tier checks, in the plan's order): [`planned`] says every check waits;
//! [`CheckStates`] follows the step loop's starts and finishes, read from its event stream by
//! [`CheckStates::observe`] (a check runs once a step of it started, is done once every step
//! that started has finished); [`from_evidence`] marks done
//! the checks that have a record (the finish stage, which sees only evidence). Pure: the plan
//! and what happened in, a [`Progress`] out.
//!
//! What it leaves to others: which checks a tier runs (`prgate_gate::job::tier_checks`), which
//! models run (`prgate_scope::Plan::running_models`), the step loop and its events (the
//! runner), rendering the table (`crate::comment`).

use std::collections::BTreeMap;

use prgate_gate::events::{Event, EventKind};
use prgate_gate::evidence::{Check, Evidence};
use prgate_gate::job::tier_checks;
use prgate_scope::Plan;

use crate::comment::{Progress, StepProgress, StepState};

/// Every check the plan runs, waiting: one line per model and check.
pub fn planned(plan: &Plan) -> Progress {
    let common = plan.common.selected.then(|| StepProgress {
        model: None,
        check: Check::CommonTests.describe().to_owned(),
        state: StepState::Waiting,
    });
    let models = plan.running_models().flat_map(|model| {
        tier_checks(model.tier).iter().map(|check| StepProgress {
            model: Some(model.name.clone()),
            check: check.describe().to_owned(),
            state: StepState::Waiting,
        })
    });
    Progress { steps: common.into_iter().chain(models).collect() }
}

/// The plan's checks, done when a record of them is in `evidence`.
pub fn from_evidence(plan: &Plan, evidence: &[Evidence]) -> Progress {
    let mut progress = planned(plan);
    for step in &mut progress.steps {
        let recorded = evidence
            .iter()
            .any(|record| record.model == step.model && record.check.describe() == step.check);
        if recorded {
            step.state = StepState::Done;
        }
    }
    progress
}

/// Which checks have started and how many of their steps are running, from the step loop's
/// starts and finishes.
#[derive(Debug, Default)]
pub struct CheckStates {
    open: BTreeMap<(Option<String>, String), i64>,
}

impl CheckStates {
    /// A step of `check` (of `model`, or the common checks) started.
    fn step_started(&mut self, model: Option<&str>, check: Check) {
        *self.count(model, check) += 1;
    }

    /// A step of `check` (of `model`, or the common checks) finished.
    fn step_finished(&mut self, model: Option<&str>, check: Check) {
        *self.count(model, check) -= 1;
    }

    /// A line of the step loop's event stream: a step's start or finish moves its check on; a
    /// skipped step (done by an earlier run) and a server's event do not.
    pub fn observe(&mut self, event: &Event) {
        let model = event.model.as_deref();
        match event.event {
            EventKind::StepStarted => self.step_started(model, event.check),
            EventKind::StepFinished => self.step_finished(model, event.check),
            EventKind::StepSkipped
            | EventKind::ServerStarted
            | EventKind::ServerWoken
            | EventKind::ServerReleased => {}
        }
    }

    /// The plan's checks: running once a step of it started, done once every step of it that
    /// started has finished.
    pub fn progress(&self, plan: &Plan) -> Progress {
        let mut progress = planned(plan);
        for step in &mut progress.steps {
            let key = (step.model.clone(), step.check.clone());
            if let Some(&running) = self.open.get(&key) {
                step.state = if running > 0 { StepState::Running } else { StepState::Done };
            }
        }
        progress
    }

    fn count(&mut self, model: Option<&str>, check: Check) -> &mut i64 {
        self.open.entry((model.map(str::to_owned), check.describe().to_owned())).or_default()
    }
}

#[cfg(test)]
mod tests {
    use prgate_gate::evidence::Side;

    use super::*;
    use crate::fixture;

    /// The progress as `(model, check, state)` rows.
    fn rows(progress: &Progress) -> Vec<(Option<&str>, &str, StepState)> {
        progress
            .steps
            .iter()
            .map(|step| (step.model.as_deref(), step.check.as_str(), step.state))
            .collect()
    }

    #[test]
    fn the_plan_lists_the_common_checks_then_each_running_models_tier_checks() {
        let mut plan = fixture::standard_plan();
        plan.models.push(fixture::model("gone", prgate_scope::plan::Tier::Full, None));
        plan.models.last_mut().expect("a model").removed = true;
        let progress = planned(&plan);
        let rows = rows(&progress);
        assert_eq!(rows[0], (None, "common tests", StepState::Waiting));
        let kimi = rows.iter().filter(|row| row.0 == Some("kimi_k31")).count();
        let glm = rows.iter().filter(|row| row.0 == Some("glm5")).count();
        assert_eq!((kimi, glm), (7, 5));
        assert_eq!(rows.len(), 1 + 7 + 5, "ds_v4 (tier none) and a removed model run nothing");
        assert!(rows.iter().all(|row| row.2 == StepState::Waiting));
    }

    #[test]
    fn steps_move_a_check_to_running_then_done_and_a_record_marks_it_done() {
        let plan = fixture::standard_plan();
        let state_of = |progress: &Progress, model: Option<&str>, check: Check| {
            rows(progress)
                .into_iter()
                .find(|row| row.0 == model && row.1 == check.describe())
                .map(|row| row.2)
        };
        let mut states = CheckStates::default();
        states.step_started(Some("kimi_k31"), Check::Speed);
        states.step_started(Some("kimi_k31"), Check::Speed);
        states.step_finished(Some("kimi_k31"), Check::Speed);
        let progress = states.progress(&plan);
        assert_eq!(state_of(&progress, Some("kimi_k31"), Check::Speed), Some(StepState::Running));
        states.step_finished(Some("kimi_k31"), Check::Speed);
        states.step_started(None, Check::CommonTests);
        states.step_finished(None, Check::CommonTests);
        let progress = states.progress(&plan);
        assert_eq!(state_of(&progress, Some("kimi_k31"), Check::Speed), Some(StepState::Done));
        assert_eq!(state_of(&progress, None, Check::CommonTests), Some(StepState::Done));
        assert_eq!(state_of(&progress, Some("glm5"), Check::Speed), Some(StepState::Waiting));

        let record = fixture::tests(Some("glm5"), Check::UnitTests, Side::Pr, &[]);
        let progress = from_evidence(&plan, &[record]);
        assert_eq!(state_of(&progress, Some("glm5"), Check::UnitTests), Some(StepState::Done));
        assert_eq!(state_of(&progress, Some("glm5"), Check::Speed), Some(StepState::Waiting));
        assert_eq!(state_of(&progress, None, Check::CommonTests), Some(StepState::Waiting));
    }

    #[test]
    fn only_a_steps_start_and_finish_move_its_check() {
        let plan = fixture::standard_plan();
        let event = |kind| Event {
            schema_version: prgate_gate::events::EVENTS_SCHEMA_VERSION,
            event: kind,
            model: Some("kimi_k31".to_owned()),
            check: Check::Speed,
            side: Side::Pr,
            part: None,
            time_ms: 0,
            started_ms: None,
            outcome: None,
            reason: None,
        };
        let speed = |states: &CheckStates| {
            rows(&states.progress(&plan))
                .into_iter()
                .find(|row| row.0 == Some("kimi_k31") && row.1 == Check::Speed.describe())
                .map(|row| row.2)
        };
        let mut states = CheckStates::default();
        let others = [
            EventKind::StepSkipped,
            EventKind::ServerStarted,
            EventKind::ServerWoken,
            EventKind::ServerReleased,
        ];
        for kind in others {
            states.observe(&event(kind));
        }
        assert_eq!(speed(&states), Some(StepState::Waiting));
        states.observe(&event(EventKind::StepStarted));
        assert_eq!(speed(&states), Some(StepState::Running));
        states.observe(&event(EventKind::StepFinished));
        assert_eq!(speed(&states), Some(StepState::Done));
    }
}
