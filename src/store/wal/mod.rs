//! Write-ahead log of the embedded store: checksummed records, group commit,
//! fsync policies, segment rotation, recovery, and a writer that survives a
//! full disk.
//!
//! - [`format`]: the bytes on disk (segment header, records, file names);
//! - [`reader`]: the one loop over segments, used by recovery, read-only
//!   reading ([`read_records`]) and [`salvage`];
//! - [`recovery`]: what [`Wal::open`] does with what the loop found;
//! - [`writer`]: the writer (group commit, fsync, rotation, retry), run by
//!   its thread or, for a small write, by the waiter itself;
//! - [`syncer`]: the background sync thread of [`FsyncPolicy::Interval`].
//!
//! All file I/O goes through a [`Storage`] ([`WalConfig::storage`]).
//!
//! # How it is used
//!
//! The store checks [`Wal::writable`] and then, under its own lock, calls
//! [`Wal::append`] once per record and applies the record, so log order
//! equals apply order and nothing is applied that the log did not take.
//! `append` only copies the payload into an in-memory buffer (one
//! uncontended mutex, one `memcpy`, no system call). After releasing its lock
//! the store awaits [`Wal::wait_durable`] for the last seq before it
//! acknowledges.
//!
//! The writer thread (`hotrank-wal`) takes everything appended so far in one
//! swap of the buffer, fills in the checksums, writes the bytes with one
//! `write(2)` per segment touched, syncs per the [`FsyncPolicy`], then
//! publishes the new durable seq and wakes the waiters it covers. While it is
//! busy, new appends form the next group, so one `fdatasync` covers many
//! records. Under [`FsyncPolicy::Always`] it then holds that group back
//! until as many requests wait as the last sync covered plus those already
//! waiting, for at most the last sync's duration (2 ms at most): without
//! that, the requests one sync answers come back while the next is under
//! way and the clients split into groups taking turns. It also wakes on its
//! own at least every 10 ms.
//!
//! Under [`FsyncPolicy::Interval`] and [`FsyncPolicy::Never`] a waiter that
//! finds no write in progress does that write itself (leader/follower group
//! commit): under the writer's lock it takes everything appended so far,
//! writes it and publishes it durable, without waking the writer thread or
//! being woken by it. A waiter first yields once to the runtime, so that
//! the other requests ready on that thread append their records too and
//! one `write(2)` covers them all. The waiter writes only one `write(2)` of
//! at most 64 KiB into the open segment (no rotation) while the log is not
//! stalled; anything else — rotation, retries, the interval's timer, close,
//! every write under `Always` — stays with the writer thread. Writes are
//! serialized by that lock and take the buffer whole, so records reach the
//! file in seq order whoever writes them.
//!
//! # Recovery
//!
//! [`Wal::open`] reads the segments in order and validates every record:
//! length within bounds and within the file (absurd lengths are rejected
//! before anything is allocated), expected seq, checksum. Segments covered by
//! `after_seq` are skipped unread. A record that fails validation in the
//! **last** segment, with no intact record anywhere after it, is a torn tail
//! (a write the crash cut short): the file is truncated there with a
//! `tracing::warn!` naming the file, offset and bytes dropped. Anything else —
//! damage followed by intact records, a bad record or header in an earlier
//! segment, a seq gap not covered by `after_seq` — is [`WalError::Corrupt`]
//! naming the file and byte offset, and nothing is changed: a server refuses
//! to start rather than drop acknowledged records. [`salvage`] (behind
//! `hotrank repair`) then keeps every intact record and reports what it
//! skipped.
//!
//! A segment is created as `wal-….log.tmp` holding just the header, synced,
//! renamed into place, and the directory is synced, so a named segment never
//! has a torn header. The previous segment is synced before the next one is
//! created (under every policy), so only the last segment can have a torn
//! tail.
//!
//! # Durability per policy
//!
//! * [`FsyncPolicy::Always`]: `wait_durable(seq)` returns after the segment
//!   holding `seq` has been synced (and, for a new segment, its directory).
//! * [`FsyncPolicy::Interval`]: returns once the record has been written to
//!   the file (it survives a process crash, not a power loss); a sync follows
//!   within the interval. A power loss loses at most the records written
//!   since the last completed sync ([`Wal::synced_seq`]). The interval's
//!   syncs run on a thread of their own (`hotrank-wal-sync`, [`syncer`]) on
//!   a second handle of the segment, so writes — and so acknowledgements —
//!   never wait for one; a failed one stalls the log as a failed write does.
//!   Syncs the writer needs at once (before a rotation, a rewrite after a
//!   failure, at close) wait for the one out first.
//! * [`FsyncPolicy::Never`]: returns once written; sync only at rotation and
//!   close. For tests and benchmarks.
//!
//! # Write errors
//!
//! If a write, sync or segment creation fails (a full disk, an I/O error),
//! the writer **stalls**: it keeps every record not yet synced in memory,
//! [`Wal::health`] and [`Wal::writable`] report [`WalError::Stalled`], waiters
//! for records that are not durable get `Stalled`, and the gauge
//! `hotrank_wal_stalled` is 1. It then retries with a growing delay (up to
//! 2 s): cut the active segment back to its last synced length (never
//! syncing the bytes whose sync failed again), start a new segment at the
//! first unsynced record, write everything kept, sync. When that succeeds the
//! log is open again by itself. No record taken by `append` is dropped while
//! the process lives: it is either written later or, if the process ends
//! first, it was never acknowledged. Only [`Wal::close`] during a stall, or a
//! panic of the writer, fail the log for good ([`WalError::Failed`]).
//!
//! Only one `Wal` may have a directory open at a time; the store locks its
//! data directory.

pub mod format;
pub mod reader;
mod recovery;
mod syncer;
#[cfg(test)]
mod tests;
mod writer;

pub use format::{
    MAX_RECORD_BYTES, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN, SEGMENT_MAGIC, SEGMENT_VERSION,
    encode_record, segment_file_name, segment_header,
};
pub use reader::{ReadStats, ReplayError, SalvageReport, Skipped, read_records, salvage};

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use tokio::sync::watch;

use crate::store::storage::{Disk, Storage};
use format::push_unsealed_record;

/// Default segment size at which the log rotates (64 MiB).
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;

/// Metric names.
pub const METRIC_FSYNC_SECONDS: &str = "hotrank_wal_fsync_seconds";
pub const METRIC_BYTES_WRITTEN: &str = "hotrank_wal_bytes_written_total";
pub const METRIC_RECORDS: &str = "hotrank_wal_records_total";
pub const METRIC_SEGMENTS: &str = "hotrank_wal_segments";
pub const METRIC_STALLED: &str = "hotrank_wal_stalled";
pub const METRIC_WRITE_ERRORS: &str = "hotrank_wal_write_errors_total";

const INITIAL_BUFFER_CAPACITY: usize = 64 << 10;

const STATUS_OPEN: u8 = 0;
const STATUS_CLOSED: u8 = 1;
const STATUS_FAILED: u8 = 2;
const STATUS_STALLED: u8 = 3;

/// When appended records are synced; see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Durable (acknowledged) only after a sync of the segment holding the
    /// record; concurrent appenders share one sync (group commit).
    Always,
    /// Acknowledged once written to the file (page cache); sync at least every `d`.
    Interval(Duration),
    /// Acknowledged once written; sync only at rotation and close.
    Never,
}

/// Configuration of a [`Wal`].
#[derive(Clone, Debug)]
pub struct WalConfig {
    /// Directory holding the segment files; created if missing.
    pub dir: PathBuf,
    pub fsync: FsyncPolicy,
    /// A segment is closed and a new one started once it passes this size.
    pub segment_bytes: u64,
    /// Written into the header of new segments and handed back with every
    /// record on replay (see [`format`]).
    pub payload_version: u32,
    pub storage: Arc<dyn Storage>,
}

impl WalConfig {
    /// Policy [`FsyncPolicy::Always`], [`DEFAULT_SEGMENT_BYTES`], payload
    /// version 0, the real disk.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        WalConfig {
            dir: dir.into(),
            fsync: FsyncPolicy::Always,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            payload_version: 0,
            storage: Arc::new(Disk),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("wal i/o error: {0}")]
    Io(#[from] io::Error),
    #[error("wal is closed")]
    Closed,
    /// The log failed for good (closed during a stall, or the writer panicked).
    #[error("wal failed: {0}")]
    Failed(String),
    /// Writing failed; the writer keeps the records and retries by itself.
    #[error("wal cannot write right now and is retrying: {0}")]
    Stalled(String),
    /// Damage that is not a torn tail of the last segment.
    #[error("wal corrupt: {}: offset {offset}: {reason}", path.display())]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    /// The replay callback of [`Wal::open`] returned an error.
    #[error("wal replay callback failed at seq {seq}: {source}")]
    Replay {
        seq: u64,
        #[source]
        source: ReplayError,
    },
    /// Payload larger than [`MAX_RECORD_BYTES`] (only from [`Wal::try_append`]).
    #[error("wal record of {len} bytes exceeds the maximum of {max} bytes")]
    TooLarge { len: usize, max: usize },
    /// `wait_durable` was called for a seq that was never handed out by `append`.
    #[error("wal seq {seq} has not been appended (last appended is {last})")]
    NotAppended { seq: u64, last: u64 },
}

/// What [`Wal::open`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Records passed to the replay callback (those with seq > `after_seq`).
    pub records: u64,
    /// Highest seq present in the log after recovery (0 if it holds no record).
    pub last_seq: u64,
    /// Bytes dropped from a torn tail.
    pub truncated_bytes: u64,
    /// Segment files in the log after recovery.
    pub segments: usize,
}

/// The write-ahead log. `Send + Sync`; share it as `Arc<Wal>`.
pub struct Wal {
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

pub(crate) struct Shared {
    cfg: WalConfig,
    state: Mutex<AppendState>,
    writer_cv: Condvar,
    writer_parked: AtomicBool,
    /// Under [`FsyncPolicy::Always`]: requests that began waiting since the
    /// writer last took the buffer (an estimate: it steers only when the
    /// writer syncs, never what a sync covers), and while the writer
    /// gathers a group, how many it waits for (0 when it does not).
    arrivals: AtomicU64,
    gather_target: AtomicU64,
    appended: AtomicU64,
    durable: AtomicU64,
    synced: AtomicU64,
    status: AtomicU8,
    /// Why the log is stalled or failed.
    failure: Mutex<Option<String>>,
    /// Bumped whenever `durable` advances or `status` changes.
    progress: watch::Sender<u64>,
    segments: Mutex<Vec<SegmentMeta>>,
    total_bytes: AtomicU64,
    fsyncs: AtomicU64,
    /// The writer's state: held by the writer thread while it works, tried
    /// by [`Shared::write_inline`]; `None` once the writer thread has ended.
    /// Lock order: `core`, then `state`.
    core: Mutex<Option<writer::Writer>>,
}

pub(crate) struct AppendState {
    /// Encoded records not yet taken by the writer; checksums are filled in by
    /// the writer.
    buf: Vec<u8>,
    records: u64,
    next_seq: u64,
    /// False once closing or failed: appends still get a seq but are discarded.
    accepting: bool,
    closing: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct SegmentMeta {
    pub first_seq: u64,
    pub path: PathBuf,
    /// File size; kept current for every segment but the active one.
    pub bytes: u64,
}

impl Wal {
    /// Opens the log in `cfg.dir` (creating it if needed), replays every record
    /// with seq > `after_seq` in order through `replay` (seq, payload version,
    /// payload), truncates a torn tail of the last segment, and starts the
    /// writer thread.
    pub fn open(
        cfg: WalConfig,
        after_seq: u64,
        mut replay: impl FnMut(u64, u32, &[u8]) -> Result<(), ReplayError>,
    ) -> Result<(Wal, ReplayStats), WalError> {
        cfg.storage.create_dir_all(&cfg.dir)?;
        let rec = recovery::recover(&cfg, after_seq, &mut replay)?;
        let durable = rec.next_seq - 1;
        let (progress, _) = watch::channel(durable);
        let shared = Arc::new(Shared {
            state: Mutex::new(AppendState {
                buf: Vec::with_capacity(INITIAL_BUFFER_CAPACITY),
                records: 0,
                next_seq: rec.next_seq,
                accepting: true,
                closing: false,
            }),
            writer_cv: Condvar::new(),
            writer_parked: AtomicBool::new(false),
            arrivals: AtomicU64::new(0),
            gather_target: AtomicU64::new(0),
            appended: AtomicU64::new(durable),
            durable: AtomicU64::new(durable),
            synced: AtomicU64::new(durable),
            status: AtomicU8::new(STATUS_OPEN),
            failure: Mutex::new(None),
            progress,
            total_bytes: AtomicU64::new(rec.segments.iter().map(|s| s.bytes).sum()),
            segments: Mutex::new(rec.segments),
            fsyncs: AtomicU64::new(0),
            core: Mutex::new(None),
            cfg,
        });
        metrics::gauge!(METRIC_STALLED).set(0.0);
        let writer = writer::Writer::new(Arc::clone(&shared), rec.active, durable)?;
        *shared.core.lock() = Some(writer);
        let theirs = Arc::clone(&shared);
        let handle = match thread::Builder::new()
            .name("hotrank-wal".into())
            .spawn(move || writer::run(theirs))
        {
            Ok(handle) => handle,
            Err(e) => {
                // The writer holds a handle on `shared`: drop it here.
                let core = shared.core.lock().take();
                drop(core);
                return Err(e.into());
            }
        };
        Ok((
            Wal {
                shared,
                writer: Mutex::new(Some(handle)),
            },
            rec.stats,
        ))
    }

    /// Appends one record and returns its seq. Cheap and non-blocking: the
    /// payload is copied into memory and written by the writer (see
    /// [`Wal::wait_durable`]). While the log is stalled the record is kept
    /// and written once it recovers.
    ///
    /// After the log was closed or has failed, the seq is still consumed but the
    /// record is dropped, and `wait_durable` for it returns an error.
    ///
    /// # Panics
    /// If `payload` is longer than [`MAX_RECORD_BYTES`] (a caller bug; use
    /// [`Wal::try_append`] to get an error instead).
    pub fn append(&self, payload: &[u8]) -> u64 {
        assert!(
            payload.len() <= MAX_RECORD_BYTES,
            "wal record of {} bytes exceeds the maximum of {MAX_RECORD_BYTES}",
            payload.len()
        );
        let mut st = self.shared.state.lock();
        let seq = st.next_seq;
        st.next_seq += 1;
        if st.accepting {
            push_unsealed_record(&mut st.buf, seq, payload);
            st.records += 1;
        }
        self.shared.appended.store(seq, Ordering::Release);
        seq
    }

    /// Like [`Wal::append`], but rejects oversized payloads, and appends
    /// while the log is not [`Wal::writable`], with an error instead of
    /// consuming a seq.
    pub fn try_append(&self, payload: &[u8]) -> Result<u64, WalError> {
        if payload.len() > MAX_RECORD_BYTES {
            return Err(WalError::TooLarge {
                len: payload.len(),
                max: MAX_RECORD_BYTES,
            });
        }
        self.writable()?;
        let mut st = self.shared.state.lock();
        if !st.accepting {
            drop(st);
            return Err(self.shared.status_error());
        }
        let seq = st.next_seq;
        st.next_seq += 1;
        push_unsealed_record(&mut st.buf, seq, payload);
        st.records += 1;
        self.shared.appended.store(seq, Ordering::Release);
        Ok(seq)
    }

    /// `Ok` if new records should be appended now; [`WalError::Stalled`]
    /// while the writer cannot write, the terminal error once closed or
    /// failed. The store checks this before it applies anything.
    pub fn writable(&self) -> Result<(), WalError> {
        match self.shared.status.load(Ordering::Acquire) {
            STATUS_OPEN => Ok(()),
            _ => Err(self.shared.status_error()),
        }
    }

    /// Resolves once record `seq` is durable per the policy; errors if the
    /// log is stalled, failed or was closed before that.
    ///
    /// Under [`FsyncPolicy::Interval`] and [`FsyncPolicy::Never`] the caller
    /// first tries to write what is appended itself
    /// ([`Shared::write_inline`]), which spares it the wake-ups of a
    /// hand-off to the writer thread and back.
    pub async fn wait_durable(&self, seq: u64) -> Result<(), WalError> {
        if let Some(done) = self.shared.poll_durable(seq) {
            return done;
        }
        if self.shared.cfg.fsync != FsyncPolicy::Always {
            // Let the runtime's other ready tasks append first: the one that
            // writes then writes them all in one `write(2)`.
            tokio::task::yield_now().await;
            if let Some(done) = self.shared.poll_durable(seq) {
                return done;
            }
            self.shared.write_inline();
            if let Some(done) = self.shared.poll_durable(seq) {
                return done;
            }
        }
        let mut rx = self.shared.progress.subscribe();
        if self.shared.cfg.fsync == FsyncPolicy::Always {
            self.shared.arrived();
        } else {
            self.shared.kick_writer();
        }
        loop {
            if let Some(done) = self.shared.poll_durable(seq) {
                return done;
            }
            // The sender lives as long as `self`, so this cannot fail.
            if rx.changed().await.is_err() {
                return Err(WalError::Closed);
            }
        }
    }

    /// Blocking variant of [`Wal::wait_durable`] for threads outside a runtime.
    /// Do not call it from an async task.
    pub fn wait_durable_blocking(&self, seq: u64) -> Result<(), WalError> {
        if let Some(done) = self.shared.poll_durable(seq) {
            return done;
        }
        block_on(self.wait_durable(seq))
    }

    /// Seq of the last record handed out by `append` (0 if none).
    pub fn last_appended_seq(&self) -> u64 {
        self.shared.appended.load(Ordering::Acquire)
    }

    /// Highest seq that is durable per the policy.
    pub fn durable_seq(&self) -> u64 {
        self.shared.durable.load(Ordering::Acquire)
    }

    /// Highest seq known to be synced (equals `durable_seq` under `Always`).
    pub fn synced_seq(&self) -> u64 {
        self.shared.synced.load(Ordering::Acquire)
    }

    /// Number of syncs of segment files done by this instance.
    pub fn fsync_count(&self) -> u64 {
        self.shared.fsyncs.load(Ordering::Relaxed)
    }

    pub fn config(&self) -> &WalConfig {
        &self.shared.cfg
    }

    /// Deletes whole segments whose every record has seq <= `seq`, oldest first.
    /// The last (active) segment is never deleted.
    pub fn remove_through(&self, seq: u64) -> Result<(), WalError> {
        let removed: Vec<SegmentMeta> = {
            let mut segs = self.shared.segments.lock();
            let mut n = 0;
            // Segment i holds seqs first_seq(i) ..= first_seq(i + 1) - 1.
            while n + 1 < segs.len() && segs[n + 1].first_seq - 1 <= seq {
                n += 1;
            }
            let removed = segs.drain(..n).collect();
            metrics::gauge!(METRIC_SEGMENTS).set(segs.len() as f64);
            removed
        };
        if removed.is_empty() {
            return Ok(());
        }
        let storage = &self.shared.cfg.storage;
        let mut first_err = None;
        for seg in &removed {
            match storage.remove(&seg.path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(file = %seg.path.display(), error = %e, "wal: could not delete segment");
                    first_err.get_or_insert(e);
                }
            }
            self.shared
                .total_bytes
                .fetch_sub(seg.bytes, Ordering::Relaxed);
        }
        tracing::debug!(
            through = seq,
            removed = removed.len(),
            "wal: removed segments covered by snapshot"
        );
        if let Some(e) = first_err {
            return Err(e.into());
        }
        storage.sync_dir(&self.shared.cfg.dir)?;
        Ok(())
    }

    /// Writes and syncs everything appended so far and stops the writer thread.
    /// Idempotent; concurrent callers all return after the writer has stopped.
    /// Returns [`WalError::Failed`] if the log had failed (or could not write
    /// everything because it was stalled).
    pub fn close(&self) -> Result<(), WalError> {
        let mut writer = self.writer.lock();
        if let Some(handle) = writer.take() {
            {
                let mut st = self.shared.state.lock();
                st.closing = true;
                st.accepting = false;
            }
            self.shared.writer_cv.notify_one();
            if handle.join().is_err() {
                // The exit guard has already failed the log; keep this as a fallback.
                self.shared.fail("writer thread panicked".to_string());
            }
        }
        match self.shared.status.load(Ordering::Acquire) {
            STATUS_FAILED => Err(self.shared.status_error()),
            _ => Ok(()),
        }
    }

    /// `Ok` while the log accepts and persists records; [`WalError::Stalled`]
    /// while it retries a failed write; the terminal error once it has failed
    /// or been closed.
    pub fn health(&self) -> Result<(), WalError> {
        self.writable()
    }

    /// Total bytes of the live segment files.
    pub fn size_bytes(&self) -> u64 {
        self.shared.total_bytes.load(Ordering::Relaxed)
    }

    /// Number of live segment files.
    pub fn segment_count(&self) -> usize {
        self.shared.segments.lock().len()
    }

    /// Sets the log's gauges (and their HELP text) from its current state;
    /// called periodically by the store.
    pub fn publish_metrics(&self) {
        let stalled = self.shared.status.load(Ordering::Acquire) == STATUS_STALLED;
        metrics::gauge!(METRIC_STALLED).set(if stalled { 1.0 } else { 0.0 });
        metrics::gauge!(METRIC_SEGMENTS).set(self.segment_count() as f64);
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::debug!(error = %e, "wal: close on drop reported an error");
        }
    }
}

impl Shared {
    /// `Some` once waiting for `seq` is over.
    fn poll_durable(&self, seq: u64) -> Option<Result<(), WalError>> {
        // Status first: the writer publishes `durable` before it changes status.
        let status = self.status.load(Ordering::Acquire);
        if self.durable.load(Ordering::Acquire) >= seq {
            return Some(Ok(()));
        }
        let last = self.appended.load(Ordering::Acquire);
        if seq > last {
            return Some(Err(WalError::NotAppended { seq, last }));
        }
        if status != STATUS_OPEN {
            return Some(Err(self.status_error()));
        }
        None
    }

    /// Leader/follower group commit for the policies that acknowledge
    /// once written: if no write is in progress (the writer's state is
    /// free), the caller writes everything appended so far itself, under
    /// that state's lock, and publishes it durable; see
    /// [`writer::Writer::write_inline`] for when it leaves the bytes to the
    /// writer thread. A caller that finds a write in progress waits for the
    /// writer thread instead. Under [`FsyncPolicy::Always`] the writer
    /// thread does every write (an `fdatasync` must not block the caller):
    /// this is not called.
    fn write_inline(&self) {
        debug_assert_ne!(self.cfg.fsync, FsyncPolicy::Always);
        let Some(mut core) = self.core.try_lock() else {
            return;
        };
        if let Some(writer) = core.as_mut() {
            let _guard = InlineGuard(self);
            writer.write_inline();
        }
    }

    fn status_error(&self) -> WalError {
        let msg = || self.failure.lock().clone().unwrap_or_default();
        match self.status.load(Ordering::Acquire) {
            STATUS_FAILED => WalError::Failed(msg()),
            STATUS_STALLED => WalError::Stalled(msg()),
            _ => WalError::Closed,
        }
    }

    /// A request waits for the writer under [`FsyncPolicy::Always`]: it is
    /// counted for the writer's group, and wakes the writer unless the
    /// writer is gathering a group this request does not complete.
    fn arrived(&self) {
        let n = self.arrivals.fetch_add(1, Ordering::SeqCst) + 1;
        let target = self.gather_target.load(Ordering::SeqCst);
        if target == 0 || n >= target {
            self.kick_writer();
        }
    }

    fn kick_writer(&self) {
        if self.writer_parked.load(Ordering::SeqCst) {
            self.writer_cv.notify_one();
        }
    }

    fn publish_durable(&self, seq: u64) {
        self.durable.store(seq, Ordering::Release);
        self.progress.send_replace(seq);
    }

    /// The writer cannot write: waiters are told, writes refused until
    /// [`Shared::unstall`].
    fn stall(&self, msg: String) {
        metrics::counter!(METRIC_WRITE_ERRORS).increment(1);
        if self.status.load(Ordering::Acquire) != STATUS_STALLED {
            tracing::error!(dir = %self.cfg.dir.display(), error = %msg, "wal: write failed; records are kept and the write is retried, writes are refused meanwhile");
            metrics::gauge!(METRIC_STALLED).set(1.0);
        }
        *self.failure.lock() = Some(msg);
        self.status.store(STATUS_STALLED, Ordering::Release);
        self.progress.send_modify(|_| {});
    }

    fn unstall(&self) {
        if self.status.load(Ordering::Acquire) == STATUS_STALLED {
            tracing::info!(dir = %self.cfg.dir.display(), "wal: writing again after a failure");
            metrics::gauge!(METRIC_STALLED).set(0.0);
            *self.failure.lock() = None;
            self.status.store(STATUS_OPEN, Ordering::Release);
            self.progress.send_modify(|_| {});
        }
    }

    /// Fails the log for good (first failure wins) and wakes every waiter.
    fn fail(&self, msg: String) {
        if self.status.load(Ordering::Acquire) == STATUS_FAILED {
            return;
        }
        tracing::error!(dir = %self.cfg.dir.display(), error = %msg, "wal failed; no further record will become durable");
        *self.failure.lock() = Some(msg);
        {
            let mut st = self.state.lock();
            st.accepting = false;
            st.buf = Vec::new();
            st.records = 0;
        }
        self.status.store(STATUS_FAILED, Ordering::Release);
        self.progress.send_modify(|_| {});
    }
}

/// Fails the log if an inline write panics: the batch it took may be lost,
/// so no later record may be written after it.
struct InlineGuard<'a>(&'a Shared);

impl Drop for InlineGuard<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            self.0
                .fail("wal: a write on the caller's thread panicked".to_string());
        }
    }
}

/// Minimal executor for [`Wal::wait_durable_blocking`].
fn block_on<F: Future>(fut: F) -> F::Output {
    struct ThreadWaker(thread::Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        thread::park();
    }
}
