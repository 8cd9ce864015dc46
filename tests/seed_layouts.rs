//! `[redis] layout = "seed"`: the seeds' own code and hotrank side by side
//! on one Redis. The seed clients below are written from the seeds' texts
//! (the command sequences they list), one real redis-server per binary,
//! one key prefix per test.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use redis::AsyncCommands;
use reqwest::StatusCode;
use serde_json::json;

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

async fn hotrank(prefix: &str) -> TestServer {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    TestServer::start_redis(dir, &server().url(), |c| {
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
    })
    .await
}

/// Seed 003's voting site, from its text: post (INCR, SADD voted, EXPIRE,
/// HSET, ZADD time:/score:), vote (ZSCORE time: cutoff, SADD voted:,
/// ZINCRBY score:, HINCRBY votes), lists by ZREVRANGE + HGETALL in pages
/// of 25, a group's list by ZINTERSTORE … AGGREGATE MAX.
struct Site003 {
    con: redis::aio::MultiplexedConnection,
    p: String,
}

impl Site003 {
    async fn new(prefix: &str) -> Self {
        let con = server()
            .client()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        Site003 {
            con,
            p: prefix.to_string(),
        }
    }

    async fn post(&mut self, user: &str, title: &str, link: &str, now: i64) -> String {
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
                    ("time", now.to_string()),
                    ("votes", "1".to_string()),
                ],
            )
            .await
            .unwrap();
        let _: () = self
            .con
            .zadd(format!("{p}score:"), &article, now as f64 + VOTE)
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
    async fn vote(&mut self, user: &str, article: &str, now: i64) -> bool {
        let p = &self.p;
        let cutoff = (now - WEEK) as f64;
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

/// Every page of hotrank's votes ranking (optionally one group's).
async fn hot_pages(s: &TestServer, group: Option<&str>) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/api/hot?model=votes&limit={PAGE}");
        if let Some(g) = group {
            path.push_str(&format!("&group={g}"));
        }
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (st, v) = s.get(&path).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        for it in v["items"].as_array().unwrap() {
            out.push((
                it["articleId"].as_str().unwrap().to_string(),
                it["score"].as_f64().unwrap(),
            ));
        }
        match v["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
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
            let now = s.clock.now();
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
                let now = s.clock.now();
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
    let none = HashSet::new();
    agree(&s, &mut site, &votes, &groups, &none).await;

    // Deletes, one posted on each side.
    let mut deleted = HashSet::new();
    for id in [&posted[0], &posted[1]] {
        assert_eq!(delete_api(&s, id).await, StatusCode::NO_CONTENT);
        assert_eq!(delete_api(&s, id).await, StatusCode::NOT_FOUND);
        deleted.insert(id.clone());
    }
    let now = s.clock.now();
    assert!(
        !site
            .vote("user:999", &format!("article:{}", posted[1]), now)
            .await
    );
    assert_eq!(vote_api(&s, &posted[1], "999").await, StatusCode::NOT_FOUND);
    agree(&s, &mut site, &votes, &groups, &deleted).await;

    // A week after the first posts, voting on them is closed on both sides.
    s.clock.advance(WEEK - 100);
    let now = s.clock.now();
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
}

/// The seed's settings that hotrank cannot serve are refused up front.
#[test]
fn seed_layout_refuses_a_cluster() {
    let mut c = hotrank::config::Config::default();
    c.store = hotrank::config::StoreKind::Redis;
    c.redis.layout = RedisLayout::Seed;
    c.redis.cluster = true;
    let e = c.validate().unwrap_err();
    assert!(e.contains("layout"), "{e}");
}
