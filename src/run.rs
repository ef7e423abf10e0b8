//! `prgate run`: runs a plan on this node and writes the evidence, one file per finished step.
//! The step loop is the runner's (`prgate_runner::run`); this is its CLI.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use prgate_runner::container::{Engine, RunId};
use prgate_runner::node::NodeProfile;
use prgate_runner::preflight::Thresholds;
use prgate_runner::run::{
    DEFAULT_COMMON_RECIPE_PATH, DEFAULT_RECIPE_PATH, Isolation, PreflightMode, RunRequest,
};
use prgate_scope::Plan;

use crate::files::read_json;

/// Run a plan's checks on this node, base and PR side by side, and write the evidence into
/// DIR/evidence (one file per finished step; a rerun resumes). Exits 0 when the run finished,
/// whatever the evidence says, and 2 on an error.
///
/// Every command from the PR's tree (installs, servers, tests, timing scripts, evaluators,
/// benchmarks) runs in the node profile's image through docker or podman (docs/container.md);
/// `--isolation host` runs them on this machine instead, for trees you trust.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The plan, as `prgate plan --format json` wrote it.
    #[arg(long, value_name = "FILE")]
    plan: PathBuf,
    /// This node's profile (docs/node-profile.md).
    #[arg(long, value_name = "FILE")]
    node: PathBuf,
    /// The results directory: evidence, logs.
    #[arg(long, value_name = "DIR")]
    results: PathBuf,
    /// The git repository that holds the plan's commits.
    #[arg(long, value_name = "DIR", default_value = ".")]
    repo: PathBuf,
    /// Append the JSON-lines event stream to this file.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// The PR's title, for the gain rule: a [Perf] or [Feat] PR's speed cells run until the
    /// gain is decided too.
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
    /// The Python interpreter that runs pytest.
    #[arg(long, value_name = "PROGRAM", default_value = "python3")]
    python: PathBuf,
    /// The whole run's time limit (90s, 20m, 1h30m): once it has passed, every step still to
    /// run is recorded as a timeout without running.
    #[arg(long, value_name = "DURATION", value_parser = parse_time_limit)]
    time_limit: Option<std::time::Duration>,
    /// Where the common checks' recipe is in the PR's tree.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_COMMON_RECIPE_PATH)]
    common_recipe: String,
    /// Where commands from the PR run: in the node's container image, or on this machine
    /// (only for trees you trust: nothing isolates them).
    #[arg(long, value_enum, default_value_t = IsolationArg::Container)]
    isolation: IsolationArg,
    /// The container engine's client (default: docker on the PATH, else podman).
    #[arg(long, value_name = "PROGRAM")]
    engine: Option<PathBuf>,
    /// When another run holds this host's lock, wait up to this long (90s, 20m, 2h) instead
    /// of refusing at once.
    #[arg(long, value_name = "DURATION", value_parser = parse_time_limit)]
    wait_lock: Option<std::time::Duration>,
    /// Check the node before any install (docs/preflight.md): GPUs visible and free, disk,
    /// checkpoints, image. What it finds lacking is recorded as not-run evidence.
    #[arg(long, value_enum, default_value_t = Switch::On)]
    preflight: Switch,
    /// Read device nodes and sysfs under this folder instead of / (for testing the preflight).
    #[arg(long, value_name = "DIR", default_value = "/")]
    preflight_root: PathBuf,
    /// The free disk space the preflight asks of the work and cache directories, in GiB
    /// (default: 50 for the work directory, 10 for the cache).
    #[arg(long, value_name = "GIB")]
    min_free_disk: Option<u64>,
}

/// On or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Switch {
    On,
    Off,
}

/// `--isolation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum IsolationArg {
    Container,
    Host,
}

pub(crate) fn parse_time_limit(text: &str) -> Result<std::time::Duration, String> {
    prgate_runner::recipe::parse_duration(text)
}

pub(crate) fn run(args: &RunArgs) -> anyhow::Result<()> {
    let plan: Plan = read_json(&args.plan, "plan")?;
    let node_text = std::fs::read_to_string(&args.node)
        .with_context(|| format!("reading the node profile {}", args.node.display()))?;
    let node = NodeProfile::parse(&node_text, &args.node.display().to_string())?;
    let base = crate::gate::BaseSide::read(&args.repo, &plan).with_context(|| {
        format!(
            "reading the base side's settings in {} (name the repository with --repo)",
            args.repo.display()
        )
    })?;
    let gain_required =
        prgate_gate::title::requires_gain(args.title.as_deref(), &base.config.gain.types);
    let isolation = isolation(args.isolation, args.engine.as_deref(), &plan, &args.results)?;
    let preflight = preflight_mode(args.preflight, &args.preflight_root, args.min_free_disk);
    let request = RunRequest {
        plan: &plan,
        repo: &args.repo,
        node: &node,
        results: &args.results,
        events: args.events.as_deref(),
        recipe_path: DEFAULT_RECIPE_PATH,
        gate: &base.config,
        gain_required,
        python: &args.python,
        common_recipe_path: &args.common_recipe,
        time_limit: args.time_limit,
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        isolation: &isolation,
        wait_lock: args.wait_lock,
        preflight: &preflight,
    };
    let summary = prgate_runner::run::run(&request).context("running the plan")?;
    for note in &summary.notes {
        eprintln!("note: {note}");
    }
    eprintln!(
        "{} steps recorded, {} already recorded by an earlier run; evidence in {}",
        summary.recorded,
        summary.skipped,
        args.results.join("evidence").display()
    );
    Ok(())
}

/// Where a run's commands run, from the command line.
pub(crate) fn isolation(
    choice: IsolationArg,
    engine: Option<&std::path::Path>,
    plan: &Plan,
    results: &std::path::Path,
) -> anyhow::Result<Isolation> {
    Ok(match choice {
        IsolationArg::Host => Isolation::Host,
        IsolationArg::Container => {
            let engine = match engine {
                Some(program) => Engine::at(program),
                None => Engine::detect(std::env::var_os("PATH").as_deref()).context(
                    "no container engine; install docker or podman, or run trusted trees with --isolation host",
                )?,
            };
            Isolation::Container { engine, run: run_id(plan, results)? }
        }
    })
}

/// The preflight, from the command line.
pub(crate) fn preflight_mode(
    switch: Switch,
    root: &std::path::Path,
    min_free_disk: Option<u64>,
) -> PreflightMode {
    match switch {
        Switch::Off => PreflightMode::Off,
        Switch::On => {
            let mut thresholds = Thresholds::default();
            if let Some(gib) = min_free_disk {
                thresholds.min_free_work_bytes = gib.saturating_mul(1 << 30);
                thresholds.min_free_cache_bytes = gib.saturating_mul(1 << 30);
            }
            PreflightMode::On { root: root.to_path_buf(), thresholds }
        }
    }
}

/// The run's id, which names its containers: the PR commit's first 12 digits and a hash of the
/// results directory, so that a resumed run (same directory) finds a killed attempt's
/// containers, and two runs of one commit into two directories do not share them.
fn run_id(plan: &Plan, results: &std::path::Path) -> anyhow::Result<RunId> {
    let absolute = std::path::absolute(results)
        .with_context(|| format!("the results directory {}", results.display()))?;
    let hash = prgate_runner::run::recipe_hash(absolute.as_os_str().as_encoded_bytes());
    let sha: String = plan.head.sha.chars().take(12).collect();
    let id = format!("{sha}-{}", &hash["fnv1a64:".len().."fnv1a64:".len() + 8]);
    Ok(RunId::new(&id)?)
}
