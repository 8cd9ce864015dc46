//! The embedded store's outbox: an append-only log file of its own,
//! `<data_dir>/webhooks.log` (the store's write-ahead log is not touched).
//!
//! Each record is `len: u32 LE`, `crc32(payload): u32 LE`, then `len`
//! bytes of JSON ([`Rec`]). Every append is written and `fsync`ed before
//! the call returns, so a committed transition survives a crash or power
//! loss. At open the records are replayed into memory; a torn or damaged
//! tail (a crash in the middle of an append) is cut off. When the file
//! holds many more records than the live state needs, it is rewritten
//! (a temporary file, synced, renamed over it, the directory synced).
//! The file holds the subscriptions' secrets: it is created mode 0600.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::model::{ATTEMPTS_KEPT, Attempt, Entry, SubState, Subscription};
use super::outbox::Outbox;
use crate::store::StoreError;

/// One log record.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "lowercase")]
enum Rec {
    Sub(Subscription),
    Unsub {
        id: String,
    },
    Commit {
        id: String,
        state: SubState,
        entries: Vec<Entry>,
    },
    Attempt(Attempt),
}

/// What the log describes, in memory.
#[derive(Default)]
struct State {
    subs: BTreeMap<String, Subscription>,
    states: HashMap<String, SubState>,
    /// By outbox order (a counter), for oldest-first delivery.
    pending: BTreeMap<u64, Entry>,
    order: u64,
    attempts: HashMap<String, VecDeque<Attempt>>,
}

impl State {
    fn apply(&mut self, r: Rec) {
        match r {
            Rec::Sub(s) => {
                self.subs.insert(s.id.clone(), s);
            }
            Rec::Unsub { id } => {
                self.subs.remove(&id);
                self.states.remove(&id);
                self.attempts.remove(&id);
            }
            Rec::Commit { id, state, entries } => {
                // (A compacted log keeps pending entries in one record
                // without a subscription.)
                if !id.is_empty() {
                    self.states.insert(id, state);
                }
                for e in entries {
                    self.order += 1;
                    self.pending.insert(self.order, e);
                }
            }
            Rec::Attempt(a) => {
                if a.outcome != "retry" {
                    self.pending.retain(|_, e| e.delivery != a.delivery);
                }
                // A deleted subscription's log went with it.
                if a.outcome == "dropped" {
                    return;
                }
                let log = self.attempts.entry(a.subscription.clone()).or_default();
                log.push_front(a);
                log.truncate(ATTEMPTS_KEPT);
            }
        }
    }

    /// The records that rebuild this state.
    fn records(&self) -> Vec<Rec> {
        let mut out: Vec<Rec> = self.subs.values().cloned().map(Rec::Sub).collect();
        for (id, st) in &self.states {
            out.push(Rec::Commit {
                id: id.clone(),
                state: st.clone(),
                entries: Vec::new(),
            });
        }
        // Pending entries keep their order; a subscription deleted since
        // leaves its entries for the sender to drop.
        if !self.pending.is_empty() {
            out.push(Rec::Commit {
                id: String::new(),
                state: SubState::default(),
                entries: self.pending.values().cloned().collect(),
            });
        }
        for log in self.attempts.values() {
            out.extend(log.iter().rev().cloned().map(Rec::Attempt));
        }
        out
    }
}

struct Inner {
    file: File,
    path: PathBuf,
    state: State,
    /// Records in the file.
    records: u64,
}

/// The embedded outbox ([`Outbox`] over `<data_dir>/webhooks.log`).
pub struct EmbeddedOutbox {
    inner: Arc<Mutex<Inner>>,
}

/// The log's file name in the data directory.
pub const FILE: &str = "webhooks.log";

impl EmbeddedOutbox {
    /// Opens (or creates) the log in `dir` and replays it.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(FILE);
        let mut file = private().read(true).append(true).open(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let (recs, good) = decode(&bytes);
        if good < bytes.len() {
            tracing::warn!(
                path = %path.display(),
                offset = good,
                cut = bytes.len() - good,
                "webhooks log: a torn or damaged tail was cut off"
            );
            file.set_len(good as u64)?;
            file.sync_all()?;
        }
        file.seek(SeekFrom::End(0))?;
        let mut state = State::default();
        let records = recs.len() as u64;
        for r in recs {
            state.apply(r);
        }
        let mut inner = Inner {
            file,
            path,
            state,
            records,
        };
        compact_if_large(&mut inner)?;
        tracing::info!(
            path = %inner.path.display(),
            subscriptions = inner.state.subs.len(),
            pending = inner.state.pending.len(),
            "webhooks log opened"
        );
        Ok(EmbeddedOutbox {
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    /// Appends and syncs `recs`, then applies them (off the async threads).
    async fn append(&self, recs: Vec<Rec>) -> Result<(), StoreError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let mut g = inner.lock();
            let mut buf = Vec::new();
            for r in &recs {
                encode(r, &mut buf);
            }
            let written = g.file.write_all(&buf).and_then(|()| g.file.sync_data());
            if let Err(e) = written {
                // What may have reached the file is cut at the next open
                // only if torn; a whole record that did is a decision the
                // caller will retry with the same ids.
                return Err(StoreError::Unavailable(format!(
                    "webhooks log {}: {e}",
                    g.path.display()
                )));
            }
            g.records += recs.len() as u64;
            for r in recs {
                g.state.apply(r);
            }
            compact_if_large(&mut g)
                .map_err(|e| StoreError::Unavailable(format!("webhooks log compaction: {e}")))
        })
        .await
        .map_err(|e| StoreError::Internal(format!("webhooks log task: {e}")))?
    }

    fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.inner.lock().state)
    }
}

/// Options creating a file only its owner may read: it holds the
/// subscriptions' secrets.
fn private() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o
}

fn encode(r: &Rec, out: &mut Vec<u8>) {
    let payload = serde_json::to_vec(r).expect("records serialize");
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
}

/// The records of `bytes` up to the first torn or damaged one, and the
/// length of that good prefix.
fn decode(bytes: &[u8]) -> (Vec<Rec>, usize) {
    let mut out = Vec::new();
    let mut at = 0;
    while bytes.len() - at >= 8 {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
        let Some(payload) = bytes.get(at + 8..at + 8 + len) else {
            break;
        };
        if crc32fast::hash(payload) != crc {
            break;
        }
        let Ok(r) = serde_json::from_slice::<Rec>(payload) else {
            break;
        };
        out.push(r);
        at += 8 + len;
    }
    (out, at)
}

/// Rewrites the log from the state once it holds more than four times
/// the records the state needs (and at least 10 000).
fn compact_if_large(g: &mut Inner) -> std::io::Result<()> {
    let live = g.state.records();
    if g.records < 10_000 || g.records < 4 * live.len() as u64 {
        return Ok(());
    }
    let tmp = g.path.with_extension("log.tmp");
    let mut buf = Vec::new();
    for r in &live {
        encode(r, &mut buf);
    }
    let mut f = private().write(true).truncate(true).open(&tmp)?;
    f.write_all(&buf)?;
    f.sync_all()?;
    std::fs::rename(&tmp, &g.path)?;
    if let Some(dir) = g.path.parent() {
        File::open(dir)?.sync_all()?;
    }
    g.file = OpenOptions::new().append(true).open(&g.path)?;
    tracing::info!(
        before = g.records,
        after = live.len(),
        "webhooks log compacted"
    );
    g.records = live.len() as u64;
    Ok(())
}

#[async_trait]
impl Outbox for EmbeddedOutbox {
    async fn put_subscription(&self, s: &Subscription) -> Result<(), StoreError> {
        self.append(vec![Rec::Sub(s.clone())]).await
    }

    async fn delete_subscription(&self, id: &str) -> Result<bool, StoreError> {
        if !self.read(|s| s.subs.contains_key(id)) {
            return Ok(false);
        }
        self.append(vec![Rec::Unsub { id: id.to_string() }]).await?;
        Ok(true)
    }

    async fn subscriptions(&self) -> Result<Vec<Subscription>, StoreError> {
        Ok(self.read(|s| s.subs.values().cloned().collect()))
    }

    async fn state(&self, id: &str) -> Result<SubState, StoreError> {
        Ok(self.read(|s| s.states.get(id).cloned().unwrap_or_default()))
    }

    async fn commit(
        &self,
        id: &str,
        state: &SubState,
        entries: &[Entry],
        _lease: bool,
    ) -> Result<bool, StoreError> {
        self.append(vec![Rec::Commit {
            id: id.to_string(),
            state: state.clone(),
            entries: entries.to_vec(),
        }])
        .await?;
        Ok(true)
    }

    async fn pending(&self) -> Result<Vec<Entry>, StoreError> {
        Ok(self.read(|s| s.pending.values().cloned().collect()))
    }

    async fn record(&self, a: &Attempt) -> Result<(), StoreError> {
        self.append(vec![Rec::Attempt(a.clone())]).await
    }

    async fn attempts(&self, id: &str) -> Result<Vec<Attempt>, StoreError> {
        Ok(self.read(|s| {
            s.attempts
                .get(id)
                .map(|l| l.iter().cloned().collect())
                .unwrap_or_default()
        }))
    }

    async fn lease(&self, _ttl_ms: u64) -> Result<bool, StoreError> {
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::EventKind;
    use super::*;

    fn entry(n: u64) -> Entry {
        Entry {
            delivery: Entry::delivery_id("s1", n),
            subscription: "s1".into(),
            event: EventKind::Entered,
            article_id: format!("a{n}"),
            rank: Some(1),
            at: 0,
            decided_ms: 0,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commits_survive_reopen_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let o = EmbeddedOutbox::open(dir.path()).unwrap();
        let st = SubState {
            seq: 2,
            ..SubState::default()
        };
        o.commit("s1", &st, &[entry(1), entry(2)], true)
            .await
            .unwrap();
        drop(o);
        // A torn append: half a record at the end.
        let path = dir.path().join(FILE);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[40, 0, 0, 0, 1, 2]).unwrap();
        drop(f);
        let o = EmbeddedOutbox::open(dir.path()).unwrap();
        assert_eq!(o.state("s1").await.unwrap().seq, 2);
        let ids: Vec<String> = o
            .pending()
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.delivery)
            .collect();
        assert_eq!(ids, ["s1-1", "s1-2"]);
        // Appends after the cut are read back.
        o.commit("s1", &SubState { seq: 3, ..st }, &[entry(3)], true)
            .await
            .unwrap();
        drop(o);
        let o = EmbeddedOutbox::open(dir.path()).unwrap();
        assert_eq!(o.pending().await.unwrap().len(), 3);
    }
}
