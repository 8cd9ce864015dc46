//! Disaster recovery (docs/design.md, "Disaster recovery"): a Redis that
//! lost everything is rebuilt from the archive, then the journal is
//! replayed over it in raw entry id order: every entry goes through the
//! gate again (its state, dedupe windows and rate limits, is rebuilt), and
//! those an article's archived position does not include are applied
//! (`pipe_replay.lua`). Each acknowledged event is counted once: by the
//! archive or by the replay. Journaled article operations (ops.rs) whose
//! numbers are past their article's archived one run again, in their
//! article's order, merged with the events by time.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use redis::Script;

use super::error::PipelineError;
use super::ingest::{GATE_ARGS, IngestPipeline};
use super::journal::JournalEntry;
use super::position::{ArticlePosition, PartitionPosition, PartitionsAt, Replay};
use super::stream::{FILTER_GROUP, stream_id};
use crate::archive::Archive;
use crate::model::Timestamp;
use crate::store::StoreError;
use crate::store::redis::{
    APPLY, COMMON, EVENT, GATE, Keys, OpEntry, TOTALS, load_redis, set_nx_get, sharded, store_err,
};

/// One shard only: config refuses a pipeline (and so a journal to
/// replay) over more than one article shard for now.
static REPLAY: LazyLock<Script> = LazyLock::new(|| {
    sharded(
        &Keys::new(""),
        &[
            EVENT,
            GATE_ARGS,
            include_str!("pipe_replay.lua"),
            COMMON,
            GATE,
            include_str!("pipe_replay_apply.lua"),
            APPLY,
            TOTALS,
            "\nreturn { #ev, counted }\n",
        ],
    )
});

/// Journal entries per replay call.
const BATCH: usize = 500;
/// Journal entries per read.
const PAGE: usize = 10_000;

/// What a restore did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Articles restored from the archive.
    pub articles: u64,
    /// Journal entries gated again.
    pub entries: u64,
    /// Of those, entries applied (the archive did not include them).
    pub applied: u64,
    /// Of those, entries counted.
    pub counted: u64,
    /// Article operations run again (the archive did not include them).
    pub ops: u64,
    /// Journaled operations the archive included (not run).
    pub ops_included: u64,
    /// Operations whose number on replay was not the journaled one: an
    /// operation of the article is missing from the journal (it took
    /// effect but its journal append failed) or changed nothing.
    pub ops_out_of_step: u64,
    /// The pipeline epoch Redis holds again.
    pub epoch: String,
}

/// Operations in time order (`x`, then article and number), each
/// article's operations then put in the order of their numbers in the
/// slots its operations hold: an article's order is its numbers' even if
/// Redis's clock stepped back between two of them.
fn in_article_order(mut ops: Vec<OpEntry>) -> Vec<OpEntry> {
    ops.sort_by(|a, b| {
        (stream_id(&a.x), &a.article, a.seq).cmp(&(stream_id(&b.x), &b.article, b.seq))
    });
    let mut slots: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, o) in ops.iter().enumerate() {
        slots.entry(o.article.clone()).or_default().push(i);
    }
    let mut out: Vec<Option<OpEntry>> = vec![None; ops.len()];
    let mut ops: Vec<Option<OpEntry>> = ops.into_iter().map(Some).collect();
    for idx in slots.values() {
        let mut mine: Vec<OpEntry> = idx.iter().filter_map(|&i| ops[i].take()).collect();
        mine.sort_by_key(|o| o.seq);
        for (&i, o) in idx.iter().zip(mine) {
            out[i] = Some(o);
        }
    }
    out.into_iter().flatten().collect()
}

impl IngestPipeline {
    /// Runs journaled operations again, in order (one round trip per
    /// `BATCH`); counts them in `done`.
    async fn replay_ops(&self, ops: &[OpEntry], done: &mut Replayed) -> Result<(), StoreError> {
        for part in ops.chunks(BATCH) {
            let got = self.store().replay_ops(part).await?;
            done.ops += part.len() as u64;
            done.ops_out_of_step +=
                part.iter().zip(&got).filter(|(o, g)| o.seq != **g).count() as u64;
            metrics::counter!("hotrank_pipeline_ops_replayed_total").increment(part.len() as u64);
        }
        Ok(())
    }

    /// Restores this pipeline's Redis, which must have lost everything
    /// (no articles, no `pipe:epoch`), from `archive` and replays the
    /// journal over it (see the module docs). `progress` gets a line per
    /// step. Sets `pipe:epoch` last: API nodes queue again from then on.
    pub async fn restore_and_replay(
        &self,
        archive: &Archive,
        now: Timestamp,
        mut progress: impl FnMut(String),
    ) -> Result<Replayed, PipelineError> {
        let journal = self.journal().ok_or(PipelineError::NoJournal)?;
        let store = self.store();
        if store.keys().shards > 1 {
            return Err(PipelineError::Sharded);
        }
        if self.declares() {
            return Err(PipelineError::Cluster);
        }
        let main_key = store.keys().epoch();
        let held: Option<String> = redis::cmd("GET")
            .arg(&main_key)
            .query_async(&mut store.con())
            .await
            .map_err(store_err)?;
        if let Some(e) = held {
            return Err(PipelineError::NotLost(e));
        }
        let epoch = journal
            .epoch()
            .await?
            .ok_or_else(|| PipelineError::NoEpoch(journal.epoch_key()))?;
        if let Some(row) = archive.pipeline().await?
            && row.epoch != epoch
        {
            return Err(PipelineError::OtherSite {
                archive: row.epoch,
                journal: epoch,
            });
        }
        let mut positions: HashMap<String, ArticlePosition> = HashMap::new();
        for (id, pos) in archive.positions().await? {
            let p: ArticlePosition = match serde_json::from_str(&pos) {
                Ok(p) => p,
                Err(source) => return Err(PipelineError::ArchivedPosition { id, pos, source }),
            };
            positions.insert(id, p);
        }
        // The position the archived totals were read at (none: an archive
        // written before they were; then entries add to the totals what
        // they add to their articles).
        let totals_at: Option<PartitionsAt> = archive
            .totals_position()
            .await?
            .map(|p| {
                serde_json::from_str::<Vec<PartitionPosition>>(&p)
                    .map(PartitionsAt::new)
                    .map_err(|source| PipelineError::TotalsPosition { pos: p, source })
            })
            .transpose()?;
        let records = archive
            .records(|n| progress(format!("read {n} articles from the archive")))
            .await?;
        let articles = load_redis(store, &records, &store.settings, now).await? as u64;
        let top_numeric = records
            .iter()
            .filter_map(|r| match r {
                crate::store::dump::Record::Article { id, .. } => id.as_str().parse::<u64>().ok(),
                _ => None,
            })
            .max();
        progress(format!("restored {articles} articles into Redis"));

        // The journal, every partition, in raw entry id order (a raw id
        // journaled twice is replayed once; ids are per partition).
        let mut entries: Vec<JournalEntry> = Vec::new();
        let mut seen = HashSet::new();
        let mut last_of = vec![None; self.config().partitions as usize];
        for n in 0..self.config().partitions {
            let mut after = "-".to_string();
            loop {
                let page = journal.read(n, &after, PAGE).await?;
                let Some((last, _)) = page.last() else { break };
                after = last.clone();
                for (_, (x, values)) in page {
                    if seen.insert((n, x.clone())) {
                        if last_of[n as usize]
                            .as_ref()
                            .is_none_or(|l: &String| stream_id(l) < stream_id(&x))
                        {
                            last_of[n as usize] = Some(x.clone());
                        }
                        entries.push((x, values));
                    }
                }
            }
        }
        entries.sort_by_key(|(x, _)| stream_id(x));
        progress(format!("read {} journal entries", entries.len()));

        // New raw entries follow the replayed ones, and positions taken
        // from now on include them.
        self.ensure_groups().await?;
        for (n, last) in last_of.iter().enumerate() {
            let Some(last) = last else { continue };
            let raw = self.raw_key(n as u32);
            redis::pipe()
                .cmd("XSETID")
                .arg(&raw)
                .arg(last)
                .ignore()
                .cmd("XGROUP")
                .arg("SETID")
                .arg(&raw)
                .arg(FILTER_GROUP)
                .arg(last)
                .ignore()
                .query_async::<()>(&mut store.con())
                .await
                .map_err(|source| PipelineError::MoveRaw {
                    partition: n as u32,
                    source,
                })?;
        }

        // Article operations past their article's archived number, in
        // time order but each article's in its own order; and each
        // restored article numbered as archived, so that they continue it.
        let ops = journal.read_ops().await?;
        let archived_ops = |a: &str| positions.get(a).map_or(0, |p| p.ops);
        let ops_total = ops.len() as u64;
        let ops = in_article_order(
            ops.into_iter()
                .filter(|o| o.seq > archived_ops(&o.article))
                .collect(),
        );
        let mut numbered = redis::pipe();
        for (id, p) in &positions {
            if p.ops > 0
                && let Ok(id) = crate::model::ArticleId::parse(id)
            {
                numbered.hset(store.keys().meta(&id), "ops", p.ops).ignore();
            }
        }
        if !numbered.is_empty() {
            numbered
                .query_async::<()>(&mut store.con())
                .await
                .map_err(store_err)?;
        }
        progress(format!(
            "read {ops_total} journaled article operations ({} to run again)",
            ops.len()
        ));

        let mut done = Replayed {
            articles,
            epoch: epoch.clone(),
            ops_included: ops_total - ops.len() as u64,
            ..Default::default()
        };
        let mut con = store.con();
        let mut next_op = 0;
        let mut from = 0;
        while from < entries.len() {
            // Operations that ran before the next entry go first.
            let upto = next_op
                + ops[next_op..]
                    .partition_point(|o| stream_id(&o.x) <= stream_id(&entries[from].0));
            self.replay_ops(&ops[next_op..upto], &mut done).await?;
            next_op = upto;
            let limit = ops.get(next_op).map_or(entries.len(), |o| {
                from + entries[from..].partition_point(|(x, _)| stream_id(x) < stream_id(&o.x))
            });
            let to = (from + BATCH).min(limit.max(from + 1));
            let batch = &entries[from..to];
            from = to;
            let mut inv = REPLAY.prepare_invoke();
            self.gate_header(&mut inv);
            inv.arg(batch.len());
            for (x, values) in batch {
                let art = values
                    .get(2)
                    .and_then(|a| std::str::from_utf8(a).ok())
                    .unwrap_or("");
                let code = |r: Option<Replay>| match r {
                    Some(Replay::Included) => "i".to_string(),
                    None | Some(Replay::Gate) => String::new(),
                    Some(Replay::Decided(v)) => v.to_string(),
                };
                let for_article = positions.get(art).map(|p| p.replay(x));
                let for_totals = match &totals_at {
                    Some(t) => t.replay(self.partition_of_str(art), x),
                    None => for_article,
                };
                inv.arg(x.as_str())
                    .arg(code(for_article))
                    .arg(code(for_totals));
                for v in values {
                    inv.arg(&v[..]);
                }
            }
            let (applied, counted): (u64, u64) =
                inv.invoke_async(&mut con).await.map_err(store_err)?;
            let before = done.entries;
            done.entries += batch.len() as u64;
            done.applied += applied;
            done.counted += counted;
            metrics::counter!("hotrank_pipeline_replayed_total").increment(batch.len() as u64);
            if done.entries / 50_000 != before / 50_000 || done.entries == entries.len() as u64 {
                progress(format!(
                    "replayed {}/{} journal entries ({} applied, {} counted)",
                    done.entries,
                    entries.len(),
                    done.applied,
                    done.counted
                ));
            }
        }
        self.replay_ops(&ops[next_op..], &mut done).await?;
        if done.ops > 0 || done.ops_included > 0 {
            progress(format!(
                "ran {} article operations again ({} out of step with the journal)",
                done.ops, done.ops_out_of_step
            ));
        }
        if done.ops_out_of_step > 0 {
            tracing::warn!(
                ops = done.ops_out_of_step,
                "restore: article operations out of step with the journal (an operation took effect unjournaled)"
            );
        }
        // Posts number new articles after the highest numeric id (post.lua
        // skips ids taken anyway; replayed posts moved it already).
        if let Some(top) = top_numeric {
            let cur: Option<u64> = redis::cmd("GET")
                .arg(store.keys().post_counter())
                .query_async(&mut store.con())
                .await
                .map_err(store_err)?;
            if cur.is_none_or(|c| c < top) {
                redis::cmd("SET")
                    .arg(store.keys().post_counter())
                    .arg(top)
                    .query_async::<()>(&mut store.con())
                    .await
                    .map_err(store_err)?;
            }
        }
        let set = set_nx_get(&mut store.con(), &main_key, &epoch).await?;
        if set != epoch {
            return Err(PipelineError::EpochTaken(set));
        }
        progress(format!(
            "Redis holds pipeline epoch {epoch} again: API nodes queue events"
        ));
        Ok(done)
    }
}
