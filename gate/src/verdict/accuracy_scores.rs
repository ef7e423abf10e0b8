//! The accuracy section: each benchmark's score, base against PR, through the gate's accuracy
//! test, with what would decide an undecided benchmark. The statistics are
//! `crate::accuracy`'s; this module only turns its answer into verdict items.

use std::collections::BTreeMap;

use crate::accuracy;
use crate::accuracy::{
    AccuracyAnswer, BenchmarkJudgement, BenchmarkRepeats, Looks, Pooled, judge_benchmark,
};
use crate::evidence::{Check, Outcome};
use crate::job::Part;
use crate::to_decide::Samples;

use super::{AccuracyRepeats, Completion, Item, Judge, Numbers, SectionName, State};

impl<'a> Judge<'a> {
    pub(super) fn accuracy(&mut self, model: &str) {
        let mut sides: BTreeMap<String, BenchmarkRepeats<'_>> = BTreeMap::new();
        for record in self.records(Some(model), Check::Accuracy) {
            if let Outcome::Accuracy { benchmark, .. } = &record.outcome {
                sides.entry(benchmark.to_ascii_lowercase()).or_default().add(record);
            }
        }
        for (benchmark, records) in sides {
            if records.base.is_empty() || records.pr.is_empty() {
                // The other side's not-run record, when there is one, is its item already.
                let not_run = self.records(Some(model), Check::Accuracy).iter().any(|record| {
                    matches!(&record.outcome, Outcome::NotRun { subject: Some(subject), .. }
                        if Part::parse(subject).as_ref().and_then(Part::benchmark)
                            == Some(benchmark.as_str()))
                });
                if not_run {
                    continue;
                }
                self.push(
                    SectionName::Accuracy,
                    Item::worded(
                        Some(model.to_owned()),
                        format!("accuracy {benchmark}"),
                        State::Pending,
                        "every planned check reports",
                        "only one side has reported",
                    ),
                );
                continue;
            }
            if let Some(item) = self.accuracy_item(model, &benchmark, &records) {
                self.push(SectionName::Accuracy, item);
            }
        }
    }

    /// One benchmark's item from its repeats (those both sides have, paired by index).
    fn accuracy_item(
        &self,
        model: &str,
        benchmark: &str,
        records: &BenchmarkRepeats<'_>,
    ) -> Option<Item> {
        let repeats = records.paired();
        let looks = Looks {
            repeats: u32::try_from(repeats.len()).unwrap_or(u32::MAX),
            cap: records.cap,
            benchmarks: self.accuracy_family.max(records.family as usize),
        };
        let pooled = accuracy::pool(&repeats)?;
        let judgement = judge_benchmark(self.config, benchmark, pooled, looks)?;
        let comparison = judgement.comparison;
        let tolerance = judgement.tolerance;
        let paired = matches!(pooled, Pooled::Paired { .. });
        let (state, mut summary) = answer_words(&judgement, looks, self.completion);
        let base_accuracy = ratio(repeats.iter().map(|(base, _)| (base.correct, base.questions)));
        let pr_accuracy = ratio(repeats.iter().map(|(_, pr)| (pr.correct, pr.questions)));
        let questions = repeats.first().map_or(0, |(_, pr)| pr.questions);
        summary.push_str(&format!(
            "; base {}%, PR {}%, difference {} [{}, {}] ({:.2}% interval, {}) over {} questions",
            points(base_accuracy),
            points(pr_accuracy),
            signed_points(comparison.difference),
            signed_points(comparison.interval.0),
            signed_points(comparison.interval.1),
            (1.0 - 2.0 * judgement.alpha_look) * 100.0,
            if paired { "paired, Tango's score" } else { "unpaired, Newcombe's score" },
            questions,
        ));
        Some(Item {
            model: Some(model.to_owned()),
            check: format!("accuracy {benchmark}"),
            state,
            rule: "accuracy may not drop below base by more than the benchmark's tolerance; a benchmark still undecided at its cap of repeats is not a pass".to_owned(),
            summary,
            numbers: Some(Numbers::Accuracy {
                benchmark: benchmark.to_owned(),
                base: base_accuracy,
                pr: pr_accuracy,
                difference: comparison.difference,
                interval: comparison.interval,
                questions,
                paired,
                p_value: comparison.p_beyond,
                tolerance,
                alpha: Some(judgement.alpha_look),
                repeats: Some(repeats_numbers(&judgement, looks)),
            }),
        })
    }
}

/// The repeats behind a benchmark's judgement: how many were judged of the cap, the error
/// rates spent, and how many more would decide it.
fn repeats_numbers(judgement: &BenchmarkJudgement, looks: Looks) -> AccuracyRepeats {
    AccuracyRepeats {
        judged: looks.repeats,
        cap: looks.cap,
        alpha: judgement.alpha,
        beta: judgement.beta,
        beta_drop: judgement.beta_drop,
        pass_bound: judgement.pass_bound,
        repeats_to_decide: judgement.to_decide.and_then(|t| t.needed),
        more_repeats: judgement.to_decide.and_then(|t| t.more()),
    }
}

/// The benchmark's state, and its answer in words with its repeats: below base by more than
/// the tolerance fails, not the guarded drop below passes, undecided at the cap is an error
/// and open is pending (an error once the run is over).
fn answer_words(
    judgement: &BenchmarkJudgement,
    looks: Looks,
    completion: Completion,
) -> (State, String) {
    let comparison = judgement.comparison;
    let tolerance = judgement.tolerance;
    let p_value = if comparison.p_beyond < 0.001 {
        "p < 0.001".to_owned()
    } else {
        format!("p = {:.3}", comparison.p_beyond)
    };
    let repeats_text = format!(
        "{} of at most {} repeat{}",
        looks.repeats,
        looks.cap,
        if looks.cap == 1 { "" } else { "s" }
    );
    match judgement.answer {
        AccuracyAnswer::Beyond => (
            State::Fail,
            format!(
                "the PR is below base by more than the tolerance of {} points ({p_value}, {repeats_text})",
                points(tolerance)
            ),
        ),
        AccuracyAnswer::Within => (
            State::Pass,
            format!(
                "not {} points below base (the lower bound {} is above -{}; {repeats_text})",
                points(judgement.beta_drop),
                signed_points(judgement.pass_bound),
                points(judgement.beta_drop)
            ),
        ),
        AccuracyAnswer::Undecided => (
            State::Error,
            format!(
                "undecided at the cap of {} repeats, low confidence: not a pass; the interval holds -{} points ({p_value}) and its lower bound {} is not above -{} points; {}",
                looks.cap,
                points(tolerance),
                signed_points(judgement.pass_bound),
                points(judgement.beta_drop),
                undecided_words(judgement.to_decide),
            ),
        ),
        AccuracyAnswer::Open => (
            if completion == Completion::Final { State::Error } else { State::Pending },
            format!("open after {repeats_text}: another repeat is needed"),
        ),
    }
}

/// A fraction in percentage points, one decimal.
fn points(x: f64) -> String {
    format!("{:.1}", x * 100.0)
}

/// What would decide an undecided benchmark, in words.
fn undecided_words(to_decide: Option<Samples>) -> String {
    match to_decide.map(|t| (t.needed, t.more(), t.more_runs())) {
        Some((Some(repeats), Some(more), Some(runs))) => format!(
            "at the difference and noise measured, {repeats} repeats in all would decide it ({more} more: {runs} benchmark runs, half of them base's unless cached), with the recipe's `repeats` raised to {repeats}"
        ),
        _ => format!(
            "at the difference measured, more than {} repeats would be needed: the difference is about at the tolerance",
            crate::accuracy::TO_DECIDE_LIMIT
        ),
    }
}

/// The share right over some (correct, questions) counts; 0 without questions.
fn ratio(counts: impl Iterator<Item = (u64, u64)>) -> f64 {
    let (correct, questions) =
        counts.fold((0u64, 0u64), |(c, q), (correct, questions)| (c + correct, q + questions));
    if questions == 0 { 0.0 } else { correct as f64 / questions as f64 }
}

fn signed_points(x: f64) -> String {
    format!("{:+.1}", x * 100.0)
}
