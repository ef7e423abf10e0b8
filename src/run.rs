//! `prgate run`: runs a plan on this node, or as SLURM jobs, and writes the evidence, one file
//! per finished step. The step loop is the runner's (`prgate_runner::run`), and so is the SLURM
//! executor (`prgate_runner::slurm`); this is their CLI, and the command line of a SLURM job:
//! `prgate run --executor local --only-model M` with the run's own files and flags.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use prgate_runner::container::Engine;
use prgate_runner::job::RecipePaths;
use prgate_runner::node::{NodeProfile, Spelling, write_duration};
use prgate_runner::preflight::Thresholds;
use prgate_runner::recipe::parse_duration;
use prgate_runner::results::StepObserver;
use prgate_runner::reuse::ReuseMode;
use prgate_runner::run::{
    COMMON_CHECKS, DEFAULT_COMMON_RECIPE_PATH, DEFAULT_RECIPE_PATH, Isolation, PreflightMode,
    RunInputs, RunRequest, names_a_target,
};
use prgate_runner::slurm::{JobLimits, JobTarget, SlurmRequest, SlurmSettings};
use prgate_scope::Plan;

use crate::files::read_json;

/// Run a plan's checks on this node, base and PR side by side, and write the evidence into
/// DIR/evidence (one file per finished step; a rerun resumes). Exits 0 when the run finished,
/// whatever the evidence says, and 2 on an error.
///
/// Every command from the PR's tree (installs, servers, tests, timing scripts, evaluators,
/// benchmarks) runs in the node profile's image through docker or podman (docs/container.md);
/// `--isolation host --trust-pr-code` runs them on this machine instead, for trees you trust:
/// nothing isolates them there, so `--isolation host` alone is refused.
///
/// With --executor slurm, each model (and the common checks) is one SLURM job that runs `prgate
/// run --executor local --only-model MODEL` into DIR/slurm/MODEL, with this run's other flags;
/// the jobs' evidence is gathered into DIR/evidence, and a job that times out, fails or is
/// cancelled is recorded as not-run for every step it did not record (docs/slurm.md). DIR, the
/// plan, the node profile and the repository must be at the same paths on the compute nodes.
#[derive(Debug, Args)]
#[command(after_help = "The SLURM executor: docs/slurm.md.")]
pub(crate) struct RunArgs {
    /// The plan, as `prgate plan --format json` wrote it.
    #[arg(long, value_name = "FILE")]
    plan: PathBuf,
    /// This node's profile (docs/node-profile.md).
    #[arg(long, value_name = "FILE")]
    node: PathBuf,
    /// The results directory: evidence, logs. A relative path is taken from the current
    /// directory, once, here.
    #[arg(long, value_name = "DIR", value_parser = parse_absolute_path)]
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
    /// Where the common checks' recipe is in the PR's tree.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_COMMON_RECIPE_PATH)]
    common_recipe: String,
    /// Run only this model of the plan (repeat for more); ~common names the common checks.
    /// Without it, every model and the common checks run. Local executor only.
    #[arg(long = "only-model", value_name = "NAME")]
    only_models: Vec<String>,
    /// Take over every step an earlier run of the same PR and base commits on this node judged
    /// with unchanged inputs, run only what failed, could not be judged or is missing, and save
    /// what this run judged for a later one (docs/rerun.md). Local executor only.
    #[arg(long, value_enum, default_value_t = Switch::Off)]
    reuse: Switch,
    /// With --reuse on: this run's name in the records a later run takes over from it (a
    /// workflow run's page) [default: the results directory].
    #[arg(long, value_name = "NAME")]
    reuse_run: Option<String>,
    #[command(flatten)]
    options: RunOptions,
}

/// How a run runs, shared by `prgate run` and `prgate ci` (flattened into both), and turned
/// once into [`RunSettings`]: nothing past that conversion sees these flags.
#[derive(Debug, Args)]
pub(crate) struct RunOptions {
    /// The Python interpreter that runs pytest (on the host: `--isolation host`).
    #[arg(long, value_name = "PROGRAM", default_value = "python3")]
    python: PathBuf,
    /// The whole run's time limit (90s, 20m, 1h30m): once it has passed, every step still to
    /// run is recorded as a timeout without running.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    time_limit: Option<Duration>,
    /// Where commands from the PR run: in the node's container image, or on this machine
    /// (only for trees you trust, and only with --trust-pr-code: nothing isolates them).
    #[arg(long, value_enum, default_value_t = IsolationArg::Container)]
    isolation: IsolationArg,
    /// With --isolation host: the PR's tree is yours (your own tests, a demo), so its commands
    /// may run on this machine, where they can read prgate's own environment
    /// (/proc/PID/environ) and leave processes behind. Never for a pull request from others.
    #[arg(long)]
    trust_pr_code: bool,
    /// The container engine's client (default: docker on the PATH, else podman).
    #[arg(long, value_name = "PROGRAM")]
    engine: Option<PathBuf>,
    /// When another run holds this host's lock, wait up to this long (90s, 20m, 2h) instead
    /// of refusing at once.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    wait_lock: Option<Duration>,
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
    /// Where the steps run: on this node, or as SLURM jobs, one per model (docs/slurm.md).
    #[arg(long, value_enum, default_value_t = Executor::Local)]
    executor: Executor,
    /// With --executor slurm: the folder of SLURM's programs (sbatch, squeue, scontrol,
    /// scancel) [default: found in the PATH].
    #[arg(long, value_name = "DIR")]
    slurm_bin: Option<PathBuf>,
    /// With --executor slurm: each job's time limit (20m, 2h), rounded up to whole minutes
    /// [default: --time-limit plus 5 minutes, else twice the job's estimate from its recipe
    /// plus 15 minutes].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    job_time_limit: Option<Duration>,
    /// With --executor slurm: an sbatch option for every job, such as
    /// --sbatch-arg=--partition=gpu or --sbatch-arg=--exclusive (repeat for more).
    #[arg(long = "sbatch-arg", value_name = "OPTION", allow_hyphen_values = true)]
    sbatch_args: Vec<String>,
    /// A maintainer accepts that the PR's recipe narrows what its base recipe measures (a cell,
    /// benchmark or test removed, a limit lowered): the narrowing is then a warning, not a
    /// failure (docs/recipe.md). `prgate ci` sets it from the `accept-narrowing` label.
    #[arg(long)]
    accept_narrowing: bool,
}

/// The run's settings, checked: what the rest of the program takes instead of flags.
#[derive(Debug, Clone)]
pub(crate) struct RunSettings {
    pub(crate) python: PathBuf,
    pub(crate) time_limit: Option<Duration>,
    /// `Host` only with `--trust-pr-code` ([`RunOptions::settings`] refuses it without).
    pub(crate) isolation: IsolationArg,
    pub(crate) engine: Option<PathBuf>,
    pub(crate) wait_lock: Option<Duration>,
    /// `None` with `--preflight off`.
    pub(crate) preflight: Option<PreflightSettings>,
    pub(crate) executor: ExecutorSettings,
    pub(crate) accept_narrowing: bool,
}

/// The preflight's settings.
#[derive(Debug, Clone)]
pub(crate) struct PreflightSettings {
    pub(crate) root: PathBuf,
    pub(crate) min_free_disk: Option<u64>,
}

/// Where the steps run, with what only that executor takes.
#[derive(Debug, Clone)]
pub(crate) enum ExecutorSettings {
    Local,
    Slurm(SlurmOptions),
}

/// What only the SLURM executor takes.
#[derive(Debug, Clone, Default)]
pub(crate) struct SlurmOptions {
    pub(crate) bin_dir: Option<PathBuf>,
    pub(crate) job_time_limit: Option<Duration>,
    pub(crate) sbatch_args: Vec<String>,
}

impl RunOptions {
    /// The settings; refuses SLURM's flags without `--executor slurm`.
    pub(crate) fn settings(&self) -> anyhow::Result<RunSettings> {
        let slurm = SlurmOptions {
            bin_dir: self.slurm_bin.clone(),
            job_time_limit: self.job_time_limit,
            sbatch_args: self.sbatch_args.clone(),
        };
        let executor = match self.executor {
            Executor::Slurm => ExecutorSettings::Slurm(slurm),
            Executor::Local => {
                if slurm.bin_dir.is_some()
                    || slurm.job_time_limit.is_some()
                    || !slurm.sbatch_args.is_empty()
                {
                    anyhow::bail!(
                        "--slurm-bin, --job-time-limit and --sbatch-arg are for --executor slurm"
                    );
                }
                ExecutorSettings::Local
            }
        };
        Ok(RunSettings {
            python: self.python.clone(),
            time_limit: self.time_limit,
            isolation: self.isolation()?,
            engine: self.engine.clone(),
            wait_lock: self.wait_lock,
            preflight: (self.preflight == Switch::On).then(|| PreflightSettings {
                root: self.preflight_root.clone(),
                min_free_disk: self.min_free_disk,
            }),
            executor,
            accept_narrowing: self.accept_narrowing,
        })
    }
}

impl RunOptions {
    /// `--isolation`, checked: the host only for a tree its runner says it trusts.
    fn isolation(&self) -> anyhow::Result<IsolationArg> {
        match (self.isolation, self.trust_pr_code) {
            (IsolationArg::Host, false) => anyhow::bail!(
                "--isolation host is refused for PR code: on this machine the PR's commands could read prgate's own environment (/proc/PID/environ, its secrets among it) and leave processes running after the run\nhint: run them in the node's container (--isolation container, the default); for a tree you trust (your own tests, the demo) say so with --trust-pr-code"
            ),
            (IsolationArg::Container, true) => {
                anyhow::bail!("--trust-pr-code is for --isolation host: containers trust nothing")
            }
            (isolation, _) => Ok(isolation),
        }
    }
}

impl RunSettings {
    /// The preflight as the runner takes it.
    pub(crate) fn preflight_mode(&self) -> PreflightMode {
        match &self.preflight {
            None => PreflightMode::Off,
            Some(preflight) => PreflightMode::On {
                root: preflight.root.clone(),
                thresholds: Thresholds::with_min_free_disk(preflight.min_free_disk),
            },
        }
    }

    /// Where a run's commands run: `results` names its containers.
    pub(crate) fn isolation(&self, plan: &Plan, results: &Path) -> anyhow::Result<Isolation> {
        Ok(match self.isolation {
            IsolationArg::Host => Isolation::Host,
            IsolationArg::Container => {
                let engine = match &self.engine {
                    Some(program) => Engine::at(program),
                    None => Engine::detect(std::env::var_os("PATH").as_deref()).context(
                        "no container engine; install docker or podman, or run trees you trust with --isolation host --trust-pr-code",
                    )?,
                };
                let run = prgate_runner::run_id::run_id(&plan.head.sha, results)?;
                Isolation::Container { engine, run }
            }
        })
    }
}

/// The files of a run, besides its settings: what `prgate run` names on its command line and
/// `prgate ci` has in its work folder.
#[derive(Debug)]
pub(crate) struct RunFiles<'a> {
    /// The plan's file (a SLURM job reads it again).
    pub(crate) plan: &'a Path,
    pub(crate) node: &'a Path,
    pub(crate) results: &'a Path,
    pub(crate) repo: &'a Path,
    pub(crate) events: Option<&'a Path>,
    pub(crate) title: Option<&'a str>,
    pub(crate) common_recipe: &'a str,
}

/// Where `prgate run` runs the steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Executor {
    /// On this node, one step after another.
    Local,
    /// As SLURM batch jobs, one per model and one for the common checks, all at once.
    Slurm,
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

/// A directory argument made absolute from the current directory: the steps run their
/// commands in other directories, where a relative path would name something else.
pub(crate) fn parse_absolute_path(text: &str) -> std::io::Result<PathBuf> {
    std::path::absolute(text).map_err(|error| {
        std::io::Error::new(error.kind(), format!("cannot resolve {text:?}: {error}"))
    })
}

/// `prgate run`: the flags turned into settings once, then the plan run.
pub(crate) fn run(args: &RunArgs) -> anyhow::Result<()> {
    let settings = args.options.settings()?;
    let files = RunFiles {
        plan: &args.plan,
        node: &args.node,
        results: &args.results,
        repo: &args.repo,
        events: args.events.as_deref(),
        title: args.title.as_deref(),
        common_recipe: &args.common_recipe,
    };
    let reuse = reuse_mode(
        args.reuse,
        &args.reuse_run.clone().unwrap_or_else(|| files.results.display().to_string()),
    );
    let plan: Plan = read_json(files.plan, "plan")?;
    let node = crate::files::read_node_profile(files.node)?;
    let base = crate::gate::base_side(files.repo, &plan).with_context(|| {
        format!(
            "reading the base side's settings in {} (name the repository with --repo)",
            files.repo.display()
        )
    })?;
    if let ExecutorSettings::Slurm(slurm) = &settings.executor {
        if !args.only_models.is_empty() {
            anyhow::bail!(
                "--only-model is for --executor local: the SLURM executor runs a job per model"
            );
        }
        return run_slurm(&settings, slurm, &files, &plan, &node, &reuse, None);
    }
    let only_models = only_models(&args.only_models, &plan)?;
    let run = LocalRun {
        settings: &settings,
        plan: &plan,
        node: &node,
        repo: files.repo,
        base: &base,
        title: files.title,
        common_recipe: files.common_recipe,
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        observer: None,
        label_accepts_narrowing: false,
    };
    let summary =
        run.run(files.results, files.events, only_models, &reuse).context("running the plan")?;
    for note in &summary.notes {
        eprintln!("note: {note}");
    }
    eprintln!(
        "{} steps recorded, {} already recorded by an earlier run ({} of them reused from another results directory); evidence in {}",
        summary.recorded,
        summary.skipped,
        summary.reused,
        files.results.join("evidence").display()
    );
    Ok(())
}

/// `--only-model`, checked against the plan: `None` when it names none (every model runs).
fn only_models<'a>(names: &'a [String], plan: &Plan) -> anyhow::Result<Option<&'a [String]>> {
    for name in names {
        if !names_a_target(plan, name) {
            anyhow::bail!(
                "--only-model {name}: the plan has no such model\nhint: {COMMON_CHECKS} names the common checks"
            );
        }
    }
    Ok((!names.is_empty()).then_some(names))
}

/// A plan run on this node by the local executor, step after step, as `prgate run --executor
/// local` runs it (the demo runs its sample's plans so too).
pub(crate) struct LocalRun<'a> {
    pub(crate) settings: &'a RunSettings,
    pub(crate) plan: &'a Plan,
    pub(crate) node: &'a NodeProfile,
    pub(crate) repo: &'a Path,
    /// The base side's settings, which judge the steps.
    pub(crate) base: &'a prgate_gate::BaseSide,
    /// The PR's title, for the gain rule.
    pub(crate) title: Option<&'a str>,
    pub(crate) common_recipe: &'a str,
    /// Whether the run shows its progress on standard error.
    pub(crate) progress: bool,
    /// Who watches the step loop's events besides the events file (`prgate ci`'s comment).
    pub(crate) observer: Option<&'a dyn prgate_runner::results::StepObserver>,
    /// Whether the PR's labels accept a narrowing (`prgate ci`), besides `--accept-narrowing`.
    pub(crate) label_accepts_narrowing: bool,
}

impl LocalRun<'_> {
    /// Runs the models `only_models` names (all when `None`) into `results`.
    pub(crate) fn run(
        &self,
        results: &Path,
        events: Option<&Path>,
        only_models: Option<&[String]>,
        reuse: &ReuseMode,
    ) -> anyhow::Result<prgate_runner::run::RunSummary> {
        let (settings, config) = (self.settings, &self.base.config);
        let isolation = settings.isolation(self.plan, results)?;
        let preflight = settings.preflight_mode();
        let request = RunRequest {
            inputs: RunInputs {
                plan: self.plan,
                repo: self.repo,
                node: self.node,
                results,
                events,
                recipes: RecipePaths { model: DEFAULT_RECIPE_PATH, common: self.common_recipe },
                accept_narrowing: settings.accept_narrowing || self.label_accepts_narrowing,
            },
            gate: config,
            gain_required: self.base.gain_required(self.title),
            python: &settings.python,
            time_limit: settings.time_limit,
            progress: self.progress,
            isolation: &isolation,
            wait_lock: settings.wait_lock,
            preflight: &preflight,
            only_models,
            observer: self.observer,
            reuse,
        };
        Ok(prgate_runner::run::run(&request)?)
    }
}

/// Whether a run reuses (and saves) judged steps, from the command line; `run` names this run.
pub(crate) fn reuse_mode(switch: Switch, run: &str) -> ReuseMode {
    match switch {
        Switch::Off => ReuseMode::Off,
        Switch::On => ReuseMode::Node { run: run.to_owned() },
    }
}

/// `prgate run --executor slurm`: a job per model, each running this program's local executor
/// on its model alone (with this run's settings written back as flags), then their evidence
/// gathered.
pub(crate) fn run_slurm(
    settings: &RunSettings,
    slurm: &SlurmOptions,
    files: &RunFiles<'_>,
    plan: &Plan,
    node: &NodeProfile,
    reuse: &ReuseMode,
    observer: Option<&dyn StepObserver>,
) -> anyhow::Result<()> {
    let job = JobCommand::of(settings, files, reuse)?;
    let JobLimits { time_limit, wait_lock } =
        JobLimits::of(slurm.job_time_limit, settings.time_limit, settings.wait_lock);
    let command = |target: &JobTarget<'_>| job.argv(target, wait_lock);
    let slurm_settings = SlurmSettings {
        bin_dir: slurm.bin_dir.clone(),
        time_limit,
        sbatch_args: slurm.sbatch_args.clone(),
    };
    let request = SlurmRequest {
        inputs: RunInputs {
            plan,
            repo: &job.repo,
            node,
            results: files.results,
            events: files.events,
            recipes: RecipePaths { model: DEFAULT_RECIPE_PATH, common: files.common_recipe },
            accept_narrowing: settings.accept_narrowing,
        },
        command: &command,
        settings: &slurm_settings,
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        observer,
    };
    let summary = prgate_runner::slurm::run(&request).context("running the plan on SLURM")?;
    for note in &summary.notes {
        eprintln!("note: {note}");
    }
    let unfinished: Vec<String> = summary
        .jobs
        .iter()
        .filter(|job| job.state.not_run_reason().is_some())
        .map(|job| format!("{} (job {}) {}", job.target, job.id, job.state))
        .collect();
    if !unfinished.is_empty() {
        eprintln!(
            "{} job(s) did not complete: {}; {} of their steps are recorded not-run",
            unfinished.len(),
            unfinished.join(", "),
            summary.not_run
        );
    }
    eprintln!(
        "{} records gathered from {} SLURM job(s) named {}; evidence in {}",
        summary.copied,
        summary.jobs.len(),
        summary.job_name,
        files.results.join("evidence").display()
    );
    Ok(())
}

/// The command line of a SLURM job: `prgate run --executor local --only-model M`, with this
/// run's files as absolute paths (a job runs elsewhere) and its flags.
struct JobCommand<'a> {
    program: PathBuf,
    plan: PathBuf,
    node: PathBuf,
    repo: PathBuf,
    /// A bare program name is looked up in the job's PATH; a path must work from anywhere.
    python: PathBuf,
    /// The preflight's root and free-disk floor, when it runs.
    preflight: Option<(PathBuf, Option<u64>)>,
    engine: Option<PathBuf>,
    settings: &'a RunSettings,
    files: &'a RunFiles<'a>,
    reuse: &'a ReuseMode,
}

impl<'a> JobCommand<'a> {
    fn of(
        settings: &'a RunSettings,
        files: &'a RunFiles<'a>,
        reuse: &'a ReuseMode,
    ) -> anyhow::Result<JobCommand<'a>> {
        let absolute = |path: &Path| {
            std::path::absolute(path).with_context(|| format!("resolving {}", path.display()))
        };
        let bare = |path: &PathBuf| path.components().count() <= 1;
        Ok(JobCommand {
            program: std::env::current_exe()
                .context("finding this program, for the jobs to run")?,
            plan: absolute(files.plan)?,
            node: absolute(files.node)?,
            repo: absolute(files.repo)?,
            python: if bare(&settings.python) {
                settings.python.clone()
            } else {
                absolute(&settings.python)?
            },
            preflight: match &settings.preflight {
                Some(preflight) => Some((absolute(&preflight.root)?, preflight.min_free_disk)),
                None => None,
            },
            engine: match &settings.engine {
                Some(engine) if !bare(engine) => Some(absolute(engine)?),
                other => other.clone(),
            },
            settings,
            files,
            reuse,
        })
    }

    /// The argv of `target`'s job, which waits at most `wait_lock` for the host lock.
    fn argv(&self, target: &JobTarget<'_>, wait_lock: Duration) -> Vec<OsString> {
        let (settings, files) = (self.settings, self.files);
        let mut argv: Vec<OsString> =
            vec![self.program.clone().into(), "run".into(), "--executor".into(), "local".into()];
        let mut options: Vec<(&str, OsString)> = vec![
            ("--plan", self.plan.clone().into()),
            ("--node", self.node.clone().into()),
            ("--repo", self.repo.clone().into()),
            ("--results", target.results.into()),
            ("--events", target.events.into()),
            ("--only-model", target.name.into()),
            ("--python", self.python.clone().into()),
            ("--common-recipe", files.common_recipe.into()),
            ("--isolation", value_name(settings.isolation).into()),
            ("--wait-lock", seconds(wait_lock).into()),
        ];
        match &self.preflight {
            Some((root, min_free_disk)) => {
                options.push(("--preflight", value_name(Switch::On).into()));
                options.push(("--preflight-root", root.clone().into()));
                if let Some(gib) = min_free_disk {
                    options.push(("--min-free-disk", gib.to_string().into()));
                }
            }
            None => options.push(("--preflight", value_name(Switch::Off).into())),
        }
        if let Some(engine) = &self.engine {
            options.push(("--engine", engine.clone().into()));
        }
        // The title is the PR's text: one `--title=…` word, so a title that starts with `-`
        // (`--help`) is its value, never a flag of the job's command line.
        if let Some(title) = files.title {
            let mut word = OsString::from("--title=");
            word.push(title);
            argv.push(word);
        }
        if let Some(limit) = settings.time_limit {
            options.push(("--time-limit", seconds(limit).into()));
        }
        // Each job reuses from, and saves into, the store of the node it lands on.
        if let ReuseMode::Node { run } = self.reuse {
            options.push(("--reuse", value_name(Switch::On).into()));
            options.push(("--reuse-run", run.into()));
        }
        for (name, value) in options {
            argv.push(name.into());
            argv.push(value);
        }
        if settings.accept_narrowing {
            argv.push("--accept-narrowing".into());
        }
        // The operator's word that the trees are trusted goes with the host isolation it allows.
        if settings.isolation == IsolationArg::Host {
            argv.push("--trust-pr-code".into());
        }
        argv
    }
}

/// A value of a `--flag` as its command line names it.
fn value_name(value: impl ValueEnum) -> String {
    value.to_possible_value().map(|value| value.get_name().to_owned()).unwrap_or_default()
}

/// A duration as `prgate run` reads it, at least a second: `90s`.
fn seconds(duration: Duration) -> String {
    write_duration(duration.max(Duration::from_secs(1)), Spelling::Seconds)
}
