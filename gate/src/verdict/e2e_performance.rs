//! The E2E-performance section: the speed sweep's pairs grouped into cells (one per
//! concurrency), each judged by the sequential test against its calibrated noise, and the
//! gain the PR's title claims. The test itself is `crate::speed`'s; this module only groups
//! evidence and words the answer.

use std::collections::BTreeMap;

use prgate_scope::plan::Tier;

use crate::evidence::{Check, Outcome};
use crate::speed::{
    Answer, Calibration, CellContext, CellJudgement, LEGACY_CALIBRATION_SAMPLES, Pair, ToDecide,
    judge_cell,
};

use super::{
    Confidence, Item, Judge, Numbers, SectionName, SpeedCell, SpeedTest, SpeedThresholds,
    SpeedUndecided, State,
};

impl<'a> Judge<'a> {
    /// Speed pairs and known noise of a model, per concurrency.
    pub(super) fn cells(&self, model: &str) -> BTreeMap<u32, SpeedCell> {
        let mut cells: BTreeMap<u32, SpeedCell> = BTreeMap::new();
        for record in self.records(Some(model), Check::Speed) {
            match &record.outcome {
                Outcome::SpeedPair {
                    concurrency,
                    index,
                    covered,
                    base_tpot_ms,
                    pr_tpot_ms,
                    base_runs_ms,
                    ..
                } => {
                    let cell = cells.entry(*concurrency).or_default();
                    cell.covered |= *covered;
                    let pair = match base_runs_ms {
                        Some([before, after]) => Pair::bracketed(*before, *pr_tpot_ms, *after),
                        None => Pair::single(*base_tpot_ms, *pr_tpot_ms),
                    };
                    cell.pairs.push((*index, pair));
                }
                Outcome::SpeedNoise { concurrency, log_ratio_variance, samples } => {
                    cells.entry(*concurrency).or_default().noise = Some(Calibration {
                        log_ratio_variance: *log_ratio_variance,
                        samples: samples.unwrap_or(LEGACY_CALIBRATION_SAMPLES),
                    });
                }
                _ => {}
            }
        }
        for cell in cells.values_mut() {
            cell.pairs.sort_by_key(|(index, _)| *index);
        }
        cells
    }

    pub(super) fn covered_cells(&self, models: &[&prgate_scope::plan::ModelPlan]) -> usize {
        models
            .iter()
            .map(|model| {
                self.cells(&model.name)
                    .values()
                    .filter(|cell| cell.covered && !cell.pairs.is_empty())
                    .count()
            })
            .sum()
    }

    pub(super) fn speed(&mut self, model: &str, covered_cells: usize) {
        let cells = self.cells(model);
        if cells.values().all(|cell| cell.pairs.is_empty()) {
            self.pending(Some(model), Check::Speed);
            return;
        }
        for (concurrency, cell) in cells {
            if !cell.pairs.is_empty() {
                self.speed_cell(model, concurrency, cell, covered_cells);
            }
        }
    }

    /// Judges one cell with the sequential test and words the answer.
    fn speed_cell(&mut self, model: &str, concurrency: u32, cell: SpeedCell, covered_cells: usize) {
        let SpeedCell { covered, pairs, noise } = cell;
        let indices: Vec<u32> = pairs.iter().map(|(index, _)| *index).collect();
        let pairs: Vec<Pair> = pairs.into_iter().map(|(_, pair)| pair).collect();
        let context =
            CellContext { cells: covered_cells, gain_required: false, calibration: noise };
        let judgement = judge_cell(&pairs, self.config, &context);
        let view = CellView {
            concurrency,
            covered,
            covered_cells,
            confidence: confidence_of(judgement.loss),
            judgement: &judgement,
            indices: &indices,
            noise,
        };
        let loss_limit = self.config.speed.threshold.get();
        let item = Item {
            model: Some(model.to_owned()),
            check: "speed".to_owned(),
            state: view.state(),
            rule: format!(
                "a median-TPOT loss over {:.0}% at a covered concurrency fails",
                loss_limit * 100.0
            ),
            summary: view.summary(&self.config.speed),
            numbers: Some(view.numbers(SpeedThresholds {
                max_loss: loss_limit,
                min_gain: self.config.gain.test.threshold.get(),
                gain_required: self.gain_required,
            })),
        };
        self.push(SectionName::E2ePerformance, item);
    }

    /// The gain rule: one covered cell of a full-tier model must show the required gain.
    pub(super) fn gain_verdict(&mut self, models: &[&prgate_scope::plan::ModelPlan]) {
        // The models the PR changed; a PR that changed only shared code shows its gain on any.
        let full: Vec<&prgate_scope::plan::ModelPlan> =
            models.iter().copied().filter(|model| model.tier == Tier::Full).collect();
        let full = if self.covered_cells(&full) > 0 { full } else { models.to_vec() };
        let cells = self.covered_cells(&full);
        // Speed evidence still to come could yet show the gain.
        let missing =
            full.iter().any(|model| self.records(Some(&model.name), Check::Speed).is_empty());
        let min_gain = self.config.gain.test.threshold.get();
        let rule = format!(
            "a [Perf] or [Feat] PR needs a {:.0}% median-TPOT gain at one covered concurrency",
            min_gain * 100.0
        );
        let mut best: Option<(State, String)> = None;
        let mut open = false;
        for model in &full {
            for (concurrency, SpeedCell { covered, pairs, noise }) in self.cells(&model.name) {
                if !covered || pairs.is_empty() {
                    continue;
                }
                let pairs: Vec<Pair> = pairs.into_iter().map(|(_, pair)| pair).collect();
                let context = CellContext { cells, gain_required: true, calibration: noise };
                let judgement = judge_cell(&pairs, self.config, &context);
                let where_ = format!(
                    "{} c={concurrency}: TPOT {}",
                    model.name,
                    change_text(judgement.change, judgement.change_interval)
                );
                // A gain still undecided at the cap was not shown: it counts as none.
                match judgement.gain {
                    Some(Answer::Yes) => best = Some((State::Pass, where_)),
                    Some(Answer::Open) => open = true,
                    Some(Answer::No | Answer::Undecided) | None => {}
                }
            }
        }
        let (state, summary) = match best {
            Some(found) => found,
            None if open || missing => (
                State::Pending,
                "no covered concurrency has shown the gain yet; more pairs or models are to come"
                    .to_owned(),
            ),
            None if cells == 0 => {
                (State::Pending, "no covered concurrency has speed evidence".to_owned())
            }
            None => (
                State::Fail,
                format!("no covered concurrency shows a {:.0}% gain", min_gain * 100.0),
            ),
        };
        self.push(SectionName::E2ePerformance, Item::worded(None, "gain", state, rule, summary));
    }
}

/// One cell's judgement, with what wording it needs: its pairs' run indices and its stored
/// calibration.
struct CellView<'j> {
    concurrency: u32,
    covered: bool,
    covered_cells: usize,
    confidence: Confidence,
    judgement: &'j CellJudgement,
    /// The run's index of each pair, in the order the test saw them.
    indices: &'j [u32],
    noise: Option<Calibration>,
}

impl CellView<'_> {
    /// Undecided at the cap is not a pass: neither the loss nor its absence was shown, so the
    /// cell is one the run could not judge (docs/gate.md, "Fail closed"). A PR whose runs are
    /// shown noisier than base's by more than the stated factor is reported: a passing cell
    /// warns.
    fn state(&self) -> State {
        match (self.covered, self.judgement.loss) {
            (false, _) => State::NotJudged,
            (true, Answer::Yes) => State::Fail,
            (true, Answer::No) if self.judgement.noise_growth.is_some() => State::Warn,
            (true, Answer::No) => State::Pass,
            (true, Answer::Open) => State::Pending,
            (true, Answer::Undecided) => State::Error,
        }
    }

    /// The run indices of pairs given by their positions in the test.
    fn run_indices(&self, positions: &[usize]) -> Vec<u32> {
        positions.iter().filter_map(|at| self.indices.get(*at).copied()).collect()
    }

    fn summary(&self, speed: &crate::config::SequentialConfig) -> String {
        let (judgement, covered, covered_cells) =
            (self.judgement, self.covered, self.covered_cells);
        let mut summary = format!(
            "TPOT {} at c={}",
            change_text(judgement.change, judgement.change_interval),
            self.concurrency
        );
        summary.push_str(&format!(", {} pairs", judgement.pairs));
        let outliers = self.run_indices(&judgement.outliers);
        if !outliers.is_empty() {
            let list: Vec<String> = outliers.iter().map(u32::to_string).collect();
            summary.push_str(&format!(
                " ({} excluded as outliers and re-measured: pair {})",
                outliers.len(),
                list.join(", ")
            ));
        }
        summary.push_str(&match (covered, self.confidence) {
            (false, _) => "; not covered by the monokernels, so not judged".to_owned(),
            (true, Confidence::Low) => format!("; {}", undecided_text(judgement.to_decide, speed)),
            (true, Confidence::Open) => "; open: more pairs are needed".to_owned(),
            (true, Confidence::High) => format!(
                "; high confidence: P(fail | no loss) ≤ {}{}, P(pass | {:.0}% loss) ≤ {}",
                rate(judgement.alpha),
                if covered_cells > 1 {
                    format!(
                        " (≤ {} for the PR's {covered_cells} covered cells together)",
                        rate(judgement.family_alpha)
                    )
                } else {
                    String::new()
                },
                speed.high * 100.0,
                rate(judgement.beta)
            ),
        });
        if covered && !judgement.pr_slow.is_empty() {
            let list: Vec<String> =
                self.run_indices(&judgement.pr_slow).iter().map(u32::to_string).collect();
            summary.push_str(&format!(
                "; {} PR run{} slow against {} own base runs, kept as the PR's: pair {}",
                list.len(),
                if list.len() == 1 { "" } else { "s" },
                if list.len() == 1 { "its" } else { "their" },
                list.join(", ")
            ));
        }
        if let (true, Some(growth)) = (covered, judgement.noise_growth) {
            summary.push_str(&format!(
                "; the PR's runs are {growth:.1}× as noisy as base's (over the {:.1}× of speed.max-noise-growth), so the test used the pairs' own variance",
                speed.max_noise_growth
            ));
        }
        if covered {
            summary.push_str(&format!("; {}", noise_text(judgement, self.noise)));
        }
        summary
    }

    fn numbers(&self, thresholds: SpeedThresholds) -> Numbers {
        let judgement = self.judgement;
        let test = SpeedTest {
            run_cv: judgement.noise.map(|n| n.run_cv),
            degrees_of_freedom: judgement.noise.map(|n| n.degrees_of_freedom),
            in_band_differences: judgement.noise.map_or(0, |n| n.in_band_differences),
            calibration_samples: self.noise.map(|c| c.samples),
            calibration_df: judgement.noise.map_or(0.0, |n| n.calibration_df),
            alpha: judgement.alpha,
            beta: judgement.beta,
            outliers: self.run_indices(&judgement.outliers),
            family_alpha: Some(judgement.family_alpha),
            pr_noise_ratio: judgement.noise.and_then(|n| n.pr_noise_ratio),
            own_variance: judgement.noise.is_some_and(|n| n.own_variance),
            calibration_stale: judgement.calibration_stale,
            pr_slow: self.run_indices(&judgement.pr_slow),
        };
        Numbers::Speed {
            concurrency: self.concurrency,
            covered: self.covered,
            base_ms: judgement.base_median_ms,
            pr_ms: judgement.pr_median_ms,
            change: judgement.change,
            interval: judgement.change_interval,
            pairs: judgement.pairs,
            confidence: self.confidence,
            test: Some(Box::new(test)),
            thresholds: Some(thresholds),
            undecided: judgement.to_decide.filter(|_| self.covered).map(|to_decide| {
                SpeedUndecided {
                    bounds: (to_decide.lower, to_decide.upper),
                    zone: (to_decide.low, to_decide.high),
                    pairs_to_decide: to_decide.pairs.needed,
                    more_pairs: to_decide.pairs.more(),
                    more_runs: to_decide.pairs.more_runs(),
                }
            }),
        }
    }
}

/// An error rate as a percentage.
fn rate(rate: f64) -> String {
    let percent = rate * 100.0;
    if percent >= 1.0 { format!("{percent:.0}%") } else { format!("{percent:.2}%") }
}

/// The noise a cell's test used, in words: what the comment shows as its calibration.
fn noise_text(judgement: &CellJudgement, calibration: Option<Calibration>) -> String {
    let stored = match calibration {
        Some(c) if judgement.calibration_stale => format!(
            "the node's calibration ({} differences, CV {:.1}%) not used: this run's A/A contradicts it, so the runner records it afresh",
            c.samples,
            (c.log_ratio_variance / 2.0).sqrt() * 100.0
        ),
        Some(c) => format!("the node's calibration ({} differences)", c.samples),
        None => "no node calibration".to_owned(),
    };
    match judgement.noise {
        Some(noise) if noise.own_variance => format!(
            "noise CV {:.1}%{} from {} degrees of freedom (the pairs' own spread: larger than base's {} in-band A/A predict; {stored})",
            noise.run_cv * 100.0,
            if noise.floored { " (the min-cv floor)" } else { "" },
            noise.degrees_of_freedom.round(),
            noise.in_band_differences,
        ),
        Some(noise) => format!(
            "noise CV {:.1}%{} from {} degrees of freedom ({} in-band A/A, {stored})",
            noise.run_cv * 100.0,
            if noise.floored { " (the min-cv floor)" } else { "" },
            noise.degrees_of_freedom.round(),
            noise.in_band_differences,
        ),
        None => format!("noise not yet known ({stored})"),
    }
}

fn confidence_of(answer: Answer) -> Confidence {
    match answer {
        Answer::Yes | Answer::No => Confidence::High,
        Answer::Undecided => Confidence::Low,
        Answer::Open => Confidence::Open,
    }
}

/// A cell undecided at the pair cap, in words: the bounds its test reached, and what more
/// pairs would decide it and what they cost in runs.
fn undecided_text(to_decide: Option<ToDecide>, speed: &crate::config::SequentialConfig) -> String {
    let percent = |x: f64| format!("{:+.1}%", x * 100.0);
    let cap = speed.max_pairs;
    let Some(to_decide) = to_decide else {
        return format!(
            "undecided at the pair cap ({cap} kept pairs) with no noise estimate: not a pass"
        );
    };
    let reached = format!(
        "undecided at the pair cap ({cap} kept pairs), so not a pass: the loss test's bounds reached [{}, {}], and a fail needs the lower above {}, a pass the upper below {}",
        percent(to_decide.lower),
        percent(to_decide.upper),
        percent(to_decide.low),
        percent(to_decide.high),
    );
    match (to_decide.pairs.needed, to_decide.pairs.more(), to_decide.pairs.more_runs()) {
        (Some(pairs), Some(more), Some(runs)) => format!(
            "{reached}; at this noise and change about {more} more pairs ({runs} more runs) would decide it: speed.max-pairs = {pairs} in base's [gate.speed] table, or a quieter node"
        ),
        _ => format!(
            "{reached}; at this noise and change even {} pairs would not decide it: the change sits on the loss line, or the node is too noisy",
            crate::speed::TO_DECIDE_LIMIT
        ),
    }
}

fn change_text(change: Option<f64>, interval: Option<(f64, f64)>) -> String {
    let percent = |x: f64| format!("{:+.1}%", x * 100.0);
    match (change, interval) {
        (Some(change), Some((low, high))) => {
            format!("{} [{}, {}]", percent(change), percent(low), percent(high))
        }
        (Some(change), None) => percent(change),
        _ => "unknown".to_owned(),
    }
}
