//! `/metrics` as an operator scrapes it: a real `hotrank serve` process
//! (its own metrics recorder), on the embedded store and on a real
//! `redis-server`, driven with some traffic, then checked by Prometheus's
//! own linter (`promtool check metrics`, Debian package `prometheus`) and
//! for HELP and TYPE on every family.
//!
//! Without promtool the tests are skipped with a message, unless the
//! environment variable `CI` is set: then they fail.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use common::redis::RedisServer;
use common::{ADMIN, BROWSER_UA};

fn promtool() -> Option<PathBuf> {
    common::tools::tool("promtool", "Debian: apt-get install prometheus")
}

/// A `hotrank serve` child process, killed on drop.
struct Served {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(extra: &[&str]) -> Served {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let listen = format!("127.0.0.1:{port}");
    let child = Command::new(env!("CARGO_BIN_EXE_hotrank"))
        .args(["serve", "--listen", &listen, "--admin-token", ADMIN])
        .arg("--data-dir")
        .arg(dir.path())
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn hotrank serve");
    Served {
        child,
        base: format!("http://{listen}"),
        _dir: dir,
    }
}

async fn wait_until(what: &str, mut ok: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ok().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Articles, counted views, quarantined views (duplicate, bot), an invalid
/// batch, ranking queries on every model, and the overview.
async fn drive(base: &str) {
    let http = reqwest::Client::builder()
        .user_agent(BROWSER_UA)
        .build()
        .unwrap();
    wait_until("the server to be ready", async || {
        http.get(format!("{base}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for i in 0..5 {
        let r = http
            .put(format!("{base}/api/articles/m{i}"))
            .bearer_auth(ADMIN)
            .json(&json!({"title": format!("article {i}"), "publishedAt": now - 3600}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
        for v in 0..=i {
            let r = http
                .post(format!("{base}/api/views"))
                .json(&json!({"articleId": format!("m{i}"), "visitorId": format!("v{v}")}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 202);
        }
    }
    // A duplicate and a bot.
    http.post(format!("{base}/api/views"))
        .json(&json!({"articleId": "m0", "visitorId": "v0"}))
        .send()
        .await
        .unwrap();
    http.post(format!("{base}/api/views"))
        .header("user-agent", "curl/8.0")
        .json(&json!({"articleId": "m1", "visitorId": "bot"}))
        .send()
        .await
        .unwrap();
    // An invalid event in a batch.
    http.post(format!("{base}/api/events"))
        .json(&json!({"events": [{"type": "nope", "articleId": "m0"}]}))
        .send()
        .await
        .unwrap();
    for model in ["gravity", "weighted", "window", "votes", "reddit"] {
        http.get(format!("{base}/api/hot?model={model}&range=24h"))
            .send()
            .await
            .unwrap();
    }
    for path in ["/api/new", "/api/overview?range=24h", "/api/stats"] {
        let r = http.get(format!("{base}{path}")).send().await.unwrap();
        assert!(r.status().is_success(), "{path}");
    }
}

/// Waits until upkeep has published the store's gauges, then returns the
/// exposition text.
async fn scrape(base: &str, must_have: &[&str]) -> String {
    let http = reqwest::Client::new();
    let mut text = String::new();
    wait_until("the store's metrics", async || {
        text = http
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        must_have
            .iter()
            .all(|m| text.contains(&format!("# TYPE {m} ")))
    })
    .await;
    text
}

/// Family → type, from `# TYPE` lines; asserts HELP for each and that
/// every sample belongs to a declared family.
fn families(text: &str) -> BTreeMap<String, String> {
    let mut types = BTreeMap::new();
    let mut helps = BTreeSet::new();
    let mut samples = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            types.insert(name.to_string(), kind.to_string());
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP name text");
            assert!(!help.trim().is_empty(), "empty HELP for {name}");
            helps.insert(name.to_string());
        } else if !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['{', ' ']).next().unwrap();
            samples.insert(name.to_string());
        }
    }
    assert!(!types.is_empty(), "no families in:\n{text}");
    for name in types.keys() {
        assert!(helps.contains(name), "{name} has TYPE but no HELP");
    }
    for s in &samples {
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| s.strip_suffix(suffix).filter(|f| types.contains_key(*f)))
            .unwrap_or(s);
        assert!(types.contains_key(family), "sample {s} has no TYPE");
    }
    for (name, kind) in &types {
        // The process's own families keep Prometheus's standard names.
        if name.starts_with("process_") {
            continue;
        }
        assert!(name.starts_with("hotrank_"), "{name}");
        assert_eq!(
            kind == "counter",
            name.ends_with("_total"),
            "{name} is a {kind}: counters and only counters end in _total"
        );
        let described = hotrank::metrics::FAMILIES
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name} is not listed in src/metrics.rs"));
        let want = match described.kind {
            hotrank::metrics::Kind::Counter => "counter",
            hotrank::metrics::Kind::Gauge => "gauge",
            hotrank::metrics::Kind::Histogram => "histogram",
        };
        assert_eq!(kind, want, "{name}: exported type vs src/metrics.rs");
    }
    types
}

/// `promtool check metrics` on the text: its output, asserted clean.
fn promtool_check(tool: &Path, text: &str) -> String {
    let mut child = Command::new(tool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().expect("promtool output");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && report.trim().is_empty(),
        "promtool check metrics: {:?}\n{report}\n--- scraped:\n{text}",
        out.status
    );
    report
}

/// Families both stores share, under one name.
const SHARED: &[&str] = &[
    "hotrank_http_requests_total",
    "hotrank_events_total",
    "hotrank_rankings",
    "hotrank_ranking_rebuilds_total",
    "hotrank_ranking_seconds",
    "hotrank_query_seconds",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_metrics_pass_promtool() {
    let Some(tool) = promtool() else {
        return;
    };
    let server = serve(&[]);
    drive(&server.base).await;
    let text = scrape(
        &server.base,
        &[
            SHARED,
            &[
                "hotrank_articles",
                "hotrank_wal_bytes",
                "hotrank_ingest_lock_wait_seconds",
            ],
        ]
        .concat(),
    )
    .await;
    let types = families(&text);
    promtool_check(&tool, &text);
    assert!(!types.contains_key("hotrank_ranking_rebuilds"));
    println!(
        "embedded: {} families, promtool check metrics: clean",
        types.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_metrics_pass_promtool() {
    let Some(tool) = promtool() else {
        return;
    };
    let redis = RedisServer::start();
    let server = serve(&["--store", "redis", "--redis-url", &redis.url()]);
    drive(&server.base).await;
    let text = scrape(&server.base, SHARED).await;
    let types = families(&text);
    promtool_check(&tool, &text);
    assert!(!types.contains_key("hotrank_redis_rankings"));
    println!(
        "redis: {} families, promtool check metrics: clean",
        types.len()
    );
}

/// What an operator scrapes before any traffic: every counter already at 0
/// (so `rate()` and the alerts in deploy/ work from the first scrape), the
/// build's version, and the process's CPU, memory and descriptors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_server_exports_its_counters_build_and_process() {
    let Some(tool) = promtool() else {
        return;
    };
    let server = serve(&[]);
    let http = reqwest::Client::new();
    let mut health = serde_json::Value::Null;
    wait_until("the server to answer", async || {
        match http.get(format!("{}/healthz", server.base)).send().await {
            Ok(r) => {
                health = r.json().await.unwrap();
                true
            }
            Err(_) => false,
        }
    })
    .await;
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(health["version"], version, "{health}");
    let text = scrape(&server.base, &["hotrank_build_info"]).await;
    families(&text);
    promtool_check(&tool, &text);
    let has = |sample: &str| text.lines().any(|l| l.starts_with(sample));
    for f in hotrank::metrics::FAMILIES {
        if f.kind == hotrank::metrics::Kind::Counter
            && !hotrank::metrics::LABELLED_COUNTERS.contains(&f.name)
        {
            assert!(
                has(&format!("{} 0", f.name)),
                "{} is not at 0 from the start",
                f.name
            );
        }
    }
    for verdict in ["counted", "duplicate", "rate_limited", "bot", "replayed"] {
        assert!(
            has(&format!("hotrank_events_total{{verdict=\"{verdict}\"}} 0")),
            "{verdict}"
        );
    }
    for budget in ["query", "post", "vote"] {
        assert!(
            has(&format!(
                "hotrank_budget_refused_total{{budget=\"{budget}\"}} 0"
            )),
            "{budget}"
        );
    }
    assert!(
        has(&format!("hotrank_build_info{{version=\"{version}\"}} 1")),
        "no build info"
    );
    for family in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
    ] {
        let value: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{family} ")))
            .unwrap_or_else(|| panic!("no {family} in:\n{text}"))
            .trim()
            .parse()
            .unwrap();
        // (CPU time counts whole seconds: a counter of the metrics crate.)
        assert!(
            value > 0.0 || family == "process_cpu_seconds_total",
            "{family} = {value}"
        );
    }
}
