//! Periodic maintenance: retention in short holds of the state lock, the
//! size gauges, and deciding when a snapshot is due.

use std::time::Instant;

use crate::model::{HotQuery, Timestamp};
use crate::store::StoreError;

use super::inner::record_hold;
use super::ranking::{self, RankKey};
use super::state::{Data, retention};
use super::store::EmbeddedStore;

impl EmbeddedStore {
    /// Runs `step` under the state lock, one hold of about
    /// [`ranking::BUILD_HOLD`] at a time (the deadline it is given), the
    /// lock handed over fairly and the task yielding between holds, until
    /// it returns `true`.
    async fn in_holds(&self, what: &'static str, mut step: impl FnMut(&mut Data, Instant) -> bool) {
        loop {
            let done = {
                let mut inner = self.inner.lock();
                let held = Instant::now();
                let done = step(&mut inner.data, held + ranking::BUILD_HOLD);
                parking_lot::MutexGuard::unlock_fair(inner);
                record_hold(what, held);
                done
            };
            if done {
                break;
            }
            tokio::task::yield_now().await;
        }
    }

    /// [`Store::maintain`](crate::store::Store::maintain): retention once a
    /// minute in short holds of the lock, the gauges, and a snapshot when
    /// one is due.
    pub(super) async fn maintenance(&self, now: Timestamp) -> Result<(), StoreError> {
        let started = Instant::now();
        // Retention walks every article: once a minute is plenty.
        let sweep = {
            let mut last = self.last_sweep.lock();
            let due = now - *last >= 60 || now < *last;
            if due {
                *last = now;
            }
            due
        };
        if sweep {
            // Retention walks every article and every dedupe shard: a chunk
            // per short hold of the state lock, so ingest never waits for
            // the whole walk.
            let s = &self.settings;
            {
                // Window caches over a range no live ranking has are dropped.
                let mut inner = self.inner.lock();
                let hours = inner.rankings.hours();
                inner.data.keep_window_ranges(hours);
            }
            let mut walk = retention::Sweep::default();
            self.in_holds("retention", |data, until| {
                data.expire_articles(now, s, &mut walk, s.build_chunk, Some(until))
            })
            .await;
            let mut shard = 0;
            self.in_holds("dedupe_retention", |data, until| {
                data.expire_sharded(now, s, &mut shard, Some(until))
            })
            .await;
            let mut inner = self.inner.lock();
            inner.data.expire_gate(now, &self.settings);
            inner.rankings.evict_idle(now - 3600);
            inner.fit(&RankKey::of(&HotQuery::default_page(), now));
            inner.expire_cursors(now);
            let (rankings, entries) = inner.rankings.sizes();
            let (dedupe, event_ids, limiter_keys) = inner.data.gate_sizes();
            let evicted = inner.rankings.take_evicted();
            drop(inner);
            drop(evicted);
            metrics::gauge!("hotrank_articles").set(walk.live as f64);
            metrics::gauge!("hotrank_rankings").set(rankings as f64);
            metrics::gauge!("hotrank_ranking_entries").set(entries as f64);
            metrics::gauge!("hotrank_window_cache_bytes").set(walk.window_cache_bytes as f64);
            metrics::gauge!("hotrank_dedupe_entries").set(dedupe as f64);
            metrics::gauge!("hotrank_event_ids").set(event_ids as f64);
            metrics::gauge!("hotrank_rate_limit_keys").set(limiter_keys as f64);
        }
        metrics::histogram!("hotrank_maintenance_seconds").record(started.elapsed().as_secs_f64());
        if let (Some(wal), Some(d)) = (&self.wal, &self.durability) {
            wal.publish_metrics();
            metrics::gauge!("hotrank_wal_bytes").set(wal.size_bytes() as f64);
            let records = self.records_since_snapshot();
            let age = self.last_snapshot.lock().elapsed().as_secs();
            if records >= d.snapshot_every_records
                || (records > 0 && age >= d.snapshot_interval_secs)
            {
                self.snapshot().await?;
            }
        }
        Ok(())
    }
}
