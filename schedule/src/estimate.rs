//! A plan's estimate, as `prgate plan --estimate` and `prgate ci` show it: each running
//! model's recipe (and the common checks'), as head's tree has it, its GPU time
//! ([`schedule::estimate_model`], [`schedule::estimate_common`]) and the schedule onto the
//! nodes. A recipe that is missing or not valid is a note, not an error: its checks are
//! recorded not-run.
//!
//! A model whose base side has a valid recipe is costed by what the run measures by (base's
//! recipe with the PR's added cells and server command, `recipe::contract`), as the job plan
//! and the SLURM time limit are; so are the common checks (base's common recipe, when it has a
//! valid one).
//!
//! It takes the recipes' text ([`RecipeText`]) from its caller, which reads them from head's
//! tree the way the runner will (the commit, or the working tree of a `--worktree` plan:
//! `prgate_runner::estimate::estimate_plan`), so this crate opens no file and no repository.
//! Rendering the result is `report::estimate`'s work.

use prgate_scope::Plan;
use prgate_scope::plan::Tier;

use crate::recipe::Recipe;
use crate::recipe::common::CommonRecipe;
use crate::recipe::contract;
use crate::recipe::renames::Renames;
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

/// A recipe's text in head's tree, as the caller read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecipeText {
    /// Its text, and its name in notes and errors (`test/e2e/m.toml at 1a2b3c4`).
    Found { text: String, name: String },
    /// No file at `path`.
    Missing { path: String },
    /// The tree could not be read there: `message` says why.
    Unreadable { message: String },
}

/// Each running job's estimate (from its recipe's text, `recipe(model)` with `None` for the
/// common checks' recipe, and `history`) and the schedule onto `nodes`. A model whose base side
/// has a valid recipe (`base_recipe(model)`, its text) is costed by what the run measures: the
/// contract's PR side ([`contract::measured`]), not the PR's own recipe, so a PR that drops
/// base's cells or benchmarks does not shorten its estimate; the common checks likewise
/// (`base_recipe(None)`).
pub fn estimate_from_recipes(
    plan: &Plan,
    nodes: &[Node],
    history: &History,
    recipe: impl Fn(Option<&str>) -> RecipeText,
    base_recipe: impl Fn(Option<&str>) -> Option<String>,
) -> PlanEstimate {
    let mut jobs = Vec::new();
    if plan.common.selected {
        // Base's common recipe, when it has a valid one (`contract::decide_common`).
        let common = RecipeState::of(recipe(None), CommonRecipe::parse).measured_by(
            base_recipe(None).as_deref(),
            CommonRecipe::parse,
            |base, pr| contract::decide_common(Some(base), pr).0,
        );
        let estimate = estimate_common(common.parsed(), history);
        let job = Job::for_common_checks(&estimate);
        jobs.push(JobEstimate { job, tier: None, estimate, note: common.note(), holds: None });
    }
    for model in plan.running_models() {
        // As the job plan reads it: a renamed model's base recipe at its old name, a new
        // model's none.
        let base = model.base_recipe_name().and_then(|name| base_recipe(Some(name)));
        // The contract's PR side (`contract::measured`).
        let recipe = RecipeState::of(recipe(Some(&model.name)), Recipe::parse).measured_by(
            base.as_deref(),
            Recipe::parse,
            |base, pr| contract::measured(base, pr, &Renames::default()).1,
        );
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
    PlanEstimate { jobs, schedule }
}

/// A recipe as head's tree has it.
enum RecipeState<T> {
    Parsed(Box<T>),
    Missing(String),
    Invalid(String),
    /// Base's recipe is there and not valid: its error.
    BaseInvalid(String),
}

impl<T> RecipeState<T> {
    /// The recipe the run measures by: with base's valid one (`base`, its text, parsed with
    /// `parse`), what `contract` makes of base's and this one; else this one, the PR's own.
    /// Base's recipe that is there but not valid blocks every check of a PR recipe that parsed,
    /// as the job plan decides (`base-recipe-invalid`): nothing runs. (A PR recipe that is
    /// missing or not valid stops them already.)
    fn measured_by<E: std::fmt::Display>(
        self,
        base: Option<&str>,
        parse: impl Fn(&str, &str) -> Result<T, E>,
        contract: impl Fn(&T, &T) -> T,
    ) -> RecipeState<T> {
        let base = base.map(|text| parse(text, "the base side's recipe"));
        match (self, base) {
            (RecipeState::Parsed(_), Some(Err(error))) => {
                RecipeState::BaseInvalid(error.to_string())
            }
            (RecipeState::Parsed(pr), Some(Ok(base))) => {
                RecipeState::Parsed(Box::new(contract(&base, &pr)))
            }
            (state, _) => state,
        }
    }

    /// `text` parsed with `parse(text, name)`.
    fn of<E: std::fmt::Display>(
        text: RecipeText,
        parse: impl Fn(&str, &str) -> Result<T, E>,
    ) -> RecipeState<T> {
        match text {
            RecipeText::Missing { path } => RecipeState::Missing(path),
            RecipeText::Unreadable { message } => RecipeState::Invalid(message),
            RecipeText::Found { text, name } => match parse(&text, &name) {
                Ok(recipe) => RecipeState::Parsed(Box::new(recipe)),
                Err(error) => RecipeState::Invalid(error.to_string()),
            },
        }
    }

    fn parsed(&self) -> Option<&T> {
        match self {
            RecipeState::Parsed(recipe) => Some(recipe),
            RecipeState::Missing(_) | RecipeState::Invalid(_) | RecipeState::BaseInvalid(_) => None,
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
            RecipeState::BaseInvalid(error) => Some(format!(
                "base's recipe is not valid, so every check is blocked (base-recipe-invalid) and nothing runs: {error}"
            )),
        }
    }
}
