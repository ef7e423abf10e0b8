//! The built-in sample: a small repository shaped like a per-model monokernel repository for
//! SGLang, with a handful of pull-request branches that show every kind of scope.
//!
//! Every model serves through prgate's own simulated server (`prgate sim-server`): its recipe
//! (`test/e2e/<model>.toml`) starts `prgate` by name, as found on the command's `PATH` (on the
//! host the running prgate's folder is on it; in a container, the image's own `prgate`), with
//! the model's simulated profile (`sgl_amd_mono/models/<model>/sim-profile.toml`, whose
//! `tpot-ms` stands for the speed of the model's monokernels), so a PR that "speeds up a
//! kernel" lowers it in its tree. The server listens on every interface (`0.0.0.0`): in a
//! container, the published port reaches only those (docs/container.md).
//!
//! The files are real files in `src/sample/` (`main/`: `main`'s beside the models'; `model/`: a
//! model's, with `@model@` for its name; `pr-126/`: a PR's new test), embedded in the binary;
//! this module only assembles `main` and the PRs' branches from them. Commits have fixed authors
//! and dates and the files name no host path, so every build gives the same SHAs.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use git2::{IndexEntry, IndexTime, Oid, Repository, RepositoryInitOptions, Signature, Time};

/// One pull request of the sample: its branch, number and title.
#[derive(Debug, Clone)]
pub(crate) struct SamplePr {
    pub(crate) number: u32,
    pub(crate) branch: &'static str,
    /// The branch it is based on (`main`, or the history PR before it).
    pub(crate) base: &'static str,
    pub(crate) title: &'static str,
    /// The demo runs it twice, as a maintainer's second `run-ci` after a flaky failure: the
    /// second run takes over what the first judged and runs only what failed (docs/rerun.md).
    pub(crate) reruns: bool,
}

const MODELS: &[&str] =
    &["deepseek_v41", "glm53_flash", "kimi_k3", "kimi_k31", "mimo_v3_pd", "qwen38_flash_next"];

/// The sample's model served disaggregated: a prefill and a decode instance of the simulated
/// server behind the real `sglang-router` (docs/topology.md), on GPUs of their own.
pub(crate) const PD_MODEL: &str = "mimo_v3_pd";

/// Every model of the sample, with those its PRs add: the checkpoints the demo's node has.
pub(crate) const ALL_MODELS: &[&str] = &[
    "deepseek_v41",
    "glm53_flash",
    "kimi_k3",
    "kimi_k31",
    "mimo_v3_pd",
    "qwen38_flash_next",
    "muse_spark",
];

/// Builds the sample repository in `dir` (which must be empty or absent): `main`, and a branch
/// for every PR. Leaves `main` checked out.
pub(crate) fn build(dir: &Path) -> anyhow::Result<Vec<SamplePr>> {
    let mut options = RepositoryInitOptions::new();
    options.initial_head("main");
    let repo = Repository::init_opts(dir, &options)
        .with_context(|| format!("creating the sample repository in {}", dir.display()))?;
    let mut builder = Builder { repo: &repo, clock: 1_790_000_000 };

    let base_files = base_files();
    let main =
        builder.commit("refs/heads/main", None, &base_files, "Sample monokernel repository")?;

    let mut prs = Vec::new();
    let mut pr =
        |number: u32, branch: &'static str, title: &'static str, edit: &dyn Fn(&mut Files)| {
            let mut files = base_files.clone();
            edit(&mut files);
            builder.commit(&format!("refs/heads/{branch}"), Some(main), &files, title)?;
            prs.push(SamplePr { number, branch, base: "main", title, reruns: false });
            anyhow::Ok(())
        };
    pr(
        95,
        "pr/95-deepseek-perf",
        "[Perf] [MI355X] deepseek_v41: DSpark step glue in fewer launches",
        &|files| {
            append(
                files,
                "sgl_amd_mono/models/deepseek_v41/kernels.py",
                "\ndef fused_step_glue(x):\n    return x\n",
            );
            set_tpot(files, "deepseek_v41", PERF_TPOT_MS);
        },
    )?;
    pr(
        101,
        "pr/101-common-residency",
        "[Fix] common: check each compiled kernel's residency and scratch",
        &|files| {
            append(
                files,
                "sgl_amd_mono/common/guard.py",
                "\ndef check_residency(kernel):\n    return kernel.scratch_bytes < 65536\n",
            );
        },
    )?;
    pr(
        103,
        "pr/103-kimi-pair",
        "[Feat] [MI355X] kimi_k3/kimi_k31: gfx950 launches, steps of up to 8 rows",
        &|files| {
            append(files, "sgl_amd_mono/models/kimi_k3/layer.py", "\nGFX950_LAUNCH = True\n");
            append(files, "sgl_amd_mono/models/kimi_k31/layer.py", "\nMAX_STEP_ROWS = 8\n");
            append(
                files,
                "test/kernels/test_kimi_k31_k1_ring.py",
                "\ndef test_eight_rows():\n    assert True\n",
            );
            set_tpot(files, "kimi_k31", PERF_TPOT_MS);
        },
    )?;
    pr(110, "pr/110-new-model", "[Feat] [MI355X] muse_spark: first monokernel", &|files| {
        add_model(files, "muse_spark");
        append(files, ".github/CODEOWNERS", "/sgl_amd_mono/models/muse_spark/ @muse-team\n");
    })?;
    pr(112, "pr/112-docs", "[Doc] docs: explain the tiers", &|files| {
        append(files, "docs/index.md", "\n## Tiers\n\nFull, smoke and none.\n");
    })?;
    pr(
        114,
        "pr/114-glm-slower",
        "[Fix] [MI355X] glm53_flash: bounds-check every row of the decode step",
        &|files| {
            append(
                files,
                "sgl_amd_mono/models/glm53_flash/kernels.py",
                "\ndef check_rows(x):\n    return all(row is not None for row in x)\n",
            );
            set_tpot(files, "glm53_flash", SLOW_TPOT_MS);
        },
    )?;
    pr(
        118,
        "pr/118-qwen-tiles",
        "[Perf] [MI355X] qwen38_flash_next: reorder the attention tiles",
        &|files| {
            // A new tile order that turns out no faster: the [Perf] title needs a gain.
            append(
                files,
                "sgl_amd_mono/models/qwen38_flash_next/kernels.py",
                "\nTILE_ORDER = (\"k\", \"q\")\n",
            );
        },
    )?;
    pr(
        120,
        "pr/120-deepseek-router",
        "[Fix] [MI355X] deepseek_v41: cheaper rounding in the MoE router",
        &|files| {
            append(
                files,
                "sgl_amd_mono/models/deepseek_v41/layer.py",
                "\nROUTER_ROUNDING = \"bf16\"\n",
            );
            // The cheaper rounding costs answers.
            append(files, "sgl_amd_mono/models/deepseek_v41/sim-profile.toml", "accuracy = 0.7\n");
        },
    )?;
    pr(122, "pr/122-kimi-buffers", "[Fix] [MI355X] kimi_k3: larger decode buffers", &|files| {
        append(files, "sgl_amd_mono/models/kimi_k3/layer.py", "\nDECODE_BUFFER_ROWS = 64\n");
        // The larger buffers overrun the device: the PR's server dies once it is loaded.
        append(files, "sgl_amd_mono/models/kimi_k3/sim-profile.toml", "die-after-requests = 3\n");
    })?;
    pr(
        124,
        "pr/124-glm-names",
        "[Fix] [MI355X] glm53_flash: name the decode step's buffers",
        &|files| {
            // An ordinary fix, run while the fleet's second node is drained (the demo strikes
            // it before this PR: docs/node.md).
            append(
                files,
                "sgl_amd_mono/models/glm53_flash/layer.py",
                "\nDECODE_BUFFER_NAMES = (\"keys\", \"values\")\n",
            );
        },
    )?;
    pr(116, "pr/116-codeowners", "[Chore] maintainer: hand kimi_k3 to a new team", &|files| {
        let codeowners = files.entry(".github/CODEOWNERS".to_owned()).or_default();
        *codeowners = codeowners.replace(
            "/sgl_amd_mono/models/kimi_k3/ @kimi-k3-team",
            "/sgl_amd_mono/models/kimi_k3/ @someone-else",
        );
    })?;

    pr(126, "pr/126-glm-cache", "[Fix] [MI355X] glm53_flash: warm the kernel cache", &|files| {
        append(files, "sgl_amd_mono/models/glm53_flash/layer.py", "\nWARM_CACHE = True\n");
        // A flaky test: it fails the first time it runs on the node and passes afterwards.
        append(files, "test/unit/glm53_flash/test_cache.py", FLAKY_TEST);
    })?;
    pr(
        128,
        "pr/128-glm-narrow",
        "[Fix] [MI355X] glm53_flash: bounds-check the rows, measured where it does not show",
        &|files| {
            append(
                files,
                "sgl_amd_mono/models/glm53_flash/kernels.py",
                "\ndef check_all_rows(x):\n    return all(row is not None for row in x)\n",
            );
            set_tpot(files, "glm53_flash", SLOW_TPOT_MS);
            // The PR drops the covered cell its slower kernel would lose at: base's recipe is
            // the contract, so the cell is measured anyway and the narrowing fails.
            let recipe = files.entry("test/e2e/glm53_flash.toml".to_owned()).or_default();
            *recipe = recipe.replace("covered = [1]", "covered = []");
        },
    )?;

    pr(
        130,
        "pr/130-mimo-pd-pages",
        "[Fix] [MI355X] mimo_v3_pd: hand the KV cache over in pages of 64 tokens",
        &|files| {
            append(files, &format!("sgl_amd_mono/models/{PD_MODEL}/layer.py"), "\nKV_PAGE = 64\n");
            // Its decode instance is now told to move the pages over TCP: the recipe's
            // required transport line (RDMA) is missing, and the routing check fails instead of
            // a slower run passing (docs/topology.md).
            let recipe = files.entry(format!("test/e2e/{PD_MODEL}.toml")).or_default();
            *recipe = recipe.replace(
                "--disaggregation-mode decode",
                "--disaggregation-mode decode --disaggregation-transport tcp",
            );
        },
    )?;

    if let Some(flaky) = prs.iter_mut().find(|pr| pr.number == 126) {
        flaky.reruns = true;
    }

    let mut checkout = git2::build::CheckoutBuilder::new();
    checkout.force();
    repo.checkout_head(Some(&mut checkout))
        .context("checking out main in the sample repository")?;
    Ok(prs)
}

/// The model whose history the demo's drift guard follows (docs/history.md).
pub(crate) const HISTORY_MODEL: &str = "qwen38_flash_next";

/// Each history PR's slowdown of [`HISTORY_MODEL`]: 1.5% more time per token, under the 2% a
/// PR may lose, so each passes; five of them lose 7.7%, over the guard's 3% budget.
const HISTORY_STEP: f64 = 1.015;

/// The sample's history: five PRs merged one after the other onto `main` (branch
/// `history/N`, each on the one before; `history/5` is the line's tip), each a small fix that
/// costs [`HISTORY_MODEL`] 1.5% of its speed. Returns them in merge order.
pub(crate) fn build_history(dir: &Path) -> anyhow::Result<Vec<SamplePr>> {
    let repo = Repository::open(dir)
        .with_context(|| format!("opening the sample repository in {}", dir.display()))?;
    let main = repo.refname_to_id("refs/heads/main").context("the sample's main")?;
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
        parent = builder.commit(&format!("refs/heads/{branch}"), Some(parent), &files, title)?;
        prs.push(SamplePr { number, branch, base, title, reruns: false });
        base = branch;
    }
    Ok(prs)
}

type Files = BTreeMap<String, String>;

/// The simulated decode speed of every model on `main`, in milliseconds per output token (the
/// `tpot-ms` of `model/sim-profile.toml`; its `sglang-tpot-ms`, SGLang's own path, is 25%
/// slower). Its `startup-delay-ms`, 2 s: a real node's load is five speed runs (10 min against
/// 2), the demo's runs take about 0.7 s, and a demo that waited five runs a load would take
/// minutes longer (it loads about 50 servers); 2 s keeps start ≫ run at about three runs. Its
/// `wake-delay-ms`, 150 ms: a real wake is a quarter of a run (30 s against 2 min).
const BASE_TPOT_MS: &str = "4.0";
/// A PR that speeds a model up: 25% less time per token.
const PERF_TPOT_MS: &str = "3.0";
/// A PR that slows a model down: 25% more time per token.
const SLOW_TPOT_MS: &str = "5.0";

/// `main`'s files beside the models' (`sample/main/`, by their path in the sample).
macro_rules! main_files {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!("sample/main/", $path)))),*]
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

/// A model's files (`sample/model/`), by their path with `@model@` and `@kernel_test@` for the
/// model's name and its kernel test's. The recipe serves the simulated server with a tiny
/// sweep.
const MODEL_FILES: &[(&str, &str)] = &[
    ("sgl_amd_mono/models/@model@/__init__.py", include_str!("sample/model/__init__.py")),
    ("sgl_amd_mono/models/@model@/README.md", include_str!("sample/model/README.md")),
    ("sgl_amd_mono/models/@model@/layer.py", include_str!("sample/model/layer.py")),
    ("sgl_amd_mono/models/@model@/kernels.py", include_str!("sample/model/kernels.py")),
    ("sgl_amd_mono/models/@model@/sim-profile.toml", include_str!("sample/model/sim-profile.toml")),
    ("test/unit/@model@/test_layer.py", include_str!("sample/model/test_layer.py")),
    ("test/kernels/test_@model@_@kernel_test@.py", include_str!("sample/model/test_kernel.py")),
    ("test/e2e/@model@.toml", include_str!("sample/model/recipe.toml")),
];

/// What the disaggregated model's recipe adds before its `[tests]`: a prefill and a decode
/// instance of the simulated server, one GPU each, behind the real sglang-router
/// (`python3 -m sglang_router.launch_router`, which `.ci/setup-python` installs beside pytest),
/// with the transport line each must log.
const PD_TOPOLOGY: &str = include_str!("sample/model/pd-topology.toml");

/// PR #126's flaky unit test: its marker is in the node's `trees/` folder, which outlives a
/// run (each run exports its trees afresh below it).
const FLAKY_TEST: &str = include_str!("sample/pr-126/test_cache.py");

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
    fn commit(
        &mut self,
        reference: &str,
        parent: Option<Oid>,
        files: &Files,
        message: &str,
    ) -> anyhow::Result<Oid> {
        let mut index = git2::Index::new().context("creating an index")?;
        for (path, text) in files {
            let id = self.repo.blob(text.as_bytes()).with_context(|| format!("writing {path}"))?;
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
                .with_context(|| format!("adding {path}"))?;
        }
        let tree =
            self.repo.find_tree(index.write_tree_to(self.repo).context("writing a tree")?)?;
        self.clock += 3600;
        let signature =
            Signature::new("prgate demo", "demo@prgate.invalid", &Time::new(self.clock, 0))?;
        let parents = match parent {
            Some(oid) => vec![self.repo.find_commit(oid)?],
            None => Vec::new(),
        };
        let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
        let oid =
            self.repo.commit(Some(reference), &signature, &signature, message, &tree, &parents)?;
        Ok(oid)
    }
}
