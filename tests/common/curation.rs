//! Helpers of the curation tests (tests/curation.rs, tests/curation_ui.rs):
//! a seeded site whose uncurated order is known, admin calls.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{ADMIN, T0, TestServer};
use hotrank::config::{Config, ReviewMode};

pub const N: usize = 16;
pub const CATS: [Option<&str>; 3] = [None, Some("x"), Some("y")];

pub fn art(i: usize) -> String {
    format!("a{i:02}")
}

/// `N` articles, categories `x` (even) and `y` (odd), article `i` with
/// `N + 4 - i` views: the uncurated order is by `i`.
pub async fn seed(s: &TestServer) {
    for i in 0..N {
        let cat = if i % 2 == 0 { "x" } else { "y" };
        let (st, b) = s
            .admin_put(
                &format!("/api/articles/{}", art(i)),
                &json!({"title": format!("Article {i}"), "category": cat, "publishedAt": T0 - 3600}),
            )
            .await;
        assert!(st.is_success(), "{st} {b}");
    }
    let events: Vec<Value> = (0..N)
        .flat_map(|i| {
            (0..N + 4 - i).map(move |v| {
                json!({"type": "view", "articleId": art(i), "visitorId": format!("v{i}-{v}")})
            })
        })
        .collect();
    let (st, b) = s.post("/api/events", &json!({ "events": events })).await;
    assert_eq!(st, StatusCode::OK, "{b}");
}

pub async fn admin(
    s: &TestServer,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut r = s.client.request(method, s.url(path)).bearer_auth(ADMIN);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.expect("request");
    let st = resp.status();
    (st, resp.json().await.unwrap_or(Value::Null))
}

pub fn cat_query(cat: Option<&str>) -> String {
    cat.map_or(String::new(), |c| format!("&category={c}"))
}

pub fn review_mode(on: bool) -> impl FnOnce(&mut Config) {
    move |c: &mut Config| {
        if on {
            c.review.mode = ReviewMode::NewEntries;
        }
    }
}

/// The first `ranking` event of `GET <path>` (`/api/stream?...`), as JSON.
pub async fn first_ranking(s: &TestServer, path: &str) -> Value {
    let mut r = s.client.get(s.url(path)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let mut buf = String::new();
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let chunk = r.chunk().await.unwrap().expect("the stream goes on");
            buf.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(at) = buf.find("event: ranking\n")
                && let Some(line) = buf[at..].lines().find(|l| l.starts_with("data: "))
                && buf[at..].contains("\n\n")
            {
                return serde_json::from_str::<Value>(&line["data: ".len()..]).unwrap();
            }
        }
    })
    .await
    .expect("a ranking event")
}
