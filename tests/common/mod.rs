//! Test helpers shared by every integration test: an in-process server on
//! a loopback port with a manual clock, a `redis-server` of its own, and
//! small HTTP conveniences.
#![allow(dead_code)]

/// Runs `async fn $name(where)` as two tests: `$name::one` with
/// `$ty::$one` (a site on the binary's one redis-server) and
/// `$name::cluster` with `$ty::$cluster` (a site in one slot of its
/// 3-primary cluster).
#[macro_export]
macro_rules! one_and_cluster {
    ($name:ident, $ty:ident :: $one:ident, $ty2:ident :: $cluster:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn one() {
                super::$name(super::$ty::$one).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn cluster() {
                super::$name(super::$ty2::$cluster).await;
            }
        }
    };
}

pub mod curation;
pub mod pg;
pub mod pipeline;
pub mod redis;
pub mod tools;

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use hotrank::clock::ManualClock;
use hotrank::config::Config;
use hotrank::store::embedded::{Durability, EmbeddedStore};
use hotrank::store::{Store, StoreSettings};

/// 2025-11-21 21:20:00 UTC: a fixed "now" so tests are reproducible.
pub const T0: i64 = 1_763_760_000;

pub const ADMIN: &str = "test-admin-token";
pub const INGEST: &str = "test-ingest-token";

/// A browser's user agent: tests that are not about bots send this.
pub const BROWSER_UA: &str =
    "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

/// The identity key of in-process test servers (see `start_with_store`).
pub const TEST_IDENTITY_KEY: &str = "5e1f0c0ffee0ddba11c0ffee5e1f0c0f";

pub fn test_config(dir: &std::path::Path) -> Config {
    Config {
        data_dir: dir.to_path_buf(),
        admin_token: Some(ADMIN.into()),
        ingest_token: Some(INGEST.into()),
        ..Config::default()
    }
}

/// A hotrank server running in this process.
pub struct TestServer {
    pub base: String,
    pub clock: ManualClock,
    pub client: reqwest::Client,
    pub dir: Arc<tempfile::TempDir>,
    shutdown: Option<oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    pub async fn start() -> Self {
        let dir = Arc::new(tempfile::tempdir().expect("temp dir"));
        let config = test_config(dir.path());
        Self::start_in(dir, config, T0).await
    }

    pub async fn start_with(edit: impl FnOnce(&mut Config)) -> Self {
        let dir = Arc::new(tempfile::tempdir().expect("temp dir"));
        let mut config = test_config(dir.path());
        edit(&mut config);
        Self::start_in(dir, config, T0).await
    }

    /// Starts on an existing data dir (restarts).
    pub async fn start_in(dir: Arc<tempfile::TempDir>, config: Config, now: i64) -> Self {
        config.validate().expect("valid test config");
        let (store, _) = EmbeddedStore::open(
            Durability::from_config(&config),
            StoreSettings::from_config(&config),
        )
        .expect("open store");
        Self::start_with_store(dir, config, Arc::new(store), now).await
    }

    /// Starts on any store (wrappers that fail on purpose, other backends).
    pub async fn start_with_store(
        dir: Arc<tempfile::TempDir>,
        config: Config,
        store: Arc<dyn Store>,
        now: i64,
    ) -> Self {
        Self::start_on(dir, config, store, None, now).await
    }

    /// Starts on the Redis pipeline: ingest is queued (202 `queued`),
    /// everything else is the store's.
    pub async fn start_queued(
        dir: Arc<tempfile::TempDir>,
        config: Config,
        store: Arc<hotrank::pipeline::PipelineStore>,
        now: i64,
    ) -> Self {
        let queue: Arc<dyn hotrank::store::Queue> = store.clone();
        Self::start_on(dir, config, store, Some(queue), now).await
    }

    async fn start_on(
        dir: Arc<tempfile::TempDir>,
        config: Config,
        store: Arc<dyn Store>,
        queue: Option<Arc<dyn hotrank::store::Queue>>,
        now: i64,
    ) -> Self {
        init_logs();
        // A fixed identity key unless the test brought one: visitor hashes,
        // and so every HyperLogLog estimate, are then the same in every run
        // (a random key lets two of a test's readers share a register about
        // once in a hundred runs and turns an exact-looking count into a
        // flake).
        let key = config.data_dir.join("identity.key");
        if !key.exists() {
            std::fs::create_dir_all(&config.data_dir).expect("data dir");
            std::fs::write(&key, TEST_IDENTITY_KEY).expect("write identity.key");
        }
        let clock = ManualClock::at(now);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = hotrank::server::build_state(config, store, queue, Arc::new(clock.clone()))
            .expect("state");
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(hotrank::server::run(listener, state, async move {
            let _ = rx.await;
        }));
        TestServer {
            base: format!("http://{addr}"),
            clock,
            client: reqwest::Client::builder()
                .user_agent(BROWSER_UA)
                .build()
                .expect("client"),
            dir,
            shutdown: Some(tx),
            handle: Some(handle),
        }
    }

    /// A node on a Redis store: `dir` holds the identity key, which every
    /// node of one site must share.
    pub async fn start_redis(
        dir: Arc<tempfile::TempDir>,
        redis_url: &str,
        edit: impl FnOnce(&mut Config),
    ) -> Self {
        let mut config = test_config(dir.path());
        config.store = hotrank::config::StoreKind::Redis;
        config.redis.url = redis_url.to_string();
        edit(&mut config);
        config.validate().expect("valid test config");
        let store = hotrank::store::redis::RedisStore::connect(
            hotrank::store::redis::RedisOptions::from_config(&config),
            StoreSettings::from_config(&config),
        )
        .expect("redis store");
        Self::start_with_store(dir, config, Arc::new(store), T0).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Waits until `/readyz` answers 200; panics after `secs` seconds,
    /// saying `what` the server was expected to get ready from.
    pub async fn until_ready(&self, secs: u64, what: &str) {
        let ready = async {
            while self.get("/readyz").await.0 != StatusCode::OK {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(secs), ready)
            .await
            .unwrap_or_else(|_| panic!("not ready after {secs} s: {what}"));
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let r = self.client.get(self.url(path)).send().await.expect("GET");
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// The body of a GET as text (`/metrics`).
    pub async fn text(&self, path: &str) -> String {
        let r = self.client.get(self.url(path)).send().await.expect("GET");
        r.text().await.expect("body")
    }

    pub async fn post(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let r = self
            .client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .expect("POST");
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn admin_put(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let r = self
            .client
            .put(self.url(path))
            .bearer_auth(ADMIN)
            .json(body)
            .send()
            .await
            .expect("PUT");
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// A view from `visitor`; returns the verdict.
    pub async fn view(&self, article: &str, visitor: &str) -> String {
        let (status, body) = self
            .post(
                "/api/views",
                &serde_json::json!({"articleId": article, "visitorId": visitor}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        body["verdict"].as_str().expect("verdict").to_string()
    }

    /// Stops the server gracefully and waits until it has flushed.
    pub async fn stop(mut self) -> Arc<tempfile::TempDir> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            h.await.expect("server task").expect("clean shutdown");
        }
        self.dir.clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// The article ids of a ranking page (`/api/hot`, `/api/new`), in order.
pub fn page_ids(page: &Value) -> Vec<&str> {
    page["items"]
        .as_array()
        .expect("a page with items")
        .iter()
        .map(|i| i["articleId"].as_str().expect("an articleId"))
        .collect()
}

/// Runs the `hotrank` binary with `args`; returns whether it succeeded,
/// and its stderr.
pub fn run_hotrank(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hotrank"))
        .args(args)
        .output()
        .expect("run hotrank");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts an error answer: `status`, a JSON body with `code` and a
/// non-empty message. Returns the body.
pub async fn expect_error(resp: reqwest::Response, status: StatusCode, code: &str) -> Value {
    assert_eq!(resp.status(), status, "expected {code}");
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string());
    assert!(ct.unwrap_or_default().starts_with("application/json"));
    let body: Value = resp.json().await.expect("JSON error body");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    body
}

/// Logs of in-process servers into the test's captured output, shown when
/// it fails: warnings, and why a request got 503 (the answer's body says
/// only "the store is unavailable"). `RUST_LOG` overrides.
pub fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,hotrank::api::error=debug"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}
