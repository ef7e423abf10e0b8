//! The statistics the gate decides with: a group-sequential t-test on paired log-ratios (valid
//! with the variance unknown), robust outlier screening, Student-t intervals, and score
//! intervals for proportions (Tango's for paired questions, Newcombe's for two samples).
//!
//! A statistic that cannot be computed (too few samples, no variance) is `None`, never NaN.

use statrs::distribution::{Continuous, ContinuousCDF, FisherSnedecor, Normal, StudentsT};

/// The median of some samples; `None` when there are none.
pub fn median(samples: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    } else {
        sorted[middle]
    })
}

/// The mean; `None` when there are no samples.
pub fn mean(samples: &[f64]) -> Option<f64> {
    (!samples.is_empty()).then(|| samples.iter().sum::<f64>() / samples.len() as f64)
}

/// The unbiased sample variance; `None` below two samples.
pub fn sample_variance(samples: &[f64]) -> Option<f64> {
    let mean = mean(samples)?;
    (samples.len() >= 2).then(|| {
        samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (samples.len() - 1) as f64
    })
}

/// The two-sided `1 - alpha` Student-t interval of the mean; `None` below two samples.
pub fn mean_interval(samples: &[f64], alpha: f64) -> Option<(f64, f64)> {
    let mean = mean(samples)?;
    let variance = sample_variance(samples)?;
    let n = samples.len() as f64;
    let half = t_quantile(1.0 - alpha / 2.0, n - 1.0)? * (variance / n).sqrt();
    half.is_finite().then_some((mean - half, mean + half))
}

/// The `p` quantile of Student's t with `df` degrees of freedom; `None` for `df` not positive.
pub fn t_quantile(p: f64, df: f64) -> Option<f64> {
    let t = StudentsT::new(0.0, 1.0, df).ok()?.inverse_cdf(p);
    t.is_finite().then_some(t)
}

/// An estimate of a mean with its standard error and the degrees of freedom of the variance
/// behind the standard error (the standard error is `sigma_hat / sqrt(n_effective)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub mean: f64,
    pub standard_error: f64,
    pub degrees_of_freedom: f64,
}

/// A one-sided group-sequential t-test of a mean between `h0` and `h1` (`h0 < h1`), at one of
/// its looks: it accepts h1 when the mean's lower `1 - alpha_level` t-bound is above `h0`, and
/// h0 when its upper `1 - beta_level` t-bound is below `h1`, where `alpha_level` and
/// `beta_level` are this look's nominal levels ([`spending_levels`]).
///
/// The nominal levels spend `alpha` and `beta` over the looks by a spending function, computed
/// for normal statistics of known variance and applied to the t-statistic at its own degrees of
/// freedom (Jennison & Turnbull's significance-level approach, *Group Sequential Methods*,
/// 2000, §3.8): each look alone is an exact t-test at its nominal level, and the looks together
/// hold alpha and beta as a group-sequential design of normal statistics does; the simulation
/// (`crate::simulate`) measures what they give with the variance estimated. Each bound is
/// computed as if the other did not stop the test (a non-binding bound), which can only lower
/// the error. When both bounds are passed (the mean is known to lie inside the zone) the mean
/// against `line` decides. At the last look a test that passed neither bound is
/// [`SequentialOutcome::Undecided`]: neither hypothesis is ever accepted off its bound, and what
/// the cap leaves open is told apart from a decision (`docs/gate.md`, "Fail closed").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupSequential {
    pub h0: f64,
    pub h1: f64,
    /// P(accept h1 | h0), over all looks.
    pub alpha: f64,
    /// P(accept h0 | h1), over all looks.
    pub beta: f64,
    /// This look's nominal one-sided levels of the two bounds.
    pub alpha_level: f64,
    pub beta_level: f64,
    /// This look's share of `alpha` (at most `alpha_level`): the level of a bound that must
    /// hold alpha by the union bound over the looks, whatever the looks' correlation.
    pub alpha_share: f64,
    pub line: f64,
}

/// Where a sequential test stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequentialOutcome {
    /// Needs another sample.
    Continue,
    /// The last look passed neither bound: more samples than the test allows would decide.
    Undecided,
    /// The mean is below `h1`.
    AcceptH0,
    /// The mean is above `h0`.
    AcceptH1,
}

/// The t-bounds one look of a test used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LookBounds {
    /// The lower `1 - alpha_level` bound of the mean (the least of the h1 side's): above `h0`
    /// accepts h1.
    pub lower: f64,
    /// The upper `1 - beta_level` bound of the mean: below `h1` accepts h0.
    pub upper: f64,
}

impl GroupSequential {
    /// The test at this look. `last` says whether it is the last look. h1 is accepted when
    /// the lower bound of every one of `h1_side` passes `h0` (several estimates of the mean,
    /// each valid under its own assumptions, each with the level of its bound, usually
    /// `alpha_level`: all must show it), h0 when the upper bound of
    /// `h0_side` passes `h1`; `None` (no variance yet) passes neither, so it needs another
    /// sample, or at the last look is undecided. The reported lower bound is the least of
    /// `h1_side`'s.
    pub fn look(
        &self,
        h1_side: &[(Option<Estimate>, f64)],
        h0_side: Option<Estimate>,
        last: bool,
    ) -> (SequentialOutcome, Option<LookBounds>) {
        let lower = |(estimate, level): &(Option<Estimate>, f64)| {
            let estimate = (*estimate)?;
            let ta = t_quantile(1.0 - level, estimate.degrees_of_freedom)?;
            Some(estimate.mean - ta * estimate.standard_error)
        };
        let lowers: Option<Vec<f64>> = h1_side.iter().map(lower).collect();
        let lower = lowers
            .filter(|all| !all.is_empty())
            .map(|all| all.into_iter().fold(f64::INFINITY, f64::min));
        let upper = h0_side.and_then(|estimate| {
            let tb = t_quantile(1.0 - self.beta_level, estimate.degrees_of_freedom)?;
            Some(estimate.mean + tb * estimate.standard_error)
        });
        let bounds = match (lower, upper) {
            (Some(lower), Some(upper)) => Some(LookBounds { lower, upper }),
            _ => None,
        };
        let h1 = lower.is_some_and(|lower| lower > self.h0);
        let h0 = upper.is_some_and(|upper| upper < self.h1);
        let outcome = match (h1, h0) {
            // Both bounds passed: the mean is known to lie inside the zone, where either
            // answer is acceptable; the line says which.
            (true, true) if h0_side.is_some_and(|e| e.mean > self.line) => {
                SequentialOutcome::AcceptH1
            }
            (true, true) => SequentialOutcome::AcceptH0,
            (true, false) => SequentialOutcome::AcceptH1,
            (false, true) => SequentialOutcome::AcceptH0,
            (false, false) if last => SequentialOutcome::Undecided,
            (false, false) => SequentialOutcome::Continue,
        };
        (outcome, bounds)
    }
}

/// Lan & DeMets' Pocock-type spending function: the share of an error rate `rate` spent by
/// the information fraction `t`, `rate · ln(1 + (e - 1) t)` (Lan & DeMets 1983, "Discrete
/// sequential boundaries for clinical trials", Biometrika 70; Kim & DeMets 1987). It spends
/// early: a third of the rate by a fifth of the information, so that clear cases stop soon.
pub fn pocock_spending(rate: f64, t: f64) -> f64 {
    rate * (1.0 + (std::f64::consts::E - 1.0) * t.clamp(0.0, 1.0)).ln()
}

/// Lan & DeMets' O'Brien–Fleming-type spending function: `2 - 2 Φ(z(1 - rate / 2) / sqrt t)`
/// of an error rate `rate` by the information fraction `t` (Lan & DeMets 1983). It spends
/// almost nothing early (under a thousandth of the rate by a fifth of the information) and
/// keeps the last look close to a fixed-sample test.
pub fn obrien_fleming_spending(rate: f64, t: f64) -> f64 {
    if t <= 0.0 {
        return 0.0;
    }
    let normal = Normal::standard();
    let z = normal.inverse_cdf(1.0 - rate / 2.0);
    2.0 - 2.0 * normal.cdf(z / t.min(1.0).sqrt())
}

/// The most looks whose levels [`spending_levels`] integrates; a longer schedule gives each
/// look its share of the spending (the union bound: valid, and conservative).
pub const MAX_INTEGRATED_LOOKS: usize = 64;

/// The nominal one-sided levels of a group-sequential test's looks at the increasing
/// `informations` that spend `rate` by `spending(rate, t)`: look `k`'s level is `1 - Φ(b_k)`,
/// where `b_k` makes P(the standardized statistic stays below `b_1 .. b_{k-1}` and reaches `b_k`
/// at look `k`) the error spent between looks `k - 1` and `k`, for a normal statistic of
/// independent increments (computed by recursive numerical integration: Armitage, McPherson &
/// Rowe 1969, "Repeated significance tests on accumulating data", JRSS A 132; Jennison &
/// Turnbull 2000, ch. 19). Every level is at least its look's share of the spending, so a
/// schedule longer than [`MAX_INTEGRATED_LOOKS`] takes the shares themselves.
pub fn spending_levels(
    rate: f64,
    informations: &[f64],
    spending: impl Fn(f64, f64) -> f64,
) -> Vec<f64> {
    let Some(&total) = informations.last() else { return Vec::new() };
    let spent = |at: usize| spending(rate, informations[at] / total);
    let shares: Vec<f64> = (0..informations.len())
        .map(|at| spent(at) - if at > 0 { spent(at - 1) } else { 0.0 })
        .collect();
    if informations.len() > MAX_INTEGRATED_LOOKS {
        return shares;
    }
    let normal = Normal::standard();
    let mut levels = Vec::with_capacity(informations.len());
    // The sub-density of the running sum S_k (variance I_k) on the paths still below every
    // bound, on a grid of points with Simpson's weights.
    let mut grid: Vec<f64> = Vec::new();
    let mut density: Vec<f64> = Vec::new();
    for (at, &information) in informations.iter().enumerate() {
        let share = shares[at].max(0.0);
        let scale = information.sqrt();
        let weights = simpson(&grid);
        let bound = if at == 0 {
            normal.inverse_cdf(1.0 - share)
        } else {
            let step = (information - informations[at - 1]).sqrt();
            let crossing = |b: f64| {
                grid.iter()
                    .zip(&density)
                    .zip(&weights)
                    .map(|((s, f), w)| w * f * (1.0 - normal.cdf((b * scale - s) / step)))
                    .sum::<f64>()
            };
            if share <= 0.0 { f64::INFINITY } else { spending_bound(share, crossing) }
        };
        levels.push((1.0 - normal.cdf(bound)).max(share));
        // The next density, on the paths that stayed below this bound.
        let next = next_grid(informations, at, bound);
        density = if at == 0 {
            next.iter().map(|s| normal.pdf(*s / scale) / scale).collect()
        } else {
            let step = (information - informations[at - 1]).sqrt();
            next.iter()
                .map(|u| {
                    grid.iter()
                        .zip(&density)
                        .zip(&weights)
                        .map(|((s, f), w)| w * f * normal.pdf((u - s) / step) / step)
                        .sum()
                })
                .collect()
        };
        grid = next;
    }
    levels
}

/// The bound whose crossing probability (`crossing`, which falls as the bound rises) is
/// `share`: bisection between -10 and 40.
fn spending_bound(share: f64, crossing: impl Fn(f64) -> f64) -> f64 {
    let (mut low, mut high) = (-10.0f64, 40.0f64);
    for _ in 0..60 {
        let middle = (low + high) / 2.0;
        if crossing(middle) > share { low = middle } else { high = middle }
    }
    (low + high) / 2.0
}

/// The grid of the running sum after look `at`, below its `bound` (standardized; infinite for
/// none): from -10 to the bound (or 12) standard deviations, an odd number of points spaced
/// at an eighth of the next look's step.
fn next_grid(informations: &[f64], at: usize, bound: f64) -> Vec<f64> {
    let information = informations[at];
    let scale = information.sqrt();
    let top = if bound.is_finite() { bound * scale } else { 12.0 * scale };
    let bottom = -10.0 * scale;
    let spacing = if at + 1 < informations.len() {
        (informations[at + 1] - information).sqrt() / 8.0
    } else {
        scale
    };
    let points = (((top - bottom) / spacing).ceil() as usize).clamp(16, 4000) | 1;
    (0..=points).map(|i| bottom + (top - bottom) * i as f64 / points as f64).collect()
}

/// Simpson's weights for an evenly spaced grid of an odd number of points (the last interval
/// by the trapezoid when the count is even).
fn simpson(grid: &[f64]) -> Vec<f64> {
    let n = grid.len();
    if n < 2 {
        return vec![0.0; n];
    }
    let h = (grid[n - 1] - grid[0]) / (n - 1) as f64;
    let mut weights = vec![0.0; n];
    let simpson_points = if n % 2 == 1 { n } else { n - 1 };
    for (i, weight) in weights.iter_mut().enumerate().take(simpson_points) {
        *weight = h / 3.0
            * if i == 0 || i == simpson_points - 1 {
                1.0
            } else if i % 2 == 1 {
                4.0
            } else {
                2.0
            };
    }
    if simpson_points < n {
        weights[n - 2] += h / 2.0;
        weights[n - 1] += h / 2.0;
    }
    weights
}

/// The one-sided p-value of "the variance behind `numerator` is at most that behind
/// `denominator`" from two independent mean squares of `numerator_df` and `denominator_df`
/// degrees of freedom (the F-test: P(F ≥ observed)); `None` when it cannot be computed.
pub fn variance_ratio_p(
    numerator: f64,
    numerator_df: f64,
    denominator: f64,
    denominator_df: f64,
) -> Option<f64> {
    if !(numerator.is_finite() && denominator > 0.0 && numerator >= 0.0) {
        return None;
    }
    let f = FisherSnedecor::new(numerator_df, denominator_df).ok()?;
    let p = 1.0 - f.cdf(numerator / denominator);
    p.is_finite().then_some(p.clamp(0.0, 1.0))
}

/// The indices of outliers among `deviations` (each already divided by its own standard
/// deviation in common units): those more than `threshold` robust scales from zero, where the
/// robust scale is `1.4826 * median(|deviation|)` (the MAD's normal-consistent scale), floored
/// at `floor`. At most `max_outliers` are returned; when more are flagged the samples are not
/// "clean runs plus a rare outlier" and none is excluded.
pub fn outliers(deviations: &[f64], floor: f64, threshold: f64, max_outliers: usize) -> Vec<usize> {
    if deviations.len() < 3 {
        return Vec::new();
    }
    let absolute: Vec<f64> = deviations.iter().map(|d| d.abs()).collect();
    let Some(mad) = median(&absolute) else { return Vec::new() };
    let scale = (1.4826 * mad).max(floor);
    let flagged: Vec<usize> =
        (0..absolute.len()).filter(|&at| absolute[at] > threshold * scale).collect();
    if flagged.len() > max_outliers { Vec::new() } else { flagged }
}

/// The robust variance of base-vs-base log differences, as a node's calibration is computed:
/// differences more than [`CALIBRATION_REJECT`] robust scales from their median are dropped,
/// and the variance is `(1.4826 * MAD)^2` of the rest about their median. `None` below two
/// differences. One 30%-fast run among twenty moves it by a few percent, not by half.
pub fn robust_log_ratio_variance(differences: &[f64]) -> Option<f64> {
    let scale = |values: &[f64]| {
        let centre = median(values)?;
        let deviations: Vec<f64> = values.iter().map(|d| (d - centre).abs()).collect();
        Some((centre, 1.4826 * median(&deviations)?))
    };
    if differences.len() < 2 {
        return None;
    }
    let (centre, first) = scale(differences)?;
    let kept: Vec<f64> = differences
        .iter()
        .copied()
        .filter(|d| (d - centre).abs() <= CALIBRATION_REJECT * first)
        .collect();
    let (_, scale) = scale(if kept.len() >= 2 { &kept } else { differences })?;
    let variance = scale * scale;
    variance.is_finite().then_some(variance)
}

/// How many robust scales from the median a calibration's difference may be before it is
/// dropped as an outlier.
pub const CALIBRATION_REJECT: f64 = 5.0;

/// The z quantile for a two-sided `1 - alpha` interval.
pub fn z_two_sided(alpha: f64) -> f64 {
    Normal::standard().inverse_cdf(1.0 - alpha / 2.0)
}

/// The Wilson score interval of a proportion.
pub fn wilson(successes: u64, trials: u64, alpha: f64) -> Option<(f64, f64)> {
    if trials == 0 {
        return None;
    }
    let n = trials as f64;
    let p = successes as f64 / n;
    let z = z_two_sided(alpha);
    let denominator = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denominator;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denominator;
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// A comparison of PR against base accuracy, against a tolerance: one test gives the interval,
/// the p-value and the decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProportionComparison {
    /// PR minus base, as a fraction of the questions.
    pub difference: f64,
    /// The two-sided `1 - 2 alpha` interval of the difference: each bound is a one-sided
    /// `1 - alpha` bound.
    pub interval: (f64, f64),
    /// The one-sided p-value of "the PR is at most `tolerance` below base" (small: it is
    /// further below). It is below alpha exactly when the interval's upper bound is below
    /// `-tolerance`.
    pub p_beyond: f64,
}

/// What a comparison says about the tolerance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToleranceOutcome {
    /// The interval's lower bound is above `-tolerance`.
    Within,
    /// The interval's upper bound is below `-tolerance`.
    Beyond,
    /// The interval holds `-tolerance`.
    Undecided,
}

impl ProportionComparison {
    /// Where the interval lies against the tolerance.
    pub fn against(&self, tolerance: f64) -> ToleranceOutcome {
        if self.interval.1 < -tolerance {
            ToleranceOutcome::Beyond
        } else if self.interval.0 > -tolerance {
            ToleranceOutcome::Within
        } else {
            ToleranceOutcome::Undecided
        }
    }
}

/// Tango's score statistic for a paired difference `delta` (PR minus base): `pr_only` and
/// `base_only` are the discordant counts of `n` questions (Tango 1998, Statistics in Medicine
/// 17:891). It decreases in `delta`.
fn tango_statistic(pr_only: f64, base_only: f64, n: f64, delta: f64) -> f64 {
    let a = 2.0 * n;
    let b = -pr_only - base_only + (2.0 * n - pr_only + base_only) * delta;
    let c = -base_only * delta * (1.0 - delta);
    let p21 = ((b * b - 4.0 * a * c).max(0.0).sqrt() - b) / (2.0 * a);
    let variance = n * (2.0 * p21 + delta * (1.0 - delta));
    let numerator = pr_only - base_only - n * delta;
    if variance > 0.0 {
        numerator / variance.sqrt()
    } else if numerator > 0.0 {
        f64::INFINITY
    } else if numerator < 0.0 {
        f64::NEG_INFINITY
    } else {
        0.0
    }
}

/// The `delta` in `[-1, 1]` where a decreasing `statistic(delta)` crosses `target`.
fn solve_decreasing(statistic: impl Fn(f64) -> f64, target: f64) -> f64 {
    let (mut low, mut high) = (-1.0f64, 1.0f64);
    for _ in 0..80 {
        let middle = (low + high) / 2.0;
        if statistic(middle) > target {
            low = middle;
        } else {
            high = middle;
        }
    }
    (low + high) / 2.0
}

/// Paired comparison on the same questions: the discordant counts are `base_only` (base right,
/// PR wrong) and `pr_only`. The interval is Tango's score interval of the paired difference
/// (each bound one-sided at `alpha`), the p-value Tango's score test of "the difference is
/// `-tolerance`" against "it is below": the same statistic, so the p-value is below alpha
/// exactly when the upper bound is below `-tolerance`.
pub fn paired_comparison(
    base_only: u64,
    pr_only: u64,
    questions: u64,
    alpha: f64,
    tolerance: f64,
) -> Option<ProportionComparison> {
    if questions == 0 || base_only + pr_only > questions {
        return None;
    }
    let n = questions as f64;
    let (b, c) = (base_only as f64, pr_only as f64);
    let z = Normal::standard().inverse_cdf(1.0 - alpha);
    let statistic = |delta: f64| tango_statistic(c, b, n, delta);
    let low = solve_decreasing(statistic, z);
    let high = solve_decreasing(statistic, -z);
    // Under "the difference is -tolerance" the statistic is standard normal; below it, the
    // statistic is negative.
    let p_beyond = Normal::standard().cdf(statistic(-tolerance).clamp(-40.0, 40.0));
    Some(ProportionComparison { difference: (c - b) / n, interval: (low, high), p_beyond })
}

/// Newcombe's hybrid score interval (method 10) of `pr - base` for two independent
/// proportions, each bound one-sided at `alpha`.
fn newcombe(
    base_correct: u64,
    base_questions: u64,
    pr_correct: u64,
    pr_questions: u64,
    alpha: f64,
) -> Option<(f64, f64)> {
    let (base_low, base_high) = wilson(base_correct, base_questions, 2.0 * alpha)?;
    let (pr_low, pr_high) = wilson(pr_correct, pr_questions, 2.0 * alpha)?;
    let (p1, p2) =
        (base_correct as f64 / base_questions as f64, pr_correct as f64 / pr_questions as f64);
    let difference = p2 - p1;
    let low = difference - ((p2 - pr_low).powi(2) + (base_high - p1).powi(2)).sqrt();
    let high = difference + ((pr_high - p2).powi(2) + (p1 - base_low).powi(2)).sqrt();
    Some((low, high))
}

/// Unpaired comparison of two proportions: Newcombe's hybrid score interval of the difference
/// (each bound one-sided at `alpha`), and as the p-value the level at which its upper bound
/// reaches `-tolerance` (the interval inverted), so the decision, the interval and the
/// p-value are one test.
pub fn unpaired_comparison(
    base_correct: u64,
    base_questions: u64,
    pr_correct: u64,
    pr_questions: u64,
    alpha: f64,
    tolerance: f64,
) -> Option<ProportionComparison> {
    let interval = newcombe(base_correct, base_questions, pr_correct, pr_questions, alpha)?;
    let difference =
        pr_correct as f64 / pr_questions as f64 - base_correct as f64 / base_questions as f64;
    let upper = |level: f64| {
        newcombe(base_correct, base_questions, pr_correct, pr_questions, level)
            .map_or(f64::INFINITY, |(_, high)| high)
    };
    // The upper bound grows as the level shrinks; the p-value is the level where it reaches
    // -tolerance. A difference at or above -tolerance has a p-value of at least one half,
    // shown as 0.5.
    let p_beyond = if difference >= -tolerance {
        0.5
    } else if upper(1e-12) < -tolerance {
        1e-12
    } else {
        let (mut low, mut high) = (1e-12f64, 0.5f64);
        for _ in 0..60 {
            let middle = (low * high).sqrt();
            if upper(middle) < -tolerance {
                high = middle;
            } else {
                low = middle;
            }
        }
        high
    };
    Some(ProportionComparison { difference, interval, p_beyond })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-3
    }

    #[test]
    fn medians_means_and_variances() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(sample_variance(&[1.0]), None);
        assert_eq!(sample_variance(&[1.0, 3.0]), Some(2.0));
        assert_eq!(mean_interval(&[1.0], 0.05), None);
        let (low, high) = mean_interval(&[1.0, 2.0, 3.0], 0.05).expect("an interval");
        // mean 2, s = 1, t(2, .975) = 4.303.
        assert!(close(low, 2.0 - 4.303 / 3f64.sqrt()) && close(high, 2.0 + 4.303 / 3f64.sqrt()));
    }

    fn test() -> GroupSequential {
        GroupSequential {
            h0: 0.0,
            h1: 0.04,
            alpha: 0.02,
            beta: 0.05,
            alpha_level: 0.02 / 4.0,
            beta_level: 0.05 / 4.0,
            alpha_share: 0.02 / 4.0,
            line: 0.02,
        }
    }

    #[test]
    fn spending_levels_are_the_published_group_sequential_bounds() {
        // Five equally spaced looks, one-sided 2.5% (two-sided 5%): the bounds of Lan and
        // DeMets' spending functions as tabulated (Jennison & Turnbull 2000, table 7.6;
        // R's gsDesign and ldbounds give the same). Pocock-type: 2.438, 2.427, 2.410, 2.397,
        // 2.386. O'Brien–Fleming-type, 2 - 2 Φ(z(1 - α/2) / sqrt t): 4.877, 3.357, 2.680,
        // 2.290, 2.031.
        let normal = Normal::standard();
        let z = |levels: Vec<f64>| -> Vec<f64> {
            levels.iter().map(|p| normal.inverse_cdf(1.0 - p)).collect()
        };
        let looks = [1.0, 2.0, 3.0, 4.0, 5.0];
        let pocock = z(spending_levels(0.025, &looks, pocock_spending));
        for (got, want) in pocock.iter().zip([2.438, 2.427, 2.410, 2.397, 2.386]) {
            assert!((got - want).abs() < 0.003, "{pocock:?}");
        }
        let obf = z(spending_levels(0.025, &looks, obrien_fleming_spending));
        for (got, want) in obf.iter().zip([4.877, 3.357, 2.680, 2.290, 2.031]) {
            assert!((got - want).abs() < 0.003, "{obf:?}");
        }
        // One look is a fixed-sample test; every level is at least its look's share.
        let one = spending_levels(0.05, &[7.0], pocock_spending);
        assert!(one.len() == 1 && (one[0] - 0.05).abs() < 1e-9, "{one:?}");
        let long: Vec<f64> = (1..=80).map(f64::from).collect();
        let shares = spending_levels(0.05, &long, pocock_spending);
        let spent: f64 = shares.iter().sum();
        assert!((spent - 0.05).abs() < 1e-12, "beyond the integrated looks: the shares");
    }

    #[test]
    fn the_variance_ratio_test_is_an_f_test() {
        // F(4, 10) at 3.48 is its 95% point.
        let p = variance_ratio_p(3.478, 4.0, 1.0, 10.0).expect("a p-value");
        assert!((p - 0.05).abs() < 0.001, "{p}");
        assert!(variance_ratio_p(1.0, 4.0, 0.0, 10.0).is_none());
    }

    fn look(test: &GroupSequential, mean: f64, se: f64, df: f64, last: bool) -> SequentialOutcome {
        let estimate = Estimate { mean, standard_error: se, degrees_of_freedom: df };
        test.look(&[(Some(estimate), test.alpha_level)], Some(estimate), last).0
    }

    #[test]
    fn each_look_is_a_t_test_at_the_error_rate_divided_over_the_looks() {
        let t = test();
        // t(10) quantiles: 1 - 0.02 / 4 = 0.995 is 3.169; 1 - 0.05 / 4 = 0.9875 is 2.634.
        let (ta, tb) = (3.169, 2.634);
        let se = 0.01;
        // Just above and just below the bound that accepts h1 (lower bound above 0).
        assert_eq!(look(&t, ta * se + 0.0002, se, 10.0, false), SequentialOutcome::AcceptH1);
        assert_eq!(look(&t, ta * se - 0.0002, se, 10.0, false), SequentialOutcome::Continue);
        // The bound that accepts h0 (upper bound below 4%).
        assert_eq!(look(&t, 0.04 - tb * se - 0.0002, se, 10.0, false), SequentialOutcome::AcceptH0);
        assert_eq!(look(&t, 0.04 - tb * se + 0.0002, se, 10.0, false), SequentialOutcome::Continue);
        // Fewer degrees of freedom need more evidence: t(3, 0.995) = 5.841.
        assert_eq!(look(&t, ta * se + 0.0002, se, 3.0, false), SequentialOutcome::Continue);
        assert_eq!(look(&t, 5.841 * se + 0.0002, se, 3.0, false), SequentialOutcome::AcceptH1);
        // At the last look what the bounds did not decide is undecided, on either side of the
        // line: a fail needs its bound, and so does a pass.
        assert_eq!(look(&t, 0.025, se, 10.0, true), SequentialOutcome::Undecided);
        assert_eq!(look(&t, 0.015, se, 10.0, true), SequentialOutcome::Undecided);
        assert_eq!(look(&t, ta * se + 0.0002, se, 10.0, true), SequentialOutcome::AcceptH1);
        // A narrow interval inside the zone passes both bounds: the line decides, confidently.
        assert_eq!(look(&t, 0.025, 0.001, 10.0, false), SequentialOutcome::AcceptH1);
        assert_eq!(look(&t, 0.015, 0.001, 10.0, false), SequentialOutcome::AcceptH0);
        assert_eq!(t.look(&[(None, 0.005)], None, false).0, SequentialOutcome::Continue);
        assert_eq!(t.look(&[(None, 0.005)], None, true).0, SequentialOutcome::Undecided);
        // A confirming estimate on fewer degrees of freedom holds the fail back: t(3, 0.995)
        // = 5.841; without one (no variance of its own yet) h1 is never accepted.
        let pooled =
            Estimate { mean: ta * se + 0.0002, standard_error: se, degrees_of_freedom: 10.0 };
        let own = Estimate { degrees_of_freedom: 3.0, ..pooled };
        let look_at = |h1_side: &[(Option<Estimate>, f64)]| t.look(h1_side, Some(pooled), false).0;
        let level = t.alpha_level;
        assert_eq!(
            look_at(&[(Some(pooled), level), (Some(own), level)]),
            SequentialOutcome::Continue
        );
        assert_eq!(
            look_at(&[(Some(pooled), level), (Some(pooled), level)]),
            SequentialOutcome::AcceptH1
        );
        assert_eq!(look_at(&[(Some(pooled), level), (None, level)]), SequentialOutcome::Continue);
        // Each bound at its own level: a tenth of the level holds the same estimate back.
        assert_eq!(
            look_at(&[(Some(pooled), level), (Some(pooled), level / 10.0)]),
            SequentialOutcome::Continue
        );
    }

    #[test]
    fn outliers_are_far_from_the_robust_scale_and_rare() {
        let clean = [0.01, -0.02, 0.015, -0.005, 0.0, 0.02, -0.01, 0.005, -0.015, 0.01];
        assert_eq!(outliers(&clean, 0.01, 6.0, 2), Vec::<usize>::new());
        // The MAD of the ten is 0.01, the scale 0.014826: six scales are 0.0890.
        // Replacing the 0.02 at 5 leaves the median absolute value at 0.01.
        let mut one = clean.to_vec();
        one[5] = 0.085;
        assert_eq!(outliers(&one, 0.01, 6.0, 2), Vec::<usize>::new());
        one[5] = 0.095;
        assert_eq!(outliers(&one, 0.01, 6.0, 2), vec![5]);
        one[5] = -0.69;
        assert_eq!(outliers(&one, 0.01, 6.0, 2), vec![5]);
        // The floor: with the same data and a floor of 2% six scales are 0.12.
        one[5] = 0.11;
        assert_eq!(outliers(&one, 0.01, 6.0, 2), vec![5]);
        assert_eq!(outliers(&one, 0.02, 6.0, 2), Vec::<usize>::new());
        // The threshold: at 8 scales (0.1186) 0.11 is not an outlier.
        assert_eq!(outliers(&one, 0.01, 8.0, 2), Vec::<usize>::new());
        // More flagged than allowed: the samples are not clean ones plus an outlier.
        // (Three of ten out move the median absolute value to 0.0125: six scales are 0.111.)
        let mut three = one.clone();
        three[0] = 0.7;
        three[1] = -0.7;
        three[5] = 0.2;
        assert_eq!(outliers(&three, 0.01, 6.0, 2), Vec::<usize>::new());
        assert_eq!(outliers(&three, 0.01, 6.0, 3), vec![0, 1, 5]);
        assert_eq!(outliers(&[0.0, 0.9], 0.01, 6.0, 2), Vec::<usize>::new(), "too few to tell");
    }

    #[test]
    fn a_calibration_is_robust_to_an_outlier_run() {
        // ±2% differences: the MAD about the median 0 is 0.02, the variance (1.4826 * 0.02)².
        let clean: Vec<f64> = (0..20).map(|i| if i % 2 == 0 { 0.02 } else { -0.02 }).collect();
        let expect = (1.4826f64 * 0.02).powi(2);
        let variance = robust_log_ratio_variance(&clean).expect("a variance");
        assert!((variance - expect).abs() < 1e-12, "{variance}");
        // One 32%-fast run: the first scale is about 0.0297, five of them 0.148; -0.386 is
        // dropped and the variance does not move. (A mean square would go from 0.0004 to 0.0075.)
        let mut with_outlier = clean.clone();
        with_outlier.push((0.68f64).ln());
        let variance = robust_log_ratio_variance(&with_outlier).expect("a variance");
        assert!((variance - expect).abs() < 1e-12, "{variance}");
        // A difference of 0.12 is under five scales out: kept. The median moves to 0.02 and the
        // MAD to 0.04 (the ±2% data are two-valued), so the variance is (1.4826 * 0.04)².
        let mut near = clean.clone();
        near.push(0.12);
        let variance = robust_log_ratio_variance(&near).expect("a variance");
        assert!((variance - (1.4826f64 * 0.04).powi(2)).abs() < 1e-12, "{variance}");
        assert_eq!(robust_log_ratio_variance(&[0.01]), None);
    }

    #[test]
    fn the_paired_score_interval_is_tangos_and_the_p_value_is_its_test() {
        // 200 questions; base alone right on 12, PR alone right on 2.
        let paired = paired_comparison(12, 2, 200, 0.025, 0.015).expect("a comparison");
        assert!(close(paired.difference, -0.05));
        // Each bound is where Tango's statistic is ∓z (z = 1.95996 at 0.025).
        let z = 1.959964;
        assert!((tango_statistic(2.0, 12.0, 200.0, paired.interval.0) - z).abs() < 1e-6);
        assert!((tango_statistic(2.0, 12.0, 200.0, paired.interval.1) + z).abs() < 1e-6);
        // Wider than Wald's [-0.0823, -0.0177] on the low side, as a score interval of a
        // negative difference is.
        assert!(paired.interval.0 < -0.08 && paired.interval.1 < -0.01, "{:?}", paired.interval);
        assert_eq!(paired.against(0.015), ToleranceOutcome::Beyond);
        assert!(paired.p_beyond < 0.025, "{}", paired.p_beyond);
        // No discordant question: the interval is not collapsed to a point.
        let none = paired_comparison(0, 0, 1319, 0.025, 0.015).expect("a comparison");
        assert!(none.interval.0 < -0.001 && none.interval.1 > 0.001, "{:?}", none.interval);
        assert_eq!(none.against(0.015), ToleranceOutcome::Within);
        // GSM8K with 10% of questions disagreeing, no difference: the tolerance of 1.5 points
        // is inside the interval, so the answer is undecided, not a pass or a fail.
        let aa = paired_comparison(66, 66, 1319, 0.025, 0.015).expect("a comparison");
        assert_eq!(aa.against(0.015), ToleranceOutcome::Undecided, "{:?}", aa.interval);
        // Its p-value is the test's: far from "beyond the tolerance".
        assert!(aa.p_beyond > 0.9 && aa.p_beyond < 0.99, "{}", aa.p_beyond);
        assert_eq!(paired_comparison(3, 0, 2, 0.025, 0.015), None);
    }

    #[test]
    fn the_unpaired_interval_is_newcombes_and_the_p_value_inverts_it() {
        let unpaired = unpaired_comparison(80, 100, 70, 100, 0.025, 0.02).expect("a comparison");
        assert!(close(unpaired.difference, -0.10));
        // Newcombe's hybrid score interval by hand: Wilson 70/100 is (0.60416, 0.78107), Wilson
        // 80/100 is (0.71118, 0.86665); low = -0.1 - sqrt(0.09584² + 0.06665²) = -0.21673,
        // high = -0.1 + sqrt(0.08107² + 0.08882²) = 0.02025.
        assert!((unpaired.interval.0 + 0.21673).abs() < 0.0005, "{:?}", unpaired.interval);
        assert!((unpaired.interval.1 - 0.02025).abs() < 0.0005, "{:?}", unpaired.interval);
        assert_eq!(unpaired.against(0.02), ToleranceOutcome::Undecided);
        // At its p-value the upper bound is the tolerance.
        let at = newcombe(80, 100, 70, 100, unpaired.p_beyond).expect("an interval");
        assert!((at.1 + 0.02).abs() < 1e-6, "{at:?} at p = {}", unpaired.p_beyond);
        assert!(unpaired.p_beyond > 0.025, "{}", unpaired.p_beyond);
        assert_eq!(unpaired_comparison(0, 0, 1, 1, 0.025, 0.02), None);
    }

    proptest::proptest! {
        #[test]
        fn the_decision_and_the_p_value_agree(
            base_only in 0u64..200,
            pr_only in 0u64..200,
            extra in 0u64..1000,
            tolerance in 0.0f64..0.1,
        ) {
            let n = base_only + pr_only + extra + 1;
            let c = paired_comparison(base_only, pr_only, n, 0.025, tolerance).expect("a comparison");
            proptest::prop_assert!(c.interval.0 <= c.difference + 1e-9 && c.difference <= c.interval.1 + 1e-9);
            let beyond = c.against(tolerance) == ToleranceOutcome::Beyond;
            // Away from the boundary itself the two must agree.
            if (c.interval.1 + tolerance).abs() > 1e-6 {
                proptest::prop_assert_eq!(beyond, c.p_beyond < 0.025, "{:?}", c);
            }
        }
    }
}
