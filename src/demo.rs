//! `prgate demo`: the whole job on a built-in sample, with no GPU and no network.
//!
//! It builds the sample repository (the `prgate-sample` crate's), then for every sample PR: the
//! plan, the run on this machine (the runner's local executor) with every model served by
//! prgate's simulated server, and the gate's verdict; each PR's final comment, status line and
//! full report are written as files; and at the end a table of which PR passed and which
//! failed, and why.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use clap::Args;
use prgate_gate::verdict::Verdict;
use prgate_gate::{Evidence, JobPlan};
use prgate_report::comment::{
    CommentInput, Header, ReportLink, render_comment, render_full_report,
};
use prgate_report::status::{StatusSettings, commit_status};
use prgate_runner::node::NodeProfile;
use prgate_runner::results::ResultsDir;
use prgate_runner::reuse::ReuseMode;
use prgate_runner::run::DEFAULT_COMMON_RECIPE_PATH;
use prgate_scope::PlanRequest;
use prgate_scope::plan::Plan;

use crate::run::{ExecutorSettings, IsolationArg, LocalRun, RunSettings};
use prgate_sample::{self as sample, SamplePr};

/// Run prgate on a built-in sample repository and its pull requests (no GPU, no network).
///
/// Builds the sample in --out and, for every sample PR, plans what CI would run, runs it on this
/// machine against simulated servers (prgate sim-server), judges it and writes what the PR would
/// get: the comment (comment.md), the status line (status.txt) and the full report (report.md)
/// in DIR/results/pr-N/; then prints which PR passed, which failed and why.
///
/// Runs pytest: `python3` with pytest must be on the PATH; the demo checks both before it
/// starts and stops with exit 2 when either is missing.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Where everything goes: the sample repository (DIR/repository), the node profile, and
    /// for each PR its plan, evidence, logs, verdict, comment, status and full report
    /// (DIR/results/pr-N). Must be empty, absent, or an earlier demo's (which is replaced).
    #[arg(long, value_name = "DIR", default_value = "prgate-demo")]
    out: PathBuf,
    /// Run only sample PR N (repeatable; e.g. `--only 95 --only 114`): the whole sample
    /// repository is still built, but its history (the merged PRs, the drift guard's anchor
    /// run) and every other PR are not run, so a drifted model's comment shows no guard.
    #[arg(long, value_name = "N")]
    only: Vec<u32>,
}

/// The file that marks a folder as a demo's, so that a later demo may replace it.
const DEMO_MARKER: &str = ".prgate-demo";

pub(crate) fn run(args: &DemoArgs) -> anyhow::Result<()> {
    // What the demo needs, before anything runs: without it every test would be "not judged".
    check_prerequisites()?;
    let dir = prepare_out(&args.out)?;
    let repo = dir.join("repository");
    let prs = sample::build(&repo)?;
    let prs = chosen(prs, &args.only)?;
    let node = sample::write_node_profile(&dir)?;
    let demo = Demo { repo: &repo, dir: &dir, node: &node, settings: run_settings() };

    let started = Instant::now();
    let mut stdout = std::io::stdout().lock();
    // The sample's history first: its merges are in the ledger when the PRs below run, so a
    // PR of the drifted model shows the tripped guard in its comment.
    let history = sample::build_history(&repo)?;
    let mut outcomes =
        if args.only.is_empty() { demo.run_history(&history, &mut stdout)? } else { Vec::new() };
    for pr in &prs {
        let outcome =
            demo.run_pr(pr, &mut stdout).with_context(|| format!("sample PR #{}", pr.number))?;
        outcomes.push((pr.clone(), outcome));
    }

    writeln!(stdout, "=== Summary ({:.0}s)\n", started.elapsed().as_secs_f64())?;
    write_summary(&mut stdout, &outcomes)?;
    writeln!(
        stdout,
        "Everything is in {}: the sample repository (repository/), the node profile \
         (node.toml), and each PR's comment, status, full report, plan, evidence, logs and \
         verdict (results/pr-N/).\n\
         Try: prgate plan --repo {} --head {}",
        args.out.display(),
        repo.display(),
        prs[0].branch
    )?;
    stdout.flush()?;
    Ok(())
}

/// `--out`, emptied (an earlier demo's is replaced; anything else is refused), marked as the
/// demo's, and made absolute (the node profile wants absolute paths).
fn prepare_out(dir: &Path) -> anyhow::Result<PathBuf> {
    let occupied = dir.read_dir().map(|mut entries| entries.next().is_some()).unwrap_or(false);
    if occupied {
        anyhow::ensure!(
            dir.join(DEMO_MARKER).is_file(),
            "--out {}: the directory is not empty and not an earlier demo's; name another with --out",
            dir.display()
        );
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("removing the earlier demo in {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join(DEMO_MARKER), "prgate demo output: `prgate demo` may replace it\n")
        .with_context(|| format!("marking {}", dir.display()))?;
    dir.canonicalize().with_context(|| format!("resolving {}", dir.display()))
}

/// The summary table: each PR's verdict in words, and under it why it did not simply pass.
fn write_summary(
    out: &mut impl std::io::Write,
    outcomes: &[(SamplePr, PrOutcome)],
) -> anyhow::Result<()> {
    let width = outcomes.iter().map(|(_, outcome)| outcome.result.len()).max().unwrap_or(0);
    for (pr, outcome) in outcomes {
        writeln!(
            out,
            "#{:<4} {:<width$}  {}",
            pr.number,
            outcome.result,
            prgate_report::escape::terminal(&pr.title)
        )?;
        for reason in &outcome.why {
            // A reason's later lines (a log's tail) go under it, indented.
            let mut lines = reason.lines();
            writeln!(out, "      {:<width$}  - {}", "", lines.next().unwrap_or_default())?;
            for line in lines {
                writeln!(out, "      {:<width$}    {line}", "")?;
            }
        }
    }
    writeln!(out)?;
    Ok(())
}

/// The sample PRs `--only` names, in the sample's order (all of them when it names none); an
/// error names a number that is not a sample PR's and lists those that are.
fn chosen(prs: Vec<SamplePr>, only: &[u32]) -> anyhow::Result<Vec<SamplePr>> {
    if let Some(unknown) = only.iter().find(|&&number| !prs.iter().any(|pr| pr.number == number)) {
        let numbers: Vec<String> = prs.iter().map(|pr| pr.number.to_string()).collect();
        anyhow::bail!(
            "--only {unknown}: the sample has no PR #{unknown} that runs on its own; its PRs are {}",
            numbers.join(", ")
        );
    }
    Ok(prs.into_iter().filter(|pr| only.is_empty() || only.contains(&pr.number)).collect())
}

/// `python3` with pytest, which the sample's tests run under, and with sglang-router, which
/// routes its disaggregated model: an error that says what to install when one is missing.
fn check_prerequisites() -> anyhow::Result<()> {
    // The sample's servers start `prgate` by name, from this program's folder on the host.
    let program = std::env::current_exe().context("finding this program")?;
    let named = program.file_name().and_then(|name| name.to_str()).unwrap_or_default();
    if named != "prgate" || prgate_runner::run::own_folder().is_none() {
        anyhow::bail!(
            "the demo's sample servers start `prgate` by name from this program's folder, and this program is {}\n\
             hint: run it as `prgate` from a folder whose path has no ':' (copy or link it there)",
            program.display()
        );
    }
    let Some(version) = python3(&["-c", "import sys; print(sys.version.split()[0])"]) else {
        anyhow::bail!(
            "the demo needs python3 on the PATH, and it is not there\n\
             hint: install it (Debian: apt-get install python3 python3-pytest), then run the demo again"
        );
    };
    if python3(&["-m", "pytest", "--version"]).is_none() {
        anyhow::bail!(
            "the demo needs pytest for python3 ({version}), and python3 -m pytest does not start\n\
             hint: python3 -m pip install pytest (Debian: apt-get install python3-pytest), then run the demo again"
        );
    }
    if python3(&["-c", "import sglang_router.launch_router"]).is_none() {
        anyhow::bail!(
            "the demo needs sglang-router for python3 ({version}): its disaggregated model ({}) is served behind the real router, and python3 cannot import sglang_router\n\
             hint: bash .ci/demo sets up a python3 with everything the demo needs (.ci/setup-python); or python3 -m pip install sglang-router==0.3.2",
            sample::PD_MODEL,
        );
    }
    Ok(())
}

/// What `python3 ARGS` printed, trimmed, when it ran and succeeded.
fn python3(args: &[&str]) -> Option<String> {
    #[expect(
        clippy::disallowed_methods,
        reason = "the demo checks its python3 before anything runs"
    )]
    let output = std::process::Command::new("python3").args(args).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// What the summary table says about one PR.
struct PrOutcome {
    /// The verdict in words (`PASS`, `FAIL`, ...).
    result: String,
    /// Whether the verdict is a failure (the PR does not merge).
    failed: bool,
    /// Why it did not simply pass: the failed (else pending, else warned) items.
    why: Vec<String>,
}

impl PrOutcome {
    /// The summary's row of a PR judged `verdict`; `reuse`, what its re-run took over.
    fn of(verdict: &Verdict, reuse: Option<String>) -> PrOutcome {
        let mut why = prgate_report::headline::why(verdict);
        if let Some(reuse) = reuse {
            why.insert(0, format!("re-run after a flaky failure: {reuse}"));
        }
        PrOutcome {
            result: prgate_report::headline::result_word(verdict).to_owned(),
            failed: verdict.result == prgate_gate::State::Fail,
            why,
        }
    }
}

/// Strikes `drained` three times in the health ledger, as three earlier runs on it whose
/// preflight found ECC errors on its GPU would have (a laptop has no GPU to fail): the default
/// policy drains it. Returns the ledger's notes.
fn drain(node: &NodeProfile, drained: &str) -> Vec<String> {
    use prgate_runner::health::{Source, Strike};
    let strikes: Vec<Strike> = (1..=3)
        .map(|count| Strike {
            source: Source::Preflight,
            detail: format!(
                "GPU 0 (/dev/dri/renderD128): {count} uncorrectable ECC error(s) (amd-smi): its memory has corrupted data; reset the GPU, and replace it if they come back"
            ),
        })
        .collect();
    let run = format!("demo: an earlier run on {drained}");
    prgate_runner::health::record(node, drained, &strikes, Some(&run))
}

/// The demo's sample repository, its output folder, its node and how it runs a plan there:
/// what every run of it needs.
struct Demo<'a> {
    repo: &'a Path,
    dir: &'a Path,
    node: &'a NodeProfile,
    settings: RunSettings,
}

impl Demo<'_> {
    /// The sample's history: each merged PR run until it passes, then merged into the ledger;
    /// the anchor run over them; the drift guard and the history page.
    fn run_history(
        &self,
        history: &[SamplePr],
        out: &mut impl std::io::Write,
    ) -> anyhow::Result<Vec<(SamplePr, PrOutcome)>> {
        let mut outcomes = Vec::new();
        for pr in history {
            let outcome = self
                .run_history_pr(pr, out)
                .with_context(|| format!("sample history PR #{}", pr.number))?;
            self.merge_history_pr(pr, out)?;
            outcomes.push((pr.clone(), outcome));
        }
        if let Some(tip) = history.last() {
            self.anchor_run(&tip.branch, out).context("the anchor run")?;
        }
        self.show_the_drift_guard(out)?;
        Ok(outcomes)
    }

    /// Plan, run and gate one sample PR; prints its summary and verdict.
    fn run_pr(&self, pr: &SamplePr, out: &mut impl std::io::Write) -> anyhow::Result<PrOutcome> {
        self.announce(pr, out)?;
        let plan = self.plan(&pr.base, &pr.branch).context("planning")?;
        let results = self.results(&format!("pr-{}", pr.number));
        std::fs::create_dir_all(&results)
            .with_context(|| format!("creating {}", results.display()))?;
        write_json(&results.join("plan.json"), &plan)?;
        writeln!(out, "    {}", prgate_report::headline::scope_line(&plan))?;

        let base = crate::gate::base_side(self.repo, &plan)?;
        let on_node = self.on_node(&plan, &base, Some(pr.title.as_str()));
        if pr.reruns {
            self.first_run(&on_node, pr, out)?;
        }
        let (evidence, job, verdict) = self.final_run(&on_node, pr, &results, out)?;
        // What was taken over, in the job plan's steps as the comment counts them (a speed
        // cell's pairs are one step there; the run's own count is of records).
        let taken = prgate_report::rerun::Reuse::of(&job, &evidence);
        if let Some(taken) = taken.as_ref().filter(|taken| taken.reused > 0) {
            writeln!(out, "    took {} judged steps over from the first run", taken.reused)?;
        }
        let reuse = taken.map(|reuse| reuse.words());
        let drift = self.save_to_history(&plan, &base, pr, &verdict, &evidence)?;
        write_pr_files(&results, &plan, &verdict, pr, self.node, reuse.clone(), drift)?;
        writeln!(out)?;
        for line in prgate_report::verdict::human(&verdict).lines() {
            writeln!(out, "    {line}")?;
        }
        writeln!(out)?;
        out.flush()?;
        Ok(PrOutcome::of(&verdict, reuse))
    }

    /// A PR's heading; before a PR the sample runs with a node drained, that node drained.
    fn announce(&self, pr: &SamplePr, out: &mut impl std::io::Write) -> anyhow::Result<()> {
        writeln!(out, "=== PR #{}: {}", pr.number, prgate_report::escape::terminal(&pr.title))?;
        writeln!(out, "    branch {} onto {}", pr.branch, pr.base)?;
        if let Some(drained) = &pr.drained_node {
            for note in drain(self.node, drained) {
                writeln!(out, "    note: {note}")?;
            }
        }
        out.flush()?;
        Ok(())
    }

    /// The plan from `base` to `head` in the sample repository.
    fn plan(&self, base: &str, head: &str) -> anyhow::Result<Plan> {
        let request = PlanRequest {
            repo: self.repo.to_path_buf(),
            base: Some(base.to_owned()),
            head: Some(head.to_owned()),
            ..PlanRequest::default()
        };
        Ok(prgate_scope::plan(&request)?)
    }

    /// The results folder `name` (`pr-N`, `anchor`) below the demo's `results/`.
    fn results(&self, name: &str) -> PathBuf {
        self.dir.join("results").join(name)
    }

    /// `plan` as the demo runs it on its node, judged by `base`'s settings.
    fn on_node<'a>(
        &'a self,
        plan: &'a Plan,
        base: &'a prgate_gate::BaseSide,
        title: Option<&'a str>,
    ) -> OnNode<'a> {
        OnNode {
            local: LocalRun {
                settings: &self.settings,
                plan,
                node: self.node,
                repo: self.repo,
                base,
                title,
                common_recipe: DEFAULT_COMMON_RECIPE_PATH,
                progress: false,
                observer: None,
                label_accepts_narrowing: false,
            },
        }
    }

    /// A PR the demo runs twice: its first run, whose judged steps the second takes over.
    fn first_run(
        &self,
        on_node: &OnNode<'_>,
        pr: &SamplePr,
        out: &mut impl std::io::Write,
    ) -> anyhow::Result<()> {
        let first = self.results(&format!("pr-{}-first-run", pr.number));
        let reuse = ReuseMode::Node { run: format!("results/pr-{}-first-run", pr.number) };
        let summary = on_node.run(&first, None, &reuse)?;
        let (_evidence, _job, verdict) = on_node.judge(&first)?;
        writeln!(
            out,
            "    first run: {} steps, {}: {}",
            summary.recorded,
            prgate_report::headline::result_word(&verdict),
            prgate_report::headline::why(&verdict)
                .iter()
                .filter_map(|reason| reason.lines().next())
                .collect::<Vec<_>>()
                .join("; ")
        )?;
        writeln!(out, "    a maintainer runs it again: what the first run judged is reused")?;
        Ok(())
    }

    /// The PR's run into `results` (reusing its first run's judged steps when it has one),
    /// judged: its evidence, job plan and verdict (also in `verdict.json`).
    fn final_run(
        &self,
        on_node: &OnNode<'_>,
        pr: &SamplePr,
        results: &Path,
        out: &mut impl std::io::Write,
    ) -> anyhow::Result<(Vec<Evidence>, JobPlan, Verdict)> {
        let reuse = if pr.reruns {
            ReuseMode::Node { run: format!("results/pr-{}", pr.number) }
        } else {
            ReuseMode::Off
        };
        let started = Instant::now();
        let summary = on_node.run(results, Some(&results.join("events.jsonl")), &reuse)?;
        writeln!(
            out,
            "    ran {} steps in {:.1}s on simulated servers",
            summary.recorded,
            started.elapsed().as_secs_f64()
        )?;
        for note in &summary.notes {
            writeln!(out, "    note: {note}")?;
        }
        let judged = on_node.judge(results)?;
        write_json(&results.join("verdict.json"), &judged.2)?;
        Ok(judged)
    }

    /// As `prgate ci` does: the tripped guards of the PR's models for its comment, then what
    /// the run measured saved in the history, where it waits for the PR to merge.
    fn save_to_history(
        &self,
        plan: &Plan,
        base: &prgate_gate::BaseSide,
        pr: &SamplePr,
        verdict: &Verdict,
        evidence: &[Evidence],
    ) -> anyhow::Result<Vec<String>> {
        let history = prgate_runner::history::history_dir(self.node);
        let drift = crate::history::alarms(&history, plan, &base.config);
        let facts = prgate_runner::history::RunFacts {
            pr: u64::from(pr.number),
            title: &pr.title,
            tested_commit: &plan.head.sha,
            base_commit: plan.base_side_commit(),
            merge_queue: false,
            run_url: None,
        };
        prgate_runner::history::save_run(&history, &facts, verdict, evidence)
            .context("the history")?;
        Ok(drift)
    }

    /// A history PR run until it passes, as a maintainer re-runs a PR whose 1.5% change
    /// measured 2%: a PR that fails does not merge. Each run starts afresh (the failed cell is
    /// measured again); the PR's saved run is its last.
    fn run_history_pr(
        &self,
        pr: &SamplePr,
        out: &mut impl std::io::Write,
    ) -> anyhow::Result<PrOutcome> {
        let results = self.results(&format!("pr-{}", pr.number));
        for attempt in 1..=HISTORY_ATTEMPTS {
            let outcome = self.run_pr(pr, out)?;
            if !outcome.failed {
                return Ok(outcome);
            }
            if attempt < HISTORY_ATTEMPTS {
                writeln!(
                    out,
                    "    it does not merge; its small loss measured over the 2% line, so a maintainer runs it again\n"
                )?;
                std::fs::remove_dir_all(&results)
                    .with_context(|| format!("removing {}", results.display()))?;
            }
        }
        anyhow::bail!("PR #{} failed {HISTORY_ATTEMPTS} runs: it cannot merge", pr.number)
    }

    /// The anchor run, as the weekly workflow runs it: the plan from the reference to the
    /// history's tip, run on the node with the same machinery as a PR, recorded as `prgate
    /// history anchor` records it (checked against the chain: agreeing, both count;
    /// disagreeing, it wins).
    fn anchor_run(&self, tip: &str, out: &mut impl std::io::Write) -> anyhow::Result<()> {
        let ledger = Ledger::open(self.repo, self.node)?;
        let reference = prgate_gate::drift::history(&ledger.dir.lines()?, &ledger.config)
            .reference
            .context("the ledger has no reference")?
            .commit;
        writeln!(
            out,
            "=== The anchor run: the reference {} against the history's tip ({tip})",
            prgate_gate::history::short(&reference)
        )?;
        out.flush()?;
        let plan = self.plan(&reference, tip).context("planning the anchor run")?;
        let results = self.results("anchor");
        let base = crate::gate::base_side(self.repo, &plan)?;
        let on_node = self.on_node(&plan, &base, None);
        let summary = on_node.run(&results, None, &ReuseMode::Off)?;
        let (evidence, _job, verdict) = on_node.judge(&results)?;
        write_json(&results.join("verdict.json"), &verdict)?;
        let anchor = prgate_runner::history::record_anchor_run(
            &ledger.dir,
            &prgate_runner::history::AnchorRun {
                repo: self.repo,
                plan: &plan,
                verdict: &verdict,
                evidence: &evidence,
                config: &ledger.config,
                run_url: None,
            },
        )?;
        writeln!(out, "    ran {} steps; it holds PRs {:?}", summary.recorded, anchor.covers)?;
        let chains = prgate_gate::drift::history(&ledger.dir.lines()?, &ledger.config);
        let alpha = ledger.config.drift.alpha.get();
        for check in &chains.anchors {
            writeln!(out, "    {}", prgate_report::anchor::check_words(check, alpha))?;
        }
        writeln!(out)?;
        Ok(())
    }

    /// Merges a history PR as `prgate history record` does on its merge event: its line from
    /// the run the demo saved, into the node's history ledger (a fast-forward: the merge commit
    /// is the PR's head).
    fn merge_history_pr(&self, pr: &SamplePr, out: &mut impl std::io::Write) -> anyhow::Result<()> {
        let facts = prgate_gate::history::MergeFacts {
            at: prgate_runner::history::now(),
            pr: u64::from(pr.number),
            title: pr.title.to_owned(),
            url: None,
            merge_commit: pr.head.clone(),
            head_commit: pr.head.clone(),
        };
        let ledger = Ledger::open(self.repo, self.node)?;
        ledger.dir.record_merged(&facts)?;
        let (chains, guards) = prgate_gate::drift::guarded(&ledger.dir.lines()?, &ledger.config);
        for guard in guards.iter().filter(|guard| guard.cell.model() == sample::HISTORY_MODEL) {
            let words = prgate_report::history::check_human(&chains, std::slice::from_ref(guard));
            writeln!(out, "    merged; the chain: {}", words.lines().nth(1).unwrap_or_default())?;
        }
        writeln!(out)?;
        Ok(())
    }

    /// The guard over the sample's history, as the scheduled check says it, and the history
    /// page (DIR/history/index.html).
    fn show_the_drift_guard(&self, out: &mut impl std::io::Write) -> anyhow::Result<()> {
        let ledger = Ledger::open(self.repo, self.node)?;
        let lines = ledger.dir.lines()?;
        let (chains, guards) = prgate_gate::drift::guarded(&lines, &ledger.config);
        writeln!(out, "=== The drift guard over the sample's history (prgate history check)")?;
        for line in prgate_report::history::check_human(&chains, &guards).lines() {
            writeln!(out, "    {line}")?;
        }
        let page = self.dir.join("history");
        crate::history::write_page(&page, &lines, &ledger.config, Some("sample/sgl-amd-mono"))?;
        writeln!(out, "    the history page: {}\n", page.join("index.html").display())?;
        out.flush()?;
        Ok(())
    }
}

/// The history ledger on the demo's node, and the drift guard's settings: prgate.toml's at the
/// sample's `main`, as the scheduled check reads them at the default branch's tip.
struct Ledger {
    dir: prgate_runner::history::HistoryDir,
    config: prgate_gate::GateConfig,
}

impl Ledger {
    fn open(repo: &Path, node: &NodeProfile) -> anyhow::Result<Ledger> {
        let dir =
            prgate_runner::history::HistoryDir::new(&prgate_runner::history::history_dir(node));
        let config = crate::history::settings_at(repo, "the sample's branch", "main")?;
        Ok(Ledger { dir, config })
    }
}

/// A plan run on the demo's node, as `prgate run --isolation host --trust-pr-code --preflight
/// off --wait-lock 10m` runs it ([`run_settings`]), and judged.
struct OnNode<'a> {
    /// The run, made once: the plan, the node, the repository, the base side and the title.
    local: LocalRun<'a>,
}

/// How the demo runs a plan. The sample's trees are prgate's own: no container needed on a
/// laptop, and it has no GPU to check.
fn run_settings() -> RunSettings {
    RunSettings {
        python: PathBuf::from("python3"),
        time_limit: None,
        isolation: IsolationArg::Host,
        engine: None,
        wait_lock: Some(std::time::Duration::from_secs(600)),
        preflight: None,
        executor: ExecutorSettings::Local,
        accept_narrowing: false,
    }
}

impl OnNode<'_> {
    /// Runs the plan into `results`.
    fn run(
        &self,
        results: &Path,
        events: Option<&Path>,
        reuse: &ReuseMode,
    ) -> anyhow::Result<prgate_runner::run::RunSummary> {
        self.local.run(results, events, None, reuse).context("running the plan")
    }

    /// The evidence in `results`, its job plan, and the gate's final verdict on them.
    fn judge(&self, results: &Path) -> anyhow::Result<(Vec<Evidence>, JobPlan, Verdict)> {
        let results_dir = ResultsDir::open(results)?;
        let evidence: Vec<_> =
            results_dir.records()?.into_iter().map(|(_step, record)| record).collect();
        let LocalRun { plan, title, base, .. } = self.local;
        let job = crate::gate::read_job(&results_dir.job_path(), plan)?;
        let verdict = base
            .judge(plan, Some(&job), &evidence, title, prgate_gate::Completion::Final)
            .map_err(|error| anyhow::anyhow!("judging the evidence: {}", error.problem))?;
        Ok((evidence, job, verdict))
    }
}

/// What the PR would get on GitHub: the comment, the status line and the full report.
fn write_pr_files(
    results: &Path,
    plan: &Plan,
    verdict: &Verdict,
    pr: &SamplePr,
    node: &NodeProfile,
    reuse: Option<String>,
    drift: Vec<String>,
) -> anyhow::Result<()> {
    let header = Header {
        nodes: vec![node.name().to_owned()],
        image: Some(node.image().name.clone()),
        run_url: None,
        estimate: None,
        gpu_time: crate::ci::gpu_time_words(&[results.to_path_buf()]),
        reuse,
        drained: prgate_runner::health::drained_nodes(&prgate_runner::health::health_dir(node))?
            .iter()
            .map(crate::node::drained_node)
            .collect(),
        drift,
        ..Header::of(plan, u64::from(pr.number), Some(pr.title.clone()))
    };
    let link = ReportLink { name: "report.md".to_owned(), url: None };
    let input = CommentInput {
        verdict: Some(verdict),
        plan,
        header: &header,
        progress: None,
        full_report: Some(&link),
        error: None,
    };
    let status = commit_status(Some(verdict), plan, None, &StatusSettings::default());
    for (name, text) in [
        ("comment.md", render_comment(&input)?),
        ("report.md", render_full_report(&input)?),
        (
            "status.txt",
            format!("{} {}: {}\n", status.context, status.state.as_str(), status.description),
        ),
    ] {
        let path = results.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// How often the demo runs a history PR whose small loss measured over the 2% line.
const HISTORY_ATTEMPTS: usize = 3;

fn write_json(path: &Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut json = serde_json::to_string_pretty(value)?;
    json.push('\n');
    std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))
}
