//! A hash table of fixed-width slots in many sub-tables, for the gate's
//! tables that grow with the traffic (one entry per (visitor, article)
//! pair or per visitor: millions).
//!
//! Why not hashbrown: its tables have a power of two of buckets, at most
//! 7/8 full, and double: right after a doubling a table is 7/16 full, so a
//! 32-byte slot cost 33 to 75 bytes an entry (69 at 1 M dedupe pairs,
//! examples/gate_memory.rs). Here a sub-table is an array of slots of any
//! length, at most 9/10 full, grown by a fifth: at least 3/4 full past its
//! first few entries. Collisions go to the next slot (linear probing, each
//! run ordered by home slot, "Robin Hood"): a lookup stops at the first
//! entry that sits nearer its own home than the key would, and a removal
//! shifts the run's rest back, so there are no tombstones. An empty slot
//! is a value of the slot type ([`Slot::EMPTY`]): no control bytes.
//!
//! One table that size would grow in one insert, under the state lock: at
//! 14.7 M and 29.4 M entries the dedupe table and the behaviour rule's
//! table together once stalled ingest for 7–20 s (BENCHMARKS.md). So one
//! hash picks the sub-table (its top bits, or bits of the key itself:
//! [`Slot::shard`]) and the home slot (the bits below them, scaled to the
//! sub-table's length): a sub-table grows alone, moving about 1/[`SHARDS`]
//! of the entries, and retention can sweep a few sub-tables per hold of
//! the state lock ([`SlotMap::retain_shard`]).

use std::hash::{BuildHasher, Hash};

use foldhash::fast::FixedState;

/// Sub-tables of a [`SlotMap`]; a power of two. At 30 M entries
/// (`benches/dedupe_growth.rs`, quiet machine, with hashbrown sub-tables)
/// 1024 filled in 16.4 s against 16.0 s for one table and 18.5 s for 4096,
/// with a worst insert of 1.2 ms (a sub-table of ~30,000 entries
/// doubling).
pub const SHARDS: usize = 1024;

const SHARD_BITS: u32 = SHARDS.ilog2();

/// A fixed-width entry of a [`SlotMap`]: its key and value in one.
pub trait Slot: Copy {
    type Key: Hash + Eq;
    /// The empty slot: a value no entry ever takes.
    const EMPTY: Self;
    fn is_empty(&self) -> bool;
    /// The key of this slot, held in sub-table `shard` (a slot may leave
    /// out of its key what its sub-table says: [`Slot::shard`]).
    fn key(&self, shard: usize) -> Self::Key;
    /// The sub-table of `key`, whose hash is `h`: by default the hash's
    /// top bits.
    fn shard(key: &Self::Key, h: u64) -> usize {
        let _ = key;
        (h >> (64 - SHARD_BITS)) as usize
    }
}

/// One sub-table: `slots.len()` slots, `len` of them taken.
#[derive(Clone)]
struct Shard<S> {
    slots: Box<[S]>,
    len: usize,
}

/// Slots a sub-table for `n` entries is given: at most 9/10 full.
fn capacity_for(n: usize) -> usize {
    if n == 0 { 0 } else { n + n / 9 + 1 }
}

/// The next length of a sub-table of `cap` slots that is full.
fn grown(cap: usize) -> usize {
    (cap + cap / 5).max(cap + 4)
}

/// The home slot of hash `h` in a sub-table of `cap` slots: the bits below
/// the sub-table's, scaled to `cap`.
fn home(h: u64, cap: usize) -> usize {
    ((u128::from(h << SHARD_BITS) * cap as u128) >> 64) as usize
}

/// How far slot `i` is past `home`, around the end of `cap` slots.
fn dist(i: usize, home: usize, cap: usize) -> usize {
    if i >= home { i - home } else { i + cap - home }
}

impl<S: Slot> Shard<S> {
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() { 0 } else { i + 1 }
    }

    /// The slot of the key `is` tells (hash `h`): `Ok` if it is held,
    /// else `Err` of the slot it would be put in (the first free one or
    /// the first held by an entry nearer its home: runs stay ordered by
    /// home).
    fn probe(
        &self,
        is: impl Fn(&S) -> bool,
        h: u64,
        hash: impl Fn(&S) -> u64,
    ) -> Result<usize, usize> {
        let cap = self.slots.len();
        if cap == 0 {
            return Err(0);
        }
        let mut i = home(h, cap);
        let mut d = 0;
        loop {
            let s = &self.slots[i];
            if s.is_empty() {
                return Err(i);
            }
            if is(s) {
                return Ok(i);
            }
            if dist(i, home(hash(s), cap), cap) < d {
                return Err(i);
            }
            i = self.next(i);
            d += 1;
        }
    }

    /// The slot of the key `is` tells (hash `h`), if it is held.
    fn find(&self, is: impl Fn(&S) -> bool, h: u64, hash: impl Fn(&S) -> u64) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        self.probe(is, h, hash).ok()
    }

    /// Puts `slot` (hash `h`, its key not held) in its place; returns
    /// where. Room for it must have been made ([`Self::reserve_one`]).
    fn place(&mut self, slot: S, h: u64, hash: impl Fn(&S) -> u64) -> usize {
        let at = match self.probe(|_| false, h, hash) {
            Ok(i) | Err(i) => i,
        };
        self.place_at(slot, at)
    }

    /// Puts `slot` in slot `at` (where [`Self::probe`] said), moving the
    /// rest of the run on one slot; returns `at`.
    fn place_at(&mut self, slot: S, at: usize) -> usize {
        let mut i = at;
        let mut carry = slot;
        loop {
            let s = std::mem::replace(&mut self.slots[i], carry);
            if s.is_empty() {
                break;
            }
            carry = s;
            i = self.next(i);
        }
        self.len += 1;
        at
    }

    /// Whether one more entry needs the sub-table grown first.
    fn full(&self) -> bool {
        (self.len + 1) * 10 > self.slots.len() * 9
    }

    /// Empties slot `i`, moving the rest of its run back one slot; returns
    /// what it held.
    fn remove_at(&mut self, mut i: usize, hash: impl Fn(&S) -> u64) -> S {
        let cap = self.slots.len();
        let out = self.slots[i];
        loop {
            let j = self.next(i);
            let s = self.slots[j];
            if s.is_empty() || home(hash(&s), cap) == j {
                break;
            }
            self.slots[i] = s;
            i = j;
        }
        self.slots[i] = S::EMPTY;
        self.len -= 1;
        out
    }

    /// These slots' entries in a sub-table of `cap` slots.
    ///
    /// The old slots are walked from the start of a run: their entries
    /// come in order of home but for entries of one old home, and a home
    /// scales with the sub-table's length, so nearly every entry's new
    /// home is at or past the last one placed: it goes in the first free
    /// slot from its home, which is its home or the end of the run placed
    /// so far (one hash, no probing). Any other goes through
    /// [`Self::place`].
    fn rebuild(&mut self, cap: usize, hash: impl Fn(&S) -> u64 + Copy) {
        let old = std::mem::replace(&mut self.slots, vec![S::EMPTY; cap].into_boxed_slice());
        self.len = 0;
        let start = old.iter().position(|s| s.is_empty()).unwrap_or(0);
        let (front, back) = old.split_at(start);
        // Slots from `end` on are empty, and no entry placed has a home
        // past `last` (until a run wraps around the end: then `end` is
        // `cap` and stays so).
        let (mut end, mut last) = (0, 0);
        for s in back.iter().chain(front).filter(|s| !s.is_empty()) {
            let h = hash(s);
            let at = home(h, cap);
            if at >= last && end < cap {
                let i = at.max(end);
                self.slots[i] = *s;
                self.len += 1;
                (end, last) = (i + 1, at);
            } else {
                self.place(*s, h, hash);
                // The run `s` joined ends at slot `end` at the latest.
                if end < cap && !self.slots[end].is_empty() {
                    end += 1;
                }
            }
        }
    }

    /// Makes room for one more entry.
    fn reserve_one(&mut self, hash: impl Fn(&S) -> u64 + Copy) {
        if self.full() {
            self.rebuild(grown(self.slots.len()), hash);
        }
    }
}

/// A hash map of fixed-width [`Slot`]s in [`SHARDS`] sub-tables (see the
/// module's header). Iteration is sub-table by sub-table, each front to
/// back: deterministic for a given history of inserts and removals.
#[derive(Clone)]
pub struct SlotMap<S> {
    hasher: FixedState,
    shards: Box<[Shard<S>]>,
    /// Entries over all sub-tables.
    len: usize,
}

impl<S> std::fmt::Debug for SlotMap<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotMap")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl<S: Slot> SlotMap<S> {
    /// An empty map for about `n` entries hashed with `seed` (each
    /// sub-table sized for its share; one that gets more grows alone).
    pub fn with_seed(seed: u64, n: usize) -> Self {
        let cap = capacity_for(n.div_ceil(SHARDS));
        SlotMap {
            hasher: FixedState::with_seed(seed),
            shards: (0..SHARDS)
                .map(|_| Shard {
                    slots: vec![S::EMPTY; cap].into_boxed_slice(),
                    len: 0,
                })
                .collect(),
            len: 0,
        }
    }

    /// `key`'s hash and sub-table.
    fn locate(&self, key: &S::Key) -> (u64, usize) {
        let h = self.hasher.hash_one(key);
        (h, S::shard(key, h))
    }

    /// The sub-table `key` is in.
    #[cfg(test)]
    pub fn shard_index(&self, key: &S::Key) -> usize {
        self.locate(key).1
    }

    /// Entries per sub-table.
    #[cfg(test)]
    pub fn shard_lens(&self) -> impl Iterator<Item = usize> {
        self.shards.iter().map(|s| s.len)
    }

    pub fn get(&self, key: &S::Key) -> Option<&S> {
        let (h, si) = self.locate(key);
        let shard = &self.shards[si];
        let hash = |s: &S| self.hasher.hash_one(s.key(si));
        let i = shard.find(|s| s.key(si) == *key, h, hash)?;
        Some(&shard.slots[i])
    }

    pub fn get_mut(&mut self, key: &S::Key) -> Option<&mut S> {
        let (h, si) = self.locate(key);
        let hasher = &self.hasher;
        let shard = &mut self.shards[si];
        let i = shard.find(|s| s.key(si) == *key, h, |s| hasher.hash_one(s.key(si)))?;
        Some(&mut shard.slots[i])
    }

    /// Puts `slot` in for `key`, which the map does not hold (one probe
    /// walk fewer than [`Self::insert`]).
    pub fn insert_absent(&mut self, key: &S::Key, slot: S) {
        debug_assert!(self.get(key).is_none());
        let (h, si) = self.locate(key);
        let hasher = &self.hasher;
        let hash = |s: &S| hasher.hash_one(s.key(si));
        let shard = &mut self.shards[si];
        shard.reserve_one(hash);
        shard.place(slot, h, hash);
        self.len += 1;
    }

    /// `key`'s slot, `new()` put in first if it has none (`new` must
    /// return a slot holding `key`).
    pub fn get_or_insert_with(&mut self, key: &S::Key, new: impl FnOnce() -> S) -> &mut S {
        let (h, si) = self.locate(key);
        let hasher = &self.hasher;
        let hash = |s: &S| hasher.hash_one(s.key(si));
        let shard = &mut self.shards[si];
        // One probe walk finds the key or the slot it goes in, unless the
        // sub-table must grow first.
        let i = match shard.probe(|s| s.key(si) == *key, h, hash) {
            Ok(i) => i,
            Err(at) => {
                self.len += 1;
                if shard.full() {
                    shard.reserve_one(hash);
                    shard.place(new(), h, hash)
                } else {
                    shard.place_at(new(), at)
                }
            }
        };
        &mut shard.slots[i]
    }

    /// Puts `slot` (holding `key`) in, over `key`'s slot if any; returns
    /// that.
    pub fn insert(&mut self, key: &S::Key, slot: S) -> Option<S> {
        let mut put = false;
        let s = self.get_or_insert_with(key, || {
            put = true;
            slot
        });
        (!put).then(|| std::mem::replace(s, slot))
    }

    /// Removes `key`'s slot; returns it.
    pub fn remove(&mut self, key: &S::Key) -> Option<S> {
        let (h, si) = self.locate(key);
        let hasher = &self.hasher;
        let hash = |s: &S| hasher.hash_one(s.key(si));
        let shard = &mut self.shards[si];
        let i = shard.find(|s| s.key(si) == *key, h, hash)?;
        self.len -= 1;
        Some(shard.remove_at(i, hash))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every entry with its sub-table, sub-table by sub-table, each front
    /// to back.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &S)> {
        (self.shards.iter().enumerate())
            .flat_map(|(i, s)| s.slots.iter().map(move |x| (i, x)))
            .filter(|(_, s)| !s.is_empty())
    }

    /// Keeps only the entries for which `keep` holds (it may change them,
    /// their keys excepted).
    #[cfg(test)]
    pub fn retain(&mut self, mut keep: impl FnMut(&mut S) -> bool) {
        for i in 0..SHARDS {
            self.retain_shard(i, &mut keep);
        }
    }

    /// [`Self::retain`] over sub-table `i` (of [`SHARDS`]) alone, for a
    /// sweep that gives the state lock back between sub-tables. A
    /// sub-table left less than 3/5 full is made smaller.
    pub fn retain_shard(&mut self, i: usize, mut keep: impl FnMut(&mut S) -> bool) {
        let hasher = &self.hasher;
        let hash = |s: &S| hasher.hash_one(s.key(i));
        let shard = &mut self.shards[i];
        let before = shard.len;
        let mut dropped = false;
        for s in shard.slots.iter_mut().filter(|s| !s.is_empty()) {
            if !keep(s) {
                *s = S::EMPTY;
                shard.len -= 1;
                dropped = true;
            }
        }
        if dropped {
            // Emptied slots broke runs: place the rest again.
            let cap = shard.slots.len();
            let small = shard.len * 10 < cap * 6;
            let cap = if small { capacity_for(shard.len) } else { cap };
            shard.rebuild(cap, hash);
        }
        self.len -= before - shard.len;
    }

    /// Bytes the map holds on the heap (slots and the sub-table array).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.shards)
            + (self.shards.iter())
                .map(|s| std::mem::size_of_val(&*s.slots))
                .sum::<usize>()
    }
}

impl<S: Slot> Default for SlotMap<S> {
    /// Hashed with a fresh random seed.
    fn default() -> Self {
        Self::with_seed(rand::random(), 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// A 16-byte slot: key `k` (0 never taken: the empty slot), value `v`.
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Kv {
        k: u64,
        v: u64,
    }

    impl Slot for Kv {
        type Key = u64;
        const EMPTY: Self = Kv { k: 0, v: 0 };
        fn is_empty(&self) -> bool {
            self.k == 0
        }
        fn key(&self, _shard: usize) -> u64 {
            self.k
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u64),
        Add(u64, u64),
        Get(u64),
        Remove(u64),
        /// Keeps values above this: everywhere, or in sub-tables `from..from+n`.
        Retain(u64, Option<(usize, usize)>),
    }

    fn op(keys: u64) -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (1..keys, 0..1000u64).prop_map(|(k, v)| Op::Insert(k, v)),
            6 => (1..keys, 0..1000u64).prop_map(|(k, v)| Op::Add(k, v)),
            4 => (1..keys).prop_map(Op::Get),
            3 => (1..keys).prop_map(Op::Remove),
            1 => (0..1000u64, proptest::option::of((0..SHARDS, 1..SHARDS)))
                .prop_map(|(v, r)| Op::Retain(v, r)),
        ]
    }

    /// Every run is ordered by home and has no gap before any entry's
    /// home: what lookups rely on.
    fn check_runs(m: &SlotMap<Kv>) {
        for s in m.shards.iter() {
            let cap = s.slots.len();
            assert_eq!(s.len, s.slots.iter().filter(|x| !x.is_empty()).count());
            assert!(s.len * 10 <= cap * 9 || cap == 0);
            for (i, x) in s.slots.iter().enumerate().filter(|(_, x)| !x.is_empty()) {
                let h = home(m.hasher.hash_one(x.k), cap);
                let mut j = h;
                while j != i {
                    assert!(!s.slots[j].is_empty(), "gap between home {h} and {i}");
                    j = (j + 1) % cap;
                }
            }
        }
    }

    /// Runs `ops` on a map and on a `HashMap` oracle: every answer and the
    /// final contents agree.
    fn check(ops: &[Op], seed: u64) {
        let mut m: SlotMap<Kv> = SlotMap::with_seed(seed, 0);
        let mut o: HashMap<u64, u64> = HashMap::new();
        for op in ops {
            match *op {
                Op::Insert(k, v) => {
                    let got = m.insert(&k, Kv { k, v }).map(|s| s.v);
                    assert_eq!(got, o.insert(k, v));
                }
                Op::Add(k, v) => {
                    m.get_or_insert_with(&k, || Kv { k, v: 0 }).v += v;
                    *o.entry(k).or_insert(0) += v;
                }
                Op::Get(k) => assert_eq!(m.get(&k).map(|s| s.v), o.get(&k).copied()),
                Op::Remove(k) => assert_eq!(m.remove(&k).map(|s| s.v), o.remove(&k)),
                Op::Retain(v, None) => {
                    m.retain(|s| s.v > v);
                    o.retain(|_, x| *x > v);
                }
                Op::Retain(v, Some((from, n))) => {
                    let shards: Vec<usize> = (from..from + n).map(|i| i % SHARDS).collect();
                    for &i in &shards {
                        m.retain_shard(i, |s| s.v > v);
                    }
                    o.retain(|k, x| *x > v || !shards.contains(&m.shard_index(k)));
                }
            }
            assert_eq!(m.len(), o.len());
        }
        check_runs(&m);
        assert_eq!(m.len(), m.shard_lens().sum::<usize>());
        let mut got: Vec<(u64, u64)> = m.iter().map(|(_, s)| (s.k, s.v)).collect();
        got.sort_unstable();
        let mut want: Vec<(u64, u64)> = o.into_iter().collect();
        want.sort_unstable();
        assert_eq!(got, want);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Few keys: long runs in few sub-tables, many hits and removals.
        #[test]
        fn answers_as_a_hashmap_with_few_keys(
            ops in proptest::collection::vec(op(64), 0..600),
            seed in any::<u64>(),
        ) {
            check(&ops, seed);
        }

        /// Many keys: sub-tables grow between the checks.
        #[test]
        fn answers_as_a_hashmap_across_growth(
            ops in proptest::collection::vec(op(200_000), 0..6000),
            seed in any::<u64>(),
        ) {
            check(&ops, seed);
        }
    }

    /// One sub-table of a few slots, full, with runs around its end.
    #[test]
    fn runs_wrap_around_the_end() {
        let mut m: SlotMap<Kv> = SlotMap::with_seed(3, 0);
        // Keys of sub-table 0 only.
        let keys: Vec<u64> = (1..).filter(|k| m.shard_index(k) == 0).take(200).collect();
        let mut o = HashMap::new();
        for (n, &k) in keys.iter().enumerate() {
            m.insert(&k, Kv { k, v: n as u64 });
            o.insert(k, n as u64);
            if n % 3 == 2 {
                let gone = keys[n / 2];
                assert_eq!(m.remove(&gone).map(|s| s.v), o.remove(&gone));
            }
            check_runs(&m);
        }
        for k in &keys {
            assert_eq!(m.get(k).map(|s| s.v), o.get(k).copied());
        }
    }

    /// Past the first few sizes a sub-table is at least 3/4 full after it
    /// grows: at 1 M entries the slots are under 4/3 of the entries.
    #[test]
    fn at_a_million_entries_slots_are_under_four_thirds() {
        let mut m: SlotMap<Kv> = SlotMap::with_seed(9, 0);
        for k in 1..=1_000_000u64 {
            m.insert(&k, Kv { k, v: k });
        }
        let slots: usize = m.shards.iter().map(|s| s.slots.len()).sum();
        assert!(slots * 3 < 1_000_000 * 4, "{slots} slots");
        check_runs(&m);
    }
}
