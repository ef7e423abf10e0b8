//! The pin: what a started run is pinned to (the PR, its head SHA, its base, who started it),
//! written as `trigger.json` beside the PR's files (`files.txt`) when a run starts, and read by
//! every later stage: the run only ever reports on the pinned SHA. Deciding the pin is
//! [`crate::trigger`]'s; this is its file format.

use std::path::Path;

use crate::{GitHubError, Result};
use serde::{Deserialize, Serialize};

/// What a started run is pinned to: written as `trigger.json`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Pinned {
    pub number: u64,
    pub sha: String,
    pub title: String,
    pub base_ref: String,
    pub base_sha: String,
    pub triggered_by: String,
    pub files_truncated: bool,
    /// A merge queue's run: `sha` is the queue's merge commit, `base_sha` the queue's base,
    /// and this the PR's own head and what the queue adds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_group: Option<QueuePin>,
    /// The PR's labels when it was pinned (a maintainer's `accept-narrowing`, say), less any
    /// the trigger did not let count ([`Pinned::drop_label`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// What the trigger says of the pin for the plan's warnings: a label it did not let count,
    /// and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Pinned {
    /// Whether the PR had the label `name` when it was pinned (GitHub's labels are the same
    /// label whatever their case).
    pub fn has_label(&self, name: &str) -> bool {
        self.labels.iter().any(|label| label.eq_ignore_ascii_case(name))
    }

    /// The PR's own head: the pinned SHA, or a merge queue's PR head (the queue pins its merge
    /// commit). What a maintainer saw and accepted is this commit.
    pub fn pr_head(&self) -> &str {
        self.merge_group.as_ref().map_or(&self.sha, |queue| &queue.pr_head)
    }

    /// Whether `base_sha` is the base the run must plan against, as it is: a merge queue's (the
    /// queue's own base). A PR's `base.sha` is the base branch as of the PR's last push, which
    /// GitHub does not move when the branch does; the checkout's branch may be newer
    /// (`prgate_scope::git::newest_base`).
    pub fn base_is_exact(&self) -> bool {
        self.merge_group.is_some()
    }

    /// Takes the label `name` off the pinned labels, saying `why` in [`Pinned::notes`].
    pub fn drop_label(&mut self, name: &str, why: String) {
        self.labels.retain(|label| !label.eq_ignore_ascii_case(name));
        self.notes.push(why);
    }
}

/// What a merge queue's pin adds to [`Pinned`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePin {
    /// The PR's own head, whose result the queue may keep.
    pub pr_head: String,
    /// The queue's branch, `refs/heads/gh-readonly-queue/<base>/pr-<N>-<head>`.
    pub head_ref: String,
    /// Why what runs runs, once judged (the plan's warnings show it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The pin's file name in the folder [`write_pin`] writes (`prgate trigger --out`, `prgate ci`'s
/// state folder), which the later stages read.
pub const PIN_FILE: &str = "trigger.json";

/// Writes the pin (`trigger.json`) and the PR's files (`files.txt`) into `dir`.
pub fn write_pin(dir: &Path, pinned: &Pinned, files: &[String]) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|error| GitHubError::failed(format!("creating {}", dir.display()), error))?;
    let mut list = files.join("\n");
    list.push('\n');
    std::fs::write(dir.join("files.txt"), list)
        .map_err(|error| GitHubError::failed("writing files.txt", error))?;
    let json = serde_json::to_string_pretty(pinned)
        .map_err(|error| GitHubError::failed("writing trigger.json", error))?;
    std::fs::write(dir.join(PIN_FILE), json + "\n")
        .map_err(|error| GitHubError::failed("writing trigger.json", error))
}
