//! The Redis store: the same hotrank on Redis 6.2+/7, shared by many API
//! nodes.
//!
//! Every piece of state lives in Redis under one key prefix
//! (docs/redis-keys.md lists each key, its type, TTL and writer); an API
//! node keeps only caches that the shared change log invalidates. Any node
//! can therefore answer any request, continue any cursor, and a node can
//! die at any time without losing anything.
//!
//! - **Ingest** ([`ingest.lua`](ingest.lua)): one script call gates and
//!   counts up to `batch_events` events atomically, with the embedded
//!   store's verdict order and semantics; the batches of one request go out
//!   in one pipeline. No `PFCOUNT` runs on this path except for a single
//!   `POST /api/views`, whose answer carries the article's UV.
//! - **Rankings** ([`rank`]): sorted sets of upper bounds, kept exact at
//!   query time by the embedded store's threshold walk; articles changed
//!   since a ranking last looked are found through a change log (`changes`,
//!   a sorted set by change sequence number) that every write appends to
//!   inside its own script.
//! - **Cluster** (`cluster = true`): every key is tagged with the prefix
//!   (`{P}…`, [`Keys::tagged`]), so one site is one slot and every script
//!   and pipeline stays on one node; scripts declare their keys.
//! - **Outages**: a [`redis::aio::ConnectionManager`] reconnects by itself;
//!   until then every call fails fast with [`StoreError::Unavailable`]
//!   (503), and nothing is acknowledged that Redis did not apply.
//!
//! The files, one concern each (a newcomer can read them top down):
//!
//! - the call layers: `conn.rs` (the connection), `calls.rs` (pipelines
//!   and `EVALSHA`), `errors.rs` (Redis errors as [`StoreError`]s),
//!   `reply.rs` (reply decoding), `event_args.rs` (an event as script
//!   arguments), `scripts.rs` (the Lua scripts, assembled and loaded);
//! - the data: `keys.rs` (key names), `key_spec.rs` and `key_table.rs`
//!   (the documented table of every key), `meta.rs` (the metadata hash);
//! - the store: `connect.rs` (making one), `cache.rs` (a node's cache and
//!   the reads that fill it), `ingest.rs`, `article_ops.rs`,
//!   `article_view.rs`, `newest.rs`, the rankings (`rank.rs`, the walk;
//!   `changes.rs`, `claim.rs`, `writeback.rs`), export and import
//!   (`dump.rs`, `load.rs`), and `store_impl.rs`, the
//!   [`Store`](crate::store::Store) interface onto them.

#[macro_use]
mod event_args;

mod archive;
mod article_ops;
mod article_view;
mod cache;
mod calls;
mod categories;
mod changes;
mod claim;
mod conn;
mod connect;
pub use connect::ConnectError;
mod dump;
mod errors;
mod ingest;
mod key_spec;
mod key_table;
mod keys;
mod load;
mod marker;
mod meta;
mod newest;
mod ops;
mod past;
mod rank;
mod reply;
mod scripts;
mod seed;
mod site_stats;
pub mod slots;
mod split;
mod store_impl;
mod version;
mod warm;
mod writeback;

pub(crate) use archive::evicted_reply;
pub use conn::{Con, LazyCluster};
pub use dump::{article_records, dump_redis};
pub(crate) use dump::{positioned_records, quarantine_of};
pub use key_spec::{KeySpec, Slot, Ttl};
pub use key_table::{KEY_TABLE, key_spec_of, render_key_table};
pub use keys::{
    Keys, ShardKeys, day_of, oldest_hour, shard_chunk, shard_chunk_tagged, shard_of, window_plan,
};
pub use load::{LoadError, load_redis};
pub(crate) use marker::{Reconciled, fresh, reconcile, set_nx_get};
pub use meta::MetaRec;
pub use ops::{OpEntry, OpKind};
pub(crate) use ops::{OpRun, OpStamp};
pub use scripts::ingest_script;
pub use seed::{SEED_HOT_SCORE_SIZE, SEED_LAYOUT_LIMITS};
pub use split::{SWEEP_AFTER_SECS, SplitFault};

// The layers' names the other files of this module use (`super::X`).
pub(crate) use cache::{ActiveSets, Seqs};
pub(crate) use errors::store_err;
pub(crate) use event_args::{event_args, kind_char};
pub(crate) use meta::{meta_pairs, parse_meta};
pub(crate) use reply::{bad_reply, counters_from, sorted_ids, v_i64, v_str, verdict_of};
pub(crate) use scripts::{
    APPLY, COMMON, EPOCH_CHECK, EVENT, EVICTED, GATE, Scripts, TOTALS, chunks, ingest_script_with,
    script, sharded,
};

use parking_lot::Mutex;

use cache::NodeCache;

use crate::model::Timestamp;
use crate::store::{StoreError, StoreSettings};

/// How to reach Redis and how long to keep what.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisOptions {
    /// `redis://[user:password@]host:port/db` (no TLS).
    pub url: String,
    /// Prepended to every key, so several sites can share one Redis.
    pub prefix: String,
    /// Whole days (before today) hourly buckets are kept; older activity
    /// is kept in daily buckets until the retention ends.
    pub hourly_days: u32,
    /// Most events gated in one script call (Redis runs one script at a
    /// time: this bounds how long other clients wait).
    pub batch_events: usize,
    pub connect_timeout_ms: u64,
    pub response_timeout_ms: u64,
    /// `url` names seed nodes of a Redis Cluster (comma-separated): every
    /// key is hash-tagged with the prefix, so one site lives on one slot.
    pub cluster: bool,
    /// Replicas that must hold an ingest batch before it is acknowledged
    /// (`WAIT`): with 1, a primary killed right after an acknowledgement
    /// loses nothing its promoted replica does not have. 0: no wait.
    pub wait_replicas: u32,
    /// The seeds' own key layout (`[redis] layout = "seed"`, see seed.rs).
    pub seed_layout: bool,
    /// Seed layout: seconds between refreshes of `hot:score`.
    pub seed_refresh_secs: u64,
    /// Article shards (`[redis] shards`; [`Keys::shard`]): 1 keeps one
    /// change log, activity set per hour and ranking per query.
    pub shards: u32,
    /// A cluster's key names on one Redis (tests and tools only, no config
    /// setting): every key is named as on a cluster (hash tags, and with
    /// more than one shard the shards' own tags, [`Keys::tagged`]) and
    /// every script call declares its keys, but `url` is one redis-server,
    /// which has no slots: the sharded cluster layout runs there, and tests
    /// check where each of its keys would live and that no call crosses
    /// slots (docs/redis-keys.md, "One site over many primaries").
    pub cluster_names: bool,
    /// Tests only: where a split ingest stops (split.rs), to show that
    /// the sweeper counts what a node left behind.
    pub split_fault: SplitFault,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            url: "redis://127.0.0.1:6379/0".into(),
            prefix: String::new(),
            hourly_days: 7,
            batch_events: 250,
            connect_timeout_ms: 1000,
            response_timeout_ms: 2000,
            cluster: false,
            wait_replicas: 0,
            seed_layout: false,
            seed_refresh_secs: 60,
            shards: 1,
            cluster_names: false,
            split_fault: SplitFault::None,
        }
    }
}

impl RedisOptions {
    pub fn from_config(c: &crate::config::Config) -> Self {
        let r = &c.redis;
        RedisOptions {
            url: r.url.clone(),
            prefix: r.prefix.clone(),
            hourly_days: r.hourly_days,
            batch_events: r.batch_events,
            connect_timeout_ms: r.connect_timeout_ms,
            response_timeout_ms: r.response_timeout_ms,
            cluster: r.cluster,
            wait_replicas: r.wait_replicas,
            seed_layout: r.layout == crate::config::RedisLayout::Seed,
            seed_refresh_secs: r.seed_refresh_secs,
            shards: r.shards,
            cluster_names: false,
            split_fault: SplitFault::None,
        }
    }
}

pub use crate::config::valid_redis_prefix as valid_prefix;

pub struct RedisStore {
    con: Con,
    keys: Keys,
    opts: RedisOptions,
    pub(crate) settings: StoreSettings,
    scripts: Scripts,
    cache: Mutex<NodeCache>,
    last_gc: Mutex<Timestamp>,
    /// Set once `ready()` found every server new enough (version.rs).
    version_ok: std::sync::atomic::AtomicBool,
    /// Seed layout: when `hot:score` was last rewritten.
    last_seed_refresh: Mutex<Timestamp>,
    /// Where evicted articles are restored from (archive.rs).
    archive: std::sync::OnceLock<Box<dyn crate::store::dump::ArticleSource>>,
    /// Rankings kept ready off the query path (warm.rs).
    warm: warm::Warm,
    /// Rebuild claims this node could not give back (rank.rs).
    orphans: claim::Orphans,
    /// The site's epoch as this node knows it (marker.rs).
    marker: marker::Marker,
    /// Entries `GET /api/new` pages looked at ([`RedisStore::new_visited`]).
    new_visited: std::sync::atomic::AtomicU64,
    /// Set once `articles:new:by` is known filled (rank.rs `fill_facets`).
    facets_filled: tokio::sync::OnceCell<()>,
    /// The site's gate clock (gate_clock.lua) less this node's, in ms, as
    /// a gate call last told it: on a cluster, calls declare the gate
    /// slots around the gate clock (`ingest_keys`).
    gate_offset_ms: std::sync::atomic::AtomicI64,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.opts.prefix)
            .finish_non_exhaustive()
    }
}
