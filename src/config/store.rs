//! Where state lives (`store`) and the two stores' settings (`[embedded]`,
//! `[redis]`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    Embedded,
    Redis,
}

impl StoreKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Embedded => "embedded",
            StoreKind::Redis => "redis",
        }
    }
}

/// The Redis store (`store = "redis"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port/db` (`HOTRANK_REDIS_URL`).
    pub url: String,
    /// Prepended to every key, so several sites share one Redis
    /// (`HOTRANK_REDIS_PREFIX`); at most 64 of `[A-Za-z0-9_:.-]`.
    pub prefix: String,
    /// Whole days hourly buckets are kept (seed 001: 7); older activity is
    /// kept in daily buckets until `retention.hourly_days`.
    pub hourly_days: u32,
    /// Most events gated by one script call.
    pub batch_events: usize,
    pub connect_timeout_ms: u64,
    /// A call that takes longer fails (503) rather than hang.
    pub response_timeout_ms: u64,
    /// `url` names one or more seed nodes of a Redis Cluster
    /// (comma-separated; `--store redis-cluster`).
    pub cluster: bool,
    /// Replicas that must confirm an ingest batch (`WAIT`) before it is
    /// acknowledged; 0 (default) waits for none.
    pub wait_replicas: u32,
    /// Whose key layout (`HOTRANK_REDIS_LAYOUT`): `hotrank` (default) or
    /// `seed`: the seeds' own keys and member formats, so their code runs
    /// beside hotrank on one Redis (README, "Coming from a seed design").
    pub layout: RedisLayout,
    /// Seed layout: seconds between refreshes of seed 000's `hot:score`
    /// (the seed's 60–120 s).
    pub seed_refresh_secs: u64,
    /// Article shards of one site (`HOTRANK_REDIS_SHARDS`, default 1): the
    /// change log, activity sets, `articles:new` and every ranking are
    /// kept per shard and a ranking query walks them all
    /// (docs/redis-keys.md, "Article shards"). On a cluster each shard
    /// has its own slot, so one site spreads over several primaries
    /// (docs/redis-keys.md, "One site over many primaries"). Every node of
    /// a site must use the same number.
    pub shards: u32,
}

/// The Redis key layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RedisLayout {
    #[default]
    Hotrank,
    Seed,
}

impl Default for RedisConfig {
    fn default() -> Self {
        RedisConfig {
            url: "redis://127.0.0.1:6379/0".into(),
            prefix: String::new(),
            hourly_days: 7,
            batch_events: 250,
            connect_timeout_ms: 1000,
            response_timeout_ms: 2000,
            cluster: false,
            wait_replicas: 0,
            layout: RedisLayout::Hotrank,
            seed_refresh_secs: 60,
            shards: 1,
        }
    }
}

/// Most article shards one site may have (`redis.shards`).
pub const MAX_REDIS_SHARDS: u32 = 256;

/// A Redis key prefix may hold `[A-Za-z0-9_:.-]`, so that it never needs
/// escaping in a key or a `SCAN` pattern.
pub fn valid_redis_prefix(p: &str) -> bool {
    p.len() <= 64
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b':' | b'.' | b'-'))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsyncMode {
    /// Acknowledge after fsync (group commit). Survives power loss.
    Always,
    /// Acknowledge after write(2); fsync every `fsync_interval_ms`.
    /// Survives a process crash; a power loss can lose the last interval.
    Interval,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbeddedConfig {
    pub fsync: FsyncMode,
    pub fsync_interval_ms: u64,
    /// Take a snapshot after this many seconds with new log records.
    pub snapshot_interval_secs: u64,
    /// ... or after this many log records, whichever comes first.
    pub snapshot_every_records: u64,
    /// Log segment size before rotation.
    pub segment_bytes: u64,
}

impl Default for EmbeddedConfig {
    fn default() -> Self {
        EmbeddedConfig {
            fsync: FsyncMode::Always,
            fsync_interval_ms: 10,
            snapshot_interval_secs: 300,
            snapshot_every_records: 5_000_000,
            segment_bytes: 64 << 20,
        }
    }
}
