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
