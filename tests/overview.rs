//! `GET /api/overview` and `GET /api/compare` over real HTTP, with a
//! manual clock: totals against the hot list and the stats, the hourly
//! series against the articles' own hourly rows, rank movement across an
//! hour, and the comparison against the two rankings it compares. The
//! overview runs on both stores (it uses only the Store trait).

mod common;

use std::sync::Arc;

use hotrank::clock::Clock;

use reqwest::StatusCode;
use serde_json::{Value, json};

use common::redis::RedisServer;
use common::{T0, TestServer};

/// Articles a0..a5 with traffic over three hours: a(i) gets i+1 readers
/// an hour, so a5 leads.
async fn seeded() -> TestServer {
    seed(TestServer::start().await).await
}

async fn seed(server: TestServer) -> TestServer {
    for i in 0..6 {
        let (s, b) = server
            .admin_put(
                &format!("/api/articles/a{i}"),
                &json!({"title": format!("Article {i}"), "category": "news", "publishedAt": T0 - 7200}),
            )
            .await;
        assert!(s.is_success(), "{b}");
    }
    for hour in 0..3 {
        for i in 0..6 {
            for v in 0..=i {
                server.view(&format!("a{i}"), &format!("h{hour}v{v}")).await;
            }
        }
        if hour < 2 {
            server.clock.advance(3600);
        }
    }
    // One duplicate: quarantined.
    assert_eq!(server.view("a0", "h2v0").await, "duplicate");
    server
}

fn ids(items: &Value) -> Vec<&str> {
    items
        .as_array()
        .expect("items")
        .iter()
        .map(|it| it["articleId"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn overview_totals_series_and_trends() {
    totals_series_and_trends(seeded().await).await;
}

#[tokio::test]
async fn overview_on_redis() {
    let redis = RedisServer::start();
    let dir = Arc::new(tempfile::tempdir().expect("temp dir"));
    let server = TestServer::start_redis(dir, &redis.url(), |_| {}).await;
    totals_series_and_trends(seed(server).await).await;
}

async fn totals_series_and_trends(server: TestServer) {
    let (s, o) = server.get("/api/overview?range=24h&limit=3").await;
    assert_eq!(s, StatusCode::OK, "{o}");
    let (_, hot) = server.get("/api/hot?range=24h&limit=100").await;
    assert_eq!(ids(&o["items"]), ids(&hot["items"])[..3].to_vec());
    // Totals: every ranked article's counters in range.
    let pv: u64 = (1..=6).map(|n| n * 3).sum();
    assert_eq!(o["totals"]["pv"], pv);
    // uvSum is the sum of the listed articles' own UV estimates. Every
    // reader is new each hour, so each article's exact UV is its PV; the
    // sketches may merge two of the 18 readers (HyperLogLog, keyed by this
    // server's random identity key: a collision in about 1 run in 100), so
    // compare with what the list itself says and bound the estimates.
    let items = hot["items"].as_array().unwrap();
    let uvs: Vec<u64> = items.iter().map(|it| it["uv"].as_u64().unwrap()).collect();
    assert_eq!(o["totals"]["uvSum"], uvs.iter().sum::<u64>());
    for it in items {
        let (pv, uv) = (it["pv"].as_u64().unwrap(), it["uv"].as_u64().unwrap());
        assert!(uv <= pv && uv + 1 >= pv, "{it}");
    }
    assert_eq!(o["totals"]["counted"], pv);
    assert_eq!(o["totals"]["articles"], 6);
    assert_eq!(o["totals"]["complete"], true);
    assert_eq!(o["totals"]["quarantined"]["duplicate"], 1);
    assert_eq!(o["totals"]["quarantinedTotal"], 1);
    // The series: 24 hourly points, the last three carrying the traffic.
    let points = o["series"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 24);
    assert_eq!(o["series"]["hours"], 24);
    let last = points.last().unwrap();
    assert_eq!(last["hour"], (T0 + 7200) / 3600 * 3600);
    let per_hour: Vec<u64> = points.iter().map(|p| p["pv"].as_u64().unwrap()).collect();
    assert_eq!(&per_hour[21..], &[21, 21, 21]);
    assert_eq!(per_hour.iter().sum::<u64>(), pv);
    assert_eq!(last["quarantined"], 1);
    // Each trend is the article's own hourly PV.
    let top = &o["items"][0];
    assert_eq!(top["articleId"], "a5");
    let (_, hourly) = server.get("/api/articles/a5/hourly?hours=24").await;
    let want: Vec<u64> = hourly["hours"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["pv"].as_u64().unwrap())
        .collect();
    assert_eq!(top["trend"], json!(want));
    // Movement against the ranking at 22:00 (the hour mark at or before
    // an hour ago, from the buckets up to 21:59:59): the same order.
    assert_eq!(o["movementSince"], (T0 + 3600) / 3600 * 3600);
    assert_eq!(top["movement"], "same");
    assert_eq!(top["previousRank"], 1);

    // The range bounds the totals: the last hour only.
    let (_, o1) = server.get("/api/overview?range=1h").await;
    assert_eq!(o1["totals"]["pv"], 21);
    assert_eq!(o1["series"]["points"].as_array().unwrap().len(), 1);
}

/// Movement compares with the ranking as it stood at the hour mark at or
/// before an hour ago, computed from the hourly buckets: no earlier
/// request is needed, and every node (or a restarted one) says the same.
#[tokio::test]
async fn overview_movement_since_an_hour_ago() {
    movement_since_an_hour_ago(seeded().await).await;
}

#[tokio::test]
async fn overview_movement_on_redis() {
    let redis = RedisServer::start();
    let dir = Arc::new(tempfile::tempdir().expect("temp dir"));
    let server = TestServer::start_redis(dir, &redis.url(), |_| {}).await;
    movement_since_an_hour_ago(seed(server).await).await;
}

async fn movement_since_an_hour_ago(server: TestServer) {
    server.clock.advance(3600);
    // a0 (last) jumps to the top; n1 is new.
    for v in 0..40 {
        server.view("a0", &format!("late{v}")).await;
    }
    let (s, b) = server
        .admin_put(
            "/api/articles/n1",
            &json!({"title": "New one", "publishedAt": T0 + 3 * 3600}),
        )
        .await;
    assert!(s.is_success(), "{b}");
    for v in 0..30 {
        server.view("n1", &format!("n{v}")).await;
    }
    let (_, after) = server.get("/api/overview?range=6h&limit=10").await;
    // At 00:20: the ranking at 23:00 (scored at 22:59:59 from the buckets
    // of 21:00 and 22:00), where a0 was last and a5 first.
    let mark = (T0 + 7200) / 3600 * 3600;
    assert_eq!(after["movementSince"], mark);
    let by_id = |id: &str| {
        after["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|it| it["articleId"] == id)
            .unwrap_or_else(|| panic!("{id} in {after}"))
            .clone()
    };
    let a0 = by_id("a0");
    assert_eq!(a0["movement"], "up", "{a0}");
    assert_eq!(a0["previousRank"], 6);
    assert_eq!(by_id("n1")["movement"], "new");
    assert_eq!(by_id("n1")["previousRank"], Value::Null);
    let a5 = by_id("a5");
    assert_eq!(a5["movement"], "down", "{a5}");
    assert_eq!(a5["previousRank"], 1);
    // /api/hot says the same (once its baseline is computed: it never
    // waits for it).
    let hot = loop {
        let (_, hot) = server.get("/api/hot?range=6h&limit=10").await;
        if hot["movementSince"] != Value::Null {
            break hot;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(hot["movementSince"], mark);
    for it in hot["items"].as_array().unwrap() {
        let o = after["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["articleId"] == it["articleId"])
            .unwrap();
        assert_eq!(it["movement"], o["movement"], "{it}");
        assert_eq!(it["previousRank"], o["previousRank"], "{it}");
    }
    // Another filter is another ranking: n1 has no category.
    let (_, cat) = server
        .get("/api/overview?range=6h&limit=10&category=news")
        .await;
    assert_eq!(cat["movementSince"], mark);
    assert!(!ids(&cat["items"]).contains(&"n1"));
    assert_eq!(cat["items"][0]["articleId"], "a0");
    assert_eq!(cat["items"][0]["previousRank"], 6);
    // A ranking buckets cannot take back in time has no movement.
    let (_, all) = server.get("/api/overview?range=all&limit=10").await;
    assert_eq!(all["movementSince"], Value::Null);
    assert_eq!(all["items"][0]["movement"], Value::Null);
}

/// A restarted server (same data directory) says the same movement: it
/// is computed from the buckets, not remembered.
#[tokio::test]
async fn movement_is_the_same_after_a_restart() {
    let server = seeded().await;
    server.clock.advance(3600);
    for v in 0..40 {
        server.view("a0", &format!("late{v}")).await;
    }
    let (_, before) = server.get("/api/overview?range=6h&limit=10").await;
    assert_ne!(before["movementSince"], Value::Null);
    let now = server.clock.now();
    let dir = server.stop().await;
    let config = common::test_config(dir.path());
    let server = TestServer::start_in(dir, config, now).await;
    let (_, after) = server.get("/api/overview?range=6h&limit=10").await;
    assert_eq!(after["movementSince"], before["movementSince"]);
    let moves = |o: &Value| -> Vec<(Value, Value)> {
        o["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|it| (it["articleId"].clone(), it["previousRank"].clone()))
            .collect()
    };
    assert_eq!(moves(&after), moves(&before));
}

#[tokio::test]
async fn compare_two_models() {
    let server = seeded().await;
    let (s, c) = server
        .get("/api/compare?a=gravity&b=window&range=24h&limit=4")
        .await;
    assert_eq!(s, StatusCode::OK, "{c}");
    let (_, ga) = server.get("/api/hot?model=gravity&range=24h&limit=4").await;
    let (_, wb) = server.get("/api/hot?model=window&range=24h&limit=4").await;
    let (a, b) = (ids(&c["a"]["items"]), ids(&c["b"]["items"]));
    assert_eq!(a, ids(&ga["items"]));
    assert_eq!(b, ids(&wb["items"]));
    let common = a.iter().filter(|x| b.contains(x)).count();
    assert_eq!(c["common"], common);
    assert_eq!(c["overlap"], common as f64 / 4.0);
    assert_eq!(c["a"]["model"], "gravity");
    assert_eq!(c["b"]["model"], "window");
    for it in c["a"]["items"].as_array().unwrap() {
        let id = it["articleId"].as_str().unwrap();
        let want = b.iter().position(|x| *x == id).map(|p| p + 1);
        assert_eq!(it["rankInOther"], json!(want), "{id}");
    }
    // A model against itself agrees fully.
    let (_, same) = server
        .get("/api/compare?a=gravity&b=gravity&range=24h&limit=5")
        .await;
    assert_eq!(same["overlap"], 1.0);
    assert_eq!(same["kendallTau"], 1.0);
    assert_eq!(same["jaccard"], 1.0);
}

#[tokio::test]
async fn bad_queries_are_clear_400s() {
    let server = TestServer::start().await;
    for path in [
        "/api/compare?a=gravity",
        "/api/compare?a=gravity&b=nope",
        "/api/compare?a=gravity&b=window&range=0h",
        "/api/compare?a=gravity&b=window&cursor=x",
        "/api/overview?range=437d",
        "/api/overview?limit=0",
        "/api/overview?offset=5",
        "/api/overview?model=gravity&model=window",
    ] {
        let (s, body) = server.get(path).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(body["error"]["code"], "invalid_parameter", "{path}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().len() > 10);
    }
}

/// The views' and held-back totals' change against the period before the
/// range; each item's views in the current hour.
#[tokio::test]
async fn overview_change_against_the_previous_period() {
    let server = seeded().await;
    // The last two hours (42 views) against the two before (21).
    let (s, o) = server.get("/api/overview?range=2h").await;
    assert_eq!(s, StatusCode::OK, "{o}");
    let t = &o["totals"];
    assert_eq!(t["previous"]["hours"], 2, "{t}");
    assert_eq!(t["previous"]["pv"], 21, "{t}");
    assert_eq!(t["change"]["pv"], 1.0, "{t}");
    // The one duplicate is in the current hour; none before it.
    assert_eq!(t["previous"]["quarantinedTotal"], 0, "{t}");
    assert_eq!(t["change"]["quarantinedTotal"], Value::Null, "{t}");
    // The hour before: as many views as this one.
    let (_, o1) = server.get("/api/overview?range=1h").await;
    assert_eq!(o1["totals"]["change"]["pv"], 0.0, "{o1}");
    // Nothing before the traffic began.
    let (_, o6) = server.get("/api/overview?range=6h").await;
    assert_eq!(o6["totals"]["previous"]["pv"], 0);
    assert_eq!(o6["totals"]["change"]["pv"], Value::Null);
    // A range longer than the chart has no previous period.
    let (_, all) = server.get("/api/overview?range=all").await;
    assert_eq!(all["totals"]["previous"], Value::Null);
    assert_eq!(all["totals"]["change"], Value::Null);
    // Views in the current clock hour, per item.
    let lead = &o["items"][0];
    assert_eq!(lead["articleId"], "a5");
    assert_eq!(lead["lastHour"], 6, "{lead}");
}
