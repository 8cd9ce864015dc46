//! `[review] mode = "suspicious"` through a real server over loopback,
//! with client addresses sent as a trusted proxy sends them
//! (`X-Forwarded-For`), on the embedded store, on a redis-server (direct
//! ingest), over a Redis Cluster site split over two shards (the gate and
//! count stages) and through the Redis pipeline (queued, then the filter
//! and count workers):
//!
//! - `narrow`: 100 visitors behind one IPv4 /24, held (`narrow_network`);
//! - `six`: 100 visitors from ten addresses of one IPv6 /64, held;
//! - `dups`: 5 visitors viewing 8 times each (35 of 40 events held back
//!   as duplicates), held (`held_back`);
//! - `wide`: 100 visitors over 100 distinct /24s, and `small`: 10 visitors
//!   of one /24 (under `min_visitors`): served, never queued.
//!
//! A held article is in no public list (`/api/hot`, `/api/new`, the JSON
//! feed, `/api/stream`) until allowed; the queue's evidence is what was sent.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use common::curation::{admin, first_ranking};
use common::redis::{RedisCluster, RedisServer, unique_prefix};
use common::{T0, TestServer, page_ids};
use hotrank::config::{Config, ReviewMode};

fn suspicious(c: &mut Config) {
    c.review.mode = ReviewMode::Suspicious;
    c.trusted_proxies = vec!["127.0.0.1".into()];
    c.gate.visitor_limit_per_minute = 0;
    c.gate.ip_limit_per_minute = 0;
    c.gate.bot_articles_per_minute = 0;
    c.feeds.stream_poll_ms = 50;
}

/// Views of `article` by `visitors` (ids `<article>-<n>`), each `times`
/// times, from client address `from` (through the trusted proxy).
async fn views(
    s: &TestServer,
    article: &str,
    visitors: std::ops::Range<u32>,
    times: u32,
    from: &str,
) {
    let events: Vec<Value> = visitors
        .flat_map(|v| {
            (0..times).map(move |_| {
                json!({"type": "view", "articleId": article, "visitorId": format!("{article}-{v}")})
            })
        })
        .collect();
    let resp = s
        .client
        .post(s.url("/api/events"))
        .header("x-forwarded-for", from)
        .json(&json!({ "events": events }))
        .send()
        .await
        .expect("request");
    assert!(resp.status().is_success(), "{}", resp.status());
}

/// The ids a public list serves.
async fn served(s: &TestServer) -> BTreeMap<&'static str, Vec<String>> {
    let mut out = BTreeMap::new();
    for path in ["/api/hot?limit=50", "/api/new?limit=50"] {
        let (st, v) = s.get(path).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        out.insert(path, page_ids(&v).iter().map(|x| x.to_string()).collect());
    }
    let (st, v) = s.get("/feeds/hot.json?limit=50").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let feed: Vec<String> = v["items"]
        .as_array()
        .expect("feed items")
        .iter()
        .map(|i| i["id"].as_str().unwrap_or_default().to_string())
        .collect();
    out.insert("/feeds/hot.json", feed);
    out.insert("/api/stream", stream_first(s).await);
    out
}

/// The ids of the first ranking `/api/stream` sends.
async fn stream_first(s: &TestServer) -> Vec<String> {
    let data = first_ranking(s, "/api/stream?top=20").await;
    page_ids(&data).iter().map(|x| x.to_string()).collect()
}

fn serves(lists: &BTreeMap<&'static str, Vec<String>>, id: &str) -> Vec<&'static str> {
    lists
        .iter()
        .filter(|(_, ids)| {
            ids.iter()
                .any(|x| x == id || x.ends_with(&format!("/{id}")))
        })
        .map(|(p, _)| *p)
        .collect()
}

/// The scenario on server `s`; `settle` runs after the traffic (the
/// pipeline's workers drain there).
async fn scenario(s: &TestServer, settle: impl AsyncFn()) {
    for id in ["narrow", "six", "dups", "wide", "small"] {
        let (st, b) = s
            .admin_put(
                &format!("/api/articles/{id}"),
                &json!({"title": format!("Article {id}"), "publishedAt": T0 - 600}),
            )
            .await;
        assert!(st.is_success(), "{st} {b}");
    }
    views(s, "narrow", 0..100, 1, "198.51.100.7").await;
    for k in 0..10u32 {
        views(
            s,
            "six",
            k * 10..k * 10 + 10,
            1,
            &format!("2001:db8:1:2::{:x}", k + 1),
        )
        .await;
    }
    for k in 0..5u32 {
        views(s, "dups", k..k + 1, 8, &format!("192.0.{k}.1")).await;
    }
    for k in 0..100u32 {
        views(s, "wide", k..k + 1, 1, &format!("203.0.{k}.9")).await;
    }
    views(s, "small", 0..10, 1, "198.51.101.7").await;
    settle().await;

    let lists = served(s).await;
    for id in ["narrow", "six", "dups"] {
        assert!(
            serves(&lists, id).is_empty(),
            "{id} is held, yet served in {:?}",
            serves(&lists, id)
        );
    }
    for id in ["wide", "small"] {
        assert_eq!(
            serves(&lists, id).len(),
            4,
            "{id} is served everywhere: {lists:?}"
        );
    }

    let (st, q) = admin(s, reqwest::Method::GET, "/api/review?status=all", None).await;
    assert_eq!(st, StatusCode::OK, "{q}");
    assert_eq!(q["mode"], "suspicious");
    let items: BTreeMap<String, Value> = q["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["articleId"].as_str().unwrap().to_string(), i.clone()))
        .collect();
    assert_eq!(
        items.keys().cloned().collect::<Vec<_>>(),
        ["dups", "narrow", "six"],
        "{q}"
    );
    for id in ["narrow", "six"] {
        let n = &items[id]["evidence"]["network"];
        assert_eq!(items[id]["status"], "held");
        assert_eq!(n["rule"], "narrow_network", "{id}: {n}");
        assert_eq!(n["blocks"], 1, "{id}: {n}");
        let uv = n["uv"].as_u64().unwrap();
        assert!((98..=102).contains(&uv), "{id}: 100 visitors sent, uv {uv}");
        assert_eq!(n["counted"], 100, "{id}: {n}");
        assert_eq!(n["heldBack"], 0, "{id}: {n}");
        assert!(n["until"].as_i64().unwrap() > n["from"].as_i64().unwrap());
    }
    let n = &items["dups"]["evidence"]["network"];
    assert_eq!(n["rule"], "held_back", "{n}");
    assert_eq!(
        (n["counted"].as_u64(), n["heldBack"].as_u64()),
        (Some(5), Some(35)),
        "{n}"
    );
    assert_eq!(n["heldShare"], 35.0 / 40.0, "{n}");
    assert_eq!(
        (n["blocks"].as_u64(), n["uv"].as_u64()),
        (Some(5), Some(5)),
        "{n}"
    );

    // Allowed: served from then on; denied: stays out.
    for (id, d) in [("narrow", "allow"), ("six", "deny")] {
        let (st, v) = admin(
            s,
            reqwest::Method::POST,
            &format!("/api/review/{id}"),
            Some(json!({"decision": d})),
        )
        .await;
        assert_eq!(st, StatusCode::OK, "{v}");
    }
    let lists = served(s).await;
    // (A stream's list is recomputed every `feeds.stream_poll_ms`: the
    // allowed article shows in it from the next one on.)
    for path in ["/api/hot?limit=50", "/api/new?limit=50", "/feeds/hot.json"] {
        assert!(
            serves(&lists, "narrow").contains(&path),
            "allowed: {lists:?}"
        );
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !stream_first(s).await.iter().any(|x| x == "narrow") {
        assert!(
            std::time::Instant::now() < deadline,
            "allowed: in the stream"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(serves(&lists, "six").is_empty(), "denied: {lists:?}");
    assert!(serves(&lists, "dups").is_empty(), "still held: {lists:?}");

    let metrics = s.client.get(s.url("/metrics")).send().await.unwrap();
    let text = metrics.text().await.unwrap();
    assert!(text.contains("# HELP hotrank_review_holds_total"), "HELP");
    for reason in ["narrow_network", "held_back"] {
        assert!(
            text.lines().any(|l| l.starts_with(&format!(
                "hotrank_review_holds_total{{reason=\"{reason}\"}}"
            ))),
            "holds by reason {reason}"
        );
    }
}

async fn nothing() {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_holds_narrow_rises_with_their_evidence() {
    let s = TestServer::start_with(suspicious).await;
    scenario(&s, nothing).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_holds_narrow_rises_with_their_evidence() {
    let r = RedisServer::start();
    let s =
        TestServer::start_redis(Arc::new(tempfile::tempdir().unwrap()), &r.url(), suspicious).await;
    scenario(&s, nothing).await;
    // The evidence keys (docs/redis-keys.md) expire with the hour's bucket.
    let mut c = r.connection();
    let hour = T0.div_euclid(3600);
    let ttl = |c: &mut redis::Connection, key: String| -> i64 {
        redis::cmd("TTL").arg(&key).query(c).unwrap()
    };
    let bucket = ttl(&mut c, format!("bucket:h:narrow:{hour}"));
    assert!(bucket > 3600, "bucket TTL {bucket}");
    for name in ["hll:net:h", "hll:netuv:h"] {
        let t = ttl(&mut c, format!("{name}:narrow:{hour}"));
        assert!(
            (bucket - t).abs() <= 2,
            "{name}: TTL {t}, its bucket's {bucket}"
        );
    }
    // No address and no block in clear: the sketches hold hashes.
    let keys: Vec<String> = redis::cmd("KEYS").arg("*198.51*").query(&mut c).unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

/// A site split over two shards of a cluster: the gate stage's outbox
/// carries each view's block to its shard's count stage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_split_site_holds_narrow_rises() {
    let cluster = RedisCluster::shared();
    let s = TestServer::start_redis(
        Arc::new(tempfile::tempdir().unwrap()),
        &cluster.url(),
        |c| {
            suspicious(c);
            c.redis.cluster = true;
            c.redis.shards = 2;
            c.redis.prefix = unique_prefix();
        },
    )
    .await;
    scenario(&s, nothing).await;
}

/// Through the pipeline: the raw entry carries the block (in its ip
/// field), the flagged entry too, and the count worker writes the
/// sketches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeline_holds_narrow_rises() {
    use hotrank::pipeline::{IngestPipeline, PipelineStore};
    use hotrank::store::StoreSettings;
    use hotrank::store::redis::{RedisOptions, RedisStore};
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let mut c = common::test_config(dir.path());
    c.store = hotrank::config::StoreKind::Redis;
    c.redis.url = RedisServer::shared().url();
    c.redis.prefix = unique_prefix();
    c.pipeline.enabled = true;
    c.pipeline.partitions = 2;
    c.pipeline.block_ms = 5;
    suspicious(&mut c);
    let store = Arc::new(
        RedisStore::connect(
            RedisOptions::from_config(&c),
            StoreSettings::from_config(&c),
        )
        .expect("redis store"),
    );
    let pipe = Arc::new(IngestPipeline::new(store, c.pipeline.clone()));
    pipe.ensure_groups().await.unwrap();
    let s = TestServer::start_queued(dir, c, Arc::new(PipelineStore::new(pipe.clone())), T0).await;
    let workers = hotrank::pipeline::spawn_workers(&pipe, 1, 1);
    scenario(&s, async || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !pipe.drained().await.unwrap() {
            assert!(std::time::Instant::now() < deadline, "the pipeline drains");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    workers.stop().await;
}

/// With review not `suspicious`, nothing of the evidence is kept: the
/// same traffic (through the trusted proxy) writes no `hll:net` key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_modes_keep_no_evidence() {
    let r = RedisServer::start();
    let s = TestServer::start_redis(Arc::new(tempfile::tempdir().unwrap()), &r.url(), |c| {
        suspicious(c);
        c.review.mode = ReviewMode::NewEntries;
    })
    .await;
    views(&s, "narrow", 0..100, 1, "198.51.100.7").await;
    let mut c = r.connection();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*net*").query(&mut c).unwrap();
    assert!(keys.is_empty(), "{keys:?}");
    let uv: Vec<String> = redis::cmd("KEYS").arg("hll:uv:h:*").query(&mut c).unwrap();
    assert_eq!(uv.len(), 1, "the views were counted");
}
