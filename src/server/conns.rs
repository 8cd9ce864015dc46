//! The open HTTP connections: how many may be open at once, and which one
//! gives way when a new one arrives at that cap.
//!
//! The cap is `http.max_connections`, and never more than the process's
//! descriptor limit (`RLIMIT_NOFILE`) leaves after `http.reserved_fds`
//! for everything else (the store's files and connections, the listener,
//! the runtime): past it `accept` would fail, and the fresh client waits
//! in the kernel's backlog behind connections that send nothing.
//!
//! At the cap, a new connection takes the place of the one idle longest
//! (no request in flight: a keep-alive connection between requests, or
//! one that has not finished sending its head), which is closed at once.
//! Only when every connection has a request in flight is the new one
//! refused. Sheds and refusals are counted and logged (at most once every
//! 10 s).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::config::HttpConfig;
use crate::log_limit::LogLimit;

/// The most connections `http` allows under the process's descriptor
/// limit: `(cap, descriptor limit)`, the limit `None` where it is unknown.
pub fn connection_cap(http: &HttpConfig) -> Result<(usize, Option<u64>), String> {
    let Some(limit) = descriptor_limit() else {
        return Ok((http.max_connections, None));
    };
    let room = limit.saturating_sub(http.reserved_fds as u64);
    if room < 16 {
        return Err(format!(
            "the descriptor limit is {limit} (ulimit -n), which leaves no room for connections \
             after http.reserved_fds = {}: raise the limit or lower http.reserved_fds",
            http.reserved_fds
        ));
    }
    let cap = (http.max_connections as u64).min(room) as usize;
    Ok((cap, Some(limit)))
}

/// The process's soft limit on open descriptors.
#[cfg(target_os = "linux")]
fn descriptor_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given and nothing else.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0;
    (ok && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

#[cfg(not(target_os = "linux"))]
fn descriptor_limit() -> Option<u64> {
    None
}

/// The table of open connections.
pub struct Conns {
    cap: usize,
    open: Mutex<HashMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
    log_limit: LogLimit,
}

/// Ticks at every request's end: orders connections by idleness.
static TICKS: AtomicU64 = AtomicU64::new(0);

/// One open connection, as its task and the table share it.
pub struct Conn {
    /// The tick its last request ended (or it was accepted); 0 while a
    /// request is in flight.
    idle_since: AtomicU64,
    shed: Notify,
    /// Notified when its socket is closed.
    closed: Notify,
}

impl Conn {
    /// A request begins.
    pub fn busy(&self) {
        self.idle_since.store(0, Ordering::Relaxed);
    }

    /// A request ended.
    pub fn idle(&self) {
        let tick = TICKS.fetch_add(1, Ordering::Relaxed) + 1;
        self.idle_since.store(tick, Ordering::Relaxed);
    }

    /// Resolves when the connection is to be closed to make room.
    pub async fn shed(&self) {
        self.shed.notified().await
    }
}

/// A connection's place in the table, given back when dropped.
pub struct Slot {
    conns: Arc<Conns>,
    id: u64,
    pub conn: Arc<Conn>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.conns.open.lock().remove(&self.id);
        self.conn.closed.notify_one();
        metrics::gauge!("hotrank_http_connections").decrement(1.0);
    }
}

impl Conns {
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Conns {
            cap,
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            log_limit: LogLimit::new(Duration::from_secs(10), 1),
        })
    }

    /// A place for a newly accepted connection: a free one, or the place
    /// of the connection idle longest, once that one is closed (its
    /// socket given back before another is accepted, so that a flood of
    /// new connections never holds more descriptors than the cap). `None`
    /// if every open connection has a request in flight.
    pub async fn admit(self: &Arc<Self>) -> Option<Slot> {
        let conn = Arc::new(Conn {
            idle_since: AtomicU64::new(0),
            shed: Notify::new(),
            closed: Notify::new(),
        });
        conn.idle();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let shed = {
            let mut open = self.open.lock();
            let shed = if open.len() >= self.cap {
                let idlest = open
                    .iter()
                    .filter(|(_, c)| c.idle_since.load(Ordering::Relaxed) != 0)
                    .min_by_key(|(_, c)| c.idle_since.load(Ordering::Relaxed))
                    .map(|(&id, _)| id);
                match idlest.and_then(|id| open.remove(&id)) {
                    Some(c) => Some(c),
                    None => {
                        drop(open);
                        metrics::counter!("hotrank_http_connections_refused_total").increment(1);
                        self.log("every connection has a request in flight: refusing new ones");
                        return None;
                    }
                }
            } else {
                None
            };
            open.insert(id, conn.clone());
            shed
        };
        if let Some(c) = shed {
            c.shed.notify_one();
            metrics::counter!("hotrank_http_connections_shed_total").increment(1);
            self.log("closing the connections idle longest to admit new ones");
            // Its task drops it at once; the bound only guards the loop.
            let _ = tokio::time::timeout(Duration::from_secs(1), c.closed.notified()).await;
        }
        metrics::gauge!("hotrank_http_connections").increment(1.0);
        Some(Slot {
            conns: self.clone(),
            id,
            conn,
        })
    }

    /// Logs a cap event, at most once every 10 s.
    fn log(&self, what: &str) {
        if let Some(held) = self.log_limit.allow() {
            tracing::warn!(
                cap = self.cap,
                suppressed = held,
                "{} connections open (http.max_connections, within the descriptor limit): {what}",
                self.cap
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn at_the_cap_the_idlest_gives_way_and_busy_ones_never() {
        let conns = Conns::new(2);
        let a = conns.admit().await.unwrap();
        let b = conns.admit().await.unwrap();
        // b's request ended after a's began: a is busy, b idle.
        a.conn.busy();
        b.conn.idle();
        // b's task: closes when told to.
        let b_task = tokio::spawn(async move {
            b.conn.shed().await;
            drop(b);
        });
        let c = conns.admit().await.expect("b gives way");
        assert!(b_task.is_finished(), "b was closed before c was admitted");
        assert!(conns.open.lock().contains_key(&a.id));
        assert_eq!(conns.open.lock().len(), 2);
        // With a and c busy, a newcomer is refused.
        c.conn.busy();
        assert!(conns.admit().await.is_none());
        // A slot dropped frees its place.
        drop(c);
        assert!(conns.admit().await.is_some());
        assert_eq!(conns.open.lock().len(), 1, "only a is left");
    }
}
