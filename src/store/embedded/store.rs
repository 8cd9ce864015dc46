//! The [`EmbeddedStore`] handle: what it holds, how it is put together,
//! and the read-only accessors tools and tests use.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::model::Timestamp;
use crate::store::StoreSettings;
use crate::store::storage::DirLock;
use crate::store::wal::Wal;

use super::builds::BuildHook;
use super::durability::Durability;
use super::inner::{Inner, RankingSizes};
use super::phase::PhaseGauge;
use super::state::Data;

/// The embedded store: its state behind one lock, its log and snapshots
/// (see [the module](crate::store::embedded)).
pub struct EmbeddedStore {
    pub(super) inner: Arc<Mutex<Inner>>,
    /// While the default ranking is built after open ([`Self::warm_in_background`]).
    pub(super) warming: Arc<std::sync::atomic::AtomicBool>,
    pub(super) build_hook: Arc<Mutex<Option<BuildHook>>>,
    /// Shared with the snapshot's blocking task, which trims it.
    pub(super) wal: Option<Arc<Wal>>,
    pub(super) durability: Option<Durability>,
    /// The data directory's lock, held for the store's lifetime.
    _lock: Option<DirLock>,
    pub(super) settings: StoreSettings,
    pub(super) last_snapshot: Mutex<Instant>,
    /// Seq of the newest snapshot on disk. The log is trimmed only up to
    /// the oldest snapshot kept, so that if the newest turns out unreadable
    /// the older one plus the log still rebuild everything.
    pub(super) snapshot_seq: Mutex<Option<u64>>,
    /// When retention last ran (store time).
    pub(super) last_sweep: Mutex<Timestamp>,
    /// Serialises snapshots (maintenance and shutdown may race).
    pub(super) snapshot_lock: tokio::sync::Mutex<()>,
    /// Snapshots that could not be rebuilt off the lock (see
    /// [`EmbeddedStore::snapshot`]).
    pub(super) snapshot_fallbacks: std::sync::atomic::AtomicU64,
    pub(super) snapshot_phase: PhaseGauge,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

impl EmbeddedStore {
    /// A store that keeps nothing on disk (simulations, replays, benches).
    pub fn in_memory(settings: StoreSettings) -> Self {
        let data = Data::new(&settings);
        Self::assemble(data, None, None, None, settings)
    }

    pub(super) fn assemble(
        data: Data,
        wal: Option<Wal>,
        durability: Option<Durability>,
        lock: Option<DirLock>,
        settings: StoreSettings,
    ) -> Self {
        EmbeddedStore {
            inner: Arc::new(Mutex::new(Inner::new(data, &settings))),
            warming: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            build_hook: Arc::new(Mutex::new(None)),
            wal: wal.map(Arc::new),
            durability,
            _lock: lock,
            settings,
            last_snapshot: Mutex::new(Instant::now()),
            snapshot_seq: Mutex::new(None),
            last_sweep: Mutex::new(i64::MIN / 2),
            snapshot_lock: tokio::sync::Mutex::new(()),
            snapshot_fallbacks: std::sync::atomic::AtomicU64::new(0),
            snapshot_phase: PhaseGauge::default(),
        }
    }

    /// All state as dump records (`hotrank export`).
    pub fn export(&self) -> Vec<crate::store::dump::Record> {
        self.inner.lock().data.export()
    }

    /// Articles `GET /api/new` pages looked at so far: a page of `limit`
    /// looks at about `offset + limit` articles of its filter's index,
    /// however rare the filter (tests of its cost).
    pub fn new_visited(&self) -> u64 {
        self.inner.lock().new_visited
    }

    /// What the live rankings and window caches hold now.
    pub fn ranking_sizes(&self) -> RankingSizes {
        self.inner.lock().ranking_sizes()
    }

    /// The gate's state entries: dedupe pairs, eventIds, rate-limit and
    /// behaviour keys (also the `hotrank_*_entries` gauges).
    pub fn gate_sizes(&self) -> (usize, usize, usize) {
        self.inner.lock().data.gate_sizes()
    }

    /// Heap bytes the dedupe table and the per-visitor state (rate logs,
    /// behaviour rule) hold (examples/gate_memory.rs).
    pub fn gate_heap_bytes(&self) -> (usize, usize) {
        self.inner.lock().data.gate_heap_bytes()
    }

    pub fn data_dir(&self) -> Option<&Path> {
        self.durability.as_ref().map(|d| d.dir.as_path())
    }
}
