//! Whether a recipe can run on a node: its hardware, enough GPUs for its tensor parallelism,
//! the checkpoint, the tokens its gated datasets need. Each reason it cannot is a
//! [`Blocker`], which the runner records as not-run evidence; the recipe's contents are
//! checked elsewhere in this module's parent.

use std::fmt;

use prgate_gate::evidence::{Check, NotRunReason};

use crate::node::NodeProfile;

use super::Recipe;

impl Recipe {
    /// Whether the recipe can run on `node`: every reason it cannot, in whole or in part.
    /// Secrets are checked by name only; whether their environment variables are set is the
    /// runner's question at run time.
    pub fn check_runs_on(&self, node: &NodeProfile) -> Result<(), NotRunnable> {
        let mut blockers = Vec::new();
        if !self.hardware.iter().any(|hardware| hardware == node.hardware()) {
            blockers.push(Blocker::HardwareAbsent {
                node: node.name().to_owned(),
                hardware: node.hardware().to_owned(),
                supported: self.hardware.clone(),
            });
        }
        if node.gpu_count() < self.tp as usize {
            blockers.push(Blocker::TooFewGpus {
                node: node.name().to_owned(),
                gpus: node.gpu_count(),
                tp: self.tp,
            });
        }
        if node.checkpoint_path(&self.checkpoint).is_none() {
            blockers.push(Blocker::NoCheckpoint {
                node: node.name().to_owned(),
                checkpoint: self.checkpoint.clone(),
            });
        }
        for benchmark in &self.accuracy {
            if let Some(token) = &benchmark.token
                && !node.has_secret(token)
            {
                blockers.push(Blocker::GatedDataset {
                    node: node.name().to_owned(),
                    benchmark: benchmark.name.clone(),
                    token: token.clone(),
                });
            }
        }
        if blockers.is_empty() { Ok(()) } else { Err(NotRunnable { blockers }) }
    }
}

/// Why a recipe cannot run, wholly or in part, on a node: what the runner records as not-run
/// evidence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe_blockers(.blockers))]
pub struct NotRunnable {
    blockers: Vec<Blocker>,
}

/// One reason a recipe cannot run on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    /// The node's hardware is not in the recipe's list.
    HardwareAbsent { node: String, hardware: String, supported: Vec<String> },
    /// The node has fewer GPUs than the recipe's tensor parallelism.
    TooFewGpus { node: String, gpus: usize, tp: u32 },
    /// The node does not have the checkpoint.
    NoCheckpoint { node: String, checkpoint: String },
    /// An accuracy benchmark's dataset is gated and the node lacks its token.
    GatedDataset { node: String, benchmark: String, token: String },
}

impl NotRunnable {
    /// Every reason, in the order found: hardware, GPUs, checkpoint, then benchmarks.
    pub fn blockers(&self) -> &[Blocker] {
        &self.blockers
    }

    /// The first reason `check` cannot run; for an accuracy check, `part` is the benchmark's
    /// name (a gated dataset blocks only its own benchmark).
    pub fn blocker_for(&self, check: Check, part: Option<&str>) -> Option<&Blocker> {
        self.blockers.iter().find(|blocker| {
            blocker.blocks(check)
                && match (blocker.subject(), part) {
                    (None, _) => true,
                    (Some(subject), Some(part)) => subject == part,
                    (Some(_), None) => false,
                }
        })
    }
}

impl Blocker {
    /// The reason as evidence records it.
    pub fn reason(&self) -> NotRunReason {
        match self {
            Blocker::HardwareAbsent { .. } | Blocker::TooFewGpus { .. } => {
                NotRunReason::HardwareAbsent
            }
            Blocker::NoCheckpoint { .. } => NotRunReason::NoCheckpoint,
            Blocker::GatedDataset { .. } => NotRunReason::GatedDataset,
        }
    }

    /// The part of a check it blocks (a benchmark's name), or `None` for the whole check.
    pub fn subject(&self) -> Option<&str> {
        match self {
            Blocker::GatedDataset { benchmark, .. } => Some(benchmark),
            _ => None,
        }
    }

    /// Whether it stops `check`. Unit and kernel tests need neither a server nor the
    /// recipe's hardware, so nothing here stops them; every check that needs the model's
    /// server (routing, serving tests, accuracy, speed) stops without the hardware, the GPUs
    /// or the checkpoint; kernel timing stops on hardware the recipe does not support; a gated
    /// dataset stops its own benchmark.
    pub fn blocks(&self, check: Check) -> bool {
        let needs_server =
            matches!(check, Check::Routing | Check::ServingTests | Check::Accuracy | Check::Speed);
        match self {
            Blocker::HardwareAbsent { .. } => needs_server || check == Check::KernelTiming,
            Blocker::TooFewGpus { .. } | Blocker::NoCheckpoint { .. } => needs_server,
            Blocker::GatedDataset { .. } => check == Check::Accuracy,
        }
    }
}

impl fmt::Display for Blocker {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocker::HardwareAbsent { node, hardware, supported } => write!(
                formatter,
                "node {node} is {hardware}; the recipe supports {}",
                supported.join(", ")
            ),
            Blocker::TooFewGpus { node, gpus, tp } => {
                let plural = if *gpus == 1 { "" } else { "s" };
                write!(formatter, "node {node} has {gpus} GPU{plural}; the recipe needs {tp} (tp)")
            }
            Blocker::NoCheckpoint { node, checkpoint } => {
                write!(formatter, "node {node} has no checkpoint {checkpoint}")
            }
            Blocker::GatedDataset { node, benchmark, token } => write!(
                formatter,
                "benchmark {benchmark} reads a gated dataset and node {node} has no secret {token}"
            ),
        }
    }
}

fn describe_blockers(blockers: &[Blocker]) -> String {
    let described: Vec<String> = blockers.iter().map(ToString::to_string).collect();
    described.join("; ")
}
