//! The preflight: before any install, whether this node has what the run needs.
//!
//! [`Preflight::run`] checks, in this order:
//!
//! 1. every GPU of the node profile: its render node exists, the GPU is listed by the node's
//!    management tool, and at least [`Thresholds::min_free_vram_percent`] of its memory is
//!    free; and `/dev/kfd` exists. The memory comes from `amd-smi metric --mem-usage --json`,
//!    else `rocm-smi --showmeminfo vram --json`, else sysfs ("Sources of a GPU's memory"
//!    below);
//! 2. free disk space (`statvfs`) in the work and cache directories, against
//!    [`Thresholds::min_free_work_bytes`] and [`Thresholds::min_free_cache_bytes`];
//! 3. every checkpoint the plan's recipes need: the profile lists it and its path exists under
//!    the checkpoint store (a folder, not empty);
//! 4. the image, through an [`ImageCheck`] when the caller has one: the container
//!    [`Engine`] is one (`<engine> image inspect`, and the profile's digest when it pins one).
//!
//! A failed preflight is evidence, not a crash: [`PreflightFailure`] lists every
//! [`Finding`] (`check`, `subject`, `problem`), and [`PreflightFailure::to_not_run`] turns them
//! into the `not-run` reason and detail the run records for its steps. Missing checkpoints
//! block only the models that need them ([`PreflightFailure::blocks_run`],
//! [`PreflightFailure::missing_checkpoint`]).
//!
//! The probes are injectable ([`Probes`]): commands run through a [`CommandRunner`]
//! ([`SystemCommands`] starts them under [`ChildGroup`] with a timeout), and the device nodes
//! and sysfs are read under a root folder, `/` on a node and a fake tree in tests.
//!
//! What it leaves to others: which checkpoints a plan needs (the run reads the recipes), how
//! an image is inspected (the container engine), and who else is running on the host (the
//! [host lock](crate::lock)). The rest of this page is `docs/preflight.md`.
//!
#![doc = include_str!("../../docs/preflight.md")]

mod memory;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use prgate_gate::evidence::NotRunReason;

use crate::container::Engine;
use crate::node::{Image, NodeProfile};
use crate::process::{ChildGroup, Environment, Finished, ProcessSpec};

use memory::{Listed, Vram};

/// A tool's output read into the GPUs it lists.
type ParseListed = fn(&str) -> Result<Listed, String>;

/// The `amd-smi` command the preflight runs.
pub const AMD_SMI: &[&str] = &["amd-smi", "metric", "--mem-usage", "--json"];
/// The `rocm-smi` command the preflight runs when `amd-smi` gives no answer.
pub const ROCM_SMI: &[&str] = &["rocm-smi", "--showmeminfo", "vram", "--json"];
/// Where ROCm installs its tools; [`SystemCommands::new`] looks there after the runner's
/// `PATH`.
pub const ROCM_BIN: &str = "/opt/rocm/bin";
/// How long a probe command may take unless the caller says otherwise.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

const GIB: u64 = 1024 * 1024 * 1024;

/// What to check and with what.
#[derive(Debug, Clone, Copy)]
pub struct Preflight<'a> {
    /// The node: its GPUs, directories, checkpoint store and image.
    pub node: &'a NodeProfile,
    /// The checkpoints the plan's recipes need, by the names the node profile gives them.
    pub checkpoints: &'a [String],
    pub thresholds: Thresholds,
    pub probes: Probes<'a>,
    /// The container engine's image check; `None` skips the image (the local executor).
    pub image_check: Option<&'a dyn ImageCheck>,
}

/// Where the probes read the machine.
#[derive(Debug, Clone, Copy)]
pub struct Probes<'a> {
    /// Runs `amd-smi` and `rocm-smi`.
    pub commands: &'a dyn CommandRunner,
    /// The root the device nodes (`dev/dri`, `dev/kfd`) and sysfs (`sys/class/drm`) are read
    /// under: `/` on a node.
    pub root: &'a Path,
}

/// The limits a node must meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// The share of each GPU's memory that must be free, in percent. An idle GPU has all but
    /// a few hundred MiB free; one that another process (a server left running) holds has
    /// far less.
    pub min_free_vram_percent: u8,
    /// The free space the work directory's file system must have, in bytes: two exported
    /// trees, their installs, logs and results.
    pub min_free_work_bytes: u64,
    /// The free space the cache directory's file system must have, in bytes.
    pub min_free_cache_bytes: u64,
}

impl Default for Thresholds {
    /// 90 % of every GPU's memory free, 50 GiB free for the work directory, 10 GiB for the
    /// cache.
    fn default() -> Thresholds {
        Thresholds {
            min_free_vram_percent: 90,
            min_free_work_bytes: 50 * GIB,
            min_free_cache_bytes: 10 * GIB,
        }
    }
}

/// Runs a probe command and returns what it printed.
pub trait CommandRunner: fmt::Debug {
    /// Runs `argv` (no shell) and returns its output when it exits with status 0.
    fn run(&self, argv: &[&str]) -> Result<String, CommandError>;
}

/// Whether the node has the run's image: the container engine's question.
pub trait ImageCheck: fmt::Debug {
    /// `Ok` when `image` is present on the node (with the profile's digest, when it pins
    /// one); otherwise the problem in words.
    fn check_image(&self, image: &Image) -> Result<(), String>;
}

/// The container engine answers the image question with [`Engine::check_image`]: the image is
/// there and, when the profile pins a digest, has it. Nothing is pulled.
impl ImageCheck for Engine {
    fn check_image(&self, image: &Image) -> Result<(), String> {
        Engine::check_image(self, image).map(|_info| ()).map_err(|error| error.to_string())
    }
}

/// A probe command that gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{program}: {problem}")]
pub struct CommandError {
    pub program: String,
    pub problem: String,
}

/// Probe commands run on this machine, each under [`ChildGroup`] with a timeout; its output
/// (standard output and error together) is kept in `<log_dir>/<program>.log`.
#[derive(Debug, Clone)]
pub struct SystemCommands {
    /// The commands' environment; its `PATH` is where they are looked up.
    pub env: Environment,
    /// Where the commands run and their logs go; created when missing.
    pub log_dir: PathBuf,
    /// How long a command may take before it is stopped and counts as no answer.
    pub timeout: Duration,
}

impl SystemCommands {
    /// The runner's minimal environment with [`ROCM_BIN`] after its `PATH`, and the
    /// [default timeout](DEFAULT_COMMAND_TIMEOUT).
    pub fn new(log_dir: &Path) -> SystemCommands {
        let mut path = std::env::var_os("PATH").unwrap_or_default();
        if !path.is_empty() {
            path.push(":");
        }
        path.push(ROCM_BIN);
        SystemCommands {
            env: Environment::minimal().set("PATH", path),
            log_dir: log_dir.to_path_buf(),
            timeout: DEFAULT_COMMAND_TIMEOUT,
        }
    }
}

impl CommandRunner for SystemCommands {
    fn run(&self, argv: &[&str]) -> Result<String, CommandError> {
        let program = argv.first().copied().unwrap_or_default();
        let error = |problem: String| CommandError { program: program.to_owned(), problem };
        std::fs::create_dir_all(&self.log_dir).map_err(|source| {
            error(format!("cannot create {}: {source}", self.log_dir.display()))
        })?;
        let log = self.log_dir.join(format!("{program}.log"));
        // The log is appended to; a run's answer is this run's output only.
        match std::fs::remove_file(&log) {
            Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                return Err(error(format!("cannot remove {}: {source}", log.display())));
            }
            _ => {}
        }
        let spec = ProcessSpec {
            argv: argv.iter().map(OsString::from).collect(),
            env: self.env.clone(),
            cwd: self.log_dir.clone(),
            log: log.clone(),
            grace: Duration::from_secs(2),
        };
        let mut child = ChildGroup::spawn(&spec).map_err(|source| error(source.to_string()))?;
        let finished =
            child.wait_with_timeout(self.timeout).map_err(|source| error(source.to_string()))?;
        let output = std::fs::read_to_string(&log).unwrap_or_default();
        match finished {
            Finished::Exited(status) if status.success() => Ok(output),
            Finished::Exited(status) => {
                let tail = crate::process::tail(&log, 5).unwrap_or_default();
                Err(error(format!("{status}: {}", tail.trim())))
            }
            Finished::TimedOut(_) | Finished::Stalled { .. } => Err(error(format!(
                "gave no answer within {}s and was stopped",
                self.timeout.as_secs()
            ))),
        }
    }
}

/// What a preflight checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PreflightCheck {
    /// A GPU (or `/dev/kfd`) is there and the management tool lists it.
    GpuVisible,
    /// A GPU's memory is free.
    GpuMemory,
    /// A directory's file system has space.
    Disk,
    /// A checkpoint is on disk.
    Checkpoint,
    /// The image is on the node.
    Image,
}

impl PreflightCheck {
    /// The check in words.
    pub fn describe(self) -> &'static str {
        match self {
            PreflightCheck::GpuVisible => "GPU visible",
            PreflightCheck::GpuMemory => "GPU memory free",
            PreflightCheck::Disk => "disk space",
            PreflightCheck::Checkpoint => "checkpoint on disk",
            PreflightCheck::Image => "image present",
        }
    }

    /// The `not-run` reason of a step this check stops.
    pub fn reason(self) -> NotRunReason {
        match self {
            PreflightCheck::GpuVisible => NotRunReason::HardwareAbsent,
            PreflightCheck::Checkpoint => NotRunReason::NoCheckpoint,
            PreflightCheck::GpuMemory | PreflightCheck::Disk | PreflightCheck::Image => {
                NotRunReason::Other
            }
        }
    }
}

/// One thing the node lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub check: PreflightCheck,
    /// What it is about: `GPU 3 (/dev/dri/renderD152)`, a directory, a checkpoint's name, the
    /// image.
    pub subject: String,
    /// What is wrong, in words.
    pub problem: String,
}

impl Finding {
    /// The `not-run` reason and detail of a step this finding stops.
    pub fn to_not_run(&self) -> (NotRunReason, String) {
        (self.check.reason(), format!("preflight: {self}"))
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: {}", self.subject, self.problem)
    }
}

/// A preflight that found the node lacking: every finding, in the order checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreflightFailure {
    findings: Vec<Finding>,
}

impl PreflightFailure {
    /// Every finding, in the order checked: GPUs, disk, checkpoints, image.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// Whether the whole run is stopped: a finding other than a missing checkpoint, which
    /// stops only the models that need it.
    pub fn blocks_run(&self) -> bool {
        self.findings.iter().any(|finding| finding.check != PreflightCheck::Checkpoint)
    }

    /// The finding about checkpoint `name`, when it is missing.
    pub fn missing_checkpoint(&self, name: &str) -> Option<&Finding> {
        self.findings
            .iter()
            .find(|finding| finding.check == PreflightCheck::Checkpoint && finding.subject == name)
    }

    /// The `not-run` reason and detail of the steps a failed preflight stops: the gravest
    /// reason (`hardware-absent` before `other` before `no-checkpoint`) and every finding.
    pub fn to_not_run(&self) -> (NotRunReason, String) {
        let reasons: BTreeSet<PreflightCheck> =
            self.findings.iter().map(|finding| finding.check).collect();
        let reason = if reasons.contains(&PreflightCheck::GpuVisible) {
            NotRunReason::HardwareAbsent
        } else if reasons.iter().any(|check| check.reason() == NotRunReason::Other) {
            NotRunReason::Other
        } else {
            NotRunReason::NoCheckpoint
        };
        (reason, self.to_string())
    }
}

impl fmt::Display for PreflightFailure {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "preflight: ")?;
        for (index, finding) in self.findings.iter().enumerate() {
            if index > 0 {
                write!(formatter, "; ")?;
            }
            write!(formatter, "{finding}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PreflightFailure {}

impl Preflight<'_> {
    /// Runs every check; `Err` lists what the node lacks.
    pub fn run(&self) -> Result<(), PreflightFailure> {
        let mut findings = self.gpus();
        findings.extend(self.disk());
        findings.extend(self.checkpoints());
        findings.extend(self.image());
        if findings.is_empty() { Ok(()) } else { Err(PreflightFailure { findings }) }
    }

    fn gpus(&self) -> Vec<Finding> {
        let mut findings = Vec::new();
        let root = self.probes.root;
        let (tool, tool_errors) = self.ask_tools();
        for gpu in self.node.gpus() {
            let subject = format!("GPU {} ({})", gpu.id, gpu.render_device.display());
            let finding =
                |check, problem: String| Finding { check, subject: subject.clone(), problem };
            if !under_root(root, &gpu.render_device).exists() {
                findings.push(finding(
                    PreflightCheck::GpuVisible,
                    "its render node does not exist".to_owned(),
                ));
                continue;
            }
            let vram = match &tool {
                Some((name, listed)) => match listed.get(&gpu.id) {
                    None => {
                        findings.push(finding(
                            PreflightCheck::GpuVisible,
                            format!("{name} does not list it ({})", list_ids(listed)),
                        ));
                        continue;
                    }
                    Some(Some(vram)) => Ok((*vram, *name)),
                    Some(None) => memory::read_sysfs(root, &gpu.render_device)
                        .map(|vram| (vram, "sysfs"))
                        .map_err(|sysfs| format!("{name} gives no figures; sysfs: {sysfs}")),
                },
                None => memory::read_sysfs(root, &gpu.render_device)
                    .map(|vram| (vram, "sysfs"))
                    .map_err(|sysfs| format!("{}; sysfs: {sysfs}", tool_errors.join("; "))),
            };
            match vram {
                Err(problem) => findings.push(finding(
                    PreflightCheck::GpuMemory,
                    format!("cannot read its memory: {problem}"),
                )),
                Ok((vram, source)) => {
                    if let Some(problem) = self.vram_problem(vram, source) {
                        findings.push(finding(PreflightCheck::GpuMemory, problem));
                    }
                }
            }
        }
        let kfd = Path::new("/dev/kfd");
        if !under_root(root, kfd).exists() {
            findings.push(Finding {
                check: PreflightCheck::GpuVisible,
                subject: kfd.display().to_string(),
                problem: "does not exist: the amdgpu driver's compute interface is not loaded"
                    .to_owned(),
            });
        }
        findings
    }

    /// The first management tool that answers, with the GPUs it lists; otherwise why each
    /// gave no answer.
    fn ask_tools(&self) -> (Option<(&'static str, Listed)>, Vec<String>) {
        let tools: [(&'static str, &[&str], ParseListed); 2] = [
            ("amd-smi", AMD_SMI, memory::parse_amd_smi),
            ("rocm-smi", ROCM_SMI, memory::parse_rocm_smi),
        ];
        let mut errors = Vec::new();
        for (name, argv, parse) in tools {
            match self.probes.commands.run(argv).map_err(|error| error.to_string()) {
                Ok(output) => match parse(&output) {
                    Ok(listed) => return (Some((name, listed)), errors),
                    Err(problem) => errors.push(format!("{name}: {problem}")),
                },
                Err(error) => errors.push(error),
            }
        }
        (None, errors)
    }

    fn vram_problem(&self, vram: Vram, source: &str) -> Option<String> {
        let percent = self.thresholds.min_free_vram_percent;
        if vram.total == 0 {
            return Some(format!("{source} gives it no memory"));
        }
        let free = vram.total.saturating_sub(vram.used);
        let enough = u128::from(free) * 100 >= u128::from(vram.total) * u128::from(percent);
        (!enough).then(|| {
            format!(
                "{} of {} free ({source}); a run needs {percent}% free: is another process using it?",
                gib(free),
                gib(vram.total)
            )
        })
    }

    fn disk(&self) -> Vec<Finding> {
        let dirs = [
            ("work-dir", self.node.work_dir(), self.thresholds.min_free_work_bytes),
            ("cache-dir", self.node.cache_dir(), self.thresholds.min_free_cache_bytes),
        ];
        let mut findings = Vec::new();
        for (key, dir, needed) in dirs {
            let subject = format!("{key} {}", dir.display());
            let problem = match free_bytes(dir) {
                Err(problem) => Some(problem),
                Ok(free) if free < needed => {
                    Some(format!("{} free; a run needs {}", gib(free), gib(needed)))
                }
                Ok(_) => None,
            };
            if let Some(problem) = problem {
                findings.push(Finding { check: PreflightCheck::Disk, subject, problem });
            }
        }
        findings
    }

    fn checkpoints(&self) -> Vec<Finding> {
        let mut seen = BTreeSet::new();
        let mut findings = Vec::new();
        for name in self.checkpoints {
            if !seen.insert(name.as_str()) {
                continue;
            }
            let problem = match self.node.checkpoint_path(name) {
                None => Some("the node profile lists no checkpoint of this name".to_owned()),
                Some(path) => checkpoint_problem(&path),
            };
            if let Some(problem) = problem {
                findings.push(Finding {
                    check: PreflightCheck::Checkpoint,
                    subject: name.clone(),
                    problem,
                });
            }
        }
        findings
    }

    fn image(&self) -> Option<Finding> {
        let check = self.image_check?;
        let image = self.node.image();
        check.check_image(image).err().map(|problem| Finding {
            check: PreflightCheck::Image,
            subject: image.name.clone(),
            problem,
        })
    }
}

/// `path` (absolute) under `root`.
fn under_root(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// "it lists GPUs 0, 1" or "it lists no GPU".
fn list_ids(listed: &Listed) -> String {
    if listed.is_empty() {
        return "it lists no GPU".to_owned();
    }
    let ids: Vec<String> = listed.keys().map(u32::to_string).collect();
    format!("it lists GPUs {}", ids.join(", "))
}

/// The space an unprivileged user may still write on `dir`'s file system, read on `dir` or,
/// when it does not exist yet, its nearest existing ancestor.
fn free_bytes(dir: &Path) -> Result<u64, String> {
    let existing = dir.ancestors().find(|ancestor| ancestor.exists()).unwrap_or(dir);
    let stat = rustix::fs::statvfs(existing).map_err(|error| {
        format!("cannot read the free space of {}: {error}", existing.display())
    })?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// What is wrong with the checkpoint at `path`, when anything is.
fn checkpoint_problem(path: &Path) -> Option<String> {
    let shown = path.display();
    match std::fs::metadata(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            Some(format!("{shown} does not exist"))
        }
        Err(error) => Some(format!("cannot read {shown}: {error}")),
        Ok(metadata) if metadata.is_dir() => match std::fs::read_dir(path) {
            Err(error) => Some(format!("cannot read {shown}: {error}")),
            Ok(mut entries) => entries.next().is_none().then(|| format!("{shown} is empty")),
        },
        Ok(metadata) => (metadata.len() == 0).then(|| format!("{shown} is empty")),
    }
}

/// Bytes in GiB with one decimal: `191.7 GiB`.
fn gib(bytes: u64) -> String {
    let gib = bytes as f64 / GIB as f64;
    format!("{gib:.1} GiB")
}
