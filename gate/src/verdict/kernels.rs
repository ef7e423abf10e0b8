//! The kernel-microbenchmark section: each timed kernel, base against PR, each kernel base
//! timed that the PR side did not, and which scripts measured the PR side with the PR's own
//! files. The timing statistics are
//! `crate::speed`'s; this module turns their answer into verdict items.

use std::collections::BTreeMap;

use crate::evidence::{Check, Outcome, Side};
use crate::stats::median;

use super::{Item, Judge, Numbers, SectionName, State};

/// A kernel's PR timing against base's: slower by more than `limit` warns; without base's
/// timing (a new kernel) there is nothing to compare.
fn compare_kernel(
    kernel: &str,
    base_us: Option<f64>,
    pr_us: f64,
    limit: f64,
) -> (State, String, Option<Numbers>) {
    let Some(base_us) = base_us else {
        return (State::Pass, format!("{kernel}: {pr_us:.1} µs (new: no base timing)"), None);
    };
    let change = pr_us / base_us - 1.0;
    let state = if change > limit { State::Warn } else { State::Pass };
    (
        state,
        format!("{kernel}: {base_us:.1} µs → {pr_us:.1} µs ({:+.1}%)", change * 100.0),
        Some(Numbers::Kernel { kernel: kernel.to_owned(), base_us, pr_us, change }),
    )
}

impl<'a> Judge<'a> {
    pub(super) fn kernels(&mut self, model: &str) {
        let samples = |side: Side| -> BTreeMap<String, f64> {
            self.records(Some(model), Check::KernelTiming)
                .iter()
                .filter(|record| record.side == side)
                .flat_map(|record| match &record.outcome {
                    Outcome::KernelTiming { kernels } => kernels.as_slice(),
                    _ => &[],
                })
                .filter_map(|kernel| median(&kernel.samples_us).map(|m| (kernel.name.clone(), m)))
                .collect()
        };
        let (base, pr) = (samples(Side::Base), samples(Side::Pr));
        let base_reported = self
            .records(Some(model), Check::KernelTiming)
            .iter()
            .any(|record| record.side == Side::Base);
        if !base_reported && !self.new_models.contains(model) {
            // Without base's timings no kernel can be compared yet.
            self.pending(Some(model), Check::KernelTiming);
            return;
        }
        let limit = self.config.kernel_max_regression.get();
        for (kernel, pr_us) in &pr {
            let (state, summary, numbers) =
                compare_kernel(kernel, base.get(kernel).copied(), *pr_us, limit);
            let (state, summary) = match self.pr_script_of(model, kernel) {
                // Base's command ran the PR's own files: its number is the PR's measurement.
                Some(own) => (
                    state.max(State::Warn),
                    format!(
                        "{summary}; the PR side measured by the PR's own script (it changes {}): a reviewer reads it",
                        own.files.join(", ")
                    ),
                ),
                None => (state, summary),
            };
            self.push(
                SectionName::KernelMicrobenchmark,
                Item {
                    model: Some(model.to_owned()),
                    check: "kernel-timing".to_owned(),
                    state,
                    rule: format!("a kernel more than {:.0}% slower is a warning", limit * 100.0),
                    summary,
                    numbers,
                },
            );
        }
        // A kernel base timed that the PR side did not report cannot be compared: said, never
        // silent (a slower kernel the PR's timing leaves out would otherwise hide its warning).
        // With no PR timing at all the check is still to come, below.
        let missing = base.iter().filter(|(kernel, _)| !pr.is_empty() && !pr.contains_key(*kernel));
        for (kernel, base_us) in missing {
            let summary = format!(
                "{kernel}: {base_us:.1} µs on base, no timing on the PR side: a reviewer reads why"
            );
            self.push(
                SectionName::KernelMicrobenchmark,
                Item::worded(
                    Some(model.to_owned()),
                    "kernel-timing",
                    State::Warn,
                    "a kernel base timed is timed on the PR side too",
                    summary,
                ),
            );
        }
        if pr.is_empty() {
            self.pending(Some(model), Check::KernelTiming);
        }
    }

    /// The timing script of `kernel` (`<script>/<kernel>`) when it measures `model`'s PR side
    /// with files the PR changes.
    fn pr_script_of(&self, model: &str, kernel: &str) -> Option<&crate::job::PrScript> {
        let script = kernel.split_once('/').map_or(kernel, |(script, _)| script);
        self.pr_scripts.get(model)?.iter().find(|own| own.script == script)
    }
}
