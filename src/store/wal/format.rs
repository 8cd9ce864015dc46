//! The on-disk format of the log: segment headers, records, file names.
//! Pure functions over bytes; no I/O.
//!
//! # Format (version 1)
//!
//! All integers are little-endian. The log is a directory of segment files
//! named `wal-{first_seq:020}.log`, where `first_seq` is the seq of the first
//! record the segment holds (or would hold, if it is empty).
//!
//! Segment header, 32 bytes:
//!
//! | offset | size | field                                              |
//! |--------|------|----------------------------------------------------|
//! | 0      | 8    | magic `b"HRKWAL\0\0"`                              |
//! | 8      | 4    | format version, `1`                                |
//! | 12     | 4    | payload version: how the records' payloads are encoded (the caller's [`super::WalConfig::payload_version`]; `0` in segments written before it was recorded) |
//! | 16     | 8    | `first_seq` (must match the file name)             |
//! | 24     | 4    | crc32 (IEEE) of bytes 0..24                        |
//! | 28     | 4    | reserved, `0`                                      |
//!
//! Then records back to back, each a 16-byte header and the payload:
//!
//! | offset | size | field                                                         |
//! |--------|------|---------------------------------------------------------------|
//! | 0      | 4    | `len`: payload length in bytes (at most [`MAX_RECORD_BYTES`]) |
//! | 4      | 4    | crc32 (IEEE) over `len` bytes ‖ `seq` bytes ‖ payload         |
//! | 8      | 8    | `seq`                                                         |
//! | 16     | len  | payload (opaque to the log)                                   |
//!
//! Seqs start at 1 and are contiguous inside a segment; the first record's
//! seq equals the segment's `first_seq`. Between segments a gap is allowed
//! only where a snapshot covers it.
//!
//! The format version changes only if the bytes above change; a build reads
//! every format version up to its own and refuses newer ones by name. The
//! payload version is the caller's: it changes with the layout of what the
//! caller stores in a record and is handed back with every record on replay,
//! so the caller can decode records written by older builds.

/// Magic bytes at the start of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"HRKWAL\0\0";
/// On-disk format version written by this build.
pub const SEGMENT_VERSION: u32 = 1;
/// Size of the segment header.
pub const SEGMENT_HEADER_LEN: usize = 32;
/// Size of a record header (length, checksum, seq).
pub const RECORD_HEADER_LEN: usize = 16;
/// Largest payload accepted by append and by recovery (4 MiB).
pub const MAX_RECORD_BYTES: usize = 4 << 20;

/// Appends a record with a zero checksum; [`seal_record`] fills it in.
pub(crate) fn push_unsealed_record(buf: &mut Vec<u8>, seq: u64, payload: &[u8]) {
    let mut header = [0u8; RECORD_HEADER_LEN];
    header[0..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    header[8..16].copy_from_slice(&seq.to_le_bytes());
    buf.reserve(RECORD_HEADER_LEN + payload.len());
    buf.extend_from_slice(&header);
    buf.extend_from_slice(payload);
}

/// Fills in the checksum of the record at the start of `rec`; returns its
/// total length and seq.
pub(crate) fn seal_record(rec: &mut [u8]) -> (usize, u64) {
    let len = u32::from_le_bytes(rec[0..4].try_into().unwrap()) as usize;
    let end = RECORD_HEADER_LEN + len;
    let crc = record_crc(&rec[0..4], &rec[8..16], &rec[16..end]);
    rec[4..8].copy_from_slice(&crc.to_le_bytes());
    (end, record_seq(rec))
}

/// The seq of the record at the start of `rec`.
pub(crate) fn record_seq(rec: &[u8]) -> u64 {
    u64::from_le_bytes(rec[8..16].try_into().unwrap())
}

pub(crate) fn record_crc(len: &[u8], seq: &[u8], payload: &[u8]) -> u32 {
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
    seal_record(&mut out[start..]);
}

/// A record parsed from a segment's bytes.
pub(crate) struct Parsed<'a> {
    pub seq: u64,
    pub payload: &'a [u8],
    /// Bytes taken by header and payload.
    pub size: usize,
}

/// Why bytes of a segment are not a valid record or segment header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Defect {
    #[error("partial record header ({0} bytes)")]
    PartialHeader(usize),
    #[error("zero-filled bytes instead of a record")]
    ZeroFilled,
    #[error("record length {0} exceeds the maximum")]
    TooLong(usize),
    #[error("record length {len} runs past the end of the file ({left} bytes left)")]
    PastEnd { len: usize, left: usize },
    #[error("checksum mismatch in record seq {0}")]
    Checksum(u64),
    #[error("segment file is only {0} bytes long")]
    ShortSegment(usize),
    #[error("bad segment magic")]
    BadMagic,
    #[error("segment header checksum mismatch")]
    HeaderChecksum,
    #[error(
        "segment format version {0} is newer than this build's ({SEGMENT_VERSION}); upgrade hotrank"
    )]
    NewerVersion(u32),
    #[error("segment header says first seq {header}, file name says {name}")]
    SeqMismatch { header: u64, name: u64 },
}

/// Parses the record at the start of `bytes`; `Err` says why it is not a
/// valid record. Lengths are checked before anything is read beyond the
/// header, so an absurd length costs nothing.
pub(crate) fn parse_record(bytes: &[u8]) -> Result<Parsed<'_>, Defect> {
    if bytes.len() < RECORD_HEADER_LEN {
        return Err(Defect::PartialHeader(bytes.len()));
    }
    let rh = &bytes[..RECORD_HEADER_LEN];
    if rh.iter().all(|&b| b == 0) {
        return Err(Defect::ZeroFilled);
    }
    let len = u32::from_le_bytes(rh[0..4].try_into().unwrap()) as usize;
    let crc = u32::from_le_bytes(rh[4..8].try_into().unwrap());
    let seq = record_seq(rh);
    if len > MAX_RECORD_BYTES {
        return Err(Defect::TooLong(len));
    }
    let left = bytes.len() - RECORD_HEADER_LEN;
    if len > left {
        return Err(Defect::PastEnd { len, left });
    }
    let payload = &bytes[RECORD_HEADER_LEN..RECORD_HEADER_LEN + len];
    if record_crc(&rh[0..4], &rh[8..16], payload) != crc {
        return Err(Defect::Checksum(seq));
    }
    Ok(Parsed {
        seq,
        payload,
        size: RECORD_HEADER_LEN + len,
    })
}

/// The next offset at or after `from` where a valid record with a seq in
/// `min_seq..=max_seq` starts (a byte-by-byte search, for diagnostics and
/// salvage).
pub(crate) fn find_intact_record(
    bytes: &[u8],
    from: usize,
    min_seq: u64,
    max_seq: u64,
) -> Option<usize> {
    (from..bytes.len().saturating_sub(RECORD_HEADER_LEN - 1)).find(|&i| {
        let seq = record_seq(&bytes[i..]);
        (min_seq..=max_seq).contains(&seq) && parse_record(&bytes[i..]).is_ok()
    })
}

/// The header of a segment whose first record has seq `first_seq`.
pub fn segment_header(first_seq: u64, payload_version: u32) -> [u8; SEGMENT_HEADER_LEN] {
    let mut h = [0u8; SEGMENT_HEADER_LEN];
    h[0..8].copy_from_slice(&SEGMENT_MAGIC);
    h[8..12].copy_from_slice(&SEGMENT_VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&payload_version.to_le_bytes());
    h[16..24].copy_from_slice(&first_seq.to_le_bytes());
    let crc = crc32fast::hash(&h[0..24]);
    h[24..28].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Checks a segment header; returns its payload version.
pub(crate) fn check_segment_header(h: &[u8], first_seq: u64) -> Result<u32, Defect> {
    if h.len() < SEGMENT_HEADER_LEN {
        return Err(Defect::ShortSegment(h.len()));
    }
    if h[0..8] != SEGMENT_MAGIC {
        return Err(Defect::BadMagic);
    }
    let crc = u32::from_le_bytes(h[24..28].try_into().unwrap());
    if crc != crc32fast::hash(&h[0..24]) {
        return Err(Defect::HeaderChecksum);
    }
    let version = u32::from_le_bytes(h[8..12].try_into().unwrap());
    if version > SEGMENT_VERSION {
        return Err(Defect::NewerVersion(version));
    }
    let seq = u64::from_le_bytes(h[16..24].try_into().unwrap());
    if seq != first_seq {
        return Err(Defect::SeqMismatch {
            header: seq,
            name: first_seq,
        });
    }
    Ok(u32::from_le_bytes(h[12..16].try_into().unwrap()))
}

/// A header that a crash left short or all zeros (as opposed to garbage).
pub(crate) fn header_is_torn(h: &[u8]) -> bool {
    h.len() < SEGMENT_HEADER_LEN || h[..SEGMENT_HEADER_LEN].iter().all(|&b| b == 0)
}

/// File name of the segment starting at `first_seq`.
pub fn segment_file_name(first_seq: u64) -> String {
    format!("wal-{first_seq:020}.log")
}

pub(crate) fn parse_segment_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("wal-")?.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Name of the temp file a segment is prepared in.
pub(crate) fn temp_segment_file_name(first_seq: u64) -> String {
    format!("{}.tmp", segment_file_name(first_seq))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let p = parse_record(&buf).unwrap();
        assert_eq!((p.seq, p.payload, p.size), (7, &b"hello"[..], buf.len()));
    }

    #[test]
    fn segment_header_and_names() {
        let h = segment_header(42, 3);
        assert_eq!(check_segment_header(&h, 42), Ok(3));
        assert!(
            check_segment_header(&h, 43)
                .unwrap_err()
                .to_string()
                .contains("file name")
        );
        let mut bad = h;
        bad[17] ^= 1;
        assert!(
            check_segment_header(&bad, 42)
                .unwrap_err()
                .to_string()
                .contains("checksum")
        );
        assert!(check_segment_header(&[0; SEGMENT_HEADER_LEN], 42).is_err());
        assert!(header_is_torn(&[0; SEGMENT_HEADER_LEN]) && header_is_torn(&h[..5]));
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
        assert_eq!(parse_segment_file_name(&temp_segment_file_name(42)), None);
    }

    #[test]
    fn a_newer_format_version_is_refused_by_name() {
        let mut h = segment_header(1, 0);
        h[8..12].copy_from_slice(&(SEGMENT_VERSION + 1).to_le_bytes());
        let crc = crc32fast::hash(&h[0..24]);
        h[24..28].copy_from_slice(&crc.to_le_bytes());
        assert!(
            check_segment_header(&h, 1)
                .unwrap_err()
                .to_string()
                .contains("newer")
        );
    }

    #[test]
    fn intact_record_search_skips_garbage() {
        let mut bytes = vec![0xAB; 13];
        encode_record(&mut bytes, 100, b"abc");
        bytes.extend_from_slice(&[0; 5]);
        encode_record(&mut bytes, 101, b"defg");
        assert_eq!(find_intact_record(&bytes, 0, 99, 200), Some(13));
        assert_eq!(find_intact_record(&bytes, 14, 99, 200), Some(13 + 19 + 5));
        assert_eq!(find_intact_record(&bytes, 0, 1000, 2000), None);
    }
}
