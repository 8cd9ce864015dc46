//! One site on a Redis Cluster at `shards = 1` (one slot, one primary)
//! against the same site layout at `shards = 3` (its shards' slots on
//! several primaries: gate stage in the site's slot, a count stage per
//! shard), in the same run on the same cluster, through
//! `RedisStore::ingest` (no HTTP): runs alternate 1 3 3 1 …, each under a
//! fresh prefix. Reports events/s and each primary's Redis CPU (INFO cpu,
//! user + sys) per event.
//!
//! `SEEDS=redis://127.0.0.1:7001,... PORTS=7001,7002,7003 \
//!  cargo run --release --example cluster_shards_ingest [seconds] [runs]`
//! (bench/redis_cluster_ingest.sh starts the cluster and runs it). `CONC`
//! concurrent callers (4), batches of `BATCH` views (1000) over
//! `ARTICLES` articles (10,000), fresh visitors.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hotrank::model::{ArticleId, Event};
use hotrank::store::redis::{RedisOptions, RedisStore};
use hotrank::store::{Store, StoreSettings};

const T0: i64 = 1_763_760_000;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Redis CPU seconds (user + sys) of the node on `port`.
fn cpu(port: &str) -> f64 {
    let out = Command::new("redis-cli")
        .args(["-p", port, "info", "cpu"])
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("used_cpu_user:") || l.starts_with("used_cpu_sys:"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .sum()
}

fn batch(n: usize, x: &mut u64, articles: u64, next_visitor: &AtomicU64) -> Vec<Event> {
    (0..n)
        .map(|_| {
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            let a = ArticleId::parse(&format!("a{}", *x % articles)).unwrap();
            let v = u128::from(next_visitor.fetch_add(1, Ordering::Relaxed));
            Event {
                trusted: true,
                ip: *x >> 40,
                ..Event::view(a, v, T0)
            }
        })
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(8);
    let runs: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(4);
    let seeds = std::env::var("SEEDS").expect("SEEDS: the cluster's seed URLs");
    let ports: Vec<String> = std::env::var("PORTS")
        .expect("PORTS: the primaries' ports")
        .split(',')
        .map(str::to_string)
        .collect();
    let conc = env_or("CONC", 4) as usize;
    let size = env_or("BATCH", 1000) as usize;
    let articles = env_or("ARTICLES", 10_000);
    let settings = StoreSettings {
        ip_limit_per_minute: 0,
        ..StoreSettings::default()
    };
    let visitors = Arc::new(AtomicU64::new(1));
    for run in 0..runs {
        let shards: u32 = if run % 4 == 0 || run % 4 == 3 { 1 } else { 3 };
        let opts = RedisOptions {
            url: seeds.clone(),
            prefix: format!("bench{run}:"),
            cluster: true,
            shards,
            ..RedisOptions::default()
        };
        let store = Arc::new(RedisStore::connect(opts, settings.clone()).expect("store"));
        // Warm up: connections, scripts, the articles registered.
        let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ run as u64;
        store
            .ingest(batch(size, &mut x, articles, &visitors), T0)
            .await
            .expect("warm-up");
        let before: Vec<f64> = ports.iter().map(|p| cpu(p)).collect();
        let done = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let until = start + Duration::from_secs(secs);
        let mut tasks = Vec::new();
        for c in 0..conc {
            let (store, done, visitors) = (store.clone(), done.clone(), visitors.clone());
            tasks.push(tokio::spawn(async move {
                let mut x = 0x2545_f491_4f6c_dd1du64 ^ ((run * 64 + c) as u64 + 1);
                while Instant::now() < until {
                    let b = batch(size, &mut x, articles, &visitors);
                    store.ingest(b, T0).await.expect("ingest");
                    done.fetch_add(size as u64, Ordering::Relaxed);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let elapsed = start.elapsed().as_secs_f64();
        let n = done.load(Ordering::Relaxed) as f64;
        let per: Vec<String> = ports
            .iter()
            .zip(&before)
            .map(|(p, b)| format!("{p} {:.1}", (cpu(p) - b) * 1e6 / n))
            .collect();
        println!(
            "shards={shards}: {:.0} events/s; Redis CPU per event (µs) by primary: {}",
            n / elapsed,
            per.join(", ")
        );
    }
}
