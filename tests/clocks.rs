//! Clocks that disagree or step back: API nodes 20 s apart across UTC
//! midnight and a 120 s slot turn of the gate, a node whose clock steps
//! back, and the embedded store's clock stepping back.
//!
//! The Redis tests run real `hotrank serve` processes on one real
//! `redis-server`, each node's clock faked by libfaketime (`pip install
//! libfaketime` ships the library; `HOTRANK_LIBFAKETIME` may name it):
//! the node reads its offset from a file the test rewrites, so a clock
//! moves, or steps back, while the node runs. Without libfaketime they
//! are skipped, unless the environment variable `CI` is set: then they
//! fail.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::StatusCode;
use serde_json::{Value, json};

use common::redis::{RedisServer, unique_prefix};
use common::tools::libfaketime;
use common::{BROWSER_UA, TEST_IDENTITY_KEY, TestServer};

fn real_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64
}

/// A UTC midnight at least `margin` seconds ahead of the real clock: also
/// a turn of every 120 s gate slot (86 400 = 720 × 120).
fn next_midnight(margin: i64) -> i64 {
    (real_now() + margin).div_euclid(86_400) * 86_400 + 86_400
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// A `hotrank serve` process on a Redis site, its clock faked.
struct Node {
    child: Child,
    base: String,
    client: reqwest::Client,
    /// libfaketime's offset from the real clock (`+N` / `-N` seconds).
    offset_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Node {
    async fn start(lib: &std::path::Path, redis_url: &str, prefix: &str) -> Node {
        Node::start_with(lib, redis_url, prefix, &[]).await
    }

    /// [`Node::start`] with more environment (`HOTRANK_*` settings).
    async fn start_with(
        lib: &std::path::Path,
        redis_url: &str,
        prefix: &str,
        env: &[(&str, &str)],
    ) -> Node {
        let dir = tempfile::tempdir().expect("temp dir");
        // Every node of a site shares the identity key.
        std::fs::write(dir.path().join("identity.key"), TEST_IDENTITY_KEY).expect("identity");
        let offset_file = dir.path().join("faketime");
        std::fs::write(&offset_file, "+0").expect("offset");
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_hotrank"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .env("HOTRANK_STORE", "redis")
            .env("HOTRANK_REDIS_URL", redis_url)
            .env("HOTRANK_REDIS_PREFIX", prefix)
            .env("HOTRANK_DATA_DIR", dir.path())
            .env("HOTRANK_ADMIN_TOKEN", common::ADMIN)
            .env("RUST_LOG", "warn")
            .env("LD_PRELOAD", lib)
            .env("FAKETIME_TIMESTAMP_FILE", &offset_file)
            .env("FAKETIME_NO_CACHE", "1")
            // Tokio's timers keep the real monotonic clock.
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start hotrank serve");
        let node = Node {
            child,
            base: format!("http://127.0.0.1:{port}"),
            client: reqwest::Client::builder()
                .user_agent(BROWSER_UA)
                .build()
                .expect("client"),
            offset_file,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = node.client.get(node.url("/readyz")).send().await
                && r.status() == StatusCode::OK
            {
                return node;
            }
            assert!(Instant::now() < deadline, "hotrank serve did not get ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sets the node's clock to `at` now (it runs on from there).
    fn set_clock(&self, at: i64) {
        let offset = at - real_now();
        std::fs::write(&self.offset_file, format!("{offset:+}")).expect("offset");
    }

    /// The node's own clock, as a query answers it (`generatedAt`) while
    /// nothing was counted and no node with a later clock queried.
    async fn clock(&self) -> i64 {
        let r = (self.client.get(self.url("/api/hot?range=1h&limit=1")))
            .send()
            .await
            .expect("GET /api/hot");
        let body: Value = r.json().await.expect("json");
        body["generatedAt"].as_i64().expect("generatedAt")
    }

    /// Sends `events` in one batch; returns the verdict counts.
    async fn send(&self, events: &[Value]) -> Value {
        self.post_events(events, StatusCode::OK).await["verdicts"].clone()
    }

    /// Queues `events` in one batch (a node on the ingest pipeline).
    async fn queue(&self, events: &[Value]) {
        self.post_events(events, StatusCode::ACCEPTED).await;
    }

    async fn post_events(&self, events: &[Value], status: StatusCode) -> Value {
        let r = (self.client.post(self.url("/api/events")))
            .json(&json!({ "events": events }))
            .send()
            .await
            .expect("POST /api/events");
        assert_eq!(r.status(), status);
        let body: Value = r.json().await.expect("json");
        assert_eq!(body["errors"], json!([]), "{body}");
        body
    }

    /// `/api/stats` once `done` holds for it (the pipeline's workers
    /// gated and counted what was queued); panics after 30 s.
    async fn stats_once(&self, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = (self.client.get(self.url("/api/stats")))
                .send()
                .await
                .expect("GET /api/stats");
            let body: Value = r.json().await.expect("json");
            if done(&body) {
                return body;
            }
            assert!(
                Instant::now() < deadline,
                "pipeline did not get there: {body}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` views of one article by one visitor.
fn burst(visitor: &str, n: usize) -> Vec<Value> {
    (0..n)
        .map(|_| json!({"type": "view", "articleId": "burst", "visitorId": visitor}))
        .collect()
}

/// Comments (never deduplicated: only their eventId keeps a retry from
/// counting twice) with eventIds `<tag>-0..n`, each by its own visitor.
fn with_ids(tag: &str, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            json!({"type": "comment", "articleId": format!("a{i}"),
                   "visitorId": format!("{tag}-v{i}"), "eventId": format!("{tag}-{i}")})
        })
        .collect()
}

fn admitted(v: &Value) -> i64 {
    v["counted"].as_i64().unwrap_or(0) + v["duplicate"].as_i64().unwrap_or(0)
}

/// A site on its own `redis-server` with `nodes` nodes, and a UTC
/// midnight a minute or more ahead; `None` without libfaketime.
async fn site(nodes: usize) -> Option<(RedisServer, Vec<Node>, i64)> {
    let lib = libfaketime()?;
    let redis = RedisServer::start();
    let prefix = unique_prefix();
    let mut started = Vec::new();
    for _ in 0..nodes {
        started.push(Node::start(&lib, &redis.url(), &prefix).await);
    }
    Some((redis, started, next_midnight(60)))
}

/// Two nodes 20 s apart (the docs allow a minute): B just before UTC
/// midnight, A just past it; checks that the faked clocks are in force.
async fn across_midnight() -> Option<(RedisServer, Vec<Node>, i64)> {
    let (redis, nodes, m) = site(2).await?;
    let (a, b) = (&nodes[0], &nodes[1]);
    a.set_clock(m + 5);
    b.set_clock(m - 15);
    let (cb, ca) = (b.clock().await, a.clock().await);
    assert!(
        ca >= m && cb < m && ca - cb <= 21,
        "clocks {ca} {cb}, midnight {m}"
    );
    Some((redis, nodes, m))
}

/// Each event through A, then its retry through B (20 s behind, before
/// midnight): replayed, not counted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_through_a_node_20s_behind_across_midnight_are_replayed() {
    let Some((_redis, nodes, _)) = across_midnight().await else {
        return;
    };
    let started = Instant::now();
    let first = nodes[0].send(&with_ids("e", 5)).await;
    assert_eq!(first["counted"], 5, "{first}");
    let retry = nodes[1].send(&with_ids("e", 5)).await;
    assert_eq!(
        (retry["counted"].as_i64(), retry["replayed"].as_i64()),
        (Some(0), Some(5)),
        "retries through the node 20 s behind: {retry}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(14),
        "B crossed midnight"
    );
}

/// 60 events a minute per visitor: 120 sent through the two nodes across
/// the gate's 120 s slot turn at midnight, within a few seconds: 60
/// admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_visitor_gets_one_limit_through_two_nodes_across_a_slot_turn() {
    let Some((_redis, nodes, _)) = across_midnight().await else {
        return;
    };
    let started = Instant::now();
    let through_a = nodes[0].send(&burst("reader", 60)).await;
    let through_b = nodes[1].send(&burst("reader", 60)).await;
    assert_eq!(admitted(&through_a), 60, "{through_a}");
    assert_eq!(through_b["rate_limited"], 60, "through B: {through_b}");
    assert!(
        started.elapsed() < Duration::from_secs(14),
        "B crossed midnight"
    );
}

/// The ingest pipeline: events queued through A (past midnight, which
/// also runs the filter and count workers), then their retries queued
/// through B (20 s behind, before midnight): the filter stage replays
/// them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_retries_through_a_node_20s_behind_across_midnight_are_replayed() {
    let Some(lib) = libfaketime() else { return };
    let redis = RedisServer::start();
    let prefix = unique_prefix();
    let piped = ("HOTRANK_PIPELINE", "true");
    let a = Node::start_with(&lib, &redis.url(), &prefix, &[piped]).await;
    let b = Node::start_with(
        &lib,
        &redis.url(),
        &prefix,
        &[piped, ("HOTRANK_ROLES", "api")],
    )
    .await;
    let m = next_midnight(60);
    a.set_clock(m + 5);
    b.set_clock(m - 15);
    let (cb, ca) = (b.clock().await, a.clock().await);
    assert!(ca >= m && cb < m, "clocks {ca} {cb}, midnight {m}");
    let started = Instant::now();
    a.queue(&with_ids("p", 5)).await;
    a.stats_once(|s| s["counted"] == 5).await;
    b.queue(&with_ids("p", 5)).await;
    let stats = a
        .stats_once(|s| s["quarantined"]["replayed"] == 5 || s["counted"] != 5)
        .await;
    assert_eq!(
        (&stats["counted"], &stats["quarantined"]["replayed"]),
        (&json!(5), &json!(5)),
        "retries queued through the node 20 s behind: {stats}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(14),
        "B crossed midnight"
    );
}

/// One node whose clock steps back 20 s across midnight: a retry stays
/// replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_after_a_node_steps_back_across_midnight_are_replayed() {
    let Some((_redis, nodes, m)) = site(1).await else {
        return;
    };
    let a = &nodes[0];
    a.set_clock(m + 5);
    assert!(a.clock().await >= m);
    let first = a.send(&with_ids("s", 5)).await;
    assert_eq!(first["counted"], 5, "{first}");
    a.set_clock(m - 15);
    let retry = a.send(&with_ids("s", 5)).await;
    assert_eq!(
        (retry["counted"].as_i64(), retry["replayed"].as_i64()),
        (Some(0), Some(5)),
        "retries after a step back: {retry}"
    );
}

/// A full burst, then the node's clock 300 s back: the visitor is still
/// over its limit (a step back does not give it a second one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stepping_back_300s_gives_no_second_limit() {
    let Some((_redis, nodes, m)) = site(1).await else {
        return;
    };
    let a = &nodes[0];
    a.set_clock(m + 100);
    assert_eq!(admitted(&a.send(&burst("w1", 60)).await), 60);
    a.set_clock(m - 200);
    let after = a.send(&burst("w1", 10)).await;
    assert_eq!(
        after["rate_limited"], 10,
        "after a step back of 300 s: {after}"
    );
}

/// A full burst, then the node's clock 30 s back: a real minute after the
/// burst the visitor is admitted again, not 30 s later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stepping_back_refuses_no_longer_than_a_real_minute() {
    let Some((_redis, nodes, m)) = site(1).await else {
        return;
    };
    let a = &nodes[0];
    a.set_clock(m + 100);
    let started = Instant::now();
    assert_eq!(admitted(&a.send(&burst("w2", 60)).await), 60);
    assert_eq!(a.send(&burst("w2", 1)).await["rate_limited"], 1);
    a.set_clock(m + 70);
    tokio::time::sleep(Duration::from_secs(62).saturating_sub(started.elapsed())).await;
    let later = a.send(&burst("w2", 1)).await;
    assert_eq!(
        admitted(&later),
        1,
        "a real minute after the burst: {later}"
    );
}

/// The embedded store: the clock steps back 300 s after a burst; the
/// visitor stays refused until a minute has passed, not five more.
#[tokio::test]
async fn embedded_refusals_end_a_minute_after_the_burst_whatever_the_clock() {
    let s = TestServer::start().await;
    for _ in 0..60 {
        assert_ne!(s.view("burst", "reader").await, "rate_limited");
    }
    assert_eq!(s.view("burst", "reader").await, "rate_limited");
    s.clock.advance(-300);
    // Still inside the minute: refused, as before the step.
    assert_eq!(s.view("burst", "reader").await, "rate_limited");
    s.clock.advance(59);
    assert_eq!(s.view("burst", "reader").await, "rate_limited");
    // A minute after the burst.
    s.clock.advance(1);
    assert_eq!(s.view("burst", "reader").await, "duplicate");
}

/// The embedded store restarted on a clock 300 s back: the burst it
/// loaded is not in its future, so the refusal still ends a minute after
/// the burst (the restart took no time here).
#[tokio::test]
async fn embedded_restarted_on_a_clock_stepped_back_refuses_for_the_minute_only() {
    let s = TestServer::start().await;
    for _ in 0..60 {
        assert_ne!(s.view("burst", "reader").await, "rate_limited");
    }
    assert_eq!(s.view("burst", "reader").await, "rate_limited");
    let dir = s.stop().await;
    let config = common::test_config(dir.path());
    let s = TestServer::start_in(dir, config, common::T0 - 300).await;
    assert_eq!(s.view("burst", "reader").await, "rate_limited");
    s.clock.advance(60);
    assert_eq!(s.view("burst", "reader").await, "duplicate");
}
