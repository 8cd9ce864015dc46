//! The store's side of ranking builds: warming the default ranking after
//! open, the upkeep thread, and a query waiting for its ranking to be
//! built and caught up.

use std::sync::Arc;
use std::time::Instant;

use crate::model::Timestamp;

use super::builds::{BuildHook, run_build, upkeep_pass, upkeep_rankings, warm_default};
use super::inner::{Inner, record_hold};
use super::ranking::{Build, Join, RankKey, Step};
use super::store::EmbeddedStore;

impl EmbeddedStore {
    /// Builds the ranking of the default `/api/hot` query (gravity over
    /// 72 h, no filter) at `now` and walks its first page once, so that the
    /// first query after a restart finds it built and its top bounds tight.
    /// Returns the articles indexed. Blocks; see
    /// [`Self::warm_in_background`].
    pub fn warm(&self, now: Timestamp) -> usize {
        warm_default(&self.inner, &self.settings, self.hook(), now)
    }

    /// [`Self::warm`] on a thread of its own: the server calls this after
    /// opening the store and listens at once; [`Store::warming`](crate::store::Store::warming) (and so
    /// `/readyz`, 503) says so until the ranking is built (at once on an
    /// empty store). The thread then stays as the rankings' upkeep
    /// ([`Rankings::upkeep`](super::ranking::Rankings::upkeep), every [`UPKEEP_EVERY`](super::builds::UPKEEP_EVERY)) until the store is
    /// dropped.
    pub fn warm_in_background(&self, now: Timestamp) {
        use std::sync::atomic::Ordering;
        let empty = self.inner.lock().data.articles.is_empty();
        if empty {
            // Nothing to score: built before the server listens.
            self.warm(now);
        } else {
            self.warming.store(true, Ordering::SeqCst);
        }
        let (inner, settings, hook) = (self.inner.clone(), self.settings.clone(), self.hook());
        let warming = self.warming.clone();
        let spawned = std::thread::Builder::new()
            .name("hotrank-rankings".into())
            .spawn(move || {
                if !empty {
                    let started = Instant::now();
                    let indexed = warm_default(&inner, &settings, hook, now);
                    warming.store(false, Ordering::SeqCst);
                    tracing::info!(
                        indexed,
                        ms = started.elapsed().as_millis() as u64,
                        "default ranking built: ready"
                    );
                }
                let weak = Arc::downgrade(&inner);
                drop(inner);
                upkeep_rankings(&weak, &settings.models, settings.build_chunk);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the rankings thread; the first query builds the default ranking");
            self.warming.store(false, Ordering::SeqCst);
        }
    }

    /// One pass of the rankings' background upkeep ([`Rankings::upkeep`](super::ranking::Rankings::upkeep)),
    /// as the thread [`Self::warm_in_background`] starts runs it: returns
    /// the articles re-scored. For tests.
    #[doc(hidden)]
    pub fn upkeep_rankings(&self) -> usize {
        upkeep_pass(
            &self.inner,
            &self.settings.models,
            self.settings.build_chunk,
        )
    }

    /// Sets (or clears) the hook ranking builds call between their holds
    /// of the state lock. For tests.
    #[doc(hidden)]
    pub fn set_build_hook(&self, hook: Option<BuildHook>) {
        *self.build_hook.lock() = hook;
    }

    pub(super) fn hook(&self) -> Option<BuildHook> {
        self.build_hook.lock().clone()
    }

    /// Waits until the ranking `key` is built, starting its build on a
    /// thread of its own if nobody has: then returns the state lock,
    /// held, with the ranking built.
    pub(super) async fn built(
        &self,
        key: &RankKey,
        now: Timestamp,
    ) -> parking_lot::MutexGuard<'_, Inner> {
        loop {
            let signal = {
                let mut guard = self.inner.lock();
                match guard.rankings.join(key, now) {
                    Join::Built => return guard,
                    Join::Wait(signal) => signal,
                    Join::Start(signal) => {
                        let b = Build::new(key.clone(), signal.clone(), now);
                        drop(guard);
                        self.spawn_build(b);
                        signal
                    }
                }
            };
            signal.wait().await;
        }
    }

    fn spawn_build(&self, b: Build) {
        let (key, signal) = (b.key().clone(), b.signal().clone());
        let (inner, models, hook) = (
            self.inner.clone(),
            self.settings.models.clone(),
            self.hook(),
        );
        let chunk = self.settings.build_chunk;
        let spawned = std::thread::Builder::new()
            .name("hotrank-rank-build".into())
            .spawn(move || run_build(&inner, &models, chunk, hook, b));
        if let Err(e) = spawned {
            // The build went with the closure: give the ranking up, so its
            // waiters wake and the next query tries again.
            tracing::error!(error = %e, "cannot start a ranking build thread");
            let b = Build::new(key, signal.clone(), 0);
            self.inner.lock().rankings.abandon(&b);
            signal.finish();
        }
    }

    /// Before a query walks the built ranking `key`: the lock back if few
    /// of its articles changed, or `None` after one hold of re-scoring them
    /// ([`Rankings::catch_up_query`](super::ranking::Rankings::catch_up_query), the lock released: ask again).
    pub(super) fn caught_up<'a>(
        &self,
        mut guard: parking_lot::MutexGuard<'a, Inner>,
        key: &RankKey,
        now: Timestamp,
    ) -> Option<parking_lot::MutexGuard<'a, Inner>> {
        let held = Instant::now();
        let i = &mut *guard;
        let (models, chunk) = (&self.settings.models, self.settings.build_chunk);
        let step =
            (i.rankings).catch_up_query(key, &mut i.data, models, now, i.newest_event, chunk);
        if step != Step::More {
            return Some(guard);
        }
        parking_lot::MutexGuard::unlock_fair(guard);
        record_hold("query_catch_up", held);
        None
    }
}
