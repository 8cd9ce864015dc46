//! The HTTP API end to end over loopback: the README's walk-through, the
//! verdicts, articles, rankings, stats and operations endpoints.

mod common;

use reqwest::StatusCode;
use serde_json::{Value, json};

use common::{ADMIN, INGEST, T0, TestServer};

#[tokio::test]
async fn walk_through() {
    let s = TestServer::start().await;
    let (status, body) = s
        .admin_put(
            "/api/articles/12345",
            &json!({"title": "Redis 6 hot articles", "author": "ann", "category": "db",
                    "publishedAt": T0 - 3600}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["articleId"], "12345");
    let (status, body) = s
        .post(
            "/api/views",
            &json!({"articleId": 12345, "visitorId": "v-9f2c"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(body, json!({"verdict": "counted", "pv": 1, "uv": 1}));
    let (_, body) = s
        .post(
            "/api/views",
            &json!({"articleId": "12345", "visitorId": "v-9f2c"}),
        )
        .await;
    assert_eq!(body, json!({"verdict": "duplicate", "pv": 1, "uv": 1}));
    assert_eq!(s.view("12345", "v-other").await, "counted");
    let (status, body) = s
        .post(
            "/api/events",
            &json!({"events": [
                {"type": "view", "articleId": "777", "visitorId": "a"},
                {"type": "dwell", "articleId": "12345", "visitorId": "a", "seconds": 42},
                {"type": "like", "articleId": "12345", "visitorId": "a"},
                {"type": "comment", "articleId": "2", "visitorId": "b", "eventId": "c-77"},
                {"type": "teleport", "articleId": "2", "visitorId": "b"}
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["accepted"], 4);
    assert_eq!(body["verdicts"]["counted"], 4);
    assert_eq!(body["errors"][0]["index"], 4);
    assert_eq!(body["errors"][0]["code"], "invalid_event_type");

    s.clock.advance(60);
    let (status, hot) = s.get("/api/hot?range=72h&limit=20&explain=true").await;
    assert_eq!(status, StatusCode::OK, "{hot}");
    assert_eq!(hot["model"], "gravity");
    assert_eq!(hot["range"], "72h");
    assert_eq!(hot["generatedAt"], T0 + 60);
    let items = hot["items"].as_array().unwrap();
    // Article 2 has only a comment: no views, score 0, but it is active.
    assert_eq!(common::page_ids(&hot), ["12345", "777", "2"]);
    let first = &items[0];
    assert_eq!(first["rank"], 1);
    let e = &first["explain"];
    let rebuilt = (e["pvTerm"].as_f64().unwrap() + e["uvTerm"].as_f64().unwrap())
        / e["decay"].as_f64().unwrap();
    assert!((rebuilt - first["score"].as_f64().unwrap()).abs() < 1e-12);
    let a = &items[0];
    assert_eq!((a["pv"].as_u64(), a["uv"].as_u64()), (Some(2), Some(2)));
    assert_eq!(a["title"], "Redis 6 hot articles");

    let (status, art) = s.get("/api/articles/12345").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(art["pv"], 2);
    assert_eq!(art["likes"], 1);
    assert_eq!(art["avgDwellSeconds"], 42.0);
    assert_eq!(art["quarantined"]["duplicate"], 1);
    assert!(art["scores"]["gravity"].as_f64().unwrap() > 0.0);

    let (_, stats) = s.get("/api/stats").await;
    assert_eq!(stats["counted"], 6);
    assert_eq!(stats["quarantined"]["duplicate"], 1);

    let (_, newest) = s.get("/api/new?limit=2").await;
    // "2" and "777" were both first seen at T0: ties go by id.
    assert_eq!(newest["items"][0]["articleId"], "2");
    assert!(newest["cursor"].is_string());
}

#[tokio::test]
async fn page_and_page_size_match_offset_and_limit() {
    let s = TestServer::start().await;
    let events: Vec<_> = (0..12)
        .flat_map(|a| {
            (0..(12 - a)).map(move |v| json!({"type": "view", "articleId": format!("a{a}"), "visitorId": format!("v{a}-{v}")}))
        })
        .collect();
    let (status, _) = s.post("/api/events", &json!({ "events": events })).await;
    assert_eq!(status, StatusCode::OK);
    let (_, by_offset) = s.get("/api/hot?limit=5&offset=5").await;
    let (_, by_page) = s.get("/api/hot?page=2&pageSize=5").await;
    // Movement is computed in the background on a ranking's first answer
    // in an hour: the second answer may have it where the first had null.
    let ranked = |page: &serde_json::Value| {
        let mut items = page["items"].clone();
        for it in items.as_array_mut().unwrap() {
            let it = it.as_object_mut().unwrap();
            it.remove("movement");
            it.remove("previousRank");
        }
        items
    };
    assert_eq!(ranked(&by_offset), ranked(&by_page));
    assert_eq!(by_page["items"][0]["rank"], 6);
    assert_eq!(by_page["items"][0]["articleId"], "a5");
    // Following cursors visits everything once.
    let (_, mut page) = s.get("/api/hot?limit=5").await;
    let mut seen: Vec<String> = vec![];
    loop {
        for i in page["items"].as_array().unwrap() {
            seen.push(i["articleId"].as_str().unwrap().to_string());
        }
        let Some(c) = page["cursor"].as_str() else {
            break;
        };
        page = s.get(&format!("/api/hot?limit=5&cursor={c}")).await.1;
    }
    let expected: Vec<String> = (0..12).map(|a| format!("a{a}")).collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn bots_rate_limits_and_trusted_backends() {
    let s = TestServer::start_with(|c| c.gate.visitor_limit_per_minute = 3).await;
    let bot = s
        .client
        .post(s.url("/api/views"))
        .header(
            "user-agent",
            "Googlebot/2.1 (+http://www.google.com/bot.html)",
        )
        .json(&json!({"articleId": "a", "visitorId": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bot.status(), StatusCode::ACCEPTED);
    assert_eq!(
        bot.json::<serde_json::Value>().await.unwrap()["verdict"],
        "bot"
    );
    let verdicts: Vec<String> = views_by_one_visitor(&s, 5).await;
    assert_eq!(
        verdicts,
        [
            "counted",
            "counted",
            "counted",
            "rate_limited",
            "rate_limited"
        ]
    );
    // A trusted backend speaks for readers: their UA decides, their IP limits.
    let r = s
        .client
        .post(s.url("/api/events"))
        .bearer_auth(INGEST)
        .header("user-agent", "python-requests/2.32")
        .json(&json!({"events": [
            {"type": "view", "articleId": "b", "visitorId": "r1", "ip": "203.0.113.9",
             "userAgent": common::BROWSER_UA},
            {"type": "view", "articleId": "b", "visitorId": "r2", "ip": "203.0.113.9",
             "userAgent": "Bingbot/2.0"}
        ]}))
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["verdicts"]["counted"], 1);
    assert_eq!(body["verdicts"]["bot"], 1);
    // A wrong token is refused outright.
    let r = s
        .client
        .post(s.url("/api/views"))
        .bearer_auth("not-the-token")
        .json(&json!({"articleId": "b"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
}

/// `n` views by one visitor, each of another article, in order.
async fn views_by_one_visitor(s: &TestServer, n: usize) -> Vec<String> {
    let mut out = vec![];
    for i in 0..n {
        out.push(s.view(&format!("r{i}"), "same-visitor").await);
    }
    out
}

#[tokio::test]
async fn articles_need_the_admin_token() {
    let s = TestServer::start().await;
    let body = json!({"title": "t"});
    let r = s
        .client
        .put(s.url("/api/articles/x"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let err: serde_json::Value = r.json().await.unwrap();
    assert_eq!(err["error"]["code"], "unauthorized");
    let r = s
        .client
        .put(s.url("/api/articles/x"))
        .bearer_auth("wrong-token")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        s.admin_put("/api/articles/x", &body).await.0,
        StatusCode::CREATED
    );
    assert_eq!(
        s.admin_put("/api/articles/x", &body).await.0,
        StatusCode::OK
    );
    let r = s
        .client
        .post(s.url("/api/articles/x/groups"))
        .bearer_auth(ADMIN)
        .json(&json!({"add": ["rust", "db"], "remove": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["groups"],
        json!(["db", "rust"])
    );
    let r = s
        .client
        .delete(s.url("/api/articles/x"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = s
        .client
        .delete(s.url("/api/articles/x"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(s.get("/api/articles/x").await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn operations_endpoints() {
    let s = TestServer::start().await;
    assert_eq!(s.get("/healthz").await.0, StatusCode::OK);
    assert_eq!(s.get("/readyz").await.0, StatusCode::OK);
    s.view("m", "v").await;
    s.get("/api/hot").await;
    let text = s.text("/metrics").await;
    for name in [
        "hotrank_events_total",
        "hotrank_ingest_seconds",
        "hotrank_query_seconds",
        "hotrank_http_requests_total",
        "hotrank_wal_fsync_seconds",
    ] {
        assert!(text.contains(name), "{name} missing from /metrics");
    }
    let page = s.client.get(s.url("/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("<title>hotrank</title>")
    );
}

#[tokio::test]
async fn require_known_articles() {
    let s = TestServer::start_with(|c| c.require_known_articles = true).await;
    let (status, body) = s
        .post(
            "/api/views",
            &json!({"articleId": "nope", "visitorId": "v"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "unknown_article");
    s.admin_put("/api/articles/yes", &json!({})).await;
    assert_eq!(s.view("yes", "v").await, "counted");
    // A batch naming only unknown articles is the same 404 (API.md)...
    let (status, body) = s
        .post(
            "/api/events",
            &json!({"events": [{"type": "view", "articleId": "nope", "visitorId": "v"}]}),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("unknown_article"))
    );
    // ...and in a batch where others apply, the unknown one is listed.
    let (status, body) = s
        .post(
            "/api/events",
            &json!({"events": [
                {"type": "view", "articleId": "yes", "visitorId": "w"},
                {"type": "view", "articleId": "nope", "visitorId": "w"}
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["accepted"], 1);
    assert_eq!(body["errors"][0]["code"], "unknown_article");
    assert_eq!(s.get("/api/articles/nope").await.0, StatusCode::NOT_FOUND);
}

/// What /openapi.json promises about values: an integral number is an
/// integer, `null` is an absent field, `limit`/`offset` and
/// `page`/`pageSize` mix, and pages past the ranking's depth are empty.
#[tokio::test]
async fn values_as_the_document_describes_them() {
    let s = TestServer::start().await;
    let (status, v) = s
        .post(
            "/api/views",
            &json!({"articleId": 7.0, "visitorId": "a", "ts": T0 as f64, "userId": null, "eventId": null}),
        )
        .await;
    assert_eq!(
        (status, v["verdict"].as_str()),
        (StatusCode::ACCEPTED, Some("counted")),
        "{v}"
    );
    let (status, a) = s
        .admin_put(
            "/api/articles/7",
            &json!({"publishedAt": (T0 - 3600) as f64, "title": null, "category": "é".repeat(128)}),
        )
        .await;
    assert!(status.is_success(), "{a}");
    assert_eq!(a["publishedAt"], T0 - 3600);
    // 128 characters are fine, 129 are not, whatever their bytes.
    let (status, _) = s
        .admin_put("/api/articles/7", &json!({"category": "é".repeat(129)}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    for i in 0..30 {
        s.view(&format!("p{i}"), "v").await;
    }
    let ids = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["articleId"].as_str().unwrap().to_string())
            .collect()
    };
    let (_, all) = s.get("/api/hot?range=all&limit=31").await;
    let all = ids(&all);
    let (status, mixed) = s
        .get("/api/hot?range=all&offset=2&page=3&pageSize=4&limit=9")
        .await;
    assert_eq!(status, StatusCode::OK, "{mixed}");
    assert_eq!(ids(&mixed), all[10..14].to_vec());
    let (status, deep) = s.get("/api/hot?offset=100000").await;
    assert_eq!(status, StatusCode::OK, "{deep}");
    assert!(deep["items"].as_array().unwrap().is_empty());
    assert!(deep["cursor"].is_null());
}

#[tokio::test]
async fn tracker_and_dashboard_are_cached_with_etags() {
    let s = TestServer::start().await;
    for (path, ctype) in [
        ("/tracker.js", "text/javascript"),
        ("/", "text/html"),
        ("/dashboard.js", "text/javascript"),
        ("/dashboard.css", "text/css"),
    ] {
        let r = s.client.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        let h = r.headers().clone();
        assert!(
            h["content-type"].to_str().unwrap().starts_with(ctype),
            "{path}"
        );
        let cache = h["cache-control"].to_str().unwrap();
        assert!(cache.starts_with("public, max-age="), "{path}: {cache}");
        let etag = h["etag"].to_str().unwrap().to_string();
        assert!(!r.text().await.unwrap().is_empty());
        let r = s
            .client
            .get(s.url(path))
            .header("If-None-Match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_MODIFIED, "{path}");
        assert_eq!(r.headers()["etag"].to_str().unwrap(), etag);
        assert!(r.text().await.unwrap().is_empty());
        let r = s
            .client
            .get(s.url(path))
            .header("If-None-Match", "\"other\"")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
    }
    let r = s.client.get(s.url("/")).send().await.unwrap();
    let csp = r.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    let page = r.text().await.unwrap();
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "no outside file"
    );
    let tracker = s.text("/tracker.js").await;
    assert!(
        tracker.len() < 12 * 1024,
        "tracker is {} bytes",
        tracker.len()
    );
    assert!(!tracker.contains("document.cookie"));
}

#[tokio::test]
async fn cors_for_configured_origins_only() {
    let s = TestServer::start_with(|c| c.cors_origins = vec!["https://site.example".into()]).await;
    for path in ["/api/views", "/api/events"] {
        let r = s
            .client
            .request(reqwest::Method::OPTIONS, s.url(path))
            .header("Origin", "https://site.example")
            .header("Access-Control-Request-Method", "POST")
            .header("Access-Control-Request-Headers", "content-type")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT, "{path}");
        let h = r.headers();
        assert_eq!(h["access-control-allow-origin"], "https://site.example");
        assert_eq!(h["access-control-allow-methods"], "POST");
        assert_eq!(h["access-control-allow-headers"], "Content-Type");
        assert!(h.contains_key("access-control-max-age"));
        assert_eq!(h["vary"], "Origin");

        let r = s
            .client
            .request(reqwest::Method::OPTIONS, s.url(path))
            .header("Origin", "https://evil.example")
            .header("Access-Control-Request-Method", "POST")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        let h = r.headers();
        for name in [
            "access-control-allow-origin",
            "access-control-allow-methods",
            "access-control-allow-headers",
        ] {
            assert!(!h.contains_key(name), "{path}: {name} for a stranger");
        }
        assert_eq!(h["vary"], "Origin");
    }
    let post = |origin: &'static str| {
        s.client
            .post(s.url("/api/views"))
            .header("Origin", origin)
            .json(&json!({"articleId": "c1", "visitorId": origin}))
            .send()
    };
    let r = post("https://site.example").await.unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://site.example"
    );
    let r = post("https://evil.example").await.unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    assert!(!r.headers().contains_key("access-control-allow-origin"));
    // Errors carry the header too, so the page can read them.
    let r = s
        .client
        .post(s.url("/api/events"))
        .header("Origin", "https://site.example")
        .json(&json!({"nope": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://site.example"
    );

    // "*" allows any origin (echoed); with no list, no CORS at all.
    let any = TestServer::start_with(|c| c.cors_origins = vec!["*".into()]).await;
    let r = any
        .client
        .request(reqwest::Method::OPTIONS, any.url("/api/events"))
        .header("Origin", "http://localhost:3000")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "http://localhost:3000"
    );
    let none = TestServer::start().await;
    let r = none
        .client
        .request(reqwest::Method::OPTIONS, none.url("/api/views"))
        .header("Origin", "https://site.example")
        .send()
        .await
        .unwrap();
    assert!(!r.headers().contains_key("access-control-allow-origin"));
}

#[tokio::test]
async fn hourly_series_of_an_article() {
    let s = TestServer::start().await;
    let hour = T0 - T0 % 3600;
    for (ts, visitor) in [(hour - 7200, "a"), (hour - 7200, "b"), (hour, "a")] {
        let (status, body) = s
            .post(
                "/api/views",
                &json!({"articleId": "h1", "visitorId": visitor, "ts": ts}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    // A duplicate, in the current hour.
    let (_, body) = s
        .post(
            "/api/views",
            &json!({"articleId": "h1", "visitorId": "a", "ts": hour + 1}),
        )
        .await;
    assert_eq!(body["verdict"], "duplicate");
    let (status, body) = s.get("/api/articles/h1/hourly?hours=3").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["articleId"], "h1");
    let hours = body["hours"].as_array().unwrap();
    assert_eq!(hours.len(), 3);
    assert_eq!(
        hours[0],
        json!({"hour": hour - 7200, "pv": 2, "uv": 2,
               "quarantined": {"duplicate": 0, "rate_limited": 0, "bot": 0, "replayed": 0}})
    );
    assert_eq!(hours[1]["pv"], 0);
    assert_eq!(hours[1]["hour"], hour - 3600);
    assert_eq!(hours[2]["pv"], 1);
    assert_eq!(hours[2]["quarantined"]["duplicate"], 1);
    let (_, body) = s.get("/api/articles/h1/hourly").await;
    assert_eq!(body["hours"].as_array().unwrap().len(), 72);
    for bad in ["hours=0", "hours=2161", "hours=x", "days=1"] {
        let (status, body) = s.get(&format!("/api/articles/h1/hourly?{bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    let (status, body) = s.get("/api/articles/nope/hourly").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _) = s.get("/api/articles/bad%20id/hourly").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // The article also says how much dwell time was reported in total.
    let (_, body) = s.get("/api/articles/h1").await;
    assert_eq!(body["dwellSeconds"], 0);
    assert_eq!(body["dwellReports"], 0);
}
