//! Regression (issue "Exact and durable at the edges", scenario 3): the
//! Redis threshold walk must page its sorted set of bounds by score, not by
//! position. Another node's query writes tighter bounds while this node is
//! between two pages of its walk; entries it has read move down, the rest
//! slide up, and a page by position skips the ones that slid past it.
//!
//! A proxy between node A and redis-server holds A's second page request
//! until node B (connected directly) has answered the same query and
//! written its bounds back.

mod common;

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use hotrank::model::{ArticleId, ArticleMeta, Event, HotQuery, RangeSpec};
use hotrank::score::ModelKind;
use hotrank::store::redis::{RedisOptions, RedisStore};
use hotrank::store::{Store, StoreSettings};

const T: i64 = 1_763_760_000;

/// Forwards one client's connections to `upstream`; before forwarding the
/// second command that reads the ranking by bound (`ZREVRANGE…`), asks the
/// test to act (`hook`) and waits for its answer.
async fn proxy(upstream: u16) -> (u16, mpsc::Receiver<oneshot::Sender<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (hook, hooks) = mpsc::channel(4);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = TcpStream::connect(("127.0.0.1", upstream)).await.unwrap();
            let hook = hook.clone();
            tokio::spawn(async move {
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 1 << 16];
                    while let Ok(n @ 1..) = sr.read(&mut buf).await {
                        if cw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
                let mut buf = vec![0u8; 1 << 16];
                let mut walks = 0;
                while let Ok(n @ 1..) = cr.read(&mut buf).await {
                    let chunk = &buf[..n];
                    if chunk.windows(9).any(|w| w == b"ZREVRANGE") {
                        walks += 1;
                        if walks == 2 {
                            let (done, wait) = oneshot::channel();
                            hook.send(done).await.unwrap();
                            wait.await.unwrap();
                        }
                    }
                    if sw.write_all(chunk).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (port, hooks)
}

fn settings() -> StoreSettings {
    StoreSettings {
        visitor_limit_per_minute: u32::MAX,
        ip_limit_per_minute: u32::MAX,
        ..StoreSettings::default()
    }
}

fn query() -> HotQuery {
    HotQuery::top(ModelKind::Gravity, RangeSpec::Hours(72), 1)
}

fn view(article: &str, visitor: u128) -> Event {
    Event::view(ArticleId::parse(article).unwrap(), visitor, T)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walk_is_not_misled_by_another_nodes_write_back() {
    let server = common::redis::RedisServer::start();
    let (port, mut hooks) = proxy(server.port()).await;
    let direct = RedisOptions {
        url: server.url(),
        ..RedisOptions::default()
    };
    let proxied = RedisOptions {
        url: format!("redis://127.0.0.1:{port}"),
        ..RedisOptions::default()
    };
    let b: Arc<dyn Store> = Arc::new(RedisStore::connect(direct, settings()).unwrap());
    // Ten old articles with many views, ninety new ones with one each: at T
    // the new ones score higher; ten hours later the old ones lead, while
    // the stored bounds (written at T) still put the new ones first.
    for i in 0..10 {
        let id = ArticleId::parse(&format!("old{i}")).unwrap();
        let meta = ArticleMeta {
            published_at: T - 100 * 3600,
            ..ArticleMeta::default()
        };
        b.put_article(id, meta, T).await.unwrap();
        let evs = (0..200).map(|v| view(&format!("old{i}"), v)).collect();
        b.ingest(evs, T).await.unwrap();
    }
    for i in 0..90 {
        b.ingest(vec![view(&format!("new{i:02}"), 1000 + i)], T)
            .await
            .unwrap();
    }
    let first = b.hot(&query(), T).await.unwrap();
    assert!(first.items[0].id.as_str().starts_with("new"));

    let a: Arc<dyn Store> = Arc::new(RedisStore::connect(proxied, settings()).unwrap());
    let later = T + 10 * 3600;
    let q = query();
    let (answer, ()) = tokio::join!(a.hot(&q, later), async {
        // A has read its first page of bounds: B answers the same query
        // and writes exact bounds back before A reads its second page.
        let done = tokio::time::timeout(std::time::Duration::from_secs(60), hooks.recv())
            .await
            .expect("node A never read a second page of bounds: the scenario did not happen")
            .unwrap();
        let page = b.hot(&query(), later).await.unwrap();
        assert!(page.items[0].id.as_str().starts_with("old"));
        done.send(()).unwrap();
    });
    let answer = answer.unwrap();
    let truth = b.hot(&query(), later).await.unwrap();
    assert_eq!(answer.items[0].id, truth.items[0].id);
    assert!(answer.items[0].id.as_str().starts_with("old"));
}
