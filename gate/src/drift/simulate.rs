//! How well the drift guard decides, by simulation of what a repository sees: a sequence of PRs,
//! each measured by the gate's own speed rule pair by pair as the runner measures it
//! (`crate::simulate::simulate_cell`: [`crate::speed::judge_cell`] on bracketed pairs), merged only
//! when it passes (a failed PR, or one the pair cap left undecided — an `error`, not a pass — is
//! measured again, with the same true change, and its line pools every run, as `prgate history
//! record` does), its verdicts' numbers recorded as the ledger
//! records them ([`SpeedChange::from_verdict`], [`SpeedChange::pooled`]), and the
//! guard checked after every merge ([`super::history`], [`super::guard`]), as the comment and the
//! scheduled check see it. Pure and seeded: the same inputs give the same numbers.

use rand::SeedableRng as _;
use rand::rngs::SmallRng;

use crate::config::GateConfig;
use crate::history::{LEDGER_VERSION, Line, Merged, SpeedChange};
use crate::simulate::{SpeedScenario, simulate_cell};
use crate::speed::{Answer, CellContext, CellJudgement};

use super::GuardState;

/// The most times a failing (or undecided) PR is measured again before the simulation gives up on it.
const ATTEMPT_LIMIT: usize = 50;

/// One simulated sequence of merged PRs on one covered cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriftScenario {
    /// Run-to-run noise: the standard deviation of one run's log TPOT.
    pub cv: f64,
    /// How many PRs merge.
    pub prs: usize,
    /// Each PR's true TPOT change: 0.015 is 1.5% slower.
    pub change_per_pr: f64,
}

impl DriftScenario {
    /// The chain's true change after every PR: `(1 + change)^prs - 1`.
    pub fn true_total(&self) -> f64 {
        (1.0 + self.change_per_pr).powi(i32::try_from(self.prs).unwrap_or(i32::MAX)) - 1.0
    }
}

/// What the guard did over the trials of a scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriftOutcomes {
    pub trials: usize,
    /// P(the guard is tripped after the last PR).
    pub p_tripped_at_end: f64,
    /// P(the guard tripped at some check, after any PR).
    pub p_tripped_ever: f64,
    /// The mean chained change shown after the last PR.
    pub mean_chained: f64,
    /// The mean of the chain's interval's upper end minus its lower end, after the last PR.
    pub mean_width: f64,
    /// P(a PR passed the gate at its first measurement).
    pub p_pass_first: f64,
    /// The mean measurements per merged PR (a failed PR is measured again).
    pub mean_attempts: f64,
    /// P(the guard is tripped after an anchor run that follows the last PR: the reference
    /// against the tip, measured by the same rule, checked against the chain and replacing it
    /// when they disagree).
    pub p_tripped_after_anchor: f64,
    /// P(that anchor run disagreed with the chain, and replaced it).
    pub p_anchor_replaced: f64,
}

/// Simulates `trials` sequences of a scenario.
pub fn simulate_drift(
    config: &GateConfig,
    scenario: &DriftScenario,
    trials: usize,
    seed: u64,
) -> DriftOutcomes {
    let mut rng = SmallRng::seed_from_u64(seed);
    let runs = SpeedScenario {
        regressed: 1,
        true_change: scenario.change_per_pr,
        ..SpeedScenario::at_cv(scenario.cv)
    };
    let (mut at_end, mut ever, mut chained, mut width) = (0usize, 0usize, 0.0, 0.0);
    let (mut first_passes, mut attempts) = (0usize, 0usize);
    let (mut after_anchor, mut replaced) = (0usize, 0usize);
    let tip = SpeedScenario { true_change: scenario.true_total(), ..runs };
    for _ in 0..trials {
        let mut lines = Vec::new();
        let mut tripped = false;
        let mut last = None;
        for pr in 0..scenario.prs {
            let (cell, tries) = measure_until_it_passes(config, &runs, &mut rng);
            first_passes += usize::from(tries == 1);
            attempts += tries;
            let Some(cell) = cell else { continue };
            lines.push(Line::Merged(merged(pr as u64 + 1, cell)));
            let history = super::history(&lines, config);
            last = history.chains.first().and_then(|chain| super::guard(chain, config));
            tripped |= last.as_ref().is_some_and(|guard| guard.state == GuardState::Tripped);
        }
        ever += usize::from(tripped);
        if let Some(guard) = last {
            at_end += usize::from(guard.state == GuardState::Tripped);
            chained += guard.change;
            width += guard.interval.1 - guard.interval.0;
        }
        if let Some(cell) = measure(config, &tip, &mut rng) {
            let covers = (1..=scenario.prs as u64).collect();
            lines.push(Line::Anchor(anchor(covers, cell)));
            let history = super::history(&lines, config);
            replaced += usize::from(history.anchors.iter().any(|check| !check.outcome.agrees));
            let guard = history.chains.first().and_then(|chain| super::guard(chain, config));
            after_anchor += usize::from(guard.is_some_and(|g| g.state == GuardState::Tripped));
        }
    }
    let share = |count: f64, of: usize| count / of.max(1) as f64;
    DriftOutcomes {
        trials,
        p_tripped_at_end: share(at_end as f64, trials),
        p_tripped_ever: share(ever as f64, trials),
        mean_chained: share(chained, trials),
        mean_width: share(width, trials),
        p_pass_first: share(first_passes as f64, trials * scenario.prs),
        mean_attempts: share(attempts as f64, trials * scenario.prs),
        p_tripped_after_anchor: share(after_anchor as f64, trials),
        p_anchor_replaced: share(replaced as f64, trials),
    }
}

/// A PR measured by the gate's speed rule until it passes: its cell as the ledger records it,
/// pooled over every run ([`SpeedChange::pooled`], as `prgate history record` pools the runs of
/// a commit; `None` when it never passed within the limit), and how many runs it took.
fn measure_until_it_passes(
    config: &GateConfig,
    runs: &SpeedScenario,
    rng: &mut SmallRng,
) -> (Option<SpeedChange>, usize) {
    let mut cells = Vec::new();
    for attempt in 1..=ATTEMPT_LIMIT {
        let (judgement, cell) = judged(config, runs, rng);
        cells.extend(cell);
        if judgement.loss == Answer::No {
            return (SpeedChange::pooled(&cells), attempt);
        }
    }
    (None, ATTEMPT_LIMIT)
}

/// One measurement by the gate's speed rule, whatever it decides (an anchor run's).
fn measure(config: &GateConfig, runs: &SpeedScenario, rng: &mut SmallRng) -> Option<SpeedChange> {
    judged(config, runs, rng).1
}

/// The rule asked pair by pair until it decides ([`simulate_cell`], on one cell); its judgement,
/// and the cell as the ledger records it.
fn judged(
    config: &GateConfig,
    runs: &SpeedScenario,
    rng: &mut SmallRng,
) -> (CellJudgement, Option<SpeedChange>) {
    let context = CellContext { cells: 1, gain_required: false, calibration: None };
    let judgement = simulate_cell(config, runs, runs.true_change, &context, rng);
    let cell = match (judgement.change, judgement.change_interval, judgement.noise) {
        (Some(change), Some(interval), Some(noise)) => SpeedChange::from_verdict(
            "model",
            1,
            true,
            change,
            interval,
            noise.degrees_of_freedom,
            judgement.pairs,
        ),
        _ => None,
    };
    (judgement, cell)
}

fn anchor(covers: Vec<u64>, cell: SpeedChange) -> crate::history::Anchor {
    crate::history::Anchor {
        version: LEDGER_VERSION,
        at: String::new(),
        reference_commit: "reference".to_owned(),
        head_commit: "tip".to_owned(),
        run: None,
        covers,
        speed: vec![cell],
        accuracy: Vec::new(),
    }
}

fn merged(pr: u64, cell: SpeedChange) -> Merged {
    Merged {
        version: LEDGER_VERSION,
        at: String::new(),
        pr,
        title: format!("PR {pr}"),
        url: None,
        merge_commit: format!("merge-{pr}"),
        head_commit: format!("head-{pr}"),
        base_commit: Some("reference".to_owned()),
        run: None,
        verdict: None,
        speed: vec![cell],
        accuracy: Vec::new(),
        note: None,
    }
}

/// The scenarios `prgate history simulate` tables (bench/drift-guard.md): five small losses
/// that each pass, the same count with no loss, a long run of no loss, and a chain exactly at
/// the budget, at three noise levels.
pub fn scenarios(config: &GateConfig) -> Vec<(String, DriftScenario)> {
    let budget = config.drift.speed_budget.get();
    let at_budget = |prs: usize| (1.0 + budget).powf(1.0 / prs as f64) - 1.0;
    let mut out = Vec::new();
    for cv in [0.01, 0.02, 0.03] {
        for (what, prs, change) in [
            ("5 small losses", 5, 0.015),
            ("5 losses of 1%", 5, 0.01),
            ("zero loss", 5, 0.0),
            ("zero loss, long", 20, 0.0),
            ("at the budget", 5, at_budget(5)),
        ] {
            out.push((what.to_owned(), DriftScenario { cv, prs, change_per_pr: change }));
        }
    }
    out
}

/// The scenarios' outcomes as a Markdown table.
pub fn markdown(config: &GateConfig, trials: usize, seed: u64) -> String {
    let mut out = String::from(
        "| scenario | CV | PRs × true change | true total | P(a PR passes first time) | measurements per merged PR | mean chained | mean interval width | P(tripped after the last PR) | P(tripped at any check) | P(tripped after an anchor run) | P(the anchor replaced the chain) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (salt, (what, scenario)) in scenarios(config).into_iter().enumerate() {
        let outcome = simulate_drift(config, &scenario, trials, seed.wrapping_add(salt as u64));
        out.push_str(&format!(
            "| {what} | {:.0}% | {} × {:+.2}% | {:+.2}% | {:.1}% | {:.2} | {:+.2}% | {:.2} pp | {:.1}% | {:.1}% | {:.1}% | {:.1}% |\n",
            scenario.cv * 100.0,
            scenario.prs,
            scenario.change_per_pr * 100.0,
            scenario.true_total() * 100.0,
            outcome.p_pass_first * 100.0,
            outcome.mean_attempts,
            outcome.mean_chained * 100.0,
            outcome.mean_width * 100.0,
            outcome.p_tripped_at_end * 100.0,
            outcome.p_tripped_ever * 100.0,
            outcome.p_tripped_after_anchor * 100.0,
            outcome.p_anchor_replaced * 100.0,
        ));
    }
    out
}
