//! Kernel timing (full tier): the timing steps the job plan queues, each side running every
//! script of its recipe in its tree, the kernels they print recorded together per side as
//! `<script>/<kernel>`.
//!
//! What it leaves to others: which sides time (the job plan), the timing scripts' output
//! format (`crate::recipe::timing`).

use std::path::Path;
use std::time::Duration;

use prgate_gate::evidence::{Check, KernelSamples, NotRunReason, Outcome};

use crate::gpu_time::Phase;
use crate::recipe::Recipe;
use crate::recipe::timing::parse_timing_output;
use crate::run::exec::{Command, Exec};
use crate::run::server::with_log_tail;
use crate::run::{RunError, not_run};
use crate::untrusted::{self, MAX_RESULT_FILE};

use super::queue::{self, Queue};
use super::{DEFAULT_STEP_TIMEOUT, ModelJob, Runner, recipe_gpus, side_name};

impl Runner<'_> {
    /// The kernel timing the job plan queues: every script of the recipe, on each side.
    pub(super) fn kernel_timing(
        &mut self,
        job: &ModelJob<'_>,
        recipe: &Recipe,
        queue: &Queue<'_>,
    ) -> Result<(), RunError> {
        for queued in queue.phase(queue::Phase::KernelTiming) {
            let Some(step) = self.take(&job.subject, queued)? else { continue };
            let side = step.side;
            let scripts = !recipe.kernel_timing().is_empty();
            let tree = job.tree(side).filter(|_| scripts && step.part.is_none());
            let (Some(tree), Check::KernelTiming) = (tree, step.check) else {
                self.record_not_described(&job.subject, step)?;
                continue;
            };
            if self.skip_if_done(&job.subject, Check::KernelTiming, side, None)? {
                continue;
            }
            // The side's scripts are its own recipe's, the one its tree was installed by.
            let installed = self.install_side(job, recipe, side, tree);
            let timeout =
                self.limit(recipe.timeouts().kernel_timing.unwrap_or(DEFAULT_STEP_TIMEOUT));
            let gpus = recipe_gpus(self.request.inputs.node, recipe);
            let exec = self.exec;
            let purpose = format!("{}-{}-kernel-timing", job.name(), side_name(side));
            let _phase = self.clock.enter(Phase::Tests);
            self.step(&job.subject, Check::KernelTiming, side, None, |log| match installed {
                Ok(own) => timing(&exec, own, tree, log, timeout, &gpus, &purpose),
                Err(failure) => failure.not_run(None),
            })?;
        }
        Ok(())
    }
}

/// Runs every timing script of `recipe` in `tree`; their kernels are named `<script>/<kernel>`.
pub(super) fn timing(
    exec: &Exec<'_>,
    recipe: &Recipe,
    tree: &Path,
    log_dir: &Path,
    timeout: Duration,
    gpus: &[u32],
    purpose: &str,
) -> Outcome {
    let mut kernels: Vec<KernelSamples> = Vec::new();
    for script in recipe.kernel_timing() {
        let file = format!("{}.json", script.name);
        let output = log_dir.join(&file);
        let _absent = std::fs::remove_file(&output);
        let log = log_dir.join(format!("{}.log", script.name));
        let command = Command {
            argv: script.command(&exec.out_view(log_dir, &file)),
            tree,
            out: log_dir,
            env: exec.side_env(tree),
            datasets: None,
            log: log.clone(),
            timeout,
            gpus,
            purpose: format!("{purpose}-{}", script.name),
            server: None,
        };
        if let Err(failure) = exec.run(&command) {
            return failure.not_run(None);
        }
        let parsed = untrusted::read_to_string(log_dir, Path::new(&file), MAX_RESULT_FILE)
            .map_err(|error| error.to_string())
            .and_then(|text| {
                parse_timing_output(&text, &script.name).map_err(|error| error.to_string())
            });
        match parsed {
            Ok(samples) => kernels.extend(samples.into_iter().map(|kernel| KernelSamples {
                name: format!("{}/{}", script.name, kernel.name),
                samples_us: kernel.samples_us,
            })),
            Err(problem) => {
                return not_run(NotRunReason::NoResult, with_log_tail(problem, &log), None);
            }
        }
    }
    Outcome::KernelTiming { kernels }
}
