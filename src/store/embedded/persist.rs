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
//!   [`super::state::Dedupe`]).
//!
//! Changing the serialized layout of `Data` or `LogRecord` (adding,
//! removing, reordering or retyping a field or enum variant) must bump
//! [`STATE_VERSION`], keep a frozen copy of the old types here, and decode
//! the old version into them and convert. `tests/formats.rs` opens data
//! directories written by earlier builds (`tests/fixtures/`) and checks the
//! answers are unchanged, so a layout change without a version bump fails
//! there.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::state::{Article, Data, Dedupe, DedupeKey, LogRecord};
use crate::gate::{KeyedMap, SlidingLimiter};
use crate::model::{Quarantine, Timestamp};
use crate::store::StoreSettings;

/// Payload version written by this build (snapshots and log segments).
pub const STATE_VERSION: u32 = 2;

/// Bytes of one dedupe entry in a version 2 state.
pub const DEDUPE_ENTRY: usize = 4 + 16 + 1 + 8;

/// `Data` as versions 0 and 1 laid it out (frozen).
#[derive(Deserialize)]
struct DataV1 {
    articles: Vec<Article>,
    /// A map in postcard is its length and its pairs, as a sequence is.
    dedupe: Vec<((u32, u128, u8), Timestamp)>,
    event_ids: KeyedMap<u128, Timestamp>,
    visitor_limits: SlidingLimiter<u128>,
    ip_limits: SlidingLimiter<u64>,
    counted: u64,
    quarantine: Quarantine,
    quarantine_by_hour: BTreeMap<i64, Quarantine>,
    #[serde(default)]
    next_post_id: u64,
}

impl From<DataV1> for Data {
    fn from(v: DataV1) -> Data {
        let mut d = Data::new(&StoreSettings::default());
        d.dedupe = Dedupe::with_seed(d.dedupe.seed(), v.dedupe.len());
        (d.dedupe).extend(
            (v.dedupe.into_iter())
                .map(|((idx, visitor, kind), t)| (DedupeKey::new(idx, visitor, kind), t)),
        );
        d.articles = v.articles;
        d.event_ids = v.event_ids;
        d.visitor_limits = v.visitor_limits;
        d.ip_limits = v.ip_limits;
        d.counted = v.counted;
        d.quarantine = v.quarantine;
        d.quarantine_by_hour = v.quarantine_by_hour;
        d.next_post_id = v.next_post_id;
        d
    }
}

fn newer(what: &str, version: u32) -> String {
    format!(
        "{what} was written by a newer hotrank (state version {version}; this build reads up to {STATE_VERSION}): upgrade hotrank"
    )
}

/// Decodes a snapshot's state written with payload `version`; with
/// `parallel`, its dedupe section on a second thread.
pub fn decode_state(version: u32, bytes: &[u8], parallel: bool) -> Result<Data, String> {
    let bad = |e: postcard::Error| format!("state does not decode: {e}");
    match version {
        0 | 1 => postcard::from_bytes::<DataV1>(bytes)
            .map(Data::from)
            .map_err(bad),
        2 => {
            let (seed, section, rest) = split_v2(bytes)?;
            let (data, dedupe) = if parallel {
                std::thread::scope(|s| {
                    let dedupe = std::thread::Builder::new()
                        .name("hotrank-load".into())
                        .spawn_scoped(s, || decode_dedupe(seed, section))
                        .expect("spawning the snapshot loader");
                    let data = postcard::from_bytes::<Data>(rest);
                    (data, dedupe.join().expect("dedupe decoding panicked"))
                })
            } else {
                (
                    postcard::from_bytes::<Data>(rest),
                    decode_dedupe(seed, section),
                )
            };
            let (mut data, (dedupe, top)) = (data.map_err(bad)?, dedupe);
            if top.is_some_and(|i| i as usize >= data.articles.len()) {
                return Err("a dedupe entry names an article the state does not hold".into());
            }
            data.dedupe = dedupe;
            Ok(data)
        }
        v => Err(newer("the snapshot", v)),
    }
}

/// A version 2 state's dedupe seed, dedupe entries and the rest.
fn split_v2(bytes: &[u8]) -> Result<(u64, &[u8], &[u8]), String> {
    let short = || "state is cut short in its dedupe section".to_string();
    let word = |at: usize| -> Result<u64, String> {
        let b = bytes.get(at..at + 8).ok_or_else(short)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap()))
    };
    let (seed, n) = (word(0)?, word(8)?);
    let len = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_mul(DEDUPE_ENTRY))
        .filter(|&len| len <= bytes.len() - 16)
        .ok_or_else(short)?;
    let (section, rest) = bytes[16..].split_at(len);
    Ok((seed, section, rest))
}

/// The dedupe entries of a version 2 section and the highest article
/// index among them.
fn decode_dedupe(seed: u64, section: &[u8]) -> (Dedupe, Option<u32>) {
    let mut d = Dedupe::with_seed(seed, section.len() / DEDUPE_ENTRY);
    let mut top = None;
    for e in section.chunks_exact(DEDUPE_ENTRY) {
        let idx = u32::from_le_bytes(e[0..4].try_into().unwrap());
        let visitor = u128::from_le_bytes(e[4..20].try_into().unwrap());
        let ts = i64::from_le_bytes(e[21..29].try_into().unwrap());
        d.insert(DedupeKey::new(idx, visitor, e[20]), ts);
        top = top.max(Some(idx));
    }
    (d, top)
}

/// Writes the dedupe section of a version 2 state.
fn write_dedupe(d: &Dedupe, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    const CHUNK: usize = 2048;
    let mut buf = Vec::with_capacity(CHUNK * DEDUPE_ENTRY);
    buf.extend_from_slice(&d.seed().to_le_bytes());
    buf.extend_from_slice(&(d.len() as u64).to_le_bytes());
    for (key, &ts) in d.iter() {
        let (idx, visitor, kind) = key.parts();
        if buf.len() + DEDUPE_ENTRY > buf.capacity() {
            w.write_all(&buf)?;
            buf.clear();
        }
        buf.extend_from_slice(&idx.to_le_bytes());
        buf.extend_from_slice(&visitor.to_le_bytes());
        buf.push(kind);
        buf.extend_from_slice(&ts.to_le_bytes());
    }
    w.write_all(&buf)
}

/// Decodes a log record written with payload `version`.
pub fn decode_record(version: u32, bytes: &[u8]) -> Result<LogRecord, String> {
    match version {
        0..=2 => {
            postcard::from_bytes(bytes).map_err(|e| format!("log record does not decode: {e}"))
        }
        v => Err(newer("the log", v)),
    }
}

pub fn encode_state(data: &Data) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    write_state(data, &mut out).map_err(|e| format!("state encoding: {e}"))?;
    Ok(out)
}

/// Streams the encoding of `data` into `w` (the same bytes as
/// [`encode_state`]); a write error is returned as it was.
pub fn write_state(data: &Data, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    write_dedupe(&data.dedupe, w)?;
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
                    bot: false,
                    trusted: true,
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
        let mut v: Vec<_> = d.dedupe.iter().map(|(&k, &t)| (k, t)).collect();
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
        assert!(err.contains("newer hotrank"), "{err}");
        let err = decode_record(STATE_VERSION + 1, &[]).err().unwrap();
        assert!(
            err.contains("the log was written by a newer hotrank"),
            "{err}"
        );
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

    #[test]
    fn a_dedupe_slot_is_32_bytes() {
        assert_eq!(std::mem::size_of::<(DedupeKey, Timestamp)>(), 32);
        let k = DedupeKey::new(7, u128::MAX - 5, 3);
        assert_eq!(k.parts(), (7, u128::MAX - 5, 3));
    }

    #[test]
    fn a_damaged_dedupe_section_is_refused_not_misread() {
        let d = state(10);
        let mut bytes = encode_state(&d).unwrap();
        // More entries than the payload holds.
        let mut long = bytes.clone();
        long[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        let err = decode_state(STATE_VERSION, &long, true).err().unwrap();
        assert!(err.contains("cut short"), "{err}");
        assert!(decode_state(STATE_VERSION, &bytes[..12], false).is_err());
        // An entry naming an article past the last.
        bytes[16..20].copy_from_slice(&10u32.to_le_bytes());
        let err = decode_state(STATE_VERSION, &bytes, true).err().unwrap();
        assert!(err.contains("names an article"), "{err}");
    }
}
