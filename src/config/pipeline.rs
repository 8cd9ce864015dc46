//! The counting pipeline's settings (`[pipeline]`).

use serde::{Deserialize, Serialize};

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
