//! Report: renders what prgate decided as text for people — the terminal table of a plan, the
//! Markdown of the PR comment, and (with the gate's verdict, later) the commit status line.
//!
//! Pure: plain data in, text out. No I/O, no GitHub: the binary posts what this crate writes.
//! Everything that came from a pull request is escaped by [`escape`] wherever it is shown.

pub mod escape;
pub mod plan;
pub mod verdict;
