//! Hostile clients against a real server over loopback: slowloris, idle
//! keep-alive, more connections than the cap, oversized heads, and floods
//! of posts, votes and queries from one address. Each must be refused with
//! the documented answer while the server stays reachable, and nothing a
//! refused request sent may be stored.
//!
//! Times are measured and printed (`--nocapture`) for the record; the
//! assertions only compare them with the configured timeouts as ratios.

mod common;

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use common::{ADMIN, INGEST, TestServer, expect_error};
use hotrank::config::Access;

fn addr(s: &TestServer) -> String {
    s.base.trim_start_matches("http://").to_string()
}

/// Reads until the server closes the connection (EOF or reset), or until
/// `give_up`; returns how long the connection lived from `since`, `None` if
/// it was still open at `give_up`.
async fn wait_closed(conn: &mut TcpStream, since: Instant, give_up: Duration) -> Option<Duration> {
    let mut buf = [0u8; 4096];
    loop {
        let left = give_up.checked_sub(since.elapsed())?;
        match tokio::time::timeout(left, conn.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(since.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn slowloris_is_closed_after_the_header_timeout() {
    let timeout = Duration::from_secs(1);
    let s = TestServer::start_with(|c| c.http.header_timeout_secs = 1).await;
    let started = Instant::now();
    let mut conn = TcpStream::connect(addr(&s)).await.unwrap();
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // Dribble one header line every 100 ms, for up to 10x the timeout.
    let mut lived = None;
    for i in 0..100 {
        if conn
            .write_all(format!("X-Slow-{i}: a\r\n").as_bytes())
            .await
            .is_err()
        {
            lived = Some(started.elapsed());
            break;
        }
        let mut buf = [0u8; 1024];
        match tokio::time::timeout(Duration::from_millis(100), conn.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                lived = Some(started.elapsed());
                break;
            }
            Ok(Ok(_)) => {}
            Err(_) => {}
        }
    }
    let lived = lived.expect("a slowloris connection must be closed by the server");
    eprintln!("slowloris connection lived {lived:?} (header timeout {timeout:?})");
    assert!(
        lived < 5 * timeout,
        "closed only after {lived:?}, more than 5x the header timeout"
    );
    assert!(lived >= timeout / 2, "closed before the timeout: {lived:?}");
    // The server itself is fine.
    assert_eq!(s.get("/healthz").await.0, StatusCode::OK);
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    let timeout = Duration::from_secs(1);
    let s = TestServer::start_with(|c| c.http.header_timeout_secs = 1).await;
    let mut conn = TcpStream::connect(addr(&s)).await.unwrap();
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = conn.read(&mut buf).await.unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // The answer kept the connection open; now it idles.
    let idle_from = Instant::now();
    let lived = wait_closed(&mut conn, idle_from, 10 * timeout)
        .await
        .expect("an idle keep-alive connection must be closed by the server");
    eprintln!("idle keep-alive connection lived {lived:?} (timeout {timeout:?})");
    assert!(lived < 5 * timeout, "{lived:?}");
}

/// At the cap, a new connection takes the place of the one idle longest:
/// a well-behaved client gets through at once, and the held connections
/// give way oldest first.
#[tokio::test]
async fn at_the_cap_the_connection_idle_longest_gives_way() {
    let cap = 16;
    let s = TestServer::start_with(|c| {
        c.http.max_connections = cap;
        c.http.header_timeout_secs = 30;
    })
    .await;
    let shed_before = metric(&s, "hotrank_http_connections_shed_total").await;
    // Hold `cap` connections open, sending nothing, one after the other.
    let mut held = Vec::new();
    for _ in 0..cap {
        held.push(TcpStream::connect(addr(&s)).await.unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let the server accept them all.
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A fresh client is answered at once, long before the header timeout.
    let once = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let r = once.get(s.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // The oldest held connection made room; the newest are still open.
    let t = Instant::now();
    let lived = wait_closed(&mut held[0], t, Duration::from_secs(10)).await;
    assert!(lived.is_some(), "the connection idle longest was closed");
    let mut b = [0u8; 1];
    let newest = held.last_mut().unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(50), newest.read(&mut b))
            .await
            .is_err(),
        "the newest held connection is still open"
    );
    drop(held);
    let shed_after = metric(&s, "hotrank_http_connections_shed_total").await;
    assert!(shed_after > shed_before, "sheds are counted");
}

/// 2,000 connections that send nothing, against the real binary under a
/// descriptor limit of 1024: with the default `http.max_connections`
/// (512) and with one far above the limit. Every fresh client's `/healthz`
/// is answered (the connections idle longest give way), and the server
/// never runs out of descriptors (the cap stays under the limit).
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_past_the_descriptor_limit_leave_room_for_fresh_clients() {
    const IDLE: usize = 2000;
    // This process holds the 2,000 sockets.
    if !raise_own_descriptor_limit(IDLE as u64 + 512) {
        eprintln!("SKIPPED: this process cannot hold {IDLE} sockets");
        return;
    }
    for max_connections in [512, 100_000] {
        idle_flood(IDLE, max_connections).await;
    }
}

#[cfg(target_os = "linux")]
async fn idle_flood(idle: usize, max_connections: usize) {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    const LIMIT: u64 = 1024;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hotrank.toml");
    std::fs::write(
        &config,
        format!("[http]\nmax_connections = {max_connections}\nheader_timeout_secs = 120\n"),
    )
    .unwrap();
    let port = common::redis::free_port();
    let log = std::fs::File::create(dir.path().join("serve.log")).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hotrank"));
    cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("HOTRANK_ADMIN_TOKEN", ADMIN)
        .env("RUST_LOG", "warn,hotrank::server=info")
        .stdout(log)
        .stderr(Stdio::null());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs here.
    unsafe {
        cmd.pre_exec(|| {
            let r = libc::rlimit {
                rlim_cur: LIMIT,
                rlim_max: LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = KillOnDrop(cmd.spawn().expect("spawn hotrank serve"));
    let base = format!("http://127.0.0.1:{port}");
    let fresh = || {
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !fresh()
        .get(format!("{base}/healthz"))
        .send()
        .await
        .is_ok_and(|r| r.status() == StatusCode::OK)
    {
        assert!(Instant::now() < deadline, "the server did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let addr = format!("127.0.0.1:{port}");
    let mut held = Vec::new();
    let mut failed = 0;
    for _ in 0..idle {
        match tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(&addr)).await {
            Ok(Ok(c)) => held.push(c),
            _ => failed += 1,
        }
    }
    let mut answered = 0;
    let tries = 40;
    for _ in 0..tries {
        if let Ok(r) = fresh().get(format!("{base}/healthz")).send().await
            && r.status() == StatusCode::OK
        {
            answered += 1;
        }
    }
    let fds = std::fs::read_dir(format!("/proc/{}/fd", child.0.id()))
        .map(|d| d.count())
        .unwrap_or(0);
    eprintln!(
        "max_connections {max_connections}: {} of {idle} idle connections opened ({failed} failed); fresh /healthz answered {answered}/{tries}; the server holds {fds} descriptors (limit {LIMIT})",
        held.len()
    );
    assert_eq!(answered, tries, "every fresh client is answered");
    assert!((fds as u64) < LIMIT, "{fds} descriptors open");
    drop(held);
    drop(child);
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(
        log.contains("closing the connections idle longest"),
        "shedding is logged:\n{log}"
    );
    assert!(
        !log.contains("Too many open files"),
        "the server ran out of descriptors:\n{log}"
    );
}

/// Raises this process's soft descriptor limit to at least `want` if the
/// hard limit allows; whether it is now at least `want`.
#[cfg(target_os = "linux")]
fn raise_own_descriptor_limit(want: u64) -> bool {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return false;
        }
        if r.rlim_cur >= want {
            return true;
        }
        if r.rlim_max < want {
            return false;
        }
        r.rlim_cur = want;
        libc::setrlimit(libc::RLIMIT_NOFILE, &r) == 0
    }
}

/// A child process, killed when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The value of an unlabelled counter in `/metrics` (0 if absent), read
/// on a connection of its own that is closed afterwards.
async fn metric(s: &TestServer, name: &str) -> f64 {
    let once = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let text = once
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn oversized_and_malformed_heads_get_json_errors() {
    let s = TestServer::start().await;
    let long = format!("/api/hot?category={}", "a".repeat(9000));
    let r = s.client.get(s.url(&long)).send().await.unwrap();
    expect_error(r, StatusCode::URI_TOO_LONG, "uri_too_long").await;
    // Refused before routing (in the accept loop), and still counted. Only
    // this test sends a 414, so the series exists only if it was counted.
    let metrics = s.text("/metrics").await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("hotrank_http_requests_total{")
                && l.contains(r#"route="unmatched""#)
                && l.contains(r#"status="414""#)),
        "{metrics}"
    );
    // Over http.max_headers (64), within the parser's own 100 lines and
    // past them: the JSON answer either way (past them hyper answers, and
    // its bare answer is replaced).
    let with_headers = |n: usize| {
        let mut req = s.client.get(s.url("/api/hot"));
        for i in 0..n {
            req = req.header(format!("x-h{i}"), "v");
        }
        req
    };
    for lines in [90, 150, 200] {
        expect_error(
            with_headers(lines).send().await.unwrap(),
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
        )
        .await;
    }
    // A header within the parser's buffer, and past it (64 KiB, 1 MiB).
    for bytes in [20_000, 64 << 10, 1 << 20] {
        let r = s
            .client
            .get(s.url("/api/hot"))
            .header("x-big", "b".repeat(bytes))
            .send()
            .await
            .unwrap();
        expect_error(
            r,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
        )
        .await;
    }
    // 10,000 query parameters: a target past the parser's buffer (and
    // past what reqwest sends: written by hand).
    let many: Vec<String> = (0..10_000).map(|i| format!("p{i}=v")).collect();
    let head = format!(
        "GET /api/hot?{} HTTP/1.1\r\nHost: x\r\n\r\n",
        many.join("&")
    );
    let (status, body) = raw_answer(&s, head.as_bytes()).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (414, &json!("uri_too_long"))
    );
    // A head that is not HTTP at all.
    let (status, body) = raw_answer(&s, b"NOT\x01HTTP /\r\n\r\n").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("malformed_request"))
    );
    // Multi-byte text in a range is a 400, not a dropped connection.
    let r = s
        .client
        .get(s.url("/api/hot?range=%C3%A9"))
        .send()
        .await
        .unwrap();
    expect_error(r, StatusCode::BAD_REQUEST, "invalid_parameter").await;
    assert_eq!(s.get("/healthz").await.0, StatusCode::OK);
}

/// Writes `request` on a connection of its own; returns the answer's
/// status and JSON body (`Null` if the body is not JSON).
async fn raw_answer(s: &TestServer, request: &[u8]) -> (u16, Value) {
    let mut conn = TcpStream::connect(addr(s)).await.unwrap();
    conn.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    let status = answer
        .strip_prefix("HTTP/1.1 ")
        .and_then(|a| a.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_slow_body_is_cut_off_with_408() {
    let s = TestServer::start_with(|c| c.http.body_timeout_secs = 1).await;
    let mut conn = TcpStream::connect(addr(&s)).await.unwrap();
    conn.write_all(
        b"POST /api/views HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"articleId\":",
    )
    .await
    .unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    eprintln!("slow body answered after {:?}", started.elapsed());
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("\"request_timeout\""), "{text}");
}

/// Sends `n` requests built by `make(i)` with 16 in flight; returns the
/// count of each status and one 429 answer.
async fn flood(
    s: &TestServer,
    n: usize,
    make: impl Fn(&reqwest::Client, usize) -> reqwest::RequestBuilder,
) -> (
    std::collections::BTreeMap<u16, usize>,
    Option<(Option<String>, Value)>,
) {
    let mut counts = std::collections::BTreeMap::new();
    let mut sample = None;
    let mut set = JoinSet::new();
    let mut next = 0;
    while next < n || !set.is_empty() {
        while next < n && set.len() < 16 {
            let req = make(&s.client, next);
            set.spawn(async move {
                let r = req.send().await.expect("request");
                let status = r.status().as_u16();
                let retry = r
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                let body: Value = r.json().await.unwrap_or(Value::Null);
                (status, retry, body)
            });
            next += 1;
        }
        let (status, retry, body) = set.join_next().await.unwrap().unwrap();
        *counts.entry(status).or_default() += 1;
        if status == 429 && sample.is_none() {
            sample = Some((retry, body));
        }
    }
    (counts, sample)
}

async fn articles(s: &TestServer) -> u64 {
    s.get("/api/stats").await.1["articles"].as_u64().unwrap()
}

fn assert_429(sample: Option<(Option<String>, Value)>) {
    let (retry, body) = sample.expect("some requests were refused");
    let secs: u64 = retry.expect("Retry-After").parse().unwrap();
    assert!((1..=60).contains(&secs), "Retry-After {secs}");
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
}

#[tokio::test]
async fn a_posting_flood_from_one_ip_is_refused_past_its_budget() {
    let s = TestServer::start_with(|c| c.posting = Access::Open).await;
    let budget = hotrank::config::LimitsConfig::default().posts_per_minute_per_ip as usize;
    let started = Instant::now();
    let (counts, sample) = flood(&s, 30_000, |c, i| {
        c.post(s.url("/api/articles"))
            .json(&json!({"title": format!("spam {i}"), "poster": format!("user{i}")}))
    })
    .await;
    eprintln!(
        "30000 anonymous posts from one IP in {:?}: {counts:?}",
        started.elapsed()
    );
    assert_eq!(counts.get(&201), Some(&budget), "{counts:?}");
    assert_eq!(counts.get(&429), Some(&(30_000 - budget)), "{counts:?}");
    assert_429(sample);
    assert_eq!(
        articles(&s).await,
        budget as u64,
        "stored articles stay bounded"
    );
    // A minute later the budget is back.
    s.clock.advance(60);
    let (status, _) = s
        .post("/api/articles", &json!({"title": "later", "poster": "p"}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test]
async fn posting_and_voting_need_a_token_by_default() {
    let s = TestServer::start().await;
    let (counts, _) = flood(&s, 200, |c, i| {
        c.post(s.url("/api/articles"))
            .json(&json!({"title": "x", "poster": format!("u{i}")}))
    })
    .await;
    assert_eq!(counts.get(&401), Some(&200), "{counts:?}");
    assert_eq!(articles(&s).await, 0);
    // The site's backend posts and votes for its users with the ingest
    // token; each user has a budget of their own, the backend's IP none.
    let per_user = hotrank::config::LimitsConfig::default().posts_per_minute_per_user as usize;
    let (counts, sample) = flood(&s, 3 * per_user, |c, _| {
        c.post(s.url("/api/articles"))
            .bearer_auth(INGEST)
            .json(&json!({"title": "x", "poster": "alice"}))
    })
    .await;
    assert_eq!(counts.get(&201), Some(&per_user), "{counts:?}");
    assert_429(sample);
    let (counts, _) = flood(&s, 50, |c, i| {
        c.post(s.url("/api/articles"))
            .bearer_auth(ADMIN)
            .json(&json!({"title": "x", "poster": format!("writer{i}")}))
    })
    .await;
    assert_eq!(counts.get(&201), Some(&50), "{counts:?}");
    let r = s
        .client
        .post(s.url("/api/articles/1/vote"))
        .json(&json!({"userId": "u"}))
        .send()
        .await
        .unwrap();
    expect_error(r, StatusCode::UNAUTHORIZED, "unauthorized").await;
    let r = s
        .client
        .post(s.url("/api/articles/1/vote"))
        .bearer_auth(INGEST)
        .json(&json!({"userId": "u"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_vote_flood_with_distinct_users_is_refused_past_the_ip_budget() {
    let s = TestServer::start_with(|c| {
        c.voting = Access::Open;
        c.posting = Access::Open;
    })
    .await;
    let (status, posted) = s
        .post("/api/articles", &json!({"title": "target", "poster": "op"}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let id = posted["articleId"].as_str().unwrap().to_string();
    let ups_before = posted["ups"].as_u64().unwrap();
    let budget = hotrank::config::LimitsConfig::default().votes_per_minute_per_ip as usize;
    let path = format!("/api/articles/{id}/vote");
    let (counts, sample) = flood(&s, 5_000, |c, i| {
        c.post(s.url(&path))
            .json(&json!({"userId": format!("sock{i}")}))
    })
    .await;
    eprintln!("5000 votes with distinct userIds from one IP: {counts:?}");
    assert_eq!(counts.get(&200), Some(&budget), "{counts:?}");
    assert_eq!(counts.get(&429), Some(&(5_000 - budget)), "{counts:?}");
    assert_429(sample);
    let (_, art) = s.get(&format!("/api/articles/{id}")).await;
    assert_eq!(
        art["ups"].as_u64(),
        Some(ups_before + budget as u64),
        "{art}"
    );
}

#[tokio::test]
async fn queries_over_the_ip_budget_get_429_with_retry_after() {
    let s = TestServer::start_with(|c| c.limits.queries_per_minute_per_ip = 20).await;
    let (counts, sample) = flood(&s, 50, |c, i| {
        let path = ["/api/hot", "/api/new", "/api/stats", "/api/articles/x"][i % 4];
        c.get(s.url(path))
    })
    .await;
    assert_eq!(counts.get(&429), Some(&30), "{counts:?}");
    assert_429(sample);
    // Admin endpoints share the budget; a wrong token is no way around it.
    let r = s
        .client
        .put(s.url("/api/articles/x"))
        .bearer_auth("wrong-token-guess")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    expect_error(r, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    // The operator's own calls, with the token, are not counted.
    let r = s
        .client
        .get(s.url("/api/hot"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // Ingest is not a query: it still answers 202 with a verdict.
    assert_eq!(s.view("a", "v").await, "counted");
    s.clock.advance(61);
    assert_eq!(s.get("/api/hot").await.0, StatusCode::OK);
}

/// Behind a trusted proxy that writes entries with a port (`ip:port`,
/// `[v6]:port`), each reader is budgeted by their own address: the port
/// is stripped, and an address the reader forged to the left is not
/// believed.
#[tokio::test]
async fn forwarded_for_entries_with_ports_budget_each_reader() {
    let s = TestServer::start_with(|c| {
        c.trusted_proxies = vec!["127.0.0.1".into()];
        c.limits.queries_per_minute_per_ip = 5;
    })
    .await;
    for proxy_wrote in ["203.0.113.7:5555", "[2001:db8::7]:443"] {
        // A new forged left-hand entry on every request.
        let (counts, sample) = flood(&s, 20, |c, i| {
            c.get(s.url("/api/hot"))
                .header("x-forwarded-for", format!("198.51.{i}.1, {proxy_wrote}"))
        })
        .await;
        eprintln!("20 queries through the proxy as {proxy_wrote}: {counts:?}");
        assert_eq!(counts.get(&200), Some(&5), "{proxy_wrote}: {counts:?}");
        assert_eq!(counts.get(&429), Some(&15), "{proxy_wrote}: {counts:?}");
        assert_429(sample);
    }
    // Four readers who send no header of their own: a budget each, not
    // one shared with everyone behind the proxy.
    let (counts, _) = flood(&s, 20, |c, i| {
        c.get(s.url("/api/hot"))
            .header("x-forwarded-for", format!("192.0.2.{}:40000", i % 4 + 1))
    })
    .await;
    assert_eq!(counts.get(&200), Some(&20), "{counts:?}");
}
