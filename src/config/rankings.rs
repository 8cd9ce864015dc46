//! How long activity is kept and how many rankings are kept live
//! (`[retention]`, `[rankings]`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionConfig {
    /// Hourly activity is kept this many days (seed 000: 90).
    pub hourly_days: u32,
    /// Each ranking holds at most this many articles (seed 000: top 1000);
    /// it is also the deepest rank a query can reach.
    pub ranking_cap: usize,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            hourly_days: 90,
            ranking_cap: 1000,
        }
    }
}

/// How many rankings the server keeps live, and how it builds new ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RankingsConfig {
    /// Rankings (model × range × filters) kept indexed at once; asking for
    /// one more drops the least recently used (rebuilt when asked again).
    pub max_live: usize,
    /// Bytes the embedded store's rankings and window caches hold at most
    /// together (estimated; the `hotrank_ranking_bytes` gauge): past it the
    /// least recently used rankings are dropped, and past half of it for
    /// the window caches new windows are not cached. The default ranking
    /// and the ranking a query just used are kept whatever they hold: a
    /// ranking holds about 70 bytes per article active in its window.
    pub max_bytes: u64,
    /// Articles indexed at most per hold of the embedded store's lock
    /// while a new ranking is built (a hold also ends after about 1 ms):
    /// ingest waits for at most one chunk.
    pub build_chunk: usize,
    /// Each item's movement against the ranking an hour ago
    /// (`src/api/movement.rs`): costs a scan of every candidate once per
    /// ranking and hour; `false` answers `null` and scans nothing.
    pub movement: bool,
}

impl Default for RankingsConfig {
    fn default() -> Self {
        RankingsConfig {
            max_live: 64,
            max_bytes: 96 << 20,
            build_chunk: 2048,
            movement: true,
        }
    }
}
