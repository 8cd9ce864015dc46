//! Durability of the embedded store, with the real binary where it
//! matters: a SIGKILL in the middle of a load loses no acknowledged event
//! and counts none twice; a clean restart (and a restart from the log alone)
//! gives back every counter, ranking and quarantine tally; a second server
//! on the same data directory is refused; a damaged log is refused with the
//! file and offset named, and `hotrank repair` keeps every intact record; a
//! full disk answers 503 for writes, keeps serving reads and recovers by
//! itself; a batch whose log fails part-way keeps what it applied and its
//! retry counts the rest once; the snapshot seq race is gone, and ingest
//! does not wait for the log trim that follows a snapshot.
//!
//! What the SIGKILL test does *not* prove: a killed process leaves its
//! writes in the page cache, so it would pass with no fsync at all. Power
//! loss is tested in tests/crash.rs on a simulated disk that drops every
//! unsynced byte.

mod common;

use hotrank::store::Lifecycle;
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

fn browser_client() -> reqwest::Client {
    reqwest::Client::builder()
        .user_agent(BROWSER_UA)
        .build()
        .unwrap()
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

/// A process crash: acknowledgement order, recovery and idempotence (not
/// fsync; see the module docs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_loses_no_acknowledged_event() {
    let dir = tempfile::tempdir().unwrap();
    let client = browser_client();
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
        // Counted events by category, each where its article was when it
        // was counted ("dog" moved from tech to life half-way).
        "/api/hot?range=24h&scale=category&explain=true&limit=100",
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
    // Before the load fills the IP's minute.
    for (category, visitors) in [("tech", 0..6), ("life", 6..9)] {
        s.admin_put(
            "/api/articles/dog",
            &json!({"title": "Dogs", "category": category, "publishedAt": T0 - 3600}),
        )
        .await;
        let views: Vec<Value> = visitors
            .map(|v| json!({"type": "view", "articleId": "dog", "visitorId": format!("d{v}")}))
            .collect();
        let (status, _) = s.post("/api/events", &json!({"events": views})).await;
        assert_eq!(status, StatusCode::OK);
    }
    // The keyed likes come first, inside the IP's rate budget: only a
    // counted event's eventId is remembered, so its retry is `replayed`.
    let mut events = vec![
        json!({"type": "like", "articleId": "a3", "visitorId": "x", "eventId": "L1"}),
        json!({"type": "like", "articleId": "a3", "visitorId": "x", "eventId": "L1"}),
    ];
    for i in 0..400u64 {
        events.push(json!({"type": "view", "articleId": format!("a{}", i % 7), "visitorId": format!("v{}", i % 30),
                           "ts": T0 - 3600 * (i % 5) as i64}));
        events.push(json!({"type": "dwell", "articleId": "cat", "visitorId": format!("v{i}"), "seconds": 5 + i % 30}));
    }
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
    // life holds dog's 3 views after its move; tech the 6 before it and
    // cat's dwells.
    let scaled = &before["/api/hot?range=24h&scale=category&explain=true&limit=100"]["items"];
    let dog = (scaled.as_array().unwrap().iter())
        .find(|it| it["articleId"] == "dog")
        .unwrap();
    assert_eq!(dog["explain"]["categoryEvents"], 3.0, "{dog}");
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

/// Runs `hotrank serve` on `dir` expecting it to exit; returns (exited
/// successfully or kept running, stderr). A server that is still up after
/// 15 s is killed and counts as started.
fn serve_expecting_exit(dir: &std::path::Path) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hotrank"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{}", free_port()),
            "--config",
        ])
        .arg(dir.join("hotrank.toml"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env("HOTRANK_ADMIN_TOKEN", common::ADMIN)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run hotrank");
    let deadline = Instant::now() + Duration::from_secs(15);
    let started = loop {
        match child.try_wait().unwrap() {
            Some(status) => break status.success(),
            None if Instant::now() > deadline => {
                child.kill().unwrap();
                child.wait().unwrap();
                break true;
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (started, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_the_same_data_dir_exits_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let client = browser_client();
    let mut first = spawn_server(dir.path(), &client).await;
    let (ok, stderr) = serve_expecting_exit(dir.path());
    assert!(!ok, "the second server must not start");
    assert!(
        stderr.contains("in use by another hotrank process"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&dir.path().join("data").display().to_string()),
        "{stderr}"
    );
    // The first one is unharmed and still takes writes.
    let r = client
        .post(format!("{}/api/views", first.base))
        .json(&event(1))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    // Once it is gone the directory is free again.
    let mut again = spawn_server(dir.path(), &client).await;
    again.child.kill().unwrap();
    again.child.wait().unwrap();
}

/// Offsets of the records in a segment file (after its 32-byte header).
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut off = hotrank::store::wal::SEGMENT_HEADER_LEN;
    let mut out = Vec::new();
    while off + 16 <= bytes.len() {
        out.push(off);
        let len = u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap()) as usize;
        off += 16 + len;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_mid_log_refuses_to_start_and_repair_keeps_every_intact_record() {
    let dir = tempfile::tempdir().unwrap();
    let client = browser_client();
    let mut server = spawn_server(dir.path(), &client).await;
    // One event per article, one at a time: record i is article "r{i}".
    let n = 300u64;
    for i in 0..n {
        let body = json!({"articleId": format!("r{i}"), "visitorId": format!("v{i}"), "eventId": format!("x{i}")});
        let r = client
            .post(format!("{}/api/views", server.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::ACCEPTED);
    }
    server.child.kill().unwrap(); // no snapshot: everything is in the log
    server.child.wait().unwrap();

    let wal = dir.path().join("data/wal");
    let mut segs: Vec<_> = std::fs::read_dir(&wal)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    segs.sort();
    let newest = segs.pop().unwrap();
    let mut bytes = std::fs::read(&newest).unwrap();
    let offsets = record_offsets(&bytes);
    assert_eq!(offsets.len() as u64, n);
    let victim = offsets[150];
    bytes[victim + 20] ^= 0x40;
    std::fs::write(&newest, &bytes).unwrap();

    // Refuses, naming the file and the offset, and changes nothing.
    let (ok, stderr) = serve_expecting_exit(dir.path());
    assert!(!ok, "must refuse a damaged log");
    assert!(stderr.contains(&newest.display().to_string()), "{stderr}");
    assert!(stderr.contains(&format!("offset {victim}")), "{stderr}");
    assert!(stderr.contains("hotrank repair"), "{stderr}");
    assert_eq!(std::fs::read(&newest).unwrap(), bytes);

    let out = Command::new(env!("CARGO_BIN_EXE_hotrank"))
        .args(["repair", "--config"])
        .arg(dir.path().join("hotrank.toml"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("kept {} log records", n - 1)),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("offset {victim}")), "{stdout}");
    assert!(stdout.contains("lost records 151..=151"), "{stdout}");

    let mut server = spawn_server(dir.path(), &client).await;
    for i in 0..n {
        let r = client
            .get(format!("{}/api/articles/r{i}", server.base))
            .send()
            .await
            .unwrap();
        if i == 150 {
            assert_eq!(r.status(), StatusCode::NOT_FOUND, "the damaged record");
        } else {
            assert_eq!(r.status(), StatusCode::OK, "r{i}");
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["pv"], 1, "r{i}");
        }
    }
    server.child.kill().unwrap();
    server.child.wait().unwrap();
}

/// The embedded store's durability on a simulated disk: fsync `always`,
/// segments of `segment_bytes`, no snapshot unless asked for.
fn on_sim_disk(
    disk: &hotrank::store::storage::sim::SimDisk,
    segment_bytes: u64,
) -> hotrank::store::embedded::Durability {
    hotrank::store::embedded::Durability {
        dir: "/data".into(),
        fsync: hotrank::store::wal::FsyncPolicy::Always,
        segment_bytes,
        snapshot_interval_secs: 3600,
        snapshot_every_records: 1 << 40,
        storage: Arc::new(disk.clone()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_keeps_reads_and_recovers_by_itself() {
    use hotrank::store::embedded::{Durability, EmbeddedStore};
    use hotrank::store::storage::sim::SimDisk;

    let disk = SimDisk::new();
    let durability = || on_sim_disk(&disk, 4096);
    let tmp = Arc::new(tempfile::tempdir().unwrap());
    let mut config = test_config(tmp.path());
    config.gate.visitor_limit_per_minute = 0;
    config.gate.ip_limit_per_minute = 0;
    let settings = hotrank::store::StoreSettings::from_config(&config);
    let (store, _) = EmbeddedStore::open(durability(), settings.clone()).unwrap();
    let s = TestServer::start_with_store(Arc::clone(&tmp), config, Arc::new(store), T0).await;
    let view = |i: u64| json!({"articleId": "full", "visitorId": format!("v{i}"), "eventId": format!("f{i}")});
    for i in 0..5 {
        assert_eq!(s.post("/api/views", &view(i)).await.0, StatusCode::ACCEPTED);
    }

    disk.set_capacity(Some(disk.used_bytes()));
    // The log takes this one, then cannot write it: 503, but it is applied
    // and kept, so it becomes durable once there is room.
    let r = s
        .client
        .post(s.url("/api/views"))
        .json(&view(5))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.headers().contains_key("retry-after"));
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
    // Now writes are refused before anything is applied.
    let (_, before) = s.get("/api/articles/full").await;
    let (status, _) = s.post("/api/views", &view(6)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let (status, during) = s.get("/api/articles/full").await;
    assert_eq!(status, StatusCode::OK, "reads keep working");
    assert_eq!(
        during["pv"], before["pv"],
        "a refused write changes nothing"
    );
    assert_eq!(during["pv"], 6);
    assert_eq!(s.get("/api/hot?range=24h").await.0, StatusCode::OK);
    let (status, ready) = s.get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{ready}");
    assert_eq!(s.get("/healthz").await.0, StatusCode::OK);
    let metrics = s.text("/metrics").await;
    assert!(metrics.contains("# HELP hotrank_wal_stalled"), "{metrics}");
    assert!(metrics.contains("hotrank_wal_stalled 1"), "{metrics}");

    // Room again: no restart needed.
    disk.set_capacity(None);
    s.until_ready(20, "room on the disk again").await;
    // The client retries both: the first is a replay (it was kept), the
    // second is counted now.
    let (status, r5) = s.post("/api/views", &view(5)).await;
    assert_eq!(
        (status, r5["verdict"].as_str()),
        (StatusCode::ACCEPTED, Some("replayed"))
    );
    let (status, r6) = s.post("/api/views", &view(6)).await;
    assert_eq!(
        (status, r6["verdict"].as_str()),
        (StatusCode::ACCEPTED, Some("counted"))
    );
    let (_, live) = s.get("/api/articles/full").await;
    assert_eq!(live["pv"], 7);
    drop(s.stop().await);

    // After a power loss now, the state is what the server showed.
    let after = disk.reboot();
    let (store, _) = EmbeddedStore::open(
        Durability {
            storage: Arc::new(after),
            ..durability()
        },
        settings,
    )
    .unwrap();
    let view = hotrank::store::Store::article(
        &store,
        &hotrank::model::ArticleId::parse("full").unwrap(),
        T0,
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(view.lifetime.pv, 7);
}

#[tokio::test]
async fn two_snapshots_never_share_a_seq_and_the_older_one_keeps_its_log() {
    use hotrank::model::{ArticleId, Event, EventType};
    use hotrank::store::Store;
    use hotrank::store::embedded::{Durability, EmbeddedStore};
    use hotrank::store::wal::FsyncPolicy;

    let dir = tempfile::tempdir().unwrap();
    let d = Durability {
        dir: dir.path().to_path_buf(),
        fsync: FsyncPolicy::Always,
        segment_bytes: 256,
        snapshot_interval_secs: 3600,
        snapshot_every_records: 1 << 40,
        storage: hotrank::store::storage::Disk::shared(),
    };
    let settings = hotrank::store::StoreSettings {
        visitor_limit_per_minute: 0,
        ip_limit_per_minute: 0,
        ..Default::default()
    };
    let ev = |i: u64| Event {
        kind: EventType::View,
        article: ArticleId::parse(&format!("s{}", i % 5)).unwrap(),
        visitor: u128::from(i) + 1,
        ip: i,
        ts: T0,
        arrival_ms: T0 * 1000,
        event_id: None,
        seconds: 0,
        bot: hotrank::crawler::Crawler::NONE,
        trusted: false,
        net: 0,
    };
    let (store, _) = EmbeddedStore::open(d.clone(), settings.clone()).unwrap();
    for i in 0..40 {
        store.ingest(vec![ev(i)], T0).await.unwrap();
    }
    store.snapshot().await.unwrap(); // A, at seq 40
    for i in 40..80 {
        store.ingest(vec![ev(i)], T0).await.unwrap();
    }
    store.snapshot().await.unwrap(); // B, at seq 80
    store.snapshot().await.unwrap(); // nothing new: must not trim A's log
    let stats = store.stats(T0, 24).await.unwrap();
    drop(store);

    let snaps = dir.path().join("snapshots");
    let names: Vec<String> = std::fs::read_dir(&snaps)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // The newest snapshot is unreadable: the older one plus the log must
    // rebuild everything.
    let newest = snaps.join(hotrank::store::snapshot::snapshot_file_name(80));
    std::fs::write(&newest, b"damaged").unwrap();
    let (store, report) = EmbeddedStore::open(d, settings).unwrap();
    assert_eq!(report.snapshot_seq, Some(40));
    assert_eq!(report.replayed_records, 40);
    assert_eq!(store.stats(T0, 24).await.unwrap().counted, stats.counted);
}

/// A snapshot is built off the state lock while ingest goes on; it must
/// hold exactly the records up to its seq: reopening from it plus the log
/// after it gives back the live state, every counter and gate entry, with
/// nothing counted twice and nothing missing.
#[tokio::test]
async fn a_snapshot_taken_while_ingest_runs_holds_exactly_its_seq() {
    use hotrank::model::{ArticleId, ArticleMeta, Event, EventType, Verdict};
    use hotrank::store::Store;
    use hotrank::store::embedded::{Durability, EmbeddedStore};
    use hotrank::store::wal::FsyncPolicy;

    let dir = tempfile::tempdir().unwrap();
    let d = Durability {
        dir: dir.path().to_path_buf(),
        fsync: FsyncPolicy::Interval(Duration::from_millis(5)),
        segment_bytes: 64 << 10,
        snapshot_interval_secs: 3600,
        snapshot_every_records: 1 << 40,
        storage: hotrank::store::storage::Disk::shared(),
    };
    let settings = hotrank::store::StoreSettings {
        visitor_limit_per_minute: 0,
        ip_limit_per_minute: 0,
        ..Default::default()
    };
    let ev = |i: u64| Event {
        kind: EventType::ALL[(i % 3) as usize],
        article: ArticleId::parse(&format!("a{}", i % 97)).unwrap(),
        // Every 5th event repeats a visitor: some duplicates, some counted.
        visitor: u128::from(if i.is_multiple_of(5) { i / 5 } else { i }) + 1,
        ip: i,
        ts: T0 + (i % 600) as i64,
        arrival_ms: (T0 + (i % 600) as i64) * 1000,
        event_id: i.is_multiple_of(7).then_some(u128::from(i)),
        seconds: 3,
        bot: hotrank::crawler::Crawler::from_flag(i.is_multiple_of(50)),
        trusted: true,
        net: 0,
    };
    let dump = |store: &EmbeddedStore| {
        let mut lines: Vec<String> = (store.export().iter())
            .map(|r| serde_json::to_string(r).unwrap())
            .collect();
        lines.sort();
        lines
    };
    let (store, _) = EmbeddedStore::open(d.clone(), settings.clone()).unwrap();
    let store = Arc::new(store);
    for b in 0..20u64 {
        store
            .ingest((b * 100..b * 100 + 100).map(ev).collect(), T0)
            .await
            .unwrap();
    }
    let meta = ArticleMeta {
        title: Some("t".into()),
        published_at: T0,
        ..ArticleMeta::default()
    };
    let id = ArticleId::parse("a3").unwrap();
    store.put_article(id.clone(), meta, T0).await.unwrap();
    store.maintain(T0 + 600).await.unwrap(); // a retention sweep
    store.snapshot().await.unwrap(); // the first one: from the log alone
    let counted_before = store.stats(T0, 24).await.unwrap().counted;
    // Events 2000.. are new (0..2000 went in above): most of them count.
    let writer = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            for b in 200..400u64 {
                store
                    .ingest((b * 10..b * 10 + 10).map(ev).collect(), T0)
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
            }
        })
    };
    let mut taken = 0;
    while !writer.is_finished() {
        store.snapshot().await.unwrap(); // from the previous snapshot and the log
        taken += 1;
    }
    writer.await.unwrap();
    // And some after every snapshot, which only the log holds.
    let tail = store
        .ingest((4000..4100).map(ev).collect(), T0)
        .await
        .unwrap();
    let tail_counted = (tail.iter())
        .filter(|o| o.as_ref().is_ok_and(|o| o.verdict == Verdict::Counted))
        .count();
    assert!(tail_counted >= 50, "{tail_counted} of the last 100 counted");
    let counted = store.stats(T0, 24).await.unwrap().counted;
    assert!(
        counted >= counted_before + 1000 + 50,
        "new events counted: {counted_before} then {counted}"
    );
    store.delete_article(&id, T0).await.unwrap();
    let live = dump(&store);
    let counted = store.stats(T0, 24).await.unwrap().counted;
    let (last, _, _) = store.log_seqs().unwrap();
    assert!(taken >= 1);
    // Every snapshot was built off the lock, none fell back to the old way.
    assert_eq!(store.snapshot_fallbacks(), 0);
    drop(store);

    // The last snapshot taken during ingest, plus the log after it.
    let (reopened, report) = EmbeddedStore::open(d, settings).unwrap();
    let from = report.snapshot_seq.unwrap();
    assert!(from < last, "{from} {last}");
    assert_eq!(report.replayed_records, last - from);
    assert_eq!(dump(&reopened), live);
    let again = reopened.stats(T0, 24).await.unwrap().counted;
    assert_eq!(again, counted, "every counted event is back");
}

/// A batch whose log fails part-way through (the disk fills while the
/// batch is applied 64 events per hold of the state lock): what was applied
/// before the failure was logged and is kept, the batch is not acknowledged
/// (503), and the client's retry of the same batch counts every event
/// exactly once. Where the writer stalls (before the batch, between its
/// chunks or after its last one) depends on the round's free space and the
/// writer's timing; every round checks the same thing whichever it was:
/// the counted total the server shows equals the events sent, and a power
/// loss once the disk has room again leaves exactly that total.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_failure_mid_batch_keeps_what_it_applied_and_the_retry_counts_the_rest_once() {
    use hotrank::store::embedded::{Durability, EmbeddedStore};
    use hotrank::store::storage::sim::SimDisk;

    const EVENTS: usize = 1000;
    let rounds: usize = std::env::var("HOTRANK_MIDBATCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let mut partial = 0;
    for round in 0..rounds {
        let disk = SimDisk::new();
        let durability = |disk: &SimDisk| on_sim_disk(disk, 16 * 1024);
        let tmp = Arc::new(tempfile::tempdir().unwrap());
        let mut config = test_config(tmp.path());
        config.gate.visitor_limit_per_minute = 0;
        config.gate.ip_limit_per_minute = 0;
        config.gate.bot_articles_per_minute = 0;
        let settings = hotrank::store::StoreSettings::from_config(&config);
        let (store, _) = EmbeddedStore::open(durability(&disk), settings.clone()).unwrap();
        let s = TestServer::start_with_store(Arc::clone(&tmp), config, Arc::new(store), T0).await;
        let counted = |stats: &Value| stats["counted"].as_u64().unwrap();
        let events: Vec<Value> = (0..EVENTS)
            .map(|i| {
                json!({"type": "view", "articleId": format!("a{}", i % 40),
                       "visitorId": format!("v{round}-{i}"), "eventId": format!("e{round}-{i}")})
            })
            .collect();
        let batch = json!({ "events": events });

        // Room for a varying part of the batch's records: the writer stalls
        // at a different point of it each round.
        disk.set_capacity(Some(disk.used_bytes() + (round as u64 % 4) * 12_000));
        let (first, _) = s.post("/api/events", &batch).await;
        let (_, during) = s.get("/api/stats").await;
        let applied = counted(&during) as usize;
        match first {
            StatusCode::OK => assert_eq!(applied, EVENTS, "round {round}"),
            StatusCode::SERVICE_UNAVAILABLE => {
                assert!(applied <= EVENTS, "round {round}: {applied}");
                partial += usize::from(applied > 0 && applied < EVENTS);
            }
            other => panic!("round {round}: {other}"),
        }

        disk.set_capacity(None);
        let deadline = Instant::now() + Duration::from_secs(20);
        let retry = loop {
            let (status, body) = s.post("/api/events", &batch).await;
            if status == StatusCode::OK {
                break body;
            }
            assert!(Instant::now() < deadline, "round {round}: never recovered");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // What the first attempt applied is replayed, the rest counted now.
        assert_eq!(
            retry["verdicts"]["replayed"], applied,
            "round {round}: {retry}"
        );
        assert_eq!(
            retry["verdicts"]["counted"],
            EVENTS - applied,
            "round {round}"
        );
        let (_, live) = s.get("/api/stats").await;
        assert_eq!(counted(&live), EVENTS as u64, "round {round}");

        // A power loss now (no shutdown, no snapshot) leaves what the
        // server showed.
        let after = disk.reboot();
        drop(s);
        let (store, _) = EmbeddedStore::open(
            Durability {
                storage: Arc::new(after),
                ..durability(&disk)
            },
            settings,
        )
        .unwrap();
        let stats = hotrank::store::Store::stats(&store, T0, 24).await.unwrap();
        assert_eq!(
            stats.counted, EVENTS as u64,
            "round {round}: after a power loss"
        );
        eprintln!("round {round}: first attempt {first}, {applied} of {EVENTS} applied");
    }
    eprintln!("{partial} of {rounds} rounds stalled inside the batch");
}

/// The real disk, except that once armed, the first removal of a log
/// segment (the trim after a snapshot) waits until the test lets it go,
/// or 10 s (then `timed_out` is set).
#[derive(Debug, Default)]
struct HeldTrim {
    armed: std::sync::atomic::AtomicBool,
    entered: std::sync::atomic::AtomicBool,
    timed_out: std::sync::atomic::AtomicBool,
    release: std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

impl hotrank::store::storage::Storage for HeldTrim {
    fn create_dir_all(&self, dir: &std::path::Path) -> std::io::Result<()> {
        hotrank::store::storage::Disk.create_dir_all(dir)
    }
    fn list(&self, dir: &std::path::Path) -> std::io::Result<Vec<String>> {
        hotrank::store::storage::Disk.list(dir)
    }
    fn len(&self, path: &std::path::Path) -> std::io::Result<u64> {
        hotrank::store::storage::Disk.len(path)
    }
    fn open_read(
        &self,
        path: &std::path::Path,
    ) -> std::io::Result<Box<dyn hotrank::store::storage::ReadFile>> {
        hotrank::store::storage::Disk.open_read(path)
    }
    fn create(
        &self,
        path: &std::path::Path,
    ) -> std::io::Result<Box<dyn hotrank::store::storage::StorageFile>> {
        hotrank::store::storage::Disk.create(path)
    }
    fn open_append(
        &self,
        path: &std::path::Path,
    ) -> std::io::Result<Box<dyn hotrank::store::storage::StorageFile>> {
        hotrank::store::storage::Disk.open_append(path)
    }
    fn rename(&self, from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
        hotrank::store::storage::Disk.rename(from, to)
    }
    fn remove(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::sync::atomic::Ordering;
        let segment = path.parent().is_some_and(|p| p.ends_with("wal"));
        if segment && self.armed.swap(false, Ordering::SeqCst) {
            self.entered.store(true, Ordering::SeqCst);
            let release = self.release.lock().unwrap().take().unwrap();
            if release.recv_timeout(Duration::from_secs(10)).is_err() {
                self.timed_out.store(true, Ordering::SeqCst);
            }
        }
        hotrank::store::storage::Disk.remove(path)
    }
    fn truncate(&self, path: &std::path::Path, len: u64) -> std::io::Result<()> {
        hotrank::store::storage::Disk.truncate(path, len)
    }
    fn sync_dir(&self, dir: &std::path::Path) -> std::io::Result<()> {
        hotrank::store::storage::Disk.sync_dir(dir)
    }
    fn lock(&self, path: &std::path::Path) -> std::io::Result<hotrank::store::storage::DirLock> {
        hotrank::store::storage::Disk.lock(path)
    }
}

/// Regression (issue 12, snapshots' last phase): the log trim after a
/// snapshot (segment unlinks and a directory sync, tens of ms on a busy
/// disk) ran on the async runtime's worker, so every request that worker
/// ran waited for it. On a one-thread runtime, ingest must complete while
/// a trim is held; before the fix the held trim blocked the runtime itself.
#[tokio::test]
async fn ingest_completes_while_a_snapshot_trims_the_log() {
    use hotrank::model::{ArticleId, Event};
    use hotrank::store::Store;
    use hotrank::store::embedded::{Durability, EmbeddedStore};
    use hotrank::store::wal::FsyncPolicy;
    use std::sync::atomic::Ordering;

    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(HeldTrim::default());
    let d = Durability {
        dir: dir.path().to_path_buf(),
        fsync: FsyncPolicy::Always,
        segment_bytes: 256,
        snapshot_interval_secs: 3600,
        snapshot_every_records: 1 << 40,
        storage: storage.clone(),
    };
    let settings = hotrank::store::StoreSettings {
        visitor_limit_per_minute: 0,
        ip_limit_per_minute: 0,
        ..Default::default()
    };
    let ev = |i: u64| {
        let article = ArticleId::parse(&format!("s{}", i % 5)).unwrap();
        Event::view(article, u128::from(i) + 1, T0)
    };
    let (store, _) = EmbeddedStore::open(d, settings).unwrap();
    let store = Arc::new(store);
    for i in 0..40 {
        store.ingest(vec![ev(i)], T0).await.unwrap();
    }
    store.snapshot().await.unwrap(); // A: nothing trimmed (one snapshot kept)
    for i in 40..80 {
        store.ingest(vec![ev(i)], T0).await.unwrap();
    }
    let (release, held) = std::sync::mpsc::channel();
    *storage.release.lock().unwrap() = Some(held);
    storage.armed.store(true, Ordering::SeqCst);
    let snapshot = tokio::spawn({
        let store = Arc::clone(&store);
        async move { store.snapshot().await } // B: trims A's log
    });
    while !storage.entered.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    store.ingest(vec![ev(80)], T0).await.unwrap();
    assert!(
        !storage.timed_out.load(Ordering::SeqCst),
        "ingest waited for the held log trim"
    );
    release.send(()).unwrap();
    snapshot.await.unwrap().unwrap();
    assert_eq!(store.stats(T0, 24).await.unwrap().counted, 81);
}
