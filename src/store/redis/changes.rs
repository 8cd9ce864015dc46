//! The change logs: what changed since a node or a ranking last looked
//! (`sync.lua`, one call per shard in one pipeline), and the collection
//! of entries no ranking still needs.

use redis::Value;

use super::keys::{ShardKeys, ranking_state};
use super::{RedisStore, bad_reply, store_err, v_i64, v_str};
use crate::model::ArticleId;
use crate::store::StoreError;

/// A sync returning more change log entries than this rebuilds instead.
const MAX_DELTA: i64 = 100_000;

/// What one shard's change log says since this node and a ranking last
/// looked (`sync.lua`).
pub(super) struct Synced {
    /// Which shard.
    pub shard: u32,
    pub seq: i64,
    pub floor: i64,
    pub rseq: i64,
    pub rnow: i64,
    pub truncated: bool,
    /// The newest arrival time an ingest call carried.
    pub clock: i64,
    pub changed: Vec<(ArticleId, i64)>,
}

impl Synced {
    /// Whether the shard's ranking must be rebuilt: it does not exist, or
    /// its change log entries were collected or did not all come back.
    pub(super) fn stale(&self) -> bool {
        self.rseq < 0 || self.rseq < self.floor || self.truncated
    }
}

impl RedisStore {
    /// Reads every shard's change log since this node (and the ranking
    /// `zkeys[k]` of shard k) last looked, in one pipeline, and drops this
    /// node's cached state of what changed.
    pub(super) async fn sync(&self, zkeys: Option<&[String]>) -> Result<Vec<Synced>, StoreError> {
        let node_seqs = self.cache.lock().seq.clone();
        let max = MAX_DELTA.to_string();
        let shards = self.keys.all_shards();
        let calls: Vec<(Vec<String>, Vec<String>)> = shards
            .iter()
            .enumerate()
            .map(|(i, sk)| {
                let state = match zkeys {
                    Some(z) => ranking_state(&z[i]),
                    None => format!("{}changes:none", sk.prefix),
                };
                let node = node_seqs.get(i).copied().unwrap_or(0).to_string();
                // Over several slots `clock` (the site's) is read after.
                let clock = match self.keys.spans_slots() {
                    true => String::new(),
                    false => self.keys.clock(),
                };
                let mut keys = vec![sk.changes_seq(), sk.changes_floor(), state.clone()];
                keys.extend((!clock.is_empty()).then(|| clock.clone()));
                keys.push(sk.changes());
                let args = vec![clock, sk.prefix.clone(), state, node, max.clone()];
                (keys, args)
            })
            .collect();
        let replies: Vec<Vec<Value>> = self.eval_each(&self.scripts.sync, &calls).await?;
        let clock = self.clock_after_sync().await?;
        let mut out = Vec::with_capacity(shards.len());
        for (sk, v) in shards.iter().zip(replies) {
            if v.len() < 6 {
                return Err(bad_reply("sync"));
            }
            let n = |i: usize| v_i64(&v[i]).ok_or_else(|| bad_reply("sync"));
            let mut changed = Vec::with_capacity((v.len() - 6) / 2);
            for pair in v[6..].chunks(2) {
                if let [id, seq] = pair
                    && let (Some(id), Some(seq)) = (v_str(id), v_str(seq))
                    && let (Ok(id), Ok(seq)) = (ArticleId::parse(id), seq.parse::<f64>())
                {
                    changed.push((id, seq as i64));
                }
            }
            out.push(Synced {
                shard: sk.index,
                seq: n(0)?,
                floor: n(1)?,
                rseq: n(2)?,
                rnow: n(3)?,
                truncated: n(4)? == 1,
                clock: clock.unwrap_or(n(5)?),
                changed,
            });
        }
        self.absorb(&out);
        Ok(out)
    }

    /// The site's `clock` when the site spans slots (sync.lua then reads
    /// only its shard's slot), read after the change logs: at least the
    /// arrival of every change they held. `None` on one slot, where
    /// sync.lua reads it.
    async fn clock_after_sync(&self) -> Result<Option<i64>, StoreError> {
        if !self.keys.spans_slots() {
            return Ok(None);
        }
        let mut con = self.con();
        let clock: Option<i64> = redis::cmd("GET")
            .arg(self.keys.clock())
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        Ok(Some(clock.unwrap_or(0)))
    }

    /// Drops change log entries no ranking still needs, in every shard:
    /// those at or below the lowest seq any live ranking of the shard has
    /// taken in. Nodes and rankings behind the new floor notice it at
    /// their next sync and start over.
    pub(super) async fn collect_changes(&self) -> Result<(), StoreError> {
        let mut live = 0;
        for sk in self.keys.all_shards() {
            live += self.collect_shard_changes(&sk).await?;
        }
        metrics::gauge!("hotrank_rankings").set(live as f64);
        Ok(())
    }

    /// [`collect_changes`](Self::collect_changes) of one shard: answers
    /// how many live rankings it has.
    async fn collect_shard_changes(&self, sk: &ShardKeys) -> Result<usize, StoreError> {
        let mut con = self.con();
        let index = sk.ranking_index();
        let names: Vec<String> = redis::cmd("SMEMBERS")
            .arg(&index)
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        let mut pipe = redis::pipe();
        pipe.get(sk.changes_seq());
        for n in &names {
            pipe.hget(ranking_state(n), "seq");
        }
        let got: Vec<Option<i64>> = pipe.query_async(&mut con).await.map_err(store_err)?;
        let Some((seq, seqs)) = got.split_first() else {
            return Err(bad_reply("gc"));
        };
        let mut floor = seq.unwrap_or(0);
        let mut gone = Vec::new();
        for (n, s) in names.iter().zip(seqs) {
            match s {
                Some(s) => floor = floor.min(*s),
                None => gone.push(n.clone()),
            }
        }
        if !gone.is_empty() {
            redis::cmd("SREM")
                .arg(&index)
                .arg(&gone)
                .query_async::<()>(&mut con)
                .await
                .map_err(store_err)?;
        }
        let gc = redis::Script::new(
            "local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
             local f = tonumber(ARGV[1])
             if f > cur then
               redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', f)
               redis.call('SET', KEYS[2], f)
             end
             return 1",
        );
        let _: i64 = gc
            .key(sk.changes())
            .key(sk.changes_floor())
            .arg(floor)
            .invoke_async(&mut con)
            .await
            .map_err(store_err)?;
        Ok(names.len() - gone.len())
    }
}
