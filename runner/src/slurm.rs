//! The SLURM executor (`prgate run --executor slurm`): a run spread over a cluster as one batch
//! job per model, plus one for the common checks, gathered into one results directory.
//!
//! Each job runs the step loop ([`crate::run`]) for its model alone, as a command the caller
//! gives ([`SlurmRequest::command`]; the binary's is `prgate run --executor local
//! --only-model M ...`), with a results directory of its own on the shared filesystem,
//! `<results>/slurm/<model>/`. Jobs that land on one node take its host lock
//! ([`crate::lock`]) in turn. The orchestrator:
//!
//! 1. names the run's jobs `prgate-<run id>`, the id kept in `<results>/slurm/run-id` so that a
//!    rerun in the same results directory has the same name. It first cancels the live jobs of
//!    that name (an earlier orchestrator killed outright leaves them running) and waits until
//!    they are gone;
//! 2. writes each job's batch script (`<results>/slurm/<model>/job.sh`: `#SBATCH` options,
//!    then `exec` of the command, so that SLURM's signals reach it) and submits it with
//!    `sbatch --parsable`;
//! 3. polls `squeue --states=all --name` until every job is in a final state (`COMPLETING`, while
//!    SLURM kills what is left of a job, is not one), reads the final one's `scontrol show job`
//!    (`JobState`, `Reason`, `ExitCode`), and passes each job's event stream on to the run's;
//! 4. gathers each finished job: its records are copied into `<results>/evidence` (validated,
//!    atomically, by [`ResultsDir::write`]); the run's directory then holds, for that model,
//!    exactly what its job recorded, so a record of an earlier run that the job no longer has
//!    goes. A job that did not complete (`TIMEOUT`, `FAILED`, `CANCELLED`, ...) becomes a
//!    `not-run` record for every step it did not record ([`job::JobState::not_run_reason`]),
//!    whose detail names the job, its state, reason and exit code, and ends with the tail of
//!    its output file.
//!
//! `SIGINT`, `SIGTERM` or `SIGHUP` to the orchestrator cancels the run's jobs (`scancel
//! --name`), waits for them to end, copies what they recorded, then lets the orchestrator die
//! of the signal. An error cancels them too. A rerun resubmits every job; each resumes from
//! its own results directory.
//!
//! What it leaves to others: running the steps (the step loop in each job), the job's
//! command line (the binary), and finding a shared directory: the results directory must be
//! one path that the orchestrator and every compute node see (docs/slurm.md).

mod client;
mod gather;
mod health;
mod job;
mod limits;
mod progress;

use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io::{self, Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use prgate_gate::evidence::{Evidence, NotRunReason, Provenance};
use prgate_scope::plan::ModelPlan;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

pub use job::{JobRecord, JobState, QUEUE_FORMAT, QueueEntry, QueueLineError, parse_queue};
pub use limits::{JOB_TIME_SLACK, JOB_WAIT_LOCK, JobLimits};

use self::client::{BatchScript, Slurm};
use self::gather::{not_run_record, steps_of, unrecorded};
use self::progress::{Display, JobLine};
use crate::key::Key;
use crate::node::NodeProfile;
use crate::recipe::Recipe;
use crate::results::{
    Event, EventWriter, ResultsDir, ResultsError, StepObserver, StepStarted, event_finished,
    event_started,
};
use crate::run::{COMMON_CHECKS, RunInputs};

/// How often the jobs' states are read.
const POLL: Duration = Duration::from_millis(500);
/// How long `squeue` may fail in a row before the run gives up (and cancels its jobs).
const QUEUE_PATIENCE: Duration = Duration::from_secs(120);
/// How long cancelled jobs have to end: SLURM's `KillWait` and the step loop's grace period.
const CANCEL_WAIT: Duration = Duration::from_secs(60);
/// How many lines of a job's output a `not-run` record ends with.
const OUTPUT_TAIL_LINES: usize = 20;
/// A job's time limit when none is given is its estimated time ([`crate::schedule`], from
/// the recipe's shape) times this, plus [`ESTIMATE_SLACK`]: an estimate is not a promise.
const ESTIMATE_FACTOR: u32 = 2;
/// See [`ESTIMATE_FACTOR`]; also the whole limit of a job without a recipe, which records its
/// `not-run` records at once.
const ESTIMATE_SLACK: Duration = Duration::from_secs(15 * 60);

/// What to run on the cluster, and where the evidence goes.
pub struct SlurmRequest<'a> {
    pub inputs: RunInputs<'a>,
    /// The command a job runs: the step loop for one target, writing into the target's
    /// results directory and event stream.
    pub command: &'a dyn Fn(&JobTarget<'_>) -> Vec<OsString>,
    pub settings: &'a SlurmSettings,
    /// Show progress on one rewritten line (a terminal) rather than a line per change.
    pub progress: bool,
    /// Who watches the jobs' events as they are passed on (the PR comment), besides the
    /// event stream's file: each event once, as the local step loop hands them.
    pub observer: Option<&'a dyn StepObserver>,
}

impl fmt::Debug for SlurmRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlurmRequest")
            .field("repo", &self.inputs.repo)
            .field("node", &self.inputs.node.name())
            .field("results", &self.inputs.results)
            .field("events", &self.inputs.events)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// How the jobs are submitted.
#[derive(Debug, Clone, Default)]
pub struct SlurmSettings {
    /// The folder of SLURM's programs; `None` finds them in the `PATH`.
    pub bin_dir: Option<PathBuf>,
    /// Each job's time limit (`--time`, rounded up to minutes); `None` gives each job twice
    /// its estimated time ([`crate::schedule::estimate_model`], from the recipe the job runs
    /// by: base's contract) plus 15 minutes.
    pub time_limit: Option<Duration>,
    /// More `sbatch` options for every job: `--partition=gpu`, `--exclusive`, `--gres=gpu:8`.
    pub sbatch_args: Vec<String>,
}

/// One job's part of the run, for [`SlurmRequest::command`].
#[derive(Debug, Clone, Copy)]
pub struct JobTarget<'a> {
    /// The model, or [`COMMON_CHECKS`].
    pub name: &'a str,
    /// The job's results directory.
    pub results: &'a Path,
    /// The job's event stream, which the orchestrator passes on.
    pub events: &'a Path,
}

/// What a SLURM run did.
#[derive(Debug, Clone, Default)]
pub struct SlurmSummary {
    /// The jobs' name: `scancel --name=<it>` cancels them.
    pub job_name: String,
    pub jobs: Vec<JobOutcome>,
    /// The records copied from the jobs.
    pub copied: usize,
    /// The `not-run` records written for the steps of jobs that did not complete.
    pub not_run: usize,
    /// What the user should know and no record says.
    pub notes: Vec<String>,
    /// The nodes left out of every job, drained by prgate's health ledger: each in one line
    /// ([`crate::health::NodeHealth::summary`]).
    pub drained: Vec<String>,
}

/// How one job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutcome {
    /// The model, or [`COMMON_CHECKS`].
    pub target: String,
    pub id: u64,
    pub state: JobState,
    pub reason: String,
    /// `status:signal`, as SLURM writes it.
    pub exit_code: String,
}

/// Why a SLURM run stopped before its end. A job that fails is evidence, not an error.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    #[error("cannot run {program}: {source}{}", client::not_found_hint(source))]
    Program { program: String, source: io::Error },
    #[error("{command} failed ({status}): {stderr}")]
    Failed { command: String, status: String, stderr: String },
    #[error("cannot read what {command} printed: {output}")]
    Unreadable { command: String, output: String },
    #[error("cannot write the job's batch script: {problem}")]
    Script { problem: String },
    #[error(transparent)]
    Results(#[from] ResultsError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("cannot watch for signals: {0}")]
    Signals(io::Error),
    #[error("the plan has no model {model}")]
    UnknownModel { model: String },
    #[error(transparent)]
    Run(#[from] Box<crate::run::RunError>),
    #[error("the health ledger: {0}")]
    Health(crate::health::HealthError),
    #[error(
        "{source}\nprgate left these drained nodes out of the job (sbatch --exclude):\n  {nodes}\nhint: {hint}",
        hint = crate::health::how_to_readmit("NODE")
    )]
    Drained { nodes: String, source: Box<SlurmError> },
}

/// Resumes node `name` in SLURM (`scontrol update NodeName=name State=RESUME`), with SLURM's
/// programs from `bin_dir` or the `PATH`: what re-admitting a node prgate drained in SLURM
/// does.
pub fn resume_node(bin_dir: Option<&Path>, name: &str) -> Result<(), SlurmError> {
    Slurm::new(bin_dir).resume_node(name)
}

/// Runs `request.inputs.plan` as SLURM jobs and gathers their evidence; returns once every job has
/// ended and been gathered.
pub fn run(request: &SlurmRequest<'_>) -> Result<SlurmSummary, SlurmError> {
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).map_err(SlurmError::Signals)?;
    let results = ResultsDir::open(request.inputs.results)?;
    let root = results
        .root()
        .canonicalize()
        .map_err(|source| SlurmError::Io { path: results.root().to_path_buf(), source })?;
    let slurm_dir = root.join("slurm");
    let run_id = run_id(&slurm_dir)?;
    let job_name = format!("prgate-{run_id}");
    let client = Slurm::new(request.settings.bin_dir.as_deref());
    let events = request.inputs.events.map(EventWriter::create).transpose()?;
    let mut summary = SlurmSummary { job_name: job_name.clone(), ..SlurmSummary::default() };
    if request.inputs.plan.running_models().next().is_none() && !request.inputs.plan.common.selected
    {
        return Ok(summary);
    }
    // What every job must record, made once before any is submitted.
    let job_plan = crate::run::build_job(&request.inputs).map_err(Box::new)?.job;
    results.write_job(&job_plan.plan)?;
    let targets: Vec<Option<String>> =
        job_plan.plan.targets.iter().map(|target| target.model.clone()).collect();
    summary.notes.extend(cancel_leftovers(&client, &job_name)?);
    let (exclusion, notes) = health::Exclusion::read(&client, request.inputs.node)?;
    summary.notes.extend(notes);
    summary.drained = exclusion.drained.iter().map(crate::health::NodeHealth::summary).collect();

    let mut orchestra = Orchestra {
        request,
        client,
        job_name,
        results,
        events,
        jobs: Vec::new(),
        armed: true,
        summary,
        job_plan,
        exclusion,
    };
    for target in targets {
        let job = orchestra.submit(target, &slurm_dir)?;
        orchestra.jobs.push(job);
    }
    orchestra.watch(&mut signals)?;
    Ok(orchestra.finish())
}

impl Orchestra<'_> {
    /// Watches the jobs until every one has ended and been gathered: their states, their
    /// evidence, their events forwarded and the progress shown; a signal cancels them. The
    /// queue may fail to answer for [`QUEUE_PATIENCE`] before the run gives up.
    fn watch(&mut self, signals: &mut Signals) -> Result<(), SlurmError> {
        let mut display = Display::new(self.request.progress, &self.job_name);
        let mut failing_since: Option<Instant> = None;
        loop {
            if let Some(signal) = signals.pending().next() {
                self.abort(signal, signals);
            }
            match self.look() {
                Ok(()) => failing_since = None,
                Err(error) => {
                    if let Some(signal) = signals.pending().next() {
                        self.abort(signal, signals);
                    }
                    let since = *failing_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= QUEUE_PATIENCE {
                        return Err(error);
                    }
                    if since.elapsed() < POLL * 2 {
                        eprintln!("slurm: {error}; trying again");
                    }
                }
            }
            self.gather_ended()?;
            self.forward_events();
            display.update(&self.lines());
            if self.jobs.iter().all(|job| job.gathered) {
                break;
            }
            if let Some(signal) = pause(signals, POLL) {
                self.abort(signal, signals);
            }
        }
        display.close();
        Ok(())
    }

    /// The run's summary, with each job's end, once every job is gathered (nothing is
    /// cancelled on drop from here on).
    fn finish(&mut self) -> SlurmSummary {
        self.armed = false;
        let mut summary = std::mem::take(&mut self.summary);
        for job in &self.jobs {
            if let Some(ended) = &job.ended {
                summary.jobs.push(JobOutcome {
                    target: job.target.clone(),
                    id: job.id,
                    state: ended.state.clone(),
                    reason: ended.reason.clone(),
                    exit_code: ended.exit_code.clone(),
                });
            }
        }
        summary
    }
}

/// The run's id: the one in `<slurm_dir>/run-id`, else a new one written there.
fn run_id(slurm_dir: &Path) -> Result<String, SlurmError> {
    let path = slurm_dir.join("run-id");
    if let Ok(text) = std::fs::read_to_string(&path) {
        let id = text.trim();
        if !id.is_empty() && id.chars().all(|char| char.is_ascii_hexdigit()) {
            return Ok(id.to_owned());
        }
    }
    let seed = format!("{}-{:?}-{}", std::process::id(), SystemTime::now(), slurm_dir.display());
    let id = Key::of(seed.as_bytes()).short();
    std::fs::create_dir_all(slurm_dir)
        .and_then(|()| std::fs::write(&path, format!("{id}\n")))
        .map_err(|source| SlurmError::Io { path: path.clone(), source })?;
    Ok(id)
}

/// Cancels the live jobs named `job_name` (an earlier run in this results directory that was
/// killed outright left them) and waits until they are gone.
fn cancel_leftovers(client: &Slurm, job_name: &str) -> Result<Vec<String>, SlurmError> {
    let live = client.live(job_name)?;
    if live.is_empty() {
        return Ok(Vec::new());
    }
    client.cancel_name(job_name)?;
    let deadline = Instant::now() + CANCEL_WAIT;
    while !client.live(job_name)?.is_empty() && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    let ids: Vec<String> = live.iter().map(|entry| entry.id.to_string()).collect();
    Ok(vec![format!(
        "cancelled SLURM job(s) {} ({job_name}), left running by an earlier run in this results directory",
        ids.join(", ")
    )])
}

/// Sleeps for `duration`, or until a signal comes; returns the signal.
fn pause(signals: &mut Signals, duration: Duration) -> Option<i32> {
    let deadline = Instant::now() + duration;
    loop {
        if let Some(signal) = signals.pending().next() {
            return Some(signal);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(50)));
    }
}

/// The run's jobs, and what is needed to gather them.
struct Orchestra<'r> {
    request: &'r SlurmRequest<'r>,
    client: Slurm,
    job_name: String,
    results: ResultsDir,
    events: Option<EventWriter>,
    jobs: Vec<Job>,
    /// Whether dropping it cancels the jobs: until the run ends normally.
    armed: bool,
    summary: SlurmSummary,
    /// What every job must record.
    job_plan: crate::job::Job,
    /// The drained nodes the jobs leave out.
    exclusion: health::Exclusion,
}

/// One submitted job.
struct Job {
    /// The model, or [`COMMON_CHECKS`].
    target: String,
    /// The model; `None` for the common checks.
    model: Option<String>,
    id: u64,
    /// The job's results directory.
    dir: PathBuf,
    /// Its output file.
    output: PathBuf,
    events: Forward,
    /// Its state as last read, and why.
    state: Option<(JobState, String)>,
    ended: Option<Ended>,
    gathered: bool,
    /// When it was submitted: the records it wrote are the newer ones.
    submitted: SystemTime,
}

/// How a job ended.
struct Ended {
    state: JobState,
    reason: String,
    exit_code: String,
    /// SLURM no longer knew the job: its record was dropped before it was read.
    lost: bool,
    /// The node it ran on (`BatchHost=`), when SLURM says.
    host: Option<String>,
    /// Its nodes SLURM had down when it ended (a `NODE_FAIL`'s), each with its state and
    /// reason: what a strike and the `not-run` records name.
    down: Vec<(String, String)>,
}

impl Orchestra<'_> {
    /// Writes the batch script of `target` and submits it.
    fn submit(&self, target: Option<String>, slurm_dir: &Path) -> Result<Job, SlurmError> {
        let name = target.clone().unwrap_or_else(|| COMMON_CHECKS.to_owned());
        let key = match &target {
            Some(model) => crate::results::escape(model),
            None => COMMON_CHECKS.to_owned(),
        };
        let dir = slurm_dir.join(&key);
        std::fs::create_dir_all(&dir)
            .map_err(|source| SlurmError::Io { path: dir.clone(), source })?;
        let events = dir.join("events.jsonl");
        let command =
            (self.request.command)(&JobTarget { name: &name, results: &dir, events: &events });
        let script = BatchScript {
            job_name: &self.job_name,
            output: &dir.join("slurm-%j.out"),
            chdir: &dir,
            time_limit: Some(match self.request.settings.time_limit {
                Some(limit) => limit,
                None => self.estimated_limit(target.as_deref())?,
            }),
            command: &command,
        }
        .render()?;
        let script_path = dir.join("job.sh");
        std::fs::write(&script_path, script)
            .map_err(|source| SlurmError::Io { path: script_path.clone(), source })?;
        let forward = Forward::from_end(&events);
        let submitted = SystemTime::now();
        let mut options = self.request.settings.sbatch_args.clone();
        options.extend(self.topology_nodes(target.as_deref()));
        options.extend(self.exclusion.sbatch_arg());
        let id = self
            .client
            .submit(&script_path, &options)
            .map_err(|error| self.exclusion.refused(error))?;
        Ok(Job {
            target: name,
            model: target,
            id,
            output: dir.join(format!("slurm-{id}.out")),
            dir,
            events: forward,
            state: None,
            ended: None,
            gathered: false,
            submitted,
        })
    }

    /// Reads the jobs' states; a job in a final state gets its `scontrol` record.
    fn look(&mut self) -> Result<(), SlurmError> {
        let entries = self.client.queue(&self.job_name)?;
        for job in self.jobs.iter_mut().filter(|job| job.ended.is_none()) {
            match entries.iter().find(|entry| entry.id == job.id) {
                Some(entry) => {
                    job.state = Some((entry.state.clone(), entry.reason.clone()));
                    if entry.state.is_final() {
                        job.ended = Some(ended(&self.client, job.id, entry)?);
                    }
                }
                // Not listed: SLURM dropped its record, or squeue does not list it yet.
                None => match self.client.show_job(job.id)? {
                    Some(record) => {
                        let state = record.state().unwrap_or_else(|| JobState::new("UNKNOWN"));
                        let reason = record.reason().unwrap_or_default().to_owned();
                        if state.is_final() {
                            job.ended = Some(Ended {
                                state: state.clone(),
                                reason: reason.clone(),
                                exit_code: record.exit_code().unwrap_or("?").to_owned(),
                                lost: false,
                                host: record.get("BatchHost").map(str::to_owned),
                                down: down_nodes(&self.client, &state, &record),
                            });
                        }
                        job.state = Some((state, reason));
                    }
                    None => {
                        let (state, reason) = job
                            .state
                            .clone()
                            .unwrap_or_else(|| (JobState::new("UNKNOWN"), String::new()));
                        job.ended = Some(Ended {
                            state,
                            reason,
                            exit_code: "?".to_owned(),
                            lost: true,
                            host: None,
                            down: Vec::new(),
                        });
                    }
                },
            }
        }
        Ok(())
    }

    /// Gathers every job that has ended and is not gathered yet.
    fn gather_ended(&mut self) -> Result<(), SlurmError> {
        for index in 0..self.jobs.len() {
            if self.jobs[index].ended.is_some() && !self.jobs[index].gathered {
                self.jobs[index].events.pump(self.events.as_ref(), self.request.observer);
                self.gather(index, true)?;
                self.jobs[index].gathered = true;
                let job = &self.jobs[index];
                if let Some(ended) = &job.ended {
                    let down: Vec<&str> =
                        ended.down.iter().map(|(name, _)| name.as_str()).collect();
                    let notes = health::strike_job(
                        self.request.inputs.node,
                        ended.host.as_deref(),
                        &down,
                        &job.dir,
                        &ended.state,
                        &format!("job {} ({})", job.id, self.job_name),
                        job.submitted,
                    );
                    self.summary.notes.extend(notes);
                }
            }
        }
        Ok(())
    }

    /// Copies the records of job `index` into the run's results directory, replacing what
    /// the run's directory holds for its model; with `not_run`, records the steps it did not
    /// record when it did not complete.
    fn gather(&mut self, index: usize, not_run: bool) -> Result<(), SlurmError> {
        let job = &self.jobs[index];
        let records: Vec<Evidence> =
            ResultsDir::open(&job.dir)?.records()?.into_iter().map(|(_, record)| record).collect();
        let steps = steps_of(&records);
        for (step, _record) in self.results.records()? {
            if step.model() == job.model.as_deref() && !steps.contains(&step) {
                let path = self.results.evidence_path(&step);
                std::fs::remove_file(&path).map_err(|source| SlurmError::Io { path, source })?;
            }
        }
        for record in &records {
            self.results.write(record)?;
        }
        self.summary.copied += records.len();
        if let Err(error) =
            crate::gpu_time::TargetTime::copy_all(&job.dir, self.request.inputs.results)
        {
            self.summary
                .notes
                .push(format!("the GPU time of job {} was not gathered: {error}", job.id));
        }
        let Some(ended) = job.ended.as_ref().filter(|_| not_run) else { return Ok(()) };
        let reason = match ended.state.not_run_reason() {
            Some(reason) => reason,
            None if ended.lost => NotRunReason::Node,
            None => return Ok(()),
        };
        let Some(target) = self.job_plan.plan.target(job.model.as_deref()) else {
            return Ok(());
        };
        let hash = match job.model.as_deref() {
            None => self.job_plan.common.as_ref().and_then(|common| common.hash()),
            Some(model) => {
                self.job_plan.models.iter().find(|m| m.name == model).and_then(|m| m.pr.hash())
            }
        }
        .map(str::to_owned);
        let provenance = records
            .iter()
            .find(|record| record.model == job.model)
            .map(|record| record.provenance.clone())
            .unwrap_or_else(|| self.provenance(hash));
        let detail = detail(job, ended, &self.job_name);
        for step in unrecorded(target, &records) {
            let record = not_run_record(&step, &provenance, reason, &detail);
            let started = event_started(&step);
            self.emit(&started)?;
            self.results.write(&record)?;
            self.emit(&event_finished(&step, StepStarted::of(&started), &record))?;
            self.summary.not_run += 1;
        }
        Ok(())
    }

    /// The time limit of the job of `model` (`None`: the common checks) when none is given:
    /// its estimate ([`job_estimate`]) times [`ESTIMATE_FACTOR`], plus [`ESTIMATE_SLACK`].
    fn estimated_limit(&self, model: Option<&str>) -> Result<Duration, SlurmError> {
        let plan = model.map(|model| self.model_plan(model)).transpose()?;
        let estimate = job_estimate(&self.job_plan, plan.as_ref(), self.request.inputs.node);
        Ok(limit_from_estimate(estimate))
    }

    /// `--nodes=K --ntasks=K` for a model whose topology takes K nodes (one allocation per
    /// model, each instance on nodes of its own: docs/topology.md); nothing for the others.
    fn topology_nodes(&self, model: Option<&str>) -> Vec<String> {
        let nodes = model
            .and_then(|model| pr_recipe(&self.job_plan, model))
            .and_then(|recipe| recipe.topology().map(|t| t.nodes()))
            .unwrap_or(1);
        if nodes <= 1 {
            return Vec::new();
        }
        vec![format!("--nodes={nodes}"), format!("--ntasks={nodes}")]
    }

    /// The plan of `model`.
    fn model_plan(&self, model: &str) -> Result<ModelPlan, SlurmError> {
        self.request
            .inputs
            .plan
            .models
            .iter()
            .find(|plan| plan.name == model)
            .cloned()
            .ok_or_else(|| SlurmError::UnknownModel { model: model.to_owned() })
    }

    /// The provenance the step loop gives a model's records.
    fn provenance(&self, recipe_hash: Option<String>) -> Provenance {
        let plan = self.request.inputs.plan;
        let node = self.request.inputs.node;
        Provenance {
            node: Some(node.name().to_owned()),
            image_digest: Some(
                node.image().digest.clone().unwrap_or_else(|| node.image().name.clone()),
            ),
            base_commit: Some(plan.base_side_commit().to_owned()),
            pr_commit: Some(plan.head.sha.clone()),
            recipe_hash,
            reused: None,
        }
    }

    /// `event` to the run's stream and the observer.
    fn emit(&self, event: &Event) -> Result<(), ResultsError> {
        if let Some(events) = &self.events {
            events.append(event)?;
        }
        if let Some(observer) = self.request.observer {
            observer.observe(event);
        }
        Ok(())
    }

    /// Passes the jobs' new events on to the run's stream and the observer.
    fn forward_events(&mut self) {
        for job in &mut self.jobs {
            job.events.pump(self.events.as_ref(), self.request.observer);
        }
    }

    /// What the display shows.
    fn lines(&self) -> Vec<JobLine> {
        self.jobs
            .iter()
            .map(|job| {
                let state = match (&job.ended, &job.state) {
                    (Some(ended), _) if ended.lost => format!("{} (record lost)", ended.state),
                    (Some(ended), _) => with_reason(
                        &ended.state,
                        &ended.reason,
                        Some(&ended.exit_code).filter(|code| *code != "0:0"),
                    ),
                    (None, Some((state, reason))) => with_reason(state, reason, None),
                    (None, None) => "SUBMITTED".to_owned(),
                };
                JobLine { target: job.target.clone(), id: job.id, state }
            })
            .collect()
    }

    /// Cancels the jobs, waits for them to end (at most [`CANCEL_WAIT`], less on a second
    /// signal), copies what they recorded, then dies of `signal`.
    fn abort(&mut self, signal: i32, signals: &mut Signals) -> ! {
        let name = signal_hook::low_level::signal_name(signal).unwrap_or("a signal");
        eprintln!(
            "\nprgate: got {name}: cancelling the run's SLURM jobs (scancel --name={})",
            self.job_name
        );
        if let Err(error) = self.client.cancel_name(&self.job_name) {
            eprintln!("prgate: {error}");
        }
        self.armed = false;
        let deadline = Instant::now() + CANCEL_WAIT;
        while Instant::now() < deadline && signals.pending().next().is_none() {
            let _ = self.look();
            if self.jobs.iter().all(|job| job.ended.is_some()) {
                break;
            }
            std::thread::sleep(POLL);
        }
        self.forward_events();
        for index in 0..self.jobs.len() {
            if !self.jobs[index].gathered
                && let Err(error) = self.gather(index, false)
            {
                eprintln!("prgate: gathering job {}: {error}", self.jobs[index].id);
            }
        }
        let _ = signal_hook::low_level::emulate_default_handler(signal);
        // Only reached if the default action of the signal does not end the process.
        std::process::exit(128 + signal);
    }
}

impl Drop for Orchestra<'_> {
    /// A run that stops on an error (or a panic) cancels its jobs.
    fn drop(&mut self) {
        if self.armed && !self.jobs.is_empty() {
            let _ = self.client.cancel_name(&self.job_name);
        }
    }
}

/// The final state of a job `squeue` listed as `entry`, with its `scontrol` record.
fn ended(client: &Slurm, id: u64, entry: &QueueEntry) -> Result<Ended, SlurmError> {
    let record = client.show_job(id)?;
    let state = record.as_ref().and_then(JobRecord::state).unwrap_or_else(|| entry.state.clone());
    let reason = record.as_ref().and_then(JobRecord::reason).unwrap_or(&entry.reason).to_owned();
    let exit_code = record.as_ref().and_then(JobRecord::exit_code).unwrap_or("?").to_owned();
    let host = record.as_ref().and_then(|record| record.get("BatchHost")).map(str::to_owned);
    let down = record.as_ref().map(|record| down_nodes(client, &state, record)).unwrap_or_default();
    Ok(Ended { state, reason, exit_code, lost: false, host, down })
}

/// The nodes of a job that ended `NODE_FAIL` that SLURM has down (none for any other state, or
/// when SLURM cannot say).
fn down_nodes(client: &Slurm, state: &JobState, record: &JobRecord) -> Vec<(String, String)> {
    if state.name() != "NODE_FAIL" {
        return Vec::new();
    }
    record
        .get("NodeList")
        .filter(|list| !list.is_empty() && *list != "(null)")
        .and_then(|list| client.down_nodes(list).ok())
        .unwrap_or_default()
}

/// What the PR side of `model` runs by, as the job plan has it: base's recipe with the PR's
/// server command ([`crate::job`] decides it); none when the PR has no valid recipe.
fn pr_recipe<'a>(job: &'a crate::job::Job, model: &str) -> Option<&'a Recipe> {
    job.models.iter().find(|recipes| recipes.name == model)?.pr.parsed()
}

/// The estimated time of the job of `model` (`None`: the common checks) on `node`: the job
/// plan's ([`crate::job::model_estimate`]), zero without a valid recipe.
fn job_estimate(job: &crate::job::Job, model: Option<&ModelPlan>, node: &NodeProfile) -> Duration {
    let estimate = match model {
        Some(model) => job
            .models
            .iter()
            .find(|recipes| recipes.name == model.name)
            .and_then(|recipes| crate::job::model_estimate(model, recipes, node)),
        None => job.common.as_ref().and_then(crate::job::common_estimate),
    };
    estimate.map_or(Duration::ZERO, |estimate| estimate.duration())
}

/// A job's time limit from its estimated time.
fn limit_from_estimate(estimate: Duration) -> Duration {
    estimate.saturating_mul(ESTIMATE_FACTOR).saturating_add(ESTIMATE_SLACK)
}

/// `STATE`, `STATE (reason)` or `STATE (reason, exit code E:S)`.
fn with_reason(state: &JobState, reason: &str, exit_code: Option<&String>) -> String {
    let mut parts = Vec::new();
    if !reason.is_empty() && reason != "None" {
        parts.push(reason.to_owned());
    }
    if let Some(code) = exit_code {
        parts.push(format!("exit code {code}"));
    }
    if parts.is_empty() { state.to_string() } else { format!("{state} ({})", parts.join(", ")) }
}

/// The detail of the `not-run` records of a job that did not complete.
fn detail(job: &Job, ended: &Ended, job_name: &str) -> String {
    let mut text = if ended.lost {
        format!(
            "SLURM no longer knows the job {} ({job_name}), last seen {}: it drops a job's record minutes after the job ends; it did not record this step",
            job.id, ended.state
        )
    } else {
        format!(
            "the SLURM job {} ({job_name}) ended {} (reason {}, exit code {}) before it recorded this step",
            job.id, ended.state, ended.reason, ended.exit_code
        )
    };
    for (node, state) in &ended.down {
        text.push_str(&format!("; node {node} failed: SLURM has it {state}"));
    }
    let output = job.output.display();
    match crate::process::tail(&job.output, OUTPUT_TAIL_LINES) {
        Ok(tail) if !tail.trim().is_empty() => {
            text.push_str(&format!("; the end of its output ({output}):\n{tail}"));
        }
        Ok(_) => text.push_str(&format!("; its output ({output}) is empty")),
        Err(error) => text.push_str(&format!("; its output ({output}) cannot be read: {error}")),
    }
    text
}

/// A job's event stream, passed on to the run's a whole line at a time.
struct Forward {
    path: PathBuf,
    /// How much of the file is passed on (or was there before the job).
    offset: u64,
}

impl Forward {
    /// Passes on what is written to `path` from now on.
    fn from_end(path: &Path) -> Forward {
        let offset = std::fs::metadata(path).map_or(0, |metadata| metadata.len());
        Forward { path: path.to_path_buf(), offset }
    }

    /// Passes the new whole lines on to `to` and `observer`; a line that is not an event is
    /// dropped.
    fn pump(&mut self, to: Option<&EventWriter>, observer: Option<&dyn StepObserver>) {
        if to.is_none() && observer.is_none() {
            return;
        }
        let Ok(mut file) = File::open(&self.path) else { return };
        let mut bytes = Vec::new();
        if file
            .seek(SeekFrom::Start(self.offset))
            .and_then(|_| file.read_to_end(&mut bytes))
            .is_err()
        {
            return;
        }
        let Some(end) = bytes.iter().rposition(|byte| *byte == b'\n') else { return };
        for line in bytes[..end].split(|byte| *byte == b'\n') {
            let Ok(event) = serde_json::from_slice::<Event>(line) else { continue };
            if let Some(to) = to
                && to.append(&event).is_err()
            {
                return;
            }
            if let Some(observer) = observer {
                observer.observe(&event);
            }
        }
        self.offset += end as u64 + 1;
    }
}

#[cfg(test)]
mod tests {
    use prgate_scope::plan::Tier;

    use super::*;
    use crate::job::tests::{RECIPE as BASE, model, node, plan};
    use crate::job::{JobRequest, RecipePaths};
    use crate::schedule::{History, estimate_model_on};

    /// The job plan of a full `alpha` whose recipe is `base` in base's tree and `pr` in the
    /// PR's, on a node of one GPU.
    fn alpha_job(base: &str, pr: &str) -> (crate::job::Job, ModelPlan, NodeProfile) {
        let root = tempfile::tempdir().expect("a temporary directory");
        for (side, text) in [("base", base), ("pr", pr)] {
            let dir = root.path().join(side).join("test/e2e");
            std::fs::create_dir_all(&dir).expect("the tree");
            std::fs::write(dir.join("alpha.toml"), text).expect("the recipe");
        }
        let node = node("cpu-sim", &["alpha-ckpt"]);
        let alpha = model("alpha", Tier::Full, false);
        let plan = plan(vec![alpha.clone()], false);
        let job = crate::job::Job::build(&JobRequest {
            plan: &plan,
            base_tree: &root.path().join("base"),
            pr_tree: &root.path().join("pr"),
            recipes: RecipePaths { model: "test/e2e/{model}.toml", common: "test/e2e/common.toml" },
            node: &node,
            accept_narrowing: false,
        });
        (job, alpha, node)
    }

    #[test]
    fn a_jobs_estimate_is_from_what_base_decides_is_measured_not_the_prs_recipe() {
        let (same, alpha, node) = alpha_job(BASE, BASE);
        let base_estimate = job_estimate(&same, Some(&alpha), &node);
        assert!(base_estimate > Duration::ZERO);
        // The PR drops two concurrencies and a benchmark: base's are measured all the same,
        // and the limit is theirs.
        let narrowed = BASE.replace("[1, 2, 16]", "[1]").replace(
            "[[accuracy]]\nname = \"mmlu\"\nevaluator = \"builtin\"\ndataset = \"data.jsonl\"\n\n",
            "",
        );
        let own = Recipe::parse(&narrowed, "alpha.toml").expect("the PR's recipe is valid");
        let history = History::default();
        let own = estimate_model_on(&alpha, Some(&own), &history, &[Some(1)]).duration();
        assert!(own < base_estimate, "the PR's own recipe estimates less: {own:?}");
        let (narrowing, ..) = alpha_job(BASE, &narrowed);
        assert_eq!(job_estimate(&narrowing, Some(&alpha), &node), base_estimate);
        // The PR adds a concurrency: it is measured too (a widening runs), and estimated.
        let (widening, ..) = alpha_job(BASE, &BASE.replace("[1, 2, 16]", "[1, 2, 16, 64]"));
        assert!(job_estimate(&widening, Some(&alpha), &node) > base_estimate);
    }

    #[test]
    fn a_jobs_default_limit_is_twice_its_estimate_and_a_quarter_hour() {
        let minutes = |minutes: u64| Duration::from_secs(minutes * 60);
        let cases = [(0, 15), (10, 35), (90, 195)];
        for (estimate, limit) in cases {
            assert_eq!(limit_from_estimate(minutes(estimate)), minutes(limit), "{estimate} min");
        }
    }
}
