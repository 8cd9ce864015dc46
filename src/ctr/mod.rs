//! Click-through of the lists the widget shows: `impression` and `click`
//! events (`POST /api/events`, with `list` and `position`) counted per
//! (list, position), apart from views. Nothing here touches an article's
//! counters, so pv, uv and every score ignore these events.
//!
//! Where the counts live follows the store: the embedded store's servers
//! keep them in memory and write them to `ctr.json` in the data dir
//! ([`file`], an atomic rewrite every `ctr.flush_secs` and at shutdown); a
//! Redis site keeps them in Redis ([`redis`], `HINCRBY` on keys under the
//! site's prefix), shared by every node. [`report`] turns the counts into
//! click-through by position per model, corrected for position bias.
//!
//! The number of lists is capped (`ctr.max_lists`); positions are 1..=100
//! and list names short and plain ([`parse_list`]), so no input can grow
//! the counts or forge a key.

mod file;
mod redis;
pub mod report;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::config::{Config, StoreKind};
use crate::score::ModelKind;

/// The deepest position counted (a list shows at most 100 items).
pub const MAX_POSITION: u32 = 100;
/// The longest list name.
pub const MAX_LIST_BYTES: usize = 64;

/// What a widget reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The item at `position` was shown.
    Impression,
    /// The item at `position` was clicked.
    Click,
}

impl Kind {
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "impression" => Some(Kind::Impression),
            "click" => Some(Kind::Click),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Impression => "impression",
            Kind::Click => "click",
        }
    }
}

/// One counted event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub list: String,
    pub position: u32,
    pub kind: Kind,
}

/// Impressions and clicks of one position.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub impressions: u64,
    pub clicks: u64,
}

impl Tally {
    fn add(&mut self, kind: Kind, n: u64) {
        let slot = match kind {
            Kind::Impression => &mut self.impressions,
            Kind::Click => &mut self.clicks,
        };
        *slot = slot.saturating_add(n);
    }
}

/// Every list's tallies by position.
pub type Counts = BTreeMap<String, BTreeMap<u32, Tally>>;

/// A list name: `<model>` or `<model>:<more>` (the widget sends
/// `gravity:24h`), at most [`MAX_LIST_BYTES`] of `[A-Za-z0-9_.:=-]`, its
/// first part a model this server knows. Returns the model.
pub fn parse_list(list: &str) -> Result<ModelKind, String> {
    if list.is_empty()
        || list.len() > MAX_LIST_BYTES
        || !list
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.:=-".contains(&b))
    {
        return Err(format!(
            "list must be 1-{MAX_LIST_BYTES} characters of [A-Za-z0-9_.:=-], e.g. \"gravity:24h\""
        ));
    }
    model_of(list)
        .ok_or_else(|| format!("list must start with a model name (\"gravity:24h\"), got {list:?}"))
}

/// The model a list name starts with.
pub fn model_of(list: &str) -> Option<ModelKind> {
    ModelKind::parse(list.split(':').next().unwrap_or(""))
}

/// Why a hit was not counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// `ctr.max_lists` lists are counted already and this is a new one.
    TooManyLists(usize),
}

impl Refused {
    pub fn code(&self) -> &'static str {
        "too_many_lists"
    }
    pub fn message(&self) -> String {
        match self {
            Refused::TooManyLists(n) => format!(
                "{n} lists are counted already (ctr.max_lists); this one is new and was not counted"
            ),
        }
    }
}

/// Why the counts could not be read or written.
#[derive(Debug)]
pub struct CtrError(pub String);

impl std::fmt::Display for CtrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The click-through counts of this server (or of its Redis site).
pub struct Ctr {
    backend: Backend,
    max_lists: usize,
}

enum Backend {
    /// In memory, written to `path` by [`Ctr::flush`] (none: memory only).
    Memory {
        counts: Mutex<Counts>,
        path: Option<PathBuf>,
        dirty: AtomicBool,
        /// Held while writing, so that two writes never share the file.
        writing: Mutex<()>,
    },
    Redis(redis::RedisCtr),
}

impl Ctr {
    /// The counts the configuration's store calls for: in Redis for a
    /// Redis store (connecting lazily, inside a tokio runtime); else in
    /// memory, loaded from `ctr.json` in the data dir.
    pub fn open(config: &Config) -> Result<Ctr, CtrError> {
        let max_lists = config.ctr.max_lists;
        if config.store == StoreKind::Redis || config.pipeline.enabled {
            return Ok(Ctr {
                backend: Backend::Redis(redis::RedisCtr::connect(config)?),
                max_lists,
            });
        }
        let path = config.data_dir.join(file::NAME);
        let counts = file::load(&path)?;
        Ok(Ctr {
            backend: Backend::Memory {
                counts: Mutex::new(counts),
                path: Some(path),
                dirty: AtomicBool::new(false),
                writing: Mutex::new(()),
            },
            max_lists,
        })
    }

    /// Counts kept in memory only (tests, tools).
    pub fn in_memory(max_lists: usize) -> Ctr {
        Ctr {
            backend: Backend::Memory {
                counts: Mutex::new(Counts::new()),
                path: None,
                dirty: AtomicBool::new(false),
                writing: Mutex::new(()),
            },
            max_lists,
        }
    }

    /// Counts `hits`; one answer per hit, in order.
    pub async fn record(&self, hits: &[Hit]) -> Result<Vec<Result<(), Refused>>, CtrError> {
        if hits.is_empty() {
            return Ok(Vec::new());
        }
        let out = match &self.backend {
            Backend::Memory { counts, dirty, .. } => {
                let mut c = counts.lock();
                let out: Vec<_> = hits
                    .iter()
                    .map(|h| record_one(&mut c, h, self.max_lists))
                    .collect();
                dirty.store(true, Ordering::Release);
                out
            }
            Backend::Redis(r) => r.record(hits, self.max_lists).await?,
        };
        for (h, o) in hits.iter().zip(&out) {
            if o.is_ok() {
                metrics::counter!("hotrank_widget_events_total", "type" => h.kind.as_str())
                    .increment(1);
            }
        }
        Ok(out)
    }

    /// Every list's tallies.
    pub async fn counts(&self) -> Result<Counts, CtrError> {
        match &self.backend {
            Backend::Memory { counts, .. } => Ok(counts.lock().clone()),
            Backend::Redis(r) => r.counts().await,
        }
    }

    /// Writes the counts to `ctr.json` if they changed since the last
    /// write (a no-op in Redis, which has them already).
    pub fn flush(&self) -> Result<(), CtrError> {
        let Backend::Memory {
            counts,
            path: Some(path),
            dirty,
            writing,
        } = &self.backend
        else {
            return Ok(());
        };
        let _writing = writing.lock();
        if !dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let snapshot = counts.lock().clone();
        file::save(path, &snapshot).inspect_err(|_| dirty.store(true, Ordering::Release))
    }
}

/// The counts in `dir/ctr.json` (an embedded data directory), none if
/// the widget never counted there.
pub fn load_file(dir: &std::path::Path) -> Result<Counts, CtrError> {
    file::load(&dir.join(file::NAME))
}

fn record_one(c: &mut Counts, h: &Hit, max_lists: usize) -> Result<(), Refused> {
    if !c.contains_key(&h.list) && c.len() >= max_lists {
        return Err(Refused::TooManyLists(max_lists));
    }
    c.entry(h.list.clone())
        .or_default()
        .entry(h.position)
        .or_default()
        .add(h.kind, 1);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(list: &str, position: u32, kind: Kind) -> Hit {
        Hit {
            list: list.into(),
            position,
            kind,
        }
    }

    #[test]
    fn list_names() {
        assert_eq!(parse_list("gravity:24h"), Ok(ModelKind::Gravity));
        assert_eq!(parse_list("votes"), Ok(ModelKind::Votes));
        assert!(parse_list("").is_err());
        assert!(parse_list("nope:24h").is_err());
        assert!(parse_list("gravity:{x}").is_err());
        assert!(parse_list("gravity: 24h").is_err());
        assert!(parse_list(&format!("gravity:{}", "a".repeat(60))).is_err());
    }

    #[tokio::test]
    async fn counts_and_caps_lists() {
        let ctr = Ctr::in_memory(2);
        let r = ctr
            .record(&[
                hit("gravity:24h", 1, Kind::Impression),
                hit("gravity:24h", 1, Kind::Click),
                hit("votes:all", 2, Kind::Impression),
                hit("weighted:1h", 1, Kind::Impression),
            ])
            .await
            .unwrap();
        assert_eq!(r[..3], [Ok(()), Ok(()), Ok(())]);
        assert_eq!(r[3], Err(Refused::TooManyLists(2)));
        let c = ctr.counts().await.unwrap();
        assert_eq!(
            c["gravity:24h"][&1],
            Tally {
                impressions: 1,
                clicks: 1
            }
        );
        assert!(!c.contains_key("weighted:1h"));
    }
}
