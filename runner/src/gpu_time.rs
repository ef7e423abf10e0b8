//! GPU time: what each model's run cost, by phase, against the plan's estimate; kept in the
//! results directory and appended to the node's history.
//!
//! The step loop attributes its wall time to five **phases** as it goes ([`PhaseClock`]):
//! `install` (a side's `install.command`), `servers` (starting a server until it is healthy,
//! and stopping the other side's to make room), `tests` (unit, kernel, serving and common
//! tests, and the kernel timing scripts), `accuracy` (each benchmark against a server) and
//! `speed` (the speed runs of every cell). A phase nested in another (a server started for a
//! speed run) counts for itself only; what no phase holds (reading logs, writing records) is
//! not counted. A model's **GPU time** in a phase is that wall time times the GPUs its run
//! holds: `2 × tp` when the node has room for both servers at once, else `tp` (capped at the
//! node's GPUs); the common checks hold none. The **estimate** is the schedule's
//! (`crate::schedule::estimate_model`, from the recipe and its constants) by the same phases,
//! times the same GPUs.
//!
//! # `DIR/gpu-time/<target>.json` (`schema_version` 1)
//!
//! One file per target (a model, or `~common`), written atomically; a run resumed into the same
//! results directory adds its time to what the file holds:
//!
//! ```json
//! { "schema_version": 1, "model": "kimi_k31", "gpus": 16,
//!   "phases": [ { "phase": "install", "seconds": 310.2, "gpu_seconds": 4963.2,
//!                 "estimate_seconds": 600, "estimate_gpu_seconds": 9600 }, ... ] }
//! ```
//!
//! `model` is null for the common checks; every phase is listed, in the order above;
//! `estimate_*` is absent when there is no estimate (no valid recipe). A model whose servers ran
//! has `servers`, how its two servers shared the node and what that took ([`ServersUsed`]):
//!
//! ```json
//! "servers": { "design": "blocked", "loads": 8, "wakes": 0, "switches": 7, "block_runs": 3,
//!              "why": "base's recipe says server.memory-api = \"none\"" }
//! ```
//!
//! `design` is `together` (both up at once on disjoint GPUs), `sglang` or `vllm` (one at a time,
//! switched by that engine's memory release and resume), or `blocked` (one at a time, every
//! switch a reload: the speed runs in blocks of `block_runs` runs a cell on each load,
//! `prgate_gate::speed::blocks`). `switches` counts every load or wake after the first server's
//! load; `why` says what chose the design.
//!
//! # The node's history: `<cache-dir>/gpu-hours.jsonl` (`schema_version` 1)
//!
//! At the end of every run, one JSON line per target and phase that took time, appended:
//!
//! ```json
//! {"schema_version":1,"time_ms":1764430000000,"node":"mi355x-1","run":"https://github.com/org/repo/actions/runs/123","pr_commit":"...","base_commit":"...","model":"kimi_k31","phase":"speed","seconds":1830.5,"gpus":16,"gpu_seconds":29288.0}
//! ```
//!
//! `run` is the run's name (its workflow run's page, or its results directory). A maintainer
//! sums it with jq: all of it, `jq -s 'map(.gpu_seconds) | add / 3600' gpu-hours.jsonl`; by PR
//! commit, `jq -s 'group_by(.pr_commit) | map({pr_commit: .[0].pr_commit, gpu_hours:
//! (map(.gpu_seconds) | add / 3600)})' gpu-hours.jsonl` (docs/gpu-hours.md).
//!
//! What it leaves to others: the estimate (`crate::schedule`, the `prgate-schedule` crate's),
//! showing it (the report). It stays in the runner: it times a run as it goes (the clock) and
//! writes and reads the results' and the node's files; of the estimate's side it only asks the
//! schedule what a model holds ([`gpus_held`]).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::schedule::{Estimate, Part};

/// The version of the files' format.
pub const SCHEMA_VERSION: u32 = 1;
/// The node's history file, in its cache directory.
pub const HISTORY_FILE: &str = "gpu-hours.jsonl";
/// The folder of the per-target files in a results directory.
pub const RESULTS_FOLDER: &str = "gpu-time";

/// What a run's wall time is spent on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Install,
    Servers,
    Tests,
    Accuracy,
    Speed,
}

impl Phase {
    /// Every phase, in the order files and tables list them.
    pub const ALL: [Phase; 5] =
        [Phase::Install, Phase::Servers, Phase::Tests, Phase::Accuracy, Phase::Speed];

    /// Its name, as the files have it.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Install => "install",
            Phase::Servers => "servers",
            Phase::Tests => "tests",
            Phase::Accuracy => "accuracy",
            Phase::Speed => "speed",
        }
    }

    /// The phase of a part of a schedule's estimate.
    pub fn of_part(part: &Part) -> Phase {
        match part {
            Part::Install => Phase::Install,
            Part::ServerStartups => Phase::Servers,
            Part::Tests { .. } | Part::KernelTiming { .. } | Part::CommonTests { .. } => {
                Phase::Tests
            }
            Part::Accuracy { .. } => Phase::Accuracy,
            Part::SpeedCell { .. } => Phase::Speed,
        }
    }
}

/// Attributes wall time to the phase the step loop is in. Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct PhaseClock {
    inner: Rc<RefCell<ClockState>>,
}

#[derive(Debug, Default)]
struct ClockState {
    /// The phase now, and since when.
    current: Option<(Phase, Instant)>,
    totals: BTreeMap<Phase, Duration>,
}

/// While it lives, the clock is in its phase; dropping it returns to the phase before.
#[derive(Debug)]
pub struct InPhase {
    clock: PhaseClock,
    previous: Option<Phase>,
}

impl PhaseClock {
    /// Enters `phase` until the returned guard is dropped.
    pub fn enter(&self, phase: Phase) -> InPhase {
        let previous = self.switch(Some(phase));
        InPhase { clock: self.clone(), previous }
    }

    /// Takes the time so far out of the clock, by phase, and starts again from nothing (the
    /// phase it is in goes on).
    pub fn take(&self) -> BTreeMap<Phase, Duration> {
        let mut state = self.inner.borrow_mut();
        if let Some((phase, since)) = state.current {
            let now = Instant::now();
            *state.totals.entry(phase).or_default() += now.saturating_duration_since(since);
            state.current = Some((phase, now));
        }
        std::mem::take(&mut state.totals)
    }

    fn switch(&self, to: Option<Phase>) -> Option<Phase> {
        let mut state = self.inner.borrow_mut();
        let now = Instant::now();
        let previous = state.current.take().map(|(phase, since)| {
            *state.totals.entry(phase).or_default() += now.saturating_duration_since(since);
            phase
        });
        state.current = to.map(|phase| (phase, now));
        previous
    }
}

impl Drop for InPhase {
    fn drop(&mut self) {
        self.clock.switch(self.previous);
    }
}

/// One phase of a target's GPU time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseTime {
    pub phase: Phase,
    pub seconds: f64,
    pub gpu_seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_gpu_seconds: Option<u64>,
}

/// A target's GPU time by phase: `DIR/gpu-time/<target>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetTime {
    pub schema_version: u32,
    /// The model, or `None` for the common checks.
    pub model: Option<String>,
    /// The GPUs its run holds.
    pub gpus: u32,
    pub phases: Vec<PhaseTime>,
    /// How its servers shared the node, when they ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub servers: Option<ServersUsed>,
}

/// How a model's two servers shared the node in a run, and what that took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServersUsed {
    pub design: ServerDesign,
    /// Server loads (a start until healthy), both sides.
    pub loads: u32,
    /// Wakes of a released server, both sides.
    pub wakes: u32,
    /// Loads and wakes after the first server's load.
    pub switches: u32,
    /// The runs of a cell on one load (`1` but in the blocked design).
    pub block_runs: u32,
    /// What chose the design, in words.
    pub why: String,
}

impl ServersUsed {
    /// The design in words, as the run's notes and the comment say it: `one server at a time, blocked reloads (blocks of 3 runs):
    /// 8 loads, 0 wakes, 7 switches, because base's recipe says server.memory-api = "none"`.
    pub fn words(&self) -> String {
        let how = match self.design {
            ServerDesign::Together => "both servers up together",
            ServerDesign::Sglang => {
                "one server at a time, switched by SGLang's memory release and resume"
            }
            ServerDesign::Vllm => "one server at a time, switched by vLLM's sleep and wake-up",
            ServerDesign::Blocked => "one server at a time, blocked reloads",
        };
        let blocks = if self.design == ServerDesign::Blocked {
            format!(" (blocks of {} runs)", self.block_runs)
        } else {
            String::new()
        };
        format!(
            "{how}{blocks}: {} loads, {} wakes, {} switches, because {}",
            self.loads, self.wakes, self.switches, self.why
        )
    }
}

/// The ways a model's two servers share a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerDesign {
    /// Both up at once, on disjoint GPUs.
    Together,
    /// One at a time, switched by SGLang's memory release and resume.
    Sglang,
    /// One at a time, switched by vLLM's sleep and wake-up.
    Vllm,
    /// One at a time, every switch a reload: the speed runs in blocks.
    Blocked,
}

/// One line of the node's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryLine {
    pub schema_version: u32,
    pub time_ms: u64,
    pub node: String,
    pub run: String,
    pub pr_commit: String,
    pub base_commit: String,
    pub model: Option<String>,
    pub phase: Phase,
    pub seconds: f64,
    pub gpus: u32,
    pub gpu_seconds: f64,
}

impl TargetTime {
    /// A target's time: `measured` by phase, on `gpus` GPUs, against `estimate` when there is
    /// one; every phase is listed.
    pub fn new(
        model: Option<&str>,
        gpus: u32,
        measured: &BTreeMap<Phase, Duration>,
        estimate: Option<&Estimate>,
    ) -> TargetTime {
        let estimated = estimate.map(|estimate| {
            let mut by_phase: BTreeMap<Phase, Duration> = BTreeMap::new();
            for part in estimate.parts() {
                *by_phase.entry(Phase::of_part(&part.part)).or_default() += part.duration;
            }
            by_phase
        });
        let phases = Phase::ALL
            .iter()
            .map(|&phase| {
                let seconds = measured.get(&phase).copied().unwrap_or_default().as_secs_f64();
                let estimate_seconds = estimated
                    .as_ref()
                    .map(|by_phase| by_phase.get(&phase).copied().unwrap_or_default().as_secs());
                PhaseTime {
                    phase,
                    seconds,
                    gpu_seconds: seconds * f64::from(gpus),
                    estimate_seconds,
                    estimate_gpu_seconds: estimate_seconds
                        .map(|seconds| seconds.saturating_mul(u64::from(gpus))),
                }
            })
            .collect();
        TargetTime {
            schema_version: SCHEMA_VERSION,
            model: model.map(str::to_owned),
            gpus,
            phases,
            servers: None,
        }
    }

    /// `self` with `earlier`'s measured time added (a resumed run into the same directory).
    fn plus(mut self, earlier: &TargetTime) -> TargetTime {
        for phase in &mut self.phases {
            if let Some(before) = earlier.phases.iter().find(|other| other.phase == phase.phase) {
                phase.seconds += before.seconds;
                phase.gpu_seconds += before.gpu_seconds;
            }
        }
        // A resumed run whose servers were not needed again keeps the earlier run's design.
        self.servers = self.servers.or_else(|| earlier.servers.clone());
        self
    }

    /// The node history's lines of what this run measured: one per phase that took time.
    pub fn history(
        &self,
        node: &str,
        run: &str,
        pr_commit: &str,
        base_commit: &str,
    ) -> Vec<HistoryLine> {
        let time_ms = crate::results::now_ms();
        self.phases
            .iter()
            .filter(|phase| phase.seconds > 0.0)
            .map(|phase| HistoryLine {
                schema_version: SCHEMA_VERSION,
                time_ms,
                node: node.to_owned(),
                run: run.to_owned(),
                pr_commit: pr_commit.to_owned(),
                base_commit: base_commit.to_owned(),
                model: self.model.clone(),
                phase: phase.phase,
                seconds: phase.seconds,
                gpus: self.gpus,
                gpu_seconds: phase.gpu_seconds,
            })
            .collect()
    }

    /// Where the file of the target named `target` is in a results directory.
    pub fn path(results: &Path, target: &str) -> PathBuf {
        results.join(RESULTS_FOLDER).join(format!("{}.json", crate::results::escape(target)))
    }

    /// Writes it as `target`'s file under `results`, adding what an earlier attempt wrote
    /// there; returns what was written.
    pub fn save(self, results: &Path, target: &str) -> Result<TargetTime, GpuTimeError> {
        let path = TargetTime::path(results, target);
        let total = match std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<TargetTime>(&bytes).ok())
        {
            Some(earlier) if earlier.gpus == self.gpus && earlier.model == self.model => {
                self.plus(&earlier)
            }
            _ => self,
        };
        total.write(&path)?;
        Ok(total)
    }

    /// Writes it to `path` atomically, as pretty JSON; the error names the path.
    fn write(&self, path: &Path) -> Result<(), GpuTimeError> {
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).map_err(|error| GpuTimeError::io(path, error))?;
        }
        let mut json =
            serde_json::to_vec_pretty(self).map_err(|error| GpuTimeError::json(path, error))?;
        json.push(b'\n');
        crate::results::write_atomically(path, &json).map_err(|error| GpuTimeError::io(path, error))
    }

    /// Copies every target's file of the results directory `from` (a SLURM job's, which adds
    /// up its own attempts) into `to`'s, replacing what `to` held for that target: the run's
    /// GPU time is its jobs'. A file that does not read as a [`TargetTime`] is not copied.
    /// Returns how many were copied.
    pub fn copy_all(from: &Path, to: &Path) -> Result<usize, GpuTimeError> {
        let Ok(entries) = std::fs::read_dir(from.join(RESULTS_FOLDER)) else { return Ok(0) };
        let mut copied = 0;
        for path in entries.flatten().map(|entry| entry.path()) {
            let Some(name) =
                path.file_name().filter(|_| path.extension().is_some_and(|e| e == "json"))
            else {
                continue;
            };
            let Some(time) = std::fs::read(&path)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<TargetTime>(&bytes).ok())
            else {
                continue;
            };
            time.write(&to.join(RESULTS_FOLDER).join(name))?;
            copied += 1;
        }
        Ok(copied)
    }

    /// Reads every target's file of a results directory, in file-name order.
    pub fn read_all(results: &Path) -> Vec<TargetTime> {
        let Ok(entries) = std::fs::read_dir(results.join(RESULTS_FOLDER)) else {
            return Vec::new();
        };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        paths.sort();
        paths
            .iter()
            .filter_map(|path| std::fs::read(path).ok())
            .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
            .collect()
    }
}

/// The GPUs a model's run holds on `node` ([`crate::schedule::cost::Holds`], the estimate's
/// formula too): `2 × tp` when the node has room for both servers at once, else `tp`, never
/// more than the node has; a topology's, every instance's GPUs over all its nodes
/// (docs/topology.md).
pub fn gpus_held(node: &crate::node::NodeProfile, recipe: &crate::recipe::Recipe) -> u32 {
    let node_gpus = u32::try_from(node.gpu_count()).unwrap_or(u32::MAX);
    crate::schedule::cost::Holds::of(Some(node_gpus), recipe).gpus
}

/// Appends `lines` to the node's history in `cache_dir`, one JSON object per line, each handed
/// to the kernel in one write.
pub fn append_history(cache_dir: &Path, lines: &[HistoryLine]) -> Result<(), GpuTimeError> {
    let path = cache_dir.join(HISTORY_FILE);
    std::fs::create_dir_all(cache_dir).map_err(|error| GpuTimeError::io(&path, error))?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|error| GpuTimeError::io(&path, error))?;
    for line in lines {
        let mut json =
            serde_json::to_vec(line).map_err(|error| GpuTimeError::json(&path, error))?;
        json.push(b'\n');
        file.write_all(&crate::redact::redact_bytes(&json))
            .map_err(|error| GpuTimeError::io(&path, error))?;
    }
    Ok(())
}

/// Why a GPU-time file or the node's GPU-time history was not written: the file, and what
/// failed (`<path>: <error>`).
#[derive(Debug, thiserror::Error)]
pub enum GpuTimeError {
    /// Creating its folder, opening or writing the file failed.
    #[error("{}: {error}", .path.display())]
    Io { path: PathBuf, error: std::io::Error },
    /// Its record did not serialize as JSON.
    #[error("{}: {error}", .path.display())]
    Json { path: PathBuf, error: serde_json::Error },
}

impl GpuTimeError {
    fn io(path: &Path, error: std::io::Error) -> GpuTimeError {
        GpuTimeError::Io { path: path.to_owned(), error }
    }

    fn json(path: &Path, error: serde_json::Error) -> GpuTimeError {
        GpuTimeError::Json { path: path.to_owned(), error }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_phases_count_for_themselves_only() {
        let clock = PhaseClock::default();
        {
            let _speed = clock.enter(Phase::Speed);
            std::thread::sleep(Duration::from_millis(30));
            {
                let _servers = clock.enter(Phase::Servers);
                std::thread::sleep(Duration::from_millis(30));
            }
            std::thread::sleep(Duration::from_millis(30));
        }
        // Outside every phase: not counted.
        std::thread::sleep(Duration::from_millis(30));
        let totals = clock.take();
        let speed = totals[&Phase::Speed];
        let servers = totals[&Phase::Servers];
        assert_eq!(totals.len(), 2, "{totals:?}");
        assert!(speed >= Duration::from_millis(60), "{speed:?}");
        assert!(servers >= Duration::from_millis(30), "{servers:?}");
        assert!(clock.take().is_empty(), "taken once");
    }

    #[test]
    fn a_topology_holds_every_instance_gpus() {
        let recipe = crate::recipe::Recipe::parse(
            &crate::recipe::EXAMPLE.replace(
                "[timeouts]",
                "[topology.prefill]\ninstances = 2\ntp = 8\ncommand = \"s --port {port} --b {bootstrap_port}\"\n[topology.decode]\ninstances = 1\ntp = 8\ncommand = \"s --port {port}\"\n[topology.router]\ncommand = \"r --port {port}\"\n\n[timeouts]",
            ),
            "t.toml",
        )
        .expect("a recipe with a 2P1D topology");
        let node = crate::node::NodeProfile::parse(crate::node::EXAMPLE, "n.toml").expect("a node");
        assert_eq!(gpus_held(&node, &recipe), 24);
    }

    #[test]
    fn gpu_time_is_wall_time_times_the_gpus_held_and_a_resumed_run_adds_to_it() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let measured = BTreeMap::from([(Phase::Tests, Duration::from_secs(90))]);
        let first = TargetTime::new(Some("alpha"), 4, &measured, None);
        let tests = &first.phases[2];
        assert_eq!((tests.phase, tests.seconds, tests.gpu_seconds), (Phase::Tests, 90.0, 360.0));
        assert_eq!(first.phases.len(), 5);
        first.save(dir.path(), "alpha").expect("saved");
        let again = TargetTime::new(Some("alpha"), 4, &measured, None);
        let total = again.save(dir.path(), "alpha").expect("saved");
        assert_eq!(total.phases[2].gpu_seconds, 720.0);
        assert_eq!(TargetTime::read_all(dir.path()), vec![total]);
    }
}
