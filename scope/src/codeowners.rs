//! CODEOWNERS files with GitHub's semantics, and the facts about a pull request's edit of one.
//!
//! [`Codeowners::parse`] reads a file into lines (blank, comment, rule or invalid) and
//! [`Codeowners::owners_of`] answers who owns a path; printing a parsed file ([`fmt::Display`])
//! gives text that parses to the same lines. [`FactsBuilder`] turns the texts and trees that
//! [`crate::git`] reads into [`CodeownersFacts`], the plan's `codeowners` field: which lines
//! changed, whose files they hand to other owners, and where the file went.
//!
//! What the facts mean for a pull request (pass, warn or fail) is the gate's policy
//! (`CODEOWNERS.rules`), not decided here; reading git is [`crate::git`]'s work.
//!
#![doc = include_str!("../../docs/codeowners.md")]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt;

use globset::{Candidate, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use similar::{Algorithm, DiffOp};

use crate::manifest::Manifest;
use crate::pattern::{BoundModelPattern, is_valid_model_name};
use crate::plan::ModelPlan;

/// Where GitHub looks for a CODEOWNERS file, in the order it looks: it uses the first it finds.
pub const GITHUB_LOCATIONS: [&str; 3] = [".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"];

/// How many files a line change lists in `owner_changes`; `owner_changes_total` counts all.
pub const LISTED_OWNER_CHANGES: usize = 20;

/// The CODEOWNERS facts of a plan: what the pull request did to the CODEOWNERS file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeownersFacts {
    /// The configured location (manifest `scope.codeowners`).
    pub path: String,
    /// The file exists in the base-side tree.
    pub in_base: bool,
    /// The file exists in the head tree (or the working tree with `--worktree`).
    pub in_head: bool,
    /// The head-side file the line changes compare the base file with: `path`, the file's new
    /// location when it moved, or a file added at another GitHub location; `None` when head has
    /// none of these.
    #[serde(default)]
    pub head_path: Option<String>,
    pub file_changes: Vec<CodeownersFileChange>,
    pub line_changes: Vec<CodeownersLineChange>,
    /// The invalid lines of the head-side file (`head_path`), which GitHub skips.
    pub invalid_lines: Vec<InvalidCodeownersLine>,
}

/// Something that happened to a CODEOWNERS file as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeownersFileChange {
    pub kind: FileChangeKind,
    /// The file it happened to: the configured file when deleted, its new location when moved,
    /// the new file when shadowed or added.
    pub path: String,
    pub detail: String,
}

/// What happened to a CODEOWNERS file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileChangeKind {
    /// The configured file is gone in head.
    Deleted,
    /// The configured file is gone, and a file with the same rules appears at another
    /// CODEOWNERS location, or the diff shows it renamed.
    Moved,
    /// Head has a new CODEOWNERS file at a location GitHub reads before the configured one.
    Shadowed,
    /// Base has no CODEOWNERS file at the configured location; head has one.
    Added,
}

/// One changed line of the CODEOWNERS file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeownersLineChange {
    pub kind: LineChangeKind,
    /// The line's number (from 1) in the base file.
    pub base_line: Option<usize>,
    /// The line's number (from 1) in the head file.
    pub head_line: Option<usize>,
    pub base_text: Option<String>,
    pub head_text: Option<String>,
    /// Files of the base tree whose owners differ between the base and head CODEOWNERS and
    /// that this line's pattern (base or head text) matches; at most
    /// [`LISTED_OWNER_CHANGES`], by path.
    pub owner_changes: Vec<OwnerChange>,
    /// How many such files in all.
    pub owner_changes_total: usize,
    /// For an added line: the models, when the head-tree files it matches all belong to models
    /// new in this PR (there is at least one such file) and it matches no base-tree file.
    pub new_models_only: Vec<String>,
}

/// How a line changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LineChangeKind {
    /// A rule line only in head.
    Added,
    /// A rule line only in base.
    Removed,
    /// A rule line replaced by another in the same place.
    Modified,
    /// A rule line deleted in one place and inserted, the same, in another.
    Reordered,
    /// A comment or blank line added, removed or changed, or a rule line whose rule is the same
    /// but whose text is not (an inline comment, spacing).
    CommentOrBlank,
}

/// A file whose owners differ between the base and head CODEOWNERS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerChange {
    pub path: String,
    /// Its owners under the base file, as the matching rule lists them; empty when unowned.
    pub before: Vec<String>,
    /// Its owners under the head file.
    pub after: Vec<String>,
}

/// A line GitHub skips: a pattern it does not support, or an owner that is not one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvalidCodeownersLine {
    /// The line's number, from 1.
    pub line: usize,
    pub text: String,
    pub problem: String,
}

/// The longest pattern compiled: 4096 bytes, Linux's `PATH_MAX`. A longer one is an invalid
/// line: a PR's CODEOWNERS is the author's text, and globset cannot compile a pattern of a
/// megabyte (it panics) and takes seconds on tens of kilobytes.
pub const MAX_PATTERN_BYTES: usize = 4096;

/// A parsed CODEOWNERS file.
#[derive(Debug, Clone)]
pub struct Codeowners {
    lines: Vec<Line>,
    /// Every line as written.
    texts: Vec<String>,
    /// Every glob of every rule, for matching a path against all rules at once; `None` when
    /// globset could not build the set (then the rules are tried one by one).
    set: Option<GlobSet>,
    /// For each glob of `set`, the index of its line.
    line_of_glob: Vec<usize>,
}

/// One line of a CODEOWNERS file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Blank,
    /// A comment, from its `#`.
    Comment(String),
    Rule(Rule),
    /// A line GitHub skips, and why.
    Invalid {
        text: String,
        problem: String,
    },
}

/// A pattern and the owners of the files it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pattern: Pattern,
    owners: Vec<String>,
    /// An inline comment, from its `#`.
    comment: Option<String>,
}

/// A CODEOWNERS pattern, compiled to globs with GitHub's semantics.
#[derive(Debug, Clone)]
pub struct Pattern {
    text: String,
    /// The pattern itself, and the pattern followed by `/**` when it also matches everything
    /// below what it matches.
    matchers: Vec<GlobMatcher>,
}

impl Codeowners {
    /// Parses a CODEOWNERS text. Every line parses: a line GitHub would skip is
    /// [`Line::Invalid`], with the reason.
    pub fn parse(text: &str) -> Codeowners {
        let texts: Vec<String> = text.lines().map(str::to_owned).collect();
        let lines: Vec<Line> = texts.iter().map(|line| parse_line(line)).collect();
        let mut builder = GlobSetBuilder::new();
        let mut line_of_glob = Vec::new();
        for (index, line) in lines.iter().enumerate() {
            if let Line::Rule(rule) = line {
                for matcher in &rule.pattern.matchers {
                    builder.add(matcher.glob().clone());
                    line_of_glob.push(index);
                }
            }
        }
        let set = builder.build().ok();
        Codeowners { lines, texts, set, line_of_glob }
    }

    /// The lines, in order.
    pub fn lines(&self) -> &[Line] {
        &self.lines
    }

    /// The text of the line at `index` (from 0), as written.
    pub fn text_of(&self, index: usize) -> &str {
        &self.texts[index]
    }

    /// The index (from 0) of the rule that decides a path's owners: the last valid rule that
    /// matches it.
    pub fn deciding_rule(&self, path: &str) -> Option<usize> {
        self.deciding_rule_of(&Candidate::new(path))
    }

    /// The owners of a path: those of the last valid rule that matches it, which may be none
    /// (the rule un-owns the path); `None` when no rule matches.
    pub fn owners_of(&self, path: &str) -> Option<&[String]> {
        self.owners_of_candidate(&Candidate::new(path))
    }

    /// The invalid lines, with their numbers (from 1).
    pub fn invalid_lines(&self) -> Vec<InvalidCodeownersLine> {
        self.lines
            .iter()
            .enumerate()
            .filter_map(|(index, line)| match line {
                Line::Invalid { text, problem } => Some(InvalidCodeownersLine {
                    line: index + 1,
                    text: text.clone(),
                    problem: problem.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    fn deciding_rule_of(&self, candidate: &Candidate<'_>) -> Option<usize> {
        match &self.set {
            Some(set) => set
                .matches_candidate(candidate)
                .into_iter()
                .map(|glob| self.line_of_glob[glob])
                .max(),
            None => self.lines.iter().rposition(|line| match line {
                Line::Rule(rule) => rule.pattern.is_match_candidate(candidate),
                _ => false,
            }),
        }
    }

    fn owners_of_candidate(&self, candidate: &Candidate<'_>) -> Option<&[String]> {
        match self.lines.get(self.deciding_rule_of(candidate)?)? {
            Line::Rule(rule) => Some(&rule.owners),
            _ => None,
        }
    }

    /// The rule and invalid lines, normalized (single spaces, no inline comment), with their
    /// indices: what the line diff compares.
    fn rule_keys(&self) -> (Vec<usize>, Vec<String>) {
        self.lines
            .iter()
            .enumerate()
            .filter_map(|(index, line)| Some((index, line.rule_key()?)))
            .unzip()
    }

    /// The comment and blank lines, trimmed, with their indices.
    fn comment_keys(&self) -> (Vec<usize>, Vec<String>) {
        self.lines
            .iter()
            .enumerate()
            .filter_map(|(index, line)| match line {
                Line::Blank => Some((index, String::new())),
                Line::Comment(text) => Some((index, text.clone())),
                Line::Rule(_) | Line::Invalid { .. } => None,
            })
            .unzip()
    }
}

impl PartialEq for Codeowners {
    fn eq(&self, other: &Codeowners) -> bool {
        self.lines == other.lines
    }
}

impl Eq for Codeowners {}

/// Writes the file back, one line each: rules with single spaces between their parts, comments
/// and invalid lines as written (trimmed).
impl fmt::Display for Codeowners {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.lines {
            writeln!(formatter, "{line}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Line {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Line::Blank => Ok(()),
            Line::Comment(text) | Line::Invalid { text, .. } => formatter.write_str(text),
            Line::Rule(rule) => write!(formatter, "{rule}"),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.pattern.text)?;
        for owner in &self.owners {
            write!(formatter, " {owner}")?;
        }
        if let Some(comment) = &self.comment {
            write!(formatter, " {comment}")?;
        }
        Ok(())
    }
}

impl Line {
    /// The normalized text of a rule or invalid line; `None` for comments and blank lines.
    fn rule_key(&self) -> Option<String> {
        match self {
            Line::Rule(rule) => Some(rule.key()),
            Line::Invalid { text, .. } => Some(
                text.split(is_space).filter(|part| !part.is_empty()).collect::<Vec<_>>().join(" "),
            ),
            Line::Blank | Line::Comment(_) => None,
        }
    }
}

impl Rule {
    /// The pattern.
    pub fn pattern(&self) -> &Pattern {
        &self.pattern
    }

    /// The owners, as written; empty when the rule un-owns what it matches.
    pub fn owners(&self) -> &[String] {
        &self.owners
    }

    /// The inline comment, from its `#`.
    pub fn comment(&self) -> Option<&str> {
        self.comment.as_deref()
    }

    fn key(&self) -> String {
        std::iter::once(self.pattern.text.as_str())
            .chain(self.owners.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Pattern {
    /// Compiles a pattern as GitHub reads it; the error says why GitHub would skip the line.
    pub fn new(text: &str) -> Result<Pattern, String> {
        if text.len() > MAX_PATTERN_BYTES {
            return Err(format!(
                "the pattern is {} bytes, more than the {MAX_PATTERN_BYTES} a pattern may have",
                text.len()
            ));
        }
        if text.starts_with('!') {
            return Err("negation ('!') is not supported in CODEOWNERS".to_owned());
        }
        if has_unescaped(text, '[') {
            return Err("character ranges ('[...]') are not supported in CODEOWNERS".to_owned());
        }
        let directory_only = text.ends_with('/');
        let rooted = text.starts_with('/');
        let body = text.strip_suffix('/').unwrap_or(text);
        let body = body.strip_prefix('/').unwrap_or(body);
        if body.is_empty() {
            return Err(format!("the pattern '{text}' matches nothing; '*' matches every file"));
        }
        let anchored = rooted || body.contains('/');
        let body = to_glob_syntax(body);
        let glob = if anchored || body == "**" { body } else { format!("**/{body}") };
        let last_segment = glob.rsplit('/').next().unwrap_or_default();
        let covers_below = glob == "**" || glob.ends_with("/**");
        let below = || if covers_below { glob.clone() } else { format!("{glob}/**") };
        let globs = if directory_only {
            vec![below()]
        } else if covers_below || last_segment == "*" {
            // `docs/*` matches the files directly in docs/, not deeper ones.
            vec![glob.clone()]
        } else {
            vec![glob.clone(), below()]
        };
        let matchers = globs
            .iter()
            .map(|glob| {
                GlobBuilder::new(glob)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map(|glob| glob.compile_matcher())
                    .map_err(|error| format!("bad pattern: {}", error.kind()))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Pattern { text: text.to_owned(), matchers })
    }

    /// The pattern as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The globs it compiles to (globset syntax).
    pub fn globs(&self) -> impl Iterator<Item = &str> {
        self.matchers.iter().map(|matcher| matcher.glob().glob())
    }

    /// Whether the pattern matches a file's path (relative to the root, `/`-separated).
    pub fn is_match(&self, path: &str) -> bool {
        self.is_match_candidate(&Candidate::new(path))
    }

    fn is_match_candidate(&self, candidate: &Candidate<'_>) -> bool {
        self.matchers.iter().any(|matcher| matcher.is_match_candidate(candidate))
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.text == other.text
    }
}

impl Eq for Pattern {}

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
        let rules_of = |text: &str| {
            let (_, keys) = Codeowners::parse(text).rule_keys();
            keys
        };
        let base_rules = texts.base.get(configured).map(|text| rules_of(text));
        let renamed = texts
            .renamed_to
            .as_deref()
            .filter(|to| *to != configured && texts.head.contains_key(*to));
        let same_rules = new_elsewhere
            .iter()
            .copied()
            .find(|location| texts.head.get(*location).map(|text| rules_of(text)) == base_rules);
        match (renamed, same_rules) {
            (Some(to), _) => {
                changes.push(CodeownersFileChange {
                    kind: FileChangeKind::Moved,
                    path: to.to_owned(),
                    detail: format!("{configured} is renamed to {to}"),
                });
                moved_to = Some(to);
            }
            (None, Some(to)) => {
                changes.push(CodeownersFileChange {
                    kind: FileChangeKind::Moved,
                    path: to.to_owned(),
                    detail: format!("{configured} is deleted and {to}, with the same rules, added"),
                });
                moved_to = Some(to);
            }
            (None, None) => changes.push(CodeownersFileChange {
                kind: FileChangeKind::Deleted,
                path: configured.to_owned(),
                detail: format!("{configured} is deleted"),
            }),
        }
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

/// The changed lines between two files: a diff of the rule lines (rules and invalid lines,
/// normalized), then a diff of the comment and blank lines.
fn diff_lines(base: &Codeowners, head: &Codeowners) -> Vec<CodeownersLineChange> {
    let (base_rules, base_keys) = base.rule_keys();
    let (head_rules, head_keys) = head.rule_keys();
    let ops = similar::capture_diff_slices(Algorithm::Myers, &base_keys, &head_keys);

    // The deleted and inserted rule lines of every hunk (positions in the key lists).
    let hunks: Vec<(Vec<usize>, Vec<usize>)> = ops
        .iter()
        .filter(|op| !matches!(op, DiffOp::Equal { .. }))
        .map(|op| (op.old_range().collect(), op.new_range().collect()))
        .collect();
    // A deleted line inserted again, the same, elsewhere is reordered: each deletion, in order,
    // takes the first insertion of its text not taken yet.
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

    let (base_comments, base_comment_keys) = base.comment_keys();
    let (head_comments, head_comment_keys) = head.comment_keys();
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

/// The whitespace that separates a line's parts.
fn is_space(c: char) -> bool {
    c.is_ascii_whitespace()
}

fn parse_line(raw: &str) -> Line {
    let line = raw.trim_matches(is_space);
    if line.is_empty() {
        return Line::Blank;
    }
    if line.starts_with('#') {
        return Line::Comment(line.to_owned());
    }
    let invalid = |problem: String| Line::Invalid { text: line.to_owned(), problem };
    let (tokens, comment) = tokenize(line);
    let Some((pattern, owners)) = tokens.split_first() else {
        return invalid("no pattern".to_owned());
    };
    let pattern = match Pattern::new(pattern) {
        Ok(pattern) => pattern,
        Err(problem) => return invalid(problem),
    };
    if let Some(bad) = owners.iter().find(|owner| !is_owner(owner)) {
        return invalid(format!(
            "'{bad}' is not an owner: owners are @user, @org/team or an email address"
        ));
    }
    Line::Rule(Rule {
        pattern,
        owners: owners.iter().map(|owner| (*owner).to_owned()).collect(),
        comment: comment.map(str::to_owned),
    })
}

/// Splits a trimmed rule line into its whitespace-separated parts (a backslash keeps the next
/// character in its part, so `a\ b` is one part) and its inline comment: a `#` that starts a
/// part after the first begins a comment that runs to the end of the line.
fn tokenize(line: &str) -> (Vec<&str>, Option<&str>) {
    let mut tokens = Vec::new();
    let mut chars = line.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| is_space(*c)).is_some() {}
        let Some(&(start, first)) = chars.peek() else { return (tokens, None) };
        if first == '#' && !tokens.is_empty() {
            return (tokens, Some(line[start..].trim_end_matches(is_space)));
        }
        let mut end = line.len();
        while let Some((at, c)) = chars.next() {
            if c == '\\' {
                chars.next();
            } else if is_space(c) {
                end = at;
                break;
            }
        }
        tokens.push(&line[start..end]);
    }
}

/// `@user`, `@org/team`, or an email address.
fn is_owner(token: &str) -> bool {
    let is_name = |name: &str| {
        !name.is_empty()
            && name
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'))
    };
    if let Some(handle) = token.strip_prefix('@') {
        return match handle.split_once('/') {
            Some((org, team)) => is_name(org) && is_name(team),
            None => is_name(handle),
        };
    }
    let Some((local, domain)) = token.split_once('@') else { return false };
    let plain = |part: &str| {
        !part.is_empty() && !part.contains(['@', '\\', '"', '(', ')', '<', '>', ',', ';'])
    };
    plain(local)
        && plain(domain)
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
}

/// Whether `c` appears in `text` without a backslash before it.
fn has_unescaped(text: &str, wanted: char) -> bool {
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            chars.next();
        } else if c == wanted {
            return true;
        }
    }
    false
}

/// Turns a CODEOWNERS pattern body into globset syntax: braces are literal (gitignore has no
/// alternation), and a run of `*` inside a segment is one `*` (`**` is special only as a whole
/// segment).
fn to_glob_syntax(body: &str) -> String {
    body.split('/')
        .map(|segment| {
            if segment == "**" {
                return segment.to_owned();
            }
            let mut out = String::with_capacity(segment.len());
            let mut chars = segment.chars();
            let mut after_star = false;
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        out.push('\\');
                        out.extend(chars.next());
                    }
                    '{' | '}' | ']' => {
                        out.push('\\');
                        out.push(c);
                    }
                    '*' if after_star => {}
                    _ => out.push(c),
                }
                after_star = c == '*';
            }
            out
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests;
