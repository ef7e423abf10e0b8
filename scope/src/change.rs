//! A changed path, and the file-list format `prgate plan --files` reads.
//!
//! A file list is one path per line, as GitHub's API gives a PR's files. A line may also be a
//! line of `git diff --name-status` (`M<TAB>path`, `R100<TAB>old<TAB>new`), so the output of
//! git can be piped in as it is; a path git quoted (`"caf\303\251.py"`, as it quotes
//! non-ASCII and special characters) is unquoted. Empty lines are skipped. Reading the list
//! from a file or standard input is the binary's business.

use serde::{Deserialize, Serialize};

/// One changed path, with where it came from when it was renamed or copied.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Change {
    pub path: String,
    pub status: ChangeStatus,
    /// The path before a rename or copy.
    pub old_path: Option<String>,
}

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeStatus {
    Added,
    Modified,
    Deleted,
    /// Moved from `old_path`; both paths count.
    Renamed,
    /// Copied from `old_path`; only the new path counts.
    Copied,
    /// A file became a symbolic link or a submodule, or the other way round.
    TypeChanged,
    /// Listed as changed by a plain file list, which does not say how.
    Unknown,
}

impl Change {
    /// The paths that count for selection: the path, and the old path of a rename.
    pub fn counted_paths(&self) -> impl Iterator<Item = &str> {
        let old = match self.status {
            ChangeStatus::Renamed => self.old_path.as_deref(),
            _ => None,
        };
        std::iter::once(self.path.as_str()).chain(old)
    }

    /// The letter `git diff --name-status` shows for this status (`?` when unknown).
    pub fn status_letter(&self) -> char {
        match self.status {
            ChangeStatus::Added => 'A',
            ChangeStatus::Modified => 'M',
            ChangeStatus::Deleted => 'D',
            ChangeStatus::Renamed => 'R',
            ChangeStatus::Copied => 'C',
            ChangeStatus::TypeChanged => 'T',
            ChangeStatus::Unknown => '?',
        }
    }
}

/// Why a file list was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}: \"{text}\"")]
pub struct FileListError {
    pub line: usize,
    pub text: String,
    pub problem: String,
}

/// Parses a file list: a path per line, or lines of `git diff --name-status`.
pub fn parse_file_list(text: &str) -> Result<Vec<Change>, FileListError> {
    let mut changes = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.trim().is_empty() {
            continue;
        }
        let error = |problem: &str| FileListError {
            line: index + 1,
            text: line.to_owned(),
            problem: problem.to_owned(),
        };
        let change = match parse_name_status(line) {
            Some(Ok(change)) => change,
            Some(Err(problem)) => return Err(error(problem)),
            None => Change { path: line.to_owned(), status: ChangeStatus::Unknown, old_path: None },
        };
        let change = Change {
            path: unquote(&change.path).map_err(&error)?,
            old_path: change.old_path.as_deref().map(unquote).transpose().map_err(&error)?,
            status: change.status,
        };
        for path in std::iter::once(&change.path).chain(&change.old_path) {
            if let Err(problem) = check_listed_path(path) {
                return Err(error(problem));
            }
        }
        changes.push(change);
    }
    Ok(changes)
}

/// A `--name-status` line, if the line is one: `None` when it is a plain path.
fn parse_name_status(line: &str) -> Option<Result<Change, &'static str>> {
    let (letters, rest) = line.split_once('\t')?;
    let mut chars = letters.chars();
    let letter = chars.next()?;
    if !chars.all(|c| c.is_ascii_digit()) {
        return None;
    }
    let status = match letter {
        'A' => ChangeStatus::Added,
        'M' => ChangeStatus::Modified,
        'D' => ChangeStatus::Deleted,
        'R' => ChangeStatus::Renamed,
        'C' => ChangeStatus::Copied,
        'T' => ChangeStatus::TypeChanged,
        'U' | 'X' => ChangeStatus::Unknown,
        _ => return None,
    };
    let change = match status {
        ChangeStatus::Renamed | ChangeStatus::Copied => match rest.split_once('\t') {
            Some((old, new)) => {
                Change { path: new.to_owned(), status, old_path: Some(old.to_owned()) }
            }
            None => return Some(Err("a rename or copy needs the old and the new path")),
        },
        _ => Change { path: rest.to_owned(), status, old_path: None },
    };
    Some(Ok(change))
}

/// A path as git quotes it (`"a\tb\303\251"`: C escapes and octal bytes), unquoted; a path
/// that is not in quotes as it is.
fn unquote(path: &str) -> Result<String, &'static str> {
    let Some(inner) = path.strip_prefix('"').and_then(|rest| rest.strip_suffix('"')) else {
        return Ok(path.to_owned());
    };
    let mut bytes = Vec::with_capacity(inner.len());
    let mut chars = inner.bytes().peekable();
    while let Some(byte) = chars.next() {
        if byte != b'\\' {
            bytes.push(byte);
            continue;
        }
        let escaped = chars.next().ok_or("a quoted path ends in a backslash")?;
        let value = match escaped {
            b'a' => 0x07,
            b'b' => 0x08,
            b't' => b'\t',
            b'n' => b'\n',
            b'v' => 0x0b,
            b'f' => 0x0c,
            b'r' => b'\r',
            b'"' | b'\\' => escaped,
            b'0'..=b'3' => {
                let mut value = u32::from(escaped - b'0');
                for _ in 0..2 {
                    match chars.next() {
                        Some(digit @ b'0'..=b'7') => value = value * 8 + u32::from(digit - b'0'),
                        _ => return Err("a quoted path has a bad octal escape"),
                    }
                }
                u8::try_from(value).map_err(|_| "a quoted path has a bad octal escape")?
            }
            _ => return Err("a quoted path has an unknown escape"),
        };
        bytes.push(value);
    }
    String::from_utf8(bytes).map_err(|_| "a quoted path is not UTF-8")
}

fn check_listed_path(path: &str) -> Result<(), &'static str> {
    if path.starts_with('/') {
        return Err("paths are relative to the repository root");
    }
    if path.split('/').any(|segment| segment.is_empty() || segment == "." || segment == "..") {
        return Err("not a plain path (empty, . or .. segment)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> String {
        match parse_file_list(text) {
            Ok(changes) => changes
                .iter()
                .map(|change| match &change.old_path {
                    Some(old) => format!("{} {} <- {}", change.status_letter(), change.path, old),
                    None => format!("{} {}", change.status_letter(), change.path),
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Err(error) => format!("error: {error}"),
        }
    }

    #[test]
    fn plain_paths_and_name_status_lines() {
        let cases = [
            ("a/b.py\n\nc.toml\r\n", "? a/b.py\n? c.toml"),
            ("M\ta.py\nA\tb.py\nD\tc.py\nT\td", "M a.py\nA b.py\nD c.py\nT d"),
            ("R100\told/x.py\tnew/x.py", "R new/x.py <- old/x.py"),
            ("C075\ta.py\tb.py", "C b.py <- a.py"),
            ("Makefile\twith tab", "? Makefile\twith tab"),
            ("A\t\"pkg/caf\\303\\251.py\"", "A pkg/café.py"),
            ("\"a\\tb \\\"q\\\"\"", "? a\tb \"q\""),
            ("R100\t\"\\303\\251/x\"\tplain", "R plain <- é/x"),
            ("\"bad\\q\"", "error: line 1: a quoted path has an unknown escape: \"\"bad\\q\"\""),
            ("", ""),
            (
                "R100\tonly-one",
                "error: line 1: a rename or copy needs the old and the new path: \"R100\tonly-one\"",
            ),
            (
                "ok\n/etc/passwd",
                "error: line 2: paths are relative to the repository root: \"/etc/passwd\"",
            ),
            ("a/../b", "error: line 1: not a plain path (empty, . or .. segment): \"a/../b\""),
            ("a//b", "error: line 1: not a plain path (empty, . or .. segment): \"a//b\""),
        ];
        for (input, expected) in cases {
            assert_eq!(check(input), expected, "input {input:?}");
        }
    }

    #[test]
    fn a_rename_counts_on_both_paths_and_a_copy_on_the_new_one() {
        let rename =
            Change { path: "b".into(), status: ChangeStatus::Renamed, old_path: Some("a".into()) };
        let copy =
            Change { path: "b".into(), status: ChangeStatus::Copied, old_path: Some("a".into()) };
        assert_eq!(rename.counted_paths().collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(copy.counted_paths().collect::<Vec<_>>(), ["b"]);
    }
}
