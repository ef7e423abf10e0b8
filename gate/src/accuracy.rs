//! The accuracy rule: a benchmark judged from its repeats, sequentially, and the runner's
//! "another repeat?" question.
//!
//! Each side runs a benchmark once per repeat, repeat `r` with seed `r`; base's repeat `r` and
//! the PR's are paired question by question (same questions, same seed), and the repeats so
//! far are pooled into one paired comparison: Tango's score interval over every (question,
//! repeat) pair, or, without per-question results, Newcombe's over the pooled totals. The
//! question it answers is about the benchmark's own questions: is the PR's expected accuracy
//! on them (over seeds) below base's by more than the tolerance? Given the questions, the
//! pairs of different repeats are independent; the pooled discordance overstates each pair's
//! variance (its mean of squares is at least its square of means), so the interval keeps its
//! level. A server that answers the same whatever the seed adds pairs that say nothing new,
//! and its difference is then known exactly: the interval is conservative.
//!
//! The looks are the repeats, up to the cap base's recipe sets (`repeats`, else the gate's
//! `accuracy.repeats`). The error rates are spent over them by the union bound (each look's
//! one-sided bounds at `alpha / (benchmarks * cap)` and `beta / cap`), so for any number of
//! looks taken:
//! - P(fail | the PR is at most `tolerance` below base) <= alpha over the benchmarks judged
//!   (alpha per PR);
//! - P(pass | the PR is `beta-at` tolerances below base or more) <= beta, per benchmark.
//!
//! At a look the benchmark **fails** when the upper alpha bound is below `-tolerance`,
//! **passes** when the lower beta bound is above `-beta-at * tolerance` (the futility side: a
//! drop of `beta-at` tolerances is implausible), and otherwise needs another repeat; at the
//! cap it is **undecided**, which is not a pass (the verdict's `error`). Between one and
//! `beta-at` tolerances either answer may come: the indifference zone.
//!
//! A benchmark's evidence is read once, here ([`BenchmarkRepeats`]): the verdict judges it and
//! the runner asks whether it needs another repeat from the same pairing.
//!
//! What it leaves to others: which records are a benchmark's (the verdict, the runner),
//! running the repeats (the runner), the intervals themselves ([`crate::stats`]).

use std::collections::BTreeMap;

use crate::config::GateConfig;
use crate::evidence::{Evidence, Outcome, QuestionResult, Side};
use crate::stats::{ProportionComparison, paired_comparison, unpaired_comparison};
use crate::to_decide::{Samples, first_deciding};

/// The repeats of a benchmark pooled: the paired discordant counts over every (question,
/// repeat) both sides answered, or the unpaired totals when a side has no per-question results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooled {
    Paired {
        /// Base right, PR wrong.
        base_only: u64,
        /// PR right, base wrong.
        pr_only: u64,
        /// (question, repeat) pairs.
        pairs: u64,
    },
    Unpaired {
        base_correct: u64,
        base_questions: u64,
        pr_correct: u64,
        pr_questions: u64,
    },
}

/// One side's result of one repeat.
#[derive(Debug, Clone, Copy)]
pub struct SideResult<'a> {
    pub questions: u64,
    pub correct: u64,
    pub per_question: Option<&'a [QuestionResult]>,
}

/// One benchmark's repeats as its evidence has them: each side's results by repeat index, and
/// the largest cap and family its records name (a record without a repeat is repeat 0 of a cap
/// of 1).
#[derive(Debug, Default)]
pub struct BenchmarkRepeats<'a> {
    pub base: BTreeMap<u32, SideResult<'a>>,
    pub pr: BTreeMap<u32, SideResult<'a>>,
    pub cap: u32,
    pub family: u32,
}

impl<'a> BenchmarkRepeats<'a> {
    /// Adds `record` when it is an accuracy result of a side; which benchmark's it is, is the
    /// caller's to check.
    pub fn add(&mut self, record: &'a Evidence) {
        let Outcome::Accuracy { questions, correct, per_question, repeat, .. } = &record.outcome
        else {
            return;
        };
        let result = SideResult {
            questions: *questions,
            correct: *correct,
            per_question: per_question.as_deref(),
        };
        let index = repeat.map_or(0, |repeat| repeat.index);
        self.cap = self.cap.max(repeat.map_or(1, |repeat| repeat.cap));
        self.family = self.family.max(repeat.and_then(|repeat| repeat.family).unwrap_or(0));
        match record.side {
            Side::Base => self.base.insert(index, result),
            Side::Pr => self.pr.insert(index, result),
            Side::Both => None,
        };
    }

    /// The repeats both sides have, paired by index, in index order.
    pub fn paired(&self) -> Vec<(SideResult<'a>, SideResult<'a>)> {
        self.base.iter().filter_map(|(index, base)| Some((*base, *self.pr.get(index)?))).collect()
    }
}

/// Pools repeats, each a (base, PR) pair of one index: paired when every repeat's two sides
/// have per-question results in common, else the unpaired totals. `None` without a repeat.
pub fn pool(repeats: &[(SideResult<'_>, SideResult<'_>)]) -> Option<Pooled> {
    if repeats.is_empty() {
        return None;
    }
    let paired: Option<Vec<(u64, u64, u64)>> = repeats
        .iter()
        .map(|(base, pr)| paired_counts(base.per_question, pr.per_question))
        .collect();
    Some(match paired {
        Some(counts) => Pooled::Paired {
            base_only: counts.iter().map(|c| c.0).sum(),
            pr_only: counts.iter().map(|c| c.1).sum(),
            pairs: counts.iter().map(|c| c.2).sum(),
        },
        // A question base answered and the PR did not counts against the PR: out of the
        // larger count (a PR cannot lift its rate by dropping the questions it gets wrong).
        None => Pooled::Unpaired {
            base_correct: repeats.iter().map(|(base, _)| base.correct).sum(),
            base_questions: repeats.iter().map(|(base, _)| base.questions).sum(),
            pr_correct: repeats.iter().map(|(_, pr)| pr.correct).sum(),
            pr_questions: repeats.iter().map(|(base, pr)| pr.questions.max(base.questions)).sum(),
        },
    })
}

/// The discordant counts of two per-question results over base's questions: (base right and
/// PR wrong, base wrong and PR right, base's questions). A question base answered that the PR
/// did not counts as the PR's wrong answer (a PR cannot lift its score by dropping the
/// questions it gets wrong); one only the PR answered is not judged. `None` when either side
/// lacks per-question results or they share no question.
pub fn paired_counts(
    base: Option<&[QuestionResult]>,
    pr: Option<&[QuestionResult]>,
) -> Option<(u64, u64, u64)> {
    let pr: BTreeMap<&str, bool> = pr?.iter().map(|q| (q.id.as_str(), q.correct)).collect();
    let (mut base_only, mut pr_only, mut questions, mut common) = (0, 0, 0, 0);
    for question in base? {
        questions += 1;
        let pr_correct = pr.get(question.id.as_str()).copied();
        common += u64::from(pr_correct.is_some());
        match (question.correct, pr_correct.unwrap_or(false)) {
            (true, false) => base_only += 1,
            (false, true) => pr_only += 1,
            _ => {}
        }
    }
    (common > 0).then_some((base_only, pr_only, questions))
}

impl Pooled {
    /// These counts as if every one of `repeats` repeats looked like the average of the
    /// `judged` so far: each count scaled (rounded down).
    fn scaled(self, repeats: u32, judged: u32) -> Pooled {
        let scale = |count: u64| count * u64::from(repeats) / u64::from(judged);
        match self {
            Pooled::Paired { base_only, pr_only, pairs } => Pooled::Paired {
                base_only: scale(base_only),
                pr_only: scale(pr_only),
                pairs: scale(pairs),
            },
            Pooled::Unpaired { base_correct, base_questions, pr_correct, pr_questions } => {
                Pooled::Unpaired {
                    base_correct: scale(base_correct),
                    base_questions: scale(base_questions),
                    pr_correct: scale(pr_correct),
                    pr_questions: scale(pr_questions),
                }
            }
        }
    }

    /// PR minus base, as a fraction.
    pub fn difference(&self) -> Option<f64> {
        match *self {
            Pooled::Paired { base_only, pr_only, pairs } => {
                (pairs > 0).then(|| (pr_only as f64 - base_only as f64) / pairs as f64)
            }
            Pooled::Unpaired { base_correct, base_questions, pr_correct, pr_questions } => {
                (base_questions > 0 && pr_questions > 0).then(|| {
                    pr_correct as f64 / pr_questions as f64
                        - base_correct as f64 / base_questions as f64
                })
            }
        }
    }

    /// The comparison with each bound one-sided at `alpha`, its p-value against `tolerance`.
    pub fn compare(&self, alpha: f64, tolerance: f64) -> Option<ProportionComparison> {
        match *self {
            Pooled::Paired { base_only, pr_only, pairs } => {
                paired_comparison(base_only, pr_only, pairs, alpha, tolerance)
            }
            Pooled::Unpaired { base_correct, base_questions, pr_correct, pr_questions } => {
                unpaired_comparison(
                    base_correct,
                    base_questions,
                    pr_correct,
                    pr_questions,
                    alpha,
                    tolerance,
                )
            }
        }
    }
}

/// Where the benchmark's looks stand: the repeats judged (pairs of one base and one PR
/// repeat), the cap, and the benchmarks the PR judges together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Looks {
    pub repeats: u32,
    pub cap: u32,
    pub benchmarks: usize,
}

/// The benchmark's answer so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccuracyAnswer {
    /// Neither bound passed and the cap is not reached: another repeat is needed.
    Open,
    /// The PR is below base by more than the tolerance: fail, at alpha.
    Beyond,
    /// The PR is not `beta-at` tolerances below base: pass, at beta.
    Within,
    /// The cap was reached with neither bound passed: not a pass.
    Undecided,
}

/// The most repeats [`Samples`] looks for.
pub const TO_DECIDE_LIMIT: usize = 1000;

/// Everything the rule says about one benchmark at its last look.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BenchmarkJudgement {
    pub answer: AccuracyAnswer,
    /// The pooled comparison with each bound one-sided at the look's alpha: the interval
    /// shown and the fail side's test.
    pub comparison: ProportionComparison,
    /// The lower bound at the look's beta: the pass side's test.
    pub pass_bound: f64,
    /// The tolerance, and the drop (a fraction) the pass side guards against.
    pub tolerance: f64,
    pub beta_drop: f64,
    /// The per-look levels: alpha over the benchmarks and the cap; beta over the cap.
    pub alpha_look: f64,
    pub beta_look: f64,
    /// The per-benchmark error rates over all looks: P(fail | within the tolerance), P(pass |
    /// `beta_drop` below base).
    pub alpha: f64,
    pub beta: f64,
    pub looks: Looks,
    /// What would decide it, when the cap left it [`AccuracyAnswer::Undecided`].
    pub to_decide: Option<Samples>,
}

/// The levels of one look: alpha over the benchmarks and the cap, beta over the cap.
fn look_levels(config: &GateConfig, looks: Looks) -> (f64, f64) {
    let cap = f64::from(looks.cap.max(1));
    let alpha = config.accuracy_alpha.get() / looks.benchmarks.max(1) as f64;
    (alpha / cap, config.accuracy_beta.get() / cap)
}

/// Judges a benchmark from its pooled repeats. `None` when nothing can be computed (no
/// questions in common, say).
pub fn judge_benchmark(
    config: &GateConfig,
    benchmark: &str,
    pooled: Pooled,
    looks: Looks,
) -> Option<BenchmarkJudgement> {
    let tolerance = config.accuracy_tolerance(benchmark).get();
    let beta_drop = config.accuracy_beta_at * tolerance;
    let (alpha_look, beta_look) = look_levels(config, looks);
    let comparison = pooled.compare(alpha_look, tolerance)?;
    let pass_bound = pooled.compare(beta_look, tolerance)?.interval.0;
    let answer = decide(comparison.interval.1, pass_bound, tolerance, beta_drop, looks);
    let to_decide = (answer == AccuracyAnswer::Undecided)
        .then(|| to_decide(config, pooled, looks, tolerance, beta_drop));
    Some(BenchmarkJudgement {
        answer,
        comparison,
        pass_bound,
        tolerance,
        beta_drop,
        alpha_look,
        beta_look,
        alpha: config.accuracy_alpha.get() / looks.benchmarks.max(1) as f64,
        beta: config.accuracy_beta.get(),
        looks,
        to_decide,
    })
}

/// The decision at one look, from its two bounds: the fail side first (a drop known to be
/// beyond the tolerance fails even when it is known to be under `beta_drop`).
fn decide(
    upper: f64,
    pass_bound: f64,
    tolerance: f64,
    beta_drop: f64,
    looks: Looks,
) -> AccuracyAnswer {
    if upper < -tolerance {
        AccuracyAnswer::Beyond
    } else if pass_bound > -beta_drop {
        AccuracyAnswer::Within
    } else if looks.repeats >= looks.cap {
        AccuracyAnswer::Undecided
    } else {
        AccuracyAnswer::Open
    }
}

/// The repeats at which a bound would pass if every further repeat looked like the average of
/// those so far (the counts scaled), with the cap raised to that many.
fn to_decide(
    config: &GateConfig,
    pooled: Pooled,
    looks: Looks,
    tolerance: f64,
    beta_drop: f64,
) -> Samples {
    let judged = looks.repeats.max(1);
    let decides = |repeats: u32| {
        let looks = Looks { repeats, cap: repeats, ..looks };
        let (alpha_look, beta_look) = look_levels(config, looks);
        let pooled = pooled.scaled(repeats, judged);
        let upper = pooled.compare(alpha_look, tolerance).map(|c| c.interval.1);
        let lower = pooled.compare(beta_look, tolerance).map(|c| c.interval.0);
        match (upper, lower) {
            (Some(upper), Some(lower)) => {
                decide(upper, lower, tolerance, beta_drop, looks) != AccuracyAnswer::Undecided
            }
            _ => false,
        }
    };
    let have = looks.repeats as usize;
    let needed = first_deciding(have, TO_DECIDE_LIMIT, |n| decides(n as u32));
    Samples { needed, have }
}

/// The runner's question between repeats: does this benchmark need another one? Only while it
/// is open: a decided benchmark stops, and the cap ends the rest.
pub fn needs_another_repeat(
    config: &GateConfig,
    benchmark: &str,
    pooled: Pooled,
    looks: Looks,
) -> bool {
    looks.repeats < looks.cap
        && judge_benchmark(config, benchmark, pooled, looks)
            .is_none_or(|judgement| judgement.answer == AccuracyAnswer::Open)
}

#[cfg(test)]
mod tests;
