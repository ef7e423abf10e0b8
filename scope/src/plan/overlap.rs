//! What two plans both select: the merge queue's question (`prgate ci` on a `merge_group`),
//! whether what the queue adds touches what the PR was tested for.
//!
//! A model counts as selected by a plan when its tier is not `none`; the overlap is the models
//! both plans select, the common checks when both select them, and the changed paths (of
//! either plan) that put an overlapping model, or every model (a shared path), in a plan, with
//! the paths that made the common checks run when they overlap. Pure: two plans in, an
//! [`Overlap`] out.
//!
//! What it leaves to others: making the plans and the queue's file lists (git, the binary),
//! saying what it means for the merge commit's status ([`crate::queue`]).

use std::collections::BTreeSet;

use super::{ChangedPath, CommonPlan, ModelPlan, PathMatch, Plan, Reason, Tier};

/// What two plans both select.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overlap {
    /// The models both select, by name, sorted.
    pub models: BTreeSet<String>,
    /// Both select the common checks.
    pub common: bool,
    /// The changed paths (and a rename's old path) of either plan that select what overlaps,
    /// sorted: what runs again.
    pub paths: BTreeSet<String>,
}

impl Overlap {
    /// What `first` and `second` both select.
    pub fn of(first: &Plan, second: &Plan) -> Overlap {
        Overlap::between(&Selected::of(first), &Selected::of(second))
    }

    /// Nothing overlaps: no model and not the common checks.
    pub fn is_empty(&self) -> bool {
        self.models.is_empty() && !self.common
    }

    fn between(first: &Selected<'_>, second: &Selected<'_>) -> Overlap {
        let models: BTreeSet<String> =
            first.models().intersection(&second.models()).cloned().collect();
        let common = first.common.selected && second.common.selected;
        let keep = |changed: &&ChangedPath| {
            changed.matches.iter().any(|found| match found {
                PathMatch::Model { model, .. } => models.contains(model),
                PathMatch::Shared { .. } => true,
                PathMatch::Ignored { .. } | PathMatch::NoModel { .. } => false,
            })
        };
        let mut paths = BTreeSet::new();
        for changed in first.changed.iter().chain(second.changed).filter(keep) {
            paths.insert(changed.path.clone());
            paths.extend(changed.old_path.clone());
        }
        if common {
            paths.extend(first.common.reasons.iter().chain(&second.common.reasons).filter_map(
                |reason| match reason {
                    Reason::ChangedPath { path, .. } => Some(path.clone()),
                    Reason::UntrustedDiff { .. } | Reason::SharedChange => None,
                },
            ));
        }
        Overlap { models, common, paths }
    }
}

/// The part of a plan the overlap reads.
struct Selected<'a> {
    models: &'a [ModelPlan],
    common: &'a CommonPlan,
    changed: &'a [ChangedPath],
}

impl<'a> Selected<'a> {
    fn of(plan: &'a Plan) -> Selected<'a> {
        Selected { models: &plan.models, common: &plan.common, changed: &plan.changed }
    }

    fn models(&self) -> BTreeSet<String> {
        self.models
            .iter()
            .filter(|model| model.tier != Tier::None)
            .map(|model| model.name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{Change, ChangeStatus};
    use crate::manifest::Manifest;
    use crate::plan::{KnownModels, Selection, select};

    const MANIFEST: &str = r#"
[scope]
models = ["models/{model}/**"]
shared = ["common/**"]
"#;

    /// The selection of `paths` (each modified) over the models `alpha`, `beta` and `gamma`.
    fn selection(paths: &[&str]) -> Selection {
        let manifest = Manifest::parse(MANIFEST, "prgate.toml").expect("the test manifest");
        let mut known = KnownModels::default();
        for model in ["alpha", "beta", "gamma"] {
            known.add_base_file(&manifest, &format!("models/{model}/x.py"));
        }
        let changes: Vec<Change> = paths
            .iter()
            .map(|path| Change {
                path: (*path).to_owned(),
                status: ChangeStatus::Modified,
                old_path: None,
            })
            .collect();
        select(&manifest, &known, &changes, None)
    }

    /// The overlap of the selections of `first` and `second`, as `(models, common, paths)`.
    fn check(first: &[&str], second: &[&str]) -> (Vec<String>, bool, Vec<String>) {
        let (first, second) = (selection(first), selection(second));
        fn of(selection: &Selection) -> Selected<'_> {
            Selected {
                models: &selection.models,
                common: &selection.common,
                changed: &selection.changed,
            }
        }
        let overlap = Overlap::between(&of(&first), &of(&second));
        (overlap.models.into_iter().collect(), overlap.common, overlap.paths.into_iter().collect())
    }

    #[test]
    fn the_overlap_is_what_both_select_and_the_paths_that_selected_it() {
        // Different models: nothing overlaps.
        assert_eq!(check(&["models/alpha/a.py"], &["models/beta/b.py"]), (vec![], false, vec![]));
        // The same model: it, and both plans' paths of it.
        assert_eq!(
            check(&["models/alpha/a.py", "models/beta/b.py"], &["models/alpha/c.py"]),
            (
                vec!["alpha".to_owned()],
                false,
                vec!["models/alpha/a.py".to_owned(), "models/alpha/c.py".to_owned()]
            )
        );
        // A shared path puts every model on smoke in its plan, and the common checks: with the
        // other plan's model, that model and the common checks overlap only when both select
        // the common checks.
        let (models, common, paths) = check(&["common/c.py"], &["models/gamma/g.py"]);
        assert_eq!((models, common), (vec!["gamma".to_owned()], false));
        assert_eq!(paths, ["common/c.py", "models/gamma/g.py"]);
        let (models, common, paths) = check(&["common/c.py"], &["common/d.py"]);
        assert_eq!(models, ["alpha", "beta", "gamma"]);
        assert!(common);
        assert_eq!(paths, ["common/c.py", "common/d.py"]);
    }
}
