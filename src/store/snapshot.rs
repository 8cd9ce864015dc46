//! Checksummed, atomically written snapshot files of the embedded store.
//!
//! A snapshot holds the store's serialised state (opaque bytes) as of WAL seq
//! `seq`: after loading it, the store replays WAL records with seq > `seq`.
//!
//! # File format (version 1)
//!
//! File name `snapshot-{seq:020}.bin`; all integers little-endian.
//!
//! | part    | size | field                                                    |
//! |---------|------|----------------------------------------------------------|
//! | header  | 8    | magic `b"HRKSNAP\0"`                                     |
//! |         | 4    | format version, `1`                                      |
//! |         | 4    | payload version: how the state is encoded (the caller's; `0` in files written before it was recorded) |
//! |         | 8    | `seq` (must match the file name)                         |
//! | payload | n    | the state                                                |
//! | footer  | 8    | `n`, payload length (must equal file size - 48)          |
//! |         | 4    | crc32 (IEEE) of the payload                              |
//! |         | 4    | crc32 of the 24 header bytes ‖ the first 12 footer bytes |
//! |         | 8    | end magic `b"HRKSEND\0"`                                 |
//!
//! Length and checksum live in a footer so the payload can be streamed straight
//! to disk ([`write_snapshot_with`]) without being materialised twice. A file that
//! was cut short, extended, or altered anywhere fails one of the checks.
//!
//! # Atomicity
//!
//! A snapshot is written to `snapshot-{seq:020}.bin.tmp-{pid}-{n}`, fsynced,
//! renamed to its final name, and the directory is fsynced, so a crash leaves
//! either the complete new file or none (plus maybe a temp file, which readers
//! ignore and the next write removes). After a successful write only the newest
//! `keep` snapshots (by seq) are kept. An old snapshot is cut from its end
//! [`CUT_BYTES`] at a time, each cut synced, before its name is removed:
//! freeing hundreds of megabytes in one `unlink` holds the file system's
//! journal (and so the log's next sync) for tens of milliseconds, a cut of
//! 16 MiB for about a millisecond. A crash halfway leaves a shortened old
//! file, which fails the checks below and is skipped (and removed by the
//! next write) like any damaged one.
//!
//! Only one process (the store) writes snapshots into a directory, one at a time.
//!
//! # Versions
//!
//! The format version changes only if the container above changes; a build
//! reads every format version up to its own and refuses a newer one by name.
//! The payload version is the caller's and is handed back by
//! [`read_snapshot`], so the caller can decode state written by an older
//! build (see `store::embedded` for how the state's layout is versioned).
//!
//! All file I/O goes through a [`Storage`].

use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::store::storage::Storage;

/// Magic bytes at the start of a snapshot file.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"HRKSNAP\0";
/// Magic bytes at the very end of a snapshot file.
pub const SNAPSHOT_END_MAGIC: [u8; 8] = *b"HRKSEND\0";
/// On-disk format version written by this module.
pub const SNAPSHOT_VERSION: u32 = 1;
const HEADER_LEN: usize = 24;
const FOOTER_LEN: usize = 24;

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// File name of the snapshot at `seq`.
pub fn snapshot_file_name(seq: u64) -> String {
    format!("snapshot-{seq:020}.bin")
}

fn parse_snapshot_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("snapshot-")?.strip_suffix(".bin")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A snapshot read back: its seq, payload version and payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub seq: u64,
    pub version: u32,
    pub payload: Vec<u8>,
}

/// Atomically writes `payload` (encoded per payload `version`) as the
/// snapshot at `seq` and keeps only the newest `keep` snapshots (at least 1).
/// Returns the file's path.
pub fn write_snapshot(
    storage: &dyn Storage,
    dir: &Path,
    seq: u64,
    version: u32,
    payload: &[u8],
    keep: usize,
) -> io::Result<PathBuf> {
    write_snapshot_with(storage, dir, seq, version, keep, |w| w.write_all(payload))
}

/// Like [`write_snapshot`], but the payload is produced by `write`, which
/// streams it into a buffered writer; length and checksum are computed on the
/// way. If `write` fails, nothing is left behind and its error is returned.
pub fn write_snapshot_with<F>(
    storage: &dyn Storage,
    dir: &Path,
    seq: u64,
    version: u32,
    keep: usize,
    write: F,
) -> io::Result<PathBuf>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    write_snapshot_file(storage, dir, seq, version, write)?;
    prune_snapshots(storage, dir, keep);
    Ok(dir.join(snapshot_file_name(seq)))
}

/// [`write_snapshot_with`] without the pruning: the caller runs
/// [`prune_snapshots`] after it (to time the two apart).
pub fn write_snapshot_file<F>(
    storage: &dyn Storage,
    dir: &Path,
    seq: u64,
    version: u32,
    write: F,
) -> io::Result<PathBuf>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    storage.create_dir_all(dir)?;
    let name = snapshot_file_name(seq);
    let final_path = dir.join(&name);
    let tmp_path = dir.join(format!(
        "{name}.tmp-{}-{}",
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = write_file(storage, &tmp_path, seq, version, write).and_then(|()| {
        storage.rename(&tmp_path, &final_path)?;
        storage.sync_dir(dir)
    });
    if let Err(e) = written {
        let _ = storage.remove(&tmp_path);
        return Err(e);
    }
    Ok(final_path)
}

/// Deletes all but the newest `keep` snapshots (at least 1) and temp files
/// left by other processes. A failure is logged, not returned: the new
/// snapshot is in place, old files are only wasted space.
pub fn prune_snapshots(storage: &dyn Storage, dir: &Path, keep: usize) {
    if let Err(e) = prune(storage, dir, keep.max(1)) {
        tracing::warn!(dir = %dir.display(), error = %e, "snapshot: could not delete old snapshots");
    }
}

fn write_file<F>(
    storage: &dyn Storage,
    path: &Path,
    seq: u64,
    version: u32,
    write: F,
) -> io::Result<()>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    // The name is unique within this process; a file of that name can only be
    // left over from an earlier process that had the same pid, so overwrite it.
    let file = storage.create(path)?;
    let mut out = BufWriter::with_capacity(
        256 << 10,
        Paced {
            file,
            written: 0,
            out: 0,
        },
    );
    let header = encode_header(seq, version);
    out.write_all(&header)?;
    let mut counting = CrcWriter {
        inner: &mut out,
        hasher: crc32fast::Hasher::new(),
        len: 0,
    };
    write(&mut counting)?;
    let (crc, len) = (counting.hasher.finalize(), counting.len);
    out.write_all(&encode_footer(&header, len, crc))?;
    let mut file = out.into_inner().map_err(|e| e.into_error())?.file;
    file.sync_data()
}

/// Bytes a snapshot writes before it has the kernel write them out.
const WRITE_OUT_EVERY: u64 = 1 << 20;

/// Has the kernel write a snapshot file out every [`WRITE_OUT_EVERY`]
/// bytes while it is written (`StorageFile::write_out`), and syncs it once
/// at the end: the disk never holds more than a megabyte of it unwritten,
/// and no sync of the snapshot comes between the log's syncs. Syncing it
/// every 16 MiB instead made each of those a journal commit that the log's
/// own syncs (every acknowledgement with fsync `always`) queued behind, up
/// to 270 ms on this machine; dirty pages left to the kernel's writeback
/// would do the same with a larger batch.
struct Paced {
    file: Box<dyn crate::store::storage::StorageFile>,
    /// Bytes written so far, and how many of them were written out.
    written: u64,
    out: u64,
}

impl Write for Paced {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written - self.out >= WRITE_OUT_EVERY {
            self.file.write_out(self.out, self.written - self.out)?;
            self.out = self.written;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

fn encode_header(seq: u64, version: u32) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(&SNAPSHOT_MAGIC);
    h[8..12].copy_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&version.to_le_bytes());
    h[16..24].copy_from_slice(&seq.to_le_bytes());
    h
}

fn encode_footer(header: &[u8; HEADER_LEN], len: u64, payload_crc: u32) -> [u8; FOOTER_LEN] {
    let mut f = [0u8; FOOTER_LEN];
    f[0..8].copy_from_slice(&len.to_le_bytes());
    f[8..12].copy_from_slice(&payload_crc.to_le_bytes());
    let crc = meta_crc(header, &f[0..12]);
    f[12..16].copy_from_slice(&crc.to_le_bytes());
    f[16..24].copy_from_slice(&SNAPSHOT_END_MAGIC);
    f
}

fn meta_crc(header: &[u8], footer_fields: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(header);
    h.update(footer_fields);
    h.finalize()
}

struct CrcWriter<'a, W: Write> {
    inner: &'a mut W,
    hasher: crc32fast::Hasher,
    len: u64,
}

impl<W: Write> Write for CrcWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.write_all(buf)?;
        self.hasher.update(buf);
        self.len += buf.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Snapshot files in `dir` as (seq, path), newest first. Temp files and other
/// names are ignored. A missing directory yields an empty list.
pub fn list_snapshots(storage: &dyn Storage, dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let names = match storage.list(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut snaps = Vec::new();
    for name in names {
        if let Some(seq) = parse_snapshot_file_name(&name) {
            snaps.push((seq, dir.join(name)));
        }
    }
    snaps.sort_unstable_by_key(|(seq, _)| std::cmp::Reverse(*seq));
    Ok(snaps)
}

/// Bytes an old snapshot is cut by at a time before it is removed.
pub const CUT_BYTES: u64 = 16 << 20;

/// Removes a file a [`CUT_BYTES`] cut at a time from its end (each cut
/// synced by [`Storage::truncate`]), then its name.
fn remove_gradually(storage: &dyn Storage, path: &Path) -> io::Result<()> {
    let mut len = storage.len(path)?;
    while len > CUT_BYTES {
        len -= CUT_BYTES;
        storage.truncate(path, len)?;
    }
    storage.remove(path)
}

/// Deletes all but the newest `keep` snapshots and temp files left by other
/// processes (crashed writers).
fn prune(storage: &dyn Storage, dir: &Path, keep: usize) -> io::Result<()> {
    let mut deleted = false;
    for (_, path) in list_snapshots(storage, dir)?.into_iter().skip(keep) {
        remove_gradually(storage, &path)?;
        tracing::debug!(file = %path.display(), "snapshot: deleted old snapshot");
        deleted = true;
    }
    let own_tmp = format!(".tmp-{}-", std::process::id());
    for name in storage.list(dir)? {
        let Some((base, _)) = name.split_once(".tmp-") else {
            continue;
        };
        if parse_snapshot_file_name(base).is_some() && !name.contains(&own_tmp) {
            remove_gradually(storage, &dir.join(&name))?;
            tracing::debug!(file = %dir.join(&name).display(), "snapshot: deleted stale temp file");
            deleted = true;
        }
    }
    if deleted {
        storage.sync_dir(dir)?;
    }
    Ok(())
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Reads and verifies one snapshot file. Content that fails verification
/// (or a format version newer than this build's) is reported as
/// `io::ErrorKind::InvalidData`.
pub fn read_snapshot(storage: &dyn Storage, path: &Path) -> io::Result<Snapshot> {
    let mut reader = open_snapshot(storage, path)?;
    let len = usize::try_from(reader.len()).map_err(|_| invalid("payload too large".into()))?;
    let mut payload = Vec::with_capacity(len);
    reader.read_to_end(&mut payload)?;
    let (seq, version) = (reader.seq(), reader.version());
    reader.finish()?;
    Ok(Snapshot {
        seq,
        version,
        payload,
    })
}

/// A snapshot's payload, read as a stream: every buffer is checksummed as
/// it passes, and [`SnapshotReader::finish`] (once the payload is read to
/// its end) says whether the whole payload was intact. Until then nothing
/// read may be trusted: a caller decodes into state it throws away if
/// `finish` fails. Header and footer are verified when it is opened.
pub struct SnapshotReader {
    file: io::BufReader<Box<dyn crate::store::storage::ReadFile>>,
    seq: u64,
    version: u32,
    len: u64,
    left: u64,
    crc: u32,
    hasher: crc32fast::Hasher,
}

impl SnapshotReader {
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The payload version (the caller's encoding).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Payload bytes in all.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Payload bytes not read yet.
    pub fn remaining(&self) -> u64 {
        self.left
    }

    /// Checks the payload's checksum; the whole payload must have been
    /// read. `InvalidData` if it does not match.
    pub fn finish(self) -> io::Result<()> {
        if self.left != 0 {
            return Err(invalid(format!(
                "{} payload bytes were not read before the checksum check",
                self.left
            )));
        }
        if self.hasher.finalize() != self.crc {
            return Err(invalid("payload checksum mismatch".into()));
        }
        Ok(())
    }
}

impl Read for SnapshotReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "snapshot payload ends early (the file shrank while read)",
            ));
        }
        self.hasher.update(&buf[..n]);
        self.left -= n as u64;
        Ok(n)
    }
}

/// Opens one snapshot file for [`SnapshotReader`]: checks its header and
/// footer (see [`read_snapshot`] for the errors).
pub fn open_snapshot(storage: &dyn Storage, path: &Path) -> io::Result<SnapshotReader> {
    let name_seq = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_snapshot_file_name);
    let file_len = storage.len(path)?;
    let mut file = storage.open_read(path)?;
    if file_len < (HEADER_LEN + FOOTER_LEN) as u64 {
        return Err(invalid(format!("file is only {file_len} bytes long")));
    }
    let mut header = [0u8; HEADER_LEN];
    file.read_exact(&mut header)?;
    if header[0..8] != SNAPSHOT_MAGIC {
        return Err(invalid("bad magic".into()));
    }
    let version = u32::from_le_bytes(header[8..12].try_into().unwrap());
    if version > SNAPSHOT_VERSION {
        return Err(invalid(format!(
            "format version {version} is newer than this build's ({SNAPSHOT_VERSION}); upgrade hotrank"
        )));
    }
    let payload_version = u32::from_le_bytes(header[12..16].try_into().unwrap());
    let seq = u64::from_le_bytes(header[16..24].try_into().unwrap());
    if name_seq.is_some_and(|s| s != seq) {
        return Err(invalid(format!(
            "header seq {seq} does not match the file name"
        )));
    }
    // Check the footer before allocating anything for the payload.
    let mut footer = [0u8; FOOTER_LEN];
    file.seek(SeekFrom::Start(file_len - FOOTER_LEN as u64))?;
    file.read_exact(&mut footer)?;
    if footer[16..24] != SNAPSHOT_END_MAGIC {
        return Err(invalid(
            "missing end marker (truncated or unfinished file)".into(),
        ));
    }
    let len = u64::from_le_bytes(footer[0..8].try_into().unwrap());
    let payload_crc = u32::from_le_bytes(footer[8..12].try_into().unwrap());
    let stored_meta_crc = u32::from_le_bytes(footer[12..16].try_into().unwrap());
    if stored_meta_crc != meta_crc(&header, &footer[0..12]) {
        return Err(invalid("header/footer checksum mismatch".into()));
    }
    if len != file_len - (HEADER_LEN + FOOTER_LEN) as u64 {
        return Err(invalid(format!(
            "payload length {len} does not match the file size {file_len}"
        )));
    }
    file.seek(SeekFrom::Start(HEADER_LEN as u64))?;
    Ok(SnapshotReader {
        file: io::BufReader::with_capacity(READ_BUFFER, file),
        seq,
        version: payload_version,
        len,
        left: len,
        crc: payload_crc,
        hasher: crc32fast::Hasher::new(),
    })
}

/// Bytes a [`SnapshotReader`] reads from the file at a time.
const READ_BUFFER: usize = 256 << 10;

/// Returns the newest snapshot that passes verification, falling back to older
/// ones (with a warning for each invalid file), or `None` if there is none.
/// I/O errors other than invalid content are returned.
pub fn read_latest_snapshot(storage: &dyn Storage, dir: &Path) -> io::Result<Option<Snapshot>> {
    for (seq, path) in list_snapshots(storage, dir)? {
        match read_snapshot(storage, &path) {
            Ok(found) => return Ok(Some(found)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
                ) =>
            {
                tracing::warn!(file = %path.display(), seq, error = %e, "snapshot: skipping invalid snapshot, trying an older one");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A file in memory that records the ranges it was asked to write out
    /// (and fails that call when `fail`, as a disk error would).
    struct Recording {
        bytes: Vec<u8>,
        out: Arc<Mutex<Vec<(u64, u64)>>>,
        fail: bool,
    }

    impl Write for Recording {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            // Short writes too, as a real file may do.
            let n = buf.len().min(300_000);
            self.bytes.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl crate::store::storage::StorageFile for Recording {
        fn sync_data(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn write_out(&mut self, offset: u64, len: u64) -> io::Result<()> {
            self.out.lock().unwrap().push((offset, len));
            if self.fail {
                return Err(io::Error::other("EIO"));
            }
            Ok(())
        }
        fn try_clone(&self) -> io::Result<Box<dyn crate::store::storage::StorageFile>> {
            Err(io::Error::other("not here"))
        }
    }

    /// A snapshot being written has the kernel write out every megabyte
    /// as it goes: consecutive ranges from the start, each at least
    /// [`WRITE_OUT_EVERY`] and less than one more write, covering all but
    /// the last (unfinished) megabyte.
    #[test]
    fn a_snapshot_is_written_out_a_megabyte_at_a_time() {
        let out = Arc::new(Mutex::new(Vec::new()));
        let file = Recording {
            bytes: Vec::new(),
            out: out.clone(),
            fail: false,
        };
        let mut w = BufWriter::with_capacity(
            256 << 10,
            Paced {
                file: Box::new(file),
                written: 0,
                out: 0,
            },
        );
        let data: Vec<u8> = (0..(11 << 19) + 12_345).map(|i| (i % 253) as u8).collect();
        for part in data.chunks(70_001) {
            w.write_all(part).unwrap();
        }
        w.flush().unwrap();
        let ranges = out.lock().unwrap().clone();
        let mut next = 0;
        for &(offset, len) in &ranges {
            assert_eq!(offset, next, "{ranges:?}");
            assert!(
                (WRITE_OUT_EVERY..WRITE_OUT_EVERY + 300_000).contains(&len),
                "{ranges:?}"
            );
            next += len;
        }
        let total = data.len() as u64;
        assert!(
            total - next < WRITE_OUT_EVERY,
            "{next} of {total} written out"
        );
        assert_eq!(ranges.len(), 5);
    }

    /// A write-out that fails fails the snapshot's write: the call took
    /// the error from the file, so a later sync would not report it.
    #[test]
    fn a_failed_write_out_fails_the_snapshot() {
        let file = Recording {
            bytes: Vec::new(),
            out: Arc::new(Mutex::new(Vec::new())),
            fail: true,
        };
        let mut w = Paced {
            file: Box::new(file),
            written: 0,
            out: 0,
        };
        let data = vec![7u8; (WRITE_OUT_EVERY as usize) * 2];
        let err = w.write_all(&data).unwrap_err();
        assert_eq!(err.to_string(), "EIO");
    }
}
