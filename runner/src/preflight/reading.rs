//! One reading of GPUs' memory by the preflight's sources: `amd-smi`, else `rocm-smi`, else
//! sysfs under the probes' root, chosen per GPU as the preflight chooses ([`gpu_vram`]: a GPU
//! the tool that answered lists without figures is read from sysfs; one it does not list is not
//! read at all). The preflight reads every GPU of the node once, before the run; the step loop
//! reads a released server's GPUs after each release ([`read_gpu_memory`], for
//! `crate::run`'s release check), so both read the machine the same way.
//!
//! What it leaves to others: what a reading means (the preflight's findings, the run's release
//! check), the tools' output formats (`memory`), and remembering a hung tool (the preflight's
//! [`super::Preflight`] asks a hung tool nothing more; a release check asks once).

use std::path::Path;

use crate::node::{Gpu, NodeProfile};

use super::memory::{self, Listed, Vram};
use super::{AMD_SMI_MEMORY, CommandError, CommandRunner, ParseListed, Probes, ROCM_SMI_MEMORY};

/// One GPU's memory in one reading: its figures and the source that gave them (`amd-smi`,
/// `rocm-smi`, `sysfs`), or why none could be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GpuReading {
    pub(crate) id: u32,
    pub(crate) memory: Result<(Vram, &'static str), String>,
}

/// The memory of the node's GPUs `ids`, read now: the management tools are asked once for all
/// of them (each tool's output kept in its log, `amd-smi.log`, `rocm-smi.log`, in the
/// commands' log folder), sysfs per GPU when they give no figures.
pub(crate) fn read_gpu_memory(
    node: &NodeProfile,
    probes: Probes<'_>,
    ids: &[u32],
) -> Vec<GpuReading> {
    let ask =
        |program: &Path, log: &str, args: &[&str]| run_tool(probes.commands, program, log, args);
    let (tool, tool_errors) = ask_memory_tools(node, ask);
    ids.iter()
        .map(|&id| {
            let memory = match node.gpus().iter().find(|gpu| gpu.id == id) {
                None => Err(format!("the node profile lists no GPU {id}")),
                Some(gpu) => match gpu_vram(probes.root, gpu, tool.as_ref(), &tool_errors) {
                    GpuVram::Read(vram, source) => Ok((vram, source)),
                    GpuVram::NotListed(problem) | GpuVram::Unreadable(problem) => Err(problem),
                },
            };
            GpuReading { id, memory }
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

/// The first management tool of the node profile's `[health]` that answers (`amd-smi`, then
/// `rocm-smi`, each through `ask`), with the GPUs it lists; otherwise why each gave no answer.
pub(super) fn ask_memory_tools(
    node: &NodeProfile,
    mut ask: impl FnMut(&Path, &str, &[&str]) -> Result<String, CommandError>,
) -> (Option<(&'static str, Listed)>, Vec<String>) {
    let health = node.health();
    let tools: [(&'static str, &Path, &[&str], ParseListed); 2] = [
        ("amd-smi", health.amd_smi(), AMD_SMI_MEMORY, memory::parse_amd_smi),
        ("rocm-smi", health.rocm_smi(), ROCM_SMI_MEMORY, memory::parse_rocm_smi),
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
            None => GpuVram::NotListed(format!("{name} does not list it ({})", list_ids(listed))),
            Some(Some(vram)) => GpuVram::Read(*vram, name),
            Some(None) => from_sysfs(format!("{name} gives no figures")),
        },
        None => from_sysfs(tool_errors.join("; ")),
    }
}

/// "it lists GPUs 0, 1" or "it lists no GPU".
fn list_ids(listed: &Listed) -> String {
    if listed.is_empty() {
        return "it lists no GPU".to_owned();
    }
    let ids: Vec<String> = listed.keys().map(u32::to_string).collect();
    format!("it lists GPUs {}", ids.join(", "))
}
