//! The blocked design against a node with a load-to-load effect: the block as the unit keeps
//! the gate's error rates, runs taken as independent pairs do not.

use super::*;

fn scenario(load_cv: f64, true_change: f64) -> BlockScenario {
    BlockScenario { run_cv: 0.01, load_cv, true_change, block_runs: BLOCK_RUNS, cells: 1 }
}

#[test]
fn a_block_is_its_runs_median_and_a_block_pair_is_bracketed() {
    assert_eq!(block_value(&[21.0, 19.0, 30.0]), Some(21.0));
    assert_eq!(block_value(&[]), None);
    let pair = block_pair(16.0, 22.0, 25.0);
    assert_eq!(pair.base_runs_ms, Some((16.0, 25.0)));
    assert!((pair.base_tpot_ms - 20.0).abs() < 1e-12);
    let calibrated = CellContext {
        cells: 2,
        gain_required: true,
        calibration: Some(crate::speed::Calibration { log_ratio_variance: 1e-4, samples: 40 }),
    };
    assert_eq!(
        blocked_context(&calibrated),
        CellContext { cells: 2, gain_required: true, calibration: None }
    );
}

/// The design's error rates with a load-to-load effect twice the run-to-run noise (CV 2% a
/// load, 1% a run): blocks keep a no-change cell's false fails within alpha (2%) and fail a 6%
/// loss (max-loss + zone + 2%) nearly always; taking the runs of the same blocks as pairs of
/// their own fails the no-change cell many times more often.
#[test]
fn blocks_keep_the_false_fail_rate_where_runs_as_pairs_do_not() {
    let config = GateConfig::defaults();
    let trials = 400;
    let null = scenario(0.02, 0.0);
    let blocks = simulate_blocked(&config, &null, Unit::Block, trials, 5);
    let runs = simulate_blocked(&config, &null, Unit::Run, trials, 5);
    // alpha 2% and 400 trials: 3.5% is beyond four standard errors of 2%.
    assert!(blocks.p_fail <= 0.035, "{blocks:?}");
    assert!(runs.p_fail >= 4.0 * blocks.p_fail.max(0.02), "{runs:?} against {blocks:?}");
    let loss = simulate_blocked(&config, &scenario(0.02, 0.06), Unit::Block, 200, 6);
    assert!(loss.p_fail >= 0.95, "{loss:?}");
    // Without a load effect, blocks are runs with less noise: a cell takes little more than
    // the gate's minimum, 3 block pairs (7 loads).
    let quiet = simulate_blocked(&config, &scenario(0.0, 0.0), Unit::Block, 200, 7);
    assert!(quiet.p_fail <= 0.035 && quiet.mean_loads <= 9.0, "{quiet:?}");
    println!("no change: blocks {blocks:?}\nno change: runs as pairs {runs:?}\n6% loss: {loss:?}\nno load effect: {quiet:?}");
}

#[test]
fn the_same_seed_gives_the_same_numbers() {
    let config = GateConfig::defaults();
    let a = simulate_blocked(&config, &scenario(0.02, 0.0), Unit::Block, 30, 1);
    assert_eq!(a, simulate_blocked(&config, &scenario(0.02, 0.0), Unit::Block, 30, 1));
    assert_ne!(a, simulate_blocked(&config, &scenario(0.02, 0.0), Unit::Block, 30, 2));
}
