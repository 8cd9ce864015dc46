//! The page tracker and the dashboard in a real browser: Debian's
//! `chromium`, driven by `chromedriver` over the WebDriver protocol (plain
//! JSON over HTTP, spoken with reqwest). The hotrank server runs in this
//! process (TestServer); the test pages that include the tracker are served
//! from a second loopback port, so every event is a cross-origin request
//! and goes through CORS.
//!
//! Without chromium/chromedriver the tests are skipped with a message,
//! unless the environment variable `CI` is set: then they fail.

mod common;
mod webdriver;

use std::path::Path;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Query, State};
use axum::response::Html;
use axum::routing::get;
use serde_json::{Value, json};

use common::TestServer;
use webdriver::{Browser, SERIAL, tools};

/// The "site": pages on another origin that include the tracker.
#[derive(serde::Deserialize)]
struct PageQuery {
    article: String,
    #[serde(default = "default_interval")]
    interval: String,
    #[serde(default)]
    extra: String,
}

fn default_interval() -> String {
    "1".into()
}

async fn page(State(hotrank): State<String>, Query(q): Query<PageQuery>) -> Html<String> {
    let ok = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    assert!(ok(&q.article) && ok(&q.interval) && ok(&q.extra));
    // `extra=gpc`: the browser signals Global Privacy Control and the site
    // asks the tracker to respect it.
    let (pre, attrs) = if q.extra == "gpc" {
        (
            "<script>Object.defineProperty(navigator, 'globalPrivacyControl', {value: true});</script>",
            " data-respect-dnt",
        )
    } else {
        ("", "")
    };
    Html(format!(
        "<!doctype html><html><head><title>article {a}</title>{pre}\
         <script src=\"{hotrank}/tracker.js\" data-article-id=\"{a}\" \
         data-dwell-interval=\"{i}\"{attrs} defer></script></head>\
         <body><h1>article {a}</h1></body></html>",
        a = q.article,
        i = q.interval,
    ))
}

/// Starts the site on its own port; returns its origin.
async fn start_site(listener: tokio::net::TcpListener, hotrank: String) {
    let app = Router::new().route("/page", get(page)).with_state(hotrank);
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("site");
    });
}

/// A hotrank server whose CORS list allows the site, and the site.
async fn setup() -> (TestServer, String) {
    let site_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind site");
    let site = format!("http://{}", site_listener.local_addr().expect("addr"));
    let origin = site.clone();
    let server = TestServer::start_with(move |c| {
        c.cors_origins = vec![origin];
        // The server's clock is a ManualClock that stands still, so every
        // event of a test falls in the same minute: per-minute limits are
        // not what these tests are about.
        c.gate.visitor_limit_per_minute = 0;
        c.gate.ip_limit_per_minute = 0;
    })
    .await;
    start_site(site_listener, server.base.clone()).await;
    (server, site)
}

async fn article(server: &TestServer, id: &str) -> Option<Value> {
    let (status, body) = server.get(&format!("/api/articles/{id}")).await;
    status.is_success().then_some(body)
}

/// Polls the server until `pred` holds for the article (or times out).
async fn wait_article(
    server: &TestServer,
    id: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(a) = article(server, id).await
            && pred(&a)
        {
            return a;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {:?}",
            article(server, id).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_load_counts_one_view_and_reload_none_more() {
    let Some((chromium, driver)) = tools() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let (server, site) = setup().await;
    let browser = Browser::start(&chromium, &driver).await;

    browser
        .goto(&format!("{site}/page?article=load-1&interval=60"))
        .await;
    let a = wait_article(&server, "load-1", "the first view", |a| a["pv"] == 1).await;
    assert_eq!(a["uv"], 1);

    // Reload inside the dedupe window: the view arrives and is a duplicate.
    browser.cmd("POST", "refresh", json!({})).await;
    let a = wait_article(&server, "load-1", "the reload's view", |a| {
        a["quarantined"]["duplicate"] == 1
    })
    .await;
    assert_eq!(a["pv"], 1, "{a}");

    // With data-dwell-interval=60 nothing is reported while reading; the
    // final report goes out by sendBeacon on pagehide.
    // (The first load's own pagehide may have reported its fraction of a
    // second, rounded.)
    let reload_at = Instant::now();
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let a = article(&server, "load-1").await.expect("article");
    let reports = a["dwellReports"].as_u64().expect("dwellReports");
    let before = a["dwellSeconds"].as_u64().expect("dwellSeconds");
    assert!(reports <= 1, "no periodic report with a 60 s interval: {a}");
    browser.goto("about:blank").await;
    let visible = reload_at.elapsed().as_secs_f64();
    let a = wait_article(&server, "load-1", "the pagehide beacon", |a| {
        a["dwellReports"] == reports + 1
    })
    .await;
    let dwell = a["dwellSeconds"].as_u64().expect("dwellSeconds") - before;
    assert!(
        visible < 4.0,
        "the machine is too slow for this check: {visible:.1} s"
    );
    assert!(
        (2..=4).contains(&dwell),
        "dwell {dwell} s after ~2.2 s: {a}"
    );

    // Opt-out: with data-respect-dnt and Global Privacy Control on, the
    // tracker sends nothing at all.
    browser
        .goto(&format!("{site}/page?article=optout-1&extra=gpc"))
        .await;
    let opted = browser
        .wait_js(
            "return window.hotrank && window.hotrank.optedOut",
            "the tracker",
        )
        .await;
    assert_eq!(opted, true);
    browser.js("hotrank.track('like')").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    browser.goto("about:blank").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        article(&server, "optout-1").await.is_none(),
        "an opted-out page sent events"
    );
    let (_, stats) = server.get("/api/stats").await;
    assert_eq!(stats["articles"], 1, "{stats}");
    browser.quit().await;
    eprintln!("page load/reload/beacon/opt-out: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dwell_counts_visible_time_only() {
    let Some((chromium, driver)) = tools() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let (server, site) = setup().await;
    let browser = Browser::start(&chromium, &driver).await;
    let page_tab = browser.window().await;

    // Visible for N seconds with one report per second (the throttle)...
    let before_load = Instant::now();
    browser
        .goto(&format!("{site}/page?article=dwell-1&interval=1"))
        .await;
    let loaded = Instant::now();
    wait_article(&server, "dwell-1", "the view", |a| a["pv"] == 1).await;
    tokio::time::sleep(Duration::from_millis(3000).saturating_sub(loaded.elapsed())).await;
    let visible_min = loaded.elapsed().as_secs_f64();
    // ...then hidden: a new tab in front puts the page in the background,
    // which is what the Page Visibility API reports.
    browser.new_tab().await;
    let visible_max = before_load.elapsed().as_secs_f64();
    // Tolerance: one throttle period (1 s) either way.
    let lo = (visible_min - 1.0).floor() as u64;
    let hi = (visible_max + 1.0).ceil() as u64;
    let a = wait_article(&server, "dwell-1", "the report sent when hidden", |a| {
        a["dwellSeconds"].as_u64().unwrap_or(0) >= lo
    })
    .await;
    let at_hide = a["dwellSeconds"].as_u64().expect("dwellSeconds");
    assert!(
        at_hide <= hi,
        "{at_hide} s reported after {visible_max:.1} s visible: {a}"
    );

    // Hidden for M = 4 seconds: nothing more is counted.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let a = article(&server, "dwell-1").await.expect("article");
    let after_hidden = a["dwellSeconds"].as_u64().expect("dwellSeconds");
    // A report sent at the moment of hiding may land a little later on a
    // loaded machine, so compare with the visible time, not the last read:
    // counting the 4 hidden seconds would overshoot `hi` by far.
    assert!(
        (at_hide..=hi).contains(&after_hidden),
        "dwell grew while hidden: {after_hidden} s after {visible_max:.1} s visible: {a}"
    );

    // Back to the page and away from it at once: the final beacon adds at
    // most the rounding of the last second, never the hidden time.
    browser.switch(&page_tab).await;
    browser.goto("about:blank").await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let a = article(&server, "dwell-1").await.expect("article");
    let total = a["dwellSeconds"].as_u64().expect("dwellSeconds");
    assert!(
        (lo..=hi).contains(&total),
        "total dwell {total} s, visible {visible_min:.1}-{visible_max:.1} s, hidden 4 s: {a}"
    );
    assert!(
        a["dwellReports"].as_u64().unwrap() >= 2,
        "throttled reports: {a}"
    );
    assert_eq!(a["quarantined"]["replayed"], 0, "{a}");
    browser.quit().await;
    eprintln!(
        "dwell: {total} s reported for {visible_min:.1}-{visible_max:.1} s visible + 4 s hidden \
         in {} reports ({:?})",
        a["dwellReports"],
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_page_navigation_counts_new_views() {
    let Some((chromium, driver)) = tools() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let (server, site) = setup().await;
    let browser = Browser::start(&chromium, &driver).await;

    browser
        .goto(&format!("{site}/page?article=spa-1&interval=60"))
        .await;
    wait_article(&server, "spa-1", "the first view", |a| a["pv"] == 1).await;

    // A site that updates the script's data-article-id, then pushState.
    browser
        .js("document.querySelector('script[data-article-id]').setAttribute('data-article-id', 'spa-2');\
             history.pushState({}, '', '/page?article=spa-2');")
        .await;
    wait_article(&server, "spa-2", "the pushState view", |a| a["pv"] == 1).await;

    // A site that calls hotrank.setArticle right after pushState: one view.
    browser
        .js("history.pushState({}, '', '/page?article=spa-3'); hotrank.setArticle('spa-3');")
        .await;
    wait_article(&server, "spa-3", "the setArticle view", |a| a["pv"] == 1).await;

    // replaceState is not a navigation; a like goes to the current article.
    browser
        .js("history.replaceState({}, '', '/page?article=spa-3&x=1'); hotrank.track('like');")
        .await;
    wait_article(&server, "spa-3", "the like", |a| a["likes"] == 1).await;

    // Back (popstate) to spa-2: a new view, a duplicate inside the window.
    browser
        .js(
            "window.addEventListener('popstate', () => hotrank.setArticle('spa-2'));\
             history.back();",
        )
        .await;
    wait_article(&server, "spa-2", "the popstate view", |a| {
        a["quarantined"]["duplicate"] == 1
    })
    .await;

    tokio::time::sleep(Duration::from_millis(300)).await;
    for (id, pv, dup) in [("spa-1", 1, 0), ("spa-2", 1, 1), ("spa-3", 1, 0)] {
        let a = article(&server, id).await.expect("article");
        assert_eq!(a["pv"], pv, "{id}: {a}");
        assert_eq!(a["quarantined"]["duplicate"], dup, "{id}: {a}");
    }
    assert_eq!(
        article(&server, "spa-3").await.unwrap()["quarantined"]["duplicate"],
        0,
        "replaceState counted a view"
    );
    browser.quit().await;
    eprintln!("single-page navigation: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_shows_the_hot_list() {
    let Some((chromium, driver)) = tools() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let (server, _site) = setup().await;
    let ts = common::T0 - 3 * 3600;
    for (i, title) in [
        "Redis 6 hot articles",
        "Counting views at Reddit",
        "<img src=x onerror=alert(1)> escaping",
        "Voting with Redis in Action",
    ]
    .iter()
    .enumerate()
    {
        let (status, body) = server
            .admin_put(
                &format!("/api/articles/d{i}"),
                &json!({"title": title, "author": format!("author{i}"), "category": "db", "publishedAt": ts}),
            )
            .await;
        assert!(status.is_success(), "{body}");
        for v in 0..(i * 3 + 1) {
            server.view(&format!("d{i}"), &format!("reader{v}")).await;
        }
    }
    server.view("d0", "reader0").await; // a duplicate, for the quarantine view

    let browser = Browser::start(&chromium, &driver).await;
    let query = "range=24h&model=gravity&limit=10";
    browser
        .goto(&format!("{}/#/hot?{query}", server.base))
        .await;
    let expected = |body: &Value| -> Vec<String> {
        body["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|it| it["articleId"].as_str().unwrap().to_string())
            .collect()
    };
    let ids_js = "return [...document.querySelectorAll('#hot-items tr[data-article-id]')]\
                  .map(tr => tr.dataset.articleId)";
    let (_, hot) = server.get(&format!("/api/hot?{query}")).await;
    let want = expected(&hot);
    assert_eq!(want.len(), 4);
    let shown = browser
        .wait_js(
            &format!("const ids = (() => {{ {ids_js} }})(); return ids.length === 4 && ids"),
            "the hot list",
        )
        .await;
    assert_eq!(
        shown,
        json!(want),
        "the dashboard's order is GET /api/hot's"
    );
    // Titles are text, never markup.
    let injected = browser
        .js("return document.querySelectorAll('#hot-items img').length")
        .await;
    assert_eq!(injected, 0);
    let title = browser
        .js("return document.querySelector('#hot-items tr[data-article-id=d2] a').textContent")
        .await;
    assert_eq!(title, "<img src=x onerror=alert(1)> escaping");

    // The list refreshes by itself, without reloading the page.
    browser.js("window.sameDocument = true").await;
    for v in 0..30 {
        server.view("d0", &format!("late{v}")).await;
    }
    let (_, hot) = server.get(&format!("/api/hot?{query}")).await;
    let want = expected(&hot);
    assert_eq!(want[0], "d0");
    browser
        .wait_js(
            &format!("const ids = (() => {{ {ids_js} }})(); return ids[0] === 'd0'"),
            "the refreshed list",
        )
        .await;
    assert_eq!(browser.js(ids_js).await, json!(want));
    assert_eq!(browser.js("return window.sameDocument").await, true);

    // A score's explanation, on demand.
    browser
        .js("document.querySelector('#hot-items tr[data-article-id=d0] button.why').click()")
        .await;
    let explain = browser
        .wait_js(
            "const r = document.querySelector('#hot-items tr.explain'); return r && r.textContent",
            "the explanation",
        )
        .await;
    assert!(explain.as_str().unwrap().contains("decay"), "{explain}");
    let shot = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots/dashboard.png");
    browser.screenshot(&shot).await;
    println!("dashboard screenshot: {}", shot.display());
    eprintln!("dashboard screenshot: {}", shot.display());

    // Readable on a phone: nothing wider than the screen.
    browser.resize(375, 844).await;
    browser.assert_fits_width().await;
    browser.resize(1100, 800).await;

    // One article: the hourly chart, signals and quarantine by reason.
    browser.goto(&format!("{}/#/article/d0", server.base)).await;
    browser
        .wait_js(
            "return document.querySelectorAll('#a-chart svg rect.pv').length === 1",
            "the article's chart",
        )
        .await;
    let signals = browser
        .js("return document.getElementById('a-signals').textContent")
        .await;
    assert!(signals.as_str().unwrap().contains("PV31"), "{signals}");
    let quarantine = browser
        .js("return document.getElementById('a-quarantine').textContent")
        .await;
    assert!(
        quarantine.as_str().unwrap().contains("duplicate1"),
        "{quarantine}"
    );
    browser
        .screenshot(&shot.with_file_name("article.png"))
        .await;

    // The quarantine view.
    browser.goto(&format!("{}/#/quarantine", server.base)).await;
    browser
        .wait_js(
            "return document.querySelectorAll('#q-chart svg rect.duplicate').length === 1",
            "the quarantine chart",
        )
        .await;
    let status = browser
        .js("return document.getElementById('status').className")
        .await;
    assert_ne!(status, "error");
    browser
        .screenshot(&shot.with_file_name("quarantine.png"))
        .await;
    browser.quit().await;
    eprintln!("dashboard: {:?}", started.elapsed());
}

/// A view with a user agent of our choosing (bots, for the quarantine).
async fn view_as(server: &TestServer, article: &str, visitor: &str, ua: &str) {
    let r = server
        .client
        .post(server.url("/api/views"))
        .header("user-agent", ua)
        .json(&json!({"articleId": article, "visitorId": visitor}))
        .send()
        .await
        .expect("POST /api/views");
    assert_eq!(r.status(), 202);
}

/// A day of traffic on a small site: some stories peak and fade, some
/// rise, one is steady; a few duplicates and a crawler are held back.
/// The clock ends at `T0 + 24h` (movement compares with the ranking at
/// the hour mark at or before an hour ago, from the buckets).
/// (id, title, category, readers in hour h of the day).
type Story = (&'static str, &'static str, &'static str, fn(i64) -> i64);

async fn a_day_of_traffic(server: &TestServer) {
    let stories: &[Story] = &[
        ("s1", "Postgres 18 ships async I/O", "db", |h| {
            30 - (h - 4).abs().min(30)
        }),
        ("s2", "Why our Redis bill halved", "db", |h| {
            (h - 12).max(0) * 3
        }),
        ("s3", "A field guide to HyperLogLog", "algorithms", |_| 6),
        ("s4", "Rust 1.90 release notes, annotated", "rust", |h| {
            24 - (h - 14).abs().min(24)
        }),
        ("s5", "Counting views the Reddit way", "algorithms", |h| {
            (h - 17).max(0) * 5
        }),
        (
            "s6",
            "Ten years of hacker news ranking",
            "algorithms",
            |h| 12 - (h - 8).abs().min(12),
        ),
        ("s7", "Tokio task budgets explained", "rust", |h| {
            if h % 6 == 0 { 10 } else { 2 }
        }),
        ("s8", "Write-ahead logs from scratch", "db", |h| {
            (h / 3).min(8)
        }),
    ];
    let start = common::T0;
    for (id, title, cat, _) in stories {
        let (status, body) = server
            .admin_put(
                &format!("/api/articles/{id}"),
                &json!({"title": title, "category": cat, "author": "staff", "publishedAt": start - 3600}),
            )
            .await;
        assert!(status.is_success(), "{body}");
    }
    for hour in 0..24 {
        for (id, _, _, shape) in stories {
            for v in 0..shape(hour).max(0) {
                server.view(id, &format!("r{hour}-{v}")).await;
            }
        }
        if hour % 5 == 2 {
            server.view("s1", &format!("r{hour}-0")).await; // duplicate
            view_as(
                server,
                "s3",
                "crawler",
                "Googlebot/2.1 (+http://www.google.com/bot.html)",
            )
            .await;
        }
        server.clock.advance(3600);
    }
    // The current hour, half way through.
    for (id, _, _, shape) in stories {
        for v in 0..shape(24).max(0) / 2 {
            server.view(id, &format!("r24-{v}")).await;
        }
    }
    // An old story found again: it climbs.
    for v in 0..110 {
        server.view("s8", &format!("again{v}")).await;
    }
    // A story published in the last hour and read at once: "new".
    let (status, body) = server
        .admin_put(
            "/api/articles/s9",
            &json!({"title": "Breaking: the cache is a database now", "category": "db", "publishedAt": start + 23 * 3600}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    for v in 0..40 {
        server.view("s9", &format!("b{v}")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overview_and_compare() {
    let Some((chromium, driver)) = tools() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let (server, _site) = setup().await;
    a_day_of_traffic(&server).await;
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");

    let browser = Browser::start(&chromium, &driver).await;
    browser.resize(1100, 1250).await;
    let query = "range=24h&model=gravity&limit=8";
    browser.goto(&format!("{}/#/?{query}", server.base)).await;
    let ids_js = "return [...document.querySelectorAll('#o-items tr[data-article-id]')]\
                  .map(tr => tr.dataset.articleId)";
    browser
        .wait_js(
            &format!("const ids = (() => {{ {ids_js} }})(); return ids.length === 8"),
            "the overview's hot list",
        )
        .await;
    let (_, o) = server.get(&format!("/api/overview?{query}")).await;
    let want: Vec<&str> = o["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|it| it["articleId"].as_str().unwrap())
        .collect();
    assert_eq!(browser.js(ids_js).await, json!(want), "the API's order");
    // Totals as the API gives them.
    let shown = browser
        .js("return ['o-pv', 'o-counted', 'o-quarantined'].map(id => document.getElementById(id).textContent)")
        .await;
    let num = |v: &Value| hotrank::cli::top::fmt_count(v.as_u64().unwrap());
    assert_eq!(
        shown,
        json!([
            num(&o["totals"]["pv"]),
            num(&o["totals"]["counted"]),
            num(&o["totals"]["quarantinedTotal"])
        ])
    );
    let reasons = browser
        .js("return document.getElementById('o-reasons').textContent")
        .await;
    assert!(reasons.as_str().unwrap().contains("bot"), "{reasons}");
    // The chart: one bar per hour with traffic, held-back events on top.
    let bars = browser
        .js("return [document.querySelectorAll('#o-chart rect.pv').length, document.querySelectorAll('#o-chart rect.quarantined').length]")
        .await;
    let with_pv = o["series"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["pv"].as_u64().unwrap() > 0)
        .count();
    assert_eq!(bars[0], with_pv);
    assert!(bars[1].as_u64().unwrap() >= 4, "{bars}");
    // A trend line per row, and movement since an hour ago.
    let sparks = browser
        .js("return document.querySelectorAll('#o-items svg.spark polyline').length")
        .await;
    assert_eq!(sparks, 8);
    let moves = browser
        .js("return Object.fromEntries([...document.querySelectorAll('#o-items tr')].map(tr => [tr.dataset.articleId, tr.querySelector('.mv') && tr.querySelector('.mv').className]))")
        .await;
    assert_eq!(moves["s9"], "mv new", "{moves}");
    for it in o["items"].as_array().unwrap() {
        let id = it["articleId"].as_str().unwrap();
        assert_eq!(
            moves[id],
            format!("mv {}", it["movement"].as_str().unwrap()),
            "{id}"
        );
    }
    for m in ["mv down", "mv up"] {
        assert!(
            moves.as_object().unwrap().values().any(|v| v == m),
            "{m}: {moves}"
        );
    }
    // Why each article ranks, in words on its row: the API's sentence.
    let words = browser
        .js("return Object.fromEntries([...document.querySelectorAll('#o-items tr[data-article-id]')].map(tr => [tr.dataset.articleId, tr.querySelector('.why-words') && tr.querySelector('.why-words').textContent]))")
        .await;
    for it in o["items"].as_array().unwrap() {
        let id = it["articleId"].as_str().unwrap();
        let why = it["why"]
            .as_str()
            .unwrap_or_else(|| panic!("{id}: no why in {it}"));
        assert!(
            why.contains(" views from ") && why.contains("for age"),
            "{why}"
        );
        assert_eq!(words[id], why, "{id}");
    }
    // Why the new story leads: its score's terms, on demand.
    browser
        .js("document.querySelector('#o-items tr[data-article-id=s9] button.why').click()")
        .await;
    let explain = browser
        .wait_js(
            "const r = document.querySelector('#o-items tr.explain'); return r && r.textContent",
            "the explanation",
        )
        .await;
    assert!(explain.as_str().unwrap().contains("decay"), "{explain}");
    // Accessible: every control labelled, every chart and move described,
    // text readable against its background (WCAG AA, 4.5:1).
    let unlabelled = browser
        .js("return [...document.querySelectorAll('form input, form select')].filter(e => !e.labels || !e.labels.length).map(e => e.name)")
        .await;
    assert_eq!(unlabelled, json!([]));
    let undescribed = browser
        .js("return document.querySelectorAll('#view-overview svg:not([aria-label]), #o-items .mv:not([aria-label])').length")
        .await;
    assert_eq!(undescribed, 0);
    browser.assert_contrast("#view-overview td, #view-overview th, #view-overview .label, #view-overview .mv, #view-overview .why-words, #view-overview figcaption, nav a, #status").await;
    browser.screenshot(&shots.join("overview.png")).await;
    println!(
        "overview screenshot: {}",
        shots.join("overview.png").display()
    );

    // Keyboard: a control changed from the keyboard re-renders the view.
    let el = browser.element("#o-form select[name=range]").await;
    browser
        .cmd("POST", &format!("element/{el}/value"), json!({"text": "7"}))
        .await;
    browser
        .wait_js(
            "return location.hash.includes('range=7') && document.getElementById('status').textContent.includes('· 7')",
            "the overview for another range",
        )
        .await;

    // Readable on a phone.
    browser.resize(375, 1500).await;
    browser.goto(&format!("{}/#/?{query}", server.base)).await;
    browser
        .wait_js(
            "return document.querySelectorAll('#o-items svg.spark').length === 8",
            "the overview on a phone",
        )
        .await;
    browser.assert_fits_width().await;
    // The score column is hidden on a phone; why is still on every row.
    let visible_words = browser
        .js("return [...document.querySelectorAll('#o-items .why-words')].filter(e => e.getBoundingClientRect().width > 0).length")
        .await;
    assert_eq!(visible_words, 8);
    browser.js("document.activeElement.blur()").await;
    browser.screenshot(&shots.join("overview-phone.png")).await;

    // Compare: two models side by side, with overlap and Kendall's tau.
    browser.resize(1100, 800).await;
    let cq = "a=gravity&b=window&range=24h&limit=8";
    browser
        .goto(&format!("{}/#/compare?{cq}", server.base))
        .await;
    browser
        .wait_js(
            "return document.querySelectorAll('#c-a tr').length === 8 && document.querySelectorAll('#c-b tr').length === 8",
            "both sides of the comparison",
        )
        .await;
    let (_, c) = server.get(&format!("/api/compare?{cq}")).await;
    let side = |s: &str| -> Vec<String> {
        c[s]["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|it| it["articleId"].as_str().unwrap().to_string())
            .collect()
    };
    for (s, tbody) in [("a", "c-a"), ("b", "c-b")] {
        let shown = browser
            .js(&format!(
                "return [...document.querySelectorAll('#{tbody} tr')].map(tr => tr.dataset.articleId)"
            ))
            .await;
        assert_eq!(shown, json!(side(s)));
    }
    let summary = browser
        .js("return [document.getElementById('c-overlap').textContent, document.getElementById('c-tau').textContent]")
        .await;
    assert!(
        summary[0]
            .as_str()
            .unwrap()
            .starts_with(&format!("{} / 8", c["common"])),
        "{summary}"
    );
    match c["kendallTau"].as_f64() {
        Some(t) => assert_eq!(summary[1], format!("{t:.2}")),
        None => assert_eq!(summary[1], "–"),
    }
    let only = browser
        .js("return document.querySelectorAll('#c-a tr.only').length")
        .await;
    let common = c["common"].as_u64().unwrap();
    assert_eq!(only, 8 - common);
    browser
        .assert_contrast("#view-compare td, #view-compare th, #view-compare .label, nav a")
        .await;
    browser.screenshot(&shots.join("compare.png")).await;
    browser.quit().await;
    eprintln!("overview and compare: {:?}", started.elapsed());
}
