//! Counted events by category and hour: what `scale=category` divides a
//! score by ([`crate::score::CategoryScale`]).
//!
//! Every counted event (the set `/api/stats` calls `counted`) adds one to
//! its article's category, as the article's metadata says when the event
//! is counted (a later change of category moves no past count), in the
//! event's hour. Articles without a category (or with an empty one) make
//! one group of their own, keyed `""`. A count over a window
//! ([`crate::model::category_hours`]) sums whole days from per-day totals
//! kept beside the hours, and the hours of the window's last day; the
//! last sum of each category is remembered until its next event.
//!
//! Snapshotted (state version 4) as the hours alone; the days and the
//! remembered sums are derived. Hours older than [`KEEP_DAYS`] days leave
//! at the retention sweep. Dumps (`hotrank export`) do not carry them: an
//! import, like a version 3 snapshot, starts from what the articles'
//! hourly buckets hold ([`CategoryCounts::from_buckets`]).

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};

use super::article::Article;
use crate::model::{CATEGORY_DAYS, Timestamp, day_of, hour_of};
use crate::time::split_days;

/// Days of hours kept: the window's 30 and the day before it, so a
/// movement baseline just after midnight still counts its own window.
pub const KEEP_DAYS: i64 = CATEGORY_DAYS + 1;

/// The counts of every category, by its name (`""`: no category).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CategoryCounts(BTreeMap<String, Category>);

/// One category's counted events by hour, with derived per-day totals
/// and its last window sum.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(from = "BTreeMap<i64, u64>", into = "BTreeMap<i64, u64>")]
struct Category {
    hours: BTreeMap<i64, u64>,
    days: BTreeMap<i64, u64>,
    /// The window (first hour, last hour) last summed, and its sum; reset
    /// by every event of the category.
    memo: Option<(i64, i64, u64)>,
}

impl From<BTreeMap<i64, u64>> for Category {
    fn from(hours: BTreeMap<i64, u64>) -> Self {
        let mut days: BTreeMap<i64, u64> = BTreeMap::new();
        for (&h, &n) in &hours {
            *days.entry(h.div_euclid(24)).or_default() += n;
        }
        Category {
            hours,
            days,
            memo: None,
        }
    }
}

impl From<Category> for BTreeMap<i64, u64> {
    fn from(c: Category) -> Self {
        c.hours
    }
}

impl Category {
    fn add(&mut self, hour: i64, n: u64) {
        *self.hours.entry(hour).or_default() += n;
        *self.days.entry(hour.div_euclid(24)).or_default() += n;
        self.memo = None;
    }

    /// Events in `hours`: whole days from the day totals, the rest hour
    /// by hour.
    fn sum(&self, hours: &RangeInclusive<i64>) -> u64 {
        let (days, ends) = split_days(hours);
        let whole: u64 = if days.is_empty() {
            0
        } else {
            self.days.range(days).map(|(_, n)| n).sum()
        };
        let part: u64 = (ends.into_iter())
            .filter(|r| !r.is_empty())
            .map(|r| self.hours.range(r).map(|(_, n)| n).sum::<u64>())
            .sum();
        whole + part
    }
}

impl CategoryCounts {
    /// One counted event of `category` at `ts`.
    pub fn counted(&mut self, category: Option<&str>, ts: Timestamp) {
        let name = category.unwrap_or("");
        match self.0.get_mut(name) {
            Some(c) => c.add(hour_of(ts), 1),
            None => {
                let mut c = Category::default();
                c.add(hour_of(ts), 1);
                self.0.insert(name.to_string(), c);
            }
        }
    }

    /// Counted events of `category` in `hours` (not remembered: a scan of
    /// the past that holds the state shared).
    pub fn events_in(&self, category: Option<&str>, hours: RangeInclusive<i64>) -> u64 {
        (self.0.get(category.unwrap_or(""))).map_or(0, |c| c.sum(&hours))
    }

    /// Counted events of `category` in `hours`, remembered until its next
    /// event.
    pub fn events(&mut self, category: Option<&str>, hours: RangeInclusive<i64>) -> u64 {
        let Some(c) = self.0.get_mut(category.unwrap_or("")) else {
            return 0;
        };
        let key = (*hours.start(), *hours.end());
        match c.memo {
            Some((f, l, n)) if (f, l) == key => n,
            _ => {
                let n = c.sum(&hours);
                c.memo = Some((key.0, key.1, n));
                n
            }
        }
    }

    /// Drops the hours of days more than [`KEEP_DAYS`] before `now`'s.
    pub fn expire(&mut self, now: Timestamp) {
        let first_day = day_of(now) - KEEP_DAYS + 1;
        self.0.retain(|_, c| {
            c.hours = c.hours.split_off(&(first_day * 24));
            c.days = c.days.split_off(&first_day);
            c.memo = None;
            !c.hours.is_empty()
        });
    }

    /// The counts the articles' buckets still hold, each article's events
    /// under its current category: what a state that never counted by
    /// category (a version 3 snapshot, an import) starts from.
    pub fn from_buckets(articles: &[Article]) -> Self {
        let mut c = CategoryCounts::default();
        for a in articles {
            let name = a.meta.category().unwrap_or("");
            for b in &a.buckets {
                let n: u64 = [
                    b.pv,
                    b.likes,
                    b.comments,
                    b.favorites,
                    b.shares,
                    b.dwell_reports,
                ]
                .iter()
                .map(|&x| u64::from(x))
                .sum();
                if n > 0 {
                    (c.0.entry(name.to_string()).or_default()).add(b.hour(), n);
                }
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::category_hours;

    /// A window sums whole days and the hours at its ends, as counting
    /// every hour does, however it falls on day edges; it round-trips
    /// through postcard with its days rebuilt.
    #[test]
    fn window_sums_equal_hour_by_hour_sums() {
        let mut c = CategoryCounts::default();
        let day0 = 20_000;
        let mut all: Vec<(i64, u64)> = Vec::new();
        for i in 0..(40 * 24) {
            let hour = day0 * 24 + i;
            let n = (i * 7 % 5) as u64;
            for _ in 0..n {
                c.counted(Some("news"), hour * 3600 + 5);
            }
            all.push((hour, n));
        }
        let brute = |r: &RangeInclusive<i64>| -> u64 {
            all.iter().filter(|(h, _)| r.contains(h)).map(|x| x.1).sum()
        };
        let back: CategoryCounts =
            postcard::from_bytes(&postcard::to_allocvec(&c).unwrap()).unwrap();
        let mut back = back;
        for (first, last) in [
            (3, 3),
            (5, 30),
            (24, 47),
            (23, 48),
            (0, 959),
            (30, 20),
            (25, 700),
        ] {
            let r = day0 * 24 + first..=day0 * 24 + last;
            assert_eq!(
                c.events(Some("news"), r.clone()),
                brute(&r),
                "{first}..={last}"
            );
            assert_eq!(back.events(Some("news"), r.clone()), brute(&r));
        }
        // The window of a day at a time: 30 days up to the hour.
        let at = (day0 + 35) * 86_400 + 5 * 3600 + 10;
        let w = category_hours(day0 + 35, at);
        assert_eq!(w.end() - w.start() + 1, 29 * 24 + 6);
        assert_eq!(c.events(Some("news"), w.clone()), brute(&w));
        assert_eq!(c.events(Some("tech"), w.clone()), 0);
        // An event lands in a past hour of the window: counted at once.
        let before = c.events(Some("news"), w.clone());
        c.counted(Some("news"), (day0 + 10) * 86_400);
        assert_eq!(c.events(Some("news"), w.clone()), before + 1);
        // Expiry keeps the window and the day before it.
        c.expire(at);
        assert_eq!(c.events(Some("news"), w.clone()), before + 1);
        let kept = *c.0["news"].hours.keys().next().unwrap();
        assert_eq!(kept.div_euclid(24), day0 + 35 - KEEP_DAYS + 1);
    }

    #[test]
    fn no_category_is_a_group_of_its_own() {
        let mut c = CategoryCounts::default();
        c.counted(None, 3600);
        c.counted(Some(""), 3600);
        c.counted(Some("x"), 3600);
        assert_eq!(c.events(None, 0..=1), 2);
        assert_eq!(c.events(Some("x"), 0..=1), 1);
    }
}
