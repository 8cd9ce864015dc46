//! A ranking as it stood at a time in the past ([`crate::store::Store::ranked_at`]):
//! every article scored at that time from its hourly buckets up to that
//! hour, in short holds of the state lock on a blocking thread, resting
//! between holds, so that neither ingest nor a query waits long for it
//! and the runtime's workers never run it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::model::{ArticleId, HotQuery, ModelKind, RangeSpec, Scale, Timestamp, hour_of};
use crate::rank::pages::SnapItem;
use crate::rank::{Filter, Walk};
use crate::score::{Models, Scaled};

use super::inner::{Inner, record_hold};
use super::state::article::Idx;
use super::store::EmbeddedStore;

/// How long one hold of the lock scores articles before letting others in:
/// a query or an ingest batch arriving meanwhile waits at most about this
/// long for it. (At 2 ms a hold, the scan over 10 M articles held the lock
/// 1,390 times in a query bench's 12 s and `/api/hot`'s p99 was 15.9 ms:
/// bench/HISTORY.md, branch tenm.)
const HOLD: Duration = Duration::from_micros(250);

/// How long the scan rests after each hold: it takes at most about half
/// of one core from the queries and ingest it runs beside (a baseline is
/// not waited for: the answers say `null` until it is there).
const REST: Duration = HOLD;

impl EmbeddedStore {
    /// [`crate::store::Store::ranked_at`].
    pub(super) async fn ranked_at_scan(
        &self,
        q: &HotQuery,
        at: Timestamp,
        depth: usize,
    ) -> Vec<ArticleId> {
        let RangeSpec::Hours(hours) = q.ranked_range() else {
            return Vec::new();
        };
        if q.model.lists_every_live_article() {
            return Vec::new();
        }
        let (inner, models, q) = (self.inner.clone(), self.settings.models.clone(), q.clone());
        // Dropped with this future (the caller gave up): the scan stops
        // at its next rest.
        let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
        let stopped = stop.0.clone();
        let scan = tokio::task::spawn_blocking(move || {
            let filter = Filter::of(&q);
            let mut walk: Walk<SnapItem> = Walk::new(depth, q.per_author);
            let mut next: Idx = 0;
            let past = Past {
                q: &q,
                filter: &filter,
                models: &models,
                hours,
                at,
            };
            while !past.chunk(&inner, &mut walk, &mut next) {
                if stopped.load(Ordering::Relaxed) {
                    return Vec::new();
                }
                std::thread::sleep(REST);
            }
            walk.finish().into_iter().map(|it| it.id).collect()
        });
        let ids = match scan.await {
            Ok(ids) => ids,
            Err(e) => match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                // The runtime is shutting down.
                Err(_) => Vec::new(),
            },
        };
        drop(stop);
        ids
    }
}

/// Tells the scan its caller is gone.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// One scan's query, as [`Past::chunk`] scores it.
struct Past<'a> {
    q: &'a HotQuery,
    filter: &'a Filter,
    models: &'a Models,
    hours: u32,
    at: Timestamp,
}

impl Past<'_> {
    /// Scores articles from `*next` on for one short hold of the lock;
    /// `true` once every article was looked at.
    fn chunk(&self, inner: &Mutex<Inner>, walk: &mut Walk<SnapItem>, next: &mut Idx) -> bool {
        let Past {
            q,
            filter,
            models,
            hours,
            at,
        } = *self;
        let end_hour = hour_of(at);
        let scaled = q.params.scale == Scale::Category;
        let inner = inner.lock();
        // Timed from when the lock is held (not from when it was asked
        // for), and at least one article a hold: a hold that started late
        // still moves the scan on instead of taking the lock for nothing.
        let held = Instant::now();
        let data = &inner.data;
        let len = data.articles.len();
        let first = *next;
        while (*next as usize) < len && (*next == first || held.elapsed() < HOLD) {
            let a = data.article(*next);
            *next += 1;
            let meta = a.meta.get();
            if a.deleted || !filter.matches(&meta) {
                continue;
            }
            let c = a.window_uncached(hours, end_hour);
            if !c.is_active() {
                continue;
            }
            // Rising reads its views per hour up to `at`.
            let series =
                (q.model == ModelKind::Rising).then(|| a.pv_series(q.params.rising.hours(at)));
            let Some(st) = models.standing(q.model, &q.params, &c, &meta, series.as_deref(), at)
            else {
                continue;
            };
            // Scaled by its category's events up to `at` (a past hour
            // mark: the hourly counts hold it exactly).
            let scale = scaled.then(|| data.category_scale_at(*next - 1, at));
            let st = st.scaled(scale);
            let score = st.score;
            // The walk keeps what it is offered: offer only what may
            // still enter the first `depth` (a full scan sees them all).
            if !walk.wants(score, &a.id) {
                continue;
            }
            let item = SnapItem {
                id: a.id.clone(),
                score,
                counters: c,
                author: meta.author.clone(),
                at,
                trend: st.trend,
                scale,
            };
            walk.offer(item, None);
        }
        let done = *next as usize >= len;
        parking_lot::MutexGuard::unlock_fair(inner);
        record_hold("ranked_at", held);
        done
    }
}
