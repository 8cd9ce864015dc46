//! `[redis] layout = "seed"`: the seeds' own code and hotrank side by side
//! on one Redis. The seed clients below are written from the seeds' texts
//! (the command sequences they list), one real redis-server per binary,
//! one key prefix per test.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use redis::AsyncCommands;
use reqwest::StatusCode;
use serde_json::{Value, json};

use hotrank::clock::Clock;
use hotrank::config::RedisLayout;

use common::redis::{RedisServer, unique_prefix};
use common::{ADMIN, TestServer};

const WEEK: i64 = 7 * 86_400;
const VOTE: f64 = 432.0;
const PAGE: isize = 25;

fn server() -> &'static RedisServer {
    static S: OnceLock<RedisServer> = OnceLock::new();
    S.get_or_init(RedisServer::start)
}

async fn connection() -> redis::aio::MultiplexedConnection {
    server()
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn hotrank(prefix: &str) -> TestServer {
    hotrank_at(prefix, common::T0).await
}

/// A seed-layout node whose clock starts at `now`.
async fn hotrank_at(prefix: &str, now: i64) -> TestServer {
    hotrank_with_store(prefix, now).await.0
}

/// [`hotrank_at`], and its store.
async fn hotrank_with_store(
    prefix: &str,
    now: i64,
) -> (TestServer, Arc<hotrank::store::redis::RedisStore>) {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let mut config = common::test_config(dir.path());
    config.store = hotrank::config::StoreKind::Redis;
    config.redis.url = server().url();
    let c = &mut config;
    {
        c.redis.prefix = prefix.into();
        c.redis.layout = RedisLayout::Seed;
        c.posting = hotrank::config::Access::Open;
        c.voting = hotrank::config::Access::Open;
        let l = &mut c.limits;
        l.posts_per_minute_per_ip = 100_000;
        l.posts_per_minute_per_user = 100_000;
        l.votes_per_minute_per_ip = 100_000;
        l.votes_per_minute_per_user = 100_000;
        l.queries_per_minute_per_ip = 100_000;
    }
    config.validate().expect("valid config");
    let store = hotrank::store::redis::RedisStore::connect(
        hotrank::store::redis::RedisOptions::from_config(&config),
        hotrank::store::StoreSettings::from_config(&config),
    )
    .expect("redis store");
    let store = Arc::new(store);
    let s = TestServer::start_with_store(dir, config, store.clone(), now).await;
    (s, store)
}

/// Seed 003's voting site, from its text (Redis in Action, chapter 1):
/// post (INCR article:, SADD voted:, EXPIRE, HMSET article:<id>, ZADD
/// score:/time:), vote (no vote when `ZSCORE time:` is below `now - week`,
/// SADD voted:, ZINCRBY score:, HINCRBY votes), lists by ZREVRANGE +
/// HGETALL in pages of 25, a group's list by ZINTERSTORE … AGGREGATE MAX.
/// Its `now` is Python's `time.time()`: seconds with a fraction, which
/// redis-py writes as Python's `repr` of the float ([`py_float`]).
struct Site003 {
    con: redis::aio::MultiplexedConnection,
    p: String,
}

impl Site003 {
    async fn new(prefix: &str) -> Self {
        let con = connection().await;
        Site003 {
            con,
            p: prefix.to_string(),
        }
    }

    async fn post(&mut self, user: &str, title: &str, link: &str, now: f64) -> String {
        let p = &self.p;
        let id: i64 = self.con.incr(format!("{p}article:"), 1).await.unwrap();
        let voted = format!("{p}voted:{id}");
        let _: () = self.con.sadd(&voted, user).await.unwrap();
        let _: () = self.con.expire(&voted, WEEK).await.unwrap();
        let article = format!("article:{id}");
        let _: () = self
            .con
            .hset_multiple(
                format!("{p}{article}"),
                &[
                    ("title", title.to_string()),
                    ("link", link.to_string()),
                    ("poster", user.to_string()),
                    ("time", py_float(now)),
                    ("votes", "1".to_string()),
                ],
            )
            .await
            .unwrap();
        let _: () = self
            .con
            .zadd(format!("{p}score:"), &article, now + VOTE)
            .await
            .unwrap();
        let _: () = self
            .con
            .zadd(format!("{p}time:"), &article, now)
            .await
            .unwrap();
        id.to_string()
    }

    async fn add_groups(&mut self, id: &str, groups: &[&str]) {
        for g in groups {
            let _: () = self
                .con
                .sadd(format!("{}group:{g}", self.p), format!("article:{id}"))
                .await
                .unwrap();
        }
    }

    /// True if the vote counted.
    async fn vote(&mut self, user: &str, article: &str, now: f64) -> bool {
        let p = &self.p;
        let cutoff = now - WEEK as f64;
        let t: Option<f64> = self.con.zscore(format!("{p}time:"), article).await.unwrap();
        match t {
            Some(t) if t >= cutoff => {}
            _ => return false,
        }
        let id = article.split(':').nth(1).unwrap();
        let added: i64 = self.con.sadd(format!("{p}voted:{id}"), user).await.unwrap();
        if added == 1 {
            let _: () = self
                .con
                .zincr(format!("{p}score:"), article, VOTE)
                .await
                .unwrap();
            let _: () = self
                .con
                .hincr(format!("{p}{article}"), "votes", 1)
                .await
                .unwrap();
        }
        added == 1
    }

    /// One page (from 1) of a list: (member, its hash).
    async fn page(&mut self, key: &str, page: isize) -> Vec<(String, HashMap<String, String>)> {
        let start = (page - 1) * PAGE;
        let ids: Vec<String> = self
            .con
            .zrevrange(format!("{}{key}", self.p), start, start + PAGE - 1)
            .await
            .unwrap();
        let mut out = Vec::new();
        for id in ids {
            let h: HashMap<String, String> =
                self.con.hgetall(format!("{}{id}", self.p)).await.unwrap();
            out.push((id, h));
        }
        out
    }

    async fn group_page(
        &mut self,
        group: &str,
        page: isize,
    ) -> Vec<(String, HashMap<String, String>)> {
        let key = format!("score:{group}");
        let _: () = redis::cmd("ZINTERSTORE")
            .arg(format!("{}{key}", self.p))
            .arg(2)
            .arg(format!("{}group:{group}", self.p))
            .arg(format!("{}score:", self.p))
            .arg("AGGREGATE")
            .arg("MAX")
            .query_async(&mut self.con)
            .await
            .unwrap();
        self.page(&key, page).await
    }
}

/// Every item of every page `path` answers (a ranking query, `&cursor=`
/// appended to follow it), as `item` reads each.
async fn all_pages<T>(s: &TestServer, path: &str, item: impl Fn(&Value) -> T) -> Vec<T> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut page = path.to_string();
        if let Some(c) = &cursor {
            page.push_str(&format!("&cursor={c}"));
        }
        let (st, v) = s.get(&page).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        out.extend(v["items"].as_array().unwrap().iter().map(&item));
        match v["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
}

/// Every page of hotrank's votes ranking (optionally one group's).
async fn hot_pages(s: &TestServer, group: Option<&str>) -> Vec<(String, f64)> {
    let mut path = format!("/api/hot?model=votes&limit={PAGE}");
    if let Some(g) = group {
        path.push_str(&format!("&group={g}"));
    }
    all_pages(s, &path, |it| {
        (
            it["articleId"].as_str().unwrap().to_string(),
            it["score"].as_f64().unwrap(),
        )
    })
    .await
}

/// Every page of the seed's own list (by score, or a group's).
async fn seed_pages(site: &mut Site003, group: Option<&str>) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for page in 1.. {
        let items = match group {
            Some(g) => site.group_page(g, page).await,
            None => site.page("score:", page).await,
        };
        if items.is_empty() {
            return out;
        }
        for (member, h) in items {
            let t: f64 = h["time"].parse().unwrap();
            let votes: f64 = h["votes"].parse().unwrap();
            out.push((member["article:".len()..].to_string(), t + VOTE * votes));
        }
    }
    unreachable!()
}

/// What redis-py writes for a Python float: its `repr` (the shortest text
/// that reads back as the same double, `1763760000.0` when it is whole),
/// which is what Rust's `{:?}` prints for an f64 of this size.
fn py_float(x: f64) -> String {
    format!("{x:?}")
}

/// The book's `time.time()` while hotrank's clock reads its second: that
/// second and `millis` thousandths.
fn book_now(s: &TestServer, millis: u64) -> f64 {
    s.clock.now() as f64 + millis as f64 / 1000.0
}

async fn vote_api(s: &TestServer, id: &str, user: &str) -> StatusCode {
    s.post(
        &format!("/api/articles/{id}/vote"),
        &json!({ "userId": user }),
    )
    .await
    .0
}

async fn delete_api(s: &TestServer, id: &str) -> StatusCode {
    s.client
        .delete(s.url(&format!("/api/articles/{id}")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .status()
}

/// Every key under `prefix` is one KEY_TABLE documents, of its type.
///
/// The server keeps working while this looks: the ranking upkeep drains
/// the change log, so a key listed by `KEYS` may be gone by the time its
/// `TYPE` is asked. A key that vanished is not a leak; one that exists
/// must have its documented type.
async fn every_key_documented(con: &mut redis::aio::MultiplexedConnection, prefix: &str) {
    let keys: Vec<String> = con.keys(format!("{prefix}*")).await.unwrap();
    assert!(!keys.is_empty());
    for k in keys {
        let rest = &k[prefix.len()..];
        let spec = hotrank::store::redis::key_spec_of(rest)
            .unwrap_or_else(|| panic!("{rest} is not in KEY_TABLE"));
        let ty: String = redis::cmd("TYPE").arg(&k).query_async(con).await.unwrap();
        if ty != "none" {
            assert_eq!(ty, spec.kind, "{rest}");
        }
    }
}

/// Both sides agree on every article (title, votes, score), on the order
/// of every page by score, and on every group's order.
async fn agree(
    s: &TestServer,
    site: &mut Site003,
    votes: &HashMap<String, u64>,
    groups: &[&str],
    deleted: &HashSet<String>,
) {
    let ours = hot_pages(s, None).await;
    let theirs = seed_pages(site, None).await;
    assert_eq!(ours, theirs, "the votes ranking differs from score:");
    assert_eq!(
        new_pages(s, 7).await,
        seed_new(site).await,
        "GET /api/new differs from time:"
    );
    let live: HashSet<&String> = votes.keys().filter(|id| !deleted.contains(*id)).collect();
    assert_eq!(ours.len(), live.len());
    for (id, n) in votes {
        let (st, v) = s.get(&format!("/api/articles/{id}")).await;
        if deleted.contains(id) {
            assert_eq!(st, StatusCode::NOT_FOUND, "{id} deleted");
            continue;
        }
        assert_eq!(st, StatusCode::OK, "{id}: {v}");
        assert_eq!(v["votes"].as_u64(), Some(*n), "{id}: {v}");
        let h: HashMap<String, String> = site
            .con
            .hgetall(format!("{}article:{id}", site.p))
            .await
            .unwrap();
        assert_eq!(h["votes"].parse::<u64>().unwrap(), *n, "{id}");
        assert_eq!(v["title"].as_str(), Some(h["title"].as_str()), "{id}");
        let t: f64 = h["time"].parse().unwrap();
        assert_eq!(v["scores"]["votes"].as_f64(), Some(t + VOTE * *n as f64));
        assert_eq!(v["publishedAt"].as_f64(), Some(t.floor()), "{id}");
    }
    for g in groups {
        let ours = hot_pages(s, Some(g)).await;
        let theirs = seed_pages(site, Some(g)).await;
        assert_eq!(ours, theirs, "group {g}");
        assert!(ours.iter().all(|(id, _)| !deleted.contains(id)));
    }
}

/// Seed 003's site and hotrank post and vote in turn on one Redis: a user
/// votes once in total, both list the same pages, a week closes voting on
/// both, and a DELETE takes the article out of the site's lists too.
#[tokio::test]
async fn seed003_side_by_side() {
    let prefix = unique_prefix();
    let s = hotrank(&prefix).await;
    let mut site = Site003::new(&prefix).await;
    let groups = ["rust", "go"];
    let mut votes: HashMap<String, u64> = HashMap::new();
    let mut posted: Vec<String> = Vec::new();
    let mut voters: HashSet<(String, String)> = HashSet::new();
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    for i in 0..60u64 {
        let poster = format!("{}", next(40));
        let group = groups[next(2) as usize];
        let id = if i % 2 == 0 {
            let (st, v) = s
                .post(
                    "/api/articles",
                    &json!({"poster": poster, "title": format!("t{i}"), "url": format!("https://x/{i}"), "groups": [group]}),
                )
                .await;
            assert_eq!(st, StatusCode::CREATED, "{v}");
            let id = v["articleId"].as_str().unwrap().to_string();
            assert_eq!(v["votes"], 1, "posting counts the poster's vote");
            id
        } else {
            let now = book_now(&s, next(1000));
            let id = site
                .post(
                    &format!("user:{poster}"),
                    &format!("t{i}"),
                    &format!("https://x/{i}"),
                    now,
                )
                .await;
            site.add_groups(&id, &[group]).await;
            id
        };
        assert!(!votes.contains_key(&id), "id {id} taken twice");
        votes.insert(id.clone(), 1);
        voters.insert((poster, id.clone()));
        posted.push(id);
        // Votes from both sides, some of them repeats across the sides.
        for _ in 0..6 {
            let id = posted[next(posted.len() as u64) as usize].clone();
            let user = format!("{}", next(40));
            let first = voters.insert((user.clone(), id.clone()));
            let counted = if next(2) == 0 {
                let st = vote_api(&s, &id, &user).await;
                assert!(st == StatusCode::OK || st == StatusCode::CONFLICT, "{st}");
                st == StatusCode::OK
            } else {
                let now = book_now(&s, next(1000));
                site.vote(&format!("user:{user}"), &format!("article:{id}"), now)
                    .await
            };
            assert_eq!(counted, first, "user {user} on {id}");
            if counted {
                *votes.get_mut(&id).unwrap() += 1;
            }
        }
        s.clock.advance(1 + next(30) as i64);
    }
    let voted: Vec<String> = site
        .con
        .smembers(format!("{prefix}voted:{}", posted[0]))
        .await
        .unwrap();
    assert!(voted.iter().all(|u| u.starts_with("user:")), "{voted:?}");
    // A view of an article only the site posted, a minute later: hotrank
    // registers it, and still answers the site's publication time.
    s.clock.advance(60);
    assert_eq!(s.view(&posted[1], "reader").await, "counted");
    let none = HashSet::new();
    agree(&s, &mut site, &votes, &groups, &none).await;

    // Deletes, one posted on each side.
    let mut deleted = HashSet::new();
    for id in [&posted[0], &posted[1]] {
        assert_eq!(delete_api(&s, id).await, StatusCode::NO_CONTENT);
        assert_eq!(delete_api(&s, id).await, StatusCode::NOT_FOUND);
        deleted.insert(id.clone());
    }
    let now = book_now(&s, 999);
    assert!(
        !site
            .vote("user:999", &format!("article:{}", posted[1]), now)
            .await
    );
    assert_eq!(vote_api(&s, &posted[1], "999").await, StatusCode::NOT_FOUND);
    agree(&s, &mut site, &votes, &groups, &deleted).await;

    // An article registered by PUT (nobody posted it) joins the site's
    // keys on its first vote through hotrank; its groups follow PUT and
    // the groups endpoint.
    let (st, _) = s
        .admin_put(
            "/api/articles/p1",
            &json!({"title": "put", "publishedAt": s.clock.now() - 100, "groups": ["rust"]}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let now = book_now(&s, 1);
    assert!(
        !site.vote("user:700", "article:p1", now).await,
        "not posted yet"
    );
    assert_eq!(vote_api(&s, "p1", "700").await, StatusCode::OK);
    assert!(!site.vote("user:700", "article:p1", now).await, "voted");
    assert!(site.vote("user:701", "article:p1", now).await);
    votes.insert("p1".into(), 2);
    agree(&s, &mut site, &votes, &groups, &deleted).await;
    assert!(
        hot_pages(&s, Some("rust"))
            .await
            .iter()
            .any(|(id, _)| id == "p1")
    );
    let r = s
        .client
        .post(s.url("/api/articles/p1/groups"))
        .bearer_auth(ADMIN)
        .json(&json!({"add": ["go"], "remove": ["rust"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    agree(&s, &mut site, &votes, &groups, &deleted).await;
    assert!(
        !hot_pages(&s, Some("rust"))
            .await
            .iter()
            .any(|(id, _)| id == "p1")
    );
    assert!(
        hot_pages(&s, Some("go"))
            .await
            .iter()
            .any(|(id, _)| id == "p1")
    );

    // A week after the first posts, voting on them is closed on both sides.
    s.clock.advance(WEEK - 100);
    let now = book_now(&s, 500);
    let old = &posted[2];
    let recent = posted.last().unwrap();
    assert_eq!(vote_api(&s, old, "500").await, StatusCode::GONE);
    assert!(!site.vote("user:501", &format!("article:{old}"), now).await);
    assert_eq!(vote_api(&s, recent, "502").await, StatusCode::OK);
    *votes.get_mut(recent).unwrap() += 1;
    assert!(
        site.vote("user:503", &format!("article:{recent}"), now)
            .await
    );
    *votes.get_mut(recent).unwrap() += 1;
    agree(&s, &mut site, &votes, &groups, &deleted).await;
    // The seed's own score:{group} caches aside, every key is documented.
    for g in groups {
        let _: () = site.con.del(format!("{prefix}score:{g}")).await.unwrap();
    }
    every_key_documented(&mut site.con, &prefix).await;
}

/// Every page of `GET /api/new`, `limit` a page: (id, publishedAt).
async fn new_pages(s: &TestServer, limit: usize) -> Vec<(String, i64)> {
    all_pages(s, &format!("/api/new?limit={limit}"), |it| {
        (
            it["articleId"].as_str().unwrap().to_string(),
            it["publishedAt"].as_i64().unwrap(),
        )
    })
    .await
}

/// hotrank's newest order: publication time (whole seconds) descending,
/// then id.
fn newest_order(list: &mut [(String, i64)]) {
    list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
}

/// Every page of the site's own newest list (`ZREVRANGE time:`), as
/// (id, whole seconds of its `time`), in hotrank's newest order (the
/// site orders one second's posts by the fraction).
async fn seed_new(site: &mut Site003) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for page in 1.. {
        let items = site.page("time:", page).await;
        if items.is_empty() {
            break;
        }
        for (member, h) in items {
            let t: f64 = h["time"].parse().unwrap();
            out.push((member["article:".len()..].to_string(), t.floor() as i64));
        }
    }
    newest_order(&mut out);
    out
}

/// The book's `time` is `time.time()`, a float: votes through the API on
/// its posts count (they answered 500: the voter set's EXPIRE got a
/// fraction), on both sides' keys, and voting closes at the book's cutoff
/// (a vote counts while `time >= now - week`, a week to the second too).
#[tokio::test]
async fn book_float_times_take_votes() {
    let prefix = unique_prefix();
    let s = hotrank(&prefix).await;
    let mut site = Site003::new(&prefix).await;
    let t0 = s.clock.now();
    let posted = book_now(&s, 250);
    let id = site.post("user:1", "t", "https://l", posted).await;
    let edge = site.post("user:1", "edge", "https://e", t0 as f64).await;
    s.clock.advance(60);
    assert_eq!(vote_api(&s, &id, "2").await, StatusCode::OK);
    assert_eq!(vote_api(&s, &id, "2").await, StatusCode::CONFLICT);
    assert_eq!(vote_api(&s, &id, "1").await, StatusCode::CONFLICT, "poster");
    let now = book_now(&s, 400);
    let member = format!("article:{id}");
    assert!(
        !site.vote("user:2", &member, now).await,
        "voted via hotrank"
    );
    assert!(site.vote("user:3", &member, now).await);
    let ttl: i64 = site.con.ttl(format!("{prefix}voted:{id}")).await.unwrap();
    assert!(ttl > 0 && ttl <= WEEK, "voted:{id} TTL {ttl}");
    let (st, v) = s.get(&format!("/api/articles/{id}")).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["votes"], 3, "{v}");
    assert_eq!(v["publishedAt"].as_f64(), Some(posted.floor()), "{v}");
    assert_eq!(v["scores"]["votes"].as_f64(), Some(posted + 3.0 * VOTE));
    let h: HashMap<String, String> = site.con.hgetall(format!("{prefix}{member}")).await.unwrap();
    assert_eq!(h["votes"], "3");
    assert_eq!(h["time"], py_float(posted), "the book's time is left alone");
    assert_eq!(hot_pages(&s, None).await, seed_pages(&mut site, None).await);

    // A week to the second after `edge`: open on both sides (the book's
    // `zscore < cutoff` is false), closed a second later.
    s.clock.advance(WEEK - 60);
    let now = s.clock.now() as f64;
    assert_eq!(vote_api(&s, &edge, "4").await, StatusCode::OK);
    assert!(site.vote("user:5", &format!("article:{edge}"), now).await);
    assert_eq!(vote_api(&s, &id, "6").await, StatusCode::OK);
    s.clock.advance(1);
    let now = s.clock.now() as f64;
    assert_eq!(vote_api(&s, &edge, "7").await, StatusCode::GONE);
    assert_eq!(vote_api(&s, &id, "7").await, StatusCode::GONE);
    assert!(!site.vote("user:8", &format!("article:{edge}"), now).await);
    assert!(!site.vote("user:8", &member, now).await);
    let mut votes = HashMap::new();
    votes.insert(id.clone(), 4);
    votes.insert(edge.clone(), 3);
    agree(&s, &mut site, &votes, &[], &HashSet::new()).await;
}

/// The archive record of `id` (PostgreSQL): (deleted, up-votes).
async fn archived(archive: &hotrank::archive::Archive, id: &str) -> Option<(bool, u64)> {
    let id = hotrank::model::ArticleId::parse(id).unwrap();
    match archive.article(&id).await.unwrap()? {
        hotrank::store::dump::Record::Article { deleted, votes, .. } => Some((deleted, votes.ups)),
        other => panic!("{other:?}"),
    }
}

/// Seed layout's posts, votes and DELETEs reach the archive (PostgreSQL)
/// as hotrank's own do: a DELETE of the book's post is archived, so what
/// comes back from the archive (`hotrank archive import`, a restore) does
/// not list it again.
#[tokio::test]
async fn seed_changes_reach_the_archive() {
    let prefix = unique_prefix();
    let (s, store) = hotrank_with_store(&prefix, common::T0).await;
    let schema = common::pg::Schema::new();
    let archive = schema.archive().await;
    let clock = Arc::new(hotrank::clock::ManualClock::at(common::T0));
    let w = hotrank::pipeline::ArchiveWriter::new(store.clone(), None, 10, clock);
    let mut site = Site003::new(&prefix).await;
    let book = site
        .post("user:1", "book", "https://a", book_now(&s, 125))
        .await;
    assert_eq!(s.view(&book, "reader").await, "counted");
    let (st, v) = s
        .post(
            "/api/articles",
            &json!({"poster": "2", "title": "ours", "url": "https://o"}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let ours = v["articleId"].as_str().unwrap().to_string();
    assert_eq!(vote_api(&s, &book, "3").await, StatusCode::OK);
    assert_eq!(vote_api(&s, &ours, "3").await, StatusCode::OK);
    w.flush(&archive).await.unwrap();
    assert_eq!(
        archived(&archive, &book).await,
        Some((false, 1)),
        "the vote through hotrank"
    );
    assert_eq!(
        archived(&archive, &ours).await,
        Some((false, 2)),
        "posted and voted"
    );
    for id in [&book, &ours] {
        assert_eq!(delete_api(&s, id).await, StatusCode::NO_CONTENT);
    }
    w.flush(&archive).await.unwrap();
    for id in [&book, &ours] {
        assert_eq!(
            archived(&archive, id).await.map(|a| a.0),
            Some(true),
            "{id} deleted"
        );
    }
    archive.close().await;
}

/// Every list hotrank answers that names `id`: each model's `/api/hot`
/// (its default range, `range=all`, per author), a group's, `/api/new`.
async fn lists_naming(s: &TestServer, id: &str, group: &str) -> Vec<String> {
    let mut paths = vec![
        "/api/new?limit=100".to_string(),
        format!("/api/hot?model=votes&group={group}&limit=100"),
        format!("/api/hot?model=gravity&group={group}&limit=100"),
    ];
    for m in hotrank::model::ModelKind::ALL {
        let m = m.as_str();
        paths.push(format!("/api/hot?model={m}&limit=100"));
        paths.push(format!("/api/hot?model={m}&range=all&limit=100"));
        paths.push(format!("/api/hot?model={m}&perAuthor=100&limit=100"));
    }
    let mut out = Vec::new();
    for p in paths {
        let (st, v) = s.get(&p).await;
        assert_eq!(st, StatusCode::OK, "{p}: {v}");
        if common::page_ids(&v).contains(&id) {
            out.push(p);
        }
    }
    out
}

/// A DELETE of an article the book posted (float `time`) takes it out of
/// every list hotrank answers, whether hotrank had seen it (a view) or
/// not, as it does for hotrank's own posts.
#[tokio::test]
async fn delete_of_a_book_post_leaves_every_list() {
    let prefix = unique_prefix();
    let s = hotrank(&prefix).await;
    let mut site = Site003::new(&prefix).await;
    let seen = site
        .post("user:1", "seen", "https://a", book_now(&s, 125))
        .await;
    let unseen = site
        .post("user:2", "unseen", "https://b", book_now(&s, 875))
        .await;
    site.add_groups(&seen, &["g"]).await;
    site.add_groups(&unseen, &["g"]).await;
    s.clock.advance(30);
    assert_eq!(s.view(&seen, "reader").await, "counted");
    let now = book_now(&s, 5);
    assert!(site.vote("user:9", &format!("article:{seen}"), now).await);
    assert!(site.vote("user:9", &format!("article:{unseen}"), now).await);
    assert!(!lists_naming(&s, &seen, "g").await.is_empty());
    for id in [&seen, &unseen] {
        assert_eq!(delete_api(&s, id).await, StatusCode::NO_CONTENT);
        assert_eq!(delete_api(&s, id).await, StatusCode::NOT_FOUND);
        let (st, _) = s.get(&format!("/api/articles/{id}")).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{id}");
    }
    // Later activity does not bring them back.
    s.clock.advance(60);
    s.view(&seen, "other").await;
    s.view(&unseen, "other").await;
    for id in [&seen, &unseen] {
        assert_eq!(
            lists_naming(&s, id, "g").await,
            Vec::<String>::new(),
            "{id}"
        );
        let (st, _) = s.get(&format!("/api/articles/{id}")).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{id}");
    }
    let now = book_now(&s, 5);
    assert!(!site.vote("user:10", &format!("article:{seen}"), now).await);
    assert!(seed_pages(&mut site, None).await.is_empty());
    assert!(seed_pages(&mut site, Some("g")).await.is_empty());
    assert!(site.page("time:", 1).await.is_empty());
}

/// The book's `post_article` takes `INCR article:`: it never takes an id
/// hotrank created (by PUT or by a first event) and overwrites it; ids
/// INCR never gives leave the counter alone.
#[tokio::test]
async fn the_book_never_takes_an_id_hotrank_holds() {
    let prefix = unique_prefix();
    let s = hotrank(&prefix).await;
    let mut site = Site003::new(&prefix).await;
    let post = async |site: &mut Site003, n: u64| {
        site.post("user:1", "book", "https://b", book_now(&s, n))
            .await
    };
    assert_eq!(post(&mut site, 1).await, "1");
    let put = |id: &str| {
        let (s, id) = (&s, id.to_string());
        async move {
            let (st, v) = s
                .admin_put(
                    &format!("/api/articles/{id}"),
                    &json!({"title": "put", "publishedAt": s.clock.now() - 10}),
                )
                .await;
            assert_eq!(st, StatusCode::CREATED, "{id}: {v}");
        }
    };
    put("2").await;
    assert_eq!(post(&mut site, 2).await, "3");
    put("5").await;
    assert_eq!(post(&mut site, 3).await, "6");
    assert_eq!(s.view("9", "reader").await, "counted");
    assert_eq!(post(&mut site, 4).await, "10");
    // Lower ids, and ids INCR never gives (not decimal, a leading zero,
    // the largest integer, past it), leave the counter as it is.
    for id in [
        "4",
        "x20",
        "020",
        "9223372036854775807",
        "19223372036854775807",
    ] {
        put(id).await;
    }
    assert_eq!(s.view("d30", "reader").await, "counted");
    assert_eq!(post(&mut site, 5).await, "11");
    for id in ["2", "5"] {
        let (st, v) = s.get(&format!("/api/articles/{id}")).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        assert_eq!(v["title"], "put", "{id}: {v}");
    }
}

/// `GET /api/new` lists the book's posts (by their `time`) with hotrank's
/// own, each once, in hotrank's order, over cursor and offset pages.
#[tokio::test]
async fn new_lists_the_books_posts() {
    let prefix = unique_prefix();
    let s = hotrank(&prefix).await;
    let mut site = Site003::new(&prefix).await;
    let mut ids = Vec::new();
    for i in 0..14u64 {
        let id = if i % 3 == 0 {
            let (st, v) = s
                .post(
                    "/api/articles",
                    &json!({"poster": "7", "title": format!("h{i}"), "url": "https://h"}),
                )
                .await;
            assert_eq!(st, StatusCode::CREATED, "{v}");
            v["articleId"].as_str().unwrap().to_string()
        } else {
            let t = book_now(&s, (i * 271) % 1000);
            site.post("user:3", &format!("b{i}"), "https://b", t).await
        };
        ids.push(id);
        // Some seconds hold several posts.
        if i % 4 == 3 {
            s.clock.advance(1 + i as i64);
        }
    }
    // Articles only hotrank knows: by PUT, by a first event; and a book
    // post hotrank first saw through a view: listed at the book's time.
    let put_at = s.clock.now() - 5_000;
    let (st, _) = s
        .admin_put(
            "/api/articles/p1",
            &json!({"title": "p", "publishedAt": put_at}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    s.clock.advance(100);
    assert_eq!(s.view("ev1", "reader").await, "counted");
    assert_eq!(s.view(&ids[1], "reader").await, "counted");
    for id in [&ids[2], &ids[3]] {
        assert_eq!(delete_api(&s, id).await, StatusCode::NO_CONTENT);
    }
    let mut want = seed_new(&mut site).await;
    assert_eq!(want.len(), 12, "{want:?}");
    want.push(("p1".into(), put_at));
    let ev_at = s.clock.now();
    want.push(("ev1".into(), ev_at));
    newest_order(&mut want);
    for limit in [1, 4, 100] {
        assert_eq!(new_pages(&s, limit).await, want, "pages of {limit}");
    }
    let (st, v) = s.get("/api/new?offset=4&limit=5").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let page: Vec<&str> = want[4..9].iter().map(|w| w.0.as_str()).collect();
    assert_eq!(common::page_ids(&v), page);

    // More than one read of `time:` (256 entries), seven posts a second
    // at fractions out of order: reads end at whole seconds.
    for i in 0..600u64 {
        let t = book_now(&s, (i * 389) % 1000);
        site.post("user:4", &format!("m{i}"), "https://m", t).await;
        if i % 7 == 6 {
            s.clock.advance(1);
        }
    }
    let mut want = seed_new(&mut site).await;
    want.push(("p1".into(), put_at));
    want.push(("ev1".into(), ev_at));
    newest_order(&mut want);
    assert_eq!(want.len(), 614);
    for limit in [100, 33] {
        assert_eq!(new_pages(&s, limit).await, want, "pages of {limit}");
    }
}

/// The seed's settings that hotrank cannot serve are refused up front.
#[test]
fn seed_layout_refuses_a_cluster() {
    let mut c = hotrank::config::Config {
        store: hotrank::config::StoreKind::Redis,
        ..Default::default()
    };
    c.redis.layout = RedisLayout::Seed;
    c.redis.cluster = true;
    let e = c.validate().unwrap_err();
    assert!(e.contains("layout"), "{e}");
}

/// Seed 000's atomic update, written from its steps: `INCRBY` the views,
/// `PFADD` + `PFCOUNT` the visitor sketch, the hours since `publishedAt`
/// (Redis `TIME`; no publishedAt: 0), `(α·pv + β·uv) / (hours + base)^γ`,
/// `ZADD hot:score`. KEYS: views, hll, zset, meta; ARGV: id, visitor, α,
/// β, base, γ.
const SEED000_SCRIPT: &str = r"
local pv = redis.call('INCRBY', KEYS[1], 1)
redis.call('PFADD', KEYS[2], ARGV[2])
local uv = redis.call('PFCOUNT', KEYS[2])
local published = tonumber(redis.call('HGET', KEYS[4], 'publishedAt') or '0')
local clock = redis.call('TIME')
local t = tonumber(clock[1])
local age = 0
if published > 0 and t > published then age = (t - published) / 3600.0 end
local s = (tonumber(ARGV[3]) * pv + tonumber(ARGV[4]) * uv) / math.pow(age + tonumber(ARGV[5]), tonumber(ARGV[6]))
redis.call('ZADD', KEYS[3], s, ARGV[1])
return { pv, uv }
";

/// The seed's step 1: `HSET meta:article:<id> publishedAt <ts>`.
async fn seed000_publish(con: &mut redis::aio::MultiplexedConnection, p: &str, id: &str, ts: i64) {
    let _: () = con
        .hset(format!("{p}meta:article:{id}"), "publishedAt", ts)
        .await
        .unwrap();
}

async fn seed000_view(
    con: &mut redis::aio::MultiplexedConnection,
    p: &str,
    id: &str,
    visitor: &str,
) {
    let _: Vec<i64> = redis::Script::new(SEED000_SCRIPT)
        .key(format!("{p}counter:views:{id}"))
        .key(format!("{p}hll:uv:{id}"))
        .key(format!("{p}hot:score"))
        .key(format!("{p}meta:article:{id}"))
        .arg(id)
        .arg(visitor)
        .arg(1.0)
        .arg(1.2)
        .arg(2.0)
        .arg(1.5)
        .invoke_async(con)
        .await
        .unwrap();
}

/// The seed's formula, computed here from the keys at `now`.
async fn gravity_of(
    con: &mut redis::aio::MultiplexedConnection,
    p: &str,
    id: &str,
    now: i64,
) -> f64 {
    let pv: Option<u64> = con.get(format!("{p}counter:views:{id}")).await.unwrap();
    let uv: u64 = redis::cmd("PFCOUNT")
        .arg(format!("{p}hll:uv:{id}"))
        .query_async(con)
        .await
        .unwrap();
    let published: Option<i64> = con
        .hget(format!("{p}meta:article:{id}"), "publishedAt")
        .await
        .unwrap();
    let published = published.unwrap_or(0);
    let age = if published > 0 && now > published {
        (now - published) as f64 / 3600.0
    } else {
        0.0
    };
    (pv.unwrap_or(0) as f64 + 1.2 * uv as f64) / (age + 2.0).powf(1.5)
}

/// Waits (real time) until the background refresh rewrote `hot:score` at
/// hotrank's clock `now`, i.e. until it equals `want` (id, score) in order.
async fn wait_hot_score(
    con: &mut redis::aio::MultiplexedConnection,
    p: &str,
    want: &[(String, f64)],
) -> Vec<(String, f64)> {
    let mut got: Vec<(String, f64)> = Vec::new();
    for _ in 0..100 {
        got = con
            .zrevrange_withscores(format!("{p}hot:score"), 0, -1)
            .await
            .unwrap();
        let same = got.len() == want.len()
            && got
                .iter()
                .zip(want)
                .all(|(a, b)| a.0 == b.0 && (a.1 - b.1).abs() <= 1e-9 * b.1.abs().max(1.0));
        if same {
            return got;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("hot:score never became {want:?}; it is {got:?}")
}

/// Seed 000's script and hotrank count into the same keys; without any
/// query, `hot:score` holds the exact scores of both sides' articles,
/// refreshed as the clock moves, trimmed to the top 1000, without deleted
/// articles.
#[tokio::test]
async fn seed000_side_by_side() {
    let prefix = unique_prefix();
    let now0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let s = hotrank_at(&prefix, now0).await;
    let mut con = connection().await;
    let p = prefix.as_str();
    // The seed's verification steps: publishedAt, then views.
    let mut ids: Vec<String> = Vec::new();
    for n in 0..5 {
        let id = format!("s{n}");
        let _: () = con
            .hset(
                format!("{p}meta:article:{id}"),
                "publishedAt",
                now0 - 3600 * (n + 1),
            )
            .await
            .unwrap();
        for v in 0..(3 + 4 * n) {
            seed000_view(&mut con, p, &id, &format!("visitor{}", v % (2 + n))).await;
        }
        ids.push(id);
    }
    // hotrank's articles, counted through its API.
    for n in 0..4 {
        let id = format!("h{n}");
        let (st, _) = s
            .admin_put(
                &format!("/api/articles/{id}"),
                &json!({"title": id, "publishedAt": now0 - 1800 * n}),
            )
            .await;
        assert_eq!(st, StatusCode::CREATED);
        for v in 0..(2 + 5 * n) {
            s.view(&id, &format!("w{v}")).await;
        }
        // The seed's script counts into hotrank's article too.
        seed000_view(&mut con, p, &id, "seed-visitor").await;
        ids.push(id);
    }
    // An article nobody viewed is not scored (the seed's script scores an
    // article on its first view).
    let (st, _) = s
        .admin_put("/api/articles/quiet", &json!({"publishedAt": now0}))
        .await;
    assert_eq!(st, StatusCode::CREATED);
    for step in 1..=2 {
        s.clock.advance(61);
        let now = s.clock.now();
        let mut want = Vec::new();
        for id in &ids {
            want.push((id.clone(), gravity_of(&mut con, p, id, now).await));
        }
        want.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        let got = wait_hot_score(&mut con, p, &want).await;
        assert_eq!(got.len(), 9, "step {step}");
        // hotrank's article view agrees with the seed's counters.
        for id in &ids {
            let (st, a) = s.get(&format!("/api/articles/{id}")).await;
            assert_eq!(st, StatusCode::OK);
            let pv: u64 = con.get(format!("{p}counter:views:{id}")).await.unwrap();
            assert_eq!(a["pv"].as_u64(), Some(pv), "{id}");
        }
    }
    // A deleted article leaves hot:score at the next refresh.
    let r = s
        .client
        .delete(s.url("/api/articles/h3"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    // 1,005 more articles the seed's script scored: only the top 1000 stay.
    for n in 0..1005 {
        let id = format!("x{n}");
        seed000_publish(&mut con, p, &id, now0 - 60 * n).await;
        seed000_view(&mut con, p, &id, "v").await;
    }
    ids.retain(|id| id != "h3");
    ids.extend((0..1005).map(|n| format!("x{n}")));
    s.clock.advance(61);
    let now = s.clock.now();
    let mut want = Vec::new();
    for id in &ids {
        want.push((id.clone(), gravity_of(&mut con, p, id, now).await));
    }
    want.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    want.truncate(1000);
    let got = wait_hot_score(&mut con, p, &want).await;
    assert_eq!(got.len(), 1000);
    assert!(got.iter().all(|(id, _)| id != "h3"));
}

fn real_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// `hotrank import --from-redis` (the library call behind it) of the
/// seed keys under `from_prefix` into the store `config` names.
async fn run_import(
    config: &hotrank::config::Config,
    from_prefix: &str,
    layout: &str,
) -> hotrank::cli::seed_import::ImportReport {
    let (c, url, p) = (config.clone(), server().url(), from_prefix.to_string());
    let l = layout.parse().unwrap();
    tokio::task::spawn_blocking(move || hotrank::cli::seed_import::import(&c, &url, &p, l))
        .await
        .unwrap()
        .expect("import")
}

/// The import into a new embedded data dir, twice; the second run must
/// change nothing.
async fn import_twice(
    from_prefix: &str,
    layout: &str,
) -> (
    Arc<tempfile::TempDir>,
    hotrank::config::Config,
    hotrank::cli::seed_import::ImportReport,
) {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let config = common::test_config(dir.path());
    let first = run_import(&config, from_prefix, layout).await;
    assert!(!first.unchanged);
    let second = run_import(&config, from_prefix, layout).await;
    assert!(second.unchanged, "{:?}", second.lines());
    assert_eq!(first.articles, second.articles);
    (dir, config, first)
}

/// A site of seed 003 imported: every article, vote count, order (by
/// score and per group) and voter agrees with the site's own lists.
#[tokio::test]
async fn import_seed003() {
    let prefix = unique_prefix();
    let mut site = Site003::new(&prefix).await;
    let now = real_now();
    let mut ids = Vec::new();
    for n in 0..40i64 {
        let id = site
            .post(
                &format!("user:{}", n % 7),
                &format!("t{n}"),
                "https://l",
                (now - 86_400 * 10 + 7_000 * n) as f64,
            )
            .await;
        site.add_groups(&id, &[["a", "b"][(n % 2) as usize]]).await;
        ids.push(id);
    }
    for (i, id) in ids.iter().enumerate() {
        for u in 0..(i % 9) {
            site.vote(
                &format!("user:{}", 100 + u),
                &format!("article:{id}"),
                now as f64,
            )
            .await;
        }
    }
    // Something no seed code writes: reported, not imported.
    let _: () = site
        .con
        .zadd(format!("{prefix}score:"), "article:999", 1.0)
        .await
        .unwrap();
    let (dir, config, report) = import_twice(&prefix, "seed003").await;
    assert_eq!(report.articles, 40);
    assert!(
        report
            .skipped
            .keys()
            .any(|k| k.contains("without an article:<id> hash")),
        "{:?}",
        report.lines()
    );
    let _: () = site
        .con
        .zrem(format!("{prefix}score:"), "article:999")
        .await
        .unwrap();
    let mut config = config;
    config.posting = hotrank::config::Access::Open;
    config.voting = hotrank::config::Access::Open;
    let s = TestServer::start_in(dir, config, now).await;
    assert_eq!(hot_pages(&s, None).await, seed_pages(&mut site, None).await);
    for g in ["a", "b"] {
        assert_eq!(
            hot_pages(&s, Some(g)).await,
            seed_pages(&mut site, Some(g)).await
        );
    }
    for id in &ids {
        let h: HashMap<String, String> = site
            .con
            .hgetall(format!("{prefix}article:{id}"))
            .await
            .unwrap();
        let (st, v) = s.get(&format!("/api/articles/{id}")).await;
        assert_eq!(st, StatusCode::OK);
        assert_eq!(v["votes"].as_u64(), Some(h["votes"].parse().unwrap()));
        assert_eq!(v["title"].as_str(), Some(h["title"].as_str()));
        let t: f64 = h["time"].parse().unwrap();
        assert_eq!(v["publishedAt"].as_f64(), Some(t.floor()));
    }
    // Voters of articles still open came along (hashed as the API hashes
    // a userId): they cannot vote again; articles past the week are closed.
    let last = ids.last().unwrap();
    assert_eq!(vote_api(&s, last, "100").await, StatusCode::CONFLICT);
    assert_eq!(
        vote_api(&s, last, "4").await,
        StatusCode::CONFLICT,
        "the poster"
    );
    assert_eq!(vote_api(&s, last, "fresh").await, StatusCode::OK);
    assert_eq!(vote_api(&s, &ids[0], "fresh").await, StatusCode::GONE);
}

/// A site of seed 000 imported: PV and UV of every article, the sketches
/// byte for byte (into a Redis store), and the seed's junk reported.
#[tokio::test]
async fn import_seed000() {
    let prefix = unique_prefix();
    let p = prefix.as_str();
    let mut con = connection().await;
    let now = real_now();
    for n in 0..12i64 {
        let id = format!("a{n}");
        seed000_publish(&mut con, p, &id, now - 5_000 * n).await;
        for v in 0..(5 * n + 1) {
            seed000_view(&mut con, p, &id, &format!("vis{}", v * 7 % (3 * n + 2))).await;
        }
    }
    let _: () = con
        .set(format!("{p}counter:views:not valid!"), 3)
        .await
        .unwrap();
    let _: () = con
        .set(format!("{p}hll:uv:a0x"), "not a sketch")
        .await
        .unwrap();
    let (dir, config, report) = import_twice(p, "seed000").await;
    assert_eq!(report.articles, 12, "{:?}", report.lines());
    assert!(
        report
            .skipped
            .keys()
            .any(|k| k.contains("invalid article id"))
    );
    assert!(
        report
            .skipped
            .keys()
            .any(|k| k.contains("not a HyperLogLog"))
    );
    let s = TestServer::start_in(dir, config, now).await;
    for n in 0..12 {
        let id = format!("a{n}");
        let (_, v) = s.get(&format!("/api/articles/{id}")).await;
        let pv: u64 = con.get(format!("{p}counter:views:{id}")).await.unwrap();
        let uv: u64 = redis::cmd("PFCOUNT")
            .arg(format!("{p}hll:uv:{id}"))
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(v["pv"].as_u64(), Some(pv), "{id}");
        assert_eq!(v["uv"].as_u64(), Some(uv), "{id}");
        assert_eq!(v["publishedAt"].as_i64(), Some(now - 5_000 * n));
    }
    // Into a Redis store (hotrank's layout): the sketches byte for byte.
    let target = unique_prefix();
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::test_config(dir.path());
    config.store = hotrank::config::StoreKind::Redis;
    config.redis.url = server().url();
    config.redis.prefix = target.clone();
    for round in 0..2 {
        let r = run_import(&config, &prefix, "seed000").await;
        assert_eq!(r.unchanged, round == 1);
    }
    for n in 0..12 {
        let a: Vec<u8> = con.get(format!("{p}hll:uv:a{n}")).await.unwrap();
        let b: Vec<u8> = con.get(format!("{target}hll:uv:a{n}")).await.unwrap();
        assert_eq!(a, b, "a{n}");
    }
}

/// Seed 001's hourly keys imported: counts per hour, the average dwell as
/// the seed computes it (dur / pv), the category; `cnt:uv` reported.
#[tokio::test]
async fn import_seed001() {
    use hotrank::time::{hour_of, hour_stamp};
    let prefix = unique_prefix();
    let p = prefix.as_str();
    let mut con = connection().await;
    let now = real_now();
    let h = hour_of(now);
    for n in 0..6i64 {
        let id = format!("c{n}");
        for back in 0..3 {
            let stamp = hour_stamp(h - back);
            for (metric, v) in [
                ("pv", 10 * n + back + 1),
                ("uv", 5),
                ("dur", 30 * n),
                ("like", n),
                ("cmt", back),
            ] {
                let _: () = con
                    .set(format!("{p}cnt:{metric}:{id}:{stamp}"), v)
                    .await
                    .unwrap();
            }
        }
        let cat = if n % 2 == 0 { "tech" } else { "life" };
        let _: () = con
            .zadd(format!("{p}hot:articles:{cat}"), &id, n as f64)
            .await
            .unwrap();
        let _: () = con
            .zadd(format!("{p}hot:articles"), &id, n as f64)
            .await
            .unwrap();
    }
    let _: () = con.set(format!("{p}cnt:pv:c0:2025"), 1).await.unwrap();
    let (dir, config, report) = import_twice(p, "seed001").await;
    assert_eq!(report.articles, 6);
    assert!(report.skipped.keys().any(|k| k.contains("cnt:uv")));
    assert!(report.skipped.keys().any(|k| k.contains("yyyyMMddHH")));
    let s = TestServer::start_in(dir, config, now).await;
    for n in 0..6i64 {
        let (_, v) = s.get(&format!("/api/articles/c{n}")).await;
        let pv: i64 = (0..3).map(|b| 10 * n + b + 1).sum();
        assert_eq!(v["pv"].as_i64(), Some(pv), "c{n}");
        assert_eq!(v["likes"].as_i64(), Some(3 * n));
        assert_eq!(v["comments"].as_i64(), Some(3));
        let avg = (90 * n) as f64 / pv as f64;
        assert!(
            (v["avgDwellSeconds"].as_f64().unwrap() - avg).abs() < 1e-9,
            "{v}"
        );
        let cat = if n % 2 == 0 { "tech" } else { "life" };
        assert_eq!(v["category"].as_str(), Some(cat));
    }
}

/// Seed 004's per-day sorted sets imported: clicks per item and day.
#[tokio::test]
async fn import_seed004() {
    use hotrank::time::{date_stamp, day_of};
    let prefix = unique_prefix();
    let p = prefix.as_str();
    let mut con = connection().await;
    let now = real_now();
    let today = day_of(now);
    for back in 0..3 {
        for n in 0..5i64 {
            let _: () = con
                .zincr(
                    format!("{p}{}", date_stamp(today - back)),
                    format!("m{n}"),
                    (n + 1) * (back + 1),
                )
                .await
                .unwrap();
        }
    }
    let _: () = con.zadd(format!("{p}2025-02-30"), "m0", 1).await.unwrap();
    let (dir, config, report) = import_twice(p, "seed004").await;
    assert_eq!(report.articles, 5);
    assert!(
        report.skipped.keys().any(|k| k.contains("yyyy-MM-dd")),
        "{:?}",
        report.lines()
    );
    let s = TestServer::start_in(dir, config, now).await;
    for n in 0..5i64 {
        let (_, v) = s.get(&format!("/api/articles/m{n}")).await;
        assert_eq!(v["pv"].as_i64(), Some((n + 1) * 6), "m{n}: {v}");
    }
}

/// Seed layout writes seed 001's hourly `cnt:*` keys (7-day expiry) and
/// seed 004's per-day sorted set as events are counted, and refreshes
/// `hot:articles`/`hot:articles:<category>` with the weighted score of
/// the last 24 hours without any query; hotrank's own layout writes none
/// of them.
#[tokio::test]
async fn seed001_and_seed004_keys() {
    use hotrank::time::{date_stamp, day_of, hour_of, hour_stamp};
    let prefix = unique_prefix();
    let p = prefix.as_str();
    let s = hotrank(p).await;
    let mut con = connection().await;
    let cats = ["tech", "life"];
    let mut events = Vec::new();
    for n in 0..6usize {
        let id = format!("a{n}");
        let (st, _) = s
            .admin_put(
                &format!("/api/articles/{id}"),
                &json!({"title": id, "category": cats[n % 2], "publishedAt": common::T0 - 3600 * n as i64}),
            )
            .await;
        assert_eq!(st, StatusCode::CREATED);
        for v in 0..(2 * n + 1) {
            let visitor = format!("v{}", v % (n + 1));
            events.push(
                json!({"type": "view", "articleId": id, "visitorId": format!("{visitor}-{v}")}),
            );
            if v % 2 == 0 {
                events.push(
                    json!({"type": "like", "articleId": id, "visitorId": format!("{visitor}-{v}")}),
                );
                events.push(json!({"type": "dwell", "articleId": id, "visitorId": format!("{visitor}-{v}"), "seconds": 10 + v}));
            }
            if v % 3 == 0 {
                events.push(json!({"type": "comment", "articleId": id, "visitorId": format!("{visitor}-{v}")}));
            }
        }
    }
    let r = s
        .client
        .post(s.url("/api/events"))
        .bearer_auth(common::INGEST)
        .json(&json!({ "events": events }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        v["verdicts"]["counted"].as_u64(),
        Some(events.len() as u64),
        "{v}"
    );
    let now = s.clock.now();
    let stamp = hour_stamp(hour_of(now));
    let date = date_stamp(day_of(now));
    for n in 0..6usize {
        let id = format!("a{n}");
        let views = 2 * n + 1;
        let count = |kind: &str| {
            events
                .iter()
                .filter(|e| e["articleId"] == id.as_str() && e["type"] == kind)
                .count()
        };
        let dur: i64 = events
            .iter()
            .filter(|e| e["articleId"] == id.as_str() && e["type"] == "dwell")
            .map(|e| e["seconds"].as_i64().unwrap())
            .sum();
        let get = |metric: &str| format!("{p}cnt:{metric}:{id}:{stamp}");
        let pv: usize = con.get(get("pv")).await.unwrap();
        assert_eq!(pv, views, "{id}");
        let uv: u64 = con.get(get("uv")).await.unwrap();
        let hll_uv: u64 = redis::cmd("PFCOUNT")
            .arg(format!("{p}hll:uv:h:{id}:{}", hour_of(now)))
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(uv, hll_uv);
        let likes: usize = con.get(get("like")).await.unwrap();
        assert_eq!(likes, count("like"));
        let cmts: Option<usize> = con.get(get("cmt")).await.unwrap();
        assert_eq!(cmts.unwrap_or(0), count("comment"));
        let d: i64 = con.get(get("dur")).await.unwrap();
        assert_eq!(d, dur);
        // 7 days after the hour ends (the event's hour, hotrank's clock).
        let want = (hour_of(now) + 1) * 3600 + 7 * 86_400 - now;
        for metric in ["pv", "uv", "like", "dur"] {
            let ttl: i64 = con.ttl(get(metric)).await.unwrap();
            assert!((want - 5..=want).contains(&ttl), "{metric} {ttl} vs {want}");
        }
        let clicks: Option<f64> = con.zscore(format!("{p}{date}"), &id).await.unwrap();
        assert_eq!(clicks, Some(views as f64), "seed 004 {id}");
    }
    let ttl: i64 = con.ttl(format!("{p}{date}")).await.unwrap();
    assert!(ttl > 0, "the day's set expires");
    // The per-minute batch, with nobody querying.
    s.clock.advance(61);
    let now = s.clock.now();
    let mut want: Vec<(String, f64)> = Vec::new();
    for _ in 0..100 {
        let got: Vec<(String, f64)> = con
            .zrevrange_withscores(format!("{p}hot:articles"), 0, -1)
            .await
            .unwrap();
        if got.len() == 6 {
            want = got;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(want.len(), 6, "hot:articles was never written");
    // Wait for the refresh at this clock (an earlier one may be there).
    let mut scores = HashMap::new();
    for n in 0..6 {
        let (_, a) = s.get(&format!("/api/articles/a{n}")).await;
        scores.insert(format!("a{n}"), a["scores"]["weighted"].as_f64().unwrap());
    }
    let mut ok = false;
    for _ in 0..100 {
        let got: Vec<(String, f64)> = con
            .zrevrange_withscores(format!("{p}hot:articles"), 0, -1)
            .await
            .unwrap();
        if got.len() == 6 && got.iter().all(|(id, sc)| (scores[id] - sc).abs() < 1e-9) {
            ok = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(ok, "hot:articles never held the weighted scores at {now}");
    for (i, cat) in cats.iter().enumerate() {
        let got: Vec<(String, f64)> = con
            .zrevrange_withscores(format!("{p}hot:articles:{cat}"), 0, -1)
            .await
            .unwrap();
        let mut ids: Vec<String> = got.iter().map(|(id, _)| id.clone()).collect();
        ids.sort();
        let want: Vec<String> = (0..6)
            .filter(|n| n % 2 == i)
            .map(|n| format!("a{n}"))
            .collect();
        assert_eq!(ids, want, "{cat}");
        assert!(got.iter().all(|(id, sc)| (scores[id] - sc).abs() < 1e-9));
    }
    // A category emptied by PUT disappears at the next refresh (without
    // a scan of the keyspace: the refresh remembers what it wrote).
    for n in (1..6).step_by(2) {
        let (st, _) = s
            .admin_put(
                &format!("/api/articles/a{n}"),
                &json!({"title": format!("a{n}"), "category": "tech", "publishedAt": common::T0 - 3600 * n as i64}),
            )
            .await;
        assert!(st.is_success(), "{st}");
    }
    s.clock.advance(61);
    let mut gone = false;
    for _ in 0..100 {
        let life: i64 = con.exists(format!("{p}hot:articles:life")).await.unwrap();
        let tech: i64 = con.zcard(format!("{p}hot:articles:tech")).await.unwrap();
        if life == 0 && tech == 6 {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(gone, "the emptied category's ranking was not dropped");
    every_key_documented(&mut con, p).await;
    // hotrank's own layout writes none of these keys.
    let own = unique_prefix();
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let o = TestServer::start_redis(dir, &server().url(), |c| c.redis.prefix = own.clone()).await;
    o.view("a0", "x").await;
    let keys: Vec<String> = con.keys(format!("{own}*")).await.unwrap();
    assert!(
        keys.iter()
            .all(|k| !k.contains("cnt:") && !k.contains(&date)),
        "{keys:?}"
    );
}

/// The command line: `hotrank import --from-redis URL --layout L
/// --from-prefix P` prints what it read and did not interpret, a second
/// run says nothing changed, and a wrong layout is refused with a clear
/// message.
#[tokio::test]
async fn import_command_line() {
    let prefix = unique_prefix();
    let mut site = Site003::new(&prefix).await;
    let now = real_now();
    for n in 0..3 {
        site.post(
            "user:1",
            &format!("t{n}"),
            "https://l",
            (now - 10 * n) as f64,
        )
        .await;
    }
    let _: () = site
        .con
        .sadd(format!("{prefix}group:g"), "article:77")
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap().to_string();
    let run = |layout: &'static str| {
        let (data, prefix) = (data.clone(), prefix.clone());
        async move {
            tokio::task::spawn_blocking(move || {
                std::process::Command::new(env!("CARGO_BIN_EXE_hotrank"))
                    .args(["import", "--data-dir", &data, "--from-redis"])
                    .arg(server().url())
                    .args(["--layout", layout, "--from-prefix", &prefix])
                    .output()
                    .expect("run hotrank")
            })
            .await
            .unwrap()
        }
    };
    let out = run("seed003").await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("read: ") && err.contains("article:<id> 3"),
        "{err}"
    );
    assert!(
        err.contains("not interpreted: group member that is not a known article:<id>: 1"),
        "{err}"
    );
    assert!(err.contains("imported 3 articles"), "{err}");
    let out = run("seed003").await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("nothing changed"), "{err}");
    let out = run("seed9").await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("seed000, seed001, seed003 or seed004"),
        "{err}"
    );
}

/// Seed layout: articles hotrank posts (seed_post.lua) are in the
/// filtered newest index like any other, and leave it when deleted.
#[tokio::test]
async fn posts_are_listed_by_a_filtered_newest_page() {
    let prefix = unique_prefix();
    let s = hotrank(&prefix).await;
    // A first filtered page fills the index for what is there (nothing):
    // what comes after is indexed by the posting script itself.
    let (st, v) = s.get("/api/new?group=rust").await;
    assert_eq!((st, common::page_ids(&v).len()), (StatusCode::OK, 0), "{v}");
    let mut posted = Vec::new();
    for (i, group) in ["rust", "go", "rust"].into_iter().enumerate() {
        let (st, v) = s
            .post(
                "/api/articles",
                &json!({"poster": "7", "title": format!("t{i}"), "url": "https://t", "groups": [group]}),
            )
            .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        posted.push(v["articleId"].as_str().unwrap().to_string());
        s.clock.advance(10);
    }
    let (st, v) = s.get("/api/new?group=rust").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(
        common::page_ids(&v),
        [posted[2].as_str(), posted[0].as_str()]
    );
    assert_eq!(delete_api(&s, &posted[2]).await, StatusCode::NO_CONTENT);
    let (_, v) = s.get("/api/new?group=rust").await;
    assert_eq!(common::page_ids(&v), [posted[0].as_str()]);
    let (_, v) = s.get("/api/new?group=go").await;
    assert_eq!(common::page_ids(&v), [posted[1].as_str()]);
}
