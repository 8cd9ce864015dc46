//! The one loop over the segments of a log, shared by recovery
//! ([`super::Wal::open`]), read-only reading ([`read_records`]) and salvage
//! ([`salvage`]). The three differ only in what they do with a record that
//! fails validation; see [`Mode`].

use std::path::{Path, PathBuf};

use super::format::{
    SEGMENT_HEADER_LEN, check_segment_header, find_intact_record, header_is_torn, parse_record,
    parse_segment_file_name, temp_segment_file_name,
};
use super::{SegmentMeta, WalError};
use crate::store::storage::{Storage, read_all};

/// The replay callback: (seq, payload version, payload).
pub(crate) type ReplayFn<'a> = dyn FnMut(u64, u32, &[u8]) -> Result<(), ReplayError> + 'a;

/// Why a replay callback refused a record: its own error, kept as the
/// source of [`WalError::Replay`].
pub type ReplayError = Box<dyn std::error::Error + Send + Sync>;

/// What to do with a record that fails validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Opening the log to append: a torn tail of the last segment (nothing
    /// valid after it) is cut off; anything else is [`WalError::Corrupt`].
    Recover,
    /// Reading without changing anything: a torn tail ends the read and is
    /// reported; anything else is [`WalError::Corrupt`].
    Read,
    /// Keeping every intact record: damaged bytes are skipped up to the
    /// next valid record and reported; nothing is changed on disk.
    Salvage,
}

/// Damaged bytes that [`salvage`] skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub file: PathBuf,
    pub offset: u64,
    pub bytes: u64,
    pub reason: String,
}

/// What the loop found.
#[derive(Debug, Default)]
pub(crate) struct Walked {
    pub segments: Vec<SegmentMeta>,
    /// Records passed to the callback.
    pub records: u64,
    /// Highest seq in the log (0 if none).
    pub last_seq: u64,
    /// Seq of the first record read or skipped-as-covered.
    pub first_seq: Option<u64>,
    /// Segment files looked at.
    pub files: usize,
    pub total_bytes: u64,
    /// Recover: bytes cut off; Read: bytes of the torn tail left in place.
    pub tail_bytes: u64,
    /// Salvage: damaged spans skipped.
    pub skipped: Vec<Skipped>,
    /// Salvage: seq ranges absent from the log (and not covered).
    pub missing: Vec<(u64, u64)>,
    /// Payload version of the last segment.
    pub last_payload_version: Option<u32>,
}

/// Segment files of `dir` sorted by first seq. In [`Mode::Recover`]
/// unfinished `.tmp` segment files are removed.
fn list_segments(
    storage: &dyn Storage,
    dir: &Path,
    mode: Mode,
) -> Result<Vec<(u64, PathBuf)>, WalError> {
    let mut segs = Vec::new();
    let mut removed_tmp = false;
    for name in storage.list(dir)? {
        if let Some(seq) = parse_segment_file_name(&name) {
            segs.push((seq, dir.join(&name)));
        } else if mode == Mode::Recover
            && name
                .strip_suffix(".tmp")
                .and_then(parse_segment_file_name)
                .is_some_and(|s| name == temp_segment_file_name(s))
        {
            tracing::info!(file = %dir.join(&name).display(), "wal: removing unfinished segment file");
            storage.remove(&dir.join(&name))?;
            removed_tmp = true;
        }
    }
    if removed_tmp {
        storage.sync_dir(dir)?;
    }
    segs.sort_unstable_by_key(|(seq, _)| *seq);
    Ok(segs)
}

/// Intact records from `from` on: (count, first seq, last seq).
fn intact_after(bytes: &[u8], from: usize, min_seq: u64) -> Option<(u64, u64, u64)> {
    let max_seq = min_seq.saturating_add(bytes.len() as u64);
    let mut pos = from;
    let mut found: Option<(u64, u64, u64)> = None;
    while let Some(at) = find_intact_record(bytes, pos, min_seq, max_seq) {
        let rec = parse_record(&bytes[at..]).expect("found intact");
        found = Some(match found {
            None => (1, rec.seq, rec.seq),
            Some((n, first, _)) => (n + 1, first, rec.seq),
        });
        pos = at + rec.size;
    }
    found
}

/// Walks the segments of `dir` in order and passes every valid record with
/// seq > `after_seq` to `replay`. Segments entirely covered by `after_seq`
/// are not read.
pub(crate) fn walk(
    storage: &dyn Storage,
    dir: &Path,
    after_seq: u64,
    mode: Mode,
    replay: &mut ReplayFn<'_>,
) -> Result<Walked, WalError> {
    let files = list_segments(storage, dir, mode)?;
    let mut out = Walked::default();
    let mut prev_end: Option<u64> = None;
    for (i, (first_seq, path)) in files.iter().enumerate() {
        let first_seq = *first_seq;
        let is_last = i + 1 == files.len();
        let corrupt = |offset: u64, reason: String| WalError::Corrupt {
            path: path.clone(),
            offset,
            reason,
        };
        let skip_file = |out: &mut Walked, bytes: u64, reason: String| {
            out.skipped.push(Skipped {
                file: path.clone(),
                offset: 0,
                bytes,
                reason,
            })
        };
        out.files += 1;
        // Order and gaps between segments.
        let problem = if first_seq == 0 {
            Some("segment first seq 0 is invalid".to_string())
        } else {
            prev_end.filter(|&end| first_seq <= end).map(|end| {
                format!("segment starts at seq {first_seq} but the previous one reaches {end}")
            })
        };
        if let Some(reason) = problem {
            if mode != Mode::Salvage {
                return Err(corrupt(0, reason));
            }
            skip_file(&mut out, storage.len(path)?, reason);
            continue;
        }
        // Where the records must continue from; the first segment of a
        // read-only or salvage walk may start anywhere (a trimmed log).
        let from = match (prev_end, mode) {
            (Some(end), _) => Some(end + 1),
            (None, Mode::Recover) => Some(1),
            (None, _) => None,
        };
        if let Some(from) = from
            && first_seq > from
            && first_seq - 1 > after_seq
        {
            let gap = (from.max(after_seq + 1), first_seq - 1);
            if mode != Mode::Salvage {
                return Err(corrupt(
                    0,
                    format!(
                        "records {}..={} are missing from the log and not covered by the snapshot (after_seq {after_seq})",
                        from,
                        first_seq - 1
                    ),
                ));
            }
            out.missing.push(gap);
        }
        out.first_seq.get_or_insert(first_seq);
        // Entirely covered by the snapshot: no need to read it.
        if !is_last && files[i + 1].0 - 1 <= after_seq {
            let bytes = storage.len(path)?;
            out.total_bytes += bytes;
            out.segments.push(SegmentMeta {
                first_seq,
                path: path.clone(),
                bytes,
            });
            prev_end = Some(files[i + 1].0 - 1);
            continue;
        }

        let bytes = read_all(storage, path)?;
        let len = bytes.len() as u64;
        out.total_bytes += len;
        let version = match check_segment_header(&bytes, first_seq) {
            Ok(v) => v,
            Err(defect) => {
                let reason = defect.to_string();
                match mode {
                    Mode::Salvage => skip_file(&mut out, len, reason),
                    _ if !(is_last && header_is_torn(&bytes)) => return Err(corrupt(0, reason)),
                    Mode::Recover => {
                        tracing::warn!(file = %path.display(), bytes = len, reason = %reason, "wal: removing last segment with an incomplete header");
                        storage.remove(path)?;
                        storage.sync_dir(dir)?;
                        out.tail_bytes += len;
                    }
                    Mode::Read => out.tail_bytes += len,
                }
                continue;
            }
        };
        let mut off = SEGMENT_HEADER_LEN;
        let mut expected = first_seq;
        let mut last = None;
        let mut kept = len;
        while off < bytes.len() {
            let reason = match parse_record(&bytes[off..]) {
                Ok(rec) if rec.seq == expected => {
                    if rec.seq > after_seq {
                        replay(rec.seq, version, rec.payload).map_err(|source| {
                            WalError::Replay {
                                seq: rec.seq,
                                source,
                            }
                        })?;
                        out.records += 1;
                    }
                    last = Some(rec.seq);
                    expected += 1;
                    off += rec.size;
                    continue;
                }
                Ok(rec) => format!("expected seq {expected}, found {}", rec.seq),
                Err(defect) => defect.to_string(),
            };
            let intact = intact_after(&bytes, off + 1, expected);
            match mode {
                Mode::Salvage => {
                    let next =
                        find_intact_record(&bytes, off + 1, expected, expected.saturating_add(len));
                    let end = next.unwrap_or(bytes.len());
                    out.skipped.push(Skipped {
                        file: path.clone(),
                        offset: off as u64,
                        bytes: (end - off) as u64,
                        reason,
                    });
                    match next {
                        Some(at) => {
                            let seq = parse_record(&bytes[at..]).expect("intact").seq;
                            if seq > expected.max(after_seq + 1) {
                                out.missing.push((expected.max(after_seq + 1), seq - 1));
                            }
                            expected = seq;
                            off = at;
                            continue;
                        }
                        None => break,
                    }
                }
                _ if !is_last => {
                    return Err(corrupt(
                        off as u64,
                        format!("{reason} (not the last segment, so this is not a torn tail)"),
                    ));
                }
                _ if intact.is_some() => {
                    let (n, a, b) = intact.expect("checked");
                    return Err(corrupt(
                        off as u64,
                        format!(
                            "{reason}; {n} intact records follow (seqs {a}..={b}), so this is damage, not a torn write. Nothing was changed. `hotrank repair --data-dir DIR` keeps every intact record and reports what it skips"
                        ),
                    ));
                }
                Mode::Recover => {
                    let dropped = len - off as u64;
                    tracing::warn!(file = %path.display(), offset = off, dropped_bytes = dropped, reason = %reason, "wal: truncating the torn tail of the last segment");
                    storage.truncate(path, off as u64)?;
                    out.tail_bytes += dropped;
                    kept = off as u64;
                }
                Mode::Read => out.tail_bytes += len - off as u64,
            }
            break;
        }
        if mode == Mode::Recover && is_last && kept == len {
            // A previous process may have died with this tail only in the
            // page cache (policy interval). Make it durable before any new
            // segment is created after it: only the last segment may be torn.
            storage.open_append(path)?.sync_data()?;
        }
        prev_end = Some(last.unwrap_or(first_seq - 1));
        out.last_payload_version = Some(version);
        out.segments.push(SegmentMeta {
            first_seq,
            path: path.clone(),
            bytes: kept,
        });
    }
    out.last_seq = prev_end.unwrap_or(0);
    if out.last_seq < out.first_seq.unwrap_or(u64::MAX) {
        out.first_seq = None;
    }
    Ok(out)
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
/// seq > `after_seq` is passed to `f` in order, with its seq and payload
/// version.
///
/// Validation is the same as [`super::Wal::open`]'s, except that the first
/// segment may start at any seq (the records before it were trimmed after a
/// snapshot) and a torn tail of the last segment ends the read instead of
/// being truncated (its size is reported in [`ReadStats::torn_tail_bytes`]).
/// Damage followed by intact records, a bad record in an earlier segment, or
/// a gap between segments not covered by `after_seq`, is
/// [`WalError::Corrupt`]. Safe to run on the log of a live server: a record
/// being appended reads as a torn tail.
pub fn read_records(
    storage: &dyn Storage,
    dir: &Path,
    after_seq: u64,
    mut f: impl FnMut(u64, u32, &[u8]) -> Result<(), ReplayError>,
) -> Result<ReadStats, WalError> {
    let w = walk(storage, dir, after_seq, Mode::Read, &mut f)?;
    Ok(ReadStats {
        records: w.records,
        first_seq: w.first_seq,
        last_seq: w.last_seq,
        segments: w.files,
        total_bytes: w.total_bytes,
        torn_tail_bytes: w.tail_bytes,
    })
}

/// What [`salvage`] kept and skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SalvageReport {
    /// Records passed to the callback.
    pub records: u64,
    /// Highest seq kept (0 if none).
    pub last_seq: u64,
    /// Damaged spans skipped, in log order.
    pub skipped: Vec<Skipped>,
    /// Seq ranges (inclusive) above `after_seq` that no intact record holds.
    pub missing: Vec<(u64, u64)>,
}

/// Reads every intact record of the log in `dir` with seq > `after_seq`,
/// in order, skipping damaged bytes up to the next intact record instead of
/// stopping. Changes nothing on disk.
pub fn salvage(
    storage: &dyn Storage,
    dir: &Path,
    after_seq: u64,
    mut f: impl FnMut(u64, u32, &[u8]) -> Result<(), ReplayError>,
) -> Result<SalvageReport, WalError> {
    let mut last = 0;
    let w = walk(storage, dir, after_seq, Mode::Salvage, &mut |seq, v, p| {
        last = seq;
        f(seq, v, p)
    })?;
    Ok(SalvageReport {
        records: w.records,
        last_seq: last.max(after_seq),
        skipped: w.skipped,
        missing: w.missing,
    })
}
