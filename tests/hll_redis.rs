//! Byte-for-byte compatibility of `sketch::Hll` with a real `redis-server`.
//!
//! Every test starts its own server (see `common::redis`). Random inputs come
//! from a seeded RNG; the seed is printed and can be overridden with
//! `HLL_TEST_SEED=<u64>` to explore or reproduce.

mod common;

use common::redis::RedisServer;
use hotrank::sketch::{HLL_SEED, Hll, murmur64a};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, Value};

const DEFAULT_SEED: u64 = 0x5eed_4711_2024;

fn seed_for(test: &str) -> u64 {
    let base = std::env::var("HLL_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    // Derive a per-test seed so tests stay independent of each other.
    let seed = murmur64a(test.as_bytes(), base);
    println!("{test}: HLL_TEST_SEED={base} (derived seed {seed:#x})");
    seed
}

/// Elements that land in a register with a value above 32 (the hash has at
/// least 32 zero bits above the index), found by exhaustive search. Adding
/// one to a sparse sketch forces the conversion to dense by value. Each is
/// the 8-byte little-endian encoding of the number (register index, value):
/// (3655, 33), (4539, 33), (13807, 33), (14662, 36).
const BIG_VALUE_ELEMENTS: [u64; 4] = [3_130_853_818, 7_555_790_606, 9_524_120_947, 16_048_431_967];

fn big_element(i: usize) -> Vec<u8> {
    BIG_VALUE_ELEMENTS[i % BIG_VALUE_ELEMENTS.len()]
        .to_le_bytes()
        .to_vec()
}

/// One random element: mostly short strings with deliberate repeats, some
/// binary, a few empty, rarely long.
fn element(rng: &mut StdRng, universe: u64) -> Vec<u8> {
    match rng.random_range(0..1000u32) {
        0..=699 => format!("item:{}", rng.random_range(0..universe.max(1))).into_bytes(),
        700..=949 => {
            let len = rng.random_range(0..48usize);
            let mut v = vec![0u8; len];
            rng.fill(&mut v[..]);
            v
        }
        950..=989 => rng.random_range(0..universe.max(1)).to_le_bytes().to_vec(),
        990..=996 => Vec::new(),
        _ => {
            let len = rng.random_range(64..4096usize);
            let mut v = vec![0u8; len];
            rng.fill(&mut v[..]);
            v
        }
    }
}

fn elements(rng: &mut StdRng, n: usize) -> Vec<Vec<u8>> {
    // A universe a bit larger than n gives a realistic share of repeats.
    let universe = (n as u64) + (n as u64) / 4 + 1;
    (0..n).map(|_| element(rng, universe)).collect()
}

/// Sizes from 0 to 200,000, skewed so that most sets are small.
fn skewed_size(rng: &mut StdRng) -> usize {
    match rng.random_range(0..100u32) {
        0..=44 => rng.random_range(0..=200),
        45..=79 => rng.random_range(200..=3000),
        80..=95 => rng.random_range(3000..=20_000),
        _ => rng.random_range(20_000..=60_000),
    }
}

fn get(con: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("GET")
        .arg(key)
        .query::<Option<Vec<u8>>>(con)
        .expect("GET")
        .unwrap_or_default()
}

fn set(con: &mut Connection, key: &str, bytes: &[u8]) {
    redis::cmd("SET")
        .arg(key)
        .arg(bytes)
        .query::<()>(con)
        .expect("SET");
}

fn pfcount(con: &mut Connection, keys: &[String]) -> i64 {
    let mut c = redis::cmd("PFCOUNT");
    for k in keys {
        c.arg(k);
    }
    c.query::<i64>(con).expect("PFCOUNT")
}

fn hex_diff(a: &[u8], b: &[u8]) -> String {
    let first = a.iter().zip(b).position(|(x, y)| x != y);
    format!(
        "lengths {} vs {}, first difference at byte {:?}; ours[..40]={:02x?} redis[..40]={:02x?}",
        a.len(),
        b.len(),
        first,
        &a[..a.len().min(40)],
        &b[..b.len().min(40)]
    )
}

#[track_caller]
fn assert_same_bytes(ours: &Hll, redis_bytes: &[u8], what: &str) {
    let o = ours.as_bytes();
    assert!(
        o == redis_bytes,
        "{what}: images differ: {}",
        hex_diff(o, redis_bytes)
    );
}

/// PFADD one element per command, pipelined, comparing every return value and
/// the image after every element.
fn add_fine(con: &mut Connection, key: &str, ours: &mut Hll, elems: &[Vec<u8>]) {
    for chunk in elems.chunks(250) {
        let mut p = redis::pipe();
        for e in chunk {
            p.cmd("PFADD").arg(key).arg(e.as_slice());
            p.cmd("GET").arg(key);
        }
        let replies: Vec<Value> = p.query(con).expect("pipelined PFADD/GET");
        for (e, pair) in chunk.iter().zip(replies.chunks(2)) {
            let changed = ours.add(e);
            let Value::Int(r) = pair[0] else {
                panic!("PFADD reply {:?}", pair[0])
            };
            assert_eq!(changed, r == 1, "{key}: PFADD return for element {e:02x?}");
            let Value::BulkString(ref b) = pair[1] else {
                panic!("GET reply {:?}", pair[1])
            };
            assert_same_bytes(ours, b, &format!("{key} after PFADD {e:02x?}"));
        }
    }
}

/// PFADD in commands of up to 1000 elements, 16 commands per pipeline,
/// comparing each command's return value and the image after each pipeline.
fn add_batched(con: &mut Connection, key: &str, ours: &mut Hll, elems: &[Vec<u8>]) {
    for group in elems.chunks(16_000) {
        let mut p = redis::pipe();
        for cmd_elems in group.chunks(1000) {
            let c = p.cmd("PFADD").arg(key);
            for e in cmd_elems {
                c.arg(e.as_slice());
            }
        }
        let replies: Vec<i64> = p.query(con).expect("pipelined PFADD");
        for (cmd_elems, r) in group.chunks(1000).zip(replies) {
            let mut changed = false;
            for e in cmd_elems {
                changed |= ours.add(e);
            }
            assert_eq!(changed, r == 1, "{key}: PFADD batch return");
        }
        assert_same_bytes(ours, &get(con, key), &format!("{key} after batch"));
    }
}

/// Builds the same set on both sides; returns the sketch.
fn build(con: &mut Connection, key: &str, elems: &[Vec<u8>], fine: bool, max: usize) -> Hll {
    let mut ours = Hll::with_sparse_max_bytes(max);
    if elems.is_empty() {
        // `PFADD key` with no elements creates the empty key.
        let r: i64 = redis::cmd("PFADD").arg(key).query(con).expect("PFADD");
        assert_eq!(r, 1);
    } else if fine {
        add_fine(con, key, &mut ours, elems);
    } else {
        add_batched(con, key, &mut ours, elems);
    }
    assert_same_bytes(&ours, &get(con, key), &format!("{key} built"));
    ours
}

/// PFCOUNT on both sides, then compare the images (cache bytes included).
fn count_both(con: &mut Connection, key: &str, ours: &mut Hll) -> u64 {
    let est = ours.estimate();
    let c = ours.count();
    assert_eq!(est, c, "{key}: estimate vs count");
    let r = pfcount(con, &[key.to_string()]);
    assert_eq!(c as i64, r, "{key}: count vs PFCOUNT");
    assert_same_bytes(ours, &get(con, key), &format!("{key} after PFCOUNT"));
    // Second call is served from the cache on both sides.
    assert_eq!(ours.count() as i64, pfcount(con, &[key.to_string()]));
    c
}

#[test]
fn random_sets_match_pfadd_and_pfcount() {
    let server = RedisServer::start();
    let mut con = server.connection();
    let mut rng = StdRng::seed_from_u64(seed_for("random_sets_match_pfadd_and_pfcount"));

    let mut sizes: Vec<usize> = (0..300).map(|_| skewed_size(&mut rng)).collect();
    sizes.extend([0, 1, 2, 200_000, 100_000, 50_000]);

    let (mut sparse, mut dense, mut crossed_by_size) = (0, 0, 0);
    for (i, &n) in sizes.iter().enumerate() {
        let key = format!("set:{i}");
        let elems = elements(&mut rng, n);
        let fine = n <= 2500 && i % 3 == 0;
        let mut ours = build(&mut con, &key, &elems, fine, 3000);
        if ours.is_sparse() {
            sparse += 1;
        } else {
            dense += 1;
            // Values above 32 are astronomically unlikely here, so a dense
            // result means the sparse size limit was crossed.
            crossed_by_size += 1;
        }
        count_both(&mut con, &key, &mut ours);

        // More elements after a PFCOUNT: the stale flag must be set the same
        // way (the rest of the cached bytes stay as they were).
        let n_more = rng.random_range(0..50);
        let more = elements(&mut rng, n_more);
        add_fine(&mut con, &key, &mut ours, &more);
        count_both(&mut con, &key, &mut ours);

        // And a value > 32 converts sparse to dense in both.
        if i % 10 == 0 {
            let was_sparse = ours.is_sparse();
            add_fine(&mut con, &key, &mut ours, &[big_element(i)]);
            assert!(
                !ours.is_sparse(),
                "{key}: big value must leave the sketch dense"
            );
            if was_sparse {
                count_both(&mut con, &key, &mut ours);
            }
        }
    }
    println!("sets: {sparse} sparse, {dense} dense ({crossed_by_size} by size)");
    assert!(sparse > 50 && dense > 20);
}

#[test]
fn special_elements() {
    let server = RedisServer::start();
    let mut con = server.connection();

    let mut specials: Vec<Vec<u8>> = vec![Vec::new(), vec![0], vec![0; 8], vec![0xff; 9]];
    // Every murmur tail length, with NULs and high bytes.
    for len in 0..=64usize {
        specials.push((0..len).map(|i| (i * 37 + len) as u8).collect());
    }
    specials.push((0..=255u8).collect());
    specials.push("ünïcödé ✓".as_bytes().to_vec());
    // Very long elements.
    specials.push(vec![b'x'; 100 * 1024]);
    specials.push((0..100 * 1024 + 3).map(|i| (i % 251) as u8).collect());
    specials.push((0..1024 * 1024 + 5).map(|i| (i * 7 % 256) as u8).collect());

    let mut ours = build(&mut con, "special", &specials, true, 3000);
    count_both(&mut con, "special", &mut ours);
    // Re-adding changes nothing: all PFADDs return 0.
    add_fine(&mut con, "special", &mut ours, &specials);

    // Each big-value element alone: sparse -> dense by value on the first add.
    for i in 0..BIG_VALUE_ELEMENTS.len() {
        let key = format!("big:{i}");
        let mut h = build(&mut con, &key, &specials[..3], true, 3000);
        assert!(h.is_sparse());
        add_fine(&mut con, &key, &mut h, &[big_element(i)]);
        assert!(!h.is_sparse());
        count_both(&mut con, &key, &mut h);
    }
    // A big value as the very first element of a new key.
    let mut h = build(&mut con, "big:first", &[big_element(0)], true, 3000);
    assert!(!h.is_sparse());
    count_both(&mut con, "big:first", &mut h);
}

#[test]
fn union_counts_match_multi_key_pfcount() {
    let server = RedisServer::start();
    let mut con = server.connection();
    let mut rng = StdRng::seed_from_u64(seed_for("union_counts_match_multi_key_pfcount"));

    let mut keys = Vec::new();
    let mut sketches = Vec::new();
    for i in 0..130 {
        let key = format!("u:{i}");
        let n = match i % 10 {
            0 => rng.random_range(3000..30_000),
            1 | 2 => rng.random_range(500..3000),
            3 => 0,
            _ => rng.random_range(1..400),
        };
        let elems = elements(&mut rng, n);
        sketches.push(build(&mut con, &key, &elems, false, 3000));
        keys.push(key);
    }
    // A key that does not exist counts as empty in Redis; an empty sketch here.
    keys.push("u:missing".to_string());
    sketches.push(Hll::new());

    for round in 0..120 {
        let k = match round % 4 {
            0 => 2,
            1 => rng.random_range(2..10),
            2 => rng.random_range(10..=100),
            _ => 100,
        };
        let mut picked_keys = Vec::with_capacity(k);
        let mut picked = Vec::with_capacity(k);
        for _ in 0..k {
            // With replacement: duplicates are allowed in PFCOUNT too.
            let j = rng.random_range(0..keys.len());
            picked_keys.push(keys[j].clone());
            picked.push(&sketches[j]);
        }
        let ours = Hll::union_count(&picked);
        let theirs = pfcount(&mut con, &picked_keys);
        assert_eq!(
            ours as i64, theirs,
            "round {round}: union of {k} keys {picked_keys:?}"
        );
    }
    // Multi-key PFCOUNT does not modify the keys.
    for (k, s) in keys.iter().zip(&sketches).take(130) {
        assert_same_bytes(s, &get(&mut con, k), k);
    }
    // A single sketch: PFCOUNT key semantics.
    assert_eq!(Hll::union_count(&[&sketches[0]]), sketches[0].estimate());
    assert_eq!(Hll::union_count(&[]), 0);
}

#[test]
fn merge_matches_pfmerge() {
    let server = RedisServer::start();
    let mut con = server.connection();
    let mut rng = StdRng::seed_from_u64(seed_for("merge_matches_pfmerge"));

    // A pool with small sparse, near-limit sparse, and dense sketches.
    let mut pool: Vec<(String, Hll)> = Vec::new();
    for i in 0..48 {
        let n = match i % 6 {
            0 => 0,
            1 | 2 => rng.random_range(1..200),
            3 => rng.random_range(600..1400),
            4 => rng.random_range(2000..5000),
            _ => rng.random_range(5000..40_000),
        };
        let key = format!("m:{i}");
        let elems = elements(&mut rng, n);
        let mut h = build(&mut con, &key, &elems, false, 3000);
        if i % 4 == 0 {
            // Some inputs carry a valid cached cardinality.
            count_both(&mut con, &key, &mut h);
        }
        pool.push((key, h));
    }
    let kinds = |h: &Hll| if h.is_sparse() { "sparse" } else { "dense" };
    let mut seen = std::collections::BTreeSet::new();

    for round in 0..160 {
        let a = rng.random_range(0..pool.len());
        let b = rng.random_range(0..pool.len());
        let (ka, ha) = &pool[a];
        let (kb, hb) = &pool[b];
        seen.insert((kinds(ha), kinds(hb)));

        // PFMERGE into an existing key (a copy of `a`), which is also a source.
        let dest = format!("dest:{round}");
        set(&mut con, &dest, ha.as_bytes());
        redis::cmd("PFMERGE")
            .arg(&dest)
            .arg(kb)
            .query::<()>(&mut con)
            .expect("PFMERGE");
        let mut ours = ha.clone();
        ours.merge(hb);
        assert_same_bytes(
            &ours,
            &get(&mut con, &dest),
            &format!(
                "round {round}: PFMERGE {ka}({}) <- {kb}({})",
                kinds(ha),
                kinds(hb)
            ),
        );
        count_both(&mut con, &dest, &mut ours);

        // PFMERGE into a new key from several sources.
        let n = rng.random_range(1..6);
        let srcs: Vec<usize> = (0..n).map(|_| rng.random_range(0..pool.len())).collect();
        let fresh = format!("fresh:{round}");
        let mut c = redis::cmd("PFMERGE");
        c.arg(&fresh);
        for &s in &srcs {
            c.arg(&pool[s].0);
        }
        c.query::<()>(&mut con).expect("PFMERGE");
        let mut ours = Hll::new();
        let refs: Vec<&Hll> = srcs.iter().map(|&s| &pool[s].1).collect();
        ours.merge_many(&refs);
        assert_same_bytes(
            &ours,
            &get(&mut con, &fresh),
            &format!("round {round}: fresh merge"),
        );
        count_both(&mut con, &fresh, &mut ours);
    }
    for want in [
        ("sparse", "sparse"),
        ("sparse", "dense"),
        ("dense", "sparse"),
        ("dense", "dense"),
    ] {
        assert!(seen.contains(&want), "combination {want:?} not exercised");
    }

    // Two sparse sketches whose union no longer fits the sparse limit.
    let mut big_sparse: Vec<&(String, Hll)> = pool
        .iter()
        .filter(|(_, h)| h.is_sparse() && h.byte_len() > 1500)
        .collect();
    big_sparse.truncate(6);
    assert!(big_sparse.len() >= 2);
    let mut promoted = false;
    for w in big_sparse.windows(2) {
        let (ka, ha) = w[0];
        let (kb, hb) = w[1];
        set(&mut con, "dest:big", ha.as_bytes());
        redis::cmd("PFMERGE")
            .arg("dest:big")
            .arg(kb)
            .query::<()>(&mut con)
            .expect("PFMERGE");
        let mut ours = ha.clone();
        ours.merge(hb);
        promoted |= !ours.is_sparse();
        assert_same_bytes(&ours, &get(&mut con, "dest:big"), &format!("{ka} <- {kb}"));
    }
    assert!(promoted, "no sparse+sparse merge crossed the size limit");

    // Merging into itself only marks the cache stale.
    let (k, h) = &pool[3];
    let mut ours = h.clone();
    ours.count();
    set(&mut con, "self", ours.as_bytes());
    redis::cmd("PFMERGE")
        .arg("self")
        .arg("self")
        .query::<()>(&mut con)
        .unwrap();
    let copy = ours.clone();
    ours.merge(&copy);
    assert_same_bytes(&ours, &get(&mut con, "self"), &format!("self-merge of {k}"));
}

#[test]
fn images_transfer_both_ways() {
    let server = RedisServer::start();
    let mut con = server.connection();
    let mut rng = StdRng::seed_from_u64(seed_for("images_transfer_both_ways"));

    for i in 0..40 {
        let n = skewed_size(&mut rng);
        let elems = elements(&mut rng, n);

        // Ours -> Redis: build locally only, SET the bytes, then use them.
        let mut ours = Hll::new();
        for e in &elems {
            ours.add(e);
        }
        let key = format!("ours:{i}");
        set(&mut con, &key, ours.as_bytes());
        count_both(&mut con, &key, &mut ours);
        let more = elements(&mut rng, 300);
        add_batched(&mut con, &key, &mut ours, &more);
        count_both(&mut con, &key, &mut ours);

        // Redis -> ours: build in Redis only, load with from_bytes.
        let key = format!("theirs:{i}");
        let mut p = redis::pipe();
        p.cmd("PFADD").arg(&key);
        for chunk in elems.chunks(1000) {
            let c = p.cmd("PFADD").arg(&key);
            for e in chunk {
                c.arg(e.as_slice());
            }
        }
        let _: Vec<i64> = p.query(&mut con).expect("PFADD");
        if i % 2 == 0 {
            pfcount(&mut con, std::slice::from_ref(&key));
        }
        let img = get(&mut con, &key);
        let mut loaded = Hll::from_bytes(&img).expect("Redis image must load");
        assert_eq!(loaded.as_bytes(), &img[..]);
        assert_eq!(loaded.is_sparse(), img[4] == 1);
        count_both(&mut con, &key, &mut loaded);
        let more = elements(&mut rng, 300);
        add_batched(&mut con, &key, &mut loaded, &more);
    }
}

#[test]
fn non_default_sparse_max_bytes() {
    let mut rng = StdRng::seed_from_u64(seed_for("non_default_sparse_max_bytes"));

    // Set at start-up.
    {
        let server = RedisServer::start_with(&["--hll-sparse-max-bytes", "500"]);
        let mut con = server.connection();
        for i in 0..15 {
            let n = rng.random_range(0..1500);
            let elems = elements(&mut rng, n);
            let key = format!("s500:{i}");
            let mut h = build(&mut con, &key, &elems, i % 2 == 0, 500);
            count_both(&mut con, &key, &mut h);
        }
    }

    // Changed at run time, including while keys exist.
    let server = RedisServer::start();
    let mut con = server.connection();
    for max in [0usize, 1, 18, 21, 100, 500, 2000, 3000, 6000, 20_000] {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("hll-sparse-max-bytes")
            .arg(max)
            .query::<()>(&mut con)
            .expect("CONFIG SET");
        let mut pool = Vec::new();
        for i in 0..8 {
            let n = match i {
                0 => rng.random_range(0..40),
                1..=4 => rng.random_range(40..2500),
                _ => rng.random_range(2500..12_000),
            };
            let elems = elements(&mut rng, n);
            let key = format!("max{max}:{i}");
            let mut h = build(&mut con, &key, &elems, n <= 2500 && i % 2 == 1, max);
            count_both(&mut con, &key, &mut h);
            pool.push((key, h));
        }
        for j in 0..6 {
            let (ka, ha) = &pool[j];
            let (kb, hb) = &pool[(j * 3 + 1) % pool.len()];
            let dest = format!("max{max}:dest{j}");
            set(&mut con, &dest, ha.as_bytes());
            redis::cmd("PFMERGE")
                .arg(&dest)
                .arg(kb)
                .query::<()>(&mut con)
                .unwrap();
            // A sketch loaded with the same limit merges the same way.
            let mut ours = Hll::from_bytes_with_sparse_max(ha.as_bytes(), max).unwrap();
            ours.merge(hb);
            assert_same_bytes(
                &ours,
                &get(&mut con, &dest),
                &format!("max {max}: {ka} <- {kb}"),
            );
        }
    }

    // Lowering the limit below an existing sparse key's size.
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("hll-sparse-max-bytes")
        .arg(3000)
        .query::<()>(&mut con)
        .unwrap();
    let elems = elements(&mut rng, 600);
    let mut h = build(&mut con, "lowered", &elems, false, 3000);
    assert!(h.is_sparse() && h.byte_len() > 200);
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("hll-sparse-max-bytes")
        .arg(200)
        .query::<()>(&mut con)
        .unwrap();
    h.set_sparse_max_bytes(200);
    let more = elements(&mut rng, 50);
    add_fine(&mut con, "lowered", &mut h, &more);
    assert!(!h.is_sparse());
}

/// Hand-made images: non-canonical sparse streams, odd header bytes, and dense
/// registers that only crafted input can hold (values 52..63, saturation).
#[test]
fn crafted_images_behave_like_redis() {
    let server = RedisServer::start();
    let mut con = server.connection();

    let header = |enc: u8, unused: [u8; 3], card: [u8; 8]| {
        let mut h = b"HYLL".to_vec();
        h.push(enc);
        h.extend_from_slice(&unused);
        h.extend_from_slice(&card);
        h
    };
    let stale = [0, 0, 0, 0, 0, 0, 0, 0x80];
    let mut images: Vec<Vec<u8>> = Vec::new();

    // Sparse: XZERO of length 1 and 2, ZERO runs, VAL runs, unused bytes set.
    let mut s = header(1, [5, 6, 7], stale);
    s.extend_from_slice(&[0x40, 0x00, 0x40, 0x01, 0x00, 0x3f, 0x85, 0x8b]);
    // covered so far: 1 + 2 + 1 + 64 + 2 + 4 = 74
    let rest = 16384 - 74 - 1;
    s.extend_from_slice(&[0x40 | (rest >> 8) as u8, rest as u8]);
    images.push(s);
    // Sparse: all ZERO opcodes (256 * 64).
    let mut s = header(1, [0; 3], [9, 0, 0, 0, 0, 0, 0, 0]);
    s.extend(std::iter::repeat_n(0x3f, 256));
    images.push(s);
    // Sparse: 16384 registers of value 32 as VAL opcodes (16400 bytes).
    let mut s = header(1, [0; 3], stale);
    s.extend(std::iter::repeat_n(0x80 | (31 << 2) | 3, 4096));
    images.push(s);

    // Dense with uniform registers, including values Redis never writes.
    let packed = |f: &dyn Fn(usize) -> u8| {
        let mut regs = vec![0u8; 12288];
        for i in 0..16384 {
            let v = u32::from(f(i) & 63);
            let bit = i * 6;
            let w = v << (bit % 8);
            regs[bit / 8] |= w as u8;
            if bit / 8 + 1 < regs.len() {
                regs[bit / 8 + 1] |= (w >> 8) as u8;
            }
        }
        regs
    };
    for v in [0u8, 1, 20, 32, 40, 50, 51, 52, 63] {
        let mut d = header(0, [0; 3], stale);
        d.extend(packed(&|_| v));
        images.push(d);
    }
    let mut d = header(0, [1, 2, 3], stale);
    d.extend(packed(&|i| (i * 7 % 64) as u8));
    images.push(d);
    let mut d = header(0, [0; 3], stale);
    d.extend(packed(&|i| if i % 3 == 0 { 0 } else { (i % 13) as u8 }));
    images.push(d);
    // Dense with a valid (and wrong) cached value: both return it verbatim.
    let mut d = header(0, [0; 3], [0x39, 0x30, 0, 0, 0, 0, 0, 0x7f]);
    d.extend(packed(&|i| (i % 3) as u8));
    images.push(d);

    let probe: Vec<Vec<u8>> = (0..3000)
        .map(|i| format!("probe:{i}").into_bytes())
        .collect();
    for (i, img) in images.iter().enumerate() {
        let key = format!("crafted:{i}");
        set(&mut con, &key, img);
        let mut h = Hll::from_bytes(img).unwrap_or_else(|e| panic!("image {i}: {e}"));
        assert_eq!(h.as_bytes(), &img[..]);
        // Counting (possibly the overflow case, which PFCOUNT reports as
        // i64::MIN and leaves the cache stale).
        count_both(&mut con, &key, &mut h);
        // Merging with a Redis-made sketch.
        let other_key = format!("crafted:{i}:other");
        let mut other = build(&mut con, &other_key, &probe[..(i * 97) % 700], false, 3000);
        other.count();
        pfcount(&mut con, std::slice::from_ref(&other_key));
        let dest = format!("crafted:{i}:merged");
        set(&mut con, &dest, img);
        redis::cmd("PFMERGE")
            .arg(&dest)
            .arg(&other_key)
            .query::<()>(&mut con)
            .unwrap();
        let mut merged = Hll::from_bytes(img).unwrap();
        merged.merge(&other);
        assert_same_bytes(&merged, &get(&mut con, &dest), &format!("image {i} merged"));
        count_both(&mut con, &dest, &mut merged);
        assert_eq!(
            Hll::union_count(&[&h, &other]) as i64,
            pfcount(&mut con, &[key.clone(), other_key.clone()]),
            "image {i} union"
        );
        // Adding elements.
        add_fine(&mut con, &key, &mut h, &probe[..200]);
        add_batched(&mut con, &key, &mut h, &probe[200..]);
        count_both(&mut con, &key, &mut h);
    }

    // Images Redis would reject are rejected too.
    for bad in [
        b"HYLL".to_vec(),
        header(2, [0; 3], stale),
        {
            let mut d = header(0, [0; 3], stale);
            d.extend(vec![0u8; 12287]);
            d
        },
        {
            let mut d = b"HYLX".to_vec();
            d.extend_from_slice(&images[0][4..]);
            d
        },
    ] {
        assert!(Hll::from_bytes(&bad).is_err());
        set(&mut con, "bad", &bad);
        let r = redis::cmd("PFCOUNT").arg("bad").query::<i64>(&mut con);
        assert!(r.is_err(), "Redis accepted an image we reject: {bad:02x?}");
    }
}

#[test]
fn murmur_agrees_with_redis_register_choice() {
    // The register index and value Redis picks for an element are visible in
    // the sparse image after adding it to an empty key.
    let server = RedisServer::start();
    let mut con = server.connection();
    let mut rng = StdRng::seed_from_u64(seed_for("murmur_agrees_with_redis_register_choice"));
    for i in 0..300 {
        let e = element(&mut rng, 1 << 40);
        let key = format!("one:{i}");
        let _: i64 = redis::cmd("PFADD")
            .arg(&key)
            .arg(e.as_slice())
            .query(&mut con)
            .unwrap();
        let img = get(&mut con, &key);
        let h = murmur64a(&e, HLL_SEED);
        let index = (h & 0x3fff) as usize;
        let value = ((h >> 14) | (1 << 50)).trailing_zeros() as u8 + 1;
        let theirs = Hll::from_bytes(&img).unwrap();
        for (j, want) in [(index, value), ((index + 1) % 16384, 0)] {
            assert_eq!(theirs.register(j), want, "element {e:02x?}");
        }
    }
}

/// Crowded sparse images (long chains of VAL opcodes, equal neighbours that
/// could not be merged) under a large sparse limit: every update then splits
/// VAL runs and exercises the neighbour-merging window of the sparse update.
#[test]
fn crowded_sparse_images_update_like_redis() {
    let server = RedisServer::start_with(&["--hll-sparse-max-bytes", "40000"]);
    let mut con = server.connection();
    let mut rng = StdRng::seed_from_u64(seed_for("crowded_sparse_images_update_like_redis"));

    for round in 0..6 {
        // Random VAL/ZERO soup covering exactly 16384 registers.
        let mut img = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
        let mut covered = 0;
        while covered < 16384 {
            let left = 16384 - covered;
            if rng.random_range(0..8) == 0 {
                let len = rng.random_range(1..=left.min(64));
                img.push((len - 1) as u8);
                covered += len;
            } else {
                let len = rng.random_range(1..=left.min(4));
                let value = rng.random_range(1..=(1 + round % 3) as u8);
                img.push(0x80 | ((value - 1) << 2) | (len - 1) as u8);
                covered += len;
            }
        }
        let key = format!("crowded:{round}");
        set(&mut con, &key, &img);
        let mut h = Hll::from_bytes_with_sparse_max(&img, 40_000).unwrap();
        let elems = elements(&mut rng, 1500);
        add_fine(&mut con, &key, &mut h, &elems);
        assert!(h.is_sparse());
        count_both(&mut con, &key, &mut h);

        // Merging two crowded images register by register.
        let other_key = format!("crowded:{round}:other");
        let mut other = Hll::from_bytes_with_sparse_max(&img, 40_000).unwrap();
        let elems = elements(&mut rng, 1500);
        set(&mut con, &other_key, &img);
        add_batched(&mut con, &other_key, &mut other, &elems);
        set(&mut con, "crowded:dest", h.as_bytes());
        redis::cmd("PFMERGE")
            .arg("crowded:dest")
            .arg(&other_key)
            .query::<()>(&mut con)
            .unwrap();
        let mut merged = h.clone();
        merged.merge(&other);
        assert_same_bytes(
            &merged,
            &get(&mut con, "crowded:dest"),
            &format!("round {round} merge"),
        );
    }

    // Sketches grown to a high register occupancy while still sparse.
    for i in 0..3 {
        let n = rng.random_range(7000..12_000);
        let elems = elements(&mut rng, n);
        let key = format!("grown:{i}");
        let mut h = build(&mut con, &key, &elems, false, 40_000);
        assert!(h.is_sparse());
        count_both(&mut con, &key, &mut h);
    }
}
