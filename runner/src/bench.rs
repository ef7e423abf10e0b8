//! The built-in speed client (`prgate_measure::bench`, re-exported whole, as
//! `prgate_runner::bench` before) and what it leaves to its caller: a seed for each run's
//! prompts that no server can foresee ([`fresh_prompt_seed`]). The measure crate reads no random
//! source (its one I/O is its HTTP); the runner, which draws the seed, does.

pub use prgate_measure::bench::*;

use std::hash::{BuildHasher as _, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A seed for a run's prompts ([`BenchConfig::prompt_seed`]) that no server can foresee: std's
/// SipHash keyed by its per-process random keys (drawn from the operating system's random
/// source), over the clock and a counter, so two seeds of one process differ too.
pub fn fresh_prompt_seed() -> u64 {
    static DRAWN: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos());
    RandomState::new().hash_one((now, DRAWN.fetch_add(1, Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_seed_is_new() {
        let seeds: std::collections::BTreeSet<u64> =
            (0..1000).map(|_| super::fresh_prompt_seed()).collect();
        assert_eq!(seeds.len(), 1000);
    }
}
