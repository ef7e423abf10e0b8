//! The annotations of a check run (`--check-run on`): one for every verdict item that did not
//! pass, placed on a changed file of the PR so that GitHub shows it in the diff.
//!
//! An item of a model goes on the first changed path (not a deleted one) that put its model in
//! the plan; an item of the whole PR, or of a model no present path selected, on the first
//! changed path. Levels are the job summary's ([`AnnotationLevel::of`]); unlike the workflow
//! commands ([`crate::summary::annotations`]) there is no cap per level. Text is plain there,
//! each part made inert for a terminal and the line break ours. Pure: the verdict and the plan
//! in, annotations out.
//!
//! What it leaves to others: the check run itself and its JSON (the binary's GitHub client).

use prgate_gate::verdict::Verdict;
use prgate_scope::ChangeStatus;
use prgate_scope::Plan;
use prgate_scope::plan::{ChangedPath, PathMatch};

use crate::escape::terminal;
use crate::summary::AnnotationLevel;

/// One annotation of a check run, on line 1 of `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckAnnotation {
    pub path: String,
    pub level: AnnotationLevel,
    pub title: String,
    pub message: String,
}

/// The annotations of `verdict`, placed on `plan`'s changed paths; none when the PR changed no
/// path that is still there.
pub fn check_annotations(verdict: &Verdict, plan: &Plan) -> Vec<CheckAnnotation> {
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
