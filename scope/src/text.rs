//! Text as prgate's messages show it: a long value cut after a number of characters
//! ([`clip`]), and an error with every cause that led to it ([`chain`]).
//!
//! Scope is the crate that the gate, the report and the runner all depend on, so these rules
//! are written here once. What a message says, and where it goes, is each caller's.

use std::borrow::Cow;

/// `text` cut after its first `max_chars` characters (not bytes) with `…` appended; a text of
/// at most `max_chars` characters comes back whole, borrowed. The result is at most
/// `max_chars + 1` characters, and never splits a character.
pub fn clip(text: &str, max_chars: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => Cow::Owned(format!("{}…", &text[..end])),
        None => Cow::Borrowed(text),
    }
}

/// `error` and each of its sources, joined by `: `, as `anyhow` prints a chain with `{:#}`: for
/// an error whose message leaves its cause to [`std::error::Error::source`].
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let causes = std::iter::successors(Some(error), |error| error.source());
    causes.map(ToString::to_string).collect::<Vec<_>>().join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_cut_after_its_characters() {
        let table: [(&str, usize, &str); 6] = [
            ("", 0, ""),
            ("abc", 3, "abc"),
            ("abcd", 3, "abc…"),
            ("abc", 0, "…"),
            ("héllo wörld", 5, "héllo…"),
            ("日本語のテキスト", 3, "日本語…"),
        ];
        for (text, max_chars, expect) in table {
            assert_eq!(clip(text, max_chars), expect, "{text:?} at {max_chars}");
        }
        assert!(matches!(clip("short", 80), Cow::Borrowed("short")));
    }

    #[test]
    fn a_chain_names_every_cause_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("reading repo/x")]
        struct Reading {
            source: std::io::Error,
        }
        let error = Reading { source: std::io::Error::other("gone") };
        assert_eq!(chain(&error), "reading repo/x: gone");
        assert_eq!(chain(&std::io::Error::other("alone")), "alone");
    }

    proptest::proptest! {
        #[test]
        fn a_clipped_text_is_a_prefix_of_at_most_one_more_character(
            text in "\\PC{0,40}",
            max_chars in 0usize..50,
        ) {
            let clipped = clip(&text, max_chars);
            let length = text.chars().count();
            if length <= max_chars {
                proptest::prop_assert_eq!(clipped.as_ref(), text.as_str());
            } else {
                proptest::prop_assert_eq!(clipped.chars().count(), max_chars + 1);
                let kept = clipped.strip_suffix('…').expect("a cut text ends with …");
                proptest::prop_assert!(text.starts_with(kept), "{:?} of {:?}", kept, text);
                proptest::prop_assert_eq!(kept.chars().count(), max_chars);
            }
        }
    }
}
