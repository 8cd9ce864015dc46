//! Queued events answered with their verdicts
//! ([`IngestPipeline::ingest_and_wait`]): the path of callers that need
//! verdicts now (the CLI tools, and the suites that run unchanged on the
//! pipeline).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::Value;

use super::ingest::IngestPipeline;
use super::stream::{COUNT_GROUP, Role, group_field, parse_entries, stream_id};
use crate::model::{Event, Outcome, Timestamp, Verdict};
use crate::store::redis::{bad_reply, store_err, v_str, verdict_of};
use crate::store::{IngestReject, StoreError};

impl IngestPipeline {
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
