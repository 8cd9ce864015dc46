//! Every row of the error table in API.md: each bad request gets its JSON
//! error with a 4xx status, and nothing stored changes.

mod common;

use reqwest::StatusCode;
use serde_json::{Value, json};

use common::{T0, TestServer, expect_error};

/// Everything a bad request could have changed.
async fn fingerprint(s: &TestServer) -> Value {
    let (_, stats) = s.get("/api/stats").await;
    let (_, hot) = s.get("/api/hot?range=all&limit=100").await;
    let (_, a) = s.get("/api/articles/base").await;
    json!({"stats": stats, "hot": hot["items"], "article": a})
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
    // A batch that is well-formed JSON but for one byte that is not UTF-8.
    let mut not_utf8 = br#"{"events": [{"articleId": "a1", "visitorId": "v"}]}"#.to_vec();
    let at = not_utf8.iter().position(|&b| b == b'v').unwrap();
    not_utf8[at] = 0xff;
    expect_error(
        post_raw("/api/events", "application/json", not_utf8)
            .await
            .unwrap(),
        bad,
        "invalid_json",
    )
    .await;
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
        "offset=100001",
        "page=100001",
        "page=0",
        "pageSize=500",
        "range=072h",
        "range=%C3%A9",
        "range=1%C3%A9",
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
    // Arrays are not objects, whatever their length (serde would fill a
    // struct from one).
    let nine = json!(["view", "base", "v", "u", 1, "e", 1, "1.1.1.1", "ua"]);
    let (status, err) = s.post("/api/views", &nine).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (bad, Some("invalid_event"))
    );
    let (status, err) = s.post("/api/events", &json!([[]])).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (bad, Some("invalid_json"))
    );
    let (status, err) = s.admin_put("/api/articles/base", &json!(["t"])).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (bad, Some("invalid_json"))
    );
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

/// A cursor whose offset was edited (near 2^64, or past the deepest a
/// ranking goes) is refused with 400 `invalid_cursor` on every store; it
/// once overflowed the page arithmetic (a panic: 500).
#[tokio::test]
async fn forged_cursor_offsets_are_refused_on_every_store() {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    let redis = common::redis::RedisServer::shared();
    let embedded = TestServer::start().await;
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let on_redis = TestServer::start_redis(dir, &redis.url(), |c| {
        c.redis.prefix = common::redis::unique_prefix();
    })
    .await;
    for s in [&embedded, &on_redis] {
        for a in 0..12 {
            s.view(&format!("a{a}"), "v").await;
        }
        let (status, first) = s.get("/api/hot?limit=2").await;
        assert_eq!(status, StatusCode::OK, "{first}");
        let cursor = first["cursor"].as_str().expect("a cursor").to_string();
        let text = String::from_utf8(URL_SAFE_NO_PAD.decode(&cursor).unwrap()).unwrap();
        let (snapshot, _) = text.rsplit_once('.').unwrap();
        let cap = hotrank::config::Config::default().retention.ranking_cap as u64;
        for offset in [u64::MAX, u64::MAX - 1, u64::MAX - 100, cap + 1] {
            let forged = URL_SAFE_NO_PAD.encode(format!("{snapshot}.{offset}"));
            let r = s
                .client
                .get(s.url(&format!("/api/hot?limit=2&cursor={forged}")))
                .send()
                .await
                .unwrap();
            expect_error(r, StatusCode::BAD_REQUEST, "invalid_cursor").await;
        }
        // The real cursor still works.
        let (status, next) = s.get(&format!("/api/hot?limit=2&cursor={cursor}")).await;
        assert_eq!(status, StatusCode::OK, "{next}");
        assert_eq!(next["items"][0]["rank"], 3, "{next}");
    }
}

/// Fuzzing through the real router (`tower::ServiceExt::oneshot`): any
/// bytes or text in any query parameter, any JSON-ish body on any POST,
/// and the answer is a 2xx or a 4xx with the JSON error, never a panic
/// (which would be a 500) or an empty reply.
mod fuzz {
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::Request;
    use proptest::prelude::*;
    use serde_json::Value;
    use tower::ServiceExt;

    use super::common::{ADMIN, T0, test_config};
    use hotrank::config::Access;
    use hotrank::store::StoreSettings;
    use hotrank::store::embedded::{Durability, EmbeddedStore};

    struct Rig {
        rt: tokio::runtime::Runtime,
        app: axum::Router,
        _dir: tempfile::TempDir,
    }

    fn rig() -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let mut config = test_config(dir.path());
        config.posting = Access::Open;
        config.voting = Access::Open;
        // Budgets would turn later cases into 429s and hide the parsers.
        config.limits.queries_per_minute_per_ip = 0;
        config.limits.posts_per_minute_per_ip = 0;
        config.limits.posts_per_minute_per_user = 0;
        config.limits.votes_per_minute_per_ip = 0;
        config.limits.votes_per_minute_per_user = 0;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (store, _) = EmbeddedStore::open(
            Durability::from_config(&config),
            StoreSettings::from_config(&config),
        )
        .unwrap();
        let clock = hotrank::clock::ManualClock::at(T0);
        let state =
            hotrank::server::build_state(config, Arc::new(store), None, Arc::new(clock)).unwrap();
        let app = hotrank::api::router(state);
        let rig = Rig { rt, app, _dir: dir };
        rig.call(
            Request::put("/api/articles/x")
                .header("authorization", format!("Bearer {ADMIN}"))
                .header("content-type", "application/json")
                .body(Body::from("{}"))
                .unwrap(),
        )
        .unwrap();
        rig
    }

    impl Rig {
        /// Sends one request; `Err` says what was wrong with the answer.
        fn call(&self, req: Request<Body>) -> Result<(u16, Value), String> {
            let what = format!("{} {}", req.method(), req.uri());
            let (status, bytes) = self.rt.block_on(async {
                let resp = self.app.clone().oneshot(req).await.unwrap();
                let status = resp.status().as_u16();
                (
                    status,
                    axum::body::to_bytes(resp.into_body(), 1 << 24)
                        .await
                        .unwrap(),
                )
            });
            let body: Value = serde_json::from_slice(&bytes)
                .map_err(|e| format!("{what}: {status} with a body that is not JSON: {e}"))?;
            match status {
                200..=299 => Ok((status, body)),
                400..=499 if body["error"]["code"].is_string() => Ok((status, body)),
                _ => Err(format!("{what}: {status} {body}")),
            }
        }
    }

    fn encode(bytes: &[u8]) -> String {
        bytes
            .iter()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-._~".contains(b) {
                    (*b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    }

    /// The ranking parameters, and one no endpoint knows.
    static HOT_PARAMS: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| {
        let mut names = hotrank::api::RANKING_PARAMS.to_vec();
        names.push("other");
        names
    });

    /// A parameter value: raw bytes, any text, or something near valid.
    fn value() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..40),
            any::<String>().prop_map(String::into_bytes),
            "[0-9]{0,6}[hdé]?".prop_map(String::into_bytes),
            "-?[0-9]{1,25}".prop_map(String::into_bytes),
        ]
    }

    fn query(names: &'static [&'static str]) -> impl Strategy<Value = String> {
        proptest::collection::vec((proptest::sample::select(names), value()), 0..4).prop_map(
            |pairs| {
                pairs
                    .iter()
                    .map(|(k, v)| format!("{k}={}", encode(v)))
                    .collect::<Vec<_>>()
                    .join("&")
            },
        )
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
            any::<String>().prop_map(Value::from),
            "[a-z0-9_-]{1,70}".prop_map(Value::from),
            Just(Value::from("view")),
            Just(Value::from("dwell")),
            Just(Value::from("x")),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                proptest::collection::btree_map(
                    proptest::sample::select(FIELDS).prop_map(str::to_string),
                    inner,
                    0..6
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    const FIELDS: &[&str] = &[
        "type",
        "articleId",
        "visitorId",
        "userId",
        "ts",
        "eventId",
        "seconds",
        "ip",
        "userAgent",
        "events",
        "title",
        "url",
        "poster",
        "author",
        "category",
        "kind",
        "groups",
        "summary",
        "cover",
        "publishedAt",
        "direction",
        "add",
        "remove",
        "zzz",
    ];

    /// An object with known fields (so the parsers get past the shape), or
    /// any JSON, or any bytes.
    fn body() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::btree_map(
                proptest::sample::select(FIELDS).prop_map(str::to_string),
                json_value(),
                0..8
            )
            .prop_map(|m| serde_json::to_vec(&m).unwrap()),
            proptest::collection::vec(
                proptest::collection::btree_map(
                    proptest::sample::select(FIELDS).prop_map(str::to_string),
                    json_value(),
                    0..6
                ),
                0..4
            )
            .prop_map(|evs| serde_json::to_vec(&serde_json::json!({ "events": evs })).unwrap()),
            json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
            proptest::collection::vec(any::<u8>(), 0..64),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn query_parameters_never_break_the_server(
            hot in query(&HOT_PARAMS),
            new in query(&HOT_PARAMS),
            hourly in query(&["hours", "other"]),
            stats in query(&["hours"]),
        ) {
            thread_local!(static RIG: Rig = rig());
            RIG.with(|rig| {
                for path in [
                    format!("/api/hot?{hot}"),
                    format!("/api/new?{new}"),
                    format!("/api/articles/x/hourly?{hourly}"),
                    format!("/api/stats?{stats}"),
                ] {
                    let req = Request::get(path.as_str()).body(Body::empty()).unwrap();
                    rig.call(req).map_err(TestCaseError::fail)?;
                }
                Ok::<(), TestCaseError>(())
            })?;
        }

        #[test]
        fn bodies_never_break_the_server(body in body(), which in 0usize..6, text in any::<bool>()) {
            thread_local!(static RIG: Rig = rig());
            let (method, path) = [
                ("POST", "/api/views"),
                ("POST", "/api/events"),
                ("POST", "/api/articles"),
                ("POST", "/api/articles/x/vote"),
                ("PUT", "/api/articles/x"),
                ("POST", "/api/articles/x/groups"),
            ][which];
            RIG.with(|rig| {
                let req = Request::builder()
                    .method(method)
                    .uri(path)
                    .header("content-type", if text { "text/plain" } else { "application/json" })
                    .header("authorization", format!("Bearer {ADMIN}"))
                    .body(Body::from(body))
                    .unwrap();
                rig.call(req).map_err(TestCaseError::fail)?;
                Ok::<(), TestCaseError>(())
            })?;
        }
    }
}
