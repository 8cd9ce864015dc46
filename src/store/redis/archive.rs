//! The Redis side of the archive writer (docs/design.md, "Archive"):
//! `apply.lua` adds every article with a counted event to
//! `archive:dirty`; a flush takes the set by renaming it to
//! `archive:taking`, writes those articles, then deletes it, or merges it
//! back into `archive:dirty` when the write failed. A flush that died
//! half-way leaves `archive:taking`, which the next take merges in. One
//! node flushes at a time: `archive:lock` holds its token, with an expiry.
//!
//! When the site spans cluster slots (article shards on a cluster), each
//! shard keeps its own `archive:dirty`, `archive:taking`,
//! `archive:written` and `archive:evicted` in its slot (`Keys::ledger`):
//! every call below then runs once per shard, each touching one slot, and
//! the writer above sees one site. The lock and `archive:flushed` stay in
//! the site's slot.

use std::sync::LazyLock;

use redis::Script;

use super::{RedisStore, sorted_ids, store_err};
use crate::model::ArticleId;
use crate::store::StoreError;

/// KEYS: dirty, taking (one shard's copies). Moves dirty into taking
/// (keeping what a dead flush left there) and returns taking's members.
static TAKE: LazyLock<Script> = LazyLock::new(|| {
    super::script(
        "
local dirty, taking = K(KEYS[1]), K(KEYS[2])
if redis.call('EXISTS', dirty) == 1 then
  if redis.call('EXISTS', taking) == 1 then
    redis.call('SUNIONSTORE', taking, taking, dirty)
    redis.call('DEL', dirty)
  else
    redis.call('RENAME', dirty, taking)
  end
end
return redis.call('SMEMBERS', taking)",
    )
});

/// KEYS: dirty, taking (one shard's copies). Gives the taken ids back.
static GIVE_BACK: LazyLock<Script> = LazyLock::new(|| {
    super::script(
        "
local dirty, taking = K(KEYS[1]), K(KEYS[2])
if redis.call('EXISTS', taking) == 1 then
  redis.call('SUNIONSTORE', dirty, dirty, taking)
  redis.call('DEL', taking)
end
return 1",
    )
});

/// KEYS: lock. ARGV: token. Deletes the lock only if this token holds it.
const UNLOCK: &str = "
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

static EVICT: LazyLock<Script> = LazyLock::new(|| super::script(include_str!("evict.lua")));
static RESTORE: LazyLock<Script> = LazyLock::new(|| super::script(include_str!("restore.lua")));

/// The archive's scripts, loaded with the store's (`load_scripts`), so
/// `eval_each` reloads them after a `NOSCRIPT`.
pub(super) fn scripts() -> [&'static Script; 4] {
    [&TAKE, &GIVE_BACK, &EVICT, &RESTORE]
}

/// One call of `TAKE` or `GIVE_BACK` per copy of the site's
/// `archive:dirty` and `archive:taking` (one per shard when the site
/// spans slots).
fn dirty_and_taking(store: &RedisStore) -> Vec<(Vec<String>, Vec<String>)> {
    let k = store.keys();
    k.ledgers("archive:dirty")
        .into_iter()
        .zip(k.ledgers("archive:taking"))
        .map(|(dirty, taking)| (vec![dirty, taking], Vec::new()))
        .collect()
}

impl RedisStore {
    /// Takes the articles changed since the last flush (see the module
    /// docs), every shard's; ids that do not parse are dropped.
    pub async fn archive_take(&self) -> Result<Vec<ArticleId>, StoreError> {
        let taken: Vec<Vec<String>> = self.eval_each(&TAKE, &dirty_and_taking(self)).await?;
        Ok(sorted_ids(&taken.concat()))
    }

    /// The taken articles are in the archive (at wall-clock `at`): forget
    /// them.
    pub async fn archive_taken(&self, at: i64) -> Result<(), StoreError> {
        let k = self.keys();
        let mut pipe = redis::pipe();
        for taking in k.ledgers("archive:taking") {
            pipe.del(taking);
        }
        pipe.set(k.archive_flushed(), at);
        self.query_pipe::<Vec<redis::Value>>(&pipe)
            .await
            .map(drop)
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
        self.eval_each::<i64, _>(&GIVE_BACK, &dirty_and_taking(self))
            .await
            .map(drop)
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

use crate::model::Timestamp;
use crate::store::dump::{ArticleSource, Record};

/// The tombstoned ids of an ingest or count call's `{'evicted', id…}`
/// answer (`evicted.lua`), or `None` for any other answer.
pub(crate) fn evicted_reply(v: &redis::Value) -> Option<Vec<ArticleId>> {
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
    pub fn set_archive(&self, archive: impl ArticleSource + 'static) {
        let _ = self.archive.set(Box::new(archive));
    }

    /// `ids` grouped by their copy of the site's bookkeeping `name`
    /// (`Keys::ledger`): one group on one slot, one per shard with any
    /// id when the site spans slots; each group's ids in the order given.
    fn by_ledger<'a>(&self, ids: &'a [ArticleId], name: &str) -> Vec<(String, Vec<&'a ArticleId>)> {
        let k = self.keys();
        let mut out: Vec<(String, Vec<&'a ArticleId>)> = Vec::new();
        for group in k.group_by_shard(ids, |i| i) {
            let Some(first) = group.first() else {
                continue;
            };
            let copy = k.ledger(first, name);
            // On one slot every shard's group names the same copy.
            match out.iter_mut().find(|(c, _)| *c == copy) {
                Some((_, all)) => all.extend(group),
                None => out.push((copy, group)),
            }
        }
        out
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
        for (written, group) in self.by_ledger(ids, "archive:written") {
            for part in group.chunks(500) {
                let c = pipe.cmd("ZADD").arg(&written);
                for id in part {
                    c.arg(now).arg(id.as_str());
                }
            }
        }
        self.query_pipe::<Vec<redis::Value>>(&pipe)
            .await
            .map(drop)
            .map_err(store_err)
    }

    /// Up to `limit` articles archived at or before `cutoff`, skipping the
    /// first `skip` (those a previous batch of this round kept), in the
    /// order of one `archive:written` (by time, then id) however many
    /// shards keep a copy: each copy's first `skip + limit`, merged.
    pub(crate) async fn evict_candidates(
        &self,
        cutoff: Timestamp,
        skip: usize,
        limit: usize,
    ) -> Result<Vec<ArticleId>, StoreError> {
        let mut pipe = redis::pipe();
        for written in self.keys().ledgers("archive:written") {
            pipe.cmd("ZRANGEBYSCORE")
                .arg(written)
                .arg("-inf")
                .arg(cutoff)
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(0)
                .arg(skip + limit);
        }
        let copies: Vec<Vec<(String, f64)>> = self.query_pipe(&pipe).await.map_err(store_err)?;
        let mut all: Vec<(f64, String)> = copies
            .into_iter()
            .flatten()
            .map(|(id, at)| (at, id))
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        Ok(all
            .into_iter()
            .skip(skip)
            .take(limit)
            .filter_map(|(_, i)| ArticleId::parse(&i).ok())
            .collect())
    }

    /// Forgets ids with nothing in Redis to evict (no meta).
    pub(crate) async fn unwritten(&self, ids: &[ArticleId]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for (written, group) in self.by_ledger(ids, "archive:written") {
            pipe.cmd("ZREM")
                .arg(written)
                .arg(group.iter().map(|i| i.as_str()).collect::<Vec<_>>());
        }
        self.query_pipe::<Vec<redis::Value>>(&pipe)
            .await
            .map(drop)
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
    /// still unchanged and archived at or before `cutoff` (`evict.lua`,
    /// one call per shard copy of the archive's bookkeeping): deletes
    /// exactly the keys whose values the records hold. Returns the
    /// evicted ids.
    pub async fn evict(
        &self,
        records: &[Record],
        cutoff: Timestamp,
    ) -> Result<Vec<ArticleId>, StoreError> {
        let k = self.keys();
        // Each article's keys whose values its record holds.
        let mut own: Vec<(ArticleId, Vec<String>)> = Vec::new();
        for r in records {
            let Record::Article {
                id, hours, days, ..
            } = r
            else {
                continue;
            };
            let mut keys = vec![k.views(id), k.uv(id), k.counters(id), k.voted(id)];
            for b in hours {
                keys.push(k.bucket_h(id, b.at));
                keys.push(k.uv_h(id, b.at));
            }
            for b in days {
                keys.push(k.bucket_d(id, b.at));
                keys.push(k.uv_d(id, b.at));
            }
            own.push((id.clone(), keys));
        }
        let ids: Vec<ArticleId> = own.iter().map(|(id, _)| id.clone()).collect();
        let own: std::collections::HashMap<&ArticleId, &Vec<String>> =
            own.iter().map(|(id, keys)| (id, keys)).collect();
        let mut calls: Vec<(Vec<String>, Vec<String>)> = Vec::new();
        for (_, group) in self.by_ledger(&ids, "archive:written") {
            let mut keys: Vec<String> = [
                "archive:dirty",
                "archive:taking",
                "archive:written",
                "archive:evicted",
            ]
            .iter()
            .map(|name| k.ledger(group[0], name))
            .collect();
            let mut args: Vec<String> = vec![cutoff.to_string(), group.len().to_string()];
            for id in group {
                let mine = own[id];
                keys.extend(mine.iter().cloned());
                args.push(id.to_string());
                args.push(mine.len().to_string());
            }
            calls.push((keys, args));
        }
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        let gone: Vec<Vec<String>> = self.eval_each(&EVICT, &calls).await?;
        Ok(gone
            .concat()
            .iter()
            .filter_map(|i| ArticleId::parse(i).ok())
            .collect())
    }

    /// Which of `ids` are evicted (one `SMISMEMBER` per copy of the
    /// tombstones), sorted, without repeats.
    pub async fn evicted_among(&self, ids: &[ArticleId]) -> Result<Vec<ArticleId>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let groups = self.by_ledger(ids, "archive:evicted");
        let mut pipe = redis::pipe();
        for (evicted, group) in &groups {
            pipe.cmd("SMISMEMBER")
                .arg(evicted)
                .arg(group.iter().map(|i| i.as_str()).collect::<Vec<_>>());
        }
        let got: Vec<Vec<bool>> = self.query_pipe(&pipe).await.map_err(store_err)?;
        let mut out: Vec<ArticleId> = groups
            .iter()
            .zip(got)
            .flat_map(|((_, group), got)| {
                group
                    .iter()
                    .zip(got)
                    .filter(|(_, e)| *e)
                    .map(|(i, _)| (*i).clone())
                    .collect::<Vec<_>>()
            })
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
    /// removal of its tombstone (one pipelined round trip per batch and
    /// slot: an article's keys and its tombstone share its shard's).
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
            let records = archive.articles(part).await?;
            if records.len() != part.len() {
                return Err(StoreError::Internal(format!(
                    "evicted articles missing from the archive among {part:?}"
                )));
            }
            let calls = records
                .iter()
                .map(|r| self.restore_call(r, now))
                .collect::<Result<Vec<_>, _>>()?;
            let done: Vec<i64> = self.eval_each(&RESTORE, &calls).await?;
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
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        let k = self.keys();
        let mut keys = vec![
            k.ledger(id, "archive:evicted").into_bytes(),
            k.ledger(id, "archive:written").into_bytes(),
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
