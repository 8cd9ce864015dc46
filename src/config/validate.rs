//! `Config::validate`: every key checked, one section at a time, in a
//! fixed order (the first invalid key is the one reported).

use super::http::{parse_cidr, valid_origin};
use super::{
    ArchiveConfig, Config, CtrConfig, EmbeddedConfig, FeedsConfig, FsyncMode, GateConfig,
    HttpConfig, LimitsConfig, MAX_REDIS_SHARDS, RankingsConfig, RedisConfig, RedisLayout,
    RetentionConfig, StoreKind, WebhooksConfig, valid_archive_schema, valid_redis_prefix,
};
use crate::gate::bots::{PatternSet, read_pattern_file};

impl Config {
    /// Checks every key; `Err` names the key and its valid range, `Ok` holds
    /// warnings worth logging.
    pub fn validate(&self) -> Result<Vec<String>, String> {
        let mut warnings = self.models.validate()?;
        feeds(&self.feeds)?;
        webhooks(&self.webhooks)?;
        review(&self.review)?;
        if !super::valid_time_zone(&self.dashboard.time_zone) {
            return Err(format!(
                "dashboard.time_zone = {:?} is invalid: an IANA time zone name such as \"UTC\" or \"Europe/Paris\"",
                self.dashboard.time_zone
            ));
        }
        ctr(&self.ctr)?;
        gate(&self.gate, &mut warnings)?;
        retention(&self.retention)?;
        rankings(&self.rankings)?;
        request_sizes(self)?;
        http(&self.http)?;
        limits(&self.limits)?;
        clients(self)?;
        embedded(&self.embedded)?;
        redis(&self.redis, self.store, &self.retention)?;
        pipeline(self, &mut warnings)?;
        archive(&self.archive)?;
        tokens(self)?;
        Ok(warnings)
    }
}

/// `Err` unless `range` holds `v`: "`key` = `v` is invalid: must be in
/// `range`".
fn in_range<T>(key: &str, v: T, range: std::ops::RangeInclusive<T>) -> Result<(), String>
where
    T: PartialOrd + std::fmt::Display,
{
    if range.contains(&v) {
        return Ok(());
    }
    Err(format!(
        "{key} = {v} is invalid: must be in {}..={}",
        range.start(),
        range.end()
    ))
}

/// `[review]`.
fn review(r: &super::ReviewConfig) -> Result<(), String> {
    in_range("review.window_hours", r.window_hours, 1..=24)?;
    in_range("review.min_visitors", r.min_visitors, 1..=1_000_000)?;
    for (name, v) in [
        ("review.max_block_share", r.max_block_share),
        ("review.max_held_share", r.max_held_share),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(format!("{name} must be 0..=1, got {v}"));
        }
    }
    Ok(())
}

/// `[feeds]`.
fn feeds(f: &FeedsConfig) -> Result<(), String> {
    in_range("feeds.max_age_secs", f.max_age_secs, 0..=86_400)?;
    in_range("feeds.stream_poll_ms", f.stream_poll_ms, 50..=60_000)?;
    in_range(
        "feeds.stream_keepalive_secs",
        f.stream_keepalive_secs,
        1..=300,
    )?;
    in_range("feeds.max_streams", f.max_streams, 0..=100_000)?;
    let u = &f.public_url;
    let scheme_ok = u.starts_with("http://") || u.starts_with("https://");
    if !u.is_empty() && (!scheme_ok || u.ends_with('/') || u.chars().any(char::is_whitespace)) {
        return Err(format!(
            "feeds.public_url = {u:?} is invalid: an http:// or https:// address with no trailing slash"
        ));
    }
    Ok(())
}

/// `[webhooks]`.
fn webhooks(w: &WebhooksConfig) -> Result<(), String> {
    in_range("webhooks.interval_ms", w.interval_ms, 50..=3_600_000)?;
    in_range("webhooks.hysteresis", w.hysteresis, 0..=100)?;
    if !(w.rising_z.is_finite() && w.rising_z > 0.0 && w.rising_z <= 1000.0) {
        return Err(format!(
            "webhooks.rising_z = {} is invalid: must be a number in (0, 1000]",
            w.rising_z
        ));
    }
    in_range(
        "webhooks.rising_min_views",
        w.rising_min_views,
        0..=1_000_000,
    )?;
    in_range("webhooks.max_attempts", w.max_attempts, 1..=100)?;
    in_range("webhooks.retry_base_ms", w.retry_base_ms, 10..=3_600_000)?;
    in_range(
        "webhooks.retry_max_ms",
        w.retry_max_ms,
        w.retry_base_ms..=86_400_000,
    )?;
    in_range(
        "webhooks.connect_timeout_ms",
        w.connect_timeout_ms,
        10..=60_000,
    )?;
    in_range(
        "webhooks.response_timeout_ms",
        w.response_timeout_ms,
        10..=300_000,
    )?;
    in_range("webhooks.concurrency", w.concurrency, 1..=1000)?;
    in_range(
        "webhooks.max_subscriptions",
        w.max_subscriptions,
        1..=100_000,
    )?;
    Ok(())
}

/// `[ctr]`.
fn ctr(c: &CtrConfig) -> Result<(), String> {
    in_range("ctr.max_lists", c.max_lists, 1..=100_000)?;
    in_range("ctr.flush_secs", c.flush_secs, 1..=3600)
}

/// `[gate]`, including the operator's bot patterns (inline and file).
fn gate(g: &GateConfig, warnings: &mut Vec<String>) -> Result<(), String> {
    in_range("gate.dedupe_window_secs", g.dedupe_window_secs, 1..=86_400)?;
    if !(600..=900).contains(&g.dedupe_window_secs) {
        warnings.push(format!(
            "gate.dedupe_window_secs = {} is outside the seed's 10-15 minutes",
            g.dedupe_window_secs
        ));
    }
    if g.event_id_ttl_secs == 0 {
        return Err("gate.event_id_ttl_secs must be > 0".into());
    }
    in_range("gate.max_future_secs", g.max_future_secs, 0..=86_400)?;
    if g.bot_articles_per_minute > 0 {
        in_range(
            "gate.bot_quarantine_secs",
            g.bot_quarantine_secs,
            60..=2_592_000,
        )?;
    }
    in_range(
        "gate.bot_articles_per_minute",
        g.bot_articles_per_minute,
        0..=100_000,
    )?;
    PatternSet::compile(&g.bot_patterns).map_err(|e| format!("gate.bot_patterns: {e}"))?;
    if let Some(path) = &g.bot_patterns_file {
        let patterns =
            read_pattern_file(path).map_err(|e| format!("gate.bot_patterns_file: {e}"))?;
        PatternSet::compile(&patterns)
            .map_err(|e| format!("gate.bot_patterns_file ({}): {e}", path.display()))?;
    }
    Ok(())
}

/// `[retention]`.
fn retention(r: &RetentionConfig) -> Result<(), String> {
    in_range("retention.hourly_days", r.hourly_days, 1..=3650)?;
    in_range("retention.ranking_cap", r.ranking_cap, 1..=100_000)
}

/// `[rankings]`.
fn rankings(k: &RankingsConfig) -> Result<(), String> {
    in_range("rankings.max_live", k.max_live, 1..=100_000)?;
    if k.max_bytes < 1 << 20 {
        return Err(format!(
            "rankings.max_bytes = {} is invalid: must be at least 1048576 (1 MiB)",
            k.max_bytes
        ));
    }
    in_range("rankings.build_chunk", k.build_chunk, 64..=10_000_000)
}

/// The top-level request size keys.
fn request_sizes(c: &Config) -> Result<(), String> {
    in_range("max_batch_events", c.max_batch_events, 1..=100_000)?;
    if c.max_body_bytes < 1024 {
        return Err(format!(
            "max_body_bytes = {} is invalid: must be >= 1024",
            c.max_body_bytes
        ));
    }
    Ok(())
}

/// `[http]`.
fn http(h: &HttpConfig) -> Result<(), String> {
    in_range("http.header_timeout_secs", h.header_timeout_secs, 1..=3600)?;
    in_range("http.body_timeout_secs", h.body_timeout_secs, 1..=3600)?;
    in_range("http.max_connections", h.max_connections, 1..=1_000_000)?;
    in_range("http.reserved_fds", h.reserved_fds, 32..=1_000_000)?;
    in_range("http.max_uri_bytes", h.max_uri_bytes, 256..=32_768)?;
    in_range("http.max_header_bytes", h.max_header_bytes, 1024..=262_144)?;
    in_range("http.max_headers", h.max_headers, 8..=1000)
}

/// `[limits]`.
fn limits(l: &LimitsConfig) -> Result<(), String> {
    in_range("limits.ipv4_prefix", l.ipv4_prefix, 8..=32)?;
    in_range("limits.ipv6_prefix", l.ipv6_prefix, 16..=128)
}

/// `trusted_proxies` and `cors_origins`.
fn clients(c: &Config) -> Result<(), String> {
    for p in &c.trusted_proxies {
        parse_cidr(p)
            .ok_or_else(|| format!("trusted_proxies: {p:?} is not an IP address or CIDR block"))?;
    }
    for o in &c.cors_origins {
        if !valid_origin(o) {
            return Err(format!(
                "cors_origins: {o:?} is not \"*\" or an origin like \"https://example.com\" \
                 (scheme, host and optional port; no path or trailing slash)"
            ));
        }
    }
    Ok(())
}

/// `[embedded]`.
fn embedded(e: &EmbeddedConfig) -> Result<(), String> {
    if e.fsync == FsyncMode::Interval {
        in_range(
            "embedded.fsync_interval_ms",
            e.fsync_interval_ms,
            1..=10_000,
        )?;
    }
    if e.segment_bytes < 4096 {
        return Err("embedded.segment_bytes must be >= 4096".into());
    }
    Ok(())
}

/// `[redis]`: its hourly buckets fit inside `retention`; its URL is
/// checked only when `store` is the Redis store.
fn redis(rc: &RedisConfig, store: StoreKind, r: &RetentionConfig) -> Result<(), String> {
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
    in_range("redis.batch_events", rc.batch_events, 1..=10_000)?;
    if rc.connect_timeout_ms == 0 || rc.response_timeout_ms == 0 {
        return Err("redis.connect_timeout_ms and redis.response_timeout_ms must be > 0".into());
    }
    redis_layout(rc)?;
    in_range("redis.seed_refresh_secs", rc.seed_refresh_secs, 1..=3600)?;
    let urls_ok = if rc.cluster {
        rc.url.split(',').all(|u| u.trim().starts_with("redis://"))
    } else {
        rc.url.starts_with("redis://")
    };
    if store == StoreKind::Redis && !urls_ok {
        return Err(format!(
            "redis.url = {:?} is invalid: must start with redis:// (TLS is not built in)",
            rc.url
        ));
    }
    Ok(())
}

/// `redis.layout`, `redis.cluster` and `redis.shards` together: the seed
/// layout runs on one Redis with one shard.
fn redis_layout(rc: &RedisConfig) -> Result<(), String> {
    if rc.layout == RedisLayout::Seed && rc.cluster {
        return Err(
            "redis.layout = \"seed\" needs one Redis: the seeds' keys cannot share a cluster slot (set redis.cluster = false or layout = \"hotrank\")".into(),
        );
    }
    in_range("redis.shards", rc.shards, 1..=MAX_REDIS_SHARDS)?;
    if rc.shards > 1 && rc.layout == RedisLayout::Seed {
        return Err(
            "redis.shards > 1 does not write seed layout's keys (set layout = \"hotrank\" or shards = 1)".into(),
        );
    }
    Ok(())
}

/// `[pipeline]`: what it runs on, its sizes, and its journal.
fn pipeline(c: &Config, warnings: &mut Vec<String>) -> Result<(), String> {
    let pc = &c.pipeline;
    pc.role_set()?;
    if pc.enabled {
        pipeline_host(c)?;
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
        pipeline_journal(c, warnings)?;
    }
    Ok(())
}

/// An enabled pipeline needs the Redis store (one Redis, or a cluster
/// with the site in one slot: one shard) in the hotrank layout.
fn pipeline_host(c: &Config) -> Result<(), String> {
    if c.store != StoreKind::Redis {
        return Err("pipeline.enabled needs store = \"redis\"".into());
    }
    if c.redis.shards > 1 {
        return Err(
            "pipeline.enabled does not run with redis.shards > 1 yet: its streams and the positioned reads of its archive flush are one Redis's, not one shard's (set shards = 1)".into(),
        );
    }
    if c.redis.layout == RedisLayout::Seed {
        return Err(
            "pipeline.enabled does not write seed layout's keys yet: use redis.layout = \"hotrank\" with the pipeline".into(),
        );
    }
    Ok(())
}

/// `pipeline.log_url` and what the journal needs: its own Redis, a long
/// enough memory, and an archive writer that lets it be trimmed.
fn pipeline_journal(c: &Config, warnings: &mut Vec<String>) -> Result<(), String> {
    let pc = &c.pipeline;
    if !pc.log_url.starts_with("redis://") {
        return Err(format!(
            "pipeline.log_url = {:?} is invalid: must start with redis://",
            pc.log_url
        ));
    }
    if pc.journal_keep_secs < u64::from(c.gate.dedupe_window_secs) {
        return Err(format!(
            "pipeline.journal_keep_secs = {} is below gate.dedupe_window_secs = {}: a restore rebuilds the dedupe window from the journal, so it must reach back that far",
            pc.journal_keep_secs, c.gate.dedupe_window_secs
        ));
    }
    if c.archive.url.is_empty() || c.archive.flush_secs == 0 {
        warnings.push(
            "pipeline.log_url without an archive writer ([archive] url, flush_secs > 0): the journal is trimmed only after archive flushes, so it grows without bound, and a restore needs the archive".into(),
        );
    }
    if pc.log_url == c.redis.url {
        return Err(
            "pipeline.log_url must name another Redis than redis.url: the journal is what survives when that Redis loses everything".into(),
        );
    }
    Ok(())
}

/// `[archive]`.
fn archive(ac: &ArchiveConfig) -> Result<(), String> {
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
    in_range("archive.batch_articles", ac.batch_articles, 1..=10_000)?;
    in_range("archive.flush_secs", ac.flush_secs, 0..=86_400)?;
    if ac.evict_after_secs != 0 && !(3600..=10 * 366 * 86_400).contains(&ac.evict_after_secs) {
        return Err(format!(
            "archive.evict_after_secs = {} is invalid: must be 0 (never) or in 3600..=316224000",
            ac.evict_after_secs
        ));
    }
    if ac.max_connections == 0 || ac.connect_timeout_ms == 0 {
        return Err("archive.max_connections and archive.connect_timeout_ms must be > 0".into());
    }
    Ok(())
}

/// `admin_token` and `ingest_token`, when set.
fn tokens(c: &Config) -> Result<(), String> {
    for (key, tok) in [
        ("admin_token", &c.admin_token),
        ("ingest_token", &c.ingest_token),
    ] {
        if let Some(t) = tok
            && (t.len() < 8 || t.chars().any(char::is_whitespace))
        {
            return Err(format!(
                "{key} is invalid: use at least 8 characters and no whitespace"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::*;

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
        // On a cluster: the site in one slot, not over several primaries.
        let mut on_cluster = c.clone();
        on_cluster.redis.cluster = true;
        on_cluster.validate().unwrap();
        on_cluster.redis.shards = 3;
        assert!(on_cluster.validate().unwrap_err().contains("redis.shards"));
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
}
