//! Durability of the embedded store: a SIGKILL in the middle of a load
//! loses no acknowledged event and counts none twice; a clean restart (and
//! a restart from the log alone) gives back every counter, ranking and
//! quarantine tally.

mod common;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use common::{BROWSER_UA, T0, TestServer, test_config};

struct Proc {
    child: Child,
    base: String,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts the real `hotrank serve` binary on `dir` and waits until healthy.
async fn spawn_server(dir: &std::path::Path, client: &reqwest::Client) -> Proc {
    let config = dir.join("hotrank.toml");
    std::fs::write(
        &config,
        "[gate]\nvisitor_limit_per_minute = 0\nip_limit_per_minute = 0\n[embedded]\nfsync = \"always\"\n",
    )
    .unwrap();
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_hotrank"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--config",
        ])
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env("HOTRANK_ADMIN_TOKEN", common::ADMIN)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn hotrank");
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = client.get(format!("{base}/healthz")).send().await
            && r.status() == StatusCode::OK
        {
            break;
        }
        assert!(Instant::now() < deadline, "server did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Proc { child, base }
}

fn event(i: u64) -> Value {
    json!({"articleId": format!("k{}", i % 17), "visitorId": format!("visitor-{i}"), "eventId": format!("e-{i}")})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_loses_no_acknowledged_event() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::builder()
        .user_agent(BROWSER_UA)
        .build()
        .unwrap();
    let mut server = spawn_server(dir.path(), &client).await;
    let acked = Arc::new(parking_lot::Mutex::new(Vec::<u64>::new()));
    let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for worker in 0..8u64 {
        let (client, base, acked, sent) = (
            client.clone(),
            server.base.clone(),
            acked.clone(),
            sent.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for n in 0..100_000u64 {
                let i = n * 8 + worker;
                sent.fetch_max(i + 1, std::sync::atomic::Ordering::Relaxed);
                let r = client
                    .post(format!("{base}/api/views"))
                    .json(&event(i))
                    .send()
                    .await;
                match r {
                    Ok(r) if r.status() == StatusCode::ACCEPTED => {
                        let body: Value = r.json().await.unwrap();
                        assert_eq!(body["verdict"], "counted");
                        acked.lock().push(i);
                    }
                    _ => return,
                }
            }
        }));
    }
    // Kill once a good number of events were acknowledged.
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.lock().len() < 1500 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.child.kill().expect("SIGKILL");
    server.child.wait().unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    let acked = acked.lock().clone();
    assert!(
        acked.len() >= 1500,
        "only {} events acknowledged",
        acked.len()
    );
    eprintln!("{} events acknowledged before SIGKILL", acked.len());

    let mut server = spawn_server(dir.path(), &client).await;
    let mut per_article: HashMap<String, u64> = HashMap::new();
    for i in &acked {
        *per_article.entry(format!("k{}", i % 17)).or_default() += 1;
    }
    let pv = |body: &Value| body["pv"].as_u64().unwrap();
    let mut before = HashMap::new();
    for (a, n) in &per_article {
        let r: Value = client
            .get(format!("{}/api/articles/{a}", server.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(pv(&r) >= *n, "{a}: {} counted < {n} acknowledged", pv(&r));
        before.insert(a.clone(), pv(&r));
    }
    let total: u64 = before.values().sum();
    assert!(total <= sent.load(std::sync::atomic::Ordering::Relaxed));
    // Every acknowledged event is there exactly once: resending it is a replay.
    for chunk in acked.chunks(500) {
        let events: Vec<Value> = chunk
            .iter()
            .map(|&i| {
                let mut e = event(i);
                e["type"] = json!("view");
                e
            })
            .collect();
        let r: Value = client
            .post(format!("{}/api/events", server.base))
            .json(&json!({"events": events}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            r["verdicts"]["replayed"].as_u64(),
            Some(chunk.len() as u64),
            "{r}"
        );
    }
    for (a, n) in &before {
        let r: Value = client
            .get(format!("{}/api/articles/{a}", server.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(pv(&r), *n);
    }
    // SIGTERM: a graceful stop exits 0.
    let pid = server.child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let status = server.child.wait().unwrap();
    assert!(status.success(), "graceful shutdown exit status {status}");
}

/// Everything observable that a restart must preserve.
async fn fingerprint(s: &TestServer) -> Value {
    let mut out = serde_json::Map::new();
    for path in [
        "/api/stats?hours=48",
        "/api/hot?range=72h&limit=100&explain=true",
        "/api/hot?range=1h&limit=100",
        "/api/hot?range=all&limit=100",
        "/api/hot?range=24h&category=tech&perAuthor=1",
        "/api/new?limit=100",
        "/api/articles/a0",
        "/api/articles/a3",
        "/api/articles/cat",
    ] {
        let (status, body) = s.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        out.insert(path.to_string(), body);
    }
    Value::Object(out)
}

async fn load(s: &TestServer) {
    s.admin_put(
        "/api/articles/cat",
        &json!({"title": "Cats", "category": "tech", "author": "ann", "publishedAt": T0 - 7200}),
    )
    .await;
    let mut events = vec![];
    for i in 0..400u64 {
        events.push(json!({"type": "view", "articleId": format!("a{}", i % 7), "visitorId": format!("v{}", i % 30),
                           "ts": T0 - 3600 * (i % 5) as i64}));
        events.push(json!({"type": "dwell", "articleId": "cat", "visitorId": format!("v{i}"), "seconds": 5 + i % 30}));
    }
    events.push(json!({"type": "like", "articleId": "a3", "visitorId": "x", "eventId": "L1"}));
    events.push(json!({"type": "like", "articleId": "a3", "visitorId": "x", "eventId": "L1"}));
    for chunk in events.chunks(300) {
        let (status, _) = s.post("/api/events", &json!({"events": chunk})).await;
        assert_eq!(status, StatusCode::OK);
    }
    let bot = s
        .client
        .post(s.url("/api/views"))
        .header("user-agent", "AhrefsBot/7.0")
        .json(&json!({"articleId": "a0", "visitorId": "b"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bot.status(), StatusCode::ACCEPTED);
}

#[tokio::test]
async fn clean_restart_and_log_replay_give_back_everything() {
    let s = TestServer::start().await;
    load(&s).await;
    let before = fingerprint(&s).await;
    assert!(
        before["/api/stats?hours=48"]["quarantined"]["duplicate"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(before["/api/stats?hours=48"]["quarantined"]["bot"], 1);
    assert_eq!(before["/api/stats?hours=48"]["quarantined"]["replayed"], 1);
    let dir = s.stop().await;

    // From the log alone: a copy of the data dir without its snapshots.
    let copy = Arc::new(tempfile::tempdir().unwrap());
    let status = Command::new("cp")
        .arg("-r")
        .arg(format!("{}/.", dir.path().display()))
        .arg(copy.path())
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::remove_dir_all(copy.path().join("snapshots")).unwrap();
    let s = TestServer::start_in(copy.clone(), test_config(copy.path()), T0).await;
    assert_eq!(fingerprint(&s).await, before, "replaying the log");
    s.stop().await;

    // From the snapshot written at shutdown.
    let s = TestServer::start_in(dir.clone(), test_config(dir.path()), T0).await;
    assert_eq!(fingerprint(&s).await, before, "loading the snapshot");
    // Gate state survives too: the IP's minute is still full, and once it
    // has passed, a repeat view inside the dedupe window is a duplicate.
    assert_eq!(s.view("a0", "v0").await, "rate_limited");
    s.clock.advance(61);
    assert_eq!(s.view("a0", "v0").await, "duplicate");
}
