//! The store contract: every scenario here runs unchanged against every
//! `Store` implementation (`contract_suite!` at the bottom instantiates
//! it per store). Time is an argument, so nothing sleeps.

mod common;
#[path = "contract/site.rs"]
mod site;

use std::future::Future;
use std::sync::Arc;

use hotrank::model::{
    ArticleId, ArticleMeta, Event, EventType, HotQuery, RangeSpec, Timestamp, Verdict,
};
use hotrank::score::{GravityParams, ModelKind};
use hotrank::store::embedded::{Durability, EmbeddedStore};
use hotrank::store::redis::{RedisOptions, RedisStore};
use hotrank::store::wal::FsyncPolicy;
use hotrank::store::{IngestReject, Store, StoreSettings};

use common::T0;

/// A store under test and whatever keeps it alive.
pub struct Harness {
    pub store: Arc<dyn Store>,
    probe: Probe,
    _keep: Box<dyn std::any::Any + Send>,
}

/// How a test reads a store's own accounting of its gate state.
enum Probe {
    Embedded(Arc<EmbeddedStore>),
    Redis(Arc<RedisStore>),
}

/// Entries of gate state the store holds: the embedded store's own
/// `gate_sizes`; on Redis the dedupe keys and the fields of the slotted
/// `gate:*` hashes (the
/// per-call `gate:batch:*` answers, two minutes each, are not per event
/// and are left out).
async fn gate_entries(h: &Harness) -> u64 {
    match &h.probe {
        Probe::Embedded(e) => {
            let (a, b, c) = e.gate_sizes();
            (a + b + c) as u64
        }
        Probe::Redis(store) => {
            // The site's keys, from the node that holds them.
            let prefix = store.keys().prefix.clone();
            let site_key = store.keys().clock();
            let mut con = store.con();
            let mut keys = Vec::new();
            let mut cursor = 0;
            loop {
                let (next, batch) = con
                    .scan(&site_key, cursor, &format!("{prefix}gate:*"), 1000)
                    .await
                    .expect("SCAN");
                keys.extend(batch);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            let mut n = 0u64;
            for k in keys
                .iter()
                .filter(|k| !k[prefix.len()..].starts_with("gate:batch:"))
            {
                if k[prefix.len()..].starts_with("gate:dd:") {
                    n += 1; // one key per dedupe pair
                    continue;
                }
                let len: u64 = ::redis::cmd("HLEN")
                    .arg(k)
                    .query_async(&mut con)
                    .await
                    .expect("HLEN");
                n += len;
            }
            n
        }
    }
}

async fn make_embedded(s: StoreSettings) -> Harness {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = Durability {
        dir: dir.path().to_path_buf(),
        fsync: FsyncPolicy::Always,
        segment_bytes: 1 << 20,
        snapshot_interval_secs: 3600,
        snapshot_every_records: 1 << 40,
        storage: hotrank::store::storage::Disk::shared(),
    };
    let (store, _) = EmbeddedStore::open(d, s).expect("open");
    let store = Arc::new(store);
    Harness {
        store: store.clone(),
        probe: Probe::Embedded(store),
        _keep: Box::new(dir),
    }
}

/// A Redis store on `opts` (with the pipeline in front when `piped`);
/// `keep` is what keeps its server alive.
async fn redis_harness(
    opts: RedisOptions,
    s: StoreSettings,
    piped: bool,
    keep: Box<dyn std::any::Any + Send>,
) -> Harness {
    let store = Arc::new(RedisStore::connect(opts, s).expect("redis store"));
    // The suites simulate time (arrivals minutes apart in one run):
    // Redis's gate follows the events' arrival, as the embedded store's.
    store
        .gate_on_node_clocks()
        .await
        .expect("gate on node clocks");
    let under_test: Arc<dyn Store> = if piped {
        Arc::new(common::pipeline::inline_pipeline(store.clone()).await)
    } else {
        store.clone()
    };
    Harness {
        store: under_test,
        probe: Probe::Redis(store),
        _keep: keep,
    }
}

/// Each test gets a redis-server of its own (killed with the harness), so
/// tests run in parallel without sharing keys.
async fn own_redis(s: StoreSettings, seed_layout: bool, piped: bool) -> Harness {
    let server = common::redis::RedisServer::start();
    let opts = RedisOptions {
        url: server.url(),
        seed_layout,
        ..RedisOptions::default()
    };
    redis_harness(opts, s, piped, Box::new(server)).await
}

async fn make_redis(s: StoreSettings) -> Harness {
    own_redis(s, false, false).await
}

/// `[redis] layout = "seed"`: the seeds' keys beside hotrank's change
/// nothing the contract promises.
async fn make_redis_seed(s: StoreSettings) -> Harness {
    own_redis(s, true, false).await
}

/// Seed 002's pipeline (issue 14): ingest queued, gated by the filter
/// stage, applied by the count stage, drained after every call; the
/// probe reads the gate state the filter stage keeps.
async fn make_redis_pipeline(s: StoreSettings) -> Harness {
    own_redis(s, false, true).await
}

/// `[redis] shards = 4` (issue 13): every ranking, change log, activity
/// set and `articles:new` split over four article shards. On the
/// binary's shared redis-server, under a prefix of its own.
async fn make_redis_sharded(s: StoreSettings) -> Harness {
    redis_harness(common::redis::shared_site(4), s, false, Box::new(())).await
}

/// Issue 13: `shards = 3` with a cluster's key names (each shard and its
/// articles under a tag of their own, pipelines one per slot), on the
/// binary's shared redis-server (`RedisOptions::cluster_names`: the
/// sharded cluster layout whose writes do not all stay in one slot yet).
async fn make_redis_sharded_tagged(s: StoreSettings) -> Harness {
    let opts = RedisOptions {
        cluster_names: true,
        ..common::redis::shared_site(3)
    };
    redis_harness(opts, s, false, Box::new(())).await
}

/// Issue 13: one site over 3 shards on the binary's shared 3-primary
/// cluster.
async fn make_redis_cluster_sharded(s: StoreSettings) -> Harness {
    let opts = common::redis::shared_cluster_site(3);
    redis_harness(opts, s, false, Box::new(())).await
}

/// On the binary's shared 3-primary cluster, under a prefix of its own.
async fn make_redis_cluster(s: StoreSettings) -> Harness {
    let opts = RedisOptions {
        url: common::redis::RedisCluster::shared().url(),
        prefix: common::redis::unique_prefix(),
        cluster: true,
        ..RedisOptions::default()
    };
    redis_harness(opts, s, false, Box::new(())).await
}

fn id(s: &str) -> ArticleId {
    ArticleId::parse(s).expect("valid id")
}

/// A view by `visitor` at `ts`, from an IP of its own.
fn view(article: &str, visitor: u128, ts: Timestamp) -> Event {
    Event {
        ip: visitor as u64 ^ 0x5555,
        ..Event::view(id(article), visitor, ts)
    }
}

fn query(range: RangeSpec, limit: usize) -> HotQuery {
    HotQuery {
        explain: true,
        ..HotQuery::top(ModelKind::Gravity, range, limit)
    }
}

async fn verdicts(store: &dyn Store, events: Vec<Event>, now: Timestamp) -> Vec<Verdict> {
    store
        .ingest(events, now)
        .await
        .expect("ingest")
        .into_iter()
        .map(|o| o.expect("accepted").verdict)
        .collect()
}

/// `n` distinct visitors view `article` once each at `ts`.
async fn views(store: &dyn Store, article: &str, first_visitor: u128, n: u128, ts: Timestamp) {
    let events = (first_visitor..first_visitor + n)
        .map(|v| view(article, v, ts))
        .collect();
    let v = verdicts(store, events, ts).await;
    assert!(v.iter().all(|v| *v == Verdict::Counted), "{v:?}");
}

async fn publish(store: &dyn Store, article: &str, published_at: Timestamp) {
    publish_meta(
        store,
        article,
        ArticleMeta {
            published_at,
            ..ArticleMeta::default()
        },
    )
    .await;
}

async fn publish_meta(store: &dyn Store, article: &str, meta: ArticleMeta) {
    store.put_article(id(article), meta, T0).await.expect("put");
}

async fn top_ids(store: &dyn Store, q: &HotQuery, now: Timestamp) -> Vec<String> {
    store
        .hot(q, now)
        .await
        .expect("hot")
        .items
        .iter()
        .map(|i| i.id.to_string())
        .collect()
}

/// Seed 000: scores follow `(α·pv + β·uv)/(hours + base)^γ` exactly.
pub async fn seed000_gravity<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Harness>,
{
    let h = make(StoreSettings::default()).await;
    let s = &*h.store;
    publish(s, "a", T0 - 10 * 3600).await;
    publish(s, "b", T0 - 3600).await;
    views(s, "a", 0, 30, T0).await;
    views(s, "b", 100, 10, T0).await;
    // Visitor 100 again, after the dedupe window: PV grows, UV does not.
    let v = verdicts(s, vec![view("b", 100, T0 + 1000)], T0 + 1000).await;
    assert_eq!(v, [Verdict::Counted]);
    let now = T0 + 1800;
    let page = s
        .hot(&query(RangeSpec::Hours(72), 10), now)
        .await
        .expect("hot");
    assert_eq!(page.generated_at, now);
    let g = GravityParams::default();
    let score = |pv: f64, uv: f64, published: i64| {
        let hours = (now - published) as f64 / 3600.0;
        (g.alpha * pv + g.beta * uv) / (hours + g.base).powf(g.gamma)
    };
    let expect_a = score(30.0, 30.0, T0 - 10 * 3600);
    let expect_b = score(11.0, 10.0, T0 - 3600);
    assert!(expect_b > expect_a);
    let items = &page.items;
    assert_eq!(items.len(), 2);
    assert_eq!(items[0].id.as_str(), "b");
    assert_eq!((items[0].counters.pv, items[0].counters.uv), (11, 10));
    assert!(
        (items[0].score - expect_b).abs() < 1e-9,
        "{} vs {expect_b}",
        items[0].score
    );
    assert!((items[1].score - expect_a).abs() < 1e-9);
    assert_eq!(items[0].rank, 1);
    // The explanation rebuilds the score.
    let e = items[0].explain.as_ref().expect("explain");
    let rebuilt = (e.get("pvTerm").unwrap() + e.get("uvTerm").unwrap()) / e.get("decay").unwrap();
    assert_eq!(rebuilt, items[0].score);
    // Lifetime counters on the article.
    let a = s.article(&id("b"), now).await.unwrap().unwrap();
    assert_eq!((a.lifetime.pv, a.lifetime.uv), (11, 10));
}

/// The dedupe window follows event time and starts at the last counted view.
pub async fn dedupe_window<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Harness>,
{
    let h = make(StoreSettings::default()).await;
    let s = &*h.store;
    let v = |ts| view("a", 7, ts);
    assert_eq!(verdicts(s, vec![v(T0)], T0).await, [Verdict::Counted]);
    assert_eq!(
        verdicts(s, vec![v(T0 + 899)], T0 + 899).await,
        [Verdict::Duplicate]
    );
    assert_eq!(
        verdicts(s, vec![v(T0 + 900)], T0 + 900).await,
        [Verdict::Counted]
    );
    assert_eq!(
        verdicts(s, vec![v(T0 + 1000)], T0 + 1000).await,
        [Verdict::Duplicate]
    );
    // Another article or another visitor is not a duplicate.
    assert_eq!(
        verdicts(s, vec![view("b", 7, T0 + 1000)], T0 + 1000).await,
        [Verdict::Counted]
    );
    assert_eq!(
        verdicts(s, vec![view("a", 8, T0 + 1000)], T0 + 1000).await,
        [Verdict::Counted]
    );
    // Dwell reports are additive, never duplicates.
    let dwell = |ts| Event {
        kind: EventType::Dwell,
        seconds: 30,
        ..view("a", 7, ts)
    };
    assert_eq!(
        verdicts(s, vec![dwell(T0 + 1001), dwell(T0 + 1002)], T0 + 1002).await,
        [Verdict::Counted, Verdict::Counted]
    );
    let a = s.article(&id("a"), T0 + 1002).await.unwrap().unwrap();
    assert_eq!(a.lifetime.pv, 3);
    assert_eq!(a.lifetime.uv, 2);
    assert_eq!(a.quarantined.0[0], 2, "two duplicates tallied");
    assert_eq!(a.lifetime.dwell_seconds, 60);
}

/// Rate limits per visitor and per IP, in any 60 s.
pub async fn rate_limits<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Harness>,
{
    let settings = StoreSettings {
        visitor_limit_per_minute: 5,
        ip_limit_per_minute: 8,
        ..StoreSettings::default()
    };
    let h = make(settings).await;
    let s = &*h.store;
    // One visitor, 7 different articles within a second: 5 pass.
    let events: Vec<Event> = (0..7).map(|i| view(&format!("a{i}"), 1, T0)).collect();
    let v = verdicts(s, events, T0).await;
    assert_eq!(v.iter().filter(|v| **v == Verdict::Counted).count(), 5);
    assert_eq!(v[5..], [Verdict::RateLimited, Verdict::RateLimited]);
    // 60 s after the first, the window has room again.
    assert_eq!(
        verdicts(s, vec![view("z", 1, T0 + 60)], T0 + 60).await,
        [Verdict::Counted]
    );
    // One IP, many visitors: 8 pass in any minute.
    let events: Vec<Event> = (100..110)
        .map(|v| Event {
            ip: 42,
            ..view("b", v, T0 + 100)
        })
        .collect();
    let v = verdicts(s, events, T0 + 100).await;
    assert_eq!(v.iter().filter(|v| **v == Verdict::Counted).count(), 8);
    let b = s.article(&id("b"), T0 + 100).await.unwrap().unwrap();
    assert_eq!(b.lifetime.pv, 8);
    assert_eq!(b.quarantined.0[1], 2, "rate-limited tallied on the article");
}

/// Bots and replays never count; both are tallied.
pub async fn bots_and_replays<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Harness>,
{
    let h = make(StoreSettings::default()).await;
    let s = &*h.store;
    let bot = Event {
        bot: hotrank::crawler::Crawler::OTHER,
        ..view("a", 1, T0)
    };
    assert_eq!(verdicts(s, vec![bot], T0).await, [Verdict::Bot]);
    assert!(
        s.article(&id("a"), T0).await.unwrap().is_none(),
        "bots do not register articles"
    );
    let keyed = Event {
        event_id: Some(99),
        ..view("a", 2, T0)
    };
    assert_eq!(
        verdicts(s, vec![keyed.clone()], T0).await,
        [Verdict::Counted]
    );
    // A retry, even from another visitor or after the dedupe window.
    let retry = Event {
        ts: T0 + 5000,
        arrival_ms: (T0 + 5000) * 1000,
        ..keyed
    };
    assert_eq!(
        verdicts(s, vec![retry], T0 + 5000).await,
        [Verdict::Replayed]
    );
    let a = s.article(&id("a"), T0 + 5000).await.unwrap().unwrap();
    assert_eq!(a.lifetime.pv, 1);
    assert_eq!(a.quarantined.0[3], 1);
    let stats = s.stats(T0 + 5000, 24).await.unwrap();
    assert_eq!(stats.counted, 1);
    assert_eq!(stats.quarantined.0, [0, 0, 1, 1]);
    assert!(!stats.quarantine_by_hour.is_empty());
}

/// A window's UV is the union of its hourly sketches, not a sum, and the
/// window slides with `now`.
pub async fn windows<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Harness>,
{
    let h = make(StoreSettings::default()).await;
    let s = &*h.store;
    let t1 = T0 - T0 % 3600; // start of an hour
    views(s, "a", 0, 10, t1).await;
    views(s, "a", 5, 10, t1 + 3600).await; // visitors 5..15: 5 repeat
    let now = t1 + 3600 + 60;
    let page = s.hot(&query(RangeSpec::Hours(2), 10), now).await.unwrap();
    assert_eq!(
        (page.items[0].counters.pv, page.items[0].counters.uv),
        (20, 15)
    );
    let page = s.hot(&query(RangeSpec::Hours(1), 10), now).await.unwrap();
    assert_eq!(
        (page.items[0].counters.pv, page.items[0].counters.uv),
        (10, 10)
    );
    // Three hours later nothing is left in a 1 h window: not listed.
    let later = now + 3 * 3600;
    assert!(
        s.hot(&query(RangeSpec::Hours(1), 10), later)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // `all` lists every live article with its lifetime counters.
    let page = s.hot(&query(RangeSpec::All, 10), later).await.unwrap();
    assert_eq!(
        (page.items[0].counters.pv, page.items[0].counters.uv),
        (20, 15)
    );
}

/// Freshness: with no new events, time alone flips the order of an old
/// article with many views and a new one with few.
pub async fn order_flips_with_time<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Harness>,
{
    let h = make(StoreSettings::default()).await;
    let s = &*h.store;
    publish(s, "old", T0 - 100 * 3600).await;
    publish(s, "new", T0).await;
    views(s, "old", 0, 1000, T0).await;
    views(s, "new", 5000, 50, T0).await;
    for range in [RangeSpec::Hours(72), RangeSpec::All] {
        let q = query(range, 10);
        assert_eq!(top_ids(s, &q, T0 + 60).await, ["new", "old"], "{range}");
        // Query often in between, so any cached state is exercised.
        for h in 1..24 {
            top_ids(s, &q, T0 + h * 3600).await;
        }
        assert_eq!(
            top_ids(s, &q, T0 + 24 * 3600).await,
            ["old", "new"],
            "{range}"
        );
    }
}

/// Trimming: a ranking holds at most `ranking_cap` articles, and one that
/// fell out comes back when it rises again (by events or by time alone).
pub async fn trimming_keeps_risers<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Harness>,
{
    let settings = StoreSettings {
        ranking_cap: 3,
        ..StoreSettings::default()
    };
    let h = make(settings).await;
    let s = &*h.store;
    // Five articles, published now, with 50, 40, 30, 20, 10 viewers.
    for (i, n) in [50u128, 40, 30, 20, 10].into_iter().enumerate() {
        publish(s, &format!("p{i}"), T0).await;
        views(s, &format!("p{i}"), 1000 * i as u128, n, T0).await;
    }
    // An old article with many viewers: low score now, but it decays slowly.
    publish(s, "evergreen", T0 - 200 * 3600).await;
    views(s, "evergreen", 90_000, 3000, T0).await;
    let q = query(RangeSpec::Hours(72), 3);
    assert_eq!(top_ids(s, &q, T0 + 60).await, ["p0", "p1", "p2"]);
    // p4 gets a burst and rises to the top.
    views(s, "p4", 50_000, 100, T0 + 120).await;
    assert_eq!(top_ids(s, &q, T0 + 180).await, ["p4", "p0", "p1"]);
    // A day later, the evergreen article has overtaken the new ones by time alone.
    let later = T0 + 30 * 3600;
    let exact = {
        let g = GravityParams::default();
        let sc = |n: f64, published: i64| {
            (g.alpha * n + g.beta * n)
                / (((later - published) as f64 / 3600.0) + g.base).powf(g.gamma)
        };
        let mut all = vec![
            ("evergreen", sc(3000.0, T0 - 200 * 3600)),
            ("p4", sc(110.0, T0)),
            ("p0", sc(50.0, T0)),
            ("p1", sc(40.0, T0)),
        ];
        all.sort_by(|a, b| b.1.total_cmp(&a.1));
        all.into_iter()
            .take(3)
            .map(|(n, _)| n.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(exact[0], "evergreen");
    assert_eq!(top_ids(s, &q, later).await, exact);
}

/// Deleted articles leave every ranking; filters and per-author caps.
pub async fn delete_filters_and_authors<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Harness>,
{
    let h = make(StoreSettings::default()).await;
    let s = &*h.store;
    let meta = |author: &str, category: &str| ArticleMeta {
        author: Some(author.into()),
        category: Some(category.into()),
        published_at: T0,
        ..ArticleMeta::default()
    };
    publish_meta(s, "a1", meta("ann", "tech")).await;
    publish_meta(s, "a2", meta("ann", "tech")).await;
    publish_meta(s, "a3", meta("ann", "life")).await;
    publish_meta(s, "b1", meta("bob", "tech")).await;
    for (i, a) in ["a1", "a2", "a3", "b1"].into_iter().enumerate() {
        views(s, a, 100 * i as u128, 40 - 10 * i as u128, T0).await;
    }
    let mut q = query(RangeSpec::Hours(24), 10);
    assert_eq!(top_ids(s, &q, T0 + 1).await, ["a1", "a2", "a3", "b1"]);
    q.per_author = Some(1);
    assert_eq!(top_ids(s, &q, T0 + 1).await, ["a1", "b1"]);
    q.per_author = None;
    q.category = Some("tech".into());
    assert_eq!(top_ids(s, &q, T0 + 1).await, ["a1", "a2", "b1"]);
    assert!(s.delete_article(&id("a1"), T0 + 2).await.unwrap());
    assert!(!s.delete_article(&id("a1"), T0 + 2).await.unwrap());
    assert_eq!(top_ids(s, &q, T0 + 3).await, ["a2", "b1"]);
    assert!(s.article(&id("a1"), T0 + 3).await.unwrap().is_none());
    // Re-creating it brings it back with its counters.
    publish_meta(s, "a1", meta("ann", "tech")).await;
    assert_eq!(top_ids(s, &q, T0 + 4).await, ["a1", "a2", "b1"]);
    // Newest first.
    publish(s, "fresh", T0 + 10).await;
    let mut nq = query(RangeSpec::Hours(24), 2);
    let page = s.newest(&nq, T0 + 20).await.unwrap();
    assert_eq!(page.items[0].id.as_str(), "fresh");
    nq.cursor = page.cursor.clone();
    let next = s.newest(&nq, T0 + 20).await.unwrap();
    assert_eq!(next.items.len(), 2);
    assert!(
        next.items
            .iter()
            .all(|i| page.items.iter().all(|p| p.id != i.id))
    );
}

/// Pages of one cursor never repeat or skip an item, even when the counters
/// change between pages.
pub async fn cursor_paging<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Harness>,
{
    let h = make(StoreSettings::default()).await;
    let s = &*h.store;
    for i in 0..30u128 {
        views(s, &format!("c{i:02}"), i * 1000, 30 - i, T0).await;
    }
    let mut q = query(RangeSpec::Hours(24), 7);
    let mut seen = Vec::new();
    let first = s.hot(&q, T0 + 10).await.unwrap();
    seen.extend(first.items.iter().map(|i| i.id.to_string()));
    q.cursor = first.cursor.clone();
    // A burst moves the last article to the top between pages.
    views(s, "c29", 500_000, 100, T0 + 11).await;
    while let Some(c) = q.cursor.take() {
        q.cursor = Some(c);
        let page = s.hot(&q, T0 + 12).await.unwrap();
        assert_eq!(page.generated_at, T0 + 10, "same snapshot");
        seen.extend(page.items.iter().map(|i| i.id.to_string()));
        q.cursor = page.cursor;
    }
    let expected: Vec<String> = (0..30).map(|i| format!("c{i:02}")).collect();
    assert_eq!(seen, expected);
    // A cursor from another query is refused.
    let mut other = query(RangeSpec::Hours(48), 7);
    other.cursor = first.cursor;
    assert!(s.hot(&other, T0 + 12).await.is_err());
}

/// `require_known_articles` refuses events for unknown articles.
pub async fn known_articles_only<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Harness>,
{
    let settings = StoreSettings {
        require_known_articles: true,
        ..StoreSettings::default()
    };
    let h = make(settings).await;
    let s = &*h.store;
    publish(s, "known", T0).await;
    let out = s
        .ingest(vec![view("known", 1, T0), view("stranger", 1, T0)], T0)
        .await
        .unwrap();
    assert_eq!(out[0].map(|o| o.verdict), Ok(Verdict::Counted));
    assert_eq!(out[1], Err(IngestReject::UnknownArticle));
}

/// Issue 10: an `eventId` is remembered only for an event that changed
/// something. A flood of refused events (bots, duplicates, rate limited)
/// with unique ids leaves the gate's state exactly as it was.
pub async fn refused_events_store_nothing<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Harness>,
{
    let settings = StoreSettings {
        visitor_limit_per_minute: 5,
        ip_limit_per_minute: 0,
        ..StoreSettings::default()
    };
    let h = make(settings).await;
    let s = &*h.store;
    publish(s, "a", T0 - 3600).await;
    let keyed = |ev: Event, n: u128| Event {
        event_id: Some((1 << 100) | n),
        ..ev
    };
    assert_eq!(
        verdicts(s, vec![keyed(view("a", 1, T0), 0)], T0).await,
        [Verdict::Counted]
    );
    let budget: Vec<Event> = (0..5).map(|i| view(&format!("b{i}"), 2, T0)).collect();
    assert!(
        verdicts(s, budget, T0)
            .await
            .iter()
            .all(|v| *v == Verdict::Counted)
    );
    let before = gate_entries(&h).await;
    assert!(before >= 3, "the counted events left gate state: {before}");
    let mut n = 0u128;
    for _ in 0..100 {
        let events: Vec<Event> = (0..1000)
            .map(|i| {
                n += 1;
                let ev = match i % 3 {
                    0 => Event {
                        bot: hotrank::crawler::Crawler::OTHER,
                        ..view("a", 1_000_000 + n, T0 + 1)
                    },
                    1 => view("a", 1, T0 + 1),
                    _ => view("c", 2, T0 + 1),
                };
                keyed(ev, n)
            })
            .collect();
        let v = verdicts(s, events, T0 + 1).await;
        assert!(v.iter().all(|v| *v != Verdict::Counted), "{v:?}");
    }
    assert_eq!(
        gate_entries(&h).await,
        before,
        "100,000 refused events with unique eventIds left gate state behind"
    );
    let stats = s.stats(T0 + 1, 1).await.unwrap();
    assert_eq!(stats.quarantined.total(), 100_000);
    assert_eq!(stats.counted, 6);
    assert!(s.article(&id("c"), T0 + 1).await.unwrap().is_none());
}

/// Issue 10: past `max_articles`, untrusted events for new articles are
/// refused (and change nothing) while known articles keep counting; a
/// trusted backend and `PUT` can still create articles.
pub async fn max_articles_guard<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Harness>,
{
    let h = make(StoreSettings {
        max_articles: 3,
        ..StoreSettings::default()
    })
    .await;
    let s = &*h.store;
    publish(s, "known", T0 - 3600).await;
    views(s, "b", 0, 1, T0).await;
    views(s, "c", 10, 1, T0).await;
    let out = s
        .ingest(
            vec![
                view("d", 20, T0),
                view("known", 21, T0),
                view("b", 22, T0),
                Event {
                    trusted: true,
                    ..view("e", 23, T0)
                },
                view("f", 24, T0),
            ],
            T0,
        )
        .await
        .unwrap();
    assert_eq!(out[0], Err(IngestReject::TooManyArticles));
    assert_eq!(out[1].map(|o| o.verdict), Ok(Verdict::Counted));
    assert_eq!(out[2].map(|o| o.verdict), Ok(Verdict::Counted));
    assert_eq!(out[3].map(|o| o.verdict), Ok(Verdict::Counted));
    assert_eq!(out[4], Err(IngestReject::TooManyArticles));
    assert!(s.article(&id("d"), T0).await.unwrap().is_none());
    assert_eq!(s.stats(T0, 1).await.unwrap().counted, 5);
    // The refused view took nothing: the same visitor's next view counts.
    assert_eq!(
        verdicts(s, vec![view("b", 20, T0 + 1)], T0 + 1).await,
        [Verdict::Counted]
    );
    publish(s, "g", T0).await;
    assert!(s.article(&id("g"), T0).await.unwrap().is_some());
}

/// Issue 10: a visitor whose counted views reach more than
/// `bot_articles_per_minute` distinct articles in a minute is quarantined
/// as `bot` from then on (for `bot_quarantine_secs`); a reader at human
/// pace never is.
pub async fn behaviour_bots<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Harness>,
{
    let h = make(StoreSettings {
        bot_articles_per_minute: 3,
        bot_quarantine_secs: 600,
        ..StoreSettings::default()
    })
    .await;
    let s = &*h.store;
    let crawl: Vec<Event> = (0..4)
        .map(|i| view(&format!("a{i}"), 7, T0 + i * 10))
        .collect();
    assert_eq!(
        verdicts(s, crawl, T0 + 30).await,
        [
            Verdict::Counted,
            Verdict::Counted,
            Verdict::Counted,
            Verdict::Bot
        ]
    );
    assert!(s.article(&id("a3"), T0 + 30).await.unwrap().is_none());
    // From then on, whatever it sends, long after the minute.
    let later = vec![
        view("z", 7, T0 + 500),
        Event {
            kind: EventType::Like,
            ..view("a1", 7, T0 + 500)
        },
    ];
    assert_eq!(
        verdicts(s, later, T0 + 500).await,
        [Verdict::Bot, Verdict::Bot]
    );
    // Three articles a minute, for three minutes: a reader.
    let reader: Vec<Event> = (0..9)
        .map(|i| view(&format!("r{i}"), 8, T0 + i * 21))
        .collect();
    assert!(
        verdicts(s, reader, T0 + 200)
            .await
            .iter()
            .all(|v| *v == Verdict::Counted)
    );
    // The quarantine ends.
    assert_eq!(
        verdicts(s, vec![view("a3", 7, T0 + 631)], T0 + 631).await,
        [Verdict::Counted]
    );
    let stats = s.stats(T0 + 631, 1).await.unwrap();
    assert_eq!(stats.quarantined.0[2], 3, "quarantined as bot");
    assert_eq!(stats.counted, 13);
}

macro_rules! contract_suite {
    ($store:ident, $make:path) => {
        mod $store {
            use super::*;
            #[tokio::test]
            async fn seed000_gravity() {
                super::seed000_gravity($make).await
            }
            #[tokio::test]
            async fn dedupe_window() {
                super::dedupe_window($make).await
            }
            #[tokio::test]
            async fn rate_limits() {
                super::rate_limits($make).await
            }
            #[tokio::test]
            async fn bots_and_replays() {
                super::bots_and_replays($make).await
            }
            #[tokio::test]
            async fn windows() {
                super::windows($make).await
            }
            #[tokio::test]
            async fn order_flips_with_time() {
                super::order_flips_with_time($make).await
            }
            #[tokio::test]
            async fn trimming_keeps_risers() {
                super::trimming_keeps_risers($make).await
            }
            #[tokio::test]
            async fn delete_filters_and_authors() {
                super::delete_filters_and_authors($make).await
            }
            #[tokio::test]
            async fn cursor_paging() {
                super::cursor_paging($make).await
            }
            #[tokio::test]
            async fn known_articles_only() {
                super::known_articles_only($make).await
            }
            #[tokio::test]
            async fn refused_events_store_nothing() {
                super::refused_events_store_nothing($make).await
            }
            #[tokio::test]
            async fn max_articles_guard() {
                super::max_articles_guard($make).await
            }
            #[tokio::test]
            async fn behaviour_bots() {
                super::behaviour_bots($make).await
            }
            #[tokio::test]
            async fn site_figures() {
                super::site::site_figures($make).await
            }
        }
    };
}

contract_suite!(embedded, make_embedded);
contract_suite!(redis, make_redis);
contract_suite!(redis_seed_layout, make_redis_seed);
contract_suite!(redis_cluster, make_redis_cluster);
contract_suite!(redis_cluster_sharded, make_redis_cluster_sharded);
contract_suite!(redis_sharded, make_redis_sharded);
contract_suite!(redis_sharded_tagged, make_redis_sharded_tagged);
contract_suite!(redis_pipeline, make_redis_pipeline);
