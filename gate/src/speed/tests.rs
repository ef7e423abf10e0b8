//! The speed rule on fixed pairs: one table of cases, each line pinned to its numbers, so that
//! changing a bound or a constant (the variance factor of a bracketed pair, the MAD's
//! efficiency, a default setting) changes a line and fails.

use super::*;

/// Independent bracketed pairs: the PR's `changes`, the two base runs `spread` either side of
/// 20 ms. No run is shared: an opening run equal to the previous pair's closing one is moved
/// to the next number up, so that the gate does not take the pairs for a chain.
fn bracketed(changes: &[f64], spread: f64) -> Vec<Pair> {
    let mut previous: Option<f64> = None;
    changes
        .iter()
        .enumerate()
        .map(|(at, change)| {
            let s = if at % 2 == 0 { spread } else { -spread };
            let mut before = 20.0 * s.exp();
            if previous.is_some_and(|after| after.to_bits() == before.to_bits()) {
                before = f64::from_bits(before.to_bits() + 1);
            }
            let after = 20.0 / s.exp();
            previous = Some(after);
            Pair::bracketed(before, 20.0 * (1.0 + change), after)
        })
        .collect()
}

/// `pairs` with the second base run of the pairs `at` `factor` times slower.
fn with_base(mut pairs: Vec<Pair>, at: &[usize], factor: f64) -> Vec<Pair> {
    for &at in at {
        let (before, after) = pairs[at].base_runs_ms.expect("bracketed");
        pairs[at] = Pair::bracketed(before, pairs[at].pr_tpot_ms, after * factor);
    }
    pairs
}

fn single(changes: &[f64]) -> Vec<Pair> {
    changes.iter().map(|change| Pair::single(20.0, 20.0 * (1.0 + change))).collect()
}

fn config(overrides: &str) -> GateConfig {
    let table: toml::Table = toml::from_str(overrides).expect("test TOML parses");
    GateConfig::with_overrides(Some(&table), "test").expect("valid overrides")
}

fn check(pairs: &[Pair], config: &GateConfig, context: &CellContext) -> String {
    let j = judge_cell(pairs, config, context);
    let percent = |x: f64| format!("{:+.2}%", x * 100.0);
    let noise = j.noise.map_or_else(
        || "none".to_owned(),
        |n| {
            format!(
                "cv {:.3}% df {:.2}{}",
                n.run_cv * 100.0,
                n.degrees_of_freedom,
                if n.floored { " floored" } else { "" }
            )
        },
    );
    format!(
        "loss {:?} gain {:?} change {} [{}, {}] {noise} outliers {:?} more {}",
        j.loss,
        j.gain,
        j.change.map_or_else(|| "-".to_owned(), percent),
        j.change_interval.map_or_else(|| "-".to_owned(), |i| percent(i.0)),
        j.change_interval.map_or_else(|| "-".to_owned(), |i| percent(i.1)),
        j.outliers,
        needs_another_pair(pairs, config, context),
    )
}

fn alone() -> CellContext {
    CellContext { cells: 1, gain_required: false, calibration: None }
}

#[test]
fn cells_are_decided_by_their_pairs_noise_and_settings() {
    let defaults = GateConfig::defaults();
    let noisy: Vec<f64> = (0..16).map(|i| if i % 2 == 0 { 0.075 } else { -0.035 }).collect();
    let cases: Vec<(&str, Vec<Pair>, GateConfig, CellContext, &str)> = vec![
        (
            "a clear no-loss",
            bracketed(&[0.001, -0.002, 0.0], 0.005),
            defaults.clone(),
            alone(),
            "loss No gain None change -0.03% [-1.83%, +1.80%] cv 1.000% df 5.00 floored outliers [] more false",
        ),
        (
            "a clear loss: three pairs are too few for the pairs' own variance to show it",
            bracketed(&[0.06, 0.061, 0.059], 0.005),
            defaults.clone(),
            alone(),
            "loss Open gain None change +6.00% [+4.09%, +7.94%] cv 1.000% df 5.00 floored outliers [] more true",
        ),
        (
            "below the first look",
            bracketed(&[0.06, 0.061], 0.005),
            defaults.clone(),
            alone(),
            "loss Open gain None change +6.05% [+3.17%, +9.01%] cv 1.000% df 3.00 floored outliers [] more true",
        ),
        (
            "unclear",
            bracketed(&[0.03, 0.0, 0.03], 0.005),
            defaults.clone(),
            alone(),
            "loss Open gain None change +1.99% [-0.56%, +4.61%] cv 1.393% df 5.00 outliers [] more true",
        ),
        (
            "single-base pairs have no in-band A/A",
            single(&[0.06, 0.061, 0.059]),
            defaults.clone(),
            alone(),
            "loss Open gain None change +6.00% [+2.34%, +9.79%] cv 1.000% df 2.00 floored outliers [] more true",
        ),
        (
            "A/A noise counts: a noisy base widens",
            bracketed(&[0.001, -0.002, 0.0], 0.03),
            defaults.clone(),
            alone(),
            "loss Open gain None change -0.03% [-5.83%, +6.12%] cv 3.287% df 5.00 outliers [] more true",
        ),
        (
            "the last look leaves what is undecided undecided: not a pass",
            bracketed(&noisy, 0.04),
            defaults.clone(),
            alone(),
            "loss Undecided gain None change +1.85% [-1.37%, +5.18%] cv 5.152% df 31.00 outliers [] more false",
        ),
        (
            "one look before it is still open",
            bracketed(&noisy[..15], 0.04),
            defaults.clone(),
            alone(),
            "loss Open gain None change +2.22% [-1.13%, +5.68%] cv 5.153% df 29.00 outliers [] more true",
        ),
        (
            "a 2x base run is excluded",
            with_base(
                bracketed(&[0.06, 0.061, 0.059, 0.06, 0.06, 0.061, 0.059, 0.06], 0.005),
                &[1],
                2.0,
            ),
            defaults.clone(),
            alone(),
            "loss Yes gain None change +5.99% [+4.93%, +7.05%] cv 1.000% df 13.00 floored outliers [1] more false",
        ),
        (
            "base runs 12% apart are an outlier, even with the right mean",
            {
                let mut p = bracketed(&[0.06, 0.061, 0.059, 0.06, 0.06, 0.061, 0.059, 0.06], 0.005);
                p[2] = Pair::bracketed(20.0 * 0.06f64.exp(), 20.0 * 1.059, 20.0 / 0.06f64.exp());
                p
            },
            defaults.clone(),
            alone(),
            "loss Yes gain None change +6.01% [+4.96%, +7.08%] cv 1.000% df 13.00 floored outliers [2] more false",
        ),
        (
            "a 20%-slow base run is excluded",
            with_base(
                bracketed(&[0.06, 0.061, 0.059, 0.06, 0.06, 0.061, 0.059, 0.06], 0.005),
                &[1],
                1.2,
            ),
            defaults.clone(),
            alone(),
            "loss Yes gain None change +5.99% [+4.93%, +7.05%] cv 1.000% df 13.00 floored outliers [1] more false",
        ),
        (
            "... not at an outlier threshold of 24",
            with_base(
                bracketed(&[0.06, 0.061, 0.059, 0.06, 0.06, 0.061, 0.059, 0.06], 0.005),
                &[1],
                1.2,
            ),
            config("[speed]\noutlier-threshold = 24.0"),
            alone(),
            "loss Open gain None change +4.80% [+1.03%, +8.70%] cv 3.965% df 15.00 outliers [] more true",
        ),
        (
            "... nor with max-outliers 0",
            with_base(
                bracketed(&[0.06, 0.061, 0.059, 0.06, 0.06, 0.061, 0.059, 0.06], 0.005),
                &[1],
                1.2,
            ),
            config("[speed]\nmax-outliers = 0"),
            alone(),
            "loss Open gain None change +4.80% [+1.03%, +8.70%] cv 3.965% df 15.00 outliers [] more true",
        ),
        (
            "three outliers are more than max-outliers",
            with_base(bracketed(&[0.06; 10], 0.005), &[1, 4, 7], 2.0),
            defaults.clone(),
            alone(),
            "loss Open gain None change -4.47% [-19.89%, +13.92%] cv 21.719% df 19.00 outliers [] more true",
        ),
        (
            "... but not more than 8",
            with_base(bracketed(&[0.06; 10], 0.005), &[1, 4, 7], 2.0),
            config("[speed]\nmax-outliers = 8"),
            alone(),
            "loss Yes gain None change +6.00% [+4.95%, +7.07%] cv 1.000% df 13.00 floored outliers [1, 4, 7] more false",
        ),
        (
            "a calibration adds capped degrees of freedom",
            bracketed(&[0.03, 0.0, 0.03], 0.005),
            defaults.clone(),
            CellContext {
                cells: 1,
                gain_required: false,
                calibration: Some(Calibration { log_ratio_variance: 0.0008, samples: 40 }),
            },
            "loss Open gain None change +1.99% [-0.65%, +4.70%] cv 1.739% df 15.00 outliers [] more true",
        ),
        (
            "... capped lower",
            bracketed(&[0.03, 0.0, 0.03], 0.005),
            config("[speed]\ncalibration-df = 2.5"),
            CellContext {
                cells: 1,
                gain_required: false,
                calibration: Some(Calibration { log_ratio_variance: 0.0008, samples: 40 }),
            },
            "loss Open gain None change +1.99% [-0.39%, +4.43%] cv 1.432% df 7.50 outliers [] more true",
        ),
        (
            "... a few differences count for less",
            bracketed(&[0.03, 0.0, 0.03], 0.005),
            defaults.clone(),
            CellContext {
                cells: 1,
                gain_required: false,
                calibration: Some(Calibration {
                    log_ratio_variance: 0.0008,
                    samples: LEGACY_CALIBRATION_SAMPLES,
                }),
            },
            "loss Open gain None change +1.99% [-0.43%, +4.47%] cv 1.471% df 7.96 outliers [] more true",
        ),
        (
            "a loss just over the line, not shown over 0%: the pass bound decides",
            bracketed(&[0.03, 0.02, 0.025, 0.026, 0.03, 0.02], 0.005),
            defaults.clone(),
            alone(),
            "loss No gain None change +2.52% [+1.39%, +3.65%] cv 1.000% df 11.00 floored outliers [] more false",
        ),
        (
            "... fails at alpha 0.08",
            bracketed(&[0.03, 0.02, 0.025, 0.026, 0.03, 0.02], 0.005),
            config("[speed]\nalpha = 0.08"),
            alone(),
            "loss Yes gain None change +2.52% [+1.39%, +3.65%] cv 1.000% df 11.00 floored outliers [] more false",
        ),
        (
            "... but not in a family of 4",
            bracketed(&[0.03, 0.02, 0.025, 0.026, 0.03, 0.02], 0.005),
            config("[speed]\nalpha = 0.08"),
            CellContext { cells: 4, gain_required: false, calibration: None },
            "loss No gain None change +2.52% [+1.39%, +3.65%] cv 1.000% df 11.00 floored outliers [] more false",
        ),
        (
            "a borderline pass: open",
            bracketed(&[0.024, 0.02, 0.022, 0.023], 0.005),
            defaults.clone(),
            alone(),
            "loss Open gain None change +2.22% [+0.76%, +3.72%] cv 1.000% df 7.00 floored outliers [] more true",
        ),
        (
            "... passes at beta 0.2",
            bracketed(&[0.024, 0.02, 0.022, 0.023], 0.005),
            config("[speed]\nbeta = 0.2"),
            alone(),
            "loss No gain None change +2.22% [+0.76%, +3.72%] cv 1.000% df 7.00 floored outliers [] more false",
        ),
        (
            "min-cv floors the noise",
            bracketed(&[0.001, -0.002, 0.0], 0.005),
            config("[speed]\nmin-cv = 0.04"),
            alone(),
            "loss Open gain None change -0.03% [-7.04%, +7.51%] cv 4.000% df 5.00 floored outliers [] more true",
        ),
        (
            "a 3% loss",
            bracketed(&[0.03, 0.031, 0.029], 0.005),
            defaults.clone(),
            alone(),
            "loss Open gain None change +3.00% [+1.14%, +4.89%] cv 1.000% df 5.00 floored outliers [] more true",
        ),
        (
            "... in a zone of 8%",
            bracketed(&[0.03, 0.031, 0.029], 0.005),
            config("[speed]\nzone = 0.08"),
            alone(),
            "loss No gain None change +3.00% [+1.14%, +4.89%] cv 1.000% df 5.00 floored outliers [] more false",
        ),
        (
            "... with a loss limit of 8%",
            bracketed(&[0.03, 0.031, 0.029], 0.005),
            config("[speed]\nmax-loss = 0.08"),
            alone(),
            "loss No gain None change +3.00% [+1.14%, +4.89%] cv 1.000% df 5.00 floored outliers [] more false",
        ),
        (
            "a gain is a question of its own",
            bracketed(&[-0.10, -0.101, -0.099, -0.10, -0.101, -0.099, -0.1], 0.005),
            defaults.clone(),
            CellContext { cells: 1, gain_required: true, calibration: None },
            "loss No gain Some(Yes) change -10.00% [-10.90%, -9.10%] cv 1.000% df 13.00 floored outliers [] more false",
        ),
        (
            "a small gain is not the one required",
            bracketed(&[-0.01, -0.011, -0.009], 0.005),
            defaults.clone(),
            CellContext { cells: 1, gain_required: true, calibration: None },
            "loss No gain Some(No) change -1.00% [-2.78%, +0.82%] cv 1.000% df 5.00 floored outliers [] more false",
        ),
    ];
    let mut failures = Vec::new();
    for (name, pairs, config, context, expected) in cases {
        let got = check(&pairs, &config, &context);
        if got != expected {
            failures.push(format!("{name}\n  got:      {got}\n  expected: {expected}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn chained_pairs_count_their_shared_base_runs() {
    // b0 p1 b1 p2 b2 ... b5: five pairs from eleven runs, each closing run opening the next.
    let runs = [20.0, 20.3, 19.9, 20.4, 20.1, 20.2, 19.8, 20.5, 20.0, 20.2, 20.1];
    let chained: Vec<Pair> =
        (0..5).map(|k| Pair::bracketed(runs[2 * k], runs[2 * k + 1], runs[2 * k + 2])).collect();
    let weights = [1.0 / 1.5; 5];
    let chain = Chain::of(&chained, &weights);
    assert!((chain.mean_variance - 9.5 / 25.0).abs() < 1e-12, "{}", chain.mean_variance);
    assert!((chain.residual_expectation - 5.6 / 1.5).abs() < 1e-12);
    assert!((chain.difference_df - 50.0 / 14.0).abs() < 1e-12);
    // Fifteen runs, none shared: independent pairs, the usual counts.
    let independent: Vec<Pair> = (0..5)
        .map(|k| Pair::bracketed(runs[2 * k] + 0.01, runs[2 * k + 1], runs[2 * k + 2]))
        .collect();
    let unlinked = Chain::of(&independent, &weights);
    assert!((unlinked.mean_variance - 0.3).abs() < 1e-12);
    assert!((unlinked.residual_expectation - 4.0).abs() < 1e-12);
    assert!((unlinked.difference_df - 5.0).abs() < 1e-12);
    // The same numbers judge wider chained: the shared runs are not counted twice.
    let width = |pairs: &[Pair]| {
        let (low, high) = judge_cell(pairs, &GateConfig::defaults(), &alone())
            .change_interval
            .expect("an interval");
        high - low
    };
    assert!(width(&chained) > width(&independent));
}

#[test]
fn an_undecided_cell_says_what_would_decide_it() {
    let defaults = GateConfig::defaults();
    let noisy = |n: usize| -> Vec<f64> {
        (0..n).map(|i| if i % 2 == 0 { 0.075 } else { -0.035 }).collect()
    };
    let judgement = judge_cell(&bracketed(&noisy(16), 0.04), &defaults, &alone());
    assert_eq!(judgement.loss, Answer::Undecided);
    let to_decide = judgement.to_decide.expect("an undecided cell says what would decide it");
    let percent = |x: f64| format!("{:+.2}%", x * 100.0);
    assert_eq!(
        format!(
            "bounds [{}, {}] zone [{}, {}] pairs {:?} more {:?} runs {:?}",
            percent(to_decide.lower),
            percent(to_decide.upper),
            percent(to_decide.low),
            percent(to_decide.high),
            to_decide.pairs.needed,
            to_decide.pairs.more(),
            to_decide.pairs.more_runs()
        ),
        "bounds [-1.78%, +5.62%] zone [+0.00%, +4.00%] pairs Some(157) more Some(141) runs Some(282)"
    );
    // What it says suffices: with max-pairs raised to it, the same pattern of pairs decides.
    let pairs = to_decide.pairs.needed.expect("a finite number of pairs");
    let raised = config(&format!("[speed]\nmax-pairs = {pairs}"));
    let decided = judge_cell(&bracketed(&noisy(pairs), 0.04), &raised, &alone());
    assert!(matches!(decided.loss, Answer::Yes | Answer::No), "{decided:?}");
    // A decided or open cell has nothing to say.
    assert_eq!(judge_cell(&bracketed(&noisy(15), 0.04), &defaults, &alone()).to_decide, None);
}

/// Every constant of the speed rule matters: halving or doubling any of them changes what a
/// small, seeded set of cells decides (the answer, the pairs it took, what it reported).
#[test]
fn every_constant_of_the_rule_moves_an_outcome_when_halved_or_doubled() {
    use crate::simulate::{SpeedScenario, pr_run, run};
    use rand::SeedableRng as _;
    // (scenario, cells): clean and lossy cells at CV 2%, a quiet node, the node's outliers,
    // a noisier PR, a PR with slow runs, and a stored calibration (right and stale).
    let at = SpeedScenario::at_cv(0.02);
    let loss = SpeedScenario { true_change: 0.04, ..at };
    let scenarios = [
        (at, 6),
        (loss, 6),
        (SpeedScenario { true_change: 0.02, ..at }, 4),
        (SpeedScenario { cv: 0.006, ..at }, 3),
        (SpeedScenario { cv: 0.04, ..loss }, 3),
        (SpeedScenario { outlier_rate: 0.08, ..loss }, 6),
        (SpeedScenario { pr_noise_factor: 2.0, ..at }, 6),
        (SpeedScenario { pr_noise_factor: 1.4, ..at }, 12),
        (SpeedScenario { pr_outlier_rate: 0.15, ..at }, 4),
        (SpeedScenario { calibration_samples: Some(40), ..at }, 4),
        (SpeedScenario { calibration_samples: Some(40), calibration_cv: Some(0.012), ..at }, 12),
        (SpeedScenario { calibration_samples: Some(64), calibration_cv: Some(0.014), ..at }, 12),
        (
            SpeedScenario {
                pr_noise_factor: 1.5,
                true_change: 0.02,
                calibration_samples: Some(64),
                ..at
            },
            12,
        ),
    ];
    let outcomes = |config: &GateConfig| -> Vec<String> {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(23);
        let mut all = Vec::new();
        for (scenario, cells) in scenarios {
            for _ in 0..cells {
                let calibration = scenario.calibration_samples.map(|samples| {
                    let cv = scenario.calibration_cv.unwrap_or(scenario.cv);
                    Calibration { log_ratio_variance: 2.0 * cv * cv, samples }
                });
                let context = CellContext { cells: 2, gain_required: false, calibration };
                let mut pairs = Vec::new();
                let judgement = loop {
                    let before = run(&mut rng, &scenario, 0.0);
                    let pr = pr_run(&mut rng, &scenario, scenario.true_change);
                    let after = run(&mut rng, &scenario, 0.0);
                    pairs.push(Pair::bracketed(before, pr, after));
                    let judgement = judge_cell(&pairs, config, &context);
                    if judgement.loss != Answer::Open || pairs.len() >= 64 {
                        break judgement;
                    }
                };
                all.push(format!(
                    "{:?} {} pairs {:?} df {:?}, outliers {:?}, pr-slow {:?}, growth {}, stale {}, to decide {:?}",
                    judgement.loss,
                    pairs.len(),
                    judgement.change_interval.map(|(low, high)| {
                        ((low * 1e4).round() as i64, (high * 1e4).round() as i64)
                    }),
                    judgement.noise.map(|n| (n.degrees_of_freedom * 100.0).round() as i64),
                    judgement.outliers,
                    judgement.pr_slow,
                    judgement.noise_growth.is_some(),
                    judgement.calibration_stale,
                    judgement.to_decide.and_then(|t| t.pairs.needed),
                ));
            }
        }
        all
    };
    // Two constants matter only in long cells: a noise growth is shown significant, with 16
    // pairs, only beyond about 1.6×, and a borderline stale record needs many differences. Both
    // are judged with max-pairs raised to 60.
    let long = |key: &str| matches!(key, "max-noise-growth" | "stale-calibration-level");
    let defaults = outcomes(&GateConfig::defaults());
    let long_defaults = outcomes(&config("[speed]\nmax-pairs = 60"));
    let keys = [
        ("max-loss", 0.02),
        ("zone", 0.02),
        ("alpha", 0.02),
        ("beta", 0.05),
        ("min-cv", 0.01),
        ("min-pairs", 3.0),
        ("max-pairs", 16.0),
        ("outlier-threshold", 6.0),
        ("max-outliers", 2.0),
        ("calibration-df", 10.0),
        ("noise-test-level", 0.05),
        ("max-noise-growth", 1.5),
        ("stale-calibration-level", 0.01),
    ];
    let mut unmoved = Vec::new();
    for (key, default) in keys {
        let configured = GateConfig::defaults();
        let speed = &configured.speed;
        // The pinned defaults: a changed default changes this table first.
        let current = match key {
            "max-loss" => speed.threshold.get(),
            "zone" => speed.high - speed.threshold.get(),
            "alpha" => speed.alpha.get(),
            "beta" => speed.beta.get(),
            "min-cv" => speed.min_cv.get(),
            "min-pairs" => speed.min_pairs as f64,
            "max-pairs" => speed.max_pairs as f64,
            "outlier-threshold" => speed.outlier_threshold,
            "max-outliers" => speed.max_outliers as f64,
            "calibration-df" => speed.calibration_df,
            "noise-test-level" => speed.noise_level.get(),
            "max-noise-growth" => speed.max_noise_growth,
            _ => speed.stale_level.get(),
        };
        assert!((current - default).abs() < 1e-12, "{key}: the default is {current}");
        for factor in [0.5, 2.0] {
            let value = default * factor;
            let integer = matches!(key, "min-pairs" | "max-pairs" | "max-outliers");
            let text = if integer {
                format!("{}", (value.round() as i64).max(2 - i64::from(key == "max-outliers") * 2))
            } else {
                format!("{value:?}")
            };
            let raised = if long(key) { "\nmax-pairs = 60" } else { "" };
            let changed = config(&format!("[speed]\n{key} = {text}{raised}"));
            if &outcomes(&changed) == if long(key) { &long_defaults } else { &defaults } {
                unmoved.push(format!("{key} = {text}"));
            }
        }
    }
    assert!(unmoved.is_empty(), "no outcome moved with {unmoved:?}");
}
