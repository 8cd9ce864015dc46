//! The embedded store's in-memory state, [`Data`], and how a log record
//! changes it ([`Data::apply`]); beside it, over the same state: the gate's
//! checks (`gate`), retention ([`retention`]) and dumps (`dump`).
//!
//! Nothing here does I/O or reads a clock. [`Data`] is what snapshots hold;
//! everything else (indexes, window caches, rankings) is derived from it.
//! Every change goes through [`Data::apply`], which is also what replaying
//! the write-ahead log calls, so a replayed log rebuilds the same state.

pub mod article;
pub mod behaviour;
pub mod categories;
pub mod compact;
pub mod dedupe;
mod dump;
mod gate;
mod index;
pub mod net;
pub mod record;
pub mod retention;
pub mod site;
pub mod slots;
pub mod visitors;

use std::collections::BTreeMap;

use crate::gate::{KeyedMap, SlidingLimiter};
use crate::model::{
    ArticleId, ArticleMeta, Counters, Event, EventType, Quarantine, RangeSpec, Timestamp, Verdict,
    VoteDirection, hour_of,
};
use crate::score::CategoryScale;
use crate::sketch::{HLL_SEED, murmur64a};
use crate::store::StoreSettings;
use article::{Article, Idx};
use behaviour::bot_quarantine_ms;
use compact::Meta;
use dedupe::{Dedupe, DedupeKey};
use index::Index;
use record::LogRecord;
use serde::{Deserialize, Serialize};
use site::{SiteLive, SiteStats};
use visitors::Visitors;

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
    /// Per visitor: the rate log (written as the `SlidingLimiter` it
    /// was) and the behaviour rule's state (derived, not written).
    #[serde(rename = "visitor_limits")]
    pub(super) visitors: Visitors,
    pub(super) ip_limits: SlidingLimiter<u64>,
    pub counted: u64,
    pub quarantine: Quarantine,
    pub quarantine_by_hour: BTreeMap<i64, Quarantine>,
    /// Seed 003's `INCR` for posted article ids.
    #[serde(default)]
    pub(super) next_post_id: u64,
    /// Quarantine by crawler family and visitors by hour (state version 3).
    pub site: SiteStats,
    /// The review's network evidence by article and hour (state version
    /// 4), kept while `[review] mode = "suspicious"` ([`net`]).
    pub net: net::NetEvidence,
    /// Hours of `net` kept (`StoreSettings::net_evidence_hours`), 0: none.
    #[serde(skip)]
    net_hours: u32,
    /// Quarantined articles by hour and views by minute (derived).
    #[serde(skip)]
    site_live: SiteLive,
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
    /// `bot_quarantine_secs` in ms, 0 while the behaviour rule is off.
    #[serde(skip)]
    bot_quarantine_ms: i64,
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

impl Data {
    pub fn new(s: &StoreSettings) -> Self {
        Data {
            articles: Vec::new(),
            dedupe: Dedupe::new(),
            event_ids: KeyedMap::default(),
            visitors: Visitors::new(s.visitor_limit_per_minute, 60_000),
            ip_limits: SlidingLimiter::new(s.ip_limit_per_minute, 60_000),
            counted: 0,
            quarantine: Quarantine::default(),
            quarantine_by_hour: BTreeMap::new(),
            next_post_id: 0,
            site: SiteStats::default(),
            net: net::NetEvidence::default(),
            net_hours: s.net_evidence_hours,
            site_live: SiteLive::default(),
            index: Index::default(),
            bot_quarantine_ms: bot_quarantine_ms(s),
            window_bytes: 0,
            window_budget: s.window_cache_bytes(),
            window_ranges: None,
        }
    }

    /// After loading a snapshot: rebuild indexes and take the current
    /// limits (the configuration may have changed since).
    pub fn restore(&mut self, s: &StoreSettings) {
        self.index = Index::build(&self.articles);
        self.site_live = SiteLive::rebuild(&self.articles);
        self.visitors.set_limit(s.visitor_limit_per_minute);
        self.ip_limits.set_limit(s.ip_limit_per_minute);
        self.bot_quarantine_ms = bot_quarantine_ms(s);
        self.window_budget = s.window_cache_bytes();
        self.net_hours = s.net_evidence_hours;
        if self.net_hours == 0 {
            self.net = net::NetEvidence::default();
        }
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

    /// Quarantine by article and crawler family of the hours from
    /// `first_hour` on (`GET /api/stats`).
    pub fn site_figures(&self, first_hour: i64) -> crate::store::SiteFigures {
        crate::store::SiteFigures {
            by_article: self.site_live.top_articles(&self.articles, first_hour),
            by_crawler: self.site.crawlers_since(first_hour),
        }
    }

    /// Views by minute to `now`'s and visitors of the hours from
    /// `first_hour` on (the overview).
    pub fn site_traffic(&self, first_hour: i64, now: Timestamp) -> crate::store::SiteTraffic {
        crate::store::SiteTraffic {
            views_by_minute: self.site_live.views_by_minute(now),
            visitors: self.site.visitors_since(first_hour),
        }
    }

    /// `articles[idx]`'s network evidence over `hours` (the review's).
    pub fn net_evidence(
        &self,
        idx: Idx,
        hours: std::ops::RangeInclusive<i64>,
    ) -> crate::store::NetEvidence {
        let f = self.net.figures(idx, hours.clone());
        let (counted, held) = self.article(idx).events_in(hours);
        crate::store::NetEvidence {
            blocks: f.blocks,
            visitors: f.visitors,
            counted,
            held,
        }
    }

    /// `scale=category`'s divisor for `articles[idx]` in a ranking of UTC
    /// day `day` at `at`: its category's counted events in the window
    /// ([`crate::model::category_hours`]).
    pub fn category_scale(&mut self, idx: Idx, day: i64, at: Timestamp) -> CategoryScale {
        let category = self.articles[idx as usize].meta.category();
        let hours = crate::model::category_hours(day, at);
        CategoryScale {
            events: self.site.categories.events(category, hours),
        }
    }

    /// [`Self::category_scale`] at `at` in its own day, on a state held
    /// shared (movement's scan of the past).
    pub fn category_scale_at(&self, idx: Idx, at: Timestamp) -> CategoryScale {
        let category = self.articles[idx as usize].meta.category();
        let hours = crate::model::category_hours(crate::model::day_of(at), at);
        CategoryScale {
            events: self.site.categories.events_in(category, hours),
        }
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
        let clock = ev.rate_clock_ms();
        if verdict == Verdict::Bot && !ev.bot.is_bot() && self.bot_quarantine_ms > 0 {
            // Quarantined by behaviour: from now on, for this visitor.
            let ms = self.bot_quarantine_ms;
            (self.visitors).update(ev.visitor, |s| s.behaviour.quarantine(clock, ms));
        }
        if matches!(verdict, Verdict::Counted | Verdict::Duplicate) {
            self.ip_limits.record(ev.ip, clock);
        }
        if verdict == Verdict::Duplicate {
            self.visitors.record(ev.visitor, clock);
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
                self.site_live.quarantined_article(hour_of(ev.ts), idx);
            }
            self.site.quarantined(ev, verdict);
            return Change::None;
        }
        let idx = match found {
            Some(idx) => idx,
            None => self.insert_article(Article::new(ev.article.clone(), Meta::Bare(ev.ts), false)),
        };
        if ev.kind.deduplicated() {
            (self.dedupe).raise(DedupeKey::new(idx, ev.visitor, ev.kind as u8), ev.ts);
        }
        // The admission, and the view the behaviour rule keeps, in one
        // change of the visitor's state.
        let viewed = (ev.kind == EventType::View && self.bot_quarantine_ms > 0).then_some(idx);
        self.visitors.counted(ev.visitor, clock, viewed);
        self.counted += 1;
        let category = self.articles[idx as usize].meta.category();
        self.site.categories.counted(category, ev.ts);
        let hash = murmur64a(&ev.visitor_element(), HLL_SEED);
        self.site_live.counted(ev);
        if ev.kind == EventType::View {
            self.site.counted_view(ev.ts, hash);
        }
        if self.net_hours > 0 {
            self.net.counted(idx, ev, hash);
        }
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

    pub(super) fn view(article: u64, visitor: u128, ts: Timestamp) -> Event {
        Event {
            trusted: true,
            ..Event::view(ArticleId::from_number(article), visitor, ts)
        }
    }

    /// Records `ev` as live ingest does: judged, then applied.
    pub(super) fn ingest(d: &mut Data, ev: &Event, s: &StoreSettings) -> Verdict {
        let found = d.lookup(&ev.article);
        let v = d.judge(ev, found, s);
        d.apply_event(ev, v, found);
        v
    }

    pub(super) fn entries(d: &Data) -> Vec<(DedupeKey, Timestamp)> {
        let mut v: Vec<_> = d.dedupe.iter().collect();
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
        let mut sweep = retention::Sweep::default();
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
}

/// The per-article and per-entry layout BENCHMARKS.md accounts for ("what
/// each byte is for"); fails if a struct grows past what it states.
#[cfg(test)]
mod layout {
    use super::*;
    use crate::gate::KeyedSet;
    use crate::sketch::Hll;
    use article::{Bucket, WindowAgg};
    use compact::{Lifetime, Sparse};
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
            ("dedupe slot", dedupe::SLOT_BYTES, 24),
            ("index slot", size_of::<Idx>(), 4),
            ("visitor slot", visitors::SLOT_BYTES, 24),
            (
                "IP rate-log slot",
                size_of::<(u64, crate::gate::AdmissionLog)>(),
                32,
            ),
        ];
        for (what, size, bound) in sizes {
            println!("{what}: {size} bytes");
            assert!(size <= bound, "{what} is {size} bytes, accounted {bound}");
        }
    }
}
