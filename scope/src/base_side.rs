//! Reading files of the base side by commit, for the steps after the plan: the gate's settings
//! and policy must come from the same commit as the manifest that made the plan; and which of
//! the files that judge a PR moved on the base branch since the PR branched from it.

use std::path::Path;

use git2::{Oid, Repository, Tree};

use crate::git::ScopeError;
use crate::manifest::{MANIFEST_PATH, Manifest};

/// The text of `path` at `commit` in the repository around `repo`; `None` when the commit has
/// no such file.
pub fn read_text_at(repo: &Path, commit: &str, path: &str) -> Result<Option<String>, ScopeError> {
    let repository = crate::git::open(repo)?;
    let tree = tree_at(&repository, repo, commit, "the plan's manifest commit")?;
    crate::git::text_in_tree(&repository, &tree, path, commit)
}

/// Which of `paths` differ between the commits `from` and `to` (a file at one of them only
/// differs too), in `paths`' order: what moved on the base branch since a PR branched from it
/// (`from` its merge-base, `to` the branch's tip). Compared by git's object ids.
pub fn differing_between(
    repo: &Path,
    (from, to): (&str, &str),
    paths: &[String],
) -> Result<Vec<String>, ScopeError> {
    let repository = crate::git::open(repo)?;
    let which = "the plan's base side";
    let before = tree_at(&repository, repo, from, which)?;
    let after = tree_at(&repository, repo, to, which)?;
    let object = |tree: &Tree<'_>, path: &str| tree.get_path(Path::new(path)).ok().map(|e| e.id());
    Ok(paths.iter().filter(|path| object(&before, path) != object(&after, path)).cloned().collect())
}

/// The tree of `commit` in `repository` (the one around `repo`, as errors name it), which is
/// `what` (an error says so).
fn tree_at<'repo>(
    repository: &'repo Repository,
    repo: &Path,
    commit: &str,
    what: &'static str,
) -> Result<Tree<'repo>, ScopeError> {
    let unknown = || ScopeError::UnknownRef {
        option: what,
        reference: commit.to_owned(),
        repo: repo.to_path_buf(),
        hint: "\nhint: run this in the repository the plan was made in, or name it with --repo"
            .to_owned(),
    };
    let oid = Oid::from_str(commit).map_err(|_| unknown())?;
    repository.find_commit(oid).and_then(|commit| commit.tree()).map_err(|_| unknown())
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
