//! Configuration: a TOML file (`--config FILE`), then command-line flags and
//! environment variables on top. Every key and its default is listed in the
//! README ("Configuration"); `Config::default()` is the source of truth.

mod archive;
mod ctr;
mod dashboard;
mod feeds;
mod http;
mod pipeline;
mod rankings;
mod redact;
mod review;
mod store;
mod validate;
mod webhooks;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::gate::config::GateConfig;
use crate::score::Models;
pub use archive::{ArchiveConfig, valid_archive_schema};
pub use ctr::CtrConfig;
pub use dashboard::{DashboardConfig, valid_time_zone};
pub use feeds::FeedsConfig;
pub use http::{HttpConfig, LimitsConfig, cidr_contains, parse_cidr};
pub use pipeline::PipelineConfig;
pub use rankings::{RankingsConfig, RetentionConfig};
pub use review::{ReviewConfig, ReviewMode};
pub use store::{
    EmbeddedConfig, FsyncMode, MAX_REDIS_SHARDS, RedisConfig, RedisLayout, StoreKind,
    valid_redis_prefix,
};
pub use webhooks::WebhooksConfig;

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
    pub webhooks: WebhooksConfig,
    pub review: ReviewConfig,
    pub dashboard: DashboardConfig,
    pub ctr: CtrConfig,
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
            webhooks: WebhooksConfig::default(),
            review: ReviewConfig::default(),
            dashboard: DashboardConfig::default(),
            ctr: CtrConfig::default(),
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

impl Config {
    /// Reads a TOML file; unknown keys are errors.
    pub fn from_file(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("config file {}: {e}", path.display()))
    }

    /// Retention in seconds.
    pub fn retention_secs(&self) -> i64 {
        i64::from(self.retention.hourly_days) * 86_400
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
}
