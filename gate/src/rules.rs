//! The rules judged before any GPU work — the PR title and the CODEOWNERS policy — and the
//! shape of their outcomes, which `prgate plan --title` shows too.

use serde::{Deserialize, Serialize};

use crate::config::Severity;

/// One rule's outcome: its verdict is its worst finding's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleOutcome {
    /// `title` or `codeowners`.
    pub name: String,
    pub verdict: Severity,
    pub findings: Vec<Finding>,
}

/// One thing a rule found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub severity: Severity,
    pub message: String,
}

impl Finding {
    pub fn new(severity: Severity, message: String) -> Finding {
        Finding { severity, message }
    }
}

impl RuleOutcome {
    /// A rule's outcome from its findings; findings that pass are dropped.
    pub fn new(name: &str, findings: Vec<Finding>) -> RuleOutcome {
        let findings: Vec<Finding> =
            findings.into_iter().filter(|finding| finding.severity != Severity::Pass).collect();
        let verdict =
            findings.iter().map(|finding| finding.severity).max().unwrap_or(Severity::Pass);
        RuleOutcome { name: name.to_owned(), verdict, findings }
    }
}

/// Judges every rule that needs no GPU: the CODEOWNERS policy on the plan's facts, and the
/// title when there is one.
pub fn judge_rules(
    plan: &prgate_scope::Plan,
    title: Option<&str>,
    config: &crate::GateConfig,
    policy: &crate::codeowners::Policy,
) -> Vec<RuleOutcome> {
    let mut outcomes = vec![policy.judge(&plan.codeowners)];
    if let Some(title) = title {
        outcomes.push(crate::title::judge(title, &config.title, plan));
    }
    outcomes
}
