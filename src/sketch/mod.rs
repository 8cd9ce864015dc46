//! HyperLogLog distinct counting, byte-for-byte compatible with Redis.
//!
//! An [`Hll`] *is* the string value Redis stores for a HyperLogLog key:
//! `GET key` on a Redis server and [`Hll::as_bytes`] are identical after the
//! same `PFADD` / `PFCOUNT` / `PFMERGE` operations, so sketches can be moved
//! between hotrank and Redis (`SET key <bytes>`) in either direction and
//! serialising a sketch is free.
//!
//! # Hashing and registers
//!
//! * An element is hashed with MurmurHash64A, seed `0xadc83b19`
//!   ([`murmur64a`], [`HLL_SEED`]); eight-byte blocks are read
//!   little-endian.
//! * There are 16384 registers (precision P = 14). The register index is the
//!   low 14 bits of the hash. The remaining 50 bits, with bit 50 set as a
//!   sentinel, give the value: number of trailing zero bits plus one
//!   (1..=51). A register keeps the maximum value it has seen.
//!
//! # Image layout
//!
//! A 16-byte header followed by the registers:
//!
//! | bytes  | content |
//! |--------|---------|
//! | 0..4   | magic `HYLL` |
//! | 4      | encoding: 0 = dense, 1 = sparse |
//! | 5..8   | unused (zero when Redis creates the key; preserved otherwise) |
//! | 8..16  | cached cardinality, `u64` little-endian; if the most significant bit of byte 15 is set the cache is stale |
//!
//! **Dense**: 16384 six-bit registers packed least-significant-bit first
//! (register `i` occupies bits `6i..6i+6` of the little-endian bit stream),
//! 12288 bytes, 12304 bytes in total ([`HLL_DENSE_SIZE`]).
//!
//! **Sparse**: run-length opcodes that together cover exactly 16384
//! registers:
//!
//! | opcode | bits | meaning |
//! |--------|------|---------|
//! | ZERO   | `00xxxxxx` | `xxxxxx + 1` (1..=64) zero registers |
//! | XZERO  | `01xxxxxx yyyyyyyy` | `xxxxxxyyyyyyyy + 1` (1..=16384) zero registers |
//! | VAL    | `1vvvvvxx` | `xx + 1` (1..=4) registers of value `vvvvv + 1` (1..=32) |
//!
//! A new sketch is sparse: a header whose cache is marked stale followed by
//! one XZERO covering all registers (`7f ff`), 18 bytes. Updates rewrite the
//! opcode stream in place exactly as Redis does (splitting the run that
//! holds the register into at most three opcodes, then merging equal
//! neighbouring VAL opcodes in a window of five opcodes from the one before).
//! The sketch becomes dense when a value above 32 must be stored or when an
//! update would make the image longer than `hll-sparse-max-bytes` (3000 by
//! default, [`DEFAULT_SPARSE_MAX_BYTES`]; see [`Hll::with_sparse_max_bytes`]).
//!
//! # Counting and caching
//!
//! [`Hll::count`] is `PFCOUNT key`: it returns the cached cardinality when
//! valid, otherwise computes Otmar Ertl's improved raw estimate from the
//! register histogram (the σ/τ series Redis ≥ 5.0 uses) and writes it into
//! the header. An `add` that changes a register only sets the stale bit
//! (byte 15, bit 7), leaving the other cache bytes as they were — as Redis
//! does — so images stay identical. [`Hll::estimate`] gives the same number
//! without writing the cache; [`Hll::union_count`] is multi-key `PFCOUNT`.
//!
//! # Merging
//!
//! [`Hll::merge`] is `PFMERGE self self other`: the register-wise maximum.
//! The result is dense if either input is dense; otherwise registers are
//! raised one by one through the sparse update, which may still promote to
//! dense. The cache is always marked stale afterwards.
//!
//! # Parsing untrusted images
//!
//! [`Hll::from_bytes`] never panics. It accepts what Redis accepts as a
//! HyperLogLog value (magic, encoding 0 or 1, dense length exactly 12304;
//! unused header bytes, any cached value and dense register values up to 63
//! are kept verbatim) and, unlike Redis, checks a sparse image up front: its
//! opcodes must cover exactly 16384 registers. (Redis accepts such a value
//! on `SET` and reports it as corrupt only when an operation reaches the bad
//! part.)
//!
//! # Serde
//!
//! `Hll` serialises as its byte image (`serialize_bytes`); deserialising
//! validates it with [`Hll::from_bytes`] (so the sparse limit of a
//! deserialised sketch is the default one).

mod dense;
mod estimate;
mod hll;
mod murmur;
mod sparse;

pub use hll::{DEFAULT_SPARSE_MAX_BYTES, HLL_DENSE_SIZE, Hll, HllError};
pub use murmur::{HLL_SEED, murmur64a};

/// Number of registers (2^14).
pub const HLL_REGISTERS: usize = 16384;

/// Size of the header ("HYLL", encoding, 3 unused bytes, cached cardinality).
pub(crate) const HLL_HDR_SIZE: usize = 16;

/// Image bytes held inside the sketch itself: the empty image (18 bytes)
/// and one or two registers (21–24), what most of an article's sketches
/// hold (one per hour, one for its lifetime). Longer images are on the
/// heap, as a `Vec` would hold them.
pub(crate) const INLINE_IMAGE: usize = 24;
pub(crate) type Image = smallvec::SmallVec<[u8; INLINE_IMAGE]>;

/// The sketch's proptests' configuration: `cases` cases from the fixed
/// `seed` (`PROPTEST_RNG_SEED` picks another), no failure files written.
#[cfg(test)]
pub(crate) fn proptest_config(cases: u32, seed: u64) -> proptest::test_runner::Config {
    let mut c = proptest::test_runner::Config::with_cases(cases);
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = proptest::test_runner::RngSeed::Fixed(seed);
    }
    c.failure_persistence = None;
    c
}
