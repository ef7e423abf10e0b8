//! `prgate run`: runs a plan on this node and writes the evidence, one file per finished step.
//! The step loop is the runner's (`prgate_runner::run`); this is its CLI.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use prgate_runner::node::NodeProfile;
use prgate_runner::run::{DEFAULT_COMMON_RECIPE_PATH, DEFAULT_RECIPE_PATH, RunRequest};
use prgate_scope::Plan;

use crate::files::read_json;

/// Run a plan's checks on this node, base and PR side by side, and write the evidence into
/// DIR/evidence (one file per finished step; a rerun resumes). Exits 0 when the run finished,
/// whatever the evidence says, and 2 on an error.
///
/// This version runs every command on the host (the local executor): containers are still to
/// come, so run only trusted trees with it.
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
}

fn parse_time_limit(text: &str) -> Result<std::time::Duration, String> {
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
