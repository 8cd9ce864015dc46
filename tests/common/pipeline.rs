//! The seed 002 pipeline as a store whose `ingest` answers verdicts, for
//! the suites that must run unchanged on it (issue 14): each call queues
//! its events the way an API node does (`IngestPipeline::append`), runs
//! filter and count steps in this task until nothing is left undone, and
//! reads each event's verdict back from the flagged stream of its
//! partition. One partition keeps the gate's order the order of the call,
//! as the direct store sees it.

use std::sync::Arc;

use async_trait::async_trait;

use hotrank::config::PipelineConfig;
use hotrank::model::{
    ArticleId, ArticleMeta, ArticleView, Event, HotPage, HotQuery, Outcome, Stats, Timestamp,
    VoteDirection, VoteOutcome,
};
use hotrank::store::redis::{IngestPipeline, PipelineStore, RedisStore, Role, decision_of};
use hotrank::store::{HourlyRow, IngestReject, PutOutcome, Store, StoreError, Voter};

/// A stream entry as `XRANGE` answers it: id, then field/value pairs.
type StreamEntry = (String, Vec<(String, Vec<u8>)>);

/// A pipeline over `store`, drained after every ingest call.
pub struct DrainedPipeline {
    pipe: Arc<IngestPipeline>,
    inner: PipelineStore,
}

impl DrainedPipeline {
    pub async fn new(store: Arc<RedisStore>) -> Self {
        let cfg = PipelineConfig {
            enabled: true,
            partitions: 1,
            batch: 500,
            ..PipelineConfig::default()
        };
        let pipe = Arc::new(IngestPipeline::new(store, cfg));
        pipe.ensure_groups().await.expect("consumer groups");
        DrainedPipeline {
            inner: PipelineStore::new(pipe.clone()),
            pipe,
        }
    }

    /// The newest entry id of flagged partition `n` ("0-0" when empty).
    async fn last_flagged(&self, n: u32) -> Result<String, StoreError> {
        let mut con = self.pipe.store().con();
        let got: Vec<StreamEntry> = redis::cmd("XREVRANGE")
            .arg(self.pipe.flagged_key(n))
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut con)
            .await
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        Ok(got.into_iter().next().map_or("0-0".into(), |(id, _)| id))
    }

    /// The verdict codes flagged on partition `n` after `after`, in order.
    async fn flagged_since(&self, n: u32, after: &str) -> Result<Vec<i64>, StoreError> {
        let mut con = self.pipe.store().con();
        let got: Vec<StreamEntry> = redis::cmd("XRANGE")
            .arg(self.pipe.flagged_key(n))
            .arg(format!("({after}"))
            .arg("+")
            .query_async(&mut con)
            .await
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        got.iter()
            .map(|(_, fields)| {
                fields
                    .iter()
                    .find(|(k, _)| k == "v")
                    .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse().ok())
                    .ok_or_else(|| StoreError::Internal("flagged entry without a verdict".into()))
            })
            .collect()
    }
}

#[async_trait]
impl Store for DrainedPipeline {
    async fn ingest(
        &self,
        events: Vec<Event>,
        now: Timestamp,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError> {
        let parts = self.pipe.config().partitions;
        let mut marks = Vec::new();
        for n in 0..parts {
            marks.push(self.last_flagged(n).await?);
        }
        let part_of: Vec<u32> = events
            .iter()
            .map(|e| self.pipe.partition_of(&e.article))
            .collect();
        self.pipe.append(events, now).await?;
        let started = std::time::Instant::now();
        loop {
            if started.elapsed() > std::time::Duration::from_secs(60) {
                return Err(StoreError::Internal(format!(
                    "the pipeline did not drain in 60 s: {:?}",
                    self.pipe.lag().await
                )));
            }
            let filtered = self.pipe.step(Role::Filter, "drain", false).await?;
            let counted = self.pipe.step(Role::Count, "drain", false).await?;
            if filtered == 0 && counted == 0 && self.pipe.drained().await? {
                break;
            }
        }
        let mut codes = Vec::new();
        for (n, mark) in marks.iter().enumerate() {
            codes.push(self.flagged_since(n as u32, mark).await?.into_iter());
        }
        part_of
            .iter()
            .map(|&n| {
                let code = codes[n as usize]
                    .next()
                    .ok_or_else(|| StoreError::Internal("an event was not flagged".into()))?;
                let decision = decision_of(code)
                    .ok_or_else(|| StoreError::Internal(format!("verdict code {code}")))?;
                Ok(decision.map(|verdict| Outcome {
                    verdict,
                    pv: 0,
                    uv: 0,
                }))
            })
            .collect()
    }

    async fn put_article(
        &self,
        id: ArticleId,
        meta: ArticleMeta,
        now: Timestamp,
    ) -> Result<PutOutcome, StoreError> {
        self.inner.put_article(id, meta, now).await
    }

    async fn article(
        &self,
        id: &ArticleId,
        now: Timestamp,
    ) -> Result<Option<ArticleView>, StoreError> {
        self.inner.article(id, now).await
    }

    async fn delete_article(&self, id: &ArticleId, now: Timestamp) -> Result<bool, StoreError> {
        self.inner.delete_article(id, now).await
    }

    async fn hot(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        self.inner.hot(q, now).await
    }

    async fn newest(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        self.inner.newest(q, now).await
    }

    async fn stats(&self, now: Timestamp, hours: u32) -> Result<Stats, StoreError> {
        self.inner.stats(now, hours).await
    }

    async fn hourly(
        &self,
        id: &ArticleId,
        now: Timestamp,
        hours: u32,
    ) -> Result<Option<Vec<HourlyRow>>, StoreError> {
        self.inner.hourly(id, now, hours).await
    }

    async fn post_article(
        &self,
        meta: ArticleMeta,
        poster: Voter<'_>,
        now: Timestamp,
    ) -> Result<ArticleId, StoreError> {
        self.inner.post_article(meta, poster, now).await
    }

    async fn vote(
        &self,
        id: &ArticleId,
        voter: Voter<'_>,
        dir: VoteDirection,
        now: Timestamp,
    ) -> Result<VoteOutcome, StoreError> {
        self.inner.vote(id, voter, dir, now).await
    }

    async fn ready(&self) -> Result<(), StoreError> {
        self.inner.ready().await
    }

    async fn maintain(&self, now: Timestamp) -> Result<(), StoreError> {
        self.inner.maintain(now).await
    }

    async fn shutdown(&self) -> Result<(), StoreError> {
        self.inner.shutdown().await
    }
}
