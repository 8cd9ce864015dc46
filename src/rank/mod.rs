//! The ranking core both stores share: exact top-k over an index of upper
//! bounds, and the snapshots that cursors page through.
//!
//! A score that decays with time goes stale the moment it is stored. Each
//! model gives, with every score, a bound of its score at any later time
//! while the article gets no events ([`crate::score::Models::upper_bound`]).
//! A store keeps, per ranking, an index of articles ordered by such bounds
//! (the embedded store an ordered set, the Redis store a sorted set) and
//! answers a query in three steps:
//!
//! 1. articles that changed since the index last looked are scored exactly
//!    at the query time and offered to a [`Walk`] (their stored bound no
//!    longer holds);
//! 2. the index is read from the highest bound down; each entry is scored
//!    exactly and offered, until [`Walk::wants`] says the next bound ranks
//!    after the k-th accepted exact score: nothing further down can enter
//!    the top k (Fagin's threshold algorithm);
//! 3. the exact scores go back into the index as new, tighter bounds.
//!
//! The invariant everything rests on, checked in [`Walk::offer`] when debug
//! assertions are on: **an article's exact score at the query time is at
//! most the bound the index holds for it**, for every article the index
//! holds that did not change since its bound was written, and no article
//! missing from the index and from the changed set can belong in the
//! ranking. Two things keep it true besides the models' bounds:
//! - an event is never counted in an hour after the current one (its time
//!   is clamped to its arrival, [`crate::model::Event::clamp_to_arrival`]),
//!   so a window's counters never grow with time alone;
//! - a query never runs earlier than the newest bounds it reads, nor than
//!   the newest event the store counted ([`query_time`]): bounds hold from
//!   the time they were computed on, and a window that ends before an hour
//!   already holding counts would gain them back when that hour begins.
//!
//! [`pages`] holds the cursor snapshots built on top of it.

pub mod pages;

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use crate::model::{
    ArticleId, ArticleMeta, HotQuery, ModelKind, ModelParams, RangeSpec, Scale, Timestamp, day_of,
};

/// The filters of a ranking query (`category`, `kind`, `group`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Filter {
    pub category: Option<String>,
    pub kind: Option<String>,
    pub group: Option<String>,
}

impl Filter {
    pub fn of(q: &HotQuery) -> Self {
        Filter {
            category: q.category.clone(),
            kind: q.kind.clone(),
            group: q.group.clone(),
        }
    }

    /// No filter at all: every article matches.
    pub fn is_empty(&self) -> bool {
        self.category.is_none() && self.kind.is_none() && self.group.is_none()
    }

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

/// What distinguishes one ranking from another, on every store (the
/// embedded store's index key, the Redis sorted set's name, movement's
/// cache key): the model, the range it ranks, the filters, the parameters
/// the model reads, and for a ranking scaled by category its UTC day.
///
/// A scaled score divides by its category's events over the day and the
/// 29 before it ([`crate::model::category_hours`]): within a day that
/// divisor never decreases, so a bound stays a bound; at midnight a day
/// leaves the window and divisors may fall, so the next day's ranking is
/// another one, built afresh by its first query.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RankingId {
    pub model: ModelKind,
    pub range: RangeSpec,
    pub filter: Filter,
    /// What the model reads of them ([`ModelParams::of`]).
    pub params: ModelParams,
    /// The UTC day of a ranking scaled by category, else `None`.
    pub day: Option<i64>,
}

impl RankingId {
    /// The ranking a query answered at `at` walks.
    pub fn of(q: &HotQuery, at: Timestamp) -> Self {
        let params = q.params.of(q.model);
        RankingId {
            model: q.model,
            range: q.ranked_range(),
            filter: Filter::of(q),
            params,
            day: (params.scale == Scale::Category).then(|| day_of(at)),
        }
    }

    /// The same list on any day: what a cursor's snapshot is of (a page
    /// after midnight continues the snapshot it began).
    pub fn undated(&self) -> Self {
        RankingId {
            day: None,
            ..self.clone()
        }
    }
}

/// What the walk needs to know of a scored article.
pub trait Ranked {
    fn id(&self) -> &ArticleId;
    /// The exact score at the query time.
    fn score(&self) -> f64;
    /// Whose article it is, for `perAuthor`.
    fn author(&self) -> Option<&str>;
}

/// Scores sort high to low (by `total_cmp`); equal scores by article id,
/// ascending. The one order every ranking, index and page uses.
pub fn order(a_score: f64, a_id: &ArticleId, b_score: f64, b_id: &ArticleId) -> Ordering {
    b_score.total_cmp(&a_score).then_with(|| a_id.cmp(b_id))
}

/// Orders two ranked items as a ranking lists them.
pub fn rank_order<T: Ranked>(a: &T, b: &T) -> Ordering {
    order(a.score(), a.id(), b.score(), b.id())
}

/// Bounds written within this relative distance of a score count as equal
/// when checking the invariant: floating-point evaluation of one formula at
/// two times may differ in the last bits.
const BOUND_SLACK: f64 = 1e-9;

/// Whether `score` respects `bound` (the invariant, up to rounding).
pub fn within_bound(score: f64, bound: f64) -> bool {
    score <= bound || (score - bound).abs() <= BOUND_SLACK * score.abs().max(bound.abs())
}

/// Per-author caps: which items of a list sorted in rank order a page may
/// show, given the authors already shown before it.
#[derive(Debug, Clone, Default)]
pub struct AuthorCap {
    cap: Option<usize>,
    shown: HashMap<String, usize>,
}

impl AuthorCap {
    pub fn new(cap: Option<usize>) -> Self {
        AuthorCap {
            cap,
            shown: HashMap::new(),
        }
    }

    /// Counts `author` as shown; `false` if the cap was already reached.
    pub fn admit(&mut self, author: Option<&str>) -> bool {
        let (Some(cap), Some(author)) = (self.cap, author) else {
            return true;
        };
        let n = self.shown.entry(author.to_string()).or_default();
        if *n >= cap {
            return false;
        }
        *n += 1;
        true
    }

    /// Indexes (into `sorted`, in rank order) of the items to show: the cap
    /// applied on top of what was already admitted, at most `depth` items.
    pub fn accept<T: Ranked>(&self, sorted: &[T], depth: usize) -> Vec<usize> {
        if self.cap.is_none() {
            return (0..sorted.len().min(depth)).collect();
        }
        let mut cap = self.clone();
        let mut out = Vec::new();
        for (i, s) in sorted.iter().enumerate() {
            if out.len() >= depth {
                break;
            }
            if cap.admit(s.author()) {
                out.push(i);
            }
        }
        out
    }
}

/// The threshold walk: collects exactly scored articles and says when the
/// rest of the index cannot matter. Stores drive it; it does no I/O.
#[derive(Debug)]
pub struct Walk<T> {
    depth: usize,
    authors: AuthorCap,
    /// Articles already listed (a snapshot being deepened): never offered.
    exclude: HashSet<ArticleId>,
    items: Vec<T>,
    /// The k-th accepted item so far: anything that ranks after it by
    /// (bound, id) ranks after it by (exact score, id) too.
    threshold: Option<(f64, ArticleId)>,
    checkpoint: usize,
}

impl<T: Ranked> Walk<T> {
    /// A walk for the top `depth` items with at most `per_author` by one
    /// author.
    pub fn new(depth: usize, per_author: Option<usize>) -> Self {
        Walk {
            depth,
            authors: AuthorCap::new(per_author),
            exclude: HashSet::new(),
            items: Vec::new(),
            threshold: None,
            checkpoint: depth.max(1),
        }
    }

    /// A walk for the next `depth` items after those already `listed`
    /// (in rank order): those are skipped, and their authors count toward
    /// the cap.
    pub fn after<'a>(
        depth: usize,
        per_author: Option<usize>,
        listed: impl IntoIterator<Item = (&'a ArticleId, Option<&'a str>)>,
    ) -> Self {
        let mut w = Walk::new(depth, per_author);
        for (id, author) in listed {
            w.exclude.insert(id.clone());
            w.authors.admit(author);
        }
        w
    }

    /// How many items the walk is for.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Whether an article is one the walk must not offer (already listed).
    pub fn skips(&self, id: &ArticleId) -> bool {
        self.exclude.contains(id)
    }

    /// Whether an index entry, met in index order (bound high to low, id
    /// ascending), may still enter the top `depth`. Once `false`, every
    /// later entry may be skipped too.
    pub fn wants(&self, bound: f64, id: &ArticleId) -> bool {
        if self.depth == 0 {
            return false;
        }
        match &self.threshold {
            None => true,
            Some((score, tid)) => order(bound, id, *score, tid) != Ordering::Greater,
        }
    }

    /// Whether an index entry at `bound` may still enter the top
    /// `depth`, whatever its id. Once `false`, every entry at or below
    /// `bound` may be skipped, so a store need not read a run of equal
    /// bounds whole to find where it ends.
    pub fn wants_bound(&self, bound: f64) -> bool {
        self.depth > 0
            && self
                .threshold
                .as_ref()
                .is_none_or(|(score, _)| bound >= *score)
    }

    /// Offers an article scored exactly at the query time. `stored_bound`
    /// is the bound the index held for it (`None` for articles taken from
    /// the changed set or a rebuild): the invariant is checked against it.
    pub fn offer(&mut self, item: T, stored_bound: Option<f64>) {
        if let Some(bound) = stored_bound {
            debug_assert!(
                within_bound(item.score(), bound),
                "ranking invariant broken: article {} scores {} above its stored bound {}",
                item.id(),
                item.score(),
                bound
            );
        }
        // (A walk for no items, as a background refresh runs, keeps none.)
        if self.depth == 0 || self.exclude.contains(item.id()) {
            return;
        }
        self.items.push(item);
        if self.items.len() >= self.checkpoint {
            self.tighten();
            self.checkpoint *= 2;
        }
    }

    fn tighten(&mut self) {
        self.items.sort_by(rank_order);
        let accepted = self.authors.accept(&self.items, self.depth);
        if accepted.len() >= self.depth {
            let kth = &self.items[accepted[self.depth - 1]];
            self.threshold = Some((kth.score(), kth.id().clone()));
        }
    }

    /// The exact top `depth`, in rank order.
    pub fn finish(mut self) -> Vec<T> {
        self.items.sort_by(rank_order);
        let accepted = self.authors.accept(&self.items, self.depth);
        let mut keep = vec![false; self.items.len()];
        for i in accepted {
            keep[i] = true;
        }
        let mut k = keep.into_iter();
        self.items.retain(|_| k.next().unwrap_or(false));
        self.items
    }
}

/// The time a query is answered at: never before `now`, never before the
/// newest bounds it reads (bounds hold from the time they were computed on,
/// not before), and never before the newest event time the store has
/// counted (a window ending before an hour that already holds counts would
/// gain them back when that hour comes, with no event to mark the change).
/// So a clock that steps back, or a node whose clock is behind another's,
/// answers as of the latest of these: answers never go back in time.
pub fn query_time(
    now: Timestamp,
    bounds_at: Option<Timestamp>,
    newest_event: Timestamp,
) -> Timestamp {
    now.max(bounds_at.unwrap_or(now)).max(newest_event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone)]
    struct It(ArticleId, f64, Option<&'static str>);
    impl Ranked for It {
        fn id(&self) -> &ArticleId {
            &self.0
        }
        fn score(&self) -> f64 {
            self.1
        }
        fn author(&self) -> Option<&str> {
            self.2
        }
    }

    fn it(id: &str, s: f64, a: Option<&'static str>) -> It {
        It(ArticleId::parse(id).unwrap(), s, a)
    }

    /// Drives a walk over (bound, item) entries sorted by bound, as a store
    /// does, and returns the ids and how many entries it read.
    fn drive(entries: &mut [(f64, It)], depth: usize, per: Option<usize>) -> (Vec<String>, usize) {
        entries.sort_by(|a, b| order(a.0, &a.1.0, b.0, &b.1.0));
        let mut w = Walk::new(depth, per);
        let mut read = 0;
        for (b, x) in entries.iter() {
            if !w.wants(*b, &x.0) {
                break;
            }
            read += 1;
            w.offer(x.clone(), Some(*b));
        }
        (w.finish().iter().map(|x| x.0.to_string()).collect(), read)
    }

    #[test]
    fn stops_once_bounds_fall_below_the_kth() {
        let mut e: Vec<(f64, It)> = (0..100)
            .map(|i| {
                (
                    100.0 - i as f64,
                    it(&format!("a{i:03}"), 100.0 - i as f64, None),
                )
            })
            .collect();
        let (ids, read) = drive(&mut e, 3, None);
        assert_eq!(ids, ["a000", "a001", "a002"]);
        assert!(read <= 4, "read {read}");
    }

    /// A walk for no items (a Redis background refresh) reads nothing,
    /// takes what it is offered without panicking, and keeps none.
    #[test]
    fn a_walk_for_no_items_reads_and_keeps_nothing() {
        let mut e: Vec<(f64, It)> = (0..10)
            .map(|i| (10.0 - i as f64, it(&format!("a{i}"), 10.0 - i as f64, None)))
            .collect();
        let (ids, read) = drive(&mut e, 0, None);
        assert!(ids.is_empty());
        assert_eq!(read, 0);
        let mut w: Walk<It> = Walk::new(0, None);
        for (_, x) in &e {
            w.offer(x.clone(), None);
        }
        assert!(w.finish().is_empty());
    }

    #[test]
    fn loose_bounds_are_read_past_and_ties_go_by_id() {
        let mut e = vec![
            (10.0, it("b", 1.0, None)),
            (9.0, it("c", 5.0, None)),
            (5.0, it("a", 5.0, None)),
            (4.0, it("d", 4.0, None)),
        ];
        let (ids, _) = drive(&mut e, 2, None);
        assert_eq!(ids, ["a", "c"]);
    }

    #[test]
    fn per_author_cap_and_listed_items() {
        let mut e = vec![
            (9.0, it("a", 9.0, Some("x"))),
            (8.0, it("b", 8.0, Some("x"))),
            (7.0, it("c", 7.0, Some("y"))),
            (6.0, it("d", 6.0, None)),
        ];
        let (ids, _) = drive(&mut e, 3, Some(1));
        assert_eq!(ids, ["a", "c", "d"]);
        // Continuing after "a": x's one slot is used.
        let listed = [(ArticleId::parse("a").unwrap(), Some("x"))];
        let mut w = Walk::after(2, Some(1), listed.iter().map(|(i, a)| (i, *a)));
        for (b, x) in &e {
            if w.wants(*b, &x.0) && !w.skips(&x.0) {
                w.offer(x.clone(), Some(*b));
            }
        }
        let ids: Vec<String> = w.finish().iter().map(|x| x.0.to_string()).collect();
        assert_eq!(ids, ["c", "d"]);
    }

    #[test]
    fn query_time_never_runs_before_the_bounds_or_the_events() {
        assert_eq!(query_time(100, None, 0), 100);
        assert_eq!(query_time(100, Some(90), 50), 100);
        assert_eq!(query_time(100, Some(103), 0), 103);
        assert_eq!(query_time(100, Some(90), 160), 160);
    }

    /// `wants_bound` is `wants` for the most wanted id at that bound.
    #[test]
    fn wants_bound_skips_only_what_no_id_can_enter() {
        let mut w = Walk::new(1, None);
        assert!(w.wants_bound(0.0));
        w.offer(it("m", 2.0, None), None);
        assert!(w.wants_bound(2.0), "an id before m at 2.0 still enters");
        assert!(w.wants(2.0, &ArticleId::parse("a").unwrap()));
        assert!(!w.wants(2.0, &ArticleId::parse("z").unwrap()));
        assert!(!w.wants_bound(1.9));
        assert!(!Walk::<It>::new(0, None).wants_bound(5.0));
    }

    #[test]
    #[should_panic(expected = "ranking invariant broken")]
    fn a_score_above_its_bound_is_caught() {
        let mut w = Walk::new(1, None);
        w.offer(it("a", 2.0, None), Some(1.0));
    }
}
