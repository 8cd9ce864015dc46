//! The issue 31 probe for finding 5: what one `GET /api/new` page costs
//! with a filter value no article has, a rare one and a common one.
//!
//! PUTs `articles` articles (default 200,000; every one in category
//! `common`, one in 10,000 in `rare`) into the embedded store, or into the
//! Redis at `redis_url` if given (flushed first: use a scratch server),
//! then times 100 first pages of 20 per filter and prints the mean.
//!
//! `cargo run --release --example new_filter_cost [articles] [redis_url]`

use std::time::Instant;

use hotrank::model::{ArticleId, ArticleMeta, HotQuery, RangeSpec};
use hotrank::score::ModelKind;
use hotrank::store::embedded::EmbeddedStore;
use hotrank::store::redis::{RedisOptions, RedisStore};
use hotrank::store::{Store, StoreSettings};

const NOW: i64 = 1_763_760_000;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let articles: usize = args
        .next()
        .map_or(200_000, |a| a.parse().expect("articles"));
    let url = args.next();
    let store: Box<dyn Store> = match &url {
        None => Box::new(EmbeddedStore::in_memory(StoreSettings::default())),
        Some(url) => {
            let client = redis::Client::open(url.as_str()).expect("redis url");
            let mut con = client.get_connection().expect("redis");
            redis::cmd("FLUSHALL")
                .query::<()>(&mut con)
                .expect("FLUSHALL");
            let opts = RedisOptions {
                url: url.clone(),
                ..RedisOptions::default()
            };
            Box::new(RedisStore::connect(opts, StoreSettings::default()).expect("store"))
        }
    };
    let loaded = Instant::now();
    for i in 0..articles {
        let meta = ArticleMeta {
            category: Some(if i % 10_000 == 3 { "rare" } else { "common" }.into()),
            published_at: NOW - 100_000 + i as i64,
            ..ArticleMeta::default()
        };
        let id = ArticleId::parse(&format!("n{i}")).unwrap();
        store.put_article(id, meta, NOW).await.unwrap();
    }
    println!(
        "{} store, {articles} articles loaded in {:.1} s",
        if url.is_some() { "redis" } else { "embedded" },
        loaded.elapsed().as_secs_f64()
    );
    // A first page catches the node up on the changes the load made.
    store.newest(&HotQuery::default_page(), NOW).await.unwrap();
    for cat in ["nothing-has-this", "rare", "common"] {
        let q = HotQuery {
            category: Some(cat.into()),
            ..HotQuery::top(ModelKind::Gravity, RangeSpec::Hours(24), 20)
        };
        let runs = 100;
        let started = Instant::now();
        let mut items = 0;
        for _ in 0..runs {
            items = store.newest(&q, NOW).await.unwrap().items.len();
        }
        let ms = started.elapsed().as_secs_f64() * 1000.0 / f64::from(runs);
        println!("category={cat}: {ms:.3} ms per page ({items} items)");
    }
}
