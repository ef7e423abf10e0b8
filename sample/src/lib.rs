//! The demo's built-in sample: a small repository shaped like a per-model monokernel repository
//! for SGLang, with a handful of pull-request branches that show every kind of scope, and the
//! node profile the demo runs them on (`prgate demo`, the binary's `src/demo.rs`).
//!
//! Every model serves through prgate's own simulated server (`prgate sim-server`): its recipe
//! (`test/e2e/<model>.toml`) starts `prgate` by name, as found on the command's `PATH` (on the
//! host the running prgate's folder is on it; in a container, the image's own `prgate`), with
//! the model's simulated profile (`sgl_amd_mono/models/<model>/sim-profile.toml`, whose
//! `tpot-ms` stands for the speed of the model's monokernels), so a PR that "speeds up a
//! kernel" lowers it in its tree. The server listens on every interface (`0.0.0.0`): in a
//! container, the published port reaches only those (docs/container.md).
//!
//! The files are real files in this crate's `files/` (`main/`: `main`'s beside the models';
//! `model/`: a model's, with `@model@` for its name; `pr-126/`: a PR's new test; `prs.toml`: the
//! PRs' edits; `node.toml`: the demo's node profile), embedded in the binary with
//! `include_str!`; this crate only assembles `main` and the PRs' branches from them, and the
//! demo's node profile. Commits have fixed authors and dates and the files name no host path,
//! so every build gives the same SHAs.
//!
//! What it does: it writes the repository and the node profile below the folder it is given,
//! and nothing else; it starts no process and touches no socket. What it leaves to others:
//! planning, running and judging the sample (the binary's demo, through the other crates). The
//! node profile's format is `prgate-recipe`'s, the one crate of ours below it; only the binary
//! uses this one (`cli architecture::the_sample_starts_nothing_and_only_the_binary_uses_it`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use git2::{IndexEntry, IndexTime, Oid, Repository, RepositoryInitOptions, Signature, Time};
use prgate_recipe::node::{NodeError, NodeProfile};
use serde::Deserialize;

/// One pull request of the sample: its branch, number and title.
#[derive(Debug, Clone)]
pub struct SamplePr {
    pub number: u32,
    pub branch: String,
    /// The branch it is based on (`main`, or the history PR before it).
    pub base: String,
    pub title: String,
    /// Its branch's commit (40 hex digits): the head it merges with, a fast-forward.
    pub head: String,
    /// The demo runs it twice, as a maintainer's second `run-ci` after a flaky failure: the
    /// second run takes over what the first judged and runs only what failed (docs/rerun.md).
    pub reruns: bool,
    /// A node of the demo's fleet that is drained when it runs: before it, the demo strikes
    /// that node in the health ledger as three earlier runs whose preflight found ECC errors
    /// on its GPU would have (docs/node.md), and its comment names the drained node.
    pub drained_node: Option<String>,
}

/// Why the sample could not be built or its node profile written; each names the file, the
/// branch or the PR that failed.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// The sample's own list of PRs does not parse (a bug in this crate's files).
    #[error("the sample's PRs (sample/files/prs.toml): {0}")]
    Prs(toml::de::Error),
    #[error("sample PR #{pr}: the sample has no file {file}")]
    NoFile { pr: u32, file: String },
    // The cause is in the message, so it is not also the error's `source` (a chain printed
    // with `{:#}` would say it twice).
    #[error("{what}: {error}")]
    Git { what: String, error: git2::Error },
    #[error("{doing} {path}: {error}")]
    Io { doing: &'static str, path: PathBuf, error: std::io::Error },
    #[error("{path} is not UTF-8")]
    NotUtf8 { path: PathBuf },
    /// The demo's node profile, as written, is refused (a bug in `files/node.toml`).
    #[error(transparent)]
    NodeProfile(#[from] NodeError),
}

/// A git error as the sample's, saying what it was doing.
trait GitContext<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, SampleError>;
}

impl<T> GitContext<T> for Result<T, git2::Error> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, SampleError> {
        self.map_err(|error| SampleError::Git { what: what(), error })
    }
}

/// The sample's model served disaggregated: a prefill and a decode instance of the simulated
/// server behind the real `sglang-router` (docs/topology.md), on GPUs of their own.
pub const PD_MODEL: &str = "mimo_v3_pd";

/// The model whose history the demo's drift guard follows (docs/history.md).
pub const HISTORY_MODEL: &str = "qwen38_flash_next";

/// Builds the sample repository in `dir` (which must be empty or absent): `main`, and a branch
/// for every PR. Leaves `main` checked out.
pub fn build(dir: &Path) -> Result<Vec<SamplePr>, SampleError> {
    let mut options = RepositoryInitOptions::new();
    options.initial_head("main");
    let repo = Repository::init_opts(dir, &options)
        .doing(|| format!("creating the sample repository in {}", dir.display()))?;
    let mut builder = Builder { repo: &repo, clock: 1_790_000_000 };

    let base_files = base_files();
    let main = builder.commit("main", None, &base_files, "Sample monokernel repository")?;

    let prs: RawPrs =
        toml::from_str(include_str!("../files/prs.toml")).map_err(SampleError::Prs)?;
    let mut sample_prs = Vec::with_capacity(prs.pr.len());
    for pr in prs.pr {
        let mut files = base_files.clone();
        for edit in &pr.edits {
            edit.apply(pr.number, &mut files)?;
        }
        let head = builder.commit(&pr.branch, Some(main), &files, &pr.title)?;
        sample_prs.push(SamplePr {
            number: pr.number,
            branch: pr.branch,
            base: pr.base,
            title: pr.title,
            head: head.to_string(),
            reruns: pr.reruns,
            drained_node: pr.drained_node,
        });
    }

    let mut checkout = git2::build::CheckoutBuilder::new();
    checkout.force();
    repo.checkout_head(Some(&mut checkout))
        .doing(|| "checking out main in the sample repository".to_owned())?;
    Ok(sample_prs)
}

/// The demo's node (`files/node.toml`): hardware as the sample's recipes ask, every sample
/// model's checkpoint (an empty folder: the simulated server reads none), work and cache inside
/// `dir`. Written to `dir/node.toml`.
pub fn write_node_profile(dir: &Path) -> Result<NodeProfile, SampleError> {
    let checkpoints = dir.join("checkpoints");
    let mut table = String::new();
    // Every model of the sample, with the one a PR adds: the checkpoints the demo's node has.
    for model in MODELS.iter().chain([&NEW_MODEL]) {
        let path = checkpoints.join(model);
        std::fs::create_dir_all(&path).map_err(|error| SampleError::Io {
            doing: "creating",
            path: path.clone(),
            error,
        })?;
        let _ = writeln!(table, "{model} = \"{model}\"");
    }
    let text = include_str!("../files/node.toml")
        .replace("@checkpoint_store@", &toml_string(&checkpoints)?)
        .replace("@cache_dir@", &toml_string(&dir.join("cache"))?)
        .replace("@work_dir@", &toml_string(&dir.join("work"))?)
        + &table;
    let path = dir.join("node.toml");
    std::fs::write(&path, &text).map_err(|error| SampleError::Io {
        doing: "writing",
        path: path.clone(),
        error,
    })?;
    Ok(NodeProfile::parse(&text, &path.display().to_string())?)
}

/// The sample's history: five PRs merged one after the other onto `main` (branch
/// `history/N`, each on the one before; `history/5` is the line's tip), each a small fix that
/// costs [`HISTORY_MODEL`] 1.5% of its speed. Returns them in merge order.
pub fn build_history(dir: &Path) -> Result<Vec<SamplePr>, SampleError> {
    let repo = Repository::open(dir)
        .doing(|| format!("opening the sample repository in {}", dir.display()))?;
    let main = repo.refname_to_id("refs/heads/main").doing(|| "the sample's main".to_owned())?;
    // Later than every PR's commit, and fixed, so the SHAs are too.
    let mut builder = Builder { repo: &repo, clock: 1_790_500_000 };
    let titles: [(u32, &'static str, &'static str); 5] = [
        (131, "history/1", "[Fix] [MI355X] qwen38_flash_next: bounds-check the sampler's top-k"),
        (133, "history/2", "[Fix] [MI355X] qwen38_flash_next: zero the KV pad rows"),
        (136, "history/3", "[Refactor] [MI355X] qwen38_flash_next: one launcher for the MoE steps"),
        (138, "history/4", "[Fix] [MI355X] qwen38_flash_next: fp32 accumulation in the router"),
        (141, "history/5", "[Fix] [MI355X] qwen38_flash_next: guard the decode step's stream sync"),
    ];
    let mut files = base_files();
    let mut parent = main;
    let mut tpot: f64 = BASE_TPOT_MS.parse().unwrap_or(4.0);
    let mut prs = Vec::new();
    let mut base = "main";
    for (step, (number, branch, title)) in titles.into_iter().enumerate() {
        let before = format!("tpot-ms = {tpot}");
        tpot = (tpot * HISTORY_STEP * 10_000.0).round() / 10_000.0;
        let path = format!("sgl_amd_mono/models/{HISTORY_MODEL}/sim-profile.toml");
        let profile = files.entry(path).or_default();
        let before = if step == 0 { format!("tpot-ms = {BASE_TPOT_MS}") } else { before };
        *profile = profile.replace(&before, &format!("tpot-ms = {tpot}"));
        append(
            &mut files,
            &format!("sgl_amd_mono/models/{HISTORY_MODEL}/layer.py"),
            &format!("\nFIX_{number} = True\n"),
        );
        parent = builder.commit(branch, Some(parent), &files, title)?;
        prs.push(SamplePr {
            number,
            branch: branch.to_owned(),
            base: base.to_owned(),
            title: title.to_owned(),
            head: parent.to_string(),
            reruns: false,
            drained_node: None,
        });
        base = branch;
    }
    Ok(prs)
}

/// One pull request of the sample as `files/prs.toml` writes it: a [`SamplePr`] and its edits.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPr {
    number: u32,
    branch: String,
    #[serde(default = "main_branch")]
    base: String,
    title: String,
    #[serde(default)]
    reruns: bool,
    #[serde(default, rename = "drained-node")]
    drained_node: Option<String>,
    /// What it changes in `main`'s files.
    #[serde(default)]
    edits: Vec<Edit>,
}

fn main_branch() -> String {
    "main".to_owned()
}

/// The sample's PRs (`files/prs.toml`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrs {
    pr: Vec<RawPr>,
}

/// One edit of a sample PR to `main`'s files, its kind named by `edit` (`files/prs.toml` says
/// each kind's keys): a misspelt key is refused with its name, not "no variant matched".
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "edit", rename_all = "kebab-case", deny_unknown_fields)]
enum Edit {
    Append { path: String, text: String },
    Add { path: String, file: String },
    Tpot { model: String, ms: String },
    Model { model: String },
    Replace { path: String, from: String, to: String },
}

/// The files a sample PR adds (`Edit::Add`), by their name below `files/`.
const PR_FILES: &[(&str, &str)] =
    &[("pr-126/test_cache.py", include_str!("../files/pr-126/test_cache.py"))];

impl Edit {
    /// Applies the edit of sample PR `pr` to `files`.
    fn apply(&self, pr: u32, files: &mut Files) -> Result<(), SampleError> {
        match self {
            Edit::Append { path, text } => append(files, path, text),
            Edit::Add { path, file } => {
                let (_, text) = PR_FILES
                    .iter()
                    .find(|(name, _)| name == file)
                    .ok_or_else(|| SampleError::NoFile { pr, file: file.clone() })?;
                append(files, path, text);
            }
            Edit::Tpot { model, ms } => set_tpot(files, model, ms),
            Edit::Model { model } => add_model(files, model),
            Edit::Replace { path, from, to } => {
                let text = files.entry(path.clone()).or_default();
                *text = text.replace(from.as_str(), to);
            }
        }
        Ok(())
    }
}

/// The models on the sample's `main`.
const MODELS: &[&str] =
    &["deepseek_v41", "glm53_flash", "kimi_k3", "kimi_k31", "mimo_v3_pd", "qwen38_flash_next"];

/// The model a sample PR adds (`prs.toml`, PR 110).
const NEW_MODEL: &str = "muse_spark";

/// `path` as a TOML string (a JSON string is a TOML basic string).
fn toml_string(path: &Path) -> Result<String, SampleError> {
    let text = path.to_str().ok_or_else(|| SampleError::NotUtf8 { path: path.to_path_buf() })?;
    Ok(serde_json::Value::from(text).to_string())
}

/// Each history PR's slowdown of [`HISTORY_MODEL`]: 1.5% more time per token, under the 2% a
/// PR may lose, so each passes; five of them lose 7.7%, over the guard's 3% budget.
const HISTORY_STEP: f64 = 1.015;

type Files = BTreeMap<String, String>;

/// The simulated decode speed of every model on `main`, in milliseconds per output token (the
/// `tpot-ms` of `model/sim-profile.toml`; its `sglang-tpot-ms`, SGLang's own path, is 25%
/// slower). Its `startup-delay-ms`, 2 s: a real node's load is five speed runs (10 min against
/// 2), the demo's runs take about 0.7 s, and a demo that waited five runs a load would take
/// minutes longer (it loads about 50 servers); 2 s keeps start ≫ run at about three runs. Its
/// `wake-delay-ms`, 150 ms: a real wake is a quarter of a run (30 s against 2 min).
const BASE_TPOT_MS: &str = "4.0";

/// `main`'s files beside the models' (`files/main/`, by their path in the sample).
macro_rules! main_files {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!("../files/main/", $path)))),*]
    };
}
/// `main`'s files beside the models': the manifest, the shared package and its tests, the
/// common checks, the kernel timing script, the serving test and the accuracy benchmark.
const MAIN_FILES: &[(&str, &str)] = main_files![
    ".github/CODEOWNERS",
    "README.md",
    "docs/index.md",
    "prgate.toml",
    "pyproject.toml",
    "sgl_amd_mono/__init__.py",
    "sgl_amd_mono/common/__init__.py",
    "sgl_amd_mono/common/dispatch.py",
    "sgl_amd_mono/common/guard.py",
    "test/common/test_guard.py",
    "test/common/test_guard_dispatch_kernels.py",
    "test/e2e/common.toml",
    "test/e2e/data/tiny-math.jsonl",
    "test/e2e/test_serving.py",
    "test/kernels/time_kernels.py",
];

/// A model's files (`files/model/`), by their path with `@model@` and `@kernel_test@` for the
/// model's name and its kernel test's. The recipe serves the simulated server with a tiny
/// sweep.
const MODEL_FILES: &[(&str, &str)] = &[
    ("sgl_amd_mono/models/@model@/__init__.py", include_str!("../files/model/__init__.py")),
    ("sgl_amd_mono/models/@model@/README.md", include_str!("../files/model/README.md")),
    ("sgl_amd_mono/models/@model@/layer.py", include_str!("../files/model/layer.py")),
    ("sgl_amd_mono/models/@model@/kernels.py", include_str!("../files/model/kernels.py")),
    (
        "sgl_amd_mono/models/@model@/sim-profile.toml",
        include_str!("../files/model/sim-profile.toml"),
    ),
    ("test/unit/@model@/test_layer.py", include_str!("../files/model/test_layer.py")),
    ("test/kernels/test_@model@_@kernel_test@.py", include_str!("../files/model/test_kernel.py")),
    ("test/e2e/@model@.toml", include_str!("../files/model/recipe.toml")),
];

/// What the disaggregated model's recipe adds before its `[tests]`: a prefill and a decode
/// instance of the simulated server, one GPU each, behind the real sglang-router
/// (`python3 -m sglang_router.launch_router`, which `.ci/setup-python` installs beside pytest),
/// with the transport line each must log.
const PD_TOPOLOGY: &str = include_str!("../files/model/pd-topology.toml");

fn base_files() -> Files {
    let mut files: Files =
        MAIN_FILES.iter().map(|(path, text)| ((*path).to_owned(), (*text).to_owned())).collect();
    for model in MODELS {
        add_model(&mut files, model);
    }
    files
}

/// Adds `model`'s package, tests and recipe.
fn add_model(files: &mut Files, model: &str) {
    let kernel_test = if model == "kimi_k31" { "k1_ring" } else { "k1" };
    let fill = |text: &str| text.replace("@model@", model).replace("@kernel_test@", kernel_test);
    for (path, text) in MODEL_FILES {
        files.insert(fill(path), fill(text));
    }
    if model == PD_MODEL {
        let recipe = files.entry(format!("test/e2e/{model}.toml")).or_default();
        // The topology's tables go after the recipe's top-level keys and before its own tables.
        let at = recipe.find("\n[tests]").unwrap_or(recipe.len());
        recipe.insert_str(at, &format!("\n{}", fill(PD_TOPOLOGY)));
    }
}

/// Sets `model`'s simulated time per output token.
fn set_tpot(files: &mut Files, model: &str, tpot_ms: &str) {
    let path = format!("sgl_amd_mono/models/{model}/sim-profile.toml");
    let profile = files.entry(path).or_default();
    *profile =
        profile.replace(&format!("tpot-ms = {BASE_TPOT_MS}"), &format!("tpot-ms = {tpot_ms}"));
}

fn append(files: &mut Files, path: &str, text: &str) {
    files.entry(path.to_owned()).or_default().push_str(text);
}

struct Builder<'r> {
    repo: &'r Repository,
    /// Seconds since the epoch of the next commit: fixed, so the SHAs are too.
    clock: i64,
}

impl Builder<'_> {
    /// Commits `files` as the branch `branch`'s tip, on `parent`.
    fn commit(
        &mut self,
        branch: &str,
        parent: Option<Oid>,
        files: &Files,
        message: &str,
    ) -> Result<Oid, SampleError> {
        let doing = |what: &str| format!("committing the sample's branch {branch}: {what}");
        let mut index = git2::Index::new().doing(|| doing("creating an index"))?;
        for (path, text) in files {
            let id = self.repo.blob(text.as_bytes()).doing(|| doing(&format!("writing {path}")))?;
            index
                .add(&IndexEntry {
                    ctime: IndexTime::new(0, 0),
                    mtime: IndexTime::new(0, 0),
                    dev: 0,
                    ino: 0,
                    mode: 0o100_644,
                    uid: 0,
                    gid: 0,
                    file_size: u32::try_from(text.len()).unwrap_or(u32::MAX),
                    id,
                    flags: 0,
                    flags_extended: 0,
                    path: path.as_bytes().to_vec(),
                })
                .doing(|| doing(&format!("adding {path}")))?;
        }
        let tree = index.write_tree_to(self.repo).doing(|| doing("writing its tree"))?;
        let tree = self.repo.find_tree(tree).doing(|| doing("reading its tree"))?;
        self.clock += 3600;
        let signature =
            Signature::new("prgate demo", "demo@prgate.invalid", &Time::new(self.clock, 0))
                .doing(|| doing("its author"))?;
        let parents = match parent {
            Some(oid) => vec![self.repo.find_commit(oid).doing(|| doing("reading its parent"))?],
            None => Vec::new(),
        };
        let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
        let reference = format!("refs/heads/{branch}");
        self.repo
            .commit(Some(&reference), &signature, &signature, message, &tree, &parents)
            .doing(|| doing("the commit"))
    }
}

#[cfg(test)]
mod tests {
    /// The sample's commits are the same on every build: tests, snapshots and docs may name
    /// their SHAs.
    #[test]
    fn every_build_makes_the_same_commits() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let prs = super::build(dir.path()).expect("the sample");
        let history = super::build_history(dir.path()).expect("the sample's history");
        let repo = git2::Repository::open(dir.path()).expect("the sample repository");
        // Each PR names its branch's commit: the demo merges that commit.
        for pr in prs.iter().chain(&history) {
            let branch = repo.refname_to_id(&format!("refs/heads/{}", pr.branch));
            assert_eq!(branch.expect("its branch").to_string(), pr.head, "#{}", pr.number);
        }
        let mut refs: Vec<String> = repo
            .references()
            .expect("its references")
            .map(|reference| {
                let reference = reference.expect("a reference");
                let target = reference.target().expect("a direct reference");
                format!("{} {target}", reference.name().unwrap_or_default())
            })
            .collect();
        refs.sort();
        let expected = [
            "refs/heads/history/1 4f2ca7d8c19cfcc020cf3c2ddd477640a07e4312",
            "refs/heads/history/2 329e10dcfb11f34e499cfe7fbca8c4cbad06f921",
            "refs/heads/history/3 156c81c87228d554903647a75ed8839c25079951",
            "refs/heads/history/4 ac61f8c34d91361dcfca20222a43fb5f4a059f0a",
            "refs/heads/history/5 63ed258caf0ff644e052ff11f5ddb63b6bc9a839",
            "refs/heads/main d68a4c5bad4fe542bc4a4231b4435254306ac843",
            "refs/heads/pr/101-common-residency 89d72c5e7f1d3007c75a687ae572ee8f938c8ecd",
            "refs/heads/pr/103-kimi-pair 3b13dbd6818cd094f38bf25fcc9c622de9f4d8bd",
            "refs/heads/pr/110-new-model 588fcefb4243e34a634df52d1e7c3891a0f06e6a",
            "refs/heads/pr/112-docs eab70a57a8e1dd3102711f9e48d89d27e21ff7cf",
            "refs/heads/pr/114-glm-slower 167bba1a9a71319f5dfc9ef690c4098ae2260a74",
            "refs/heads/pr/116-codeowners b1437b0968289dbba1aedae32b80d34d22e782c5",
            "refs/heads/pr/118-qwen-tiles ca9a0131799242b761b977b8c1e5b6692e07dce5",
            "refs/heads/pr/120-deepseek-router 32198dc0124d3823a42a2445e2e5229e5e2ad5ed",
            "refs/heads/pr/122-kimi-buffers 9042742b917d9ad264e06650ba91b2e65fe92925",
            "refs/heads/pr/124-glm-names 3d70196bab175e3a081f0b2c8574668aa3c721fe",
            "refs/heads/pr/126-glm-cache a69206785a5eb16975875044fdb72f89f930fd2d",
            "refs/heads/pr/128-glm-narrow e45002a1fdf9774fc91fba9a67964d0038160aad",
            "refs/heads/pr/130-mimo-pd-pages 2bf5a73667e3b730992bf387c7e655b9de8a6633",
            "refs/heads/pr/95-deepseek-perf 47dd321585c9e90abe8b217443f09a2fe34f77cd",
        ];
        assert_eq!(refs, expected);
    }

    /// A sample edit names its kind: a misspelt key is refused with its name.
    #[test]
    fn a_misspelt_edit_key_is_refused_by_name() {
        let text = "edit = \"append\"\npath = \"a.py\"\ntxt = \"x\"\n";
        let error = toml::from_str::<super::Edit>(text).expect_err("a typo");
        assert!(error.to_string().contains("unknown field `txt`"), "{error}");
        let text = "edit = \"apend\"\npath = \"a.py\"\ntext = \"x\"\n";
        let error = toml::from_str::<super::Edit>(text).expect_err("a misspelt kind");
        assert!(error.to_string().contains("unknown variant `apend`"), "{error}");
    }
}
