//! Finding the opcode that covers a register in a sparse image: the scan
//! [`super::set`] starts with. Eight bytes at a time where they are
//! one-byte opcodes (SWAR), one opcode at a time elsewhere; the scan it
//! replaced stays as the tests' oracle ([`find_bytewise`]).

use super::super::HLL_HDR_SIZE;
use super::{OpPos, is_zero, val_len, xzero_len, zero_len};

/// The opcode that covers a register, as [`find`] found it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Found {
    /// Offset of the opcode.
    pub(super) p: usize,
    /// The first register it covers.
    pub(super) first: usize,
    /// Registers it covers.
    pub(super) span: usize,
    /// Its length in bytes (1 or 2).
    pub(super) oplen: usize,
    /// The opcode before it, and the one before that, if the scan passed them.
    pub(super) prev: Option<OpPos>,
    pub(super) prev2: Option<OpPos>,
}

/// Registers covered by the opcode at `p`, and its length in bytes.
#[inline(always)]
fn op_at(img: &[u8], p: usize) -> (usize, usize) {
    let b = img[p];
    if b & 0x80 != 0 {
        (val_len(b), 1)
    } else if is_zero(b) {
        (zero_len(b), 1)
    } else {
        (xzero_len(b, img[p + 1]), 2)
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;
const LOW_OF_PAIRS: u64 = 0x00ff_00ff_00ff_00ff;

/// Registers covered by the eight bytes of `w` (read little-endian), each
/// a one-byte opcode (ZERO or VAL).
#[inline(always)]
fn span_sum(w: u64) -> usize {
    // 0x03 in a VAL byte (top bit set), 0x3f in a ZERO byte.
    let mask = (ONES * 0x3f) ^ (((w & HIGH) >> 7) * 0x3c);
    // Each byte's span, 1..=64: no carry from one byte into the next.
    byte_sum((w & mask) + ONES)
}

/// Byte `i` of the result is 0xff where bit 7 of byte `i` of `flags` is
/// set (`flags` has no other bits).
#[inline(always)]
fn byte_mask(flags: u64) -> u64 {
    (flags >> 7) * 0xff
}

/// The sum of the eight bytes of `w`: neighbouring bytes added into four
/// 16-bit lanes (<= 510 each), the lanes summed into the top one.
#[inline(always)]
fn byte_sum(w: u64) -> usize {
    let pairs = (w & LOW_OF_PAIRS) + ((w >> 8) & LOW_OF_PAIRS);
    (pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48) as usize
}

/// [`span_sum`] for eight bytes that start an opcode and hold an XZERO
/// (`maybe_xzero`: bit 7 of each byte whose top bits are 01, an XZERO or
/// the second byte of one): the registers of the whole opcodes in them,
/// the bytes those take (7 when the last byte starts an XZERO, else 8),
/// and where the last two of those opcodes start.
#[inline(always)]
fn mixed_span_sum(w: u64, maybe_xzero: u64) -> (usize, usize, usize, usize) {
    // The first candidate is an XZERO; the byte after it is not an
    // opcode, so a candidate there is not one; and so on.
    let mut left = maybe_xzero;
    let mut xzero = 0u64;
    while left != 0 {
        let bit = left & left.wrapping_neg();
        xzero |= bit;
        left &= !(bit | (bit << 8));
    }
    let mut starts = HIGH & !(xzero << 8);
    let used = if xzero >> 63 != 0 {
        // Its second byte is in the next word: left for the next one.
        xzero &= !(1 << 63);
        starts &= !(1 << 63);
        7
    } else {
        8
    };
    let one_byte = byte_mask(starts & !xzero);
    let mask = (ONES * 0x3f) ^ (((w & HIGH) >> 7) * 0x3c);
    // One-byte opcodes' spans (<= 64), XZEROs' second bytes and a 1 in
    // each XZERO's first byte (its span is its 14 bits plus one), each in
    // its own byte; XZEROs' high six bits.
    let low = (((w & mask) + ONES) & one_byte) | (w & byte_mask(xzero << 8)) | (xzero >> 7);
    let high = w & byte_mask(xzero) & (ONES * 0x3f);
    let s = byte_sum(low) + (byte_sum(high) << 8);
    let last = 63 - starts.leading_zeros() as usize;
    let before_last = 63 - (starts & !(1 << last)).leading_zeros() as usize;
    (s, used, last / 8, before_last / 8)
}

/// Images from this length on are scanned eight bytes at a time; shorter
/// ones (a sketch of up to ~150 registers, mostly XZERO and VAL opcodes
/// in turn) one opcode at a time, which costs them fewer instructions.
const WORDS_FROM_BYTES: usize = 512;

/// No opcode offset (the scan has not passed one yet).
const NONE: usize = usize::MAX;

/// The opcode at `p` (from register `first`, `span` registers, `oplen`
/// bytes) with its predecessors at offsets `prev` and `prev2` ([`NONE`]:
/// not passed), each immediately before the next: their first registers
/// follow from the found opcode's.
#[inline(always)]
fn found_at(
    img: &[u8],
    (p, first, span, oplen): (usize, usize, usize, usize),
    prev: usize,
    prev2: usize,
) -> Found {
    let prev = (prev != NONE).then(|| OpPos {
        off: prev,
        first: first - op_at(img, prev).0,
    });
    let prev2 = prev.filter(|_| prev2 != NONE).map(|before| OpPos {
        off: prev2,
        first: before.first - op_at(img, prev2).0,
    });
    Found {
        p,
        first,
        span,
        oplen,
        prev,
        prev2,
    }
}

/// Scans from `start` (`None`: the first opcode) to the opcode covering
/// `index`; `None` if the stream ends first.
///
/// Eight bytes at a time where they are eight one-byte opcodes (ZERO,
/// VAL) all before `index`: their spans are summed in one word (SWAR). A
/// word with an XZERO in it, the word that holds `index` and the last
/// bytes are read one opcode at a time. The same opcode and predecessors
/// as [`find_bytewise`].
#[inline(always)]
pub(super) fn find(img: &[u8], index: usize, start: Option<OpPos>) -> Option<Found> {
    let (mut p, mut first) = match start {
        Some(s) => (s.off, s.first),
        None => (HLL_HDR_SIZE, 0),
    };
    // Offsets of the two opcodes this scan passed last (`NONE`: not yet).
    let mut prev = NONE;
    let mut prev2 = NONE;
    let end = img.len();
    let by_words = end >= WORDS_FROM_BYTES;
    loop {
        // Eight bytes at a time, until the bytes up to `until` are to be
        // read one opcode at a time.
        let until = loop {
            if !by_words || p + 8 > end {
                break end;
            }
            let w = u64::from_le_bytes(img[p..p + 8].try_into().expect("eight bytes"));
            // Top bits 01: maybe an XZERO (or the second byte of one).
            let xzero = (w << 1) & !w & HIGH;
            let (s, used, last, before_last) = if xzero == 0 {
                (span_sum(w), 8, 7, 6)
            } else {
                mixed_span_sum(w, xzero)
            };
            if index < first + s {
                // `index` is in one of these opcodes.
                break end;
            }
            prev2 = p + before_last;
            prev = p + last;
            p += used;
            first += s;
        };
        while p < until {
            let (span, oplen) = op_at(img, p);
            if index < first + span {
                return Some(found_at(img, (p, first, span, oplen), prev, prev2));
            }
            prev2 = prev;
            prev = p;
            p += oplen;
            first += span;
        }
        if p >= end {
            return None;
        }
    }
}

/// The scan [`find`] replaced, one opcode at a time: the tests' oracle.
#[cfg(test)]
pub(super) fn find_bytewise(img: &[u8], index: usize, start: Option<OpPos>) -> Option<Found> {
    let (mut p, mut first) = match start {
        Some(s) => (s.off, s.first),
        None => (HLL_HDR_SIZE, 0),
    };
    let mut prev: Option<OpPos> = None;
    let mut prev2: Option<OpPos> = None;
    let end = img.len();
    loop {
        if p >= end {
            return None;
        }
        let (span, oplen) = op_at(img, p);
        if index < first + span {
            return Some(Found {
                p,
                first,
                span,
                oplen,
                prev,
                prev2,
            });
        }
        prev2 = prev;
        prev = Some(OpPos { off: p, first });
        p += oplen;
        first += span;
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Rng, empty_image};
    use super::super::{Cursor, SET_ORACLE, VAL_MAX_VALUE};
    use super::*;
    use crate::sketch::HLL_REGISTERS;

    proptest::proptest! {
        #![proptest_config(crate::sketch::proptest_config(256, 0x5357_4152_2026))]

        /// The eight-at-a-time scan finds the same opcode, first register,
        /// span and predecessors as the one-at-a-time scan, from the first
        /// opcode and from a resumed start, on images of every density:
        /// `fill` random registers (values up to `top`) within `spread`
        /// registers from `base`, so runs of ZERO, XZERO and VAL opcodes of
        /// every length appear.
        #[test]
        fn swar_find_equals_bytewise_find(
            seed in 1u64..,
            fill in 0usize..2500,
            base in 0usize..HLL_REGISTERS,
            spread in 1usize..=HLL_REGISTERS,
            top in 1u8..=VAL_MAX_VALUE,
        ) {
            let mut rng = Rng(seed);
            let mut img = empty_image();
            for _ in 0..fill {
                let i = (base + rng.next() as usize % spread) % HLL_REGISTERS;
                let v = 1 + (rng.next() % u64::from(top)) as u8;
                SET_ORACLE(&mut img, usize::MAX, i, v, &mut Cursor::default());
            }
            for _ in 0..64 {
                let index = (base + rng.next() as usize % spread) % HLL_REGISTERS;
                let full = find_bytewise(&img, index, None);
                proptest::prop_assert_eq!(find(&img, index, None), full);
                // A resumed scan from the opcode of a lower register.
                let from = rng.next() as usize % (index + 1);
                let s = find_bytewise(&img, from, None).expect("covered");
                let start = Some(OpPos { off: s.p, first: s.first });
                proptest::prop_assert_eq!(
                    find(&img, index, start),
                    find_bytewise(&img, index, start)
                );
            }
            // Beyond the last register: both scans run off the end.
            proptest::prop_assert_eq!(find(&img, HLL_REGISTERS, None), None);
            proptest::prop_assert_eq!(find_bytewise(&img, HLL_REGISTERS, None), None);
        }
    }

    #[test]
    fn span_sum_counts_each_one_byte_opcode() {
        // ZERO(64), VAL(32,4), ZERO(1), VAL(1,1), ZERO(8), VAL(7,4), ZERO(33),
        // VAL(1,2): every span from 1 to 64 fits a byte.
        let bytes = [0x3f, 0xff, 0x00, 0x80, 0x07, 0x9b, 0x20, 0x81];
        let spans: Vec<usize> = (0..8).map(|p| op_at(&bytes, p).0).collect();
        assert_eq!(spans, [64, 4, 1, 1, 8, 4, 33, 2]);
        assert_eq!(
            span_sum(u64::from_le_bytes(bytes)),
            spans.iter().sum::<usize>()
        );
    }
}
