//! What would decide a sequential test its cap left undecided: how many samples (a speed
//! cell's pairs, an accuracy benchmark's repeats) would bring a bound past its line if the data
//! stayed as measured, and what they cost in runs.
//!
//! Each rule says whether a given count decides it (`speed.rs`, `accuracy.rs`); this module
//! owns the one search for the fewest such counts and the arithmetic of what they add. Saying
//! it in words is the verdict's.

/// The samples in all that would decide a test, and those it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Samples {
    /// The samples in all at which a bound would pass, with the cap raised to them; `None`:
    /// more than the rule's limit of looking.
    pub needed: Option<usize>,
    /// The samples the test has (a cell's kept pairs, a benchmark's judged repeats).
    pub have: usize,
}

impl Samples {
    /// The samples to add.
    pub fn more(&self) -> Option<usize> {
        self.needed.map(|needed| needed.saturating_sub(self.have))
    }

    /// What they cost in runs, two a sample: a speed pair's PR run and the base run that
    /// closes it (chained); an accuracy repeat's PR and base runs (fewer when base's repeats
    /// are cached).
    pub fn more_runs(&self) -> Option<usize> {
        self.more().map(|more| 2 * more)
    }
}

/// The fewest samples above `have` and up to `limit` at which `decides` holds, or `None`. The
/// bounds tighten as samples grow (the interval shrinks as 1/sqrt(n), faster than the last
/// look's share of the error rates), so the search doubles, then bisects.
pub(crate) fn first_deciding(
    have: usize,
    limit: usize,
    decides: impl Fn(usize) -> bool,
) -> Option<usize> {
    let (mut below, mut step) = (have, 1usize);
    if below >= limit {
        return None;
    }
    let mut above = loop {
        let n = below.saturating_add(step).min(limit);
        if decides(n) {
            break n;
        }
        if n == limit {
            return None;
        }
        below = n;
        step = step.saturating_mul(2);
    };
    while above - below > 1 {
        let middle = below + (above - below) / 2;
        if decides(middle) { above = middle } else { below = middle }
    }
    Some(above)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_finds_the_fewest_deciding_samples_above_what_the_test_has() {
        for have in [0, 1, 5, 99] {
            for first in [have + 1, have + 2, have + 7, 100, 999, 1000] {
                let found = first_deciding(have, 1000, |n| n >= first);
                let expected = (first > have && first <= 1000).then_some(first);
                assert_eq!(found, expected, "have {have}, first {first}");
            }
            assert_eq!(first_deciding(have, 1000, |_| false), None);
        }
        // A test that has the limit or more looks no further.
        assert_eq!(first_deciding(1000, 1000, |_| true), None);
        assert_eq!(first_deciding(2000, 1000, |_| true), None);
    }

    #[test]
    fn the_samples_to_add_and_their_runs() {
        let samples = Samples { needed: Some(12), have: 8 };
        assert_eq!((samples.more(), samples.more_runs()), (Some(4), Some(8)));
        let beyond = Samples { needed: None, have: 8 };
        assert_eq!((beyond.more(), beyond.more_runs()), (None, None));
    }
}
