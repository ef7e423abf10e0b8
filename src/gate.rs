//! `prgate gate`: judge a plan and the evidence from the GPU nodes; `prgate gate simulate`:
//! how well the speed rule decides.
//!
//! What judges a PR and how is the gate's (`prgate_gate::base_side::BaseSide`: the settings
//! and the CODEOWNERS policy at the base side's commit, the rules, the gain rule, the
//! checklist); this file reads the files the gate is handed (the plan, the evidence folder,
//! the job plan, the base side's texts from git through scope) and prints the verdict.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use prgate_gate::base_side::{BaseSide, POLICY_PATH};
use prgate_gate::evidence::Evidence;
use prgate_gate::{Completion, Headline, JobPlan};
use prgate_scope::Plan;

use crate::files::{print, read_json};

/// Judge a plan and the evidence of its run: the checklist, and exit 0 (pass), 1 (fail or
/// pending) or 2 (error).
///
/// The gate's thresholds come from the [gate] table of prgate.toml at the plan's base-side
/// commit (defaults: gate/default-config.toml), read from --repo.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct GateArgs {
    #[command(subcommand)]
    command: Option<GateCommand>,
    /// The plan, as `prgate plan --format json` wrote it.
    #[arg(long, value_name = "FILE", required = true)]
    plan: Option<PathBuf>,
    /// The directory of evidence files (every *.json below it).
    #[arg(long, value_name = "DIR", required = true)]
    evidence: Option<PathBuf>,
    /// The job plan of the run (docs/job.md): what it had to produce. Default: `job.json`
    /// beside the evidence directory (a results directory's), else a tier's checks.
    #[arg(long, value_name = "FILE")]
    job: Option<PathBuf>,
    /// Judge a run that is still going (a progress update): a step without evidence is
    /// pending. Without it the run is over, and such a step could not be judged (error).
    #[arg(long)]
    in_progress: bool,
    /// The PR's title, for the title rule and the gain rule.
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
    /// The repository the plan was made in (for the base-side settings).
    #[arg(long, value_name = "DIR", default_value = ".")]
    repo: PathBuf,
    /// How to print the verdict.
    #[arg(long, value_enum, default_value_t = VerdictFormat::Human)]
    format: VerdictFormat,
}

#[derive(Debug, Subcommand)]
enum GateCommand {
    Simulate(SimulateArgs),
}

/// Simulate the speed and accuracy rules as a node sees them (no calibration, the node's
/// outliers, the bracketed order, multi-cell PRs, a PR's own slow runs and noise, a stale node
/// record, GSM8K-sized benchmarks): the issues' targets remeasured, each with its 95% interval,
/// then P(fail) and pairs for CV 1-5% and true changes 0-7.5% beside the fixed-n design.
#[derive(Debug, Args)]
struct SimulateArgs {
    /// Simulated PRs per scenario.
    #[arg(long, default_value_t = 10_000)]
    trials: usize,
    /// The random seed: the same seed gives the same tables.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulate the settings of this prgate.toml's [gate] table instead of the defaults.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// The output formats of `prgate gate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum VerdictFormat {
    /// The checklist for a terminal.
    Human,
    /// The versioned verdict that the report reads.
    Json,
}

/// What the gate decided, for the exit code.
pub(crate) enum Outcome {
    Pass,
    NotPass,
    /// The verdict is `error`: some check could not be judged (exit 2).
    CannotJudge,
}

impl Outcome {
    /// The outcome of a final verdict.
    pub(crate) fn of(verdict: &prgate_gate::Verdict) -> Outcome {
        match verdict.headline() {
            Headline::Pass | Headline::PassWithWarnings => Outcome::Pass,
            Headline::CannotJudge => Outcome::CannotJudge,
            Headline::Fail | Headline::Pending => Outcome::NotPass,
        }
    }
}

pub(crate) fn run(args: &GateArgs) -> anyhow::Result<Outcome> {
    if let Some(GateCommand::Simulate(simulate)) = &args.command {
        return run_simulation(simulate).map(|()| Outcome::Pass);
    }
    let (Some(plan_path), Some(evidence_dir)) = (&args.plan, &args.evidence) else {
        anyhow::bail!("--plan and --evidence are required");
    };
    let plan: Plan = read_json(plan_path, "plan")?;
    let base = base_side(&args.repo, &plan).with_context(|| {
        format!(
            "reading the base side's settings in {} (name the repository with --repo)",
            args.repo.display()
        )
    })?;
    let (files, evidence) = read_evidence(evidence_dir)?;
    let job = match (&args.job, evidence_dir.parent()) {
        (Some(path), _) => Some(read_job(path, &plan)?),
        (None, Some(results)) => read_job_in(results, &plan)?,
        (None, None) => None,
    };
    let title = args.title.as_deref();
    let completion = if args.in_progress { Completion::InProgress } else { Completion::Final };
    let verdict =
        base.judge(&plan, job.as_ref(), &evidence, title, completion).map_err(|error| {
            let file = files
                .get(error.record)
                .map_or_else(|| "?".to_owned(), |path| path.display().to_string());
            anyhow::anyhow!("evidence {file}: {}", error.problem)
        })?;
    let text = match args.format {
        VerdictFormat::Human => prgate_report::verdict::human(&verdict),
        VerdictFormat::Json => {
            let mut json =
                serde_json::to_string_pretty(&verdict).context("writing the verdict as JSON")?;
            json.push('\n');
            json
        }
    };
    print(&text)?;
    Ok(Outcome::of(&verdict))
}

/// A job plan, checked against the plan it must be of.
pub(crate) fn read_job(path: &Path, plan: &Plan) -> anyhow::Result<JobPlan> {
    let job = prgate_runner::results::read_job(path)?;
    anyhow::ensure!(
        job.is_of(plan),
        "the job plan {} is of PR commit {} on base {}, but the plan is of {} on {}",
        path.display(),
        job.pr_commit,
        job.base_commit,
        plan.head.sha,
        plan.base_side_commit()
    );
    Ok(job)
}

/// The job plan of the results folder `results` (its `job.json`), checked against `plan`;
/// `None` when the run wrote none.
pub(crate) fn read_job_in(results: &Path, plan: &Plan) -> anyhow::Result<Option<JobPlan>> {
    let path = results.join(prgate_runner::results::JOB_FILE);
    path.is_file().then(|| read_job(&path, plan)).transpose()
}

/// What judges a PR, from its base side (`prgate_gate::base_side`): the manifest and
/// `CODEOWNERS.rules` read at the plan's base-side commit, and which of the files that judge it
/// (`RecipePaths::judging_files`) moved between that merge-base and the base's tip.
pub(crate) fn base_side(repo: &Path, plan: &Plan) -> anyhow::Result<BaseSide> {
    let commit = &plan.manifest.commit;
    let manifest = prgate_scope::base_side::read_manifest_at(repo, commit)?;
    let policy = prgate_scope::base_side::read_text_at(repo, commit, POLICY_PATH)?;
    let base = BaseSide::of(&manifest, policy.as_deref(), commit)?;
    let tip = &plan.base.sha;
    let Some(merge_base) = plan.merge_base.as_deref().filter(|merge_base| merge_base != tip) else {
        return Ok(base);
    };
    let files = prgate_runner::job::RecipePaths::DEFAULT.judging_files(plan);
    let moved = prgate_scope::base_side::differing_between(repo, (merge_base, tip), &files)?;
    Ok(base.with_moved(merge_base, tip, moved))
}

/// Every `*.json` file below `dir`, sorted by path, and its evidence record. The walk never
/// follows a symbolic link (an entry's own type is looked at, not its target's), so a link
/// loop cannot make it endless; a link in the folder is an error that names it.
pub(crate) fn read_evidence(dir: &Path) -> anyhow::Result<(Vec<PathBuf>, Vec<Evidence>)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let entries = std::fs::read_dir(&folder)
            .with_context(|| format!("reading the evidence directory {}", folder.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("reading {}", folder.display()))?;
            let path = entry.path();
            let kind = entry.file_type().with_context(|| format!("reading {}", path.display()))?;
            anyhow::ensure!(
                !kind.is_symlink(),
                "{} is a symbolic link; evidence is read from regular files and folders only",
                path.display()
            );
            if kind.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|extension| extension == "json") {
                files.push(path);
            }
        }
    }
    files.sort();
    let evidence = files
        .iter()
        .map(|path| read_json(path, "evidence"))
        .collect::<anyhow::Result<Vec<Evidence>>>()?;
    Ok((files, evidence))
}

fn run_simulation(args: &SimulateArgs) -> anyhow::Result<()> {
    let (trials, seed) = (args.trials, args.seed);
    crate::files::simulate(trials, args.config.as_deref(), |config, out| {
        write!(out, "{}", prgate_report::settings::rules_simulation(config, trials, seed))?;
        let targets = prgate_gate::simulate::targets(config, trials, seed);
        write!(out, "{}", prgate_gate::simulate::targets_markdown(&targets))?;
        writeln!(
            out,
            "\nOne regressed cell alone and in a 4-cell PR, no calibration, bracketed pairs (3 runs each), beside the fixed-n design (2 runs a pair):\n"
        )?;
        write!(out, "{}", prgate_gate::simulate::grid_markdown(config, trials, seed))
    })
}
