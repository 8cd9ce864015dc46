//! The periodic archive writer (seed 002's Abacus flush; docs/design.md,
//! "Archive"): every `flush_secs`, one node takes the articles the Redis
//! store marked as changed, reads their records and upserts them, stamped
//! with the count group's position when the pipeline runs. A failed write
//! gives the ids back, so the next flush writes them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use super::error::PipelineError;
use super::ingest::IngestPipeline;
use super::position::PartitionPosition;
use super::worker::crash_point;
use crate::archive::{
    Archive, ArchiveError, ArchiveOptions, PipelineRow, PipelineTotals, SourcePosition,
};
use crate::clock::{Clock, SystemClock};
use crate::store::redis::{RedisStore, article_records};

/// What one flush did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flushed {
    /// Another node holds the lock.
    Locked,
    /// This many articles were written.
    Articles(u64),
}

/// Flushes one Redis store to one archive.
pub struct ArchiveWriter {
    store: Arc<RedisStore>,
    pipe: Option<Arc<IngestPipeline>>,
    every: Duration,
    /// The data's time (which hourly buckets Redis keeps, `as_of`).
    clock: Arc<dyn Clock>,
    token: String,
    /// Unix seconds of the last successful flush (or of the start).
    last_ok: AtomicI64,
    /// Seconds without change after which an archived article leaves
    /// Redis (0: never).
    evict_after: u64,
}

/// Articles per eviction batch (one read, one upsert, one `evict.lua`).
const EVICT_BATCH: usize = 100;
/// Batches per writer round at most: a round stays short; the rest waits
/// for the next.
const EVICT_BATCHES: usize = 20;

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl ArchiveWriter {
    /// `pipe`: the pipeline whose count group's position is recorded.
    pub fn new(
        store: Arc<RedisStore>,
        pipe: Option<Arc<IngestPipeline>>,
        flush_secs: u64,
        clock: Arc<dyn Clock>,
    ) -> Self {
        ArchiveWriter {
            store,
            pipe,
            every: Duration::from_secs(flush_secs.max(1)),
            clock,
            token: format!("{}-{:016x}", std::process::id(), rand::random::<u64>()),
            last_ok: AtomicI64::new(unix_now()),
            evict_after: 0,
        }
    }

    /// Evicts articles unchanged for `secs` (0: never) after each flush.
    pub fn evict_after(mut self, secs: u64) -> Self {
        self.evict_after = secs;
        self
    }

    /// How long the lock lives: a flush longer than this may overlap the
    /// next node's (docs/design.md, "Archive").
    fn lock_ms(&self) -> u64 {
        (self.every.as_millis() as u64 * 3).max(30_000)
    }

    /// Seconds since the last successful flush.
    pub fn age_secs(&self) -> i64 {
        (unix_now() - self.last_ok.load(Ordering::Relaxed)).max(0)
    }

    /// One flush, if no other node holds the lock.
    pub async fn flush(&self, archive: &Archive) -> Result<Flushed, PipelineError> {
        // Restores (ingest, reads, this flush) need the archive too.
        self.store.set_archive(archive.clone());
        if !self.store.archive_lock(&self.token, self.lock_ms()).await? {
            return Ok(Flushed::Locked);
        }
        let mut r = self.flush_locked(archive).await;
        if r.is_ok()
            && let Err(e) = self.evict_locked(archive).await
        {
            r = Err(PipelineError::Eviction(Box::new(e)));
        }
        if let Err(e) = self.store.archive_unlock(&self.token).await {
            tracing::warn!(error = %e, "archive: cannot release the flush lock (it expires)");
        }
        r.map(Flushed::Articles)
    }

    async fn flush_locked(&self, archive: &Archive) -> Result<u64, PipelineError> {
        let started = Instant::now();
        let epoch = self.journal_epoch(archive).await?;
        // Where the pipeline stands before the take: every article not
        // taken has its applied entries archived, and entries not applied
        // yet are at or past this position's floor.
        // With a journal: where the pipeline stands with the store totals
        // read there, and the operations' floor (docs/design.md,
        // "Disaster recovery").
        let floor = match &self.pipe {
            Some(p) if epoch.is_some() => Some((
                p.position_with_totals(self.clock.now()).await?,
                p.ops_floor().await?,
            )),
            _ => None,
        };
        let ids = self.store.archive_take().await?;
        let now = self.clock.now();
        let written = async {
            // A PUT or delete changes only the meta an eviction keeps:
            // such an article is brought back whole before it is read.
            self.store.restore_if_evicted(&ids, now).await?;
            let (records, at) = self.read(&ids, now, false).await?;
            crash_point("archive_before_upsert");
            // Boxed as Send here: otherwise the compiler cannot prove
            // sqlx's executor futures Send for every lifetime when spawned.
            let upsert: std::pin::Pin<
                Box<dyn Future<Output = Result<_, ArchiveError>> + Send + '_>,
            > = Box::pin(archive.upsert_articles(&records, &at));
            Ok(upsert.await?)
        }
        .await;
        if let Err(e) = written {
            metrics::counter!("hotrank_archive_flush_failures_total").increment(1);
            if let Err(e2) = self.store.archive_give_back().await {
                // The ids stay in archive:taking: the next take merges them.
                tracing::warn!(error = %e2, "archive: cannot give the taken ids back yet");
            }
            return Err(e);
        }
        let done = unix_now();
        self.store.archive_written(&ids, now).await?;
        self.store.archive_taken(done).await?;
        self.last_ok.store(done, Ordering::Relaxed);
        if let (Some(epoch), Some(((floor, totals), ops_floor))) = (epoch, floor) {
            let totals = PipelineTotals {
                counted: totals.counted,
                quarantine: totals.quarantine,
                by_hour: totals.by_hour,
                position: serde_json::to_string(&floor)?,
            };
            self.journal_floor(archive, epoch, &floor, &totals, &ops_floor, done)
                .await?;
        }
        metrics::counter!("hotrank_archive_flushed_total").increment(ids.len() as u64);
        metrics::histogram!("hotrank_archive_flush_seconds")
            .record(started.elapsed().as_secs_f64());
        metrics::gauge!("hotrank_archive_age_seconds").set(0.0);
        Ok(ids.len() as u64)
    }

    /// The records of `ids` (whole: with every daily bucket), and what to
    /// stamp them with: with the pipeline, each article's position, read
    /// atomically with its counts.
    async fn read(
        &self,
        ids: &[crate::model::ArticleId],
        now: crate::model::Timestamp,
        whole: bool,
    ) -> Result<(Vec<crate::store::dump::Record>, SourcePosition), PipelineError> {
        let mut at = SourcePosition::at(now);
        let records = match &self.pipe {
            Some(p) => {
                let (records, per_article) = p.positioned_records(ids, now, whole).await?;
                at.per_article = per_article;
                records
            }
            None if whole => self.store.eviction_records(ids, now).await?,
            None => article_records(&self.store, ids, now).await?,
        };
        Ok((records, at))
    }

    /// With a journal: the pipeline epoch Redis holds, which must be the
    /// archive's (docs/design.md, "Disaster recovery"). A Redis without
    /// one lost its data and awaits a restore: nothing is flushed.
    async fn journal_epoch(&self, archive: &Archive) -> Result<Option<String>, PipelineError> {
        let Some(pipe) = self.pipe.as_ref().filter(|p| p.journal().is_some()) else {
            return Ok(None);
        };
        // A Redis that lost its data (and its epoch) is refused here:
        // nothing is archived until a restore.
        let Some(epoch) = pipe.epoch().await? else {
            return Ok(None);
        };
        let row: std::pin::Pin<Box<dyn Future<Output = Result<_, ArchiveError>> + Send + '_>> =
            Box::pin(archive.pipeline());
        if let Some(row) = row.await?
            && row.epoch != epoch
        {
            return Err(PipelineError::ArchiveOfOtherSite {
                redis: epoch,
                archive: row.epoch,
            });
        }
        Ok(Some(epoch))
    }

    /// After a flush: records the journal floor and the store totals read
    /// at `position`, then trims the journal (never past the floor, nor
    /// before the totals that need it are stored).
    async fn journal_floor(
        &self,
        archive: &Archive,
        epoch: String,
        position: &[PartitionPosition],
        totals: &PipelineTotals,
        ops_floor: &str,
        done: i64,
    ) -> Result<(), PipelineError> {
        let Some(pipe) = &self.pipe else {
            return Ok(());
        };
        let row = PipelineRow {
            epoch,
            floor: position.iter().map(|p| p.floor()).collect(),
        };
        let set: std::pin::Pin<Box<dyn Future<Output = Result<_, ArchiveError>> + Send + '_>> =
            Box::pin(archive.set_pipeline(&row, done));
        set.await?;
        let set: std::pin::Pin<Box<dyn Future<Output = Result<_, ArchiveError>> + Send + '_>> =
            Box::pin(archive.set_pipeline_totals(totals, done));
        set.await?;
        if let Some(j) = pipe.journal()
            && let Err(e) = j
                .trim(&row.floor, Some(ops_floor), pipe.config().journal_keep_secs)
                .await
        {
            tracing::warn!(error = %e, "journal trim failed");
        }
        Ok(())
    }

    /// Eviction (docs/design.md, "Eviction and restore"), under the
    /// flush lock: in batches, the articles archived at least
    /// `evict_after` ago (data time) are read whole, written to the
    /// archive, then dropped by `evict.lua` if still unchanged. Returns
    /// how many went.
    async fn evict_locked(&self, archive: &Archive) -> Result<u64, PipelineError> {
        if self.evict_after == 0 {
            return Ok(0);
        }
        let now = self.clock.now();
        let cutoff = now - self.evict_after as i64;
        let (mut evicted, mut kept) = (0u64, 0usize);
        for _ in 0..EVICT_BATCHES {
            let ids = self
                .store
                .evict_candidates(cutoff, kept, EVICT_BATCH)
                .await?;
            if ids.is_empty() {
                break;
            }
            let (records, at) = self.read(&ids, now, true).await?;
            let found: Vec<_> = records
                .iter()
                .filter_map(|r| match r {
                    crate::store::dump::Record::Article { id, .. } => Some(id.clone()),
                    _ => None,
                })
                .collect();
            let unknown: Vec<_> = ids.iter().filter(|i| !found.contains(i)).cloned().collect();
            self.store.unwritten(&unknown).await?;
            let upsert: std::pin::Pin<
                Box<dyn Future<Output = Result<_, ArchiveError>> + Send + '_>,
            > = Box::pin(archive.upsert_articles(&records, &at));
            upsert.await?;
            crash_point("evict_before_delete");
            let gone = self.store.evict(&records, cutoff).await?;
            kept += found.len() - gone.len();
            evicted += gone.len() as u64;
            metrics::counter!("hotrank_archive_evicted_total").increment(gone.len() as u64);
            if ids.len() < EVICT_BATCH {
                break;
            }
        }
        Ok(evicted)
    }

    /// Connects to the archive (retrying) and flushes every `flush_secs`
    /// until `stop` is set, then once more.
    pub async fn run(self: Arc<Self>, opts: ArchiveOptions, stop: Arc<AtomicBool>) {
        let archive = loop {
            // On a blocking thread: the migration's futures are not
            // provably Send for every lifetime, so they cannot be awaited
            // in a spawned task.
            let o = opts.clone();
            let handle = tokio::runtime::Handle::current();
            let connect =
                tokio::task::spawn_blocking(move || handle.block_on(Archive::connect(&o))).await;
            match connect
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()))
            {
                Ok(a) => {
                    self.store.set_archive(a.clone());
                    break a;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "archive writer: cannot connect yet");
                    metrics::gauge!("hotrank_archive_age_seconds").set(self.age_secs() as f64);
                    if sleep_or_stop(self.every, &stop).await {
                        return;
                    }
                }
            }
        };
        tracing::info!(every_s = self.every.as_secs(), schema = %archive.schema(), "archive writer started");
        loop {
            let stopping = sleep_or_stop(self.every, &stop).await;
            match self.flush(&archive).await {
                Ok(Flushed::Articles(n)) => tracing::debug!(articles = n, "archive flushed"),
                Ok(Flushed::Locked) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "archive flush failed; its articles stay marked")
                }
            }
            metrics::gauge!("hotrank_archive_age_seconds").set(self.age_secs() as f64);
            if stopping {
                break;
            }
        }
        archive.close().await;
    }
}

/// Sleeps `d` in short steps; true when `stop` was set.
async fn sleep_or_stop(d: Duration, stop: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100).min(end - Instant::now())).await;
    }
    stop.load(Ordering::Relaxed)
}

/// A running writer: [`ArchiveTask::stop`] flushes once more and waits.
pub struct ArchiveTask {
    pub writer: Arc<ArchiveWriter>,
    stop: Arc<AtomicBool>,
    handle: tokio::task::JoinHandle<()>,
}

impl ArchiveTask {
    pub async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.handle.await;
    }
}

/// Starts a writer when the configuration asks for one (`[archive] url`
/// set, `flush_secs` > 0).
pub fn spawn_writer(
    config: &crate::config::Config,
    store: Arc<RedisStore>,
    pipe: Option<Arc<IngestPipeline>>,
) -> Option<ArchiveTask> {
    let ac = &config.archive;
    if ac.url.is_empty() || ac.flush_secs == 0 {
        return None;
    }
    // The seed layout's own scripts read the seeds' keys directly and know
    // no tombstones: nothing is evicted there.
    let evict_after = if store.options().seed_layout {
        0
    } else {
        ac.evict_after_secs
    };
    let writer = Arc::new(
        ArchiveWriter::new(store, pipe, ac.flush_secs, Arc::new(SystemClock))
            .evict_after(evict_after),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let handle = tokio::spawn(
        writer
            .clone()
            .run(ArchiveOptions::from_config(ac), stop.clone()),
    );
    Some(ArchiveTask {
        writer,
        stop,
        handle,
    })
}
