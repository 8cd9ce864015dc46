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
//!
//! **Article shards** (`[redis] shards = N`, [`super::Keys::shard`]): the
//! change log, the activity sets, `articles:new` and every ranking exist
//! once per shard, each holding only its shard's articles. A query syncs
//! every shard (one pipeline) and runs the one threshold walk over all of
//! their bound sets with one shared [`Walk`]: a shard stops when its next
//! bound is below the k-th exact score found so far across shards, so the
//! answer is exactly the one-shard answer. The first chunk of every shard
//! is fetched in one pipeline, so a query costs a round trip per chunk
//! depth, not per shard. Rebuilds and write-backs are per shard.
//!
//! This file holds the walk and the exact scores it reads; the change
//! logs are changes.rs, the rebuild claim claim.rs, the write-back
//! writeback.rs.

use std::collections::HashSet;
use std::sync::Arc;

use super::calls::score_arg;
use super::categories::Scales;
use super::changes::Synced;
use super::keys::{ShardKeys, WindowPlan, window_plan};
use super::writeback::WriteBack;
use super::{ActiveSets, MetaRec, RedisStore, Seqs, bad_reply, sorted_ids, store_err};
use crate::model::Timestamp;
use crate::model::{
    ArticleId, Counters, HotPage, HotQuery, ModelKind, RangeSpec, RankedItem, Trend,
};
use crate::rank::pages::{self, First, SnapItem, Snapshot};
use crate::rank::{self, Filter, RankingId, Walk};
use crate::score::{CategoryScale, Scaled};
use crate::store::{StoreError, cursor};

/// Articles a walk scores before it weighs reading the window's activity
/// sets whole (`RedisStore::read_sets_when_cheaper`).
const WALK_BEFORE_SETS: usize = 256;

/// The activity sets a query has read whole (`sets`), and which shards'
/// (those it rebuilt, then every shard once its walk's membership
/// questions would outnumber the sets' members:
/// `RedisStore::read_sets_when_cheaper`), how many articles its walk has
/// scored, and how many members the window's sets hold (read once, when
/// first needed).
struct SetReads {
    sets: ActiveSets,
    read: Vec<bool>,
    walked: usize,
    members: Option<u64>,
}

/// The activity sets of `plan`'s window in shard `sk`: (hourly, the hour
/// or day, the key).
fn window_sets<'a>(
    sk: &'a ShardKeys,
    plan: &WindowPlan,
) -> impl Iterator<Item = (bool, i64, String)> + 'a {
    let hours = plan.hours.clone().map(|h| (true, h, sk.active_h(h)));
    hours.chain(plan.days.clone().map(|d| (false, d, sk.active_d(d))))
}
/// Whether a walk may rebuild a ranking that needs it (gone: evicted,
/// expired, never built; or too far behind its change log): a query
/// may; a background refresh (warm.rs) only catches up rankings that can
/// be caught up, so it never rebuilds over and over, neither rankings
/// that others' rebuilds drop past `rankings.max_live` nor, during a bulk
/// import, rankings more than `MAX_DELTA` changes behind at each refresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stale {
    Rebuild,
    Skip,
}

const CURSOR_TTL: i64 = 600;

/// One article with its exact score, bound and window counters.
#[derive(Debug, Clone)]
pub(super) struct Scored {
    pub id: ArticleId,
    pub score: f64,
    /// Bounds the score from now on while no event arrives
    /// (`Models::upper_bound`): what the ranking set stores.
    pub bound: f64,
    pub counters: Counters,
    pub trend: Option<Trend>,
    pub scale: Option<CategoryScale>,
    pub meta: Arc<MetaRec>,
}

/// One query's walk in progress: the walk, the articles it has seen,
/// their exact scores for the write-back (`pairs`: article and new bound,
/// `None` when it is not in the ranking), the activity sets it has read,
/// and the query, time and change seqs it scores at.
struct Pass<'a> {
    walk: Walk<SnapItem>,
    seen: HashSet<ArticleId>,
    pairs: Vec<(ArticleId, Option<f64>)>,
    reads: SetReads,
    q: &'a HotQuery,
    at: Timestamp,
    /// The category scales it has read (scaled by category).
    scales: Scales,
    seqs: &'a [i64],
}

/// Where the walk of one shard's ranking goes on: its next page starts
/// below `upper` and holds `chunk` entries.
struct Cursor {
    zkey: String,
    upper: String,
    chunk: usize,
}

impl Scored {
    pub(super) fn listed(self, at: Timestamp) -> SnapItem {
        SnapItem {
            id: self.id,
            score: self.score,
            counters: self.counters,
            author: self.meta.meta.author.clone(),
            at,
            trend: self.trend,
            scale: self.scale,
        }
    }
}

impl RedisStore {
    /// Exact scores of `ids` for the ranking of `q` at `now`; `None` for
    /// articles that do not belong in it (unknown, deleted, filtered out,
    /// or without activity inside a bounded window). `scales`: the query's
    /// category scales (unscaled: no day), read here as needed.
    pub(super) async fn exact_many(
        &self,
        ids: &[ArticleId],
        q: &HotQuery,
        now: Timestamp,
        scales: &mut Scales,
        seq: &[i64],
        known: Option<&ActiveSets>,
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
        let windows = self
            .windows_known(&kept_ids, q.range, now, seq, known)
            .await?;
        // Rising reads the views per hour of those active in its window.
        let mut series: Vec<Option<Vec<u64>>> = vec![None; kept_ids.len()];
        if q.model == ModelKind::Rising {
            let active: Vec<usize> = (0..kept_ids.len())
                .filter(|&j| windows[j].is_active())
                .collect();
            let ids: Vec<ArticleId> = active.iter().map(|&j| kept_ids[j].clone()).collect();
            let read = self
                .pv_series(&ids, q.params.rising.hours(now), now)
                .await?;
            for (j, s) in active.into_iter().zip(read) {
                series[j] = Some(s);
            }
        }
        let categories = (keep.iter())
            .filter_map(|&i| metas[i].as_ref())
            .map(|m| m.meta.category.as_deref());
        self.read_scales(scales, categories, now).await?;
        let mut out: Vec<Option<Scored>> = vec![None; ids.len()];
        for ((&i, c), series) in keep.iter().zip(windows).zip(series) {
            if matches!(q.range, RangeSpec::Hours(_)) && !c.is_active() {
                continue;
            }
            let Some(meta) = metas[i].clone() else {
                continue;
            };
            let models = &self.settings.models;
            let Some(st) =
                models.standing(q.model, &q.params, &c, &meta.meta, series.as_deref(), now)
            else {
                continue;
            };
            let scale = scales.of(meta.meta.category.as_deref());
            let st = st.scaled(scale);
            out[i] = Some(Scored {
                id: ids[i].clone(),
                score: st.score,
                bound: st.bound,
                counters: c,
                trend: st.trend,
                scale,
                meta,
            });
        }
        Ok(out)
    }

    /// Every article of shard `sk` that may belong in a ranking over
    /// `range` at `now`; with a window, read from its activity sets
    /// ([`Self::read_sets`]), which `active` then holds.
    pub(super) async fn candidates(
        &self,
        sk: &ShardKeys,
        range: RangeSpec,
        now: Timestamp,
        active: &mut ActiveSets,
    ) -> Result<Vec<ArticleId>, StoreError> {
        let Some(plan) = window_plan(range, now, self.opts.hourly_days) else {
            let ids: Vec<String> = redis::cmd("ZRANGE")
                .arg(sk.newest())
                .arg(0)
                .arg(-1)
                .query_async(&mut self.con())
                .await
                .map_err(store_err)?;
            return Ok(sorted_ids(&ids));
        };
        let mut ids = self.read_sets(sk, &plan, active).await?;
        ids.sort();
        Ok(ids)
    }

    /// Reads each activity set of `plan`'s window in shard `sk` once,
    /// whole (one pipeline), into `active`: the hours and days whose sets
    /// hold each article, which window reads need (asking every set about
    /// each article instead costs the articles times the sets). Answers the
    /// articles it found (each once; a shard's sets are read once a query).
    async fn read_sets(
        &self,
        sk: &ShardKeys,
        plan: &WindowPlan,
        active: &mut ActiveSets,
    ) -> Result<Vec<ArticleId>, StoreError> {
        let mut pipe = redis::pipe();
        for (_, _, key) in window_sets(sk, plan) {
            pipe.smembers(key);
        }
        let sets: Vec<Vec<String>> = self.query_pipe(&pipe).await.map_err(store_err)?;
        let mut found = Vec::new();
        for ((hourly, t, _), members) in window_sets(sk, plan).zip(sets) {
            for id in members.iter().filter_map(|m| ArticleId::parse(m).ok()) {
                if !active.covers(&id) {
                    found.push(id.clone());
                }
                let map = if hourly {
                    &mut active.hours
                } else {
                    &mut active.days
                };
                map.entry(id).or_default().push(t);
            }
        }
        Ok(found)
    }

    /// Reads every shard's activity sets whole, once (those not read
    /// yet), when the walk has scored so many articles that asking every
    /// set about each would cost more answers than the sets hold members
    /// (bounds all loose, as after a rebuild with many equal scores). A
    /// walk of a few pages never weighs it: the sets' sizes cost a round
    /// trip.
    async fn read_sets_when_cheaper(
        &self,
        reads: &mut SetReads,
        range: RangeSpec,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        if reads.walked < WALK_BEFORE_SETS || !reads.read.contains(&false) {
            return Ok(());
        }
        let Some(plan) = window_plan(range, at, self.opts.hourly_days) else {
            return Ok(());
        };
        let shards = self.keys.all_shards();
        if reads.members.is_none() {
            let mut pipe = redis::pipe();
            for sk in &shards {
                for (_, _, key) in window_sets(sk, &plan) {
                    pipe.scard(key);
                }
            }
            let sizes: Vec<u64> = self.query_pipe(&pipe).await.map_err(store_err)?;
            reads.members = Some(sizes.iter().sum());
        }
        let sets = window_sets(&shards[0], &plan).count() as u64;
        if (reads.walked as u64) * sets < reads.members.unwrap_or(0) {
            return Ok(());
        }
        for (sk, read) in shards.iter().zip(reads.read.iter_mut()) {
            if !*read {
                self.read_sets(sk, &plan, &mut reads.sets).await?;
                *read = true;
            }
        }
        Ok(())
    }

    /// Runs `walk` over the ranking of `q` at `now` (or later: the
    /// rankings' newest scores or the newest ingest may be ahead, see
    /// [`rank::query_time`]): the exact items the walk asked for, and the
    /// time they are exact at. Every shard's ranking is walked with the
    /// one `walk` (module docs).
    pub(super) async fn top(
        &self,
        q: &HotQuery,
        walk: Walk<SnapItem>,
        now: Timestamp,
    ) -> Result<(Vec<SnapItem>, Timestamp), StoreError> {
        (self.top_if(q, walk, now, Stale::Rebuild).await?)
            .ok_or_else(|| bad_reply("a query's walk found no ranking to rebuild"))
    }

    /// [`Self::top`]; with [`Stale::Skip`], `None` when a shard's ranking
    /// needs a rebuild ([`Synced::stale`]) instead of rebuilding it.
    pub(super) async fn top_if(
        &self,
        q: &HotQuery,
        walk: Walk<SnapItem>,
        now: Timestamp,
        stale: Stale,
    ) -> Result<Option<(Vec<SnapItem>, Timestamp)>, StoreError> {
        let started = std::time::Instant::now();
        let shards = self.keys.all_shards();
        // A ranking scaled by category is its day's: when the answer's
        // time falls on a later day than `now` (the newest event or bounds
        // are ahead of this clock), it is that day's ranking instead.
        let mut key_at = now;
        let (zkeys, synced, _claim, at) = loop {
            let zkeys: Vec<String> = shards.iter().map(|sk| sk.ranking_of(q, key_at)).collect();
            let mut synced = self.sync(Some(&zkeys)).await?;
            if stale == Stale::Skip && synced.iter().any(Synced::stale) {
                return Ok(None);
            }
            let claim = self.claim_rebuild(&zkeys, &mut synced).await?;
            let bounds_at = synced.iter().filter(|s| s.rseq >= 0).map(|s| s.rnow).max();
            let clock = synced.iter().map(|s| s.clock).max().unwrap_or(0);
            let at = rank::query_time(now, bounds_at, clock);
            // (Only ever forward: a day whose ranking has no bounds yet
            // may answer earlier than the one before it did.)
            if RankingId::of(q, at).day <= RankingId::of(q, key_at).day {
                break (zkeys, synced, claim, at);
            }
            key_at = at;
        };
        // Its divisors count the key's day's window (never a later one).
        let mut scales = Scales::new(RankingId::of(q, key_at).day);
        let seqs: Seqs = synced.iter().map(|s| s.seq).collect();
        let rebuild: Vec<bool> = synced.iter().map(Synced::stale).collect();
        let mut reads = SetReads {
            sets: ActiveSets::default(),
            read: rebuild.clone(),
            walked: 0,
            members: None,
        };
        let now_scored =
            (self.scored_now(&shards, &synced, &rebuild, q.range, at, &mut reads)).await?;
        let mut pass = Pass {
            walk,
            seen: now_scored.iter().cloned().collect(),
            pairs: Vec::new(),
            reads,
            q,
            at,
            scales: Scales::default(),
            seqs: &seqs,
        };
        let exact = self
            .exact_many(
                &now_scored,
                q,
                at,
                &mut scales,
                &seqs,
                Some(&pass.reads.sets),
            )
            .await?;
        pass.scales = scales;
        for (id, x) in now_scored.iter().zip(exact) {
            let shard = self.keys.shard_index(id) as usize;
            match x {
                Some(x) => {
                    pass.pairs.push((id.clone(), Some(x.bound)));
                    pass.walk.offer(x.listed(at), None);
                }
                // A rebuild writes only what belongs in the ranking.
                None if !rebuild[shard] => pass.pairs.push((id.clone(), None)),
                None => {}
            }
        }
        // The threshold walk over the bounds of every shard not rebuilt,
        // highest first, paged by score: other queries and nodes rewrite
        // bounds meanwhile (only ever lowering those of unchanged
        // articles), and a page by position would skip entries that slid
        // up past it.
        // Each shard's share of the top, twice over: a shard that holds
        // more pages on with doubled chunks.
        let first_chunk = (pass.walk.depth().saturating_mul(2) / shards.len().max(1)).max(32);
        let cursors: Vec<Cursor> = (0..shards.len())
            .filter(|&i| !rebuild[i])
            .map(|i| Cursor {
                zkey: zkeys[i].clone(),
                upper: "+inf".to_string(),
                chunk: first_chunk,
            })
            .collect();
        self.walk_bounds(&mut pass, cursors, first_chunk).await?;
        let Pass { walk, pairs, .. } = pass;
        // Every shard's scores back into its own ranking.
        let per_shard = self.keys.group_by_shard(pairs, |(id, _)| id);
        let backs: Vec<_> = shards
            .into_iter()
            .zip(zkeys)
            .zip(per_shard)
            .enumerate()
            .map(|(i, ((shard, zkey), pairs))| WriteBack {
                shard,
                zkey,
                seq: seqs[i],
                rebuild: rebuild[i],
                pairs,
            })
            .collect();
        self.write_back(&backs, at).await?;
        if rebuild.iter().any(|r| *r) {
            metrics::counter!("hotrank_ranking_rebuilds_total").increment(1);
        }
        metrics::histogram!("hotrank_ranking_seconds").record(started.elapsed().as_secs_f64());
        Ok(Some((walk.finish(), at)))
    }

    /// The articles a query scores now, whatever their bounds say: every
    /// candidate of a shard rebuilt, and the articles changed since a
    /// shard's ranking last looked (their bounds no longer hold).
    async fn scored_now(
        &self,
        shards: &[ShardKeys],
        synced: &[Synced],
        rebuild: &[bool],
        range: RangeSpec,
        at: Timestamp,
        reads: &mut SetReads,
    ) -> Result<Vec<ArticleId>, StoreError> {
        let mut now_scored: Vec<ArticleId> = Vec::new();
        for (i, s) in synced.iter().enumerate() {
            if rebuild[i] {
                now_scored.extend(
                    self.candidates(&shards[i], range, at, &mut reads.sets)
                        .await?,
                );
            } else {
                let mut dirty: Vec<ArticleId> = s
                    .changed
                    .iter()
                    .filter(|(_, seq)| *seq > s.rseq)
                    .map(|(id, _)| id.clone())
                    .collect();
                dirty.sort();
                dirty.dedup();
                now_scored.extend(dirty);
            }
        }
        Ok(now_scored)
    }

    /// The walk over the bounds of every shard in `cursors`, a chunk of
    /// each in one pipeline, until the walk wants no more of any.
    async fn walk_bounds(
        &self,
        pass: &mut Pass<'_>,
        mut cursors: Vec<Cursor>,
        first_chunk: usize,
    ) -> Result<(), StoreError> {
        while !cursors.is_empty() {
            // One chunk of every live shard, in one pipeline.
            let mut pipe = redis::pipe();
            for c in &cursors {
                pipe.cmd("ZREVRANGEBYSCORE")
                    .arg(&c.zkey)
                    .arg(&c.upper)
                    .arg("-inf")
                    .arg("WITHSCORES")
                    .arg("LIMIT")
                    .arg(0)
                    .arg(c.chunk);
            }
            let mut pages: Vec<Vec<(String, f64)>> =
                self.query_pipe(&pipe).await.map_err(store_err)?;
            // A full page may end inside a run of equal bounds: its entries
            // above the lowest bound go first; the run itself is read
            // (below) only if the walk still wants that bound, and the
            // next page starts strictly below it.
            let mut lowest: Vec<Option<f64>> = Vec::with_capacity(pages.len());
            for (c, page) in cursors.iter().zip(pages.iter_mut()) {
                let low = (page.len() == c.chunk).then(|| page[page.len() - 1].1);
                if let Some(l) = low {
                    page.retain(|e| e.1 != l);
                }
                lowest.push(low);
            }
            let stopped = self.walk_entries(pass, pages).await?;
            let mut runs: Vec<usize> = (0..cursors.len())
                .filter(|&i| !stopped[i] && lowest[i].is_some_and(|l| pass.walk.wants_bound(l)))
                .collect();
            // A run of equal bounds lists its entries by id, ascending:
            // the walk's own order, so it stops inside the run as soon as
            // no later id can enter. Each read starts at the run's first
            // entry again, with twice the limit (entries that leave the run
            // meanwhile move below it, where the walk goes on; a read by
            // position would skip the ones that slid up), and the walk
            // skips the entries it has seen.
            let mut limit = first_chunk;
            let mut open = runs.clone();
            while !open.is_empty() {
                let mut pipe = redis::pipe();
                for &i in &open {
                    let l = score_arg(lowest[i].unwrap_or(f64::NEG_INFINITY));
                    pipe.cmd("ZRANGEBYSCORE")
                        .arg(&cursors[i].zkey)
                        .arg(&l)
                        .arg(&l)
                        .arg("WITHSCORES")
                        .arg("LIMIT")
                        .arg(0)
                        .arg(limit);
                }
                let got: Vec<Vec<(String, f64)>> =
                    self.query_pipe(&pipe).await.map_err(store_err)?;
                let mut ties = vec![Vec::new(); cursors.len()];
                let mut whole = Vec::new();
                for (&i, run) in open.iter().zip(got) {
                    if run.len() < limit {
                        whole.push(i);
                    }
                    ties[i] = run;
                }
                let stopped = self.walk_entries(pass, ties).await?;
                runs.retain(|&i| !stopped[i]);
                open.retain(|&i| !stopped[i] && !whole.contains(&i));
                limit = limit.saturating_mul(2);
            }
            // Shards go on below a run the walk took whole; the others,
            // stopped, exhausted or past what the walk wants, are done.
            cursors = cursors
                .into_iter()
                .enumerate()
                .filter(|(i, _)| runs.contains(i))
                .map(|(i, mut c)| {
                    c.upper = format!("({}", score_arg(lowest[i].unwrap_or(f64::NEG_INFINITY)));
                    c.chunk = c.chunk.saturating_mul(2);
                    c
                })
                .collect();
        }
        Ok(())
    }

    /// Offers to the walk the entries of each shard's `pages[k]` it wants,
    /// in index order, scored exactly at the pass's time (one round trip
    /// for all shards); each exact score goes to the pass's pairs for the
    /// write-back. Answers, per shard, whether the walk stopped wanting its
    /// entries.
    async fn walk_entries(
        &self,
        pass: &mut Pass<'_>,
        pages: Vec<Vec<(String, f64)>>,
    ) -> Result<Vec<bool>, StoreError> {
        let Pass {
            walk,
            seen,
            pairs,
            reads,
            q,
            at,
            scales,
            seqs,
        } = pass;
        let (q, at, seqs) = (*q, *at, *seqs);
        let mut wanted: Vec<(f64, ArticleId)> = Vec::new();
        let mut stopped = Vec::with_capacity(pages.len());
        for page in pages {
            let mut entries: Vec<(f64, ArticleId)> = page
                .into_iter()
                .filter_map(|(id, b)| Some((b, ArticleId::parse(&id).ok()?)))
                .collect();
            entries.sort_by(|a, b| rank::order(a.0, &a.1, b.0, &b.1));
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
            stopped.push(stop);
        }
        if wanted.is_empty() {
            return Ok(stopped);
        }
        let ids: Vec<ArticleId> = wanted.iter().map(|w| w.1.clone()).collect();
        reads.walked += ids.len();
        self.read_sets_when_cheaper(reads, q.range, at).await?;
        let exact = self
            .exact_many(&ids, q, at, scales, seqs, Some(&reads.sets))
            .await?;
        for ((bound, id), x) in wanted.into_iter().zip(exact) {
            pairs.push((id, x.as_ref().map(|x| x.bound)));
            if let Some(x) = x {
                walk.offer(x.listed(at), Some(bound));
            }
        }
        Ok(stopped)
    }

    /// The ranked items of a page, with metadata as it is now.
    async fn page_items(
        &self,
        items: &[SnapItem],
        first_rank: usize,
        q: &HotQuery,
    ) -> Result<Vec<RankedItem>, StoreError> {
        let ids: Vec<ArticleId> = items.iter().map(|x| x.id.clone()).collect();
        let seq = self.cache.lock().seq.clone();
        let metas = self.metas(&ids, &seq).await?;
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
                        let (p, t) = (&q.params, s.trend.as_ref());
                        let models = &self.settings.models;
                        (models.explain(q.model, p, &s.counters, &meta, t, s.at)).scaled(s.scale)
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
        // A cursor's snapshot names its query by the first shard's ranking.
        let zkey = self.keys.shard(0).ranking_undated(q);
        let mut con = self.con();
        let (snap_id, offset, mut snap) = match &q.cursor {
            None => {
                self.warm.asked(&zkey, q, now);
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
                let (id, off) = cursor::parse_snapshot(c, cap)?;
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
}
