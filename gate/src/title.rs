//! The title rule: `[Type] [Hardware] scope: summary`.
//!
//! The type must be one the repository knows; the scope must name a model the plan touched, or
//! one of the configured other scopes (`common`, `ci`, ...). `[Perf]` and `[Feat]` (configurable)
//! switch on the gain rule.

use prgate_scope::plan::{Plan, Tier};

use crate::config::TitleConfig;
use crate::rules::{Finding, RuleOutcome};

/// A title taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedTitle {
    pub kind: String,
    pub hardware: Vec<String>,
    pub scopes: Vec<String>,
    pub summary: String,
}

/// What is wrong with a title's shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TitleError {
    #[error("a '[' with no ']'")]
    UnclosedTag,
    #[error("it does not start with a [Type] tag")]
    NoType,
    #[error("the [Type] tag is empty")]
    EmptyType,
    #[error("no 'scope:' after the tags")]
    NoScope,
    #[error("'{scope}' is not a scope (one word, or words joined by / or ,)")]
    NotAScope { scope: String },
    #[error("the summary after 'scope:' is empty")]
    EmptySummary,
}

/// Takes a title apart; `Err` says what is wrong with its shape.
pub fn parse(title: &str) -> Result<ParsedTitle, TitleError> {
    let mut rest = title.trim();
    let mut tags = Vec::new();
    while let Some(inner) = rest.strip_prefix('[') {
        let Some(end) = inner.find(']') else {
            return Err(TitleError::UnclosedTag);
        };
        tags.push(inner[..end].trim().to_owned());
        rest = inner[end + 1..].trim_start();
    }
    let Some((kind, hardware)) = tags.split_first() else {
        return Err(TitleError::NoType);
    };
    if kind.is_empty() {
        return Err(TitleError::EmptyType);
    }
    let Some((scope, summary)) = rest.split_once(':') else {
        return Err(TitleError::NoScope);
    };
    let scopes: Vec<String> = scope
        .split(['/', ','])
        .map(|part| part.trim().to_owned())
        .filter(|part| !part.is_empty())
        .collect();
    if scopes.is_empty() || scope.trim().contains(char::is_whitespace) {
        return Err(TitleError::NotAScope { scope: scope.trim().to_owned() });
    }
    let summary = summary.trim();
    if summary.is_empty() {
        return Err(TitleError::EmptySummary);
    }
    Ok(ParsedTitle {
        kind: kind.clone(),
        hardware: hardware.to_vec(),
        scopes,
        summary: summary.to_owned(),
    })
}

/// Judges a title against the configuration and the plan.
pub fn judge(title: &str, config: &TitleConfig, plan: &Plan) -> RuleOutcome {
    let mut findings = Vec::new();
    match parse(title) {
        Err(problem) => findings.push(Finding::new(
            config.malformed,
            format!("the title is not `[Type] [Hardware] scope: summary`: {problem}"),
        )),
        Ok(parsed) => {
            if !config.types.iter().any(|known| known.eq_ignore_ascii_case(&parsed.kind)) {
                findings.push(Finding::new(
                    config.unknown_type,
                    format!(
                        "[{}] is not a known type (known: {})",
                        parsed.kind,
                        config.types.join(", ")
                    ),
                ));
            }
            let touched: Vec<&str> = plan
                .models
                .iter()
                .filter(|model| model.tier != Tier::None)
                .map(|model| model.name.as_str())
                .collect();
            let names_touched = parsed.scopes.iter().any(|scope| {
                touched.contains(&scope.as_str())
                    || config.other_scopes.iter().any(|other| other.eq_ignore_ascii_case(scope))
            });
            if !names_touched {
                let touched_text =
                    if touched.is_empty() { "none".to_owned() } else { touched.join(", ") };
                findings.push(Finding::new(
                    config.scope_mismatch,
                    format!(
                        "the scope '{}' names no model this PR touches (touched: {touched_text}) and is not one of {}",
                        parsed.scopes.join("/"),
                        config.other_scopes.join(", ")
                    ),
                ));
            }
        }
    }
    RuleOutcome::new("title", findings)
}

/// Whether the title's type asks for a gain (`[Perf]`, `[Feat]`).
pub fn requires_gain(title: Option<&str>, gain_types: &[String]) -> bool {
    title
        .and_then(|title| parse(title).ok())
        .is_some_and(|parsed| gain_types.iter().any(|kind| kind.eq_ignore_ascii_case(&parsed.kind)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_from_the_seed_parse() {
        let cases = [
            (
                "[Perf] [MI355X] deepseek_v41: DSpark step glue in fewer launches",
                "Perf [MI355X] deepseek_v41 | DSpark step glue in fewer launches",
            ),
            ("[Chore] maintainer: updates", "Chore [] maintainer | updates"),
            (
                "[Feat] [MI355X] kimi_k3/kimi_k31: Kimi-K3's gfx950 launches",
                "Feat [MI355X] kimi_k3,kimi_k31 | Kimi-K3's gfx950 launches",
            ),
            (
                "  [Fix] [MI355X] [MI350X] glm53_flash: stop a fault: rows past 262,144 ",
                "Fix [MI355X,MI350X] glm53_flash | stop a fault: rows past 262,144",
            ),
        ];
        for (title, expected) in cases {
            let parsed = parse(title).expect("parses");
            let rendered = format!(
                "{} [{}] {} | {}",
                parsed.kind,
                parsed.hardware.join(","),
                parsed.scopes.join(","),
                parsed.summary
            );
            assert_eq!(rendered, expected);
        }
    }

    #[test]
    fn malformed_titles_say_why() {
        let cases = [
            ("Fix the thing", "it does not start with a [Type] tag"),
            ("[Fix the thing", "a '[' with no ']'"),
            ("[] x: y", "the [Type] tag is empty"),
            ("[Fix] no scope here", "no 'scope:' after the tags"),
            (
                "[Fix] two words: y",
                "'two words' is not a scope (one word, or words joined by / or ,)",
            ),
            ("[Fix] x:   ", "the summary after 'scope:' is empty"),
        ];
        for (title, expected) in cases {
            assert_eq!(
                parse(title).map_err(|error| error.to_string()),
                Err(expected.to_owned()),
                "{title}"
            );
        }
    }

    #[test]
    fn perf_and_feat_require_a_gain() {
        let types = vec!["Perf".to_owned(), "Feat".to_owned()];
        assert!(requires_gain(Some("[Perf] x: y"), &types));
        assert!(requires_gain(Some("[feat] x: y"), &types));
        assert!(!requires_gain(Some("[Fix] x: y"), &types));
        assert!(!requires_gain(Some("Perf x"), &types));
        assert!(!requires_gain(None, &types));
    }
}
