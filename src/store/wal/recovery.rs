//! What [`super::Wal::open`] does with the segments it finds: replay them
//! through the segment loop in [`Mode::Recover`] and work out where the
//! writer resumes.

use super::reader::{Mode, ReplayFn, walk};
use super::writer::Active;
use super::{METRIC_SEGMENTS, ReplayStats, SegmentMeta, WalConfig, WalError};

pub(super) struct Recovered {
    pub segments: Vec<SegmentMeta>,
    pub stats: ReplayStats,
    pub next_seq: u64,
    /// The last segment, if appending continues in it.
    pub active: Option<Active>,
}

pub(super) fn recover(
    cfg: &WalConfig,
    after_seq: u64,
    replay: &mut ReplayFn<'_>,
) -> Result<Recovered, WalError> {
    let w = walk(&*cfg.storage, &cfg.dir, after_seq, Mode::Recover, replay)?;
    let next_seq = w.last_seq.max(after_seq) + 1;
    // Keep appending to the last segment if the seqs continue it and its
    // payloads are encoded the way this build writes them; otherwise the
    // writer starts a new segment with the first batch.
    let active = match w.segments.last() {
        Some(last)
            if w.last_seq + 1 == next_seq
                && w.last_payload_version == Some(cfg.payload_version) =>
        {
            Some(Active {
                file: cfg.storage.open_append(&last.path)?,
                path: last.path.clone(),
                bytes: last.bytes,
                synced_bytes: last.bytes,
            })
        }
        _ => None,
    };
    let stats = ReplayStats {
        records: w.records,
        last_seq: w.last_seq,
        truncated_bytes: w.tail_bytes,
        segments: w.segments.len(),
    };
    metrics::gauge!(METRIC_SEGMENTS).set(w.segments.len() as f64);
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
    Ok(Recovered {
        segments: w.segments,
        stats,
        next_seq,
        active,
    })
}
