//! The ranking oracle: random streams of events, metadata edits, deletes,
//! posts, votes, clock moves (hour and midnight turns, steps back) and
//! queries (every model, ranges, filters, `perAuthor`, offsets, cursors),
//! driven through a store with a manual clock; every answer is compared
//! with a brute-force recomputation from the raw events.
//!
//! The oracle recomputes counters from the events the store counted (the
//! gate's own decisions are the contract suite's business) and UV with the
//! same HyperLogLog over the window's visitors (a window's UV is defined as
//! that sketch's count), then scores every live article with the models'
//! pure functions at the answer's `generatedAt`, sorts, caps per author and
//! pages. Nothing of the store's ranking code is reused.
//!
//! CI runs a fixed number of cases from a fixed seed; `ORACLE_CASES=N`
//! runs more per seed, `ORACLE_SEED=S` starts from another seed, and
//! `ORACLE_MINUTES=M` (the long run) goes on, seed after seed, for M
//! minutes.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

use hotrank::model::{
    ArticleId, ArticleMeta, Counters, Decay, Event, EventType, HotQuery, ModelParams, RangeSpec,
    RisingSpec, Scale, Timestamp, Trend, Verdict, VoteDirection, VoteOutcome, hour_of,
};
use hotrank::score::{ModelKind, Models};
use hotrank::sketch::{HLL_SEED, Hll, murmur64a};
use hotrank::store::embedded::EmbeddedStore;
use hotrank::store::redis::{RedisOptions, RedisStore};
use hotrank::store::{Store, StoreSettings};

thread_local! {
    /// Answers checked of rising rankings, of half-life ones and of ones
    /// scaled by category by this test's thread (cases run on it:
    /// `Runtime::block_on`), for the summary line.
    static CHECKED: std::cell::Cell<(usize, usize, usize)> =
        const { std::cell::Cell::new((0, 0, 0)) };
}

/// Tallies one checked answer of `q` by the model options it exercised.
fn tally(q: &HotQuery) {
    let (rising, half, scaled) = CHECKED.get();
    CHECKED.set((
        rising + usize::from(q.model == ModelKind::Rising),
        half + usize::from(q.params.decay != Decay::Model),
        scaled + usize::from(q.params.scale == Scale::Category),
    ));
}

/// A Sunday 23:00 UTC: midnight and hour turns come early in every case.
const START: Timestamp = 1_763_852_400;
const ARTICLES: usize = 10;
const VISITORS: u128 = 12;
const AUTHORS: [Option<&str>; 4] = [Some("ann"), Some("bob"), Some("cy"), None];
const CATEGORIES: [Option<&str>; 3] = [Some("news"), Some("tech"), None];
const GROUPS: [&str; 2] = ["rust", "go"];

#[derive(Debug, Clone)]
enum Op {
    Event {
        kind: EventType,
        article: usize,
        visitor: u128,
        /// Event time relative to now (up to 300 s ahead).
        dt: i64,
        seconds: u32,
    },
    /// Forward by seconds.
    Advance(i64),
    /// To one second before the next hour (and midnight if `day`).
    ToTurn {
        day: bool,
    },
    /// The clock steps back.
    StepBack(i64),
    Put {
        article: usize,
        author: usize,
        category: usize,
        group: Option<usize>,
        /// publishedAt relative to now.
        published: i64,
    },
    Delete(usize),
    Post {
        author: usize,
    },
    Vote {
        post: usize,
        user: u128,
        up: bool,
    },
    Query(Q),
    Pages(Q),
}

#[derive(Debug, Clone)]
struct Q {
    model: ModelKind,
    range: RangeSpec,
    category: Option<usize>,
    group: Option<usize>,
    per_author: Option<usize>,
    limit: usize,
    offset: usize,
    /// Query through the second node (Redis), or through both at once.
    node: u8,
    /// Rising's window, baseline and min; gravity's and weighted's decay
    /// (the others ignore them).
    params: ModelParams,
}

const KINDS: [EventType; 6] = [
    EventType::View,
    EventType::View,
    EventType::Dwell,
    EventType::Like,
    EventType::Comment,
    EventType::Share,
];

fn op(max_hours: u32) -> impl Strategy<Value = Op> {
    let ranges: Vec<RangeSpec> = [1, 2, 3, 24, 25, 72, 168, 169, 190, 2160]
        .into_iter()
        .filter(|h| *h <= max_hours)
        .map(RangeSpec::Hours)
        .chain([RangeSpec::All])
        .collect();
    let q = (
        // Rising three times as often: its bounds change at hour turns.
        prop::sample::select(
            (ModelKind::ALL.iter().copied())
                .chain([ModelKind::Rising; 2])
                .collect::<Vec<_>>(),
        ),
        prop::sample::select(ranges),
        prop::option::weighted(0.3, 0..2usize),
        prop::option::weighted(0.2, 0..2usize),
        prop::option::weighted(0.3, 1..3usize),
        1..6usize,
        prop::sample::select(vec![0usize, 0, 0, 1, 3]),
        (0..3u8, params()),
    )
        .prop_map(
            |(model, range, category, group, per_author, limit, offset, (node, params))| Q {
                model,
                range,
                category,
                group,
                per_author,
                limit,
                offset,
                node,
                params,
            },
        );
    prop_oneof![
        12 => (0..KINDS.len(), 0..ARTICLES, 0..VISITORS, prop::sample::select(vec![0i64, 0, -60, -1800, -7200, -90_000, 120, 300, -29 * 86_400, -20 * 86_400]), 1..400u32)
            .prop_map(|(k, article, visitor, dt, seconds)| Op::Event { kind: KINDS[k], article, visitor, dt, seconds }),
        3 => prop::sample::select(vec![1i64, 30, 600, 1800, 3599, 3600, 7200, 86_400]).prop_map(Op::Advance),
        2 => any::<bool>().prop_map(|day| Op::ToTurn { day }),
        1 => prop::sample::select(vec![1i64, 3, 20, 400]).prop_map(Op::StepBack),
        2 => (0..ARTICLES, 0..AUTHORS.len(), 0..CATEGORIES.len(), prop::option::of(0..GROUPS.len()), prop::sample::select(vec![0i64, -3600, -50_000, 600]))
            .prop_map(|(article, author, category, group, published)| Op::Put { article, author, category, group, published }),
        1 => (0..ARTICLES).prop_map(Op::Delete),
        1 => (0..AUTHORS.len()).prop_map(|author| Op::Post { author }),
        2 => (0..4usize, 0..6u128, prop::bool::weighted(0.8)).prop_map(|(post, user, up)| Op::Vote { post, user, up }),
        5 => q.clone().prop_map(Op::Query),
        1 => q.prop_map(Op::Pages),
    ]
}

/// Rising's parameters and half-lives, from a few each so that queries
/// meet the same ranking again (its identity holds them) across hour
/// turns: the default, windows of 2-5 hours over baselines that empty
/// out, `min` of 1 and above; half-lives from an hour to days; and a
/// third of the queries scaled by category.
fn params() -> impl Strategy<Value = ModelParams> + Clone {
    let spec = |window, baseline, min| RisingSpec {
        window,
        baseline,
        min,
    };
    (
        prop::sample::select(vec![
            RisingSpec::default(),
            spec(2, 1, 1),
            spec(3, 2, 1),
            spec(5, 24, 2),
        ]),
        prop::option::weighted(0.4, prop::sample::select(vec![1u32, 6, 48])),
        prop::bool::weighted(0.35),
    )
        .prop_map(|(rising, half, scaled)| ModelParams {
            rising,
            decay: half.map_or(Decay::Model, Decay::HalfLife),
            scale: if scaled { Scale::Category } else { Scale::None },
        })
}

/// What the oracle knows of one article.
#[derive(Debug, Clone, Default)]
struct Truth {
    meta: ArticleMeta,
    deleted: bool,
    /// Counted events: (kind, visitor, ts, seconds).
    events: Vec<(EventType, u128, Timestamp, u32)>,
    ups: u64,
    downs: u64,
}

impl Truth {
    fn counters(&self, range: RangeSpec, at: Timestamp) -> Counters {
        let mut c = Counters {
            ups: self.ups,
            downs: self.downs,
            ..Counters::default()
        };
        let mut uv = Hll::new();
        for &(kind, visitor, ts, seconds) in &self.events {
            if !range.contains_hour(hour_of(ts), at) {
                continue;
            }
            match kind {
                EventType::View => {
                    c.pv += 1;
                    uv.add_hash(murmur64a(&visitor.to_le_bytes(), HLL_SEED));
                }
                EventType::Dwell => {
                    c.dwell_reports += 1;
                    c.dwell_seconds += u64::from(seconds);
                }
                EventType::Like => c.likes += 1,
                EventType::Comment => c.comments += 1,
                EventType::Favorite => c.favorites += 1,
                EventType::Share => c.shares += 1,
            }
        }
        c.uv = uv.count();
        c
    }

    /// Rising's observed and expected views at `at`, counted from the
    /// events: views in the window's hours, and in the baseline's before
    /// them scaled to the window.
    fn trend(&self, spec: RisingSpec, at: Timestamp) -> Trend {
        let now = hour_of(at);
        let (w, b) = (i64::from(spec.window), i64::from(spec.baseline));
        let views = |first: i64, last: i64| {
            (self.events.iter())
                .filter(|e| e.0 == EventType::View && (first..=last).contains(&hour_of(e.2)))
                .count() as u64
        };
        let base = views(now - w - b + 1, now - w);
        Trend {
            observed: views(now - w + 1, now),
            expected: base as f64 * f64::from(spec.window) / f64::from(spec.baseline),
        }
    }
}

struct Oracle {
    articles: HashMap<ArticleId, Truth>,
    posts: Vec<ArticleId>,
    models: Models,
    /// Every counted event's time, with its article's category when it
    /// was counted (`scale=category`).
    category_events: Vec<(Option<String>, Timestamp)>,
}

/// One expected item: id, score, counters.
type Expected = (ArticleId, f64, Counters);

impl Oracle {
    fn query(&self, q: &HotQuery, at: Timestamp) -> Vec<Expected> {
        let every = q.model.lists_every_live_article();
        let range = if every { RangeSpec::All } else { q.range };
        let mut all: Vec<(Expected, Option<String>)> = Vec::new();
        for (id, t) in &self.articles {
            let m = &t.meta;
            if t.deleted
                || q.category
                    .as_ref()
                    .is_some_and(|c| m.category.as_ref() != Some(c))
                || q.group.as_ref().is_some_and(|g| !m.groups.contains(g))
            {
                continue;
            }
            let c = t.counters(range, at);
            if matches!(range, RangeSpec::Hours(_)) && !c.is_active() {
                continue;
            }
            let trend = (q.model == ModelKind::Rising).then(|| t.trend(q.params.rising, at));
            if trend.is_some_and(|t| t.observed < q.params.rising.min) {
                continue;
            }
            let mut score = (self.models).score(q.model, &q.params, &c, m, trend.as_ref(), at);
            if q.params.scale == Scale::Category {
                score /= (2.0 + self.category_events(m.category.as_deref(), at) as f64).log10();
            }
            all.push(((id.clone(), score, c), m.author.clone()));
        }
        all.sort_by(|a, b| b.0.1.total_cmp(&a.0.1).then_with(|| a.0.0.cmp(&b.0.0)));
        let mut per: HashMap<String, usize> = HashMap::new();
        all.into_iter()
            .filter(|(_, author)| match (q.per_author, author) {
                (Some(cap), Some(a)) => {
                    let n = per.entry(a.clone()).or_default();
                    *n += 1;
                    *n <= cap
                }
                _ => true,
            })
            .map(|(e, _)| e)
            .collect()
    }
}

impl Oracle {
    /// Counted events of `category` in the 30 UTC days to `at` (`at`'s day
    /// up to its hour, and the 29 days before), counted one by one.
    fn category_events(&self, category: Option<&str>, at: Timestamp) -> u64 {
        let first_hour = (at.div_euclid(86_400) - 29) * 24;
        (self.category_events.iter())
            .filter(|(c, ts)| {
                c.as_deref().unwrap_or("") == category.unwrap_or("")
                    && (first_hour..=hour_of(at)).contains(&hour_of(*ts))
            })
            .count() as u64
    }
}

fn aid(i: usize) -> ArticleId {
    ArticleId::parse(&format!("a{i}")).unwrap()
}

fn settings() -> StoreSettings {
    // The gate's limits are the contract suite's business: keep them out
    // of the way so most events count.
    let mut s = StoreSettings {
        visitor_limit_per_minute: 1_000_000,
        ip_limit_per_minute: 1_000_000,
        dedupe_window_secs: 600,
        // Few live rankings and tiny build chunks: evictions, rebuilds and
        // chunked builds happen all the time.
        max_rankings: 4,
        build_chunk: 3,
        ..StoreSettings::default()
    };
    s.models.votes.allow_down_votes = true;
    s
}

/// The stores under test: one or two nodes over the same state.
struct Nodes {
    a: Arc<dyn Store>,
    b: Arc<dyn Store>,
}

fn to_query(q: &Q) -> HotQuery {
    let rising = q.model == ModelKind::Rising;
    HotQuery {
        model: q.model,
        // Rising ranks over its window (the API sets the range so).
        range: if rising {
            RangeSpec::Hours(q.params.rising.window)
        } else {
            q.range
        },
        offset: q.offset,
        limit: q.limit,
        category: q.category.and_then(|i| CATEGORIES[i].map(str::to_string)),
        kind: None,
        group: q.group.map(|g| GROUPS[g].to_string()),
        per_author: q.per_author,
        cursor: None,
        explain: false,
        params: q.params.of(q.model),
    }
}

fn check_page(
    what: &str,
    got: &[hotrank::model::RankedItem],
    want: &[Expected],
    first_rank: usize,
) -> Result<(), TestCaseError> {
    let got_ids: Vec<&str> = got.iter().map(|i| i.id.as_str()).collect();
    let want_ids: Vec<&str> = want.iter().map(|i| i.0.as_str()).collect();
    prop_assert_eq!(&got_ids, &want_ids, "{}: wrong items or order", what);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        prop_assert_eq!(g.rank, first_rank + i, "{}: rank", what);
        prop_assert_eq!(g.counters, w.2, "{}: counters of {}", what, w.0);
        let close = (g.score - w.1).abs() <= 1e-9 * w.1.abs().max(1.0);
        prop_assert!(close, "{}: score of {}: {} != {}", what, w.0, g.score, w.1);
    }
    Ok(())
}

async fn run_case(nodes: &Nodes, ops: &[Op]) -> Result<usize, TestCaseError> {
    let mut o = Oracle {
        articles: HashMap::new(),
        posts: Vec::new(),
        models: settings().models,
        category_events: Vec::new(),
    };
    let mut now = START;
    // The latest clock reading so far: no answer is from after it.
    let mut latest = START;
    let mut checks = 0;
    let mut voted: HashSet<(usize, u128)> = HashSet::new();
    for (step, op) in ops.iter().enumerate() {
        latest = latest.max(now);
        match op {
            Op::Event {
                kind,
                article,
                visitor,
                dt,
                seconds,
            } => {
                let ts = now + dt;
                let ev = Event {
                    kind: *kind,
                    article: aid(*article),
                    visitor: *visitor,
                    ip: *visitor as u64,
                    ts,
                    arrival_ms: now * 1000,
                    event_id: None,
                    seconds: if *kind == EventType::Dwell {
                        *seconds
                    } else {
                        0
                    },
                    bot: hotrank::crawler::Crawler::NONE,
                    trusted: false,
                    net: 0,
                };
                let out = nodes.a.ingest(vec![ev.clone()], now).await.unwrap();
                let Ok(outcome) = out[0] else {
                    return Err(TestCaseError::fail("event refused"));
                };
                if outcome.verdict == Verdict::Counted {
                    let ts = ts.min(now);
                    let t = o
                        .articles
                        .entry(ev.article.clone())
                        .or_insert_with(|| Truth {
                            meta: ArticleMeta {
                                published_at: ts,
                                ..ArticleMeta::default()
                            },
                            ..Truth::default()
                        });
                    t.events.push((*kind, *visitor, ts, ev.seconds));
                    let category = t.meta.category.clone();
                    o.category_events.push((category, ts));
                }
            }
            Op::Advance(s) => now += s,
            Op::ToTurn { day } => {
                let unit = if *day { 86_400 } else { 3600 };
                now = (now.div_euclid(unit) + 1) * unit - 1;
            }
            Op::StepBack(s) => now -= s,
            Op::Put {
                article,
                author,
                category,
                group,
                published,
            } => {
                let id = aid(*article);
                let meta = ArticleMeta {
                    title: Some(format!("t{article}")),
                    author: AUTHORS[*author].map(str::to_string),
                    category: CATEGORIES[*category].map(str::to_string),
                    groups: group
                        .map(|g| vec![GROUPS[g].to_string()])
                        .unwrap_or_default(),
                    published_at: now + published,
                    ..ArticleMeta::default()
                };
                nodes
                    .a
                    .put_article(id.clone(), meta.clone(), now)
                    .await
                    .unwrap();
                let t = o.articles.entry(id).or_default();
                t.meta = meta;
                // PUT brings a deleted article back.
                t.deleted = false;
            }
            Op::Delete(article) => {
                let id = aid(*article);
                let gone = nodes.b.delete_article(&id, now).await.unwrap();
                if let Some(t) = o.articles.get_mut(&id) {
                    prop_assert_eq!(gone, !t.deleted, "delete of {}", id);
                    t.deleted = true;
                }
            }
            Op::Post { author } => {
                let meta = ArticleMeta {
                    title: Some("posted".into()),
                    author: AUTHORS[*author].map(str::to_string),
                    published_at: now,
                    ..ArticleMeta::default()
                };
                let id = nodes
                    .a
                    .post_article(meta.clone(), 999u128.into(), now)
                    .await
                    .unwrap();
                let stored = nodes.a.article(&id, now).await.unwrap().expect("posted");
                o.posts.push(id.clone());
                let t = o.articles.entry(id).or_default();
                t.meta = stored.meta;
                t.ups = stored.lifetime.ups;
                t.downs = stored.lifetime.downs;
            }
            Op::Vote { post, user, up } => {
                let Some(id) = o.posts.get(*post).cloned() else {
                    continue;
                };
                let dir = if *up {
                    VoteDirection::Up
                } else {
                    VoteDirection::Down
                };
                let out = nodes.b.vote(&id, (*user).into(), dir, now).await.unwrap();
                if let VoteOutcome::Counted { .. } = out {
                    prop_assert!(voted.insert((*post, *user)), "second vote counted");
                    let t = o.articles.get_mut(&id).unwrap();
                    if *up {
                        t.ups += 1;
                    } else {
                        t.downs += 1;
                    }
                }
            }
            Op::Query(q) => {
                let hq = to_query(q);
                let mut answers = Vec::new();
                match q.node {
                    0 => answers.push(nodes.a.hot(&hq, now).await.unwrap()),
                    1 => answers.push(nodes.b.hot(&hq, now).await.unwrap()),
                    _ => {
                        let (x, y) = tokio::join!(nodes.a.hot(&hq, now), nodes.b.hot(&hq, now));
                        answers.push(x.unwrap());
                        answers.push(y.unwrap());
                    }
                }
                for page in answers {
                    let at = page.generated_at;
                    prop_assert!(
                        at >= now,
                        "step {}: answer at {} before now {}",
                        step,
                        at,
                        now
                    );
                    // ... nor after the latest clock reading the store saw.
                    prop_assert!(at <= latest, "step {}: answer from the future", step);
                    let want = o.query(&hq, at);
                    let want: Vec<Expected> =
                        want.into_iter().skip(hq.offset).take(hq.limit).collect();
                    check_page(
                        &format!("step {step} {q:?}"),
                        &page.items,
                        &want,
                        hq.offset + 1,
                    )?;
                    tally(&hq);
                    checks += 1;
                }
            }
            Op::Pages(q) => {
                let mut hq = to_query(q);
                hq.offset = 0;
                hq.limit = 2;
                let first = nodes.a.hot(&hq, now).await.unwrap();
                let at = first.generated_at;
                prop_assert!(at >= now && at <= latest);
                let want = o.query(&hq, at);
                // A snapshot holds the first pages exactly as at generatedAt.
                let exact_depth = hotrank::rank::pages::first_depth(&hq, 1000) - 1;
                let mut seen: Vec<hotrank::model::RankedItem> = first.items.clone();
                let mut cursor = first.cursor.clone();
                let mut pages = 1;
                while let Some(c) = cursor.take() {
                    // Cursors continue on either node.
                    hq.cursor = Some(c);
                    let node = if pages % 2 == 1 { &nodes.b } else { &nodes.a };
                    let p = node.hot(&hq, now).await.unwrap();
                    prop_assert_eq!(p.generated_at, at, "a cursor keeps its snapshot's time");
                    seen.extend(p.items);
                    cursor = p.cursor;
                    pages += 1;
                    prop_assert!(pages < 200, "endless paging");
                }
                let ids: Vec<&str> = seen.iter().map(|i| i.id.as_str()).collect();
                let unique: HashSet<&str> = ids.iter().copied().collect();
                prop_assert_eq!(
                    unique.len(),
                    ids.len(),
                    "step {}: repeats in {:?}",
                    step,
                    ids
                );
                let n = exact_depth.min(seen.len()).min(want.len());
                check_page(
                    &format!("step {step} pages {q:?}"),
                    &seen[..n],
                    &want[..n],
                    1,
                )?;
                if let Some(cap) = hq.per_author {
                    let mut per: HashMap<&str, usize> = HashMap::new();
                    for i in &seen {
                        if let Some(a) = i.meta.author.as_deref() {
                            *per.entry(a).or_default() += 1;
                        }
                    }
                    prop_assert!(per.values().all(|n| *n <= cap), "perAuthor across pages");
                }
                // Nothing the snapshot time ranks is lost in paging: when
                // the list ended, every article ranked then was listed or
                // only entered later.
                tally(&hq);
                checks += 1;
            }
        }
    }
    Ok(checks)
}

fn cases() -> u32 {
    std::env::var("ORACLE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

fn base_seed() -> u64 {
    std::env::var("ORACLE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_0011)
}

fn runner(seed: u64) -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_iters: 2000,
        ..Config::default()
    })
}

/// Runs the oracle over fresh nodes made by `make` for every case: once
/// from the base seed, or (`ORACLE_MINUTES=M`, the long run) seed after
/// seed until M minutes have passed.
fn drive<F>(name: &str, max_hours: u32, make: F)
where
    F: Fn(u64) -> Nodes,
{
    let rt = tokio::runtime::Runtime::new().unwrap();
    let deadline = std::env::var("ORACLE_MINUTES")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(|m| std::time::Instant::now() + std::time::Duration::from_secs(60 * m));
    let total = std::sync::atomic::AtomicUsize::new(0);
    let case = std::sync::atomic::AtomicU64::new(0);
    let mut seed = base_seed();
    loop {
        let result = runner(seed).run(&prop::collection::vec(op(max_hours), 20..120), |ops| {
            let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let nodes = {
                let _in = rt.enter();
                make(n)
            };
            let checks = rt.block_on(run_case(&nodes, &ops))?;
            total.fetch_add(checks, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        });
        if let Err(e) = result {
            panic!("{name} (seed {seed}): {e}");
        }
        seed += 1;
        if deadline.is_none_or(|d| std::time::Instant::now() >= d) {
            break;
        }
    }
    let cases = case.into_inner();
    let checks = total.into_inner();
    let (rising, half, scaled) = CHECKED.take();
    eprintln!(
        "{name}: {cases} cases, {checks} answers checked ({rising} rising, {half} with a half-life, {scaled} scaled by category)"
    );
    assert!(
        rising > 0 && half > 0 && scaled > 0,
        "the oracle checked no rising, half-life or scaled answer"
    );
    assert!(checks > cases as usize, "the oracle checked too little");
}

#[test]
fn embedded_matches_the_oracle() {
    drive("embedded", RangeSpec::MAX_HOURS, |_| {
        let s: Arc<dyn Store> = Arc::new(EmbeddedStore::in_memory(settings()));
        Nodes { a: s.clone(), b: s }
    });
}

/// Redis keeps hourly buckets for the last `hourly_days` whole days and
/// daily ones before: the oracle's hour-exact windows hold up to there.
#[test]
fn redis_two_nodes_match_the_oracle() {
    let server = common::redis::RedisServer::start();
    let url = server.url();
    drive("redis", 192, |case| {
        let opts = RedisOptions {
            url: url.clone(),
            prefix: format!("oracle{case}:"),
            ..RedisOptions::default()
        };
        Nodes {
            a: Arc::new(RedisStore::connect(opts.clone(), settings()).unwrap()),
            b: Arc::new(RedisStore::connect(opts, settings()).unwrap()),
        }
    });
}

/// The same over 4 article shards (`[redis] shards = 4`, issue 13): the
/// threshold walk over four rankings must stop exactly where one ranking's
/// does. On the binary's shared redis-server, a prefix per case.
#[test]
fn redis_sharded_two_nodes_match_the_oracle() {
    let url = common::redis::RedisServer::shared().url();
    drive("redis, 4 shards", 192, |case| {
        let opts = RedisOptions {
            url: url.clone(),
            prefix: format!("oracle-s4-{case}:"),
            shards: 4,
            ..RedisOptions::default()
        };
        Nodes {
            a: Arc::new(RedisStore::connect(opts.clone(), settings()).unwrap()),
            b: Arc::new(RedisStore::connect(opts, settings()).unwrap()),
        }
    });
}

/// Issue 13: 3 shards with a cluster's key names (each shard and its
/// articles under a tag of their own; ingest split into a gate stage and a
/// count stage per shard, pipelines one per slot), on the binary's shared
/// redis-server (`RedisOptions::cluster_names`).
#[test]
fn redis_sharded_tagged_two_nodes_match_the_oracle() {
    let url = common::redis::RedisServer::shared().url();
    drive("redis, 3 tagged shards", 192, |case| {
        let opts = RedisOptions {
            url: url.clone(),
            prefix: format!("oracle-t3-{case}:"),
            shards: 3,
            cluster_names: true,
            ..RedisOptions::default()
        };
        Nodes {
            a: Arc::new(RedisStore::connect(opts.clone(), settings()).unwrap()),
            b: Arc::new(RedisStore::connect(opts, settings()).unwrap()),
        }
    });
}

/// The same on a 3-primary Redis Cluster: each case is a site of its own
/// (its own prefix, so its own slot), the cases spread over the primaries;
/// then each case one site over 3 shards (4 slots).
#[test]
fn redis_cluster_two_nodes_match_the_oracle() {
    let cluster = common::redis::Backend::Cluster(common::redis::RedisCluster::start(3, 0));
    drive("redis cluster", 192, |case| {
        let opts = cluster.options(&format!("oracle{case}:"));
        Nodes {
            a: Arc::new(RedisStore::connect(opts.clone(), settings()).unwrap()),
            b: Arc::new(RedisStore::connect(opts, settings()).unwrap()),
        }
    });
    // Issue 13: one site over 3 shards on the same cluster.
    drive("redis cluster, 3 shards", 192, |case| {
        let opts = RedisOptions {
            shards: 3,
            ..cluster.options(&format!("oracle-c3-{case}:"))
        };
        Nodes {
            a: Arc::new(RedisStore::connect(opts.clone(), settings()).unwrap()),
            b: Arc::new(RedisStore::connect(opts, settings()).unwrap()),
        }
    });
}

/// Regression scenarios from the issue "Exact and durable at the edges",
/// each on both stores.
mod scenarios {
    use super::*;

    fn view(article: &str, visitor: u128, ts: Timestamp, now: Timestamp) -> Event {
        Event {
            kind: EventType::View,
            article: ArticleId::parse(article).unwrap(),
            visitor,
            ip: 1,
            ts,
            arrival_ms: now * 1000,
            event_id: None,
            seconds: 0,
            bot: hotrank::crawler::Crawler::NONE,
            trusted: false,
            net: 0,
        }
    }

    fn q(range: RangeSpec) -> HotQuery {
        HotQuery::top(ModelKind::Gravity, range, 10)
    }

    async fn ids(s: &dyn Store, q: &HotQuery, now: Timestamp) -> Vec<String> {
        let p = s.hot(q, now).await.unwrap();
        p.items.iter().map(|i| i.id.to_string()).collect()
    }

    /// Scenario 1: at 22:58 a view dated 23:01 on a new article. Landed
    /// main counted it in the 23:00 bucket, scored it 0 at 22:58 and never
    /// listed it again until its next event.
    async fn future_dated_event(s: Arc<dyn Store>) {
        let now = START - 120;
        s.ingest(vec![view("fut", 1, now + 180, now)], now)
            .await
            .unwrap();
        assert_eq!(ids(&*s, &q(RangeSpec::Hours(1)), now).await, ["fut"]);
        // At the hour turn it is still there in a 2-hour window, with its
        // one view, and the 1-hour window no longer holds it.
        assert_eq!(ids(&*s, &q(RangeSpec::Hours(2)), START).await, ["fut"]);
        assert!(ids(&*s, &q(RangeSpec::Hours(1)), START).await.is_empty());
    }

    /// Scenario 4: the clock steps back across an hour turn after a view.
    async fn clock_step_back(s: Arc<dyn Store>) {
        s.ingest(vec![view("a", 1, START, START)], START)
            .await
            .unwrap();
        let p = s.hot(&q(RangeSpec::Hours(1)), START - 1).await.unwrap();
        assert_eq!(p.generated_at, START, "answers never go back in time");
        assert_eq!(p.items.len(), 1);
        assert_eq!(ids(&*s, &q(RangeSpec::Hours(1)), START).await, ["a"]);
    }

    /// Scenario 4: deep cursor pages (past the first snapshot) keep
    /// `perAuthor` over everything listed before them.
    async fn deep_pages_per_author(s: Arc<dyn Store>) {
        let authors = [Some("x"), Some("y"), Some("z"), None];
        for i in 0..24u32 {
            let id = ArticleId::parse(&format!("p{i:02}")).unwrap();
            let meta = ArticleMeta {
                author: authors[i as usize % 4].map(str::to_string),
                published_at: START - 3600,
                ..ArticleMeta::default()
            };
            s.put_article(id, meta, START).await.unwrap();
            let evs = (0..=i as u128)
                .map(|v| view(&format!("p{i:02}"), v, START, START))
                .collect();
            s.ingest(evs, START).await.unwrap();
        }
        let mut hq = q(RangeSpec::Hours(24));
        hq.limit = 2;
        hq.per_author = Some(2);
        let mut listed = Vec::new();
        let mut now = START;
        loop {
            let p = s.hot(&hq, now).await.unwrap();
            listed.extend(
                p.items
                    .iter()
                    .map(|i| (i.id.to_string(), i.meta.author.clone())),
            );
            if listed.len() == 2 {
                // The first snapshot (five pages) lists two of x's articles;
                // now one of x's unlisted articles becomes x's best. Deep
                // pages must not list it: x's two slots are taken.
                now += 60;
                let evs = (0..100).map(|v| view("p12", 1000 + v, now, now)).collect();
                s.ingest(evs, now).await.unwrap();
            }
            match p.cursor {
                Some(c) => hq.cursor = Some(c),
                None => break,
            }
        }
        let unique: HashSet<&String> = listed.iter().map(|l| &l.0).collect();
        assert_eq!(unique.len(), listed.len(), "no repeats: {listed:?}");
        for a in ["x", "y", "z"] {
            let n = listed.iter().filter(|l| l.1.as_deref() == Some(a)).count();
            assert_eq!(n, 2, "author {a} in {listed:?}");
        }
        assert_eq!(listed.iter().filter(|l| l.1.is_none()).count(), 6);
    }

    /// Rising over 2 hours against the hour before: X's busy baseline
    /// hour leaves at the next turn and its score rises from -5.8 to 3,
    /// above Y's 2, with no event. Its bound must have said 3 already, or
    /// the walk at the next hour stops at Y.
    async fn rising_bound_across_hour_turn(s: Arc<dyn Store>) {
        let h0 = (START / 3600 + 1) * 3600;
        let (h2, h3) = (h0 + 7200, h0 + 3 * 3600);
        let evs = (0..20).map(|v| view("x", v, h0, h0)).collect();
        s.ingest(evs, h0).await.unwrap();
        let mut evs: Vec<Event> = (100..103).map(|v| view("x", v, h2, h2)).collect();
        evs.extend((200..202).map(|v| view("y", v, h2, h2)));
        s.ingest(evs, h2).await.unwrap();
        let q = HotQuery {
            params: ModelParams {
                rising: RisingSpec {
                    window: 2,
                    baseline: 1,
                    min: 1,
                },
                ..ModelParams::default()
            },
            ..HotQuery::top(ModelKind::Rising, RangeSpec::Hours(2), 1)
        };
        let p = s.hot(&q, h2 + 60).await.unwrap();
        assert_eq!(p.items[0].id.as_str(), "y");
        assert_eq!(p.items[0].score, 2.0);
        let p = s.hot(&q, h3 + 60).await.unwrap();
        assert_eq!(p.items[0].id.as_str(), "x", "x rose at the hour turn");
        assert_eq!(p.items[0].score, 3.0);
    }

    /// Movement of a ranking scaled by category: the ranking at a past
    /// hour mark counts each category's events up to the mark only. Before
    /// the mark x (news, 3 views) scores above y (tech, 2), but news is
    /// busier (w, a month old, ranks last with 20 views): scaled, y leads.
    /// In the next hour 200 views of v (tech, a month old) make tech the
    /// busier and x leads; the ranking at the mark still has y first.
    async fn scaled_ranking_at_an_hour_mark(s: Arc<dyn Store>) {
        let h1 = (START / 3600 + 2) * 3600;
        let put = |id: &str, category: &str, published_at: Timestamp| {
            let meta = ArticleMeta {
                category: Some(category.to_string()),
                published_at,
                ..ArticleMeta::default()
            };
            (ArticleId::parse(id).unwrap(), meta)
        };
        for (id, meta) in [
            put("x", "news", h1 - 7200),
            put("y", "tech", h1 - 7200),
            put("w", "news", h1 - 30 * 86_400),
            put("v", "tech", h1 - 30 * 86_400),
        ] {
            s.put_article(id, meta, h1 - 7200).await.unwrap();
        }
        let t = h1 - 600;
        let mut evs: Vec<Event> = (0..3).map(|v| view("x", v, t, t)).collect();
        evs.extend((10..12).map(|v| view("y", v, t, t)));
        evs.extend((20..40).map(|v| view("w", v, t, t)));
        s.ingest(evs, t).await.unwrap();
        let scaled = HotQuery {
            params: ModelParams {
                scale: Scale::Category,
                ..ModelParams::default()
            },
            ..q(RangeSpec::Hours(24))
        };
        assert_eq!(
            ids(&*s, &q(RangeSpec::Hours(24)), h1 - 1).await[..2],
            ["x", "y"]
        );
        assert_eq!(ids(&*s, &scaled, h1 - 1).await, ["y", "x", "w"]);
        let t = h1 + 60;
        let evs = (100..300).map(|v| view("v", v, t, t)).collect();
        s.ingest(evs, t).await.unwrap();
        assert_eq!(ids(&*s, &scaled, h1 + 120).await[..2], ["x", "y"]);
        let then: Vec<String> = (s.ranked_at(&scaled, h1 - 1, 10).await.unwrap())
            .iter()
            .map(|i| i.to_string())
            .collect();
        assert_eq!(then, ["y", "x", "w"], "the ranking at the mark");
    }

    fn embedded() -> Arc<dyn Store> {
        Arc::new(EmbeddedStore::in_memory(settings()))
    }

    fn redis(url: &str) -> Arc<dyn Store> {
        let opts = RedisOptions {
            url: url.to_string(),
            ..RedisOptions::default()
        };
        Arc::new(RedisStore::connect(opts, settings()).unwrap())
    }

    macro_rules! both {
        ($($name:ident),*) => {
            mod embedded_store {
                $(#[tokio::test]
                async fn $name() {
                    super::$name(super::embedded()).await;
                })*
            }
            mod redis_store {
                $(#[tokio::test]
                async fn $name() {
                    let server = crate::common::redis::RedisServer::start();
                    super::$name(super::redis(&server.url())).await;
                })*
            }
        };
    }

    both!(
        future_dated_event,
        clock_step_back,
        deep_pages_per_author,
        rising_bound_across_hour_turn,
        scaled_ranking_at_an_hour_mark
    );
}
