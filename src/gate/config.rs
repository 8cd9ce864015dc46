//! The gate's settings (`[gate]` of the configuration).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

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
