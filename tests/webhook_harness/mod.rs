//! The webhook tests' harness: a real HTTP receiver that checks every
//! signature (HMAC-SHA256 computed here, not by hotrank) and records
//! delivery ids, and the real `hotrank serve` binary on a site (embedded,
//! Redis, or a Redis Cluster).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use hmac::{Hmac, Mac};
use parking_lot::Mutex;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::common::{ADMIN, BROWSER_UA};

pub const SECRET: &str = "receiver-shared-secret";

// ---------------------------------------------------------------- receiver

/// One delivery the receiver accepted.
#[derive(Debug, Clone)]
pub struct Got {
    pub id: String,
    pub body: Value,
    /// Wall clock at receipt (Unix ms).
    pub ms: i64,
}

#[derive(Default)]
pub struct Log {
    pub got: Vec<Got>,
    /// Requests per delivery id, accepted or not.
    pub tries: HashMap<String, u32>,
    pub bad_signatures: u32,
}

#[derive(Clone)]
pub struct Receiver {
    pub log: Arc<Mutex<Log>>,
    /// Answer 500 to the first this many requests of each delivery id.
    pub fail_first: Arc<AtomicU32>,
    pub port: u16,
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

pub fn hmac_hex(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> AxumStatus {
    let header = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let mut log = r.log.lock();
    if header("x-hotrank-signature") != format!("sha256={}", hmac_hex(SECRET, &body)) {
        log.bad_signatures += 1;
        return AxumStatus::BAD_REQUEST;
    }
    let v: Value = serde_json::from_slice(&body).expect("a JSON body");
    let id = header("x-hotrank-delivery");
    assert_eq!(
        v["delivery"],
        id.as_str(),
        "header and body name one delivery"
    );
    let n = log.tries.entry(id.clone()).or_default();
    *n += 1;
    if *n <= r.fail_first.load(Ordering::Relaxed) {
        return AxumStatus::INTERNAL_SERVER_ERROR;
    }
    log.got.push(Got {
        id,
        body: v,
        ms: now_ms(),
    });
    AxumStatus::OK
}

impl Receiver {
    /// A receiver on `port` (0: any free one).
    pub async fn start(port: u16, log: Arc<Mutex<Log>>, fail_first: u32) -> Receiver {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind the receiver");
        let r = Receiver {
            log,
            fail_first: Arc::new(AtomicU32::new(fail_first)),
            port: listener.local_addr().unwrap().port(),
        };
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(r.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        r
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    pub fn got(&self) -> Vec<Got> {
        self.log.lock().got.clone()
    }

    /// Accepted deliveries as (event, article, rank), one per delivery id
    /// (a repeated id counted once: what a deduping receiver keeps).
    pub fn transitions(&self) -> BTreeSet<(String, String, Option<u64>)> {
        let mut by_id: BTreeMap<String, (String, String, Option<u64>)> = BTreeMap::new();
        for g in self.got() {
            by_id.insert(
                g.id,
                (
                    g.body["event"].as_str().unwrap().to_string(),
                    g.body["articleId"].as_str().unwrap().to_string(),
                    g.body["rank"].as_u64(),
                ),
            );
        }
        let kept: Vec<_> = by_id.values().cloned().collect();
        let set: BTreeSet<_> = kept.iter().cloned().collect();
        assert_eq!(
            set.len(),
            kept.len(),
            "one transition under two ids: {kept:?}"
        );
        set
    }
}

// ---------------------------------------------------------------- hotrank

pub struct Node {
    pub child: Child,
    pub base: String,
    pub client: reqwest::Client,
}

/// Where a node keeps state: its data dir, and Redis if any.
#[derive(Clone)]
pub struct Site {
    pub dir: std::path::PathBuf,
    pub redis: Option<String>,
    /// `webhooks.allow_private` (the tests' receivers are on loopback).
    pub allow_private: bool,
    /// `redis` names the seed nodes of a Redis Cluster.
    pub cluster: bool,
    /// `webhooks.max_attempts`.
    pub max_attempts: u32,
    /// `webhooks.retry_base_ms`.
    pub retry_base_ms: u64,
    /// More TOML tables at the end of the configuration (`[review]`).
    pub extra: String,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Site {
    /// A site on the Redis (or cluster seed nodes) at `url`.
    pub fn on_redis(dir: &std::path::Path, url: String) -> Site {
        Site {
            redis: Some(url),
            ..Site::embedded(dir)
        }
    }

    pub fn embedded(dir: &std::path::Path) -> Site {
        Site {
            dir: dir.to_path_buf(),
            redis: None,
            allow_private: true,
            cluster: false,
            max_attempts: 10,
            retry_base_ms: 100,
            extra: String::new(),
        }
    }

    pub fn config(&self) -> String {
        let store = match &self.redis {
            Some(url) => format!(
                "store = \"redis\"\n[redis]\nurl = \"{url}\"\ncluster = {}\n",
                self.cluster
            ),
            None => String::new(),
        };
        format!(
            "{store}[gate]\nvisitor_limit_per_minute = 0\nip_limit_per_minute = 0\n\
             [webhooks]\nallow_private = {}\ninterval_ms = 100\nhysteresis = 1\n\
             retry_base_ms = {}\nretry_max_ms = {}\nmax_attempts = {}\n{}",
            self.allow_private,
            self.retry_base_ms,
            self.retry_base_ms.max(400),
            self.max_attempts,
            self.extra
        )
    }

    /// Starts `hotrank serve` on this site and waits until it is ready.
    pub async fn start(&self) -> Node {
        std::fs::create_dir_all(&self.dir).unwrap();
        let config = self.dir.join("hotrank.toml");
        std::fs::write(&config, self.config()).unwrap();
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_hotrank"))
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--config",
            ])
            .arg(&config)
            .arg("--data-dir")
            .arg(self.dir.join("data"))
            .env("HOTRANK_ADMIN_TOKEN", ADMIN)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn hotrank");
        let node = Node {
            child,
            base: format!("http://127.0.0.1:{port}"),
            client: reqwest::Client::builder()
                .user_agent(BROWSER_UA)
                .build()
                .unwrap(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = node.client.get(node.url("/readyz")).send().await
                && r.status() == StatusCode::OK
            {
                return node;
            }
            assert!(Instant::now() < deadline, "hotrank did not get ready");
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

impl Node {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `n` views of `article`, each from a visitor of its own.
    pub async fn views(&self, article: &str, n: u32) {
        for i in 0..n {
            let r = self
                .client
                .post(self.url("/api/views"))
                .json(&json!({"articleId": article, "visitorId": format!("{article}-v{i}-{}", now_ms())}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::ACCEPTED);
        }
    }

    /// Views of several articles in one batch (one atomic store write, so
    /// no ranking read sees half of it).
    pub async fn views_at_once(&self, counts: &[(&str, u32)]) {
        let stamp = now_ms();
        let events: Vec<Value> = counts
            .iter()
            .flat_map(|&(a, n)| {
                (0..n).map(move |i| {
                    json!({"type": "view", "articleId": a, "visitorId": format!("{a}-b{i}-{stamp}")})
                })
            })
            .collect();
        let r = self
            .client
            .post(self.url("/api/events"))
            .json(&json!({ "events": events }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["verdicts"]["counted"], events.len(), "{body}");
    }

    pub async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self
            .client
            .request(method, self.url(path))
            .bearer_auth(ADMIN);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn subscribe(&self, url: &str, events: &[&str], top: u32) -> String {
        let (status, body) = self
            .admin(
                reqwest::Method::POST,
                "/api/webhooks",
                Some(json!({"url": url, "secret": SECRET, "events": events,
                            "query": {"range": "24h", "model": "gravity"}, "top": top})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["id"].as_str().unwrap().to_string()
    }

    pub async fn deliveries(&self, id: &str) -> Vec<Value> {
        let (status, body) = self
            .admin(
                reqwest::Method::GET,
                &format!("/api/webhooks/{id}/deliveries"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["deliveries"].as_array().unwrap().clone()
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> String {
        let r = self.client.get(self.url("/metrics")).send().await.unwrap();
        r.text().await.unwrap()
    }

    pub fn kill9(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().unwrap();
    }
}

/// Waits until `done` holds (panics after 30 s with `what`).
pub async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the receiver's transitions equal `want`, then a little
/// longer, to catch any that should not come.
pub async fn expect_transitions(r: &Receiver, want: &[(&str, &str, Option<u64>)]) {
    let want: BTreeSet<(String, String, Option<u64>)> = want
        .iter()
        .map(|(e, a, k)| (e.to_string(), a.to_string(), *k))
        .collect();
    until(&format!("transitions {want:?}"), || {
        r.transitions().len() >= want.len()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(r.transitions(), want);
    assert_eq!(r.log.lock().bad_signatures, 0);
}

pub fn t(e: &'static str, a: &'static str, rank: u64) -> (&'static str, &'static str, Option<u64>) {
    (e, a, Some(rank))
}

/// `/metrics` has each of `series` (`name{labels} value`) as a line.
pub async fn assert_series(node: &Node, series: &[&str]) {
    let text = node.metrics().await;
    for s in series {
        assert!(text.lines().any(|l| l == *s), "{s} not in\n{text}");
    }
}
