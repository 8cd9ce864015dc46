//! [`Store`] on Redis: each call of the store interface, onto the layers
//! of this module.

use async_trait::async_trait;
use redis::Value;

use super::{RedisStore, bad_reply, claim, ops, store_err, v_i64, v_str, version};
use crate::model::{
    ArticleId, ArticleMeta, ArticleView, Event, HotPage, HotQuery, Outcome, Quarantine, Stats,
    Timestamp, VoteDirection, VoteOutcome, hour_of,
};
use crate::store::{HourlyRow, IngestReject, Lifecycle, PutOutcome, Store, StoreError, Voter};

/// The event counts of an hourly bucket (`bucket:h:`): counted ones by
/// type (`dwell_n` for dwell reports), then quarantined ones by reason.
const BUCKET_H_EVENTS: [&str; 10] = [
    "pv",
    "likes",
    "comments",
    "favorites",
    "shares",
    "dwell_n",
    "q_dup",
    "q_rl",
    "q_bot",
    "q_rep",
];

#[async_trait]
impl Store for RedisStore {
    async fn ingest(
        &self,
        events: Vec<Event>,
        now: Timestamp,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError> {
        self.ingest_events(events, now).await
    }

    async fn put_article(
        &self,
        id: ArticleId,
        meta: ArticleMeta,
        _now: Timestamp,
    ) -> Result<PutOutcome, StoreError> {
        self.put_run(&id, &meta, &ops::OpRun::Plain)
            .await
            .map(|(o, _)| o)
    }

    async fn post_article(
        &self,
        meta: ArticleMeta,
        poster: Voter<'_>,
        now: Timestamp,
    ) -> Result<ArticleId, StoreError> {
        if self.seed_layout() {
            return self.seed_post(meta, poster.raw, now).await;
        }
        self.post_run(meta, poster, now, &ops::OpRun::Plain)
            .await
            .map(|(id, _)| id)
    }

    async fn vote(
        &self,
        id: &ArticleId,
        user: Voter<'_>,
        direction: VoteDirection,
        now: Timestamp,
    ) -> Result<VoteOutcome, StoreError> {
        if self.seed_layout() {
            let up = direction == VoteDirection::Up;
            return self.seed_vote(id, user.raw, up, now).await;
        }
        self.vote_run(id, user, direction, now, &ops::OpRun::Plain)
            .await
            .map(|(o, _)| o)
    }

    async fn article(
        &self,
        id: &ArticleId,
        now: Timestamp,
    ) -> Result<Option<ArticleView>, StoreError> {
        self.check_epoch()?;
        let own = self.article_own(id, now).await?;
        if self.seed_layout() {
            return self.seed_article(id, own, now).await;
        }
        Ok(own)
    }

    async fn delete_article(&self, id: &ArticleId, _now: Timestamp) -> Result<bool, StoreError> {
        if self.seed_layout() {
            return self.seed_delete(id).await;
        }
        self.delete_run(id, &ops::OpRun::Plain)
            .await
            .map(|(done, _)| done)
    }

    async fn hot(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        self.check_epoch()?;
        if self.seed_serves(q) {
            return self.seed_votes_page(q, now).await;
        }
        // Vote models rank every live article: one ranking whatever the
        // range; rising ranks over its window.
        if q.range != q.ranked_range() {
            let q = HotQuery {
                range: q.ranked_range(),
                ..q.clone()
            };
            return self.hot_page(&q, now).await;
        }
        self.hot_page(q, now).await
    }

    async fn newest(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        self.check_epoch()?;
        self.newest_page(q, now).await
    }

    async fn ranked_at(
        &self,
        q: &HotQuery,
        at: Timestamp,
        depth: usize,
    ) -> Result<Vec<ArticleId>, StoreError> {
        self.check_epoch()?;
        self.ranked_at_scan(q, at, depth).await
    }

    async fn stats(&self, now: Timestamp, hours: u32) -> Result<Stats, StoreError> {
        self.check_epoch()?;
        let last = hour_of(now) + 1;
        let first = *crate::time::last_hours(hour_of(now), hours).start();
        let mut pipe = redis::pipe();
        pipe.get(self.keys.counted())
            .hgetall(self.keys.quarantine());
        for h in first..=last {
            pipe.hgetall(self.keys.quarantine_h(h));
        }
        // Live articles: every shard's `articles:new`.
        let shards = self.keys.all_shards();
        for sk in &shards {
            pipe.zcard(sk.newest());
        }
        let got: Vec<Value> = self.query_pipe(&pipe).await.map_err(store_err)?;
        let q_of = |v: &Value| -> Quarantine {
            let mut q = Quarantine::default();
            let pairs: Vec<(String, i64)> = match v {
                Value::Array(a) => a
                    .chunks(2)
                    .filter_map(|kv| Some((v_str(&kv[0])?.to_string(), v_i64(kv.get(1)?)?)))
                    .collect(),
                Value::Map(m) => m
                    .iter()
                    .filter_map(|(k, v)| Some((v_str(k)?.to_string(), v_i64(v)?)))
                    .collect(),
                _ => Vec::new(),
            };
            for (k, n) in pairs {
                let slot = match k.as_str() {
                    "q_dup" => 0,
                    "q_rl" => 1,
                    "q_bot" => 2,
                    "q_rep" => 3,
                    _ => continue,
                };
                q.0[slot] = n.max(0) as u64;
            }
            q
        };
        let hours = (last - first + 1) as usize;
        if got.len() != 2 + hours + shards.len() {
            return Err(bad_reply("stats"));
        }
        let by_hour = (first..=last)
            .zip(&got[2..2 + hours])
            .map(|(h, v)| (h, q_of(v)))
            .filter(|(_, q)| q.total() > 0)
            .collect();
        let articles: i64 = got[2 + hours..]
            .iter()
            .map(|v| v_i64(v).unwrap_or(0).max(0))
            .sum();
        let site = self.site_figures(first, last).await?;
        Ok(site.into_stats(Stats {
            articles: articles as u64,
            counted: v_i64(&got[0]).unwrap_or(0).max(0) as u64,
            quarantined: q_of(&got[1]),
            quarantine_by_hour: by_hour,
            ..Stats::default()
        }))
    }

    async fn site_traffic(
        &self,
        now: Timestamp,
        hours: u32,
    ) -> Result<crate::store::SiteTraffic, StoreError> {
        self.check_epoch()?;
        self.traffic(now, hours).await
    }

    async fn hourly(
        &self,
        id: &ArticleId,
        now: Timestamp,
        hours: u32,
    ) -> Result<Option<Vec<HourlyRow>>, StoreError> {
        self.check_epoch()?;
        let seq = self.sync_node().await?;
        match self.metas(std::slice::from_ref(id), &seq).await?.pop() {
            Some(Some(m)) if !m.deleted => {}
            _ => return Ok(None),
        }
        self.restore_if_evicted(std::slice::from_ref(id), now)
            .await?;
        let last = hour_of(now);
        let first = *crate::time::last_hours(last, hours).start();
        let mut pipe = redis::pipe();
        for h in first..=last {
            pipe.cmd("HMGET")
                .arg(self.keys.bucket_h(id, h))
                .arg(&BUCKET_H_EVENTS);
            pipe.cmd("PFCOUNT").arg(self.keys.uv_h(id, h));
        }
        let mut con = self.con();
        let got: Vec<Value> = pipe.query_async(&mut con).await.map_err(store_err)?;
        let mut rows = Vec::new();
        for (h, pair) in (first..=last).zip(got.chunks(2)) {
            let [Value::Array(vals), uv] = pair else {
                return Err(bad_reply("hourly"));
            };
            if vals.iter().all(|v| matches!(v, Value::Nil)) {
                continue;
            }
            let n = |i: usize| vals.get(i).and_then(v_i64).unwrap_or(0).max(0) as u64;
            rows.push(HourlyRow {
                hour: h,
                pv: n(0),
                uv: v_i64(uv).unwrap_or(0).max(0) as u64,
                quarantined: Quarantine([n(6), n(7), n(8), n(9)]),
            });
        }
        Ok(Some(rows))
    }

    async fn net_evidence(
        &self,
        ids: &[ArticleId],
        now: Timestamp,
        hours: u32,
    ) -> Result<Vec<crate::store::NetEvidence>, StoreError> {
        self.check_epoch()?;
        let hours = crate::time::last_hours(hour_of(now), hours);
        let mut pipe = redis::pipe();
        for id in ids {
            // One multi-key PFCOUNT per sketch: an article's keys share its slot.
            let net: Vec<String> = hours.clone().map(|h| self.keys.net_h(id, h)).collect();
            let uv: Vec<String> = hours.clone().map(|h| self.keys.netuv_h(id, h)).collect();
            pipe.cmd("PFCOUNT").arg(&net);
            pipe.cmd("PFCOUNT").arg(&uv);
            for h in hours.clone() {
                pipe.cmd("HMGET")
                    .arg(self.keys.bucket_h(id, h))
                    .arg(&BUCKET_H_EVENTS);
            }
        }
        // (An article's keys share a slot; on a site over many slots the
        // commands go one pipeline per slot.)
        let got: Vec<Value> = self.query_pipe(&pipe).await.map_err(store_err)?;
        let per = 2 + hours.clone().count();
        let mut out = Vec::with_capacity(ids.len());
        for chunk in got.chunks(per) {
            let n = |v: &Value| v_i64(v).unwrap_or(0).max(0) as u64;
            let mut e = crate::store::NetEvidence {
                blocks: n(&chunk[0]),
                visitors: n(&chunk[1]),
                ..Default::default()
            };
            for row in &chunk[2..] {
                let Value::Array(vals) = row else {
                    return Err(bad_reply("net_evidence"));
                };
                let f = |i: usize| vals.get(i).and_then(v_i64).unwrap_or(0).max(0) as u64;
                e.counted += (0..6).map(f).sum::<u64>();
                e.held += (6..10).map(f).sum::<u64>();
            }
            out.push(e);
        }
        Ok(out)
    }

    async fn archive_age(&self) -> Result<Option<i64>, StoreError> {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        Ok(self.archive_flushed_at().await?.map(|t| (wall - t).max(0)))
    }
}

#[async_trait]
impl Lifecycle for RedisStore {
    async fn ready(&self) -> Result<(), StoreError> {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.version_ok.load(Relaxed) {
            version::check(self.con()).await?;
            self.version_ok.store(true, Relaxed);
        }
        // Redis still holds the site's data (a node that finds it lost
        // says so here, and refuses every call), and takes writes.
        if self.marker_on() {
            self.attach_epoch().await?;
        }
        self.probe_writes().await?;
        // A keyed read (on a cluster it asks the site's primary): the
        // site's shard count, recorded by its first node of more than one
        // shard. A node with another count would read and write its
        // indexes under other keys: it is not ready.
        let key = self.keys.shards_key();
        let n = self.keys.shards;
        let mut pipe = redis::pipe();
        if n > 1 {
            pipe.cmd("SET").arg(&key).arg(n).arg("NX").ignore();
        }
        pipe.get(&key);
        let mut con = self.con();
        let (held,): (Option<u32>,) = pipe.query_async(&mut con).await.map_err(store_err)?;
        match held {
            Some(h) if h != n => Err(StoreError::Unavailable(format!(
                "this site's keys are written over redis.shards = {h}, this node has {n}"
            ))),
            _ => Ok(()),
        }
    }

    fn warming(&self) -> Option<String> {
        self.warming_up()
    }

    async fn keep_rankings(&self, now: Timestamp) -> Result<(), StoreError> {
        self.check_epoch()?;
        self.keep_warm(now).await
    }

    async fn maintain(&self, now: Timestamp) -> Result<(), StoreError> {
        self.check_epoch()?;
        let due = {
            let mut last = self.last_gc.lock();
            let due = now - *last >= 60 || now < *last;
            if due {
                *last = now;
            }
            due
        };
        if due {
            self.collect_changes().await?;
        }
        // Batches a node left between the gate and count stages.
        self.sweep_outbox(now).await?;
        if self.seed_layout() {
            let refresh = {
                let mut last = self.last_seed_refresh.lock();
                let every = self.opts.seed_refresh_secs as i64;
                let due = now - *last >= every || now < *last;
                if due {
                    *last = now;
                }
                due
            };
            if refresh {
                self.seed_refresh(now).await?;
                self.seed_refresh_weighted(now).await?;
            }
        }
        Ok(())
    }

    async fn shutdown(&self) -> Result<(), StoreError> {
        // Every acknowledged write is already in Redis; rebuild claims a
        // query or refresh cut short by the shutdown are given back.
        claim::Claim::give_back_orphans(self.con(), &self.orphans).await;
        Ok(())
    }
}
