//! The binary's small file and terminal helpers: reading a JSON input that names itself in
//! errors, reading a node profile (its checks are the runner's) and the gate's settings (the
//! gate's and scope's), and writing a command's output to standard output.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;

/// Reads and parses a JSON file; errors say which `what` (plan, verdict, ...) and which file.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &str,
) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the {what} {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("the {what} {} is not valid", path.display()))
}

/// Where a node's profile is unless `--node` names another (`prgate ci`, `prgate history`).
pub(crate) const DEFAULT_NODE_PROFILE: &str = "/etc/prgate/node.toml";

/// Reads and checks the node profile at `path` (`prgate_runner::node::NodeProfile::parse`).
pub(crate) fn read_node_profile(path: &Path) -> anyhow::Result<prgate_runner::node::NodeProfile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the node profile {}", path.display()))?;
    Ok(prgate_runner::node::NodeProfile::parse(&text, &path.display().to_string())?)
}

/// The gate's settings: the `[gate]` table of the manifest at `path` over the defaults, or the
/// defaults when none is named (`--config` of the simulations).
fn read_gate_config(path: Option<&Path>) -> anyhow::Result<prgate_gate::GateConfig> {
    let Some(path) = path else { return Ok(prgate_gate::GateConfig::defaults()) };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let manifest = prgate_scope::Manifest::parse(&text, &path.display().to_string())?;
    Ok(prgate_gate::GateConfig::with_overrides(manifest.gate_table(), &path.display().to_string())?)
}

/// A simulation (`prgate gate simulate`, `prgate history simulate`): refuses `--trials 0`,
/// reads the settings of `--config` (else the defaults), and lets `write` write its output to
/// standard output part after part (a large simulation's first table shows while the next is
/// computed).
pub(crate) fn simulate(
    trials: usize,
    config: Option<&Path>,
    write: impl FnOnce(&prgate_gate::GateConfig, &mut dyn std::io::Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    anyhow::ensure!(trials > 0, "--trials must be at least 1");
    let config = read_gate_config(config)?;
    let mut stdout = std::io::stdout().lock();
    write(&config, &mut stdout)?;
    stdout.flush()?;
    Ok(())
}

/// Writes a command's output to standard output, all of it, and flushes.
pub(crate) fn print(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing to standard output")
}
