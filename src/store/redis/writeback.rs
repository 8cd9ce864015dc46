//! The write-back: a walk's exact scores go back into each shard's
//! ranking as its new bounds (`writeback.lua`), in calls of at most
//! [`CHUNK`] pairs; a rebuild's parts go into a build key of their own.

use super::calls::{CHUNK, score_arg};
use super::keys::RANKING_TTL;
use super::keys::{ShardKeys, ranking_build, ranking_state};
use super::{RedisStore, store_err};
use crate::model::{ArticleId, Timestamp};
use crate::store::StoreError;

/// The exact scores one query writes back into one shard's ranking.
pub(super) struct WriteBack {
    pub(super) shard: ShardKeys,
    pub(super) zkey: String,
    /// The shard's change seq the scores were computed at.
    pub(super) seq: i64,
    /// Whether the ranking was rebuilt (else the scores are incremental).
    pub(super) rebuild: bool,
    /// Article, and its new bound (`None`: not in the ranking).
    pub(super) pairs: Vec<(ArticleId, Option<f64>)>,
}

/// One shard's write-back cut into `writeback.lua` calls of at most
/// [`CHUNK`] pairs (at least one call, which may carry none).
struct WritePlan<'a> {
    shard: &'a WriteBack,
    /// The ranking's build key when a rebuild takes more than one call.
    build: Option<String>,
    /// Other rankings a rebuild may drop (the index, read just before).
    others: Vec<String>,
    parts: Vec<&'a [(ArticleId, Option<f64>)]>,
}

impl<'a> WritePlan<'a> {
    fn new(w: &'a WriteBack, index: Option<Vec<String>>) -> Self {
        let mut parts: Vec<_> = w.pairs.chunks(CHUNK).collect();
        if parts.is_empty() {
            parts.push(&[]);
        }
        let build =
            (w.rebuild && parts.len() > 1).then(|| ranking_build(&w.zkey, rand::random::<u64>()));
        let others = index
            .unwrap_or_default()
            .into_iter()
            .filter(|n| n.starts_with(&w.shard.prefix) && *n != w.zkey)
            .collect();
        WritePlan {
            shard: w,
            build,
            others,
            parts,
        }
    }

    /// Keys and arguments of call `part`; `built`: the entries the earlier
    /// parts of a rebuild put in the build key.
    fn call(
        &self,
        part: usize,
        built: i64,
        max_rankings: usize,
        now: Timestamp,
    ) -> (Vec<String>, Vec<String>) {
        let WriteBack {
            shard: sk,
            zkey,
            seq,
            rebuild,
            ..
        } = self.shard;
        let last = part + 1 == self.parts.len();
        let mode = match (rebuild, last) {
            (true, true) => "r",
            (true, false) => "b",
            (false, true) => "i",
            (false, false) => "p",
        };
        let skey = ranking_state(zkey);
        let ttl = if *zkey == sk.ranking_default() {
            0
        } else {
            RANKING_TTL
        };
        let mut keys = vec![
            zkey.to_string(),
            skey.clone(),
            sk.changes(),
            sk.ranking_index(),
        ];
        if let Some(b) = &self.build {
            keys.push(b.clone());
        }
        if mode == "r" {
            for n in &self.others {
                keys.push(ranking_state(n));
                keys.push(n.clone());
            }
        }
        let mut args = vec![
            sk.prefix.clone(),
            zkey.to_string(),
            skey,
            seq.to_string(),
            now.to_string(),
            mode.to_string(),
            ttl.to_string(),
            max_rankings.to_string(),
            sk.ranking_default(),
            self.build.clone().unwrap_or_default(),
            built.to_string(),
        ];
        for (id, s) in self.parts[part] {
            args.push(id.to_string());
            args.push(s.map_or_else(|| "-".to_string(), score_arg));
        }
        (keys, args)
    }
}

impl RedisStore {
    /// Writes exact scores back as bounds: `writeback.lua` per shard in
    /// calls of at most [`CHUNK`] pairs, each round's calls (one per
    /// shard that still has pairs) in one pipeline, after one read of the
    /// indexes of the rebuilt shards. Earlier parts of a shard's
    /// write-back touch no state (incremental) or go into a build key of
    /// their own (rebuild): the last call moves the ranking on at once, so
    /// no reader ever walks half of it.
    pub(super) async fn write_back(
        &self,
        shards: &[WriteBack],
        now: Timestamp,
    ) -> Result<(), StoreError> {
        // A rebuild may drop the least recently used other rankings of its
        // shard: it may touch those named in the index now.
        let rebuilt: Vec<&ShardKeys> = shards
            .iter()
            .filter(|w| w.rebuild)
            .map(|w| &w.shard)
            .collect();
        let mut indexes: Vec<Vec<String>> = Vec::new();
        if !rebuilt.is_empty() {
            let mut pipe = redis::pipe();
            for sk in &rebuilt {
                pipe.smembers(sk.ranking_index());
            }
            indexes = self.query_pipe(&pipe).await.map_err(store_err)?;
        }
        let mut indexes = indexes.into_iter();
        let plans: Vec<WritePlan> = shards
            .iter()
            .map(|w| WritePlan::new(w, if w.rebuild { indexes.next() } else { None }))
            .collect();
        let parts = plans.iter().map(|p| p.parts.len()).max().unwrap_or(0);
        // The earlier parts, round by round; a rebuild's count what its
        // build key holds.
        let mut built = vec![0i64; plans.len()];
        for round in 0..parts.saturating_sub(1) {
            let mut who = Vec::new();
            let mut calls = Vec::new();
            for (i, p) in plans.iter().enumerate() {
                if round + 1 < p.parts.len() {
                    who.push(i);
                    calls.push(p.call(round, 0, self.settings.max_rankings, now));
                }
            }
            let got: Vec<i64> = self.eval_each(&self.scripts.writeback, &calls).await?;
            for (i, n) in who.into_iter().zip(got) {
                if plans[i].shard.rebuild {
                    built[i] += n;
                }
            }
        }
        let last: Vec<(Vec<String>, Vec<String>)> = plans
            .iter()
            .enumerate()
            .map(|(i, p)| p.call(p.parts.len() - 1, built[i], self.settings.max_rankings, now))
            .collect();
        let got: Vec<i64> = self.eval_each(&self.scripts.writeback, &last).await?;
        if got.contains(&-1) {
            return Err(StoreError::Unavailable(
                "a ranking rebuild lost a part of its build key (expired or removed); the next query rebuilds again".into(),
            ));
        }
        Ok(())
    }
}
