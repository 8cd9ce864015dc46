//! Work that no request waits for — snapshot rebuilds, ranking upkeep and
//! builds — runs on threads of lower CPU priority than the request
//! workers and the log writer.
//!
//! Locks already keep such work from blocking ingest (it takes the state
//! lock in short holds, or not at all); what was left was the CPU itself.
//! On a machine with as many busy threads as cores, a snapshot rebuild
//! that shares a core with a runtime worker takes half its time slices,
//! and every request queued on that worker waits for them (BENCHMARKS.md,
//! "Background work at a lower priority"). A higher nice value hands the
//! core to request threads whenever both are runnable, while the
//! background thread still gets what is left (CFS weights: nice 10 is
//! about a tenth of a nice-0 thread's share under contention, and all of
//! an idle core).
//!
//! A nice value, once raised, cannot be lowered again without privilege,
//! so background work gets threads of its own ([`run`]) rather than
//! borrowing the runtime's blocking pool.

use std::sync::atomic::{AtomicI32, Ordering};

/// How many nice steps above the process background threads take, from
/// `[embedded] background_nice` (0: the same priority as everything else).
static NICE: AtomicI32 = AtomicI32::new(crate::config::DEFAULT_BACKGROUND_NICE);

/// Sets how many nice steps above the process later background threads
/// take (`hotrank serve` calls this once, from the configuration).
pub fn set_nice(nice: i32) {
    NICE.store(nice.clamp(0, 19), Ordering::Relaxed);
}

/// Lowers the calling thread's CPU priority by the background step.
/// Call it first thing on a thread that only runs background work.
pub fn lower_this_thread() {
    let nice = NICE.load(Ordering::Relaxed);
    if nice == 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // On Linux a nice value belongs to a thread (its task id), not to
        // the process: this leaves every other thread as it is. The step
        // is relative to the process (its main thread), so a server
        // started under `nice` keeps its order, and a thread started by a
        // background thread (which inherits its value) is not lowered twice.
        // SAFETY: getpriority reads a nice value; -1 is also a valid answer
        // (a server started at nice -1 puts its background at 9 then).
        let base = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let target = (base + nice).min(19);
        // SAFETY: gettid and setpriority take plain integers and touch
        // nothing but the calling thread's scheduling attributes.
        let done =
            unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, target) };
        if done != 0 {
            tracing::debug!(
                error = %std::io::Error::last_os_error(),
                "cannot lower a background thread's priority"
            );
        }
    }
}

/// Runs `work` on a new thread named `name` at the background priority,
/// and waits for its result without holding a runtime worker.
pub async fn run<T, F>(name: &str, work: F) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            lower_this_thread();
            let _ = tx.send(work());
        })
        .map_err(|e| format!("cannot start thread {name}: {e}"))?;
    rx.await
        .map_err(|_| format!("thread {name} ended without a result (it panicked)"))
}

/// The nice value of the calling thread (for tests).
#[cfg(all(test, target_os = "linux"))]
fn nice_of_this_thread() -> i32 {
    // SAFETY: getpriority reads the calling thread's nice value.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn background_threads_run_below_the_caller_and_leave_it_alone() {
        let caller = nice_of_this_thread();
        set_nice(10);
        let inside = run("hotrank-test-bg", nice_of_this_thread).await.unwrap();
        assert_eq!(inside, (caller + 10).min(19), "the background thread");
        assert_eq!(nice_of_this_thread(), caller, "the calling thread");
        set_nice(0);
        let unchanged = run("hotrank-test-bg", nice_of_this_thread).await.unwrap();
        assert_eq!(unchanged, caller, "nice 0 leaves the priority alone");
        set_nice(crate::config::DEFAULT_BACKGROUND_NICE);
    }

    #[tokio::test]
    async fn a_panicking_background_thread_is_an_error_not_a_hang() {
        let r: Result<(), String> = run("hotrank-test-bg", || panic!("boom")).await;
        assert!(r.unwrap_err().contains("panicked"));
    }
}
