//! Dense encoding: 16384 six-bit registers packed least-significant-bit first
//! into 12288 bytes.
//!
//! Every group of four registers occupies exactly three bytes, so register
//! `i` lives in the little-endian 24-bit word at byte `3 * (i / 4)`, at bit
//! offset `6 * (i % 4)`. Working on those 3-byte groups (and on 6-byte groups
//! of eight registers for bulk operations) never reads past the end of the
//! register area, unlike the classic "two bytes at `6i / 8`" formulation.

use super::HLL_REGISTERS;

/// Bytes used by the packed registers.
pub(crate) const DENSE_REGISTER_BYTES: usize = HLL_REGISTERS * 6 / 8;

/// Value of register `index` (0..16384) in the packed area `regs`.
#[inline(always)]
pub(crate) fn get(regs: &[u8], index: usize) -> u8 {
    let base = (index >> 2) * 3;
    let g = &regs[base..base + 3];
    let word = u32::from(g[0]) | (u32::from(g[1]) << 8) | (u32::from(g[2]) << 16);
    ((word >> ((index & 3) * 6)) & 63) as u8
}

/// Sets register `index` to `value` (which must be < 64).
#[inline(always)]
pub(crate) fn set(regs: &mut [u8], index: usize, value: u8) {
    let base = (index >> 2) * 3;
    let g = &mut regs[base..base + 3];
    let shift = (index & 3) * 6;
    let mut word = u32::from(g[0]) | (u32::from(g[1]) << 8) | (u32::from(g[2]) << 16);
    word = (word & !(63 << shift)) | (u32::from(value & 63) << shift);
    g[0] = word as u8;
    g[1] = (word >> 8) as u8;
    g[2] = (word >> 16) as u8;
}

/// Raises register `index` to `value` if it is currently lower; returns
/// whether it changed (Redis's `hllDenseSet`).
#[inline(always)]
pub(crate) fn set_if_greater(regs: &mut [u8], index: usize, value: u8) -> bool {
    let base = (index >> 2) * 3;
    let g = &mut regs[base..base + 3];
    let shift = (index & 3) * 6;
    let word = u32::from(g[0]) | (u32::from(g[1]) << 8) | (u32::from(g[2]) << 16);
    let old = ((word >> shift) & 63) as u8;
    if value <= old {
        return false;
    }
    let word = (word & !(63 << shift)) | (u32::from(value & 63) << shift);
    g[0] = word as u8;
    g[1] = (word >> 8) as u8;
    g[2] = (word >> 16) as u8;
    true
}

/// Spreads eight 6-bit fields held in the low 48 bits of `x` into the eight
/// bytes of the result (field `k` in byte `k`, little-endian).
#[inline(always)]
fn spread8(x: u64) -> u64 {
    let x = (x & 0x0000_0000_00FF_FFFF) | ((x << 8) & 0x00FF_FFFF_0000_0000);
    let x = (x & 0x0000_0FFF_0000_0FFF) | ((x << 4) & 0x0FFF_0000_0FFF_0000);
    (x & 0x003F_003F_003F_003F) | ((x << 2) & 0x3F00_3F00_3F00_3F00)
}

/// Inverse of [`spread8`]: packs the low six bits of each byte into 48 bits.
#[inline(always)]
fn pack8(x: u64) -> u64 {
    let x = (x & 0x003F_003F_003F_003F) | ((x >> 2) & 0x0FC0_0FC0_0FC0_0FC0);
    let x = (x & 0x0000_0FFF_0000_0FFF) | ((x >> 4) & 0x00FF_F000_00FF_F000);
    (x & 0x0000_0000_00FF_FFFF) | ((x >> 8) & 0x0000_FFFF_FF00_0000)
}

#[inline(always)]
fn load48(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..6].copy_from_slice(&b[..6]);
    u64::from_le_bytes(w)
}

#[inline(always)]
fn store48(b: &mut [u8], x: u64) {
    b[..6].copy_from_slice(&x.to_le_bytes()[..6]);
}

/// Byte-wise maximum of two words whose bytes are all below 128.
#[inline(always)]
fn max_bytes(a: u64, b: u64) -> u64 {
    const H: u64 = 0x8080_8080_8080_8080;
    // Per byte 0x80 + a - b: never borrows across bytes, and its top bit is
    // set exactly when a >= b.
    let ge = (((a | H) - b) & H) >> 7;
    let mask = ge * 0xff;
    (a & mask) | (b & !mask)
}

#[inline(always)]
fn load64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

/// Unpacks all registers into one byte each.
pub(crate) fn unpack_into(regs: &[u8], out: &mut [u8; HLL_REGISTERS]) {
    for (src, dst) in regs[..DENSE_REGISTER_BYTES]
        .chunks_exact(6)
        .zip(out.chunks_exact_mut(8))
    {
        dst.copy_from_slice(&spread8(load48(src)).to_le_bytes());
    }
}

/// `max[i] = max(max[i], register i)` for all registers. `max` must hold
/// values below 128 (register values are below 64).
pub(crate) fn max_into(regs: &[u8], max: &mut [u8; HLL_REGISTERS]) {
    for (src, dst) in regs[..DENSE_REGISTER_BYTES]
        .chunks_exact(12)
        .zip(max.chunks_exact_mut(16))
    {
        let lo = spread8(load48(&src[..6]));
        let hi = spread8(load48(&src[6..]));
        let (d0, d1) = dst.split_at_mut(8);
        d0.copy_from_slice(&max_bytes(load64(d0) & 0x7f7f_7f7f_7f7f_7f7f, lo).to_le_bytes());
        d1.copy_from_slice(&max_bytes(load64(d1) & 0x7f7f_7f7f_7f7f_7f7f, hi).to_le_bytes());
    }
}

/// Register-wise maximum of two packed areas, written into `dst`.
pub(crate) fn merge_packed(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst[..DENSE_REGISTER_BYTES]
        .chunks_exact_mut(6)
        .zip(src[..DENSE_REGISTER_BYTES].chunks_exact(6))
    {
        let m = max_bytes(spread8(load48(d)), spread8(load48(s)));
        store48(d, pack8(m));
    }
}

/// Register-wise maximum of a packed area and an unpacked register array.
pub(crate) fn merge_unpacked(dst: &mut [u8], src: &[u8; HLL_REGISTERS]) {
    for (d, s) in dst[..DENSE_REGISTER_BYTES]
        .chunks_exact_mut(6)
        .zip(src.chunks_exact(8))
    {
        let m = max_bytes(spread8(load48(d)), load64(s) & 0x3f3f_3f3f_3f3f_3f3f);
        store48(d, pack8(m));
    }
}

/// Histogram of register values (index = value, 0..=63).
pub(crate) fn histogram(regs: &[u8]) -> [u32; 64] {
    // Four independent histograms avoid store-to-load stalls when
    // neighbouring registers hold the same value (the common case).
    let mut h = [[0u32; 64]; 4];
    for g in regs[..DENSE_REGISTER_BYTES].chunks_exact(12) {
        let lo = load48(&g[..6]);
        let hi = load48(&g[6..]);
        h[0][(lo & 63) as usize] += 1;
        h[1][((lo >> 6) & 63) as usize] += 1;
        h[2][((lo >> 12) & 63) as usize] += 1;
        h[3][((lo >> 18) & 63) as usize] += 1;
        h[0][((lo >> 24) & 63) as usize] += 1;
        h[1][((lo >> 30) & 63) as usize] += 1;
        h[2][((lo >> 36) & 63) as usize] += 1;
        h[3][((lo >> 42) & 63) as usize] += 1;
        h[0][(hi & 63) as usize] += 1;
        h[1][((hi >> 6) & 63) as usize] += 1;
        h[2][((hi >> 12) & 63) as usize] += 1;
        h[3][((hi >> 18) & 63) as usize] += 1;
        h[0][((hi >> 24) & 63) as usize] += 1;
        h[1][((hi >> 30) & 63) as usize] += 1;
        h[2][((hi >> 36) & 63) as usize] += 1;
        h[3][((hi >> 42) & 63) as usize] += 1;
    }
    let mut out = [0u32; 64];
    for (i, o) in out.iter_mut().enumerate() {
        *o = h[0][i] + h[1][i] + h[2][i] + h[3][i];
    }
    out
}

/// Histogram of an unpacked register array (values are used modulo 64).
pub(crate) fn histogram_raw(regs: &[u8; HLL_REGISTERS]) -> [u32; 64] {
    let mut h = [[0u32; 64]; 4];
    for c in regs.chunks_exact(4) {
        h[0][(c[0] & 63) as usize] += 1;
        h[1][(c[1] & 63) as usize] += 1;
        h[2][(c[2] & 63) as usize] += 1;
        h[3][(c[3] & 63) as usize] += 1;
    }
    let mut out = [0u32; 64];
    for (i, o) in out.iter_mut().enumerate() {
        *o = h[0][i] + h[1][i] + h[2][i] + h[3][i];
    }
    out
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)]
mod tests {
    use super::*;

    /// Reference accessor in the textbook "byte 6i/8, bit 6i%8" form.
    fn get_ref(regs: &[u8], i: usize) -> u8 {
        let bit = i * 6;
        let mut v = 0u8;
        for k in 0..6 {
            let b = bit + k;
            if regs[b / 8] >> (b % 8) & 1 == 1 {
                v |= 1 << k;
            }
        }
        v
    }

    fn pseudo(n: usize) -> Vec<u8> {
        let mut x = 0x1234_5678_9abc_def0u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn get_matches_bit_reference_including_last_register() {
        let regs = pseudo(DENSE_REGISTER_BYTES);
        for i in 0..HLL_REGISTERS {
            assert_eq!(get(&regs, i), get_ref(&regs, i), "register {i}");
        }
    }

    #[test]
    fn set_touches_only_its_register() {
        let mut regs = pseudo(DENSE_REGISTER_BYTES);
        let before: Vec<u8> = (0..HLL_REGISTERS).map(|i| get(&regs, i)).collect();
        for &i in &[0usize, 1, 2, 3, 4, 5, 1000, 16382, 16383] {
            set(&mut regs, i, 42);
            for j in 0..HLL_REGISTERS {
                let want = if j == i { 42 } else { before[j] };
                assert_eq!(get(&regs, j), want);
            }
            set(&mut regs, i, before[i]);
        }
    }

    #[test]
    fn swar_byte_max() {
        for a in 0..128u8 {
            for b in 0..128u8 {
                let wa = u64::from_le_bytes([a, b, 0, 127, a, 1, b, 64]);
                let wb = u64::from_le_bytes([b, a, 127, 0, a, 2, 0, 63]);
                let want: Vec<u8> = wa
                    .to_le_bytes()
                    .iter()
                    .zip(wb.to_le_bytes())
                    .map(|(x, y)| (*x).max(y))
                    .collect();
                assert_eq!(max_bytes(wa, wb).to_le_bytes().to_vec(), want);
            }
        }
    }

    #[test]
    fn bulk_helpers_agree_with_get() {
        let a = pseudo(DENSE_REGISTER_BYTES);
        let b: Vec<u8> = pseudo(DENSE_REGISTER_BYTES + 7)[7..].to_vec();
        let mut unpacked = [0u8; HLL_REGISTERS];
        unpack_into(&a, &mut unpacked);
        let mut hist = [0u32; 64];
        for (i, &u) in unpacked.iter().enumerate() {
            assert_eq!(u, get(&a, i));
            hist[u as usize] += 1;
        }
        assert_eq!(histogram(&a), hist);
        assert_eq!(histogram_raw(&unpacked), hist);

        let mut m = a.clone();
        merge_packed(&mut m, &b);
        let mut mx = unpacked;
        max_into(&b, &mut mx);
        let mut m2 = a.clone();
        merge_unpacked(&mut m2, &{
            let mut ub = [0u8; HLL_REGISTERS];
            unpack_into(&b, &mut ub);
            ub
        });
        for i in 0..HLL_REGISTERS {
            let want = get(&a, i).max(get(&b, i));
            assert_eq!(get(&m, i), want);
            assert_eq!(mx[i], want);
            assert_eq!(get(&m2, i), want);
        }
    }
}
