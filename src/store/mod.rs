//! Storage behind one trait.
//!
//! A [`Store`] owns everything stateful: the shared half of the gate
//! (idempotency keys, rate limits, dedupe windows), the counters, and the
//! rankings. Each method documents its contract; the contract test suite
//! (`tests/contract.rs`) runs unchanged against every implementation.
//!
//! - [`embedded`]: all state in process, durable in a data directory
//!   (write-ahead log in [`wal`] + snapshots in [`snapshot`]).
//! - [`redis`]: all state in Redis 6.2+/7, shared by many API nodes
//!   (key layout in docs/redis-keys.md).

pub mod cursor;
pub mod dump;
pub mod embedded;
pub mod redis;
pub mod snapshot;
pub mod storage;
pub mod wal;

use async_trait::async_trait;

use crate::model::{
    ArticleId, ArticleMeta, ArticleView, Event, HotPage, HotQuery, Outcome, Stats, Timestamp,
    Verdict, VoteDirection, VoteOutcome,
};
use crate::score::Models;

/// What a store needs to know of the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreSettings {
    pub dedupe_window_secs: u32,
    pub visitor_limit_per_minute: u32,
    pub ip_limit_per_minute: u32,
    pub event_id_ttl_secs: u32,
    pub retention_secs: i64,
    pub ranking_cap: usize,
    /// Most rankings kept live (least recently used dropped first).
    pub max_rankings: usize,
    /// Most bytes the embedded store's rankings and window caches hold
    /// together (least recently used rankings dropped first).
    pub ranking_max_bytes: usize,
    /// Articles indexed per lock hold while the embedded store builds a
    /// new ranking.
    pub build_chunk: usize,
    pub require_known_articles: bool,
    /// Most articles the store holds; past it, events from untrusted
    /// clients for articles it does not know are refused (0: no limit).
    pub max_articles: u64,
    /// A visitor whose counted views reach more than this many distinct
    /// articles in any 60 s is quarantined as `bot` (0: off).
    pub bot_articles_per_minute: u32,
    /// How long such a visitor stays quarantined.
    pub bot_quarantine_secs: u32,
    pub models: Models,
    /// Hours of the review's network evidence kept (`[review] mode =
    /// "suspicious"`: `review.window_hours`), 0: none kept.
    pub net_evidence_hours: u32,
}

impl StoreSettings {
    pub fn from_config(c: &crate::config::Config) -> Self {
        StoreSettings {
            dedupe_window_secs: c.gate.dedupe_window_secs,
            visitor_limit_per_minute: c.gate.visitor_limit_per_minute,
            ip_limit_per_minute: c.gate.ip_limit_per_minute,
            event_id_ttl_secs: c.gate.event_id_ttl_secs,
            retention_secs: c.retention_secs(),
            ranking_cap: c.retention.ranking_cap,
            max_rankings: c.rankings.max_live,
            ranking_max_bytes: usize::try_from(c.rankings.max_bytes).unwrap_or(usize::MAX),
            build_chunk: c.rankings.build_chunk,
            require_known_articles: c.require_known_articles,
            max_articles: c.max_articles,
            bot_articles_per_minute: c.gate.bot_articles_per_minute,
            bot_quarantine_secs: c.gate.bot_quarantine_secs,
            models: c.models.clone(),
            net_evidence_hours: c.review.evidence_hours(),
        }
    }
}

impl StoreSettings {
    /// The window caches' share of `ranking_max_bytes`: past it, windows
    /// not cached yet are built from the buckets without caching them.
    pub fn window_cache_bytes(&self) -> usize {
        self.ranking_max_bytes / 2
    }
}

impl Default for StoreSettings {
    fn default() -> Self {
        Self::from_config(&crate::config::Config::default())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The backing store cannot be reached or cannot persist; retry later.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A paging cursor that is malformed, expired or for another query.
    #[error("invalid cursor: {0}")]
    InvalidCursor(String),
    #[error("internal store error: {0}")]
    Internal(String),
}

/// Why one event of a batch was refused by the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IngestReject {
    /// `require_known_articles` is set and the article was never created.
    UnknownArticle,
    /// The store holds `max_articles` articles and this untrusted event
    /// names a new one.
    TooManyArticles,
}

impl IngestReject {
    /// The error code clients see (HTTP API, per-event batch errors).
    pub fn code(self) -> &'static str {
        match self {
            IngestReject::UnknownArticle => "unknown_article",
            IngestReject::TooManyArticles => "too_many_articles",
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            IngestReject::UnknownArticle => {
                "this article was never created (require_known_articles is set)"
            }
            IngestReject::TooManyArticles => {
                "the store holds max_articles articles: events for new articles need the ingest token"
            }
        }
    }
}

/// Metrics the stores' gates count (HELP text registered once).
pub mod gate_metrics {
    /// Events refused with [`super::IngestReject::TooManyArticles`].
    pub const ARTICLES_REFUSED: &str = "hotrank_articles_refused_total";
    /// Events quarantined as `bot` by the behaviour rule (not by user agent).
    pub const BEHAVIOUR_BOT_EVENTS: &str = "hotrank_behaviour_bot_events_total";
    /// Visitors newly quarantined by the behaviour rule.
    pub const BEHAVIOUR_BOTS: &str = "hotrank_behaviour_bots_total";

    /// Registers the HELP text (idempotent).
    pub fn describe() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            metrics::describe_counter!(
                ARTICLES_REFUSED,
                "Events refused because the store holds max_articles articles and the event (untrusted) named a new one"
            );
            metrics::describe_counter!(
                BEHAVIOUR_BOT_EVENTS,
                "Events quarantined as bot because their visitor viewed more than gate.bot_articles_per_minute distinct articles in a minute"
            );
            metrics::describe_counter!(
                BEHAVIOUR_BOTS,
                "Visitors newly quarantined as bots by gate.bot_articles_per_minute"
            );
        });
    }

    /// Counts one batch's behaviour and article-limit outcomes.
    pub fn record(refused: u64, behaviour_events: u64, behaviour_bots: u64) {
        if refused + behaviour_events + behaviour_bots == 0 {
            return;
        }
        describe();
        metrics::counter!(ARTICLES_REFUSED).increment(refused);
        metrics::counter!(BEHAVIOUR_BOT_EVENTS).increment(behaviour_events);
        metrics::counter!(BEHAVIOUR_BOTS).increment(behaviour_bots);
    }
}

/// Picks one page out of a list walked in order (`GET /api/new`): at most
/// `per_author` items by one author (counted before the offset, so pages
/// agree with each other), `skip` matching items skipped, `limit` taken.
#[derive(Debug)]
pub struct Picker {
    authors: crate::rank::AuthorCap,
    skip: usize,
    limit: usize,
    matched: usize,
    taken: usize,
}

/// What to do with one offered item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    Skip,
    Take,
    /// The page is full and this item would start the next one.
    Full,
}

impl Picker {
    pub fn new(per_author: Option<usize>, skip: usize, limit: usize) -> Self {
        Picker {
            authors: crate::rank::AuthorCap::new(per_author),
            skip,
            limit,
            matched: 0,
            taken: 0,
        }
    }

    /// Offers the next item that matches the query's filters.
    pub fn offer(&mut self, author: Option<&str>) -> Pick {
        if !self.authors.admit(author) {
            return Pick::Skip;
        }
        self.matched += 1;
        if self.matched <= self.skip {
            Pick::Skip
        } else if self.taken == self.limit {
            Pick::Full
        } else {
            self.taken += 1;
            Pick::Take
        }
    }
}

/// Result of `put_article`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    Created,
    Updated,
}

/// One article's network evidence over some hours, for `[review] mode =
/// "suspicious"` ([`crate::curation::suspicious`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetEvidence {
    /// Distinct network blocks of its counted views with a known block.
    pub blocks: u64,
    /// Distinct visitors of those views.
    pub visitors: u64,
    /// Its counted events (every type).
    pub counted: u64,
    /// Its events the gate held back (quarantined, every reason).
    pub held: u64,
}

/// Hourly detail of one article, for the dashboard.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HourlyRow {
    pub hour: i64,
    pub pv: u64,
    pub uv: u64,
    pub quarantined: crate::model::Quarantine,
}

/// Who posts or votes: the keyed hash of the id as sent (what stores keep,
/// so raw ids never reach them), and the id itself, which only seed
/// layout stores (`[redis] layout = "seed"`: the site's `voted:` sets hold
/// its own `user:<id>` members).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Voter<'a> {
    pub hash: u128,
    pub raw: &'a str,
}

impl From<u128> for Voter<'static> {
    /// A voter known only by its hash (tools and tests).
    fn from(hash: u128) -> Self {
        Voter { hash, raw: "" }
    }
}

/// The data a store keeps: events in, articles, rankings and counts out.
/// Its upkeep is [`Lifecycle`]'s; a queued ingest path is a [`Queue`]
/// beside it, held by the API.
#[async_trait]
pub trait Store: Lifecycle {
    /// Gates and applies `events` in order. For each event, the replay
    /// check, rate limits, dedupe window and counter updates happen
    /// atomically; an `Ok` outcome is durable (per the store's durability
    /// policy) before this returns. On `Err`, no outcome was acknowledged
    /// and the caller must not answer 2xx.
    async fn ingest(
        &self,
        events: Vec<Event>,
        now: Timestamp,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError>;

    /// Creates or replaces an article's metadata. Counters are untouched.
    async fn put_article(
        &self,
        id: ArticleId,
        meta: ArticleMeta,
        now: Timestamp,
    ) -> Result<PutOutcome, StoreError>;

    /// Metadata, lifetime counters, quarantine and scores; `None` if unknown
    /// or deleted.
    async fn article(
        &self,
        id: &ArticleId,
        now: Timestamp,
    ) -> Result<Option<ArticleView>, StoreError>;

    /// Removes an article from every ranking; its counters stay until
    /// retention ends. `false` if it was unknown or already deleted.
    async fn delete_article(&self, id: &ArticleId, now: Timestamp) -> Result<bool, StoreError>;

    /// A page of a ranking: the exact order of the model's score computed
    /// from the counters inside `q.range` at `now` (or at the cursor's
    /// `generatedAt` when continuing a snapshot).
    async fn hot(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError>;

    /// Live articles, newest `publishedAt` first.
    async fn newest(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError>;

    /// The first `depth` articles of `q`'s ranking (model, range, filters
    /// and `perAuthor`; paging ignored) as it stood at `at`, a time in the
    /// past: each candidate scored at `at` from the hourly buckets up to
    /// `at`'s hour, with today's metadata. Every candidate is looked at
    /// (the rankings' indexes bound scores from their own time on, not
    /// before), so this costs a ranking's build; callers cache the answer
    /// (`api::movement`, once per ranking and hour). Empty for rankings
    /// that buckets cannot take back in time (`range=all`, the vote
    /// models: lifetime counters).
    async fn ranked_at(
        &self,
        q: &HotQuery,
        at: Timestamp,
        depth: usize,
    ) -> Result<Vec<ArticleId>, StoreError>;

    /// Totals and quarantine by reason, with the last `hours` hours by hour.
    async fn stats(&self, now: Timestamp, hours: u32) -> Result<Stats, StoreError>;

    /// The site's counted views by minute over the last hour and its unique
    /// visitors over the last `hours` hours (the dashboard's overview).
    async fn site_traffic(&self, now: Timestamp, hours: u32) -> Result<SiteTraffic, StoreError>;

    /// One article's last `hours` hourly buckets, oldest first.
    async fn hourly(
        &self,
        id: &ArticleId,
        now: Timestamp,
        hours: u32,
    ) -> Result<Option<Vec<HourlyRow>>, StoreError>;

    /// The network evidence of each of `ids` (in order) over the last
    /// `hours` hours to `now`'s; zeros for an article with none (unknown,
    /// or kept by no store while the review is not `suspicious`).
    async fn net_evidence(
        &self,
        ids: &[ArticleId],
        now: Timestamp,
        hours: u32,
    ) -> Result<Vec<NetEvidence>, StoreError>;

    /// Seed 003 posting: a new article whose id comes from a counter, with
    /// the poster's own up-vote recorded.
    async fn post_article(
        &self,
        meta: ArticleMeta,
        poster: Voter<'_>,
        now: Timestamp,
    ) -> Result<ArticleId, StoreError>;

    /// Seed 003 voting: one vote per user and article, while the article is
    /// younger than the voting window; the voter set is freed after it.
    async fn vote(
        &self,
        id: &ArticleId,
        user: Voter<'_>,
        direction: VoteDirection,
        now: Timestamp,
    ) -> Result<VoteOutcome, StoreError>;

    /// Seconds (wall clock) since the archive writer last flushed (the
    /// Redis store); `None` when no flush happened, or without a writer.
    async fn archive_age(&self) -> Result<Option<i64>, StoreError>;
}

/// A store's life around its data: readiness, upkeep, shutdown.
#[async_trait]
pub trait Lifecycle: Send + Sync + 'static {
    /// `Ok` if the store can take writes and answer queries.
    async fn ready(&self) -> Result<(), StoreError>;

    /// What the store still prepares after start before it should take
    /// traffic (the embedded store's default ranking), if anything:
    /// `/readyz` answers 503 meanwhile. Requests are served all the same.
    fn warming(&self) -> Option<String> {
        None
    }

    /// Periodic upkeep: retention, expiry of gate state, re-scoring,
    /// snapshots. Called by the server every few seconds.
    async fn maintain(&self, now: Timestamp) -> Result<(), StoreError>;

    /// Keeps rankings ready for queries, off the query path: the first
    /// call builds the default ranking ([`HotQuery::default_page`]; until
    /// then [`Lifecycle::warming`] says so), later ones bring the rankings
    /// queried lately up to date. The server calls it every few seconds
    /// on a task of its own, since a rebuild can take long. The embedded
    /// store does this on a thread of its own and needs no call.
    async fn keep_rankings(&self, _now: Timestamp) -> Result<(), StoreError> {
        Ok(())
    }

    /// Flushes everything durable; later calls may fail.
    async fn shutdown(&self) -> Result<(), StoreError>;
}

/// Ingest through a queue (the Redis pipeline): the API answers `queued`
/// and workers gate and count later. Held by the API beside its store.
#[async_trait]
pub trait Queue: Send + Sync + 'static {
    /// Queues validated events for the workers; `Ok` once the queue holds
    /// them durably (per Redis' persistence).
    async fn enqueue(&self, events: Vec<Event>, now: Timestamp) -> Result<(), StoreError>;

    /// The verdict the workers gave an event with this (hashed) eventId:
    /// counted if any copy counted, else the latest copy's; `None` while
    /// queued, unknown or expired.
    async fn verdict(
        &self,
        event_id: u128,
    ) -> Result<Option<Result<Verdict, IngestReject>>, StoreError>;

    /// The queue's backlog and refusals, for `/api/stats`.
    async fn status(&self) -> Result<QueueStats, StoreError>;
}

/// A [`Queue`]'s state (`pipeline` in `/api/stats`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueStats {
    pub partitions: u32,
    /// Entries not yet through both stages, over every partition.
    pub backlog: u64,
    /// The backlog at which appends are refused (503).
    pub max_backlog: u64,
    /// Seconds since the archive writer last flushed, if it has.
    pub archive_age_seconds: Option<i64>,
    /// Events the workers refused, by reason.
    pub refused: QueueRefused,
    /// Each partition's stage lag.
    pub lag: Vec<PartitionLag>,
}

/// Events the workers refused, by reason (`refused` of [`QueueStats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueRefused {
    pub unknown_article: u64,
    pub too_many_articles: u64,
}

/// One partition's stage lag (`lag` of [`QueueStats`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PartitionLag {
    pub partition: u32,
    pub group: String,
    /// Delivered to a worker, not yet acknowledged.
    pub pending: u64,
    /// Not yet delivered.
    pub unread: u64,
}

/// Most articles `GET /api/stats` lists under `byArticle`.
pub const QUARANTINE_TOP_ARTICLES: usize = 20;

/// The articles with the most held-back events, most first (ties by id),
/// at most [`QUARANTINE_TOP_ARTICLES`]: `Stats::quarantine_by_article`.
pub fn top_quarantined(
    by_article: impl IntoIterator<Item = (ArticleId, crate::model::Quarantine)>,
) -> Vec<(ArticleId, crate::model::Quarantine)> {
    let mut all: Vec<_> = by_article
        .into_iter()
        .filter(|(_, q)| q.total() > 0)
        .collect();
    all.sort_by(|(a, qa), (b, qb)| qb.total().cmp(&qa.total()).then_with(|| a.cmp(b)));
    all.truncate(QUARANTINE_TOP_ARTICLES);
    all
}

/// Crawler tallies as `Stats::quarantine_by_crawler` lists them: most
/// first (ties in the families' order), families with none left out.
pub fn crawler_counts(
    by_name: impl IntoIterator<Item = (&'static str, u64)>,
) -> Vec<(&'static str, u64)> {
    let mut all: Vec<_> = by_name.into_iter().filter(|&(_, n)| n > 0).collect();
    let order = |name: &str| crate::crawler::Crawler::names().position(|n| n == name);
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| order(a.0).cmp(&order(b.0))));
    all
}

/// A store's site-wide figures for a range (`GET /api/stats`): the parts
/// of [`Stats`] beyond the totals and the hourly quarantine.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteFigures {
    pub by_article: Vec<(ArticleId, crate::model::Quarantine)>,
    pub by_crawler: Vec<(&'static str, u64)>,
}

/// The site's traffic for the overview ([`Store::site_traffic`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteTraffic {
    /// Counted views a minute over the last [`TRAFFIC_MINUTES`] minutes
    /// (by event time), oldest first, `now`'s minute last.
    pub views_by_minute: Vec<u64>,
    /// Unique visitors of counted views in the last `hours` hours: the
    /// union of one HyperLogLog sketch an hour.
    pub visitors: u64,
}

/// Minutes [`SiteTraffic::views_by_minute`] covers.
pub const TRAFFIC_MINUTES: usize = 60;

impl SiteFigures {
    /// `stats` with these figures.
    pub fn into_stats(self, stats: Stats) -> Stats {
        Stats {
            quarantine_by_article: self.by_article,
            quarantine_by_crawler: self.by_crawler,
            ..stats
        }
    }
}
