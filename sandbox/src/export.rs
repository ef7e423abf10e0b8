//! Exporting a commit's tree as a clean directory: the files of the pinned commit, with their
//! executable bits and symbolic links, and no `.git` — what the runner installs and tests, for
//! base and for the PR alike.
//!
//! A tree comes from git's objects, not from a checkout, so nothing in the working copy (an
//! untracked file, a local edit) can leak into a run. A PR's commit is crafted by its author,
//! so every entry is checked before anything is written: a name must be one plain path
//! component (no `/`, not `.` or `..`, not empty, not `.git` in any case) and unique in its
//! tree (a symbolic link `evil` and a folder `evil/` in one tree are refused). Writing never
//! goes through a link: every folder is opened relative to its parent's descriptor with
//! `O_NOFOLLOW`, and every file and link is created with `O_EXCL` (an entry that exists is an
//! error, never overwritten or followed). A symbolic link is written as a link, never
//! followed; where it points is the reader's concern (`crate::untrusted`). Submodules are not
//! fetched; they are listed.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository, Tree};
use rustix::fs::{Mode, OFlags};

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
    #[error("a tree entry '{path}' appears twice in its tree")]
    Duplicate { path: String },
    #[error("a tree entry '{path}' is a `.git` folder, which an export never writes")]
    GitFolder { path: String },
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
    // The destination is prgate's own path: it may be reached through a link; nothing below it.
    let root =
        rustix::fs::open(dest, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|errno| io(dest, errno.into()))?;
    let mut exported = Exported::default();
    write_tree(&repository, &tree, &Folder { fd: &root, path: dest }, "", &mut exported)?;
    Ok(exported)
}

/// A folder of the export being written: its descriptor, and its path for messages.
struct Folder<'a> {
    fd: &'a OwnedFd,
    path: &'a Path,
}

/// Writes `tree` (at `prefix` in the commit) into `folder`, its subtrees below, after its
/// names are checked; counts what it wrote in `exported`.
fn write_tree(
    repository: &Repository,
    tree: &Tree<'_>,
    folder: &Folder<'_>,
    prefix: &str,
    exported: &mut Exported,
) -> Result<(), ExportError> {
    check_names(tree, prefix)?;
    for entry in tree.iter() {
        let name = String::from_utf8_lossy(entry.name_bytes()).into_owned();
        let relative = format!("{prefix}{name}");
        let target = folder.path.join(&name);
        match entry.kind() {
            Some(ObjectType::Tree) => {
                rustix::fs::mkdirat(folder.fd, name.as_str(), Mode::from_raw_mode(0o755))
                    .map_err(|errno| io(&target, errno.into()))?;
                let subfolder = open_folder(folder.fd, Path::new(&name), &target)?;
                let subtree = repository
                    .find_tree(entry.id())
                    .map_err(|source| git(format!("the tree {relative}"), source))?;
                let sub = Folder { fd: &subfolder, path: &target };
                write_tree(repository, &subtree, &sub, &format!("{relative}/"), exported)?;
            }
            Some(ObjectType::Blob) => {
                let content = blob(repository, entry.id(), &relative)?;
                let written = Written { folder, name: &name, target: &target };
                // 0o120000 is a symbolic link; 0o100755 an executable file.
                match entry.filemode() {
                    0o120_000 => {
                        written.link(&content)?;
                        exported.links += 1;
                    }
                    mode => {
                        written.file(mode == 0o100_755, &content)?;
                        exported.files += 1;
                    }
                }
            }
            _ => exported.submodules.push(relative),
        }
    }
    Ok(())
}

/// Checks every entry's name of `tree` (at `prefix` in the commit), and that no two are the
/// same, before anything of it is written.
fn check_names(tree: &Tree<'_>, prefix: &str) -> Result<(), ExportError> {
    let mut names = BTreeSet::new();
    for entry in tree.iter() {
        let name = String::from_utf8_lossy(entry.name_bytes()).into_owned();
        let relative = format!("{prefix}{name}");
        checked(&relative, &name)?;
        if !names.insert(name) {
            return Err(ExportError::Duplicate { path: relative });
        }
    }
    Ok(())
}

/// A blob's place in the export: `name` in `folder`, `target` its path for messages.
struct Written<'a> {
    folder: &'a Folder<'a>,
    name: &'a str,
    target: &'a Path,
}

impl Written<'_> {
    /// Writes a symbolic link to `content`.
    fn link(&self, content: &[u8]) -> Result<(), ExportError> {
        let link = String::from_utf8_lossy(content).into_owned();
        rustix::fs::symlinkat(link.as_str(), self.folder.fd, self.name)
            .map_err(|errno| io(self.target, errno.into()))
    }

    /// Writes a new file (never through a link) holding `content`, executable or not.
    fn file(&self, executable: bool, content: &[u8]) -> Result<(), ExportError> {
        let permissions = if executable { 0o755 } else { 0o644 };
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd =
            rustix::fs::openat(self.folder.fd, self.name, flags, Mode::from_raw_mode(permissions))
                .map_err(|errno| io(self.target, errno.into()))?;
        // The mode given to `openat` is cut by the umask; the tree's is kept.
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(permissions))
            .map_err(|errno| io(self.target, errno.into()))?;
        File::from(fd).write_all(content).map_err(|source| io(self.target, source))
    }
}

/// Checks a tree entry's `name` (at `relative` in the commit): one plain component that stays
/// in its folder, and not `.git`.
fn checked(relative: &str, name: &str) -> Result<(), ExportError> {
    let escapes = name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']);
    if escapes {
        return Err(ExportError::Escape { path: relative.to_owned() });
    }
    if name.eq_ignore_ascii_case(".git") {
        return Err(ExportError::GitFolder { path: relative.to_owned() });
    }
    Ok(())
}

/// Opens the folder `name` of `parent` without following a link; `path` names it in errors.
fn open_folder(parent: &OwnedFd, name: &Path, path: &Path) -> Result<OwnedFd, ExportError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(parent, name, flags, Mode::empty()).map_err(|errno| io(path, errno.into()))
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
        #[expect(clippy::disallowed_methods, reason = "a test builds its repository with git")]
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

    /// A tree object written as raw bytes, as a hostile author can push it: `entries` are
    /// (mode, name, object) in the given order, unchecked.
    fn raw_tree(repository: &Repository, entries: &[(&str, &[u8], Oid)]) -> Oid {
        let mut bytes = Vec::new();
        for (mode, name, id) in entries {
            bytes.extend_from_slice(mode.as_bytes());
            bytes.push(b' ');
            bytes.extend_from_slice(name);
            bytes.push(0);
            bytes.extend_from_slice(id.as_bytes());
        }
        repository
            .odb()
            .expect("the object database")
            .write(ObjectType::Tree, &bytes)
            .expect("a tree")
    }

    /// Raw tree entries a test crafts: (mode, name, object).
    type CraftedEntries = dyn Fn(&Repository) -> Vec<(&'static str, Vec<u8>, Oid)>;

    /// A repository whose `HEAD` is a commit of the raw tree `entries` returns; the export
    /// of it into a fresh folder, and that folder's parent (where an escape would land).
    fn export_crafted(
        entries: impl FnOnce(&Repository) -> Vec<(&'static str, Vec<u8>, Oid)>,
    ) -> (Result<Exported, ExportError>, tempfile::TempDir) {
        let repo = tempfile::tempdir().expect("a temporary directory");
        let repository = Repository::init(repo.path()).expect("a repository");
        let entries = entries(&repository);
        let borrowed: Vec<(&str, &[u8], Oid)> =
            entries.iter().map(|(mode, name, id)| (*mode, name.as_slice(), *id)).collect();
        let tree_id = raw_tree(&repository, &borrowed);
        let tree = repository.find_tree(tree_id).expect("the crafted tree");
        let signature = git2::Signature::now("t", "t@example.invalid").expect("a signature");
        repository
            .commit(Some("HEAD"), &signature, &signature, "crafted", &tree, &[])
            .expect("a commit");
        let out = tempfile::tempdir().expect("a temporary directory");
        let result = export_tree(repo.path(), "HEAD", &out.path().join("tree"));
        (result, out)
    }

    /// What a folder holds, recursively, as sorted relative paths (links marked `->`).
    fn listing(dir: &Path) -> Vec<String> {
        let mut found = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(folder) = stack.pop() {
            for entry in std::fs::read_dir(&folder).expect("a folder") {
                let entry = entry.expect("an entry");
                let path = entry.path();
                let name = path.strip_prefix(dir).expect("below").display().to_string();
                let kind = entry.file_type().expect("a type");
                if kind.is_symlink() {
                    let target = std::fs::read_link(&path).expect("a link");
                    found.push(format!("{name} -> {}", target.display()));
                } else if kind.is_dir() {
                    found.push(format!("{name}/"));
                    stack.push(path);
                } else {
                    found.push(name);
                }
            }
        }
        found.sort();
        found
    }

    #[test]
    fn crafted_trees_are_refused_and_nothing_lands_outside_the_export() {
        let blob =
            |repository: &Repository, content: &[u8]| repository.blob(content).expect("a blob");
        let cases: Vec<(&str, Box<CraftedEntries>, &str)> = vec![
            (
                "a link `evil` to the export's parent, then a tree `evil` of the same name",
                Box::new(move |repository| {
                    let payload = blob(repository, b"pwned\n");
                    let inner = raw_tree(repository, &[("100644", b"x", payload)]);
                    vec![
                        ("120000", b"evil".to_vec(), blob(repository, b"..")),
                        ("40000", b"evil".to_vec(), inner),
                    ]
                }),
                "a tree entry 'evil' appears twice in its tree",
            ),
            (
                "an entry named `evil/x` after a link `evil`",
                Box::new(move |repository| {
                    vec![
                        ("120000", b"evil".to_vec(), blob(repository, b"..")),
                        ("100644", b"evil/x".to_vec(), blob(repository, b"pwned\n")),
                    ]
                }),
                "a tree entry 'evil/x' would be written outside the destination",
            ),
            (
                "an entry named `..`",
                Box::new(move |repository| {
                    let payload = blob(repository, b"pwned\n");
                    let inner = raw_tree(repository, &[("100644", b"x", payload)]);
                    vec![("40000", b"..".to_vec(), inner)]
                }),
                "a tree entry '..' would be written outside the destination",
            ),
            (
                "a `.GIT` folder (hooks and config for whatever runs git in the tree)",
                Box::new(move |repository| {
                    let config = blob(repository, b"[core]\n\tfsmonitor = touch /tmp/pwned\n");
                    let inner = raw_tree(repository, &[("100644", b"config", config)]);
                    vec![("40000", b".GIT".to_vec(), inner)]
                }),
                "a tree entry '.GIT' is a `.git` folder, which an export never writes",
            ),
        ];
        for (what, entries, expect) in cases {
            let (result, out) = export_crafted(entries);
            let error = result.expect_err(what);
            assert_eq!(error.to_string(), expect, "{what}");
            // Nothing was written before the check, and nothing beside the export.
            assert_eq!(listing(out.path()), vec!["tree/".to_owned()], "{what}");
        }
    }

    #[test]
    fn a_link_in_a_tree_is_written_as_a_link_and_never_written_through() {
        // A link `out` to the export's parent, and a file `out2` (fine): the link is written as
        // a link, and nothing is created where it points.
        let (result, out) = export_crafted(|repository| {
            vec![
                ("120000", b"up".to_vec(), repository.blob(b"..").expect("a blob")),
                ("100755", b"run.sh".to_vec(), repository.blob(b"#!/bin/sh\n").expect("a blob")),
            ]
        });
        assert_eq!(result.expect("exported"), Exported { files: 1, links: 1, submodules: vec![] });
        assert_eq!(listing(out.path()), ["tree/", "tree/run.sh", "tree/up -> .."]);
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
    }
}
