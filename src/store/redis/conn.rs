//! The connection: one Redis (reconnecting by itself) or a Redis
//! Cluster (connected on first use), behind one [`ConnectionLike`].

use std::sync::Arc;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::slots;

/// A connection to one Redis or to a Redis Cluster; both reconnect by
/// themselves. The cluster client follows `MOVED`/`ASK` and topology
/// changes; every pipeline this store sends touches one slot.
#[derive(Clone)]
pub enum Con {
    /// One redis-server; with a cluster's key names
    /// (`RedisOptions::cluster_names`), the log of calls a cluster would
    /// not run as one slot (slots.rs).
    One(ConnectionManager, Option<Arc<slots::SlotLog>>),
    Cluster(Arc<LazyCluster>),
}

/// A cluster connection made on first use (the store connects lazily: a
/// cluster that is down now is reached as soon as it is up).
pub struct LazyCluster {
    pub(super) client: ClusterClient,
    pub(super) con: tokio::sync::OnceCell<ClusterConnection>,
}

impl LazyCluster {
    async fn get(&self) -> redis::RedisResult<ClusterConnection> {
        self.con
            .get_or_try_init(|| self.client.get_async_connection())
            .await
            .cloned()
    }
}

impl Con {
    /// One `SCAN` step over keys matching `pattern`. On a cluster it asks
    /// the primary of `site_key`'s slot, where every key of the site is.
    pub async fn scan(
        &mut self,
        site_key: &str,
        cursor: u64,
        pattern: &str,
        count: usize,
    ) -> redis::RedisResult<(u64, Vec<String>)> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count);
        self.query_at(site_key, cmd).await
    }

    /// Runs `cmd`, a command that names no key (`SCAN`, `TIME`), where
    /// `site_key` is: on a cluster, on the primary of its slot (a cluster
    /// client would send such a command to any node).
    pub async fn query_at<T: redis::FromRedisValue>(
        &mut self,
        site_key: &str,
        cmd: Cmd,
    ) -> redis::RedisResult<T> {
        match self {
            Con::One(c, _) => cmd.query_async(c).await,
            Con::Cluster(l) => {
                use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
                let route = Route::with_key(site_key, SlotAddr::Master);
                let v = l
                    .get()
                    .await?
                    .route_command(
                        cmd,
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                    )
                    .await?;
                Ok(redis::from_redis_value(v)?)
            }
        }
    }
}

impl ConnectionLike for Con {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Con::One(c, log) => {
                if let Some(log) = log {
                    log.check(cmd);
                }
                c.req_packed_command(cmd)
            }
            Con::Cluster(l) => {
                Box::pin(async move { l.get().await?.req_packed_command(cmd).await })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Con::One(c, log) => {
                if let Some(log) = log {
                    log.check_pipeline(pipeline);
                }
                c.req_packed_commands(pipeline, offset, count)
            }
            Con::Cluster(l) => Box::pin(async move {
                l.get()
                    .await?
                    .req_packed_commands(pipeline, offset, count)
                    .await
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Con::One(c, _) => c.get_db(),
            Con::Cluster(_) => 0,
        }
    }
}
