//! Write-ahead log of the embedded store: checksummed records, group commit,
//! fsync policies, segment rotation and torn-tail recovery.
//!
//! # How it is used
//!
//! The store applies a batch of events under its own lock and calls
//! [`Wal::append`] once per event while still holding it, so log order equals
//! apply order. `append` only copies the payload into an in-memory buffer (one
//! uncontended mutex, one `memcpy`, no system call). After releasing its lock the
//! store awaits [`Wal::wait_durable`] for the last seq of the batch before it
//! acknowledges the client.
//!
//! A dedicated writer thread (`hotrank-wal`) does group commit: it takes
//! everything appended so far in one swap of the buffer, fills in the record
//! checksums, writes the bytes to the active segment with one `write(2)` per
//! segment touched, syncs according to the [`FsyncPolicy`], then publishes the new
//! durable seq and wakes every waiter whose record is now covered. While it is
//! busy writing or syncing, new appends accumulate and form the next group, so
//! under load one `fdatasync` covers many records from many appenders.
//!
//! Records nobody waits for are still written: the writer wakes up on its own at
//! least every 10 ms when idle, and waiters wake it immediately.
//!
//! # On-disk format (version 1)
//!
//! All integers are little-endian. The log is a directory of segment files named
//! `wal-{first_seq:020}.log`, where `first_seq` is the seq of the first record the
//! segment holds (or would hold, if it is empty).
//!
//! Segment header, 32 bytes:
//!
//! | offset | size | field                                   |
//! |--------|------|-----------------------------------------|
//! | 0      | 8    | magic `b"HRKWAL\0\0"`                   |
//! | 8      | 4    | format version, `1`                     |
//! | 12     | 4    | flags, `0`                              |
//! | 16     | 8    | `first_seq` (must match the file name)  |
//! | 24     | 4    | crc32 (IEEE) of bytes 0..24             |
//! | 28     | 4    | reserved, `0`                           |
//!
//! Then records back to back, each a 16-byte header followed by the payload:
//!
//! | offset | size | field                                                    |
//! |--------|------|----------------------------------------------------------|
//! | 0      | 4    | `len`: payload length in bytes (at most [`MAX_RECORD_BYTES`]) |
//! | 4      | 4    | crc32 (IEEE) over `len` bytes ‖ `seq` bytes ‖ payload    |
//! | 8      | 8    | `seq`                                                    |
//! | 16     | len  | payload (opaque to the WAL)                              |
//!
//! Seqs start at 1 and are contiguous: inside a segment every record's seq is the
//! previous one plus one, and the first record's seq equals the segment's
//! `first_seq`. Between segments a gap is allowed only if it is entirely covered
//! by the snapshot the caller replays from (`after_seq`); this happens when a
//! snapshot recorded a seq that had been appended but not yet written before a
//! crash.
//!
//! A segment is created as `wal-….log.tmp` holding just the header, fsynced,
//! renamed into place, and the directory is fsynced, so a named segment never has
//! a torn header. The previous segment is fdatasynced before the next one is
//! created (under every policy), so only the last segment can have a torn tail.
//!
//! # Recovery
//!
//! [`Wal::open`] reads the segments in order and validates every record: length
//! within bounds and within the file (absurd lengths are rejected before anything
//! is allocated), expected seq, checksum. Segments that are entirely covered by
//! `after_seq` are skipped without being read. In the **last** segment, the first
//! record that fails validation marks a torn or corrupted tail: the file is
//! truncated there (a `tracing::warn!` names the file, the offset and the number
//! of bytes dropped) and appending resumes after the last good record. A
//! zero-filled tail fails validation like any other garbage (a zero seq is never
//! expected, and the checksum of zeros is not zero). If intact-looking records are
//! found beyond the truncation point the warning says so, since that points to
//! corruption rather than a torn write. In any **earlier** segment, a failing
//! record, a bad header, or a seq gap not covered by `after_seq` is unrecoverable
//! and `open` returns [`WalError::Corrupt`] instead of silently dropping data from
//! the middle of the log.
//!
//! # Durability per policy
//!
//! * [`FsyncPolicy::Always`]: `wait_durable(seq)` returns after the segment holding
//!   `seq` has been `fdatasync`ed (and, for a new segment, its directory entry).
//! * [`FsyncPolicy::Interval`]: returns once the record has been written to the
//!   file (it survives a process crash, not a power loss); an fsync follows within
//!   the interval.
//! * [`FsyncPolicy::Never`]: returns once written; fsync only at rotation and close.
//!
//! If a write or fsync fails, the writer logs once with `tracing::error!` and the
//! log is poisoned: every record that was not yet durable can never become durable
//! and all its waiters, and all later waiters, get [`WalError::Failed`]. (A seq
//! that had already been reported durable stays durable.) Failed fsyncs are never
//! retried, since the kernel may have dropped the dirty pages.
//!
//! Only one `Wal` may have a directory open at a time; the store owns its data
//! directory exclusively.

use std::fs::{self, File, OpenOptions};
use std::future::Future;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tokio::sync::watch;

/// Magic bytes at the start of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"HRKWAL\0\0";
/// On-disk format version written by this module.
pub const SEGMENT_VERSION: u32 = 1;
/// Size of the segment header.
pub const SEGMENT_HEADER_LEN: usize = 32;
/// Size of a record header (length, checksum, seq).
pub const RECORD_HEADER_LEN: usize = 16;
/// Largest payload accepted by [`Wal::append`] and by recovery (4 MiB).
pub const MAX_RECORD_BYTES: usize = 4 << 20;
/// Default segment size at which the log rotates (64 MiB).
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;

/// Metric names.
pub const METRIC_FSYNC_SECONDS: &str = "hotrank_wal_fsync_seconds";
pub const METRIC_BYTES_WRITTEN: &str = "hotrank_wal_bytes_written_total";
pub const METRIC_RECORDS: &str = "hotrank_wal_records_total";
pub const METRIC_SEGMENTS: &str = "hotrank_wal_segments";

/// How long the writer sleeps when idle before it looks at the buffer again.
const IDLE_POLL: Duration = Duration::from_millis(10);
/// A drained buffer larger than this is freed rather than kept as the spare.
const MAX_SPARE_CAPACITY: usize = 16 << 20;
const INITIAL_BUFFER_CAPACITY: usize = 64 << 10;
/// Bytes of a truncated tail examined for intact records (diagnostics only).
const MAX_TAIL_DIAGNOSTIC_BYTES: u64 = 64 << 20;

const STATUS_OPEN: u8 = 0;
const STATUS_CLOSED: u8 = 1;
const STATUS_FAILED: u8 = 2;

/// When appended records are fsynced; see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Durable (acknowledged) only after an fdatasync of the segment holding the
    /// record; concurrent appenders share one fsync (group commit).
    Always,
    /// Acknowledged once written to the file (page cache); fsync at least every `d`.
    Interval(Duration),
    /// Acknowledged once written; fsync only at rotation and close.
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
}

impl WalConfig {
    /// Policy [`FsyncPolicy::Always`], [`DEFAULT_SEGMENT_BYTES`].
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        WalConfig {
            dir: dir.into(),
            fsync: FsyncPolicy::Always,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("wal i/o error: {0}")]
    Io(#[from] io::Error),
    #[error("wal is closed")]
    Closed,
    /// A previous write or fsync failed: the log is poisoned.
    #[error("wal failed and is poisoned: {0}")]
    Failed(String),
    /// Unrecoverable corruption that is not a torn tail of the last segment.
    #[error("wal corrupt: {}: offset {offset}: {reason}", path.display())]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    /// The replay callback of [`Wal::open`] returned an error.
    #[error("wal replay callback failed at seq {seq}: {message}")]
    Replay { seq: u64, message: String },
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
    /// Bytes dropped from a torn or corrupt tail.
    pub truncated_bytes: u64,
    /// Segment files in the log after recovery.
    pub segments: usize,
}

/// The write-ahead log. `Send + Sync`; share it as `Arc<Wal>`.
pub struct Wal {
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    cfg: WalConfig,
    state: Mutex<AppendState>,
    writer_cv: Condvar,
    writer_parked: AtomicBool,
    appended: AtomicU64,
    durable: AtomicU64,
    synced: AtomicU64,
    status: AtomicU8,
    failure: Mutex<Option<String>>,
    /// Bumped whenever `durable` advances or `status` changes.
    progress: watch::Sender<u64>,
    segments: Mutex<Vec<SegmentMeta>>,
    total_bytes: AtomicU64,
    fsyncs: AtomicU64,
    fail_next_write: AtomicBool,
}

struct AppendState {
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
struct SegmentMeta {
    first_seq: u64,
    path: PathBuf,
    /// File size; kept current for every segment but the active one.
    bytes: u64,
}

struct ActiveSegment {
    file: File,
    bytes: u64,
}

impl Wal {
    /// Opens the log in `cfg.dir` (creating it if needed), replays every record
    /// with seq > `after_seq` in order through `replay`, truncates a torn or
    /// corrupt tail of the last segment, and starts the writer thread.
    pub fn open(
        cfg: WalConfig,
        after_seq: u64,
        mut replay: impl FnMut(u64, &[u8]) -> Result<(), String>,
    ) -> Result<(Wal, ReplayStats), WalError> {
        fs::create_dir_all(&cfg.dir)?;
        let recovered = recover(&cfg.dir, after_seq, &mut replay)?;
        let last_seq = recovered.stats.last_seq;
        let next_seq = last_seq.max(after_seq) + 1;

        // Keep appending to the last segment if the seqs continue it; otherwise
        // the writer starts a new segment with the first batch.
        let mut active = None;
        if let Some(last) = recovered.segments.last() {
            if recovered.last_segment_end_seq + 1 == next_seq {
                let mut file = OpenOptions::new().write(true).open(&last.path)?;
                let bytes = file.seek(SeekFrom::End(0))?;
                active = Some(ActiveSegment { file, bytes });
            }
        }
        let total: u64 = recovered.segments.iter().map(|s| s.bytes).sum();
        let stats = recovered.stats;
        metrics::gauge!(METRIC_SEGMENTS).set(recovered.segments.len() as f64);
        tracing::info!(
            dir = %cfg.dir.display(),
            segments = stats.segments,
            replayed = stats.records,
            last_seq = stats.last_seq,
            after_seq,
            next_seq,
            truncated_bytes = stats.truncated_bytes,
            "wal opened"
        );

        let durable = next_seq - 1;
        let (progress, _) = watch::channel(durable);
        let shared = Arc::new(Shared {
            state: Mutex::new(AppendState {
                buf: Vec::with_capacity(INITIAL_BUFFER_CAPACITY),
                records: 0,
                next_seq,
                accepting: true,
                closing: false,
            }),
            writer_cv: Condvar::new(),
            writer_parked: AtomicBool::new(false),
            appended: AtomicU64::new(durable),
            durable: AtomicU64::new(durable),
            synced: AtomicU64::new(durable),
            status: AtomicU8::new(STATUS_OPEN),
            failure: Mutex::new(None),
            progress,
            segments: Mutex::new(recovered.segments),
            total_bytes: AtomicU64::new(total),
            fsyncs: AtomicU64::new(0),
            fail_next_write: AtomicBool::new(false),
            cfg,
        });
        let writer = Writer {
            shared: Arc::clone(&shared),
            active,
            spare: Vec::with_capacity(INITIAL_BUFFER_CAPACITY),
            last_sync: Instant::now(),
            dirty: false,
            written_seq: durable,
        };
        let handle = thread::Builder::new()
            .name("hotrank-wal".into())
            .spawn(move || writer.run())?;
        Ok((
            Wal {
                shared,
                writer: Mutex::new(Some(handle)),
            },
            stats,
        ))
    }

    /// Appends one record and returns its seq. Cheap and non-blocking: the
    /// payload is copied into memory and written by the writer thread.
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

    /// Like [`Wal::append`], but rejects oversized payloads and appends after
    /// close or failure with an error instead of consuming a seq.
    pub fn try_append(&self, payload: &[u8]) -> Result<u64, WalError> {
        if payload.len() > MAX_RECORD_BYTES {
            return Err(WalError::TooLarge {
                len: payload.len(),
                max: MAX_RECORD_BYTES,
            });
        }
        let mut st = self.shared.state.lock();
        if !st.accepting {
            drop(st);
            return Err(self.shared.terminal_error());
        }
        let seq = st.next_seq;
        st.next_seq += 1;
        push_unsealed_record(&mut st.buf, seq, payload);
        st.records += 1;
        self.shared.appended.store(seq, Ordering::Release);
        Ok(seq)
    }

    /// Resolves once record `seq` is durable per the policy, or errors if the log
    /// failed or was closed before that.
    pub async fn wait_durable(&self, seq: u64) -> Result<(), WalError> {
        if let Some(done) = self.shared.poll_durable(seq) {
            return done;
        }
        let mut rx = self.shared.progress.subscribe();
        self.shared.kick_writer();
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

    /// Highest seq known to be fsynced (equals `durable_seq` under `Always`).
    pub fn synced_seq(&self) -> u64 {
        self.shared.synced.load(Ordering::Acquire)
    }

    /// Number of fsyncs of segment files done by this instance.
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
        let mut first_err = None;
        for seg in &removed {
            match fs::remove_file(&seg.path) {
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
        sync_dir(&self.shared.cfg.dir)?;
        Ok(())
    }

    /// Writes and fsyncs everything appended so far and stops the writer thread.
    /// Idempotent; concurrent callers all return after the writer has stopped.
    /// Returns [`WalError::Failed`] if the log had failed.
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
                // The exit guard has already poisoned the log; keep this as a fallback.
                self.shared.fail("writer thread panicked".to_string());
            }
        }
        match self.shared.status.load(Ordering::Acquire) {
            STATUS_FAILED => Err(self.shared.terminal_error()),
            _ => Ok(()),
        }
    }

    /// `Ok` while the log accepts and persists records; the terminal error
    /// once it has failed or been closed.
    pub fn health(&self) -> Result<(), WalError> {
        match self.shared.status.load(Ordering::Acquire) {
            STATUS_OPEN => Ok(()),
            _ => Err(self.shared.terminal_error()),
        }
    }

    /// Total bytes of the live segment files.
    pub fn size_bytes(&self) -> u64 {
        self.shared.total_bytes.load(Ordering::Relaxed)
    }

    /// Number of live segment files.
    pub fn segment_count(&self) -> usize {
        self.shared.segments.lock().len()
    }

    /// Fault injection for tests: the writer's next write fails with an I/O
    /// error, which poisons the log.
    #[doc(hidden)]
    pub fn fail_next_write_for_tests(&self) {
        self.shared.fail_next_write.store(true, Ordering::SeqCst);
        self.shared.kick_writer();
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
        // Status first: the writer publishes `durable` before a terminal status.
        let status = self.status.load(Ordering::Acquire);
        if self.durable.load(Ordering::Acquire) >= seq {
            return Some(Ok(()));
        }
        let last = self.appended.load(Ordering::Acquire);
        if seq > last {
            return Some(Err(WalError::NotAppended { seq, last }));
        }
        if status != STATUS_OPEN {
            return Some(Err(self.terminal_error()));
        }
        None
    }

    fn terminal_error(&self) -> WalError {
        if self.status.load(Ordering::Acquire) == STATUS_FAILED {
            let msg = self.failure.lock().clone().unwrap_or_default();
            WalError::Failed(msg)
        } else {
            WalError::Closed
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

    /// Poisons the log (first failure wins) and wakes every waiter.
    fn fail(&self, msg: String) {
        {
            let mut failure = self.failure.lock();
            if failure.is_some() || self.status.load(Ordering::Acquire) == STATUS_FAILED {
                return;
            }
            tracing::error!(dir = %self.cfg.dir.display(), error = %msg, "wal writer failed; the log is poisoned and no further record will become durable");
            *failure = Some(msg);
        }
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

/// Appends a record with a zero checksum; the writer seals it before writing.
fn push_unsealed_record(buf: &mut Vec<u8>, seq: u64, payload: &[u8]) {
    let mut header = [0u8; RECORD_HEADER_LEN];
    header[0..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    header[8..16].copy_from_slice(&seq.to_le_bytes());
    buf.reserve(RECORD_HEADER_LEN + payload.len());
    buf.extend_from_slice(&header);
    buf.extend_from_slice(payload);
}

fn record_crc(len: &[u8], seq: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(len);
    h.update(seq);
    h.update(payload);
    h.finalize()
}

/// Appends one complete record (header with checksum, then payload) to `out`.
/// Exposed for tools and tests that craft log files.
pub fn encode_record(out: &mut Vec<u8>, seq: u64, payload: &[u8]) {
    let start = out.len();
    push_unsealed_record(out, seq, payload);
    let rec = &mut out[start..];
    let crc = record_crc(&rec[0..4], &rec[8..16], &rec[16..]);
    rec[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// The 32-byte header of a segment whose first record has seq `first_seq`.
pub fn segment_header(first_seq: u64) -> [u8; SEGMENT_HEADER_LEN] {
    let mut h = [0u8; SEGMENT_HEADER_LEN];
    h[0..8].copy_from_slice(&SEGMENT_MAGIC);
    h[8..12].copy_from_slice(&SEGMENT_VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&first_seq.to_le_bytes());
    let crc = crc32fast::hash(&h[0..24]);
    h[24..28].copy_from_slice(&crc.to_le_bytes());
    h
}

fn check_segment_header(h: &[u8; SEGMENT_HEADER_LEN], first_seq: u64) -> Result<(), String> {
    if h[0..8] != SEGMENT_MAGIC {
        return Err("bad segment magic".into());
    }
    let crc = u32::from_le_bytes(h[24..28].try_into().unwrap());
    if crc != crc32fast::hash(&h[0..24]) {
        return Err("segment header checksum mismatch".into());
    }
    let version = u32::from_le_bytes(h[8..12].try_into().unwrap());
    if version != SEGMENT_VERSION {
        return Err(format!("unsupported segment format version {version}"));
    }
    let seq = u64::from_le_bytes(h[16..24].try_into().unwrap());
    if seq != first_seq {
        return Err(format!(
            "segment header says first seq {seq}, file name says {first_seq}"
        ));
    }
    Ok(())
}

/// File name of the segment starting at `first_seq`.
pub fn segment_file_name(first_seq: u64) -> String {
    format!("wal-{first_seq:020}.log")
}

fn parse_segment_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("wal-")?.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Segment files sorted by first seq; removes leftover `.tmp` segment files.
fn list_segments(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut segs = Vec::new();
    let mut removed_tmp = false;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(seq) = parse_segment_file_name(name) {
            segs.push((seq, entry.path()));
        } else if name
            .strip_suffix(".tmp")
            .and_then(parse_segment_file_name)
            .is_some()
        {
            tracing::info!(file = %entry.path().display(), "wal: removing unfinished segment file");
            fs::remove_file(entry.path())?;
            removed_tmp = true;
        }
    }
    if removed_tmp {
        sync_dir(dir)?;
    }
    segs.sort_unstable_by_key(|(seq, _)| *seq);
    Ok(segs)
}

/// The replay callback of [`Wal::open`], type-erased.
type ReplayFn<'a> = dyn FnMut(u64, &[u8]) -> Result<(), String> + 'a;

struct Recovered {
    segments: Vec<SegmentMeta>,
    stats: ReplayStats,
    /// Last seq the last segment holds (its first seq - 1 if it is empty).
    last_segment_end_seq: u64,
}

fn recover(dir: &Path, after_seq: u64, replay: &mut ReplayFn<'_>) -> Result<Recovered, WalError> {
    let files = list_segments(dir)?;
    let mut stats = ReplayStats::default();
    let mut segments: Vec<SegmentMeta> = Vec::with_capacity(files.len());
    // Last seq covered by the segments seen so far (0 before the first one).
    let mut prev_end: Option<u64> = None;

    for (i, (first_seq, path)) in files.iter().enumerate() {
        let first_seq = *first_seq;
        let is_last = i + 1 == files.len();
        let corrupt = |offset: u64, reason: String| WalError::Corrupt {
            path: path.clone(),
            offset,
            reason,
        };
        if first_seq == 0 {
            return Err(corrupt(0, "segment first seq 0 is invalid".into()));
        }
        if let Some(end) = prev_end {
            if first_seq <= end {
                return Err(corrupt(
                    0,
                    format!("segment starts at seq {first_seq} but the previous one reaches {end}"),
                ));
            }
        }
        let gap_from = prev_end.map_or(1, |e| e + 1);
        if first_seq > gap_from && first_seq - 1 > after_seq {
            return Err(corrupt(
                0,
                format!(
                    "records {gap_from}..={} are missing from the log and not covered by the snapshot (after_seq {after_seq})",
                    first_seq - 1
                ),
            ));
        }
        // Entirely covered by the snapshot: no need to read it.
        if !is_last && files[i + 1].0 - 1 <= after_seq {
            let bytes = fs::metadata(path)?.len();
            segments.push(SegmentMeta {
                first_seq,
                path: path.clone(),
                bytes,
            });
            prev_end = Some(files[i + 1].0 - 1);
            continue;
        }

        let scan = scan_segment(path, first_seq, after_seq, replay, &mut stats)?;
        if let Err(reason) = &scan.header {
            if is_last && scan.header_torn {
                tracing::warn!(
                    file = %path.display(),
                    bytes = scan.file_len,
                    reason = %reason,
                    "wal: removing last segment with an incomplete header"
                );
                fs::remove_file(path)?;
                sync_dir(dir)?;
                stats.truncated_bytes += scan.file_len;
                continue;
            }
            return Err(corrupt(0, reason.clone()));
        }
        let mut bytes = scan.file_len;
        if let Some((offset, reason)) = &scan.bad {
            if !is_last {
                return Err(corrupt(
                    *offset,
                    format!("{reason} (not the last segment, so this is not a torn tail)"),
                ));
            }
            let dropped = scan.file_len - offset;
            let expected_next = scan.last_seq.unwrap_or(first_seq - 1) + 1;
            let intact = count_intact_records(path, *offset, expected_next)?;
            if intact.count > 0 {
                tracing::warn!(
                    file = %path.display(),
                    offset,
                    dropped_bytes = dropped,
                    reason = %reason,
                    intact_records_dropped = intact.count,
                    intact_first_seq = intact.first_seq,
                    intact_last_seq = intact.last_seq,
                    "wal: corrupt record in the last segment; truncating there also drops records that looked intact (corruption, not a torn write?)"
                );
            } else {
                tracing::warn!(
                    file = %path.display(),
                    offset,
                    dropped_bytes = dropped,
                    reason = %reason,
                    "wal: truncating torn or corrupt tail of the last segment"
                );
            }
            let file = OpenOptions::new().write(true).open(path)?;
            file.set_len(*offset)?;
            file.sync_all()?;
            stats.truncated_bytes += dropped;
            bytes = *offset;
        } else if is_last {
            // A previous process may have died with this tail only in the page
            // cache (policies Interval and Never). Make it durable before any new
            // segment is created after it: only the last segment may be torn.
            File::open(path)?.sync_all()?;
        }
        let end = scan.last_seq.unwrap_or(first_seq - 1);
        prev_end = Some(end);
        segments.push(SegmentMeta {
            first_seq,
            path: path.clone(),
            bytes,
        });
    }
    stats.last_seq = prev_end.unwrap_or(0);
    stats.segments = segments.len();
    let last_segment_end_seq = match segments.last() {
        Some(_) => prev_end.unwrap_or(0),
        None => 0,
    };
    Ok(Recovered {
        segments,
        stats,
        last_segment_end_seq,
    })
}

/// What [`read_records`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Records passed to the callback (those with seq > `after_seq`).
    pub records: u64,
    /// Seq of the first record in the log (`None` if it holds none). Records
    /// before it were trimmed after a snapshot.
    pub first_seq: Option<u64>,
    /// Highest valid seq in the log (0 if it holds no record).
    pub last_seq: u64,
    /// Segment files read or skipped.
    pub segments: usize,
    /// Total size of the segment files, in bytes.
    pub total_bytes: u64,
    /// Bytes at the end of the last segment that do not form valid records
    /// (a torn write, or a record still being written by a live server).
    /// They are left in place.
    pub torn_tail_bytes: u64,
}

/// Reads the log in `dir` without modifying anything: no truncation, no
/// removal of unfinished segment files, no writer. Every valid record with
/// seq > `after_seq` is passed to `f` in order, with its seq.
///
/// Validation is the same as [`Wal::open`]'s, except that the first segment
/// may start at any seq (the records before it were trimmed after a
/// snapshot) and an invalid tail of the last segment ends the read instead
/// of being truncated (its size is reported in
/// [`ReadStats::torn_tail_bytes`]). A bad record in an earlier segment, or a
/// gap between segments not covered by `after_seq`, is
/// [`WalError::Corrupt`]. Safe to run on the log of a live server: a record
/// being appended reads as a torn tail.
pub fn read_records(
    dir: &Path,
    after_seq: u64,
    mut f: impl FnMut(u64, &[u8]) -> Result<(), String>,
) -> Result<ReadStats, WalError> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(seq) = entry.file_name().to_str().and_then(parse_segment_file_name) {
            files.push((seq, entry.path()));
        }
    }
    files.sort_unstable_by_key(|(seq, _)| *seq);
    let mut out = ReadStats::default();
    let mut replay = ReplayStats::default();
    let mut prev_end: Option<u64> = None;
    for (i, (first_seq, path)) in files.iter().enumerate() {
        let first_seq = *first_seq;
        let is_last = i + 1 == files.len();
        let corrupt = |offset: u64, reason: String| WalError::Corrupt {
            path: path.clone(),
            offset,
            reason,
        };
        if first_seq == 0 {
            return Err(corrupt(0, "segment first seq 0 is invalid".into()));
        }
        if let Some(end) = prev_end {
            if first_seq <= end {
                return Err(corrupt(
                    0,
                    format!("segment starts at seq {first_seq} but the previous one reaches {end}"),
                ));
            }
            if first_seq > end + 1 && first_seq - 1 > after_seq {
                return Err(corrupt(
                    0,
                    format!(
                        "records {}..={} are missing from the log (after_seq {after_seq})",
                        end + 1,
                        first_seq - 1
                    ),
                ));
            }
        }
        let file_len = fs::metadata(path)?.len();
        out.segments += 1;
        out.total_bytes += file_len;
        if !is_last && files[i + 1].0 - 1 <= after_seq {
            prev_end = Some(files[i + 1].0 - 1);
            continue;
        }
        let scan = scan_segment(path, first_seq, after_seq, &mut f, &mut replay)?;
        if let Err(reason) = &scan.header {
            if is_last && scan.header_torn {
                out.torn_tail_bytes += scan.file_len;
                continue;
            }
            return Err(corrupt(0, reason.clone()));
        }
        if let Some((offset, reason)) = &scan.bad {
            if !is_last {
                return Err(corrupt(
                    *offset,
                    format!("{reason} (not the last segment, so this is not a torn tail)"),
                ));
            }
            out.torn_tail_bytes += scan.file_len - offset;
        }
        prev_end = Some(scan.last_seq.unwrap_or(first_seq - 1));
    }
    out.records = replay.records;
    out.last_seq = prev_end.unwrap_or(0);
    out.first_seq = files.first().map(|f| f.0).filter(|&f| out.last_seq >= f);
    Ok(out)
}

struct Scan {
    file_len: u64,
    header: Result<(), String>,
    /// The header is shorter than it should be or all zeros.
    header_torn: bool,
    last_seq: Option<u64>,
    /// First invalid record: offset and reason.
    bad: Option<(u64, String)>,
}

fn scan_segment(
    path: &Path,
    first_seq: u64,
    after_seq: u64,
    replay: &mut ReplayFn<'_>,
    stats: &mut ReplayStats,
) -> Result<Scan, WalError> {
    let file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let mut scan = Scan {
        file_len,
        header: Ok(()),
        header_torn: false,
        last_seq: None,
        bad: None,
    };
    let mut r = BufReader::with_capacity(256 << 10, file);
    if file_len < SEGMENT_HEADER_LEN as u64 {
        let mut head = vec![0u8; file_len as usize];
        r.read_exact(&mut head)?;
        scan.header = Err(format!("segment file is only {file_len} bytes long"));
        scan.header_torn = true;
        return Ok(scan);
    }
    let mut header = [0u8; SEGMENT_HEADER_LEN];
    r.read_exact(&mut header)?;
    if let Err(reason) = check_segment_header(&header, first_seq) {
        scan.header_torn = header.iter().all(|&b| b == 0);
        scan.header = Err(reason);
        return Ok(scan);
    }

    let mut off = SEGMENT_HEADER_LEN as u64;
    let mut expected = first_seq;
    let mut payload = Vec::new();
    let mut rh = [0u8; RECORD_HEADER_LEN];
    while off < file_len {
        let rem = file_len - off;
        if rem < RECORD_HEADER_LEN as u64 {
            scan.bad = Some((off, format!("partial record header ({rem} bytes)")));
            break;
        }
        r.read_exact(&mut rh)?;
        if rh.iter().all(|&b| b == 0) {
            scan.bad = Some((off, "zero-filled bytes instead of a record".into()));
            break;
        }
        let len = u32::from_le_bytes(rh[0..4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(rh[4..8].try_into().unwrap());
        let seq = u64::from_le_bytes(rh[8..16].try_into().unwrap());
        if len > MAX_RECORD_BYTES {
            scan.bad = Some((off, format!("record length {len} exceeds the maximum")));
            break;
        }
        if len as u64 > rem - RECORD_HEADER_LEN as u64 {
            scan.bad = Some((
                off,
                format!(
                    "record length {len} runs past the end of the file ({} bytes left)",
                    rem - RECORD_HEADER_LEN as u64
                ),
            ));
            break;
        }
        if seq != expected {
            scan.bad = Some((off, format!("expected seq {expected}, found {seq}")));
            break;
        }
        payload.resize(len, 0);
        r.read_exact(&mut payload)?;
        if record_crc(&rh[0..4], &rh[8..16], &payload) != crc {
            scan.bad = Some((off, format!("checksum mismatch in record seq {seq}")));
            break;
        }
        if seq > after_seq {
            replay(seq, &payload).map_err(|message| WalError::Replay { seq, message })?;
            stats.records += 1;
        }
        scan.last_seq = Some(seq);
        expected += 1;
        off += (RECORD_HEADER_LEN + len) as u64;
    }
    Ok(scan)
}

#[derive(Debug, Default)]
struct Intact {
    count: u64,
    first_seq: u64,
    last_seq: u64,
}

/// Diagnostics for a truncated tail: looks at every byte offset from `from` for
/// records that pass their checksum and carry a plausible seq (>= `min_seq`).
fn count_intact_records(path: &Path, from: u64, min_seq: u64) -> io::Result<Intact> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(from))?;
    let mut tail = Vec::new();
    file.take(MAX_TAIL_DIAGNOSTIC_BYTES)
        .read_to_end(&mut tail)?;
    let n = tail.len();
    let max_seq = min_seq.saturating_add((n / RECORD_HEADER_LEN) as u64);
    let mut found = Intact::default();
    let mut i = 0;
    while i + RECORD_HEADER_LEN <= n {
        let len = u32::from_le_bytes(tail[i..i + 4].try_into().unwrap()) as usize;
        let seq = u64::from_le_bytes(tail[i + 8..i + 16].try_into().unwrap());
        let end = i + RECORD_HEADER_LEN + len;
        if len <= MAX_RECORD_BYTES && end <= n && (min_seq..=max_seq).contains(&seq) {
            let crc = u32::from_le_bytes(tail[i + 4..i + 8].try_into().unwrap());
            if record_crc(&tail[i..i + 4], &tail[i + 8..i + 16], &tail[i + 16..end]) == crc {
                if found.count == 0 {
                    found.first_seq = seq;
                }
                found.count += 1;
                found.last_seq = seq;
                i = end;
                continue;
            }
        }
        i += 1;
    }
    Ok(found)
}

/// The writer thread's state.
struct Writer {
    shared: Arc<Shared>,
    active: Option<ActiveSegment>,
    spare: Vec<u8>,
    last_sync: Instant,
    /// Bytes written to the active segment since its last fsync.
    dirty: bool,
    written_seq: u64,
}

/// Poisons the log if the writer thread ends without closing (i.e. panics).
struct ExitGuard(Arc<Shared>);

impl Drop for ExitGuard {
    fn drop(&mut self) {
        if self.0.status.load(Ordering::Acquire) == STATUS_OPEN {
            self.0
                .fail("wal writer thread exited unexpectedly".to_string());
        }
    }
}

impl Writer {
    fn run(mut self) {
        let _guard = ExitGuard(Arc::clone(&self.shared));
        let policy = self.shared.cfg.fsync;
        loop {
            let (mut batch, records, closing) = self.next_batch();
            if !batch.is_empty() {
                if let Err(e) = self.write_batch(&mut batch, records) {
                    self.shared.fail(format!("write failed: {e}"));
                    return;
                }
            }
            if policy != FsyncPolicy::Always
                && self.written_seq > self.shared.durable.load(Ordering::Relaxed)
            {
                self.shared.publish_durable(self.written_seq);
            }
            let sync = closing
                || match policy {
                    FsyncPolicy::Always => true,
                    FsyncPolicy::Interval(d) => self.last_sync.elapsed() >= d,
                    FsyncPolicy::Never => false,
                };
            if sync && self.dirty {
                if let Err(e) = self.sync_active() {
                    self.shared.fail(format!("fsync failed: {e}"));
                    return;
                }
            }
            if policy == FsyncPolicy::Always
                && self.written_seq > self.shared.durable.load(Ordering::Relaxed)
            {
                self.shared.publish_durable(self.written_seq);
            }
            self.recycle(batch);
            if closing {
                self.active = None;
                self.shared.status.store(STATUS_CLOSED, Ordering::Release);
                self.shared.progress.send_modify(|_| {});
                return;
            }
        }
    }

    /// Waits for appended records (or closing, or a due interval fsync) and takes
    /// the whole buffer. Returns (bytes, record count, closing).
    fn next_batch(&mut self) -> (Vec<u8>, u64, bool) {
        let shared = &*self.shared;
        let mut st = shared.state.lock();
        while st.buf.is_empty() && !st.closing {
            let now = Instant::now();
            let mut wake_at = now + IDLE_POLL;
            if let FsyncPolicy::Interval(d) = shared.cfg.fsync {
                if self.dirty {
                    let due = self.last_sync + d;
                    if due <= now {
                        return (Vec::new(), 0, false);
                    }
                    wake_at = wake_at.min(due);
                }
            }
            shared.writer_parked.store(true, Ordering::SeqCst);
            shared.writer_cv.wait_until(&mut st, wake_at);
            shared.writer_parked.store(false, Ordering::SeqCst);
        }
        let batch = std::mem::replace(&mut st.buf, std::mem::take(&mut self.spare));
        let records = std::mem::take(&mut st.records);
        (batch, records, st.closing)
    }

    fn recycle(&mut self, mut batch: Vec<u8>) {
        if batch.capacity() <= MAX_SPARE_CAPACITY {
            batch.clear();
            self.spare = batch;
        } else {
            self.spare = Vec::with_capacity(INITIAL_BUFFER_CAPACITY);
        }
    }

    /// Seals the records of `batch` and writes them, rotating segments as needed.
    fn write_batch(&mut self, batch: &mut [u8], records: u64) -> io::Result<()> {
        if self.shared.fail_next_write.swap(false, Ordering::SeqCst) {
            return Err(io::Error::other("injected write failure"));
        }
        let segment_bytes = self.shared.cfg.segment_bytes;
        let mut pos = 0;
        while pos < batch.len() {
            let first_seq = u64::from_le_bytes(batch[pos + 8..pos + 16].try_into().unwrap());
            if self
                .active
                .as_ref()
                .is_none_or(|a| a.bytes >= segment_bytes)
            {
                self.rotate(first_seq)?;
            }
            let active = self.active.as_mut().expect("active segment after rotate");
            let room = segment_bytes.saturating_sub(active.bytes);
            let start = pos;
            let mut last_seq = first_seq;
            // Take records until the segment passes `segment_bytes` (at least one).
            while pos < batch.len() && (pos == start || ((pos - start) as u64) < room) {
                let len = u32::from_le_bytes(batch[pos..pos + 4].try_into().unwrap()) as usize;
                let end = pos + RECORD_HEADER_LEN + len;
                let rec = &mut batch[pos..end];
                let crc = record_crc(&rec[0..4], &rec[8..16], &rec[16..]);
                rec[4..8].copy_from_slice(&crc.to_le_bytes());
                last_seq = u64::from_le_bytes(rec[8..16].try_into().unwrap());
                pos = end;
            }
            active.file.write_all(&batch[start..pos])?;
            let n = (pos - start) as u64;
            active.bytes += n;
            self.shared.total_bytes.fetch_add(n, Ordering::Relaxed);
            self.dirty = true;
            self.written_seq = last_seq;
        }
        metrics::counter!(METRIC_BYTES_WRITTEN).increment(batch.len() as u64);
        metrics::counter!(METRIC_RECORDS).increment(records);
        Ok(())
    }

    fn sync_active(&mut self) -> io::Result<()> {
        if let Some(active) = &self.active {
            let t = Instant::now();
            active.file.sync_data()?;
            metrics::histogram!(METRIC_FSYNC_SECONDS).record(t.elapsed().as_secs_f64());
            self.shared.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        self.dirty = false;
        self.last_sync = Instant::now();
        self.shared
            .synced
            .store(self.written_seq, Ordering::Release);
        Ok(())
    }

    /// Syncs and closes the active segment, then creates the one starting at
    /// `first_seq` (header written and synced in a temp file, renamed, directory
    /// synced).
    fn rotate(&mut self, first_seq: u64) -> io::Result<()> {
        if self.active.is_some() && self.dirty {
            self.sync_active()?;
        }
        let old_bytes = self.active.take().map(|a| a.bytes);
        let dir = &self.shared.cfg.dir;
        let path = dir.join(segment_file_name(first_seq));
        let tmp = dir.join(format!("{}.tmp", segment_file_name(first_seq)));
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        file.write_all(&segment_header(first_seq))?;
        file.sync_all()?;
        fs::rename(&tmp, &path)?;
        sync_dir(dir)?;
        let header_len = SEGMENT_HEADER_LEN as u64;
        {
            let mut segs = self.shared.segments.lock();
            if let (Some(bytes), Some(last)) = (old_bytes, segs.last_mut()) {
                last.bytes = bytes;
            }
            segs.push(SegmentMeta {
                first_seq,
                path: path.clone(),
                bytes: header_len,
            });
            metrics::gauge!(METRIC_SEGMENTS).set(segs.len() as f64);
        }
        self.shared
            .total_bytes
            .fetch_add(header_len, Ordering::Relaxed);
        tracing::debug!(file = %path.display(), first_seq, "wal: started segment");
        self.active = Some(ActiveSegment {
            file,
            bytes: header_len,
        });
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;

    fn cfg(dir: &Path, fsync: FsyncPolicy, segment_bytes: u64) -> WalConfig {
        WalConfig {
            dir: dir.to_path_buf(),
            fsync,
            segment_bytes,
        }
    }

    type Records = Vec<(u64, Vec<u8>)>;

    fn open_collect(cfg: WalConfig, after: u64) -> Result<(Wal, ReplayStats, Records), WalError> {
        let mut got = Vec::new();
        let (wal, stats) = Wal::open(cfg, after, |seq, p| {
            got.push((seq, p.to_vec()));
            Ok(())
        })?;
        Ok((wal, stats, got))
    }

    fn segment_paths(dir: &Path) -> Vec<PathBuf> {
        list_segments(dir)
            .unwrap()
            .into_iter()
            .map(|(_, p)| p)
            .collect()
    }

    /// Collects the fields of WARN events emitted on this thread.
    struct WarnCapture(Arc<Mutex<Vec<String>>>);

    struct FieldText<'a>(&'a mut String);

    impl tracing::field::Visit for FieldText<'_> {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            let _ = write!(self.0, "{}={:?} ", field.name(), value);
        }
    }

    impl tracing::Subscriber for WarnCapture {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            if *event.metadata().level() == tracing::Level::WARN {
                let mut text = String::new();
                event.record(&mut FieldText(&mut text));
                self.0.lock().push(text);
            }
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    fn with_warnings<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
        let warnings = Arc::new(Mutex::new(Vec::new()));
        let out = tracing::subscriber::with_default(WarnCapture(Arc::clone(&warnings)), f);
        let warnings = warnings.lock().clone();
        (out, warnings)
    }

    #[test]
    fn wal_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Wal>();
    }

    #[test]
    fn record_encoding_layout() {
        let mut buf = Vec::new();
        encode_record(&mut buf, 7, b"hello");
        assert_eq!(buf.len(), RECORD_HEADER_LEN + 5);
        assert_eq!(&buf[0..4], &5u32.to_le_bytes());
        assert_eq!(&buf[8..16], &7u64.to_le_bytes());
        assert_eq!(&buf[16..], b"hello");
        let crc = u32::from_le_bytes(buf[4..8].try_into().unwrap());
        assert_eq!(crc, record_crc(&buf[0..4], &buf[8..16], &buf[16..]));
        // An all-zero record header never validates.
        assert_ne!(record_crc(&[0; 4], &[0; 8], &[]), 0);
    }

    #[test]
    fn segment_header_and_names() {
        let h = segment_header(42);
        assert!(check_segment_header(&h, 42).is_ok());
        assert!(
            check_segment_header(&h, 43)
                .unwrap_err()
                .contains("file name")
        );
        let mut bad = h;
        bad[17] ^= 1;
        assert!(
            check_segment_header(&bad, 42)
                .unwrap_err()
                .contains("checksum")
        );
        assert!(check_segment_header(&[0; SEGMENT_HEADER_LEN], 42).is_err());
        assert_eq!(segment_file_name(42), "wal-00000000000000000042.log");
        assert_eq!(
            parse_segment_file_name(&segment_file_name(u64::MAX)),
            Some(u64::MAX)
        );
        assert_eq!(parse_segment_file_name("wal-42.log"), None);
        assert_eq!(
            parse_segment_file_name("wal-0000000000000000004x.log"),
            None
        );
        assert_eq!(
            parse_segment_file_name("wal-00000000000000000042.log.tmp"),
            None
        );
    }

    #[test]
    fn torn_tail_is_truncated_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
        let (wal, _, _) = open_collect(c.clone(), 0).unwrap();
        for i in 0..10u8 {
            wal.append(&[i; 40]);
        }
        wal.close().unwrap();
        drop(wal);
        let path = segment_paths(dir.path()).pop().unwrap();
        let len = fs::metadata(&path).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 7)
            .unwrap();

        let (opened, warnings) = with_warnings(|| open_collect(c.clone(), 0));
        let (wal, stats, got) = opened.unwrap();
        assert_eq!(got.len(), 9);
        assert_eq!(stats.truncated_bytes, (RECORD_HEADER_LEN + 40 - 7) as u64);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let w = &warnings[0];
        assert!(w.contains(&path.display().to_string()), "{w}");
        assert!(
            w.contains(&format!("offset={}", len - (RECORD_HEADER_LEN + 40) as u64)),
            "{w}"
        );
        assert!(
            w.contains(&format!("dropped_bytes={}", RECORD_HEADER_LEN + 40 - 7)),
            "{w}"
        );
        assert_eq!(wal.append(b"next"), 10);
        wal.close().unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), len - 40 + 4);
    }

    #[test]
    fn corruption_followed_by_intact_records_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
        let (wal, _, _) = open_collect(c.clone(), 0).unwrap();
        for i in 0..10u8 {
            wal.append(&[i; 40]);
        }
        drop(wal);
        let path = segment_paths(dir.path()).pop().unwrap();
        let mut bytes = fs::read(&path).unwrap();
        // Corrupt the payload of record 4 (seq 4): records 5..=10 look intact.
        let rec = RECORD_HEADER_LEN + 40;
        bytes[SEGMENT_HEADER_LEN + 3 * rec + 20] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        let (opened, warnings) = with_warnings(|| open_collect(c.clone(), 0));
        let (_wal, stats, got) = opened.unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(stats.last_seq, 3);
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("intact_records_dropped=6"),
            "{}",
            warnings[0]
        );
        assert!(
            warnings[0].contains("intact_first_seq=5"),
            "{}",
            warnings[0]
        );
    }

    #[test]
    fn intact_record_scan_skips_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tail");
        let mut bytes = vec![0xAB; 13];
        encode_record(&mut bytes, 100, b"abc");
        bytes.extend_from_slice(&[0; 5]);
        encode_record(&mut bytes, 101, b"defg");
        encode_record(&mut bytes, 5, b"too old");
        fs::write(&path, &bytes).unwrap();
        let found = count_intact_records(&path, 0, 99).unwrap();
        assert_eq!(
            (found.count, found.first_seq, found.last_seq),
            (2, 100, 101)
        );
        let found = count_intact_records(&path, 0, 1000).unwrap();
        assert_eq!(found.count, 0);
    }

    #[test]
    fn absurd_length_is_rejected_without_allocating() {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
        let (wal, _, _) = open_collect(c.clone(), 0).unwrap();
        wal.append(b"one");
        drop(wal);
        let path = segment_paths(dir.path()).pop().unwrap();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        let mut rec = Vec::new();
        rec.extend_from_slice(&u32::MAX.to_le_bytes());
        rec.extend_from_slice(&[1, 2, 3, 4]);
        rec.extend_from_slice(&2u64.to_le_bytes());
        f.write_all(&rec).unwrap();
        drop(f);
        let (opened, warnings) = with_warnings(|| open_collect(c.clone(), 0));
        let (_wal, stats, got) = opened.unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(stats.truncated_bytes, 16);
        assert!(
            warnings[0].contains("exceeds the maximum"),
            "{}",
            warnings[0]
        );
    }

    #[test]
    fn header_only_last_segment_is_reused_and_zero_header_removed() {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
        let (wal, _, _) = open_collect(c.clone(), 0).unwrap();
        wal.append(b"a");
        wal.append(b"b");
        drop(wal);
        // A segment that was created but never received records.
        fs::write(dir.path().join(segment_file_name(3)), segment_header(3)).unwrap();
        let (wal, stats, got) = open_collect(c.clone(), 0).unwrap();
        assert_eq!((got.len(), stats.segments, stats.last_seq), (2, 2, 2));
        assert_eq!(wal.append(b"c"), 3);
        drop(wal);
        assert_eq!(segment_paths(dir.path()).len(), 2);

        // A zero-filled header in the last segment counts as torn: removed.
        fs::write(dir.path().join(segment_file_name(4)), [0u8; 100]).unwrap();
        let (wal, stats, got) = open_collect(c.clone(), 0).unwrap();
        assert_eq!(
            (got.len(), stats.segments, stats.truncated_bytes),
            (3, 2, 100)
        );
        assert_eq!(wal.append(b"d"), 4);
        drop(wal);
        let (_wal, _, got) = open_collect(c.clone(), 0).unwrap();
        assert_eq!(got.last().unwrap(), &(4, b"d".to_vec()));
    }

    #[test]
    fn garbage_header_in_last_segment_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
        fs::write(dir.path().join(segment_file_name(1)), [0x55u8; 64]).unwrap();
        let err = open_collect(c, 0).err().unwrap();
        assert!(matches!(err, WalError::Corrupt { .. }), "{err}");
    }

    #[test]
    fn leftover_temp_segment_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join(format!("{}.tmp", segment_file_name(1)));
        fs::write(&tmp, [1, 2, 3]).unwrap();
        fs::write(dir.path().join("unrelated.txt"), b"x").unwrap();
        let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
        let (_wal, stats, _) = open_collect(c, 0).unwrap();
        assert_eq!(stats, ReplayStats::default());
        assert!(!tmp.exists());
        assert!(dir.path().join("unrelated.txt").exists());
    }

    #[test]
    fn batch_splits_across_segments_at_record_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        // Tiny segments: every record passes the limit, so one record per segment.
        let c = cfg(dir.path(), FsyncPolicy::Never, 1);
        let (wal, _, _) = open_collect(c.clone(), 0).unwrap();
        for i in 0..5u8 {
            wal.append(&[i; 3]);
        }
        wal.close().unwrap();
        assert_eq!(wal.segment_count(), 5);
        let expected = 5 * (SEGMENT_HEADER_LEN + RECORD_HEADER_LEN + 3) as u64;
        assert_eq!(wal.size_bytes(), expected);
        drop(wal);
        let (wal, stats, got) = open_collect(c, 0).unwrap();
        assert_eq!(stats.segments, 5);
        assert_eq!(wal.size_bytes(), expected);
        assert_eq!(
            got.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 5]
        );
    }

    #[test]
    fn idle_writer_picks_up_records_nobody_waits_for() {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
        let (wal, _, _) = open_collect(c, 0).unwrap();
        let seq = wal.append(b"lonely");
        let mut rx = wal.shared.progress.subscribe();
        // No kick: the writer's idle poll must write it.
        block_on(async {
            while wal.durable_seq() < seq {
                rx.changed().await.unwrap();
            }
        });
        assert_eq!(wal.durable_seq(), seq);
    }

    #[test]
    fn replay_callback_error_aborts_open() {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), FsyncPolicy::Never, DEFAULT_SEGMENT_BYTES);
        let (wal, _, _) = open_collect(c.clone(), 0).unwrap();
        wal.append(b"a");
        wal.append(b"b");
        drop(wal);
        let err = Wal::open(
            c,
            0,
            |seq, _| if seq == 2 { Err("boom".into()) } else { Ok(()) },
        )
        .err()
        .unwrap();
        assert!(
            matches!(err, WalError::Replay { seq: 2, ref message } if message == "boom"),
            "{err}"
        );
    }

    #[test]
    fn read_records_never_modifies_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), FsyncPolicy::Never, 256);
        let (wal, _, _) = open_collect(c.clone(), 0).unwrap();
        for i in 0..40u32 {
            wal.append(format!("record-{i:03}").as_bytes());
        }
        wal.close().unwrap();
        drop(wal);
        let segs = segment_paths(dir.path());
        assert!(segs.len() > 3, "small segments rotate: {segs:?}");
        // A torn tail on the last segment and an unfinished segment file.
        let last = segs.last().unwrap().clone();
        OpenOptions::new()
            .append(true)
            .open(&last)
            .unwrap()
            .write_all(&[7u8; 11])
            .unwrap();
        let tmp = dir.path().join(format!("{}.tmp", segment_file_name(999)));
        fs::write(&tmp, b"partial").unwrap();
        let sizes = |paths: &[PathBuf]| -> Vec<u64> {
            paths
                .iter()
                .map(|p| fs::metadata(p).unwrap().len())
                .collect()
        };
        let before = sizes(&segs);

        let mut got = Vec::new();
        let stats = read_records(dir.path(), 0, |seq, p| {
            got.push((seq, String::from_utf8(p.to_vec()).unwrap()));
            Ok(())
        })
        .unwrap();
        assert_eq!(got.len(), 40);
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, (seq, text))| *seq == i as u64 + 1 && *text == format!("record-{i:03}"))
        );
        assert_eq!(stats.records, 40);
        assert_eq!(stats.first_seq, Some(1));
        assert_eq!(stats.last_seq, 40);
        assert_eq!(stats.torn_tail_bytes, 11);
        assert_eq!(stats.segments, segs.len());
        assert_eq!(sizes(&segs), before, "nothing truncated");
        assert!(tmp.exists(), "unfinished segment left alone");

        // after_seq skips records; a trimmed log starts later.
        let mut seqs = Vec::new();
        read_records(dir.path(), 30, |seq, _| {
            seqs.push(seq);
            Ok(())
        })
        .unwrap();
        assert_eq!(seqs, (31..=40).collect::<Vec<_>>());
        fs::remove_file(&segs[0]).unwrap();
        let mut seqs = Vec::new();
        let stats = read_records(dir.path(), 0, |seq, _| {
            seqs.push(seq);
            Ok(())
        })
        .unwrap();
        assert_eq!(stats.first_seq, Some(seqs[0]));
        assert!(seqs[0] > 1 && *seqs.last().unwrap() == 40);

        // A gap in the middle is corruption; a callback error aborts.
        fs::remove_file(&segs[2]).unwrap();
        assert!(matches!(
            read_records(dir.path(), 0, |_, _| Ok(())),
            Err(WalError::Corrupt { .. })
        ));
        let err = read_records(dir.path(), 0, |_, _| Err("stop".into())).unwrap_err();
        assert!(matches!(err, WalError::Replay { .. }), "{err}");
    }
}
