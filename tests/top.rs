//! `hotrank top` and `hotrank stats`, the real binary against a real
//! server on a loopback port (in this process, with a manual clock).

mod common;

use std::process::{Command, Output};

use serde_json::json;

use common::{T0, TestServer};

async fn hotrank(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_hotrank"))
            .args(&args)
            .env_remove("HOTRANK_URL")
            .output()
            .expect("run hotrank")
    })
    .await
    .expect("join")
}

fn args(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{:?}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).expect("UTF-8")
}

/// t0..t3 with 1, 2, 3, 4 readers; one duplicate.
async fn seeded() -> TestServer {
    let server = TestServer::start().await;
    for i in 0..4 {
        let (s, b) = server
            .admin_put(
                &format!("/api/articles/t{i}"),
                &json!({"title": format!("Title number {i}"), "category": "c", "publishedAt": T0 - 600}),
            )
            .await;
        assert!(s.is_success(), "{b}");
        for v in 0..=i {
            server.view(&format!("t{i}"), &format!("v{v}")).await;
        }
    }
    assert_eq!(server.view("t0", "v0").await, "duplicate");
    server
}

/// The table's rows: (rank, move, PV, title).
fn rows(out: &str) -> Vec<(String, String, String, String)> {
    out.lines()
        .skip_while(|l| !l.trim_start().starts_with("#  move"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            (
                cells[0].to_string(),
                cells[1].to_string(),
                cells[3].to_string(),
                cells[5..].join(" "),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_prints_the_hot_list_with_movement() {
    let server = seeded().await;
    let base = server.base.clone();
    let out = stdout(
        &hotrank(args(&[
            "top", "--url", &base, "--range", "24h", "--limit", "3",
        ]))
        .await,
    );
    assert!(out.contains("gravity · 24h"), "{out}");
    assert!(out.contains("10 page views"), "{out}");
    assert!(out.contains("1 held back"), "{out}");
    let (_, o) = server.get("/api/overview?range=24h&limit=3").await;
    let r = rows(&out);
    assert_eq!(r.len(), 3, "{out}");
    for (row, it) in r.iter().zip(o["items"].as_array().unwrap()) {
        assert_eq!(row.0, it["rank"].to_string());
        assert_eq!(row.2, it["pv"].to_string());
        assert_eq!(row.3, it["title"].as_str().unwrap());
    }
    assert_eq!(r[0].3, "Title number 3");
    assert_eq!(r[0].1, "new", "nothing was ranked at 20:00: {out}");
    println!("{out}");

    // Two hours later (the views above are in the 21:00 bucket, the
    // ranking at 22:00 is the baseline) t0 has climbed to the top.
    server.clock.advance(7200);
    for v in 0..20 {
        server.view("t0", &format!("late{v}")).await;
    }
    let out = stdout(
        &hotrank(args(&[
            "top", "--url", &base, "--range", "24h", "--limit", "3", "--model", "gravity",
        ]))
        .await,
    );
    let r = rows(&out);
    assert_eq!(
        (r[0].1.as_str(), r[0].3.as_str()),
        ("▲3", "Title number 0"),
        "{out}"
    );
    assert_eq!(r[1].1, "▼1", "{out}");
    assert!(out.contains("moves since 22:00 UTC"), "{out}");
    println!("{out}");

    // A category filter that matches nothing.
    let out = stdout(&hotrank(args(&["top", "--url", &base, "--category", "none"])).await);
    assert!(out.contains("nothing has traffic"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_watch_refreshes_then_stops() {
    let server = seeded().await;
    let out = stdout(
        &hotrank(args(&[
            "top",
            "--url",
            &server.base,
            "--watch",
            "--interval",
            "1s",
            "--count",
            "2",
            "--limit",
            "2",
        ]))
        .await,
    );
    assert_eq!(out.matches("hotrank top ·").count(), 2, "{out}");
    assert!(
        !out.contains('\x1b'),
        "no screen control when not a terminal"
    );
    assert_eq!(rows(&out).len(), 2, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_prints_totals_and_quarantine() {
    let server = seeded().await;
    let out = stdout(&hotrank(args(&["stats", "--url", &server.base, "--range", "24h"])).await);
    let line = |k: &str| -> Vec<String> {
        out.lines()
            .find(|l| l.trim_start().starts_with(k))
            .unwrap_or_else(|| panic!("no {k:?} in {out}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    println!("{out}");
    assert!(out.contains("last 24h"), "{out}");
    assert_eq!(line("articles")[1..], ["4", "4"], "{out}");
    assert_eq!(line("page views")[2..], ["10", "–"], "{out}");
    assert_eq!(line("events counted")[2..], ["10", "10"], "{out}");
    assert_eq!(line("held back")[2..], ["1", "1"], "{out}");
    assert_eq!(line("duplicate")[1..], ["1", "1"], "{out}");
    assert_eq!(line("bot")[1..], ["0", "0"], "{out}");
}

/// `hotrank top --model rising`: what is taking off, with the window,
/// baseline and min passed on (and `--range` refused: rising has a window).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_lists_what_is_rising() {
    let server = seeded().await;
    let base = server.base.clone();
    server.clock.advance(3600);
    for v in 0..6 {
        server.view("t0", &format!("new{v}")).await;
    }
    let out = stdout(&hotrank(args(&["top", "--url", &base, "--model", "rising"])).await);
    assert!(out.contains("rising · 1h"), "{out}");
    let r = rows(&out);
    assert_eq!(r.len(), 1, "only t0 has 5 views this hour: {out}");
    assert_eq!((r[0].2.as_str(), r[0].3.as_str()), ("6", "Title number 0"));
    println!("{out}");
    let out = stdout(
        &hotrank(args(&[
            "top",
            "--url",
            &base,
            "--model",
            "rising",
            "--window",
            "2h",
            "--baseline",
            "1h",
            "--min",
            "3",
        ]))
        .await,
    );
    assert!(out.contains("rising · 2h"), "{out}");
    let titles: Vec<String> = rows(&out).into_iter().map(|r| r.3).collect();
    // t0: 7 views, t3 4, t2 3, t1 2 (under min 3).
    assert_eq!(
        titles,
        ["Title number 0", "Title number 3", "Title number 2"],
        "{out}"
    );
    let o = hotrank(args(&[
        "top", "--url", &base, "--model", "rising", "--range", "24h",
    ]))
    .await;
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--window"));
    let o = hotrank(args(&[
        "top", "--url", &base, "--model", "rising", "--window", "0h",
    ]))
    .await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("window"), "{err}");
    // --half-life: gravity's age divisor becomes 2^(age / 6 h).
    let out = stdout(
        &hotrank(args(&[
            "top",
            "--url",
            &base,
            "--model",
            "gravity",
            "--half-life",
            "6h",
        ]))
        .await,
    );
    assert_eq!(rows(&out).len(), 4, "{out}");
    let o = hotrank(args(&[
        "top",
        "--url",
        &base,
        "--model",
        "votes",
        "--half-life",
        "6h",
    ]))
    .await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("decay"), "{err}");
    // --scale category: the same articles, each score over its category's
    // activity (any model); another scale is refused by name.
    let top = |extra: &'static [&'static str]| {
        let base = base.clone();
        async move {
            let mut a = vec!["top", "--url", base.as_str(), "--model", "gravity"];
            a.extend_from_slice(extra);
            hotrank(args(&a)).await
        }
    };
    let plain = stdout(&top(&[]).await);
    let scaled = stdout(&top(&["--scale", "category"]).await);
    assert_eq!(rows(&scaled).len(), rows(&plain).len(), "{scaled}");
    // The scores (third column) are the scaled ones.
    let scores = |out: &str| -> Vec<String> {
        (out.lines())
            .skip_while(|l| !l.trim_start().starts_with("#  move"))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .map(|l| l.split_whitespace().nth(2).unwrap_or("").to_string())
            .collect()
    };
    assert_ne!(scores(&scaled), scores(&plain), "{scaled}\n{plain}");
    let o = top(&["--scale", "categories"]).await;
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("scale"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_clear() {
    let server = TestServer::start().await;
    let o = hotrank(args(&["top", "--url", &server.base, "--range", "0h"])).await;
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("400 invalid_parameter") && err.contains("range"),
        "{err}"
    );
    let o = hotrank(args(&["stats", "--url", "ftp://example.org"])).await;
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("https://host"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = hotrank(args(&["top", "--url", &format!("http://127.0.0.1:{port}")])).await;
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot reach"));
}
