//! A PR test's check run (`--check-run on`), as plain data: its name (`CONTEXT details`), its
//! conclusion from the status's state (in progress while pending; an error is not a pass: fail
//! closed), the comment as its summary, and the annotations: one for every verdict item that did
//! not pass, placed on a changed file of the PR so that GitHub shows it in the diff.
//!
//! An item of a model goes on the first changed path (not a deleted one) that put its model in
//! the plan; an item of the whole PR, or of a model no present path selected, on the first
//! changed path. Levels are the job summary's ([`AnnotationLevel::of`]); unlike the workflow
//! commands ([`crate::summary::annotations`]) there is no cap per level. Text is plain there,
//! each part made inert for a terminal and the line break ours. Pure: the comment's input and
//! the status in, the check run's content ([`CheckRunContent`]) out.
//!
//! What it leaves to others: the check run itself and its JSON (`prgate_github`, through the
//! binary).

use prgate_gate::verdict::Verdict;
use prgate_scope::ChangeStatus;
use prgate_scope::Plan;
use prgate_scope::plan::{ChangedPath, PathMatch};

use crate::comment::{CommentInput, MARKER, RenderError, render_comment};
use crate::escape::terminal;
use crate::status::{Status, StatusState};
use crate::summary::AnnotationLevel;

/// What a check run of a PR test shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRunContent {
    /// `CONTEXT details`, beside the status it details.
    pub name: String,
    /// `None` while it runs (in progress); else `success` or `failure` (`conclusion`).
    pub conclusion: Option<&'static str>,
    /// The status's description.
    pub title: String,
    /// The comment, without its marker.
    pub summary: String,
    pub details_url: Option<String>,
    /// The verdict's annotations; none before there is a verdict.
    pub annotations: Vec<CheckAnnotation>,
}

/// The check run of the comment `input` and the commit status `status` beside it.
pub fn check_run(
    input: &CommentInput<'_>,
    status: &Status,
) -> Result<CheckRunContent, RenderError> {
    let comment = render_comment(input)?;
    let summary = comment.strip_prefix(MARKER).unwrap_or(&comment).trim_start();
    Ok(CheckRunContent {
        name: format!("{} details", status.context),
        conclusion: conclusion(status.state),
        title: status.description.clone(),
        summary: summary.to_owned(),
        details_url: status.target_url.clone(),
        annotations: input
            .verdict
            .map(|verdict| check_annotations(verdict, input.plan))
            .unwrap_or_default(),
    })
}

/// A check run's conclusion for the status `state`: none while it is pending (in progress),
/// `success` for a success, and `failure` for a failure or an error: an error is not a pass,
/// fail closed.
fn conclusion(state: StatusState) -> Option<&'static str> {
    match state {
        StatusState::Pending => None,
        StatusState::Success => Some("success"),
        StatusState::Failure | StatusState::Error => Some("failure"),
    }
}

/// One annotation of a check run, on line 1 of `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckAnnotation {
    pub path: String,
    pub level: AnnotationLevel,
    pub title: String,
    pub message: String,
}

impl CheckAnnotation {
    /// The annotation's level as the Checks API names it: `failure`, `warning` or `notice`.
    pub fn api_level(&self) -> &'static str {
        match self.level {
            AnnotationLevel::Error => "failure",
            AnnotationLevel::Warning => "warning",
            AnnotationLevel::Notice => "notice",
        }
    }
}

/// The annotations of `verdict`, placed on `plan`'s changed paths; none when the PR changed no
/// path that is still there.
fn check_annotations(verdict: &Verdict, plan: &Plan) -> Vec<CheckAnnotation> {
    let mut annotations = Vec::new();
    for section in &verdict.sections {
        for item in &section.items {
            let Some(level) = AnnotationLevel::of(item.state) else { continue };
            let Some(path) = path_of(plan, item.model.as_deref()) else { continue };
            let who = item.model.as_deref().map(|model| format!("{model}: ")).unwrap_or_default();
            annotations.push(CheckAnnotation {
                path,
                level,
                title: terminal(&format!("AMD PR test: {}", section.name.title())),
                // Plain text, lines kept: each part inert, the line break ours.
                message: format!(
                    "{}{}: {}\nrule: {}",
                    terminal(&who),
                    terminal(&item.check),
                    terminal(&item.summary),
                    terminal(&item.rule)
                ),
            });
        }
    }
    annotations
}

/// The changed path an item of `model` (or of the whole PR) goes on.
fn path_of(plan: &Plan, model: Option<&str>) -> Option<String> {
    let present = |changed: &&ChangedPath| changed.status != ChangeStatus::Deleted;
    let mut present_paths = plan.changed.iter().filter(present);
    let found = match model {
        Some(model) => present_paths.find(|changed| {
            changed.matches.iter().any(
                |found| matches!(found, PathMatch::Model { model: owner, .. } if owner == model),
            )
        }),
        None => present_paths.next(),
    };
    found.or_else(|| plan.changed.iter().find(present)).map(|changed| changed.path.clone())
}

#[cfg(test)]
mod tests {
    use prgate_gate::evidence::{Check, Side};

    use super::*;
    use crate::fixture;

    #[test]
    fn only_a_success_concludes_a_check_run_as_one() {
        let check =
            |state, expect: Option<&str>| assert_eq!(conclusion(state), expect, "{state:?}");
        check(StatusState::Pending, None);
        check(StatusState::Success, Some("success"));
        check(StatusState::Failure, Some("failure"));
        // An error is not a pass: fail closed.
        check(StatusState::Error, Some("failure"));
    }

    #[test]
    fn levels_are_named_as_the_checks_api_names_them() {
        let named = |level| {
            CheckAnnotation {
                path: String::new(),
                level,
                title: String::new(),
                message: String::new(),
            }
            .api_level()
        };
        assert_eq!(
            [AnnotationLevel::Error, AnnotationLevel::Warning, AnnotationLevel::Notice].map(named),
            ["failure", "warning", "notice"]
        );
    }

    #[test]
    fn a_failed_item_goes_on_its_models_changed_path_and_a_passed_one_nowhere() {
        let plan = fixture::standard_plan();
        assert!(
            check_annotations(&fixture::judged(&plan, &fixture::passing(), None), &plan)
                .iter()
                .all(|annotation| annotation.level != AnnotationLevel::Error)
        );
        let mut records = fixture::passing();
        records.retain(|record| {
            !(record.model.as_deref() == Some("kimi_k31") && record.check == Check::UnitTests)
        });
        records.push(fixture::tests(Some("kimi_k31"), Check::UnitTests, Side::Pr, &["t\u{1b}1"]));
        let verdict = fixture::judged(&plan, &records, None);
        let annotations = check_annotations(&verdict, &plan);
        let failed: Vec<&CheckAnnotation> = annotations
            .iter()
            .filter(|annotation| annotation.level == AnnotationLevel::Error)
            .collect();
        assert!(!failed.is_empty(), "{annotations:#?}");
        for annotation in failed {
            assert_eq!(annotation.path, "models/kimi_k31/kernel.py");
            assert!(annotation.message.starts_with("kimi_k31: "), "{annotation:?}");
            assert!(annotation.message.contains("\nrule: "), "{annotation:?}");
            assert!(!annotation.message.contains('\u{1b}'), "{annotation:?}");
        }
    }
}
