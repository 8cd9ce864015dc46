//! Per-call cost of the bot check (`BotDetector::is_bot`) on real user
//! agents from tests/data/bots/: a cache hit (the same agents again, as in
//! most traffic) and a miss (every agent new, so the patterns run and the
//! verdict is cached), for browsers and for crawlers.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use hotrank::gate::BotDetector;

fn sample(name: &str) -> Vec<String> {
    let path = format!("{}/tests/data/bots/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// `base` repeated with a distinct suffix until `n` agents: more than the
/// verdict cache holds, so none is still cached when it comes round again.
fn distinct(base: &[String], n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("{} {i}", base[i % base.len()]))
        .collect()
}

fn bench_is_bot(c: &mut Criterion) {
    let mut browsers = sample("browsers-intoli.txt");
    browsers.extend(sample("browsers-isbot.txt"));
    let crawlers = sample("crawlers-monperrus.txt");
    let mut g = c.benchmark_group("is_bot");
    g.throughput(Throughput::Elements(1));
    for (kind, uas) in [("browser", &browsers), ("crawler", &crawlers)] {
        let d = BotDetector::new(&[], true).unwrap();
        for ua in uas.iter() {
            d.is_bot(ua);
        }
        let mut i = 0;
        g.bench_function(format!("hit/{kind}"), |b| {
            b.iter(|| {
                i = (i + 1) % uas.len();
                black_box(d.is_bot(black_box(&uas[i])))
            })
        });
        let fresh = distinct(uas, 200_000);
        let d = BotDetector::new(&[], true).unwrap();
        let mut i = 0;
        g.bench_function(format!("miss/{kind}"), |b| {
            b.iter(|| {
                i = (i + 1) % fresh.len();
                black_box(d.is_bot(black_box(&fresh[i])))
            })
        });
    }
    g.finish();

    // The built-in patterns alone, no cache: what a miss spends matching.
    let mut g = c.benchmark_group("builtin_match");
    g.throughput(Throughput::Elements(1));
    for (kind, uas) in [("browser", &browsers), ("crawler", &crawlers)] {
        let mut i = 0;
        g.bench_function(kind, |b| {
            b.iter(|| {
                i = (i + 1) % uas.len();
                black_box(hotrank::gate::bots::builtin().is_match(black_box(&uas[i])))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_is_bot);
criterion_main!(benches);
