//! How well the speed and accuracy rules decide, by simulation of what a node sees: the gate's
//! own functions ([`judge_cell`], [`crate::accuracy::judge_benchmark`]) asked pair by pair, as the runner asks.
//!
//! Speed: each run's median TPOT is the true value times `exp(cv * z)`, `z` standard normal,
//! independently for every run; a share of runs are outliers, twice as slow. A pair is
//! bracketed as the runner runs it (base, PR, base: three runs, its own), and a PR judges
//! `cells` cells together, `regressed` of them with the true change. A node calibration, when
//! there is one, is the runner's robust estimate (median/MAD) from that many base-vs-base
//! differences of the same noise. Accuracy: [`accuracy`], repeats until the rule decides.
//! Pure and seeded: the same inputs give the same numbers.

use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};

use crate::config::GateConfig;
use crate::speed::{Answer, Calibration, CellContext, Pair, judge_cell};
use crate::stats::{mean, robust_log_ratio_variance, sample_variance, t_quantile};

pub mod accuracy;

/// The most pairs a simulated cell may take before the simulation calls the rule broken.
const PAIR_LIMIT: usize = 200;

/// One simulated kind of PR's speed cells.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeedScenario {
    /// Run-to-run noise: the standard deviation of one run's log TPOT.
    pub cv: f64,
    /// Covered cells judged together.
    pub cells: usize,
    /// How many of them have `true_change` (the rest none).
    pub regressed: usize,
    /// The PR's true TPOT change in the regressed cells: 0.04 is 4% slower.
    pub true_change: f64,
    /// The share of runs that are outliers (twice as slow).
    pub outlier_rate: f64,
    /// The node's stored calibration: from this many base-vs-base differences, or none.
    pub calibration_samples: Option<u32>,
}

/// What the speed rule did over the trials of a scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeedOutcomes {
    pub trials: usize,
    /// P(the PR fails: some cell fails).
    pub p_pr_fail: f64,
    /// P(a cell without a change fails), per cell.
    pub p_null_cell_fail: f64,
    /// P(a regressed cell fails), per cell: the power.
    pub p_regressed_cell_fail: f64,
    /// The share of cells the pair cap left undecided: not a pass (the verdict's `error`).
    pub p_undecided: f64,
    /// P(a regressed cell passes), per cell: what beta bounds. An undecided cell is not a
    /// pass.
    pub p_regressed_cell_pass: f64,
    pub mean_pairs: f64,
    pub p90_pairs: usize,
    /// Runs per cell (three a bracketed pair).
    pub mean_runs: f64,
    /// Pairs excluded as outliers per cell.
    pub mean_outliers: f64,
}

/// Simulates `trials` PRs of a scenario.
pub fn simulate_speed(
    config: &GateConfig,
    scenario: &SpeedScenario,
    trials: usize,
    seed: u64,
) -> SpeedOutcomes {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut tally = Tally::default();
    for _ in 0..trials {
        let mut failed = false;
        for cell in 0..scenario.cells {
            let regressed = cell < scenario.regressed;
            let change = if regressed { scenario.true_change } else { 0.0 };
            let calibration = scenario.calibration_samples.map(|samples| {
                let differences: Vec<f64> = (0..samples)
                    .map(|_| {
                        let a = run(&mut rng, scenario, 0.0);
                        let b = run(&mut rng, scenario, 0.0);
                        (b / a).ln()
                    })
                    .collect();
                Calibration {
                    log_ratio_variance: robust_log_ratio_variance(&differences).unwrap_or(0.0),
                    samples,
                }
            });
            let context = CellContext { cells: scenario.cells, gain_required: false, calibration };
            let mut pairs = Vec::new();
            let judgement = loop {
                let before = run(&mut rng, scenario, 0.0);
                let pr = run(&mut rng, scenario, change);
                let after = run(&mut rng, scenario, 0.0);
                pairs.push(Pair::bracketed(before, pr, after));
                let judgement = judge_cell(&pairs, config, &context);
                if judgement.loss != Answer::Open || pairs.len() >= PAIR_LIMIT {
                    break judgement;
                }
            };
            let cell_failed = judgement.loss == Answer::Yes;
            failed |= cell_failed;
            tally.cell(regressed, judgement.loss, pairs.len(), judgement.outliers.len());
        }
        tally.prs += 1;
        tally.pr_fails += usize::from(failed);
    }
    tally.outcomes()
}

pub(crate) fn run(rng: &mut SmallRng, scenario: &SpeedScenario, change: f64) -> f64 {
    let outlier = if rng.random::<f64>() < scenario.outlier_rate { 2.0 } else { 1.0 };
    20.0 * (1.0 + change) * (scenario.cv * normal(rng)).exp() * outlier
}

/// A standard normal draw (Box–Muller).
pub(crate) fn normal(rng: &mut SmallRng) -> f64 {
    let u: f64 = rng.random_range(1e-12..1.0);
    let v: f64 = rng.random::<f64>();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

#[derive(Default)]
struct Tally {
    prs: usize,
    pr_fails: usize,
    null_cells: usize,
    null_fails: usize,
    regressed_cells: usize,
    regressed_fails: usize,
    regressed_passes: usize,
    undecided: usize,
    pairs: Vec<usize>,
    outliers: usize,
}

impl Tally {
    fn cell(&mut self, regressed: bool, loss: Answer, pairs: usize, outliers: usize) {
        let failed = loss == Answer::Yes;
        if regressed {
            self.regressed_cells += 1;
            self.regressed_fails += usize::from(failed);
            self.regressed_passes += usize::from(loss == Answer::No);
        } else {
            self.null_cells += 1;
            self.null_fails += usize::from(failed);
        }
        // A cell still open at the simulation's own limit is undecided too: never a pass.
        self.undecided += usize::from(matches!(loss, Answer::Undecided | Answer::Open));
        self.pairs.push(pairs);
        self.outliers += outliers;
    }

    fn outcomes(mut self) -> SpeedOutcomes {
        let share = |count: usize, of: usize| count as f64 / of.max(1) as f64;
        let cells = self.pairs.len();
        self.pairs.sort_unstable();
        let p90_index = ((cells as f64 * 0.9).ceil() as usize).saturating_sub(1);
        let total: usize = self.pairs.iter().sum();
        SpeedOutcomes {
            trials: self.prs,
            p_pr_fail: share(self.pr_fails, self.prs),
            p_null_cell_fail: share(self.null_fails, self.null_cells),
            p_regressed_cell_fail: share(self.regressed_fails, self.regressed_cells),
            p_undecided: share(self.undecided, cells),
            p_regressed_cell_pass: share(self.regressed_passes, self.regressed_cells),
            mean_pairs: share(total, cells),
            p90_pairs: self.pairs.get(p90_index).copied().unwrap_or(0),
            mean_runs: 3.0 * share(total, cells),
            mean_outliers: share(self.outliers, cells),
        }
    }
}

/// The fixed-n design beside the sequential one: `n` pairs of one base and one PR run, judged
/// once by the one-sided paired t-test of "no loss" at the cell's alpha (the PR's over
/// `cells`): the cell fails when `mean - t(1 - alpha, n - 1) · s / sqrt(n)` is above the
/// zone's low edge (`s` the pairs' own standard deviation). `n` is the smallest with power
/// `1 - beta` at the zone's high edge by the usual sample-size rule, `(t(1 - alpha, n - 1) +
/// t(1 - beta, n - 1)) · σ / sqrt(n) <= ln(1 + high) - ln(1 + low)`, with `σ = cv · sqrt(2)`
/// a pair's log-ratio standard deviation. Its runs are `2 n`.
pub fn fixed_sample_size(config: &GateConfig, cv: f64, cells: usize) -> usize {
    let speed = &config.speed;
    let sigma = cv * 2f64.sqrt();
    let zone = speed.high.ln_1p() - speed.low.ln_1p();
    let alpha = speed.alpha.get() / cells.max(1) as f64;
    (2..=1000)
        .find(|&n| {
            let se = sigma / (n as f64).sqrt();
            let df = (n - 1) as f64;
            let quantile = |p: f64| t_quantile(p, df).unwrap_or(f64::INFINITY);
            (quantile(1.0 - alpha) + quantile(1.0 - speed.beta.get())) * se <= zone
        })
        .unwrap_or(1000)
}

/// The fixed-n design's P(fail) for one cell with `true_change`, simulated.
pub fn simulate_fixed(
    config: &GateConfig,
    cv: f64,
    cells: usize,
    true_change: f64,
    trials: usize,
    seed: u64,
) -> f64 {
    let mut rng = SmallRng::seed_from_u64(seed);
    let n = fixed_sample_size(config, cv, cells);
    let low = config.speed.low.ln_1p();
    let alpha = config.speed.alpha.get() / cells.max(1) as f64;
    let t = t_quantile(1.0 - alpha, (n - 1) as f64).unwrap_or(f64::INFINITY);
    let scenario = SpeedScenario {
        cv,
        cells,
        regressed: 1,
        true_change,
        outlier_rate: 0.0,
        calibration_samples: None,
    };
    let mut fails = 0usize;
    for _ in 0..trials {
        let ratios: Vec<f64> = (0..n)
            .map(|_| {
                let base = run(&mut rng, &scenario, 0.0);
                let pr = run(&mut rng, &scenario, true_change);
                (pr / base).ln()
            })
            .collect();
        let (Some(average), Some(variance)) = (mean(&ratios), sample_variance(&ratios)) else {
            continue;
        };
        fails += usize::from(average - t * (variance / n as f64).sqrt() > low);
    }
    fails as f64 / trials.max(1) as f64
}

/// One line of the targets: what is measured, the target, and whether it is met.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub condition: String,
    pub measured: f64,
    /// `(bound, at_most)`: the measured value must be at most (or at least) the bound.
    pub bound: (f64, bool),
    /// How the value reads: a percentage or a count.
    pub percent: bool,
    /// The share of the scenario's cells (or benchmarks) left undecided; `None` where it
    /// does not apply.
    pub undecided: Option<f64>,
    /// The measured rate's 95% Wilson interval over the trials; `None` for a count.
    pub interval: Option<(f64, f64)>,
}

impl Target {
    pub fn met(&self) -> bool {
        let (bound, at_most) = self.bound;
        if at_most { self.measured <= bound } else { self.measured >= bound }
    }
}

/// The targets, remeasured: the same table `bench/speed-rule.md` shows.
pub fn targets(config: &GateConfig, trials: usize, seed: u64) -> Vec<Target> {
    let speed = |scenario: SpeedScenario, salt: u64| {
        simulate_speed(config, &scenario, trials, seed.wrapping_add(salt))
    };
    let base = SpeedScenario {
        cv: 0.02,
        cells: 1,
        regressed: 0,
        true_change: 0.0,
        outlier_rate: 0.0,
        calibration_samples: None,
    };
    let aa_one = speed(base, 1);
    let aa_four = speed(SpeedScenario { cells: 4, ..base }, 2);
    let aa_four_cv4 = speed(SpeedScenario { cells: 4, cv: 0.04, ..base }, 3);
    let loss = SpeedScenario { regressed: 1, true_change: 0.04, ..base };
    let power_one = speed(loss, 4);
    let power_calibrated = speed(SpeedScenario { calibration_samples: Some(8), ..loss }, 5);
    let power_four = speed(SpeedScenario { cells: 4, regressed: 4, ..loss }, 6);
    let power_outliers = speed(SpeedScenario { outlier_rate: 0.01, ..loss }, 7);
    let power_outliers_four =
        speed(SpeedScenario { cells: 4, regressed: 4, outlier_rate: 0.01, ..loss }, 8);
    let loss_cv4 = speed(SpeedScenario { cv: 0.04, ..loss }, 11);
    let loss_cv5 = speed(SpeedScenario { cv: 0.05, ..loss }, 12);
    let row = |condition: &str, measured: f64, bound: (f64, bool), undecided: f64| Target {
        condition: condition.to_owned(),
        measured,
        bound,
        percent: true,
        undecided: Some(undecided),
        interval: None,
    };
    let (at_most, at_least) = (|bound| (bound, true), |bound| (bound, false));
    let beta = config.speed.beta.get();
    let mut rows = vec![
        row(
            "A/A false-fail per cell, no `speed-noise` record (1 cell)",
            aa_one.p_pr_fail,
            at_most(0.02),
            aa_one.p_undecided,
        ),
        row(
            "A/A false-fail per PR (2 models × 2 covered concurrencies), no record",
            aa_four.p_pr_fail,
            at_most(0.02),
            aa_four.p_undecided,
        ),
        row("... the same at CV 4%", aa_four_cv4.p_pr_fail, at_most(0.02), aa_four_cv4.p_undecided),
        row(
            "power at +4%, one cell, no record",
            power_one.p_regressed_cell_fail,
            at_least(0.95),
            power_one.p_undecided,
        ),
        row(
            "power at +4%, one cell, calibrated from 8 differences",
            power_calibrated.p_regressed_cell_fail,
            at_least(0.95),
            power_calibrated.p_undecided,
        ),
        row(
            "power per regressed cell in a 4-cell PR (all 4 regressed)",
            power_four.p_regressed_cell_fail,
            at_least(0.95),
            power_four.p_undecided,
        ),
        row(
            "power at +4% when 1% of runs are 2× outliers (1 cell)",
            power_outliers.p_regressed_cell_fail,
            at_least(0.95),
            power_outliers.p_undecided,
        ),
        row(
            "... the same per cell in a 4-cell PR",
            power_outliers_four.p_regressed_cell_fail,
            at_least(0.95),
            power_outliers_four.p_undecided,
        ),
        row(
            "CV 4%, a +4% loss (1 cell): P(the cell passes); undecided is not a pass",
            loss_cv4.p_regressed_cell_pass,
            at_most(beta),
            loss_cv4.p_undecided,
        ),
        row(
            "CV 5%, a +4% loss (1 cell): P(the cell passes); undecided is not a pass",
            loss_cv5.p_regressed_cell_pass,
            at_most(beta),
            loss_cv5.p_undecided,
        ),
        Target {
            condition: "mean pairs per decided cell at A/A, CV 2%, 4-cell PR".to_owned(),
            measured: aa_four.mean_pairs,
            bound: (6.0, true),
            percent: false,
            undecided: Some(aa_four.p_undecided),
            interval: None,
        },
    ];
    rows.extend(accuracy::targets(config, trials, seed));
    rows
}

/// The targets as a Markdown table.
pub fn targets_markdown(targets: &[Target]) -> String {
    let mut out = String::from(
        "| condition | measured | 95% interval | target | met | undecided |\n|---|---|---|---|---|---|\n",
    );
    for target in targets {
        let value = |x: f64| {
            if target.percent { format!("{:.1}%", x * 100.0) } else { format!("{x:.2}") }
        };
        let (bound, at_most) = target.bound;
        out.push_str(&format!(
            "| {} | {} | {} | {} {} | {} | {} |\n",
            target.condition,
            value(target.measured),
            target.interval.map_or_else(
                || "-".to_owned(),
                |(low, high)| format!("{}–{}", value(low), value(high))
            ),
            if at_most { "≤" } else { "≥" },
            value(bound),
            if target.met() { "yes" } else { "**no**" },
            target.undecided.map_or_else(|| "-".to_owned(), |u| format!("{:.1}%", u * 100.0)),
        ));
    }
    out
}

/// The grid: for each CV and true change, one cell alone and a 4-cell PR (one regressed), with
/// the fixed-n design beside, as a Markdown table.
pub fn grid_markdown(config: &GateConfig, trials: usize, seed: u64) -> String {
    let mut out = String::from(
        "| CV | true change | cells | P(cell fails) | undecided | P(cell passes) | mean pairs | p90 pairs | mean runs | fixed n | fixed runs | fixed P(fail) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut salt = 100;
    for cv in [0.01, 0.02, 0.03, 0.04, 0.05] {
        for change in [0.0, 0.02, 0.04, 0.075] {
            for cells in [1, 4] {
                salt += 1;
                let scenario = SpeedScenario {
                    cv,
                    cells,
                    regressed: 1,
                    true_change: change,
                    outlier_rate: 0.0,
                    calibration_samples: None,
                };
                let one = simulate_speed_one(config, &scenario, trials, seed.wrapping_add(salt));
                let fixed = fixed_sample_size(config, cv, cells);
                let fixed_fail =
                    simulate_fixed(config, cv, cells, change, trials, seed.wrapping_add(salt));
                out.push_str(&format!(
                    "| {:.0}% | {:+.1}% | {} | {:.1}% | {:.1}% | {:.1}% | {:.2} | {} | {:.1} | {} | {} | {:.1}% |\n",
                    cv * 100.0,
                    change * 100.0,
                    cells,
                    one.p_regressed_cell_fail * 100.0,
                    one.p_undecided * 100.0,
                    one.p_regressed_cell_pass * 100.0,
                    one.mean_pairs,
                    one.p90_pairs,
                    one.mean_runs,
                    fixed,
                    2 * fixed,
                    fixed_fail * 100.0,
                ));
            }
        }
    }
    out
}

/// One regressed cell judged in a family of `cells` (the others not simulated: they do not
/// change its test).
fn simulate_speed_one(
    config: &GateConfig,
    scenario: &SpeedScenario,
    trials: usize,
    seed: u64,
) -> SpeedOutcomes {
    // A family's size enters a cell's test only through alpha; simulating the one cell with
    // the family's alpha gives its numbers without the other cells' cost.
    let mut one = *scenario;
    one.regressed = 1;
    let mut rng_seed = seed;
    let mut tally = Tally::default();
    for _ in 0..trials {
        rng_seed = rng_seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let single = simulate_cell(config, &one, &mut SmallRng::seed_from_u64(rng_seed));
        tally.cell(true, single.0, single.1, single.2);
        tally.prs += 1;
        tally.pr_fails += usize::from(single.0 == Answer::Yes);
    }
    tally.outcomes()
}

fn simulate_cell(
    config: &GateConfig,
    scenario: &SpeedScenario,
    rng: &mut SmallRng,
) -> (Answer, usize, usize) {
    let context = CellContext { cells: scenario.cells, gain_required: false, calibration: None };
    let mut pairs = Vec::new();
    loop {
        let before = run(rng, scenario, 0.0);
        let pr = run(rng, scenario, scenario.true_change);
        let after = run(rng, scenario, 0.0);
        pairs.push(Pair::bracketed(before, pr, after));
        let judgement = judge_cell(&pairs, config, &context);
        if judgement.loss != Answer::Open || pairs.len() >= PAIR_LIMIT {
            return (judgement.loss, pairs.len(), judgement.outliers.len());
        }
    }
}

#[cfg(test)]
mod tests;
