//! Log lines under floods: a [`LogLimit`] lets at most a few lines through
//! per period and counts the rest, so that a storm of refused connections,
//! bad tokens or foreign origins leaves a trace without filling the disk.
//! Every rate-limited log line of the server goes through one.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// At most `lines` lines per `period` (a fixed window from the first line
/// let through).
pub struct LogLimit {
    period: Duration,
    lines: u32,
    window: Mutex<Window>,
}

struct Window {
    started: Option<Instant>,
    used: u32,
    /// Lines held back since the last one let through.
    held: u64,
}

impl LogLimit {
    pub const fn new(period: Duration, lines: u32) -> Self {
        LogLimit {
            period,
            lines,
            window: parking_lot::const_mutex(Window {
                started: None,
                used: 0,
                held: 0,
            }),
        }
    }

    /// Whether a line may be written now: `Some(n)`, `n` the lines held
    /// back since the last one let through (to be said in this one), or
    /// `None`: drop it.
    pub fn allow(&self) -> Option<u64> {
        let mut w = self.window.lock();
        let now = Instant::now();
        if w.started
            .is_none_or(|t| now.duration_since(t) >= self.period)
        {
            w.started = Some(now);
            w.used = 0;
        }
        if w.used < self.lines {
            w.used += 1;
            Some(std::mem::take(&mut w.held))
        } else {
            w.held += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lets_a_few_through_per_period_and_counts_the_rest() {
        let limit = LogLimit::new(Duration::from_secs(3600), 3);
        let let_through: Vec<Option<u64>> = (0..10).map(|_| limit.allow()).collect();
        assert_eq!(&let_through[..3], &[Some(0), Some(0), Some(0)]);
        assert!(let_through[3..].iter().all(Option::is_none));
        let limit = LogLimit::new(Duration::ZERO, 1);
        assert_eq!(limit.allow(), Some(0));
        assert_eq!(limit.allow(), Some(0), "a zero period never holds back");
    }
}
