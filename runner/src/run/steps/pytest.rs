//! The test suites of the tests phase (the unit and kernel tests the job plan queues, each on its
//! side) and pytest itself: a selection run in a side's tree with JUnit XML, read into a tests
//! outcome; when it left no JUnit XML, either pytest cannot start here at all (`harness`: the
//! node cannot judge) or the suite broke it (`no-result`).
//!
//! The serving tests run the same [`pytest`] against a side's server (`served`); the common
//! checks run it over the common recipe (`super`). What it leaves to others: which suites exist
//! (the job plan), reading JUnit XML (`crate::junit`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use prgate_gate::evidence::{Check, NotRunReason, Outcome};

use crate::gpu_time::Phase;
use crate::junit::{self, PytestCommand};
use crate::recipe::Recipe;
use crate::run::exec::{Command, Exec};
use crate::run::server::with_log_tail;
use crate::run::{RunError, StepFailure, not_run};
use crate::untrusted::{self, MAX_RESULT_FILE};

use super::queue::{self, Queue};
use super::servers::Serving;
use super::{DEFAULT_STEP_TIMEOUT, ModelJob, Runner, check_slug, recipe_gpus, side_name};

impl Runner<'_> {
    /// The unit and kernel tests the job plan queues, each on its side (serving tests need
    /// the servers: see `served`).
    pub(super) fn tests(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        queue: &Queue<'_>,
    ) -> Result<(), RunError> {
        let tests = recipe.tests();
        let timeouts = recipe.timeouts();
        for queued in queue.phase(queue::Phase::Tests) {
            let Some(step) = self.take(&job.subject, queued)? else { continue };
            let (check, side) = (step.check, step.side);
            let (selection, timeout) = match check {
                Check::UnitTests => (tests.unit.as_slice(), timeouts.unit_tests),
                Check::KernelTests => (tests.kernel.as_slice(), timeouts.kernel_tests),
                _ => (&[][..], None),
            };
            let tree = job.tree(side).filter(|_| !selection.is_empty() && step.part.is_none());
            let Some(tree) = tree else {
                self.record_not_described(&job.subject, step)?;
                continue;
            };
            if self.skip_if_done(&job.subject, check, side, None)? {
                continue;
            }
            let installed = self.install_side(job, recipe, side, tree);
            let timeout = self.limit(timeout.unwrap_or(DEFAULT_STEP_TIMEOUT));
            let gpus = recipe_gpus(self.request.inputs.node, recipe);
            let exec = self.exec;
            let run = TestRun { selection, tree, timeout, server: None, gpus: &gpus };
            let purpose = format!("{}-{}-{}", job.name(), side_name(side), check_slug(check));
            let _phase = self.clock.enter(Phase::Tests);
            self.step(&job.subject, check, side, None, |log| match installed {
                Ok(_own_recipe) => pytest(&exec, &run, log, purpose),
                Err(failure) => failure.not_run(None),
            })?;
        }
        Ok(())
    }
}

/// A pytest session to run.
pub(super) struct TestRun<'a> {
    pub(super) selection: &'a [String],
    pub(super) tree: &'a Path,
    pub(super) timeout: Duration,
    /// The server the tests talk to (`PRGATE_SERVER_URL`).
    pub(super) server: Option<&'a Serving>,
    pub(super) gpus: &'a [u32],
}

/// Runs a pytest selection in its tree; with a server, the tests find it in
/// `PRGATE_SERVER_URL`. The JUnit XML comes back through the step's log folder.
pub(super) fn pytest(
    exec: &Exec<'_>,
    run: &TestRun<'_>,
    log_dir: &Path,
    purpose: String,
) -> Outcome {
    let junit_xml = log_dir.join("junit.xml");
    let _absent = std::fs::remove_file(&junit_xml);
    let command = PytestCommand {
        python: PathBuf::from(exec.python()),
        selection: run.selection.to_vec(),
        junit_xml: PathBuf::from(exec.out_view(log_dir, "junit.xml")),
        extra_args: Vec::new(),
    };
    let argv = match junit::pytest_argv(&command) {
        Ok(argv) => argv.into_iter().map(|arg| arg.to_string_lossy().into_owned()).collect(),
        Err(error) => return not_run(NotRunReason::RecipeInvalid, error.to_string(), None),
    };
    let mut env = exec.side_env(run.tree);
    if let Some(server) = run.server {
        env.push(("PRGATE_SERVER_URL".to_owned(), format!("http://127.0.0.1:{}", server.port)));
    }
    let log = log_dir.join("pytest.log");
    let command = Command {
        argv,
        tree: run.tree,
        out: log_dir,
        env,
        datasets: None,
        log: log.clone(),
        timeout: run.timeout,
        gpus: run.gpus,
        purpose,
        server: run.server.and_then(|server| server.container.as_deref()),
    };
    if let Err(failure) = exec.run(&command) {
        return failure.not_run(None);
    }
    match untrusted::read_path(log_dir, &junit_xml, MAX_RESULT_FILE)
        .map_err(|problem| problem.to_string())
        .and_then(|xml| {
            junit::parse_junit(&xml).map_err(|error| format!("{}: {error}", junit_xml.display()))
        }) {
        Ok(results) => Outcome::Tests { results },
        // No JUnit: either pytest itself cannot start here (the node cannot judge), or the
        // suite broke it.
        Err(error) => match pytest_starts(exec, run, log_dir) {
            Ok(()) => not_run(NotRunReason::NoResult, with_log_tail(error, &log), None),
            Err(failure) => failure.not_run(None),
        },
    }
}

/// Whether `python -m pytest --version` runs where the suite ran; why not (`harness`: the
/// node cannot judge) when it does not.
fn pytest_starts(exec: &Exec<'_>, run: &TestRun<'_>, log_dir: &Path) -> Result<(), StepFailure> {
    let log = log_dir.join("pytest-version.log");
    let command = Command {
        argv: vec![exec.python().to_owned(), "-m".into(), "pytest".into(), "--version".into()],
        tree: run.tree,
        out: log_dir,
        env: exec.side_env(run.tree),
        datasets: None,
        log: log.clone(),
        timeout: run.timeout.min(Duration::from_secs(120)),
        gpus: &[],
        purpose: "pytest-version".to_owned(),
        server: None,
    };
    let harness = |detail: String| StepFailure::new(NotRunReason::Harness, detail);
    match exec.run(&command) {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(harness(with_log_tail(
            format!("pytest cannot start here: `{} -m pytest --version` {status}", exec.python()),
            &log,
        ))),
        Err(failure) => Err(harness(format!("pytest cannot start here: {}", failure.detail))),
    }
}
