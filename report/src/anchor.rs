//! An anchor run's check of a chain, in words: what the anchor measured, what the chain says
//! of the same distance, and what the check made of them (`prgate demo` prints it after its
//! anchor run). Whether they agree is the gate's (`prgate_gate::drift`); this only says it.

use prgate_gate::drift::{AnchorCheck, Measurement};

use crate::history::measurement_words;

/// One anchor check in a line: `m c=1: the anchor measured +3.0% [...], the chain nothing;
/// they disagree: the anchor replaces the chain`, each measurement with its two-sided
/// `1 - 2 alpha` interval.
pub fn check_words(check: &AnchorCheck, alpha: f64) -> String {
    let shown = |measurement: &Measurement| measurement_words(&check.cell, measurement, alpha);
    let chained = check.outcome.chained.as_ref().map_or_else(|| "nothing".to_owned(), shown);
    let outcome = if check.outcome.agrees {
        "they agree: both count"
    } else {
        "they disagree: the anchor replaces the chain"
    };
    format!(
        "{}: the anchor measured {}, the chain {chained}; {outcome}",
        check.cell.describe(),
        shown(&check.anchor)
    )
}

#[cfg(test)]
mod tests {
    use prgate_gate::drift::{AnchorCheck, AnchorOutcome, Cell, Measurement};

    fn check(chained: Option<f64>, agrees: bool, expect: &str) {
        let measurement = |estimate: f64| Measurement {
            estimate,
            standard_error: 0.005,
            degrees_of_freedom: f64::INFINITY,
        };
        let anchor = AnchorCheck {
            cell: Cell::Speed { model: "kimi_k31".to_owned(), concurrency: 4 },
            at: "2026-01-02T03:04:05Z".to_owned(),
            head_commit: "a".repeat(40),
            anchor: measurement(0.03_f64.ln_1p()),
            outcome: AnchorOutcome { chained: chained.map(measurement), agrees },
        };
        assert_eq!(super::check_words(&anchor, 0.05), expect);
    }

    #[test]
    fn an_anchor_check_says_both_measurements_and_what_the_check_made_of_them() {
        check(
            Some(0.029_f64.ln_1p()),
            true,
            "kimi_k31 c=4: the anchor measured +3.0% [+2.2%, +3.9%], the chain +2.9% [+2.1%, +3.7%]; they agree: both count",
        );
        check(
            Some(0.0),
            false,
            "kimi_k31 c=4: the anchor measured +3.0% [+2.2%, +3.9%], the chain +0.0% [-0.8%, +0.8%]; they disagree: the anchor replaces the chain",
        );
        check(
            None,
            false,
            "kimi_k31 c=4: the anchor measured +3.0% [+2.2%, +3.9%], the chain nothing; they disagree: the anchor replaces the chain",
        );
    }
}
