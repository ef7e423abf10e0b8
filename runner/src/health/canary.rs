//! The canary: a short check that a drained node is mended, and its re-admission when it
//! passes.
//!
//! [`Canary::run`] runs the GPU part of the [preflight](crate::preflight) (GPUs visible and
//! free, ECC, memory of dead processes, a hung tool; no disk, checkpoint or image) and then
//! the node profile's `health.canary` command, when it has one (a small run on the GPUs: a
//! matmul, a tiny model), under a time limit with its output kept in `<log_dir>/canary.log`.
//! When both pass, the node is admitted ([`Ledger::admit`], source `canary`); when either
//! fails, each failure is a strike and the node stays as it was.
//!
//! What it leaves to others: draining (the strikes), and resuming a node in SLURM (the
//! caller, with [`crate::slurm::resume_node`]).

use std::path::Path;
use std::time::SystemTime;

use super::{HealthError, Ledger, Source, Strike};
use crate::node::NodeProfile;
use crate::preflight::{CommandRunner, Preflight, Probes, Thresholds};

/// What a canary checks, and with what.
#[derive(Debug)]
pub struct Canary<'a> {
    pub node: &'a NodeProfile,
    /// The ledger of the node it runs on.
    pub ledger: &'a Ledger,
    /// Runs the GPU tools and the canary command.
    pub commands: &'a dyn CommandRunner,
    /// The root the device nodes and sysfs are read under: `/` on a node.
    pub root: &'a Path,
}

/// How a canary went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanaryReport {
    /// Whether it passed (and the node was admitted).
    pub passed: bool,
    /// What failed, in words; empty when it passed.
    pub failures: Vec<String>,
    /// The notes of the strikes it recorded.
    pub notes: Vec<String>,
}

impl Canary<'_> {
    /// Runs the canary; admits the node when it passes, strikes it for each failure.
    pub fn run(&self, now: SystemTime) -> Result<CanaryReport, HealthError> {
        let thresholds =
            Thresholds { min_free_work_bytes: 0, min_free_cache_bytes: 0, ..Thresholds::default() };
        let preflight = Preflight {
            node: self.node,
            checkpoints: &[],
            thresholds,
            probes: Probes { commands: self.commands, root: self.root },
            image_check: None,
        };
        let mut failures: Vec<String> = Vec::new();
        if let Err(failure) = preflight.run() {
            failures
                .extend(failure.findings().iter().map(|finding| format!("preflight: {finding}")));
        }
        let command = self.node.health().canary();
        if failures.is_empty() && !command.is_empty() {
            let argv: Vec<&str> = command.iter().map(String::as_str).collect();
            if let Err(error) = self.commands.run("canary", &argv) {
                failures.push(format!("the canary command `{}`: {error}", command.join(" ")));
            }
        }
        if failures.is_empty() {
            let what = if command.is_empty() {
                "the canary passed: the GPU preflight".to_owned()
            } else {
                format!("the canary passed: the GPU preflight and `{}`", command.join(" "))
            };
            self.ledger.admit(Source::Canary, &what, now)?;
            return Ok(CanaryReport { passed: true, failures, notes: Vec::new() });
        }
        let policy = self.node.health().policy();
        let mut notes = Vec::new();
        for failure in &failures {
            let strike = Strike { source: Source::Canary, detail: failure.clone() };
            let outcome = self.ledger.strike(&strike, Some("prgate node canary"), policy, now)?;
            if outcome.drained_now {
                notes.push(format!(
                    "node {} is drained: {} strikes",
                    self.ledger.node(),
                    outcome.in_window
                ));
            }
        }
        Ok(CanaryReport { passed: false, failures, notes })
    }
}
