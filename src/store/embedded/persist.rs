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
//! - version 1: `Data` and `LogRecord` as they are in this build.
//!
//! Changing the serialized layout of `Data` or `LogRecord` (adding,
//! removing, reordering or retyping a field or enum variant) must bump
//! [`STATE_VERSION`], keep a frozen copy of the old types here, and decode
//! the old version into them and convert. `tests/formats.rs` opens data
//! directories written by earlier builds (`tests/fixtures/`) and checks the
//! answers are unchanged, so a layout change without a version bump fails
//! there.

use super::state::{Data, LogRecord};

/// Payload version written by this build (snapshots and log segments).
pub const STATE_VERSION: u32 = 1;

fn newer(what: &str, version: u32) -> String {
    format!(
        "{what} was written by a newer hotrank (state version {version}; this build reads up to {STATE_VERSION}): upgrade hotrank"
    )
}

/// Decodes a snapshot's state written with payload `version`.
pub fn decode_state(version: u32, bytes: &[u8]) -> Result<Data, String> {
    match version {
        0 | 1 => postcard::from_bytes(bytes).map_err(|e| format!("state does not decode: {e}")),
        v => Err(newer("the snapshot", v)),
    }
}

/// Decodes a log record written with payload `version`.
pub fn decode_record(version: u32, bytes: &[u8]) -> Result<LogRecord, String> {
    match version {
        0 | 1 => {
            postcard::from_bytes(bytes).map_err(|e| format!("log record does not decode: {e}"))
        }
        v => Err(newer("the log", v)),
    }
}

pub fn encode_state(data: &Data) -> Result<Vec<u8>, String> {
    postcard::to_allocvec(data).map_err(|e| format!("state encoding: {e}"))
}

/// Streams the encoding of `data` into `w` (the same bytes as
/// [`encode_state`]); a write error is returned as it was.
pub fn write_state(data: &Data, w: &mut dyn std::io::Write) -> std::io::Result<()> {
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

    #[test]
    fn versions_up_to_this_build_decode_and_newer_ones_are_refused_by_name() {
        let data = Data::new(&crate::store::StoreSettings::default());
        let bytes = encode_state(&data).unwrap();
        assert!(decode_state(0, &bytes).is_ok());
        assert!(decode_state(STATE_VERSION, &bytes).is_ok());
        let err = decode_state(STATE_VERSION + 1, &bytes).err().unwrap();
        assert!(err.contains("newer hotrank"), "{err}");
        let err = decode_record(STATE_VERSION + 1, &[]).err().unwrap();
        assert!(
            err.contains("the log was written by a newer hotrank"),
            "{err}"
        );
    }
}
