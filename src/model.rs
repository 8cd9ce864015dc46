//! The domain vocabulary shared by the gate, the stores, the scoring models
//! and the HTTP layer: validated identifiers, events, verdicts, article
//! metadata and ranking queries.
//!
//! Everything here is plain data. Validation happens once, at the edge
//! (`ArticleId::parse`, `RangeSpec::parse`), so that no later layer can be
//! handed a string that could forge a storage key.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Unix seconds.
pub type Timestamp = i64;

/// Seconds in one hourly bucket.
pub const HOUR: i64 = 3600;

/// The hour bucket (hours since the epoch) a timestamp falls into.
pub fn hour_of(ts: Timestamp) -> i64 {
    ts.div_euclid(HOUR)
}

/// A validated article id: 1–64 characters of `[A-Za-z0-9_-]`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ArticleId(String);

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
        Ok(ArticleId(s.to_owned()))
    }

    /// A numeric id, normalised to its decimal string.
    pub fn from_number(n: u64) -> Self {
        ArticleId(n.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ArticleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for ArticleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
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
        id.0
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
    /// Arrival time in milliseconds: rate limits follow it (unless trusted).
    pub arrival_ms: i64,
    /// Keyed hash of the idempotency key, if any.
    pub event_id: Option<u128>,
    /// Dwell seconds for `dwell`, else 0.
    pub seconds: u32,
    /// Classified as a bot by user agent.
    pub bot: bool,
    /// Sent by a trusted backend: rate limits follow `ts`.
    pub trusted: bool,
}

impl Event {
    /// The bytes added to UV sketches for this visitor. Every store adds the
    /// same bytes, so sketches move between stores unchanged.
    pub fn visitor_element(&self) -> [u8; 16] {
        self.visitor.to_le_bytes()
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
    pub scores: Vec<(crate::score::ModelKind, f64)>,
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

    /// Parses `1h`…`2160h`, `1d`…`90d` or `all`.
    pub fn parse(s: &str) -> Option<Self> {
        if s == "all" {
            return Some(RangeSpec::All);
        }
        let (num, unit) = s.split_at(s.len().checked_sub(1)?);
        if num.is_empty() || num.len() > 5 || !num.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: u32 = num.parse().ok()?;
        let hours = match unit {
            "h" => n,
            "d" => n.checked_mul(24)?,
            _ => return None,
        };
        (1..=Self::MAX_HOURS)
            .contains(&hours)
            .then_some(RangeSpec::Hours(hours))
    }

    /// The first hour bucket inside the window at `now`, `None` for `All`.
    pub fn first_hour(self, now: Timestamp) -> Option<i64> {
        match self {
            RangeSpec::Hours(n) => Some(hour_of(now) - i64::from(n) + 1),
            RangeSpec::All => None,
        }
    }

    pub fn contains_hour(self, hour: i64, now: Timestamp) -> bool {
        match self {
            RangeSpec::Hours(n) => {
                let last = hour_of(now);
                hour <= last && hour > last - i64::from(n)
            }
            RangeSpec::All => true,
        }
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
    pub model: crate::score::ModelKind,
    pub range: RangeSpec,
    pub offset: usize,
    pub limit: usize,
    pub category: Option<String>,
    pub kind: Option<String>,
    pub group: Option<String>,
    pub per_author: Option<usize>,
    pub cursor: Option<String>,
    pub explain: bool,
}

/// One ranked item.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedItem {
    pub rank: usize,
    pub id: ArticleId,
    pub score: f64,
    pub counters: Counters,
    pub meta: ArticleMeta,
    pub explain: Option<crate::score::Explain>,
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

    #[test]
    fn ranges() {
        assert_eq!(RangeSpec::parse("72h"), Some(RangeSpec::Hours(72)));
        assert_eq!(RangeSpec::parse("90d"), Some(RangeSpec::Hours(2160)));
        assert_eq!(RangeSpec::parse("1h"), Some(RangeSpec::Hours(1)));
        assert_eq!(RangeSpec::parse("all"), Some(RangeSpec::All));
        for bad in [
            "0h", "91d", "2161h", "h", "", "-1h", "1.5h", "72", "1w", "+1h",
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
