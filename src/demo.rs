//! `prgate demo`: the whole job on a built-in sample, with no GPU and no network.
//!
//! Today it builds the sample repository and prints the plan of each of its pull requests;
//! the gate, the runner on simulated servers and the report join as they land.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use prgate_scope::PlanRequest;

use crate::sample;

/// Run prgate on a built-in sample repository and its pull requests (no GPU, no network).
///
/// Builds the sample in a temporary directory (or in --out, kept for you to explore) and
/// prints, for every sample PR, what CI would run and why.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Build the sample repository here and keep it (the directory must be empty or absent).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

pub(crate) fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let temporary;
    let dir = match &args.out {
        Some(dir) => {
            let occupied =
                dir.read_dir().map(|mut entries| entries.next().is_some()).unwrap_or(false);
            anyhow::ensure!(!occupied, "--out {}: the directory is not empty", dir.display());
            dir.clone()
        }
        None => {
            temporary = tempfile::tempdir().context("creating a temporary directory")?;
            temporary.path().to_path_buf()
        }
    };
    let prs = sample::build(&dir)?;
    let mut stdout = std::io::stdout().lock();
    for pr in &prs {
        let request = PlanRequest {
            repo: dir.clone(),
            base: Some("main".to_owned()),
            head: Some(pr.branch.to_owned()),
            ..PlanRequest::default()
        };
        let plan = prgate_scope::plan(&request)
            .with_context(|| format!("planning sample PR #{}", pr.number))?;
        let base = crate::gate::BaseSide::read(&dir, &plan)?;
        let rules =
            prgate_gate::rules::judge_rules(&plan, Some(pr.title), &base.config, &base.policy);
        writeln!(stdout, "=== PR #{}: {}", pr.number, prgate_report::escape::terminal(pr.title))?;
        writeln!(stdout, "    branch {}\n", pr.branch)?;
        write!(stdout, "{}", prgate_report::plan::human(&plan))?;
        write!(stdout, "{}", prgate_report::verdict::rules_human(&rules))?;
        writeln!(stdout)?;
    }
    if let Some(dir) = &args.out {
        writeln!(
            stdout,
            "The sample repository is in {}; try: prgate plan --repo {} --head {}",
            dir.display(),
            dir.display(),
            prs[0].branch
        )?;
    }
    stdout.flush()?;
    Ok(())
}
