//! The gate's dedupe table: last counted event time per (article, visitor,
//! event type), the largest part of the embedded store's state, in a
//! [`ShardedMap`] whose hash seed is kept in snapshots.

use super::article::Idx;
use super::sharded::ShardedMap;
use crate::model::Timestamp;

/// A dedupe entry's key: (article, visitor, event type). The visitor is
/// held as two `u64` halves: a `u128` field would align the key to 16
/// bytes, so key and time took 48 bytes a slot; this way they take 32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DedupeKey {
    visitor_hi: u64,
    visitor_lo: u64,
    idx: Idx,
    kind: u8,
}

impl DedupeKey {
    pub fn new(idx: Idx, visitor: u128, kind: u8) -> Self {
        DedupeKey {
            visitor_hi: (visitor >> 64) as u64,
            visitor_lo: visitor as u64,
            idx,
            kind,
        }
    }

    /// (article, visitor, event type).
    pub fn parts(self) -> (Idx, u128, u8) {
        let visitor = u128::from(self.visitor_hi) << 64 | u128::from(self.visitor_lo);
        (self.idx, visitor, self.kind)
    }
}

/// The gate's dedupe entries: a [`ShardedMap`] whose seed is kept with the
/// entries.
///
/// Snapshots store the seed, so a table rebuilt from a snapshot with the
/// same seed puts every entry where the snapshot's order (the old table's
/// order: shard by shard, each front to back) says: the inserts of a
/// restart walk each new sub-table front to back instead of missing the
/// cache once per entry. The hash of a key is the one a `HashMap` with
/// `FixedState::with_seed(seed)` gives, so a snapshot written by the
/// single-table build (sorted by the low bits of the same hash) loads too,
/// as one front-to-back walk per shard, interleaved. The keys' visitors are
/// secret-keyed hashes already, so a known seed gives no one a way to pick
/// colliding keys.
///
/// Iteration ([`Dedupe::iter`]) is shard by shard, each in its table's
/// order: deterministic for a given history of inserts and removals.
#[derive(Clone, Debug)]
pub struct Dedupe {
    seed: u64,
    map: ShardedMap<DedupeKey, Timestamp>,
}

impl Default for Dedupe {
    fn default() -> Self {
        Self::new()
    }
}

impl Dedupe {
    /// An empty table with a fresh random seed.
    pub fn new() -> Self {
        Self::with_seed(rand::random(), 0)
    }

    /// An empty table for about `n` entries hashed with `seed`.
    pub fn with_seed(seed: u64, n: usize) -> Self {
        Dedupe {
            seed,
            map: ShardedMap::with_seed(seed, n),
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The last time recorded for `key`.
    pub fn get(&self, key: &DedupeKey) -> Option<Timestamp> {
        self.map.get(key).copied()
    }

    pub fn contains_key(&self, key: &DedupeKey) -> bool {
        self.map.contains_key(key)
    }

    /// Sets `key`'s time to `ts`; returns the time it had.
    pub fn insert(&mut self, key: DedupeKey, ts: Timestamp) -> Option<Timestamp> {
        self.map.insert(key, ts)
    }

    /// Records `ts` for `key`, keeping the later of it and the time it had.
    pub fn raise(&mut self, key: DedupeKey, ts: Timestamp) {
        let t = self.map.get_or_insert_with(key, || ts);
        *t = (*t).max(ts);
    }

    /// Removes `key`; returns its time.
    pub fn remove(&mut self, key: &DedupeKey) -> Option<Timestamp> {
        self.map.remove(key)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every entry, shard by shard.
    pub fn iter(&self) -> impl Iterator<Item = (&DedupeKey, Timestamp)> {
        self.map.iter().map(|(k, t)| (k, *t))
    }

    /// Keeps only the entries for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(&DedupeKey, Timestamp) -> bool) {
        self.map.retain(|k, t| keep(k, *t));
    }

    /// [`Self::retain`] over shard `i` of the [`ShardedMap`] alone.
    pub fn retain_shard(&mut self, i: usize, mut keep: impl FnMut(&DedupeKey, Timestamp) -> bool) {
        self.map.retain_shard(i, |k, t| keep(k, *t));
    }

    /// Bytes the table holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.map.heap_bytes()
    }
}

impl Extend<(DedupeKey, Timestamp)> for Dedupe {
    fn extend<I: IntoIterator<Item = (DedupeKey, Timestamp)>>(&mut self, iter: I) {
        for (k, t) in iter {
            self.insert(k, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::embedded::state::sharded::SHARDS;

    /// One slot: 32 bytes (plus hashbrown's control byte).
    type Slot = (DedupeKey, Timestamp);
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn key(n: u64) -> DedupeKey {
        // Few articles and kinds, many visitors: collisions in the low
        // fields, as real keys have.
        DedupeKey::new(
            (n % 7) as Idx,
            u128::from(n.wrapping_mul(0x9e37_79b9)),
            (n % 3) as u8,
        )
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, i64),
        Raise(u64, i64),
        Get(u64),
        Remove(u64),
        /// Keeps entries after this time: whole, or shards `from..from+n`.
        Retain(i64, Option<(usize, usize)>),
    }

    fn op(keys: u64) -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0..keys, 0..1000i64).prop_map(|(k, t)| Op::Insert(k, t)),
            6 => (0..keys, 0..1000i64).prop_map(|(k, t)| Op::Raise(k, t)),
            4 => (0..keys).prop_map(Op::Get),
            2 => (0..keys).prop_map(Op::Remove),
            1 => (0..1000i64, proptest::option::of((0..SHARDS, 1..SHARDS)))
                .prop_map(|(t, r)| Op::Retain(t, r)),
        ]
    }

    /// Runs `ops` on a table and on a `HashMap` oracle; every answer and
    /// the final contents agree. A ranged retain is applied to the oracle
    /// through the table's own shard function.
    fn check(ops: &[Op], seed: u64) {
        let mut d = Dedupe::with_seed(seed, 0);
        let mut o: HashMap<DedupeKey, Timestamp> = HashMap::new();
        for op in ops {
            match *op {
                Op::Insert(k, t) => assert_eq!(d.insert(key(k), t), o.insert(key(k), t)),
                Op::Raise(k, t) => {
                    d.raise(key(k), t);
                    let e = o.entry(key(k)).or_insert(t);
                    *e = (*e).max(t);
                }
                Op::Get(k) => assert_eq!(d.get(&key(k)), o.get(&key(k)).copied()),
                Op::Remove(k) => assert_eq!(d.remove(&key(k)), o.remove(&key(k))),
                Op::Retain(h, None) => {
                    d.retain(|_, t| t > h);
                    o.retain(|_, t| *t > h);
                }
                Op::Retain(h, Some((from, n))) => {
                    let shards: Vec<usize> = (from..from + n).map(|i| i % SHARDS).collect();
                    for &i in &shards {
                        d.retain_shard(i, |_, t| t > h);
                    }
                    o.retain(|k, t| *t > h || !shards.contains(&d.map.shard_index(k)));
                }
            }
            assert_eq!(d.len(), o.len());
        }
        assert_eq!(d.len(), d.map.shard_lens().sum::<usize>());
        let mut got: Vec<Slot> = d.iter().map(|(k, t)| (*k, t)).collect();
        got.sort_unstable();
        let mut want: Vec<Slot> = o.into_iter().collect();
        want.sort_unstable();
        assert_eq!(got, want);
        assert_eq!(d.is_empty(), want.is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Few keys: many hits, overwrites and removals.
        #[test]
        fn answers_as_a_hashmap_with_few_keys(
            ops in proptest::collection::vec(op(64), 0..400),
            seed in any::<u64>(),
        ) {
            check(&ops, seed);
        }

        /// Many keys: shards grow (and some double) between the checks.
        #[test]
        fn answers_as_a_hashmap_across_shard_growth(
            ops in proptest::collection::vec(op(200_000), 0..6000),
            seed in any::<u64>(),
        ) {
            check(&ops, seed);
        }
    }

    /// Past every shard's first doublings, with a retain in the middle.
    #[test]
    fn answers_as_a_hashmap_at_a_hundred_entries_per_shard() {
        let n = (SHARDS * 100) as u64;
        let mut ops: Vec<Op> = (0..n).map(|k| Op::Raise(k, (k % 1000) as i64)).collect();
        ops.push(Op::Retain(500, Some((SHARDS - 10, 20))));
        ops.extend((0..n).step_by(3).map(Op::Get));
        ops.push(Op::Retain(300, None));
        ops.extend((0..n).step_by(5).map(|k| Op::Insert(k, 999)));
        check(&ops, 42);
    }

    /// Keys spread over the shards (no shard holds more than a few times
    /// its share), and the shard bits are not the ones hashbrown uses.
    #[test]
    fn keys_spread_over_the_shards() {
        let mut d = Dedupe::with_seed(7, 0);
        let n = SHARDS * 64;
        for k in 0..n as u64 {
            d.insert(key(k), 1);
        }
        let most = d.map.shard_lens().max().unwrap();
        let least = d.map.shard_lens().min().unwrap();
        assert!(most < 64 * 2 && least > 64 / 4, "{least}..{most}");
        assert!(d.heap_bytes() >= n * 32);
    }

    #[test]
    fn a_slot_is_32_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 32);
        let k = DedupeKey::new(7, u128::MAX - 5, 3);
        assert_eq!(k.parts(), (7, u128::MAX - 5, 3));
    }
}
