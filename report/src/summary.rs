//! What a run shows inside GitHub Actions: the job summary (Markdown for
//! `$GITHUB_STEP_SUMMARY`) and annotations (`::error::` and `::warning::` workflow commands).
//!
//! The job summary is the full report (see [`crate::comment`]) without the comment's marker,
//! shrunk only past GitHub's 1 MiB limit for a step's summary. Annotations name every item
//! that did not pass, encoded by GitHub's workflow-command rules so that no text can end the
//! command or start another. Writing them to the file and to stdout is the binary's business.

use prgate_gate::verdict::{State, Verdict};

use crate::comment::{CommentInput, Limit, RenderError, Target, render_within};
use crate::escape::{workflow_command_data, workflow_command_property};

/// The most bytes GitHub takes in one step's summary.
pub const JOB_SUMMARY_LIMIT: usize = 1_048_576;

/// The most annotations of one level GitHub shows for a step; past it, the last one counts the
/// rest.
pub const ANNOTATIONS_PER_LEVEL: usize = 10;

/// One workflow-command annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    pub level: AnnotationLevel,
    pub title: String,
    pub message: String,
}

/// The annotation commands prgate writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AnnotationLevel {
    Error,
    Warning,
    Notice,
}

impl AnnotationLevel {
    /// The level of an item in `state`: an error for a failure, a warning for a warning or an
    /// author-provided check, a notice for a pending one; `None` for an item that passed.
    pub fn of(state: State) -> Option<AnnotationLevel> {
        match state {
            State::Pass | State::NothingToCheck | State::NotJudged => None,
            State::Fail | State::Error => Some(AnnotationLevel::Error),
            State::Warn | State::AuthorProvided => Some(AnnotationLevel::Warning),
            State::Pending => Some(AnnotationLevel::Notice),
        }
    }

    /// The workflow command's name.
    pub fn as_str(self) -> &'static str {
        match self {
            AnnotationLevel::Error => "error",
            AnnotationLevel::Warning => "warning",
            AnnotationLevel::Notice => "notice",
        }
    }
}

impl Annotation {
    /// The line to print: `::error title=...::message`, title and message encoded.
    pub fn command(&self) -> String {
        format!(
            "::{} title={}::{}",
            self.level.as_str(),
            workflow_command_property(&self.title),
            workflow_command_data(&self.message)
        )
    }
}

/// Whether `summary` may be appended to a step's summary file that already holds `existing`
/// bytes: GitHub takes at most [`JOB_SUMMARY_LIMIT`] for the whole file, so a summary past it
/// is left out (the full report has it all).
pub fn fits_job_summary(existing: usize, summary: &str) -> bool {
    existing.saturating_add(summary.len()) <= JOB_SUMMARY_LIMIT
}

/// The job summary: the full report, at most [`JOB_SUMMARY_LIMIT`] bytes.
pub fn job_summary(input: &CommentInput<'_>) -> Result<String, RenderError> {
    render_within(
        input,
        &Target {
            marker: false,
            limit: Limit::Bytes(JOB_SUMMARY_LIMIT),
            limit_words: "GitHub's limit of 1 MiB for a job summary",
        },
    )
}

/// An annotation for every item that did not pass: an error for a failure, a warning for a
/// warning or an author-provided check, a notice for a pending one. At most
/// [`ANNOTATIONS_PER_LEVEL`] of each level, the last counting those left out.
pub fn annotations(verdict: &Verdict) -> Vec<Annotation> {
    let mut all: Vec<Annotation> = Vec::new();
    for section in &verdict.sections {
        for item in &section.items {
            let Some(level) = AnnotationLevel::of(item.state) else { continue };
            let who = item.model.as_deref().map(|model| format!("{model}: ")).unwrap_or_default();
            all.push(Annotation {
                level,
                title: format!("AMD PR test: {}", section.name.title()),
                message: format!("{who}{}: {}\nrule: {}", item.check, item.summary, item.rule),
            });
        }
    }
    let mut shown = Vec::new();
    for level in [AnnotationLevel::Error, AnnotationLevel::Warning, AnnotationLevel::Notice] {
        let of_level: Vec<Annotation> =
            all.iter().filter(|annotation| annotation.level == level).cloned().collect();
        if of_level.len() <= ANNOTATIONS_PER_LEVEL {
            shown.extend(of_level);
            continue;
        }
        let rest = of_level.len() - (ANNOTATIONS_PER_LEVEL - 1);
        shown.extend(of_level.into_iter().take(ANNOTATIONS_PER_LEVEL - 1));
        shown.push(Annotation {
            level,
            title: "AMD PR test".to_owned(),
            message: format!("and {rest} more: see the job summary"),
        });
    }
    shown
}

#[cfg(test)]
mod tests;
