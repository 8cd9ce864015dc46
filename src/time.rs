//! Time as both stores bucket it: hours and days since the Unix epoch
//! (UTC), and which hour buckets a window covers. One place, so that the
//! embedded store, the Redis store, the API and the oracle agree to the
//! bucket on every window edge.

use std::ops::RangeInclusive;

/// Unix seconds.
pub type Timestamp = i64;

/// Seconds in one hourly bucket.
pub const HOUR: i64 = 3600;
/// Seconds in one daily bucket.
pub const DAY: i64 = 86_400;

/// The hour bucket (hours since the epoch) a timestamp falls into.
pub fn hour_of(ts: Timestamp) -> i64 {
    ts.div_euclid(HOUR)
}

/// The day bucket (days since the epoch, UTC) a timestamp falls into.
pub fn day_of(ts: Timestamp) -> i64 {
    ts.div_euclid(DAY)
}

/// The `n` hour buckets that end with `last` (a window of `n` hours whose
/// newest bucket is `last`).
pub fn last_hours(last: i64, n: u32) -> RangeInclusive<i64> {
    (last - i64::from(n) + 1)..=last
}

/// A range of hours as the whole days inside it and the hours outside
/// those (before, after): a sum over the hours is the days' totals plus
/// those hours'. Empty ranges are `1..=0` and `0..0`.
pub fn split_days(hours: &RangeInclusive<i64>) -> (std::ops::Range<i64>, [RangeInclusive<i64>; 2]) {
    let (first, last) = (*hours.start(), *hours.end());
    let first_day = (first + 23).div_euclid(24);
    let end_day = (last + 1).div_euclid(24);
    if first > last || first_day >= end_day {
        return (0..0, [hours.clone(), EMPTY_HOURS]);
    }
    (
        first_day..end_day,
        [first..=first_day * 24 - 1, end_day * 24..=last],
    )
}

const EMPTY_HOURS: RangeInclusive<i64> = RangeInclusive::new(1, 0);

/// Days since the epoch of a proleptic Gregorian date (UTC).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date (year, month, day) of a day bucket.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Seed 001's hour stamp `yyyyMMddHH` (UTC) of an hour bucket.
pub fn hour_stamp(hour: i64) -> String {
    let (y, m, d) = civil_from_days(hour.div_euclid(24));
    format!("{y:04}{m:02}{d:02}{:02}", hour.rem_euclid(24))
}

/// The hour bucket of a `yyyyMMddHH` stamp (UTC); `None` if malformed.
pub fn parse_hour_stamp(s: &str) -> Option<i64> {
    if s.len() != 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let day = parse_date_digits(&s[..8])?;
    let h: i64 = s[8..].parse().ok()?;
    (h < 24).then_some(day * 24 + h)
}

/// Seed 004's date key `yyyy-MM-dd` (UTC) of a day bucket.
pub fn date_stamp(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The day bucket of a `yyyy-MM-dd` date (UTC); `None` if malformed.
pub fn parse_date_stamp(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if s.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    parse_date_digits(&format!("{}{}{}", &s[..4], &s[5..7], &s[8..]))
}

fn parse_date_digits(s: &str) -> Option<i64> {
    if s.len() != 8 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let y: i64 = s[..4].parse().ok()?;
    let m: u32 = s[4..6].parse().ok()?;
    let d: u32 = s[6..8].parse().ok()?;
    let day = days_from_civil(y, m, d);
    // Refuses 2025-02-30 and the like: the date must round-trip.
    (civil_from_days(day) == (y, m, d)).then_some(day)
}

/// Parses a span written `90s`, `10m`, `2h` or `7d` (or bare seconds,
/// `90`) into seconds (> 0): the one duration syntax of every subcommand.
pub fn parse_duration(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let bad = || format!("{s:?} is not a duration: use e.g. 90s, 10m, 1h or 7d");
    let (num, mult) = match s.char_indices().last() {
        Some((i, 's')) => (&s[..i], 1),
        Some((i, 'm')) => (&s[..i], 60),
        Some((i, 'h')) => (&s[..i], 3600),
        Some((i, 'd')) => (&s[..i], 86_400),
        _ => (s, 1),
    };
    let n: i64 = num.parse().map_err(|_| bad())?;
    if n <= 0 {
        return Err(bad());
    }
    n.checked_mul(mult).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Ok(90));
        assert_eq!(parse_duration("30s"), Ok(30));
        assert_eq!(parse_duration("10m"), Ok(600));
        assert_eq!(parse_duration("1h"), Ok(3600));
        assert_eq!(parse_duration("7d"), Ok(604_800));
        for bad in ["", "0m", "-1h", "m", "1.5h", "1w"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn civil_dates_round_trip() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(date_stamp(day_of(1_763_760_000)), "2025-11-21");
        assert_eq!(hour_stamp(hour_of(1_763_760_000)), "2025112121");
        for day in -800_000..800_000 {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
        for hour in (0..500_000).step_by(7) {
            assert_eq!(parse_hour_stamp(&hour_stamp(hour)), Some(hour));
        }
        assert_eq!(
            parse_date_stamp("2024-02-29"),
            Some(days_from_civil(2024, 2, 29))
        );
        assert_eq!(parse_date_stamp("2025-02-29"), None);
        assert_eq!(parse_hour_stamp("2025112124"), None);
        assert_eq!(parse_hour_stamp("20251121x1"), None);
    }

    #[test]
    fn buckets_and_windows() {
        assert_eq!(hour_of(-1), -1);
        assert_eq!(hour_of(HOUR - 1), 0);
        assert_eq!(day_of(DAY), 1);
        assert_eq!(last_hours(10, 1), 10..=10);
        assert_eq!(last_hours(10, 3), 8..=10);
    }
}
