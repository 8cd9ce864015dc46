//! Retention over [`Data`]: old buckets, window caches of ranges no
//! ranking uses, closed voter sets, dedupe entries, behaviour state,
//! eventIds, rate logs and quarantine tallies, in chunks a short hold of
//! the state lock each.

use super::Data;
use super::compact::Sparse;
use super::slots::SHARDS;
use crate::model::{Timestamp, hour_of};
use crate::store::StoreSettings;

/// Retention at `now` keeps a dedupe entry only if its time is after this.
/// Views back-dated by more than an hour past the window may escape dedupe
/// once their pair's entry is gone; see docs/design.md.
pub fn dedupe_horizon(now: Timestamp, s: &StoreSettings) -> Timestamp {
    now - i64::from(s.dedupe_window_secs) - 3600
}

/// Where a chunked retention walk over the articles is
/// ([`Data::expire_articles`]), and what it saw.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sweep {
    pub next: usize,
    pub live: usize,
    pub window_cache_bytes: usize,
}

impl Data {
    /// Retention and expiry of gate state.
    pub fn expire(&mut self, now: Timestamp, s: &StoreSettings) {
        let mut sweep = Sweep::default();
        while !self.expire_articles(now, s, &mut sweep, usize::MAX, None) {}
        let mut shard = 0;
        while !self.expire_sharded(now, s, &mut shard, None) {}
        self.expire_gate(now, s);
    }

    /// Retention of the sharded tables (dedupe entries; per-visitor rate
    /// logs and behaviour state) from shard `next` on: at least one shard
    /// of each, and until `until`
    /// if given, else all; `true` once every shard is done. Ingest between
    /// two calls is as if it came before the sweep (for the shards still to
    /// do) or after it (for the others).
    pub fn expire_sharded(
        &mut self,
        now: Timestamp,
        s: &StoreSettings,
        next: &mut usize,
        until: Option<std::time::Instant>,
    ) -> bool {
        let horizon = dedupe_horizon(now, s);
        while *next < SHARDS {
            self.dedupe.retain_shard(*next, |_, last| last > horizon);
            self.visitors.sweep_shard(*next, now * 1000);
            *next += 1;
            if until.is_some_and(|t| std::time::Instant::now() >= t) {
                break;
            }
        }
        *next >= SHARDS
    }

    /// Retention for the next articles of `sweep`: at most `chunk`, and
    /// until `until` if given (checked every few articles); `true` once
    /// every article is done. Tallies live articles and window caches.
    pub fn expire_articles(
        &mut self,
        now: Timestamp,
        s: &StoreSettings,
        sweep: &mut Sweep,
        chunk: usize,
        until: Option<std::time::Instant>,
    ) -> bool {
        let first_hour = hour_of(now - s.retention_secs) + 1;
        let voting = s.models.votes.window_secs();
        let end = sweep.next.saturating_add(chunk).min(self.articles.len());
        for (n, a) in self.articles[sweep.next..end].iter_mut().enumerate() {
            a.expire(first_hour);
            if let Some(hours) = &self.window_ranges {
                let before = a.window_cache_bytes();
                a.keep_windows(hours);
                let freed = before - a.window_cache_bytes();
                self.window_bytes = self.window_bytes.saturating_sub(freed);
            }
            // Seed 003: once voting closes the voter set is freed.
            if a.voters.get().is_some() && now - a.meta.published_at() >= voting {
                a.voters = Sparse::default();
            }
            sweep.live += usize::from(!a.deleted);
            sweep.window_cache_bytes += a.window_cache_bytes();
            sweep.next += 1;
            if n % 64 == 63 && until.is_some_and(|t| std::time::Instant::now() >= t) {
                break;
            }
        }
        sweep.next >= self.articles.len()
    }

    /// Expiry of the gate's state but the sharded tables
    /// ([`Self::expire_sharded`]), and of old quarantine tallies.
    pub fn expire_gate(&mut self, now: Timestamp, s: &StoreSettings) {
        let first_hour = hour_of(now - s.retention_secs) + 1;
        self.quarantine_by_hour = self.quarantine_by_hour.split_off(&first_hour);
        self.site.expire(first_hour, now);
        self.site_live.expire(first_hour);
        self.net.expire(now, self.net_hours);
        let horizon = now - i64::from(s.event_id_ttl_secs);
        self.event_ids.retain(|_, &mut seen| seen > horizon);
        self.ip_limits.sweep(now * 1000);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::embedded::state::tests::{entries, ingest, view};

    /// Dedupe retention a shard per call, with ingest between the calls,
    /// leaves the entries and verdicts a whole sweep before (or after)
    /// that ingest leaves: events after the horizon are kept wherever
    /// their shard is in the sweep.
    #[test]
    fn chunked_dedupe_retention_equals_a_whole_sweep() {
        let s = StoreSettings {
            visitor_limit_per_minute: 0,
            ip_limit_per_minute: 0,
            ..StoreSettings::default()
        };
        let t0 = 1_800_000_000;
        let now = t0 + 2 * 3600;
        let horizon = dedupe_horizon(now, &s);
        let mut chunked = Data::new(&s);
        // Old entries (before the horizon) and recent ones.
        for i in 0..20_000u64 {
            let ts = if i % 2 == 0 { t0 } else { now - 60 };
            ingest(&mut chunked, &view(i % 50 + 1, u128::from(i), ts), &s);
        }
        let mut whole = chunked.clone();
        whole.expire(now, &s);
        let mut late = Vec::new();
        let (mut shard, mut calls) = (0, 0u64);
        // A deadline already past: one shard per call.
        while !chunked.expire_sharded(now, &s, &mut shard, Some(std::time::Instant::now())) {
            calls += 1;
            if calls % 64 == 0 {
                // New and raised pairs, after the horizon, mid-sweep.
                let ev = view(calls % 50 + 1, u128::from(calls * 7), now);
                late.push(ev.clone());
                ingest(&mut chunked, &ev, &s);
            }
        }
        assert_eq!(calls as usize + 1, SHARDS);
        chunked.expire_gate(now, &s);
        assert!(chunked.dedupe.iter().all(|(_, t)| t > horizon));
        for ev in &late {
            ingest(&mut whole, ev, &s);
        }
        assert_eq!(entries(&chunked), entries(&whole));
        // Half the pairs were old; a late event every 64 shards, some on a
        // swept shard.
        assert_eq!(late.len(), SHARDS / 64 - 1);
        assert!((10_000..10_100).contains(&whole.dedupe.len()));
        // The same verdicts for every pair, swept or not.
        for i in 0..20_000u64 {
            let ev = view(i % 50 + 1, u128::from(i), now);
            let found = whole.lookup(&ev.article);
            assert_eq!(
                chunked.judge(&ev, found, &s),
                whole.judge(&ev, found, &s),
                "pair {i}"
            );
        }
    }
}
