//! Where a run's commands run: in the node's container (every command from the PR's tree, on
//! a GPU node), or on the host (trusted trees only: the tests and the demo).
//!
//! A command is described once ([`Command`]) with the paths *as it sees them*
//! ([`Exec::tree_view`], [`Exec::out_view`], [`Exec::checkpoint_view`]): on the host these are
//! the host paths; in a container the tree is [`TREE_DIR`], the step's output directory
//! [`OUT_DIR`] and the checkpoints under [`crate::container::MODELS_DIR`]. A server in a
//! container listens on a port of its container on its side's internal network (base's and
//! the PR's are two: no route off either, nor from one to the other), where prgate's own
//! clients on the host (health, the built-in evaluator and benchmark) reach it at the
//! container's address; a command that talks to it (serving tests, an external evaluator or
//! benchmark) runs in a container that joins the server container's network namespace and
//! reaches it on its own loopback at the same port. Every other container has no network at
//! all.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use prgate_gate::evidence::NotRunReason;

use super::StepFailure;
use super::leftovers::Entry;
use super::server::with_log_tail;
use crate::container::{
    self, Container, ContainerEnv, ContainerNetwork, ContainerRequest, DEFAULT_SHM_GIB, Engine,
    EnvError, GATEWAY_HINT, GatewayCheck, NetworkSide, OUT_DIR, RunId, TREE_DIR,
};
use crate::node::NodeProfile;
use crate::process::{
    ChildGroup, DEFAULT_GRACE, Environment, Finished, Limits, ProcessSpec, StallLimit,
};
use crate::recipe::Recipe;

/// Where a side's `pip install --user` goes, inside its tree.
const USER_BASE: &str = ".prgate-user";

/// Where commands run.
#[derive(Debug, Clone)]
pub enum Isolation {
    /// On the host, as the runner's children. Only for trees you trust: nothing isolates them.
    Host,
    /// In the node profile's image, through a container engine; `run` names the run's
    /// containers (it stays the same when a run resumes, so that a killed attempt's containers
    /// are found and removed).
    Container { engine: Engine, run: RunId },
}

/// One command to run.
pub(super) struct Command<'a> {
    /// The argv, paths as the command sees them.
    pub argv: Vec<String>,
    /// The side's tree (host path): the working directory.
    pub tree: &'a Path,
    /// The step's output directory (host path).
    pub out: &'a Path,
    /// Variables on top of the side's ([`Exec::side_env`]).
    pub env: Vec<(String, String)>,
    /// The node's dataset cache (host path), read-only for the command: what prgate fetched
    /// for a gated benchmark. No command gets a secret; this is what a gated one gets instead.
    pub datasets: Option<&'a Path>,
    /// The log of its output (host path).
    pub log: PathBuf,
    pub timeout: Duration,
    /// The node's GPUs it gets.
    pub gpus: &'a [u32],
    /// What it is for, unique among the run's live containers (`kimi_k3-pr-unit-tests`).
    pub purpose: String,
    /// The server whose network it joins, when it talks to one.
    pub server: Option<&'a str>,
}

/// A server's process: the runner's child, or a container.
#[derive(Debug)]
pub(super) enum ServerProcess {
    Host(ChildGroup),
    Container(Box<Container>),
}

impl ServerProcess {
    /// The process group the health gate watches (the engine client's for a container).
    pub(super) fn group(&mut self) -> &mut ChildGroup {
        match self {
            ServerProcess::Host(group) => group,
            ServerProcess::Container(container) => container.client(),
        }
    }

    /// Stops the server (its group, or its container); errors are the drop's to ignore too.
    pub(super) fn stop(&mut self) {
        match self {
            ServerProcess::Host(group) => {
                let _ = group.stop();
            }
            ServerProcess::Container(container) => {
                let _ = container.stop();
            }
        }
    }

    /// Freezes the server while it is idle (`paused`), so that it does nothing (no GPU or CPU
    /// work, no request to the other side's server) while the other side is measured: its
    /// container paused, or its process group stopped (`SIGSTOP`); or thaws it again.
    /// Stopping it thaws it first.
    pub(super) fn set_paused(&mut self, paused: bool) -> Result<(), StepFailure> {
        let done = match (self, paused) {
            (ServerProcess::Host(group), true) => group.freeze().map_err(|e| e.to_string()),
            (ServerProcess::Host(group), false) => group.thaw().map_err(|e| e.to_string()),
            (ServerProcess::Container(container), true) => {
                container.pause().map_err(|e| e.to_string())
            }
            (ServerProcess::Container(container), false) => {
                container.resume().map_err(|e| e.to_string())
            }
        };
        let what = if paused { "pausing the idle server" } else { "resuming the server" };
        done.map_err(|detail| StepFailure::crash(format!("{what}: {detail}")))
    }

    /// The container's name, for commands that join its network.
    pub(super) fn container(&self) -> Option<&str> {
        match self {
            ServerProcess::Host(_) => None,
            ServerProcess::Container(container) => Some(container.name()),
        }
    }
}

/// A server to start.
pub(super) struct ServerCommand<'a> {
    pub argv: Vec<String>,
    pub tree: &'a Path,
    pub out: &'a Path,
    pub env: Vec<(String, String)>,
    pub log: PathBuf,
    pub gpus: &'a [u32],
    pub purpose: String,
    /// The port it listens on, as it sees it.
    pub port: u16,
    /// The side it serves: in a container, the network it is on is that side's alone.
    pub side: NetworkSide,
    /// How long it may take to have its address on its side's network.
    pub startup: Duration,
}

/// What a command's container is made of, whatever it is.
struct Shape<'a> {
    purpose: &'a str,
    datasets: Option<&'a Path>,
    gpus: &'a [u32],
    tree: &'a Path,
    out: &'a Path,
    argv: &'a [String],
    log: &'a Path,
}

/// Runs commands as the isolation says.
#[derive(Clone, Copy)]
pub(super) struct Exec<'a> {
    pub isolation: &'a Isolation,
    pub node: &'a NodeProfile,
    /// Where live process groups are written down.
    pub processes: &'a Path,
    /// The Python interpreter on the host (in a container: the image's `python3`).
    pub python: &'a Path,
    /// How long a command may go without progress (its log and output folder unchanged)
    /// before it is stopped: the recipe's `timeouts.stall` of the model whose steps run.
    pub stall: StallLimit,
}

impl Exec<'_> {
    fn contained(&self) -> Option<(&Engine, &RunId)> {
        match self.isolation {
            Isolation::Host => None,
            Isolation::Container { engine, run } => Some((engine, run)),
        }
    }

    /// The tree as a command sees it.
    pub(super) fn tree_view(&self, tree: &Path) -> String {
        match self.contained() {
            None => tree.display().to_string(),
            Some(_) => TREE_DIR.to_owned(),
        }
    }

    /// `out/<file>` as a command sees it (`file` may be empty: the directory).
    pub(super) fn out_view(&self, out: &Path, file: &str) -> String {
        let path = match self.contained() {
            None => out.join(file),
            Some(_) => Path::new(OUT_DIR).join(file),
        };
        path.display().to_string().trim_end_matches('/').to_owned()
    }

    /// The recipe's checkpoint as a command sees it (empty when the node has none).
    pub(super) fn checkpoint_view(&self, recipe: &Recipe) -> String {
        match self.contained() {
            None => self
                .node
                .checkpoint_path(recipe.checkpoint())
                .map(|path| path.display().to_string())
                .unwrap_or_default(),
            Some(_) => container::container_checkpoint_path(self.node, recipe.checkpoint())
                .unwrap_or_default(),
        }
    }

    /// A folder of the node's dataset cache `datasets` (host path) as a command sees it:
    /// below [`container::DATASETS_DIR`] in a container.
    pub(super) fn dataset_view(&self, datasets: &Path, folder: &Path) -> String {
        match self.contained() {
            None => folder.display().to_string(),
            Some(_) => Path::new(container::DATASETS_DIR)
                .join(folder.strip_prefix(datasets).unwrap_or(folder))
                .display()
                .to_string(),
        }
    }

    /// The Python interpreter a command names.
    pub(super) fn python(&self) -> String {
        match self.contained() {
            None => self.python.display().to_string(),
            Some(_) => "python3".to_owned(),
        }
    }

    /// The variables of every command of a side: no bytecode written into the tree, and
    /// Python's user site inside the tree, so that an install with `pip install --user` belongs
    /// to that side alone (on the host, its `bin` first on `PATH`, and the running prgate's
    /// folder last, so that a trusted recipe can name `prgate` as a container's would; a
    /// container keeps its image's `PATH`).
    pub(super) fn side_env(&self, tree: &Path) -> Vec<(String, String)> {
        let user_base = Path::new(&self.tree_view(tree)).join(USER_BASE).display().to_string();
        let mut env = vec![
            ("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned()),
            ("PYTHONUSERBASE".to_owned(), user_base.clone()),
        ];
        if self.contained().is_none() {
            let mut path = format!("{user_base}/bin");
            if let Some(inherited) = Environment::minimal().get("PATH") {
                path.push(':');
                path.push_str(&inherited.to_string_lossy());
            }
            if let Some(dir) = super::own_folder() {
                path.push(':');
                path.push_str(&dir);
            }
            env.push(("PATH".to_owned(), path));
        }
        env
    }

    /// Runs `command` to its end and returns its exit status; a timeout or a failure to start
    /// is the step's failure.
    pub(super) fn run(&self, command: &Command<'_>) -> Result<ExitStatus, StepFailure> {
        // Progress is the command's log growing or a file of its output folder written.
        let limits = Limits {
            timeout: command.timeout,
            stall: Some((self.stall, vec![command.log.clone(), command.out.to_path_buf()])),
        };
        let finished = match self.contained() {
            None => self.run_on_host(command, &limits),
            Some((engine, run)) => self.run_in_container(engine, run, command, &limits),
        };
        // The command has ended (or never started): what it printed is redacted before anyone
        // reads it.
        let _unredacted = crate::redact::redact_log(&command.log);
        self.ended(command, finished?)
    }

    /// Runs `command` as a process group on the host.
    fn run_on_host(&self, command: &Command<'_>, limits: &Limits) -> Result<Finished, StepFailure> {
        let mut spec = ProcessSpec::new(
            command.argv.iter().map(OsString::from),
            command.tree,
            command.log.clone(),
        );
        spec.env = host_environment(&command.env);
        if let Some(datasets) = command.datasets {
            spec.env =
                spec.env.set("HF_DATASETS_OFFLINE", "1").set("HF_HUB_CACHE", datasets.join("hub"));
        }
        let mut group =
            ChildGroup::spawn(&spec).map_err(|error| StepFailure::crash(error.to_string()))?;
        let _entry = Entry::write(self.processes, group.id());
        let finished = group.wait_with_limits(limits);
        // Stopped before it is crossed out, whatever the wait gave.
        drop(group);
        finished.map_err(|error| StepFailure::other(&error))
    }

    /// Runs `command` in a container of the run.
    fn run_in_container(
        &self,
        engine: &Engine,
        run: &RunId,
        command: &Command<'_>,
        limits: &Limits,
    ) -> Result<Finished, StepFailure> {
        let env = self
            .container_env(&command.env)
            .map_err(|error| StepFailure::crash(error.to_string()))?;
        let shape = Shape {
            purpose: &command.purpose,
            datasets: command.datasets,
            gpus: command.gpus,
            tree: command.tree,
            out: command.out,
            argv: &command.argv,
            log: &command.log,
        };
        let network = match command.server {
            Some(server) => ContainerNetwork::JoinedTo(server),
            None => ContainerNetwork::None,
        };
        let request = self.request(run, &shape, &env, network);
        let launch =
            engine.launch(&request).map_err(|error| StepFailure::crash(error.to_string()))?;
        let mut container = Container::start(engine, &launch)
            .map_err(|error| StepFailure::crash(error.to_string()))?;
        let _entry = Entry::write(self.processes, container.client().id());
        let finished = container.wait_with_limits(limits);
        drop(container);
        finished.map_err(|error| StepFailure::other(&error))
    }

    /// The exit status of a command that ended, or why one that was stopped, or that the engine
    /// could not run, gave no evidence.
    fn ended(&self, command: &Command<'_>, finished: Finished) -> Result<ExitStatus, StepFailure> {
        match finished {
            Finished::Exited(status) if self.contained().is_some() && engine_refused(status) => {
                Err(StepFailure::new(
                    NotRunReason::Crash,
                    with_log_tail(
                        format!("the container engine could not run the command ({status})"),
                        &command.log,
                    ),
                ))
            }
            Finished::Exited(status) => Ok(status),
            Finished::TimedOut(_stopped) => Err(StepFailure::new(
                NotRunReason::Timeout,
                with_log_tail(
                    format!("stopped at its time limit of {:?}", command.timeout),
                    &command.log,
                ),
            )),
            Finished::Stalled { silent, .. } => Err(StepFailure::new(
                NotRunReason::Stalled,
                with_log_tail(
                    format!(
                        "stopped after {silent:?} without progress (no new output in its log, no file written in its output folder), before its time limit of {:?}",
                        command.timeout
                    ),
                    &command.log,
                ),
            )),
        }
    }

    /// Starts a server; returns its process and the address prgate reaches it at.
    pub(super) fn start_server(
        &self,
        command: &ServerCommand<'_>,
    ) -> Result<(ServerProcess, String), StepFailure> {
        let crash = StepFailure::crash;
        match self.contained() {
            None => {
                let mut spec = ProcessSpec::new(
                    command.argv.iter().map(OsString::from),
                    command.tree,
                    command.log.clone(),
                );
                spec.env = host_environment(&command.env)
                    .set("HIP_VISIBLE_DEVICES", gpu_list(command.gpus));
                let group = ChildGroup::spawn(&spec).map_err(|error| crash(error.to_string()))?;
                let url = format!("http://127.0.0.1:{}", command.port);
                Ok((ServerProcess::Host(group), url))
            }
            Some((engine, run)) => {
                let env =
                    self.container_env(&command.env).map_err(|error| crash(error.to_string()))?;
                let shape = Shape {
                    purpose: &command.purpose,
                    datasets: None,
                    gpus: command.gpus,
                    tree: command.tree,
                    out: command.out,
                    argv: &command.argv,
                    log: &command.log,
                };
                // A side's network is made with its first server (and taken as it is when a
                // resumed run finds it); the run's cleanup removes both sides'.
                let other = |detail: String| StepFailure::new(NotRunReason::Other, detail);
                let network = engine
                    .create_side_network(run, command.side)
                    .map_err(|error| other(error.to_string()))?;
                self.check_gateway(engine, run, command)?;
                let request = self.request(run, &shape, &env, ContainerNetwork::Side(command.side));
                let launch = engine.launch(&request).map_err(|error| crash(error.to_string()))?;
                let mut container =
                    Container::start(engine, &launch).map_err(|error| crash(error.to_string()))?;
                let address = container
                    .wait_address(&network, command.startup)
                    .map_err(|error| crash(error.to_string()))?;
                let url = match address {
                    std::net::IpAddr::V4(v4) => format!("http://{v4}:{}", command.port),
                    std::net::IpAddr::V6(v6) => format!("http://[{v6}]:{}", command.port),
                };
                Ok((ServerProcess::Container(Box::new(container)), url))
            }
        }
    }

    /// Fails closed unless the host is proven closed to the server's side's network (the
    /// gateway check, `docs/container.md`, "Network"): a probe container on it, before the
    /// server starts. An open gateway, or a check that cannot tell, is the node's failure:
    /// every step that needs the server is not run, with the firewall rule that fixes it.
    fn check_gateway(
        &self,
        engine: &Engine,
        run: &RunId,
        command: &ServerCommand<'_>,
    ) -> Result<(), StepFailure> {
        let node = |detail: String| {
            StepFailure::new(NotRunReason::Node, format!("{detail}\n{GATEWAY_HINT}"))
        };
        let purpose = format!("{}-gateway-probe", command.purpose);
        let log = command.out.join("gateway-probe.log");
        let env = ContainerEnv::new(self.node);
        let shape = Shape {
            purpose: &purpose,
            datasets: None,
            gpus: &[],
            tree: command.tree,
            out: command.out,
            argv: &[],
            log: &log,
        };
        let probe = self.request(run, &shape, &env, ContainerNetwork::Side(command.side));
        match engine.check_gateway(&probe) {
            Ok(GatewayCheck::Closed { .. }) => Ok(()),
            Ok(open @ GatewayCheck::Open { .. }) => {
                Err(node(format!("the node is not isolated: {open}")))
            }
            Err(error) => Err(node(format!(
                "the node's isolation cannot be checked, so no server starts on the {} side's network: {error}",
                command.side
            ))),
        }
    }

    /// Removes every container of the run (a killed earlier attempt's, or this one's left
    /// behind), then the run's networks (both sides'); returns a note for each container
    /// removed, and for what could not be removed.
    pub(super) fn remove_leftovers(&self) -> Vec<String> {
        let Some((engine, run)) = self.contained() else { return Vec::new() };
        let mut notes: Vec<String> = match engine.remove_run(run) {
            Ok(removed) => removed
                .into_iter()
                .map(|id| format!("removed container {id} left by an earlier run of {run}"))
                .collect(),
            Err(error) => vec![format!("could not remove the run's containers: {error}")],
        };
        if let Err(error) = engine.remove_run_networks(run) {
            notes.push(format!("could not remove the run's networks: {error}"));
        }
        notes
    }

    /// The container request of one command.
    fn request<'r>(
        &'r self,
        run: &'r RunId,
        shape: &Shape<'r>,
        env: &'r ContainerEnv,
        network: ContainerNetwork<'r>,
    ) -> ContainerRequest<'r> {
        ContainerRequest {
            node: self.node,
            run,
            purpose: shape.purpose,
            labels: &[],
            gpus: shape.gpus,
            tree: shape.tree,
            out: shape.out,
            env,
            network,
            datasets: shape.datasets,
            shm_gib: DEFAULT_SHM_GIB,
            command: shape.argv,
            log: shape.log,
            grace: DEFAULT_GRACE,
        }
    }

    /// A command's container environment: `env` and nothing else. No secret is ever let in
    /// (`ContainerEnv::allow_secret` is not called): a command a PR names never gets one.
    fn container_env(&self, env: &[(String, String)]) -> Result<ContainerEnv, EnvError> {
        let mut container_env = ContainerEnv::new(self.node);
        for (name, value) in env {
            container_env = container_env.set(name, value)?;
        }
        Ok(container_env)
    }
}

/// The host environment of a command: the minimal one and `env`; never a secret.
fn host_environment(env: &[(String, String)]) -> Environment {
    let mut environment = Environment::minimal();
    for (name, value) in env {
        environment = environment.set(name, value);
    }
    environment
}

/// Exit statuses with which an engine says it could not run the command at all: 125 (the
/// engine refused), 126 (not executable), 127 (not found).
fn engine_refused(status: ExitStatus) -> bool {
    matches!(status.code(), Some(125..=127))
}

/// `HIP_VISIBLE_DEVICES`' value for `gpus`: `0,1,2`.
fn gpu_list(gpus: &[u32]) -> String {
    gpus.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}
