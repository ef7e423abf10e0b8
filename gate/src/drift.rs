//! The cumulative drift guard: the chained change of each model's covered speed cell and each
//! accuracy benchmark since the reference, with an interval that combines the chained
//! measurements' errors, judged against a budget; and the anchor run's check of the chain.
//!
//! # The statistics
//!
//! Each merged PR `i` was measured against its own base on one node: a speed cell's mean
//! log-ratio `m_i = mean ln(pr / base)` with standard error `s_i` on `ν_i` degrees of freedom
//! (the gate's pooled variance), an accuracy benchmark's difference `d_i` with a normal
//! standard error `s_i` (from its score interval). The chain since the reference is
//!
//! - `M = Σ m_i` (log-ratios add: the TPOT ratios multiply), shown as `exp(M) - 1`;
//! - `SE² = Σ s_i²`: the PRs' measurements are separate runs, so their errors are independent;
//! - `ν = SE⁴ / Σ (s_i⁴ / ν_i)`: Welch–Satterthwaite's degrees of freedom for a sum of
//!   independent variance estimates (accuracy terms, normal, count as infinite).
//!
//! The guard is one one-sided test per cell at `alpha` (`[drift]`): it **trips** when the
//! chained loss is over the budget with that confidence — `M - t(1 - alpha, ν) SE > ln(1 +
//! speed-budget)`, or for accuracy `D + z(1 - alpha) SE < -accuracy-budget × tolerance` — is
//! **within** when the opposite bound is inside the budget, and **open** otherwise. The shown
//! interval is the two-sided `1 - 2 alpha` one, so the guard trips exactly when it lies wholly
//! beyond the budget.
//!
//! The assumptions, each of which the anchor run checks: (1) every change to main that can move
//! a cell was measured — a PR that did not run a model did not touch its files (the plan's
//! scope), and a merged PR without a saved result is listed as unmeasured; (2) changes compose:
//! PR `i`'s change against its own base is its change on top of the others (no interaction, and
//! a base that moved between the PR's run and its merge moved for reasons measured elsewhere);
//! (3) a change measured on one node holds on another; (4) each measurement is unbiased: the
//! sequential test's stopping and the selection of what merges (a PR that failed is not in the
//! chain) bias it slightly, which `prgate history simulate` measures through the gate's own
//! rule (bench/drift-guard.md).
//!
//! # The anchor run
//!
//! An anchor measures the reference against main's tip directly, on one node, with the same
//! machinery as a PR. For each cell it measured, the chain's estimate of the same distance (the
//! links of the PRs its head holds) is compared with it: they **disagree** when `|M_chain -
//! m_anchor| > t(1 - alpha / 2, ν) sqrt(SE_chain² + s_anchor²)`.
//!
//! - **They disagree: the anchor wins.** The chain's estimate of that distance is replaced by
//!   the anchor's, and only the PRs its head does not hold are chained on top. The anchor wins
//!   because it measures the quantity itself — one paired comparison whose error does not grow
//!   with the number of PRs — and holds whatever broke an assumption above (an unmeasured
//!   commit, an interaction, a node's difference, a biased link); a disagreement is evidence
//!   that one did.
//! - **They agree: both count.** They are then two estimates of one distance with independent
//!   errors, and the chain's estimate of it becomes their inverse-variance-weighted mean (more
//!   precise than either: the anchor's error is about one PR's, so it ends the growth of the
//!   chain's). The PRs stay named as the contributors.
//!
//! Pure: the ledger's lines and the settings in, the chains and the guards out.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::config::GateConfig;
use crate::history::{AccuracyChange, Anchor, Line, Merged, Reset, SpeedChange};
use crate::stats::t_quantile;

pub mod simulate;

/// Degrees of freedom above this are taken as infinite (the normal quantile).
const NORMAL_DF: f64 = 1e6;

/// What a chain is of: a model's speed cell, or one of its accuracy benchmarks.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Cell {
    Speed { model: String, concurrency: u32 },
    Accuracy { model: String, benchmark: String },
}

impl Cell {
    /// The cell in words: `kimi_k31 c=1`, `kimi_k31 gsm8k`.
    pub fn describe(&self) -> String {
        match self {
            Cell::Speed { model, concurrency } => format!("{model} c={concurrency}"),
            Cell::Accuracy { model, benchmark } => format!("{model} {benchmark}"),
        }
    }

    pub fn model(&self) -> &str {
        match self {
            Cell::Speed { model, .. } | Cell::Accuracy { model, .. } => model,
        }
    }

    /// Whether a larger estimate is a loss (speed: TPOT up) or a gain (accuracy up).
    fn loss_sign(&self) -> f64 {
        match self {
            Cell::Speed { .. } => 1.0,
            Cell::Accuracy { .. } => -1.0,
        }
    }

    /// An estimate as the cell shows it: speed's log-ratio as a change, accuracy's as it is.
    pub fn shown(&self, estimate: f64) -> f64 {
        match self {
            Cell::Speed { .. } => estimate.exp() - 1.0,
            Cell::Accuracy { .. } => estimate,
        }
    }
}

/// One measurement: an estimate on the chain's scale (speed: a log-ratio; accuracy: a
/// difference), its standard error and degrees of freedom (infinite: normal).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Measurement {
    pub estimate: f64,
    pub standard_error: f64,
    pub degrees_of_freedom: f64,
}

impl Measurement {
    fn of_speed(cell: &SpeedChange) -> Measurement {
        Measurement {
            estimate: cell.log_ratio,
            standard_error: cell.standard_error,
            degrees_of_freedom: cell.degrees_of_freedom,
        }
    }

    fn of_accuracy(cell: &AccuracyChange) -> Measurement {
        Measurement {
            estimate: cell.difference,
            standard_error: cell.standard_error,
            degrees_of_freedom: f64::INFINITY,
        }
    }

    /// The sum of independent measurements: estimates add, variances add, and the degrees of
    /// freedom are Welch–Satterthwaite's. `None` for none.
    pub fn sum<'m>(parts: impl IntoIterator<Item = &'m Measurement>) -> Option<Measurement> {
        let (mut estimate, mut variance, mut denominator, mut any) = (0.0, 0.0, 0.0, false);
        for part in parts {
            any = true;
            estimate += part.estimate;
            let v = part.standard_error.powi(2);
            variance += v;
            if part.degrees_of_freedom.is_finite() {
                denominator += v * v / part.degrees_of_freedom;
            }
        }
        let degrees_of_freedom =
            if denominator > 0.0 { variance * variance / denominator } else { f64::INFINITY };
        (any && variance > 0.0).then(|| Measurement {
            estimate,
            standard_error: variance.sqrt(),
            degrees_of_freedom,
        })
    }

    /// The inverse-variance-weighted mean of two independent estimates of one quantity, with
    /// Welch–Satterthwaite's degrees of freedom for the weighted sum.
    pub fn combine(a: &Measurement, b: &Measurement) -> Measurement {
        let parts = [
            (a.estimate, a.standard_error, a.degrees_of_freedom),
            (b.estimate, b.standard_error, b.degrees_of_freedom),
        ];
        match crate::history::weighted_mean(&parts) {
            Some((estimate, standard_error, degrees_of_freedom)) => {
                Measurement { estimate, standard_error, degrees_of_freedom }
            }
            None => *b,
        }
    }

    /// The two-sided `1 - 2 alpha` interval (each bound one-sided at `alpha`).
    pub fn interval(&self, alpha: f64) -> (f64, f64) {
        let half = quantile(1.0 - alpha, self.degrees_of_freedom) * self.standard_error;
        (self.estimate - half, self.estimate + half)
    }
}

/// The `p` quantile of Student's t, the normal's for (near-)infinite degrees of freedom.
fn quantile(p: f64, degrees_of_freedom: f64) -> f64 {
    if degrees_of_freedom > NORMAL_DF {
        crate::stats::z_two_sided(2.0 * (1.0 - p))
    } else {
        t_quantile(p, degrees_of_freedom).unwrap_or(f64::INFINITY)
    }
}

/// What a link of a chain came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Source {
    /// A merged PR.
    Pr { number: u64, title: String, url: Option<String>, at: String },
    /// An anchor run that replaced the chain before it.
    Anchor { at: String, head_commit: String, run: Option<String> },
}

/// One link of a chain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    pub source: Source,
    pub measurement: Measurement,
}

/// One point of a chain's history, for the page: after each event that touched the cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// The event: a merged PR, or an anchor run.
    pub source: Source,
    /// The PR's own change (or the anchor's measurement), on the chain's scale.
    pub own: Measurement,
    /// The chain after it.
    pub chained: Measurement,
    /// For an anchor: whether it agreed with the chain (kept) or replaced it.
    pub anchor: Option<AnchorOutcome>,
}

/// What an anchor run did to a chain.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AnchorOutcome {
    /// The chain's estimate of the distance the anchor measured (the links its head holds).
    pub chained: Option<Measurement>,
    pub agrees: bool,
}

/// One cell's chain since the reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chain {
    pub cell: Cell,
    /// The last anchor run's estimate of the distance to its head, when one was recorded.
    pub base: Option<Base>,
    /// The merged PRs since the reference (those an anchor replaced left out).
    pub links: Vec<Link>,
    pub points: Vec<Point>,
}

/// What an anchor run left a chain with: the estimate of the distance from the reference to
/// its head, and the PRs that distance holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Base {
    /// The anchor run.
    pub source: Source,
    /// The anchor's own estimate, or, when it agreed with the chain, their weighted mean.
    pub measurement: Measurement,
    pub agreed: bool,
    /// The merged PRs (by number) its head holds.
    pub covers: BTreeSet<u64>,
}

impl Chain {
    /// The chained measurement now: the base, and every PR it does not hold; `None` before any.
    pub fn total(&self) -> Option<Measurement> {
        let base = self.base.iter().map(|base| &base.measurement);
        Measurement::sum(base.chain(self.uncovered().map(|link| &link.measurement)))
    }

    /// The links the base does not hold.
    fn uncovered(&self) -> impl Iterator<Item = &Link> {
        self.links.iter().filter(|link| !self.base.as_ref().is_some_and(|base| base.holds(link)))
    }

    /// The chain's estimate of the distance to a head that holds `covers`: the base (when the
    /// head holds all of it) and the links it holds beyond the base.
    fn estimate_of(&self, covers: &BTreeSet<u64>) -> Option<Measurement> {
        let base = self.base.as_ref().filter(|base| base.covers.is_subset(covers));
        let held = |link: &&Link| match &link.source {
            Source::Pr { number, .. } => covers.contains(number),
            Source::Anchor { .. } => false,
        };
        let links = self
            .links
            .iter()
            .filter(|link| !base.is_some_and(|base| base.holds(link)))
            .filter(held)
            .map(|link| &link.measurement);
        Measurement::sum(base.map(|base| &base.measurement).into_iter().chain(links))
    }
}

impl Base {
    fn holds(&self, link: &Link) -> bool {
        matches!(&link.source, Source::Pr { number, .. } if self.covers.contains(number))
    }
}

/// Where a guard stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GuardState {
    /// The chained loss is inside the budget, with confidence.
    Within,
    /// Not decided: the interval holds the budget.
    Open,
    /// The chained loss is over the budget, with confidence.
    Tripped,
}

/// One contribution to a chain, for the alarm's "most from".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Contribution {
    pub source: Source,
    /// On the cell's shown scale (speed: the PR's own change, +0.015; accuracy: a difference).
    pub shown: f64,
}

/// A guard's judgement of one cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Guard {
    pub cell: Cell,
    pub state: GuardState,
    /// The chained change, shown (speed: `exp(M) - 1`; accuracy: the difference).
    pub change: f64,
    /// Its two-sided `1 - 2 alpha` interval, shown.
    pub interval: (f64, f64),
    /// The budget on the shown scale: speed +0.03 (a loss), accuracy -0.015 (a drop).
    pub budget: f64,
    pub alpha: f64,
    /// How many measurements the chain holds: its PRs, and an anchor run's.
    pub links: usize,
    /// The largest contributions to the loss, largest first (at most `[drift] top`).
    pub top: Vec<Contribution>,
}

/// An anchor's check of one cell, for the page and the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnchorCheck {
    pub cell: Cell,
    pub at: String,
    pub head_commit: String,
    pub anchor: Measurement,
    pub outcome: AnchorOutcome,
}

/// Everything the ledger says since the reference.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct History {
    /// The reference: the last reset's commit, else the base of the first merged PR.
    pub reference: Option<Reference>,
    pub chains: Vec<Chain>,
    pub anchors: Vec<AnchorCheck>,
    /// Merged PRs since the reference that have nothing measured, by number.
    pub unmeasured: Vec<u64>,
    /// Merged PRs since the reference (measured or not).
    pub merged: usize,
    /// Anchor runs since the reference that measured from another commit (left out).
    pub other_anchors: usize,
}

/// The reference a chain runs from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reference {
    pub commit: String,
    /// Its name (a release tag), when the reset gave one.
    pub name: Option<String>,
    /// When it was set (a reset), else `None`: the start of the ledger.
    pub at: Option<String>,
    pub reason: Option<String>,
}

impl Reference {
    /// `v1.2.0 (1a2b3c4d5e6f)` or `1a2b3c4d5e6f`.
    pub fn describe(&self) -> String {
        let short = crate::history::short(&self.commit);
        match &self.name {
            Some(name) => format!("{name} ({short})"),
            None => short.to_owned(),
        }
    }
}

/// The chains of the ledger's lines since the last reset: each covered speed cell and each
/// accuracy benchmark, with every anchor's check applied in order.
pub fn history(lines: &[Line], config: &GateConfig) -> History {
    let mut reading = Reading { history: History::default(), chains: BTreeMap::new() };
    for line in lines {
        match line {
            Line::Reset(reset) => reading.reset(reset),
            Line::Merged(merged) => reading.merged(merged),
            Line::Anchor(anchor) => reading.anchor(anchor, config.drift.alpha.get()),
        }
    }
    let Reading { mut history, chains } = reading;
    history.chains = chains.into_values().collect();
    history
}

/// The ledger read so far: the history and its chains by cell.
struct Reading {
    history: History,
    chains: BTreeMap<Cell, Chain>,
}

impl Reading {
    /// A reset starts everything again from its reference.
    fn reset(&mut self, reset: &Reset) {
        self.chains.clear();
        self.history = History {
            reference: Some(Reference {
                commit: reset.reference_commit.clone(),
                name: reset.reference_name.clone(),
                at: Some(reset.at.clone()),
                reason: Some(reset.reason.clone()),
            }),
            ..History::default()
        };
    }

    /// A merged PR adds a link to the chain of every cell it measured.
    fn merged(&mut self, merged: &Merged) {
        let history = &mut self.history;
        history.merged += 1;
        if history.reference.is_none() {
            history.reference = merged.base_commit.clone().map(|commit| Reference {
                commit,
                name: None,
                at: None,
                reason: None,
            });
        }
        let source = Source::Pr {
            number: merged.pr,
            title: merged.title.clone(),
            url: merged.url.clone(),
            at: merged.at.clone(),
        };
        let cells = cells_of(&merged.speed, &merged.accuracy);
        if cells.is_empty() {
            history.unmeasured.push(merged.pr);
        }
        for (cell, measurement) in cells {
            let chain = self.chains.entry(cell.clone()).or_insert_with(|| Chain::new(cell));
            chain.links.push(Link { source: source.clone(), measurement });
            let chained = chain.total().unwrap_or(measurement);
            chain.points.push(Point {
                source: source.clone(),
                own: measurement,
                chained,
                anchor: None,
            });
        }
    }

    /// An anchor of this reference is checked against the chain of every cell it measured;
    /// one of another reference measured another distance and is only counted.
    fn anchor(&mut self, anchor: &Anchor, alpha: f64) {
        let reference = self.history.reference.as_ref().map(|r| r.commit.as_str());
        if reference.is_some_and(|commit| commit != anchor.reference_commit) {
            self.history.other_anchors += 1;
            return;
        }
        if reference.is_none() {
            self.history.reference = Some(Reference {
                commit: anchor.reference_commit.clone(),
                name: None,
                at: None,
                reason: None,
            });
        }
        let covers: BTreeSet<u64> = anchor.covers.iter().copied().collect();
        let source = Source::Anchor {
            at: anchor.at.clone(),
            head_commit: anchor.head_commit.clone(),
            run: anchor.run.clone(),
        };
        for (cell, measured) in cells_of(&anchor.speed, &anchor.accuracy) {
            let chain = self.chains.entry(cell.clone()).or_insert_with(|| Chain::new(cell.clone()));
            let outcome = chain.apply_anchor(&source, &covers, measured, alpha);
            self.history.anchors.push(AnchorCheck {
                cell,
                at: anchor.at.clone(),
                head_commit: anchor.head_commit.clone(),
                anchor: measured,
                outcome,
            });
        }
    }
}

impl Chain {
    fn new(cell: Cell) -> Chain {
        Chain { cell, base: None, links: Vec::new(), points: Vec::new() }
    }

    /// Checks an anchor's measurement against the chain's estimate of the distance it covers:
    /// when they agree the two are combined into the chain's base; when not, the anchor
    /// replaces the PRs it covers.
    fn apply_anchor(
        &mut self,
        source: &Source,
        covers: &BTreeSet<u64>,
        measured: Measurement,
        alpha: f64,
    ) -> AnchorOutcome {
        let chained = self.estimate_of(covers);
        let agrees = chained.is_some_and(|chained| agree(&chained, &measured, alpha));
        let outcome = AnchorOutcome { chained, agrees };
        let measurement = match chained {
            Some(chained) if agrees => Measurement::combine(&chained, &measured),
            _ => measured,
        };
        if !agrees {
            // The PRs it holds are no longer the chain's: the anchor replaced them.
            self.links.retain(|link| match &link.source {
                Source::Pr { number, .. } => !covers.contains(number),
                Source::Anchor { .. } => true,
            });
        }
        self.base = Some(Base {
            source: source.clone(),
            measurement,
            agreed: agrees,
            covers: covers.clone(),
        });
        let now = self.total().unwrap_or(measured);
        self.points.push(Point {
            source: source.clone(),
            own: measured,
            chained: now,
            anchor: Some(outcome),
        });
        outcome
    }
}

/// Whether the chain's and the anchor's estimates of one distance agree: their difference's
/// two-sided `1 - alpha` interval holds zero.
fn agree(chained: &Measurement, anchor: &Measurement, alpha: f64) -> bool {
    let difference = Measurement {
        estimate: chained.estimate - anchor.estimate,
        ..Measurement::sum([chained, anchor]).unwrap_or(*anchor)
    };
    let half =
        quantile(1.0 - alpha / 2.0, difference.degrees_of_freedom) * difference.standard_error;
    difference.estimate.abs() <= half
}

/// The guarded cells of a line: covered speed cells and accuracy benchmarks.
fn cells_of(speed: &[SpeedChange], accuracy: &[AccuracyChange]) -> Vec<(Cell, Measurement)> {
    let speed = speed.iter().filter(|cell| cell.covered).map(|cell| {
        let key = Cell::Speed { model: cell.model.clone(), concurrency: cell.concurrency };
        (key, Measurement::of_speed(cell))
    });
    let accuracy = accuracy.iter().map(|cell| {
        let key = Cell::Accuracy { model: cell.model.clone(), benchmark: cell.benchmark.clone() };
        (key, Measurement::of_accuracy(cell))
    });
    speed.chain(accuracy).collect()
}

/// The guard of one chain; `None` before any link.
pub fn guard(chain: &Chain, config: &GateConfig) -> Option<Guard> {
    let drift = &config.drift;
    let alpha = drift.alpha.get();
    let total = chain.total()?;
    let cell = &chain.cell;
    // On the loss scale: speed's log-ratio, accuracy's drop.
    let (budget_shown, budget_loss) = match cell {
        Cell::Speed { .. } => (drift.speed_budget.get(), drift.speed_budget.get().ln_1p()),
        Cell::Accuracy { benchmark, .. } => {
            let drop = drift.accuracy_budget * config.accuracy_tolerance(benchmark).get();
            (-drop, drop)
        }
    };
    let sign = cell.loss_sign();
    let (low, high) = total.interval(alpha);
    let (loss_low, loss_high) = if sign > 0.0 { (low, high) } else { (-high, -low) };
    let state = if loss_low > budget_loss {
        GuardState::Tripped
    } else if loss_high < budget_loss {
        GuardState::Within
    } else {
        GuardState::Open
    };
    // The PRs, and an anchor that replaced the ones it holds.
    let replacing = chain
        .base
        .iter()
        .filter(|base| !base.agreed)
        .map(|base| Link { source: base.source.clone(), measurement: base.measurement });
    let mut contributions: Vec<(f64, Contribution)> = replacing
        .chain(chain.links.iter().cloned())
        .map(|link| {
            let loss = sign * link.measurement.estimate;
            let shown = cell.shown(link.measurement.estimate);
            (loss, Contribution { source: link.source, shown })
        })
        .filter(|(loss, _)| *loss > 0.0)
        .collect();
    contributions.sort_by(|a, b| b.0.total_cmp(&a.0));
    Some(Guard {
        cell: cell.clone(),
        state,
        change: cell.shown(total.estimate),
        interval: (cell.shown(low), cell.shown(high)),
        budget: budget_shown,
        alpha,
        links: chain.links.len() + usize::from(chain.base.is_some()),
        top: contributions.into_iter().take(drift.top).map(|(_, c)| c).collect(),
    })
}

/// The chains of the ledger's `lines` ([`history`]) and the guard over each ([`guards`]).
pub fn guarded(lines: &[Line], config: &GateConfig) -> (History, Vec<Guard>) {
    let history = history(lines, config);
    let guards = guards(&history, config);
    (history, guards)
}

/// Every chain's guard, in the chains' order.
pub fn guards(history: &History, config: &GateConfig) -> Vec<Guard> {
    history.chains.iter().filter_map(|chain| guard(chain, config)).collect()
}

#[cfg(test)]
mod tests;
