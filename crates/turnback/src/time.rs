//! Times as the JSON reports give them: RFC 3339 in UTC with nanoseconds,
//! `2026-12-06T09:40:35.786684193Z` (see `docs/JSON.md`). The log keeps
//! its times as Unix nanoseconds (`at` of each record); only the reports
//! the library hands out (and the command line prints) use this form.

use serde::Serializer;

/// Unix nanoseconds as RFC 3339 in UTC with all nine digits of the
/// nanoseconds: `1970-01-01T00:00:00.000000000Z` for 0. Negative times
/// (a clock set before 1970) count back from the epoch.
pub fn rfc3339(ns: i128) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let nanos = ns.rem_euclid(1_000_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The civil date (year, month, day) of a count of days since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i128) -> (i128, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i128::from(m <= 2);
    (y, m, d)
}

/// Serializes Unix nanoseconds (`u64`) as [`rfc3339`], for
/// `#[serde(serialize_with)]`.
pub(crate) fn ser_ns<S: Serializer>(ns: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(i128::from(*ns)))
}

/// Serializes Unix nanoseconds (`i64`) as [`rfc3339`].
pub(crate) fn ser_ns_signed<S: Serializer>(ns: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(i128::from(*ns)))
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn times_are_rfc3339_utc_with_nanoseconds() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            rfc3339(1_700_000_000_123_456_789),
            "2023-11-14T22:13:20.123456789Z"
        );
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59.999999999Z");
        // A leap day, and the last nanosecond of a year.
        assert_eq!(
            rfc3339(951_782_400_000_000_000),
            "2000-02-29T00:00:00.000000000Z"
        );
        assert_eq!(
            rfc3339(1_704_067_199_999_999_999),
            "2023-12-31T23:59:59.999999999Z"
        );
    }
}
