//! CODEOWNERS syntax as GitHub reads it: a line split into its pattern, owners and comment
//! (escaped spaces and `#` kept), what counts as an owner (`@user`, `@org/team`, an email),
//! and a pattern turned into glob syntax. What a parsed line means is the parent's.

use super::{Line, Pattern, Rule};

/// The whitespace that separates a line's parts.
pub(super) fn is_space(c: char) -> bool {
    c.is_ascii_whitespace()
}

pub(super) fn parse_line(raw: &str) -> Line {
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
        Err(problem) => return invalid(problem.to_string()),
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
pub(super) fn has_unescaped(text: &str, wanted: char) -> bool {
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
pub(super) fn to_glob_syntax(body: &str) -> String {
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
