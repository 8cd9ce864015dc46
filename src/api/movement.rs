//! Movement: where each listed article stood in the same ranking at the
//! last hour mark at least an hour before the answer (`movementSince`),
//! for `GET /api/hot`, the overview and `hotrank top`.
//!
//! The earlier ranking is computed, not remembered: the store scores
//! every candidate at `movementSince − 1 s` from its hourly buckets up to
//! the hour that ended then ([`crate::store::Store::ranked_at`]), so the
//! answer is the same on every node and after a restart. Complete hours
//! only: an answer at 10:20 compares with the ranking as it stood at
//! 08:59:59 (the hour mark at or before 09:20); one at 10:59 too. So the
//! comparison looks back between one and two hours.
//!
//! That costs a ranking's build, once per ranking and hour mark: the
//! first answer that needs it starts the computation in the background
//! (one at a time per process) and gets no movement (`null`) unless it
//! finishes within the caller's wait; later answers read it from a small
//! cache. Events that arrive later with times before the mark (a backend
//! replaying history) are not in a baseline computed before they came.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, watch};

use crate::model::{ArticleId, HotQuery, RankedItem, Timestamp};
use crate::rank::RankingId;
use crate::store::Store;

/// Hours back: the baseline is the mark at or before `generatedAt − 1 h`.
const LOOKBACK: i64 = 3600;
/// Rankings (query and mark) cached at once; the oldest marks go first.
const CACHED: usize = 64;
/// How deep a baseline ranking is taken: an item below it that is not in
/// it has no known movement (`null`) rather than `new`.
pub const DEPTH: usize = 1000;

/// The ranks of one earlier ranking.
#[derive(Debug)]
pub struct Baseline {
    /// The hour mark the ranking stood at (its scores at one second before).
    pub since: Timestamp,
    /// The articles in rank order.
    order: Vec<ArticleId>,
    ranks: HashMap<ArticleId, usize>,
    /// Whether the ranking held fewer than [`DEPTH`] articles (so an
    /// article not in it was not in the ranking at all).
    whole: bool,
}

impl Baseline {
    fn new(since: Timestamp, ids: Vec<ArticleId>, depth: usize) -> Self {
        Self::with(since, ids.len() < depth, ids)
    }

    fn with(since: Timestamp, whole: bool, order: Vec<ArticleId>) -> Self {
        Baseline {
            since,
            whole,
            ranks: (order.iter().enumerate())
                .map(|(i, id)| (id.clone(), i + 1))
                .collect(),
            order,
        }
    }

    /// The same ranking as a public list shows it: `public` turns the
    /// store's order into the public one (curation applied).
    fn public(&self, public: &PublicOrder<'_>) -> Baseline {
        Self::with(self.since, self.whole, public(&self.order))
    }

    /// An item's earlier rank and how it moved: `up`, `down`, `same`, or
    /// `new` (not in the earlier ranking); `(None, None)` when unknown
    /// (below the depth the baseline was taken to).
    pub fn movement(&self, id: &ArticleId, rank: usize) -> (Option<usize>, Option<&'static str>) {
        match self.ranks.get(id) {
            None if self.whole || rank <= self.ranks.len() => (None, Some("new")),
            None => (None, None),
            Some(&prev) if prev > rank => (Some(prev), Some("up")),
            Some(&prev) if prev < rank => (Some(prev), Some("down")),
            Some(&prev) => (Some(prev), Some("same")),
        }
    }
}

/// A ranking's order as a public list shows it (src/api/curated.rs).
pub type PublicOrder<'a> = dyn Fn(&[ArticleId]) -> Vec<ArticleId> + Send + Sync + 'a;

/// Counts a computation as finished when dropped (also if it panics).
struct Done(Arc<AtomicUsize>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The mark a ranking generated at `at` is compared with.
pub fn mark(at: Timestamp) -> Timestamp {
    (at - LOOKBACK).div_euclid(3600) * 3600
}

/// What shapes a ranking's order (not its paging) at the mark `since`:
/// the cache's key (the ranking's identity, [`RankingId`], and `perAuthor`).
fn ranking_key(q: &HotQuery, since: Timestamp) -> String {
    format!("{:?}|{:?}", RankingId::of(q, since - 1), q.per_author)
}

type Slot = watch::Receiver<Option<Arc<Baseline>>>;

/// Computations waiting or running at once, at most: a client asking for
/// many distinct rankings (every category there is, say) queues no more
/// scans than this; the rest get no movement until those are done.
const QUEUED: usize = 4;

/// Baselines computed or being computed, by ranking and mark.
pub struct Movements {
    /// `rankings.movement`: off, no baseline is ever computed.
    enabled: bool,
    slots: Mutex<HashMap<(String, Timestamp), Slot>>,
    /// One computation at a time: each scans every article.
    scans: Arc<Semaphore>,
    /// Computations started and not finished.
    queued: Arc<AtomicUsize>,
}

impl Default for Movements {
    fn default() -> Self {
        Movements::new(true)
    }
}

impl Movements {
    /// Movement on or off (`rankings.movement`).
    pub fn new(enabled: bool) -> Self {
        Movements {
            enabled,
            slots: Mutex::new(HashMap::new()),
            scans: Arc::new(Semaphore::new(1)),
            queued: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The baseline of `q`'s ranking for an answer generated at `at`,
    /// waiting at most `wait` for it; `None` if it is not ready by then
    /// (it goes on in the background) or the ranking has none (`range=all`,
    /// the vote models: lifetime counters cannot be taken back in time).
    pub async fn baseline(
        &self,
        store: &Arc<dyn Store>,
        q: &HotQuery,
        at: Timestamp,
        wait: Duration,
    ) -> Option<Arc<Baseline>> {
        if !self.enabled || !matches!(q.ranked_range(), crate::model::RangeSpec::Hours(_)) {
            return None;
        }
        let since = mark(at);
        let mut rx = self.slot(store, q, since);
        if rx.borrow().is_none() && !wait.is_zero() {
            let _ = tokio::time::timeout(wait, rx.wait_for(Option::is_some)).await;
        }
        rx.borrow().clone()
    }

    /// The slot of a ranking and mark, starting its computation if new
    /// and fewer than [`QUEUED`] are under way (else an empty slot, not
    /// kept: a later answer tries again).
    fn slot(&self, store: &Arc<dyn Store>, q: &HotQuery, since: Timestamp) -> Slot {
        let key = (ranking_key(q, since), since);
        let mut slots = self.slots.lock();
        if let Some(rx) = slots.get(&key) {
            return rx.clone();
        }
        if self.queued.load(Ordering::Acquire) >= QUEUED {
            return watch::channel(None).1;
        }
        self.queued.fetch_add(1, Ordering::AcqRel);
        if slots.len() >= CACHED {
            let oldest = slots.keys().min_by_key(|(_, t)| *t).cloned();
            if let Some(k) = oldest {
                slots.remove(&k);
            }
        }
        let (tx, rx) = watch::channel(None);
        slots.insert(key.clone(), rx.clone());
        drop(slots);
        let (store, scans, queued) = (store.clone(), self.scans.clone(), self.queued.clone());
        let q = HotQuery {
            offset: 0,
            limit: DEPTH,
            cursor: None,
            explain: false,
            ..q.clone()
        };
        tokio::spawn(async move {
            let _done = Done(queued);
            let Ok(_permit) = scans.acquire().await else {
                return;
            };
            let started = std::time::Instant::now();
            match store.ranked_at(&q, since - 1, DEPTH).await {
                Ok(ids) => {
                    metrics::histogram!("hotrank_movement_scan_seconds")
                        .record(started.elapsed().as_secs_f64());
                    tx.send_replace(Some(Arc::new(Baseline::new(since, ids, DEPTH))));
                }
                Err(e) => {
                    // Left empty: the next answer for this mark tries again.
                    tracing::warn!(error = %e, "movement: the earlier ranking could not be read");
                }
            }
        });
        rx
    }

    /// Drops a slot whose computation failed, so that it is tried again.
    fn forget_failed(&self) {
        self.slots
            .lock()
            .retain(|_, rx| rx.borrow().is_some() || rx.has_changed().is_ok());
    }

    /// Adds `previousRank` and `movement` to each item of `items` (the
    /// JSON of `ranked`, in order) and returns `movementSince` (`null`
    /// while the baseline is not known). With `public`, `ranked` is a
    /// public list and the earlier ranking is compared as that list
    /// would show it (the same curation applied).
    #[allow(clippy::too_many_arguments)]
    pub async fn annotate(
        &self,
        store: &Arc<dyn Store>,
        q: &HotQuery,
        at: Timestamp,
        wait: Duration,
        public: Option<&PublicOrder<'_>>,
        ranked: &[RankedItem],
        items: &mut [Value],
    ) -> Value {
        self.forget_failed();
        let baseline = self.baseline(store, q, at, wait).await;
        let baseline = match (baseline, public) {
            (Some(b), Some(public)) => Some(Arc::new(b.public(public))),
            (b, _) => b,
        };
        for (it, v) in ranked.iter().zip(items.iter_mut()) {
            let (previous, moved) = baseline
                .as_ref()
                .map_or((None, None), |b| b.movement(&it.id, it.rank));
            v["previousRank"] = json!(previous);
            v["movement"] = json!(moved);
        }
        json!(baseline.map(|b| b.since))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(xs: &[&str]) -> Vec<ArticleId> {
        xs.iter().map(|x| ArticleId::parse(x).unwrap()).collect()
    }

    /// A client asking for many distinct rankings queues at most
    /// [`QUEUED`] scans; the others get no movement and are not kept.
    #[tokio::test]
    async fn scans_queued_are_bounded() {
        use crate::config::Config;
        use crate::store::StoreSettings;
        use crate::store::embedded::{Durability, EmbeddedStore};
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        let (store, _) = EmbeddedStore::open(
            Durability::from_config(&config),
            StoreSettings::from_config(&config),
        )
        .unwrap();
        let store: Arc<dyn Store> = Arc::new(store);
        let m = Movements::default();
        // A scan under way: the others wait behind it.
        let busy = m.scans.clone().acquire_owned().await.unwrap();
        let at = 1_763_856_000;
        for i in 0..20 {
            let mut q = HotQuery::default_page();
            q.category = Some(format!("c{i}"));
            let b = m.baseline(&store, &q, at, Duration::ZERO).await;
            assert!(b.is_none());
        }
        assert_eq!(m.slots.lock().len(), QUEUED);
        assert_eq!(m.queued.load(Ordering::Acquire), QUEUED);
        drop(busy);
        let mut q = HotQuery::default_page();
        q.category = Some("c0".into());
        let b = m.baseline(&store, &q, at, Duration::from_secs(10)).await;
        assert_eq!(b.expect("computed once the scan is free").since, mark(at));
    }

    #[test]
    fn the_mark_is_the_hour_at_or_before_an_hour_ago() {
        let h = 1_763_856_000; // an hour mark
        assert_eq!(mark(h + 3600), h);
        assert_eq!(mark(h + 3600 + 1200), h);
        assert_eq!(mark(h + 7199), h);
        assert_eq!(mark(h + 7200), h + 3600);
    }

    #[test]
    fn movement_against_a_baseline() {
        let b = Baseline::new(0, ids(&["a", "b", "c"]), 3);
        let id = |s: &str| ArticleId::parse(s).unwrap();
        assert_eq!(b.movement(&id("c"), 1), (Some(3), Some("up")));
        assert_eq!(b.movement(&id("a"), 2), (Some(1), Some("down")));
        assert_eq!(b.movement(&id("b"), 2), (Some(2), Some("same")));
        // Not in a full baseline: new if it now ranks within its depth,
        // unknown below it.
        assert_eq!(b.movement(&id("z"), 3), (None, Some("new")));
        assert_eq!(b.movement(&id("z"), 4), (None, None));
        // A baseline shorter than its depth held the whole ranking.
        let short = Baseline::new(0, ids(&["a"]), 3);
        assert_eq!(short.movement(&id("z"), 40), (None, Some("new")));
        // As a public list shows it: "b" hidden, "c" pinned first. A full
        // baseline stays full however many its public order leaves.
        let public = b.public(&|o: &[ArticleId]| {
            let mut v = vec![id("c")];
            v.extend(
                o.iter()
                    .filter(|x| !["b", "c"].contains(&x.as_str()))
                    .cloned(),
            );
            v
        });
        assert_eq!(public.movement(&id("c"), 1), (Some(1), Some("same")));
        assert_eq!(public.movement(&id("a"), 2), (Some(2), Some("same")));
        assert_eq!(public.movement(&id("z"), 3), (None, None));
    }
}
