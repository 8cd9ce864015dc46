//! Time as both stores bucket it: hours and days since the Unix epoch
//! (UTC), and which hour buckets a window covers. One place, so that the
//! embedded store, the Redis store, the API and the oracle agree to the
//! bucket on every window edge.

use std::ops::RangeInclusive;

use crate::model::Timestamp;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_and_windows() {
        assert_eq!(hour_of(-1), -1);
        assert_eq!(hour_of(HOUR - 1), 0);
        assert_eq!(day_of(DAY), 1);
        assert_eq!(last_hours(10, 1), 10..=10);
        assert_eq!(last_hours(10, 3), 8..=10);
    }
}
