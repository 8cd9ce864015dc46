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

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use redis::Value;
use serde::{Deserialize, Serialize};

use super::keys::{ranking_state, window_plan};
use super::{MetaRec, RedisStore, bad_reply, store_err, v_i64, v_str};
use crate::model::Timestamp;
use crate::model::{ArticleId, ArticleMeta, Counters, HotPage, HotQuery, RangeSpec, RankedItem};
use crate::store::{Pick, Picker, StoreError, cursor};

/// A sync returning more change log entries than this rebuilds instead.
const MAX_DELTA: i64 = 100_000;
/// How long an unused ranking (other than `hot:score`) and an unused
/// cursor are kept.
const RANKING_TTL: i64 = 3600;
const CURSOR_TTL: i64 = 600;
/// A first page snapshots this many pages ahead for its cursor.
const CURSOR_PAGES_AHEAD: usize = 5;
/// A query whose `now` is at most this far behind the ranking's newest
/// scores (another node's clock) is answered as of those scores.
const CLOCK_SLACK: i64 = 5;

pub(super) struct Synced {
    pub seq: i64,
    pub floor: i64,
    pub rseq: i64,
    pub rnow: i64,
    pub truncated: bool,
    pub changed: Vec<(ArticleId, i64)>,
}

/// One article with its exact score and window counters.
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

fn rank_order(a: &Scored, b: &Scored) -> Ordering {
    b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id))
}

/// Indexes (into `scored`, in rank order) a page may show: at most
/// `per_author` per author, at most `depth` in all.
fn accept(scored: &[Scored], per_author: Option<usize>, depth: usize) -> Vec<usize> {
    let Some(cap) = per_author else {
        return (0..scored.len().min(depth)).collect();
    };
    let mut per: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, s) in scored.iter().enumerate() {
        if out.len() >= depth {
            break;
        }
        match s.meta.meta.author.as_deref() {
            Some(author) => {
                let n = per.entry(author).or_default();
                if *n < cap {
                    *n += 1;
                    out.push(i);
                }
            }
            None => out.push(i),
        }
    }
    out
}

fn matches(q: &HotQuery, m: &ArticleMeta) -> bool {
    q.category
        .as_ref()
        .is_none_or(|c| m.category.as_ref() == Some(c))
        && q.kind.as_ref().is_none_or(|k| m.kind.as_ref() == Some(k))
        && q.group.as_ref().is_none_or(|g| m.groups.contains(g))
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

/// A cursor's snapshot, stored in Redis so that any node continues it.
#[derive(Serialize, Deserialize)]
struct Snap {
    zkey: String,
    per_author: Option<usize>,
    generated_at: Timestamp,
    items: Vec<SnapItem>,
    complete: bool,
}

#[derive(Serialize, Deserialize)]
struct SnapItem {
    id: ArticleId,
    /// `f64::to_bits`: JSON floats need not round-trip.
    score: u64,
    counters: Counters,
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
        let none = format!("{}changes:none", self.opts.prefix);
        let node = node_seq.to_string();
        let max = MAX_DELTA.to_string();
        let v: Vec<Value> = self
            .eval(
                &self.scripts.sync,
                &[
                    self.opts.prefix.as_bytes(),
                    state.unwrap_or(&none).as_bytes(),
                    node.as_bytes(),
                    max.as_bytes(),
                ],
            )
            .await?;
        if v.len() < 5 {
            return Err(bad_reply("sync"));
        }
        let n = |i: usize| v_i64(&v[i]).ok_or_else(|| bad_reply("sync"));
        let mut changed = Vec::with_capacity((v.len() - 5) / 2);
        for pair in v[5..].chunks(2) {
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
        let keep: Vec<usize> = (0..ids.len())
            .filter(|&i| {
                metas[i]
                    .as_ref()
                    .is_some_and(|m| !m.deleted && matches(q, &m.meta))
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
        let mut ids: Vec<ArticleId> = ids
            .iter()
            .filter_map(|s| ArticleId::parse(s).ok())
            .collect();
        ids.sort();
        Ok(ids)
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
        let head = [
            self.opts.prefix.clone(),
            zkey.to_string(),
            skey,
            seq.to_string(),
            now.to_string(),
            if rebuild { "r" } else { "i" }.to_string(),
            ttl.to_string(),
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
        let _: i64 = self.eval(&self.scripts.writeback, &args).await?;
        Ok(())
    }

    /// The exact top `depth` of the ranking of `q` at `now`, and the time
    /// the scores are exact at (`now`, or a moment later when another node
    /// with a clock ahead already wrote newer bounds).
    pub(super) async fn top(
        &self,
        q: &HotQuery,
        depth: usize,
        now: Timestamp,
    ) -> Result<(Vec<Scored>, Timestamp), StoreError> {
        let started = std::time::Instant::now();
        let zkey = self.ranking_key(q);
        let skey = ranking_state(&zkey);
        let s = self.sync(Some(&skey)).await?;
        let mut at = now;
        let stale_clock = s.rnow > now + CLOCK_SLACK;
        let rebuild = s.rseq < 0 || s.rseq < s.floor || s.truncated || stale_clock;
        if !rebuild && s.rnow > now {
            at = s.rnow;
        }
        let mut scored: Vec<Scored> = Vec::new();
        let mut pairs: Vec<(ArticleId, Option<f64>)> = Vec::new();
        if rebuild {
            let cands = self.candidates(q.range, at).await?;
            let exact = self.exact_many(&cands, q, at, s.seq).await?;
            for x in exact.into_iter().flatten() {
                pairs.push((x.id.clone(), Some(x.bound)));
                scored.push(x);
            }
            self.write_back(&zkey, s.seq, at, true, &pairs).await?;
            scored.sort_by(rank_order);
            let acc = accept(&scored, q.per_author, depth);
            metrics::counter!("hotrank_ranking_rebuilds_total").increment(1);
            metrics::histogram!("hotrank_ranking_seconds").record(started.elapsed().as_secs_f64());
            return Ok((acc.into_iter().map(|i| scored[i].clone()).collect(), at));
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
            scored.extend(x);
        }
        // The threshold walk over the bounds, highest first.
        let mut offset = 0usize;
        let mut chunk = (depth * 2).max(32);
        let mut con = self.con();
        loop {
            let entries: Vec<(String, f64)> = redis::cmd("ZREVRANGE")
                .arg(&zkey)
                .arg(offset)
                .arg(offset + chunk - 1)
                .arg("WITHSCORES")
                .query_async(&mut con)
                .await
                .map_err(store_err)?;
            let fetched = entries.len();
            let last_bound = entries.last().map(|e| e.1);
            let fresh: Vec<ArticleId> = entries
                .iter()
                .filter_map(|(id, _)| ArticleId::parse(id).ok())
                .filter(|id| seen.insert(id.clone()))
                .collect();
            let exact = self.exact_many(&fresh, q, at, s.seq).await?;
            for (id, x) in fresh.iter().zip(exact) {
                pairs.push((id.clone(), x.as_ref().map(|x| x.bound)));
                scored.extend(x);
            }
            if fetched < chunk {
                break;
            }
            scored.sort_by(rank_order);
            let acc = accept(&scored, q.per_author, depth);
            if acc.len() >= depth && depth > 0 {
                let kth = scored[acc[depth - 1]].score;
                // Every bound further down is <= last_bound: below the
                // k-th exact score, so is every score there.
                if last_bound.is_some_and(|b| b < kth) {
                    break;
                }
            }
            offset += chunk;
            chunk *= 2;
        }
        self.write_back(&zkey, s.seq, at, false, &pairs).await?;
        scored.sort_by(rank_order);
        let acc = accept(&scored, q.per_author, depth);
        metrics::histogram!("hotrank_ranking_seconds").record(started.elapsed().as_secs_f64());
        Ok((acc.into_iter().map(|i| scored[i].clone()).collect(), at))
    }

    async fn page_items(
        &self,
        items: &[(ArticleId, f64, Counters)],
        offset: usize,
        q: &HotQuery,
        at: Timestamp,
    ) -> Result<Vec<RankedItem>, StoreError> {
        let page: Vec<&(ArticleId, f64, Counters)> =
            items.iter().skip(offset).take(q.limit).collect();
        let ids: Vec<ArticleId> = page.iter().map(|x| x.0.clone()).collect();
        let seq = self.cache.lock().seq;
        let metas = self.metas(&ids, seq).await?;
        Ok(page
            .into_iter()
            .zip(metas)
            .enumerate()
            .map(|(i, ((id, score, counters), m))| {
                let meta = m.map(|m| m.meta.clone()).unwrap_or_default();
                RankedItem {
                    rank: offset + i + 1,
                    id: id.clone(),
                    score: *score,
                    counters: *counters,
                    explain: q
                        .explain
                        .then(|| self.settings.models.explain(q.model, counters, &meta, at)),
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
                let want = (q.offset + q.limit).min(cap);
                let depth = (q.offset + q.limit * CURSOR_PAGES_AHEAD).min(cap);
                let (mut items, at) = self.top(q, depth + 1, now).await?;
                let complete = items.len() <= depth;
                items.truncate(depth);
                let flat: Vec<(ArticleId, f64, Counters)> = items
                    .into_iter()
                    .map(|s| (s.id, s.score, s.counters))
                    .collect();
                if q.offset >= want || flat.len() <= q.offset + q.limit && complete {
                    let page = self.page_items(&flat, q.offset, q, at).await?;
                    return Ok(HotPage {
                        items: page,
                        generated_at: at,
                        cursor: None,
                    });
                }
                let snap = Snap {
                    zkey: zkey.clone(),
                    per_author: q.per_author,
                    generated_at: at,
                    items: flat
                        .into_iter()
                        .map(|(id, s, c)| SnapItem {
                            id,
                            score: s.to_bits(),
                            counters: c,
                        })
                        .collect(),
                    complete,
                };
                (rand::random::<u64>(), q.offset, snap)
            }
            Some(c) => {
                let (id, off) = cursor::parse_snapshot(c)?;
                let raw: Option<Vec<u8>> = redis::cmd("GET")
                    .arg(self.keys.cursor(id))
                    .query_async(&mut con)
                    .await
                    .map_err(store_err)?;
                let snap: Snap = raw
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .ok_or_else(|| {
                        StoreError::InvalidCursor(
                            "cursor expired; start from the first page".into(),
                        )
                    })?;
                if snap.zkey != zkey || snap.per_author != q.per_author {
                    return Err(StoreError::InvalidCursor(
                        "cursor belongs to a query with other parameters".into(),
                    ));
                }
                (id, off, snap)
            }
        };
        // Deepen the snapshot if the page runs past it.
        if offset + q.limit > snap.items.len() && !snap.complete && snap.items.len() < cap {
            let depth = (offset + q.limit * CURSOR_PAGES_AHEAD).min(cap);
            let mut dq = q.clone();
            dq.per_author = snap.per_author;
            let (fresh, _) = self.top(&dq, depth + 1, now).await?;
            let seen: HashSet<ArticleId> = snap.items.iter().map(|s| s.id.clone()).collect();
            let before = snap.items.len();
            snap.complete = fresh.len() <= depth;
            snap.items.extend(
                fresh
                    .into_iter()
                    .filter(|s| !seen.contains(&s.id))
                    .map(|s| SnapItem {
                        id: s.id,
                        score: s.score.to_bits(),
                        counters: s.counters,
                    }),
            );
            if snap.items.len() > cap {
                snap.items.truncate(cap);
                snap.complete = true;
            }
            if snap.items.len() == before {
                snap.complete = true;
            }
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
        let flat: Vec<(ArticleId, f64, Counters)> = snap
            .items
            .iter()
            .map(|s| (s.id.clone(), f64::from_bits(s.score), s.counters))
            .collect();
        let page = self.page_items(&flat, offset, q, snap.generated_at).await?;
        let more = offset + q.limit < flat.len() || (!snap.complete && flat.len() < cap);
        Ok(HotPage {
            items: page,
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
                if m.deleted || !matches(q, &m.meta) {
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
        metrics::gauge!("hotrank_redis_rankings").set((names.len() - gone.len()) as f64);
        Ok(())
    }
}
