//! The Redis store's curation: one hash per site, `<prefix>curation`
//! (docs/redis-keys.md, "Curation"), in the site's slot on a cluster
//! (the prefix is the site's hash tag there). Every node reads it through
//! [`super::Curator`]'s cache, so a change made on one node shows on the
//! others within [`super::REDIS_CACHE`].

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::CurationStore;
use crate::store::StoreError;
use crate::store::redis::{Con, Keys};

pub struct RedisCuration {
    con: Con,
    key: String,
}

impl RedisCuration {
    /// Over `con`, the site whose key names `keys` builds.
    pub fn new(con: Con, keys: &Keys) -> Self {
        RedisCuration {
            con,
            key: format!("{}curation", keys.prefix),
        }
    }
}

fn unavailable(e: redis::RedisError) -> StoreError {
    StoreError::Unavailable(format!("redis: {e}"))
}

#[async_trait]
impl CurationStore for RedisCuration {
    async fn entries(&self) -> Result<BTreeMap<String, String>, StoreError> {
        let mut con = self.con.clone();
        redis::cmd("HGETALL")
            .arg(&self.key)
            .query_async(&mut con)
            .await
            .map_err(unavailable)
    }

    async fn set(&self, field: &str, value: Option<&str>) -> Result<(), StoreError> {
        let mut con = self.con.clone();
        let cmd = match value {
            Some(v) => {
                let mut c = redis::cmd("HSET");
                c.arg(&self.key).arg(field).arg(v);
                c
            }
            None => {
                let mut c = redis::cmd("HDEL");
                c.arg(&self.key).arg(field);
                c
            }
        };
        cmd.query_async::<i64>(&mut con)
            .await
            .map(drop)
            .map_err(unavailable)
    }

    async fn set_new(&self, entries: &[(String, String)]) -> Result<Vec<bool>, StoreError> {
        let mut con = self.con.clone();
        let mut pipe = redis::pipe();
        for (k, v) in entries {
            pipe.cmd("HSETNX").arg(&self.key).arg(k).arg(v);
        }
        let set: Vec<i64> = pipe.query_async(&mut con).await.map_err(unavailable)?;
        Ok(set.into_iter().map(|n| n == 1).collect())
    }
}
