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
        if k.spans_slots() {
            // Each shard keeps its own `archive:dirty` there (keys.rs
            // `Keys::ledger`); the writer and eviction read the site's.
            return Err(StoreError::Internal(
                "the archive does not run over a site spread over cluster slots yet".into(),
            ));
        }
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

// ---- Eviction and restore (docs/design.md, "Eviction and restore") ----

use std::sync::LazyLock;

use crate::archive::Archive;
use crate::model::Timestamp;
use crate::store::dump::Record;

static EVICT: LazyLock<Script> = LazyLock::new(|| super::script(include_str!("evict.lua")));
static RESTORE: LazyLock<Script> = LazyLock::new(|| super::script(include_str!("restore.lua")));

/// The tombstoned ids of an ingest or count call's `{'evicted', id…}`
/// answer (`evicted.lua`), or `None` for any other answer.
pub(super) fn evicted_reply(v: &redis::Value) -> Option<Vec<ArticleId>> {
    let redis::Value::Array(items) = v else {
        return None;
    };
    if items.first().and_then(super::v_str) != Some("evicted") {
        return None;
    }
    Some(
        items[1..]
            .iter()
            .filter_map(|i| ArticleId::parse(super::v_str(i)?).ok())
            .collect(),
    )
}

impl RedisStore {
    /// The archive this node restores evicted articles from (set once the
    /// archive writer connected).
    pub fn set_archive(&self, archive: Archive) {
        let _ = self.archive.set(archive);
    }

    /// The flushed articles are archived as of data time `now`: their idle
    /// clock restarts.
    pub(crate) async fn archive_written(
        &self,
        ids: &[ArticleId],
        now: Timestamp,
    ) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for part in ids.chunks(500) {
            let c = pipe.cmd("ZADD").arg(self.keys().archive_written());
            for id in part {
                c.arg(now).arg(id.as_str());
            }
        }
        pipe.query_async::<()>(&mut self.con())
            .await
            .map_err(store_err)
    }

    /// Up to `limit` articles archived at or before `cutoff`, skipping the
    /// first `skip` (those a previous batch of this round kept).
    pub(crate) async fn evict_candidates(
        &self,
        cutoff: Timestamp,
        skip: usize,
        limit: usize,
    ) -> Result<Vec<ArticleId>, StoreError> {
        let ids: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(self.keys().archive_written())
            .arg("-inf")
            .arg(cutoff)
            .arg("LIMIT")
            .arg(skip)
            .arg(limit)
            .query_async(&mut self.con())
            .await
            .map_err(store_err)?;
        Ok(ids
            .iter()
            .filter_map(|i| ArticleId::parse(i).ok())
            .collect())
    }

    /// Forgets ids with nothing in Redis to evict (no meta).
    pub(crate) async fn unwritten(&self, ids: &[ArticleId]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        redis::cmd("ZREM")
            .arg(self.keys().archive_written())
            .arg(ids.iter().map(|i| i.as_str()).collect::<Vec<_>>())
            .query_async::<()>(&mut self.con())
            .await
            .map_err(store_err)
    }

    /// The whole state of `ids` (daily buckets included), to archive
    /// before they are evicted.
    pub async fn eviction_records(
        &self,
        ids: &[ArticleId],
        now: Timestamp,
    ) -> Result<Vec<Record>, StoreError> {
        super::dump::article_records_whole(self, ids, now).await
    }

    /// Evicts the articles of `records` (just archived whole) that are
    /// still unchanged and archived at or before `cutoff` (`evict.lua`):
    /// deletes exactly the keys whose values the records hold. Returns the
    /// evicted ids.
    pub async fn evict(
        &self,
        records: &[Record],
        cutoff: Timestamp,
    ) -> Result<Vec<ArticleId>, StoreError> {
        let k = self.keys();
        let mut keys = vec![
            k.archive_dirty(),
            k.archive_taking(),
            k.archive_written(),
            k.archive_evicted(),
        ];
        let mut args: Vec<String> = vec![cutoff.to_string(), String::new()];
        let mut n = 0;
        for r in records {
            let Record::Article {
                id, hours, days, ..
            } = r
            else {
                continue;
            };
            let before = keys.len();
            keys.extend([k.views(id), k.uv(id), k.counters(id), k.voted(id)]);
            for b in hours {
                keys.push(k.bucket_h(id, b.at));
                keys.push(k.uv_h(id, b.at));
            }
            for b in days {
                keys.push(k.bucket_d(id, b.at));
                keys.push(k.uv_d(id, b.at));
            }
            args.push(id.to_string());
            args.push((keys.len() - before).to_string());
            n += 1;
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        args[1] = n.to_string();
        let mut inv = EVICT.prepare_invoke();
        for key in &keys {
            inv.key(key);
        }
        for a in &args {
            inv.arg(a);
        }
        let gone: Vec<String> = inv.invoke_async(&mut self.con()).await.map_err(store_err)?;
        Ok(gone
            .iter()
            .filter_map(|i| ArticleId::parse(i).ok())
            .collect())
    }

    /// Which of `ids` are evicted (one `SMISMEMBER`).
    pub async fn evicted_among(&self, ids: &[ArticleId]) -> Result<Vec<ArticleId>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let got: Vec<bool> = redis::cmd("SMISMEMBER")
            .arg(self.keys().archive_evicted())
            .arg(ids.iter().map(|i| i.as_str()).collect::<Vec<_>>())
            .query_async(&mut self.con())
            .await
            .map_err(store_err)?;
        let mut out: Vec<ArticleId> = ids
            .iter()
            .zip(got)
            .filter(|(_, e)| *e)
            .map(|(i, _)| i.clone())
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Restores the evicted ones among `ids` from the archive, if this
    /// node has one (without, nothing is ever evicted by it and this is a
    /// no-op). Returns how many this call restored.
    pub async fn restore_if_evicted(
        &self,
        ids: &[ArticleId],
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        if self.archive.get().is_none() || ids.is_empty() {
            return Ok(0);
        }
        let gone = self.evicted_among(ids).await?;
        self.restore(&gone, now).await
    }

    /// Restores `ids` (evicted ones; others are left alone) from the
    /// archive: their records are read in batches (one query per table)
    /// and each written back with `restore.lua`, atomically with the
    /// removal of its tombstone (one pipelined round trip per batch).
    pub async fn restore(&self, ids: &[ArticleId], now: Timestamp) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let Some(archive) = self.archive.get() else {
            return Err(StoreError::Unavailable(format!(
                "article {} was evicted to the archive, which this node cannot reach yet ([archive] url)",
                ids[0]
            )));
        };
        let mut restored = 0;
        for part in ids.chunks(200) {
            let started = std::time::Instant::now();
            let read: std::pin::Pin<
                Box<
                    dyn Future<Output = Result<Vec<Record>, crate::archive::ArchiveError>>
                        + Send
                        + '_,
                >,
            > = Box::pin(archive.articles(part));
            let records = read
                .await
                .map_err(|e| StoreError::Unavailable(e.to_string()))?;
            if records.len() != part.len() {
                return Err(StoreError::Internal(format!(
                    "evicted articles missing from the archive among {part:?}"
                )));
            }
            let calls = records
                .iter()
                .map(|r| self.restore_call(r, now))
                .collect::<Result<Vec<_>, _>>()?;
            let mut con = self.con();
            RESTORE
                .prepare_invoke()
                .load_async(&mut con)
                .await
                .map_err(store_err)?;
            let mut pipe = redis::pipe();
            for (keys, args) in &calls {
                let c = pipe.cmd("EVALSHA").arg(RESTORE.get_hash()).arg(keys.len());
                for k in keys {
                    c.arg(&k[..]);
                }
                for a in args {
                    c.arg(&a[..]);
                }
            }
            let done: Vec<i64> = pipe.query_async(&mut con).await.map_err(store_err)?;
            let n = done.iter().filter(|d| **d == 1).count() as u64;
            restored += n;
            metrics::counter!("hotrank_archive_restored_total").increment(n);
            let each = started.elapsed().as_secs_f64() / part.len() as f64;
            for _ in 0..n {
                metrics::histogram!("hotrank_archive_restore_seconds").record(each);
            }
        }
        Ok(restored)
    }

    /// The KEYS and ARGV of one `restore.lua` call for an archived record.
    #[allow(clippy::type_complexity)]
    fn restore_call(
        &self,
        record: &Record,
        now: Timestamp,
    ) -> Result<(Vec<Vec<u8>>, Vec<Vec<u8>>), StoreError> {
        let Record::Article { id, .. } = record else {
            return Err(StoreError::Internal("restore: not an article".into()));
        };
        let mut pipe = redis::pipe();
        super::dump::article_writes(&mut pipe, self, record, &self.settings, now, false)
            .map_err(StoreError::Internal)?;
        let k = self.keys();
        let mut keys = vec![
            k.archive_evicted().into_bytes(),
            k.archive_written().into_bytes(),
        ];
        let mut args = vec![
            id.as_str().as_bytes().to_vec(),
            now.to_string().into_bytes(),
        ];
        for c in pipe.cmd_iter() {
            let mut parts = c.args_iter().filter_map(|a| match a {
                redis::Arg::Simple(b) => Some(b),
                _ => None,
            });
            let Some(name) = parts.next() else { continue };
            let rest: Vec<&[u8]> = parts.collect();
            if let Some(key) = rest.first() {
                keys.push(key.to_vec());
            }
            args.push(rest.len().to_string().into_bytes());
            args.push(name.to_vec());
            args.extend(rest.iter().map(|a| a.to_vec()));
        }
        Ok((keys, args))
    }
}
