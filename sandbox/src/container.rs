//! The container launcher: "run this command for this run" turned into a container engine's
//! command line, and the engine's other answers the runner needs (a server's address on its
//! side's network, stop, cleanup by label, the image's digest), and the gateway check (a probe
//! container proving the host closed to a side's network: `gateway`). Each side of a run
//! (base, the PR) has an internal network of its own ([`NetworkSide`]), so that neither side's
//! server can reach the other's.
//!
//! On a GPU node every PR-controlled command runs inside the node's image; only prgate runs
//! outside. [`Engine::launch`] builds the `docker run` (or `podman run`) of one
//! [`ContainerRequest`] as a [`ProcessSpec`], so the engine's client is started and stopped by
//! [`ChildGroup`](crate::process::ChildGroup) like any other child; [`Container`] adds what a process group cannot do on
//! its own: stopping the container itself, which outlives a killed client. Every isolation
//! property is decided here, in one function ([`Engine::launch`], whose command line `arguments`
//! builds), and checked there: a request that would break one is an error, not a weaker
//! container. A started [`Container`] is `running`'s.
//!
//! What it leaves to others: which steps run in which container and with which GPUs (the
//! step loop), the preflight's other checks, reading what the container wrote (untrusted
//! input, the results' readers). The rest of this page is `docs/container.md`.
//!
#![doc = include_str!("../../docs/container.md")]

mod arguments;
mod env;
mod gateway;
mod running;
#[cfg(test)]
mod tests;

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{self, Read};
use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

pub use env::{ContainerEnv, EnvError, RESERVED_VARIABLES};
pub use gateway::{GATEWAY_HINT, GatewayCheck, PROBE_CONNECT_TIMEOUT, PROBE_LIMIT, PROBE_SCRIPT};
pub use running::Container;

use crate::process::{Environment, ProcessError, ProcessSpec};
use arguments::run_arguments;
use prgate_recipe::node::{Image, NodeProfile, secret_env_var};

/// Where the exported source tree is in the container; the working directory.
pub const TREE_DIR: &str = "/work/tree";
/// Where the container writes its results; prgate reads them afterwards as untrusted input.
pub const OUT_DIR: &str = "/work/out";
/// Where the node's checkpoint store is in the container, read-only.
pub const MODELS_DIR: &str = "/models";
/// Where the node's dataset cache is in the container, read-only, when a request mounts it.
pub const DATASETS_DIR: &str = "/datasets";

/// The label every container and network of a run carries: `prgate.run=<run id>`. Cleanup
/// removes by it.
pub const RUN_LABEL: &str = "prgate.run";
/// The label that says what a container is for within its run (`pr-server`).
pub const PURPOSE_LABEL: &str = "prgate.purpose";
/// The label that lists the node's GPU ids a container was given (`2,3`).
pub const GPUS_LABEL: &str = "prgate.gpus";

/// The shared memory a container gets unless its request says otherwise, in GiB. SGLang's
/// workers exchange tensors through `/dev/shm`; the engine's default (64 MiB) is far too small.
pub const DEFAULT_SHM_GIB: u32 = 16;

/// The variables of the runner's environment that configure the engine's client and are
/// passed on to it (with [`crate::process::BASE_VARIABLES`]). They reach the client only:
/// a container gets none of the client's environment unless a request names it.
pub const ENGINE_VARIABLES: &[&str] = &[
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
    "CONTAINER_HOST",
    "CONTAINER_CONNECTION",
    "CONTAINERS_CONF",
    "CONTAINERS_REGISTRIES_CONF",
    "CONTAINERS_STORAGE_CONF",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
];

/// The variables podman puts into every container unless told not to (`TERM=xterm` from its
/// default `containers.conf`, and `container=podman`); `run` unsets them (`--unsetenv`), so
/// that a container's environment is the image's and the request's, as on docker.
pub const PODMAN_DEFAULT_VARIABLES: &[&str] = &["TERM", "container"];

/// How long an engine command other than `run` may take (`port`, `ps`, `rm`, `image inspect`;
/// `stop` gets its grace period on top).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// The format `image inspect` is asked for: the image's id, then its repo digests.
pub const IMAGE_FORMAT: &str = "{{.Id}}{{range .RepoDigests}} {{.}}{{end}}";

/// Which engine a client speaks for. Both take the same command lines here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Docker,
    Podman,
}

impl EngineKind {
    /// `docker` or `podman`: the program's name.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Docker => "docker",
            EngineKind::Podman => "podman",
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A container engine's client program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Engine {
    program: PathBuf,
    kind: EngineKind,
}

/// A run's id: the value of every one of its containers' [`RUN_LABEL`] and the start of their
/// names. 1 to 64 ASCII letters, digits, `.`, `_` and `-`, starting with a letter or digit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(String);

/// One container to start: what runs, for which run, with what.
#[derive(Debug, Clone, Copy)]
pub struct ContainerRequest<'a> {
    /// The node: its image, GPUs, checkpoint store and secrets.
    pub node: &'a NodeProfile,
    pub run: &'a RunId,
    /// What the container is for within the run (`pr-install`, `base-server`): the end of its
    /// name, sanitised, and its [`PURPOSE_LABEL`]. Unique within the run while it lives.
    pub purpose: &'a str,
    /// More labels, each key starting with `prgate.` (`prgate.model`, `prgate.side`).
    pub labels: &'a [(&'a str, &'a str)],
    /// The node's GPUs the container gets, by id; none for a step that needs no GPU.
    pub gpus: &'a [u32],
    /// The exported source tree, mounted read-write at [`TREE_DIR`].
    pub tree: &'a Path,
    /// The directory the container writes its results to, mounted read-write at [`OUT_DIR`].
    pub out: &'a Path,
    /// The variables the command gets, on top of the launcher's and the image's.
    pub env: &'a ContainerEnv,
    /// What the container can reach over a network ([`ContainerNetwork`]).
    pub network: ContainerNetwork<'a>,
    /// The node's dataset cache (`<cache-dir>/datasets`, what prgate fetched for a gated
    /// benchmark), mounted read-only at [`DATASETS_DIR`]; `None` for no such mount.
    pub datasets: Option<&'a Path>,
    /// The size of `/dev/shm`, in GiB ([`DEFAULT_SHM_GIB`]), 1 to 1024.
    pub shm_gib: u32,
    /// The command and its arguments, run without a shell. Paths in it are container paths.
    pub command: &'a [String],
    /// The engine client's log: the container's output goes there.
    pub log: &'a Path,
    /// How long the command has between `SIGTERM` and `SIGKILL` when it is stopped.
    pub grace: Duration,
}

/// What a container can reach over a network. No container ever gets the engine's default
/// network (which routes to the outside and to the node's services): see `docs/container.md`,
/// "Network".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerNetwork<'a> {
    /// Nothing to reach and nothing reaches it: `--network none` (a loopback device only).
    None,
    /// The internal network of one side of the run ([`side_network_name`], made by
    /// [`Engine::create_side_network`]): no route off it, no DNS; the host reaches the
    /// container at its address there ([`Engine::address`]), the other side's containers do
    /// not. What a server gets.
    Side(NetworkSide),
    /// The network namespace of a running container of this run, by name
    /// (`--network container:<name>`): how a client reaches a server on its loopback, and
    /// nothing the server cannot reach.
    JoinedTo(&'a str),
}

/// Which side of a run an internal network is for. Base's servers and the PR's are on networks
/// of their own, so that the PR's server cannot reach base's (load it while it is measured,
/// call its admin endpoints, break it): `docs/container.md`, "Network".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NetworkSide {
    Base,
    Pr,
}

impl NetworkSide {
    /// `base` or `pr`: the end of the network's name.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkSide::Base => "base",
            NetworkSide::Pr => "pr",
        }
    }
}

impl fmt::Display for NetworkSide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A container ready to start: its name, and the engine client's process.
#[derive(Debug, Clone)]
pub struct Launch {
    pub name: String,
    pub spec: ProcessSpec,
}

/// What `image inspect` says of an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// The image's id, `sha256:` and 64 hex digits: the digest of its configuration, the same
    /// wherever the image is. Cache keys use it.
    pub id: String,
    /// `repository@sha256:...`, one per registry it was pulled from or pushed to; a pinned
    /// digest ([`Image::digest`]) must be one of them.
    pub repo_digests: Vec<String>,
}

/// Why a container could not be launched, asked about or stopped. Every error of the engine
/// names the engine, the command and what the engine said.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    #[error(
        "no container engine: neither docker nor podman is on the PATH {path:?}\nhint: install one, or give the engine's path"
    )]
    NoEngine { path: String },
    #[error("{what} {value:?}: {problem}")]
    Request { what: String, value: String, problem: String },
    #[error("{first} {first_path} and {second} {second_path} overlap: each is mounted on its own")]
    Overlap { first: String, first_path: String, second: String, second_path: String },
    #[error("the command is empty: there is nothing to run")]
    EmptyCommand,
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error("cannot start {engine} {command}: {source}")]
    Spawn { engine: String, command: String, source: io::Error },
    #[error("{engine} {command} failed ({status}): {stderr}")]
    Failed { engine: String, command: String, status: String, stderr: String },
    #[error(
        "{engine} {command} did not finish within {timeout:?}\nhint: is the engine's daemon up?"
    )]
    TimedOut { engine: String, command: String, timeout: Duration },
    #[error("{engine} {command} printed {output:?}, not {expected}")]
    Unexpected { engine: String, command: String, output: String, expected: String },
    #[error(
        "image {image} is not the pinned {digest}: its repo digests are {found:?}\nhint: the node's image changed; check the node profile"
    )]
    DigestMismatch { image: String, digest: String, found: Vec<String> },
    #[error(
        "container {name} ended ({status}) before it had an address on network {network}\nlast lines of {log}:\n{tail}"
    )]
    Exited { name: String, network: String, status: ExitStatus, log: PathBuf, tail: String },
    #[error("container {name} had no address on network {network} within {timeout:?}: {last}")]
    AddressTimedOut { name: String, network: String, timeout: Duration, last: String },
    #[error("the gateway probe of {gateway} cannot tell whether the host answers there: {problem}")]
    GatewayProbe { gateway: IpAddr, problem: String },
    #[error(transparent)]
    Process(#[from] ProcessError),
}

impl ContainerError {
    /// Whether the engine said the container does not exist (any more) or is being removed:
    /// what stopping or removing a container that has already gone answers.
    pub fn is_no_such_container(&self) -> bool {
        match self {
            ContainerError::Failed { stderr, .. } => {
                let stderr = stderr.to_lowercase();
                stderr.contains("no such container")
                    || stderr.contains("no container with name or id")
                    || stderr.contains("is already in progress")
            }
            _ => false,
        }
    }
}

impl Engine {
    /// `docker` on `path_env` (a `PATH`'s value), else `podman` there.
    pub fn detect(path_env: Option<&OsStr>) -> Result<Engine, ContainerError> {
        [EngineKind::Docker, EngineKind::Podman]
            .into_iter()
            .find_map(|kind| {
                find_executable(kind.name(), path_env).map(|program| Engine { program, kind })
            })
            .ok_or_else(|| ContainerError::NoEngine {
                path: path_env.map(|path| path.to_string_lossy().into_owned()).unwrap_or_default(),
            })
    }

    /// The engine client at `program`: podman when its file name starts with `podman`,
    /// docker otherwise (a stand-in speaks docker).
    pub fn at(program: impl Into<PathBuf>) -> Engine {
        let program = program.into();
        let podman = program
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with(EngineKind::Podman.name()));
        let kind = if podman { EngineKind::Podman } else { EngineKind::Docker };
        Engine { program, kind }
    }

    /// The client program.
    pub fn program(&self) -> &Path {
        &self.program
    }

    pub fn kind(&self) -> EngineKind {
        self.kind
    }

    /// The client's environment: the runner's [`crate::process::BASE_VARIABLES`] and
    /// [`ENGINE_VARIABLES`] that are set, and nothing else. No secret is in it; a launch adds
    /// the secrets its request let in, by name.
    pub fn client_environment(&self) -> Environment {
        ENGINE_VARIABLES.iter().fold(Environment::minimal(), |env, name| env.inherit(name))
    }

    /// The engine client's process for `request`: `<engine> run` with every isolation option,
    /// the image, then the command. Checks the request: a path that may not be mounted, a GPU
    /// that is not the node's, a variable that is a secret's, an empty command, and so on, are
    /// errors. See `docs/container.md` for the command line.
    pub fn launch(&self, request: &ContainerRequest<'_>) -> Result<Launch, ContainerError> {
        let name = container_name(request.run, request.purpose)?;
        let arguments = run_arguments(request, &name, self.kind)?;
        let mut env = self.client_environment();
        for secret in request.env.secrets() {
            let variable = secret_env_var(secret);
            let value = std::env::var_os(&variable).filter(|value| !value.is_empty()).ok_or(
                EnvError::UnsetSecret { name: secret.to_owned(), variable: variable.clone() },
            )?;
            env = env.set(secret, value);
        }
        let argv = std::iter::once(self.program.clone().into_os_string())
            .chain(arguments.into_iter().map(OsString::from))
            .collect();
        let spec = ProcessSpec {
            argv,
            env,
            cwd: request.out.to_path_buf(),
            log: request.log.to_path_buf(),
            grace: request.grace,
        };
        Ok(Launch { name, spec })
    }

    /// Makes the network of `side` of the run ([`side_network_name`]): `<engine> network
    /// create --internal` (no route off it: no outbound traffic, no other network's
    /// container, and of the host's addresses only its own on the network, the gateway, which
    /// the node's firewall closes: `docs/container.md`, "Network"), labelled with the run. DNS
    /// stays on: podman (4.3) gives an internal network without DNS no gateway at all, and the
    /// host could not reach its server. A network of that name that is already there is taken
    /// as it is (a resumed run's). Returns its name.
    pub fn create_side_network(
        &self,
        run: &RunId,
        side: NetworkSide,
    ) -> Result<String, ContainerError> {
        let name = side_network_name(run, side);
        let label = format!("{RUN_LABEL}={run}");
        let command = ["network", "create", "--internal", "--label", &label, &name];
        match self.output(&command, COMMAND_TIMEOUT) {
            Err(ContainerError::Failed { stderr, .. })
                if stderr.to_lowercase().contains("already exists") =>
            {
                Ok(name)
            }
            Err(error) => Err(error),
            Ok(_) => Ok(name),
        }
    }

    /// Removes every network labelled `prgate.run=<run>` (both sides', and, on podman, a
    /// container still attached to one: only the run's are); returns their names. A run calls
    /// it after [`Engine::remove_run`], when it starts and when it ends.
    pub fn remove_run_networks(&self, run: &RunId) -> Result<Vec<String>, ContainerError> {
        let filter = format!("label={RUN_LABEL}={run}");
        let command = ["network", "ls", "--filter", &filter, "--format", "{{.Name}}"];
        let output = self.output(&command, COMMAND_TIMEOUT)?;
        let names: Vec<String> = output.split_whitespace().map(str::to_owned).collect();
        if let Some(odd) = names.iter().find(|name| !name.chars().all(is_name_char)) {
            return Err(ContainerError::Unexpected {
                engine: self.display(),
                command: command.join(" "),
                output: odd.clone(),
                expected: "network names".to_owned(),
            });
        }
        for name in &names {
            self.output(&["network", "rm", "-f", name], COMMAND_TIMEOUT)?;
        }
        Ok(names)
    }

    /// Container `name`'s address on network `network`: `<engine> inspect`. An answer that
    /// is not one address (none yet, or an unspecified one) is an error.
    pub fn address(&self, name: &str, network: &str) -> Result<IpAddr, ContainerError> {
        let format = format!("{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}");
        let command = ["inspect", "--format", &format, name];
        let output = self.output(&command, COMMAND_TIMEOUT)?;
        output.trim().parse::<IpAddr>().ok().filter(|address| !address.is_unspecified()).ok_or_else(
            || ContainerError::Unexpected {
                engine: self.display(),
                command: command.join(" "),
                output: output.trim().to_owned(),
                expected: format!("the container's address on {network}, such as 10.89.0.2"),
            },
        )
    }

    /// Stops container `name`: `SIGTERM` to its first process, `SIGKILL` after `grace` (in
    /// whole seconds, rounded up). Stopping a container that has gone is an error that
    /// [`ContainerError::is_no_such_container`] recognises.
    pub fn stop(&self, name: &str, grace: Duration) -> Result<(), ContainerError> {
        let seconds = grace.as_secs() + u64::from(grace.subsec_nanos() > 0);
        self.output(&["stop", "--time", &seconds.to_string(), name], grace + COMMAND_TIMEOUT)
            .map(drop)
    }

    /// Pauses container `name` (`pause`: its processes frozen by the cgroup freezer) until
    /// [`Engine::unpause`]. An engine refuses to `stop` a paused container.
    pub fn pause(&self, name: &str) -> Result<(), ContainerError> {
        self.output(&["pause", name], COMMAND_TIMEOUT).map(drop)
    }

    /// Unpauses container `name`.
    pub fn unpause(&self, name: &str) -> Result<(), ContainerError> {
        self.output(&["unpause", name], COMMAND_TIMEOUT).map(drop)
    }

    /// Kills container `name` at once (`SIGKILL`).
    pub fn kill(&self, name: &str) -> Result<(), ContainerError> {
        self.output(&["kill", name], COMMAND_TIMEOUT).map(drop)
    }

    /// Removes container `name`, running or not (`rm -f`).
    pub fn remove(&self, name: &str) -> Result<(), ContainerError> {
        self.output(&["rm", "-f", name], COMMAND_TIMEOUT).map(drop)
    }

    /// Removes every container labelled `prgate.run=<run>`, running or not, and only those;
    /// returns their ids. A run calls it when it starts (what an earlier, killed attempt left)
    /// and when it ends.
    pub fn remove_run(&self, run: &RunId) -> Result<Vec<String>, ContainerError> {
        let filter = format!("label={RUN_LABEL}={run}");
        let command = ["ps", "--all", "--no-trunc", "--filter", &filter, "--format", "{{.ID}}"];
        let output = self.output(&command, COMMAND_TIMEOUT)?;
        let ids: Vec<String> = output.split_whitespace().map(str::to_owned).collect();
        if let Some(odd) = ids.iter().find(|id| !is_container_id(id)) {
            return Err(ContainerError::Unexpected {
                engine: self.display(),
                command: command.join(" "),
                output: odd.clone(),
                expected: "container ids (hex digits)".to_owned(),
            });
        }
        if ids.is_empty() {
            return Ok(ids);
        }
        let mut remove = vec!["rm", "-f"];
        remove.extend(ids.iter().map(String::as_str));
        match self.output(&remove, COMMAND_TIMEOUT) {
            Err(error) if !error.is_no_such_container() => Err(error),
            _ => Ok(ids),
        }
    }

    /// What the engine has of image `reference` (a name with its tag, `name@digest`, or an id):
    /// `<engine> image inspect`. An image the engine does not have is an error: nothing is
    /// pulled.
    pub fn image_info(&self, reference: &str) -> Result<ImageInfo, ContainerError> {
        let command = ["image", "inspect", "--format", IMAGE_FORMAT, reference];
        let output = self.output(&command, COMMAND_TIMEOUT)?;
        parse_image_info(&output).ok_or_else(|| ContainerError::Unexpected {
            engine: self.display(),
            command: command.join(" "),
            output: output.trim().to_owned(),
            expected: "an image id and its repo digests".to_owned(),
        })
    }

    /// The preflight's question: the node's image is here and, when the profile pins a
    /// digest, has it. Returns what the engine has of it.
    pub fn check_image(&self, image: &Image) -> Result<ImageInfo, ContainerError> {
        let info = self.image_info(&image_reference(image))?;
        match &image.digest {
            Some(digest) if !info.has_digest(digest) => Err(ContainerError::DigestMismatch {
                image: image.name.clone(),
                digest: digest.clone(),
                found: info.repo_digests,
            }),
            _ => Ok(info),
        }
    }

    /// Runs the client with `arguments` and returns its standard output; an exit status that
    /// is not 0, or more than `timeout`, is an error with what it wrote to standard error.
    fn output(&self, arguments: &[&str], timeout: Duration) -> Result<String, ContainerError> {
        let command = arguments.join(" ");
        #[expect(
            clippy::disallowed_methods,
            reason = "the container engine's own commands (podman or docker), which prgate builds"
        )]
        let mut child = Command::new(&self.program)
            .args(arguments)
            .env_clear()
            .envs(self.client_environment().vars())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| ContainerError::Spawn {
                engine: self.display(),
                command: command.clone(),
                source,
            })?;
        let stdout = read_all(child.stdout.take());
        let stderr = read_all(child.stderr.take());
        let deadline = crate::process::deadline_after(timeout);
        let mut pause = Duration::from_millis(2);
        let status = loop {
            let waited = child.try_wait().map_err(|source| ContainerError::Spawn {
                engine: self.display(),
                command: command.clone(),
                source,
            })?;
            if let Some(status) = waited {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ContainerError::TimedOut { engine: self.display(), command, timeout });
            }
            thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        };
        let stdout = stdout.join().unwrap_or_default();
        let stderr = stderr.join().unwrap_or_default();
        if !status.success() {
            return Err(ContainerError::Failed {
                engine: self.display(),
                command,
                status: status.to_string(),
                stderr: shorten(String::from_utf8_lossy(&stderr).trim()),
            });
        }
        Ok(String::from_utf8_lossy(&stdout).into_owned())
    }

    fn display(&self) -> String {
        self.program.display().to_string()
    }
}

impl RunId {
    /// Checks `id`.
    pub fn new(id: &str) -> Result<RunId, ContainerError> {
        let fits = (1..=64).contains(&id.len())
            && id.starts_with(|char: char| char.is_ascii_alphanumeric())
            && id.chars().all(is_name_char);
        if fits {
            Ok(RunId(id.to_owned()))
        } else {
            Err(ContainerError::Request {
                what: "the run id".to_owned(),
                value: id.to_owned(),
                problem: "must be 1 to 64 ASCII letters, digits, '.', '_' and '-', starting with a letter or digit".to_owned(),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl ImageInfo {
    /// Whether `digest` (`sha256:...`) is one of the image's repo digests.
    pub fn has_digest(&self, digest: &str) -> bool {
        self.repo_digests
            .iter()
            .any(|repo_digest| repo_digest.rsplit_once('@').is_some_and(|(_, d)| d == digest))
    }
}

/// The image as `run` names it: `name@digest` when the profile pins a digest, else the name.
pub fn image_reference(image: &Image) -> String {
    match &image.digest {
        Some(digest) => format!("{}@{digest}", image.name),
        None => image.name.clone(),
    }
}

/// Where checkpoint `name` of `node` is inside a container: under [`MODELS_DIR`].
pub fn container_checkpoint_path(node: &NodeProfile, name: &str) -> Option<String> {
    node.checkpoints().get(name).map(|relative| format!("{MODELS_DIR}/{relative}"))
}

/// The network of `side` of the run: `prgate-<run>-base` or `prgate-<run>-pr`.
pub fn side_network_name(run: &RunId, side: NetworkSide) -> String {
    format!("prgate-{run}-{side}")
}

/// A container's name: `prgate-<run>-<purpose>`, the purpose's characters other than ASCII
/// letters, digits, `.`, `_` and `-` replaced by `-`, and cut to 64.
pub fn container_name(run: &RunId, purpose: &str) -> Result<String, ContainerError> {
    let purpose: String =
        purpose.chars().map(|char| if is_name_char(char) { char } else { '-' }).take(64).collect();
    if purpose.is_empty() {
        return Err(ContainerError::Request {
            what: "the container's purpose".to_owned(),
            value: purpose,
            problem: "is empty".to_owned(),
        });
    }
    Ok(format!("prgate-{run}-{purpose}"))
}

/// `image inspect`'s answer in [`IMAGE_FORMAT`]; podman writes the id without `sha256:`.
fn parse_image_info(output: &str) -> Option<ImageInfo> {
    let mut words = output.split_whitespace();
    let id = words.next()?;
    let hex = id.strip_prefix("sha256:").unwrap_or(id);
    if hex.len() != 64 || !hex.chars().all(|char| char.is_ascii_hexdigit()) {
        return None;
    }
    let repo_digests: Vec<String> = words.map(str::to_owned).collect();
    if repo_digests.iter().any(|digest| !digest.contains("@sha256:")) {
        return None;
    }
    Some(ImageInfo { id: format!("sha256:{}", hex.to_ascii_lowercase()), repo_digests })
}

fn is_container_id(id: &str) -> bool {
    (12..=64).contains(&id.len()) && id.chars().all(|char| char.is_ascii_hexdigit())
}

fn is_name_char(char: char) -> bool {
    char.is_ascii_alphanumeric() || matches!(char, '.' | '_' | '-')
}

fn find_executable(name: &str, path_env: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path_env?).map(|dir| dir.join(name)).find(|candidate| {
        candidate
            .metadata()
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    })
}

fn read_all(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// An engine's message, cut to 4 KiB.
/// Bytes, not characters as `prgate_scope::text::clip` counts: the cap bounds memory.
fn shorten(text: &str) -> String {
    const LIMIT: usize = 4096;
    if text.len() <= LIMIT {
        return text.to_owned();
    }
    let mut end = LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
