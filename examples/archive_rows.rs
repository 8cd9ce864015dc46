//! Archive throughput: rows/s of `Archive::export` (a new archive, then the
//! same state again) and of reading it back (`Archive::records`), plus the
//! restore into an empty embedded store.
//!
//! ```text
//! cargo run --release --example archive_rows -- [articles] [hours] [views_per_hour]
//! ```
//!
//! Defaults: 10,000 articles, 24 hourly buckets each, 6 views per bucket
//! from distinct visitors (so every bucket carries a sketch). The state is
//! built in an embedded store in a temp dir, then archived to the
//! PostgreSQL at `HOTRANK_ARCHIVE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`) in a schema of its own,
//! dropped at the end. `BATCH` sets `batch_articles` (default 500).

use std::time::Instant;

use sqlx::Connection;

use hotrank::archive::{Archive, ArchiveOptions, SourcePosition};
use hotrank::model::{ArticleId, Event, EventType};
use hotrank::store::dump::{DUMP_VERSION, Record};
use hotrank::store::embedded::{Durability, EmbeddedStore};
use hotrank::store::wal::FsyncPolicy;
use hotrank::store::{Store, StoreSettings};

const T0: i64 = 1_763_760_000;

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn durability(dir: &std::path::Path) -> Durability {
    Durability {
        dir: dir.to_path_buf(),
        fsync: FsyncPolicy::Interval(std::time::Duration::from_millis(50)),
        segment_bytes: 64 << 20,
        snapshot_interval_secs: 1 << 30,
        snapshot_every_records: 1 << 40,
        storage: hotrank::store::storage::Disk::shared(),
    }
}

#[tokio::main]
async fn main() {
    let articles = arg(1, 10_000);
    let hours = arg(2, 24) as i64;
    let per_hour = arg(3, 6) as u64;
    let url = std::env::var("HOTRANK_ARCHIVE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let batch: usize = std::env::var("BATCH")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    let schema = format!("bench_archive_{}", std::process::id());

    // The state: every article viewed in each of `hours` hours.
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = EmbeddedStore::open(durability(dir.path()), StoreSettings::default()).unwrap();
    let started = Instant::now();
    let mut visitor: u128 = 1;
    let mut events = Vec::with_capacity(1000);
    let mut n_events = 0u64;
    for h in 0..hours {
        let ts = T0 - (hours - h) * 3600;
        for a in 0..articles {
            for _ in 0..per_hour {
                visitor += 1;
                events.push(Event {
                    kind: if visitor.is_multiple_of(10) {
                        EventType::Like
                    } else {
                        EventType::View
                    },
                    ip: visitor as u64,
                    ..Event::view(ArticleId::from_number(a as u64), visitor, ts)
                });
                if events.len() == 1000 {
                    n_events += events.len() as u64;
                    store.ingest(std::mem::take(&mut events), ts).await.unwrap();
                }
            }
        }
    }
    if !events.is_empty() {
        n_events += events.len() as u64;
        store.ingest(events, T0).await.unwrap();
    }
    let mut dump = vec![Record::Header {
        version: DUMP_VERSION,
        source: "embedded".into(),
    }];
    dump.extend(store.export());
    let gate = dump
        .iter()
        .filter(|r| {
            matches!(
                r,
                Record::Dedupe { .. } | Record::EventId { .. } | Record::Rate { .. }
            )
        })
        .count();
    println!(
        "state: {articles} articles x {hours} hours, {n_events} events, built in {:.1?}",
        started.elapsed()
    );

    let archive = Archive::connect(&ArchiveOptions {
        url: url.clone(),
        schema: schema.clone(),
        batch_articles: batch,
        max_connections: 2,
        connect_timeout: std::time::Duration::from_secs(10),
    })
    .await
    .expect("connect to the archive");
    // Articles alone (the incremental path, also what export does first),
    // then the full export: unchanged articles, totals, gate state.
    let arts: Vec<Record> = dump
        .iter()
        .filter(|r| matches!(r, Record::Article { .. }))
        .cloned()
        .collect();
    for (what, as_of) in [
        ("articles (new archive)", T0),
        ("articles again (no change)", T0 + 1),
    ] {
        let t = Instant::now();
        let w = archive
            .upsert_articles(&arts, &SourcePosition::at(as_of))
            .await
            .unwrap();
        let s = t.elapsed().as_secs_f64();
        println!(
            "{what:26}: {} rows ({} changed) in {s:.2} s = {:.0} rows/s, {:.0} articles/s",
            w.rows,
            w.rows_changed,
            w.rows as f64 / s,
            w.articles as f64 / s
        );
    }
    for what in ["full export (gate new)", "full export again"] {
        let t = Instant::now();
        let mut articles_done = None;
        let w = archive
            .export(&dump, &SourcePosition::at(T0 + 2), |w| {
                if w.articles == arts.len() as u64 && articles_done.is_none() {
                    articles_done = Some(t.elapsed());
                }
            })
            .await
            .unwrap();
        let s = t.elapsed().as_secs_f64();
        let a = articles_done.unwrap_or_default().as_secs_f64();
        println!(
            "{what:26}: {} rows ({} changed) in {s:.2} s = {:.0} rows/s (articles {a:.2} s, totals and {} gate entries {:.2} s = {:.0} rows/s)",
            w.rows,
            w.rows_changed,
            w.rows as f64 / s,
            gate,
            s - a,
            gate as f64 / (s - a)
        );
    }
    let t = Instant::now();
    let back = archive.records(|_| {}).await.unwrap();
    let s = t.elapsed().as_secs_f64();
    let rows: usize = back
        .iter()
        .map(|r| match r {
            // The article, votes and lifetime rows, and one per bucket.
            Record::Article { hours, days, .. } => 3 + hours.len() + days.len(),
            _ => 1,
        })
        .sum();
    println!(
        "{:26}: {rows} rows in {s:.2} s = {:.0} rows/s",
        "read back (records)",
        rows as f64 / s
    );
    let t = Instant::now();
    let d2 = tempfile::tempdir().unwrap();
    let n = EmbeddedStore::import_into(&durability(d2.path()), &StoreSettings::default(), &back)
        .unwrap();
    println!(
        "{:26}: {n} articles in {:.2?}",
        "restore into embedded",
        t.elapsed()
    );
    archive.close().await;
    let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut c)
        .await
        .unwrap();
}
