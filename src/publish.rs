//! `prgate report` renders a verdict for people; `prgate publish` puts it on the PR: the one
//! comment (found again by its marker and our login, edited in place) and the commit status on
//! the pinned SHA, plus the job summary and annotations when running in GitHub Actions, and,
//! on request (`--check-run on`, for an App's token), a check run beside the status with the
//! verdict's summary and annotations on the changed files. What the comment, the status and
//! the check run say is `prgate_report`'s (`comment`, `status`, `check_run`: its conclusion
//! fails closed); this file reads the inputs, checks the pin, and posts.

use prgate_runner::redact::redact;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use prgate_gate::Verdict;
use prgate_report::comment::{
    CommentInput, Header, MARKER, Progress, ReportLink, render_comment, render_full_report,
};
use prgate_report::status::{DEFAULT_CONTEXT, StatusSettings, commit_status, error_status};
use prgate_scope::Plan;

use crate::files::read_json;

/// The full report's file name, as the workflow uploads it (docs/workflow.md): `prgate ci`
/// writes it under `--work`, `prgate publish` names it by default.
pub(crate) const REPORT_NAME: &str = "prgate-report.md";

/// What every rendering needs: the plan, the verdict so far, and the run's facts.
#[derive(Debug, Args)]
pub(crate) struct RunFacts {
    /// The plan (`prgate plan --format json`).
    #[arg(long, value_name = "FILE")]
    plan: PathBuf,
    /// The verdict (`prgate gate --format json`); without it the run is shown as starting.
    #[arg(long, value_name = "FILE")]
    verdict: Option<PathBuf>,
    /// Where the run is (JSON: steps done, running and waiting), for the comment while it goes.
    #[arg(long, value_name = "FILE")]
    progress: Option<PathBuf>,
    /// The PR's number.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pr: u64,
    /// The PR's title, shown escaped.
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
    /// The GPU nodes the run used, comma-separated.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    nodes: Vec<String>,
    /// The container image.
    #[arg(long, value_name = "IMAGE")]
    image: Option<String>,
    /// The workflow run's page.
    #[arg(long, value_name = "URL")]
    run_url: Option<String>,
    /// The full report's file name, as the workflow uploads it.
    #[arg(long, value_name = "NAME", default_value = REPORT_NAME)]
    report_name: String,
    /// The full report's URL, when the workflow knows it.
    #[arg(long, value_name = "URL")]
    report_url: Option<String>,
}

/// Render a verdict: the PR comment (markdown), the verdict (json) or the commit status line.
#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    #[command(flatten)]
    facts: RunFacts,
    /// What to print.
    #[arg(long, value_enum, default_value_t = ReportFormat::Markdown)]
    format: ReportFormat,
}

/// The output formats of `prgate report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ReportFormat {
    /// The PR comment.
    Markdown,
    /// The verdict as JSON.
    Json,
    /// The commit status: state, then description.
    Status,
}

/// Post the comment and the commit status of a PR test on the pinned SHA.
///
/// The token is read from GITHUB_TOKEN, the API from GITHUB_API_URL.
#[derive(Debug, Args)]
pub(crate) struct PublishArgs {
    #[command(flatten)]
    facts: RunFacts,
    /// The repository, owner/name.
    #[arg(long, value_name = "OWNER/NAME", env = "GITHUB_REPOSITORY")]
    repository: String,
    /// The pinned head SHA the run tested: the status goes on it.
    #[arg(long, value_name = "SHA")]
    sha: String,
    /// The status's context.
    #[arg(long, default_value = DEFAULT_CONTEXT)]
    context: String,
    /// The login our comments are written by [default: the token's user; for an App's
    /// installation token, GraphQL's viewer, e.g. `my-app[bot]`].
    #[arg(long, value_name = "LOGIN", env = "PRGATE_BOT_LOGIN")]
    bot_login: Option<String>,
    /// Also post a check run on the pinned SHA (`CONTEXT details`) with the summary and the
    /// annotations: needs a GitHub App's token (`checks: write`); the status stays the
    /// required check.
    #[arg(long, value_enum, default_value_t = crate::run::Switch::Off)]
    check_run: crate::run::Switch,
    /// Also write the full report here.
    #[arg(long, value_name = "FILE")]
    report_out: Option<PathBuf>,
    /// The trigger's pin (`prgate trigger`'s trigger.json): its PR and SHA must be these.
    #[arg(long, value_name = "FILE")]
    trigger: Option<PathBuf>,
    /// prgate could not finish: post the `error` state with this reason instead of a verdict's.
    #[arg(long, value_name = "TEXT")]
    error: Option<String>,
}

struct Loaded {
    plan: Plan,
    verdict: Option<Verdict>,
    progress: Option<Progress>,
    header: Header,
    /// The full report the comment links: only one that exists (written by this command, or
    /// at the URL the workflow gave).
    link: Option<ReportLink>,
}

/// The inputs `facts` name; `writes_report`: whether this command writes the full report.
/// `prgate report` and `prgate publish` render the same comment from the same inputs.
fn load(facts: &RunFacts, writes_report: bool) -> anyhow::Result<Loaded> {
    let plan: Plan = read_json(&facts.plan, "plan")?;
    let verdict: Option<Verdict> =
        facts.verdict.as_deref().map(|path| read_json(path, "verdict")).transpose()?;
    let progress: Option<Progress> =
        facts.progress.as_deref().map(|path| read_json(path, "progress")).transpose()?;
    let header = Header {
        nodes: facts.nodes.clone(),
        image: facts.image.clone(),
        run_url: facts.run_url.clone(),
        ..Header::of(&plan, facts.pr, facts.title.clone())
    };
    let link = (writes_report || facts.report_url.is_some())
        .then(|| ReportLink { name: facts.report_name.clone(), url: facts.report_url.clone() });
    Ok(Loaded { plan, verdict, progress, header, link })
}

impl Loaded {
    fn input(&self) -> CommentInput<'_> {
        CommentInput {
            verdict: self.verdict.as_ref(),
            plan: &self.plan,
            header: &self.header,
            progress: self.progress.as_ref(),
            full_report: self.link.as_ref(),
            error: None,
        }
    }
}

pub(crate) fn report(args: &ReportArgs) -> anyhow::Result<()> {
    let loaded = load(&args.facts, false)?;
    let text = match args.format {
        ReportFormat::Markdown => redact(&render_comment(&loaded.input())?).into_owned(),
        ReportFormat::Json => {
            let verdict = loaded.verdict.as_ref().context("--format json needs --verdict")?;
            serde_json::to_string_pretty(verdict)? + "\n"
        }
        ReportFormat::Status => {
            let status = commit_status(
                loaded.verdict.as_ref(),
                &loaded.plan,
                None,
                &StatusSettings::default(),
            );
            format!("{}: {}\n", status.state.as_str(), status.description)
        }
    };
    crate::files::print(&text)
}

pub(crate) fn publish(args: &PublishArgs) -> anyhow::Result<()> {
    let loaded = load(&args.facts, args.report_out.is_some())?;
    anyhow::ensure!(args.facts.pr > 0, "--pr is needed to publish");
    let sha = prgate_github::event::normal_sha(&args.sha).with_context(|| {
        format!("--sha '{}' is not a full commit SHA (40 hex digits)", args.sha)
    })?;
    check_pinned(args, &sha, &loaded)?;
    let settings =
        StatusSettings { context: args.context.clone(), target_url: args.facts.run_url.clone() };
    // `--error`: prgate itself could not finish; the status says so rather than stay pending.
    let status = match &args.error {
        Some(problem) => error_status(problem, &settings),
        None => commit_status(
            loaded.verdict.as_ref(),
            &loaded.plan,
            loaded.progress.as_ref(),
            &settings,
        ),
    };
    let input = loaded.input();
    // The node's secret values are redacted from everything prgate writes.
    let body = redact(&render_comment(&input)?).into_owned();
    if let Some(path) = &args.report_out {
        let full = redact(&render_full_report(&input)?).into_owned();
        std::fs::write(path, full)
            .with_context(|| format!("writing the full report {}", path.display()))?;
    }
    // The job summary and annotations first: they need no network.
    actions_outputs(&input)?;

    let (runtime, github) = prgate_github::connect(&args.repository)?;
    runtime.block_on(async {
        post(&github, &sha, &status, args.facts.pr, args.bot_login.as_deref(), &body).await?;
        if args.check_run == crate::run::Switch::On {
            let id = check_run(&github, None, &sha, &input, &status).await?;
            eprintln!("prgate: check run {id}");
        }
        anyhow::Ok(())
    })?;
    Ok(())
}

/// Posts the check run of a PR test on `sha` (`existing` to update it), as
/// `prgate_report::check_run` makes it from the comment's input and the status. Returns its id.
pub(crate) async fn check_run(
    github: &prgate_github::GitHub,
    existing: Option<u64>,
    sha: &str,
    input: &CommentInput<'_>,
    status: &prgate_report::status::Status,
) -> anyhow::Result<u64> {
    let content = prgate_report::check_run::check_run(input, status)?;
    let annotations: Vec<prgate_github::CheckAnnotation> = content
        .annotations
        .into_iter()
        .map(|annotation| prgate_github::CheckAnnotation {
            annotation_level: annotation.api_level(),
            path: annotation.path,
            start_line: 1,
            end_line: 1,
            title: annotation.title,
            message: annotation.message,
        })
        .collect();
    let run = prgate_github::CheckRun {
        name: &content.name,
        head_sha: sha,
        conclusion: content.conclusion,
        title: &content.title,
        summary: &content.summary,
        details_url: content.details_url.as_deref(),
        annotations: &annotations,
    };
    Ok(github.check_run(existing, &run).await?)
}

/// Posts the status on `sha`, then the comment on PR `pr` (edited in place when ours is
/// there): the status first, so a required check never stays stale because a comment failed.
pub(crate) async fn post(
    github: &prgate_github::GitHub,
    sha: &str,
    status: &prgate_report::status::Status,
    pr: u64,
    bot_login: Option<&str>,
    body: &str,
) -> anyhow::Result<()> {
    set_status(github, sha, status).await?;
    let login = github.comment_login(bot_login).await?;
    let outcome = github.upsert_comment(pr, MARKER, &login, body).await?;
    eprintln!("prgate: comment {outcome:?}");
    Ok(())
}

/// Posts `status` on `sha`.
pub(crate) async fn set_status(
    github: &prgate_github::GitHub,
    sha: &str,
    status: &prgate_report::status::Status,
) -> prgate_github::Result<()> {
    let state = status.state.as_str();
    let url = status.target_url.as_deref();
    github.set_status(sha, state, &status.description, &status.context, url).await
}

/// The run reports only on its pinned SHA: `--sha` must be a full SHA, the plan's head, the
/// verdict's PR commit and the trigger's pin, and `--pr` the trigger's PR.
fn check_pinned(args: &PublishArgs, sha: &str, loaded: &Loaded) -> anyhow::Result<()> {
    anyhow::ensure!(
        sha == loaded.plan.head.sha,
        "--sha {sha} is not the head the plan was made for ({}); a run only reports on its pinned SHA",
        loaded.plan.head.sha
    );
    if let Some(verdict_sha) = loaded.verdict.as_ref().and_then(|verdict| verdict.pr_sha.as_ref()) {
        anyhow::ensure!(verdict_sha == sha, "the verdict is for {verdict_sha}, not --sha {sha}");
    }
    if let Some(path) = &args.trigger {
        let pinned: prgate_github::pin::Pinned = read_json(path, "trigger")?;
        anyhow::ensure!(
            pinned.sha == sha && pinned.number == args.facts.pr,
            "the trigger pinned #{} at {}, not #{} at {sha}",
            pinned.number,
            pinned.sha,
            args.facts.pr
        );
    }
    Ok(())
}

/// In GitHub Actions: the job summary and the annotations of a verdict.
pub(crate) fn actions_outputs(input: &CommentInput<'_>) -> anyhow::Result<()> {
    if !std::env::var("GITHUB_ACTIONS").is_ok_and(|value| value == "true") {
        return Ok(());
    }
    if let Ok(path) = std::env::var("GITHUB_STEP_SUMMARY") {
        let summary = prgate_report::summary::job_summary(input)?;
        write_job_summary(Path::new(&path), &redact(&summary))?;
    }
    if let Some(verdict) = input.verdict {
        let mut stdout = std::io::stdout().lock();
        for annotation in prgate_report::summary::annotations(verdict) {
            writeln!(stdout, "{}", redact(&annotation.command()))?;
        }
    }
    Ok(())
}

/// Appends to the job summary, within GitHub's 1 MiB for the whole file.
fn write_job_summary(path: &Path, summary: &str) -> anyhow::Result<()> {
    let existing = std::fs::metadata(path).map(|meta| meta.len() as usize).unwrap_or(0);
    if !prgate_report::summary::fits_job_summary(existing, summary) {
        let limit = prgate_report::summary::JOB_SUMMARY_LIMIT;
        eprintln!(
            "prgate: the job summary would pass GitHub's {limit} bytes ({existing} already there); the full report has it all"
        );
        return Ok(());
    }
    append(path, summary)
}

fn append(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening the job summary {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("writing the job summary {}", path.display()))
}
