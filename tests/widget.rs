//! The embeddable list: `widget.js` rendered by Chromium on another
//! origin's page whose CSP allows only hotrank, its impressions and clicks
//! counted apart from views; `/embed` under its own strict CSP; the budget
//! that bounds a flood of clicks; the counts on disk and in Redis.
//!
//! The browser test is skipped without chromium/chromedriver unless `CI`
//! is set. `UPDATE_DOCS=1` also writes its screenshots to docs/widget.png
//! and docs/widget-phone.png.

mod common;
mod webdriver;

use std::path::Path;

use axum::response::IntoResponse;
use reqwest::StatusCode;
use serde_json::{Value, json};

use common::{T0, TestServer};
use webdriver::{Browser, SERIAL, tools};

async fn server_with(edit: impl FnOnce(&mut hotrank::config::Config)) -> TestServer {
    TestServer::start_with(|c| {
        c.gate.visitor_limit_per_minute = 0;
        c.gate.ip_limit_per_minute = 0;
        edit(c);
    })
    .await
}

/// Three articles with `views` views each, best first.
async fn articles(s: &TestServer, list: &[(&str, &str, &str, usize)]) {
    for (id, title, url, views) in list {
        let (st, b) = s
            .admin_put(
                &format!("/api/articles/{id}"),
                &json!({"title": title, "url": url, "publishedAt": T0 - 3600}),
            )
            .await;
        assert!(st.is_success(), "{b}");
        for v in 0..*views {
            assert_eq!(s.view(id, &format!("{id}-{v}")).await, "counted");
        }
    }
}

/// Every article's lifetime pv, and the site's totals.
async fn view_state(s: &TestServer, ids: &[&str]) -> Value {
    let mut out = serde_json::Map::new();
    for id in ids {
        let (_, a) = s.get(&format!("/api/articles/{id}")).await;
        out.insert(id.to_string(), json!([a["pv"], a["uv"], a["scores"]]));
    }
    out.insert("stats".into(), s.get("/api/stats").await.1);
    Value::Object(out)
}

/// `GET /api/ctr`'s row of `model`, or null.
async fn model_row(s: &TestServer, model: &str) -> Value {
    let (st, r) = s.get(&format!("/api/ctr?model={model}")).await;
    assert_eq!(st, StatusCode::OK, "{r}");
    r["models"][0].clone()
}

/// A host site on its own loopback origin: `/` holds the widget's one
/// script tag under a CSP that allows scripts and connections to hotrank
/// only (and the page's own spy script, which records CSP violations);
/// `/article/<id>` is where the links lead.
async fn host_site(hotrank: &str) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let csp = format!(
        "default-src 'none'; script-src 'self' {hotrank}; connect-src {hotrank}; \
         style-src {hotrank}; img-src 'none'; base-uri 'none'; form-action 'none'"
    );
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>A news site</title><script src=\"/spy.js\"></script></head><body>\
         <h1>A news site</h1><p>Some article text on the host page.</p>\
         <script src=\"{hotrank}/widget.js\" data-model=\"gravity\" data-range=\"24h\" \
         data-limit=\"5\" async></script>\
         <p>More of the host page below the widget.</p></body></html>"
    );
    let spy = "window.__violations = [];\
        document.addEventListener('securitypolicyviolation', function (e) {\
          window.__violations.push(e.violatedDirective + ' ' + e.blockedURI);\
        });";
    let app = axum::Router::new()
        .route(
            "/",
            axum::routing::get(move || {
                let (page, csp) = (page.clone(), csp.clone());
                async move {
                    (
                        [
                            ("content-type", "text/html; charset=utf-8".to_string()),
                            ("content-security-policy", csp),
                        ],
                        page,
                    )
                        .into_response()
                }
            }),
        )
        .route(
            "/spy.js",
            axum::routing::get(move || async move {
                ([("content-type", "text/javascript")], spy).into_response()
            }),
        )
        .route(
            "/article/{id}",
            axum::routing::get(|| async { "an article on the host site" }),
        );
    let handle = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (origin, handle)
}

const LINKS_JS: &str = "var h = document.querySelector('.hotrank-widget');\
    if (!h || !h.shadowRoot) return null;\
    var a = h.shadowRoot.querySelectorAll('ol li a');\
    if (!a.length) return null;\
    return Array.prototype.map.call(a, function (x) { return [x.textContent, x.href]; });";

/// Clicks at the centre of the widget's first link, as a person would.
async fn click_first_link(b: &Browser) {
    let at = b
        .js(
            "var a = document.querySelector('.hotrank-widget').shadowRoot.querySelector('a');\
             var r = a.getBoundingClientRect();\
             return [Math.round(r.left + r.width / 2), Math.round(r.top + r.height / 2)];",
        )
        .await;
    let (x, y) = (at[0].as_i64().unwrap(), at[1].as_i64().unwrap());
    b.cmd(
        "POST",
        "actions",
        json!({"actions": [{"type": "pointer", "id": "mouse",
            "parameters": {"pointerType": "mouse"},
            "actions": [
                {"type": "pointerMove", "x": x, "y": y, "origin": "viewport"},
                {"type": "pointerDown", "button": 0},
                {"type": "pointerUp", "button": 0}]}]}),
    )
    .await;
}

async fn wait_for(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn widget_renders_on_a_strict_csp_host_and_counts_impressions_and_clicks() {
    let Some((chromium, driver)) = tools() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let s = server_with(|_| {}).await;
    let (host, _site) = host_site(&s.base).await;
    articles(
        &s,
        &[
            (
                "a1",
                "The story everyone reads",
                &format!("{host}/article/a1"),
                9,
            ),
            (
                "a2",
                "Second <b>best</b> & more",
                &format!("{host}/article/a2"),
                6,
            ),
            ("a3", "Third, with no web address", "javascript:alert(1)", 3),
        ],
    )
    .await;
    let before = view_state(&s, &["a1", "a2", "a3"]).await;

    let b = Browser::start(&chromium, &driver).await;
    b.goto(&format!("{host}/")).await;
    let links = b.wait_js(LINKS_JS, "the widget's links").await;
    // Only the two web addresses are links, in ranking order, titles as text.
    assert_eq!(
        links,
        json!([
            ["The story everyone reads", format!("{host}/article/a1")],
            ["Second <b>best</b> & more", format!("{host}/article/a2")],
        ])
    );
    let shape = b
        .js(
            "var r = document.querySelector('.hotrank-widget').shadowRoot;\
             var s = r.querySelector('section');\
             return [s.getAttribute('aria-labelledby'), r.querySelector('h2').id,\
                     r.querySelector('h2').textContent, r.querySelectorAll('ol > li').length,\
                     r.querySelector('li span').textContent,\
                     getComputedStyle(s).borderTopStyle];",
        )
        .await;
    assert_eq!(
        shape,
        json!([
            "hr-title",
            "hr-title",
            "Popular now",
            3,
            "Third, with no web address",
            "solid"
        ]),
        "a labelled list of three, styled"
    );
    // Impressions: one per position shown, once.
    wait_for("three impressions", async || {
        let m = model_row(&s, "gravity").await;
        m["impressions"] == 3
    })
    .await;
    let m = model_row(&s, "gravity").await;
    assert_eq!(m["clicks"], 0, "{m}");
    assert_eq!(m["lists"][0]["list"], "gravity:24h", "{m}");

    // Screenshots, desktop and phone; nothing wider than a phone's screen.
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    b.screenshot(&shots.join("widget.png")).await;
    b.resize(375, 740).await;
    b.wait_js(
        "return document.documentElement.clientWidth <= 375",
        "a phone-sized window",
    )
    .await;
    b.assert_fits_width().await;
    b.screenshot(&shots.join("widget-phone.png")).await;
    if std::env::var_os("UPDATE_DOCS").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
        std::fs::copy(shots.join("widget.png"), docs.join("widget.png")).unwrap();
        std::fs::copy(
            shots.join("widget-phone.png"),
            docs.join("widget-phone.png"),
        )
        .unwrap();
    }

    // Keyboard focus shows an outline.
    let outline = b
        .js(
            "var a = document.querySelector('.hotrank-widget').shadowRoot.querySelector('a');\
             a.focus({focusVisible: true}); return getComputedStyle(a).outlineStyle;",
        )
        .await;
    assert_eq!(outline, "solid", "a focused link has a visible outline");

    let violations = b.js("return window.__violations").await;
    assert_eq!(violations, json!([]), "the host page's CSP was violated");
    // Nothing asked of any server but hotrank (and the host's own spy).
    let fetched = b
        .js("return performance.getEntriesByType('resource').map(function (e) { return e.name; })")
        .await;
    let fetched: Vec<&str> = fetched
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(fetched.len() >= 3, "{fetched:?}");
    for url in &fetched {
        assert!(
            url.starts_with(&format!("{}/", s.base)) || *url == format!("{host}/spy.js"),
            "the widget fetched {url}"
        );
    }

    click_first_link(&b).await;
    wait_for("one click at position 1", async || {
        let m = model_row(&s, "gravity").await;
        m["clicks"] == 1
    })
    .await;
    let m = model_row(&s, "gravity").await;
    assert_eq!(m["positions"][0]["clicks"], 1, "{m}");
    assert_eq!(m["positions"][0]["position"], 1, "{m}");
    let here = b.js("return location.href").await;
    assert_eq!(here, json!(format!("{host}/article/a1")));
    b.quit().await;

    // Views, visitors and scores: untouched by impressions and clicks.
    assert_eq!(view_state(&s, &["a1", "a2", "a3"]).await, before);
    // Beacons from a foreign origin are no CORS refusal (their sender
    // never reads the answer): nothing counted, nothing logged.
    let metrics = s.text("/metrics").await;
    assert!(
        metrics.contains("hotrank_cors_refused_total 0\n"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("cors"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // (At least this test's click: other tests of this binary count too.)
    let clicks = metrics
        .lines()
        .find_map(|l| l.strip_prefix("hotrank_widget_events_total{type=\"click\"} "))
        .and_then(|v| v.parse::<f64>().ok());
    assert!(clicks.is_some_and(|c| c >= 1.0), "{clicks:?}");
    // Ingest keeps its own rule for what pages read: no cors_origins, no
    // CORS, and a JSON post from a foreign page is a refusal. (Here, not
    // in a test of its own: the metrics are the process's.)
    let r = s
        .client
        .post(s.url("/api/events"))
        .header("origin", "https://some-site.example")
        .json(&json!({"events": []}))
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    assert!(
        s.text("/metrics")
            .await
            .contains("hotrank_cors_refused_total 1\n")
    );
}

#[tokio::test]
async fn embed_is_a_strict_page_with_escaped_text() {
    let s = server_with(|_| {}).await;
    articles(
        &s,
        &[
            (
                "e1",
                "<script>alert('x')</script> & co",
                "https://news.example/e1?a=1&b=\"2\"",
                4,
            ),
            ("e2", "Plain", "javascript:alert(1)", 2),
        ],
    )
    .await;
    let r = s
        .client
        .get(s.url("/embed?model=gravity&range=24h&limit=5&title=Hot%20%3Cnow%3E"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let h = r.headers().clone();
    let csp = h["content-security-policy"].to_str().unwrap().to_string();
    for must in ["default-src 'none'", "style-src 'self'", "base-uri 'none'"] {
        assert!(csp.contains(must), "{csp}");
    }
    assert!(
        !csp.contains("unsafe") && !csp.contains("script-src"),
        "{csp}"
    );
    assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
    let etag = h["etag"].to_str().unwrap().to_string();
    let body = r.text().await.unwrap();
    assert!(!body.contains("<script"), "{body}");
    assert!(
        body.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co"),
        "{body}"
    );
    assert!(body.contains("<title>Hot &lt;now&gt;</title>"), "{body}");
    assert!(
        body.contains("href=\"https://news.example/e1?a=1&amp;b=&quot;2&quot;\""),
        "{body}"
    );
    assert!(!body.contains("javascript:"), "{body}");
    assert!(body.contains("<span>Plain</span>"), "{body}");
    let again = s
        .client
        .get(s.url("/embed?model=gravity&range=24h&limit=5&title=Hot%20%3Cnow%3E"))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    let bad = s.client.get(s.url("/embed?nope=1")).send().await.unwrap();
    common::expect_error(bad, StatusCode::BAD_REQUEST, "invalid_parameter").await;
}

#[tokio::test]
async fn widget_js_is_cacheable_and_public_reads_are_open_to_any_origin() {
    let s = server_with(|_| {}).await;
    let r = s.client.get(s.url("/widget.js")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let h = r.headers().clone();
    assert!(
        h["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(
        h["cache-control"]
            .to_str()
            .unwrap()
            .starts_with("public, max-age=")
    );
    assert_eq!(h["access-control-allow-origin"], "*");
    let etag = h["etag"].to_str().unwrap().to_string();
    let js = r.text().await.unwrap();
    assert!(js.contains("adoptedStyleSheets") && !js.contains("__CSS__"));
    println!("widget.js: {} bytes", js.len());
    let again = s
        .client
        .get(s.url("/widget.js"))
        .header("if-none-match", format!("W/{etag}"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);
    for path in [
        "/api/hot?limit=1",
        "/api/new?limit=1",
        "/feeds/hot.rss",
        "/feeds/hot.json",
        "/api/hot?model=nope",
    ] {
        let r = s
            .client
            .get(s.url(path))
            .header("origin", "https://some-site.example")
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["access-control-allow-origin"], "*", "{path}");
    }
    // The stream: the header comes with the answer's head.
    let r = s
        .client
        .get(s.url("/api/stream?top=1"))
        .header("origin", "https://some-site.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
    drop(r);
}

async fn post_events(s: &TestServer, events: Value) -> Value {
    // As the widget sends them: a beacon, text/plain.
    let r = s
        .client
        .post(s.url("/api/events"))
        .header("content-type", "text/plain;charset=UTF-8")
        .body(json!({ "events": events }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    r.json().await.unwrap()
}

#[tokio::test]
async fn a_flood_of_clicks_is_capped_by_the_budget_and_bad_events_change_nothing() {
    let s = server_with(|c| c.limits.widget_events_per_minute_per_ip = 50).await;
    articles(&s, &[("f1", "F", "https://x.example/f1", 2)]).await;
    let before = view_state(&s, &["f1"]).await;
    let click = json!({"type": "click", "list": "gravity:24h", "position": 2, "articleId": "f1"});
    let mut rate_limited = 0;
    for _ in 0..10 {
        let r = post_events(&s, json!(vec![click.clone(); 20])).await;
        rate_limited += r["verdicts"]["rate_limited"].as_u64().unwrap();
        assert_eq!(r["errors"], json!([]), "{r}");
    }
    let m = model_row(&s, "gravity").await;
    assert_eq!(m["clicks"], 50, "counted no more than the budget: {m}");
    assert_eq!(rate_limited, 150);
    // Bad widget events: each refused in `errors`, none counted.
    let r = post_events(
        &s,
        json!([
            {"type": "click", "list": "gravity:24h", "position": 0},
            {"type": "click", "list": "gravity:24h", "position": 101},
            {"type": "click", "list": "gravity:24h", "position": "1"},
            {"type": "impression", "list": "gravity:24h", "position": 1.5},
            {"type": "click", "list": "gravity {24h}", "position": 1},
            {"type": "click", "list": "nomodel:24h", "position": 1},
            {"type": "click", "list": format!("gravity:{}", "x".repeat(64)), "position": 1},
            {"type": "impression", "position": 1},
            {"type": "view", "articleId": "f1", "visitorId": "z"},
        ]),
    )
    .await;
    let codes: Vec<&str> = r["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "invalid_position",
            "invalid_position",
            "invalid_position",
            "invalid_position",
            "invalid_list",
            "invalid_list",
            "invalid_list",
            "invalid_list"
        ],
        "{r}"
    );
    assert_eq!(r["accepted"], 1, "the view alone: {r}");
    assert_eq!(model_row(&s, "gravity").await["clicks"], 50);
    // `hotrank ctr` asks a running server.
    let base = s.base.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_hotrank"))
            .args(["ctr", "--url", &base, "--model", "gravity"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && table.contains("gravity               0      50"),
        "{table} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Widget events never touch views: only the one real view did.
    let after = view_state(&s, &["f1"]).await;
    assert_eq!(after["f1"][0], before["f1"][0].as_u64().unwrap() + 1);
    // A bot's widget events count nothing.
    let r = s
        .client
        .post(s.url("/api/events"))
        .header(
            "user-agent",
            "Googlebot/2.1 (+http://www.google.com/bot.html)",
        )
        .json(&json!({"events": [{"type": "impression", "list": "votes:all", "position": 1}]}))
        .send()
        .await
        .unwrap();
    let r: Value = r.json().await.unwrap();
    assert_eq!(r["verdicts"]["bot"], 1, "{r}");
    assert_eq!(s.get("/api/ctr?model=votes").await.1["models"], json!([]));
}

#[tokio::test]
async fn counts_survive_a_restart_in_the_data_dir() {
    let s = server_with(|_| {}).await;
    let evs: Vec<Value> = (1..=3)
        .map(|p| json!({"type": "impression", "list": "weighted:7d", "position": p}))
        .chain([json!({"type": "click", "list": "weighted:7d", "position": 3})])
        .collect();
    let r = post_events(&s, json!(evs)).await;
    assert_eq!(r["accepted"], 4, "{r}");
    let dir = s.stop().await;
    assert!(dir.path().join("ctr.json").exists());
    // The terminal reads the same file: `hotrank ctr` and `hotrank replay`.
    let run = |args: &[&std::ffi::OsStr]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hotrank"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let d = dir.path().as_os_str();
    let table = run(&["ctr".as_ref(), "--data-dir".as_ref(), d]);
    assert!(
        table.contains("weighted              3       1  33.33%") && table.contains("weighted:7d"),
        "{table}"
    );
    let replay = run(&[
        "replay".as_ref(),
        "--data-dir".as_ref(),
        d,
        "--a".as_ref(),
        "model=weighted".as_ref(),
    ]);
    assert!(
        replay.contains("click-through of the widget's lists") && replay.contains("weighted:7d"),
        "{replay}"
    );
    let config = common::test_config(dir.path());
    let s = TestServer::start_in(dir, config, T0).await;
    let m = model_row(&s, "weighted").await;
    assert_eq!(
        (m["impressions"].clone(), m["clicks"].clone()),
        (json!(3), json!(1)),
        "{m}"
    );
    assert_eq!(m["positions"][2]["ctr"], 1.0, "{m}");
}

#[tokio::test]
async fn redis_sites_count_in_hash_tagged_keys_shared_by_nodes() {
    let redis = common::redis::RedisServer::start();
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let site = |c: &mut hotrank::config::Config| {
        c.redis.prefix = "site1:".into();
        c.ctr.max_lists = 2;
    };
    let a = TestServer::start_redis(dir.clone(), &redis.url(), site).await;
    let b = TestServer::start_redis(dir, &redis.url(), site).await;
    a.until_ready(10, "redis").await;
    let r = post_events(
        &a,
        json!([
            {"type": "impression", "list": "gravity:24h", "position": 1},
            {"type": "impression", "list": "gravity:24h", "position": 2},
            {"type": "click", "list": "gravity:24h", "position": 2},
        ]),
    )
    .await;
    assert_eq!(r["accepted"], 3, "{r}");
    let r = post_events(
        &b,
        json!([
            {"type": "impression", "list": "gravity:24h", "position": 1},
            {"type": "impression", "list": "hn:all", "position": 1},
            {"type": "impression", "list": "lemmy:all", "position": 1},
        ]),
    )
    .await;
    assert_eq!(r["accepted"], 2, "{r}");
    assert_eq!(r["errors"][0]["code"], "too_many_lists", "{r}");
    // Either node reads what both counted.
    let m = model_row(&a, "gravity").await;
    assert_eq!(
        (m["impressions"].clone(), m["clicks"].clone()),
        (json!(3), json!(1)),
        "{m}"
    );
    let mut con = redis.connection();
    let lists: Vec<String> = redis::cmd("SMEMBERS")
        .arg("site1:ctr:lists")
        .query(&mut con)
        .unwrap();
    assert_eq!(lists.len(), 2, "{lists:?}");
    let fields: std::collections::HashMap<String, u64> = redis::cmd("HGETALL")
        .arg("site1:ctr:list:gravity:24h")
        .query(&mut con)
        .unwrap();
    assert_eq!(fields["i1"], 2);
    assert_eq!(fields["c2"], 1);
    // Every key is one docs/redis-keys.md documents, of its type.
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("site1:ctr:*")
        .query(&mut con)
        .unwrap();
    assert_eq!(keys.len(), 3, "{keys:?}");
    for k in keys {
        let spec = hotrank::store::redis::key_spec_of(k.strip_prefix("site1:").unwrap())
            .unwrap_or_else(|| panic!("{k} is not in KEY_TABLE"));
        let kind: String = redis::cmd("TYPE").arg(&k).query(&mut con).unwrap();
        assert_eq!(kind, spec.kind, "{k}");
    }
}
