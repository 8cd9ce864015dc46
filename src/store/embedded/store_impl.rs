//! `impl Store for EmbeddedStore`: the operations the API calls, each a
//! short hold of the state lock (ingest, queries and maintenance are in
//! their own files).

use async_trait::async_trait;

use crate::model::{
    ArticleId, ArticleMeta, ArticleView, Event, HotPage, HotQuery, ModelParams, Outcome, Scale,
    Stats, Timestamp, VoteDirection, VoteOutcome, hour_of,
};
use crate::score::ModelKind;
use crate::store::{
    HourlyRow, IngestReject, Lifecycle, PutOutcome, SiteTraffic, Store, StoreError, Voter,
};

use super::ranking::RankKey;
use super::state::record::LogRecord;
use super::store::EmbeddedStore;

#[async_trait]
impl Store for EmbeddedStore {
    async fn ingest(
        &self,
        events: Vec<Event>,
        _now: Timestamp,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError> {
        self.ingest_events(events).await
    }

    async fn put_article(
        &self,
        id: ArticleId,
        meta: ArticleMeta,
        _now: Timestamp,
    ) -> Result<PutOutcome, StoreError> {
        let (seq, created) = {
            let mut inner = self.inner.lock();
            self.writable()?;
            let created = inner.data.lookup(&id).is_none_or(|i| {
                let a = inner.data.article(i);
                a.deleted || !a.known
            });
            let rec = LogRecord::Put { id, meta };
            (
                self.log_and_apply(&mut inner, &rec, &mut Vec::new()),
                created,
            )
        };
        self.durable(seq).await?;
        Ok(if created {
            PutOutcome::Created
        } else {
            PutOutcome::Updated
        })
    }

    async fn article(
        &self,
        id: &ArticleId,
        now: Timestamp,
    ) -> Result<Option<ArticleView>, StoreError> {
        let mut inner = self.inner.lock();
        let Some(idx) = inner.data.lookup(id) else {
            return Ok(None);
        };
        let models = &self.settings.models;
        if inner.data.article(idx).deleted {
            return Ok(None);
        }
        let scores = ModelKind::ALL
            .into_iter()
            .map(|m| {
                let c = inner.data.window(idx, m.default_range(), now);
                let a = inner.data.article(idx);
                let meta = a.meta.get().into_owned();
                let p = ModelParams::default();
                let trend = (m == ModelKind::Rising).then(|| {
                    let series = a.pv_series(p.rising.hours(now));
                    crate::score::rising::evaluate(&series, p.rising).trend
                });
                (m, models.score(m, &p, &c, &meta, trend.as_ref(), now))
            })
            .collect();
        let a = inner.data.article_mut(idx);
        let mut lifetime = a.lifetime.get();
        lifetime.uv = a.lifetime_uv.count();
        Ok(Some(ArticleView {
            id: a.id.clone(),
            meta: a.meta.get().into_owned(),
            lifetime,
            quarantined: a.quarantine.value(),
            deleted: a.deleted,
            scores,
        }))
    }

    async fn delete_article(&self, id: &ArticleId, _now: Timestamp) -> Result<bool, StoreError> {
        let seq = {
            let mut inner = self.inner.lock();
            self.writable()?;
            match inner.data.lookup(id) {
                Some(idx) if !inner.data.article(idx).deleted => {}
                _ => return Ok(false),
            }
            let rec = LogRecord::Delete { id: id.clone() };
            self.log_and_apply(&mut inner, &rec, &mut Vec::new())
        };
        self.durable(seq).await?;
        Ok(true)
    }

    async fn hot(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        // A ranking scaled by category is the one of the day the answer
        // will be at: never before the newest event counted.
        let key = if q.params.scale == Scale::Category {
            let newest = self.inner.lock().newest_event;
            RankKey::of(q, crate::rank::query_time(now, None, newest))
        } else {
            RankKey::of(q, now)
        };
        // A ranking asked for the first time is built off the lock (one
        // build however many queries wait for it); then this hold of the
        // lock walks it.
        // Many changed articles (a bulk load nobody queried meanwhile) are
        // re-scored in short holds first, never in the walk's one hold.
        let mut guard = loop {
            if let Some(guard) = self.caught_up(self.built(&key, now).await, &key, now) {
                break guard;
            }
            tokio::task::yield_now().await;
        };
        let page = self.hot_page(&mut guard, q, &key, now);
        guard.fit(&key);
        // Rankings evicted meanwhile are freed with the lock released.
        let evicted = guard.rankings.take_evicted();
        drop(guard);
        drop(evicted);
        page
    }

    async fn newest(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        self.newest_page(q, now)
    }

    async fn ranked_at(
        &self,
        q: &HotQuery,
        at: Timestamp,
        depth: usize,
    ) -> Result<Vec<ArticleId>, StoreError> {
        Ok(self.ranked_at_scan(q, at, depth).await)
    }

    async fn stats(&self, now: Timestamp, hours: u32) -> Result<Stats, StoreError> {
        let inner = self.inner.lock();
        let d = &inner.data;
        let first = *crate::time::last_hours(hour_of(now), hours).start();
        let site = d.site_figures(first);
        Ok(site.into_stats(Stats {
            articles: d.live_articles() as u64,
            counted: d.counted,
            quarantined: d.quarantine,
            quarantine_by_hour: d
                .quarantine_by_hour
                .range(first..)
                .map(|(h, q)| (*h, *q))
                .collect(),
            ..Stats::default()
        }))
    }

    async fn site_traffic(&self, now: Timestamp, hours: u32) -> Result<SiteTraffic, StoreError> {
        let first = *crate::time::last_hours(hour_of(now), hours).start();
        Ok(self.inner.lock().data.site_traffic(first, now))
    }

    async fn hourly(
        &self,
        id: &ArticleId,
        now: Timestamp,
        hours: u32,
    ) -> Result<Option<Vec<HourlyRow>>, StoreError> {
        let inner = self.inner.lock();
        let Some(idx) = inner.data.lookup(id) else {
            return Ok(None);
        };
        let a = inner.data.article(idx);
        if a.deleted {
            return Ok(None);
        }
        let last = hour_of(now);
        Ok(Some(a.hourly(
            *crate::time::last_hours(last, hours).start(),
            last,
        )))
    }

    async fn net_evidence(
        &self,
        ids: &[ArticleId],
        now: Timestamp,
        hours: u32,
    ) -> Result<Vec<crate::store::NetEvidence>, StoreError> {
        let range = crate::time::last_hours(hour_of(now), hours);
        let inner = self.inner.lock();
        Ok(ids
            .iter()
            .map(|id| match inner.data.lookup(id) {
                Some(idx) => inner.data.net_evidence(idx, range.clone()),
                None => crate::store::NetEvidence::default(),
            })
            .collect())
    }

    async fn post_article(
        &self,
        mut meta: ArticleMeta,
        poster: Voter<'_>,
        now: Timestamp,
    ) -> Result<ArticleId, StoreError> {
        let poster = poster.hash;
        meta.published_at = now;
        let (seq, id) = {
            let mut inner = self.inner.lock();
            self.writable()?;
            let id = inner.data.next_post_id();
            let rec = LogRecord::PostVoted {
                id: id.clone(),
                meta,
                poster,
            };
            (self.log_and_apply(&mut inner, &rec, &mut Vec::new()), id)
        };
        self.durable(seq).await?;
        Ok(id)
    }

    async fn vote(
        &self,
        id: &ArticleId,
        user: Voter<'_>,
        direction: VoteDirection,
        now: Timestamp,
    ) -> Result<VoteOutcome, StoreError> {
        let user = user.hash;
        let (seq, outcome) = {
            let mut inner = self.inner.lock();
            self.writable()?;
            match inner
                .data
                .judge_vote(id, user, direction, now, &self.settings)
            {
                Err(refused) => return Ok(refused),
                Ok(idx) => {
                    let rec = LogRecord::Vote {
                        id: id.clone(),
                        user,
                        direction,
                    };
                    let seq = self.log_and_apply(&mut inner, &rec, &mut Vec::new());
                    let a = inner.data.article(idx);
                    let c = a.lifetime.get();
                    let score = self.settings.models.votes.score(&c, a.meta.published_at());
                    (
                        seq,
                        VoteOutcome::Counted {
                            ups: c.ups,
                            downs: c.downs,
                            score,
                        },
                    )
                }
            }
        };
        self.durable(seq).await?;
        Ok(outcome)
    }

    /// The embedded store has no archive writer.
    async fn archive_age(&self) -> Result<Option<i64>, StoreError> {
        Ok(None)
    }
}

#[async_trait]
impl Lifecycle for EmbeddedStore {
    async fn ready(&self) -> Result<(), StoreError> {
        self.writable()
    }

    fn warming(&self) -> Option<String> {
        (self.warming.load(std::sync::atomic::Ordering::SeqCst))
            .then(|| "warming up: building the default ranking".to_string())
    }

    async fn maintain(&self, now: Timestamp) -> Result<(), StoreError> {
        self.maintenance(now).await
    }

    async fn shutdown(&self) -> Result<(), StoreError> {
        if let Some(wal) = &self.wal {
            if self.records_since_snapshot() > 0 {
                self.snapshot_in_place().await?;
            }
            wal.close()
                .map_err(|e| StoreError::Unavailable(format!("closing the log: {e}")))?;
        }
        Ok(())
    }
}
