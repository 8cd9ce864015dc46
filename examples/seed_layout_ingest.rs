//! Ingest cost of `[redis] layout = "seed"` (seed_apply.lua: seed 001's
//! hourly `cnt:*` keys and seed 004's per-day set on top of every counted
//! event) against hotrank's own layout, in the same run on one
//! redis-server it starts: the same event stream through
//! `RedisStore::ingest`, layouts alternated A B B A … so a drifting
//! machine favours neither. Reports events/s and Redis' own CPU per event
//! (INFO cpu, user + sys), the figure that does not depend on this
//! client's build.
//!
//! `cargo run --release --example seed_layout_ingest [events per run] [runs]`
//! (needs `redis-server` on PATH; port 6393 or `RPORT`). `ONLY=hotrank`
//! (or `seed`) runs one layout; `ARTICLES` sets how many articles the
//! stream spreads over (10,000). Each run also reports the `redis.call`s
//! per event (INFO commandstats, every command but the script calls).

use hotrank::store::Lifecycle;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hotrank::model::{ArticleId, Event, EventType};
use hotrank::store::redis::{RedisOptions, RedisStore};
use hotrank::store::{Store, StoreSettings};

const T0: i64 = 1_763_760_000;

fn events(n: usize, seed: u64, articles: u64) -> Vec<Event> {
    let mut x = seed | 1;
    let mut rnd = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    (0..n)
        .map(|i| {
            let kind = match rnd(20) {
                0 => EventType::Like,
                1 => EventType::Dwell,
                2 => EventType::Comment,
                _ => EventType::View,
            };
            let ts = T0 + (i as i64) / 500;
            let article = ArticleId::parse(&format!("a{}", rnd(articles))).unwrap();
            let visitor = u128::from(rnd(1_000_000_000));
            Event {
                kind,
                ip: rnd(1 << 20),
                seconds: if kind == EventType::Dwell { 30 } else { 0 },
                trusted: true,
                ..Event::view(article, visitor, ts)
            }
        })
        .collect()
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Commands Redis ran since the last CONFIG RESETSTAT, scripts' own
/// calls left out: the `redis.call`s the scripts made.
fn redis_calls(port: u16) -> u64 {
    cli(port, &["INFO", "commandstats"])
        .lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_eval"))
        .filter(|l| !l.starts_with("cmdstat_config") && !l.starts_with("cmdstat_info"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Redis CPU seconds (user + sys) so far.
fn redis_cpu(port: u16) -> f64 {
    cli(port, &["INFO", "cpu"])
        .lines()
        .filter(|l| l.starts_with("used_cpu_user:") || l.starts_with("used_cpu_sys:"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .sum()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let runs: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let port: u16 = std::env::var("RPORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(6393);
    let dir = tempfile::tempdir().unwrap();
    let mut redis = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir.path())
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server");
    while cli(port, &["PING"]).trim() != "PONG" {
        std::thread::sleep(Duration::from_millis(50));
    }
    let articles: u64 = std::env::var("ARTICLES")
        .ok()
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let only = std::env::var("ONLY").ok();
    let stream = events(n, 0x9e37_79b9_7f4a_7c15, articles);
    let mut results: Vec<(bool, f64, f64)> = Vec::new();
    for run in 0..runs {
        let order = if run % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for seed in order {
            let name = if seed { "seed" } else { "hotrank" };
            if only.as_deref().is_some_and(|o| o != name) {
                continue;
            }
            cli(port, &["FLUSHALL"]);
            let opts = RedisOptions {
                url: format!("redis://127.0.0.1:{port}/0"),
                seed_layout: seed,
                response_timeout_ms: 20_000,
                ..Default::default()
            };
            let store = RedisStore::connect(opts, StoreSettings::default()).unwrap();
            store.ready().await.unwrap();
            cli(port, &["CONFIG", "RESETSTAT"]);
            let c0 = redis_cpu(port);
            let t = Instant::now();
            let mut counted = 0usize;
            for chunk in stream.chunks(1000) {
                let now = chunk.last().unwrap().ts;
                let out = store.ingest(chunk.to_vec(), now).await.unwrap();
                counted += out
                    .iter()
                    .filter(|o| {
                        matches!(
                            o,
                            Ok(hotrank::model::Outcome {
                                verdict: hotrank::model::Verdict::Counted,
                                ..
                            })
                        )
                    })
                    .count();
            }
            let secs = t.elapsed().as_secs_f64();
            let cpu = redis_cpu(port) - c0;
            let calls = redis_calls(port) as f64 / n as f64;
            let (eps, us) = (n as f64 / secs, cpu * 1e6 / n as f64);
            println!(
                "run {run} {name:7}: {n} events ({counted} counted) in {secs:.2} s = {eps:.0} events/s, redis cpu {us:.2} us/event, {calls:.2} calls/event"
            );
            results.push((seed, eps, us));
        }
    }
    let median = |seed: bool, f: fn(&(bool, f64, f64)) -> f64| {
        let mut v: Vec<f64> = results.iter().filter(|r| r.0 == seed).map(f).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let (he, hu) = (median(false, |r| r.1), median(false, |r| r.2));
    let (se, su) = (median(true, |r| r.1), median(true, |r| r.2));
    println!(
        "median: hotrank layout {he:.0} events/s, {hu:.2} us redis cpu/event; seed layout {se:.0} events/s, {su:.2} us/event; seed/hotrank cpu = {:.2}",
        su / hu
    );
    let _ = redis.kill();
    let _ = redis.wait();
}
