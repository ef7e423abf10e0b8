//! `prgate ci`: the whole PR test in one command, as the workflow calls it.
//!
//! In order: the trigger (the event's label or dispatch, the sender's role, the label removed,
//! the head SHA pinned; `trigger`), the plan from the base side's manifest, at once a `pending`
//! status and the comment, the run on this node with the comment edited as checks finish (at
//! most once per `--update-every`), the gate, then the final comment and status, the job
//! summary and the full report file.
//!
//! Whatever happens after the pin, the status never stays `pending`: an error, a panic, a
//! `SIGINT`/`SIGTERM` (a cancelled job) or a run that ends with checks still pending posts
//! `error` with the reason, and the comment says what was done and what was not. Only a
//! `SIGKILL` cannot be answered from inside; the workflow's `finish` stage (`if: always()`)
//! answers it (docs/workflow.md).
//!
//! Files, under `--work` (default `.prgate`): `state/trigger.json`, `state/files.txt`,
//! `state/plan.json`, `results/` (evidence, logs), `events.jsonl`, `verdict.json`,
//! `comment.md` (the last comment posted), `prgate-report.md` (the full report).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use prgate_gate::evidence::Evidence;
use prgate_gate::{State, Verdict};
use prgate_report::comment::{
    CommentInput, Header, Progress, ReportLink, StepProgress, StepState, render_comment,
    render_full_report,
};
use prgate_report::status::{StatusSettings, commit_status, error_status};
use prgate_runner::node::NodeProfile;
use prgate_runner::results::{Event as RunEvent, EventKind};
use prgate_runner::run::{DEFAULT_COMMON_RECIPE_PATH, DEFAULT_RECIPE_PATH, RunRequest};
use prgate_scope::{FileList, Plan, PlanRequest};

use crate::gate::Outcome;
use crate::github::GitHub;
use crate::run::{IsolationArg, Switch, parse_time_limit};
use crate::trigger::{Decision, Event, Pinned};

/// Run the whole PR test: trigger, plan, pending status and comment, the run on this node with
/// the comment kept up to date, the gate, the final comment and status, the job summary and
/// the full report (docs/workflow.md).
///
/// Exit status: 0 the PR passed, 1 it failed (or no run started: the reason on stderr), 2 an
/// error (the status was set to `error`). The token is read from GITHUB_TOKEN, the API from
/// GITHUB_API_URL.
#[derive(Debug, Args)]
pub(crate) struct CiArgs {
    /// The event payload (GITHUB_EVENT_PATH): a `pull_request_target` labeled with --label, or a
    /// `workflow_dispatch` with inputs `pr` and `sha`.
    #[arg(long, value_name = "FILE", required_unless_present = "pr")]
    event: Option<PathBuf>,
    /// A dispatch from the command line: the PR's number (with --sha).
    #[arg(long, value_name = "N", requires = "sha", conflicts_with = "event")]
    pr: Option<u64>,
    /// The head SHA the dispatch expects (40 hex digits).
    #[arg(long, value_name = "SHA", requires = "pr")]
    sha: Option<String>,
    /// Who dispatched (their role is checked).
    #[arg(long, value_name = "LOGIN", env = "GITHUB_ACTOR")]
    actor: Option<String>,
    /// The repository, owner/name.
    #[arg(long, value_name = "OWNER/NAME", env = "GITHUB_REPOSITORY")]
    repository: String,
    /// A checkout of the base branch that also has the PR's head commit (fetched as a ref).
    #[arg(long, value_name = "DIR", default_value = ".")]
    repo: PathBuf,
    /// This node's profile.
    #[arg(long, value_name = "FILE", default_value = "/etc/prgate/node.toml")]
    node: PathBuf,
    /// Where the state, results and report files go.
    #[arg(long, value_name = "DIR", default_value = ".prgate")]
    work: PathBuf,
    /// The label that starts a run.
    #[arg(long, default_value = "run-ci")]
    label: String,
    /// The workflow run's page, linked from the comment and the status.
    #[arg(long, value_name = "URL")]
    run_url: Option<String>,
    /// Edit the comment at most this often while checks finish.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_time_limit)]
    update_every: Duration,
    /// The login our comments are written by [default: the token's user].
    #[arg(long, value_name = "LOGIN", env = "PRGATE_BOT_LOGIN")]
    bot_login: Option<String>,
    /// Where commands from the PR run (see `prgate run --help`).
    #[arg(long, value_enum, default_value_t = IsolationArg::Container)]
    isolation: IsolationArg,
    /// The container engine's client.
    #[arg(long, value_name = "PROGRAM")]
    engine: Option<PathBuf>,
    /// The run's time limit: what has not run by then is recorded as a timeout.
    #[arg(long, value_name = "DURATION", value_parser = parse_time_limit)]
    time_limit: Option<Duration>,
    /// Wait this long for another run's host lock.
    #[arg(long, value_name = "DURATION", value_parser = parse_time_limit)]
    wait_lock: Option<Duration>,
    /// Check the node before any install.
    #[arg(long, value_enum, default_value_t = Switch::On)]
    preflight: Switch,
    /// Read device nodes and sysfs under this folder (for testing the preflight).
    #[arg(long, value_name = "DIR", default_value = "/")]
    preflight_root: PathBuf,
    /// The free disk space the preflight asks for, in GiB.
    #[arg(long, value_name = "GIB")]
    min_free_disk: Option<u64>,
    /// The Python interpreter that runs pytest on the host (`--isolation host`).
    #[arg(long, value_name = "PROGRAM", default_value = "python3")]
    python: PathBuf,
}

pub(crate) fn run(args: &CiArgs) -> anyhow::Result<Outcome> {
    let state = args.work.join("state");
    std::fs::create_dir_all(&state).with_context(|| format!("creating {}", state.display()))?;
    let event = match (&args.event, args.pr, &args.sha) {
        (Some(path), _, _) => crate::files::read_json(path, "event")?,
        (None, Some(pr), Some(sha)) => {
            let actor = args.actor.as_deref().context("a dispatch needs --actor (GITHUB_ACTOR)")?;
            Event::dispatch(pr, sha, actor)
        }
        _ => anyhow::bail!("give --event FILE, or --pr N --sha SHA"),
    };
    let (runtime, github) = crate::github::connect(&args.repository)?;
    let (pinned, files) =
        match runtime.block_on(crate::trigger::decide(&github, &event, &args.label))? {
            Decision::Refuse(reason) => {
                eprintln!("prgate: no run: {reason}");
                return Ok(Outcome::NotPass);
            }
            Decision::Start(pinned, files) => (pinned, files),
        };
    write(&state.join("trigger.json"), &(serde_json::to_string_pretty(&pinned)? + "\n"))?;
    write(&state.join("files.txt"), &(files.join("\n") + "\n"))?;
    eprintln!(
        "prgate: run #{} at {} (started by {})",
        pinned.number, pinned.sha, pinned.triggered_by
    );

    let reporter = Arc::new(Reporter {
        runtime,
        github,
        pinned,
        args: ReporterArgs {
            run_url: args.run_url.clone(),
            bot_login: args.bot_login.clone(),
            work: args.work.clone(),
        },
        plan: Mutex::new(None),
        progress: Mutex::new(Progress { steps: Vec::new() }),
        image: Mutex::new(None),
        node: Mutex::new(None),
        finished: AtomicBool::new(false),
    });
    // A cancelled job (SIGINT, SIGTERM): the runner stops every child, then this leaves word.
    let last_words = Arc::clone(&reporter);
    prgate_runner::process::before_dying_of_signal(Box::new(move |signal| {
        last_words.error(&format!("the run was stopped by {signal} (the job was cancelled?)"));
    }));
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pipeline(args, &reporter, files)));
    match outcome {
        Ok(Ok(outcome)) => Ok(outcome),
        Ok(Err(error)) => {
            reporter.error(&format!("{error:#}"));
            Err(error)
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_owned()))
                .unwrap_or_else(|| "a panic".to_owned());
            reporter.error(&format!("prgate crashed: {what}"));
            Err(anyhow::anyhow!("prgate crashed: {what}"))
        }
    }
}

/// Everything after the pin; any error here is posted as the `error` status.
fn pipeline(
    args: &CiArgs,
    reporter: &Arc<Reporter>,
    files: Vec<String>,
) -> anyhow::Result<Outcome> {
    let pinned = &reporter.pinned;
    let state = args.work.join("state");
    let repository = git2::Repository::open(&args.repo)
        .with_context(|| format!("opening the repository {}", args.repo.display()))?;
    for (what, sha) in [("the PR's head", &pinned.sha), ("the base", &pinned.base_sha)] {
        let oid = git2::Oid::from_str(sha).with_context(|| format!("{what} {sha}"))?;
        repository.find_commit(oid).with_context(|| {
            format!(
                "{what} {sha} is not in {}; fetch it first (git fetch origin pull/{}/head)",
                args.repo.display(),
                pinned.number
            )
        })?;
    }
    drop(repository);

    let node_text = std::fs::read_to_string(&args.node)
        .with_context(|| format!("reading the node profile {}", args.node.display()))?;
    let node = NodeProfile::parse(&node_text, &args.node.display().to_string())?;
    *lock(&reporter.node) = Some(node.name().to_owned());
    *lock(&reporter.image) = Some(node.image().name.clone());

    // The plan: the PR's files as the API listed them, judged by the base side's manifest.
    let changes = prgate_scope::change::parse_file_list(&(files.join("\n") + "\n"))
        .context("the PR's file list")?;
    let plan = prgate_scope::plan(&PlanRequest {
        repo: args.repo.clone(),
        base: Some(pinned.base_sha.clone()),
        head: Some(pinned.sha.clone()),
        worktree: false,
        files: Some(FileList { changes, truncated: pinned.files_truncated }),
    })?;
    write(&state.join("plan.json"), &(serde_json::to_string_pretty(&plan)? + "\n"))?;
    let base = crate::gate::BaseSide::read(&args.repo, &plan)?;
    *lock(&reporter.plan) = Some(plan.clone());
    *lock(&reporter.progress) = planned_progress(&plan);
    reporter.post_progress()?;

    // The run, with the comment following the event stream.
    let results = args.work.join("results");
    let events = args.work.join("events.jsonl");
    let title = Some(pinned.title.as_str());
    let gain_required = prgate_gate::title::requires_gain(title, &base.config.gain.types);
    let isolation = crate::run::isolation(args.isolation, args.engine.as_deref(), &plan, &results)?;
    let preflight =
        crate::run::preflight_mode(args.preflight, &args.preflight_root, args.min_free_disk);
    let request = RunRequest {
        plan: &plan,
        repo: &args.repo,
        node: &node,
        results: &results,
        events: Some(&events),
        recipe_path: DEFAULT_RECIPE_PATH,
        gate: &base.config,
        gain_required,
        python: &args.python,
        common_recipe_path: DEFAULT_COMMON_RECIPE_PATH,
        time_limit: args.time_limit,
        progress: false,
        isolation: &isolation,
        wait_lock: args.wait_lock,
        preflight: &preflight,
        only_models: None,
    };
    let done = AtomicBool::new(false);
    let summary = std::thread::scope(|scope| {
        let follower = scope.spawn(|| follow(reporter, &events, args.update_every, &done));
        let summary = prgate_runner::run::run(&request);
        done.store(true, Ordering::SeqCst);
        let _followed = follower.join();
        summary
    })
    .context("running the plan")?;
    for note in &summary.notes {
        eprintln!("note: {note}");
    }
    *lock(&reporter.progress) = read_progress(&plan, &events);

    // The gate.
    let evidence = read_evidence(&results.join("evidence"))?;
    let rules = prgate_gate::rules::judge_rules(&plan, title, &base.config, &base.policy);
    let verdict = prgate_gate::judge(&plan, &evidence, rules, gain_required, &base.config)
        .map_err(|error| anyhow::anyhow!("evidence record {}: {}", error.record, error.problem))?;
    write(&args.work.join("verdict.json"), &(serde_json::to_string_pretty(&verdict)? + "\n"))?;
    if verdict.result == State::Pending {
        // The run is over: a check still pending will never report.
        let missing: Vec<String> = verdict
            .sections
            .iter()
            .flat_map(|section| section.items.iter())
            .filter(|item| item.state == State::Pending)
            .map(|item| format!("{} {}", item.model.as_deref().unwrap_or("common"), item.check))
            .collect();
        anyhow::bail!("the run ended with checks that never reported: {}", missing.join(", "));
    }
    reporter.post_final(&verdict)?;
    Ok(if verdict.result == State::Pass { Outcome::Pass } else { Outcome::NotPass })
}

/// Edits the comment as the event stream shows checks finishing, at most once per `every`.
fn follow(reporter: &Reporter, events: &Path, every: Duration, done: &AtomicBool) {
    let Some(plan) = lock(&reporter.plan).clone() else { return };
    let mut last_post = Instant::now();
    let mut last_shown = lock(&reporter.progress).clone();
    while !done.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(200));
        if last_post.elapsed() < every {
            continue;
        }
        let progress = read_progress(&plan, events);
        if progress == last_shown {
            continue;
        }
        *lock(&reporter.progress) = progress.clone();
        match reporter.post_progress() {
            Ok(()) => {
                last_shown = progress;
                last_post = Instant::now();
            }
            // A comment that cannot be edited now is edited at the next step or at the end.
            Err(error) => eprintln!("prgate: could not update the comment: {error:#}"),
        }
    }
}

/// Every check the plan runs, waiting: one line per model and check (the comment's table).
fn planned_progress(plan: &Plan) -> Progress {
    let mut steps = Vec::new();
    if plan.common.selected {
        steps.push(StepProgress {
            model: None,
            check: prgate_gate::evidence::Check::CommonTests.describe().to_owned(),
            state: StepState::Waiting,
        });
    }
    for model in &plan.models {
        use prgate_gate::evidence::Check;
        use prgate_scope::plan::Tier;
        let checks: &[Check] = match model.tier {
            Tier::Full if !model.removed => &[
                Check::UnitTests,
                Check::KernelTests,
                Check::KernelTiming,
                Check::ServingTests,
                Check::Accuracy,
                Check::Speed,
                Check::Routing,
            ],
            Tier::Smoke if !model.removed => &[
                Check::UnitTests,
                Check::KernelTests,
                Check::ServingTests,
                Check::Speed,
                Check::Routing,
            ],
            _ => &[],
        };
        for check in checks {
            steps.push(StepProgress {
                model: Some(model.name.clone()),
                check: check.describe().to_owned(),
                state: StepState::Waiting,
            });
        }
    }
    Progress { steps }
}

/// The plan's checks with the states the event stream gives them: a check is running once a
/// step of it started, and done once every step of it that started has finished.
fn read_progress(plan: &Plan, events: &Path) -> Progress {
    let mut progress = planned_progress(plan);
    let text = std::fs::read_to_string(events).unwrap_or_default();
    let mut open: std::collections::BTreeMap<(Option<String>, String), i64> =
        std::collections::BTreeMap::new();
    let mut seen: std::collections::BTreeSet<(Option<String>, String)> =
        std::collections::BTreeSet::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<RunEvent>(line) else { continue };
        let key = (event.model.clone(), event.check.describe().to_owned());
        seen.insert(key.clone());
        let count = open.entry(key).or_default();
        match event.event {
            EventKind::StepStarted => *count += 1,
            EventKind::StepFinished => *count -= 1,
            _ => {}
        }
    }
    for step in &mut progress.steps {
        let key = (step.model.clone(), step.check.clone());
        if seen.contains(&key) {
            step.state = if open.get(&key).copied().unwrap_or(0) > 0 {
                StepState::Running
            } else {
                StepState::Done
            };
        }
    }
    progress
}

/// Every `*.json` record of an evidence folder.
fn read_evidence(dir: &Path) -> anyhow::Result<Vec<Evidence>> {
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|extension| extension == "json"))
            .collect(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(error).with_context(|| format!("reading {}", dir.display())),
    };
    paths.sort();
    paths.iter().map(|path| crate::files::read_json(path, "evidence")).collect()
}

/// What the reporter needs of the command line.
struct ReporterArgs {
    run_url: Option<String>,
    bot_login: Option<String>,
    work: PathBuf,
}

/// Posts to the PR: the progress while the run goes, the final verdict, or the error.
struct Reporter {
    runtime: tokio::runtime::Runtime,
    github: GitHub,
    pinned: Pinned,
    args: ReporterArgs,
    plan: Mutex<Option<Plan>>,
    progress: Mutex<Progress>,
    image: Mutex<Option<String>>,
    node: Mutex<Option<String>>,
    /// The final status is posted: nothing may replace it.
    finished: AtomicBool,
}

impl Reporter {
    fn header(&self, plan: &Plan) -> Header {
        Header {
            pr_number: self.pinned.number,
            title: Some(self.pinned.title.clone()),
            pr_sha: self.pinned.sha.clone(),
            base_sha: plan.merge_base.clone().unwrap_or_else(|| plan.base.sha.clone()),
            nodes: lock(&self.node).iter().cloned().collect(),
            image: lock(&self.image).clone(),
            run_url: self.args.run_url.clone(),
        }
    }

    fn settings(&self) -> StatusSettings {
        StatusSettings { target_url: self.args.run_url.clone(), ..StatusSettings::default() }
    }

    /// The pending status and the comment with the run's progress.
    fn post_progress(&self) -> anyhow::Result<()> {
        let Some(plan) = lock(&self.plan).clone() else { return Ok(()) };
        let progress = lock(&self.progress).clone();
        let header = self.header(&plan);
        let link = self.report_link();
        let input = CommentInput {
            verdict: None,
            plan: &plan,
            header: &header,
            progress: Some(&progress),
            full_report: Some(&link),
            error: None,
        };
        let status = commit_status(None, &plan, Some(&progress), &self.settings());
        self.post(&input, &status)
    }

    /// The final comment and status, the full report and the job summary.
    fn post_final(&self, verdict: &Verdict) -> anyhow::Result<()> {
        let Some(plan) = lock(&self.plan).clone() else { return Ok(()) };
        let header = self.header(&plan);
        let link = self.report_link();
        let input = CommentInput {
            verdict: Some(verdict),
            plan: &plan,
            header: &header,
            progress: None,
            full_report: Some(&link),
            error: None,
        };
        write(&self.args.work.join(REPORT_NAME), &render_full_report(&input)?)?;
        crate::publish::actions_outputs(&input)?;
        let status = commit_status(Some(verdict), &plan, None, &self.settings());
        self.post(&input, &status)?;
        self.finished.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// The `error` status with `problem`, and the comment with what was done and what was
    /// not. Never fails: what cannot be posted is said on stderr.
    fn error(&self, problem: &str) {
        if self.finished.swap(true, Ordering::SeqCst) {
            return;
        }
        eprintln!("prgate: error: {problem}");
        let status = error_status(problem, &self.settings());
        let plan = lock(&self.plan).clone();
        let result = match &plan {
            Some(plan) => {
                let progress = lock(&self.progress).clone();
                let header = self.header(plan);
                let link = self.report_link();
                let input = CommentInput {
                    verdict: None,
                    plan,
                    header: &header,
                    progress: Some(&progress),
                    full_report: Some(&link),
                    error: Some(problem),
                };
                let _written = render_full_report(&input)
                    .map_err(anyhow::Error::from)
                    .and_then(|report| write(&self.args.work.join(REPORT_NAME), &report));
                self.post(&input, &status)
            }
            // No plan yet: no comment to show, the status says it all.
            None => self.runtime.block_on(async {
                self.github
                    .set_status(
                        &self.pinned.sha,
                        status.state.as_str(),
                        &status.description,
                        &status.context,
                        status.target_url.as_deref(),
                    )
                    .await
            }),
        };
        if let Err(error) = result {
            eprintln!("prgate: could not post the error status: {error:#}");
        }
    }

    fn post(
        &self,
        input: &CommentInput<'_>,
        status: &prgate_report::status::Status,
    ) -> anyhow::Result<()> {
        let body = render_comment(input)?;
        write(&self.args.work.join("comment.md"), &body)?;
        self.runtime.block_on(crate::publish::post(
            &self.github,
            &self.pinned.sha,
            status,
            self.pinned.number,
            self.args.bot_login.as_deref(),
            &body,
        ))
    }

    fn report_link(&self) -> ReportLink {
        ReportLink { name: REPORT_NAME.to_owned(), url: None }
    }
}

/// The full report's file name under `--work`, as the workflow uploads it.
const REPORT_NAME: &str = "prgate-report.md";

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
