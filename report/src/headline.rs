//! A PR's outcome in a few lines, for a summary that lists many PRs (`prgate demo`): the plan's
//! scope on one line ([`scope_line`]), the verdict in a word ([`result_word`]) and the items
//! that decided it ([`why`]).
//!
//! Pure: a plan or a verdict in, text for a terminal out, every PR-given name escaped. The
//! whole verdict for a terminal is [`crate::verdict::human`]; the PR comment is
//! [`crate::comment`].
//!
//! What it leaves to others: the verdict (the gate), printing (the binary).

use std::fmt::Write as _;

use prgate_gate::verdict::{Headline, State, Verdict};
use prgate_scope::Plan;
use prgate_scope::plan::Tier;

use crate::escape::terminal;

/// The models that run and their tiers, on one line.
pub fn scope_line(plan: &Plan) -> String {
    let mut line = String::from("scope: ");
    let running: Vec<String> = plan
        .models
        .iter()
        .filter(|model| model.tier != Tier::None)
        .map(|model| {
            let tier = if model.tier == Tier::Full { "full" } else { "smoke" };
            let new = if model.new { ", new" } else { "" };
            format!("{} ({tier}{new})", terminal(&model.name))
        })
        .collect();
    if running.is_empty() {
        line.push_str("no model to run");
    } else {
        line.push_str(&running.join(", "));
    }
    let _ = write!(
        line,
        "; common checks {}",
        if plan.common.selected { "selected" } else { "skipped" }
    );
    line
}

/// The verdict in a word or three for a summary line (`PASS`, `PASS (warnings)`, `FAIL`, ...).
pub fn result_word(verdict: &Verdict) -> &'static str {
    match verdict.headline() {
        Headline::Pass => "PASS",
        Headline::PassWithWarnings => "PASS (warnings)",
        Headline::Pending => "PENDING",
        Headline::CannotJudge => "ERROR (could not judge)",
        Headline::Fail => "FAIL",
    }
}

/// The items that decided the verdict: the failed ones, else the pending ones, else the
/// warnings; at most four, then how many more. Each is escaped line by line for a terminal,
/// its lines kept (a log's tail), never shown as `\u{a}`.
pub fn why(verdict: &Verdict) -> Vec<String> {
    const SHOWN: usize = 4;
    let items: Vec<_> = verdict.sections.iter().flat_map(|section| &section.items).collect();
    let worst = [State::Fail, State::Error, State::Pending, State::AuthorProvided, State::Warn]
        .into_iter()
        .find(|state| items.iter().any(|item| item.state == *state));
    let Some(worst) = worst else { return Vec::new() };
    let chosen: Vec<_> = items.iter().filter(|item| item.state == worst).collect();
    let mut lines: Vec<String> = chosen
        .iter()
        .take(SHOWN)
        .map(|item| {
            let model = item.model.as_deref().map(|model| format!("{model}: ")).unwrap_or_default();
            let text = format!("{model}{}: {}", item.check, item.summary);
            text.lines().map(terminal).collect::<Vec<_>>().join("\n")
        })
        .collect();
    if chosen.len() > SHOWN {
        lines.push(format!("and {} more", chosen.len() - SHOWN));
    }
    lines
}

#[cfg(test)]
mod tests {
    use prgate_gate::evidence::{Check, Side};

    use super::*;
    use crate::fixture;

    #[test]
    fn the_scope_the_result_and_why_in_a_few_lines() {
        let plan = fixture::standard_plan();
        assert_eq!(
            scope_line(&plan),
            "scope: kimi_k31 (full), glm5 (smoke); common checks selected"
        );
        let empty = fixture::plan(vec![], false);
        assert_eq!(scope_line(&empty), "scope: no model to run; common checks skipped");

        let passing = fixture::judged(&plan, &fixture::passing(), None);
        assert_eq!(result_word(&passing), "PASS");
        assert!(why(&passing).is_empty());
        let mut failing = fixture::passing();
        failing.retain(|record| {
            !(record.model.as_deref() == Some("glm5") && record.check == Check::UnitTests)
        });
        failing.push(fixture::tests(Some("glm5"), Check::UnitTests, Side::Pr, &["t1"]));
        let failed = fixture::judged(&plan, &failing, None);
        assert_eq!(result_word(&failed), "FAIL");
        let why = why(&failed);
        assert!(why.iter().any(|line| line.starts_with("glm5: ")), "{why:?}");
    }
}
