//! The dedupe table's worst single insert while it grows to tens of
//! millions of entries (issue 12: ingest never waits more than 10 ms), its
//! bytes per entry, a restart's load of it, and the cost of a retention
//! sweep per shard; beside the single `HashMap` it replaced.
//!
//! ```text
//! cargo bench --bench dedupe_growth -- [entries]   # default 30,000,000
//! ```
//!
//! Not a criterion bench: the figure is one worst case per run, not a
//! mean. Keys are (article < 100,000, random visitor, view).

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use foldhash::fast::FixedState;
use hotrank::store::embedded::dedupe::{Dedupe, DedupeKey};
use hotrank::store::embedded::slots::SHARDS;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn key(&mut self) -> DedupeKey {
        let v = u128::from(self.next()) << 64 | u128::from(self.next());
        DedupeKey::new((self.next() % 100_000) as u32, v, 0)
    }
}

/// Worst, p99.99 and total of per-call times, and the calls over 1 and
/// 10 ms.
fn report(what: &str, mut t: Vec<Duration>, extra: &str) {
    let total: Duration = t.iter().sum();
    let over = |ms: u128| t.iter().filter(|d| d.as_millis() >= ms).count();
    let (slow, slower) = (over(1), over(10));
    t.sort_unstable();
    let q = |q: f64| t[((t.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "{what}: {} calls, total {:.2} s, p99.99 {:.4} ms, worst {:.2} ms, {slow} calls ≥ 1 ms, {slower} ≥ 10 ms{extra}",
        t.len(),
        total.as_secs_f64(),
        q(0.9999),
        q(1.0),
    );
}

fn timed(n: usize, mut f: impl FnMut()) -> Vec<Duration> {
    let mut t = Vec::with_capacity(n);
    for _ in 0..n {
        let s = Instant::now();
        f();
        t.push(s.elapsed());
    }
    t
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (s.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or(30_000_000, |a| a.parse().expect("entries"));
    let seed = 0x5eed;
    println!("# dedupe_growth: {n} entries, {SHARDS} shards");

    // The single table it replaced: std HashMap, the same hasher and seed.
    let old_order: Vec<(DedupeKey, i64)> = {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let rss = rss_kib();
        let mut m: HashMap<DedupeKey, i64, FixedState> =
            HashMap::with_hasher(FixedState::with_seed(seed));
        let t = timed(n, || {
            let e = m.entry(rng.key()).or_insert(1);
            *e = (*e).max(1);
        });
        let kib = rss_kib() - rss;
        report(
            "one HashMap: insert",
            t,
            &format!(
                "; {:.1} bytes/entry (capacity {}; RSS {:.1} bytes/entry)",
                (m.capacity() / 7 * 8) as f64 * 33.0 / m.len() as f64,
                m.capacity(),
                kib as f64 * 1024.0 / m.len() as f64
            ),
        );
        let s = Instant::now();
        m.retain(|_, t| black_box(*t) > 0);
        println!(
            "one HashMap: retain (keeping all) {:.1} ms in one call",
            s.elapsed().as_secs_f64() * 1e3
        );
        m.into_iter().collect()
    };
    // A restart's load before: a snapshot in the old table's order into
    // one table pre-sized for it.
    let s = Instant::now();
    let mut m: HashMap<DedupeKey, i64, FixedState> =
        HashMap::with_capacity_and_hasher(old_order.len(), FixedState::with_seed(seed));
    for &(k, t) in &old_order {
        m.insert(k, t);
    }
    println!(
        "one HashMap: load {} entries in table order {:.2} s",
        m.len(),
        s.elapsed().as_secs_f64()
    );
    drop(m);
    // The upgrade: a snapshot written by the single table, loaded sharded.
    let s = Instant::now();
    let mut d = Dedupe::with_seed(seed, old_order.len());
    for &(k, t) in &old_order {
        d.insert(k, t);
    }
    println!(
        "sharded: load {} entries in the single table's order {:.2} s",
        d.len(),
        s.elapsed().as_secs_f64()
    );
    drop((d, old_order));

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let rss = rss_kib();
    let mut d = Dedupe::with_seed(seed, 0);
    let t = timed(n, || d.raise(rng.key(), 1));
    let kib = rss_kib() - rss;
    report(
        "sharded: insert",
        t,
        &format!(
            "; {:.1} bytes/entry (heap; RSS {:.1} bytes/entry)",
            d.heap_bytes() as f64 / d.len() as f64,
            kib as f64 * 1024.0 / d.len() as f64
        ),
    );
    // The noise floor: the same inserts again, every key already there
    // (no growth); what is slow here is the machine, not the table.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let t = timed(n, || d.raise(rng.key(), 2));
    report("sharded: the same keys again (no growth)", t, "");
    let mut shard = 0;
    let t = timed(SHARDS, || {
        d.retain_shard(shard, |_, t| black_box(t) > 0);
        shard += 1;
    });
    report("sharded: retain one shard (keeping all)", t, "");

    // A restart's load: the entries in the table's order into a table
    // pre-sized for them with the same seed.
    let entries: Vec<(DedupeKey, i64)> = d.iter().collect();
    drop(d);
    let s = Instant::now();
    let mut back = Dedupe::with_seed(seed, entries.len());
    for &(k, t) in &entries {
        back.insert(k, t);
    }
    println!(
        "sharded: load {} entries in table order {:.2} s; {:.1} bytes/entry",
        back.len(),
        s.elapsed().as_secs_f64(),
        back.heap_bytes() as f64 / back.len() as f64
    );
}
