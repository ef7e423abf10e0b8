//! The gate's settings in words, where a command says what it worked with: the lines above
//! `prgate gate simulate`'s and `prgate history simulate`'s tables, and the drift guard's
//! settings on the history page. The settings are the gate's ([`GateConfig`]); the
//! simulations and their tables too (`prgate_gate::simulate`, `prgate_gate::drift::simulate`).

use prgate_gate::GateConfig;

/// The speed and accuracy rules' settings and the simulation's size: the two paragraphs above
/// `prgate gate simulate`'s tables, each followed by an empty line.
pub fn rules_simulation(config: &GateConfig, trials: usize, seed: u64) -> String {
    let speed = &config.speed;
    format!(
        "Speed: a loss over {:.0}% fails; zone {:.0}%..{:.0}%; alpha {} a PR, beta {} a cell; pairs {}..={}; min-cv {}. Accuracy: alpha {} a PR. {trials} trials a scenario, seed {seed}.\n\n\
         Accuracy: repeats until decided, at most {} (seed r for repeat r); alpha {} a PR over its benchmarks and the looks; beta {} a benchmark at a drop of {} tolerances.\n\n",
        speed.threshold.get() * 100.0,
        speed.low * 100.0,
        speed.high * 100.0,
        speed.alpha.get(),
        speed.beta.get(),
        speed.min_pairs,
        speed.max_pairs,
        speed.min_cv.get(),
        config.accuracy_alpha.get(),
        config.accuracy_repeats,
        config.accuracy_alpha.get(),
        config.accuracy_beta.get(),
        config.accuracy_beta_at,
    )
}

/// The drift guard's settings, the speed rule's threshold and the simulation's size: the
/// paragraph above `prgate history simulate`'s table, followed by an empty line.
pub fn drift_simulation(config: &GateConfig, trials: usize, seed: u64) -> String {
    let drift = &config.drift;
    format!(
        "Drift guard: budget TPOT +{:.1}%, alpha {} a cell and check; the speed rule as configured (a loss over {:.0}% fails). One covered cell, no calibration, bracketed pairs; a PR that fails is measured again until it passes; the guard checked after every merge. {trials} sequences a scenario, seed {seed}.\n\n",
        drift.speed_budget.get() * 100.0,
        drift.alpha.get(),
        config.speed.threshold.get() * 100.0,
    )
}

/// The drift guard's settings as the history page shows them: `budget TPOT +3.0%, accuracy 1 ×
/// the benchmark's tolerance; alpha 0.05 per cell`.
pub fn drift_budget(config: &GateConfig) -> String {
    let drift = &config.drift;
    format!(
        "budget TPOT +{:.1}%, accuracy {} × the benchmark's tolerance; alpha {} per cell",
        drift.speed_budget.get() * 100.0,
        drift.accuracy_budget,
        drift.alpha.get()
    )
}

#[cfg(test)]
mod tests {
    use prgate_gate::GateConfig;

    #[test]
    fn the_default_settings_in_words() {
        let config = GateConfig::defaults();
        assert_eq!(
            super::rules_simulation(&config, 20, 1),
            "Speed: a loss over 2% fails; zone 0%..4%; alpha 0.02 a PR, beta 0.05 a cell; pairs 3..=16; min-cv 0.01. Accuracy: alpha 0.02 a PR. 20 trials a scenario, seed 1.\n\n\
             Accuracy: repeats until decided, at most 20 (seed r for repeat r); alpha 0.02 a PR over its benchmarks and the looks; beta 0.025 a benchmark at a drop of 2 tolerances.\n\n"
        );
        assert_eq!(
            super::drift_simulation(&config, 2000, 7),
            "Drift guard: budget TPOT +3.0%, alpha 0.05 a cell and check; the speed rule as configured (a loss over 2% fails). One covered cell, no calibration, bracketed pairs; a PR that fails is measured again until it passes; the guard checked after every merge. 2000 sequences a scenario, seed 7.\n\n"
        );
        assert_eq!(
            super::drift_budget(&config),
            "budget TPOT +3.0%, accuracy 1 × the benchmark's tolerance; alpha 0.05 per cell"
        );
    }
}
