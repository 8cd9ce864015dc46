//! The store-neutral dump that `hotrank export` writes and `hotrank import`
//! reads: JSON lines, one [`Record`] per line, so that all state moves
//! between the embedded store and Redis in either direction without
//! changing any count.
//!
//! UV sketches travel as their byte images (base64 of exactly what Redis
//! holds for the key, see [`crate::sketch`]); identities are the keyed
//! hashes the stores hold (hex), never raw ids, so a dump is only useful
//! together with the same `identity.key`: since version 2, `hotrank
//! export` carries that key in an [`Record::Identity`] line after the
//! header, and `hotrank import` installs it ([`crate::cli::transfer`]).
//!
//! Versions: 1 had no identity line; 2 may have one. Both import.

use std::io::{BufRead, Write};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use crate::model::{ArticleId, ArticleMeta, Timestamp};
use crate::sketch::Hll;
use crate::store::StoreError;

/// Format version of the first line.
pub const DUMP_VERSION: u32 = 2;

/// The oldest version [`read_records`] still reads.
pub const OLDEST_DUMP_VERSION: u32 = 1;

/// What [`ArticleSource::articles`] answers: a source that cannot be
/// read is [`StoreError::Unavailable`] (the store serves the article again
/// once it can).
pub type ArticleRecords<'a> =
    std::pin::Pin<Box<dyn Future<Output = Result<Vec<Record>, StoreError>> + Send + 'a>>;

/// Where a store brings evicted articles back from: the archive
/// ([`crate::archive`]), which keeps their state as records of this
/// format. A store holds one of these, not the archive itself.
pub trait ArticleSource: Send + Sync {
    /// The records of those of `ids` the source holds.
    fn articles<'a>(&'a self, ids: &'a [ArticleId]) -> ArticleRecords<'a>;
}

/// Counters of one bucket (an hour, a day) or of an article's lifetime.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DumpCounters {
    pub pv: u64,
    pub likes: u64,
    pub comments: u64,
    pub favorites: u64,
    pub shares: u64,
    pub dwell_seconds: u64,
    pub dwell_reports: u64,
    /// Quarantine tallies: duplicate, rate_limited, bot, replayed.
    pub quarantine: [u64; 4],
    /// Base64 of the UV sketch's byte image; empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uv: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DumpBucket {
    /// Hour (or day) since the epoch.
    pub at: i64,
    #[serde(flatten)]
    pub c: DumpCounters,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
// Articles dominate a dump anyway; boxing them buys nothing.
#[allow(clippy::large_enum_variant)]
pub enum Record {
    Header {
        version: u32,
        source: String,
    },
    /// The exporting site's `identity.key` (32 hex digits), which keyed
    /// every hash in the dump (version 2).
    Identity {
        key: String,
    },
    Article {
        id: ArticleId,
        meta: ArticleMeta,
        known: bool,
        deleted: bool,
        lifetime: DumpCounters,
        hours: Vec<DumpBucket>,
        /// Daily buckets (Redis keeps days past its hourly horizon); the
        /// embedded store has none and derives them on import to Redis.
        #[serde(default)]
        days: Vec<DumpBucket>,
        /// Seed 003 votes and, while voting is open, who voted.
        #[serde(default, skip_serializing_if = "DumpVotes::is_empty")]
        votes: DumpVotes,
    },
    Totals {
        counted: u64,
        quarantine: [u64; 4],
        by_hour: Vec<(i64, [u64; 4])>,
    },
    /// Last counted time of a (article, visitor, event kind) pair.
    Dedupe {
        article: ArticleId,
        kind: char,
        visitor: String,
        last: Timestamp,
    },
    /// An idempotency key and the arrival second it was seen.
    EventId {
        key: String,
        seen: Timestamp,
    },
    /// A rate limiter's log (admission times in ms, oldest first).
    Rate {
        scope: RateScope,
        key: String,
        log: Vec<i64>,
    },
}

/// An article's lifetime votes and its voter set (32 hex digits per user).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DumpVotes {
    pub ups: u64,
    pub downs: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub voters: Vec<String>,
}

impl DumpVotes {
    pub fn is_empty(&self) -> bool {
        self.ups == 0 && self.downs == 0 && self.voters.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateScope {
    Visitor,
    Ip,
}

pub fn hll_to_b64(h: &Hll) -> String {
    STANDARD.encode(h.as_bytes())
}

/// Why a dump cannot be written, read, or turned back into state.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error("writing the dump: {0}")]
    Write(#[source] std::io::Error),
    #[error("writing the dump: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("reading the dump: {0}")]
    Read(#[source] std::io::Error),
    /// A line that is not a record.
    #[error("dump line {line}: {source}")]
    Line {
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("line 1 must be a header of version {OLDEST_DUMP_VERSION} to {DUMP_VERSION}")]
    NoHeader,
    #[error("the dump is empty")]
    Empty,
    #[error("sketch is not base64: {0}")]
    NotBase64(#[source] base64::DecodeError),
    #[error("sketch is not a HyperLogLog: {0}")]
    NotHll(#[source] crate::sketch::HllError),
    #[error("{0:?} is not a hex identity")]
    NotHex(String),
    #[error("article {0} appears twice")]
    Duplicate(ArticleId),
    #[error("article {article}: voter {voter:?} is not 32 hex digits")]
    BadVoter { article: ArticleId, voter: String },
    #[error("unknown event kind in a dedupe entry")]
    UnknownKind,
    #[error("bucket {hour}: count too large")]
    CountTooLarge { hour: i64 },
    #[error("bucket {hour}: hour out of range")]
    HourOutOfRange { hour: i64 },
}

pub fn hll_from_b64(s: &str) -> Result<Hll, DumpError> {
    if s.is_empty() {
        return Ok(Hll::new());
    }
    let bytes = bytes_from_b64(s)?;
    Hll::from_bytes(&bytes).map_err(DumpError::NotHll)
}

pub fn bytes_from_b64(s: &str) -> Result<Vec<u8>, DumpError> {
    STANDARD.decode(s).map_err(DumpError::NotBase64)
}

pub fn parse_u128(s: &str) -> Result<u128, DumpError> {
    u128::from_str_radix(s, 16).map_err(|_| DumpError::NotHex(s.to_string()))
}

pub fn parse_u64(s: &str) -> Result<u64, DumpError> {
    u64::from_str_radix(s, 16).map_err(|_| DumpError::NotHex(s.to_string()))
}

/// Writes records as JSON lines.
pub fn write_records(
    out: &mut impl Write,
    records: impl IntoIterator<Item = Record>,
) -> Result<u64, DumpError> {
    let mut n = 0;
    for r in records {
        serde_json::to_writer(&mut *out, &r).map_err(DumpError::Encode)?;
        out.write_all(b"\n").map_err(DumpError::Write)?;
        n += 1;
    }
    out.flush().map_err(DumpError::Write)?;
    Ok(n)
}

/// Reads JSON lines; the first must be a header of a known version.
pub fn read_records(input: impl BufRead) -> Result<Vec<Record>, DumpError> {
    let mut out = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let line = line.map_err(DumpError::Read)?;
        if line.trim().is_empty() {
            continue;
        }
        let r: Record = serde_json::from_str(&line).map_err(|source| DumpError::Line {
            line: i + 1,
            source,
        })?;
        if out.is_empty() {
            match &r {
                Record::Header { version, .. }
                    if (OLDEST_DUMP_VERSION..=DUMP_VERSION).contains(version) => {}
                _ => return Err(DumpError::NoHeader),
            }
        }
        out.push(r);
    }
    if out.is_empty() {
        return Err(DumpError::Empty);
    }
    Ok(out)
}
