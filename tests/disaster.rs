//! Disaster recovery of the pipeline's Redis (docs/design.md, "Disaster
//! recovery"), against real redis-servers (the main one, which loses
//! everything, and the journal's) and the real PostgreSQL archive (a schema
//! per test): FLUSHALL under load, then `restore_and_replay`, counts every
//! acknowledged event exactly once; the journal's trim keeps what the
//! archive may need; a journal that cannot take an append answers 503 and
//! queues nothing; restores into the wrong Redis are refused; the CLI does
//! it end to end. `HOTRANK_DR_SEED` picks the load's seed.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::T0;
use common::pg::{Schema, pg_url};
use common::redis::{RedisServer, unique_prefix};
use hotrank::archive::Archive;
use hotrank::clock::ManualClock;
use hotrank::config::{Config, PipelineConfig, StoreKind};
use hotrank::model::{ArticleId, ArticleMeta, Event, EventType, VoteDirection, VoteOutcome};
use hotrank::pipeline::{
    ArchiveWriter, IngestPipeline, PipelineError, PipelineStore, spawn_workers,
};
use hotrank::store::redis::{LoadError, RedisOptions, RedisStore};
use hotrank::store::{Store, StoreError, StoreSettings, Voter};

const ARTICLES: u64 = 10;

/// A site: its main Redis, the journal's Redis, the archive.
struct Site {
    main: RedisServer,
    log: RedisServer,
    /// Dropped (with its tables) at the end.
    _schema: Schema,
    archive: Archive,
    config: Config,
}

impl Site {
    async fn new(edit: impl FnOnce(&mut PipelineConfig)) -> Site {
        let main = RedisServer::start();
        let log = RedisServer::start();
        let schema = Schema::new();
        let archive = schema.archive().await;
        let mut c = common::test_config(std::path::Path::new("/nonexistent"));
        c.store = StoreKind::Redis;
        c.redis.url = main.url();
        c.redis.prefix = unique_prefix();
        c.gate.visitor_limit_per_minute = 0;
        c.gate.ip_limit_per_minute = 0;
        c.gate.bot_articles_per_minute = 0;
        c.pipeline = PipelineConfig {
            enabled: true,
            partitions: 3,
            batch: 15,
            claim_idle_ms: 300,
            block_ms: 2,
            trim_every_ms: 50,
            log_url: log.url(),
            ..PipelineConfig::default()
        };
        edit(&mut c.pipeline);
        c.archive.url = pg_url();
        c.archive.schema = schema.name.clone();
        Site {
            main,
            log,
            _schema: schema,
            archive,
            config: c,
        }
    }

    /// A new pipeline (as a new process would open it), journaling.
    fn pipeline(&self) -> Arc<IngestPipeline> {
        let c = &self.config;
        let store =
            RedisStore::connect(RedisOptions::from_config(c), StoreSettings::from_config(c))
                .expect("redis store");
        Arc::new(
            IngestPipeline::new(Arc::new(store), c.pipeline.clone())
                .with_journal(&c.pipeline.log_url)
                .expect("journal"),
        )
    }

    fn writer(&self, pipe: &Arc<IngestPipeline>) -> ArchiveWriter {
        ArchiveWriter::new(
            pipe.store().clone(),
            Some(pipe.clone()),
            1,
            Arc::new(ManualClock::at(T0)),
        )
    }

    async fn flushall(&self) {
        let mut c = self
            .main
            .client()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        redis::cmd("FLUSHALL")
            .query_async::<()>(&mut c)
            .await
            .unwrap();
    }

    /// FLUSHALL, then a new process restores and replays; the counts are
    /// `truth`'s. Answers that process's pipeline.
    async fn disaster_and_restore(&self, truth: &Truth) -> Arc<IngestPipeline> {
        self.flushall().await;
        let fresh = self.pipeline();
        fresh
            .restore_and_replay(&self.archive, T0, |_| {})
            .await
            .expect("restore");
        drain(&fresh).await;
        assert_eq!(
            counts(fresh.store()).await,
            truth.table(),
            "every acknowledged event counted once"
        );
        truth.check_totals(fresh.store()).await;
        fresh
    }

    /// Archive flushes at seeded random moments while load runs (with
    /// entries in flight); at least one archives articles.
    async fn flush_under_load(
        &self,
        writer: &ArchiveWriter,
        rng: &mut StdRng,
        rounds: std::ops::Range<u32>,
    ) {
        let mut flushed = 0;
        for _ in 0..rng.random_range(rounds) {
            tokio::time::sleep(Duration::from_millis(rng.random_range(50..250))).await;
            if let hotrank::pipeline::Flushed::Articles(n) =
                writer.flush(&self.archive).await.unwrap()
            {
                flushed += n;
            }
        }
        assert!(
            flushed > 0,
            "the archive holds articles before the disaster"
        );
    }

    async fn journal_len(&self, pipe: &IngestPipeline) -> u64 {
        let j = pipe.journal().unwrap();
        let mut c = self
            .log
            .client()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let mut n = 0;
        for p in 0..self.config.pipeline.partitions {
            let len: u64 = redis::cmd("XLEN")
                .arg(j.key(p))
                .query_async(&mut c)
                .await
                .unwrap();
            n += len;
        }
        n
    }
}

fn seed() -> u64 {
    std::env::var("HOTRANK_DR_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7)
}

/// What the test sent and was acknowledged: per article, the distinct
/// visitors of its views (pv) and its comments (never deduplicated).
#[derive(Default, Debug, Clone, PartialEq, Eq)]
struct Truth {
    viewers: BTreeMap<u64, HashSet<u128>>,
    comments: BTreeMap<u64, u64>,
    /// Views sent: those not counted are duplicates.
    views: u64,
}

impl Truth {
    fn add(&mut self, events: &[Event]) {
        for e in events {
            let a = (0..ARTICLES)
                .find(|n| ArticleId::from_number(*n) == e.article)
                .unwrap();
            match e.kind {
                EventType::View => {
                    self.viewers.entry(a).or_default().insert(e.visitor);
                    self.views += 1;
                }
                EventType::Comment => *self.comments.entry(a).or_default() += 1,
                _ => unreachable!(),
            }
        }
    }

    /// Asserts the store totals (`/api/stats`): every counted view and
    /// comment once, every other view a duplicate, all in T0's hour.
    async fn check_totals(&self, store: &RedisStore) {
        let stats = store.stats(T0, 3).await.expect("stats");
        let table = self.table();
        let pv: u64 = table.iter().map(|r| r.1).sum();
        let comments: u64 = table.iter().map(|r| r.2).sum();
        assert_eq!(stats.counted, pv + comments, "stats: counted once each");
        let dup = self.views - pv;
        assert_eq!(stats.quarantined.0, [dup, 0, 0, 0], "stats: quarantine");
        let hour = T0.div_euclid(3600);
        let by_hour: Vec<_> = stats
            .quarantine_by_hour
            .iter()
            .filter(|(_, q)| q.0 != [0; 4])
            .map(|(h, q)| (*h, q.0))
            .collect();
        let want = if dup > 0 {
            vec![(hour, [dup, 0, 0, 0])]
        } else {
            vec![]
        };
        assert_eq!(by_hour, want, "stats: quarantine by hour");
    }

    /// (article, pv, comments) of every article.
    fn table(&self) -> Vec<(u64, u64, u64)> {
        (0..ARTICLES)
            .map(|a| {
                (
                    a,
                    self.viewers.get(&a).map_or(0, |v| v.len() as u64),
                    self.comments.get(&a).copied().unwrap_or(0),
                )
            })
            .collect()
    }
}

/// A batch of views and comments at T0: visitors repeat (duplicates, one
/// counted per article and visitor whatever the order), comments never
/// deduplicate.
fn batch(rng: &mut StdRng, i: u64) -> Vec<Event> {
    (0..rng.random_range(1..6))
        .map(|k| {
            let comment = rng.random_range(0..5) == 0;
            let article = ArticleId::from_number(rng.random_range(0..ARTICLES));
            let visitor = rng.random_range(0..400u128);
            Event {
                kind: if comment {
                    EventType::Comment
                } else {
                    EventType::View
                },
                ip: rng.random_range(0..50u64),
                arrival_ms: T0 * 1000 + (i * 10 + k) as i64,
                ..Event::view(article, visitor, T0)
            }
        })
        .collect()
}

/// (article, pv, comments) as the store answers them (from its keys for
/// a deleted article, which `article()` does not show).
async fn counts(store: &RedisStore) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::new();
    for a in 0..ARTICLES {
        let id = ArticleId::from_number(a);
        let v = store.article(&id, T0).await.expect("article");
        let (pv, comments) = match v {
            Some(v) => (v.lifetime.pv, v.lifetime.comments),
            None => {
                let k = store.keys();
                redis::pipe()
                    .get(k.views(&id))
                    .hget(k.counters(&id), "comments")
                    .query_async::<(Option<u64>, Option<u64>)>(&mut store.con())
                    .await
                    .map(|(p, c)| (p.unwrap_or(0), c.unwrap_or(0)))
                    .expect("counters")
            }
        };
        out.push((a, pv, comments));
    }
    out
}

/// Runs workers until the pipeline has drained (bounded).
async fn drain(pipe: &Arc<IngestPipeline>) {
    let workers = spawn_workers(pipe, 2, 2);
    let started = Instant::now();
    while !pipe.drained().await.expect("lag") {
        assert!(started.elapsed() < Duration::from_secs(30), "did not drain");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    workers.stop().await;
}

/// Load from a task until `stop`: batches appended as an API node does,
/// the acknowledged ones recorded; answers the truth and how many were
/// refused.
fn load(
    pipe: Arc<IngestPipeline>,
    seed: u64,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(Truth, u64)> {
    tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut truth = Truth::default();
        let (mut refused, mut i) = (0, 0);
        while !stop.load(Ordering::Relaxed) {
            let b = batch(&mut rng, i);
            i += 1;
            match pipe.append(b.clone(), T0).await {
                Ok(()) => truth.add(&b),
                Err(StoreError::Unavailable(_)) => refused += 1,
                Err(e) => panic!("append: {e}"),
            }
            tokio::time::sleep(Duration::from_micros(300)).await;
        }
        (truth, refused)
    })
}

/// FLUSHALL on the main Redis while events are queued, filtered, counted
/// and archived concurrently (archive flushes at seeded random moments,
/// with entries in flight); then restore and replay: every acknowledged
/// event is counted exactly once, and API nodes queue again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushall_under_load_then_restore_counts_every_acknowledged_event_once() {
    let seed = seed();
    eprintln!("HOTRANK_DR_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let site = Site::new(|_| {}).await;
    let pipe = site.pipeline();
    pipe.ensure_groups().await.unwrap();
    let writer = site.writer(&pipe);
    let workers = spawn_workers(&pipe, 2, 2);
    let stop = Arc::new(AtomicBool::new(false));
    let loader = load(pipe.clone(), seed, stop.clone());
    site.flush_under_load(&writer, &mut rng, 4..8).await;
    site.flushall().await;
    // Appends are refused from the disaster on: Redis lost its epoch.
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    let (truth, refused) = loader.await.unwrap();
    assert!(refused > 0, "appends after FLUSHALL are refused");
    workers.stop().await;
    assert!(
        pipe.append(batch(&mut rng, 1 << 40), T0).await.is_err(),
        "no API node queues into a Redis that lost its data"
    );
    assert!(
        writer.flush(&site.archive).await.is_err(),
        "nor does the archive writer read it"
    );

    // A new process restores and replays.
    let fresh = site.pipeline();
    let done = fresh
        .restore_and_replay(&site.archive, T0, |l| eprintln!("{l}"))
        .await
        .expect("restore");
    eprintln!("{done:?}");
    assert!(done.entries > 0 && done.applied > 0, "{done:?}");
    drain(&fresh).await;
    assert_eq!(
        counts(fresh.store()).await,
        truth.table(),
        "every acknowledged event counted once"
    );
    truth.check_totals(fresh.store()).await;

    // The site runs on: events are queued (by the old API node too, whose
    // epoch is Redis's again), counted, archived.
    let more = batch(&mut rng, 1 << 41);
    pipe.append(more.clone(), T0).await.expect("queued again");
    let mut truth = truth;
    truth.add(&more);
    drain(&fresh).await;
    assert_eq!(counts(fresh.store()).await, truth.table());
    let w2 = site.writer(&fresh);
    assert!(matches!(
        w2.flush(&site.archive).await,
        Ok(hotrank::pipeline::Flushed::Articles(_))
    ));

    // A second disaster: the archive now holds positions taken after the
    // first restore; a second restore counts everything once again.
    site.disaster_and_restore(&truth).await;
}

/// Out of order: two filter consumers decide the batches of one partition
/// in reverse order (the later copies counted, the earlier ones
/// duplicates), two count consumers apply only the later copies, and a
/// third filter consumer holds a batch undecided, when the archive reads
/// the articles. The replay gates in raw order, which would count the
/// earlier copies: it applies the verdicts the gate gave them instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_in_flight_at_the_archive_cut_count_once() {
    let site = Site::new(|p| p.partitions = 1).await;
    let pipe = site.pipeline();
    pipe.ensure_groups().await.unwrap();
    let batch_len = site.config.pipeline.batch as u64;
    let view = |i: u64, visitor: u128| Event {
        arrival_ms: T0 * 1000 + i as i64,
        ..Event::view(ArticleId::from_number(i % ARTICLES), visitor, T0)
    };
    let first: Vec<Event> = (0..batch_len).map(|i| view(i, u128::from(i))).collect();
    let copies = first.clone();
    let undecided: Vec<Event> = (0..batch_len)
        .map(|i| view(i, 1000 + u128::from(i)))
        .collect();
    let mut truth = Truth::default();
    for b in [&first, &copies, &undecided] {
        pipe.append(b.clone(), T0).await.unwrap();
        truth.add(b);
    }
    use hotrank::pipeline::Role;
    let f1 = pipe.read(Role::Filter, "f1").await.unwrap();
    let f2 = pipe.read(Role::Filter, "f2").await.unwrap();
    let f3 = pipe.read(Role::Filter, "f3").await.unwrap();
    assert!(!f3.is_empty(), "the third batch stays undecided");
    for (n, e) in f2.into_iter().chain(f1) {
        pipe.process(Role::Filter, n, e).await.unwrap();
    }
    // The copies were flagged first: c1 holds them, c2 the first ones.
    let c1 = pipe.read(Role::Count, "c1").await.unwrap();
    let c2 = pipe.read(Role::Count, "c2").await.unwrap();
    assert!(!c2.is_empty(), "decided, left unapplied");
    for (n, e) in c1 {
        pipe.process(Role::Count, n, e).await.unwrap();
    }
    site.writer(&pipe).flush(&site.archive).await.unwrap();
    // More copies after the cut: duplicates again.
    pipe.append(copies.clone(), T0).await.unwrap();
    truth.add(&copies);
    site.disaster_and_restore(&truth).await;
}

/// `[review] mode = "suspicious"`'s evidence is written by the replay as
/// by the count workers: views queued after the archive's cut, carrying
/// their network block, are replayed from the journal with it (the
/// evidence of views before the cut is not archived: it is lost with
/// Redis, and builds again from new views).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replay_writes_the_network_evidence() {
    let site = Site::new(|p| p.partitions = 1).await;
    let pipe = site.pipeline();
    pipe.ensure_groups().await.unwrap();
    let view = |article: u64, visitor: u128, net: u64| Event {
        net,
        arrival_ms: T0 * 1000 + visitor as i64,
        ..Event::view(ArticleId::from_number(article), visitor, T0)
    };
    let before: Vec<Event> = (0..10).map(|v| view(1, v, 7)).collect();
    pipe.append(before.clone(), T0).await.unwrap();
    drain(&pipe).await;
    site.writer(&pipe).flush(&site.archive).await.unwrap();
    // After the cut: 25 visitors of one block, and 5 of unknown blocks.
    let after: Vec<Event> = (100..125)
        .map(|v| view(2, v, 9))
        .chain((200..205).map(|v| view(2, v, 0)))
        .collect();
    pipe.append(after.clone(), T0).await.unwrap();
    let mut truth = Truth::default();
    truth.add(&before);
    truth.add(&after);
    let fresh = site.disaster_and_restore(&truth).await;
    let got = fresh
        .store()
        .net_evidence(&[ArticleId::from_number(2)], T0, 2)
        .await
        .unwrap();
    assert_eq!(
        (got[0].blocks, got[0].visitors, got[0].counted),
        (1, 25, 30)
    );
}

/// The journal keeps what the archive may need: with `journal_keep_secs
/// = 0`, a flush trims the journal up to the archive's floor and no
/// further; entries queued but not yet read by a filter stay, and a
/// restore still counts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_trim_respects_the_floor() {
    let site = Site::new(|p| p.journal_keep_secs = 0).await;
    let pipe = site.pipeline();
    pipe.ensure_groups().await.unwrap();
    let mut rng = StdRng::seed_from_u64(seed() ^ 0x7719);
    let mut truth = Truth::default();
    for i in 0..40 {
        let b = batch(&mut rng, i);
        pipe.append(b.clone(), T0).await.unwrap();
        truth.add(&b);
    }
    drain(&pipe).await;
    let writer = site.writer(&pipe);
    let before = site.journal_len(&pipe).await;
    writer.flush(&site.archive).await.unwrap();
    let after_drained = site.journal_len(&pipe).await;
    assert!(
        after_drained <= 3 && before > 10,
        "everything archived goes but each partition's floor entry: {before} -> {after_drained}"
    );
    // Queued, not read by any filter: past the floor, kept. (New
    // visitors: the trim dropped the gate's history of the old ones, as a
    // `journal_keep_secs` past the dedupe window would in production.)
    let mut queued = 0;
    for i in 0..10 {
        let mut b = batch(&mut rng, 100 + i);
        b.iter_mut().for_each(|e| e.visitor += 1_000_000);
        queued += b.len() as u64;
        pipe.append(b.clone(), T0).await.unwrap();
        truth.add(&b);
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    writer.flush(&site.archive).await.unwrap();
    let kept = site.journal_len(&pipe).await;
    assert!(
        kept >= queued,
        "the trim kept what no flush archived: {kept} < {queued}"
    );
    site.disaster_and_restore(&truth).await;
}

/// The operations journal is trimmed like the event journal: with
/// `journal_keep_secs = 0`, a flush drops the operations that ran before
/// it (the archive holds their effects) and keeps those after; a restore
/// then reflects every operation once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operations_journal_trim_keeps_what_the_archive_lacks() {
    let mut site = Site::new(|p| p.journal_keep_secs = 0).await;
    site.config.models.votes.allow_down_votes = true;
    let pipe = site.pipeline();
    pipe.ensure_groups().await.unwrap();
    let store = PipelineStore::new(pipe.clone());
    let mut ops = OpsTruth::created(&store).await;
    let mut rng = StdRng::seed_from_u64(seed() ^ 0x7e11);
    for i in 0..60 {
        assert!(ops.step(&store, &mut rng, i).await);
    }
    let ops_len = async || -> u64 {
        let mut c = site
            .log
            .client()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        redis::cmd("XLEN")
            .arg(pipe.journal().unwrap().ops_key())
            .query_async(&mut c)
            .await
            .unwrap()
    };
    let before = ops_len().await;
    // Redis's clock moves past the last operation's millisecond.
    tokio::time::sleep(Duration::from_millis(5)).await;
    site.writer(&pipe).flush(&site.archive).await.unwrap();
    assert_eq!(
        (before, ops_len().await),
        (ops.acked, 0),
        "every operation before the flush is archived: all trimmed"
    );
    for i in 0..30 {
        assert!(ops.step(&store, &mut rng, 100 + i).await);
    }
    let kept = ops_len().await;
    assert!(kept > 0);
    site.writer(&pipe).flush(&site.archive).await.unwrap();
    // Only operations after the flush's time stay; those after it again.
    for i in 0..30 {
        assert!(ops.step(&store, &mut rng, 200 + i).await);
    }
    let prefix = site.config.redis.prefix.clone();
    let again = site.disaster_and_restore(&Truth::default()).await;
    ops.check(again.store(), &prefix).await;
}

/// A journal that cannot take the append: the API answers 503 with
/// `Retry-After` and nothing stays queued; once it is back, events queue
/// again (the journal's Redis restarted empty adopts the site's epoch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journal_down_answers_503_and_queues_nothing() {
    let mut site = Site::new(|_| {}).await;
    let pipe = site.pipeline();
    pipe.ensure_groups().await.unwrap();
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let mut config = site.config.clone();
    config.data_dir = dir.path().to_path_buf();
    let store = Arc::new(hotrank::pipeline::PipelineStore::new(pipe.clone()));
    let server = common::TestServer::start_queued(dir, config, store, T0).await;
    let post = async |i: u32| {
        let body = serde_json::json!({"events": [
            {"type": "view", "articleId": format!("j{}", i % 3), "visitorId": format!("v{i}")},
            {"type": "comment", "articleId": "j0", "visitorId": format!("v{i}")}
        ]});
        server
            .client
            .post(server.url("/api/events"))
            .json(&body)
            .send()
            .await
            .unwrap()
    };
    assert_eq!(post(0).await.status(), reqwest::StatusCode::ACCEPTED);
    let raw_len = async |pipe: &IngestPipeline| {
        let mut c = pipe.store().con();
        let mut n = 0u64;
        for p in 0..3 {
            let l: u64 = redis::cmd("XLEN")
                .arg(pipe.raw_key(p))
                .query_async(&mut c)
                .await
                .unwrap();
            n += l;
        }
        n
    };
    let queued = raw_len(&pipe).await;
    site.log.kill();
    for i in 1..6 {
        let resp = post(i).await;
        assert!(resp.headers().contains_key("retry-after"));
        common::expect_error(
            resp,
            reqwest::StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
        )
        .await;
    }
    assert_eq!(raw_len(&pipe).await, queued, "nothing refused stays queued");
    // Article operations are journaled before they are answered too: a
    // PUT, a vote, a post and a delete each answer 503 with `Retry-After`
    // (each took effect, unjournaled: docs/design.md, "Not recovered").
    let admin = |req: reqwest::RequestBuilder| req.bearer_auth(common::ADMIN);
    let op_requests = [
        admin(server.client.put(server.url("/api/articles/j1")))
            .json(&serde_json::json!({"title": "put", "publishedAt": T0})),
        admin(server.client.post(server.url("/api/articles/j1/vote")))
            .json(&serde_json::json!({"userId": "u1", "direction": "up"})),
        admin(server.client.post(server.url("/api/articles")))
            .json(&serde_json::json!({"title": "post", "poster": "u2"})),
        admin(server.client.delete(server.url("/api/articles/j1"))),
    ];
    for req in op_requests {
        let resp = req.send().await.unwrap();
        let status = resp.status();
        assert!(
            resp.headers().contains_key("retry-after"),
            "{status}: {:?}",
            resp.text().await
        );
        common::expect_error(
            resp,
            reqwest::StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
        )
        .await;
    }
    site.log.restart();
    let started = Instant::now();
    while post(99).await.status() != reqwest::StatusCode::ACCEPTED {
        assert!(started.elapsed() < Duration::from_secs(10), "journal back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(raw_len(&pipe).await, queued + 2);
    let resp = admin(server.client.put(server.url("/api/articles/j1")))
        .json(&serde_json::json!({"title": "again", "publishedAt": T0}))
        .send()
        .await
        .unwrap();
    // 201: the delete that answered 503 took effect.
    assert_eq!(
        resp.status(),
        reqwest::StatusCode::CREATED,
        "journaled again"
    );
    let resp = admin(server.client.post(server.url("/api/articles/j1/vote")))
        .json(&serde_json::json!({"userId": "u9", "direction": "up"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        reqwest::StatusCode::OK,
        "votes journaled again"
    );
}

/// Restores that would count twice or mix sites are refused, and change
/// nothing: into a Redis that holds its epoch (not lost, or restored
/// already), into one that holds articles, with another site's journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_restores_are_refused() {
    let site = Site::new(|_| {}).await;
    let pipe = site.pipeline();
    pipe.ensure_groups().await.unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    pipe.append(batch(&mut rng, 0), T0).await.unwrap();
    drain(&pipe).await;
    site.writer(&pipe).flush(&site.archive).await.unwrap();
    let live = site.pipeline();
    let e = live
        .restore_and_replay(&site.archive, T0, |_| {})
        .await
        .unwrap_err();
    assert!(matches!(e, PipelineError::NotLost(_)), "{e}");
    assert!(e.to_string().contains("holds pipeline epoch"), "{e}");

    // Articles but no epoch (say, a Redis someone wrote to meanwhile).
    let mut c = site
        .main
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let epoch_key = format!("{}pipe:epoch", site.config.redis.prefix);
    redis::cmd("DEL")
        .arg(&epoch_key)
        .query_async::<()>(&mut c)
        .await
        .unwrap();
    let e = live
        .restore_and_replay(&site.archive, T0, |_| {})
        .await
        .unwrap_err();
    assert!(matches!(e, PipelineError::Load(LoadError::NotEmpty)), "{e}");
    assert!(e.to_string().contains("already holds articles"), "{e}");

    // Another site's journal (another epoch) on an empty Redis.
    site.flushall().await;
    let mut lc = site
        .log
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let jkey = pipe.journal().unwrap().epoch_key();
    redis::cmd("SET")
        .arg(&jkey)
        .arg("another")
        .query_async::<()>(&mut lc)
        .await
        .unwrap();
    let e = site
        .pipeline()
        .restore_and_replay(&site.archive, T0, |_| {})
        .await
        .unwrap_err();
    assert!(matches!(e, PipelineError::OtherSite { .. }), "{e}");
    assert!(e.to_string().contains("not the same site"), "{e}");
    let n: u64 = redis::cmd("DBSIZE").query_async(&mut c).await.unwrap();
    assert_eq!(n, 0, "a refused restore writes nothing");
}

/// The CLI end to end: `hotrank archive restore --replay` on the site's
/// configuration rebuilds the Redis that lost everything, prints its
/// progress, and a second run is refused; `archive export` is refused
/// on a Redis with a journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_restore_replay_end_to_end() {
    let site = Site::new(|_| {}).await;
    let pipe = site.pipeline();
    pipe.ensure_groups().await.unwrap();
    let mut rng = StdRng::seed_from_u64(seed() ^ 0xc1);
    let mut truth = Truth::default();
    for i in 0..30 {
        let b = batch(&mut rng, i);
        pipe.append(b.clone(), T0).await.unwrap();
        truth.add(&b);
        if i == 15 {
            drain(&pipe).await;
            site.writer(&pipe).flush(&site.archive).await.unwrap();
        }
    }
    site.flushall().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("site.toml");
    std::fs::write(&path, toml::to_string(&site.config).unwrap()).unwrap();
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_hotrank"))
            .args(["archive", "restore", "--replay", "--config"])
            .arg(&path)
            .output()
            .expect("run hotrank")
    };
    // A full export would archive counts without their positions.
    let export = std::process::Command::new(env!("CARGO_BIN_EXE_hotrank"))
        .args(["archive", "export", "--config"])
        .arg(&path)
        .output()
        .expect("run hotrank");
    let err = String::from_utf8_lossy(&export.stderr);
    assert!(
        !export.status.success() && err.contains("pipeline journal"),
        "{err}"
    );
    let out = run();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("replayed") && err.contains("again: API nodes queue events"),
        "{err}"
    );
    let fresh = site.pipeline();
    drain(&fresh).await;
    assert_eq!(counts(fresh.store()).await, truth.table());
    let again = run();
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        !again.status.success() && err.contains("holds pipeline epoch"),
        "{err}"
    );
    assert_eq!(
        counts(fresh.store()).await,
        truth.table(),
        "the refused run changed nothing"
    );
}

/// The position walk holds Redis: past `MAX_FLIGHT` entries in flight the
/// archive writer does not walk them; its flush fails (and is retried),
/// and succeeds once the backlog is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_past_the_bound_postpones_the_flush() {
    use hotrank::pipeline::{MAX_FLIGHT, Role};
    let site = Site::new(|p| p.batch = 1000).await;
    let pipe = site.pipeline();
    pipe.ensure_groups().await.unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let mut queued = 0;
    let mut i = 0;
    while queued <= MAX_FLIGHT {
        let b: Vec<Event> = (0..500).flat_map(|_| batch(&mut rng, i)).collect();
        i += 1;
        queued += b.len() as u64;
        pipe.append(b, T0).await.unwrap();
    }
    // Gated, none applied: every entry in flight.
    let started = Instant::now();
    while pipe.step(Role::Filter, "f", false).await.unwrap() > 0 {
        assert!(started.elapsed() < Duration::from_secs(60));
    }
    let e = site.writer(&pipe).flush(&site.archive).await.unwrap_err();
    assert!(e.to_string().contains("FLIGHT"), "{e}");
    drain(&pipe).await;
    assert!(matches!(
        site.writer(&pipe).flush(&site.archive).await,
        Ok(hotrank::pipeline::Flushed::Articles(n)) if n > 0
    ));
}

/// One article as the article operations the test sent leave it.
#[derive(Default, Debug, Clone, PartialEq, Eq)]
struct Art {
    title: String,
    deleted: bool,
    ups: u64,
    downs: u64,
    voters: BTreeSet<u128>,
}

/// What the acknowledged votes, posts, PUTs and deletes make of each
/// article: a brute-force model of the store's semantics (one vote per
/// user and article, none on a deleted article; a PUT replaces the
/// metadata and undeletes; a post is a new article with its poster's
/// up-vote). The load checks each answer against it as it goes.
#[derive(Default, Debug, Clone)]
struct OpsTruth {
    arts: BTreeMap<String, Art>,
    /// Operations acknowledged, and of those votes counted.
    acked: u64,
    votes: u64,
}

fn titled(title: String, published_at: i64) -> ArticleMeta {
    ArticleMeta {
        title: Some(title),
        published_at,
        ..ArticleMeta::default()
    }
}

impl OpsTruth {
    /// The articles events go to (`0`..`ARTICLES`), created by PUT.
    async fn created(store: &PipelineStore) -> OpsTruth {
        let mut ops = OpsTruth::default();
        for n in 0..ARTICLES {
            let id = ArticleId::from_number(n);
            let title = format!("first {n}");
            store
                .put_article(id.clone(), titled(title.clone(), T0 - 60), T0)
                .await
                .unwrap();
            let a = Art {
                title,
                ..Art::default()
            };
            ops.arts.insert(id.to_string(), a);
        }
        ops
    }

    /// Runs one random operation on `store`; records it when acknowledged.
    /// Answers false when it was refused (503).
    async fn step(&mut self, store: &PipelineStore, rng: &mut StdRng, i: u64) -> bool {
        let ids: Vec<String> = self.arts.keys().cloned().collect();
        let pick = ids[rng.random_range(0..ids.len())].clone();
        let id = ArticleId::parse(&pick).unwrap();
        let r = rng.random_range(0..100);
        let done = if r < 10 {
            let put = ArticleId::from_number(rng.random_range(0..ARTICLES));
            let title = format!("put {i}");
            store
                .put_article(put.clone(), titled(title.clone(), T0 - 60), T0)
                .await
                .map(|_| {
                    let a = self.arts.entry(put.to_string()).or_default();
                    a.title = title;
                    a.deleted = false;
                })
        } else if r < 16 {
            store.delete_article(&id, T0).await.map(|gone| {
                let a = self.arts.get_mut(&pick).unwrap();
                assert_eq!(gone, !a.deleted, "delete of {pick}: {a:?}");
                a.deleted = true;
            })
        } else if r < 22 {
            let poster = rng.random_range(0..30u128);
            let title = format!("post {i}");
            store
                .post_article(titled(title.clone(), 0), Voter::from(poster), T0)
                .await
                .map(|new| {
                    let a = Art {
                        title,
                        ups: 1,
                        voters: [poster].into(),
                        ..Art::default()
                    };
                    assert!(
                        self.arts.insert(new.to_string(), a).is_none(),
                        "post reused {new}"
                    );
                })
        } else {
            let user = rng.random_range(0..30u128);
            let dir = if rng.random_range(0..5) == 0 {
                VoteDirection::Down
            } else {
                VoteDirection::Up
            };
            store
                .vote(&id, Voter::from(user), dir, T0)
                .await
                .map(|out| {
                    let a = self.arts.get_mut(&pick).unwrap();
                    match out {
                        VoteOutcome::Counted { ups, downs, .. } => {
                            assert!(!a.deleted && a.voters.insert(user), "{pick}: {a:?}");
                            match dir {
                                VoteDirection::Up => a.ups += 1,
                                VoteDirection::Down => a.downs += 1,
                            }
                            assert_eq!((ups, downs), (a.ups, a.downs), "{pick}");
                            self.votes += 1;
                        }
                        VoteOutcome::AlreadyVoted => {
                            assert!(!a.deleted && a.voters.contains(&user), "{pick}: {a:?}")
                        }
                        VoteOutcome::UnknownArticle => assert!(a.deleted, "{pick}: {a:?}"),
                        other => panic!("vote on {pick}: {other:?}"),
                    }
                })
        };
        match done {
            Ok(()) => {
                self.acked += 1;
                true
            }
            Err(StoreError::Unavailable(_)) => false,
            Err(e) => panic!("operation {r} on {pick}: {e} ({:?})", self.arts.get(&pick)),
        }
    }

    /// Asserts that `store` holds exactly what the model says, from its
    /// keys (metadata, votes, voter sets) and through `article()`.
    async fn check(&self, store: &RedisStore, prefix: &str) {
        let mut c = store.con();
        for (id, a) in &self.arts {
            let (title, deleted, ups, downs): (
                Option<String>,
                Option<String>,
                Option<u64>,
                Option<u64>,
            ) = redis::pipe()
                .hget(format!("{prefix}meta:article:{id}"), "title")
                .hget(format!("{prefix}meta:article:{id}"), "deleted")
                .hget(format!("{prefix}counter:article:{id}"), "ups")
                .hget(format!("{prefix}counter:article:{id}"), "downs")
                .query_async(&mut c)
                .await
                .unwrap();
            let voters: BTreeSet<String> = redis::cmd("SMEMBERS")
                .arg(format!("{prefix}voted:{id}"))
                .query_async(&mut c)
                .await
                .unwrap();
            let got = Art {
                title: title.unwrap_or_default(),
                deleted: deleted.as_deref() == Some("1"),
                ups: ups.unwrap_or(0),
                downs: downs.unwrap_or(0),
                voters: voters
                    .iter()
                    .map(|v| u128::from_str_radix(v, 16).unwrap())
                    .collect(),
            };
            assert_eq!(&got, a, "article {id}: every acknowledged operation once");
            let view = store
                .article(&ArticleId::parse(id).unwrap(), T0)
                .await
                .unwrap();
            assert_eq!(view.is_none(), a.deleted, "article {id}");
            if let Some(v) = view {
                assert_eq!((v.lifetime.ups, v.lifetime.downs), (a.ups, a.downs));
            }
        }
    }
}

/// Votes, posts, PUTs and deletes beside views and comments, under
/// concurrent workers and archive flushes; FLUSHALL at a seeded random
/// moment after some operations were acknowledged since the last flush;
/// restore and replay: every acknowledged operation is reflected exactly
/// once (against a brute-force model) and every acknowledged event counted
/// once. `HOTRANK_DR_OPS_ROUNDS` repeats it with more seeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushall_under_operations_then_restore_reflects_each_acknowledged_one_once() {
    let rounds: u64 = std::env::var("HOTRANK_DR_OPS_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    for round in 0..rounds {
        operations_round(seed() + round).await;
    }
}

async fn operations_round(seed: u64) {
    eprintln!("HOTRANK_DR_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed ^ 0x0b5e);
    let mut site = Site::new(|_| {}).await;
    site.config.models.votes.allow_down_votes = true;
    let pipe = site.pipeline();
    pipe.ensure_groups().await.unwrap();
    let store = Arc::new(PipelineStore::new(pipe.clone()));
    // The articles events go to exist (PUT) before the load starts.
    let mut ops = OpsTruth::created(&store).await;
    let writer = site.writer(&pipe);
    let workers = spawn_workers(&pipe, 2, 2);
    let stop = Arc::new(AtomicBool::new(false));
    let events = load(pipe.clone(), seed, stop.clone());
    let acked = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let op_loader = {
        let (store, stop, acked) = (store.clone(), stop.clone(), acked.clone());
        let mut rng = StdRng::seed_from_u64(seed ^ 0x0905);
        tokio::spawn(async move {
            let mut refused = 0u64;
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                if ops.step(&store, &mut rng, i).await {
                    acked.store(ops.acked, Ordering::Relaxed);
                } else {
                    refused += 1;
                }
                tokio::time::sleep(Duration::from_micros(300)).await;
            }
            (ops, refused)
        })
    };
    site.flush_under_load(&writer, &mut rng, 3..6).await;
    // Some operations acknowledged since the last flush: only the journal
    // holds them.
    let at_flush = acked.load(Ordering::Relaxed);
    let started = Instant::now();
    while acked.load(Ordering::Relaxed) < at_flush + rng.random_range(20..60) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "operations stalled"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    site.flushall().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.store(true, Ordering::Relaxed);
    let (truth, _) = events.await.unwrap();
    let (ops, refused) = op_loader.await.unwrap();
    workers.stop().await;
    assert!(refused > 0, "operations after FLUSHALL are refused");
    eprintln!(
        "{} operations acknowledged ({} votes counted), {refused} refused",
        ops.acked, ops.votes
    );

    let fresh = site.pipeline();
    let done = fresh
        .restore_and_replay(&site.archive, T0, |l| eprintln!("{l}"))
        .await
        .expect("restore");
    eprintln!("{done:?}");
    assert!(
        done.ops > 0,
        "operations after the last flush replayed: {done:?}"
    );
    assert_eq!(done.ops_out_of_step, 0, "{done:?}");
    drain(&fresh).await;
    assert_eq!(
        counts(fresh.store()).await,
        truth.table(),
        "every acknowledged event counted once"
    );
    truth.check_totals(fresh.store()).await;
    let prefix = site.config.redis.prefix.clone();
    ops.check(fresh.store(), &prefix).await;

    // The site runs on: operations continue the articles' sequences (a
    // new post gets a fresh id, a voter who voted stays counted once),
    // and a second disaster restores them all once again.
    let fresh_store = PipelineStore::new(fresh.clone());
    let mut ops = ops;
    for i in 0..40 {
        assert!(ops.step(&fresh_store, &mut rng, 1_000_000 + i).await);
    }
    ops.check(fresh.store(), &prefix).await;
    site.writer(&fresh).flush(&site.archive).await.unwrap();
    for i in 0..20 {
        assert!(ops.step(&fresh_store, &mut rng, 2_000_000 + i).await);
    }
    let again = site.disaster_and_restore(&truth).await;
    ops.check(again.store(), &prefix).await;
}
