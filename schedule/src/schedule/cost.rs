//! What one model's job costs in its units: server **loads**, **wakes** (a released server
//! taking its memory back), **speed runs** and gateway **probes**, counted by one formula that
//! the estimate (`prgate plan --estimate`), the SLURM jobs' time limits and the GPU-time report
//! all use (they all go through [`super::estimate_model`]); the runner's step loop does what
//! it counts (`prgate_runner::run`), and the CLI tests hold the two to the same numbers.
//!
//! How a model's servers share its node is [`Layout`]: both up at once on disjoint GPUs when
//! the node has `2 × tp` of them (and the recipe is no topology), else one at a time on the
//! same GPUs. One at a time, the runner does the PR side's server work first (serving tests,
//! accuracy), then base's, so that base's server is up when the speed pairs open; each round
//! of pairs then switches to the PR's server and back (two switches a round, every cell's
//! runs of the round on the server that is up). A cell of `n` pairs takes `2n + 1` runs: a
//! pair's closing base run opens the next.
//!
//! How one at a time switches is [`Switching`]. By the engines' memory release (the recipe's
//! `server.memory-api` names SGLang's or vLLM's API, or the runner finds one by probing at the
//! first switch, `prgate_runner::run`), each side loads once and every later switch is a wake. A server
//! with neither (`none`, or a probe that finds none; a topology) reloads at every switch, so the
//! runner measures in **blocks**: a cell's [`BLOCK_RUNS`] runs on each load, a block pair's
//! PR block between two base blocks (`prgate_gate::speed::blocks`, whose unit of evidence is the
//! block); `pairs` then counts block pairs, two loads each. Before a run the estimate knows
//! only the recipe: `sglang` and `vllm` count wakes; `probe` and `none` count blocks, the
//! costlier design and so the upper bound a time limit needs (`probe` on a server that turns out
//! to speak an API costs less than estimated).
//!
//! What it leaves to others: the durations of the units (the estimate's constants or the
//! history), running the job (the runner).

use std::time::Duration;

use prgate_gate::speed::blocks::BLOCK_RUNS;

use crate::recipe::Recipe;
use crate::recipe::memory_api::MemoryApiKey;

/// How a model's two servers share the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Both up at once, on disjoint GPUs: each loaded once.
    Together,
    /// One at a time on the same GPUs: each switch stops one and loads the other.
    OneAtATime,
}

impl Layout {
    /// The layout of `recipe`'s servers on a node of `node_gpus` GPUs (`None`: not known, so
    /// one at a time, the costlier). A topology has its nodes to itself: base's and PR's in
    /// turn.
    pub fn of(node_gpus: Option<u32>, recipe: &Recipe) -> Layout {
        let Some(gpus) = node_gpus else { return Layout::OneAtATime };
        let tp = recipe.tp().min(gpus);
        if gpus >= tp.saturating_mul(2) && recipe.topology().is_none() {
            Layout::Together
        } else {
            Layout::OneAtATime
        }
    }

    /// The layout on the costliest of `nodes` (their GPU counts): one at a time when any of
    /// them has no room for both servers, or none is known.
    pub fn on_any_of(nodes: impl IntoIterator<Item = Option<u32>>, recipe: &Recipe) -> Layout {
        let mut layout = None;
        for gpus in nodes {
            if Layout::of(gpus, recipe) == Layout::OneAtATime {
                return Layout::OneAtATime;
            }
            layout = Some(Layout::Together);
        }
        layout.unwrap_or(Layout::OneAtATime)
    }
}

/// How a one-at-a-time node switches from one server to the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switching {
    /// By the engines' memory release: each side loads once, every later switch is a wake.
    Wake,
    /// Every switch reloads: the speed runs go in blocks of `runs` runs a cell on one load.
    Blocked { runs: u32 },
}

impl Switching {
    /// What the estimate counts for `recipe`: a topology's servers are stopped and loaded again
    /// at each switch (blocks), whatever its memory API; else [`Switching::declared`].
    pub fn of(recipe: &Recipe) -> Switching {
        if recipe.topology().is_some() {
            Switching::blocked()
        } else {
            Switching::declared(recipe.server().memory_api)
        }
    }

    /// Blocks of [`BLOCK_RUNS`] runs.
    fn blocked() -> Switching {
        Switching::Blocked { runs: u32::try_from(BLOCK_RUNS).unwrap_or(u32::MAX) }
    }

    /// What the estimate counts for a recipe that says `key` of its memory API: wakes where it
    /// names one, else blocks of [`BLOCK_RUNS`] (`probe`: the upper bound).
    pub fn declared(key: MemoryApiKey) -> Switching {
        match key {
            MemoryApiKey::Sglang | MemoryApiKey::Vllm => Switching::Wake,
            MemoryApiKey::Probe | MemoryApiKey::None => Switching::blocked(),
        }
    }
}

/// What a model's run holds while it runs: the nodes and GPUs its GPU time is counted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holds {
    pub nodes: u32,
    pub gpus: u32,
}

impl Holds {
    /// What `recipe`'s servers hold on a node of `node_gpus` GPUs (`None`: not known): a
    /// topology every instance's GPUs over all its nodes (base's and PR's in turn); else one
    /// node, and `2 × tp` when both servers fit at once ([`Layout::of`]), else `tp`, never more
    /// than the node has.
    pub fn of(node_gpus: Option<u32>, recipe: &Recipe) -> Holds {
        if let Some(topology) = recipe.topology() {
            return Holds { nodes: topology.nodes(), gpus: topology.gpus() };
        }
        let tp = node_gpus.map_or(recipe.tp(), |gpus| recipe.tp().min(gpus));
        let gpus = match Layout::of(node_gpus, recipe) {
            Layout::Together => tp.saturating_mul(2),
            Layout::OneAtATime => tp,
        };
        Holds { nodes: 1, gpus }
    }

    /// The GPU time of holding these GPUs for `duration`, in GPU-seconds: its whole seconds
    /// (rounded up, as the schedule counts them) times the GPUs, saturating.
    pub fn gpu_seconds(&self, duration: std::time::Duration) -> u64 {
        super::whole_seconds(duration).saturating_mul(u64::from(self.gpus))
    }
}

/// What a model's job runs on its servers, as the counts need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    pub layout: Layout,
    /// Whether the PR side's server has work before the speed pairs (serving tests or
    /// accuracy): one at a time, it is then loaded before base's.
    pub pr_work_first: bool,
    /// Speed cells, and the pairs each takes (block pairs in the blocked design).
    pub cells: u32,
    pub pairs: u32,
    /// Whether each server start runs a gateway probe first (container isolation).
    pub probed: bool,
    /// How the servers switch, one at a time.
    pub switching: Switching,
    /// The accuracy rounds before the speed phase: the repeats of the benchmark that takes the
    /// most (0: no accuracy). The first round is the PR's work first, then base's; each later
    /// round runs every open benchmark's next repeat on both sides, the server that is up
    /// first (`prgate_runner::run`): one at a time, a switch a round, and one more when the rounds end
    /// on the PR's server and base's must open the speed pairs.
    pub accuracy_rounds: u32,
}

/// The units a job costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Server loads before the speed phase (each side's first, and, blocked, the accuracy
    /// rounds' switches).
    pub setup_loads: u32,
    /// Server loads inside the speed phase (one at a time, blocked: every switch reloads).
    pub speed_loads: u32,
    /// Wakes of a released server in the speed phase (switching by memory release), each with
    /// its warm-up.
    pub wakes: u32,
    /// Wakes before the speed phase: the accuracy rounds' switches by memory release.
    pub setup_wakes: u32,
    /// Speed runs, over all cells.
    pub runs: u32,
    /// Gateway probes: one per load when the servers run in containers.
    pub probes: u32,
}

impl Counts {
    /// All loads.
    pub fn loads(&self) -> u32 {
        self.setup_loads + self.speed_loads
    }

    /// The wall time of these units at `units`' durations (what the servers and the speed
    /// runs take; the job's tests and benchmarks are the estimate's other parts).
    pub fn time(&self, units: &Units) -> Duration {
        units.load.saturating_mul(self.loads())
            + units.wake.saturating_mul(self.wakes + self.setup_wakes)
            + units.run.saturating_mul(self.runs)
            + units.probe.saturating_mul(self.probes)
    }
}

/// How long each unit takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Units {
    pub load: Duration,
    pub wake: Duration,
    pub run: Duration,
    pub probe: Duration,
}

/// The formula. Both servers are needed (the routing check reads each side's log).
pub fn counts(work: &Work) -> Counts {
    let speed = work.cells > 0 && work.pairs > 0;
    // A block is one run but in the blocked design, one at a time.
    let block_runs = match (work.layout, work.switching) {
        (Layout::OneAtATime, Switching::Blocked { runs }) => runs.max(1),
        _ => 1,
    };
    let runs = if speed { work.cells * (2 * work.pairs + 1) * block_runs } else { 0 };
    let (setup_loads, speed_loads) = match work.layout {
        Layout::Together => (2, 0),
        // Base opens the pairs: loaded before them (after the PR's, when that has work first);
        // each round (a block pair) then loads the PR's server and base's again. Without the
        // PR's work first, the first round's PR block loads it (counted with the rounds).
        Layout::OneAtATime if speed => {
            let setup = if work.pr_work_first { 2 } else { 1 };
            let rounds = 2 * work.pairs;
            (setup, rounds)
        }
        Layout::OneAtATime => (2, 0),
    };
    // Switching by memory release, each side loads once: a switch to a side already loaded is
    // a wake (the PR's first, without work before the pairs, is its load).
    let waking = work.switching == Switching::Wake;
    let (speed_loads, wakes) = if waking && work.layout == Layout::OneAtATime && speed {
        let first_pr_load = u32::from(!work.pr_work_first);
        (first_pr_load, speed_loads - first_pr_load)
    } else {
        (speed_loads, 0)
    };
    // The accuracy rounds' switches: wakes where the servers switch by memory release, else
    // loads.
    let accuracy_switches = match work.layout {
        Layout::Together => 0,
        Layout::OneAtATime => {
            let later = work.accuracy_rounds.saturating_sub(1);
            later + u32::from(speed && later % 2 == 1)
        }
    };
    let (setup_loads, setup_wakes) = if waking {
        (setup_loads, accuracy_switches)
    } else {
        (setup_loads + accuracy_switches, 0)
    };
    let probes = if work.probed { setup_loads + speed_loads } else { 0 };
    Counts { setup_loads, speed_loads, wakes, setup_wakes, runs, probes }
}

#[cfg(test)]
mod tests;
