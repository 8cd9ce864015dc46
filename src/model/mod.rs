//! The domain vocabulary shared by the gate, the stores, the scoring models
//! and the HTTP layer: validated identifiers, events, verdicts, article
//! metadata and ranking queries.
//!
//! Everything here is plain data. Validation happens once, at the edge
//! (`ArticleId::parse`, `RangeSpec::parse`), so that no later layer can be
//! handed a string that could forge a storage key.

use std::fmt;

use serde::{Deserialize, Serialize};

pub use crate::time::{HOUR, Timestamp, day_of, hour_of};

mod models;

pub use models::{
    CATEGORY_DAYS, Decay, Explain, ModelKind, ModelParams, RisingSpec, Scale, Trend,
    category_hours, f64_bits,
};

/// An integer as JSON Schema counts them: written `10056` or `10056.0`
/// (an integral number), within the range a double holds exactly.
pub fn integral(v: &serde_json::Value) -> Option<i64> {
    if let Some(i) = v.as_i64() {
        return Some(i);
    }
    let f = v.as_f64()?;
    (f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0).then_some(f as i64)
}

/// [`integral`] for an optional field (`null` is absent), for serde's
/// `deserialize_with`.
pub fn de_opt_integral<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => integral(&v)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom("expected an integer")),
    }
}

/// A validated article id: 1–64 characters of `[A-Za-z0-9_-]`.
///
/// 24 bytes; ids up to [`INLINE_ID_LEN`] characters are held inline (no
/// heap block per id or per copy of it), longer ones in an exact-size box.
#[derive(Clone, Deserialize)]
#[serde(try_from = "String")]
pub struct ArticleId(IdRepr);

/// The longest id held inline.
pub const INLINE_ID_LEN: usize = 22;

#[derive(Clone)]
enum IdRepr {
    Inline { len: u8, bytes: [u8; INLINE_ID_LEN] },
    Heap(Box<str>),
}

pub const MAX_ARTICLE_ID_LEN: usize = 64;

impl ArticleId {
    /// Validates a textual id.
    pub fn parse(s: &str) -> Result<Self, InvalidArticleId> {
        if s.is_empty()
            || s.len() > MAX_ARTICLE_ID_LEN
            || !s
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(InvalidArticleId);
        }
        Ok(ArticleId::new(s))
    }

    /// A numeric id, normalised to its decimal string.
    pub fn from_number(n: u64) -> Self {
        ArticleId::new(&n.to_string())
    }

    /// `s` is valid (checked by the callers above).
    fn new(s: &str) -> Self {
        ArticleId(match s.len() {
            len @ ..=INLINE_ID_LEN => {
                let mut bytes = [0; INLINE_ID_LEN];
                bytes[..len].copy_from_slice(s.as_bytes());
                IdRepr::Inline {
                    len: len as u8,
                    bytes,
                }
            }
            _ => IdRepr::Heap(s.into()),
        })
    }

    fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            IdRepr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            IdRepr::Heap(s) => s.as_bytes(),
        }
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            IdRepr::Inline { .. } => {
                std::str::from_utf8(self.as_bytes()).expect("ids are ASCII by construction")
            }
            IdRepr::Heap(s) => s,
        }
    }
}

/// Equality, order and hash are the text's (byte order is `str` order).
impl PartialEq for ArticleId {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for ArticleId {}

impl Ord for ArticleId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl PartialOrd for ArticleId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// As `str` hashes (its bytes, then the 0xff no UTF-8 text holds), without
/// re-checking the text.
impl std::hash::Hash for ArticleId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write(self.as_bytes());
        state.write_u8(0xff);
    }
}

/// As the text (a `String` field before), without a copy of it.
impl Serialize for ArticleId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl fmt::Debug for ArticleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for ArticleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TryFrom<String> for ArticleId {
    type Error = InvalidArticleId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        ArticleId::parse(&s)
    }
}

impl From<ArticleId> for String {
    fn from(id: ArticleId) -> String {
        id.as_str().to_owned()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("articleId must be 1-64 characters of [A-Za-z0-9_-], or a non-negative integer")]
pub struct InvalidArticleId;

/// What a reader did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    View,
    Dwell,
    Like,
    Comment,
    Favorite,
    Share,
}

impl EventType {
    pub const ALL: [EventType; 6] = [
        EventType::View,
        EventType::Dwell,
        EventType::Like,
        EventType::Comment,
        EventType::Favorite,
        EventType::Share,
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::View => "view",
            EventType::Dwell => "dwell",
            EventType::Like => "like",
            EventType::Comment => "comment",
            EventType::Favorite => "favorite",
            EventType::Share => "share",
        }
    }

    /// Whether repeats by one visitor on one article inside the dedupe
    /// window are duplicates. Dwell reports are additive by design (the
    /// tracker sends one every few seconds) and comments are distinct acts.
    pub fn deduplicated(self) -> bool {
        matches!(
            self,
            EventType::View | EventType::Like | EventType::Favorite | EventType::Share
        )
    }
}

/// The gate's decision for one event. Only `Counted` changes counters; the
/// others are tallied in quarantine by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Counted,
    Duplicate,
    RateLimited,
    Bot,
    Replayed,
}

impl Verdict {
    pub const ALL: [Verdict; 5] = [
        Verdict::Counted,
        Verdict::Duplicate,
        Verdict::RateLimited,
        Verdict::Bot,
        Verdict::Replayed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Counted => "counted",
            Verdict::Duplicate => "duplicate",
            Verdict::RateLimited => "rate_limited",
            Verdict::Bot => "bot",
            Verdict::Replayed => "replayed",
        }
    }

    /// Index into a quarantine tally array, `None` for `Counted`.
    pub fn quarantine_slot(self) -> Option<usize> {
        match self {
            Verdict::Counted => None,
            Verdict::Duplicate => Some(0),
            Verdict::RateLimited => Some(1),
            Verdict::Bot => Some(2),
            Verdict::Replayed => Some(3),
        }
    }
}

/// Quarantine tallies by reason, in `Verdict::quarantine_slot` order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quarantine(pub [u64; 4]);

impl Quarantine {
    pub fn add(&mut self, v: Verdict, n: u64) {
        if let Some(i) = v.quarantine_slot() {
            self.0[i] += n;
        }
    }
    pub fn merge(&mut self, other: &Quarantine) {
        for i in 0..4 {
            self.0[i] += other.0[i];
        }
    }
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

/// Verdict counts for a batch answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerdictCounts(pub [u64; 5]);

impl VerdictCounts {
    pub fn add(&mut self, v: Verdict) {
        self.0[v as usize] += 1;
    }
    pub fn get(&self, v: Verdict) -> u64 {
        self.0[v as usize]
    }
}

/// An event that passed validation and the stateless part of the gate.
///
/// Identities are already hashed: nothing here is a raw visitor id, IP or
/// user agent. `bot` is decided before the event reaches a store because
/// it needs no shared state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub kind: EventType,
    pub article: ArticleId,
    /// Keyed hash of the visitor id (or of IP + User-Agent with a daily salt).
    pub visitor: u128,
    /// Keyed hash of the client IP, the rate-limit key for floods.
    pub ip: u64,
    /// Event time: buckets and dedupe windows follow it.
    pub ts: Timestamp,
    /// Arrival time in milliseconds: rate limits follow it (unless
    /// trusted), and eventIds. The node's clock when the HTTP layer read
    /// it; a store gates on its own arrival clock, which never runs
    /// backward (the embedded store moves this onto its
    /// [`crate::clock::GateClock`] before gating and logging; Redis uses
    /// its own clock, docs/redis-keys.md, "Gate state").
    pub arrival_ms: i64,
    /// Keyed hash of the idempotency key, if any.
    pub event_id: Option<u128>,
    /// Dwell seconds for `dwell`, else 0.
    pub seconds: u32,
    /// Classified as a bot by user agent: its crawler family, else
    /// [`Crawler::NONE`] (`src/crawler.rs`).
    pub bot: crate::crawler::Crawler,
    /// Sent by a trusted backend: rate limits follow `ts`.
    pub trusted: bool,
    /// Keyed hash of the client address's network block (/24 for IPv4,
    /// /64 for IPv6: [`crate::gate::Identity::net_block`]), the review's
    /// evidence under `[review] mode = "suspicious"`; 0 when unknown (the
    /// mode is off, a trusted backend sent no `ip`, or an event logged
    /// before the field existed). Last, so older encodings end before it.
    pub net: u64,
}

impl Event {
    /// A view of `article` by `visitor` at `ts`, arriving then, from IP key
    /// 1, no eventId, not a bot, untrusted: the shape tests, benches and
    /// tools start from (`Event { trusted: true, ..Event::view(..) }`).
    pub fn view(article: ArticleId, visitor: u128, ts: Timestamp) -> Self {
        Event {
            kind: EventType::View,
            article,
            visitor,
            ip: 1,
            ts,
            arrival_ms: ts * 1000,
            event_id: None,
            seconds: 0,
            bot: crate::crawler::Crawler::NONE,
            trusted: false,
            net: 0,
        }
    }

    /// The bytes added to UV sketches for this visitor. Every store adds the
    /// same bytes, so sketches move between stores unchanged.
    pub fn visitor_element(&self) -> [u8; 16] {
        self.visitor.to_le_bytes()
    }

    /// Moves an event dated after its arrival (clients may be up to
    /// `max_future_secs` ahead) to its arrival time. Every store calls this
    /// before gating: a count must never land in an hour after the current
    /// one, or a window's counters would grow with time alone when that
    /// hour begins and the rankings' upper bounds would stop holding.
    pub fn clamp_to_arrival(&mut self) {
        self.ts = self.ts.min(self.arrival_ms.div_euclid(1000));
    }

    /// The time rate limits are measured on, in milliseconds.
    pub fn rate_clock_ms(&self) -> i64 {
        if self.trusted {
            self.ts.saturating_mul(1000)
        } else {
            self.arrival_ms
        }
    }
}

/// The outcome of one event, with the article's lifetime counters after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub verdict: Verdict,
    pub pv: u64,
    pub uv: u64,
}

/// Article metadata as sites set it (`PUT /api/articles/{id}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArticleMeta {
    pub title: Option<String>,
    pub url: Option<String>,
    pub author: Option<String>,
    pub category: Option<String>,
    pub kind: Option<String>,
    pub groups: Vec<String>,
    pub published_at: Timestamp,
    pub summary: Option<String>,
    pub cover: Option<String>,
}

/// Counters over some span (a window or the article's lifetime).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    pub pv: u64,
    pub uv: u64,
    pub likes: u64,
    pub comments: u64,
    pub favorites: u64,
    pub shares: u64,
    pub dwell_seconds: u64,
    pub dwell_reports: u64,
    /// Seed 003 votes. Always lifetime values, whatever the window: a vote
    /// is a property of the article, not of an hour.
    pub ups: u64,
    pub downs: u64,
}

impl Counters {
    pub fn avg_dwell_seconds(&self) -> f64 {
        if self.dwell_reports == 0 {
            0.0
        } else {
            self.dwell_seconds as f64 / self.dwell_reports as f64
        }
    }

    /// Whether anything was counted at all.
    pub fn is_active(&self) -> bool {
        self.pv + self.likes + self.comments + self.favorites + self.shares + self.dwell_reports > 0
    }
}

/// A seed 003 vote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VoteDirection {
    Up,
    Down,
}

/// What a vote did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum VoteOutcome {
    Counted {
        ups: u64,
        downs: u64,
        score: f64,
    },
    /// This user already voted on this article (409).
    AlreadyVoted,
    /// The article is older than the voting window (410).
    Closed,
    /// Down-votes are not enabled.
    DownVotesDisabled,
    UnknownArticle,
}

/// Everything `GET /api/articles/{id}` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ArticleView {
    pub id: ArticleId,
    pub meta: ArticleMeta,
    pub lifetime: Counters,
    pub quarantined: Quarantine,
    pub deleted: bool,
    /// Scores per model at `now`, over the default range of each model.
    pub scores: Vec<(ModelKind, f64)>,
}

/// The activity window of a ranking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RangeSpec {
    /// The current hour bucket and the `n - 1` before it.
    Hours(u32),
    /// Lifetime counters.
    All,
}

impl RangeSpec {
    pub const MAX_HOURS: u32 = 90 * 24;

    /// Parses `1h`…`2160h`, `1d`…`90d` or `all` (no leading zeros).
    pub fn parse(s: &str) -> Option<Self> {
        if s == "all" {
            return Some(RangeSpec::All);
        }
        // Split off the unit by character, not byte: any text may arrive.
        let (num, per_unit) = match (s.strip_suffix('h'), s.strip_suffix('d')) {
            (Some(num), _) => (num, 1),
            (None, Some(num)) => (num, 24),
            (None, None) => return None,
        };
        // Digits only, no leading zero (the OpenAPI pattern says the same).
        if num.is_empty()
            || num.len() > 4
            || num.starts_with('0')
            || !num.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let hours = num.parse::<u32>().ok()?.checked_mul(per_unit)?;
        (1..=Self::MAX_HOURS)
            .contains(&hours)
            .then_some(RangeSpec::Hours(hours))
    }

    /// The first hour bucket inside the window at `now`, `None` for `All`.
    pub fn first_hour(self, now: Timestamp) -> Option<i64> {
        self.hours(now).map(|h| *h.start())
    }

    /// The hour buckets inside the window at `now`, `None` for `All`.
    pub fn hours(self, now: Timestamp) -> Option<std::ops::RangeInclusive<i64>> {
        match self {
            RangeSpec::Hours(n) => Some(crate::time::last_hours(hour_of(now), n)),
            RangeSpec::All => None,
        }
    }

    pub fn contains_hour(self, hour: i64, now: Timestamp) -> bool {
        self.hours(now).is_none_or(|h| h.contains(&hour))
    }
}

impl fmt::Display for RangeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RangeSpec::All => f.write_str("all"),
            RangeSpec::Hours(h) => write!(f, "{h}h"),
        }
    }
}

/// Filters and paging of a ranking query, already validated.
#[derive(Debug, Clone, PartialEq)]
pub struct HotQuery {
    pub model: ModelKind,
    pub range: RangeSpec,
    pub offset: usize,
    pub limit: usize,
    pub category: Option<String>,
    pub kind: Option<String>,
    pub group: Option<String>,
    pub per_author: Option<usize>,
    pub cursor: Option<String>,
    pub explain: bool,
    /// The model's own parameters (`window`, `baseline`, `min`, `decay`,
    /// `halfLife`); only those the model reads count ([`ModelParams::of`]).
    pub params: ModelParams,
}

impl HotQuery {
    /// The first `limit` items of a ranking: no filters, no cursor.
    pub fn top(model: ModelKind, range: RangeSpec, limit: usize) -> Self {
        HotQuery {
            model,
            range,
            offset: 0,
            limit,
            category: None,
            kind: None,
            group: None,
            per_author: None,
            cursor: None,
            explain: false,
            params: ModelParams::default(),
        }
    }

    /// The range a ranking of this query covers: vote models rank every
    /// live article (one ranking whatever the range), rising its window.
    pub fn ranked_range(&self) -> RangeSpec {
        match self.model {
            ModelKind::Rising => RangeSpec::Hours(self.params.rising.window),
            m if m.lists_every_live_article() => RangeSpec::All,
            _ => self.range,
        }
    }

    /// What `GET /api/hot` asks without parameters: gravity over 72 h,
    /// the first 20 items. The ranking both stores build before `/readyz`
    /// says ready.
    pub fn default_page() -> Self {
        HotQuery::top(ModelKind::Gravity, RangeSpec::Hours(72), 20)
    }
}

/// One ranked item.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedItem {
    pub rank: usize,
    pub id: ArticleId,
    pub score: f64,
    pub counters: Counters,
    pub meta: ArticleMeta,
    pub explain: Option<Explain>,
}

/// A page of a ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct HotPage {
    pub items: Vec<RankedItem>,
    pub generated_at: Timestamp,
    /// Continues the same snapshot, if more items may follow.
    pub cursor: Option<String>,
}

/// Totals for `GET /api/stats`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub articles: u64,
    pub counted: u64,
    pub quarantined: Quarantine,
    /// Quarantine by hour bucket, oldest first, over the last `hours` hours.
    pub quarantine_by_hour: Vec<(i64, Quarantine)>,
    /// The range's held-back events of the articles with the most, by
    /// reason, most first (`crate::store::top_quarantined`).
    pub quarantine_by_article: Vec<(ArticleId, Quarantine)>,
    /// The range's events quarantined as `bot` by crawler family
    /// (`src/crawler.rs`), most first, families with none left out.
    pub quarantine_by_crawler: Vec<(&'static str, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn article_ids() {
        assert!(ArticleId::parse("abc-DEF_123").is_ok());
        assert!(ArticleId::parse(&"a".repeat(64)).is_ok());
        assert!(ArticleId::parse(&"a".repeat(65)).is_err());
        for bad in ["", "a b", "a:b", "{a}", "é", "a/b", "a\n"] {
            assert!(ArticleId::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(ArticleId::from_number(12345).as_str(), "12345");
    }

    /// Ids inline (up to 22 characters) and boxed (longer) read back as
    /// their text, compare and order as their text, and serialize as it.
    #[test]
    fn inline_and_boxed_ids_behave_as_their_text() {
        use std::hash::BuildHasher;
        let texts: Vec<String> = [1, 21, 22, 23, 64]
            .into_iter()
            .flat_map(|n| ["a".repeat(n), format!("{}b", "a".repeat(n - 1))])
            .collect();
        let ids: Vec<ArticleId> = texts.iter().map(|t| ArticleId::parse(t).unwrap()).collect();
        let hasher = std::hash::RandomState::new();
        for (t, id) in texts.iter().zip(&ids) {
            assert_eq!(id.as_str(), t);
            assert_eq!(id.to_string(), *t);
            assert_eq!(String::from(id.clone()), *t);
            assert_eq!(serde_json::to_string(id).unwrap(), format!("\"{t}\""));
            assert_eq!(
                postcard::to_stdvec(id).unwrap(),
                postcard::to_stdvec(t).unwrap()
            );
            assert_eq!(hasher.hash_one(id), hasher.hash_one(t), "{t}");
            for (u, other) in texts.iter().zip(&ids) {
                assert_eq!(id == other, t == u, "{t} == {u}");
                assert_eq!(id.cmp(other), t.cmp(u), "{t} cmp {u}");
            }
        }
        assert_eq!(std::mem::size_of::<ArticleId>(), 24);
    }

    #[test]
    fn integers_may_be_written_as_integral_numbers() {
        let v = |t: &str| integral(&serde_json::from_str(t).unwrap());
        assert_eq!(v("10056"), Some(10056));
        assert_eq!(v("10056.0"), Some(10056));
        assert_eq!(v("-3.0"), Some(-3));
        assert_eq!(v("1e3"), Some(1000));
        assert_eq!(v("1.5"), None);
        assert_eq!(v("1e300"), None);
        assert_eq!(v("\"1\""), None);
    }

    #[test]
    fn ranges() {
        assert_eq!(RangeSpec::parse("72h"), Some(RangeSpec::Hours(72)));
        assert_eq!(RangeSpec::parse("90d"), Some(RangeSpec::Hours(2160)));
        assert_eq!(RangeSpec::parse("1h"), Some(RangeSpec::Hours(1)));
        assert_eq!(RangeSpec::parse("all"), Some(RangeSpec::All));
        assert_eq!(RangeSpec::parse("2160h"), Some(RangeSpec::Hours(2160)));
        for bad in [
            "0h",
            "91d",
            "2161h",
            "h",
            "",
            "-1h",
            "1.5h",
            "72",
            "1w",
            "+1h",
            "é",
            "1é",
            "ééh",
            "\u{10FFFF}",
            "0d",
            "00000h",
            "99999d",
            "02160h",
            "072h",
            "01d",
        ] {
            assert_eq!(RangeSpec::parse(bad), None, "{bad}");
        }
        assert_eq!(RangeSpec::Hours(72).to_string(), "72h");
        assert_eq!(RangeSpec::Hours(5).to_string(), "5h");
        let now = 10 * HOUR + 5;
        assert!(RangeSpec::Hours(1).contains_hour(10, now));
        assert!(!RangeSpec::Hours(1).contains_hour(9, now));
        assert!(RangeSpec::Hours(2).contains_hour(9, now));
        assert!(!RangeSpec::Hours(2).contains_hour(11, now));
    }
}
