//! Redacting the node's secret values from everything prgate writes: evidence records, the
//! event stream, the comment, the job summary and the report.
//!
//! The values are the runner's own: every non-empty `PRGATE_SECRET_<NAME>` of its environment
//! (the one place a node keeps a secret's value, `docs/node-profile.md`), read once. A value is
//! replaced by `[redacted NAME]` wherever it appears in one of its forms ([`forms`]): as
//! written; as JSON writes it inside a string; in hex (lower and upper case); URL-encoded
//! (percent-encoding of the bytes outside RFC 3986's unreserved set, and of every byte, each in
//! lower and upper case hex); and in base64, standard and URL-safe, at each of the three
//! alignments the value can have inside a longer encoded text (`printenv | base64` puts it
//! wherever it falls). For base64 the form is the run of characters that only the value's own
//! bits decide, so that it matches whatever comes before and after; the one or two characters
//! at its ends, which mix in a neighbour's bits, stay (at most 10 of the value's bits).
//! No PR-named command receives a secret (`docs/container.md`), so a value should never reach
//! prgate's outputs in the first place; this is the second wall, for a value that reaches them
//! anyway (a guessed token, a trusted fetch's error message).
//!
//! What it does not do: recognise a value split across lines, or encoded some other way
//! (gzip, a cipher, every other character). Values shorter than [`MIN_SECRET_LEN`] bytes are
//! not redacted: they would turn ordinary text into noise, and a secret that short protects
//! nothing; an encoded form shorter than [`MIN_ENCODED_LEN`] characters is not either (the
//! base64 runs of a 4-byte value are 4 or 5 characters, which ordinary words contain).

use std::borrow::Cow;
use std::path::Path;
use std::sync::OnceLock;

use prgate_recipe::node::SECRET_ENV_PREFIX;

/// The shortest value redacted: 4 bytes.
pub const MIN_SECRET_LEN: usize = 4;

/// The shortest encoded form (hex, URL-encoded, base64) redacted: 8 characters. Shorter runs
/// of the base64 or hex alphabets are in ordinary text (words, short hashes); 8 characters of
/// base64 (48 bits) are not, by chance, in a log of a few GiB.
pub const MIN_ENCODED_LEN: usize = 8;

/// The secret values to redact, each with its secret's name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// (a form of a value, its replacement), longest form first so that a form that contains
    /// another is replaced whole.
    secrets: Vec<(String, String)>,
}

impl Redactor {
    /// A redactor for `secrets`: (name, value) pairs. Empty and short values are left out.
    pub fn new<'a>(secrets: impl IntoIterator<Item = (&'a str, &'a str)>) -> Redactor {
        let mut list: Vec<(String, String)> = secrets
            .into_iter()
            .filter(|(_, value)| value.len() >= MIN_SECRET_LEN)
            .flat_map(|(name, value)| {
                let replacement = format!("[redacted {name}]");
                forms(value).into_iter().map(move |form| (form, replacement.clone()))
            })
            .collect();
        list.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.cmp(b)));
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
        for (form, replacement) in &self.secrets {
            if text.contains(form.as_str()) {
                text = Cow::Owned(text.replace(form.as_str(), replacement));
            }
        }
        text
    }

    /// `bytes` (UTF-8 or not) with every secret value replaced; the bytes that are not part of
    /// a value are kept as they are.
    pub fn redact_bytes<'b>(&self, bytes: &'b [u8]) -> Cow<'b, [u8]> {
        let mut bytes = Cow::Borrowed(bytes);
        for (form, replacement) in &self.secrets {
            if let Some(replaced) = replace_bytes(&bytes, form.as_bytes(), replacement.as_bytes()) {
                bytes = Cow::Owned(replaced);
            }
        }
        bytes
    }
}

/// Every form of `value` that is redacted: as written, as JSON escapes it inside a string, and
/// its encoded forms of at least [`MIN_ENCODED_LEN`] characters (hex, URL-encoded, base64 at
/// each alignment; see the module's documentation). Without repeats.
pub fn forms(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    let quoted = serde_json::to_string(value).unwrap_or_default();
    let escaped = quoted.strip_prefix('"').and_then(|rest| rest.strip_suffix('"')).unwrap_or(value);
    let mut encoded = Vec::new();
    for digits in [LOWER_HEX, UPPER_HEX] {
        encoded.push(bytes.iter().map(|byte| hex_pair(*byte, digits)).collect::<String>());
        let percent = |byte: &u8| format!("%{}", hex_pair(*byte, digits));
        encoded.push(bytes.iter().map(percent).collect::<String>());
        encoded.push(
            bytes
                .iter()
                .map(|byte| {
                    if byte.is_ascii_alphanumeric() || b"-._~".contains(byte) {
                        char::from(*byte).to_string()
                    } else {
                        percent(byte)
                    }
                })
                .collect::<String>(),
        );
    }
    for alphabet in [BASE64_STANDARD, BASE64_URL_SAFE] {
        for offset in 0..3 {
            encoded.push(base64_run(bytes, offset, alphabet));
        }
    }
    let mut forms = vec![value.to_owned(), escaped.to_owned()];
    forms.extend(encoded.into_iter().filter(|form| form.len() >= MIN_ENCODED_LEN));
    let mut seen = std::collections::BTreeSet::new();
    forms.retain(|form| seen.insert(form.clone()));
    forms
}

const LOWER_HEX: &[u8; 16] = b"0123456789abcdef";
const UPPER_HEX: &[u8; 16] = b"0123456789ABCDEF";
const BASE64_STANDARD: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64_URL_SAFE: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn hex_pair(byte: u8, digits: &[u8; 16]) -> String {
    let high = char::from(digits[usize::from(byte >> 4)]);
    let low = char::from(digits[usize::from(byte & 0x0f)]);
    [high, low].iter().collect()
}

/// The base64 characters (in `alphabet`) that `value`'s bits alone decide when `value` starts
/// `offset` bytes (0 to 2) after a multiple of 3 in the encoded text: character `i` holds bits
/// `6i..6i+6`, and the value has bits `8*offset..8*(offset+len)`.
fn base64_run(value: &[u8], offset: usize, alphabet: &[u8; 64]) -> String {
    let bits = |index: usize| -> usize {
        // Bit `index` of the text: the value's, or 0 for the bytes before and after it.
        let byte = index / 8;
        match byte.checked_sub(offset).and_then(|at| value.get(at)) {
            Some(byte_value) => usize::from(byte_value >> (7 - index % 8) & 1),
            None => 0,
        }
    };
    let first = (8 * offset).div_ceil(6);
    let end = 8 * (offset + value.len()) / 6;
    (first..end)
        .map(|char_index| {
            let sextet = (0..6).fold(0, |acc, bit| acc << 1 | bits(6 * char_index + bit));
            char::from(alphabet[sextet])
        })
        .collect()
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

/// How much of a log [`redact_log`] reads at a time: 1 MiB. A log of any length is redacted
/// whole, one piece at a time, with what a secret's form could still need carried over (see
/// `Redactor::safe_cut`): a value that spans two pieces is redacted too.
pub const LOG_PIECE: usize = 1 << 20;

/// Redacts the runner's secret values from the log at `path` in place, once the command that
/// wrote it has ended: a log is written by the command itself (its standard output), so what a
/// command printed is redacted when it is done. Does nothing when the runner has no secret or
/// the log holds none; a log that is not a regular file of its folder is left alone (it is not
/// read either, `crate::untrusted`). The log is read in pieces of [`LOG_PIECE`] bytes and
/// rewritten atomically when a piece held a value.
pub fn redact_log(path: &Path) -> std::io::Result<()> {
    runner_redactor().redact_log(path)
}

impl Redactor {
    /// [`redact_log`] with this redactor.
    pub fn redact_log(&self, path: &Path) -> std::io::Result<()> {
        self.redact_log_in_pieces(path, LOG_PIECE)
    }

    /// [`Redactor::redact_log`], reading `piece` bytes at a time.
    pub fn redact_log_in_pieces(&self, path: &Path, piece: usize) -> std::io::Result<()> {
        use std::io::{Read as _, Write as _};
        if self.is_empty() {
            return Ok(());
        }
        let Ok(opened) = crate::untrusted::open_in_parent(path) else { return Ok(()) };
        let mut log = opened.file;
        let piece = piece.max(1);
        let mut buffer = Vec::with_capacity(piece + 2 * self.longest());
        let mut changed = false;
        crate::atomic::write_atomically_with(path, |out| {
            loop {
                let wanted = piece as u64;
                let read = (&mut log).take(wanted).read_to_end(&mut buffer)?;
                let at_end = (read as u64) < wanted;
                let cut = if at_end { buffer.len() } else { self.safe_cut(&buffer) };
                let redacted = self.redact_bytes(&buffer[..cut]);
                changed |= matches!(redacted, Cow::Owned(_));
                out.write_all(&redacted)?;
                drop(redacted);
                buffer.drain(..cut);
                if at_end {
                    return Ok(changed);
                }
            }
        })
        .map(|_replaced| ())
    }

    /// The longest form's length in bytes (0 when there is none).
    fn longest(&self) -> usize {
        self.secrets.first().map_or(0, |(form, _)| form.len())
    }

    /// Where `bytes`, the front of a longer text, may be cut so that redacting the two parts
    /// apart is redacting them together: before the last `longest - 1` bytes (a form that
    /// starts there may end in the next piece), and before any form that spans the cut. The
    /// cut moves back at most another `longest` bytes (a value repeated into itself, `aaaa…`,
    /// could move it back forever; its repeats are cut anyway).
    fn safe_cut(&self, bytes: &[u8]) -> usize {
        let longest = self.longest();
        let mut cut = bytes.len().saturating_sub(longest.saturating_sub(1));
        let floor = cut.saturating_sub(longest);
        'retreat: loop {
            for (form, _) in &self.secrets {
                let form = form.as_bytes();
                let from = cut.saturating_sub(form.len().saturating_sub(1)).max(floor);
                if let Some(start) = (from..cut).find(|start| bytes[*start..].starts_with(form)) {
                    cut = start;
                    continue 'retreat;
                }
            }
            return cut;
        }
    }
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
    fn encoded_forms_of_a_value_are_replaced() {
        // The value has bytes that URL encoding and base64's two alphabets treat differently.
        let token = [("HF_TOKEN", "hf_ab+/?cdefSECRET~")];
        let redacted = "[redacted HF_TOKEN]";
        // Hex, lower and upper case.
        check(&token, "68665f61622b2f3f636465665345435245547e", redacted);
        check(&token, "x=68665F61622B2F3F636465665345435245547E;", &format!("x={redacted};"));
        // URL-encoded: the reserved bytes only, in either case, or every byte.
        check(&token, "?t=hf_ab%2B%2F%3FcdefSECRET~&", &format!("?t={redacted}&"));
        check(&token, "?t=hf_ab%2b%2f%3fcdefSECRET~&", &format!("?t={redacted}&"));
        let every_byte = "%68%66%5F%61%62%2B%2F%3F%63%64%65%66%53%45%43%52%45%54%7E";
        check(&token, every_byte, redacted);
        check(&token, &every_byte.to_lowercase(), redacted);
        // Base64 of `<prefix>HF_TOKEN=<value>\n` (Python's base64 module): the value at each of
        // the three alignments, in the standard and the URL-safe alphabets.
        let cases = [
            ("SEZfVE9LRU49aGZfYWIrLz9jZGVmU0VDUkVUfgo=", "SEZfVE9LRU49", "go="),
            ("eEhGX1RPS0VOPWhmX2FiKy8/Y2RlZlNFQ1JFVH4K", "eEhGX1RPS0VOPW", "4K"),
            ("eEhGX1RPS0VOPWhmX2FiKy8_Y2RlZlNFQ1JFVH4K", "eEhGX1RPS0VOPW", "4K"),
            ("eHlIRl9UT0tFTj1oZl9hYisvP2NkZWZTRUNSRVR+Cg==", "eHlIRl9UT0tFTj1", "Cg=="),
            ("eHlIRl9UT0tFTj1oZl9hYisvP2NkZWZTRUNSRVR-Cg==", "eHlIRl9UT0tFTj1", "Cg=="),
        ];
        for (encoded, before, after) in cases {
            check(&token, encoded, &format!("{before}{redacted}{after}"));
        }
        // The value (its JSON form is the same), hex and URL-encoded in two cases, and base64
        // at three alignments in two alphabets, of which one alignment has no `+` or `/`.
        assert_eq!(forms(token[0].1).len(), 1 + 2 * 3 + 5);
    }

    #[test]
    fn a_short_value_has_no_short_encoded_forms() {
        // A 4-byte value: its hex (8 characters) and percent-encoded forms are redacted; its
        // base64 runs (4 or 5 characters) are not, so ordinary base64 and words stay.
        let pin = [("PIN", "Zk9v")];
        check(&pin, "5a6b3976", "[redacted PIN]");
        check(&pin, "%5A%6B%39%76", "[redacted PIN]");
        let forms = forms("Zk9v");
        assert!(forms.iter().all(|form| form == "Zk9v" || form.len() >= MIN_ENCODED_LEN));
        assert_eq!(forms.len(), 1 + 2 * 2, "{forms:?}");
        assert_eq!(MIN_ENCODED_LEN, 8);
        check(&pin, "Wms5dg== and Wms5 stay", "Wms5dg== and Wms5 stay");
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

    /// The log `text` once redacted `piece` bytes at a time.
    fn redacted_log(redactor: &Redactor, text: &[u8], piece: usize) -> Vec<u8> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = dir.path().join("server.log");
        std::fs::write(&log, text).expect("a log");
        redactor.redact_log_in_pieces(&log, piece).expect("redacted");
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("listed").collect();
        assert_eq!(left.len(), 1, "no temporary file is left: {left:?}");
        std::fs::read(&log).expect("read")
    }

    #[test]
    fn a_value_across_two_pieces_of_a_log_is_redacted() {
        let secrets = [("HF_TOKEN", "hf_abcdefSECRET"), ("OTHER", "SECRETother")];
        let redactor = Redactor::new(secrets);
        // The value at every offset around a piece's end, pieces of 16 bytes and of one byte.
        for piece in [1, 7, 16] {
            for at in 0..40 {
                let mut text = "x".repeat(at).into_bytes();
                text.extend_from_slice(b"hf_abcdefSECRET and SECRETother");
                text.extend_from_slice(&b"y".repeat(at % 5));
                let whole = redactor.redact_bytes(&text).into_owned();
                assert!(
                    String::from_utf8_lossy(&whole)
                        .contains("[redacted HF_TOKEN] and [redacted OTHER]")
                );
                assert_eq!(redacted_log(&redactor, &text, piece), whole, "at {at}, piece {piece}");
            }
        }
        // A log with no value is left as it is.
        assert_eq!(redacted_log(&redactor, b"nothing here", 4), b"nothing here");
    }

    #[test]
    fn a_value_across_the_first_megabyte_of_a_log_is_redacted() {
        let redactor = Redactor::new([("HF_TOKEN", "hf_abcdefSECRET")]);
        let mut text = vec![b'.'; (1 << 20) - 5];
        text.extend_from_slice(b"hf_abcdefSECRET\n");
        text.extend_from_slice(&vec![b'.'; 1 << 20]);
        text.extend_from_slice(b"end hf_abcdefSECRET\n");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = dir.path().join("server.log");
        std::fs::write(&log, &text).expect("a log");
        redactor.redact_log(&log).expect("redacted");
        let redacted = std::fs::read(&log).expect("read");
        let expect = redactor.redact_bytes(&text).into_owned();
        assert_eq!(redacted.len(), expect.len());
        assert!(redacted == expect, "the log is redacted as a whole would be");
        assert_eq!(
            &redacted[(1 << 20) - 5..(1 << 20) + 15],
            b"[redacted HF_TOKEN]\n",
            "the value that spans the first 1 MiB piece's end"
        );
        assert_eq!(LOG_PIECE, 1 << 20);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_kept() {
        let redactor = Redactor::new([("HF_TOKEN", "hf_abcdefSECRET")]);
        let bytes = b"\xff hf_abcdefSECRET \xfe";
        assert_eq!(redactor.redact_bytes(bytes).as_ref(), b"\xff [redacted HF_TOKEN] \xfe");
    }
}
