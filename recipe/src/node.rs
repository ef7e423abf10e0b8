//! The node profile: what one GPU node has, written by its administrator and trusted.
//!
//! The profile is local to the node (`prgate run --node FILE`), never read from a pull request.
//! It is parsed through private serde types that reject unknown keys, then checked into a
//! [`NodeProfile`]; every error names the file, the key and the bad value. Whether the GPUs,
//! the image and the checkpoints really are there is the preflight's question, not this
//! module's; it reads text and checks its shape. Next to the window's parser is the one
//! writer of a duration in the syntax prgate reads ([`write_duration`]: a window, a recipe's
//! limits, `--time-limit` and `--wait-lock`). The rest of this page is
//! `docs/node-profile.md`.
//!
#![doc = include_str!("../../docs/node-profile.md")]

use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

#[cfg(test)]
mod tests;

/// A realistic profile of an MI355X node, with a comment on every key.
pub const EXAMPLE: &str = include_str!("node/example.toml");

/// Secret `NAME`'s value is read at run time from the environment variable of this prefix
/// followed by the name (`PRGATE_SECRET_HF_TOKEN`); the profile lists names only.
pub const SECRET_ENV_PREFIX: &str = "PRGATE_SECRET_";

/// A checked node profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeProfile {
    name: String,
    hardware: String,
    gpus: Vec<Gpu>,
    image: Image,
    checkpoint_store: PathBuf,
    checkpoints: BTreeMap<String, String>,
    secrets: BTreeSet<String>,
    cache_dir: PathBuf,
    work_dir: PathBuf,
    ports: Option<RangeInclusive<u16>>,
    health: HealthSettings,
}

/// The `[health]` table: the GPU tools the preflight runs, the ECC limit, and when the
/// health ledger (`prgate_runner::health`) drains the node (docs/node.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthSettings {
    amd_smi: PathBuf,
    rocm_smi: PathBuf,
    max_correctable_ecc: u64,
    policy: HealthPolicy,
    dir: Option<PathBuf>,
    slurm_drain: bool,
    canary: Vec<String>,
}

/// When a node is drained (the `[health]` table's `strikes` and `window`); the health ledger
/// (`prgate_runner::health`) applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthPolicy {
    /// How many strikes drain the node.
    pub strikes: u32,
    /// The window they must fall in: older strikes do not count.
    pub window: Duration,
}

impl Default for HealthPolicy {
    /// Three strikes within seven days.
    fn default() -> HealthPolicy {
        HealthPolicy { strikes: 3, window: Duration::from_secs(7 * 24 * 3600) }
    }
}

/// The correctable ECC errors a GPU may have counted before the preflight calls it failing,
/// unless `health.max-correctable-ecc` says otherwise.
pub const DEFAULT_MAX_CORRECTABLE_ECC: u64 = 100;

impl Default for HealthSettings {
    fn default() -> HealthSettings {
        HealthSettings {
            amd_smi: PathBuf::from("amd-smi"),
            rocm_smi: PathBuf::from("rocm-smi"),
            max_correctable_ecc: DEFAULT_MAX_CORRECTABLE_ECC,
            policy: HealthPolicy::default(),
            dir: None,
            slurm_drain: false,
            canary: Vec::new(),
        }
    }
}

impl HealthSettings {
    /// The `amd-smi` program: a bare name is looked up in the `PATH`, then `/opt/rocm/bin`.
    pub fn amd_smi(&self) -> &Path {
        &self.amd_smi
    }

    /// The `rocm-smi` program, looked up like [`HealthSettings::amd_smi`].
    pub fn rocm_smi(&self) -> &Path {
        &self.rocm_smi
    }

    /// The most correctable ECC errors a GPU may have counted; more is a finding.
    pub fn max_correctable_ecc(&self) -> u64 {
        self.max_correctable_ecc
    }

    /// When the node is drained.
    pub fn policy(&self) -> &HealthPolicy {
        &self.policy
    }

    /// The ledgers' folder, when the profile names one (else `<cache-dir>/health`).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Whether prgate may drain a SLURM node itself (`scontrol update state=drain`), rather
    /// than only leave it out of its own jobs.
    pub fn slurm_drain(&self) -> bool {
        self.slurm_drain
    }

    /// The canary's command (no shell), run after the canary's preflight; empty: the
    /// preflight alone.
    pub fn canary(&self) -> &[String] {
        &self.canary
    }
}

/// One GPU the runner may hand out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// Its id as `amd-smi` and `HIP_VISIBLE_DEVICES` count it.
    pub id: u32,
    /// Its render node, e.g. `/dev/dri/renderD128`: the device a container is given.
    pub render_device: PathBuf,
}

/// The container image every PR-controlled command runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The image's name with its tag, e.g. `lmsysorg/sglang:v0.5.5-rocm700-mi35x`.
    pub name: String,
    /// `sha256:` and 64 hex digits, when the profile pins the image.
    pub digest: Option<String>,
}

/// Why a node profile was refused: the file and what is wrong, as every config file says it.
pub type NodeError = prgate_scope::ConfigError;

impl NodeProfile {
    /// Parses and checks the text of a node profile. `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<NodeProfile, NodeError> {
        let raw: RawNode = NodeError::parse_toml(text, file)?;
        let value_error = |key: &str, value: &dyn std::fmt::Debug, problem: String| {
            NodeError::value(file, key, value, problem)
        };

        check_name(&raw.name)
            .map_err(|problem| value_error("name", &raw.name, problem.to_string()))?;
        check_hardware(&raw.hardware)
            .map_err(|problem| value_error("hardware", &raw.hardware, problem.to_string()))?;
        let gpus = checked_gpus(&raw.gpus, file)?;
        let image = checked_image(raw.image, file)?;
        let checkpoint_store = absolute(&raw.checkpoint_store).map_err(|problem| {
            value_error("checkpoint-store", &raw.checkpoint_store, problem.to_string())
        })?;
        let cache_dir = absolute(&raw.cache_dir)
            .map_err(|problem| value_error("cache-dir", &raw.cache_dir, problem.to_string()))?;
        let work_dir = absolute(&raw.work_dir)
            .map_err(|problem| value_error("work-dir", &raw.work_dir, problem.to_string()))?;
        check_checkpoints(&raw.checkpoints, file)?;
        let secrets = checked_secrets(&raw.secrets, file)?;
        let ports = raw.ports.map(|ports| checked_ports(ports, file)).transpose()?;
        let health = match raw.health {
            None => HealthSettings::default(),
            Some(health) => health_settings(health, &value_error)?,
        };

        Ok(NodeProfile {
            name: raw.name,
            hardware: raw.hardware,
            gpus,
            image,
            checkpoint_store,
            checkpoints: raw.checkpoints,
            secrets,
            cache_dir,
            work_dir,
            ports,
            health,
        })
    }

    /// The node's name, as evidence records it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's hardware, lowercase, e.g. `mi355x`.
    pub fn hardware(&self) -> &str {
        &self.hardware
    }

    /// The GPUs prgate may use, in the order it hands them out.
    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    /// How many GPUs prgate may use.
    pub fn gpu_count(&self) -> usize {
        self.gpus.len()
    }

    /// The container image.
    pub fn image(&self) -> &Image {
        &self.image
    }

    /// The directory the checkpoints are in (mounted read-only into containers).
    pub fn checkpoint_store(&self) -> &Path {
        &self.checkpoint_store
    }

    /// The checkpoints this node has: name → path relative to the store.
    pub fn checkpoints(&self) -> &BTreeMap<String, String> {
        &self.checkpoints
    }

    /// Where checkpoint `name` is on this node, when the node has it.
    pub fn checkpoint_path(&self, name: &str) -> Option<PathBuf> {
        self.checkpoints.get(name).map(|relative| self.checkpoint_store.join(relative))
    }

    /// The names of the secrets this node has; their values are in the environment.
    pub fn secrets(&self) -> &BTreeSet<String> {
        &self.secrets
    }

    /// Whether the node has secret `name`.
    pub fn has_secret(&self, name: &str) -> bool {
        self.secrets.contains(name)
    }

    /// The directory for caches that outlive a run (base results, exported trees).
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// The directory runs work in.
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The ports servers may listen on, when the profile restricts them; otherwise any free
    /// port the system gives.
    pub fn ports(&self) -> Option<&RangeInclusive<u16>> {
        self.ports.as_ref()
    }

    /// The `[health]` table, or its defaults.
    pub fn health(&self) -> &HealthSettings {
        &self.health
    }
}

/// The `[gpus]` table: at least one id, one render device per id in the same order, no id and
/// no device listed twice.
fn checked_gpus(raw: &RawGpus, file: &str) -> Result<Vec<Gpu>, NodeError> {
    if raw.ids.is_empty() {
        return Err(NodeError::key(file, "gpus.ids", "is empty: list the GPUs prgate may use"));
    }
    if raw.ids.len() != raw.render_devices.len() {
        return Err(NodeError::key(
            file,
            "gpus.render-devices",
            format!(
                "its length differs from gpus.ids' ({} and {}): list one render device per id, \
                 in the same order",
                raw.render_devices.len(),
                raw.ids.len()
            ),
        ));
    }
    let mut gpus: Vec<Gpu> = Vec::with_capacity(raw.ids.len());
    for (index, (id, device)) in raw.ids.iter().zip(&raw.render_devices).enumerate() {
        if gpus.iter().any(|gpu| gpu.id == *id) {
            return Err(NodeError::value(
                file,
                &format!("gpus.ids[{index}]"),
                id,
                "is listed twice".to_owned(),
            ));
        }
        let key = format!("gpus.render-devices[{index}]");
        check_render_device(device)
            .map_err(|problem| NodeError::value(file, &key, device, problem.to_string()))?;
        if gpus.iter().any(|gpu| gpu.render_device == Path::new(device)) {
            return Err(NodeError::value(file, &key, device, "is listed twice".to_owned()));
        }
        gpus.push(Gpu { id: *id, render_device: PathBuf::from(device) });
    }
    Ok(gpus)
}

/// The `[image]` table: a name with its tag (no blank, no `@`), and a digest when pinned that
/// is `sha256:` and 64 lowercase hex digits.
fn checked_image(raw: RawImage, file: &str) -> Result<Image, NodeError> {
    if raw.name.is_empty() || raw.name.contains(char::is_whitespace) || raw.name.contains('@') {
        return Err(NodeError::value(
            file,
            "image.name",
            &raw.name,
            "must be an image name with its tag, such as \"lmsysorg/sglang:v0.5.5-rocm700-mi35x\"\n\
             hint: write a digest in image.digest, not after an @"
                .to_owned(),
        ));
    }
    if let Some(digest) = &raw.digest {
        let hex = digest.strip_prefix("sha256:").unwrap_or_default();
        if hex.len() != 64 || !hex.chars().all(|char| matches!(char, '0'..='9' | 'a'..='f')) {
            return Err(NodeError::value(
                file,
                "image.digest",
                digest,
                "must be \"sha256:\" and 64 lowercase hex digits".to_owned(),
            ));
        }
    }
    Ok(Image { name: raw.name, digest: raw.digest })
}

/// The `[checkpoints]` table: each name plain, each path relative to the store and plain.
fn check_checkpoints(checkpoints: &BTreeMap<String, String>, file: &str) -> Result<(), NodeError> {
    for (name, path) in checkpoints {
        check_name(name).map_err(|problem| {
            NodeError::key(file, &format!("checkpoints.{name:?}"), format!("the name {problem}"))
        })?;
        check_relative_path(path).map_err(|problem| {
            NodeError::value(file, &format!("checkpoints.{name}"), path, problem.to_string())
        })?;
    }
    Ok(())
}

/// The `secrets` list: each a secret's name, none listed twice.
fn checked_secrets(raw: &[String], file: &str) -> Result<BTreeSet<String>, NodeError> {
    let mut secrets = BTreeSet::new();
    for (index, secret) in raw.iter().enumerate() {
        let key = format!("secrets[{index}]");
        check_secret_name(secret)
            .map_err(|problem| NodeError::value(file, &key, secret, problem.to_string()))?;
        if !secrets.insert(secret.clone()) {
            return Err(NodeError::value(file, &key, secret, "is listed twice".to_owned()));
        }
    }
    Ok(secrets)
}

/// The `[ports]` table: an unprivileged first port, and a last one not below it.
fn checked_ports(raw: RawPorts, file: &str) -> Result<RangeInclusive<u16>, NodeError> {
    if raw.first < 1024 {
        return Err(NodeError::value(
            file,
            "ports.first",
            &raw.first,
            "must be 1024 or more: prgate does not bind privileged ports".to_owned(),
        ));
    }
    if raw.last < raw.first {
        return Err(NodeError::value(
            file,
            "ports.last",
            &raw.last,
            format!("is below ports.first ({})", raw.first),
        ));
    }
    Ok(raw.first..=raw.last)
}

type ValueError<'a> = dyn Fn(&str, &dyn std::fmt::Debug, String) -> NodeError + 'a;

fn health_settings(
    raw: RawHealth,
    value_error: &ValueError<'_>,
) -> Result<HealthSettings, NodeError> {
    let defaults = HealthSettings::default();
    let program = |key: &str, value: Option<String>, default: PathBuf| match value {
        None => Ok(default),
        Some(text) if !text.is_empty() && !text.contains(char::is_whitespace) => {
            Ok(PathBuf::from(text))
        }
        Some(text) => Err(value_error(
            key,
            &text,
            "must be a program's name or path, without blanks".to_owned(),
        )),
    };
    let amd_smi = program("health.amd-smi", raw.amd_smi, defaults.amd_smi)?;
    let rocm_smi = program("health.rocm-smi", raw.rocm_smi, defaults.rocm_smi)?;
    let strikes = raw.strikes.unwrap_or(defaults.policy.strikes);
    if strikes == 0 {
        return Err(value_error(
            "health.strikes",
            &strikes,
            "must be 1 or more: how many strikes drain the node".to_owned(),
        ));
    }
    let window = match raw.window {
        None => defaults.policy.window,
        Some(text) => parse_window(&text)
            .map_err(|problem| value_error("health.window", &text, problem.to_string()))?,
    };
    let dir = raw
        .dir
        .map(|dir| {
            absolute(&dir).map_err(|problem| value_error("health.dir", &dir, problem.to_string()))
        })
        .transpose()?;
    let canary = raw.canary.unwrap_or_default();
    if canary.first().is_some_and(String::is_empty) {
        return Err(value_error("health.canary", &canary, "names no program".to_owned()));
    }
    Ok(HealthSettings {
        amd_smi,
        rocm_smi,
        max_correctable_ecc: raw.max_correctable_ecc.unwrap_or(defaults.max_correctable_ecc),
        policy: HealthPolicy { strikes, window },
        dir,
        slurm_drain: raw.slurm_drain.unwrap_or(false),
        canary,
    })
}

/// A window: whole days (`7d`), or a duration such as `36h` or `90m`.
fn parse_window(text: &str) -> Result<Duration, ValueProblem> {
    if let Some(days) = text.strip_suffix('d') {
        return match days.parse::<u64>() {
            Ok(days) if days > 0 => Ok(Duration::from_secs(days.saturating_mul(86_400))),
            _ => Err(ValueProblem::NotAWindow),
        };
    }
    crate::recipe::parse_duration(text).map_err(|_problem| ValueProblem::NotAWindow)
}

/// How [`write_duration`] spells a duration. Each reads back as the same whole seconds:
/// through [`crate::recipe::parse_duration`] (`--time-limit`, `--wait-lock`, a recipe's
/// limits), and [`Spelling::LargestUnit`] through a node's `health.window`, which reads days
/// too. Zero is written `0s`, which no parser takes (a duration is longer than zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spelling {
    /// Hours, minutes and seconds, largest first, each when not zero: `1h30m`, `45s`.
    Units,
    /// One number in the largest unit it is a whole number of, days first: `7d`, `36h`,
    /// `90m`, `86401s`. Days are a window's unit only.
    LargestUnit,
    /// Whole seconds: `90s`.
    Seconds,
}

/// The units a duration is written in, largest first, with their seconds.
const UNITS: [(&str, u64); 4] = [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)];

/// `duration`'s whole seconds (a fraction is dropped) as `spelling` writes them.
pub fn write_duration(duration: Duration, spelling: Spelling) -> String {
    let seconds = duration.as_secs();
    match spelling {
        Spelling::Seconds => format!("{seconds}s"),
        Spelling::LargestUnit => {
            let whole =
                UNITS.iter().find(|(_, size)| seconds >= *size && seconds.is_multiple_of(*size));
            let (unit, size) = whole.copied().unwrap_or(("s", 1));
            format!("{}{unit}", seconds / size)
        }
        Spelling::Units => {
            let mut text = String::new();
            let mut left = seconds;
            // Days are not a unit `parse_duration` reads: hours, minutes and seconds only.
            for (unit, size) in &UNITS[1..] {
                if left >= *size {
                    text.push_str(&format!("{}{unit}", left / size));
                    left %= size;
                }
            }
            if text.is_empty() { "0s".to_owned() } else { text }
        }
    }
}

/// The environment variable that holds secret `name`'s value at run time.
pub fn secret_env_var(name: &str) -> String {
    format!("{SECRET_ENV_PREFIX}{name}")
}

/// A secret's name: an uppercase environment variable suffix such as `HF_TOKEN`.
pub(crate) fn check_secret_name(name: &str) -> Result<(), ValueProblem> {
    let fits = name.starts_with(|char: char| char.is_ascii_uppercase())
        && name
            .chars()
            .all(|char| char.is_ascii_uppercase() || char.is_ascii_digit() || char == '_');
    if fits { Ok(()) } else { Err(ValueProblem::NotASecretName) }
}

/// A hardware name: lowercase letters, digits, `-` and `_`, such as `mi355x`.
pub(crate) fn check_hardware(name: &str) -> Result<(), ValueProblem> {
    let fits = !name.is_empty()
        && name.chars().all(|char| {
            char.is_ascii_lowercase() || char.is_ascii_digit() || char == '-' || char == '_'
        });
    if fits { Ok(()) } else { Err(ValueProblem::NotAHardwareName) }
}

/// A plain name (a node, a checkpoint, a benchmark): ASCII letters, digits, `.`, `_` and `-`,
/// not `.` or `..`.
pub fn check_name(name: &str) -> Result<(), ValueProblem> {
    let fits = !name.is_empty()
        && name != "."
        && name != ".."
        && name.chars().all(|char| char.is_ascii_alphanumeric() || matches!(char, '.' | '_' | '-'));
    if fits { Ok(()) } else { Err(ValueProblem::NotAPlainName) }
}

/// A relative `/`-separated path with no empty, `.` or `..` segment.
pub(crate) fn check_relative_path(path: &str) -> Result<(), ValueProblem> {
    if path.is_empty() {
        return Err(ValueProblem::Empty);
    }
    if path.starts_with('/') {
        return Err(ValueProblem::NotRelative);
    }
    if path.split('/').any(|segment| segment.is_empty() || segment == "." || segment == "..") {
        return Err(ValueProblem::NotAPlainPath);
    }
    Ok(())
}

fn absolute(path: &str) -> Result<PathBuf, ValueProblem> {
    match path.strip_prefix('/') {
        Some("") => Err(ValueProblem::Root),
        Some(rest) if check_relative_path(rest).is_ok() => Ok(PathBuf::from(path)),
        _ => Err(ValueProblem::NotAnAbsolutePath),
    }
}

fn check_render_device(device: &str) -> Result<(), ValueProblem> {
    let number = device.strip_prefix("/dev/dri/renderD").unwrap_or_default();
    if !number.is_empty() && number.chars().all(|char| char.is_ascii_digit()) {
        Ok(())
    } else {
        Err(ValueProblem::NotARenderNode)
    }
}

/// Why a name, a path or a window in a config file does not fit its key: the `<problem>` of
/// `<file>: <key> = <value>: <problem>` ([`prgate_scope::ConfigError`]), shared by the node
/// profile and the recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ValueProblem {
    #[error("must be a window such as \"7d\", \"36h\" or \"90m\"")]
    NotAWindow,
    #[error("must be a secret's name in capitals, digits and _, such as \"HF_TOKEN\"")]
    NotASecretName,
    #[error("must be a hardware name in lowercase letters, digits, - and _, such as \"mi355x\"")]
    NotAHardwareName,
    #[error("must be a plain name: ASCII letters, digits, '.', '_' and '-'")]
    NotAPlainName,
    #[error("is empty")]
    Empty,
    #[error("must be relative (no leading /)")]
    NotRelative,
    #[error("must be a plain path: no empty, . or .. segments")]
    NotAPlainPath,
    #[error("must not be the root directory")]
    Root,
    #[error("must be an absolute path with no empty, . or .. segments")]
    NotAnAbsolutePath,
    #[error("must be a render node such as \"/dev/dri/renderD128\"")]
    NotARenderNode,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawNode {
    name: String,
    hardware: String,
    gpus: RawGpus,
    image: RawImage,
    checkpoint_store: String,
    #[serde(default)]
    checkpoints: BTreeMap<String, String>,
    #[serde(default)]
    secrets: Vec<String>,
    cache_dir: String,
    work_dir: String,
    ports: Option<RawPorts>,
    health: Option<RawHealth>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawHealth {
    amd_smi: Option<String>,
    rocm_smi: Option<String>,
    max_correctable_ecc: Option<u64>,
    strikes: Option<u32>,
    window: Option<String>,
    dir: Option<String>,
    slurm_drain: Option<bool>,
    canary: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawGpus {
    ids: Vec<u32>,
    render_devices: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawImage {
    name: String,
    digest: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawPorts {
    first: u16,
    last: u16,
}
