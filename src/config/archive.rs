//! The PostgreSQL archive's settings (`[archive]`).

use serde::{Deserialize, Serialize};

/// The PostgreSQL archive (`hotrank archive export|import`; see
/// docs/design.md, "Archive").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArchiveConfig {
    /// `postgres://[user[:password]@]host[:port]/db` (`HOTRANK_ARCHIVE_URL`);
    /// empty: no archive. TLS is not built in.
    pub url: String,
    /// The schema the archive's tables live in (created if missing):
    /// 1–63 of `[a-z0-9_]`, not starting with a digit.
    pub schema: String,
    /// Articles written (or read) per transaction.
    pub batch_articles: usize,
    /// Connections the archive opens at most.
    pub max_connections: u32,
    pub connect_timeout_ms: u64,
    /// With the Redis store, `serve` and `hotrank worker count` write every
    /// changed article to the archive this often (seconds; one node at a
    /// time); 0: never.
    pub flush_secs: u64,
    /// With a writer running: articles with no change (and no restore)
    /// for this long are dropped from Redis once the archive holds their
    /// latest state, and restored from it when needed (seconds; default
    /// 7 days; 0: never evict). docs/design.md, "Eviction and restore".
    pub evict_after_secs: u64,
}

impl Default for ArchiveConfig {
    fn default() -> Self {
        ArchiveConfig {
            url: String::new(),
            schema: "hotrank".into(),
            batch_articles: 500,
            max_connections: 4,
            connect_timeout_ms: 5000,
            flush_secs: 10,
            evict_after_secs: 7 * 86_400,
        }
    }
}

/// A PostgreSQL schema name the archive accepts unquoted.
pub fn valid_archive_schema(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && !s.as_bytes()[0].is_ascii_digit()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}
