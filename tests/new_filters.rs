//! `GET /api/new` with a filter (issue 31, finding 5): a page looks at
//! about `offset + limit` articles however rare the filter's value, never
//! at every article, and answers what a brute-force pass over every
//! article answers.

mod common;

use hotrank::model::{ArticleId, ArticleMeta, HotPage, HotQuery, RangeSpec};
use hotrank::score::ModelKind;
use hotrank::store::embedded::EmbeddedStore;
use hotrank::store::{Store, StoreSettings};

const NOW: i64 = 1_763_760_000;
const ARTICLES: usize = 50_000;
const LIMIT: usize = 20;

/// Article `i`'s metadata: every one in category `common`, but every
/// 10,000th in `rare`; kinds alternate, every 7th is in group `g7`.
fn meta(i: usize) -> ArticleMeta {
    ArticleMeta {
        category: Some(if i % 10_000 == 3 { "rare" } else { "common" }.into()),
        kind: Some(if i.is_multiple_of(2) { "even" } else { "odd" }.into()),
        groups: if i.is_multiple_of(7) {
            vec!["g7".into()]
        } else {
            vec![]
        },
        author: Some(format!("u{}", i % 13)),
        // Ties of publication time, ordered by id.
        published_at: NOW - 100_000 + (i / 3) as i64,
        ..ArticleMeta::default()
    }
}

fn id(i: usize) -> ArticleId {
    ArticleId::parse(&format!("n{i}")).unwrap()
}

/// Every article PUT; then a few deleted (and one of those PUT back), so
/// the indexes follow deletions too.
async fn load(store: &dyn Store) {
    for i in 0..ARTICLES {
        store.put_article(id(i), meta(i), NOW).await.unwrap();
    }
    for i in DELETED {
        assert!(store.delete_article(&id(i), NOW).await.unwrap());
    }
    store
        .put_article(id(REVIVED), meta(REVIVED), NOW)
        .await
        .unwrap();
}

/// Deleted articles (one of them PUT back after: [`REVIVED`]): the newest
/// `common`, a `rare` one, a `g7` one.
const DELETED: [usize; 3] = [ARTICLES - 1, 20_003, ARTICLES - 7];
const REVIVED: usize = ARTICLES - 7;

fn live(i: usize) -> bool {
    !DELETED.contains(&i) || i == REVIVED
}

fn query(category: Option<&str>, kind: Option<&str>, group: Option<&str>) -> HotQuery {
    HotQuery {
        category: category.map(str::to_owned),
        kind: kind.map(str::to_owned),
        group: group.map(str::to_owned),
        ..HotQuery::top(ModelKind::Gravity, RangeSpec::Hours(24), LIMIT)
    }
}

/// The list by brute force: every article that matches, newest first,
/// then by id.
fn oracle(q: &HotQuery) -> Vec<String> {
    let filter = hotrank::rank::Filter::of(q);
    let mut all: Vec<(i64, ArticleId)> = (0..ARTICLES)
        .filter(|&i| live(i) && filter.matches(&meta(i)))
        .map(|i| (meta(i).published_at, id(i)))
        .collect();
    all.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    all.into_iter().map(|(_, id)| id.to_string()).collect()
}

fn ids(p: &HotPage) -> Vec<String> {
    p.items.iter().map(|i| i.id.to_string()).collect()
}

/// Follows the cursor for `pages` pages; the ids read.
async fn pages(store: &dyn Store, mut q: HotQuery, pages: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..pages {
        let page = store.newest(&q, NOW).await.unwrap();
        out.extend(ids(&page));
        match page.cursor {
            Some(c) => q.cursor = Some(c),
            None => break,
        }
    }
    out
}

/// The filters asked, each with the work (articles looked at) a page of
/// `LIMIT` may take: the page and the one article that tells there is
/// more, plus, for a filter on two dimensions, what the smaller index
/// holds that the other rules out (one in two here).
fn cases() -> Vec<(HotQuery, usize)> {
    vec![
        (query(Some("nothing-has-this"), None, None), 0),
        (query(Some("rare"), None, None), 5),
        (query(Some("common"), None, None), LIMIT + 1),
        (query(None, Some("odd"), None), LIMIT + 1),
        (query(None, None, Some("g7")), LIMIT + 1),
        (query(None, None, Some("nobody")), 0),
        (query(Some("rare"), Some("odd"), None), 5),
        (query(None, Some("even"), Some("g7")), 2 * LIMIT + 2),
    ]
}

/// Checks every case's first page (its work at most the case's plus
/// `slack`: the Redis store reads its feeds a batch at a time), three
/// pages through the cursor and a deep offset against the oracle.
async fn check(store: &dyn Store, visited: impl Fn() -> u64, slack: usize) {
    for (q, work) in cases() {
        let work = work + slack;
        let want = oracle(&q);
        let before = visited();
        let page = store.newest(&q, NOW).await.unwrap();
        let looked = visited() - before;
        assert!(
            looked as usize <= work,
            "{looked} articles looked at for one page of {q:?} (at most {work})"
        );
        assert_eq!(ids(&page), want[..want.len().min(LIMIT)], "{q:?}");
        // Three pages through the cursor, and a deep offset, as the oracle.
        let read = pages(store, q.clone(), 3).await;
        assert_eq!(read, want[..want.len().min(3 * LIMIT)], "{q:?}");
        let deep = HotQuery {
            offset: 40,
            ..q.clone()
        };
        let page = store.newest(&deep, NOW).await.unwrap();
        let at = want.len().min(40);
        assert_eq!(ids(&page), want[at..want.len().min(40 + LIMIT)], "{q:?}");
    }
}

#[tokio::test]
async fn embedded_new_with_a_rare_filter_reads_about_one_page() {
    let store = EmbeddedStore::in_memory(StoreSettings::default());
    load(&store).await;
    check(&store, || store.new_visited(), 0).await;
}

async fn redis_case(shards: u32) {
    use hotrank::store::redis::{RedisOptions, RedisStore};
    let server = common::redis::RedisServer::start();
    let opts = RedisOptions {
        url: server.url(),
        shards,
        ..RedisOptions::default()
    };
    let store = RedisStore::connect(opts.clone(), StoreSettings::default()).unwrap();
    load(&store).await;
    check(&store, || store.new_visited(), LIMIT + 1).await;
    // A site written before the index existed: a node fills it before
    // its first filtered page, and answers the same.
    let mut con = server.connection();
    let keys = hotrank::store::redis::Keys::new("").with_shards(shards);
    for sk in keys.all_shards() {
        redis::cmd("DEL")
            .arg(sk.newest_by())
            .query::<()>(&mut con)
            .unwrap();
    }
    let node = RedisStore::connect(opts, StoreSettings::default()).unwrap();
    check(&node, || node.new_visited(), LIMIT + 1).await;
}

#[tokio::test]
async fn redis_new_with_a_rare_filter_reads_about_one_page() {
    redis_case(1).await;
}

#[tokio::test]
async fn redis_sharded_new_with_a_rare_filter_reads_about_one_page() {
    redis_case(4).await;
}

/// The same on a 3-primary Redis Cluster, one site over 3 shards (every
/// script's keys declared and in one slot).
#[tokio::test]
async fn redis_cluster_new_with_a_rare_filter_reads_about_one_page() {
    use hotrank::store::redis::{RedisOptions, RedisStore};
    let cluster = common::redis::Backend::Cluster(common::redis::RedisCluster::start(3, 0));
    let opts = RedisOptions {
        shards: 3,
        ..cluster.options("newc3:")
    };
    let store = RedisStore::connect(opts, StoreSettings::default()).unwrap();
    load(&store).await;
    check(&store, || store.new_visited(), LIMIT + 1).await;
}
