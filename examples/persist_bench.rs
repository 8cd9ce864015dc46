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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hotrank::model::{ArticleId, Event, EventType, HotQuery, RangeSpec};
use hotrank::score::ModelKind;
use hotrank::store::embedded::{Durability, EmbeddedStore};
use hotrank::store::storage::Disk;
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
        Event {
            kind: EventType::View,
            article: ArticleId::from_number(article + 1),
            visitor: u128::from(self.rng.next()) << 64 | u128::from(self.n),
            ip: self.rng.next(),
            ts,
            arrival_ms: ts * 1000,
            event_id: None,
            seconds: 0,
            bot: false,
            trusted: true,
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

fn durability(dir: &std::path::Path) -> Durability {
    Durability {
        dir: dir.to_path_buf(),
        fsync: FsyncPolicy::Interval(Duration::from_millis(10)),
        segment_bytes: 64 << 20,
        snapshot_interval_secs: 1 << 30,
        snapshot_every_records: u64::MAX,
        storage: Arc::new(Disk),
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

/// Ingests batches of 100 until `stop`; returns every call's latency.
async fn ingest_loop(
    store: Arc<EmbeddedStore>,
    stream: &mut Stream,
    stop: Arc<AtomicBool>,
) -> Vec<Duration> {
    let mut lat = Vec::new();
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let batch = stream.batch(100);
        let t = Instant::now();
        store.ingest(batch, NOW).await.expect("ingest");
        lat.push(t.elapsed());
        if std::env::var_os("PB_SLOW").is_some() && t.elapsed() > Duration::from_millis(20) {
            eprintln!(
                "  slow ingest call at +{:.3} s: {:.1} ms",
                (t - start).as_secs_f64(),
                t.elapsed().as_secs_f64() * 1e3
            );
        }
    }
    lat
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

    let t = Instant::now();
    {
        let (store, _) = EmbeddedStore::open(durability(&dir), settings()).expect("open");
        let mut left = events;
        while left > 0 {
            let n = left.min(1000);
            store
                .ingest(stream.batch(n as usize), NOW)
                .await
                .expect("ingest");
            left -= n;
        }
        // Dropped without a snapshot: the next open reads the log alone.
    }
    println!(
        "fill: {events} events in {:.1} s",
        t.elapsed().as_secs_f64()
    );

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
    let mut base = job.await.unwrap();
    println!("ingest without a snapshot (3 s): {}", summary(&mut base));

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
        let mut during = job.await.unwrap();
        println!(
            "snapshot {}: {:.2} s; ingest meanwhile: {}",
            if in_place {
                "under the lock (before)"
            } else {
                "rebuilt from disk (after)"
            },
            took.as_secs_f64(),
            summary(&mut during)
        );
    }
    drop(store);

    let store = restart(&dir, "from the snapshot").await;
    store.shutdown().await.expect("shutdown");
    drop(store);
    // A clean stop wrote a snapshot of everything: nothing to replay.
    restart(&dir, "after a clean stop").await;
}
