//! The workers: a filter worker (group `filter`) gates batches of raw
//! entries and writes each with its verdict to the flagged stream of its
//! partition; a count worker (group `count`) applies flagged entries. Each
//! step claims what a dead worker left, reads, processes (one script call
//! that acknowledges its entries with their effects), and trims.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::Value;

use super::ingest::IngestPipeline;
use super::stream::{COUNT_GROUP, Entry, FILTER_GROUP, Role, group_field, pairs, parse_entries};
use crate::clock::{Clock, SystemClock};
use crate::store::StoreError;
use crate::store::redis::{bad_reply, evicted_reply, store_err, v_i64, v_str};

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

/// Fields of a raw entry (pipe_append.lua) and of a flagged one
/// (pipe_flag.lua).
const RAW_FIELDS: usize = 13;
const FLAGGED_FIELDS: usize = 11;

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

impl IngestPipeline {
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
            .map(|(id, mut f)| {
                // A flagged entry of an older build has no crawler family;
                // one whose network block is unknown (or of an older
                // build) has no block.
                if role == Role::Count && f.len() == FLAGGED_FIELDS - 2 {
                    f.push(b"0".to_vec());
                }
                if role == Role::Count && f.len() == FLAGGED_FIELDS - 1 {
                    f.push(Vec::new());
                }
                (id, f)
            })
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
        // On a cluster the gate's slots are named on the gate clock as last
        // learnt against this node's clock: a filter call that named
        // others answers `gateclock` having written nothing, and is sent
        // again with the clock it learnt.
        let invocation = |now: crate::model::Timestamp| {
            let mut inv = match role {
                Role::Filter => {
                    let mut inv = self.scripts.filter.prepare_invoke();
                    self.declare(&mut inv, || self.filter_keys(n, &entries, now));
                    self.gate_header(&mut inv);
                    inv.arg(self.raw_key(n))
                        .arg(self.flagged_key(n))
                        .arg(FILTER_GROUP)
                        .arg(entries.len());
                    inv
                }
                Role::Count => {
                    let mut inv = self.scripts.count.prepare_invoke();
                    self.declare(&mut inv, || self.count_keys(n, &entries, now));
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
            inv
        };
        let mut con = self.store.con();
        let mut now = SystemClock.now();
        let mut r: redis::Value = invocation(now)
            .invoke_async(&mut con)
            .await
            .map_err(store_err)?;
        // A call that named the gate slots of another clock, or met an
        // evicted article, applied and acknowledged nothing: learn the
        // clock, or restore the article from the archive, and send it
        // again.
        for _ in 0..4 {
            if self.store.learnt_gate_clock(&r, now) {
                now = SystemClock.now();
            } else if let Some(gone) = evicted_reply(&r) {
                self.store.restore(&gone, entries_now(&entries)).await?;
            } else {
                break;
            }
            r = invocation(now)
                .invoke_async(&mut con)
                .await
                .map_err(store_err)?;
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
            let mut inv = self.scripts.trim.prepare_invoke();
            let waiters = match role {
                Role::Filter => String::new(),
                Role::Count => self.waiters_key(n),
            };
            self.declare(&mut inv, || {
                let mut keys = vec![self.stream(role, n)];
                keys.extend(Some(waiters.clone()).filter(|w| !w.is_empty()));
                keys
            });
            let dropped: i64 = inv
                .arg(self.stream(role, n))
                .arg(role.as_str())
                .arg(&waiters)
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
