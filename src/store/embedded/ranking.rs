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
use std::collections::{BTreeSet, HashMap, HashSet};

use crate::model::{ArticleId, Counters, RangeSpec, Timestamp};
use crate::rank::pages::SnapItem;
use crate::rank::{self, Filter, Walk};
use crate::score::{ModelKind, Models};

use super::state::{Change, Data, Idx};

/// What distinguishes one ranking from another.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RankKey {
    pub model: ModelKind,
    pub range: RangeSpec,
    pub filter: Filter,
}

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
    let a = data.article_mut(idx);
    if a.deleted || !key.filter.matches(&a.meta) {
        return None;
    }
    let c = a.window(key.range, now);
    if matches!(key.range, RangeSpec::Hours(_)) && !c.is_active() {
        return None;
    }
    Some(Exact {
        score: models.score(key.model, &c, &a.meta, now),
        bound: models.upper_bound(key.model, &c, &a.meta, now),
        counters: c,
    })
}

fn listed(data: &Data, idx: Idx, ex: &Exact, at: Timestamp) -> SnapItem {
    let a = data.article(idx);
    SnapItem {
        id: a.id.clone(),
        score: ex.score,
        counters: ex.counters,
        author: a.meta.author.clone(),
        at,
    }
}

pub struct Ranking {
    key: RankKey,
    order: BTreeSet<Entry>,
    bounds: HashMap<Idx, f64>,
    dirty: HashSet<Idx>,
    /// While the first build runs: the next article to index. A build
    /// takes the store's lock for one chunk of articles at a time, so
    /// ingest never waits for a whole build; changes meanwhile mark
    /// articles dirty as usual.
    build_next: Option<Idx>,
    /// The newest time bounds were computed at: they hold from then on.
    bounds_at: Option<Timestamp>,
    last_used: Timestamp,
    /// Use counter at the last query, for least-recently-used eviction.
    used: u64,
    /// Full builds so far (for metrics and tests).
    pub rebuilds: u64,
}

impl Ranking {
    fn new(key: RankKey) -> Self {
        Ranking {
            key,
            order: BTreeSet::new(),
            bounds: HashMap::new(),
            dirty: HashSet::new(),
            build_next: Some(0),
            bounds_at: None,
            last_used: 0,
            used: 0,
            rebuilds: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.order.len()
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

    /// Indexes the next `chunk` articles of a first build; `true` once
    /// every article is indexed.
    fn build_step(
        &mut self,
        data: &mut Data,
        models: &Models,
        at: Timestamp,
        chunk: usize,
    ) -> bool {
        let Some(from) = self.build_next else {
            return true;
        };
        let end = (from as usize)
            .saturating_add(chunk)
            .min(data.articles.len()) as Idx;
        for idx in from..end {
            if let Some(ex) = exact(data, idx, &self.key, models, at) {
                self.remove(idx, data);
                self.insert(idx, ex.bound, data);
            }
        }
        self.bounds_at = Some(self.bounds_at.map_or(at, |b| b.max(at)));
        if end as usize >= data.articles.len() {
            self.build_next = None;
            self.rebuilds += 1;
            metrics::counter!("hotrank_ranking_rebuilds_total").increment(1);
            true
        } else {
            self.build_next = Some(end);
            false
        }
    }

    fn refresh_dirty(&mut self, data: &mut Data, models: &Models, now: Timestamp) {
        for idx in std::mem::take(&mut self.dirty) {
            self.remove(idx, data);
            if let Some(ex) = exact(data, idx, &self.key, models, now) {
                self.insert(idx, ex.bound, data);
            }
        }
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
        for (e, new) in rescored {
            self.order.remove(&e);
            self.bounds.remove(&e.idx);
            if let Some(bound) = new {
                self.insert(e.idx, bound, data);
            }
        }
        self.bounds_at = Some(self.bounds_at.map_or(at, |b| b.max(at)));
        walk.finish()
    }
}

/// Every ranking that queries have asked for, created on first use, at
/// most `max_live` of them (the least recently used goes first).
pub struct Rankings {
    map: HashMap<RankKey, Ranking>,
    max_live: usize,
    uses: u64,
}

impl Rankings {
    pub fn new(max_live: usize) -> Self {
        Rankings {
            map: HashMap::new(),
            max_live: max_live.max(1),
            uses: 0,
        }
    }

    /// Follows a change: the article is re-scored at the next query.
    pub fn on_change(&mut self, change: Change, data: &Data) {
        match change {
            Change::None => {}
            Change::Counted(idx) => {
                let meta = &data.article(idx).meta;
                for r in self.map.values_mut() {
                    if r.key.filter.matches(meta) {
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
            // each), so the map may exceed the cap by the builds under way.
            let oldest = (self.map.iter())
                .filter(|(_, r)| r.build_next.is_none())
                .min_by_key(|(_, r)| r.used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.map.remove(&k);
                metrics::counter!("hotrank_ranking_evictions_total").increment(1);
            }
        }
        let r = self
            .map
            .entry(key.clone())
            .or_insert_with(|| Ranking::new(key.clone()));
        r.last_used = now;
        r.used = self.uses;
        r
    }

    /// Advances the first build of a ranking by one chunk of articles;
    /// `true` once the ranking is built (then [`Rankings::top`] is cheap).
    pub fn build(
        &mut self,
        key: &RankKey,
        data: &mut Data,
        models: &Models,
        now: Timestamp,
        newest_event: Timestamp,
        chunk: usize,
    ) -> bool {
        let r = self.get(key, now);
        let at = rank::query_time(now, r.bounds_at, newest_event);
        r.build_step(data, models, at, chunk)
    }

    /// Runs `walk` over a ranking at `now` (or later: [`rank::query_time`],
    /// with `newest_event` the newest event time counted): the exact items
    /// the walk asked for, and the time they are exact at.
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
        let at = rank::query_time(now, r.bounds_at, newest_event);
        // Built by `build` in chunks before; whatever is left (a ranking
        // evicted between two pages of a cursor) is finished here.
        r.build_step(data, models, at, usize::MAX);
        r.refresh_dirty(data, models, at);
        let items = r.walk(walk, data, models, at);
        metrics::histogram!("hotrank_ranking_seconds").record(started.elapsed().as_secs_f64());
        (items, at)
    }

    /// Drops rankings nobody asked for since `before`.
    pub fn evict_idle(&mut self, before: Timestamp) {
        self.map.retain(|_, r| r.last_used >= before);
    }

    /// Sizes for metrics: (rankings, entries).
    pub fn sizes(&self) -> (usize, usize) {
        self.map
            .values()
            .fold((0, 0), |(n, e), r| (n + 1, e + r.len()))
    }
}
