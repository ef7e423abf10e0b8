//! A GPU's memory, and how busy its graphics engine is, from the three places that know them:
//! `amd-smi`, `rocm-smi` and sysfs. One parser per format reads both figures, so that one
//! call of a tool that was asked for both (the run's release check: `metric --mem-usage
//! --usage`, `--showmeminfo vram --showuse`) gives both; a tool asked for the memory alone (the
//! preflight) lists no activity.
//!
//! The shapes are those the tools print (see `docs/preflight.md`, "Sources"):
//!
//! - `amd-smi metric --mem-usage --usage --json`: a list of GPUs (`[{"gpu": 0, "usage":
//!   {...}, "mem_usage": {...}}]`), or, in newer releases, that list under `"gpu_data"`.
//!   `mem_usage.total_vram` and `mem_usage.used_vram` are `{"value": N, "unit": "MB"}` (MiB:
//!   amd-smi divides bytes by 1024²), a bare number of MiB in older releases, or `"N/A"`;
//!   `usage.gfx_activity` is `{"value": N, "unit": "%"}` (`usage.gfx_usage`, a bare number,
//!   in releases before 24.5), `"N/A"`, or absent when `--usage` was not asked;
//! - `rocm-smi --showmeminfo vram --showuse --json`: an object keyed `card<N>` whose values
//!   hold `"VRAM Total Memory (B)"` and `"VRAM Total Used Memory (B)"`, decimal strings of
//!   bytes, and `"GPU use (%)"`, a decimal string;
//! - sysfs: `mem_info_vram_total` and `mem_info_vram_used` (bytes), and `gpu_busy_percent`, in
//!   the device folder of the GPU's render node, `/sys/class/drm/renderD<N>/device/`, the same
//!   folder as its `card<M>/device`.
//!
//! Both tools may print warnings before their JSON (Python's `SyntaxWarning`s, on standard
//! error, which the runner logs with standard output): the JSON starts at the first line that
//! starts with `{` or `[`, and anything after it is ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Why a tool's output gave no GPUs: the words name what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OutputError {
    #[error("it printed no JSON: {0:?}")]
    NoJson(String),
    #[error("it printed no JSON")]
    NoValue,
    #[error("its JSON does not parse: {0}")]
    Json(String),
    #[error("its JSON is an object without a \"gpu_data\" list")]
    NoGpuData,
    #[error("its JSON is neither a list nor an object")]
    NotAList,
    #[error("its JSON is not an object keyed by card")]
    NotKeyedByCard,
    #[error("its JSON has no \"system\" object")]
    NoSystem,
    #[error("an entry has no \"gpu\" number: {0}")]
    NoGpuNumber(String),
    #[error("GPU number {0} is too large")]
    GpuNumberTooLarge(u64),
    #[error("a process of GPU {gpu} has no pid: {info}")]
    NoPid { gpu: u32, info: String },
}

/// Why sysfs gave no memory figures, or no activity, for a GPU.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SysfsError {
    #[error("cannot read {}: {source}", path.display())]
    Unreadable { path: PathBuf, source: std::io::Error },
    #[error("{} holds {text:?}, not a number of bytes", path.display())]
    NotBytes { path: PathBuf, text: String },
    #[error("{} holds {text:?}, not a percentage", path.display())]
    NotPercent { path: PathBuf, text: String },
}

/// One GPU's memory, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Vram {
    pub(crate) total: u64,
    pub(crate) used: u64,
}

/// What a tool gives of one GPU it lists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Figures {
    /// Its memory, when the tool gave numbers for both the total and the used memory.
    pub(crate) vram: Option<Vram>,
    /// How busy its graphics engine is, in percent (0 to 100), when the tool gave a figure:
    /// the share of time any work runs on it, however few of its compute units that work uses.
    pub(crate) busy_percent: Option<u8>,
}

/// The GPUs a tool lists, by id, with what it gave of each.
pub(crate) type Listed = BTreeMap<u32, Figures>;

const MIB: u64 = 1024 * 1024;

/// The GPUs in the output of `amd-smi metric --mem-usage --json`, with `--usage` or without.
pub(crate) fn parse_amd_smi(output: &str) -> Result<Listed, OutputError> {
    let value = first_json(output)?;
    let mut listed = Listed::new();
    for (id, entry) in gpu_entries(&value)? {
        let usage = entry.get("mem_usage");
        let field = |name: &str| usage.and_then(|usage| usage.get(name)).and_then(amd_smi_bytes);
        let total = field("total_vram");
        let used = field("used_vram").or_else(|| {
            let free = field("free_vram")?;
            total?.checked_sub(free)
        });
        let vram = total.zip(used).map(|(total, used)| Vram { total, used });
        let activity = entry.get("usage");
        let busy = |name: &str| activity.and_then(|usage| usage.get(name)).and_then(percent);
        let busy_percent = busy("gfx_activity").or_else(|| busy("gfx_usage"));
        listed.insert(id, Figures { vram, busy_percent });
    }
    Ok(listed)
}

/// The GPUs' entries of an amd-smi JSON output, by id: the output is a list of GPUs, or an
/// object with that list under `"gpu_data"` (newer releases). Entries of a CPU or a core,
/// which builds with CPU support print too, are skipped.
pub(crate) fn gpu_entries(value: &Value) -> Result<Vec<(u32, &Value)>, OutputError> {
    let entries = match value {
        Value::Array(entries) => entries,
        Value::Object(fields) => match fields.get("gpu_data") {
            Some(Value::Array(entries)) => entries,
            _ => return Err(OutputError::NoGpuData),
        },
        _ => return Err(OutputError::NotAList),
    };
    let mut gpus = Vec::new();
    for entry in entries {
        let Some(id) = entry.get("gpu").and_then(Value::as_u64) else {
            if entry.get("cpu").is_some() || entry.get("core").is_some() {
                continue;
            }
            return Err(OutputError::NoGpuNumber(shorten(entry)));
        };
        let id = u32::try_from(id).map_err(|_too_big| OutputError::GpuNumberTooLarge(id))?;
        gpus.push((id, entry));
    }
    Ok(gpus)
}

/// The GPUs in the output of `rocm-smi --showmeminfo vram --json`, with `--showuse` or
/// without.
pub(crate) fn parse_rocm_smi(output: &str) -> Result<Listed, OutputError> {
    let value = first_json(output)?;
    let Value::Object(cards) = value else {
        return Err(OutputError::NotKeyedByCard);
    };
    let mut listed = Listed::new();
    for (key, fields) in &cards {
        // Other keys ("system") describe the host, not a GPU.
        let Some(id) = key.strip_prefix("card").and_then(|id| id.parse::<u32>().ok()) else {
            continue;
        };
        let field = |name: &str| fields.get(name).and_then(decimal_bytes);
        let total = field("VRAM Total Memory (B)");
        let used = field("VRAM Total Used Memory (B)");
        let vram = total.zip(used).map(|(total, used)| Vram { total, used });
        let busy_percent = fields.get("GPU use (%)").and_then(percent);
        listed.insert(id, Figures { vram, busy_percent });
    }
    Ok(listed)
}

/// The memory of the GPU whose render node is `render_device` (`/dev/dri/renderD128`), read
/// from sysfs under `root`.
pub(crate) fn read_sysfs(root: &Path, render_device: &Path) -> Result<Vram, SysfsError> {
    let node = render_device.file_name().unwrap_or_default();
    let folder = root.join("sys/class/drm").join(node).join("device");
    let read = |name: &str| -> Result<u64, SysfsError> {
        let path = folder.join(name);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(source) => return Err(SysfsError::Unreadable { path, source }),
        };
        text.trim()
            .parse()
            .map_err(|_not_a_number| SysfsError::NotBytes { text: text.trim().to_owned(), path })
    };
    Ok(Vram { total: read("mem_info_vram_total")?, used: read("mem_info_vram_used")? })
}

/// How busy the GPU whose render node is `render_device` is, in percent, read from sysfs under
/// `root` (`gpu_busy_percent`, what rocm-smi's `GPU use (%)` reads too).
pub(crate) fn read_sysfs_busy(root: &Path, render_device: &Path) -> Result<u8, SysfsError> {
    let node = render_device.file_name().unwrap_or_default();
    let path = root.join("sys/class/drm").join(node).join("device/gpu_busy_percent");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(source) => return Err(SysfsError::Unreadable { path, source }),
    };
    let figure = serde_json::Value::String(text.trim().to_owned());
    percent(&figure).ok_or_else(|| SysfsError::NotPercent { text: text.trim().to_owned(), path })
}

/// The first JSON value in a tool's output, after any lines of warnings.
pub(crate) fn first_json(output: &str) -> Result<Value, OutputError> {
    let mut offset = 0;
    for line in output.split_inclusive('\n') {
        if line.trim_start().starts_with(['{', '[']) {
            let mut values = serde_json::Deserializer::from_str(&output[offset..]).into_iter();
            return match values.next() {
                Some(Ok(value)) => Ok(value),
                Some(Err(error)) => Err(OutputError::Json(error.to_string())),
                None => Err(OutputError::NoValue),
            };
        }
        offset += line.len();
    }
    Err(OutputError::NoJson(output.chars().take(200).collect()))
}

/// An amd-smi memory figure in bytes: `{"value": N, "unit": "MB"}`, a bare number of MiB
/// (older releases), or nothing for `"N/A"` and anything else.
fn amd_smi_bytes(value: &Value) -> Option<u64> {
    match value {
        Value::Number(number) => number.as_u64()?.checked_mul(MIB),
        other => amd_smi_bytes_with_unit(other),
    }
}

/// An amd-smi figure with its unit, `{"value": N, "unit": "B"}`, in bytes; a bare number is
/// bytes (a process's memory); nothing for `"N/A"` and anything else.
pub(crate) fn amd_smi_bytes_with_unit(value: &Value) -> Option<u64> {
    match value {
        Value::Number(number) => number.as_u64(),
        Value::Object(fields) => {
            let number = fields.get("value")?.as_u64()?;
            let unit = match fields.get("unit") {
                None => MIB,
                Some(unit) => match unit.as_str()? {
                    "B" => 1,
                    "KB" | "KiB" => 1024,
                    "MB" | "MiB" => MIB,
                    "GB" | "GiB" => 1024 * MIB,
                    _ => return None,
                },
            };
            number.checked_mul(unit)
        }
        _ => None,
    }
}

/// A busy percentage, 0 to 100: `{"value": N, "unit": "%"}` (amd-smi), a bare number (older
/// amd-smi), or a decimal string (rocm-smi, sysfs). A fraction counts as the next whole percent
/// (no figure reads less busy than it is); `"N/A"`, a value over 100 (what the library gives
/// when it has none) and anything else are no figure.
fn percent(value: &Value) -> Option<u8> {
    let number = match value {
        Value::Number(number) => number.as_f64()?,
        Value::String(text) => text.trim().parse::<f64>().ok()?,
        Value::Object(fields) => {
            let unit = fields.get("unit").and_then(Value::as_str);
            if unit.is_some_and(|unit| unit != "%") {
                return None;
            }
            fields.get("value")?.as_f64()?
        }
        _ => return None,
    };
    if !(0.0..=100.0).contains(&number) {
        return None;
    }
    // In 0..=100, so the cast is exact.
    Some(number.ceil() as u8)
}

/// A number of bytes written as a decimal string (rocm-smi) or a number.
fn decimal_bytes(value: &Value) -> Option<u64> {
    match value {
        Value::String(text) => text.trim().parse().ok(),
        Value::Number(number) => number.as_u64(),
        _ => None,
    }
}

/// A JSON value in at most 120 characters, for an error message.
fn shorten(value: &Value) -> String {
    prgate_scope::text::clip(&value.to_string(), 120).into_owned()
}
