//! `prgate plan --estimate`: each planned model's GPU time and the models scheduled onto nodes.
//!
//! The shell around `prgate_runner::estimate`, which reads the recipes from the plan's head (the
//! PR's tree, as the runner will) and schedules: this reads the node profiles and the history
//! files, fills the `estimate` object, and `report::estimate` renders it in the plan's three
//! formats. The JSON object is documented in docs/plan.md; the
//! estimate and the algorithm in docs/schedule.md.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{ArgGroup, Args};
pub(crate) use prgate_report::estimate::EstimateOutput;
use prgate_report::estimate::{HoldsOutput, JobOutput, NodeOutput, PartOutput};
use prgate_runner::estimate::{self, PlanEstimate};
use prgate_runner::schedule::{self, History, Node};
use prgate_scope::Plan;

/// The estimate's options of `prgate plan`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("estimate_nodes").args(["nodes", "node"]).multiple(false)))]
pub(crate) struct EstimateArgs {
    /// Estimate each model's GPU time (from its recipe in head's tree, or past runs with
    /// --history) and schedule the models onto the nodes: one model, base and PR, per node at a
    /// time. Needs --nodes or --node. See docs/schedule.md.
    #[arg(long, requires = "estimate_nodes")]
    estimate: bool,
    /// With --estimate: this many identical nodes of --hardware.
    #[arg(
        long,
        value_name = "N",
        requires = "estimate",
        value_parser = clap::value_parser!(u32).range(1..=1000)
    )]
    nodes: Option<u32>,
    /// The hardware of the --nodes nodes, as recipes name it.
    #[arg(long, value_name = "NAME", default_value = "mi355x", conflicts_with = "node")]
    hardware: String,
    /// With --estimate: a node's profile (docs/node-profile.md), once per node; a model goes
    /// only to a node of its recipe's hardware, with its GPUs and checkpoint.
    #[arg(long, value_name = "FILE", requires = "estimate")]
    node: Vec<PathBuf>,
    /// With --estimate: the event stream of past runs (`prgate run --events FILE`), repeatable.
    /// Each part of a model's estimate comes from the latest run that has it.
    #[arg(long, value_name = "FILE", requires = "estimate")]
    history: Vec<PathBuf>,
}

/// The estimate of `plan`, when `--estimate` asks for it.
pub(crate) fn estimate(
    args: &EstimateArgs,
    repo: &Path,
    plan: &Plan,
) -> anyhow::Result<Option<EstimateOutput>> {
    if !args.estimate {
        return Ok(None);
    }
    let nodes = read_nodes(args)?;
    let mut histories = Vec::with_capacity(args.history.len());
    for path in &args.history {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the history {}", path.display()))?;
        histories.push(History::parse(&text, &path.display().to_string())?);
    }
    let history = History::merge(histories);
    for skipped in history.skipped() {
        eprintln!("note: {skipped}");
    }
    estimate_plan(repo, plan, &nodes, &history, args.history.len()).map(Some)
}

/// Each planned model's estimate (from its recipe in head's tree and `history`, read by the
/// runner) and the schedule onto `nodes`, as the `estimate` object.
pub(crate) fn estimate_plan(
    repo: &Path,
    plan: &Plan,
    nodes: &[Node],
    history: &History,
    history_files: usize,
) -> anyhow::Result<EstimateOutput> {
    let estimate = estimate::estimate_plan(repo, plan, nodes, history)?;
    Ok(output(&estimate, nodes, history_files))
}

/// `estimate` (the runner's, onto `nodes`) as the `estimate` object.
pub(crate) fn output(
    estimate: &PlanEstimate,
    nodes: &[Node],
    history_files: usize,
) -> EstimateOutput {
    let PlanEstimate { jobs, schedule } = estimate;
    let seconds = schedule::whole_seconds;
    let unplaced =
        |job: usize| schedule.unschedulable().iter().find(|unschedulable| unschedulable.job == job);
    let node_name = |job: usize| schedule.node_of(job).map(|node| nodes[node].name.clone());
    let model = |job: usize| jobs[job].job.model.clone();
    let job_outputs = jobs
        .iter()
        .enumerate()
        .map(|(index, job)| JobOutput {
            model: job.job.model.clone(),
            tier: job.tier,
            seconds: seconds(job.job.duration),
            source: job.estimate.source().as_str(),
            node: node_name(index),
            unschedulable: unplaced(index).map(|unschedulable| unschedulable.reason.clone()),
            not_run: unplaced(index).map(|unschedulable| unschedulable.not_run),
            note: job.note.clone(),
            holds: job.holds.map(|holds| HoldsOutput {
                nodes: holds.nodes,
                gpus: holds.gpus,
                gpu_seconds: holds.gpu_seconds(job.job.duration),
            }),
            parts: job
                .estimate
                .parts()
                .iter()
                .map(|part| PartOutput {
                    part: part.part.to_string(),
                    seconds: seconds(part.duration),
                    source: part.source.as_str(),
                })
                .collect(),
        })
        .collect();
    let name = |job: usize| model(job).unwrap_or_else(|| "the common checks".to_owned());
    EstimateOutput {
        nodes: schedule
            .nodes()
            .iter()
            .map(|load| NodeOutput {
                name: load.node.clone(),
                hardware: load.hardware.clone(),
                seconds: load.total.as_secs(),
                jobs: load.jobs.iter().map(|&job| model(job)).collect(),
            })
            .collect(),
        jobs: job_outputs,
        makespan_seconds: schedule.makespan().as_secs(),
        lower_bound_seconds: schedule.lower_bound().duration.as_secs(),
        lower_bound_basis: schedule.lower_bound().basis.describe(name, nodes.len()),
        optimal: schedule.optimal(),
        history_files,
    }
}

/// The nodes `--nodes` or `--node` give.
fn read_nodes(args: &EstimateArgs) -> anyhow::Result<Vec<Node>> {
    if let Some(count) = args.nodes {
        return Ok(Node::identical(count, &args.hardware));
    }
    let mut nodes: Vec<Node> = Vec::with_capacity(args.node.len());
    for path in &args.node {
        let profile = crate::files::read_node_profile(path)?;
        if nodes.iter().any(|node| node.name == profile.name()) {
            anyhow::bail!(
                "{}: a node named {} is given twice\nhint: give each node's profile once",
                path.display(),
                profile.name()
            );
        }
        nodes.push(Node::from(&profile));
    }
    Ok(nodes)
}
