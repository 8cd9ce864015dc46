//! The Redis side of the archive writer (docs/design.md, "Archive"):
//! `apply.lua` adds every article with a counted event to
//! `archive:dirty`; a flush takes the set by renaming it to
//! `archive:taking`, writes those articles, then deletes it, or merges it
//! back into `archive:dirty` when the write failed. A flush that died
//! half-way leaves `archive:taking`, which the next take merges in. One
//! node flushes at a time: `archive:lock` holds its token, with an expiry.

use redis::Script;

use super::{RedisStore, sorted_ids, store_err};
use crate::model::ArticleId;
use crate::store::StoreError;

/// KEYS: dirty, taking. Moves dirty into taking (keeping what a dead
/// flush left there) and returns taking's members.
const TAKE: &str = "
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('SUNIONSTORE', KEYS[2], KEYS[2], KEYS[1])
    redis.call('DEL', KEYS[1])
  else
    redis.call('RENAME', KEYS[1], KEYS[2])
  end
end
return redis.call('SMEMBERS', KEYS[2])";

/// KEYS: dirty, taking. Gives the taken ids back.
const GIVE_BACK: &str = "
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('SUNIONSTORE', KEYS[1], KEYS[1], KEYS[2])
  redis.call('DEL', KEYS[2])
end
return 1";

/// KEYS: lock. ARGV: token. Deletes the lock only if this token holds it.
const UNLOCK: &str = "
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

impl RedisStore {
    /// Takes the articles changed since the last flush (see the module
    /// docs); ids that do not parse are dropped.
    pub async fn archive_take(&self) -> Result<Vec<ArticleId>, StoreError> {
        let k = self.keys();
        let ids: Vec<String> = Script::new(TAKE)
            .key(k.archive_dirty())
            .key(k.archive_taking())
            .invoke_async(&mut self.con())
            .await
            .map_err(store_err)?;
        Ok(sorted_ids(&ids))
    }

    /// The taken articles are in the archive (at wall-clock `at`): forget
    /// them.
    pub async fn archive_taken(&self, at: i64) -> Result<(), StoreError> {
        redis::pipe()
            .del(self.keys().archive_taking())
            .set(self.keys().archive_flushed(), at)
            .query_async::<()>(&mut self.con())
            .await
            .map_err(store_err)
    }

    /// Wall-clock time (Unix s) of the last successful flush by any node.
    pub async fn archive_flushed_at(&self) -> Result<Option<i64>, StoreError> {
        redis::cmd("GET")
            .arg(self.keys().archive_flushed())
            .query_async(&mut self.con())
            .await
            .map_err(store_err)
    }

    /// The write failed: the taken articles are changed again.
    pub async fn archive_give_back(&self) -> Result<(), StoreError> {
        let k = self.keys();
        Script::new(GIVE_BACK)
            .key(k.archive_dirty())
            .key(k.archive_taking())
            .invoke_async::<i64>(&mut self.con())
            .await
            .map(drop)
            .map_err(store_err)
    }

    /// Takes the flush lock for `ttl_ms` if no node holds it.
    pub async fn archive_lock(&self, token: &str, ttl_ms: u64) -> Result<bool, StoreError> {
        let got: Option<String> = redis::cmd("SET")
            .arg(self.keys().archive_lock())
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms)
            .query_async(&mut self.con())
            .await
            .map_err(store_err)?;
        Ok(got.is_some())
    }

    /// Releases the flush lock if `token` still holds it.
    pub async fn archive_unlock(&self, token: &str) -> Result<(), StoreError> {
        Script::new(UNLOCK)
            .key(self.keys().archive_lock())
            .arg(token)
            .invoke_async::<i64>(&mut self.con())
            .await
            .map(drop)
            .map_err(store_err)
    }
}
