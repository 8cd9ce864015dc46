//! Why a pipeline step failed: the store, the archive or the journal it
//! called (as the source), or what it found inconsistent between them.

use crate::archive::ArchiveError;
use crate::store::StoreError;
use crate::store::redis::LoadError;

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A position that does not encode.
    #[error(transparent)]
    Position(#[from] serde_json::Error),
    #[error("pipeline.log_url {url:?} is invalid: {source}")]
    LogUrl {
        url: String,
        #[source]
        source: redis::RedisError,
    },
    #[error("journal connection manager: {0}")]
    JournalConnection(#[source] redis::RedisError),
    /// Flushing worked; evicting after it did not.
    #[error("eviction: {0}")]
    Eviction(#[source] Box<PipelineError>),
    #[error(
        "Redis holds pipeline epoch {redis}, the archive {archive}: not archiving another site's Redis"
    )]
    ArchiveOfOtherSite { redis: String, archive: String },
    #[error(
        "no journal to replay: set [pipeline] log_url (--pipeline-log-url, HOTRANK_PIPELINE_LOG_URL)"
    )]
    NoJournal,
    #[error("a replay runs on one article shard only (redis.shards = 1) for now")]
    Sharded,
    #[error(
        "a replay runs on one Redis only for now, not on a Redis Cluster: replay into one redis-server, then move its keys to the cluster"
    )]
    Cluster,
    #[error(
        "this Redis holds pipeline epoch {0}: it did not lose its data, or was restored already; restore only into a Redis that lost everything"
    )]
    NotLost(String),
    #[error("the journal holds no epoch ({0}): it is empty or lost, and cannot be replayed")]
    NoEpoch(String),
    #[error(
        "the archive belongs to pipeline epoch {archive}, the journal to {journal}: they are not the same site's"
    )]
    OtherSite { archive: String, journal: String },
    #[error(
        "article {id}: its archived position {pos:?} is not a pipeline position ({source}); it was written by an older hotrank, and a replay could count its events twice"
    )]
    ArchivedPosition {
        id: String,
        pos: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("the archived totals' position {pos:?} is invalid: {source}")]
    TotalsPosition {
        pos: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("partition {partition}: cannot move the raw stream past the journal: {source}")]
    MoveRaw {
        partition: u32,
        #[source]
        source: redis::RedisError,
    },
    #[error("another process set pipeline epoch {0} during the restore")]
    EpochTaken(String),
}
