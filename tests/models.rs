//! Every seed's ranking model: formulas against numbers computed here from
//! the seeds' own formulas, each seed's scenario, and explanations that
//! rebuild the score. Store-level scenarios run per store through
//! `model_suite!`; HTTP checks run on the default server.

mod common;

use std::future::Future;
use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use hotrank::model::{
    ArticleId, ArticleMeta, Counters, Event, EventType, HotQuery, RangeSpec, Timestamp, Verdict,
    VoteDirection, VoteOutcome,
};
use hotrank::score::{ModelKind, Models};
use hotrank::store::embedded::EmbeddedStore;
use hotrank::store::redis::{RedisOptions, RedisStore};
use hotrank::store::{Store, StoreSettings};

use common::{ADMIN, T0, TestServer};

/// A store under test and whatever keeps it alive.
type Made = (Arc<dyn Store>, Box<dyn std::any::Any + Send>);

async fn make_embedded(s: StoreSettings) -> Made {
    (Arc::new(EmbeddedStore::in_memory(s)), Box::new(()))
}

/// A redis-server of the test's own, with the pipeline in front when
/// `piped` (drained after every ingest call, issue 14).
async fn own_redis(s: StoreSettings, piped: bool) -> Made {
    let server = common::redis::RedisServer::start();
    let opts = RedisOptions {
        url: server.url(),
        ..RedisOptions::default()
    };
    let store = Arc::new(RedisStore::connect(opts, s).expect("redis store"));
    let under_test: Arc<dyn Store> = if piped {
        Arc::new(common::pipeline::inline_pipeline(store).await)
    } else {
        store
    };
    (under_test, Box::new(server))
}

async fn make_redis(s: StoreSettings) -> Made {
    own_redis(s, false).await
}

async fn make_redis_pipeline(s: StoreSettings) -> Made {
    own_redis(s, true).await
}

/// `[redis] shards = 4` (issue 13), on the binary's shared redis-server
/// under a prefix of its own.
async fn make_redis_sharded(s: StoreSettings) -> Made {
    let opts = common::redis::shared_site(4);
    (
        Arc::new(RedisStore::connect(opts, s).expect("redis store")),
        Box::new(()),
    )
}

/// Issue 13: `shards = 3` with a cluster's key names on the binary's
/// shared redis-server (`RedisOptions::cluster_names`).
async fn make_redis_sharded_tagged(s: StoreSettings) -> Made {
    let opts = RedisOptions {
        cluster_names: true,
        ..common::redis::shared_site(3)
    };
    (
        Arc::new(RedisStore::connect(opts, s).expect("redis store")),
        Box::new(()),
    )
}

/// Issue 13: one site over 3 shards on the binary's shared 3-primary
/// cluster.
async fn make_redis_cluster_sharded(s: StoreSettings) -> Made {
    let opts = common::redis::shared_cluster_site(3);
    (
        Arc::new(RedisStore::connect(opts, s).expect("redis store")),
        Box::new(()),
    )
}

/// On the binary's shared 3-primary cluster, under a prefix of its own.
async fn make_redis_cluster(s: StoreSettings) -> Made {
    let cluster = common::redis::RedisCluster::shared();
    let opts = RedisOptions {
        url: cluster.url(),
        prefix: common::redis::unique_prefix(),
        cluster: true,
        ..RedisOptions::default()
    };
    (
        Arc::new(RedisStore::connect(opts, s).expect("redis store")),
        Box::new(()),
    )
}

fn id(s: &str) -> ArticleId {
    ArticleId::parse(s).unwrap()
}

fn event(kind: EventType, article: &str, visitor: u128, ts: Timestamp) -> Event {
    Event {
        kind,
        ip: visitor as u64 ^ 0xabcd,
        trusted: true,
        ..Event::view(id(article), visitor, ts)
    }
}

async fn ingest(s: &dyn Store, events: Vec<Event>) {
    let now = events.iter().map(|e| e.ts).max().unwrap_or(T0);
    for o in s.ingest(events, now).await.unwrap() {
        assert_eq!(o.unwrap().verdict, Verdict::Counted);
    }
}

/// `n` distinct visitors (from `first`) view `article` at `ts`, each with a
/// dwell report of `dwell` seconds (if > 0).
async fn visit(s: &dyn Store, article: &str, first: u128, n: u128, ts: Timestamp, dwell: u32) {
    let mut events = vec![];
    for v in first..first + n {
        events.push(event(EventType::View, article, v, ts));
        if dwell > 0 {
            events.push(Event {
                seconds: dwell,
                ..event(EventType::Dwell, article, v, ts)
            });
        }
    }
    ingest(s, events).await;
}

async fn publish(s: &dyn Store, article: &str, published_at: Timestamp, meta: ArticleMeta) {
    let meta = ArticleMeta {
        published_at,
        ..meta
    };
    s.put_article(id(article), meta, T0).await.unwrap();
}

fn query(model: ModelKind, range: RangeSpec) -> HotQuery {
    HotQuery {
        explain: true,
        ..HotQuery::top(model, range, 20)
    }
}

async fn ranked(s: &dyn Store, q: &HotQuery, now: Timestamp) -> Vec<(String, f64)> {
    s.hot(q, now)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|i| (i.id.to_string(), i.score))
        .collect()
}

fn ids(v: &[(String, f64)]) -> Vec<&str> {
    v.iter().map(|(i, _)| i.as_str()).collect()
}

/// Seed 001's formula, written out from the seed.
fn seed001(pv: f64, uv: f64, avg_dwell: f64, likes: f64, comments: f64, age_hours: f64) -> f64 {
    0.35 * (pv + 1.0).ln()
        + 0.25 * uv
        + 0.25 * avg_dwell.min(300.0) / 60.0
        + 0.10 * likes
        + 0.05 * comments
        - 0.02 * age_hours
}

pub async fn weighted_formula<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Made>,
{
    let h = make(StoreSettings::default()).await;
    let s = &*h.0;
    publish(s, "w", T0 - 5 * 3600, ArticleMeta::default()).await;
    visit(s, "w", 0, 8, T0, 0).await;
    let mut more = vec![];
    for (i, secs) in [40u32, 80, 120].into_iter().enumerate() {
        more.push(Event {
            seconds: secs,
            ..event(EventType::Dwell, "w", i as u128, T0)
        });
    }
    more.push(event(EventType::Like, "w", 1, T0));
    more.push(event(EventType::Like, "w", 2, T0));
    more.push(event(EventType::Comment, "w", 3, T0));
    ingest(s, more).await;
    let now = T0 + 1800;
    let page = s
        .hot(&query(ModelKind::Weighted, RangeSpec::Hours(24)), now)
        .await
        .unwrap();
    let expect = seed001(8.0, 8.0, 80.0, 2.0, 1.0, 5.5);
    assert!(
        (page.items[0].score - expect).abs() < 1e-9,
        "{} vs {expect}",
        page.items[0].score
    );
}

/// Seed 001's edge check: a very long dwell is capped and does not take over.
pub async fn weighted_long_dwell_is_capped<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Made>,
{
    let h = make(StoreSettings::default()).await;
    let s = &*h.0;
    publish(s, "camper", T0, ArticleMeta::default()).await;
    publish(s, "popular", T0, ArticleMeta::default()).await;
    visit(s, "camper", 0, 1, T0, 50_000).await;
    visit(s, "popular", 100, 6, T0, 60).await;
    let r = ranked(
        s,
        &query(ModelKind::Weighted, RangeSpec::Hours(24)),
        T0 + 60,
    )
    .await;
    assert_eq!(ids(&r), ["popular", "camper"]);
    let camper = r.iter().find(|(i, _)| i == "camper").unwrap().1;
    assert!((camper - seed001(1.0, 1.0, 300.0, 0.0, 0.0, 60.0 / 3600.0)).abs() < 1e-9);
}

/// Seed 001's edge check: an old article with no new activity drifts down
/// over 24–72 h while a newer one with a trickle of readers rises past it.
pub async fn weighted_old_article_drifts_down<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Made>,
{
    let h = make(StoreSettings::default()).await;
    let s = &*h.0;
    publish(s, "old", T0 - 48 * 3600, ArticleMeta::default()).await;
    publish(s, "new", T0, ArticleMeta::default()).await;
    visit(s, "old", 0, 10, T0, 0).await;
    let q = query(ModelKind::Weighted, RangeSpec::Hours(72));
    let mut last_old = f64::INFINITY;
    let mut order_at = vec![];
    for h in 0..72 {
        let now = T0 + h * 3600 + 60;
        visit(s, "new", 1000 + h as u128, 1, now, 0).await;
        let r = ranked(s, &q, now + 1).await;
        let old = r.iter().find(|(i, _)| i == "old").unwrap().1;
        assert!(
            old < last_old,
            "hour {h}: the old article must keep falling"
        );
        last_old = old;
        order_at.push(ids(&r).join(","));
    }
    assert_eq!(order_at[0], "old,new");
    assert_eq!(order_at[71], "new,old");
}

/// Seed 001's expectation: high UV and long dwell beat high early PV with
/// short dwell.
pub async fn weighted_uv_and_dwell_beat_early_pv<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Made>,
{
    let h = make(StoreSettings::default()).await;
    let s = &*h.0;
    publish(s, "clicky", T0 - 6 * 3600, ArticleMeta::default()).await;
    publish(s, "deep", T0 - 6 * 3600, ArticleMeta::default()).await;
    // 5 visitors come back every 15 minutes, 20 times each, for 5 s.
    for round in 0..20 {
        visit(s, "clicky", 0, 5, T0 - 20 * 900 + round * 900, 5).await;
    }
    visit(s, "deep", 100, 15, T0, 240).await;
    let r = ranked(
        s,
        &query(ModelKind::Weighted, RangeSpec::Hours(24)),
        T0 + 60,
    )
    .await;
    assert_eq!(ids(&r), ["deep", "clicky"]);
    let page = s
        .hot(&query(ModelKind::Weighted, RangeSpec::Hours(24)), T0 + 60)
        .await
        .unwrap();
    let clicky = page
        .items
        .iter()
        .find(|i| i.id.as_str() == "clicky")
        .unwrap();
    assert_eq!((clicky.counters.pv, clicky.counters.uv), (100, 5));
}

/// Seed 003: posting, one vote per user, the voting window, 432 per vote.
pub async fn votes_scenario<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Made>,
{
    let h = make(StoreSettings::default()).await;
    let s = &*h.0;
    let meta = |groups: &[&str]| ArticleMeta {
        title: Some("t".into()),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..ArticleMeta::default()
    };
    let a = s
        .post_article(meta(&["rust"]), 1u128.into(), T0 - 86_400)
        .await
        .unwrap();
    let b = s
        .post_article(meta(&["rust", "db"]), 2u128.into(), T0)
        .await
        .unwrap();
    let c = s
        .post_article(meta(&["db"]), 3u128.into(), T0 + 10)
        .await
        .unwrap();
    assert_ne!(a, b);
    // The poster's vote is recorded: they cannot vote again.
    assert_eq!(
        s.vote(&a, 1u128.into(), VoteDirection::Up, T0)
            .await
            .unwrap(),
        VoteOutcome::AlreadyVoted
    );
    for user in 100..301u128 {
        let v = s
            .vote(&a, user.into(), VoteDirection::Up, T0 + 100)
            .await
            .unwrap();
        assert!(matches!(v, VoteOutcome::Counted { .. }), "{v:?}");
    }
    // The poster's vote counts (API.md; Redis in Action's post_article):
    // one more up-vote makes two, the score two votes past publishedAt.
    let last = s
        .vote(&b, 7u128.into(), VoteDirection::Up, T0 + 100)
        .await
        .unwrap();
    assert_eq!(
        last,
        VoteOutcome::Counted {
            ups: 2,
            downs: 0,
            score: T0 as f64 + 2.0 * 432.0
        }
    );
    assert_eq!(
        s.vote(&b, 7u128.into(), VoteDirection::Up, T0 + 101)
            .await
            .unwrap(),
        VoteOutcome::AlreadyVoted
    );
    assert_eq!(
        s.vote(&b, 8u128.into(), VoteDirection::Down, T0 + 101)
            .await
            .unwrap(),
        VoteOutcome::DownVotesDisabled
    );
    // 201 votes and the poster's bought article a more than the day it is
    // older by.
    let q = query(ModelKind::Votes, RangeSpec::Hours(72));
    let r = ranked(s, &q, T0 + 200).await;
    assert_eq!(ids(&r), [a.as_str(), b.as_str(), c.as_str()]);
    assert_eq!(r[0].1, (T0 - 86_400) as f64 + 432.0 * 202.0);
    // Groups: the seed's ZINTERSTORE of group:<name> and score:.
    let mut g = q.clone();
    g.group = Some("db".into());
    assert_eq!(
        ids(&ranked(s, &g, T0 + 200).await),
        [b.as_str(), c.as_str()]
    );
    let mut n = query(ModelKind::Votes, RangeSpec::Hours(72));
    n.group = Some("rust".into());
    let newest: Vec<String> = s
        .newest(&n, T0 + 200)
        .await
        .unwrap()
        .items
        .iter()
        .map(|i| i.id.to_string())
        .collect();
    assert_eq!(newest, [b.to_string(), a.to_string()]);
    // A week after publication voting closes and the score is frozen.
    let week = 7 * 86_400;
    assert_eq!(
        s.vote(&a, 999u128.into(), VoteDirection::Up, T0 - 86_400 + week)
            .await
            .unwrap(),
        VoteOutcome::Closed
    );
    assert!(matches!(
        s.vote(&b, 999u128.into(), VoteDirection::Up, T0 + week - 1)
            .await
            .unwrap(),
        VoteOutcome::Counted { .. }
    ));
    assert_eq!(
        s.vote(&b, 1000u128.into(), VoteDirection::Up, T0 + week)
            .await
            .unwrap(),
        VoteOutcome::Closed
    );
    let later = ranked(s, &q, T0 + 30 * 86_400).await;
    let a_later = later.iter().find(|(i, _)| i == a.as_str()).unwrap().1;
    assert_eq!(a_later, r[0].1, "frozen score");
    // Down-votes where enabled.
    let mut settings = StoreSettings::default();
    settings.models.votes.allow_down_votes = true;
    let h = make(settings).await;
    let s = &*h.0;
    let d = s.post_article(meta(&[]), 1u128.into(), T0).await.unwrap();
    let v = s
        .vote(&d, 2u128.into(), VoteDirection::Down, T0)
        .await
        .unwrap();
    assert_eq!(
        v,
        VoteOutcome::Counted {
            ups: 1,
            downs: 1,
            score: T0 as f64
        }
    );
    assert_eq!(s.article(&d, T0).await.unwrap().unwrap().lifetime.downs, 1);
}

/// Seed 004: a weighted sum of signals over the buckets inside the range,
/// filtered by kind.
pub async fn window_scenario<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Made>,
{
    let mut settings = StoreSettings::default();
    settings.models.window.likes = 5.0;
    let h = make(settings).await;
    let s = &*h.0;
    let kind = |k: &str| ArticleMeta {
        kind: Some(k.into()),
        ..ArticleMeta::default()
    };
    publish(s, "mentor-1", T0 - 86_400, kind("mentor")).await;
    publish(s, "mentor-2", T0 - 86_400, kind("mentor")).await;
    publish(s, "course-1", T0 - 86_400, kind("course")).await;
    let day = 86_400;
    // mentor-1: 30 clicks two days ago and 5 today; mentor-2: 12 clicks and 2 likes today.
    visit(s, "mentor-1", 0, 30, T0 - 2 * day, 0).await;
    visit(s, "mentor-1", 100, 5, T0, 0).await;
    visit(s, "mentor-2", 200, 12, T0, 0).await;
    ingest(
        s,
        vec![
            event(EventType::Like, "mentor-2", 1, T0),
            event(EventType::Like, "mentor-2", 2, T0),
        ],
    )
    .await;
    visit(s, "course-1", 300, 50, T0, 0).await;
    let mut q = query(ModelKind::Window, RangeSpec::Hours(24));
    q.kind = Some("mentor".into());
    let r = ranked(s, &q, T0 + 60).await;
    assert_eq!(
        r,
        [
            ("mentor-2".to_string(), 12.0 + 10.0),
            ("mentor-1".to_string(), 5.0)
        ]
    );
    q.range = RangeSpec::Hours(72);
    let r = ranked(s, &q, T0 + 60).await;
    assert_eq!(
        r,
        [
            ("mentor-1".to_string(), 35.0),
            ("mentor-2".to_string(), 22.0)
        ]
    );
}

/// Reddit's hot formula.
pub async fn reddit_formula<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Made>,
{
    let mut settings = StoreSettings::default();
    settings.models.votes.allow_down_votes = true;
    let h = make(settings).await;
    let s = &*h.0;
    let a = s
        .post_article(ArticleMeta::default(), 1u128.into(), T0)
        .await
        .unwrap();
    let b = s
        .post_article(ArticleMeta::default(), 2u128.into(), T0 + 45_000)
        .await
        .unwrap();
    for u in 10..110u128 {
        s.vote(&a, u.into(), VoteDirection::Up, T0 + 50_000)
            .await
            .unwrap();
    }
    for u in 10..15u128 {
        s.vote(&b, u.into(), VoteDirection::Down, T0 + 50_000)
            .await
            .unwrap();
    }
    let r = ranked(
        s,
        &query(ModelKind::Reddit, RangeSpec::Hours(72)),
        T0 + 60_000,
    )
    .await;
    // Rounded to 7 decimals, as Reddit's `round(…, 7)` does.
    let hot = |s: f64, published: i64| {
        let order = s.signum() * s.abs().max(1.0).log10();
        let score = order + (published - 1_134_028_003) as f64 / 45_000.0;
        format!("{score:.7}").parse::<f64>().unwrap()
    };
    // Each poster's own up-vote counts too.
    assert_eq!(ids(&r), [a.as_str(), b.as_str()]);
    assert_eq!(r[0].1, hot(101.0, T0));
    assert_eq!(r[1].1, hot(-4.0, T0 + 45_000));
}

/// `scale=category`: each score divided by log10(2 + its category's
/// counted events in the UTC day and the 29 before it). Events count in
/// the category their article had when they were counted (a1's five stay
/// in `news` after it moves to `tech`); quarantined ones (a duplicate)
/// never count; an event on the window's first day counts until the next
/// midnight drops that day; articles without a category are one group.
async fn category_scale_counts<F, Fut>(make: F)
where
    F: FnOnce(StoreSettings) -> Fut,
    Fut: Future<Output = Made>,
{
    let (s, _keep) = make(StoreSettings::default()).await;
    let s = &*s;
    let cat = |c: &str| ArticleMeta {
        category: Some(c.to_string()),
        ..ArticleMeta::default()
    };
    let day = T0.div_euclid(86_400) * 86_400;
    let first_day = day - 29 * 86_400;
    publish(s, "a1", T0 - 3600, cat("news")).await;
    publish(s, "a2", T0 - 3600, cat("news")).await;
    publish(s, "b1", T0 - 3600, cat("tech")).await;
    publish(s, "c1", T0 - 3600, ArticleMeta::default()).await;
    ingest(s, vec![event(EventType::View, "a2", 900, first_day + 10)]).await;
    visit(s, "a1", 1, 5, T0, 0).await;
    // A repeat view: quarantined as a duplicate, counted nowhere.
    let out = s
        .ingest(vec![event(EventType::View, "a1", 1, T0 + 1)], T0 + 1)
        .await
        .unwrap();
    assert_eq!(out[0].as_ref().unwrap().verdict, Verdict::Duplicate);
    publish(s, "a1", T0 - 3600, cat("tech")).await;
    visit(s, "a1", 100, 2, T0 + 2, 0).await;
    visit(s, "a2", 200, 1, T0 + 2, 0).await;
    ingest(s, vec![event(EventType::Like, "b1", 300, T0 + 2)]).await;
    visit(s, "c1", 400, 1, T0 + 2, 0).await;
    let scaled = |q: HotQuery| HotQuery {
        params: hotrank::model::ModelParams {
            scale: hotrank::model::Scale::Category,
            ..q.params
        },
        ..q
    };
    let check = |at: Timestamp, want: [(&'static str, u64); 4]| async move {
        let q = query(ModelKind::Gravity, RangeSpec::Hours(72));
        let plain = s.hot(&q, at).await.unwrap();
        let page = s.hot(&scaled(q), at).await.unwrap();
        assert_eq!(page.generated_at, plain.generated_at);
        for (id, events) in want {
            let it = (page.items.iter()).find(|i| i.id.as_str() == id);
            let it = it.unwrap_or_else(|| panic!("{id} listed"));
            let e = it.explain.as_ref().unwrap();
            assert_eq!(e.get("categoryEvents"), Some(events as f64), "{id} at {at}");
            let divisor = (2.0 + events as f64).log10();
            assert_eq!(e.get("categoryScale"), Some(divisor), "{id}");
            let raw = (plain.items.iter()).find(|i| i.id.as_str() == id).unwrap();
            assert!(
                (it.score - raw.score / divisor).abs() <= 1e-12 * raw.score,
                "{id}"
            );
        }
        // The order is the scaled scores'.
        let scores: Vec<f64> = page.items.iter().map(|i| i.score).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    };
    // news: a1's 5 before it moved, a2's 2 (one on the window's first
    // day); tech: a1's 2 after, b1's like; none: c1's view.
    check(T0 + 60, [("a1", 3), ("a2", 7), ("b1", 3), ("c1", 1)]).await;
    // The next UTC day: the window's first day has left it.
    check(
        day + 86_400 + 60,
        [("a1", 3), ("a2", 6), ("b1", 3), ("c1", 1)],
    )
    .await;
}

macro_rules! model_suite {
    ($store:ident, $make:path) => {
        mod $store {
            #[tokio::test]
            async fn category_scale_counts() {
                super::category_scale_counts($make).await
            }
            #[tokio::test]
            async fn weighted_formula() {
                super::weighted_formula($make).await
            }
            #[tokio::test]
            async fn weighted_long_dwell_is_capped() {
                super::weighted_long_dwell_is_capped($make).await
            }
            #[tokio::test]
            async fn weighted_old_article_drifts_down() {
                super::weighted_old_article_drifts_down($make).await
            }
            #[tokio::test]
            async fn weighted_uv_and_dwell_beat_early_pv() {
                super::weighted_uv_and_dwell_beat_early_pv($make).await
            }
            #[tokio::test]
            async fn votes_scenario() {
                super::votes_scenario($make).await
            }
            #[tokio::test]
            async fn window_scenario() {
                super::window_scenario($make).await
            }
            #[tokio::test]
            async fn reddit_formula() {
                super::reddit_formula($make).await
            }
        }
    };
}

model_suite!(embedded, super::make_embedded);

model_suite!(redis, super::make_redis);

model_suite!(redis_cluster, super::make_redis_cluster);
model_suite!(redis_cluster_sharded, super::make_redis_cluster_sharded);

model_suite!(redis_sharded, super::make_redis_sharded);
model_suite!(redis_sharded_tagged, super::make_redis_sharded_tagged);

model_suite!(redis_pipeline, super::make_redis_pipeline);

/// Rebuilds a score from its explanation, by each model's own rule.
fn rebuild(model: &str, e: &Value) -> f64 {
    let f = |k: &str| {
        e[k].as_f64()
            .unwrap_or_else(|| panic!("{model}: no {k} in {e}"))
    };
    let sum = |keys: &[&str]| keys.iter().map(|k| f(k)).sum::<f64>();
    match model {
        "gravity" => (f("pvTerm") + f("uvTerm")) / f("decay"),
        "weighted" => sum(&[
            "pvTerm",
            "uvTerm",
            "dwellTerm",
            "likesTerm",
            "commentsTerm",
            "favoritesTerm",
            "sharesTerm",
            "agePenalty",
        ]),
        "votes" => f("publishedAt") + f("voteTerm"),
        "window" => sum(&[
            "clicksTerm",
            "likesTerm",
            "favoritesTerm",
            "commentsTerm",
            "sharesTerm",
        ]),
        // Reddit rounds its hot score to 7 decimals.
        "reddit" => f("orderTerm") + f("timeTerm"),
        "controversy" => f("controversy"),
        "confidence" => f("lowerBound"),
        "hn" => f("base") / f("decay"),
        "lemmy" => f("order") / f("decay") * f("listed"),
        "rising" => (f("observed") - f("expected")) / (f("expected") + 1.0).sqrt(),
        other => panic!("no rule for {other}"),
    }
}

#[tokio::test]
async fn every_model_explains_its_scores_over_http() {
    // Anonymous posting and voting, as a site without a backend would allow.
    let s = TestServer::start_with(|c| {
        c.models.votes.allow_down_votes = true;
        c.posting = hotrank::config::Access::Open;
        c.voting = hotrank::config::Access::Open;
    })
    .await;
    let (status, posted) = s
        .post(
            "/api/articles",
            &json!({"title": "Posted", "poster": "alice", "groups": ["rust"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{posted}");
    let posted_id = posted["articleId"].as_str().unwrap().to_string();
    assert_eq!(posted["author"], "alice");
    for (i, user) in ["bob", "carol", "dan"].into_iter().enumerate() {
        let dir = if i == 2 { "down" } else { "up" };
        let (status, v) = s
            .post(
                &format!("/api/articles/{posted_id}/vote"),
                &json!({"userId": user, "direction": dir}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{v}");
    }
    let (status, err) = s
        .post(
            &format!("/api/articles/{posted_id}/vote"),
            &json!({"userId": "bob"}),
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("already_voted"))
    );
    let (_, art) = s.get(&format!("/api/articles/{posted_id}")).await;
    assert_eq!(
        (
            art["votes"].as_i64(),
            art["ups"].as_u64(),
            art["downs"].as_u64()
        ),
        // alice's own vote, bob's and carol's up, dan's down.
        (Some(2), Some(3), Some(1))
    );
    let events: Vec<Value> = (0..30)
        .flat_map(|i| {
            let a = format!("e{}", i % 4);
            vec![
                json!({"type": "view", "articleId": a, "visitorId": format!("v{i}")}),
                json!({"type": "dwell", "articleId": a, "visitorId": format!("v{i}"), "seconds": 10 + i}),
                json!({"type": "like", "articleId": a, "visitorId": format!("v{i}")}),
            ]
        })
        .collect();
    let (status, _) = s.post("/api/events", &json!({ "events": events })).await;
    assert_eq!(status, StatusCode::OK);
    s.clock.advance(3600);
    for model in ModelKind::ALL.map(ModelKind::as_str) {
        // Rising reads a window, not a range: the events are an hour old.
        let over = if model == "rising" {
            "window=2h&min=1"
        } else {
            "range=72h"
        };
        let (status, page) = s
            .get(&format!("/api/hot?model={model}&{over}&explain=true"))
            .await;
        assert_eq!(status, StatusCode::OK, "{model}: {page}");
        let items = page["items"].as_array().unwrap();
        assert!(!items.is_empty(), "{model}");
        assert_eq!(page["model"], model);
        for it in items {
            let score = it["score"].as_f64().unwrap();
            let rebuilt = rebuild(model, &it["explain"]);
            let why = it["why"].as_str().unwrap_or("");
            assert!(!why.is_empty() && !why.contains("NaN"), "{model}: why {it}");
            assert!(
                (rebuilt - score).abs() <= 1e-9 * score.abs().max(1.0),
                "{model}: {rebuilt} vs {score}"
            );
        }
        let (_, art) = s
            .get(&format!(
                "/api/articles/{}",
                items[0]["articleId"].as_str().unwrap()
            ))
            .await;
        assert!(
            art["scores"][model].is_number(),
            "{model} missing from scores"
        );
    }
    // The voting window closes after 7 days: 410.
    s.clock.advance(7 * 86_400);
    let (status, err) = s
        .post(
            &format!("/api/articles/{posted_id}/vote"),
            &json!({"userId": "erin"}),
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (StatusCode::GONE, Some("voting_closed"))
    );
    let (status, _) = s
        .post("/api/articles/nope/vote", &json!({"userId": "erin"}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn down_votes_are_refused_unless_enabled() {
    let s = TestServer::start_with(|c| c.voting = hotrank::config::Access::Open).await;
    let r = s
        .client
        .put(s.url("/api/articles/x"))
        .bearer_auth(ADMIN)
        .json(&json!({"publishedAt": T0}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let (status, err) = s
        .post(
            "/api/articles/x/vote",
            &json!({"userId": "u", "direction": "down"}),
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("down_votes_disabled"))
    );
    let (status, _) = s
        .post(
            "/api/articles/x/vote",
            &json!({"userId": "u", "direction": "sideways"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, v) = s
        .post("/api/articles/x/vote", &json!({"userId": "u"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["score"], T0 as f64 + 432.0);
}

#[test]
fn bad_model_parameters_are_refused_naming_the_key() {
    type Edit = fn(&mut Models);
    let cases: [(&str, Edit); 6] = [
        ("models.weighted.pv", |m| m.weighted.pv = -1.0),
        ("models.weighted.dwell_cap_secs", |m| {
            m.weighted.dwell_cap_secs = 0.0
        }),
        ("models.votes.per_vote", |m| m.votes.per_vote = f64::NAN),
        ("models.votes.voting_window_days", |m| {
            m.votes.voting_window_days = 0
        }),
        ("models.window.clicks", |m| m.window.clicks = f64::INFINITY),
        ("models.reddit.divisor", |m| m.reddit.divisor = 0.0),
    ];
    for (key, edit) in cases {
        let mut m = Models::default();
        edit(&mut m);
        let err = m.validate().unwrap_err();
        assert!(err.contains(key), "{err}");
    }
    let c = Counters {
        pv: 1,
        ..Counters::default()
    };
    assert!(
        Models::default()
            .score(
                ModelKind::Weighted,
                &Default::default(),
                &c,
                &ArticleMeta::default(),
                None,
                0
            )
            .is_finite()
    );
}

/// Views from `n` new visitors on `article` now, through the API.
async fn views_now(s: &TestServer, article: &str, n: u32, visitor: &mut u32) {
    let events: Vec<Value> = (0..n)
        .map(|_| {
            *visitor += 1;
            json!({"type": "view", "articleId": article, "visitorId": format!("v{visitor}")})
        })
        .collect();
    let (status, body) = s.post("/api/events", &json!({ "events": events })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// `model=rising` over HTTP: 24 hours of 4 views an hour then 26 in the
/// current one rank first with the contract's terms (o 26, e 4, z
/// 22/√5), an interval around the ratio and the sentence; an article
/// under `min` is left out; a steady one scores 0; the window, baseline
/// and min change the answer; the counters are the window's.
async fn rising_over_http(s: &TestServer) {
    let mut visitor = 0;
    for hour in 0..24 {
        views_now(s, "up", 4, &mut visitor).await;
        // 8 hours back, flat had 12 more.
        let flat = if hour == 16 { 17 } else { 5 };
        views_now(s, "flat", flat, &mut visitor).await;
        s.clock.advance(3600);
    }
    views_now(s, "up", 26, &mut visitor).await;
    views_now(s, "flat", 5, &mut visitor).await;
    views_now(s, "few", 4, &mut visitor).await;
    let (status, page) = s.get("/api/hot?model=rising&explain=true").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(
        (page["model"].as_str(), page["range"].as_str()),
        (Some("rising"), Some("1h"))
    );
    let items = page["items"].as_array().unwrap();
    let ids: Vec<&str> = items
        .iter()
        .map(|i| i["articleId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["up", "flat"], "few has 4 views, under min 5");
    let up = &items[0];
    let e = &up["explain"];
    assert_eq!(up["pv"], 26);
    assert_eq!(e["observed"], 26.0);
    assert_eq!(e["expected"], 4.0);
    assert_eq!(e["windowHours"], 1.0);
    assert_eq!(e["baselineHours"], 24.0);
    assert_eq!(up["score"].as_f64(), Some(22.0 / 5f64.sqrt()));
    assert_eq!(e["z"], up["score"]);
    assert_eq!(e["ratio"], 6.5);
    assert_eq!(e["intervalExact"], 1.0);
    // Garwood's 95 % interval for 26 counts: 16.98 .. 38.10.
    let (lo, hi) = (
        e["observedLow"].as_f64().unwrap(),
        e["observedHigh"].as_f64().unwrap(),
    );
    assert!(
        (lo - 16.984).abs() < 0.01 && (hi - 38.097).abs() < 0.01,
        "{lo} {hi}"
    );
    assert_eq!(e["ratioLow"].as_f64(), Some(lo / 4.0));
    assert_eq!(
        up["why"],
        "26 views in the last 1 h, 6.5× its usual rate (95 %: 4.2–9.5×, from the 24 h before)"
    );
    assert_eq!(items[1]["explain"]["expected"], 5.5, "(24 · 5 + 12) / 24");
    // A lower min lists `few` (no baseline: "none in the 24 h before").
    let (_, page) = s.get("/api/hot?model=rising&min=4&explain=true").await;
    let few = (page["items"].as_array().unwrap().iter())
        .find(|i| i["articleId"] == "few")
        .expect("few with min=4");
    assert_eq!(
        few["why"],
        "4 views in the last 1 h, none in the 24 h before"
    );
    assert_eq!(few["explain"]["ratio"], Value::Null);
    // Over 2 hours against the 6 before: up has 30 views against 8.
    let (_, page) = s
        .get("/api/hot?model=rising&window=2h&baseline=6h&explain=true")
        .await;
    assert_eq!(page["range"], "2h");
    let up = &page["items"][0];
    assert_eq!(
        (up["articleId"].as_str(), up["pv"].as_u64()),
        (Some("up"), Some(30))
    );
    assert_eq!(up["explain"]["expected"], 8.0);
    // Movement against the ranking at the last hour mark before an hour
    // ago (scored at its last second, from the buckets up to then): up
    // scored 0 there (8 views against 8), flat less (10 against 14: its
    // 12 extra views were in that baseline, not in today's 6 hours); few
    // was not listed.
    let (_, o) = s
        .get("/api/overview?model=rising&window=2h&baseline=6h&min=1&limit=10")
        .await;
    let moves: Vec<(&str, &Value, &Value)> = (o["items"].as_array().unwrap().iter())
        .map(|it| {
            (
                it["articleId"].as_str().unwrap(),
                &it["movement"],
                &it["previousRank"],
            )
        })
        .collect();
    assert_eq!(
        moves,
        [
            ("up", &json!("same"), &json!(1)),
            ("few", &json!("new"), &Value::Null),
            ("flat", &json!("down"), &json!(2)),
        ],
        "{o}"
    );
    // The article's scores carry rising at its defaults.
    let (_, art) = s.get("/api/articles/up").await;
    assert_eq!(art["scores"]["rising"].as_f64(), Some(22.0 / 5f64.sqrt()));
    // An hour later with no views, nothing is rising.
    s.clock.advance(3600);
    let (_, page) = s.get("/api/hot?model=rising").await;
    assert_eq!(page["items"], json!([]));
}

#[tokio::test]
async fn rising_over_http_embedded() {
    rising_over_http(&TestServer::start().await).await;
}

#[tokio::test]
async fn rising_over_http_redis() {
    let server = common::redis::RedisServer::start();
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    rising_over_http(&TestServer::start_redis(dir, &server.url(), |_| {}).await).await;
}

/// `decay=halflife&halfLife=N` on gravity and weighted: the divisor is
/// 2^(ageHours/N), shown in `explain` and `why`; the same article's score
/// halves every N hours.
#[tokio::test]
async fn half_life_over_http() {
    let s = TestServer::start().await;
    let (status, body) = s
        .admin_put(
            "/api/articles/h1",
            &json!({"title": "H", "publishedAt": T0}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let mut visitor = 0;
    views_now(&s, "h1", 10, &mut visitor).await;
    s.clock.advance(6 * 3600);
    let (status, page) = s
        .get("/api/hot?model=gravity&decay=halflife&halfLife=6h&explain=true")
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let it = &page["items"][0];
    assert_eq!(it["explain"]["decay"], 2.0);
    assert_eq!(it["explain"]["halfLifeHours"], 6.0);
    let pv_uv =
        it["explain"]["pvTerm"].as_f64().unwrap() + it["explain"]["uvTerm"].as_f64().unwrap();
    assert_eq!(it["score"].as_f64(), Some(pv_uv / 2.0));
    assert!(
        it["why"]
            .as_str()
            .unwrap()
            .ends_with("divided by 2 for age (half-life 6 h)"),
        "{it}"
    );
    let (_, w) = s
        .get("/api/hot?model=weighted&decay=halflife&halfLife=1d&explain=true")
        .await;
    let e = &w["items"][0]["explain"];
    assert_eq!(e["halfLifeHours"], 24.0);
    assert_eq!(
        e["agePenalty"],
        Value::Null,
        "the half-life replaces the penalty"
    );
    assert!((e["decay"].as_f64().unwrap() - 2f64.powf(0.25)).abs() < 1e-12);
    // The default decay is the model's own.
    let (_, plain) = s
        .get("/api/hot?model=gravity&decay=default&explain=true")
        .await;
    assert_eq!(plain["items"][0]["explain"]["halfLifeHours"], Value::Null);
}

/// `scale=category` over HTTP: `explain` ends with the category's events
/// and divisor, `why` says them, the score is the unscaled one over the
/// divisor, and `/api/new` scales alike.
#[tokio::test]
async fn category_scale_over_http() {
    let s = TestServer::start().await;
    let (status, body) = s
        .admin_put(
            "/api/articles/k1",
            &json!({"title": "K", "category": "news", "publishedAt": T0}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let mut visitor = 0;
    views_now(&s, "k1", 10, &mut visitor).await;
    let (_, plain) = s.get("/api/hot?explain=true").await;
    for route in ["/api/hot", "/api/new"] {
        let (status, page) = s.get(&format!("{route}?scale=category&explain=true")).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let it = &page["items"][0];
        assert_eq!(it["explain"]["categoryEvents"], 10.0, "{route}: {it}");
        let divisor = 12f64.log10();
        assert_eq!(it["explain"]["categoryScale"], divisor);
        let raw = plain["items"][0]["score"].as_f64().unwrap();
        assert!((it["score"].as_f64().unwrap() - raw / divisor).abs() < 1e-12);
        let why = it["why"].as_str().unwrap();
        assert!(
            why.ends_with("; divided by 1.1 for its category's 10 events in 30 days"),
            "{why}"
        );
    }
}

/// Bad or misplaced model parameters: 400 `invalid_parameter` naming the
/// parameter, on /api/hot and the routes that share its parsing.
#[tokio::test]
async fn model_parameters_are_checked() {
    let s = TestServer::start_with(|c| {
        c.retention.hourly_days = 30;
        c.redis.hourly_days = 2;
    })
    .await;
    let bad = [
        ("model=rising&window=0h", "window"),
        ("model=rising&window=1", "window"),
        ("model=rising&window=all", "window"),
        ("model=rising&baseline=-1h", "baseline"),
        ("model=rising&baseline=2161h", "baseline"),
        ("model=rising&min=0", "min"),
        ("model=rising&min=x", "min"),
        ("model=rising&min=1000001", "min"),
        ("model=rising&range=0h", "range"),
        // Redis keeps 3 days hour by hour here: 72 h at most.
        ("model=rising&window=1h&baseline=72h", "72 h"),
        ("model=gravity&window=1h", "window"),
        ("model=votes&min=3", "min"),
        ("window=2h", "window"),
        ("model=votes&decay=halflife&halfLife=6h", "decay"),
        ("model=rising&halfLife=6h", "halfLife"),
        ("model=gravity&decay=halflife", "halfLife"),
        ("model=gravity&halfLife=6h", "halfLife"),
        ("model=gravity&decay=exp&halfLife=6h", "decay"),
        ("model=weighted&decay=halflife&halfLife=0h", "halfLife"),
        ("scale=categories", "scale"),
        ("model=votes&scale=Category", "scale"),
    ];
    for (query, names) in bad {
        for route in ["/api/hot", "/api/new", "/feeds/hot.json"] {
            let (status, body) = s.get(&format!("{route}?{query}")).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{route}?{query}: {body}");
            assert_eq!(
                body["error"]["code"], "invalid_parameter",
                "{route}?{query}"
            );
            let msg = body["error"]["message"].as_str().unwrap();
            assert!(msg.contains(names), "{route}?{query}: {msg}");
        }
    }
    for good in [
        "model=rising&window=2h&baseline=70h&min=1",
        "model=rising&window=1d&baseline=2d",
        "model=weighted&decay=halflife&halfLife=2d",
        "model=gravity&decay=default",
        "model=rising&range=all",
        "model=votes&scale=category",
        "model=rising&scale=category&min=1",
        "scale=none",
    ] {
        let (status, body) = s.get(&format!("/api/hot?{good}")).await;
        assert_eq!(status, StatusCode::OK, "{good}: {body}");
    }
}
