//! The blocked design's statistics: speed pairs on a one-server-at-a-time node whose servers
//! speak no memory API, so that every switch of server is a reload (minutes on a real node).
//!
//! Instead of a reload before every run, the runner measures **blocks**: [`BLOCK_RUNS`] runs of
//! each open cell on one load of a side's server, in the order base-block, PR-block,
//! base-block, PR-block, ..., base-block (each block one load). Runs on one load share that
//! load's effect (where the checkpoint landed in memory, the graphs captured, the allocator's
//! layout), so they are **not** independent evidence: the unit of evidence is the block. A
//! block is reduced to the median of its runs ([`block_value`]), and a PR block between two
//! base blocks is one bracketed [`Pair`] ([`block_pair`]): its base is the two base blocks'
//! geometric mean and their ratio is an in-band A/A difference **between loads**, so the
//! variance the gate pools contains the load-to-load effect. The chain of pairs (a closing
//! base block opens the next pair) is the runner's usual one, which [`crate::speed`] already
//! accounts for. The gate then asks its usual questions of these block pairs
//! ([`crate::speed::judge_cell`], [`crate::speed::needs_another_pair`]), with one change:
//! a node's stored calibration measures run-to-run noise on one load and would understate a
//! block pair's variance, so a blocked cell is judged without it ([`blocked_context`]).
//!
//! Treating the runs of a block as pairs of their own (each base run with a PR run of the next
//! load) would count correlated runs as independent: [`simulate_blocked`] shows the rate of
//! false fails that gives with a load-to-load effect present, beside the block design's
//! (bench/gpu-cost.md, `blocks::tests`).
//!
//! What it leaves to others: the order of the runs and the loads (the runner's step loop), the
//! test itself ([`crate::speed`]), the cost of the design (`prgate_runner::schedule::cost`).

use rand::SeedableRng as _;
use rand::rngs::SmallRng;

use crate::config::GateConfig;
use crate::simulate::normal;
use crate::speed::{Answer, CellContext, Pair, judge_cell};
use crate::stats::median;

/// The runs of each open cell on one load of a side's server in the blocked design. A block
/// pair costs two loads whatever its runs, and the gate's own floor (`min-pairs` block pairs,
/// and `min-cv` on a block's noise) bounds how much longer blocks can save: by
/// [`simulate_blocked`] at a real node's proportions (a load 10 min, a run 2 min, 2 cells), two
/// runs a block save loads where the run-to-run noise is high (CV 2%: 10.5 loads a cell instead
/// of 13.8, about 3% less time) and cost about a fifth more where it is low (CV 1%), and three
/// or more cost more in every case simulated (bench/gpu-cost.md).
pub const BLOCK_RUNS: usize = 2;

/// A block's value, the unit of evidence: the median of its runs' TPOT (ms); `None` without a
/// finite run.
pub fn block_value(runs_ms: &[f64]) -> Option<f64> {
    median(runs_ms)
}

/// The pair of a PR block between two base blocks (each given by its [`block_value`]): the
/// same bracketed pair as three runs', so the gate's chain and in-band A/A differences apply to
/// blocks as to runs.
pub fn block_pair(before_ms: f64, pr_ms: f64, after_ms: f64) -> Pair {
    Pair::bracketed(before_ms, pr_ms, after_ms)
}

/// The context a blocked cell is judged with: `context` without the node's stored
/// calibration, which measures the noise of runs on one load and misses the load-to-load
/// effect.
pub fn blocked_context(context: &CellContext) -> CellContext {
    CellContext { calibration: None, ..*context }
}

/// One simulated node whose servers reload between blocks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockScenario {
    /// Run-to-run noise on one load: the standard deviation of one run's log TPOT.
    pub run_cv: f64,
    /// The load-to-load effect: the standard deviation of a load's log offset, shared by every
    /// run on that load.
    pub load_cv: f64,
    /// The PR's true TPOT change: 0.04 is 4% slower.
    pub true_change: f64,
    /// Runs per block.
    pub block_runs: usize,
    /// Covered cells judged together (the family alpha is divided over).
    pub cells: usize,
}

/// How the gate decides a scenario's cell, by the unit of evidence it is given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockOutcomes {
    pub trials: usize,
    /// P(the cell fails).
    pub p_fail: f64,
    /// P(the cell passes).
    pub p_pass: f64,
    /// Loads per cell, the speed phase's reloads (two a block pair, plus the first base
    /// block's).
    pub mean_loads: f64,
    /// Runs per cell.
    pub mean_runs: f64,
}

/// The two ways of judging the same blocked runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A block's median is the unit: one bracketed pair a block pair (the gate's design).
    Block,
    /// Every run its own pair (run `j` of a base block, of the PR block, of the next base
    /// block): correlated runs taken as independent, the mistake the design avoids.
    Run,
}

/// The most block pairs a simulated cell may take before the simulation stops it (undecided).
const BLOCK_PAIR_LIMIT: usize = 100;

/// Simulates `trials` cells of `scenario`, judged by `unit`, asking the gate between block
/// pairs as the runner does. Pure and seeded.
pub fn simulate_blocked(
    config: &GateConfig,
    scenario: &BlockScenario,
    unit: Unit,
    trials: usize,
    seed: u64,
) -> BlockOutcomes {
    let mut rng = SmallRng::seed_from_u64(seed);
    let context = CellContext { cells: scenario.cells, gain_required: false, calibration: None };
    let (mut fails, mut passes, mut loads, mut runs) = (0usize, 0usize, 0usize, 0usize);
    for _ in 0..trials {
        let block = |rng: &mut SmallRng, change: f64| -> Vec<f64> {
            let load = scenario.load_cv * normal(rng);
            (0..scenario.block_runs)
                .map(|_| 20.0 * (1.0 + change) * (load + scenario.run_cv * normal(rng)).exp())
                .collect()
        };
        let mut before = block(&mut rng, 0.0);
        let mut blocks = 1;
        let mut pairs = Vec::new();
        let answer = loop {
            let pr = block(&mut rng, scenario.true_change);
            let after = block(&mut rng, 0.0);
            blocks += 2;
            match unit {
                Unit::Block => {
                    let value = |runs: &[f64]| block_value(runs).unwrap_or(f64::NAN);
                    pairs.push(block_pair(value(&before), value(&pr), value(&after)));
                }
                Unit::Run => pairs.extend(
                    (0..scenario.block_runs).map(|j| block_pair(before[j], pr[j], after[j])),
                ),
            }
            let judgement = judge_cell(&pairs, config, &context);
            if judgement.loss != Answer::Open || blocks / 2 >= BLOCK_PAIR_LIMIT {
                break judgement.loss;
            }
            before = after;
        };
        fails += usize::from(answer == Answer::Yes);
        passes += usize::from(answer == Answer::No);
        loads += blocks;
        runs += blocks * scenario.block_runs;
    }
    let share = |count: usize| count as f64 / trials.max(1) as f64;
    BlockOutcomes {
        trials,
        p_fail: share(fails),
        p_pass: share(passes),
        mean_loads: share(loads),
        mean_runs: share(runs),
    }
}

#[cfg(test)]
mod tests;
