//! The queue of seed 002's two-stage counting pipeline on Redis Streams
//! (docs/design.md, "IngestPipeline").
//!
//! API nodes append validated events to raw streams partitioned by article
//! (`pipe:raw:<n>`, [`IngestPipeline::append`]) and answer `queued`; filter
//! workers (group `filter`) run the gate on batches of raw entries and
//! write each with its verdict to the flagged stream of the same partition
//! (`pipe:flagged:<n>`); count workers (group `count`) apply the flagged
//! entries with the same Lua the direct store runs (`gate.lua`,
//! `apply.lua`; worker.rs). Each worker call acknowledges its entries in
//! the same script as their effects, and skips entries the group no longer
//! holds pending: a worker killed anywhere, or an entry delivered twice,
//! changes no count.

use std::sync::Arc;

use redis::Script;

use super::journal::{Journal, JournalEntry};
use super::stream::{IDS, Role};
use crate::config::PipelineConfig;
use crate::model::{ArticleId, Event, Timestamp};
use crate::store::StoreError;
use crate::store::redis::{
    APPLY, COMMON, EPOCH_CHECK, EVENT, EVICTED, GATE, OpEntry, OpKind, OpStamp, RedisStore, TOTALS,
    bad_reply, chunks, event_args, kind_char, sharded, store_err,
};

pub(super) struct PipeScripts {
    append: Script,
    unappend: Script,
    pub(super) filter: Script,
    pub(super) count: Script,
    pub(super) trim: Script,
}

/// The gate's settings as script arguments (`pipe_gate_args.lua`,
/// [`IngestPipeline::gate_header`]).
pub(crate) const GATE_ARGS: &str = include_str!("pipe_gate_args.lua");

/// The pipeline over one Redis store.
pub struct IngestPipeline {
    pub(super) store: Arc<RedisStore>,
    pub(super) cfg: PipelineConfig,
    pub(super) scripts: PipeScripts,
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
    pub fn with_journal(mut self, url: &str) -> Result<Self, super::PipelineError> {
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
        self.verdict_key_hex(&format!("{event_id:032x}"))
    }

    /// [`Self::verdict_key`] of an eventId as a raw entry holds it (hex).
    pub(super) fn verdict_key_hex(&self, event_id: &str) -> String {
        format!("{}pipe:verdict:{event_id}", self.store.keys().prefix)
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

    pub(super) fn stream(&self, role: Role, n: u32) -> String {
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
        self.declare(&mut inv, || {
            parts.iter().map(|(n, _)| self.raw_key(*n)).collect()
        });
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
    pub(super) async fn op_epoch(&self) -> Result<Option<String>, StoreError> {
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
    pub(super) async fn journaled<T>(
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
    pub(super) async fn append_placed(
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
        self.declare(&mut inv, || {
            let mut keys = vec![self.store.keys().epoch()];
            for (n, _) in &used {
                keys.extend([self.raw_key(*n), self.flagged_key(*n)]);
            }
            keys
        });
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
}
