//! The gate: turns a plan and the evidence from the GPU nodes into a verdict a reviewer can
//! trust — telling a real change from noise, and saying how sure it is.
//!
//! - [`config`]: every threshold, defaults in `gate/default-config.toml`;
//! - [`evidence`]: the wire format the runner writes, one record per finished step;
//! - [`job`]: the job plan, what a run must produce, and whether evidence accounts for it;
//! - [`events`]: the event stream's lines, a run's progress as it goes (`prgate run --events`);
//! - [`rules`] and [`title`]: the rules judged before any GPU work; [`base_side`]: what judges
//!   a PR, from its base side (the settings and the CODEOWNERS policy there), and its verdict;
//! - [`stats`]: the sequential test and the proportion comparisons;
//! - [`speed`]: one concurrency's decision, and the runner's "another pair?" question;
//! - [`accuracy`]: one benchmark's decision from its repeats, and the runner's "another
//!   repeat?" question;
//! - [`to_decide`]: what more samples would decide a test its cap left undecided;
//! - [`verdict`]: the checklist in the review guideline's order; [`pending`]: the checks of a
//!   final verdict that never reported;
//! - [`history`] and [`drift`]: the ledger of merged changes, and the cumulative drift guard
//!   over it (the chained change since a reference, its interval, the anchor run's check).
//!
//! The gate does no I/O: the binary reads files and hands it plain data.

pub mod accuracy;
pub mod base_side;
pub mod codeowners;
pub mod config;
pub mod drift;
pub mod events;
pub mod evidence;
pub mod history;
pub mod job;
pub mod pending;
pub mod rules;
pub mod simulate;
pub mod speed;
pub mod stats;
pub mod title;
pub mod to_decide;
pub mod verdict;

pub use base_side::BaseSide;
pub use config::GateConfig;
pub use evidence::Evidence;
pub use job::JobPlan;
pub use verdict::{Completion, Headline, JudgeRequest, State, Verdict, judge, judge_with};
