//! A run's id, which names its containers (`prgate run --isolation container`): the PR
//! commit's first 12 digits and a hash of the results directory, so that a resumed run (same
//! directory) finds a killed attempt's containers, and two runs of one commit into two
//! directories do not share them. The containers themselves are the sandbox's
//! ([`crate::container`]).

use std::path::{Path, PathBuf};

use crate::container::{ContainerError, RunId};
use crate::key::Key;

/// Why a run's id could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RunIdError {
    /// The results directory cannot be made absolute (the current directory is gone).
    #[error("the results directory {}", path.display())]
    Results {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The id is not one a container's name can start with.
    #[error(transparent)]
    Id(#[from] ContainerError),
}

/// The id of the run of `pr_commit` into `results`.
pub fn run_id(pr_commit: &str, results: &Path) -> Result<RunId, RunIdError> {
    let absolute = std::path::absolute(results)
        .map_err(|source| RunIdError::Results { path: results.to_path_buf(), source })?;
    let key = Key::of(absolute.as_os_str().as_encoded_bytes());
    let sha: String = pr_commit.chars().take(12).collect();
    Ok(RunId::new(&format!("{sha}-{}", key.short()))?)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn a_run_is_named_by_its_commit_and_its_results_directory() {
        let commit = "0123456789abcdef0123456789abcdef01234567";
        let id = |results: &str| super::run_id(commit, Path::new(results)).expect("an id");
        assert_eq!(id("/results/a"), id("/results/a"), "a resumed run finds its containers");
        assert_ne!(id("/results/a"), id("/results/b"), "two directories, two runs");
        let first = id("/results/a");
        assert!(first.as_str().starts_with("0123456789ab-"), "{}", first.as_str());
    }
}
