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
//! Commits have fixed authors and dates and the files name no host path, so every build gives
//! the same SHAs.

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

/// The simulated decode speed of every model on `main`, in milliseconds per output token.
/// SGLang's own path in the simulated profiles: 25% slower than the monokernels' 4.0 ms.
const SGLANG_TPOT_MS: &str = "5.0";
const BASE_TPOT_MS: &str = "4.0";
/// How long a sample server takes to load (its `startup-delay-ms`): a real node's load is five
/// speed runs (10 min against 2), the demo's runs take about 0.7 s, and a demo that waited five
/// runs a load would take minutes longer (it loads about 50 servers); 2 s keeps start ≫ run at
/// about three runs.
const STARTUP_DELAY_MS: u32 = 2000;
/// How long a released sample server takes to wake (its `wake-delay-ms`): a real wake is a
/// quarter of a run (30 s against 2 min).
const WAKE_DELAY_MS: u32 = 150;
/// A PR that speeds a model up: 25% less time per token.
const PERF_TPOT_MS: &str = "3.0";
/// A PR that slows a model down: 25% more time per token.
const SLOW_TPOT_MS: &str = "5.0";

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
    put(
        "test/e2e/common.toml",
        "# The common checks: shared unit tests and the guard/dispatch kernel tests.\n[tests]\nunit = [\"test/common/test_guard.py\"]\nkernel = [\"test/common/test_guard_dispatch_kernels.py\"]\n",
    );
    put("test/kernels/time_kernels.py", TIMING_SCRIPT);
    put("test/e2e/test_serving.py", SERVING_TEST);
    put("test/e2e/data/tiny-math.jsonl", &tiny_math());
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
        format!("sgl_amd_mono/models/{model}/sim-profile.toml"),
        format!(
            "# How fast prgate's simulated server serves {model}: the monokernels' speed.\n\
             model = \"{model}\"\nttft-ms = 5.0\ntpot-ms = {BASE_TPOT_MS}\nnoise-cv = 0.01\n\
             # SGLang's own path, without the monokernels: slower.\nsglang-tpot-ms = {SGLANG_TPOT_MS}\n\
             # A real node's proportions scaled to seconds: a load (10 min there) takes about three\n\
             # speed runs (2 min there), a wake (30 s there) a small part of one.\n\
             startup-delay-ms = {STARTUP_DELAY_MS}\nwake-delay-ms = {WAKE_DELAY_MS}\n"
        ),
    );
    let recipe = if model == PD_MODEL { pd_recipe(model) } else { recipe(model, kernel_test) };
    put(format!("test/e2e/{model}.toml"), recipe);
}

/// The serving recipe of `model`: the simulated server, a tiny sweep.
fn recipe(model: &str, kernel_test: &str) -> String {
    let command = format!(
        "prgate sim-server --listen 0.0.0.0:{{port}} \
         --profile sgl_amd_mono/models/{model}/sim-profile.toml {{extra_args}}"
    );
    // A JSON string is a TOML basic string.
    let command = serde_json::to_string(&command).unwrap_or_default();
    format!(
        r#"# Serving recipe of {model} (docs/recipe.md in prgate's repository). The server is
# prgate's simulated server (`prgate` on the PATH: the image's in a container), from the
# directory of the tree under test, on every interface: a container's published port reaches
# only those, never its loopback.
hardware = ["mi355x"]
checkpoint = "{model}"
# Both of the demo's node's GPUs: base's and the PR's servers take turns on them (one at a
# time, as a big model's do on a real node).
tp = 2

[server]
command = {command}
monokernel-flag = "--enable-amd-monokernel"
startup-timeout = "30s"
routing-pattern = '\[monokernel\] routed \S+ decode'
# The simulated server speaks SGLang's memory API: one server at a time (the demo's node has
# one GPU), each side loads once and every switch is a wake, which the estimate counts too.
memory-api = "sglang"

[tests]
unit = ["test/unit/{model}"]
kernel = ["test/kernels/test_{model}_{kernel_test}.py"]
serving = ["test/e2e/test_serving.py"]

[[kernel-timing]]
name = "decode"
command = "python3 test/kernels/time_kernels.py sgl_amd_mono/models/{model}/sim-profile.toml {{output}}"

[[accuracy]]
name = "tiny-math"
evaluator = "builtin"
dataset = "test/e2e/data/tiny-math.jsonl"
limit = 40

[speed]
concurrencies = [1, 4]
covered = [1]
input-len = 16
# 64 tokens at 4 ms: a 252 ms span per request, so a loaded machine's few milliseconds of
# wake-up jitter leave a run CV of about 2% (16 tokens: 6.5%, which 16 pairs cannot decide, and
# a cell undecided at the cap is an error, docs/gate.md).
output-len = 64
requests-per-concurrency = 2
warmup-per-concurrency = 1

[timeouts]
unit-tests = "2m"
kernel-tests = "2m"
serving-tests = "2m"
kernel-timing = "1m"
accuracy = "2m"
speed-run = "1m"
"#
    )
}

/// The recipe of the disaggregated model: a prefill and a decode instance of the simulated
/// server, one GPU each, behind the real sglang-router (`python3 -m sglang_router.launch_router`,
/// which `.ci/setup-python` installs beside pytest), with the transport line each must log.
fn pd_recipe(model: &str) -> String {
    let regular = recipe(model, "k1");
    let server = |mode: &str| {
        format!(
            "prgate sim-server --listen {{host}}:{{port}} \
             --profile sgl_amd_mono/models/{model}/sim-profile.toml --disaggregation-mode {mode}"
        )
    };
    let router = "python3 -m sglang_router.launch_router --pd-disaggregation --host {host} \
                  --port {port} --prometheus-port {metrics_port} --policy round_robin \
                  --log-level warn {extra_args}";
    let quote = |text: &str| serde_json::to_string(text).unwrap_or_default();
    let topology = format!(
        r#"
# Served disaggregated: one prefill and one decode instance on a GPU each, behind the real
# sglang-router in PD mode; every request goes through the router (docs/topology.md).
[topology.prefill]
instances = 1
tp = 1
command = {prefill}
# The KV transfer must go over RDMA: a fallback to TCP fails the routing check.
required-log = ['transfer-backend=mooncake transport=rdma']

[topology.decode]
instances = 1
tp = 1
command = {decode}
required-log = ['kv from \S+ transfer-backend=mooncake transport=rdma']

[topology.router]
command = {router}
startup-timeout = "1m"
"#,
        prefill = quote(
            &(server("prefill") + " --disaggregation-bootstrap-port {bootstrap_port} {extra_args}")
        ),
        decode = quote(&(server("decode") + " {extra_args}")),
        router = quote(router),
    );
    // The topology's tables go after the recipe's top-level keys and before its own tables.
    let at = regular.find("\n[tests]").unwrap_or(regular.len());
    format!("{}{topology}{}", &regular[..at], &regular[at..])
}

/// PR #126's flaky unit test: its marker is in the node's `trees/` folder, which outlives a
/// run (each run exports its trees afresh below it).
const FLAKY_TEST: &str = r#"from pathlib import Path


def test_warm_cache():
    # Flaky: the first run on a node finds the kernel cache cold; every later run passes.
    mark = Path(__file__).resolve().parents[4] / "pr-126-kernel-cache"
    if not mark.exists():
        mark.write_text("warm\n")
        raise AssertionError("the kernel cache was cold (a flaky failure: a rerun passes)")
"#;

/// The kernel timing script: the decode step's time from the tree's simulated profile.
const TIMING_SCRIPT: &str = r#"# Times the decode kernel: here, reads its time from the simulated profile (argv[1]), and
# writes the timing JSON (docs/recipe.md in prgate's repository) to argv[2].
import json
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    tpot_us = tomllib.load(f)["tpot-ms"] * 1000.0
timings = {"kernels": [{"name": "decode_step",
                        "samples_us": [tpot_us * f for f in (0.99, 1.0, 1.01, 1.0, 0.995)]}]}
with open(sys.argv[2], "w") as f:
    json.dump(timings, f)
print(json.dumps(timings))
"#;

/// The serving test: the model's server answers.
const SERVING_TEST: &str = r#"import json
import os
import urllib.request


def test_the_server_answers():
    url = os.environ["PRGATE_SERVER_URL"]
    assert urllib.request.urlopen(url + "/health", timeout=10).status == 200
    request = urllib.request.Request(
        url + "/v1/completions",
        data=json.dumps({"model": "default", "prompt": "Hello", "max_tokens": 4}).encode(),
        headers={"Content-Type": "application/json"},
    )
    body = json.load(urllib.request.urlopen(request, timeout=10))
    assert body["choices"][0]["text"]
"#;

/// The accuracy benchmark: 40 sums, each question with the line `expected: <answer>` that the
/// simulated server answers (at its profile's accuracy).
fn tiny_math() -> String {
    (1..=40)
        .map(|n| {
            let (a, b) = (n * 7 % 23 + 2, n * 13 % 31 + 5);
            format!(
                "{{\"id\": \"q{n}\", \"question\": \"What is {a} + {b}?\\nexpected: {sum}\", \"answer\": \"{sum}\"}}\n",
                sum = a + b
            )
        })
        .collect()
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
