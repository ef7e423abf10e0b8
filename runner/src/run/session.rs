//! The stages of one `prgate run`, in the order [`super::run`] takes them, each a function of
//! its own: open the session (signals, the host lock, the health ledger's refusal, the results
//! directory, the event stream, an earlier run's leftover processes); the part of the job plan
//! this run takes ([`Selection`]); what an earlier run of the same commits judged, taken over
//! ([`crate::reuse`]); the preflight; the step loop over the job plan's targets, with each
//! target's GPU time; the check that the loop recorded every step the plan expects; the GPU
//! time saved; what this run judged saved for a later one; the cleanup.
//!
//! No stage decides which steps exist: the job plan does (`crate::job`), and the step loop
//! (`super::steps`) takes each target's steps from it. What it leaves to others: running the
//! steps (`super::steps`), building the job plan (`crate::job`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use prgate_gate::evidence::{Evidence, Provenance, Side};
use prgate_gate::job::{JobPlan, Target};
use prgate_scope::plan::ModelPlan;

use super::steps::{self, Runner, Subject};
use super::{
    COMMON_CHECKS, Exported, Isolation, PreflightMode, RunError, RunRequest, RunSummary,
    StepFailure, emit, exec, leftovers, progress,
};
use crate::cache::Cache;
use crate::gpu_time::TargetTime;
use crate::job::{CommonSource, Job, ModelRecipes, RecipeSource};
use crate::lock::{HostLock, lock_path};
use crate::node::NodeProfile;
use crate::preflight::{ImageCheck, Preflight, PreflightFailure, Probes, SystemCommands};
use crate::results::{EventWriter, ResultsDir, StepId};
use crate::reuse::{Current, ReuseMode, ReuseStore, RunKey};

/// A run's open state: the host lock held, the results directory and the event stream open.
pub(super) struct Session<'r> {
    pub request: &'r RunRequest<'r>,
    pub results: ResultsDir,
    pub events: Option<EventWriter>,
    /// Where the process groups of the run's children are written down.
    pub processes: PathBuf,
    pub summary: RunSummary,
    /// One run per host: held until the session is dropped.
    _lock: HostLock,
}

/// The part of the job plan this run takes ([`RunRequest::only_models`]), and what each of its
/// targets runs with.
pub(super) struct Selection<'j> {
    pub targets: Vec<&'j Target>,
    pub models: Vec<(&'j ModelPlan, &'j ModelRecipes, &'j Target)>,
    pub common: Option<(&'j CommonSource, &'j Target)>,
    pub base_tree: &'j Path,
    pub pr_tree: &'j Path,
}

/// What every record of the run names: the node and both commits.
pub(super) struct Facts<'r> {
    pub node: &'r NodeProfile,
    pub base_commit: String,
    pub pr_commit: String,
}

impl<'r> Session<'r> {
    /// Opens a run: watches for signals, takes the host lock, refuses a drained node, opens the
    /// results directory (dropping the records a run runs again) and the event stream, and
    /// stops the process groups an earlier run here left running.
    pub(super) fn open(request: &'r RunRequest<'r>) -> Result<Session<'r>, RunError> {
        crate::process::stop_all_on_signal().map_err(RunError::Signals)?;
        let inputs = &request.inputs;
        let description = format!(
            "prgate run of {} into {}",
            inputs.plan.head.sha.get(..12).unwrap_or(&inputs.plan.head.sha),
            inputs.results.display()
        );
        let lock = HostLock::acquire(&lock_path(inputs.node), &description, request.wait_lock)?;
        super::refuse_drained(inputs.node)?;
        // What the run writes names a tree's files by their paths in the tree.
        let trees = crate::results::TreePaths::new(&inputs.node.work_dir().join("trees"));
        let results = ResultsDir::open(inputs.results)?.naming_trees(&trees);
        super::discard_runs_again(&results)?;
        let events = inputs
            .events
            .map(|path| EventWriter::create(path).map(|events| events.naming_trees(&trees)))
            .transpose()?;
        let processes = leftovers::folder(results.root());
        let notes = leftovers::stop_leftovers(&processes);
        let summary = RunSummary { notes, ..RunSummary::default() };
        Ok(Session { request, results, events, processes, summary, _lock: lock })
    }

    /// Whether the run has nothing to do: the plan runs nothing (its job plan, empty, is
    /// written), or nothing of what it runs is this run's ([`RunRequest::only_models`]).
    pub(super) fn nothing_to_run(&self) -> Result<bool, RunError> {
        let plan = self.request.inputs.plan;
        if plan.running_models().next().is_none() && !plan.common.selected {
            self.results.write_job(&JobPlan::empty(&plan.head.sha, plan.base_side_commit()))?;
            return Ok(true);
        }
        let chosen = |name: Option<&str>| chosen(self.request, name);
        let runs_anything = plan.running_models().any(|model| chosen(Some(&model.name)))
            || (plan.common.selected && chosen(None));
        Ok(!runs_anything)
    }

    /// Takes over what an earlier run of the same commits judged, for each target whose inputs
    /// are unchanged ([`crate::reuse`]); what this results directory has already stays.
    pub(super) fn take_over(
        &mut self,
        selection: &Selection<'_>,
        job: &Job,
        facts: &Facts<'_>,
    ) -> Result<(), RunError> {
        let ReuseMode::Node { .. } = self.request.reuse else { return Ok(()) };
        let request = self.request;
        let family = job.plan.family;
        let cell_open = |pairs: &[prgate_gate::speed::Pair], noise, covered| {
            steps::cell_needs_pair(request, family, pairs, noise, covered)
        };
        let store = ReuseStore::new(facts.node.cache_dir());
        let recorded = self.results.completed_steps()?;
        for target in &selection.targets {
            let key = facts.run_key(request, family, target);
            let Some(entry) = store.load(&key) else { continue };
            let current = Current {
                key: &key,
                target,
                provenance: &facts.provenance(job.pr_hash(target.model.as_deref())),
                cell_open: &cell_open,
            };
            let selected = crate::reuse::select(&entry, &current);
            if let Some(why) = selected.refused {
                self.summary.notes.push(format!("nothing of {} reused: {why}", target.name()));
            }
            let fresh = |record: &Evidence| !recorded.contains(&StepId::of(record));
            for record in selected.records.iter().filter(|record| fresh(record)) {
                self.results.write(record)?;
            }
        }
        Ok(())
    }

    /// The step loop's state over `selection`, once an earlier attempt's containers are
    /// removed.
    pub(super) fn runner(
        &mut self,
        selection: &Selection<'_>,
        family: u32,
        accuracy_family: u32,
    ) -> Result<Runner<'_>, RunError> {
        let request = self.request;
        let removed = exec_of(request, &self.processes).remove_leftovers();
        self.summary.notes.extend(removed);
        let node = request.inputs.node;
        let expected = super::expected_steps(&selection.targets);
        Ok(Runner {
            request,
            results: &self.results,
            emit: emit::Emitter {
                file: self.events.as_ref(),
                progress: progress::Progress::new(request.progress, expected),
                observer: request.observer,
                skipped: BTreeSet::new(),
            },
            completed: self.results.completed_steps()?,
            summary: &mut self.summary,
            family,
            accuracy_family,
            cache: Cache::new(node.cache_dir()),
            deadline: request.time_limit.map(|limit| Instant::now() + limit),
            installed: BTreeMap::new(),
            speed_since: None,
            servers_used: None,
            clock: crate::gpu_time::PhaseClock::default(),
            exec: exec_of(request, &self.processes),
        })
    }

    /// Counts the steps the loop skipped, and how many of them another results directory
    /// measured (their records name the run that did, `provenance.reused`): both from the
    /// same steps, so the second is never more than the first.
    pub(super) fn count_skipped(&mut self, skipped: &BTreeSet<StepId>) -> Result<(), RunError> {
        self.summary.skipped = skipped.len();
        self.summary.reused = self
            .results
            .records()?
            .iter()
            .filter(|(step, record)| skipped.contains(step) && record.provenance.reused.is_some())
            .count();
        Ok(())
    }

    /// Checks that the step loop recorded every step the job plan expects of `selection`: the
    /// loop takes its steps from the plan, so a step left without a record is a fault of the
    /// loop, never a pass ([`RunError::Unrecorded`]).
    pub(super) fn check_recorded(&self, selection: &Selection<'_>) -> Result<(), RunError> {
        let records: Vec<Evidence> =
            self.results.records()?.into_iter().map(|(_step, record)| record).collect();
        let steps: Vec<String> = selection
            .targets
            .iter()
            .flat_map(|target| target.evidence_steps())
            .filter(|step| !prgate_gate::job::accounted(step, &records))
            .map(|step| step.to_string())
            .collect();
        if steps.is_empty() { Ok(()) } else { Err(RunError::Unrecorded { steps }) }
    }

    /// Saves what each target's run cost, in the results and the node's history; a failure to
    /// save is a note, not an error.
    pub(super) fn save_gpu_time(&mut self, times: Vec<(String, TargetTime)>, facts: &Facts<'_>) {
        let run_name = match self.request.reuse {
            ReuseMode::Node { run } => run.clone(),
            ReuseMode::Off => self.request.inputs.results.display().to_string(),
        };
        let mut history = Vec::new();
        for (name, spent) in times {
            let node = facts.node.name();
            history.extend(spent.history(node, &run_name, &facts.pr_commit, &facts.base_commit));
            if let Err(error) = spent.save(self.results.root(), &name) {
                self.summary.notes.push(format!("the GPU time of {name} was not saved: {error}"));
            }
        }
        if let Err(error) = crate::gpu_time::append_history(facts.node.cache_dir(), &history) {
            self.summary
                .notes
                .push(format!("the node's GPU-time history was not written: {error}"));
        }
    }

    /// Saves what this run judged of each target, for a later run of the same commits to take
    /// over ([`crate::reuse`]).
    pub(super) fn save_for_reuse(
        &mut self,
        selection: &Selection<'_>,
        family: u32,
        facts: &Facts<'_>,
    ) -> Result<(), RunError> {
        let ReuseMode::Node { run } = self.request.reuse else { return Ok(()) };
        let store = ReuseStore::new(facts.node.cache_dir());
        let records = self.results.records()?;
        for target in &selection.targets {
            let mine: Vec<Evidence> = records
                .iter()
                .filter(|(_step, record)| record.model == target.model)
                .map(|(_step, record)| record.clone())
                .collect();
            let key = facts.run_key(self.request, family, target);
            if let Err(error) = store.save(&key, run, target, &mine) {
                let name = target.name();
                self.summary.notes.push(format!("what {name} judged was not saved: {error}"));
            }
        }
        Ok(())
    }

    /// Removes the run's containers, at its end, and hands back what it did.
    pub(super) fn close(mut self) -> RunSummary {
        let removed = exec_of(self.request, &self.processes).remove_leftovers();
        self.summary.notes.extend(removed);
        self.summary
    }
}

/// Where a run's commands run.
fn exec_of<'a>(request: &'a RunRequest<'a>, processes: &'a Path) -> exec::Exec<'a> {
    exec::Exec {
        isolation: request.isolation,
        node: request.inputs.node,
        processes,
        python: request.python,
        stall: crate::process::StallLimit::default(),
    }
}

/// Whether the run takes the target of `model` (`None`: the common checks).
fn chosen(request: &RunRequest<'_>, model: Option<&str>) -> bool {
    let name = model.unwrap_or(COMMON_CHECKS);
    request.only_models.is_none_or(|only| only.iter().any(|m| m == name))
}

impl<'j> Selection<'j> {
    /// The targets of `exported`'s job plan that `request` runs, with their recipes.
    pub(super) fn of(request: &RunRequest<'j>, exported: &'j Exported) -> Selection<'j> {
        let job = &exported.job;
        let plan = request.inputs.plan;
        let targets: Vec<&Target> = job
            .plan
            .targets
            .iter()
            .filter(|target| chosen(request, target.model.as_deref()))
            .collect();
        let models = job
            .models
            .iter()
            .filter_map(|recipes| {
                let target = targets.iter().find(|t| t.model.as_deref() == Some(&recipes.name))?;
                let model = plan.models.iter().find(|model| model.name == recipes.name)?;
                Some((model, recipes, *target))
            })
            .collect();
        let common = job.common.as_ref().zip(targets.iter().find(|t| t.model.is_none()).copied());
        Selection {
            targets,
            models,
            common,
            base_tree: &exported.base_tree,
            pr_tree: &exported.pr_tree,
        }
    }
}

impl<'r> Facts<'r> {
    pub(super) fn of(request: &RunRequest<'r>) -> Facts<'r> {
        let plan = request.inputs.plan;
        Facts {
            node: request.inputs.node,
            base_commit: plan.base_side_commit().to_owned(),
            pr_commit: plan.head.sha.clone(),
        }
    }

    /// The provenance of a record of a target whose PR recipe has `recipe_hash`.
    pub(super) fn provenance(&self, recipe_hash: Option<&str>) -> Provenance {
        let image = self.node.image();
        Provenance {
            node: Some(self.node.name().to_owned()),
            image_digest: Some(image.digest.clone().unwrap_or_else(|| image.name.clone())),
            base_commit: Some(self.base_commit.clone()),
            pr_commit: Some(self.pr_commit.clone()),
            recipe_hash: recipe_hash.map(str::to_owned),
            reused: None,
        }
    }

    /// What a target's judged steps are kept under for a later run ([`crate::reuse`]).
    fn run_key(&self, request: &RunRequest<'_>, family: u32, target: &Target) -> RunKey {
        let node = self.node;
        RunKey {
            prgate_version: env!("CARGO_PKG_VERSION").to_owned(),
            pr_commit: self.pr_commit.clone(),
            base_commit: self.base_commit.clone(),
            target: target.model.clone().unwrap_or_else(|| COMMON_CHECKS.to_owned()),
            node: node.name().to_owned(),
            node_profile: RunKey::profile_hash(node),
            image: node.image().digest.clone().unwrap_or_else(|| node.image().name.clone()),
            isolation: match request.isolation {
                Isolation::Host => format!("host python={}", request.python.display()),
                Isolation::Container { .. } => "container".to_owned(),
            },
            family,
        }
    }
}

/// The preflight, before any install, unless it is off: what the node lacks is evidence, not a
/// crash. Its finding goes into the run's notes and the node's health ledger.
pub(super) fn preflight(
    runner: &mut Runner<'_>,
    selection: &Selection<'_>,
) -> Option<PreflightFailure> {
    let request = runner.request;
    let PreflightMode::On { root, thresholds } = request.preflight else { return None };
    let node = request.inputs.node;
    let mut checkpoints: Vec<String> = selection
        .models
        .iter()
        .filter_map(|(_, recipes, _)| match &recipes.pr {
            RecipeSource::Parsed { recipe, .. } => Some(recipe.checkpoint().to_owned()),
            _ => None,
        })
        .filter(|name| node.checkpoint_path(name).is_some())
        .collect();
    checkpoints.sort();
    checkpoints.dedup();
    let commands = SystemCommands::new(&runner.results.root().join("logs").join("preflight"));
    let image_check: Option<&dyn ImageCheck> = match request.isolation {
        Isolation::Container { engine, .. } => Some(engine),
        Isolation::Host => None,
    };
    let preflight = Preflight {
        node,
        checkpoints: &checkpoints,
        thresholds: *thresholds,
        probes: Probes { commands: &commands, root },
        image_check,
    };
    let failure = preflight.run().err()?;
    runner.summary.notes.push(format!("the preflight found: {}", failure.to_not_run().1));
    runner.summary.notes.extend(crate::health::record_preflight(node, &failure, None));
    Some(failure)
}

/// A preflight finding that stops the whole run: every target of `selection` recorded
/// `not-run` with it, one whole-check record per check.
pub(super) fn stop_for_preflight(
    runner: &mut Runner<'_>,
    selection: &Selection<'_>,
    facts: &Facts<'_>,
    failure: &PreflightFailure,
) -> Result<(), RunError> {
    let (reason, detail) = failure.to_not_run();
    if let Some((source, _target)) = selection.common {
        let subject = Subject { model: None, provenance: facts.provenance(source.hash()) };
        runner.not_run_common(&subject, reason, &detail)?;
    }
    for &(model, recipes, target) in &selection.models {
        let job = model_job(model, recipes, target, selection, facts);
        runner.not_run_model(&job, reason, &detail)?;
    }
    Ok(())
}

/// The step loop: the common checks first, then each model, in the job plan's order; each
/// target's GPU time by phase (`crate::gpu_time`) against its estimate.
pub(super) fn run_targets(
    runner: &mut Runner<'_>,
    selection: &Selection<'_>,
    facts: &Facts<'_>,
    failure: Option<&PreflightFailure>,
) -> Result<Vec<(String, TargetTime)>, RunError> {
    let mut times: Vec<(String, TargetTime)> = Vec::new();
    if let Some((source, target)) = selection.common {
        let subject = Subject { model: None, provenance: facts.provenance(source.hash()) };
        let sides = [(Side::Base, selection.base_tree), (Side::Pr, selection.pr_tree)];
        runner.clock.take();
        runner.common(&subject, source, target, &sides)?;
        let estimate = crate::job::common_estimate(source);
        // The common checks' commands get no GPU.
        let spent = TargetTime::new(None, 0, &runner.clock.take(), estimate.as_ref());
        times.push((COMMON_CHECKS.to_owned(), spent));
    }
    for &(model, recipes, target) in &selection.models {
        let mut job = model_job(model, recipes, target, selection, facts);
        job.no_checkpoint = no_checkpoint(failure, recipes);
        runner.clock.take();
        runner.servers_used = None;
        runner.model(&job)?;
        let gpus =
            recipes.pr.parsed().map_or(0, |recipe| crate::gpu_time::gpus_held(facts.node, recipe));
        let estimate = crate::job::model_estimate(model, recipes, facts.node);
        let mut spent =
            TargetTime::new(Some(&model.name), gpus, &runner.clock.take(), estimate.as_ref());
        spent.servers = runner.servers_used.take();
        times.push((model.name.clone(), spent));
    }
    Ok(times)
}

/// A model's job: what the step loop runs it with.
fn model_job<'j>(
    model: &'j ModelPlan,
    recipes: &'j ModelRecipes,
    target: &'j Target,
    selection: &Selection<'j>,
    facts: &Facts<'_>,
) -> steps::ModelJob<'j> {
    let recipe = &recipes.pr;
    steps::ModelJob {
        model,
        recipe,
        base_recipe: recipes.base.as_deref(),
        cacheable: recipes.unchanged,
        base_own: recipes.base_own.as_deref(),
        target,
        base_tree: if model.new { None } else { Some(selection.base_tree) },
        pr_tree: selection.pr_tree,
        subject: Subject {
            model: Some(model.name.clone()),
            provenance: facts.provenance(recipe.hash()),
        },
        no_checkpoint: None,
    }
}

/// The preflight's finding that the PR recipe's checkpoint of `recipes` is missing or empty on
/// disk: why the steps that need a server are `not-run`.
fn no_checkpoint(
    failure: Option<&PreflightFailure>,
    recipes: &ModelRecipes,
) -> Option<StepFailure> {
    let RecipeSource::Parsed { recipe, .. } = &recipes.pr else { return None };
    let (reason, detail) = failure?.missing_checkpoint(recipe.checkpoint())?.to_not_run();
    Some(StepFailure::new(reason, detail))
}

#[cfg(test)]
mod tests;
