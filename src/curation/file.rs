//! The embedded store's curation: `curation.json` in the data dir, the
//! whole map rewritten atomically on every change (a temp file, synced,
//! renamed over the old one, the directory synced), so a crash leaves the
//! old state or the new one, never a mix. Changes are an editor's or a
//! first hold: a few per minute at most.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use parking_lot::Mutex;

use super::CurationStore;
use crate::store::StoreError;

/// The file's name in the data dir.
pub const FILE: &str = "curation.json";

pub struct FileCuration {
    dir: PathBuf,
    entries: Mutex<BTreeMap<String, String>>,
}

impl FileCuration {
    /// Reads `dir/curation.json` (none: empty).
    pub fn open(dir: &Path) -> Result<Self, String> {
        let path = dir.join(FILE);
        let entries = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| format!("{} is not a curation file: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        Ok(FileCuration {
            dir: dir.to_path_buf(),
            entries: Mutex::new(entries),
        })
    }

    /// Writes `entries` atomically (the caller holds the lock, so writes
    /// do not interleave).
    fn write(&self, entries: &BTreeMap<String, String>) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let tmp = self.dir.join(format!("{FILE}.tmp"));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&serde_json::to_vec_pretty(entries).expect("serializable"))?;
        f.sync_all()?;
        std::fs::rename(&tmp, self.dir.join(FILE))?;
        std::fs::File::open(&self.dir)?.sync_all()
    }

    fn change(
        &self,
        f: impl FnOnce(&mut BTreeMap<String, String>) -> bool,
    ) -> Result<bool, StoreError> {
        let mut entries = self.entries.lock();
        let mut next = entries.clone();
        if !f(&mut next) {
            return Ok(false);
        }
        self.write(&next).map_err(|e| {
            StoreError::Unavailable(format!(
                "cannot write {}: {e}",
                self.dir.join(FILE).display()
            ))
        })?;
        *entries = next;
        Ok(true)
    }
}

#[async_trait]
impl CurationStore for FileCuration {
    async fn entries(&self) -> Result<BTreeMap<String, String>, StoreError> {
        Ok(self.entries.lock().clone())
    }

    async fn set(&self, field: &str, value: Option<&str>) -> Result<(), StoreError> {
        self.change(|m| {
            match value {
                Some(v) => m.insert(field.to_string(), v.to_string()),
                None => m.remove(field),
            };
            true
        })
        .map(drop)
    }

    async fn set_new(&self, entries: &[(String, String)]) -> Result<Vec<bool>, StoreError> {
        let mut set = Vec::with_capacity(entries.len());
        self.change(|m| {
            for (k, v) in entries {
                let new = !m.contains_key(k);
                if new {
                    m.insert(k.clone(), v.clone());
                }
                set.push(new);
            }
            set.contains(&true)
        })?;
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn survives_a_reopen_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let c = FileCuration::open(dir.path()).unwrap();
        c.set("pin:a", Some("{}")).await.unwrap();
        let e = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(c.set_new(&[e("review:b", "1")]).await.unwrap(), [true]);
        assert_eq!(
            c.set_new(&[e("review:b", "2"), e("review:c", "3")])
                .await
                .unwrap(),
            [false, true]
        );
        c.set("review:c", None).await.unwrap();
        c.set("pin:a", None).await.unwrap();
        let again = FileCuration::open(dir.path()).unwrap();
        let e = again.entries().await.unwrap();
        assert_eq!(
            e.into_iter().collect::<Vec<_>>(),
            [("review:b".to_string(), "1".to_string())]
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from(FILE)]);
    }
}
