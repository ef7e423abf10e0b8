//! Reading one file of a side: a regular file of a git tree (a symbolic link, a submodule or a
//! folder is none, and a link is never followed), as bytes, lossy text or UTF-8 text, or of
//! the working tree. The one rule of what counts as a file's content for everything scope
//! reads (the manifest, CODEOWNERS, `read_text_at`) and the estimate's `--worktree` reading.

use std::path::Path;

use git2::{Repository, Tree};

use super::{ScopeError, git_error};

/// The bytes of a regular file of a tree, or `None` when the tree has none at `path`: no entry,
/// or a symbolic link, a submodule or a folder there (a link's target is not a file's content,
/// and is never followed).
pub(super) fn file_in_tree(
    repo: &Repository,
    tree: &Tree<'_>,
    path: &str,
    side: &str,
) -> Result<Option<Vec<u8>>, ScopeError> {
    let Ok(entry) = tree.get_path(Path::new(path)) else { return Ok(None) };
    if !matches!(entry.filemode(), 0o100644 | 0o100755) {
        return Ok(None);
    }
    let blob = repo
        .find_blob(entry.id())
        .map_err(|source| git_error(format!("reading {path} at {side}"), source))?;
    Ok(Some(blob.content().to_vec()))
}

/// The text of a regular file of a tree (lossily decoded), or `None` when there is none there.
pub(super) fn tree_text(
    repo: &Repository,
    tree: &Tree<'_>,
    path: &str,
    side: &str,
) -> Result<Option<String>, ScopeError> {
    let bytes = file_in_tree(repo, tree, path, side)?;
    Ok(bytes.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
}

/// The text of a regular file of the working tree `root` (lossily decoded), or `None` when
/// there is none there (a symbolic link is none: it is never followed).
pub fn worktree_text(root: &Path, path: &str) -> Result<Option<String>, ScopeError> {
    let full = root.join(path);
    match std::fs::symlink_metadata(&full) {
        Ok(metadata) if metadata.is_file() => {}
        Ok(_) => return Ok(None),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ScopeError::Io { path: full, source }),
    }
    std::fs::read(&full)
        .map(|bytes| Some(String::from_utf8_lossy(&bytes).into_owned()))
        .map_err(|source| ScopeError::Io { path: full, source })
}

/// The text of a regular file of a tree ([`file_in_tree`]), which must be UTF-8; `None` when
/// there is none there.
pub(crate) fn text_in_tree(
    repo: &Repository,
    tree: &Tree<'_>,
    path: &str,
    side: &str,
) -> Result<Option<String>, ScopeError> {
    let Some(bytes) = file_in_tree(repo, tree, path, side)? else { return Ok(None) };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| ScopeError::NotText { file: format!("{path} at {side}") })
}
