//! How well the accuracy rule decides, by simulation of repeats as the runner takes them: the
//! gate's own [`judge_benchmark`] asked after each repeat, until it is decided or at the cap.
//!
//! A benchmark of `questions` questions; each question has a probability of being answered
//! right on base, drawn once a trial from a Beta distribution with mean `accuracy` whose spread
//! makes two seeds of one side disagree on a share `disagreement` of the questions
//! (`2 E[p (1 - p)]`). The PR's probability is base's scaled by `1 - drop / a`, `a` the mean
//! of the drawn probabilities, so the PR's expected accuracy on these questions is `drop` below
//! base's (the rule judges the benchmark's own questions; a drop is never a gain). Each repeat draws every question's answer on
//! each side independently (no help from a shared seed: the hardest case for the rule), and
//! the paired counts are pooled over the repeats, as the verdict pools the records. A PR
//! judges `benchmarks` such benchmarks together (alpha divided over them), each with the
//! same drop. Pure and seeded: the same inputs give the same numbers.

use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};

use super::Target;
use crate::accuracy::{AccuracyAnswer, Looks, Pooled, judge_benchmark};
use crate::config::GateConfig;
use crate::stats::wilson;

/// One simulated kind of PR's accuracy benchmarks.
#[derive(Debug, Clone, PartialEq)]
pub struct AccuracyScenario {
    /// The benchmark's name: its tolerance is the gate's for it.
    pub benchmark: String,
    pub questions: u64,
    /// Base's expected accuracy.
    pub accuracy: f64,
    /// The share of questions two seeds of one side answer differently.
    pub disagreement: f64,
    /// PR minus base expected accuracy: -0.03 is a drop of three points.
    pub true_difference: f64,
    /// Benchmarks judged together (every model's); each has `true_difference`.
    pub benchmarks: usize,
    /// The cap of repeats; `None`: the gate's default (`accuracy.repeats`).
    pub cap: Option<u32>,
}

/// What the accuracy rule did over the trials of a scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AccuracyOutcomes {
    pub trials: usize,
    /// P(the PR fails: some benchmark is beyond its tolerance).
    pub p_pr_fail: f64,
    /// Per benchmark: failed, passed, undecided at the cap.
    pub p_beyond: f64,
    pub p_within: f64,
    pub p_undecided: f64,
    /// Benchmarks and PRs counted, for the binomial intervals.
    pub benchmarks: usize,
    /// Repeats a benchmark took (each is one run a side).
    pub mean_repeats: f64,
    pub p90_repeats: u32,
}

/// Simulates `trials` PRs of an accuracy scenario through the verdict's own rule.
pub fn simulate_accuracy(
    config: &GateConfig,
    scenario: &AccuracyScenario,
    trials: usize,
    seed: u64,
) -> AccuracyOutcomes {
    let mut rng = SmallRng::seed_from_u64(seed);
    let cap = scenario.cap.unwrap_or(config.accuracy_repeats);
    let (mut fails, mut beyond, mut within, mut undecided) = (0usize, 0usize, 0usize, 0usize);
    let mut repeats_taken: Vec<u32> = Vec::new();
    let shape = beta_shape(scenario.accuracy, scenario.disagreement);
    for _ in 0..trials {
        let mut failed = false;
        for _ in 0..scenario.benchmarks {
            let (answer, repeats) = simulate_benchmark(config, scenario, cap, shape, &mut rng);
            repeats_taken.push(repeats);
            match answer {
                AccuracyAnswer::Beyond => {
                    beyond += 1;
                    failed = true;
                }
                AccuracyAnswer::Within => within += 1,
                AccuracyAnswer::Undecided | AccuracyAnswer::Open => undecided += 1,
            }
        }
        fails += usize::from(failed);
    }
    let benchmarks = (trials * scenario.benchmarks).max(1);
    let share = |count: usize, of: usize| count as f64 / of.max(1) as f64;
    repeats_taken.sort_unstable();
    let p90_index = ((repeats_taken.len() as f64 * 0.9).ceil() as usize).saturating_sub(1);
    AccuracyOutcomes {
        trials,
        p_pr_fail: share(fails, trials),
        p_beyond: share(beyond, benchmarks),
        p_within: share(within, benchmarks),
        p_undecided: share(undecided, benchmarks),
        benchmarks,
        mean_repeats: share(repeats_taken.iter().map(|r| *r as usize).sum(), benchmarks),
        p90_repeats: repeats_taken.get(p90_index).copied().unwrap_or(0),
    }
}

/// One benchmark of `scenario` in one trial: its questions' probabilities drawn from `shape`
/// (the PR's scaled to the drop), then repeats until the rule decides or `cap`; the rule's
/// answer and the repeats it took.
fn simulate_benchmark(
    config: &GateConfig,
    scenario: &AccuracyScenario,
    cap: u32,
    shape: (f64, f64),
    rng: &mut SmallRng,
) -> (AccuracyAnswer, u32) {
    let base: Vec<f64> = (0..scenario.questions).map(|_| beta_draw(rng, shape)).collect();
    // The drop is the benchmark's own: its questions' expected accuracy, not the
    // population's, is what the rule judges.
    let realized = base.iter().sum::<f64>() / base.len().max(1) as f64;
    let scale = (1.0 + scenario.true_difference / realized.max(1e-9)).clamp(0.0, 1.0);
    let pr: Vec<f64> = base.iter().map(|p| p * scale).collect();
    let (mut base_only, mut pr_only, mut pairs) = (0u64, 0u64, 0u64);
    let mut repeats = 0u32;
    loop {
        for (p, q) in base.iter().zip(&pr) {
            let base_right = rng.random::<f64>() < *p;
            let pr_right = rng.random::<f64>() < *q;
            base_only += u64::from(base_right && !pr_right);
            pr_only += u64::from(pr_right && !base_right);
        }
        pairs += scenario.questions;
        repeats += 1;
        let looks = Looks { repeats, cap, benchmarks: scenario.benchmarks };
        let pooled = Pooled::Paired { base_only, pr_only, pairs };
        let answer = judge_benchmark(config, &scenario.benchmark, pooled, looks)
            .map_or(AccuracyAnswer::Undecided, |judgement| judgement.answer);
        if answer != AccuracyAnswer::Open {
            return (answer, repeats);
        }
    }
}

/// The Beta distribution's `(a, b)` with mean `accuracy` whose `2 E[p (1 - p)]` is
/// `disagreement`: `E[p (1 - p)] = m (1 - m) k / (k + 1)` with `k = a + b`.
fn beta_shape(accuracy: f64, disagreement: f64) -> (f64, f64) {
    let m = accuracy.clamp(1e-3, 1.0 - 1e-3);
    let share = (disagreement / (2.0 * m * (1.0 - m))).clamp(1e-3, 1.0 - 1e-3);
    let k = share / (1.0 - share);
    (m * k, (1.0 - m) * k)
}

/// A Beta(a, b) draw, as `X / (X + Y)` of two Gamma draws.
fn beta_draw(rng: &mut SmallRng, (a, b): (f64, f64)) -> f64 {
    let x = gamma_draw(rng, a);
    let y = gamma_draw(rng, b);
    if x + y > 0.0 { x / (x + y) } else { f64::from(u8::from(rng.random::<bool>())) }
}

/// A Gamma(shape, 1) draw: Marsaglia and Tsang's method, with the boost `U^(1/shape)` for a
/// shape below one.
fn gamma_draw(rng: &mut SmallRng, shape: f64) -> f64 {
    if shape < 1.0 {
        let u: f64 = rng.random_range(1e-300..1.0);
        return gamma_draw(rng, shape + 1.0) * u.powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = super::normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u: f64 = rng.random_range(1e-300..1.0);
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// A benchmark size the targets measure: its name (for its tolerance), questions, base's
/// accuracy and the two seeds' disagreement.
struct Size {
    label: &'static str,
    benchmark: &'static str,
    questions: u64,
    accuracy: f64,
    disagreement: f64,
}

/// GSM8K, GPQA-Diamond and AIME, as their sizes and a typical model's spread over seeds.
const SIZES: [Size; 3] = [
    Size {
        label: "GSM8K-sized (1,319 q., tolerance 1.5 pp)",
        benchmark: "gsm8k",
        questions: 1319,
        accuracy: 0.90,
        disagreement: 0.10,
    },
    Size {
        label: "GPQA-sized (198 q., tolerance 5 pp)",
        benchmark: "gpqa-diamond",
        questions: 198,
        accuracy: 0.60,
        disagreement: 0.30,
    },
    Size {
        label: "AIME-sized (30 q., tolerance 10 pp)",
        benchmark: "aime26",
        questions: 30,
        accuracy: 0.50,
        disagreement: 0.30,
    },
];

/// The accuracy rows of the targets: for each size, a PR with no change (A/A) and
/// drops of 0.5, 1 and 2 tolerances, two benchmarks judged together. Each row's measured rate
/// has its 95% Wilson interval.
pub fn targets(config: &GateConfig, trials: usize, seed: u64) -> Vec<Target> {
    SIZES
        .iter()
        .enumerate()
        .flat_map(|(at, size)| {
            size_rows(config, size, trials, seed.wrapping_add(1000 + 10 * at as u64))
        })
        .collect()
}

/// The rows of one benchmark size: A/A, and drops of 0.5, 1 and 2 tolerances, each simulated
/// with `seed` plus its own salt.
fn size_rows(config: &GateConfig, size: &Size, trials: usize, seed: u64) -> Vec<Target> {
    let alpha = config.accuracy_alpha.get();
    let beta = config.accuracy_beta.get();
    let run = |tolerances: f64, salt: u64| {
        simulate_drop(config, size, tolerances, trials, seed.wrapping_add(salt))
    };
    let aa = run(0.0, 0);
    let half = run(0.5, 1);
    let one = run(1.0, 2);
    let two = run(2.0, 3);
    let aime = size.questions < 100;
    let label = size.label;
    vec![
        row(
            format!("{label}, A/A: false-fail per PR (2 benchmarks)"),
            aa.p_pr_fail,
            aa.trials,
            (alpha, true),
            &aa,
        ),
        row(
            format!("{label}, A/A: decided pass per benchmark"),
            aa.p_within,
            aa.benchmarks,
            (if aime { 0.0 } else { 0.9 }, false),
            &aa,
        ),
        row(
            format!("{label}, drop of 0.5× tolerance: P(fail) per benchmark"),
            half.p_beyond,
            half.benchmarks,
            (alpha / 2.0, true),
            &half,
        ),
        row(
            format!("{label}, drop of 1× tolerance: P(fail) per benchmark, at most alpha"),
            one.p_beyond,
            one.benchmarks,
            (alpha / 2.0, true),
            &one,
        ),
        row(
            format!("{label}, drop of 2× tolerance: P(fail) per benchmark"),
            two.p_beyond,
            two.benchmarks,
            (if aime { 0.0 } else { 0.95 }, false),
            &two,
        ),
        row(
            format!(
                "{label}, drop of 2× tolerance: P(pass) per benchmark; undecided is not a pass"
            ),
            two.p_within,
            two.benchmarks,
            (beta, true),
            &two,
        ),
    ]
}

/// `trials` PRs of two benchmarks of `size`, each `tolerances` of its tolerance worse on the PR.
fn simulate_drop(
    config: &GateConfig,
    size: &Size,
    tolerances: f64,
    trials: usize,
    seed: u64,
) -> AccuracyOutcomes {
    let tolerance = config.accuracy_tolerance(size.benchmark).get();
    let scenario = AccuracyScenario {
        benchmark: size.benchmark.to_owned(),
        questions: size.questions,
        accuracy: size.accuracy,
        disagreement: size.disagreement,
        true_difference: -tolerances * tolerance,
        benchmarks: 2,
        cap: None,
    };
    simulate_accuracy(config, &scenario, trials, seed)
}

/// A rate measured over `of` trials, with its Wilson interval and the repeats it took.
fn row(
    condition: String,
    rate: f64,
    of: usize,
    bound: (f64, bool),
    o: &AccuracyOutcomes,
) -> Target {
    let count = (rate * of as f64).round() as u64;
    Target {
        condition: format!(
            "{condition} (mean repeats {:.1}, p90 {})",
            o.mean_repeats, o.p90_repeats
        ),
        measured: rate,
        bound,
        percent: true,
        undecided: Some(o.p_undecided),
        interval: wilson(count, of as u64, 0.05),
    }
}

#[cfg(test)]
mod tests;
