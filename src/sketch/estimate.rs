//! Otmar Ertl's improved raw estimator ("New cardinality estimation
//! algorithms for HyperLogLog sketches", arXiv:1702.01284), computed from the
//! register histogram exactly the way Redis (>= 5.0) does, so results are
//! bit-identical to `PFCOUNT`.

use super::HLL_REGISTERS;

/// Number of hash bits left after taking the register index (64 - 14).
pub(crate) const HLL_Q: usize = 50;

/// 1 / (2 ln 2).
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prev = z;
        z += x * y;
        y += y;
        if z_prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prev = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if z_prev == z {
            return z / 3.0;
        }
    }
}

/// Cardinality estimate from a histogram of register values.
///
/// Bins above `HLL_Q + 1` (only reachable with hand-crafted dense images) are
/// ignored, as in Redis. Where Redis's `llroundl` would overflow (again only
/// for crafted images) the result is `0x8000_0000_0000_0000`, the value Redis
/// produces on x86-64 (and which `PFCOUNT` prints as `i64::MIN`).
pub(crate) fn estimate(hist: &[u32; 64]) -> u64 {
    let m = HLL_REGISTERS as f64;
    let mut z = m * tau((m - f64::from(hist[HLL_Q + 1])) / m);
    for j in (1..=HLL_Q).rev() {
        z += f64::from(hist[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(hist[0]) / m);
    let e = (ALPHA_INF * m * m / z).round();
    // llroundl: in range -> the rounded integer; otherwise LLONG_MIN on x86-64.
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&e) {
        // Non-negative here because z > 0 whenever it is finite.
        e as i64 as u64
    } else {
        i64::MIN as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpha_matches_redis_literal() {
        assert_eq!(ALPHA_INF, "0.721347520444481703680".parse::<f64>().unwrap());
    }

    #[test]
    fn empty_histogram_is_zero() {
        let mut h = [0u32; 64];
        h[0] = HLL_REGISTERS as u32;
        assert_eq!(estimate(&h), 0);
    }

    #[test]
    fn single_register_is_one() {
        let mut h = [0u32; 64];
        h[0] = HLL_REGISTERS as u32 - 1;
        h[1] = 1;
        assert_eq!(estimate(&h), 1);
    }

    #[test]
    fn saturated_registers_overflow_like_redis() {
        let mut h = [0u32; 64];
        h[HLL_Q + 1] = HLL_REGISTERS as u32;
        assert_eq!(estimate(&h), 1 << 63);
        let mut h = [0u32; 64];
        h[63] = HLL_REGISTERS as u32;
        assert_eq!(estimate(&h), 1 << 63);
    }
}
