//! The history of merged changes: the ledger's lines, what one PR test measured as the ledger
//! records it (from its verdict and evidence), and a merged PR's line from its runs.
//!
//! The ledger (docs/history.md) is one JSON object a line, oldest first, append-only:
//!
//! - `merged`: a PR that merged after a prgate run: its per-cell TPOT log-ratios and accuracy
//!   differences with their errors, and where each was measured (node, image, recipe, commits);
//! - `anchor`: an anchor run (base = the reference, head = main's tip, on one node): the same
//!   numbers for the whole distance, and the merged PRs its head already holds (`covers`);
//! - `reset`: a maintainer set a new reference: the chain starts again from zero there.
//!
//! # The lines (`version` 1)
//!
//! ```json
//! {"version":1,"event":"merged","at":"2026-12-01T15:00:00Z","pr":201,"title":"[Fix] [MI355X] kimi_k31: ...","url":"https://github.com/o/r/pull/201","merge_commit":"<sha>","head_commit":"<sha>","base_commit":"<sha>","run":"https://github.com/o/r/actions/runs/7","verdict":"pass","speed":[{"model":"kimi_k31","concurrency":1,"covered":true,"provenance":{"node":"mi355x-1","image":"sha256:...","recipe_hash":"...","base_commit":"<sha>","pr_commit":"<sha>"},"change":0.0151,"interval":[0.0083,0.0219],"log_ratio":0.01499,"standard_error":0.00302,"degrees_of_freedom":9.0,"pairs":5}],"accuracy":[{"model":"kimi_k31","benchmark":"gsm8k","provenance":{...},"difference":-0.004,"interval":[-0.012,0.004],"alpha":0.01,"standard_error":0.00344,"questions":1319}],"note":null}
//! {"version":1,"event":"anchor","at":"2026-12-08T03:00:00Z","reference_commit":"<sha>","head_commit":"<sha>","run":"...","covers":[201,205],"speed":[...],"accuracy":[...]}
//! {"version":1,"event":"reset","at":"2026-12-09T10:00:00Z","reference_commit":"<sha>","reference_name":"v1.2.0","reason":"release 1.2 accepted","by":"alice"}
//! ```
//!
//! A speed cell's `log_ratio` is the gate's weighted mean of `ln(pr / base)` over the kept
//! pairs, `standard_error` its standard error on the test's pooled variance and
//! `degrees_of_freedom` that variance's; `change` and `interval` are the verdict's
//! (`exp(log_ratio) - 1` and the two-sided 95% t-interval), from which the other three are
//! recovered exactly ([`SpeedChange::from_verdict`]). An accuracy benchmark's `difference` is
//! PR minus base (a fraction of the questions), `interval` the verdict's (each bound one-sided
//! at `alpha`), and `standard_error` the normal one that interval implies. A line another
//! `version`, a field not known, or a value out of range is an error naming the line: a ledger
//! is never read as "no drift" because it could not be read.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::evidence::{Check, Evidence, Outcome, Side};
use crate::speed::{change_interval, log_ratio_and_error};
use crate::stats::z_two_sided;
use crate::verdict::{Numbers, SectionName, State, Verdict};

/// The version of the ledger's lines and of a saved run's file.
pub const LEDGER_VERSION: u32 = 1;

/// One line of the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Line {
    Merged(Merged),
    Anchor(Anchor),
    Reset(Reset),
}

/// A PR that merged, with what its prgate run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Merged {
    pub version: u32,
    /// When it was recorded, RFC 3339 in UTC.
    pub at: String,
    pub pr: u64,
    /// The PR's title as its author wrote it: data, escaped wherever it is shown.
    pub title: String,
    /// The PR's page.
    pub url: Option<String>,
    /// The commit the merge put on the branch.
    pub merge_commit: String,
    /// The PR's head when it merged.
    pub head_commit: String,
    /// The base side the PR's run measured against.
    pub base_commit: Option<String>,
    /// The run that measured it (its workflow run's page).
    pub run: Option<String>,
    /// That run's verdict.
    pub verdict: Option<State>,
    pub speed: Vec<SpeedChange>,
    pub accuracy: Vec<AccuracyChange>,
    /// Why nothing (or not everything) was measured, in words.
    pub note: Option<String>,
}

/// An anchor run: the reference against main's tip, measured directly.
/// Its fields repeat some of [`Merged`]'s on purpose: each line is one flat JSON object, and a
/// shared part would be a nested object or a `#[serde(flatten)]`, which loses serde's list of
/// the known fields from an unknown field's error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    /// The line's format ([`LEDGER_VERSION`]).
    pub version: u32,
    /// When it ran, RFC 3339 in UTC.
    pub at: String,
    /// Its base: the reference it measured from.
    pub reference_commit: String,
    /// Its head: main's tip when it ran.
    pub head_commit: String,
    /// The run that measured it (its workflow run's page).
    pub run: Option<String>,
    /// The merged PRs (by number) whose merge commits its head holds.
    pub covers: Vec<u64>,
    /// Main's tip against the reference, cell by cell: what the drift guard compares the
    /// chain of merged changes with.
    pub speed: Vec<SpeedChange>,
    pub accuracy: Vec<AccuracyChange>,
}

/// A maintainer's new reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reset {
    pub version: u32,
    pub at: String,
    pub reference_commit: String,
    /// A name for it (a release tag), when it has one.
    pub reference_name: Option<String>,
    pub reason: String,
    /// Who reset it.
    pub by: Option<String>,
}

/// Where a measurement was made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellProvenance {
    pub node: Option<String>,
    pub image: Option<String>,
    pub recipe_hash: Option<String>,
    pub base_commit: Option<String>,
    pub pr_commit: Option<String>,
}

/// One speed cell's measured change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeedChange {
    pub model: String,
    pub concurrency: u32,
    /// Whether the monokernels cover the concurrency (only covered cells are guarded).
    pub covered: bool,
    pub provenance: CellProvenance,
    /// `exp(log_ratio) - 1`: +0.015 is 1.5% slower.
    pub change: f64,
    /// The two-sided 95% interval of `change`.
    pub interval: (f64, f64),
    pub log_ratio: f64,
    pub standard_error: f64,
    pub degrees_of_freedom: f64,
    pub pairs: usize,
}

/// One accuracy benchmark's measured difference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccuracyChange {
    pub model: String,
    pub benchmark: String,
    pub provenance: CellProvenance,
    /// PR minus base, a fraction of the questions.
    pub difference: f64,
    /// Its interval, each bound one-sided at `alpha`.
    pub interval: (f64, f64),
    pub alpha: f64,
    /// The normal standard error the interval implies.
    pub standard_error: f64,
    pub questions: u64,
}

impl SpeedChange {
    /// The inverse-variance-weighted mean of independent measurements of one cell (every run of
    /// one commit), with Welch–Satterthwaite's degrees of freedom; the first one's provenance,
    /// `change` and the 95% `interval` recomputed, `pairs` added. One measurement is itself.
    pub fn pooled(cells: &[SpeedChange]) -> Option<SpeedChange> {
        pooled(cells)
    }
}

/// A measured cell of a ledger line, a speed cell or an accuracy benchmark: what pooling
/// independent measurements of one cell needs of it.
trait Measured: Clone {
    /// The model it is of.
    fn model(&self) -> &str;
    /// Which cell of its model it is: a concurrency, a benchmark.
    fn cell(&self) -> String;
    /// Its `(estimate, standard error, degrees of freedom)`, a part of [`weighted_mean`].
    fn part(&self) -> (f64, f64, f64);
    /// This (the first) measurement with `mean`, the weighted mean of `cells`, as its numbers:
    /// its interval recomputed, its counts added over `cells`.
    fn with_mean(&self, mean: (f64, f64, f64), cells: &[Self]) -> Option<Self>;
}

impl Measured for SpeedChange {
    fn model(&self) -> &str {
        &self.model
    }

    fn cell(&self) -> String {
        self.concurrency.to_string()
    }

    fn part(&self) -> (f64, f64, f64) {
        (self.log_ratio, self.standard_error, self.degrees_of_freedom)
    }

    fn with_mean(&self, mean: (f64, f64, f64), cells: &[SpeedChange]) -> Option<SpeedChange> {
        let (log_ratio, standard_error, degrees_of_freedom) = mean;
        Some(SpeedChange {
            change: log_ratio.exp_m1(),
            interval: change_interval(log_ratio, standard_error, degrees_of_freedom)?,
            log_ratio,
            standard_error,
            degrees_of_freedom,
            pairs: cells.iter().map(|cell| cell.pairs).sum(),
            ..self.clone()
        })
    }
}

impl Measured for AccuracyChange {
    fn model(&self) -> &str {
        &self.model
    }

    fn cell(&self) -> String {
        self.benchmark.clone()
    }

    fn part(&self) -> (f64, f64, f64) {
        (self.difference, self.standard_error, f64::INFINITY)
    }

    fn with_mean(&self, mean: (f64, f64, f64), cells: &[AccuracyChange]) -> Option<AccuracyChange> {
        let (difference, standard_error, _) = mean;
        let half = z_two_sided(2.0 * self.alpha) * standard_error;
        Some(AccuracyChange {
            difference,
            interval: (difference - half, difference + half),
            standard_error,
            questions: cells.iter().map(|cell| cell.questions).sum(),
            ..self.clone()
        })
    }
}

/// Independent measurements of one cell pooled: their parts' [`weighted_mean`], the rest the
/// first one's; one measurement is itself, none is `None`.
fn pooled<T: Measured>(cells: &[T]) -> Option<T> {
    let first = cells.first()?;
    if cells.len() == 1 {
        return Some(first.clone());
    }
    let parts: Vec<(f64, f64, f64)> = cells.iter().map(Measured::part).collect();
    first.with_mean(weighted_mean(&parts)?, cells)
}

/// The inverse-variance-weighted mean of `(estimate, standard error, degrees of freedom)`
/// parts, its standard error and Welch–Satterthwaite's degrees of freedom (infinite when every
/// part's is); `None` for no part or an error that is not positive.
pub fn weighted_mean(parts: &[(f64, f64, f64)]) -> Option<(f64, f64, f64)> {
    if parts.is_empty() || parts.iter().any(|(_, se, _)| !positive(*se)) {
        return None;
    }
    let total: f64 = parts.iter().map(|(_, se, _)| se.powi(-2)).sum();
    let mut estimate = 0.0;
    let mut variance = 0.0;
    let mut denominator = 0.0;
    for (value, se, df) in parts {
        let weight = se.powi(-2) / total;
        estimate += weight * value;
        let term = weight * weight * se * se;
        variance += term;
        if df.is_finite() {
            denominator += term * term / df;
        }
    }
    let df = if denominator > 0.0 { variance * variance / denominator } else { f64::INFINITY };
    Some((estimate, variance.sqrt(), df))
}

/// What one finished PR test measured (a saved run, `runs/<commit>.json` in the history
/// folder), waiting for its PR to merge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    pub version: u32,
    pub at: String,
    pub pr: u64,
    pub title: String,
    /// The commit tested: the PR's pinned head, or a merge queue's merge commit.
    pub tested_commit: String,
    pub base_commit: String,
    /// Whether it was a merge queue's run of its merge commit.
    pub merge_queue: bool,
    pub run: Option<String>,
    pub verdict: State,
    pub speed: Vec<SpeedChange>,
    pub accuracy: Vec<AccuracyChange>,
}

/// A ledger line that cannot be read: its number (from 1) and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct LineError {
    pub line: usize,
    pub problem: String,
}

/// The lines of a ledger's text, oldest first; blank lines are skipped.
pub fn parse_ledger(text: &str) -> Result<Vec<Line>, LineError> {
    let mut lines = Vec::new();
    for (index, text) in text.lines().enumerate() {
        if text.trim().is_empty() {
            continue;
        }
        let problem = |problem: String| LineError { line: index + 1, problem };
        let line: Line = serde_json::from_str(text).map_err(|error| problem(error.to_string()))?;
        line.check().map_err(|error| problem(error.to_string()))?;
        lines.push(line);
    }
    Ok(lines)
}

impl Line {
    /// The line as the ledger writes it: one JSON object, no newline.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    fn version(&self) -> u32 {
        match self {
            Line::Merged(merged) => merged.version,
            Line::Anchor(anchor) => anchor.version,
            Line::Reset(reset) => reset.version,
        }
    }

    /// Refuses another version and numbers no statistic can be made of.
    fn check(&self) -> Result<(), NotALine> {
        let version = self.version();
        if version != LEDGER_VERSION {
            return Err(NotALine::Version { version });
        }
        let (speed, accuracy) = match self {
            Line::Merged(merged) => (&merged.speed, &merged.accuracy),
            Line::Anchor(anchor) => (&anchor.speed, &anchor.accuracy),
            Line::Reset(_) => return Ok(()),
        };
        for cell in speed {
            let finite = cell.log_ratio.is_finite() && cell.degrees_of_freedom.is_finite();
            if !finite || !positive(cell.standard_error) || !positive(cell.degrees_of_freedom) {
                return Err(NotALine::Speed {
                    model: cell.model.clone(),
                    concurrency: cell.concurrency,
                    log_ratio: cell.log_ratio,
                    standard_error: cell.standard_error,
                    degrees_of_freedom: cell.degrees_of_freedom,
                });
            }
        }
        for cell in accuracy {
            if !cell.difference.is_finite() || !positive(cell.standard_error) {
                return Err(NotALine::Accuracy {
                    model: cell.model.clone(),
                    benchmark: cell.benchmark.clone(),
                    difference: cell.difference,
                    standard_error: cell.standard_error,
                });
            }
        }
        Ok(())
    }
}

/// Why a line that parses is still not one the ledger keeps.
#[derive(Debug, thiserror::Error)]
enum NotALine {
    #[error("version {version} is not one this prgate reads ({LEDGER_VERSION})")]
    Version { version: u32 },
    #[error(
        "{model} at c={concurrency}: log_ratio {log_ratio}, standard_error {standard_error} and degrees_of_freedom {degrees_of_freedom} are not a measurement (finite, positive error and degrees of freedom)"
    )]
    Speed {
        model: String,
        concurrency: u32,
        log_ratio: f64,
        standard_error: f64,
        degrees_of_freedom: f64,
    },
    #[error(
        "{model} {benchmark}: difference {difference} and standard_error {standard_error} are not a measurement"
    )]
    Accuracy { model: String, benchmark: String, difference: f64, standard_error: f64 },
}

impl SpeedChange {
    /// A cell's change from the verdict's numbers: the change, its two-sided 95% interval and
    /// the test's degrees of freedom give the log-ratio and its standard error exactly
    /// ([`log_ratio_and_error`], the inverse of [`change_interval`]). `None` without an interval
    /// or degrees of freedom (nothing to chain).
    pub fn from_verdict(
        model: &str,
        concurrency: u32,
        covered: bool,
        change: f64,
        interval: (f64, f64),
        degrees_of_freedom: f64,
        pairs: usize,
    ) -> Option<SpeedChange> {
        let (log_ratio, standard_error) =
            log_ratio_and_error(change, interval, degrees_of_freedom)?;
        Some(SpeedChange {
            model: model.to_owned(),
            concurrency,
            covered,
            provenance: CellProvenance::default(),
            change,
            interval,
            log_ratio,
            standard_error,
            degrees_of_freedom,
            pairs,
        })
    }
}

impl AccuracyChange {
    /// A benchmark's difference from the verdict's numbers: the standard error is the normal one
    /// whose one-sided `alpha` bounds span the interval (Tango's and Newcombe's score intervals
    /// are near-symmetric away from 0 and 1). `None` without `alpha`.
    pub fn from_verdict(
        model: &str,
        benchmark: &str,
        difference: f64,
        interval: (f64, f64),
        alpha: f64,
        questions: u64,
    ) -> Option<AccuracyChange> {
        let z = z_two_sided(2.0 * alpha);
        let standard_error = (interval.1 - interval.0) / (2.0 * z);
        let measured = difference.is_finite() && standard_error.is_finite() && standard_error > 0.0;
        measured.then(|| AccuracyChange {
            model: model.to_owned(),
            benchmark: benchmark.to_owned(),
            provenance: CellProvenance::default(),
            difference,
            interval,
            alpha,
            standard_error,
            questions,
        })
    }
}

/// What a verdict measured: every speed cell with an interval (covered or not) and every
/// accuracy benchmark with one, each with the provenance of the evidence it came from. A cell
/// whose every record was taken over from an earlier run (`provenance.reused`, docs/rerun.md) is
/// left out: that run measured it, and saved it.
pub fn measurements(
    verdict: &Verdict,
    evidence: &[Evidence],
) -> (Vec<SpeedChange>, Vec<AccuracyChange>) {
    let mut speed = Vec::new();
    let mut accuracy = Vec::new();
    let items = verdict.sections.iter().flat_map(|section| {
        let kept = matches!(section.name, SectionName::E2ePerformance | SectionName::Accuracy);
        section.items.iter().filter(move |_| kept)
    });
    for item in items {
        let Some(model) = item.model.as_deref() else { continue };
        match &item.numbers {
            Some(numbers @ Numbers::Speed { .. }) => {
                speed.extend(speed_cell(model, numbers, evidence));
            }
            Some(numbers @ Numbers::Accuracy { .. }) => {
                accuracy.extend(accuracy_cell(model, numbers, evidence));
            }
            _ => {}
        }
    }
    (speed, accuracy)
}

/// The speed cell of `model` a verdict item's `numbers` hold, with its provenance; `None` when
/// they are not a speed test's, or every record of it was taken over from an earlier run.
fn speed_cell(model: &str, numbers: &Numbers, evidence: &[Evidence]) -> Option<SpeedChange> {
    let Numbers::Speed {
        concurrency,
        covered,
        change: Some(change),
        interval: Some(interval),
        pairs,
        test: Some(test),
        ..
    } = numbers
    else {
        return None;
    };
    let df = test.degrees_of_freedom?;
    let mut cell =
        SpeedChange::from_verdict(model, *concurrency, *covered, *change, *interval, df, *pairs)?;
    let of_cell = |outcome: &Outcome| matches!(outcome, Outcome::SpeedPair { concurrency: c, .. } if c == concurrency);
    if all_reused(evidence, model, of_cell) {
        return None;
    }
    cell.provenance = provenance(evidence, model, of_cell);
    Some(cell)
}

/// The accuracy benchmark of `model` a verdict item's `numbers` hold, with its provenance;
/// `None` as for [`speed_cell`].
fn accuracy_cell(model: &str, numbers: &Numbers, evidence: &[Evidence]) -> Option<AccuracyChange> {
    let Numbers::Accuracy {
        benchmark, difference, interval, questions, alpha: Some(alpha), ..
    } = numbers
    else {
        return None;
    };
    let mut cell =
        AccuracyChange::from_verdict(model, benchmark, *difference, *interval, *alpha, *questions)?;
    let of_cell = |outcome: &Outcome| matches!(outcome, Outcome::Accuracy { benchmark: b, .. } if b == benchmark);
    if all_reused(evidence, model, of_cell) {
        return None;
    }
    cell.provenance = provenance(evidence, model, of_cell);
    Some(cell)
}

/// Whether every record of `model` whose outcome `matches` was taken over from an earlier run.
fn all_reused(evidence: &[Evidence], model: &str, matches: impl Fn(&Outcome) -> bool) -> bool {
    let mut records = evidence
        .iter()
        .filter(|record| record.model.as_deref() == Some(model) && matches(&record.outcome))
        .peekable();
    records.peek().is_some() && records.all(|record| record.provenance.reused.is_some())
}

/// The provenance of `model`'s first record (a speed pair, else a PR-side record) whose
/// outcome `matches`.
fn provenance(
    evidence: &[Evidence],
    model: &str,
    matches: impl Fn(&Outcome) -> bool,
) -> CellProvenance {
    let record = evidence
        .iter()
        .filter(|record| record.model.as_deref() == Some(model))
        .filter(|record| matches!(record.check, Check::Speed | Check::Accuracy))
        .filter(|record| record.side != Side::Base)
        .find(|record| matches(&record.outcome));
    let Some(record) = record else { return CellProvenance::default() };
    let provenance = &record.provenance;
    CellProvenance {
        node: provenance.node.clone(),
        image: provenance.image_digest.clone(),
        recipe_hash: provenance.recipe_hash.clone(),
        base_commit: provenance.base_commit.clone(),
        pr_commit: provenance.pr_commit.clone(),
    }
}

/// The facts of a merged PR, from the merge event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeFacts {
    pub at: String,
    pub pr: u64,
    pub title: String,
    pub url: Option<String>,
    pub merge_commit: String,
    pub head_commit: String,
}

/// A merged PR's ledger line from its runs: the PR's own runs of its head, and a merge queue's
/// runs of its merge commit, oldest first. Each model counts once: a model the queue measured
/// again takes the queue's numbers (the merged commit against the base it merged onto), every
/// other model the PR runs'. A cell measured by several runs of one commit (a PR run again
/// after a failure) is their pooled measurement ([`SpeedChange::pooled`], and likewise an
/// accuracy benchmark's, its interval at the first one's `alpha`): all of them, not
/// the one that passed, so that re-running until a pass does not bias the chain. With no run,
/// the line records the merge with nothing measured and says so.
pub fn merged_line(facts: &MergeFacts, pr_runs: &[RunRecord], queue_runs: &[RunRecord]) -> Merged {
    let queue_models: BTreeSet<&str> = queue_runs
        .iter()
        .flat_map(|run| {
            run.speed
                .iter()
                .map(|cell| cell.model.as_str())
                .chain(run.accuracy.iter().map(|cell| cell.model.as_str()))
        })
        .collect();
    let speed = pool_runs(pr_runs, queue_runs, &queue_models, |run| &run.speed);
    let accuracy = pool_runs(pr_runs, queue_runs, &queue_models, |run| &run.accuracy);
    let pr_run = pr_runs.last();
    let queue_run = queue_runs.last();
    let main_run = queue_run.or(pr_run);
    let note = merged_note(&facts.head_commit, pr_runs, queue_runs, &queue_models);
    Merged {
        version: LEDGER_VERSION,
        at: facts.at.clone(),
        pr: facts.pr,
        title: facts.title.clone(),
        url: facts.url.clone(),
        merge_commit: facts.merge_commit.clone(),
        head_commit: facts.head_commit.clone(),
        base_commit: pr_run.or(queue_run).map(|run| run.base_commit.clone()),
        run: main_run.and_then(|run| run.run.clone()),
        verdict: pr_run.map(|run| run.verdict),
        speed,
        accuracy,
        note,
    }
}

/// What a merged line says of how it was measured: nothing measured, the queue's numbers
/// only, the models the queue measured again, or the PR's several runs pooled.
fn merged_note(
    head_commit: &str,
    pr_runs: &[RunRecord],
    queue_runs: &[RunRecord],
    queue_models: &BTreeSet<&str>,
) -> Option<String> {
    match (pr_runs.last(), queue_runs.last()) {
        (None, None) => Some(format!(
            "no prgate result of its head {} was saved: nothing of it is measured, so the chain misses whatever it changed (an anchor run measures it)",
            short(head_commit)
        )),
        (None, Some(_)) => {
            Some("measured by the merge queue's run of its merge commit only".to_owned())
        }
        (Some(_), Some(_)) if !queue_models.is_empty() => Some(format!(
            "the merge queue measured {} again on the merge commit: those numbers are the queue's",
            queue_models.iter().copied().collect::<Vec<_>>().join(", ")
        )),
        _ if pr_runs.len() > 1 => Some(format!(
            "{} runs of its head, each cell pooled over the runs that measured it",
            pr_runs.len()
        )),
        _ => None,
    }
}

/// The `cells` of a merged PR's runs, each cell's pooled ([`pooled`]), in the order the cells
/// first appear: the PR runs' of every model the queue did not measure again
/// (`queue_models`), then the queue runs'.
fn pool_runs<T: Measured>(
    pr_runs: &[RunRecord],
    queue_runs: &[RunRecord],
    queue_models: &BTreeSet<&str>,
    cells: impl Fn(&RunRecord) -> &[T],
) -> Vec<T> {
    let pr_cells = pr_runs.iter().flat_map(&cells).filter(|c| !queue_models.contains(c.model()));
    let queue_cells = queue_runs.iter().flat_map(&cells);
    let mut groups: Vec<((&str, String), Vec<T>)> = Vec::new();
    for cell in pr_cells.chain(queue_cells) {
        let key = (cell.model(), cell.cell());
        match groups.iter_mut().find(|(known, _)| *known == key) {
            Some((_, group)) => group.push(cell.clone()),
            None => groups.push((key, vec![cell.clone()])),
        }
    }
    groups.iter().filter_map(|(_, group)| pooled(group)).collect()
}

/// Whether `value` is a number above zero (not NaN).
fn positive(value: f64) -> bool {
    value > 0.0
}

/// The first 12 characters of a commit.
pub fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

#[cfg(test)]
mod tests;
