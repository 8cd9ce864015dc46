//! Rankings under hostile queries (issue "Safe on the open internet"): a
//! client asking for endless distinct ranges and categories must not grow
//! the store's rankings or window caches past their caps, and building a
//! new ranking must not hold ingest off for the whole build.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use hotrank::model::{ArticleId, ArticleMeta, Event, EventType, HotQuery, RangeSpec};
use hotrank::score::ModelKind;
use hotrank::store::embedded::{EmbeddedStore, WINDOW_CACHES};
use hotrank::store::{Store, StoreSettings};

const NOW: i64 = 1_763_760_000;

fn view(article: usize, visitor: u128) -> Event {
    Event {
        kind: EventType::View,
        article: ArticleId::parse(&format!("a{article}")).unwrap(),
        visitor,
        ip: 1,
        ts: NOW,
        arrival_ms: NOW * 1000,
        event_id: None,
        seconds: 0,
        bot: false,
        trusted: false,
    }
}

fn query(range: RangeSpec, category: Option<String>) -> HotQuery {
    HotQuery {
        category,
        ..HotQuery::top(ModelKind::Gravity, range, 10)
    }
}

fn settings(max_rankings: usize, build_chunk: usize) -> StoreSettings {
    StoreSettings {
        max_rankings,
        build_chunk,
        visitor_limit_per_minute: u32::MAX,
        ip_limit_per_minute: u32::MAX,
        ..StoreSettings::default()
    }
}

async fn load(store: &EmbeddedStore, articles: usize) {
    for chunk in (0..articles).collect::<Vec<_>>().chunks(1000) {
        let evs = chunk.iter().map(|&a| view(a, a as u128)).collect();
        store.ingest(evs, NOW).await.unwrap();
    }
}

#[tokio::test]
async fn distinct_ranges_and_categories_stay_within_the_caps() {
    let store = EmbeddedStore::in_memory(settings(8, 4096));
    load(&store, 2000).await;
    for i in 0..10u32 {
        let cat = format!("c{}", i % 3);
        let meta = ArticleMeta {
            category: Some(cat),
            published_at: NOW - 60,
            ..ArticleMeta::default()
        };
        store
            .put_article(ArticleId::parse(&format!("a{i}")).unwrap(), meta, NOW)
            .await
            .unwrap();
    }
    // An attacker's stream: every range from 1h to 200h, each with a
    // random category.
    for h in 1..=200u32 {
        let cat = (h % 2 == 0).then(|| format!("x{h}"));
        store
            .hot(&query(RangeSpec::Hours(h), cat), NOW)
            .await
            .unwrap();
        let sizes = store.ranking_sizes();
        assert!(sizes.rankings <= 8, "rankings {} after {h}", sizes.rankings);
    }
    let sizes = store.ranking_sizes();
    // Every article may cache at most WINDOW_CACHES windows; 2000 articles
    // with small sketches stay well under this.
    let per_article_cap = WINDOW_CACHES * 2048;
    assert!(
        sizes.window_cache_bytes <= 2000 * per_article_cap,
        "window caches {} bytes",
        sizes.window_cache_bytes
    );
    assert!(sizes.entries <= 8 * 2000, "entries {}", sizes.entries);
    // Answers stay right after evictions: the default ranking again.
    let page = store
        .hot(&query(RangeSpec::Hours(72), None), NOW)
        .await
        .unwrap();
    assert_eq!(page.items.len(), 10);
}

/// Ingest calls that complete while one query builds a new ranking over
/// many articles: with chunked builds they interleave; a build under one
/// lock hold would let none through until it finished.
async fn ingests_during_a_build(chunk: usize) -> u64 {
    let store = Arc::new(EmbeddedStore::in_memory(settings(64, chunk)));
    load(&store, 100_000).await;
    let done = Arc::new(AtomicU64::new(0));
    let during = Arc::new(AtomicBool::new(false));
    let counted = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let ingest = {
        let (store, done, during, counted, stop) = (
            store.clone(),
            done.clone(),
            during.clone(),
            counted.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let mut v = 1_000_000u128;
            while !stop.load(Ordering::Relaxed) {
                v += 1;
                store.ingest(vec![view(1, v)], NOW).await.unwrap();
                done.fetch_add(1, Ordering::Relaxed);
                if during.load(Ordering::Relaxed) {
                    counted.fetch_add(1, Ordering::Relaxed);
                }
                tokio::task::yield_now().await;
            }
        })
    };
    // Let the ingest loop get going.
    while done.load(Ordering::Relaxed) < 10 {
        tokio::task::yield_now().await;
    }
    during.store(true, Ordering::Relaxed);
    store
        .hot(&query(RangeSpec::Hours(48), None), NOW)
        .await
        .unwrap();
    during.store(false, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    ingest.await.unwrap();
    counted.load(Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn building_a_new_ranking_lets_ingest_through() {
    // 100,000 articles in chunks of 512: about 195 lock holds, with ingest
    // free to run between any two of them.
    let chunked = ingests_during_a_build(512).await;
    // The same build under one hold of the lock, for comparison.
    let whole = ingests_during_a_build(usize::MAX / 2).await;
    eprintln!("ingest calls during a build: {chunked} chunked, {whole} in one hold");
    assert!(
        chunked >= 20 && chunked > 5 * (whole + 1),
        "ingest calls completed during a build: {chunked} chunked, {whole} in one hold"
    );
}

/// On Redis, rankings are sorted sets shared by every node: a flood of
/// distinct queries keeps at most `max_rankings` of them (and their state
/// hashes), the default ranking always among them.
#[tokio::test]
async fn redis_keeps_at_most_max_live_rankings() {
    use hotrank::store::redis::{RedisOptions, RedisStore};
    let server = common::redis::RedisServer::start();
    let opts = RedisOptions {
        url: server.url(),
        ..RedisOptions::default()
    };
    let store = RedisStore::connect(opts, settings(6, 4096)).unwrap();
    for a in 0..50 {
        store.ingest(vec![view(a, a as u128)], NOW).await.unwrap();
    }
    store
        .hot(&query(RangeSpec::Hours(72), None), NOW)
        .await
        .unwrap();
    for h in 1..=60u32 {
        let cat = (h % 2 == 0).then(|| format!("x{h}"));
        store
            .hot(&query(RangeSpec::Hours(h), cat), NOW + i64::from(h))
            .await
            .unwrap();
    }
    let mut con = server.connection();
    let zsets: Vec<String> = redis::cmd("KEYS").arg("hot:*").query(&mut con).unwrap();
    let rankings: Vec<&String> = zsets
        .iter()
        .filter(|k| !k.ends_with(":state") && *k != "hot:index")
        .collect();
    assert!(
        rankings.len() <= 6,
        "{} rankings: {rankings:?}",
        rankings.len()
    );
    assert!(
        rankings.iter().any(|k| *k == "hot:score"),
        "the default ranking stays"
    );
    let states = zsets.iter().filter(|k| k.ends_with(":state")).count();
    assert!(states <= 6, "{states} ranking states");
}
