//! A sliding-log rate limiter: at most `limit` admitted events per key in
//! any window of `window_ms`, bursts included.
//!
//! A token bucket would let a full burst through and then refill, so a
//! client could send up to twice the limit in one minute; the seed asks for
//! "N per minute", so each key keeps the times of its last `limit`
//! admissions and admits a new event only if the oldest of them has left
//! the window. Refused events are not recorded: a flood does not lock its
//! source out for longer than the flood lasts.

use std::hash::Hash;

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use super::KeyedMap;

/// One key's admission times, oldest first. Most keys (a visitor's views
/// in a minute) hold one or two: those live inline in the map's slot, with
/// no allocation (a `VecDeque` took a 48-byte heap block per key). Encoded
/// as a sequence, as the `VecDeque` it replaced was.
pub type AdmissionLog = SmallVec<[i64; 2]>;

/// Whether a key whose admissions are `log` (oldest first, at most
/// `limit` of them) may be admitted at `now_ms`: the window is full only
/// if all of them, the oldest included, are still inside it.
pub fn log_allows(log: &[i64], limit: usize, window_ms: i64, now_ms: i64) -> bool {
    log.len() < limit || log.first().is_some_and(|&t| t <= now_ms - window_ms)
}

/// Records an admission at `now_ms` in `log`, dropping the times that left
/// the window and, when `limit` are held, the oldest.
pub fn log_record(log: &mut AdmissionLog, limit: usize, window_ms: i64, now_ms: i64) {
    let left = (log.iter())
        .take_while(|&&t| t <= now_ms - window_ms)
        .count();
    let full = usize::from(log.len() - left >= limit);
    log.drain(..left + full);
    log.push(now_ms);
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SlidingLimiter<K: Hash + Eq> {
    limit: usize,
    window_ms: i64,
    logs: KeyedMap<K, AdmissionLog>,
}

impl<K: Hash + Eq + Copy> SlidingLimiter<K> {
    /// `limit == 0` disables the limiter.
    pub fn new(limit: u32, window_ms: i64) -> Self {
        SlidingLimiter {
            limit: limit as usize,
            window_ms,
            logs: KeyedMap::default(),
        }
    }

    /// Changes the limit (after a restart with new configuration).
    pub fn set_limit(&mut self, limit: u32) {
        self.limit = limit as usize;
    }

    /// Whether an event at `now_ms` would be admitted.
    pub fn allows(&self, key: &K, now_ms: i64) -> bool {
        if self.limit == 0 {
            return true;
        }
        (self.logs.get(key)).is_none_or(|log| log_allows(log, self.limit, self.window_ms, now_ms))
    }

    /// How long until an event at `now_ms` would be admitted: `None` if it
    /// would be now, else the milliseconds until the oldest admission in
    /// the window leaves it.
    pub fn wait_ms(&self, key: &K, now_ms: i64) -> Option<i64> {
        if self.allows(key, now_ms) {
            return None;
        }
        let oldest = self.logs.get(key).and_then(|log| log.first().copied())?;
        Some((oldest + self.window_ms - now_ms).max(1))
    }

    /// Records an admission at `now_ms` (call after `allows` said yes, or
    /// when replaying the log).
    pub fn record(&mut self, key: K, now_ms: i64) {
        if self.limit == 0 {
            return;
        }
        let log = self.logs.entry(key).or_default();
        log_record(log, self.limit, self.window_ms, now_ms);
    }

    /// Forgets keys with nothing inside the window.
    pub fn sweep(&mut self, now_ms: i64) {
        let horizon = now_ms - self.window_ms;
        self.logs
            .retain(|_, log| log.last().is_some_and(|&t| t > horizon));
    }

    /// The newest admission time any key holds.
    pub fn newest(&self) -> Option<i64> {
        self.logs
            .values()
            .filter_map(|log| log.last().copied())
            .max()
    }

    /// Most admissions per window (0: off) and the window.
    pub fn rule(&self) -> (usize, i64) {
        (self.limit, self.window_ms)
    }

    /// Every key's log, taken out.
    pub fn into_logs(self) -> impl Iterator<Item = (K, AdmissionLog)> {
        self.logs.into_iter()
    }

    pub fn keys(&self) -> usize {
        self.logs.len()
    }

    /// Every key's log of admission times, oldest first (for dumps).
    pub fn logs(&self) -> impl Iterator<Item = (&K, &AdmissionLog)> {
        self.logs.iter()
    }

    /// Replaces one key's log (loading a dump).
    pub fn set_log(&mut self, key: K, log: Vec<i64>) {
        if !log.is_empty() {
            self.logs.insert(key, AdmissionLog::from_vec(log));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admit(l: &mut SlidingLimiter<u8>, now: i64) -> bool {
        let ok = l.allows(&1, now);
        if ok {
            l.record(1, now);
        }
        ok
    }

    #[test]
    fn no_more_than_limit_in_any_window() {
        let mut l = SlidingLimiter::new(3, 60_000);
        assert!(admit(&mut l, 0));
        assert!(admit(&mut l, 10_000));
        assert!(admit(&mut l, 20_000));
        assert!(!admit(&mut l, 30_000));
        assert!(!admit(&mut l, 59_999));
        // The first admission leaves the window at 60 000.
        assert!(admit(&mut l, 60_000));
        assert!(!admit(&mut l, 60_001));
        assert!(admit(&mut l, 70_000));
    }

    #[test]
    fn wait_is_until_the_oldest_leaves() {
        let mut l = SlidingLimiter::new(2, 60_000);
        assert_eq!(l.wait_ms(&1, 0), None);
        l.record(1, 0);
        l.record(1, 10_000);
        assert_eq!(l.wait_ms(&1, 30_000), Some(30_000));
        assert_eq!(l.wait_ms(&1, 60_000), None);
        assert_eq!(l.wait_ms(&2, 30_000), None);
    }

    #[test]
    fn disabled_and_sweep() {
        let mut off = SlidingLimiter::new(0, 60_000);
        for t in 0..1000 {
            assert!(admit(&mut off, t));
        }
        let mut l = SlidingLimiter::new(2, 1000);
        l.record(1, 0);
        l.record(2, 900);
        l.sweep(1500);
        assert_eq!(l.keys(), 1);
    }

    /// Against a brute-force model (every admission time kept), over
    /// random streams and limits, logs spilled past the inline two included.
    #[test]
    fn matches_a_brute_force_model() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for limit in [1u32, 2, 3, 5] {
            let mut l = SlidingLimiter::new(limit, 1000);
            let mut admitted: Vec<(u8, i64)> = Vec::new();
            let mut now = 0;
            for _ in 0..3000 {
                now += next(300) as i64;
                let key = next(3) as u8;
                let in_window = (admitted.iter())
                    .filter(|&&(k, t)| k == key && t > now - 1000)
                    .count();
                let want = in_window < limit as usize;
                assert_eq!(l.allows(&key, now), want, "limit {limit} at {now}");
                if want {
                    l.record(key, now);
                    admitted.push((key, now));
                }
                if next(50) == 0 {
                    l.sweep(now);
                }
            }
        }
    }

    /// Snapshots written when the logs were `VecDeque`s decode unchanged.
    #[test]
    fn a_log_encodes_as_the_vecdeque_it_replaced() {
        let old: std::collections::VecDeque<i64> = [5, -3, 1 << 40].into_iter().collect();
        let new: AdmissionLog = [5, -3, 1 << 40].into_iter().collect();
        let bytes = postcard::to_allocvec(&old).unwrap();
        assert_eq!(postcard::to_allocvec(&new).unwrap(), bytes);
        assert_eq!(postcard::from_bytes::<AdmissionLog>(&bytes).unwrap(), new);
    }
}
