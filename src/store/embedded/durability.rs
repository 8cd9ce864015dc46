//! Where and how the embedded store persists ([`Durability`]): the data
//! directory and its lock, reading the newest snapshot, rebuilding the
//! state as of a log record, and replaying the log on two threads.

use std::path::PathBuf;
use std::sync::Arc;

use crate::store::StoreSettings;
use crate::store::snapshot::{list_snapshots, open_snapshot, read_latest_snapshot};
use crate::store::storage::{DirLock, Disk, Storage};
use crate::store::wal::{FsyncPolicy, read_records};

use super::error::OpenError;
use super::persist;
use super::phase::{PhaseGauge, SnapshotPhase};
use super::state::Data;
use super::state::record::LogRecord;

/// How the embedded store persists.
#[derive(Debug, Clone)]
pub struct Durability {
    pub dir: PathBuf,
    pub fsync: FsyncPolicy,
    pub segment_bytes: u64,
    pub snapshot_interval_secs: u64,
    pub snapshot_every_records: u64,
    /// Where the files live: the real disk, or a simulated one in tests.
    pub storage: Arc<dyn Storage>,
}

/// Snapshots kept on disk: the newest, and one to fall back on.
pub(super) const SNAPSHOTS_KEPT: usize = 2;

impl Durability {
    pub fn from_config(c: &crate::config::Config) -> Self {
        let e = &c.embedded;
        Durability {
            dir: c.data_dir.clone(),
            fsync: match e.fsync {
                crate::config::FsyncMode::Always => FsyncPolicy::Always,
                crate::config::FsyncMode::Interval => {
                    FsyncPolicy::Interval(std::time::Duration::from_millis(e.fsync_interval_ms))
                }
            },
            segment_bytes: e.segment_bytes,
            snapshot_interval_secs: e.snapshot_interval_secs,
            snapshot_every_records: e.snapshot_every_records,
            storage: Arc::new(Disk),
        }
    }

    pub(super) fn wal_dir(&self) -> PathBuf {
        self.dir.join("wal")
    }

    pub(super) fn snapshot_dir(&self) -> PathBuf {
        self.dir.join("snapshots")
    }

    /// Creates the data directory and takes its lock, or says who has it.
    pub(super) fn lock(&self) -> Result<DirLock, OpenError> {
        self.storage
            .create_dir_all(&self.dir)
            .map_err(|source| OpenError::CreateDir {
                path: self.dir.clone(),
                source,
            })?;
        let path = self.dir.join("lock");
        self.storage.lock(&path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::WouldBlock {
                OpenError::Locked {
                    dir: self.dir.clone(),
                    lock: path.clone(),
                }
            } else {
                OpenError::Lock {
                    path: path.clone(),
                    source,
                }
            }
        })
    }

    /// The newest valid snapshot's seq and state (restored), or an empty
    /// state; with `parallel`, decoded on two threads.
    pub(super) fn load_snapshot(
        &self,
        settings: &StoreSettings,
        parallel: bool,
    ) -> Result<(Option<u64>, Data), OpenError> {
        let snap_dir = self.snapshot_dir();
        self.storage
            .create_dir_all(&snap_dir)
            .map_err(|source| OpenError::CreateDir {
                path: snap_dir.clone(),
                source,
            })?;
        let (seq, mut data) =
            match read_latest_snapshot(&*self.storage, &snap_dir).map_err(|source| {
                OpenError::ReadSnapshots {
                    dir: snap_dir.clone(),
                    source,
                }
            })? {
                Some(snap) => {
                    let data = persist::decode_state(snap.version, &snap.payload, parallel)
                        .map_err(|source| OpenError::DecodeSnapshot {
                            seq: snap.seq,
                            dir: snap_dir.clone(),
                            source,
                        })?;
                    (Some(snap.seq), data)
                }
                None => (None, Data::new(settings)),
            };
        data.restore(settings);
        Ok((seq, data))
    }

    /// The newest valid snapshot's seq and state for a rebuild, read as a
    /// stream ([`persist::read_state_streamed`]): its dedupe entries stay
    /// on disk, where the returned section says. Invalid snapshots are
    /// skipped (with a warning) for older ones; none: an empty state.
    pub(super) fn read_streamed(
        &self,
        settings: &StoreSettings,
    ) -> Result<(u64, Data, Option<persist::OldSection>), OpenError> {
        let snap_dir = self.snapshot_dir();
        let listed = list_snapshots(&*self.storage, &snap_dir).map_err(|source| {
            OpenError::ReadSnapshots {
                dir: snap_dir.clone(),
                source,
            }
        })?;
        for (seq, path) in listed {
            let read = open_snapshot(&*self.storage, &path)
                .and_then(|r| persist::read_state_streamed(r, &path));
            match read {
                Ok((mut data, old)) => {
                    data.restore(settings);
                    return Ok((seq, data, old));
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
                    ) =>
                {
                    tracing::warn!(file = %path.display(), seq, error = %e, "snapshot: skipping invalid snapshot, trying an older one");
                }
                Err(source) => return Err(OpenError::Snapshot { path, source }),
            }
        }
        let mut data = Data::new(settings);
        data.restore(settings);
        Ok((0, data, None))
    }

    /// The state as of log record `seq`: the newest valid snapshot at or
    /// before it plus the log records after it, read without changing
    /// anything (the log may be live). Fails unless every record up to
    /// `seq` is there. The previous snapshot's dedupe entries are not
    /// loaded: the returned state holds only those the log added or
    /// raised, and the section to merge them with when it is written
    /// ([`persist::write_state_merged`]).
    pub(super) fn rebuild(
        &self,
        settings: &StoreSettings,
        seq: u64,
        phase: &PhaseGauge,
    ) -> Result<(Data, Option<persist::OldSection>), OpenError> {
        phase.set(SnapshotPhase::Read);
        let (from, mut data, old) = self.read_streamed(settings)?;
        if from > seq {
            return Err(OpenError::SnapshotPast { from, seq });
        }
        phase.set(SnapshotPhase::Replay);
        let mut next = from + 1;
        // One thread (not `pipelined`): this runs beside live ingest, which
        // needs the other core.
        let each = |at, version, payload: &[u8]| {
            if at > seq {
                return Ok(());
            }
            if at != next {
                return Err(OpenError::OutOfOrder { at, next }.into());
            }
            data.apply(&persist::decode_record(version, payload)?);
            next += 1;
            Ok(())
        };
        read_records(&*self.storage, &self.wal_dir(), from, each).map_err(|source| {
            OpenError::ReadLog {
                wal_dir: self.wal_dir(),
                source,
            }
        })?;
        if next != seq + 1 {
            return Err(OpenError::LogEnds {
                last: next - 1,
                seq,
            });
        }
        Ok((data, old))
    }
}

/// Replays log records into `data` with two threads: `read` reads,
/// checks and decodes them on this thread and hands each to `push`; another
/// applies them, in order, a batch at a time. A restart spends its time
/// here, and the two halves overlap on two cores.
pub(super) fn pipelined<R>(
    data: &mut Data,
    read: impl FnOnce(&mut dyn FnMut(LogRecord)) -> R,
) -> R {
    const BATCH: usize = 4096;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<LogRecord>>(8);
    std::thread::scope(|s| {
        let applier = std::thread::Builder::new()
            .name("hotrank-replay".into())
            .spawn_scoped(s, move || {
                for batch in rx {
                    for rec in &batch {
                        data.apply(rec);
                    }
                }
            })
            .expect("spawning the replay thread");
        let mut batch = Vec::with_capacity(BATCH);
        let mut push = |rec: LogRecord| {
            batch.push(rec);
            if batch.len() == BATCH {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                // Fails only if the applier panicked: join reports that.
                let _ = tx.send(full);
            }
        };
        let out = read(&mut push);
        if !batch.is_empty() {
            let _ = tx.send(batch);
        }
        drop(tx);
        if let Err(panic) = applier.join() {
            std::panic::resume_unwind(panic);
        }
        out
    })
}
