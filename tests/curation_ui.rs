//! The editor's tools over a real server: `hotrank review` (the real
//! binary) and the review page in Chromium (allow and deny by click;
//! screenshot in docs/review.png).
//!
//! Without chromium/chromedriver the browser test is skipped with a
//! message, unless `CI` is set: then it fails.

mod common;
mod webdriver;

use serde_json::json;

use common::curation::{admin, review_mode, seed};
use common::{ADMIN, TestServer, page_ids};

/// `hotrank review`, the real binary against a real server: the queue
/// with its evidence, `--allow` and `--deny`, and a wrong token refused.
#[tokio::test]
async fn cli_review_lists_and_decides() {
    let s = TestServer::start_with(review_mode(true)).await;
    seed(&s).await;
    let (_, p) = s.get("/api/hot?limit=2&category=x").await;
    assert_eq!(page_ids(&p), Vec::<&str>::new(), "all held");
    let run = |extra: &[&str], token: &str| {
        let mut args: Vec<String> = vec!["review".into(), "--url".into(), s.base.clone()];
        args.extend(extra.iter().map(|x| x.to_string()));
        let token = token.to_string();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_hotrank"))
                .args(&args)
                .env("HOTRANK_ADMIN_TOKEN", token)
                .env_remove("HOTRANK_URL")
                .output()
                .expect("run hotrank")
        })
    };
    let out = run(&[], ADMIN).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("review mode: new_entries; 8 article(s)"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.starts_with("a00 "))
        .unwrap_or_else(|| panic!("{text}"));
    for part in [
        "held",
        "2025-11-21 21:20:00",
        "hot gravity 72h category=x",
        "20",
        "Article 0",
    ] {
        assert!(row.contains(part), "{part:?} in {row:?}");
    }
    let out = run(&["--allow", "a02"], ADMIN).await.unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a02: allowed\n");
    let out = run(&["--deny", "a00"], ADMIN).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a00: denied\n");
    let (_, p) = s.get("/api/hot?limit=2&category=x").await;
    assert_eq!(page_ids(&p), ["a02"]);
    let out = run(&["--status", "denied"], ADMIN).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("1 article(s)") && text.contains("a00 "),
        "{text}"
    );
    let out = run(&[], "wrong").await.unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("401 unauthorized"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["--allow", "no such"], ADMIN).await.unwrap();
    assert!(!out.status.success());
}

/// Types the admin token into the review page's form and sends it.
async fn sign_in(b: &webdriver::Browser) {
    let token = b.element("#r-token input[name=token]").await;
    b.cmd(
        "POST",
        &format!("element/{token}/value"),
        json!({"text": ADMIN}),
    )
    .await;
    b.click("#r-token button[type=submit]").await;
}

/// Waits until the review table has `n` rows.
async fn rows(b: &webdriver::Browser, n: usize, what: &str) {
    let script = format!("return document.querySelectorAll('#r-items tr').length === {n}");
    b.wait_js(&script, what).await;
}

/// The review page in Chromium: the token typed in, the held articles
/// listed with their evidence, one allowed and one denied by a click, and
/// the public ranking following; screenshot in docs/review.png.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_page_allows_and_denies_by_click() {
    let Some((chromium, driver)) = webdriver::tools() else {
        return;
    };
    let _serial = webdriver::SERIAL.lock().await;
    let s = TestServer::start_with(review_mode(true)).await;
    seed(&s).await;
    let (_, p) = s.get("/api/hot?limit=3&category=y").await;
    assert_eq!(page_ids(&p), Vec::<&str>::new(), "all held");
    // The dashboard's own live list is a public one too: it would hold
    // the rest when it opens. Hold them now, so the count is known.
    let (_, p) = s.get("/api/hot").await;
    assert_eq!(page_ids(&p), Vec::<&str>::new());
    let b = webdriver::Browser::start(&chromium, &driver).await;
    b.resize(1100, 700).await;
    b.goto(&format!("{}/", s.base)).await;
    b.wait_js(
        "return document.querySelector('nav a[href=review]') !== null",
        "the dashboard's link",
    )
    .await;
    b.click("nav a[href=review]").await;
    b.wait_js("return location.pathname === '/review'", "the review page")
        .await;
    sign_in(&b).await;
    rows(&b, 16, "sixteen held rows").await;
    let row = b
        .js("return document.querySelector('#r-items tr[data-article-id=a01]').innerText")
        .await;
    let row = row.as_str().unwrap();
    for part in ["Article 1", "held", "hot gravity 72h category=y", "19"] {
        assert!(row.contains(part), "{part:?} in {row:?}");
    }
    b.assert_contrast("#r-items td").await;
    let token_shown = b
        .js("return document.getElementById('r-token').offsetParent !== null")
        .await;
    assert_eq!(
        token_shown, false,
        "the token form goes away once it worked"
    );
    b.screenshot(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/review.png"))
        .await;
    b.click("#r-items tr[data-article-id=a03] button.allow")
        .await;
    rows(&b, 15, "a03 gone from the held list").await;
    b.click("#r-items tr[data-article-id=a01] button.deny")
        .await;
    rows(&b, 14, "a01 gone from the held list").await;
    let msg = b
        .js("return document.getElementById('r-msg').textContent")
        .await;
    assert!(msg.as_str().unwrap().contains("a01: denied"), "{msg}");
    let (_, p) = s.get("/api/hot?limit=3&category=y").await;
    assert_eq!(
        page_ids(&p),
        ["a03"],
        "allowed by click, the denied one never"
    );
    let (_, v) = admin(&s, reqwest::Method::GET, "/api/review?status=denied", None).await;
    assert_eq!(page_ids(&v), ["a01"]);
    b.quit().await;
}

/// Under `suspicious` (the seeded views all come from 127.0.0.1, so the
/// articles with at least 14 visitors, a00..a06, break the network rule):
/// the held articles with their network evidence, as a public ranking
/// held them.
async fn suspicious_site() -> TestServer {
    let s = TestServer::start_with(|c| {
        c.review.mode = hotrank::config::ReviewMode::Suspicious;
        c.review.min_visitors = 14;
    })
    .await;
    seed(&s).await;
    let (_, p) = s.get("/api/hot?limit=100").await;
    assert_eq!(
        page_ids(&p),
        (7..16).map(|i| format!("a{i:02}")).collect::<Vec<_>>(),
        "the narrow rises held, the others served"
    );
    s
}

/// `hotrank review` shows a `suspicious` hold's evidence: the rule, one
/// block against the article's visitors, the held-back share and the hours.
#[tokio::test]
async fn cli_review_shows_the_network_evidence() {
    let s = suspicious_site().await;
    let args = vec!["review".to_string(), "--url".into(), s.base.clone()];
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_hotrank"))
            .args(&args)
            .env("HOTRANK_ADMIN_TOKEN", ADMIN)
            .env_remove("HOTRANK_URL")
            .output()
            .expect("run hotrank")
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("review mode: suspicious; 7 article(s)"),
        "{text}"
    );
    assert!(text.lines().next().unwrap_or("").contains("review mode"));
    let row = |id: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("{id} in {text}"))
            .to_string()
    };
    // a00 had 20 visitors, a06 14, all from one /24.
    assert!(
        row("a00").contains("narrow_network 1/20uv held 0% "),
        "{}",
        row("a00")
    );
    assert!(
        row("a06").contains("narrow_network 1/14uv"),
        "{}",
        row("a06")
    );
    assert!(!text.contains("a07 "), "{text}");
}

/// The review page shows a `suspicious` hold's evidence beside allow and
/// deny; screenshot in docs/review-suspicious.png.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_page_shows_the_network_evidence() {
    let Some((chromium, driver)) = webdriver::tools() else {
        return;
    };
    let _serial = webdriver::SERIAL.lock().await;
    let s = suspicious_site().await;
    let b = webdriver::Browser::start(&chromium, &driver).await;
    b.resize(1300, 700).await;
    b.goto(&format!("{}/review", s.base)).await;
    sign_in(&b).await;
    rows(&b, 7, "seven held rows").await;
    let cell = b
        .js("return document.querySelector('#r-items tr[data-article-id=a00] td.network').innerText")
        .await;
    let cell = cell.as_str().unwrap();
    for part in [
        "narrow network",
        "1 block / 20 visitors (5.0%)",
        "held back 0 of 20 events (0.0%)",
    ] {
        assert!(cell.contains(part), "{part:?} in {cell:?}");
    }
    b.assert_contrast("#r-items td").await;
    b.screenshot(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/review-suspicious.png"),
    )
    .await;
    b.click("#r-items tr[data-article-id=a00] button.allow")
        .await;
    rows(&b, 6, "a00 gone from the held list").await;
    let (_, p) = s.get("/api/hot?limit=1").await;
    assert_eq!(page_ids(&p), ["a00"], "allowed by click");
    b.quit().await;
}
