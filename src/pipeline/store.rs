//! The Redis store with ingest through the pipeline ([`PipelineStore`]):
//! events are queued; article operations run on the store, journaled
//! when the pipeline keeps a journal; everything else is the store's.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::ingest::IngestPipeline;
use super::wait::decision_of;
use crate::model::{
    ArticleId, ArticleMeta, ArticleView, Event, HotPage, HotQuery, Outcome, Stats, Timestamp,
    Verdict, VoteDirection, VoteOutcome,
};
use crate::store::redis::{OpKind, OpRun, RedisStore, store_err};
use crate::store::{
    HourlyRow, IngestReject, Lifecycle, PartitionLag, PutOutcome, Queue, QueueRefused, QueueStats,
    Store, StoreError, Voter,
};

/// The Redis store with ingest through the pipeline: events are queued,
/// everything else is the store's.
pub struct PipelineStore {
    pipe: Arc<IngestPipeline>,
}

impl PipelineStore {
    pub fn new(pipe: Arc<IngestPipeline>) -> Self {
        PipelineStore { pipe }
    }

    pub fn pipeline(&self) -> &Arc<IngestPipeline> {
        &self.pipe
    }

    fn inner(&self) -> &RedisStore {
        &self.pipe.store
    }
}

#[async_trait]
impl Store for PipelineStore {
    async fn ingest(
        &self,
        events: Vec<Event>,
        now: Timestamp,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError> {
        // Callers that need verdicts now (CLI tools) wait for them, long
        // enough for a crashed worker's entries to be claimed.
        let wait = Duration::from_millis(self.pipe.cfg.claim_idle_ms.saturating_mul(2))
            .max(Duration::from_secs(30));
        self.pipe.ingest_and_wait(events, now, wait).await
    }

    async fn put_article(
        &self,
        id: ArticleId,
        meta: ArticleMeta,
        now: Timestamp,
    ) -> Result<PutOutcome, StoreError> {
        let Some(epoch) = self.pipe.op_epoch().await? else {
            return self.inner().put_article(id, meta, now).await;
        };
        let run = OpRun::Journaled { epoch: &epoch };
        let done = self.inner().put_run(&id, &meta, &run).await;
        self.pipe
            .journaled(&epoch, OpKind::Put, done, |_| id.to_string())
            .await
    }

    async fn article(
        &self,
        id: &ArticleId,
        now: Timestamp,
    ) -> Result<Option<ArticleView>, StoreError> {
        self.inner().article(id, now).await
    }

    async fn delete_article(&self, id: &ArticleId, now: Timestamp) -> Result<bool, StoreError> {
        let Some(epoch) = self.pipe.op_epoch().await? else {
            return self.inner().delete_article(id, now).await;
        };
        let run = OpRun::Journaled { epoch: &epoch };
        let done = self.inner().delete_run(id, &run).await;
        self.pipe
            .journaled(&epoch, OpKind::Delete, done, |_| id.to_string())
            .await
    }

    async fn hot(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        self.inner().hot(q, now).await
    }

    async fn newest(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        self.inner().newest(q, now).await
    }

    async fn ranked_at(
        &self,
        q: &HotQuery,
        at: Timestamp,
        depth: usize,
    ) -> Result<Vec<ArticleId>, StoreError> {
        self.inner().ranked_at(q, at, depth).await
    }

    async fn stats(&self, now: Timestamp, hours: u32) -> Result<Stats, StoreError> {
        self.inner().stats(now, hours).await
    }

    async fn site_traffic(
        &self,
        now: Timestamp,
        hours: u32,
    ) -> Result<crate::store::SiteTraffic, StoreError> {
        self.inner().site_traffic(now, hours).await
    }

    async fn hourly(
        &self,
        id: &ArticleId,
        now: Timestamp,
        hours: u32,
    ) -> Result<Option<Vec<HourlyRow>>, StoreError> {
        self.inner().hourly(id, now, hours).await
    }

    async fn net_evidence(
        &self,
        ids: &[ArticleId],
        now: Timestamp,
        hours: u32,
    ) -> Result<Vec<crate::store::NetEvidence>, StoreError> {
        self.inner().net_evidence(ids, now, hours).await
    }

    async fn post_article(
        &self,
        meta: ArticleMeta,
        poster: Voter<'_>,
        now: Timestamp,
    ) -> Result<ArticleId, StoreError> {
        let Some(epoch) = self.pipe.op_epoch().await? else {
            return self.inner().post_article(meta, poster, now).await;
        };
        let run = OpRun::Journaled { epoch: &epoch };
        let done = self.inner().post_run(meta, poster, now, &run).await;
        self.pipe
            .journaled(&epoch, OpKind::Post, done, |id| id.to_string())
            .await
    }

    async fn vote(
        &self,
        id: &ArticleId,
        voter: Voter<'_>,
        dir: VoteDirection,
        now: Timestamp,
    ) -> Result<VoteOutcome, StoreError> {
        let Some(epoch) = self.pipe.op_epoch().await? else {
            return self.inner().vote(id, voter, dir, now).await;
        };
        let run = OpRun::Journaled { epoch: &epoch };
        let done = self.inner().vote_run(id, voter, dir, now, &run).await;
        self.pipe
            .journaled(&epoch, OpKind::Vote, done, |_| id.to_string())
            .await
    }

    async fn archive_age(&self) -> Result<Option<i64>, StoreError> {
        self.inner().archive_age().await
    }
}

#[async_trait]
impl Lifecycle for PipelineStore {
    async fn ready(&self) -> Result<(), StoreError> {
        self.inner().ready().await
    }

    async fn maintain(&self, now: Timestamp) -> Result<(), StoreError> {
        self.inner().maintain(now).await
    }

    fn warming(&self) -> Option<String> {
        self.inner().warming()
    }

    async fn keep_rankings(&self, now: Timestamp) -> Result<(), StoreError> {
        self.inner().keep_rankings(now).await
    }

    async fn shutdown(&self) -> Result<(), StoreError> {
        self.inner().shutdown().await
    }
}

/// Ingest through the pipeline's streams: the API queues, workers decide.
#[async_trait]
impl Queue for PipelineStore {
    async fn enqueue(&self, events: Vec<Event>, now: Timestamp) -> Result<(), StoreError> {
        self.pipe.append(events, now).await
    }

    async fn verdict(
        &self,
        event_id: u128,
    ) -> Result<Option<Result<Verdict, IngestReject>>, StoreError> {
        let mut con = self.inner().con();
        let code: Option<i64> = redis::cmd("GET")
            .arg(self.pipe.verdict_key(event_id))
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        Ok(code.and_then(decision_of))
    }

    async fn status(&self) -> Result<QueueStats, StoreError> {
        let lag = self.pipe.lag().await?;
        let archive_age_seconds = self.inner().archive_age().await?;
        let refused: HashMap<String, u64> = redis::cmd("HGETALL")
            .arg(self.pipe.refused_key())
            .query_async(&mut self.inner().con())
            .await
            .map_err(store_err)?;
        let reason = |r: &str| refused.get(r).copied().unwrap_or(0);
        Ok(QueueStats {
            partitions: self.pipe.cfg.partitions,
            backlog: lag.iter().map(|l| l.pending + l.unread).sum(),
            max_backlog: self.pipe.cfg.max_backlog,
            archive_age_seconds,
            refused: QueueRefused {
                unknown_article: reason("unknown_article"),
                too_many_articles: reason("too_many_articles"),
            },
            lag: lag
                .iter()
                .map(|l| PartitionLag {
                    partition: l.partition,
                    group: l.group.to_string(),
                    pending: l.pending,
                    unread: l.unread,
                })
                .collect(),
        })
    }
}
