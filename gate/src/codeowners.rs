//! The CODEOWNERS rule: a policy (`CODEOWNERS.rules`) applied to the facts scope found about a
//! PR's edit of the CODEOWNERS file.
//!
//! # The `CODEOWNERS.rules` format
//!
//! One rule a line: a verdict (`fail`, `warn` or `ignore`) and the kind of change it decides,
//! separated by white space; `#` starts a comment. For each change, the **first** rule whose
//! kind fits it decides; a change no rule fits is a warning. The kinds, from the most to the
//! least specific where they overlap:
//!
//! | kind | fits |
//! | --- | --- |
//! | `comment-or-blank-line` | a comment or blank line added, removed or edited (or a rule line whose rule did not change) |
//! | `line-modified` | an existing rule line replaced in place |
//! | `line-removed` | an existing rule line removed |
//! | `line-reordered` | an existing rule line moved elsewhere in the file (order decides ownership) |
//! | `line-changed` | any of the three above |
//! | `line-added-owns-only-new-model` | an added line whose files all belong to models new in the PR |
//! | `line-added-changes-owners` | an added line that changes the owners of a file of the base tree |
//! | `line-added` | any added line |
//! | `file-deleted` | the CODEOWNERS file deleted |
//! | `file-moved` | the CODEOWNERS file moved to another location |
//! | `file-shadowed` | a new CODEOWNERS file where GitHub looks before the configured one |
//! | `file-added` | a CODEOWNERS file where the base had none |
//! | `invalid-line` | a line GitHub skips (`!`, `[...]`, a bad owner) in the head file |
//! | `any` | every change |
//!
//! The policy comes from the base side (`CODEOWNERS.rules` at the repository root), or the
//! default at prgate's top level, so a PR cannot loosen it.

use prgate_scope::codeowners::{
    CodeownersFacts, CodeownersFileChange, CodeownersLineChange, FileChangeKind, LineChangeKind,
    OwnerChange,
};

use crate::config::Severity;
use crate::rules::{Finding, RuleOutcome};

/// The default policy: `CODEOWNERS.rules` at prgate's top level.
pub const DEFAULT_POLICY: &str = include_str!("../../CODEOWNERS.rules");

/// A parsed `CODEOWNERS.rules`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    rules: Vec<PolicyRule>,
}

/// One line of the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyRule {
    /// `None` is `ignore`.
    pub verdict: Option<Severity>,
    pub kind: ChangeKind,
}

/// The kinds of change a policy rule can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ChangeKind {
    CommentOrBlankLine,
    LineModified,
    LineRemoved,
    LineReordered,
    LineChanged,
    LineAddedOwnsOnlyNewModel,
    LineAddedChangesOwners,
    LineAdded,
    FileDeleted,
    FileMoved,
    FileShadowed,
    FileAdded,
    InvalidLine,
    Any,
}

const KINDS: [(&str, ChangeKind); 14] = [
    ("comment-or-blank-line", ChangeKind::CommentOrBlankLine),
    ("line-modified", ChangeKind::LineModified),
    ("line-removed", ChangeKind::LineRemoved),
    ("line-reordered", ChangeKind::LineReordered),
    ("line-changed", ChangeKind::LineChanged),
    ("line-added-owns-only-new-model", ChangeKind::LineAddedOwnsOnlyNewModel),
    ("line-added-changes-owners", ChangeKind::LineAddedChangesOwners),
    ("line-added", ChangeKind::LineAdded),
    ("file-deleted", ChangeKind::FileDeleted),
    ("file-moved", ChangeKind::FileMoved),
    ("file-shadowed", ChangeKind::FileShadowed),
    ("file-added", ChangeKind::FileAdded),
    ("invalid-line", ChangeKind::InvalidLine),
    ("any", ChangeKind::Any),
];

/// Why a policy was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {problem}: \"{text}\"")]
pub struct PolicyError {
    pub file: String,
    pub line: usize,
    pub text: String,
    pub problem: String,
}

impl ChangeKind {
    pub fn name(self) -> &'static str {
        KINDS.iter().find(|(_, kind)| *kind == self).map_or("any", |(name, _)| name)
    }
}

impl Policy {
    /// Parses a policy; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Policy, PolicyError> {
        let mut rules = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let error = |problem: String| PolicyError {
                file: file.to_owned(),
                line: index + 1,
                text: raw.to_owned(),
                problem,
            };
            let words: Vec<&str> = line.split_whitespace().collect();
            let [verdict, kind] = words.as_slice() else {
                return Err(error(
                    "a rule is a verdict and a kind of change, as in 'fail line-modified'"
                        .to_owned(),
                ));
            };
            let verdict = match *verdict {
                "fail" => Some(Severity::Fail),
                "warn" => Some(Severity::Warn),
                "ignore" => None,
                other => {
                    return Err(error(format!(
                        "'{other}' is not a verdict (fail, warn or ignore)"
                    )));
                }
            };
            let Some((_, kind)) = KINDS.iter().find(|(name, _)| name == kind) else {
                let names: Vec<&str> = KINDS.iter().map(|(name, _)| *name).collect();
                return Err(error(format!(
                    "'{kind}' is not a kind of change (one of {})",
                    names.join(", ")
                )));
            };
            rules.push(PolicyRule { verdict, kind: *kind });
        }
        Ok(Policy { rules })
    }

    /// The rules in order.
    pub fn rules(&self) -> &[PolicyRule] {
        &self.rules
    }

    /// The verdict for a change that fits `kinds` (most specific first), and the kind that
    /// decided; a change no rule fits is a warning.
    fn decide(&self, kinds: &[ChangeKind]) -> (Option<Severity>, Option<ChangeKind>) {
        self.rules
            .iter()
            .find(|rule| rule.kind == ChangeKind::Any || kinds.contains(&rule.kind))
            .map_or((Some(Severity::Warn), None), |rule| (rule.verdict, Some(rule.kind)))
    }

    /// Judges the facts of a plan. Each finding is a few short sentences, with paths, lines
    /// and `@` names in backticks (the comment shows them as code), ending with the policy's
    /// rule that decided.
    pub fn judge(&self, facts: &CodeownersFacts) -> RuleOutcome {
        let mut findings = Vec::new();
        let mut add = |kinds: &[ChangeKind], message: String| {
            let (verdict, decided_by) = self.decide(kinds);
            if let Some(severity) = verdict {
                let rule = decided_by.map_or_else(
                    || "No rule of the policy covers it.".to_owned(),
                    |kind| format!("Policy rule: {}.", code(kind.name())),
                );
                findings.push(Finding::new(severity, format!("{message} {rule}")));
            }
        };
        for change in &facts.file_changes {
            let kind = match change.kind {
                FileChangeKind::Deleted => ChangeKind::FileDeleted,
                FileChangeKind::Moved => ChangeKind::FileMoved,
                FileChangeKind::Shadowed => ChangeKind::FileShadowed,
                FileChangeKind::Added => ChangeKind::FileAdded,
            };
            add(&[kind], describe_file(facts, change));
        }
        for change in &facts.line_changes {
            add(&line_kinds(change), describe_line(facts, change));
        }
        let file = facts.head_path.as_deref().unwrap_or(&facts.path);
        for invalid in &facts.invalid_lines {
            add(
                &[ChangeKind::InvalidLine],
                format!(
                    "GitHub skips {} line {}, {}: {}.",
                    code(file),
                    invalid.line,
                    code(&invalid.text),
                    invalid.problem
                ),
            );
        }
        RuleOutcome::new("codeowners", findings)
    }
}

/// The kinds a line change fits, most specific first.
fn line_kinds(change: &CodeownersLineChange) -> Vec<ChangeKind> {
    match change.kind {
        LineChangeKind::CommentOrBlank => vec![ChangeKind::CommentOrBlankLine],
        LineChangeKind::Modified => vec![ChangeKind::LineModified, ChangeKind::LineChanged],
        LineChangeKind::Removed => vec![ChangeKind::LineRemoved, ChangeKind::LineChanged],
        LineChangeKind::Reordered => vec![ChangeKind::LineReordered, ChangeKind::LineChanged],
        LineChangeKind::Added => {
            let mut kinds = Vec::new();
            if !change.new_models_only.is_empty() {
                kinds.push(ChangeKind::LineAddedOwnsOnlyNewModel);
            }
            if change.owner_changes_total > 0 {
                kinds.push(ChangeKind::LineAddedChangesOwners);
            }
            kinds.push(ChangeKind::LineAdded);
            kinds
        }
    }
}

/// Text the comment shows as code: a path, a line of CODEOWNERS, an owner.
fn code(text: &str) -> String {
    format!("`{text}`")
}

/// What happened to the file as a whole, in a sentence or two.
fn describe_file(facts: &CodeownersFacts, change: &CodeownersFileChange) -> String {
    let configured = code(&facts.path);
    let path = code(&change.path);
    match change.kind {
        FileChangeKind::Deleted => format!("{path} is deleted."),
        FileChangeKind::Moved => format!("{configured} moved to {path}."),
        FileChangeKind::Shadowed => {
            format!("The PR adds {path}. GitHub reads it before {configured}.")
        }
        FileChangeKind::Added => format!("Base has no {configured}. The PR adds {path}."),
    }
}

/// What happened to a line, then what it does, in short sentences.
fn describe_line(facts: &CodeownersFacts, change: &CodeownersLineChange) -> String {
    let file = code(facts.head_path.as_deref().unwrap_or(&facts.path));
    let base_file = code(&facts.path);
    let text = |text: &Option<String>| text.as_deref().map(code).unwrap_or_default();
    let (base_line, head_line) = (change.base_line.unwrap_or(0), change.head_line.unwrap_or(0));
    let mut sentences = vec![match change.kind {
        LineChangeKind::Added => {
            format!("{file} line {head_line} added: {}.", text(&change.head_text))
        }
        LineChangeKind::Removed => {
            format!("{base_file} line {base_line} removed: {}.", text(&change.base_text))
        }
        LineChangeKind::Modified => format!(
            "{base_file} line {base_line} modified: {} became {}.",
            text(&change.base_text),
            text(&change.head_text)
        ),
        LineChangeKind::Reordered => format!(
            "{base_file} line {base_line} moved to line {head_line}: {}.",
            text(&change.base_text)
        ),
        LineChangeKind::CommentOrBlank => format!(
            "{file} comment or blank line {} changed.",
            change.head_line.or(change.base_line).unwrap_or(0)
        ),
    }];
    if !change.new_models_only.is_empty() {
        let models: Vec<String> = change.new_models_only.iter().map(|m| code(m)).collect();
        let noun = if models.len() == 1 { "model" } else { "models" };
        sentences.push(format!("It owns only files of the new {noun} {}.", and_list(&models)));
    }
    if change.owner_changes_total > 0 {
        sentences.push(owner_changes_text(&change.owner_changes, change.owner_changes_total));
    }
    sentences.join(" ")
}

/// How many files of the base tree get new owners, then the first few, one sentence per
/// change of owners: `` From `@team` to `@someone`: `a.py`, `b.py`. ``
fn owner_changes_text(changes: &[OwnerChange], total: usize) -> String {
    const SHOWN: usize = 3;
    let owners = |list: &[String]| {
        if list.is_empty() {
            "nobody".to_owned()
        } else {
            and_list(&list.iter().map(|owner| code(owner)).collect::<Vec<_>>())
        }
    };
    let files = if total == 1 { "file" } else { "files" };
    let mut sentences = vec![format!("It changes the owners of {total} {files} of the base tree.")];
    let shown = &changes[..SHOWN.min(changes.len())];
    let mut groups: Vec<(&[String], &[String], Vec<String>)> = Vec::new();
    for change in shown {
        let path = code(&change.path);
        match groups.iter_mut().find(|(before, after, _)| {
            *before == change.before.as_slice() && *after == change.after.as_slice()
        }) {
            Some((_, _, paths)) => paths.push(path),
            None => groups.push((&change.before, &change.after, vec![path])),
        }
    }
    for (before, after, paths) in &groups {
        sentences.push(format!(
            "From {} to {}: {}.",
            owners(before),
            owners(after),
            paths.join(", ")
        ));
    }
    let more = total.saturating_sub(shown.len());
    if more > 0 && !shown.is_empty() {
        let files = if more == 1 { "file changes" } else { "files change" };
        sentences.push(format!("{more} more {files} owners too."));
    }
    sentences.join(" ")
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [only] => only.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use prgate_scope::codeowners::InvalidCodeownersLine;

    use super::*;

    const DEFAULT: &str = DEFAULT_POLICY;

    fn line(
        kind: LineChangeKind,
        base: Option<(usize, &str)>,
        head: Option<(usize, &str)>,
    ) -> CodeownersLineChange {
        CodeownersLineChange {
            kind,
            base_line: base.map(|(n, _)| n),
            head_line: head.map(|(n, _)| n),
            base_text: base.map(|(_, t)| t.to_owned()),
            head_text: head.map(|(_, t)| t.to_owned()),
            owner_changes: vec![],
            owner_changes_total: 0,
            new_models_only: vec![],
        }
    }

    fn facts(
        line_changes: Vec<CodeownersLineChange>,
        file_changes: Vec<CodeownersFileChange>,
    ) -> CodeownersFacts {
        CodeownersFacts {
            path: ".github/CODEOWNERS".into(),
            in_base: true,
            in_head: true,
            head_path: Some(".github/CODEOWNERS".into()),
            file_changes,
            line_changes,
            invalid_lines: vec![],
        }
    }

    fn check(facts: &CodeownersFacts) -> String {
        let policy = Policy::parse(DEFAULT, "CODEOWNERS.rules").expect("the default policy parses");
        let outcome = policy.judge(facts);
        let mut out = format!("{:?}", outcome.verdict);
        for finding in outcome.findings {
            out.push_str(&format!("\n{:?}: {}", finding.severity, finding.message));
        }
        out
    }

    #[test]
    fn the_default_policy_judges_every_kind_of_change() {
        let mut added_owner = line(LineChangeKind::Added, None, Some((9, "* @someone")));
        added_owner.owner_changes = vec![OwnerChange {
            path: "a.py".into(),
            before: vec!["@team".into()],
            after: vec!["@someone".into()],
        }];
        added_owner.owner_changes_total = 1200;
        let mut added_new_model = line(LineChangeKind::Added, None, Some((9, "/m/muse/ @muse")));
        added_new_model.new_models_only = vec!["muse".into()];
        let mut moved_owners =
            line(LineChangeKind::Modified, Some((5, "/k/ @k-team")), Some((5, "/k/ @else @other")));
        let owner_change = |path: &str, before: &[&str]| OwnerChange {
            path: path.into(),
            before: before.iter().map(|owner| (*owner).to_owned()).collect(),
            after: vec!["@else".into(), "@other".into()],
        };
        moved_owners.owner_changes = vec![
            owner_change("k/a.py", &["@k-team"]),
            owner_change("k/new.py", &[]),
            owner_change("k/b.py", &["@k-team"]),
            owner_change("k/c.py", &["@k-team"]),
        ];
        moved_owners.owner_changes_total = 5;
        let mut two_new_models = line(LineChangeKind::Added, None, Some((9, "/m/ @muse")));
        two_new_models.new_models_only = vec!["muse".into(), "lyre".into()];
        let cases = [
            ("nothing", facts(vec![], vec![]), "Pass"),
            (
                "a comment",
                facts(vec![line(LineChangeKind::CommentOrBlank, None, Some((1, "# hi")))], vec![]),
                "Pass",
            ),
            (
                "a modified line",
                facts(
                    vec![line(
                        LineChangeKind::Modified,
                        Some((3, "/m/a/ @a")),
                        Some((3, "/m/a/ @b")),
                    )],
                    vec![],
                ),
                "Fail\nFail: `.github/CODEOWNERS` line 3 modified: `/m/a/ @a` became `/m/a/ @b`. Policy rule: `line-modified`.",
            ),
            (
                "a removed line",
                facts(vec![line(LineChangeKind::Removed, Some((4, "/m/b/ @b")), None)], vec![]),
                "Fail\nFail: `.github/CODEOWNERS` line 4 removed: `/m/b/ @b`. Policy rule: `line-removed`.",
            ),
            (
                "a reordered line",
                facts(
                    vec![line(
                        LineChangeKind::Reordered,
                        Some((4, "/m/b/ @b")),
                        Some((2, "/m/b/ @b")),
                    )],
                    vec![],
                ),
                "Fail\nFail: `.github/CODEOWNERS` line 4 moved to line 2: `/m/b/ @b`. Policy rule: `line-reordered`.",
            ),
            (
                "an added line changing owners",
                facts(vec![added_owner], vec![]),
                "Fail\nFail: `.github/CODEOWNERS` line 9 added: `* @someone`. It changes the owners of 1200 files of the base tree. From `@team` to `@someone`: `a.py`. 1199 more files change owners too. Policy rule: `line-added-changes-owners`.",
            ),
            (
                "an added line for a new model",
                facts(vec![added_new_model], vec![]),
                "Warn\nWarn: `.github/CODEOWNERS` line 9 added: `/m/muse/ @muse`. It owns only files of the new model `muse`. Policy rule: `line-added-owns-only-new-model`.",
            ),
            (
                "an added line changing nothing",
                facts(vec![line(LineChangeKind::Added, None, Some((9, "/gone/ @x")))], vec![]),
                "Warn\nWarn: `.github/CODEOWNERS` line 9 added: `/gone/ @x`. Policy rule: `line-added`.",
            ),
            (
                "the file deleted",
                facts(
                    vec![],
                    vec![CodeownersFileChange {
                        kind: FileChangeKind::Deleted,
                        path: ".github/CODEOWNERS".into(),
                        detail: "no CODEOWNERS in head".into(),
                    }],
                ),
                "Fail\nFail: `.github/CODEOWNERS` is deleted. Policy rule: `file-deleted`.",
            ),
            (
                "the file shadowed",
                CodeownersFacts {
                    path: "CODEOWNERS".into(),
                    ..facts(
                        vec![],
                        vec![CodeownersFileChange {
                            kind: FileChangeKind::Shadowed,
                            path: ".github/CODEOWNERS".into(),
                            detail: "GitHub reads it before CODEOWNERS".into(),
                        }],
                    )
                },
                "Fail\nFail: The PR adds `.github/CODEOWNERS`. GitHub reads it before `CODEOWNERS`. Policy rule: `file-shadowed`.",
            ),
            (
                "a modified line that moves files between owners",
                facts(vec![moved_owners], vec![]),
                "Fail\nFail: `.github/CODEOWNERS` line 5 modified: `/k/ @k-team` became `/k/ @else @other`. It changes the owners of 5 files of the base tree. From `@k-team` to `@else` and `@other`: `k/a.py`, `k/b.py`. From nobody to `@else` and `@other`: `k/new.py`. 2 more files change owners too. Policy rule: `line-modified`.",
            ),
            (
                "an added line for two new models",
                facts(vec![two_new_models], vec![]),
                "Warn\nWarn: `.github/CODEOWNERS` line 9 added: `/m/ @muse`. It owns only files of the new models `muse` and `lyre`. Policy rule: `line-added-owns-only-new-model`.",
            ),
        ];
        for (name, facts, expected) in cases {
            assert_eq!(check(&facts), expected, "case: {name}");
        }
        let mut with_invalid = facts(vec![], vec![]);
        with_invalid.invalid_lines = vec![InvalidCodeownersLine {
            line: 5,
            text: "!x @a".into(),
            problem: "negation is not supported".into(),
        }];
        assert_eq!(
            check(&with_invalid),
            "Warn\nWarn: GitHub skips `.github/CODEOWNERS` line 5, `!x @a`: negation is not supported. Policy rule: `invalid-line`."
        );
    }

    #[test]
    fn the_first_fitting_rule_decides_and_errors_name_the_line() {
        let policy = Policy::parse("ignore line-added\nfail any\n", "p").expect("parses");
        let outcome = policy
            .judge(&facts(vec![line(LineChangeKind::Added, None, Some((1, "* @x")))], vec![]));
        assert_eq!(outcome.verdict, Severity::Pass);
        let outcome = policy
            .judge(&facts(vec![line(LineChangeKind::Removed, Some((1, "* @x")), None)], vec![]));
        assert_eq!(outcome.verdict, Severity::Fail);
        let empty = Policy::parse("# nothing\n", "p").expect("parses");
        assert_eq!(
            empty
                .judge(&facts(vec![line(LineChangeKind::Removed, Some((1, "* @x")), None)], vec![]))
                .verdict,
            Severity::Warn
        );

        let cases = [
            (
                "fail",
                "p:1: a rule is a verdict and a kind of change, as in 'fail line-modified': \"fail\"",
            ),
            (
                "block line-added",
                "p:1: 'block' is not a verdict (fail, warn or ignore): \"block\tline-added\"",
            ),
            (
                "# ok\nfail line-edited",
                "p:2: 'line-edited' is not a kind of change (one of comment-or-blank-line, line-modified, line-removed, line-reordered, line-changed, line-added-owns-only-new-model, line-added-changes-owners, line-added, file-deleted, file-moved, file-shadowed, file-added, invalid-line, any): \"fail line-edited\"",
            ),
        ];
        for (text, expected) in cases {
            let text = text.replace("block line", "block\tline");
            assert_eq!(
                Policy::parse(&text, "p").map(|_| ()).map_err(|e| e.to_string()),
                Err(expected.to_owned()),
                "{text}"
            );
        }
    }

    #[test]
    fn the_default_policy_is_the_documented_one() {
        let policy = Policy::parse(DEFAULT, "CODEOWNERS.rules").expect("the default policy parses");
        let rendered: Vec<String> = policy
            .rules()
            .iter()
            .map(|rule| {
                format!(
                    "{} {}",
                    rule.verdict.map_or("ignore", |v| if v == Severity::Fail {
                        "fail"
                    } else {
                        "warn"
                    }),
                    rule.kind.name()
                )
            })
            .collect();
        insta::assert_snapshot!(rendered.join("\n"), @r"
        ignore comment-or-blank-line
        fail file-deleted
        fail file-moved
        fail file-shadowed
        fail file-added
        fail line-modified
        fail line-removed
        fail line-reordered
        warn line-added-owns-only-new-model
        fail line-added-changes-owners
        warn line-added
        warn invalid-line
        ");
    }
}
