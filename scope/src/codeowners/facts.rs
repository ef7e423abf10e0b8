//! The facts about a pull request's edit of its CODEOWNERS file: [`FactsBuilder`] compares
//! the base and head texts (what happened to the file, which lines changed, line by line with
//! a patience diff), then the base tree's files (whose files a changed line hands to other
//! owners), and [`NewModels`] says which added lines own only new models' files. Parsing a
//! file is the parent's; what the facts mean for the PR is the gate's policy.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use globset::{Candidate, GlobSet, GlobSetBuilder};
use similar::{Algorithm, DiffOp};

use crate::manifest::Manifest;
use crate::pattern::{BoundModelPattern, is_valid_model_name};
use crate::plan::ModelPlan;

use super::{
    Codeowners, CodeownersFacts, CodeownersFileChange, CodeownersLineChange, FileChangeKind,
    GITHUB_LOCATIONS, LISTED_OWNER_CHANGES, Line, LineChangeKind, OwnerChange, Pattern, Rule,
};

/// The CODEOWNERS texts a plan compares, as [`crate::git`] reads them.
#[derive(Debug, Clone, Default)]
pub struct CodeownersTexts {
    /// The configured location (manifest `scope.codeowners`).
    pub path: String,
    /// The text at each location on the base side, when a file is there: the configured one
    /// and [`GITHUB_LOCATIONS`].
    pub base: BTreeMap<String, String>,
    /// The same at head, and the configured file's new location when the diff shows it renamed.
    pub head: BTreeMap<String, String>,
    /// Where the head diff says the configured file was renamed to, if it does.
    pub renamed_to: Option<String>,
}

/// Computes [`CodeownersFacts`]: the file and line changes at once, the owner changes from the
/// base tree's files ([`FactsBuilder::add_base_file`], one call per file), and which added
/// lines own only new models' files ([`FactsBuilder::finish`]).
#[derive(Debug)]
pub struct FactsBuilder {
    facts: CodeownersFacts,
    base: Codeowners,
    head: Codeowners,
    /// The patterns of the changed rule lines (base and head side), each with its line change.
    changed_patterns: Vec<(usize, Pattern)>,
    /// All their globs in one set, and the line change of each glob; `None` when globset
    /// cannot build the set (then the patterns are tried one by one).
    changed: Option<GlobSet>,
    change_of_glob: Vec<usize>,
    /// The head-side pattern of each added line, by line change.
    added_patterns: BTreeMap<usize, Pattern>,
    /// The added lines (by line change) whose pattern matches a base-tree file.
    added_matching_base: BTreeSet<usize>,
    scratch: Vec<usize>,
}

impl FactsBuilder {
    /// Compares the texts: what happened to the file, and which lines changed.
    pub fn new(texts: &CodeownersTexts) -> FactsBuilder {
        let configured = texts.path.as_str();
        let in_base = texts.base.contains_key(configured);
        let in_head = texts.head.contains_key(configured);
        let (file_changes, head_path) = file_changes(texts, in_base, in_head);
        let base = Codeowners::parse(texts.base.get(configured).map_or("", String::as_str));
        let head_text = head_path.as_ref().and_then(|path| texts.head.get(path));
        let head = Codeowners::parse(head_text.map_or("", String::as_str));
        let line_changes = diff_lines(&base, &head);

        let mut builder = GlobSetBuilder::new();
        let mut change_of_glob = Vec::new();
        let mut changed_patterns = Vec::new();
        let mut added_patterns = BTreeMap::new();
        for (index, change) in line_changes.iter().enumerate() {
            if change.kind == LineChangeKind::CommentOrBlank {
                continue;
            }
            let base_rule = change.base_line.and_then(|line| rule_at(&base, line));
            let head_rule = change.head_line.and_then(|line| rule_at(&head, line));
            for rule in base_rule.into_iter().chain(head_rule) {
                for matcher in &rule.pattern.matchers {
                    builder.add(matcher.glob().clone());
                    change_of_glob.push(index);
                }
                changed_patterns.push((index, rule.pattern.clone()));
            }
            if let (LineChangeKind::Added, Some(rule)) = (change.kind, head_rule) {
                added_patterns.insert(index, rule.pattern.clone());
            }
        }
        let changed = builder.build().ok();
        FactsBuilder {
            facts: CodeownersFacts {
                path: configured.to_owned(),
                in_base,
                in_head,
                head_path,
                file_changes,
                line_changes,
                invalid_lines: head.invalid_lines(),
            },
            base,
            head,
            changed_patterns,
            changed,
            change_of_glob,
            added_patterns,
            added_matching_base: BTreeSet::new(),
            scratch: Vec::new(),
        }
    }

    /// Looks at one file of the base tree: which changed lines match it, and whether its owners
    /// differ between the base and head files.
    /// Whether [`FactsBuilder::add_base_file`] needs the base tree's files at all: only when a
    /// rule line changed (an owner change is found by matching files against it).
    pub fn wants_base_files(&self) -> bool {
        !self.changed_patterns.is_empty()
    }

    pub fn add_base_file(&mut self, path: &str) {
        if self.changed_patterns.is_empty() {
            return;
        }
        let candidate = Candidate::new(path);
        let mut changes: Vec<usize> = match &self.changed {
            Some(set) => {
                set.matches_candidate_into(&candidate, &mut self.scratch);
                self.scratch.iter().map(|glob| self.change_of_glob[*glob]).collect()
            }
            None => self
                .changed_patterns
                .iter()
                .filter(|(_, pattern)| pattern.is_match_candidate(&candidate))
                .map(|(change, _)| *change)
                .collect(),
        };
        if changes.is_empty() {
            return;
        }
        changes.sort_unstable();
        changes.dedup();
        for change in &changes {
            if self.added_patterns.contains_key(change) {
                self.added_matching_base.insert(*change);
            }
        }
        let before = self.base.owners_of_candidate(&candidate).unwrap_or_default();
        let after = self.head.owners_of_candidate(&candidate).unwrap_or_default();
        if same_owners(before, after) {
            return;
        }
        for change in changes {
            let line_change = &mut self.facts.line_changes[change];
            line_change.owner_changes_total += 1;
            if line_change.owner_changes.len() < LISTED_OWNER_CHANGES {
                line_change.owner_changes.push(OwnerChange {
                    path: path.to_owned(),
                    before: before.to_vec(),
                    after: after.to_vec(),
                });
            }
        }
    }

    /// The facts, given the files only in the head tree (added, or a rename's or copy's new
    /// path) and which of them belong to new models only.
    pub fn finish<'p>(
        mut self,
        head_only_files: impl IntoIterator<Item = &'p str>,
        models: &NewModels,
    ) -> CodeownersFacts {
        let head_only: Vec<&str> = head_only_files.into_iter().collect();
        for (index, pattern) in &self.added_patterns {
            if self.added_matching_base.contains(index) {
                continue;
            }
            let mut found = BTreeSet::new();
            let mut all_new = true;
            for path in head_only.iter().filter(|path| pattern.is_match(path)) {
                match models.new_models_of(path) {
                    Some(names) => found.extend(names),
                    None => {
                        all_new = false;
                        break;
                    }
                }
            }
            if all_new {
                self.facts.line_changes[*index].new_models_only = found.into_iter().collect();
            }
        }
        for change in &mut self.facts.line_changes {
            change.owner_changes.sort_by(|a, b| a.path.cmp(&b.path));
        }
        self.facts
    }
}

/// Which models a path belongs to, and which are new in this PR.
#[derive(Debug, Clone)]
pub struct NewModels {
    bound: Vec<BoundModelPattern>,
    known: BTreeSet<String>,
    new: BTreeSet<String>,
}

impl NewModels {
    /// From the manifest's model patterns and the plan's models.
    pub fn new(manifest: &Manifest, models: &[ModelPlan]) -> NewModels {
        let known: BTreeSet<String> = models.iter().map(|model| model.name.clone()).collect();
        let bound = manifest
            .models()
            .iter()
            .map(|pattern| pattern.bind(known.iter().map(String::as_str)))
            .collect();
        let new = models.iter().filter(|model| model.new).map(|model| model.name.clone()).collect();
        NewModels { bound, known, new }
    }

    /// The models a path belongs to, when it belongs to at least one and every one is new;
    /// `None` otherwise.
    pub fn new_models_of(&self, path: &str) -> Option<Vec<String>> {
        let mut names: Vec<String> = self
            .bound
            .iter()
            .filter_map(|pattern| pattern.model(path))
            .filter(|name| is_valid_model_name(name) && self.known.contains(name.as_str()))
            .collect();
        names.sort();
        names.dedup();
        let all_new = !names.is_empty() && names.iter().all(|name| self.new.contains(name));
        all_new.then_some(names)
    }
}

/// What happened to the file as a whole, and which head-side file the lines compare with.
fn file_changes(
    texts: &CodeownersTexts,
    in_base: bool,
    in_head: bool,
) -> (Vec<CodeownersFileChange>, Option<String>) {
    let configured = texts.path.as_str();
    // A location GitHub does not read comes after all of GitHub's.
    let rank = |path: &str| {
        GITHUB_LOCATIONS
            .iter()
            .position(|location| *location == path)
            .unwrap_or(GITHUB_LOCATIONS.len())
    };
    let new_elsewhere: Vec<&str> = GITHUB_LOCATIONS
        .into_iter()
        .filter(|location| {
            *location != configured
                && texts.head.contains_key(*location)
                && !texts.base.contains_key(*location)
        })
        .collect();
    let mut changes = Vec::new();
    let mut head_path = in_head.then(|| configured.to_owned());
    let mut moved_to = None;

    if in_base && !in_head {
        let (change, to) = moved_or_deleted(texts, &new_elsewhere);
        changes.push(change);
        moved_to = to;
        head_path = moved_to.map(str::to_owned);
    }
    if !in_base {
        let added = if in_head { Some(configured) } else { new_elsewhere.first().copied() };
        if let Some(added) = added {
            changes.push(CodeownersFileChange {
                kind: FileChangeKind::Added,
                path: added.to_owned(),
                detail: format!("base has no {configured}; head adds {added}"),
            });
            head_path = Some(added.to_owned());
        }
    }
    for location in new_elsewhere {
        if rank(location) < rank(configured) && Some(location) != moved_to {
            changes.push(CodeownersFileChange {
                kind: FileChangeKind::Shadowed,
                path: location.to_owned(),
                detail: format!("head adds {location}, which GitHub reads before {configured}"),
            });
        }
    }
    (changes, head_path)
}

/// The configured file, in base and not at head: renamed (as the diff says), replaced by a
/// new file at one of GitHub's locations with the same rules (moved), or deleted. Returns the
/// change and where the file moved to.
fn moved_or_deleted<'t>(
    texts: &'t CodeownersTexts,
    new_elsewhere: &[&'t str],
) -> (CodeownersFileChange, Option<&'t str>) {
    let configured = texts.path.as_str();
    let rules_of = |text: &str| {
        let (_, keys) = Codeowners::parse(text).rule_keys();
        keys
    };
    let base_rules = texts.base.get(configured).map(|text| rules_of(text));
    let renamed =
        texts.renamed_to.as_deref().filter(|to| *to != configured && texts.head.contains_key(*to));
    let same_rules = new_elsewhere
        .iter()
        .copied()
        .find(|location| texts.head.get(*location).map(|text| rules_of(text)) == base_rules);
    let moved = |to: &str, detail: String| CodeownersFileChange {
        kind: FileChangeKind::Moved,
        path: to.to_owned(),
        detail,
    };
    match (renamed, same_rules) {
        (Some(to), _) => (moved(to, format!("{configured} is renamed to {to}")), Some(to)),
        (None, Some(to)) => (
            moved(to, format!("{configured} is deleted and {to}, with the same rules, added")),
            Some(to),
        ),
        (None, None) => (
            CodeownersFileChange {
                kind: FileChangeKind::Deleted,
                path: configured.to_owned(),
                detail: format!("{configured} is deleted"),
            },
            None,
        ),
    }
}

/// The changed lines between two files: a diff of the rule lines (rules and invalid lines,
/// normalized), then a diff of the comment and blank lines.
fn diff_lines(base: &Codeowners, head: &Codeowners) -> Vec<CodeownersLineChange> {
    let mut changes = rule_line_changes(base, head);
    changes.extend(comment_line_changes(base, head));
    changes
}

/// The changes of the rule lines: a rule deleted and inserted again elsewhere is reordered; in
/// a hunk the other deletions pair with the insertions in order (modified), the rest are
/// removed or added; a rule kept with a changed inline comment or spacing is a comment change.
fn rule_line_changes(base: &Codeowners, head: &Codeowners) -> Vec<CodeownersLineChange> {
    let (base_rules, base_keys) = base.rule_keys();
    let (head_rules, head_keys) = head.rule_keys();
    let ops = similar::capture_diff_slices(Algorithm::Myers, &base_keys, &head_keys);

    // The deleted and inserted rule lines of every hunk (positions in the key lists).
    let hunks: Vec<(Vec<usize>, Vec<usize>)> = ops
        .iter()
        .filter(|op| !matches!(op, DiffOp::Equal { .. }))
        .map(|op| (op.old_range().collect(), op.new_range().collect()))
        .collect();
    let (reordered_to, reinserted) = reorders(&hunks, &base_keys, &head_keys);

    let line_change = |kind, old: Option<usize>, new: Option<usize>| {
        change_of(kind, base, head, old.map(|old| base_rules[old]), new.map(|new| head_rules[new]))
    };
    let mut changes = Vec::new();
    let mut hunks = hunks.into_iter();
    for op in &ops {
        if let DiffOp::Equal { old_index, new_index, len } = *op {
            // The same rule; a changed inline comment or spacing is a comment change.
            for offset in 0..len {
                let (old, new) = (base_rules[old_index + offset], head_rules[new_index + offset]);
                if base.text_of(old) != head.text_of(new) {
                    changes.push(change_of(
                        LineChangeKind::CommentOrBlank,
                        base,
                        head,
                        Some(old),
                        Some(new),
                    ));
                }
            }
            continue;
        }
        let Some((olds, news)) = hunks.next() else { break };
        let mut news = news.into_iter().filter(|new| !reinserted.contains(new));
        for old in olds {
            let change = match reordered_to.get(&old) {
                Some(&new) => line_change(LineChangeKind::Reordered, Some(old), Some(new)),
                None => match news.next() {
                    Some(new) => line_change(LineChangeKind::Modified, Some(old), Some(new)),
                    None => line_change(LineChangeKind::Removed, Some(old), None),
                },
            };
            changes.push(change);
        }
        for new in news {
            changes.push(line_change(LineChangeKind::Added, None, Some(new)));
        }
    }
    changes
}

/// A deleted line inserted again, the same, elsewhere is reordered: each deletion, in order,
/// takes the first insertion of its text not taken yet. Returns where each reordered deletion
/// went, and the insertions taken.
fn reorders(
    hunks: &[(Vec<usize>, Vec<usize>)],
    base_keys: &[String],
    head_keys: &[String],
) -> (HashMap<usize, usize>, HashSet<usize>) {
    let mut insertions: HashMap<&str, VecDeque<usize>> = HashMap::new();
    for new in hunks.iter().flat_map(|(_, news)| news) {
        insertions.entry(head_keys[*new].as_str()).or_default().push_back(*new);
    }
    let mut reordered_to: HashMap<usize, usize> = HashMap::new();
    let mut reinserted: HashSet<usize> = HashSet::new();
    for old in hunks.iter().flat_map(|(olds, _)| olds) {
        if let Some(new) =
            insertions.get_mut(base_keys[*old].as_str()).and_then(VecDeque::pop_front)
        {
            reordered_to.insert(*old, new);
            reinserted.insert(new);
        }
    }
    (reordered_to, reinserted)
}

/// The changes of the comment and blank lines: each hunk's lines paired in order.
fn comment_line_changes(base: &Codeowners, head: &Codeowners) -> Vec<CodeownersLineChange> {
    let (base_comments, base_comment_keys) = base.comment_keys();
    let (head_comments, head_comment_keys) = head.comment_keys();
    let mut changes = Vec::new();
    for op in similar::capture_diff_slices(Algorithm::Myers, &base_comment_keys, &head_comment_keys)
    {
        if matches!(op, DiffOp::Equal { .. }) {
            continue;
        }
        let olds: Vec<usize> = op.old_range().map(|old| base_comments[old]).collect();
        let news: Vec<usize> = op.new_range().map(|new| head_comments[new]).collect();
        for pair in 0..olds.len().max(news.len()) {
            changes.push(change_of(
                LineChangeKind::CommentOrBlank,
                base,
                head,
                olds.get(pair).copied(),
                news.get(pair).copied(),
            ));
        }
    }
    changes
}

/// A line change between the lines at `old` and `new` (indices from 0), with no owner changes
/// yet.
fn change_of(
    kind: LineChangeKind,
    base: &Codeowners,
    head: &Codeowners,
    old: Option<usize>,
    new: Option<usize>,
) -> CodeownersLineChange {
    CodeownersLineChange {
        kind,
        base_line: old.map(|old| old + 1),
        head_line: new.map(|new| new + 1),
        base_text: old.map(|old| base.text_of(old).to_owned()),
        head_text: new.map(|new| head.text_of(new).to_owned()),
        owner_changes: Vec::new(),
        owner_changes_total: 0,
        new_models_only: Vec::new(),
    }
}

/// The valid rule at a line number (from 1).
fn rule_at(file: &Codeowners, line: usize) -> Option<&Rule> {
    match file.lines().get(line.checked_sub(1)?)? {
        Line::Rule(rule) => Some(rule),
        _ => None,
    }
}

/// Whether two owner lists name the same owners, in any order.
fn same_owners(a: &[String], b: &[String]) -> bool {
    a.iter().collect::<BTreeSet<&String>>() == b.iter().collect::<BTreeSet<&String>>()
}
