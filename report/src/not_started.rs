//! What the PR is told when a run did not start after its label was removed: one comment of its
//! own (found again by its marker, edited in place; never the verdict's comment, which it would
//! replace) and, when starting failed, the `error` status on the expected SHA. The texts: a
//! refusal ("prgate did not start a run: ..."), a failure with how to retry, and the status's
//! description. Pure: words in, text out; every part from a PR or GitHub made inert.
//!
//! What it leaves to others: deciding to refuse (`prgate_github::trigger`), and posting (the
//! binary's `trigger`).

use crate::escape::{MarkdownPlace, markdown_text, terminal};
use crate::status::{DEFAULT_CONTEXT, Status, StatusState, fit_description};

/// The hidden marker of the "not started" comment.
pub const MARKER: &str = "<!-- prgate:amd-pr-test:not-started -->";

/// What the PR is told when a run is refused (`reason`).
pub fn refused(reason: &str) -> String {
    format!("prgate did not start a run: {reason}.")
}

/// What the PR is told when starting the run on `sha` failed (`problem`) after the label
/// `label` was removed, with how to retry.
pub fn failed(sha: &str, problem: &str, label: &str) -> String {
    format!(
        "prgate could not start the run on {sha}: {problem}\n\nThe `{label}` label was removed: add it again (or dispatch the workflow) to retry."
    )
}

/// The comment that says `text`: the marker, then the text as a paragraph.
pub fn comment(text: &str) -> String {
    format!("{MARKER}\n{}\n", markdown_text(text, MarkdownPlace::Paragraph))
}

/// The `error` status that says `text` on the expected SHA.
pub fn error_status(text: &str) -> Status {
    Status {
        state: StatusState::Error,
        context: DEFAULT_CONTEXT.to_owned(),
        description: fit_description(&terminal(&format!("prgate could not start: {text}"))),
        target_url: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_comment_is_marked_and_its_text_inert() {
        let text = refused("<b>eve</b> has the read role");
        assert_eq!(text, "prgate did not start a run: <b>eve</b> has the read role.");
        assert_eq!(
            comment(&text),
            format!(
                "{MARKER}\nprgate did not start a run: &lt;b&gt;eve&lt;/b&gt; has the read role.\n"
            )
        );
    }

    #[test]
    fn a_failure_is_an_error_status_that_fits_and_says_how_to_retry() {
        let text = failed("abc", &"x".repeat(500), "run-ci");
        assert!(text.ends_with(
            "\n\nThe `run-ci` label was removed: add it again (or dispatch the workflow) to retry."
        ));
        let status = error_status(&text);
        assert_eq!((status.state, status.context.as_str()), (StatusState::Error, DEFAULT_CONTEXT));
        assert!(
            status
                .description
                .starts_with("prgate could not start: prgate could not start the run on abc: x")
        );
        assert!(status.description.chars().count() <= crate::status::DESCRIPTION_LIMIT);
        assert!(!status.description.contains('\n'), "{}", status.description);
    }
}
