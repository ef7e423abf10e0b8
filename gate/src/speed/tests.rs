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
    let noisy: Vec<f64> = (0..16).map(|i| if i % 2 == 0 { 0.045 } else { -0.005 }).collect();
    let cases: Vec<(&str, Vec<Pair>, GateConfig, CellContext, &str)> = vec![
        (
            "a clear no-loss",
            bracketed(&[0.001, -0.002, 0.0], 0.005),
            defaults.clone(),
            alone(),
            "loss No gain None change -0.03% [-1.83%, +1.80%] cv 1.000% df 5.00 floored outliers [] more false",
        ),
        (
            "a clear loss",
            bracketed(&[0.06, 0.061, 0.059], 0.005),
            defaults.clone(),
            alone(),
            "loss Yes gain None change +6.00% [+4.09%, +7.94%] cv 1.000% df 5.00 floored outliers [] more false",
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
            "loss Open gain None change +1.99% [+0.08%, +3.93%] cv 1.038% df 5.00 outliers [] more true",
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
            bracketed(&noisy, 0.02),
            defaults.clone(),
            alone(),
            "loss Undecided gain None change +1.97% [+0.40%, +3.57%] cv 2.489% df 31.00 outliers [] more false",
        ),
        (
            "one look before it is still open",
            bracketed(&noisy[..15], 0.02),
            defaults.clone(),
            alone(),
            "loss Open gain None change +2.14% [+0.50%, +3.79%] cv 2.490% df 29.00 outliers [] more true",
        ),
        (
            "a 2x base run is excluded",
            with_base(bracketed(&[0.06, 0.061, 0.059, 0.06], 0.005), &[1], 2.0),
            defaults.clone(),
            alone(),
            "loss Yes gain None change +5.97% [+4.06%, +7.91%] cv 1.000% df 5.00 floored outliers [1] more false",
        ),
        (
            "base runs 12% apart are an outlier, even with the right mean",
            {
                let mut p = bracketed(&[0.06, 0.061, 0.059, 0.06], 0.005);
                p[2] = Pair::bracketed(20.0 * 0.06f64.exp(), 20.0 * 1.059, 20.0 / 0.06f64.exp());
                p
            },
            defaults.clone(),
            alone(),
            "loss Yes gain None change +6.03% [+4.12%, +7.98%] cv 1.000% df 5.00 floored outliers [2] more false",
        ),
        (
            "a 20%-slow base run is excluded",
            with_base(bracketed(&[0.06, 0.061, 0.059, 0.06], 0.005), &[1], 1.2),
            defaults.clone(),
            alone(),
            "loss Yes gain None change +5.97% [+4.06%, +7.91%] cv 1.000% df 5.00 floored outliers [1] more false",
        ),
        (
            "... not at an outlier threshold of 24",
            with_base(bracketed(&[0.06, 0.061, 0.059, 0.06], 0.005), &[1], 1.2),
            config("[speed]\noutlier-threshold = 24.0"),
            alone(),
            "loss Open gain None change +3.61% [-4.59%, +12.51%] cv 5.693% df 7.00 outliers [] more true",
        ),
        (
            "... nor with max-outliers 0",
            with_base(bracketed(&[0.06, 0.061, 0.059, 0.06], 0.005), &[1], 1.2),
            config("[speed]\nmax-outliers = 0"),
            alone(),
            "loss Open gain None change +3.61% [-4.59%, +12.51%] cv 5.693% df 7.00 outliers [] more true",
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
            "a borderline loss",
            bracketed(&[0.03, 0.02, 0.025, 0.026], 0.005),
            defaults.clone(),
            alone(),
            "loss Open gain None change +2.52% [+1.05%, +4.02%] cv 1.000% df 7.00 floored outliers [] more true",
        ),
        (
            "... fails at alpha 0.08",
            bracketed(&[0.03, 0.02, 0.025, 0.026], 0.005),
            config("[speed]\nalpha = 0.08"),
            alone(),
            "loss Yes gain None change +2.52% [+1.05%, +4.02%] cv 1.000% df 7.00 floored outliers [] more false",
        ),
        (
            "... but not in a family of 4",
            bracketed(&[0.03, 0.02, 0.025, 0.026], 0.005),
            config("[speed]\nalpha = 0.08"),
            CellContext { cells: 4, gain_required: false, calibration: None },
            "loss Open gain None change +2.52% [+1.05%, +4.02%] cv 1.000% df 7.00 floored outliers [] more true",
        ),
        (
            "a borderline pass",
            bracketed(&[0.02, 0.018, 0.019, 0.02], 0.005),
            defaults.clone(),
            alone(),
            "loss Open gain None change +1.92% [+0.46%, +3.41%] cv 1.000% df 7.00 floored outliers [] more true",
        ),
        (
            "... passes at beta 0.2",
            bracketed(&[0.02, 0.018, 0.019, 0.02], 0.005),
            config("[speed]\nbeta = 0.2"),
            alone(),
            "loss No gain None change +1.92% [+0.46%, +3.41%] cv 1.000% df 7.00 floored outliers [] more false",
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
            "loss Yes gain None change +3.00% [+1.14%, +4.89%] cv 1.000% df 5.00 floored outliers [] more false",
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
            bracketed(&[-0.10, -0.101, -0.099], 0.005),
            defaults.clone(),
            CellContext { cells: 1, gain_required: true, calibration: None },
            "loss No gain Some(Yes) change -10.00% [-11.62%, -8.35%] cv 1.000% df 5.00 floored outliers [] more false",
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
        (0..n).map(|i| if i % 2 == 0 { 0.045 } else { -0.005 }).collect()
    };
    let judgement = judge_cell(&bracketed(&noisy(16), 0.02), &defaults, &alone());
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
            to_decide.pairs,
            to_decide.more_pairs(),
            to_decide.more_runs()
        ),
        "bounds [-0.52%, +4.23%] zone [+0.00%, +4.00%] pairs Some(30) more Some(14) runs Some(28)"
    );
    // What it says suffices: with max-pairs raised to it, the same pattern of pairs decides.
    let pairs = to_decide.pairs.expect("a finite number of pairs");
    let raised = config(&format!("[speed]\nmax-pairs = {pairs}"));
    let decided = judge_cell(&bracketed(&noisy(pairs), 0.02), &raised, &alone());
    assert!(matches!(decided.loss, Answer::Yes | Answer::No), "{decided:?}");
    // A decided or open cell has nothing to say.
    assert_eq!(judge_cell(&bracketed(&noisy(15), 0.02), &defaults, &alone()).to_decide, None);
}
