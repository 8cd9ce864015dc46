//! How the embedded store's state and log records are encoded on disk, and
//! which encodings this build reads.
//!
//! Both are [postcard]: compact, but **positional** — a struct is its
//! fields in declaration order with no names or tags, so `#[serde(default)]`
//! does nothing (a missing trailing field is an "unexpected end" error, a
//! field added in the middle shifts every later one) and an old file can
//! even decode, wrongly, into a new layout. So the layout is versioned
//! explicitly instead: [`STATE_VERSION`] is written into the header of every
//! snapshot and every log segment (their "payload version"), and each
//! reader dispatches on it:
//!
//! - version 0: files written before the version was recorded; the layout
//!   is identical to version 1;
//! - version 1: `LogRecord` as it is in this build; `Data` as [`DataV1`]
//!   (the dedupe entries a postcard map in the middle of the state);
//! - version 2: log records as in version 1. A snapshot's state is the
//!   dedupe section first — its hash seed (u64 LE), its entry count `n`
//!   (u64 LE), then `n` fixed-width entries of [`DEDUPE_ENTRY`] bytes
//!   (article index u32, visitor u128, event type u8, last time i64, all
//!   little-endian) in the order of the table they were written from —
//!   then `Data` without them (postcard). The section's length is known
//!   from its head, so it is decoded on a thread of its own beside the
//!   rest, into a table pre-sized for `n` and hashed with the same seed,
//!   which puts each entry next to the one before it (see
//!   [`super::state::dedupe::Dedupe`]).
//! - version 3: as version 2, with the site's figures
//!   ([`super::state::site::SiteStats`]: quarantine by crawler family and
//!   visitors by hour) at the end of `Data`; version 2's `Data` is
//!   [`DataV2`]. Log records are unchanged but for an event's `bot`, now
//!   its crawler family (`src/crawler.rs`): one byte, 0 or 1 as the
//!   `bool` it was before, other values from this version on.
//! - version 4: as version 3, with the counted events by category and hour
//!   ([`super::state::categories::CategoryCounts`], `scale=category`) at
//!   the end of the site's figures, then the review's network evidence
//!   ([`super::state::net::NetEvidence`]) at the end of `Data`, and an
//!   event's network block ([`crate::model::Event::net`], a u64) at the
//!   end of its log encoding; version 3's are [`DataV3`] and
//!   [`LogRecordV3`] (an event's block reads 0, unknown). A version 3
//!   state converts with no network evidence and with the category
//!   counts derived from its articles' hourly buckets (every counted
//!   event they hold) and the articles' current categories: hours no
//!   bucket holds any more count nothing, and an article whose category
//!   changed before the upgrade counts all its past events in its
//!   current one.
//!
//! Changing the serialized layout of `Data` or `LogRecord` (adding,
//! removing, reordering or retyping a field or enum variant) must bump
//! [`STATE_VERSION`], keep a frozen copy of the old types in `frozen.rs`,
//! and decode the old version into them and convert. `tests/formats.rs` opens data
//! directories written by earlier builds (`tests/fixtures/`) and checks the
//! answers are unchanged, so a layout change without a version bump fails
//! there.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

mod frozen;

use super::state::Data;
use super::state::dedupe::{Dedupe, DedupeKey};
use super::state::record::LogRecord;
use crate::model::Timestamp;
use crate::store::snapshot::{SnapshotReader, open_snapshot};
use crate::store::storage::Storage;
use frozen::{DataV1, DataV2, DataV3, LogRecordV3};

/// Payload version written by this build (snapshots and log segments).
pub const STATE_VERSION: u32 = 4;

/// Bytes of one dedupe entry in a version 2 state.
pub const DEDUPE_ENTRY: usize = 4 + 16 + 1 + 8;

/// `Data` without its dedupe entries, as payload `version` (2 or later) lays it out.
fn decode_rest(version: u32, rest: &[u8]) -> Result<Data, postcard::Error> {
    match version {
        2 => postcard::from_bytes::<DataV2>(rest).map(Data::from),
        3 => postcard::from_bytes::<DataV3>(rest).map(Data::from),
        _ => postcard::from_bytes::<Data>(rest),
    }
}

/// Why a snapshot's state or a log record cannot be decoded or encoded.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state does not decode: {0}")]
    Decode(#[source] postcard::Error),
    #[error("state is cut short in its dedupe section")]
    CutShort,
    #[error("a dedupe entry names an article the state does not hold")]
    UnknownArticle,
    #[error(
        "{what} was written by a newer hotrank (state version {version}; this build reads up to {STATE_VERSION}): upgrade hotrank"
    )]
    Newer { what: &'static str, version: u32 },
    #[error("log record does not decode: {0}")]
    Record(#[source] postcard::Error),
    #[error("state encoding: {0}")]
    Encode(#[source] io::Error),
}

fn newer(what: &'static str, version: u32) -> StateError {
    StateError::Newer { what, version }
}

/// Decodes a snapshot's state written with payload `version`; with
/// `parallel`, its dedupe section on a second thread.
pub fn decode_state(version: u32, bytes: &[u8], parallel: bool) -> Result<Data, StateError> {
    let bad = StateError::Decode;
    match version {
        0 | 1 => postcard::from_bytes::<DataV1>(bytes)
            .map(Data::from)
            .map_err(bad),
        2..=4 => {
            let (seed, section, rest) = split_v2(bytes)?;
            let (data, dedupe) = if parallel {
                std::thread::scope(|s| {
                    let dedupe = std::thread::Builder::new()
                        .name("hotrank-load".into())
                        .spawn_scoped(s, || decode_dedupe(seed, section))
                        .expect("spawning the snapshot loader");
                    let data = decode_rest(version, rest);
                    (data, dedupe.join().expect("dedupe decoding panicked"))
                })
            } else {
                (decode_rest(version, rest), decode_dedupe(seed, section))
            };
            let (mut data, (dedupe, top)) = (data.map_err(bad)?, dedupe);
            if top.is_some_and(|i| i as usize >= data.articles.len()) {
                return Err(StateError::UnknownArticle);
            }
            data.dedupe = dedupe;
            Ok(data)
        }
        v => Err(newer("the snapshot", v)),
    }
}

/// A version 2 state's dedupe seed, dedupe entries and the rest.
fn split_v2(bytes: &[u8]) -> Result<(u64, &[u8], &[u8]), StateError> {
    let word = |at: usize| -> Result<u64, StateError> {
        let b = bytes.get(at..at + 8).ok_or(StateError::CutShort)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap()))
    };
    let (seed, n) = (word(0)?, word(8)?);
    let len = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_mul(DEDUPE_ENTRY))
        .filter(|&len| len <= bytes.len() - 16)
        .ok_or(StateError::CutShort)?;
    let (section, rest) = bytes[16..].split_at(len);
    Ok((seed, section, rest))
}

/// One fixed-width dedupe entry of a version 2 section.
fn parse_entry(e: &[u8]) -> (DedupeKey, Timestamp) {
    let idx = u32::from_le_bytes(e[0..4].try_into().unwrap());
    let visitor = u128::from_le_bytes(e[4..20].try_into().unwrap());
    let ts = i64::from_le_bytes(e[21..29].try_into().unwrap());
    (DedupeKey::new(idx, visitor, e[20]), ts)
}

/// The dedupe entries of a version 2 section and the highest article
/// index among them.
fn decode_dedupe(seed: u64, section: &[u8]) -> (Dedupe, Option<u32>) {
    let mut d = Dedupe::with_seed(seed, section.len() / DEDUPE_ENTRY);
    let mut top = None;
    for e in section.chunks_exact(DEDUPE_ENTRY) {
        let (key, ts) = parse_entry(e);
        d.insert(key, ts);
        top = top.max(Some(key.parts().0));
    }
    (d, top)
}

/// Entries a dedupe section is written and read in at a time.
const CHUNK: usize = 2048;

/// Buffers a dedupe section's bytes on their way to a writer.
struct SectionWriter<'a> {
    w: &'a mut dyn Write,
    buf: Vec<u8>,
}

impl<'a> SectionWriter<'a> {
    /// Starts a section of `n` entries hashed with `seed`.
    fn new(w: &'a mut dyn Write, seed: u64, n: u64) -> Self {
        let mut buf = Vec::with_capacity(CHUNK * DEDUPE_ENTRY);
        buf.extend_from_slice(&seed.to_le_bytes());
        buf.extend_from_slice(&n.to_le_bytes());
        SectionWriter { w, buf }
    }

    fn push(&mut self, key: &DedupeKey, ts: Timestamp) -> io::Result<()> {
        if self.buf.len() + DEDUPE_ENTRY > self.buf.capacity() {
            self.w.write_all(&self.buf)?;
            self.buf.clear();
        }
        let (idx, visitor, kind) = key.parts();
        self.buf.extend_from_slice(&idx.to_le_bytes());
        self.buf.extend_from_slice(&visitor.to_le_bytes());
        self.buf.push(kind);
        self.buf.extend_from_slice(&ts.to_le_bytes());
        Ok(())
    }

    fn finish(self) -> io::Result<()> {
        self.w.write_all(&self.buf)
    }
}

/// Writes the dedupe section of a version 2 state.
fn write_dedupe(d: &Dedupe, w: &mut dyn Write) -> io::Result<()> {
    let mut out = SectionWriter::new(w, d.seed(), d.len() as u64);
    for (key, ts) in d.iter() {
        out.push(&key, ts)?;
    }
    out.finish()
}

/// Reads the head of a version 2 state: its dedupe seed and entry count
/// (checked against the bytes `left` after the head).
fn read_head(r: &mut dyn Read, left: u64) -> io::Result<(u64, u64)> {
    let mut head = [0u8; 16];
    r.read_exact(&mut head)?;
    let seed = u64::from_le_bytes(head[0..8].try_into().unwrap());
    let n = u64::from_le_bytes(head[8..16].try_into().unwrap());
    if n.checked_mul(DEDUPE_ENTRY as u64)
        .is_none_or(|len| len > left.saturating_sub(16))
    {
        return Err(invalid_data("state is cut short in its dedupe section"));
    }
    Ok((seed, n))
}

/// Reads `n` dedupe entries from `r` a chunk at a time, handing each to
/// `each`; returns the checksum of the section's bytes.
fn read_section(
    r: &mut dyn Read,
    n: u64,
    mut each: impl FnMut(DedupeKey, Timestamp) -> io::Result<()>,
) -> io::Result<u32> {
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![0u8; CHUNK * DEDUPE_ENTRY];
    let mut left = n;
    while left > 0 {
        let take = left.min(CHUNK as u64) as usize;
        let bytes = &mut buf[..take * DEDUPE_ENTRY];
        r.read_exact(bytes)?;
        crc.update(bytes);
        for e in bytes.chunks_exact(DEDUPE_ENTRY) {
            let (key, ts) = parse_entry(e);
            each(key, ts)?;
        }
        left -= take as u64;
    }
    Ok(crc.finalize())
}

fn invalid_data(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Where the previous snapshot's dedupe section is, for a rebuild that
/// leaves it on disk ([`read_state_streamed`], [`write_state_merged`]).
#[derive(Debug, Clone)]
pub struct OldSection {
    pub path: PathBuf,
    seed: u64,
    n: u64,
    /// Checksum of the section's bytes as first read (and verified, with
    /// the rest of the payload, against the file's checksum).
    crc: u32,
}

/// Reads a snapshot's state for a rebuild as a stream: a version 2
/// state's dedupe entries are checksummed and passed over, not held (the
/// state comes back with an empty dedupe table of the same seed, and where
/// to find them); the rest is decoded. Older versions are decoded whole.
/// Fails with `InvalidData` if the payload's checksum does not match (the
/// whole payload is read before anything decoded is handed back).
pub fn read_state_streamed(
    mut r: SnapshotReader,
    path: &Path,
) -> io::Result<(Data, Option<OldSection>)> {
    let version = r.version();
    if version < 2 {
        let mut bytes = Vec::new();
        r.read_to_end(&mut bytes)?;
        r.finish()?;
        let data = decode_state(version, &bytes, false)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        return Ok((data, None));
    }
    if version > STATE_VERSION {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            newer("the snapshot", version),
        ));
    }
    let len = r.len();
    let (seed, n) = read_head(&mut r, len)?;
    let crc = read_section(&mut r, n, |_, _| Ok(()))?;
    let mut rest = Vec::new();
    r.read_to_end(&mut rest)?;
    r.finish()?;
    let mut data = decode_rest(version, &rest)
        .map_err(|e| invalid_data(format!("state does not decode: {e}")))?;
    data.dedupe = Dedupe::with_seed(seed, 0);
    let old = OldSection {
        path: path.to_path_buf(),
        seed,
        n,
        crc,
    };
    Ok((data, Some(old)))
}

/// Reads the old section again (from `storage`), checking it is the one
/// [`read_state_streamed`] passed over, and hands every entry to `each`.
fn reread(
    storage: &dyn Storage,
    old: &OldSection,
    articles: usize,
    mut each: impl FnMut(DedupeKey, Timestamp) -> io::Result<()>,
) -> io::Result<()> {
    let mut r = open_snapshot(storage, &old.path)?;
    let left = r.len();
    if read_head(&mut r, left)? != (old.seed, old.n) {
        return Err(invalid_data("the previous snapshot changed while read"));
    }
    let crc = read_section(&mut r, old.n, |key, ts| {
        if key.parts().0 as usize >= articles {
            return Err(invalid_data(
                "a dedupe entry names an article the state does not hold",
            ));
        }
        each(key, ts)
    })?;
    if crc != old.crc {
        return Err(invalid_data(
            "the previous snapshot's dedupe section changed while read",
        ));
    }
    Ok(())
}

/// Writes the state of a rebuild — `data` as replayed on top of a state
/// read by [`read_state_streamed`] — streaming the dedupe section from a
/// merge: every entry of the old section (read again from disk) with its
/// time raised to the one the replay left in `data` for the same key, then
/// the replay's new keys; entries not after `horizon` (the last retention
/// sweep's, if any) are left out, as [`Data::expire`] leaves them out of
/// the live table. The entries equal those of [`write_state`] for the same
/// state held whole (their order differs). Takes the replay's entries out
/// of `data`.
pub fn write_state_merged(
    data: &mut Data,
    old: &OldSection,
    storage: &dyn Storage,
    horizon: Option<Timestamp>,
    w: &mut dyn Write,
) -> io::Result<()> {
    let alive = |ts: Timestamp| horizon.is_none_or(|h| ts > h);
    let articles = data.articles.len();
    // The count goes first: one pass to count, one to write.
    let mut kept = data.dedupe.len() as u64;
    reread(storage, old, articles, |key, ts| {
        kept += u64::from(!data.dedupe.contains_key(&key) && alive(ts));
        Ok(())
    })?;
    let mut out = SectionWriter::new(w, old.seed, kept);
    let mut written = 0u64;
    let replayed = &mut data.dedupe;
    reread(storage, old, articles, |key, ts| {
        let ts = match replayed.remove(&key) {
            Some(t) => t.max(ts),
            None if alive(ts) => ts,
            None => return Ok(()),
        };
        written += 1;
        out.push(&key, ts)
    })?;
    for (key, ts) in replayed.iter() {
        written += 1;
        out.push(&key, ts)?;
    }
    out.finish()?;
    if written != kept {
        return Err(invalid_data(
            "the previous snapshot's dedupe section changed while read",
        ));
    }
    write_rest(data, w)
}

/// Decodes a log record written with payload `version`.
pub fn decode_record(version: u32, bytes: &[u8]) -> Result<LogRecord, StateError> {
    match version {
        0..=3 => postcard::from_bytes::<LogRecordV3>(bytes)
            .map(LogRecord::from)
            .map_err(StateError::Record),
        4 => postcard::from_bytes(bytes).map_err(StateError::Record),
        v => Err(newer("the log", v)),
    }
}

pub fn encode_state(data: &Data) -> Result<Vec<u8>, StateError> {
    let mut out = Vec::new();
    write_state(data, &mut out).map_err(StateError::Encode)?;
    Ok(out)
}

/// Streams the encoding of `data` into `w` (the same bytes as
/// [`encode_state`]); a write error is returned as it was.
pub fn write_state(data: &Data, w: &mut dyn Write) -> io::Result<()> {
    write_dedupe(&data.dedupe, w)?;
    write_rest(data, w)
}

/// Writes `data` without its dedupe entries (postcard).
fn write_rest(data: &Data, w: &mut dyn Write) -> io::Result<()> {
    struct Keep<'a> {
        w: &'a mut dyn std::io::Write,
        error: Option<std::io::Error>,
    }
    impl std::io::Write for Keep<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.w.write(buf)
        }
        fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
            self.w.write_all(buf).inspect_err(|e| {
                self.error
                    .get_or_insert_with(|| std::io::Error::new(e.kind(), e.to_string()));
            })
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.w.flush()
        }
    }
    let mut keep = Keep { w, error: None };
    match postcard::to_io(data, &mut keep) {
        Ok(_) => Ok(()),
        Err(e) => Err(keep
            .error
            .take()
            .unwrap_or_else(|| std::io::Error::other(format!("state encoding: {e}")))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ArticleId, Event, EventType, Verdict};
    use crate::store::StoreSettings;

    /// A state with `n` articles and a dedupe entry per (article, visitor).
    fn state(n: u64) -> Data {
        let mut d = Data::new(&StoreSettings::default());
        for i in 0..n {
            for v in 0..3u128 {
                let ev = Event {
                    kind: EventType::View,
                    article: ArticleId::from_number(i + 1),
                    visitor: v << 64 | u128::from(i),
                    ip: 1,
                    ts: 1_800_000_000 + i as i64,
                    arrival_ms: 1_800_000_000_000,
                    event_id: None,
                    seconds: 0,
                    bot: crate::crawler::Crawler::NONE,
                    trusted: true,
                    net: 0,
                };
                d.apply(&LogRecord::Event {
                    ev,
                    verdict: Verdict::Counted,
                });
            }
        }
        d
    }

    fn entries(d: &Data) -> Vec<(DedupeKey, Timestamp)> {
        let mut v: Vec<_> = d.dedupe.iter().collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn versions_up_to_this_build_decode_and_newer_ones_are_refused_by_name() {
        let data = Data::new(&crate::store::StoreSettings::default());
        let bytes = encode_state(&data).unwrap();
        assert!(decode_state(STATE_VERSION, &bytes, false).is_ok());
        let err = decode_state(STATE_VERSION + 1, &bytes, false)
            .err()
            .unwrap();
        assert!(err.to_string().contains("newer hotrank"), "{err}");
        let err = decode_record(STATE_VERSION + 1, &[]).err().unwrap();
        assert!(
            err.to_string()
                .contains("the log was written by a newer hotrank"),
            "{err}"
        );
    }

    /// Version 4: an event's network block round-trips in the log, and
    /// the review's evidence in the state.
    #[test]
    fn network_blocks_and_their_evidence_round_trip() {
        let s = StoreSettings {
            net_evidence_hours: 2,
            ..StoreSettings::default()
        };
        let mut d = Data::new(&s);
        for v in 0..50u128 {
            let LogRecord::Event { mut ev, verdict } = view(1, v, 1_800_000_000) else {
                unreachable!()
            };
            ev.net = 7 + (v % 5) as u64;
            let rec = LogRecord::Event { ev, verdict };
            let bytes = postcard::to_allocvec(&rec).unwrap();
            assert_eq!(decode_record(STATE_VERSION, &bytes).unwrap(), rec);
            d.apply(&rec);
        }
        let hours = crate::time::last_hours(crate::model::hour_of(1_800_000_000), 2);
        let before = d.net_evidence(0, hours.clone());
        assert_eq!(
            (before.blocks, before.visitors, before.counted),
            (5, 50, 50)
        );
        let mut back = decode_state(STATE_VERSION, &encode_state(&d).unwrap(), false).unwrap();
        back.restore(&s);
        assert_eq!(back.net_evidence(0, hours.clone()), before);
        // With the mode off the evidence is dropped at load.
        back.restore(&StoreSettings::default());
        assert_eq!(back.net_evidence(0, hours).blocks, 0);
    }

    /// A version 3 state (the site's figures without the category counts:
    /// this build's bytes with an empty map at the end, cut off) converts
    /// with the counts rebuilt from the articles' hourly buckets, by the
    /// articles' current categories; a version 4 state keeps its own.
    #[test]
    fn a_version_3_state_derives_its_category_counts_from_the_buckets() {
        use crate::model::{ArticleMeta, category_hours, day_of};
        let mut d = state(40);
        let t = 1_800_000_000;
        let news = ArticleMeta {
            category: Some("news".into()),
            published_at: t,
            ..ArticleMeta::default()
        };
        d.apply(&LogRecord::Put {
            id: ArticleId::from_number(1),
            meta: news,
        });
        d.apply(&view(1, 99, t + 5));
        let window = || category_hours(day_of(t + 100), t + 100);
        let (mut whole, rest) = (d.clone(), d);
        assert_eq!(whole.site.categories.events(Some("news"), window()), 1);
        assert_eq!(whole.site.categories.events(None, window()), 120);
        // Version 3's bytes: the empty network evidence and the empty map
        // of categories before it left off the end.
        let mut v3 = rest;
        v3.site.categories = Default::default();
        let mut bytes = encode_state(&v3).unwrap();
        assert_eq!(bytes.pop(), Some(0), "no network evidence: one zero byte");
        assert_eq!(bytes.pop(), Some(0), "an empty map is one zero byte");
        let mut back = decode_state(3, &bytes, false).unwrap();
        // Article 1's three earlier views were counted in no category;
        // the buckets only know its category now.
        assert_eq!(back.site.categories.events(Some("news"), window()), 4);
        assert_eq!(back.site.categories.events(None, window()), 117);
        assert_eq!(back.counted, whole.counted);
        let again = decode_state(STATE_VERSION, &encode_state(&whole).unwrap(), false).unwrap();
        let mut again = again;
        assert_eq!(again.site.categories.events(Some("news"), window()), 1);
    }

    #[test]
    fn the_dedupe_section_round_trips_on_one_thread_and_on_two() {
        let d = state(500);
        assert_eq!(d.dedupe.len(), 1500);
        let bytes = encode_state(&d).unwrap();
        for parallel in [false, true] {
            let back = decode_state(STATE_VERSION, &bytes, parallel).unwrap();
            assert_eq!(entries(&back), entries(&d));
            assert_eq!(back.dedupe.seed(), d.dedupe.seed());
            assert_eq!(back.articles.len(), 500);
            assert_eq!(back.counted, d.counted);
            assert_eq!(encode_state(&back).unwrap().len(), bytes.len());
        }
    }

    fn view(article: u64, visitor: u128, ts: i64) -> LogRecord {
        LogRecord::Event {
            ev: Event {
                kind: EventType::View,
                article: ArticleId::from_number(article),
                visitor,
                ip: 1,
                ts,
                arrival_ms: 1_800_000_000_000,
                event_id: None,
                seconds: 0,
                bot: crate::crawler::Crawler::NONE,
                trusted: true,
                net: 0,
            },
            verdict: Verdict::Counted,
        }
    }

    /// The bytes of a version 2 state's dedupe section and the rest.
    fn sections(bytes: &[u8]) -> (Vec<(DedupeKey, Timestamp)>, &[u8]) {
        let (_, section, rest) = split_v2(bytes).unwrap();
        let mut entries: Vec<_> = section
            .chunks_exact(DEDUPE_ENTRY)
            .map(parse_entry)
            .collect();
        entries.sort_unstable();
        (entries, rest)
    }

    #[test]
    fn a_merged_dedupe_section_equals_the_whole_one() {
        use crate::store::snapshot::write_snapshot;
        use crate::store::storage::sim::SimDisk;
        let s = StoreSettings::default();
        let disk = SimDisk::new();
        let dir = Path::new("/data/snapshots");
        let before = state(200);
        let path = write_snapshot(
            &disk,
            dir,
            1,
            STATE_VERSION,
            &encode_state(&before).unwrap(),
            2,
        )
        .unwrap();
        // Raised, back-dated (kept as they were where they were later;
        // brought back past retention where not), new visitors, a new article.
        let mut log = Vec::new();
        for i in 0..200u64 {
            let known = 1u128 << 64 | u128::from(i);
            log.push(view(i + 1, known, 1_800_000_500 + i as i64));
            log.push(view(i + 1, 2u128 << 64 | u128::from(i), 1_800_000_101));
            log.push(view(i + 1, 9u128 << 64 | u128::from(i), 1_800_000_300));
        }
        log.push(view(999, 5, 1_800_000_400));
        // Retention drops the old entries of the first 100 articles.
        let now = 1_800_000_100 + i64::from(s.dedupe_window_secs) + 3600;
        let horizon = super::super::state::retention::dedupe_horizon(now, &s);

        // The state held whole, as a restart loads it.
        let payload = crate::store::snapshot::read_snapshot(&disk, &path)
            .unwrap()
            .payload;
        let mut whole = decode_state(STATE_VERSION, &payload, false).unwrap();
        whole.restore(&s);
        let reader = open_snapshot(&disk, &path).unwrap();
        let (mut streamed, old) = read_state_streamed(reader, &path).unwrap();
        streamed.restore(&s);
        assert!(streamed.dedupe.is_empty(), "the old entries stay on disk");
        for rec in &log {
            whole.apply(rec);
            streamed.apply(rec);
        }
        whole.expire(now, &s);
        streamed.expire(now, &s);
        let want = encode_state(&whole).unwrap();
        let mut got = Vec::new();
        write_state_merged(&mut streamed, &old.unwrap(), &disk, Some(horizon), &mut got).unwrap();

        assert_eq!(got.len(), want.len());
        assert_eq!(got[..16], want[..16], "seed and count");
        let (got_entries, got_rest) = sections(&got);
        let (want_entries, want_rest) = sections(&want);
        assert_eq!(got_entries, want_entries);
        assert_eq!(got_rest, want_rest, "the rest of the state");
        // Some of each kind made it through the merge.
        let raised = want_entries
            .iter()
            .filter(|(_, t)| *t >= 1_800_000_500)
            .count();
        assert_eq!(raised, 200);
        // 99 old ones alive, 200 raised, 200 back-dated, 200 + 1 new.
        assert_eq!(want_entries.len(), 700);
    }

    #[test]
    fn a_damaged_previous_snapshot_is_refused_by_the_streamed_rebuild() {
        use crate::store::snapshot::write_snapshot;
        use crate::store::storage::sim::SimDisk;
        let disk = SimDisk::new();
        let dir = Path::new("/data/snapshots");
        let bytes = encode_state(&state(50)).unwrap();
        let path = write_snapshot(&disk, dir, 1, STATE_VERSION, &bytes, 2).unwrap();
        let good = disk.read(&path).unwrap();
        // A visitor byte of a dedupe entry flipped: refused when first read.
        let mut bad = good.clone();
        bad[24 + 16 + DEDUPE_ENTRY + 10] ^= 0x40;
        disk.overwrite(&path, &bad).unwrap();
        let err = read_state_streamed(open_snapshot(&disk, &path).unwrap(), &path)
            .err()
            .unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        // Flipped after it was read, before the merge reads it again: refused then.
        disk.overwrite(&path, &good).unwrap();
        let (mut data, old) =
            read_state_streamed(open_snapshot(&disk, &path).unwrap(), &path).unwrap();
        data.restore(&StoreSettings::default());
        disk.overwrite(&path, &bad).unwrap();
        let err = write_state_merged(&mut data, &old.unwrap(), &disk, None, &mut Vec::new())
            .err()
            .unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    }

    #[test]
    fn a_damaged_dedupe_section_is_refused_not_misread() {
        let d = state(10);
        let mut bytes = encode_state(&d).unwrap();
        // More entries than the payload holds.
        let mut long = bytes.clone();
        long[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        let err = decode_state(STATE_VERSION, &long, true).err().unwrap();
        assert!(err.to_string().contains("cut short"), "{err}");
        assert!(decode_state(STATE_VERSION, &bytes[..12], false).is_err());
        // An entry naming an article past the last.
        bytes[16..20].copy_from_slice(&10u32.to_le_bytes());
        let err = decode_state(STATE_VERSION, &bytes, true).err().unwrap();
        assert!(err.to_string().contains("names an article"), "{err}");
    }
}
