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

mod newest;
pub mod persist;
mod ranking;
mod state;

pub use state::article::WINDOW_CACHES;
pub use state::record::LogRecord;
pub use state::{dedupe, sharded};

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use parking_lot::Mutex;

use crate::clock::GateClock;
use crate::model::{
    ArticleId, ArticleMeta, ArticleView, Event, HotPage, HotQuery, Outcome, RangeSpec, RankedItem,
    Stats, Timestamp, Verdict, VoteDirection, VoteOutcome, hour_of,
};
use crate::rank::Filter;
use crate::rank::pages::{self, First, SnapItem, Snapshot};
use crate::score::{ModelKind, Models};
use crate::store::snapshot::{
    list_snapshots, open_snapshot, prune_snapshots, read_latest_snapshot, write_snapshot,
    write_snapshot_file,
};
use crate::store::storage::{DirLock, Disk, Storage};
use crate::store::wal::{
    FsyncPolicy, SalvageReport, Wal, WalConfig, WalError, read_records, salvage,
};
use crate::store::{
    HourlyRow, IngestReject, Pick, Picker, PutOutcome, Store, StoreError, StoreSettings, Voter,
    cursor,
};

pub use ranking::UPKEEP_DIRTY;
use ranking::{Build, Join, RankKey, Rankings, Step};
use state::article::Idx;
use state::{Change, Data};

/// Where a ranking build is, for [`EmbeddedStore::set_build_hook`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildPhase {
    /// This many articles scored so far (the lock is released).
    Scored(usize),
    /// Every article scored and the index assembled off the lock; next it
    /// is installed and the articles that changed meanwhile re-scored.
    Assembled,
}

/// Called by ranking builds between their holds of the state lock (tests
/// use it to hold a build at a known point while ingest goes on).
pub type BuildHook = Arc<dyn Fn(BuildPhase) + Send + Sync>;

/// What a snapshot is doing now ([`EmbeddedStore::snapshot_phase`]; the
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
struct PhaseGauge(Arc<std::sync::atomic::AtomicU8>);

impl PhaseGauge {
    fn set(&self, p: SnapshotPhase) {
        self.0.store(p as u8, std::sync::atomic::Ordering::Relaxed);
    }

    fn get(&self) -> SnapshotPhase {
        let n = self.0.load(std::sync::atomic::Ordering::Relaxed);
        SnapshotPhase::ALL[usize::from(n)]
    }
}

/// One hold of the state lock by a background step, since `held`.
/// Events of one batch applied per hold of the state lock (~4,300
/// instructions each, so one hold is about 0.1 ms): a query never waits
/// for a whole batch of 1,000.
const INGEST_HOLD_EVENTS: usize = 64;

fn record_hold(what: &'static str, held: Instant) {
    metrics::histogram!("hotrank_lock_hold_seconds", "what" => what)
        .record(held.elapsed().as_secs_f64());
}

/// [`EmbeddedStore::warm`]: builds the default ranking (sharing a build a
/// query started), pins it (it is never evicted) and walks its first page.
/// On an empty store the build is instant, and from then on the ranking
/// follows every article as it arrives: a bulk load is indexed as it is
/// ingested, not by a build on the first query after it.
fn warm_default(
    inner: &Mutex<Inner>,
    settings: &StoreSettings,
    hook: Option<BuildHook>,
    now: Timestamp,
) -> usize {
    let q = HotQuery::default_page();
    let key = EmbeddedStore::rank_key(&q);
    loop {
        let mut guard = inner.lock();
        match guard.rankings.join(&key, now) {
            Join::Built => {
                let i = &mut *guard;
                i.rankings.pin(&key);
                let walk = pages::first_walk(&q, settings.ranking_cap);
                let (models, newest) = (&settings.models, i.newest_event);
                (i.rankings).top(&key, walk, &mut i.data, models, now, newest);
                return i.rankings.sizes().1;
            }
            Join::Wait(signal) => {
                drop(guard);
                signal.wait_blocking();
            }
            Join::Start(signal) => {
                drop(guard);
                let b = Build::new(key.clone(), signal, now);
                run_build(
                    inner,
                    &settings.models,
                    settings.build_chunk,
                    hook.clone(),
                    b,
                );
            }
        }
    }
}

/// Builds a ranking off the state lock ([`Build`]): scores its articles a
/// chunk per short hold of the lock, assembles the index with the lock
/// released, installs it, and re-scores the articles that changed
/// meanwhile. Wakes the queries waiting for it however it ends.
fn run_build(
    inner: &Mutex<Inner>,
    models: &Models,
    chunk: usize,
    hook: Option<BuildHook>,
    b: Build,
) {
    /// Wakes the waiters however the build ends (a panic included), and
    /// drops a ranking left half-built so that the next query starts over.
    struct Finish<'a> {
        inner: &'a Mutex<Inner>,
        build: Build,
    }
    impl Drop for Finish<'_> {
        fn drop(&mut self) {
            self.inner.lock().rankings.abandon(&self.build);
            self.build.signal().finish();
        }
    }
    let started = Instant::now();
    let mut f = Finish { inner, build: b };
    let hook = |phase| {
        if let Some(h) = &hook {
            h(phase);
        }
    };
    loop {
        let mut guard = inner.lock();
        let held = Instant::now();
        let i = &mut *guard;
        let step =
            (i.rankings).build_chunk(&mut f.build, &mut i.data, models, i.newest_event, chunk);
        // Hands the lock to a waiting writer rather than taking it back.
        parking_lot::MutexGuard::unlock_fair(guard);
        record_hold("build", held);
        match step {
            Step::More => hook(BuildPhase::Scored(f.build.scored())),
            Step::Done => break,
            Step::Gone => return,
        }
    }
    f.build.assemble();
    hook(BuildPhase::Assembled);
    let mut installed = false;
    loop {
        let mut guard = inner.lock();
        let held = Instant::now();
        let i = &mut *guard;
        let step = if installed {
            (i.rankings).catch_up(&f.build, &mut i.data, models, i.newest_event, chunk)
        } else {
            installed = true;
            i.rankings.install(&mut f.build)
        };
        parking_lot::MutexGuard::unlock_fair(guard);
        record_hold("catch_up", held);
        match step {
            Step::More => {}
            Step::Done => {
                // Within the byte budget with the new ranking in it; what
                // it evicts is freed with the lock released.
                let mut guard = inner.lock();
                guard.fit(f.build.key());
                let evicted = guard.rankings.take_evicted();
                drop(guard);
                drop(evicted);
                break;
            }
            Step::Gone => return,
        }
    }
    tracing::debug!(
        articles = f.build.scored(),
        ms = started.elapsed().as_millis() as u64,
        "ranking built"
    );
}

/// How often the ranking upkeep thread looks for rankings with many
/// changed articles ([`Rankings::upkeep`]). Between two looks the
/// articles changed are re-scored once each however often they changed.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// The ranking upkeep thread's loop ([`EmbeddedStore::warm_in_background`]):
/// every [`UPKEEP_EVERY`], re-scores what changed in the built rankings in
/// holds of about [`ranking::BUILD_HOLD`]. Ends once the store is dropped.
fn upkeep_rankings(inner: &std::sync::Weak<Mutex<Inner>>, models: &Models, chunk: usize) {
    loop {
        std::thread::sleep(UPKEEP_EVERY);
        let Some(inner) = inner.upgrade() else {
            return;
        };
        upkeep_pass(&inner, models, chunk);
    }
}

/// One pass of [`upkeep_rankings`]: until no built ranking has more than
/// [`ranking::UPKEEP_DIRTY`] changed articles. Returns the articles re-scored.
fn upkeep_pass(inner: &Mutex<Inner>, models: &Models, chunk: usize) -> usize {
    let mut total = 0;
    loop {
        let mut guard = inner.lock();
        let held = Instant::now();
        let i = &mut *guard;
        let (step, done) = i
            .rankings
            .upkeep(&mut i.data, models, i.newest_event, chunk);
        parking_lot::MutexGuard::unlock_fair(guard);
        if done > 0 {
            record_hold("upkeep", held);
        }
        total += done;
        if step != Step::More {
            return total;
        }
    }
}

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
const SNAPSHOTS_KEPT: usize = 2;

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

    fn wal_dir(&self) -> PathBuf {
        self.dir.join("wal")
    }

    fn snapshot_dir(&self) -> PathBuf {
        self.dir.join("snapshots")
    }

    /// Creates the data directory and takes its lock, or says who has it.
    fn lock(&self) -> Result<DirLock, String> {
        self.storage
            .create_dir_all(&self.dir)
            .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
        let path = self.dir.join("lock");
        self.storage.lock(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                format!(
                    "data directory {} is in use by another hotrank process (it holds the lock on {}); stop that process or use another --data-dir",
                    self.dir.display(),
                    path.display()
                )
            } else {
                format!("cannot lock {}: {e}", path.display())
            }
        })
    }

    /// The newest valid snapshot's seq and state (restored), or an empty
    /// state; with `parallel`, decoded on two threads.
    fn load_snapshot(
        &self,
        settings: &StoreSettings,
        parallel: bool,
    ) -> Result<(Option<u64>, Data), String> {
        let snap_dir = self.snapshot_dir();
        self.storage
            .create_dir_all(&snap_dir)
            .map_err(|e| format!("cannot create {}: {e}", snap_dir.display()))?;
        let (seq, mut data) = match read_latest_snapshot(&*self.storage, &snap_dir)
            .map_err(|e| format!("reading snapshots in {}: {e}", snap_dir.display()))?
        {
            Some(snap) => {
                let data = persist::decode_state(snap.version, &snap.payload, parallel)
                    .map_err(|e| format!("snapshot {} in {}: {e}", snap.seq, snap_dir.display()))?;
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
    fn read_streamed(
        &self,
        settings: &StoreSettings,
    ) -> Result<(u64, Data, Option<persist::OldSection>), String> {
        let snap_dir = self.snapshot_dir();
        let listed = list_snapshots(&*self.storage, &snap_dir)
            .map_err(|e| format!("reading snapshots in {}: {e}", snap_dir.display()))?;
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
                Err(e) => return Err(format!("snapshot {}: {e}", path.display())),
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
    fn rebuild(
        &self,
        settings: &StoreSettings,
        seq: u64,
        phase: &PhaseGauge,
    ) -> Result<(Data, Option<persist::OldSection>), String> {
        phase.set(SnapshotPhase::Read);
        let (from, mut data, old) = self.read_streamed(settings)?;
        if from > seq {
            return Err(format!("the newest snapshot ({from}) is past seq {seq}"));
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
                return Err(format!("log record {at} where {next} was expected"));
            }
            data.apply(&persist::decode_record(version, payload)?);
            next += 1;
            Ok(())
        };
        read_records(&*self.storage, &self.wal_dir(), from, each)
            .map_err(|e| format!("reading the log in {}: {e}", self.wal_dir().display()))?;
        if next != seq + 1 {
            return Err(format!("the log ends at record {} before {seq}", next - 1));
        }
        Ok((data, old))
    }
}

/// Sets the phase back to idle however a snapshot ends.
struct PhaseReset<'a>(&'a PhaseGauge);

impl Drop for PhaseReset<'_> {
    fn drop(&mut self) {
        self.0.set(SnapshotPhase::Idle);
    }
}

/// Replays log records into `data` with two threads: `read` reads,
/// checks and decodes them on this thread and hands each to `push`; another
/// applies them, in order, a batch at a time. A restart spends its time
/// here, and the two halves overlap on two cores.
fn pipelined<R>(data: &mut Data, read: impl FnOnce(&mut dyn FnMut(LogRecord)) -> R) -> R {
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

/// A snapshot of ranked pages that a cursor continues, and when it was
/// last used.
struct CursorSnap {
    snap: Snapshot<RankKey>,
    touched: Timestamp,
}

/// How long an unused cursor stays valid, and how many are kept.
const CURSOR_TTL_SECS: i64 = 600;
const CURSOR_MAX: usize = 4096;

struct Inner {
    data: Data,
    rankings: Rankings,
    /// Live articles by publication time, newest first, all and per
    /// filter value (`GET /api/new`).
    newest: newest::Newest,
    /// Articles `GET /api/new` pages looked at, for tests of its cost
    /// ([`EmbeddedStore::new_visited`]).
    new_visited: u64,
    cursors: HashMap<u64, CursorSnap>,
    cursor_order: VecDeque<u64>,
    cursor_salt: u64,
    next_cursor: u64,
    /// The newest event time counted or tallied: queries never run before
    /// it ([`crate::rank::query_time`]).
    newest_event: Timestamp,
    /// The arrival clock of the gate's rate limits, behaviour rule and
    /// eventIds: the wall clock made to never run backward.
    gate_clock: GateClock,
}

impl Inner {
    fn new(data: Data, settings: &StoreSettings) -> Self {
        let max_bytes = settings.ranking_max_bytes;
        let mut inner = Inner {
            data,
            rankings: Rankings::new(settings.max_rankings, max_bytes),
            newest: newest::Newest::default(),
            new_visited: 0,
            cursors: HashMap::new(),
            cursor_order: VecDeque::new(),
            cursor_salt: rand::random(),
            next_cursor: 1,
            newest_event: 0,
            gate_clock: GateClock::default(),
        };
        inner.gate_clock = GateClock::after(inner.data.newest_arrival_ms());
        // After a restart: the start of the newest hour holding anything.
        inner.newest_event = (inner.data.articles.iter())
            .filter_map(|a| a.buckets.last())
            .map(|b| b.hour() * 3600)
            .max()
            .unwrap_or(0);
        inner.newest = newest::Newest::build(&inner.data.articles);
        inner
    }

    fn on_change(&mut self, change: Change) {
        self.rankings.on_change(change, &self.data);
        match change {
            Change::Counted(idx) | Change::Meta(idx) => {
                self.newest.track(idx, self.data.article(idx));
            }
            Change::None => {}
        }
    }

    fn ranking_sizes(&self) -> RankingSizes {
        let (rankings, entries) = self.rankings.sizes();
        let window_cache_bytes = self.data.window_cache_bytes();
        RankingSizes {
            rankings,
            entries,
            window_cache_bytes,
            bytes: self.rankings.bytes() + window_cache_bytes,
        }
    }

    /// After `keep` was used: evicts the least recently used rankings
    /// while they and the window caches hold more than `rankings.max_bytes`
    /// ([`Rankings::fit`]), and publishes what they hold.
    fn fit(&mut self, keep: &RankKey) {
        let held = self.rankings.fit(keep, self.data.window_cache_bytes());
        metrics::gauge!("hotrank_ranking_bytes").set(held as f64);
    }

    fn remember_cursor(&mut self, snap: Snapshot<RankKey>, now: Timestamp) -> u64 {
        while self.cursor_order.len() >= CURSOR_MAX {
            if let Some(old) = self.cursor_order.pop_front() {
                self.cursors.remove(&old);
            }
        }
        let id = self.next_cursor ^ self.cursor_salt;
        self.next_cursor += 1;
        self.cursors.insert(id, CursorSnap { snap, touched: now });
        self.cursor_order.push_back(id);
        id
    }

    fn expire_cursors(&mut self, now: Timestamp) {
        self.cursors
            .retain(|_, c| now - c.touched < CURSOR_TTL_SECS);
        let live = &self.cursors;
        self.cursor_order.retain(|id| live.contains_key(id));
    }

    /// The ranked items of a page, with metadata as it is now.
    fn page_items(
        &self,
        items: &[SnapItem],
        first_rank: usize,
        model: ModelKind,
        models: &Models,
        explain: bool,
    ) -> Vec<RankedItem> {
        items
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let meta = self
                    .data
                    .lookup(&s.id)
                    .map(|idx| self.data.article(idx).meta.get().into_owned())
                    .unwrap_or_default();
                RankedItem {
                    rank: first_rank + i,
                    id: s.id.clone(),
                    score: s.score,
                    counters: s.counters,
                    explain: explain.then(|| models.explain(model, &s.counters, &meta, s.at)),
                    meta,
                }
            })
            .collect()
    }
}

/// What the live rankings hold (the accounting behind the metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankingSizes {
    pub rankings: usize,
    /// Index entries over all rankings (about 100 bytes each).
    pub entries: usize,
    pub window_cache_bytes: usize,
    /// What the rankings and window caches hold together, estimated (kept
    /// within `rankings.max_bytes`, the `hotrank_ranking_bytes` gauge).
    pub bytes: usize,
}

pub struct EmbeddedStore {
    inner: Arc<Mutex<Inner>>,
    /// While the default ranking is built after open ([`Self::warm_in_background`]).
    warming: Arc<std::sync::atomic::AtomicBool>,
    build_hook: Arc<Mutex<Option<BuildHook>>>,
    /// Shared with the snapshot's blocking task, which trims it.
    wal: Option<Arc<Wal>>,
    durability: Option<Durability>,
    /// The data directory's lock, held for the store's lifetime.
    _lock: Option<DirLock>,
    settings: StoreSettings,
    last_snapshot: Mutex<Instant>,
    /// Seq of the newest snapshot on disk. The log is trimmed only up to
    /// the oldest snapshot kept, so that if the newest turns out unreadable
    /// the older one plus the log still rebuild everything.
    snapshot_seq: Mutex<Option<u64>>,
    /// When retention last ran (store time).
    last_sweep: Mutex<Timestamp>,
    /// Serialises snapshots (maintenance and shutdown may race).
    snapshot_lock: tokio::sync::Mutex<()>,
    /// Snapshots that could not be rebuilt off the lock (see
    /// [`EmbeddedStore::snapshot`]).
    snapshot_fallbacks: std::sync::atomic::AtomicU64,
    snapshot_phase: PhaseGauge,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

/// What `hotrank repair` kept, skipped and did.
#[derive(Debug, Clone)]
pub struct RepairReport {
    /// The snapshot the repair started from.
    pub snapshot_seq: Option<u64>,
    /// Records kept, damaged spans skipped, seqs missing.
    pub log: SalvageReport,
    /// The snapshot written (`None`: the log was not damaged; nothing changed).
    pub new_snapshot_seq: Option<u64>,
    /// Where the old segments were moved.
    pub moved_to: Option<PathBuf>,
}

/// Opening a data directory: how much was recovered.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    pub snapshot_seq: Option<u64>,
    pub replayed_records: u64,
    /// Highest seq in snapshot and log: the last record recovered.
    pub last_seq: u64,
    pub truncated_bytes: u64,
    pub articles: usize,
    pub elapsed_ms: u128,
}

impl EmbeddedStore {
    /// A store that keeps nothing on disk (simulations, replays, benches).
    pub fn in_memory(settings: StoreSettings) -> Self {
        let data = Data::new(&settings);
        Self::assemble(data, None, None, None, settings)
    }

    /// Opens (or creates) a data directory: takes its lock, reads the newest
    /// valid snapshot, then every log record after it. Refuses (naming the
    /// file and byte offset) a log that is damaged anywhere but in a torn
    /// tail; see [`EmbeddedStore::repair`].
    pub fn open(d: Durability, settings: StoreSettings) -> Result<(Self, RecoveryReport), String> {
        let started = Instant::now();
        let lock = d.lock()?;
        let (seq, mut data) = d.load_snapshot(&settings, true)?;
        let cfg = WalConfig {
            dir: d.wal_dir(),
            fsync: d.fsync,
            segment_bytes: d.segment_bytes,
            payload_version: persist::STATE_VERSION,
            storage: Arc::clone(&d.storage),
        };
        let (wal, stats) = pipelined(&mut data, |push| {
            Wal::open(cfg, seq.unwrap_or(0), |_, version, payload| {
                push(persist::decode_record(version, payload)?);
                Ok(())
            })
        })
        .map_err(|e| match e {
            WalError::Corrupt { .. } => format!(
                "the log in {} is damaged: {e}. To start anyway, run `hotrank repair --data-dir {}` (it keeps every intact record and reports what it skips)",
                d.wal_dir().display(),
                d.dir.display()
            ),
            e => format!("opening the log in {}: {e}", d.wal_dir().display()),
        })?;
        let mut report = RecoveryReport {
            snapshot_seq: seq,
            replayed_records: stats.records,
            last_seq: wal.last_appended_seq(),
            truncated_bytes: stats.truncated_bytes,
            articles: data.articles.len(),
            elapsed_ms: 0,
        };
        let store = Self::assemble(data, Some(wal), Some(d), Some(lock), settings);
        *store.snapshot_seq.lock() = seq;
        report.elapsed_ms = started.elapsed().as_millis();
        Ok((store, report))
    }

    /// Builds the ranking of the default `/api/hot` query (gravity over
    /// 72 h, no filter) at `now` and walks its first page once, so that the
    /// first query after a restart finds it built and its top bounds tight.
    /// Returns the articles indexed. Blocks; see
    /// [`Self::warm_in_background`].
    pub fn warm(&self, now: Timestamp) -> usize {
        warm_default(&self.inner, &self.settings, self.hook(), now)
    }

    /// [`Self::warm`] on a thread of its own: the server calls this after
    /// opening the store and listens at once; [`Store::warming`] (and so
    /// `/readyz`, 503) says so until the ranking is built (at once on an
    /// empty store). The thread then stays as the rankings' upkeep
    /// ([`Rankings::upkeep`], every [`UPKEEP_EVERY`]) until the store is
    /// dropped.
    pub fn warm_in_background(&self, now: Timestamp) {
        use std::sync::atomic::Ordering;
        let empty = self.inner.lock().data.articles.is_empty();
        if empty {
            // Nothing to score: built before the server listens.
            self.warm(now);
        } else {
            self.warming.store(true, Ordering::SeqCst);
        }
        let (inner, settings, hook) = (self.inner.clone(), self.settings.clone(), self.hook());
        let warming = self.warming.clone();
        let spawned = std::thread::Builder::new()
            .name("hotrank-rankings".into())
            .spawn(move || {
                if !empty {
                    let started = Instant::now();
                    let indexed = warm_default(&inner, &settings, hook, now);
                    warming.store(false, Ordering::SeqCst);
                    tracing::info!(
                        indexed,
                        ms = started.elapsed().as_millis() as u64,
                        "default ranking built: ready"
                    );
                }
                let weak = Arc::downgrade(&inner);
                drop(inner);
                upkeep_rankings(&weak, &settings.models, settings.build_chunk);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the rankings thread; the first query builds the default ranking");
            self.warming.store(false, Ordering::SeqCst);
        }
    }

    /// One pass of the rankings' background upkeep ([`Rankings::upkeep`]),
    /// as the thread [`Self::warm_in_background`] starts runs it: returns
    /// the articles re-scored. For tests.
    #[doc(hidden)]
    pub fn upkeep_rankings(&self) -> usize {
        upkeep_pass(
            &self.inner,
            &self.settings.models,
            self.settings.build_chunk,
        )
    }

    /// Sets (or clears) the hook ranking builds call between their holds
    /// of the state lock. For tests.
    #[doc(hidden)]
    pub fn set_build_hook(&self, hook: Option<BuildHook>) {
        *self.build_hook.lock() = hook;
    }

    fn hook(&self) -> Option<BuildHook> {
        self.build_hook.lock().clone()
    }

    /// Waits until the ranking `key` is built, starting its build on a
    /// thread of its own if nobody has: then returns the state lock,
    /// held, with the ranking built.
    async fn built(&self, key: &RankKey, now: Timestamp) -> parking_lot::MutexGuard<'_, Inner> {
        loop {
            let signal = {
                let mut guard = self.inner.lock();
                match guard.rankings.join(key, now) {
                    Join::Built => return guard,
                    Join::Wait(signal) => signal,
                    Join::Start(signal) => {
                        let b = Build::new(key.clone(), signal.clone(), now);
                        drop(guard);
                        self.spawn_build(b);
                        signal
                    }
                }
            };
            signal.wait().await;
        }
    }

    fn spawn_build(&self, b: Build) {
        let (key, signal) = (b.key().clone(), b.signal().clone());
        let (inner, models, hook) = (
            self.inner.clone(),
            self.settings.models.clone(),
            self.hook(),
        );
        let chunk = self.settings.build_chunk;
        let spawned = std::thread::Builder::new()
            .name("hotrank-rank-build".into())
            .spawn(move || run_build(&inner, &models, chunk, hook, b));
        if let Err(e) = spawned {
            // The build went with the closure: give the ranking up, so its
            // waiters wake and the next query tries again.
            tracing::error!(error = %e, "cannot start a ranking build thread");
            let b = Build::new(key, signal.clone(), 0);
            self.inner.lock().rankings.abandon(&b);
            signal.finish();
        }
    }

    /// `hotrank repair`: rebuilds a data directory whose log is damaged.
    /// Reads the newest valid snapshot and every intact log record after it
    /// (skipping damaged bytes up to the next intact record), writes the
    /// result as a new snapshot, and moves the old segments aside into
    /// `wal-damaged-<unix time>/` (nothing is deleted). A log that is not
    /// damaged is left alone. Takes the directory's lock: stop the server
    /// first.
    pub fn repair(d: &Durability, settings: &StoreSettings) -> Result<RepairReport, String> {
        let _lock = d.lock()?;
        let (seq, mut data) = d.load_snapshot(settings, true)?;
        let wal_dir = d.wal_dir();
        d.storage
            .create_dir_all(&wal_dir)
            .map_err(|e| format!("cannot create {}: {e}", wal_dir.display()))?;
        let after = seq.unwrap_or(0);
        let log = salvage(&*d.storage, &wal_dir, after, |_, version, payload| {
            data.apply(&persist::decode_record(version, payload)?);
            Ok(())
        })
        .map_err(|e| format!("reading the log in {}: {e}", wal_dir.display()))?;
        let mut report = RepairReport {
            snapshot_seq: seq,
            log,
            new_snapshot_seq: None,
            moved_to: None,
        };
        if report.log.skipped.is_empty() && report.log.missing.is_empty() {
            return Ok(report);
        }
        let last = report.log.last_seq;
        let bytes = persist::encode_state(&data)?;
        let snap_dir = d.snapshot_dir();
        write_snapshot(
            &*d.storage,
            &snap_dir,
            last,
            persist::STATE_VERSION,
            &bytes,
            SNAPSHOTS_KEPT,
        )
        .map_err(|e| format!("writing the snapshot in {}: {e}", snap_dir.display()))?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| t.as_secs());
        let aside = d.dir.join(format!("wal-damaged-{stamp}"));
        let io = |e: std::io::Error| format!("moving the damaged log to {}: {e}", aside.display());
        d.storage.create_dir_all(&aside).map_err(io)?;
        for name in d.storage.list(&wal_dir).map_err(io)? {
            d.storage
                .rename(&wal_dir.join(&name), &aside.join(&name))
                .map_err(io)?;
        }
        d.storage.sync_dir(&aside).map_err(io)?;
        d.storage.sync_dir(&wal_dir).map_err(io)?;
        report.new_snapshot_seq = Some(last);
        report.moved_to = Some(aside);
        Ok(report)
    }

    fn assemble(
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

    /// Applies a record read back from a log (see
    /// [`crate::store::wal::read_records`]) the way recovery does: an
    /// event's logged verdict is applied, not judged again. For offline
    /// tools (`hotrank replay`); refused on a store with a data directory,
    /// whose log would no longer match its state.
    pub fn apply_logged(&self, rec: &LogRecord) -> Result<(), StoreError> {
        if self.wal.is_some() {
            return Err(StoreError::Internal(
                "apply_logged is for in-memory stores only".into(),
            ));
        }
        let mut inner = self.inner.lock();
        if let LogRecord::Event { ev, .. } = rec {
            inner.newest_event = inner.newest_event.max(ev.ts);
        }
        let change = inner.data.apply(rec);
        inner.on_change(change);
        Ok(())
    }

    /// All state as dump records (`hotrank export`).
    pub fn export(&self) -> Vec<crate::store::dump::Record> {
        self.inner.lock().data.export()
    }

    /// Writes dump records as the first snapshot of an empty data
    /// directory (`hotrank import`); open the store afterwards.
    pub fn import_into(
        d: &Durability,
        settings: &StoreSettings,
        records: &[crate::store::dump::Record],
    ) -> Result<u64, String> {
        let _lock = d.lock()?;
        let snap_dir = d.snapshot_dir();
        let wal_dir = d.wal_dir();
        for dir in [&snap_dir, &wal_dir] {
            if d.storage.list(dir).is_ok_and(|names| !names.is_empty()) {
                return Err(format!(
                    "{} is not empty: import only into a new data directory",
                    dir.display()
                ));
            }
        }
        let data = Data::import(records, settings)?;
        let n = data.articles.len() as u64;
        let bytes = persist::encode_state(&data)?;
        write_snapshot(
            &*d.storage,
            &snap_dir,
            0,
            persist::STATE_VERSION,
            &bytes,
            SNAPSHOTS_KEPT,
        )
        .map_err(|e| format!("writing the snapshot in {}: {e}", snap_dir.display()))?;
        Ok(n)
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

    pub fn data_dir(&self) -> Option<&Path> {
        self.durability.as_ref().map(|d| d.dir.as_path())
    }

    /// Refuses a write while the log cannot take records (it is stalled
    /// or closed); called under the state lock before anything of a request
    /// is applied, so a refused request changes nothing.
    fn writable(&self) -> Result<(), StoreError> {
        match &self.wal {
            Some(wal) => wal
                .writable()
                .map_err(|e| StoreError::Unavailable(format!("write-ahead log: {e}"))),
            None => Ok(()),
        }
    }

    /// Hands a record to the log, then applies it (under the state lock,
    /// after [`Self::writable`]).
    fn log_and_apply(&self, inner: &mut Inner, rec: &LogRecord, buf: &mut Vec<u8>) -> Option<u64> {
        let seq = self.log(rec, buf);
        let change = inner.data.apply(rec);
        inner.on_change(change);
        seq
    }

    /// Hands a record to the log (under the state lock, after
    /// [`Self::writable`]); the caller applies it.
    fn log(&self, rec: &LogRecord, buf: &mut Vec<u8>) -> Option<u64> {
        self.wal.as_ref().map(|wal| {
            buf.clear();
            let bytes =
                postcard::to_extend(rec, std::mem::take(buf)).expect("records always encode");
            let seq = wal.append(&bytes);
            *buf = bytes;
            seq
        })
    }

    async fn durable(&self, seq: Option<u64>) -> Result<(), StoreError> {
        if let (Some(wal), Some(seq)) = (&self.wal, seq) {
            wal.wait_durable(seq)
                .await
                .map_err(|e| StoreError::Unavailable(format!("write-ahead log: {e}")))?;
        }
        Ok(())
    }

    /// Records appended since the newest snapshot.
    fn records_since_snapshot(&self) -> u64 {
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
            let horizon = swept.then(|| state::retention::dedupe_horizon(last_sweep, &settings));
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
            Err::<_, String>(e) => {
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
            let bytes = persist::encode_state(&inner.data).map_err(StoreError::Internal)?;
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

    /// Runs `step` under the state lock, one hold of about
    /// [`ranking::BUILD_HOLD`] at a time (the deadline it is given), the
    /// lock handed over fairly and the task yielding between holds, until
    /// it returns `true`.
    async fn in_holds(&self, what: &'static str, mut step: impl FnMut(&mut Data, Instant) -> bool) {
        loop {
            let done = {
                let mut inner = self.inner.lock();
                let held = Instant::now();
                let done = step(&mut inner.data, held + ranking::BUILD_HOLD);
                parking_lot::MutexGuard::unlock_fair(inner);
                record_hold(what, held);
                done
            };
            if done {
                break;
            }
            tokio::task::yield_now().await;
        }
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

    /// The page of a `/api/hot` query over a built ranking, under the
    /// state lock.
    fn hot_page(
        &self,
        inner: &mut Inner,
        q: &HotQuery,
        key: &RankKey,
        now: Timestamp,
    ) -> Result<HotPage, StoreError> {
        let models = &self.settings.models;
        let cap = self.settings.ranking_cap;
        let (snap_id, offset) = match &q.cursor {
            None => {
                let walk = pages::first_walk(q, cap);
                let (items, at) =
                    inner
                        .rankings
                        .top(key, walk, &mut inner.data, models, now, inner.newest_event);
                match pages::first(key.clone(), q, cap, items, at) {
                    First::Page(items) => {
                        return Ok(HotPage {
                            items: inner.page_items(
                                &items,
                                q.offset + 1,
                                q.model,
                                models,
                                q.explain,
                            ),
                            generated_at: at,
                            cursor: None,
                        });
                    }
                    First::Snapshot(snap) => (inner.remember_cursor(snap, now), q.offset),
                }
            }
            Some(c) => {
                let (id, off) = cursor::parse_snapshot(c, cap)?;
                let snap = inner.cursors.get(&id).ok_or_else(|| {
                    StoreError::InvalidCursor("cursor expired; start from the first page".into())
                })?;
                if !snap.snap.fits(key, q.per_author) {
                    return Err(StoreError::InvalidCursor(
                        "cursor belongs to a query with other parameters".into(),
                    ));
                }
                (id, off)
            }
        };
        let mut c = inner.cursors.remove(&snap_id).expect("just checked");
        c.touched = now;
        if let Some((walk, need)) = c.snap.extension(offset, q.limit, cap) {
            let (fresh, _) =
                inner
                    .rankings
                    .top(key, walk, &mut inner.data, models, now, inner.newest_event);
            c.snap.extend(fresh, need, cap);
        }
        let (items, more) = c.snap.page(offset, q.limit, cap);
        let page = HotPage {
            items: inner.page_items(items, offset + 1, q.model, models, q.explain),
            generated_at: c.snap.generated_at,
            cursor: more.then(|| cursor::snapshot(snap_id, offset + q.limit)),
        };
        inner.cursors.insert(snap_id, c);
        Ok(page)
    }

    /// Before a query walks the built ranking `key`: the lock back if few
    /// of its articles changed, or `None` after one hold of re-scoring them
    /// ([`Rankings::catch_up_query`], the lock released: ask again).
    fn caught_up<'a>(
        &self,
        mut guard: parking_lot::MutexGuard<'a, Inner>,
        key: &RankKey,
        now: Timestamp,
    ) -> Option<parking_lot::MutexGuard<'a, Inner>> {
        let held = Instant::now();
        let i = &mut *guard;
        let (models, chunk) = (&self.settings.models, self.settings.build_chunk);
        let step =
            (i.rankings).catch_up_query(key, &mut i.data, models, now, i.newest_event, chunk);
        if step != Step::More {
            return Some(guard);
        }
        parking_lot::MutexGuard::unlock_fair(guard);
        record_hold("query_catch_up", held);
        None
    }

    fn rank_key(q: &HotQuery) -> RankKey {
        RankKey {
            model: q.model,
            // Vote models rank every live article: one ranking whatever the range.
            range: if q.model.lists_every_live_article() {
                RangeSpec::All
            } else {
                q.range
            },
            filter: Filter::of(q),
        }
    }
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn ingest(
        &self,
        events: Vec<Event>,
        _now: Timestamp,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError> {
        let n = events.len();
        let with_counts = n == 1;
        let mut out = Vec::with_capacity(n);
        let mut last = None;
        let mut buf = Vec::with_capacity(128);
        let (mut refused, mut behaviour) = (0u64, [0u64; 2]);
        {
            let asked = Instant::now();
            let mut inner = self.inner.lock();
            metrics::histogram!("hotrank_ingest_lock_wait_seconds")
                .record(asked.elapsed().as_secs_f64());
            self.writable()?;
            for (i, mut ev) in events.into_iter().enumerate() {
                if i > 0 && i % INGEST_HOLD_EVENTS == 0 {
                    // Lets a query or another writer waiting for the lock
                    // in between (a batch of 1,000 would hold it ~2 ms);
                    // the log may have failed meanwhile.
                    parking_lot::MutexGuard::bump(&mut inner);
                    self.writable()?;
                }
                ev.clamp_to_arrival();
                // From here on (gate, log, replay) arrival is on the gate's
                // clock: a wall clock stepped back does not move it back.
                ev.arrival_ms = inner.gate_clock.at(ev.arrival_ms);
                inner.newest_event = inner.newest_event.max(ev.ts);
                // The article is looked up once per event: the gate, the
                // log and the counters all use this answer.
                let found = match inner.data.accepts(&ev, &self.settings) {
                    Ok(found) => found,
                    Err(reject) => {
                        refused += u64::from(reject == IngestReject::TooManyArticles);
                        out.push(Err(reject));
                        continue;
                    }
                };
                let verdict = inner.data.judge(&ev, found, &self.settings);
                if verdict == Verdict::Bot && !ev.bot {
                    behaviour[0] += 1;
                    behaviour[1] += u64::from(
                        inner.data.behaviour_bot(&ev, found, &self.settings) == Some(true),
                    );
                }
                let rec = LogRecord::Event { ev, verdict };
                last = self.log(&rec, &mut buf).or(last);
                let LogRecord::Event { ev, .. } = &rec else {
                    unreachable!()
                };
                let change = inner.data.apply_event(ev, verdict, found);
                inner.on_change(change);
                let article = match change {
                    Change::Counted(idx) => Some(idx),
                    _ => found,
                };
                let (pv, uv) = match article {
                    Some(idx) if with_counts => {
                        let a = inner.data.article_mut(idx);
                        (a.lifetime.get().pv, a.lifetime_uv.count())
                    }
                    _ => (0, 0),
                };
                out.push(Ok(Outcome { verdict, pv, uv }));
            }
        }
        crate::store::gate_metrics::record(refused, behaviour[0], behaviour[1]);
        self.durable(last).await?;
        Ok(out)
    }

    async fn put_article(
        &self,
        id: ArticleId,
        meta: ArticleMeta,
        _now: Timestamp,
    ) -> Result<PutOutcome, StoreError> {
        let (seq, created) = {
            let mut inner = self.inner.lock();
            self.writable()?;
            let created = inner.data.lookup(&id).is_none_or(|i| {
                let a = inner.data.article(i);
                a.deleted || !a.known
            });
            let rec = LogRecord::Put { id, meta };
            (
                self.log_and_apply(&mut inner, &rec, &mut Vec::new()),
                created,
            )
        };
        self.durable(seq).await?;
        Ok(if created {
            PutOutcome::Created
        } else {
            PutOutcome::Updated
        })
    }

    async fn article(
        &self,
        id: &ArticleId,
        now: Timestamp,
    ) -> Result<Option<ArticleView>, StoreError> {
        let mut inner = self.inner.lock();
        let Some(idx) = inner.data.lookup(id) else {
            return Ok(None);
        };
        let models = &self.settings.models;
        if inner.data.article(idx).deleted {
            return Ok(None);
        }
        let scores = ModelKind::ALL
            .into_iter()
            .map(|m| {
                let c = inner.data.window(idx, m.default_range(), now);
                let meta = inner.data.article(idx).meta.get().into_owned();
                (m, models.score(m, &c, &meta, now))
            })
            .collect();
        let a = inner.data.article_mut(idx);
        let mut lifetime = a.lifetime.get();
        lifetime.uv = a.lifetime_uv.count();
        Ok(Some(ArticleView {
            id: a.id.clone(),
            meta: a.meta.get().into_owned(),
            lifetime,
            quarantined: a.quarantine.value(),
            deleted: a.deleted,
            scores,
        }))
    }

    async fn delete_article(&self, id: &ArticleId, _now: Timestamp) -> Result<bool, StoreError> {
        let seq = {
            let mut inner = self.inner.lock();
            self.writable()?;
            match inner.data.lookup(id) {
                Some(idx) if !inner.data.article(idx).deleted => {}
                _ => return Ok(false),
            }
            let rec = LogRecord::Delete { id: id.clone() };
            self.log_and_apply(&mut inner, &rec, &mut Vec::new())
        };
        self.durable(seq).await?;
        Ok(true)
    }

    async fn hot(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        let key = Self::rank_key(q);
        // A ranking asked for the first time is built off the lock (one
        // build however many queries wait for it); then this hold of the
        // lock walks it.
        // Many changed articles (a bulk load nobody queried meanwhile) are
        // re-scored in short holds first, never in the walk's one hold.
        let mut guard = loop {
            if let Some(guard) = self.caught_up(self.built(&key, now).await, &key, now) {
                break guard;
            }
            tokio::task::yield_now().await;
        };
        let page = self.hot_page(&mut guard, q, &key, now);
        guard.fit(&key);
        // Rankings evicted meanwhile are freed with the lock released.
        let evicted = guard.rankings.take_evicted();
        drop(guard);
        drop(evicted);
        page
    }

    async fn newest(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        let models = &self.settings.models;
        let key = Self::rank_key(q);
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let start: Option<(std::cmp::Reverse<Timestamp>, ArticleId)> = match &q.cursor {
            None => None,
            Some(c) => {
                let (p, id) = cursor::parse_newest(c)?;
                Some((std::cmp::Reverse(p), id))
            }
        };
        let skip = if start.is_some() { 0 } else { q.offset };
        let mut picked: Vec<Idx> = Vec::new();
        let mut picker = Picker::new(q.per_author, skip, q.limit);
        // Only articles with one of the filter's values: a rare filter
        // costs no more than a common one.
        let index = inner.newest.candidates(&key.filter);
        let iter: Box<dyn Iterator<Item = &newest::Key>> = match &start {
            Some(s) => Box::new(index.range((
                std::ops::Bound::Excluded(s.clone()),
                std::ops::Bound::Unbounded,
            ))),
            None => Box::new(index.iter()),
        };
        let mut more = false;
        for (_, id) in iter {
            inner.new_visited += 1;
            let idx = inner.data.lookup(id).expect("indexed");
            let a = inner.data.article(idx);
            if !key.filter.matches(&a.meta.get()) {
                continue;
            }
            match picker.offer(a.meta.author()) {
                Pick::Skip => {}
                Pick::Take => picked.push(idx),
                Pick::Full => {
                    more = true;
                    break;
                }
            }
        }
        let items: Vec<RankedItem> = picked
            .iter()
            .enumerate()
            .map(|(i, &idx)| {
                let counters = inner.data.window(idx, q.range, now);
                let a = inner.data.article(idx);
                let meta = a.meta.get().into_owned();
                let score = models.score(q.model, &counters, &meta, now);
                RankedItem {
                    rank: skip + i + 1,
                    id: a.id.clone(),
                    score,
                    counters,
                    explain: q
                        .explain
                        .then(|| models.explain(q.model, &counters, &meta, now)),
                    meta,
                }
            })
            .collect();
        let cursor = match (more, items.last()) {
            (true, Some(last)) => Some(cursor::newest(last.meta.published_at, &last.id)),
            _ => None,
        };
        Ok(HotPage {
            items,
            generated_at: now,
            cursor,
        })
    }

    async fn stats(&self, now: Timestamp, hours: u32) -> Result<Stats, StoreError> {
        let inner = self.inner.lock();
        let d = &inner.data;
        let first = *crate::time::last_hours(hour_of(now), hours).start();
        Ok(Stats {
            articles: d.live_articles() as u64,
            counted: d.counted,
            quarantined: d.quarantine,
            quarantine_by_hour: d
                .quarantine_by_hour
                .range(first..)
                .map(|(h, q)| (*h, *q))
                .collect(),
        })
    }

    async fn hourly(
        &self,
        id: &ArticleId,
        now: Timestamp,
        hours: u32,
    ) -> Result<Option<Vec<HourlyRow>>, StoreError> {
        let inner = self.inner.lock();
        let Some(idx) = inner.data.lookup(id) else {
            return Ok(None);
        };
        let a = inner.data.article(idx);
        if a.deleted {
            return Ok(None);
        }
        let last = hour_of(now);
        Ok(Some(a.hourly(
            *crate::time::last_hours(last, hours).start(),
            last,
        )))
    }

    async fn post_article(
        &self,
        mut meta: ArticleMeta,
        poster: Voter<'_>,
        now: Timestamp,
    ) -> Result<ArticleId, StoreError> {
        let poster = poster.hash;
        meta.published_at = now;
        let (seq, id) = {
            let mut inner = self.inner.lock();
            self.writable()?;
            let id = inner.data.next_post_id();
            let rec = LogRecord::PostVoted {
                id: id.clone(),
                meta,
                poster,
            };
            (self.log_and_apply(&mut inner, &rec, &mut Vec::new()), id)
        };
        self.durable(seq).await?;
        Ok(id)
    }

    async fn vote(
        &self,
        id: &ArticleId,
        user: Voter<'_>,
        direction: VoteDirection,
        now: Timestamp,
    ) -> Result<VoteOutcome, StoreError> {
        let user = user.hash;
        let (seq, outcome) = {
            let mut inner = self.inner.lock();
            self.writable()?;
            match inner
                .data
                .judge_vote(id, user, direction, now, &self.settings)
            {
                Err(refused) => return Ok(refused),
                Ok(idx) => {
                    let rec = LogRecord::Vote {
                        id: id.clone(),
                        user,
                        direction,
                    };
                    let seq = self.log_and_apply(&mut inner, &rec, &mut Vec::new());
                    let a = inner.data.article(idx);
                    let c = a.lifetime.get();
                    let score = self.settings.models.votes.score(&c, a.meta.published_at());
                    (
                        seq,
                        VoteOutcome::Counted {
                            ups: c.ups,
                            downs: c.downs,
                            score,
                        },
                    )
                }
            }
        };
        self.durable(seq).await?;
        Ok(outcome)
    }

    async fn ready(&self) -> Result<(), StoreError> {
        self.writable()
    }

    fn warming(&self) -> Option<String> {
        (self.warming.load(std::sync::atomic::Ordering::SeqCst))
            .then(|| "warming up: building the default ranking".to_string())
    }

    async fn maintain(&self, now: Timestamp) -> Result<(), StoreError> {
        let started = Instant::now();
        // Retention walks every article: once a minute is plenty.
        let sweep = {
            let mut last = self.last_sweep.lock();
            let due = now - *last >= 60 || now < *last;
            if due {
                *last = now;
            }
            due
        };
        if sweep {
            // Retention walks every article and every dedupe shard: a chunk
            // per short hold of the state lock, so ingest never waits for
            // the whole walk.
            let s = &self.settings;
            {
                // Window caches over a range no live ranking has are dropped.
                let mut inner = self.inner.lock();
                let hours = inner.rankings.hours();
                inner.data.keep_window_ranges(hours);
            }
            let mut walk = state::retention::Sweep::default();
            self.in_holds("retention", |data, until| {
                data.expire_articles(now, s, &mut walk, s.build_chunk, Some(until))
            })
            .await;
            let mut shard = 0;
            self.in_holds("dedupe_retention", |data, until| {
                data.expire_sharded(now, s, &mut shard, Some(until))
            })
            .await;
            let mut inner = self.inner.lock();
            inner.data.expire_gate(now, &self.settings);
            inner.rankings.evict_idle(now - 3600);
            inner.fit(&Self::rank_key(&HotQuery::default_page()));
            inner.expire_cursors(now);
            let (rankings, entries) = inner.rankings.sizes();
            let (dedupe, event_ids, limiter_keys) = inner.data.gate_sizes();
            let evicted = inner.rankings.take_evicted();
            drop(inner);
            drop(evicted);
            metrics::gauge!("hotrank_articles").set(walk.live as f64);
            metrics::gauge!("hotrank_rankings").set(rankings as f64);
            metrics::gauge!("hotrank_ranking_entries").set(entries as f64);
            metrics::gauge!("hotrank_window_cache_bytes").set(walk.window_cache_bytes as f64);
            metrics::gauge!("hotrank_dedupe_entries").set(dedupe as f64);
            metrics::gauge!("hotrank_event_ids").set(event_ids as f64);
            metrics::gauge!("hotrank_rate_limit_keys").set(limiter_keys as f64);
        }
        metrics::histogram!("hotrank_maintenance_seconds").record(started.elapsed().as_secs_f64());
        if let (Some(wal), Some(d)) = (&self.wal, &self.durability) {
            wal.publish_metrics();
            metrics::gauge!("hotrank_wal_bytes").set(wal.size_bytes() as f64);
            let records = self.records_since_snapshot();
            let age = self.last_snapshot.lock().elapsed().as_secs();
            if records >= d.snapshot_every_records
                || (records > 0 && age >= d.snapshot_interval_secs)
            {
                self.snapshot().await?;
            }
        }
        Ok(())
    }

    async fn shutdown(&self) -> Result<(), StoreError> {
        if let Some(wal) = &self.wal {
            if self.records_since_snapshot() > 0 {
                self.snapshot_in_place().await?;
            }
            wal.close()
                .map_err(|e| StoreError::Unavailable(format!("closing the log: {e}")))?;
        }
        Ok(())
    }
}
