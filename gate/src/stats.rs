//! The statistics the gate decides with: a sequential probability ratio test on paired
//! log-ratios, Student-t intervals, and exact and score methods for proportions.
//!
//! A statistic that cannot be computed (too few samples, no variance) is `None`, never NaN.

use statrs::distribution::{Binomial, ContinuousCDF, DiscreteCDF, Normal, StudentsT};

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
    let t = StudentsT::new(0.0, 1.0, n - 1.0).ok()?.inverse_cdf(1.0 - alpha / 2.0);
    let half = t * (variance / n).sqrt();
    half.is_finite().then_some((mean - half, mean + half))
}

/// A sequential probability ratio test of a normal mean: `h0` against `h1` (`h0 < h1`).
#[derive(Debug, Clone, Copy)]
pub struct Sprt {
    pub h0: f64,
    pub h1: f64,
    /// P(accept h1 | h0).
    pub alpha: f64,
    /// P(accept h0 | h1).
    pub beta: f64,
    pub min_samples: usize,
    pub max_samples: usize,
    /// At the cap, an undecided test accepts h1 only when the mean is over this line and
    /// significantly (at `alpha`) above h0; otherwise it accepts h0.
    pub line: f64,
}

/// Where a sequential test stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SprtOutcome {
    /// Needs another sample.
    Undecided,
    /// The mean is at `h0` or below (`confident` false: decided at the cap by the mean).
    AcceptH0 { confident: bool },
    /// The mean is at `h1` or above.
    AcceptH1 { confident: bool },
}

/// The state of a sequential test after some samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SprtState {
    pub outcome: SprtOutcome,
    pub samples: usize,
    /// The log-likelihood ratio of h1 against h0, when there are enough samples for a variance.
    pub log_likelihood_ratio: Option<f64>,
}

impl Sprt {
    /// Runs the test on the samples so far. The variance is the larger of the known one (a
    /// calibration, when given) and the samples' own; below `min_samples` nothing is decided.
    pub fn run(&self, samples: &[f64], known_variance: Option<f64>) -> SprtState {
        let n = samples.len();
        let undecided =
            SprtState { outcome: SprtOutcome::Undecided, samples: n, log_likelihood_ratio: None };
        let variance = match (sample_variance(samples), known_variance) {
            (Some(sample), Some(known)) => sample.max(known),
            (Some(sample), None) => sample,
            (None, _) => return undecided,
        };
        // A variance of zero would make any difference infinitely sure; floor it at a tiny
        // relative value instead.
        let variance = variance.max(1e-12);
        let sum: f64 = samples.iter().sum();
        let llr = (self.h1 - self.h0) / variance * (sum - n as f64 * (self.h0 + self.h1) / 2.0);
        let upper = ((1.0 - self.beta) / self.alpha).ln();
        let lower = (self.beta / (1.0 - self.alpha)).ln();
        let outcome = if n < self.min_samples {
            SprtOutcome::Undecided
        } else if llr >= upper {
            SprtOutcome::AcceptH1 { confident: true }
        } else if llr <= lower {
            SprtOutcome::AcceptH0 { confident: true }
        } else if n >= self.max_samples {
            // At the cap the mean decides, but h1 only with the test's own error rate: the
            // mean must be over the line and significantly above h0.
            let mean = sum / n as f64;
            let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
                .map(|t| t.inverse_cdf(1.0 - self.alpha))
                .unwrap_or(f64::INFINITY);
            let lower = mean - t * (variance / n as f64).sqrt();
            if mean > self.line && lower > self.h0 {
                SprtOutcome::AcceptH1 { confident: false }
            } else {
                SprtOutcome::AcceptH0 { confident: false }
            }
        } else {
            SprtOutcome::Undecided
        };
        SprtState { outcome, samples: n, log_likelihood_ratio: Some(llr) }
    }
}

/// A one-sample t-test at a fixed sample size: is the mean above `line`? Used by the
/// simulation to compare the sequential test with the fixed-n design it replaces.
pub fn t_test_above(samples: &[f64], line: f64, alpha: f64) -> Option<bool> {
    let mean = mean(samples)?;
    let variance = sample_variance(samples)?.max(1e-12);
    let n = samples.len() as f64;
    let t = (mean - line) / (variance / n).sqrt();
    let critical = StudentsT::new(0.0, 1.0, n - 1.0).ok()?.inverse_cdf(1.0 - alpha);
    Some(t > critical)
}

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

/// A comparison of PR against base accuracy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProportionComparison {
    /// PR minus base, as a fraction of the questions.
    pub difference: f64,
    /// The two-sided `1 - alpha` interval of the difference.
    pub interval: (f64, f64),
    /// One-sided p-value of "the PR is worse than base".
    pub p_worse: f64,
}

/// Paired comparison on the same questions: the discordant counts are `base_only` (base right,
/// PR wrong) and `pr_only`. The p-value is the exact binomial (McNemar) test; the interval is
/// the Wald interval of a paired difference.
pub fn paired_comparison(
    base_only: u64,
    pr_only: u64,
    questions: u64,
    alpha: f64,
) -> Option<ProportionComparison> {
    if questions == 0 {
        return None;
    }
    let n = questions as f64;
    let (b, c) = (base_only as f64, pr_only as f64);
    let difference = (c - b) / n;
    let discordant = base_only + pr_only;
    let p_worse = if discordant == 0 {
        1.0
    } else {
        // P(X >= base_only) for X ~ Binomial(discordant, 1/2).
        let binomial = Binomial::new(0.5, discordant).ok()?;
        if base_only == 0 { 1.0 } else { 1.0 - binomial.cdf(base_only - 1) }
    };
    let spread = ((b + c) - (c - b).powi(2) / n).max(0.0).sqrt() / n;
    let half = z_two_sided(alpha) * spread;
    Some(ProportionComparison {
        difference,
        interval: (difference - half, difference + half),
        p_worse,
    })
}

/// Unpaired comparison of two proportions: Newcombe's hybrid score interval of the difference
/// and a one-sided pooled z-test.
pub fn unpaired_comparison(
    base_correct: u64,
    base_questions: u64,
    pr_correct: u64,
    pr_questions: u64,
    alpha: f64,
) -> Option<ProportionComparison> {
    let (base_low, base_high) = wilson(base_correct, base_questions, alpha)?;
    let (pr_low, pr_high) = wilson(pr_correct, pr_questions, alpha)?;
    let (n1, n2) = (base_questions as f64, pr_questions as f64);
    let (p1, p2) = (base_correct as f64 / n1, pr_correct as f64 / n2);
    let difference = p2 - p1;
    let low = difference - ((p2 - pr_low).powi(2) + (base_high - p1).powi(2)).sqrt();
    let high = difference + ((pr_high - p2).powi(2) + (p1 - base_low).powi(2)).sqrt();
    let pooled = (base_correct as f64 + pr_correct as f64) / (n1 + n2);
    let se = (pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2)).sqrt();
    let p_worse = if se > 0.0 { Normal::standard().cdf(difference / se) } else { 0.5 };
    Some(ProportionComparison { difference, interval: (low, high), p_worse })
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

    #[test]
    fn the_sequential_test_decides_clear_cases_early_and_caps_the_rest() {
        let test = Sprt {
            h0: 0.0,
            h1: 0.04,
            alpha: 0.05,
            beta: 0.05,
            min_samples: 3,
            max_samples: 6,
            line: 0.02,
        };
        let decide = |samples: &[f64]| test.run(samples, None).outcome;
        assert_eq!(decide(&[0.0, 0.001]), SprtOutcome::Undecided, "below the minimum");
        assert_eq!(decide(&[0.0, 0.001, -0.001]), SprtOutcome::AcceptH0 { confident: true });
        assert_eq!(decide(&[0.05, 0.051, 0.049]), SprtOutcome::AcceptH1 { confident: true });
        let noisy = [0.03, -0.02, 0.05, 0.0, 0.04, 0.01];
        assert_eq!(decide(&noisy[..5]), SprtOutcome::Undecided);
        assert_eq!(
            decide(&noisy),
            SprtOutcome::AcceptH0 { confident: false },
            "mean 0.0183 < 0.02 at the cap"
        );
        // A known variance larger than the samples' keeps the test honest.
        assert_eq!(test.run(&[0.0, 0.001, -0.001], Some(0.01)).outcome, SprtOutcome::Undecided);
    }

    #[test]
    fn proportions_paired_and_unpaired() {
        // 200 questions; base alone right on 12, PR alone right on 2.
        let paired = paired_comparison(12, 2, 200, 0.05).expect("a comparison");
        assert!(close(paired.difference, -0.05));
        // P(X >= 12 | Binomial(14, 0.5)) = 106 / 16384.
        assert!(close(paired.p_worse, 106.0 / 16384.0), "{}", paired.p_worse);
        assert!(paired.interval.0 < -0.05 && paired.interval.1 < 0.0);
        assert_eq!(paired_comparison(0, 0, 100, 0.05).map(|c| c.p_worse), Some(1.0));

        let unpaired = unpaired_comparison(80, 100, 70, 100, 0.05).expect("a comparison");
        assert!(close(unpaired.difference, -0.10));
        // Newcombe's hybrid score interval by hand: Wilson 70/100 is (0.60416, 0.78107), Wilson
        // 80/100 is (0.71118, 0.86665); low = -0.1 - sqrt(0.09584² + 0.06665²) = -0.21673,
        // high = -0.1 + sqrt(0.08107² + 0.08882²) = 0.02025.
        assert!((unpaired.interval.0 + 0.21673).abs() < 0.0005, "{:?}", unpaired.interval);
        assert!((unpaired.interval.1 - 0.02025).abs() < 0.0005, "{:?}", unpaired.interval);
        assert!(unpaired.p_worse < 0.06 && unpaired.p_worse > 0.04, "{}", unpaired.p_worse);
        assert_eq!(unpaired_comparison(0, 0, 1, 1, 0.05), None);
    }
}
