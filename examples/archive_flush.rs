//! Archive writer cost: one flush of N changed articles (take the changed
//! set, read the articles from Redis, upsert them), first into an empty
//! archive, then again after a tenth of them changed; then eviction of
//! all N (idle past `evict_after`) and their restore, once by one event
//! each, once by `GET /api/articles/{id}` (the store's `article`) each.
//!
//! ```text
//! HOTRANK_REDIS_URL=redis://127.0.0.1:6391/ cargo run --release --example archive_flush -- [articles] [hours]
//! ```
//!
//! Defaults: 5,000 articles, 6 hourly buckets each with 4 views from
//! distinct visitors. Use a redis-server of your own (the example writes
//! under the prefix `bench_flush:`, deleted first); the archive is the
//! PostgreSQL at `HOTRANK_ARCHIVE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`), in a schema dropped at the end.

use std::sync::Arc;
use std::time::Instant;

use sqlx::Connection;

use hotrank::archive::{Archive, ArchiveOptions};
use hotrank::clock::ManualClock;
use hotrank::model::{ArticleId, Event};
use hotrank::pipeline::{ArchiveWriter, Flushed};
use hotrank::store::redis::{RedisOptions, RedisStore};
use hotrank::store::{Store, StoreSettings};

const T0: i64 = 1_763_760_000;

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn views(arts: std::ops::Range<usize>, hours: usize, salt: u128) -> Vec<Event> {
    let mut out = Vec::new();
    for a in arts {
        for h in 0..hours {
            for v in 0..4u128 {
                let ts = T0 - (h as i64) * 3600 - 10;
                out.push(Event {
                    ip: (a * 31 + h) as u64,
                    trusted: true,
                    arrival_ms: T0 * 1000,
                    ..Event::view(
                        ArticleId::from_number(a as u64),
                        salt << 64 | (a as u128) << 16 | (h as u128) << 4 | v,
                        ts,
                    )
                });
            }
        }
    }
    out
}

/// Deletes every key under `prefix`.
async fn clear(con: &mut redis::aio::MultiplexedConnection, prefix: &str) {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(con)
        .await
        .unwrap();
    if !keys.is_empty() {
        redis::cmd("DEL")
            .arg(&keys)
            .query_async::<()>(con)
            .await
            .unwrap();
    }
}

#[tokio::main]
async fn main() {
    let (n, hours) = (arg(1, 5000), arg(2, 6));
    let url =
        std::env::var("HOTRANK_REDIS_URL").expect("HOTRANK_REDIS_URL (a redis-server of your own)");
    let pg = std::env::var("HOTRANK_ARCHIVE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let prefix = "bench_flush:";
    let client = redis::Client::open(url.clone()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    clear(&mut con, prefix).await;
    let store = Arc::new(
        RedisStore::connect(
            RedisOptions {
                url,
                prefix: prefix.into(),
                ..RedisOptions::default()
            },
            StoreSettings::default(),
        )
        .unwrap(),
    );
    for chunk in views(0..n, hours, 1).chunks(1000) {
        store.ingest(chunk.to_vec(), T0).await.unwrap();
    }
    let schema = format!("bench_flush_{}", std::process::id());
    let archive = Archive::connect(&ArchiveOptions {
        url: pg.clone(),
        schema: schema.clone(),
        batch_articles: 500,
        max_connections: 4,
        connect_timeout: std::time::Duration::from_secs(10),
    })
    .await
    .unwrap();
    let clock = Arc::new(ManualClock::at(T0));
    let w = ArchiveWriter::new(store.clone(), None, 10, clock.clone()).evict_after(3600);
    let t = Instant::now();
    let f = w.flush(&archive).await.unwrap();
    let first = t.elapsed().as_secs_f64();
    println!(
        "first flush: {f:?} ({n} articles x {hours} hours) in {first:.3} s = {:.0} articles/s",
        n as f64 / first
    );
    let changed = n / 10;
    for chunk in views(0..changed, 1, 2).chunks(1000) {
        store.ingest(chunk.to_vec(), T0).await.unwrap();
    }
    let t = Instant::now();
    let f = w.flush(&archive).await.unwrap();
    let second = t.elapsed().as_secs_f64();
    assert_eq!(f, Flushed::Articles(changed as u64));
    println!(
        "second flush: {f:?} (a tenth changed) in {second:.3} s = {:.0} articles/s",
        changed as f64 / second
    );

    // Eviction and restore: idle for two hours (evict_after = 1 h).
    let mut now = T0;
    let mut evict = |what: &str| {
        now += 2 * 3600;
        clock.set(now);
        let (w, archive, what) = (&w, &archive, what.to_string());
        async move {
            let t = Instant::now();
            w.flush(archive).await.unwrap();
            let s = t.elapsed().as_secs_f64();
            println!(
                "evict {n} ({what}): {s:.3} s = {:.3} ms/article",
                s * 1000.0 / n as f64
            );
            now
        }
    };
    let at = evict("first").await;
    let t = Instant::now();
    for chunk in views(0..n, 1, 3).chunks(1000) {
        store.ingest(chunk.to_vec(), at).await.unwrap();
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "restore {n} by events (4 views each, batches of 1000): {s:.3} s = {:.3} ms/article",
        s * 1000.0 / n as f64
    );
    // The same again on resident articles: what the events cost alone.
    let t = Instant::now();
    for chunk in views(0..n, 1, 4).chunks(1000) {
        store.ingest(chunk.to_vec(), at).await.unwrap();
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "  baseline: the same events on resident articles: {s:.3} s = {:.3} ms/article",
        s * 1000.0 / n as f64
    );
    // Archive what the events changed, then evict again.
    evict("flush after events").await;
    let at = evict("second").await;
    let t = Instant::now();
    for a in 0..n {
        let v = store
            .article(&ArticleId::from_number(a as u64), at)
            .await
            .unwrap();
        assert!(v.is_some());
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "restore {n} by GET (one after another): {s:.3} s = {:.3} ms/article",
        s * 1000.0 / n as f64
    );
    let t = Instant::now();
    for a in 0..n {
        let v = store
            .article(&ArticleId::from_number(a as u64), at)
            .await
            .unwrap();
        assert!(v.is_some());
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "  baseline: the same GETs on resident articles: {s:.3} s = {:.3} ms/article",
        s * 1000.0 / n as f64
    );
    archive.close().await;
    let mut c = sqlx::PgConnection::connect(&pg).await.unwrap();
    sqlx::raw_sql(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut c)
        .await
        .unwrap();
    clear(&mut con, prefix).await;
}
