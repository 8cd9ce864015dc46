//! The dashboard's site-wide figures in headless Chromium (issue 32): the
//! quarantine page's articles and crawler families for the chosen range,
//! the overview's realtime panel and site-wide visitors, and the server's
//! default time zone. Each checked against what the test sent.
//!
//! Without chromium/chromedriver the tests are skipped with a message,
//! unless the environment variable `CI` is set: then they fail.

mod common;
mod webdriver;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use common::{T0, TestServer};
use webdriver::{Browser, SERIAL, tools};

async fn server_with(edit: impl FnOnce(&mut hotrank::config::Config)) -> TestServer {
    TestServer::start_with(|c| {
        // The clock stands still: per-minute limits are not the point here.
        c.gate.visitor_limit_per_minute = 0;
        c.gate.ip_limit_per_minute = 0;
        edit(c);
    })
    .await
}

fn shots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots")
}

async fn publish(server: &TestServer, id: &str) {
    let (s, b) = server
        .admin_put(
            &format!("/api/articles/{id}"),
            &json!({"title": format!("Story {id}"), "publishedAt": T0 - 3600}),
        )
        .await;
    assert!(s.is_success(), "{b}");
}

/// A view with a user agent of its own; returns the verdict.
async fn view_as(server: &TestServer, id: &str, visitor: &str, ua: &str) -> String {
    let r = reqwest::Client::new()
        .post(server.url("/api/views"))
        .header("User-Agent", ua)
        .json(&json!({"articleId": id, "visitorId": visitor}))
        .send()
        .await
        .expect("POST /api/views");
    let body: Value = r.json().await.expect("json");
    body["verdict"].as_str().expect("verdict").to_string()
}

const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
const CURL: &str = "curl/8.5.0";
const GPTBOT: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quarantine_names_the_articles_and_the_crawlers() {
    let Some((chromium, driver)) = tools() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let server = server_with(|_| {}).await;
    for id in ["big", "small", "quiet"] {
        publish(&server, id).await;
    }
    // Sent: big 6 Googlebot + 2 duplicates, small 3 curl + 1 GPTBot,
    // quiet only counted views.
    for v in 0..6 {
        assert_eq!(
            view_as(&server, "big", &format!("g{v}"), GOOGLEBOT).await,
            "bot"
        );
    }
    for v in 0..3 {
        assert_eq!(
            view_as(&server, "small", &format!("c{v}"), CURL).await,
            "bot"
        );
    }
    assert_eq!(view_as(&server, "small", "ai", GPTBOT).await, "bot");
    for v in 0..2 {
        assert_eq!(server.view("big", &format!("r{v}")).await, "counted");
        assert_eq!(server.view("big", &format!("r{v}")).await, "duplicate");
        assert_eq!(server.view("quiet", &format!("r{v}")).await, "counted");
    }
    // Two hours on, out of a one-hour range but in a 24-hour one.
    server.clock.advance(2 * 3600);
    assert_eq!(view_as(&server, "quiet", "late", CURL).await, "bot");

    let browser = Browser::start(&chromium, &driver).await;
    browser.resize(1100, 1100).await;
    browser
        .goto(&format!("{}/#/quarantine?hours=24", server.base))
        .await;
    let rows_js = "return [...document.querySelectorAll('#q-articles tr')].map(tr => [...tr.children].map(td => td.textContent))";
    browser
        .wait_js(
            &format!("const r = (() => {{ {rows_js} }})(); return r.length === 3"),
            "the articles table",
        )
        .await;
    // article, held back, duplicate, rate limited, bot, replayed
    assert_eq!(
        browser.js(rows_js).await,
        json!([
            ["big", "8", "2", "0", "6", "0"],
            ["small", "4", "0", "0", "4", "0"],
            ["quiet", "1", "0", "0", "1", "0"]
        ])
    );
    let fams_js = "return [...document.querySelectorAll('#q-crawlers tr')].map(tr => [...tr.children].slice(0, 2).map(td => td.textContent))";
    assert_eq!(
        browser.js(fams_js).await,
        json!([["google", "6"], ["tool", "4"], ["ai", "1"]])
    );
    browser.screenshot(&shots().join("quarantine.png")).await;
    // The last hour only: the late curl view.
    browser
        .goto(&format!("{}/#/quarantine?hours=1", server.base))
        .await;
    browser
        .wait_js(
            &format!(
                "const r = (() => {{ {rows_js} }})(); return r.length === 1 && r[0][0] === 'quiet'"
            ),
            "the last hour's articles",
        )
        .await;
    assert_eq!(browser.js(fams_js).await, json!([["tool", "1"]]));
    browser.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_shows_the_last_hour_by_minute_and_site_visitors() {
    let Some((chromium, driver)) = tools() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let server = server_with(|_| {}).await;
    // Minute by minute, ending now: 4 readers each read all three articles
    // 10 minutes ago; then 1, 2, 3 views in the last three minutes.
    for id in ["a", "b", "c"] {
        publish(&server, id).await;
    }
    for v in 0..4 {
        for id in ["a", "b", "c"] {
            assert_eq!(server.view(id, &format!("reader{v}")).await, "counted");
        }
    }
    server.clock.advance(480);
    let mut sent = vec![0u64; 60];
    sent[49] = 12;
    for (minute, n) in [(57usize, 1), (58, 2), (59, 3)] {
        for v in 0..n {
            assert_eq!(server.view("a", &format!("m{minute}v{v}")).await, "counted");
        }
        sent[minute] = n as u64;
        if minute < 59 {
            server.clock.advance(60);
        }
    }
    let browser = Browser::start(&chromium, &driver).await;
    browser.resize(1100, 1250).await;
    browser.goto(&format!("{}/#/?range=24h", server.base)).await;
    let minutes = browser
        .wait_js(
            "const c = document.getElementById('o-rt-chart'); return c.dataset.minutes && c.dataset.minutes",
            "the realtime panel",
        )
        .await;
    let want: Vec<String> = sent.iter().map(u64::to_string).collect();
    assert_eq!(minutes, json!(want.join(",")), "views by minute as sent");
    assert_eq!(
        browser
            .js("return [document.getElementById('o-rt-last').textContent, document.getElementById('o-rt-label').textContent, document.querySelectorAll('#o-rt-chart rect.pv').length]")
            .await,
        json!(["6", "views in the last 5 minutes", 60])
    );
    // Site-wide visitors: 4 readers of three articles and 6 others are
    // 10 visitors, not the 18 the articles' own counts add up to.
    let (_, o) = server.get("/api/overview?range=24h").await;
    assert_eq!(o["totals"]["uvSum"], 18, "{o}");
    assert_eq!(o["totals"]["visitors"], 10, "{o}");
    let shown = browser
        .js("return [document.querySelector('#o-uv .uv-est').textContent, document.querySelector('#o-uv').parentElement.querySelector('.label').textContent]")
        .await;
    assert_eq!(shown, json!(["10", "visitors"]));
    browser
        .screenshot(&shots().join("overview-realtime.png"))
        .await;
    browser.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_sets_the_default_time_zone() {
    let Some((chromium, driver)) = tools() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let server = server_with(|c| c.dashboard.time_zone = "Asia/Kolkata".into()).await;
    publish(&server, "a").await;
    assert_eq!(server.view("a", "v").await, "counted");
    let (_, s) = server.get("/api/settings").await;
    assert_eq!(s, json!({"timeZone": "Asia/Kolkata"}));
    let browser = Browser::start(&chromium, &driver).await;
    browser.goto(&format!("{}/#/hot", server.base)).await;
    // T0 is 21:20 UTC: 02:50 the next day in Kolkata (UTC+5:30).
    let status = browser
        .wait_js(
            "const s = document.getElementById('status').textContent; return s.includes('generated') && s",
            "the hot list",
        )
        .await;
    assert!(
        status
            .as_str()
            .unwrap()
            .ends_with("2025-11-22 02:50 Asia/Kolkata"),
        "{status}"
    );
    assert_eq!(
        browser
            .js("const s = document.getElementById('tz'); return [s.value, s.selectedOptions[0].textContent]")
            .await,
        json!(["Asia/Kolkata", "Asia/Kolkata (site default)"])
    );
    // A reader's own choice wins over the site's, and is kept.
    browser
        .js("const s = document.getElementById('tz'); s.value = 'UTC'; s.dispatchEvent(new Event('change'))")
        .await;
    browser
        .goto(&format!("{}/#/hot?limit=5", server.base))
        .await;
    browser
        .wait_js(
            "return document.getElementById('status').textContent.endsWith('2025-11-21 21:20 UTC') && document.getElementById('tz').value === 'UTC'",
            "the reader's zone",
        )
        .await;
    browser.quit().await;
}
