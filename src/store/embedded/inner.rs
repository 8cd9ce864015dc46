//! The state behind the embedded store's lock ([`Inner`]): the data, the
//! rankings, the `GET /api/new` index, the page cursors and the clocks;
//! what the rankings hold; and how long each hold of the lock took.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use crate::clock::GateClock;
use crate::model::{HotQuery, RankedItem, Timestamp};
use crate::rank::pages::{SnapItem, Snapshot};
use crate::score::{Models, Scaled};
use crate::store::StoreSettings;

use super::newest;
use super::ranking::{RankKey, Rankings};
use super::state::{Change, Data};

/// One hold of the state lock by a background step, since `held`.
pub(super) fn record_hold(what: &'static str, held: Instant) {
    metrics::histogram!("hotrank_lock_hold_seconds", "what" => what)
        .record(held.elapsed().as_secs_f64());
}

/// A snapshot of ranked pages that a cursor continues, and when it was
/// last used.
pub(super) struct CursorSnap {
    pub(super) snap: Snapshot<RankKey>,
    pub(super) touched: Timestamp,
}

/// How long an unused cursor stays valid, and how many are kept.
const CURSOR_TTL_SECS: i64 = 600;
const CURSOR_MAX: usize = 4096;

pub(super) struct Inner {
    pub(super) data: Data,
    pub(super) rankings: Rankings,
    /// Live articles by publication time, newest first, all and per
    /// filter value (`GET /api/new`).
    pub(super) newest: newest::Newest,
    /// Articles `GET /api/new` pages looked at, for tests of its cost
    /// ([`EmbeddedStore::new_visited`](crate::store::embedded::EmbeddedStore::new_visited)).
    pub(super) new_visited: u64,
    pub(super) cursors: HashMap<u64, CursorSnap>,
    pub(super) cursor_order: VecDeque<u64>,
    pub(super) cursor_salt: u64,
    pub(super) next_cursor: u64,
    /// The newest event time counted or tallied: queries never run before
    /// it ([`crate::rank::query_time`]).
    pub(super) newest_event: Timestamp,
    /// The arrival clock of the gate's rate limits, behaviour rule and
    /// eventIds: the wall clock made to never run backward.
    pub(super) gate_clock: GateClock,
}

impl Inner {
    pub(super) fn new(data: Data, settings: &StoreSettings) -> Self {
        let max_bytes = settings.ranking_max_bytes;
        let mut inner = Inner {
            data,
            rankings: Rankings::new(settings.max_rankings, max_bytes),
            newest: newest::Newest::default(),
            new_visited: 0,
            cursors: HashMap::new(),
            cursor_order: VecDeque::new(),
            cursor_salt: rand::random(),
            next_cursor: 1,
            newest_event: 0,
            gate_clock: GateClock::default(),
        };
        inner.gate_clock = GateClock::after(inner.data.newest_arrival_ms());
        // After a restart: the start of the newest hour holding anything.
        inner.newest_event = (inner.data.articles.iter())
            .filter_map(|a| a.buckets.last())
            .map(|b| b.hour() * 3600)
            .max()
            .unwrap_or(0);
        inner.newest = newest::Newest::build(&inner.data.articles);
        inner
    }

    pub(super) fn on_change(&mut self, change: Change) {
        self.rankings.on_change(change, &self.data);
        match change {
            Change::Counted(idx) => self.newest.counted(idx, self.data.article(idx)),
            Change::Meta(idx) => self.newest.track(idx, self.data.article(idx)),
            Change::None => {}
        }
    }

    pub(super) fn ranking_sizes(&self) -> RankingSizes {
        let (rankings, entries) = self.rankings.sizes();
        let window_cache_bytes = self.data.window_cache_bytes();
        RankingSizes {
            rankings,
            entries,
            window_cache_bytes,
            bytes: self.rankings.bytes() + window_cache_bytes,
        }
    }

    /// After `keep` was used: evicts the least recently used rankings
    /// while they and the window caches hold more than `rankings.max_bytes`
    /// ([`Rankings::fit`]), and publishes what they hold.
    pub(super) fn fit(&mut self, keep: &RankKey) {
        let held = self.rankings.fit(keep, self.data.window_cache_bytes());
        metrics::gauge!("hotrank_ranking_bytes").set(held as f64);
    }

    pub(super) fn remember_cursor(&mut self, snap: Snapshot<RankKey>, now: Timestamp) -> u64 {
        while self.cursor_order.len() >= CURSOR_MAX {
            if let Some(old) = self.cursor_order.pop_front() {
                self.cursors.remove(&old);
            }
        }
        let id = self.next_cursor ^ self.cursor_salt;
        self.next_cursor += 1;
        self.cursors.insert(id, CursorSnap { snap, touched: now });
        self.cursor_order.push_back(id);
        id
    }

    pub(super) fn expire_cursors(&mut self, now: Timestamp) {
        self.cursors
            .retain(|_, c| now - c.touched < CURSOR_TTL_SECS);
        let live = &self.cursors;
        self.cursor_order.retain(|id| live.contains_key(id));
    }

    /// The ranked items of a page, with metadata as it is now.
    pub(super) fn page_items(
        &self,
        items: &[SnapItem],
        first_rank: usize,
        q: &HotQuery,
        models: &Models,
    ) -> Vec<RankedItem> {
        items
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let meta = self
                    .data
                    .lookup(&s.id)
                    .map(|idx| self.data.article(idx).meta.get().into_owned())
                    .unwrap_or_default();
                RankedItem {
                    rank: first_rank + i,
                    id: s.id.clone(),
                    score: s.score,
                    counters: s.counters,
                    explain: q.explain.then(|| {
                        let (p, t) = (&q.params, s.trend.as_ref());
                        (models.explain(q.model, p, &s.counters, &meta, t, s.at)).scaled(s.scale)
                    }),
                    meta,
                }
            })
            .collect()
    }
}

/// What the live rankings hold (the accounting behind the metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankingSizes {
    pub rankings: usize,
    /// Index entries over all rankings (about 100 bytes each).
    pub entries: usize,
    pub window_cache_bytes: usize,
    /// What the rankings and window caches hold together, estimated (kept
    /// within `rankings.max_bytes`, the `hotrank_ranking_bytes` gauge).
    pub bytes: usize,
}
