//! Webhooks read the public list, as curation leaves it: the real
//! `hotrank serve` binary (embedded store and a real redis-server), a real
//! HTTP receiver that checks every signature (tests/webhook_harness/).
//!
//! - an excluded article never enters a subscription's top N;
//! - under `[review] mode = "new_entries"` a new article is `held` (not
//!   `entered`) until an editor allows it, then it enters;
//! - an article pinned at position 1 enters at rank 1;
//! - a hold recorded by a node that died before telling the webhooks is
//!   told by the next node to run, once.

mod common;
mod webhook_harness;

use reqwest::Method;
use serde_json::json;

use webhook_harness::*;

fn held(a: &'static str) -> (&'static str, &'static str, Option<u64>) {
    ("held", a, None)
}

async fn put(node: &Node, path: &str, body: serde_json::Value) {
    let (status, b) = node.admin(Method::PUT, path, Some(body)).await;
    assert!(status.is_success(), "{path}: {status} {b}");
}

/// "x" is excluded before it gets the most views: only "a" enters.
async fn excluded_never_enters(site: Site) {
    let r = Receiver::start(0, Default::default(), 0).await;
    let node = site.start().await;
    put(&node, "/api/articles/x", json!({"title": "X"})).await;
    put(&node, "/api/articles/x/exclude", json!({"reason": "spam"})).await;
    node.subscribe(&r.url(), &["entered", "left"], 2).await;
    node.views("x", 9).await;
    node.views("a", 3).await;
    expect_transitions(&r, &[t("entered", "a", 1)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_excluded_article_never_enters_embedded() {
    let dir = tempfile::tempdir().unwrap();
    excluded_never_enters(Site::embedded(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_excluded_article_never_enters_redis() {
    let redis = common::redis::RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    excluded_never_enters(Site::on_redis(dir.path(), redis.url())).await;
}

/// Under `new_entries` the evaluator's read holds "a": `held` is
/// delivered (signed) and no `entered` until the editor allows it.
async fn held_until_allowed(mut site: Site) {
    site.extra = "[review]\nmode = \"new_entries\"\n".into();
    let r = Receiver::start(0, Default::default(), 0).await;
    let node = site.start().await;
    node.subscribe(&r.url(), &["entered", "left", "held"], 2)
        .await;
    node.views("a", 5).await;
    expect_transitions(&r, &[held("a")]).await;
    let (status, b) = node
        .admin(
            Method::POST,
            "/api/review/a",
            Some(json!({"decision": "allow"})),
        )
        .await;
    assert!(status.is_success(), "{status} {b}");
    expect_transitions(&r, &[held("a"), t("entered", "a", 1)]).await;
    // Each delivery once.
    assert_eq!(r.got().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_article_is_held_then_enters_when_allowed_embedded() {
    let dir = tempfile::tempdir().unwrap();
    held_until_allowed(Site::embedded(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_article_is_held_then_enters_when_allowed_redis() {
    let redis = common::redis::RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    held_until_allowed(Site::on_redis(dir.path(), redis.url())).await;
}

/// A hold recorded while no node ran (as one that died between recording
/// the hold and deciding its `held`, which are two writes) is told when a
/// node runs again, and once only: a second restart sends nothing more.
async fn recorded_hold_is_told_after_a_crash(site: Site, write_hold: impl Fn(&str, String)) {
    let mut site = site;
    site.extra = "[review]\nmode = \"new_entries\"\n".into();
    let r = Receiver::start(0, Default::default(), 0).await;
    let node = site.start().await;
    node.subscribe(&r.url(), &["held"], 2).await;
    node.kill9();
    let review = json!({
        "status": "held",
        "heldAt": now_ms() / 1000 + 1,
        "evidence": {"list": "hot"},
    });
    write_hold("review:a", review.to_string());
    let node = site.start().await;
    expect_transitions(&r, &[held("a")]).await;
    node.kill9();
    let node = site.start().await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(r.got().len(), 1, "{:?}", r.got());
    node.kill9();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_hold_is_told_once_after_a_crash_embedded() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data").join("curation.json");
    recorded_hold_is_told_after_a_crash(Site::embedded(dir.path()), |field, value| {
        let mut entries: std::collections::BTreeMap<String, String> = std::fs::read(&file)
            .map(|b| serde_json::from_slice(&b).unwrap())
            .unwrap_or_default();
        entries.insert(field.into(), value);
        std::fs::write(&file, serde_json::to_vec(&entries).unwrap()).unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_hold_is_told_once_after_a_crash_redis() {
    let redis = common::redis::RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let url = redis.url();
    recorded_hold_is_told_after_a_crash(Site::on_redis(dir.path(), url.clone()), |field, value| {
        let mut con = redis::Client::open(url.as_str())
            .unwrap()
            .get_connection()
            .unwrap();
        let _: () = redis::cmd("HSET")
            .arg("curation")
            .arg(field)
            .arg(value)
            .query(&mut con)
            .unwrap();
    })
    .await;
}

/// "c", third by views, is pinned at position 1: it is the top 1.
async fn pinned_enters(site: Site) {
    let r = Receiver::start(0, Default::default(), 0).await;
    let node = site.start().await;
    node.views_at_once(&[("a", 9), ("b", 6), ("c", 3)]).await;
    put(&node, "/api/articles/c/pin", json!({"position": 1})).await;
    node.subscribe(&r.url(), &["entered", "left"], 1).await;
    expect_transitions(&r, &[t("entered", "c", 1)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_article_enters_at_its_position_embedded() {
    let dir = tempfile::tempdir().unwrap();
    pinned_enters(Site::embedded(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_article_enters_at_its_position_redis() {
    let redis = common::redis::RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    pinned_enters(Site::on_redis(dir.path(), redis.url())).await;
}
