//! Direct ingest: events gated and counted by `ingest.lua` calls in one
//! pipeline, the keys each call declares, the gate clock the calls follow,
//! and the outcomes their replies carry.

use std::time::Duration;

use redis::{Script, Value};

use super::{
    RedisStore, archive, bad_reply, chunks, day_of, kind_char, store_err, v_i64, v_str, verdict_of,
};
use crate::model::{ArticleId, Event, EventType, Outcome, Timestamp, hour_of};
use crate::store::{IngestReject, StoreError};

impl RedisStore {
    /// `Store::ingest` on this store: gates and counts `events` in
    /// script calls of at most `batch_events` events, sent in one pipeline
    /// (over a split site: split.rs).
    pub(crate) async fn ingest_events(
        &self,
        mut events: Vec<Event>,
        now: Timestamp,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        events.iter_mut().for_each(Event::clamp_to_arrival);
        let with_counts = events.len() == 1;
        let header = self.ingest_header(now, with_counts);
        let sha = self.scripts.ingest.get_hash();
        let chunk = self.opts.batch_events.max(1);
        // One id per script call: a call retried after a lost reply returns
        // the first call's verdicts and applies nothing again.
        let ids: Vec<String> = events
            .chunks(chunk)
            .map(|_| format!("{:032x}", rand::random::<u128>()))
            .collect();
        let parts: Vec<&[Event]> = events.chunks(chunk).collect();
        // Only while Redis holds the site's epoch (marker.rs): over one
        // slot ingest_epoch.lua checks it in the same call.
        let (epoch_key, epoch) = self.script_epoch().await?;
        // Over a split site: a gate stage, then a count stage per shard
        // (split.rs).
        if self.keys.spans_slots() {
            let mut replies = Vec::with_capacity(parts.len());
            for (part, batch) in parts.iter().zip(&ids) {
                replies.push(
                    self.ingest_over_slots(&header, batch, part, now, with_counts)
                        .await?,
                );
            }
            return self.outcomes(replies, events.len());
        }
        // On a cluster each call declares every key it may touch (one slot:
        // the site's tag); on one Redis it declares none, which saves
        // sending ~8 names per event.
        // (Named at each send: a call sent again after a `gateclock`
        // answer declares the gate slots of the clock it learnt.)
        let declare = self.opts.cluster || self.opts.cluster_names;
        let call = |p: &mut redis::Pipeline, i: usize| {
            let keys = if declare {
                self.ingest_keys(parts[i], &ids[i], now)
            } else {
                Vec::new()
            };
            let c = p.cmd("EVALSHA").arg(sha).arg(keys.len());
            for k in &keys {
                c.arg(k.as_str());
            }
            c.arg(epoch_key.as_str()).arg(epoch.as_str());
            for h in &header {
                c.arg(h.as_str());
            }
            c.arg(ids[i].as_str()).arg(parts[i].len());
            for ev in parts[i] {
                event_args!(c, ev);
            }
        };
        let build = |p: &mut redis::Pipeline| {
            for i in 0..parts.len() {
                call(p, i);
            }
            self.queue_wait(p);
        };
        let mut replies: Vec<Value> = self.eval_pipe_retried(&build).await?;
        self.replicas_confirmed(&mut replies)?;
        self.send_again(&mut replies, &call, now).await?;
        self.outcomes(replies, events.len())
    }

    /// The arguments every ingest.lua call of one request carries after
    /// its epoch: the prefix, `now` and the gate's settings.
    fn ingest_header(&self, now: Timestamp, with_counts: bool) -> Vec<String> {
        let s = &self.settings;
        let (hkeep, dkeep) = self.keeps();
        vec![
            self.keys.prefix.clone(),
            now.to_string(),
            s.dedupe_window_secs.to_string(),
            s.visitor_limit_per_minute.to_string(),
            s.ip_limit_per_minute.to_string(),
            s.event_id_ttl_secs.to_string(),
            hkeep.to_string(),
            dkeep.to_string(),
            if with_counts { "1" } else { "0" }.into(),
            if s.require_known_articles { "1" } else { "0" }.into(),
            s.max_articles.to_string(),
            s.bot_articles_per_minute.to_string(),
            (u64::from(s.bot_quarantine_secs) * 1000).to_string(),
        ]
    }

    /// Queues `WAIT` for `wait_replicas` replicas: in the same pipeline,
    /// so on the same node, the batch is on that many replicas before it
    /// is acknowledged.
    fn queue_wait(&self, p: &mut redis::Pipeline) {
        if self.opts.wait_replicas > 0 {
            p.cmd("WAIT")
                .arg(self.opts.wait_replicas)
                .arg(self.opts.response_timeout_ms / 2);
        }
    }

    /// Takes `WAIT`'s reply off `replies`: an error unless every replica
    /// asked for confirmed the batch.
    fn replicas_confirmed(&self, replies: &mut Vec<Value>) -> Result<(), StoreError> {
        if self.opts.wait_replicas > 0 {
            let acked = replies.pop().as_ref().and_then(v_i64).unwrap_or(0);
            if acked < i64::from(self.opts.wait_replicas) {
                // Applied on the primary, maybe not on a replica: not
                // acknowledged. A retry is safe (eventIds, batch ids).
                return Err(StoreError::Unavailable(format!(
                    "redis: {acked} of {} replicas confirmed the batch",
                    self.opts.wait_replicas
                )));
            }
        }
        Ok(())
    }

    /// Calls that found an evicted article, or declared the gate slots
    /// of a clock other than the gate's, wrote nothing: restore those
    /// articles from the archive, learn the gate clock, and send the
    /// same calls again (`call` queues call `i`; a concurrent eviction can
    /// only race a few times). Their new replies replace theirs in
    /// `replies`.
    async fn send_again(
        &self,
        replies: &mut [Value],
        call: &(impl Fn(&mut redis::Pipeline, usize) + Sync),
        now: Timestamp,
    ) -> Result<(), StoreError> {
        for _ in 0..4 {
            let again: Vec<usize> = (0..replies.len())
                .filter(|&i| {
                    archive::evicted_reply(&replies[i]).is_some()
                        || self.learnt_gate_clock(&replies[i], now)
                })
                .collect();
            if again.is_empty() {
                break;
            }
            let mut gone: Vec<ArticleId> = again
                .iter()
                .flat_map(|&i| archive::evicted_reply(&replies[i]).unwrap_or_default())
                .collect();
            gone.sort();
            gone.dedup();
            if !gone.is_empty() {
                self.restore(&gone, now).await?;
            }
            let mut more: Vec<Value> = self
                .eval_pipe(|p| {
                    for &i in &again {
                        call(p, i);
                    }
                    self.queue_wait(p);
                })
                .await?;
            self.replicas_confirmed(&mut more)?;
            for (i, v) in again.into_iter().zip(more) {
                replies[i] = v;
            }
        }
        Ok(())
    }

    /// The site's gate clock now (ms; gate_clock.lua), read without moving
    /// it: the slots an import writes gate entries into. `None` when the
    /// gate follows the nodes' clocks.
    pub(crate) async fn gate_clock_ms(&self) -> Result<Option<i64>, StoreError> {
        static READ: std::sync::OnceLock<Script> = std::sync::OnceLock::new();
        let read = READ.get_or_init(|| {
            chunks(&[
                include_str!("gate_clock.lua"),
                "local c = gate_clock(ARGV[1])\nreturn c and c.at or false\n",
            ])
        });
        let mut con = self.con();
        (read.key(self.keys.gate_time()))
            .arg(&self.keys.prefix)
            .invoke_async(&mut con)
            .await
            .map_err(store_err)
    }

    /// Makes the site's gate follow its nodes' clocks, as it did before
    /// the gate clock: arrival is the node's, as sent. For tests that
    /// simulate time with a manual clock (the same suites run on both
    /// stores); never in a deployment, where nodes' clocks disagree and
    /// step back (docs/redis-keys.md, "Gate state").
    pub async fn gate_on_node_clocks(&self) -> Result<(), StoreError> {
        let mut con = self.con();
        redis::cmd("HSET")
            .arg(self.keys.gate_time())
            .arg("source")
            .arg("node")
            .query_async::<()>(&mut con)
            .await
            .map_err(store_err)
    }

    /// Whether `reply` is a gate call's `{ 'gateclock', <ms> }` (gate.lua:
    /// it declared the slots of a clock other than the site's gate clock,
    /// and wrote nothing); if so, the gate clock's offset from `now`, this
    /// node's clock, is learnt for the next calls.
    pub(crate) fn learnt_gate_clock(&self, reply: &Value, now: Timestamp) -> bool {
        let Value::Array(items) = reply else {
            return false;
        };
        if items.first().and_then(v_str) != Some("gateclock") {
            return false;
        }
        let Some(at) = items.get(1).and_then(v_i64) else {
            return false;
        };
        (self.gate_offset_ms).store(
            at.saturating_sub(now.saturating_mul(1000)),
            std::sync::atomic::Ordering::Relaxed,
        );
        true
    }

    /// Every key one ingest.lua call over `part` may touch (a superset:
    /// the script's `K()` refuses any other).
    pub(crate) fn ingest_keys(
        &self,
        part: &[Event],
        batch_id: &str,
        now: Timestamp,
    ) -> Vec<String> {
        let k = &self.keys;
        let s = &self.settings;
        let mut keys = std::collections::BTreeSet::new();
        let families = [
            ("gate:eid", i64::from(s.event_id_ttl_secs).max(1)),
            ("gate:rl:v", 120),
            ("gate:rl:ip", 120),
            ("gate:bot", i64::from(s.bot_quarantine_secs).max(60)),
        ];
        // The gate reads the gate clock's slot and the one before: those
        // of the clock as last learnt, give or take a slot for the time
        // since (a call that finds its slots missing answers `gateclock`).
        let gate_now = (now.saturating_mul(1000))
            .saturating_add(
                self.gate_offset_ms
                    .load(std::sync::atomic::Ordering::Relaxed),
            )
            .div_euclid(1000);
        for (name, secs) in families {
            let slot = gate_now.div_euclid(secs);
            for s in slot - 2..=slot + 1 {
                keys.insert(k.gate_slot(name, s));
            }
        }
        for name in [
            k.batch(batch_id),
            k.clock(),
            k.gate_time(),
            k.counted(),
            k.quarantine(),
            k.epoch(),
        ] {
            keys.insert(name);
        }
        for name in ["stats:articles", "archive:dirty", "archive:evicted"] {
            keys.extend(k.ledgers(name));
        }
        for ev in part {
            let a = &ev.article;
            let (hour, day) = (hour_of(ev.ts), day_of(ev.ts));
            if matches!(
                ev.kind,
                EventType::View | EventType::Like | EventType::Favorite | EventType::Share
            ) {
                let kind = kind_char(ev.kind).chars().next().unwrap_or('v');
                keys.insert(k.dedupe(a, kind, ev.visitor));
            }
            if ev.kind == EventType::View && ev.net != 0 {
                keys.insert(k.net_h(a, hour));
                keys.insert(k.netuv_h(a, hour));
            }
            let sk = k.of(a);
            for name in [
                k.meta(a),
                k.views(a),
                k.uv(a),
                k.counters(a),
                k.bucket_h(a, hour),
                k.uv_h(a, hour),
                k.bucket_d(a, day),
                k.uv_d(a, day),
                sk.active_h(hour),
                sk.active_d(day),
                sk.newest(),
                sk.changes_seq(),
                sk.changes(),
                k.quarantine_h(hour),
                k.quarantine_articles_h(hour),
                k.crawlers_h(hour),
                k.visitors_h(hour),
                k.views_m(ev.ts.div_euclid(60)),
            ] {
                keys.insert(name);
            }
        }
        keys.into_iter().collect()
    }

    /// The outcomes of `n` events from ingest replies (verdict, PV, UV per
    /// event), with the gate's metrics.
    #[allow(clippy::type_complexity)]
    pub(crate) fn outcomes(
        &self,
        replies: Vec<Value>,
        n: usize,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError> {
        let mut out = Vec::with_capacity(n);
        let (mut refused, mut behaviour) = (0u64, [0u64; 2]);
        for r in replies {
            let r: Vec<i64> = redis::from_redis_value(r).map_err(|_| bad_reply("ingest"))?;
            for t in r.chunks(3) {
                let [code, pv, uv] = t else {
                    return Err(bad_reply("ingest"));
                };
                out.push(match verdict_of(*code) {
                    Some(verdict) => {
                        if *code >= 7 {
                            behaviour[0] += 1;
                            behaviour[1] += u64::from(*code == 8);
                        }
                        Ok(Outcome {
                            verdict,
                            pv: (*pv).max(0) as u64,
                            uv: (*uv).max(0) as u64,
                        })
                    }
                    None if *code == 5 => Err(IngestReject::UnknownArticle),
                    None if *code == 6 => {
                        refused += 1;
                        Err(IngestReject::TooManyArticles)
                    }
                    None => return Err(bad_reply("ingest")),
                });
            }
        }
        if out.len() != n {
            return Err(bad_reply("ingest"));
        }
        crate::store::gate_metrics::record(refused, behaviour[0], behaviour[1]);
        Ok(out)
    }
}

/// Waits before each new try of a batch whose connection broke: about
/// 0.7 s in all, long enough for a node to learn a promoted replica after
/// a failover (the client refreshes its slot map on the first error),
/// short enough that a Redis that is down answers 503 soon.
const RETRY_WAITS_MS: [u64; 3] = [100, 200, 400];

impl RedisStore {
    /// [`eval_pipe`](Self::eval_pipe) of an ingest batch, sent again after
    /// each of [`RETRY_WAITS_MS`] while the connection is broken: some
    /// calls may have run, and their ids make a retry safe (it answers
    /// what ran and runs the rest). The first error is the one reported.
    async fn eval_pipe_retried(
        &self,
        build: &impl Fn(&mut redis::Pipeline),
    ) -> Result<Vec<Value>, StoreError> {
        let first = match self.eval_pipe(build).await {
            Err(StoreError::Unavailable(first)) => first,
            r => return r,
        };
        for wait in RETRY_WAITS_MS {
            tokio::time::sleep(Duration::from_millis(wait)).await;
            match self.eval_pipe(build).await {
                Err(StoreError::Unavailable(_)) => {}
                r => return r,
            }
        }
        Err(StoreError::Unavailable(first))
    }
}
