//! The assignment: which node runs which targets, as `prgate ci --stage start` decided it and
//! the later stages read it (`state/schedule.json`, docs/workflow.md).
//!
//! Made once from the plan's estimate ([`crate::estimate::PlanEstimate`]): each node with work
//! gets its targets in the schedule's order, each named as `prgate run --only-model` names it
//! (the model, or [`COMMON_CHECKS`] for the common checks); the targets no node can take keep
//! their reason, so the finish stage can write their `not-run` records
//! ([`Assignment::unplaced_evidence`], [`not_run_evidence`]: made here, where the
//! unschedulable reasons are; [`every_check_not_run`] for a run not started; the runner
//! re-exports both as `prgate_runner::run::…`). The JSON form is the state file's:
//! `{"nodes": {"node": ["model", "~common"]}, "unschedulable": [{"model", "reason",
//! "not_run"}], "estimate": "…"}`.
//!
//! What it leaves to others: the schedule itself ([`super::schedule`]), the estimate in words
//! (the report crate), reading and writing the file (the binary).

use std::collections::BTreeMap;

use prgate_gate::evidence::{Check, Evidence, NotRunReason, Outcome, Provenance, SCHEMA_VERSION};
use prgate_scope::plan::{ModelPlan, Plan};
use serde::{Deserialize, Serialize};

use crate::estimate::PlanEstimate;

/// The name of the common checks as a target: in an assignment, in
/// `prgate_runner::run::RunRequest::only_models` (`--only-model`) and in the results' file
/// names; no model is named so. The runner re-exports it (`prgate_runner::run::COMMON_CHECKS`).
pub const COMMON_CHECKS: &str = "~common";

/// Which targets each node runs, and what no node can run. A key it does not know is refused
/// (a state file from another prgate, or edited by hand, is not half read).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assignment {
    /// Node name → the targets it runs (`~common` for the common checks).
    nodes: BTreeMap<String, Vec<String>>,
    /// What no node can run, and why.
    unschedulable: Vec<Unplaced>,
    /// The estimate in words, for the comment.
    #[serde(default)]
    estimate: Option<String>,
}

/// A target no node can take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Unplaced {
    /// The model, or `~common`.
    model: String,
    /// Each node's reason, in words.
    reason: String,
    /// What the target's `not-run` records say.
    not_run: NotRunReason,
}

impl Assignment {
    /// The assignment `estimate`'s schedule makes (only the nodes with work), with the
    /// estimate in words (`words`) for the comment.
    pub fn of(estimate: &PlanEstimate, words: Option<String>) -> Assignment {
        let target = |job: usize| {
            estimate.jobs[job].job.model.clone().unwrap_or_else(|| COMMON_CHECKS.to_owned())
        };
        let nodes = estimate
            .schedule
            .nodes()
            .iter()
            .filter(|load| !load.jobs.is_empty())
            .map(|load| (load.node.clone(), load.jobs.iter().map(|&job| target(job)).collect()))
            .collect();
        let mut unplaced: Vec<_> = estimate.schedule.unschedulable().iter().collect();
        unplaced.sort_by_key(|unplaced| unplaced.job);
        let unschedulable = unplaced
            .into_iter()
            .map(|unplaced| Unplaced {
                model: target(unplaced.job),
                reason: unplaced.reason.clone(),
                not_run: unplaced.not_run,
            })
            .collect();
        Assignment { nodes, unschedulable, estimate: words }
    }

    /// The nodes with work, by name.
    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(String::as_str)
    }

    /// The targets `node` runs, as `--only-model` names them; none for a node without work.
    pub fn targets(&self, node: &str) -> &[String] {
        self.nodes.get(node).map(Vec::as_slice).unwrap_or_default()
    }

    /// Node name → its targets.
    pub fn by_node(&self) -> &BTreeMap<String, Vec<String>> {
        &self.nodes
    }

    /// The nodes with work that sent nothing back: no record of `evidence` (what the node jobs
    /// returned) names them as the node it ran on. The finish stage refuses to judge without
    /// them: their targets' steps would read as never run.
    pub fn silent<'a>(&'a self, evidence: &[Evidence]) -> Vec<&'a str> {
        self.nodes()
            .filter(|&node| {
                !evidence.iter().any(|record| record.provenance.node.as_deref() == Some(node))
            })
            .collect()
    }

    /// The estimate in words.
    pub fn estimate(&self) -> Option<&str> {
        self.estimate.as_deref()
    }

    /// The `not-run` records of the targets no node could take, so that the verdict says why.
    pub fn unplaced_evidence(&self, plan: &Plan) -> Vec<Evidence> {
        self.unschedulable
            .iter()
            .flat_map(|unplaced| {
                let model = (unplaced.model != COMMON_CHECKS).then_some(unplaced.model.as_str());
                let detail = format!("no CI node can run it: {}", unplaced.reason);
                not_run_evidence(plan, model, unplaced.not_run, &detail)
            })
            .collect()
    }
}

/// The checks a model's tier runs, in the order the report lists them; none for a model on no
/// tier or removed by the PR.
pub fn planned_checks(model: &ModelPlan) -> &'static [Check] {
    if model.removed { &[] } else { prgate_gate::job::tier_checks(model.tier) }
}

/// The `not-run` records of every check `plan` runs (its running models' and, when selected,
/// the common checks'), each with `reason` and `detail`: a run that is not started.
pub fn every_check_not_run(plan: &Plan, reason: NotRunReason, detail: &str) -> Vec<Evidence> {
    let models = plan.running_models().map(|model| Some(model.name.as_str()));
    let common = plan.common.selected.then_some(None);
    models.chain(common).flat_map(|model| not_run_evidence(plan, model, reason, detail)).collect()
}

/// The `not-run` records of a target that does not run (`model`, or the common checks when
/// `None`): one per planned check, on the PR side (both sides for speed), each with `reason`
/// (for a target no node can take, the schedule's [`super::Unschedulable::not_run`]) and
/// `detail`.
pub fn not_run_evidence(
    plan: &Plan,
    model: Option<&str>,
    reason: NotRunReason,
    detail: &str,
) -> Vec<Evidence> {
    let checks: &[Check] = match model {
        None => &[Check::CommonTests],
        Some(name) => plan
            .models
            .iter()
            .find(|planned| planned.name == name)
            .map(planned_checks)
            .unwrap_or_default(),
    };
    let provenance = Provenance {
        base_commit: Some(plan.base_side_commit().to_owned()),
        pr_commit: Some(plan.head.sha.clone()),
        ..Provenance::default()
    };
    checks
        .iter()
        .map(|&check| Evidence {
            schema_version: SCHEMA_VERSION,
            model: model.map(str::to_owned),
            check,
            side: prgate_gate::job::whole_check_side(check),
            provenance: provenance.clone(),
            outcome: Outcome::NotRun {
                reason,
                detail: detail.to_owned(),
                subject: None,
                failed_on: None,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_file_reads_back_and_names_the_common_checks_as_only_model_does() {
        let text = r#"{
  "nodes": {"mi355x-1": ["alpha", "~common"], "mi355x-2": ["beta"]},
  "unschedulable": [{"model": "gamma", "reason": "mi355x-1: no checkpoint", "not_run": "no-checkpoint"}],
  "estimate": "about 2 h"
}"#;
        let assignment: Assignment = serde_json::from_str(text).expect("a schedule file");
        assert_eq!(assignment.nodes().collect::<Vec<_>>(), ["mi355x-1", "mi355x-2"]);
        assert_eq!(assignment.targets("mi355x-1"), ["alpha", COMMON_CHECKS]);
        assert!(assignment.targets("elsewhere").is_empty());
        assert_eq!(assignment.estimate(), Some("about 2 h"));
        let again: Assignment =
            serde_json::from_str(&serde_json::to_string(&assignment).expect("json"))
                .expect("read back");
        assert_eq!(again, assignment);
        let empty: Assignment =
            serde_json::from_str(r#"{"nodes": {}, "unschedulable": []}"#).expect("no estimate");
        assert_eq!(empty, Assignment::default());
    }

    #[test]
    fn a_node_with_work_that_no_record_names_is_silent() {
        let text =
            r#"{"nodes": {"a": ["alpha"], "b": ["beta"], "c": ["~common"]}, "unschedulable": []}"#;
        let assignment: Assignment = serde_json::from_str(text).expect("a schedule file");
        let on = |node: Option<&str>| Evidence {
            schema_version: SCHEMA_VERSION,
            model: Some("alpha".to_owned()),
            check: Check::CommonTests,
            side: prgate_gate::evidence::Side::Pr,
            provenance: Provenance { node: node.map(str::to_owned), ..Provenance::default() },
            outcome: Outcome::NotRun {
                reason: NotRunReason::Crash,
                detail: String::new(),
                subject: None,
                failed_on: None,
            },
        };
        for (evidence, silent) in [
            (vec![], vec!["a", "b", "c"]),
            (vec![on(Some("b")), on(None)], vec!["a", "c"]),
            (vec![on(Some("a")), on(Some("b")), on(Some("c")), on(Some("elsewhere"))], vec![]),
        ] {
            assert_eq!(assignment.silent(&evidence), silent);
        }
    }

    #[test]
    fn a_key_the_state_file_does_not_know_is_refused_by_name() {
        let typo = r#"{"nodes": {}, "unschedulable": [], "estimte": "about 2 h"}"#;
        let error = serde_json::from_str::<Assignment>(typo).expect_err("a misspelt key");
        assert!(error.to_string().contains("unknown field `estimte`"), "{error}");
        let unplaced = r#"{"nodes": {}, "unschedulable": [{"model": "gamma", "reason": "r", "not_run": "no-checkpoint", "node": "x"}]}"#;
        let error = serde_json::from_str::<Assignment>(unplaced).expect_err("an unplaced key");
        assert!(error.to_string().contains("unknown field `node`"), "{error}");
    }
}
