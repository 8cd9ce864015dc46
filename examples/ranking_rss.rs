//! The issue 31 probe (finding 6): how much a flood of distinct rankings
//! grows the process, on the embedded store with the default settings.
//!
//! Loads 100,000 articles (two hours of views each, so every range of two
//! hours or more caches a window per article; a quarter of them in one of
//! 50 categories), builds the default ranking, then asks `GET /api/hot`
//! for 200 distinct ranges (1h..200h) and 200 random categories (each
//! over a random range). Prints the resident set (VmRSS) before and after
//! the flood, and what the rankings and window caches hold.
//!
//! `cargo run --release --example ranking_rss [articles]`

use hotrank::loadgen::stream::Rng;
use hotrank::model::{ArticleId, ArticleMeta, Event, HotQuery, RangeSpec};
use hotrank::score::ModelKind;
use hotrank::store::embedded::EmbeddedStore;
use hotrank::store::{Store, StoreSettings};

const NOW: i64 = 1_763_760_000;

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: f64 = (status.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS");
    kb / 1024.0
}

fn query(range: RangeSpec, category: Option<String>) -> HotQuery {
    HotQuery {
        category,
        ..HotQuery::top(ModelKind::Gravity, range, 20)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let articles: usize = std::env::args()
        .nth(1)
        .map_or(100_000, |a| a.parse().expect("articles"));
    let store = EmbeddedStore::in_memory(StoreSettings {
        visitor_limit_per_minute: u32::MAX,
        ip_limit_per_minute: u32::MAX,
        ..StoreSettings::default()
    });
    let id = |a: usize| ArticleId::parse(&format!("a{a}")).unwrap();
    for chunk in (0..articles).collect::<Vec<_>>().chunks(1000) {
        let evs: Vec<Event> = (chunk.iter())
            .flat_map(|&a| {
                let v = a as u128;
                [
                    Event::view(id(a), v << 20, NOW - 3600),
                    Event::view(id(a), v << 20 | 1, NOW),
                ]
            })
            .collect();
        store.ingest(evs, NOW).await.unwrap();
    }
    for a in (0..articles).step_by(4) {
        let meta = ArticleMeta {
            category: Some(format!("c{}", a % 50)),
            published_at: NOW - 7200,
            ..ArticleMeta::default()
        };
        store.put_article(id(a), meta, NOW).await.unwrap();
    }
    store.warm(NOW);
    let before = rss_mb();
    let started = std::time::Instant::now();
    let mut rng = Rng::new(31);
    let mut peak = before;
    for h in 1..=200u32 {
        store
            .hot(&query(RangeSpec::Hours(h), None), NOW)
            .await
            .unwrap();
        peak = peak.max(rss_mb());
    }
    for _ in 0..200 {
        let cat = format!("c{}", rng.below(50));
        let range = RangeSpec::Hours(1 + rng.below(200) as u32);
        store.hot(&query(range, Some(cat)), NOW).await.unwrap();
        peak = peak.max(rss_mb());
    }
    let after = rss_mb();
    let sizes = store.ranking_sizes();
    println!(
        "articles {articles}: RSS {before:.0} MB before, {after:.0} MB after ({:+.0} MB; peak {:+.0} MB) in {:.1} s; \
         {} rankings, {} entries, {} window cache bytes",
        after - before,
        peak - before,
        started.elapsed().as_secs_f64(),
        sizes.rankings,
        sizes.entries,
        sizes.window_cache_bytes
    );
}
