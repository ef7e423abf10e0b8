//! Report: renders what prgate decided as text for people — the terminal table of a plan and
//! of a verdict, the PR comment and the full report, the commit status line, the job summary
//! and the annotations of a GitHub Actions run.
//!
//! Pure: plain data in, text out. No I/O, no GitHub: the binary posts what this crate writes.
//! Everything that came from a pull request is escaped by [`escape`] wherever it is shown.
//!
//! - [`plan`]: a plan for a terminal and as Markdown, and all `prgate plan` prints
//!   ([`plan::PlanOutput`]: the plan, its rules and estimate, in JSON the wire format too);
//! - [`verdict`]: a verdict for a terminal;
//! - [`headline`]: a PR's scope, result and what decided it in a few lines (the demo's summary);
//! - [`comment`]: the PR comment (tera template `templates/comment.md.tera`) and the full
//!   report;
//! - [`estimate`]: the estimate of `prgate plan --estimate` as tables and in words;
//! - [`progress`]: where a run is, check by check, for the comment's table;
//! - [`status`]: the commit status;
//! - [`summary`]: the job summary and the annotations;
//! - [`check_run`]: a check run: its conclusion (fail closed), summary and annotations,
//!   placed on the PR's changed files;
//! - [`not_started`]: the comment and the `error` status when a run did not start;
//! - [`gpu_hours`]: the GPU time a run measured and its estimate, by model and phase;
//! - [`rerun`]: what a re-run took over from an earlier run;
//! - [`settings`]: the gate's settings in words, above a simulation's tables and on the
//!   history page;
//! - [`history`]: the drift guard's history page (HTML and Chart.js), the alarm in the PR
//!   comment and the scheduled check's report;
//! - [`anchor`]: an anchor run's check of a chain, in words.

pub mod anchor;
pub mod check_run;
pub mod comment;
pub mod escape;
pub mod estimate;
pub mod gpu_hours;
pub mod headline;
pub mod history;
pub mod not_started;
pub mod plan;
pub mod progress;
pub mod rerun;
pub mod settings;
pub mod status;
pub mod summary;
pub mod verdict;

#[cfg(test)]
mod fixture;
