//! The `<engine> run` command line of one [`ContainerRequest`], and every isolation check on
//! it: the mounts (read-only, never a host path that would open the node), the labels, the
//! environment, the GPUs, the network, the capabilities. A request that would break one is an
//! error, not a weaker container. Starting and stopping the container is the parent's.

use std::path::{Path, PathBuf};

use super::{
    ContainerError, ContainerNetwork, ContainerRequest, DATASETS_DIR, EngineKind, GPUS_LABEL,
    MODELS_DIR, OUT_DIR, PODMAN_DEFAULT_VARIABLES, PURPOSE_LABEL, RUN_LABEL, TREE_DIR,
    image_reference, is_name_char, side_network_name,
};

/// Host paths that are never mounted, nor any directory inside or above them: the kernel's
/// and the system's files, and where the engines keep their sockets and their data.
const FORBIDDEN_SOURCES: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/var/run",
    "/etc",
    "/boot",
    "/var/lib/docker",
    "/var/lib/containers",
];

/// The arguments of `<engine> run` for `request`, checked.
pub(super) fn run_arguments(
    request: &ContainerRequest<'_>,
    name: &str,
    kind: EngineKind,
) -> Result<Vec<String>, ContainerError> {
    let mounts = Mounts::of(request)?;
    check_environment(request)?;
    let devices = devices(request)?;
    check_request(request)?;
    let labels = labels(request, name)?;
    let mut arguments: Vec<String> =
        ["run", "--rm", "--init", "--pull", "never", "--name", name].map(str::to_owned).to_vec();
    for label in labels {
        arguments.extend(["--label".to_owned(), label]);
    }
    let network = match request.network {
        // Nothing to reach and nothing reaches it: no network namespace with a route, no
        // outbound traffic, no node service (docs/container.md, "Network").
        ContainerNetwork::None => "none".to_owned(),
        // Its side's internal network: the host reaches it there, it reaches nothing off it
        // (not the other side's network either).
        ContainerNetwork::Side(side) => side_network_name(request.run, side),
        // The server's namespace: its loopback is this container's, nothing else is added.
        ContainerNetwork::JoinedTo(joined) => format!("container:{joined}"),
    };
    arguments.extend(["--network".to_owned(), network]);
    arguments.extend(["--security-opt", "no-new-privileges", "--shm-size"].map(str::to_owned));
    arguments.push(format!("{}g", request.shm_gib));
    if !devices.is_empty() {
        arguments.extend(["--device".to_owned(), "/dev/kfd".to_owned()]);
        for device in &devices {
            arguments.extend(["--device".to_owned(), device.display().to_string()]);
        }
        arguments.extend(["--group-add".to_owned(), "video".to_owned()]);
    }
    arguments.extend(mounts.arguments());
    for variable in variables(request, mounts.datasets.is_some(), devices.len()) {
        arguments.extend(["-e".to_owned(), variable]);
    }
    if kind == EngineKind::Podman {
        // Podman adds these of its own (docker does not): the environment stays the image's
        // and the request's on both engines.
        for variable in PODMAN_DEFAULT_VARIABLES {
            arguments.extend(["--unsetenv".to_owned(), (*variable).to_owned()]);
        }
    }
    arguments.push(image_reference(request.node.image()));
    arguments.extend(request.command.iter().cloned());
    Ok(arguments)
}

/// A request's value refused: `what`, the value, and why.
fn invalid(what: &str, value: String, problem: &str) -> ContainerError {
    ContainerError::Request { what: what.to_owned(), value, problem: problem.to_owned() }
}

/// The host folders a container mounts, each checked ([`mount_source`]) and none inside
/// another: `(what, resolved path)`.
struct Mounts<'w> {
    store: (&'w str, String),
    tree: (&'w str, String),
    out: (&'w str, String),
    datasets: Option<(&'w str, String)>,
}

impl Mounts<'_> {
    fn of(request: &ContainerRequest<'_>) -> Result<Mounts<'static>, ContainerError> {
        let mounts = Mounts {
            store: mount_source("the checkpoint store", request.node.checkpoint_store())?,
            tree: mount_source("the tree", request.tree)?,
            out: mount_source("the output directory", request.out)?,
            datasets: request
                .datasets
                .map(|path| mount_source("the dataset cache", path))
                .transpose()?,
        };
        let mut sources = vec![&mounts.store, &mounts.tree, &mounts.out];
        sources.extend(mounts.datasets.as_ref());
        let pairs = sources.iter().enumerate().flat_map(|(index, first)| {
            sources[index + 1..].iter().map(move |second| (*first, *second))
        });
        for (first, second) in pairs {
            if Path::new(&first.1).starts_with(&second.1)
                || Path::new(&second.1).starts_with(&first.1)
            {
                return Err(ContainerError::Overlap {
                    first: first.0.to_owned(),
                    first_path: first.1.clone(),
                    second: second.0.to_owned(),
                    second_path: second.1.clone(),
                });
            }
        }
        Ok(mounts)
    }

    /// The engine's `--mount`s (the checkpoints and datasets read-only) and the work folder.
    fn arguments(&self) -> Vec<String> {
        let mut arguments = vec![
            "--mount".to_owned(),
            format!("type=bind,src={},dst={MODELS_DIR},readonly", self.store.1),
            "--mount".to_owned(),
            format!("type=bind,src={},dst={TREE_DIR}", self.tree.1),
            "--mount".to_owned(),
            format!("type=bind,src={},dst={OUT_DIR}", self.out.1),
            "--workdir".to_owned(),
            TREE_DIR.to_owned(),
        ];
        if let Some(datasets) = &self.datasets {
            arguments.extend([
                "--mount".to_owned(),
                format!("type=bind,src={},dst={DATASETS_DIR},readonly", datasets.1),
            ]);
        }
        arguments
    }
}

/// The request's environment, checked: built for this node, its values still valid.
fn check_environment(request: &ContainerRequest<'_>) -> Result<(), ContainerError> {
    let node = request.node;
    if request.env.node_secrets() != node.secrets() {
        return Err(invalid(
            "the environment",
            node.name().to_owned(),
            "was built for another node: its secrets differ",
        ));
    }
    request.env.recheck()?;
    Ok(())
}

/// The request's network, shared memory and command, checked.
fn check_request(request: &ContainerRequest<'_>) -> Result<(), ContainerError> {
    if let ContainerNetwork::JoinedTo(joined) = request.network {
        let ours = joined
            .strip_prefix(&format!("prgate-{}-", request.run))
            .is_some_and(|purpose| !purpose.is_empty() && purpose.chars().all(is_name_char));
        if !ours {
            return Err(invalid(
                "the network",
                joined.to_owned(),
                "is not the name of a container of this run",
            ));
        }
    }
    if !(1..=1024).contains(&request.shm_gib) {
        return Err(invalid(
            "the shared memory size (GiB)",
            request.shm_gib.to_string(),
            "must be 1 to 1024",
        ));
    }
    if request.command.is_empty() {
        return Err(ContainerError::EmptyCommand);
    }
    if let Some(argument) = request.command.iter().find(|argument| argument.contains('\0')) {
        return Err(invalid("the command's argument", argument.clone(), "contains a NUL byte"));
    }
    Ok(())
}

/// The render devices of the request's GPUs, each one of the node's and asked for once.
fn devices(request: &ContainerRequest<'_>) -> Result<Vec<PathBuf>, ContainerError> {
    let node = request.node;
    let mut devices = Vec::new();
    for id in request.gpus {
        let gpu = node.gpus().iter().find(|gpu| gpu.id == *id).ok_or_else(|| {
            invalid("GPU", id.to_string(), &format!("is not one of node {}'s GPUs", node.name()))
        })?;
        if devices.contains(&gpu.render_device) {
            return Err(invalid("GPU", id.to_string(), "is asked for twice"));
        }
        devices.push(gpu.render_device.clone());
    }
    Ok(devices)
}

/// The container's labels: its run, its purpose, its GPUs and the request's own, checked.
fn labels(request: &ContainerRequest<'_>, name: &str) -> Result<Vec<String>, ContainerError> {
    let purpose = name.strip_prefix(&format!("prgate-{}-", request.run)).unwrap_or(name);
    let mut labels =
        vec![format!("{RUN_LABEL}={}", request.run), format!("{PURPOSE_LABEL}={purpose}")];
    if !request.gpus.is_empty() {
        let ids: Vec<String> = request.gpus.iter().map(u32::to_string).collect();
        labels.push(format!("{GPUS_LABEL}={}", ids.join(",")));
    }
    for (key, value) in request.labels {
        check_label(key, value)?;
        labels.push(format!("{key}={value}"));
    }
    Ok(labels)
}

/// The container's environment, `NAME=value`: offline for the hub, the datasets' cache when
/// mounted, the GPUs renumbered from 0, then the request's variables and secrets' names.
fn variables(request: &ContainerRequest<'_>, datasets: bool, gpus: usize) -> Vec<String> {
    let mut variables = vec!["HF_HUB_OFFLINE=1".to_owned(), "TRANSFORMERS_OFFLINE=1".to_owned()];
    if datasets {
        variables.push("HF_DATASETS_OFFLINE=1".to_owned());
        variables.push(format!("HF_HUB_CACHE={DATASETS_DIR}/hub"));
    }
    if gpus > 0 {
        let visible: Vec<String> = (0..gpus).map(|index| index.to_string()).collect();
        variables.push(format!("HIP_VISIBLE_DEVICES={}", visible.join(",")));
    }
    variables.extend(request.env.vars().map(|(name, value)| format!("{name}={value}")));
    variables.extend(request.env.secrets().map(str::to_owned));
    variables
}

/// A host directory that may be mounted, as the mount names it: absolute, existing, resolved
/// (symbolic links followed), text a `--mount` can carry, and clear of [`FORBIDDEN_SOURCES`],
/// of `/` and of the runner's home directory and what holds it. Returns `what` with it.
fn mount_source<'w>(what: &'w str, path: &Path) -> Result<(&'w str, String), ContainerError> {
    let invalid = |problem: String| ContainerError::Request {
        what: what.to_owned(),
        value: path.display().to_string(),
        problem,
    };
    if !path.is_absolute() {
        return Err(invalid("must be an absolute path".to_owned()));
    }
    let resolved =
        path.canonicalize().map_err(|error| invalid(format!("cannot be resolved: {error}")))?;
    if !resolved.is_dir() {
        return Err(invalid("is not a directory".to_owned()));
    }
    let text = resolved.to_str().ok_or_else(|| invalid("is not UTF-8".to_owned()))?.to_owned();
    if text.contains([',', '=', '"', '\n', '\r']) {
        return Err(invalid(format!(
            "resolves to {text}, which a mount cannot carry (a , = \" or line break)"
        )));
    }
    if resolved == Path::new("/") {
        return Err(invalid("is the root directory".to_owned()));
    }
    if let Some(forbidden) = FORBIDDEN_SOURCES
        .iter()
        .map(Path::new)
        .find(|forbidden| resolved.starts_with(forbidden) || forbidden.starts_with(&resolved))
    {
        return Err(invalid(format!(
            "resolves to {text}, which is, holds or is inside {}: never mounted",
            forbidden.display()
        )));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if let Some(home) = home.filter(|home| home.is_absolute()) {
        let home = home.canonicalize().unwrap_or(home);
        if home.starts_with(&resolved) {
            return Err(invalid(format!(
                "resolves to {text}, which is or holds the home directory {}: never mounted",
                home.display()
            )));
        }
    }
    Ok((what, text))
}

/// A label of a request: a key `prgate.<lowercase letters, digits, . and ->` other than the
/// launcher's own, and a value with no control characters, at most 256 bytes.
fn check_label(key: &str, value: &str) -> Result<(), ContainerError> {
    let invalid = |problem: &str| ContainerError::Request {
        what: "the label".to_owned(),
        value: format!("{key}={value}"),
        problem: problem.to_owned(),
    };
    let rest = key.strip_prefix("prgate.").unwrap_or_default();
    let key_fits = !rest.is_empty()
        && rest.chars().all(|char| {
            char.is_ascii_lowercase() || char.is_ascii_digit() || matches!(char, '.' | '-')
        });
    if !key_fits {
        return Err(invalid("its key must be prgate. and lowercase letters, digits, . and -"));
    }
    if [RUN_LABEL, PURPOSE_LABEL, GPUS_LABEL].contains(&key) {
        return Err(invalid("is the launcher's own label"));
    }
    if value.len() > 256 || value.chars().any(char::is_control) {
        return Err(invalid("its value must be at most 256 bytes, with no control characters"));
    }
    Ok(())
}
