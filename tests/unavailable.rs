//! When the store cannot persist or answer, the API says so: 503 with
//! `Retry-After`, never a 202 for an event that was not stored, and it
//! recovers by itself when the store does.

mod common;

use hotrank::store::Lifecycle;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use reqwest::StatusCode;
use serde_json::json;

use hotrank::model::{
    ArticleId, ArticleMeta, ArticleView, Event, HotPage, HotQuery, Outcome, Stats, Timestamp,
    VoteDirection, VoteOutcome,
};
use hotrank::store::embedded::EmbeddedStore;
use hotrank::store::{
    HourlyRow, IngestReject, PutOutcome, Store, StoreError, StoreSettings, Voter,
};

use common::{T0, TestServer, test_config};

/// Wraps a store and fails every call while `down` is set.
struct Flaky {
    inner: EmbeddedStore,
    down: AtomicBool,
}

impl Flaky {
    fn check(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            Err(StoreError::Unavailable("pulled the plug".into()))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl Store for Flaky {
    async fn ingest(
        &self,
        e: Vec<Event>,
        now: Timestamp,
    ) -> Result<Vec<Result<Outcome, IngestReject>>, StoreError> {
        self.check()?;
        self.inner.ingest(e, now).await
    }
    async fn put_article(
        &self,
        id: ArticleId,
        m: ArticleMeta,
        now: Timestamp,
    ) -> Result<PutOutcome, StoreError> {
        self.check()?;
        self.inner.put_article(id, m, now).await
    }
    async fn article(
        &self,
        id: &ArticleId,
        now: Timestamp,
    ) -> Result<Option<ArticleView>, StoreError> {
        self.check()?;
        self.inner.article(id, now).await
    }
    async fn delete_article(&self, id: &ArticleId, now: Timestamp) -> Result<bool, StoreError> {
        self.check()?;
        self.inner.delete_article(id, now).await
    }
    async fn hot(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        self.check()?;
        self.inner.hot(q, now).await
    }
    async fn newest(&self, q: &HotQuery, now: Timestamp) -> Result<HotPage, StoreError> {
        self.check()?;
        self.inner.newest(q, now).await
    }
    async fn ranked_at(
        &self,
        q: &HotQuery,
        at: Timestamp,
        depth: usize,
    ) -> Result<Vec<ArticleId>, StoreError> {
        self.check()?;
        self.inner.ranked_at(q, at, depth).await
    }
    async fn net_evidence(
        &self,
        ids: &[ArticleId],
        now: Timestamp,
        hours: u32,
    ) -> Result<Vec<hotrank::store::NetEvidence>, StoreError> {
        self.check()?;
        self.inner.net_evidence(ids, now, hours).await
    }
    async fn stats(&self, now: Timestamp, hours: u32) -> Result<Stats, StoreError> {
        self.check()?;
        self.inner.stats(now, hours).await
    }
    async fn site_traffic(
        &self,
        now: Timestamp,
        hours: u32,
    ) -> Result<hotrank::store::SiteTraffic, StoreError> {
        self.check()?;
        self.inner.site_traffic(now, hours).await
    }
    async fn hourly(
        &self,
        id: &ArticleId,
        now: Timestamp,
        hours: u32,
    ) -> Result<Option<Vec<HourlyRow>>, StoreError> {
        self.check()?;
        self.inner.hourly(id, now, hours).await
    }
    async fn post_article(
        &self,
        meta: ArticleMeta,
        poster: Voter<'_>,
        now: Timestamp,
    ) -> Result<ArticleId, StoreError> {
        self.check()?;
        self.inner.post_article(meta, poster, now).await
    }
    async fn vote(
        &self,
        id: &ArticleId,
        voter: Voter<'_>,
        dir: VoteDirection,
        now: Timestamp,
    ) -> Result<VoteOutcome, StoreError> {
        self.check()?;
        self.inner.vote(id, voter, dir, now).await
    }
    async fn archive_age(&self) -> Result<Option<i64>, StoreError> {
        self.check()?;
        self.inner.archive_age().await
    }
}

#[async_trait]
impl Lifecycle for Flaky {
    async fn ready(&self) -> Result<(), StoreError> {
        self.check()?;
        self.inner.ready().await
    }
    async fn maintain(&self, now: Timestamp) -> Result<(), StoreError> {
        self.check()?;
        self.inner.maintain(now).await
    }
    async fn shutdown(&self) -> Result<(), StoreError> {
        self.inner.shutdown().await
    }
}

#[tokio::test]
async fn store_outage_is_503_with_retry_after_and_recovers() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let config = test_config(dir.path());
    let flaky = Arc::new(Flaky {
        inner: EmbeddedStore::in_memory(StoreSettings::from_config(&config)),
        down: AtomicBool::new(false),
    });
    let s = TestServer::start_with_store(dir, config, flaky.clone(), T0).await;
    assert_eq!(s.view("a", "v1").await, "counted");

    flaky.down.store(true, Ordering::SeqCst);
    for (method, path) in [
        ("POST", "/api/views"),
        ("POST", "/api/events"),
        ("GET", "/api/hot"),
        ("GET", "/readyz"),
        ("GET", "/api/articles/a"),
    ] {
        let req = match method {
            "POST" if path == "/api/events" => s
                .client
                .post(s.url(path))
                .json(&json!({"events": [{"type": "view", "articleId": "a", "visitorId": "v2"}]})),
            "POST" => s
                .client
                .post(s.url(path))
                .json(&json!({"articleId": "a", "visitorId": "v2"})),
            _ => s.client.get(s.url(path)),
        };
        let r = req.send().await.unwrap();
        assert_eq!(
            r.status(),
            StatusCode::SERVICE_UNAVAILABLE,
            "{method} {path}"
        );
        assert_eq!(
            r.headers().get("retry-after").and_then(|v| v.to_str().ok()),
            Some("1")
        );
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "store_unavailable");
    }
    assert_eq!(
        s.get("/healthz").await.0,
        StatusCode::OK,
        "the process itself is alive"
    );

    flaky.down.store(false, Ordering::SeqCst);
    assert_eq!(s.get("/readyz").await.0, StatusCode::OK);
    // Nothing was stored while down: v2's view counts now.
    assert_eq!(s.view("a", "v2").await, "counted");
    let (_, a) = s.get("/api/articles/a").await;
    assert_eq!(a["pv"], 2);
}

// ---- Redis refusing writes, or lost its data (issue 31) ----

use common::redis::RedisServer;

/// Asserts a refusal: 503 `store_unavailable` with `Retry-After: 1`.
async fn refused(resp: reqwest::Response, what: &str) -> serde_json::Value {
    assert_eq!(
        resp.headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1"),
        "{what}: Retry-After"
    );
    common::expect_error(resp, StatusCode::SERVICE_UNAVAILABLE, "store_unavailable").await
}

/// `/readyz`'s reason once it mentions `why` (a node that lost Redis's
/// connection says so first); panics with the last answer after 20 s.
async fn unready_because(s: &TestServer, why: &str) -> String {
    let mut last = serde_json::Value::Null;
    for _ in 0..400 {
        let r = s.client.get(s.url("/readyz")).send().await.unwrap();
        if r.status() == StatusCode::SERVICE_UNAVAILABLE {
            last = refused(r, "/readyz").await;
            let reason = last["error"]["reason"].as_str().unwrap_or_default();
            if reason.contains(why) {
                return reason.to_string();
            }
        } else {
            last = json!({"status": r.status().as_u16()});
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("/readyz never said {why:?}: last {last}");
}

/// Asserts that `view` (alone and in a batch), `PUT /api/articles/b` and
/// `GET hot` are refused: 503 with `Retry-After`.
async fn every_call_refused(s: &TestServer, view: &serde_json::Value, hot: &str) {
    let mut event = view.clone();
    event["type"] = json!("view");
    for (path, body) in [
        ("/api/views", view.clone()),
        ("/api/events", json!({ "events": [event] })),
    ] {
        let r = s.client.post(s.url(path)).json(&body).send().await.unwrap();
        refused(r, path).await;
    }
    let put = s
        .client
        .put(s.url("/api/articles/b"))
        .bearer_auth(common::ADMIN)
        .json(&json!({"title": "B", "publishedAt": T0 - 60}))
        .send()
        .await
        .unwrap();
    refused(put, "PUT /api/articles/b").await;
    refused(s.client.get(s.url(hot)).send().await.unwrap(), hot).await;
}

/// A node of the direct Redis store on its own `redis-server`, ready, with
/// article `a` holding 3 counted views.
async fn redis_node(server: &RedisServer) -> TestServer {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let s = TestServer::start_redis(dir, &server.url(), |c| c.gate.ip_limit_per_minute = 0).await;
    s.until_ready(20, "a new site on redis").await;
    let (status, body) = s
        .admin_put(
            "/api/articles/a",
            &json!({"title": "A", "publishedAt": T0 - 60}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    for v in ["v1", "v2", "v3"] {
        assert_eq!(s.view("a", v).await, "counted");
    }
    s
}

async fn redis_cmd(server: &RedisServer, args: &[&str]) -> redis::Value {
    let mut con = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut con).await.unwrap()
}

/// Redis refusing writes (`refuse`) until `allow`: ingest, `PUT` and a
/// ranking answer 503 with `Retry-After`, `/readyz` says `why`, and once
/// Redis takes writes again the counts are exact (nothing half-applied)
/// and the refused view counts when sent again.
async fn writes_refused_then_taken(
    server: &RedisServer,
    refuse: impl AsyncFnOnce(),
    allow: impl AsyncFnOnce(),
    why: &str,
) {
    let s = redis_node(server).await;
    refuse().await;
    // A ranking no query built yet: building it writes.
    every_call_refused(
        &s,
        &json!({"articleId": "a", "visitorId": "v4"}),
        "/api/hot?model=weighted&range=24h",
    )
    .await;
    let reason = unready_because(&s, why).await;
    eprintln!("/readyz: {reason}");

    allow().await;
    s.until_ready(20, "Redis takes writes again").await;
    let (_, a) = s.get("/api/articles/a").await;
    assert_eq!(a["pv"], 3, "nothing refused was counted: {a}");
    assert_eq!(s.get("/api/articles/b").await.0, StatusCode::NOT_FOUND);
    assert_eq!(s.view("a", "v4").await, "counted");
    let (_, a) = s.get("/api/articles/a").await;
    assert_eq!(a["pv"], 4, "{a}");
    let (status, page) = s.get("/api/hot?model=weighted&range=24h").await;
    assert_eq!(status, StatusCode::OK, "{page}");
}

/// Issue 31 finding 7: at `maxmemory` with `noeviction`, Redis answers
/// OOM to every write: 503 with `Retry-After` (was 500 `internal`), and
/// `/readyz` says Redis is out of memory (was 200).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_at_maxmemory_is_503_with_retry_after_and_readyz_says_why() {
    let server = RedisServer::start();
    writes_refused_then_taken(
        &server,
        async || {
            redis_cmd(
                &server,
                &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
            )
            .await;
            redis_cmd(&server, &["CONFIG", "SET", "maxmemory", "1"]).await;
        },
        async || {
            redis_cmd(&server, &["CONFIG", "SET", "maxmemory", "0"]).await;
        },
        "out of memory",
    )
    .await;
}

/// `INFO persistence`'s `rdb_last_bgsave_status` once no BGSAVE runs.
async fn last_bgsave(server: &RedisServer) -> String {
    for _ in 0..400 {
        let info = redis_cmd(server, &["INFO", "persistence"]).await;
        let info: String = redis::from_redis_value(info).unwrap();
        if info.contains("rdb_bgsave_in_progress:0") {
            let status = info
                .lines()
                .find_map(|l| l.strip_prefix("rdb_last_bgsave_status:"))
                .expect("rdb_last_bgsave_status");
            return status.trim().to_string();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("BGSAVE did not end");
}

/// Issue 31 finding 7: a Redis that cannot persist (a failed BGSAVE with
/// `stop-writes-on-bgsave-error yes`) answers MISCONF to every write: 503
/// with `Retry-After`, and `/readyz` says it cannot persist. The BGSAVE
/// fails for sure, even as root: the RDB file's name is a directory, so
/// renaming the temporary file onto it fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_unable_to_persist_is_503_with_retry_after_and_readyz_says_why() {
    let server = RedisServer::start_with(&["--dbfilename", "hotrank-misconf.rdb"]);
    let dir: Vec<String> =
        redis::from_redis_value(redis_cmd(&server, &["CONFIG", "GET", "dir"]).await).unwrap();
    let rdb = std::path::Path::new(&dir[1]).join("hotrank-misconf.rdb");
    writes_refused_then_taken(
        &server,
        async || {
            for (k, v) in [("save", "3600 1"), ("stop-writes-on-bgsave-error", "yes")] {
                redis_cmd(&server, &["CONFIG", "SET", k, v]).await;
            }
            std::fs::create_dir(&rdb).unwrap();
            redis_cmd(&server, &["BGSAVE"]).await;
            assert_eq!(last_bgsave(&server).await, "err");
        },
        async || {
            std::fs::remove_dir(&rdb).unwrap();
            redis_cmd(&server, &["BGSAVE"]).await;
            assert_eq!(last_bgsave(&server).await, "ok");
        },
        "cannot persist",
    )
    .await;
}

/// Issue 31 finding 3: a `redis-server` restarted empty under a running
/// node of the direct store (no persistence) is not served as a new site:
/// `/readyz` says Redis lost the site's data, ingest answers 503 with
/// `Retry-After` (an acknowledged eventId is not counted again, nothing
/// is written) and so do rankings, until `hotrank redis-ack-loss` accepts
/// the loss; then the node serves the empty Redis again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_that_lost_its_data_is_refused_until_the_loss_is_accepted() {
    let mut server = RedisServer::start();
    let s = redis_node(&server).await;
    let ev = json!({"articleId": "a", "visitorId": "v9", "eventId": "issue-31-3"});
    let (status, body) = s.post("/api/views", &ev).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["verdict"], "counted");

    server.restart();
    let reason = unready_because(&s, "lost this site's data").await;
    assert!(reason.contains("redis-ack-loss"), "{reason}");
    // The acknowledged eventId again.
    every_call_refused(&s, &ev, "/api/hot").await;
    let n: i64 = redis::from_redis_value(redis_cmd(&server, &["DBSIZE"]).await).unwrap();
    assert_eq!(n, 0, "nothing was written to the Redis that lost its data");

    let ack = |what: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hotrank"))
            .args(["redis-ack-loss", "--store", "redis", "--redis-url"])
            .arg(server.url())
            .output()
            .expect("run hotrank");
        eprintln!("{what}: {}", String::from_utf8_lossy(&out.stderr));
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (ok, said) = ack("redis-ack-loss");
    assert!(ok, "{said}");
    assert!(said.contains("serve it as it is"), "{said}");
    s.until_ready(20, "the loss accepted").await;
    let (status, body) = s.post("/api/views", &ev).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(
        body["verdict"], "counted",
        "Redis forgot it: the loss was accepted"
    );
    assert_eq!(s.get("/api/hot").await.0, StatusCode::OK);
    let (ok, said) = ack("redis-ack-loss on a Redis that lost nothing");
    assert!(!ok, "refused when nothing was lost: {said}");
}
