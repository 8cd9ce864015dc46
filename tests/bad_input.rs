//! Every row of the error table in API.md: each bad request gets its JSON
//! error with a 4xx status, and nothing stored changes.

mod common;

use reqwest::StatusCode;
use serde_json::{Value, json};

use common::{T0, TestServer};

/// Everything a bad request could have changed.
async fn fingerprint(s: &TestServer) -> Value {
    let (_, stats) = s.get("/api/stats").await;
    let (_, hot) = s.get("/api/hot?range=all&limit=100").await;
    let (_, a) = s.get("/api/articles/base").await;
    json!({"stats": stats, "hot": hot["items"], "article": a})
}

async fn expect_error(resp: reqwest::Response, status: StatusCode, code: &str) {
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
}

#[tokio::test]
async fn bad_requests_are_refused_and_change_nothing() {
    let s = TestServer::start().await;
    s.view("base", "v1").await;
    let before = fingerprint(&s).await;
    let post_raw = |path: &'static str, ct: &'static str, body: Vec<u8>| {
        s.client
            .post(s.url(path))
            .header("content-type", ct)
            .body(body)
            .send()
    };
    let bad = StatusCode::BAD_REQUEST;
    expect_error(
        post_raw("/api/views", "application/json", b"{not json".to_vec())
            .await
            .unwrap(),
        bad,
        "invalid_json",
    )
    .await;
    expect_error(
        post_raw("/api/views", "application/json", b"".to_vec())
            .await
            .unwrap(),
        bad,
        "invalid_json",
    )
    .await;
    expect_error(
        post_raw(
            "/api/views",
            "application/x-www-form-urlencoded",
            b"articleId=1".to_vec(),
        )
        .await
        .unwrap(),
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    )
    .await;
    let r = s
        .client
        .post(s.url("/api/views"))
        .body("{}")
        .send()
        .await
        .unwrap();
    expect_error(
        r,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    )
    .await;
    let big = format!("{{\"events\": [{}]}}", "\"x\",".repeat(750_000));
    expect_error(
        post_raw("/api/events", "application/json", big.into_bytes())
            .await
            .unwrap(),
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    )
    .await;
    let batch: Vec<Value> = (0..1001)
        .map(|i| json!({"type": "view", "articleId": "base", "visitorId": format!("b{i}")}))
        .collect();
    let r = s
        .client
        .post(s.url("/api/events"))
        .json(&json!({"events": batch}))
        .send()
        .await
        .unwrap();
    expect_error(r, bad, "batch_too_large").await;

    let views_bad = [
        (
            json!({"articleId": "a".repeat(65), "visitorId": "v"}),
            "invalid_article_id",
        ),
        (
            json!({"articleId": "a{b}", "visitorId": "v"}),
            "invalid_article_id",
        ),
        (
            json!({"articleId": "a:b", "visitorId": "v"}),
            "invalid_article_id",
        ),
        (
            json!({"articleId": "a b", "visitorId": "v"}),
            "invalid_article_id",
        ),
        (
            json!({"articleId": "", "visitorId": "v"}),
            "invalid_article_id",
        ),
        (
            json!({"articleId": -5, "visitorId": "v"}),
            "invalid_article_id",
        ),
        (
            json!({"articleId": 1.5, "visitorId": "v"}),
            "invalid_article_id",
        ),
        (
            json!({"articleId": ["x"], "visitorId": "v"}),
            "invalid_article_id",
        ),
        (json!({"visitorId": "v"}), "invalid_article_id"),
        (
            json!({"articleId": "ok", "visitorId": ""}),
            "invalid_visitor_id",
        ),
        (
            json!({"articleId": "ok", "visitorId": "v".repeat(129)}),
            "invalid_visitor_id",
        ),
        (
            json!({"articleId": "ok", "visitorId": 42}),
            "invalid_visitor_id",
        ),
        (
            json!({"articleId": "ok", "visitorId": "v", "ts": T0 + 301}),
            "invalid_timestamp",
        ),
        (
            json!({"articleId": "ok", "visitorId": "v", "ts": T0 - 91 * 86_400}),
            "invalid_timestamp",
        ),
        (
            json!({"articleId": "ok", "visitorId": "v", "ts": -1}),
            "invalid_timestamp",
        ),
        (
            json!({"articleId": "ok", "visitorId": "v", "ts": 1.5}),
            "invalid_timestamp",
        ),
        (
            json!({"articleId": "ok", "visitorId": "v", "ts": "now"}),
            "invalid_timestamp",
        ),
        (
            json!({"articleId": "ok", "visitorId": "v", "eventId": ""}),
            "invalid_event_id",
        ),
        (
            json!({"articleId": "ok", "visitorId": "v", "type": "like"}),
            "invalid_event_type",
        ),
        (json!(["not", "an", "object"]), "invalid_event"),
    ];
    for (body, code) in views_bad {
        let (status, err) = s.post("/api/views", &body).await;
        assert_eq!(status, bad, "{body} -> {err}");
        assert_eq!(err["error"]["code"], code, "{body}");
    }
    // In a batch, each bad event is reported on its own and nothing of it applies.
    let (status, body) = s
        .post(
            "/api/events",
            &json!({"events": [
                {"type": "dwell", "articleId": "base", "visitorId": "v", "seconds": -3},
                {"type": "dwell", "articleId": "base", "visitorId": "v", "seconds": 0},
                {"type": "dwell", "articleId": "base", "visitorId": "v"},
                {"type": "view", "articleId": "x:y", "visitorId": "v"},
                {"articleId": "base", "visitorId": "v"},
                {"type": "view", "articleId": "base", "visitorId": "v", "ts": T0 + 10_000},
                17
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["accepted"], 0);
    let codes: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "invalid_seconds",
            "invalid_seconds",
            "invalid_seconds",
            "invalid_article_id",
            "invalid_event_type",
            "invalid_timestamp",
            "invalid_event"
        ]
    );
    for body in [json!({"events": "nope"}), json!({}), json!([1, 2])] {
        let (status, err) = s.post("/api/events", &body).await;
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (bad, Some("invalid_json")),
            "{body}"
        );
    }

    // Query parameters.
    for q in [
        "range=0h",
        "range=91d",
        "range=banana",
        "limit=0",
        "limit=101",
        "limit=-1",
        "limit=1.5",
        "offset=-1",
        "offset=1000",
        "page=0",
        "pageSize=500",
        "page=1&limit=5",
        "model=nope",
        "perAuthor=0",
        "explain=maybe",
        "limit=5&limit=6",
        "lmit=5",
        "cursor=garbage",
    ] {
        let (status, err) = s.get(&format!("/api/hot?{q}")).await;
        assert_eq!(status, bad, "{q} -> {err}");
        assert!(err["error"]["code"].as_str().is_some(), "{q}");
    }
    // Articles.
    for (path, body, code) in [
        ("/api/articles/a%20b", json!({}), "invalid_article_id"),
        (
            "/api/articles/ok",
            json!({"publishedAt": -1}),
            "invalid_timestamp",
        ),
        (
            "/api/articles/ok",
            json!({"title": "x".repeat(600)}),
            "invalid_article",
        ),
        (
            "/api/articles/ok",
            json!({"groups": ["a b"]}),
            "invalid_group",
        ),
        ("/api/articles/ok", json!({"colour": "red"}), "invalid_json"),
    ] {
        let (status, err) = s.admin_put(path, &body).await;
        assert_eq!(status, bad, "{path} {body}");
        assert_eq!(err["error"]["code"], code, "{path} {body}");
    }
    // Unknown routes and methods.
    let (status, err) = s.get("/api/nothing-here").await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
    let r = s.client.get(s.url("/api/views")).send().await.unwrap();
    expect_error(r, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed").await;
    let r = s.client.delete(s.url("/api/hot")).send().await.unwrap();
    expect_error(r, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed").await;
    let (status, _) = s.get("/api/articles/never-seen").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    assert_eq!(
        fingerprint(&s).await,
        before,
        "a bad request changed stored state"
    );
}
