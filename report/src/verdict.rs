//! A verdict for a terminal (`prgate gate`), and the rules' outcomes under a plan.

use std::fmt::Write as _;

use prgate_gate::config::Severity;
use prgate_gate::rules::RuleOutcome;
use prgate_gate::verdict::{Headline, State, Verdict};

use crate::escape::terminal;

/// The verdict as text for a terminal: the checklist in the guideline's order, one line per
/// item with its state and what decided it.
pub fn human(verdict: &Verdict) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "AMD PR test: {}", result_word(verdict.headline()));
    for section in &verdict.sections {
        let _ = writeln!(out, "\n{} [{}]", section.name.title(), state_word(section.state));
        if section.items.is_empty() {
            let _ = writeln!(out, "  nothing to check");
        }
        for item in &section.items {
            let model = item
                .model
                .as_deref()
                .map(|model| format!("{}: ", terminal(model)))
                .unwrap_or_default();
            let mut lines = item.summary.lines();
            let _ = writeln!(
                out,
                "  [{}] {model}{}: {}",
                state_word(item.state),
                terminal(&item.check),
                terminal(lines.next().unwrap_or_default())
            );
            // A log's tail, indented under its item: each line on a line of its own.
            for line in lines {
                let _ = writeln!(out, "         | {}", terminal(line));
            }
            if item.state != State::Pass {
                let _ = writeln!(out, "         rule: {}", item.rule);
            }
        }
    }
    if !verdict.author_must_provide.is_empty() {
        let _ = writeln!(out, "\nThe author must provide:");
        for line in &verdict.author_must_provide {
            let _ = writeln!(out, "  - {}", terminal(line));
        }
    }
    out
}

/// The rules' outcomes as lines for a terminal, after a plan.
pub fn rules_human(rules: &[RuleOutcome]) -> String {
    let mut out = String::from("\nrules\n");
    for rule in rules {
        let _ = writeln!(out, "  {:<11} {}", rule.name, severity_word(rule.verdict));
        for finding in &rule.findings {
            let _ = writeln!(
                out,
                "    {}: {}",
                severity_word(finding.severity),
                terminal(&finding.message)
            );
        }
    }
    out
}

/// The rules' outcomes as Markdown, after a plan.
pub fn rules_markdown(rules: &[RuleOutcome]) -> String {
    let mut out = String::from("\n**Rules**\n\n");
    for rule in rules {
        let _ = writeln!(out, "- `{}`: **{}**", rule.name, severity_word(rule.verdict));
        for finding in &rule.findings {
            let _ = writeln!(
                out,
                "  - {}: {}",
                severity_word(finding.severity),
                crate::escape::markdown_text_with_code(
                    &finding.message,
                    crate::escape::MarkdownPlace::Paragraph
                )
            );
        }
    }
    out
}

fn result_word(headline: Headline) -> &'static str {
    match headline {
        Headline::Pass => "PASS",
        Headline::PassWithWarnings => "PASS with warnings",
        Headline::Pending => "PENDING",
        Headline::CannotJudge => "ERROR: some checks could not be judged",
        Headline::Fail => "FAIL",
    }
}

/// A state as a word of the same width, so that columns line up without colour.
fn state_word(state: State) -> &'static str {
    match state {
        State::Pass => "pass",
        State::Warn => "warn",
        State::AuthorProvided => "author",
        State::Pending => "pending",
        State::Error => "ERROR",
        State::Fail => "FAIL",
        State::NothingToCheck => "none",
        State::NotJudged => "info",
    }
}

fn severity_word(severity: Severity) -> &'static str {
    match severity {
        Severity::Pass => "pass",
        Severity::Warn => "warn",
        Severity::Fail => "FAIL",
    }
}

#[cfg(test)]
mod tests {
    use prgate_gate::rules::Finding;

    use super::*;

    #[test]
    fn a_finding_under_a_plan_shows_its_paths_and_owners_as_code() {
        let rules = [RuleOutcome::new(
            "codeowners",
            vec![Finding::new(
                Severity::Fail,
                "`CODEOWNERS` line 2 removed: `/m/ @team`. Policy rule: `line-removed`.".into(),
            )],
        )];
        assert_eq!(
            rules_markdown(&rules),
            "\n**Rules**\n\n- `codeowners`: **FAIL**\n  - FAIL: `CODEOWNERS` line 2 removed: `/m/ @team`. Policy rule: `line-removed`.\n"
        );
    }
}
