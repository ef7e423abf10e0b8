//! The node health ledger: the failures prgate attributes to a node, and whether the node is
//! drained.
//!
//! Each node has one ledger file, `<health-dir>/<node>.jsonl` ([`Ledger`]), one JSON object a
//! line, oldest first (the format is below and in `docs/node.md`). Three events are written:
//!
//! - a **strike**: a failure attributed to the node: a preflight finding about its GPUs (ECC
//!   errors, memory a dead process left, a hung device), the same step broken on base and PR
//!   (what the PR cannot cause alone), or a GPU error in a base-side server log
//!   ([`GPU_ERROR_PATTERNS`]), both only of a recipe the PR left unchanged; see `attribute`;
//! - a **drain**: the node takes no more work, written by [`Ledger::strike`] when the strikes
//!   since the node was last admitted, within the [policy](HealthPolicy)'s window, reach its
//!   count, or by hand ([`Ledger::drain`]);
//! - an **admit**: the node is back: a passing canary (`canary`) or by hand.
//!
//! A node is drained while its last drain is later than its last admit ([`NodeHealth`]); a
//! drain stays until an admit, however old its strikes grow. Strikes before the last admit
//! no longer count.
//!
//! Writes go through [`crate::ledger::LedgerFile`]: an exclusive `flock` on
//! `<health-dir>/<node>.lock` (the [host lock]'s model: the kernel lets it go when the holder
//! dies), the file read, and replaced with the old lines and the new ones through a temporary
//! file renamed over it, so a reader never sees half a line and a killed writer loses nothing
//! already written. Readers take no lock.
//!
//! The health directory is `<cache-dir>/health` unless the node profile's `health.dir` says
//! otherwise; a SLURM cluster or a fleet of workflow runners points every node at one shared
//! folder, so the orchestrator sees every node's ledger. A node's ledger is named by the name
//! the scheduler knows it by: the node profile's `name`, or SLURM's node name for the SLURM
//! executor.
//!
//! What it leaves to others: what the preflight finds ([`crate::preflight`]), running the
//! canary, and what a drain does to scheduling (the SLURM executor's `--exclude`, the
//! workflow's `prgate node status`).
//!
//! [host lock]: crate::lock
//!
//! # The ledger's lines (`version` 1)
//!
//! ```json
//! {"version":1,"at":"2026-12-01T15:00:00Z","node":"mi355x-2","event":"strike","source":"preflight","detail":"GPU 3 (/dev/dri/renderD152): 2 uncorrectable ECC errors (amd-smi)","run":"prgate run for PR #12"}
//! {"version":1,"at":"2026-12-01T15:00:00Z","node":"mi355x-2","event":"drain","source":"strikes","detail":"3 strikes within 7d"}
//! {"version":1,"at":"2026-12-02T09:30:00Z","node":"mi355x-2","event":"admit","source":"canary","detail":"the canary passed"}
//! ```
//!
//! | field | meaning |
//! | --- | --- |
//! | `version` | 1 |
//! | `at` | when, RFC 3339 in UTC to the second |
//! | `node` | the node's name (the file's name without `.jsonl`) |
//! | `event` | `strike`, `drain` or `admit` |
//! | `source` | a strike's: `preflight`, `both-sides-broken`, `gpu-error-in-log`, `slurm-node-fail`, `canary` (a failed canary), `manual`; a drain's: `strikes`, `manual`; an admit's: `canary`, `manual` |
//! | `detail` | what happened, in words |
//! | `run` | optional: the run that saw it |
//!
//! A line that does not parse is an error naming the file and the line: a ledger is never
//! read as "healthy" because it could not be read.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::node::{NodeProfile, Spelling, write_duration};
/// Times in the ledger: RFC 3339 in UTC to the second (`crate::rfc3339`).
pub use crate::rfc3339::{format as rfc3339, parse as parse_rfc3339};

mod attribute;
mod canary;
#[cfg(test)]
mod tests;

pub use attribute::{Attribution, attribute};
pub use canary::{Canary, CanaryReport};

/// The version of the ledger's lines.
pub const LEDGER_VERSION: u32 = 1;

/// The folder of the ledgers under the cache directory when the profile names none.
pub const DEFAULT_DIR_NAME: &str = "health";

/// GPU errors in a server's log that the node, not the code, is blamed for: each is a
/// case-sensitive substring of a line. The HIP runtime's and the amdgpu kernel driver's own
/// words (HIP's `hipGetErrorString` names, the driver's fault and ring-timeout messages, as
/// PyTorch and SGLang pass them on).
pub const GPU_ERROR_PATTERNS: &[&str] = &[
    // hipErrorNoDevice: the runtime sees no GPU at all, though the node profile lists them.
    "hipErrorNoDevice",
    // The runtime lost the device mid-run (a reset, a fallen-off bus).
    "hipErrorLaunchFailure",
    "hipErrorIllegalState",
    // The HSA runtime's word for a page fault the GPU took.
    "Memory access fault by GPU",
    "GPU memory access fault",
    // The kernel driver (dmesg lines a container's log may carry): a ring that stopped.
    "amdgpu: ring",
    "ring gfx timeout",
    "ring sdma0 timeout",
    // An uncorrectable ECC error the driver reported.
    "amdgpu: uncorrectable",
    "HW Exception by GPU node",
];

/// When a node is drained: the node profile's `[health]` policy.
pub use crate::node::HealthPolicy;

/// What a strike, drain or admit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// A preflight finding about the node's GPUs.
    Preflight,
    /// The same step broken on base and PR.
    BothSidesBroken,
    /// A GPU error in a base-side server log.
    GpuErrorInLog,
    /// SLURM ended a job `NODE_FAIL`.
    SlurmNodeFail,
    /// The strikes reached the policy's count.
    Strikes,
    /// The canary: an admit when it passes, a strike for each of its failures.
    Canary,
    /// A person, with `prgate node`.
    Manual,
}

impl Source {
    /// The source as the ledger writes it.
    pub fn name(self) -> &'static str {
        match self {
            Source::Preflight => "preflight",
            Source::BothSidesBroken => "both-sides-broken",
            Source::GpuErrorInLog => "gpu-error-in-log",
            Source::SlurmNodeFail => "slurm-node-fail",
            Source::Strikes => "strikes",
            Source::Canary => "canary",
            Source::Manual => "manual",
        }
    }
}

/// What a ledger line records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    Strike,
    Drain,
    Admit,
}

/// One line of a ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Seconds since the Unix epoch.
    pub at: u64,
    pub node: String,
    pub event: EventKind,
    pub source: Source,
    pub detail: String,
    pub run: Option<String>,
}

/// A strike to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strike {
    pub source: Source,
    pub detail: String,
}

/// A node's state, read from its ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeHealth {
    pub node: String,
    /// The drain in force, when the node is drained.
    pub drained: Option<Entry>,
    /// The strikes since the last admit, oldest first (all of them: the window applies when
    /// a strike is recorded).
    pub strikes: Vec<Entry>,
}

impl NodeHealth {
    /// Whether the node takes work.
    pub fn is_drained(&self) -> bool {
        self.drained.is_some()
    }

    /// The node's state in one line: `mi355x-2: drained since 2026-12-01T15:00:00Z (3 strikes
    /// within 7d); 3 strike(s) since it was last admitted` or `mi355x-1: admitted; no strike`.
    pub fn summary(&self) -> String {
        let state = match &self.drained {
            Some(drain) => format!("drained since {} ({})", rfc3339(drain.at), drain.detail),
            None => "admitted".to_owned(),
        };
        let strikes = match self.strikes.len() {
            0 => "no strike since it was last admitted".to_owned(),
            count => format!("{count} strike(s) since it was last admitted"),
        };
        format!("{}: {state}; {strikes}", self.node)
    }
}

/// A node's state as `prgate node status --format json` prints it (docs/node.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Status {
    pub node: String,
    pub drained: bool,
    /// When it was drained, RFC 3339; null when it is not.
    pub drained_since: Option<String>,
    /// Why, in words; null when it is not drained.
    pub drained_because: Option<String>,
    /// The strikes since it was last admitted.
    pub strikes: usize,
}

impl From<&NodeHealth> for Status {
    fn from(health: &NodeHealth) -> Status {
        Status {
            node: health.node.clone(),
            drained: health.is_drained(),
            drained_since: health.drained.as_ref().map(|drain| rfc3339(drain.at)),
            drained_because: health.drained.as_ref().map(|drain| drain.detail.clone()),
            strikes: health.strikes.len(),
        }
    }
}

/// What [`Ledger::strike`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrikeOutcome {
    /// The strikes within the window since the last admit, this one included.
    pub in_window: u32,
    /// Whether this strike drained the node.
    pub drained_now: bool,
}

/// Why a ledger could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}, line {line}: {problem}")]
    Line { path: PathBuf, line: usize, problem: String },
    #[error(transparent)]
    Ledger(#[from] crate::ledger::LedgerIoError),
    #[error(
        "{name:?} is not a node name: ASCII letters, digits, '.', '_' and '-' (not '.' or '..')"
    )]
    NodeName { name: String },
}

/// The ledgers' folder of `node`: the profile's `health.dir`, else `<cache-dir>/health`.
pub fn health_dir(node: &NodeProfile) -> PathBuf {
    match node.health().dir() {
        Some(dir) => dir.to_path_buf(),
        None => node.cache_dir().join(DEFAULT_DIR_NAME),
    }
}

/// One node's ledger.
#[derive(Debug, Clone)]
pub struct Ledger {
    dir: PathBuf,
    node: String,
}

impl Ledger {
    /// The ledger of `node` in `dir`; nothing is read or created yet.
    pub fn new(dir: &Path, node: &str) -> Result<Ledger, HealthError> {
        crate::node::check_name(node)
            .map_err(|_problem| HealthError::NodeName { name: node.to_owned() })?;
        Ok(Ledger { dir: dir.to_path_buf(), node: node.to_owned() })
    }

    /// The node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The ledger file.
    pub fn path(&self) -> PathBuf {
        crate::ledger::LedgerFile::new(&self.dir, &self.node).path()
    }

    /// Every line, oldest first; none when the file does not exist.
    pub fn entries(&self) -> Result<Vec<Entry>, HealthError> {
        let text = crate::ledger::LedgerFile::new(&self.dir, &self.node).read()?;
        parse_lines(&text, &self.path())
    }

    /// The node's state.
    pub fn health(&self) -> Result<NodeHealth, HealthError> {
        Ok(health_of(&self.node, &self.entries()?))
    }

    /// Records `strike` at `now` for `run`; when the strikes since the last admit within the
    /// window reach `policy.strikes` and the node is not drained yet, drains it.
    pub fn strike(
        &self,
        strike: &Strike,
        run: Option<&str>,
        policy: &HealthPolicy,
        now: SystemTime,
    ) -> Result<StrikeOutcome, HealthError> {
        let at = unix_seconds(now);
        self.update(|entries| {
            entries.push(self.entry(at, EventKind::Strike, strike.source, &strike.detail, run));
            let health = health_of(&self.node, entries);
            let since = at.saturating_sub(policy.window.as_secs());
            let in_window = health.strikes.iter().filter(|strike| strike.at >= since).count();
            let in_window = u32::try_from(in_window).unwrap_or(u32::MAX);
            let drained_now = !health.is_drained() && in_window >= policy.strikes.max(1);
            if drained_now {
                let detail = format!("{in_window} strikes within {}", format_window(policy.window));
                entries.push(self.entry(at, EventKind::Drain, Source::Strikes, &detail, run));
            }
            StrikeOutcome { in_window, drained_now }
        })
    }

    /// Drains the node by hand. On a node already drained the line is written too, and the
    /// first drain's reason stays the reason.
    pub fn drain(&self, detail: &str, now: SystemTime) -> Result<(), HealthError> {
        let at = unix_seconds(now);
        self.update(|entries| {
            entries.push(self.entry(at, EventKind::Drain, Source::Manual, detail, None));
        })
    }

    /// Admits the node: its strikes so far no longer count.
    pub fn admit(&self, source: Source, detail: &str, now: SystemTime) -> Result<(), HealthError> {
        let at = unix_seconds(now);
        self.update(|entries| {
            entries.push(self.entry(at, EventKind::Admit, source, detail, None));
        })
    }

    fn entry(
        &self,
        at: u64,
        event: EventKind,
        source: Source,
        detail: &str,
        run: Option<&str>,
    ) -> Entry {
        Entry {
            at,
            node: self.node.clone(),
            event,
            source,
            detail: detail.to_owned(),
            run: run.map(str::to_owned),
        }
    }

    /// Under the ledger's lock ([`crate::ledger::LedgerFile::append`]): reads the lines, lets
    /// `change` add to them, and appends what it added atomically.
    fn update<T>(&self, change: impl FnOnce(&mut Vec<Entry>) -> T) -> Result<T, HealthError> {
        let path = self.path();
        crate::ledger::LedgerFile::new(&self.dir, &self.node).append(|text| {
            let mut entries = parse_lines(text, &path)?;
            let before = entries.len();
            let answer = change(&mut entries);
            let added = entries[before..].iter().map(to_line).collect();
            Ok((added, answer))
        })
    }
}

/// The name `node`'s ledger goes by on this machine: SLURM's name for it inside a SLURM job
/// (`SLURMD_NODENAME`), since one profile serves every node of a partition; else the
/// profile's `name`.
pub fn ledger_name(node: &NodeProfile) -> String {
    std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|name| crate::node::check_name(name).is_ok())
        .unwrap_or_else(|| node.name().to_owned())
}

/// How a person re-admits the drained node `name` (`NODE` for any), in words: the canary on
/// the mended node, or an admit by hand.
pub fn how_to_readmit(name: &str) -> String {
    format!(
        "once it is mended, re-admit it with `prgate node canary --node FILE --name {name}` on it, or by hand with `prgate node admit --node FILE --name {name} --reason TEXT`"
    )
}

/// Records `strikes` against the node named `name` in `node`'s health directory, now; returns
/// what a person should know, in words (a strike, a drain, or why the ledger could not be
/// written: a ledger that fails never fails the run).
pub fn record(
    node: &NodeProfile,
    name: &str,
    strikes: &[Strike],
    run: Option<&str>,
) -> Vec<String> {
    if strikes.is_empty() {
        return Vec::new();
    }
    let dir = health_dir(node);
    let ledger = match Ledger::new(&dir, name) {
        Ok(ledger) => ledger,
        Err(error) => return vec![format!("the health ledger: {error}")],
    };
    let policy = node.health().policy();
    let mut notes = Vec::new();
    for strike in strikes {
        match ledger.strike(strike, run, policy, SystemTime::now()) {
            Ok(outcome) => {
                notes.push(format!(
                    "a strike against node {name} ({}): {}; {} of {} within {}",
                    strike.source.name(),
                    strike.detail,
                    outcome.in_window,
                    policy.strikes,
                    format_window(policy.window)
                ));
                if outcome.drained_now {
                    notes.push(format!(
                        "node {name} is drained: {} strikes within {}; {}",
                        outcome.in_window,
                        format_window(policy.window),
                        how_to_readmit(name)
                    ));
                }
            }
            Err(error) => notes.push(format!("the health ledger: {error}")),
        }
    }
    notes
}

/// Records the node faults of a failed preflight ([`crate::preflight::PreflightFailure::node_faults`])
/// as strikes against this machine's node ([`ledger_name`]).
pub fn record_preflight(
    node: &NodeProfile,
    failure: &crate::preflight::PreflightFailure,
    run: Option<&str>,
) -> Vec<String> {
    let strikes: Vec<Strike> = failure
        .node_faults()
        .map(|finding| Strike { source: Source::Preflight, detail: finding.to_string() })
        .collect();
    record(node, &ledger_name(node), &strikes, run)
}

/// Every ledger in `dir`, by node name; none when the folder does not exist.
pub fn all_nodes(dir: &Path) -> Result<Vec<NodeHealth>, HealthError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(HealthError::Io { path: dir.to_path_buf(), source }),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| HealthError::Io { path: dir.to_path_buf(), source })?;
        let name = entry.file_name();
        let Some(name) = name.to_str().and_then(|name| name.strip_suffix(".jsonl")) else {
            continue;
        };
        if crate::node::check_name(name).is_ok() {
            names.push(name.to_owned());
        }
    }
    names.sort();
    names.iter().map(|name| Ledger::new(dir, name)?.health()).collect()
}

/// The drained nodes of `dir`, by name.
pub fn drained_nodes(dir: &Path) -> Result<Vec<NodeHealth>, HealthError> {
    Ok(all_nodes(dir)?.into_iter().filter(NodeHealth::is_drained).collect())
}

/// Why a nodes file cannot be filtered.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    #[error(transparent)]
    Nodes(#[from] crate::schedule::nodes_file::NodesFileError),
    #[error("the nodes {path}: every node is drained ({}): no node is left to run on\nhint: {}", .drained.join(", "), how_to_readmit("NODE"))]
    AllDrained { path: String, drained: Vec<String> },
}

/// The nodes file `text` (at `path`, the workflow's `nodes.toml`: docs/node.md) without the
/// tables of the nodes in `drained`, its other values kept (keys sorted, comments dropped).
/// Returns the new text and the names it left out. The file is read as every reader of it reads
/// it ([`crate::schedule::nodes_file::parse`]: an unknown key is refused); an error also says
/// when every node is drained.
pub fn without_drained(
    text: &str,
    path: &str,
    drained: &[String],
) -> Result<(String, Vec<String>), FilterError> {
    use crate::schedule::nodes_file::{self, NodesFileError};
    let (mut table, _nodes) = nodes_file::read(text, path)?;
    let Some(toml::Value::Array(nodes)) = table.get_mut("node") else {
        return Err(NodesFileError::NoNodes { path: path.to_owned() }.into());
    };
    let mut left_out = Vec::new();
    nodes.retain(|node| {
        let name = node.get("name").and_then(toml::Value::as_str).unwrap_or_default();
        let drained = drained.iter().any(|drained| drained == name);
        if drained {
            left_out.push(name.to_owned());
        }
        !drained
    });
    if nodes.is_empty() {
        return Err(FilterError::AllDrained { path: path.to_owned(), drained: left_out });
    }
    let text = toml::to_string(&table).map_err(|error| NodesFileError::Toml {
        path: path.to_owned(),
        message: error.to_string(),
    })?;
    Ok((text, left_out))
}

/// The state the lines say.
fn health_of(node: &str, entries: &[Entry]) -> NodeHealth {
    let since = since_last_admit(entries);
    NodeHealth {
        node: node.to_owned(),
        drained: since.iter().find(|entry| entry.event == EventKind::Drain).cloned(),
        strikes: since.iter().filter(|entry| entry.event == EventKind::Strike).cloned().collect(),
    }
}

/// The lines since the last admit (all of them when there was none): what the node's state is
/// made of.
pub fn since_last_admit(entries: &[Entry]) -> &[Entry] {
    match entries.iter().rposition(|entry| entry.event == EventKind::Admit) {
        Some(index) => &entries[index + 1..],
        None => entries,
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawEntry {
    version: u32,
    at: String,
    node: String,
    event: EventKind,
    source: Source,
    detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run: Option<String>,
}

fn to_line(entry: &Entry) -> String {
    let raw = RawEntry {
        version: LEDGER_VERSION,
        at: rfc3339(entry.at),
        node: entry.node.clone(),
        event: entry.event,
        source: entry.source,
        detail: entry.detail.clone(),
        run: entry.run.clone(),
    };
    serde_json::to_string(&raw).unwrap_or_default()
}

fn parse_lines(text: &str, path: &Path) -> Result<Vec<Entry>, HealthError> {
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let problem = |problem: String| HealthError::Line {
            path: path.to_path_buf(),
            line: index + 1,
            problem,
        };
        let raw: RawEntry =
            serde_json::from_str(line).map_err(|error| problem(error.to_string()))?;
        if raw.version != LEDGER_VERSION {
            return Err(problem(format!(
                "version {} is not one this prgate reads ({LEDGER_VERSION})",
                raw.version
            )));
        }
        let at = parse_rfc3339(&raw.at).ok_or_else(|| {
            problem(format!("at = {:?} is not a UTC time such as 2026-12-01T15:00:00Z", raw.at))
        })?;
        entries.push(Entry {
            at,
            node: raw.node,
            event: raw.event,
            source: raw.source,
            detail: raw.detail,
            run: raw.run,
        });
    }
    Ok(entries)
}

/// Seconds since the Unix epoch.
pub fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}

/// `time` as prgate's own files write it ([`rfc3339`]): RFC 3339 in UTC to the second, e.g.
/// `2026-11-29T18:00:00Z`.
pub fn rfc3339_utc(time: SystemTime) -> String {
    rfc3339(unix_seconds(time))
}

/// A window in the largest whole unit, as a node's `health.window` takes it: `7d`, `36h`,
/// `90m`, `45s`.
pub fn format_window(window: Duration) -> String {
    write_duration(window, Spelling::LargestUnit)
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let event = match self.event {
            EventKind::Strike => "strike",
            EventKind::Drain => "drain",
            EventKind::Admit => "admit",
        };
        write!(f, "{} {event} ({}): {}", rfc3339(self.at), self.source.name(), self.detail)?;
        if let Some(run) = &self.run {
            write!(f, " [{run}]")?;
        }
        Ok(())
    }
}
