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

/// Format version of the first line.
pub const DUMP_VERSION: u32 = 2;

/// The oldest version [`read_records`] still reads.
pub const OLDEST_DUMP_VERSION: u32 = 1;

/// What [`ArticleSource::articles`] answers.
pub type ArticleRecords<'a> = std::pin::Pin<
    Box<
        dyn Future<Output = Result<Vec<Record>, Box<dyn std::error::Error + Send + Sync>>>
            + Send
            + 'a,
    >,
>;

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

pub fn hll_from_b64(s: &str) -> Result<Hll, String> {
    if s.is_empty() {
        return Ok(Hll::new());
    }
    let bytes = STANDARD
        .decode(s)
        .map_err(|e| format!("sketch is not base64: {e}"))?;
    Hll::from_bytes(&bytes).map_err(|e| format!("sketch is not a HyperLogLog: {e}"))
}

pub fn bytes_from_b64(s: &str) -> Result<Vec<u8>, String> {
    STANDARD
        .decode(s)
        .map_err(|e| format!("sketch is not base64: {e}"))
}

pub fn parse_u128(s: &str) -> Result<u128, String> {
    u128::from_str_radix(s, 16).map_err(|_| format!("{s:?} is not a hex identity"))
}

pub fn parse_u64(s: &str) -> Result<u64, String> {
    u64::from_str_radix(s, 16).map_err(|_| format!("{s:?} is not a hex identity"))
}

/// Writes records as JSON lines.
pub fn write_records(
    out: &mut impl Write,
    records: impl IntoIterator<Item = Record>,
) -> Result<u64, String> {
    let mut n = 0;
    for r in records {
        serde_json::to_writer(&mut *out, &r).map_err(|e| format!("writing the dump: {e}"))?;
        out.write_all(b"\n")
            .map_err(|e| format!("writing the dump: {e}"))?;
        n += 1;
    }
    out.flush().map_err(|e| format!("writing the dump: {e}"))?;
    Ok(n)
}

/// Reads JSON lines; the first must be a header of a known version.
pub fn read_records(input: impl BufRead) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let line = line.map_err(|e| format!("reading the dump: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let r: Record =
            serde_json::from_str(&line).map_err(|e| format!("dump line {}: {e}", i + 1))?;
        if out.is_empty() {
            match &r {
                Record::Header { version, .. }
                    if (OLDEST_DUMP_VERSION..=DUMP_VERSION).contains(version) => {}
                _ => {
                    return Err(format!(
                        "line 1 must be a header of version {OLDEST_DUMP_VERSION} to {DUMP_VERSION}"
                    ));
                }
            }
        }
        out.push(r);
    }
    if out.is_empty() {
        return Err("the dump is empty".into());
    }
    Ok(out)
}
