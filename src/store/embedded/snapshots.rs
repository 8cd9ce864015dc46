//! Taking snapshots: rebuilt off the state lock from the log (or, as a
//! fallback and at shutdown, encoded under it), then the log they make
//! unneeded trimmed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::store::StoreError;
use crate::store::snapshot::{
    list_snapshots, prune_snapshots, write_snapshot, write_snapshot_file,
};
use crate::store::wal::Wal;

use super::durability::{Durability, SNAPSHOTS_KEPT};
use super::persist;
use super::phase::{PhaseReset, SnapshotPhase};
use super::state::retention;
use super::store::EmbeddedStore;

impl EmbeddedStore {
    /// Records appended since the newest snapshot.
    pub(super) fn records_since_snapshot(&self) -> u64 {
        match &self.wal {
            Some(wal) => wal
                .last_appended_seq()
                .saturating_sub(self.snapshot_seq.lock().unwrap_or(0)),
            None => 0,
        }
    }

    /// Snapshots that fell back to encoding under the state lock. For tests.
    #[doc(hidden)]
    pub fn snapshot_fallbacks(&self) -> u64 {
        (self.snapshot_fallbacks).load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What the snapshot being taken is doing now (for benches).
    #[doc(hidden)]
    pub fn snapshot_phase(&self) -> SnapshotPhase {
        self.snapshot_phase.get()
    }

    /// Seqs of the log: (last appended, durable, synced). For tests.
    #[doc(hidden)]
    pub fn log_seqs(&self) -> Option<(u64, u64, u64)> {
        self.wal
            .as_ref()
            .map(|w| (w.last_appended_seq(), w.durable_seq(), w.synced_seq()))
    }

    /// Writes a snapshot as of the last record appended now, without
    /// holding the state lock while it is built: the state at that seq is
    /// rebuilt on a blocking thread from the newest snapshot on disk plus
    /// the log after it ([`Durability::rebuild`], the same code a restart
    /// runs), so ingest never waits for it. Then drops the log that the
    /// oldest snapshot kept no longer needs. Does nothing if no record was
    /// appended since the newest snapshot (two snapshots never share a seq).
    ///
    /// If the rebuild fails (the log was cut back by a stalled writer, a
    /// file cannot be read) it falls back to [`Self::snapshot_in_place`].
    pub async fn snapshot(&self) -> Result<(), StoreError> {
        let (Some(wal), Some(d)) = (&self.wal, &self.durability) else {
            return Ok(());
        };
        let _one = self.snapshot_lock.lock().await;
        let _idle = PhaseReset(&self.snapshot_phase);
        // Appends and applies happen under the state lock: once it is
        // released, every record up to `seq` is applied and none after it.
        let seq = {
            let _inner = self.inner.lock();
            wal.last_appended_seq()
        };
        if *self.snapshot_seq.lock() == Some(seq) {
            return Ok(());
        }
        // The rebuild reads the records up to `seq` back from the log, and
        // the snapshot must hold nothing a crash could still take back.
        self.snapshot_phase.set(SnapshotPhase::Durable);
        wal.wait_durable(seq)
            .await
            .map_err(|e| StoreError::Unavailable(format!("write-ahead log: {e}")))?;
        let started = Instant::now();
        let last_sweep = *self.last_sweep.lock();
        let (d2, settings) = (d.clone(), self.settings.clone());
        let phase = self.snapshot_phase.clone();
        let built = tokio::task::spawn_blocking(move || {
            let (mut data, old) = d2.rebuild(&settings, seq, &phase)?;
            // Retention is not logged: drop what the live state dropped.
            let swept = last_sweep > i64::MIN / 2;
            if swept {
                data.expire(last_sweep, &settings);
            }
            let horizon = swept.then(|| retention::dedupe_horizon(last_sweep, &settings));
            phase.set(SnapshotPhase::Write);
            let dir = d2.snapshot_dir();
            let storage = &*d2.storage;
            let written =
                write_snapshot_file(storage, &dir, seq, persist::STATE_VERSION, |w| match &old {
                    Some(old) => persist::write_state_merged(&mut data, old, storage, horizon, w),
                    None => persist::write_state(&data, w),
                });
            drop(data);
            phase.set(SnapshotPhase::Prune);
            if written.is_ok() {
                prune_snapshots(storage, &dir, SNAPSHOTS_KEPT);
            }
            Ok(written.and_then(|_| list_snapshots(storage, &dir)))
        })
        .await
        .map_err(|e| StoreError::Internal(format!("snapshot task: {e}")))?;
        match built {
            Ok(written) => {
                let kept = written
                    .map_err(|e| StoreError::Unavailable(format!("writing snapshot: {e}")))?;
                self.snapshot_written(wal, seq, kept, started).await
            }
            Err::<_, super::OpenError>(e) => {
                tracing::warn!(seq, error = %e, "snapshot: rebuilding from the log failed; snapshotting under the state lock instead");
                metrics::counter!("hotrank_snapshot_fallbacks_total").increment(1);
                (self.snapshot_fallbacks).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.snapshot_in_place_locked(wal, d).await
            }
        }
    }

    /// Writes a snapshot by encoding the live state under the state lock
    /// (ingest waits for the encoding). Used at shutdown, when nothing is
    /// ingested any more and this is the cheaper way.
    pub async fn snapshot_in_place(&self) -> Result<(), StoreError> {
        let (Some(wal), Some(d)) = (&self.wal, &self.durability) else {
            return Ok(());
        };
        let _one = self.snapshot_lock.lock().await;
        let _idle = PhaseReset(&self.snapshot_phase);
        self.snapshot_in_place_locked(wal, d).await
    }

    /// [`Self::snapshot_in_place`] with `snapshot_lock` held.
    async fn snapshot_in_place_locked(
        &self,
        wal: &Arc<Wal>,
        d: &Durability,
    ) -> Result<(), StoreError> {
        self.snapshot_phase.set(SnapshotPhase::Locked);
        let (seq, bytes) = {
            let inner = self.inner.lock();
            // Appends happen under this lock: `seq` is exactly what `bytes` holds.
            let seq = wal.last_appended_seq();
            if *self.snapshot_seq.lock() == Some(seq) {
                return Ok(());
            }
            let bytes = persist::encode_state(&inner.data)
                .map_err(|e| StoreError::Internal(e.to_string()))?;
            (seq, bytes)
        };
        // Everything up to `seq` is in `bytes`; it must be durable in the
        // log too, or the snapshot would hold unacknowledged-yet state that
        // a crash before its own sync could lose. Waiting keeps it simple.
        wal.wait_durable(seq)
            .await
            .map_err(|e| StoreError::Unavailable(format!("write-ahead log: {e}")))?;
        let dir = d.snapshot_dir();
        let storage = Arc::clone(&d.storage);
        let started = Instant::now();
        let kept = tokio::task::spawn_blocking(move || {
            write_snapshot(
                &*storage,
                &dir,
                seq,
                persist::STATE_VERSION,
                &bytes,
                SNAPSHOTS_KEPT,
            )?;
            list_snapshots(&*storage, &dir)
        })
        .await
        .map_err(|e| StoreError::Internal(format!("snapshot task: {e}")))?
        .map_err(|e| StoreError::Unavailable(format!("writing snapshot: {e}")))?;
        self.snapshot_written(wal, seq, kept, started).await
    }

    /// After a snapshot at `seq` is on disk: trims the log and records it.
    /// The trim deletes segment files and syncs the log's directory on a
    /// blocking thread: on a runtime worker it would hold up every request
    /// that worker runs (a directory sync on a busy disk takes tens of ms).
    async fn snapshot_written(
        &self,
        wal: &Arc<Wal>,
        seq: u64,
        kept: Vec<(u64, PathBuf)>,
        started: Instant,
    ) -> Result<(), StoreError> {
        *self.snapshot_seq.lock() = Some(seq);
        self.snapshot_phase.set(SnapshotPhase::Prune);
        // The log is needed from the oldest snapshot kept on disk on.
        if kept.len() >= SNAPSHOTS_KEPT
            && let Some(&(oldest, _)) = kept.last()
        {
            let wal = Arc::clone(wal);
            tokio::task::spawn_blocking(move || wal.remove_through(oldest))
                .await
                .map_err(|e| StoreError::Internal(format!("log trim task: {e}")))?
                .map_err(|e| StoreError::Unavailable(format!("trimming the log: {e}")))?;
        }
        *self.last_snapshot.lock() = Instant::now();
        let size = kept
            .first()
            .and_then(|(_, p)| self.durability.as_ref()?.storage.len(p).ok())
            .unwrap_or(0);
        metrics::histogram!("hotrank_snapshot_seconds").record(started.elapsed().as_secs_f64());
        metrics::gauge!("hotrank_snapshot_bytes").set(size as f64);
        tracing::info!(
            seq,
            bytes = size,
            ms = started.elapsed().as_millis() as u64,
            "snapshot written"
        );
        Ok(())
    }
}
