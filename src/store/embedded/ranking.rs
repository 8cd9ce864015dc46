//! The embedded store's ranking indexes: for every ranking queries asked
//! for, the articles active in its window ordered by an upper bound of
//! their score, walked by the shared core ([`crate::rank`]) that keeps
//! every answer exact at query time.
//!
//! The index holds every article active in the ranking's window, not just
//! the top `ranking_cap` that queries may reach: a capped index must rebuild
//! from all counters whenever the best article left out might overtake the
//! k-th (with near-equal scores decaying together, that is every second).
//! Indexing all active articles costs about 100 bytes per article and
//! ranking, and makes every answer exact without a rebuild. docs/design.md
//! ("Freshness") has the argument in full.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use crate::model::{ArticleId, Counters, RangeSpec, Timestamp, Trend};
use crate::rank::pages::SnapItem;
use crate::rank::{self, Walk};
use crate::score::{CategoryScale, ModelKind, Models, Scaled};

use super::state::article::{Idx, IdxMap, IdxSet};
use super::state::{Change, Data};

/// What distinguishes one ranking from another ([`rank::RankingId`]).
pub type RankKey = rank::RankingId;

#[derive(Debug, Clone)]
struct Entry {
    bound: f64,
    id: ArticleId,
    idx: Idx,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        rank::order(self.bound, &self.id, other.bound, &other.id)
    }
}

/// One article's standing in one ranking at `now`.
#[derive(Debug, Clone, Copy)]
pub struct Exact {
    pub score: f64,
    /// Bounds the score from now on while no event arrives.
    pub bound: f64,
    pub counters: Counters,
    pub trend: Option<Trend>,
    /// Its category's events when the ranking is scaled by category.
    pub scale: Option<CategoryScale>,
}

/// Exact score of one article for one ranking at `now`, or `None` when it
/// does not belong in the ranking (deleted, filtered out, or no activity
/// inside a bounded window).
pub fn exact(
    data: &mut Data,
    idx: Idx,
    key: &RankKey,
    models: &Models,
    now: Timestamp,
) -> Option<Exact> {
    let a = data.article(idx);
    if a.deleted || !key.filter.matches(&a.meta.get()) {
        return None;
    }
    let c = data.window(idx, key.range, now);
    if matches!(key.range, RangeSpec::Hours(_)) && !c.is_active() {
        return None;
    }
    let scale = key.day.map(|day| data.category_scale(idx, day, now));
    let a = data.article(idx);
    let series =
        (key.model == ModelKind::Rising).then(|| a.pv_series(key.params.rising.hours(now)));
    let st = (models.standing(
        key.model,
        &key.params,
        &c,
        &a.meta.get(),
        series.as_deref(),
        now,
    ))?
    .scaled(scale);
    Some(Exact {
        score: st.score,
        bound: st.bound,
        counters: c,
        trend: st.trend,
        scale,
    })
}

fn listed(data: &Data, idx: Idx, ex: &Exact, at: Timestamp) -> SnapItem {
    let a = data.article(idx);
    SnapItem {
        id: a.id.clone(),
        score: ex.score,
        counters: ex.counters,
        author: a.meta.author().map(str::to_owned),
        at,
        trend: ex.trend,
        scale: ex.scale,
    }
}

pub struct Ranking {
    key: RankKey,
    order: BTreeSet<Entry>,
    bounds: IdxMap<f64>,
    dirty: IdxSet,
    /// While the ranking is built (off the store's lock, [`Build`]): what
    /// its waiting queries wait on. Changes meanwhile mark articles dirty
    /// as usual, and the build re-scores them before it says it is done.
    building: Option<Arc<BuildSignal>>,
    /// Whether a thread was started to build it.
    build_started: bool,
    /// The newest time bounds were computed at: they hold from then on.
    bounds_at: Option<Timestamp>,
    last_used: Timestamp,
    /// Use counter at the last query, for least-recently-used eviction.
    used: u64,
    /// Never evicted ([`Rankings::pin`]): the default ranking, kept
    /// current from the store's start so that no query waits for its build.
    pinned: bool,
    /// When a query (or the warm-up) last asked for it, and when
    /// [`Rankings::upkeep`] last re-scored it: a ranking nobody asked for
    /// lately is kept current less often ([`UPKEEP_IDLE_EVERY`]).
    asked: Instant,
    upkept: Instant,
    /// Full builds so far (for metrics and tests).
    pub rebuilds: u64,
}

impl Ranking {
    fn new(key: RankKey) -> Self {
        Ranking {
            key,
            order: BTreeSet::new(),
            bounds: IdxMap::default(),
            dirty: IdxSet::default(),
            building: Some(Arc::new(BuildSignal::default())),
            build_started: false,
            bounds_at: None,
            last_used: 0,
            used: 0,
            pinned: false,
            asked: Instant::now(),
            upkept: Instant::now(),
            rebuilds: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Bytes the ranking holds, estimated: its index's entries (tree nodes
    /// 55–100 % full: [`ENTRY_BYTES`] each), and the tables of bounds and
    /// of changed articles by their capacity.
    fn bytes(&self) -> usize {
        let slot = |t: usize| t + 1;
        self.order.len() * ENTRY_BYTES
            + self.bounds.capacity() * slot(std::mem::size_of::<(Idx, f64)>())
            + self.dirty.capacity() * slot(std::mem::size_of::<Idx>())
    }

    fn remove(&mut self, idx: Idx, data: &Data) {
        if let Some(bound) = self.bounds.remove(&idx) {
            self.order.remove(&Entry {
                bound,
                id: data.article(idx).id.clone(),
                idx,
            });
        }
    }

    /// Inserts with a fresh bound.
    fn insert(&mut self, idx: Idx, bound: f64, data: &Data) {
        self.bounds.insert(idx, bound);
        self.order.insert(Entry {
            bound,
            id: data.article(idx).id.clone(),
            idx,
        });
    }

    /// Re-scores one changed article.
    fn refresh(&mut self, idx: Idx, data: &mut Data, models: &Models, at: Timestamp) {
        self.remove(idx, data);
        if let Some(ex) = exact(data, idx, &self.key, models, at) {
            self.insert(idx, ex.bound, data);
        }
    }

    fn refresh_dirty(&mut self, data: &mut Data, models: &Models, now: Timestamp) {
        for idx in std::mem::take(&mut self.dirty) {
            self.refresh(idx, data, models, now);
        }
    }

    /// Re-scores changed articles at `at` until at most `keep` are left,
    /// `chunk` were re-scored, or the hold that began at `started` is over
    /// ([`BUILD_HOLD`]). Returns the articles re-scored.
    fn rescore_dirty(
        &mut self,
        data: &mut Data,
        models: &Models,
        at: Timestamp,
        keep: usize,
        chunk: usize,
        started: Instant,
    ) -> usize {
        let want = self.dirty.len().saturating_sub(keep).min(chunk);
        // Taken in one pass: a set emptied from its front one `next()` at
        // a time rescans its emptied buckets every time.
        let batch: Vec<Idx> = self.dirty.iter().take(want).copied().collect();
        let mut done = 0;
        for idx in batch {
            self.dirty.remove(&idx);
            self.refresh(idx, data, models, at);
            done += 1;
            if hold_over(started, done - 1) {
                break;
            }
        }
        self.bounds_at = Some(self.bounds_at.map_or(at, |x| x.max(at)));
        done
    }

    fn is_building(&self, sig: &Arc<BuildSignal>) -> bool {
        self.building.as_ref().is_some_and(|b| Arc::ptr_eq(b, sig))
    }

    /// Writes back the new bounds of `rescored` (entries of the index in
    /// its order, each with its new bound or `None` to leave) in one pass
    /// that builds the index anew, where a walk re-scored more than an
    /// eighth of it (the first query after a bulk load, whose bounds were
    /// computed as each article arrived and now all lie above the scores).
    /// Entry by entry, each re-scored entry is a removal and an insertion
    /// that walk the tree; here each entry is moved once and an almost
    /// sorted run sorted (the cost ratio is reasoned, not measured). It
    /// also packs the tree: one kept from an empty store through a bulk
    /// load has nodes 55–70 % full, 64–68 bytes an entry at 200,000
    /// articles (heaptrack, bench/HISTORY.md, branch mem2).
    fn reindex(&mut self, rescored: Vec<(Entry, Option<f64>)>) {
        let mut rescored = rescored.into_iter().peekable();
        let mut entries = Vec::with_capacity(self.order.len());
        for mut e in std::mem::take(&mut self.order) {
            match rescored.next_if(|(r, _)| r.idx == e.idx) {
                None => entries.push(e),
                Some((_, None)) => {
                    self.bounds.remove(&e.idx);
                }
                Some((_, Some(bound))) => {
                    e.bound = bound;
                    self.bounds.insert(e.idx, bound);
                    entries.push(e);
                }
            }
        }
        debug_assert!(
            rescored.next().is_none(),
            "re-scored entries in index order"
        );
        self.order = BTreeSet::from_iter(entries);
    }

    /// Drives the threshold walk over the index at `at`, then writes the
    /// exact bounds back: bounds computed now are the tightest there are.
    fn walk(
        &mut self,
        mut walk: Walk<SnapItem>,
        data: &mut Data,
        models: &Models,
        at: Timestamp,
    ) -> Vec<SnapItem> {
        let mut rescored: Vec<(Entry, Option<f64>)> = Vec::new();
        for e in &self.order {
            if !walk.wants(e.bound, &e.id) {
                break;
            }
            if walk.skips(&e.id) {
                continue;
            }
            let ex = exact(data, e.idx, &self.key, models, at);
            if let Some(ex) = &ex {
                walk.offer(listed(data, e.idx, ex, at), Some(e.bound));
            }
            rescored.push((e.clone(), ex.map(|x| x.bound)));
        }
        if rescored.len() > self.order.len() / 8 {
            self.reindex(rescored);
        } else {
            for (e, new) in rescored {
                self.order.remove(&e);
                self.bounds.remove(&e.idx);
                if let Some(bound) = new {
                    self.insert(e.idx, bound, data);
                }
            }
        }
        self.bounds_at = Some(self.bounds_at.map_or(at, |b| b.max(at)));
        let mut items = walk.finish();
        // The walk keeps every article it offered until it finishes: after
        // a bulk load whose bounds all tie (each article's, computed while
        // it arrived, above its score now) that is every indexed article,
        // and the page cache held the grown buffer (47 bytes an article
        // at 200,000 one-view articles: bench/HISTORY.md, branch mem2).
        items.shrink_to_fit();
        items
    }
}

/// Bytes an index entry takes in its tree: the entry in nodes 55–70 %
/// full after incremental inserts (64–68 bytes an entry measured at
/// 200,000 articles, bench/HISTORY.md, branch mem2), counted as 2/3 full.
const ENTRY_BYTES: usize = std::mem::size_of::<Entry>() * 3 / 2;

/// About the longest a build's catch-up or the retention sweep holds the
/// store's lock at a time.
pub const BUILD_HOLD: std::time::Duration = std::time::Duration::from_millis(1);

/// A build is done once at most this many changed articles are left for
/// the next query to re-score; a query finding more re-scores them in
/// holds of [`BUILD_HOLD`] first ([`Rankings::catch_up_query`]).
const CATCH_UP_LEFT: usize = 256;

/// [`Rankings::upkeep`] re-scores a built ranking once more than this
/// many of its articles changed since a query last looked.
pub const UPKEEP_DIRTY: usize = CATCH_UP_LEFT;

/// A ranking no query asked for within this long is an idle one ...
pub const UPKEEP_ASKED: std::time::Duration = std::time::Duration::from_secs(10);

/// ... and [`Rankings::upkeep`] re-scores an idle ranking at most this
/// often: under ingest alone, re-scoring every changed article every pass
/// (100 ms) held the state lock for 18 % of the time (1.42 s of holds in
/// 8 s of batches of 1,000 over 10,000 articles) for answers nobody read,
/// while a bulk load's first query still finds at most this long's changes
/// to catch up on.
pub const UPKEEP_IDLE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether `BUILD_HOLD` is over, looked at every 8 articles: at every
/// 64th, a build's and the upkeep's holds at 1 M articles ran 1–2.5 ms
/// (an article whose entry misses the caches costs microseconds), where
/// reading the clock costs ~25 ns.
fn hold_over(started: Instant, done: usize) -> bool {
    done % 8 == 7 && started.elapsed() >= BUILD_HOLD
}

/// Tells the queries waiting for a ranking that its build ended (built,
/// or given up: they look again).
#[derive(Default)]
pub struct BuildSignal {
    done: parking_lot::Mutex<bool>,
    cond: parking_lot::Condvar,
    notify: tokio::sync::Notify,
}

impl BuildSignal {
    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if *self.done.lock() {
                return;
            }
            notified.await;
        }
    }

    pub fn wait_blocking(&self) {
        let mut done = self.done.lock();
        while !*done {
            self.cond.wait(&mut done);
        }
    }

    pub fn finish(&self) {
        *self.done.lock() = true;
        self.cond.notify_all();
        self.notify.notify_waiters();
    }
}

/// How a query finds its ranking.
pub enum Join {
    /// Built: walk it now, under the same hold of the lock.
    Built,
    /// Being built: wait for the signal, then look again.
    Wait(Arc<BuildSignal>),
    /// New: the caller starts its build ([`Build`]), then waits.
    Start(Arc<BuildSignal>),
}

/// Where a build is after one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    More,
    Done,
    /// The ranking was dropped meanwhile: nothing to build.
    Gone,
}

/// A ranking's first build, run off the store's lock: each article is
/// scored in chunks under short holds of the lock ([`Rankings::build_chunk`]),
/// the index is assembled from the scores with the lock released
/// ([`Build::assemble`]), installed under a short hold, and the articles
/// that changed meanwhile (marked dirty, as for any ranking) are re-scored
/// in chunks ([`Rankings::catch_up`]). Queries wait on the ranking's
/// [`BuildSignal`] meanwhile: concurrent first queries share one build.
pub struct Build {
    key: RankKey,
    signal: Arc<BuildSignal>,
    now: Timestamp,
    entries: Vec<Entry>,
    next: Idx,
    at: Option<Timestamp>,
    order: Option<(BTreeSet<Entry>, IdxMap<f64>)>,
}

impl Build {
    pub fn new(key: RankKey, signal: Arc<BuildSignal>, now: Timestamp) -> Self {
        Build {
            key,
            signal,
            now,
            entries: Vec::new(),
            next: 0,
            at: None,
            order: None,
        }
    }

    pub fn key(&self) -> &RankKey {
        &self.key
    }

    pub fn signal(&self) -> &Arc<BuildSignal> {
        &self.signal
    }

    /// Articles looked at so far.
    pub fn scored(&self) -> usize {
        self.next as usize
    }

    /// Sorts the scored articles into the index (with the lock released).
    pub fn assemble(&mut self) {
        let entries = std::mem::take(&mut self.entries);
        let bounds = entries.iter().map(|e| (e.idx, e.bound)).collect();
        self.order = Some((BTreeSet::from_iter(entries), bounds));
    }
}

/// Every ranking that queries have asked for, created on first use, at
/// most `max_live` of them and, with the window caches, at most
/// `max_bytes` ([`Rankings::fit`]): the least recently used goes first.
pub struct Rankings {
    map: HashMap<RankKey, Ranking>,
    max_live: usize,
    max_bytes: usize,
    uses: u64,
    evicted: Vec<Ranking>,
}

impl Rankings {
    pub fn new(max_live: usize, max_bytes: usize) -> Self {
        Rankings {
            map: HashMap::new(),
            max_live: max_live.max(1),
            max_bytes,
            uses: 0,
            evicted: Vec::new(),
        }
    }

    /// Bytes the rankings hold, estimated ([`Ranking::bytes`]).
    pub fn bytes(&self) -> usize {
        self.map.values().map(Ranking::bytes).sum()
    }

    /// The ranges of the live rankings (their articles' window caches are
    /// the ones worth keeping).
    pub fn hours(&self) -> Vec<u32> {
        let mut hours: Vec<u32> = (self.map.keys())
            .filter_map(|k| match k.range {
                RangeSpec::Hours(h) => Some(h),
                _ => None,
            })
            .collect();
        hours.sort_unstable();
        hours.dedup();
        hours
    }

    /// Evicts the least recently used rankings while they and the window
    /// caches (`window_bytes`) hold more than `max_bytes`. Kept whatever
    /// they hold: `keep` (the ranking a query or build just used), the
    /// pinned default ranking, and rankings being built. Returns the bytes
    /// held after.
    pub fn fit(&mut self, keep: &RankKey, window_bytes: usize) -> usize {
        let mut held = self.bytes() + window_bytes;
        while held > self.max_bytes {
            let oldest = (self.map.iter())
                .filter(|(k, r)| r.building.is_none() && !r.pinned && *k != keep)
                .min_by_key(|(_, r)| r.used)
                .map(|(k, _)| k.clone());
            let Some(r) = oldest.and_then(|k| self.map.remove(&k)) else {
                break;
            };
            held -= r.bytes();
            self.evicted.push(r);
            metrics::counter!("hotrank_ranking_evictions_total").increment(1);
        }
        held
    }

    /// Follows a change: the article is re-scored at the next query.
    pub fn on_change(&mut self, change: Change, data: &Data) {
        match change {
            Change::None => {}
            Change::Counted(idx) => {
                // The metadata is read (a bare article's is built) only
                // for a ranking with a filter, once.
                let a = data.article(idx);
                let mut meta = None;
                for r in self.map.values_mut() {
                    let f = &r.key.filter;
                    if f.is_empty() || f.matches(meta.get_or_insert_with(|| a.meta.get())) {
                        r.dirty.insert(idx);
                    }
                }
            }
            // Filters may now match or no longer match.
            Change::Meta(idx) => {
                for r in self.map.values_mut() {
                    r.dirty.insert(idx);
                }
            }
        }
    }

    fn get(&mut self, key: &RankKey, now: Timestamp) -> &mut Ranking {
        self.uses += 1;
        if !self.map.contains_key(key) && self.map.len() >= self.max_live {
            // Rankings still being built are kept (a query is waiting on
            // each), and so is the pinned default ranking: the map may
            // exceed the cap by those.
            let oldest = (self.map.iter())
                .filter(|(_, r)| r.building.is_none() && !r.pinned)
                .min_by_key(|(_, r)| r.used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest
                && let Some(r) = self.map.remove(&k)
            {
                self.evicted.push(r);
                metrics::counter!("hotrank_ranking_evictions_total").increment(1);
            }
        }
        let r = self
            .map
            .entry(key.clone())
            .or_insert_with(|| Ranking::new(key.clone()));
        r.last_used = now;
        r.used = self.uses;
        r.asked = Instant::now();
        r
    }

    /// Finds (or creates) the ranking a query at `now` asks for.
    pub fn join(&mut self, key: &RankKey, now: Timestamp) -> Join {
        let r = self.get(key, now);
        match &r.building {
            None => Join::Built,
            Some(sig) if r.build_started => Join::Wait(sig.clone()),
            Some(sig) => {
                r.build_started = true;
                Join::Start(sig.clone())
            }
        }
    }

    /// Scores the next `chunk` articles of a build (`rankings.build_chunk`),
    /// stopping sooner once [`BUILD_HOLD`] is over: an article whose window
    /// sketches must be merged costs far more than one whose are cached,
    /// so a count alone held the lock up to 25 ms at 1 M articles.
    pub fn build_chunk(
        &mut self,
        b: &mut Build,
        data: &mut Data,
        models: &Models,
        newest_event: Timestamp,
        chunk: usize,
    ) -> Step {
        if !self
            .map
            .get(&b.key)
            .is_some_and(|r| r.is_building(&b.signal))
        {
            return Step::Gone;
        }
        let at = rank::query_time(b.now, b.at, newest_event);
        let len = data.articles.len();
        let started = Instant::now();
        let mut done = 0;
        while (b.next as usize) < len && done < chunk {
            let idx = b.next;
            if let Some(ex) = exact(data, idx, &b.key, models, at) {
                b.entries.push(Entry {
                    bound: ex.bound,
                    id: data.article(idx).id.clone(),
                    idx,
                });
            }
            b.next += 1;
            if hold_over(started, done) {
                break;
            }
            done += 1;
        }
        b.at = Some(at);
        if b.next as usize >= len {
            Step::Done
        } else {
            Step::More
        }
    }

    /// Puts an assembled build in place (the articles that changed since
    /// they were scored are still dirty: [`Rankings::catch_up`]).
    pub fn install(&mut self, b: &mut Build) -> Step {
        let Some(r) = self
            .map
            .get_mut(&b.key)
            .filter(|r| r.is_building(&b.signal))
        else {
            return Step::Gone;
        };
        let (order, bounds) = b.order.take().expect("assembled before installing");
        r.order = order;
        r.bounds = bounds;
        r.bounds_at = b.at;
        Step::More
    }

    /// Re-scores the articles that changed during a build, at most `chunk`
    /// and for about [`BUILD_HOLD`]; once few are left the ranking is built
    /// and its waiting queries are woken.
    pub fn catch_up(
        &mut self,
        b: &Build,
        data: &mut Data,
        models: &Models,
        newest_event: Timestamp,
        chunk: usize,
    ) -> Step {
        let Some(r) = self
            .map
            .get_mut(&b.key)
            .filter(|r| r.is_building(&b.signal))
        else {
            return Step::Gone;
        };
        let at = rank::query_time(b.now, r.bounds_at, newest_event);
        r.rescore_dirty(data, models, at, CATCH_UP_LEFT, chunk, Instant::now());
        if r.dirty.len() > CATCH_UP_LEFT {
            return Step::More;
        }
        r.building = None;
        r.rebuilds += 1;
        metrics::counter!("hotrank_ranking_rebuilds_total").increment(1);
        Step::Done
    }

    /// Keeps the ranking `key` from eviction, idle or least recently used.
    pub fn pin(&mut self, key: &RankKey) {
        if let Some(r) = self.map.get_mut(key) {
            r.pinned = true;
        }
    }

    /// Before a query walks the built ranking `key`: re-scores its changed
    /// articles for about [`BUILD_HOLD`] if more than the walk's own hold
    /// should take are left (after a bulk load no query looked at). `More`
    /// while too many are left: release the lock, then call again.
    pub fn catch_up_query(
        &mut self,
        key: &RankKey,
        data: &mut Data,
        models: &Models,
        now: Timestamp,
        newest_event: Timestamp,
        chunk: usize,
    ) -> Step {
        let Some(r) = self.map.get_mut(key).filter(|r| r.building.is_none()) else {
            return Step::Gone;
        };
        if r.dirty.len() <= CATCH_UP_LEFT {
            return Step::Done;
        }
        let at = rank::query_time(now, r.bounds_at, newest_event);
        r.rescore_dirty(data, models, at, CATCH_UP_LEFT, chunk, Instant::now());
        if r.dirty.len() > CATCH_UP_LEFT {
            Step::More
        } else {
            Step::Done
        }
    }

    /// Background upkeep: re-scores, for about [`BUILD_HOLD`], the changed
    /// articles of every built ranking with more than [`UPKEEP_DIRTY`] of
    /// them, so that neither a query nor ingest waits for a large re-score.
    /// Scores at the newest time the ranking or the store already reached
    /// (never a later clock: a query's time is never moved forward). A
    /// ranking no query asked for within [`UPKEEP_ASKED`] gets a pass at
    /// most every [`UPKEEP_IDLE_EVERY`]. Returns the articles re-scored,
    /// and `More` while some ranking due for a pass still has more than
    /// [`UPKEEP_DIRTY`] left.
    pub fn upkeep(
        &mut self,
        data: &mut Data,
        models: &Models,
        newest_event: Timestamp,
        chunk: usize,
    ) -> (Step, usize) {
        let started = Instant::now();
        let mut done = 0;
        for r in self.map.values_mut() {
            let idle = r.asked.elapsed() > UPKEEP_ASKED;
            if r.building.is_some()
                || r.dirty.len() <= UPKEEP_DIRTY
                || (idle && r.upkept.elapsed() < UPKEEP_IDLE_EVERY)
            {
                continue;
            }
            if done > 0 && started.elapsed() >= BUILD_HOLD {
                return (Step::More, done);
            }
            let at = rank::query_time(newest_event, r.bounds_at, newest_event);
            done += r.rescore_dirty(data, models, at, 0, chunk.saturating_sub(done), started);
            if r.dirty.len() > UPKEEP_DIRTY {
                return (Step::More, done);
            }
            // A pass over an idle ranking goes on (in holds) until it is
            // current; the next starts UPKEEP_IDLE_EVERY after.
            r.upkept = Instant::now();
        }
        (Step::Done, done)
    }

    /// After a build that ended without a ranking (it panicked): drops the
    /// half-built ranking so that the next query starts another.
    pub fn abandon(&mut self, b: &Build) {
        if self
            .map
            .get(&b.key)
            .is_some_and(|r| r.is_building(&b.signal))
        {
            self.map.remove(&b.key);
        }
    }

    /// Runs `walk` over a built ranking at `now` (or later:
    /// [`rank::query_time`], with `newest_event` the newest event time
    /// counted): the exact items the walk asked for, and the time they are
    /// exact at. The caller found it built ([`Join::Built`]) under the same
    /// hold of the lock.
    pub fn top(
        &mut self,
        key: &RankKey,
        walk: Walk<SnapItem>,
        data: &mut Data,
        models: &Models,
        now: Timestamp,
        newest_event: Timestamp,
    ) -> (Vec<SnapItem>, Timestamp) {
        let started = std::time::Instant::now();
        let r = self.get(key, now);
        debug_assert!(r.building.is_none(), "top() on a ranking not built");
        let at = rank::query_time(now, r.bounds_at, newest_event);
        r.refresh_dirty(data, models, at);
        let items = r.walk(walk, data, models, at);
        metrics::histogram!("hotrank_ranking_seconds").record(started.elapsed().as_secs_f64());
        (items, at)
    }

    /// Rankings dropped since the last call: the caller frees them after
    /// releasing the store's lock (freeing an index of a million entries
    /// takes tens of milliseconds).
    pub fn take_evicted(&mut self) -> Vec<Ranking> {
        std::mem::take(&mut self.evicted)
    }

    /// Drops rankings nobody asked for since `before`.
    pub fn evict_idle(&mut self, before: Timestamp) {
        let idle: Vec<RankKey> = (self.map.iter())
            .filter(|(_, r)| r.last_used < before && r.building.is_none() && !r.pinned)
            .map(|(k, _)| k.clone())
            .collect();
        for k in idle {
            self.evicted.extend(self.map.remove(&k));
        }
    }

    /// Sizes for metrics: (rankings, entries).
    pub fn sizes(&self) -> (usize, usize) {
        self.map
            .values()
            .fold((0, 0), |(n, e), r| (n + 1, e + r.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, HotQuery};
    use crate::rank::pages;
    use crate::store::StoreSettings;

    /// A ranking kept from an empty store through a bulk load, then asked
    /// later (every bound, computed as its article arrived, now above its
    /// score, and all tied): the walk re-scores every entry, and keeps no
    /// room for them in its answer (the page cache holds it), while the
    /// index it writes back in one pass answers as before.
    #[test]
    fn a_walk_over_a_whole_bulk_load_keeps_no_slack() {
        let s = StoreSettings {
            visitor_limit_per_minute: 0,
            ip_limit_per_minute: 0,
            ..StoreSettings::default()
        };
        let models = &s.models;
        let q = HotQuery::default_page();
        let t0 = 1_800_000_000;
        let key = RankKey::of(&q, t0);
        let mut data = Data::new(&s);
        let mut rankings = Rankings::new(4, usize::MAX);
        let Join::Start(signal) = rankings.join(&key, t0) else {
            panic!("a new ranking is built")
        };
        let mut b = Build::new(key.clone(), signal, t0);
        assert_eq!(
            rankings.build_chunk(&mut b, &mut data, models, t0, 64),
            Step::Done
        );
        b.assemble();
        rankings.install(&mut b);
        assert_eq!(rankings.catch_up(&b, &mut data, models, t0, 64), Step::Done);
        let n = 2_000u64;
        for i in 1..=n {
            let ev = Event {
                trusted: true,
                ..Event::view(ArticleId::from_number(i), u128::from(i), t0)
            };
            let found = data.lookup(&ev.article);
            let v = data.judge(&ev, found, &s);
            let change = data.apply_event(&ev, v, found);
            rankings.on_change(change, &data);
        }
        while rankings.upkeep(&mut data, models, t0, 1 << 20).0 == Step::More {}
        let later = t0 + 600;
        let walk = pages::first_walk(&q, 1000);
        let (items, _) = rankings.top(&key, walk, &mut data, models, later, t0);
        assert_eq!(items.len(), pages::first_depth(&q, 1000));
        assert_eq!(items.capacity(), items.len(), "the walk's buffer is kept");
        // The index written back in one pass: every article, each at its
        // new bound, and the next walk answers the same.
        assert_eq!(rankings.sizes(), (1, n as usize));
        let again = pages::first_walk(&q, 1000);
        let (items2, _) = rankings.top(&key, again, &mut data, models, later, t0);
        let ids = |v: &[SnapItem]| v.iter().map(|i| i.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&items2), ids(&items));
    }
}
