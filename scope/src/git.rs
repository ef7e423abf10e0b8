//! Reads what a plan needs from git: the refs, the merge-base, the base-side manifest, the
//! trees, the diff and the CODEOWNERS files; for a run pinned to commits, whether they are
//! fetched ([`require_commits`]) and the paths where two commits' trees differ
//! ([`paths_between`], what a merge queue adds); the commit a ref names ([`commit_of`], for
//! `prgate history`'s `--at` and `--reference`). This is scope's only I/O; deciding what runs
//! is [`crate::plan::select`]. What counts as a file's content is `files`'.

mod files;

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use git2::{Commit, Delta, Diff, DiffFindOptions, DiffOptions, ObjectType, Oid, Repository, Tree};

use crate::change::{Change, ChangeStatus};
use crate::codeowners::{
    CodeownersFacts, CodeownersTexts, FactsBuilder, GITHUB_LOCATIONS, NewModels,
};
use crate::manifest::{MANIFEST_PATH, Manifest, ManifestError};
use crate::plan::{
    DiffInfo, DiffSource, Head, KnownModels, ManifestSource, Plan, Revision, SCHEMA_VERSION,
    Selection, select,
};
pub(crate) use files::text_in_tree;
pub use files::worktree_text;
use files::{file_in_tree, tree_text};

/// What to plan: which repository, which sides, and where the changed files come from.
#[derive(Debug, Clone, Default)]
pub struct PlanRequest {
    /// A directory inside the repository.
    pub repo: PathBuf,
    /// The base ref; `None` for the remote's default branch, else `main`.
    pub base: Option<String>,
    /// The head ref; `None` for `HEAD`.
    pub head: Option<String>,
    /// Add uncommitted and untracked changes of the working tree to head.
    pub worktree: bool,
    /// Changed files given by the caller instead of git's diff.
    pub files: Option<FileList>,
}

/// Changed files from elsewhere (GitHub's API, say).
#[derive(Debug, Clone, Default)]
pub struct FileList {
    pub changes: Vec<Change>,
    /// The list is known to be incomplete (the API stops at 3,000 files).
    pub truncated: bool,
}

impl PlanRequest {
    /// The plan of a pinned run: `repo` from the commit `base` to `head`, over the changed
    /// `paths` as GitHub lists them (each a line of a file list; `truncated` when the list
    /// stopped short), not git's diff.
    pub fn pinned(
        repo: &Path,
        (base, head): (&str, &str),
        paths: &[String],
        truncated: bool,
    ) -> Result<PlanRequest, crate::change::FileListError> {
        let mut list = paths.join("\n");
        list.push('\n');
        let changes = crate::change::parse_file_list(&list)?;
        Ok(PlanRequest {
            repo: repo.to_path_buf(),
            base: Some(base.to_owned()),
            head: Some(head.to_owned()),
            worktree: false,
            files: Some(FileList { changes, truncated }),
        })
    }
}

/// Why a plan could not be made. A message names what was being done, and the file or the
/// reference; the cause from git or the file system, when there is one, is the `source`: show
/// the error with its chain (`anyhow`'s `{:#}`, [`crate::text::chain`]).
#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    #[error("{path}: not inside a git repository")]
    NotARepository { path: PathBuf, source: git2::Error },
    #[error("{path}: no such directory")]
    NoSuchDirectory { path: PathBuf },
    #[error("{repo}: the repository has no commits yet")]
    NoCommits { repo: PathBuf },
    #[error(
        "--worktree previews the checked-out commit, and --head '{head}' is not it\nhint: check {head} out, or leave out --worktree"
    )]
    WorktreeNotHead { head: String },
    #[error("{option} '{reference}': no such commit in {repo}{hint}")]
    UnknownRef { option: &'static str, reference: String, repo: PathBuf, hint: String },
    #[error("{MANIFEST_PATH} is missing at {side}\nhint: {hint}")]
    ManifestMissing { side: String, hint: String },
    #[error("{file} is not UTF-8 text")]
    NotText { file: String },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("--worktree needs a working tree, and {repo} is a bare repository")]
    BareRepository { repo: PathBuf },
    #[error("{what}")]
    Git { what: String, source: git2::Error },
    #[error("reading {path}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("opening the repository {repo}")]
    OpenRepository { repo: PathBuf, source: git2::Error },
    #[error("{what} {sha} is not in {repo}; fetch it first{hint}")]
    MissingCommit { what: String, sha: String, repo: PathBuf, hint: String, source: git2::Error },
}

/// Makes the plan for a request: everything scope reads from git happens here.
pub fn plan(request: &PlanRequest) -> Result<Plan, ScopeError> {
    let repo = open(&request.repo)?;
    let repo_path = repo.workdir().unwrap_or_else(|| repo.path()).to_path_buf();
    let ends = Ends::resolve(&repo, &repo_path, request)?;
    let base_side = BaseSide::of(&repo, &ends)?;
    let base_tree = tree_of(&base_side.commit)?;
    let head_tree = tree_of(&ends.head)?;
    let manifest = read_manifest(&repo, &base_tree, &head_tree, &base_side.label)?;

    let mut path_warnings = PathWarnings::default();
    let (head_changes, mut diff_warnings) = head_changes(
        &repo,
        &repo_path,
        request,
        (&base_tree, &head_tree),
        base_side.no_merge_base.is_none(),
        &mut path_warnings,
    )?;

    // The CODEOWNERS facts compare the trees whatever the list of changed files, and, without
    // a merge-base, the base tip with head: the gate's policy decides what that is worth.
    let codeowners_texts = read_codeowners(
        &repo,
        &base_tree,
        &HeadSide::of(request.worktree, &repo_path, &head_tree),
        manifest.codeowners(),
        &head_changes,
        &base_side.label,
    )?;
    let mut codeowners = FactsBuilder::new(&codeowners_texts);
    let known = known_models(
        &repo,
        (&base_tree, &base_side.label),
        &manifest,
        &head_changes,
        &mut codeowners,
        &mut path_warnings,
    )?;

    let listed =
        changed_files(request, &ends.base_ref, &base_side, &head_changes, &mut diff_warnings);
    let diff_warnings =
        file_warnings(diff_warnings, &listed, path_warnings, request, (&base_tree, &head_tree));

    let mut selection = select(&manifest, &known, &listed.changes, listed.untrusted.as_deref());
    settle_models(
        &mut selection,
        &manifest,
        &base_tree,
        &head_changes,
        base_side.merge_base.is_some(),
    );
    let codeowners = codeowners.finish(
        head_only_files(&head_changes).iter().map(String::as_str),
        &NewModels::new(&manifest, &selection.models),
    );
    Ok(assemble(request, ends, base_side, listed, diff_warnings, selection, codeowners))
}

/// The plan from its parts.
fn assemble(
    request: &PlanRequest,
    ends: Ends<'_>,
    base_side: BaseSide<'_>,
    listed: ChangedFiles,
    diff_warnings: Vec<String>,
    selection: Selection,
    codeowners: CodeownersFacts,
) -> Plan {
    Plan {
        schema_version: SCHEMA_VERSION,
        base: Revision { reference: ends.base_ref, sha: ends.base.id().to_string() },
        head: Head {
            reference: ends.head_ref,
            sha: ends.head.id().to_string(),
            worktree: request.worktree,
        },
        merge_base: base_side.merge_base.map(|oid| oid.to_string()),
        manifest: ManifestSource {
            path: MANIFEST_PATH.to_owned(),
            commit: base_side.commit.id().to_string(),
        },
        diff: DiffInfo {
            source: listed.source,
            trusted: listed.untrusted.is_none(),
            warnings: diff_warnings,
        },
        changed: selection.changed,
        models: selection.models,
        common: selection.common,
        warnings: selection.warnings,
        codeowners,
    }
}

/// The two commits a plan compares, as named and as resolved.
struct Ends<'repo> {
    base_ref: String,
    head_ref: String,
    base: Commit<'repo>,
    head: Commit<'repo>,
}

impl<'repo> Ends<'repo> {
    /// Resolves the request's refs (the default base when it names none), refusing a
    /// repository without commits and a `--worktree` whose head is not checked out.
    fn resolve(
        repo: &'repo Repository,
        repo_path: &Path,
        request: &PlanRequest,
    ) -> Result<Ends<'repo>, ScopeError> {
        let unborn =
            matches!(repo.head(), Err(error) if error.code() == git2::ErrorCode::UnbornBranch);
        let no_references =
            repo.references().map(|mut references| references.next().is_none()).unwrap_or(false);
        if unborn && no_references {
            return Err(ScopeError::NoCommits { repo: repo_path.to_path_buf() });
        }
        let base_ref = match &request.base {
            Some(base) => base.clone(),
            None => default_base(repo),
        };
        let head_ref = request.head.clone().unwrap_or_else(|| "HEAD".to_owned());
        let base = resolve(repo, repo_path, "--base", &base_ref, request.base.is_none())?;
        let head = resolve(repo, repo_path, "--head", &head_ref, false)?;
        if request.worktree {
            let checked_out =
                repo.head().ok().and_then(|reference| reference.peel_to_commit().ok());
            if checked_out.is_none_or(|commit| commit.id() != head.id()) {
                return Err(ScopeError::WorktreeNotHead { head: head_ref });
            }
        }
        Ok(Ends { base_ref, head_ref, base, head })
    }
}

/// The side the PR is compared against: the merge-base, or base's tip when there is none.
struct BaseSide<'repo> {
    merge_base: Option<Oid>,
    /// Why there is no merge-base, when there is none.
    no_merge_base: Option<String>,
    commit: Commit<'repo>,
    /// The commit as errors and warnings name it.
    label: String,
}

impl<'repo> BaseSide<'repo> {
    fn of(repo: &'repo Repository, ends: &Ends<'repo>) -> Result<BaseSide<'repo>, ScopeError> {
        let (base_ref, head_ref) = (&ends.base_ref, &ends.head_ref);
        let merge_base = match repo.merge_base(ends.base.id(), ends.head.id()) {
            Ok(oid) => Some(oid),
            Err(error) if error.code() == git2::ErrorCode::NotFound => None,
            Err(source) => {
                return Err(git_error(format!("merge-base of {base_ref} and {head_ref}"), source));
            }
        };
        let no_merge_base = merge_base.is_none().then(|| {
            let cause = if repo.is_shallow() {
                "this is a shallow clone (fetch more history: git fetch --unshallow)"
            } else {
                "their histories are unrelated"
            };
            format!("{base_ref} and {head_ref} have no merge-base: {cause}")
        });
        let (commit, label) = match merge_base {
            Some(oid) => (find_commit(repo, oid)?, format!("merge-base {}", short(oid))),
            None => (
                ends.base.clone(),
                format!("{base_ref} ({}), as there is no merge-base", short(ends.base.id())),
            ),
        };
        Ok(BaseSide { merge_base, no_merge_base, commit, label })
    }
}

/// What git says head changed against the base side (the working tree's changes with
/// `--worktree`), with the warnings of rename detection.
fn head_changes(
    repo: &Repository,
    repo_path: &Path,
    request: &PlanRequest,
    (base_tree, head_tree): (&Tree<'_>, &Tree<'_>),
    has_merge_base: bool,
    path_warnings: &mut PathWarnings,
) -> Result<(Vec<Change>, Vec<String>), ScopeError> {
    let mut head_diff = if request.worktree {
        if repo.is_bare() {
            return Err(ScopeError::BareRepository { repo: repo_path.to_path_buf() });
        }
        worktree_diff(repo, base_tree)?
    } else {
        tree_diff(repo, base_tree, head_tree)?
    };
    // Renames only change how git's diff is shown (both paths count either way), so they are
    // looked for only when that diff is the list of changed files.
    let git_diff_is_the_list = match &request.files {
        Some(files) => files.truncated && has_merge_base,
        None => has_merge_base,
    };
    let mut warnings = Vec::new();
    if git_diff_is_the_list {
        warnings.extend(find_renames(&mut head_diff, request.worktree)?);
    }
    Ok((changes_of(&head_diff, path_warnings), warnings))
}

/// The models of both sides: the base tree's, walked (giving the CODEOWNERS facts the base
/// files they match), and head's changes applied to them.
fn known_models(
    repo: &Repository,
    (base_tree, base_side_label): (&Tree<'_>, &str),
    manifest: &Manifest,
    head_changes: &[Change],
    codeowners: &mut FactsBuilder,
    path_warnings: &mut PathWarnings,
) -> Result<KnownModels, ScopeError> {
    let mut known = KnownModels::default();
    // The base tree is walked only where its files can matter: every folder when a CODEOWNERS
    // rule changed (any file may change owner), else only the folders where a pattern that
    // discovers models can match (a 200,000-file tree with its models under `models/` is
    // walked under `models/`; a partial-segment pattern names only models found elsewhere).
    let walk = if codeowners.wants_base_files() {
        WalkScope::Everything
    } else {
        WalkScope::Prefixes(
            manifest
                .models()
                .iter()
                .filter(|pattern| pattern.is_whole_segment())
                .map(|pattern| pattern.literal_prefix().to_owned())
                .collect(),
        )
    };
    walk_files(repo, base_tree, &walk, &mut Vec::new(), &mut |path| {
        let path = path_warnings.text_of(path);
        known.add_base_file(manifest, &path);
        codeowners.add_base_file(&path);
    })
    .map_err(|source| git_error(format!("reading the tree of {base_side_label}"), source))?;
    for change in head_changes {
        known.apply_change(manifest, change);
    }
    Ok(known)
}

/// The files only in the head tree: the added lines of CODEOWNERS are matched against them.
fn head_only_files(head_changes: &[Change]) -> Vec<String> {
    head_changes
        .iter()
        .filter(|change| {
            matches!(
                change.status,
                ChangeStatus::Added | ChangeStatus::Copied | ChangeStatus::Renamed
            )
        })
        .map(|change| change.path.clone())
        .collect()
}

/// The changed files the plan selects from, where they came from, and why they cannot be
/// trusted (then every model runs the full tier).
struct ChangedFiles {
    source: DiffSource,
    changes: Vec<Change>,
    untrusted: Option<String>,
}

/// Chooses the list of changed files: the caller's list, or git's diff when the caller's is
/// truncated and a merge-base makes git's diff the PR's own; none without a merge-base.
fn changed_files(
    request: &PlanRequest,
    base_ref: &str,
    base_side: &BaseSide<'_>,
    head_changes: &[Change],
    diff_warnings: &mut Vec<String>,
) -> ChangedFiles {
    let no_merge_base = &base_side.no_merge_base;
    let (source, changes, untrusted) = match &request.files {
        Some(files) if files.truncated => {
            diff_warnings.push("the changed-file list is truncated".to_owned());
            match no_merge_base {
                Some(why) => (DiffSource::FileList, files.changes.clone(), Some(why.clone())),
                None => {
                    diff_warnings.push("the changed files were read from git instead".to_owned());
                    (head_source(request.worktree), head_changes.to_vec(), None)
                }
            }
        }
        Some(files) => {
            if let Some(why) = no_merge_base {
                diff_warnings
                    .push(format!("{why}; the manifest and model list come from {base_ref}"));
            }
            (DiffSource::FileList, files.changes.clone(), None)
        }
        // Without a merge-base the only diff git can give is against the raw base tip, which
        // would blame the PR for everything base did since: use none of it.
        None => match no_merge_base {
            Some(why) => (head_source(request.worktree), Vec::new(), Some(why.clone())),
            None => (head_source(request.worktree), head_changes.to_vec(), None),
        },
    };
    let untrusted = untrusted.map(|why| format!("{why}; every model runs the full tier"));
    ChangedFiles { source, changes, untrusted }
}

/// The warnings about the changed files, in the order the plan shows them: the diff's
/// (`diff`), why the list cannot be trusted, the paths that are not UTF-8, and the
/// listed paths that neither tree has.
fn file_warnings(
    mut diff: Vec<String>,
    listed: &ChangedFiles,
    paths: PathWarnings,
    request: &PlanRequest,
    (base_tree, head_tree): (&Tree<'_>, &Tree<'_>),
) -> Vec<String> {
    diff.extend(listed.untrusted.clone());
    diff.extend(paths.into_warnings());
    if let Some(files) = &request.files {
        diff.extend(listed_paths_in_no_tree(&files.changes, base_tree, head_tree));
    }
    diff
}

/// What the trees add to the selected models: whether each README exists on the head side,
/// and, without a merge-base, that no model can be told new or removed.
fn settle_models(
    selection: &mut Selection,
    manifest: &Manifest,
    base_tree: &Tree<'_>,
    head_changes: &[Change],
    has_merge_base: bool,
) {
    for model in &mut selection.models {
        if let Some(readme) = manifest.readme_of(&model.name) {
            model.readme = Some(exists_on_head_side(&readme, base_tree, head_changes));
        }
        // Without a merge-base, a model in one tree only may be base's doing as well as the
        // PR's: neither new nor removed can be told.
        if !has_merge_base {
            model.new = false;
            model.removed = false;
        }
    }
    if !has_merge_base {
        selection.warnings.push(
            "without a merge-base prgate cannot tell which models this change adds or removes"
                .to_owned(),
        );
    }
}

/// Where the head side's files are: a commit's tree, or the working tree.
enum HeadSide<'a> {
    Tree(&'a Tree<'a>),
    Worktree(&'a Path),
}

impl<'a> HeadSide<'a> {
    /// The working tree at `repo_path` with `--worktree`, else head's tree.
    fn of(worktree: bool, repo_path: &'a Path, head_tree: &'a Tree<'a>) -> HeadSide<'a> {
        if worktree { HeadSide::Worktree(repo_path) } else { HeadSide::Tree(head_tree) }
    }
}

/// Reads the CODEOWNERS texts the facts compare: the configured location and GitHub's three on
/// the base side and at head, and the configured file's new location when the diff shows it
/// renamed.
fn read_codeowners(
    repo: &Repository,
    base_tree: &Tree<'_>,
    head: &HeadSide<'_>,
    configured: &str,
    head_changes: &[Change],
    base_side_label: &str,
) -> Result<CodeownersTexts, ScopeError> {
    let renamed_to = head_changes
        .iter()
        .find(|change| {
            change.status == ChangeStatus::Renamed && change.old_path.as_deref() == Some(configured)
        })
        .map(|change| change.path.clone());
    let mut texts = CodeownersTexts {
        path: configured.to_owned(),
        renamed_to: renamed_to.clone(),
        ..CodeownersTexts::default()
    };
    let locations = std::iter::once(configured).chain(GITHUB_LOCATIONS);
    for location in locations.clone() {
        if let Some(text) = tree_text(repo, base_tree, location, base_side_label)? {
            texts.base.insert(location.to_owned(), text);
        }
    }
    for location in locations.chain(renamed_to.as_deref()) {
        let text = match head {
            HeadSide::Tree(tree) => tree_text(repo, tree, location, "head")?,
            HeadSide::Worktree(root) => worktree_text(root, location)?,
        };
        if let Some(text) = text {
            texts.head.insert(location.to_owned(), text);
        }
    }
    Ok(texts)
}

fn head_source(worktree: bool) -> DiffSource {
    if worktree { DiffSource::Worktree } else { DiffSource::Git }
}

/// The remote's default branch (`origin/HEAD`) when the clone knows it, else `main`.
fn default_base(repo: &Repository) -> String {
    repo.find_reference("refs/remotes/origin/HEAD")
        .ok()
        .and_then(|reference| reference.symbolic_target().ok().flatten().map(str::to_owned))
        .and_then(|target| target.strip_prefix("refs/remotes/").map(str::to_owned))
        .unwrap_or_else(|| "main".to_owned())
}

fn resolve<'r>(
    repo: &'r Repository,
    repo_path: &Path,
    option: &'static str,
    reference: &str,
    defaulted: bool,
) -> Result<Commit<'r>, ScopeError> {
    repo.revparse_single(reference).and_then(|object| object.peel_to_commit()).map_err(|_| {
        let hint = if defaulted {
            format!("\nhint: {reference} is the default base; name another with --base")
        } else {
            String::new()
        };
        ScopeError::UnknownRef {
            option,
            reference: reference.to_owned(),
            repo: repo_path.to_path_buf(),
            hint,
        }
    })
}

fn find_commit(repo: &Repository, oid: Oid) -> Result<Commit<'_>, ScopeError> {
    repo.find_commit(oid).map_err(|source| git_error(format!("reading commit {oid}"), source))
}

fn tree_of<'r>(commit: &Commit<'r>) -> Result<Tree<'r>, ScopeError> {
    commit
        .tree()
        .map_err(|source| git_error(format!("reading the tree of {}", commit.id()), source))
}

/// Opens the repository around `path`, saying which of "no such directory" and "not a
/// repository" it is.
pub(crate) fn open(path: &Path) -> Result<Repository, ScopeError> {
    if !path.exists() {
        return Err(ScopeError::NoSuchDirectory { path: path.to_path_buf() });
    }
    Repository::discover(path)
        .map_err(|source| ScopeError::NotARepository { path: path.to_path_buf(), source })
}

fn read_manifest(
    repo: &Repository,
    base_tree: &Tree<'_>,
    head_tree: &Tree<'_>,
    side: &str,
) -> Result<Manifest, ScopeError> {
    let text = text_in_tree(repo, base_tree, MANIFEST_PATH, side)?;
    let Some(text) = text else {
        let hint = if matches!(file_in_tree(repo, head_tree, MANIFEST_PATH, "head"), Ok(Some(_))) {
            "prgate reads the manifest from the base side; the one this change adds takes effect once it is merged"
        } else {
            "add a prgate.toml to the base branch (its format: docs/manifest.md)"
        };
        return Err(ScopeError::ManifestMissing { side: side.to_owned(), hint: hint.to_owned() });
    };
    Ok(Manifest::parse(&text, &format!("{MANIFEST_PATH} at {side}"))?)
}

/// Whether a file exists on the head side: in the base tree and not deleted or renamed away by
/// the changes from it, or added, copied or renamed there by them.
fn exists_on_head_side(path: &str, base_tree: &Tree<'_>, head_changes: &[Change]) -> bool {
    let mut exists = base_tree.get_path(Path::new(path)).is_ok();
    for change in head_changes {
        if change.path == path && change.status != ChangeStatus::Deleted {
            exists = true;
        }
        let gone_from_here = (change.status == ChangeStatus::Deleted && change.path == path)
            || (change.status == ChangeStatus::Renamed && change.old_path.as_deref() == Some(path));
        if gone_from_here {
            exists = false;
        }
    }
    exists
}

/// Warnings about listed paths that neither tree has: a list from another repository, or a
/// head that moved since the list was made.
fn listed_paths_in_no_tree(
    changes: &[Change],
    base_tree: &Tree<'_>,
    head_tree: &Tree<'_>,
) -> Vec<String> {
    const SHOWN: usize = 5;
    let missing: Vec<&str> = changes
        .iter()
        .flat_map(Change::counted_paths)
        .filter(|path| {
            base_tree.get_path(Path::new(path)).is_err()
                && head_tree.get_path(Path::new(path)).is_err()
        })
        .collect();
    if missing.is_empty() {
        return Vec::new();
    }
    let mut shown = missing.iter().take(SHOWN).copied().collect::<Vec<_>>().join(", ");
    if missing.len() > SHOWN {
        shown.push_str(&format!(" and {} more", missing.len() - SHOWN));
    }
    vec![format!(
        "{} listed path(s) are in neither the base nor the head tree: {shown}; is the list for this repository and head?",
        missing.len()
    )]
}

/// Which folders of a tree a walk enters.
#[derive(Debug)]
enum WalkScope {
    Everything,
    /// Only folders on the way to, or inside, one of these path prefixes.
    Prefixes(Vec<String>),
}

impl WalkScope {
    /// Whether the walk enters `folder` (its path with a trailing `/`).
    fn enters(&self, folder: &[u8]) -> bool {
        match self {
            WalkScope::Everything => true,
            WalkScope::Prefixes(prefixes) => prefixes.iter().any(|prefix| {
                let prefix = prefix.as_bytes();
                prefix.starts_with(folder) || folder.starts_with(prefix)
            }),
        }
    }
}

/// Calls `visit` with the path of every file (blob, link or submodule) below `tree`, in the
/// folders `scope` enters.
fn walk_files(
    repo: &Repository,
    tree: &Tree<'_>,
    scope: &WalkScope,
    prefix: &mut Vec<u8>,
    visit: &mut dyn FnMut(&[u8]),
) -> Result<(), git2::Error> {
    for entry in tree.iter() {
        let length = prefix.len();
        prefix.extend_from_slice(entry.name_bytes());
        if entry.kind() == Some(ObjectType::Tree) {
            prefix.push(b'/');
            if scope.enters(prefix) {
                let subtree = repo.find_tree(entry.id())?;
                walk_files(repo, &subtree, scope, prefix, visit)?;
            }
        } else {
            visit(prefix);
        }
        prefix.truncate(length);
    }
    Ok(())
}

/// Past this many changed paths the tree diff is asked for without a path list (the list's
/// own cost then outgrows the folders it saves).
const PATH_LIST_LIMIT: usize = 20_000;

/// The diff from `old` to `new`. libgit2 expands every folder of both trees, even ones whose
/// object ids are equal (libgit2/libgit2#6863), which on a 200,000-file tree costs 100× git's
/// own diff of a one-file change; so the changed paths are found first by comparing the trees
/// as git does (a folder with the same id on both sides is not entered), and libgit2 diffs only
/// those paths (its iterators then skip every other folder).
fn tree_diff<'r>(
    repo: &'r Repository,
    old: &Tree<'_>,
    new: &Tree<'_>,
) -> Result<Diff<'r>, ScopeError> {
    let failed = |source| git_error("diffing the base and head trees".to_owned(), source);
    let mut paths = Vec::new();
    changed_paths(repo, Some(old), Some(new), &mut Vec::new(), &mut paths).map_err(failed)?;
    let mut options = DiffOptions::new();
    options.include_typechange(true);
    if paths.len() <= PATH_LIST_LIMIT {
        // An empty list would mean "every path": equal trees get one no tree can hold.
        if paths.is_empty() {
            paths.push(b".git/no-path".to_vec());
        }
        options.disable_pathspec_match(true);
        for path in paths {
            options.pathspec(path);
        }
    }
    repo.diff_tree_to_tree(Some(old), Some(new), Some(&mut options)).map_err(failed)
}

/// Adds to `paths` every file path that differs between `old` and `new` (either may be absent:
/// a folder on one side only), entering only the folders whose object ids differ.
fn changed_paths(
    repo: &Repository,
    old: Option<&Tree<'_>>,
    new: Option<&Tree<'_>>,
    prefix: &mut Vec<u8>,
    paths: &mut Vec<Vec<u8>>,
) -> Result<(), git2::Error> {
    let mut names: Vec<Vec<u8>> = [old, new]
        .into_iter()
        .flatten()
        .flat_map(|tree| tree.iter().map(|entry| entry.name_bytes().to_vec()).collect::<Vec<_>>())
        .collect();
    names.sort_unstable();
    names.dedup();
    for name in &names {
        let before = old.and_then(|tree| tree.get_name_bytes(name));
        let after = new.and_then(|tree| tree.get_name_bytes(name));
        if let (Some(before), Some(after)) = (&before, &after)
            && before.id() == after.id()
            && before.filemode() == after.filemode()
        {
            continue;
        }
        let length = prefix.len();
        prefix.extend_from_slice(name);
        let subtree =
            |entry: &Option<git2::TreeEntry<'_>>| -> Result<Option<Tree<'_>>, git2::Error> {
                match entry {
                    Some(entry) if entry.kind() == Some(ObjectType::Tree) => {
                        repo.find_tree(entry.id()).map(Some)
                    }
                    _ => Ok(None),
                }
            };
        let (old_tree, new_tree) = (subtree(&before)?, subtree(&after)?);
        let is_file = |entry: &Option<git2::TreeEntry<'_>>| {
            entry.as_ref().is_some_and(|entry| entry.kind() != Some(ObjectType::Tree))
        };
        if is_file(&before) || is_file(&after) {
            paths.push(prefix.clone());
        }
        if old_tree.is_some() || new_tree.is_some() {
            prefix.push(b'/');
            changed_paths(repo, old_tree.as_ref(), new_tree.as_ref(), prefix, paths)?;
        }
        prefix.truncate(length);
    }
    Ok(())
}

fn worktree_diff<'r>(repo: &'r Repository, old: &Tree<'_>) -> Result<Diff<'r>, ScopeError> {
    let mut options = DiffOptions::new();
    options.include_typechange(true).include_untracked(true).recurse_untracked_dirs(true);
    repo.diff_tree_to_workdir_with_index(Some(old), Some(&mut options)).map_err(|source| {
        git_error("diffing the base tree and the working tree".to_owned(), source)
    })
}

/// Inexact rename detection compares every added file with every deleted one. Past this many
/// pairs it is skipped, as git skips it past `diff.renameLimit`, and the diff says so.
pub const INEXACT_RENAME_PAIRS: usize = 10_000;

/// Pairs deleted and added files into renames: files with the same content always, edited ones
/// by similarity while there are at most [`INEXACT_RENAME_PAIRS`] pairs to compare. Returns a
/// warning when similarity was not looked at.
fn find_renames(diff: &mut Diff<'_>, untracked: bool) -> Result<Option<String>, ScopeError> {
    let finding = |diff: &mut Diff<'_>, exact_only: bool| {
        let mut find = DiffFindOptions::new();
        find.renames(true).for_untracked(untracked).exact_match_only(exact_only);
        // Exact renames are matched by object id, whatever their number: libgit2's default
        // limit (as git's `diff.renameLimit`) would list a 1,500-file move as deletions and
        // additions. The inexact pass is bounded by INEXACT_RENAME_PAIRS below instead.
        find.rename_limit(usize::MAX);
        diff.find_similar(Some(&mut find))
            .map_err(|source| git_error("finding renames".to_owned(), source))
    };
    finding(diff, true)?;
    let (mut added, mut deleted) = (0usize, 0usize);
    for delta in diff.deltas() {
        match delta.status() {
            Delta::Added | Delta::Untracked => added += 1,
            Delta::Deleted => deleted += 1,
            _ => {}
        }
    }
    if added.saturating_mul(deleted) > INEXACT_RENAME_PAIRS {
        return Ok(Some(format!(
            "renames of edited files were not looked for ({added} added × {deleted} deleted files \
             is over {INEXACT_RENAME_PAIRS} pairs): they are listed as deleted and added, and both \
             paths count as they would for a rename"
        )));
    }
    if added > 0 && deleted > 0 {
        finding(diff, false)?;
    }
    Ok(None)
}

fn changes_of(diff: &Diff<'_>, warnings: &mut PathWarnings) -> Vec<Change> {
    let mut changes = Vec::new();
    for delta in diff.deltas() {
        let status = match delta.status() {
            Delta::Added | Delta::Untracked => ChangeStatus::Added,
            Delta::Deleted => ChangeStatus::Deleted,
            Delta::Modified => ChangeStatus::Modified,
            Delta::Renamed => ChangeStatus::Renamed,
            Delta::Copied => ChangeStatus::Copied,
            Delta::Typechange => ChangeStatus::TypeChanged,
            // A file with a merge conflict is changed, whatever it ends up as.
            Delta::Conflicted => ChangeStatus::Modified,
            Delta::Unmodified | Delta::Ignored | Delta::Unreadable => continue,
        };
        let new = delta.new_file().path_bytes().map(|path| warnings.text_of(path).into_owned());
        let old = delta.old_file().path_bytes().map(|path| warnings.text_of(path).into_owned());
        let change = match (status, new, old) {
            (ChangeStatus::Renamed | ChangeStatus::Copied, Some(path), Some(old)) => {
                Change { path, status, old_path: Some(old) }
            }
            (ChangeStatus::Deleted, _, Some(path)) | (_, Some(path), _) | (_, None, Some(path)) => {
                Change { path, status, old_path: None }
            }
            (_, None, None) => continue,
        };
        changes.push(change);
    }
    changes
}

/// Turns git's byte paths into text, remembering the ones that were not UTF-8.
#[derive(Debug, Default)]
struct PathWarnings {
    not_utf8: Vec<String>,
}

impl PathWarnings {
    fn text_of<'p>(&mut self, path: &'p [u8]) -> Cow<'p, str> {
        match std::str::from_utf8(path) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => {
                let text = String::from_utf8_lossy(path).into_owned();
                self.not_utf8.push(text.clone());
                Cow::Owned(text)
            }
        }
    }

    fn into_warnings(mut self) -> Vec<String> {
        self.not_utf8.sort();
        self.not_utf8.dedup();
        self.not_utf8
            .into_iter()
            .map(|path| format!("path {path} is not UTF-8; it is shown and matched with U+FFFD in place of the bad bytes"))
            .collect()
    }
}

fn short(oid: Oid) -> String {
    short_sha(&oid.to_string()).to_owned()
}

/// The characters of a commit's SHA shown to people: 7, as git's `--abbrev` default.
pub const SHORT_SHA: usize = 7;

/// `sha` as people read it in messages: its first [`SHORT_SHA`] characters (all of a shorter
/// text).
pub fn short_sha(sha: &str) -> &str {
    sha.get(..SHORT_SHA).unwrap_or(sha)
}

/// A commit a run is pinned to, named for messages: `("the PR's head", sha)`.
pub type NamedCommit<'a> = (&'a str, &'a str);

/// Checks that the repository at `repo` has every one of `commits`; `fetch_hint` follows "fetch
/// it first" in the error of one it lacks (` (git fetch origin pull/7/head)`).
pub fn require_commits(
    repo: &Path,
    commits: &[NamedCommit<'_>],
    fetch_hint: &str,
) -> Result<(), ScopeError> {
    let repository = open_exactly(repo)?;
    for &commit in commits {
        pinned_commit(&repository, repo, commit, fetch_hint)?;
    }
    Ok(())
}

/// The paths where `new`'s tree differs from `old`'s in the repository at `repo` (both sides
/// of a rename), sorted: for a merge queue, what the merge commit adds to the PR's head.
pub fn paths_between(
    repo: &Path,
    old: NamedCommit<'_>,
    new: NamedCommit<'_>,
) -> Result<Vec<String>, ScopeError> {
    let repository = open_exactly(repo)?;
    let old = tree_of(&pinned_commit(&repository, repo, old, "")?)?;
    let new = tree_of(&pinned_commit(&repository, repo, new, "")?)?;
    let diff = repository
        .diff_tree_to_tree(Some(&old), Some(&new), None)
        .map_err(|source| git_error("comparing the trees".to_owned(), source))?;
    let mut paths = std::collections::BTreeSet::new();
    for delta in diff.deltas() {
        for file in [delta.old_file(), delta.new_file()] {
            if let Some(path) = file.path().and_then(Path::to_str) {
                paths.insert(path.to_owned());
            }
        }
    }
    Ok(paths.into_iter().collect())
}

/// The newest tip of the base branch `branch` the repository at `repo` knows, if it descends
/// from `pinned` (the base a PR's pin gives, its `base.sha`): else `pinned`. GitHub's `base.sha`
/// is the base branch as it was when the PR was opened or last pushed, not as it is, so a rule
/// that compares with the base's tip (`base-moved`) reads the checkout's branch instead: its
/// remote-tracking ref `refs/remotes/origin/<branch>`, else its local branch. A tip that does
/// not descend from `pinned` (an older checkout, a rewritten branch) is not used.
pub fn newest_base(
    repo: &Path,
    pinned: NamedCommit<'_>,
    branch: &str,
) -> Result<String, ScopeError> {
    let repository = open_exactly(repo)?;
    let pinned_oid = pinned_commit(&repository, repo, pinned, "")?.id();
    let descends = |tip: Oid| {
        tip != pinned_oid && repository.graph_descendant_of(tip, pinned_oid).unwrap_or(false)
    };
    let newer = [format!("refs/remotes/origin/{branch}"), format!("refs/heads/{branch}")]
        .iter()
        .filter_map(|name| repository.refname_to_id(name).ok())
        .find(|&tip| descends(tip));
    Ok(newer.unwrap_or(pinned_oid).to_string())
}

/// The full SHA of the commit `reference` (a SHA, tag or branch, given as the flag `option`)
/// names in the repository around `repo`.
pub fn commit_of(repo: &Path, option: &'static str, reference: &str) -> Result<String, ScopeError> {
    let repository = open(repo)?;
    Ok(resolve(&repository, repo, option, reference, false)?.id().to_string())
}

/// The repository at `repo` itself (no search upwards: a run names its checkout).
fn open_exactly(repo: &Path) -> Result<Repository, ScopeError> {
    Repository::open(repo)
        .map_err(|source| ScopeError::OpenRepository { repo: repo.to_path_buf(), source })
}

/// The commit `sha` (named `what`) of the repository at `repo_path`, which must have it.
fn pinned_commit<'r>(
    repo: &'r Repository,
    repo_path: &Path,
    (what, sha): NamedCommit<'_>,
    fetch_hint: &str,
) -> Result<Commit<'r>, ScopeError> {
    let oid = Oid::from_str(sha).map_err(|source| git_error(format!("{what} {sha}"), source))?;
    repo.find_commit(oid).map_err(|source| ScopeError::MissingCommit {
        what: what.to_owned(),
        sha: sha.to_owned(),
        repo: repo_path.to_path_buf(),
        hint: fetch_hint.to_owned(),
        source,
    })
}

fn git_error(what: String, source: git2::Error) -> ScopeError {
    ScopeError::Git { what, source }
}

#[cfg(test)]
mod tests;
