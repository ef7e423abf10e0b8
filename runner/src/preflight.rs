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
//! and sysfs are read under a root folder, `/` on a node and a fake tree in tests. The sources
//! of a GPU's memory and their order (`reading`) are shared with the run, which reads a
//! released server's GPUs with them after each memory release, their memory and how busy they
//! are in one call of the tool (`read_gpus`).
//!
//! What it leaves to others: which checkpoints a plan needs (the run reads the recipes), how
//! an image is inspected (the container engine), and who else is running on the host (the
//! [host lock](crate::lock)). The rest of this page is `docs/preflight.md`.
//!
#![doc = include_str!("../../docs/preflight.md")]

mod gpu_health;
mod memory;
mod reading;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use prgate_gate::evidence::NotRunReason;

use crate::container::Engine;
use crate::node::{Gpu, Image, NodeProfile};
use crate::process::{ChildGroup, Environment, Finished, ProcessSpec};

use gpu_health::{Ecc, GpuProcess};
use memory::Listed;
pub(crate) use memory::Vram;
use reading::GpuVram;
pub(crate) use reading::{GpuReading, has_free_percent, read_gpus};

/// A tool's output read into the GPUs it lists.
type ParseListed = fn(&str) -> Result<Listed, memory::OutputError>;

/// The arguments of the `amd-smi` command that gives the GPUs' memory (the program is the
/// node profile's `health.amd-smi`).
pub const AMD_SMI_MEMORY: &[&str] = &["metric", "--mem-usage", "--json"];
/// The arguments of the `amd-smi` command that gives the GPUs' memory and how busy they are
/// (`usage.gfx_activity`), in one call: the run's reading of a released server's GPUs.
pub const AMD_SMI_MEMORY_AND_USE: &[&str] = &["metric", "--mem-usage", "--usage", "--json"];
/// The arguments of the `amd-smi` command that gives the GPUs' ECC error counts.
pub const AMD_SMI_ECC: &[&str] = &["metric", "--ecc", "--json"];
/// The arguments of the `amd-smi` command that lists the processes on the GPUs.
pub const AMD_SMI_PROCESS: &[&str] = &["process", "--json"];
/// The arguments of the `rocm-smi` command that gives the memory when `amd-smi` gives none.
pub const ROCM_SMI_MEMORY: &[&str] = &["--showmeminfo", "vram", "--json"];
/// The arguments of the `rocm-smi` command that gives the memory and how busy the GPUs are
/// (`GPU use (%)`) when `amd-smi` gives neither, in one call: the run's release check.
pub const ROCM_SMI_MEMORY_AND_USE: &[&str] = &["--showmeminfo", "vram", "--showuse", "--json"];
/// The arguments of the `rocm-smi` command that lists the processes when `amd-smi` gives
/// none.
pub const ROCM_SMI_PIDS: &[&str] = &["--showpids", "--json"];
/// Where ROCm installs its tools; [`SystemCommands::new`] looks there after the runner's
/// `PATH`.
pub const ROCM_BIN: &str = "/opt/rocm/bin";
/// How long a probe command may take unless the caller says otherwise.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// The share of each GPU's memory the preflight asks free, in percent
/// ([`Thresholds::min_free_vram_percent`]); the run asks the same of a released server's GPUs.
pub const MIN_FREE_VRAM_PERCENT: u8 = 90;

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
            min_free_vram_percent: MIN_FREE_VRAM_PERCENT,
            min_free_work_bytes: 50 * GIB,
            min_free_cache_bytes: 10 * GIB,
        }
    }
}

impl Thresholds {
    /// The defaults, with one floor of free disk space for both the work and the cache
    /// directory when `min_free_disk_gib` gives one (`--min-free-disk`, in GiB; a floor past
    /// what a `u64` of bytes holds is the largest).
    pub fn with_min_free_disk(min_free_disk_gib: Option<u64>) -> Thresholds {
        let mut thresholds = Thresholds::default();
        if let Some(gib) = min_free_disk_gib {
            thresholds.min_free_work_bytes = gib.saturating_mul(GIB);
            thresholds.min_free_cache_bytes = gib.saturating_mul(GIB);
        }
        thresholds
    }
}

/// Runs a probe command and returns what it printed.
pub trait CommandRunner: fmt::Debug {
    /// Runs `argv` (no shell) and returns its output when it exits with status 0; `log`
    /// names its log (`<log>.log`).
    fn run(&self, log: &str, argv: &[&str]) -> Result<String, CommandError>;
}

/// Whether the node has the run's image: the container engine's question.
pub trait ImageCheck: fmt::Debug {
    /// `Ok` when `image` is present on the node (with the profile's digest, when it pins
    /// one); otherwise the problem (its words are the finding's).
    fn check_image(&self, image: &Image) -> Result<(), ImageProblem>;
}

/// The container engine answers the image question with [`Engine::check_image`]: the image is
/// there and, when the profile pins a digest, has it. Nothing is pulled.
impl ImageCheck for Engine {
    fn check_image(&self, image: &Image) -> Result<(), ImageProblem> {
        Engine::check_image(self, image).map(|_info| ()).map_err(ImageProblem::from)
    }
}

/// Why the node's image is not usable: the engine's error, whatever its type.
pub type ImageProblem = Box<dyn std::error::Error + Send + Sync>;

/// A probe command that gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{program}: {problem}")]
pub struct CommandError {
    pub program: String,
    pub problem: String,
    /// The time limit it ran past and was stopped at: a hung tool, GPU or driver.
    pub timed_out_after: Option<Duration>,
}

/// Probe commands run on this machine, each under [`ChildGroup`] with a timeout; its output
/// (standard output and error together) is kept in `<log_dir>/<log>.log`.
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
    fn run(&self, log: &str, argv: &[&str]) -> Result<String, CommandError> {
        let program = argv.first().copied().unwrap_or_default();
        let error = |problem: String| CommandError {
            program: program.to_owned(),
            problem,
            timed_out_after: None,
        };
        std::fs::create_dir_all(&self.log_dir).map_err(|source| {
            error(format!("cannot create {}: {source}", self.log_dir.display()))
        })?;
        let log = self.log_dir.join(format!("{log}.log"));
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
            Finished::TimedOut(_) | Finished::Stalled { .. } => Err(CommandError {
                timed_out_after: Some(self.timeout),
                ..error(format!(
                    "gave no answer within {}s and was stopped",
                    self.timeout.as_secs()
                ))
            }),
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
    /// A GPU's ECC error counters are within the node profile's limits.
    GpuEcc,
    /// No GPU memory is held by a process that is gone.
    GpuLeftoverMemory,
    /// The GPU management tool answers: a hung one means a hung GPU or driver.
    GpuResponsive,
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
            PreflightCheck::GpuEcc => "GPU ECC errors",
            PreflightCheck::GpuLeftoverMemory => "GPU memory of dead processes",
            PreflightCheck::GpuResponsive => "GPU responsive",
        }
    }

    /// Whether a finding of this check is a fault of the node's GPUs, a strike in its
    /// [health ledger](crate::health): ECC errors, memory a dead process left, a hung tool.
    pub fn is_node_fault(self) -> bool {
        matches!(
            self,
            PreflightCheck::GpuEcc
                | PreflightCheck::GpuLeftoverMemory
                | PreflightCheck::GpuResponsive
        )
    }

    /// The `not-run` reason of a step this check stops.
    pub fn reason(self) -> NotRunReason {
        match self {
            PreflightCheck::GpuVisible => NotRunReason::HardwareAbsent,
            PreflightCheck::Checkpoint => NotRunReason::NoCheckpoint,
            PreflightCheck::GpuMemory | PreflightCheck::Disk | PreflightCheck::Image => {
                NotRunReason::Other
            }
            PreflightCheck::GpuEcc
            | PreflightCheck::GpuLeftoverMemory
            | PreflightCheck::GpuResponsive => NotRunReason::Node,
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

    /// The findings that are faults of the node's GPUs ([`PreflightCheck::is_node_fault`]):
    /// each is a strike in its health ledger.
    pub fn node_faults(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|finding| finding.check.is_node_fault())
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
        } else if reasons.iter().any(|check| check.is_node_fault()) {
            NotRunReason::Node
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

    /// The GPU checks: each GPU of the profile ([`Preflight::gpu`]), then what concerns the
    /// node as a whole ([`Preflight::node_gpu_findings`]). The tools are asked once for all.
    fn gpus(&self) -> Vec<Finding> {
        let mut asked = Asked::default();
        let (tool, tool_errors) = self.ask_tools(&mut asked);
        let answers = GpuAnswers {
            tool,
            tool_errors,
            processes: self.processes(&mut asked),
            ecc: self.ecc(&mut asked),
        };
        let mut findings = Vec::new();
        for gpu in self.node.gpus() {
            findings.extend(self.gpu(gpu, &answers));
        }
        findings.extend(self.node_gpu_findings(&answers.processes, &asked));
        findings
    }

    /// One GPU's findings, in this order: it is not visible (and nothing else is checked),
    /// its memory, the dead processes that hold some, its ECC errors.
    fn gpu(&self, gpu: &Gpu, answers: &GpuAnswers) -> Vec<Finding> {
        let subject = format!("GPU {} ({})", gpu.id, gpu.render_device.display());
        let finding = |check, problem: String| Finding { check, subject: subject.clone(), problem };
        if !under_root(self.probes.root, &gpu.render_device).exists() {
            let problem = "its render node does not exist".to_owned();
            return vec![finding(PreflightCheck::GpuVisible, problem)];
        }
        let vram = match self.gpu_vram(gpu, answers) {
            GpuVram::NotListed(problem) => {
                return vec![finding(PreflightCheck::GpuVisible, problem)];
            }
            GpuVram::Read(vram, source) => Ok((vram, source)),
            GpuVram::Unreadable(problem) => Err(problem),
        };
        let on_gpu = match &answers.processes {
            Processes::PerGpu(per_gpu) => per_gpu.get(&gpu.id).map(Vec::as_slice),
            Processes::Unplaced(_) | Processes::Unknown => None,
        };
        let mut findings = Vec::new();
        match vram {
            Err(problem) => findings.push(finding(
                PreflightCheck::GpuMemory,
                format!("cannot read its memory: {problem}"),
            )),
            Ok((vram, source)) => {
                if let Some(problem) = self.vram_problem(vram, source) {
                    let (check, problem) = memory_finding(vram, source, problem, on_gpu);
                    findings.push(finding(check, problem));
                }
            }
        }
        for process in on_gpu.unwrap_or_default() {
            if !self.alive(process.pid) {
                findings.push(finding(PreflightCheck::GpuLeftoverMemory, dead(process)));
            }
        }
        for problem in self.ecc_problems(gpu, answers) {
            findings.push(finding(PreflightCheck::GpuEcc, problem));
        }
        findings
    }

    /// Where GPU `gpu`'s memory figures come from: the tool that answered, else sysfs.
    fn gpu_vram(&self, gpu: &Gpu, answers: &GpuAnswers) -> GpuVram {
        reading::gpu_vram(self.probes.root, gpu, answers.tool.as_ref(), &answers.tool_errors)
    }

    /// The problems of GPU `gpu`'s ECC counts, from amd-smi else sysfs: any uncorrectable
    /// error, then more correctable ones than `health.max-correctable-ecc`.
    fn ecc_problems(&self, gpu: &Gpu, answers: &GpuAnswers) -> Vec<String> {
        let root = self.probes.root;
        let max_correctable = self.node.health().max_correctable_ecc();
        let counts = match &answers.ecc {
            Some((name, per_gpu)) => {
                per_gpu.get(&gpu.id).copied().flatten().map(|ecc| (ecc, *name))
            }
            None => None,
        }
        .or_else(|| gpu_health::read_sysfs_ecc(root, &gpu.render_device).map(|ecc| (ecc, "sysfs")));
        let Some((counts, source)) = counts else {
            return Vec::new();
        };
        let mut problems = Vec::new();
        if counts.uncorrectable > 0 {
            problems.push(format!(
                "{} uncorrectable ECC error(s) ({source}): its memory has corrupted data; reset the GPU, and replace it if they come back",
                counts.uncorrectable
            ));
        }
        if counts.correctable > max_correctable {
            problems.push(format!(
                "{} correctable ECC errors ({source}), more than health.max-correctable-ecc ({max_correctable}): its memory is failing",
                counts.correctable
            ));
        }
        problems
    }

    /// The GPU findings about no GPU in particular: `/dev/kfd` is missing, a dead process
    /// rocm-smi lists holds GPU memory, a tool hung.
    fn node_gpu_findings(&self, processes: &Processes, asked: &Asked) -> Vec<Finding> {
        let mut findings = Vec::new();
        let kfd = Path::new("/dev/kfd");
        if !under_root(self.probes.root, kfd).exists() {
            findings.push(Finding {
                check: PreflightCheck::GpuVisible,
                subject: kfd.display().to_string(),
                problem: "does not exist: the amdgpu driver's compute interface is not loaded"
                    .to_owned(),
            });
        }
        if let Processes::Unplaced(listed) = processes {
            for process in listed.iter().filter(|process| !self.alive(process.pid)) {
                findings.push(Finding {
                    check: PreflightCheck::GpuLeftoverMemory,
                    subject: "the GPUs".to_owned(),
                    problem: dead(process),
                });
            }
        }
        for (program, command) in &asked.hung {
            findings.push(Finding {
                check: PreflightCheck::GpuResponsive,
                subject: program.clone(),
                problem: format!(
                    "`{command}` gave no answer within {}s and was stopped: a hung GPU or driver",
                    asked.timeout.as_secs()
                ),
            });
        }
        findings
    }

    /// Runs `args` of the tool `program` (a path from the node profile), unless that tool
    /// hung before: a hung tool is asked nothing more.
    fn ask(
        &self,
        asked: &mut Asked,
        program: &Path,
        log: &str,
        args: &[&str],
    ) -> Result<String, CommandError> {
        let shown = program.display().to_string();
        if asked.hung.iter().any(|(hung, _)| *hung == shown) {
            let problem = "hung before; not asked again".to_owned();
            return Err(CommandError { program: shown, problem, timed_out_after: None });
        }
        reading::run_tool(self.probes.commands, program, log, args).inspect_err(|error| {
            if let Some(timeout) = error.timed_out_after {
                asked.timeout = timeout;
                asked.hung.push((shown.clone(), format!("{shown} {}", args.join(" "))));
            }
        })
    }

    /// The first management tool that answers, with the GPUs it lists; otherwise why each
    /// gave no answer.
    fn ask_tools(&self, asked: &mut Asked) -> (Option<(&'static str, Listed)>, Vec<String>) {
        reading::ask_memory_tools(self.node, reading::Query::Memory, |program, log, args| {
            self.ask(asked, program, log, args)
        })
    }

    /// The processes on the GPUs: from amd-smi, per GPU; else from rocm-smi, on no GPU in
    /// particular; else unknown.
    fn processes(&self, asked: &mut Asked) -> Processes {
        let health = self.node.health();
        if let Ok(output) = self.ask(asked, health.amd_smi(), "amd-smi-process", AMD_SMI_PROCESS)
            && let Ok(per_gpu) = gpu_health::parse_amd_smi_processes(&output)
        {
            return Processes::PerGpu(per_gpu);
        }
        if let Ok(output) = self.ask(asked, health.rocm_smi(), "rocm-smi-showpids", ROCM_SMI_PIDS)
            && let Ok(listed) = gpu_health::parse_rocm_smi_pids(&output)
        {
            return Processes::Unplaced(listed);
        }
        Processes::Unknown
    }

    /// The ECC counts amd-smi gives, per GPU.
    fn ecc(&self, asked: &mut Asked) -> Option<(&'static str, BTreeMap<u32, Option<Ecc>>)> {
        let output =
            self.ask(asked, self.node.health().amd_smi(), "amd-smi-ecc", AMD_SMI_ECC).ok()?;
        gpu_health::parse_amd_smi_ecc(&output).ok().map(|counts| ("amd-smi", counts))
    }

    /// Whether process `pid` runs on this machine (`/proc/<pid>` under the root).
    fn alive(&self, pid: u32) -> bool {
        under_root(self.probes.root, Path::new(&format!("/proc/{pid}"))).exists()
    }

    fn vram_problem(&self, vram: Vram, source: &str) -> Option<String> {
        let percent = self.thresholds.min_free_vram_percent;
        if vram.total == 0 {
            return Some(format!("{source} gives it no memory"));
        }
        let free = vram.total.saturating_sub(vram.used);
        (!has_free_percent(vram, percent)).then(|| {
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
                Err(problem) => Some(problem.to_string()),
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
            problem: problem.to_string(),
        })
    }
}

/// What the probes asked so far: the tools that hung.
#[derive(Debug, Default)]
struct Asked {
    /// Each hung program, with the command that hung.
    hung: Vec<(String, String)>,
    /// The time limit they ran past.
    timeout: Duration,
}

/// The processes that hold GPU memory, as the tools that answered say.
#[derive(Debug)]
enum Processes {
    /// amd-smi: per GPU.
    PerGpu(BTreeMap<u32, Vec<GpuProcess>>),
    /// rocm-smi: on no GPU in particular.
    Unplaced(Vec<GpuProcess>),
    /// Neither tool answered.
    Unknown,
}

/// What the GPU tools answered, asked once for every GPU.
struct GpuAnswers {
    /// The management tool that listed the GPUs, with what it listed.
    tool: Option<(&'static str, Listed)>,
    /// Why each tool gave no list, when none did.
    tool_errors: Vec<String>,
    /// The processes that hold GPU memory.
    processes: Processes,
    /// The ECC counts amd-smi gives, per GPU.
    ecc: Option<(&'static str, BTreeMap<u32, Option<Ecc>>)>,
}

/// The finding of a GPU whose memory is short (`problem`): leftover memory when amd-smi lists
/// no process on it, else short memory with who holds it when amd-smi says.
fn memory_finding(
    vram: Vram,
    source: &str,
    problem: String,
    on_gpu: Option<&[GpuProcess]>,
) -> (PreflightCheck, String) {
    match on_gpu {
        Some([]) => (
            PreflightCheck::GpuLeftoverMemory,
            format!(
                "{} used ({source}) and amd-smi lists no process on it: memory a dead process left; reset the GPU or reboot the node",
                gib(vram.used)
            ),
        ),
        Some(listed) => (PreflightCheck::GpuMemory, format!("{problem} ({})", held_by(listed))),
        None => (PreflightCheck::GpuMemory, problem),
    }
}

/// "held by pid 4242 (python3, 118.2 GiB), pid 5150 (python3)".
fn held_by(processes: &[GpuProcess]) -> String {
    let listed: Vec<String> = processes
        .iter()
        .map(|process| match process.vram {
            Some(bytes) => format!("pid {} ({}, {})", process.pid, process.name, gib(bytes)),
            None => format!("pid {} ({})", process.pid, process.name),
        })
        .collect();
    format!("held by {}", listed.join(", "))
}

/// The problem of a dead process that holds GPU memory.
fn dead(process: &GpuProcess) -> String {
    let holds = process.vram.map(|bytes| format!(" holds {} but", gib(bytes))).unwrap_or_default();
    format!(
        "pid {} ({}){holds} is not running: memory a dead process left; reset the GPU or reboot the node",
        process.pid, process.name
    )
}

/// `path` (absolute) under `root`.
fn under_root(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// The space an unprivileged user may still write on `dir`'s file system, read on `dir` or,
/// when it does not exist yet, its nearest existing ancestor.
pub(crate) fn free_bytes(dir: &Path) -> Result<u64, FreeSpaceError> {
    let existing = dir.ancestors().find(|ancestor| ancestor.exists()).unwrap_or(dir);
    let stat = rustix::fs::statvfs(existing)
        .map_err(|source| FreeSpaceError { dir: existing.to_path_buf(), source })?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// The file system would not say how much space is free.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the free space of {}: {source}", dir.display())]
pub(crate) struct FreeSpaceError {
    dir: PathBuf,
    source: rustix::io::Errno,
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
pub(crate) fn gib(bytes: u64) -> String {
    let gib = bytes as f64 / GIB as f64;
    format!("{gib:.1} GiB")
}
