//! Freshness, measured (bench/run.sh scenario 5).
//!
//! Replays a 72-hour stream of views through hotrank's embedded store and,
//! at 50 query times, compares three top-20 lists:
//! - **exact**: computed offline from the same events (per-hour PV and UV
//!   sketches, gravity over the 72 h window at the query time);
//! - **hotrank**: what `GET /api/hot?range=72h&limit=20` serves;
//! - **seed 000**: scores computed when each view arrives and stored, as
//!   seed 000's Lua script does (`ZADD hot:score`), read back at query time.
//!
//! Prints overlap@20 and Kendall's tau against the exact list per query
//! time and on average. `--json FILE` writes the figures.

use std::collections::HashMap;

use hotrank::loadgen::stream::Rng;
use hotrank::model::{ArticleId, ArticleMeta, Event, HotQuery, RangeSpec, hour_of};
use hotrank::score::{GravityParams, ModelKind};
use hotrank::sketch::Hll;
use hotrank::store::embedded::EmbeddedStore;
use hotrank::store::{Store, StoreSettings};

const ARTICLES: usize = 2000;
const HOURS: i64 = 72;
const VIEWS: usize = 300_000;
const QUERIES: usize = 50;
const TOP: usize = 20;
const T0: i64 = 1_763_000_000 - 1_763_000_000 % 3600;

struct Truth {
    published: i64,
    hours: HashMap<i64, (u64, Hll)>,
    pv: u64,
    uv: Hll,
    seed_score: f64,
}

fn overlap(a: &[String], b: &[String]) -> usize {
    a.iter().filter(|x| b.contains(x)).count()
}

/// Kendall's tau-a over the items both lists hold, by their ranks in each.
fn kendall(a: &[String], b: &[String]) -> f64 {
    let common: Vec<(usize, usize)> = a
        .iter()
        .enumerate()
        .filter_map(|(i, x)| b.iter().position(|y| y == x).map(|j| (i, j)))
        .collect();
    let n = common.len();
    if n < 2 {
        return 1.0;
    }
    let mut s = 0i64;
    for i in 0..n {
        for j in i + 1..n {
            let d = (common[i].0 as i64 - common[j].0 as i64)
                * (common[i].1 as i64 - common[j].1 as i64);
            s += d.signum();
        }
    }
    s as f64 / (n * (n - 1) / 2) as f64
}

fn top(scores: &mut [(String, f64)]) -> Vec<String> {
    scores.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    scores.iter().take(TOP).map(|(i, _)| i.clone()).collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let json_out = std::env::args().skip_while(|a| a != "--json").nth(1);
    let g = GravityParams::default();
    let store = EmbeddedStore::in_memory(StoreSettings::default());
    let mut rng = Rng::new(42);
    let mut truth: Vec<Truth> = (0..ARTICLES)
        .map(|_| Truth {
            // Published over the 72 h and the day before.
            published: T0 - 24 * 3600 + rng.below(((HOURS + 24) * 3600) as u64) as i64,
            hours: HashMap::new(),
            pv: 0,
            uv: Hll::new(),
            seed_score: 0.0,
        })
        .collect();
    for (i, t) in truth.iter().enumerate() {
        let meta = ArticleMeta {
            published_at: t.published,
            ..ArticleMeta::default()
        };
        store
            .put_article(ArticleId::from_number(i as u64), meta, T0)
            .await
            .unwrap();
    }
    // Views: an article draws readers from its publication on, with a
    // popularity of its own that fades: over a day or two for most, within
    // a few hours for news that bursts and stops.
    let appeal: Vec<f64> = (0..ARTICLES)
        .map(|i| 1.0 / (1.0 + i as f64).powf(0.8))
        .collect();
    let mut views: Vec<(i64, usize, u64)> = Vec::with_capacity(VIEWS);
    while views.len() < VIEWS {
        let a = rng.below(ARTICLES as u64) as usize;
        if rng.unit() > appeal[a] * 4.0 {
            continue;
        }
        let life = if a.is_multiple_of(3) {
            1.0 + 3.0 * rng.unit()
        } else {
            6.0 + 60.0 * rng.unit()
        } * 3600.0;
        let age = -life * (1.0 - rng.unit()).ln() / 3.0;
        let ts = truth[a].published + age as i64;
        if !(T0..T0 + HOURS * 3600).contains(&ts) {
            continue;
        }
        views.push((ts, a, rng.below(200_000)));
    }
    views.sort();
    // One counted view per (visitor, article) per 15 minutes, as hotrank's
    // dedupe window would count them: the offline truth and the seed then
    // see exactly the events hotrank counts, and only the scoring differs.
    let mut last: HashMap<(usize, u64), i64> = HashMap::new();
    views.retain(|&(ts, a, v)| match last.get(&(a, v)) {
        Some(&t) if ts - t < 900 => false,
        _ => {
            last.insert((a, v), ts);
            true
        }
    });
    let queries: Vec<i64> = (1..=QUERIES)
        .map(|q| T0 + q as i64 * HOURS * 3600 / QUERIES as i64)
        .collect();
    let q = HotQuery::top(ModelKind::Gravity, RangeSpec::Hours(HOURS as u32), TOP);
    let mut next = 0;
    let (mut ours, mut seeds) = (vec![], vec![]);
    let mut batch = vec![];
    for &at in &queries {
        while next < views.len() && views[next].0 < at {
            let (ts, a, v) = views[next];
            next += 1;
            let visitor = u128::from(v) << 64 | 0x5eed;
            batch.push(Event {
                ip: v,
                trusted: true,
                ..Event::view(ArticleId::from_number(a as u64), visitor, ts)
            });
            // The seed's Lua script: PV and UV at write time, score stored.
            // It has no dedupe; count what hotrank counts, to compare the
            // scoring design alone.
            let t = &mut truth[a];
            let element = visitor.to_le_bytes();
            let e = t
                .hours
                .entry(hour_of(ts))
                .or_insert_with(|| (0, Hll::new()));
            e.0 += 1;
            e.1.add(&element);
            t.pv += 1;
            t.uv.add(&element);
            let hours = (ts - t.published).max(0) as f64 / 3600.0;
            t.seed_score = (g.alpha * t.pv as f64 + g.beta * t.uv.count() as f64)
                / (hours + g.base).powf(g.gamma);
        }
        for o in store.ingest(std::mem::take(&mut batch), at).await.unwrap() {
            assert_eq!(o.map(|o| o.verdict), Ok(hotrank::model::Verdict::Counted));
        }
        let first = hour_of(at) - HOURS + 1;
        let mut exact: Vec<(String, f64)> = truth
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let inside: Vec<&(u64, Hll)> = t
                    .hours
                    .iter()
                    .filter(|(h, _)| **h >= first && **h <= hour_of(at))
                    .map(|(_, v)| v)
                    .collect();
                let pv: u64 = inside.iter().map(|(p, _)| p).sum();
                if pv == 0 {
                    return None;
                }
                let uv = Hll::union_count(&inside.iter().map(|(_, h)| h).collect::<Vec<_>>());
                let hours = (at - t.published).max(0) as f64 / 3600.0;
                Some((
                    i.to_string(),
                    (g.alpha * pv as f64 + g.beta * uv as f64) / (hours + g.base).powf(g.gamma),
                ))
            })
            .collect();
        let exact = top(&mut exact);
        let served: Vec<String> = store
            .hot(&q, at)
            .await
            .unwrap()
            .items
            .iter()
            .map(|i| i.id.to_string())
            .collect();
        let mut stored: Vec<(String, f64)> = truth
            .iter()
            .enumerate()
            .filter(|(_, t)| t.pv > 0)
            .map(|(i, t)| (i.to_string(), t.seed_score))
            .collect();
        let seed = top(&mut stored);
        ours.push((overlap(&served, &exact), kendall(&served, &exact)));
        seeds.push((overlap(&seed, &exact), kendall(&seed, &exact)));
    }
    let summary = |v: &[(usize, f64)]| {
        let min = v.iter().map(|x| x.0).min().unwrap_or(0);
        let mean = v.iter().map(|x| x.0 as f64).sum::<f64>() / v.len() as f64;
        let tau = v.iter().map(|x| x.1).sum::<f64>() / v.len() as f64;
        (min, mean, tau)
    };
    let (hmin, hmean, htau) = summary(&ours);
    let (smin, smean, stau) = summary(&seeds);
    println!(
        "{} views over {HOURS} h, {ARTICLES} articles, {QUERIES} query times, top {TOP}",
        views.len()
    );
    println!("| design | overlap@20 min | overlap@20 mean | Kendall tau mean |");
    println!("|---|---|---|---|");
    println!("| hotrank (exact at query time) | {hmin}/20 | {hmean:.2}/20 | {htau:.3} |");
    println!("| seed 000 (score at write) | {smin}/20 | {smean:.2}/20 | {stau:.3} |");
    if let Some(path) = json_out {
        let v = serde_json::json!({
            "views": views.len(), "queries": QUERIES,
            "hotrank": {"overlap_min": hmin, "overlap_mean": hmean, "tau_mean": htau, "per_query": ours},
            "seed": {"overlap_min": smin, "overlap_mean": smean, "tau_mean": stau, "per_query": seeds},
        });
        std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    }
}
