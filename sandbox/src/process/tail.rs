//! The last lines of a log: what a crash report shows, as a reader sees them (the terminal's
//! escape sequences parsed by `vte` and left out).

use std::io;
use std::path::Path;

/// At most this many bytes from the end of a log are read, however long its lines.
pub const MAX_TAIL_BYTES: u64 = 64 * 1024;

/// The last `lines` lines of `log`, joined by newlines, without the final newline, as
/// [`last_lines`] makes them readable. Only the last [`MAX_TAIL_BYTES`] are read, so a log of
/// any size is cheap, and a line cut by that limit is dropped unless it is the only one. The
/// text is the child's: show it escaped.
///
/// The log is opened as an untrusted file of its folder ([`crate::untrusted::open_in_parent`]):
/// a command that replaced its log with a link to a host file gets an error, not the host
/// file's lines.
pub fn tail(log: &Path, lines: usize) -> io::Result<String> {
    let opened = crate::untrusted::open_in_parent(log).map_err(io::Error::other)?;
    let (bytes, cut) = crate::untrusted::read_tail(opened, MAX_TAIL_BYTES)?;
    Ok(last_lines(&bytes, cut, lines))
}

/// The last `lines` lines of the end of a log, `bytes` (`cut`: its first line is a part, dropped
/// unless it is the only one), as a reader sees them: the terminal's escape sequences (a
/// logger's colours, `\x1b[2m`, a cursor move) and control characters other than a line feed
/// and a tab (a carriage return) removed, bytes that are not UTF-8 replaced.
pub fn last_lines(bytes: &[u8], cut: bool, lines: usize) -> String {
    let mut plain = Plain(String::with_capacity(bytes.len()));
    vte::Parser::new().advance(&mut plain, bytes);
    let text = plain.0.strip_suffix('\n').unwrap_or(&plain.0);
    if text.is_empty() || lines == 0 {
        return String::new();
    }
    let mut all: Vec<&str> = text.split('\n').collect();
    if cut && all.len() > 1 {
        all.remove(0);
    }
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Text as a terminal would show it, without moving a cursor: the printed characters, line
/// feeds and tabs; every escape sequence and other control character left out.
struct Plain(String);

impl vte::Perform for Plain {
    fn print(&mut self, character: char) {
        self.0.push(character);
    }

    fn execute(&mut self, byte: u8) {
        if matches!(byte, b'\n' | b'\t') {
            self.0.push(char::from(byte));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(content: &[u8], lines: usize, expect: &str) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("log");
        std::fs::write(&path, content).expect("the log is written");
        assert_eq!(tail(&path, lines).expect("the log is read"), expect);
    }

    #[test]
    fn last_lines() {
        check(b"", 3, "");
        check(b"one\ntwo\nthree\n", 2, "two\nthree");
        check(b"one\ntwo\nthree", 2, "two\nthree");
        check(b"one\r\ntwo\r\n", 5, "one\ntwo");
        check(b"one\n\nthree\n", 2, "\nthree");
        check(b"one\ntwo\n", 0, "");
        check(b"bad \xff byte\n", 1, "bad \u{fffd} byte");
    }

    #[test]
    fn a_loggers_colours_are_not_shown() {
        // sglang-router's own line, as it wrote it to its log.
        let line = b"\x1b[2m2026-12-06 05:39:50\x1b[0m \x1b[31mERROR\x1b[0m \x1b[2msmg::response\x1b[0m\x1b[2m:\x1b[0m request failed\n";
        check(line, 1, "2026-12-06 05:39:50 ERROR smg::response: request failed");
        check(b"\x1b[1A\x1b[2Kprogress 50%\r\nTraceback\n", 2, "progress 50%\nTraceback");
        check(b"tab\tkept\n", 1, "tab\tkept");
    }

    #[test]
    fn a_huge_log_is_read_from_its_end() {
        let mut content = "x".repeat(200_000).into_bytes();
        content.extend_from_slice(b"\nlast words\n");
        check(&content, 2, "last words");
        check(&"y".repeat(100_000).into_bytes(), 1, &"y".repeat(MAX_TAIL_BYTES as usize));
    }

    #[test]
    fn a_log_replaced_by_a_link_is_not_followed() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(dir.path().join("host-file"), "host content\n").expect("a host file");
        let log = dir.path().join("log");
        std::os::unix::fs::symlink(dir.path().join("host-file"), &log).expect("a link");
        let error = tail(&log, 3).expect_err("the link is refused");
        assert!(error.to_string().contains("is a symbolic link"), "{error}");
    }

    #[test]
    fn a_missing_log_is_an_error() {
        assert!(tail(Path::new("/nonexistent/prgate/log"), 3).is_err());
    }
}
