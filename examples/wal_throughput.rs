//! Throughput of the store's write-ahead log under each fsync policy.
//!
//! ```text
//! cargo run --release --example wal_throughput -- [appenders] [seconds] [payload_bytes] [dir]
//! ```
//!
//! Defaults: 64 appenders, 2 s per scenario, 64-byte payloads, a temp dir under
//! the system temp dir. For each policy it runs:
//!
//! * `raw append`: one thread appends as fast as it can, nobody waits; shows the
//!   cost of `append` itself (the writer drains in the background).
//! * `ingest batch=B`: `appenders` tokio tasks, each takes a shared "store" mutex,
//!   appends B records, releases it and awaits `wait_durable` of the last one —
//!   the shape of hotrank's ingest path.
//!
//! It also measures the raw fdatasync latency of the target directory.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hotrank::store::wal::{FsyncPolicy, Wal, WalConfig};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx]
}

fn open(dir: &std::path::Path, policy: FsyncPolicy) -> Wal {
    let cfg = WalConfig {
        fsync: policy,
        segment_bytes: 64 << 20,
        ..WalConfig::new(dir)
    };
    Wal::open(cfg, 0, |_, _, _| Ok(())).expect("open wal").0
}

fn raw_append(base: &std::path::Path, policy: FsyncPolicy, secs: f64, payload: &[u8]) {
    let dir = tempfile::tempdir_in(base).unwrap();
    let wal = open(dir.path(), policy);
    let start = Instant::now();
    let limit = Duration::from_secs_f64(secs);
    let mut n = 0u64;
    let mut last = 0;
    while start.elapsed() < limit {
        for _ in 0..1024 {
            last = wal.append(payload);
        }
        n += 1024;
    }
    let append_elapsed = start.elapsed();
    wal.wait_durable_blocking(last).unwrap();
    let drained = start.elapsed();
    println!(
        "  raw append          : {:>12.0} appends/s ({n} in {:.2?}); all written after {:.2?} => {:.0} records/s end to end, {} fsyncs, {:.1} MiB on disk",
        n as f64 / append_elapsed.as_secs_f64(),
        append_elapsed,
        drained,
        n as f64 / drained.as_secs_f64(),
        wal.fsync_count(),
        wal.size_bytes() as f64 / (1 << 20) as f64,
    );
    wal.close().unwrap();
}

async fn ingest(
    base: &std::path::Path,
    policy: FsyncPolicy,
    appenders: usize,
    batch: usize,
    secs: f64,
    payload: &[u8],
) {
    let dir = tempfile::tempdir_in(base).unwrap();
    let wal = Arc::new(open(dir.path(), policy));
    let store_lock = Arc::new(parking_lot::Mutex::new(()));
    let start = Instant::now();
    let limit = Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for _ in 0..appenders {
        let (wal, store_lock, payload) =
            (Arc::clone(&wal), Arc::clone(&store_lock), payload.to_vec());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut n = 0u64;
            while start.elapsed() < limit {
                let t = Instant::now();
                let last = {
                    let _g = store_lock.lock();
                    let mut last = 0;
                    for _ in 0..batch {
                        last = wal.append(&payload);
                    }
                    last
                };
                wal.wait_durable(last).await.unwrap();
                lat.push(t.elapsed());
                n += batch as u64;
            }
            (n, lat)
        }));
    }
    let mut total = 0;
    let mut lat = Vec::new();
    for t in tasks {
        let (n, l) = t.await.unwrap();
        total += n;
        lat.extend(l);
    }
    let elapsed = start.elapsed();
    lat.sort_unstable();
    let fsyncs = wal.fsync_count();
    println!(
        "  ingest batch={batch:<4}    : {:>12.0} records/s acknowledged; {} requests, wait_durable p50 {:.2?} p99 {:.2?}; {fsyncs} fsyncs ({:.0} records/fsync)",
        total as f64 / elapsed.as_secs_f64(),
        lat.len(),
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        if fsyncs > 0 {
            total as f64 / fsyncs as f64
        } else {
            f64::NAN
        },
    );
    wal.close().unwrap();
}

fn fsync_latency(base: &std::path::Path, payload_len: usize) {
    use std::io::Write;
    let dir = tempfile::tempdir_in(base).unwrap();
    let mut f = std::fs::File::create(dir.path().join("probe")).unwrap();
    let buf = vec![1u8; payload_len * 16];
    let mut lat = Vec::new();
    for _ in 0..500 {
        f.write_all(&buf).unwrap();
        let t = Instant::now();
        f.sync_data().unwrap();
        lat.push(t.elapsed());
    }
    lat.sort_unstable();
    println!(
        "fdatasync after a {} B append: p50 {:.2?}  p99 {:.2?}  max {:.2?} (500 samples)",
        buf.len(),
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        lat.last().unwrap()
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let appenders: usize = args.first().map_or(64, |s| s.parse().expect("appenders"));
    let secs: f64 = args.get(1).map_or(2.0, |s| s.parse().expect("seconds"));
    let payload_len: usize = args
        .get(2)
        .map_or(64, |s| s.parse().expect("payload_bytes"));
    let base: PathBuf = args.get(3).map_or_else(std::env::temp_dir, PathBuf::from);
    let payload = vec![b'x'; payload_len];
    println!(
        "wal_throughput: {appenders} appenders, {secs} s per scenario, {payload_len} B payloads, dir {}, {} CPUs",
        base.display(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    fsync_latency(&base, payload_len);
    for policy in [
        FsyncPolicy::Always,
        FsyncPolicy::Interval(Duration::from_millis(100)),
        FsyncPolicy::Never,
    ] {
        println!("{policy:?}");
        raw_append(&base, policy, secs, &payload);
        for batch in [1, 64] {
            ingest(&base, policy, appenders, batch, secs, &payload).await;
        }
    }
}
