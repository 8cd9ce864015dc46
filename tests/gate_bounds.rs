//! Issue 10 over HTTP: past `max_articles`, a single anonymous view of a
//! new article is a JSON 429 with `Retry-After`, a batch reports it per
//! event, known articles keep counting, and `/metrics` counts the refusals
//! (with HELP text).

mod common;

use reqwest::StatusCode;
use serde_json::json;

use common::TestServer;

#[tokio::test]
async fn max_articles_is_429_per_view_and_per_event_in_a_batch() {
    let s = TestServer::start_with(|c| c.max_articles = 2).await;
    assert_eq!(s.view("a", "v1").await, "counted");
    assert_eq!(s.view("b", "v2").await, "counted");

    let r = s
        .client
        .post(s.url("/api/views"))
        .json(&json!({"articleId": "c", "visitorId": "v3"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry > 0);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_articles");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_articles")
    );

    let (status, body) = s
        .post(
            "/api/events",
            &json!({"events": [
                {"type": "view", "articleId": "d", "visitorId": "v4"},
                {"type": "view", "articleId": "a", "visitorId": "v5"},
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["accepted"], 1, "{body}");
    assert_eq!(body["errors"][0]["index"], 0);
    assert_eq!(body["errors"][0]["code"], "too_many_articles");
    assert_eq!(s.view("b", "v6").await, "counted", "known articles count");
    let (status, _) = s.get("/api/articles/c").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a refused event creates nothing"
    );

    let text = s.text("/metrics").await;
    assert!(
        text.contains("# HELP hotrank_articles_refused_total"),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("hotrank_articles_refused_total"))
        .expect("counter line");
    assert!(line.ends_with(" 2"), "{line}");
}

#[test]
fn the_default_is_documented() {
    let c = hotrank::config::Config::default();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    assert!(readme.contains(&format!("max_articles = {}", c.max_articles)));
    assert!(readme.contains(&format!(
        "bot_articles_per_minute = {}",
        c.gate.bot_articles_per_minute
    )));
}
