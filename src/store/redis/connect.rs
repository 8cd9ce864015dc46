//! Making a store: the connection, the key layout and the scripts a
//! [`RedisOptions`] asks for, and what the store tells about itself.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;

use super::cache::NodeCache;
use super::conn::LazyCluster;
use super::scripts::{Scripts, ingest_script_with};
use super::{Con, Keys, RedisOptions, RedisStore, keys, seed, valid_prefix, warm};
use crate::store::StoreSettings;

/// Why [`RedisStore::connect`] refused its options.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("redis.prefix {0:?} is invalid: use at most 64 of [A-Za-z0-9_:.-]")]
    Prefix(String),
    #[error("redis.layout = \"seed\" needs one Redis, not a cluster")]
    SeedCluster,
    #[error(
        "redis.shards = {0} is invalid here: more than one shard needs the hotrank layout (the seeds' keys have no shards)"
    )]
    Shards(u32),
    #[error("redis.url {url:?} is invalid: {source}")]
    Url {
        url: String,
        #[source]
        source: redis::RedisError,
    },
    #[error("redis connection manager: {0}")]
    Manager(#[source] redis::RedisError),
}

impl RedisStore {
    /// A store on `opts.url`. Connects lazily: a Redis that is down now is
    /// reported by `ready()` and reached as soon as it is up. Call it
    /// inside a Tokio runtime (the connection task is spawned on it).
    pub fn connect(opts: RedisOptions, settings: StoreSettings) -> Result<Self, ConnectError> {
        if !valid_prefix(&opts.prefix) {
            return Err(ConnectError::Prefix(opts.prefix));
        }
        let connect = Duration::from_millis(opts.connect_timeout_ms);
        let respond = Duration::from_millis(opts.response_timeout_ms);
        if opts.seed_layout && (opts.cluster || opts.cluster_names) {
            return Err(ConnectError::SeedCluster);
        }
        if opts.shards == 0 || (opts.shards > 1 && opts.seed_layout) {
            return Err(ConnectError::Shards(opts.shards));
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
                .map_err(|source| ConnectError::Url {
                    url: opts.url.clone(),
                    source,
                })?;
            Con::Cluster(Arc::new(LazyCluster {
                client,
                con: tokio::sync::OnceCell::new(),
            }))
        } else {
            let client =
                redis::Client::open(opts.url.as_str()).map_err(|source| ConnectError::Url {
                    url: opts.url.clone(),
                    source,
                })?;
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(connect))
                .set_response_timeout(Some(respond))
                .set_number_of_retries(1)
                .set_min_delay(Duration::from_millis(50))
                .set_max_delay(Duration::from_millis(500));
            Con::One(
                ConnectionManager::new_lazy_with_config(client, config)
                    .map_err(ConnectError::Manager)?,
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
}
