//! Configuration: a TOML file (`--config FILE`), then command-line flags and
//! environment variables on top. Every key and its default is listed in the
//! README ("Configuration"); `Config::default()` is the source of truth.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::score::Models;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address the HTTP server binds.
    pub listen: SocketAddr,
    /// Where the embedded store keeps its log, snapshots and generated secrets.
    pub data_dir: PathBuf,
    /// Admin token (`HOTRANK_ADMIN_TOKEN`); generated into the data dir when empty.
    pub admin_token: Option<String>,
    /// Ingest token (`HOTRANK_INGEST_TOKEN`) for trusted backends.
    pub ingest_token: Option<String>,
    /// Reject events for articles that were never `PUT` (404 unknown_article).
    pub require_known_articles: bool,
    /// Most articles the store holds (memory budget; 0: no limit). Past it,
    /// events from untrusted clients for new articles get 429
    /// `too_many_articles`; known articles keep counting.
    pub max_articles: u64,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Most events in one `POST /api/events`.
    pub max_batch_events: usize,
    /// Peers whose `X-Forwarded-For` is believed (IPs or CIDRs).
    pub trusted_proxies: Vec<String>,
    /// `text` or `json` logs.
    pub log_format: LogFormat,
    /// Site origins (`https://example.com`) whose pages may send events from
    /// the browser (CORS on `/api/views` and `/api/events`); `"*"` allows any.
    pub cors_origins: Vec<String>,
    /// Who may post articles (`POST /api/articles`): `token` (the ingest or
    /// admin token) or `open` (anyone).
    pub posting: Access,
    /// Who may vote (`POST /api/articles/{id}/vote`): `token` or `open`.
    pub voting: Access,
    /// Where state lives: `embedded` (this process, `data_dir`) or `redis`
    /// (shared by every node on one Redis; see `[redis]`).
    pub store: StoreKind,
    pub gate: GateConfig,
    pub http: HttpConfig,
    pub limits: LimitsConfig,
    pub retention: RetentionConfig,
    pub rankings: RankingsConfig,
    pub embedded: EmbeddedConfig,
    pub redis: RedisConfig,
    pub archive: ArchiveConfig,
    pub pipeline: PipelineConfig,
    pub feeds: FeedsConfig,
    pub models: Models,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./data"),
            admin_token: None,
            ingest_token: None,
            require_known_articles: false,
            max_articles: 1_000_000,
            max_body_bytes: 1 << 20,
            max_batch_events: 1000,
            trusted_proxies: Vec::new(),
            log_format: LogFormat::Text,
            cors_origins: Vec::new(),
            posting: Access::Token,
            voting: Access::Token,
            store: StoreKind::Embedded,
            gate: GateConfig::default(),
            http: HttpConfig::default(),
            limits: LimitsConfig::default(),
            retention: RetentionConfig::default(),
            rankings: RankingsConfig::default(),
            embedded: EmbeddedConfig::default(),
            redis: RedisConfig::default(),
            archive: ArchiveConfig::default(),
            pipeline: PipelineConfig::default(),
            feeds: FeedsConfig::default(),
            models: Models::default(),
        }
    }
}

/// Who may use an endpoint that creates state for a user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Anyone.
    Open,
    /// Requests carrying the ingest or admin token.
    Token,
}

/// Connection-level limits of the HTTP server (`[http]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// A connection must deliver a complete request head within this many
    /// seconds of connecting or of its previous answer, else it is closed:
    /// slowly dribbled headers and idle keep-alive connections alike.
    pub header_timeout_secs: u64,
    /// A request body must arrive in full within this many seconds
    /// (408 `request_timeout`).
    pub body_timeout_secs: u64,
    /// Most open connections. At the cap, a new connection takes the place
    /// of the one idle longest; it is refused only when every one has a
    /// request in flight. Never more than the descriptor limit (`ulimit
    /// -n`) leaves after `reserved_fds`.
    pub max_connections: usize,
    /// Descriptors kept free of connections for everything else: the
    /// store's files and connections, the archive's pool, the listener.
    pub reserved_fds: usize,
    /// Longest request target (path and query); longer: 414 `uri_too_long`.
    pub max_uri_bytes: usize,
    /// Largest header section (names, values, 4 bytes per line); larger, or
    /// more than `max_headers` lines: 431 `headers_too_large`.
    pub max_header_bytes: usize,
    pub max_headers: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            header_timeout_secs: 10,
            body_timeout_secs: 30,
            max_connections: 512,
            reserved_fds: 128,
            max_uri_bytes: 8192,
            max_header_bytes: 16384,
            max_headers: 64,
        }
    }
}

impl HttpConfig {
    /// hyper's own read buffer: room for the largest head we answer
    /// ourselves; a head beyond it is cut off by the parser.
    pub fn parser_buffer_bytes(&self) -> usize {
        (self.max_uri_bytes + self.max_header_bytes + 16 * 1024).max(8192)
    }

    /// hyper's own header-line limit, `None` for its built-in 100. Above
    /// `max_headers` so that we, not the parser, answer the usual excess.
    /// hyper's built-in limit lives on the stack; any other allocates and
    /// fills a table of that size for every request it parses (about 5 %
    /// of a single view's cost at 200), so it is set only when
    /// `max_headers` is 100 or more.
    pub fn parser_max_headers(&self) -> Option<usize> {
        const HYPER_DEFAULT: usize = 100;
        (self.max_headers >= HYPER_DEFAULT).then_some(2 * self.max_headers)
    }
}

/// Per-client budgets of the HTTP layer (`[limits]`): each is "at most N in
/// any 60 s", bursts included; 0 turns one off. Over budget: 429 with
/// `Retry-After`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// IPv4 clients share a budget per block of this prefix length (32: per address).
    pub ipv4_prefix: u8,
    /// IPv6 clients share a budget per block of this prefix length (64: one
    /// customer's network).
    pub ipv6_prefix: u8,
    /// Query and admin requests per client IP block (requests carrying the
    /// admin or ingest token are not counted).
    pub queries_per_minute_per_ip: u32,
    /// `POST /api/articles` per client IP block (untrusted requests only).
    pub posts_per_minute_per_ip: u32,
    /// `POST /api/articles` per poster.
    pub posts_per_minute_per_user: u32,
    /// Votes per client IP block (untrusted requests only).
    pub votes_per_minute_per_ip: u32,
    /// Votes per `userId`.
    pub votes_per_minute_per_user: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            ipv4_prefix: 32,
            ipv6_prefix: 64,
            queries_per_minute_per_ip: 600,
            posts_per_minute_per_ip: 10,
            posts_per_minute_per_user: 5,
            votes_per_minute_per_ip: 60,
            votes_per_minute_per_user: 30,
        }
    }
}

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

/// Seed 002's counting pipeline on Redis Streams (`[pipeline]`; see
/// docs/design.md, "Pipeline"). Needs `store = "redis"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineConfig {
    /// Ingest through the pipeline (`--pipeline`, `HOTRANK_PIPELINE`):
    /// API nodes queue events and answer `queued`.
    pub enabled: bool,
    /// What `hotrank serve` runs (`--roles`, `HOTRANK_ROLES`): `all`, or
    /// a comma-separated subset of `api`, `filter`, `count`.
    pub roles: String,
    /// Raw and flagged streams (events are partitioned by article). Every
    /// node and worker of a site must use the same number.
    pub partitions: u32,
    /// Entries a worker reads, claims and processes in one script call.
    pub batch: usize,
    /// A pending entry idle this long is claimed by another worker
    /// (`XAUTOCLAIM`): a crashed worker's entries are redone after it.
    pub claim_idle_ms: u64,
    /// Entries a partition's raw and flagged streams hold at most; past
    /// it, API nodes answer 503 with `Retry-After` and queue nothing.
    pub max_backlog: u64,
    /// How long a worker that found nothing waits before it looks again.
    pub block_ms: u64,
    /// How often a worker trims acknowledged entries and updates the lag
    /// gauges.
    pub trim_every_ms: u64,
    /// Filter and count workers `serve` runs per role it has.
    pub workers: usize,
    /// The journal's Redis (`--pipeline-log-url`,
    /// `HOTRANK_PIPELINE_LOG_URL`; empty: no journal): API nodes append
    /// every queued event there too before they answer 202, so a Redis
    /// that lost everything can be rebuilt from the archive plus the
    /// journal (`hotrank archive restore --replay`; docs/design.md,
    /// "Disaster recovery"). Must be another Redis than `redis.url`.
    pub log_url: String,
    /// Journal entries are kept this long at least, and longer while the
    /// archive may still need them (the archive's journal floor).
    pub journal_keep_secs: u64,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            enabled: false,
            roles: "all".into(),
            partitions: 4,
            batch: 250,
            claim_idle_ms: 30_000,
            max_backlog: 1_000_000,
            block_ms: 20,
            trim_every_ms: 1000,
            workers: 1,
            log_url: String::new(),
            journal_keep_secs: 3600,
        }
    }
}

impl PipelineConfig {
    /// The roles `roles` names: (api, filter, count), or why it is invalid.
    pub fn role_set(&self) -> Result<(bool, bool, bool), String> {
        let mut r = (false, false, false);
        for part in self.roles.split(',').map(str::trim) {
            match part {
                "all" => r = (true, true, true),
                "api" => r.0 = true,
                "filter" => r.1 = true,
                "count" => r.2 = true,
                _ => {
                    return Err(format!(
                        "pipeline.roles = {:?} is invalid: use all, or a comma-separated list of api, filter, count",
                        self.roles
                    ));
                }
            }
        }
        Ok(r)
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// The filter stage: what decides "count or not".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GateConfig {
    /// A visitor's repeat view of an article inside this many seconds of its
    /// last counted view is a duplicate (seed 000: 10–15 minutes).
    pub dedupe_window_secs: u32,
    /// Most events one visitor may send in any 60 s (0 disables).
    pub visitor_limit_per_minute: u32,
    /// Most events one client IP may send in any 60 s (0 disables).
    pub ip_limit_per_minute: u32,
    /// How long an `eventId` is remembered for idempotency.
    pub event_id_ttl_secs: u32,
    /// Largest accepted `ts` ahead of the server clock.
    pub max_future_secs: u32,
    /// Extra user-agent regular expressions treated as bots (case-insensitive),
    /// on top of the built-in crawler list (src/gate/bots/patterns.txt).
    pub bot_patterns: Vec<String>,
    /// A file of more such patterns, one a line (`#` comments); re-read on
    /// `SIGHUP` without a restart.
    pub bot_patterns_file: Option<PathBuf>,
    /// Treat requests with no User-Agent at all as bots.
    pub empty_user_agent_is_bot: bool,
    /// A visitor whose counted views reach more than this many distinct
    /// articles in any 60 s is quarantined as `bot` (0 disables).
    pub bot_articles_per_minute: u32,
    /// How long such a visitor stays quarantined, in seconds.
    pub bot_quarantine_secs: u32,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            dedupe_window_secs: 900,
            visitor_limit_per_minute: 60,
            ip_limit_per_minute: 600,
            event_id_ttl_secs: 86_400,
            max_future_secs: 300,
            bot_patterns: Vec::new(),
            bot_patterns_file: None,
            empty_user_agent_is_bot: true,
            bot_articles_per_minute: 30,
            bot_quarantine_secs: 86_400,
        }
    }
}

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
}

impl Default for RankingsConfig {
    fn default() -> Self {
        RankingsConfig {
            max_live: 64,
            max_bytes: 96 << 20,
            build_chunk: 2048,
        }
    }
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

/// The feeds of a ranking and its live stream (`[feeds]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FeedsConfig {
    /// `Cache-Control: public, max-age=N` of `/feeds/hot.*`: how long a
    /// CDN or reader may serve a feed without asking again (0: always ask;
    /// an unchanged list then gets `304`).
    pub max_age_secs: u32,
    /// This server's public address (`https://hot.example.com`), for the
    /// feeds' self links and item ids; empty: `http://` and the request's
    /// `Host`.
    pub public_url: String,
    /// How often a live stream's ranking is read (one read per distinct
    /// query, whatever the number of its streams).
    pub stream_poll_ms: u64,
    /// A comment line on a live stream after this many quiet seconds, so
    /// that proxies keep it open and a gone client is noticed.
    pub stream_keepalive_secs: u64,
    /// Most live streams open at once; beyond it `GET /api/stream` answers
    /// 503 `too_many_streams` (0: no streams).
    pub max_streams: usize,
}

impl Default for FeedsConfig {
    fn default() -> Self {
        FeedsConfig {
            max_age_secs: 60,
            public_url: String::new(),
            stream_poll_ms: 1000,
            stream_keepalive_secs: 15,
            max_streams: 256,
        }
    }
}

impl FeedsConfig {
    fn validate(&self) -> Result<(), String> {
        let in_range = |key: &str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!(
                    "feeds.{key} = {v} is invalid: must be in {lo}..={hi}"
                ))
            }
        };
        in_range("max_age_secs", self.max_age_secs.into(), 0, 86_400)?;
        in_range("stream_poll_ms", self.stream_poll_ms, 50, 60_000)?;
        in_range("stream_keepalive_secs", self.stream_keepalive_secs, 1, 300)?;
        in_range("max_streams", self.max_streams as u64, 0, 100_000)?;
        let u = &self.public_url;
        let scheme_ok = u.starts_with("http://") || u.starts_with("https://");
        if !u.is_empty() && (!scheme_ok || u.ends_with('/') || u.chars().any(char::is_whitespace)) {
            return Err(format!(
                "feeds.public_url = {u:?} is invalid: an http:// or https:// address with no trailing slash"
            ));
        }
        Ok(())
    }
}

impl Config {
    /// Reads a TOML file; unknown keys are errors.
    pub fn from_file(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("config file {}: {e}", path.display()))
    }

    /// Checks every key; `Err` names the key and its valid range, `Ok` holds
    /// warnings worth logging.
    pub fn validate(&self) -> Result<Vec<String>, String> {
        let mut warnings = self.models.validate()?;
        self.feeds.validate()?;
        let g = &self.gate;
        if g.dedupe_window_secs == 0 || g.dedupe_window_secs > 86_400 {
            return Err(format!(
                "gate.dedupe_window_secs = {} is invalid: must be in 1..=86400",
                g.dedupe_window_secs
            ));
        }
        if !(600..=900).contains(&g.dedupe_window_secs) {
            warnings.push(format!(
                "gate.dedupe_window_secs = {} is outside the seed's 10-15 minutes",
                g.dedupe_window_secs
            ));
        }
        if g.event_id_ttl_secs == 0 {
            return Err("gate.event_id_ttl_secs must be > 0".into());
        }
        if g.max_future_secs > 86_400 {
            return Err(format!(
                "gate.max_future_secs = {} is invalid: must be in 0..=86400",
                g.max_future_secs
            ));
        }
        if g.bot_articles_per_minute > 0 && !(60..=2_592_000).contains(&g.bot_quarantine_secs) {
            return Err(format!(
                "gate.bot_quarantine_secs = {} is invalid: must be in 60..=2592000",
                g.bot_quarantine_secs
            ));
        }
        if g.bot_articles_per_minute > 100_000 {
            return Err(format!(
                "gate.bot_articles_per_minute = {} is invalid: must be in 0..=100000",
                g.bot_articles_per_minute
            ));
        }
        crate::gate::bots::PatternSet::compile(&g.bot_patterns)
            .map_err(|e| format!("gate.bot_patterns: {e}"))?;
        if let Some(path) = &g.bot_patterns_file {
            let patterns = crate::gate::bots::read_pattern_file(path)
                .map_err(|e| format!("gate.bot_patterns_file: {e}"))?;
            crate::gate::bots::PatternSet::compile(&patterns)
                .map_err(|e| format!("gate.bot_patterns_file ({}): {e}", path.display()))?;
        }
        let r = &self.retention;
        if !(1..=3650).contains(&r.hourly_days) {
            return Err(format!(
                "retention.hourly_days = {} is invalid: must be in 1..=3650",
                r.hourly_days
            ));
        }
        if !(1..=100_000).contains(&r.ranking_cap) {
            return Err(format!(
                "retention.ranking_cap = {} is invalid: must be in 1..=100000",
                r.ranking_cap
            ));
        }
        let k = &self.rankings;
        if !(1..=100_000).contains(&k.max_live) {
            return Err(format!(
                "rankings.max_live = {} is invalid: must be in 1..=100000",
                k.max_live
            ));
        }
        if k.max_bytes < 1 << 20 {
            return Err(format!(
                "rankings.max_bytes = {} is invalid: must be at least 1048576 (1 MiB)",
                k.max_bytes
            ));
        }
        if !(64..=10_000_000).contains(&k.build_chunk) {
            return Err(format!(
                "rankings.build_chunk = {} is invalid: must be in 64..=10000000",
                k.build_chunk
            ));
        }
        if !(1..=100_000).contains(&self.max_batch_events) {
            return Err(format!(
                "max_batch_events = {} is invalid: must be in 1..=100000",
                self.max_batch_events
            ));
        }
        if self.max_body_bytes < 1024 {
            return Err(format!(
                "max_body_bytes = {} is invalid: must be >= 1024",
                self.max_body_bytes
            ));
        }
        let h = &self.http;
        for (key, v, range) in [
            ("http.header_timeout_secs", h.header_timeout_secs, 1..=3600),
            ("http.body_timeout_secs", h.body_timeout_secs, 1..=3600),
        ] {
            if !range.contains(&v) {
                return Err(format!("{key} = {v} is invalid: must be in 1..=3600"));
            }
        }
        for (key, v, range) in [
            ("http.max_connections", h.max_connections, 1..=1_000_000),
            ("http.reserved_fds", h.reserved_fds, 32..=1_000_000),
            ("http.max_uri_bytes", h.max_uri_bytes, 256..=32_768),
            ("http.max_header_bytes", h.max_header_bytes, 1024..=262_144),
            ("http.max_headers", h.max_headers, 8..=1000),
        ] {
            if !range.contains(&v) {
                return Err(format!(
                    "{key} = {v} is invalid: must be in {}..={}",
                    range.start(),
                    range.end()
                ));
            }
        }
        let l = &self.limits;
        if !(8..=32).contains(&l.ipv4_prefix) {
            return Err(format!(
                "limits.ipv4_prefix = {} is invalid: must be in 8..=32",
                l.ipv4_prefix
            ));
        }
        if !(16..=128).contains(&l.ipv6_prefix) {
            return Err(format!(
                "limits.ipv6_prefix = {} is invalid: must be in 16..=128",
                l.ipv6_prefix
            ));
        }
        for p in &self.trusted_proxies {
            parse_cidr(p).ok_or_else(|| {
                format!("trusted_proxies: {p:?} is not an IP address or CIDR block")
            })?;
        }
        for o in &self.cors_origins {
            if !valid_origin(o) {
                return Err(format!(
                    "cors_origins: {o:?} is not \"*\" or an origin like \"https://example.com\" \
                     (scheme, host and optional port; no path or trailing slash)"
                ));
            }
        }
        let e = &self.embedded;
        if e.fsync == FsyncMode::Interval && !(1..=10_000).contains(&e.fsync_interval_ms) {
            return Err(format!(
                "embedded.fsync_interval_ms = {} is invalid: must be in 1..=10000",
                e.fsync_interval_ms
            ));
        }
        if e.segment_bytes < 4096 {
            return Err("embedded.segment_bytes must be >= 4096".into());
        }
        let rc = &self.redis;
        if !valid_redis_prefix(&rc.prefix) {
            return Err(format!(
                "redis.prefix = {:?} is invalid: use at most 64 of [A-Za-z0-9_:.-]",
                rc.prefix
            ));
        }
        if !(1..=r.hourly_days).contains(&rc.hourly_days) {
            return Err(format!(
                "redis.hourly_days = {} is invalid: must be in 1..=retention.hourly_days",
                rc.hourly_days
            ));
        }
        if !(1..=10_000).contains(&rc.batch_events) {
            return Err(format!(
                "redis.batch_events = {} is invalid: must be in 1..=10000",
                rc.batch_events
            ));
        }
        if rc.connect_timeout_ms == 0 || rc.response_timeout_ms == 0 {
            return Err(
                "redis.connect_timeout_ms and redis.response_timeout_ms must be > 0".into(),
            );
        }
        if rc.layout == RedisLayout::Seed && rc.cluster {
            return Err(
                "redis.layout = \"seed\" needs one Redis: the seeds' keys cannot share a cluster slot (set redis.cluster = false or layout = \"hotrank\")".into(),
            );
        }
        if !(1..=MAX_REDIS_SHARDS).contains(&rc.shards) {
            return Err(format!(
                "redis.shards = {} is invalid: must be in 1..={MAX_REDIS_SHARDS}",
                rc.shards
            ));
        }
        if rc.shards > 1 && rc.layout == RedisLayout::Seed {
            return Err(
                "redis.shards > 1 does not write seed layout's keys (set layout = \"hotrank\" or shards = 1)".into(),
            );
        }
        if !(1..=3600).contains(&rc.seed_refresh_secs) {
            return Err(format!(
                "redis.seed_refresh_secs = {} is invalid: must be in 1..=3600",
                rc.seed_refresh_secs
            ));
        }
        let urls_ok = if rc.cluster {
            rc.url.split(',').all(|u| u.trim().starts_with("redis://"))
        } else {
            rc.url.starts_with("redis://")
        };
        if self.store == StoreKind::Redis && !urls_ok {
            return Err(format!(
                "redis.url = {:?} is invalid: must start with redis:// (TLS is not built in)",
                rc.url
            ));
        }
        let pc = &self.pipeline;
        pc.role_set()?;
        if pc.enabled && self.store != StoreKind::Redis {
            return Err("pipeline.enabled needs store = \"redis\"".into());
        }
        if pc.enabled && self.redis.cluster {
            return Err("pipeline.enabled does not run on a Redis Cluster yet".into());
        }
        if pc.enabled && self.redis.shards > 1 {
            return Err(
                "pipeline.enabled does not run with redis.shards > 1 yet: its streams and the positioned reads of its archive flush are one Redis's, not one shard's (set shards = 1)".into(),
            );
        }
        if pc.enabled && self.redis.layout == RedisLayout::Seed {
            return Err(
                "pipeline.enabled does not write seed layout's keys yet: use redis.layout = \"hotrank\" with the pipeline".into(),
            );
        }
        if !(1..=1024).contains(&pc.partitions)
            || !(1..=10_000).contains(&pc.batch)
            || pc.max_backlog == 0
            || pc.claim_idle_ms == 0
            || !(1..=64).contains(&pc.workers)
        {
            return Err(format!(
                "[pipeline] is invalid: partitions must be in 1..=1024 (got {}), batch in 1..=10000 (got {}), workers in 1..=64 (got {}), max_backlog and claim_idle_ms > 0",
                pc.partitions, pc.batch, pc.workers
            ));
        }
        if !pc.log_url.is_empty() {
            if !pc.log_url.starts_with("redis://") {
                return Err(format!(
                    "pipeline.log_url = {:?} is invalid: must start with redis://",
                    pc.log_url
                ));
            }
            if pc.journal_keep_secs < u64::from(self.gate.dedupe_window_secs) {
                return Err(format!(
                    "pipeline.journal_keep_secs = {} is below gate.dedupe_window_secs = {}: a restore rebuilds the dedupe window from the journal, so it must reach back that far",
                    pc.journal_keep_secs, self.gate.dedupe_window_secs
                ));
            }
            if self.archive.url.is_empty() || self.archive.flush_secs == 0 {
                warnings.push(
                    "pipeline.log_url without an archive writer ([archive] url, flush_secs > 0): the journal is trimmed only after archive flushes, so it grows without bound, and a restore needs the archive".into(),
                );
            }
            if pc.log_url == rc.url {
                return Err(
                    "pipeline.log_url must name another Redis than redis.url: the journal is what survives when that Redis loses everything".into(),
                );
            }
        }
        let ac = &self.archive;
        let postgres = ac.url.starts_with("postgres://") || ac.url.starts_with("postgresql://");
        if !ac.url.is_empty() && !postgres {
            return Err(format!(
                "archive.url = {:?} is invalid: must start with postgres:// or postgresql://",
                ac.url
            ));
        }
        if !valid_archive_schema(&ac.schema) {
            return Err(format!(
                "archive.schema = {:?} is invalid: use 1-63 of [a-z0-9_], not starting with a digit",
                ac.schema
            ));
        }
        if !(1..=10_000).contains(&ac.batch_articles) {
            return Err(format!(
                "archive.batch_articles = {} is invalid: must be in 1..=10000",
                ac.batch_articles
            ));
        }
        if ac.flush_secs > 86_400 {
            return Err(format!(
                "archive.flush_secs = {} is invalid: must be in 0..=86400",
                ac.flush_secs
            ));
        }
        if ac.evict_after_secs != 0 && !(3600..=10 * 366 * 86_400).contains(&ac.evict_after_secs) {
            return Err(format!(
                "archive.evict_after_secs = {} is invalid: must be 0 (never) or in 3600..=316224000",
                ac.evict_after_secs
            ));
        }
        if ac.max_connections == 0 || ac.connect_timeout_ms == 0 {
            return Err(
                "archive.max_connections and archive.connect_timeout_ms must be > 0".into(),
            );
        }
        for (key, tok) in [
            ("admin_token", &self.admin_token),
            ("ingest_token", &self.ingest_token),
        ] {
            if let Some(t) = tok
                && (t.len() < 8 || t.chars().any(char::is_whitespace))
            {
                return Err(format!(
                    "{key} is invalid: use at least 8 characters and no whitespace"
                ));
            }
        }
        Ok(warnings)
    }

    /// Retention in seconds.
    pub fn retention_secs(&self) -> i64 {
        i64::from(self.retention.hourly_days) * 86_400
    }

    /// The configuration as `hotrank check-config` prints it: the tokens,
    /// and the passwords in the Redis, archive and journal URLs, replaced
    /// by a note that they are set and how long they are.
    pub fn redacted(&self) -> Config {
        let mut c = self.clone();
        for token in [&mut c.admin_token, &mut c.ingest_token]
            .into_iter()
            .flatten()
        {
            *token = redaction(token);
        }
        for url in [
            &mut c.redis.url,
            &mut c.archive.url,
            &mut c.pipeline.log_url,
        ] {
            *url = url.split(',').map(redact_url).collect::<Vec<_>>().join(",");
        }
        c
    }
}

/// What a secret is shown as.
fn redaction(secret: &str) -> String {
    format!("<redacted: set, {} characters>", secret.chars().count())
}

/// `scheme://user:password@host/...` with the password redacted, and any
/// `password=` query parameter (libpq's spelling).
fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, password)) => format!("{user}:{}@{host}", redaction(password)),
            None => authority.to_string(),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) if k.eq_ignore_ascii_case("password") => {
                        format!("{k}={}", redaction(v))
                    }
                    _ => kv.to_string(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// `*`, or `scheme://host[:port]` as browsers send it in `Origin`.
fn valid_origin(o: &str) -> bool {
    if o == "*" {
        return true;
    }
    let Some((scheme, rest)) = o.split_once("://") else {
        return false;
    };
    let scheme_ok = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    let rest_ok = !rest.is_empty()
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']' | '_'));
    scheme_ok && rest_ok
}

/// Parses `1.2.3.4`, `1.2.3.0/24`, `::1` or `fd00::/8` into (network, prefix).
pub fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a.parse::<IpAddr>().ok()?, Some(l.parse::<u8>().ok()?)),
        None => (s.parse::<IpAddr>().ok()?, None),
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    (len <= max).then_some((addr, len))
}

/// Whether `ip` lies in the block `(net, len)`.
pub fn cidr_contains((net, len): (IpAddr, u8), ip: IpAddr) -> bool {
    let ip = match (net, ip) {
        (IpAddr::V4(_), IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => return false,
        },
        _ => ip,
    };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            (u32::from(n) & mask) == (u32::from(a) & mask)
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            (u128::from(n) & mask) == (u128::from(a) & mask)
        }
        _ => false,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(Config::default().validate(), Ok(vec![]));
    }

    #[test]
    fn http_and_limit_keys_are_checked() {
        let c: Config = toml::from_str(
            "posting = \"open\"\nvoting = \"token\"\n[http]\nheader_timeout_secs = 3\n[limits]\nipv6_prefix = 48\n",
        )
        .unwrap();
        assert_eq!((c.posting, c.voting), (Access::Open, Access::Token));
        assert_eq!((c.http.header_timeout_secs, c.limits.ipv6_prefix), (3, 48));
        assert!(toml::from_str::<Config>("posting = \"maybe\"").is_err());
        type Edit = fn(&mut Config);
        let cases: [(&str, Edit); 5] = [
            ("http.header_timeout_secs", |c| {
                c.http.header_timeout_secs = 0
            }),
            ("http.body_timeout_secs", |c| c.http.body_timeout_secs = 0),
            ("http.max_connections", |c| c.http.max_connections = 0),
            ("limits.ipv6_prefix", |c| c.limits.ipv6_prefix = 129),
            ("limits.ipv4_prefix", |c| c.limits.ipv4_prefix = 33),
        ];
        for (key, edit) in cases {
            let mut c = Config::default();
            edit(&mut c);
            assert!(c.validate().unwrap_err().contains(key), "{key}");
        }
    }

    #[test]
    fn toml_round_trip_and_unknown_keys() {
        let c: Config =
            toml::from_str("listen = \"0.0.0.0:9000\"\n[models.gravity]\ngamma = 1.4\n").unwrap();
        assert_eq!(c.listen.port(), 9000);
        assert_eq!(c.models.gravity.gamma, 1.4);
        assert_eq!(c.models.gravity.alpha, 1.0);
        assert!(toml::from_str::<Config>("nope = 1").is_err());
        let text = toml::to_string(&Config::default()).unwrap();
        assert_eq!(toml::from_str::<Config>(&text).unwrap(), Config::default());
    }

    #[test]
    fn bad_values_name_their_key() {
        let mut c = Config::default();
        c.models.gravity.gamma = 0.0;
        assert!(c.validate().unwrap_err().contains("models.gravity.gamma"));
        let mut c = Config::default();
        c.gate.bot_patterns = vec!["(".into()];
        assert!(c.validate().unwrap_err().contains("gate.bot_patterns"));
        let mut c = Config::default();
        c.gate.bot_quarantine_secs = 10;
        assert!(
            c.validate()
                .unwrap_err()
                .contains("gate.bot_quarantine_secs")
        );
        let mut c = Config::default();
        c.gate.bot_articles_per_minute = 1_000_000;
        assert!(
            c.validate()
                .unwrap_err()
                .contains("gate.bot_articles_per_minute")
        );
        let dir = tempfile::tempdir().unwrap();
        let mut c = Config::default();
        c.gate.bot_patterns_file = Some(dir.path().join("missing.txt"));
        assert!(c.validate().unwrap_err().contains("gate.bot_patterns_file"));
        std::fs::write(dir.path().join("bad.txt"), "ok\n(\n").unwrap();
        c.gate.bot_patterns_file = Some(dir.path().join("bad.txt"));
        assert!(c.validate().unwrap_err().contains("gate.bot_patterns_file"));
        std::fs::write(dir.path().join("good.txt"), "# mine\n(?<!lib)zqx\n").unwrap();
        c.gate.bot_patterns_file = Some(dir.path().join("good.txt"));
        assert!(c.validate().is_ok());
        let c = Config {
            trusted_proxies: vec!["10.0.0.0/33".into()],
            ..Config::default()
        };
        assert!(c.validate().unwrap_err().contains("trusted_proxies"));
        for bad in [
            "example.com",
            "https://example.com/",
            "https://a.com/x",
            "https://",
        ] {
            let c = Config {
                cors_origins: vec![bad.into()],
                ..Config::default()
            };
            assert!(c.validate().unwrap_err().contains("cors_origins"), "{bad}");
        }
        let c = Config {
            cors_origins: vec![
                "*".into(),
                "http://127.0.0.1:8081".into(),
                "https://x.org".into(),
            ],
            ..Config::default()
        };
        assert_eq!(c.validate(), Ok(vec![]));
    }

    #[test]
    fn pipeline_keys() {
        let c: Config = toml::from_str(
            "store = \"redis\"\n[pipeline]\nenabled = true\nroles = \"api, count\"\npartitions = 8\nmax_backlog = 10\n",
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.pipeline.partitions, 8);
        assert_eq!(c.pipeline.role_set().unwrap(), (true, false, true));
        assert_eq!(
            PipelineConfig::default().role_set().unwrap(),
            (true, true, true)
        );
        let mut bad = c.clone();
        bad.pipeline.roles = "api,oops".into();
        assert!(bad.validate().unwrap_err().contains("pipeline.roles"));
        let mut bad = c.clone();
        bad.store = StoreKind::Embedded;
        assert!(bad.validate().unwrap_err().contains("pipeline.enabled"));
        let mut bad = c.clone();
        bad.pipeline.partitions = 0;
        assert!(bad.validate().unwrap_err().contains("[pipeline]"));
        let mut bad = c.clone();
        bad.redis.layout = RedisLayout::Seed;
        assert!(bad.validate().unwrap_err().contains("seed layout"));
        assert!(toml::from_str::<Config>("[pipeline]\nnope = 1\n").is_err());
    }

    #[test]
    fn archive_keys() {
        let c: Config = toml::from_str(
            "[archive]\nurl = \"postgres://u@db:5432/h\"\nschema = \"site_1\"\nbatch_articles = 100\n",
        )
        .unwrap();
        assert_eq!(c.archive.url, "postgres://u@db:5432/h");
        assert_eq!(c.archive.schema, "site_1");
        assert_eq!(c.archive.batch_articles, 100);
        assert_eq!(c.archive.max_connections, 4);
        c.validate().unwrap();
        let mut bad = c.clone();
        bad.archive.url = "mysql://x".into();
        assert!(bad.validate().unwrap_err().contains("archive.url"));
        let mut bad = c.clone();
        bad.archive.schema = "Site; DROP".into();
        assert!(bad.validate().unwrap_err().contains("archive.schema"));
        let mut bad = c.clone();
        bad.archive.schema = "1abc".into();
        assert!(bad.validate().unwrap_err().contains("archive.schema"));
        assert_eq!(c.archive.evict_after_secs, 604_800);
        let mut ok = c.clone();
        ok.archive.evict_after_secs = 0;
        ok.validate().unwrap();
        let mut bad = c.clone();
        bad.archive.evict_after_secs = 60;
        assert!(
            bad.validate()
                .unwrap_err()
                .contains("archive.evict_after_secs")
        );
        let mut bad = c;
        bad.archive.batch_articles = 0;
        assert!(
            bad.validate()
                .unwrap_err()
                .contains("archive.batch_articles")
        );
        assert!(toml::from_str::<Config>("[archive]\nnope = 1\n").is_err());
    }

    #[test]
    fn redis_store_keys() {
        let c: Config = toml::from_str(
            "store = \"redis\"\n[redis]\nurl = \"redis://10.0.0.1:6380/2\"\nprefix = \"site1:\"\n",
        )
        .unwrap();
        assert_eq!(c.store, StoreKind::Redis);
        assert_eq!(c.redis.url, "redis://10.0.0.1:6380/2");
        assert_eq!(c.redis.prefix, "site1:");
        assert_eq!(c.redis.hourly_days, 7);
        assert_eq!(c.validate(), Ok(vec![]));
        let mut bad = c.clone();
        bad.redis.prefix = "a b{".into();
        assert!(bad.validate().unwrap_err().contains("redis.prefix"));
        let mut bad = c.clone();
        bad.redis.url = "rediss://x".into();
        assert!(bad.validate().unwrap_err().contains("redis.url"));
        // A cluster takes one or more seed nodes, every one redis://.
        let mut cl = c.clone();
        cl.redis.cluster = true;
        cl.redis.url = "redis://10.0.0.1:7000, redis://10.0.0.2:7000".into();
        assert!(cl.validate().is_ok());
        cl.redis.url = "redis://10.0.0.1:7000,rediss://10.0.0.2:7000".into();
        assert!(cl.validate().unwrap_err().contains("redis.url"));
        let t: Config =
            toml::from_str("store = \"redis\"\n[redis]\ncluster = true\nwait_replicas = 1\n")
                .unwrap();
        assert!(t.redis.cluster);
        assert_eq!(t.redis.wait_replicas, 1);
        assert!(toml::from_str::<Config>("[redis]\nnope = 1\n").is_err());
    }

    /// `[redis] shards`: 1 by default; more on one Redis or a cluster, in
    /// the hotrank layout, without the pipeline (not built there yet).
    #[test]
    fn redis_shards() {
        let c: Config = toml::from_str("store = \"redis\"\n[redis]\nshards = 4\n").unwrap();
        assert_eq!(c.redis.shards, 4);
        c.validate().unwrap();
        assert_eq!(Config::default().redis.shards, 1);
        let with = |f: &dyn Fn(&mut Config)| {
            let mut c = c.clone();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(with(&|c| c.redis.shards = 0).contains("redis.shards"));
        assert!(with(&|c| c.redis.shards = MAX_REDIS_SHARDS + 1).contains("redis.shards"));
        let mut on_cluster = c.clone();
        on_cluster.redis.cluster = true;
        on_cluster.validate().unwrap();
        assert!(with(&|c| c.redis.layout = RedisLayout::Seed).contains("seed layout"));
        assert!(with(&|c| c.pipeline.enabled = true).contains("redis.shards"));
    }

    #[test]
    fn cidrs() {
        let net = parse_cidr("10.1.0.0/16").unwrap();
        assert!(cidr_contains(net, "10.1.2.3".parse().unwrap()));
        assert!(!cidr_contains(net, "10.2.0.1".parse().unwrap()));
        assert!(cidr_contains(net, "::ffff:10.1.0.9".parse().unwrap()));
        let one = parse_cidr("127.0.0.1").unwrap();
        assert!(cidr_contains(one, "127.0.0.1".parse().unwrap()));
        assert!(!cidr_contains(one, "127.0.0.2".parse().unwrap()));
        assert!(cidr_contains(
            parse_cidr("::1").unwrap(),
            "::1".parse().unwrap()
        ));
    }
}
