//! Curation through a real server over loopback, on the embedded store
//! and on a real redis-server: random pins, exclusions, holds and
//! decisions, with time moving, checked page by page (offsets and
//! cursors) against a brute-force oracle built from the uncurated
//! ranking (the editor's view, `/api/overview`): a held, excluded or
//! denied article is never served, a pinned one is always at its place,
//! ranks are contiguous, nothing repeats, and pages agree.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::StatusCode;
use serde_json::{Value, json};

use common::curation::{CATS, N, admin, art, cat_query, review_mode, seed};
use common::redis::RedisServer;
use common::{T0, TestServer, page_ids};
use hotrank::clock::Clock;
use hotrank::config::Config;

/// What the test believes the curation is.
#[derive(Default)]
struct Model {
    mode_on: bool,
    /// id → (position, until, category, pinned at, order)
    pins: BTreeMap<String, (usize, Option<i64>, Option<String>, i64)>,
    excludes: BTreeMap<String, Option<i64>>,
    /// id → allowed?
    decided: BTreeMap<String, bool>,
}

fn live(until: Option<i64>, now: i64) -> bool {
    until.is_none_or(|u| now < u)
}

impl Model {
    fn excluded(&self, id: &str, now: i64) -> bool {
        self.excludes.get(id).is_some_and(|u| live(*u, now))
    }
    fn denied(&self, id: &str) -> bool {
        self.mode_on && self.decided.get(id) == Some(&false)
    }
    fn shown(&self, id: &str, now: i64) -> bool {
        !self.excluded(id, now) && (!self.mode_on || self.decided.get(id) == Some(&true))
    }

    /// The whole public list of category `cat`: (id, pinned).
    fn public(&self, uncurated: &[String], cat: Option<&str>, now: i64) -> Vec<(String, bool)> {
        let mut pins: Vec<(usize, i64, &String)> = self
            .pins
            .iter()
            .filter(|(id, (_, until, c, _))| {
                live(*until, now)
                    && c.as_deref() == cat
                    && !self.excluded(id, now)
                    && !self.denied(id)
            })
            .map(|(id, (p, _, _, at))| (*p, *at, id))
            .collect();
        pins.sort();
        let pinned: BTreeSet<&String> = pins.iter().map(|p| p.2).collect();
        let mut out: Vec<(String, bool)> = uncurated
            .iter()
            .filter(|id| !pinned.contains(id) && self.shown(id, now))
            .map(|id| (id.clone(), false))
            .collect();
        // Each pin in order at its place, after any earlier pin, or last.
        let mut prev: Option<usize> = None;
        for (p, _, id) in pins {
            let at = (p - 1).max(prev.map_or(0, |x| x + 1)).min(out.len());
            out.insert(at, (id.clone(), true));
            prev = Some(at);
        }
        out
    }
}

async fn uncurated(s: &TestServer, cat: Option<&str>) -> Vec<String> {
    let (st, v) = s
        .get(&format!("/api/overview?limit=100{}", cat_query(cat)))
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    page_ids(&v).iter().map(|s| s.to_string()).collect()
}

/// Checks one page against the oracle's list.
fn check_page(page: &Value, want: &[(String, bool)], offset: usize, limit: usize, what: &str) {
    let items = page["items"].as_array().expect("items");
    let expect: Vec<&(String, bool)> = want.iter().skip(offset).take(limit).collect();
    let got: Vec<(String, bool)> = items
        .iter()
        .map(|i| {
            (
                i["articleId"].as_str().unwrap().to_string(),
                i["pinned"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(
        got,
        expect.iter().map(|x| (*x).clone()).collect::<Vec<_>>(),
        "{what}: page at {offset}+{limit}"
    );
    for (k, i) in items.iter().enumerate() {
        assert_eq!(i["rank"], json!(offset + k + 1), "{what}: ranks contiguous");
    }
}

async fn run(s: &TestServer, mode_on: bool, seed_n: u64, steps: usize) {
    seed(s).await;
    let mut unc = BTreeMap::new();
    for cat in CATS {
        let ids = uncurated(s, cat).await;
        let expect: Vec<String> = (0..N)
            .filter(|i| cat.is_none_or(|c| c == if i % 2 == 0 { "x" } else { "y" }))
            .map(art)
            .collect();
        assert_eq!(ids, expect, "the uncurated ranking is by design");
        unc.insert(cat, ids);
    }
    let mut m = Model {
        mode_on,
        ..Model::default()
    };
    let mut rng = StdRng::seed_from_u64(seed_n);
    for step in 0..steps {
        let now = s.clock.now();
        let id = art(rng.random_range(0..N));
        let until = |rng: &mut StdRng| rng.random_bool(0.5).then(|| now + rng.random_range(1..300));
        match rng.random_range(0..10) {
            0 | 1 => {
                let position = rng.random_range(1..8);
                let cat = CATS[rng.random_range(0..3)];
                let u = until(&mut rng);
                let mut query = json!({});
                if let Some(c) = cat {
                    query["category"] = json!(c);
                }
                let mut body = json!({"position": position, "query": query});
                if let Some(u) = u {
                    body["until"] = json!(u);
                }
                let (st, v) = admin(
                    s,
                    reqwest::Method::PUT,
                    &format!("/api/articles/{id}/pin"),
                    Some(body),
                )
                .await;
                assert_eq!(st, StatusCode::OK, "{v}");
                m.pins
                    .insert(id, (position, u, cat.map(str::to_string), now));
            }
            2 => {
                let (st, _) = admin(
                    s,
                    reqwest::Method::DELETE,
                    &format!("/api/articles/{id}/pin"),
                    None,
                )
                .await;
                assert_eq!(st, StatusCode::NO_CONTENT);
                m.pins.remove(&id);
            }
            3 => {
                let u = until(&mut rng);
                let mut body = json!({"reason": "test"});
                if let Some(u) = u {
                    body["until"] = json!(u);
                }
                let (st, v) = admin(
                    s,
                    reqwest::Method::PUT,
                    &format!("/api/articles/{id}/exclude"),
                    Some(body),
                )
                .await;
                assert_eq!(st, StatusCode::OK, "{v}");
                m.excludes.insert(id, u);
            }
            4 => {
                let (st, _) = admin(
                    s,
                    reqwest::Method::DELETE,
                    &format!("/api/articles/{id}/exclude"),
                    None,
                )
                .await;
                assert_eq!(st, StatusCode::NO_CONTENT);
                m.excludes.remove(&id);
            }
            5 | 6 => {
                let allow = rng.random_bool(0.7);
                let (st, v) = admin(
                    s,
                    reqwest::Method::POST,
                    &format!("/api/review/{id}"),
                    Some(json!({"decision": if allow { "allow" } else { "deny" }})),
                )
                .await;
                assert_eq!(st, StatusCode::OK, "{v}");
                m.decided.insert(id, allow);
            }
            7 => s.clock.advance(rng.random_range(0..150)),
            _ => {}
        }
        // A query after every step: offsets, then a cursor walk.
        let now = s.clock.now();
        let cat = CATS[rng.random_range(0..3)];
        let want = m.public(&unc[&cat], cat, now);
        let limit = rng.random_range(1..6);
        let offset = rng.random_range(0..12);
        let what = format!("step {step}, category {cat:?}");
        let (st, page) = s
            .get(&format!(
                "/api/hot?limit={limit}&offset={offset}{}",
                cat_query(cat)
            ))
            .await;
        assert_eq!(st, StatusCode::OK, "{page}");
        check_page(&page, &want, offset, limit, &what);
        // With every article published at once, `/api/new` lists by id:
        // the same order, so the same public list.
        let (st, page) = s
            .get(&format!(
                "/api/new?limit={limit}&offset={offset}{}",
                cat_query(cat)
            ))
            .await;
        assert_eq!(st, StatusCode::OK, "{page}");
        check_page(&page, &want, offset, limit, &format!("{what}, /api/new"));
        if mode_on {
            check_holds(s, &m, &unc[&cat], cat, now, offset + limit).await;
        }
        let (_, mut page) = s
            .get(&format!("/api/hot?limit={limit}{}", cat_query(cat)))
            .await;
        let mut at = 0;
        loop {
            check_page(&page, &want, at, limit, &format!("{what}, cursor walk"));
            at += limit;
            let Some(c) = page["cursor"].as_str() else {
                assert!(
                    at >= want.len(),
                    "{what}: no cursor at {at} of {}",
                    want.len()
                );
                break;
            };
            let (st, next) = s
                .get(&format!(
                    "/api/hot?limit={limit}&offset={at}&cursor={c}{}",
                    cat_query(cat)
                ))
                .await;
            assert_eq!(st, StatusCode::OK, "{next}");
            page = next;
        }
    }
}

/// Under `new_entries`: every never-decided article the public list would
/// have shown within `want` (were it allowed) is in the review queue,
/// with evidence.
async fn check_holds(
    s: &TestServer,
    m: &Model,
    unc: &[String],
    cat: Option<&str>,
    now: i64,
    want: usize,
) {
    let (st, v) = admin(s, reqwest::Method::GET, "/api/review?status=all", None).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let listed: BTreeMap<String, Value> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["articleId"].as_str().unwrap().to_string(), i.clone()))
        .collect();
    let mut open = Model {
        mode_on: false,
        pins: m.pins.clone(),
        excludes: m.excludes.clone(),
        decided: m.decided.clone(),
    };
    open.decided.retain(|_, allowed| *allowed);
    let would = open.public(unc, cat, now);
    for (id, pinned) in would.iter().take(want) {
        if !pinned && !m.decided.contains_key(id) {
            let e = listed
                .get(id)
                .unwrap_or_else(|| panic!("{id} would have been served: held"));
            assert_eq!(e["status"], "held", "{e}");
            assert!(e["evidence"]["rank"].as_u64().unwrap() >= 1, "{e}");
            assert!(e["evidence"]["counters"]["pv"].as_u64().unwrap() > 0, "{e}");
        }
    }
}

#[tokio::test]
async fn oracle_embedded_without_review() {
    let s = TestServer::start_with(review_mode(false)).await;
    run(&s, false, 1, 60).await;
}

#[tokio::test]
async fn oracle_embedded_new_entries() {
    let s = TestServer::start_with(review_mode(true)).await;
    run(&s, true, 2, 60).await;
}

#[tokio::test]
async fn oracle_redis_without_review() {
    let r = RedisServer::start();
    let s = TestServer::start_redis(
        Arc::new(tempfile::tempdir().unwrap()),
        &r.url(),
        review_mode(false),
    )
    .await;
    run(&s, false, 3, 60).await;
}

#[tokio::test]
async fn oracle_redis_new_entries() {
    let r = RedisServer::start();
    let s = TestServer::start_redis(
        Arc::new(tempfile::tempdir().unwrap()),
        &r.url(),
        review_mode(true),
    )
    .await;
    run(&s, true, 4, 60).await;
}

/// Under `new_entries` the public list reads the ranking as deep as it
/// takes: with only the last article allowed, it is the whole list, and
/// every article above it is held, with the rank it would have had.
#[tokio::test]
async fn new_entries_reads_as_deep_as_it_takes() {
    let s = TestServer::start_with(review_mode(true)).await;
    seed(&s).await;
    let last = art(N - 1);
    let (st, _) = admin(
        &s,
        reqwest::Method::POST,
        &format!("/api/review/{last}"),
        Some(json!({"decision": "allow"})),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let (_, page) = s.get("/api/hot?limit=1").await;
    assert_eq!(page_ids(&page), [last.as_str()]);
    assert_eq!(page["items"][0]["rank"], 1);
    assert!(page["cursor"].is_null(), "{page}");
    let (_, v) = admin(&s, reqwest::Method::GET, "/api/review", None).await;
    let held: Vec<&str> = page_ids(&v);
    // Each would have been first (nothing shown above it).
    assert_eq!(held, (0..N - 1).map(art).collect::<Vec<_>>(), "{v}");
    for i in v["items"].as_array().unwrap() {
        assert_eq!(i["evidence"]["rank"], 1, "{i}");
        assert_eq!(i["evidence"]["query"]["model"], "gravity", "{i}");
        assert_eq!(i["heldAt"], T0, "{i}");
    }
    // Deny one, allow another: the allowed one shows, the denied never.
    admin(
        &s,
        reqwest::Method::POST,
        "/api/review/a03",
        Some(json!({"decision": "deny"})),
    )
    .await;
    admin(
        &s,
        reqwest::Method::POST,
        "/api/review/a05",
        Some(json!({"decision": "allow"})),
    )
    .await;
    let (_, page) = s.get("/api/hot").await;
    assert_eq!(page_ids(&page), ["a05", last.as_str()]);
    let (_, v) = admin(&s, reqwest::Method::GET, "/api/review?status=denied", None).await;
    assert_eq!(page_ids(&v), ["a03"]);
    assert_eq!(v["items"][0]["evidence"]["rank"], 1, "evidence kept: {v}");
}

/// `until` ends a pin and an exclusion at that second of the server's
/// clock; they are also gone from the feeds and `/api/new`.
#[tokio::test]
async fn until_expires_pins_and_exclusions() {
    let s = TestServer::start().await;
    seed(&s).await;
    let put = |path: String, body: Value| {
        let s = &s;
        async move {
            let (st, v) = admin(s, reqwest::Method::PUT, &path, Some(body)).await;
            assert_eq!(st, StatusCode::OK, "{v}");
            v
        }
    };
    let v = put(
        "/api/articles/a09/pin".into(),
        json!({"position": 1, "until": T0 + 100}),
    )
    .await;
    assert_eq!(v["position"], 1);
    assert_eq!(v["pinnedAt"], T0);
    put(
        "/api/articles/a00/exclude".into(),
        json!({"reason": "spam", "until": T0 + 200}),
    )
    .await;
    assert_eq!(top3(&s).await, ["a09", "a01", "a02"]);
    let (_, p) = s.get("/api/hot?limit=1").await;
    assert_eq!(p["items"][0]["pinned"], true);
    let (_, p) = s.get("/api/new?limit=20").await;
    assert_eq!(page_ids(&p)[0], "a09", "pinned in /api/new too");
    assert!(!page_ids(&p).contains(&"a00"), "excluded from /api/new");
    let feed = s.text("/feeds/hot.json?limit=3").await;
    let feed: Value = serde_json::from_str(&feed).unwrap();
    let ids: Vec<&str> = feed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert!(
        ids[0].contains("a09") && !ids.iter().any(|i| i.contains("a00")),
        "{ids:?}"
    );
    s.clock.advance(99);
    assert_eq!(top3(&s).await, ["a09", "a01", "a02"]);
    s.clock.advance(1);
    assert_eq!(
        top3(&s).await,
        ["a01", "a02", "a03"],
        "the pin ended at until"
    );
    s.clock.advance(100);
    assert_eq!(
        top3(&s).await,
        ["a00", "a01", "a02"],
        "the exclusion ended at until"
    );
    // Still counted while excluded: the editor's view had it all along.
    let (_, o) = s.get("/api/overview?limit=1").await;
    assert_eq!(page_ids(&o), ["a00"]);
}

/// Bad input: 400 with a JSON error, and nothing changes; no token: 401;
/// an unknown article: 404.
#[tokio::test]
async fn bad_input_changes_nothing() {
    let s = TestServer::start().await;
    seed(&s).await;
    let (_, before) = s.get("/api/hot").await;
    for (method, path, body) in [
        ("PUT", "/api/articles/a01/pin", json!({"position": 0})),
        ("PUT", "/api/articles/a01/pin", json!({"position": 100000})),
        ("PUT", "/api/articles/a01/pin", json!({"position": "1"})),
        ("PUT", "/api/articles/a01/pin", json!({"position": null})),
        ("PUT", "/api/articles/a01/pin", json!({"position": 1.5})),
        ("PUT", "/api/articles/a01/pin", json!({"position": -1})),
        ("PUT", "/api/articles/a01/pin", json!({})),
        (
            "PUT",
            "/api/articles/a01/pin",
            json!({"position": 1, "until": T0}),
        ),
        (
            "PUT",
            "/api/articles/a01/pin",
            json!({"position": 1, "until": T0 + 20 * 366 * 86400}),
        ),
        (
            "PUT",
            "/api/articles/a01/pin",
            json!({"position": 1, "query": {"model": "nope"}}),
        ),
        (
            "PUT",
            "/api/articles/a01/pin",
            json!({"position": 1, "query": {"range": "5y"}}),
        ),
        (
            "PUT",
            "/api/articles/a01/pin",
            json!({"position": 1, "query": {"group": "a b"}}),
        ),
        (
            "PUT",
            "/api/articles/a01/pin",
            json!({"position": 1, "query": {"color": "red"}}),
        ),
        (
            "PUT",
            "/api/articles/a01/pin",
            json!({"position": 1, "extra": 1}),
        ),
        ("PUT", "/api/articles/a01/pin", json!([1])),
        (
            "PUT",
            "/api/articles/a01/exclude",
            json!({"reason": "x".repeat(513)}),
        ),
        ("PUT", "/api/articles/a01/exclude", json!({"until": "soon"})),
        ("PUT", "/api/articles/a01/exclude", json!({"until": T0 - 1})),
        ("POST", "/api/review/a01", json!({"decision": "maybe"})),
        ("POST", "/api/review/a01", json!({})),
        ("PUT", "/api/articles/bad%20id/pin", json!({"position": 1})),
    ] {
        let (st, v) = admin(&s, method.parse().unwrap(), path, Some(body.clone())).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{method} {path} {body}: {v}");
        assert!(v["error"]["code"].is_string(), "{v}");
    }
    let (st, v) = admin(&s, reqwest::Method::GET, "/api/review?status=maybe", None).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    for (method, path) in [
        ("PUT", "/api/articles/nope/pin"),
        ("DELETE", "/api/articles/nope/pin"),
        ("PUT", "/api/articles/nope/exclude"),
        ("DELETE", "/api/articles/nope/exclude"),
        ("POST", "/api/review/nope"),
    ] {
        let body = if path.contains("review") {
            json!({"decision": "allow"})
        } else if path.contains("pin") {
            json!({"position": 1})
        } else {
            json!({})
        };
        let (st, v) = admin(&s, method.parse().unwrap(), path, Some(body)).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{method} {path}: {v}");
        assert_eq!(v["error"]["code"], "not_found");
    }
    for path in ["/api/articles/a01/pin", "/api/articles/a01/exclude"] {
        let r = s
            .client
            .put(s.url(path))
            .json(&json!({"position": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    }
    let r = s.client.get(s.url("/api/review")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let (_, after) = s.get("/api/hot").await;
    // The same list (movement, computed in the background, may differ).
    assert_eq!(page_ids(&before), page_ids(&after), "nothing changed");
    let (_, v) = admin(&s, reqwest::Method::GET, "/api/review?status=all", None).await;
    assert_eq!(v["items"], json!([]));
    assert!(
        !s.dir.path().join("curation.json").exists(),
        "nothing written"
    );
}

/// `[review] mode = "suspicious"` is refused at start-up, saying why.
#[test]
fn suspicious_mode_is_refused() {
    let c: Config = toml::from_str("[review]\nmode = \"suspicious\"\n").unwrap();
    let e = c.validate().unwrap_err();
    assert!(e.contains("not available yet"), "{e}");
}

/// Two nodes on one Redis agree: a pin made on one shows on the other
/// within the documented cache bound (1 s).
#[tokio::test]
async fn redis_nodes_agree() {
    let r = RedisServer::start();
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let a = TestServer::start_redis(dir.clone(), &r.url(), |_| {}).await;
    let b = TestServer::start_redis(dir, &r.url(), |_| {}).await;
    seed(&a).await;
    let (_, p) = b.get("/api/hot?limit=1").await;
    assert_eq!(page_ids(&p), ["a00"]);
    let (st, _) = admin(
        &a,
        reqwest::Method::PUT,
        "/api/articles/a07/pin",
        Some(json!({"position": 1})),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let (_, p) = a.get("/api/hot?limit=1").await;
    assert_eq!(page_ids(&p), ["a07"], "at once on the node that pinned");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let (_, p) = b.get("/api/hot?limit=1").await;
        if page_ids(&p) == ["a07"] {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "node b never saw the pin"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

async fn top3(s: &TestServer) -> Vec<String> {
    let (_, p) = s.get("/api/hot?limit=3").await;
    page_ids(&p).iter().map(|x| x.to_string()).collect()
}

/// `/api/new` and `/api/stream` are curated too: on `/api/new` a pin is at
/// its place on the first page and nowhere after it, cursor pages leave
/// out what is hidden and repeat nothing; a live stream's list carries the
/// pin and leaves out the excluded.
#[tokio::test]
async fn new_and_stream_are_curated() {
    let s = TestServer::start_with(|c| c.feeds.stream_poll_ms = 50).await;
    seed(&s).await;
    let (_, all) = s.get("/api/new?limit=100").await;
    let all: Vec<String> = page_ids(&all).iter().map(|x| x.to_string()).collect();
    assert_eq!(all.len(), N);
    let (st, _) = admin(
        &s,
        reqwest::Method::PUT,
        "/api/articles/a09/pin",
        Some(json!({"position": 1})),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    for id in ["a00", "a01"] {
        let (st, _) = admin(
            &s,
            reqwest::Method::PUT,
            &format!("/api/articles/{id}/exclude"),
            Some(json!({})),
        )
        .await;
        assert_eq!(st, StatusCode::OK);
    }
    let mut want = vec!["a09".to_string()];
    want.extend(
        all.iter()
            .filter(|id| !["a00", "a01", "a09"].contains(&id.as_str()))
            .cloned(),
    );
    let (_, mut page) = s.get("/api/new?limit=4").await;
    assert_eq!(page["items"][0]["pinned"], true, "{page}");
    let mut seen: Vec<String> = Vec::new();
    loop {
        seen.extend(page_ids(&page).iter().map(|x| x.to_string()));
        let Some(c) = page["cursor"].as_str() else {
            break;
        };
        page = s.get(&format!("/api/new?limit=4&cursor={c}")).await.1;
    }
    assert_eq!(seen, want);

    let mut r = s
        .client
        .get(s.url("/api/stream?top=3"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let mut buf = String::new();
    let data = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let chunk = r.chunk().await.unwrap().expect("the stream goes on");
            buf.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(at) = buf.find("event: ranking\n")
                && let Some(line) = buf[at..].lines().find(|l| l.starts_with("data: "))
                && buf[at..].contains("\n\n")
            {
                return serde_json::from_str::<Value>(&line["data: ".len()..]).unwrap();
            }
        }
    })
    .await
    .expect("a ranking event");
    assert_eq!(page_ids(&data), ["a09", "a02", "a03"], "{data}");
    assert_eq!(data["items"][0]["pinned"], true);
}

/// The embedded store's curation is in its data dir: a restarted server
/// serves the same pins, exclusions and decisions.
#[tokio::test]
async fn embedded_curation_survives_a_restart() {
    let s = TestServer::start_with(review_mode(true)).await;
    seed(&s).await;
    let put = |path: String, body: Value| {
        let s = &s;
        async move { admin(s, reqwest::Method::PUT, &path, Some(body)).await.0 }
    };
    assert_eq!(
        put("/api/articles/a05/pin".into(), json!({"position": 1})).await,
        StatusCode::OK
    );
    assert_eq!(
        put("/api/articles/a01/exclude".into(), json!({})).await,
        StatusCode::OK
    );
    for (id, d) in [("a01", "allow"), ("a02", "allow"), ("a03", "deny")] {
        let (st, _) = admin(
            &s,
            reqwest::Method::POST,
            &format!("/api/review/{id}"),
            Some(json!({"decision": d})),
        )
        .await;
        assert_eq!(st, StatusCode::OK);
    }
    let (_, before) = s.get("/api/hot").await;
    assert_eq!(page_ids(&before), ["a05", "a02"]);
    let (_, held_before) = admin(&s, reqwest::Method::GET, "/api/review?status=all", None).await;
    let dir = s.dir.clone();
    let mut config = common::test_config(dir.path());
    review_mode(true)(&mut config);
    s.stop().await;
    let s = TestServer::start_in(dir, config, T0).await;
    s.until_ready(10, "the restarted store").await;
    let (_, after) = s.get("/api/hot").await;
    assert_eq!(page_ids(&after), page_ids(&before));
    assert_eq!(after["items"][0]["pinned"], true);
    let (_, held_after) = admin(&s, reqwest::Method::GET, "/api/review?status=all", None).await;
    assert_eq!(held_after, held_before);
}

/// Movement on a curated list compares public ranks: the earlier ranking
/// as the same curation shows it. Excluding the leader moves no one else
/// up (each was already one place higher in the public list then), and a
/// pinned article at its place is where it was.
#[tokio::test]
async fn movement_compares_public_ranks() {
    let s = TestServer::start().await;
    seed(&s).await;
    let (st, v) = admin(
        &s,
        reqwest::Method::PUT,
        "/api/articles/a00/exclude",
        Some(json!({"reason": "spam"})),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = admin(
        &s,
        reqwest::Method::PUT,
        "/api/articles/a09/pin",
        Some(json!({"position": 2})),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    // Two hours on: the earlier ranking is the one at the hour mark after
    // the views.
    s.clock.advance(7200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let page = loop {
        let (_, p) = s.get("/api/hot?limit=4").await;
        if !p["movementSince"].is_null() {
            break p;
        }
        assert!(std::time::Instant::now() < deadline, "no movement: {p}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let got: Vec<(String, Value, Value)> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|it| {
            (
                it["articleId"].as_str().unwrap().to_string(),
                it["previousRank"].clone(),
                it["movement"].clone(),
            )
        })
        .collect();
    let want: Vec<(String, Value, Value)> = [("a01", 1), ("a09", 2), ("a02", 3), ("a03", 4)]
        .into_iter()
        .map(|(a, r)| (a.to_string(), json!(r), json!("same")))
        .collect();
    assert_eq!(got, want, "{page}");
}
