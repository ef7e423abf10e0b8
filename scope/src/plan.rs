//! The plan: what every model runs, and why. Its types are the wire format later steps read;
//! the rest of this page is `docs/plan.md`.
//!
#![doc = include_str!("../../docs/plan.md")]

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::change::Change;
use crate::codeowners::CodeownersFacts;
use crate::manifest::Manifest;
use crate::pattern::{BoundModelPattern, is_valid_model_name};

pub mod overlap;

/// The version of the plan's JSON format.
pub const SCHEMA_VERSION: u32 = 1;

/// What every model runs, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub schema_version: u32,
    pub base: Revision,
    pub head: Head,
    /// The merge-base of base and head, when there is one.
    pub merge_base: Option<String>,
    pub manifest: ManifestSource,
    pub diff: DiffInfo,
    pub changed: Vec<ChangedPath>,
    pub models: Vec<ModelPlan>,
    pub common: CommonPlan,
    pub warnings: Vec<String>,
    /// What the change did to the CODEOWNERS file: the facts the gate's CODEOWNERS policy
    /// judges.
    #[serde(default)]
    pub codeowners: CodeownersFacts,
}

impl Plan {
    /// The commit the base side runs: the merge-base, else the base (no merge-base).
    pub fn base_side_commit(&self) -> &str {
        self.merge_base.as_deref().unwrap_or(&self.base.sha)
    }

    /// The diff's renamed files: (old path, new path), in the plan's order.
    pub fn renamed_files(&self) -> impl Iterator<Item = (&str, &str)> {
        self.changed
            .iter()
            .filter(|changed| changed.status == crate::change::ChangeStatus::Renamed)
            .filter_map(|changed| Some((changed.old_path.as_deref()?, changed.path.as_str())))
    }

    /// The models that run: tier full or smoke and not removed by the PR, in the plan's order.
    pub fn running_models(&self) -> impl Iterator<Item = &ModelPlan> {
        self.models
            .iter()
            .filter(|model| matches!(model.tier, Tier::Full | Tier::Smoke) && !model.removed)
    }
}

impl ModelPlan {
    /// The model's name on the base side: its old name when the PR renamed it.
    pub fn base_name(&self) -> &str {
        self.renamed_from.as_deref().unwrap_or(&self.name)
    }

    /// The name base's recipe of the model is at ([`ModelPlan::base_name`]); `None` for a
    /// model new in the PR, which base has no recipe of.
    pub fn base_recipe_name(&self) -> Option<&str> {
        (!self.new).then(|| self.base_name())
    }
}

/// A ref as the user named it, and the commit it resolved to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revision {
    #[serde(rename = "ref")]
    pub reference: String,
    pub sha: String,
}

/// The head side: a commit, and whether uncommitted changes were added to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    #[serde(rename = "ref")]
    pub reference: String,
    pub sha: String,
    pub worktree: bool,
}

/// Where the manifest was read from: always the base side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestSource {
    pub path: String,
    pub commit: String,
}

/// Where the changed files came from, and whether they can be trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffInfo {
    pub source: DiffSource,
    pub trusted: bool,
    pub warnings: Vec<String>,
}

/// The origin of the list of changed files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiffSource {
    /// `git diff` from the merge-base to head.
    Git,
    /// `git diff` from the merge-base to the working tree, untracked files included.
    Worktree,
    /// A list given by the caller (GitHub's API, say).
    FileList,
}

/// A changed path and what it matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedPath {
    pub path: String,
    pub status: crate::change::ChangeStatus,
    pub old_path: Option<String>,
    pub matches: Vec<PathMatch>,
}

/// One pattern a changed path matched.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PathMatch {
    /// The path belongs to a model.
    Model { model: String, pattern: String, path: String },
    /// The path is shared by every model.
    Shared { pattern: String, path: String },
    /// The path is ignored: it selects nothing.
    Ignored { pattern: String, path: String },
    /// The path matches a models pattern, but no known model fits it.
    NoModel { pattern: String, path: String },
}

/// The checks tier of one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    None,
    Smoke,
    Full,
}

/// What one model runs, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelPlan {
    pub name: String,
    pub tier: Tier,
    pub new: bool,
    pub removed: bool,
    /// The model on the base side whose files the PR renamed to this one: it is the same model
    /// under a new name (not `new`), held to that name's base recipe and base results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renamed_from: Option<String>,
    /// For a model the PR removes by renaming its files: the model they were renamed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renamed_to: Option<String>,
    /// Whether the model's README exists on the head side; `null` when the manifest does not
    /// say where READMEs are (`scope.readme`).
    #[serde(default)]
    pub readme: Option<bool>,
    pub reasons: Vec<Reason>,
}

/// Whether the common checks run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommonPlan {
    pub selected: bool,
    pub reasons: Vec<Reason>,
}

/// Why something was selected.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reason {
    /// The diff cannot be trusted, so everything runs.
    UntrustedDiff { detail: String },
    /// A changed path matched a pattern.
    ChangedPath { path: String, pattern: String },
    /// Shared paths changed: they are listed once, as the reasons of `common`.
    SharedChange,
}

impl Tier {
    /// The tier's name as the JSON and the tables show it.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::None => "none",
            Tier::Smoke => "smoke",
            Tier::Full => "full",
        }
    }
}

/// Which models exist on each side, discovered by matching every file of the base and head
/// trees against the whole-segment model patterns.
///
/// The base tree is added path by path; the head tree is the base tree with the tree diff
/// applied, so only the changes are matched again. A model exists on a side while at least one
/// of its files does.
#[derive(Debug, Clone, Default)]
pub struct KnownModels {
    /// Per model: how many (file, pattern) matches on the base side and on the head side.
    counts: BTreeMap<String, (usize, usize)>,
    /// Captured names that are not valid model names, with one path that gave each.
    invalid: BTreeMap<String, String>,
}

impl KnownModels {
    /// Counts a file of the base tree (and so, until a change removes it, of the head tree).
    pub fn add_base_file(&mut self, manifest: &Manifest, path: &str) {
        for name in self.discover(manifest, path) {
            let counts = self.counts.entry(name).or_default();
            counts.0 += 1;
            counts.1 += 1;
        }
    }

    /// Applies one change of the tree diff from the base tree to the head tree.
    pub fn apply_change(&mut self, manifest: &Manifest, change: &Change) {
        use crate::change::ChangeStatus::{Added, Copied, Deleted, Renamed};
        let (removed, added) = match change.status {
            Added | Copied => (None, Some(change.path.as_str())),
            Deleted => (Some(change.path.as_str()), None),
            Renamed => (change.old_path.as_deref(), Some(change.path.as_str())),
            _ => (None, None),
        };
        for name in removed.map(|path| self.discover(manifest, path)).unwrap_or_default() {
            let counts = self.counts.entry(name).or_default();
            counts.1 = counts.1.saturating_sub(1);
        }
        for name in added.map(|path| self.discover(manifest, path)).unwrap_or_default() {
            self.counts.entry(name).or_default().1 += 1;
        }
    }

    /// Every known model with whether it exists on the base and on the head side.
    pub fn presence(&self) -> impl Iterator<Item = (&str, bool, bool)> {
        self.counts
            .iter()
            .filter(|(_, (base, head))| *base > 0 || *head > 0)
            .map(|(name, (base, head))| (name.as_str(), *base > 0, *head > 0))
    }

    /// Warnings about captured names that cannot be model names.
    pub fn warnings(&self) -> Vec<String> {
        self.invalid
            .iter()
            .map(|(name, path)| {
                format!(
                    "'{name}' (from {path}) is not a valid model name (letters, digits, _, - and \
                     .): not a model"
                )
            })
            .collect()
    }

    fn discover(&mut self, manifest: &Manifest, path: &str) -> Vec<String> {
        let mut names = Vec::new();
        for pattern in manifest.models() {
            if let Some(name) = pattern.capture(path) {
                if is_valid_model_name(name) {
                    names.push(name.to_owned());
                } else if !self.invalid.contains_key(name) {
                    self.invalid.insert(name.to_owned(), path.to_owned());
                }
            }
        }
        names
    }
}

/// What the changed paths select: the part of the plan that depends on the changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub changed: Vec<ChangedPath>,
    pub models: Vec<ModelPlan>,
    pub common: CommonPlan,
    pub warnings: Vec<String>,
}

/// Decides every model's tier and whether common runs. `untrusted` holds why the diff cannot
/// be trusted, if it cannot: then everything runs, and the changes only add reasons.
pub fn select(
    manifest: &Manifest,
    known: &KnownModels,
    changes: &[Change],
    untrusted: Option<&str>,
) -> Selection {
    let mut changes: Vec<&Change> = changes.iter().collect();
    changes.sort();
    changes.dedup();

    let mut presence: BTreeMap<String, (bool, bool)> =
        known.presence().map(|(name, base, head)| (name.to_owned(), (base, head))).collect();
    let mut warnings = add_models_only_changes_name(manifest, &changes, &mut presence);
    let changed = classify_changes(manifest, known, &presence, &changes);
    let reasons = ChangeReasons::of(&changed);
    let untrusted_reason =
        untrusted.map(|detail| Reason::UntrustedDiff { detail: detail.to_owned() });

    let mut models: Vec<ModelPlan> = presence
        .iter()
        .map(|(name, &(base, head))| {
            let (tier, reasons) = reasons.tier_of(name, untrusted_reason.as_ref());
            ModelPlan {
                name: name.clone(),
                tier,
                new: head && !base,
                removed: base && !head,
                renamed_from: None,
                renamed_to: None,
                readme: None,
                reasons,
            }
        })
        .collect();
    link_renames(&mut models, &changed);

    let mut common_reasons: Vec<Reason> = untrusted_reason.into_iter().collect();
    common_reasons.extend(reasons.shared);
    let common = CommonPlan { selected: !common_reasons.is_empty(), reasons: common_reasons };

    warnings.extend(known.warnings());
    warnings.sort();
    warnings.dedup();
    Selection { changed, models, common, warnings }
}

/// Adds to `presence` the names that only the changes mention (a file list ahead of the local
/// trees): they are models too, so that a partial-segment pattern can find them. Returns a
/// warning for each.
fn add_models_only_changes_name(
    manifest: &Manifest,
    changes: &[&Change],
    presence: &mut BTreeMap<String, (bool, bool)>,
) -> Vec<String> {
    let mut warnings = Vec::new();
    for change in changes {
        for path in change.counted_paths() {
            for pattern in manifest.models() {
                if let Some(name) = pattern.capture(path)
                    && is_valid_model_name(name)
                    && !presence.contains_key(name)
                {
                    warnings.push(format!(
                        "model '{name}' is named by the changed path {path} but is in neither the \
                         base nor the head tree"
                    ));
                    presence.insert(name.to_owned(), (false, false));
                }
            }
        }
    }
    warnings
}

/// What each changed path matches.
fn classify_changes(
    manifest: &Manifest,
    known: &KnownModels,
    presence: &BTreeMap<String, (bool, bool)>,
    changes: &[&Change],
) -> Vec<ChangedPath> {
    // Partial-segment patterns name only models of the trees: were the names that only the
    // changes mention used too, adding a changed path could move a file to a longer name and
    // lower another model's tier.
    let tree_models: Vec<&str> = known.presence().map(|(name, _, _)| name).collect();
    let bound: Vec<(BoundModelPattern, &str)> = manifest
        .models()
        .iter()
        .map(|pattern| (pattern.bind(tree_models.iter().copied()), pattern.text()))
        .collect();
    changes
        .iter()
        .map(|change| ChangedPath {
            path: change.path.clone(),
            status: change.status,
            old_path: change.old_path.clone(),
            matches: classify_change(manifest, &bound, presence, change),
        })
        .collect()
}

/// The reasons the changed paths give: each model's own, and the shared files'.
struct ChangeReasons<'a> {
    models: BTreeMap<&'a str, BTreeSet<Reason>>,
    shared: BTreeSet<Reason>,
}

impl<'a> ChangeReasons<'a> {
    fn of(changed: &'a [ChangedPath]) -> ChangeReasons<'a> {
        let mut models: BTreeMap<&str, BTreeSet<Reason>> = BTreeMap::new();
        let mut shared: BTreeSet<Reason> = BTreeSet::new();
        for path_match in changed.iter().flat_map(|changed| &changed.matches) {
            match path_match {
                PathMatch::Model { model, pattern, path } => {
                    models.entry(model).or_default().insert(Reason::ChangedPath {
                        path: path.clone(),
                        pattern: pattern.clone(),
                    });
                }
                PathMatch::Shared { pattern, path } => {
                    shared.insert(Reason::ChangedPath {
                        path: path.clone(),
                        pattern: pattern.clone(),
                    });
                }
                PathMatch::Ignored { .. } | PathMatch::NoModel { .. } => {}
            }
        }
        ChangeReasons { models, shared }
    }

    /// A model's tier and why: full when the diff is untrusted or its own files changed,
    /// smoke when only shared files did, none otherwise.
    fn tier_of(&self, name: &str, untrusted: Option<&Reason>) -> (Tier, Vec<Reason>) {
        let own = self.models.get(name);
        if let Some(untrusted) = untrusted {
            let mut reasons = vec![untrusted.clone()];
            reasons.extend(own.into_iter().flatten().cloned());
            (Tier::Full, reasons)
        } else if let Some(own) = own {
            (Tier::Full, own.iter().cloned().collect())
        } else if !self.shared.is_empty() {
            (Tier::Smoke, vec![Reason::SharedChange])
        } else {
            (Tier::None, Vec::new())
        }
    }
}

/// Links each model new on the head side to the model removed from it whose files the diff
/// renamed to it: the same model under a new name. Where several could pair, the pairs with
/// the most renamed files are linked first (then by name), each model at most once; a model
/// that still exists on the head side was copied or split, not renamed, and is not linked.
fn link_renames(models: &mut [ModelPlan], changed: &[ChangedPath]) {
    let names_at = |changed: &ChangedPath, path: &str| -> BTreeSet<String> {
        changed
            .matches
            .iter()
            .filter_map(|found| match found {
                PathMatch::Model { model, path: matched, .. } if matched == path => {
                    Some(model.clone())
                }
                _ => None,
            })
            .collect()
    };
    let mut moved: BTreeMap<(String, String), usize> = BTreeMap::new();
    for change in changed.iter().filter(|c| c.status == crate::change::ChangeStatus::Renamed) {
        let Some(old_path) = change.old_path.as_deref() else { continue };
        let new_names = names_at(change, &change.path);
        for old in names_at(change, old_path) {
            for new in new_names.iter().filter(|new| **new != old) {
                *moved.entry((old.clone(), new.clone())).or_default() += 1;
            }
        }
    }
    let mut pairs: Vec<((String, String), usize)> = moved.into_iter().collect();
    pairs.sort_by(|(a, x), (b, y)| y.cmp(x).then_with(|| a.cmp(b)));
    for ((old, new), _) in pairs {
        let removed =
            models.iter().position(|m| m.name == old && m.removed && m.renamed_to.is_none());
        let added = models.iter().position(|m| m.name == new && m.new && m.renamed_from.is_none());
        if let (Some(removed), Some(added)) = (removed, added) {
            models[removed].renamed_to = Some(new.clone());
            models[added].renamed_from = Some(old);
            models[added].new = false;
        }
    }
}

/// What one change's paths match. An ignored path matches nothing else.
fn classify_change(
    manifest: &Manifest,
    bound: &[(BoundModelPattern, &str)],
    presence: &BTreeMap<String, (bool, bool)>,
    change: &Change,
) -> Vec<PathMatch> {
    let mut matches = BTreeSet::new();
    for path in change.counted_paths() {
        if let Some(pattern) = manifest.ignore().iter().find(|pattern| pattern.is_match(path)) {
            matches.insert(PathMatch::Ignored {
                pattern: pattern.text().to_owned(),
                path: path.to_owned(),
            });
            continue;
        }
        let mut found_model = false;
        for (pattern, (bound_pattern, text)) in manifest.models().iter().zip(bound) {
            match bound_pattern.model(path) {
                Some(model) if presence.contains_key(&model) => {
                    found_model = true;
                    matches.insert(PathMatch::Model {
                        model,
                        pattern: (*text).to_owned(),
                        path: path.to_owned(),
                    });
                }
                _ if pattern.matches_some_name(path) => {
                    matches.insert(PathMatch::NoModel {
                        pattern: (*text).to_owned(),
                        path: path.to_owned(),
                    });
                }
                _ => {}
            }
        }
        if found_model {
            matches
                .retain(|found| !matches!(found, PathMatch::NoModel { path: p, .. } if p == path));
        }
        for pattern in manifest.shared().iter().filter(|pattern| pattern.is_match(path)) {
            matches.insert(PathMatch::Shared {
                pattern: pattern.text().to_owned(),
                path: path.to_owned(),
            });
        }
    }
    matches.into_iter().collect()
}

#[cfg(test)]
mod tests;
