//! The embedded store: all state in process memory, durable in a data
//! directory through a write-ahead log and periodic snapshots.
//!
//! Ingest takes the state lock, gates and applies each event, appends one
//! log record per event (so log order is apply order), releases the lock,
//! and only then waits for the log to be durable before acknowledging.
//! Queries may therefore see an event a moment before it is acknowledged;
//! they never see one that a crash could take back after it was.
//!
//! Layout of the data directory:
//! - `wal/` — log segments ([`crate::store::wal`]);
//! - `snapshots/` — the newest snapshots ([`crate::store::snapshot`]).

mod ranking;
mod state;

pub use state::LogRecord;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use parking_lot::Mutex;

use crate::model::{
    ArticleId, ArticleMeta, ArticleView, Event, HotPage, HotQuery, Outcome, RangeSpec, RankedItem,
    Stats, Timestamp, VoteDirection, VoteOutcome, hour_of,
};
use crate::score::{ModelKind, Models};
use crate::store::snapshot::{read_latest_snapshot, write_snapshot};
use crate::store::wal::{FsyncPolicy, Wal, WalConfig};
use crate::store::{
    HourlyRow, IngestReject, Pick, Picker, PutOutcome, Store, StoreError, StoreSettings, cursor,
};

use ranking::{RankKey, Rankings, Scored};
use state::{Change, Data, Idx};

/// How the embedded store persists.
#[derive(Debug, Clone)]
pub struct Durability {
    pub dir: PathBuf,
    pub fsync: FsyncPolicy,
    pub segment_bytes: u64,
    pub snapshot_interval_secs: u64,
    pub snapshot_every_records: u64,
}

impl Durability {
    pub fn from_config(c: &crate::config::Config) -> Self {
        let e = &c.embedded;
        Durability {
            dir: c.data_dir.clone(),
            fsync: match e.fsync {
                crate::config::FsyncMode::Always => FsyncPolicy::Always,
                crate::config::FsyncMode::Interval => {
                    FsyncPolicy::Interval(std::time::Duration::from_millis(e.fsync_interval_ms))
                }
            },
            segment_bytes: e.segment_bytes,
            snapshot_interval_secs: e.snapshot_interval_secs,
            snapshot_every_records: e.snapshot_every_records,
        }
    }
}

/// Snapshots of ranked pages that cursors continue.
struct CursorSnap {
    key: RankKey,
    per_author: Option<usize>,
    generated_at: Timestamp,
    items: Vec<Scored>,
    /// No item exists below the last one.
    complete: bool,
    touched: Timestamp,
}

/// How long an unused cursor stays valid, and how many are kept.
const CURSOR_TTL_SECS: i64 = 600;
const CURSOR_MAX: usize = 4096;
/// A first page snapshots this many pages ahead for its cursor.
const CURSOR_PAGES_AHEAD: usize = 5;

struct Inner {
    data: Data,
    rankings: Rankings,
    /// Live articles by publication time, newest first.
    newest: BTreeSet<(std::cmp::Reverse<Timestamp>, ArticleId)>,
    published: HashMap<Idx, Timestamp>,
    cursors: HashMap<u64, CursorSnap>,
    cursor_order: VecDeque<u64>,
    cursor_salt: u64,
    next_cursor: u64,
}

impl Inner {
    fn new(data: Data) -> Self {
        let mut inner = Inner {
            data,
            rankings: Rankings::default(),
            newest: BTreeSet::new(),
            published: HashMap::new(),
            cursors: HashMap::new(),
            cursor_order: VecDeque::new(),
            cursor_salt: rand::random(),
            next_cursor: 1,
        };
        for idx in 0..inner.data.articles.len() as Idx {
            inner.track_newest(idx);
        }
        inner
    }

    fn on_change(&mut self, change: Change) {
        self.rankings.on_change(change, &self.data);
        match change {
            Change::Counted(idx) | Change::Meta(idx) => self.track_newest(idx),
            Change::None => {}
        }
    }

    fn track_newest(&mut self, idx: Idx) {
        let a = self.data.article(idx);
        let want = (!a.deleted).then_some(a.meta.published_at);
        let had = self.published.get(&idx).copied();
        if had == want {
            return;
        }
        if let Some(p) = had {
            self.newest.remove(&(std::cmp::Reverse(p), a.id.clone()));
            self.published.remove(&idx);
        }
        if let Some(p) = want {
            self.newest.insert((std::cmp::Reverse(p), a.id.clone()));
            self.published.insert(idx, p);
        }
    }

    fn remember_cursor(&mut self, snap: CursorSnap) -> u64 {
        while self.cursor_order.len() >= CURSOR_MAX {
            if let Some(old) = self.cursor_order.pop_front() {
                self.cursors.remove(&old);
            }
        }
        let id = self.next_cursor ^ self.cursor_salt;
        self.next_cursor += 1;
        self.cursors.insert(id, snap);
        self.cursor_order.push_back(id);
        id
    }

    fn expire_cursors(&mut self, now: Timestamp) {
        self.cursors
            .retain(|_, c| now - c.touched < CURSOR_TTL_SECS);
        let live = &self.cursors;
        self.cursor_order.retain(|id| live.contains_key(id));
    }

    fn item(
        &mut self,
        rank: usize,
        s: &Scored,
        key: &RankKey,
        models: &Models,
        explain: bool,
        now: Timestamp,
    ) -> RankedItem {
        let a = self.data.article(s.idx);
        RankedItem {
            rank,
            id: a.id.clone(),
            score: s.score,
            counters: s.counters,
            meta: a.meta.clone(),
            explain: explain.then(|| models.explain(key.model, &s.counters, &a.meta, now)),
        }
    }
}

pub struct EmbeddedStore {
    inner: Mutex<Inner>,
    wal: Option<Wal>,
    durability: Option<Durability>,
    settings: StoreSettings,
    records_since_snapshot: AtomicU64,
    last_snapshot: Mutex<Instant>,
    /// Seq of the newest snapshot on disk. The log is trimmed only up to
    /// the one before it, so that if the newest turns out unreadable the
    /// older one plus the log still rebuild everything.
    snapshot_seq: Mutex<Option<u64>>,
    /// When retention last ran (store time).
    last_sweep: Mutex<Timestamp>,
    /// Serialises snapshots (maintenance and shutdown may race).
    snapshot_lock: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

/// Opening a data directory: how much was recovered.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    pub snapshot_seq: Option<u64>,
    pub replayed_records: u64,
    pub truncated_bytes: u64,
    pub articles: usize,
    pub elapsed_ms: u128,
}

impl EmbeddedStore {
    /// A store that keeps nothing on disk (simulations, replays, benches).
    pub fn in_memory(settings: StoreSettings) -> Self {
        let data = Data::new(&settings);
        Self::assemble(data, None, None, settings)
    }

    /// Opens (or creates) a data directory: newest valid snapshot, then
    /// every log record after it.
    pub fn open(d: Durability, settings: StoreSettings) -> Result<(Self, RecoveryReport), String> {
        let started = Instant::now();
        let snap_dir = d.dir.join("snapshots");
        std::fs::create_dir_all(&snap_dir)
            .map_err(|e| format!("cannot create {}: {e}", snap_dir.display()))?;
        let (seq, mut data) = match read_latest_snapshot(&snap_dir)
            .map_err(|e| format!("reading snapshots in {}: {e}", snap_dir.display()))?
        {
            Some((seq, bytes)) => {
                let data: Data = postcard::from_bytes(&bytes).map_err(|e| {
                    format!(
                        "snapshot {seq} in {} does not decode: {e}",
                        snap_dir.display()
                    )
                })?;
                (Some(seq), data)
            }
            None => (None, Data::new(&settings)),
        };
        data.restore(&settings);
        let cfg = WalConfig {
            dir: d.dir.join("wal"),
            fsync: d.fsync,
            segment_bytes: d.segment_bytes,
        };
        let (wal, stats) = Wal::open(cfg, seq.unwrap_or(0), |_, payload| {
            let rec: LogRecord = postcard::from_bytes(payload)
                .map_err(|e| format!("log record does not decode: {e}"))?;
            data.apply(&rec);
            Ok(())
        })
        .map_err(|e| format!("opening the log in {}: {e}", d.dir.join("wal").display()))?;
        let report = RecoveryReport {
            snapshot_seq: seq,
            replayed_records: stats.records,
            truncated_bytes: stats.truncated_bytes,
            articles: data.articles.len(),
            elapsed_ms: started.elapsed().as_millis(),
        };
        let store = Self::assemble(data, Some(wal), Some(d), settings);
        store
            .records_since_snapshot
            .store(stats.records, Ordering::Relaxed);
        *store.snapshot_seq.lock() = seq;
        Ok((store, report))
    }

    fn assemble(
        data: Data,
        wal: Option<Wal>,
        durability: Option<Durability>,
        settings: StoreSettings,
    ) -> Self {
        EmbeddedStore {
            inner: Mutex::new(Inner::new(data)),
            wal,
            durability,
            settings,
            records_since_snapshot: AtomicU64::new(0),
            last_snapshot: Mutex::new(Instant::now()),
            snapshot_seq: Mutex::new(None),
            last_sweep: Mutex::new(i64::MIN / 2),
            snapshot_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// Applies a record read back from a log (see
    /// [`crate::store::wal::read_records`]) the way recovery does: an
    /// event's logged verdict is applied, not judged again. For offline
    /// tools (`hotrank replay`); refused on a store with a data directory,
    /// whose log would no longer match its state.
    pub fn apply_logged(&self, rec: &LogRecord) -> Result<(), StoreError> {
        if self.wal.is_some() {
            return Err(StoreError::Internal(
                "apply_logged is for in-memory stores only".into(),
            ));
        }
        let mut inner = self.inner.lock();
        let change = inner.data.apply(rec);
        inner.on_change(change);
        Ok(())
    }

    /// All state as dump records (`hotrank export`).
    pub fn export(&self) -> Vec<crate::store::dump::Record> {
        self.inner.lock().data.export()
    }

    /// Writes dump records as the first snapshot of an empty data
    /// directory (`hotrank import`); open the store afterwards.
    pub fn import_into(
        d: &Durability,
        settings: &StoreSettings,
        records: &[crate::store::dump::Record],
    ) -> Result<u64, String> {
        let snap_dir = d.dir.join("snapshots");
        let wal_dir = d.dir.join("wal");
        for dir in [&snap_dir, &wal_dir] {
            if std::fs::read_dir(dir).is_ok_and(|mut it| it.next().is_some()) {
                return Err(format!(
                    "{} is not empty: import only into a new data directory",
                    dir.display()
                ));
            }
        }
        let data = Data::import(records, settings)?;
        let n = data.articles.len() as u64;
        let bytes = postcard::to_allocvec(&data).map_err(|e| format!("encoding: {e}"))?;
        std::fs::create_dir_all(&snap_dir)
            .map_err(|e| format!("cannot create {}: {e}", snap_dir.display()))?;
        write_snapshot(&snap_dir, 0, &bytes, 2)
            .map_err(|e| format!("writing the snapshot in {}: {e}", snap_dir.display()))?;
        Ok(n)
    }

    pub fn data_dir(&self) -> Option<&Path> {
        self.durability.as_ref().map(|d| d.dir.as_path())
    }

    /// Appends a record under the state lock and applies it.
    fn log_and_apply(&self, inner: &mut Inner, rec: &LogRecord, buf: &mut Vec<u8>) -> Option<u64> {
        let seq = self.wal.as_ref().map(|wal| {
            buf.clear();
            let bytes =
                postcard::to_extend(rec, std::mem::take(buf)).expect("records always encode");
            let seq = wal.append(&bytes);
            *buf = bytes;
            seq
        });
        let change = inner.data.apply(rec);
        inner.on_change(change);
        seq
    }

    async fn durable(&self, seq: Option<u64>, records: u64) -> Result<(), StoreError> {
        if let (Some(wal), Some(seq)) = (&self.wal, seq) {
            self.records_since_snapshot
                .fetch_add(records, Ordering::Relaxed);
            wal.wait_durable(seq)
                .await
                .map_err(|e| StoreError::Unavailable(format!("write-ahead log: {e}")))?;
        }
        Ok(())
    }

    /// Writes a snapshot of the current state and drops the log it covers.
    pub async fn snapshot(&self) -> Result<(), StoreError> {
        let (Some(wal), Some(d)) = (&self.wal, &self.durability) else {
            return Ok(());
        };
        let _one = self.snapshot_lock.lock().await;
        let (seq, bytes) = {
            let inner = self.inner.lock();
            let seq = wal.last_appended_seq();
            let bytes = postcard::to_allocvec(&inner.data)
                .map_err(|e| StoreError::Internal(format!("snapshot encoding: {e}")))?;
            (seq, bytes)
        };
        // Everything up to `seq` is in `bytes`; it must be durable in the
        // log too, or the snapshot would hold unacknowledged-yet state that
        // a crash before its own fsync could lose. Waiting keeps it simple.
        wal.wait_durable(seq)
            .await
            .map_err(|e| StoreError::Unavailable(format!("write-ahead log: {e}")))?;
        let dir = d.dir.join("snapshots");
        let started = Instant::now();
        let size = bytes.len();
        tokio::task::spawn_blocking(move || write_snapshot(&dir, seq, &bytes, 2))
            .await
            .map_err(|e| StoreError::Internal(format!("snapshot task: {e}")))?
            .map_err(|e| StoreError::Unavailable(format!("writing snapshot: {e}")))?;
        let previous = self.snapshot_seq.lock().replace(seq);
        if let Some(previous) = previous {
            wal.remove_through(previous)
                .map_err(|e| StoreError::Unavailable(format!("trimming the log: {e}")))?;
        }
        self.records_since_snapshot.store(0, Ordering::Relaxed);
        *self.last_snapshot.lock() = Instant::now();
        metrics::histogram!("hotrank_snapshot_seconds").record(started.elapsed().as_secs_f64());
        metrics::gauge!("hotrank_snapshot_bytes").set(size as f64);
        tracing::info!(
            seq,
            bytes = size,
            ms = started.elapsed().as_millis() as u64,
            "snapshot written"
        );
        Ok(())
    }

    fn rank_key(q: &HotQuery) -> RankKey {
        RankKey {
            model: q.model,
            // Vote models rank every live article: one ranking whatever the range.
            range: if q.model.lists_every_live_article() {
                RangeSpec::All
            } else {
                q.range
            },
            category: q.category.clone(),
            kind: q.kind.clone(),
            group: q.group.clone(),
        }
    }
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn ingest(
        &self,
        events: Vec<Event>,
        _now: Timestamp,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError> {
        let n = events.len();
        let with_counts = n == 1;
        let mut out = Vec::with_capacity(n);
        let mut last = None;
        let mut buf = Vec::with_capacity(128);
        {
            let mut inner = self.inner.lock();
            for ev in events {
                if !inner.data.accepts(&ev.article, &self.settings) {
                    out.push(Err(IngestReject::UnknownArticle));
                    continue;
                }
                let verdict = inner.data.judge(&ev, &self.settings);
                let rec = LogRecord::Event { ev, verdict };
                last = self.log_and_apply(&mut inner, &rec, &mut buf).or(last);
                let LogRecord::Event { ev, .. } = &rec else {
                    unreachable!()
                };
                let (pv, uv) = match inner.data.lookup(&ev.article) {
                    Some(idx) if with_counts => {
                        let a = inner.data.article_mut(idx);
                        (a.lifetime.pv, a.lifetime_uv.count())
                    }
                    _ => (0, 0),
                };
                out.push(Ok(Outcome { verdict, pv, uv }));
            }
        }
        self.durable(last, n as u64).await?;
        Ok(out)
    }

    async fn put_article(
        &self,
        id: ArticleId,
        meta: ArticleMeta,
        _now: Timestamp,
    ) -> Result<PutOutcome, StoreError> {
        let (seq, created) = {
            let mut inner = self.inner.lock();
            let created = inner.data.lookup(&id).is_none_or(|i| {
                let a = inner.data.article(i);
                a.deleted || !a.known
            });
            let rec = LogRecord::Put { id, meta };
            (
                self.log_and_apply(&mut inner, &rec, &mut Vec::new()),
                created,
            )
        };
        self.durable(seq, 1).await?;
        Ok(if created {
            PutOutcome::Created
        } else {
            PutOutcome::Updated
        })
    }

    async fn article(
        &self,
        id: &ArticleId,
        now: Timestamp,
    ) -> Result<Option<ArticleView>, StoreError> {
        let mut inner = self.inner.lock();
        let Some(idx) = inner.data.lookup(id) else {
            return Ok(None);
        };
        let models = &self.settings.models;
        let a = inner.data.article_mut(idx);
        if a.deleted {
            return Ok(None);
        }
        let mut lifetime = a.lifetime;
        lifetime.uv = a.lifetime_uv.count();
        let scores = ModelKind::ALL
            .into_iter()
            .map(|m| {
                let c = a.window(m.default_range(), now);
                (m, models.score(m, &c, &a.meta, now))
            })
            .collect();
        Ok(Some(ArticleView {
            id: a.id.clone(),
            meta: a.meta.clone(),
            lifetime,
            quarantined: a.quarantine,
            deleted: a.deleted,
            scores,
        }))
    }

    async fn delete_article(&self, id: &ArticleId, _now: Timestamp) -> Result<bool, StoreError> {
        let seq = {
            let mut inner = self.inner.lock();
            match inner.data.lookup(id) {
                Some(idx) if !inner.data.article(idx).deleted => {}
                _ => return Ok(false),
            }
            let rec = LogRecord::Delete { id: id.clone() };
            self.log_and_apply(&mut inner, &rec, &mut Vec::new())
        };
        self.durable(seq, 1).await?;
        Ok(true)
    }

    async fn hot(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        let models = &self.settings.models;
        let cap = self.settings.ranking_cap;
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let (snap_id, offset) = match &q.cursor {
            None => {
                let key = Self::rank_key(q);
                let want = (q.offset + q.limit).min(cap);
                let depth = (q.offset + q.limit * CURSOR_PAGES_AHEAD).min(cap);
                let items =
                    inner
                        .rankings
                        .top(&key, depth + 1, q.per_author, &mut inner.data, models, now);
                let complete = items.len() <= depth;
                let mut items = items;
                items.truncate(depth);
                if q.offset >= want || items.len() <= q.offset + q.limit && complete {
                    // One page says it all: no snapshot needed.
                    let page = page_items(
                        inner, &items, q.offset, q.limit, &key, models, q.explain, now,
                    );
                    return Ok(HotPage {
                        items: page,
                        generated_at: now,
                        cursor: None,
                    });
                }
                let id = inner.remember_cursor(CursorSnap {
                    key,
                    per_author: q.per_author,
                    generated_at: now,
                    items,
                    complete,
                    touched: now,
                });
                (id, q.offset)
            }
            Some(c) => {
                let (id, off) = cursor::parse_snapshot(c)?;
                let snap = inner.cursors.get(&id).ok_or_else(|| {
                    StoreError::InvalidCursor("cursor expired; start from the first page".into())
                })?;
                if snap.key != Self::rank_key(q) || snap.per_author != q.per_author {
                    return Err(StoreError::InvalidCursor(
                        "cursor belongs to a query with other parameters".into(),
                    ));
                }
                (id, off)
            }
        };
        // Deepen the snapshot if the page runs past it.
        let snap = inner.cursors.get(&snap_id).expect("just checked");
        if offset + q.limit > snap.items.len() && !snap.complete && snap.items.len() < cap {
            let key = snap.key.clone();
            let per_author = snap.per_author;
            let depth = (offset + q.limit * CURSOR_PAGES_AHEAD).min(cap);
            let fresh =
                inner
                    .rankings
                    .top(&key, depth + 1, per_author, &mut inner.data, models, now);
            let snap = inner.cursors.get_mut(&snap_id).expect("present");
            let seen: HashSet<Idx> = snap.items.iter().map(|s| s.idx).collect();
            let before = snap.items.len();
            snap.items
                .extend(fresh.iter().filter(|s| !seen.contains(&s.idx)).cloned());
            snap.complete = fresh.len() <= depth;
            if snap.items.len() > cap {
                snap.items.truncate(cap);
                snap.complete = true;
            }
            if snap.items.len() == before {
                snap.complete = true;
            }
        }
        let snap = inner.cursors.get_mut(&snap_id).expect("present");
        snap.touched = now;
        let generated_at = snap.generated_at;
        let key = snap.key.clone();
        let items = std::mem::take(&mut snap.items);
        let complete = snap.complete;
        let page = page_items(
            inner,
            &items,
            offset,
            q.limit,
            &key,
            models,
            q.explain,
            generated_at,
        );
        let more = offset + q.limit < items.len() || (!complete && items.len() < cap);
        inner.cursors.get_mut(&snap_id).expect("present").items = items;
        Ok(HotPage {
            items: page,
            generated_at,
            cursor: more.then(|| cursor::snapshot(snap_id, offset + q.limit)),
        })
    }

    async fn newest(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        let models = &self.settings.models;
        let key = Self::rank_key(q);
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let start: Option<(std::cmp::Reverse<Timestamp>, ArticleId)> = match &q.cursor {
            None => None,
            Some(c) => {
                let (p, id) = cursor::parse_newest(c)?;
                Some((std::cmp::Reverse(p), id))
            }
        };
        let skip = if start.is_some() { 0 } else { q.offset };
        let mut picked: Vec<Idx> = Vec::new();
        let mut picker = Picker::new(q.per_author, skip, q.limit);
        let iter: Box<dyn Iterator<Item = &(std::cmp::Reverse<Timestamp>, ArticleId)>> =
            match &start {
                Some(s) => Box::new(inner.newest.range((
                    std::ops::Bound::Excluded(s.clone()),
                    std::ops::Bound::Unbounded,
                ))),
                None => Box::new(inner.newest.iter()),
            };
        let mut more = false;
        for (_, id) in iter {
            let idx = inner.data.lookup(id).expect("indexed");
            let a = inner.data.article(idx);
            if !key.matches(&a.meta) {
                continue;
            }
            match picker.offer(a.meta.author.as_deref()) {
                Pick::Skip => {}
                Pick::Take => picked.push(idx),
                Pick::Full => {
                    more = true;
                    break;
                }
            }
        }
        let items: Vec<RankedItem> = picked
            .iter()
            .enumerate()
            .map(|(i, &idx)| {
                let a = inner.data.article_mut(idx);
                let counters = a.window(q.range, now);
                let score = models.score(q.model, &counters, &a.meta, now);
                RankedItem {
                    rank: skip + i + 1,
                    id: a.id.clone(),
                    score,
                    counters,
                    meta: a.meta.clone(),
                    explain: q
                        .explain
                        .then(|| models.explain(q.model, &counters, &a.meta, now)),
                }
            })
            .collect();
        let cursor = match (more, items.last()) {
            (true, Some(last)) => Some(cursor::newest(last.meta.published_at, &last.id)),
            _ => None,
        };
        Ok(HotPage {
            items,
            generated_at: now,
            cursor,
        })
    }

    async fn stats(&self, now: Timestamp, hours: u32) -> Result<Stats, StoreError> {
        let inner = self.inner.lock();
        let d = &inner.data;
        let first = hour_of(now) - i64::from(hours) + 1;
        Ok(Stats {
            articles: d.live_articles() as u64,
            counted: d.counted,
            quarantined: d.quarantine,
            quarantine_by_hour: d
                .quarantine_by_hour
                .range(first..)
                .map(|(h, q)| (*h, *q))
                .collect(),
        })
    }

    async fn hourly(
        &self,
        id: &ArticleId,
        now: Timestamp,
        hours: u32,
    ) -> Result<Option<Vec<HourlyRow>>, StoreError> {
        let inner = self.inner.lock();
        let Some(idx) = inner.data.lookup(id) else {
            return Ok(None);
        };
        let a = inner.data.article(idx);
        if a.deleted {
            return Ok(None);
        }
        let last = hour_of(now);
        Ok(Some(a.hourly(last - i64::from(hours) + 1, last)))
    }

    async fn post_article(
        &self,
        mut meta: ArticleMeta,
        poster: u128,
        now: Timestamp,
    ) -> Result<ArticleId, StoreError> {
        meta.published_at = now;
        let (seq, id) = {
            let mut inner = self.inner.lock();
            let id = inner.data.next_post_id();
            let rec = LogRecord::Post {
                id: id.clone(),
                meta,
                poster,
            };
            (self.log_and_apply(&mut inner, &rec, &mut Vec::new()), id)
        };
        self.durable(seq, 1).await?;
        Ok(id)
    }

    async fn vote(
        &self,
        id: &ArticleId,
        user: u128,
        direction: VoteDirection,
        now: Timestamp,
    ) -> Result<VoteOutcome, StoreError> {
        let (seq, outcome) = {
            let mut inner = self.inner.lock();
            match inner
                .data
                .judge_vote(id, user, direction, now, &self.settings)
            {
                Err(refused) => return Ok(refused),
                Ok(idx) => {
                    let rec = LogRecord::Vote {
                        id: id.clone(),
                        user,
                        direction,
                    };
                    let seq = self.log_and_apply(&mut inner, &rec, &mut Vec::new());
                    let a = inner.data.article(idx);
                    let c = a.lifetime;
                    let score = self.settings.models.votes.score(&c, a.meta.published_at);
                    (
                        seq,
                        VoteOutcome::Counted {
                            ups: c.ups,
                            downs: c.downs,
                            score,
                        },
                    )
                }
            }
        };
        self.durable(seq, 1).await?;
        Ok(outcome)
    }

    async fn ready(&self) -> Result<(), StoreError> {
        if let Some(wal) = &self.wal
            && let Err(e) = wal.health()
        {
            return Err(StoreError::Unavailable(format!("write-ahead log: {e}")));
        }
        Ok(())
    }

    async fn maintain(&self, now: Timestamp) -> Result<(), StoreError> {
        let started = Instant::now();
        // Retention walks every article: once a minute is plenty.
        let sweep = {
            let mut last = self.last_sweep.lock();
            let due = now - *last >= 60 || now < *last;
            if due {
                *last = now;
            }
            due
        };
        if sweep {
            let mut inner = self.inner.lock();
            inner.data.expire(now, &self.settings);
            inner.rankings.evict_idle(now - 3600);
            inner.expire_cursors(now);
            let (rankings, entries, rebuilds) = inner.rankings.sizes();
            let (dedupe, event_ids, limiter_keys) = inner.data.gate_sizes();
            metrics::gauge!("hotrank_articles").set(inner.data.live_articles() as f64);
            metrics::gauge!("hotrank_rankings").set(rankings as f64);
            metrics::gauge!("hotrank_ranking_entries").set(entries as f64);
            metrics::gauge!("hotrank_ranking_rebuilds").set(rebuilds as f64);
            metrics::gauge!("hotrank_dedupe_entries").set(dedupe as f64);
            metrics::gauge!("hotrank_event_ids").set(event_ids as f64);
            metrics::gauge!("hotrank_rate_limit_keys").set(limiter_keys as f64);
        }
        metrics::histogram!("hotrank_maintenance_seconds").record(started.elapsed().as_secs_f64());
        if let (Some(wal), Some(d)) = (&self.wal, &self.durability) {
            metrics::gauge!("hotrank_wal_bytes").set(wal.size_bytes() as f64);
            let records = self.records_since_snapshot.load(Ordering::Relaxed);
            let age = self.last_snapshot.lock().elapsed().as_secs();
            if records >= d.snapshot_every_records
                || (records > 0 && age >= d.snapshot_interval_secs)
            {
                self.snapshot().await?;
            }
        }
        Ok(())
    }

    async fn shutdown(&self) -> Result<(), StoreError> {
        if let Some(wal) = &self.wal {
            if self.records_since_snapshot.load(Ordering::Relaxed) > 0 {
                self.snapshot().await?;
            }
            wal.close()
                .map_err(|e| StoreError::Unavailable(format!("closing the log: {e}")))?;
        }
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn page_items(
    inner: &mut Inner,
    items: &[Scored],
    offset: usize,
    limit: usize,
    key: &RankKey,
    models: &Models,
    explain: bool,
    at: Timestamp,
) -> Vec<RankedItem> {
    items
        .iter()
        .enumerate()
        .skip(offset)
        .take(limit)
        .map(|(i, s)| inner.item(i + 1, s, key, models, explain, at))
        .collect()
}
