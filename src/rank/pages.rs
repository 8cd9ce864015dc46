//! Pages of a ranking and the snapshots cursors continue, the same for
//! every store (the embedded store keeps snapshots in memory, the Redis
//! store in Redis so any node continues them).
//!
//! A first page walks a few pages deeper than it shows
//! ([`PAGES_AHEAD`]); when more items may follow, that list becomes a
//! snapshot and the answer carries a cursor. Pages inside the snapshot are
//! exactly the order at its `generatedAt`: items never shift, repeat or
//! vanish between pages. A page that runs past the snapshot extends it
//! with the next items of the ranking at that moment, leaving out every
//! article already listed and counting their authors toward `perAuthor`;
//! each item keeps the time its score was computed (`at`), which its
//! explanation uses.

use serde::{Deserialize, Serialize};

use super::{Ranked, Walk};
use crate::model::{ArticleId, Counters, HotQuery, Timestamp, Trend};
use crate::score::CategoryScale;

/// A first page snapshots this many pages ahead for its cursor.
pub const PAGES_AHEAD: usize = 5;

/// One listed article.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapItem {
    pub id: ArticleId,
    /// `f64::to_bits`: JSON floats need not round-trip.
    #[serde(with = "crate::model::f64_bits")]
    pub score: f64,
    pub counters: Counters,
    pub author: Option<String>,
    /// When `score` was computed.
    pub at: Timestamp,
    /// Rising's observed and expected views (its explanation's terms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trend: Option<Trend>,
    /// The category scale the score was divided by (`scale=category`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<CategoryScale>,
}

impl Ranked for SnapItem {
    fn id(&self) -> &ArticleId {
        &self.id
    }
    fn score(&self) -> f64 {
        self.score
    }
    fn author(&self) -> Option<&str> {
        self.author.as_deref()
    }
}

/// The listed items of a ranking as a cursor continues them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot<K> {
    /// Which ranking (a store's own key for it).
    pub key: K,
    pub per_author: Option<usize>,
    pub generated_at: Timestamp,
    pub items: Vec<SnapItem>,
    /// No item exists below the last one.
    pub complete: bool,
}

/// How a first page is answered.
pub enum First<K> {
    /// The page says it all: no cursor.
    Page(Vec<SnapItem>),
    /// More may follow: keep the snapshot and hand out a cursor.
    Snapshot(Snapshot<K>),
}

/// How many items a first page's walk asks for: a few pages ahead, plus
/// one to learn whether anything follows.
pub fn first_depth(q: &HotQuery, cap: usize) -> usize {
    (q.offset + q.limit * PAGES_AHEAD).min(cap) + 1
}

/// The walk for a first page.
pub fn first_walk<T: Ranked>(q: &HotQuery, cap: usize) -> Walk<T> {
    Walk::new(first_depth(q, cap), q.per_author)
}

/// Turns a first page's walk (`first_depth` items asked) into the answer.
pub fn first<K>(
    key: K,
    q: &HotQuery,
    cap: usize,
    mut items: Vec<SnapItem>,
    at: Timestamp,
) -> First<K> {
    let depth = first_depth(q, cap) - 1;
    let complete = items.len() <= depth;
    items.truncate(depth);
    let want = (q.offset + q.limit).min(cap);
    if q.offset >= want || (items.len() <= q.offset + q.limit && complete) {
        let page = items.into_iter().skip(q.offset).take(q.limit).collect();
        return First::Page(page);
    }
    First::Snapshot(Snapshot {
        key,
        per_author: q.per_author,
        generated_at: at,
        items,
        complete,
    })
}

impl<K: PartialEq> Snapshot<K> {
    /// Whether a cursor's snapshot fits the query it comes back with.
    pub fn fits(&self, key: &K, per_author: Option<usize>) -> bool {
        self.key == *key && self.per_author == per_author
    }
}

impl<K> Snapshot<K> {
    /// The walk that extends the snapshot so the page at `offset` is whole,
    /// if the page runs past it, and how many items it is to add; `None` if
    /// the snapshot already covers the page.
    pub fn extension<T: Ranked>(
        &self,
        offset: usize,
        limit: usize,
        cap: usize,
    ) -> Option<(Walk<T>, usize)> {
        let end = offset.saturating_add(limit);
        if end <= self.items.len() || self.complete || self.items.len() >= cap {
            return None;
        }
        let need = offset
            .saturating_add(limit.saturating_mul(PAGES_AHEAD))
            .min(cap)
            - self.items.len();
        let listed = self.items.iter().map(|s| (&s.id, s.author.as_deref()));
        // One more than needed, to learn whether anything follows.
        Some((Walk::after(need + 1, self.per_author, listed), need))
    }

    /// Appends the `need` items an [`Snapshot::extension`] walk was for.
    pub fn extend(&mut self, mut fresh: Vec<SnapItem>, need: usize, cap: usize) {
        let follows = fresh.len() > need;
        fresh.truncate(need);
        self.items.extend(fresh);
        self.complete = !follows || self.items.len() >= cap;
    }

    /// The items of the page at `offset` and whether a next page may follow.
    pub fn page(&self, offset: usize, limit: usize, cap: usize) -> (&[SnapItem], bool) {
        let end = offset.saturating_add(limit);
        let from = offset.min(self.items.len());
        let to = end.min(self.items.len());
        let more = end < self.items.len() || (!self.complete && self.items.len() < cap);
        (&self.items[from..to], more)
    }
}
