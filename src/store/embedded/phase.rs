//! What a snapshot is doing now: [`SnapshotPhase`], the gauge shared with
//! the snapshot's blocking task, and the guard that sets it back to idle.

use std::sync::Arc;

/// What a snapshot is doing now ([`EmbeddedStore::snapshot_phase`](crate::store::embedded::EmbeddedStore::snapshot_phase); the
/// persistence bench attributes slow ingest calls to these).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum SnapshotPhase {
    /// No snapshot is being taken.
    Idle,
    /// Waiting for the log to be durable up to the snapshot's seq.
    Durable,
    /// Reading (and checking) the previous snapshot.
    Read,
    /// Replaying the log after it.
    Replay,
    /// Writing (and syncing) the new snapshot.
    Write,
    /// Removing old snapshots and the log they alone needed.
    Prune,
    /// Encoding the live state under the state lock (the fallback, and shutdown).
    Locked,
}

impl SnapshotPhase {
    const ALL: [SnapshotPhase; 7] = [
        SnapshotPhase::Idle,
        SnapshotPhase::Durable,
        SnapshotPhase::Read,
        SnapshotPhase::Replay,
        SnapshotPhase::Write,
        SnapshotPhase::Prune,
        SnapshotPhase::Locked,
    ];
}

/// The current [`SnapshotPhase`], shared with the snapshot's blocking task.
#[derive(Debug, Clone, Default)]
pub(super) struct PhaseGauge(Arc<std::sync::atomic::AtomicU8>);

impl PhaseGauge {
    pub(super) fn set(&self, p: SnapshotPhase) {
        self.0.store(p as u8, std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) fn get(&self) -> SnapshotPhase {
        let n = self.0.load(std::sync::atomic::Ordering::Relaxed);
        SnapshotPhase::ALL[usize::from(n)]
    }
}

/// Sets the phase back to idle however a snapshot ends.
pub(super) struct PhaseReset<'a>(pub(super) &'a PhaseGauge);

impl Drop for PhaseReset<'_> {
    fn drop(&mut self) {
        self.0.set(SnapshotPhase::Idle);
    }
}
