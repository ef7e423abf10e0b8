//! The PR as `prgate ci` shows it while it works: the [`Reporter`] posts the pending status and
//! the comment with the run's progress, then the final comment, status, check run, job summary
//! and full report, or the `error` status with what was done; the [`CommentObserver`] watches
//! the step loop's events and edits the comment at most once per `--update-every`.
//!
//! What the comment shows besides the verdict is kept in one [`CommentState`], changed only
//! through [`Reporter::update`]; the reporter never lets a posted final status be replaced.
//!
//! What it leaves to others: the comment's and status's text (`prgate_report`: `comment`,
//! `status`, and `progress` for the table of checks), GitHub's API (`prgate_github`,
//! `crate::publish`), the stages that decide what to post (`super::stages`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use prgate_gate::Verdict;
use prgate_report::comment::{
    CommentInput, Header, Progress, ReportLink, render_comment, render_full_report,
};
use prgate_report::status::{StatusSettings, commit_status, error_status};
use prgate_runner::results::Event as RunEvent;
use prgate_scope::Plan;

use super::{Settings, write};
use crate::publish::REPORT_NAME;
use prgate_github::GitHub;
use prgate_github::pin::Pinned;
use prgate_report::progress::CheckStates;

/// The PR comment as an observer of the step loop: every event moves its checks on, and the
/// comment is edited at most once per `every` (and at the end).
pub(super) struct CommentObserver<'r> {
    pub(super) reporter: &'r Reporter,
    pub(super) plan: &'r Plan,
    pub(super) every: Duration,
    pub(super) state: Mutex<(CheckStates, Instant)>,
}

impl CommentObserver<'_> {
    /// The plan's checks as the events so far leave them.
    pub(super) fn progress(&self) -> Progress {
        lock(&self.state).0.progress(self.plan)
    }
}

impl std::fmt::Debug for CommentObserver<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommentObserver").field("every", &self.every).finish_non_exhaustive()
    }
}

impl prgate_runner::results::StepObserver for CommentObserver<'_> {
    fn observe(&self, event: &RunEvent) {
        let mut state = lock(&self.state);
        state.0.observe(event);
        if state.1.elapsed() < self.every {
            return;
        }
        let progress = state.0.progress(self.plan);
        let changed = self.reporter.update(|shown| {
            let changed = shown.progress != progress;
            shown.progress = progress;
            changed
        });
        if !changed {
            return;
        }
        match self.reporter.post_progress() {
            Ok(()) => state.1 = Instant::now(),
            // A comment that cannot be edited now is edited at the next step or at the end.
            Err(error) => eprintln!("prgate: could not update the comment: {error:#}"),
        }
    }
}

/// What the reporter needs of the command line.
struct ReporterArgs {
    run_url: Option<String>,
    bot_login: Option<String>,
    work: PathBuf,
    /// `--check-run on`: keep a check run beside the status; its id is kept in
    /// `check-run.txt` of this state folder, so the finish stage edits the start's.
    check_run: Option<PathBuf>,
    /// The node profile, whose health ledger names the drained nodes (docs/node.md).
    node: PathBuf,
}

/// What the comment shows besides the verdict, in one place: the plan, the checks' progress
/// (from the step loop's events, or from the evidence in the finish stage), and the header's
/// nodes, image and estimate.
#[derive(Debug, Clone, Default)]
pub(super) struct CommentState {
    pub(super) plan: Option<Plan>,
    pub(super) progress: Progress,
    /// The image the checks ran in: the node's, or what the evidence names.
    pub(super) image: Option<String>,
    /// The nodes the run uses.
    pub(super) nodes: Vec<String>,
    /// What the run is expected to take.
    pub(super) estimate: Option<String>,
    /// The GPU time the run measured, for the comment's header.
    pub(super) gpu_time: Option<String>,
    /// What the run reused from an earlier one.
    pub(super) reuse: Option<String>,
    /// The drift guards over their budget (docs/history.md).
    pub(super) drift: Vec<String>,
}

/// Posts to the PR: the progress while the run goes, the final verdict, or the error.
pub(super) struct Reporter {
    runtime: tokio::runtime::Runtime,
    github: GitHub,
    pub(super) pinned: Pinned,
    args: ReporterArgs,
    /// What the comment shows besides the verdict, changed only through [`Reporter::update`].
    state: Mutex<CommentState>,
    /// The final status is posted: nothing may replace it.
    finished: AtomicBool,
}

impl Reporter {
    pub(super) fn new(
        args: &Settings,
        runtime: tokio::runtime::Runtime,
        github: GitHub,
        pinned: Pinned,
    ) -> Arc<Reporter> {
        Arc::new(Reporter {
            runtime,
            github,
            pinned,
            args: ReporterArgs {
                run_url: args.run_url.clone(),
                bot_login: args.bot_login.clone(),
                work: args.work.clone(),
                check_run: args.check_run.then(|| args.state.clone()),
                node: args.node.clone(),
            },
            state: Mutex::new(CommentState::default()),
            finished: AtomicBool::new(false),
        })
    }

    /// Changes what the comment shows; returns what `change` returns.
    pub(super) fn update<T>(&self, change: impl FnOnce(&mut CommentState) -> T) -> T {
        change(&mut lock(&self.state))
    }

    /// What the comment shows now.
    fn state(&self) -> CommentState {
        lock(&self.state).clone()
    }

    fn header(&self, state: &CommentState, plan: &Plan) -> Header {
        Header {
            nodes: state.nodes.clone(),
            image: state.image.clone(),
            run_url: self.args.run_url.clone(),
            estimate: state.estimate.clone(),
            gpu_time: state.gpu_time.clone(),
            reuse: state.reuse.clone(),
            drained: crate::node::drained_for_report(&self.args.node),
            drift: state.drift.clone(),
            ..Header::of(plan, self.pinned.number, Some(self.pinned.title.clone()))
        }
    }

    fn settings(&self) -> StatusSettings {
        StatusSettings { target_url: self.args.run_url.clone(), ..StatusSettings::default() }
    }

    /// What the comment shows now, with `verdict` (the final comment: no progress) or
    /// `error`, handed to `then`; `None` while there is no plan yet (no comment to show).
    fn show<T>(
        &self,
        verdict: Option<&Verdict>,
        error: Option<&str>,
        then: impl FnOnce(&Plan, &CommentInput<'_>) -> T,
    ) -> Option<T> {
        let state = self.state();
        let plan = state.plan.as_ref()?;
        let header = self.header(&state, plan);
        let link = self.report_link();
        let input = CommentInput {
            verdict,
            plan,
            header: &header,
            progress: verdict.is_none().then_some(&state.progress),
            full_report: Some(&link),
            error,
        };
        Some(then(plan, &input))
    }

    /// The pending status and the comment with the run's progress.
    pub(super) fn post_progress(&self) -> anyhow::Result<()> {
        self.show(None, None, |plan, input| {
            let status = commit_status(None, plan, input.progress, &self.settings());
            self.post(input, &status)
        })
        .unwrap_or(Ok(()))
    }

    /// The final comment and status, the full report and the job summary.
    pub(super) fn post_final(&self, verdict: &Verdict) -> anyhow::Result<()> {
        self.show(Some(verdict), None, |plan, input| {
            write(&self.args.work.join(REPORT_NAME), &render_full_report(input)?)?;
            crate::publish::actions_outputs(input)?;
            let status = commit_status(Some(verdict), plan, None, &self.settings());
            self.post(input, &status)?;
            self.finished.store(true, Ordering::SeqCst);
            Ok(())
        })
        .unwrap_or(Ok(()))
    }

    /// The `error` status with `problem`, and the comment with what was done and what was
    /// not. Never fails: what cannot be posted is said on stderr.
    pub(super) fn error(&self, problem: &str) {
        if self.finished.swap(true, Ordering::SeqCst) {
            return;
        }
        eprintln!("prgate: error: {problem}");
        let status = error_status(problem, &self.settings());
        let posted = self.show(None, Some(problem), |_plan, input| {
            let _written = render_full_report(input)
                .map_err(anyhow::Error::from)
                .and_then(|report| write(&self.args.work.join(REPORT_NAME), &report));
            self.post(input, &status)
        });
        // No plan yet: no comment to show, the status says it all.
        let result = posted.unwrap_or_else(|| {
            let posted = crate::publish::set_status(&self.github, &self.pinned.sha, &status);
            self.runtime.block_on(posted).map_err(anyhow::Error::from)
        });
        if let Err(error) = result {
            eprintln!("prgate: could not post the error status: {error:#}");
        }
    }

    fn post(
        &self,
        input: &CommentInput<'_>,
        status: &prgate_report::status::Status,
    ) -> anyhow::Result<()> {
        let body = prgate_runner::redact::redact(&render_comment(input)?).into_owned();
        write(&self.args.work.join("comment.md"), &body)?;
        self.runtime.block_on(crate::publish::post(
            &self.github,
            &self.pinned.sha,
            status,
            self.pinned.number,
            self.args.bot_login.as_deref(),
            &body,
        ))?;
        if let Some(state) = &self.args.check_run {
            // Optional beside the required status: a check run that fails is said, not fatal.
            let file = state.join("check-run.txt");
            let existing =
                std::fs::read_to_string(&file).ok().and_then(|id| id.trim().parse().ok());
            let posted = self.runtime.block_on(crate::publish::check_run(
                &self.github,
                existing,
                &self.pinned.sha,
                input,
                status,
            ));
            match posted {
                Ok(id) => write(&file, &format!("{id}\n"))?,
                Err(error) => eprintln!("prgate: could not post the check run: {error:#}"),
            }
        }
        Ok(())
    }

    fn report_link(&self) -> ReportLink {
        ReportLink { name: REPORT_NAME.to_owned(), url: None }
    }
}

/// The GPU time the runs in `results` folders measured (`prgate_runner::gpu_time`), in words.
pub(crate) fn gpu_time_words(results: &[PathBuf]) -> Option<String> {
    use prgate_report::gpu_hours::{ModelTime, PhaseTime};
    let models: Vec<ModelTime> = results
        .iter()
        .flat_map(|dir| prgate_runner::gpu_time::TargetTime::read_all(dir))
        .map(|target| ModelTime {
            model: target.model,
            gpus: target.gpus,
            phases: target
                .phases
                .iter()
                .map(|phase| PhaseTime {
                    phase: phase.phase.as_str().to_owned(),
                    gpu_seconds: phase.gpu_seconds,
                    estimate_gpu_seconds: phase.estimate_gpu_seconds,
                })
                .collect(),
            servers: target.servers.as_ref().map(prgate_runner::gpu_time::ServersUsed::words),
        })
        .collect();
    prgate_report::gpu_hours::words(&models)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
