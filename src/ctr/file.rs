//! `ctr.json` in the data dir: the embedded server's click-through counts,
//! rewritten whole (a temporary file, synced, renamed over the old one, the
//! directory synced) so that a crash leaves the old file or the new one,
//! never a mix. What a crash loses is what was counted since the last
//! write: at most `ctr.flush_secs` of impressions and clicks.
//!
//! ```json
//! {"version": 1, "lists": {"gravity:24h": {"1": [120, 9], "2": [118, 4]}}}
//! ```
//! Each position holds `[impressions, clicks]`.

use std::io::{Read, Write};
use std::path::Path;

use serde_json::{Map, Value, json};

use super::{Counts, CtrError, MAX_POSITION, Tally, parse_list};
use crate::store::storage::{Disk, Storage};

pub const NAME: &str = "ctr.json";

/// The counts in `path`; none if it does not exist.
pub fn load(path: &Path) -> Result<Counts, CtrError> {
    let bad = |why: String| CtrError(format!("{}: {why}", path.display()));
    let mut text = String::new();
    match Disk.open_read(path) {
        Ok(mut f) => f
            .read_to_string(&mut text)
            .map_err(|e| bad(e.to_string()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Counts::new()),
        Err(e) => return Err(bad(e.to_string())),
    };
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if v["version"] != 1 {
        return Err(bad("not a version 1 click-through file".into()));
    }
    let lists = v["lists"]
        .as_object()
        .ok_or_else(|| bad("no \"lists\" object".into()))?;
    let mut counts = Counts::new();
    for (list, positions) in lists {
        parse_list(list).map_err(bad)?;
        let positions = positions
            .as_object()
            .ok_or_else(|| bad(format!("list {list:?} is not an object")))?;
        let row = counts.entry(list.clone()).or_default();
        for (p, pair) in positions {
            let position = p
                .parse::<u32>()
                .ok()
                .filter(|p| (1..=MAX_POSITION).contains(p))
                .ok_or_else(|| bad(format!("bad position {p:?}")))?;
            let (Some(i), Some(c)) = (pair[0].as_u64(), pair[1].as_u64()) else {
                return Err(bad(format!("bad tally at {list:?} {p}")));
            };
            row.insert(
                position,
                Tally {
                    impressions: i,
                    clicks: c,
                },
            );
        }
    }
    Ok(counts)
}

/// Replaces `path` with `counts`, atomically and durably.
pub fn save(path: &Path, counts: &Counts) -> Result<(), CtrError> {
    let lists: Map<String, Value> = counts
        .iter()
        .map(|(list, row)| {
            let positions: Map<String, Value> = row
                .iter()
                .map(|(p, t)| (p.to_string(), json!([t.impressions, t.clicks])))
                .collect();
            (list.clone(), Value::Object(positions))
        })
        .collect();
    let body = json!({"version": 1, "lists": lists}).to_string();
    let tmp = path.with_extension("json.tmp");
    let dir = path.parent().unwrap_or(Path::new("."));
    let write = || -> std::io::Result<()> {
        Disk.create_dir_all(dir)?;
        let mut f = Disk.create(&tmp)?;
        f.write_all(body.as_bytes())?;
        f.sync_data()?;
        drop(f);
        Disk.rename(&tmp, path)?;
        Disk.sync_dir(dir)
    };
    write().map_err(|e| CtrError(format!("writing {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(NAME);
        assert!(load(&path).unwrap().is_empty());
        let mut c = Counts::new();
        c.entry("gravity:24h".into()).or_default().insert(
            3,
            Tally {
                impressions: 7,
                clicks: 2,
            },
        );
        save(&path, &c).unwrap();
        assert_eq!(load(&path).unwrap(), c);
        assert!(!path.with_extension("json.tmp").exists());
        std::fs::write(&path, r#"{"version":1,"lists":{"x{y}":{}}}"#).unwrap();
        assert!(load(&path).is_err());
        std::fs::write(&path, r#"{"version":1,"lists":{"gravity":{"101":[1,1]}}}"#).unwrap();
        assert!(load(&path).is_err());
    }
}
