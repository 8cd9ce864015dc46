//! The pipeline's journal (docs/design.md, "Disaster recovery"): a copy of
//! every queued raw entry on a second Redis (`[pipeline] log_url`),
//! appended by the API node after the raw stream and before it answers
//! 202, so that a Redis that lost everything can be rebuilt from the
//! archive plus a replay of the journal.
//!
//! Streams `pipe:journal:<n>` (one per partition) hold entries with the
//! raw entry's id (`x`) and its 13 values (the raw stream's field names);
//! `pipe:journal:ops` holds the article operations (ops.rs), each with
//! its place among raw entries (`x`: `<ms>-0`, Redis's time when it ran).
//! `pipe:journal:epoch` names the pipeline epoch the journal belongs to;
//! the main Redis holds the same value in `pipe:epoch`, and the archive
//! records it with its journal floor. An epoch is created once, for a new
//! site, and kept across restores: a Redis that lost `pipe:epoch` refuses
//! every append until a restore sets it again.

use std::time::Duration;

use redis::Script;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::error::PipelineError;
use super::stream::{IDS, parse_entries};
use crate::store::StoreError;
use crate::store::redis::{
    OpEntry, Reconciled, RedisStore, bad_reply, chunks, fresh, reconcile, set_nx_get, store_err,
};

/// Journal entries a trim looks at per partition at most.
const TRIM_SCAN: u64 = 100_000;

/// One raw entry as journaled: its raw id and its 13 values.
pub type JournalEntry = (String, Vec<Vec<u8>>);

/// The journal's Redis.
pub struct Journal {
    con: ConnectionManager,
    prefix: String,
    append: Script,
    append_op: Script,
    trim: Script,
}

impl Journal {
    /// A lazy connection to the journal's Redis at `url`, for the keys of
    /// `prefix` (the main store's).
    pub fn open(url: &str, prefix: &str) -> Result<Journal, PipelineError> {
        let client = redis::Client::open(url).map_err(|source| PipelineError::LogUrl {
            url: url.to_string(),
            source,
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(Duration::from_secs(5)))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        Ok(Journal {
            con: ConnectionManager::new_lazy_with_config(client, config)
                .map_err(PipelineError::JournalConnection)?,
            prefix: prefix.to_string(),
            append: Script::new(include_str!("pipe_journal.lua")),
            append_op: Script::new(include_str!("pipe_journal_op.lua")),
            trim: chunks(&[IDS, include_str!("pipe_journal_trim.lua")]),
        })
    }

    /// The journal stream of partition `n`.
    pub fn key(&self, n: u32) -> String {
        format!("{}pipe:journal:{n}", self.prefix)
    }

    /// The journal stream of article operations.
    pub fn ops_key(&self) -> String {
        format!("{}pipe:journal:ops", self.prefix)
    }

    /// The epoch the journal belongs to.
    pub fn epoch_key(&self) -> String {
        format!("{}pipe:journal:epoch", self.prefix)
    }

    pub fn con(&self) -> ConnectionManager {
        self.con.clone()
    }

    /// The journal's epoch, if it has one.
    pub async fn epoch(&self) -> Result<Option<String>, StoreError> {
        redis::cmd("GET")
            .arg(self.epoch_key())
            .query_async(&mut self.con())
            .await
            .map_err(store_err)
    }

    /// Journals raw entries (by partition), all or none.
    pub async fn append(
        &self,
        epoch: &str,
        parts: &[(u32, Vec<JournalEntry>)],
    ) -> Result<(), StoreError> {
        let mut inv = self.append.prepare_invoke();
        inv.arg(self.epoch_key()).arg(epoch).arg(parts.len());
        for (n, entries) in parts {
            inv.arg(self.key(*n)).arg(entries.len());
            for (id, values) in entries {
                inv.arg(id.as_str());
                for v in values {
                    inv.arg(&v[..]);
                }
            }
        }
        inv.invoke_async::<i64>(&mut self.con())
            .await
            .map(drop)
            .map_err(store_err)
    }

    /// Journals one article operation.
    pub async fn append_op(&self, epoch: &str, op: &OpEntry) -> Result<(), StoreError> {
        let mut inv = self.append_op.prepare_invoke();
        inv.arg(self.epoch_key()).arg(epoch).arg(self.ops_key());
        for (f, v) in op.fields() {
            inv.arg(f).arg(v);
        }
        inv.invoke_async::<i64>(&mut self.con())
            .await
            .map(drop)
            .map_err(store_err)
    }

    /// Every journaled article operation, in journal order.
    pub async fn read_ops(&self) -> Result<Vec<OpEntry>, StoreError> {
        let mut out = Vec::new();
        let mut start = "-".to_string();
        loop {
            let v: redis::Value = redis::cmd("XRANGE")
                .arg(self.ops_key())
                .arg(&start)
                .arg("+")
                .arg("COUNT")
                .arg(10_000)
                .query_async(&mut self.con())
                .await
                .map_err(store_err)?;
            let page = parse_entries(&v)?;
            let Some((last, _)) = page.last() else {
                return Ok(out);
            };
            start = format!("({last}");
            for (_, values) in page {
                out.push(OpEntry::parse(values).ok_or_else(|| bad_reply("journal op"))?);
            }
        }
    }

    /// Entries of partition `n` after journal id `after` (`-` for the
    /// first), at most `count`: (journal id, raw entry).
    pub async fn read(
        &self,
        n: u32,
        after: &str,
        count: usize,
    ) -> Result<Vec<(String, JournalEntry)>, StoreError> {
        let start = if after == "-" {
            "-".to_string()
        } else {
            format!("({after}")
        };
        let v: redis::Value = redis::cmd("XRANGE")
            .arg(self.key(n))
            .arg(start)
            .arg("+")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut self.con())
            .await
            .map_err(store_err)?;
        let mut out = Vec::new();
        for (id, mut values) in parse_entries(&v)? {
            if values.len() != 14 {
                return Err(bad_reply("journal entry"));
            }
            let x = String::from_utf8(values.remove(0)).map_err(|_| bad_reply("x"))?;
            out.push((id, (x, values)));
        }
        Ok(out)
    }

    /// Drops journal entries older than `keep_secs` whose raw ids are
    /// below the partition's floor (`pipe_journal_trim.lua`), and
    /// operations below `ops_floor` (a time as `<ms>-0`: every operation
    /// that ran before it is archived). Returns how many went.
    pub async fn trim(
        &self,
        floors: &[String],
        ops_floor: Option<&str>,
        keep_secs: u64,
    ) -> Result<u64, StoreError> {
        let mut con = self.con();
        let (secs, micros): (u64, u64) = redis::cmd("TIME")
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        let cutoff_ms = (secs * 1000 + micros / 1000).saturating_sub(keep_secs * 1000);
        let mut dropped = 0;
        let streams = floors
            .iter()
            .enumerate()
            .map(|(n, f)| (self.key(n as u32), f.as_str()))
            .chain(ops_floor.map(|f| (self.ops_key(), f)));
        for (key, floor) in streams {
            let d: i64 = self
                .trim
                .prepare_invoke()
                .arg(key)
                .arg(format!("{cutoff_ms}-0"))
                .arg(floor)
                .arg(TRIM_SCAN)
                .invoke_async(&mut con)
                .await
                .map_err(store_err)?;
            dropped += d.max(0) as u64;
        }
        if dropped > 0 {
            metrics::counter!("hotrank_pipeline_journal_trimmed_total").increment(dropped);
        }
        Ok(dropped)
    }

    /// The epoch the main Redis and the journal share, creating one for a
    /// new site (neither has one). Refuses a main Redis that lost its
    /// epoch while the journal has one (it lost its data: restore it), and
    /// two different epochs. A journal that lost its epoch adopts the main
    /// Redis's (it lost its entries: the disaster recovery window restarts).
    pub async fn attach(&self, store: &RedisStore) -> Result<String, StoreError> {
        let main_key = store.keys().epoch();
        let main: Option<String> = redis::cmd("GET")
            .arg(&main_key)
            .query_async(&mut store.con())
            .await
            .map_err(store_err)?;
        let log = self.epoch().await?;
        match reconcile(main, log) {
            Reconciled::Same(m) => Ok(m),
            Reconciled::Differ { main: m, known: l } => Err(StoreError::Unavailable(format!(
                "Redis holds pipeline epoch {m} but the journal ({}) holds {l}: they belong to different sites",
                self.epoch_key()
            ))),
            Reconciled::Lost(l) => Err(StoreError::Unavailable(format!(
                "Redis lost its pipeline state (no {main_key}; the journal holds epoch {l}): \
                 rebuild it with `hotrank archive restore --replay`"
            ))),
            Reconciled::OnlyMain(m) => {
                tracing::warn!(epoch = %m, "the journal's Redis holds no epoch: it lost its entries; journaling again from now");
                set_nx_get(&mut self.con(), &self.epoch_key(), &m).await
            }
            Reconciled::New => {
                let fresh = fresh();
                let e = set_nx_get(&mut self.con(), &self.epoch_key(), &fresh).await?;
                let got = set_nx_get(&mut store.con(), &main_key, &e).await?;
                if got != e {
                    return Err(StoreError::Unavailable(format!(
                        "Redis took pipeline epoch {got} while the journal took {e}: retry"
                    )));
                }
                tracing::info!(epoch = %e, "pipeline epoch created (new site)");
                Ok(e)
            }
        }
    }
}
