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

use super::exec::{Exec, ServerCommand, ServerProcess};
use super::leftovers::Entry;
use super::server::{Launch, ServerFailure, TAIL_LINES};
use crate::process::{
    ChildGroup, HealthError, PortLease, PortRange, ProcessSpec, tail, wait_healthy,
};
use crate::recipe::Recipe;
use crate::recipe::topology::{InstanceArgs, RoleKind, Topology, router_workers};

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
    pub(super) fn find(topology: &Topology) -> Result<Placement, String> {
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
            return Err(format!(
                "the topology takes {wanted} nodes; the SLURM job {job} has {} ({})",
                names.len(),
                names.join(", ")
            ));
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

/// `scontrol ARGS`' output (the `PATH`'s, with the job's `SLURM_CONF`).
fn scontrol(args: &[&str]) -> Result<String, String> {
    #[expect(
        clippy::disallowed_methods,
        reason = "SLURM's scontrol, prgate's own query of the job's nodes"
    )]
    let output = std::process::Command::new("scontrol")
        .args(args)
        .output()
        .map_err(|error| format!("cannot run scontrol {}: {error}", args.join(" ")))?;
    if !output.status.success() {
        return Err(format!(
            "scontrol {} failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
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
    /// started when anything fails.
    pub(super) fn up(&self) -> Result<Deployment, ServerFailure> {
        let started = Instant::now();
        let other = |detail: String| ServerFailure { reason: NotRunReason::Other, detail };
        let placement = Placement::find(self.topology)
            .map_err(|detail| ServerFailure { reason: NotRunReason::Node, detail })?;
        if let (Placement::Slurm { .. }, super::Isolation::Container { .. }) =
            (&placement, self.exec.isolation)
        {
            return Err(ServerFailure {
                reason: NotRunReason::Node,
                detail: "a topology across nodes runs with --isolation host only: containers on different nodes have no network between them here (docs/topology.md)".to_owned(),
            });
        }
        let log_dir = self.launch.log.parent().unwrap_or(self.launch.tree).to_path_buf();
        let range = match self.exec.node.ports() {
            Some(ports) => PortRange::new(*ports.start(), *ports.end())
                .map_err(|error| other(error.to_string()))?,
            None => PortRange::DEFAULT,
        };
        let ports_dir = self.exec.node.cache_dir().join("ports");
        let lease =
            || PortLease::acquire(&ports_dir, range).map_err(|error| other(error.to_string()));
        let mut deployment = Deployment {
            router: None,
            members: Vec::new(),
            _leases: Vec::new(),
            url: String::new(),
            port: 0,
            container: None,
        };
        let node_gpus: Vec<u32> = self.exec.node.gpus().iter().map(|gpu| gpu.id).collect();
        let mut next_gpu = 0_usize;
        // Nodes of the allocation, in order: the first instance shares the batch node with
        // the router and the step loop; each other instance has nodes of its own.
        let mut next_node = 0_usize;
        let mut workers: Vec<(RoleKind, String, u16)> = Vec::new();
        let checkpoint = self.exec.checkpoint_view(self.recipe);
        let extra: &[String] =
            if self.launch.monokernel { self.recipe.server().monokernel_flag() } else { &[] };
        for role in self.topology.roles() {
            for instance in 0..role.instances {
                let port_lease = lease()?;
                let port = port_lease.port();
                let bootstrap_lease =
                    if role.kind == RoleKind::Prefill { Some(lease()?) } else { None };
                let bootstrap_port = bootstrap_lease.as_ref().map_or(0, PortLease::port);
                deployment._leases.push(port_lease);
                deployment._leases.extend(bootstrap_lease);
                let instance_nodes: Vec<(String, String)> = match &placement {
                    Placement::Local => vec![("this node".to_owned(), "127.0.0.1".to_owned())],
                    Placement::Slurm { nodes, .. } => (0..role.nodes)
                        .map(|_| {
                            let at = next_node % nodes.len();
                            next_node += 1;
                            nodes[at].clone()
                        })
                        .collect(),
                };
                let rank0 = format!("{}:{}", instance_nodes[0].1, port.wrapping_add(1));
                let mut url = String::new();
                for (rank, (node, address)) in instance_nodes.iter().enumerate() {
                    let rank = u32::try_from(rank).unwrap_or(u32::MAX);
                    let name = if role.nodes > 1 {
                        format!("{} instance {instance} (rank {rank}) on {node}", role.kind)
                    } else {
                        format!("{} instance {instance} on {node}", role.kind)
                    };
                    let failed = |reason: NotRunReason, problem: String| ServerFailure {
                        reason,
                        detail: format!("{name}: {problem}"),
                    };
                    let args = InstanceArgs {
                        port,
                        checkpoint: &checkpoint,
                        host: address,
                        bootstrap_port,
                        nnodes: role.nodes,
                        node_rank: rank,
                        dist_init_addr: &rank0,
                    };
                    let argv = role.command(&args, extra);
                    let file = if role.nodes > 1 {
                        format!("{}-{instance}-rank{rank}.log", role.kind)
                    } else {
                        format!("{}-{instance}.log", role.kind)
                    };
                    let log = log_dir.join(file);
                    let per_node = role.gpus_per_node() as usize;
                    let (mut process, member_url) = match &placement {
                        Placement::Local => {
                            if next_gpu + per_node > node_gpus.len() {
                                return Err(failed(
                                    NotRunReason::HardwareAbsent,
                                    format!(
                                        "the topology needs {} GPUs on this node, which has {}",
                                        self.topology.gpus(),
                                        node_gpus.len()
                                    ),
                                ));
                            }
                            let gpus = &node_gpus[next_gpu..next_gpu + per_node];
                            next_gpu += per_node;
                            let purpose =
                                format!("{}-{}-{instance}", self.launch.purpose, role.kind);
                            let command = self.command(argv, &log, gpus, purpose, port);
                            let (process, url) = self
                                .exec
                                .start_server(&command)
                                .map_err(|(reason, problem)| failed(reason, problem))?;
                            (Process::Here(process), url)
                        }
                        Placement::Slurm { job, .. } => {
                            let gpus = &node_gpus[..per_node.min(node_gpus.len())];
                            let group = srun(job, node, gpus, &argv, self, &log)
                                .map_err(|problem| failed(NotRunReason::Other, problem))?;
                            (Process::Remote(group), format!("http://{address}:{port}"))
                        }
                    };
                    let entry = Entry::write(self.exec.processes, process.group().id());
                    if rank == 0 {
                        url.clone_from(&member_url);
                    }
                    deployment.members.push(Member {
                        name: name.clone(),
                        process,
                        _entry: entry,
                        log,
                    });
                }
                // The instance answers on its rank 0.
                let left = self.startup.saturating_sub(started.elapsed());
                let health = format!("{url}{}", role.health_path);
                let rank0_at = deployment.members.len() - instance_nodes.len();
                let member = &mut deployment.members[rank0_at];
                if let Err(failure) = healthy(&health, left, member) {
                    return Err(match (&placement, instance_nodes.first()) {
                        (Placement::Slurm { job, .. }, Some((node, address))) => {
                            self.node_failure(failure, job, node, address)
                        }
                        _ => failure,
                    });
                }
                workers.push((role.kind, url.clone(), bootstrap_port));
                if self.topology.router().is_none() {
                    deployment.url = url.clone();
                    deployment.port = port;
                }
            }
        }
        if let Some(router) = self.topology.router() {
            let (lease, metrics_lease) = (lease()?, lease()?);
            let port = lease.port();
            let metrics_port = metrics_lease.port();
            deployment._leases.extend([lease, metrics_lease]);
            // The router is the step loop's alone: on this node's loopback (under SLURM it
            // listens on every address of the batch node, where the step loop runs).
            let host = match &placement {
                Placement::Local => "127.0.0.1".to_owned(),
                Placement::Slurm { .. } => "0.0.0.0".to_owned(),
            };
            let argv = router.command([port, metrics_port], &host, &router_workers(&workers));
            let log = self.launch.log.clone();
            let name = "the router".to_owned();
            let purpose = format!("{}-router", self.launch.purpose);
            let command = self.command(argv, &log, &[], purpose, port);
            let (mut process, url) =
                self.exec.start_server(&command).map_err(|(reason, problem)| ServerFailure {
                    reason,
                    detail: format!("{name}: {problem}"),
                })?;
            let url = match &placement {
                Placement::Local => url,
                Placement::Slurm { .. } => format!("http://127.0.0.1:{port}"),
            };
            let entry = Entry::write(self.exec.processes, process.group().id());
            deployment.container = process.container().map(str::to_owned);
            let health = format!("{url}{}", router.health_path);
            let left = router.startup_timeout;
            deployment.router =
                Some(Member { name, process: Process::Here(process), _entry: entry, log });
            if let Some(member) = deployment.router.as_mut() {
                healthy(&health, left, member)?;
            }
            deployment.url = url;
            deployment.port = port;
        }
        Ok(deployment)
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
) -> Result<ChildGroup, String> {
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
    ChildGroup::spawn(&spec).map_err(|error| error.to_string())
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
            startup: self.startup,
        }
    }

    /// `failure` of an instance on `node` (at `address`) of the SLURM job `job`, as the node's
    /// when the node's slurmd does not answer: then the node failed, not the PR's server: the
    /// steps are `node` (the verdict is `error`) and the node, only it, is struck, once for the
    /// job (the SLURM executor's `NODE_FAIL` strike of the same job is not written again).
    fn node_failure(
        &self,
        failure: ServerFailure,
        job: &str,
        node: &str,
        address: &str,
    ) -> ServerFailure {
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
        ServerFailure {
            reason: NotRunReason::Node,
            detail: format!("{detail}\n{}", failure.detail),
        }
    }
}

/// Whether the slurmd of the node at `address` takes a connection (on the cluster's
/// `SlurmdPort`, from `scontrol show config`), within a few seconds.
fn slurmd_answers(address: &str) -> Result<(), String> {
    let config = scontrol(&["show", "config"])?;
    let port = config
        .lines()
        .find_map(|line| {
            let (key, value) = line.split_once('=')?;
            (key.trim() == "SlurmdPort").then(|| value.trim().parse::<u16>().ok()).flatten()
        })
        .ok_or("scontrol show config names no SlurmdPort")?;
    let target = format!("{address}:{port}");
    let socket = std::net::ToSocketAddrs::to_socket_addrs(&target)
        .map_err(|error| format!("{target}: {error}"))?
        .next()
        .ok_or_else(|| format!("{target}: no address"))?;
    std::net::TcpStream::connect_timeout(&socket, Duration::from_secs(5))
        .map(drop)
        .map_err(|error| format!("{target}: {error}"))
}

/// Waits until `member` answers `health`; the failure names it.
fn healthy(health: &str, left: Duration, member: &mut Member) -> Result<(), ServerFailure> {
    match wait_healthy(health, left, member.process.group()) {
        Ok(_healthy) => Ok(()),
        Err(error) => {
            let reason = match error {
                HealthError::Exited { .. } => NotRunReason::Crash,
                HealthError::TimedOut { .. } => NotRunReason::Timeout,
                HealthError::Process(_) => NotRunReason::Other,
            };
            Err(ServerFailure { reason, detail: format!("{}: {error}", member.name) })
        }
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
