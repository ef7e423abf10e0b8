//! `prgate plan`: what CI would run on a branch, and why.

use std::io::Read as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use prgate_report::plan::PlanOutput;
use prgate_scope::{FileList, PlanRequest};

/// Show what CI would run on a branch, and why.
///
/// Changed files are the diff from the merge-base of base and head to head. The manifest
/// (prgate.toml) is read from the base side, so a PR cannot change what selects its checks.
/// Its format is documented in docs/manifest.md; the JSON output in docs/plan.md.
///
/// With --estimate, it also estimates each model's GPU time and schedules the models onto
/// nodes (docs/schedule.md).
///
/// Exit status: 0 when the plan was made, 2 on any error.
#[derive(Debug, Args)]
#[command(after_help = "The manifest reference: docs/manifest.md. The plan's JSON: docs/plan.md.")]
pub(crate) struct PlanArgs {
    /// A directory inside the repository to plan.
    #[arg(long, value_name = "DIR", default_value = ".")]
    repo: PathBuf,
    /// The base ref [default: the remote's default branch (origin/HEAD) if known, else main].
    #[arg(long, value_name = "REF")]
    base: Option<String>,
    /// The head ref.
    #[arg(long, value_name = "REF", default_value = "HEAD")]
    head: String,
    /// Add uncommitted and untracked changes of the working tree to head (a local preview).
    #[arg(long, conflicts_with = "files")]
    worktree: bool,
    /// Read the changed files from FILE (- for standard input) instead of git: one path per
    /// line, as GitHub's API lists a PR's files, or lines of `git diff --name-status`.
    #[arg(long, value_name = "FILE|-")]
    files: Option<String>,
    /// The --files list is incomplete (GitHub's API lists at most 3,000 files): take the
    /// changed files from git when it can, else run everything.
    #[arg(long, requires = "files")]
    files_truncated: bool,
    /// The PR's title, `[Type] [Hardware] scope: summary`: judge the title rule too.
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
    /// How to print the plan.
    #[arg(long, value_enum, default_value_t = PlanFormat::Human)]
    format: PlanFormat,
    #[command(flatten)]
    estimate: crate::estimate::EstimateArgs,
}

/// The output formats of `prgate plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PlanFormat {
    /// A table for a terminal.
    Human,
    /// The versioned wire format that later steps read (docs/plan.md).
    Json,
    /// Markdown for a PR comment.
    Markdown,
}

pub(crate) fn run(args: &PlanArgs) -> anyhow::Result<()> {
    let files = match &args.files {
        Some(source) => {
            Some(FileList { changes: read_file_list(source)?, truncated: args.files_truncated })
        }
        None => None,
    };
    let request = PlanRequest {
        repo: args.repo.clone(),
        base: args.base.clone(),
        head: Some(args.head.clone()),
        worktree: args.worktree,
        files,
    };
    let plan = prgate_scope::plan(&request)?;
    // The rules are judged at once, with the base side's settings and policy.
    let base = crate::gate::base_side(&args.repo, &plan)?;
    let rules = base.rules(&plan, args.title.as_deref());
    let estimate = crate::estimate::estimate(&args.estimate, &args.repo, &plan)?;
    let output = PlanOutput { plan: &plan, rules: &rules, estimate: estimate.as_ref() };
    let text = match args.format {
        PlanFormat::Human => output.human(),
        PlanFormat::Markdown => output.markdown(),
        PlanFormat::Json => output.json().context("writing the plan as JSON")?,
    };
    crate::files::print(&text)
}

fn read_file_list(source: &str) -> anyhow::Result<Vec<prgate_scope::Change>> {
    let text = if source == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the file list from standard input")?;
        text
    } else {
        std::fs::read_to_string(source)
            .with_context(|| format!("reading the file list {source}"))?
    };
    let name = if source == "-" { "standard input" } else { source };
    prgate_scope::change::parse_file_list(&text).with_context(|| format!("the file list {name}"))
}
