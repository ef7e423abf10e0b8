//! Scope: from a pull request's changed files and the repository's manifest, decide what every
//! model runs — the full tier, the smoke tier or nothing — and whether the common checks run,
//! with the changed paths and patterns that decided it.
//!
//! - [`config_file`] is the one error shape of every config file ([`ConfigError`]);
//! - [`manifest`] parses `prgate.toml`, the repository's description of itself;
//! - [`pattern`] compiles its git-style globs and `{model}` patterns;
//! - [`change`] is a changed path, and the file-list format;
//! - [`codeowners`] parses CODEOWNERS files and computes the facts about a PR's edit of one;
//! - [`mod@plan`] is the plan's wire format and the pure decision ([`plan::select`]);
//! - [`queue`] judges a merge queue's commit: the PR's result holds, or what runs again;
//! - [`mod@git`] reads refs, trees, the base-side manifest and the diff, and whether a
//!   run's commits are fetched: scope's only I/O;
//! - [`text`] is how every crate above scope cuts a long value in a message, and shows an
//!   error with its causes.
//!
//! Scope reads git and nothing else: no network, no processes. Rendering a plan for people is
//! the report crate's work; running it is the runner's.

pub mod base_side;
pub mod change;
pub mod codeowners;
pub mod config_file;
pub mod git;
pub mod manifest;
pub mod pattern;
pub mod plan;
pub mod queue;
pub mod text;

pub use change::{Change, ChangeStatus};
pub use config_file::{ConfigError, ConfigErrorKind};
pub use git::{FileList, PlanRequest, ScopeError, plan};
pub use manifest::{Manifest, ManifestError};
pub use plan::{Plan, Tier};
