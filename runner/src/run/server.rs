//! A model's server for one side: started from the recipe on a leased port, let through the
//! health gate, and read for routing lines. Stopping it is dropping it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use prgate_gate::evidence::{NotRunReason, Outcome};

use super::leftovers::Entry;
use crate::node::NodeProfile;
use crate::process::{
    ChildGroup, Environment, HealthError, PortLease, PortRange, ProcessSpec, tail, wait_healthy,
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
    pub port: u16,
}

/// How one side's server is started.
#[derive(Debug, Clone)]
pub(super) struct Launch<'a> {
    /// The tree it runs in (installed).
    pub tree: &'a Path,
    /// Monokernels on (the flag appended) or off (SGLang's own path).
    pub monokernel: bool,
    /// The GPUs it may use, as `HIP_VISIBLE_DEVICES` counts them.
    pub gpus: &'a [u32],
    /// The side's environment (without the GPUs).
    pub env: Environment,
    /// Its log; a restarted server appends to it.
    pub log: PathBuf,
}

/// `HIP_VISIBLE_DEVICES`' value for `gpus`: `0,1,2`.
fn gpu_list(gpus: &[u32]) -> String {
    gpus.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// Why a server is not serving: what the steps that needed it record.
#[derive(Debug, Clone)]
pub(super) struct ServerFailure {
    pub reason: NotRunReason,
    pub detail: String,
}

impl Server {
    /// Starts the recipe's server as `launch` says and waits until it is healthy, for at most
    /// `startup_limit` (the recipe's startup timeout, or less when the run's time runs out).
    pub(super) fn start(
        recipe: &Recipe,
        node: &NodeProfile,
        launch: &Launch<'_>,
        startup_limit: Duration,
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
        let argv =
            recipe.server_command(ServerSide { monokernel: launch.monokernel }, port, &checkpoint);
        let mut spec = ProcessSpec::new(argv, launch.tree, launch.log.clone());
        spec.env = launch.env.clone().set("HIP_VISIBLE_DEVICES", gpu_list(launch.gpus));
        let mut group = ChildGroup::spawn(&spec).map_err(|error| ServerFailure {
            reason: NotRunReason::Crash,
            detail: error.to_string(),
        })?;
        let entry = Entry::write(processes, group.id());
        let url = format!("http://127.0.0.1:{port}");
        let health = format!("{url}{}", recipe.server().health_path);
        match wait_healthy(&health, startup_limit, &mut group) {
            Ok(_healthy) => Ok(Server { group, _entry: entry, _lease: lease, url, port }),
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

    /// Whether the server's process has exited.
    pub(super) fn exited(&mut self) -> bool {
        !matches!(self.group.try_wait(), Ok(None))
    }

    /// The last lines of its log, or why they cannot be read.
    pub(super) fn log_tail(&self) -> String {
        tail(self.log(), TAIL_LINES)
            .unwrap_or_else(|error| format!("(the log cannot be read: {error})"))
    }
}

/// Whether the server log `log` has a line that matches the routing `pattern` (checked by the
/// recipe). A side's log holds every start of its server.
pub(super) fn routing(log: &Path, pattern: &str) -> Outcome {
    routing_in(log, pattern)
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
