//! Seed 002's counting pipeline on Redis Streams (docs/design.md,
//! "Pipeline"), against one real `redis-server` for the whole binary:
//! the pipeline ends where the direct Redis store ends for the same
//! events; workers killed between named steps (`HOTRANK_CRASH_AT`, real
//! `hotrank worker` processes) or with SIGKILL at random points change no
//! count; a full backlog answers 503 and loses nothing.
//!
//! The events are built so that every verdict and tally is independent of
//! the order in which the gate sees them (rate limits and the behaviour
//! rule off, replays only among identical events, every article created
//! first): partitions, several consumers of one partition, and claimed
//! entries redone late all gate in another order than arrival.
//! `HOTRANK_LONG=1` runs longer randomized kill runs.

mod common;

use hotrank::store::Queue;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::StatusCode;
use serde_json::json;

use common::redis::{RedisCluster, RedisServer, unique_prefix};
use common::{T0, TestServer, test_config};
use hotrank::config::{Config, PipelineConfig, StoreKind};
use hotrank::model::Outcome;
use hotrank::model::{ArticleId, ArticleMeta, Event, EventType, ModelKind, RangeSpec, Verdict};
use hotrank::pipeline::{IngestPipeline, PipelineStore, Role};
use hotrank::store::redis::{RedisOptions, RedisStore};
use hotrank::store::{IngestReject, Store, StoreSettings};

const ARTICLES: u64 = 12;

/// Where a test's site lives: the binary's one `redis-server`, or its
/// 3-primary cluster (the site's keys in one slot: `[redis] shards = 1`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum On {
    One,
    Cluster,
}

fn config(prefix: &str, pipe: PipelineConfig) -> Config {
    config_on(On::One, prefix, pipe)
}

fn config_on(on: On, prefix: &str, pipe: PipelineConfig) -> Config {
    let mut c = test_config(std::path::Path::new("/nonexistent"));
    c.store = StoreKind::Redis;
    match on {
        On::One => c.redis.url = RedisServer::shared().url(),
        On::Cluster => {
            c.redis.url = RedisCluster::shared().url();
            c.redis.cluster = true;
        }
    }
    c.redis.prefix = prefix.to_string();
    c.gate.visitor_limit_per_minute = 0;
    c.gate.ip_limit_per_minute = 0;
    c.gate.bot_articles_per_minute = 0;
    c.pipeline = pipe;
    c
}

fn pipe_config() -> PipelineConfig {
    PipelineConfig {
        enabled: true,
        partitions: 3,
        batch: 40,
        claim_idle_ms: 300,
        block_ms: 5,
        trim_every_ms: 50,
        ..PipelineConfig::default()
    }
}

fn redis_store(c: &Config) -> Arc<RedisStore> {
    Arc::new(
        RedisStore::connect(RedisOptions::from_config(c), StoreSettings::from_config(c))
            .expect("redis store"),
    )
}

/// A site on the shared Redis: the direct store under one prefix and the
/// pipeline under another, fed the same events.
struct Pair {
    direct: Arc<RedisStore>,
    pipe: Arc<IngestPipeline>,
    config: Config,
}

impl Pair {
    async fn new(pipe: PipelineConfig) -> Pair {
        Pair::on(On::One, pipe).await
    }

    async fn on(on: On, pipe: PipelineConfig) -> Pair {
        let direct = redis_store(&config_on(on, &unique_prefix(), PipelineConfig::default()));
        let config = config_on(on, &unique_prefix(), pipe);
        config.validate().expect("a valid config");
        let pipe = Arc::new(IngestPipeline::new(
            redis_store(&config),
            config.pipeline.clone(),
        ));
        pipe.ensure_groups().await.expect("groups");
        // Every article exists before the first event: quarantine is
        // tallied on an article only from its existence on, which would
        // make tallies depend on the order batches are gated in.
        for n in 0..ARTICLES {
            let meta = ArticleMeta {
                published_at: T0 - 3600,
                ..ArticleMeta::default()
            };
            for store in [&direct, pipe.store()] {
                store
                    .put_article(ArticleId::from_number(n), meta.clone(), T0)
                    .await
                    .expect("put");
            }
        }
        Pair {
            direct,
            pipe,
            config,
        }
    }

    /// The same events to both sides (the direct store in arrival order).
    async fn send(&self, events: &[Event]) {
        for chunk in events.chunks(25) {
            self.direct
                .ingest(chunk.to_vec(), T0)
                .await
                .expect("direct ingest");
            self.pipe.append(chunk.to_vec(), T0).await.expect("append");
        }
    }

    /// Both sides hold the same counters, quarantine and totals.
    async fn assert_same(&self) {
        let store = self.pipe.store();
        let (a, b) = (
            self.direct.stats(T0, 24).await.unwrap(),
            store.stats(T0, 24).await.unwrap(),
        );
        assert_eq!(a.counted, b.counted, "counted");
        assert_eq!(a.quarantined, b.quarantined, "quarantine");
        assert_eq!(a.articles, b.articles, "articles");
        for n in 0..ARTICLES {
            let id = ArticleId::from_number(n);
            let (x, y) = (
                self.direct.article(&id, T0).await.unwrap(),
                store.article(&id, T0).await.unwrap(),
            );
            match (x, y) {
                (None, None) => {}
                (Some(x), Some(y)) => {
                    assert_eq!(x.lifetime, y.lifetime, "article {n}");
                    assert_eq!(x.quarantined, y.quarantined, "article {n} quarantine");
                    assert_eq!(x.scores, y.scores, "article {n} scores");
                }
                (x, y) => panic!("article {n}: {x:?} vs {y:?}"),
            }
        }
        let q = hotrank::model::HotQuery::top(ModelKind::Gravity, RangeSpec::Hours(24), 50);
        let (x, y) = (
            self.direct.hot(&q, T0).await.unwrap(),
            store.hot(&q, T0).await.unwrap(),
        );
        let ids = |p: &hotrank::model::HotPage| -> Vec<String> {
            p.items.iter().map(|i| i.id.to_string()).collect()
        };
        assert_eq!(ids(&x), ids(&y), "hot list");
    }

    /// Waits until no stream holds an unacknowledged entry.
    async fn drain(&self) {
        let started = Instant::now();
        while !self.pipe.drained().await.expect("lag") {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "pipeline did not drain: {:?}",
                self.pipe.lag().await
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A `hotrank worker` process on the pipeline side.
    fn worker(&self, role: &str, crash_at: Option<&str>) -> Child {
        self.worker_cmd(role, crash_at)
            .spawn()
            .expect("start hotrank worker")
    }

    /// Environment of a `hotrank worker` process on the pipeline side.
    fn worker_cmd(&self, role: &str, crash_at: Option<&str>) -> Command {
        let dir = tempfile::tempdir().unwrap().keep();
        let path = dir.join("hotrank.toml");
        let c = &self.config;
        let p = &c.pipeline;
        std::fs::write(
            &path,
            format!(
                "[gate]\nvisitor_limit_per_minute = 0\nip_limit_per_minute = 0\nbot_articles_per_minute = 0\n\
                 [pipeline]\npartitions = {}\nbatch = {}\nclaim_idle_ms = {}\nblock_ms = {}\ntrim_every_ms = {}\n",
                p.partitions, p.batch, p.claim_idle_ms, p.block_ms, p.trim_every_ms
            ),
        )
        .unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hotrank"));
        let store = if c.redis.cluster {
            "redis-cluster"
        } else {
            "redis"
        };
        cmd.args(["worker", role])
            .env("HOTRANK_CONFIG", &path)
            .env("HOTRANK_STORE", store)
            .env("HOTRANK_REDIS_URL", &c.redis.url)
            .env("HOTRANK_REDIS_PREFIX", &c.redis.prefix)
            .env("HOTRANK_DATA_DIR", &dir)
            .env("RUST_LOG", "warn")
            .env_remove("HOTRANK_CRASH_AT");
        if let Some(step) = crash_at {
            cmd.env("HOTRANK_CRASH_AT", step);
        }
        cmd
    }
}

/// An API node on the pipeline (one partition, `edit`ed), no workers.
async fn api_node(edit: impl FnOnce(&mut PipelineConfig)) -> (TestServer, Arc<IngestPipeline>) {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let mut pc = pipe_config();
    pc.partitions = 1;
    edit(&mut pc);
    let mut c = config(&unique_prefix(), pc.clone());
    c.data_dir = dir.path().to_path_buf();
    let pipe = Arc::new(IngestPipeline::new(redis_store(&c), pc));
    pipe.ensure_groups().await.unwrap();
    let store = Arc::new(PipelineStore::new(pipe.clone()));
    (TestServer::start_queued(dir, c, store, T0).await, pipe)
}

/// Events whose verdicts do not depend on the order the gate sees them:
/// repeated (article, visitor, kind) at one ts (one counted, the rest
/// duplicates), eventIds only on identical copies (one counted, the rest
/// replayed), bots, and dwell and comments (never deduplicated).
fn events(seed: u64, n: usize) -> Vec<Event> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let r = rng.random_range(0..10);
            let article = ArticleId::from_number(rng.random_range(0..ARTICLES));
            let visitor = rng.random_range(0..40u128);
            let mut ev = Event {
                ip: rng.random_range(0..5u64),
                arrival_ms: T0 * 1000 + i as i64,
                ..Event::view(article, visitor, T0)
            };
            match r {
                0 => {
                    // A replayed copy: key k always names the same event.
                    let k = rng.random_range(0..8u64);
                    ev.article = ArticleId::from_number(k % ARTICLES);
                    ev.visitor = 10_000 + u128::from(k);
                    ev.event_id = Some(u128::from(k) + 1);
                }
                1 => ev.bot = hotrank::crawler::Crawler::OTHER,
                2 => ev.kind = EventType::Like,
                3 => {
                    ev.kind = EventType::Dwell;
                    ev.seconds = rng.random_range(1..100);
                }
                4 => ev.kind = EventType::Comment,
                _ => {}
            }
            ev
        })
        .collect()
}

one_and_cluster!(
    pipeline_ends_where_the_direct_store_ends,
    On::One,
    On::Cluster
);
async fn pipeline_ends_where_the_direct_store_ends(on: On) {
    // Nothing trimmed: every entry stays to be delivered again below.
    let pair = Pair::on(
        on,
        PipelineConfig {
            trim_every_ms: 600_000,
            ..pipe_config()
        },
    )
    .await;
    let evs = events(1, 600);
    pair.send(&evs).await;
    // Nothing counted before a worker ran.
    assert_eq!(pair.pipe.store().stats(T0, 24).await.unwrap().counted, 0);
    let workers = hotrank::pipeline::spawn_workers(&pair.pipe, 2, 2);
    pair.drain().await;
    workers.stop().await;
    pair.assert_same().await;
    // Delivered again (a claim racing a slow worker): nothing changes.
    for role in [Role::Filter, Role::Count] {
        let (done, seen) = pair.pipe.reprocess_all(role).await.unwrap();
        assert_eq!(seen, 600, "every entry was delivered again");
        assert_eq!(done, 0, "and none was processed twice");
    }
    pair.assert_same().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_answers_queued_and_stats_show_the_pipeline() {
    let (server, pipe) = api_node(|_| {}).await;
    let (status, body) = server
        .post("/api/views", &json!({"articleId": "a1", "visitorId": "u1"}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["verdict"], "queued");
    let (status, body) = server
        .post(
            "/api/events",
            &json!({"events": [
                {"type": "view", "articleId": "a1", "visitorId": "u1"},
                {"type": "like", "articleId": "a2", "visitorId": "u2"},
                {"type": "nope", "articleId": "a2"}
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["queued"], 2);
    assert_eq!(body["errors"][0]["index"], 2);
    let (_, stats) = server.get("/api/stats").await;
    assert_eq!(stats["counted"], 0);
    assert_eq!(stats["pipeline"]["backlog"], 3, "{stats}");
    let workers = hotrank::pipeline::spawn_workers(&pipe, 1, 1);
    eventually("drained", async || {
        server.get("/api/stats").await.1["pipeline"]["backlog"] == 0
    })
    .await;
    let (_, stats) = server.get("/api/stats").await;
    assert_eq!(stats["counted"], 2, "{stats}");
    assert_eq!(stats["quarantined"]["duplicate"], 1, "{stats}");
    // Verdicts by eventId: counted if any copy counted.
    let (status, _) = server.get("/api/events/never-sent").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let ev = |v: &str| json!({"type": "view", "articleId": "a3", "visitorId": v, "eventId": "k1"});
    let body = json!({"events": [ev("x"), ev("x")]});
    assert_eq!(
        server.post("/api/events", &body).await.0,
        StatusCode::ACCEPTED
    );
    eventually("k1 decided", async || {
        server.get("/api/events/k1").await.0 == StatusCode::OK
    })
    .await;
    assert_eq!(
        server.get("/api/events/k1").await.1,
        json!({"eventId": "k1", "verdict": "counted"})
    );
    // A bot's event (its user agent): the verdict says so.
    let resp = server
        .client
        .post(server.url("/api/events"))
        .header("user-agent", "curl/8.0")
        .json(&json!({"events": [{"type": "view", "articleId": "a4", "visitorId": "y", "eventId": "k2"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    eventually("k2 decided", async || {
        server.get("/api/events/k2").await.0 == StatusCode::OK
    })
    .await;
    assert_eq!(server.get("/api/events/k2").await.1["verdict"], "bot");
    let (_, a1) = server.get("/api/articles/a1").await;
    assert_eq!(a1["pv"], 1, "{a1}");
    let (_, hot) = server.get("/api/hot?limit=5").await;
    assert!(
        hot["items"].as_array().is_some_and(|i| !i.is_empty()),
        "{hot}"
    );
    let metrics = server.text("/metrics").await;
    assert!(metrics.contains("hotrank_events_queued_total"), "{metrics}");
    workers.stop().await;
}

/// The HTTP answers of a pipeline node, once drained, are the direct
/// Redis node's for the same requests: stats, every article, and the
/// hot list of every model (both nodes share one identity key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_answers_after_draining_match_the_direct_store() {
    let (piped, pipe) = api_node(|pc| pc.partitions = 3).await;
    let direct = {
        let c = config(&unique_prefix(), PipelineConfig::default());
        let mut c = c;
        c.data_dir = piped.dir.path().to_path_buf();
        let store = redis_store(&c);
        TestServer::start_with_store(piped.dir.clone(), c, store, T0).await
    };
    let mut rng = StdRng::seed_from_u64(5);
    for _ in 0..12 {
        let batch: Vec<serde_json::Value> = (0..40)
            .map(|_| {
                let a = format!("h{}", rng.random_range(0..6));
                let v = format!("r{}", rng.random_range(0..15));
                match rng.random_range(0..6) {
                    0 => json!({"type": "like", "articleId": a, "visitorId": v}),
                    1 => json!({"type": "dwell", "articleId": a, "visitorId": v, "seconds": 30}),
                    2 => json!({"type": "comment", "articleId": a, "visitorId": v}),
                    3 => {
                        // Copies of one event: one counted, the rest replayed.
                        let k = rng.random_range(0..4);
                        json!({"type": "view", "articleId": format!("h{k}"), "visitorId": format!("e{k}"), "eventId": format!("id{k}")})
                    }
                    _ => json!({"type": "view", "articleId": a, "visitorId": v}),
                }
            })
            .collect();
        let body = json!({"events": batch});
        assert_eq!(direct.post("/api/events", &body).await.0, StatusCode::OK);
        assert_eq!(
            piped.post("/api/events", &body).await.0,
            StatusCode::ACCEPTED
        );
    }
    let workers = hotrank::pipeline::spawn_workers(&pipe, 1, 1);
    eventually("drained", async || pipe.drained().await.unwrap()).await;
    workers.stop().await;
    let (_, mut stats) = piped.get("/api/stats").await;
    assert_eq!(stats["pipeline"]["backlog"], 0);
    stats.as_object_mut().unwrap().remove("pipeline");
    assert_eq!(direct.get("/api/stats").await.1, stats);
    for n in 0..6 {
        let path = format!("/api/articles/h{n}");
        assert_eq!(direct.get(&path).await, piped.get(&path).await, "{path}");
    }
    for model in ["gravity", "weighted", "window", "votes"] {
        let path = format!("/api/hot?model={model}&limit=10");
        let (mut a, mut b) = (direct.get(&path).await.1, piped.get(&path).await.1);
        for page in [&mut a, &mut b] {
            page.as_object_mut().unwrap().remove("cursor");
        }
        assert_eq!(a, b, "{path}");
        assert!(a["items"].as_array().is_some_and(|i| !i.is_empty()), "{a}");
    }
}

// Kills a real worker process at each named step; the entries it held
// are claimed by others after `claim_idle_ms`, and nothing is counted
// twice or lost.
one_and_cluster!(
    a_worker_crashed_between_any_two_steps_changes_no_count,
    On::One,
    On::Cluster
);
async fn a_worker_crashed_between_any_two_steps_changes_no_count(on: On) {
    // Each run: crash workers of `role` at these steps, one after the
    // other (a claim needs entries a crashed worker left pending).
    for (role, steps) in [
        ("filter", &["filter:read"][..]),
        ("filter", &["filter:done"][..]),
        ("filter", &["filter:read", "filter:claimed"][..]),
        ("count", &["count:read"][..]),
        ("count", &["count:done"][..]),
        ("count", &["count:read", "count:claimed"][..]),
    ] {
        let pair = Pair::on(on, pipe_config()).await;
        let evs = events(7, 200);
        pair.send(&evs).await;
        // The count side needs flagged entries before its crash.
        let mut helper = if role == "count" {
            let w = hotrank::pipeline::spawn_workers(&pair.pipe, 1, 0);
            Some(w)
        } else {
            None
        };
        if helper.is_some() {
            eventually("raw streams gated", async || {
                pair.pipe
                    .lag()
                    .await
                    .unwrap()
                    .iter()
                    .all(|l| l.group != "filter" || l.pending + l.unread == 0)
            })
            .await;
        }
        for step in steps {
            let mut child = pair.worker(role, Some(step));
            let status = wait_exit(&mut child, Duration::from_secs(20));
            assert!(
                !status.success(),
                "{step}: the worker was to abort there: {status:?}"
            );
        }
        if let Some(w) = helper.take() {
            w.stop().await;
        }
        // The rest, by healthy workers (claims after claim_idle_ms).
        let workers = hotrank::pipeline::spawn_workers(&pair.pipe, 1, 1);
        pair.drain().await;
        workers.stop().await;
        pair.assert_same().await;
    }
}

// A call's entries are looked up among the pending ones with one range
// read (pipe_undone.lua): batches of scattered entries, batches that
// repeat decided ones, and a range holding more pending entries than
// that read returns (the entries past it asked alone) decide each entry
// once, in both stages.
one_and_cluster!(
    scattered_and_repeated_batches_decide_each_entry_once,
    On::One,
    On::Cluster
);
async fn scattered_and_repeated_batches_decide_each_entry_once(on: On) {
    let pair = Pair::on(
        on,
        PipelineConfig {
            partitions: 1,
            batch: 200,
            trim_every_ms: 600_000,
            ..pipe_config()
        },
    )
    .await;
    pair.send(&events(21, 200)).await;
    for role in [Role::Filter, Role::Count] {
        let read = pair.pipe.read(role, "c1").await.unwrap();
        assert_eq!(read.len(), 1, "{role:?}: one partition");
        let (n, all) = read.into_iter().next().unwrap();
        assert_eq!(all.len(), 200, "{role:?}: every entry in one read");
        let process = async |batch: Vec<hotrank::pipeline::Entry>| {
            pair.pipe.process(role, n, batch).await.unwrap()
        };
        // First and last: 200 pending in their range, more than the
        // range read returns for 2 entries (2 * 2 + 64).
        assert_eq!(process(vec![all[0].clone(), all[199].clone()]).await, 2);
        // Every second one, highest first (the first was decided).
        let evens: Vec<_> = all.iter().step_by(2).rev().cloned().collect();
        assert_eq!(process(evens).await, 99);
        // Each entry twice in one batch: the 99 left, once each.
        let twice: Vec<_> = all.iter().chain(all.iter()).cloned().collect();
        assert_eq!(process(twice).await, 99);
        assert_eq!(process(all.clone()).await, 0, "{role:?}: nothing twice");
    }
    assert!(pair.pipe.drained().await.unwrap());
    pair.assert_same().await;
}

/// On a cluster each filter call names the gate's slots of the gate clock
/// as its worker last learnt it: a worker whose clock is a day ahead
/// names the wrong ones, is answered `gateclock` having written nothing,
/// learns the site's gate clock and sends the call again. Every event is
/// decided once, as the direct store decides it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_worker_a_day_ahead_learns_the_gate_clock_cluster() {
    let Some(lib) = common::tools::libfaketime() else {
        return;
    };
    let pair = Pair::on(On::Cluster, pipe_config()).await;
    let evs = events(31, 300);
    pair.send(&evs).await;
    let filter = pair
        .worker_cmd("filter", None)
        .env("LD_PRELOAD", lib)
        .env("FAKETIME", "+1d")
        // Tokio's timers keep the real monotonic clock.
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .spawn()
        .expect("start hotrank worker");
    let count = pair.worker("count", None);
    // Killed even when the drain fails.
    let _workers = Killed(vec![filter, count]);
    pair.drain().await;
    pair.assert_same().await;
}

/// Child processes killed when dropped.
struct Killed(Vec<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for p in &mut self.0 {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

// SIGKILL at random points while events arrive; restarts; every event
// counted or quarantined exactly once.
one_and_cluster!(kill_9_under_load_changes_no_count, On::One, On::Cluster);
async fn kill_9_under_load_changes_no_count(on: On) {
    let long = std::env::var("HOTRANK_LONG").is_ok();
    let rounds = if long { 40 } else { 6 };
    let pair = Pair::on(on, pipe_config()).await;
    let mut rng = StdRng::seed_from_u64(11);
    let mut procs: Vec<(&str, Child)> = vec![
        ("filter", pair.worker("filter", None)),
        ("count", pair.worker("count", None)),
    ];
    let mut sent = 0;
    for round in 0..rounds {
        let evs = events(100 + round, 150);
        sent += evs.len();
        pair.send(&evs).await;
        tokio::time::sleep(Duration::from_millis(rng.random_range(20..200))).await;
        let i = rng.random_range(0..procs.len());
        let role = procs[i].0;
        let _ = procs[i].1.kill();
        let _ = procs[i].1.wait();
        procs[i] = (role, pair.worker(role, None));
    }
    pair.drain().await;
    for (_, mut p) in procs {
        let _ = p.kill();
        let _ = p.wait();
    }
    let stats = pair.pipe.store().stats(T0, 24).await.unwrap();
    assert_eq!(
        stats.counted + stats.quarantined.total(),
        sent as u64,
        "every event has exactly one verdict"
    );
    pair.assert_same().await;
}

/// Workers stopped: appends fill a partition to `max_backlog`, then 503
/// with `Retry-After` and nothing queued; workers drain it and every
/// acknowledged event is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_backlog_answers_503_and_loses_nothing() {
    let (server, pipe) = api_node(|pc| pc.max_backlog = 30).await;
    let mut accepted = 0;
    let mut refused = 0;
    for i in 0..20 {
        let body = json!({"events": [
            {"type": "view", "articleId": format!("b{}", i % 3), "visitorId": format!("v{i}")},
            {"type": "comment", "articleId": "b0", "visitorId": format!("v{i}")}
        ]});
        let resp = server
            .client
            .post(server.url("/api/events"))
            .json(&body)
            .send()
            .await
            .unwrap();
        if resp.status() == StatusCode::ACCEPTED {
            accepted += 2;
        } else {
            assert!(resp.headers().contains_key("retry-after"));
            common::expect_error(resp, StatusCode::SERVICE_UNAVAILABLE, "store_unavailable").await;
            refused += 1;
        }
    }
    assert_eq!(accepted, 30, "the bound is exact");
    assert_eq!(refused, 5);
    let workers = hotrank::pipeline::spawn_workers(&pipe, 1, 1);
    eventually("every accepted event counted", async || {
        server.get("/api/stats").await.1["counted"] == accepted
    })
    .await;
    // Drained and trimmed: room again.
    eventually("room again", async || {
        let body = json!({"articleId": "b9", "visitorId": "late"});
        server.post("/api/views", &body).await.0 == StatusCode::ACCEPTED
    })
    .await;
    workers.stop().await;
}

/// Polls `check` until it holds; fails after 20 s.
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !check().await {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("worker did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The README's `[pipeline]` block shows the real defaults.
#[test]
fn readme_documents_every_pipeline_default() {
    let c = PipelineConfig::default();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for line in [
        format!("enabled = {}", c.enabled),
        format!("roles = {:?}", c.roles),
        format!("partitions = {}", c.partitions),
        format!("batch = {}", c.batch),
        format!("claim_idle_ms = {}", c.claim_idle_ms),
        format!("max_backlog = {}", c.max_backlog),
        format!("block_ms = {}", c.block_ms),
        format!("trim_every_ms = {}", c.trim_every_ms),
        format!("workers = {}", c.workers),
        format!("log_url = {:?}", c.log_url),
        format!("journal_keep_secs = {}", c.journal_keep_secs),
    ] {
        assert!(readme.contains(&line), "README lacks `{line}`");
    }
}

/// Events the filter stage refuses (`require_known_articles`,
/// `max_articles`) have no article to be tallied on: `/api/stats` counts
/// them by reason in `pipeline.refused`, and nothing else changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_tallied_by_reason() {
    let mut c = config(&unique_prefix(), pipe_config());
    c.require_known_articles = true;
    let pipe = Arc::new(IngestPipeline::new(redis_store(&c), c.pipeline.clone()));
    pipe.ensure_groups().await.unwrap();
    let store = PipelineStore::new(pipe.clone());
    let known = ArticleId::from_number(1);
    store
        .put_article(known.clone(), ArticleMeta::default(), T0)
        .await
        .unwrap();
    let events: Vec<Event> = (0..30u64)
        .map(|i| Event {
            ip: i,
            ..Event::view(ArticleId::from_number(i % 3), u128::from(i), T0)
        })
        .collect();
    store.enqueue(events, T0).await.unwrap();
    let workers = hotrank::pipeline::spawn_workers(&pipe, 1, 1);
    eventually("drained", async || pipe.drained().await.unwrap()).await;
    workers.stop().await;
    let stats = Queue::status(&store).await.unwrap();
    assert_eq!(
        json!(stats)["refused"],
        json!({"unknownArticle": 20, "tooManyArticles": 0})
    );
    assert_eq!(store.stats(T0, 1).await.unwrap().counted, 10);
    assert!(
        store
            .article(&ArticleId::from_number(2), T0)
            .await
            .unwrap()
            .is_none()
    );
}

/// `PipelineStore::ingest` (the tools' path: verdicts now) queues, waits
/// for its events' verdicts while workers of its own and others run, and
/// answers only once they are applied: the verdicts are the direct
/// store's for the same events, and the counts are visible on return.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_answers_verdicts_once_applied() {
    let mut pc = pipe_config();
    pc.partitions = 1;
    let pair = Pair::new(pc).await;
    let store = PipelineStore::new(pair.pipe.clone());
    let workers = hotrank::pipeline::spawn_workers(&pair.pipe, 1, 1);
    let mut counted = 0;
    for seed in 0..4 {
        let evs = events(100 + seed, 150);
        let want = pair.direct.ingest(evs.clone(), T0).await.unwrap();
        let got = store.ingest(evs, T0).await.unwrap();
        assert_eq!(got.len(), want.len());
        // Two consumers take turns on a call's entries, so which copy of a
        // replayed event counts may differ; how many of each may not.
        let tally = |v: &[Result<Outcome, IngestReject>]| {
            let mut t: Vec<String> = v
                .iter()
                .map(|o| format!("{:?}", o.as_ref().map(|o| o.verdict)))
                .collect();
            t.sort();
            t
        };
        assert_eq!(tally(&got), tally(&want));
        counted += got
            .iter()
            .filter(|o| o.as_ref().is_ok_and(|o| o.verdict == Verdict::Counted))
            .count() as u64;
        assert_eq!(store.stats(T0, 1).await.unwrap().counted, counted);
    }
    workers.stop().await;
}
