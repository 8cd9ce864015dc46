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
    /// Where state lives: `embedded` (this process, `data_dir`) or `redis`
    /// (shared by every node on one Redis; see `[redis]`).
    pub store: StoreKind,
    pub gate: GateConfig,
    pub retention: RetentionConfig,
    pub embedded: EmbeddedConfig,
    pub redis: RedisConfig,
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
            max_body_bytes: 1 << 20,
            max_batch_events: 1000,
            trusted_proxies: Vec::new(),
            log_format: LogFormat::Text,
            cors_origins: Vec::new(),
            store: StoreKind::Embedded,
            gate: GateConfig::default(),
            retention: RetentionConfig::default(),
            embedded: EmbeddedConfig::default(),
            redis: RedisConfig::default(),
            models: Models::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    Embedded,
    Redis,
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
        }
    }
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
    /// on top of the `isbot` crate's maintained list.
    pub bot_patterns: Vec<String>,
    /// Treat requests with no User-Agent at all as bots.
    pub empty_user_agent_is_bot: bool,
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
            empty_user_agent_is_bot: true,
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
        for p in &g.bot_patterns {
            regex::Regex::new(p)
                .map_err(|e| format!("gate.bot_patterns: {p:?} is not a valid regex: {e}"))?;
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
        if !crate::store::redis::valid_prefix(&rc.prefix) {
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
        if self.store == StoreKind::Redis && !rc.url.starts_with("redis://") {
            return Err(format!(
                "redis.url = {:?} is invalid: must start with redis:// (TLS is not built in)",
                rc.url
            ));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(Config::default().validate(), Ok(vec![]));
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
        assert!(toml::from_str::<Config>("[redis]\nnope = 1\n").is_err());
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
