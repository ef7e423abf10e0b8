//! Escaping text that came from a pull request (paths, titles, test names, log lines) for the
//! places prgate shows it: a terminal, GitHub-flavoured Markdown, the HTML of a `<summary>`,
//! and GitHub Actions' workflow commands (`::error::`).
//!
//! A path may hold any byte but NUL: terminal escape sequences, newlines, bidirectional
//! overrides, backticks, pipes, `@` mentions, `$` math and HTML. None of them may act where
//! shown. Shortening text to a limit is the caller's business; escaping only makes it inert.

use std::fmt::Write as _;

/// Where a piece of Markdown stands: a table cell needs its pipes escaped, other places must
/// not have them escaped (the backslash would show).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkdownPlace {
    Paragraph,
    TableCell,
}

/// Text for a terminal: control characters and bidirectional overrides become visible
/// escapes (`\u{1b}`), everything else is kept.
pub fn terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_visible(&mut out, c);
    }
    out
}

/// Text as a Markdown code span: shown literally, never parsed as Markdown or HTML, and no
/// `@` in it notifies anyone.
pub fn markdown_code(text: &str, place: MarkdownPlace) -> String {
    let mut body = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '|' if place == MarkdownPlace::TableCell => body.push_str("\\|"),
            _ => push_visible(&mut body, c),
        }
    }
    // The fence is one backtick longer than the longest run of backticks inside.
    let longest_run = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest_run + 1);
    if body.is_empty() {
        return "` `".to_owned();
    }
    let pad = if body.starts_with('`') || body.ends_with('`') { " " } else { "" };
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// A path (or a path pattern) as code that a narrow table may break after each `/`: GitHub's
/// sanitizer keeps `<code>` and `<wbr>` (a break opportunity, not a character: nothing
/// invisible is copied with the path). Markdown is parsed inside inline HTML, so what it could
/// act on is a numeric character reference (`&#42;`), which Markdown shows as it is and which
/// no autolink, emphasis or table pipe reads: every ASCII punctuation character but the few
/// that cannot start anything there (`-`, `,`, `+`, `=`, `%`, `(`, `)`, `{`, `}`, `'`, `"`,
/// `;`, `?`), a `_` unless a letter or digit stands on each side (where it cannot emphasize),
/// and a `.` after `www`. An `@` also has a `<wbr>` before it, which keeps GFM's e-mail
/// autolink away (GitHub mentions no one inside code). Controls and bidirectional overrides
/// become visible escapes, as in [`markdown_code`]. Safe in a table cell and in a paragraph.
pub fn markdown_path(text: &str) -> String {
    if text.is_empty() {
        return "` `".to_owned();
    }
    let mut visible = String::with_capacity(text.len());
    for c in text.chars() {
        push_visible(&mut visible, c);
    }
    let chars: Vec<char> = visible.chars().collect();
    let mut out = String::with_capacity(visible.len() + 32);
    out.push_str("<code>");
    for (index, &c) in chars.iter().enumerate() {
        let before = index.checked_sub(1).map(|at| chars[at]);
        let after = chars.get(index + 1).copied();
        let alphanumeric = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
        let after_www = index >= 3
            && chars[index - 3..index].iter().collect::<String>().eq_ignore_ascii_case("www");
        match c {
            '/' => out.push_str("/<wbr>"),
            '@' => out.push_str("<wbr>&#64;"),
            '_' if alphanumeric(before) && alphanumeric(after) => out.push('_'),
            '.' if !after_www => out.push('.'),
            '-' | ',' | '+' | '=' | '%' | '(' | ')' | '{' | '}' | '\'' | '"' | ';' | '?' | ' ' => {
                out.push(c)
            }
            c if c.is_ascii_punctuation() => {
                let _ = write!(out, "&#{};", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push_str("</code>");
    out
}

/// Lines of text (a log's tail) as a fenced Markdown code block, each line after `indent`
/// (two spaces to sit in a list item): shown literally, lines kept, no `@` notifies anyone,
/// and other control characters become visible escapes. The fence is longer than any run of
/// backticks inside.
pub fn markdown_code_block(text: &str, indent: &str) -> String {
    markdown_code_block_as(&wrap_lines(text, LOG_LINE_WIDTH), indent, "text")
}

/// The widest log line a comment shows, in characters: 80 in GitHub's code font fit its 768 px
/// column inside a list item; a longer line scrolls, and its end — often why a server died —
/// is hidden. Longer lines go on below, each continuation marked `↪`.
pub const LOG_LINE_WIDTH: usize = 80;

/// `text` with every line longer than `width` characters broken, at its last space within the
/// width when there is one past half of it, else at the width; each continuation starts with
/// `↪ `.
fn wrap_lines(text: &str, width: usize) -> String {
    wrap_lines_marked(text, width, |_line| String::new())
}

/// A unified diff's lines (a recipe against base) as a fenced `diff` block, wrapped like a
/// log's ([`LOG_LINE_WIDTH`]): a continuation keeps its line's `+`, `-` or space before the
/// `↪ `, so it is coloured as its line is and the block stays a diff.
pub fn markdown_diff_block(text: &str) -> String {
    let marker = |line: &str| match line.chars().next() {
        Some(c @ ('+' | '-' | ' ')) => c.to_string(),
        _ => String::new(),
    };
    markdown_code_block_as(&wrap_lines_marked(text, LOG_LINE_WIDTH, marker), "", "diff")
}

/// [`wrap_lines`], each continuation after what `marker` says of its line.
fn wrap_lines_marked(text: &str, width: usize, marker: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let lead: Vec<char> = format!("{}↪ ", marker(line)).chars().collect();
        let mut rest: Vec<char> = line.chars().collect();
        let mut first = true;
        loop {
            let room = if first { width } else { width.saturating_sub(lead.len()).max(1) };
            if !first {
                out.extend(lead.iter());
            }
            if rest.len() <= room {
                out.extend(rest.iter());
                out.push('\n');
                break;
            }
            let cut = rest[..room]
                .iter()
                .rposition(|c| *c == ' ')
                .filter(|at| *at > room / 2)
                .map_or(room, |at| at + 1);
            out.extend(rest[..cut].iter());
            out.push('\n');
            rest.drain(..cut);
            first = false;
        }
    }
    out
}

/// [`markdown_code_block`] with `language` as the fence's info string (`diff`: GitHub colours
/// the lines that start with `-` and `+`).
pub fn markdown_code_block_as(text: &str, indent: &str, language: &str) -> String {
    let mut body = String::with_capacity(text.len() + 16);
    for line in text.lines() {
        body.push_str(indent);
        for c in line.chars() {
            push_visible(&mut body, c);
        }
        body.push('\n');
    }
    let longest_run = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest_run.max(2) + 1);
    format!("{indent}{fence}{language}\n{body}{indent}{fence}")
}

/// Text as Markdown prose: every character that Markdown or HTML could act on is escaped,
/// and an `@` cannot mention anyone.
pub fn markdown_text(text: &str, place: MarkdownPlace) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let chars: Vec<char> = text.chars().collect();
    for (index, &c) in chars.iter().enumerate() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '@' => out.push_str("@&#8203;"),
            // `#12` and `owner/repo#12` link (and notify) another issue, whatever the
            // backslash: a zero-width space after the `#` keeps it text.
            '#' => out.push_str("\\#&#8203;"),
            '|' if place == MarkdownPlace::TableCell => out.push_str("\\|"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '(' | ')' | '!' | '~' | '|' | '{' | '}' | '$' => {
                out.push('\\');
                out.push(c);
            }
            // Bare links (`https://…`, `www.…`) become clickable in the bot's comment: a
            // character reference for the `:` or the `.` keeps GFM's autolink from seeing them
            // (and leaves no invisible character in the text a reader copies).
            ':' if chars.get(index + 1) == Some(&'/') && chars.get(index + 2) == Some(&'/') => {
                out.push_str("&#58;");
            }
            '.' if index >= 3
                && chars[index - 3..index]
                    .iter()
                    .collect::<String>()
                    .eq_ignore_ascii_case("www") =>
            {
                out.push_str("&#46;");
            }
            _ => push_visible(&mut out, c),
        }
    }
    out
}

/// Text that marks its code with backticks (a finding: ``line 5 `/a/ @team` became ...``) as
/// Markdown: each backticked part a real code span ([`markdown_code`]), each `@name` a code
/// span too (GitHub mentions no one inside code, so no invisible character is needed), and
/// the rest prose ([`markdown_text`]). An unpaired backtick stays prose, escaped. Whatever the
/// pairing, every part is inert: code spans show text literally and prose is escaped.
pub fn markdown_text_with_code(text: &str, place: MarkdownPlace) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let parts: Vec<&str> = text.split('`').collect();
    // Parts at odd indexes are code when a closing backtick follows them.
    let paired = parts.len() % 2 == 1;
    for (index, part) in parts.iter().enumerate() {
        let is_code = index % 2 == 1 && (paired || index + 1 < parts.len() - 1);
        if is_code && part.is_empty() {
            // Two backticks in a row: shown as they are.
            out.push_str("\\`\\`");
        } else if is_code {
            out.push_str(&markdown_code(part, place));
        } else {
            if index % 2 == 1 {
                // An unpaired backtick: shown as text.
                out.push_str("\\`");
            }
            push_prose_with_handles(&mut out, part, place);
        }
    }
    out
}

/// Prose in which each `@name` is a code span: it shows as written and notifies no one.
fn push_prose_with_handles(out: &mut String, text: &str, place: MarkdownPlace) {
    let handle_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '/' | '.');
    let mut rest = text;
    while let Some(at) = rest.find('@') {
        let after = &rest[at + 1..];
        let length = after.find(|c: char| !handle_char(c)).unwrap_or(after.len());
        let handle = after[..length].trim_end_matches(['.', '/']);
        if handle.is_empty() {
            out.push_str(&markdown_text(&rest[..=at], place));
            rest = after;
            continue;
        }
        out.push_str(&markdown_text(&rest[..at], place));
        out.push_str(&markdown_code(&format!("@{handle}"), place));
        rest = &after[handle.len()..];
    }
    out.push_str(&markdown_text(rest, place));
}

/// Text inside raw HTML that GitHub keeps (a `<summary>`, a `<code>`): entities for what HTML
/// could act on, and an `@` that cannot mention anyone. Markdown is not parsed there.
pub fn html_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '@' => out.push_str("@&#8203;"),
            _ => push_visible(&mut out, c),
        }
    }
    out
}

/// The message of a workflow command (`::error::MESSAGE`): GitHub's runner decodes `%25`,
/// `%0D` and `%0A`, so a message keeps its lines and cannot start a command of its own. Other
/// control characters become visible escapes, as on a terminal.
pub fn workflow_command_data(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_command_char(&mut out, c);
    }
    out
}

/// A property of a workflow command (`::error title=VALUE::`): as
/// [`workflow_command_data`], and `:` and `,` are encoded too since they end a property.
pub fn workflow_command_property(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            ':' => out.push_str("%3A"),
            ',' => out.push_str("%2C"),
            _ => push_command_char(&mut out, c),
        }
    }
    out
}

fn push_command_char(out: &mut String, c: char) {
    match c {
        '%' => out.push_str("%25"),
        '\r' => out.push_str("%0D"),
        '\n' => out.push_str("%0A"),
        _ => push_visible(out, c),
    }
}

fn push_visible(out: &mut String, c: char) {
    if c.is_control() || is_bidi_control(c) {
        let _ = write!(out, "\\u{{{:x}}}", c as u32);
    } else {
        out.push(c);
    }
}

/// Characters that reorder the text around them (the "Trojan Source" characters).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_block_keeps_its_lines_and_cannot_be_closed_from_inside() {
        let block = markdown_code_block("one\n```\nthree\u{1b}[2J", "  ");
        assert_eq!(block, "  ````text\n  one\n  ```\n  three\\u{1b}[2J\n  ````");
        assert!(!block.contains('\u{1b}'));
    }

    /// A log line longer than the column goes on below, so the end of a crash's last line shows
    /// (its words kept whole where a space allows).
    #[test]
    fn a_long_log_line_is_wrapped_to_the_width_with_its_words_whole() {
        let line = "error: the simulated server died after 3 generation requests, as its profile asks (die-after-requests)";
        let block = markdown_code_block(&format!("short\n{line}\n{}", "x".repeat(170)), "");
        let body: Vec<&str> = block.lines().collect();
        assert_eq!(
            body,
            [
                "```text",
                "short",
                "error: the simulated server died after 3 generation requests, as its profile ",
                "↪ asks (die-after-requests)",
                &"x".repeat(LOG_LINE_WIDTH),
                &format!("↪ {}", "x".repeat(LOG_LINE_WIDTH - 2)),
                &format!("↪ {}", "x".repeat(170 - 2 * LOG_LINE_WIDTH + 2)),
                "```",
            ]
        );
        assert!(body.iter().all(|line| line.chars().count() <= LOG_LINE_WIDTH), "{block}");
    }

    /// A recipe diff's long line (a server command) goes on below with its own marker, so
    /// nothing scrolls and every part of it is still coloured as an added or removed line.
    #[test]
    fn a_long_diff_line_is_wrapped_keeping_its_marker() {
        let added = format!("+command = \"{}\"", "word ".repeat(30).trim_end());
        let block = markdown_diff_block(&format!("@@ -1,2 +1,2 @@\n tp = 1\n{added}"));
        let body: Vec<&str> = block.lines().collect();
        assert_eq!(body[0], "```diff");
        assert_eq!(body[1..3], ["@@ -1,2 +1,2 @@", " tp = 1"]);
        assert!(body[3].starts_with("+command = \"word word"), "{block}");
        let continuations = &body[4..body.len() - 1];
        assert!(!continuations.is_empty(), "{block}");
        assert!(continuations.iter().all(|line| line.starts_with("+↪ word")), "{block}");
        assert!(body.iter().all(|line| line.chars().count() <= LOG_LINE_WIDTH), "{block}");
        let joined: String = body[3..body.len() - 1]
            .iter()
            .map(|line| line.strip_prefix("+↪ ").or_else(|| line.strip_prefix('+')).unwrap_or(line))
            .collect();
        assert_eq!(format!("+{joined}"), added, "nothing lost");
    }

    #[test]
    fn terminal_text_cannot_move_the_cursor_or_reorder_lines() {
        let cases = [
            ("plain/path.py", "plain/path.py"),
            ("evil\u{1b}[2J.py", "evil\\u{1b}[2J.py"),
            ("two\nlines", "two\\u{a}lines"),
            ("tab\there", "tab\\u{9}here"),
            ("rtl\u{202e}yp.txt", "rtl\\u{202e}yp.txt"),
            ("ünïcode ok", "ünïcode ok"),
        ];
        for (input, expected) in cases {
            assert_eq!(terminal(input), expected, "{input:?}");
        }
    }

    #[test]
    fn code_spans_survive_backticks_pipes_and_newlines() {
        let cases = [
            ("a/b.py", MarkdownPlace::Paragraph, "`a/b.py`"),
            ("a`b", MarkdownPlace::Paragraph, "``a`b``"),
            ("`a``", MarkdownPlace::Paragraph, "``` `a`` ```"),
            ("a|b", MarkdownPlace::TableCell, "`a\\|b`"),
            ("a|b", MarkdownPlace::Paragraph, "`a|b`"),
            ("x\n| y |", MarkdownPlace::TableCell, "`x\\u{a}\\| y \\|`"),
            ("", MarkdownPlace::Paragraph, "` `"),
            ("<!-- -->@admin", MarkdownPlace::Paragraph, "`<!-- -->@admin`"),
        ];
        for (input, place, expected) in cases {
            assert_eq!(markdown_code(input, place), expected, "{input:?}");
        }
    }

    #[test]
    fn a_path_breaks_after_its_slashes_and_nothing_in_it_acts() {
        let cases = [
            ("sgl_amd/models/k.py", "<code>sgl_amd/<wbr>models/<wbr>k.py</code>"),
            // Emphasis, code, a table's pipe, HTML: references, shown as written. A `_` between
            // letters or digits cannot emphasize and stays.
            (
                "m/__init__.py|`x`<b>*a_b*",
                "<code>m/<wbr>&#95;&#95;init&#95;&#95;.py&#124;&#96;x&#96;&#60;b&#62;&#42;a_b&#42;</code>",
            ),
            // An autolink (a URL, `www.`, an e-mail) and a mention: none can form.
            (
                "http://x/WWW.y/a@b.com",
                "<code>http&#58;/<wbr>/<wbr>x/<wbr>WWW&#46;y/<wbr>a<wbr>&#64;b.com</code>",
            ),
            ("m/{model}/**", "<code>m/<wbr>{model}/<wbr>&#42;&#42;</code>"),
            (
                "[a](b) ~c~ $d$ #1 !e &f",
                "<code>&#91;a&#93;(b) &#126;c&#126; &#36;d&#36; &#35;1 &#33;e &#38;f</code>",
            ),
            ("tab\there\u{202e}", "<code>tab&#92;u{9}here&#92;u{202e}</code>"),
            ("ünï-code", "<code>ünï-code</code>"),
            ("", "` `"),
        ];
        for (input, expected) in cases {
            assert_eq!(markdown_path(input), expected, "{input:?}");
        }
    }

    #[test]
    fn prose_cannot_mention_link_or_open_html() {
        let cases = [
            ("@maintainers please", MarkdownPlace::Paragraph, "@&#8203;maintainers please"),
            (
                "<img src=x onerror=alert(1)>",
                MarkdownPlace::Paragraph,
                "&lt;img src=x onerror=alert\\(1\\)&gt;",
            ),
            ("-->", MarkdownPlace::Paragraph, "--&gt;"),
            ("[click](http://x)", MarkdownPlace::Paragraph, "\\[click\\]\\(http&#58;//x\\)"),
            (
                "see org/repo#12 and #3",
                MarkdownPlace::Paragraph,
                "see org/repo\\#&#8203;12 and \\#&#8203;3",
            ),
            ("www.evil.example", MarkdownPlace::Paragraph, "www&#46;evil.example"),
            ("**bold** `code`", MarkdownPlace::Paragraph, "\\*\\*bold\\*\\* \\`code\\`"),
            ("a | b", MarkdownPlace::TableCell, "a \\| b"),
            ("line\nbreak", MarkdownPlace::Paragraph, "line\\u{a}break"),
            ("$\\color{red}{x}$", MarkdownPlace::Paragraph, "\\$\\\\color\\{red\\}\\{x\\}\\$"),
        ];
        for (input, place, expected) in cases {
            assert_eq!(markdown_text(input, place), expected, "{input:?}");
        }
    }

    #[test]
    fn backticked_parts_and_handles_become_code_spans_and_the_rest_stays_prose() {
        let cases = [
            (
                "line 5 `/a/ @team` became `/a/ @x`; owners of a/b.py (@team → @x)",
                MarkdownPlace::Paragraph,
                "line 5 `/a/ @team` became `/a/ @x`; owners of a/b.py \\(`@team` → `@x`\\)",
            ),
            ("mail @org/team.", MarkdownPlace::Paragraph, "mail `@org/team`."),
            ("a lone ` and *b*", MarkdownPlace::Paragraph, "a lone \\` and \\*b\\*"),
            ("`a|b` | c", MarkdownPlace::TableCell, "`a\\|b` \\| c"),
            ("`<img src=x>` <b>", MarkdownPlace::Paragraph, "`<img src=x>` &lt;b&gt;"),
            ("an @ alone", MarkdownPlace::Paragraph, "an @&#8203; alone"),
            ("a `` b", MarkdownPlace::Paragraph, "a \\`\\` b"),
        ];
        for (input, place, expected) in cases {
            assert_eq!(markdown_text_with_code(input, place), expected, "{input:?}");
        }
    }

    #[test]
    fn html_cannot_open_tags_mention_or_end_attributes() {
        let cases = [
            ("kimi_k31", "kimi_k31"),
            ("</summary><img src=x>", "&lt;/summary&gt;&lt;img src=x&gt;"),
            ("a \"b\" 'c' & @d", "a &quot;b&quot; &#39;c&#39; &amp; @&#8203;d"),
            ("two\nlines", "two\\u{a}lines"),
        ];
        for (input, expected) in cases {
            assert_eq!(html_text(input), expected, "{input:?}");
        }
    }

    #[test]
    fn workflow_commands_keep_lines_and_cannot_start_another_command() {
        let cases = [
            ("100% done", "100%25 done", "100%25 done"),
            ("a\r\n::error::b", "a%0D%0A::error::b", "a%0D%0A%3A%3Aerror%3A%3Ab"),
            ("x, y: z", "x, y: z", "x%2C y%3A z"),
            ("esc\u{1b}[31m", "esc\\u{1b}[31m", "esc\\u{1b}[31m"),
        ];
        for (input, data, property) in cases {
            assert_eq!(workflow_command_data(input), data, "{input:?}");
            assert_eq!(workflow_command_property(input), property, "{input:?}");
        }
    }
}
