//! The write path: a batch of events gated, logged and applied under the
//! state lock, a record handed to the log before it is applied, and the
//! wait for the log to be durable before a write is acknowledged.

use std::sync::OnceLock;
use std::time::Instant;

use metrics::Histogram;

use crate::model::{Event, Outcome, Verdict};
use crate::store::{IngestReject, StoreError};

use super::inner::Inner;
use super::state::Change;
use super::state::record::LogRecord;
use super::store::EmbeddedStore;

/// Events of one batch applied per hold of the state lock (~4,300
/// instructions each, so one hold is about 0.1 ms): a query never waits
/// for a whole batch of 1,000.
const INGEST_HOLD_EVENTS: usize = 64;

/// `hotrank_ingest_lock_wait_seconds`, looked up in the metrics registry
/// once per process instead of once per ingest call (the lookup, a hash of
/// the key and a read of the registry's map, cost every call ~294
/// instructions). Taken at the first ingest, so after the server installed
/// its recorder (`server::metrics_handle`, before it serves); a process
/// without a recorder (tools, tests) keeps a no-op handle.
fn lock_wait_seconds() -> &'static Histogram {
    static HANDLE: OnceLock<Histogram> = OnceLock::new();
    HANDLE.get_or_init(|| metrics::histogram!("hotrank_ingest_lock_wait_seconds"))
}

impl EmbeddedStore {
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

    /// Refuses a write while the log cannot take records (it is stalled
    /// or closed); called under the state lock before anything of a request
    /// is applied, so a refused request changes nothing.
    pub(super) fn writable(&self) -> Result<(), StoreError> {
        match &self.wal {
            Some(wal) => wal
                .writable()
                .map_err(|e| StoreError::Unavailable(format!("write-ahead log: {e}"))),
            None => Ok(()),
        }
    }

    /// Hands a record to the log, then applies it (under the state lock,
    /// after [`Self::writable`]).
    pub(super) fn log_and_apply(
        &self,
        inner: &mut Inner,
        rec: &LogRecord,
        buf: &mut Vec<u8>,
    ) -> Option<u64> {
        let seq = self.log(rec, buf);
        let change = inner.data.apply(rec);
        inner.on_change(change);
        seq
    }

    /// Hands a record to the log (under the state lock, after
    /// [`Self::writable`]); the caller applies it.
    pub(super) fn log(&self, rec: &LogRecord, buf: &mut Vec<u8>) -> Option<u64> {
        self.wal.as_ref().map(|wal| {
            buf.clear();
            let bytes =
                postcard::to_extend(rec, std::mem::take(buf)).expect("records always encode");
            let seq = wal.append(&bytes);
            *buf = bytes;
            seq
        })
    }

    pub(super) async fn durable(&self, seq: Option<u64>) -> Result<(), StoreError> {
        if let (Some(wal), Some(seq)) = (&self.wal, seq) {
            wal.wait_durable(seq)
                .await
                .map_err(|e| StoreError::Unavailable(format!("write-ahead log: {e}")))?;
        }
        Ok(())
    }

    /// [`Store::ingest`](crate::store::Store::ingest): gates, logs and
    /// applies a batch in holds of [`INGEST_HOLD_EVENTS`] events, then
    /// waits for the log to be durable.
    pub(super) async fn ingest_events(
        &self,
        events: Vec<Event>,
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
            lock_wait_seconds().record(asked.elapsed().as_secs_f64());
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
                if verdict == Verdict::Bot && !ev.bot.is_bot() {
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
}
