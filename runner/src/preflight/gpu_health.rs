//! A GPU's health from what the tools and the driver say: its ECC error counters and the
//! processes that hold its memory.
//!
//! The shapes are those the tools print (see `docs/preflight.md`, "GPU health"):
//!
//! - `amd-smi metric --ecc --json`: a list of GPUs (or that list under `"gpu_data"`), each with
//!   `"ecc": {"total_correctable_count": N, "total_uncorrectable_count": N,
//!   "total_deferred_count": N, ...}`; a count may be a decimal string or `"N/A"`;
//! - the amdgpu driver's RAS counters in sysfs: one file per block,
//!   `/sys/class/drm/renderD<N>/device/ras/<block>_err_count`, holding `ue: N` and `ce: N`
//!   lines (uncorrectable and correctable), the fallback when amd-smi gives no answer;
//! - `amd-smi process --json`: a list of GPUs (or under `"gpu_data"`), each with a
//!   `"process_list"` of `{"process_info": {"name", "pid", "memory_usage": {"vram_mem": ...}}}`,
//!   or of `{"process_info": "No running processes detected"}`;
//! - `rocm-smi --showpids --json`: `{"system": {"PID<N>": "name, gpus, vram bytes, sdma, cu"}}`,
//!   the fallback (it does not say which GPU).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::memory::{OutputError, first_json, gpu_entries};

/// A GPU's ECC error counts since the driver loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Ecc {
    pub(crate) correctable: u64,
    /// Uncorrectable and deferred (uncorrectable, handled later) errors.
    pub(crate) uncorrectable: u64,
}

/// A process that holds GPU memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GpuProcess {
    pub(crate) pid: u32,
    pub(crate) name: String,
    /// The VRAM it holds, in bytes, when the tool says.
    pub(crate) vram: Option<u64>,
}

/// The ECC counts per GPU of `amd-smi metric --ecc --json`; `None` for a GPU whose counts are
/// `"N/A"` (ECC off, or not supported).
pub(crate) fn parse_amd_smi_ecc(output: &str) -> Result<BTreeMap<u32, Option<Ecc>>, OutputError> {
    let value = first_json(output)?;
    let mut counts = BTreeMap::new();
    for (id, entry) in gpu_entries(&value)? {
        let ecc = entry.get("ecc");
        let count = |name: &str| ecc.and_then(|ecc| ecc.get(name)).and_then(count);
        let correctable = count("total_correctable_count");
        let uncorrectable = count("total_uncorrectable_count");
        let deferred = count("total_deferred_count").unwrap_or(0);
        let ecc = correctable.zip(uncorrectable).map(|(correctable, uncorrectable)| Ecc {
            correctable,
            uncorrectable: uncorrectable.saturating_add(deferred),
        });
        counts.insert(id, ecc);
    }
    Ok(counts)
}

/// The driver's RAS counters of the GPU whose render node is `render_device`, summed over its
/// blocks; `None` when the driver has no `ras` folder for it (RAS off or not supported).
pub(crate) fn read_sysfs_ecc(root: &Path, render_device: &Path) -> Option<Ecc> {
    let node = render_device.file_name()?;
    let folder = root.join("sys/class/drm").join(node).join("device/ras");
    let mut files: Vec<_> = std::fs::read_dir(&folder)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.ends_with("_err_count"))
        })
        .collect();
    files.sort();
    let mut total = Ecc::default();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        for line in text.lines() {
            let (key, number) = line.split_once(':').unwrap_or_default();
            let Ok(number) = number.trim().parse::<u64>() else { continue };
            match key.trim() {
                "ue" => total.uncorrectable = total.uncorrectable.saturating_add(number),
                "ce" => total.correctable = total.correctable.saturating_add(number),
                _ => {}
            }
        }
    }
    Some(total)
}

/// The processes per GPU of `amd-smi process --json`. A GPU amd-smi lists with no process
/// has an empty list.
pub(crate) fn parse_amd_smi_processes(
    output: &str,
) -> Result<BTreeMap<u32, Vec<GpuProcess>>, OutputError> {
    let value = first_json(output)?;
    let mut processes = BTreeMap::new();
    for (id, entry) in gpu_entries(&value)? {
        let mut listed = Vec::new();
        let list = match entry.get("process_list") {
            Some(Value::Array(list)) => list.as_slice(),
            // "No running processes detected" in place of the list, in some releases.
            Some(_) | None => &[],
        };
        for item in list {
            let info = item.get("process_info").unwrap_or(item);
            if !info.is_object() {
                continue;
            }
            let pid = info.get("pid").and_then(count).and_then(|pid| u32::try_from(pid).ok());
            let Some(pid) = pid else {
                return Err(OutputError::NoPid { gpu: id, info: info.to_string() });
            };
            let name = info.get("name").and_then(Value::as_str).unwrap_or("?").to_owned();
            let vram = info
                .get("memory_usage")
                .and_then(|usage| usage.get("vram_mem"))
                .or_else(|| info.get("vram_mem"))
                .and_then(super::memory::amd_smi_bytes_with_unit);
            listed.push(GpuProcess { pid, name, vram });
        }
        processes.insert(id, listed);
    }
    Ok(processes)
}

/// The processes of `rocm-smi --showpids --json` (on no GPU in particular).
pub(crate) fn parse_rocm_smi_pids(output: &str) -> Result<Vec<GpuProcess>, OutputError> {
    let value = first_json(output)?;
    let Some(system) = value.get("system").and_then(Value::as_object) else {
        return Err(OutputError::NoSystem);
    };
    let mut processes = Vec::new();
    for (key, fields) in system {
        let Some(pid) = key.strip_prefix("PID").and_then(|pid| pid.parse::<u32>().ok()) else {
            continue;
        };
        let fields = fields.as_str().unwrap_or_default();
        let mut parts = fields.split(',').map(str::trim);
        let name = parts.next().filter(|name| !name.is_empty()).unwrap_or("?").to_owned();
        let vram = parts.nth(1).and_then(|bytes| bytes.parse().ok());
        processes.push(GpuProcess { pid, name, vram });
    }
    Ok(processes)
}

/// A count: a number, or a decimal string; `None` for `"N/A"` and anything else.
fn count(value: &Value) -> Option<u64> {
    match value {
        Value::Number(number) => number.as_u64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}
