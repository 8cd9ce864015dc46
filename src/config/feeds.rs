//! The ranking feeds' and live stream's settings (`[feeds]`).

use serde::{Deserialize, Serialize};

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
