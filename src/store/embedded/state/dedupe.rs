//! The gate's dedupe table: last counted event time per (article, visitor,
//! event type), the largest part of the embedded store's state, in
//! [`SlotMap`]s (one per event type) whose hash seed is kept in snapshots.

use std::collections::BTreeMap;

use super::article::Idx;
use super::slots::{Slot, SlotMap};
use crate::model::Timestamp;

/// A dedupe entry's key: (article, visitor, event type). The visitor is
/// held as two `u64` halves (a `u128` field would align the key to 16
/// bytes).
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

    fn pair(self, ts: u32) -> Pair {
        Pair {
            visitor_hi: self.visitor_hi,
            visitor_lo: self.visitor_lo,
            idx: self.idx,
            ts,
        }
    }

    fn pair_key(&self) -> PairKey {
        (self.visitor_hi, self.visitor_lo, self.idx)
    }
}

/// (visitor high half, low half, article): a [`Pair`]'s key, its event
/// type being its table's.
type PairKey = (u64, u64, Idx);

/// One dedupe entry in 24 bytes: the visitor whole (the decision stays
/// exact), the article, and the time as Unix seconds in a `u32` (events
/// are dated 1970 to now: ingest refuses a negative `ts` and moves a
/// future one to its arrival). A time outside `0..u32::MAX` is held
/// beside the tables ([`Dedupe::overflow`]), so every time stays exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pair {
    visitor_hi: u64,
    visitor_lo: u64,
    idx: Idx,
    /// `u32::MAX`: an empty slot.
    ts: u32,
}

impl Slot for Pair {
    type Key = PairKey;
    const EMPTY: Self = Pair {
        visitor_hi: 0,
        visitor_lo: 0,
        idx: 0,
        ts: u32::MAX,
    };

    fn is_empty(&self) -> bool {
        self.ts == u32::MAX
    }

    fn key(&self, _shard: usize) -> PairKey {
        (self.visitor_hi, self.visitor_lo, self.idx)
    }
}

impl Pair {
    fn entry(&self, kind: u8) -> (DedupeKey, Timestamp) {
        let key = DedupeKey {
            visitor_hi: self.visitor_hi,
            visitor_lo: self.visitor_lo,
            idx: self.idx,
            kind,
        };
        (key, i64::from(self.ts))
    }
}

/// Bytes of one dedupe slot.
pub const SLOT_BYTES: usize = std::mem::size_of::<Pair>();

/// `ts` as a [`Pair`]'s time, if it fits.
fn short(ts: Timestamp) -> Option<u32> {
    u32::try_from(ts).ok().filter(|&t| t != u32::MAX)
}

/// The gate's dedupe entries: a [`SlotMap`] per event type, all hashed
/// with one seed kept with the entries.
///
/// Snapshots store the seed, so a table rebuilt from a snapshot with the
/// same seed puts every entry where the snapshot's order (the old table's
/// order: sub-table by sub-table, each front to back) says: the inserts of
/// a restart walk each sub-table front to back. The keys' visitors are
/// secret-keyed hashes already, so a known seed gives no one a way to pick
/// colliding keys.
///
/// Iteration ([`Dedupe::iter`]) is table by table (in the order their
/// event types first came), each sub-table by sub-table, then the few
/// entries of [`Dedupe::overflow`]: deterministic for a given history of
/// inserts and removals.
#[derive(Clone, Debug)]
pub struct Dedupe {
    seed: u64,
    /// Entries expected ([`Self::with_seed`]): the first table is sized
    /// for them.
    hint: usize,
    tables: Vec<(u8, SlotMap<Pair>)>,
    /// Entries whose time does not fit a [`Pair`] (none, for events the
    /// API or a replay takes).
    overflow: BTreeMap<DedupeKey, Timestamp>,
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
            hint: n,
            tables: Vec::new(),
            overflow: BTreeMap::new(),
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    fn table(&self, kind: u8) -> Option<&SlotMap<Pair>> {
        (self.tables.iter()).find_map(|(k, t)| (*k == kind).then_some(t))
    }

    fn table_mut(&mut self, kind: u8) -> &mut SlotMap<Pair> {
        let i = match self.tables.iter().position(|(k, _)| *k == kind) {
            Some(i) => i,
            None => {
                let n = std::mem::take(&mut self.hint);
                self.tables.push((kind, SlotMap::with_seed(self.seed, n)));
                self.tables.len() - 1
            }
        };
        &mut self.tables[i].1
    }

    /// The last time recorded for `key`.
    pub fn get(&self, key: &DedupeKey) -> Option<Timestamp> {
        let held = (self.table(key.kind))
            .and_then(|t| t.get(&key.pair_key()))
            .map(|p| i64::from(p.ts));
        held.or_else(|| self.overflow.get(key).copied())
    }

    pub fn contains_key(&self, key: &DedupeKey) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key`'s time to `ts`; returns the time it had.
    pub fn insert(&mut self, key: DedupeKey, ts: Timestamp) -> Option<Timestamp> {
        let over = if self.overflow.is_empty() {
            None
        } else {
            self.overflow.remove(&key)
        };
        let held = match short(ts) {
            Some(t) => self
                .table_mut(key.kind)
                .insert(&key.pair_key(), key.pair(t)),
            None => {
                self.overflow.insert(key, ts);
                self.table_mut(key.kind).remove(&key.pair_key())
            }
        };
        held.map(|p| i64::from(p.ts)).or(over)
    }

    /// Records `ts` for `key`, keeping the later of it and the time it had.
    pub fn raise(&mut self, key: DedupeKey, ts: Timestamp) {
        match short(ts) {
            Some(t) if self.overflow.is_empty() => {
                let p = self
                    .table_mut(key.kind)
                    .get_or_insert_with(&key.pair_key(), || key.pair(t));
                p.ts = p.ts.max(t);
            }
            _ => {
                let ts = self.get(&key).map_or(ts, |old| old.max(ts));
                self.insert(key, ts);
            }
        }
    }

    /// Removes `key`; returns its time.
    pub fn remove(&mut self, key: &DedupeKey) -> Option<Timestamp> {
        let held = (self.tables.iter_mut())
            .find(|(k, _)| *k == key.kind)
            .and_then(|(_, t)| t.remove(&key.pair_key()));
        held.map(|p| i64::from(p.ts))
            .or_else(|| self.overflow.remove(key))
    }

    pub fn len(&self) -> usize {
        self.tables.iter().map(|(_, t)| t.len()).sum::<usize>() + self.overflow.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tables.iter().all(|(_, t)| t.is_empty()) && self.overflow.is_empty()
    }

    /// Every entry: table by table, then the overflow.
    pub fn iter(&self) -> impl Iterator<Item = (DedupeKey, Timestamp)> + '_ {
        (self.tables.iter())
            .flat_map(|(kind, t)| t.iter().map(|(_, p)| p.entry(*kind)))
            .chain(self.overflow.iter().map(|(k, t)| (*k, *t)))
    }

    /// Keeps only the entries for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(&DedupeKey, Timestamp) -> bool) {
        for i in 0..super::slots::SHARDS {
            self.retain_shard(i, &mut keep);
        }
    }

    /// [`Self::retain`] over sub-table `i` of every table alone (the
    /// overflow goes with sub-table 0).
    pub fn retain_shard(&mut self, i: usize, mut keep: impl FnMut(&DedupeKey, Timestamp) -> bool) {
        for (kind, t) in &mut self.tables {
            t.retain_shard(i, |p| {
                let (key, ts) = p.entry(*kind);
                keep(&key, ts)
            });
        }
        if i == 0 {
            self.overflow.retain(|k, t| keep(k, *t));
        }
    }

    /// Bytes the table holds on the heap (the overflow's few entries
    /// counted at their own size).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.tables)
            + self
                .tables
                .iter()
                .map(|(_, t)| t.heap_bytes())
                .sum::<usize>()
            + self.overflow.len() * std::mem::size_of::<(DedupeKey, Timestamp)>()
    }

    /// The sub-table `key` is in (tests; the overflow's: 0).
    #[cfg(test)]
    fn shard_index(&self, key: &DedupeKey) -> usize {
        if self.overflow.contains_key(key) {
            return 0;
        }
        (self.tables.first()).map_or(0, |(_, t)| t.shard_index(&key.pair_key()))
    }

    /// Entries per sub-table, over the tables (tests).
    #[cfg(test)]
    fn shard_lens(&self) -> Vec<usize> {
        let mut lens = vec![0; super::slots::SHARDS];
        for (_, t) in &self.tables {
            for (n, len) in lens.iter_mut().zip(t.shard_lens()) {
                *n += len;
            }
        }
        lens
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
    use crate::store::embedded::state::slots::SHARDS;

    type Entry = (DedupeKey, Timestamp);
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

    /// Mostly times a slot holds; some it cannot (before 1970, at or
    /// past `u32::MAX`), which go to the overflow.
    fn ts() -> impl Strategy<Value = i64> {
        let top = i64::from(u32::MAX);
        prop_oneof![
            12 => 0..1000i64,
            1 => -1000..0i64,
            1 => (top - 3)..(top + 3),
        ]
    }

    fn op(keys: u64) -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0..keys, ts()).prop_map(|(k, t)| Op::Insert(k, t)),
            6 => (0..keys, ts()).prop_map(|(k, t)| Op::Raise(k, t)),
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
                    o.retain(|k, t| *t > h || !shards.contains(&d.shard_index(k)));
                    for &i in &shards {
                        d.retain_shard(i, |_, t| t > h);
                    }
                }
            }
            assert_eq!(d.len(), o.len());
        }
        assert_eq!(
            d.len(),
            d.shard_lens().iter().sum::<usize>() + d.overflow.len()
        );
        let mut got: Vec<Entry> = d.iter().collect();
        got.sort_unstable();
        let mut want: Vec<Entry> = o.into_iter().collect();
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
    /// its share).
    #[test]
    fn keys_spread_over_the_shards() {
        let mut d = Dedupe::with_seed(7, 0);
        let n = SHARDS * 64;
        for k in 0..n as u64 {
            d.insert(key(k), 1);
        }
        let most = *d.shard_lens().iter().max().unwrap();
        let least = *d.shard_lens().iter().min().unwrap();
        assert!(most < 64 * 2 && least > 64 / 4, "{least}..{most}");
        assert!(d.heap_bytes() >= n * 24);
    }

    #[test]
    fn a_slot_is_24_bytes() {
        assert_eq!(std::mem::size_of::<Pair>(), 24);
        let k = DedupeKey::new(7, u128::MAX - 5, 3);
        assert_eq!(k.parts(), (7, u128::MAX - 5, 3));
    }
}
