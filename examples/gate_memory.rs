//! Issue 33, "Gate memory": the bytes the embedded store's gate keeps per
//! (visitor, article) dedupe pair and per visitor (rate-limit log plus the
//! behaviour rule's state), and per article with 100 visitors each.
//!
//! Counted by a global allocator that tracks the live heap bytes, so the
//! figures are exact allocation counts (not RSS): not noisy, and the same
//! on any machine for the same build.
//!
//! 1. Dedupe pairs: 1,000,000 (visitor, article) views raised into the
//!    dedupe table as `apply` does, grown from empty.
//! 2. Per visitor: an in-memory store, one article already viewed by
//!    100,000 visitors (its sketches full-size), then `visitors` more
//!    visitors (default 1,000,000) view it once each; the heap growth per
//!    visitor, less the dedupe table's own growth, is the visitor's rate
//!    and behaviour state (nothing else grows with a new visitor once the
//!    sketches are full-size).
//! 3. Per article: 20,000 articles × 100 visitors each (a visitor of its
//!    own per view), everything the store grows by, per article.
//!
//! `cargo run --release --example gate_memory [visitors]`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use hotrank::model::{ArticleId, Event, EventType};
use hotrank::store::embedded::EmbeddedStore;
use hotrank::store::embedded::dedupe::{Dedupe, DedupeKey};
use hotrank::store::{Store, StoreSettings};

/// Live heap bytes: what the program has allocated and not freed.
static LIVE: AtomicUsize = AtomicUsize::new(0);

struct Counting;

// SAFETY: every call is passed to `System` unchanged; only the counter is
// added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

const NOW: i64 = 1_763_760_000;
const PAIRS: usize = 1_000_000;
const GOAL_PAIR: f64 = 32.0;
const GOAL_VISITOR: f64 = 32.0;

/// A visitor hash as the HTTP layer makes them: 128 random-looking bits.
fn visitor(n: u64) -> u128 {
    let mut x = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut mix = || {
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^= x >> 33;
        x
    };
    u128::from(mix()) << 64 | u128::from(mix())
}

fn row(what: &str, bytes: f64, goal: f64) {
    let verdict = if bytes <= goal { "met" } else { "not met" };
    println!(
        "{what}: {bytes:.1} B (goal <= {goal} B); ratio {:.2}x of the goal: {verdict}",
        bytes / goal
    );
}

/// Part 1: the dedupe table alone, grown from empty to `n` pairs (and on
/// to twice that, for the spread of the figure between sizes).
fn dedupe_pairs(n: usize) -> f64 {
    let before = live();
    let mut d = Dedupe::with_seed(7, 0);
    let key = |i: u64| DedupeKey::new((i % 10_000) as u32, visitor(i), EventType::View as u8);
    let t0 = Instant::now();
    for i in 0..n as u64 {
        d.raise(key(i), NOW);
    }
    let took = t0.elapsed();
    let grown = live() - before;
    assert_eq!(d.len(), n);
    let t0 = Instant::now();
    let found = (0..n as u64).filter(|&i| d.get(&key(i)).is_some()).count();
    let looked = t0.elapsed();
    assert_eq!(found, n);
    println!(
        "  dedupe table at {n} pairs: {grown} heap bytes (the table's own count: {}); {:.0} ns per new pair, {:.0} ns per lookup (wall clock, not a goal)",
        d.heap_bytes(),
        took.as_nanos() as f64 / n as f64,
        looked.as_nanos() as f64 / n as f64,
    );
    let (mut least, mut most) = (f64::MAX, 0f64);
    for step in 1..=10 {
        let upto = n + n * step / 10;
        for i in d.len() as u64..upto as u64 {
            d.raise(key(i), NOW);
        }
        let per = (live() - before) as f64 / upto as f64;
        (least, most) = (least.min(per), most.max(per));
    }
    println!("  from 1.1 M to 2 M pairs (every 0.1 M): {least:.1} to {most:.1} B per pair");
    grown as f64 / n as f64
}

async fn views(store: &EmbeddedStore, evs: &[Event]) {
    for chunk in evs.chunks(10_000) {
        let out = store.ingest(chunk.to_vec(), NOW).await.expect("ingest");
        assert!(out.iter().all(|o| o.is_ok()));
    }
}

fn view(article: &ArticleId, v: u64) -> Event {
    Event::view(article.clone(), visitor(v), NOW)
}

/// The gate's settings of bench/run.sh scenario 6: the defaults (visitor
/// limit, behaviour rule, dedupe window) with the per-IP limit off (every
/// event comes from one IP key).
fn settings() -> StoreSettings {
    StoreSettings {
        ip_limit_per_minute: 0,
        ..StoreSettings::default()
    }
}

/// Part 2: heap growth per new visitor (one view of an article whose
/// sketches are already full-size), and the dedupe table's share of it.
async fn per_visitor(n: u64) -> (f64, f64) {
    let store = EmbeddedStore::in_memory(settings());
    let a = ArticleId::parse("warm").unwrap();
    let warm = 100_000;
    let warmup: Vec<Event> = (0..warm).map(|v| view(&a, v)).collect();
    views(&store, &warmup).await;
    drop(warmup);
    let evs: Vec<Event> = (warm..warm + n).map(|v| view(&a, v)).collect();
    let (before, (d0, _)) = (live(), store.gate_heap_bytes());
    let t0 = Instant::now();
    views(&store, &evs).await;
    let took = t0.elapsed();
    let (d1, held) = store.gate_heap_bytes();
    let (grown, dedupe) = (live() - before, d1 - d0);
    let (pairs, _, keys) = store.gate_sizes();
    println!(
        "  {n} new visitors: {grown} heap bytes, of which the dedupe table {dedupe}; {pairs} dedupe pairs, {keys} rate-limit + behaviour keys; the visitor table's own count: {held} bytes; {:.0} ns per event through the store (batches of 10,000; wall clock, not a goal)",
        took.as_nanos() as f64 / n as f64
    );
    let n = n as f64;
    (grown as f64 / n, (grown - dedupe) as f64 / n)
}

/// Part 3: heap growth per article of `articles` articles with `per`
/// visitors each (a visitor of its own per view).
async fn per_article(articles: u64, per: u64) -> f64 {
    let store = EmbeddedStore::in_memory(settings());
    let mut evs = Vec::with_capacity((articles * per) as usize);
    for i in 0..articles {
        let a = ArticleId::parse(&format!("a{i}")).unwrap();
        evs.extend((0..per).map(|v| view(&a, i * per + v)));
    }
    let before = live();
    views(&store, &evs).await;
    let grown = live() - before;
    let (dedupe, visitors) = store.gate_heap_bytes();
    println!(
        "  {articles} articles x {per} visitors: {grown} heap bytes, the dedupe table {dedupe} and the visitor table {visitors} of them"
    );
    grown as f64 / articles as f64
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let visitors: u64 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().expect("visitors"));
    println!("## Gate memory (heap bytes, counting allocator)");
    let pair = dedupe_pairs(PAIRS);
    row("bytes per dedupe pair at 1 M pairs", pair, GOAL_PAIR);
    let (all, state) = per_visitor(visitors).await;
    row(
        &format!("bytes per visitor's rate + behaviour state at {visitors} visitors"),
        state,
        GOAL_VISITOR,
    );
    println!("  (a new visitor's view costs {all:.1} B in all, its dedupe pair included)");
    let article = per_article(20_000, 100).await;
    println!(
        "bytes per article with 100 visitors each (heap, gate state included): {article:.0} B (bench/run.sh scenario 6 compares it with the seed's keys)"
    );
}
