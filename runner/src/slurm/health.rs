//! The SLURM executor's part of node health: drained nodes are left out of every job
//! (`sbatch --exclude`), or drained in SLURM itself where the node profile allows it
//! (`health.slurm-drain`), and what a finished job says against its node is struck in that
//! node's ledger.
//!
//! What it leaves to others: the ledger and what counts as a strike ([`crate::health`]).

use std::path::Path;
use std::time::SystemTime;

use super::SlurmError;
use super::client::Slurm;
use super::job::JobState;
use crate::health::{self, NodeHealth, Source, Strike};
use crate::node::NodeProfile;

/// The drained nodes a run leaves out.
#[derive(Debug, Clone, Default)]
pub(super) struct Exclusion {
    pub(super) drained: Vec<NodeHealth>,
}

impl Exclusion {
    /// The drained nodes of `node`'s health directory; with `health.slurm-drain`, each is
    /// drained in SLURM too (`scontrol update`), which is a no-op for a node already drained.
    /// Returns what a person should know.
    pub(super) fn read(
        client: &Slurm,
        node: &NodeProfile,
    ) -> Result<(Exclusion, Vec<String>), SlurmError> {
        let dir = health::health_dir(node);
        let drained = health::drained_nodes(&dir).map_err(SlurmError::Health)?;
        let mut notes = Vec::new();
        for health in &drained {
            notes.push(format!("left out of every job, drained by prgate: {}", health.summary()));
            if node.health().slurm_drain() {
                let reason = drain_reason(health);
                client.drain_node(&health.node, &reason)?;
                notes.push(format!(
                    "drained SLURM node {} (scontrol update state=drain reason=\"{reason}\")",
                    health.node
                ));
            }
        }
        Ok((Exclusion { drained }, notes))
    }

    /// `--exclude=a,b`, when a node is drained.
    pub(super) fn sbatch_arg(&self) -> Option<String> {
        if self.drained.is_empty() {
            return None;
        }
        let names: Vec<&str> = self.drained.iter().map(|health| health.node.as_str()).collect();
        Some(format!("--exclude={}", names.join(",")))
    }

    /// The error of an `sbatch` that refused a job while nodes were left out: SLURM says
    /// "Requested node configuration is not available" when no node is left to run it.
    pub(super) fn refused(&self, error: SlurmError) -> SlurmError {
        if self.drained.is_empty() {
            return error;
        }
        let nodes: Vec<String> = self.drained.iter().map(NodeHealth::summary).collect();
        SlurmError::Drained { nodes: nodes.join("\n  "), source: Box::new(error) }
    }
}

/// Whether node `name`'s ledger has a strike of the SLURM job `job` already.
fn struck_by(node: &NodeProfile, name: &str, job: &str) -> bool {
    health::all_nodes(&health::health_dir(node)).is_ok_and(|nodes| {
        nodes
            .iter()
            .filter(|health| health.node == name)
            .any(|health| health.strikes.iter().any(|strike| strike.run.as_deref() == Some(job)))
    })
}

/// The reason SLURM shows for a node prgate drained: `prgate: 3 strikes within 7d`.
fn drain_reason(health: &NodeHealth) -> String {
    let detail = health.drained.as_ref().map_or("drained", |drain| drain.detail.as_str());
    let reason: String = format!("prgate: {detail}")
        .chars()
        .map(|char| if char.is_ascii_graphic() || char == ' ' { char } else { '_' })
        .filter(|char| *char != '"')
        .take(120)
        .collect();
    reason
}

/// Strikes what job `job` (in `dir`, run on `host`, submitted at `submitted`) says against
/// its node: a `NODE_FAIL`, and what [`health::attribute`] finds in the records it wrote.
/// A `NODE_FAIL` of a job on several nodes strikes only the nodes that failed (`down`, those
/// SLURM had down), each once; when SLURM names none, the batch host. Returns the notes.
pub(super) fn strike_job(
    node: &NodeProfile,
    host: Option<&str>,
    down: &[&str],
    dir: &Path,
    state: &JobState,
    job: &str,
    submitted: SystemTime,
) -> Vec<String> {
    let Some(host) = host.filter(|host| !host.is_empty() && *host != "(null)") else {
        return Vec::new();
    };
    let mut strikes = Vec::new();
    let mut notes = Vec::new();
    if state.name() == "NODE_FAIL" {
        let strike = |failed: &str| Strike {
            source: Source::SlurmNodeFail,
            detail: format!("SLURM ended {job} NODE_FAIL: node {failed} failed"),
        };
        match down {
            [] => strikes.push(Strike {
                source: Source::SlurmNodeFail,
                detail: format!("SLURM ended {job} NODE_FAIL"),
            }),
            [only] if *only == host => strikes.push(strike(only)),
            failed => {
                for failed in failed {
                    // The job's step loop strikes a node it saw fail itself (its instances
                    // there stopped answering): once per job is enough.
                    if !struck_by(node, failed, job) {
                        notes.extend(health::record(node, failed, &[strike(failed)], Some(job)));
                    }
                }
            }
        }
    }
    match health::attribute(dir, Some(submitted)) {
        Ok(found) => {
            strikes.extend(found.strikes);
            notes.extend(found.passed_over);
        }
        Err(error) => {
            notes.push(format!("the health ledger: reading {}: {error}", dir.display()));
            return notes;
        }
    }
    notes.extend(health::record(node, host, &strikes, Some(job)));
    notes
}
