//! A plan's estimate, as `prgate plan --estimate` and `prgate ci` show it: each running
//! model's recipe (and the common checks') read from head's tree the way the runner will read
//! it (the commit, or the working tree of a `--worktree` plan), its GPU time
//! ([`schedule::estimate_model`], [`schedule::estimate_common`]) and the schedule onto the
//! nodes. A recipe that is missing or not valid is a note, not an error: its checks are
//! recorded not-run. Rendering the result is `report::estimate`'s work.

use std::path::{Path, PathBuf};

use prgate_scope::Plan;
use prgate_scope::plan::Tier;

use crate::recipe::Recipe;
use crate::recipe::common::CommonRecipe;
use crate::run::{DEFAULT_COMMON_RECIPE_PATH, DEFAULT_RECIPE_PATH};
use crate::schedule::cost::Holds;
use crate::schedule::{
    self, Estimate, History, Job, Method, Node, Schedule, estimate_common, estimate_model_on,
};

/// Each job's estimate and the schedule of the jobs onto the nodes.
#[derive(Debug)]
pub struct PlanEstimate {
    /// The common checks first (when they run), then the running models in the plan's order.
    pub jobs: Vec<JobEstimate>,
    /// The jobs onto the nodes; its job indexes are into [`PlanEstimate::jobs`].
    pub schedule: Schedule,
}

/// One job: what it needs, its estimate, and why there is no recipe to estimate from.
#[derive(Debug)]
pub struct JobEstimate {
    pub job: Job,
    /// `None` for the common checks.
    pub tier: Option<Tier>,
    pub estimate: Estimate,
    /// Why the recipe could not be used (missing, or not valid).
    pub note: Option<String>,
    /// What the job holds while it runs (its GPU time is its duration times `holds.gpus`);
    /// `None` for the common checks and a model without a usable recipe.
    pub holds: Option<Holds>,
}

/// Why head's tree could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum EstimateError {
    #[error("opening the repository around {}: {message}", path.display())]
    Repository { path: PathBuf, message: String },
    #[error("{}: the repository has no working tree to read the recipes from", path.display())]
    NoWorkingTree { path: PathBuf },
}

/// Each running job's estimate (from its recipe in head's tree and `history`) and the schedule
/// onto `nodes`.
pub fn estimate_plan(
    repo: &Path,
    plan: &Plan,
    nodes: &[Node],
    history: &History,
) -> Result<PlanEstimate, EstimateError> {
    let head = HeadTree::open(repo, plan)?;
    let mut jobs = Vec::new();
    if plan.common.selected {
        let recipe = head.recipe(DEFAULT_COMMON_RECIPE_PATH, CommonRecipe::parse);
        let estimate = estimate_common(recipe.parsed(), history);
        let job = Job::for_common_checks(&estimate);
        jobs.push(JobEstimate { job, tier: None, estimate, note: recipe.note(), holds: None });
    }
    for model in plan.running_models() {
        let path = DEFAULT_RECIPE_PATH.replace("{model}", &model.name);
        let recipe = head.recipe(&path, Recipe::parse);
        let gpus: Vec<Option<u32>> = nodes.iter().map(|node| node.gpus).collect();
        let estimate = estimate_model_on(model, recipe.parsed(), history, &gpus);
        let job = Job::for_model(&model.name, &estimate, recipe.parsed());
        // On the costliest node the job may get: the fewest GPUs (room for one server at a
        // time), as the estimate's layout assumes.
        let fewest = gpus.iter().copied().min().flatten();
        let holds = recipe.parsed().map(|recipe| Holds::of(fewest, recipe));
        let (tier, note) = (Some(model.tier), recipe.note());
        jobs.push(JobEstimate { job, tier, estimate, note, holds });
    }
    let all: Vec<Job> = jobs.iter().map(|job| job.job.clone()).collect();
    let schedule = schedule::schedule(&all, nodes, Method::Exact);
    Ok(PlanEstimate { jobs, schedule })
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

/// Head's tree, where the runner reads the recipes: the commit, or the working tree with
/// `--worktree`.
struct HeadTree {
    repository: PathBuf,
    commit: String,
    workdir: Option<PathBuf>,
}

impl HeadTree {
    fn open(repo: &Path, plan: &Plan) -> Result<HeadTree, EstimateError> {
        let workdir = if plan.head.worktree {
            let repository = git2::Repository::discover(repo).map_err(|error| {
                EstimateError::Repository { path: repo.to_path_buf(), message: error.to_string() }
            })?;
            let workdir = repository
                .workdir()
                .ok_or_else(|| EstimateError::NoWorkingTree { path: repo.to_path_buf() })?;
            Some(workdir.to_path_buf())
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
