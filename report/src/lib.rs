//! Report: renders what prgate decided as text for people — the terminal table of a plan and
//! of a verdict, the PR comment and the full report, the commit status line, the job summary
//! and the annotations of a GitHub Actions run.
//!
//! Pure: plain data in, text out. No I/O, no GitHub: the binary posts what this crate writes.
//! Everything that came from a pull request is escaped by [`escape`] wherever it is shown.
//!
//! - [`plan`]: a plan for a terminal and as Markdown;
//! - [`verdict`]: a verdict for a terminal;
//! - [`comment`]: the PR comment (tera template `templates/comment.md.tera`) and the full
//!   report;
//! - [`estimate`]: the estimate of `prgate plan --estimate` as tables and in words;
//! - [`status`]: the commit status;
//! - [`summary`]: the job summary and the annotations;
//! - [`gpu_hours`]: the GPU time a run measured and its estimate, by model and phase;
//! - [`rerun`]: what a re-run took over from an earlier run;
//! - [`history`]: the drift guard's history page (HTML and Chart.js), the alarm in the PR
//!   comment and the scheduled check's report.

pub mod comment;
pub mod escape;
pub mod estimate;
pub mod gpu_hours;
pub mod history;
pub mod plan;
pub mod rerun;
pub mod status;
pub mod summary;
pub mod verdict;

#[cfg(test)]
mod fixture;
