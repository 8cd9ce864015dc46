//! The access log and refused CORS origins, on the real binary with JSON
//! logs written to a file: one line per request with the route pattern,
//! status, duration and client block (through `trusted_proxies`); a flood
//! of bad tokens held to the per-second limit and the rest counted; a
//! refused origin counted and named once.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::BROWSER_UA;

/// The most access lines a second (src/api/access.rs, LINES_PER_SEC).
const LINES_PER_SEC: u64 = 20;

struct Served {
    child: Child,
    base: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path, log: &Path) -> Served {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let config = dir.join("hotrank.toml");
    std::fs::write(
        &config,
        "trusted_proxies = [\"127.0.0.1\"]\ncors_origins = [\"https://news.example\"]\n",
    )
    .unwrap();
    let listen = format!("127.0.0.1:{port}");
    let child = Command::new(env!("CARGO_BIN_EXE_hotrank"))
        .args(["serve", "--listen", &listen, "--log-format", "json"])
        .args([
            "--admin-token",
            "admin-secret",
            "--ingest-token",
            "ingest-secret",
        ])
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env_remove("RUST_LOG")
        .stdout(std::fs::File::create(log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn hotrank serve");
    Served {
        child,
        base: format!("http://{listen}"),
    }
}

/// The log's JSON lines.
fn lines(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn access_lines(log: &Path) -> Vec<Value> {
    lines(log)
        .into_iter()
        .filter(|l| l["target"] == "hotrank::access")
        .collect()
}

async fn metric(http: &reqwest::Client, base: &str, name: &str) -> f64 {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{name} missing from /metrics"))
        .trim()
        .parse()
        .unwrap()
}

/// Waits until `ok` holds for the log (lines are written as requests end).
async fn log_until(log: &Path, what: &str, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let l = lines(log);
        if ok(&l) {
            return l;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_log_names_route_status_duration_and_client_block() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("hotrank.log");
    let s = serve(dir.path(), &log);
    let http = reqwest::Client::builder()
        .user_agent(BROWSER_UA)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !http
        .get(format!("{}/readyz", s.base))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(Instant::now() < deadline, "server never became ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A 400 on a patterned route, sent through the trusted proxy (this
    // loopback peer) for a client it names.
    let r = http
        .get(format!("{}/api/articles/no%20such%20id/hourly", s.base))
        .header("x-forwarded-for", "198.51.100.77")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    // A 404: no route matched.
    let r = http
        .get(format!("{}/no/such/page", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // A 2xx is not logged at the default level.
    let r = http
        .get(format!("{}/healthz", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let all = log_until(&log, "two access lines", |l| {
        l.iter()
            .filter(|l| l["target"] == "hotrank::access")
            .count()
            >= 2
    })
    .await;
    let access: Vec<&Value> = all
        .iter()
        .filter(|l| l["target"] == "hotrank::access")
        .collect();
    assert_eq!(access.len(), 2, "{access:#?}");
    let f = &access[0]["fields"];
    assert_eq!(access[0]["level"], "INFO", "{f}");
    assert_eq!(f["message"], "request");
    assert_eq!(f["method"], "GET");
    assert_eq!(
        f["route"], "/api/articles/{id}/hourly",
        "the pattern, not the path"
    );
    assert_eq!(f["status"], 400);
    assert!(f["duration_ms"].as_f64().is_some_and(|d| d >= 0.0), "{f}");
    assert_eq!(f["client"], "198.51.100.0/24", "{f}");
    let f = &access[1]["fields"];
    assert_eq!(
        (&f["route"], &f["status"]),
        (&"unmatched".into(), &404.into())
    );
    assert_eq!(f["client"], "127.0.0.0/24", "{f}");
    assert!(
        !std::fs::read_to_string(&log)
            .unwrap()
            .contains("no such id"),
        "raw paths stay out of the log"
    );

    // A refused origin: counted and named once; an allowed one is not.
    let post = |origin: &'static str| {
        http.post(format!("{}/api/views", s.base))
            .header("origin", origin)
            .header("content-type", "application/json")
            .body(r#"{"articleId": "a1", "visitorId": "v1"}"#)
            .send()
    };
    assert!(
        post("https://news.example")
            .await
            .unwrap()
            .status()
            .is_success()
    );
    assert_eq!(
        metric(&http, &s.base, "hotrank_cors_refused_total").await,
        0.0
    );
    let r = post("https://elsewhere.example").await.unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    assert_eq!(
        metric(&http, &s.base, "hotrank_cors_refused_total").await,
        1.0
    );
    let all = log_until(&log, "the CORS warning", |l| {
        l.iter().any(|l| l["fields"]["origin"].is_string())
    })
    .await;
    let cors: Vec<&Value> = all
        .iter()
        .filter(|l| l["fields"]["origin"].is_string())
        .collect();
    assert_eq!(cors.len(), 1, "{cors:#?}");
    assert_eq!(cors[0]["level"], "WARN");
    assert_eq!(cors[0]["fields"]["origin"], "\"https://elsewhere.example\"");

    // A flood of 1000 bad tokens: at most LINES_PER_SEC lines a second
    // reach the log, and every other is counted as dropped.
    let before = access_lines(&log).len();
    assert_eq!(
        metric(&http, &s.base, "hotrank_access_log_dropped_total").await,
        0.0
    );
    let started = Instant::now();
    for _ in 0..1000 {
        let r = http
            .post(format!("{}/api/views", s.base))
            .bearer_auth("wrong-token")
            .header("content-type", "application/json")
            .body(r#"{"articleId": "a1", "visitorId": "v2"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
    }
    let secs = started.elapsed().as_secs();
    let dropped = metric(&http, &s.base, "hotrank_access_log_dropped_total").await as u64;
    let flood = log_until(&log, "the flood's lines", |l| {
        let n = l
            .iter()
            .filter(|l| l["target"] == "hotrank::access" && l["fields"]["status"] == 401)
            .count() as u64;
        n + dropped == 1000
    })
    .await;
    let written = flood
        .iter()
        .filter(|l| l["target"] == "hotrank::access" && l["fields"]["status"] == 401)
        .count() as u64;
    assert_eq!(access_lines(&log).len() as u64 - before as u64, written);
    assert!(
        written <= LINES_PER_SEC * (secs + 2),
        "{written} lines in {secs} s"
    );
    if secs < 1000 / LINES_PER_SEC / 2 {
        assert!(dropped > 0, "a fast flood is held back");
    }
    // The next line written says how many it follows.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = http
        .get(format!("{}/no/such/page", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let after = log_until(&log, "the line after the flood", |l| {
        l.iter()
            .filter(|l| l["target"] == "hotrank::access")
            .count()
            > before + written as usize
    })
    .await;
    let last = after
        .iter()
        .rfind(|l| l["target"] == "hotrank::access")
        .unwrap();
    assert_eq!(last["fields"]["status"], 404);
    assert_eq!(last["fields"]["suppressed"], dropped, "{last}");
}
