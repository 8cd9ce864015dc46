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

use common::redis::RedisServer;
use common::{ADMIN, T0, TestServer, page_ids};
use hotrank::clock::Clock;
use hotrank::config::{Config, ReviewMode};

const N: usize = 16;
const CATS: [Option<&str>; 3] = [None, Some("x"), Some("y")];

fn art(i: usize) -> String {
    format!("a{i:02}")
}

/// `N` articles, categories `x` (even) and `y` (odd), article `i` with
/// `N + 4 - i` views: the uncurated order is by `i`.
async fn seed(s: &TestServer) {
    for i in 0..N {
        let cat = if i % 2 == 0 { "x" } else { "y" };
        let (st, b) = s
            .admin_put(
                &format!("/api/articles/{}", art(i)),
                &json!({"title": format!("Article {i}"), "category": cat, "publishedAt": T0 - 3600}),
            )
            .await;
        assert!(st.is_success(), "{st} {b}");
    }
    let events: Vec<Value> = (0..N)
        .flat_map(|i| {
            (0..N + 4 - i).map(move |v| {
                json!({"type": "view", "articleId": art(i), "visitorId": format!("v{i}-{v}")})
            })
        })
        .collect();
    let (st, b) = s.post("/api/events", &json!({ "events": events })).await;
    assert_eq!(st, StatusCode::OK, "{b}");
}

async fn admin(
    s: &TestServer,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut r = s.client.request(method, s.url(path)).bearer_auth(ADMIN);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.expect("request");
    let st = resp.status();
    (st, resp.json().await.unwrap_or(Value::Null))
}

fn cat_query(cat: Option<&str>) -> String {
    cat.map_or(String::new(), |c| format!("&category={c}"))
}

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

fn review_mode(on: bool) -> impl FnOnce(&mut Config) {
    move |c: &mut Config| {
        if on {
            c.review.mode = ReviewMode::NewEntries;
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
