//! Ingest over a site spread over cluster slots (docs/redis-keys.md, "One
//! site over many primaries"): a read of the batch's
//! articles in their shards, a gate stage in the site's slot
//! (`gate_stage_pre.lua`, `ingest.lua`, `gate.lua`, `totals.lua`,
//! `gate_stage.lua`) that records the verdicts and an outbox entry per
//! shard, then a count stage per shard (`count_stage.lua`, `apply.lua`),
//! once per batch by its marker, then the outbox entries removed. The
//! sweeper ([`RedisStore::sweep_outbox`], in the maintenance loop) applies
//! the entries a node left behind.

use redis::Value;

use super::slots::key_slot;
use super::{RedisStore, StoreError, bad_reply, kind_char, store_err, v_i64};
use crate::model::{ArticleId, Event, Timestamp};

/// Outbox entries older than this many seconds are the sweeper's.
pub const SWEEP_AFTER_SECS: i64 = 5;

/// Where a test stops a split ingest (`RedisOptions::split_fault`): never
/// in a real deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SplitFault {
    #[default]
    None,
    /// After the gate stage: nothing counted yet, the outbox full.
    AfterGate,
    /// After the count stages, before the outbox entries are removed.
    AfterCount,
}

impl RedisStore {
    /// One batch (one chunk of an ingest call) over slots: its replies as
    /// ingest.lua gives them (verdict, PV, UV per event).
    pub(super) async fn ingest_over_slots(
        &self,
        header: &[String],
        batch: &str,
        part: &[Event],
        now: Timestamp,
        with_counts: bool,
    ) -> Result<Value, StoreError> {
        let k = &self.keys;
        // The read before the gate: each article's existence, and the
        // article count for max_articles.
        let mut arts: Vec<&ArticleId> = Vec::new();
        for ev in part {
            if !arts.contains(&&ev.article) {
                arts.push(&ev.article);
            }
        }
        let copies = if self.settings.max_articles > 0 {
            k.ledgers("stats:articles")
        } else {
            Vec::new()
        };
        let mut pipe = redis::pipe();
        for a in &arts {
            pipe.cmd("HMGET")
                .arg(k.meta(a))
                .arg("publishedAt")
                .arg("known");
        }
        for c in &copies {
            pipe.get(c);
        }
        let seen: Vec<Value> = self.query_pipe(&pipe).await.map_err(store_err)?;
        if seen.len() != arts.len() + copies.len() {
            return Err(bad_reply("ingest read"));
        }
        let count: i64 = seen[arts.len()..]
            .iter()
            .map(|v| v_i64(v).unwrap_or(0))
            .sum();
        let mut given: Vec<String> = vec![count.to_string(), arts.len().to_string()];
        for (a, v) in arts.iter().zip(&seen) {
            let (exists, known) = match v {
                Value::Array(f) => (
                    !matches!(f.first(), None | Some(Value::Nil)),
                    f.get(1).and_then(super::v_str) == Some("1"),
                ),
                _ => (false, false),
            };
            given.push(a.to_string());
            given.push(if exists { "1" } else { "0" }.into());
            given.push(if known { "1" } else { "0" }.into());
        }
        // Each stage declares its keys: the site's for the gate, the
        // shard's for its count stage.
        // A gate stage that declared the gate slots of a clock other than
        // the gate's wrote nothing: sent again once the clock is learnt.
        let site = key_slot(k.clock().as_bytes());
        let mut sends = 0;
        let (declared, reply) = loop {
            let declared = self.ingest_keys(part, batch, now);
            let mut gate_keys: Vec<String> = declared
                .iter()
                .filter(|n| key_slot(n.as_bytes()) == site)
                .cloned()
                .collect();
            gate_keys.extend(self.outbox_keys(batch));
            let reply: Vec<Value> = self
                .eval_pipe(|p| {
                    let c = p
                        .cmd("EVALSHA")
                        .arg(self.scripts.gate_stage.get_hash())
                        .arg(gate_keys.len());
                    for n in &gate_keys {
                        c.arg(n.as_str());
                    }
                    for h in header {
                        c.arg(h.as_str());
                    }
                    c.arg(batch).arg(part.len());
                    for ev in part {
                        event_args!(c, ev);
                    }
                    for g in &given {
                        c.arg(g.as_str());
                    }
                    self.wait_after(p);
                })
                .await?;
            let reply = self.replicated(reply, 1)?;
            sends += 1;
            match reply.as_slice() {
                [r] if sends < 4 && self.learnt_gate_clock(r, now) => continue,
                _ => break (declared, reply),
            }
        };
        let [Value::Array(reply)] = reply.as_slice() else {
            return Err(bad_reply("gate stage"));
        };
        let bytes = |v: &Value| match v {
            Value::BulkString(b) => b.clone(),
            Value::SimpleString(s) => s.clone().into_bytes(),
            _ => Vec::new(),
        };
        let verdicts = String::from_utf8(reply.first().map(bytes).unwrap_or_default())
            .map_err(|_| bad_reply("gate stage"))?;
        let codes: Vec<i64> = verdicts
            .split(',')
            .map(|c| c.parse().map_err(|_| bad_reply("gate stage")))
            .collect::<Result<_, _>>()?;
        if codes.len() != part.len() {
            return Err(bad_reply("gate stage"));
        }
        if self.opts.split_fault == SplitFault::AfterGate {
            return Err(StoreError::Unavailable(
                "test fault after the gate stage".into(),
            ));
        }
        let entries: Vec<(u32, Vec<u8>)> = reply[1..]
            .iter()
            .enumerate()
            .map(|(s, v)| (s as u32, bytes(v)))
            .filter(|(_, e)| !e.is_empty())
            .collect();
        self.count_stages(batch, &entries, Some(&declared), now)
            .await?;
        if self.opts.split_fault == SplitFault::AfterCount {
            return Err(StoreError::Unavailable(
                "test fault after the count stages".into(),
            ));
        }
        self.outbox_done(batch, entries.iter().map(|(s, _)| *s))
            .await?;
        // PV and UV of a single event's article, after it was counted.
        let mut pv_uv = (0, 0);
        if with_counts && !matches!(codes[0], 5 | 6) {
            let a = &part[0].article;
            let mut p = redis::pipe();
            p.get(k.views(a)).cmd("PFCOUNT").arg(k.uv(a));
            let got: (Option<i64>, i64) = self.query_pipe(&p).await.map_err(store_err)?;
            pv_uv = (got.0.unwrap_or(0), got.1);
        }
        let mut out = Vec::with_capacity(3 * codes.len());
        for c in codes {
            out.push(Value::Int(c));
            out.push(Value::Int(if with_counts { pv_uv.0 } else { 0 }));
            out.push(Value::Int(if with_counts { pv_uv.1 } else { 0 }));
        }
        Ok(Value::Array(out))
    }

    /// The outbox keys a gate stage of `batch` may write (site slot).
    fn outbox_keys(&self, batch: &str) -> Vec<String> {
        let k = &self.keys;
        let mut keys: Vec<String> = (0..k.shards).map(|s| k.outbox_entry(s, batch)).collect();
        keys.push(k.outbox());
        keys
    }

    /// Applies each (shard, entry) of `batch` in its shard's slot, all
    /// concurrently (one pipeline per slot); an entry applied before is
    /// skipped by its marker. A stage that found evicted articles wrote
    /// nothing: they are restored from the archive and the stage runs
    /// again (a concurrent eviction can only race a few times).
    /// `declared`: the batch's keys, when known, each stage declaring
    /// those of its slot.
    async fn count_stages(
        &self,
        batch: &str,
        entries: &[(u32, Vec<u8>)],
        declared: Option<&[String]>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut left: Vec<&(u32, Vec<u8>)> = entries.iter().collect();
        for _ in 0..5 {
            if left.is_empty() {
                return Ok(());
            }
            let got = self.count_stages_once(batch, &left, declared).await?;
            let mut gone: Vec<ArticleId> = Vec::new();
            let mut again = Vec::new();
            for (e, v) in left.into_iter().zip(&got) {
                if let Some(ids) = super::archive::evicted_reply(v) {
                    gone.extend(ids);
                    again.push(e);
                }
            }
            gone.sort();
            gone.dedup();
            self.restore(&gone, now).await?;
            left = again;
        }
        Err(StoreError::Unavailable(
            "count stage: its articles were evicted again and again".into(),
        ))
    }

    /// One run of [`count_stages`](Self::count_stages): the stages'
    /// replies, in order.
    async fn count_stages_once(
        &self,
        batch: &str,
        entries: &[&(u32, Vec<u8>)],
        declared: Option<&[String]>,
    ) -> Result<Vec<Value>, StoreError> {
        let k = &self.keys;
        let calls: Vec<Vec<String>> = entries
            .iter()
            .map(|(s, _)| {
                let sk = k.shard(*s);
                let slot = key_slot(sk.changes().as_bytes());
                let tomb = k.ledgers("archive:evicted").swap_remove(*s as usize);
                let mut keys = vec![format!("{}gate:done:{batch}", sk.prefix), tomb.clone()];
                keys.extend(
                    declared
                        .unwrap_or_default()
                        .iter()
                        .filter(|n| key_slot(n.as_bytes()) == slot && **n != tomb)
                        .cloned(),
                );
                keys
            })
            .collect();
        let got: Vec<Value> = self
            .eval_pipe(|p| {
                for ((s, entry), keys) in entries.iter().map(|e| (&e.0, &e.1)).zip(&calls) {
                    let c = p
                        .cmd("EVALSHA")
                        .arg(self.scripts.count_stage.get_hash())
                        .arg(keys.len());
                    for n in keys {
                        c.arg(n.as_str());
                    }
                    c.arg(k.prefix.as_str()).arg(batch).arg(*s).arg(&entry[..]);
                    self.wait_after(p);
                }
            })
            .await?;
        self.replicated(got, entries.len())
    }

    /// With `wait_replicas`, a `WAIT` after the call just queued: without
    /// keys, it goes with that call to its slot's node (slots.rs), so the
    /// stage is on that many of the node's replicas before the batch is
    /// acknowledged.
    fn wait_after(&self, p: &mut redis::Pipeline) {
        if self.opts.wait_replicas > 0 {
            p.cmd("WAIT")
                .arg(self.opts.wait_replicas)
                .arg(self.opts.response_timeout_ms / 2);
        }
    }

    /// The replies of `calls` calls, each followed by its `WAIT` when
    /// [`wait_after`](Self::wait_after) queued one: the calls' replies, or
    /// 503 when a stage is on fewer replicas than `wait_replicas` (it may
    /// have been applied: a retry is safe, by batch id and markers).
    fn replicated(&self, got: Vec<Value>, calls: usize) -> Result<Vec<Value>, StoreError> {
        if self.opts.wait_replicas == 0 {
            return Ok(got);
        }
        if got.len() != 2 * calls {
            return Err(bad_reply("WAIT"));
        }
        let mut out = Vec::with_capacity(calls);
        for pair in got.chunks(2) {
            let acked = v_i64(&pair[1]).unwrap_or(0);
            if acked < i64::from(self.opts.wait_replicas) {
                return Err(StoreError::Unavailable(format!(
                    "redis: {acked} of {} replicas confirmed an ingest stage",
                    self.opts.wait_replicas
                )));
            }
            out.push(pair[0].clone());
        }
        Ok(out)
    }

    /// The count stages of `batch` for `shards` ran: their outbox entries
    /// go (site slot).
    async fn outbox_done(
        &self,
        batch: &str,
        shards: impl Iterator<Item = u32>,
    ) -> Result<(), StoreError> {
        let k = &self.keys;
        let mut pipe = redis::pipe();
        let mut any = false;
        for s in shards {
            pipe.cmd("ZREM").arg(k.outbox()).arg(format!("{s}:{batch}"));
            pipe.del(k.outbox_entry(s, batch));
            any = true;
        }
        if any {
            let _: () = self.query_pipe(&pipe).await.map_err(store_err)?;
        }
        Ok(())
    }

    /// Applies the outbox entries older than [`SWEEP_AFTER_SECS`] at
    /// `now`: batches whose gate stage ran and whose node did not finish
    /// (it died, or a test stopped it). Each is counted once: a count
    /// stage that ran before is skipped by its marker. Returns how many
    /// entries it applied or found applied.
    pub async fn sweep_outbox(&self, now: Timestamp) -> Result<usize, StoreError> {
        if !self.keys.spans_slots() {
            return Ok(0);
        }
        let k = &self.keys;
        let mut con = self.con();
        let due: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(k.outbox())
            .arg("-inf")
            .arg(now - SWEEP_AFTER_SECS)
            .arg("LIMIT")
            .arg(0)
            .arg(500)
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        let mut swept = 0;
        for member in due {
            let Some((s, batch)) = member.split_once(':') else {
                continue;
            };
            let Ok(s) = s.parse::<u32>() else { continue };
            let entry: Option<Vec<u8>> = redis::cmd("GET")
                .arg(k.outbox_entry(s, batch))
                .query_async(&mut con)
                .await
                .map_err(store_err)?;
            if let Some(entry) = entry {
                self.count_stages(batch, &[(s, entry)], None, now).await?;
            }
            self.outbox_done(batch, std::iter::once(s)).await?;
            swept += 1;
        }
        Ok(swept)
    }
}
