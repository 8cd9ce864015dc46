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
    /// The first hour whose sketch [`Self::expire`] has not yet looked at
    /// to shrink (not serialized: after a restart it looks at every hour
    /// once).
    #[serde(skip)]
    shrink_from: i64,
}

/// Dense sketches [`SiteStats::expire`] tries to shrink in one call (each
/// try reads the 16,384 registers): after a restart a long retention's
/// busy hours are looked at over a few sweeps, not in one hold.
const SHRINK_PER_EXPIRE: usize = 8;

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
    ///
    /// An hour's sketch starts dense: a sorted insert into a sparse one
    /// cost a view 4,500-7,700 instructions (the scan and move of up to
    /// 3,000 bytes), a dense register ~20. The estimate depends on the
    /// registers only, which are the same in both encodings. Once the hour
    /// is over [`Self::expire`] shrinks it back to sparse where that fits,
    /// so a quiet site keeps a few bytes an hour over its retention, not
    /// 12,304. An hour the shrinking has passed (a late view) starts
    /// sparse.
    pub fn counted_view(&mut self, ts: Timestamp, hash: u64) {
        let hour = hour_of(ts);
        let dense = hour >= self.shrink_from;
        self.visitors_by_hour
            .entry(hour)
            .or_insert_with(|| if dense { Hll::new_dense() } else { Hll::new() })
            .add_hash(hash);
    }

    /// Drops the hours before `first_hour`, and the category counts
    /// older than they are kept ([`CategoryCounts::expire`]); shrinks the
    /// dense sketches of the hours before the previous one
    /// ([`Self::counted_view`]) to sparse where they fit, at most
    /// [`SHRINK_PER_EXPIRE`] a call.
    pub fn expire(&mut self, first_hour: i64, now: Timestamp) {
        self.crawlers_by_hour = self.crawlers_by_hour.split_off(&first_hour);
        self.visitors_by_hour = self.visitors_by_hour.split_off(&first_hour);
        self.categories.expire(now);
        let until = hour_of(now) - 1;
        let from = self.shrink_from.max(first_hour);
        if from >= until {
            return;
        }
        let mut budget = SHRINK_PER_EXPIRE;
        self.shrink_from = until;
        for (&hour, sketch) in self.visitors_by_hour.range_mut(from..until) {
            if sketch.is_sparse() {
                continue;
            }
            if budget == 0 {
                self.shrink_from = hour;
                break;
            }
            budget -= 1;
            if let Some(small) = sketch.to_sparse() {
                *sketch = small;
            }
        }
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
    use crate::sketch::{HLL_SEED, murmur64a};

    /// The site's visitors read the same as with sparse sketches from the
    /// start (as before), on a random stream over a day with late views and
    /// a sweep now and then: every range's count is identical, and the
    /// hours that are over and fit are sparse again.
    #[test]
    fn dense_hours_count_what_sparse_ones_did() {
        let mut rng = crate::loadgen::stream::Rng::new(0x5349_5445);
        let mut site = SiteStats::default();
        let mut before: BTreeMap<i64, Hll> = BTreeMap::new();
        let t0 = 1_763_760_000 - 1_763_760_000 % 3600;
        let mut now = t0;
        for step in 0..60_000u64 {
            now += (rng.next_u64() % 3) as i64;
            // Mostly now, sometimes up to three hours late.
            let late = if rng.next_u64().is_multiple_of(50) {
                (rng.next_u64() % 10_800) as i64
            } else {
                0
            };
            let ts = now - late;
            // Busy hours and quiet ones: the visitors of an hour come from
            // a pool whose size depends on the hour.
            let pool = [20u64, 3, 5_000, 400][(hour_of(ts) % 4) as usize];
            let visitor = rng.next_u64() % pool + 1_000_000 * hour_of(ts) as u64;
            let hash = murmur64a(&visitor.to_le_bytes(), HLL_SEED);
            site.counted_view(ts, hash);
            before.entry(hour_of(ts)).or_default().add_hash(hash);
            if step % 700 == 0 {
                let first_hour = hour_of(now) - 20;
                site.expire(first_hour, now);
                before = before.split_off(&first_hour);
            }
            if step % 2_500 == 0 {
                for first_hour in before.keys().copied().chain([hour_of(now) + 1]) {
                    let sketches: Vec<&Hll> = before.range(first_hour..).map(|(_, h)| h).collect();
                    let want = match sketches.as_slice() {
                        [] => 0,
                        [one] => one.estimate(),
                        all => Hll::union_count(all),
                    };
                    assert_eq!(
                        site.visitors_since(first_hour),
                        want,
                        "step {step}, from {first_hour}"
                    );
                }
            }
        }
        assert_eq!(site.visitors_by_hour.len(), before.len());
        site.expire(hour_of(now) - 20, now);
        let mut shrunk = 0;
        for (hour, h) in &site.visitors_by_hour {
            assert_eq!(h.registers(), before[hour].registers());
            if *hour < hour_of(now) - 1
                && before[hour].is_sparse()
                && before[hour].byte_len() < 2_000
            {
                assert!(
                    h.is_sparse(),
                    "hour {hour}: {} bytes before",
                    before[hour].byte_len()
                );
                shrunk += 1;
            }
        }
        assert!(shrunk >= 5, "{shrunk} hours shrunk");
    }

    /// After a restart (the mark is not serialized) every retained hour is
    /// looked at, a few a sweep; a late view into an hour already passed
    /// starts a sparse sketch.
    #[test]
    fn shrinking_resumes_after_a_restart_a_few_hours_a_sweep() {
        let mut site = SiteStats::default();
        let h0 = 490_000;
        for hour in h0..h0 + 30 {
            site.counted_view(hour * 3600, murmur64a(&hour.to_le_bytes(), HLL_SEED));
        }
        assert!(site.visitors_by_hour.values().all(|h| !h.is_sparse()));
        let back: SiteStats = postcard::from_bytes(&postcard::to_allocvec(&site).unwrap()).unwrap();
        let mut site = back;
        let now = (h0 + 30) * 3600;
        site.expire(h0, now);
        let sparse = site
            .visitors_by_hour
            .values()
            .filter(|h| h.is_sparse())
            .count();
        assert_eq!(sparse, SHRINK_PER_EXPIRE);
        while site
            .visitors_by_hour
            .values()
            .filter(|h| h.is_sparse())
            .count()
            < 29
        {
            site.expire(h0, now);
        }
        // The last hour before the current one stays dense; a late view
        // into an hour already passed starts sparse.
        assert!(!site.visitors_by_hour[&(h0 + 29)].is_sparse());
        site.visitors_by_hour.remove(&(h0 + 3));
        site.counted_view((h0 + 3) * 3600, murmur64a(b"late", HLL_SEED));
        assert!(site.visitors_by_hour[&(h0 + 3)].is_sparse());
    }

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
