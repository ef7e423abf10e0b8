//! A model's server for one side: started from the recipe on a leased port, let through the
//! health gate, and read for routing lines. Stopping it is dropping it.

use std::path::{Path, PathBuf};

use prgate_gate::evidence::{NotRunReason, Outcome};

use super::leftovers::Entry;
use crate::node::NodeProfile;
use crate::process::{
    ChildGroup, HealthError, PortLease, PortRange, ProcessSpec, tail, wait_healthy,
};
use crate::recipe::{Recipe, ServerSide};

/// How many lines of a log a `not-run` record's detail carries.
pub(super) const TAIL_LINES: usize = 40;

/// A healthy server. Dropping it stops its process group and lets its port go.
#[derive(Debug)]
pub(super) struct Server {
    group: ChildGroup,
    /// Crossed out once the group is stopped: declared after it, so dropped after it.
    _entry: Entry,
    _lease: PortLease,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
}

/// Why a server is not serving: what the steps that needed it record.
#[derive(Debug, Clone)]
pub(super) struct ServerFailure {
    pub reason: NotRunReason,
    pub detail: String,
}

impl Server {
    /// Starts the recipe's server in `tree` with the monokernels on or off, its output in `log`,
    /// and waits until it is healthy.
    pub(super) fn start(
        recipe: &Recipe,
        node: &NodeProfile,
        tree: &Path,
        monokernel: bool,
        log: PathBuf,
        processes: &Path,
    ) -> Result<Server, ServerFailure> {
        let other = |detail: String| ServerFailure { reason: NotRunReason::Other, detail };
        let range = match node.ports() {
            Some(ports) => PortRange::new(*ports.start(), *ports.end())
                .map_err(|error| other(error.to_string()))?,
            None => PortRange::DEFAULT,
        };
        let lease = PortLease::acquire(&node.cache_dir().join("ports"), range)
            .map_err(|error| other(error.to_string()))?;
        let port = lease.port();
        let checkpoint = node
            .checkpoint_path(recipe.checkpoint())
            .map(|path| path.display().to_string())
            .unwrap_or_default();
        let argv = recipe.server_command(ServerSide { monokernel }, port, &checkpoint);
        let spec = ProcessSpec::new(argv, tree, log);
        let mut group = ChildGroup::spawn(&spec).map_err(|error| ServerFailure {
            reason: NotRunReason::Crash,
            detail: error.to_string(),
        })?;
        let entry = Entry::write(processes, group.id());
        let url = format!("http://127.0.0.1:{port}");
        let health = format!("{url}{}", recipe.server().health_path);
        match wait_healthy(&health, recipe.server().startup_timeout, &mut group) {
            Ok(_healthy) => Ok(Server { group, _entry: entry, _lease: lease, url }),
            Err(error) => {
                drop(group);
                drop(entry);
                let reason = match error {
                    HealthError::Exited { .. } => NotRunReason::Crash,
                    HealthError::TimedOut { .. } => NotRunReason::Timeout,
                    HealthError::Process(_) => NotRunReason::Other,
                };
                Err(ServerFailure { reason, detail: error.to_string() })
            }
        }
    }

    /// The server's log.
    pub(super) fn log(&self) -> &Path {
        self.group.log()
    }

    /// The last lines of its log, or why they cannot be read.
    pub(super) fn log_tail(&self) -> String {
        tail(self.log(), TAIL_LINES)
            .unwrap_or_else(|error| format!("(the log cannot be read: {error})"))
    }

    /// Whether its log has a line that matches the routing `pattern` (checked by the recipe).
    pub(super) fn routing(&self, pattern: &str) -> Outcome {
        routing_in(self.log(), pattern)
    }
}

/// The first line of `log` that matches `pattern`, as a routing outcome.
fn routing_in(log: &Path, pattern: &str) -> Outcome {
    let Ok(regex) = regex::Regex::new(pattern) else {
        return Outcome::Routing { routed: false, line: None };
    };
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let line = text.lines().find(|line| regex.is_match(line)).map(str::to_owned);
    Outcome::Routing { routed: line.is_some(), line }
}
