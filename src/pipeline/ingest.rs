//! Seed 002's two-stage counting pipeline on Redis Streams (docs/design.md,
//! "IngestPipeline").
//!
//! API nodes append validated events to raw streams partitioned by article
//! (`pipe:raw:<n>`, [`IngestPipeline::append`]) and answer `queued`; filter
//! workers (group `filter`) run the gate on batches of raw entries and
//! write each with its verdict to the flagged stream of the same partition
//! (`pipe:flagged:<n>`); count workers (group `count`) apply the flagged
//! entries with the same Lua the direct store runs (`gate.lua`,
//! `apply.lua`). Each worker call acknowledges its entries in the same
//! script as their effects, and skips entries the group no longer holds
//! pending: a worker killed anywhere, or an entry delivered twice, changes
//! no count.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::{Script, Value};
use serde_json::{Value as Json, json};

use super::journal::{Journal, JournalEntry};
use super::position::stream_id;
use crate::config::PipelineConfig;
use crate::model::{
    ArticleId, ArticleMeta, ArticleView, Event, HotPage, HotQuery, Outcome, Stats, Timestamp,
    Verdict, VoteDirection, VoteOutcome,
};
use crate::store::redis::{
    APPLY, COMMON, EPOCH_CHECK, EVENT, EVICTED, GATE, OpEntry, OpKind, OpRun, OpStamp, RedisStore,
    TOTALS, bad_reply, chunks, event_args, evicted_reply, kind_char, sharded, store_err, v_i64,
    v_str, verdict_of,
};
use crate::store::{HourlyRow, IngestReject, PutOutcome, Store, StoreError, Voter};

/// The consumer group of filter workers (on raw streams).
pub const FILTER_GROUP: &str = "filter";
/// The consumer group of count workers (on flagged streams).
pub const COUNT_GROUP: &str = "count";

/// What a process of the pipeline does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Gates raw entries (consumer group `filter`).
    Filter,
    /// Applies flagged entries (consumer group `count`).
    Count,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Filter => FILTER_GROUP,
            Role::Count => COUNT_GROUP,
        }
    }
}

/// Aborts the process when `HOTRANK_CRASH_AT` names `step` (fault
/// injection for tests: a worker killed between two of its Redis calls).
pub fn crash_point(step: &str) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let at = AT.get_or_init(|| std::env::var("HOTRANK_CRASH_AT").ok());
    if at.as_deref() == Some(step) {
        eprintln!("HOTRANK_CRASH_AT={step}: aborting");
        std::process::abort();
    }
}

struct PipeScripts {
    append: Script,
    unappend: Script,
    filter: Script,
    count: Script,
    trim: Script,
}

/// Helpers on stream entry ids and groups (`pipe_ids.lua`).
pub(crate) const IDS: &str = include_str!("pipe_ids.lua");
/// The gate's settings as script arguments (`pipe_gate_args.lua`,
/// [`IngestPipeline::gate_header`]).
pub(crate) const GATE_ARGS: &str = include_str!("pipe_gate_args.lua");

/// One stream entry: its id and its field values, in order.
pub type Entry = (String, Vec<Vec<u8>>);

/// Fields of a raw entry (pipe_append.lua) and of a flagged one
/// (pipe_flag.lua).
const RAW_FIELDS: usize = 13;
const FLAGGED_FIELDS: usize = 9;

/// Backlog of one stream for its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lag {
    pub partition: u32,
    pub group: &'static str,
    /// Delivered to a worker, not yet acknowledged.
    pub pending: u64,
    /// Not yet delivered.
    pub unread: u64,
}

/// The pipeline over one Redis store.
pub struct IngestPipeline {
    store: Arc<RedisStore>,
    cfg: PipelineConfig,
    scripts: PipeScripts,
    /// The journal, when `log_url` names one ([`with_journal`](Self::with_journal)).
    journal: Option<Journal>,
    /// The epoch this node journals under, once attached.
    epoch: std::sync::Mutex<Option<String>>,
}

impl IngestPipeline {
    pub fn new(store: Arc<RedisStore>, cfg: PipelineConfig) -> Self {
        let tail = include_str!("pipe_ack.lua");
        let undone = include_str!("pipe_undone.lua");
        // The gate and the counters name shard keys (config refuses a
        // pipeline over more than one shard for now).
        let keys = store.keys().clone();
        // The pipeline keeps its own epoch (with a journal): the store's
        // writes carry none (marker.rs).
        store.turn_marker_off();
        IngestPipeline {
            store,
            cfg,
            scripts: PipeScripts {
                append: chunks(&[EPOCH_CHECK, include_str!("pipe_append.lua")]),
                unappend: chunks(&[IDS, include_str!("pipe_unappend.lua")]),
                filter: sharded(
                    &keys,
                    &[
                        EVENT,
                        undone,
                        GATE_ARGS,
                        include_str!("pipe_filter.lua"),
                        COMMON,
                        GATE,
                        include_str!("pipe_flag.lua"),
                        tail,
                    ],
                ),
                count: sharded(
                    &keys,
                    &[
                        undone,
                        include_str!("pipe_count.lua"),
                        EVICTED,
                        COMMON,
                        APPLY,
                        TOTALS,
                        tail,
                    ],
                ),
                trim: chunks(&[IDS, include_str!("pipe_trim.lua")]),
            },
            journal: None,
            epoch: std::sync::Mutex::new(None),
        }
    }

    /// Journals every queued entry on the Redis at `url` too
    /// ([`Journal`]); an empty `url` keeps no journal.
    pub fn with_journal(mut self, url: &str) -> Result<Self, String> {
        if !url.is_empty() {
            self.journal = Some(Journal::open(url, &self.store.keys().prefix)?);
        }
        Ok(self)
    }

    pub fn journal(&self) -> Option<&Journal> {
        self.journal.as_ref()
    }

    /// The epoch Redis and the journal share ([`Journal::attach`], not
    /// cached), or `None` without a journal.
    pub async fn epoch(&self) -> Result<Option<String>, StoreError> {
        match &self.journal {
            Some(j) => j.attach(&self.store).await.map(Some),
            None => Ok(None),
        }
    }

    /// The epoch to append under: `''` without a journal; attached once
    /// ([`Journal::attach`]).
    async fn append_epoch(&self) -> Result<String, StoreError> {
        let Some(journal) = &self.journal else {
            return Ok(String::new());
        };
        if let Some(e) = self.epoch.lock().expect("epoch lock").clone() {
            return Ok(e);
        }
        let e = journal.attach(&self.store).await?;
        *self.epoch.lock().expect("epoch lock") = Some(e.clone());
        Ok(e)
    }

    pub fn store(&self) -> &Arc<RedisStore> {
        &self.store
    }

    pub fn config(&self) -> &PipelineConfig {
        &self.cfg
    }

    pub fn raw_key(&self, n: u32) -> String {
        format!("{}pipe:raw:{n}", self.store.keys().prefix)
    }

    /// The verdict of the events carrying one eventId (pipe_flag.lua).
    pub fn verdict_key(&self, event_id: u128) -> String {
        format!("{}pipe:verdict:{event_id:032x}", self.store.keys().prefix)
    }

    /// Callers waiting for verdicts on flagged partition `n`: the count
    /// group's trim keeps what follows their marks (pipe_trim.lua).
    pub fn waiters_key(&self, n: u32) -> String {
        format!("{}pipe:waiters:{n}", self.store.keys().prefix)
    }

    /// Refusals by reason (pipe_flag.lua).
    pub fn refused_key(&self) -> String {
        format!("{}pipe:refused", self.store.keys().prefix)
    }

    pub fn flagged_key(&self, n: u32) -> String {
        format!("{}pipe:flagged:{n}", self.store.keys().prefix)
    }

    /// The partition of an article: every event of one article goes
    /// through one raw stream, so the gate sees them in arrival order.
    pub fn partition_of(&self, article: &ArticleId) -> u32 {
        self.partition_of_str(article.as_str())
    }

    /// [`partition_of`](Self::partition_of) of an id as a string.
    pub fn partition_of_str(&self, article: &str) -> u32 {
        let h = crate::sketch::murmur64a(article.as_bytes(), 0x5eed_0002);
        (h % u64::from(self.cfg.partitions.max(1))) as u32
    }

    fn stream(&self, role: Role, n: u32) -> String {
        match role {
            Role::Filter => self.raw_key(n),
            Role::Count => self.flagged_key(n),
        }
    }

    /// Creates both consumer groups on every partition (from the start of
    /// the stream, so nothing appended before is missed).
    pub async fn ensure_groups(&self) -> Result<(), StoreError> {
        let mut con = self.store.con();
        for n in 0..self.cfg.partitions {
            for role in [Role::Filter, Role::Count] {
                let r: redis::RedisResult<()> = redis::cmd("XGROUP")
                    .arg("CREATE")
                    .arg(self.stream(role, n))
                    .arg(role.as_str())
                    .arg("0")
                    .arg("MKSTREAM")
                    .query_async(&mut con)
                    .await;
                match r {
                    Ok(()) => {}
                    Err(e) if e.code() == Some("BUSYGROUP") => {}
                    Err(e) => return Err(store_err(e)),
                }
            }
        }
        Ok(())
    }

    /// Appends validated events to their partitions' raw streams, all or
    /// none; `Unavailable` (503) when a partition's backlog would pass
    /// `max_backlog`.
    pub async fn append(&self, events: Vec<Event>, now: Timestamp) -> Result<(), StoreError> {
        self.append_placed(events, now).await.map(|_| ())
    }

    /// Takes back raw entries the journal refused (`pipe_unappend.lua`):
    /// those no filter worker read yet are deleted; the others count,
    /// unjournaled (logged, and counted in a metric).
    async fn unappend(&self, parts: &[(u32, Vec<JournalEntry>)]) {
        let mut inv = self.scripts.unappend.prepare_invoke();
        inv.arg(parts.len());
        for (n, entries) in parts {
            inv.arg(self.raw_key(*n)).arg(entries.len());
            for (id, _) in entries {
                inv.arg(id.as_str());
            }
        }
        match inv.invoke_async::<(u64, u64)>(&mut self.store.con()).await {
            Ok((_, 0)) => {}
            Ok((_, read)) => {
                metrics::counter!("hotrank_pipeline_unjournaled_total").increment(read);
                tracing::warn!(
                    entries = read,
                    "pipeline: entries the journal refused were already read by a filter worker: they count, unjournaled"
                );
            }
            Err(e) => {
                tracing::error!(error = %e, "pipeline: cannot take back entries the journal refused: they count, unjournaled");
            }
        }
    }

    /// The epoch article operations run under (ops.rs): `None` without a
    /// journal (they run plainly then).
    async fn op_epoch(&self) -> Result<Option<String>, StoreError> {
        if self.journal.is_none() {
            return Ok(None);
        }
        self.append_epoch().await.map(Some)
    }

    /// The end of an article operation run under `epoch`: an operation
    /// that changed its article (`article` of its answer) is journaled
    /// before it is answered. When the journal refuses, the caller gets
    /// `Unavailable` (503) though the operation took effect: it counts
    /// unjournaled (docs/design.md, "Disaster recovery").
    async fn journaled<T>(
        &self,
        epoch: &str,
        kind: OpKind,
        done: Result<(T, Option<OpStamp>), StoreError>,
        article: impl FnOnce(&T) -> String,
    ) -> Result<T, StoreError> {
        let (out, stamp) = done.inspect_err(|e| {
            if e.to_string().contains("EPOCH") {
                *self.epoch.lock().expect("epoch lock") = None;
            }
        })?;
        let Some(stamp) = stamp else {
            return Ok(out);
        };
        let journal = self.journal.as_ref().ok_or_else(|| {
            StoreError::Internal("a journaled operation without a journal".into())
        })?;
        let op = OpEntry::new(kind, &article(&out), stamp);
        if let Err(e) = journal.append_op(epoch, &op).await {
            metrics::counter!("hotrank_pipeline_journal_errors_total").increment(1);
            metrics::counter!("hotrank_pipeline_unjournaled_total").increment(1);
            if e.to_string().contains("EPOCH") {
                *self.epoch.lock().expect("epoch lock") = None;
            }
            tracing::warn!(error = %e, article = %op.article, kind = kind.code(),
                "pipeline: journal append failed after the operation took effect; answering 503 (it counts, unjournaled)");
            return Err(StoreError::Unavailable(format!(
                "the pipeline journal is unavailable; retry later ({e})"
            )));
        }
        metrics::counter!("hotrank_pipeline_ops_journaled_total").increment(1);
        Ok(out)
    }

    /// [`append`](Self::append), answering each event's partition and raw
    /// entry id, in the order of `events`.
    async fn append_placed(
        &self,
        mut events: Vec<Event>,
        now: Timestamp,
    ) -> Result<Vec<(u32, String)>, StoreError> {
        events.iter_mut().for_each(Event::clamp_to_arrival);
        let mut parts: Vec<Vec<usize>> = vec![Vec::new(); self.cfg.partitions as usize];
        for (i, ev) in events.iter().enumerate() {
            parts[self.partition_of(&ev.article) as usize].push(i);
        }
        let used: Vec<(u32, &Vec<usize>)> = parts
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.is_empty())
            .map(|(n, p)| (n as u32, p))
            .collect();
        let epoch = self.append_epoch().await?;
        // With a journal, the 13 values of each raw entry (in
        // pipe_append.lua's order) go to both Redis: built once. Without,
        // they go straight into the call.
        let values: Option<Vec<Vec<Vec<u8>>>> = self.journal.as_ref().map(|_| {
            events
                .iter()
                .map(|ev| {
                    let mut c = redis::cmd("");
                    c.arg(now);
                    event_args!(c, ev);
                    c.args_iter()
                        .skip(1)
                        .filter_map(|a| match a {
                            redis::Arg::Simple(b) => Some(b.to_vec()),
                            _ => None,
                        })
                        .collect()
                })
                .collect()
        });
        let mut inv = self.scripts.append.prepare_invoke();
        inv.arg(self.cfg.max_backlog)
            .arg(self.store.keys().epoch())
            .arg(&epoch)
            .arg(used.len());
        for (n, part) in &used {
            inv.arg(self.raw_key(*n))
                .arg(self.flagged_key(*n))
                .arg(part.len());
            for &i in part.iter() {
                match &values {
                    Some(values) => {
                        for v in &values[i] {
                            inv.arg(&v[..]);
                        }
                    }
                    None => {
                        inv.arg(now);
                        event_args!(inv, &events[i]);
                    }
                }
            }
        }
        let mut con = self.store.con();
        let ids: Vec<String> = match inv.invoke_async(&mut con).await {
            Ok(ids) => ids,
            Err(e) if e.code() == Some("BACKLOG") => {
                metrics::counter!("hotrank_pipeline_refused_total").increment(events.len() as u64);
                return Err(StoreError::Unavailable(
                    "pipeline backlog is full; retry later".into(),
                ));
            }
            Err(e) if e.code() == Some("EPOCH") => {
                // Redis lost its data: the next append attaches again,
                // and says why it cannot.
                *self.epoch.lock().expect("epoch lock") = None;
                metrics::counter!("hotrank_pipeline_journal_errors_total").increment(1);
                return Err(StoreError::Unavailable(format!(
                    "Redis lost its pipeline state; it must be restored (hotrank archive restore --replay): {e}"
                )));
            }
            Err(e) => return Err(store_err(e)),
        };
        if let (Some(journal), Some(mut values)) = (&self.journal, values) {
            let mut parts: Vec<(u32, Vec<JournalEntry>)> = Vec::new();
            let mut it = ids.iter();
            for (n, part) in &used {
                let mut entries = Vec::with_capacity(part.len());
                for &i in part.iter() {
                    let id = it.next().ok_or_else(|| bad_reply("pipe_append"))?;
                    entries.push((id.clone(), std::mem::take(&mut values[i])));
                }
                parts.push((*n, entries));
            }
            // Never acknowledge what is not journaled: the entries are
            // taken back (docs/design.md, "Disaster recovery").
            if let Err(e) = journal.append(&epoch, &parts).await {
                metrics::counter!("hotrank_pipeline_journal_errors_total").increment(1);
                if e.to_string().contains("EPOCH") {
                    *self.epoch.lock().expect("epoch lock") = None;
                }
                tracing::warn!(error = %e, "pipeline: journal append failed; answering 503");
                self.unappend(&parts).await;
                return Err(StoreError::Unavailable(format!(
                    "the pipeline journal is unavailable; retry later ({e})"
                )));
            }
            metrics::counter!("hotrank_pipeline_journaled_total").increment(ids.len() as u64);
        }
        let mut placed = vec![(0, String::new()); events.len()];
        let mut ids = ids.into_iter();
        for (n, part) in used {
            for &i in part {
                let id = ids.next().ok_or_else(|| bad_reply("pipe_append"))?;
                placed[i] = (n, id);
            }
        }
        Ok(placed)
    }

    /// Queues `events` as [`append`](Self::append) does and answers their
    /// verdicts once each is decided and applied, running filter and count
    /// steps itself meanwhile (consumer `inline-<pid>`): the path for
    /// callers that need verdicts now (the CLI tools; the suites that run
    /// unchanged on the pipeline). Verdicts are read back from the flagged
    /// streams (`r` = the raw entry id). Answers `Unavailable` when they
    /// are not all applied within `wait`.
    pub async fn ingest_and_wait(
        &self,
        events: Vec<Event>,
        now: Timestamp,
        wait: Duration,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError> {
        let consumer = format!("inline-{}", std::process::id());
        let mut marks = std::collections::BTreeMap::new();
        for ev in &events {
            let n = self.partition_of(&ev.article);
            if let std::collections::btree_map::Entry::Vacant(e) = marks.entry(n) {
                e.insert(self.newest_id(&self.flagged_key(n)).await?);
            }
        }
        // Registered before the append: no trim drops an entry after a
        // mark while its waiter lives (pipe_trim.lua).
        let token = format!("{consumer}-{:016x}", rand::random::<u64>());
        let deadline_ms = {
            use crate::clock::Clock;
            crate::clock::SystemClock.now_ms() + wait.as_millis() as i64 + 60_000
        };
        let members: Vec<(u32, String)> = marks
            .iter()
            .map(|(&n, mark)| (n, format!("{token} {mark}")))
            .collect();
        let mut p = redis::pipe();
        for (n, m) in &members {
            p.zadd(self.waiters_key(*n), m, deadline_ms).ignore();
        }
        p.query_async::<()>(&mut self.store.con())
            .await
            .map_err(store_err)?;
        let answer = self.wait_for(marks, events, now, wait).await;
        let mut p = redis::pipe();
        for (n, m) in &members {
            p.zrem(self.waiters_key(*n), m).ignore();
        }
        let _ = p.query_async::<()>(&mut self.store.con()).await;
        answer
    }

    /// The rest of [`ingest_and_wait`](Self::ingest_and_wait), once its
    /// marks are registered.
    async fn wait_for(
        &self,
        mut marks: std::collections::BTreeMap<u32, String>,
        events: Vec<Event>,
        now: Timestamp,
        wait: Duration,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError> {
        let consumer = format!("inline-{}", std::process::id());
        let placed = self.append_placed(events, now).await?;
        let mut want: HashMap<String, usize> = placed
            .iter()
            .enumerate()
            .map(|(i, (_, id))| (id.clone(), i))
            .collect();
        let mut codes = vec![0i64; placed.len()];
        let mut ours: HashMap<u32, Vec<String>> = HashMap::new();
        let deadline = Instant::now() + wait;
        loop {
            for (&n, mark) in marks.iter_mut() {
                if want.is_empty() {
                    break;
                }
                let mut con = self.store.con();
                let v: Value = redis::cmd("XRANGE")
                    .arg(self.flagged_key(n))
                    .arg(format!("({mark}"))
                    .arg("+")
                    .arg("COUNT")
                    .arg(self.cfg.batch.max(100))
                    .query_async(&mut con)
                    .await
                    .map_err(store_err)?;
                for (id, values) in parse_entries(&v)? {
                    let raw = values.get(8).and_then(|r| std::str::from_utf8(r).ok());
                    if let Some(i) = raw.and_then(|r| want.remove(r)) {
                        codes[i] = values
                            .first()
                            .and_then(|c| std::str::from_utf8(c).ok()?.parse().ok())
                            .ok_or_else(|| bad_reply("flagged entry"))?;
                        ours.entry(n).or_default().push(id.clone());
                    }
                    *mark = id;
                }
            }
            if want.is_empty() && self.applied(&ours).await? {
                break;
            }
            if Instant::now() > deadline {
                return Err(StoreError::Unavailable(format!(
                    "the pipeline did not process the events within {} s",
                    wait.as_secs()
                )));
            }
            let done = self.step(Role::Filter, &consumer, false).await?
                + self.step(Role::Count, &consumer, false).await?;
            if done == 0 {
                tokio::time::sleep(Duration::from_millis(self.cfg.block_ms.max(1))).await;
            }
        }
        codes
            .into_iter()
            .map(|c| {
                let decision = decision_of(c).ok_or_else(|| bad_reply("verdict code"))?;
                Ok(decision.map(|verdict| Outcome {
                    verdict,
                    pv: 0,
                    uv: 0,
                }))
            })
            .collect()
    }

    /// The newest entry id of a stream (`0-0` when empty).
    async fn newest_id(&self, key: &str) -> Result<String, StoreError> {
        let mut con = self.store.con();
        let v: Value = redis::cmd("XREVRANGE")
            .arg(key)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        Ok(parse_entries(&v)?
            .into_iter()
            .next()
            .map_or_else(|| "0-0".to_string(), |(id, _)| id))
    }

    /// Whether the count group has applied every one of these flagged
    /// entries (by partition): delivered, and none still pending.
    async fn applied(&self, flagged: &HashMap<u32, Vec<String>>) -> Result<bool, StoreError> {
        let mut con = self.store.con();
        for (&n, ids) in flagged {
            let key = self.flagged_key(n);
            let (Some(first), Some(last)) = (
                ids.iter().min_by_key(|i| stream_id(i)),
                ids.iter().max_by_key(|i| stream_id(i)),
            ) else {
                continue;
            };
            let mut p = redis::pipe();
            p.cmd("XINFO").arg("GROUPS").arg(&key);
            p.cmd("XPENDING")
                .arg(&key)
                .arg(COUNT_GROUP)
                .arg(first)
                .arg(last)
                .arg(ids.len());
            let (groups, pending): (Value, Value) =
                p.query_async(&mut con).await.map_err(store_err)?;
            let delivered = group_field(&groups, COUNT_GROUP, "last-delivered-id")
                .and_then(v_str)
                .map_or((0, 0), stream_id);
            if delivered < stream_id(last) {
                return Ok(false);
            }
            let Value::Array(pending) = pending else {
                return Err(bad_reply("XPENDING"));
            };
            let still: Vec<&str> = pending
                .iter()
                .filter_map(|e| match e {
                    Value::Array(f) => f.first().and_then(v_str),
                    _ => None,
                })
                .collect();
            if ids.iter().any(|i| still.contains(&i.as_str())) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// One worker step: claims entries idle past `claim_idle_ms` (when
    /// `claim` is set), reads new ones, and processes them. Returns how
    /// many entries it decided or applied.
    pub async fn step(&self, role: Role, consumer: &str, claim: bool) -> Result<u64, StoreError> {
        let mut done = 0;
        if claim {
            for n in 0..self.cfg.partitions {
                let claimed = self.claim(role, consumer, n).await?;
                if !claimed.is_empty() {
                    metrics::counter!("hotrank_pipeline_claimed_total", "group" => role.as_str())
                        .increment(claimed.len() as u64);
                    crash_point(&format!("{}:claimed", role.as_str()));
                    done += self.process(role, n, claimed).await?;
                }
            }
        }
        for (n, entries) in self.read(role, consumer).await? {
            crash_point(&format!("{}:read", role.as_str()));
            done += self.process(role, n, entries).await?;
        }
        Ok(done)
    }

    /// New entries for this consumer on every partition (`XREADGROUP >`);
    /// [`step`](Self::step) processes them (tests read and process
    /// separately, to decide entries out of order).
    pub async fn read(
        &self,
        role: Role,
        consumer: &str,
    ) -> Result<Vec<(u32, Vec<Entry>)>, StoreError> {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(role.as_str())
            .arg(consumer)
            .arg("COUNT")
            .arg(self.cfg.batch)
            .arg("STREAMS");
        let names: Vec<String> = (0..self.cfg.partitions)
            .map(|n| self.stream(role, n))
            .collect();
        for k in &names {
            cmd.arg(k);
        }
        for _ in &names {
            cmd.arg(">");
        }
        let mut con = self.store.con();
        let v: Value = cmd.query_async(&mut con).await.map_err(store_err)?;
        let mut out = Vec::new();
        for (key, entries) in pairs(&v) {
            let Some(key) = v_str(key) else { continue };
            let Some(n) = names.iter().position(|k| k == key) else {
                continue;
            };
            let entries = parse_entries(entries)?;
            if !entries.is_empty() {
                out.push((n as u32, entries));
            }
        }
        Ok(out)
    }

    /// Entries of partition `n` pending longer than `claim_idle_ms` with
    /// any consumer (a crashed or stalled worker), now this consumer's.
    async fn claim(&self, role: Role, consumer: &str, n: u32) -> Result<Vec<Entry>, StoreError> {
        let mut con = self.store.con();
        let v: Value = redis::cmd("XAUTOCLAIM")
            .arg(self.stream(role, n))
            .arg(role.as_str())
            .arg(consumer)
            .arg(self.cfg.claim_idle_ms)
            .arg("0-0")
            .arg("COUNT")
            .arg(self.cfg.batch)
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        match &v {
            Value::Array(parts) if parts.len() >= 2 => parse_entries(&parts[1]),
            _ => Err(bad_reply("XAUTOCLAIM")),
        }
    }

    /// Processes entries of partition `n` (one script call): the second
    /// half of [`step`](Self::step).
    pub async fn process(
        &self,
        role: Role,
        n: u32,
        entries: Vec<Entry>,
    ) -> Result<u64, StoreError> {
        let want = match role {
            Role::Filter => RAW_FIELDS,
            Role::Count => FLAGGED_FIELDS,
        };
        // An entry this build cannot read (written by another version)
        // would block the partition; it is refused loudly instead.
        let entries: Vec<Entry> = entries
            .into_iter()
            .filter(|(id, f)| {
                let ok = f.len() == want;
                if !ok {
                    tracing::error!(%id, stream = %self.stream(role, n), "malformed pipeline entry left pending");
                }
                ok
            })
            .collect();
        if entries.is_empty() {
            return Ok(0);
        }
        let (hkeep, dkeep) = self.store.keeps();
        let mut inv = match role {
            Role::Filter => {
                let mut inv = self.scripts.filter.prepare_invoke();
                self.gate_header(&mut inv);
                inv.arg(self.raw_key(n))
                    .arg(self.flagged_key(n))
                    .arg(FILTER_GROUP)
                    .arg(entries.len());
                inv
            }
            Role::Count => {
                let mut inv = self.scripts.count.prepare_invoke();
                inv.arg(&self.store.keys().prefix)
                    .arg(hkeep)
                    .arg(dkeep)
                    .arg(self.flagged_key(n))
                    .arg(COUNT_GROUP)
                    .arg(entries.len());
                inv
            }
        };
        for (id, fields) in &entries {
            inv.arg(id.as_str());
            for f in fields {
                inv.arg(&f[..]);
            }
        }
        let mut con = self.store.con();
        let mut r: redis::Value = inv.invoke_async(&mut con).await.map_err(store_err)?;
        // Entries for an evicted article: nothing was applied or
        // acknowledged; restore it from the archive and apply them again.
        for _ in 0..4 {
            let Some(gone) = evicted_reply(&r) else {
                break;
            };
            let now = entries_now(&entries);
            self.store.restore(&gone, now).await?;
            r = inv.invoke_async(&mut con).await.map_err(store_err)?;
        }
        let r: Vec<i64> = redis::from_redis_value(r).map_err(|_| bad_reply("count"))?;
        let (done, skipped) = (
            r.first().copied().unwrap_or(0),
            r.get(1).copied().unwrap_or(0),
        );
        crash_point(&format!("{}:done", role.as_str()));
        metrics::counter!("hotrank_pipeline_processed_total", "group" => role.as_str())
            .increment(done.max(0) as u64);
        if skipped > 0 {
            metrics::counter!("hotrank_pipeline_skipped_total", "group" => role.as_str())
                .increment(skipped as u64);
        }
        Ok(done.max(0) as u64)
    }

    /// The gate's settings, as pipe_filter.lua and pipe_replay.lua take
    /// them first: prefix, dedupe window, visitor and ip limits, eventId
    /// TTL, hourly and daily keeps, require_known, max articles, behaviour
    /// limit and quarantine (ms).
    pub(crate) fn gate_header(&self, inv: &mut redis::ScriptInvocation<'_>) {
        let s = &self.store.settings;
        let (hkeep, dkeep) = self.store.keeps();
        inv.arg(&self.store.keys().prefix)
            .arg(s.dedupe_window_secs)
            .arg(s.visitor_limit_per_minute)
            .arg(s.ip_limit_per_minute)
            .arg(s.event_id_ttl_secs)
            .arg(hkeep)
            .arg(dkeep)
            .arg(if s.require_known_articles { "1" } else { "0" })
            .arg(s.max_articles)
            .arg(s.bot_articles_per_minute)
            .arg(u64::from(s.bot_quarantine_secs) * 1000);
    }

    /// Delivers every entry still in the role's streams to its script
    /// again, as a claim racing a slow worker would (tests, and a check
    /// after an incident). Returns (entries processed, entries seen):
    /// processed is 0 unless some were never processed.
    pub async fn reprocess_all(&self, role: Role) -> Result<(u64, u64), StoreError> {
        let (mut done, mut seen) = (0, 0);
        for n in 0..self.cfg.partitions {
            let mut start = "-".to_string();
            loop {
                let mut con = self.store.con();
                let v: Value = redis::cmd("XRANGE")
                    .arg(self.stream(role, n))
                    .arg(&start)
                    .arg("+")
                    .arg("COUNT")
                    .arg(self.cfg.batch)
                    .query_async(&mut con)
                    .await
                    .map_err(store_err)?;
                let entries = parse_entries(&v)?;
                let Some((last, _)) = entries.last() else {
                    break;
                };
                start = format!("({last}");
                seen += entries.len() as u64;
                done += self.process(role, n, entries).await?;
            }
        }
        Ok((done, seen))
    }

    /// Drops what the role's group acknowledged from every partition's
    /// stream (`pipe_trim.lua`). Returns how many entries went.
    pub async fn trim(&self, role: Role) -> Result<u64, StoreError> {
        let mut con = self.store.con();
        let mut total = 0;
        for n in 0..self.cfg.partitions {
            let dropped: i64 = self
                .scripts
                .trim
                .prepare_invoke()
                .arg(self.stream(role, n))
                .arg(role.as_str())
                .arg(match role {
                    Role::Filter => String::new(),
                    Role::Count => self.waiters_key(n),
                })
                .invoke_async(&mut con)
                .await
                .map_err(store_err)?;
            total += dropped.max(0) as u64;
        }
        Ok(total)
    }

    /// The backlog of every partition and group; sets the lag gauges.
    pub async fn lag(&self) -> Result<Vec<Lag>, StoreError> {
        let mut con = self.store.con();
        let mut out = Vec::new();
        for n in 0..self.cfg.partitions {
            for role in [Role::Filter, Role::Count] {
                let key = self.stream(role, n);
                let mut p = redis::pipe();
                p.cmd("XPENDING").arg(&key).arg(role.as_str());
                p.cmd("XINFO").arg("GROUPS").arg(&key);
                p.cmd("XLEN").arg(&key);
                let (pending, groups, len): (Value, Value, i64) =
                    p.query_async(&mut con).await.map_err(store_err)?;
                let pending = match &pending {
                    Value::Array(a) => a.first().and_then(v_i64).unwrap_or(0),
                    _ => 0,
                }
                .max(0) as u64;
                let lag = group_field(&groups, role.as_str(), "lag").and_then(v_i64);
                let unread = match lag {
                    Some(lag) => lag.max(0) as u64,
                    // No `lag` (Redis 6.2, and 7.x after some trims): the
                    // entries after the last delivered one, counted up to
                    // 1,000; past that, every entry not pending (an upper
                    // bound).
                    None => {
                        let after = group_field(&groups, role.as_str(), "last-delivered-id")
                            .and_then(v_str)
                            .unwrap_or("0-0")
                            .to_string();
                        let v: Value = redis::cmd("XRANGE")
                            .arg(&key)
                            .arg(format!("({after}"))
                            .arg("+")
                            .arg("COUNT")
                            .arg(1001)
                            .query_async(&mut con)
                            .await
                            .map_err(store_err)?;
                        let n = parse_entries(&v)?.len() as u64;
                        if n <= 1000 {
                            n
                        } else {
                            ((len - pending as i64).max(0) as u64).max(n)
                        }
                    }
                };
                metrics::gauge!("hotrank_pipeline_lag", "partition" => n.to_string(), "group" => role.as_str())
                    .set((pending + unread) as f64);
                out.push(Lag {
                    partition: n,
                    group: role.as_str(),
                    pending,
                    unread,
                });
            }
        }
        Ok(out)
    }

    /// Until the pipeline holds nothing unprocessed (tests, `drain`).
    pub async fn drained(&self) -> Result<bool, StoreError> {
        Ok(self
            .lag()
            .await?
            .iter()
            .all(|l| l.pending == 0 && l.unread == 0))
    }

    /// A worker: steps until `stop` is set, claiming every
    /// `claim_idle_ms / 2`, trimming every `trim_every_ms`, and waiting
    /// `block_ms` when a step found nothing. Redis errors are logged and
    /// retried after a pause.
    pub async fn run_worker(self: Arc<Self>, role: Role, consumer: String, stop: Arc<AtomicBool>) {
        let claim_every = Duration::from_millis((self.cfg.claim_idle_ms / 2).max(50));
        let trim_every = Duration::from_millis(self.cfg.trim_every_ms.max(10));
        let (mut last_claim, mut last_trim) = (Instant::now(), Instant::now());
        let mut groups_ready = false;
        tracing::info!(role = role.as_str(), %consumer, "pipeline worker started");
        while !stop.load(Ordering::Relaxed) {
            if !groups_ready {
                if let Err(e) = self.ensure_groups().await {
                    tracing::warn!(error = %e, "pipeline: cannot create the consumer groups");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
                groups_ready = true;
            }
            let claim = last_claim.elapsed() >= claim_every;
            if claim {
                last_claim = Instant::now();
            }
            let done = match self.step(role, &consumer, claim).await {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(error = %e, role = role.as_str(), "pipeline step failed");
                    // A Redis that lost its data lost the groups too.
                    groups_ready = false;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            if last_trim.elapsed() >= trim_every {
                last_trim = Instant::now();
                if let Err(e) = self.trim(role).await {
                    tracing::warn!(error = %e, "pipeline trim failed");
                }
                let _ = self.lag().await;
            }
            if done == 0 {
                tokio::time::sleep(Duration::from_millis(self.cfg.block_ms)).await;
            }
        }
    }
}

/// A consumer name unique to this process and worker.
pub fn consumer_name(role: Role, i: usize) -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "host".into());
    format!(
        "{host}-{}-{}-{i}-{:08x}",
        std::process::id(),
        role.as_str(),
        rand::random::<u32>()
    )
}

/// Key/value pairs of a RESP2 array of pairs or a RESP3 map.
fn pairs(v: &Value) -> Vec<(&Value, &Value)> {
    match v {
        Value::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
        Value::Array(a) => a
            .iter()
            .filter_map(|p| match p {
                Value::Array(kv) if kv.len() == 2 => Some((&kv[0], &kv[1])),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Stream entries (`[[id, [f, v, ...]], ...]`) as ids and values.
pub(crate) fn parse_entries(v: &Value) -> Result<Vec<Entry>, StoreError> {
    let Value::Array(list) = v else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(list.len());
    for e in list {
        let Value::Array(e) = e else { continue };
        let [id, fields] = e.as_slice() else { continue };
        let Some(id) = v_str(id) else { continue };
        let values: Vec<Vec<u8>> = match fields {
            Value::Array(f) => f
                .iter()
                .skip(1)
                .step_by(2)
                .map(|v| match v {
                    Value::BulkString(b) => b.clone(),
                    Value::SimpleString(s) => s.as_bytes().to_vec(),
                    _ => Vec::new(),
                })
                .collect(),
            Value::Map(m) => m
                .iter()
                .map(|(_, v)| match v {
                    Value::BulkString(b) => b.clone(),
                    _ => Vec::new(),
                })
                .collect(),
            // An entry deleted while pending (XREADGROUP of a trimmed id).
            _ => continue,
        };
        out.push((id.to_string(), values));
    }
    Ok(out)
}

/// One field of one group in an `XINFO GROUPS` reply.
fn group_field<'a>(groups: &'a Value, group: &str, field: &str) -> Option<&'a Value> {
    let Value::Array(list) = groups else {
        return None;
    };
    list.iter().find_map(|g| {
        let fields: Vec<(&Value, &Value)> = match g {
            Value::Array(a) => a
                .chunks(2)
                .filter_map(|c| Some((c.first()?, c.get(1)?)))
                .collect(),
            Value::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
            _ => return None,
        };
        let name = fields.iter().find(|(k, _)| v_str(k) == Some("name"))?;
        if v_str(name.1) != Some(group) {
            return None;
        }
        fields
            .iter()
            .find(|(k, _)| v_str(k) == Some(field))
            .map(|(_, v)| *v)
    })
}

/// What a verdict code of the filter stage (`v` of a flagged entry, the
/// value of `pipe:verdict:<eventId>`) means: a verdict, or a refusal.
pub fn decision_of(code: i64) -> Option<Result<Verdict, IngestReject>> {
    match code {
        5 => Some(Err(IngestReject::UnknownArticle)),
        6 => Some(Err(IngestReject::TooManyArticles)),
        c => verdict_of(c).map(Ok),
    }
}

/// The Redis store with ingest through the pipeline: events are queued,
/// everything else is the store's.
pub struct PipelineStore {
    pipe: Arc<IngestPipeline>,
}

impl PipelineStore {
    pub fn new(pipe: Arc<IngestPipeline>) -> Self {
        PipelineStore { pipe }
    }

    pub fn pipeline(&self) -> &Arc<IngestPipeline> {
        &self.pipe
    }

    fn inner(&self) -> &RedisStore {
        &self.pipe.store
    }
}

#[async_trait]
impl Store for PipelineStore {
    async fn ingest(
        &self,
        events: Vec<Event>,
        now: Timestamp,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError> {
        // Callers that need verdicts now (CLI tools) wait for them, long
        // enough for a crashed worker's entries to be claimed.
        let wait = Duration::from_millis(self.pipe.cfg.claim_idle_ms.saturating_mul(2))
            .max(Duration::from_secs(30));
        self.pipe.ingest_and_wait(events, now, wait).await
    }

    fn queues(&self) -> bool {
        true
    }

    async fn enqueue(&self, events: Vec<Event>, now: Timestamp) -> Result<(), StoreError> {
        self.pipe.append(events, now).await
    }

    async fn event_verdict(
        &self,
        event_id: u128,
    ) -> Result<Option<Result<Verdict, IngestReject>>, StoreError> {
        let mut con = self.inner().con();
        let code: Option<i64> = redis::cmd("GET")
            .arg(self.pipe.verdict_key(event_id))
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        Ok(code.and_then(decision_of))
    }

    async fn pipeline_stats(&self) -> Result<Option<Json>, StoreError> {
        let lag = self.pipe.lag().await?;
        let parts: Vec<Json> = lag
            .iter()
            .map(|l| {
                json!({"partition": l.partition, "group": l.group, "pending": l.pending, "unread": l.unread})
            })
            .collect();
        let backlog: u64 = lag.iter().map(|l| l.pending + l.unread).sum();
        let archive_age = self.inner().archive_age().await?;
        let refused: HashMap<String, u64> = redis::cmd("HGETALL")
            .arg(self.pipe.refused_key())
            .query_async(&mut self.inner().con())
            .await
            .map_err(store_err)?;
        let reason = |r: &str| refused.get(r).copied().unwrap_or(0);
        Ok(Some(json!({
            "partitions": self.pipe.cfg.partitions,
            "backlog": backlog,
            "maxBacklog": self.pipe.cfg.max_backlog,
            "archiveAgeSeconds": archive_age,
            "refused": {
                "unknownArticle": reason("unknown_article"),
                "tooManyArticles": reason("too_many_articles"),
            },
            "lag": parts,
        })))
    }

    async fn put_article(
        &self,
        id: ArticleId,
        meta: ArticleMeta,
        now: Timestamp,
    ) -> Result<PutOutcome, StoreError> {
        let Some(epoch) = self.pipe.op_epoch().await? else {
            return self.inner().put_article(id, meta, now).await;
        };
        let run = OpRun::Journaled { epoch: &epoch };
        let done = self.inner().put_run(&id, &meta, &run).await;
        self.pipe
            .journaled(&epoch, OpKind::Put, done, |_| id.to_string())
            .await
    }

    async fn article(
        &self,
        id: &ArticleId,
        now: Timestamp,
    ) -> Result<Option<ArticleView>, StoreError> {
        self.inner().article(id, now).await
    }

    async fn delete_article(&self, id: &ArticleId, now: Timestamp) -> Result<bool, StoreError> {
        let Some(epoch) = self.pipe.op_epoch().await? else {
            return self.inner().delete_article(id, now).await;
        };
        let run = OpRun::Journaled { epoch: &epoch };
        let done = self.inner().delete_run(id, &run).await;
        self.pipe
            .journaled(&epoch, OpKind::Delete, done, |_| id.to_string())
            .await
    }

    async fn hot(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        self.inner().hot(q, now).await
    }

    async fn newest(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        self.inner().newest(q, now).await
    }

    async fn stats(&self, now: Timestamp, hours: u32) -> Result<Stats, StoreError> {
        self.inner().stats(now, hours).await
    }

    async fn hourly(
        &self,
        id: &ArticleId,
        now: Timestamp,
        hours: u32,
    ) -> Result<Option<Vec<HourlyRow>>, StoreError> {
        self.inner().hourly(id, now, hours).await
    }

    async fn post_article(
        &self,
        meta: ArticleMeta,
        poster: Voter<'_>,
        now: Timestamp,
    ) -> Result<ArticleId, StoreError> {
        let Some(epoch) = self.pipe.op_epoch().await? else {
            return self.inner().post_article(meta, poster, now).await;
        };
        let run = OpRun::Journaled { epoch: &epoch };
        let done = self.inner().post_run(meta, poster, now, &run).await;
        self.pipe
            .journaled(&epoch, OpKind::Post, done, |id| id.to_string())
            .await
    }

    async fn vote(
        &self,
        id: &ArticleId,
        voter: Voter<'_>,
        dir: VoteDirection,
        now: Timestamp,
    ) -> Result<VoteOutcome, StoreError> {
        let Some(epoch) = self.pipe.op_epoch().await? else {
            return self.inner().vote(id, voter, dir, now).await;
        };
        let run = OpRun::Journaled { epoch: &epoch };
        let done = self.inner().vote_run(id, voter, dir, now, &run).await;
        self.pipe
            .journaled(&epoch, OpKind::Vote, done, |_| id.to_string())
            .await
    }

    async fn ready(&self) -> Result<(), StoreError> {
        self.inner().ready().await
    }

    async fn maintain(&self, now: Timestamp) -> Result<(), StoreError> {
        self.inner().maintain(now).await
    }

    async fn archive_age(&self) -> Result<Option<i64>, StoreError> {
        self.inner().archive_age().await
    }

    fn warming(&self) -> Option<String> {
        self.inner().warming()
    }

    async fn keep_rankings(&self, now: Timestamp) -> Result<(), StoreError> {
        self.inner().keep_rankings(now).await
    }

    async fn shutdown(&self) -> Result<(), StoreError> {
        self.inner().shutdown().await
    }
}

/// Running workers of one process ([`spawn_workers`]).
pub struct Workers {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Workers {
    /// Asks every worker to stop after its current step, and waits.
    pub async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Starts `filter` filter workers and `count` count workers as tasks.
pub fn spawn_workers(pipe: &Arc<IngestPipeline>, filter: usize, count: usize) -> Workers {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (role, k) in [(Role::Filter, filter), (Role::Count, count)] {
        for i in 0..k {
            tasks.push(tokio::spawn(pipe.clone().run_worker(
                role,
                consumer_name(role, i),
                stop.clone(),
            )));
        }
    }
    Workers { stop, tasks }
}

/// The newest API `now` among flagged entries (field 8, pipe_flag.lua):
/// the data time a restore for them starts the article's idle clock at.
fn entries_now(entries: &[Entry]) -> crate::model::Timestamp {
    entries
        .iter()
        .filter_map(|(_, f)| std::str::from_utf8(f.get(7)?).ok()?.parse().ok())
        .max()
        .unwrap_or(0)
}
