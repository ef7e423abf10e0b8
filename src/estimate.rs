//! `prgate plan --estimate`: each planned model's GPU time and the models scheduled onto nodes.
//!
//! The shell around `prgate_runner::schedule`: it reads the recipes from the plan's head (the
//! PR's tree, as the runner will), the node profiles and the history files; `report::estimate`
//! renders the result in the plan's three formats. The JSON object is documented in docs/plan.md; the
//! estimate and the algorithm in docs/schedule.md.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{ArgGroup, Args};
pub(crate) use prgate_report::estimate::EstimateOutput;
use prgate_report::estimate::{JobOutput, NodeOutput, PartOutput};
use prgate_runner::node::NodeProfile;
use prgate_runner::recipe::Recipe;
use prgate_runner::recipe::common::CommonRecipe;
use prgate_runner::run::{DEFAULT_COMMON_RECIPE_PATH, DEFAULT_RECIPE_PATH};
use prgate_runner::schedule::{
    self, Estimate, History, Job, Method, Node, estimate_common, estimate_model,
};
use prgate_scope::Plan;
use prgate_scope::plan::Tier;

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

/// A recipe as head's tree has it.
enum RecipeState<T> {
    Parsed(Box<T>),
    Missing(String),
    Invalid(String),
}

impl<T> RecipeState<T> {
    fn parsed(&self) -> Option<&T> {
        match self {
            RecipeState::Parsed(recipe) => Some(recipe),
            RecipeState::Missing(_) | RecipeState::Invalid(_) => None,
        }
    }

    /// Why there is no recipe to estimate from.
    fn note(&self) -> Option<String> {
        match self {
            RecipeState::Parsed(_) => None,
            RecipeState::Missing(path) => {
                Some(format!("no recipe at {path}: every check is recorded not-run"))
            }
            RecipeState::Invalid(error) => Some(format!(
                "the recipe is not valid, so every check is recorded not-run: {error}"
            )),
        }
    }
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
    estimate_plan(repo, plan, &nodes, &history, args.history.len()).map(Some)
}

/// Each planned model's estimate (from its recipe in head's tree and `history`) and the
/// schedule onto `nodes`.
pub(crate) fn estimate_plan(
    repo: &Path,
    plan: &Plan,
    nodes: &[Node],
    history: &History,
    history_files: usize,
) -> anyhow::Result<EstimateOutput> {
    let head = HeadTree::open(repo, plan)?;

    let mut jobs: Vec<Job> = Vec::new();
    let mut details: Vec<(Option<Tier>, Estimate, Option<String>)> = Vec::new();
    if plan.common.selected {
        let recipe = head.recipe(DEFAULT_COMMON_RECIPE_PATH, CommonRecipe::parse);
        let estimate = estimate_common(recipe.parsed(), history);
        jobs.push(Job::for_common_checks(&estimate));
        details.push((None, estimate, recipe.note()));
    }
    for model in plan.running_models() {
        let path = DEFAULT_RECIPE_PATH.replace("{model}", &model.name);
        let recipe = head.recipe(&path, Recipe::parse);
        let estimate = estimate_model(model, recipe.parsed(), history);
        jobs.push(Job::for_model(&model.name, &estimate, recipe.parsed()));
        details.push((Some(model.tier), estimate, recipe.note()));
    }

    let schedule = schedule::schedule(&jobs, nodes, Method::Exact);
    let seconds = schedule::whole_seconds;
    let unplaced =
        |job: usize| schedule.unschedulable().iter().find(|unschedulable| unschedulable.job == job);
    let node_name = |job: usize| schedule.node_of(job).map(|node| nodes[node].name.clone());
    let job_outputs = jobs
        .iter()
        .zip(details)
        .enumerate()
        .map(|(index, (job, (tier, estimate, note)))| JobOutput {
            model: job.model.clone(),
            tier,
            seconds: seconds(job.duration),
            source: estimate.source().as_str(),
            node: node_name(index),
            unschedulable: unplaced(index).map(|unschedulable| unschedulable.reason.clone()),
            not_run: unplaced(index).map(|unschedulable| unschedulable.not_run),
            note,
            parts: estimate
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
    let name =
        |job: usize| jobs[job].model.clone().unwrap_or_else(|| "the common checks".to_owned());
    Ok(EstimateOutput {
        nodes: schedule
            .nodes()
            .iter()
            .map(|load| NodeOutput {
                name: load.node.clone(),
                hardware: load.hardware.clone(),
                seconds: load.total.as_secs(),
                jobs: load.jobs.iter().map(|&job| jobs[job].model.clone()).collect(),
            })
            .collect(),
        jobs: job_outputs,
        makespan_seconds: schedule.makespan().as_secs(),
        lower_bound_seconds: schedule.lower_bound().duration.as_secs(),
        lower_bound_basis: schedule.lower_bound().basis.describe(name, nodes.len()),
        optimal: schedule.optimal(),
        history_files,
    })
}

/// The nodes `--nodes` or `--node` give.
fn read_nodes(args: &EstimateArgs) -> anyhow::Result<Vec<Node>> {
    if let Some(count) = args.nodes {
        let hardware = args.hardware.to_lowercase();
        return Ok((1..=count)
            .map(|index| Node {
                name: format!("node-{index}"),
                hardware: hardware.clone(),
                gpus: None,
                checkpoints: None,
            })
            .collect());
    }
    let mut nodes: Vec<Node> = Vec::with_capacity(args.node.len());
    for path in &args.node {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the node profile {}", path.display()))?;
        let profile = NodeProfile::parse(&text, &path.display().to_string())?;
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

/// Head's tree, where the runner reads the recipes: the commit, or the working tree with
/// `--worktree`.
struct HeadTree {
    repository: PathBuf,
    commit: String,
    workdir: Option<PathBuf>,
}

impl HeadTree {
    fn open(repo: &Path, plan: &Plan) -> anyhow::Result<HeadTree> {
        let workdir = if plan.head.worktree {
            let repository = git2::Repository::discover(repo)
                .with_context(|| format!("opening the repository around {}", repo.display()))?;
            Some(
                repository
                    .workdir()
                    .context("the repository has no working tree to read the recipes from")?
                    .to_path_buf(),
            )
        } else {
            None
        };
        Ok(HeadTree { repository: repo.to_path_buf(), commit: plan.head.sha.clone(), workdir })
    }

    /// The recipe at `path`, parsed with `parse(text, name)`.
    fn recipe<T, E: std::fmt::Display>(
        &self,
        path: &str,
        parse: impl Fn(&str, &str) -> Result<T, E>,
    ) -> RecipeState<T> {
        let (text, name) = match &self.workdir {
            Some(workdir) => match std::fs::read(workdir.join(path)) {
                Ok(bytes) => (
                    Some(String::from_utf8_lossy(&bytes).into_owned()),
                    format!("{path} in the working tree"),
                ),
                Err(_) => (None, String::new()),
            },
            None => {
                let short = self.commit.get(..7).unwrap_or(&self.commit);
                match prgate_scope::base_side::read_text_at(&self.repository, &self.commit, path) {
                    Ok(text) => (text, format!("{path} at {short}")),
                    Err(error) => return RecipeState::Invalid(error.to_string()),
                }
            }
        };
        match text {
            None => RecipeState::Missing(path.to_owned()),
            Some(text) => match parse(&text, &name) {
                Ok(recipe) => RecipeState::Parsed(Box::new(recipe)),
                Err(error) => RecipeState::Invalid(error.to_string()),
            },
        }
    }
}
