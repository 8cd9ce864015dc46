//! Sparse encoding: a run-length sequence of opcodes after the 16-byte header.
//!
//! * `ZERO`  `00xxxxxx`          — `xxxxxx + 1` (1..=64) zero registers;
//! * `XZERO` `01xxxxxx yyyyyyyy` — `(xxxxxx << 8 | yyyyyyyy) + 1` (1..=16384)
//!   zero registers;
//! * `VAL`   `1vvvvvxx`          — `xx + 1` (1..=4) registers of value
//!   `vvvvv + 1` (1..=32).
//!
//! A valid sequence covers exactly 16384 registers. [`set`] reproduces
//! Redis's in-place update (`hllSparseSet`) step by step — including which
//! neighbouring `VAL` opcodes get merged afterwards — because the resulting
//! bytes, not only the register values, must match Redis.

use super::{HLL_HDR_SIZE, HLL_REGISTERS, Image};

mod scan;

#[cfg(test)]
use scan::find_bytewise;
use scan::{Found, find};

pub(crate) const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;

#[inline(always)]
fn is_zero(b: u8) -> bool {
    b & 0xc0 == 0
}

#[inline(always)]
fn is_xzero(b: u8) -> bool {
    b & 0xc0 == 0x40
}

#[inline(always)]
fn zero_len(b: u8) -> usize {
    usize::from(b & 0x3f) + 1
}

#[inline(always)]
fn xzero_len(b0: u8, b1: u8) -> usize {
    ((usize::from(b0 & 0x3f) << 8) | usize::from(b1)) + 1
}

#[inline(always)]
fn val_value(b: u8) -> u8 {
    ((b >> 2) & 0x1f) + 1
}

#[inline(always)]
fn val_len(b: u8) -> usize {
    usize::from(b & 3) + 1
}

#[inline(always)]
fn val_op(value: u8, len: usize) -> u8 {
    debug_assert!((1..=VAL_MAX_VALUE).contains(&value) && (1..=VAL_MAX_LEN).contains(&len));
    0x80 | ((value - 1) << 2) | (len - 1) as u8
}

/// Appends the shortest zero-run opcode for `len` (1..=16384) registers.
#[inline(always)]
fn push_zero_run(seq: &mut [u8; 5], n: &mut usize, len: usize) {
    if len > ZERO_MAX_LEN {
        let l = len - 1;
        seq[*n] = 0x40 | (l >> 8) as u8;
        seq[*n + 1] = (l & 0xff) as u8;
        *n += 2;
    } else {
        seq[*n] = (len - 1) as u8;
        *n += 1;
    }
}

/// The opcode stream of an empty sketch: one XZERO covering all registers.
pub(crate) const EMPTY_OPCODES: [u8; 2] = [0x7f, 0xff];

/// One decoded opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// A run of zero registers (ZERO or XZERO).
    Zeros(usize),
    /// A run of `len` registers holding `value`.
    Val { value: u8, len: usize },
}

/// Iterator over the opcodes of a *validated* opcode stream.
pub(crate) struct Ops<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Ops<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Ops { data, pos: 0 }
    }
}

impl Iterator for Ops<'_> {
    type Item = Op;

    #[inline]
    fn next(&mut self) -> Option<Op> {
        let b = *self.data.get(self.pos)?;
        if b & 0x80 != 0 {
            self.pos += 1;
            Some(Op::Val {
                value: val_value(b),
                len: val_len(b),
            })
        } else if is_zero(b) {
            self.pos += 1;
            Some(Op::Zeros(zero_len(b)))
        } else {
            let b1 = *self.data.get(self.pos + 1)?;
            self.pos += 2;
            Some(Op::Zeros(xzero_len(b, b1)))
        }
    }
}

/// Why an opcode stream is not a valid sparse register set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SparseFault {
    /// An XZERO opcode's second byte is missing.
    TruncatedOpcode { offset: usize },
    /// The opcodes cover more than 16384 registers (`covered` counts up to
    /// and including the opcode that overflowed).
    TooManyRegisters { covered: usize },
    /// The opcodes cover fewer than 16384 registers.
    TooFewRegisters { covered: usize },
}

/// Checks that `data` (the bytes after the header) is a complete opcode
/// stream covering exactly 16384 registers.
pub(crate) fn validate(data: &[u8]) -> Result<(), SparseFault> {
    let mut pos = 0;
    let mut covered = 0usize;
    while pos < data.len() {
        let b = data[pos];
        let (span, oplen) = if b & 0x80 != 0 {
            (val_len(b), 1)
        } else if is_zero(b) {
            (zero_len(b), 1)
        } else {
            match data.get(pos + 1) {
                Some(&b1) => (xzero_len(b, b1), 2),
                None => return Err(SparseFault::TruncatedOpcode { offset: pos }),
            }
        };
        covered += span;
        if covered > HLL_REGISTERS {
            return Err(SparseFault::TooManyRegisters { covered });
        }
        pos += oplen;
    }
    if covered != HLL_REGISTERS {
        return Err(SparseFault::TooFewRegisters { covered });
    }
    Ok(())
}

/// Histogram of register values of a validated opcode stream.
pub(crate) fn histogram(data: &[u8]) -> [u32; 64] {
    let mut h = [0u32; 64];
    for op in Ops::new(data) {
        match op {
            Op::Zeros(n) => h[0] += n as u32,
            Op::Val { value, len } => h[usize::from(value)] += len as u32,
        }
    }
    h
}

/// `max[i] = max(max[i], register i)` for a validated opcode stream.
pub(crate) fn max_into(data: &[u8], max: &mut [u8; HLL_REGISTERS]) {
    let mut idx = 0usize;
    for op in Ops::new(data) {
        match op {
            Op::Zeros(n) => idx += n,
            Op::Val { value, len } => {
                for m in &mut max[idx..idx + len] {
                    if value > *m {
                        *m = value;
                    }
                }
                idx += len;
            }
        }
    }
}

/// Calls `f(index, value)` for every non-zero register of a validated
/// opcode stream, in index order.
#[inline]
pub(crate) fn for_each_value(data: &[u8], mut f: impl FnMut(usize, u8)) {
    let mut idx = 0usize;
    for op in Ops::new(data) {
        match op {
            Op::Zeros(n) => idx += n,
            Op::Val { value, len } => {
                for i in idx..idx + len {
                    f(i, value);
                }
                idx += len;
            }
        }
    }
}

/// Writes the registers of a validated opcode stream into a zeroed dense
/// register area.
pub(crate) fn to_dense_registers(data: &[u8], regs: &mut [u8]) {
    for_each_value(data, |i, v| super::dense::set(regs, i, v));
}

/// Position of an opcode: byte offset in the image and first register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OpPos {
    off: usize,
    first: usize,
}

/// Where to resume scanning when registers are set in increasing order
/// (as PFMERGE does). Starting from the image's first opcode is always
/// correct; a resumed scan starts at an opcode that the previous update
/// provably left untouched and that lies strictly before any opcode a later
/// (higher) index can fall into, so it finds the same opcode *and* the same
/// predecessor as a full scan would.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Cursor {
    /// Opcode to start at; `None` means the first opcode.
    start: Option<OpPos>,
    /// An untouched opcode strictly before `start`, if known.
    before: Option<OpPos>,
}

/// Result of [`set`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetOutcome {
    /// The register already held a value >= the requested one.
    Unchanged,
    /// The opcode stream was updated in place.
    Changed,
    /// The update needs the dense encoding (value > 32, or the stream would
    /// grow beyond the sparse size limit). Nothing was modified.
    Promote,
}

/// The signature of [`set`] (and of the tests' oracle, `SET_ORACLE`).
pub(crate) type SparseSet = fn(&mut Image, usize, usize, u8, &mut Cursor) -> SetOutcome;

/// Redis's `hllSparseSet`: raise register `index` to `count` in the sparse
/// image `img` (header included), growing it in place.
///
/// `cursor` must be `Cursor::default()` unless the previous call on this
/// image used the same cursor with a lower `index` (and the image was not
/// modified in between).
pub(crate) fn set(
    img: &mut Image,
    sparse_max: usize,
    index: usize,
    count: u8,
    cursor: &mut Cursor,
) -> SetOutcome {
    set_by(find, img, sparse_max, index, count, cursor)
}

/// [`set`] with the scan it had before [`find`] read eight bytes at a
/// time ([`find_bytewise`]): the oracle the tests compare [`set`] with.
#[cfg(test)]
pub(crate) const SET_ORACLE: SparseSet = |img, sparse_max, index, count, cursor| {
    set_by(find_bytewise, img, sparse_max, index, count, cursor)
};

/// The scan [`set_by`] runs to find the opcode covering a register.
type Scan = fn(&[u8], usize, Option<OpPos>) -> Option<Found>;

/// [`set`] with the opcode scan `find`.
#[inline(always)]
fn set_by(
    find: Scan,
    img: &mut Image,
    sparse_max: usize,
    index: usize,
    count: u8,
    cursor: &mut Cursor,
) -> SetOutcome {
    if count > VAL_MAX_VALUE {
        return SetOutcome::Promote;
    }

    // Step 1: find the opcode covering `index`, remembering up to two
    // predecessors.
    let Some(mut found) = find(img, index, cursor.start) else {
        // Impossible for a validated image.
        debug_assert!(false, "sparse index {index} beyond the opcode stream");
        return SetOutcome::Unchanged;
    };

    // A resumed scan must never stop at its start opcode (its predecessor is
    // unknown); that only happens if indices were not increasing, in which
    // case fall back to a full scan.
    if cursor.start.is_some() && found.prev.is_none() {
        *cursor = Cursor::default();
        let Some(full) = find(img, index, None) else {
            debug_assert!(false, "sparse index {index} beyond the opcode stream");
            return SetOutcome::Unchanged;
        };
        found = full;
    }
    let next_cursor = cursor.after(found.prev2);

    // Steps 2 and 3: the register takes its new value.
    match write(img, sparse_max, &found, index, count) {
        SetOutcome::Changed => {}
        unchanged_or_promote => return unchanged_or_promote,
    }

    // Step 4: merge adjacent VAL opcodes with equal values, scanning at most
    // five opcodes starting from the predecessor.
    merge_vals(img, found.prev.map_or(HLL_HDR_SIZE, |p| p.off));

    *cursor = next_cursor;
    SetOutcome::Changed
}

impl Cursor {
    /// The cursor for a later call with a higher index, after a call that
    /// started at this one and passed `prev2` (the opcode before the
    /// found opcode's predecessor): an opcode strictly before that
    /// predecessor, as everything strictly before it is left untouched.
    #[inline(always)]
    fn after(&self, prev2: Option<OpPos>) -> Cursor {
        match (self.start, prev2) {
            (None, None) => Cursor::default(),
            (None, Some(pp)) => Cursor {
                start: Some(pp),
                before: None,
            },
            (Some(s), Some(pp)) if pp.off == s.off => Cursor {
                start: Some(pp),
                before: self.before,
            },
            (Some(s), Some(pp)) => Cursor {
                start: Some(pp),
                before: Some(s),
            },
            // Only the start opcode was passed, so it is `prev` and may change.
            (Some(_), None) => Cursor {
                start: self.before,
                before: None,
            },
        }
    }
}

/// Steps 2 and 3: register `index`, in the opcode `f`, becomes `count`:
/// in place when the opcode covers only it, else by replacing the opcode
/// with up to three. `Unchanged` if it already held `count` or more;
/// `Promote` (nothing modified) if the image would outgrow `sparse_max`.
#[inline(always)]
fn write(img: &mut Image, sparse_max: usize, f: &Found, index: usize, count: u8) -> SetOutcome {
    let b = img[f.p];
    let is_val = b & 0x80 != 0;
    if is_val && val_value(b) >= count {
        return SetOutcome::Unchanged;
    }
    // Step 2: the cheap in-place cases.
    if f.span == 1 && (is_val || !is_xzero(b)) {
        img[f.p] = val_op(count, 1);
        return SetOutcome::Changed;
    }
    // Step 3: replace the old opcode by the new sequence.
    let (seq, n) = split(b, f.first, f.span, index, count);
    replace(img, sparse_max, f.p, f.oplen, &seq[..n])
}

/// The opcodes that replace opcode `b` (covering `span` registers from
/// `first`) once register `index` holds `count`: up to three, in the
/// first `n` of 5 bytes.
#[inline(always)]
fn split(b: u8, first: usize, span: usize, index: usize, count: u8) -> ([u8; 5], usize) {
    let mut seq = [0u8; 5];
    let mut n = 0usize;
    let last = first + span - 1;
    if b & 0x80 == 0 {
        if index != first {
            push_zero_run(&mut seq, &mut n, index - first);
        }
        seq[n] = val_op(count, 1);
        n += 1;
        if index != last {
            push_zero_run(&mut seq, &mut n, last - index);
        }
    } else {
        let cur = val_value(b);
        if index != first {
            seq[n] = val_op(cur, index - first);
            n += 1;
        }
        seq[n] = val_op(count, 1);
        n += 1;
        if index != last {
            seq[n] = val_op(cur, last - index);
            n += 1;
        }
    }
    (seq, n)
}

/// Replaces the `oplen` bytes at `p` by `seq`, moving the rest of the
/// stream; `Promote` (nothing modified) if the image would outgrow
/// `sparse_max`.
#[inline(always)]
fn replace(img: &mut Image, sparse_max: usize, p: usize, oplen: usize, seq: &[u8]) -> SetOutcome {
    let end = img.len();
    let seqlen = seq.len();
    if seqlen > oplen && end + (seqlen - oplen) > sparse_max {
        return SetOutcome::Promote;
    }
    let tail = p + oplen;
    if seqlen > oplen {
        img.resize(end + seqlen - oplen, 0);
        img.copy_within(tail..end, p + seqlen);
    } else if seqlen < oplen {
        img.copy_within(tail..end, p + seqlen);
        img.truncate(end - (oplen - seqlen));
    }
    img[p..p + seqlen].copy_from_slice(seq);
    SetOutcome::Changed
}

/// Step 4: merges adjacent VAL opcodes with equal values, scanning at most
/// five opcodes from `q`.
#[inline(always)]
fn merge_vals(img: &mut Image, mut q: usize) {
    let mut end = img.len();
    let mut scan = 5;
    while q < end {
        if scan == 0 {
            break;
        }
        scan -= 1;
        let b = img[q];
        if is_xzero(b) {
            q += 2;
            continue;
        }
        if is_zero(b) {
            q += 1;
            continue;
        }
        if q + 1 < end {
            let b1 = img[q + 1];
            if b1 & 0x80 != 0 && val_value(b) == val_value(b1) {
                let len = val_len(b) + val_len(b1);
                if len <= VAL_MAX_LEN {
                    img[q + 1] = val_op(val_value(b), len);
                    img.copy_within(q + 1..end, q);
                    end -= 1;
                    img.truncate(end);
                    continue;
                }
            }
        }
        q += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn empty_image() -> Image {
        let mut v = Image::from_slice(b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0");
        v.extend_from_slice(&EMPTY_OPCODES);
        v
    }

    fn registers(img: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(HLL_REGISTERS);
        for op in Ops::new(&img[HLL_HDR_SIZE..]) {
            match op {
                Op::Zeros(n) => out.extend(std::iter::repeat_n(0, n)),
                Op::Val { value, len } => out.extend(std::iter::repeat_n(value, len)),
            }
        }
        out
    }

    pub(super) struct Rng(pub(super) u64);
    impl Rng {
        pub(super) fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn empty_image_is_valid() {
        let img = empty_image();
        assert_eq!(validate(&img[HLL_HDR_SIZE..]), Ok(()));
        assert_eq!(histogram(&img[HLL_HDR_SIZE..])[0], HLL_REGISTERS as u32);
    }

    #[test]
    fn first_set_splits_xzero() {
        let mut img = empty_image();
        let r = set(&mut img, 3000, 1000, 3, &mut Cursor::default());
        assert_eq!(r, SetOutcome::Changed);
        // XZERO(1000) VAL(3,1) XZERO(15383)
        let l2 = 15383 - 1;
        assert_eq!(
            &img[HLL_HDR_SIZE..],
            &[
                0x40 | (999 >> 8) as u8,
                (999 & 0xff) as u8,
                0x80 | (2 << 2),
                0x40 | (l2 >> 8) as u8,
                (l2 & 0xff) as u8
            ]
        );
        assert_eq!(
            set(&mut img, 3000, 1000, 2, &mut Cursor::default()),
            SetOutcome::Unchanged
        );
        assert_eq!(
            set(&mut img, 3000, 1000, 33, &mut Cursor::default()),
            SetOutcome::Promote
        );
    }

    #[test]
    fn neighbouring_equal_values_merge() {
        let mut img = empty_image();
        for i in 10..14 {
            assert_eq!(
                set(&mut img, 3000, i, 5, &mut Cursor::default()),
                SetOutcome::Changed
            );
        }
        // ZERO(10) (a run of 10 fits the one-byte opcode), VAL(5,4), XZERO.
        assert_eq!(img[HLL_HDR_SIZE], 9);
        assert_eq!(img[HLL_HDR_SIZE + 1], val_op(5, 4));
        assert_eq!(validate(&img[HLL_HDR_SIZE..]), Ok(()));
    }

    #[test]
    fn size_limit_promotes_without_modifying() {
        let mut img = empty_image();
        let before = img.clone();
        // 18 bytes now; splitting in the middle needs 3 more bytes.
        assert_eq!(
            set(&mut img, 20, 5000, 1, &mut Cursor::default()),
            SetOutcome::Promote
        );
        assert_eq!(img, before);
        assert_eq!(
            set(&mut img, 21, 5000, 1, &mut Cursor::default()),
            SetOutcome::Changed
        );
    }

    #[test]
    fn shrinking_replacement_of_short_xzero() {
        // A non-canonical XZERO of length 1 replaced by a single VAL.
        let mut img = Image::from_slice(b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0");
        img.extend_from_slice(&[0x40, 0x00, 0x7f, 0xfe]);
        assert_eq!(validate(&img[HLL_HDR_SIZE..]), Ok(()));
        assert_eq!(
            set(&mut img, 3000, 0, 7, &mut Cursor::default()),
            SetOutcome::Changed
        );
        assert_eq!(&img[HLL_HDR_SIZE..], &[val_op(7, 1), 0x7f, 0xfe]);
    }

    /// Sets registers in increasing order with and without a cursor, from
    /// many random starting images; the bytes must be identical every step.
    #[test]
    fn cursor_scan_equals_full_scan() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..16 {
            let mut base = empty_image();
            let fill = (rng.next() % 900) as usize;
            let spread = 1 + (rng.next() % 16384) as usize;
            for _ in 0..fill {
                let i = (rng.next() as usize) % spread;
                let v = 1 + (rng.next() % 4) as u8;
                set(&mut base, usize::MAX, i, v, &mut Cursor::default());
            }
            let mut a = base.clone();
            let mut b = base.clone();
            let mut cur = Cursor::default();
            let max = if round % 3 == 0 { usize::MAX } else { 1500 };
            let dense_prob = 1 + rng.next() % 8;
            for i in 0..HLL_REGISTERS {
                if rng.next() % 64 >= dense_prob * (1 + (i % 7) as u64) {
                    continue;
                }
                let v = 1 + (rng.next() % 6) as u8;
                let ra = set(&mut a, max, i, v, &mut Cursor::default());
                let rb = set(&mut b, max, i, v, &mut cur);
                assert_eq!(ra, rb, "round {round} index {i}");
                assert_eq!(a, b, "round {round} index {i}");
                if ra == SetOutcome::Promote {
                    break;
                }
            }
            assert_eq!(validate(&a[HLL_HDR_SIZE..]), Ok(()));
            let regs = registers(&a);
            assert_eq!(regs.len(), HLL_REGISTERS);
        }
    }
}
