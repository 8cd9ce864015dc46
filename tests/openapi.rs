//! The OpenAPI document served at `/openapi.json` against the real router:
//! every documented operation exists, every route is documented, and every
//! `$ref` resolves.

mod common;

use std::collections::BTreeSet;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use common::TestServer;

/// Every route and method the routers in `src/api/*.rs` define, as written
/// in their `.route(...)` calls.
const ROUTES: &[(&str, &str)] = &[
    // ingest.rs
    ("/api/views", "post"),
    ("/api/views", "options"),
    ("/api/events", "post"),
    ("/api/events", "options"),
    ("/api/events/{eventId}", "get"),
    // articles.rs
    ("/api/articles/{id}", "get"),
    ("/api/articles/{id}", "put"),
    ("/api/articles/{id}", "delete"),
    ("/api/articles/{id}/groups", "post"),
    ("/api/articles", "post"),
    ("/api/articles/{id}/vote", "post"),
    ("/api/articles/{id}/hourly", "get"),
    // curation.rs
    ("/api/articles/{id}/pin", "put"),
    ("/api/articles/{id}/pin", "delete"),
    ("/api/articles/{id}/exclude", "put"),
    ("/api/articles/{id}/exclude", "delete"),
    ("/api/review", "get"),
    ("/api/review/{id}", "post"),
    ("/review", "get"),
    ("/review.js", "get"),
    ("/review.css", "get"),
    // rankings.rs
    ("/api/hot", "get"),
    ("/api/new", "get"),
    // feeds.rs
    ("/feeds/hot.rss", "get"),
    ("/feeds/hot.atom", "get"),
    ("/feeds/hot.json", "get"),
    // stream.rs
    ("/api/stream", "get"),
    // overview.rs
    ("/api/overview", "get"),
    ("/api/compare", "get"),
    // webhooks.rs
    ("/api/webhooks", "post"),
    ("/api/webhooks", "get"),
    ("/api/webhooks/{id}", "delete"),
    ("/api/webhooks/{id}/deliveries", "get"),
    // ops.rs
    ("/healthz", "get"),
    ("/readyz", "get"),
    ("/metrics", "get"),
    ("/openapi.json", "get"),
    ("/api/stats", "get"),
    ("/api/settings", "get"),
    // web.rs
    ("/", "get"),
    ("/dashboard.js", "get"),
    ("/dashboard.css", "get"),
    ("/tracker.js", "get"),
    // widget.rs
    ("/widget.js", "get"),
    ("/widget.css", "get"),
    ("/embed", "get"),
    // ctr.rs
    ("/api/ctr", "get"),
];

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "patch", "head", "options", "trace",
];

async fn fetch_doc(server: &TestServer) -> Value {
    let resp = server
        .client
        .get(server.url("/openapi.json"))
        .send()
        .await
        .expect("GET /openapi.json");
    assert_eq!(resp.status(), StatusCode::OK);
    let ctype = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    assert!(
        ctype.starts_with("application/json"),
        "content type {ctype}"
    );
    resp.json().await.expect("the document is JSON")
}

/// `(path, method)` for every operation in the document.
fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let paths = doc["paths"].as_object().expect("paths is an object");
    let mut ops = BTreeSet::new();
    for (path, item) in paths {
        let item = item.as_object().expect("path item is an object");
        for m in METHODS {
            if item.contains_key(*m) {
                ops.insert((path.clone(), m.to_string()));
            }
        }
    }
    ops
}

fn concrete(path: &str) -> String {
    path.replace("{id}", "abc")
}

async fn request(server: &TestServer, method: &str, path: &str) -> (StatusCode, Value) {
    let method = Method::from_bytes(method.to_ascii_uppercase().as_bytes()).expect("method");
    let mut req = server.client.request(method.clone(), server.url(path));
    if method == Method::POST || method == Method::PUT {
        req = req.json(&json!({}));
    }
    let resp = req.send().await.expect("request");
    let status = resp.status();
    // A live stream (`/api/stream`) never ends: its head is the answer.
    let is_stream = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if is_stream {
        return (status, Value::Null);
    }
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn document_is_openapi_3_1() {
    let server = TestServer::start().await;
    let doc = fetch_doc(&server).await;
    let version = doc["openapi"].as_str().expect("openapi is a string");
    assert!(version.starts_with("3.1."), "openapi {version}");
    assert!(doc["info"]["title"].is_string());
    assert!(doc["info"]["version"].is_string());
    assert!(
        doc["components"]["responses"]["Unavailable"]["headers"]["Retry-After"].is_object(),
        "503 documents Retry-After"
    );
}

#[tokio::test]
async fn every_documented_operation_is_served() {
    let server = TestServer::start().await;
    let doc = fetch_doc(&server).await;
    // So that GET /api/articles/abc finds an article rather than a 404.
    let (status, body) = server.admin_put("/api/articles/abc", &json!({})).await;
    assert!(status.is_success(), "{status} {body}");

    let ops = operations(&doc);
    assert!(!ops.is_empty());
    for (path, method) in &ops {
        let (status, body) = request(&server, method, &concrete(path)).await;
        assert_ne!(
            status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}: {body}"
        );
        assert!(
            !(status == StatusCode::NOT_FOUND && body["error"]["code"] == "not_found"),
            "{method} {path} answered 404 not_found: {body}"
        );
    }

    // And a method a path does not document is not served on it.
    let paths: BTreeSet<&String> = ops.iter().map(|(p, _)| p).collect();
    for path in paths {
        for method in ["get", "put", "post", "delete", "patch"] {
            if ops.contains(&(path.clone(), method.to_string())) {
                continue;
            }
            let (status, body) = request(&server, method, &concrete(path)).await;
            assert_eq!(
                status,
                StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path} is served but not documented: {body}"
            );
            assert_eq!(body["error"]["code"], "method_not_allowed");
        }
    }
}

#[tokio::test]
async fn every_route_is_documented() {
    let server = TestServer::start().await;
    let doc = fetch_doc(&server).await;
    let ops = operations(&doc);
    let routes: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(p, m)| (p.to_string(), m.to_string()))
        .collect();
    let missing: Vec<_> = routes.difference(&ops).collect();
    assert!(
        missing.is_empty(),
        "routes not in the document: {missing:?}"
    );
    let extra: Vec<_> = ops.difference(&routes).collect();
    assert!(
        extra.is_empty(),
        "operations the routers do not define: {extra:?}"
    );
}

fn collect_refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                if k == "$ref" {
                    out.push(x.as_str().expect("$ref is a string"));
                } else {
                    collect_refs(x, out);
                }
            }
        }
        Value::Array(xs) => xs.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

#[tokio::test]
async fn every_ref_resolves() {
    let server = TestServer::start().await;
    let doc = fetch_doc(&server).await;
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(!refs.is_empty());
    for r in refs {
        let pointer = r
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("{r} is not a local reference"));
        assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
    }
}

/// The `range` pattern admits exactly the ranges the server parses.
#[tokio::test]
async fn range_pattern_is_the_parser() {
    let server = TestServer::start().await;
    let doc = fetch_doc(&server).await;
    let pattern = doc["components"]["parameters"]["range"]["schema"]["pattern"]
        .as_str()
        .expect("range has a pattern");
    let re = regex::Regex::new(pattern).unwrap();
    let mut candidates = vec!["all".to_string(), "ALL".into(), "".into(), "h".into()];
    for n in 0..2500 {
        for unit in ["h", "d", "w", ""] {
            candidates.push(format!("{n}{unit}"));
            candidates.push(format!("0{n}{unit}"));
        }
    }
    for c in candidates {
        assert_eq!(
            re.is_match(&c),
            hotrank::model::RangeSpec::parse(&c).is_some(),
            "{c:?}"
        );
    }
}

/// Every operation documents the answers any route can give: 414 and 431
/// (the head limits), 408 where a body is read, and 429 where a budget
/// applies.
#[tokio::test]
async fn every_operation_documents_the_guards() {
    let server = TestServer::start().await;
    let doc = fetch_doc(&server).await;
    for (path, method) in operations(&doc) {
        if method == "options" {
            continue;
        }
        let op = &doc["paths"][&path][&method];
        let responses = op["responses"].as_object().unwrap();
        for status in ["414", "431"] {
            assert!(responses.contains_key(status), "{method} {path}: {status}");
        }
        if op.get("requestBody").is_some() {
            assert!(responses.contains_key("408"), "{method} {path}: 408");
        }
    }
    for (path, method) in [
        ("/api/hot", "get"),
        ("/api/articles/{id}", "put"),
        ("/api/articles", "post"),
        ("/api/articles/{id}/vote", "post"),
    ] {
        let r = &doc["paths"][path][method]["responses"]["429"];
        assert!(r.is_object(), "{method} {path}: 429");
    }
    assert!(
        doc["components"]["responses"]["TooManyRequests"]["headers"]["Retry-After"].is_object()
    );
}

/// The `### METHOD /path` headings of the project's API reference.
fn reference_sections() -> BTreeSet<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md");
    std::fs::read_to_string(path)
        .expect("docs/api.md")
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .filter_map(|h| {
            let (method, path) = h.split_once(' ')?;
            Some((path.trim().to_string(), method.to_lowercase()))
        })
        .collect()
}

#[tokio::test]
async fn the_api_reference_documents_exactly_the_served_operations() {
    let server = TestServer::start().await;
    let doc = fetch_doc(&server).await;
    // CORS preflights (OPTIONS) are described once, under Conventions.
    let served: BTreeSet<_> = operations(&doc)
        .into_iter()
        .filter(|(_, m)| m != "options")
        .collect();
    let written = reference_sections();
    let missing: Vec<_> = served.difference(&written).collect();
    let extra: Vec<_> = written.difference(&served).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/api.md lacks {missing:?} and has {extra:?} that /openapi.json does not"
    );
    // Every model the API accepts is in its table.
    let reference =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md")).unwrap();
    for model in doc["components"]["schemas"]["Model"]["enum"]
        .as_array()
        .unwrap()
    {
        let row = format!("| `{}` |", model.as_str().unwrap());
        assert!(
            reference.contains(&row),
            "docs/api.md's models lack {model}"
        );
    }
}
