//! The PostgreSQL archive against the real server at 127.0.0.1:5432 (user
//! postgres, db test; `HOTRANK_TEST_PG_URL` overrides) and real
//! redis-servers: every round trip through the archive gives the same
//! records (sketches byte for byte) and the same answers as the direct
//! dump path, a second export changes no row, and one article restores
//! alone. Each test works in a schema of its own, dropped at the end.

mod common;

use hotrank::store::Lifecycle;
use redis::AsyncCommands;
use serde_json::Value;
use std::sync::atomic::Ordering;

use hotrank::archive::{Archive, ArchiveOptions, SourcePosition};
use hotrank::model::{
    ArticleId, ArticleMeta, Event, EventType, HotQuery, RangeSpec, Timestamp, VoteDirection,
};
use hotrank::score::ModelKind;
use hotrank::store::dump::{DUMP_VERSION, Record, bytes_from_b64};
use hotrank::store::embedded::{Durability, EmbeddedStore};
use hotrank::store::redis::{RedisOptions, RedisStore, dump_redis, load_redis};
use hotrank::store::wal::FsyncPolicy;
use hotrank::store::{Store, StoreSettings};

use common::T0;
use common::pg::{Schema, pg_url};
use common::redis::RedisServer;

const HOUR: i64 = 3600;
const DAY: i64 = 86_400;

fn id(s: &str) -> ArticleId {
    ArticleId::parse(s).expect("valid id")
}

const ARTICLES: usize = 24;

/// Twelve days of mixed traffic over 24 articles (older than Redis's
/// hourly horizon, so the Redis dump carries daily buckets too): views
/// with repeats, likes, comments, dwell, bots, eventId retries; votes with
/// voter sets; one deleted article.
async fn feed(store: &dyn Store) {
    for a in 0..ARTICLES {
        let meta = ArticleMeta {
            title: Some(format!("Article {a}")),
            author: Some(format!("au{}", a % 5)),
            category: Some(if a % 3 == 0 { "tech" } else { "life" }.into()),
            groups: if a % 2 == 0 {
                vec!["even".into()]
            } else {
                vec![]
            },
            url: (a % 4 == 0).then(|| format!("https://example.com/{a}")),
            published_at: T0 - 12 * DAY + a as i64 * 11 * HOUR,
            ..ArticleMeta::default()
        };
        store
            .put_article(id(&format!("art{a}")), meta, T0 - 12 * DAY)
            .await
            .expect("put");
    }
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for b in 0..96 {
        let ts = T0 - 12 * DAY + b * 3 * HOUR;
        let mut events = Vec::new();
        for e in 0..30u64 {
            let kind = match rnd(12) {
                0 => EventType::Like,
                1 => EventType::Dwell,
                2 => EventType::Comment,
                3 => EventType::Share,
                _ => EventType::View,
            };
            events.push(Event {
                kind,
                // A few articles are registered by their first event.
                article: id(&format!("art{}", rnd(ARTICLES as u64 + 3))),
                visitor: u128::from(rnd(80)),
                ip: rnd(7),
                ts: ts + (e as i64) % 60,
                arrival_ms: (ts + 60) * 1000 + e as i64,
                event_id: (rnd(5) == 0).then(|| u128::from(rnd(300))),
                seconds: if kind == EventType::Dwell { 40 } else { 0 },
                bot: hotrank::crawler::Crawler::from_flag(rnd(30) == 0),
                trusted: false,
                net: 0,
            });
        }
        store.ingest(events, ts + 60).await.expect("ingest");
    }
    for (a, user, dir) in [
        (20, 1u128, VoteDirection::Up),
        (20, 2, VoteDirection::Up),
        (21, 3, VoteDirection::Down),
        (23, 4, VoteDirection::Up),
    ] {
        store
            .vote(&id(&format!("art{a}")), user.into(), dir, T0 - HOUR)
            .await
            .expect("vote");
    }
    store
        .delete_article(&id("art7"), T0 - HOUR)
        .await
        .expect("delete");
}

/// Everything a reader can see at `now`, as comparable text: every
/// article's view and hourly rows, hot and new lists over several windows
/// and filters, and the stats.
async fn answers(store: &dyn Store, now: Timestamp, long: bool) -> Vec<String> {
    let mut ranges = vec![
        RangeSpec::Hours(1),
        RangeSpec::Hours(24),
        RangeSpec::Hours(72),
        RangeSpec::All,
    ];
    if long {
        ranges.push(RangeSpec::Hours(14 * 24));
    }
    let mut qs = Vec::new();
    for range in ranges {
        for model in [ModelKind::Gravity, ModelKind::Votes, ModelKind::Window] {
            qs.push(HotQuery {
                explain: true,
                ..HotQuery::top(model, range, 30)
            });
        }
    }
    let mut q = HotQuery::top(ModelKind::Gravity, RangeSpec::Hours(72), 5);
    q.category = Some("tech".into());
    qs.push(q);
    let mut q = HotQuery::top(ModelKind::Gravity, RangeSpec::Hours(72), 20);
    q.group = Some("even".into());
    q.per_author = Some(1);
    qs.push(q);
    let mut out = Vec::new();
    for q in &qs {
        let page = store.hot(q, now).await.expect("hot");
        out.push(format!("{:?} {:?}", q.range, page.generated_at));
        for it in page.items {
            out.push(format!(
                "{} {} {} {:?} {:?}",
                it.rank, it.id, it.score, it.counters, it.explain
            ));
        }
        for it in store.newest(q, now).await.expect("new").items {
            out.push(format!("new {} {} {:?}", it.rank, it.id, it.counters));
        }
    }
    for a in 0..ARTICLES + 3 {
        let a = id(&format!("art{a}"));
        out.push(format!(
            "{:?}",
            store.article(&a, now).await.expect("article")
        ));
        let hours = if long { 14 * 24 } else { 48 };
        out.push(format!(
            "{:?}",
            store.hourly(&a, now, hours).await.expect("hourly")
        ));
    }
    // Without the site's figures for the dashboard, which the archive does
    // not hold (README, "Moving state: export and import").
    let stats = store.stats(now, 24).await.expect("stats");
    let stats = hotrank::store::SiteFigures::default().into_stats(stats);
    out.push(format!("{stats:?}"));
    out
}

fn assert_same(want: &[String], got: &[String], what: &str) {
    assert_eq!(want.len(), got.len(), "{what}: answer count");
    for (x, y) in want.iter().zip(got) {
        assert_eq!(x, y, "{what}");
    }
}

/// Article records sorted by id, and every other record (totals, gate
/// entries) as sorted JSON: what must survive a round trip unchanged.
fn canonical(records: &[Record]) -> (Vec<Record>, Vec<String>) {
    let mut arts: Vec<Record> = records
        .iter()
        .filter(|r| matches!(r, Record::Article { .. }))
        .cloned()
        .collect();
    arts.sort_by(|a, b| match (a, b) {
        (Record::Article { id: x, .. }, Record::Article { id: y, .. }) => x.cmp(y),
        _ => std::cmp::Ordering::Equal,
    });
    let mut rest: Vec<String> = records
        .iter()
        .filter(|r| !matches!(r, Record::Article { .. } | Record::Header { .. }))
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    rest.sort();
    (arts, rest)
}

/// The first place two JSON values differ, as a path and both sides.
fn first_difference(path: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let (l, r) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                first_difference(&format!("{path}.{k}"), l, r)
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (l, r))| first_difference(&format!("{path}[{i}]"), l, r)),
        _ if a == b => None,
        _ => Some(format!("{path}: {a} != {b}")),
    }
}

fn assert_same_records(want: &[Record], got: &[Record], what: &str) {
    let (wa, wr) = canonical(want);
    let (ga, gr) = canonical(got);
    assert_eq!(wa.len(), ga.len(), "{what}: article count");
    for (x, y) in wa.iter().zip(&ga) {
        if x != y {
            let (jx, jy) = (
                serde_json::to_value(x).unwrap(),
                serde_json::to_value(y).unwrap(),
            );
            panic!("{what}: {:?}", first_difference("", &jx, &jy));
        }
    }
    assert_eq!(wr, gr, "{what}: totals and gate state");
}

fn durability(dir: &std::path::Path) -> Durability {
    Durability {
        dir: dir.to_path_buf(),
        fsync: FsyncPolicy::Interval(std::time::Duration::from_millis(5)),
        segment_bytes: 1 << 20,
        snapshot_interval_secs: 3600,
        snapshot_every_records: 1 << 40,
        storage: hotrank::store::storage::Disk::shared(),
    }
}

fn embedded(dir: &std::path::Path) -> EmbeddedStore {
    EmbeddedStore::open(durability(dir), StoreSettings::default())
        .expect("open")
        .0
}

/// A new embedded store holding `records` (the `hotrank import` path).
fn embedded_from(dir: &std::path::Path, records: &[Record]) -> EmbeddedStore {
    EmbeddedStore::import_into(&durability(dir), &StoreSettings::default(), records)
        .expect("import into embedded");
    embedded(dir)
}

fn redis_store(server: &RedisServer, prefix: &str) -> RedisStore {
    RedisStore::connect(
        RedisOptions {
            url: server.url(),
            prefix: prefix.into(),
            ..RedisOptions::default()
        },
        StoreSettings::default(),
    )
    .expect("redis store")
}

fn embedded_dump(e: &EmbeddedStore) -> Vec<Record> {
    let mut d = vec![Record::Header {
        version: DUMP_VERSION,
        source: "embedded".into(),
    }];
    d.extend(e.export());
    d
}

/// Every table of the archive as text, ordered: what "changes nothing"
/// compares.
async fn tables(a: &Archive) -> Vec<String> {
    let mut out = Vec::new();
    for t in [
        "articles",
        "counters",
        "votes",
        "totals",
        "quarantine_hours",
        "gate",
    ] {
        let rows: Vec<(String,)> = sqlx::query_as(&format!("SELECT t::text FROM {t} t ORDER BY 1"))
            .fetch_all(a.pool())
            .await
            .expect("read table");
        out.push(format!("{t}: {} rows", rows.len()));
        out.extend(rows.into_iter().map(|(r,)| r));
    }
    out
}

/// embedded → archive → embedded, and → Redis: the same records and the
/// same answers as the direct dump paths; a second export changes no row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_round_trips() {
    let schema = Schema::new();
    let archive = schema.archive().await;
    let d1 = tempfile::tempdir().unwrap();
    let e1 = embedded(d1.path());
    feed(&e1).await;
    let dump = embedded_dump(&e1);
    let mut batches = 0;
    let w = archive
        .export(&dump, &SourcePosition::at(T0), |_| batches += 1)
        .await
        .expect("export");
    assert_eq!(w.articles, ARTICLES as u64 + 3);
    assert_eq!(w.articles_changed, w.articles);
    assert_eq!(w.rows_changed, w.rows, "a new archive takes every row");
    assert!(batches >= 4, "27 articles in batches of 7, then the rest");

    // Idempotent: the same state again changes no row, not even as_of.
    let before = tables(&archive).await;
    assert!(before.iter().any(|r| r.starts_with("counters: ")));
    let again = archive
        .export(&dump, &SourcePosition::at(T0 + 500), |_| {})
        .await
        .expect("export again");
    assert_eq!((again.articles_changed, again.rows_changed), (0, 0));
    assert_eq!(again.rows, w.rows);
    assert_same(&before, &tables(&archive).await, "second export");

    // The archive hands back exactly what went in.
    let back = archive.records(|_| {}).await.expect("read archive");
    assert!(matches!(&back[0], Record::Header { source, .. } if source == "archive"));
    assert_same_records(&dump, &back, "embedded -> archive");

    // → embedded: same records (sketch bytes included), same answers.
    // (Records first: answering caches each sketch's cardinality in its
    // header, as PFCOUNT does in Redis.)
    let d2 = tempfile::tempdir().unwrap();
    let e2 = embedded_from(d2.path(), &back);
    assert_same_records(&dump, &embedded_dump(&e2), "restored embedded store");
    assert_same(
        &answers(&e1, T0, true).await,
        &answers(&e2, T0, true).await,
        "embedded -> archive -> embedded",
    );

    // → Redis: the same keys and answers as loading the dump directly.
    let server = RedisServer::start();
    let direct = redis_store(&server, "direct:");
    load_redis(&direct, &dump, &StoreSettings::default(), T0)
        .await
        .expect("load dump");
    let via = redis_store(&server, "via:");
    let n = load_redis(&via, &back, &StoreSettings::default(), T0)
        .await
        .expect("load archive");
    assert_eq!(n, ARTICLES as u64 + 3);
    assert_same_records(
        &dump_redis(&direct, T0).await.unwrap(),
        &dump_redis(&via, T0).await.unwrap(),
        "redis keys",
    );
    assert_same(
        &answers(&direct, T0, true).await,
        &answers(&via, T0, true).await,
        "embedded -> archive -> redis",
    );
    assert_same(
        &answers(&e1, T0, false).await,
        &answers(&via, T0, false).await,
        "embedded vs its restore in redis",
    );
    archive.close().await;
}

/// Redis → archive → Redis and → embedded: the same as the direct paths,
/// day buckets (past Redis's hourly horizon) included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_round_trips() {
    let schema = Schema::new();
    let archive = schema.archive().await;
    let server = RedisServer::start();
    let r1 = redis_store(&server, "live:");
    feed(&r1).await;
    let dump = dump_redis(&r1, T0).await.expect("dump redis");
    assert!(
        dump.iter()
            .any(|r| matches!(r, Record::Article { days, .. } if !days.is_empty())),
        "the workload reaches past the hourly horizon"
    );
    archive
        .export(&dump, &SourcePosition::at(T0), |_| {})
        .await
        .expect("export");
    let again = archive
        .export(&dump, &SourcePosition::at(T0 + 60), |_| {})
        .await
        .expect("export again");
    assert_eq!(again.rows_changed, 0, "{again:?}");
    let back = archive.records(|_| {}).await.expect("read archive");
    assert_same_records(&dump, &back, "redis -> archive");

    // → Redis (a new prefix): the same keys' contents and answers as
    // loading the dump directly, and the same recent answers as the
    // source. (Its long windows differ: the source still holds hourly
    // buckets past the horizon until their TTL, which no dump carries.)
    let r2 = redis_store(&server, "restored:");
    load_redis(&r2, &back, &StoreSettings::default(), T0)
        .await
        .expect("load archive into redis");
    let direct_r = redis_store(&server, "direct:");
    load_redis(&direct_r, &dump, &StoreSettings::default(), T0)
        .await
        .expect("load dump into redis");
    assert_same_records(
        &dump,
        &dump_redis(&r2, T0).await.unwrap(),
        "restored redis keys",
    );
    assert_same(
        &answers(&direct_r, T0, true).await,
        &answers(&r2, T0, true).await,
        "redis -> archive -> redis",
    );
    assert_same(
        &answers(&r1, T0, false).await,
        &answers(&r2, T0, false).await,
        "redis vs its restore",
    );

    // → embedded: same as importing the Redis dump directly, and the same
    // short-window answers as the Redis store it came from.
    let d1 = tempfile::tempdir().unwrap();
    let direct = embedded_from(d1.path(), &dump);
    let d2 = tempfile::tempdir().unwrap();
    let via = embedded_from(d2.path(), &back);
    assert_same(
        &answers(&direct, T0, true).await,
        &answers(&via, T0, true).await,
        "redis -> archive -> embedded",
    );
    assert_same(
        &answers(&r1, T0, false).await,
        &answers(&via, T0, false).await,
        "redis vs its restore in embedded",
    );
    archive.close().await;
}

/// The incremental path: one article's newer state upserted with its
/// source position changes only that article; it reads back alone, and its
/// sketch image `SET` into Redis counts what the store counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_article_upserts_and_restores() {
    let schema = Schema::new();
    let archive = schema.archive().await;
    let dir = tempfile::tempdir().unwrap();
    let e = embedded(dir.path());
    feed(&e).await;
    archive
        .export(&embedded_dump(&e), &SourcePosition::at(T0), |_| {})
        .await
        .expect("export");
    assert_eq!(archive.article(&id("nope")).await.unwrap(), None);

    // New activity on art3 only.
    let target = id("art3");
    let events: Vec<Event> = (0..20u64)
        .map(|v| Event {
            ip: 100 + v,
            arrival_ms: (T0 + 10) * 1000 + v as i64,
            ..Event::view(target.clone(), 10_000 + u128::from(v), T0 + 10)
        })
        .collect();
    e.ingest(events, T0 + 10).await.expect("ingest");
    let record = e
        .export()
        .into_iter()
        .find(|r| matches!(r, Record::Article { id, .. } if *id == target))
        .expect("art3 exported");
    let at = SourcePosition {
        as_of: T0 + 10,
        position: Some("0-1763760010000".into()),
        ..Default::default()
    };
    let before = tables(&archive).await;
    let w = archive
        .upsert_articles(std::slice::from_ref(&record), &at)
        .await
        .expect("upsert");
    assert_eq!(w.articles, 1);
    assert_eq!(w.articles_changed, 1);
    // The article row (new position), its lifetime counters and this
    // hour's (a new row) changed; its meta, votes and other hours did not,
    // nor did any other article.
    assert_eq!(w.rows_changed, 3, "{w:?}");
    let after = tables(&archive).await;
    let changed: Vec<&String> = after
        .iter()
        .filter(|r| !before.contains(r) && !r.contains(" rows"))
        .collect();
    assert_eq!(changed.len(), 3, "{changed:#?}");
    assert!(
        changed.iter().all(|r| r.starts_with("(art3,")),
        "{changed:#?}"
    );
    let stamped: Vec<(String, i64, Option<String>)> = sqlx::query_as(
        "SELECT id, as_of, source_position FROM articles WHERE as_of <> $1 ORDER BY id",
    )
    .bind(T0)
    .fetch_all(archive.pool())
    .await
    .unwrap();
    assert_eq!(
        stamped,
        vec![("art3".into(), T0 + 10, at.position.clone())],
        "only the upserted article moved"
    );
    assert!(
        archive
            .upsert_articles(
                &[Record::Header {
                    version: DUMP_VERSION,
                    source: "x".into()
                }],
                &at
            )
            .await
            .is_err(),
        "only article records"
    );

    let got = archive.article(&target).await.unwrap().expect("archived");
    assert_eq!(got, record, "restored byte for byte");
    // Abacus's restore: SET the archived image into Redis, then PFCOUNT.
    let Record::Article { lifetime, .. } = &got else {
        unreachable!()
    };
    let server = RedisServer::start();
    let mut con = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let image = bytes_from_b64(&lifetime.uv).unwrap();
    let _: () = con.set("restored:uv", &image).await.unwrap();
    let back: Vec<u8> = con.get("restored:uv").await.unwrap();
    assert_eq!(back, image, "Redis keeps the image as written");
    let count: u64 = redis::cmd("PFCOUNT")
        .arg("restored:uv")
        .query_async(&mut con)
        .await
        .unwrap();
    let view = e.article(&target, T0 + 20).await.unwrap().unwrap();
    assert_eq!(count, view.lifetime.uv);
    assert!(count >= 20);
    archive.close().await;
}

/// A schema written by a newer hotrank is refused; connecting twice to the
/// same schema is fine (the migration runs once).
#[tokio::test]
async fn schema_versions() {
    let schema = Schema::new();
    let a = schema.archive().await;
    let b = schema.archive().await;
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM archive_migrations")
        .fetch_one(b.pool())
        .await
        .unwrap();
    assert_eq!(n, i64::from(hotrank::archive::SCHEMA_VERSION));
    sqlx::query("INSERT INTO archive_migrations (version, name) VALUES (999, 'future')")
        .execute(a.pool())
        .await
        .unwrap();
    let err = Archive::connect(&ArchiveOptions {
        url: pg_url(),
        schema: schema.name.clone(),
        batch_articles: 7,
        max_connections: 1,
        connect_timeout: std::time::Duration::from_secs(10),
    })
    .await
    .err()
    .expect("refused");
    assert!(err.to_string().contains("newer"), "{err}");
    a.close().await;
    b.close().await;
}

/// `hotrank archive export` twice (the second changes nothing) and
/// `hotrank archive import` into a new data dir, through the binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_export_and_import() {
    let schema = Schema::new();
    let work = tempfile::tempdir().unwrap();
    let (d1, d2) = (work.path().join("d1"), work.path().join("d2"));
    let e = embedded(&d1);
    feed(&e).await;
    let want = embedded_dump(&e);
    e.shutdown().await.unwrap();
    drop(e);
    let config = work.path().join("hotrank.toml");
    std::fs::write(
        &config,
        format!(
            "[archive]\nschema = \"{}\"\nbatch_articles = 10\n",
            schema.name
        ),
    )
    .unwrap();
    let run = |args: &[&str], dir: &std::path::Path| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hotrank"))
            .args(args)
            .arg("--config")
            .arg(&config)
            .arg("--data-dir")
            .arg(dir)
            .env("HOTRANK_ARCHIVE_URL", pg_url())
            .output()
            .expect("run hotrank");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{args:?}: {err}");
        err
    };
    let first = run(&["archive", "export"], &d1);
    assert!(first.contains("archive export: 10/27 articles"), "{first}");
    let second = run(&["archive", "export"], &d1);
    assert!(
        second.contains("archived 27 articles (0 changed)") && second.contains("(0 changed) to"),
        "{second}"
    );
    let restored = run(&["archive", "import"], &d2);
    assert!(restored.contains("restored 27 articles"), "{restored}");
    assert_same_records(&want, &embedded_dump(&embedded(&d2)), "via the CLI");
}

#[test]
fn archive_defaults_are_documented() {
    let c = hotrank::config::ArchiveConfig::default();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for line in [
        format!("url = {:?}", c.url),
        format!("schema = {:?}", c.schema),
        format!("batch_articles = {}", c.batch_articles),
        format!("max_connections = {}", c.max_connections),
        format!("connect_timeout_ms = {}", c.connect_timeout_ms),
    ] {
        assert!(readme.contains(&line), "README lacks `{line}`");
    }
}

// ---- The periodic writer (src/archive/writer.rs) ----

use std::sync::Arc;

use hotrank::clock::ManualClock;
use hotrank::pipeline::{ArchiveWriter, Flushed};
use hotrank::store::redis::article_records;

/// Where a writer test's site lives (issue 13): one slot on the shared
/// redis-server; the same over 3 article shards with a cluster's key
/// names on it (every archive call must stay in one slot: the slot log,
/// checked by [`on_every_layout`], stays empty); over 3 shards on the
/// binary's 3-primary cluster.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Layout {
    One,
    SplitNames,
    SplitCluster,
    /// A site in one slot of the cluster (`shards = 1`), as the pipeline
    /// runs there.
    Cluster,
}

/// Store options for a site of its own in `layout`.
fn site_options(layout: Layout) -> RedisOptions {
    use common::redis::{shared_cluster_site, shared_site};
    match layout {
        Layout::One => shared_site(1),
        Layout::SplitNames => RedisOptions {
            cluster_names: true,
            ..shared_site(3)
        },
        Layout::SplitCluster => shared_cluster_site(3),
        Layout::Cluster => shared_cluster_site(1),
    }
}

/// Runs the writer test `$name(layout) -> store` once per [`Layout`]
/// (tests `$name::one`, `$name::split_names`, `$name::split_cluster`),
/// then checks that no call of the store crossed cluster slots.
macro_rules! on_every_layout {
    ($name:ident) => {
        mod $name {
            async fn run(layout: super::Layout) {
                let store = super::$name(layout).await;
                assert_eq!(store.crossed_slots(), Vec::<String>::new(), "slot log");
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn one() {
                run(super::Layout::One).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn split_names() {
                run(super::Layout::SplitNames).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn split_cluster() {
                run(super::Layout::SplitCluster).await
            }
        }
    };
}

/// A schema, its archive and a store under a prefix of its own, laid out
/// as `layout` says.
async fn writer_site(layout: Layout) -> (Schema, Archive, Arc<RedisStore>) {
    let schema = Schema::new();
    let archive = schema.archive().await;
    let store =
        RedisStore::connect(site_options(layout), StoreSettings::default()).expect("redis store");
    (schema, archive, Arc::new(store))
}

fn writer(store: &Arc<RedisStore>, flush_secs: u64) -> ArchiveWriter {
    ArchiveWriter::new(
        store.clone(),
        None,
        flush_secs,
        Arc::new(ManualClock::at(T0)),
    )
}

/// Counted events only (distinct visitors, no ids, no bots): `n` events
/// over the articles `arts`, spread over the last five hours before T0.
fn counted_events(arts: &[&str], n: u64, salt: u64) -> Vec<Event> {
    (0..n)
        .map(|i| {
            let kind = match i % 7 {
                0 => EventType::Like,
                1 => EventType::Dwell,
                2 => EventType::Comment,
                _ => EventType::View,
            };
            let ts = T0 - 5 * HOUR + (i as i64 * 997) % (5 * HOUR);
            Event {
                kind,
                ip: salt * 1000 + i % 500,
                seconds: if kind == EventType::Dwell { 30 } else { 0 },
                arrival_ms: T0 * 1000 + i as i64,
                ..Event::view(
                    id(arts[i as usize % arts.len()]),
                    u128::from(salt * 1_000_000 + i),
                    ts,
                )
            }
        })
        .collect()
}

async fn redis_get(store: &RedisStore, key: &str) -> Option<Vec<u8>> {
    store.con().get(key).await.unwrap()
}

/// Every key of the store's site, wherever it lives (the site's slot and
/// each shard's), with the part after its prefix or tag, sorted.
async fn site_keys(store: &RedisStore) -> Vec<(String, String)> {
    let mut con = store.con();
    let mut out = Vec::new();
    for (route, prefix) in store.keys().scan_prefixes() {
        let mut cursor = 0;
        loop {
            let (next, batch) = con
                .scan(&route, cursor, &format!("{prefix}*"), 1000)
                .await
                .unwrap();
            for k in batch {
                let rest = k[prefix.len()..].to_string();
                out.push((k, rest));
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The members of every copy of the site's set `name` (one per shard
/// when the site spans slots), sorted.
async fn members(store: &RedisStore, name: &str) -> Vec<String> {
    let mut c = store.con();
    let mut m = Vec::new();
    for key in store.keys().ledgers(name) {
        let part: Vec<String> = c.smembers(key).await.unwrap();
        m.extend(part);
    }
    m.sort();
    m
}

/// The archive holds exactly what Redis holds for `arts`: the record the
/// writer reads equals the archived one, and, against Redis itself, the
/// lifetime PV and the lifetime and hourly sketches byte for byte, with
/// every hourly bucket Redis keeps.
async fn assert_archived(archive: &Archive, store: &RedisStore, arts: &[&str]) {
    let k = store.keys();
    let keys = site_keys(store).await;
    for a in arts {
        let got = archive
            .article(&id(a))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{a} archived"));
        let want = article_records(store, &[id(a)], T0)
            .await
            .unwrap()
            .pop()
            .unwrap();
        assert_eq!(got, want, "{a}");
        let Record::Article {
            lifetime, hours, ..
        } = &got
        else {
            unreachable!()
        };
        let views = redis_get(store, &k.views(&id(a))).await.unwrap();
        assert_eq!(lifetime.pv.to_string().into_bytes(), views, "{a} pv");
        let sketch = redis_get(store, &k.uv(&id(a))).await.unwrap();
        assert_eq!(
            bytes_from_b64(&lifetime.uv).unwrap(),
            sketch,
            "{a} sketch bytes"
        );
        let mut in_redis: Vec<String> = keys
            .iter()
            .filter(|(_, rest)| rest.starts_with(&format!("bucket:h:{a}:")))
            .map(|(key, _)| key.clone())
            .collect();
        in_redis.sort();
        let mut archived: Vec<String> = hours.iter().map(|b| k.bucket_h(&id(a), b.at)).collect();
        archived.sort();
        assert_eq!(archived, in_redis, "{a}: every hourly bucket");
        for b in hours {
            if b.c.pv > 0 {
                let img = redis_get(store, &k.uv_h(&id(a), b.at)).await.unwrap();
                assert_eq!(bytes_from_b64(&b.c.uv).unwrap(), img, "{a} hour {}", b.at);
            }
        }
    }
}

async fn dirty(store: &RedisStore) -> Vec<String> {
    members(store, "archive:dirty").await
}

on_every_layout!(writer_archives_what_redis_holds);
async fn writer_archives_what_redis_holds(layout: Layout) -> Arc<RedisStore> {
    let (schema, archive, store) = writer_site(layout).await;
    let arts = ["w0", "w1", "w2", "w3", "w4"];
    // The writer task, as `serve` runs it, every second.
    let w = Arc::new(writer(&store, 1));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let task = tokio::spawn(w.clone().run(schema.options(), stop.clone()));
    store
        .ingest(counted_events(&arts, 300, 1), T0)
        .await
        .unwrap();
    store
        .vote(&id("w1"), 7u128.into(), VoteDirection::Up, T0)
        .await
        .unwrap();
    store
        .ingest(counted_events(&arts[..2], 50, 2), T0)
        .await
        .unwrap();
    let started = std::time::Instant::now();
    loop {
        let mut all = true;
        for a in arts {
            let want = article_records(&store, &[id(a)], T0).await.unwrap().pop();
            all &= archive.article(&id(a)).await.unwrap() == want;
        }
        if all && dirty(&store).await.is_empty() {
            break;
        }
        assert!(
            started.elapsed().as_secs() < 20,
            "the writer did not archive within 20 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    stop.store(true, Ordering::Relaxed);
    task.await.unwrap();
    assert_archived(&archive, &store, &arts).await;
    assert!(w.age_secs() <= 5, "age {}", w.age_secs());
    store
}

on_every_layout!(changed_twice_is_written_once_per_flush);
async fn changed_twice_is_written_once_per_flush(layout: Layout) -> Arc<RedisStore> {
    let (_schema, archive, store) = writer_site(layout).await;
    let w = writer(&store, 10);
    store
        .ingest(counted_events(&["a1", "a2"], 40, 1), T0)
        .await
        .unwrap();
    assert_eq!(dirty(&store).await, vec!["a1", "a2"]);
    assert_eq!(w.flush(&archive).await.unwrap(), Flushed::Articles(2));
    // a1 twice, a3 once within the next interval: two articles, a1 once.
    store
        .ingest(counted_events(&["a1"], 10, 2), T0)
        .await
        .unwrap();
    store
        .ingest(counted_events(&["a1", "a3"], 10, 3), T0)
        .await
        .unwrap();
    assert_eq!(dirty(&store).await, vec!["a1", "a3"]);
    assert_eq!(w.flush(&archive).await.unwrap(), Flushed::Articles(2));
    assert_archived(&archive, &store, &["a1", "a2", "a3"]).await;
    // Nothing changed: nothing written.
    assert_eq!(w.flush(&archive).await.unwrap(), Flushed::Articles(0));
    // A vote, a PUT, a delete alone mark their article too.
    store
        .vote(&id("a2"), 9u128.into(), VoteDirection::Up, T0)
        .await
        .unwrap();
    let meta = ArticleMeta {
        title: Some("Renamed".into()),
        published_at: T0 - HOUR,
        ..ArticleMeta::default()
    };
    store.put_article(id("a3"), meta, T0).await.unwrap();
    store.delete_article(&id("a1"), T0).await.unwrap();
    assert_eq!(dirty(&store).await, vec!["a1", "a2", "a3"]);
    assert_eq!(w.flush(&archive).await.unwrap(), Flushed::Articles(3));
    assert_archived(&archive, &store, &["a1", "a2", "a3"]).await;
    let Some(Record::Article { votes, .. }) = archive.article(&id("a2")).await.unwrap() else {
        panic!("a2")
    };
    assert_eq!(votes.ups, 1);
    store
}

on_every_layout!(failed_flush_loses_no_article);
async fn failed_flush_loses_no_article(layout: Layout) -> Arc<RedisStore> {
    let (schema, archive, store) = writer_site(layout).await;
    let w = writer(&store, 10);
    store
        .ingest(counted_events(&["f1", "f2"], 30, 1), T0)
        .await
        .unwrap();
    // The archive goes away: the flush fails, the ids go back.
    let gone = schema.archive().await;
    gone.close().await;
    assert!(w.flush(&gone).await.is_err());
    assert_eq!(dirty(&store).await, vec!["f1", "f2"]);
    assert_eq!(archive.article(&id("f1")).await.unwrap(), None);
    // A flush that died between taking the ids and writing them (the
    // process killed) leaves them taken; later changes join them.
    assert_eq!(store.archive_take().await.unwrap().len(), 2);
    assert!(dirty(&store).await.is_empty());
    store
        .ingest(counted_events(&["f3"], 5, 2), T0)
        .await
        .unwrap();
    // The archive is back: everything is written.
    assert_eq!(w.flush(&archive).await.unwrap(), Flushed::Articles(3));
    assert_archived(&archive, &store, &["f1", "f2", "f3"]).await;
    assert!(dirty(&store).await.is_empty());
    store
}

on_every_layout!(two_writers_never_both_flush);
async fn two_writers_never_both_flush(layout: Layout) -> Arc<RedisStore> {
    let (_schema, archive, store) = writer_site(layout).await;
    let (a, b) = (writer(&store, 10), writer(&store, 10));
    // Another node holds the lock: neither flushes, nothing is taken.
    store
        .ingest(counted_events(&["l1", "l2"], 20, 1), T0)
        .await
        .unwrap();
    assert!(store.archive_lock("other-node", 60_000).await.unwrap());
    assert_eq!(a.flush(&archive).await.unwrap(), Flushed::Locked);
    assert_eq!(b.flush(&archive).await.unwrap(), Flushed::Locked);
    assert_eq!(dirty(&store).await, vec!["l1", "l2"]);
    // Only the holder's token releases it.
    store.archive_unlock("not-the-holder").await.unwrap();
    assert_eq!(a.flush(&archive).await.unwrap(), Flushed::Locked);
    store.archive_unlock("other-node").await.unwrap();
    // Racing writers: every changed article is written by exactly one.
    let mut raced = 0;
    for round in 0..12u64 {
        let arts: Vec<String> = (0..1 + round % 4)
            .map(|i| format!("r{round}x{i}"))
            .collect();
        let refs: Vec<&str> = arts.iter().map(String::as_str).collect();
        store
            .ingest(counted_events(&refs, 12, 10 + round), T0)
            .await
            .unwrap();
        let (x, y) = tokio::join!(a.flush(&archive), b.flush(&archive));
        let n = |f: Flushed| match f {
            Flushed::Articles(n) => n,
            Flushed::Locked => 0,
        };
        let (x, y) = (x.unwrap(), y.unwrap());
        raced += u32::from(x == Flushed::Locked || y == Flushed::Locked);
        let written = n(x) + n(y);
        let expect = arts.len() as u64 + if round == 0 { 2 } else { 0 };
        assert_eq!(written, expect, "round {round}: {x:?} {y:?}");
        assert_archived(&archive, &store, &refs).await;
    }
    assert_archived(&archive, &store, &["l1", "l2"]).await;
    eprintln!("rounds where one writer found the lock held: {raced} of 12");
    store
}

one_and_cluster!(
    pipeline_flush_records_each_articles_position,
    Layout::One,
    Layout::Cluster
);

async fn pipeline_flush_records_each_articles_position(layout: Layout) {
    use hotrank::config::PipelineConfig;
    use hotrank::pipeline::{IngestPipeline, Role};
    let (_schema, archive, store) = writer_site(layout).await;
    let pipe = Arc::new(IngestPipeline::new(
        store.clone(),
        PipelineConfig {
            enabled: true,
            partitions: 2,
            batch: 25,
            ..PipelineConfig::default()
        },
    ));
    pipe.ensure_groups().await.unwrap();
    let arts = ["p0", "p1", "p2", "p3"];
    pipe.append(counted_events(&arts, 120, 1), T0)
        .await
        .unwrap();
    while !pipe.drained().await.unwrap() {
        pipe.step(Role::Filter, "f", false).await.unwrap();
        pipe.step(Role::Count, "c", false).await.unwrap();
    }
    let w = ArchiveWriter::new(
        store.clone(),
        Some(pipe.clone()),
        10,
        Arc::new(ManualClock::at(T0)),
    );
    let api = hotrank::pipeline::PipelineStore::new(pipe.clone());
    let age = || async {
        let s = hotrank::store::Queue::status(&api).await.unwrap();
        serde_json::json!(s)["archiveAgeSeconds"].clone()
    };
    assert_eq!(age().await, Value::Null, "no flush yet");
    assert_eq!(w.flush(&archive).await.unwrap(), Flushed::Articles(4));
    assert_archived(&archive, &store, &arts).await;
    let a = age().await.as_i64().expect("an age once flushed");
    assert!((0..=5).contains(&a), "{a}");
    // The position of each article: its partition, the filter group's
    // last delivered raw entry there, nothing in flight once drained.
    let mut c = store.con();
    for a in arts {
        let n = pipe.partition_of(&id(a));
        let groups: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(pipe.raw_key(n))
            .query_async(&mut c)
            .await
            .unwrap();
        let filter = groups
            .iter()
            .find(|g| g.get("name") == Some(&redis::Value::BulkString(b"filter".to_vec())))
            .unwrap();
        let Some(redis::Value::BulkString(last)) = filter.get("last-delivered-id") else {
            panic!("no last-delivered-id")
        };
        let last = String::from_utf8(last.clone()).unwrap();
        assert_ne!(last, "0-0", "partition {n} received entries");
        let pos: Option<String> =
            sqlx::query_scalar("SELECT source_position FROM articles WHERE id = $1")
                .bind(a)
                .fetch_one(archive.pool())
                .await
                .unwrap();
        let pos: Value = serde_json::from_str(&pos.expect("a position")).unwrap();
        assert_eq!(
            pos,
            serde_json::json!({"p": n, "upto": last, "pending": []}),
            "{a}"
        );
    }
}

/// Issue 31: `/api/stats` (real HTTP) of the direct Redis store with an
/// archive has `archiveAgeSeconds`, as the README promises (the pipeline
/// had it alone, under `pipeline`): null before the first flush, then
/// the age of the last one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_store_stats_show_the_archive_age() {
    let (schema, archive, store) = writer_site(Layout::One).await;
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let mut config = common::test_config(dir.path());
    config.store = hotrank::config::StoreKind::Redis;
    config.archive.url = pg_url();
    config.archive.schema = schema.name.clone();
    let s = common::TestServer::start_with_store(dir, config, store.clone(), T0).await;
    let (status, stats) = s.get("/api/stats").await;
    assert_eq!(status, reqwest::StatusCode::OK, "{stats}");
    assert_eq!(
        stats.get("archiveAgeSeconds"),
        Some(&Value::Null),
        "{stats}"
    );
    assert_eq!(s.view("d1", "v1").await, "counted");
    let w = writer(&store, 10);
    assert_eq!(w.flush(&archive).await.unwrap(), Flushed::Articles(1));
    let (_, stats) = s.get("/api/stats").await;
    let age = stats["archiveAgeSeconds"]
        .as_i64()
        .expect("an age once flushed");
    assert!((0..=5).contains(&age), "{stats}");
}

// ---- Eviction and restore (docs/design.md, "Eviction and restore") ----

use hotrank::model::Verdict;

/// Every key of the store's site that holds article state (not
/// rankings, the change log, cursors or the archive's own bookkeeping),
/// with its type and value: strings byte for byte, hashes and sets
/// sorted.
async fn article_keys(store: &RedisStore) -> Vec<(String, String)> {
    let mut c = store.con();
    let mut out = Vec::new();
    for (k, rest) in site_keys(store).await {
        if [
            "hot:", "changes", "cursor:", "archive:", "clock", "gate:", "stats:",
        ]
        .iter()
        .any(|p| rest.starts_with(p))
        {
            continue;
        }
        let t: String = redis::cmd("TYPE")
            .arg(&k)
            .query_async(&mut c)
            .await
            .unwrap();
        let v = match t.as_str() {
            "string" => {
                let b: Vec<u8> = c.get(&k).await.unwrap();
                format!("{b:?}")
            }
            "hash" => {
                let h: std::collections::BTreeMap<String, String> = c.hgetall(&k).await.unwrap();
                format!("{h:?}")
            }
            "set" => {
                let mut m: Vec<String> = c.smembers(&k).await.unwrap();
                m.sort();
                format!("{m:?}")
            }
            "zset" => {
                let m: Vec<(String, f64)> = c.zrange_withscores(&k, 0, -1).await.unwrap();
                format!("{m:?}")
            }
            other => other.to_string(),
        };
        out.push((k, format!("{t} {v}")));
    }
    out
}

async fn pfcount(store: &RedisStore, key: &str) -> i64 {
    let mut c = store.con();
    redis::cmd("PFCOUNT")
        .arg(key)
        .query_async(&mut c)
        .await
        .unwrap()
}

async fn evicted(store: &RedisStore) -> Vec<String> {
    members(store, "archive:evicted").await
}

/// A writer on `store` whose clock the test drives, evicting articles
/// unchanged for an hour.
fn evicting_writer(store: &Arc<RedisStore>, clock: &Arc<ManualClock>) -> ArchiveWriter {
    ArchiveWriter::new(store.clone(), None, 10, clock.clone()).evict_after(HOUR as u64)
}

/// The 27 ids `feed` writes to.
fn fed_ids() -> Vec<String> {
    let mut ids: Vec<String> = (0..ARTICLES + 3).map(|a| format!("art{a}")).collect();
    ids.sort();
    ids
}

on_every_layout!(eviction_then_restore_changes_nothing);
/// Twelve days of mixed traffic, archived, then evicted once idle: every
/// key an article had, byte for byte (sketches by GET), and every answer
/// (articles, hourly rows, rankings over every window, new lists, stats)
/// are the same after the restore as before the eviction.
async fn eviction_then_restore_changes_nothing(layout: Layout) -> Arc<RedisStore> {
    let (_schema, archive, store) = writer_site(layout).await;
    let k = store.keys().clone();
    let art3 = id("art3");
    feed(store.as_ref()).await;
    let clock = Arc::new(ManualClock::at(T0));
    let w = evicting_writer(&store, &clock);
    assert_eq!(w.flush(&archive).await.unwrap(), Flushed::Articles(27));
    assert!(evicted(&store).await.is_empty(), "not idle yet");

    let now = T0 + 2 * HOUR;
    clock.set(now);
    let want = answers(store.as_ref(), now, true).await;
    let keys_before = article_keys(&store).await;
    let sketch_before = redis_get(&store, &k.uv(&art3)).await.unwrap();
    let count_before = pfcount(&store, &k.uv(&art3)).await;
    assert_eq!(w.flush(&archive).await.unwrap(), Flushed::Articles(0));
    assert_eq!(evicted(&store).await, fed_ids(), "every idle article");
    // Their counters, sketches and buckets are gone; meta stays.
    let left = article_keys(&store).await;
    assert!(
        left.len() < keys_before.len(),
        "{} of {}",
        left.len(),
        keys_before.len()
    );
    let names = site_keys(&store).await;
    for gone in [
        "counter:views:",
        "counter:article:",
        "bucket:d:",
        "hll:uv:d:",
    ] {
        assert!(
            !names.iter().any(|(_, rest)| rest.starts_with(gone)),
            "{gone}* evicted"
        );
    }
    assert!(redis_get(&store, &k.uv(&art3)).await.is_none());
    assert!(redis_get(&store, &k.views(&art3)).await.is_none());
    assert!(left.iter().any(|(key, _)| key == &k.meta(&art3)));

    // Restored (as a reader would), the keys are what they were.
    let all: Vec<ArticleId> = fed_ids().iter().map(|a| id(a)).collect();
    assert_eq!(store.restore_if_evicted(&all, now).await.unwrap(), 27);
    assert!(evicted(&store).await.is_empty());
    let keys_after = article_keys(&store).await;
    assert_eq!(keys_before.len(), keys_after.len(), "key count");
    for (b, a) in keys_before.iter().zip(&keys_after) {
        assert_eq!(b, a);
    }
    assert_eq!(
        redis_get(&store, &k.uv(&art3)).await.unwrap(),
        sketch_before,
        "sketch bytes"
    );
    assert_eq!(pfcount(&store, &k.uv(&art3)).await, count_before);
    assert_same(
        &want,
        &answers(store.as_ref(), now, true).await,
        "after restore",
    );

    // Evicted again, the readers restore by themselves: the same answers.
    clock.set(now + 2 * HOUR);
    w.flush(&archive).await.unwrap();
    assert_eq!(evicted(&store).await, fed_ids());
    assert_same(
        &want,
        &answers(store.as_ref(), now, true).await,
        "restored by readers",
    );
    assert_eq!(
        evicted(&store).await,
        ["art7"],
        "every article was read but the deleted one"
    );
    archive.close().await;
    store
}

on_every_layout!(changed_or_unarchived_articles_stay);
/// An article changed after its last flush is never evicted, nor one the
/// archive never took: only archived, unchanged state leaves Redis.
async fn changed_or_unarchived_articles_stay(layout: Layout) -> Arc<RedisStore> {
    let (_schema, archive, store) = writer_site(layout).await;
    store
        .ingest(counted_events(&["d0", "d1"], 100, 1), T0)
        .await
        .unwrap();
    let clock = Arc::new(ManualClock::at(T0));
    let w = evicting_writer(&store, &clock);
    assert_eq!(w.flush(&archive).await.unwrap(), Flushed::Articles(2));
    // d1 changes after the flush; d2 is written but never archived.
    let later = T0 + 2 * HOUR;
    store
        .ingest(counted_events(&["d1"], 3, 2), later - 10)
        .await
        .unwrap();
    store
        .ingest(counted_events(&["d2"], 5, 3), T0)
        .await
        .unwrap();
    let _: () = store
        .con()
        .srem(store.keys().ledger(&id("d2"), "archive:dirty"), "d2")
        .await
        .unwrap();
    assert_eq!(dirty(&store).await, ["d1"]);
    let d1_before = article_keys(&store).await;
    // The eviction step itself, as a round reaches it with d1 changed.
    let ids = [id("d0"), id("d1"), id("d2")];
    let records = store.eviction_records(&ids, later).await.unwrap();
    assert_eq!(records.len(), 3);
    let gone = store.evict(&records, later - HOUR).await.unwrap();
    assert_eq!(gone, [id("d0")], "only the unchanged, archived article");
    assert_eq!(evicted(&store).await, ["d0"]);
    let kept: Vec<_> = d1_before
        .into_iter()
        .filter(|(k, _)| !k.contains(":d0"))
        .collect();
    let now_keys: Vec<_> = article_keys(&store)
        .await
        .into_iter()
        .filter(|(k, _)| !k.contains(":d0"))
        .collect();
    assert_eq!(kept, now_keys, "d1 and d2 untouched");
    // A round of the writer: d1 is archived anew (its clock restarts), d2
    // was never archived: both stay.
    clock.set(later);
    w.flush(&archive).await.unwrap();
    assert_eq!(evicted(&store).await, ["d0"]);
    assert_archived(&archive, &store, &["d1"]).await;
    archive.close().await;
    store
}

/// Views from distinct visitors, one ip each, `n` per article.
fn views(arts: &[&str], n: u64, salt: u64, now: Timestamp) -> Vec<Event> {
    (0..n * arts.len() as u64)
        .map(|i| Event {
            ip: salt * 1_000_000 + i,
            arrival_ms: now * 1000 + i as i64,
            ..Event::view(
                id(arts[i as usize % arts.len()]),
                u128::from(salt * 1_000_000 + i),
                now - 60,
            )
        })
        .collect()
}

/// Sites laid out as `layout` says whose articles were all archived then
/// evicted: the store with its archive, and the lifetime PV of each
/// article before.
async fn evicted_site(
    arts: &[&str],
    layout: Layout,
) -> (Schema, Archive, Arc<RedisStore>, Vec<u64>, Timestamp) {
    let (schema, archive, store) = writer_site(layout).await;
    store
        .ingest(counted_events(arts, 200, 1), T0)
        .await
        .unwrap();
    let clock = Arc::new(ManualClock::at(T0));
    let w = evicting_writer(&store, &clock);
    w.flush(&archive).await.unwrap();
    let mut pv = Vec::new();
    for a in arts {
        let v = store.article(&id(a), T0).await.unwrap().unwrap();
        pv.push(v.lifetime.pv);
    }
    let now = T0 + 2 * HOUR;
    clock.set(now);
    w.flush(&archive).await.unwrap();
    let mut want: Vec<String> = arts.iter().map(|a| a.to_string()).collect();
    want.sort();
    assert_eq!(evicted(&store).await, want);
    (schema, archive, store, pv, now)
}

on_every_layout!(concurrent_events_restore_exactly_once);
/// Events for evicted articles from several tasks on two nodes at once:
/// each article is restored once, and every view counts exactly once
/// (lifetime PV and UV against the oracle). Over a split site each
/// shard's count stage finds the tombstones and the article is restored
/// before it counts.
async fn concurrent_events_restore_exactly_once(layout: Layout) -> Arc<RedisStore> {
    let arts = ["c0", "c1", "c2"];
    let (schema, archive, store, pv, now) = evicted_site(&arts, layout).await;
    let p = store.keys().prefix.clone();
    let uv_before: Vec<i64> = {
        let mut v = Vec::new();
        for a in arts {
            let r = archive.article(&id(a)).await.unwrap().unwrap();
            let Record::Article { lifetime, .. } = r else {
                unreachable!()
            };
            let scratch = format!("{p}scratch:{a}");
            let _: () = store
                .con()
                .set(&scratch, bytes_from_b64(&lifetime.uv).unwrap())
                .await
                .unwrap();
            v.push(pfcount(&store, &scratch).await);
        }
        v
    };
    // A second node on the same prefix, with its own archive pool.
    let other = Arc::new(
        RedisStore::connect(
            RedisOptions {
                prefix: store.options().prefix.clone(),
                ..site_options(layout)
            },
            StoreSettings::default(),
        )
        .unwrap(),
    );
    other.set_archive(schema.archive().await);
    let (tasks, batches, per) = (8u64, 10u64, 4u64);
    let mut handles = Vec::new();
    for t in 0..tasks {
        let node = if t % 2 == 0 {
            store.clone()
        } else {
            other.clone()
        };
        handles.push(tokio::spawn(async move {
            for b in 0..batches {
                let ev = views(&arts, per, 100 + t * batches + b, now);
                let out = node.ingest(ev, now).await.unwrap();
                assert!(
                    out.iter()
                        .all(|o| o.as_ref().unwrap().verdict == Verdict::Counted)
                );
                if b % 3 == 0 {
                    // Readers racing the writers.
                    node.article(&id(arts[b as usize % 3]), now).await.unwrap();
                }
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    assert!(evicted(&store).await.is_empty());
    let sent = tasks * batches * per;
    for (i, a) in arts.iter().enumerate() {
        let v = store.article(&id(a), now).await.unwrap().unwrap();
        assert_eq!(v.lifetime.pv, pv[i] + sent, "{a}: every view once");
        // The oracle's UV: the archived sketch plus every new visitor.
        let scratch = format!("{p}scratch:{a}");
        let mut c = store.con();
        for t in 0..tasks {
            for b in 0..batches {
                for e in views(&arts, per, 100 + t * batches + b, now) {
                    if e.article.as_str() == *a {
                        let _: () = redis::cmd("PFADD")
                            .arg(&scratch)
                            .arg(&e.visitor_element()[..])
                            .query_async(&mut c)
                            .await
                            .unwrap();
                    }
                }
            }
        }
        let want = pfcount(&store, &scratch).await;
        assert!(want > uv_before[i]);
        assert_eq!(v.lifetime.uv as i64, want, "{a}: UV");
        assert_eq!(pfcount(&store, &store.keys().uv(&id(a))).await, want);
    }
    assert_eq!(other.crossed_slots(), Vec::<String>::new(), "slot log");
    archive.close().await;
    store
}

// Pipeline mode: events for evicted articles go through the filter and
// count workers, which restore them and count every event once.
one_and_cluster!(
    pipeline_restores_evicted_articles,
    Layout::One,
    Layout::Cluster
);

async fn pipeline_restores_evicted_articles(layout: Layout) {
    use hotrank::config::PipelineConfig;
    use hotrank::pipeline::{IngestPipeline, Role};
    let arts = ["q0", "q1"];
    let (_schema, archive, store, pv, now) = evicted_site(&arts, layout).await;
    let pipe = Arc::new(IngestPipeline::new(
        store.clone(),
        PipelineConfig {
            enabled: true,
            partitions: 2,
            batch: 25,
            ..PipelineConfig::default()
        },
    ));
    pipe.ensure_groups().await.unwrap();
    pipe.append(views(&arts, 60, 7, now), now).await.unwrap();
    while !pipe.drained().await.unwrap() {
        pipe.step(Role::Filter, "f", false).await.unwrap();
        pipe.step(Role::Count, "c", false).await.unwrap();
    }
    assert!(evicted(&store).await.is_empty());
    for (i, a) in arts.iter().enumerate() {
        let v = store.article(&id(a), now).await.unwrap().unwrap();
        assert_eq!(v.lifetime.pv, pv[i] + 60, "{a}");
    }
    // Rankings over all time see them too.
    let page = store
        .hot(&HotQuery::top(ModelKind::Gravity, RangeSpec::All, 10), now)
        .await
        .unwrap();
    assert_eq!(page.items.len(), 2);
    archive.close().await;
}
