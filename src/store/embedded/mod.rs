//! The embedded store: all state in process memory, durable in a data
//! directory through a write-ahead log and periodic snapshots.
//!
//! Ingest takes the state lock, checks that the log is writable (else the
//! whole batch is refused with nothing applied), gates each event, hands one
//! log record per event to the log and only then applies it (so log order is
//! apply order and nothing is applied that the log did not take), releases
//! the lock, and waits for the log to be durable before acknowledging.
//! Queries may therefore see an event a moment before it is acknowledged;
//! they never see one that a crash could take back after it was.
//!
//! If the log stalls (disk full) after it took a batch, the batch is answered
//! 503 although it is applied: the log keeps its records and writes them once
//! the disk has room, so what queries show is what the log will hold. A
//! retry with the same `eventId`s counts each event once.
//!
//! Layout of the data directory:
//! - `lock` — held (advisory `flock`) by the process using the directory;
//! - `wal/` — log segments ([`crate::store::wal`]);
//! - `snapshots/` — the newest snapshots ([`crate::store::snapshot`]);
//! - `wal-damaged-*/` — segments set aside by `hotrank repair`.
//!
//! On-disk encodings and their versions: [`persist`].
//!
//! The files, from the handle down:
//! - `store`: the [`EmbeddedStore`] handle; `store_impl`: its `Store`
//!   operations; `ingest`, `query`, `maintain`: the write path, the pages,
//!   periodic maintenance;
//! - `open`, `snapshots`, `durability`, `phase`: opening (recovery),
//!   repair and import; taking snapshots; the data directory; the snapshot
//!   phase gauge;
//! - `warm`, `builds`, `ranking`, `newest`: ranking builds and upkeep, the
//!   ranking indexes, the `GET /api/new` index;
//! - `inner`: the state behind the lock; `state/`: the in-memory state and
//!   the pure logic over it; [`persist`]: its encodings on disk.

mod builds;
mod durability;
mod error;
mod ingest;
mod inner;
mod maintain;
mod newest;
mod open;
mod past;
pub mod persist;
mod phase;
mod query;
mod ranking;
mod snapshots;
mod state;
mod store;
mod store_impl;
mod warm;

pub use builds::{BuildHook, BuildPhase};
pub use durability::Durability;
pub use error::OpenError;
pub use inner::RankingSizes;
pub use open::{RecoveryReport, RepairReport};
pub use phase::SnapshotPhase;
pub use ranking::UPKEEP_DIRTY;
pub use state::article::WINDOW_CACHES;
pub use state::record::LogRecord;
pub use state::{dedupe, slots};
pub use store::EmbeddedStore;
