//! Redacting the node's secret values from everything prgate writes: evidence records, the
//! event stream, the comment, the job summary and the report.
//!
//! The values are the runner's own: every non-empty `PRGATE_SECRET_<NAME>` of its environment
//! (the one place a node keeps a secret's value, `docs/node-profile.md`), read once. A value is
//! replaced wherever it appears, as written and as JSON writes it inside a string, by
//! `[redacted NAME]`. No PR-named command receives a secret (`docs/container.md`), so a value
//! should never reach prgate's outputs in the first place; this is the second wall, for a
//! value that reaches them anyway (a guessed token, a trusted fetch's error message).
//!
//! What it does not do: recognise a value encoded otherwise (base64, URL-encoded, split across
//! lines). Values shorter than [`MIN_SECRET_LEN`] bytes are not redacted: they would turn
//! ordinary text into noise, and a secret that short protects nothing.

use std::borrow::Cow;
use std::path::Path;
use std::sync::OnceLock;

use crate::node::SECRET_ENV_PREFIX;

/// The shortest value redacted: 4 bytes.
pub const MIN_SECRET_LEN: usize = 4;

/// The secret values to redact, each with its secret's name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// (value as written, value as JSON escapes it, replacement), longest value first so that
    /// a value that contains another is replaced whole.
    secrets: Vec<(String, String, String)>,
}

impl Redactor {
    /// A redactor for `secrets`: (name, value) pairs. Empty and short values are left out.
    pub fn new<'a>(secrets: impl IntoIterator<Item = (&'a str, &'a str)>) -> Redactor {
        let mut list: Vec<(String, String, String)> = secrets
            .into_iter()
            .filter(|(_, value)| value.len() >= MIN_SECRET_LEN)
            .map(|(name, value)| {
                let quoted = serde_json::to_string(value).unwrap_or_default();
                let escaped = quoted
                    .strip_prefix('"')
                    .and_then(|rest| rest.strip_suffix('"'))
                    .unwrap_or(value)
                    .to_owned();
                (value.to_owned(), escaped, format!("[redacted {name}]"))
            })
            .collect();
        list.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        list.dedup_by(|a, b| a.0 == b.0);
        Redactor { secrets: list }
    }

    /// The runner's secrets: every non-empty `PRGATE_SECRET_<NAME>` of its environment.
    pub fn from_environment() -> Redactor {
        let pairs: Vec<(String, String)> = std::env::vars_os()
            .filter_map(|(name, value)| {
                let name = name.into_string().ok()?;
                let secret = name.strip_prefix(SECRET_ENV_PREFIX)?.to_owned();
                Some((secret, value.into_string().ok()?))
            })
            .collect();
        Redactor::new(pairs.iter().map(|(name, value)| (name.as_str(), value.as_str())))
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret value replaced by `[redacted NAME]`.
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut text = Cow::Borrowed(text);
        for (value, escaped, replacement) in &self.secrets {
            for form in [value, escaped] {
                if text.contains(form.as_str()) {
                    text = Cow::Owned(text.replace(form.as_str(), replacement));
                }
            }
        }
        text
    }

    /// `bytes` (UTF-8 or not) with every secret value replaced; the bytes that are not part of
    /// a value are kept as they are.
    pub fn redact_bytes<'b>(&self, bytes: &'b [u8]) -> Cow<'b, [u8]> {
        let mut bytes = Cow::Borrowed(bytes);
        for (value, escaped, replacement) in &self.secrets {
            for form in [value, escaped] {
                if let Some(replaced) =
                    replace_bytes(&bytes, form.as_bytes(), replacement.as_bytes())
                {
                    bytes = Cow::Owned(replaced);
                }
            }
        }
        bytes
    }
}

/// The runner's redactor ([`Redactor::from_environment`]), read once per process.
pub fn runner_redactor() -> &'static Redactor {
    static REDACTOR: OnceLock<Redactor> = OnceLock::new();
    REDACTOR.get_or_init(Redactor::from_environment)
}

/// `text` with the runner's secret values redacted: what every writer of prgate's outputs
/// calls before it writes.
pub fn redact(text: &str) -> Cow<'_, str> {
    runner_redactor().redact(text)
}

/// [`redact`] for bytes.
pub fn redact_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    runner_redactor().redact_bytes(bytes)
}

/// The largest log [`redact_log`] rewrites: 1 GiB. A longer one is cut to its last 1 GiB.
pub const MAX_LOG_BYTES: u64 = 1 << 30;

/// Redacts the runner's secret values from the log at `path` in place, once the command that
/// wrote it has ended: a log is written by the command itself (its standard output), so what a
/// command printed is redacted when it is done. Does nothing when the runner has no secret or
/// the log holds none; a log that is not a regular file of its folder is left alone (it is not
/// read either, `crate::untrusted`). The rewrite is atomic.
pub fn redact_log(path: &Path) -> std::io::Result<()> {
    runner_redactor().redact_log(path)
}

impl Redactor {
    /// [`redact_log`] with this redactor.
    pub fn redact_log(&self, path: &Path) -> std::io::Result<()> {
        redact_log_with(self, path)
    }
}

fn redact_log_with(redactor: &Redactor, path: &Path) -> std::io::Result<()> {
    if redactor.is_empty() {
        return Ok(());
    }
    let Ok(opened) = crate::untrusted::open_in_parent(path) else { return Ok(()) };
    let (bytes, _cut) = crate::untrusted::read_tail(opened, MAX_LOG_BYTES)?;
    if let Cow::Owned(redacted) = redactor.redact_bytes(&bytes) {
        crate::results::write_atomically(path, &redacted)?;
    }
    Ok(())
}

/// `haystack` with every `needle` replaced, or `None` when there is none.
fn replace_bytes(haystack: &[u8], needle: &[u8], replacement: &[u8]) -> Option<Vec<u8>> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    let mut out = Vec::new();
    let mut start = 0;
    let mut found = false;
    let mut index = 0;
    while index + needle.len() <= haystack.len() {
        if &haystack[index..index + needle.len()] == needle {
            out.extend_from_slice(&haystack[start..index]);
            out.extend_from_slice(replacement);
            index += needle.len();
            start = index;
            found = true;
        } else {
            index += 1;
        }
    }
    found.then(|| {
        out.extend_from_slice(&haystack[start..]);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(secrets: &[(&str, &str)], text: &str, expect: &str) {
        let redactor = Redactor::new(secrets.iter().copied());
        assert_eq!(redactor.redact(text), expect, "{text}");
        assert_eq!(redactor.redact_bytes(text.as_bytes()).as_ref(), expect.as_bytes(), "{text}");
    }

    #[test]
    fn secret_values_are_replaced_by_their_names() {
        let token = [("HF_TOKEN", "hf_abcdefSECRET")];
        check(&token, "HF_TOKEN=hf_abcdefSECRET\n", "HF_TOKEN=[redacted HF_TOKEN]\n");
        check(
            &token,
            "a hf_abcdefSECRET b hf_abcdefSECRET",
            "a [redacted HF_TOKEN] b [redacted HF_TOKEN]",
        );
        check(&token, "nothing here", "nothing here");
        // As JSON writes it inside a string.
        let quoting = [("ODD", "pa\"ss\\word")];
        check(&quoting, r#"{"detail": "pa\"ss\\word"}"#, r#"{"detail": "[redacted ODD]"}"#);
        check(&quoting, "raw pa\"ss\\word", "raw [redacted ODD]");
        // A value that contains another is replaced whole.
        let nested = [("SHORT", "abcd"), ("LONG", "xxabcdxx")];
        check(&nested, "xxabcdxx abcd", "[redacted LONG] [redacted SHORT]");
        // Too short to redact, and empty.
        check(&[("PIN", "123"), ("EMPTY", "")], "123 and more", "123 and more");
        assert_eq!(MIN_SECRET_LEN, 4);
    }

    #[test]
    fn a_log_is_redacted_in_place_but_never_through_a_link() {
        let redactor = Redactor::new([("HF_TOKEN", "hf_abcdefSECRET")]);
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = dir.path().join("server.log");
        std::fs::write(&log, "token hf_abcdefSECRET\n").expect("a log");
        redactor.redact_log(&log).expect("redacted");
        assert_eq!(std::fs::read_to_string(&log).expect("read"), "token [redacted HF_TOKEN]\n");
        let host = dir.path().join("host-file");
        std::fs::write(&host, "hf_abcdefSECRET").expect("a host file");
        let link = dir.path().join("link.log");
        std::os::unix::fs::symlink(&host, &link).expect("a link");
        redactor.redact_log(&link).expect("left alone");
        assert_eq!(std::fs::read_to_string(&host).expect("read"), "hf_abcdefSECRET");
        assert!(std::fs::symlink_metadata(&link).expect("still there").is_symlink());
    }

    #[test]
    fn bytes_that_are_not_utf8_are_kept() {
        let redactor = Redactor::new([("HF_TOKEN", "hf_abcdefSECRET")]);
        let bytes = b"\xff hf_abcdefSECRET \xfe";
        assert_eq!(redactor.redact_bytes(bytes).as_ref(), b"\xff [redacted HF_TOKEN] \xfe");
    }
}
