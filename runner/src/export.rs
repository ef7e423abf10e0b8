//! Exporting a commit's tree as a clean directory: the files of the pinned commit, with their
//! executable bits and symbolic links, and no `.git` — what the runner installs and tests, for
//! base and for the PR alike.
//!
//! A tree comes from git's objects, not from a checkout, so nothing in the working copy (an
//! untracked file, a local edit) can leak into a run. Paths are checked: a tree entry that
//! would escape the destination (`..`, an absolute path) is refused, and a symbolic link is
//! written as a link, never followed. Submodules are not fetched; they are listed.

use std::path::{Component, Path, PathBuf};

use git2::{ObjectType, Oid, Repository, Tree};

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exported {
    pub files: usize,
    pub links: usize,
    /// Submodules left out, by path.
    pub submodules: Vec<String>,
}

/// Why a tree could not be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{repo}: not a git repository")]
    Repository { repo: PathBuf, source: git2::Error },
    #[error("commit {commit}: not in {repo}")]
    Commit { commit: String, repo: PathBuf },
    #[error("{dest}: the destination exists and is not empty")]
    NotEmpty { dest: PathBuf },
    #[error("a tree entry '{path}' would be written outside the destination")]
    Escape { path: String },
    #[error("reading {what}: {source}")]
    Git { what: String, source: git2::Error },
    #[error("writing {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// Writes the tree of `commit` (a full or abbreviated SHA, or any revision) into `dest`, which
/// must be absent or empty.
pub fn export_tree(repo: &Path, commit: &str, dest: &Path) -> Result<Exported, ExportError> {
    let repository = Repository::discover(repo)
        .map_err(|source| ExportError::Repository { repo: repo.to_path_buf(), source })?;
    let unknown = || ExportError::Commit { commit: commit.to_owned(), repo: repo.to_path_buf() };
    let commit = repository
        .revparse_single(commit)
        .and_then(|object| object.peel_to_commit())
        .map_err(|_| unknown())?;
    let tree =
        commit.tree().map_err(|source| git(format!("the tree of {}", commit.id()), source))?;
    if dest.read_dir().map(|mut entries| entries.next().is_some()).unwrap_or(false) {
        return Err(ExportError::NotEmpty { dest: dest.to_path_buf() });
    }
    create_dir(dest)?;
    let mut exported = Exported::default();
    write_tree(&repository, &tree, dest, "", &mut exported)?;
    Ok(exported)
}

fn write_tree(
    repository: &Repository,
    tree: &Tree<'_>,
    dest: &Path,
    prefix: &str,
    exported: &mut Exported,
) -> Result<(), ExportError> {
    for entry in tree.iter() {
        let name = String::from_utf8_lossy(entry.name_bytes()).into_owned();
        let relative = format!("{prefix}{name}");
        let target = dest.join(checked(&relative)?);
        match entry.kind() {
            Some(ObjectType::Tree) => {
                create_dir(&target)?;
                let subtree = repository
                    .find_tree(entry.id())
                    .map_err(|source| git(format!("the tree {relative}"), source))?;
                write_tree(repository, &subtree, dest, &format!("{relative}/"), exported)?;
            }
            Some(ObjectType::Blob) => {
                let content = blob(repository, entry.id(), &relative)?;
                // 0o120000 is a symbolic link; 0o100755 an executable file.
                match entry.filemode() {
                    0o120_000 => {
                        let link = String::from_utf8_lossy(&content).into_owned();
                        std::os::unix::fs::symlink(&link, &target)
                            .map_err(|source| io(&target, source))?;
                        exported.links += 1;
                    }
                    mode => {
                        std::fs::write(&target, &content).map_err(|source| io(&target, source))?;
                        if mode == 0o100_755 {
                            use std::os::unix::fs::PermissionsExt as _;
                            std::fs::set_permissions(
                                &target,
                                std::fs::Permissions::from_mode(0o755),
                            )
                            .map_err(|source| io(&target, source))?;
                        }
                        exported.files += 1;
                    }
                }
            }
            _ => exported.submodules.push(relative),
        }
    }
    Ok(())
}

/// A tree path as a relative path that stays inside the destination.
fn checked(relative: &str) -> Result<PathBuf, ExportError> {
    let path = Path::new(relative);
    let plain = path.components().all(|component| matches!(component, Component::Normal(_)));
    if plain && !relative.is_empty() {
        Ok(path.to_path_buf())
    } else {
        Err(ExportError::Escape { path: relative.to_owned() })
    }
}

fn blob(repository: &Repository, id: Oid, path: &str) -> Result<Vec<u8>, ExportError> {
    repository
        .find_blob(id)
        .map(|blob| blob.content().to_vec())
        .map_err(|source| git(format!("the file {path}"), source))
}

fn create_dir(path: &Path) -> Result<(), ExportError> {
    std::fs::create_dir_all(path).map_err(|source| io(path, source))
}

fn git(what: String, source: git2::Error) -> ExportError {
    ExportError::Git { what, source }
}

fn io(path: &Path, source: std::io::Error) -> ExportError {
    ExportError::Io { path: path.to_path_buf(), source }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    }

    #[test]
    fn a_commit_is_exported_with_modes_and_links_and_nothing_of_the_checkout() {
        let repo = tempfile::tempdir().expect("a temporary directory");
        let root = repo.path();
        git(root, &["init", "-q", "-b", "main"]);
        std::fs::create_dir_all(root.join("pkg/models/kimi")).expect("folders");
        std::fs::write(root.join("pkg/models/kimi/layer.py"), "x = 1\n").expect("write");
        std::fs::write(root.join("run.sh"), "#!/bin/sh\necho hi\n").expect("write");
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
        }
        std::os::unix::fs::symlink("pkg/models/kimi/layer.py", root.join("link.py"))
            .expect("a link");
        git(root, &["add", "-A"]);
        git(root, &["commit", "-q", "-m", "base"]);
        // What is only in the checkout must not travel.
        std::fs::write(root.join("untracked.txt"), "secret\n").expect("write");
        std::fs::write(root.join("pkg/models/kimi/layer.py"), "x = 2  # local edit\n")
            .expect("write");

        let out = tempfile::tempdir().expect("a temporary directory");
        let dest = out.path().join("tree");
        let exported = export_tree(root, "HEAD", &dest).expect("export");
        assert_eq!(exported, Exported { files: 2, links: 1, submodules: vec![] });
        assert_eq!(
            std::fs::read_to_string(dest.join("pkg/models/kimi/layer.py")).expect("read"),
            "x = 1\n"
        );
        assert!(!dest.join("untracked.txt").exists());
        assert!(!dest.join(".git").exists());
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dest.join("run.sh")).expect("stat").permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "executable kept");
        assert_eq!(
            std::fs::read_link(dest.join("link.py")).expect("a link"),
            Path::new("pkg/models/kimi/layer.py")
        );

        assert!(matches!(export_tree(root, "HEAD", &dest), Err(ExportError::NotEmpty { .. })));
        assert!(matches!(
            export_tree(root, "no-such-ref", &out.path().join("x")),
            Err(ExportError::Commit { .. })
        ));
        assert!(matches!(checked("../etc/passwd"), Err(ExportError::Escape { .. })));
        assert!(matches!(checked("/abs"), Err(ExportError::Escape { .. })));
    }
}
