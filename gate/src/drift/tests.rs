use proptest::prelude::*;

use super::simulate::{DriftScenario, simulate_drift};
use super::*;
use crate::history::{Anchor, CellProvenance, LEDGER_VERSION, Merged, Reset};

fn speed(log_ratio: f64, standard_error: f64, df: f64) -> SpeedChange {
    SpeedChange {
        model: "kimi".to_owned(),
        concurrency: 1,
        covered: true,
        provenance: CellProvenance::default(),
        change: log_ratio.exp() - 1.0,
        interval: (0.0, 0.0),
        log_ratio,
        standard_error,
        degrees_of_freedom: df,
        pairs: 5,
    }
}

fn merged(pr: u64, cells: Vec<SpeedChange>) -> Line {
    Line::Merged(Merged {
        version: LEDGER_VERSION,
        at: format!("2026-12-0{}T00:00:00Z", pr % 9 + 1),
        pr,
        title: format!("PR {pr}"),
        url: Some(format!("https://github.com/o/r/pull/{pr}")),
        merge_commit: format!("merge{pr}"),
        head_commit: format!("head{pr}"),
        base_commit: Some("ref".to_owned()),
        run: None,
        verdict: None,
        speed: cells,
        accuracy: Vec::new(),
        note: None,
    })
}

fn anchor(covers: &[u64], cell: SpeedChange) -> Line {
    Line::Anchor(Anchor {
        version: LEDGER_VERSION,
        at: "2026-12-09T00:00:00Z".to_owned(),
        reference_commit: "ref".to_owned(),
        head_commit: "tip".to_owned(),
        run: None,
        covers: covers.to_vec(),
        speed: vec![cell],
        accuracy: Vec::new(),
    })
}

fn reset(commit: &str) -> Line {
    Line::Reset(Reset {
        version: LEDGER_VERSION,
        at: "2026-12-10T00:00:00Z".to_owned(),
        reference_commit: commit.to_owned(),
        reference_name: Some("v2".to_owned()),
        reason: "accepted".to_owned(),
        by: Some("maintainer".to_owned()),
    })
}

/// The guard of the one chain, in words: its state, the chained change and interval (percent),
/// and the PRs it names.
fn check(lines: &[Line]) -> String {
    let config = GateConfig::defaults();
    let history = history(lines, &config);
    let guards = guards(&history, &config);
    let Some(guard) = guards.first() else { return "no chain".to_owned() };
    let top: Vec<String> = guard
        .top
        .iter()
        .map(|c| match &c.source {
            Source::Pr { number, .. } => format!("#{number} {:+.2}%", c.shown * 100.0),
            Source::Anchor { .. } => format!("anchor {:+.2}%", c.shown * 100.0),
        })
        .collect();
    format!(
        "{:?} {:+.2}% [{:+.2}%, {:+.2}%] over {} link(s); most from {}",
        guard.state,
        guard.change * 100.0,
        guard.interval.0 * 100.0,
        guard.interval.1 * 100.0,
        guard.links,
        if top.is_empty() { "none".to_owned() } else { top.join(", ") }
    )
}

#[test]
fn the_guard_over_sequences_of_merged_prs() {
    let small = |pr| merged(pr, vec![speed(0.015f64.ln_1p(), 0.003, 9.0)]);
    let zero = |pr| merged(pr, vec![speed(0.0, 0.003, 9.0)]);
    let five_small: Vec<Line> = (1..=5).map(small).collect();
    let cases: Vec<(&str, Vec<Line>, &str)> = vec![
        ("nothing merged", vec![], "no chain"),
        (
            "one small loss: inside the budget, with confidence",
            vec![small(1)],
            "Within +1.50% [+0.94%, +2.06%] over 1 link(s); most from #1 +1.50%",
        ),
        (
            "five small losses that each passed: their sum is over the 3% budget",
            five_small.clone(),
            "Tripped +7.73% [+6.52%, +8.95%] over 5 link(s); most from #1 +1.50%, #2 +1.50%, #3 +1.50%",
        ),
        (
            "five PRs with no loss",
            (1..=5).map(zero).collect(),
            "Within +0.00% [-1.12%, +1.13%] over 5 link(s); most from none",
        ),
        (
            "two small losses: the interval holds the budget",
            (1..=2).map(small).collect(),
            "Open +3.02% [+2.27%, +3.78%] over 2 link(s); most from #1 +1.50%, #2 +1.50%",
        ),
        (
            "a reset starts the chain again",
            five_small.iter().cloned().chain([reset("ref"), small(6)]).collect(),
            "Within +1.50% [+0.94%, +2.06%] over 1 link(s); most from #6 +1.50%",
        ),
        (
            "an uncovered concurrency is not guarded",
            vec![merged(1, vec![SpeedChange { covered: false, ..speed(0.2, 0.003, 9.0) }])],
            "no chain",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter(|(_, lines, expected)| check(lines) != *expected)
        .map(|(what, lines, expected)| {
            format!("{what}:\n  got      {}\n  expected {expected}", check(lines))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn an_anchor_that_agrees_is_pooled_with_the_chain_and_one_that_disagrees_replaces_it() {
    let small = |pr| merged(pr, vec![speed(0.015f64.ln_1p(), 0.003, 9.0)]);
    let mut lines: Vec<Line> = (1..=4).map(small).collect();
    // The anchor measured the four PRs' distance: about +6.1%, as the chain says.
    lines.push(anchor(&[1, 2, 3, 4], speed(0.06f64.ln_1p(), 0.004, 9.0)));
    lines.push(small(5));
    // Both estimate the four PRs' distance: their weighted mean, narrower than either, and PR
    // 5 on top (five PRs alone: +7.73% [+6.52%, +8.95%]).
    assert_eq!(
        check(&lines),
        "Tripped +7.63% [+6.81%, +8.46%] over 6 link(s); most from #1 +1.50%, #2 +1.50%, #3 +1.50%"
    );
    let history = super::history(&lines, &GateConfig::defaults());
    assert_eq!(history.anchors.len(), 1);
    assert!(history.anchors[0].outcome.agrees);

    // The anchor finds nothing where the chain found +6.1% (a node that differed, a biased
    // link): it wins, and only PR 5, merged after its head, is chained on top.
    let mut lines: Vec<Line> = (1..=4).map(small).collect();
    lines.push(anchor(&[1, 2, 3, 4], speed(0.0, 0.004, 9.0)));
    lines.push(small(5));
    assert_eq!(check(&lines), "Within +1.50% [+0.62%, +2.39%] over 2 link(s); most from #5 +1.50%");
    let history = super::history(&lines, &GateConfig::defaults());
    assert!(!history.anchors[0].outcome.agrees);
    let points: Vec<(bool, String)> = history.chains[0]
        .points
        .iter()
        .map(|point| (point.anchor.is_some(), format!("{:.4}", point.chained.estimate)))
        .collect();
    assert_eq!(points.len(), 6, "{points:?}");
    assert_eq!(points[4], (true, "0.0000".to_owned()), "the anchor's point is its own value");

    // An anchor against another reference measured another distance: left out.
    let mut lines: Vec<Line> = (1..=4).map(small).collect();
    let Line::Anchor(mut other) = anchor(&[1, 2, 3, 4], speed(0.0, 0.004, 9.0)) else {
        unreachable!()
    };
    other.reference_commit = "elsewhere".to_owned();
    lines.push(Line::Anchor(other));
    let history = super::history(&lines, &GateConfig::defaults());
    assert_eq!((history.anchors.len(), history.other_anchors), (0, 1));
}

#[test]
fn accuracy_drops_chain_against_the_benchmarks_tolerance() {
    let drop = |pr: u64, difference: f64| {
        let Line::Merged(mut line) = merged(pr, Vec::new()) else { unreachable!() };
        line.accuracy.push(AccuracyChange {
            model: "kimi".to_owned(),
            benchmark: "gsm8k".to_owned(),
            provenance: CellProvenance::default(),
            difference,
            interval: (difference - 0.005, difference + 0.005),
            alpha: 0.01,
            standard_error: 0.002,
            questions: 1319,
        });
        Line::Merged(line)
    };
    // Five drops of half a point: 2.5 points in all, over GSM8K's 1.5-point tolerance.
    let lines: Vec<Line> = (1..=5).map(|pr| drop(pr, -0.005)).collect();
    assert_eq!(
        check(&lines),
        "Tripped -2.50% [-3.24%, -1.76%] over 5 link(s); most from #1 -0.50%, #2 -0.50%, #3 -0.50%"
    );
    let config = GateConfig::defaults();
    let guards = guards(&history(&lines, &config), &config);
    assert!((guards[0].budget + 0.015).abs() < 1e-12);
    let lines: Vec<Line> = (1..=5).map(|pr| drop(pr, 0.001)).collect();
    assert!(check(&lines).starts_with("Within +0.50%"), "{}", check(&lines));
}

#[test]
fn unmeasured_merges_and_the_reference_are_reported() {
    let config = GateConfig::defaults();
    let lines = vec![merged(1, vec![speed(0.01, 0.003, 9.0)]), merged(2, Vec::new())];
    let history = history(&lines, &config);
    assert_eq!(history.unmeasured, [2]);
    assert_eq!(history.merged, 2);
    assert_eq!(history.reference.map(|r| r.describe()), Some("ref".to_owned()));
    let history = super::history(&[reset("0123456789abcdef0123")], &config);
    assert_eq!(history.reference.map(|r| r.describe()), Some("v2 (0123456789ab)".to_owned()));
}

#[test]
fn chained_errors_add_as_variances_with_welch_satterthwaites_degrees_of_freedom() {
    let part = |se: f64, df: f64| Measurement {
        estimate: 0.01,
        standard_error: se,
        degrees_of_freedom: df,
    };
    let sum = Measurement::sum(&[part(0.003, 10.0), part(0.003, 10.0)]).expect("a sum");
    assert!((sum.standard_error - 0.003 * 2f64.sqrt()).abs() < 1e-15);
    assert!((sum.degrees_of_freedom - 20.0).abs() < 1e-9);
    // A normal term adds variance and no uncertainty about it.
    let sum = Measurement::sum(&[part(0.003, 10.0), part(0.003, f64::INFINITY)]).expect("a sum");
    assert!((sum.degrees_of_freedom - 40.0).abs() < 1e-9);
    assert_eq!(Measurement::sum(&[]), None);
}

proptest! {
    #[test]
    fn the_guard_trips_exactly_when_its_interval_lies_beyond_the_budget_in_any_order(
        parts in proptest::collection::vec((-0.03f64..0.05, 0.001f64..0.02, 2.0f64..40.0), 1..12),
        rotate in 0usize..12,
    ) {
        let config = GateConfig::defaults();
        let lines: Vec<Line> = parts
            .iter()
            .enumerate()
            .map(|(at, (m, se, df))| merged(at as u64 + 1, vec![speed(*m, *se, *df)]))
            .collect();
        let guard = guards(&history(&lines, &config), &config).remove(0);
        let budget = config.drift.speed_budget.get();
        prop_assert_eq!(guard.state == GuardState::Tripped, guard.interval.0 > budget);
        prop_assert_eq!(guard.state == GuardState::Within, guard.interval.1 < budget);
        prop_assert!(guard.interval.0 <= guard.change && guard.change <= guard.interval.1);
        let mut rotated = lines.clone();
        rotated.rotate_left(rotate % lines.len());
        let again = guards(&history(&rotated, &config), &config).remove(0);
        prop_assert!((again.change - guard.change).abs() < 1e-12);
        prop_assert!((again.interval.0 - guard.interval.0).abs() < 1e-12);
        prop_assert_eq!(again.state, guard.state);
    }
}

/// The claim, measured through the gate's own speed rule: five small losses that each
/// pass trip the 3% budget (the chain alone most of the time, and after an anchor run always);
/// the same count with no loss does not; at the budget the guard keeps its stated error rate.
/// bench/drift-guard.md has the full table (`prgate history simulate`).
#[test]
fn simulated_small_losses_trip_the_budget_and_no_loss_does_not() {
    let config = GateConfig::defaults();
    let alpha = config.drift.alpha.get();
    let trials = 400;
    let run = |cv: f64, prs: usize, change: f64, seed: u64| {
        simulate_drift(&config, &DriftScenario { cv, prs, change_per_pr: change }, trials, seed)
    };
    let small = run(0.01, 5, 0.015, 1);
    assert!(small.p_pass_first > 0.8, "a 1.5% loss passes the gate: {small:?}");
    assert!(small.p_tripped_at_end >= 0.7, "five 1.5% losses at CV 1%, the chain: {small:?}");
    assert!(small.p_tripped_after_anchor >= 0.99, "... and after an anchor run: {small:?}");
    let zero = run(0.01, 5, 0.0, 2);
    assert!(zero.p_tripped_ever <= alpha / 10.0, "no loss at CV 1%: {zero:?}");
    assert!(zero.p_tripped_after_anchor <= alpha / 10.0, "no loss, an anchor: {zero:?}");
    assert!(zero.p_anchor_replaced <= 2.0 * alpha, "an anchor that agrees is kept: {zero:?}");
    let zero_noisy = run(0.03, 20, 0.0, 3);
    assert!(zero_noisy.p_tripped_ever <= alpha, "twenty PRs of no loss at CV 3%: {zero_noisy:?}");
    let budget = config.drift.speed_budget.get();
    let at_budget = run(0.02, 5, (1.0 + budget).powf(0.2) - 1.0, 4);
    assert!(at_budget.p_tripped_at_end <= alpha, "at the budget: {at_budget:?}");
    assert!(
        at_budget.p_tripped_after_anchor <= 2.0 * alpha,
        "at the budget, an anchor: {at_budget:?}"
    );
}
