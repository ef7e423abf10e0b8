//! One reading of GPUs by the preflight's sources: `amd-smi`, else `rocm-smi`, else sysfs under
//! the probes' root, chosen per GPU as the preflight chooses ([`gpu_vram`]: a GPU the tool that
//! answered lists without figures is read from sysfs; one it does not list is not read at all).
//! The preflight reads every GPU's memory once, before the run ([`Query::Memory`]); the step
//! loop reads a released server's GPUs after each release ([`read_gpus`], for `crate::run`'s
//! release check), their memory and how busy they are from the same call of the same tool
//! ([`Query::MemoryAndActivity`]; a GPU the tool gives no activity for is read from sysfs, as its
//! memory is, [`gpu_busy`]), so both read the machine the same way.
//!
//! What it leaves to others: what a reading means (the preflight's findings, the run's release
//! check), the tools' output formats (`memory`), and remembering a hung tool (the preflight's
//! [`super::Preflight`] asks a hung tool nothing more; a release check asks once).

use std::path::Path;

use crate::node::{Gpu, NodeProfile};

use super::memory::{self, Listed, Vram};
use super::{
    AMD_SMI_MEMORY, AMD_SMI_MEMORY_AND_USE, CommandError, CommandRunner, ParseListed, Probes,
    ROCM_SMI_MEMORY, ROCM_SMI_MEMORY_AND_USE,
};

/// One GPU in one reading: its memory and how busy its graphics engine is (in percent), each
/// with the source that gave it (`amd-smi`, `rocm-smi`, `sysfs`), or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GpuReading {
    pub(crate) id: u32,
    pub(crate) memory: Result<(Vram, &'static str), String>,
    pub(crate) busy: Result<(u8, &'static str), String>,
}

/// What the management tools are asked for: the memory alone (the preflight), or the memory and
/// how busy the GPUs are, in one call (the release check).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Query {
    Memory,
    MemoryAndActivity,
}

impl Query {
    /// The arguments of `amd-smi` and of `rocm-smi` that ask it.
    fn arguments(self) -> [&'static [&'static str]; 2] {
        match self {
            Query::Memory => [AMD_SMI_MEMORY, ROCM_SMI_MEMORY],
            Query::MemoryAndActivity => [AMD_SMI_MEMORY_AND_USE, ROCM_SMI_MEMORY_AND_USE],
        }
    }
}

/// The memory and activity of the node's GPUs `ids`, read now: the management tools are asked
/// once for all of them and for both figures (each tool's output kept in its log, `amd-smi.log`,
/// `rocm-smi.log`, in the commands' log folder), sysfs per GPU and figure when they give none.
pub(crate) fn read_gpus(node: &NodeProfile, probes: Probes<'_>, ids: &[u32]) -> Vec<GpuReading> {
    let ask =
        |program: &Path, log: &str, args: &[&str]| run_tool(probes.commands, program, log, args);
    let (tool, tool_errors) = ask_memory_tools(node, Query::MemoryAndActivity, ask);
    ids.iter()
        .map(|&id| {
            let Some(gpu) = node.gpus().iter().find(|gpu| gpu.id == id) else {
                let problem = format!("the node profile lists no GPU {id}");
                return GpuReading { id, memory: Err(problem.clone()), busy: Err(problem) };
            };
            let memory = match gpu_vram(probes.root, gpu, tool.as_ref(), &tool_errors) {
                GpuVram::Read(vram, source) => Ok((vram, source)),
                GpuVram::NotListed(problem) | GpuVram::Unreadable(problem) => Err(problem),
            };
            let busy = gpu_busy(probes.root, gpu, tool.as_ref(), &tool_errors);
            GpuReading { id, memory, busy }
        })
        .collect()
}

/// Whether `vram` has at least `percent` of its memory free; a GPU that reports no memory has
/// none free.
pub(crate) fn has_free_percent(vram: Vram, percent: u8) -> bool {
    let free = vram.total.saturating_sub(vram.used);
    vram.total > 0 && u128::from(free) * 100 >= u128::from(vram.total) * u128::from(percent)
}

/// Runs `args` of the tool `program` (a path from the node profile) with `commands`; `log`
/// names its log.
pub(super) fn run_tool(
    commands: &dyn CommandRunner,
    program: &Path,
    log: &str,
    args: &[&str],
) -> Result<String, CommandError> {
    let shown = program.display().to_string();
    let mut argv = vec![shown.as_str()];
    argv.extend_from_slice(args);
    commands.run(log, &argv)
}

/// The first management tool of the node profile's `[health]` that answers `query` (`amd-smi`,
/// then `rocm-smi`, each through `ask`), with the GPUs it lists; otherwise why each gave no
/// answer.
pub(super) fn ask_memory_tools(
    node: &NodeProfile,
    query: Query,
    mut ask: impl FnMut(&Path, &str, &[&str]) -> Result<String, CommandError>,
) -> (Option<(&'static str, Listed)>, Vec<String>) {
    let health = node.health();
    let [amd_smi, rocm_smi] = query.arguments();
    let tools: [(&'static str, &Path, &[&str], ParseListed); 2] = [
        ("amd-smi", health.amd_smi(), amd_smi, memory::parse_amd_smi),
        ("rocm-smi", health.rocm_smi(), rocm_smi, memory::parse_rocm_smi),
    ];
    let mut errors = Vec::new();
    for (name, program, args, parse) in tools {
        match ask(program, name, args) {
            Ok(output) => match parse(&output) {
                Ok(listed) => return (Some((name, listed)), errors),
                Err(problem) => errors.push(format!("{name}: {problem}")),
            },
            Err(error) => errors.push(error.to_string()),
        }
    }
    (None, errors)
}

/// One GPU's memory, as [`gpu_vram`] finds it.
pub(super) enum GpuVram {
    /// The tool that answered does not list the GPU: its problem.
    NotListed(String),
    /// The figures, and where they come from.
    Read(Vram, &'static str),
    /// Why no figures could be read.
    Unreadable(String),
}

/// Where GPU `gpu`'s memory figures come from: the tool that answered (`tool`, with what it
/// listed), else sysfs under `root`; `tool_errors` says why no tool answered.
pub(super) fn gpu_vram(
    root: &Path,
    gpu: &Gpu,
    tool: Option<&(&'static str, Listed)>,
    tool_errors: &[String],
) -> GpuVram {
    let from_sysfs = |why: String| match memory::read_sysfs(root, &gpu.render_device) {
        Ok(vram) => GpuVram::Read(vram, "sysfs"),
        Err(sysfs) => GpuVram::Unreadable(format!("{why}; sysfs: {sysfs}")),
    };
    match tool {
        Some((name, listed)) => match listed.get(&gpu.id) {
            None => GpuVram::NotListed(not_listed(name, listed)),
            Some(memory::Figures { vram: Some(vram), .. }) => GpuVram::Read(*vram, name),
            Some(memory::Figures { vram: None, .. }) => {
                from_sysfs(format!("{name} gives no figures"))
            }
        },
        None => from_sysfs(tool_errors.join("; ")),
    }
}

/// How busy GPU `gpu` is, in percent, and where the figure comes from: the tool that answered
/// (`tool`, with what it listed), else sysfs under `root`; otherwise why there is no figure
/// (`tool_errors` says why no tool answered).
pub(super) fn gpu_busy(
    root: &Path,
    gpu: &Gpu,
    tool: Option<&(&'static str, Listed)>,
    tool_errors: &[String],
) -> Result<(u8, &'static str), String> {
    let from_sysfs = |why: String| match memory::read_sysfs_busy(root, &gpu.render_device) {
        Ok(percent) => Ok((percent, "sysfs")),
        Err(sysfs) => Err(format!("{why}; sysfs: {sysfs}")),
    };
    match tool {
        Some((name, listed)) => match listed.get(&gpu.id) {
            None => Err(not_listed(name, listed)),
            Some(memory::Figures { busy_percent: Some(percent), .. }) => Ok((*percent, name)),
            Some(memory::Figures { busy_percent: None, .. }) => {
                from_sysfs(format!("{name} gives no activity"))
            }
        },
        None => from_sysfs(tool_errors.join("; ")),
    }
}

/// "amd-smi does not list it (it lists GPUs 0, 1)".
fn not_listed(name: &str, listed: &Listed) -> String {
    format!("{name} does not list it ({})", list_ids(listed))
}

/// "it lists GPUs 0, 1" or "it lists no GPU".
fn list_ids(listed: &Listed) -> String {
    if listed.is_empty() {
        return "it lists no GPU".to_owned();
    }
    let ids: Vec<String> = listed.keys().map(u32::to_string).collect();
    format!("it lists GPUs {}", ids.join(", "))
}
