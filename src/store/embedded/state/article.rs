//! One article's record in the embedded store's state: its metadata,
//! lifetime counters, hourly buckets and the window caches over them, and
//! how a counted event lands in each.

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use super::compact::{Lifetime, Meta, Sparse};
use crate::gate::KeyedSet;
use crate::model::{
    ArticleId, Counters, Event, EventType, Quarantine, RangeSpec, Timestamp, Verdict, hour_of,
};
use crate::sketch::Hll;
use crate::store::HourlyRow;

/// Dense article handle, stable for the life of the process.
pub type Idx = u32;

/// A table keyed by article handle: handles are the store's own dense
/// integers, which no client chooses (ids are hashed with SipHash in the
/// store's index), so a fast hash will do (every counted event inserts
/// into a ranking's changed set; a restart fills one entry an article).
pub type IdxMap<V> = std::collections::HashMap<Idx, V, foldhash::fast::RandomState>;
/// The set counterpart of [`IdxMap`].
pub type IdxSet = std::collections::HashSet<Idx, foldhash::fast::RandomState>;

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
    pub(super) hour: i32,
    /// `uv`'s count while the sketch is unchanged, for the windows that
    /// hold this bucket alone (they keep no cache of their own).
    #[serde(skip)]
    pub(super) uv_count: UvCount,
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
pub(super) struct UvCount(u32);

impl UvCount {
    pub(super) const STALE: UvCount = UvCount(u32::MAX);

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
pub(super) struct WindowAgg {
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
pub(super) struct Windows(Option<Box<Vec<WindowAgg>>>);

impl Windows {
    pub(super) fn as_slice(&self) -> &[WindowAgg] {
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
    pub(super) windows: Windows,
}

impl Article {
    pub(super) fn new(id: ArticleId, meta: Meta, known: bool) -> Self {
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
    pub(super) fn count(&mut self, ev: &Event, hash: u64) {
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

    pub(super) fn quarantine(&mut self, v: Verdict, ts: Timestamp) {
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
    pub(super) fn keep_windows(&mut self, hours: &[u32]) {
        if let Some(v) = self.windows.0.as_deref_mut() {
            v.retain(|w| hours.contains(&w.hours));
            if v.is_empty() {
                self.windows.0 = None;
            }
        }
    }

    /// Counters inside `range` at `now`, UV included. A window not cached
    /// yet is cached only if `cache` (else built from the buckets and
    /// dropped: [`Data::window`](super::Data::window) past the window caches' budget).
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

    /// The counters of `hours` hours ending at `end_hour`, read from the
    /// buckets without touching the window caches: a ranking of the past
    /// (`ranked_at`) must not evict the windows live rankings use.
    pub fn window_uncached(&self, hours: u32, end_hour: i64) -> Counters {
        let mut agg = self.build_window(hours, end_hour);
        let l = self.lifetime.get();
        Counters {
            uv: agg.sketch.count(),
            ups: l.ups,
            downs: l.downs,
            ..agg.counters
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
    pub(super) fn expire(&mut self, first_hour: i64) {
        let keep_from = self.buckets.partition_point(|b| b.hour() < first_hour);
        if keep_from > 0 {
            self.buckets.drain(..keep_from);
        }
    }

    /// Counted views per hour over `hours`, oldest first (0 for an hour
    /// with no bucket): what a rising score reads.
    pub fn pv_series(&self, hours: std::ops::RangeInclusive<i64>) -> Vec<u64> {
        let first = *hours.start();
        let mut out = vec![0; hours.clone().count()];
        let start = self.buckets.partition_point(|b| b.hour() < first);
        for b in self.buckets[start..]
            .iter()
            .take_while(|b| b.hour() <= *hours.end())
        {
            out[(b.hour() - first) as usize] = u64::from(b.pv);
        }
        out
    }

    /// Counted and quarantined events (every type) of the buckets in `hours`.
    pub fn events_in(&self, hours: std::ops::RangeInclusive<i64>) -> (u64, u64) {
        let start = self.buckets.partition_point(|b| b.hour() < *hours.start());
        let (mut counted, mut held) = (0, 0);
        for b in self.buckets[start..]
            .iter()
            .take_while(|b| b.hour() <= *hours.end())
        {
            counted += u64::from(b.pv)
                + u64::from(b.likes)
                + u64::from(b.comments)
                + u64::from(b.favorites)
                + u64::from(b.shares)
                + u64::from(b.dwell_reports);
            held += b.quarantine.value().total();
        }
        (counted, held)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreSettings;
    use crate::store::embedded::state::Data;
    use crate::store::embedded::state::tests::{ingest, view};

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
}
