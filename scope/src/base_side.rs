//! Reading files of the base side by commit, for the steps after the plan: the gate's settings
//! and policy must come from the same commit as the manifest that made the plan.

use std::path::Path;

use git2::Oid;

use crate::git::ScopeError;
use crate::manifest::{MANIFEST_PATH, Manifest};

/// The text of `path` at `commit` in the repository around `repo`; `None` when the commit has
/// no such file.
pub fn read_text_at(repo: &Path, commit: &str, path: &str) -> Result<Option<String>, ScopeError> {
    let repository = crate::git::open(repo)?;
    let unknown = || ScopeError::UnknownRef {
        option: "the plan's manifest commit",
        reference: commit.to_owned(),
        repo: repo.to_path_buf(),
        hint: "\nhint: run this in the repository the plan was made in, or name it with --repo"
            .to_owned(),
    };
    let oid = Oid::from_str(commit).map_err(|_| unknown())?;
    let tree =
        repository.find_commit(oid).and_then(|commit| commit.tree()).map_err(|_| unknown())?;
    crate::git::text_in_tree(&repository, &tree, path, commit)
}

/// The manifest at `commit`, as the plan read it.
pub fn read_manifest_at(repo: &Path, commit: &str) -> Result<Manifest, ScopeError> {
    let short = crate::git::short_sha(commit);
    let side = format!("{short} (the plan's base side)");
    let text =
        read_text_at(repo, commit, MANIFEST_PATH)?.ok_or_else(|| ScopeError::ManifestMissing {
            side: side.clone(),
            hint: "the plan was made in another repository or history; name that one with --repo"
                .to_owned(),
        })?;
    Ok(Manifest::parse(&text, &format!("{MANIFEST_PATH} at {side}"))?)
}
