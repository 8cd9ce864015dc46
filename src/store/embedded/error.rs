//! Why a data directory cannot be opened, repaired, imported into, or its
//! state rebuilt: each failure with the file or directory it concerns, and
//! the error beneath it as its source.

use std::io;
use std::path::PathBuf;

use super::persist::StateError;
use crate::store::dump::DumpError;
use crate::store::wal::WalError;

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot create {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Another process holds the directory's lock.
    #[error(
        "data directory {} is in use by another hotrank process (it holds the lock on {}); stop that process or use another --data-dir",
        dir.display(),
        lock.display()
    )]
    Locked { dir: PathBuf, lock: PathBuf },
    #[error("cannot lock {}: {source}", path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("reading snapshots in {}: {source}", dir.display())]
    ReadSnapshots {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The newest snapshot's state does not decode.
    #[error("snapshot {seq} in {}: {source}", dir.display())]
    DecodeSnapshot {
        seq: u64,
        dir: PathBuf,
        #[source]
        source: StateError,
    },
    #[error("snapshot {}: {source}", path.display())]
    Snapshot {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("writing the snapshot in {}: {source}", dir.display())]
    WriteSnapshot {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The log is damaged beyond a torn tail: `hotrank repair` can help.
    #[error(
        "the log in {} is damaged: {source}. To start anyway, run `hotrank repair --data-dir {}` (it keeps every intact record and reports what it skips)",
        wal_dir.display(),
        dir.display()
    )]
    Damaged {
        wal_dir: PathBuf,
        dir: PathBuf,
        #[source]
        source: WalError,
    },
    #[error("opening the log in {}: {source}", wal_dir.display())]
    OpenLog {
        wal_dir: PathBuf,
        #[source]
        source: WalError,
    },
    #[error("reading the log in {}: {source}", wal_dir.display())]
    ReadLog {
        wal_dir: PathBuf,
        #[source]
        source: WalError,
    },
    #[error("moving the damaged log to {}: {source}", to.display())]
    MoveAside {
        to: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is not empty: import only into a new data directory", dir.display())]
    NotEmpty { dir: PathBuf },
    #[error("the newest snapshot ({from}) is past seq {seq}")]
    SnapshotPast { from: u64, seq: u64 },
    #[error("log record {at} where {next} was expected")]
    OutOfOrder { at: u64, next: u64 },
    #[error("the log ends at record {last} before {seq}")]
    LogEnds { last: u64, seq: u64 },
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Dump(#[from] DumpError),
}
