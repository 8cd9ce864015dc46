//! The embedded store's in-memory state and the pure logic over it: the
//! stateful gate, counting, windows, retention.
//!
//! Nothing here does I/O or reads a clock. [`Data`] is what snapshots hold;
//! everything else (indexes, window caches, rankings) is derived from it.
//! Every change goes through [`Data::apply`], which is also what replaying
//! the write-ahead log calls, so a replayed log rebuilds the same state.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use super::compact::{Lifetime, Meta, Sparse};
use super::index::Index;
use crate::gate::{KeyedMap, KeyedSet, SlidingLimiter};
use crate::model::{
    ArticleId, ArticleMeta, Counters, Event, EventType, Quarantine, RangeSpec, Timestamp, Verdict,
    VoteDirection, VoteOutcome, hour_of,
};
use crate::sketch::{HLL_SEED, Hll, murmur64a};
use crate::store::{HourlyRow, IngestReject, StoreSettings};

pub use super::dedupe::{Dedupe, DedupeKey};
use super::sharded::{SHARDS, ShardedMap};

/// The behaviour rule's window: distinct articles viewed in any 60 s.
const BEHAVIOUR_MS: i64 = 60_000;

/// Per-visitor state of the behaviour rule (`gate.bot_articles_per_minute`).
/// Derived from counted views (rebuilt by log replay, not kept in
/// snapshots): a restart from a snapshot forgets who was quarantined.
#[derive(Debug, Clone, Default)]
struct Behaviour {
    /// Quarantined as `bot` until this rate-clock time (ms); 0: not.
    bot_until_ms: i64,
    /// (rate clock ms, article) of counted views in the last 60 s, one
    /// entry per article. Most visitors view one article a minute: that
    /// one is held inline, with no allocation.
    views: SmallVec<[(i64, Idx); 1]>,
}

impl Behaviour {
    fn flagged(&self, clock: i64) -> bool {
        clock < self.bot_until_ms
    }

    /// Distinct articles viewed in the 60 s before `clock`, besides `idx`.
    fn others(&self, clock: i64, idx: Option<Idx>) -> usize {
        self.views
            .iter()
            .filter(|&&(t, a)| t > clock - BEHAVIOUR_MS && Some(a) != idx)
            .count()
    }

    fn live(&self, clock: i64) -> bool {
        self.flagged(clock) || self.views.iter().any(|&(t, _)| t > clock - BEHAVIOUR_MS)
    }
}

/// Dense article handle, stable for the life of the process.
pub type Idx = u32;

/// One write-ahead log record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LogRecord {
    /// An event and the verdict the gate gave it.
    Event { ev: Event, verdict: Verdict },
    /// Metadata set by `PUT /api/articles/{id}`.
    Put { id: ArticleId, meta: ArticleMeta },
    /// `DELETE /api/articles/{id}`.
    Delete { id: ArticleId },
    /// Seed 003 posting as logs before 2026-11-23 wrote it: the poster's
    /// vote recorded (they cannot vote again) but not counted. Replayed as
    /// it was; new posts are [`LogRecord::PostVoted`].
    Post {
        id: ArticleId,
        meta: ArticleMeta,
        poster: u128,
    },
    /// A counted seed 003 vote (refused votes change nothing and are not logged).
    Vote {
        id: ArticleId,
        user: u128,
        direction: VoteDirection,
    },
    /// Seed 003 posting: the id was taken from the post counter, and the
    /// poster's up-vote is recorded and counted, as Redis in Action's
    /// `post_article` does (`votes` 1, score `publishedAt + 432`). Last in
    /// the enum, so older logs keep their variant numbers.
    PostVoted {
        id: ArticleId,
        meta: ArticleMeta,
        poster: u128,
    },
}

/// One hour of one article's activity.
///
/// 88 bytes, so that the one bucket most articles hold is a 96-byte heap
/// block (glibc rounds a request up to 16 bytes with 8 of its own: at 96
/// bytes it took 112). Hence the hour and the remembered count as 4 bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// The hour ([`hour_of`]) as i32 (245,000 years either side of 1970):
    /// postcard writes an i32 as the zigzag varint it writes an i64 as,
    /// so snapshots keep their bytes. Read through [`Bucket::hour`].
    hour: i32,
    /// `uv`'s count while the sketch is unchanged, for the windows that
    /// hold this bucket alone (they keep no cache of their own).
    #[serde(skip)]
    uv_count: UvCount,
    pub pv: u32,
    pub likes: u32,
    pub comments: u32,
    pub favorites: u32,
    pub shares: u32,
    pub dwell_reports: u32,
    pub dwell_seconds: u64,
    pub uv: Hll,
    pub quarantine: Sparse<Quarantine>,
}

/// A sketch's count, remembered until the sketch changes: derived, never
/// serialized, and equal to any other (two buckets with the same counters
/// and sketch are equal whether or not one was counted). A count of
/// `u32::MAX` or more is not remembered (it is computed each time).
#[derive(Debug, Clone, Copy)]
struct UvCount(u32);

impl UvCount {
    const STALE: UvCount = UvCount(u32::MAX);

    fn get_or(&mut self, count: impl FnOnce() -> u64) -> u64 {
        if self.0 != u32::MAX {
            return u64::from(self.0);
        }
        let n = count();
        self.0 = u32::try_from(n).unwrap_or(u32::MAX);
        n
    }
}

impl Default for UvCount {
    fn default() -> Self {
        UvCount::STALE
    }
}

impl PartialEq for UvCount {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Bucket {
    /// `hour` saturates at the i32 range, which no timestamp the API takes
    /// (at most `max_future_secs` past its arrival) reaches.
    fn new(hour: i64) -> Self {
        Bucket {
            hour: hour.clamp(i32::MIN.into(), i32::MAX.into()) as i32,
            pv: 0,
            likes: 0,
            comments: 0,
            favorites: 0,
            shares: 0,
            dwell_reports: 0,
            dwell_seconds: 0,
            uv: Hll::new(),
            quarantine: Sparse::default(),
            uv_count: UvCount::STALE,
        }
    }

    pub fn hour(&self) -> i64 {
        self.hour.into()
    }

    fn add_to(&self, c: &mut Counters) {
        c.pv += u64::from(self.pv);
        c.likes += u64::from(self.likes);
        c.comments += u64::from(self.comments);
        c.favorites += u64::from(self.favorites);
        c.shares += u64::from(self.shares);
        c.dwell_reports += u64::from(self.dwell_reports);
        c.dwell_seconds += self.dwell_seconds;
    }
}

/// Most windows (ranges) cached per article: each live ranking over a
/// range keeps its articles' window counters and sketch warm; a fifth range
/// evicts the least recently used (rebuilt from the buckets when needed).
pub const WINDOW_CACHES: usize = 4;

/// Cached counters of one article over one window, valid while `end_hour`
/// is the current hour. Counted events inside the window update it in
/// place; when the hour turns it is rebuilt from the buckets.
#[derive(Debug, Clone)]
struct WindowAgg {
    hours: u32,
    end_hour: i64,
    counters: Counters,
    sketch: Hll,
    uv: Option<u64>,
}

/// An article's window caches, most recently used first: absent (8
/// bytes, where an empty `Vec` took 24) for the many articles with none.
// The box is the point: 8 bytes in every article, the `Vec` (and a heap
// block of its own) only in those that cache a window.
#[allow(clippy::box_collection)]
#[derive(Debug, Clone, Default)]
struct Windows(Option<Box<Vec<WindowAgg>>>);

impl Windows {
    fn as_slice(&self) -> &[WindowAgg] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }

    fn as_mut_slice(&mut self) -> &mut [WindowAgg] {
        match self.0.as_deref_mut() {
            Some(v) => v,
            None => &mut [],
        }
    }

    fn vec_mut(&mut self) -> &mut Vec<WindowAgg> {
        self.0.get_or_insert_with(Box::default)
    }

    fn remove(&mut self, i: usize) {
        let v = self.vec_mut();
        v.remove(i);
        if v.is_empty() {
            self.0 = None;
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Article {
    pub id: ArticleId,
    pub meta: Meta,
    /// Created by `PUT` rather than by a first event.
    pub known: bool,
    pub deleted: bool,
    /// Lifetime counters but UV (`lifetime_uv` counts it).
    pub lifetime: Lifetime,
    pub lifetime_uv: Hll,
    pub quarantine: Sparse<Quarantine>,
    /// Sorted by hour, oldest first.
    pub buckets: Vec<Bucket>,
    /// Who voted (seed 003's `voted:<id>`), emptied once voting closes.
    #[serde(default)]
    pub voters: Sparse<KeyedSet<u128>>,
    #[serde(skip)]
    windows: Windows,
}

impl Article {
    fn new(id: ArticleId, meta: Meta, known: bool) -> Self {
        Article {
            id,
            meta,
            known,
            deleted: false,
            lifetime: Lifetime::default(),
            lifetime_uv: Hll::new(),
            quarantine: Sparse::default(),
            buckets: Vec::new(),
            voters: Sparse::default(),
            windows: Windows::default(),
        }
    }

    fn bucket_mut(&mut self, hour: i64) -> &mut Bucket {
        // Almost every event lands in the newest bucket.
        let pos = match self.buckets.last() {
            Some(b) if b.hour() == hour => self.buckets.len() - 1,
            Some(b) if b.hour() < hour => {
                self.buckets.push(Bucket::new(hour));
                self.buckets.len() - 1
            }
            None => {
                // One slot, not the four a first push reserves: most
                // articles see one hour (320 -> 80 bytes); later hours
                // grow it by doubling.
                self.buckets.reserve_exact(1);
                self.buckets.push(Bucket::new(hour));
                0
            }
            Some(_) => match self.buckets.binary_search_by_key(&hour, |b| b.hour()) {
                Ok(i) => i,
                Err(i) => {
                    self.buckets.insert(i, Bucket::new(hour));
                    i
                }
            },
        };
        &mut self.buckets[pos]
    }

    /// Applies one counted event.
    fn count(&mut self, ev: &Event, hash: u64) {
        let hour = hour_of(ev.ts);
        let b = self.bucket_mut(hour);
        bump(ev, hash, BucketRef::Bucket(b));
        let uv = &mut self.lifetime_uv;
        (self.lifetime).update(|c| bump(ev, hash, BucketRef::Counters(c, uv)));
        for w in self.windows.as_mut_slice() {
            if crate::time::last_hours(w.end_hour, w.hours).contains(&hour) {
                bump(ev, hash, BucketRef::Window(w));
            }
        }
    }

    fn quarantine(&mut self, v: Verdict, ts: Timestamp) {
        self.quarantine.get_mut().add(v, 1);
        self.bucket_mut(hour_of(ts)).quarantine.get_mut().add(v, 1);
    }

    /// Bytes held by this article's window caches (counters and sketches).
    pub fn window_cache_bytes(&self) -> usize {
        (self.windows.as_slice().iter())
            .map(|w| std::mem::size_of::<WindowAgg>() + w.sketch.byte_len())
            .sum()
    }

    /// Keeps only the window caches over one of `hours` (the ranges of
    /// the live rankings).
    fn keep_windows(&mut self, hours: &[u32]) {
        if let Some(v) = self.windows.0.as_deref_mut() {
            v.retain(|w| hours.contains(&w.hours));
            if v.is_empty() {
                self.windows.0 = None;
            }
        }
    }

    /// Counters inside `range` at `now`, UV included. A window not cached
    /// yet is cached only if `cache` (else built from the buckets and
    /// dropped: [`Data::window`] past the window caches' budget).
    pub fn window(&mut self, range: RangeSpec, now: Timestamp, cache: bool) -> Counters {
        let RangeSpec::Hours(hours) = range else {
            let mut c = self.lifetime.get();
            c.uv = self.lifetime_uv.count();
            return c;
        };
        let end_hour = hour_of(now);
        let cached = (self.windows.as_slice().iter()).position(|w| w.hours == hours);
        let fresh = cached.is_some_and(|i| self.windows.as_slice()[i].end_hour == end_hour);
        if !fresh && let Some(one) = self.single_bucket(hours, end_hour) {
            // A window over one bucket at most is that bucket: nothing to
            // cache (a `WindowAgg` and its sketch took 192 bytes per
            // article, and most articles see one hour). The bucket keeps
            // its sketch's count while the sketch is unchanged.
            if let Some(i) = cached {
                self.windows.remove(i);
            }
            let mut c = Counters::default();
            if let Some(i) = one {
                let b = &mut self.buckets[i];
                b.add_to(&mut c);
                c.uv = b.uv_count.get_or(|| b.uv.estimate());
            }
            let l = self.lifetime.get();
            return Counters {
                ups: l.ups,
                downs: l.downs,
                ..c
            };
        }
        // Most recently used first; at most WINDOW_CACHES per article.
        match cached {
            Some(i) => {
                self.windows.vec_mut()[..=i].rotate_right(1);
                if !fresh {
                    let agg = self.build_window(hours, end_hour);
                    self.windows.vec_mut()[0] = agg;
                }
            }
            None if !cache => {
                let mut agg = self.build_window(hours, end_hour);
                let l = self.lifetime.get();
                return Counters {
                    uv: agg.sketch.count(),
                    ups: l.ups,
                    downs: l.downs,
                    ..agg.counters
                };
            }
            None => {
                let agg = self.build_window(hours, end_hour);
                let windows = self.windows.vec_mut();
                windows.truncate(WINDOW_CACHES - 1);
                // One slot at a time: a first push would reserve four
                // (576 bytes) for an article that most often has one range.
                windows.reserve_exact(1);
                windows.insert(0, agg);
            }
        }
        let w = &mut self.windows.vec_mut()[0];
        let uv = *w.uv.get_or_insert_with(|| w.sketch.count());
        let l = self.lifetime.get();
        Counters {
            uv,
            ups: l.ups,
            downs: l.downs,
            ..w.counters
        }
    }

    /// `Some(Some(i))` if the window of `hours` ending at `end_hour` holds
    /// one bucket (`buckets[i]`), `Some(None)` if none, `None` if more.
    fn single_bucket(&self, hours: u32, end_hour: i64) -> Option<Option<usize>> {
        let first = *crate::time::last_hours(end_hour, hours).start();
        let start = self.buckets.partition_point(|b| b.hour() < first);
        let end = self.buckets.partition_point(|b| b.hour() <= end_hour);
        match end.saturating_sub(start) {
            0 => Some(None),
            1 => Some(Some(start)),
            _ => None,
        }
    }

    fn build_window(&self, hours: u32, end_hour: i64) -> WindowAgg {
        let first = *crate::time::last_hours(end_hour, hours).start();
        let start = self.buckets.partition_point(|b| b.hour() < first);
        let mut counters = Counters::default();
        let mut sketch = Hll::new();
        let mut sketches = SmallVec::<[&Hll; 8]>::new();
        for b in self.buckets[start..]
            .iter()
            .take_while(|b| b.hour() <= end_hour)
        {
            b.add_to(&mut counters);
            if b.pv > 0 {
                sketches.push(&b.uv);
            }
        }
        sketch.union_all(&sketches);
        WindowAgg {
            hours,
            end_hour,
            counters,
            sketch,
            uv: None,
        }
    }

    /// Drops buckets that end before `first_hour`.
    fn expire(&mut self, first_hour: i64) {
        let keep_from = self.buckets.partition_point(|b| b.hour() < first_hour);
        if keep_from > 0 {
            self.buckets.drain(..keep_from);
        }
    }

    pub fn hourly(&self, first_hour: i64, last_hour: i64) -> Vec<HourlyRow> {
        let start = self.buckets.partition_point(|b| b.hour() < first_hour);
        self.buckets[start..]
            .iter()
            .take_while(|b| b.hour() <= last_hour)
            .map(|b| HourlyRow {
                hour: b.hour(),
                pv: u64::from(b.pv),
                uv: b.uv.estimate(),
                quarantined: b.quarantine.value(),
            })
            .collect()
    }
}

enum BucketRef<'a> {
    Bucket(&'a mut Bucket),
    Counters(&'a mut Counters, &'a mut Hll),
    Window(&'a mut WindowAgg),
}

/// Adds one counted event to a bucket, the lifetime counters or a window.
fn bump(ev: &Event, hash: u64, target: BucketRef<'_>) {
    // Evaluates to whether the UV sketch changed.
    macro_rules! apply {
        ($c:expr, $uv:expr) => {
            match ev.kind {
                EventType::View => {
                    $c.pv += 1;
                    $uv.add_hash(hash)
                }
                EventType::Dwell => {
                    $c.dwell_reports += 1;
                    $c.dwell_seconds += u64::from(ev.seconds);
                    false
                }
                EventType::Like => {
                    $c.likes += 1;
                    false
                }
                EventType::Comment => {
                    $c.comments += 1;
                    false
                }
                EventType::Favorite => {
                    $c.favorites += 1;
                    false
                }
                EventType::Share => {
                    $c.shares += 1;
                    false
                }
            }
        };
    }
    match target {
        BucketRef::Bucket(b) => {
            if apply!(b, b.uv) {
                b.uv_count = UvCount::STALE;
            }
        }
        BucketRef::Counters(c, uv) => {
            let _ = apply!(c, uv);
        }
        BucketRef::Window(w) => {
            // The cached UV stays valid unless a register changed.
            if apply!(w.counters, w.sketch) {
                w.uv = None;
            }
        }
    }
}

/// Retention at `now` keeps a dedupe entry only if its time is after this.
/// Views back-dated by more than an hour past the window may escape dedupe
/// once their pair's entry is gone; see docs/design.md.
pub fn dedupe_horizon(now: Timestamp, s: &StoreSettings) -> Timestamp {
    now - i64::from(s.dedupe_window_secs) - 3600
}

/// What snapshots hold: every counter and the shared half of the gate.
///
/// The serde derive is the state without its dedupe entries, which
/// `persist` writes and reads as a section of their own (fixed-width, first
/// in the payload, decoded beside the rest).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Data {
    pub articles: Vec<Article>,
    /// Last counted event time per (article, visitor, event type).
    #[serde(skip)]
    pub(super) dedupe: Dedupe,
    /// Arrival second of each remembered idempotency key.
    pub(super) event_ids: KeyedMap<u128, Timestamp>,
    pub(super) visitor_limits: SlidingLimiter<u128>,
    pub(super) ip_limits: SlidingLimiter<u64>,
    pub counted: u64,
    pub quarantine: Quarantine,
    pub quarantine_by_hour: BTreeMap<i64, Quarantine>,
    /// Seed 003's `INCR` for posted article ids.
    #[serde(default)]
    pub(super) next_post_id: u64,
    #[serde(skip)]
    index: Index,
    /// Bytes the articles' window caches hold, kept as they change.
    #[serde(skip)]
    window_bytes: usize,
    /// Past this many, windows not cached yet are not cached
    /// ([`StoreSettings::window_cache_bytes`]).
    #[serde(skip)]
    window_budget: usize,
    /// The ranges of the live rankings: the retention sweep drops the
    /// window caches over any other ([`Data::keep_window_ranges`]).
    #[serde(skip)]
    window_ranges: Option<Vec<u32>>,
    /// The behaviour rule's per-visitor state (derived, not snapshotted):
    /// one entry per viewing visitor of the last minute, sharded like the
    /// dedupe table, as it grows with the traffic.
    #[serde(skip)]
    behaviour: ShardedMap<u128, Behaviour>,
    /// `bot_quarantine_secs` in ms, 0 while the behaviour rule is off.
    #[serde(skip)]
    bot_quarantine_ms: i64,
}

/// Where a chunked retention walk over the articles is
/// ([`Data::expire_articles`]), and what it saw.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sweep {
    pub next: usize,
    pub live: usize,
    pub window_cache_bytes: usize,
}

/// What `apply` changed, for the rankings to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    None,
    /// Counters of this article changed.
    Counted(Idx),
    /// Metadata (or liveness) of this article changed.
    Meta(Idx),
}

fn bot_quarantine_ms(s: &StoreSettings) -> i64 {
    if s.bot_articles_per_minute == 0 {
        0
    } else {
        i64::from(s.bot_quarantine_secs) * 1000
    }
}

impl Data {
    pub fn new(s: &StoreSettings) -> Self {
        Data {
            articles: Vec::new(),
            dedupe: Dedupe::new(),
            event_ids: KeyedMap::default(),
            visitor_limits: SlidingLimiter::new(s.visitor_limit_per_minute, 60_000),
            ip_limits: SlidingLimiter::new(s.ip_limit_per_minute, 60_000),
            counted: 0,
            quarantine: Quarantine::default(),
            quarantine_by_hour: BTreeMap::new(),
            next_post_id: 0,
            index: Index::default(),
            behaviour: ShardedMap::default(),
            bot_quarantine_ms: bot_quarantine_ms(s),
            window_bytes: 0,
            window_budget: s.window_cache_bytes(),
            window_ranges: None,
        }
    }

    /// The newest arrival time (ms, on the gate's clock) the gate state
    /// holds: rate logs, the behaviour rule's views, remembered eventIds.
    /// A restarted store's [`crate::clock::GateClock`] never reads below
    /// it, so a wall clock that stepped back while it was down cannot put
    /// those entries in its future.
    pub fn newest_arrival_ms(&self) -> i64 {
        let views = (self.behaviour.iter())
            .filter_map(|(_, b)| b.views.last().map(|&(t, _)| t))
            .max();
        let ids = self
            .event_ids
            .values()
            .max()
            .map(|&s| s.saturating_mul(1000));
        [
            self.visitor_limits.newest(),
            self.ip_limits.newest(),
            views,
            ids,
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(i64::MIN)
    }

    /// After loading a snapshot: rebuild indexes and take the current
    /// limits (the configuration may have changed since).
    pub fn restore(&mut self, s: &StoreSettings) {
        self.index = Index::build(&self.articles);
        self.visitor_limits.set_limit(s.visitor_limit_per_minute);
        self.ip_limits.set_limit(s.ip_limit_per_minute);
        self.bot_quarantine_ms = bot_quarantine_ms(s);
        self.window_budget = s.window_cache_bytes();
    }

    /// Counters of `articles[idx]` inside `range` at `now`, UV included,
    /// through its window caches, which cache a new window only while
    /// they hold less than their budget.
    pub fn window(&mut self, idx: Idx, range: RangeSpec, now: Timestamp) -> Counters {
        let cache = self.window_bytes < self.window_budget;
        self.in_windows(idx, |a| a.window(range, now, cache))
    }

    /// Runs `f` on `articles[idx]`, following what its window caches hold.
    fn in_windows<T>(&mut self, idx: Idx, f: impl FnOnce(&mut Article) -> T) -> T {
        let a = &mut self.articles[idx as usize];
        let before = a.window_cache_bytes();
        let out = f(a);
        self.window_bytes = (self.window_bytes + a.window_cache_bytes()).saturating_sub(before);
        out
    }

    /// Bytes the window caches hold now.
    pub fn window_cache_bytes(&self) -> usize {
        self.window_bytes
    }

    /// The ranges whose window caches the next retention sweep keeps (the
    /// live rankings'): a range whose rankings were all evicted gives its
    /// caches back within a sweep.
    pub fn keep_window_ranges(&mut self, hours: Vec<u32>) {
        self.window_ranges = Some(hours);
    }

    pub fn lookup(&self, id: &ArticleId) -> Option<Idx> {
        self.index.get(&self.articles, id)
    }

    pub fn article(&self, idx: Idx) -> &Article {
        &self.articles[idx as usize]
    }

    pub fn article_mut(&mut self, idx: Idx) -> &mut Article {
        &mut self.articles[idx as usize]
    }

    pub fn live_articles(&self) -> usize {
        self.articles.iter().filter(|a| !a.deleted).count()
    }

    /// Whether an event may be taken at all: with `require_known_articles`
    /// only for articles created by `PUT`; past `max_articles`, untrusted
    /// events only for articles the store already holds. A refused event
    /// changes nothing. `Ok` holds the event's article as [`Self::lookup`]
    /// finds it, for `judge` and `apply_event`.
    pub fn accepts(&self, ev: &Event, s: &StoreSettings) -> Result<Option<Idx>, IngestReject> {
        let found = self.lookup(&ev.article);
        if s.require_known_articles && !found.is_some_and(|i| self.article(i).known) {
            return Err(IngestReject::UnknownArticle);
        }
        if found.is_none()
            && !ev.trusted
            && s.max_articles > 0
            && self.articles.len() as u64 >= s.max_articles
        {
            return Err(IngestReject::TooManyArticles);
        }
        Ok(found)
    }

    /// Whether the behaviour rule quarantines this event's visitor: already
    /// quarantined (`Some(false)`), or this view would be its
    /// `bot_articles_per_minute + 1`-th distinct article in 60 s
    /// (`Some(true)`). Pure. `found` is the event's article (`lookup`).
    pub fn behaviour_bot(&self, ev: &Event, found: Option<Idx>, s: &StoreSettings) -> Option<bool> {
        if s.bot_articles_per_minute == 0 {
            return None;
        }
        let clock = ev.rate_clock_ms();
        let b = self.behaviour.get(&ev.visitor);
        if b.is_some_and(|b| b.flagged(clock)) {
            return Some(false);
        }
        if ev.kind != EventType::View {
            return None;
        }
        let others = b.map_or(0, |b| b.others(clock, found));
        (others >= s.bot_articles_per_minute as usize).then_some(true)
    }

    /// The gate's stateful checks, in order. Pure: `apply` records.
    /// `found` is the event's article (`lookup`).
    pub fn judge(&self, ev: &Event, found: Option<Idx>, s: &StoreSettings) -> Verdict {
        if let Some(key) = ev.event_id
            && let Some(&seen) = self.event_ids.get(&key)
            && ev.arrival_ms / 1000 - seen < i64::from(s.event_id_ttl_secs)
        {
            return Verdict::Replayed;
        }
        let behaviour = self.behaviour_bot(ev, found, s);
        if ev.bot || behaviour == Some(false) {
            return Verdict::Bot;
        }
        let clock = ev.rate_clock_ms();
        if !self.visitor_limits.allows(&ev.visitor, clock) || !self.ip_limits.allows(&ev.ip, clock)
        {
            return Verdict::RateLimited;
        }
        if ev.kind.deduplicated()
            && let Some(idx) = found
            && let Some(last) = self
                .dedupe
                .get(&DedupeKey::new(idx, ev.visitor, ev.kind as u8))
            && (ev.ts - last).abs() < i64::from(s.dedupe_window_secs)
        {
            return Verdict::Duplicate;
        }
        if behaviour == Some(true) {
            return Verdict::Bot;
        }
        Verdict::Counted
    }

    /// Records an event with its verdict. Live ingest and log replay both
    /// come through here.
    ///
    /// Only a counted event leaves its `eventId` behind: a refused one
    /// (duplicate, rate limited, bot, replayed) changed nothing, so a retry
    /// of it is refused again on its own merits and costs no memory.
    /// `found` is the event's article as [`Self::lookup`] finds it now.
    pub fn apply_event(&mut self, ev: &Event, verdict: Verdict, found: Option<Idx>) -> Change {
        if let Some(key) = ev.event_id
            && verdict == Verdict::Counted
        {
            self.event_ids.insert(key, ev.arrival_ms / 1000);
        }
        if verdict == Verdict::Bot && !ev.bot && self.bot_quarantine_ms > 0 {
            // Quarantined by behaviour: from now on, for this visitor.
            let clock = ev.rate_clock_ms();
            let b = (self.behaviour).get_or_insert_with(ev.visitor, Behaviour::default);
            if !b.flagged(clock) {
                b.bot_until_ms = clock.saturating_add(self.bot_quarantine_ms);
                b.views = SmallVec::new();
            }
        }
        if matches!(verdict, Verdict::Counted | Verdict::Duplicate) {
            let clock = ev.rate_clock_ms();
            self.visitor_limits.record(ev.visitor, clock);
            self.ip_limits.record(ev.ip, clock);
        }
        if verdict != Verdict::Counted {
            self.quarantine.add(verdict, 1);
            self.quarantine_by_hour
                .entry(hour_of(ev.ts))
                .or_default()
                .add(verdict, 1);
            // Quarantined events never register an article (a bot must not
            // be able to create ids), but are tallied on known ones.
            if let Some(idx) = found {
                self.article_mut(idx).quarantine(verdict, ev.ts);
            }
            return Change::None;
        }
        let idx = match found {
            Some(idx) => idx,
            None => self.insert_article(Article::new(ev.article.clone(), Meta::Bare(ev.ts), false)),
        };
        if ev.kind.deduplicated() {
            (self.dedupe).raise(DedupeKey::new(idx, ev.visitor, ev.kind as u8), ev.ts);
        }
        if ev.kind == EventType::View && self.bot_quarantine_ms > 0 {
            let clock = ev.rate_clock_ms();
            let b = (self.behaviour).get_or_insert_with(ev.visitor, Behaviour::default);
            b.views
                .retain(|&mut (t, a)| t > clock - BEHAVIOUR_MS && a != idx);
            b.views.push((clock, idx));
        }
        self.counted += 1;
        let hash = murmur64a(&ev.visitor_element(), HLL_SEED);
        self.in_windows(idx, |a| a.count(ev, hash));
        Change::Counted(idx)
    }

    fn insert_article(&mut self, a: Article) -> Idx {
        let idx = self.articles.len() as Idx;
        self.articles.push(a);
        self.index.insert(&self.articles, idx);
        idx
    }

    /// Creates or replaces metadata; returns the handle and whether it is new.
    pub fn put(&mut self, id: &ArticleId, meta: ArticleMeta) -> (Idx, bool) {
        match self.lookup(id) {
            Some(idx) => {
                let a = self.article_mut(idx);
                let created = a.deleted || !a.known;
                a.meta = meta.into();
                a.known = true;
                a.deleted = false;
                (idx, created)
            }
            None => (
                self.insert_article(Article::new(id.clone(), meta.into(), true)),
                true,
            ),
        }
    }

    pub fn delete(&mut self, id: &ArticleId) -> Option<Idx> {
        let idx = self.lookup(id)?;
        let a = self.article_mut(idx);
        if a.deleted {
            return None;
        }
        a.deleted = true;
        Some(idx)
    }

    pub fn apply(&mut self, rec: &LogRecord) -> Change {
        match rec {
            LogRecord::Event { ev, verdict } => {
                self.apply_event(ev, *verdict, self.lookup(&ev.article))
            }
            LogRecord::Put { id, meta } => Change::Meta(self.put(id, meta.clone()).0),
            LogRecord::Delete { id } => self.delete(id).map_or(Change::None, Change::Meta),
            LogRecord::Post { id, meta, poster } | LogRecord::PostVoted { id, meta, poster } => {
                let idx = self.put(id, meta.clone()).0;
                self.next_post_id = self.next_post_id.max(id.as_str().parse().unwrap_or(0));
                let a = self.article_mut(idx);
                a.voters.get_mut().insert(*poster);
                if matches!(rec, LogRecord::PostVoted { .. }) {
                    a.lifetime.update(|c| c.ups += 1);
                }
                Change::Meta(idx)
            }
            LogRecord::Vote {
                id,
                user,
                direction,
            } => match self.lookup(id) {
                Some(idx) => {
                    let a = self.article_mut(idx);
                    a.voters.get_mut().insert(*user);
                    a.lifetime.update(|c| match direction {
                        VoteDirection::Up => c.ups += 1,
                        VoteDirection::Down => c.downs += 1,
                    });
                    Change::Counted(idx)
                }
                None => Change::None,
            },
        }
    }

    /// The next free id from the post counter (skipping ids taken otherwise).
    pub fn next_post_id(&self) -> ArticleId {
        let mut n = self.next_post_id;
        loop {
            n += 1;
            let id = ArticleId::from_number(n);
            if self.lookup(&id).is_none() {
                return id;
            }
        }
    }

    /// Seed 003's checks for a vote, in order. Pure: `apply` records.
    pub fn judge_vote(
        &self,
        id: &ArticleId,
        user: u128,
        direction: VoteDirection,
        now: Timestamp,
        s: &StoreSettings,
    ) -> Result<Idx, VoteOutcome> {
        let idx = self
            .lookup(id)
            .filter(|&i| !self.article(i).deleted)
            .ok_or(VoteOutcome::UnknownArticle)?;
        let votes = &s.models.votes;
        if direction == VoteDirection::Down && !votes.allow_down_votes {
            return Err(VoteOutcome::DownVotesDisabled);
        }
        let a = self.article(idx);
        if now - a.meta.published_at() >= votes.window_secs() {
            return Err(VoteOutcome::Closed);
        }
        if a.voters.get().is_some_and(|v| v.contains(&user)) {
            return Err(VoteOutcome::AlreadyVoted);
        }
        Ok(idx)
    }

    /// Retention and expiry of gate state.
    pub fn expire(&mut self, now: Timestamp, s: &StoreSettings) {
        let mut sweep = Sweep::default();
        while !self.expire_articles(now, s, &mut sweep, usize::MAX, None) {}
        let mut shard = 0;
        while !self.expire_sharded(now, s, &mut shard, None) {}
        self.expire_gate(now, s);
    }

    /// Retention of the sharded tables (dedupe entries, behaviour state)
    /// from shard `next` on: at least one shard of each, and until `until`
    /// if given, else all; `true` once every shard is done. Ingest between
    /// two calls is as if it came before the sweep (for the shards still to
    /// do) or after it (for the others).
    pub fn expire_sharded(
        &mut self,
        now: Timestamp,
        s: &StoreSettings,
        next: &mut usize,
        until: Option<std::time::Instant>,
    ) -> bool {
        let horizon = dedupe_horizon(now, s);
        while *next < SHARDS {
            self.dedupe.retain_shard(*next, |_, last| last > horizon);
            (self.behaviour).retain_shard(*next, |_, b| b.live(now * 1000));
            *next += 1;
            if until.is_some_and(|t| std::time::Instant::now() >= t) {
                break;
            }
        }
        *next >= SHARDS
    }

    /// Retention for the next articles of `sweep`: at most `chunk`, and
    /// until `until` if given (checked every few articles); `true` once
    /// every article is done. Tallies live articles and window caches.
    pub fn expire_articles(
        &mut self,
        now: Timestamp,
        s: &StoreSettings,
        sweep: &mut Sweep,
        chunk: usize,
        until: Option<std::time::Instant>,
    ) -> bool {
        let first_hour = hour_of(now - s.retention_secs) + 1;
        let voting = s.models.votes.window_secs();
        let end = sweep.next.saturating_add(chunk).min(self.articles.len());
        for (n, a) in self.articles[sweep.next..end].iter_mut().enumerate() {
            a.expire(first_hour);
            if let Some(hours) = &self.window_ranges {
                let before = a.window_cache_bytes();
                a.keep_windows(hours);
                let freed = before - a.window_cache_bytes();
                self.window_bytes = self.window_bytes.saturating_sub(freed);
            }
            // Seed 003: once voting closes the voter set is freed.
            if a.voters.get().is_some() && now - a.meta.published_at() >= voting {
                a.voters = Sparse::default();
            }
            sweep.live += usize::from(!a.deleted);
            sweep.window_cache_bytes += a.window_cache_bytes();
            sweep.next += 1;
            if n % 64 == 63 && until.is_some_and(|t| std::time::Instant::now() >= t) {
                break;
            }
        }
        sweep.next >= self.articles.len()
    }

    /// Expiry of the gate's state but the sharded tables
    /// ([`Self::expire_sharded`]), and of old quarantine tallies.
    pub fn expire_gate(&mut self, now: Timestamp, s: &StoreSettings) {
        let first_hour = hour_of(now - s.retention_secs) + 1;
        self.quarantine_by_hour = self.quarantine_by_hour.split_off(&first_hour);
        let horizon = now - i64::from(s.event_id_ttl_secs);
        self.event_ids.retain(|_, &mut seen| seen > horizon);
        self.visitor_limits.sweep(now * 1000);
        self.ip_limits.sweep(now * 1000);
    }

    /// Entries of the gate's state: dedupe pairs, eventIds, and rate-limit
    /// plus behaviour keys.
    pub fn gate_sizes(&self) -> (usize, usize, usize) {
        (
            self.dedupe.len(),
            self.event_ids.len(),
            self.visitor_limits.keys() + self.ip_limits.keys() + self.behaviour.len(),
        )
    }
}

/// Dumps (`hotrank export` / `import`): the store-neutral records of
/// [`crate::store::dump`].
mod dumping {
    use super::*;
    use crate::store::dump::{
        DumpBucket, DumpCounters, DumpVotes, RateScope, Record, hll_from_b64, hll_to_b64,
        parse_u64, parse_u128,
    };

    fn kind_of(c: char) -> Option<EventType> {
        EventType::ALL
            .into_iter()
            .find(|k| k.as_str().starts_with(c))
    }

    fn bucket_counters(b: &Bucket) -> DumpCounters {
        DumpCounters {
            pv: u64::from(b.pv),
            likes: u64::from(b.likes),
            comments: u64::from(b.comments),
            favorites: u64::from(b.favorites),
            shares: u64::from(b.shares),
            dwell_seconds: b.dwell_seconds,
            dwell_reports: u64::from(b.dwell_reports),
            quarantine: b.quarantine.value().0,
            uv: hll_to_b64(&b.uv),
        }
    }

    fn bucket_from(hour: i64, c: &DumpCounters) -> Result<Bucket, String> {
        let n = |v: u64| u32::try_from(v).map_err(|_| format!("bucket {hour}: count too large"));
        Ok(Bucket {
            hour: i32::try_from(hour).map_err(|_| format!("bucket {hour}: hour out of range"))?,
            pv: n(c.pv)?,
            likes: n(c.likes)?,
            comments: n(c.comments)?,
            favorites: n(c.favorites)?,
            shares: n(c.shares)?,
            dwell_reports: n(c.dwell_reports)?,
            dwell_seconds: c.dwell_seconds,
            uv: hll_from_b64(&c.uv)?,
            quarantine: Quarantine(c.quarantine).into(),
            uv_count: UvCount::STALE,
        })
    }

    impl Data {
        /// Every article, total and gate entry as dump records.
        pub fn export(&self) -> Vec<Record> {
            let mut out = Vec::new();
            for a in &self.articles {
                let l = a.lifetime.get();
                let mut voters: Vec<String> = (a.voters.get().into_iter().flatten())
                    .map(|v| format!("{v:032x}"))
                    .collect();
                voters.sort();
                out.push(Record::Article {
                    votes: DumpVotes {
                        ups: l.ups,
                        downs: l.downs,
                        voters,
                    },
                    id: a.id.clone(),
                    meta: a.meta.get().into_owned(),
                    known: a.known,
                    deleted: a.deleted,
                    lifetime: DumpCounters {
                        pv: l.pv,
                        likes: l.likes,
                        comments: l.comments,
                        favorites: l.favorites,
                        shares: l.shares,
                        dwell_seconds: l.dwell_seconds,
                        dwell_reports: l.dwell_reports,
                        quarantine: a.quarantine.value().0,
                        uv: hll_to_b64(&a.lifetime_uv),
                    },
                    hours: a
                        .buckets
                        .iter()
                        .map(|b| DumpBucket {
                            at: b.hour(),
                            c: bucket_counters(b),
                        })
                        .collect(),
                    days: Vec::new(),
                });
            }
            out.push(Record::Totals {
                counted: self.counted,
                quarantine: self.quarantine.0,
                by_hour: self
                    .quarantine_by_hour
                    .iter()
                    .map(|(h, q)| (*h, q.0))
                    .collect(),
            });
            for (key, last) in self.dedupe.iter() {
                let (idx, visitor, kind) = key.parts();
                let kind = EventType::ALL[kind as usize];
                out.push(Record::Dedupe {
                    article: self.article(idx).id.clone(),
                    kind: kind.as_str().chars().next().unwrap_or('v'),
                    visitor: format!("{visitor:032x}"),
                    last,
                });
            }
            for (&key, &seen) in &self.event_ids {
                out.push(Record::EventId {
                    key: format!("{key:032x}"),
                    seen,
                });
            }
            for (k, log) in self.visitor_limits.logs() {
                out.push(Record::Rate {
                    scope: RateScope::Visitor,
                    key: format!("{k:032x}"),
                    log: log.iter().copied().collect(),
                });
            }
            for (k, log) in self.ip_limits.logs() {
                out.push(Record::Rate {
                    scope: RateScope::Ip,
                    key: format!("{k:016x}"),
                    log: log.iter().copied().collect(),
                });
            }
            out
        }

        /// State rebuilt from dump records. Daily buckets (from Redis, for
        /// days past its hourly horizon) become the first hour of their day.
        pub fn import(records: &[Record], s: &StoreSettings) -> Result<Data, String> {
            let mut d = Data::new(s);
            let mut pending = Vec::new();
            for r in records {
                match r {
                    Record::Header { .. } | Record::Identity { .. } => {}
                    Record::Article {
                        id,
                        meta,
                        known,
                        deleted,
                        lifetime,
                        hours,
                        days,
                        votes,
                    } => {
                        if d.lookup(id).is_some() {
                            return Err(format!("article {id} appears twice"));
                        }
                        let mut a = Article::new(id.clone(), meta.clone().into(), *known);
                        a.deleted = *deleted;
                        a.lifetime = Lifetime::from(Counters {
                            pv: lifetime.pv,
                            likes: lifetime.likes,
                            comments: lifetime.comments,
                            favorites: lifetime.favorites,
                            shares: lifetime.shares,
                            dwell_seconds: lifetime.dwell_seconds,
                            dwell_reports: lifetime.dwell_reports,
                            ups: votes.ups,
                            downs: votes.downs,
                            ..Counters::default()
                        });
                        for v in &votes.voters {
                            let user = u128::from_str_radix(v, 16).map_err(|_| {
                                format!("article {id}: voter {v:?} is not 32 hex digits")
                            })?;
                            a.voters.get_mut().insert(user);
                        }
                        a.lifetime_uv = hll_from_b64(&lifetime.uv)?;
                        a.quarantine = Quarantine(lifetime.quarantine).into();
                        for b in hours {
                            a.buckets.push(bucket_from(b.at, &b.c)?);
                        }
                        for b in days {
                            let first = b.at * 24;
                            if !a.buckets.iter().any(|x| x.hour().div_euclid(24) == b.at) {
                                a.buckets.push(bucket_from(first, &b.c)?);
                            }
                        }
                        a.buckets.sort_by_key(|b| b.hour());
                        a.buckets.dedup_by_key(|b| b.hour());
                        d.insert_article(a);
                    }
                    Record::Totals {
                        counted,
                        quarantine,
                        by_hour,
                    } => {
                        d.counted = *counted;
                        d.quarantine = Quarantine(*quarantine);
                        d.quarantine_by_hour =
                            by_hour.iter().map(|(h, q)| (*h, Quarantine(*q))).collect();
                    }
                    other => pending.push(other),
                }
            }
            for r in pending {
                match r {
                    Record::Dedupe {
                        article,
                        kind,
                        visitor,
                        last,
                    } => {
                        let kind = kind_of(*kind).ok_or("unknown event kind in a dedupe entry")?;
                        if let Some(idx) = d.lookup(article) {
                            d.dedupe.insert(
                                DedupeKey::new(idx, parse_u128(visitor)?, kind as u8),
                                *last,
                            );
                        }
                    }
                    Record::EventId { key, seen } => {
                        d.event_ids.insert(parse_u128(key)?, *seen);
                    }
                    Record::Rate { scope, key, log } => match scope {
                        RateScope::Visitor => {
                            d.visitor_limits.set_log(parse_u128(key)?, log.clone())
                        }
                        RateScope::Ip => d.ip_limits.set_log(parse_u64(key)?, log.clone()),
                    },
                    _ => {}
                }
            }
            Ok(d)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Logs written before the poster's vote was counted replay as they
    /// were; new posts count it (API.md, seed 003's `post_article`).
    #[test]
    fn old_posts_replay_uncounted_new_posts_count_the_posters_vote() {
        let mut d = Data::new(&StoreSettings::default());
        let post = |n: &str, voted: bool| {
            let (id, meta, poster) = (ArticleId::parse(n).unwrap(), ArticleMeta::default(), 7);
            if voted {
                LogRecord::PostVoted { id, meta, poster }
            } else {
                LogRecord::Post { id, meta, poster }
            }
        };
        for (n, voted) in [("1", false), ("2", true)] {
            d.apply(&post(n, voted));
            let a = d.article(d.lookup(&ArticleId::parse(n).unwrap()).unwrap());
            assert_eq!(a.lifetime.get().ups, u64::from(voted), "post {n}");
            assert!(
                a.voters.get().is_some_and(|v| v.contains(&7)),
                "the poster cannot vote again"
            );
        }
        assert_eq!(d.next_post_id().as_str(), "3");
    }

    fn view(article: u64, visitor: u128, ts: Timestamp) -> Event {
        Event {
            trusted: true,
            ..Event::view(ArticleId::from_number(article), visitor, ts)
        }
    }

    /// Records `ev` as live ingest does: judged, then applied.
    fn ingest(d: &mut Data, ev: &Event, s: &StoreSettings) -> Verdict {
        let found = d.lookup(&ev.article);
        let v = d.judge(ev, found, s);
        d.apply_event(ev, v, found);
        v
    }

    fn entries(d: &Data) -> Vec<(DedupeKey, Timestamp)> {
        let mut v: Vec<_> = d.dedupe.iter().map(|(&k, t)| (k, t)).collect();
        v.sort_unstable();
        v
    }

    /// The window caches' byte count follows every change (caches made,
    /// grown by events, replaced, dropped by the sweep) as a recount over
    /// the articles finds it; past the budget a new window is answered
    /// alike but not cached.
    #[test]
    fn window_bytes_follow_the_caches_and_stop_at_the_budget() {
        let s = StoreSettings {
            visitor_limit_per_minute: 0,
            ip_limit_per_minute: 0,
            ..StoreSettings::default()
        };
        let t0 = 1_800_000_000;
        let mut d = Data::new(&s);
        let recount =
            |d: &Data| -> usize { d.articles.iter().map(|a| a.window_cache_bytes()).sum() };
        let mut visitor = 0u128;
        let mut view = |d: &mut Data, n: u64, ts: Timestamp| {
            visitor += 1;
            let ev = Event::view(ArticleId::from_number(n), visitor, ts);
            let found = d.lookup(&ev.article);
            let v = d.judge(&ev, found, &s);
            d.apply_event(&ev, v, found);
        };
        for n in 1..=20 {
            view(&mut d, n, t0);
            view(&mut d, n, t0 + 3600);
        }
        let now = t0 + 3600;
        for hours in [2, 3, 4, 5, 6, 2] {
            for idx in 0..20 {
                d.window(idx, RangeSpec::Hours(hours), now);
            }
            assert_eq!(d.window_cache_bytes(), recount(&d), "{hours}h");
        }
        assert!(d.window_cache_bytes() > 0);
        for n in 1..=20 {
            for _ in 0..40 {
                view(&mut d, n, now);
            }
        }
        assert_eq!(d.window_cache_bytes(), recount(&d), "after events");
        d.keep_window_ranges(vec![2]);
        let mut sweep = Sweep::default();
        while !d.expire_articles(now, &s, &mut sweep, 7, None) {}
        assert_eq!(d.window_cache_bytes(), recount(&d), "after the sweep");
        assert!(d.articles.iter().all(|a| a.windows.as_slice().len() == 1));
        // Past the budget: the same counters, nothing cached.
        let before = d.window_cache_bytes();
        d.window_budget = before;
        let cached = d.window(0, RangeSpec::Hours(2), now);
        let fresh = d.window(0, RangeSpec::Hours(9), now);
        assert_eq!(d.window_cache_bytes(), before);
        d.window_budget = usize::MAX;
        assert_eq!(d.window(0, RangeSpec::Hours(9), now), fresh);
        assert_eq!(d.window(0, RangeSpec::Hours(2), now), cached);
        assert!(d.window_cache_bytes() > before);
    }

    /// A window over one bucket keeps no cache and answers what a cache
    /// built from the buckets answers, through new visitors (the bucket's
    /// remembered count follows its sketch), new hours (two buckets: a
    /// cache) and the hour after (one bucket again: the cache goes).
    #[test]
    fn one_bucket_windows_answer_as_cached_ones_without_a_cache() {
        let s = StoreSettings {
            visitor_limit_per_minute: 0,
            ip_limit_per_minute: 0,
            ..StoreSettings::default()
        };
        let t0 = 1_800_000_000; // the start of an hour
        let mut d = Data::new(&s);
        let range = RangeSpec::Hours(1);
        // What a cache rebuilt from the buckets says.
        let built = |d: &Data, now: Timestamp| {
            let a = d.article(0);
            let w = a.build_window(1, hour_of(now));
            Counters {
                uv: w.sketch.estimate(),
                ..w.counters
            }
        };
        let events = [
            (0, t0),
            (1, t0 + 10),
            (1, t0 + 20),
            (2, t0 + 3600),
            (3, t0 + 3601),
            (4, t0 + 7200),
        ];
        for (i, &(visitor, ts)) in events.iter().enumerate() {
            // Visitor 1's second view is a duplicate.
            ingest(&mut d, &view(1, visitor, ts), &s);
            for now in [ts, ts + 3600] {
                let got = d.article_mut(0).window(range, now, true);
                assert_eq!(got, built(&d, now), "event {i}, now {now}");
                assert_eq!(d.article(0).window_cache_bytes(), 0, "event {i}");
            }
        }
        assert_eq!(d.article_mut(0).window(range, t0 + 1, true).uv, 2);
        // Two hours in a two-hour window: cached, and equal.
        let two = RangeSpec::Hours(2);
        let c = d.article_mut(0).window(two, t0 + 3601, true);
        assert!(d.article(0).window_cache_bytes() > 0);
        assert_eq!((c.pv, c.uv), (4, 4));
        // An hour later it holds one bucket: the cache goes.
        let c = d.article_mut(0).window(two, t0 + 7200 + 3600, true);
        assert_eq!((c.pv, c.uv), (1, 1));
        assert_eq!(d.article(0).window_cache_bytes(), 0);
    }

    /// Dedupe retention a shard per call, with ingest between the calls,
    /// leaves the entries and verdicts a whole sweep before (or after)
    /// that ingest leaves: events after the horizon are kept wherever
    /// their shard is in the sweep.
    #[test]
    fn chunked_dedupe_retention_equals_a_whole_sweep() {
        let s = StoreSettings {
            visitor_limit_per_minute: 0,
            ip_limit_per_minute: 0,
            ..StoreSettings::default()
        };
        let t0 = 1_800_000_000;
        let now = t0 + 2 * 3600;
        let horizon = dedupe_horizon(now, &s);
        let mut chunked = Data::new(&s);
        // Old entries (before the horizon) and recent ones.
        for i in 0..20_000u64 {
            let ts = if i % 2 == 0 { t0 } else { now - 60 };
            ingest(&mut chunked, &view(i % 50 + 1, u128::from(i), ts), &s);
        }
        let mut whole = chunked.clone();
        whole.expire(now, &s);
        let mut late = Vec::new();
        let (mut shard, mut calls) = (0, 0u64);
        // A deadline already past: one shard per call.
        while !chunked.expire_sharded(now, &s, &mut shard, Some(std::time::Instant::now())) {
            calls += 1;
            if calls % 64 == 0 {
                // New and raised pairs, after the horizon, mid-sweep.
                let ev = view(calls % 50 + 1, u128::from(calls * 7), now);
                late.push(ev.clone());
                ingest(&mut chunked, &ev, &s);
            }
        }
        assert_eq!(calls as usize + 1, SHARDS);
        chunked.expire_gate(now, &s);
        assert!(chunked.dedupe.iter().all(|(_, t)| t > horizon));
        for ev in &late {
            ingest(&mut whole, ev, &s);
        }
        assert_eq!(entries(&chunked), entries(&whole));
        // Half the pairs were old; a late event every 64 shards, some on a
        // swept shard.
        assert_eq!(late.len(), SHARDS / 64 - 1);
        assert!((10_000..10_100).contains(&whole.dedupe.len()));
        // The same verdicts for every pair, swept or not.
        for i in 0..20_000u64 {
            let ev = view(i % 50 + 1, u128::from(i), now);
            let found = whole.lookup(&ev.article);
            assert_eq!(
                chunked.judge(&ev, found, &s),
                whole.judge(&ev, found, &s),
                "pair {i}"
            );
        }
    }
}

/// The per-article and per-entry layout BENCHMARKS.md accounts for ("what
/// each byte is for"); fails if a struct grows past what it states.
#[cfg(test)]
mod layout {
    use super::*;
    use std::mem::size_of;

    #[test]
    fn per_article_structs_stay_within_the_accounted_sizes() {
        let sizes = [
            ("Article", size_of::<Article>(), 176),
            ("Lifetime", size_of::<Lifetime>(), 40),
            ("Meta", size_of::<Meta>(), 16),
            ("Sparse<Quarantine>", size_of::<Sparse<Quarantine>>(), 8),
            (
                "Sparse<KeyedSet<u128>>",
                size_of::<Sparse<KeyedSet<u128>>>(),
                8,
            ),
            ("ArticleMeta", size_of::<ArticleMeta>(), 200),
            ("Counters", size_of::<Counters>(), 80),
            ("Hll", size_of::<Hll>(), 40),
            ("Bucket", size_of::<Bucket>(), 88),
            ("WindowAgg", size_of::<WindowAgg>(), 152),
            ("KeyedSet<u128>", size_of::<KeyedSet<u128>>(), 40),
            ("dedupe slot", size_of::<(DedupeKey, Timestamp)>(), 32),
            ("index slot", size_of::<Idx>(), 4),
            ("behaviour slot", size_of::<(u128, Behaviour)>(), 48),
            (
                "rate-log slot",
                size_of::<(u128, crate::gate::AdmissionLog)>(),
                48,
            ),
        ];
        for (what, size, bound) in sizes {
            println!("{what}: {size} bytes");
            assert!(size <= bound, "{what} is {size} bytes, accounted {bound}");
        }
    }
}
