//! Where "now" comes from. Only the HTTP layer and background tasks read a
//! clock; everything below takes time as an argument. Tests use
//! [`ManualClock`] to move time without sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::model::Timestamp;

pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;

    /// Seconds since the Unix epoch.
    fn now(&self) -> Timestamp {
        self.now_ms().div_euclid(1000)
    }
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    pub fn at(secs: Timestamp) -> Self {
        ManualClock(Arc::new(AtomicI64::new(secs * 1000)))
    }

    pub fn set(&self, secs: Timestamp) {
        self.0.store(secs * 1000, Ordering::SeqCst);
    }

    pub fn advance(&self, secs: i64) {
        self.0.fetch_add(secs * 1000, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The gate's arrival clock: a wall clock that never runs backward and
/// whose forward steps are elapsed time. Rate limits, the behaviour rule
/// and eventIds measure arrival on it, so a wall clock stepped back (NTP,
/// or by hand) neither lets a key's events in twice nor keeps a refusal
/// past its window: a step back of `d` adds `d` to the offset from the
/// wall, and every later reading advances by the wall's own progress.
/// Pure: readings come in as arguments. The Redis store keeps the same
/// two numbers per site in `gate:time` (docs/redis-keys.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GateClock {
    /// The last wall reading and the gate time it gave, if any.
    last: Option<(i64, i64)>,
    /// Gate times already handed out before this clock's first reading
    /// (found in the state a restart loaded): it never gives one below.
    floor: i64,
}

impl GateClock {
    /// A clock that never reads below `floor` (ms).
    pub fn after(floor: i64) -> Self {
        GateClock { last: None, floor }
    }

    /// The gate time (ms) of the wall reading `wall_ms`.
    pub fn at(&mut self, wall_ms: i64) -> i64 {
        let t = match self.last {
            None => wall_ms.max(self.floor),
            Some((wall, t)) => t.saturating_add((wall_ms - wall).max(0)),
        };
        self.last = Some((wall_ms, t));
        t
    }
}

#[cfg(test)]
mod tests {
    use super::GateClock;

    #[test]
    fn a_step_back_stalls_the_gate_clock_for_no_time() {
        let mut c = GateClock::default();
        assert_eq!(c.at(1_000_000), 1_000_000);
        assert_eq!(c.at(1_010_000), 1_010_000);
        // The wall steps back 300 s: the gate clock stays, then moves on
        // with the wall's progress, 300 s ahead of it.
        assert_eq!(c.at(710_000), 1_010_000);
        assert_eq!(c.at(771_000), 1_071_000);
        // A step forward is elapsed time as far as the clock can tell.
        assert_eq!(c.at(871_000), 1_171_000);
        // After a restart, never below what the state already holds.
        assert_eq!(GateClock::after(2_000).at(1_000), 2_000);
        assert_eq!(GateClock::after(2_000).at(3_000), 3_000);
    }
}
