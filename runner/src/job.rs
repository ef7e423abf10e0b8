//! Building the job plan ([`prgate_gate::job`]): the plan, both sides' recipes and the node
//! turned into every target and every step the run must account for, before any step runs.
//!
//! The recipes are read here, once, from the exported trees: `test/e2e/<model>.toml` (or the
//! request's path) on each side, and the common recipe. A tree is PR content, so a recipe is
//! read only as a regular file inside its tree, through no symbolic link at any component, of
//! at most [`RECIPE_LIMIT`] bytes; a model whose name is not one plain path component has no
//! recipe path at all. Anything else is a recipe state the verdict judges: a PR that removed a
//! recipe its base side has (`recipe-removed`) or whose recipe is not valid (`recipe-invalid`)
//! fails; no recipe on either side is a coverage gap (`no-recipe`); base's recipe file of a
//! model that is not new (or of the common checks) that is there but not valid blocks every
//! check (`base-recipe-invalid`, `base_not_valid`): the PR's own recipe never stands in for
//! a broken one, only for one base's tree lacks. The trees are read before
//! any command of the run starts, so nothing changes them while they are read.
//!
//! This is the one place that decides a target's steps: a model whose PR recipe parsed takes
//! the steps its recipe gives for its tier on this node (`Recipe::steps`, the rule the
//! estimate follows too: a suite the recipe selects nothing for, no timing script, no accuracy
//! benchmark or no sweep expects nothing; what the node cannot run is `blocked` with its
//! reason; everything else must produce evidence); a recipe that is missing or not valid blocks
//! every check of the tier; the common checks run on both sides, by base's common recipe when
//! it has a valid one (`contract::decide_common`). The step loop (`crate::run`) takes its steps
//! from this list (a `run` step queued, the others recorded as the list says), and the progress
//! line, the SLURM gather and the gate count against it; none of them derives it again.
//!
//! When both sides' trees have a recipe file and its bytes differ, the target's recipe carries
//! the diff of the two texts ([`recipe_diff`]) for the comment: the node's secret values
//! redacted, at most [`DIFF_LINES`] lines of at most [`DIFF_LINE_CHARS`] characters.
//!
//! What it leaves to others: running the steps (`crate::run`), judging (the gate).

use std::path::Path;

use prgate_gate::evidence::{Check, NotRunReason, Side};
use prgate_gate::job::{
    Expect, ExpectedStep, JobPlan, Part, RecipeDiff, RecipeState, Recipes, SCHEMA_VERSION, Target,
    tier_checks, whole_check_side,
};
use prgate_scope::plan::{ModelPlan, Plan, Tier};

use crate::node::NodeProfile;
use crate::recipe::Recipe;
use crate::recipe::common::CommonRecipe;
use crate::recipe::contract;
use crate::recipe::renames::Renames;
use crate::schedule::{Estimate, History, estimate_common, estimate_model_on};

/// The largest recipe prgate reads.
pub const RECIPE_LIMIT: u64 = 1024 * 1024;

/// The most lines of a recipe's diff that the job plan (and the comment) carries: 60.
pub const DIFF_LINES: usize = 60;
/// The most characters of one line of a recipe's diff; a longer line is cut, with `…`: 200.
pub const DIFF_LINE_CHARS: usize = 200;
/// The longest the diff of two recipes may take: 1 s (then it is coarser, not wrong).
const DIFF_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// A job plan and the recipes it was made from.
#[derive(Debug)]
pub struct Job {
    pub plan: JobPlan,
    /// The PR side's recipe of each model target, in the order of `plan.targets` (the common
    /// checks excepted).
    pub(crate) models: Vec<ModelRecipes>,
    /// The common recipe both sides run by (base's, when it has a valid one; the PR's path and
    /// hash), when the plan selects the common checks.
    pub(crate) common: Option<CommonSource>,
}

/// Why a model's base side has nothing to run: its commands never come from the PR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoBaseRecipe {
    #[error(
        "the base side has no valid recipe at {path} to take its commands from (they never come from the PR)"
    )]
    NotValidAt { path: String },
    #[error("the PR has no valid recipe")]
    NoPrRecipe,
}

/// What a model target runs with.
#[derive(Debug)]
pub(crate) struct ModelRecipes {
    pub name: String,
    /// The PR side's recipe file, parsed into what the PR side runs by
    /// ([`contract::decide`]): base's recipe with the PR's server command.
    pub pr: RecipeSource,
    /// What the base side runs ([`contract::decide`]): its own recipe; the PR's for a model
    /// new in the PR (its baseline is SGLang's own path in the PR's tree); why there is none
    /// when the base tree has no valid recipe (its commands never come from the PR).
    pub base: Result<Box<Recipe>, NoBaseRecipe>,
    /// Whether both sides' recipe files are the same bytes: only then may the base side's
    /// results go into the node's cache.
    pub unchanged: bool,
    /// The base tree's own recipe, when it parsed: the gated datasets the node's token may
    /// fetch are those it names.
    pub base_own: Option<Box<Recipe>>,
}

/// A recipe (of a model, or of the common checks) as one side's tree has it.
#[derive(Debug)]
pub(crate) enum Source<R> {
    Parsed { recipe: Box<R>, path: String, hash: String },
    Missing { path: String },
    Invalid { path: String, error: String, hash: Option<String> },
}

/// A model's recipe as one side's tree has it.
pub(crate) type RecipeSource = Source<Recipe>;
/// The common checks' recipe as one side's tree has it.
pub(crate) type CommonSource = Source<CommonRecipe>;

/// Where the recipes are in a tree.
#[derive(Debug, Clone, Copy)]
pub struct RecipePaths<'a> {
    /// Where a model's recipe is; `{model}` is the model's name.
    pub model: &'a str,
    /// Where the common checks' recipe is.
    pub common: &'a str,
}

impl RecipePaths<'static> {
    /// Where the recipes are unless a request says otherwise.
    pub const DEFAULT: RecipePaths<'static> = RecipePaths {
        model: crate::run::DEFAULT_RECIPE_PATH,
        common: crate::run::DEFAULT_COMMON_RECIPE_PATH,
    };
}

impl RecipePaths<'_> {
    /// Where the recipe of `model` is.
    pub fn model_recipe(&self, model: &str) -> String {
        self.model.replace("{model}", model)
    }

    /// The files of the base side that judge a run of `plan`: the manifest, the CODEOWNERS
    /// policy, the common recipe, and base's recipe of each model that runs (at its old name
    /// when renamed; a new model has none). What moved of these on the base branch since the
    /// PR branched fails the `base-moved` rule (`prgate_gate::base_side::BaseMoved`).
    pub fn judging_files(&self, plan: &Plan) -> Vec<String> {
        let fixed = [prgate_scope::manifest::MANIFEST_PATH, prgate_gate::base_side::POLICY_PATH];
        let models = plan.running_models().filter_map(ModelPlan::base_recipe_name);
        fixed
            .into_iter()
            .chain([self.common])
            .map(str::to_owned)
            .chain(models.map(|model| self.model_recipe(model)))
            .collect()
    }
}

/// What a job plan is made from.
#[derive(Debug, Clone, Copy)]
pub struct JobRequest<'a> {
    pub plan: &'a Plan,
    pub base_tree: &'a Path,
    pub pr_tree: &'a Path,
    pub recipes: RecipePaths<'a>,
    pub node: &'a NodeProfile,
    /// A maintainer accepted the PR's narrowing of the contract (`--accept-narrowing`).
    pub accept_narrowing: bool,
}

impl Job {
    /// The job plan of `request`: every model of tier full or smoke that the PR does not remove,
    /// in the plan's order, and the common checks first when the plan selects them.
    pub fn build(request: &JobRequest<'_>) -> Job {
        let plan = request.plan;
        let pr_commit = plan.head.sha.clone();
        let base_commit = plan.base_side_commit().to_owned();
        let mut targets = Vec::new();
        let mut common = None;
        let changed = ChangedFiles::of(plan);
        if plan.common.selected {
            let path = request.recipes.common;
            let base = read_common(request.base_tree, path, &base_commit);
            let pr = read_common(request.pr_tree, path, &pr_commit);
            let (mut target, runs) = common_target(&base.0, pr.0);
            target.recipe.diff = recipe_diff(base.1.as_deref(), pr.1.as_deref());
            if let CommonSource::Parsed { recipe, .. } = &runs {
                let runs_tests = target.steps.iter().any(runs_on_pr);
                let selections = recipe.selections.iter().filter(|_| runs_tests);
                target.recipe.pr_tests = pr_tests(selections, &changed);
            }
            targets.push(target);
            common = Some(runs);
        }
        let sides = Sides {
            request,
            base_commit: &base_commit,
            pr_commit: &pr_commit,
            renames: Renames::of(plan),
            changed,
        };
        let mut models = Vec::new();
        let mut family = 0u32;
        for model in plan.running_models() {
            let (target, recipes, covered) = sides.model(model);
            family = family.saturating_add(covered);
            targets.push(target);
            models.push(recipes);
        }
        Job {
            plan: JobPlan {
                schema_version: SCHEMA_VERSION,
                pr_commit,
                base_commit,
                family,
                targets,
                accept_narrowing: request.accept_narrowing,
            },
            models,
            common,
        }
    }
}

/// What every model's target is made from: the request, both commits, the PR's renames and
/// the files it changes.
struct Sides<'a> {
    request: &'a JobRequest<'a>,
    base_commit: &'a str,
    pr_commit: &'a str,
    renames: Renames,
    changed: ChangedFiles,
}

impl Sides<'_> {
    /// A model's target, what its sides run with, and how many of its covered speed cells
    /// count in the family.
    fn model(&self, model: &ModelPlan) -> (Target, ModelRecipes, u32) {
        let request = self.request;
        // A model the PR renamed is held to its old name's recipe.
        let (base, base_text) = match model.base_recipe_name() {
            None => (None, None),
            Some(name) => {
                let (base, text) =
                    read_recipe(request.base_tree, &request.recipes, name, self.base_commit);
                (Some(base), text)
            }
        };
        let (pr, pr_text) =
            read_recipe(request.pr_tree, &request.recipes, &model.name, self.pr_commit);
        let unchanged = base.as_ref().and_then(RecipeSource::hash).is_some()
            && base.as_ref().and_then(RecipeSource::hash) == pr.hash();
        let base_own = match base.as_ref() {
            Some(RecipeSource::Parsed { recipe, .. }) => Some(recipe.clone()),
            _ => None,
        };
        let no_renames = Renames::default();
        let moved = if model.renamed_from.is_some() { &self.renames } else { &no_renames };
        let (pr, base_side, contract) =
            contract_sides(model, base.as_ref(), pr, request.node, moved);
        let (mut target, covered) = model_target(model, base.as_ref(), &pr, request.node);
        target.recipe.diff = recipe_diff(base_text.as_deref(), pr_text.as_deref());
        target.recipe.contract = contract;
        if let RecipeSource::Parsed { recipe: side, .. } = &pr {
            target.recipe.pr_scripts = pr_scripts(side, &self.changed);
            target.recipe.pr_tests = pr_tests(selections_run(side, &target), &self.changed);
        }
        // The family is base's covered cells: the cells a PR adds run at base's per-cell
        // error rate, so adding cells cannot loosen the bound on base's (a PR's own recipe,
        // for a model base has none of, counts its own).
        let family = base_own.as_ref().map_or(covered, |base| {
            let cells = base.steps(model.tier, model.new, Some(request.node)).covered_cells;
            if covered == 0 { 0 } else { cells.clamp(1, covered) }
        });
        let recipes =
            ModelRecipes { name: model.name.clone(), pr, base: base_side, unchanged, base_own };
        (target, recipes, family)
    }
}

/// The files the PR adds or changes (its head side's paths), to tell which of base's timing
/// scripts and test selections run the PR's own code on its side.
struct ChangedFiles(std::collections::BTreeSet<String>);

impl ChangedFiles {
    fn of(plan: &Plan) -> ChangedFiles {
        use prgate_scope::change::ChangeStatus;
        let paths = plan
            .changed
            .iter()
            .filter(|changed| changed.status != ChangeStatus::Deleted)
            .map(|changed| changed.path.clone())
            .collect();
        ChangedFiles(paths)
    }

    /// The changed files a command word names: the file itself, the files under a folder, or
    /// a dotted module (`python -m pkg.bench`) as its `.py` file or package folder.
    fn named_by(&self, word: &str) -> Vec<String> {
        let word = word.trim_start_matches("./").trim_end_matches('/');
        if word.is_empty() || word.starts_with('-') {
            return Vec::new();
        }
        let mut names = vec![word.to_owned()];
        if !word.contains('/') && word.contains('.') && !word.ends_with(".py") {
            let module = word.replace('.', "/");
            names.push(format!("{module}.py"));
            names.push(module);
        }
        let mut found = Vec::new();
        for name in names {
            let folder = format!("{name}/");
            found.extend(
                self.0.iter().filter(|path| **path == name || path.starts_with(&folder)).cloned(),
            );
        }
        found.sort();
        found.dedup();
        found
    }
}

/// The timing scripts of `recipe` (what the PR side runs) whose command names files the PR
/// changed: on the PR side they measure with the PR's own script.
fn pr_scripts(recipe: &Recipe, changed: &ChangedFiles) -> Vec<prgate_gate::job::PrScript> {
    recipe
        .kernel_timing()
        .iter()
        .filter_map(|script| {
            let mut files: Vec<String> =
                script.literal_words().flat_map(|word| changed.named_by(word)).collect();
            files.sort();
            files.dedup();
            (!files.is_empty())
                .then(|| prgate_gate::job::PrScript { script: script.name.clone(), files })
        })
        .collect()
}

/// The changed files that `selections` (pytest's `path` or `path::test`, as the PR side runs
/// them) run: the file a selection names, or the files below a folder it names.
fn pr_tests<'s>(
    selections: impl IntoIterator<Item = &'s String>,
    changed: &ChangedFiles,
) -> Vec<String> {
    let mut files: Vec<String> = selections
        .into_iter()
        .flat_map(|selection| changed.named_by(selection.split("::").next().unwrap_or_default()))
        .collect();
    files.sort();
    files.dedup();
    files
}

/// The test selections of `recipe` (what the PR side runs) whose suite `target` runs on the PR
/// side.
fn selections_run<'r>(recipe: &'r Recipe, target: &Target) -> Vec<&'r String> {
    let tests = recipe.tests();
    [
        (Check::UnitTests, &tests.unit),
        (Check::KernelTests, &tests.kernel),
        (Check::ServingTests, &tests.serving),
    ]
    .into_iter()
    .filter(|(check, _)| target.steps_of(*check).any(runs_on_pr))
    .flat_map(|(_, selections)| selections)
    .collect()
}

/// Whether `step` runs on the PR side.
fn runs_on_pr(step: &ExpectedStep) -> bool {
    step.side == Side::Pr && step.expect == Expect::Run
}

impl Job {
    /// The hash of the PR side's recipe of the target of `model` (`None`: the common checks),
    /// when it has one: what its records' provenance names.
    pub(crate) fn pr_hash(&self, model: Option<&str>) -> Option<&str> {
        match model {
            None => self.common.as_ref().and_then(CommonSource::hash),
            Some(name) => self.models.iter().find(|m| m.name == name).and_then(|m| m.pr.hash()),
        }
    }
}

/// What each side of `model` runs by ([`contract::decide`], the one place that decides it):
/// the PR's source with its recipe replaced by what the PR side runs, the base side's recipe
/// (or why it has none), and the contract the job plan shows.
fn contract_sides(
    model: &ModelPlan,
    base: Option<&RecipeSource>,
    pr: RecipeSource,
    node: &NodeProfile,
    renames: &Renames,
) -> (RecipeSource, Result<Box<Recipe>, NoBaseRecipe>, prgate_gate::job::Contract) {
    let RecipeSource::Parsed { recipe, path, hash } = pr else {
        let why = match base {
            Some(base) => NoBaseRecipe::NotValidAt { path: base.path().to_owned() },
            None => NoBaseRecipe::NoPrRecipe,
        };
        return (pr, Err(why), prgate_gate::job::Contract::default());
    };
    let base_recipe = match base {
        Some(RecipeSource::Parsed { recipe, .. }) => Some(recipe.as_ref()),
        _ => None,
    };
    let sides = contract::decide(base_recipe, &recipe, node, renames);
    let base_side = match (base_recipe, base) {
        (Some(_), _) => Ok(Box::new(sides.base)),
        // A model new in the PR: its baseline is SGLang's own path in the PR's tree.
        (None, None) if model.new => Ok(Box::new(sides.base)),
        (None, base) => Err(NoBaseRecipe::NotValidAt {
            path: base.map_or(path.as_str(), RecipeSource::path).to_owned(),
        }),
    };
    let pr = RecipeSource::Parsed { recipe: Box::new(sides.pr), path, hash };
    // A base recipe that is there but not valid blocks the model's checks: no contract holds.
    let contract = if base_not_valid(base).is_some() { Default::default() } else { sides.contract };
    (pr, base_side, contract)
}

impl<R> Source<R> {
    /// The recipe, when it parsed.
    pub(crate) fn parsed(&self) -> Option<&R> {
        match self {
            Source::Parsed { recipe, .. } => Some(recipe),
            Source::Missing { .. } | Source::Invalid { .. } => None,
        }
    }

    fn state(&self) -> RecipeState {
        match self {
            Source::Parsed { path, hash, .. } => {
                RecipeState::Parsed { path: path.clone(), hash: hash.clone() }
            }
            Source::Missing { path } => RecipeState::Missing { path: path.clone() },
            Source::Invalid { path, error, hash } => RecipeState::Invalid {
                path: path.clone(),
                hash: hash.clone().unwrap_or_default(),
                error: error.clone(),
            },
        }
    }

    /// Where the recipe is (or would be) in its tree.
    pub(crate) fn path(&self) -> &str {
        match self {
            Source::Parsed { path, .. }
            | Source::Missing { path }
            | Source::Invalid { path, .. } => path,
        }
    }

    /// The hash of the recipe file, when there is one.
    pub(crate) fn hash(&self) -> Option<&str> {
        match self {
            Source::Parsed { hash, .. } => Some(hash),
            Source::Invalid { hash, .. } => hash.as_deref(),
            Source::Missing { .. } => None,
        }
    }

    /// The recipe at `path` in `tree` (of `commit`, for errors), checked by `parse`, and the
    /// file's text when there is one (for the diff against the other side's).
    fn read<E: std::fmt::Display>(
        tree: &Path,
        path: String,
        commit: &str,
        parse: impl FnOnce(&str, &str) -> Result<R, E>,
    ) -> (Source<R>, Option<String>) {
        match read_tree_file(tree, &path, RECIPE_LIMIT) {
            Ok(None) => (Source::Missing { path }, None),
            Err(error) => (Source::Invalid { path, error: error.to_string(), hash: None }, None),
            Ok(Some(bytes)) => {
                let hash = crate::key::Key::of(&bytes).to_string();
                let short = prgate_scope::git::short_sha(commit);
                let file = format!("{path} at {short}");
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let source = match parse(&text, &file) {
                    Ok(recipe) => Source::Parsed { recipe: Box::new(recipe), path, hash },
                    Err(error) => {
                        Source::Invalid { path, error: error.to_string(), hash: Some(hash) }
                    }
                };
                (source, Some(text))
            }
        }
    }
}

fn read_recipe(
    tree: &Path,
    recipes: &RecipePaths<'_>,
    model: &str,
    commit: &str,
) -> (RecipeSource, Option<String>) {
    let path = recipes.model_recipe(model);
    if !plain_name(model) {
        let error = format!("the model name {model:?} is not one plain path component");
        return (Source::Invalid { path, error, hash: None }, None);
    }
    Source::read(tree, path, commit, Recipe::parse)
}

fn read_common(tree: &Path, path: &str, commit: &str) -> (CommonSource, Option<String>) {
    Source::read(tree, path.to_owned(), commit, CommonRecipe::parse)
}

/// The PR's recipe text against the base side's, when both sides have one and they differ:
/// the hunks of a unified diff with two lines of context, the node's secret values redacted
/// (before anything is cut, so that no part of a value is left), then at most [`DIFF_LINES`]
/// lines of at most [`DIFF_LINE_CHARS`] characters.
pub fn recipe_diff(base: Option<&str>, pr: Option<&str>) -> Option<RecipeDiff> {
    recipe_diff_with(crate::redact::runner_redactor(), base?, pr?)
}

/// [`recipe_diff`] with `redactor`.
pub fn recipe_diff_with(
    redactor: &crate::redact::Redactor,
    base: &str,
    pr: &str,
) -> Option<RecipeDiff> {
    if base == pr {
        return None;
    }
    let diff = similar::TextDiff::configure().timeout(DIFF_TIMEOUT).diff_lines(base, pr);
    let mut text = String::new();
    for hunk in diff.unified_diff().context_radius(2).iter_hunks() {
        text.push_str(&hunk.header().to_string());
        text.push('\n');
        for change in hunk.iter_changes() {
            let sign = match change.tag() {
                similar::ChangeTag::Equal => ' ',
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
            };
            text.push(sign);
            text.push_str(change.value().trim_end_matches(['\n', '\r']));
            text.push('\n');
        }
    }
    let redacted = redactor.redact(&text);
    let lines: Vec<&str> = redacted.lines().collect();
    let mut kept = String::new();
    for line in lines.iter().take(DIFF_LINES) {
        kept.push_str(&prgate_scope::text::clip(line, DIFF_LINE_CHARS));
        kept.push('\n');
    }
    Some(RecipeDiff { text: kept, omitted: lines.len().saturating_sub(DIFF_LINES) })
}

/// Whether `name` is one plain path component: not empty, no separator, not `.` or `..`.
fn plain_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['/', '\\', '\0']) && name != "." && name != ".."
}

/// Reads `relative` in `tree` as PR content: `Ok(None)` when nothing is there; an error when
/// the path leaves the tree, any component is a symbolic link, the file is not a regular file
/// or is larger than `limit` bytes.
fn read_tree_file(
    tree: &Path,
    relative: &str,
    limit: u64,
) -> Result<Option<Vec<u8>>, crate::untrusted::UntrustedFileError> {
    match crate::untrusted::read(tree, Path::new(relative), limit) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if matches!(error.problem, crate::untrusted::Problem::Missing) => Ok(None),
        Err(error) => Err(error),
    }
}

fn step(check: Check, side: Side, part: Option<Part>, expect: Expect) -> ExpectedStep {
    ExpectedStep { check, side, part, expect }
}

/// Why a PR-side recipe that is not parsed stops every check, by the base side's state.
fn broken_recipe(base: Option<&RecipeState>, pr: &RecipeState) -> (NotRunReason, String) {
    let base_has_one =
        matches!(base, Some(RecipeState::Parsed { .. } | RecipeState::Invalid { .. }));
    match pr {
        RecipeState::Missing { path } if base_has_one => {
            (NotRunReason::RecipeRemoved, format!("the PR removed {path}, which its base side has"))
        }
        RecipeState::Missing { path } => {
            (NotRunReason::NoRecipe, format!("neither side's tree has a recipe at {path}"))
        }
        RecipeState::Invalid { error, .. } => {
            (NotRunReason::RecipeInvalid, format!("the PR's recipe is not valid: {error}"))
        }
        RecipeState::Parsed { .. } | RecipeState::NoTree => {
            (NotRunReason::Other, "the recipe could not be read".to_owned())
        }
    }
}

/// Why a target whose PR recipe parsed cannot be judged: base's recipe file (of a model that
/// is not new in the PR, read at its base name, or of the common checks) is there but not
/// valid. The PR's own recipe never stands in for it: that would let a PR drop what base
/// measures whenever base's recipe is broken (a prgate upgrade, an old merge-base). A file
/// base lacks is a true coverage gap, and a model new in the PR has no base side (`None`).
fn base_not_valid<R>(base: Option<&Source<R>>) -> Option<(NotRunReason, String)> {
    let Some(Source::Invalid { path, error, .. }) = base else { return None };
    let detail = format!(
        "base's recipe {path} is not valid, so nothing holds the PR to what base measures (the PR's own recipe does not stand in for it): {error}"
    );
    Some((NotRunReason::BaseRecipeInvalid, detail))
}

/// The estimated time of `model`'s job on `node`, with no history: from the recipe the PR side
/// runs by (base's contract, [`contract_sides`]), so a PR cannot move its own time limit or
/// estimate by editing what base decides is measured. `None` without a valid PR recipe.
pub(crate) fn model_estimate(
    model: &ModelPlan,
    recipes: &ModelRecipes,
    node: &NodeProfile,
) -> Option<Estimate> {
    let gpus = u32::try_from(node.gpu_count()).ok();
    let recipe = recipes.pr.parsed()?;
    Some(estimate_model_on(model, Some(recipe), &History::default(), &[gpus]))
}

/// The common checks' estimated time, with no history; `None` without a valid recipe.
pub(crate) fn common_estimate(common: &CommonSource) -> Option<Estimate> {
    Some(estimate_common(Some(common.parsed()?), &History::default()))
}

/// The common checks' target, and the recipe both sides run by: base's when the base side
/// has a valid one ([`contract::decide_common`]: the PR's differences are the target's
/// contract), else the PR's own when base has no file; a PR recipe that is missing or not
/// valid blocks the check, and so does a base file that is not valid ([`base_not_valid`]).
fn common_target(base: &CommonSource, pr: CommonSource) -> (Target, CommonSource) {
    let mut recipe = Recipes::of(base.state(), pr.state());
    let target =
        |recipe, steps| Target { model: None, tier: Tier::Smoke, new: false, recipe, steps };
    // Only the PR side's step is planned: the check is known blocked before the run.
    let blocked = |(reason, detail)| {
        vec![step(Check::CommonTests, Side::Pr, None, Expect::Blocked { reason, detail })]
    };
    let CommonSource::Parsed { recipe: theirs, path, hash } = pr else {
        let steps = blocked(broken_recipe(Some(&recipe.base), &recipe.pr));
        return (target(recipe, steps), pr);
    };
    if let Some(why) = base_not_valid(Some(base)) {
        let pr = CommonSource::Parsed { recipe: theirs, path, hash };
        return (target(recipe, blocked(why)), pr);
    }
    let (runs, contract) = contract::decide_common(base.parsed(), &theirs);
    recipe.contract = contract;
    let steps = [Side::Base, Side::Pr]
        .map(|side| step(Check::CommonTests, side, None, Expect::Run))
        .to_vec();
    (target(recipe, steps), CommonSource::Parsed { recipe: Box::new(runs), path, hash })
}

/// A model's target, and how many covered speed cells it judges.
fn model_target(
    model: &ModelPlan,
    base: Option<&RecipeSource>,
    pr: &RecipeSource,
    node: &NodeProfile,
) -> (Target, u32) {
    let recipe = Recipes::of(base.map_or(RecipeState::NoTree, RecipeSource::state), pr.state());
    let target = |steps| Target {
        model: Some(model.name.clone()),
        tier: model.tier,
        new: model.new,
        recipe: recipe.clone(),
        steps,
    };
    let why = match (pr, base_not_valid(base)) {
        (RecipeSource::Parsed { recipe: parsed, .. }, None) => {
            let planned = parsed.steps(model.tier, model.new, Some(node));
            return (target(planned.steps), planned.covered_cells);
        }
        (RecipeSource::Parsed { .. }, Some(why)) => why,
        _ => broken_recipe(base.map(|_| &recipe.base), &recipe.pr),
    };
    let steps = tier_checks(model.tier)
        .iter()
        .map(|&check| {
            let expect = Expect::Blocked { reason: why.0, detail: why.1.clone() };
            step(check, whole_check_side(check), None, expect)
        })
        .collect();
    (target(steps), 0)
}

/// The job plan of a run split over nodes: `merged` so far (`None` before the first node) with
/// `node_job`, one node's job plan, whose `records` are that node's evidence. Each node's job
/// plan holds every target as that node sees it, so a target is taken from the node that ran it
/// (whose records name its model); the first node's plan gives the rest.
pub fn merge_node_job(
    merged: Option<JobPlan>,
    node_job: JobPlan,
    records: &[prgate_gate::evidence::Evidence],
) -> JobPlan {
    let mut merged = merged.unwrap_or_else(|| node_job.clone());
    for target in node_job.targets {
        if records.iter().any(|record| record.model == target.model)
            && let Some(slot) = merged.targets.iter_mut().find(|t| t.model == target.model)
        {
            *slot = target;
        }
    }
    merged
}

#[cfg(test)]
pub(crate) mod tests;
