//! A recipe's `[topology]`: a model served by several servers behind a router, on one node or
//! across nodes. Prefill/decode disaggregation (`[topology.prefill]` and `[topology.decode]`
//! behind `[topology.router]`, sglang-router in PD mode or vllm-router), or one role of
//! `worker`s (several instances behind a router, or one instance that spans nodes: a
//! multi-node tensor-parallel group, which needs no router).
//!
//! Parsed through private serde types like the rest of the recipe ([`super::Recipe::parse`]);
//! every error names the file, the key and the value. What a run does with it (placement onto
//! nodes, start order, the health gates, the router, the required log lines, stopping it all)
//! is `prgate_runner::run::topology`'s; the reference is `docs/topology.md`.
//!
//! The trust split: the topology is the base side's contract (roles, instance counts, nodes,
//! GPUs, the router's command, the log lines required) except each role's server command,
//! which is the side's own (the PR's on the PR side, the base's on the base side), like the
//! recipe's `server.command` (`Recipe::with_commands_of`).

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use super::RecipeError;
use super::template::{Placeholder, Template};

/// The roles of a topology, in the order they start (and the router's arguments list them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RoleKind {
    /// Prefill instances of a disaggregated model: each gets a bootstrap port.
    Prefill,
    /// Decode instances of a disaggregated model.
    Decode,
    /// Whole-request servers (several behind a router, or one that spans nodes).
    Worker,
}

impl RoleKind {
    /// The role's name, as its table is named (`prefill`, `decode`, `worker`).
    pub fn name(self) -> &'static str {
        match self {
            RoleKind::Prefill => "prefill",
            RoleKind::Decode => "decode",
            RoleKind::Worker => "worker",
        }
    }
}

impl fmt::Display for RoleKind {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// A checked topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    roles: Vec<Role>,
    router: Option<Router>,
}

/// One role: its instances, their size and their command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    pub kind: RoleKind,
    /// How many instances of it run.
    pub instances: u32,
    /// How many nodes each instance spans (a multi-node tensor-parallel group when above 1).
    pub nodes: u32,
    /// GPUs per instance, over all its nodes; a multiple of `nodes`.
    pub tp: u32,
    command: Template,
    /// Regular expressions a line of each instance's log must match (the KV-transfer backend
    /// it reports, say): a missing one fails the side's routing check.
    pub required_log: Vec<String>,
    /// The path polled until each instance answers 200.
    pub health_path: String,
}

/// The router in front of the instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Router {
    command: Template,
    /// The path polled until the router answers 200 ([`ROUTER_HEALTH_PATH`] by default).
    pub health_path: String,
    /// How long the router may take to become healthy once every instance is.
    pub startup_timeout: Duration,
}

/// The router's health path when the recipe names none: sglang-router's `/readiness`, which
/// answers 503 (`insufficient healthy workers`) until the router has registered its workers,
/// where its `/health` answers 200 as soon as it listens, with no worker yet (sglang-router
/// 0.3.2, measured: docs/topology.md). A request the router takes before then fails with "No
/// prefill workers available", so `/health` would let a loaded node's first step fail.
pub const ROUTER_HEALTH_PATH: &str = "/readiness";

/// The values of one instance's placeholders on one of its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceArgs<'a> {
    pub port: u16,
    pub checkpoint: &'a str,
    /// The node's address, as the other servers reach it.
    pub host: &'a str,
    /// A prefill instance's bootstrap port (0 for other roles).
    pub bootstrap_port: u16,
    /// The instance's nodes, and this one's rank among them.
    pub nnodes: u32,
    pub node_rank: u32,
    /// `host:port` of the instance's rank 0, where its nodes meet.
    pub dist_init_addr: &'a str,
}

/// How long the router may take to become healthy when the recipe does not say.
pub const DEFAULT_ROUTER_STARTUP: Duration = Duration::from_secs(5 * 60);

/// The placeholders of a role's command.
const ROLE_PLACEHOLDERS: [Placeholder; 9] = [
    Placeholder::Port,
    Placeholder::Checkpoint,
    Placeholder::Tp,
    Placeholder::ExtraArgs,
    Placeholder::Host,
    Placeholder::BootstrapPort,
    Placeholder::Nnodes,
    Placeholder::NodeRank,
    Placeholder::DistInitAddr,
];
/// The placeholders of the router's command: `{extra_args}` is where the workers go.
const ROUTER_PLACEHOLDERS: [Placeholder; 4] =
    [Placeholder::Port, Placeholder::Host, Placeholder::MetricsPort, Placeholder::ExtraArgs];

impl Topology {
    /// The roles, in start order: prefill, decode, worker.
    pub fn roles(&self) -> &[Role] {
        &self.roles
    }

    /// The router, when the topology has one.
    pub fn router(&self) -> Option<&Router> {
        self.router.as_ref()
    }

    /// Every instance's GPUs, added up.
    pub fn gpus(&self) -> u32 {
        self.roles.iter().map(|role| role.instances.saturating_mul(role.tp)).sum()
    }

    /// The nodes the topology takes when each instance has nodes of its own: the SLURM
    /// allocation's `--nodes` (the router runs on the first).
    pub fn nodes(&self) -> u32 {
        self.roles.iter().map(|role| role.instances.saturating_mul(role.nodes)).sum()
    }

    /// How many instances it runs.
    pub fn instances(&self) -> u32 {
        self.roles.iter().map(|role| role.instances).sum()
    }

    /// The topology with each role's command taken from `base` (the base side's own), when
    /// `base` has that role; the rest (the contract) stays.
    pub(crate) fn with_commands_of(&self, base: Option<&Topology>) -> Topology {
        let mut topology = self.clone();
        for role in &mut topology.roles {
            if let Some(own) =
                base.and_then(|base| base.roles.iter().find(|other| other.kind == role.kind))
            {
                role.command = own.command.clone();
            }
        }
        topology
    }
}

impl Role {
    /// One instance's argv on one of its nodes, the monokernel flag (`extra`) at
    /// `{extra_args}` or at the end.
    pub fn command(&self, args: &InstanceArgs<'_>, extra: &[String]) -> Vec<String> {
        self.command.expand(
            |placeholder| match placeholder {
                Placeholder::Port => args.port.to_string(),
                Placeholder::Checkpoint => args.checkpoint.to_owned(),
                Placeholder::Tp => self.tp.to_string(),
                Placeholder::Host => args.host.to_owned(),
                Placeholder::BootstrapPort => args.bootstrap_port.to_string(),
                Placeholder::Nnodes => args.nnodes.to_string(),
                Placeholder::NodeRank => args.node_rank.to_string(),
                Placeholder::DistInitAddr => args.dist_init_addr.to_owned(),
                _ => String::new(),
            },
            extra,
        )
    }

    /// The command as the recipe wrote it.
    pub fn command_text(&self) -> &str {
        self.command.text()
    }

    /// GPUs on each of an instance's nodes.
    pub fn gpus_per_node(&self) -> u32 {
        self.tp / self.nodes.max(1)
    }
}

impl Router {
    /// The router's argv on `port` and `metrics_port` of `host`: `workers` (the instances'
    /// arguments) at `{extra_args}` or at the end.
    pub fn command(&self, ports: [u16; 2], host: &str, workers: &[String]) -> Vec<String> {
        let [port, metrics_port] = ports;
        self.command.expand(
            |placeholder| match placeholder {
                Placeholder::Port => port.to_string(),
                Placeholder::MetricsPort => metrics_port.to_string(),
                Placeholder::Host => host.to_owned(),
                _ => String::new(),
            },
            workers,
        )
    }

    /// The command as the recipe wrote it.
    pub fn command_text(&self) -> &str {
        self.command.text()
    }
}

/// The arguments sglang-router (and vllm-router, its fork) takes for `instances`: in PD mode
/// `--prefill URL BOOTSTRAP_PORT` per prefill and `--decode URL` per decode instance, else
/// `--worker-urls URL...`. Each is `(role, url, bootstrap port)`.
pub fn router_workers(instances: &[(RoleKind, String, u16)]) -> Vec<String> {
    let mut args = Vec::new();
    let workers: Vec<&String> = instances
        .iter()
        .filter(|(kind, _, _)| *kind == RoleKind::Worker)
        .map(|(_, url, _)| url)
        .collect();
    if !workers.is_empty() {
        args.push("--worker-urls".to_owned());
        args.extend(workers.into_iter().cloned());
    }
    for (kind, url, bootstrap) in instances {
        match kind {
            RoleKind::Prefill => {
                args.extend(["--prefill".to_owned(), url.clone(), bootstrap.to_string()]);
            }
            RoleKind::Decode => args.extend(["--decode".to_owned(), url.clone()]),
            RoleKind::Worker => {}
        }
    }
    args
}

/// `[topology]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawTopology {
    prefill: Option<RawRole>,
    decode: Option<RawRole>,
    worker: Option<RawRole>,
    router: Option<RawRouter>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawRole {
    instances: u32,
    nodes: Option<u32>,
    tp: Option<u32>,
    command: String,
    #[serde(default)]
    required_log: Vec<String>,
    health_path: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawRouter {
    command: String,
    health_path: Option<String>,
    startup_timeout: Option<String>,
}

/// What the topology takes from the rest of the recipe: its defaults.
pub(super) struct Defaults<'a> {
    pub file: &'a str,
    /// The recipe's `tp`: each role's GPUs per instance unless it says.
    pub tp: u32,
    /// The recipe's `server.health-path`.
    pub health_path: &'a str,
}

/// Checks `raw` into a [`Topology`].
pub(super) fn check(raw: RawTopology, defaults: &Defaults<'_>) -> Result<Topology, RecipeError> {
    let file = defaults.file;
    let pd = raw.prefill.is_some() || raw.decode.is_some();
    if pd && raw.worker.is_some() {
        return Err(RecipeError::key(
            file,
            "topology.worker",
            "cannot stand beside topology.prefill and topology.decode: a topology is disaggregated or of workers",
        ));
    }
    if pd && (raw.prefill.is_none() || raw.decode.is_none()) {
        let missing = if raw.prefill.is_none() { "topology.prefill" } else { "topology.decode" };
        return Err(RecipeError::key(
            file,
            missing,
            "is missing: a disaggregated topology has prefill and decode instances",
        ));
    }
    let mut roles = Vec::new();
    for (kind, raw_role) in [
        (RoleKind::Prefill, raw.prefill),
        (RoleKind::Decode, raw.decode),
        (RoleKind::Worker, raw.worker),
    ] {
        if let Some(raw_role) = raw_role {
            roles.push(check_role(kind, raw_role, defaults)?);
        }
    }
    if roles.is_empty() {
        return Err(RecipeError::key(
            file,
            "topology",
            "has no role: give topology.prefill and topology.decode, or topology.worker",
        ));
    }
    let router = raw.router.map(|router| check_router(router, file)).transpose()?;
    let instances: u32 = roles.iter().map(|role| role.instances).sum();
    if router.is_none() && (pd || instances > 1) {
        return Err(RecipeError::key(
            file,
            "topology.router",
            "is missing: several instances (or prefill and decode) are reached through a router",
        ));
    }
    Ok(Topology { roles, router })
}

/// One role's table (`topology.<kind>`), checked: its instances, nodes, GPUs, command,
/// required log lines and health path.
fn check_role(kind: RoleKind, raw: RawRole, defaults: &Defaults<'_>) -> Result<Role, RecipeError> {
    let key = |field: &str| format!("topology.{kind}.{field}");
    let value = |field: &str, value: &dyn fmt::Debug, problem: &str| {
        RecipeError::value(defaults.file, &key(field), value, problem)
    };
    if raw.instances == 0 {
        return Err(value("instances", &0, "must be 1 or more"));
    }
    let nodes = raw.nodes.unwrap_or(1);
    if nodes == 0 {
        return Err(value("nodes", &0, "must be 1 or more"));
    }
    let tp = raw.tp.unwrap_or(defaults.tp);
    if tp == 0 || !tp.is_multiple_of(nodes) {
        return Err(value(
            "tp",
            &tp,
            "must be a multiple of the instance's nodes (its GPUs, shared evenly by its nodes)",
        ));
    }
    let command = Template::parse(&raw.command, &ROLE_PLACEHOLDERS, &[Placeholder::Port])
        .map_err(|error| value("command", &raw.command, &error.to_string()))?;
    if kind == RoleKind::Prefill && !command.uses(Placeholder::BootstrapPort) {
        return Err(value(
            "command",
            &raw.command,
            "lacks {bootstrap_port}: a prefill instance's bootstrap server must listen where the router tells decode instances to look",
        ));
    }
    if nodes > 1 && !command.uses(Placeholder::NodeRank) {
        return Err(value(
            "command",
            &raw.command,
            "lacks {node_rank}: an instance that spans nodes starts once on each, and each must know its rank",
        ));
    }
    for (index, pattern) in raw.required_log.iter().enumerate() {
        let field = format!("required-log[{index}]");
        if pattern.trim().is_empty() {
            return Err(value(&field, pattern, "is empty: write a regular expression"));
        }
        if let Err(error) = regex::Regex::new(pattern) {
            return Err(value(&field, pattern, &format!("is not a regular expression: {error}")));
        }
    }
    let health_path = raw.health_path.unwrap_or_else(|| defaults.health_path.to_owned());
    if !health_path.starts_with('/') {
        return Err(value("health-path", &health_path, "must start with /"));
    }
    Ok(Role {
        kind,
        instances: raw.instances,
        nodes,
        tp,
        command,
        required_log: raw.required_log,
        health_path,
    })
}

/// The router's table (`topology.router`), checked: its command, health path and startup limit.
fn check_router(router: RawRouter, file: &str) -> Result<Router, RecipeError> {
    let value = |key: &str, value: &dyn fmt::Debug, problem: &str| {
        RecipeError::value(file, key, value, problem)
    };
    let command = Template::parse(&router.command, &ROUTER_PLACEHOLDERS, &[Placeholder::Port])
        .map_err(|error| value("topology.router.command", &router.command, &error.to_string()))?;
    let health_path = router.health_path.unwrap_or_else(|| ROUTER_HEALTH_PATH.to_owned());
    if !health_path.starts_with('/') {
        return Err(value("topology.router.health-path", &health_path, "must start with /"));
    }
    let startup_timeout = match &router.startup_timeout {
        Some(text) => super::parse_duration(text).map_err(|problem| {
            value("topology.router.startup-timeout", text, &problem.to_string())
        })?,
        None => DEFAULT_ROUTER_STARTUP,
    };
    Ok(Router { command, health_path, startup_timeout })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Topology, String> {
        let raw: RawTopology = toml::from_str(text).map_err(|error| error.to_string())?;
        check(raw, &Defaults { file: "t.toml", tp: 1, health_path: "/health" })
            .map_err(|error| error.to_string())
    }

    const PD: &str = r#"
        [prefill]
        instances = 2
        command = "serve --port {port} --disaggregation-mode prefill --disaggregation-bootstrap-port {bootstrap_port}"
        required-log = ['transport=rdma']
        [decode]
        instances = 1
        tp = 2
        command = "serve --port {port} --disaggregation-mode decode"
        [router]
        command = "python -m sglang_router.launch_router --pd-disaggregation --host {host} --port {port}"
    "#;

    #[test]
    fn a_pd_topology_counts_its_gpus_and_nodes_and_lists_its_workers_for_the_router() {
        let topology = parse(PD).expect("a 2P1D topology");
        let kinds: Vec<RoleKind> = topology.roles().iter().map(|role| role.kind).collect();
        assert_eq!(kinds, [RoleKind::Prefill, RoleKind::Decode]);
        assert_eq!((topology.gpus(), topology.nodes(), topology.instances()), (4, 3, 3));
        let workers = router_workers(&[
            (RoleKind::Prefill, "http://a:1".into(), 8998),
            (RoleKind::Prefill, "http://b:1".into(), 8999),
            (RoleKind::Decode, "http://c:2".into(), 0),
        ]);
        assert_eq!(
            workers.join(" "),
            "--prefill http://a:1 8998 --prefill http://b:1 8999 --decode http://c:2"
        );
        let router = topology.router().expect("a router");
        assert_eq!(
            router.command([30000, 29000], "10.0.0.1", &workers)[3..].join(" "),
            "--pd-disaggregation --host 10.0.0.1 --port 30000 --prefill http://a:1 8998 --prefill http://b:1 8999 --decode http://c:2"
        );
        let single = router_workers(&[(RoleKind::Worker, "http://a:1".into(), 0)]);
        assert_eq!(single, ["--worker-urls", "http://a:1"]);
    }

    #[test]
    fn what_cannot_run_is_refused_naming_the_key() {
        let cases = [
            (
                "[prefill]\ninstances = 1\ncommand = \"s --port {port} --b {bootstrap_port}\"",
                "topology.decode",
            ),
            (&PD.replace("instances = 2", "instances = 0"), "topology.prefill.instances"),
            (
                &PD.replace(" --disaggregation-bootstrap-port {bootstrap_port}", ""),
                "{bootstrap_port}",
            ),
            (&PD.replace("tp = 2", "tp = 3\nnodes = 2"), "topology.decode.tp"),
            (&PD.replace("tp = 2", "tp = 2\nnodes = 2"), "{node_rank}"),
            (&PD.replace("'transport=rdma'", "'('"), "required-log[0]"),
            (
                &PD.replace("[router]\n        command", "[nothing]\n        command"),
                "unknown field",
            ),
            ("[worker]\ninstances = 2\ncommand = \"s --port {port}\"", "topology.router"),
            (
                "[worker]\ninstances = 1\nnodes = 2\ntp = 2\ncommand = \"s --port {port}\"",
                "{node_rank}",
            ),
        ];
        for (text, named) in cases {
            let error = parse(text).expect_err(text);
            assert!(error.contains(named), "{text}\n-> {error}");
        }
        let group = parse("[worker]\ninstances = 1\nnodes = 2\ntp = 16\ncommand = \"s --port {port} --nnodes {nnodes} --node-rank {node_rank} --dist-init-addr {dist_init_addr}\"")
            .expect("one multi-node TP group needs no router");
        assert_eq!((group.nodes(), group.gpus(), group.roles()[0].gpus_per_node()), (2, 16, 8));
    }
}
