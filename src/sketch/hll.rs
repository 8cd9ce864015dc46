//! The [`Hll`] sketch: a Redis HyperLogLog string value plus the operations
//! Redis performs on it.

use super::murmur::{HLL_SEED, murmur64a};
use super::sparse::{self, Cursor, SetOutcome, SparseSet};
use super::{HLL_HDR_SIZE, HLL_REGISTERS, Image, dense, estimate};

/// Total size of a dense image.
pub const HLL_DENSE_SIZE: usize = HLL_HDR_SIZE + dense::DENSE_REGISTER_BYTES;
/// Default `hll-sparse-max-bytes` of Redis.
pub const DEFAULT_SPARSE_MAX_BYTES: usize = 3000;

const MAGIC: &[u8; 4] = b"HYLL";
const ENC_DENSE: u8 = 0;
const ENC_SPARSE: u8 = 1;
const HLL_P: u32 = 14;
const HLL_P_MASK: u64 = (1 << HLL_P) - 1;
/// Sentinel bit: `HLL_Q` = 64 - P = 50 bits remain after the index.
const HLL_Q_SENTINEL: u64 = 1 << 50;

/// Why a byte string is not a HyperLogLog image this module accepts.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum HllError {
    /// Shorter than the 16-byte header.
    #[error("HyperLogLog image too short: {len} bytes, the header alone is 16")]
    TooShort {
        /// Length of the rejected input.
        len: usize,
    },
    /// The first four bytes are not `HYLL`.
    #[error("HyperLogLog image does not start with the magic \"HYLL\"")]
    BadMagic,
    /// The encoding byte is neither 0 (dense) nor 1 (sparse).
    #[error("unknown HyperLogLog encoding byte {0}")]
    BadEncoding(u8),
    /// A dense image whose length is not 12304 bytes.
    #[error("dense HyperLogLog image must be {expected} bytes, got {actual}")]
    WrongLength {
        /// Required length.
        expected: usize,
        /// Length of the rejected input.
        actual: usize,
    },
    /// An XZERO opcode is cut off at the end of the image.
    #[error("sparse HyperLogLog truncated inside the opcode at byte {offset}")]
    TruncatedSparse {
        /// Offset of the incomplete opcode in the image.
        offset: usize,
    },
    /// The sparse opcodes do not cover exactly 16384 registers.
    #[error("sparse HyperLogLog opcodes cover {covered} registers instead of 16384")]
    CorruptSparse {
        /// Registers covered (or, if too many, the count at the opcode that
        /// overflowed).
        covered: usize,
    },
}

/// A HyperLogLog sketch stored as the exact byte image Redis keeps in a
/// string key.
///
/// Every operation transforms the image exactly like the corresponding Redis
/// command, so [`Hll::as_bytes`] always equals `GET key` after the same
/// sequence of `PFADD` / `PFCOUNT` / `PFMERGE` calls.
///
/// Equality compares the image *and* the sparse size limit (two sketches
/// with equal images but different limits may evolve differently).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hll {
    /// The Redis string value: header + sparse opcodes or dense registers;
    /// inline up to [`INLINE_IMAGE`](super::INLINE_IMAGE) bytes.
    bytes: Image,
    /// `hll-sparse-max-bytes`: sparse images never grow beyond this.
    sparse_max: usize,
}

impl Default for Hll {
    fn default() -> Self {
        Hll::new()
    }
}

/// Splits an element hash into (register index, register value).
#[inline(always)]
fn index_and_count(hash: u64) -> (usize, u8) {
    let index = (hash & HLL_P_MASK) as usize;
    let rest = (hash >> HLL_P) | HLL_Q_SENTINEL;
    (index, rest.trailing_zeros() as u8 + 1)
}

impl Hll {
    /// An empty sparse sketch, byte-identical to the value `PFADD key`
    /// creates (one XZERO opcode; the cached cardinality is marked stale, as
    /// PFADD does when it creates the key).
    pub fn new() -> Self {
        Hll::with_sparse_max_bytes(DEFAULT_SPARSE_MAX_BYTES)
    }

    /// Like [`Hll::new`] with a custom `hll-sparse-max-bytes`.
    pub fn with_sparse_max_bytes(max: usize) -> Self {
        // The 18-byte empty image and its first two registers (3 bytes each
        // at most) fit inline: no heap block for most sketches.
        let mut bytes = Image::new();
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&[ENC_SPARSE, 0, 0, 0]);
        bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x80]);
        bytes.extend_from_slice(&sparse::EMPTY_OPCODES);
        Hll {
            bytes,
            sparse_max: max,
        }
    }

    /// An empty sketch in the dense encoding (12,304 bytes): the registers,
    /// header and estimate of [`Hll::new`], but every `add` a write of one
    /// register, however many elements it holds. Redis never creates one
    /// (`PFADD` starts sparse); for a sketch that takes many elements and
    /// is not exchanged with Redis while it does.
    pub fn new_dense() -> Self {
        let mut h = Hll::new();
        h.promote();
        h
    }

    /// The same registers in the sparse encoding, set in index order on an
    /// empty sketch with this one's `hll-sparse-max-bytes` (the unused
    /// header bytes and the cached cardinality carried over), or `None`
    /// where they do not fit it (or a register is above 32). Every count is
    /// the same; the image is a valid Redis one, not necessarily the one
    /// `PFADD` in another order would have left. A sparse sketch is
    /// returned as it is.
    pub fn to_sparse(&self) -> Option<Hll> {
        if self.is_sparse() {
            return Some(self.clone());
        }
        let mut out = Hll::with_sparse_max_bytes(self.sparse_max);
        let mut cursor = Cursor::default();
        for (i, &v) in self.registers().iter().enumerate() {
            if v != 0
                && sparse::set(&mut out.bytes, out.sparse_max, i, v, &mut cursor)
                    == SetOutcome::Promote
            {
                return None;
            }
        }
        out.bytes[5..HLL_HDR_SIZE].copy_from_slice(&self.bytes[5..HLL_HDR_SIZE]);
        Some(out)
    }

    /// The `hll-sparse-max-bytes` limit this sketch applies.
    pub fn sparse_max_bytes(&self) -> usize {
        self.sparse_max
    }

    /// Changes the `hll-sparse-max-bytes` limit (like `CONFIG SET`); the
    /// current encoding is kept until the next update that grows it.
    pub fn set_sparse_max_bytes(&mut self, max: usize) {
        self.sparse_max = max;
    }

    /// `PFADD key element`: returns `true` if a register changed.
    #[inline]
    pub fn add(&mut self, element: &[u8]) -> bool {
        self.add_hash(murmur64a(element, HLL_SEED))
    }

    /// [`Hll::add`] with a precomputed `murmur64a(element, HLL_SEED)`.
    #[inline]
    pub fn add_hash(&mut self, hash: u64) -> bool {
        self.add_hash_by(sparse::set, hash)
    }

    /// [`Hll::add_hash`] with the sparse update `set`.
    #[inline(always)]
    fn add_hash_by(&mut self, set: SparseSet, hash: u64) -> bool {
        let (index, count) = index_and_count(hash);
        let changed = if self.bytes[4] == ENC_DENSE {
            dense::set_if_greater(&mut self.bytes[HLL_HDR_SIZE..], index, count)
        } else {
            self.sparse_set_by(set, index, count, &mut Cursor::default())
        };
        if changed {
            self.invalidate_cache();
        }
        changed
    }

    /// Sets a register in the sparse encoding, promoting to dense when Redis
    /// would. Does not touch the cache flag.
    fn sparse_set(&mut self, index: usize, count: u8, cursor: &mut Cursor) -> bool {
        self.sparse_set_by(sparse::set, index, count, cursor)
    }

    /// [`Hll::sparse_set`] with the sparse update `set`.
    #[inline(always)]
    fn sparse_set_by(
        &mut self,
        set: SparseSet,
        index: usize,
        count: u8,
        cursor: &mut Cursor,
    ) -> bool {
        match set(&mut self.bytes, self.sparse_max, index, count, cursor) {
            SetOutcome::Unchanged => false,
            SetOutcome::Changed => true,
            SetOutcome::Promote => {
                self.promote();
                dense::set_if_greater(&mut self.bytes[HLL_HDR_SIZE..], index, count)
            }
        }
    }

    /// Converts a sparse image to dense (Redis's `hllSparseToDense`): the
    /// whole header, cached cardinality included, is carried over.
    fn promote(&mut self) {
        if !self.is_sparse() {
            return;
        }
        let mut dense_img = vec![0u8; HLL_DENSE_SIZE];
        dense_img[..HLL_HDR_SIZE].copy_from_slice(&self.bytes[..HLL_HDR_SIZE]);
        dense_img[4] = ENC_DENSE;
        sparse::to_dense_registers(&self.bytes[HLL_HDR_SIZE..], &mut dense_img[HLL_HDR_SIZE..]);
        self.bytes = Image::from_vec(dense_img);
    }

    #[inline]
    fn invalidate_cache(&mut self) {
        self.bytes[15] |= 0x80;
    }

    #[inline]
    fn cached(&self) -> Option<u64> {
        if self.bytes[15] & 0x80 == 0 {
            Some(u64::from_le_bytes(
                self.bytes[8..16].try_into().expect("8 header bytes"),
            ))
        } else {
            None
        }
    }

    fn histogram(&self) -> [u32; 64] {
        if self.is_sparse() {
            sparse::histogram(&self.bytes[HLL_HDR_SIZE..])
        } else {
            dense::histogram(&self.bytes[HLL_HDR_SIZE..])
        }
    }

    /// `PFCOUNT key`: returns the cached cardinality if valid, otherwise
    /// computes it and stores it in the header.
    ///
    /// For hand-crafted dense images whose registers are (nearly) all
    /// saturated the estimate overflows; like Redis on x86-64 the result is
    /// then `1 << 63` (which `PFCOUNT` prints as `i64::MIN`), and since that
    /// value has the stale bit set the cache stays invalid.
    pub fn count(&mut self) -> u64 {
        if let Some(c) = self.cached() {
            return c;
        }
        let c = estimate::estimate(&self.histogram());
        self.bytes[8..16].copy_from_slice(&c.to_le_bytes());
        c
    }

    /// The number `PFCOUNT` would return, without updating the cache.
    pub fn estimate(&self) -> u64 {
        match self.cached() {
            Some(c) => c,
            None => estimate::estimate(&self.histogram()),
        }
    }

    /// Value of register `index` (panics if `index >= 16384`).
    pub fn register(&self, index: usize) -> u8 {
        assert!(index < HLL_REGISTERS, "register index out of range");
        if self.is_sparse() {
            let mut idx = 0;
            for op in sparse::Ops::new(&self.bytes[HLL_HDR_SIZE..]) {
                let (n, v) = match op {
                    sparse::Op::Zeros(n) => (n, 0),
                    sparse::Op::Val { value, len } => (len, value),
                };
                if index < idx + n {
                    return v;
                }
                idx += n;
            }
            0
        } else {
            dense::get(&self.bytes[HLL_HDR_SIZE..], index)
        }
    }

    /// `max[i] = max(max[i], register i)`.
    fn max_into(&self, max: &mut [u8; HLL_REGISTERS]) {
        if self.is_sparse() {
            sparse::max_into(&self.bytes[HLL_HDR_SIZE..], max);
        } else {
            dense::max_into(&self.bytes[HLL_HDR_SIZE..], max);
        }
    }

    /// All registers, one byte each.
    pub fn registers(&self) -> Box<[u8; HLL_REGISTERS]> {
        let mut out = Box::new([0u8; HLL_REGISTERS]);
        if self.is_sparse() {
            sparse::max_into(&self.bytes[HLL_HDR_SIZE..], &mut out);
        } else {
            dense::unpack_into(&self.bytes[HLL_HDR_SIZE..], &mut out);
        }
        out
    }

    /// `PFMERGE self self other`: register-wise maximum, stored in `self`.
    pub fn merge(&mut self, other: &Hll) {
        self.merge_many(&[other]);
    }

    /// Register-wise maximum with `other`: the same registers and encoding
    /// as [`Hll::merge`] (the cache is left valid if nothing changed), but
    /// without its 16 KB scratch arrays when `other` is
    /// sparse: only `other`'s non-zero registers are visited, in index
    /// order. This is what the stores use to build a window's union from
    /// many small hourly sketches.
    pub fn union_with(&mut self, other: &Hll) {
        if !other.is_sparse() {
            self.merge(other);
            return;
        }
        let mut changed = false;
        let mut cursor = Cursor::default();
        sparse::for_each_value(&other.bytes[HLL_HDR_SIZE..], |i, v| {
            changed |= if self.is_sparse() {
                self.sparse_set(i, v, &mut cursor)
            } else {
                dense::set_if_greater(&mut self.bytes[HLL_HDR_SIZE..], i, v)
            };
        });
        if changed {
            self.invalidate_cache();
        }
    }

    /// [`Self::union_with`] each of `others`, in one pass: when `self` and
    /// every source are sparse, their register values are gathered, sorted
    /// and set in index order with one cursor (one walk of `self`'s opcodes
    /// instead of one per source). The registers end up the same.
    pub fn union_all(&mut self, others: &[&Hll]) {
        if !self.is_sparse() || others.iter().any(|o| !o.is_sparse()) {
            for o in others {
                self.union_with(o);
            }
            return;
        }
        let mut vals: Vec<(u16, u8)> = Vec::new();
        for o in others {
            // Indexes are below HLL_REGISTERS = 2^14.
            sparse::for_each_value(&o.bytes[HLL_HDR_SIZE..], |i, v| vals.push((i as u16, v)));
        }
        // Highest value first within an index, then one entry per index.
        vals.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        vals.dedup_by_key(|e| e.0);
        let mut changed = false;
        let mut cursor = Cursor::default();
        for (i, v) in vals {
            changed |= if self.is_sparse() {
                self.sparse_set(usize::from(i), v, &mut cursor)
            } else {
                dense::set_if_greater(&mut self.bytes[HLL_HDR_SIZE..], usize::from(i), v)
            };
        }
        if changed {
            self.invalidate_cache();
        }
    }

    /// `PFMERGE self self o1 o2 ...`.
    ///
    /// As in Redis, the result is dense if `self` or any source is dense;
    /// otherwise the missing registers are set one by one in index order
    /// through the sparse update (which may still promote to dense). The
    /// cached cardinality is always marked stale.
    pub fn merge_many(&mut self, others: &[&Hll]) {
        let use_dense = !self.is_sparse() || others.iter().any(|o| !o.is_sparse());
        if use_dense {
            self.promote();
            let regs = &mut self.bytes[HLL_HDR_SIZE..];
            if let [one] = others
                && !one.is_sparse()
            {
                dense::merge_packed(regs, &one.bytes[HLL_HDR_SIZE..]);
                self.invalidate_cache();
                return;
            }
            if others.iter().all(|o| o.is_sparse()) {
                // Only the registers listed in VAL opcodes can raise anything.
                for o in others {
                    sparse::for_each_value(&o.bytes[HLL_HDR_SIZE..], |i, v| {
                        dense::set_if_greater(regs, i, v);
                    });
                }
            } else {
                let mut max = Box::new([0u8; HLL_REGISTERS]);
                for o in others {
                    o.max_into(&mut max);
                }
                dense::merge_unpacked(regs, &max);
            }
        } else {
            let mut max = Box::new([0u8; HLL_REGISTERS]);
            for o in others {
                o.max_into(&mut max);
            }
            // Registers where a source is not above `self` would be no-ops
            // in Redis's hllSparseSet, so only the raised ones are visited.
            let mut mine = Box::new([0u8; HLL_REGISTERS]);
            self.max_into(&mut mine);
            let mut cursor = Cursor::default();
            for i in 0..HLL_REGISTERS {
                if max[i] <= mine[i] {
                    continue;
                }
                if self.is_sparse() {
                    self.sparse_set(i, max[i], &mut cursor);
                } else {
                    dense::set_if_greater(&mut self.bytes[HLL_HDR_SIZE..], i, max[i]);
                }
            }
        }
        self.invalidate_cache();
    }

    /// Multi-key `PFCOUNT k1 k2 ...`: cardinality of the union, without
    /// modifying any sketch. With a single sketch this is `PFCOUNT key`
    /// (using its cached value if valid); with none it is 0.
    pub fn union_count(sketches: &[&Hll]) -> u64 {
        match sketches {
            [] => 0,
            [one] => one.estimate(),
            many => {
                let mut max = Box::new([0u8; HLL_REGISTERS]);
                for s in many {
                    s.max_into(&mut max);
                }
                estimate::estimate(&dense::histogram_raw(&max))
            }
        }
    }

    /// The exact Redis string value (`GET key`).
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Owned copy of [`Hll::as_bytes`].
    pub fn to_bytes(&self) -> Vec<u8> {
        self.bytes.to_vec()
    }

    /// Consumes the sketch, returning its byte image.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes.into_vec()
    }

    /// Parses a Redis HyperLogLog string value, with the default sparse limit.
    pub fn from_bytes(bytes: &[u8]) -> Result<Hll, HllError> {
        Hll::from_bytes_with_sparse_max(bytes, DEFAULT_SPARSE_MAX_BYTES)
    }

    /// Parses a Redis HyperLogLog string value.
    ///
    /// Accepts exactly what Redis accepts as a HyperLogLog and can operate on
    /// (magic, encoding 0 or 1, dense length 12304) and additionally checks a
    /// sparse image's opcodes up front: they must cover exactly 16384
    /// registers. The three unused header bytes and the cached cardinality
    /// are preserved as they are, so `to_bytes` returns the input unchanged.
    pub fn from_bytes_with_sparse_max(bytes: &[u8], max: usize) -> Result<Hll, HllError> {
        if bytes.len() < HLL_HDR_SIZE {
            return Err(HllError::TooShort { len: bytes.len() });
        }
        if &bytes[..4] != MAGIC {
            return Err(HllError::BadMagic);
        }
        match bytes[4] {
            ENC_DENSE => {
                if bytes.len() != HLL_DENSE_SIZE {
                    return Err(HllError::WrongLength {
                        expected: HLL_DENSE_SIZE,
                        actual: bytes.len(),
                    });
                }
            }
            ENC_SPARSE => {
                sparse::validate(&bytes[HLL_HDR_SIZE..]).map_err(|e| match e {
                    sparse::SparseFault::TruncatedOpcode { offset } => HllError::TruncatedSparse {
                        offset: offset + HLL_HDR_SIZE,
                    },
                    sparse::SparseFault::TooManyRegisters { covered } => {
                        HllError::CorruptSparse { covered }
                    }
                    sparse::SparseFault::TooFewRegisters { covered } => {
                        HllError::CorruptSparse { covered }
                    }
                })?;
            }
            other => return Err(HllError::BadEncoding(other)),
        }
        Ok(Hll {
            bytes: Image::from_slice(bytes),
            sparse_max: max,
        })
    }

    /// `true` while the sketch uses the sparse encoding.
    #[inline]
    pub fn is_sparse(&self) -> bool {
        self.bytes[4] == ENC_SPARSE
    }

    /// Length of the byte image (`STRLEN key`).
    #[inline]
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }
}

impl serde::Serialize for Hll {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.bytes)
    }
}

impl<'de> serde::Deserialize<'de> for Hll {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Hll;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a Redis HyperLogLog byte image")
            }

            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Hll, E> {
                Hll::from_bytes(v).map_err(E::custom)
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Hll, A::Error> {
                let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(HLL_DENSE_SIZE));
                while let Some(b) = seq.next_element::<u8>()? {
                    v.push(b);
                }
                Hll::from_bytes(&v).map_err(serde::de::Error::custom)
            }
        }
        deserializer.deserialize_bytes(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sketch::INLINE_IMAGE;

    /// A hash whose register is `index` and whose value is `count`
    /// (1..=51), the bits above it from `noise`.
    fn hash_of(index: usize, count: u8, noise: u64) -> u64 {
        let bit = HLL_P + u32::from(count) - 1;
        let above = noise.checked_shl(bit + 1).unwrap_or(0);
        let marker = if count <= 50 { 1u64 << bit } else { 0 };
        above | marker | index as u64
    }

    proptest::proptest! {
        #![proptest_config(crate::sketch::proptest_config(96, 0x4f52_4143_4c45))]

        /// `add_hash` with the eight-at-a-time scan and with the scan it
        /// replaced (`sparse::SET_ORACLE`): after every insert of a random
        /// sequence the two images are the same bytes and the "changed"
        /// answers agree, through the promotion to dense (by size, at a
        /// random `hll-sparse-max-bytes`, or by a value above 32).
        #[test]
        fn sparse_scan_matches_the_oracle_insert_by_insert(
            seed in 1u64..,
            inserts in 1usize..2500,
            base in 0usize..HLL_REGISTERS,
            spread in 1usize..=HLL_REGISTERS,
            small_values in proptest::bool::ANY,
            sparse_max in proptest::prop_oneof![
                proptest::strategy::Just(DEFAULT_SPARSE_MAX_BYTES),
                20usize..DEFAULT_SPARSE_MAX_BYTES,
            ],
        ) {
            let mut rng = seed;
            let mut next = move || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let mut fast = Hll::with_sparse_max_bytes(sparse_max);
            let mut oracle = fast.clone();
            for step in 0..inserts {
                let index = (base + next() as usize % spread) % HLL_REGISTERS;
                let hash = if next() % 997 == 0 {
                    hash_of(index, 33 + (next() % 19) as u8, next())
                } else if small_values {
                    hash_of(index, 1 + (next() % 4) as u8, next())
                } else {
                    // Bits above the index as an element's hash has them.
                    (next() & !HLL_P_MASK) | index as u64
                };
                let changed = fast.add_hash(hash);
                let expected = oracle.add_hash_by(sparse::SET_ORACLE, hash);
                proptest::prop_assert_eq!(changed, expected, "step {}", step);
                proptest::prop_assert_eq!(fast.as_bytes(), oracle.as_bytes(), "step {}", step);
            }
            proptest::prop_assert_eq!(fast.estimate(), oracle.estimate());
        }
    }

    /// A dense sketch shrunk back to sparse keeps every register and the
    /// header; one whose registers do not fit stays dense.
    #[test]
    fn dense_from_the_start_and_back_to_sparse() {
        let mut sparse = Hll::new();
        let mut dense = Hll::new_dense();
        assert!(!dense.is_sparse());
        assert_eq!(dense.estimate(), sparse.estimate());
        for i in 0..3000u64 {
            let e = i.to_le_bytes();
            assert_eq!(dense.add(&e), sparse.add(&e));
            assert_eq!(dense.registers(), sparse.registers());
            if i % 97 == 0 || i < 40 {
                assert_eq!(dense.estimate(), sparse.estimate());
                match dense.to_sparse() {
                    Some(back) => {
                        assert!(back.is_sparse());
                        assert_eq!(back.registers(), dense.registers());
                        assert_eq!(
                            back.as_bytes()[5..HLL_HDR_SIZE],
                            dense.as_bytes()[5..HLL_HDR_SIZE]
                        );
                        assert_eq!(back.estimate(), sparse.estimate());
                        assert!(Hll::from_bytes(back.as_bytes()).is_ok());
                    }
                    None => assert!(i > 500, "{i} registers would fit"),
                }
            }
        }
        assert!(!sparse.is_sparse() && dense.to_sparse().is_none());
        let mut counted = Hll::new_dense();
        counted.add(b"x");
        let c = counted.count();
        let back = counted.to_sparse().expect("one register fits");
        assert_eq!(back.as_bytes()[8..16], c.to_le_bytes());
    }

    /// Sketches of up to two registers hold their image inline; longer
    /// ones move it to the heap, and every image reads back (and parses)
    /// the same whichever way it is held.
    #[test]
    fn small_images_stay_inline_and_read_back_the_same() {
        assert_eq!(std::mem::size_of::<Hll>(), 40);
        let mut h = Hll::new();
        assert!(!h.bytes.spilled());
        let mut n = 0u64;
        for i in 0..2000u64 {
            if h.add(&i.to_le_bytes()) {
                n += 1;
            }
            if n <= 2 {
                assert!(!h.bytes.spilled(), "{n} registers: {} bytes", h.byte_len());
            }
            let back = Hll::from_bytes(h.as_bytes()).unwrap();
            assert_eq!(back.as_bytes(), h.as_bytes());
            assert_eq!(back.bytes.spilled(), h.byte_len() > INLINE_IMAGE);
            assert_eq!(h.clone().into_bytes(), h.to_bytes());
        }
        assert!(!h.is_sparse() && h.bytes.spilled());
        assert!((1900..2100).contains(&h.count()));
    }
}
