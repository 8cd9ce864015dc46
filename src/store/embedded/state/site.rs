//! Site-wide figures of the embedded state beyond its totals: quarantine
//! by crawler family and by article for a range of hours, counted views
//! by minute (the dashboard's realtime panel) and site-wide unique
//! visitors by hour (one HyperLogLog an hour, unioned over a range).
//!
//! Written on the event path only where it is cheap: a quarantined event
//! adds to its hour's crawler tally and names its article in the hour's
//! set; a counted view adds to its minute and to its hour's sketch (the
//! hash the article's sketches take, computed once).
//!
//! [`SiteStats`] is snapshotted (state version 3; version 4 adds the
//! counted events by category, [`CategoryCounts`]) and expires with the
//! hourly quarantine tallies (the category counts after their own 31
//! days); [`SiteLive`] is derived: the articles of
//! each hour come from the articles' own hourly quarantine (rebuilt on
//! restore), and the minute counters from the events seen since the
//! process started — after a restart they hold what the write-ahead log
//! replayed (the events since the last snapshot), older minutes read 0.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::article::{Article, Idx};
use super::categories::CategoryCounts;
use crate::crawler::{BEHAVIOUR_SLOT, SLOTS, slot_name};
use crate::gate::KeyedSet;
use crate::model::{ArticleId, Event, EventType, Quarantine, Timestamp, Verdict, hour_of};
use crate::sketch::Hll;

/// Minutes the realtime panel covers.
pub const MINUTES: usize = crate::store::TRAFFIC_MINUTES;

/// The snapshotted half: crawler tallies and visitor sketches by hour.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SiteStats {
    /// Events quarantined as `bot`, by hour and crawler slot
    /// ([`crate::crawler::SLOTS`]; shorter vectors read as zeros).
    pub crawlers_by_hour: BTreeMap<i64, Vec<u64>>,
    /// Counted views' visitors by hour, as the articles' sketches hash them.
    pub visitors_by_hour: BTreeMap<i64, Hll>,
    /// Counted events by category and hour (state version 4).
    pub categories: CategoryCounts,
}

/// The derived half (never serialized).
#[derive(Debug, Clone, Default)]
pub struct SiteLive {
    /// Articles with quarantined events, by hour.
    articles_by_hour: BTreeMap<i64, KeyedSet<Idx>>,
    /// Counted views of minute `m` at `m % MINUTES`, with `m`.
    minutes: Vec<(i64, u64)>,
}

impl SiteStats {
    /// Tallies a quarantined event: `bot` by crawler family (the behaviour
    /// rule's as `behaviour`).
    pub fn quarantined(&mut self, ev: &Event, verdict: Verdict) {
        if verdict != Verdict::Bot {
            return;
        }
        let slot = if ev.bot.is_bot() {
            ev.bot.slot()
        } else {
            BEHAVIOUR_SLOT
        };
        let t = self.crawlers_by_hour.entry(hour_of(ev.ts)).or_default();
        if t.len() < SLOTS {
            t.resize(SLOTS, 0);
        }
        t[slot] += 1;
    }

    /// A counted view's visitor (`hash`: the visitor's sketch hash).
    pub fn counted_view(&mut self, ts: Timestamp, hash: u64) {
        self.visitors_by_hour
            .entry(hour_of(ts))
            .or_default()
            .add_hash(hash);
    }

    /// Drops the hours before `first_hour`, and the category counts
    /// older than they are kept ([`CategoryCounts::expire`]).
    pub fn expire(&mut self, first_hour: i64, now: Timestamp) {
        self.crawlers_by_hour = self.crawlers_by_hour.split_off(&first_hour);
        self.visitors_by_hour = self.visitors_by_hour.split_off(&first_hour);
        self.categories.expire(now);
    }

    /// Crawler tallies of the hours from `first_hour` on, by name.
    pub fn crawlers_since(&self, first_hour: i64) -> Vec<(&'static str, u64)> {
        let mut sum = [0u64; SLOTS];
        for t in self.crawlers_by_hour.range(first_hour..).map(|(_, t)| t) {
            for (s, n) in sum.iter_mut().zip(t) {
                *s += n;
            }
        }
        crate::store::crawler_counts((1..SLOTS).map(|i| (slot_name(i), sum[i])))
    }

    /// Unique visitors of the hours from `first_hour` on (the union of
    /// their sketches).
    pub fn visitors_since(&self, first_hour: i64) -> u64 {
        let sketches: Vec<&Hll> = self
            .visitors_by_hour
            .range(first_hour..)
            .map(|(_, h)| h)
            .collect();
        match sketches.as_slice() {
            [] => 0,
            [one] => one.estimate(),
            all => Hll::union_count(all),
        }
    }
}

impl SiteLive {
    /// Rebuilt from the articles' hourly quarantine (after a snapshot loads).
    pub fn rebuild(articles: &[Article]) -> Self {
        let mut live = SiteLive::default();
        for (idx, a) in articles.iter().enumerate() {
            for b in a
                .buckets
                .iter()
                .filter(|b| b.quarantine.value().total() > 0)
            {
                live.quarantined_article(b.hour(), idx as Idx);
            }
        }
        live
    }

    /// Names `idx` among the articles with quarantine in `hour`.
    pub fn quarantined_article(&mut self, hour: i64, idx: Idx) {
        self.articles_by_hour.entry(hour).or_default().insert(idx);
    }

    /// A counted event: a view adds to its minute.
    pub fn counted(&mut self, ev: &Event) {
        if ev.kind != EventType::View {
            return;
        }
        let m = ev.ts.div_euclid(60);
        if self.minutes.is_empty() {
            self.minutes = vec![(i64::MIN, 0); MINUTES];
        }
        let slot = &mut self.minutes[m.rem_euclid(MINUTES as i64) as usize];
        if slot.0 == m {
            slot.1 += 1;
        } else if slot.0 < m {
            *slot = (m, 1);
        }
    }

    /// Counted views a minute, the last [`MINUTES`] minutes to `now`'s,
    /// oldest first.
    pub fn views_by_minute(&self, now: Timestamp) -> Vec<u64> {
        let last = now.div_euclid(60);
        (last - MINUTES as i64 + 1..=last)
            .map(|m| {
                (self.minutes.get(m.rem_euclid(MINUTES as i64) as usize))
                    .filter(|s| s.0 == m)
                    .map_or(0, |s| s.1)
            })
            .collect()
    }

    pub fn expire(&mut self, first_hour: i64) {
        self.articles_by_hour = self.articles_by_hour.split_off(&first_hour);
    }

    /// The articles with the most quarantined events in the hours from
    /// `first_hour` on.
    pub fn top_articles(
        &self,
        articles: &[Article],
        first_hour: i64,
    ) -> Vec<(ArticleId, Quarantine)> {
        let mut sums: crate::gate::KeyedMap<Idx, Quarantine> = Default::default();
        for (&hour, set) in self.articles_by_hour.range(first_hour..) {
            for &idx in set {
                let a = &articles[idx as usize];
                if let Ok(i) = a.buckets.binary_search_by_key(&hour, |b| b.hour()) {
                    sums.entry(idx)
                        .or_default()
                        .merge(&a.buckets[i].quarantine.value());
                }
            }
        }
        crate::store::top_quarantined(
            sums.into_iter()
                .map(|(idx, q)| (articles[idx as usize].id.clone(), q)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ArticleId;

    #[test]
    fn minutes_ring_keeps_the_last_hour() {
        let mut live = SiteLive::default();
        let a = ArticleId::parse("a").unwrap();
        for (ts, n) in [(0, 2), (59, 1), (60, 3), (3599, 1), (3600 + 120, 4)] {
            for _ in 0..n {
                live.counted(&Event::view(a.clone(), 1, ts));
            }
        }
        let m = live.views_by_minute(3600 + 120);
        assert_eq!(m.len(), MINUTES);
        // Minutes 3..=62: 59 (ts 3599) and 62 (ts 3720) are in, 0 and 1 are not.
        assert_eq!(m[MINUTES - 1], 4);
        assert_eq!(m[MINUTES - 4], 1);
        assert_eq!(m.iter().sum::<u64>(), 5);
    }
}
