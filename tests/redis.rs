//! The Redis store beyond the contract suite: several API nodes on one
//! Redis, the seed 000 keys as other programs read them, the same answers
//! as the embedded store, export/import both ways, and a Redis that dies
//! under load. Every redis-server here is the test's own.

mod common;

use hotrank::store::Lifecycle;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use reqwest::StatusCode;
use serde_json::{Value, json};

use hotrank::model::{
    ArticleId, ArticleMeta, Event, EventType, HotQuery, RangeSpec, Timestamp, Verdict,
    VoteDirection, VoteOutcome,
};
use hotrank::score::ModelKind;
use hotrank::store::dump::{DUMP_VERSION, Record};
use hotrank::store::embedded::{Durability, EmbeddedStore};
use hotrank::store::redis::{RedisOptions, RedisStore, dump_redis, load_redis};
use hotrank::store::wal::FsyncPolicy;
use hotrank::store::{Store, StoreSettings};

use common::redis::{Backend, RedisCluster, RedisServer};
use common::{T0, TestServer};

fn id(s: &str) -> ArticleId {
    ArticleId::parse(s).expect("valid id")
}

fn redis_store(b: &Backend, prefix: &str, s: StoreSettings) -> RedisStore {
    RedisStore::connect(b.options(prefix), s).expect("redis store")
}

/// A deterministic mixed stream over a few hours: views (with repeats
/// inside and outside the dedupe window), other kinds, bots, eventIds and
/// their retries, several publication times and categories.
fn stream() -> (Vec<(ArticleId, ArticleMeta)>, Vec<Vec<Event>>) {
    let mut metas = Vec::new();
    for a in 0..12 {
        metas.push((
            id(&format!("art{a}")),
            ArticleMeta {
                title: Some(format!("Article {a}")),
                author: Some(format!("au{}", a % 4)),
                category: Some(if a % 3 == 0 { "tech" } else { "life" }.into()),
                groups: if a % 2 == 0 {
                    vec!["even".into()]
                } else {
                    vec![]
                },
                published_at: T0 - 3600 * (a as i64 * 5),
                ..ArticleMeta::default()
            },
        ));
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut batches = Vec::new();
    for b in 0..30 {
        let ts = T0 - 5 * 3600 + b * 700;
        let mut events = Vec::new();
        for e in 0..40u64 {
            let kind = match rnd(10) {
                0 => EventType::Like,
                1 => EventType::Dwell,
                2 => EventType::Comment,
                _ => EventType::View,
            };
            // Articles 12.. are registered by their first event.
            let article = id(&format!("art{}", rnd(14)));
            let visitor = u128::from(rnd(60));
            events.push(Event {
                kind,
                ip: rnd(5),
                event_id: (rnd(4) == 0).then(|| u128::from(rnd(200))),
                seconds: if kind == EventType::Dwell { 30 } else { 0 },
                bot: rnd(25) == 0,
                arrival_ms: (ts + 60) * 1000 + e as i64,
                ..Event::view(article, visitor, ts + (e as i64) % 50)
            });
        }
        batches.push(events);
    }
    (metas, batches)
}

async fn feed(store: &dyn Store, metas: &[(ArticleId, ArticleMeta)], batches: &[Vec<Event>]) {
    for (i, m) in metas {
        store
            .put_article(i.clone(), m.clone(), T0)
            .await
            .expect("put");
    }
    for b in batches {
        let now = b[0].arrival_ms / 1000;
        store.ingest(b.clone(), now).await.expect("ingest");
    }
    store.delete_article(&id("art5"), T0).await.expect("delete");
}

fn query(range: RangeSpec, limit: usize) -> HotQuery {
    HotQuery {
        explain: true,
        ..HotQuery::top(ModelKind::Gravity, range, limit)
    }
}

/// Everything a reader can see, as comparable text.
async fn answers(store: &dyn Store, now: Timestamp) -> Vec<String> {
    let mut out = Vec::new();
    let mut qs = Vec::new();
    for range in [
        RangeSpec::Hours(1),
        RangeSpec::Hours(3),
        RangeSpec::Hours(72),
        RangeSpec::All,
    ] {
        qs.push(query(range, 20));
    }
    let mut q = query(RangeSpec::Hours(24), 5);
    q.category = Some("tech".into());
    qs.push(q);
    let mut q = query(RangeSpec::Hours(24), 20);
    q.per_author = Some(1);
    q.group = Some("even".into());
    qs.push(q);
    for q in &qs {
        let page = store.hot(q, now).await.expect("hot");
        out.push(format!("{:?} {:?}", q.range, page.generated_at));
        for it in page.items {
            out.push(format!(
                "{} {} {} {:?} {:?}",
                it.rank, it.id, it.score, it.counters, it.explain
            ));
        }
        let page = store.newest(q, now).await.expect("new");
        for it in page.items {
            out.push(format!(
                "new {} {} {} {:?}",
                it.rank, it.id, it.score, it.counters
            ));
        }
    }
    for a in 0..14 {
        let v = store
            .article(&id(&format!("art{a}")), now)
            .await
            .expect("article");
        out.push(format!("{v:?}"));
        let h = store
            .hourly(&id(&format!("art{a}")), now, 12)
            .await
            .expect("hourly");
        out.push(format!("{h:?}"));
    }
    out.push(format!("{:?}", store.stats(now, 24).await.expect("stats")));
    out
}

fn embedded(dir: &std::path::Path, s: StoreSettings) -> EmbeddedStore {
    let d = Durability {
        dir: dir.to_path_buf(),
        fsync: FsyncPolicy::Interval(std::time::Duration::from_millis(5)),
        segment_bytes: 1 << 20,
        snapshot_interval_secs: 3600,
        snapshot_every_records: 1 << 40,
        storage: hotrank::store::storage::Disk::shared(),
    };
    EmbeddedStore::open(d, s).expect("open").0
}

fn assert_same(a: &[String], b: &[String], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: answer count");
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x, y, "{what}");
    }
}

/// Both stores give the same verdicts and the same answers (items, scores,
/// counters, stats, hourly rows) for the same event stream.
#[tokio::test]
async fn same_answers_as_embedded() {
    same_answers(&Backend::One(RedisServer::start()), "").await;
}

async fn same_answers(server: &Backend, prefix: &str) {
    let (metas, batches) = stream();
    let keys = server.keys(prefix);
    let r = redis_store(server, prefix, StoreSettings::default());
    let dir = tempfile::tempdir().unwrap();
    let e = embedded(dir.path(), StoreSettings::default());
    for (i, m) in &metas {
        e.put_article(i.clone(), m.clone(), T0).await.unwrap();
        r.put_article(i.clone(), m.clone(), T0).await.unwrap();
    }
    for b in &batches {
        let now = b[0].arrival_ms / 1000;
        let ve = e.ingest(b.clone(), now).await.unwrap();
        let vr = r.ingest(b.clone(), now).await.unwrap();
        assert_eq!(ve, vr, "verdicts");
    }
    // The stream exercises every verdict. (Replayed at each batch's own
    // arrival time: Redis keeps gate state in slots of the arrival clock.)
    let all: Vec<Verdict> = {
        let mut v = Vec::new();
        for b in &batches {
            for o in r.ingest(b.clone(), b[0].arrival_ms / 1000).await.unwrap() {
                v.push(o.unwrap().verdict);
            }
        }
        v
    };
    for b in &batches {
        e.ingest(b.clone(), b[0].arrival_ms / 1000).await.unwrap();
    }
    for want in [Verdict::Replayed, Verdict::Bot, Verdict::Duplicate] {
        assert!(all.contains(&want), "{want:?}");
    }
    for s in [&e as &dyn Store, &r] {
        s.delete_article(&id("art5"), T0).await.unwrap();
    }
    // Redis holds the very sketch bytes the embedded store holds.
    let mut con = r.con();
    for rec in e.export() {
        if let Record::Article { id, lifetime, .. } = rec {
            let bytes: Vec<u8> = con.get(keys.uv(&id)).await.unwrap();
            assert_eq!(
                hotrank::store::dump::bytes_from_b64(&lifetime.uv).unwrap(),
                bytes,
                "sketch of {id}"
            );
        }
    }
    // Queries come after the last event (T0 + 2360), as they do live.
    // A second node (its own caches) sees the same; collecting the change
    // log between rounds keeps every answer exact.
    let r2 = redis_store(server, prefix, StoreSettings::default());
    for now in [T0 + 3000, T0 + 5000, T0 + 9000] {
        let a = answers(&e, now).await;
        let b = answers(&r, now).await;
        assert_same(&a, &b, &format!("at {now}"));
        r.maintain(now).await.expect("maintain");
        let c = answers(&r2, now).await;
        assert_same(&a, &c, &format!("second node at {now}"));
    }
    let floor: i64 = con.get(keys.shard(0).changes_floor()).await.unwrap();
    assert!(floor > 0, "the change log was collected");
}

/// Two API nodes on one Redis: the dedupe window, rate limits, rankings,
/// counts and cursors are the same whichever node is asked, and the same
/// as one embedded node sent the same requests.
#[tokio::test]
async fn two_nodes_share_everything() {
    two_nodes(&Backend::One(RedisServer::start()), "site1:", 1).await;
}

/// The same with the site over 3 shards, on one Redis.
#[tokio::test]
async fn two_nodes_share_everything_with_shards() {
    two_nodes(&Backend::One(RedisServer::start()), "site1:", 3).await;
}

/// `got` equals the oracle's answer `want` in every field both stores
/// answer (`/api/stats` has store-specific ones).
fn assert_same_as_oracle(want: &Value, got: &Value, path: &str) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) if path.starts_with("/api/stats") => {
            for (k, v) in w {
                if let Some(gv) = g.get(k) {
                    assert_eq!(v, gv, "{path}: {k} against the oracle");
                }
            }
        }
        _ => assert_eq!(want, got, "{path} against the oracle"),
    }
}

/// `node`'s verdict for one view, checked against the oracle's.
async fn view(node: &TestServer, oracle: &TestServer, article: &str, visitor: &str) -> String {
    let got = node.view(article, visitor).await;
    assert_eq!(oracle.view(article, visitor).await, got, "oracle verdict");
    got
}

async fn two_nodes(server: &Backend, prefix: &str, shards: u32) {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let cluster = server.is_cluster();
    let gate = |c: &mut hotrank::config::Config| c.gate.visitor_limit_per_minute = 5;
    let edit = |c: &mut hotrank::config::Config| {
        gate(c);
        c.redis.prefix = prefix.into();
        c.redis.cluster = cluster;
        c.redis.shards = shards;
    };
    let a = TestServer::start_redis(dir.clone(), &server.url(), edit).await;
    let b = TestServer::start_redis(dir.clone(), &server.url(), edit).await;
    // The oracle: one embedded node sent every request either node gets.
    let o = TestServer::start_with(gate).await;
    // Dedupe across nodes.
    assert_eq!(view(&a, &o, "x", "v1").await, "counted");
    assert_eq!(view(&b, &o, "x", "v1").await, "duplicate");
    // Rate limit across nodes: 5 in any minute, whoever receives them.
    let mut counted = 0;
    for i in 0..6 {
        let node = if i % 2 == 0 { &a } else { &b };
        if view(node, &o, &format!("r{i}"), "flood").await == "counted" {
            counted += 1;
        }
    }
    assert_eq!(counted, 5);
    // Many events to both nodes.
    for n in 0..20 {
        let events: Vec<Value> = (0..n + 1)
            .map(|v| json!({"type": "view", "articleId": format!("p{n}"), "visitorId": format!("u{n}-{v}")}))
            .collect();
        let node = if n % 2 == 0 { &a } else { &b };
        let body = json!({"events": events});
        let (st, got) = node.post("/api/events", &body).await;
        assert_eq!(st, StatusCode::OK, "{got}");
        let (_, want) = o.post("/api/events", &body).await;
        assert_eq!(got["verdicts"], want["verdicts"], "oracle verdicts");
    }
    for path in [
        "/api/hot?limit=50",
        "/api/hot?range=1h&limit=7",
        "/api/hot?range=all&explain=true",
        "/api/articles/p7",
        "/api/stats",
        "/api/new?limit=5",
    ] {
        let (sa, ja) = a.get(path).await;
        let (sb, jb) = b.get(path).await;
        let (so, jo) = o.get(path).await;
        assert_eq!(sa, StatusCode::OK, "{path}: {ja}");
        assert_eq!(sb, StatusCode::OK, "{path}: {jb}");
        assert_eq!(so, StatusCode::OK, "{path}: {jo}");
        let strip = |mut v: Value| {
            v.as_object_mut().map(|o| o.remove("cursor"));
            v
        };
        let (ja, jb) = (strip(ja), strip(jb));
        assert_eq!(ja, jb, "{path}");
        assert_same_as_oracle(&strip(jo), &ja, path);
    }
    let (_, top) = a.get("/api/hot?limit=50").await;
    assert_eq!(top["items"][0]["articleId"], "p19");
    assert_eq!(top["items"][0]["pv"], 20);
    // A cursor from node a continues on node b, same snapshot.
    let (_, p1) = a.get("/api/hot?limit=4").await;
    let cursor = p1["cursor"].as_str().expect("cursor").to_string();
    let (st, p2) = b.get(&format!("/api/hot?limit=4&cursor={cursor}")).await;
    assert_eq!(st, StatusCode::OK, "{p2}");
    assert_eq!(p2["generatedAt"], p1["generatedAt"]);
    assert_eq!(p2["items"][0]["rank"], 5);
    assert_eq!(p2["items"][0]["articleId"], top["items"][4]["articleId"]);
    // A deletion on one node is seen by the other's next ranking.
    let r = a
        .client
        .delete(a.url("/api/articles/p19"))
        .bearer_auth(common::ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let (_, top) = b.get("/api/hot?limit=50").await;
    assert_eq!(top["items"][0]["articleId"], "p18");
}

/// What redis-cli shows under the seed 000 key names matches the API.
#[tokio::test]
async fn seed_keys_match_the_api() {
    seed_keys(&Backend::One(RedisServer::start()), "").await;
}

async fn seed_keys(server: &Backend, prefix: &str) {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let cluster = server.is_cluster();
    let s = TestServer::start_redis(dir, &server.url(), |c| {
        c.redis.prefix = prefix.into();
        c.redis.cluster = cluster;
    })
    .await;
    let keys = server.keys(prefix);
    for (n, article) in ["12345", "777", "42"].into_iter().enumerate() {
        let (st, _) = s
            .admin_put(
                &format!("/api/articles/{article}"),
                &json!({"title": article, "publishedAt": T0 - 3600 * n as i64}),
            )
            .await;
        assert_eq!(st, StatusCode::CREATED);
        let events: Vec<Value> = (0..10 * (n + 1))
            .map(|v| json!({"type": "view", "articleId": article, "visitorId": format!("v{}", v % (3 + 8 * n))}))
            .collect();
        s.post("/api/events", &json!({"events": events})).await;
        for v in 0..3 {
            s.view(article, &format!("w{v}")).await;
        }
    }
    s.clock.advance(600);
    let (_, hot) = s.get("/api/hot?limit=10").await;
    let mut con = redis_store(server, prefix, StoreSettings::default()).con();
    let z: Vec<(String, f64)> = con
        .zrevrange_withscores(keys.shard(0).ranking_default(), 0, 9)
        .await
        .unwrap();
    let items = hot["items"].as_array().unwrap();
    assert_eq!(z.len(), items.len());
    for (it, (member, score)) in items.iter().zip(&z) {
        assert_eq!(it["articleId"].as_str().unwrap(), member);
        let api = it["score"].as_f64().unwrap();
        assert!(
            (api - score).abs() <= 1e-12 * score.abs(),
            "{api} vs {score}"
        );
        let (_, a) = s.get(&format!("/api/articles/{member}")).await;
        let member = id(member);
        let pv: u64 = con.get(keys.views(&member)).await.unwrap();
        let uv: u64 = redis::cmd("PFCOUNT")
            .arg(keys.uv(&member))
            .query_async(&mut con)
            .await
            .unwrap();
        let published: i64 = con.hget(keys.meta(&member), "publishedAt").await.unwrap();
        assert_eq!(a["pv"].as_u64().unwrap(), pv);
        assert_eq!(a["uv"].as_u64().unwrap(), uv);
        assert_eq!(it["pv"].as_u64().unwrap(), pv);
        assert_eq!(a["publishedAt"].as_i64().unwrap(), published);
    }
    assert_eq!(items[0]["articleId"], "42");
}

/// embedded → export → import into Redis → same answers; and back.
#[tokio::test]
async fn export_import_both_ways() {
    export_import(&Backend::One(RedisServer::start()), "imported:", 1, false).await;
}

/// The same into and out of 4 article shards (each article's activity
/// sets and `articles:new` entry in its shard).
#[tokio::test]
async fn export_import_with_shards() {
    export_import(&Backend::One(RedisServer::start()), "imported4:", 4, false).await;
}

/// The same over 3 shards with a cluster's key names (issue 13): export
/// and import find every shard's tag (`Keys::scan_prefixes`).
#[tokio::test]
async fn export_import_with_cluster_names() {
    export_import(&Backend::One(RedisServer::start()), "imported3t:", 3, true).await;
}

async fn export_import(server: &Backend, prefix: &str, shards: u32, cluster_names: bool) {
    let (metas, batches) = stream();
    let d1 = tempfile::tempdir().unwrap();
    let e1 = embedded(d1.path(), StoreSettings::default());
    feed(&e1, &metas, &batches).await;
    // Seed 003 votes move too, voter sets included.
    for (a, user) in [("art0", 1u128), ("art0", 2), ("art3", 3)] {
        let v = e1
            .vote(&id(a), user.into(), VoteDirection::Up, T0 + 100)
            .await
            .unwrap();
        assert!(matches!(v, VoteOutcome::Counted { .. }), "{v:?}");
    }
    let mut dump = vec![Record::Header {
        version: DUMP_VERSION,
        source: "embedded".into(),
    }];
    dump.extend(e1.export());
    let opts = RedisOptions {
        shards,
        cluster_names,
        ..server.options(prefix)
    };
    let r = RedisStore::connect(opts, StoreSettings::default()).expect("redis store");
    // Arrivals here are simulated (T0): Redis's gate follows them.
    r.gate_on_node_clocks().await.expect("gate on node clocks");
    let n = load_redis(&r, &dump, &StoreSettings::default(), T0)
        .await
        .expect("import to redis");
    assert_eq!(n, 14);
    // Import writes one pipeline per slot (and export reads so, below).
    assert!(r.crossed_slots().is_empty(), "{:?}", r.crossed_slots());
    let want = answers(&e1, T0 + 3000).await;
    assert_same(&want, &answers(&r, T0 + 3000).await, "embedded -> redis");
    // Gate state moved too: a repeat is a duplicate, a retry is replayed.
    let mut last = batches.last().unwrap().clone();
    last.truncate(10);
    let now = last[0].arrival_ms / 1000;
    let v1 = e1.ingest(last.clone(), now).await.unwrap();
    let v2 = r.ingest(last.clone(), now).await.unwrap();
    assert_eq!(v1, v2);
    let again = r
        .vote(&id("art0"), 2u128.into(), VoteDirection::Up, T0 + 200)
        .await
        .unwrap();
    assert_eq!(again, VoteOutcome::AlreadyVoted, "voters moved to Redis");
    // And back: Redis → export → a new embedded store.
    let dump = dump_redis(&r, T0 + 3000).await.expect("export redis");
    assert!(r.crossed_slots().is_empty(), "{:?}", r.crossed_slots());
    let d2 = tempfile::tempdir().unwrap();
    let durability = Durability {
        dir: d2.path().to_path_buf(),
        fsync: FsyncPolicy::Always,
        segment_bytes: 1 << 20,
        snapshot_interval_secs: 3600,
        snapshot_every_records: 1 << 40,
        storage: hotrank::store::storage::Disk::shared(),
    };
    EmbeddedStore::import_into(&durability, &StoreSettings::default(), &dump)
        .expect("import to embedded");
    let e2 = EmbeddedStore::open(durability, StoreSettings::default())
        .expect("open")
        .0;
    let want = answers(&e1, T0 + 3300).await;
    assert_same(&want, &answers(&e2, T0 + 3300).await, "redis -> embedded");
    // Sketches moved as byte images: equal registers, equal counts.
    for a in ["art0", "art3"] {
        let x = e1.article(&id(a), T0).await.unwrap().unwrap();
        let y = e2.article(&id(a), T0).await.unwrap().unwrap();
        assert_eq!(x.lifetime, y.lifetime);
    }
    assert_eq!(
        e2.article(&id("art0"), T0)
            .await
            .unwrap()
            .unwrap()
            .lifetime
            .ups,
        2
    );
    let again = e2
        .vote(&id("art3"), 3u128.into(), VoteDirection::Up, T0 + 200)
        .await
        .unwrap();
    assert_eq!(again, VoteOutcome::AlreadyVoted, "voters moved back");
}

/// One batch of 20 events with fresh visitors and ids; returns the
/// batch and whether it was acknowledged (a 503 carries Retry-After).
async fn send(s: &TestServer, next: &AtomicU64) -> (Vec<Value>, bool) {
    let (events, answer) = send_answer(s, next).await;
    (events, answer.is_ok())
}

/// [`send`], with the 503's message when the batch was refused.
async fn send_answer(s: &TestServer, next: &AtomicU64) -> (Vec<Value>, Result<(), String>) {
    let base = next.fetch_add(20, Ordering::SeqCst);
    let events: Vec<Value> = (base..base + 20)
        .map(|i| {
            json!({"type": "view", "articleId": format!("a{}", i % 7),
                        "visitorId": format!("v{i}"), "eventId": format!("e{i}")})
        })
        .collect();
    let r = s
        .client
        .post(s.url("/api/events"))
        .json(&json!({"events": events}))
        .send()
        .await
        .expect("request");
    let st = r.status();
    if st == StatusCode::SERVICE_UNAVAILABLE {
        assert!(
            r.headers().contains_key("retry-after"),
            "503 without Retry-After"
        );
    }
    let body: Value = r.json().await.unwrap_or(Value::Null);
    match st {
        StatusCode::OK => {
            assert_eq!(body["verdicts"]["counted"], 20, "{body}");
            (events, Ok(()))
        }
        StatusCode::SERVICE_UNAVAILABLE => {
            assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
            (events, Err(body["error"]["message"].to_string()))
        }
        other => panic!("unexpected {other}: {body}"),
    }
}
/// After an outage: every acknowledged batch is stored (sent again, each
/// event is replayed), unacknowledged ones were stored at most once, and
/// the site counted each event it was sent exactly once. Returns the
/// number of acknowledged events.
async fn each_event_once<B: AsRef<[Value]>>(
    s: &TestServer,
    acked: &[B],
    failed: &[B],
    next: &AtomicU64,
) -> usize {
    // Every acknowledged event is stored: sent again, each is replayed.
    let total_acked: usize = acked.iter().map(|b| b.as_ref().len()).sum();
    for events in acked {
        let events = events.as_ref();
        let (st, body) = s.post("/api/events", &json!({"events": events})).await;
        assert_eq!(st, StatusCode::OK);
        assert_eq!(
            body["verdicts"]["replayed"], 20,
            "an acknowledged event was lost: {body}"
        );
    }
    // Unacknowledged ones were stored at most once: a retry either replays
    // or counts them now.
    for events in failed {
        let events = events.as_ref();
        let (st, body) = s.post("/api/events", &json!({"events": events})).await;
        assert_eq!(st, StatusCode::OK);
        let v = &body["verdicts"];
        assert_eq!(
            v["replayed"].as_u64().unwrap() + v["counted"].as_u64().unwrap(),
            20
        );
    }
    let sent = next.load(Ordering::SeqCst);
    let (_, stats) = s.get("/api/stats").await;
    assert_eq!(
        stats["counted"].as_u64().unwrap(),
        sent,
        "each event counted once"
    );
    total_acked
}

/// Redis killed (SIGKILL) and restarted on its port under load: no event
/// is acknowledged without being stored, requests during the outage get
/// 503, and the service recovers by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restart_under_load() {
    let mut server = RedisServer::start_durable();
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let s = Arc::new(
        TestServer::start_redis(dir, &server.url(), |c| {
            c.gate.ip_limit_per_minute = 0;
            c.redis.response_timeout_ms = 500;
            c.redis.connect_timeout_ms = 200;
        })
        .await,
    );
    let next = Arc::new(AtomicU64::new(0));
    let loaders: Vec<_> = (0..3)
        .map(|_| {
            let (s, next) = (s.clone(), next.clone());
            tokio::spawn(async move {
                let mut acked = Vec::new();
                let mut failed = Vec::new();
                for _ in 0..40 {
                    let (ev, ok) = send(&s, &next).await;
                    if ok {
                        acked.push(ev);
                    } else {
                        failed.push(ev);
                    }
                    tokio::task::yield_now().await;
                }
                (acked, failed)
            })
        })
        .collect();
    let mut acked = Vec::new();
    let mut failed = Vec::new();
    assert!(send(&s, &next).await.1);
    server.kill();
    // While Redis is down: nothing is acknowledged, readiness says so.
    for _ in 0..3 {
        let (ev, ok) = send(&s, &next).await;
        assert!(!ok, "acknowledged while Redis was down");
        failed.push(ev);
    }
    assert_eq!(s.get("/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
    server.restart();
    // Recovers by itself: no restart of hotrank.
    let mut ready = false;
    for _ in 0..100 {
        if s.get("/readyz").await.0 == StatusCode::OK {
            ready = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(ready, "hotrank did not reconnect to Redis");
    let mut resumed = false;
    for _ in 0..50 {
        let (ev, ok) = send(&s, &next).await;
        if ok {
            acked.push(ev);
            resumed = true;
            break;
        }
        failed.push(ev);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(resumed, "acknowledgements did not resume");
    for l in loaders {
        let (a, f) = l.await.unwrap();
        acked.extend(a);
        failed.extend(f);
    }
    let total_acked = each_event_once(&s, &acked, &failed, &next).await;
    assert!(total_acked > 0);
    eprintln!(
        "acknowledged {total_acked} events, {} batches refused during the outage",
        failed.len()
    );
}

/// docs/redis-keys.md renders the key table the code checks keys against
/// (`KEY_TABLE`): one source of truth. `UPDATE_DOCS=1` rewrites the docs.
#[test]
fn docs_render_the_key_table() {
    use hotrank::store::redis::{KEY_TABLE, render_key_table};
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/redis-keys.md");
    let mut text = std::fs::read_to_string(path).expect("docs/redis-keys.md");
    let mut sections: Vec<&str> = KEY_TABLE.iter().map(|k| k.section).collect();
    sections.dedup();
    let mut fixed = text.clone();
    for s in &sections {
        let open = format!("<!-- keys:{s} -->\n");
        let start = fixed
            .find(&open)
            .unwrap_or_else(|| panic!("docs lack {open:?}"))
            + open.len();
        let end = start + fixed[start..].find("<!-- /keys -->").expect("block end");
        fixed.replace_range(start..end, &render_key_table(s));
    }
    if std::env::var("UPDATE_DOCS").is_ok() {
        std::fs::write(path, &fixed).expect("write docs");
        text = fixed.clone();
    }
    assert!(
        text == fixed,
        "docs/redis-keys.md differs from KEY_TABLE: run UPDATE_DOCS=1 cargo test --test redis docs_render"
    );
    assert_eq!(text.matches("<!-- keys:").count(), sections.len());
}

/// Issue 11 item 12: after a mixed load (every kind of event and verdict,
/// eventIds, posts, votes, deletes, rankings, cursors, behaviour bots) every
/// key in Redis is a documented one, of its documented type, with a TTL
/// exactly when the table says so.
#[tokio::test]
async fn every_key_matches_the_table() {
    every_key(&Backend::One(RedisServer::start()), "site:", 1, false).await;
}

/// The same over 4 article shards: the shard keys (`s<k>:…`) are in the
/// table too, and none of the one-shard index keys is written.
#[tokio::test]
async fn every_key_matches_the_table_with_shards() {
    every_key(&Backend::One(RedisServer::start()), "site4s:", 4, false).await;
}

/// Issue 13, step 1: the same load over 3 shards with a cluster's key
/// names (`RedisOptions::cluster_names`, on one redis-server, as the
/// sharded cluster's calls do not all stay in one slot yet): every key is
/// documented and carries the tag its row says (`KeySpec::slot`): the
/// site's `{<site>}` for gate state and totals, shard k's `{<site>:s<k>}`
/// for the shard's indexes and for the own keys of the articles of
/// shard k, and no per-article or shard key under the site's tag.
#[tokio::test]
async fn every_key_carries_its_documented_tag_with_shards() {
    every_key(&Backend::One(RedisServer::start()), "site3t:", 3, true).await;
}

async fn every_key(server: &Backend, prefix: &str, shards: u32, cluster_names: bool) {
    use hotrank::store::redis::{Slot, Ttl, key_spec_of};
    // The one-Redis name of a shard key found under a shard's tag.
    let shard_pattern = |p: &'static str| -> &'static str {
        [
            ("changes", "s<k>:changes"),
            ("changes:seq", "s<k>:changes:seq"),
            ("active:h:<hour>", "s<k>:active:h:<hour>"),
            ("active:d:<day>", "s<k>:active:d:<day>"),
            ("articles:new", "s<k>:articles:new"),
            ("hot:score", "s<k>:hot:score"),
            ("hot:score:state", "s<k>:hot:score:state"),
            (
                "hot:<model>:<range>:<filter>",
                "s<k>:hot:<model>:<range>:<filter>",
            ),
            ("hot:index", "s<k>:hot:index"),
        ]
        .iter()
        .find(|(one, _)| *one == p)
        .map_or(p, |(_, s)| *s)
    };
    let s = StoreSettings {
        bot_articles_per_minute: 3,
        ..StoreSettings::default()
    };
    let opts = RedisOptions {
        shards,
        cluster_names,
        ..server.options(prefix)
    };
    let store = RedisStore::connect(opts, s).expect("redis store");
    let (metas, batches) = stream();
    feed(&store, &metas, &batches).await;
    // A visitor that views 5 articles in a minute: quarantined.
    let crawl: Vec<Event> = (0..5)
        .map(|a| Event {
            ip: 77,
            event_id: Some(0xfeed + a as u128),
            ..Event::view(id(&format!("art{a}")), 999_999, T0)
        })
        .collect();
    let v: Vec<Verdict> = store
        .ingest(crawl, T0)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.unwrap().verdict)
        .collect();
    assert_eq!(v[3..], [Verdict::Bot, Verdict::Bot]);
    let posted = store
        .post_article(ArticleMeta::default(), 5u128.into(), T0)
        .await
        .unwrap();
    store
        .vote(&posted, 6u128.into(), VoteDirection::Up, T0 + 10)
        .await
        .unwrap();
    // Rankings named with their models' parameters (`rising.b24h.m5`,
    // `gravity.hl6h`).
    let mut q = query(RangeSpec::Hours(1), 5);
    q.model = ModelKind::Rising;
    store.hot(&q, T0 + 60).await.unwrap();
    q.model = ModelKind::Gravity;
    q.params.decay = hotrank::model::Decay::HalfLife(6);
    store.hot(&q, T0 + 60).await.unwrap();
    let _ = answers(&store, T0 + 60).await;
    let mut q = query(RangeSpec::Hours(72), 2);
    let page = store.hot(&q, T0 + 60).await.unwrap();
    q.cursor = page.cursor.clone();
    store.hot(&q, T0 + 60).await.unwrap();
    let mut q = query(RangeSpec::Hours(24), 5);
    q.model = ModelKind::Votes;
    store.hot(&q, T0 + 60).await.unwrap();

    // Every key of the site, from the node that holds its slot (on a
    // cluster: all of them, checked below).
    let mut con = store.con();
    let mut keys = Vec::new();
    // (key, the prefix or tag it is under, that prefix's shard: None for
    // the site's)
    let mut under: Vec<(String, String, Option<u32>)> = Vec::new();
    for (i, (route, pre)) in store.keys().scan_prefixes().into_iter().enumerate() {
        let mut cursor = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = con
                .scan(&route, cursor, &format!("{pre}*"), 1000)
                .await
                .unwrap();
            for k in &batch {
                under.push((k.clone(), pre.clone(), i.checked_sub(1).map(|k| k as u32)));
            }
            keys.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    let tagged_shards = store.keys().tag.is_some() && shards > 1;
    // On a cluster every key of the site hashes to the slot of its tag.
    let slots: std::collections::BTreeSet<i64> = if server.is_cluster() {
        let mut slots = std::collections::BTreeSet::new();
        for k in &keys {
            let slot: i64 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(k)
                .query_async(&mut con)
                .await
                .unwrap();
            slots.insert(slot);
        }
        slots
    } else {
        Default::default()
    };
    if tagged_shards {
        // The site's slot and each shard's (documented tags checked below).
        assert!(!server.is_cluster() || slots.len() == 4, "{slots:?}");
    } else {
        assert!(slots.len() <= 1, "one site, one slot: {slots:?}");
    }
    assert!(
        keys.len() > 100,
        "a mixed load leaves many keys: {}",
        keys.len()
    );
    let mut seen = std::collections::BTreeSet::new();
    for (k, pre, shard) in &under {
        let rest = k
            .strip_prefix(pre.as_str())
            .unwrap_or_else(|| panic!("{k}: no prefix"));
        let spec = key_spec_of(rest).unwrap_or_else(|| panic!("{k}: not in KEY_TABLE"));
        if tagged_shards {
            // Each key under the tag its row documents.
            match (spec.slot(), shard) {
                (Slot::Site, None) | (Slot::Shard | Slot::Ledger, Some(_)) => {}
                (Slot::Article, Some(k)) => {
                    let a = spec.article_in(rest).expect("an article key");
                    assert_eq!(
                        store.keys().shard_index(&id(a)),
                        *k,
                        "{rest}: another shard"
                    );
                }
                (slot, _) => panic!("{k}: a {slot:?} key under {pre}"),
            }
            seen.insert(if shard.is_none() {
                spec.pattern
            } else {
                shard_pattern(spec.pattern)
            });
        } else {
            seen.insert(spec.pattern);
        }
        let kind: String = redis::cmd("TYPE")
            .arg(k)
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(kind, spec.kind, "{k}: type");
        let ttl: i64 = con.ttl(k).await.unwrap();
        match spec.ttl {
            Ttl::None => assert_eq!(ttl, -1, "{k}: must not expire"),
            Ttl::Expires => assert!(ttl > 0, "{k}: must expire (ttl {ttl})"),
        }
    }
    for must in [
        "hll:uv:h:<id>:<hour>",
        "hll:uv:d:<id>:<day>",
        "gate:eid:<slot>",
        "gate:rl:v:<slot>",
        "gate:dd:<id>:<k>:<vhex>",
        "gate:bot:<slot>",
        "gate:batch:<hex>",
        "voted:<id>",
        "post:req:<hex>",
        "cursor:<16 hex>",
        "stats:articles",
    ] {
        assert!(seen.contains(must), "the load wrote no {must}");
    }
    let sharded = [
        "s<k>:changes",
        "s<k>:changes:seq",
        "s<k>:active:h:<hour>",
        "s<k>:active:d:<day>",
        "s<k>:articles:new",
        "s<k>:hot:score",
        "s<k>:hot:score:state",
        "s<k>:hot:<model>:<range>:<filter>",
        "s<k>:hot:index",
    ];
    let one = [
        "changes",
        "changes:seq",
        "active:h:<hour>",
        "active:d:<day>",
        "articles:new",
        "hot:score",
        "hot:score:state",
        "hot:<model>:<range>:<filter>",
        "hot:index",
    ];
    let (written, absent) = if shards > 1 {
        (sharded, one)
    } else {
        (one, sharded)
    };
    for k in written {
        assert!(seen.contains(k), "{shards} shard(s): the load wrote no {k}");
    }
    for k in absent {
        assert!(!seen.contains(k), "{shards} shard(s): the load wrote {k}");
    }
    if tagged_shards {
        assert!(seen.contains("post:id:<hex>"), "the load posted nothing");
    }
    if cluster_names {
        // The calls of this load a cluster would not run in one slot.
        let crossed = store.crossed_slots();
        eprintln!("crossed slots: {crossed:#?}");
        if shards == 1 {
            assert!(crossed.is_empty(), "one site, one slot: {crossed:?}");
        } else {
            assert_eq!(
                crossed, CROSSING_SLOTS,
                "update CROSSING_SLOTS and docs/redis-keys.md"
            );
        }
    }
}

/// Issue 13: the calls that cross slots on a cluster with more than one
/// shard (docs/redis-keys.md, "One site over many primaries"), as the
/// mixed load of [`every_key`] finds them: none, which is what lets
/// config run `cluster = true` with `shards > 1`.
const CROSSING_SLOTS: &[&str] = &[];

/// With one shard, a cluster's names put every key in the site's slot:
/// no call of the mixed load crosses slots (the slot log is checked by
/// `slots.rs`'s own tests to record the calls that do).
#[tokio::test]
async fn every_key_in_one_slot_with_cluster_names() {
    every_key(&Backend::One(RedisServer::start()), "site1t:", 1, true).await;
}

/// Issue 11 item 12: ingest.lua checks every event before its first write
/// (a bad event in the middle changes nothing), and a call retried with
/// the same batch id answers as the first one without counting again.
#[tokio::test]
async fn ingest_script_is_all_or_nothing() {
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let script = hotrank::store::redis::ingest_script();
    let call = |batch: &str, bad_middle: bool| {
        let mut inv = script.prepare_invoke();
        // The epoch key and epoch (ingest_epoch.lua): no epoch, no check.
        inv.arg("").arg("");
        for a in [
            "",
            &T0.to_string(),
            "900",
            "60",
            "600",
            "86400",
            "691200",
            "7862400",
            "0",
            "0",
            "0",
            "30",
            "86400000",
            batch,
            "3",
        ] {
            inv.arg(a);
        }
        for i in 0..3 {
            let ts = if bad_middle && i == 1 {
                "x".to_string()
            } else {
                T0.to_string()
            };
            inv.arg("v")
                .arg(format!("a{i}"))
                .arg(format!("{:032x}", i + 1))
                .arg(vec![i as u8; 16]);
            inv.arg("00000000000000aa").arg(ts).arg(T0 * 1000).arg(T0);
            inv.arg(format!("{:032x}", 100 + i))
                .arg(0)
                .arg("0")
                .arg("0");
        }
        inv
    };
    let err = call("", true).invoke_async::<Vec<i64>>(&mut con).await;
    assert!(err.is_err(), "a malformed event fails the call");
    let n: i64 = redis::cmd("DBSIZE").query_async(&mut con).await.unwrap();
    assert_eq!(n, 0, "nothing was written before the bad event was found");

    let id = format!("{:032x}", 42);
    let first: Vec<i64> = call(&id, false).invoke_async(&mut con).await.unwrap();
    assert_eq!(first, [0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let keys_after_first: i64 = redis::cmd("DBSIZE").query_async(&mut con).await.unwrap();
    let again: Vec<i64> = call(&id, false).invoke_async(&mut con).await.unwrap();
    assert_eq!(again, first, "a retried batch gets the first answer");
    let pv: i64 = con.get("counter:views:a0").await.unwrap();
    assert_eq!(pv, 1, "and is not counted twice");
    let counted: i64 = con.get("stats:counted").await.unwrap();
    assert_eq!(counted, 3);
    let n: i64 = redis::cmd("DBSIZE").query_async(&mut con).await.unwrap();
    assert_eq!(n, keys_after_first);
    // The same events under a new batch id are judged again: replayed.
    let other: Vec<i64> = call(&format!("{:032x}", 43), false)
        .invoke_async(&mut con)
        .await
        .unwrap();
    assert_eq!(other, [4, 0, 0, 4, 0, 0, 4, 0, 0]);
}

/// A script call that declares keys may touch no other (declared.lua): a
/// `PUT` that leaves out one of its keys fails and writes nothing.
#[tokio::test]
async fn scripts_refuse_undeclared_keys() {
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let script = redis::Script::new(&format!(
        "{}{}{}{}{}{}",
        include_str!("../src/store/redis/declared.lua"),
        hotrank::store::redis::shard_chunk(1),
        include_str!("../src/store/redis/epoch.lua"),
        include_str!("../src/store/redis/op_plain.lua"),
        include_str!("../src/store/redis/facets.lua"),
        include_str!("../src/store/redis/put.lua")
    ));
    let put = |keys: &[&str]| {
        let mut inv = script.prepare_invoke();
        for k in keys {
            inv.key(*k);
        }
        inv.arg("").arg("a1").arg(T0);
        // The epoch key and epoch (op_plain.lua): no epoch, no check.
        inv.arg("").arg("");
        inv
    };
    let all = [
        "meta:article:a1",
        "stats:articles",
        "articles:new",
        "articles:new:by",
        "changes:seq",
        "changes",
        "archive:dirty",
    ];
    let err = put(&all[..5])
        .invoke_async::<i64>(&mut con)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("undeclared key changes"), "{err}");
    let n: i64 = redis::cmd("DBSIZE").query_async(&mut con).await.unwrap();
    assert_eq!(n, 0, "nothing written");
    let created: i64 = put(&all).invoke_async(&mut con).await.unwrap();
    assert_eq!(created, 1);
}

/// A post re-sent with the same request id (the cluster client re-sends a
/// call whose connection dropped) answers the first call's id and creates
/// nothing twice; a new request id creates the next post.
#[tokio::test]
async fn post_script_is_idempotent() {
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let script = redis::Script::new(&format!(
        "{}{}{}{}{}",
        include_str!("../src/store/redis/declared.lua"),
        hotrank::store::redis::shard_chunk(1),
        include_str!("../src/store/redis/epoch.lua"),
        include_str!("../src/store/redis/op_plain.lua"),
        concat!(
            include_str!("../src/store/redis/facets.lua"),
            include_str!("../src/store/redis/post.lua"),
            include_str!("../src/store/redis/post_make.lua"),
            include_str!("../src/store/redis/post_end.lua")
        )
    ));
    let post = |request: &str| {
        let mut inv = script.prepare_invoke();
        inv.arg("")
            .arg(T0)
            .arg(format!("{:032x}", 7))
            .arg(86_400)
            .arg(request)
            .arg(432)
            .arg("title")
            .arg("hello")
            // The epoch key and epoch (op_plain.lua): no epoch, no check.
            .arg("")
            .arg("");
        inv
    };
    let first = format!("{:032x}", 1);
    let a: String = post(&first).invoke_async(&mut con).await.unwrap();
    let again: String = post(&first).invoke_async(&mut con).await.unwrap();
    assert_eq!(a, "1");
    assert_eq!(again, a, "a re-sent post answers the first id");
    let counter: i64 = con.get("article:").await.unwrap();
    assert_eq!(counter, 1, "and creates nothing");
    let n: i64 = con.zcard("articles:new").await.unwrap();
    assert_eq!(n, 1);
    let ups: i64 = con.hget("counter:article:1", "ups").await.unwrap();
    assert_eq!(ups, 1, "the poster's vote, counted once");
    let score: f64 = con.zscore("score:", "1").await.unwrap();
    assert_eq!(score, (T0 + 432) as f64);
    let b: String = post(&format!("{:032x}", 2))
        .invoke_async(&mut con)
        .await
        .unwrap();
    assert_eq!(b, "2");
}

/// Issue 13: a post over a site spread over slots is two calls, each in
/// one slot: `post_id.lua` reserves the id (site slot), `post_at.lua`
/// creates the article in its shard's slot. Each answers a re-sent call
/// as the first one and creates nothing twice; an id taken meanwhile (a
/// `PUT`) is answered '' with nothing written, and the next one is
/// reserved.
#[tokio::test]
async fn a_post_over_slots_is_two_idempotent_calls() {
    use hotrank::store::redis::{Keys, shard_chunk_tagged};
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let keys = Keys::tagged("t").with_shards(3);
    let declared = include_str!("../src/store/redis/declared.lua");
    let reserve = redis::Script::new(&format!(
        "{declared}{}",
        include_str!("../src/store/redis/post_id.lua")
    ));
    let make = redis::Script::new(&format!(
        "{declared}{}{}{}{}{}",
        shard_chunk_tagged(3, Some("t")),
        include_str!("../src/store/redis/facets.lua"),
        include_str!("../src/store/redis/post_at.lua"),
        include_str!("../src/store/redis/post_make.lua"),
        include_str!("../src/store/redis/post_at_end.lua")
    ));
    let req = |n: u32| format!("{n:032x}");
    let reserve_id = |request: &str, taken: &str| {
        let mut inv = reserve.prepare_invoke();
        inv.key(keys.post_reserved(request))
            .key(keys.post_counter())
            .arg(taken);
        inv
    };
    let create = |request: &str, id: &str| {
        let a = self::id(id);
        let mut inv = make.prepare_invoke();
        for k in keys.post_at_keys(&a, request) {
            inv.key(k);
        }
        inv.arg(keys.prefix.as_str())
            .arg(T0)
            .arg(format!("{:032x}", 7))
            .arg(86_400)
            .arg(request)
            .arg(432)
            .arg(id)
            .arg("title")
            .arg("hello")
            // The epoch key and epoch (op_plain.lua): no epoch, no check.
            .arg("")
            .arg("");
        inv
    };
    let first = req(1);
    let id1: String = reserve_id(&first, "").invoke_async(&mut con).await.unwrap();
    let again: String = reserve_id(&first, "").invoke_async(&mut con).await.unwrap();
    assert_eq!((id1.as_str(), again.as_str()), ("1", "1"), "reserved once");
    let made: String = create(&first, &id1).invoke_async(&mut con).await.unwrap();
    let again: String = create(&first, &id1).invoke_async(&mut con).await.unwrap();
    assert_eq!((made.as_str(), again.as_str()), ("1", "1"));
    let a1 = id("1");
    let ups: i64 = con.hget(keys.counters(&a1), "ups").await.unwrap();
    assert_eq!(ups, 1, "the poster's vote, counted once");
    let n: i64 = con.get(keys.ledger(&a1, "stats:articles")).await.unwrap();
    assert_eq!(n, 1, "registered once");
    // Article 2 exists already (a PUT): the post gets 3.
    let a2 = id("2");
    let _: () = con.hset(keys.meta(&a2), "publishedAt", T0).await.unwrap();
    let second = req(2);
    let id2: String = reserve_id(&second, "")
        .invoke_async(&mut con)
        .await
        .unwrap();
    assert_eq!(id2, "2");
    let made: String = create(&second, &id2).invoke_async(&mut con).await.unwrap();
    assert_eq!(made, "", "taken: nothing written");
    let voters: i64 = con.exists(keys.voted(&a2)).await.unwrap();
    assert_eq!(voters, 0);
    let id3: String = reserve_id(&second, &id2)
        .invoke_async(&mut con)
        .await
        .unwrap();
    assert_eq!(id3, "3");
    let made: String = create(&second, &id3).invoke_async(&mut con).await.unwrap();
    assert_eq!(made, "3");
    let counter: i64 = con.get(keys.post_counter()).await.unwrap();
    assert_eq!(counter, 3);
}

/// Issue 13, step 2: over a split site a batch is gated in the site's slot
/// (verdicts and an outbox entry per shard) and counted by one stage per
/// shard. A node that stops after the gate stage acknowledges nothing;
/// the sweeper (any node's maintenance) counts the batch once, later
/// sweeps count nothing again, and the client's retry is `replayed`. A
/// node that stops after the count stages, before it clears the outbox,
/// leaves entries the sweeper finds applied (their marker): nothing is
/// counted twice.
#[tokio::test]
async fn the_sweeper_counts_a_batch_left_between_stages_once() {
    use hotrank::store::redis::{SWEEP_AFTER_SECS, SplitFault};
    let server = RedisServer::start();
    let mk = |fault: SplitFault| {
        RedisStore::connect(
            RedisOptions {
                url: server.url(),
                prefix: "sweep:".into(),
                shards: 3,
                cluster_names: true,
                split_fault: fault,
                ..RedisOptions::default()
            },
            StoreSettings::default(),
        )
        .expect("redis store")
    };
    let (stopped, counted_only, node) = (
        mk(SplitFault::AfterGate),
        mk(SplitFault::AfterCount),
        mk(SplitFault::None),
    );
    let batch = |first: u128| -> Vec<Event> {
        (0..9u128)
            .map(|i| Event {
                ip: (first + i) as u64,
                event_id: Some(first + i),
                ..Event::view(id(&format!("sw{}", i % 3)), first + i, T0)
            })
            .collect()
    };
    let mut con = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let keys = node.keys().clone();
    let views = |con: &mut redis::aio::MultiplexedConnection| {
        let keys = keys.clone();
        let mut con = con.clone();
        async move {
            let mut total = 0i64;
            for a in 0..3 {
                let v: Option<i64> = con.get(keys.views(&id(&format!("sw{a}")))).await.unwrap();
                total += v.unwrap_or(0);
            }
            total
        }
    };
    let pending = |con: &mut redis::aio::MultiplexedConnection| {
        let key = keys.outbox();
        let mut con = con.clone();
        async move { con.zcard::<_, i64>(key).await.unwrap() }
    };
    // Stopped after the gate stage: not acknowledged, nothing counted.
    assert!(stopped.ingest(batch(100), T0).await.is_err());
    assert_eq!(views(&mut con).await, 0);
    assert!(pending(&mut con).await > 0);
    // Too young for the sweeper yet; then swept once.
    assert_eq!(node.sweep_outbox(T0).await.unwrap(), 0);
    node.maintain(T0 + SWEEP_AFTER_SECS + 1).await.unwrap();
    assert_eq!(views(&mut con).await, 9, "the batch counted once");
    assert_eq!(pending(&mut con).await, 0);
    assert_eq!(node.sweep_outbox(T0 + 60).await.unwrap(), 0);
    // The client's retry (same eventIds): replayed, nothing counted again.
    let again = node.ingest(batch(100), T0 + 1).await.unwrap();
    assert!(
        again
            .iter()
            .all(|o| o.as_ref().unwrap().verdict == Verdict::Replayed)
    );
    assert_eq!(views(&mut con).await, 9);
    // Stopped after counting, before clearing: the sweeper finds the
    // entries applied (their markers) and only clears them.
    assert!(counted_only.ingest(batch(200), T0 + 2).await.is_err());
    assert_eq!(views(&mut con).await, 18);
    assert!(pending(&mut con).await > 0);
    assert!(node.sweep_outbox(T0 + 60).await.unwrap() > 0);
    assert_eq!(views(&mut con).await, 18, "nothing counted twice");
    assert_eq!(pending(&mut con).await, 0);
    let stats = node.stats(T0 + 60, 24).await.unwrap();
    assert_eq!(stats.counted, 18);
}

/// Issue 11 item 2: a 180 h window's PV only follows the events in its
/// hours; it does not rise at 00:00 UTC when the oldest day turns partial.
#[tokio::test]
async fn windows_do_not_rise_at_midnight() {
    windows_at_midnight(&Backend::One(RedisServer::start()), "").await;
}

async fn windows_at_midnight(server: &Backend, prefix: &str) {
    let store = redis_store(server, prefix, StoreSettings::default());
    let midnight = (T0 / 86_400 + 1) * 86_400;
    let hour = 3600;
    // One view an hour, by a new visitor each, from 10 days back.
    let events: Vec<Event> = (0..240)
        .map(|k| Event {
            ip: k as u64,
            trusted: true,
            arrival_ms: (midnight + 6 * hour) * 1000,
            ..Event::view(id("a"), k as u128 + 1, midnight - k * hour - 1800)
        })
        .collect();
    let ts: Vec<i64> = events.iter().map(|e| e.ts).collect();
    for b in events.chunks(50) {
        store.ingest(b.to_vec(), midnight - 1).await.unwrap();
    }
    for n in [170u32, 180, 191, 192] {
        let mut last_pv = u64::MAX;
        for step in -4..4 {
            let now = midnight + step * hour + 60;
            let last = now.div_euclid(hour);
            let expect = ts
                .iter()
                .filter(|t| t.div_euclid(hour) > last - i64::from(n) && t.div_euclid(hour) <= last)
                .count() as u64;
            let page = store
                .hot(&query(RangeSpec::Hours(n), 1), now)
                .await
                .unwrap();
            let pv = page.items[0].counters.pv;
            assert_eq!(pv, expect, "range {n}h at {step} h from midnight");
            assert!(pv <= last_pv, "range {n}h rose with time alone at {step}");
            last_pv = pv;
        }
    }
}

/// One batch a [`Load`] sent, with when it was sent and when its answer
/// came (a test checks which batches sent after an instant were refused).
struct Sent {
    events: Vec<Value>,
    at: Instant,
    answered: Instant,
    /// The 503's message when refused.
    why: Option<String>,
}

impl AsRef<[Value]> for Sent {
    fn as_ref(&self) -> &[Value] {
        &self.events
    }
}

/// [`send`], timed: the batch and whether it was acknowledged.
async fn send_timed(s: &TestServer, next: &AtomicU64) -> (Sent, bool) {
    let at = Instant::now();
    let (events, answer) = send_answer(s, next).await;
    let answered = Instant::now();
    let acked = answer.is_ok();
    (
        Sent {
            events,
            at,
            answered,
            why: answer.err(),
        },
        acked,
    )
}

type Batches = Vec<Sent>;

/// Three clients sending batches of 20 fresh events to one API node
/// until stopped, while a test disturbs its Redis.
struct Load {
    s: Arc<TestServer>,
    next: Arc<AtomicU64>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    /// Each client's (acknowledged, refused) batches.
    loaders: Vec<tokio::task::JoinHandle<(Batches, Batches)>>,
    /// Batches sent outside the loaders; checked with theirs.
    acked: Batches,
    refused: Batches,
}

/// A stopped [`Load`]: every batch its clients sent, answered.
struct Stopped {
    s: Arc<TestServer>,
    next: Arc<AtomicU64>,
    acked: Batches,
    refused: Batches,
}

impl Stopped {
    /// Checks every event: acknowledged ones are stored, none is counted
    /// twice. Returns the number of events acknowledged, and sent.
    async fn each_event_once(&self) -> (usize, u64) {
        let acked = each_event_once(&self.s, &self.acked, &self.refused, &self.next).await;
        (acked, self.next.load(Ordering::SeqCst))
    }
}

impl Load {
    /// Once the node acknowledges a first batch.
    async fn start(s: TestServer) -> Load {
        let mut load = Load {
            s: Arc::new(s),
            next: Arc::new(AtomicU64::new(0)),
            stop: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            loaders: Vec::new(),
            acked: Vec::new(),
            refused: Vec::new(),
        };
        assert!(load.until_acked().await, "the cluster takes events");
        load.loaders = (0..3)
            .map(|_| {
                let (s, next, stop) = (load.s.clone(), load.next.clone(), load.stop.clone());
                tokio::spawn(async move {
                    let (mut acked, mut failed) = (Vec::new(), Vec::new());
                    while !stop.load(Ordering::SeqCst) {
                        let (ev, ok) = send_timed(&s, &next).await;
                        if ok {
                            acked.push(ev);
                        } else {
                            failed.push(ev);
                        }
                    }
                    (acked, failed)
                })
            })
            .collect();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        load
    }

    /// Sends until a batch is acknowledged (at most ~10 s).
    async fn until_acked(&mut self) -> bool {
        for _ in 0..100 {
            let (ev, acked) = send_timed(&self.s, &self.next).await;
            if acked {
                self.acked.push(ev);
                return true;
            }
            self.refused.push(ev);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        false
    }

    /// Stops the clients (after 300 ms more) and collects their batches.
    async fn stop(self) -> Stopped {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        self.stop.store(true, Ordering::SeqCst);
        let (mut acked, mut refused) = (self.acked, self.refused);
        for l in self.loaders {
            let (a, f) = l.await.unwrap();
            acked.extend(a);
            refused.extend(f);
        }
        Stopped {
            s: self.s,
            next: self.next,
            acked,
            refused,
        }
    }
}

/// An API node on the cluster for the load tests, its site over `shards`
/// article shards.
async fn load_node(url: &str, prefix: &str, shards: u32) -> TestServer {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    TestServer::start_redis(dir, url, |c| {
        c.gate.ip_limit_per_minute = 0;
        c.redis.prefix = prefix.into();
        c.redis.cluster = true;
        c.redis.shards = shards;
        c.redis.wait_replicas = 1;
        c.redis.response_timeout_ms = 500;
        c.redis.connect_timeout_ms = 200;
    })
    .await
}

/// The slot of a site's keys (computed here, as `reshard_site` does: a
/// node asked with `CLUSTER KEYSLOT` may be one a failover test just
/// restarted and still loading).
fn site_slot(b: &Backend, prefix: &str) -> u16 {
    hotrank::store::redis::slots::key_slot(b.keys(prefix).clock().as_bytes())
}

/// The slots a site over `shards` article shards moves in
/// [`reshard_under_load`]: its own and, with more than one shard, one
/// shard's (its articles' keys), both among the lowest 64 slots and on
/// one primary (redis-cli moves a source's lowest slots first), so few
/// slots move. The prefix, and the slots.
fn reshard_site(cluster: &RedisCluster, shards: u32) -> (String, Vec<u16>) {
    use hotrank::store::redis::{Keys, slots::key_slot};
    for n in 0..2_000_000 {
        let prefix = format!("rs{n}-{shards}:");
        let keys = Keys::tagged(&prefix).with_shards(shards);
        let mut slots = vec![key_slot(keys.clock().as_bytes())];
        if shards > 1 {
            let low = (0..shards)
                .map(|k| key_slot(keys.shard(k).changes().as_bytes()))
                .min()
                .unwrap();
            slots.push(low);
        }
        if slots.iter().all(|s| *s < 64) {
            let owners: std::collections::BTreeSet<Option<u16>> =
                slots.iter().map(|s| cluster.primary_of(*s)).collect();
            if owners.len() == 1 && !owners.contains(&None) {
                return (prefix, slots);
            }
        }
    }
    panic!("no prefix whose slots are low and on one primary")
}

/// The slots of a site over `shards` article shards (its own and, with
/// more than one shard, one shard's: [`reshard_site`]) moved to another
/// primary with `redis-cli --cluster reshard`
/// under load: hotrank follows `MOVED`/`ASK` (and retries the `TRYAGAIN`
/// of a script whose keys are half moved), every acknowledged event is
/// stored, none is counted twice.
async fn reshard_under_load(b: &Backend, shards: u32) {
    let Backend::Cluster(cluster) = b else {
        panic!("a cluster test")
    };
    let (prefix, slots) = reshard_site(cluster, shards);
    let top = *slots.iter().max().unwrap();
    let from = cluster.primary_of(slots[0]).expect("a primary");
    // How many of the source's slots to move: its own up to the highest.
    let count = (0..=top)
        .filter(|s| cluster.primary_of(*s) == Some(from))
        .count();
    let to = cluster
        .nodes
        .iter()
        .map(|n| n.port())
        .find(|p| *p != from && cluster.cli(*p, &["ROLE"]).starts_with("master"))
        .expect("another primary");
    let id = |port: u16| cluster.cli(port, &["CLUSTER", "MYID"]).trim().to_string();
    let (from_id, to_id) = (id(from), id(to));
    let load = Load::start(load_node(&b.url(), &prefix, shards).await).await;
    let cli = std::env::var("REDIS_CLI_BIN").unwrap_or_else(|_| "redis-cli".to_string());
    let args: Vec<String> = [
        "--cluster".to_string(),
        "reshard".into(),
        format!("127.0.0.1:{from}"),
        "--cluster-from".into(),
        from_id,
        "--cluster-to".into(),
        to_id,
        "--cluster-slots".into(),
        count.to_string(),
        "--cluster-yes".into(),
        "--cluster-pipeline".into(),
        "5".into(),
    ]
    .into();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(cli)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run redis-cli --cluster reshard")
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "reshard failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    for slot in &slots {
        assert_eq!(cluster.primary_of(*slot), Some(to), "slot {slot} moved");
    }
    let mut load = load;
    assert!(load.until_acked().await, "acknowledgements after the move");
    let out = load.stop().await;
    let refused = out.refused.len();
    let (acked, sent) = out.each_event_once().await;
    // Every slot kept a primary: no 503.
    assert_eq!(refused, 0, "batches refused while slots moved");
    eprintln!(
        "reshard, {shards} shard(s): slots {slots:?} moved under load; acknowledged {acked} \
         of {sent} events, {refused} batches refused"
    );
}

/// A primary of a 3-primary cluster (two replicas each) killed (SIGKILL)
/// under load, with `wait_replicas = 1`: a replica is promoted, Redis
/// re-points the other at it, and hotrank follows by itself. The promise
/// (issue 13): 503 (with Retry-After) only while the slot has no primary
/// or its primary no replica in sync; every batch sent once the promoted
/// primary has a replica in sync is acknowledged, every acknowledged
/// event survives and none is counted twice. With more than one shard
/// the primary killed serves the site's slot (its gate stages) and, for
/// the prefixes used here, some shards' too. The old primary then
/// rejoins as a replica, so the next run finds the same topology.
async fn failover_under_load(b: &mut Backend, prefix: &str, shards: u32) {
    let url = b.url();
    assert!(b.is_cluster(), "a cluster test");
    let slot = site_slot(b, prefix);
    let load = Load::start(load_node(&url, prefix, shards).await).await;
    let Backend::Cluster(cluster) = b else {
        unreachable!()
    };
    let primary = cluster.primary_of(slot).expect("the slot has a primary");
    // Both replicas hold the site's start (its epoch marker, its first
    // batches) before the kill, so whichever is promoted has them: on a
    // loaded machine a replica may still trail, and a failover to it is a
    // real loss that hotrank refuses to serve (marker.rs), not this test.
    let (written, _) = cluster.replication_offsets(primary);
    let caught_up = async {
        for _ in 0..200 {
            let (_, replicas) = cluster.replication_offsets(primary);
            if replicas.iter().filter(|o| **o >= written).count() >= 2 {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
    .await;
    assert!(
        caught_up,
        "the replicas of {primary} did not catch up before the kill"
    );
    let killed = Instant::now();
    cluster.kill_port(primary);
    let promoted = async {
        for _ in 0..300 {
            if let Some(p) = cluster.primary_of(slot).filter(|p| *p != primary) {
                return Some(p);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
    .await
    .expect("no replica was promoted");
    let promoted_in = killed.elapsed();
    // Redis re-points the failed primary's other replica at the promoted
    // one by itself; once it is in sync, `WAIT 1` is met again. A batch
    // sent before that instant may still be refused; none sent after it.
    let in_sync = async {
        for _ in 0..300 {
            if cluster.in_sync_replicas(promoted) >= 1 {
                return Some(Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
    .await
    .expect("the promoted primary has no replica in sync");
    // A second of load with the replica in sync: all of it acknowledged.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let out = load.stop().await;
    let mut late: Vec<(f64, f64, &str)> = out
        .refused
        .iter()
        .filter(|b| b.at >= in_sync)
        .map(|b| {
            let at = (b.at - killed).as_secs_f64();
            let answered = (b.answered - killed).as_secs_f64();
            (at, answered, b.why.as_deref().unwrap_or(""))
        })
        .collect();
    let ready = if late.is_empty() {
        String::new()
    } else {
        let r = out.s.client.get(out.s.url("/readyz")).send().await;
        match r {
            Ok(r) => format!("{} {}", r.status(), r.text().await.unwrap_or_default()),
            Err(e) => e.to_string(),
        }
    };
    late.truncate(20);
    assert!(
        late.is_empty(),
        "batches refused though sent after the promoted primary had a replica in sync \
         ({:.3} s after the kill, promoted seen at {:.3} s; /readyz now: {ready}); the first \
         (sent, answered, why): {late:.3?}",
        (in_sync - killed).as_secs_f64(),
        promoted_in.as_secs_f64()
    );
    let after = out.acked.iter().filter(|b| b.at >= in_sync).count();
    assert!(after > 0, "no batch sent with the replica in sync");
    let (acked, sent) = out.each_event_once().await;
    let last_503 = out
        .refused
        .iter()
        .map(|b| b.answered)
        .max()
        .map_or("none".to_string(), |t| {
            format!("{:.1} s", (t - killed).as_secs_f64())
        });
    eprintln!(
        "failover, {shards} shard(s): acknowledged {acked} of {sent} events, {} batches refused \
         ({after} acknowledged batches sent after the replica was in sync); from the kill: \
         replica promoted {:.1} s, a replica in sync {:.1} s, last 503 {last_503}",
        out.refused.len(),
        promoted_in.as_secs_f64(),
        (in_sync - killed).as_secs_f64(),
    );
    // The old primary rejoins as the promoted one's replica: every primary
    // has two replicas again.
    cluster.node(primary).restart();
    cluster.wait_ok(cluster.nodes.len());
    let mut rejoined = false;
    for _ in 0..300 {
        if cluster.in_sync_replicas(promoted) >= 2 {
            rejoined = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(rejoined, "the old primary did not rejoin as a replica");
}

/// Issue 13, one site over many primaries, step 1 (docs/redis-keys.md,
/// "Article shards"): on a cluster with `shards = 3`, every per-shard key
/// (change log, activity sets, `articles:new`, rankings, index) and every
/// per-article key of the shard's articles hashes to the slot of the tag
/// `{<site>:s<k>}`; gate state and totals stay in the site's slot `{<site>}`;
/// and the default site's three shards are served by more than one primary.
fn sharded_keys_hash_to_their_tags(b: &Backend) {
    let Backend::Cluster(cluster) = b else {
        panic!("a cluster test")
    };
    let port = cluster.nodes[0].port();
    let slot = |key: &str| -> u16 {
        cluster
            .cli(port, &["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{key}: {e}"))
    };
    for prefix in ["", "sk:"] {
        let keys = hotrank::store::redis::Keys::tagged(prefix).with_shards(3);
        let tag = keys.tag.clone().expect("a tagged site");
        let site = slot(&format!("{{{tag}}}"));
        let shard_slot = |k: u32| slot(&format!("{{{tag}:s{k}}}"));
        for k in 0..3 {
            let sk = keys.shard(k);
            assert_ne!(shard_slot(k), site, "shard {k} shares the site's slot");
            let names = [
                sk.changes(),
                sk.changes_seq(),
                sk.changes_floor(),
                sk.active_h(500_000),
                sk.active_d(20_000),
                sk.newest(),
                sk.ranking_index(),
                sk.ranking_default(),
                format!("{}:state", sk.ranking_default()),
                sk.ranking(
                    ModelKind::Gravity,
                    RangeSpec::Hours(24),
                    Some("x"),
                    None,
                    None,
                ),
            ];
            for name in names {
                assert_eq!(slot(&name), shard_slot(k), "{name}");
            }
        }
        for a in 0..60 {
            let a = id(&format!("art{a}"));
            let k = keys.shard_index(&a);
            for name in [
                keys.views(&a),
                keys.uv(&a),
                keys.meta(&a),
                keys.counters(&a),
                keys.bucket_h(&a, 500_000),
                keys.uv_h(&a, 500_000),
                keys.bucket_d(&a, 20_000),
                keys.uv_d(&a, 20_000),
                keys.voted(&a),
                keys.ledger(&a, "archive:dirty"),
                keys.ledger(&a, "archive:taking"),
                keys.ledger(&a, "archive:written"),
                keys.ledger(&a, "archive:evicted"),
            ] {
                assert_eq!(slot(&name), shard_slot(k), "{name}");
            }
            assert_eq!(slot(&keys.dedupe(&a, 'v', 7)), site);
        }
        for name in [
            keys.clock(),
            keys.counted(),
            keys.quarantine(),
            keys.articles_count(),
            keys.shards_key(),
            keys.batch(&"0".repeat(32)),
            keys.gate_slot("gate:eid", 1),
            keys.gate_slot("gate:rl:v", 1),
            keys.archive_lock(),
            keys.archive_flushed(),
            keys.post_counter(),
        ] {
            assert_eq!(slot(&name), site, "{name}");
        }
        if prefix.is_empty() {
            let primaries: std::collections::BTreeSet<u16> = (0..3)
                .map(|k| cluster.primary_of(shard_slot(k)).expect("a primary"))
                .collect();
            assert!(
                primaries.len() > 1,
                "the default site's shards all on one primary"
            );
        }
    }
}

/// Issue 13: with `wait_replicas`, a split site's ingest acknowledges a
/// batch only when its gate stage and each count stage are on that many
/// replicas of their node: with two replicas per primary, 2 is met; 3
/// cannot be, and the batch answers 503 (a retry is safe).
async fn split_waits_for_replicas(b: &Backend) {
    let opts = |replicas: u32| RedisOptions {
        shards: 3,
        wait_replicas: replicas,
        response_timeout_ms: 1000,
        ..b.options("c9:")
    };
    let views: Vec<Event> = (0..30u128)
        .map(|i| Event {
            ip: i as u64,
            ..Event::view(id(&format!("wr{}", i % 6)), 1000 + i, T0)
        })
        .collect();
    let both = RedisStore::connect(opts(2), StoreSettings::default()).unwrap();
    let got = both
        .ingest(views.clone(), T0)
        .await
        .expect("on both replicas");
    assert!(
        got.iter()
            .all(|o| o.as_ref().unwrap().verdict == Verdict::Counted)
    );
    let three = RedisStore::connect(opts(3), StoreSettings::default()).unwrap();
    let more: Vec<Event> = views
        .into_iter()
        .map(|e| Event {
            visitor: e.visitor + 100,
            ..e
        })
        .collect();
    match three.ingest(more, T0).await {
        Err(hotrank::store::StoreError::Unavailable(m)) => assert!(m.contains("replicas"), "{m}"),
        other => panic!("three replicas cannot confirm: {other:?}"),
    }
}

/// The Redis suites above on a 3-primary Redis Cluster, one cluster for
/// the whole binary, one key prefix (so one slot) per suite. Two replicas
/// per primary: after a failover the promoted primary still has one, so
/// `wait_replicas = 1` is met (`failover_under_load`). Alone:
/// `cargo test --test redis cluster`.
#[test]
fn cluster_runs_the_same_suites() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut cluster = Backend::Cluster(RedisCluster::start(3, 2));
    rt.block_on(async {
        same_answers(&cluster, "c1:").await;
        two_nodes(&cluster, "c2:", 1).await;
        // Issue 13: two API nodes sharing one site over 3 shards.
        two_nodes(&cluster, "c11:", 3).await;
        seed_keys(&cluster, "").await;
        export_import(&cluster, "c4:", 1, false).await;
        export_import(&cluster, "c10:", 3, false).await;
        every_key(&cluster, "c5:", 1, false).await;
        // One site over 3 shards (4 slots, on every primary).
        every_key(&cluster, "c8:", 3, false).await;
        split_waits_for_replicas(&cluster).await;
        windows_at_midnight(&cluster, "c6:").await;
        sharded_keys_hash_to_their_tags(&cluster);
        reshard_under_load(&cluster, 1).await;
        reshard_under_load(&cluster, 3).await;
        // Last: they kill a primary (each time, the old primary rejoins
        // as a replica before the next).
        failover_under_load(&mut cluster, "c7:", 1).await;
        failover_under_load(&mut cluster, "c12:", 3).await;
    });
}

/// `[redis] shards`: Lua (`shard.lua`) and Rust (`keys::shard_of`) put
/// every id in the same shard, for several shard counts; with more than
/// one, ids spread over all of them; and both name the shard's keys and
/// the article's own the same, on one Redis and with a cluster's tag.
#[tokio::test]
async fn shard_of_is_the_same_in_lua_and_rust() {
    use hotrank::store::redis::{shard_chunk, shard_of};
    let server = RedisServer::start();
    let mut con = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut ids: Vec<String> = (0..1000).map(|i| format!("a{i}")).collect();
    for _ in 0..1000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = 1 + (x % 64) as usize;
        let id: String = (0..len)
            .map(|j| alphabet[((x >> (j % 58)) as usize + j * 7) % alphabet.len()] as char)
            .collect();
        ids.push(id);
    }
    ids.push("z".repeat(64));
    ids.push("_".repeat(64));
    for n in [1u32, 2, 3, 4, 7, 16, 256] {
        let script = redis::Script::new(&format!(
            "{}\nlocal out = {{}}\nfor i, id in ipairs(ARGV) do out[i] = shard_of(id) end\nreturn out",
            shard_chunk(n)
        ));
        let mut inv = script.prepare_invoke();
        for id in &ids {
            inv.arg(id.as_str());
        }
        let lua: Vec<u32> = inv.invoke_async(&mut con).await.unwrap();
        let rust: Vec<u32> = ids.iter().map(|i| shard_of(i, n)).collect();
        assert_eq!(lua, rust, "{n} shards");
        assert!(rust.iter().all(|k| *k < n));
        if n <= 16 {
            assert!((0..n).all(|k| rust.contains(&k)), "{n} shards: one unused");
        }
    }
    // The names: a shard's prefix (`SK`, `Keys::shard`) and an article's
    // own (`AK`, `Keys::article`), on one Redis (the site's names, `s<k>:`
    // after the prefix for the shard keys) and with a cluster's tag
    // (`{<tag>:s<k>}` for both when sharded).
    use hotrank::store::redis::Keys;
    let ids: Vec<String> = (0..200).map(|i| format!("p{i}")).collect();
    for n in [1u32, 3, 5] {
        for keys in [
            Keys::new("").with_shards(n),
            Keys::new("site1:").with_shards(n),
            Keys::tagged("").with_shards(n),
            Keys::tagged("site1:").with_shards(n),
        ] {
            let script = redis::Script::new(&format!(
                "{}\nlocal out = {{}}\nfor _, id in ipairs(ARGV) do \
                 out[#out + 1] = SK(KEYS[1], id); out[#out + 1] = AK(KEYS[1], id) end\n\
                 return out",
                keys.lua_chunk()
            ));
            let mut inv = script.prepare_invoke();
            inv.key(keys.prefix.as_str());
            for i in &ids {
                inv.arg(i.as_str());
            }
            let lua: Vec<String> = inv.invoke_async(&mut con).await.unwrap();
            let rust: Vec<String> = ids
                .iter()
                .flat_map(|i| [keys.of(&id(i)).prefix, keys.article(&id(i))])
                .collect();
            assert_eq!(lua, rust, "{keys:?}");
            // One Redis keeps every article key under the site's prefix.
            if keys.tag.is_none() || n == 1 {
                assert!(rust.iter().skip(1).step_by(2).all(|p| *p == keys.prefix));
            }
        }
    }
    // The names themselves.
    let k = Keys::tagged("site1:").with_shards(3);
    assert_eq!(k.shard(2).prefix, "{site1::s2}");
    assert_eq!(
        Keys::tagged("").with_shards(3).shard(0).prefix,
        "{hotrank:s0}"
    );
    assert_eq!(Keys::tagged("").shard(0).prefix, "{hotrank}");
    assert_eq!(Keys::new("x:").with_shards(3).shard(1).prefix, "x:s1:");
    let a = id("p7");
    assert_eq!(
        k.meta(&a),
        format!("{{site1::s{}}}meta:article:p7", k.shard_index(&a))
    );
    assert_eq!(Keys::new("x:").with_shards(3).meta(&a), "x:meta:article:p7");
}

/// A stream over `n` articles with many distinct scores: views by
/// article-dependent numbers of visitors over a few hours.
fn wide_stream(n: usize) -> (Vec<(ArticleId, ArticleMeta)>, Vec<Vec<Event>>) {
    let metas: Vec<(ArticleId, ArticleMeta)> = (0..n)
        .map(|a| {
            (
                id(&format!("w{a}")),
                ArticleMeta {
                    author: Some(format!("au{}", a % 7)),
                    category: Some(if a % 3 == 0 { "tech" } else { "life" }.into()),
                    published_at: T0 - 600 * (a as i64 % 40),
                    ..ArticleMeta::default()
                },
            )
        })
        .collect();
    let mut batches = Vec::new();
    for h in 0..4i64 {
        let ts = T0 - 4 * 3600 + h * 3600;
        let mut events = Vec::new();
        for a in 0..n {
            for v in 0..((a * 7 + h as usize * 3) % 11) {
                // Trusted: rate limits follow `ts` (the stream's hours),
                // as Redis times untrusted arrivals by its own clock.
                events.push(Event {
                    arrival_ms: (ts + 30) * 1000,
                    trusted: true,
                    ..Event::view(id(&format!("w{a}")), (a * 100 + v) as u128, ts)
                });
            }
        }
        batches.push(events);
    }
    (metas, batches)
}

/// `[redis] shards = 4`: every article's index entries (change log,
/// activity sets, `articles:new`, rankings) are in its own shard's keys
/// and only there, every shard holds some, no one-shard index key is
/// written, and readers see exactly what one shard shows: the walk over
/// four rankings stops at the same place, pages continue alike.
#[tokio::test]
async fn shards_hold_their_own_articles() {
    use hotrank::store::redis::shard_of;
    let server = Backend::One(RedisServer::start());
    let one = redis_store(&server, "one:", StoreSettings::default());
    let four = RedisStore::connect(
        RedisOptions {
            shards: 4,
            ..server.options("four:")
        },
        StoreSettings::default(),
    )
    .unwrap();
    let (metas, batches) = wide_stream(160);
    for s in [&one, &four] {
        for (i, m) in &metas {
            s.put_article(i.clone(), m.clone(), T0).await.unwrap();
        }
        for b in &batches {
            s.ingest(b.clone(), b[0].arrival_ms / 1000).await.unwrap();
        }
        s.delete_article(&id("w3"), T0).await.unwrap();
    }
    for now in [T0, T0 + 1800, T0 + 7200] {
        for (range, limit) in [
            (RangeSpec::Hours(1), 5),
            (RangeSpec::Hours(3), 10),
            (RangeSpec::Hours(72), 7),
            (RangeSpec::All, 3),
        ] {
            let text = |p: &hotrank::model::HotPage| -> Vec<String> {
                p.items
                    .iter()
                    .map(|it| format!("{} {} {} {:?}", it.rank, it.id, it.score, it.counters))
                    .collect()
            };
            // Three pages deep, each store by its own cursor.
            let (mut qa, mut qb) = (query(range, limit), query(range, limit));
            for page in 0..3 {
                let a = one.hot(&qa, now).await.unwrap();
                let b = four.hot(&qb, now).await.unwrap();
                let what = format!("{range:?} top {limit}, page {page} at {now}");
                assert_eq!(text(&a), text(&b), "{what}");
                assert_eq!(a.generated_at, b.generated_at, "{what}");
                assert_eq!(a.cursor.is_some(), b.cursor.is_some(), "{what}");
                if a.cursor.is_none() {
                    break;
                }
                (qa.cursor, qb.cursor) = (a.cursor, b.cursor);
            }
            // The newest list by its cursor (positions, not snapshots).
            let mut q = query(range, limit);
            for page in 0..3 {
                let n = one.newest(&q, now).await.unwrap();
                let m = four.newest(&q, now).await.unwrap();
                assert_eq!(text(&n), text(&m), "newest page {page}");
                assert_eq!(n.cursor, m.cursor, "newest page {page}");
                if n.cursor.is_none() {
                    break;
                }
                q.cursor = n.cursor;
            }
        }
        let (s1, s4) = (
            one.stats(now, 24).await.unwrap(),
            four.stats(now, 24).await.unwrap(),
        );
        assert_eq!(s1.articles, s4.articles);
        assert_eq!(s1.articles, 159);
    }
    // Every index key of shard k names only shard k's articles.
    let keys = four.keys();
    let mut con = four.con();
    let hours: Vec<i64> = batches
        .iter()
        .map(|b| hotrank::model::hour_of(b[0].ts))
        .collect();
    for k in 0..4 {
        let sk = keys.shard(k);
        let mut lists: Vec<(String, Vec<String>)> = Vec::new();
        for z in [
            sk.changes(),
            sk.newest(),
            sk.ranking_default(),
            sk.ranking(ModelKind::Gravity, RangeSpec::All, None, None, None),
        ] {
            let m: Vec<String> = con.zrange(&z, 0, -1).await.unwrap();
            lists.push((z, m));
        }
        for h in &hours {
            let set = sk.active_h(*h);
            let m: Vec<String> = con.smembers(&set).await.unwrap();
            lists.push((set, m));
        }
        for (key, members) in lists {
            assert!(!members.is_empty(), "{key} is empty");
            for m in members {
                assert_eq!(shard_of(&m, 4), k, "{key} holds {m}");
            }
        }
    }
    for name in [
        "changes",
        "changes:seq",
        "articles:new",
        "hot:score",
        "hot:index",
    ] {
        let n: i64 = con.exists(format!("four:{name}")).await.unwrap();
        assert_eq!(n, 0, "four:{name} exists");
    }
    // A node with another shard count is not ready on this site.
    one.ready().await.unwrap();
    four.ready().await.unwrap();
    let held: String = con.get("four:shards").await.unwrap();
    assert_eq!(held, "4");
    let n: i64 = con.exists("one:shards").await.unwrap();
    assert_eq!(n, 0, "one shard writes no key of its own");
    for (prefix, shards) in [("four:", 1), ("four:", 2), ("one:", 1)] {
        let other = RedisStore::connect(
            RedisOptions {
                shards,
                ..server.options(prefix)
            },
            StoreSettings::default(),
        )
        .unwrap();
        let r = other.ready().await;
        assert_eq!(r.is_ok(), prefix == "one:", "{prefix} with {shards}: {r:?}");
    }
}

/// `[redis] shards = 4`: the threshold walk over four rankings stops
/// exactly where one ranking's does, also when the stored bounds are
/// loose. Old articles with many views sit below hundreds of new ones
/// with one view each in the bounds written at T, and above hundreds of
/// older ones with one view; hours later the old ones lead, and every
/// shard's walk must page down through the new ones (several chunks) and
/// stop right after the last old one: a walk that stops one entry early
/// loses it (checked by breaking the walk so).
#[tokio::test]
async fn a_sharded_walk_stops_where_one_ranking_does() {
    sharded_walk(60).await;
}

/// The same when the articles below are one run of equal bounds: a page
/// that ends inside the run reads it whole only while the walk wants its
/// bound.
#[tokio::test]
async fn a_sharded_walk_stops_at_a_run_of_equal_bounds() {
    sharded_walk(0).await;
}

/// [`a_sharded_walk_stops_where_one_ranking_does`], the low articles'
/// publication times `low_spread` seconds apart.
async fn sharded_walk(low_spread: i64) {
    let server = Backend::One(RedisServer::start());
    let s = StoreSettings {
        visitor_limit_per_minute: u32::MAX,
        ip_limit_per_minute: u32::MAX,
        ..StoreSettings::default()
    };
    let one = redis_store(&server, "w1:", s.clone());
    let four = RedisStore::connect(
        RedisOptions {
            shards: 4,
            ..server.options("w4:")
        },
        s,
    )
    .unwrap();
    // `n` articles `<name><i>` published `age` hours and `spread` · i
    // seconds before T0, article i viewed by `views(i)` visitors at T0.
    async fn publish(
        store: &RedisStore,
        name: &str,
        n: u128,
        age: i64,
        spread: i64,
        views: impl Fn(u128) -> u128,
    ) {
        for i in 0..n {
            let a = id(&format!("{name}{i}"));
            let meta = ArticleMeta {
                published_at: T0 - age * 3600 - spread * i as i64,
                ..ArticleMeta::default()
            };
            store.put_article(a.clone(), meta, T0).await.unwrap();
            let evs = (0..views(i))
                .map(|v| Event::view(a.clone(), (i << 32) + v, T0))
                .collect();
            store.ingest(evs, T0).await.unwrap();
        }
    }
    for store in [&one, &four] {
        publish(store, "old", 8, 100, 60, |i| 100 + 40 * i).await;
        let evs = (0..600u128)
            .map(|i| Event::view(id(&format!("new{i}")), 1 << 60 | i, T0 - (i as i64 % 97)))
            .collect();
        store.ingest(evs, T0).await.unwrap();
        // Below them all: articles whose bounds stop every shard's walk.
        publish(store, "low", 400, 150, low_spread, |_| 1).await;
    }
    let text = |p: &hotrank::model::HotPage| -> Vec<String> {
        p.items
            .iter()
            .map(|it| format!("{} {} {}", it.rank, it.id, it.score))
            .collect()
    };
    let mut old_first = false;
    for later in [0, 3, 20] {
        let now = T0 + later * 3600;
        for limit in [1, 4, 10] {
            for range in [RangeSpec::Hours(72), RangeSpec::All] {
                // Every page of the snapshot, each store by its own cursor.
                let (mut qa, mut qb) = (
                    HotQuery::top(ModelKind::Gravity, range, limit),
                    HotQuery::top(ModelKind::Gravity, range, limit),
                );
                for page in 0..8 {
                    let a = one.hot(&qa, now).await.unwrap();
                    let b = four.hot(&qb, now).await.unwrap();
                    let what = format!("{range:?} top {limit} page {page}, {later} h later");
                    assert_eq!(text(&a), text(&b), "{what}");
                    if page == 0 {
                        old_first |= a
                            .items
                            .first()
                            .is_some_and(|i| i.id.as_str().starts_with("old"));
                    }
                    if a.cursor.is_none() || b.cursor.is_none() {
                        assert_eq!(a.cursor.is_none(), b.cursor.is_none(), "{what}");
                        break;
                    }
                    (qa.cursor, qb.cursor) = (a.cursor, b.cursor);
                }
            }
        }
    }
    assert!(
        old_first,
        "the old articles never led: the walk was not tested"
    );
}

/// Calls of two nodes (their upkeep's readiness checks and first requests
/// alike) learn a new site's epoch at the same time as one of them
/// creates it: none may take a read made before the creation for a Redis
/// that lost the site's data (each call judges its read by what its node
/// knew when it read, marker.rs). Before, a call that read no marker
/// while another call of its node created it called the site lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_creating_a_site_together_never_call_it_lost() {
    use hotrank::store::Lifecycle;
    let server = Backend::One(RedisServer::start());
    for round in 0..300 {
        let prefix = format!("race{round}:");
        let nodes: Vec<Arc<RedisStore>> = (0..2)
            .map(|_| Arc::new(redis_store(&server, &prefix, StoreSettings::default())))
            .collect();
        let calls: Vec<_> = nodes
            .iter()
            .flat_map(|n| std::iter::repeat_n(n.clone(), 6))
            .map(|n| tokio::spawn(async move { n.ready().await }))
            .collect();
        for c in calls {
            if let Err(e) = c.await.unwrap() {
                panic!("round {round}: {e}");
            }
        }
    }
}
