//! The gate's dedupe table: last counted event time per (article, visitor,
//! event type), the largest part of the embedded store's state.
//!
//! One hash table of tens of millions of entries doubles in one insert: at
//! 14.7 M and 29.4 M entries that rehash held the state lock for 7.7 s and
//! 13.1 s (BENCHMARKS.md). So the table is [`SHARDS`] tables, an entry's
//! shard picked by bits of its hash: a shard doubles when it alone is full,
//! moving about 1/[`SHARDS`] of the entries (≈ 0.6 ms at 30 M entries on
//! the 2-core bench machine), and retention can sweep a few shards per hold
//! of the state lock ([`Dedupe::retain_shard`]).

use std::hash::BuildHasher;

use foldhash::fast::FixedState;
use hashbrown::HashTable;

use super::state::Idx;
use crate::model::Timestamp;

/// Sub-tables of a [`Dedupe`]; a power of two.
pub const SHARDS: usize = 4096;

/// The shard is hash bits 40.. (12 for 4096 shards): hashbrown places an
/// entry by its low bits and tags it with its top 7 (57..64), so the shard
/// bits are used by neither unless a shard passes 2^40 buckets.
const SHARD_SHIFT: u32 = 40;

const _: () = assert!(SHARDS.is_power_of_two() && SHARD_SHIFT + SHARDS.ilog2() <= 57);

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

/// One slot: 32 bytes (plus hashbrown's control byte).
type Slot = (DedupeKey, Timestamp);

/// The gate's dedupe entries, in [`SHARDS`] sub-tables.
///
/// Hashed with a seed that is kept with the entries (snapshots store it),
/// so a table rebuilt from a snapshot with the same seed puts every entry
/// where the snapshot's order (the old table's order: shard by shard, each
/// front to back) says: the inserts of a restart walk each new sub-table
/// front to back instead of missing the cache once per entry. The hash of
/// a key is the one a `HashMap` with `FixedState::with_seed(seed)` gives,
/// so a snapshot written by the single-table build (sorted by the low bits
/// of the same hash) loads as one front-to-back walk per shard. The keys'
/// visitors are secret-keyed hashes already, so a known seed gives no one
/// a way to pick colliding keys.
///
/// Iteration ([`Dedupe::iter`]) is shard by shard, each in its table's
/// order: deterministic for a given history of inserts and removals.
#[derive(Clone)]
pub struct Dedupe {
    seed: u64,
    hasher: FixedState,
    shards: Box<[HashTable<Slot>]>,
    /// Entries over all shards.
    len: usize,
}

impl std::fmt::Debug for Dedupe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dedupe")
            .field("seed", &self.seed)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
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

    /// An empty table for about `n` entries hashed with `seed` (each shard
    /// sized for its share; a shard that gets more than that grows alone).
    pub fn with_seed(seed: u64, n: usize) -> Self {
        let per = n.div_ceil(SHARDS);
        Dedupe {
            seed,
            hasher: FixedState::with_seed(seed),
            shards: (0..SHARDS).map(|_| HashTable::with_capacity(per)).collect(),
            len: 0,
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    fn hash(&self, key: &DedupeKey) -> u64 {
        self.hasher.hash_one(key)
    }

    fn shard_of(hash: u64) -> usize {
        (hash >> SHARD_SHIFT) as usize & (SHARDS - 1)
    }

    /// The last time recorded for `key`.
    pub fn get(&self, key: &DedupeKey) -> Option<Timestamp> {
        let h = self.hash(key);
        (self.shards[Self::shard_of(h)].find(h, |(k, _)| k == key)).map(|&(_, t)| t)
    }

    pub fn contains_key(&self, key: &DedupeKey) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key`'s time to `ts`; returns the time it had.
    pub fn insert(&mut self, key: DedupeKey, ts: Timestamp) -> Option<Timestamp> {
        self.update(key, |t| *t = ts, ts)
    }

    /// Records `ts` for `key`, keeping the later of it and the time it had.
    pub fn raise(&mut self, key: DedupeKey, ts: Timestamp) {
        self.update(key, |t| *t = (*t).max(ts), ts);
    }

    /// Applies `f` to `key`'s time if it has one (returning that time),
    /// else inserts `ts`.
    fn update(
        &mut self,
        key: DedupeKey,
        f: impl FnOnce(&mut Timestamp),
        ts: Timestamp,
    ) -> Option<Timestamp> {
        let h = self.hash(&key);
        let hasher = &self.hasher;
        let shard = &mut self.shards[Self::shard_of(h)];
        match shard.entry(h, |(k, _)| *k == key, |(k, _)| hasher.hash_one(k)) {
            hashbrown::hash_table::Entry::Occupied(mut e) => {
                let t = &mut e.get_mut().1;
                let old = *t;
                f(t);
                Some(old)
            }
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert((key, ts));
                self.len += 1;
                None
            }
        }
    }

    /// Removes `key`; returns its time.
    pub fn remove(&mut self, key: &DedupeKey) -> Option<Timestamp> {
        let h = self.hash(key);
        let shard = &mut self.shards[Self::shard_of(h)];
        let e = shard.find_entry(h, |(k, _)| k == key).ok()?;
        self.len -= 1;
        Some(e.remove().0.1)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every entry, shard by shard.
    pub fn iter(&self) -> impl Iterator<Item = (&DedupeKey, Timestamp)> {
        (self.shards.iter())
            .flat_map(|s| s.iter())
            .map(|(k, t)| (k, *t))
    }

    /// Keeps only the entries for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(&DedupeKey, Timestamp) -> bool) {
        for i in 0..SHARDS {
            self.retain_shard(i, &mut keep);
        }
    }

    /// [`Self::retain`] over shard `i` (of [`SHARDS`]) alone, for a sweep
    /// that gives the state lock back between shards.
    pub fn retain_shard(&mut self, i: usize, mut keep: impl FnMut(&DedupeKey, Timestamp) -> bool) {
        let shard = &mut self.shards[i];
        let before = shard.len();
        shard.retain(|(k, t)| keep(k, *t));
        self.len -= before - shard.len();
    }

    /// Bytes the tables hold on the heap (slots, control bytes, the shard
    /// array).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.shards)
            + (self.shards.iter())
                .map(HashTable::allocation_size)
                .sum::<usize>()
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
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn key(n: u64) -> DedupeKey {
        // Few articles and kinds, many visitors: collisions in the low
        // fields, as real keys have.
        DedupeKey::new((n % 7) as Idx, u128::from(n.wrapping_mul(0x9e37_79b9)), (n % 3) as u8)
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
                    o.retain(|k, t| *t > h || !shards.contains(&Dedupe::shard_of(d.hash(k))));
                }
            }
            assert_eq!(d.len(), o.len());
        }
        assert_eq!(d.len(), d.shards.iter().map(HashTable::len).sum::<usize>());
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
        ops.extend((0..n).step_by(3).map(|k| Op::Get(k)));
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
        let most = d.shards.iter().map(HashTable::len).max().unwrap();
        let least = d.shards.iter().map(HashTable::len).min().unwrap();
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
