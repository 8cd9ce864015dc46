//! HyperLogLog micro-benchmarks: add (sparse/dense), count (sparse/dense),
//! merge, union of 72 sketches, and (de)serialisation.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use hotrank::sketch::{HLL_SEED, Hll, murmur64a};

/// Element keys like the ones hotrank adds (visitor ids).
fn keys(n: usize, salt: u64) -> Vec<Vec<u8>> {
    (0..n as u64)
        .map(|i| format!("visitor:{:016x}", murmur64a(&i.to_le_bytes(), salt)).into_bytes())
        .collect()
}

fn sketch(n: usize, salt: u64) -> Hll {
    let mut h = Hll::new();
    for i in 0..n as u64 {
        h.add_hash(murmur64a(&i.to_le_bytes(), salt ^ HLL_SEED));
    }
    h
}

fn bench_add(c: &mut Criterion) {
    let mut g = c.benchmark_group("hll_add");
    const N: usize = 4096;
    let elems = keys(N, 1);
    g.throughput(Throughput::Elements(N as u64));

    // Dense: a well-filled dense sketch (100k elements), then N new adds.
    let base = sketch(100_000, 2);
    assert!(!base.is_sparse());
    g.bench_function("dense", |b| {
        let mut h = base.clone();
        b.iter(|| {
            for e in &elems {
                black_box(h.add(e));
            }
        })
    });
    // The element shape redis-benchmark's `__rand_int__` produces (12 digits).
    let digits: Vec<Vec<u8>> = (0..N as u64)
        .map(|i| format!("{:012}", murmur64a(&i.to_le_bytes(), 9) % 100_000_000).into_bytes())
        .collect();
    g.bench_function("dense_12_digit_keys", |b| {
        let mut h = base.clone();
        b.iter(|| {
            for e in &digits {
                black_box(h.add(e));
            }
        })
    });
    g.bench_function("dense_prehashed", |b| {
        let mut h = base.clone();
        let hashes: Vec<u64> = elems.iter().map(|e| murmur64a(e, HLL_SEED)).collect();
        b.iter(|| {
            for &x in &hashes {
                black_box(h.add_hash(x));
            }
        })
    });

    // Sparse: the first 1000 elements of a fresh sketch (stays sparse).
    const S: usize = 1000;
    let sparse_elems = keys(S, 3);
    g.throughput(Throughput::Elements(S as u64));
    g.bench_function("sparse_fresh_1000", |b| {
        b.iter_batched_ref(
            Hll::new,
            |h| {
                for e in &sparse_elems {
                    black_box(h.add(e));
                }
            },
            BatchSize::SmallInput,
        )
    });
    // Sparse, near the size limit (~2.5 KB image): cost of one more add.
    let near = {
        let mut h = Hll::new();
        let mut i = 0u64;
        while h.byte_len() < 2500 {
            h.add(&i.to_le_bytes());
            i += 1;
        }
        assert!(h.is_sparse());
        h
    };
    let probe = keys(64, 4);
    g.throughput(Throughput::Elements(probe.len() as u64));
    g.bench_function("sparse_2500B_image", |b| {
        b.iter_batched_ref(
            || near.clone(),
            |h| {
                for e in &probe {
                    black_box(h.add(e));
                }
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn bench_count(c: &mut Criterion) {
    let mut g = c.benchmark_group("hll_count");
    let dense = sketch(100_000, 5);
    let sparse = sketch(1000, 6);
    assert!(!dense.is_sparse() && sparse.is_sparse());
    // estimate() with a stale cache recomputes every time.
    g.bench_function("dense", |b| b.iter(|| black_box(&dense).estimate()));
    g.bench_function("sparse_1000", |b| b.iter(|| black_box(&sparse).estimate()));
    let mut cached = dense.clone();
    cached.count();
    g.bench_function("dense_cached", |b| {
        b.iter(|| black_box(&mut cached).count())
    });
    g.finish();
}

fn bench_merge(c: &mut Criterion) {
    let mut g = c.benchmark_group("hll_merge");
    let d1 = sketch(100_000, 7);
    let d2 = sketch(100_000, 8);
    let s1 = sketch(300, 9);
    let s2 = sketch(300, 10);
    g.bench_function("dense_dense", |b| {
        b.iter_batched_ref(
            || d1.clone(),
            |h| h.merge(black_box(&d2)),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("dense_sparse", |b| {
        b.iter_batched_ref(
            || d1.clone(),
            |h| h.merge(black_box(&s1)),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("sparse_sparse_300", |b| {
        b.iter_batched_ref(
            || s1.clone(),
            |h| h.merge(black_box(&s2)),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn bench_union(c: &mut Criterion) {
    let mut g = c.benchmark_group("hll_union_count");
    // 72 hourly sketches (three days), mixed: most dense, some sparse.
    let sketches: Vec<Hll> = (0..72)
        .map(|i| sketch(if i % 4 == 0 { 500 } else { 20_000 }, 100 + i))
        .collect();
    let refs: Vec<&Hll> = sketches.iter().collect();
    g.bench_function("72_mixed", |b| {
        b.iter(|| Hll::union_count(black_box(&refs)))
    });
    let dense: Vec<Hll> = (0..72).map(|i| sketch(20_000, 200 + i)).collect();
    let refs: Vec<&Hll> = dense.iter().collect();
    g.bench_function("72_dense", |b| {
        b.iter(|| Hll::union_count(black_box(&refs)))
    });
    g.finish();
}

fn bench_serde(c: &mut Criterion) {
    let mut g = c.benchmark_group("hll_bytes");
    let dense = sketch(100_000, 11);
    let sparse = sketch(1000, 12);
    let (db, sb) = (dense.to_bytes(), sparse.to_bytes());
    g.bench_function("to_bytes_dense", |b| {
        b.iter(|| black_box(&dense).to_bytes())
    });
    g.bench_function("from_bytes_dense", |b| {
        b.iter(|| Hll::from_bytes(black_box(&db)).unwrap())
    });
    g.bench_function("to_bytes_sparse", |b| {
        b.iter(|| black_box(&sparse).to_bytes())
    });
    g.bench_function("from_bytes_sparse", |b| {
        b.iter(|| Hll::from_bytes(black_box(&sb)).unwrap())
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_add,
    bench_count,
    bench_merge,
    bench_union,
    bench_serde
);
criterion_main!(benches);
