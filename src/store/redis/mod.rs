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

/// The 12 arguments of one event (`event.lua`) onto a `Cmd` or a script
/// invocation: the direct ingest script and the pipeline's streams carry
/// the same fields.
macro_rules! event_args {
    ($c:expr, $ev:expr) => {{
        let ev = $ev;
        $c.arg(kind_char(ev.kind))
            .arg(ev.article.as_str())
            .arg(format!("{:032x}", ev.visitor))
            .arg(&ev.visitor_element()[..])
            .arg(format!("{:016x}", ev.ip))
            .arg(ev.ts)
            .arg(ev.rate_clock_ms())
            .arg(ev.arrival_ms.div_euclid(1000))
            .arg(match ev.event_id {
                Some(k) => format!("{k:032x}"),
                None => String::new(),
            })
            .arg(ev.seconds)
            .arg(if ev.bot { "1" } else { "0" })
            .arg(if ev.trusted { "1" } else { "0" });
    }};
}
pub(crate) use event_args;

mod archive;
mod dump;
mod keys;
mod marker;
mod newest;
mod ops;
mod rank;
mod seed;
pub mod slots;
mod split;
mod version;
mod warm;

pub(crate) use archive::evicted_reply;
pub use dump::{article_records, dump_redis, load_redis};
pub(crate) use dump::{positioned_records, quarantine_of};
pub use keys::{
    KEY_TABLE, KeySpec, Keys, ShardKeys, Slot, Ttl, day_of, key_spec_of, oldest_hour,
    render_key_table, shard_chunk, shard_chunk_tagged, shard_of, window_plan,
};
pub(crate) use marker::{Reconciled, fresh, reconcile, set_nx_get};
pub use ops::{OpEntry, OpKind};
pub(crate) use ops::{OpRun, OpStamp};
pub use seed::{SEED_HOT_SCORE_SIZE, SEED_LAYOUT_LIMITS};
pub use split::{SWEEP_AFTER_SECS, SplitFault};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Script, Value};

use crate::model::{
    ArticleId, ArticleMeta, ArticleView, Counters, Event, EventType, HotPage, HotQuery, Outcome,
    Quarantine, RangeSpec, Stats, Timestamp, Verdict, VoteDirection, VoteOutcome, hour_of,
};
use crate::score::ModelKind;
use crate::store::{
    HourlyRow, IngestReject, Lifecycle, PutOutcome, Store, StoreError, StoreSettings, Voter,
};

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

/// Article ids from Redis members, sorted; members that are not ids are
/// dropped.
fn sorted_ids(members: &[String]) -> Vec<ArticleId> {
    let mut ids: Vec<ArticleId> = members
        .iter()
        .filter_map(|s| ArticleId::parse(s).ok())
        .collect();
    ids.sort();
    ids
}

struct Scripts {
    ingest: Script,
    window: Script,
    sync: Script,
    writeback: Script,
    put: Script,
    delete: Script,
    post: Script,
    vote: Script,
    /// A post over a site spread over slots: the id (site slot), then the
    /// article (its shard's slot).
    post_id: Script,
    post_at: Script,
    /// Ingest over a split site: the gate stage (site slot) and a count
    /// stage (a shard's slot), split.rs.
    gate_stage: Script,
    count_stage: Script,
    /// The same four on a pipeline node with a journal (ops.rs).
    journaled: ops::OpScripts,
}

/// A script with the key check (`declared.lua`) in front.
fn script(body: &str) -> Script {
    chunks(&[body])
}

/// [`chunks`] after the shard helpers of the site `keys` names (its
/// article shards and, on a cluster, its tag: `shard.lua`,
/// [`Keys::lua_chunk`]).
pub(crate) fn sharded(keys: &Keys, parts: &[&str]) -> Script {
    let head = keys.lua_chunk();
    let mut all = vec![head.as_str()];
    all.extend_from_slice(parts);
    chunks(&all)
}

/// One script from Lua chunks, concatenated in order after `declared.lua`:
/// a later chunk sees the locals of the earlier ones.
pub(crate) fn chunks(parts: &[&str]) -> Script {
    let mut src = String::from(include_str!("declared.lua"));
    for p in parts {
        src.push_str(p);
    }
    Script::new(&src)
}

/// The direct store's ingest script (one shard): its head (`ingest.lua`),
/// the gate, the counters and its reply, in one atomic call.
pub fn ingest_script() -> Script {
    ingest_script_with(&Keys::new(""), &[])
}

/// [`ingest_script`] for the site `keys` names (its shards and tag), with
/// more counter writes (`extra` chunks) after `apply.lua`: seed layout's
/// keys (seed.rs).
fn ingest_script_with(keys: &Keys, extra: &[&str]) -> Script {
    let mut parts = vec![
        EPOCH_CHECK,
        include_str!("ingest_epoch.lua"),
        "local GATE_STAGE = false\n",
        EVENT,
        include_str!("ingest.lua"),
        EVICTED,
        COMMON,
        GATE,
        APPLY,
        TOTALS,
    ];
    parts.extend_from_slice(extra);
    parts.push(include_str!("reply.lua"));
    sharded(keys, &parts)
}

/// One event from script arguments (`event.lua`).
pub(crate) const EVENT: &str = include_str!("event.lua");
/// The gate: reads, decides and writes gate state (`gate.lua`), on the
/// site's gate clock (`gate_clock.lua`).
pub(crate) const GATE: &str = concat!(include_str!("gate_clock.lua"), include_str!("gate.lua"));
/// The counters of gated events (`apply.lua`).
pub(crate) const APPLY: &str = include_str!("apply.lua");
/// The site's totals of gated events (`totals.lua`).
pub(crate) const TOTALS: &str = include_str!("totals.lua");
/// Refuses, before any write, a batch touching an evicted article
/// (`evicted.lua`).
pub(crate) const EVICTED: &str = include_str!("evicted.lua");
/// Helpers `GATE` and `APPLY` share (`common.lua`).
pub(crate) const COMMON: &str = include_str!("common.lua");
/// The epoch check of every write a node sends (`epoch.lua`, marker.rs).
pub(crate) const EPOCH_CHECK: &str = include_str!("epoch.lua");

impl Scripts {
    /// The scripts of the site `keys` names.
    fn new(keys: &Keys) -> Self {
        Scripts {
            ingest: ingest_script_with(keys, &[]),
            window: script(include_str!("window.lua")),
            sync: script(include_str!("sync.lua")),
            writeback: script(include_str!("writeback.lua")),
            put: ops::plain(keys, ops::OpKind::Put),
            post: ops::plain(keys, ops::OpKind::Post),
            vote: ops::plain(keys, ops::OpKind::Vote),
            delete: ops::plain(keys, ops::OpKind::Delete),
            post_id: script(include_str!("post_id.lua")),
            gate_stage: sharded(
                keys,
                &[
                    include_str!("gate_stage_pre.lua"),
                    EVENT,
                    include_str!("ingest.lua"),
                    COMMON,
                    GATE,
                    TOTALS,
                    include_str!("gate_stage.lua"),
                ],
            ),
            count_stage: sharded(
                keys,
                &[
                    include_str!("count_stage.lua"),
                    COMMON,
                    APPLY,
                    include_str!("count_stage_end.lua"),
                ],
            ),
            post_at: sharded(
                keys,
                &[
                    include_str!("facets.lua"),
                    include_str!("post_at.lua"),
                    include_str!("post_make.lua"),
                    include_str!("post_at_end.lua"),
                ],
            ),
            journaled: ops::OpScripts::new(keys),
        }
    }

    /// The names of [`Scripts::all`], in its order.
    const NAMES: [&'static str; 16] = [
        "ingest",
        "window",
        "sync",
        "writeback",
        "put",
        "delete",
        "post",
        "vote",
        "put (journaled)",
        "delete (journaled)",
        "post (journaled)",
        "vote (journaled)",
        "post: id",
        "post: article",
        "ingest: gate stage",
        "ingest: count stage",
    ];

    fn all(&self) -> [&Script; 16] {
        let j = &self.journaled;
        [
            &self.ingest,
            &self.window,
            &self.sync,
            &self.writeback,
            &self.put,
            &self.delete,
            &self.post,
            &self.vote,
            &j.put,
            &j.delete,
            &j.post,
            &j.vote,
            &self.post_id,
            &self.post_at,
            &self.gate_stage,
            &self.count_stage,
        ]
    }
}

/// An article's metadata as stored in `meta:article:<id>`.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaRec {
    pub meta: ArticleMeta,
    pub known: bool,
    pub deleted: bool,
}

/// What one node remembers between queries. An article's entry is valid
/// while no entry of its shard's change log newer than that shard's `seq`
/// names it.
#[derive(Default)]
struct NodeCache {
    /// The change seq of each shard this node has taken in.
    seq: Seqs,
    articles: HashMap<ArticleId, CachedArticle>,
}

/// One change seq per article shard, in shard order.
type Seqs = Vec<i64>;

#[derive(Default, Clone)]
struct CachedArticle {
    meta: Option<Option<Arc<MetaRec>>>,
    /// (range, end hour, counters)
    windows: Vec<(RangeSpec, i64, Counters)>,
}

/// Entries past this many per node are dropped wholesale.
const CACHE_MAX: usize = 200_000;

/// How long (ms) a pipeline may wait for a slot being moved
/// (`RedisStore::query_pipe`).
const SLOT_MOVE_WAIT_MS: u64 = 3000;

/// Whether `e` says the slot is being moved (it has a primary).
fn slot_moving(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    matches!(
        e.kind(),
        ErrorKind::Server(
            ServerErrorKind::Ask | ServerErrorKind::Moved | ServerErrorKind::TryAgain
        )
    )
}

/// Most articles one `window.lua` call reads: each script call has a
/// fixed cost in Redis and in the node, and a rebuild reads every article
/// of its ranking (100 k calls for 100 k articles, before).
const WINDOW_CALL: usize = 64;

/// The hours and the days of a window whose activity sets hold each
/// article: which of the window's buckets it has.
#[derive(Default)]
pub(super) struct ActiveSets {
    pub(super) hours: HashMap<ArticleId, Vec<i64>>,
    pub(super) days: HashMap<ArticleId, Vec<i64>>,
}

impl ActiveSets {
    /// Whether `id` is in any of the sets read.
    fn covers(&self, id: &ArticleId) -> bool {
        self.hours.contains_key(id) || self.days.contains_key(id)
    }

    /// `id`'s hours and days.
    fn spans(&self, id: &ArticleId) -> (&[i64], &[i64]) {
        let none: &[i64] = &[];
        (
            self.hours.get(id).map_or(none, Vec::as_slice),
            self.days.get(id).map_or(none, Vec::as_slice),
        )
    }
}

/// A connection to one Redis or to a Redis Cluster; both reconnect by
/// themselves. The cluster client follows `MOVED`/`ASK` and topology
/// changes; every pipeline this store sends touches one slot.
#[derive(Clone)]
pub enum Con {
    /// One redis-server; with a cluster's key names
    /// (`RedisOptions::cluster_names`), the log of calls a cluster would
    /// not run as one slot (slots.rs).
    One(ConnectionManager, Option<Arc<slots::SlotLog>>),
    Cluster(Arc<LazyCluster>),
}

/// A cluster connection made on first use (the store connects lazily: a
/// cluster that is down now is reached as soon as it is up).
pub struct LazyCluster {
    client: ClusterClient,
    con: tokio::sync::OnceCell<ClusterConnection>,
}

impl LazyCluster {
    async fn get(&self) -> redis::RedisResult<ClusterConnection> {
        self.con
            .get_or_try_init(|| self.client.get_async_connection())
            .await
            .cloned()
    }
}

impl Con {
    /// One `SCAN` step over keys matching `pattern`. On a cluster it asks
    /// the primary of `site_key`'s slot, where every key of the site is.
    pub async fn scan(
        &mut self,
        site_key: &str,
        cursor: u64,
        pattern: &str,
        count: usize,
    ) -> redis::RedisResult<(u64, Vec<String>)> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count);
        match self {
            Con::One(c, _) => cmd.query_async(c).await,
            Con::Cluster(l) => {
                use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
                let route = Route::with_key(site_key, SlotAddr::Master);
                let v = l
                    .get()
                    .await?
                    .route_command(
                        cmd,
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                    )
                    .await?;
                Ok(redis::from_redis_value(v)?)
            }
        }
    }
}

impl ConnectionLike for Con {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Con::One(c, log) => {
                if let Some(log) = log {
                    log.check(cmd);
                }
                c.req_packed_command(cmd)
            }
            Con::Cluster(l) => {
                Box::pin(async move { l.get().await?.req_packed_command(cmd).await })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Con::One(c, log) => {
                if let Some(log) = log {
                    log.check_pipeline(pipeline);
                }
                c.req_packed_commands(pipeline, offset, count)
            }
            Con::Cluster(l) => Box::pin(async move {
                l.get()
                    .await?
                    .req_packed_commands(pipeline, offset, count)
                    .await
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Con::One(c, _) => c.get_db(),
            Con::Cluster(_) => 0,
        }
    }
}

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
    orphans: rank::Orphans,
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

/// Maps a client error: the server unreachable, slow, loading, or
/// refusing writes it will take again (at `maxmemory` with `noeviction`:
/// OOM; unable to persist: MISCONF; a long script: BUSY), or a Redis that
/// lost the site's data (EPOCH, marker.rs) is `Unavailable` (503, retry;
/// nothing was written); anything else is a bug or a corrupt key.
pub(crate) fn store_err(e: redis::RedisError) -> StoreError {
    use redis::ServerErrorKind as S;
    tracing::debug!(error = %e, "redis call failed");
    let why = match server_code(&e).as_deref() {
        Some("OOM") => "Redis refuses writes: it is out of memory (maxmemory, noeviction)",
        Some("MISCONF") => "Redis refuses writes: it cannot persist to disk",
        Some("BUSY") => "Redis is busy running a script",
        Some("EPOCH") => "Redis lost this site's data (docs/design.md, \"Disaster recovery\")",
        _ => "",
    };
    if !why.is_empty() {
        return StoreError::Unavailable(format!("{why}: redis: {e}"));
    }
    let transient = e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || matches!(
            e.kind(),
            redis::ErrorKind::ClusterConnectionNotFound
                | redis::ErrorKind::Server(
                    S::BusyLoading
                        | S::TryAgain
                        | S::ClusterDown
                        | S::MasterDown
                        | S::ReadOnly
                        | S::Moved
                        | S::Ask
                )
        );
    if transient {
        StoreError::Unavailable(format!("redis: {e}"))
    } else {
        StoreError::Internal(format!("redis: {e}"))
    }
}

/// The server's error code of `e` (`OOM`, `MISCONF`, `EPOCH`, ...), also
/// when it failed a command of a pipeline, where the client's `code()`
/// answers only the kinds it knows.
fn server_code(e: &redis::RedisError) -> Option<String> {
    let code = e.code().map(str::to_string).or_else(|| {
        let errors = e.clone().into_server_errors()?;
        errors.first().map(|(_, s)| s.code().to_string())
    })?;
    if code == "ERR"
        && let Some(inner) = script_error_code(&e.to_string())
    {
        return Some(inner);
    }
    Some(code)
}

/// Redis 6 wraps the error a command gave inside a script in one of its
/// own: `ERR Error running script (call to f_…): @user_script:1:
/// @user_script: 1: -OOM command not allowed …`. The command's code, if
/// the text is such a wrapper.
fn script_error_code(text: &str) -> Option<String> {
    let rest = &text[text.find("Error running script")?..];
    let after = &rest[rest.find(": -")? + 3..];
    let code: String = after
        .chars()
        .take_while(|c| c.is_ascii_uppercase())
        .collect();
    (!code.is_empty()).then_some(code)
}

impl RedisStore {
    /// The site's gate clock now (ms; gate_clock.lua), read without moving
    /// it: the slots an import writes gate entries into. `None` when the
    /// gate follows the nodes' clocks.
    pub(crate) async fn gate_clock_ms(&self) -> Result<Option<i64>, StoreError> {
        static READ: std::sync::OnceLock<Script> = std::sync::OnceLock::new();
        let read = READ.get_or_init(|| {
            chunks(&[
                include_str!("gate_clock.lua"),
                "local c = gate_clock(ARGV[1])\nreturn c and c.at or false\n",
            ])
        });
        let mut con = self.con();
        (read.key(self.keys.gate_time()))
            .arg(&self.keys.prefix)
            .invoke_async(&mut con)
            .await
            .map_err(store_err)
    }

    /// Makes the site's gate follow its nodes' clocks, as it did before
    /// the gate clock: arrival is the node's, as sent. For tests that
    /// simulate time with a manual clock (the same suites run on both
    /// stores); never in a deployment, where nodes' clocks disagree and
    /// step back (docs/redis-keys.md, "Gate state").
    pub async fn gate_on_node_clocks(&self) -> Result<(), StoreError> {
        let mut con = self.con();
        redis::cmd("HSET")
            .arg(self.keys.gate_time())
            .arg("source")
            .arg("node")
            .query_async::<()>(&mut con)
            .await
            .map_err(store_err)
    }

    /// Whether `reply` is a gate call's `{ 'gateclock', <ms> }` (gate.lua:
    /// it declared the slots of a clock other than the site's gate clock,
    /// and wrote nothing); if so, the gate clock's offset from `now`, this
    /// node's clock, is learnt for the next calls.
    fn learnt_gate_clock(&self, reply: &Value, now: Timestamp) -> bool {
        let Value::Array(items) = reply else {
            return false;
        };
        if items.first().and_then(v_str) != Some("gateclock") {
            return false;
        }
        let Some(at) = items.get(1).and_then(v_i64) else {
            return false;
        };
        (self.gate_offset_ms).store(
            at.saturating_sub(now.saturating_mul(1000)),
            std::sync::atomic::Ordering::Relaxed,
        );
        true
    }
}

fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

pub(crate) fn v_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        Value::Double(d) => Some(*d as i64),
        _ => None,
    }
}

pub(crate) fn v_str(v: &Value) -> Option<&str> {
    match v {
        Value::BulkString(b) => std::str::from_utf8(b).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

pub(crate) fn bad_reply(what: &str) -> StoreError {
    StoreError::Internal(format!("redis: unexpected reply to {what}"))
}

/// Counters from the 10 integers `window.lua` returns.
fn counters_from(v: &[i64]) -> Counters {
    let g = |i: usize| v.get(i).copied().unwrap_or(0).max(0) as u64;
    Counters {
        pv: g(0),
        likes: g(1),
        comments: g(2),
        favorites: g(3),
        shares: g(4),
        dwell_seconds: g(5),
        dwell_reports: g(6),
        uv: g(7),
        ups: g(8),
        downs: g(9),
    }
}

pub(crate) fn kind_char(k: EventType) -> &'static str {
    match k {
        EventType::View => "v",
        EventType::Dwell => "d",
        EventType::Like => "l",
        EventType::Comment => "c",
        EventType::Favorite => "f",
        EventType::Share => "s",
    }
}

pub(crate) fn verdict_of(code: i64) -> Option<Verdict> {
    Some(match code {
        0 => Verdict::Counted,
        1 => Verdict::Duplicate,
        2 => Verdict::RateLimited,
        3 | 7 | 8 => Verdict::Bot,
        4 => Verdict::Replayed,
        _ => return None,
    })
}

const META_FIELDS: [&str; 7] = [
    "title", "url", "author", "category", "kind", "summary", "cover",
];

/// Parses an `HGETALL meta:article:<id>` reply; `None` if the hash is
/// missing.
pub(crate) fn parse_meta(fields: &HashMap<String, String>) -> Option<MetaRec> {
    let published_at = fields.get("publishedAt")?.parse().ok()?;
    let s = |k: &str| fields.get(k).cloned();
    let groups = fields
        .get("groups")
        .and_then(|g| serde_json::from_str::<Vec<String>>(g).ok())
        .unwrap_or_default();
    Some(MetaRec {
        meta: ArticleMeta {
            title: s("title"),
            url: s("url"),
            author: s("author"),
            category: s("category"),
            kind: s("kind"),
            groups,
            published_at,
            summary: s("summary"),
            cover: s("cover"),
        },
        known: fields.get("known").is_some_and(|v| v == "1"),
        deleted: fields.get("deleted").is_some_and(|v| v == "1"),
    })
}

/// Field/value pairs of a metadata hash, `publishedAt`, `known` and
/// `deleted` excluded.
pub(crate) fn meta_pairs(meta: &ArticleMeta) -> Vec<(String, String)> {
    let vals = [
        &meta.title,
        &meta.url,
        &meta.author,
        &meta.category,
        &meta.kind,
        &meta.summary,
        &meta.cover,
    ];
    let mut out: Vec<(String, String)> = META_FIELDS
        .iter()
        .zip(vals)
        .filter_map(|(k, v)| v.as_ref().map(|v| (k.to_string(), v.clone())))
        .collect();
    if !meta.groups.is_empty() {
        out.push((
            "groups".into(),
            serde_json::to_string(&meta.groups).unwrap_or_else(|_| "[]".into()),
        ));
    }
    out
}

/// The range each model's score in `GET /api/articles/{id}` uses.
fn default_range(m: ModelKind) -> RangeSpec {
    m.default_range()
}

impl RedisStore {
    /// A store on `opts.url`. Connects lazily: a Redis that is down now is
    /// reported by `ready()` and reached as soon as it is up. Call it
    /// inside a Tokio runtime (the connection task is spawned on it).
    pub fn connect(opts: RedisOptions, settings: StoreSettings) -> Result<Self, String> {
        if !valid_prefix(&opts.prefix) {
            return Err(format!(
                "redis.prefix {:?} is invalid: use at most 64 of [A-Za-z0-9_:.-]",
                opts.prefix
            ));
        }
        let connect = Duration::from_millis(opts.connect_timeout_ms);
        let respond = Duration::from_millis(opts.response_timeout_ms);
        if opts.seed_layout && (opts.cluster || opts.cluster_names) {
            return Err("redis.layout = \"seed\" needs one Redis, not a cluster".into());
        }
        if opts.shards == 0 || (opts.shards > 1 && opts.seed_layout) {
            return Err(format!(
                "redis.shards = {} is invalid here: more than one shard needs the hotrank layout (the seeds' keys have no shards)",
                opts.shards
            ));
        }
        let con = if opts.cluster {
            let seeds: Vec<&str> = opts.url.split(',').map(str::trim).collect();
            // Redirects and a failover (a replica promoted within seconds)
            // are retried inside the client, with waits that stay within
            // about one response timeout.
            let client = ClusterClient::builder(seeds)
                .connection_timeout(connect)
                .response_timeout(respond)
                .retries(6)
                .min_retry_wait(50)
                .max_retry_wait(500)
                .build()
                .map_err(|e| format!("redis.url {:?} is invalid: {e}", opts.url))?;
            Con::Cluster(Arc::new(LazyCluster {
                client,
                con: tokio::sync::OnceCell::new(),
            }))
        } else {
            let client = redis::Client::open(opts.url.as_str())
                .map_err(|e| format!("redis.url {:?} is invalid: {e}", opts.url))?;
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(connect))
                .set_response_timeout(Some(respond))
                .set_number_of_retries(1)
                .set_min_delay(Duration::from_millis(50))
                .set_max_delay(Duration::from_millis(500));
            Con::One(
                ConnectionManager::new_lazy_with_config(client, config)
                    .map_err(|e| format!("redis connection manager: {e}"))?,
                opts.cluster_names.then(Default::default),
            )
        };
        let seed_layout = opts.seed_layout;
        let shards = opts.shards;
        let keys = if opts.cluster || opts.cluster_names {
            Keys::tagged(&opts.prefix)
        } else if opts.seed_layout {
            Keys::seed(&opts.prefix)
        } else {
            Keys::new(&opts.prefix)
        }
        .with_shards(shards);
        let scripts = Scripts {
            // Seed layout: the counted events go into seeds 001/004's keys too.
            ingest: if seed_layout {
                seed::ingest_script()
            } else {
                ingest_script_with(&keys, &[])
            },
            ..Scripts::new(&keys)
        };
        if let Con::One(_, Some(log)) = &con {
            for (script, name) in scripts.all().into_iter().zip(Scripts::NAMES) {
                log.name_script(script.get_hash(), name);
            }
        }
        Ok(RedisStore {
            con,
            keys,
            opts,
            settings,
            scripts,
            cache: Mutex::new(NodeCache {
                seq: vec![0; shards as usize],
                ..NodeCache::default()
            }),
            last_gc: Mutex::new(i64::MIN / 2),
            version_ok: Default::default(),
            last_seed_refresh: Mutex::new(i64::MIN / 2),
            archive: std::sync::OnceLock::new(),
            warm: warm::Warm::default(),
            orphans: Default::default(),
            marker: Default::default(),
            new_visited: Default::default(),
            facets_filled: Default::default(),
            gate_offset_ms: Default::default(),
        })
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// With a cluster's key names on one Redis
    /// (`RedisOptions::cluster_names`): the calls so far that a cluster
    /// would not run as one slot (a script or command whose keys span
    /// slots, a pipeline over several), by script or command name.
    pub fn crossed_slots(&self) -> Vec<String> {
        match &self.con {
            Con::One(_, Some(log)) => log.crossed(),
            _ => Vec::new(),
        }
    }

    pub fn options(&self) -> &RedisOptions {
        &self.opts
    }

    /// A connection to this store's Redis (or cluster): tools and tests
    /// read keys through it.
    pub fn con(&self) -> Con {
        self.con.clone()
    }

    /// Seconds hourly buckets stay after their hour ends, and daily ones
    /// after their day ends (one day of margin each).
    pub(crate) fn keeps(&self) -> (i64, i64) {
        (
            (i64::from(self.opts.hourly_days) + 1) * keys::DAY,
            self.settings.retention_secs + keys::DAY,
        )
    }

    async fn load_scripts(&self) -> Result<(), StoreError> {
        let mut con = self.con();
        for s in self.scripts.all().into_iter().chain(archive::scripts()) {
            s.prepare_invoke()
                .load_async(&mut con)
                .await
                .map_err(store_err)?;
        }
        Ok(())
    }

    /// Runs a pipeline of `EVALSHA` calls built by `build`; loads the
    /// scripts and retries once on `NOSCRIPT` (a restarted or flushed
    /// server: nothing ran).
    async fn eval_pipe<T: redis::FromRedisValue>(
        &self,
        build: impl Fn(&mut redis::Pipeline),
    ) -> Result<T, StoreError> {
        let mut pipe = redis::pipe();
        build(&mut pipe);
        match self.query_pipe::<T>(&pipe).await {
            Ok(v) => Ok(v),
            Err(e) if is_noscript(&e) => {
                self.load_scripts().await?;
                self.query_pipe::<T>(&pipe).await.map_err(store_err)
            }
            Err(e) => Err(store_err(e)),
        }
    }

    /// `pipe`'s replies: one pipeline, or, when the site's keys span
    /// slots (shards on a cluster), one pipeline per slot run
    /// concurrently (slots.rs), the replies in command order. On a
    /// cluster, a pipeline that still meets a slot being moved after the
    /// client's own retries (`ASK`, `MOVED`, `TRYAGAIN`: a slot with many
    /// keys stays half-moved for seconds, and the client's `ASKING` covers
    /// only a pipeline's first command) is sent again every 100 ms for up
    /// to [`SLOT_MOVE_WAIT_MS`]: the slot has a primary, so this is no
    /// time to answer 503. Nothing in such a reply ran past the refused
    /// command, and every pipeline here may run twice (the client already
    /// re-sends whole pipelines: batch ids, markers, idempotent writes).
    async fn query_pipe<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> redis::RedisResult<T> {
        let mut waited = 0;
        loop {
            match self.query_pipe_once(pipe).await {
                Err(e) if self.opts.cluster && slot_moving(&e) && waited < SLOT_MOVE_WAIT_MS => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    waited += 100;
                }
                r => return r,
            }
        }
    }

    /// One try of [`query_pipe`](Self::query_pipe).
    async fn query_pipe_once<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> redis::RedisResult<T> {
        let mut con = self.con();
        if !self.keys.spans_slots() {
            return pipe.query_async::<T>(&mut con).await;
        }
        let got = slots::query_by_slot(&con, pipe).await?;
        Ok(T::from_redis_value(Value::Array(got))?)
    }

    /// One `EVALSHA` declaring `keys` (every key the script touches: on a
    /// cluster they route the call and keep it right while a slot moves).
    async fn eval<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        keys: &[String],
        args: &[&[u8]],
    ) -> Result<T, StoreError> {
        let mut v: Vec<T> = self
            .eval_pipe(|p| {
                let c = p.cmd("EVALSHA").arg(script.get_hash()).arg(keys.len());
                for k in keys {
                    c.arg(k.as_str());
                }
                for a in args {
                    c.arg(*a);
                }
            })
            .await?;
        v.pop().ok_or_else(|| bad_reply("EVALSHA"))
    }

    /// [`eval`](Self::eval) of `script` once per call (its keys and
    /// arguments), all in one pipeline: one reply per call, in order.
    async fn eval_each<T: redis::FromRedisValue, B: AsRef<[u8]>>(
        &self,
        script: &Script,
        calls: &[(Vec<B>, Vec<B>)],
    ) -> Result<Vec<T>, StoreError> {
        let got: Vec<T> = self
            .eval_pipe(|p| {
                for (keys, args) in calls {
                    let c = p.cmd("EVALSHA").arg(script.get_hash()).arg(keys.len());
                    for k in keys {
                        c.arg(k.as_ref());
                    }
                    for a in args {
                        c.arg(a.as_ref());
                    }
                }
            })
            .await?;
        if got.len() != calls.len() {
            return Err(bad_reply("EVALSHA"));
        }
        Ok(got)
    }

    /// The site's `clock` when the site spans slots (sync.lua then reads
    /// only its shard's slot), read after the change logs: at least the
    /// arrival of every change they held. `None` on one slot, where
    /// sync.lua reads it.
    async fn clock_after_sync(&self) -> Result<Option<i64>, StoreError> {
        if !self.keys.spans_slots() {
            return Ok(None);
        }
        let mut con = self.con();
        let clock: Option<i64> = redis::cmd("GET")
            .arg(self.keys.clock())
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        Ok(Some(clock.unwrap_or(0)))
    }

    /// Metadata of many articles, from this node's cache when valid.
    async fn metas(
        &self,
        ids: &[ArticleId],
        seq: &[i64],
    ) -> Result<Vec<Option<Arc<MetaRec>>>, StoreError> {
        let mut out: Vec<Option<Option<Arc<MetaRec>>>> = {
            let c = self.cache.lock();
            ids.iter()
                .map(|id| c.articles.get(id).and_then(|a| a.meta.clone()))
                .collect()
        };
        let missing: Vec<usize> = (0..ids.len()).filter(|&i| out[i].is_none()).collect();
        for missing in missing.chunks(rank::CHUNK) {
            let mut pipe = redis::pipe();
            for &i in missing {
                pipe.hgetall(self.keys.meta(&ids[i]));
            }
            let got: Vec<HashMap<String, String>> =
                self.query_pipe(&pipe).await.map_err(store_err)?;
            let mut c = self.cache.lock();
            let fill = c.seq == seq && c.articles.len() < CACHE_MAX;
            for (&i, fields) in missing.iter().zip(got) {
                let m = parse_meta(&fields).map(Arc::new);
                if fill {
                    c.articles.entry(ids[i].clone()).or_default().meta = Some(m.clone());
                }
                out[i] = Some(m);
            }
        }
        Ok(out.into_iter().map(Option::flatten).collect())
    }

    /// Counters of many articles over `range` at `now`, from this node's
    /// cache when valid, else from Redis: per chunk of articles, one
    /// pipelined read of the window's activity sets, then one of the
    /// buckets they name.
    async fn windows(
        &self,
        ids: &[ArticleId],
        range: RangeSpec,
        now: Timestamp,
        seq: &[i64],
    ) -> Result<Vec<Counters>, StoreError> {
        self.windows_known(ids, range, now, seq, None).await
    }

    /// [`Self::windows`], with the window's activity sets already read
    /// for the articles `known` covers (a rebuild reads them whole).
    pub(super) async fn windows_known(
        &self,
        ids: &[ArticleId],
        range: RangeSpec,
        now: Timestamp,
        seq: &[i64],
        known: Option<&ActiveSets>,
    ) -> Result<Vec<Counters>, StoreError> {
        let end_hour = hour_of(now);
        let mut out: Vec<Option<Counters>> = {
            let c = self.cache.lock();
            ids.iter()
                .map(|id| {
                    c.articles.get(id).and_then(|a| {
                        a.windows
                            .iter()
                            .find(|(r, h, _)| *r == range && *h == end_hour)
                            .map(|(_, _, w)| *w)
                    })
                })
                .collect()
        };
        let missing: Vec<usize> = (0..ids.len()).filter(|&i| out[i].is_none()).collect();
        let plan = window_plan(range, now, self.opts.hourly_days);
        for missing in missing.chunks(rank::CHUNK) {
            let wanted: Vec<ArticleId> = missing.iter().map(|&i| ids[i].clone()).collect();
            self.restore_if_evicted(&wanted, now).await?;
            // Which of the window's buckets each article has: those of the
            // activity sets that hold it (ingest writes both in one call),
            // so an article active in 2 hours of 72 reads 2 buckets.
            let active = match &plan {
                None => None,
                Some(plan) => {
                    let unread: Vec<ArticleId> = (wanted.iter())
                        .filter(|id| !known.is_some_and(|k| k.covers(id)))
                        .cloned()
                        .collect();
                    Some(
                        dump::active_over(self, &unread, plan.hours.clone(), plan.days.clone())
                            .await?,
                    )
                }
            };
            let spans = |id: &ArticleId| match known.filter(|k| k.covers(id)) {
                Some(k) => k.spans(id),
                None => active.as_ref().map_or((&[][..], &[][..]), |a| a.spans(id)),
            };
            // Articles by slot (their shard's, when the site spans slots),
            // at most [`WINDOW_CALL`] to a `window.lua` call.
            let mut order = missing.to_vec();
            if self.keys.spans_slots() {
                order.sort_by_key(|&i| self.keys.shard_index(&ids[i]));
            }
            let got: Vec<Vec<i64>> = self
                .eval_pipe(|p| {
                    let mut at = 0;
                    while at < order.len() {
                        let k = self.keys.shard_index(&ids[order[at]]);
                        let len = order[at..]
                            .iter()
                            .take(WINDOW_CALL)
                            .take_while(|&&i| self.keys.shard_index(&ids[i]) == k)
                            .count();
                        let call: Vec<&ArticleId> =
                            order[at..at + len].iter().map(|&i| &ids[i]).collect();
                        at += len;
                        let spans = active
                            .as_ref()
                            .map(|_| call.iter().map(|id| spans(id)).collect());
                        self.queue_window(p, &call, spans);
                    }
                })
                .await?;
            let flat: Vec<i64> = got.concat();
            if flat.len() != 10 * order.len() {
                return Err(bad_reply("window"));
            }
            let mut c = self.cache.lock();
            let fill = c.seq == seq && c.articles.len() < CACHE_MAX;
            for (&i, v) in order.iter().zip(flat.chunks(10)) {
                let w = counters_from(v);
                if fill {
                    let a = c.articles.entry(ids[i].clone()).or_default();
                    a.windows.retain(|(r, _, _)| *r != range);
                    a.windows.push((range, end_hour, w));
                }
                out[i] = Some(w);
            }
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// Takes in what every shard's change log says changed: drops cached
    /// state of those articles (all of it if this node fell behind a log).
    fn absorb(&self, shards: &[rank::Synced]) {
        let mut c = self.cache.lock();
        let behind = shards.iter().any(|s| {
            let mine = c.seq.get(s.shard as usize).copied().unwrap_or(0);
            s.truncated || mine < s.floor || s.seq < mine
        });
        if behind || c.articles.len() >= CACHE_MAX || c.seq.len() != shards.len() {
            c.articles.clear();
        } else {
            for s in shards {
                let since = c.seq[s.shard as usize];
                for (id, at) in &s.changed {
                    if *at > since {
                        c.articles.remove(id);
                    }
                }
            }
        }
        c.seq = shards.iter().map(|s| s.seq).collect();
    }

    /// Every shard's current change seq, with this node's cache brought up
    /// to them.
    async fn sync_node(&self) -> Result<Seqs, StoreError> {
        let s = self.sync(None).await?;
        Ok(s.iter().map(|s| s.seq).collect())
    }

    /// Every key one ingest.lua call over `part` may touch (a superset:
    /// the script's `K()` refuses any other).
    fn ingest_keys(&self, part: &[Event], batch_id: &str, now: Timestamp) -> Vec<String> {
        let k = &self.keys;
        let s = &self.settings;
        let mut keys = std::collections::BTreeSet::new();
        let families = [
            ("gate:eid", i64::from(s.event_id_ttl_secs).max(1)),
            ("gate:rl:v", 120),
            ("gate:rl:ip", 120),
            ("gate:bot", i64::from(s.bot_quarantine_secs).max(60)),
        ];
        // The gate reads the gate clock's slot and the one before: those
        // of the clock as last learnt, give or take a slot for the time
        // since (a call that finds its slots missing answers `gateclock`).
        let gate_now = (now.saturating_mul(1000))
            .saturating_add(
                self.gate_offset_ms
                    .load(std::sync::atomic::Ordering::Relaxed),
            )
            .div_euclid(1000);
        for (name, secs) in families {
            let slot = gate_now.div_euclid(secs);
            for s in slot - 2..=slot + 1 {
                keys.insert(k.gate_slot(name, s));
            }
        }
        for name in [
            k.batch(batch_id),
            k.clock(),
            k.gate_time(),
            k.counted(),
            k.quarantine(),
            k.epoch(),
        ] {
            keys.insert(name);
        }
        for name in ["stats:articles", "archive:dirty", "archive:evicted"] {
            keys.extend(k.ledgers(name));
        }
        for ev in part {
            let a = &ev.article;
            let (hour, day) = (hour_of(ev.ts), day_of(ev.ts));
            if matches!(
                ev.kind,
                EventType::View | EventType::Like | EventType::Favorite | EventType::Share
            ) {
                let kind = kind_char(ev.kind).chars().next().unwrap_or('v');
                keys.insert(k.dedupe(a, kind, ev.visitor));
            }
            let sk = k.of(a);
            for name in [
                k.meta(a),
                k.views(a),
                k.uv(a),
                k.counters(a),
                k.bucket_h(a, hour),
                k.uv_h(a, hour),
                k.bucket_d(a, day),
                k.uv_d(a, day),
                sk.active_h(hour),
                sk.active_d(day),
                sk.newest(),
                sk.changes_seq(),
                sk.changes(),
                k.quarantine_h(hour),
            ] {
                keys.insert(name);
            }
        }
        keys.into_iter().collect()
    }

    /// Lifetime counters and quarantine of one article.
    /// `GET /api/articles/{id}` from hotrank's own keys.
    async fn article_own(
        &self,
        id: &ArticleId,
        now: Timestamp,
    ) -> Result<Option<ArticleView>, StoreError> {
        let seq = self.sync_node().await?;
        let Some(Some(m)) = self.metas(std::slice::from_ref(id), &seq).await?.pop() else {
            return Ok(None);
        };
        if m.deleted {
            return Ok(None);
        }
        self.restore_if_evicted(std::slice::from_ref(id), now)
            .await?;
        let (lifetime, quarantined) = self.lifetime(id).await?;
        let mut scores = Vec::new();
        for model in ModelKind::ALL {
            let range = default_range(model);
            let c = self
                .windows(std::slice::from_ref(id), range, now, &seq)
                .await?;
            let c = c.first().copied().unwrap_or_default();
            scores.push((model, self.settings.models.score(model, &c, &m.meta, now)));
        }
        Ok(Some(ArticleView {
            id: id.clone(),
            meta: m.meta.clone(),
            lifetime,
            quarantined,
            deleted: false,
            scores,
        }))
    }

    /// `delete.lua` on article `id`, run as `run` says (ops.rs).
    pub(crate) async fn delete_run(
        &self,
        id: &ArticleId,
        run: &ops::OpRun<'_>,
    ) -> Result<(bool, Option<ops::OpStamp>), StoreError> {
        let (k, sk) = (&self.keys, self.keys.of(id));
        let keys = [
            k.meta(id),
            sk.newest(),
            sk.newest_by(),
            sk.changes_seq(),
            sk.changes(),
            k.ledger(id, "archive:dirty"),
        ];
        let (done, stamp): (i64, _) = self
            .op_eval(
                ops::OpKind::Delete,
                &keys,
                &[self.keys.prefix.as_bytes(), id.as_str().as_bytes()],
                run,
            )
            .await?;
        Ok((done == 1, stamp))
    }

    /// The outcomes of `n` events from ingest replies (verdict, PV, UV per
    /// event), with the gate's metrics.
    #[allow(clippy::type_complexity)]
    fn outcomes(
        &self,
        replies: Vec<Value>,
        n: usize,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError> {
        let mut out = Vec::with_capacity(n);
        let (mut refused, mut behaviour) = (0u64, [0u64; 2]);
        for r in replies {
            let r: Vec<i64> = redis::from_redis_value(r).map_err(|_| bad_reply("ingest"))?;
            for t in r.chunks(3) {
                let [code, pv, uv] = t else {
                    return Err(bad_reply("ingest"));
                };
                out.push(match verdict_of(*code) {
                    Some(verdict) => {
                        if *code >= 7 {
                            behaviour[0] += 1;
                            behaviour[1] += u64::from(*code == 8);
                        }
                        Ok(Outcome {
                            verdict,
                            pv: (*pv).max(0) as u64,
                            uv: (*uv).max(0) as u64,
                        })
                    }
                    None if *code == 5 => Err(IngestReject::UnknownArticle),
                    None if *code == 6 => {
                        refused += 1;
                        Err(IngestReject::TooManyArticles)
                    }
                    None => return Err(bad_reply("ingest")),
                });
            }
        }
        if out.len() != n {
            return Err(bad_reply("ingest"));
        }
        crate::store::gate_metrics::record(refused, behaviour[0], behaviour[1]);
        Ok(out)
    }

    /// One `window.lua` call onto `p` for `ids`: over the window's
    /// buckets each article has (`spans`: per article, the hours and days
    /// whose activity sets hold it), or, without a window, over their
    /// lifetimes.
    fn queue_window(
        &self,
        p: &mut redis::Pipeline,
        ids: &[&ArticleId],
        spans: Option<Vec<(&[i64], &[i64])>>,
    ) {
        let c = p.cmd("EVALSHA").arg(self.scripts.window.get_hash());
        let Some(spans) = spans else {
            c.arg(3 * ids.len());
            for id in ids {
                c.arg(self.keys.views(id))
                    .arg(self.keys.counters(id))
                    .arg(self.keys.uv(id));
            }
            c.arg("a").arg(ids.len());
            return;
        };
        c.arg(
            spans
                .iter()
                .map(|(h, d)| 2 * (h.len() + d.len()) + 1)
                .sum::<usize>(),
        );
        for (id, &(hours, days)) in ids.iter().zip(&spans) {
            for &h in hours {
                c.arg(self.keys.bucket_h(id, h));
            }
            for &d in days {
                c.arg(self.keys.bucket_d(id, d));
            }
            for &h in hours {
                c.arg(self.keys.uv_h(id, h));
            }
            for &d in days {
                c.arg(self.keys.uv_d(id, d));
            }
            c.arg(self.keys.counters(id));
        }
        c.arg("w").arg(ids.len());
        for (h, d) in &spans {
            c.arg(h.len() + d.len());
        }
    }

    async fn lifetime(&self, id: &ArticleId) -> Result<(Counters, Quarantine), StoreError> {
        let got: Vec<Value> = self
            .eval_pipe(|p| {
                self.queue_window(p, &[id], None);
                p.cmd("HMGET")
                    .arg(self.keys.counters(id))
                    .arg(&["q_dup", "q_rl", "q_bot", "q_rep"]);
            })
            .await?;
        let [Value::Array(c), Value::Array(q)] = got.as_slice() else {
            return Err(bad_reply("lifetime"));
        };
        let c: Vec<i64> = c.iter().map(|v| v_i64(v).unwrap_or(0)).collect();
        let mut quarantine = Quarantine::default();
        for (i, v) in q.iter().enumerate().take(4) {
            quarantine.0[i] = v_i64(v).unwrap_or(0).max(0) as u64;
        }
        Ok((counters_from(&c), quarantine))
    }
}

#[async_trait]
impl Store for RedisStore {
    async fn ingest(
        &self,
        mut events: Vec<Event>,
        now: Timestamp,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        events.iter_mut().for_each(Event::clamp_to_arrival);
        let s = &self.settings;
        let with_counts = events.len() == 1;
        let (hkeep, dkeep) = self.keeps();
        let header: Vec<String> = vec![
            self.keys.prefix.clone(),
            now.to_string(),
            s.dedupe_window_secs.to_string(),
            s.visitor_limit_per_minute.to_string(),
            s.ip_limit_per_minute.to_string(),
            s.event_id_ttl_secs.to_string(),
            hkeep.to_string(),
            dkeep.to_string(),
            if with_counts { "1" } else { "0" }.into(),
            if s.require_known_articles { "1" } else { "0" }.into(),
            s.max_articles.to_string(),
            s.bot_articles_per_minute.to_string(),
            (u64::from(s.bot_quarantine_secs) * 1000).to_string(),
        ];
        let sha = self.scripts.ingest.get_hash();
        let chunk = self.opts.batch_events.max(1);
        // One id per script call: a call retried after a lost reply returns
        // the first call's verdicts and applies nothing again.
        let ids: Vec<String> = events
            .chunks(chunk)
            .map(|_| format!("{:032x}", rand::random::<u128>()))
            .collect();
        let parts: Vec<&[Event]> = events.chunks(chunk).collect();
        // Only while Redis holds the site's epoch (marker.rs): over one
        // slot ingest_epoch.lua checks it in the same call.
        let (epoch_key, epoch) = self.script_epoch().await?;
        // Over a split site: a gate stage, then a count stage per shard
        // (split.rs).
        if self.keys.spans_slots() {
            let mut replies = Vec::with_capacity(parts.len());
            for (part, batch) in parts.iter().zip(&ids) {
                replies.push(
                    self.ingest_over_slots(&header, batch, part, now, with_counts)
                        .await?,
                );
            }
            return self.outcomes(replies, events.len());
        }
        // On a cluster each call declares every key it may touch (one slot:
        // the site's tag); on one Redis it declares none, which saves
        // sending ~8 names per event.
        // (Named at each send: a call sent again after a `gateclock`
        // answer declares the gate slots of the clock it learnt.)
        let declare = self.opts.cluster || self.opts.cluster_names;
        let call = |p: &mut redis::Pipeline, i: usize| {
            let keys = if declare {
                self.ingest_keys(parts[i], &ids[i], now)
            } else {
                Vec::new()
            };
            let c = p.cmd("EVALSHA").arg(sha).arg(keys.len());
            for k in &keys {
                c.arg(k.as_str());
            }
            c.arg(epoch_key.as_str()).arg(epoch.as_str());
            for h in &header {
                c.arg(h.as_str());
            }
            c.arg(ids[i].as_str()).arg(parts[i].len());
            for ev in parts[i] {
                event_args!(c, ev);
            }
        };
        // In the same pipeline, so on the same node: the batch is on
        // that many replicas before it is acknowledged.
        let wait = |p: &mut redis::Pipeline| {
            if self.opts.wait_replicas > 0 {
                p.cmd("WAIT")
                    .arg(self.opts.wait_replicas)
                    .arg(self.opts.response_timeout_ms / 2);
            }
        };
        let build = |p: &mut redis::Pipeline| {
            for i in 0..parts.len() {
                call(p, i);
            }
            wait(p);
        };
        let mut replies: Vec<Value> = match self.eval_pipe(&build).await {
            Err(StoreError::Unavailable(first)) => {
                // The connection broke: some calls may have run. Their ids
                // make the retry safe; it answers what ran and runs the rest.
                tokio::time::sleep(Duration::from_millis(100)).await;
                self.eval_pipe(&build).await.map_err(|e| match e {
                    StoreError::Unavailable(_) => StoreError::Unavailable(first),
                    e => e,
                })?
            }
            r => r?,
        };
        let replicated = |replies: &mut Vec<Value>| {
            if self.opts.wait_replicas > 0 {
                let acked = replies.pop().as_ref().and_then(v_i64).unwrap_or(0);
                if acked < i64::from(self.opts.wait_replicas) {
                    // Applied on the primary, maybe not on a replica: not
                    // acknowledged. A retry is safe (eventIds, batch ids).
                    return Err(StoreError::Unavailable(format!(
                        "redis: {acked} of {} replicas confirmed the batch",
                        self.opts.wait_replicas
                    )));
                }
            }
            Ok(())
        };
        replicated(&mut replies)?;
        // Calls that found an evicted article, or declared the gate slots
        // of a clock other than the gate's, wrote nothing: restore those
        // articles from the archive, learn the gate clock, and send the
        // same calls again (a concurrent eviction can only race a few
        // times).
        for _ in 0..4 {
            let again: Vec<usize> = (0..replies.len())
                .filter(|&i| {
                    archive::evicted_reply(&replies[i]).is_some()
                        || self.learnt_gate_clock(&replies[i], now)
                })
                .collect();
            if again.is_empty() {
                break;
            }
            let mut gone: Vec<ArticleId> = again
                .iter()
                .flat_map(|&i| archive::evicted_reply(&replies[i]).unwrap_or_default())
                .collect();
            gone.sort();
            gone.dedup();
            if !gone.is_empty() {
                self.restore(&gone, now).await?;
            }
            let mut more: Vec<Value> = self
                .eval_pipe(|p| {
                    for &i in &again {
                        call(p, i);
                    }
                    wait(p);
                })
                .await?;
            replicated(&mut more)?;
            for (i, v) in again.into_iter().zip(more) {
                replies[i] = v;
            }
        }
        self.outcomes(replies, events.len())
    }

    async fn put_article(
        &self,
        id: ArticleId,
        meta: ArticleMeta,
        _now: Timestamp,
    ) -> Result<PutOutcome, StoreError> {
        self.put_run(&id, &meta, &ops::OpRun::Plain)
            .await
            .map(|(o, _)| o)
    }

    async fn post_article(
        &self,
        meta: ArticleMeta,
        poster: Voter<'_>,
        now: Timestamp,
    ) -> Result<ArticleId, StoreError> {
        if self.seed_layout() {
            return self.seed_post(meta, poster.raw, now).await;
        }
        self.post_run(meta, poster, now, &ops::OpRun::Plain)
            .await
            .map(|(id, _)| id)
    }

    async fn vote(
        &self,
        id: &ArticleId,
        user: Voter<'_>,
        direction: VoteDirection,
        now: Timestamp,
    ) -> Result<VoteOutcome, StoreError> {
        if self.seed_layout() {
            let up = direction == VoteDirection::Up;
            return self.seed_vote(id, user.raw, up, now).await;
        }
        self.vote_run(id, user, direction, now, &ops::OpRun::Plain)
            .await
            .map(|(o, _)| o)
    }

    async fn article(
        &self,
        id: &ArticleId,
        now: Timestamp,
    ) -> Result<Option<ArticleView>, StoreError> {
        self.check_epoch()?;
        let own = self.article_own(id, now).await?;
        if self.seed_layout() {
            return self.seed_article(id, own, now).await;
        }
        Ok(own)
    }

    async fn delete_article(&self, id: &ArticleId, _now: Timestamp) -> Result<bool, StoreError> {
        if self.seed_layout() {
            return self.seed_delete(id).await;
        }
        self.delete_run(id, &ops::OpRun::Plain)
            .await
            .map(|(done, _)| done)
    }

    async fn hot(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        self.check_epoch()?;
        if self.seed_serves(q) {
            return self.seed_votes_page(q, now).await;
        }
        // Vote models rank every live article: one ranking whatever the range.
        if q.model.lists_every_live_article() && q.range != RangeSpec::All {
            let q = HotQuery {
                range: RangeSpec::All,
                ..q.clone()
            };
            return self.hot_page(&q, now).await;
        }
        self.hot_page(q, now).await
    }

    async fn newest(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        self.check_epoch()?;
        self.newest_page(q, now).await
    }

    async fn stats(&self, now: Timestamp, hours: u32) -> Result<Stats, StoreError> {
        self.check_epoch()?;
        let last = hour_of(now) + 1;
        let first = *crate::time::last_hours(hour_of(now), hours).start();
        let mut pipe = redis::pipe();
        pipe.get(self.keys.counted())
            .hgetall(self.keys.quarantine());
        for h in first..=last {
            pipe.hgetall(self.keys.quarantine_h(h));
        }
        // Live articles: every shard's `articles:new`.
        let shards = self.keys.all_shards();
        for sk in &shards {
            pipe.zcard(sk.newest());
        }
        let got: Vec<Value> = self.query_pipe(&pipe).await.map_err(store_err)?;
        let q_of = |v: &Value| -> Quarantine {
            let mut q = Quarantine::default();
            let pairs: Vec<(String, i64)> = match v {
                Value::Array(a) => a
                    .chunks(2)
                    .filter_map(|kv| Some((v_str(&kv[0])?.to_string(), v_i64(kv.get(1)?)?)))
                    .collect(),
                Value::Map(m) => m
                    .iter()
                    .filter_map(|(k, v)| Some((v_str(k)?.to_string(), v_i64(v)?)))
                    .collect(),
                _ => Vec::new(),
            };
            for (k, n) in pairs {
                let slot = match k.as_str() {
                    "q_dup" => 0,
                    "q_rl" => 1,
                    "q_bot" => 2,
                    "q_rep" => 3,
                    _ => continue,
                };
                q.0[slot] = n.max(0) as u64;
            }
            q
        };
        let hours = (last - first + 1) as usize;
        if got.len() != 2 + hours + shards.len() {
            return Err(bad_reply("stats"));
        }
        let by_hour = (first..=last)
            .zip(&got[2..2 + hours])
            .map(|(h, v)| (h, q_of(v)))
            .filter(|(_, q)| q.total() > 0)
            .collect();
        let articles: i64 = got[2 + hours..]
            .iter()
            .map(|v| v_i64(v).unwrap_or(0).max(0))
            .sum();
        Ok(Stats {
            articles: articles as u64,
            counted: v_i64(&got[0]).unwrap_or(0).max(0) as u64,
            quarantined: q_of(&got[1]),
            quarantine_by_hour: by_hour,
        })
    }

    async fn hourly(
        &self,
        id: &ArticleId,
        now: Timestamp,
        hours: u32,
    ) -> Result<Option<Vec<HourlyRow>>, StoreError> {
        self.check_epoch()?;
        let seq = self.sync_node().await?;
        match self.metas(std::slice::from_ref(id), &seq).await?.pop() {
            Some(Some(m)) if !m.deleted => {}
            _ => return Ok(None),
        }
        self.restore_if_evicted(std::slice::from_ref(id), now)
            .await?;
        let last = hour_of(now);
        let first = *crate::time::last_hours(last, hours).start();
        let fields = [
            "pv",
            "likes",
            "comments",
            "favorites",
            "shares",
            "dwell_n",
            "q_dup",
            "q_rl",
            "q_bot",
            "q_rep",
        ];
        let mut pipe = redis::pipe();
        for h in first..=last {
            pipe.cmd("HMGET")
                .arg(self.keys.bucket_h(id, h))
                .arg(&fields);
            pipe.cmd("PFCOUNT").arg(self.keys.uv_h(id, h));
        }
        let mut con = self.con();
        let got: Vec<Value> = pipe.query_async(&mut con).await.map_err(store_err)?;
        let mut rows = Vec::new();
        for (h, pair) in (first..=last).zip(got.chunks(2)) {
            let [Value::Array(vals), uv] = pair else {
                return Err(bad_reply("hourly"));
            };
            if vals.iter().all(|v| matches!(v, Value::Nil)) {
                continue;
            }
            let n = |i: usize| vals.get(i).and_then(v_i64).unwrap_or(0).max(0) as u64;
            rows.push(HourlyRow {
                hour: h,
                pv: n(0),
                uv: v_i64(uv).unwrap_or(0).max(0) as u64,
                quarantined: Quarantine([n(6), n(7), n(8), n(9)]),
            });
        }
        Ok(Some(rows))
    }

    async fn archive_age(&self) -> Result<Option<i64>, StoreError> {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        Ok(self.archive_flushed_at().await?.map(|t| (wall - t).max(0)))
    }
}

#[async_trait]
impl Lifecycle for RedisStore {
    async fn ready(&self) -> Result<(), StoreError> {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.version_ok.load(Relaxed) {
            version::check(self.con()).await?;
            self.version_ok.store(true, Relaxed);
        }
        // Redis still holds the site's data (a node that finds it lost
        // says so here, and refuses every call), and takes writes.
        if self.marker_on() {
            self.attach_epoch().await?;
        }
        self.probe_writes().await?;
        // A keyed read (on a cluster it asks the site's primary): the
        // site's shard count, recorded by its first node of more than one
        // shard. A node with another count would read and write its
        // indexes under other keys: it is not ready.
        let key = self.keys.shards_key();
        let n = self.keys.shards;
        let mut pipe = redis::pipe();
        if n > 1 {
            pipe.cmd("SET").arg(&key).arg(n).arg("NX").ignore();
        }
        pipe.get(&key);
        let mut con = self.con();
        let (held,): (Option<u32>,) = pipe.query_async(&mut con).await.map_err(store_err)?;
        match held {
            Some(h) if h != n => Err(StoreError::Unavailable(format!(
                "this site's keys are written over redis.shards = {h}, this node has {n}"
            ))),
            _ => Ok(()),
        }
    }

    fn warming(&self) -> Option<String> {
        self.warming_up()
    }

    async fn keep_rankings(&self, now: Timestamp) -> Result<(), StoreError> {
        self.check_epoch()?;
        self.keep_warm(now).await
    }

    async fn maintain(&self, now: Timestamp) -> Result<(), StoreError> {
        self.check_epoch()?;
        let due = {
            let mut last = self.last_gc.lock();
            let due = now - *last >= 60 || now < *last;
            if due {
                *last = now;
            }
            due
        };
        if due {
            self.collect_changes().await?;
        }
        // Batches a node left between the gate and count stages.
        self.sweep_outbox(now).await?;
        if self.seed_layout() {
            let refresh = {
                let mut last = self.last_seed_refresh.lock();
                let every = self.opts.seed_refresh_secs as i64;
                let due = now - *last >= every || now < *last;
                if due {
                    *last = now;
                }
                due
            };
            if refresh {
                self.seed_refresh(now).await?;
                self.seed_refresh_weighted(now).await?;
            }
        }
        Ok(())
    }

    async fn shutdown(&self) -> Result<(), StoreError> {
        // Every acknowledged write is already in Redis; rebuild claims a
        // query or refresh cut short by the shutdown are given back.
        rank::Claim::give_back_orphans(self.con(), &self.orphans).await;
        Ok(())
    }
}

/// The article operations, run plainly or journaled (ops.rs).
impl RedisStore {
    /// `put.lua`, run as `run` says (ops.rs).
    pub(crate) async fn put_run(
        &self,
        id: &ArticleId,
        meta: &ArticleMeta,
        run: &ops::OpRun<'_>,
    ) -> Result<(PutOutcome, Option<ops::OpStamp>), StoreError> {
        let published = meta.published_at.to_string();
        let pairs = meta_pairs(meta);
        let mut args: Vec<&[u8]> = vec![
            self.keys.prefix.as_bytes(),
            id.as_str().as_bytes(),
            published.as_bytes(),
        ];
        for (k, v) in &pairs {
            args.push(k.as_bytes());
            args.push(v.as_bytes());
        }
        let (k, sk) = (&self.keys, self.keys.of(id));
        let keys = [
            k.meta(id),
            k.ledger(id, "stats:articles"),
            sk.newest(),
            sk.newest_by(),
            sk.changes_seq(),
            sk.changes(),
            k.ledger(id, "archive:dirty"),
        ];
        self.seed_claim(id).await?;
        let before = self.seed_groups_before(id).await?;
        let (created, stamp): (i64, _) = self.op_eval(ops::OpKind::Put, &keys, &args, run).await?;
        self.seed_groups_after(id, before, &meta.groups).await?;
        Ok((
            if created == 1 {
                PutOutcome::Created
            } else {
                PutOutcome::Updated
            },
            stamp,
        ))
    }

    /// `post.lua` (not for the seed layout), run as `run` says (ops.rs).
    pub(crate) async fn post_run(
        &self,
        mut meta: ArticleMeta,
        poster: Voter<'_>,
        now: Timestamp,
        run: &ops::OpRun<'_>,
    ) -> Result<(ArticleId, Option<ops::OpStamp>), StoreError> {
        let poster = poster.hash;
        meta.published_at = now;
        let pairs = meta_pairs(&meta);
        let published = now.to_string();
        let poster = format!("{poster:032x}");
        let window = self.settings.models.votes.window_secs().to_string();
        // A call the cluster client re-sends answers the first one's id.
        let request = format!("{:032x}", rand::random::<u128>());
        let per = self.settings.models.votes.per_vote.to_string();
        let mut args: Vec<&[u8]> = vec![
            self.keys.prefix.as_bytes(),
            published.as_bytes(),
            poster.as_bytes(),
            window.as_bytes(),
            request.as_bytes(),
            per.as_bytes(),
        ];
        for (k, v) in &pairs {
            args.push(k.as_bytes());
            args.push(v.as_bytes());
        }
        if self.keys.spans_slots() {
            self.script_epoch().await?;
            return self.post_over_slots(&args, &request).await;
        }
        // The script picks the id after the counter's, skipping ids taken
        // otherwise; it may only touch the candidates declared here, and
        // answers '' (writing nothing) when all of them are taken.
        let k = &self.keys;
        let mut candidates = 8;
        for _ in 0..6 {
            let mut con = self.con();
            let cur: Option<i64> = redis::cmd("GET")
                .arg(k.post_counter())
                .query_async(&mut con)
                .await
                .map_err(store_err)?;
            let cur = cur.unwrap_or(0);
            let mut keys = vec![k.post_request(&request), k.post_counter()];
            let mut shards = std::collections::BTreeSet::new();
            for n in cur + 1..=cur + candidates {
                let id = ArticleId::parse(&n.to_string()).map_err(|_| bad_reply("post"))?;
                keys.push(k.meta(&id));
                keys.push(k.voted(&id));
                keys.push(k.counters(&id));
                for name in ["stats:articles", "time:", "score:", "archive:dirty"] {
                    keys.push(k.ledger(&id, name));
                }
                shards.insert(k.shard_index(&id));
            }
            keys.sort();
            keys.dedup();
            // The shard keys of every candidate's shard.
            for sk in shards.into_iter().map(|i| k.shard(i)) {
                keys.extend([sk.newest(), sk.newest_by(), sk.changes_seq(), sk.changes()]);
            }
            let (id, stamp): (String, _) =
                self.op_eval(ops::OpKind::Post, &keys, &args, run).await?;
            if !id.is_empty() {
                let id = ArticleId::parse(&id).map_err(|_| bad_reply("post"))?;
                return Ok((id, stamp));
            }
            candidates *= 8;
        }
        Err(StoreError::Unavailable(
            "redis: post ids kept being taken; try again".into(),
        ))
    }

    /// A post over a site spread over slots (no journal: config refuses
    /// a pipeline with shards): `post_id.lua` reserves the next id in the
    /// site's slot, `post_at.lua` creates the article in its shard's slot
    /// unless that id is taken (then the next one). Each call is one slot
    /// and answers a re-sent call as the first one (by `request`); a
    /// request whose second call never ran leaves its id unused.
    async fn post_over_slots(
        &self,
        args: &[&[u8]],
        request: &str,
    ) -> Result<(ArticleId, Option<ops::OpStamp>), StoreError> {
        let k = &self.keys;
        let reserve_keys = [k.post_reserved(request), k.post_counter()];
        let mut taken = String::new();
        for _ in 0..1000 {
            let id: String = self
                .eval(&self.scripts.post_id, &reserve_keys, &[taken.as_bytes()])
                .await?;
            let aid = ArticleId::parse(&id).map_err(|_| bad_reply("post"))?;
            let keys = k.post_at_keys(&aid, request);
            let mut all: Vec<&[u8]> = args[..6].to_vec();
            all.push(id.as_bytes());
            all.extend_from_slice(&args[6..]);
            let made: String = self.eval(&self.scripts.post_at, &keys, &all).await?;
            if !made.is_empty() {
                return Ok((aid, None));
            }
            taken = id;
        }
        Err(StoreError::Unavailable(
            "redis: post ids kept being taken; try again".into(),
        ))
    }

    /// `vote.lua` (not for the seed layout), run as `run` says (ops.rs).
    pub(crate) async fn vote_run(
        &self,
        id: &ArticleId,
        user: Voter<'_>,
        direction: VoteDirection,
        now: Timestamp,
        run: &ops::OpRun<'_>,
    ) -> Result<(VoteOutcome, Option<ops::OpStamp>), StoreError> {
        let user = user.hash;
        let votes = &self.settings.models.votes;
        let user = format!("{user:032x}");
        let (now_s, window, per) = (
            now.to_string(),
            votes.window_secs().to_string(),
            votes.per_vote.to_string(),
        );
        let dir: &[u8] = match direction {
            VoteDirection::Up => b"u",
            VoteDirection::Down => b"d",
        };
        let allow: &[u8] = if votes.allow_down_votes { b"1" } else { b"0" };
        let args: Vec<&[u8]> = vec![
            self.keys.prefix.as_bytes(),
            id.as_str().as_bytes(),
            user.as_bytes(),
            dir,
            now_s.as_bytes(),
            window.as_bytes(),
            allow,
            per.as_bytes(),
        ];
        let (k, sk) = (&self.keys, self.keys.of(id));
        let keys = [
            k.meta(id),
            k.voted(id),
            k.counters(id),
            k.ledger(id, "time:"),
            k.ledger(id, "score:"),
            sk.changes_seq(),
            sk.changes(),
            k.ledger(id, "archive:dirty"),
            k.ledger(id, "archive:evicted"),
        ];
        let (mut r, mut stamp): (Vec<i64>, _) =
            self.op_eval(ops::OpKind::Vote, &keys, &args, run).await?;
        if r.as_slice() == [-5] {
            // Evicted: back from the archive first (vote.lua wrote nothing).
            self.restore(std::slice::from_ref(id), now).await?;
            (r, stamp) = self.op_eval(ops::OpKind::Vote, &keys, &args, run).await?;
        }
        let outcome = match r.as_slice() {
            [-1] => VoteOutcome::UnknownArticle,
            [-2] => VoteOutcome::DownVotesDisabled,
            [-3] => VoteOutcome::Closed,
            [-4] => VoteOutcome::AlreadyVoted,
            &[ups, downs, published] => {
                let c = Counters {
                    ups: ups.max(0) as u64,
                    downs: downs.max(0) as u64,
                    ..Counters::default()
                };
                VoteOutcome::Counted {
                    ups: c.ups,
                    downs: c.downs,
                    score: votes.score(&c, published),
                }
            }
            _ => return Err(bad_reply("vote")),
        };
        Ok((outcome, stamp))
    }
}
