//! Data directories written by earlier builds open with identical answers.
//!
//! `tests/fixtures/<name>/data/` is a small data directory (snapshots and
//! log segments) and `answers.json` what the API answered on it when it was
//! written. Every later build must open it and answer the same: a change of
//! the on-disk layout without a version bump and a migration
//! (`store::embedded::persist`) fails here.
//!
//! - `embedded-v1`, `embedded-v2`, …: written by the build of that payload
//!   version, a snapshot plus log records after it. A build writes its own
//!   version's fixture with `HOTRANK_REGENERATE_FIXTURES=1 cargo test
//!   --test formats` — only when a new format version is introduced, as a
//!   *new* fixture next to the old ones (v1 holds the dedupe entries inside
//!   the state, v2 in a section of their own).
//! - `main-v0` (if present): written by the build before format versions
//!   were recorded (payload version 0), by `tests/fixtures/make-main-v0.sh`
//!   with that build's binary; its `export.jsonl` is that build's own
//!   `hotrank export` of the directory, compared record for record.
//!
//! And dumps: `hotrank export` carries the site's identity key, so a site
//! moved by export and import recognises its readers (on either store),
//! and a version 1 dump, which has none, still imports.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use common::{T0, TestServer, test_config};
use hotrank::model::{ArticleId, ArticleMeta, Event, EventType, VoteDirection};
use hotrank::store::Store;
use hotrank::store::embedded::{Durability, EmbeddedStore};

/// Where the generated data is "now" when answers are taken.
const NOW: i64 = T0 + 2 * 3600;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The API calls whose answers must not change.
const PATHS: &[&str] = &[
    "/api/stats?hours=48",
    "/api/hot?range=24h&limit=100",
    "/api/hot?range=1h&limit=100&explain=true",
    "/api/hot?range=all&limit=100",
    "/api/hot?range=24h&category=tech&limit=100",
    "/api/hot?range=24h&perAuthor=1&limit=100",
    "/api/new?limit=100",
    "/api/articles/a0",
    "/api/articles/a3",
    "/api/articles/a7",
    "/api/articles/gone",
];

fn strip_cursors(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("cursor");
            m.remove("nextCursor");
            m.values_mut().for_each(strip_cursors);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_cursors),
        _ => {}
    }
}

/// Copies `data` into a temp dir, serves it at `NOW` and collects the answers.
async fn answers(data: &Path) -> Value {
    let tmp = Arc::new(tempfile::tempdir().unwrap());
    copy_dir(data, &tmp.path().join("data"));
    let mut config = test_config(&tmp.path().join("data"));
    config.gate.visitor_limit_per_minute = 0;
    config.gate.ip_limit_per_minute = 0;
    let s = TestServer::start_in(Arc::clone(&tmp), config, NOW).await;
    let mut out = serde_json::Map::new();
    for path in PATHS {
        let (status, mut body) = s.get(path).await;
        strip_cursors(&mut body);
        out.insert(
            path.to_string(),
            json!({"status": status.as_u16(), "body": body}),
        );
    }
    s.stop().await;
    Value::Object(out)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn meta(i: u64) -> ArticleMeta {
    ArticleMeta {
        title: Some(format!("Article {i}")),
        url: Some(format!("https://example.com/a{i}")),
        author: Some(format!("author{}", i % 3)),
        category: Some(if i.is_multiple_of(2) { "tech" } else { "life" }.to_string()),
        kind: Some("post".into()),
        groups: vec![format!("g{}", i % 2)],
        published_at: T0 - 3600 * (i as i64 % 5),
        summary: None,
        cover: None,
    }
}

fn event(kind: EventType, article: &str, n: u64, ts: i64) -> Event {
    Event {
        kind,
        ip: n,
        event_id: Some(u128::from(n) + 1000),
        seconds: if kind == EventType::Dwell { 30 } else { 0 },
        // Some with a network block (version 4), some unknown.
        net: n % 7,
        ..Event::view(
            ArticleId::parse(article).unwrap(),
            u128::from(n % 40) + 1,
            ts,
        )
    }
}

/// Writes the `embedded-v{STATE_VERSION}` fixture with this build: a snapshot, then log
/// records after it (the store is dropped without its shutdown snapshot).
async fn generate(data: &Path) {
    let _ = std::fs::remove_dir_all(data);
    let mut config = test_config(data);
    config.gate.visitor_limit_per_minute = 0;
    config.gate.ip_limit_per_minute = 0;
    // The review's network evidence is in the snapshot (version 4).
    config.review.mode = hotrank::config::ReviewMode::Suspicious;
    let settings = hotrank::store::StoreSettings::from_config(&config);
    let (store, _) = EmbeddedStore::open(Durability::from_config(&config), settings).unwrap();
    for i in 0..10 {
        let id = ArticleId::parse(&format!("a{i}")).unwrap();
        store.put_article(id, meta(i), T0).await.unwrap();
    }
    let kinds = [
        EventType::View,
        EventType::View,
        EventType::Dwell,
        EventType::Like,
        EventType::Share,
    ];
    let mut n = 0;
    for round in 0..2 {
        for i in 0..200u64 {
            n += 1;
            let article = format!("a{}", (i * i + round) % 10);
            let ts = T0 + 60 * (i as i64 % 90);
            let ev = event(kinds[(i % 5) as usize], &article, n, ts);
            store.ingest(vec![ev], ts).await.unwrap();
        }
        for u in 0..6u128 {
            let dir = if u % 3 == 0 {
                VoteDirection::Down
            } else {
                VoteDirection::Up
            };
            let id = ArticleId::parse(&format!("a{}", u as u64 + round)).unwrap();
            store
                .vote(&id, (u + 10 * u128::from(round)).into(), dir, T0 + 600)
                .await
                .unwrap();
        }
        if round == 0 {
            let gone = ArticleId::parse("gone").unwrap();
            store.put_article(gone.clone(), meta(11), T0).await.unwrap();
            store.delete_article(&gone, T0 + 60).await.unwrap();
            store.snapshot().await.unwrap();
        }
    }
    drop(store);
    let _ = std::fs::remove_file(data.join("lock"));
}

/// `got` without the object fields `want` lacks, at any depth.
fn only_fields_of(got: &mut Value, want: &Value) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            g.retain(|k, _| w.contains_key(k));
            for (k, v) in g.iter_mut() {
                only_fields_of(v, &w[k]);
            }
        }
        (Value::Array(g), Value::Array(w)) => {
            for (g, w) in g.iter_mut().zip(w) {
                only_fields_of(g, w);
            }
        }
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_dirs_written_by_earlier_builds_answer_the_same() {
    let own = fixtures().join(format!(
        "embedded-v{}",
        hotrank::store::embedded::persist::STATE_VERSION
    ));
    if std::env::var_os("HOTRANK_REGENERATE_FIXTURES").is_some() {
        generate(&own.join("data")).await;
        let got = answers(&own.join("data")).await;
        std::fs::write(
            own.join("answers.json"),
            serde_json::to_string_pretty(&got).unwrap() + "\n",
        )
        .unwrap();
    }
    let mut checked = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let dir = entry.unwrap().path();
        let expected = dir.join("answers.json");
        if !expected.exists() {
            continue;
        }
        let want: Value = serde_json::from_slice(&std::fs::read(&expected).unwrap()).unwrap();
        let got = answers(&dir.join("data")).await;
        for path in PATHS {
            // Fields added to an answer since the fixture was written are
            // not compared (answers only grow).
            let mut got = got[path].clone();
            only_fields_of(&mut got, &want[path]);
            assert_eq!(got, want[path], "{}: {path}", dir.display());
        }
        // The answers are not empty: the fixture holds real data.
        assert!(
            got["/api/hot?range=24h&limit=100"]["body"]["items"]
                .as_array()
                .unwrap()
                .len()
                >= 5
        );
        checked += 1;
    }
    assert!(checked >= 1, "no fixture found in {}", fixtures().display());
}

#[test]
fn a_data_dir_written_before_versions_exports_what_that_build_exported() {
    let dir = fixtures().join("main-v0");
    if !dir.exists() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&dir.join("data"), &tmp.path().join("data"));
    // The settings the fixture was written and exported with.
    let mut config = test_config(&tmp.path().join("data"));
    config.gate.visitor_limit_per_minute = 0;
    config.gate.ip_limit_per_minute = 0;
    let (store, _) = EmbeddedStore::open(
        Durability::from_config(&config),
        hotrank::store::StoreSettings::from_config(&config),
    )
    .unwrap();
    let mut got: Vec<String> = store
        .export()
        .into_iter()
        .map(|r| serde_json::to_string(&r).unwrap())
        .collect();
    let text = std::fs::read_to_string(dir.join("export.jsonl")).unwrap();
    let mut want: Vec<String> = text
        .lines()
        .filter(|l| !l.contains("\"header\""))
        .map(|l| serde_json::to_string(&serde_json::from_str::<Value>(l).unwrap()).unwrap())
        .collect();
    let mut got_norm: Vec<String> = got
        .drain(..)
        .map(|l| serde_json::to_string(&serde_json::from_str::<Value>(&l).unwrap()).unwrap())
        .collect();
    got_norm.sort();
    want.sort();
    assert!(want.len() > 10, "the fixture holds real data");
    // Since "Safe on the open internet", an eventId is remembered only for
    // an event that counted: replaying that build's log forgets the ids of
    // its refused events. Everything else reads back as it was.
    let missing: Vec<&String> = (want.iter())
        .filter(|l| !got_norm.contains(l) && !l.contains("\"type\":\"event_id\""))
        .collect();
    let extra: Vec<&String> = got_norm.iter().filter(|l| !want.contains(l)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{} records differ; not read back: {:?}; read but not exported then: {:?}",
        missing.len() + extra.len(),
        &missing[..missing.len().min(3)],
        &extra[..extra.len().min(3)]
    );
}

/// A view's verdict, and the article's PV and UV after it.
async fn view(s: &TestServer, article: &str, visitor: &str) -> (String, u64, u64) {
    let (_, v) = s
        .post(
            "/api/views",
            &json!({"articleId": article, "visitorId": visitor}),
        )
        .await;
    let verdict = v["verdict"].as_str().unwrap_or_default().to_string();
    (
        verdict,
        v["pv"].as_u64().unwrap(),
        v["uv"].as_u64().unwrap(),
    )
}

/// A data dir with an identity key of its own (not the test servers'
/// default), so that a moved site that lost it would hash its readers
/// otherwise.
fn site_dir(key: &str) -> Arc<tempfile::TempDir> {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    std::fs::write(dir.path().join("identity.key"), key).unwrap();
    dir
}

/// `hotrank export`, then `hotrank import` into a new data dir (and on
/// Redis a new prefix): a reader inside the 15-minute window of their view
/// before the move is a duplicate after it, on the embedded store and on
/// Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_site_recognises_its_readers() {
    let redis = common::redis::RedisServer::shared();
    let work = tempfile::tempdir().unwrap();
    // The tools judge ages by the system clock (a Redis import expires
    // buckets past retention): the sites run at the real time too.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    for on_redis in [false, true] {
        let from = site_dir("00112233445566778899aabbccddeeff");
        let (from_prefix, to_prefix) = (
            common::redis::unique_prefix(),
            common::redis::unique_prefix(),
        );
        let store_args = |prefix: &str| -> Vec<String> {
            if on_redis {
                [
                    "--store",
                    "redis",
                    "--redis-url",
                    &redis.url(),
                    "--redis-prefix",
                    prefix,
                ]
                .map(str::to_string)
                .to_vec()
            } else {
                Vec::new()
            }
        };
        let serve = |dir: Arc<tempfile::TempDir>, prefix: String, now: i64| async move {
            if on_redis {
                let s =
                    TestServer::start_redis(dir, &redis.url(), |c| c.redis.prefix = prefix).await;
                s.clock.set(now);
                s
            } else {
                let config = test_config(dir.path());
                TestServer::start_in(dir, config, now).await
            }
        };
        let s = serve(from.clone(), from_prefix.clone(), now).await;
        assert_eq!(view(&s, "moved", "reader").await, ("counted".into(), 1, 1));
        s.stop().await;
        let dump = work.path().join(format!("dump-{on_redis}.jsonl"));
        let cli = |cmd: &str, dir: &Path, prefix: &str| {
            let mut args: Vec<std::ffi::OsString> = vec![cmd.into(), "--data-dir".into()];
            args.push(dir.into());
            args.extend(["--file".into(), dump.clone().into_os_string()]);
            args.extend(store_args(prefix).into_iter().map(Into::into));
            let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
            common::run_hotrank(&args)
        };
        let (ok, err) = cli("export", from.path(), &from_prefix);
        assert!(ok, "export: {err}");
        // Into a data dir with another identity key: refused, nothing
        // imported, and the message says what to copy.
        let other = site_dir("ffeeddccbbaa99887766554433221100");
        let (ok, err) = cli("import", other.path(), &to_prefix);
        assert!(!ok && err.contains("identity.key"), "{err}");
        // Into a new data dir: the site's key comes along.
        let to = Arc::new(tempfile::tempdir().unwrap());
        let (ok, err) = cli("import", to.path(), &to_prefix);
        assert!(ok, "import: {err}");
        let s = serve(to.clone(), to_prefix.clone(), now + 60).await;
        assert_eq!(
            view(&s, "moved", "reader").await,
            ("duplicate".into(), 1, 1),
            "on_redis = {on_redis}"
        );
        assert_eq!(
            view(&s, "moved", "newcomer").await,
            ("counted".into(), 2, 2)
        );
        s.stop().await;
    }
}

/// A version 1 dump (no identity key) still imports, with a warning that
/// says which file to copy.
#[test]
fn a_version_1_dump_imports_with_a_warning() {
    let dump = fixtures().join("main-v0/export.jsonl");
    if !dump.exists() {
        return;
    }
    let to = tempfile::tempdir().unwrap();
    let (ok, err) = common::run_hotrank(&[
        "import".as_ref(),
        "--data-dir".as_ref(),
        to.path().as_os_str(),
        "--file".as_ref(),
        dump.as_os_str(),
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains("no identity key") && err.contains("identity.key"),
        "{err}"
    );
    assert!(!to.path().join("identity.key").exists());
}

/// A version 3 data dir (its events logged before they carried a network
/// block) opened under `[review] mode = "suspicious"`: every event's block
/// reads as unknown, so no article has network evidence and none is held
/// (`max_held_share = 1` leaves the other rule out): the hot list is the
/// one the fixture answered, and the review queue is empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_3_data_dir_never_trips_the_network_rule() {
    let dir = fixtures().join("embedded-v3");
    let want: Value =
        serde_json::from_slice(&std::fs::read(dir.join("answers.json")).unwrap()).unwrap();
    let tmp = Arc::new(tempfile::tempdir().unwrap());
    copy_dir(&dir.join("data"), &tmp.path().join("data"));
    let mut config = test_config(&tmp.path().join("data"));
    config.gate.visitor_limit_per_minute = 0;
    config.gate.ip_limit_per_minute = 0;
    config.review.mode = hotrank::config::ReviewMode::Suspicious;
    config.review.window_hours = 24;
    config.review.min_visitors = 1;
    config.review.max_held_share = 1.0;
    let s = TestServer::start_in(Arc::clone(&tmp), config, NOW).await;
    let path = "/api/hot?range=24h&limit=100";
    let (status, mut body) = s.get(path).await;
    assert_eq!(status, 200);
    strip_cursors(&mut body);
    let mut got = json!({"status": 200, "body": body});
    only_fields_of(&mut got, &want[path]);
    assert_eq!(got, want[path], "nothing held");
    let resp = s
        .client
        .get(s.url("/api/review?status=all"))
        .bearer_auth(common::ADMIN)
        .send()
        .await
        .unwrap();
    let queue: Value = resp.json().await.unwrap();
    assert_eq!(queue["mode"], "suspicious");
    assert_eq!(queue["items"], json!([]), "{queue}");
    s.stop().await;
}
