//! Rankings on Redis that are exact at query time, whichever node asks.
//!
//! The embedded store's design (docs/design.md, "Freshness"), with its
//! state in Redis so that every node shares it:
//!
//! - a ranking is a sorted set of **upper bounds** (`hot:score` is seed
//!   000's default ranking) plus a state hash holding the change seq it has
//!   taken in and the `now` of its newest scores;
//! - every write script appends the articles it changed to the change log
//!   (`changes`: member = article, score = seq of its latest change), so a
//!   query learns, in one call (`sync.lua`), which articles changed since
//!   the ranking last looked: those are re-scored exactly, their old bound
//!   no longer holds;
//! - the query walks the set from the highest bound, scoring each article
//!   exactly at `now` from its counters in Redis, and stops once the next
//!   bound is below the k-th exact score (threshold algorithm);
//! - the exact scores go back as the new bounds (`writeback.lua`), except
//!   for articles that changed meanwhile, which stay marked by the log.
//!
//! A ranking seen for the first time, or whose log entries were collected,
//! is rebuilt from the per-hour activity sets. Scores come from
//! [`crate::score::Models`], the same pure functions the embedded store
//! uses; ties go to the smaller article id.

use std::collections::HashSet;
use std::sync::Arc;

use redis::Value;

use super::keys::{ranking_state, window_plan};
use super::{MetaRec, RedisStore, bad_reply, sorted_ids, store_err, v_i64, v_str};
use crate::model::Timestamp;
use crate::model::{ArticleId, Counters, HotPage, HotQuery, RangeSpec, RankedItem};
use crate::rank::pages::{self, First, SnapItem, Snapshot};
use crate::rank::{self, Filter, Walk};
use crate::store::{Pick, Picker, StoreError, cursor};

/// A sync returning more change log entries than this rebuilds instead.
const MAX_DELTA: i64 = 100_000;
/// How long an unused ranking (other than `hot:score`) and an unused
/// cursor are kept.
const RANKING_TTL: i64 = 3600;
const CURSOR_TTL: i64 = 600;

pub(super) struct Synced {
    pub seq: i64,
    pub floor: i64,
    pub rseq: i64,
    pub rnow: i64,
    pub truncated: bool,
    /// The newest arrival time an ingest call carried.
    pub clock: i64,
    pub changed: Vec<(ArticleId, i64)>,
}

/// One article with its exact score, bound and window counters.
#[derive(Debug, Clone)]
pub(super) struct Scored {
    pub id: ArticleId,
    pub score: f64,
    /// Bounds the score from now on while no event arrives
    /// (`Models::upper_bound`): what the ranking set stores.
    pub bound: f64,
    pub counters: Counters,
    pub meta: Arc<MetaRec>,
}

fn score_arg(s: f64) -> String {
    if s.is_finite() {
        format!("{s}")
    } else if s > 0.0 {
        "inf".into()
    } else {
        "-inf".into()
    }
}

impl Scored {
    fn listed(self, at: Timestamp) -> SnapItem {
        SnapItem {
            id: self.id,
            score: self.score,
            counters: self.counters,
            author: self.meta.meta.author.clone(),
            at,
        }
    }
}

impl RedisStore {
    fn ranking_key(&self, q: &HotQuery) -> String {
        self.keys.ranking(
            q.model,
            q.range,
            q.category.as_deref(),
            q.kind.as_deref(),
            q.group.as_deref(),
        )
    }

    /// Reads the change log since this node (and the ranking `state`)
    /// last looked, and drops this node's cached state of what changed.
    pub(super) async fn sync(&self, state: Option<&str>) -> Result<Synced, StoreError> {
        let node_seq = self.cache.lock().seq;
        let none = format!("{}changes:none", self.keys.prefix);
        let state = state.unwrap_or(&none);
        let node = node_seq.to_string();
        let max = MAX_DELTA.to_string();
        let keys = [
            self.keys.changes_seq(),
            self.keys.changes_floor(),
            state.to_string(),
            self.keys.clock(),
            self.keys.changes(),
        ];
        let v: Vec<Value> = self
            .eval(
                &self.scripts.sync,
                &keys,
                &[
                    self.keys.prefix.as_bytes(),
                    state.as_bytes(),
                    node.as_bytes(),
                    max.as_bytes(),
                ],
            )
            .await?;
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
        let s = Synced {
            seq: n(0)?,
            floor: n(1)?,
            rseq: n(2)?,
            rnow: n(3)?,
            truncated: n(4)? == 1,
            clock: n(5)?,
            changed,
        };
        self.absorb(s.seq, s.floor, s.truncated, &s.changed);
        Ok(s)
    }

    /// Exact scores of `ids` for the ranking of `q` at `now`; `None` for
    /// articles that do not belong in it (unknown, deleted, filtered out,
    /// or without activity inside a bounded window).
    pub(super) async fn exact_many(
        &self,
        ids: &[ArticleId],
        q: &HotQuery,
        now: Timestamp,
        seq: i64,
    ) -> Result<Vec<Option<Scored>>, StoreError> {
        let metas = self.metas(ids, seq).await?;
        let filter = Filter::of(q);
        let keep: Vec<usize> = (0..ids.len())
            .filter(|&i| {
                metas[i]
                    .as_ref()
                    .is_some_and(|m| !m.deleted && filter.matches(&m.meta))
            })
            .collect();
        let kept_ids: Vec<ArticleId> = keep.iter().map(|&i| ids[i].clone()).collect();
        let windows = self.windows(&kept_ids, q.range, now, seq).await?;
        let mut out: Vec<Option<Scored>> = vec![None; ids.len()];
        for (&i, c) in keep.iter().zip(windows) {
            if matches!(q.range, RangeSpec::Hours(_)) && !c.is_active() {
                continue;
            }
            let Some(meta) = metas[i].clone() else {
                continue;
            };
            let score = self.settings.models.score(q.model, &c, &meta.meta, now);
            let bound = self
                .settings
                .models
                .upper_bound(q.model, &c, &meta.meta, now);
            out[i] = Some(Scored {
                id: ids[i].clone(),
                score,
                bound,
                counters: c,
                meta,
            });
        }
        Ok(out)
    }

    /// Every article that may belong in a ranking over `range` at `now`.
    async fn candidates(
        &self,
        range: RangeSpec,
        now: Timestamp,
    ) -> Result<Vec<ArticleId>, StoreError> {
        let mut con = self.con();
        let ids: Vec<String> = match window_plan(range, now, self.opts.hourly_days) {
            None => redis::cmd("ZRANGE")
                .arg(self.keys.newest())
                .arg(0)
                .arg(-1)
                .query_async(&mut con)
                .await
                .map_err(store_err)?,
            Some(plan) => {
                let mut c = redis::cmd("SUNION");
                for h in plan.hours.clone() {
                    c.arg(self.keys.active_h(h));
                }
                for d in plan.days.clone() {
                    c.arg(self.keys.active_d(d));
                }
                c.query_async(&mut con).await.map_err(store_err)?
            }
        };
        Ok(sorted_ids(&ids))
    }

    async fn write_back(
        &self,
        zkey: &str,
        seq: i64,
        now: Timestamp,
        rebuild: bool,
        pairs: &[(ArticleId, Option<f64>)],
    ) -> Result<(), StoreError> {
        let skey = ranking_state(zkey);
        let ttl = if zkey == self.keys.ranking_default() {
            0
        } else {
            RANKING_TTL
        };
        let mut keys = vec![
            zkey.to_string(),
            skey.clone(),
            self.keys.changes(),
            self.keys.ranking_index(),
        ];
        if rebuild {
            // A rebuild may drop the least recently used other rankings:
            // it may touch those named in the index now.
            let mut con = self.con();
            let names: Vec<String> = redis::cmd("SMEMBERS")
                .arg(self.keys.ranking_index())
                .query_async(&mut con)
                .await
                .map_err(store_err)?;
            for n in names {
                if n.starts_with(&self.keys.prefix) && n != zkey {
                    keys.push(ranking_state(&n));
                    keys.push(n);
                }
            }
        }
        let head = [
            self.keys.prefix.clone(),
            zkey.to_string(),
            skey,
            seq.to_string(),
            now.to_string(),
            if rebuild { "r" } else { "i" }.to_string(),
            ttl.to_string(),
            self.settings.max_rankings.to_string(),
            self.keys.ranking_default(),
        ];
        let tail: Vec<String> = pairs
            .iter()
            .flat_map(|(id, s)| [id.to_string(), s.map_or_else(|| "-".to_string(), score_arg)])
            .collect();
        let args: Vec<&[u8]> = head
            .iter()
            .chain(tail.iter())
            .map(|s| s.as_bytes())
            .collect();
        let _: i64 = self.eval(&self.scripts.writeback, &keys, &args).await?;
        Ok(())
    }

    /// Runs `walk` over the ranking of `q` at `now` (or later: the
    /// ranking's newest scores or the newest ingest may be ahead, see
    /// [`rank::query_time`]): the exact items the walk asked for, and the
    /// time they are exact at.
    pub(super) async fn top(
        &self,
        q: &HotQuery,
        mut walk: Walk<SnapItem>,
        now: Timestamp,
    ) -> Result<(Vec<SnapItem>, Timestamp), StoreError> {
        let started = std::time::Instant::now();
        let zkey = self.ranking_key(q);
        let skey = ranking_state(&zkey);
        let s = self.sync(Some(&skey)).await?;
        let bounds_at = (s.rseq >= 0).then_some(s.rnow);
        let at = rank::query_time(now, bounds_at, s.clock);
        let rebuild = s.rseq < 0 || s.rseq < s.floor || s.truncated;
        let mut pairs: Vec<(ArticleId, Option<f64>)> = Vec::new();
        if rebuild {
            let cands = self.candidates(q.range, at).await?;
            let exact = self.exact_many(&cands, q, at, s.seq).await?;
            for x in exact.into_iter().flatten() {
                pairs.push((x.id.clone(), Some(x.bound)));
                walk.offer(x.listed(at), None);
            }
            self.write_back(&zkey, s.seq, at, true, &pairs).await?;
            metrics::counter!("hotrank_ranking_rebuilds_total").increment(1);
            metrics::histogram!("hotrank_ranking_seconds").record(started.elapsed().as_secs_f64());
            return Ok((walk.finish(), at));
        }
        // Articles changed since the ranking last looked: their bounds no
        // longer hold, score them now.
        let mut dirty: Vec<ArticleId> = s
            .changed
            .iter()
            .filter(|(_, seq)| *seq > s.rseq)
            .map(|(id, _)| id.clone())
            .collect();
        dirty.sort();
        dirty.dedup();
        let mut seen: HashSet<ArticleId> = dirty.iter().cloned().collect();
        let exact = self.exact_many(&dirty, q, at, s.seq).await?;
        for (id, x) in dirty.iter().zip(exact) {
            pairs.push((id.clone(), x.as_ref().map(|x| x.bound)));
            if let Some(x) = x {
                walk.offer(x.listed(at), None);
            }
        }
        // The threshold walk over the bounds, highest first, paged by
        // score: other queries and nodes rewrite bounds meanwhile (only ever
        // lowering those of unchanged articles), and a page by position
        // would skip entries that slid up past it.
        let mut upper = "+inf".to_string();
        let mut chunk = walk.depth().saturating_mul(2).max(32);
        let mut con = self.con();
        'walk: loop {
            let mut entries: Vec<(String, f64)> = redis::cmd("ZREVRANGEBYSCORE")
                .arg(&zkey)
                .arg(&upper)
                .arg("-inf")
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(0)
                .arg(chunk)
                .query_async(&mut con)
                .await
                .map_err(store_err)?;
            let Some(lowest) = entries.last().map(|e| e.1) else {
                break;
            };
            let full = entries.len() == chunk;
            if full {
                // Take every entry at the lowest bound, so the next page
                // starts strictly below it.
                let ties: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
                    .arg(&zkey)
                    .arg(score_arg(lowest))
                    .arg(score_arg(lowest))
                    .arg("WITHSCORES")
                    .query_async(&mut con)
                    .await
                    .map_err(store_err)?;
                entries.retain(|e| e.1 != lowest);
                entries.extend(ties);
            }
            let mut entries: Vec<(f64, ArticleId)> = entries
                .into_iter()
                .filter_map(|(id, b)| Some((b, ArticleId::parse(&id).ok()?)))
                .collect();
            entries.sort_by(|a, b| rank::order(a.0, &a.1, b.0, &b.1));
            let mut wanted: Vec<(f64, ArticleId)> = Vec::new();
            let mut stop = false;
            for (bound, id) in entries {
                if !walk.wants(bound, &id) {
                    stop = true;
                    break;
                }
                if walk.skips(&id) || !seen.insert(id.clone()) {
                    continue;
                }
                wanted.push((bound, id));
            }
            let ids: Vec<ArticleId> = wanted.iter().map(|w| w.1.clone()).collect();
            let exact = self.exact_many(&ids, q, at, s.seq).await?;
            for ((bound, id), x) in wanted.into_iter().zip(exact) {
                pairs.push((id, x.as_ref().map(|x| x.bound)));
                if let Some(x) = x {
                    walk.offer(x.listed(at), Some(bound));
                }
            }
            if stop || !full {
                break 'walk;
            }
            upper = format!("({}", score_arg(lowest));
            chunk = chunk.saturating_mul(2);
        }
        self.write_back(&zkey, s.seq, at, false, &pairs).await?;
        metrics::histogram!("hotrank_ranking_seconds").record(started.elapsed().as_secs_f64());
        Ok((walk.finish(), at))
    }

    /// The ranked items of a page, with metadata as it is now.
    async fn page_items(
        &self,
        items: &[SnapItem],
        first_rank: usize,
        q: &HotQuery,
    ) -> Result<Vec<RankedItem>, StoreError> {
        let ids: Vec<ArticleId> = items.iter().map(|x| x.id.clone()).collect();
        let seq = self.cache.lock().seq;
        let metas = self.metas(&ids, seq).await?;
        Ok(items
            .iter()
            .zip(metas)
            .enumerate()
            .map(|(i, (s, m))| {
                let meta = m.map(|m| m.meta.clone()).unwrap_or_default();
                RankedItem {
                    rank: first_rank + i,
                    id: s.id.clone(),
                    score: s.score,
                    counters: s.counters,
                    explain: q.explain.then(|| {
                        self.settings
                            .models
                            .explain(q.model, &s.counters, &meta, s.at)
                    }),
                    meta,
                }
            })
            .collect())
    }

    pub(super) async fn hot_page(
        &self,
        q: &HotQuery,
        now: Timestamp,
    ) -> Result<HotPage, StoreError> {
        let cap = self.settings.ranking_cap;
        let zkey = self.ranking_key(q);
        let mut con = self.con();
        let (snap_id, offset, mut snap) = match &q.cursor {
            None => {
                let (items, at) = self.top(q, pages::first_walk(q, cap), now).await?;
                match pages::first(zkey.clone(), q, cap, items, at) {
                    First::Page(items) => {
                        return Ok(HotPage {
                            items: self.page_items(&items, q.offset + 1, q).await?,
                            generated_at: at,
                            cursor: None,
                        });
                    }
                    First::Snapshot(snap) => (rand::random::<u64>(), q.offset, snap),
                }
            }
            Some(c) => {
                let (id, off) = cursor::parse_snapshot(c)?;
                // This node may not have seen the latest metadata changes
                // (another node's `PUT`): take them in before showing items.
                self.sync(None).await?;
                let raw: Option<Vec<u8>> = redis::cmd("GET")
                    .arg(self.keys.cursor(id))
                    .query_async(&mut con)
                    .await
                    .map_err(store_err)?;
                let snap: Snapshot<String> = raw
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .ok_or_else(|| {
                        StoreError::InvalidCursor(
                            "cursor expired; start from the first page".into(),
                        )
                    })?;
                if !snap.fits(&zkey, q.per_author) {
                    return Err(StoreError::InvalidCursor(
                        "cursor belongs to a query with other parameters".into(),
                    ));
                }
                (id, off, snap)
            }
        };
        if let Some((walk, need)) = snap.extension(offset, q.limit, cap) {
            let (fresh, _) = self.top(q, walk, now).await?;
            snap.extend(fresh, need, cap);
        }
        let body = serde_json::to_vec(&snap)
            .map_err(|e| StoreError::Internal(format!("cursor snapshot: {e}")))?;
        redis::cmd("SET")
            .arg(self.keys.cursor(snap_id))
            .arg(body)
            .arg("EX")
            .arg(CURSOR_TTL)
            .query_async::<()>(&mut con)
            .await
            .map_err(store_err)?;
        let (items, more) = snap.page(offset, q.limit, cap);
        Ok(HotPage {
            items: self.page_items(items, offset + 1, q).await?,
            generated_at: snap.generated_at,
            cursor: more.then(|| cursor::snapshot(snap_id, offset + q.limit)),
        })
    }

    pub(super) async fn newest_page(
        &self,
        q: &HotQuery,
        now: Timestamp,
    ) -> Result<HotPage, StoreError> {
        let start: Option<(i64, ArticleId)> = match &q.cursor {
            None => None,
            Some(c) => {
                let (p, id) = cursor::parse_newest(c)?;
                Some((p, id))
            }
        };
        let seq = self.sync(None).await?.seq;
        let skip = if start.is_some() { 0 } else { q.offset };
        let mut upper = match &start {
            Some((p, _)) => p.to_string(),
            None => "+inf".to_string(),
        };
        const CHUNK: usize = 256;
        let mut picked: Vec<(ArticleId, Arc<MetaRec>)> = Vec::new();
        let mut picker = Picker::new(q.per_author, skip, q.limit);
        let filter = Filter::of(q);
        let mut more = false;
        let mut con = self.con();
        'outer: loop {
            let mut batch: Vec<(String, f64)> = redis::cmd("ZREVRANGEBYSCORE")
                .arg(self.keys.newest())
                .arg(&upper)
                .arg("-inf")
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(0)
                .arg(CHUNK)
                .query_async(&mut con)
                .await
                .map_err(store_err)?;
            let Some(lowest) = batch.last().map(|e| e.1) else {
                break;
            };
            let full = batch.len() == CHUNK;
            if full {
                // Complete the lowest publication time: ties go by id.
                let ties: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
                    .arg(self.keys.newest())
                    .arg(lowest)
                    .arg(lowest)
                    .arg("WITHSCORES")
                    .query_async(&mut con)
                    .await
                    .map_err(store_err)?;
                batch.retain(|e| e.1 != lowest);
                batch.extend(ties);
            }
            let mut entries: Vec<(i64, ArticleId)> = batch
                .iter()
                .filter_map(|(id, p)| Some((*p as i64, ArticleId::parse(id).ok()?)))
                .filter(|(p, id)| match &start {
                    Some((sp, sid)) => *p < *sp || (*p == *sp && id > sid),
                    None => true,
                })
                .collect();
            entries.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            let ids: Vec<ArticleId> = entries.iter().map(|e| e.1.clone()).collect();
            let metas = self.metas(&ids, seq).await?;
            for (id, m) in ids.into_iter().zip(metas) {
                let Some(m) = m else { continue };
                if m.deleted || !filter.matches(&m.meta) {
                    continue;
                }
                match picker.offer(m.meta.author.as_deref()) {
                    Pick::Skip => {}
                    Pick::Take => picked.push((id, m)),
                    Pick::Full => {
                        more = true;
                        break 'outer;
                    }
                }
            }
            if !full {
                break;
            }
            upper = format!("({lowest}");
        }
        let ids: Vec<ArticleId> = picked.iter().map(|p| p.0.clone()).collect();
        let windows = self.windows(&ids, q.range, now, seq).await?;
        let items: Vec<RankedItem> = picked
            .into_iter()
            .zip(windows)
            .enumerate()
            .map(|(i, ((id, m), counters))| {
                let models = &self.settings.models;
                RankedItem {
                    rank: skip + i + 1,
                    id,
                    score: models.score(q.model, &counters, &m.meta, now),
                    counters,
                    explain: q
                        .explain
                        .then(|| models.explain(q.model, &counters, &m.meta, now)),
                    meta: m.meta.clone(),
                }
            })
            .collect();
        let cursor = match (more, items.last()) {
            (true, Some(last)) => Some(cursor::newest(last.meta.published_at, &last.id)),
            _ => None,
        };
        Ok(HotPage {
            items,
            generated_at: now,
            cursor,
        })
    }

    /// Drops change log entries no ranking still needs: those at or below
    /// the lowest seq any live ranking has taken in. Nodes and rankings
    /// behind the new floor notice it at their next sync and start over.
    pub(super) async fn collect_changes(&self) -> Result<(), StoreError> {
        let mut con = self.con();
        let index = self.keys.ranking_index();
        let names: Vec<String> = redis::cmd("SMEMBERS")
            .arg(&index)
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        let mut pipe = redis::pipe();
        pipe.get(self.keys.changes_seq());
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
            .key(self.keys.changes())
            .key(self.keys.changes_floor())
            .arg(floor)
            .invoke_async(&mut con)
            .await
            .map_err(store_err)?;
        metrics::gauge!("hotrank_rankings").set((names.len() - gone.len()) as f64);
        Ok(())
    }
}
