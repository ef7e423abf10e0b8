//! E2E speed: is a PR's median TPOT at one concurrency (a "cell") worse than base by more than
//! the allowed loss, and — for `[Perf]` and `[Feat]` PRs — better by the required gain?
//!
//! Base and PR runs are paired (run side by side on one node); each pair gives the log-ratio
//! `ln(pr / base)`, which is the same in milliseconds or seconds. A bracketed pair has two base
//! runs, one before and one after its PR run: its base is their geometric mean (a linear drift
//! cancels) and their ratio is an in-band A/A difference, uncorrelated with the pair's
//! log-ratio, that measures the node's noise inside the run. The runner chains a cell's pairs
//! (a pair's closing base run opens the next); [`Chain`] accounts for the shared runs.
//!
//! Each question is a group-sequential t-test ([`GroupSequential`]) with an indifference zone
//! around its threshold, on a variance that pools the pairs' residuals, the in-band A/A
//! differences and the node's stored calibration (when there is one, with its degrees of
//! freedom capped): valid with the variance unknown. Outlier pairs are excluded (and so
//! re-measured) by a robust rule. The runner asks [`needs_another_pair`] between pairs. A cell
//! that reaches `max-pairs` without passing a bound is [`Answer::Undecided`], never a pass, and
//! [`ToDecide`] says what more pairs would decide it; which verdict state that is, is the
//! verdict's business (`docs/gate.md`, "Fail closed").

pub mod blocks;

use crate::config::{GateConfig, SequentialConfig};
use crate::stats::{Estimate, GroupSequential, SequentialOutcome, median, outliers, t_quantile};

/// The shown interval of a cell's change is a two-sided 95% one, whatever the test's error
/// rates: it tells the reader how precise the change is; the decision is the sequential test's.
pub const INTERVAL_ALPHA: f64 = 0.05;

/// The efficiency of the median absolute deviation against the standard deviation for normal
/// samples (about 37%): a calibration from `n` differences counts as `0.37 n` degrees of freedom.
pub const MAD_EFFICIENCY: f64 = 0.37;

/// The differences a `speed-noise` record without a count is taken to have (the old runner's
/// minimum).
pub const LEGACY_CALIBRATION_SAMPLES: u32 = 8;

/// One PR run and its base, side by side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    /// The pair's base: the base run, or the geometric mean of the two of a bracketed pair.
    pub base_tpot_ms: f64,
    pub pr_tpot_ms: f64,
    /// A bracketed pair's two base runs, before and after its PR run.
    pub base_runs_ms: Option<(f64, f64)>,
}

impl Pair {
    /// A pair of one base run and one PR run.
    pub fn single(base_tpot_ms: f64, pr_tpot_ms: f64) -> Pair {
        Pair { base_tpot_ms, pr_tpot_ms, base_runs_ms: None }
    }

    /// A PR run between two base runs.
    pub fn bracketed(before_ms: f64, pr_tpot_ms: f64, after_ms: f64) -> Pair {
        Pair {
            base_tpot_ms: (before_ms * after_ms).sqrt(),
            pr_tpot_ms,
            base_runs_ms: Some((before_ms, after_ms)),
        }
    }

    fn log_ratio(&self) -> f64 {
        (self.pr_tpot_ms / self.base_tpot_ms).ln()
    }

    /// The log-ratio's variance in units of one run's log variance: 2 for one base run, 1.5
    /// for two.
    fn variance_factor(&self) -> f64 {
        if self.base_runs_ms.is_some() { 1.5 } else { 2.0 }
    }

    /// Whether `next` opens with this pair's closing base run (the same measurement: the
    /// runner chains a cell's pairs, `docs/gate.md`).
    fn chained_to(&self, next: &Pair) -> bool {
        match (self.base_runs_ms, next.base_runs_ms) {
            (Some((_, after)), Some((before, _))) => after.to_bits() == before.to_bits(),
            _ => false,
        }
    }

    /// The in-band A/A difference `ln(after / before)`, of variance twice one run's.
    fn aa_difference(&self) -> Option<f64> {
        self.base_runs_ms.map(|(before, after)| (after / before).ln())
    }
}

/// A node's stored base-vs-base calibration of a cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// The variance of the log-ratio of two base runs (twice one run's log variance).
    pub log_ratio_variance: f64,
    /// The differences behind it.
    pub samples: u32,
}

/// What a cell is judged with besides its pairs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CellContext {
    /// How many cells are judged together: alpha is divided over them (Bonferroni).
    pub cells: usize,
    /// Whether the PR must show a gain (its title type is `[Perf]` or `[Feat]`).
    pub gain_required: bool,
    /// The node's stored calibration of this cell, when it has one.
    pub calibration: Option<Calibration>,
}

/// The answer to one question about a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Not decided yet: another pair is needed.
    Open,
    /// Yes (a loss over the limit; a gain of the size required), on the test's bound.
    Yes,
    /// No, on the test's bound.
    No,
    /// Still undecided at the pair cap (`max-pairs` kept pairs): neither bound was reached, so
    /// neither answer holds at the test's error rates.
    Undecided,
}

/// What would decide a cell the cap left [`Answer::Undecided`]: the test's bounds where the
/// last look left them, and the pairs that would bring one of them past its line if the mean
/// and the noise stayed as measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToDecide {
    /// The loss test's bounds at the last look, as changes (+0.03 is 3% slower): a fail needs
    /// `lower` above the zone's low edge, a pass needs `upper` below its high edge.
    pub lower: f64,
    pub upper: f64,
    /// The zone's edges, as changes.
    pub low: f64,
    pub high: f64,
    /// The kept pairs in all (chained, bracketed) at which one bound would pass, with
    /// `max-pairs` raised to it; `None` beyond [`TO_DECIDE_LIMIT`].
    pub pairs: Option<usize>,
    /// The pairs the cell has (kept ones).
    pub kept: usize,
}

impl ToDecide {
    /// The pairs to add to the cell's kept ones.
    pub fn more_pairs(&self) -> Option<usize> {
        self.pairs.map(|pairs| pairs.saturating_sub(self.kept))
    }

    /// What they cost in runs: a chained pair adds two (a PR run and the base run that closes
    /// it).
    pub fn more_runs(&self) -> Option<usize> {
        self.more_pairs().map(|pairs| 2 * pairs)
    }
}

/// The most pairs [`ToDecide`] looks for: a cell that needs more is told "more than" this.
pub const TO_DECIDE_LIMIT: usize = 10_000;

/// The noise a cell's test used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseUsed {
    /// The run-to-run coefficient of variation (the standard deviation of one run's log TPOT).
    pub run_cv: f64,
    /// The degrees of freedom behind it: the pairs' residuals, the in-band A/A differences
    /// and the stored calibration's.
    pub degrees_of_freedom: f64,
    pub in_band_differences: usize,
    pub calibration_df: f64,
    /// Whether `min-cv` was larger than the estimate and was used instead.
    pub floored: bool,
}

/// Everything the gate says about one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct CellJudgement {
    /// All pairs, outliers included.
    pub pairs: usize,
    /// The indices (in run order) of the pairs excluded as outliers.
    pub outliers: Vec<usize>,
    pub base_median_ms: Option<f64>,
    pub pr_median_ms: Option<f64>,
    /// The PR's TPOT relative to base, `exp(mean log-ratio) - 1` over the kept pairs: +0.03 is
    /// 3% slower.
    pub change: Option<f64>,
    /// Its two-sided 95% interval ([`INTERVAL_ALPHA`]) on the test's variance.
    pub change_interval: Option<(f64, f64)>,
    pub noise: Option<NoiseUsed>,
    /// The loss test's bound on P(fail | no loss) for this cell: the PR's alpha over the cells.
    pub alpha: f64,
    /// The loss test's bound on P(pass | a loss of max-loss + zone).
    pub beta: f64,
    /// Is the loss over the limit?
    pub loss: Answer,
    /// Is the gain at least the required one? `None` when no gain is required.
    pub gain: Option<Answer>,
    /// What would decide the loss, when the cap left it [`Answer::Undecided`].
    pub to_decide: Option<ToDecide>,
}

/// Judges one cell from its pairs so far.
pub fn judge_cell(pairs: &[Pair], config: &GateConfig, context: &CellContext) -> CellJudgement {
    let speed = &config.speed;
    let cells = context.cells.max(1) as f64;
    let excluded = screen(pairs, speed, context.calibration);
    let kept: Vec<Pair> = pairs
        .iter()
        .enumerate()
        .filter(|(at, _)| !excluded.contains(at))
        .map(|(_, pair)| *pair)
        .collect();
    let pooled = pool(&kept, speed, context.calibration);
    let estimate = pooled.map(|(estimate, _)| estimate);
    let n = kept.len();
    let loss_test = sprt(speed, cells, Direction::Loss);
    let loss = answer(&loss_test, estimate, n, speed);
    let gain = context.gain_required.then(|| {
        let gains = estimate.map(|e| Estimate { mean: -e.mean, ..e });
        answer(&sprt(&config.gain.test, cells, Direction::Gain), gains, n, &config.gain.test)
    });
    let base: Vec<f64> = kept.iter().map(|pair| pair.base_tpot_ms).collect();
    let pr: Vec<f64> = kept.iter().map(|pair| pair.pr_tpot_ms).collect();
    let change_interval = estimate.and_then(|e| {
        let t = t_quantile(1.0 - INTERVAL_ALPHA / 2.0, e.degrees_of_freedom)?;
        let half = t * e.standard_error;
        Some(((e.mean - half).exp() - 1.0, (e.mean + half).exp() - 1.0))
    });
    CellJudgement {
        pairs: pairs.len(),
        outliers: excluded,
        base_median_ms: median(&base),
        pr_median_ms: median(&pr),
        change: estimate.map(|e| e.mean.exp() - 1.0),
        change_interval,
        noise: pooled.map(|(_, noise)| noise),
        alpha: speed.alpha.get() / cells,
        beta: speed.beta.get(),
        loss,
        gain,
        to_decide: match (loss, pooled) {
            (Answer::Undecided, Some((estimate, noise))) => {
                Some(to_decide(&loss_test, speed, estimate, noise, n))
            }
            _ => None,
        },
    }
}

/// The runner's question between pairs: does this cell need another pair? Every cell still
/// open gets one until the cap: a cell the cap leaves undecided is not a pass, so the runner
/// spends the pairs the settings allow before it comes to that.
pub fn needs_another_pair(pairs: &[Pair], config: &GateConfig, context: &CellContext) -> bool {
    let judgement = judge_cell(pairs, config, context);
    judgement.loss == Answer::Open || judgement.gain == Some(Answer::Open)
}

/// The pairs excluded as outliers: a pair's log-ratio far from the cell's median, or its two
/// base runs far from each other, in robust scales of one run.
fn screen(
    pairs: &[Pair],
    speed: &SequentialConfig,
    calibration: Option<Calibration>,
) -> Vec<usize> {
    let ratios: Vec<f64> = pairs.iter().map(Pair::log_ratio).collect();
    let Some(centre) = median(&ratios) else { return Vec::new() };
    let mut deviations = Vec::new();
    let mut owner = Vec::new();
    for (at, pair) in pairs.iter().enumerate() {
        deviations.push((ratios[at] - centre) / pair.variance_factor().sqrt());
        owner.push(at);
        if let Some(difference) = pair.aa_difference() {
            deviations.push(difference / 2f64.sqrt());
            owner.push(at);
        }
    }
    let calibrated = calibration.map_or(0.0, |c| (c.log_ratio_variance / 2.0).sqrt());
    let floor = speed.min_cv.get().max(calibrated);
    let mut excluded: Vec<usize> =
        outliers(&deviations, floor, speed.outlier_threshold, usize::MAX)
            .into_iter()
            .map(|at| owner[at])
            .collect();
    excluded.dedup();
    if excluded.len() > speed.max_outliers { Vec::new() } else { excluded }
}

/// The mean log-ratio with its standard error on the pooled variance, and the noise used.
fn pool(
    pairs: &[Pair],
    speed: &SequentialConfig,
    calibration: Option<Calibration>,
) -> Option<(Estimate, NoiseUsed)> {
    if pairs.is_empty() {
        return None;
    }
    let weights: Vec<f64> = pairs.iter().map(|pair| 1.0 / pair.variance_factor()).collect();
    let total_weight: f64 = weights.iter().sum();
    let ratios: Vec<f64> = pairs.iter().map(Pair::log_ratio).collect();
    let mean = ratios.iter().zip(&weights).map(|(r, w)| r * w).sum::<f64>() / total_weight;
    let residual: f64 = ratios.iter().zip(&weights).map(|(r, w)| w * (r - mean).powi(2)).sum();
    let chain = Chain::of(pairs, &weights);
    let differences: Vec<f64> = pairs.iter().filter_map(Pair::aa_difference).collect();
    let in_band: f64 = differences.iter().map(|d| d * d / 2.0).sum();
    let (calibration_df, calibrated) = calibration.map_or((0.0, 0.0), |c| {
        let df = (MAD_EFFICIENCY * f64::from(c.samples)).min(speed.calibration_df);
        (df, df * c.log_ratio_variance / 2.0)
    });
    // The divisor makes the pooled variance unbiased (each part's expectation in units of
    // one run's log variance); the degrees of freedom discount the chained differences.
    let divisor = chain.residual_expectation + differences.len() as f64 + calibration_df;
    let degrees_of_freedom = chain.residual_expectation + chain.difference_df + calibration_df;
    if degrees_of_freedom < 1.0 || divisor <= 0.0 {
        return None;
    }
    let estimated = (residual + in_band + calibrated) / divisor;
    let floor = speed.min_cv.get().powi(2);
    let variance = estimated.max(floor);
    let standard_error = (variance * chain.mean_variance).sqrt();
    standard_error.is_finite().then_some((
        Estimate { mean, standard_error, degrees_of_freedom },
        NoiseUsed {
            run_cv: variance.sqrt(),
            degrees_of_freedom,
            in_band_differences: differences.len(),
            calibration_df,
            floored: estimated < floor,
        },
    ))
}

/// What chaining does to a cell's statistics: pairs `k` and `k + 1` that share a base run
/// have log-ratios of covariance `σ²/4` (each holds half the shared run's log) and A/A
/// differences of covariance `-σ²`. All in units of one run's log variance `σ²`.
struct Chain {
    /// The weighted mean's variance: `(Σ w²f + 2 Σ_linked w_k w_{k+1} / 4) / W²` (`1/W`
    /// without links).
    mean_variance: f64,
    /// The expectation of the weighted residual sum of squares: `n - W · mean_variance`
    /// (`n - 1` without links).
    residual_expectation: f64,
    /// The A/A differences' degrees of freedom: one each, but a run of `D` chained
    /// differences (successive differences of `D + 1` base runs) counts as Satterthwaite's
    /// `2D² / (3D - 1)` (1 for `D = 1`; 3.6 for 5).
    difference_df: f64,
}

impl Chain {
    fn of(pairs: &[Pair], weights: &[f64]) -> Chain {
        let total: f64 = weights.iter().sum();
        let own: f64 = pairs.iter().zip(weights).map(|(p, w)| w * w * p.variance_factor()).sum();
        let mut linked = 0.0;
        let mut difference_df = 0.0;
        let mut run = 0.0_f64;
        for (at, pair) in pairs.iter().enumerate() {
            let link = at > 0 && pairs[at - 1].chained_to(pair);
            if link {
                linked += weights[at - 1] * weights[at] / 4.0;
            }
            if pair.aa_difference().is_some() {
                if !link && run > 0.0 {
                    difference_df += satterthwaite(run);
                    run = 0.0;
                }
                run += 1.0;
            }
        }
        if run > 0.0 {
            difference_df += satterthwaite(run);
        }
        let mean_variance = (own + 2.0 * linked) / (total * total);
        Chain {
            mean_variance,
            residual_expectation: pairs.len() as f64 - total * mean_variance,
            difference_df,
        }
    }
}

/// The degrees of freedom of the mean square of `d` successive differences of `d + 1`
/// independent runs: `2d² / (3d - 1)`.
fn satterthwaite(d: f64) -> f64 {
    2.0 * d * d / (3.0 * d - 1.0)
}

/// Which way a fraction is measured on the log-ratio.
#[derive(Clone, Copy)]
enum Direction {
    /// A loss of `x`: PR TPOT is `1 + x` times base's, so `ln(pr / base) = ln(1 + x)`.
    Loss,
    /// A gain of `x`: PR TPOT is `1 - x` times base's, so `ln(base / pr) = -ln(1 - x)`.
    Gain,
}

fn sprt(config: &SequentialConfig, cells: f64, direction: Direction) -> GroupSequential {
    let log = |fraction: f64| match direction {
        Direction::Loss => fraction.ln_1p(),
        Direction::Gain => -(-fraction).ln_1p(),
    };
    GroupSequential {
        h0: log(config.low),
        h1: log(config.high),
        alpha: config.alpha.get() / cells,
        beta: config.beta.get(),
        looks: config.looks(),
        line: log(config.threshold.get()),
    }
}

fn answer(
    test: &GroupSequential,
    estimate: Option<Estimate>,
    pairs: usize,
    config: &SequentialConfig,
) -> Answer {
    if pairs < config.min_pairs {
        return Answer::Open;
    }
    match test.look(estimate, pairs >= config.max_pairs).0 {
        SequentialOutcome::Continue => Answer::Open,
        SequentialOutcome::Undecided => Answer::Undecided,
        SequentialOutcome::AcceptH1 => Answer::Yes,
        SequentialOutcome::AcceptH0 => Answer::No,
    }
}

/// What would decide an undecided loss: the last look's bounds, and the kept pairs at which
/// the fail bound (`mean - t(1 - alpha / L) se > h0`) or the pass bound (`mean + t(1 - beta /
/// L) se < h1`) would pass if the mean and the run CV stayed as measured. `n` chained
/// bracketed pairs have `se = cv · sqrt(2n - 1/2) / n` (see [`Chain`]) and, counting each added
/// pair's residual and its chained A/A difference (Satterthwaite's `2/3` each), about `5/3`
/// more degrees of freedom a pair; the looks are those of `max-pairs` raised to `n`.
fn to_decide(
    test: &GroupSequential,
    config: &SequentialConfig,
    estimate: Estimate,
    noise: NoiseUsed,
    kept: usize,
) -> ToDecide {
    let change = |log: f64| log.exp() - 1.0;
    let (lower, upper) = test
        .look(Some(estimate), true)
        .1
        .map_or((f64::NEG_INFINITY, f64::INFINITY), |b| (b.lower, b.upper));
    let decides = |n: usize| {
        let looks = n.saturating_sub(config.min_pairs) as f64 + 1.0;
        let df = noise.degrees_of_freedom + 5.0 / 3.0 * n.saturating_sub(kept) as f64;
        let se = noise.run_cv * (2.0 * n as f64 - 0.5).sqrt() / n as f64;
        let fail = t_quantile(1.0 - test.alpha / looks, df).map(|t| estimate.mean - t * se);
        let pass = t_quantile(1.0 - test.beta / looks, df).map(|t| estimate.mean + t * se);
        fail.is_some_and(|bound| bound > test.h0) || pass.is_some_and(|bound| bound < test.h1)
    };
    ToDecide {
        lower: change(lower),
        upper: change(upper),
        low: change(test.h0),
        high: change(test.h1),
        pairs: first_deciding(kept + 1, decides),
        kept,
    }
}

/// The first `n` from `from` to [`TO_DECIDE_LIMIT`] for which `decides` holds, by doubling
/// then bisection (the bounds tighten as `n` grows: the standard error and the t quantile
/// shrink faster than the looks' share of the error rates).
fn first_deciding(from: usize, decides: impl Fn(usize) -> bool) -> Option<usize> {
    let (mut below, mut step) = (from.saturating_sub(1), 1usize);
    let mut above = loop {
        let n = (below + step).min(TO_DECIDE_LIMIT);
        if decides(n) {
            break n;
        }
        if n == TO_DECIDE_LIMIT {
            return None;
        }
        below = n;
        step *= 2;
    };
    while above - below > 1 {
        let middle = below + (above - below) / 2;
        if decides(middle) { above = middle } else { below = middle }
    }
    Some(above)
}

#[cfg(test)]
mod tests;
