//! Seed 002's two-stage counting pipeline on Redis Streams (docs/design.md,
//! "IngestPipeline"), the queued ingest path beside the Redis store's
//! direct one: API nodes queue events (`ingest.rs`), filter and count
//! workers gate and apply them, the journal keeps a copy on a second Redis
//! (`journal.rs`), positions say what the archive includes (`position.rs`),
//! and a restore replays the journal over the archive (`replay.rs`).
//!
//! It stands on the Redis store's public pieces (`crate::store::redis`):
//! its connection, keys, and the Lua chunks both paths run (`gate.lua`,
//! `apply.lua`, ...), which stay there so that both hash the same. Its own
//! scripts are the `pipe_*.lua` files of this folder.

mod archiver;
mod declare;
mod error;
mod ingest;
mod journal;
mod position;
mod replay;
mod store;
mod stream;
mod wait;
mod worker;

pub use archiver::{ArchiveTask, ArchiveWriter, Flushed, spawn_writer};
pub use error::PipelineError;
pub use ingest::IngestPipeline;
pub use journal::{Journal, JournalEntry};
pub use position::{ArticlePosition, MAX_FLIGHT, PartitionPosition, Totals};
pub use replay::Replayed;
pub use store::PipelineStore;
pub use stream::{COUNT_GROUP, Entry, FILTER_GROUP, Role, stream_id};
pub use wait::decision_of;
pub use worker::{Lag, Workers, consumer_name, crash_point, spawn_workers};
