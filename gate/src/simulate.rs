//! How well the speed and accuracy rules decide, by simulation of what a node sees: the gate's
//! own functions ([`judge_cell`], [`crate::accuracy::judge_benchmark`]) asked pair by pair (and
//! repeat by repeat), as the runner asks.
//!
//! Speed: each run's median TPOT is the true value times `exp(cv * z)`, `z` standard normal,
//! independently for every run; a share of runs are outliers, twice as slow (the node's: any
//! run, base or PR). A scenario may make the PR side differ on its own: a share of the PR's runs
//! twice as slow, or its noise a multiple of base's. A pair is
//! bracketed as the runner runs it (base, PR, base: three runs, its own), and a PR judges
//! `cells` cells together, `regressed` of them with the true change. A node calibration, when
//! there is one, is the runner's robust estimate (median/MAD) from that many base-vs-base
//! differences of the same noise, or of another (a stale record). Accuracy: [`accuracy`],
//! repeats until the rule decides.
//! Pure and seeded: the same inputs give the same numbers.

use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};

use crate::config::GateConfig;
use crate::speed::{Answer, Calibration, CellContext, CellJudgement, Pair, judge_cell};
use crate::stats::{mean, robust_log_ratio_variance, sample_variance, t_quantile, wilson};

pub mod accuracy;

/// The most pairs a simulated cell may take before the simulation calls the rule broken.
pub(crate) const PAIR_LIMIT: usize = 200;

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
    /// The noise the stored calibration was recorded at, when not `cv` (a stale record).
    pub calibration_cv: Option<f64>,
    /// The share of the PR's own runs that are twice as slow (base's are not).
    pub pr_outlier_rate: f64,
    /// The PR's run-to-run noise as a multiple of `cv`.
    pub pr_noise_factor: f64,
}

impl SpeedScenario {
    /// One cell alone at noise `cv`, no change, no outliers, no calibration.
    pub fn at_cv(cv: f64) -> SpeedScenario {
        SpeedScenario {
            cv,
            cells: 1,
            regressed: 0,
            true_change: 0.0,
            outlier_rate: 0.0,
            calibration_samples: None,
            calibration_cv: None,
            pr_outlier_rate: 0.0,
            pr_noise_factor: 1.0,
        }
    }
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
    /// The standard deviation of the pairs a cell took.
    pub pairs_sd: f64,
    /// The cells without a change and the regressed cells simulated.
    pub null_cells: usize,
    pub regressed_cells: usize,
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
                let recorded = SpeedScenario {
                    cv: scenario.calibration_cv.unwrap_or(scenario.cv),
                    ..*scenario
                };
                let differences: Vec<f64> = (0..samples)
                    .map(|_| {
                        let a = run(&mut rng, &recorded, 0.0);
                        let b = run(&mut rng, &recorded, 0.0);
                        (b / a).ln()
                    })
                    .collect();
                Calibration {
                    log_ratio_variance: robust_log_ratio_variance(&differences).unwrap_or(0.0),
                    samples,
                }
            });
            let context = CellContext { cells: scenario.cells, gain_required: false, calibration };
            let judgement = simulate_cell(config, scenario, change, &context, &mut rng);
            let cell_failed = judgement.loss == Answer::Yes;
            failed |= cell_failed;
            tally.cell(regressed, judgement.loss, judgement.pairs, judgement.outliers.len());
        }
        tally.prs += 1;
        tally.pr_fails += usize::from(failed);
    }
    tally.outcomes()
}

/// A base run (and any run of a scenario whose PR side does not differ).
pub(crate) fn run(rng: &mut SmallRng, scenario: &SpeedScenario, change: f64) -> f64 {
    let outlier = if rng.random::<f64>() < scenario.outlier_rate { 2.0 } else { 1.0 };
    20.0 * (1.0 + change) * (scenario.cv * normal(rng)).exp() * outlier
}

/// A PR run: the node's outliers and noise, times the PR's own.
pub(crate) fn pr_run(rng: &mut SmallRng, scenario: &SpeedScenario, change: f64) -> f64 {
    let noisier = SpeedScenario { cv: scenario.cv * scenario.pr_noise_factor, ..*scenario };
    let own = if rng.random::<f64>() < scenario.pr_outlier_rate { 2.0 } else { 1.0 };
    run(rng, &noisier, change) * own
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
        let mean_pairs = share(total, cells);
        let pairs_sd = (self.pairs.iter().map(|&p| (p as f64 - mean_pairs).powi(2)).sum::<f64>()
            / cells.saturating_sub(1).max(1) as f64)
            .sqrt();
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
            pairs_sd,
            null_cells: self.null_cells,
            regressed_cells: self.regressed_cells,
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
    let scenario = SpeedScenario { cells, regressed: 1, true_change, ..SpeedScenario::at_cv(cv) };
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
    /// The 95% interval of the measured value: Wilson's score interval of a rate over its
    /// trials, or the normal interval of a mean; `None` where there is none.
    pub interval: Option<(f64, f64)>,
}

impl Target {
    pub fn met(&self) -> bool {
        let (bound, at_most) = self.bound;
        if at_most { self.measured <= bound } else { self.measured >= bound }
    }

    /// A rate measured as `measured` over `trials` (PRs, cells or benchmarks), with its
    /// Wilson interval.
    pub fn rate(
        condition: &str,
        measured: f64,
        trials: usize,
        bound: (f64, bool),
        undecided: Option<f64>,
    ) -> Target {
        let successes = (measured * trials as f64).round() as u64;
        Target {
            condition: condition.to_owned(),
            measured,
            bound,
            percent: true,
            undecided,
            interval: wilson(successes, trials as u64, 0.05),
        }
    }
}

/// The targets, remeasured: the same table `bench/speed-rule.md` shows. The speed rows
/// ([`speed_targets`]), then the accuracy rows ([`accuracy::targets`]).
pub fn targets(config: &GateConfig, trials: usize, seed: u64) -> Vec<Target> {
    let mut targets = speed_targets(config, trials, seed);
    targets.extend(accuracy::targets(config, trials, seed));
    targets
}

/// The speed rows of the targets (issues 13 and 23): error rates without and with the
/// node's outliers, the PR's own slow runs and noise, noisy nodes, a stale calibration, and the
/// pairs an A/A cell takes.
pub fn speed_targets(config: &GateConfig, trials: usize, seed: u64) -> Vec<Target> {
    let runs = SpeedRuns::simulate(config, trials, seed);
    let mut rows = runs.node_rows();
    rows.extend(runs.pr_and_pairs_rows(config.speed.beta.get()));
    rows
}

/// The outcomes of every speed scenario the targets measure.
struct SpeedRuns {
    aa_one: SpeedOutcomes,
    aa_four: SpeedOutcomes,
    aa_four_cv4: SpeedOutcomes,
    aa_four_outliers: SpeedOutcomes,
    power_one: SpeedOutcomes,
    power_calibrated: SpeedOutcomes,
    power_four: SpeedOutcomes,
    power_outliers: SpeedOutcomes,
    power_outliers_four: SpeedOutcomes,
    loss_cv4: SpeedOutcomes,
    loss_cv5: SpeedOutcomes,
    pr_slow: SpeedOutcomes,
    pr_noise_2: SpeedOutcomes,
    pr_noise_3: SpeedOutcomes,
    stale_aa: SpeedOutcomes,
    stale_power: SpeedOutcomes,
}

impl SpeedRuns {
    /// Each scenario simulated with its own seed (`seed` plus the scenario's salt).
    fn simulate(config: &GateConfig, trials: usize, seed: u64) -> SpeedRuns {
        let speed = |scenario: SpeedScenario, salt: u64| {
            simulate_speed(config, &scenario, trials, seed.wrapping_add(salt))
        };
        let base = SpeedScenario::at_cv(0.02);
        let four = SpeedScenario { cells: 4, ..base };
        let loss = SpeedScenario { regressed: 1, true_change: 0.04, ..base };
        let stale = SpeedScenario {
            cv: 0.03,
            calibration_samples: Some(64),
            calibration_cv: Some(0.01),
            ..four
        };
        SpeedRuns {
            aa_one: speed(base, 1),
            aa_four: speed(four, 2),
            aa_four_cv4: speed(SpeedScenario { cv: 0.04, ..four }, 3),
            aa_four_outliers: speed(SpeedScenario { outlier_rate: 0.01, ..four }, 13),
            power_one: speed(loss, 4),
            power_calibrated: speed(SpeedScenario { calibration_samples: Some(8), ..loss }, 5),
            power_four: speed(SpeedScenario { cells: 4, regressed: 4, ..loss }, 6),
            power_outliers: speed(SpeedScenario { outlier_rate: 0.01, ..loss }, 7),
            power_outliers_four: speed(
                SpeedScenario { cells: 4, regressed: 4, outlier_rate: 0.01, ..loss },
                8,
            ),
            loss_cv4: speed(SpeedScenario { cv: 0.04, ..loss }, 11),
            loss_cv5: speed(SpeedScenario { cv: 0.05, ..loss }, 12),
            pr_slow: speed(SpeedScenario { regressed: 1, pr_outlier_rate: 0.2, ..base }, 14),
            pr_noise_2: speed(SpeedScenario { pr_noise_factor: 2.0, ..four }, 15),
            pr_noise_3: speed(SpeedScenario { pr_noise_factor: 3.0, ..four }, 16),
            stale_aa: speed(stale, 17),
            stale_power: speed(SpeedScenario { regressed: 4, true_change: 0.04, ..stale }, 18),
        }
    }

    /// The error rates and power on a node with and without outliers.
    fn node_rows(&self) -> Vec<Target> {
        vec![
            per_pr(
                "A/A false-fail per cell, no `speed-noise` record (1 cell)",
                &self.aa_one,
                at_most(0.02),
            ),
            per_pr(
                "A/A false-fail per PR (2 models × 2 covered concurrencies), no record",
                &self.aa_four,
                at_most(0.02),
            ),
            per_pr("... the same at CV 4%", &self.aa_four_cv4, at_most(0.02)),
            per_pr(
                "... at CV 2% with 1% of runs (either side) 2× slow",
                &self.aa_four_outliers,
                at_most(0.02),
            ),
            power("power at +4%, one cell, no record", &self.power_one),
            power("power at +4%, one cell, calibrated from 8 differences", &self.power_calibrated),
            power("power per regressed cell in a 4-cell PR (all 4 regressed)", &self.power_four),
            power("power at +4% when 1% of runs are 2× outliers (1 cell)", &self.power_outliers),
            power("... the same per cell in a 4-cell PR", &self.power_outliers_four),
        ]
    }

    /// The PR's own slow runs and noise, a stale calibration, noisy nodes, and the pairs an
    /// A/A cell takes; `beta` bounds P(a lost cell passes).
    fn pr_and_pairs_rows(&self, beta: f64) -> Vec<Target> {
        let pr_slow = &self.pr_slow;
        vec![
            Target::rate(
                "the PR makes 20% of its own runs 2× slow, base clean: P(the cell fails)",
                pr_slow.p_regressed_cell_fail,
                pr_slow.regressed_cells,
                at_least(0.95),
                Some(pr_slow.p_undecided),
            ),
            Target::rate(
                "... P(the cell passes)",
                pr_slow.p_regressed_cell_pass,
                pr_slow.regressed_cells,
                at_most(beta),
                Some(pr_slow.p_undecided),
            ),
            per_pr(
                "the PR doubles its runs' noise, no change: false-fail per 4-cell PR",
                &self.pr_noise_2,
                at_most(0.02),
            ),
            per_pr("... triples it", &self.pr_noise_3, at_most(0.02)),
            per_pr(
                "stale record (CV 1% from 64 differences, true 3%): A/A false-fail per 4-cell PR",
                &self.stale_aa,
                at_most(0.02),
            ),
            power("... power at +4% per cell (all 4 regressed)", &self.stale_power),
            passes(
                "CV 4%, a +4% loss (1 cell): P(the cell passes); undecided is not a pass",
                &self.loss_cv4,
                beta,
            ),
            passes(
                "CV 5%, a +4% loss (1 cell): P(the cell passes); undecided is not a pass",
                &self.loss_cv5,
                beta,
            ),
            pairs(
                "mean pairs per A/A cell, CV 2%, 1% of runs 2× slow, 4-cell PR",
                &self.aa_four_outliers,
            ),
            pairs("... without outliers", &self.aa_four),
        ]
    }
}

fn at_most(bound: f64) -> (f64, bool) {
    (bound, true)
}

fn at_least(bound: f64) -> (f64, bool) {
    (bound, false)
}

/// A row of P(the PR fails).
fn per_pr(condition: &str, outcomes: &SpeedOutcomes, bound: (f64, bool)) -> Target {
    Target::rate(condition, outcomes.p_pr_fail, outcomes.trials, bound, Some(outcomes.p_undecided))
}

/// A row of P(a regressed cell fails): at least 95%.
fn power(condition: &str, outcomes: &SpeedOutcomes) -> Target {
    Target::rate(
        condition,
        outcomes.p_regressed_cell_fail,
        outcomes.regressed_cells,
        at_least(0.95),
        Some(outcomes.p_undecided),
    )
}

/// A row of P(a regressed cell passes): at most `beta`.
fn passes(condition: &str, outcomes: &SpeedOutcomes, beta: f64) -> Target {
    Target::rate(
        condition,
        outcomes.p_regressed_cell_pass,
        outcomes.regressed_cells,
        at_most(beta),
        Some(outcomes.p_undecided),
    )
}

/// A row of the mean pairs a cell takes, with its normal 95% interval: at most 5.
fn pairs(condition: &str, outcomes: &SpeedOutcomes) -> Target {
    let cells = (outcomes.null_cells + outcomes.regressed_cells).max(1) as f64;
    let half = 1.96 * outcomes.pairs_sd / cells.sqrt();
    Target {
        condition: condition.to_owned(),
        measured: outcomes.mean_pairs,
        bound: at_most(5.0),
        percent: false,
        undecided: Some(outcomes.p_undecided),
        interval: Some((outcomes.mean_pairs - half, outcomes.mean_pairs + half)),
    }
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
                    cells,
                    regressed: 1,
                    true_change: change,
                    ..SpeedScenario::at_cv(cv)
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
        let context = CellContext { cells: one.cells, gain_required: false, calibration: None };
        let mut rng = SmallRng::seed_from_u64(rng_seed);
        let single = simulate_cell(config, &one, one.true_change, &context, &mut rng);
        tally.cell(true, single.loss, single.pairs, single.outliers.len());
        tally.prs += 1;
        tally.pr_fails += usize::from(single.loss == Answer::Yes);
    }
    tally.outcomes()
}

/// One simulated speed cell, as the runner measures it: bracketed pairs (a base run, a PR run
/// with the true `change`, a base run) drawn from `rng` and judged by [`judge_cell`] in
/// `context`, pair after pair, until the loss answer is no longer [`Answer::Open`] or the cell
/// has [`PAIR_LIMIT`] pairs. Its last judgement (`pairs` counts the pairs it took).
pub(crate) fn simulate_cell(
    config: &GateConfig,
    scenario: &SpeedScenario,
    change: f64,
    context: &CellContext,
    rng: &mut SmallRng,
) -> CellJudgement {
    let mut pairs = Vec::new();
    loop {
        let before = run(rng, scenario, 0.0);
        let pr = pr_run(rng, scenario, change);
        let after = run(rng, scenario, 0.0);
        pairs.push(Pair::bracketed(before, pr, after));
        let judgement = judge_cell(&pairs, config, context);
        if judgement.loss != Answer::Open || pairs.len() >= PAIR_LIMIT {
            return judgement;
        }
    }
}

#[cfg(test)]
mod tests;
