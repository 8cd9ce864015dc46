//! The composition root: the one place that reads the configuration and
//! builds the running parts of hotrank — the store it names (embedded or
//! Redis), the ingest pipeline and its workers when `[pipeline]` is on,
//! and the archive writer when `[archive]` asks for one. `main.rs` and
//! every command-line tool ask this module for what they run on; nothing
//! else decides which store to open.

use std::sync::Arc;

use crate::clock::{Clock, SystemClock};
use crate::config::{Config, RedisLayout, StoreKind};
use crate::pipeline::{
    ArchiveTask, IngestPipeline, PipelineStore, Workers, spawn_workers, spawn_writer,
};
use crate::store::embedded::{Durability, EmbeddedStore};
use crate::store::redis::{RedisOptions, RedisStore, SEED_LAYOUT_LIMITS};
use crate::store::{Queue, Store, StoreSettings};
use crate::webhooks::{EmbeddedOutbox, Outbox, RedisOutbox, Webhooks};

/// The embedded store in the configured data dir, opened and recovered
/// (snapshot, then the log), with what recovery found logged.
pub fn open_embedded(config: &Config) -> Result<EmbeddedStore, String> {
    let (store, report) = EmbeddedStore::open(
        Durability::from_config(config),
        StoreSettings::from_config(config),
    )
    .map_err(|e| e.to_string())?;
    tracing::info!(
        data_dir = %config.data_dir.display(),
        snapshot_seq = ?report.snapshot_seq,
        replayed_records = report.replayed_records,
        truncated_bytes = report.truncated_bytes,
        articles = report.articles,
        ms = report.elapsed_ms as u64,
        "embedded store opened"
    );
    Ok(store)
}

/// The configured Redis store (it connects lazily: Redis may be down).
/// Inside a tokio runtime.
pub fn open_redis(config: &Config) -> Result<RedisStore, String> {
    let store = RedisStore::connect(
        RedisOptions::from_config(config),
        StoreSettings::from_config(config),
    )
    .map_err(|e| e.to_string())?;
    tracing::info!(prefix = %config.redis.prefix, "redis store (connects lazily)");
    if config.redis.layout == RedisLayout::Seed {
        tracing::warn!("{SEED_LAYOUT_LIMITS}");
    }
    Ok(store)
}

/// The store the configuration names, for a server: the embedded store
/// builds its default ranking in the background (`/readyz` answers 503
/// until it is built). Inside a tokio runtime.
pub fn open_store(config: &Config) -> Result<Arc<dyn Store>, String> {
    match config.store {
        StoreKind::Embedded => {
            let store = open_embedded(config)?;
            store.warm_in_background(SystemClock.now());
            Ok(Arc::new(store))
        }
        StoreKind::Redis => Ok(Arc::new(open_redis(config)?)),
    }
}

/// The curation state (pins, exclusions, review) of the configured store:
/// `curation.json` in the data dir for the embedded store, the site's
/// `curation` hash for Redis (read through a cache of
/// [`crate::curation::REDIS_CACHE`]). Inside a tokio runtime for Redis.
pub fn open_curation(config: &Config) -> Result<crate::curation::Curator, String> {
    use crate::curation::{Curator, REDIS_CACHE, file::FileCuration, redis::RedisCuration};
    Ok(match config.store {
        StoreKind::Embedded => Curator::new(
            Arc::new(FileCuration::open(&config.data_dir)?),
            // Every change goes through this process, which clears it.
            std::time::Duration::MAX,
        ),
        StoreKind::Redis => {
            let redis = open_redis(config)?;
            Curator::new(
                Arc::new(RedisCuration::new(redis.con(), redis.keys())),
                REDIS_CACHE,
            )
        }
    })
}

/// The pipeline over the configured Redis, its consumer groups created if
/// Redis is up. Inside a tokio runtime.
pub async fn open_pipeline(config: &Config) -> Result<Arc<IngestPipeline>, String> {
    let store = RedisStore::connect(
        RedisOptions::from_config(config),
        StoreSettings::from_config(config),
    )
    .map_err(|e| e.to_string())?;
    let pipe = Arc::new(
        IngestPipeline::new(Arc::new(store), config.pipeline.clone())
            .with_journal(&config.pipeline.log_url)
            .map_err(|e| e.to_string())?,
    );
    // Like the store, start without Redis: workers create the groups once
    // it is up (from the streams' start, so nothing appended meanwhile is
    // missed).
    if let Err(e) = pipe.ensure_groups().await {
        tracing::warn!(error = %e, "pipeline: consumer groups not created yet");
    }
    Ok(pipe)
}

/// The Redis outbox of webhooks, in the store's keys (its prefix, on a
/// cluster its hash tag).
fn redis_outbox(store: &RedisStore) -> Arc<dyn Outbox> {
    Arc::new(RedisOutbox::new(store.con(), &store.keys().prefix))
}

/// Webhooks over `store` and `outbox`, if `[webhooks] enabled`.
fn start_webhooks(
    config: &Config,
    store: &Arc<dyn Store>,
    outbox: Arc<dyn Outbox>,
) -> Result<Option<Arc<Webhooks>>, String> {
    if !config.webhooks.enabled {
        return Ok(None);
    }
    let parse: crate::webhooks::QueryParser =
        |q, config| crate::api::webhook_query(q, config).map_err(|e| e.to_string());
    Webhooks::start(config, store.clone(), outbox, Arc::new(SystemClock), parse).map(Some)
}

/// Connects a node's webhooks to its API state: the routes serve them, and
/// the evaluator reads the public list (curation applied) through the
/// API's [`crate::api::public_ranking`] and the held articles through
/// [`crate::api::held_articles`], passed in like the query parser
/// so the webhooks module does not depend on the API.
pub fn attach_webhooks(state: &crate::api::AppState, webhooks: &Arc<Webhooks>) {
    let _ = state.webhooks.set(webhooks.clone());
    webhooks.read_public(crate::api::public_ranking(state));
    webhooks.read_held(crate::api::held_articles(state));
}

/// What a process runs besides its HTTP server, built from the
/// configuration: [`Parts::stop`] stops it in order.
pub struct Parts {
    /// The store the API serves; `None` for a process with workers only
    /// (`hotrank worker`, or `[pipeline] roles` without `api`).
    pub store: Option<Arc<dyn Store>>,
    /// Where the API queues events instead (the pipeline), if anywhere.
    pub queue: Option<Arc<dyn Queue>>,
    /// The webhooks' evaluator and sender (API nodes, `[webhooks] enabled`).
    pub webhooks: Option<Arc<Webhooks>>,
    workers: Option<Workers>,
    archiver: Option<ArchiveTask>,
}

impl Parts {
    /// Builds every part the configuration asks for (`roles` decides,
    /// with the pipeline on, which of the API, filter and count workers
    /// this process runs). Inside a tokio runtime.
    pub async fn start(config: &Config) -> Result<Parts, String> {
        if config.pipeline.enabled {
            let (api, filter, count) = config.pipeline.role_set()?;
            let pipe = open_pipeline(config).await?;
            let k = config.pipeline.workers;
            let workers =
                spawn_workers(&pipe, if filter { k } else { 0 }, if count { k } else { 0 });
            // The archive writer runs on API nodes, as with the direct
            // store, and on nodes that count.
            let archiver = if api || count {
                spawn_writer(config, pipe.store().clone(), Some(pipe.clone()))
            } else {
                None
            };
            if api {
                tracing::info!(roles = %config.pipeline.roles, "redis store with the ingest pipeline");
            }
            let outbox = redis_outbox(pipe.store());
            let queued = api.then(|| Arc::new(PipelineStore::new(pipe)));
            let store = queued.clone().map(|q| q as Arc<dyn Store>);
            let queue = queued.map(|q| q as Arc<dyn Queue>);
            let webhooks = match &store {
                Some(s) => start_webhooks(config, s, outbox)?,
                None => None,
            };
            return Ok(Parts {
                store,
                queue,
                webhooks,
                workers: Some(workers),
                archiver,
            });
        }
        if config.store == StoreKind::Redis {
            let store = Arc::new(open_redis(config)?);
            let archiver = spawn_writer(config, store.clone(), None);
            let webhooks = start_webhooks(
                config,
                &(store.clone() as Arc<dyn Store>),
                redis_outbox(&store),
            )?;
            return Ok(Parts {
                store: Some(store),
                queue: None,
                webhooks,
                workers: None,
                archiver,
            });
        }
        let store = open_store(config)?;
        let webhooks = if config.webhooks.enabled {
            let outbox = EmbeddedOutbox::open(&config.data_dir)
                .map_err(|e| format!("webhooks log in {}: {e}", config.data_dir.display()))?;
            start_webhooks(config, &store, Arc::new(outbox))?
        } else {
            None
        };
        Ok(Parts {
            store: Some(store),
            queue: None,
            webhooks,
            workers: None,
            archiver: None,
        })
    }

    /// Stops the workers after their current step, then the archive writer
    /// (which flushes once more).
    pub async fn stop(self) {
        if let Some(w) = self.webhooks {
            w.stop().await;
        }
        if let Some(w) = self.workers {
            w.stop().await;
        }
        if let Some(a) = self.archiver {
            a.stop().await;
        }
    }
}
