//! Rankings kept ready off the query path (`Store::keep_rankings`): the
//! default ranking is built once when the node starts, before `/readyz`
//! says ready, and the rankings this node served lately are brought up to
//! date every few seconds (the articles changed since are scored and
//! their bounds written back; no walk), so a query finds its ranking
//! built and only a few seconds of changes behind. Without it the first query after a
//! start or an import pays the rebuild (about 21 s at a million
//! articles), and a ranking queried now and then while many articles
//! change falls more than `MAX_DELTA` changes behind and is rebuilt by a
//! query. A refresh never rebuilds: a ranking that is gone (evicted past
//! `rankings.max_live`, or expired) or too far behind to catch up (a bulk
//! import) is forgotten until a query rebuilds it and asks again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::RedisStore;
use super::rank::Stale;
use crate::model::{HotQuery, Timestamp};
use crate::rank::Walk;
use crate::rank::pages::SnapItem;
use crate::store::{Store, StoreError};

/// Most rankings a node keeps up to date (the most recently queried).
const RECENT_MAX: usize = 32;
/// How often a ranking queried lately is brought up to date (seconds).
const REFRESH_EVERY: i64 = 10;
/// How long after its last query a ranking is kept up to date (seconds):
/// half as long as Redis keeps an unused ranking (`RANKING_TTL`, counted
/// from its last write-back, a refresh's too), so a ranking nobody asks
/// for is dropped at most 1.5 RANKING_TTL after its last query.
const KEEP_FOR: i64 = super::keys::RANKING_TTL / 2;
/// After a pass of refreshes that took L, the node waits BACKOFF × L
/// before the next: long catch-ups (up to `MAX_DELTA` changes each) take
/// a fifth of the node's time at most.
const BACKOFF: u32 = 4;

/// A ranking this node served: its query (first page), when it was last
/// asked for, and last refreshed.
struct Recent {
    q: HotQuery,
    asked: Timestamp,
    refreshed: Timestamp,
}

/// What the node keeps warm.
#[derive(Default)]
pub(super) struct Warm {
    /// Whether the default ranking has been built since the node started.
    built: AtomicBool,
    /// Why the last attempt to build it failed, if it did.
    failed: Mutex<Option<String>>,
    /// By ranking key (first shard's).
    recent: Mutex<HashMap<String, Recent>>,
    /// No refresh before then (`BACKOFF`).
    paused_until: Mutex<Option<Instant>>,
}

impl Warm {
    /// A first page of `zkey` was asked for at `now`.
    pub(super) fn asked(&self, zkey: &str, q: &HotQuery, now: Timestamp) {
        let mut recent = self.recent.lock();
        if let Some(r) = recent.get_mut(zkey) {
            r.asked = r.asked.max(now);
            return;
        }
        if recent.len() >= RECENT_MAX {
            let oldest = recent
                .iter()
                .min_by_key(|(_, r)| r.asked)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                recent.remove(&k);
            }
        }
        let q = HotQuery {
            offset: 0,
            cursor: None,
            explain: false,
            ..q.clone()
        };
        recent.insert(
            zkey.to_string(),
            Recent {
                q,
                asked: now,
                refreshed: now,
            },
        );
    }

    /// The rankings due for a refresh at `now` (marked refreshed), most
    /// recently asked first; forgets those nobody asked for in `KEEP_FOR`.
    fn due(&self, now: Timestamp) -> Vec<(String, HotQuery)> {
        let mut recent = self.recent.lock();
        recent.retain(|_, r| now - r.asked < KEEP_FOR);
        let mut due: Vec<(&String, &mut Recent)> = recent
            .iter_mut()
            // (Or the clock went back.)
            .filter(|(_, r)| now - r.refreshed >= REFRESH_EVERY || now < r.refreshed)
            .collect();
        due.sort_by_key(|(_, r)| std::cmp::Reverse(r.asked));
        due.into_iter()
            .map(|(k, r)| {
                r.refreshed = now;
                (k.clone(), r.q.clone())
            })
            .collect()
    }

    fn forget(&self, zkey: &str) {
        self.recent.lock().remove(zkey);
    }
}

impl RedisStore {
    /// `Store::warming`: until the default ranking is built.
    pub(super) fn warming_up(&self) -> Option<String> {
        if self.warm.built.load(Ordering::SeqCst) {
            return None;
        }
        Some(match &*self.warm.failed.lock() {
            None => "warming up: building the default ranking".to_string(),
            Some(e) => {
                format!("warming up: building the default ranking failed ({e}); trying again")
            }
        })
    }

    /// `Store::keep_rankings`.
    pub(super) async fn keep_warm(&self, now: Timestamp) -> Result<(), StoreError> {
        if !self.warm.built.load(Ordering::SeqCst) {
            let started = Instant::now();
            if let Err(e) = self.hot(&HotQuery::default_page(), now).await {
                *self.warm.failed.lock() = Some(e.to_string());
                return Err(e);
            }
            self.warm.built.store(true, Ordering::SeqCst);
            tracing::info!(
                ms = started.elapsed().as_millis() as u64,
                "default ranking built: ready"
            );
            return Ok(());
        }
        if (*self.warm.paused_until.lock()).is_some_and(|t| Instant::now() < t) {
            return Ok(());
        }
        let started = Instant::now();
        let mut failed = None;
        for (zkey, q) in self.warm.due(now) {
            // A walk for no items: the articles changed since the ranking
            // last looked are scored and written back, nothing else is
            // read (a query's walk, over loose bounds, can score them all).
            let walk: Walk<SnapItem> = Walk::new(0, q.per_author);
            match self.top_if(&q, walk, now, Stale::Skip).await {
                Ok(Some(_)) => metrics::counter!("hotrank_ranking_refreshes_total").increment(1),
                Ok(None) => self.warm.forget(&zkey),
                // The others are still refreshed; this one is due again
                // in REFRESH_EVERY.
                Err(e) => failed = Some(e),
            }
        }
        let took: Duration = started.elapsed();
        *self.warm.paused_until.lock() = Some(Instant::now() + took * BACKOFF);
        failed.map_or(Ok(()), Err)
    }
}
