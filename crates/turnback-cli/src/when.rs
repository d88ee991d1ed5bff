//! Times for people: the local time with its zone (jiff reads the zone
//! from `TZ`, else the system's, on every platform), how long ago it was,
//! and RFC 3339 for JSON.

use jiff::Timestamp;
use jiff::tz::TimeZone;

/// Formats times in one zone (the local one, read once).
pub struct Clock {
    tz: TimeZone,
    now_ns: u64,
}

impl Clock {
    /// The local zone, and now.
    pub fn local() -> Clock {
        Clock {
            tz: TimeZone::system(),
            now_ns: Timestamp::now()
                .as_nanosecond()
                .try_into()
                .unwrap_or_default(),
        }
    }

    /// `2026-12-06 10:41:10 CET`: Unix nanoseconds in the local zone, with
    /// its abbreviation (or offset, for a zone that has none).
    pub fn local_time(&self, ns: u64) -> String {
        match timestamp(ns) {
            Some(ts) => ts
                .to_zoned_datetime(self.tz.clone())
                .strftime("%Y-%m-%d %H:%M:%S %Z")
                .to_string(),
            None => format!("{ns} ns after 1970"),
        }
    }

    /// How long before now `ns` was: `just now`, `42 s ago`, `5 min ago`,
    /// `3 h ago`, `12 days ago`, `4 months ago`, `2 years ago`.
    pub fn ago(&self, ns: u64) -> String {
        ago(self.now_ns.saturating_sub(ns))
    }
}

/// A span before now, in nanoseconds, for people (see [`Clock::ago`]).
pub fn ago(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    const MIN: u64 = 60;
    const HOUR: u64 = 60 * MIN;
    const DAY: u64 = 24 * HOUR;
    match s {
        0 => "just now".to_owned(),
        s if s < MIN => format!("{s} s ago"),
        s if s < HOUR => format!("{} min ago", s / MIN),
        s if s < 2 * DAY => format!("{} h ago", s / HOUR),
        s if s < 60 * DAY => format!("{} days ago", s / DAY),
        s if s < 730 * DAY => format!("{} months ago", s / (30 * DAY)),
        s => format!("{} years ago", s / (365 * DAY)),
    }
}

/// Unix nanoseconds in RFC 3339, UTC, with all nine fractional digits
/// (`2026-12-06T09:41:10.123456780Z`), as the library writes every time.
pub fn rfc3339(ns: u64) -> String {
    // The one spelling of a time in every command's JSON (docs/JSON.md):
    // nine digits of nanoseconds, always.
    turnback::time::rfc3339(i128::from(ns))
}

fn timestamp(ns: u64) -> Option<Timestamp> {
    Timestamp::from_nanosecond(i128::from(ns)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_as_people_say_them() {
        let s = 1_000_000_000;
        assert_eq!(ago(0), "just now");
        assert_eq!(ago(42 * s), "42 s ago");
        assert_eq!(ago(5 * 60 * s + 3 * s), "5 min ago");
        assert_eq!(ago(3 * 3600 * s), "3 h ago");
        assert_eq!(ago(47 * 3600 * s), "47 h ago");
        assert_eq!(ago(12 * 86_400 * s), "12 days ago");
        assert_eq!(ago(125 * 86_400 * s), "4 months ago");
        assert_eq!(ago(800 * 86_400 * s), "2 years ago");
    }

    #[test]
    fn times_are_local_with_their_zone_and_utc_for_json() {
        let clock = Clock {
            tz: TimeZone::get("Europe/Paris").expect("the zone database has Paris"),
            now_ns: 0,
        };
        let ns = 1_700_000_000_123_456_789;
        assert_eq!(clock.local_time(ns), "2023-11-14 23:13:20 CET");
        assert_eq!(rfc3339(ns), "2023-11-14T22:13:20.123456789Z");
        let utc = Clock {
            tz: TimeZone::UTC,
            now_ns: 0,
        };
        assert_eq!(utc.local_time(ns), "2023-11-14 22:13:20 UTC");
    }
}
