//! The built-in sample: a small repository shaped like a per-model monokernel repository for
//! SGLang, with a handful of pull-request branches that show every kind of scope.
//!
//! Commits have fixed authors and dates, so the same build gives the same SHAs everywhere.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use git2::{IndexEntry, IndexTime, Oid, Repository, RepositoryInitOptions, Signature, Time};

/// One pull request of the sample: its branch, number and title.
#[derive(Debug, Clone)]
pub(crate) struct SamplePr {
    pub(crate) number: u32,
    pub(crate) branch: &'static str,
    pub(crate) title: &'static str,
}

/// The sample's manifest.
const MANIFEST: &str = r#"# How prgate scopes this repository: docs/manifest.md in prgate's repository.
[scope]
models = ["sgl_amd_mono/models/{model}/**", "test/unit/{model}/**",
          "test/kernels/test_{model}_*.py", "test/e2e/{model}.toml"]
shared = ["sgl_amd_mono/__init__.py", "sgl_amd_mono/common/**", "pyproject.toml", "test/common/**"]
ignore = ["docs/**"]
codeowners = ".github/CODEOWNERS"
readme = "sgl_amd_mono/models/{model}/README.md"
"#;

const MODELS: &[&str] =
    &["deepseek_v41", "glm53_flash", "kimi_k3", "kimi_k31", "qwen38_flash_next"];

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
            prs.push(SamplePr { number, branch, title });
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
        },
    )?;
    pr(
        101,
        "pr/101-common-residency",
        "[Feat] common: check each compiled kernel's residency and scratch",
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
        },
    )?;
    pr(110, "pr/110-new-model", "[Feat] [MI355X] muse_spark: first monokernel", &|files| {
        add_model(files, "muse_spark");
        append(files, ".github/CODEOWNERS", "/sgl_amd_mono/models/muse_spark/ @muse-team\n");
    })?;
    pr(112, "pr/112-docs", "[Doc] docs: explain the tiers", &|files| {
        append(files, "docs/index.md", "\n## Tiers\n\nFull, smoke and none.\n");
    })?;

    let mut checkout = git2::build::CheckoutBuilder::new();
    checkout.force();
    repo.checkout_head(Some(&mut checkout))
        .context("checking out main in the sample repository")?;
    Ok(prs)
}

type Files = BTreeMap<String, String>;

fn base_files() -> Files {
    let mut files = Files::new();
    let mut put = |path: &str, text: &str| {
        files.insert(path.to_owned(), text.to_owned());
    };
    put("prgate.toml", MANIFEST);
    put("README.md", "# sgl-amd-mono (sample)\n\nPer-model AMD monokernels for SGLang.\n");
    put("pyproject.toml", "[project]\nname = \"sgl-amd-mono\"\nversion = \"0.1.0\"\n");
    put("docs/index.md", "# Documentation\n");
    put("sgl_amd_mono/__init__.py", "\"\"\"Per-model AMD monokernels.\"\"\"\n");
    put("sgl_amd_mono/common/__init__.py", "");
    put("sgl_amd_mono/common/guard.py", "def guard(kernel):\n    return kernel is not None\n");
    put(
        "sgl_amd_mono/common/dispatch.py",
        "def dispatch(model, batch):\n    return model(batch)\n",
    );
    put("test/common/test_guard.py", "def test_guard():\n    assert True\n");
    put("test/common/test_guard_dispatch_kernels.py", "def test_dispatch():\n    assert True\n");
    let mut codeowners =
        String::from("# Owners of each model's package.\n* @sgl-amd-mono/maintainers\n");
    for model in MODELS {
        add_model(&mut files, model);
        codeowners.push_str(&format!(
            "/sgl_amd_mono/models/{model}/ @{}-team\n",
            model.replace('_', "-")
        ));
    }
    files.insert(".github/CODEOWNERS".to_owned(), codeowners);
    files
}

fn add_model(files: &mut Files, model: &str) {
    let mut put = |path: String, text: String| {
        files.insert(path, text);
    };
    put(format!("sgl_amd_mono/models/{model}/__init__.py"), String::new());
    put(
        format!("sgl_amd_mono/models/{model}/README.md"),
        format!("# {model}\n\nMonokernel for {model}.\n"),
    );
    put(
        format!("sgl_amd_mono/models/{model}/layer.py"),
        "def forward(x):\n    return x\n".to_owned(),
    );
    put(format!("sgl_amd_mono/models/{model}/kernels.py"), "def k1(x):\n    return x\n".to_owned());
    put(
        format!("test/unit/{model}/test_layer.py"),
        "def test_forward():\n    assert True\n".to_owned(),
    );
    let kernel_test = if model == "kimi_k31" { "k1_ring" } else { "k1" };
    put(
        format!("test/kernels/test_{model}_{kernel_test}.py"),
        "def test_k1():\n    assert True\n".to_owned(),
    );
    put(
        format!("test/e2e/{model}.toml"),
        format!("# Serving recipe of {model}.\n[server]\ncheckpoint = \"{model}\"\n"),
    );
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
