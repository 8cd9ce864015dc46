//! When the store cannot persist or answer, the API says so: 503 with
//! `Retry-After`, never a 202 for an event that was not stored, and it
//! recovers by itself when the store does.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use reqwest::StatusCode;
use serde_json::json;

use hotrank::model::{
    ArticleId, ArticleMeta, ArticleView, Event, HotPage, HotQuery, Outcome, Stats, Timestamp,
};
use hotrank::store::embedded::EmbeddedStore;
use hotrank::store::{HourlyRow, IngestReject, PutOutcome, Store, StoreError, StoreSettings};

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
    async fn stats(&self, now: Timestamp, hours: u32) -> Result<Stats, StoreError> {
        self.check()?;
        self.inner.stats(now, hours).await
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
