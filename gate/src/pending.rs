//! A final verdict that is still pending: the run is over, so a check still pending will never
//! report. Which checks those are, named as the error that the PR test posts (`error`, never a
//! pass and never a status left `pending`). Pure: a verdict in, the checks out.
//!
//! What it leaves to others: posting the error ([`crate::verdict`] judges; the binary posts).

use crate::State;
use crate::verdict::Verdict;

/// The checks of a final verdict that never reported: the verdict is still pending when the run
/// is over.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the run ended with checks that never reported: {}", .checks.join(", "))]
pub struct NeverReported {
    /// Each pending item as `MODEL CHECK` (`common CHECK` for the whole PR), in the verdict's
    /// order.
    pub checks: Vec<String>,
}

impl NeverReported {
    /// The checks of `verdict`, judged after the run, that never reported; `None` when the
    /// verdict is not pending.
    pub fn of(verdict: &Verdict) -> Option<NeverReported> {
        if verdict.result != State::Pending {
            return None;
        }
        let checks = verdict
            .sections
            .iter()
            .flat_map(|section| section.items.iter())
            .filter(|item| item.state == State::Pending)
            .map(|item| format!("{} {}", item.model.as_deref().unwrap_or("common"), item.check))
            .collect();
        Some(NeverReported { checks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::{Item, Section, SectionName};

    fn item(model: Option<&str>, check: &str, state: State) -> Item {
        Item {
            model: model.map(str::to_owned),
            check: check.to_owned(),
            state,
            rule: String::new(),
            summary: String::new(),
            numbers: None,
        }
    }

    fn verdict(result: State, items: Vec<Item>) -> Verdict {
        Verdict {
            schema_version: crate::verdict::SCHEMA_VERSION,
            pr_sha: None,
            result,
            rules: Vec::new(),
            sections: vec![Section { name: SectionName::Accuracy, state: result, items }],
            author_must_provide: Vec::new(),
            checks: Default::default(),
            recipe_changes: Vec::new(),
        }
    }

    #[test]
    fn a_pending_final_verdict_names_its_pending_checks() {
        let items = vec![
            item(Some("alpha"), "accuracy", State::Pending),
            item(Some("beta"), "accuracy", State::Pass),
            item(None, "tests", State::Pending),
        ];
        let never = NeverReported::of(&verdict(State::Pending, items.clone()));
        assert_eq!(
            never.map(|never| never.to_string()).as_deref(),
            Some("the run ended with checks that never reported: alpha accuracy, common tests")
        );
        for decided in [State::Pass, State::Fail, State::Error] {
            assert_eq!(NeverReported::of(&verdict(decided, items.clone())), None);
        }
    }
}
