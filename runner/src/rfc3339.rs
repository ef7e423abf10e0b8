//! Times as RFC 3339 in UTC to the second (`2026-12-01T15:00:00Z`): the one form prgate's own
//! files write a time in (the health ledger, the host lock, the history). Formatting and parsing
//! are chrono's (already built for the binary's GitHub client, so no new crate); only this form
//! is read back: an offset, a fraction or a date the calendar lacks (`02-30`) is `None`.
//!
//! What it leaves to others: when a time is taken, and what it means.

use chrono::{DateTime, SecondsFormat, Utc};

/// Seconds since the Unix epoch as `2026-12-01T15:00:00Z`.
pub fn format(seconds: u64) -> String {
    let seconds = i64::try_from(seconds).unwrap_or(i64::MAX);
    DateTime::<Utc>::from_timestamp(seconds, 0)
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
        .to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `2026-12-01T15:00:00Z` as seconds since the Unix epoch; `None` for anything else.
pub fn parse(text: &str) -> Option<u64> {
    let time = DateTime::parse_from_rfc3339(text).ok()?;
    let seconds = u64::try_from(time.timestamp()).ok()?;
    // Only the form `format` writes: `Z`, whole seconds.
    (format(seconds) == text).then_some(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_form_round_trips_and_nothing_else_is_read() {
        let cases = [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_795_975_200, "2026-11-29T18:00:00Z"),
            (4_102_444_799, "2099-12-31T23:59:59Z"),
        ];
        for (seconds, text) in cases {
            assert_eq!(format(seconds), text);
            assert_eq!(parse(text), Some(seconds), "{text}");
        }
        for other in [
            "2026-11-29T18:00:00+00:00",
            "2026-11-29T18:00:00.5Z",
            "2026-02-30T00:00:00Z",
            "2026-11-29 18:00:00Z",
            "1969-12-31T23:59:59Z",
            "yesterday",
            "",
        ] {
            assert_eq!(parse(other), None, "{other}");
        }
    }
}
