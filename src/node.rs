//! `prgate node`: a node's health ledger (docs/node.md): its state, its strikes, a drain or an
//! admit by hand, the canary that re-admits it, and the strikes a run's results hold against
//! it. The ledger, the canary and what counts as a strike are the runner's
//! (`prgate_runner::health`); this is their command line.

use std::path::PathBuf;
use std::time::SystemTime;

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use prgate_runner::health::{self, Canary, Ledger, Source, Status};
use prgate_runner::node::NodeProfile;
use prgate_runner::preflight::SystemCommands;

use crate::gate::Outcome;

/// A GPU node's health: the failures prgate attributes to it, whether it is drained, and the
/// canary that re-admits it (docs/node.md).
#[derive(Debug, Args)]
pub(crate) struct NodeArgs {
    #[command(subcommand)]
    command: NodeCommand,
}

#[derive(Debug, Subcommand)]
enum NodeCommand {
    /// The node's state: exits 0 when it takes work, 1 when it is drained.
    Status(StatusArgs),
    /// The strikes, drains and admits since the node was last admitted, oldest first.
    Strikes(Target),
    /// Drain the node by hand: no more work until it is admitted.
    Drain(ReasonArgs),
    /// Admit the node by hand: its strikes so far no longer count.
    Admit(ReasonArgs),
    /// Run the canary on this node (the GPU preflight, then the profile's health.canary
    /// command); when it passes, the node is admitted. Exits 0 when it passed, 1 when not.
    Canary(CanaryArgs),
    /// Record the strikes a run's results directory holds against the node: steps broken on
    /// base and PR, GPU errors in base-side server logs.
    Scan(ScanArgs),
    /// Print a nodes file (the workflow's nodes.toml) without the nodes the health ledger has
    /// drained, so the schedule leaves them out; fails when every node is drained.
    Filter(FilterArgs),
}

#[derive(Debug, Args)]
struct FilterArgs {
    /// A node profile whose health directory holds the nodes' ledgers (a shared health.dir).
    #[arg(long, value_name = "FILE")]
    node: PathBuf,
    /// The nodes file: `[[node]]` tables with a `name`.
    #[arg(long, value_name = "FILE")]
    nodes: PathBuf,
}

/// Which node's ledger.
#[derive(Debug, Args)]
struct Target {
    /// The node's profile (docs/node-profile.md): its health table and directories.
    #[arg(long, value_name = "FILE")]
    node: PathBuf,
    /// The ledger's node name [default: SLURMD_NODENAME in a SLURM job, else the profile's
    /// name].
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
}

#[derive(Debug, Args)]
struct StatusArgs {
    #[command(flatten)]
    target: Target,
    /// Every node with a ledger in the health directory, not only this one; exits 1 when
    /// any is drained.
    #[arg(long)]
    all: bool,
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Human,
    Json,
}

#[derive(Debug, Args)]
struct ReasonArgs {
    #[command(flatten)]
    target: Target,
    /// Why, in words, for the ledger.
    #[arg(long, value_name = "TEXT")]
    reason: String,
    /// With a profile that has health.slurm-drain, the folder of SLURM's programs for
    /// `scontrol` [default: found in the PATH].
    #[arg(long, value_name = "DIR")]
    slurm_bin: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct CanaryArgs {
    #[command(flatten)]
    target: Target,
    /// Read device nodes and sysfs under this folder instead of / (for testing).
    #[arg(long, value_name = "DIR", default_value = "/")]
    preflight_root: PathBuf,
    /// Where the tools' and the canary command's output goes [default:
    /// <work-dir>/canary].
    #[arg(long, value_name = "DIR")]
    log_dir: Option<PathBuf>,
    /// How long each GPU tool, and the canary command, may take (90s, 10m).
    #[arg(long, value_name = "DURATION", value_parser = prgate_runner::recipe::parse_duration, default_value = "30s")]
    timeout: std::time::Duration,
    /// With a profile that has health.slurm-drain, the folder of SLURM's programs for
    /// `scontrol` [default: found in the PATH].
    #[arg(long, value_name = "DIR")]
    slurm_bin: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ScanArgs {
    #[command(flatten)]
    target: Target,
    /// The run's results directory (prgate run --results).
    #[arg(long, value_name = "DIR")]
    results: PathBuf,
    /// The run, in words, for the ledger (`PR #12`).
    #[arg(long, value_name = "TEXT")]
    run: Option<String>,
}

pub(crate) fn run(args: &NodeArgs) -> anyhow::Result<Outcome> {
    match &args.command {
        NodeCommand::Status(args) => status(args),
        NodeCommand::Strikes(target) => strikes(target),
        NodeCommand::Drain(args) => drain(args),
        NodeCommand::Admit(args) => admit(args),
        NodeCommand::Canary(args) => canary(args),
        NodeCommand::Filter(args) => filter(args),
        NodeCommand::Scan(args) => scan(args),
    }
}

fn strikes(target: &Target) -> anyhow::Result<Outcome> {
    let (_node, ledger) = open(target)?;
    for entry in health::since_last_admit(&ledger.entries()?) {
        println!("{entry}");
    }
    eprintln!("{}", ledger.health()?.summary());
    Ok(Outcome::Pass)
}

fn drain(args: &ReasonArgs) -> anyhow::Result<Outcome> {
    let (node, ledger) = open(&args.target)?;
    ledger.drain(&args.reason, SystemTime::now())?;
    if node.health().slurm_drain() {
        eprintln!("note: the SLURM executor drains it in SLURM at its next run");
    }
    eprintln!("{}", ledger.health()?.summary());
    Ok(Outcome::Pass)
}

fn admit(args: &ReasonArgs) -> anyhow::Result<Outcome> {
    let (node, ledger) = open(&args.target)?;
    ledger.admit(Source::Manual, &args.reason, SystemTime::now())?;
    resume(&node, &ledger, args.slurm_bin.as_deref())?;
    eprintln!("{}", ledger.health()?.summary());
    Ok(Outcome::Pass)
}

fn filter(args: &FilterArgs) -> anyhow::Result<Outcome> {
    let node = crate::files::read_node_profile(&args.node)?;
    let drained = health::drained_nodes(&health::health_dir(&node))?;
    let names: Vec<String> = drained.iter().map(|health| health.node.clone()).collect();
    let nodes = std::fs::read_to_string(&args.nodes)
        .with_context(|| format!("reading the nodes {}", args.nodes.display()))?;
    let (filtered, left_out) =
        health::without_drained(&nodes, &args.nodes.display().to_string(), &names)?;
    for health in drained.iter().filter(|health| left_out.contains(&health.node)) {
        eprintln!("left out: {}", health.summary());
    }
    print!("{filtered}");
    Ok(Outcome::Pass)
}

fn scan(args: &ScanArgs) -> anyhow::Result<Outcome> {
    let (node, ledger) = open(&args.target)?;
    let found = health::attribute(&args.results, None)
        .with_context(|| format!("reading {}", args.results.display()))?;
    let recorded = health::record(&node, ledger.node(), &found.strikes, args.run.as_deref());
    for note in found.passed_over.iter().chain(&recorded) {
        eprintln!("note: {note}");
    }
    eprintln!("{} strike(s) found; {}", found.strikes.len(), ledger.health()?.summary());
    Ok(Outcome::Pass)
}

fn status(args: &StatusArgs) -> anyhow::Result<Outcome> {
    let (node, ledger) = open(&args.target)?;
    let nodes = if args.all {
        health::all_nodes(&health::health_dir(&node))?
    } else {
        vec![ledger.health()?]
    };
    match args.format {
        Format::Human => {
            for health in &nodes {
                println!("{}", health.summary());
            }
        }
        Format::Json => {
            let statuses: Vec<Status> = nodes.iter().map(Status::from).collect();
            let value = if args.all {
                serde_json::to_string_pretty(&statuses)?
            } else {
                serde_json::to_string_pretty(&statuses[0])?
            };
            println!("{value}");
        }
    }
    Ok(if nodes.iter().any(health::NodeHealth::is_drained) {
        Outcome::NotPass
    } else {
        Outcome::Pass
    })
}

fn canary(args: &CanaryArgs) -> anyhow::Result<Outcome> {
    let (node, ledger) = open(&args.target)?;
    let log_dir = args.log_dir.clone().unwrap_or_else(|| node.work_dir().join("canary"));
    let commands = SystemCommands { timeout: args.timeout, ..SystemCommands::new(&log_dir) };
    let report =
        Canary { node: &node, ledger: &ledger, commands: &commands, root: &args.preflight_root }
            .run(SystemTime::now())?;
    for failure in &report.failures {
        eprintln!("canary: {failure}");
    }
    for note in &report.notes {
        eprintln!("note: {note}");
    }
    if report.passed {
        resume(&node, &ledger, args.slurm_bin.as_deref())?;
    }
    eprintln!(
        "the canary {}; {}",
        if report.passed { "passed" } else { "failed" },
        ledger.health()?.summary()
    );
    Ok(if report.passed { Outcome::Pass } else { Outcome::NotPass })
}

/// With `health.slurm-drain`, resumes the admitted node in SLURM too.
fn resume(
    node: &NodeProfile,
    ledger: &Ledger,
    slurm_bin: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    if node.health().slurm_drain() {
        prgate_runner::slurm::resume_node(slurm_bin, ledger.node())
            .with_context(|| format!("resuming SLURM node {}", ledger.node()))?;
        eprintln!("resumed SLURM node {} (scontrol update state=resume)", ledger.node());
    }
    Ok(())
}

/// The node profile and the ledger `target` names.
fn open(target: &Target) -> anyhow::Result<(NodeProfile, Ledger)> {
    let node = crate::files::read_node_profile(&target.node)?;
    let name = target.name.clone().unwrap_or_else(|| health::ledger_name(&node));
    let ledger = Ledger::new(&health::health_dir(&node), &name)?;
    Ok((node, ledger))
}

/// The nodes the health ledger of the profile at `profile` has drained, for the comment's
/// header; none when there is no profile to read (the ledger's own errors are in words).
pub(crate) fn drained_for_report(
    profile: &std::path::Path,
) -> Vec<prgate_report::comment::DrainedNode> {
    let Ok(text) = std::fs::read_to_string(profile) else { return Vec::new() };
    let Ok(node) = NodeProfile::parse(&text, &profile.display().to_string()) else {
        return Vec::new();
    };
    match health::drained_nodes(&health::health_dir(&node)) {
        Ok(drained) => drained.iter().map(drained_node).collect(),
        Err(error) => vec![prgate_report::comment::DrainedNode {
            name: "?".to_owned(),
            reason: format!("the health ledger cannot be read: {error}"),
        }],
    }
}

/// A drained node as the comment shows it.
pub(crate) fn drained_node(health: &health::NodeHealth) -> prgate_report::comment::DrainedNode {
    prgate_report::comment::DrainedNode {
        name: health.node.clone(),
        reason: health
            .drained
            .as_ref()
            .map_or_else(|| "drained".to_owned(), |drain| drain.detail.clone()),
    }
}
