//! Rankings that are exact at query time.
//!
//! A score that decays with time goes stale the moment it is stored. Each
//! model gives, with every score, a bound of its score at any later time
//! while the article gets no events ([`Models::upper_bound`]: the score
//! itself for models that only decay). Each ranking keeps its articles
//! ordered by such bounds, and a query:
//!
//! 1. re-scores the articles that changed since the last query (`dirty`);
//! 2. walks the order from the top, re-scoring each article exactly at
//!    `now`, and stops as soon as the next bound is below the k-th exact
//!    score found: nothing further down can beat it (Fagin's threshold
//!    algorithm);
//! 3. writes the exact scores back as the new, tighter bounds.
//!
//! The index holds every article active in the ranking's window, not just
//! the top `ranking_cap` that queries may reach: a capped index must rebuild
//! from all counters whenever the best article left out might overtake the
//! k-th (with near-equal scores decaying together, that is every second).
//! Indexing all active articles costs about 100 bytes per article and
//! ranking, and makes every answer exact without a rebuild. docs/design.md
//! ("Freshness") has the argument in full. docs/design.md ("Freshness") has the argument in full.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, HashSet};

use crate::model::{ArticleId, ArticleMeta, Counters, RangeSpec, Timestamp};
use crate::score::{ModelKind, Models};

use super::state::{Change, Data, Idx};

/// What distinguishes one ranking from another.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RankKey {
    pub model: ModelKind,
    pub range: RangeSpec,
    pub category: Option<String>,
    pub kind: Option<String>,
    pub group: Option<String>,
}

impl RankKey {
    pub fn matches(&self, meta: &ArticleMeta) -> bool {
        self.category
            .as_ref()
            .is_none_or(|c| meta.category.as_ref() == Some(c))
            && self
                .kind
                .as_ref()
                .is_none_or(|k| meta.kind.as_ref() == Some(k))
            && self.group.as_ref().is_none_or(|g| meta.groups.contains(g))
    }
}

/// One ranked article with its exact score and window counters.
#[derive(Debug, Clone)]
pub struct Scored {
    pub idx: Idx,
    pub score: f64,
    pub counters: Counters,
}

#[derive(Debug, Clone)]
struct Entry {
    bound: f64,
    id: ArticleId,
    idx: Idx,
}

impl Entry {
    fn key(&self) -> (Desc, &ArticleId) {
        (Desc(self.bound), &self.id)
    }
}

/// Scores sort high to low; equal scores by article id, ascending.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Desc(f64);

impl Eq for Desc {}
impl PartialOrd for Desc {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Desc {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0)
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
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
        self.key().cmp(&other.key())
    }
}

/// Orders two scored articles as a ranking lists them.
fn rank_order(data: &Data, a: &Scored, b: &Scored) -> Ordering {
    Desc(a.score)
        .cmp(&Desc(b.score))
        .then_with(|| data.article(a.idx).id.cmp(&data.article(b.idx).id))
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
    if a.deleted || !key.matches(&a.meta) {
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

pub struct Ranking {
    key: RankKey,
    order: BTreeSet<Entry>,
    bounds: HashMap<Idx, f64>,
    dirty: HashSet<Idx>,
    /// Never built yet: the first query builds it from all counters.
    built: bool,
    last_used: Timestamp,
    /// Full rebuilds so far (for metrics and tests).
    pub rebuilds: u64,
}

impl Ranking {
    fn new(key: RankKey) -> Self {
        Ranking {
            key,
            order: BTreeSet::new(),
            bounds: HashMap::new(),
            dirty: HashSet::new(),
            built: false,
            last_used: 0,
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

    /// Re-scores every matching article.
    fn rebuild(&mut self, data: &mut Data, models: &Models, now: Timestamp) {
        self.order.clear();
        self.bounds.clear();
        self.dirty.clear();
        for idx in 0..data.articles.len() as Idx {
            if let Some(ex) = exact(data, idx, &self.key, models, now) {
                self.insert(idx, ex.bound, data);
            }
        }
        self.built = true;
        self.rebuilds += 1;
    }

    fn refresh_dirty(&mut self, data: &mut Data, models: &Models, now: Timestamp) {
        for idx in std::mem::take(&mut self.dirty) {
            self.remove(idx, data);
            if let Some(ex) = exact(data, idx, &self.key, models, now) {
                self.insert(idx, ex.bound, data);
            }
        }
    }

    /// The threshold algorithm; returns the accepted items in rank order.
    fn walk(
        &mut self,
        depth: usize,
        per_author: Option<usize>,
        data: &mut Data,
        models: &Models,
        now: Timestamp,
    ) -> Vec<Scored> {
        let mut scored: Vec<Scored> = Vec::new();
        let mut rescored: Vec<(Idx, f64, Option<f64>)> = Vec::new();
        // The k-th accepted item so far, as an entry: anything that ranks
        // after it by (bound, id) ranks after it by (exact score, id) too.
        let mut threshold: Option<Entry> = None;
        let mut checkpoint = depth.max(1);
        for e in &self.order {
            if threshold.as_ref().is_some_and(|t| e > t) {
                break;
            }
            let ex = exact(data, e.idx, &self.key, models, now);
            rescored.push((e.idx, e.bound, ex.map(|x| x.bound)));
            if let Some(ex) = ex {
                scored.push(Scored {
                    idx: e.idx,
                    score: ex.score,
                    counters: ex.counters,
                });
            }
            if scored.len() >= checkpoint {
                scored.sort_by(|a, b| rank_order(data, a, b));
                let accepted = accept(data, &scored, per_author, depth);
                if accepted.len() >= depth {
                    let kth = &scored[accepted[depth - 1]];
                    threshold = Some(Entry {
                        bound: kth.score,
                        id: data.article(kth.idx).id.clone(),
                        idx: kth.idx,
                    });
                }
                checkpoint *= 2;
            }
        }
        // Bounds computed now are the tightest there are.
        for (idx, old, new) in rescored {
            let e = Entry {
                bound: old,
                id: data.article(idx).id.clone(),
                idx,
            };
            self.order.remove(&e);
            self.bounds.remove(&idx);
            if let Some(bound) = new {
                self.bounds.insert(idx, bound);
                self.order.insert(Entry { bound, ..e });
            }
        }
        scored.sort_by(|a, b| rank_order(data, a, b));
        let accepted = accept(data, &scored, per_author, depth);
        accepted.into_iter().map(|i| scored[i].clone()).collect()
    }
}

/// Indexes (into `scored`, in rank order) of the items a page may show:
/// at most `per_author` per author, at most `depth` in all.
fn accept(data: &Data, scored: &[Scored], per_author: Option<usize>, depth: usize) -> Vec<usize> {
    let Some(cap) = per_author else {
        return (0..scored.len().min(depth)).collect();
    };
    let mut per: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, s) in scored.iter().enumerate() {
        if out.len() >= depth {
            break;
        }
        match data.article(s.idx).meta.author.as_deref() {
            Some(author) => {
                let n = per.entry(author).or_default();
                if *n < cap {
                    *n += 1;
                    out.push(i);
                }
            }
            None => out.push(i),
        }
    }
    out
}

/// Every ranking that queries have asked for, created on first use.
#[derive(Default)]
pub struct Rankings {
    map: HashMap<RankKey, Ranking>,
}

impl Rankings {
    /// Follows a change: the article is re-scored at the next query.
    pub fn on_change(&mut self, change: Change, data: &Data) {
        match change {
            Change::None => {}
            Change::Counted(idx) => {
                let meta = &data.article(idx).meta;
                for r in self.map.values_mut() {
                    if r.key.matches(meta) {
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

    /// The exact top `depth` of a ranking at `now`.
    pub fn top(
        &mut self,
        key: &RankKey,
        depth: usize,
        per_author: Option<usize>,
        data: &mut Data,
        models: &Models,
        now: Timestamp,
    ) -> Vec<Scored> {
        let started = std::time::Instant::now();
        let r = self
            .map
            .entry(key.clone())
            .or_insert_with(|| Ranking::new(key.clone()));
        r.last_used = now;
        if !r.built {
            r.rebuild(data, models, now);
        } else {
            r.refresh_dirty(data, models, now);
        }
        let items = r.walk(depth, per_author, data, models, now);
        metrics::histogram!("hotrank_ranking_seconds").record(started.elapsed().as_secs_f64());
        items
    }

    /// Drops rankings nobody asked for since `before`.
    pub fn evict_idle(&mut self, before: Timestamp) {
        self.map.retain(|_, r| r.last_used >= before);
    }

    /// Sizes for metrics: (rankings, entries, rebuilds so far).
    pub fn sizes(&self) -> (usize, usize, u64) {
        self.map.values().fold((0, 0, 0), |(n, e, b), r| {
            (n + 1, e + r.len(), b + r.rebuilds)
        })
    }
}
