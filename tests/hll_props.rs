//! Property tests for `sketch::Hll` that need no Redis: parsing untrusted
//! bytes never panics, accepted images keep working, and round trips are
//! exact. Runs with a fixed proptest seed (override with PROPTEST_RNG_SEED).

use hotrank::sketch::{HLL_REGISTERS, Hll, HllError, murmur64a};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

fn config(cases: u32) -> ProptestConfig {
    let mut c = ProptestConfig::with_cases(cases);
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = RngSeed::Fixed(0x4c4c_5948_2024);
    }
    c.failure_persistence = None;
    c
}

/// A sketch of `n` distinct elements derived from `seed`.
fn sketch(seed: u64, n: usize, sparse_max: usize) -> Hll {
    let mut h = Hll::with_sparse_max_bytes(sparse_max);
    for i in 0..n as u64 {
        h.add_hash(murmur64a(&i.to_le_bytes(), seed));
    }
    h
}

/// Whatever `from_bytes` accepts must be fully usable.
fn exercise(bytes: &[u8]) {
    let parsed = Hll::from_bytes(bytes);
    let Ok(mut h) = parsed else { return };
    assert_eq!(h.as_bytes(), bytes, "accepted images are kept verbatim");
    assert_eq!(h.to_bytes(), bytes);
    assert_eq!(h.byte_len(), bytes.len());
    assert_eq!(Hll::from_bytes(&h.to_bytes()).as_ref(), Ok(&h));

    let est = h.estimate();
    assert_eq!(h.count(), est);
    for i in [0, 7, HLL_REGISTERS - 1] {
        let _ = h.register(i);
    }
    let other = sketch(1, 300, 3000);
    let _ = Hll::union_count(&[&h, &other, &h]);
    let mut m = h.clone();
    m.merge(&other);
    let mut m2 = other.clone();
    m2.merge(&h);
    // Merging is a register-wise maximum, whichever side is the target.
    assert_eq!(m.registers(), m2.registers());
    assert_eq!(
        Hll::union_count(&[&h, &other]),
        Hll::union_count(&[&m, &Hll::new()])
    );
    for e in [&b"a"[..], b"", b"some element"] {
        h.add(e);
    }
    let _ = h.count();
    let back = Hll::from_bytes(h.as_bytes()).expect("our own output always parses");
    assert_eq!(back.as_bytes(), h.as_bytes());
    let enc = postcard::to_allocvec(&h).expect("serialise");
    let dec: Hll = postcard::from_bytes(&enc).expect("deserialise");
    assert_eq!(dec, h);
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip { pos: usize, mask: u8 },
    Set { pos: usize, byte: u8 },
    Insert { pos: usize, byte: u8 },
    Remove { pos: usize },
    Truncate { len: usize },
    Extend { bytes: Vec<u8> },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(pos, mask)| Mutation::Flip { pos, mask }),
        (any::<usize>(), any::<u8>()).prop_map(|(pos, byte)| Mutation::Set { pos, byte }),
        (any::<usize>(), any::<u8>()).prop_map(|(pos, byte)| Mutation::Insert { pos, byte }),
        any::<usize>().prop_map(|pos| Mutation::Remove { pos }),
        any::<usize>().prop_map(|len| Mutation::Truncate { len }),
        vec(any::<u8>(), 1..4).prop_map(|bytes| Mutation::Extend { bytes }),
    ]
}

fn apply(img: &mut Vec<u8>, m: &Mutation) {
    let n = img.len();
    match *m {
        Mutation::Flip { pos, mask } if n > 0 => img[pos % n] ^= mask,
        Mutation::Set { pos, byte } if n > 0 => img[pos % n] = byte,
        Mutation::Insert { pos, byte } => img.insert(pos % (n + 1), byte),
        Mutation::Remove { pos } if n > 0 => {
            img.remove(pos % n);
        }
        Mutation::Truncate { len } => img.truncate(len % (n + 1)),
        Mutation::Extend { ref bytes } => img.extend_from_slice(bytes),
        _ => {}
    }
}

/// Mutations aimed at the interesting part of an image: the header, the
/// first opcodes and (for sparse images) the tail.
fn targeted(img: &mut Vec<u8>, m: &Mutation) {
    let n = img.len();
    let near = |pos: usize| match pos % 3 {
        0 => pos % 24,
        1 => n.saturating_sub(1 + pos % 8),
        _ => pos,
    };
    let m = match *m {
        Mutation::Flip { pos, mask } => Mutation::Flip {
            pos: near(pos),
            mask,
        },
        Mutation::Set { pos, byte } => Mutation::Set {
            pos: near(pos),
            byte,
        },
        Mutation::Remove { pos } => Mutation::Remove { pos: near(pos) },
        ref other => other.clone(),
    };
    apply(img, &m);
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..64)) {
        exercise(&bytes);
    }

    #[test]
    fn arbitrary_bodies_behind_a_valid_magic(enc in 0u8..=2, body in vec(any::<u8>(), 0..3000)) {
        let mut img = b"HYLL".to_vec();
        img.push(enc);
        img.extend_from_slice(&[0; 11]);
        img.extend_from_slice(&body);
        exercise(&img);
    }

    #[test]
    fn sparse_like_opcode_soup(ops in vec(prop_oneof![
        (0u8..64).prop_map(|b| vec![b]),
        (0u8..64, any::<u8>()).prop_map(|(a, b)| vec![0x40 | a, b]),
        (0x80u8..=0xff).prop_map(|b| vec![b]),
    ], 0..400), tail in prop::option::of(0x40u8..0x80)) {
        // Opcode streams of valid shape but arbitrary coverage, plus an
        // optional dangling XZERO first byte.
        let mut img = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
        for op in &ops {
            img.extend_from_slice(op);
        }
        img.extend(tail);
        exercise(&img);
    }
}

/// Random but complete sparse opcode streams (exactly 16384 registers), in
/// forms Redis itself would not produce: short XZEROs, ZERO next to ZERO,
/// unmerged equal VALs.
fn valid_sparse_image() -> impl Strategy<Value = Vec<u8>> {
    let op = prop_oneof![
        (0u8..64).prop_map(|b| vec![b]),
        (0u16..300).prop_map(|l| vec![0x40 | (l >> 8) as u8, l as u8]),
        (0x80u8..=0xff).prop_map(|b| vec![b]),
    ];
    vec(op, 0..700).prop_map(|ops| {
        let mut img = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
        let mut covered = 0usize;
        for op in ops {
            let span = match op[0] {
                b if b & 0x80 != 0 => usize::from(b & 3) + 1,
                b if b & 0x40 == 0 => usize::from(b & 0x3f) + 1,
                b => ((usize::from(b & 0x3f) << 8) | usize::from(op[1])) + 1,
            };
            if covered + span > HLL_REGISTERS {
                break;
            }
            covered += span;
            img.extend_from_slice(&op);
        }
        let rest = HLL_REGISTERS - covered;
        if rest > 0 {
            let l = rest - 1;
            img.extend_from_slice(&[0x40 | (l >> 8) as u8, l as u8]);
        }
        img
    })
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn unusual_but_valid_sparse_images(img in valid_sparse_image(), seed in any::<u64>(),
                                      n in 0usize..800, max in 0usize..4000) {
        let h = Hll::from_bytes_with_sparse_max(&img, max).expect("complete stream");
        exercise(&img);
        let mut model = h.registers();
        let mut h = h;
        for i in 0..n as u64 {
            let hash = murmur64a(&i.to_le_bytes(), seed);
            let idx = (hash & 0x3fff) as usize;
            let val = ((hash >> 14) | (1 << 50)).trailing_zeros() as u8 + 1;
            prop_assert_eq!(h.add_hash(hash), val > model[idx]);
            model[idx] = model[idx].max(val);
        }
        prop_assert_eq!(h.registers(), model);
        prop_assert!(Hll::from_bytes(h.as_bytes()).is_ok());
    }

    #[test]
    fn mutated_sparse_images(seed in any::<u64>(), n in 0usize..1200,
                             muts in vec(mutation(), 1..4), aimed in any::<bool>()) {
        let h = sketch(seed, n, 3000);
        prop_assume!(h.is_sparse());
        let mut img = h.to_bytes();
        for m in &muts {
            if aimed { targeted(&mut img, m) } else { apply(&mut img, m) }
        }
        exercise(&img);
    }

    #[test]
    fn mutated_dense_images(seed in any::<u64>(), n in 0usize..3000,
                            muts in vec(mutation(), 1..4), aimed in any::<bool>()) {
        let h = sketch(seed, n, 0);
        prop_assert!(!h.is_sparse() || n == 0);
        let mut img = h.to_bytes();
        for m in &muts {
            if aimed { targeted(&mut img, m) } else { apply(&mut img, m) }
        }
        exercise(&img);
    }

    #[test]
    fn round_trips_are_identity(seed in any::<u64>(), n in 0usize..6000, max in prop_oneof![
        Just(3000usize), Just(0usize), 0usize..20_000
    ], counted in any::<bool>()) {
        let mut h = sketch(seed, n, max);
        if counted {
            h.count();
        }
        let bytes = h.to_bytes();
        let back = Hll::from_bytes_with_sparse_max(&bytes, max).unwrap();
        prop_assert_eq!(&back, &h);
        prop_assert_eq!(back.as_bytes(), &bytes[..]);
        let enc = postcard::to_allocvec(&h).unwrap();
        let dec: Hll = postcard::from_bytes(&enc).unwrap();
        prop_assert_eq!(dec.as_bytes(), h.as_bytes());
    }

    #[test]
    fn registers_follow_the_model(seed in any::<u64>(), n in 0usize..5000, max in 0usize..5000) {
        // Whatever the encoding history, register i is the maximum value
        // any element hashed to it, and add() reports exactly the raises.
        let mut h = Hll::with_sparse_max_bytes(max);
        let mut model = vec![0u8; HLL_REGISTERS];
        for i in 0..n as u64 {
            let hash = murmur64a(&i.to_le_bytes(), seed);
            let idx = (hash & 0x3fff) as usize;
            let val = ((hash >> 14) | (1 << 50)).trailing_zeros() as u8 + 1;
            let raised = val > model[idx];
            model[idx] = model[idx].max(val);
            prop_assert_eq!(h.add_hash(hash), raised);
        }
        prop_assert_eq!(&h.registers()[..], &model[..]);
        if h.is_sparse() {
            prop_assert!(h.byte_len() <= max.max(18));
        }
        // Sparse and dense encodings of the same registers count the same.
        let mut dense = Hll::with_sparse_max_bytes(0);
        dense.merge(&h);
        prop_assert_eq!(dense.registers(), h.registers());
        prop_assert_eq!(dense.estimate(), h.estimate());
        prop_assert_eq!(Hll::union_count(&[&h, &h]), h.estimate());
    }

    #[test]
    fn merge_is_register_max(a in any::<u64>(), na in 0usize..3000,
                             b in any::<u64>(), nb in 0usize..3000) {
        let x = sketch(a, na, 3000);
        let y = sketch(b, nb, 3000);
        let mut m = x.clone();
        m.merge(&y);
        let (rx, ry, rm) = (x.registers(), y.registers(), m.registers());
        for i in 0..HLL_REGISTERS {
            prop_assert_eq!(rm[i], rx[i].max(ry[i]));
        }
        prop_assert_eq!(m.is_sparse(), x.is_sparse() && y.is_sparse() && m.byte_len() <= 3000);
        prop_assert_eq!(Hll::union_count(&[&x, &y]), m.estimate());
    }
}

#[test]
fn rejects_malformed_images_with_specific_errors() {
    assert_eq!(Hll::from_bytes(b""), Err(HllError::TooShort { len: 0 }));
    assert_eq!(Hll::from_bytes(b"HYLL"), Err(HllError::TooShort { len: 4 }));
    let mut img = Hll::new().to_bytes();
    img[0] = b'h';
    assert_eq!(Hll::from_bytes(&img), Err(HllError::BadMagic));
    let mut img = Hll::new().to_bytes();
    img[4] = 2;
    assert_eq!(Hll::from_bytes(&img), Err(HllError::BadEncoding(2)));
    let mut img = Hll::new().to_bytes();
    img[4] = 0;
    assert_eq!(
        Hll::from_bytes(&img),
        Err(HllError::WrongLength {
            expected: 12304,
            actual: 18
        })
    );
    let mut img = Hll::new().to_bytes();
    img.pop();
    assert_eq!(
        Hll::from_bytes(&img),
        Err(HllError::TruncatedSparse { offset: 16 })
    );
    let mut img = Hll::new().to_bytes();
    img[17] = 0xfe;
    assert_eq!(
        Hll::from_bytes(&img),
        Err(HllError::CorruptSparse { covered: 16383 })
    );
    img.push(0x00);
    assert!(Hll::from_bytes(&img).is_ok());
    img.push(0x00);
    assert_eq!(
        Hll::from_bytes(&img),
        Err(HllError::CorruptSparse { covered: 16385 })
    );
    let img = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0".to_vec();
    assert_eq!(
        Hll::from_bytes(&img),
        Err(HllError::CorruptSparse { covered: 0 })
    );
}

#[test]
fn new_sketch_is_the_redis_empty_key() {
    let h = Hll::new();
    assert_eq!(
        h.as_bytes(),
        b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff".as_slice()
    );
    assert!(h.is_sparse());
    assert_eq!(h.estimate(), 0);
    assert_eq!(Hll::default(), h);
    let mut h = h;
    assert_eq!(h.count(), 0);
    assert_eq!(h.as_bytes()[15], 0);
}

#[test]
fn serde_rejects_invalid_images() {
    let enc = postcard::to_allocvec(&serde_bytes_like(b"HYLL\x01nope")).unwrap();
    assert!(postcard::from_bytes::<Hll>(&enc).is_err());
}

/// Serialises a byte slice the way `Hll` does (as serde bytes).
fn serde_bytes_like(b: &[u8]) -> impl serde::Serialize + '_ {
    struct B<'a>(&'a [u8]);
    impl serde::Serialize for B<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }
    B(b)
}

#[test]
fn union_with_equals_merge() {
    // Sizes straddle the sparse→dense conversion on both sides.
    for (i, (a, b)) in [
        (0, 0),
        (5, 300),
        (300, 5),
        (1200, 1500),
        (3000, 40),
        (40, 20_000),
        (20_000, 20_000),
    ]
    .into_iter()
    .enumerate()
    {
        let x = sketch(2 * i as u64, a, 3000);
        let y = sketch(2 * i as u64 + 1, b, 3000);
        let mut merged = x.clone();
        merged.merge(&y);
        let mut unioned = x.clone();
        unioned.union_with(&y);
        assert_eq!(unioned.registers(), merged.registers(), "{a} + {b}");
        assert_eq!(unioned.is_sparse(), merged.is_sparse(), "{a} + {b}");
        assert_eq!(unioned.estimate(), Hll::union_count(&[&x, &y]), "{a} + {b}");
    }
}

#[test]
fn union_all_equals_union_with_one_by_one() {
    // Many small sparse sources (an article's hourly buckets), some sparse
    // sources that together pass the sparse limit, and a dense one among them.
    for sizes in [
        vec![],
        vec![0, 0],
        vec![3; 48],
        vec![1, 40, 7, 0, 300, 2, 90],
        vec![400; 12],
        vec![5, 20_000, 5],
    ] {
        let sources: Vec<Hll> = (sizes.iter().enumerate())
            .map(|(i, &n)| sketch(1000 + i as u64, n, 3000))
            .collect();
        let refs: Vec<&Hll> = sources.iter().collect();
        for start in [0, 200] {
            let base = sketch(7, start, 3000);
            let mut one_by_one = base.clone();
            for s in &refs {
                one_by_one.union_with(s);
            }
            let mut all = base.clone();
            all.union_all(&refs);
            assert_eq!(
                all.registers(),
                one_by_one.registers(),
                "{sizes:?} onto {start}"
            );
            assert_eq!(
                all.is_sparse(),
                one_by_one.is_sparse(),
                "{sizes:?} onto {start}"
            );
            assert_eq!(
                all.estimate(),
                one_by_one.estimate(),
                "{sizes:?} onto {start}"
            );
        }
    }
}
