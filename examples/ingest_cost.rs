//! Issue 33, "Embedded, cores": what in-process ingest costs, without
//! HTTP or a load generator: `EmbeddedStore::ingest` driven with batches
//! of a realistic stream (Zipf articles; fresh visitors and returning
//! ones, some of whose views the dedupe window drops), the gate on with
//! its defaults (visitor limit, behaviour rule, dedupe window) but the
//! per-IP limit off, as bench/run.sh scenario 6.
//!
//! Wall clock (events/s) depends on what else the machine runs; the
//! instruction count under callgrind does not, and is the figure to
//! compare between commits:
//!
//! ```text
//! cargo run --release --example ingest_cost                  # events/s
//! cargo run --release --example ingest_cost -- --callgrind   # instructions per event
//! cargo run --release --example ingest_cost -- --threads 2   # 1 -> 2 threads
//! cargo run --release --example ingest_cost -- --dedupe --callgrind
//!                         # per dedupe insert and lookup, the table alone
//! cargo run --release --example ingest_cost -- --server --callgrind
//!                         # as the server ingests bench/run.sh scenario 1
//! ```
//!
//! Options: `--events N` measured (default 1,000,000; 200,000 under
//! callgrind), `--warm N` ingested first and not measured (default
//! 200,000), `--batch N` (1000), `--articles N` (10,000),
//! `--fresh F` share of events from a visitor never seen (0.3),
//! `--dir DIR` a data directory (a tmpfs one, e.g. under /dev/shm: the log
//! is written, never fsynced unless `--fsync`) instead of a store in memory,
//! `--fsync always|interval|never` its log's policy (default never),
//! `--zipf S` the articles' Zipf exponent (1; 0: uniform).
//!
//! `--ranked`: as the server runs: the default ranking (gravity over 72 h)
//! is built on the empty store before the first event (the server's warm-up
//! at start), so every counted event marks its article changed, and every
//! `--upkeep-every N` batches (default 30: the upkeep thread's 100 ms at
//! about 300,000 events/s) the default query's first page is read, which
//! re-scores the changed articles as a pass of the rankings' upkeep does,
//! inside the measured region. (The server's upkeep runs on a thread of its
//! own, every 100 ms while the ranking was asked for in the last 10 s, as
//! in scenario 1's first run: the query keeps that independent of the
//! clock, which runs ~50x slower under callgrind, so the count repeats.)
//! `--server` is bench/run.sh scenario 1's load in process:
//! `--ranked --zipf 0 --fresh 1 --fsync always` with a data directory
//! under /dev/shm (or `--dir`).
//!
//! `--callgrind` runs this program again under
//! `valgrind --tool=callgrind`, collecting only inside
//! [`measured_region`] (or the dedupe phases), and divides.
//!
//! `--threads N` ingests the same stream from N tasks of an N-worker
//! runtime and compares with 1 task: the machine's cores are shared, so
//! that ratio is noisy (run it a few times); the store takes one lock per
//! batch today, so it stays near 1 whatever N.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use hotrank::loadgen::stream::{Popularity, Rng};
use hotrank::model::{ArticleId, Event, EventType, HotQuery};
use hotrank::store::embedded::dedupe::{Dedupe, DedupeKey};
use hotrank::store::embedded::{Durability, EmbeddedStore};
use hotrank::store::wal::FsyncPolicy;
use hotrank::store::{Store, StoreSettings};

const NOW: i64 = 1_763_760_000;

struct Opts {
    events: usize,
    warm: usize,
    batch: usize,
    articles: usize,
    fresh: f64,
    threads: usize,
    dir: Option<PathBuf>,
    fsync: FsyncPolicy,
    zipf: f64,
    ranked: bool,
    upkeep_every: usize,
    callgrind: bool,
    dedupe: bool,
    /// Set in the run under valgrind: which region it collects.
    phase: Option<String>,
}

fn opts() -> Opts {
    let mut o = Opts {
        events: 0,
        warm: 200_000,
        batch: 1000,
        articles: 10_000,
        fresh: 0.3,
        threads: 1,
        dir: None,
        fsync: FsyncPolicy::Never,
        zipf: 1.0,
        ranked: false,
        upkeep_every: 30,
        callgrind: false,
        dedupe: false,
        phase: None,
    };
    let mut events = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--events" => events = Some(val().parse().expect("--events")),
            "--warm" => o.warm = val().parse().expect("--warm"),
            "--batch" => o.batch = val().parse().expect("--batch"),
            "--articles" => o.articles = val().parse().expect("--articles"),
            "--fresh" => o.fresh = val().parse().expect("--fresh"),
            "--threads" => o.threads = val().parse().expect("--threads"),
            "--dir" => o.dir = Some(val().into()),
            "--fsync" => {
                o.fsync = match val().as_str() {
                    "always" => FsyncPolicy::Always,
                    "interval" => FsyncPolicy::Interval(std::time::Duration::from_millis(10)),
                    "never" => FsyncPolicy::Never,
                    other => panic!("--fsync always|interval|never, not {other}"),
                }
            }
            "--zipf" => o.zipf = val().parse().expect("--zipf"),
            "--ranked" => o.ranked = true,
            "--upkeep-every" => o.upkeep_every = val().parse().expect("--upkeep-every"),
            "--server" => {
                o.ranked = true;
                o.zipf = 0.0;
                o.fresh = 1.0;
                o.fsync = FsyncPolicy::Always;
                o.dir.get_or_insert_with(|| "/dev/shm".into());
            }
            "--phase" => o.phase = Some(val()),
            "--callgrind" => o.callgrind = true,
            "--dedupe" => o.dedupe = true,
            other => panic!("unknown option {other}"),
        }
    }
    let under = o.callgrind || o.phase.is_some();
    o.events = events.unwrap_or(if under { 200_000 } else { 1_000_000 });
    o
}

/// A visitor hash as the HTTP layer makes them: 128 random-looking bits.
fn visitor(rng: &mut Rng) -> u128 {
    u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())
}

/// `n` events in batches of `batch`, continuing `seen` (the visitors of
/// the stream so far): a `fresh` share from new visitors, the rest from a
/// visitor seen before (most of them recent ones). Ten batches a second.
fn stream(o: &Opts, rng: &mut Rng, seen: &mut Vec<u128>, n: usize, t0: i64) -> Vec<Vec<Event>> {
    // Zipf weights (s = 1): article `i` of `n` with weight 1/(i+1).
    let zipf = Popularity::new(o.articles as u64, o.zipf);
    let ids: Vec<ArticleId> = (0..o.articles)
        .map(|i| ArticleId::parse(&format!("article-{i}")).expect("id"))
        .collect();
    let mut out = Vec::with_capacity(n.div_ceil(o.batch));
    for b in 0..n.div_ceil(o.batch) {
        let ts = t0 + (b / 10) as i64;
        let size = o.batch.min(n - b * o.batch);
        let batch = (0..size)
            .map(|_| {
                let v = if seen.is_empty() || rng.unit() < o.fresh {
                    let v = visitor(rng);
                    seen.push(v);
                    v
                } else {
                    // Half from the last 10,000 visitors, half from all.
                    let span = if rng.next_u64() & 1 == 0 {
                        seen.len().min(10_000)
                    } else {
                        seen.len()
                    };
                    seen[seen.len() - 1 - (rng.next_u64() as usize % span)]
                };
                Event::view(ids[zipf.sample(rng) as usize].clone(), v, ts)
            })
            .collect();
        out.push(batch);
    }
    out
}

fn settings() -> StoreSettings {
    StoreSettings {
        ip_limit_per_minute: 0,
        ..StoreSettings::default()
    }
}

fn store(o: &Opts, run: usize) -> EmbeddedStore {
    match &o.dir {
        None => EmbeddedStore::in_memory(settings()),
        Some(dir) => {
            let dir = dir.join(format!("run-{}-{run}", std::process::id()));
            let d = Durability {
                dir,
                fsync: o.fsync,
                segment_bytes: 64 << 20,
                snapshot_interval_secs: 1 << 30,
                snapshot_every_records: u64::MAX,
                storage: hotrank::store::storage::Disk::shared(),
            };
            EmbeddedStore::open(d, settings()).expect("open").0
        }
    }
}

/// Ingests `batches` in order; with `upkeep_every` > 0, the default
/// query's first page after every that many batches (the changed articles
/// re-scored, as the rankings' upkeep does).
async fn ingest(store: &EmbeddedStore, batches: Vec<Vec<Event>>, upkeep_every: usize) {
    let q = HotQuery::default_page();
    for (i, b) in batches.into_iter().enumerate() {
        let now = b.first().map_or(NOW, |e| e.ts);
        store.ingest(b, now).await.expect("ingest");
        if upkeep_every > 0 && (i + 1) % upkeep_every == 0 {
            store.hot(&q, now).await.expect("hot");
        }
    }
}

/// The region callgrind collects in (`--toggle-collect`): only
/// `measured` batches' ingest.
#[inline(never)]
fn measured_region(
    rt: &tokio::runtime::Runtime,
    store: &EmbeddedStore,
    batches: Vec<Vec<Event>>,
    upkeep_every: usize,
) {
    rt.block_on(ingest(store, batches, upkeep_every));
}

/// The stream: the warm-up's batches and the measured ones.
fn batches(o: &Opts) -> (Vec<Vec<Event>>, Vec<Vec<Event>>) {
    let mut rng = Rng::new(33);
    let mut seen = Vec::new();
    let warm = stream(o, &mut rng, &mut seen, o.warm, NOW);
    let t = NOW + (warm.len() / 10) as i64 + 1;
    let measured = stream(o, &mut rng, &mut seen, o.events, t);
    (warm, measured)
}

/// Events/s of the measured batches ingested from `tasks` tasks at once
/// (batch `i` by task `i % tasks`) on a runtime of `tasks` workers.
fn run(o: &Opts, tasks: usize, run: usize) -> f64 {
    let rt = if tasks == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        (tokio::runtime::Builder::new_multi_thread())
            .worker_threads(tasks)
            .enable_all()
            .build()
    }
    .expect("runtime");
    let s = Arc::new(store(o, run));
    let upkeep = if o.ranked {
        // The server's start on an empty store: the default ranking built
        // (and pinned) before it listens.
        s.warm(NOW);
        o.upkeep_every
    } else {
        0
    };
    let (warm, measured) = batches(o);
    rt.block_on(ingest(&s, warm, upkeep));
    let n: usize = measured.iter().map(Vec::len).sum();
    let t0 = Instant::now();
    if tasks == 1 {
        measured_region(&rt, &s, measured, upkeep);
    } else {
        let mut parts: Vec<Vec<Vec<Event>>> = (0..tasks).map(|_| Vec::new()).collect();
        for (i, b) in measured.into_iter().enumerate() {
            parts[i % tasks].push(b);
        }
        rt.block_on(async {
            let handles: Vec<_> = (parts.into_iter())
                .map(|p| {
                    let s = Arc::clone(&s);
                    tokio::spawn(async move { ingest(&s, p, upkeep).await })
                })
                .collect();
            for h in handles {
                h.await.expect("task");
            }
        });
    }
    let rate = n as f64 / t0.elapsed().as_secs_f64();
    let (pairs, _, keys) = s.gate_sizes();
    println!(
        "  {tasks} task(s): {n} events in batches of {}, {rate:.0} events/s ({pairs} dedupe pairs, {keys} visitor keys at the end)",
        o.batch
    );
    if let Some(dir) = s.data_dir().map(|d| d.to_path_buf()) {
        drop(s);
        let _ = std::fs::remove_dir_all(dir);
    }
    rate
}

/// Keys of `n` (visitor, article) pairs, all different.
fn dedupe_keys(n: usize) -> Vec<DedupeKey> {
    let mut rng = Rng::new(7);
    (0..n)
        .map(|i| {
            DedupeKey::new(
                (i % 10_000) as u32,
                visitor(&mut rng),
                EventType::View as u8,
            )
        })
        .collect()
}

#[inline(never)]
fn measured_dedupe_insert(d: &mut Dedupe, keys: &[DedupeKey]) {
    for k in keys {
        d.raise(*k, NOW);
    }
}

#[inline(never)]
fn measured_dedupe_lookup(d: &Dedupe, keys: &[DedupeKey]) -> usize {
    keys.iter().filter(|k| d.get(k).is_some()).count()
}

/// The dedupe table alone: `warm` pairs, then `events` new pairs raised
/// (phase "insert"), then all looked up again (phase "lookup").
fn dedupe(o: &Opts) {
    let keys = dedupe_keys(o.warm + o.events);
    let mut d = Dedupe::with_seed(7, 0);
    measured_dedupe_insert(&mut d, &keys[..o.warm]);
    let new = &keys[o.warm..];
    let t0 = Instant::now();
    measured_dedupe_insert(&mut d, new);
    let ins = t0.elapsed().as_nanos() as f64 / new.len() as f64;
    let t0 = Instant::now();
    let found = measured_dedupe_lookup(&d, new);
    let look = t0.elapsed().as_nanos() as f64 / new.len() as f64;
    assert_eq!(found, new.len());
    println!(
        "  dedupe table, {} pairs then {} more: {ins:.0} ns per new pair, {look:.0} ns per lookup (wall clock)",
        o.warm,
        new.len()
    );
}

/// Runs this program under callgrind collecting in `region` only; returns
/// the instructions counted.
fn callgrind(region: &str, args: &[String]) -> u64 {
    let exe = std::env::current_exe().expect("exe");
    let out = std::env::temp_dir().join(format!("ingest_cost.{}.cg", std::process::id()));
    let status = std::process::Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg("--collect-atstart=no")
        .arg(format!("--toggle-collect=ingest_cost::{region}*"))
        .arg(exe)
        .args(args)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("valgrind (is it installed?)");
    assert!(status.success(), "the run under valgrind failed");
    let text = std::fs::read_to_string(&out).expect("callgrind output");
    let _ = std::fs::remove_file(&out);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("totals in the callgrind output")
}

fn main() {
    let o = opts();
    let passed: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--callgrind")
        .collect();
    if o.phase.is_some() {
        // Under valgrind: the parent reads the counts, not this output.
        if o.dedupe {
            dedupe(&o)
        } else {
            run(&o, 1, 0);
        }
        return;
    }
    if o.callgrind {
        if o.dedupe {
            let mut a = passed.clone();
            a.extend(["--phase".into(), "insert".into()]);
            let both = callgrind("measured_dedupe_", &a);
            let look = callgrind("measured_dedupe_lookup", &a);
            // The warm-up's inserts are collected too: one phase of
            // `warm` inserts and one of `events` inserts.
            let ins = both - look;
            println!(
                "## dedupe table alone (callgrind, {} + {} pairs)\n  {:.0} instructions per new pair (warm-up and measured inserts), {:.0} per lookup",
                o.warm,
                o.events,
                ins as f64 / (o.warm + o.events) as f64,
                look as f64 / o.events as f64
            );
        } else {
            let mut a = passed.clone();
            a.extend(["--phase".into(), "ingest".into()]);
            let ir = callgrind("measured_region", &a);
            println!(
                "## in-process ingest under callgrind\n  {} events (after {} warm-up), batches of {}: {ir} instructions, {:.0} per event",
                o.events,
                o.warm,
                o.batch,
                ir as f64 / o.events as f64
            );
        }
        return;
    }
    if o.dedupe {
        dedupe(&o);
        return;
    }
    println!("## in-process ingest (wall clock; the machine's load moves it)");
    let one = run(&o, 1, 0);
    if o.threads > 1 {
        let n = run(&o, o.threads, 1);
        println!(
            "  1 -> {} tasks: {:.2}x (noisy on a shared machine; instructions per event are the stable figure)",
            o.threads,
            n / one
        );
    }
}
