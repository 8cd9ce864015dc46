//! Rankings kept ready off the query path (`Store::keep_rankings`): the
//! default ranking is built once when the node starts, before `/readyz`
//! says ready, and the rankings this node served lately are brought up to
//! date every few seconds, so a query finds its ranking built and only a
//! few seconds of changes behind. Without it the first query after a
//! start or an import pays the rebuild (about 21 s at a million
//! articles), and a ranking queried rarely while many articles change
//! falls more than `MAX_DELTA` changes behind and is rebuilt by a query.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use super::RedisStore;
use crate::model::{HotQuery, Timestamp};
use crate::rank::pages;
use crate::store::{Store, StoreError};

/// Most rankings a node keeps up to date (the most recently queried).
const RECENT_MAX: usize = 32;
/// How often a ranking queried lately is brought up to date (seconds).
const REFRESH_EVERY: i64 = 10;
/// How long after its last query a ranking is still kept up to date
/// (seconds): as long as Redis keeps an unused ranking (`RANKING_TTL`),
/// so the upkeep never keeps alive a ranking nobody asks for.
const KEEP_FOR: i64 = super::rank::RANKING_TTL;

/// A refresh waits at least this many times as long as the last one of
/// its ranking took: a ranking rebuilt again and again (more than
/// `MAX_DELTA` changes between refreshes, as during a bulk import) costs
/// Redis at most a fifth of its time.
const BACKOFF: i64 = 4;

/// A ranking this node served: its query (first page), when it was last
/// asked for and last refreshed, and how long after that it is due again.
struct Recent {
    q: HotQuery,
    asked: Timestamp,
    refreshed: Timestamp,
    wait: i64,
}

/// What the node keeps warm.
#[derive(Default)]
pub(super) struct Warm {
    /// Whether the default ranking has been built since the node started.
    built: AtomicBool,
    /// By ranking key (first shard's).
    recent: Mutex<HashMap<String, Recent>>,
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
                wait: REFRESH_EVERY,
            },
        );
    }

    /// The rankings due for a refresh at `now`, most recently asked
    /// first; forgets those nobody asked for in `KEEP_FOR`.
    fn due(&self, now: Timestamp) -> Vec<(String, HotQuery)> {
        let mut recent = self.recent.lock();
        recent.retain(|_, r| now - r.asked < KEEP_FOR);
        let mut due: Vec<(&String, &Recent)> = recent
            .iter()
            // (Or the clock went back.)
            .filter(|(_, r)| now - r.refreshed >= r.wait || now < r.refreshed)
            .collect();
        due.sort_by_key(|(_, r)| std::cmp::Reverse(r.asked));
        due.into_iter()
            .map(|(k, r)| (k.clone(), r.q.clone()))
            .collect()
    }

    /// The ranking `zkey` was refreshed at `now`, in `took`.
    fn refreshed(&self, zkey: &str, now: Timestamp, took: std::time::Duration) {
        if let Some(r) = self.recent.lock().get_mut(zkey) {
            r.refreshed = now;
            r.wait = ((took.as_secs_f64() * BACKOFF as f64).ceil() as i64).max(REFRESH_EVERY);
        }
    }
}

impl RedisStore {
    /// `Store::warming`: until the default ranking is built.
    pub(super) fn warming_up(&self) -> Option<String> {
        (!self.warm.built.load(Ordering::SeqCst))
            .then(|| "warming up: building the default ranking".to_string())
    }

    /// `Store::keep_rankings`.
    pub(super) async fn keep_warm(&self, now: Timestamp) -> Result<(), StoreError> {
        if !self.warm.built.load(Ordering::SeqCst) {
            let started = std::time::Instant::now();
            self.hot(&HotQuery::default_page(), now).await?;
            self.warm.built.store(true, Ordering::SeqCst);
            tracing::info!(
                ms = started.elapsed().as_millis() as u64,
                "default ranking built: ready"
            );
            return Ok(());
        }
        for (zkey, q) in self.warm.due(now) {
            let started = std::time::Instant::now();
            let walk = pages::first_walk(&q, self.settings.ranking_cap);
            self.top(&q, walk, now).await?;
            self.warm.refreshed(&zkey, now, started.elapsed());
            metrics::counter!("hotrank_ranking_refreshes_total").increment(1);
        }
        Ok(())
    }
}
