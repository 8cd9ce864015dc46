//! Seed 002's pipeline as a store for the suites that must run unchanged
//! on it (issue 14): `PipelineStore::ingest` queues each call's events as
//! an API node does, runs filter and count steps itself until they are
//! decided and applied, and answers their verdicts. One partition keeps
//! the gate's order the order of the call, as the direct store sees it.

use std::sync::Arc;

use hotrank::config::PipelineConfig;
use hotrank::pipeline::{IngestPipeline, PipelineStore};
use hotrank::store::redis::RedisStore;

/// The pipeline in front of `store`, with no workers of its own.
pub async fn inline_pipeline(store: Arc<RedisStore>) -> PipelineStore {
    let cfg = PipelineConfig {
        enabled: true,
        partitions: 1,
        batch: 500,
        block_ms: 1,
        ..PipelineConfig::default()
    };
    let pipe = Arc::new(IngestPipeline::new(store, cfg));
    pipe.ensure_groups().await.expect("consumer groups");
    PipelineStore::new(pipe)
}
