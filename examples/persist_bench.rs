//! Persistence figures of the embedded store (issue 12): how long ingest
//! waits while a snapshot is taken, and how long a restart takes.
//!
//! ```text
//! cargo run --release --example persist_bench -- [events] [articles] [dir]
//! ```
//!
//! Defaults: 10,000,000 events over 100,000 articles (Zipf 1.0, every
//! event a new visitor, so every event is counted and leaves a dedupe
//! entry: the shape of `bench/run.sh` scenario 7), a temp dir. Limits are
//! off, fsync is `interval` (the figures are about the state lock and the
//! load path, not the disk). It runs, in one data directory:
//!
//! 1. fill: ingest every event in batches of 1000 (no snapshot);
//! 2. restart from the log alone: open, time it, then the first
//!    `/api/hot` query (gravity, 72 h, top 20);
//! 3. snapshot pause: one task ingests batches of 100 events in a loop
//!    while a snapshot is taken, first the old way (encoded under the state
//!    lock, `snapshot_in_place`), then the new one (`snapshot`, rebuilt
//!    from the previous snapshot and the log off the lock); prints each
//!    snapshot's duration and the slowest ingest call during it (and, for
//!    comparison, without a snapshot);
//! 4. restart from that snapshot (plus the log after it): the same timings;
//! 5. a clean stop (which snapshots everything), and a restart from that.
//!
//! `persist_bench open DIR` only opens an existing data directory (for
//! profiling the load path); `persist_bench stop DIR` opens it and stops
//! cleanly, so that its snapshot is rewritten in this build's format.
//!
//! `persist_bench snap DIR [rounds] [articles] [events]` (defaults 3,
//! 100,000, 10,000,000) fills DIR (if it holds no log yet), then takes
//! `rounds` snapshots off the lock while one task ingests batches of 100
//! without pause, and prints per round the worst ingest call and, per
//! snapshot phase ([`SnapshotPhase`]: a call counts for every phase it saw
//! at its start or end), the calls, p99 and max.
//!
//! `PB_DRY=1`: no fsync anywhere (fsync `never`, snapshot syncs skipped),
//! for quick checks of the CPU side; figures for the goal are taken
//! without it. `PB_SLOW=1` prints every ingest call over 20 ms.

use hotrank::store::Lifecycle;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hotrank::model::{ArticleId, Event, HotQuery, RangeSpec};
use hotrank::score::ModelKind;
use hotrank::store::embedded::{Durability, EmbeddedStore, SnapshotPhase};
use hotrank::store::storage::{DirLock, Disk, ReadFile, Storage, StorageFile};
use hotrank::store::wal::FsyncPolicy;
use hotrank::store::{Store, StoreSettings};

const NOW: i64 = 1_800_000_000;

/// Deterministic xorshift: the same stream on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

struct Stream {
    rng: Rng,
    /// Cumulative Zipf(1.0) weights over the articles.
    cdf: Vec<f64>,
    n: u64,
}

impl Stream {
    fn new(articles: usize) -> Self {
        let mut acc = 0.0;
        let cdf = (1..=articles)
            .map(|r| {
                acc += 1.0 / r as f64;
                acc
            })
            .collect::<Vec<_>>();
        Stream {
            rng: Rng(0x9e37_79b9_7f4a_7c15),
            cdf,
            n: 0,
        }
    }

    fn event(&mut self) -> Event {
        self.n += 1;
        let total = *self.cdf.last().unwrap();
        let u = (self.rng.next() >> 11) as f64 / (1u64 << 53) as f64 * total;
        let article = self.cdf.partition_point(|&c| c < u) as u64;
        // Ten events a second, in time order, ending at NOW.
        let ts = NOW - (48 * 3600 - (self.n as i64 / 10) % (48 * 3600));
        let visitor = u128::from(self.rng.next()) << 64 | u128::from(self.n);
        Event {
            ip: self.rng.next(),
            trusted: true,
            ..Event::view(ArticleId::from_number(article + 1), visitor, ts)
        }
    }

    fn batch(&mut self, n: usize) -> Vec<Event> {
        (0..n).map(|_| self.event()).collect()
    }
}

fn settings() -> StoreSettings {
    StoreSettings {
        visitor_limit_per_minute: 0,
        ip_limit_per_minute: 0,
        ..StoreSettings::default()
    }
}

fn dry() -> bool {
    std::env::var_os("PB_DRY").is_some()
}

fn durability(dir: &std::path::Path) -> Durability {
    Durability {
        dir: dir.to_path_buf(),
        fsync: if dry() {
            FsyncPolicy::Never
        } else {
            FsyncPolicy::Interval(Duration::from_millis(10))
        },
        segment_bytes: 64 << 20,
        snapshot_interval_secs: 1 << 30,
        snapshot_every_records: u64::MAX,
        storage: if dry() {
            Arc::new(NoSync)
        } else {
            Arc::new(Disk)
        },
    }
}

/// The real disk with every sync skipped (`PB_DRY`).
#[derive(Debug)]
struct NoSync;

struct NoSyncFile(Box<dyn StorageFile>);

impl std::io::Write for NoSyncFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl StorageFile for NoSyncFile {
    fn sync_data(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn try_clone(&self) -> std::io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(NoSyncFile(self.0.try_clone()?)))
    }
}

impl Storage for NoSync {
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        Disk.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        Disk.list(dir)
    }
    fn len(&self, path: &Path) -> std::io::Result<u64> {
        Disk.len(path)
    }
    fn open_read(&self, path: &Path) -> std::io::Result<Box<dyn ReadFile>> {
        Disk.open_read(path)
    }
    fn create(&self, path: &Path) -> std::io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(NoSyncFile(Disk.create(path)?)))
    }
    fn open_append(&self, path: &Path) -> std::io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(NoSyncFile(Disk.open_append(path)?)))
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        Disk.rename(from, to)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        Disk.remove(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> std::io::Result<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)?
            .set_len(len)
    }
    fn sync_dir(&self, _dir: &Path) -> std::io::Result<()> {
        Ok(())
    }
    fn lock(&self, path: &Path) -> std::io::Result<DirLock> {
        Disk.lock(path)
    }
}

async fn restart(dir: &std::path::Path, label: &str) -> EmbeddedStore {
    let t = Instant::now();
    let (store, report) = EmbeddedStore::open(durability(dir), settings()).expect("open");
    let opened = t.elapsed();
    // As `hotrank serve` does before it listens.
    store.warm(NOW);
    while store.ready().await.is_err() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let ready = t.elapsed();
    let q = HotQuery::top(ModelKind::Gravity, RangeSpec::Hours(72), 20);
    let t1 = Instant::now();
    let page = store.hot(&q, NOW).await.expect("hot");
    let first = t1.elapsed();
    let t2 = Instant::now();
    store.hot(&q, NOW).await.expect("hot");
    let second = t2.elapsed();
    println!(
        "restart {label}: open {:.2} s, ready {:.2} s (snapshot seq {:?}, {} records replayed, {} articles); first /api/hot {:.3} ms ({} items), second {:.3} ms",
        opened.as_secs_f64(),
        ready.as_secs_f64(),
        report.snapshot_seq,
        report.replayed_records,
        report.articles,
        first.as_secs_f64() * 1e3,
        page.items.len(),
        second.as_secs_f64() * 1e3,
    );
    store
}

/// One ingest call: its latency and the snapshot phases at its start and end.
#[derive(Clone, Copy)]
struct Call {
    took: Duration,
    phases: [SnapshotPhase; 2],
}

/// Ingests batches of 100 until `stop`; returns every call.
async fn ingest_loop(
    store: Arc<EmbeddedStore>,
    stream: &mut Stream,
    stop: Arc<AtomicBool>,
) -> Vec<Call> {
    let mut calls = Vec::new();
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let batch = stream.batch(100);
        let first = store.snapshot_phase();
        let t = Instant::now();
        store.ingest(batch, NOW).await.expect("ingest");
        let took = t.elapsed();
        let last = store.snapshot_phase();
        calls.push(Call {
            took,
            phases: [first, last],
        });
        if std::env::var_os("PB_SLOW").is_some() && took > Duration::from_millis(20) {
            eprintln!(
                "  slow ingest call at +{:.3} s: {:.1} ms ({first:?} .. {last:?})",
                (t - start).as_secs_f64(),
                took.as_secs_f64() * 1e3
            );
        }
    }
    calls
}

fn latencies(calls: &[Call]) -> Vec<Duration> {
    calls.iter().map(|c| c.took).collect()
}

/// Per snapshot phase seen: calls, p99 and max of the calls that saw it.
fn by_phase(calls: &[Call]) -> String {
    let mut phases: Vec<SnapshotPhase> = calls.iter().flat_map(|c| c.phases).collect();
    phases.sort_unstable();
    phases.dedup();
    let mut out = Vec::new();
    for p in phases {
        let mut lat: Vec<Duration> = (calls.iter())
            .filter(|c| c.phases.contains(&p))
            .map(|c| c.took)
            .collect();
        lat.sort_unstable();
        let q = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
        out.push(format!(
            "{p:?} {} calls p99 {:.2} max {:.2} ms",
            lat.len(),
            q(0.99),
            q(1.0)
        ));
    }
    out.join("; ")
}

fn summary(lat: &mut [Duration]) -> String {
    lat.sort_unstable();
    let p = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    format!(
        "{} calls, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        lat.len(),
        p(0.5),
        p(0.99),
        p(1.0)
    )
}

/// Ingests `events` in batches of 1000 into a store on `dir`, dropped
/// without a snapshot (the next open reads the log alone).
async fn fill(dir: &Path, stream: &mut Stream, events: u64) {
    let t = Instant::now();
    let (store, _) = EmbeddedStore::open(durability(dir), settings()).expect("open");
    let mut left = events;
    while left > 0 {
        let n = left.min(1000);
        store
            .ingest(stream.batch(n as usize), NOW)
            .await
            .expect("ingest");
        left -= n;
    }
    drop(store);
    println!(
        "fill: {events} events in {:.1} s",
        t.elapsed().as_secs_f64()
    );
}

/// `snap`: snapshot rounds under steady ingest; see the module docs.
async fn snap_rounds(dir: &Path, rounds: u64, articles: usize, events: u64) {
    println!(
        "# persist_bench snap: {rounds} rounds, {events} events over {articles} articles in {}{}",
        dir.display(),
        if dry() { " (PB_DRY: no fsync)" } else { "" }
    );
    if !dir.join("wal").exists() {
        fill(dir, &mut Stream::new(articles), events).await;
    }
    let store = Arc::new(restart(dir, "before the rounds").await);
    for round in 1..=rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let job = {
            let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
            let mut s = Stream::new(articles);
            s.n = events * (round + 1);
            tokio::spawn(async move { ingest_loop(store, &mut s, stop).await })
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        let t = Instant::now();
        store.snapshot().await.expect("snapshot");
        let took = t.elapsed();
        tokio::time::sleep(Duration::from_millis(200)).await;
        stop.store(true, Ordering::Relaxed);
        let calls = job.await.unwrap();
        let worst = calls.iter().map(|c| c.took).max().unwrap_or_default();
        println!(
            "round {round}: snapshot {:.2} s; ingest {}; worst stall {:.2} ms\n  by phase: {}",
            took.as_secs_f64(),
            summary(&mut latencies(&calls)),
            worst.as_secs_f64() * 1e3,
            by_phase(&calls)
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // Warnings (a snapshot skipped, a fallback) on stderr; RUST_LOG=info for more.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("open") {
        // Profiling aid: only open an existing data directory.
        let dir = std::path::PathBuf::from(args.nth(1).expect("open DIR"));
        restart(&dir, "of an existing directory").await;
        return;
    }
    if args.peek().map(String::as_str) == Some("stop") {
        let dir = std::path::PathBuf::from(args.nth(1).expect("stop DIR"));
        let store = restart(&dir, "of an existing directory").await;
        // One new record, so that the stop has something to snapshot.
        let mut s = Stream::new(10);
        s.n = u64::MAX / 2;
        store.ingest(s.batch(1), NOW).await.expect("ingest");
        let t = Instant::now();
        store.shutdown().await.expect("shutdown");
        println!("clean stop: {:.2} s", t.elapsed().as_secs_f64());
        return;
    }
    if args.peek().map(String::as_str) == Some("snap") {
        let dir = std::path::PathBuf::from(args.nth(1).expect("snap DIR"));
        let rounds: u64 = args.next().map_or(3, |s| s.parse().unwrap());
        let articles: usize = args.next().map_or(100_000, |s| s.parse().unwrap());
        let events: u64 = args.next().map_or(10_000_000, |s| s.parse().unwrap());
        snap_rounds(&dir, rounds, articles, events).await;
        return;
    }
    let events: u64 = args.next().map_or(10_000_000, |s| s.parse().unwrap());
    let articles: usize = args.next().map_or(100_000, |s| s.parse().unwrap());
    let tmp;
    let dir = match args.next() {
        Some(d) => std::path::PathBuf::from(d),
        None => {
            tmp = tempfile::tempdir().unwrap();
            tmp.path().to_path_buf()
        }
    };
    let mut stream = Stream::new(articles);
    println!(
        "# persist_bench: {events} events over {articles} articles in {}",
        dir.display()
    );

    fill(&dir, &mut stream, events).await;

    let store = Arc::new(restart(&dir, "from the log alone").await);

    // Ingest alone, for comparison.
    let stop = Arc::new(AtomicBool::new(false));
    let job = {
        let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
        let mut s = Stream::new(articles);
        s.n = events * 2;
        tokio::spawn(async move { ingest_loop(store, &mut s, stop).await })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let base = job.await.unwrap();
    println!(
        "ingest without a snapshot (3 s): {}",
        summary(&mut latencies(&base))
    );

    for (round, in_place) in [(3, true), (4, false)] {
        let stop = Arc::new(AtomicBool::new(false));
        let job = {
            let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
            let mut s = Stream::new(articles);
            s.n = events * round;
            tokio::spawn(async move { ingest_loop(store, &mut s, stop).await })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        let t = Instant::now();
        if in_place {
            store.snapshot_in_place().await.expect("snapshot");
        } else {
            store.snapshot().await.expect("snapshot");
        }
        let took = t.elapsed();
        stop.store(true, Ordering::Relaxed);
        let during = job.await.unwrap();
        println!(
            "snapshot {}: {:.2} s; ingest meanwhile: {}\n  by phase: {}",
            if in_place {
                "under the lock (before)"
            } else {
                "rebuilt from disk (after)"
            },
            took.as_secs_f64(),
            summary(&mut latencies(&during)),
            by_phase(&during)
        );
    }
    drop(store);

    let store = restart(&dir, "from the snapshot").await;
    store.shutdown().await.expect("shutdown");
    drop(store);
    // A clean stop wrote a snapshot of everything: nothing to replay.
    restart(&dir, "after a clean stop").await;
}
