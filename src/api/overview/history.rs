//! A small record of past rankings, so the overview can say how an
//! article moved "since an hour ago" without asking the store for the past.
//!
//! Lazily filled: each overview request offers the top of its ranking; a
//! snapshot is kept at most every [`EVERY`] seconds per query. Bounded:
//! at most [`QUERIES`] queries (the least recently used goes first), each
//! with the snapshots of the last [`LOOKBACK`] seconds plus one older, each
//! holding the first [`DEPTH`] ids: under 1 MB in all. The record lives in
//! the serving process: a restarted server, or another API node, starts
//! with none, and says so (`movementSince` is `null`).

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

use crate::model::{ArticleId, Timestamp};

/// How far back movement looks.
pub const LOOKBACK: i64 = 3600;
/// Minimum spacing of two snapshots of one query.
pub const EVERY: i64 = 300;
/// Ids kept per snapshot.
pub const DEPTH: usize = 100;
/// Queries remembered at once.
pub const QUERIES: usize = 32;

#[derive(Default)]
struct Entry {
    used: Timestamp,
    snaps: VecDeque<(Timestamp, Vec<ArticleId>)>,
}

/// Ranks of an earlier snapshot: when it was taken, and id → 1-based rank.
pub struct Baseline {
    pub at: Timestamp,
    pub ranks: HashMap<ArticleId, usize>,
}

#[derive(Default)]
pub struct RankHistory {
    queries: Mutex<HashMap<String, Entry>>,
}

impl RankHistory {
    /// Records `top` (best first) for `query` at `now` if a snapshot is
    /// due, and returns the baseline to compare it with: the newest
    /// snapshot at least [`LOOKBACK`] old, else the oldest one before
    /// `now`, else `None`.
    pub fn observe(&self, query: &str, now: Timestamp, top: &[ArticleId]) -> Option<Baseline> {
        let mut queries = self.queries.lock();
        if !queries.contains_key(query) && queries.len() >= QUERIES {
            let lru = queries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone());
            if let Some(k) = lru {
                queries.remove(&k);
            }
        }
        let e = queries.entry(query.to_string()).or_default();
        e.used = now;
        if e.snaps.back().is_some_and(|(t, _)| *t > now) {
            // The clock went back: the record no longer means anything.
            e.snaps.clear();
        }
        let baseline = e
            .snaps
            .iter()
            .rev()
            .find(|(t, _)| *t <= now - LOOKBACK)
            .or_else(|| e.snaps.front().filter(|(t, _)| *t < now))
            .map(|(at, ids)| Baseline {
                at: *at,
                ranks: ids
                    .iter()
                    .enumerate()
                    .map(|(i, id)| (id.clone(), i + 1))
                    .collect(),
            });
        if e.snaps.back().is_none_or(|(t, _)| now - t >= EVERY) {
            e.snaps
                .push_back((now, top.iter().take(DEPTH).cloned().collect()));
        }
        // Keep one snapshot at least LOOKBACK old, drop the ones before it.
        while e.snaps.len() > 1 && e.snaps[1].0 <= now - LOOKBACK {
            e.snaps.pop_front();
        }
        baseline
    }
}

/// How an item moved against a baseline.
pub fn movement(
    baseline: Option<&Baseline>,
    id: &ArticleId,
    rank: usize,
) -> (Option<usize>, Option<&'static str>) {
    let Some(b) = baseline else {
        return (None, None);
    };
    match b.ranks.get(id) {
        None => (None, Some("new")),
        Some(&prev) if prev > rank => (Some(prev), Some("up")),
        Some(&prev) if prev < rank => (Some(prev), Some("down")),
        Some(&prev) => (Some(prev), Some("same")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(xs: &[&str]) -> Vec<ArticleId> {
        xs.iter().map(|x| ArticleId::parse(x).unwrap()).collect()
    }

    #[test]
    fn baseline_is_the_snapshot_an_hour_old() {
        let h = RankHistory::default();
        assert!(h.observe("q", 1000, &ids(&["a", "b"])).is_none());
        // Too soon for a new snapshot; the first is the baseline meanwhile.
        let b = h.observe("q", 1010, &ids(&["b", "a"])).unwrap();
        assert_eq!(b.at, 1000);
        for t in (1000 + EVERY..=1000 + LOOKBACK + EVERY).step_by(EVERY as usize) {
            h.observe("q", t, &ids(&["c"]));
        }
        let b = h
            .observe("q", 1000 + LOOKBACK + EVERY + 1, &ids(&["c"]))
            .unwrap();
        assert_eq!(
            b.at,
            1000 + EVERY,
            "the newest snapshot at least an hour old"
        );
        let n = h.queries.lock()["q"].snaps.len();
        assert!(n <= (LOOKBACK / EVERY) as usize + 2, "{n} snapshots kept");
    }

    #[test]
    fn movement_against_baseline() {
        let h = RankHistory::default();
        h.observe("q", 0, &ids(&["a", "b", "c"]));
        let b = h.observe("q", LOOKBACK, &ids(&[])).unwrap();
        let id = |s| ArticleId::parse(s).unwrap();
        assert_eq!(movement(Some(&b), &id("c"), 1), (Some(3), Some("up")));
        assert_eq!(movement(Some(&b), &id("a"), 2), (Some(1), Some("down")));
        assert_eq!(movement(Some(&b), &id("b"), 2), (Some(2), Some("same")));
        assert_eq!(movement(Some(&b), &id("z"), 1), (None, Some("new")));
        assert_eq!(movement(None, &id("a"), 1), (None, None));
    }

    #[test]
    fn queries_are_bounded() {
        let h = RankHistory::default();
        for i in 0..QUERIES as i64 * 2 {
            h.observe(&format!("q{i}"), i, &ids(&["a"]));
        }
        let q = h.queries.lock();
        assert_eq!(q.len(), QUERIES);
        assert!(q.contains_key(&format!("q{}", QUERIES * 2 - 1)));
        assert!(!q.contains_key("q0"), "the least recently used went first");
    }
}
