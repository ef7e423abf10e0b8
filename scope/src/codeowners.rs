//! CODEOWNERS files with GitHub's semantics, and the facts about a pull request's edit of one.
//!
//! [`Codeowners::parse`] reads a file into lines (blank, comment, rule or invalid) and
//! [`Codeowners::owners_of`] answers who owns a path; printing a parsed file ([`fmt::Display`])
//! gives text that parses to the same lines. [`FactsBuilder`] turns the texts and trees that
//! [`crate::git`] reads into [`CodeownersFacts`], the plan's `codeowners` field: which lines
//! changed, whose files they hand to other owners, and where the file went.
//!
//! What the facts mean for a pull request (pass, warn or fail) is the gate's policy
//! (`CODEOWNERS.rules`), not decided here; reading git is [`crate::git`]'s work. Within this
//! module, `syntax` splits a line into its parts and `facts` builds the facts.
//!
#![doc = include_str!("../../docs/codeowners.md")]

mod facts;
mod syntax;

pub use facts::{CodeownersTexts, FactsBuilder, NewModels};

use std::fmt;

use globset::{Candidate, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use syntax::{has_unescaped, is_space, parse_line, to_glob_syntax};

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
    pub fn new(text: &str) -> Result<Pattern, PatternError> {
        if text.len() > MAX_PATTERN_BYTES {
            return Err(PatternError::TooLong { bytes: text.len() });
        }
        if text.starts_with('!') {
            return Err(PatternError::Negation);
        }
        if has_unescaped(text, '[') {
            return Err(PatternError::CharacterRange);
        }
        let directory_only = text.ends_with('/');
        let rooted = text.starts_with('/');
        let body = text.strip_suffix('/').unwrap_or(text);
        let body = body.strip_prefix('/').unwrap_or(body);
        if body.is_empty() {
            return Err(PatternError::MatchesNothing { pattern: text.to_owned() });
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
                    .map_err(|error| PatternError::Glob { kind: error.kind().to_string() })
            })
            .collect::<Result<Vec<_>, PatternError>>()?;
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

/// Why GitHub would skip a CODEOWNERS pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("the pattern is {bytes} bytes, more than the {MAX_PATTERN_BYTES} a pattern may have")]
    TooLong { bytes: usize },
    #[error("negation ('!') is not supported in CODEOWNERS")]
    Negation,
    #[error("character ranges ('[...]') are not supported in CODEOWNERS")]
    CharacterRange,
    #[error("the pattern '{pattern}' matches nothing; '*' matches every file")]
    MatchesNothing { pattern: String },
    #[error("bad pattern: {kind}")]
    Glob { kind: String },
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.text == other.text
    }
}

impl Eq for Pattern {}

#[cfg(test)]
mod tests;
