//! The stall limit: how long any command of a recipe may go without progress before it is
//! stopped (`timeouts.stall`), a duration bounded to [`MIN_STALL`]..=[`MAX_STALL`].
//!
//! A value only: what progress is and how a stalled command is stopped are the runner's
//! (`prgate_runner::process::ProgressWatch`, which re-exports these items).

use std::time::Duration;

/// How long a command may go without progress when its recipe says nothing.
pub const DEFAULT_STALL: Duration = Duration::from_secs(20 * 60);
/// The shortest stall limit a recipe may ask for.
pub const MIN_STALL: Duration = Duration::from_secs(1);
/// The longest stall limit a recipe may ask for; a step's own time limit bounds it too.
pub const MAX_STALL: Duration = Duration::from_secs(24 * 3600);

/// How long a command may go without progress, between [`MIN_STALL`] and [`MAX_STALL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StallLimit(Duration);

/// A stall limit out of its bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a stall limit of {0:?} is not between 1 s and 24 h")]
pub struct StallLimitError(pub Duration);

impl TryFrom<Duration> for StallLimit {
    type Error = StallLimitError;

    fn try_from(duration: Duration) -> Result<StallLimit, StallLimitError> {
        if (MIN_STALL..=MAX_STALL).contains(&duration) {
            Ok(StallLimit(duration))
        } else {
            Err(StallLimitError(duration))
        }
    }
}

impl Default for StallLimit {
    fn default() -> StallLimit {
        StallLimit(DEFAULT_STALL)
    }
}

impl StallLimit {
    /// The limit as a duration.
    pub fn get(self) -> Duration {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_bounded() {
        let check = |seconds: u64, ok: bool| {
            let limit = StallLimit::try_from(Duration::from_secs(seconds));
            assert_eq!(limit.is_ok(), ok, "{seconds} s");
        };
        check(0, false);
        check(1, true);
        check(20 * 60, true);
        check(24 * 3600, true);
        check(24 * 3600 + 1, false);
        assert_eq!(StallLimit::default().get(), Duration::from_secs(1200));
    }
}
