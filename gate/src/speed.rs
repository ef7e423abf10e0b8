//! E2E speed: is a PR's median TPOT at one concurrency (a "cell") worse than base by more than
//! the allowed loss, and — for `[Perf]` and `[Feat]` PRs — better by the required gain?
//!
//! Base and PR runs are paired (run side by side on one node); each pair gives the log-ratio
//! `ln(pr / base)`, which is the same in milliseconds or seconds. A bracketed pair has two base
//! runs, one before and one after its PR run: its base is their geometric mean (a linear drift
//! cancels) and their ratio is an in-band A/A difference, uncorrelated with the pair's
//! log-ratio, that measures the node's noise inside the run. The runner chains a cell's pairs
//! (a pair's closing base run opens the next); `Chain` accounts for the shared runs.
//!
//! Each question is a group-sequential t-test ([`GroupSequential`]) with an indifference zone
//! around its threshold, its error rates spent over the looks by spending functions
//! ([`crate::stats::spending_levels`]: alpha O'Brien–Fleming-type, beta Pocock-type), on a variance that pools the pairs' residuals,
//! the in-band A/A differences and the node's stored calibration (when there is one, with its
//! degrees of freedom capped, and unless the run's own A/A differences contradict it). The
//! pooled variance is never below the pairs' own, and when the pairs' spread is shown larger
//! than base's noise predicts (the PR's runs are noisier) the pairs' own variance alone is used
//! (see [`NoiseUsed`]). Outliers are judged by side: a slow base run (the in-band A/A arm shows
//! it) or a pair whose base runs are slow together is the node's, excluded and so re-measured;
//! a PR run slow against its own clean base is the PR's, kept as evidence. The runner asks
//! [`needs_another_pair`] between pairs. A cell
//! that reaches `max-pairs` without passing a bound is [`Answer::Undecided`], never a pass, and
//! [`ToDecide`] says what more pairs would decide it; which verdict state that is, is the
//! verdict's business (`docs/gate.md`, "Fail closed").

pub mod blocks;

use crate::config::{GateConfig, SequentialConfig};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::stats::{
    Estimate, GroupSequential, SequentialOutcome, median, obrien_fleming_spending, outliers,
    pocock_spending, spending_levels, t_quantile, variance_ratio_p,
};
use crate::to_decide::{Samples, first_deciding};

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
    /// `max-pairs` raised to it (`None` beyond [`TO_DECIDE_LIMIT`]), and the cell's kept ones.
    pub pairs: Samples,
}

/// The most pairs [`ToDecide`] looks for: a cell that needs more is told "more than" this.
pub const TO_DECIDE_LIMIT: usize = 10_000;

/// The noise a cell's test used.
///
/// Three estimates of one run's log variance: the pairs' own (their weighted residuals), base's
/// (the in-band A/A differences and the stored calibration) and the two pooled. Base's alone
/// says nothing about the PR's runs, so the pooled one holds only if the PR's runs are as noisy
/// as base's: the test uses the pooled variance but never less than the pairs' own, and when
/// an F-test at `noise-test-level` shows the pairs' own larger than base's predicts, the pairs'
/// own variance alone at its own degrees of freedom (a t-test of the pairs, valid whatever the
/// PR's noise: the Welch-type case). The stored calibration counts only when a two-sided F-test
/// at `stale-calibration-level` of the run's A/A differences against it does not contradict it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseUsed {
    /// The run-to-run coefficient of variation (the standard deviation of one run's log TPOT).
    pub run_cv: f64,
    /// The degrees of freedom behind it: the pairs' residuals, the in-band A/A differences
    /// and the stored calibration's (the pairs' residuals alone when `own_variance`).
    pub degrees_of_freedom: f64,
    pub in_band_differences: usize,
    pub calibration_df: f64,
    /// Whether `min-cv` was larger than the estimate and was used instead.
    pub floored: bool,
    /// Whether the pairs' spread was shown larger than base's noise predicts, so that their
    /// own variance alone was used.
    pub own_variance: bool,
    /// The PR's run-to-run noise as a multiple of base's (standard deviations), estimated from
    /// the pairs' spread and base's noise; `None` without an estimate of base's noise.
    pub pr_noise_ratio: Option<f64>,
    /// Whether the run's A/A differences contradicted the node's stored calibration, which was
    /// then not used.
    pub calibration_stale: bool,
    /// The pairs' own variance and base's, with their degrees of freedom, when both are known.
    pub parts: Option<(f64, f64, f64, f64)>,
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
    /// The pairs (in run order) whose PR run was slow against its own clean base runs by more
    /// than the outlier threshold: the PR's, kept as evidence (never excluded).
    pub pr_slow: Vec<usize>,
    /// The loss test's bound on P(fail | no loss) for this cell: the PR's alpha over the cells.
    pub alpha: f64,
    /// The bound on P(some cell of the PR fails | no loss anywhere): `speed.alpha`.
    pub family_alpha: f64,
    /// The loss test's bound on P(pass | a loss of max-loss + zone).
    pub beta: f64,
    /// Is the loss over the limit?
    pub loss: Answer,
    /// Is the gain at least the required one? `None` when no gain is required.
    pub gain: Option<Answer>,
    /// What would decide the loss, when the cap left it [`Answer::Undecided`].
    pub to_decide: Option<ToDecide>,
    /// The PR's run-to-run noise as a multiple of base's, when the pairs showed it larger and
    /// by more than `max-noise-growth`: reported (a passing cell is a warning).
    pub noise_growth: Option<f64>,
    /// Whether the node's stored calibration was contradicted by the run's own A/A
    /// differences and not used: the runner starts the node's record afresh.
    pub calibration_stale: bool,
}

/// Judges one cell from its pairs so far.
pub fn judge_cell(pairs: &[Pair], config: &GateConfig, context: &CellContext) -> CellJudgement {
    let speed = &config.speed;
    let cells = context.cells.max(1) as f64;
    let screened = screen(pairs, speed, context.calibration);
    let kept = pairs_except(pairs, &[&screened.excluded]);
    let pooled = pool(&kept, speed, context.calibration);
    let estimate = pooled.map(|(estimate, _)| estimate);
    // A loss is shown on the pairs without the PR's slow runs (which only add to it), on the
    // pooled variance and on the pairs' own; no loss is shown on every kept pair.
    let clean = pairs_except(pairs, &[&screened.excluded, &screened.pr_slow]);
    let clean_pool = pool(&clean, speed, context.calibration);
    let n = kept.len();
    let loss_test = sprt(speed, cells, Direction::Loss, n);
    // When the PR's runs are shown noisier, the looks' t-statistics rest on the pairs' few
    // degrees of freedom, where the spending's levels (computed for a known variance) run over
    // alpha: the pairs' own bound then takes the look's share, which holds alpha by the union
    // bound whatever the looks' correlation.
    let noisier = clean_pool.is_some_and(|(_, noise)| noise.own_variance);
    let own_level = if noisier { loss_test.alpha_share } else { loss_test.alpha_level };
    let loss_side = [
        (clean_pool.map(|(estimate, _)| estimate), loss_test.alpha_level),
        (own_estimate(&clean, speed), own_level),
    ];
    let loss = answer(&loss_test, &loss_side, estimate, n, speed);
    let gain = context.gain_required.then(|| gain_answer(config, cells, &kept, pooled));
    let base: Vec<f64> = kept.iter().map(|pair| pair.base_tpot_ms).collect();
    let pr: Vec<f64> = kept.iter().map(|pair| pair.pr_tpot_ms).collect();
    let change_interval =
        estimate.and_then(|e| change_interval(e.mean, e.standard_error, e.degrees_of_freedom));
    let noise = pooled.map(|(_, noise)| noise);
    CellJudgement {
        pairs: pairs.len(),
        outliers: screened.excluded,
        base_median_ms: median(&base),
        pr_median_ms: median(&pr),
        change: estimate.map(|e| e.mean.exp() - 1.0),
        change_interval,
        noise,
        pr_slow: screened.pr_slow,
        alpha: speed.alpha.get() / cells,
        family_alpha: speed.alpha.get(),
        beta: speed.beta.get(),
        loss,
        gain,
        to_decide: match (loss, pooled) {
            (Answer::Undecided, Some((estimate, noise))) => {
                Some(to_decide(&loss_test, speed, estimate, noise, n))
            }
            _ => None,
        },
        // The PR's slow runs are reported as such, not as noise.
        noise_growth: noise_growth(&clean, speed, clean_pool.map(|(_, noise)| noise)),
        calibration_stale: noise.is_some_and(|noise| noise.calibration_stale),
    }
}

/// The pairs but those at the positions `excluded` lists.
fn pairs_except(pairs: &[Pair], excluded: &[&[usize]]) -> Vec<Pair> {
    pairs
        .iter()
        .enumerate()
        .filter(|(at, _)| !excluded.iter().any(|positions| positions.contains(at)))
        .map(|(_, pair)| *pair)
        .collect()
}

/// The gain test: a gain is shown on every kept pair (the PR's slow runs count against it);
/// its absence on the pooled variance.
fn gain_answer(
    config: &GateConfig,
    cells: f64,
    kept: &[Pair],
    pooled: Option<(Estimate, NoiseUsed)>,
) -> Answer {
    let n = kept.len();
    let estimate = pooled.map(|(estimate, _)| estimate);
    let negate = |e: Option<Estimate>| e.map(|e| Estimate { mean: -e.mean, ..e });
    let gain_test = sprt(&config.gain.test, cells, Direction::Gain, n);
    let noisier = pooled.is_some_and(|(_, noise)| noise.own_variance);
    let own_level = if noisier { gain_test.alpha_share } else { gain_test.alpha_level };
    let gain_side = [
        (negate(estimate), gain_test.alpha_level),
        (negate(own_estimate(kept, &config.speed)), own_level),
    ];
    answer(&gain_test, &gain_side, negate(estimate), n, &config.gain.test)
}

/// A change's two-sided interval at [`INTERVAL_ALPHA`], as fractions, from its log-ratio, the
/// log-ratio's standard error and degrees of freedom: `exp(log_ratio ± t(0.975, df) ·
/// standard_error) − 1`. A verdict's cell and a ledger's pooled cell show this one; `None` when
/// the degrees of freedom give no quantile.
pub fn change_interval(
    log_ratio: f64,
    standard_error: f64,
    degrees_of_freedom: f64,
) -> Option<(f64, f64)> {
    let t = t_quantile(1.0 - INTERVAL_ALPHA / 2.0, degrees_of_freedom)?;
    let half = t * standard_error;
    Some(((log_ratio - half).exp() - 1.0, (log_ratio + half).exp() - 1.0))
}

/// [`change_interval`] inverted: the `(log_ratio, standard_error)` that a change, its interval
/// and the degrees of freedom it was computed with give exactly (the ledger reads them back from
/// a verdict). `None` without a quantile, or when they are no measurement (a log-ratio that is
/// not finite, an interval of no finite positive width).
pub fn log_ratio_and_error(
    change: f64,
    interval: (f64, f64),
    degrees_of_freedom: f64,
) -> Option<(f64, f64)> {
    let t = t_quantile(1.0 - INTERVAL_ALPHA / 2.0, degrees_of_freedom)?;
    let (low, high) = ((1.0 + interval.0).ln(), (1.0 + interval.1).ln());
    let standard_error = (high - low) / (2.0 * t);
    let log_ratio = change.ln_1p();
    let measured = log_ratio.is_finite() && standard_error.is_finite() && standard_error > 0.0;
    measured.then_some((log_ratio, standard_error))
}

/// The runner's question between pairs: does this cell need another pair? Every cell still
/// open gets one until the cap: a cell the cap leaves undecided is not a pass, so the runner
/// spends the pairs the settings allow before it comes to that.
pub fn needs_another_pair(pairs: &[Pair], config: &GateConfig, context: &CellContext) -> bool {
    let judgement = judge_cell(pairs, config, context);
    judgement.loss == Answer::Open || judgement.gain == Some(Answer::Open)
}

/// What the outlier screen found: the node's outliers, excluded, and the PR's, kept.
struct Screen {
    excluded: Vec<usize>,
    pr_slow: Vec<usize>,
}

/// Outliers by side. A deviation more than `outlier-threshold` robust scales out (of one run)
/// is the node's when the in-band A/A arm shows it (the pair's two base runs far apart: one of
/// them is off) or when the pair's log-ratio is far *below* the cell's (its base runs slow
/// together, the PR run not): those pairs are excluded, at most `max-outliers`, else none. A
/// log-ratio far *above* the cell's with clean base runs is a PR run slow against its own base:
/// the PR's, never excluded (a PR that makes some runs slow shows it so).
fn screen(pairs: &[Pair], speed: &SequentialConfig, calibration: Option<Calibration>) -> Screen {
    let ratios: Vec<f64> = pairs.iter().map(Pair::log_ratio).collect();
    let Some(centre) = median(&ratios) else {
        return Screen { excluded: Vec::new(), pr_slow: Vec::new() };
    };
    // Each deviation, its pair, and whether it is a log-ratio's (else an A/A difference's).
    let mut deviations = Vec::new();
    let mut owner = Vec::new();
    for (at, pair) in pairs.iter().enumerate() {
        deviations.push((ratios[at] - centre) / pair.variance_factor().sqrt());
        owner.push((at, true));
        if let Some(difference) = pair.aa_difference() {
            deviations.push(difference / 2f64.sqrt());
            owner.push((at, false));
        }
    }
    let calibrated = calibration.map_or(0.0, |c| (c.log_ratio_variance / 2.0).sqrt());
    let floor = speed.min_cv.get().max(calibrated);
    let mut node = Vec::new();
    let mut pr_slow = Vec::new();
    for at in outliers(&deviations, floor, speed.outlier_threshold, usize::MAX) {
        let (pair, log_ratio) = owner[at];
        if log_ratio && deviations[at] > 0.0 {
            pr_slow.push(pair);
        } else {
            node.push(pair);
        }
    }
    node.dedup();
    // A pair whose base runs are off is the node's, whatever its PR run did.
    pr_slow.retain(|pair| !node.contains(pair));
    if node.len() > speed.max_outliers {
        node.clear();
    }
    Screen { excluded: node, pr_slow }
}

/// The mean log-ratio with its standard error on the test's variance, and the noise used
/// ([`NoiseUsed`] says which variance).
fn pool(
    pairs: &[Pair],
    speed: &SequentialConfig,
    calibration: Option<Calibration>,
) -> Option<(Estimate, NoiseUsed)> {
    if pairs.is_empty() {
        return None;
    }
    let Spread { mean, residual, chain } = Spread::of(pairs);
    let base_noise = BaseNoise::of(pairs, speed, calibration, chain.difference_df);
    // Each estimate divides its sum of squares by its expectation in units of one run's log
    // variance, so each is unbiased; the degrees of freedom discount the chained differences.
    let own_df = chain.residual_expectation;
    let own = (own_df > 0.0).then(|| residual / own_df);
    let base_divisor = base_noise.differences as f64 + base_noise.calibration_df;
    let base_df = chain.difference_df + base_noise.calibration_df;
    let base =
        (base_divisor > 0.0).then(|| (base_noise.in_band + base_noise.calibrated) / base_divisor);
    let divisor = own_df + base_divisor;
    let pooled_df = own_df + base_df;
    if divisor <= 0.0 {
        return None;
    }
    let pooled = (residual + base_noise.in_band + base_noise.calibrated) / divisor;
    let own_variance = match (own, base) {
        (Some(own), Some(base)) if own_df >= 1.0 && base_df >= 1.0 => {
            variance_ratio_p(own, own_df, base, base_df)
                .is_some_and(|p| p < speed.noise_level.get())
        }
        _ => false,
    };
    let (estimated, degrees_of_freedom) = match own {
        Some(own) if own_variance => (own, own_df),
        Some(own) => (pooled.max(own), pooled_df),
        None => (pooled, pooled_df),
    };
    if degrees_of_freedom < 1.0 {
        return None;
    }
    let floor = speed.min_cv.get().powi(2);
    let variance = estimated.max(floor);
    let standard_error = (variance * chain.mean_variance).sqrt();
    let pr_noise_ratio = own.zip(base).and_then(|(own, base)| pr_noise_ratio(pairs, own, base));
    standard_error.is_finite().then_some((
        Estimate { mean, standard_error, degrees_of_freedom },
        NoiseUsed {
            run_cv: variance.sqrt(),
            degrees_of_freedom,
            in_band_differences: base_noise.differences,
            calibration_df: base_noise.calibration_df,
            floored: estimated < floor,
            own_variance,
            pr_noise_ratio,
            calibration_stale: base_noise.calibration_stale,
            parts: own.zip(base).map(|(own, base)| (own, own_df, base, base_df)),
        },
    ))
}

/// What base's noise rests on besides the pairs' own spread: the in-band A/A differences (half
/// their sum of squares, and how many) and the node's calibration, unless the differences
/// contradict it (stale), with its degrees of freedom and its sum of squares' share.
struct BaseNoise {
    differences: usize,
    in_band: f64,
    calibration_stale: bool,
    calibration_df: f64,
    calibrated: f64,
}

impl BaseNoise {
    fn of(
        pairs: &[Pair],
        speed: &SequentialConfig,
        calibration: Option<Calibration>,
        difference_df: f64,
    ) -> BaseNoise {
        let differences: Vec<f64> = pairs.iter().filter_map(Pair::aa_difference).collect();
        let in_band: f64 = differences.iter().map(|d| d * d / 2.0).sum();
        let in_band_count = differences.len() as f64;
        let calibration_stale = calibration.is_some_and(|c| {
            contradicted(c, in_band, in_band_count, difference_df, speed.stale_level.get())
        });
        let (calibration_df, calibrated) =
            calibration.filter(|_| !calibration_stale).map_or((0.0, 0.0), |c| {
                let df = (MAD_EFFICIENCY * f64::from(c.samples)).min(speed.calibration_df);
                (df, df * c.log_ratio_variance / 2.0)
            });
        BaseNoise {
            differences: differences.len(),
            in_band,
            calibration_stale,
            calibration_df,
            calibrated,
        }
    }
}

/// The PR's run noise as a multiple of base's, from the pairs' `own` variance and `base`'s.
/// A pair's log-ratio has variance `σ_pr² + (f - 1) σ_base²` (f its variance factor), and
/// the pairs' own estimate is that over f.
fn pr_noise_ratio(pairs: &[Pair], own: f64, base: f64) -> Option<f64> {
    let factor = pairs.iter().map(Pair::variance_factor).sum::<f64>() / pairs.len() as f64;
    (base > 0.0).then(|| (factor * own / base - (factor - 1.0)).max(0.0).sqrt())
}

/// The PR's noise as a multiple of base's, when the pairs show it above `max-noise-growth`: an
/// F-test at `noise-test-level` of the pairs' own variance against what base's noise predicts
/// for a PR that much noisier (`(g² + f - 1) / f` times base's, `g` the factor, `f` the pairs'
/// mean variance factor).
fn noise_growth(pairs: &[Pair], speed: &SequentialConfig, noise: Option<NoiseUsed>) -> Option<f64> {
    let noise = noise?;
    let ratio = noise.pr_noise_ratio?;
    let (own, own_df, base, base_df) = noise.parts?;
    let factor = pairs.iter().map(Pair::variance_factor).sum::<f64>() / pairs.len().max(1) as f64;
    let growth = speed.max_noise_growth;
    let predicted = base * (growth * growth + factor - 1.0) / factor;
    let shown = variance_ratio_p(own, own_df, predicted, base_df)
        .is_some_and(|p| p < speed.noise_level.get());
    (shown && ratio > growth).then_some(ratio)
}

/// What the pooled and the pairs' own estimates share: the pairs' weighted mean log-ratio
/// (each pair weighted by its log-ratio's inverse variance factor), their weighted residual sum
/// of squares, and what chaining does to both.
struct Spread {
    mean: f64,
    residual: f64,
    chain: Chain,
}

impl Spread {
    fn of(pairs: &[Pair]) -> Spread {
        let weights: Vec<f64> = pairs.iter().map(|pair| 1.0 / pair.variance_factor()).collect();
        let total_weight: f64 = weights.iter().sum();
        let ratios: Vec<f64> = pairs.iter().map(Pair::log_ratio).collect();
        let mean = ratios.iter().zip(&weights).map(|(r, w)| r * w).sum::<f64>() / total_weight;
        let residual = ratios.iter().zip(&weights).map(|(r, w)| w * (r - mean).powi(2)).sum();
        Spread { mean, residual, chain: Chain::of(pairs, &weights) }
    }
}

/// The mean log-ratio on the pairs' own variance alone (their weighted residuals, at their
/// own degrees of freedom, floored at `min-cv`): valid whatever the PR's noise. `None` below a
/// degree of freedom.
fn own_estimate(pairs: &[Pair], speed: &SequentialConfig) -> Option<Estimate> {
    if pairs.is_empty() {
        return None;
    }
    let Spread { mean, residual, chain } = Spread::of(pairs);
    let df = chain.residual_expectation;
    if df < 1.0 {
        return None;
    }
    let variance = (residual / df).max(speed.min_cv.get().powi(2));
    let standard_error = (variance * chain.mean_variance).sqrt();
    standard_error.is_finite().then_some(Estimate { mean, standard_error, degrees_of_freedom: df })
}

/// Whether a run's in-band A/A differences (`in_band`: the sum of `d² / 2` over `count` of
/// them, of `df` degrees of freedom) contradict a stored calibration: a two-sided F-test of
/// their mean square against the calibration's variance (of `0.37 ×` its differences' degrees
/// of freedom) at `level`.
fn contradicted(calibration: Calibration, in_band: f64, count: f64, df: f64, level: f64) -> bool {
    let recorded = calibration.log_ratio_variance / 2.0;
    let recorded_df = MAD_EFFICIENCY * f64::from(calibration.samples);
    if count < 1.0 || df < 1.0 || recorded_df < 1.0 || recorded <= 0.0 {
        return false;
    }
    let measured = in_band / count;
    let higher = variance_ratio_p(measured, df, recorded, recorded_df);
    let lower = variance_ratio_p(recorded, recorded_df, measured, df);
    [higher, lower].into_iter().flatten().any(|p| p < level / 2.0)
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

/// The test of a question at the look of `kept` pairs.
fn sprt(
    config: &SequentialConfig,
    cells: f64,
    direction: Direction,
    kept: usize,
) -> GroupSequential {
    let log = |fraction: f64| match direction {
        Direction::Loss => fraction.ln_1p(),
        Direction::Gain => -(-fraction).ln_1p(),
    };
    let alpha = config.alpha.get() / cells;
    let beta = config.beta.get();
    let look = kept.clamp(config.min_pairs, config.max_pairs) - config.min_pairs;
    GroupSequential {
        h0: log(config.low),
        h1: log(config.high),
        alpha,
        beta,
        alpha_level: look_level(Spending::Alpha, alpha, config.min_pairs, config.max_pairs, look),
        alpha_share: look_share(Spending::Alpha, alpha, config.min_pairs, config.max_pairs, look),
        beta_level: look_level(Spending::Beta, beta, config.min_pairs, config.max_pairs, look),
        line: log(config.threshold.get()),
    }
}

/// How a bound spends its error rate over the looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Spending {
    /// The h1 bound (a loss, a gain): O'Brien–Fleming-type, almost nothing early, where a few
    /// pairs' variance is least certain; the last look close to a fixed-sample test.
    Alpha,
    /// The h0 bound (no loss, no gain): Pocock-type, early, so that a clear no-loss stops in
    /// few pairs.
    Beta,
}

impl Spending {
    fn spent(self, rate: f64, t: f64) -> f64 {
        match self {
            Spending::Alpha => obrien_fleming_spending(rate, t),
            Spending::Beta => pocock_spending(rate, t),
        }
    }
}

/// A schedule of looks: its spending, its error rate's bits, `min-pairs` and `max-pairs`.
type ScheduleKey = (Spending, u64, usize, usize);

thread_local! {
    /// The looks' levels of each schedule used so far (computing one takes milliseconds; a
    /// cell is judged after every pair).
    static SCHEDULES: RefCell<BTreeMap<ScheduleKey, Rc<[f64]>>> =
        const { RefCell::new(BTreeMap::new()) };
}

/// The nominal level of look `look` (0 at `first` kept pairs) of a bound that spends `rate`
/// over looks at every pair from `first` to `last`, by information (the kept pairs).
fn look_level(spending: Spending, rate: f64, first: usize, last: usize, look: usize) -> f64 {
    let levels = SCHEDULES.with(|schedules| {
        let key = (spending, rate.to_bits(), first, last);
        if let Some(levels) = schedules.borrow().get(&key) {
            return Rc::clone(levels);
        }
        let informations: Vec<f64> = (first..=last).map(|n| n as f64).collect();
        let spend = |rate: f64, t: f64| spending.spent(rate, t);
        let levels: Rc<[f64]> = spending_levels(rate, &informations, spend).into();
        schedules.borrow_mut().insert(key, Rc::clone(&levels));
        levels
    });
    levels.get(look).copied().unwrap_or(rate / (last - first + 1) as f64)
}

/// The share of `rate` look `look` (0 at `first` kept pairs) of a schedule from `first` to
/// `last` pairs spends.
fn look_share(spending: Spending, rate: f64, first: usize, last: usize, look: usize) -> f64 {
    let t = |n: usize| n as f64 / last as f64;
    let at = first + look;
    let before = if look == 0 { 0.0 } else { spending.spent(rate, t(at - 1)) };
    spending.spent(rate, t(at)) - before
}

/// The share of `rate` the last look of a schedule from `first` to `last` pairs spends: at
/// most its level ([`crate::stats::spending_levels`]), so what passes a bound at this share
/// passes it at the level.
fn last_share(spending: Spending, rate: f64, first: usize, last: usize) -> f64 {
    if last <= first {
        return rate;
    }
    spending.spent(rate, 1.0) - spending.spent(rate, (last - 1) as f64 / last as f64)
}

/// The answer at this look: h1 (a loss, a gain) needs every estimate of `h1_side` to show it
/// (the pooled variance and the pairs' own, so that a PR whose runs are noisier than base's
/// cannot fail on base's noise), h0 the `h0_side` estimate.
fn answer(
    test: &GroupSequential,
    h1_side: &[(Option<Estimate>, f64)],
    h0_side: Option<Estimate>,
    pairs: usize,
    config: &SequentialConfig,
) -> Answer {
    if pairs < config.min_pairs {
        return Answer::Open;
    }
    match test.look(h1_side, h0_side, pairs >= config.max_pairs).0 {
        SequentialOutcome::Continue => Answer::Open,
        SequentialOutcome::Undecided => Answer::Undecided,
        SequentialOutcome::AcceptH1 => Answer::Yes,
        SequentialOutcome::AcceptH0 => Answer::No,
    }
}

/// What would decide an undecided loss: the last look's bounds, and the kept pairs at which
/// the fail bound (`mean - t(1 - a) se > h0`) or the pass bound (`mean + t(1 - b) se < h1`)
/// would pass if the mean and the run CV stayed as measured, `a` and `b` the shares of alpha
/// and beta the last look of a schedule with `max-pairs` raised to `n` spends (at most its
/// levels, so the estimate errs long). `n` chained bracketed pairs have `se = cv · sqrt(2n -
/// 1/2) / n` (see [`Chain`]) and, counting each added pair's residual and its chained A/A
/// difference (Satterthwaite's `2/3` each), about `5/3` more degrees of freedom a pair (the
/// pairs' own residuals alone, one a pair, when the test used their own variance).
fn to_decide(
    test: &GroupSequential,
    config: &SequentialConfig,
    estimate: Estimate,
    noise: NoiseUsed,
    kept: usize,
) -> ToDecide {
    let change = |log: f64| log.exp() - 1.0;
    let (lower, upper) = test
        .look(&[(Some(estimate), test.alpha_level)], Some(estimate), true)
        .1
        .map_or((f64::NEG_INFINITY, f64::INFINITY), |b| (b.lower, b.upper));
    let per_pair = if noise.own_variance { 1.0 } else { 5.0 / 3.0 };
    let decides = |n: usize| {
        let alpha = last_share(Spending::Alpha, test.alpha, config.min_pairs, n);
        let beta = last_share(Spending::Beta, test.beta, config.min_pairs, n);
        let df = noise.degrees_of_freedom + per_pair * n.saturating_sub(kept) as f64;
        let se = noise.run_cv * (2.0 * n as f64 - 0.5).sqrt() / n as f64;
        let fail = t_quantile(1.0 - alpha, df).map(|t| estimate.mean - t * se);
        let pass = t_quantile(1.0 - beta, df).map(|t| estimate.mean + t * se);
        fail.is_some_and(|bound| bound > test.h0) || pass.is_some_and(|bound| bound < test.h1)
    };
    ToDecide {
        lower: change(lower),
        upper: change(upper),
        low: change(test.h0),
        high: change(test.h1),
        pairs: Samples { needed: first_deciding(kept, TO_DECIDE_LIMIT, decides), have: kept },
    }
}

#[cfg(test)]
mod tests;
