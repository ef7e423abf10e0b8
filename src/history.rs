//! `prgate history`: the ledger of merged changes and the cumulative drift guard over it
//! (docs/history.md). The ledger's files, a run's saved measurements and an anchor run's line
//! are the runner's (`prgate_runner::history`), the chain's statistics the gate's
//! (`prgate_gate::drift`), the page and the words the report's, the merge event's shape
//! GitHub's (`prgate_github::event`); this is their command line.
//!
//! `prgate ci` saves each finished run's measurements (`prgate_runner::history::save_run`) and
//! shows the tripped guards in the comment ([`alarms`]); `prgate history record` turns a merged
//! PR's saved runs into its ledger line.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use prgate_gate::drift::{self, GuardState};
use prgate_gate::history::{LEDGER_VERSION, MergeFacts, Reset};
use prgate_gate::{Completion, GateConfig, Verdict};
use prgate_github::event::full_sha;
use prgate_runner::history::{AnchorRun, HistoryDir, Recorded};
use prgate_runner::node::NodeProfile;
use prgate_scope::Plan;

use crate::files::{print, read_json};
use crate::gate::Outcome;

/// The ledger of merged changes, and the cumulative drift guard over it (docs/history.md).
///
/// The history folder is --history DIR, else `<cache-dir>/history` of the --node profile. The
/// guard's settings are the [gate.drift] table of prgate.toml at --at in --repo (main's tip).
#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    #[command(subcommand)]
    command: HistoryCommand,
}

#[derive(Debug, Subcommand)]
enum HistoryCommand {
    Record(RecordArgs),
    Anchor(AnchorArgs),
    Reset(ResetArgs),
    Reference(ReferenceArgs),
    Check(CheckArgs),
    Page(PageArgs),
    Simulate(SimulateArgs),
}

/// Where the history folder is.
#[derive(Debug, Args)]
struct Location {
    /// The history folder (shared by the nodes and the orchestrator) [default: PRGATE_HISTORY_DIR
    /// when set and not empty, else <cache-dir>/history of the --node profile].
    #[arg(long, value_name = "DIR")]
    history: Option<PathBuf>,
    /// The node profile whose cache-dir holds the history folder.
    #[arg(long, value_name = "FILE", default_value = crate::files::DEFAULT_NODE_PROFILE)]
    node: PathBuf,
}

/// Where the guard's settings come from: prgate.toml at a commit of the repository.
#[derive(Debug, Args)]
struct SettingsSource {
    /// The repository (a checkout of the default branch).
    #[arg(long, value_name = "DIR", default_value = ".")]
    repo: PathBuf,
    /// The commit whose prgate.toml holds the settings (main's tip).
    #[arg(long, value_name = "REF", default_value = "HEAD")]
    at: String,
}

/// Record a merged PR in the ledger, once: the measurements of the saved run of its head and,
/// for a merge queue's merge commit, of that run (each model counted once). A PR already in
/// the ledger, or closed without a merge, is left alone (exit 0).
#[derive(Debug, Args)]
struct RecordArgs {
    #[command(flatten)]
    location: Location,
    /// The `pull_request_target` (or `pull_request`) `closed` event of the merged PR
    /// (GITHUB_EVENT_PATH).
    #[arg(long, value_name = "FILE", conflicts_with = "pr")]
    event: Option<PathBuf>,
    /// Without an event: the PR's number (with --head and --merge).
    #[arg(long, value_name = "N", requires_all = ["head", "merge"])]
    pr: Option<u64>,
    /// The PR's head commit when it merged.
    #[arg(long, value_name = "SHA")]
    head: Option<String>,
    /// The commit the merge put on the branch.
    #[arg(long, value_name = "SHA")]
    merge: Option<String>,
    /// The PR's title (shown escaped).
    #[arg(long, value_name = "TEXT", default_value = "")]
    title: String,
    /// The PR's page.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
}

/// Record an anchor run: `prgate run` of the plan from the reference (`prgate history
/// reference`) to main's tip; the gate's verdict on it; the merged PRs its head holds (from
/// git). Refused when it did not measure from the reference in force.
#[derive(Debug, Args)]
struct AnchorArgs {
    #[command(flatten)]
    location: Location,
    /// The anchor's plan (`prgate plan --base REFERENCE --head TIP --format json`).
    #[arg(long, value_name = "FILE")]
    plan: PathBuf,
    /// Its results directory (`prgate run --results DIR`).
    #[arg(long, value_name = "DIR")]
    results: PathBuf,
    /// The gate's verdict on it (`prgate gate --format json`) [default: judged here].
    #[arg(long, value_name = "FILE")]
    verdict: Option<PathBuf>,
    /// The repository the plan was made in.
    #[arg(long, value_name = "DIR", default_value = ".")]
    repo: PathBuf,
    /// The run's page.
    #[arg(long, value_name = "URL")]
    run_url: Option<String>,
}

/// Set a new reference: the chain starts from zero at this commit (a release tag, or the tip
/// a maintainer accepts). Written to the ledger with the reason, never implied.
#[derive(Debug, Args)]
struct ResetArgs {
    #[command(flatten)]
    location: Location,
    /// The new reference: a commit, tag or branch of --repo.
    #[arg(long, value_name = "REF")]
    reference: String,
    /// Why (shown on the page and in the check).
    #[arg(long, value_name = "TEXT")]
    reason: String,
    /// Who resets it.
    #[arg(long, value_name = "LOGIN", env = "GITHUB_ACTOR")]
    by: Option<String>,
    #[arg(long, value_name = "DIR", default_value = ".")]
    repo: PathBuf,
}

/// Print the reference commit the chain runs from (an anchor run's base). Exit 2 when the
/// ledger has none yet.
#[derive(Debug, Args)]
struct ReferenceArgs {
    #[command(flatten)]
    location: Location,
}

/// The guard now: every chain's state; exit 1 when one is tripped (the scheduled check).
#[derive(Debug, Args)]
struct CheckArgs {
    #[command(flatten)]
    location: Location,
    #[command(flatten)]
    settings: SettingsSource,
    /// How to print it.
    #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
    format: CheckFormat,
    /// The history page's address, named in the report.
    #[arg(long, value_name = "URL")]
    page_url: Option<String>,
}

/// The output formats of `prgate history check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CheckFormat {
    Human,
    /// For the job summary.
    Markdown,
    /// The chains and guards as JSON.
    Json,
}

/// Write the history page: DIR/index.html and DIR/assets/ (static: a workflow artifact or
/// GitHub Pages serves it as it is).
#[derive(Debug, Args)]
struct PageArgs {
    #[command(flatten)]
    location: Location,
    #[command(flatten)]
    settings: SettingsSource,
    /// The page's folder (created; its index.html and assets/ replaced).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The repository's name on the page.
    #[arg(long, value_name = "OWNER/NAME", env = "GITHUB_REPOSITORY")]
    repository: Option<String>,
}

/// Simulate the guard through the gate's own speed rule: five small losses that each pass,
/// no loss, a long run of no loss, and a chain at the budget, at CV 1-3% (bench/drift-guard.md).
#[derive(Debug, Args)]
struct SimulateArgs {
    /// Simulated sequences per scenario.
    #[arg(long, default_value_t = 2000)]
    trials: usize,
    /// The random seed: the same seed gives the same table.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulate the settings of this prgate.toml's [gate] table instead of the defaults.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

pub(crate) fn run(args: &HistoryArgs) -> anyhow::Result<Outcome> {
    match &args.command {
        HistoryCommand::Record(args) => record(args).map(|()| Outcome::Pass),
        HistoryCommand::Anchor(args) => anchor(args).map(|()| Outcome::Pass),
        HistoryCommand::Reset(args) => reset(args).map(|()| Outcome::Pass),
        HistoryCommand::Reference(args) => reference(args).map(|()| Outcome::Pass),
        HistoryCommand::Check(args) => check(args),
        HistoryCommand::Page(args) => page(args).map(|()| Outcome::Pass),
        HistoryCommand::Simulate(args) => simulate(args).map(|()| Outcome::Pass),
    }
}

impl Location {
    fn open(&self) -> anyhow::Result<HistoryDir> {
        Ok(HistoryDir::new(&history_dir(self.history.as_deref(), &self.node)?))
    }
}

/// The variable that names the history folder when no flag does (the workflows set it from a
/// repository variable, which is empty when unset: an empty value names nothing).
const HISTORY_DIR_VARIABLE: &str = "PRGATE_HISTORY_DIR";

/// The history folder: `explicit`, else `PRGATE_HISTORY_DIR` when it is not empty, else
/// `<cache-dir>/history` of the profile at `node`.
pub(crate) fn history_dir(explicit: Option<&Path>, node: &Path) -> anyhow::Result<PathBuf> {
    if let Some(dir) = explicit {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os(HISTORY_DIR_VARIABLE).filter(|dir| !dir.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let text = std::fs::read_to_string(node).with_context(|| {
        format!(
            "reading the node profile {} (or name the history folder with --history)",
            node.display()
        )
    })?;
    let profile = NodeProfile::parse(&text, &node.display().to_string())?;
    Ok(prgate_runner::history::history_dir(&profile))
}

/// The gate's settings at `source.at` in `source.repo` (the base side of what is guarded).
fn settings(source: &SettingsSource) -> anyhow::Result<GateConfig> {
    settings_at(&source.repo, "--at", &source.at)
}

/// The gate's settings of prgate.toml at `at` (named `what` in an error) in `repo`.
pub(crate) fn settings_at(repo: &Path, what: &'static str, at: &str) -> anyhow::Result<GateConfig> {
    let commit = prgate_scope::git::commit_of(repo, what, at)?;
    let manifest = prgate_scope::base_side::read_manifest_at(repo, &commit)?;
    Ok(prgate_gate::base_side::settings_at(&manifest, &commit)?)
}

fn record(args: &RecordArgs) -> anyhow::Result<()> {
    let facts = match (&args.event, args.pr) {
        (Some(path), _) => {
            let event: prgate_github::event::MergeEvent = read_json(path, "merge event")?;
            let number = event.pull_request.number;
            let Some(merge) = event.merge()? else {
                eprintln!("prgate: PR #{number} was closed without a merge: nothing to record");
                return Ok(());
            };
            MergeFacts {
                at: prgate_runner::history::now(),
                pr: merge.number,
                title: merge.title,
                url: merge.url,
                merge_commit: merge.merge_commit,
                head_commit: merge.head_commit,
            }
        }
        (None, Some(pr)) => MergeFacts {
            at: prgate_runner::history::now(),
            pr,
            title: args.title.clone(),
            url: args.url.clone(),
            merge_commit: full_sha(args.merge.as_deref().unwrap_or_default(), "--merge")?,
            head_commit: full_sha(args.head.as_deref().unwrap_or_default(), "--head")?,
        },
        (None, None) => anyhow::bail!("give --event FILE, or --pr N --head SHA --merge SHA"),
    };
    let history = args.location.open()?;
    match history.record_merged(&facts)? {
        Recorded::AlreadyRecorded { pr } => {
            eprintln!("prgate: PR #{pr} is in the ledger already: its result counts once");
        }
        Recorded::Appended(line) => {
            eprintln!(
                "prgate: recorded PR #{} in {}: {} speed cell(s), {} accuracy benchmark(s){}",
                line.pr,
                history.ledger_path().display(),
                line.speed.len(),
                line.accuracy.len(),
                line.note.map(|note| format!("; {note}")).unwrap_or_default()
            );
        }
    }
    Ok(())
}

fn anchor(args: &AnchorArgs) -> anyhow::Result<()> {
    let plan: Plan = read_json(&args.plan, "plan")?;
    let (_files, evidence) = crate::gate::read_evidence(&args.results.join("evidence"))?;
    let base = crate::gate::base_side(&args.repo, &plan)?;
    let verdict: Verdict = match &args.verdict {
        Some(path) => read_json(path, "verdict")?,
        None => {
            let job = crate::gate::read_job_in(&args.results, &plan)?;
            base.judge(&plan, job.as_ref(), &evidence, None, Completion::Final).map_err(
                |error| anyhow::anyhow!("evidence record {}: {}", error.record, error.problem),
            )?
        }
    };
    let history = args.location.open()?;
    let anchor = prgate_runner::history::record_anchor_run(
        &history,
        &AnchorRun {
            repo: &args.repo,
            plan: &plan,
            verdict: &verdict,
            evidence: &evidence,
            config: &base.config,
            run_url: args.run_url.as_deref(),
        },
    )?;
    eprintln!(
        "prgate: recorded the anchor run {}..{} ({} speed cell(s), {} accuracy benchmark(s), {} merged PR(s) held)",
        prgate_gate::history::short(&anchor.reference_commit),
        prgate_gate::history::short(&anchor.head_commit),
        anchor.speed.len(),
        anchor.accuracy.len(),
        anchor.covers.len()
    );
    Ok(())
}

fn reset(args: &ResetArgs) -> anyhow::Result<()> {
    let commit = prgate_scope::git::commit_of(&args.repo, "--reference", &args.reference)?;
    let name = (args.reference != commit).then(|| args.reference.clone());
    let history = args.location.open()?;
    history.reset(&Reset {
        version: LEDGER_VERSION,
        at: prgate_runner::history::now(),
        reference_commit: commit.clone(),
        reference_name: name,
        reason: args.reason.clone(),
        by: args.by.clone(),
    })?;
    eprintln!("prgate: the reference is now {commit}: every chain starts again from zero");
    Ok(())
}

fn reference(args: &ReferenceArgs) -> anyhow::Result<()> {
    let lines = args.location.open()?.lines()?;
    let history = drift::history(&lines, &GateConfig::defaults());
    let reference = history.reference.context(
        "the ledger has no reference yet: no PR has been recorded\nhint: set one with `prgate history reset --reference REF --reason TEXT`",
    )?;
    print(&format!("{}\n", reference.commit))
}

fn check(args: &CheckArgs) -> anyhow::Result<Outcome> {
    let config = settings(&args.settings)?;
    let lines = args.location.open()?.lines()?;
    let (history, guards) = drift::guarded(&lines, &config);
    let text = match args.format {
        CheckFormat::Human => prgate_report::history::check_human(&history, &guards),
        CheckFormat::Markdown => {
            prgate_report::history::check_markdown(&history, &guards, args.page_url.as_deref())
        }
        CheckFormat::Json => {
            let json = serde_json::json!({ "history": history, "guards": guards });
            serde_json::to_string_pretty(&json)? + "\n"
        }
    };
    print(&text)?;
    let tripped = guards.iter().any(|guard| guard.state == GuardState::Tripped);
    Ok(if tripped { Outcome::NotPass } else { Outcome::Pass })
}

fn page(args: &PageArgs) -> anyhow::Result<()> {
    let config = settings(&args.settings)?;
    let lines = args.location.open()?.lines()?;
    write_page(&args.out, &lines, &config, args.repository.as_deref())
}

/// Writes the history page of `lines` into `out`.
pub(crate) fn write_page(
    out: &Path,
    lines: &[prgate_gate::history::Line],
    config: &GateConfig,
    repository: Option<&str>,
) -> anyhow::Result<()> {
    let (history, guards) = drift::guarded(lines, config);
    let settings = prgate_report::settings::drift_budget(config);
    let generated_at = prgate_runner::history::now();
    let files = prgate_report::history::render_page(&prgate_report::history::PageInput {
        history: &history,
        guards: &guards,
        repository,
        generated_at: &generated_at,
        settings: &settings,
    })?;
    for file in files {
        let path = out.join(file.path);
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder)
                .with_context(|| format!("creating {}", folder.display()))?;
        }
        let text = prgate_runner::redact::redact(&file.contents);
        std::fs::write(&path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn simulate(args: &SimulateArgs) -> anyhow::Result<()> {
    let (trials, seed) = (args.trials, args.seed);
    crate::files::simulate(trials, args.config.as_deref(), |config, out| {
        write!(out, "{}", prgate_report::settings::drift_simulation(config, trials, seed))?;
        write!(out, "{}", drift::simulate::markdown(config, trials, seed))
    })
}

/// The tripped guards for a PR comment's header: in full for the models `plan` runs (the
/// PR's), then how many others are tripped. A ledger that cannot be read says so in one line.
pub(crate) fn alarms(dir: &Path, plan: &Plan, config: &GateConfig) -> Vec<String> {
    let models: Vec<String> = plan.running_models().map(|model| model.name.clone()).collect();
    let lines = match HistoryDir::new(dir).lines() {
        Ok(lines) => lines,
        Err(error) => return vec![format!("the history ledger cannot be read: {error}")],
    };
    let (history, guards) = drift::guarded(&lines, config);
    prgate_report::history::alarms(&history, guards, &models)
}
