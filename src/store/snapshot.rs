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
//! |         | 4    | flags, `0`                                               |
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
//! `keep` snapshots (by seq) are kept.
//!
//! Only one process (the store) writes snapshots into a directory, one at a time.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Atomically writes `payload` as the snapshot at `seq` and keeps only the
/// newest `keep` snapshots (at least 1). Returns the file's path.
pub fn write_snapshot(dir: &Path, seq: u64, payload: &[u8], keep: usize) -> io::Result<PathBuf> {
    write_snapshot_with(dir, seq, keep, |w| w.write_all(payload))
}

/// Like [`write_snapshot`], but the payload is produced by `write`, which
/// streams it into a buffered writer; length and checksum are computed on the
/// way. If `write` fails, nothing is left behind and its error is returned.
pub fn write_snapshot_with<F>(dir: &Path, seq: u64, keep: usize, write: F) -> io::Result<PathBuf>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    fs::create_dir_all(dir)?;
    let name = snapshot_file_name(seq);
    let final_path = dir.join(&name);
    let tmp_path = dir.join(format!(
        "{name}.tmp-{}-{}",
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = write_file(&tmp_path, seq, write).and_then(|()| {
        fs::rename(&tmp_path, &final_path)?;
        sync_dir(dir)
    });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp_path);
        return Err(e);
    }
    if let Err(e) = prune(dir, keep.max(1)) {
        // The new snapshot is in place; old files are only wasted space.
        tracing::warn!(dir = %dir.display(), error = %e, "snapshot: could not delete old snapshots");
    }
    Ok(final_path)
}

fn write_file<F>(path: &Path, seq: u64, write: F) -> io::Result<()>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    // The name is unique within this process; a file of that name can only be
    // left over from an earlier process that had the same pid, so overwrite it.
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    let mut out = BufWriter::with_capacity(256 << 10, file);
    let header = encode_header(seq);
    out.write_all(&header)?;
    let mut counting = CrcWriter {
        inner: &mut out,
        hasher: crc32fast::Hasher::new(),
        len: 0,
    };
    write(&mut counting)?;
    let (crc, len) = (counting.hasher.finalize(), counting.len);
    out.write_all(&encode_footer(&header, len, crc))?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
}

fn encode_header(seq: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(&SNAPSHOT_MAGIC);
    h[8..12].copy_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
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

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Snapshot files in `dir` as (seq, path), newest first. Temp files and other
/// names are ignored. A missing directory yields an empty list.
pub fn list_snapshots(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut snaps = Vec::new();
    for entry in entries {
        let entry = entry?;
        if let Some(seq) = entry
            .file_name()
            .to_str()
            .and_then(parse_snapshot_file_name)
        {
            snaps.push((seq, entry.path()));
        }
    }
    snaps.sort_unstable_by_key(|(seq, _)| std::cmp::Reverse(*seq));
    Ok(snaps)
}

/// Deletes all but the newest `keep` snapshots and temp files left by other
/// processes (crashed writers).
fn prune(dir: &Path, keep: usize) -> io::Result<()> {
    let mut deleted = false;
    for (_, path) in list_snapshots(dir)?.into_iter().skip(keep) {
        fs::remove_file(&path)?;
        tracing::debug!(file = %path.display(), "snapshot: deleted old snapshot");
        deleted = true;
    }
    let own_tmp = format!(".tmp-{}-", std::process::id());
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((base, _)) = name.split_once(".tmp-") else {
            continue;
        };
        if parse_snapshot_file_name(base).is_some() && !name.contains(&own_tmp) {
            fs::remove_file(entry.path())?;
            tracing::debug!(file = %entry.path().display(), "snapshot: deleted stale temp file");
            deleted = true;
        }
    }
    if deleted {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Reads and verifies one snapshot file; returns (seq, payload). Content that
/// fails verification is reported as `io::ErrorKind::InvalidData`.
pub fn read_snapshot(path: &Path) -> io::Result<(u64, Vec<u8>)> {
    let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidData, msg);
    let name_seq = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_snapshot_file_name);
    let mut file = File::open(path)?;
    let file_len = file.metadata()?.len();
    if file_len < (HEADER_LEN + FOOTER_LEN) as u64 {
        return Err(invalid(format!("file is only {file_len} bytes long")));
    }
    let mut header = [0u8; HEADER_LEN];
    file.read_exact(&mut header)?;
    if header[0..8] != SNAPSHOT_MAGIC {
        return Err(invalid("bad magic".into()));
    }
    let version = u32::from_le_bytes(header[8..12].try_into().unwrap());
    if version != SNAPSHOT_VERSION {
        return Err(invalid(format!("unsupported format version {version}")));
    }
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
    let len = usize::try_from(len).map_err(|_| invalid("payload too large".into()))?;
    let mut payload = vec![0u8; len];
    file.seek(SeekFrom::Start(HEADER_LEN as u64))?;
    file.read_exact(&mut payload)?;
    if crc32fast::hash(&payload) != payload_crc {
        return Err(invalid("payload checksum mismatch".into()));
    }
    Ok((seq, payload))
}

/// Returns the newest snapshot that passes verification, falling back to older
/// ones (with a warning for each invalid file), or `None` if there is none.
/// I/O errors other than invalid content are returned.
pub fn read_latest_snapshot(dir: &Path) -> io::Result<Option<(u64, Vec<u8>)>> {
    for (seq, path) in list_snapshots(dir)? {
        match read_snapshot(&path) {
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
