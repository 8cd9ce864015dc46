//! A hash map in many sub-tables, for the embedded store's tables that
//! grow with the traffic (one entry per visitor or per (article, visitor)
//! pair: tens of millions).
//!
//! One hash table that size doubles in one insert, under the state lock:
//! at 14.7 M and 29.4 M entries the dedupe table and the behaviour rule's
//! table together stalled ingest for 7–20 s (BENCHMARKS.md). Here an
//! entry's shard is picked by bits of its hash: a shard doubles when it
//! alone is full, moving about 1/[`SHARDS`] of the entries, and retention
//! can sweep a few shards per hold of the state lock
//! ([`ShardedMap::retain_shard`]).

use std::hash::{BuildHasher, Hash};

use foldhash::fast::FixedState;
use hashbrown::HashTable;

/// Sub-tables of a [`ShardedMap`]; a power of two. At 30 M entries
/// (`benches/dedupe_growth.rs`, quiet machine) 1024 shards fill in 16.4 s
/// against 16.0 s for one table and 18.5 s for 4096, with a worst insert of
/// 1.2 ms (a shard of ~30,000 entries doubling); a table ten times that
/// size, past this machine's memory, would still double a shard in about
/// 12 ms.
pub const SHARDS: usize = 1024;

/// The shard is hash bits 40.. (10 for 1024 shards): hashbrown places an
/// entry by its low bits and tags it with its top 7 (57..64), so the shard
/// bits are used by neither unless a shard passes 2^40 buckets.
const SHARD_SHIFT: u32 = 40;

const _: () = assert!(SHARDS.is_power_of_two() && SHARD_SHIFT + SHARDS.ilog2() <= 57);

/// A hash map in [`SHARDS`] sub-tables, an entry's shard picked by bits
/// of its hash (one hash per operation picks the shard and the slot). For
/// the per-visitor tables of the gate that grow with the traffic: the
/// dedupe entries ([`Dedupe`](super::dedupe::Dedupe)) and the behaviour rule's state.
#[derive(Clone)]
pub struct ShardedMap<K, V> {
    hasher: FixedState,
    shards: Box<[HashTable<(K, V)>]>,
    /// Entries over all shards.
    len: usize,
}

impl<K, V> std::fmt::Debug for ShardedMap<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedMap")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq, V> Default for ShardedMap<K, V> {
    /// Hashed with a fresh random seed.
    fn default() -> Self {
        Self::with_seed(rand::random(), 0)
    }
}

impl<K: Hash + Eq, V> ShardedMap<K, V> {
    /// An empty map for about `n` entries hashed with `seed` (each shard
    /// sized for its share; a shard that gets more than that grows alone).
    pub fn with_seed(seed: u64, n: usize) -> Self {
        let per = n.div_ceil(SHARDS);
        ShardedMap {
            hasher: FixedState::with_seed(seed),
            shards: (0..SHARDS).map(|_| HashTable::with_capacity(per)).collect(),
            len: 0,
        }
    }

    fn hash(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    fn shard_of(hash: u64) -> usize {
        (hash >> SHARD_SHIFT) as usize & (SHARDS - 1)
    }

    /// The shard `key` is in.
    pub fn shard_index(&self, key: &K) -> usize {
        Self::shard_of(self.hash(key))
    }

    /// Entries per shard.
    pub fn shard_lens(&self) -> impl Iterator<Item = usize> {
        self.shards.iter().map(HashTable::len)
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        let h = self.hash(key);
        (self.shards[Self::shard_of(h)].find(h, |(k, _)| k == key)).map(|(_, v)| v)
    }

    pub fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// `key`'s value, inserted by `new` first if it has none.
    pub fn get_or_insert_with(&mut self, key: K, new: impl FnOnce() -> V) -> &mut V {
        let h = self.hash(&key);
        let hasher = &self.hasher;
        let shard = &mut self.shards[Self::shard_of(h)];
        match shard.entry(h, |(k, _)| *k == key, |(k, _)| hasher.hash_one(k)) {
            hashbrown::hash_table::Entry::Occupied(e) => &mut e.into_mut().1,
            hashbrown::hash_table::Entry::Vacant(e) => {
                self.len += 1;
                &mut e.insert((key, new())).into_mut().1
            }
        }
    }

    /// Sets `key`'s value; returns the one it had.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        let mut value = Some(value);
        let v = self.get_or_insert_with(key, || value.take().expect("taken once"));
        value.map(|new| std::mem::replace(v, new))
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &K) -> Option<V> {
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

    /// Every entry, shard by shard, each in its table's order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        (self.shards.iter())
            .flat_map(|s| s.iter())
            .map(|(k, v)| (k, v))
    }

    /// Keeps only the entries for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        for i in 0..SHARDS {
            self.retain_shard(i, &mut keep);
        }
    }

    /// [`Self::retain`] over shard `i` (of [`SHARDS`]) alone, for a sweep
    /// that gives the state lock back between shards.
    pub fn retain_shard(&mut self, i: usize, mut keep: impl FnMut(&K, &mut V) -> bool) {
        let shard = &mut self.shards[i];
        let before = shard.len();
        shard.retain(|(k, v)| keep(k, v));
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
