//! How well the speed rule decides, by simulation: for a run-to-run noise (CV) and a true
//! change of the PR's median TPOT, how often the sequential test fails or passes a cell, how
//! many pairs it spends, and the same for the fixed-n design it replaces.
//!
//! Each run's median TPOT is the true value times `1 + e`, `e` normal with standard deviation
//! CV, independently for base and PR; a pair's log-ratio is therefore the log of the true
//! change plus noise of about `CV * sqrt(2)`. Pure and seeded: the same inputs give the same
//! table.

use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};
use statrs::distribution::{ContinuousCDF, Normal};

use crate::config::GateConfig;
use crate::speed::{Answer, CellContext, Pair, judge_cell};

/// One row of the table: one noise level and one true change.
#[derive(Debug, Clone, PartialEq)]
pub struct SimulationRow {
    pub cv: f64,
    pub true_change: f64,
    pub trials: usize,
    /// The sequential test.
    pub sequential: Outcomes,
    /// The fixed-n design: `n` pairs, fail when the mean log-ratio is over the loss line, with
    /// `n` the smallest that gives the zone's error rates (alpha at its low edge, beta at its
    /// high edge) for this noise.
    pub fixed: Outcomes,
    pub fixed_pairs: usize,
}

/// How a design did over the trials of one row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcomes {
    pub p_fail: f64,
    pub p_pass: f64,
    /// The share decided at the pair cap (low confidence).
    pub p_low_confidence: f64,
    pub mean_pairs: f64,
    pub p90_pairs: usize,
}

/// Simulates every (CV, true change) pair for `trials` cells each. With `calibrated`, the test
/// is given the log-ratio's true variance as the cell's known base-vs-base variance, as when the
/// runner has measured it; without, it has only the pairs' own variance.
pub fn simulate(
    config: &GateConfig,
    cvs: &[f64],
    changes: &[f64],
    trials: usize,
    seed: u64,
    calibrated: bool,
) -> Vec<SimulationRow> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let standard = Normal::standard();
    let mut rows = Vec::new();
    for &cv in cvs {
        let known_variance = calibrated.then_some(2.0 * cv * cv);
        let context = CellContext { cells: 1, gain_required: false, known_variance };
        let fixed_pairs = fixed_sample_size(config, cv);
        for &true_change in changes {
            let draw_pair = |rng: &mut SmallRng| {
                let mut noise =
                    || 1.0 + cv * standard.inverse_cdf(rng.random_range(1e-12..1.0 - 1e-12));
                let base = 20.0 * noise();
                let pr = 20.0 * (1.0 + true_change) * noise();
                Pair { base_tpot_ms: base, pr_tpot_ms: pr }
            };
            let mut sequential = Tally::default();
            let mut fixed = Tally::default();
            for _ in 0..trials {
                let mut pairs = Vec::new();
                let judgement = loop {
                    pairs.push(draw_pair(&mut rng));
                    let judgement = judge_cell(&pairs, config, &context);
                    if judgement.loss != Answer::Open {
                        break judgement;
                    }
                };
                sequential.add(judgement.loss, pairs.len());

                let pairs: Vec<Pair> = (0..fixed_pairs).map(|_| draw_pair(&mut rng)).collect();
                let mean = pairs
                    .iter()
                    .map(|pair| (pair.pr_tpot_ms / pair.base_tpot_ms).ln())
                    .sum::<f64>()
                    / pairs.len() as f64;
                let failed = mean > config.speed.threshold.get().ln_1p();
                fixed.add(
                    if failed {
                        Answer::Yes { confident: true }
                    } else {
                        Answer::No { confident: true }
                    },
                    fixed_pairs,
                );
            }
            rows.push(SimulationRow {
                cv,
                true_change,
                trials,
                sequential: sequential.outcomes(),
                fixed: fixed.outcomes(),
                fixed_pairs,
            });
        }
    }
    rows
}

/// The fixed-n t-test design with the sequential test's error rates: the smallest n for which
/// the t-test of the mean against the loss line (fail when the mean is over it) has error rates
/// alpha and beta at the zone's edges, with the log-ratio's standard deviation `cv * sqrt(2)`.
pub fn fixed_sample_size(config: &GateConfig, cv: f64) -> usize {
    let speed = &config.speed;
    let sigma = cv * 2f64.sqrt();
    let line = speed.threshold.get().ln_1p();
    let below = line - speed.low.ln_1p();
    let above = speed.high.ln_1p() - line;
    let quantile = |p: f64, n: usize| {
        statrs::distribution::StudentsT::new(0.0, 1.0, (n - 1) as f64)
            .map_or(f64::INFINITY, |t| t.inverse_cdf(p))
    };
    (2..=1000)
        .find(|&n| {
            let se = sigma / (n as f64).sqrt();
            quantile(1.0 - speed.alpha.get(), n) * se <= below
                && quantile(1.0 - speed.beta.get(), n) * se <= above
        })
        .unwrap_or(1000)
}

/// The family-wise error of `cells` cells judged together with no true change: how often any
/// of them fails, and the pairs each used on average.
pub fn family_error(
    config: &GateConfig,
    cv: f64,
    cells: usize,
    trials: usize,
    seed: u64,
    calibrated: bool,
) -> (f64, f64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let standard = Normal::standard();
    let known_variance = calibrated.then_some(2.0 * cv * cv);
    let context = CellContext { cells, gain_required: false, known_variance };
    let (mut any_failed, mut pairs_used) = (0usize, 0usize);
    for _ in 0..trials {
        let mut failed = false;
        for _ in 0..cells {
            let mut pairs = Vec::new();
            let judgement = loop {
                let mut noise =
                    || 1.0 + cv * standard.inverse_cdf(rng.random_range(1e-12..1.0 - 1e-12));
                pairs.push(Pair { base_tpot_ms: 20.0 * noise(), pr_tpot_ms: 20.0 * noise() });
                let judgement = judge_cell(&pairs, config, &context);
                if judgement.loss != Answer::Open {
                    break judgement;
                }
            };
            failed |= matches!(judgement.loss, Answer::Yes { .. });
            pairs_used += pairs.len();
        }
        any_failed += usize::from(failed);
    }
    (any_failed as f64 / trials.max(1) as f64, pairs_used as f64 / (trials * cells).max(1) as f64)
}

/// The table as Markdown.
pub fn markdown(rows: &[SimulationRow]) -> String {
    let mut out = String::from(
        "| CV | true change | sequential P(fail) | P(pass) | low confidence | mean pairs | p90 pairs | fixed n | fixed P(fail) | fixed P(pass) |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        out.push_str(&format!(
            "| {:.0}% | {:+.1}% | {:.1}% | {:.1}% | {:.1}% | {:.2} | {} | {} | {:.1}% | {:.1}% |\n",
            row.cv * 100.0,
            row.true_change * 100.0,
            row.sequential.p_fail * 100.0,
            row.sequential.p_pass * 100.0,
            row.sequential.p_low_confidence * 100.0,
            row.sequential.mean_pairs,
            row.sequential.p90_pairs,
            row.fixed_pairs,
            row.fixed.p_fail * 100.0,
            row.fixed.p_pass * 100.0,
        ));
    }
    out
}

#[derive(Default)]
struct Tally {
    fails: usize,
    passes: usize,
    low_confidence: usize,
    pairs: Vec<usize>,
}

impl Tally {
    fn add(&mut self, answer: Answer, pairs: usize) {
        match answer {
            Answer::Yes { confident } => {
                self.fails += 1;
                self.low_confidence += usize::from(!confident);
            }
            Answer::No { confident } => {
                self.passes += 1;
                self.low_confidence += usize::from(!confident);
            }
            Answer::Open => {}
        }
        self.pairs.push(pairs);
    }

    fn outcomes(mut self) -> Outcomes {
        let trials = self.pairs.len().max(1) as f64;
        self.pairs.sort_unstable();
        let p90_index = ((self.pairs.len() as f64 * 0.9).ceil() as usize).saturating_sub(1);
        Outcomes {
            p_fail: self.fails as f64 / trials,
            p_pass: self.passes as f64 / trials,
            p_low_confidence: self.low_confidence as f64 / trials,
            mean_pairs: self.pairs.iter().sum::<usize>() as f64 / trials,
            p90_pairs: self.pairs.get(p90_index).copied().unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_table_and_clear_cases_are_clear() {
        let config = GateConfig::defaults();
        let first = simulate(&config, &[0.02], &[0.0, 0.10], 200, 7, false);
        assert_eq!(first, simulate(&config, &[0.02], &[0.0, 0.10], 200, 7, false));
        assert!(first[0].sequential.p_pass > 0.9, "{:?}", first[0]);
        assert!(first[1].sequential.p_fail > 0.99, "{:?}", first[1]);
        assert!(first[1].sequential.mean_pairs < 4.0, "{:?}", first[1]);
    }

    #[test]
    fn the_fixed_design_grows_with_the_noise() {
        let config = GateConfig::defaults();
        let sizes: Vec<usize> =
            [0.01, 0.02, 0.03, 0.05].iter().map(|cv| fixed_sample_size(&config, *cv)).collect();
        assert!(sizes.windows(2).all(|pair| pair[0] < pair[1]), "{sizes:?}");
    }
}
