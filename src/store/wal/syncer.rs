//! The background sync of [`FsyncPolicy::Interval`](super::FsyncPolicy):
//! a thread of its own (`hotrank-wal-sync`) that syncs the active segment
//! through a second handle on it, so the writer thread goes on writing —
//! and acknowledging — while an `fdatasync` takes its time (a snapshot or
//! another process filling the disk's queue can make one take tens of
//! milliseconds).
//!
//! The writer hands over one job at a time: a cloned handle, and how far
//! the segment was written when the job was made. Only bytes written before
//! the job are claimed synced when it completes; the writer collects the
//! outcome ([`Syncer::take`], [`Syncer::wait`]) and treats a failed sync as
//! it treats its own (it stalls, see [`super`]).

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::{METRIC_FSYNC_SECONDS, Shared};
use crate::store::storage::StorageFile;

/// One sync of the active segment, as far as it was written.
pub(super) struct Job {
    pub file: Box<dyn StorageFile>,
    pub path: PathBuf,
    /// Segment length when the job was made: what the sync covers.
    pub bytes: u64,
    /// Last seq in those bytes.
    pub seq: u64,
    /// Unsynced batches of the writer that those bytes hold.
    pub batches: usize,
}

/// A finished [`Job`] (its handle dropped) and how it went.
pub(super) struct Done {
    pub path: PathBuf,
    pub bytes: u64,
    pub seq: u64,
    pub batches: usize,
    pub result: io::Result<()>,
}

#[derive(Default)]
struct Slot {
    job: Option<Job>,
    done: Option<Done>,
    stop: bool,
}

struct Channel {
    slot: Mutex<Slot>,
    cv: Condvar,
}

/// The sync thread, stopped (after its current sync) when dropped.
pub(super) struct Syncer {
    chan: Arc<Channel>,
    thread: Option<JoinHandle<()>>,
    /// A job was handed over and its outcome not yet collected.
    pending: bool,
}

impl Syncer {
    pub fn start(shared: Arc<Shared>) -> io::Result<Self> {
        let chan = Arc::new(Channel {
            slot: Mutex::new(Slot::default()),
            cv: Condvar::new(),
        });
        let theirs = Arc::clone(&chan);
        let thread = std::thread::Builder::new()
            .name("hotrank-wal-sync".into())
            .spawn(move || run(&theirs, &shared))?;
        Ok(Syncer {
            chan,
            thread: Some(thread),
            pending: false,
        })
    }

    /// Whether a job is out (handed over, outcome not collected).
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// Whether the job out has finished (its outcome waits to be taken).
    pub fn finished(&self) -> bool {
        self.pending && self.chan.slot.lock().done.is_some()
    }

    /// Hands over a job; only one is out at a time.
    pub fn submit(&mut self, job: Job) {
        debug_assert!(!self.pending, "one background sync at a time");
        self.chan.slot.lock().job = Some(job);
        self.chan.cv.notify_all();
        self.pending = true;
    }

    /// The outcome of the job out, if it has finished.
    pub fn take(&mut self) -> Option<Done> {
        let done = self.chan.slot.lock().done.take();
        self.pending &= done.is_none();
        done
    }

    /// Waits for the job out (if any) to finish and returns its outcome.
    pub fn wait(&mut self) -> Option<Done> {
        if !self.pending {
            return None;
        }
        let mut slot = self.chan.slot.lock();
        while slot.done.is_none() {
            self.chan.cv.wait(&mut slot);
        }
        self.pending = false;
        slot.done.take()
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.chan.slot.lock().stop = true;
        self.chan.cv.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(chan: &Channel, shared: &Shared) {
    loop {
        let mut job = {
            let mut slot = chan.slot.lock();
            loop {
                if let Some(job) = slot.job.take() {
                    break job;
                }
                if slot.stop {
                    return;
                }
                chan.cv.wait(&mut slot);
            }
        };
        let t = Instant::now();
        let result = job.file.sync_data();
        if result.is_ok() {
            metrics::histogram!(METRIC_FSYNC_SECONDS).record(t.elapsed().as_secs_f64());
            shared.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        drop(job.file);
        chan.slot.lock().done = Some(Done {
            path: job.path,
            bytes: job.bytes,
            seq: job.seq,
            batches: job.batches,
            result,
        });
        chan.cv.notify_all();
        // The writer collects the outcome on its next turn (it wakes at
        // least every 10 ms); waking it now publishes `synced_seq` sooner.
        shared.kick_writer();
    }
}
