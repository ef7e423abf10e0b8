//! A gated benchmark's hub dataset as a recipe names it: `hub-dataset = "org/name@<commit>"`,
//! pinned to a commit, and the snapshot folder it has below a hub cache.
//!
//! A name only: fetching it with the node's token and mounting it read-only are the runner's
//! (`prgate_runner::accuracy::gated`, `docs/container.md`).

use std::fmt;
use std::path::{Path, PathBuf};

/// A dataset on the hub at a pinned commit: `org/name@<40 hex digits>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HubDataset {
    /// `org/name`.
    pub repo: String,
    /// The commit, 40 lowercase hex digits.
    pub revision: String,
}

/// Why a recipe's `hub-dataset` is refused: it is not `org/name@<commit>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("must be org/name@<commit>, the commit as 40 hex digits")]
pub struct NotAHubDataset;

impl HubDataset {
    /// Reads `org/name@<commit>`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<HubDataset, NotAHubDataset> {
        let (repo, revision) = text.split_once('@').ok_or(NotAHubDataset)?;
        let part = |part: &str| {
            !part.is_empty()
                && part.len() <= 96
                && !part.starts_with(['.', '-'])
                && part.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        };
        let plain_repo = repo.split_once('/').is_some_and(|(org, name)| part(org) && part(name));
        let commit = revision.len() == 40
            && revision.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        if plain_repo && commit {
            Ok(HubDataset { repo: repo.to_owned(), revision: revision.to_owned() })
        } else {
            Err(NotAHubDataset)
        }
    }

    /// The snapshot folder below a hub cache: `datasets--org--name/snapshots/<commit>`.
    pub fn snapshot(&self) -> PathBuf {
        let folder = format!("datasets--{}", self.repo.replace('/', "--"));
        Path::new(&folder).join("snapshots").join(&self.revision)
    }
}

impl fmt::Display for HubDataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.repo, self.revision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REVISION: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn hub_datasets_are_pinned_plain_names() {
        let good = HubDataset::parse(&format!("openai/gsm8k@{REVISION}")).expect("good");
        assert_eq!(good.to_string(), format!("openai/gsm8k@{REVISION}"));
        for bad in [
            "openai/gsm8k",
            "openai/gsm8k@main",
            "openai@0123",
            "../x@0123456789abcdef0123456789abcdef01234567",
            "a/b/c@0123456789abcdef0123456789abcdef01234567",
            "a/.hidden@0123456789abcdef0123456789abcdef01234567",
            "a/b@0123456789ABCDEF0123456789abcdef01234567",
        ] {
            assert!(HubDataset::parse(bad).is_err(), "{bad}");
        }
    }
}
