//! Ranking builds and upkeep off the state lock: a build scores its
//! articles a chunk per short hold of the lock, assembles the index with
//! the lock released and installs it; the upkeep thread re-scores what
//! changed in the built rankings.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::model::{HotQuery, Timestamp};
use crate::rank::pages;
use crate::score::Models;
use crate::store::StoreSettings;

use super::inner::{Inner, record_hold};
use super::ranking::{Build, Join, RankKey, Step};

/// Where a ranking build is, for [`EmbeddedStore::set_build_hook`](crate::store::embedded::EmbeddedStore::set_build_hook).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildPhase {
    /// This many articles scored so far (the lock is released).
    Scored(usize),
    /// Every article scored and the index assembled off the lock; next it
    /// is installed and the articles that changed meanwhile re-scored.
    Assembled,
}

/// Called by ranking builds between their holds of the state lock (tests
/// use it to hold a build at a known point while ingest goes on).
pub type BuildHook = Arc<dyn Fn(BuildPhase) + Send + Sync>;

/// [`EmbeddedStore::warm`](crate::store::embedded::EmbeddedStore::warm): builds the default ranking (sharing a build a
/// query started), pins it (it is never evicted) and walks its first page.
/// On an empty store the build is instant, and from then on the ranking
/// follows every article as it arrives: a bulk load is indexed as it is
/// ingested, not by a build on the first query after it.
pub(super) fn warm_default(
    inner: &Mutex<Inner>,
    settings: &StoreSettings,
    hook: Option<BuildHook>,
    now: Timestamp,
) -> usize {
    let q = HotQuery::default_page();
    let key = RankKey::of(&q, now);
    loop {
        let mut guard = inner.lock();
        match guard.rankings.join(&key, now) {
            Join::Built => {
                let i = &mut *guard;
                i.rankings.pin(&key);
                let walk = pages::first_walk(&q, settings.ranking_cap);
                let (models, newest) = (&settings.models, i.newest_event);
                (i.rankings).top(&key, walk, &mut i.data, models, now, newest);
                return i.rankings.sizes().1;
            }
            Join::Wait(signal) => {
                drop(guard);
                signal.wait_blocking();
            }
            Join::Start(signal) => {
                drop(guard);
                let b = Build::new(key.clone(), signal, now);
                run_build(
                    inner,
                    &settings.models,
                    settings.build_chunk,
                    hook.clone(),
                    b,
                );
            }
        }
    }
}

/// Builds a ranking off the state lock ([`Build`]): scores its articles a
/// chunk per short hold of the lock, assembles the index with the lock
/// released, installs it, and re-scores the articles that changed
/// meanwhile. Wakes the queries waiting for it however it ends.
pub(super) fn run_build(
    inner: &Mutex<Inner>,
    models: &Models,
    chunk: usize,
    hook: Option<BuildHook>,
    b: Build,
) {
    /// Wakes the waiters however the build ends (a panic included), and
    /// drops a ranking left half-built so that the next query starts over.
    struct Finish<'a> {
        inner: &'a Mutex<Inner>,
        build: Build,
    }
    impl Drop for Finish<'_> {
        fn drop(&mut self) {
            self.inner.lock().rankings.abandon(&self.build);
            self.build.signal().finish();
        }
    }
    let started = Instant::now();
    let mut f = Finish { inner, build: b };
    let hook = |phase| {
        if let Some(h) = &hook {
            h(phase);
        }
    };
    loop {
        let mut guard = inner.lock();
        let held = Instant::now();
        let i = &mut *guard;
        let step =
            (i.rankings).build_chunk(&mut f.build, &mut i.data, models, i.newest_event, chunk);
        // Hands the lock to a waiting writer rather than taking it back.
        parking_lot::MutexGuard::unlock_fair(guard);
        record_hold("build", held);
        match step {
            Step::More => hook(BuildPhase::Scored(f.build.scored())),
            Step::Done => break,
            Step::Gone => return,
        }
    }
    f.build.assemble();
    hook(BuildPhase::Assembled);
    let mut installed = false;
    loop {
        let mut guard = inner.lock();
        let held = Instant::now();
        let i = &mut *guard;
        let step = if installed {
            (i.rankings).catch_up(&f.build, &mut i.data, models, i.newest_event, chunk)
        } else {
            installed = true;
            i.rankings.install(&mut f.build)
        };
        parking_lot::MutexGuard::unlock_fair(guard);
        record_hold("catch_up", held);
        match step {
            Step::More => {}
            Step::Done => {
                // Within the byte budget with the new ranking in it; what
                // it evicts is freed with the lock released.
                let mut guard = inner.lock();
                guard.fit(f.build.key());
                let evicted = guard.rankings.take_evicted();
                drop(guard);
                drop(evicted);
                break;
            }
            Step::Gone => return,
        }
    }
    tracing::debug!(
        articles = f.build.scored(),
        ms = started.elapsed().as_millis() as u64,
        "ranking built"
    );
}

/// How often the ranking upkeep thread looks for rankings with many
/// changed articles ([`Rankings::upkeep`](super::ranking::Rankings::upkeep)). Between two looks the
/// articles changed are re-scored once each however often they changed.
pub(super) const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// The ranking upkeep thread's loop ([`EmbeddedStore::warm_in_background`](crate::store::embedded::EmbeddedStore::warm_in_background)):
/// every [`UPKEEP_EVERY`], re-scores what changed in the built rankings in
/// holds of about [`super::ranking::BUILD_HOLD`]. Ends once the store is dropped.
pub(super) fn upkeep_rankings(
    inner: &std::sync::Weak<Mutex<Inner>>,
    models: &Models,
    chunk: usize,
) {
    loop {
        std::thread::sleep(UPKEEP_EVERY);
        let Some(inner) = inner.upgrade() else {
            return;
        };
        upkeep_pass(&inner, models, chunk);
    }
}

/// One pass of [`upkeep_rankings`]: until no built ranking has more than
/// [`super::ranking::UPKEEP_DIRTY`] changed articles. Returns the articles re-scored.
pub(super) fn upkeep_pass(inner: &Mutex<Inner>, models: &Models, chunk: usize) -> usize {
    let mut total = 0;
    loop {
        let mut guard = inner.lock();
        let held = Instant::now();
        let i = &mut *guard;
        let (step, done) = i
            .rankings
            .upkeep(&mut i.data, models, i.newest_event, chunk);
        parking_lot::MutexGuard::unlock_fair(guard);
        if done > 0 {
            record_hold("upkeep", held);
        }
        total += done;
        if step != Step::More {
            return total;
        }
    }
}
