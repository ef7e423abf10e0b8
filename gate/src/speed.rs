//! E2E speed: is a PR's median TPOT at one concurrency (a "cell") worse than base by more than
//! the allowed loss, and — for `[Perf]` and `[Feat]` PRs — better by the required gain?
//!
//! Base and PR runs are paired (run side by side on one node); each pair gives the log-ratio
//! `ln(pr / base)`, which is the same in milliseconds or seconds. Each question is a sequential
//! probability ratio test with an indifference zone around its threshold, so a clear cell is
//! decided after a few pairs and only an unclear one gets more, up to a cap where it is decided
//! by its mean and marked low-confidence. The runner asks [`needs_another_pair`] between pairs.

use crate::config::{GateConfig, SequentialConfig};
use crate::stats::{Sprt, SprtOutcome, SprtState, mean, mean_interval, median};

/// The shown interval of a cell's change is a two-sided 95% one, whatever the test's error
/// rates: it tells the reader how precise the change is; the decision is the sequential test's.
pub const INTERVAL_ALPHA: f64 = 0.05;

/// One base run and one PR run, side by side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    pub base_tpot_ms: f64,
    pub pr_tpot_ms: f64,
}

/// What a cell is judged with besides its pairs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CellContext {
    /// How many cells are judged together: the error rates are divided by it (Bonferroni).
    pub cells: usize,
    /// Whether the PR must show a gain (its title type is `[Perf]` or `[Feat]`).
    pub gain_required: bool,
    /// The known variance of `ln(base / base)` at this concurrency, when calibrated.
    pub known_variance: Option<f64>,
}

/// The answer to one question about a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Not decided yet: another pair is needed.
    Open,
    /// Yes (a loss over the limit; a gain of the size required).
    Yes { confident: bool },
    /// No.
    No { confident: bool },
}

/// Everything the gate says about one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct CellJudgement {
    pub pairs: usize,
    pub base_median_ms: Option<f64>,
    pub pr_median_ms: Option<f64>,
    /// The PR's TPOT relative to base, `exp(mean log-ratio) - 1`: +0.03 is 3% slower.
    pub change: Option<f64>,
    /// Its two-sided 95% interval ([`INTERVAL_ALPHA`]).
    pub change_interval: Option<(f64, f64)>,
    /// Is the loss over the limit?
    pub loss: Answer,
    /// Is the gain at least the required one? `None` when no gain is required.
    pub gain: Option<Answer>,
}

/// Judges one cell from its pairs so far.
pub fn judge_cell(pairs: &[Pair], config: &GateConfig, context: &CellContext) -> CellJudgement {
    let log_ratios: Vec<f64> =
        pairs.iter().map(|pair| (pair.pr_tpot_ms / pair.base_tpot_ms).ln()).collect();
    let cells = context.cells.max(1) as f64;
    let floor = 2.0 * config.speed.min_cv.get().powi(2);
    let known_variance = Some(context.known_variance.map_or(floor, |known| known.max(floor)));
    let loss = answer(sprt(&config.speed, cells, Direction::Loss).run(&log_ratios, known_variance));
    let gain = context.gain_required.then(|| {
        let gains: Vec<f64> = log_ratios.iter().map(|ratio| -ratio).collect();
        answer(sprt(&config.gain.test, cells, Direction::Gain).run(&gains, known_variance))
    });
    let base: Vec<f64> = pairs.iter().map(|pair| pair.base_tpot_ms).collect();
    let pr: Vec<f64> = pairs.iter().map(|pair| pair.pr_tpot_ms).collect();
    CellJudgement {
        pairs: pairs.len(),
        base_median_ms: median(&base),
        pr_median_ms: median(&pr),
        change: mean(&log_ratios).map(|m| m.exp() - 1.0),
        change_interval: mean_interval(&log_ratios, INTERVAL_ALPHA)
            .map(|(low, high)| (low.exp() - 1.0, high.exp() - 1.0)),
        loss,
        gain,
    }
}

/// The runner's question between pairs: does this cell need another pair?
pub fn needs_another_pair(pairs: &[Pair], config: &GateConfig, context: &CellContext) -> bool {
    let judgement = judge_cell(pairs, config, context);
    judgement.loss == Answer::Open || judgement.gain == Some(Answer::Open)
}

/// Which way a fraction is measured on the log-ratio.
#[derive(Clone, Copy)]
enum Direction {
    /// A loss of `x`: PR TPOT is `1 + x` times base's, so `ln(pr / base) = ln(1 + x)`.
    Loss,
    /// A gain of `x`: PR TPOT is `1 - x` times base's, so `ln(base / pr) = -ln(1 - x)`.
    Gain,
}

fn sprt(config: &SequentialConfig, cells: f64, direction: Direction) -> Sprt {
    let log = |fraction: f64| match direction {
        Direction::Loss => fraction.ln_1p(),
        Direction::Gain => -(-fraction).ln_1p(),
    };
    Sprt {
        h0: log(config.low),
        h1: log(config.high),
        alpha: config.alpha.get() / cells,
        beta: config.beta.get(),
        min_samples: config.min_pairs,
        max_samples: config.max_pairs,
        line: log(config.threshold.get()),
    }
}

fn answer(state: SprtState) -> Answer {
    match state.outcome {
        SprtOutcome::Undecided => Answer::Open,
        SprtOutcome::AcceptH1 { confident } => Answer::Yes { confident },
        SprtOutcome::AcceptH0 { confident } => Answer::No { confident },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(changes: &[f64]) -> Vec<Pair> {
        changes
            .iter()
            .map(|change| Pair { base_tpot_ms: 20.0, pr_tpot_ms: 20.0 * (1.0 + change) })
            .collect()
    }

    fn check(changes: &[f64], gain_required: bool) -> String {
        let config = GateConfig::defaults();
        let context = CellContext { cells: 1, gain_required, known_variance: None };
        let judgement = judge_cell(&pairs(changes), &config, &context);
        format!(
            "loss {:?}, gain {:?}, change {:+.2}%, more {}",
            judgement.loss,
            judgement.gain,
            judgement.change.unwrap_or(f64::NAN) * 100.0,
            needs_another_pair(&pairs(changes), &config, &context)
        )
    }

    #[test]
    fn cells_are_decided_by_how_clear_they_are() {
        let cases: [(&[f64], bool, &str); 7] = [
            (
                &[0.001, -0.002, 0.0],
                false,
                "loss No { confident: true }, gain None, change -0.03%, more false",
            ),
            (
                &[0.06, 0.061, 0.059],
                false,
                "loss Yes { confident: true }, gain None, change +6.00%, more false",
            ),
            (&[0.03, 0.0, 0.03], false, "loss Open, gain None, change +1.99%, more true"),
            (
                &[-0.10, -0.101, -0.099],
                true,
                "loss No { confident: true }, gain Some(Yes { confident: true }), change -10.00%, more false",
            ),
            (
                &[-0.01, -0.011, -0.009],
                true,
                "loss No { confident: true }, gain Some(No { confident: true }), change -1.00%, more false",
            ),
            (
                &[-0.05, -0.03, -0.07, -0.04, -0.06, -0.05, -0.02, -0.08, -0.05, -0.05],
                true,
                "loss No { confident: true }, gain Some(Yes { confident: false }), change -5.01%, more false",
            ),
            (
                &[-0.01, -0.09, -0.01, -0.09, -0.01, -0.09, -0.01, -0.09, -0.01, -0.09],
                true,
                "loss No { confident: true }, gain Some(No { confident: false }), change -5.08%, more false",
            ),
        ];
        for (changes, gain, expected) in cases {
            assert_eq!(check(changes, gain), expected, "{changes:?}");
        }
    }

    #[test]
    fn more_cells_need_stronger_evidence_to_fail() {
        let config = GateConfig::defaults();
        let data = pairs(&[0.07, 0.01, 0.05, 0.03]);
        let one = judge_cell(
            &data,
            &config,
            &CellContext { cells: 1, gain_required: false, known_variance: None },
        );
        let many = judge_cell(
            &data,
            &config,
            &CellContext { cells: 40, gain_required: false, known_variance: None },
        );
        assert_eq!(one.loss, Answer::Yes { confident: true });
        assert_eq!(many.loss, Answer::Open);
    }
}
