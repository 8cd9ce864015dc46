//! Where the pipeline stands (`pipe_position.lua`), as the archive records
//! it with each article (docs/design.md, "Disaster recovery"): the raw
//! entries of the article's partition whose effects its archived counts
//! include. A restore replays the journal's other entries.

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use redis::{Script, Value};
use serde::{Deserialize, Serialize};

use super::ingest::IngestPipeline;
use super::stream::{IDS, stream_id};
use crate::archive::ArticlePositions;
use crate::model::{ArticleId, Timestamp};
use crate::store::StoreError;
use crate::store::dump::Record;
use crate::store::redis::{
    bad_reply, chunks, positioned_records, quarantine_of, store_err, v_i64, v_str,
};

/// Entries in flight the position script walks at most; past it, the
/// archive writer's flush fails (and is retried): a walk holds Redis
/// (about 12 µs an entry, bench/pipeline_journal.sh).
pub const MAX_FLIGHT: u64 = 10_000;

static POSITION: LazyLock<Script> =
    LazyLock::new(|| chunks(&[IDS, include_str!("pipe_position.lua")]));

/// What an archived article's counts include: every raw entry of
/// partition `p` up to `upto` but those in `pending` (its own entries
/// still in flight when it was read); `decided` gives the verdicts the
/// gate had given some of those (flagged, not yet applied).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArticlePosition {
    pub p: u32,
    pub upto: String,
    pub pending: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub decided: BTreeMap<String, i64>,
    /// The article operations its state includes: those numbered up to
    /// this in its sequence (ops.rs).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ops: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What a replay does with one journaled raw entry of an article.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// The archived counts include it: gate it (for the gate's state) only.
    Included,
    /// Gate it and apply the verdict the gate gives now.
    Gate,
    /// Gate it, and apply the verdict the gate gave it before the disaster.
    Decided(i64),
}

/// What a replay does with raw entry `x` of a state read at `upto`: its
/// verdict if it was `decided` then, else gated again if it came after
/// `upto` or was `pending`, else the state includes it.
fn replay_of(x: &str, upto: &str, decided: Option<i64>, pending: bool) -> Replay {
    if let Some(v) = decided {
        Replay::Decided(v)
    } else if stream_id(x) > stream_id(upto) || pending {
        Replay::Gate
    } else {
        Replay::Included
    }
}

impl ArticlePosition {
    /// What a replay does with raw entry `x` of this article.
    pub fn replay(&self, x: &str) -> Replay {
        replay_of(
            x,
            &self.upto,
            self.decided.get(x).copied(),
            self.pending.iter().any(|p| p == x),
        )
    }
}

/// The store totals (`stats:counted`, `stats:quarantine`, the hourly
/// quarantine tallies), as [`IngestPipeline::position_with_totals`] reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    pub counted: u64,
    pub quarantine: [u64; 4],
    pub by_hour: Vec<(i64, [u64; 4])>,
}

/// One partition's position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionPosition {
    /// The filter group's last delivered raw entry.
    pub upto: String,
    /// Raw entries up to `upto` not applied yet: (raw id, article, verdict
    /// if decided).
    pub flight: Vec<(String, String, Option<i64>)>,
}

/// A state that covers whole partitions (the store totals), read at
/// these positions: what a replay does with each raw entry.
pub struct PartitionsAt {
    parts: Vec<(String, HashMap<String, Option<i64>>)>,
}

impl PartitionsAt {
    pub fn new(positions: Vec<PartitionPosition>) -> Self {
        PartitionsAt {
            parts: positions
                .into_iter()
                .map(|p| {
                    (
                        p.upto,
                        p.flight.into_iter().map(|(x, _, v)| (x, v)).collect(),
                    )
                })
                .collect(),
        }
    }

    /// What a replay does with raw entry `x` of partition `n` (`None`: a
    /// partition the positions do not have).
    pub fn replay(&self, n: u32, x: &str) -> Option<Replay> {
        let (upto, flight) = self.parts.get(n as usize)?;
        let mine = flight.get(x);
        Some(replay_of(x, upto, mine.copied().flatten(), mine.is_some()))
    }
}

impl PartitionPosition {
    /// The oldest raw entry an article read at this position or later may
    /// need replayed: its oldest entry in flight, else `upto`.
    pub fn floor(&self) -> String {
        self.flight
            .iter()
            .map(|(id, _, _)| id)
            .min_by_key(|id| stream_id(id))
            .unwrap_or(&self.upto)
            .clone()
    }
}

fn parse(v: &Value) -> Result<Vec<PartitionPosition>, StoreError> {
    let bad = || bad_reply("pipe_position");
    let Value::Array(parts) = v else {
        return Err(bad());
    };
    parts
        .iter()
        .map(|p| {
            let Value::Array(p) = p else {
                return Err(bad());
            };
            let [upto, flight] = p.as_slice() else {
                return Err(bad());
            };
            let Value::Array(flight) = flight else {
                return Err(bad());
            };
            Ok(PartitionPosition {
                upto: v_str(upto).ok_or_else(bad)?.to_string(),
                flight: flight
                    .chunks(3)
                    .filter_map(|c| {
                        Some((
                            v_str(c.first()?)?.to_string(),
                            v_str(c.get(1)?)?.to_string(),
                            v_str(c.get(2)?)?.parse().ok(),
                        ))
                    })
                    .collect(),
            })
        })
        .collect()
}

impl IngestPipeline {
    /// The position script's call (loaded by the caller).
    fn position_cmd(&self) -> redis::Cmd {
        let parts = self.config().partitions;
        let streams: Vec<String> = (0..parts)
            .flat_map(|n| [self.raw_key(n), self.flagged_key(n)])
            .collect();
        let mut c = redis::cmd("EVALSHA");
        c.arg(POSITION.get_hash());
        // (Declared on a cluster: declare.rs.)
        if self.declares() {
            c.arg(streams.len()).arg(&streams);
        } else {
            c.arg(0);
        }
        c.arg(MAX_FLIGHT).arg(parts).arg(&streams);
        c
    }

    async fn load_position(&self) -> Result<(), StoreError> {
        POSITION
            .prepare_invoke()
            .load_async(&mut self.store().con())
            .await
            .map(drop)
            .map_err(store_err)
    }

    /// Redis's time now as `<ms>-0`, taken before a flush takes the
    /// changed articles: every article operation that ran before it
    /// (journal field `x` below it) marked its article changed before the
    /// take, so once the flush succeeds the archive holds its effect, and
    /// the journal no longer needs it (ops.rs).
    pub async fn ops_floor(&self) -> Result<String, StoreError> {
        // (On a cluster: the clock of the node that numbers the site's
        // stream entries.)
        let (secs, micros): (u64, u64) = self
            .store()
            .con()
            .query_at(&self.store().keys().epoch(), redis::cmd("TIME"))
            .await
            .map_err(store_err)?;
        Ok(format!("{}-0", secs * 1000 + micros / 1000))
    }

    /// Where every partition stands now, and the store totals read with
    /// it (one MULTI/EXEC): counted events, quarantine by reason, and by
    /// hour for the hours Redis keeps (`hourly_days`) around `now`.
    pub async fn position_with_totals(
        &self,
        now: Timestamp,
    ) -> Result<(Vec<PartitionPosition>, Totals), StoreError> {
        self.load_position().await?;
        let keys = self.store().keys();
        let hours = crate::time::hour_of(now) - 24 * i64::from(self.store().options().hourly_days)
            ..=crate::time::hour_of(now) + 2;
        let mut p = redis::pipe();
        p.atomic()
            .add_command(self.position_cmd())
            .get(keys.counted())
            .hgetall(keys.quarantine());
        for h in hours.clone() {
            p.hgetall(keys.quarantine_h(h));
        }
        let got: Vec<Value> = p
            .query_async(&mut self.store().con())
            .await
            .map_err(store_err)?;
        let mut it = got.into_iter();
        let mut next = || it.next().ok_or_else(|| bad_reply("totals"));
        let position = parse(&next()?)?;
        let counted = v_i64(&next()?).unwrap_or(0).max(0) as u64;
        let quarantine = quarantine_of(&next()?);
        let mut by_hour = Vec::new();
        for h in hours {
            let q = quarantine_of(&next()?);
            if q.iter().any(|n| *n > 0) {
                by_hour.push((h, q));
            }
        }
        Ok((
            position,
            Totals {
                counted,
                quarantine,
                by_hour,
            },
        ))
    }

    /// Where every partition stands now.
    pub async fn position(&self) -> Result<Vec<PartitionPosition>, StoreError> {
        self.load_position().await?;
        let v: Value = self
            .position_cmd()
            .query_async(&mut self.store().con())
            .await
            .map_err(store_err)?;
        parse(&v)
    }

    /// The records of `ids` (with every daily bucket when `whole`), each
    /// with the position its counts were read at, as JSON
    /// ([`ArticlePosition`]).
    pub async fn positioned_records(
        &self,
        ids: &[ArticleId],
        now: Timestamp,
        whole: bool,
    ) -> Result<(Vec<Record>, ArticlePositions), StoreError> {
        self.load_position().await?;
        let head = self.position_cmd();
        let chunks = positioned_records(self.store(), ids, now, whole, &head).await?;
        let mut records = Vec::with_capacity(ids.len());
        let mut at = HashMap::with_capacity(ids.len());
        for (part, v, ops) in chunks {
            let pos = parse(&v)?;
            for r in &part {
                let Record::Article { id, .. } = r else {
                    continue;
                };
                let p = self.partition_of(id);
                let Some(pp) = pos.get(p as usize) else {
                    return Err(bad_reply("pipe_position partitions"));
                };
                let mine = || pp.flight.iter().filter(|(_, art, _)| art == id.as_str());
                let a = ArticlePosition {
                    p,
                    upto: pp.upto.clone(),
                    pending: mine().map(|(x, _, _)| x.clone()).collect(),
                    decided: mine()
                        .filter_map(|(x, _, v)| Some((x.clone(), (*v)?)))
                        .collect(),
                    ops: ops.get(id).copied().unwrap_or(0),
                };
                at.insert(
                    id.clone(),
                    serde_json::to_string(&a).map_err(|e| StoreError::Internal(e.to_string()))?,
                );
            }
            records.extend(part);
        }
        Ok((records, at))
    }
}
