//! A side's topology brought up and down: every instance of every role on its node(s), each
//! health-gated, then the router once all are healthy, itself health-gated; the steps reach
//! the model through the router. Stopping it (dropping the [`Deployment`]) stops the router,
//! then every instance, so that nothing is left on any node before the other side's topology
//! starts on the same nodes.
//!
//! **Where the instances go** ([`Placement`]): inside a SLURM allocation of several nodes
//! (`SLURM_JOB_ID`, `SLURM_JOB_NODELIST`), each instance gets nodes of its own in the
//! allocation's order (the router and the step loop stay on the batch node) and is started
//! there with `srun --overlap --nodes=1 --ntasks=1 --nodelist=NODE`, one job step per instance
//! and node, with its own leased port; elsewhere, every instance runs on this node on GPUs of
//! its own (the node must have them all). A failure names the role, the instance and the node.
//!
//! What it leaves to others: the recipe's topology keys (`crate::recipe::topology`), the steps
//! that use the router (`super::steps`), the required log lines' check ([`routing`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use prgate_gate::evidence::{NotRunReason, Outcome};

use super::StepFailure;
use super::exec::{Exec, ServerCommand, ServerProcess};
use super::leftovers::Entry;
use super::server::{Launch, Ports, TAIL_LINES, unhealthy};
use crate::process::{ChildGroup, PortLease, ProcessError, ProcessSpec, tail, wait_healthy};
use crate::recipe::Recipe;
use crate::recipe::topology::{InstanceArgs, Role, RoleKind, Router, Topology, router_workers};

/// The nodes a side's instances run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Placement {
    /// Every instance on this node.
    Local,
    /// Inside the SLURM job `job`, on its nodes: `(name, address)`, the batch node first.
    Slurm { job: String, nodes: Vec<(String, String)> },
}

impl Placement {
    /// Where `topology` goes: the SLURM allocation this runs in when it has more than one
    /// node, else this node.
    pub(super) fn find(topology: &Topology) -> Result<Placement, PlacementError> {
        let (Ok(job), Ok(list)) =
            (std::env::var("SLURM_JOB_ID"), std::env::var("SLURM_JOB_NODELIST"))
        else {
            return Ok(Placement::Local);
        };
        let names = scontrol(&["show", "hostnames", &list])?;
        let names: Vec<String> =
            names.lines().map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned).collect();
        if names.len() <= 1 {
            return Ok(Placement::Local);
        }
        let wanted = usize::try_from(topology.nodes()).unwrap_or(usize::MAX);
        if names.len() < wanted {
            return Err(PlacementError::TooFewNodes { wanted, job, names });
        }
        let mut nodes = Vec::new();
        for name in names {
            let record = scontrol(&["show", "node", &name, "--oneliner"])?;
            let address = record
                .split_whitespace()
                .find_map(|field| field.strip_prefix("NodeAddr="))
                .unwrap_or(&name)
                .to_owned();
            nodes.push((name, address));
        }
        Ok(Placement::Slurm { job, nodes })
    }
}

/// Why a topology has no place in the SLURM job it runs in.
#[derive(Debug, thiserror::Error)]
pub(super) enum PlacementError {
    #[error(transparent)]
    Scontrol(#[from] ScontrolError),
    #[error("the topology takes {wanted} nodes; the SLURM job {job} has {} ({})", names.len(), names.join(", "))]
    TooFewNodes { wanted: usize, job: String, names: Vec<String> },
}

/// A question to SLURM's `scontrol` that got no answer.
#[derive(Debug, thiserror::Error)]
pub(super) enum ScontrolError {
    #[error("cannot run scontrol {args}: {source}")]
    Start { args: String, source: std::io::Error },
    #[error("scontrol {args} failed ({status}): {stderr}")]
    Failed { args: String, status: std::process::ExitStatus, stderr: String },
}

/// `scontrol ARGS`' output (the `PATH`'s, with the job's `SLURM_CONF`).
fn scontrol(args: &[&str]) -> Result<String, ScontrolError> {
    #[expect(
        clippy::disallowed_methods,
        reason = "SLURM's scontrol, prgate's own query of the job's nodes"
    )]
    let output = std::process::Command::new("scontrol")
        .args(args)
        .output()
        .map_err(|source| ScontrolError::Start { args: args.join(" "), source })?;
    if !output.status.success() {
        return Err(ScontrolError::Failed {
            args: args.join(" "),
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// One node's share of one instance, up and healthy.
#[derive(Debug)]
struct Member {
    /// `decode instance 0 on pn3`, for every message about it.
    name: String,
    process: Process,
    _entry: Entry,
    log: PathBuf,
}

#[derive(Debug)]
enum Process {
    /// On this node: the runner's child, or a container.
    Here(ServerProcess),
    /// On another node of the allocation: its `srun`.
    Remote(ChildGroup),
}

impl Process {
    fn group(&mut self) -> &mut ChildGroup {
        match self {
            Process::Here(process) => process.group(),
            Process::Remote(group) => group,
        }
    }

    fn stop(&mut self) {
        match self {
            Process::Here(process) => process.stop(),
            Process::Remote(group) => {
                let _ = group.stop();
            }
        }
    }
}

/// A side's topology, up: dropping it stops the router, then every instance.
#[derive(Debug)]
pub(super) struct Deployment {
    router: Option<Member>,
    members: Vec<Member>,
    _leases: Vec<PortLease>,
    /// Where the steps reach the model: the router's URL (or the one instance's).
    pub url: String,
    pub port: u16,
    /// The router's container, when it runs in one (commands that talk to it join it).
    pub container: Option<String>,
}

impl Drop for Deployment {
    fn drop(&mut self) {
        if let Some(router) = &mut self.router {
            router.process.stop();
        }
        for member in self.members.iter_mut().rev() {
            member.process.stop();
        }
        for log in self.logs() {
            let _unredacted = crate::redact::redact_log(&log);
        }
    }
}

impl Deployment {
    /// Every log of the deployment.
    fn logs(&self) -> Vec<PathBuf> {
        self.router.iter().chain(&self.members).map(|member| member.log.clone()).collect()
    }

    /// Whether any of its processes has exited; the first one's name.
    pub(super) fn exited(&mut self) -> Option<String> {
        self.router.iter_mut().chain(self.members.iter_mut()).find_map(|member| {
            let exited = !matches!(member.process.group().try_wait(), Ok(None));
            exited.then(|| member.name.clone())
        })
    }

    /// The last lines of the router's log.
    pub(super) fn log_tail(&self) -> String {
        self.router
            .as_ref()
            .map_or_else(String::new, |router| tail(&router.log, TAIL_LINES).unwrap_or_default())
    }
}

/// How a side's topology starts: the recipe, where, and the side's launch.
pub(super) struct Bring<'a> {
    pub recipe: &'a Recipe,
    pub topology: &'a Topology,
    pub exec: &'a Exec<'a>,
    pub launch: &'a Launch<'a>,
    pub startup: Duration,
}

impl Bring<'_> {
    /// Starts every instance, waits until each is healthy, then the router; stops what it
    /// started when anything fails (dropping the part-built [`Deployment`]).
    pub(super) fn up(&self) -> Result<Deployment, StepFailure> {
        let started = Instant::now();
        let placement = self.placement()?;
        let mut layout = Layout {
            placement: &placement,
            ports: Ports::of(self.exec.node)?,
            node_gpus: self.exec.node.gpus().iter().map(|gpu| gpu.id).collect(),
            next_gpu: 0,
            next_node: 0,
        };
        let mut deployment = Deployment {
            router: None,
            members: Vec::new(),
            _leases: Vec::new(),
            url: String::new(),
            port: 0,
            container: None,
        };
        let mut workers: Vec<(RoleKind, String, u16)> = Vec::new();
        for role in self.topology.roles() {
            for instance in 0..role.instances {
                let left = self.startup.saturating_sub(started.elapsed());
                let up = self.start_instance(role, instance, left, &mut layout, &mut deployment)?;
                workers.push((role.kind, up.url.clone(), up.bootstrap_port));
                if self.topology.router().is_none() {
                    deployment.url = up.url;
                    deployment.port = up.port;
                }
            }
        }
        if let Some(router) = self.topology.router() {
            self.start_router(router, &mut layout, &workers, &mut deployment)?;
        }
        Ok(deployment)
    }

    /// Where the topology goes; across nodes only with `--isolation host`.
    fn placement(&self) -> Result<Placement, StepFailure> {
        let node = |detail: String| StepFailure { reason: NotRunReason::Node, detail };
        let placement = Placement::find(self.topology).map_err(|error| node(error.to_string()))?;
        if let (Placement::Slurm { .. }, super::Isolation::Container { .. }) =
            (&placement, self.exec.isolation)
        {
            return Err(node("a topology across nodes runs with --isolation host only: containers on different nodes have no network between them here (docs/topology.md)".to_owned()));
        }
        Ok(placement)
    }

    /// Starts instance `instance` of `role` on its node(s), one member per node rank, and waits
    /// up to `left` until its rank 0 answers.
    fn start_instance(
        &self,
        role: &Role,
        instance: u32,
        left: Duration,
        layout: &mut Layout<'_>,
        deployment: &mut Deployment,
    ) -> Result<InstanceUp, StepFailure> {
        let port_lease = layout.ports.lease()?;
        let port = port_lease.port();
        let bootstrap_lease =
            if role.kind == RoleKind::Prefill { Some(layout.ports.lease()?) } else { None };
        let bootstrap_port = bootstrap_lease.as_ref().map_or(0, PortLease::port);
        deployment._leases.push(port_lease);
        deployment._leases.extend(bootstrap_lease);
        let instance_nodes = layout.nodes_for(role);
        let checkpoint = self.exec.checkpoint_view(self.recipe);
        let rank0 = format!("{}:{}", instance_nodes[0].1, port.wrapping_add(1));
        let mut url = String::new();
        for (rank, (node, address)) in instance_nodes.iter().enumerate() {
            let rank = u32::try_from(rank).unwrap_or(u32::MAX);
            let args = InstanceArgs {
                port,
                checkpoint: &checkpoint,
                host: address,
                bootstrap_port,
                nnodes: role.nodes,
                node_rank: rank,
                dist_init_addr: &rank0,
            };
            let (member, member_url) = self.start_member(role, instance, &args, node, layout)?;
            if rank == 0 {
                url = member_url;
            }
            deployment.members.push(member);
        }
        // The instance answers on its rank 0.
        let health = format!("{url}{}", role.health_path);
        let rank0_at = deployment.members.len() - instance_nodes.len();
        if let Err(failure) = healthy(&health, left, &mut deployment.members[rank0_at]) {
            return Err(match (layout.placement, instance_nodes.first()) {
                (Placement::Slurm { job, .. }, Some((node, address))) => {
                    self.node_failure(failure, job, node, address)
                }
                _ => failure,
            });
        }
        Ok(InstanceUp { url, port, bootstrap_port })
    }

    /// Starts one node's rank of an instance: on this node on GPUs of its own, or on `node` of
    /// the SLURM job; returns it with the URL it answers at.
    fn start_member(
        &self,
        role: &Role,
        instance: u32,
        args: &InstanceArgs<'_>,
        node: &str,
        layout: &mut Layout<'_>,
    ) -> Result<(Member, String), StepFailure> {
        let (kind, rank) = (role.kind, args.node_rank);
        let (name, file) = if role.nodes > 1 {
            (
                format!("{kind} instance {instance} (rank {rank}) on {node}"),
                format!("{kind}-{instance}-rank{rank}.log"),
            )
        } else {
            (format!("{kind} instance {instance} on {node}"), format!("{kind}-{instance}.log"))
        };
        let failed = |reason: NotRunReason, problem: &dyn std::fmt::Display| StepFailure {
            reason,
            detail: format!("{name}: {problem}"),
        };
        let extra: &[String] =
            if self.launch.monokernel { self.recipe.server().monokernel_flag() } else { &[] };
        let argv = role.command(args, extra);
        let log = self.launch.log.parent().unwrap_or(self.launch.tree).join(file);
        let per_node = role.gpus_per_node() as usize;
        let (mut process, url) = match layout.placement {
            Placement::Local => {
                let Some(gpus) = layout.take_gpus(per_node) else {
                    let problem = format!(
                        "the topology needs {} GPUs on this node, which has {}",
                        self.topology.gpus(),
                        layout.node_gpus.len()
                    );
                    return Err(failed(NotRunReason::HardwareAbsent, &problem));
                };
                let purpose = format!("{}-{kind}-{instance}", self.launch.purpose);
                let command = self.command(argv, &log, &gpus, purpose, args.port);
                let (process, url) = self
                    .exec
                    .start_server(&command)
                    .map_err(|failure| failed(failure.reason, &failure.detail))?;
                (Process::Here(process), url)
            }
            Placement::Slurm { job, .. } => {
                let gpus = &layout.node_gpus[..per_node.min(layout.node_gpus.len())];
                let group = srun(job, node, gpus, &argv, self, &log)
                    .map_err(|error| failed(NotRunReason::Other, &error))?;
                (Process::Remote(group), format!("http://{}:{}", args.host, args.port))
            }
        };
        let entry = Entry::write(self.exec.processes, process.group().id());
        Ok((Member { name, process, _entry: entry, log }, url))
    }

    /// Starts the router over `workers` on this node and waits until it answers; the steps
    /// reach the model through it.
    fn start_router(
        &self,
        router: &Router,
        layout: &mut Layout<'_>,
        workers: &[(RoleKind, String, u16)],
        deployment: &mut Deployment,
    ) -> Result<(), StepFailure> {
        let (lease, metrics_lease) = (layout.ports.lease()?, layout.ports.lease()?);
        let port = lease.port();
        let metrics_port = metrics_lease.port();
        deployment._leases.extend([lease, metrics_lease]);
        // The router is the step loop's alone: on this node's loopback (under SLURM it
        // listens on every address of the batch node, where the step loop runs).
        let host = match layout.placement {
            Placement::Local => "127.0.0.1",
            Placement::Slurm { .. } => "0.0.0.0",
        };
        let argv = router.command([port, metrics_port], host, &router_workers(workers));
        let log = self.launch.log.clone();
        let name = "the router".to_owned();
        let purpose = format!("{}-router", self.launch.purpose);
        let command = self.command(argv, &log, &[], purpose, port);
        let (mut process, url) = self.exec.start_server(&command).map_err(|failure| {
            StepFailure { detail: format!("{name}: {}", failure.detail), ..failure }
        })?;
        let url = match layout.placement {
            Placement::Local => url,
            Placement::Slurm { .. } => format!("http://127.0.0.1:{port}"),
        };
        let entry = Entry::write(self.exec.processes, process.group().id());
        deployment.container = process.container().map(str::to_owned);
        let health = format!("{url}{}", router.health_path);
        let member = deployment.router.insert(Member {
            name,
            process: Process::Here(process),
            _entry: entry,
            log,
        });
        healthy(&health, router.startup_timeout, member)?;
        deployment.url = url;
        deployment.port = port;
        Ok(())
    }
}

/// An instance up: where it answers, and its bootstrap port (a prefill's; else 0).
struct InstanceUp {
    url: String,
    port: u16,
    bootstrap_port: u16,
}

/// What a bring-up has handed out so far: this node's GPUs and the allocation's nodes, each
/// in order; the first instance shares the batch node with the router and the step loop, and
/// each other instance has nodes of its own.
struct Layout<'p> {
    placement: &'p Placement,
    ports: Ports,
    node_gpus: Vec<u32>,
    next_gpu: usize,
    next_node: usize,
}

impl Layout<'_> {
    /// The next `role.nodes` nodes, `(name, address)`; this node alone when local.
    fn nodes_for(&mut self, role: &Role) -> Vec<(String, String)> {
        match self.placement {
            Placement::Local => vec![("this node".to_owned(), "127.0.0.1".to_owned())],
            Placement::Slurm { nodes, .. } => (0..role.nodes)
                .map(|_| {
                    let at = self.next_node % nodes.len();
                    self.next_node += 1;
                    nodes[at].clone()
                })
                .collect(),
        }
    }

    /// The next `count` GPUs of this node, when it has them.
    fn take_gpus(&mut self, count: usize) -> Option<Vec<u32>> {
        let gpus = self.node_gpus.get(self.next_gpu..self.next_gpu + count)?.to_vec();
        self.next_gpu += count;
        Some(gpus)
    }
}

/// Starts `argv` on `node` of the SLURM job `job` as a job step of its own (`srun`), its
/// output into `log`.
fn srun(
    job: &str,
    node: &str,
    gpus: &[u32],
    argv: &[String],
    bring: &Bring<'_>,
    log: &Path,
) -> Result<ChildGroup, ProcessError> {
    let visible: Vec<String> = gpus.iter().map(u32::to_string).collect();
    let mut words: Vec<String> = vec![
        "srun".into(),
        format!("--jobid={job}"),
        "--overlap".into(),
        "--nodes=1".into(),
        "--ntasks=1".into(),
        format!("--nodelist={node}"),
        "--kill-on-bad-exit=1".into(),
        "--quiet".into(),
        format!("--chdir={}", bring.launch.tree.display()),
        format!("--export=ALL,HIP_VISIBLE_DEVICES={}", visible.join(",")),
    ];
    words.extend(argv.iter().cloned());
    let mut spec = ProcessSpec::new(words, bring.launch.tree, log.to_path_buf());
    let mut env = crate::process::Environment::minimal();
    for (name, value) in &bring.launch.env {
        env = env.set(name, value);
    }
    // srun finds its cluster as the job's own commands do.
    for name in ["SLURM_CONF", "SLURM_JOB_ID"] {
        env = env.inherit(name);
    }
    spec.env = env;
    ChildGroup::spawn(&spec)
}

impl Bring<'_> {
    /// A server of the side's launch: `argv` on `port` and `gpus`, its output into `log`,
    /// whose folder is its output folder.
    fn command<'c>(
        &'c self,
        argv: Vec<String>,
        log: &'c Path,
        gpus: &'c [u32],
        purpose: String,
        port: u16,
    ) -> ServerCommand<'c> {
        ServerCommand {
            argv,
            tree: self.launch.tree,
            out: log.parent().unwrap_or(self.launch.tree),
            env: self.launch.env.clone(),
            log: log.to_path_buf(),
            gpus,
            purpose,
            port,
            side: self.launch.side,
            startup: self.startup,
        }
    }

    /// `failure` of an instance on `node` (at `address`) of the SLURM job `job`, as the node's
    /// when the node's slurmd does not answer: then the node failed, not the PR's server: the
    /// steps are `node` (the verdict is `error`) and the node, only it, is struck, once for the
    /// job (the SLURM executor's `NODE_FAIL` strike of the same job is not written again).
    fn node_failure(
        &self,
        failure: StepFailure,
        job: &str,
        node: &str,
        address: &str,
    ) -> StepFailure {
        let Err(why) = slurmd_answers(address) else { return failure };
        let detail = format!("node {node} failed: its slurmd does not answer ({why})");
        let run = format!("job {job} ({})", std::env::var("SLURM_JOB_NAME").unwrap_or_default());
        let strike = crate::health::Strike {
            source: crate::health::Source::SlurmNodeFail,
            detail: detail.clone(),
        };
        for note in crate::health::record(self.exec.node, node, &[strike], Some(&run)) {
            eprintln!("prgate: {note}");
        }
        StepFailure { reason: NotRunReason::Node, detail: format!("{detail}\n{}", failure.detail) }
    }
}

/// Whether the slurmd of the node at `address` takes a connection (on the cluster's
/// `SlurmdPort`, from `scontrol show config`), within a few seconds.
fn slurmd_answers(address: &str) -> Result<(), SlurmdError> {
    let config = scontrol(&["show", "config"])?;
    let port = config
        .lines()
        .find_map(|line| {
            let (key, value) = line.split_once('=')?;
            (key.trim() == "SlurmdPort").then(|| value.trim().parse::<u16>().ok()).flatten()
        })
        .ok_or(SlurmdError::NoPort)?;
    let target = format!("{address}:{port}");
    let unreachable = |source| SlurmdError::Unreachable { target: target.clone(), source };
    let socket = std::net::ToSocketAddrs::to_socket_addrs(&target)
        .map_err(unreachable)?
        .next()
        .ok_or_else(|| SlurmdError::NoAddress { target: target.clone() })?;
    std::net::TcpStream::connect_timeout(&socket, Duration::from_secs(5))
        .map(drop)
        .map_err(unreachable)
}

/// Why a node's slurmd was not reached.
#[derive(Debug, thiserror::Error)]
enum SlurmdError {
    #[error(transparent)]
    Scontrol(#[from] ScontrolError),
    #[error("scontrol show config names no SlurmdPort")]
    NoPort,
    #[error("{target}: {source}")]
    Unreachable { target: String, source: std::io::Error },
    #[error("{target}: no address")]
    NoAddress { target: String },
}

/// Waits until `member` answers `health`; the failure names it.
fn healthy(health: &str, left: Duration, member: &mut Member) -> Result<(), StepFailure> {
    match wait_healthy(health, left, member.process.group()) {
        Ok(_healthy) => Ok(()),
        Err(error) => Err(StepFailure {
            reason: unhealthy(&error),
            detail: format!("{}: {error}", member.name),
        }),
    }
}

/// A side's routing check over a topology: every instance's log must have a line of each of
/// its role's `required-log` patterns, and (on a monokernel side) of the recipe's routing
/// pattern. The first line missing fails it, named: role, instance, pattern.
pub(super) fn routing(log_dir: &Path, topology: &Topology, pattern: &str) -> Outcome {
    let mut first_routed = None;
    for role in topology.roles() {
        for instance in 0..role.instances {
            let file = if role.nodes > 1 {
                format!("{}-{instance}-rank0.log", role.kind)
            } else {
                format!("{}-{instance}.log", role.kind)
            };
            let log = log_dir.join(file);
            let patterns = role.required_log.iter().map(String::as_str).chain([pattern]);
            for wanted in patterns {
                match super::server::routing(&log, wanted, &[super::server::LogWindow::WHOLE]) {
                    Outcome::Routing { routed: true, line } => {
                        if wanted == pattern && first_routed.is_none() {
                            first_routed = line;
                        }
                    }
                    _ => {
                        return Outcome::Routing {
                            routed: false,
                            line: Some(format!(
                                "{} instance {instance} logged no line matching '{wanted}' ({})",
                                role.kind,
                                log.display()
                            )),
                        };
                    }
                }
            }
        }
    }
    Outcome::Routing { routed: true, line: first_routed }
}
