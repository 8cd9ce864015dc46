//! The writer: group commit, sync per policy, segment rotation, and the
//! stall-and-retry path after a failed write (see the module docs of
//! [`super`]). Its state lives in [`Shared::core`]; the writer thread
//! ([`run`]) holds it except while idle, and an appender that finds it free
//! may write a small batch itself ([`Writer::write_inline`]).

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::format::{
    SEGMENT_HEADER_LEN, record_seq, seal_record, segment_file_name, segment_header,
    temp_segment_file_name,
};
use super::syncer::{Done, Job, Syncer};
use super::{
    FsyncPolicy, METRIC_BYTES_WRITTEN, METRIC_FSYNC_SECONDS, METRIC_RECORDS, METRIC_SEGMENTS,
    STATUS_CLOSED, SegmentMeta, Shared,
};
use crate::store::storage::StorageFile;

/// How long the writer sleeps when idle before it looks at the buffer again.
const IDLE_POLL: Duration = Duration::from_millis(10);
/// A drained buffer larger than this is freed rather than kept as the spare.
const MAX_SPARE_CAPACITY: usize = 16 << 20;
const INITIAL_BUFFER_CAPACITY: usize = 64 << 10;
/// Delays between attempts to write again after a failure.
const FIRST_RETRY: Duration = Duration::from_millis(50);
const MAX_RETRY: Duration = Duration::from_secs(2);
/// Most bytes an appender writes itself ([`Writer::write_inline`]): one
/// `write(2)` of this much to the page cache takes microseconds, which a
/// runtime thread can afford; larger batches go to the writer thread.
pub(super) const INLINE_MAX_BYTES: usize = 64 << 10;
/// The longest the writer holds a group back under
/// [`FsyncPolicy::Always`] waiting for more requests ([`Writer::gather`]).
const MAX_GATHER: Duration = Duration::from_millis(2);

/// What the writer thread does after a [`Writer::turn`].
enum Turn {
    /// Take another turn at once.
    Again,
    /// Nothing to do: sleep until then, new records or a kick.
    Idle(Instant),
    /// Records wait, but fewer requests than the last group: sleep until
    /// then or until the group is complete ([`Writer::gather`]).
    Gather(Instant),
    /// The log is closed (or failed while closing): the thread ends.
    Closed,
}

/// The segment being appended to.
pub(crate) struct Active {
    pub file: Box<dyn StorageFile>,
    pub path: PathBuf,
    /// Bytes written (as far as the writer knows).
    pub bytes: u64,
    /// Bytes known to be synced.
    pub synced_bytes: u64,
}

pub(super) struct Writer {
    shared: Arc<Shared>,
    active: Option<Active>,
    spare: Vec<u8>,
    last_sync: Instant,
    /// Sealed batches whose bytes from the given offset on are in the active
    /// segment but not yet synced; kept to be written again after a failure.
    unsynced: Vec<(Vec<u8>, usize)>,
    /// While stalled: sealed records not yet synced anywhere.
    retry: Vec<u8>,
    retry_delay: Duration,
    next_retry: Instant,
    written_seq: u64,
    /// The sync thread (only under [`FsyncPolicy::Interval`]).
    syncer: Option<Syncer>,
    /// Under [`FsyncPolicy::Always`]: requests the next group waits for,
    /// how long at most, and since when it is held back.
    group: u64,
    hold: Duration,
    held_since: Option<Instant>,
}

/// Fails the log if the writer thread ends without closing (i.e. panics),
/// and drops the writer's state (its files, its sync thread and its
/// handle on [`Shared`]) when the thread ends.
struct ExitGuard(Arc<Shared>);

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let status = self.0.status.load(Ordering::Acquire);
        if status != STATUS_CLOSED && status != super::STATUS_FAILED {
            self.0
                .fail("wal writer thread exited unexpectedly".to_string());
        }
        let core = self.0.core.lock().take();
        drop(core);
    }
}

/// The writer thread (`hotrank-wal`): turns of the writer, holding its
/// state, until the log is closed; idle waits without it.
pub(super) fn run(shared: Arc<Shared>) {
    let _guard = ExitGuard(Arc::clone(&shared));
    loop {
        let turn = match shared.core.lock().as_mut() {
            Some(writer) => writer.turn(),
            None => return,
        };
        match turn {
            Turn::Again => {}
            Turn::Idle(until) => idle(&shared, until),
            Turn::Gather(until) => gather(&shared, until),
            Turn::Closed => return,
        }
    }
}

/// Sleeps until `until`, a kick, or records an appender has not written
/// itself (or closing); any wake-up ends it, the next turn looks again.
fn idle(shared: &Shared, until: Instant) {
    let mut st = shared.state.lock();
    if st.buf.is_empty() && !st.closing {
        shared.writer_parked.store(true, Ordering::SeqCst);
        shared.writer_cv.wait_until(&mut st, until);
        shared.writer_parked.store(false, Ordering::SeqCst);
    }
}

/// Sleeps until `until`, the close, or a request that completes the group
/// ([`Shared::arrived`]); the next turn looks again.
fn gather(shared: &Shared, until: Instant) {
    let mut st = shared.state.lock();
    shared.writer_parked.store(true, Ordering::SeqCst);
    let target = shared.gather_target.load(Ordering::SeqCst);
    if !st.closing && shared.arrivals.load(Ordering::SeqCst) < target {
        shared.writer_cv.wait_until(&mut st, until);
    }
    shared.writer_parked.store(false, Ordering::SeqCst);
    shared.gather_target.store(0, Ordering::SeqCst);
}

/// Fills in the checksums of every record in `batch`.
fn seal_all(batch: &mut [u8]) {
    let mut pos = 0;
    while pos < batch.len() {
        pos += seal_record(&mut batch[pos..]).0;
    }
}

impl Writer {
    pub(super) fn new(
        shared: Arc<Shared>,
        active: Option<Active>,
        durable: u64,
    ) -> io::Result<Self> {
        let syncer = match shared.cfg.fsync {
            FsyncPolicy::Interval(_) => Some(Syncer::start(Arc::clone(&shared))?),
            FsyncPolicy::Always | FsyncPolicy::Never => None,
        };
        Ok(Writer {
            shared,
            active,
            spare: Vec::with_capacity(INITIAL_BUFFER_CAPACITY),
            last_sync: Instant::now(),
            unsynced: Vec::new(),
            retry: Vec::new(),
            retry_delay: FIRST_RETRY,
            next_retry: Instant::now(),
            written_seq: durable,
            syncer,
            group: 0,
            hold: Duration::ZERO,
            held_since: None,
        })
    }

    fn stalled(&self) -> bool {
        !self.retry.is_empty()
            || self.shared.status.load(Ordering::Acquire) == super::STATUS_STALLED
    }

    /// One turn of the writer thread: a retry while stalled, or the
    /// outcome of a background sync, the next batch written and the sync
    /// the policy asks for.
    fn turn(&mut self) -> Turn {
        let policy = self.shared.cfg.fsync;
        if self.stalled() {
            let closing = self.wait_for_retry();
            match self.write_again() {
                Ok(()) => {
                    let seq = self
                        .written_seq
                        .max(self.shared.durable.load(Ordering::Relaxed));
                    self.shared.publish_durable(seq);
                    self.shared.unstall();
                }
                Err(e) if closing => {
                    self.shared.fail(format!(
                        "closed while unable to write ({e}); records not yet durable are lost"
                    ));
                    return Turn::Closed;
                }
                Err(e) => {
                    self.shared.stall(format!("write failed again: {e}"));
                    self.retry_delay = (self.retry_delay * 2).min(MAX_RETRY);
                    self.next_retry = Instant::now() + self.retry_delay;
                }
            }
            return Turn::Again;
        }
        if let Err(e) = self.collect_sync() {
            self.stall(e, &[]);
            return Turn::Again;
        }
        let (batch, records, closing) = match self.next_batch() {
            Ok(next) => next,
            Err(turn) => return turn,
        };
        if !batch.is_empty() && !self.write_batch(batch, records) {
            return Turn::Again;
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
        let started = Instant::now();
        let result = if !sync || self.unsynced.is_empty() {
            Ok(())
        } else if !closing && self.syncer.is_some() {
            self.sync_in_background()
        } else {
            self.sync_active()
        };
        if let Err(e) = result {
            self.stall(e, &[]);
            return Turn::Again;
        }
        if policy == FsyncPolicy::Always
            && self.written_seq > self.shared.durable.load(Ordering::Relaxed)
        {
            self.shared.publish_durable(self.written_seq);
            self.plan_group(started.elapsed());
        }
        if closing {
            self.active = None;
            self.shared.status.store(STATUS_CLOSED, Ordering::Release);
            self.shared.progress.send_modify(|_| {});
            return Turn::Closed;
        }
        Turn::Again
    }

    /// Seals a batch taken from the appenders, writes it and keeps it until
    /// it is synced; stalls if that fails. Returns whether it was written.
    fn write_batch(&mut self, mut batch: Vec<u8>, records: u64) -> bool {
        seal_all(&mut batch);
        match self.write_sealed(&batch) {
            Ok(start) => {
                metrics::counter!(METRIC_BYTES_WRITTEN).increment(batch.len() as u64);
                metrics::counter!(METRIC_RECORDS).increment(records);
                self.unsynced.push((batch, start));
                true
            }
            Err((e, from)) => {
                self.stall(e, &batch[from..]);
                false
            }
        }
    }

    /// The leader's write of [`Shared::write_inline`]: everything appended
    /// so far, written on the caller's thread and published durable, if
    /// that is one quick `write(2)`: the log is not stalled or closing, a
    /// segment is open and the bytes fit in it (no rotation), and they are
    /// at most [`INLINE_MAX_BYTES`]. Otherwise the writer thread takes them.
    /// Under [`FsyncPolicy::Interval`] a sync that is due is handed to the
    /// sync thread, as the writer thread does. A failed write stalls the
    /// log exactly as the writer thread's does (and, like it, first waits
    /// for a background sync that is out).
    pub(super) fn write_inline(&mut self) {
        if self.stalled() {
            return;
        }
        let Some(active) = &self.active else {
            return;
        };
        let room = self.shared.cfg.segment_bytes.saturating_sub(active.bytes);
        let (batch, records) = {
            let mut st = self.shared.state.lock();
            let len = st.buf.len();
            if len == 0 || st.closing || len > INLINE_MAX_BYTES || len as u64 > room {
                return;
            }
            // A copy of just these bytes: the appenders keep their buffer,
            // and the batch held until the next sync is no larger than it.
            let batch = st.buf.clone();
            st.buf.clear();
            (batch, std::mem::take(&mut st.records))
        };
        if !self.write_batch(batch, records) {
            return;
        }
        if self.written_seq > self.shared.durable.load(Ordering::Relaxed) {
            self.shared.publish_durable(self.written_seq);
        }
        if let FsyncPolicy::Interval(d) = self.shared.cfg.fsync
            && self.last_sync.elapsed() >= d
            && let Err(e) = self.sync_in_background()
        {
            self.stall(e, &[]);
        }
    }

    /// After a sync under [`FsyncPolicy::Always`] that took `took`: the
    /// next group waits for as many requests as this one covered plus
    /// those already waiting for the next, for at most `took` (and
    /// [`MAX_GATHER`]). Without it, requests answered by one sync come
    /// back while the next is under way, and the clients split into two
    /// groups that take turns, each sync covering half of them.
    fn plan_group(&mut self, took: Duration) {
        let waiting = self.shared.arrivals.load(Ordering::SeqCst);
        self.group = self.group.saturating_add(waiting);
        self.hold = took.min(MAX_GATHER);
    }

    /// Whether to hold the records back for more requests ([`Turn::Gather`]
    /// until when), under [`FsyncPolicy::Always`]: fewer requests wait
    /// than the planned group, and the hold has not run out.
    fn gather(&mut self) -> Option<Instant> {
        if self.shared.cfg.fsync != FsyncPolicy::Always || self.group <= 1 {
            return None;
        }
        let target = self.group;
        self.shared.gather_target.store(target, Ordering::SeqCst);
        if self.shared.arrivals.load(Ordering::SeqCst) >= target {
            self.shared.gather_target.store(0, Ordering::SeqCst);
            return None;
        }
        let now = Instant::now();
        let until = *self.held_since.get_or_insert(now) + self.hold;
        if now >= until {
            self.shared.gather_target.store(0, Ordering::SeqCst);
            return None;
        }
        Some(until)
    }

    /// Takes the whole buffer if records were appended (or the log is
    /// closing): (bytes, record count, closing); an empty batch if a
    /// background sync's outcome or an interval sync is due; otherwise
    /// the turn to take instead: idle until when to look again at the
    /// latest, or gather a group ([`Writer::gather`]).
    fn next_batch(&mut self) -> Result<(Vec<u8>, u64, bool), Turn> {
        // The appenders' next buffer: the spare, or a fresh one while the
        // spare is still held unsynced (allocated here, outside their lock,
        // so they do not grow it record by record).
        if self.spare.capacity() == 0 {
            self.spare = Vec::with_capacity(INITIAL_BUFFER_CAPACITY);
        }
        let mut st = self.shared.state.lock();
        if st.buf.is_empty() && !st.closing {
            let now = Instant::now();
            let mut wake_at = now + IDLE_POLL;
            if self.syncer.as_ref().is_some_and(Syncer::finished) {
                // The background sync's outcome, to collect.
                return Ok((Vec::new(), 0, false));
            }
            if let FsyncPolicy::Interval(d) = self.shared.cfg.fsync
                && !self.unsynced.is_empty()
                && !self.syncer.as_ref().is_some_and(Syncer::pending)
            {
                let due = self.last_sync + d;
                if due <= now {
                    return Ok((Vec::new(), 0, false));
                }
                wake_at = wake_at.min(due);
            }
            return Err(Turn::Idle(wake_at));
        }
        if !st.closing {
            drop(st);
            if let Some(until) = self.gather() {
                return Err(Turn::Gather(until));
            }
            st = self.shared.state.lock();
        }
        self.held_since = None;
        if self.shared.cfg.fsync == FsyncPolicy::Always {
            self.group = self.shared.arrivals.swap(0, Ordering::SeqCst);
        }
        let spare = std::mem::take(&mut self.spare);
        let batch = std::mem::replace(&mut st.buf, spare);
        let records = std::mem::take(&mut st.records);
        Ok((batch, records, st.closing))
    }

    /// Sleeps until the next retry is due or the log is closing; returns
    /// whether it is closing.
    fn wait_for_retry(&mut self) -> bool {
        let shared = &*self.shared;
        let mut st = shared.state.lock();
        while !st.closing && Instant::now() < self.next_retry {
            shared.writer_parked.store(true, Ordering::SeqCst);
            shared.writer_cv.wait_until(&mut st, self.next_retry);
            shared.writer_parked.store(false, Ordering::SeqCst);
        }
        st.closing
    }

    /// A write or sync failed: keep every record not yet synced (the active
    /// segment's unsynced batches, then `tail`, not yet written) for
    /// [`Writer::write_again`].
    fn stall(&mut self, e: io::Error, tail: &[u8]) {
        // A background sync that succeeded meanwhile covers its batches;
        // one that failed leaves them unsynced, as this failure does.
        let _ = self.settle_sync();
        for (batch, start) in self.unsynced.drain(..) {
            self.retry.extend_from_slice(&batch[start..]);
        }
        self.retry.extend_from_slice(tail);
        self.retry_delay = FIRST_RETRY;
        self.next_retry = Instant::now() + self.retry_delay;
        self.shared.stall(e.to_string());
    }

    /// Cuts the active segment back to its synced length, starts a new
    /// segment at the first kept record, writes every kept record there and
    /// syncs it.
    fn write_again(&mut self) -> io::Result<()> {
        let storage = Arc::clone(&self.shared.cfg.storage);
        if let Some(active) = self.active.take() {
            if let Err(e) = storage.truncate(&active.path, active.synced_bytes) {
                self.active = Some(active);
                return Err(e);
            }
            let cut = active.bytes.saturating_sub(active.synced_bytes);
            self.shared.total_bytes.fetch_sub(cut, Ordering::Relaxed);
            if let Some(meta) = self
                .shared
                .segments
                .lock()
                .iter_mut()
                .rfind(|m| m.path == active.path)
            {
                meta.bytes = active.synced_bytes;
            }
        }
        if self.retry.is_empty() {
            return Ok(());
        }
        let retry = std::mem::take(&mut self.retry);
        let result = match self.write_sealed(&retry) {
            Ok(start) => self.sync_active().map_err(|e| (e, start)),
            Err(failed) => Err(failed),
        };
        match result {
            Ok(()) => {
                self.spare = retry;
                self.spare.clear();
                self.retry_delay = FIRST_RETRY;
                Ok(())
            }
            Err((e, from)) => {
                // Everything before `from` is synced in an earlier segment.
                self.retry = retry[from..].to_vec();
                Err(e)
            }
        }
    }

    /// Writes sealed records, rotating segments as needed. Returns the offset
    /// in `bytes` where the part in the (new) active segment starts; on error,
    /// the offset from which the bytes are not known to be in a synced
    /// segment.
    fn write_sealed(&mut self, bytes: &[u8]) -> Result<usize, (io::Error, usize)> {
        let segment_bytes = self.shared.cfg.segment_bytes;
        let mut pos = 0;
        let mut start = 0;
        while pos < bytes.len() {
            let first_seq = record_seq(&bytes[pos..]);
            if self
                .active
                .as_ref()
                .is_none_or(|a| a.bytes >= segment_bytes)
            {
                // The part of `bytes` in the old segment is synced first.
                self.sync_dirty().map_err(|e| (e, start))?;
                self.rotate(first_seq).map_err(|e| (e, pos))?;
            }
            let active = self.active.as_mut().expect("active segment after rotate");
            let room = segment_bytes.saturating_sub(active.bytes);
            start = pos;
            let mut last_seq = first_seq;
            // Take records until the segment passes `segment_bytes` (at least one).
            while pos < bytes.len() && (pos == start || ((pos - start) as u64) < room) {
                let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
                last_seq = record_seq(&bytes[pos..]);
                pos += super::RECORD_HEADER_LEN + len;
            }
            if let Err(e) = active.file.write_all(&bytes[start..pos]) {
                return Err((e, start));
            }
            let n = (pos - start) as u64;
            active.bytes += n;
            self.shared.total_bytes.fetch_add(n, Ordering::Relaxed);
            self.written_seq = last_seq;
        }
        Ok(start)
    }

    /// Syncs the active segment if it holds unsynced bytes.
    fn sync_dirty(&mut self) -> io::Result<()> {
        match &self.active {
            Some(a) if a.bytes > a.synced_bytes => self.sync_active(),
            _ => Ok(()),
        }
    }

    /// Syncs the active segment on this thread (after the background
    /// sync, if one is out).
    fn sync_active(&mut self) -> io::Result<()> {
        self.settle_sync()?;
        if let Some(active) = &mut self.active {
            let t = Instant::now();
            active.file.sync_data()?;
            metrics::histogram!(METRIC_FSYNC_SECONDS).record(t.elapsed().as_secs_f64());
            self.shared.fsyncs.fetch_add(1, Ordering::Relaxed);
            active.synced_bytes = active.bytes;
        }
        self.last_sync = Instant::now();
        self.shared
            .synced
            .store(self.written_seq, Ordering::Release);
        self.recycle_unsynced(self.unsynced.len());
        Ok(())
    }

    /// Hands a sync of the active segment as written so far to the sync
    /// thread, unless one is out already.
    fn sync_in_background(&mut self) -> io::Result<()> {
        let Some(syncer) = self.syncer.as_mut() else {
            return Ok(());
        };
        if syncer.pending() {
            return Ok(());
        }
        if let Some(active) = &self.active
            && active.bytes > active.synced_bytes
        {
            syncer.submit(Job {
                file: active.file.try_clone()?,
                path: active.path.clone(),
                bytes: active.bytes,
                seq: self.written_seq,
                batches: self.unsynced.len(),
            });
        } else {
            // Nothing written since the last sync: nothing to wait for.
            self.recycle_unsynced(self.unsynced.len());
        }
        self.last_sync = Instant::now();
        Ok(())
    }

    /// Takes the background sync's outcome if it has finished.
    fn collect_sync(&mut self) -> io::Result<()> {
        match self.syncer.as_mut().and_then(Syncer::take) {
            Some(done) => self.synced_in_background(done),
            None => Ok(()),
        }
    }

    /// Waits for the background sync out, if any, and takes its outcome:
    /// the writer syncs, rotates or rewrites only once none is out.
    fn settle_sync(&mut self) -> io::Result<()> {
        match self.syncer.as_mut().and_then(Syncer::wait) {
            Some(done) => self.synced_in_background(done),
            None => Ok(()),
        }
    }

    fn synced_in_background(&mut self, done: Done) -> io::Result<()> {
        done.result?;
        if let Some(active) = &mut self.active
            && active.path == done.path
        {
            active.synced_bytes = active.synced_bytes.max(done.bytes);
        }
        self.shared.synced.fetch_max(done.seq, Ordering::AcqRel);
        self.recycle_unsynced(done.batches);
        Ok(())
    }

    /// Drops the first `n` unsynced batches (now synced), keeping one
    /// buffer as the spare for the appenders.
    fn recycle_unsynced(&mut self, n: usize) {
        let n = n.min(self.unsynced.len());
        for (mut batch, _) in self.unsynced.drain(..n) {
            if self.spare.capacity() == 0
                && (INITIAL_BUFFER_CAPACITY..=MAX_SPARE_CAPACITY).contains(&batch.capacity())
            {
                batch.clear();
                self.spare = batch;
            }
        }
        if self.spare.capacity() == 0 {
            self.spare = Vec::with_capacity(INITIAL_BUFFER_CAPACITY);
        }
    }

    /// Syncs and closes the active segment, then creates the one starting at
    /// `first_seq` (header written and synced in a temp file, renamed,
    /// directory synced).
    fn rotate(&mut self, first_seq: u64) -> io::Result<()> {
        self.sync_dirty()?;
        let old_bytes = self.active.take().map(|a| a.bytes);
        let storage = &self.shared.cfg.storage;
        let dir = &self.shared.cfg.dir;
        let path = dir.join(segment_file_name(first_seq));
        let tmp = dir.join(temp_segment_file_name(first_seq));
        let mut file = storage.create(&tmp)?;
        file.write_all(&segment_header(first_seq, self.shared.cfg.payload_version))?;
        file.sync_data()?;
        storage.rename(&tmp, &path)?;
        storage.sync_dir(dir)?;
        let header_len = SEGMENT_HEADER_LEN as u64;
        {
            let mut segs = self.shared.segments.lock();
            if let (Some(bytes), Some(last)) = (old_bytes, segs.last_mut()) {
                last.bytes = bytes;
            }
            // A segment rewritten after a failure replaces its namesake.
            if let Some(last) = segs.last()
                && last.first_seq == first_seq
            {
                let replaced = segs.pop().expect("last").bytes;
                self.shared
                    .total_bytes
                    .fetch_sub(replaced, Ordering::Relaxed);
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
        self.active = Some(Active {
            file,
            path,
            bytes: header_len,
            synced_bytes: header_len,
        });
        Ok(())
    }
}
