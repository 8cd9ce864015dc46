//! The site's epoch marker (`pipe:epoch`, docs/design.md, "Disaster
//! recovery"): which lifetime of the site's data a Redis holds.
//!
//! A Redis that restarts without its data (no persistence, a lost disk,
//! FLUSHALL) answers as if the site were new: empty rankings, and every
//! eventId it had acknowledged counts again. The marker tells the two
//! apart. It is created once, for a new site, and a node learns it once;
//! every write the node sends then carries it (`epoch.lua`, checked in the
//! same script call as the writes), so a Redis that lost it refuses the
//! call before any write. The pipeline with a journal compares the marker
//! with the journal's copy (journal.rs); the direct store compares it with
//! the epoch the node learnt (this file). Both decide with [`reconcile`].
//!
//! A node of the direct store that finds its epoch gone answers 503 (and
//! `/readyz` says why) until an operator restores the site from the
//! archive (`hotrank archive restore`) or accepts the loss
//! (`hotrank redis-ack-loss`): both set a marker, which the node adopts.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use super::{RedisStore, store_err};
use crate::store::StoreError;

/// What the marker in Redis (`main`) and the epoch another memory holds
/// (`known`: the journal's, or the one a node learnt) say together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reconciled {
    /// Both hold this epoch.
    Same(String),
    /// Redis holds `main`, the other memory `known`, another one.
    Differ { main: String, known: String },
    /// Redis holds this one, the other memory none.
    OnlyMain(String),
    /// Redis lost the epoch the other memory holds: it lost its data.
    Lost(String),
    /// Neither holds one: a new site.
    New,
}

/// [`Reconciled`] of `main` and `known`: the one decision both the
/// journal and the direct store take.
pub(crate) fn reconcile(main: Option<String>, known: Option<String>) -> Reconciled {
    match (main, known) {
        (Some(m), Some(k)) if m == k => Reconciled::Same(m),
        (Some(main), Some(known)) => Reconciled::Differ { main, known },
        (Some(m), None) => Reconciled::OnlyMain(m),
        (None, Some(k)) => Reconciled::Lost(k),
        (None, None) => Reconciled::New,
    }
}

/// The error of a Redis that lost the site's data: 503 until it is
/// restored or the loss accepted.
pub(super) fn lost(key: &str, epoch: &str) -> StoreError {
    StoreError::Unavailable(format!(
        "Redis lost this site's data: it no longer holds epoch {epoch} ({key}); \
         restore it (`hotrank archive restore`) or accept the loss (`hotrank redis-ack-loss`)"
    ))
}

/// How many times (50 ms apart) a node that never learnt the epoch reads
/// again a site whose markers it found only in part.
const PARTIAL_RETRIES: usize = 20;

/// A fresh epoch.
pub(crate) fn fresh() -> String {
    format!("{:016x}", rand::random::<u64>())
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum State {
    /// Not learnt yet.
    #[default]
    Unknown,
    /// The site's epoch: every write carries it.
    Held(String),
    /// Redis lost this epoch: every call is refused until a marker is set
    /// again.
    Lost(String),
}

/// What one node of the direct store knows of its site's epoch.
#[derive(Default)]
pub(super) struct Marker {
    /// Set on a pipeline's store: the pipeline keeps its own epoch (with a
    /// journal) and its writes carry none here.
    off: AtomicBool,
    state: Mutex<State>,
}

impl Marker {
    pub(super) fn turn_off(&self) {
        self.off.store(true, Ordering::Relaxed);
    }

    fn on(&self) -> bool {
        !self.off.load(Ordering::Relaxed)
    }
}

impl RedisStore {
    /// Turns the marker off: the store of a pipeline, which keeps its own
    /// epoch (with a journal), sends writes that carry none.
    pub(crate) fn turn_marker_off(&self) {
        self.marker.turn_off();
    }

    /// Whether this store's writes carry the site's epoch (not on a
    /// pipeline's store).
    pub(super) fn marker_on(&self) -> bool {
        self.marker.on()
    }

    /// The epoch this node's writes carry: `''` with the marker off,
    /// learnt once ([`Self::attach_epoch`]); `Unavailable` while Redis
    /// lost it.
    async fn write_epoch(&self) -> Result<String, StoreError> {
        if !self.marker.on() {
            return Ok(String::new());
        }
        match self.marker.state.lock().clone() {
            State::Held(e) => return Ok(e),
            State::Lost(e) => return Err(lost(&self.keys.epoch(), &e)),
            State::Unknown => {}
        }
        self.attach_epoch().await
    }

    /// The epoch key and the epoch a write script of one slot checks
    /// (`epoch.lua`): the site's marker, or `''` (no check in the script)
    /// with the marker off, and on a site over several slots, whose
    /// shards' markers the readiness check reads. `Unavailable` while
    /// Redis lost it.
    pub(super) async fn script_epoch(&self) -> Result<(String, String), StoreError> {
        let epoch = self.write_epoch().await?;
        let epoch = if self.keys.spans_slots() {
            String::new()
        } else {
            epoch
        };
        Ok((self.keys.epoch(), epoch))
    }

    /// `Unavailable` while this node knows Redis lost the site's data
    /// (reads would answer from an empty Redis); no Redis call.
    pub(super) fn check_epoch(&self) -> Result<(), StoreError> {
        match &*self.marker.state.lock() {
            State::Lost(e) => Err(lost(&self.keys.epoch(), e)),
            _ => Ok(()),
        }
    }

    /// Reads every marker of the site ([`super::Keys::epochs`]) and
    /// decides with [`reconcile`] against what this node learnt: the same
    /// epoch or a new one set by a restore or `redis-ack-loss` (adopted,
    /// logged), a new site (created), or a lost one (refused, logged once).
    pub(super) async fn attach_epoch(&self) -> Result<String, StoreError> {
        let keys = self.keys.epochs();
        // What this node knew when it read: another call of this node may
        // learn or create the epoch while this one reads, and a read taken
        // before that (none or some markers, during the creation) must be
        // judged as the read of a node that knew nothing, not as a loss.
        let before = self.marker.state.lock().clone();
        let mut got = self.read_epochs(&keys).await?;
        // A site over several slots gets its markers one slot at a time
        // ([`Self::set_epochs`]): a node that never learnt the epoch and
        // finds some of them may be watching another node create the
        // site. It waits for the rest (a creation takes a few round
        // trips); markers still missing after that were lost.
        if before == State::Unknown {
            for _ in 0..PARTIAL_RETRIES {
                let some = got.iter().filter(|e| e.is_some()).count();
                if some == 0 || some == got.len() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                got = self.read_epochs(&keys).await?;
            }
        }
        let held: Vec<&String> = got.iter().flatten().collect();
        if held.iter().any(|e| *e != held[0]) {
            return Err(StoreError::Unavailable(format!(
                "the site's slots hold different epochs ({}): they belong to different sites",
                keys.join(", ")
            )));
        }
        let main = (held.len() == keys.len()).then(|| held[0].clone());
        let known = match &before {
            State::Held(e) | State::Lost(e) => Some(e.clone()),
            // A slot that kept the marker while another lost it.
            State::Unknown => held.first().map(|e| (*e).clone()),
        };
        let epoch = match reconcile(main, known) {
            Reconciled::Same(e) | Reconciled::OnlyMain(e) => e,
            Reconciled::Differ { main, known } => {
                tracing::warn!(epoch = %main, before = %known,
                    "Redis holds a new epoch (restored, or its loss accepted): serving it");
                main
            }
            Reconciled::Lost(e) => {
                if before != State::Lost(e.clone()) {
                    tracing::error!(epoch = %e, key = %self.keys.epoch(),
                        "Redis lost this site's data: refusing every call until `hotrank archive restore` or `hotrank redis-ack-loss`");
                }
                *self.marker.state.lock() = State::Lost(e.clone());
                return Err(lost(&self.keys.epoch(), &e));
            }
            Reconciled::New => {
                let e = self.set_epochs(&keys, &fresh()).await?;
                tracing::info!(epoch = %e, "site epoch created (a new site)");
                e
            }
        };
        *self.marker.state.lock() = State::Held(epoch.clone());
        Ok(epoch)
    }

    async fn read_epochs(&self, keys: &[String]) -> Result<Vec<Option<String>>, StoreError> {
        let mut pipe = redis::pipe();
        for k in keys {
            pipe.get(k);
        }
        self.query_pipe(&pipe).await.map_err(store_err)
    }

    /// Sets every marker in `keys` that is missing (`SET NX`): the first
    /// to `epoch`, the others to what the first holds (another node may
    /// have set it first: both then agree). Answers the epoch.
    async fn set_epochs(&self, keys: &[String], epoch: &str) -> Result<String, StoreError> {
        let mut con = self.con();
        let mut held = epoch.to_string();
        for (i, k) in keys.iter().enumerate() {
            let e = set_nx_get(&mut con, k, &held).await?;
            if i == 0 {
                held = e;
            } else if e != held {
                return Err(StoreError::Unavailable(format!(
                    "{k} holds epoch {e}, the site {held}: they belong to different sites"
                )));
            }
        }
        Ok(held)
    }

    /// Sets the site's markers again after Redis lost its data, to the
    /// epoch a slot kept or else a fresh one: nodes serve this Redis again
    /// as it is (`hotrank redis-ack-loss`, and after `archive import` or
    /// `archive restore` without a journal). Answers the epoch and whether
    /// any marker was missing.
    pub async fn set_epoch(&self) -> Result<(String, bool), StoreError> {
        let keys = self.keys.epochs();
        let got = self.read_epochs(&keys).await?;
        let missing = got.iter().any(Option::is_none);
        let epoch = got.into_iter().flatten().next().unwrap_or_else(fresh);
        let e = self.set_epochs(&keys, &epoch).await?;
        Ok((e, missing))
    }

    /// A write to every slot of the site that changes nothing: Redis
    /// refuses it, as every write, when it is at `maxmemory` with
    /// `noeviction` (OOM) or cannot persist (MISCONF), so readiness says
    /// so. (`SETRANGE k 0 ""` is a write that creates no key.)
    pub(super) async fn probe_writes(&self) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        for k in self.keys.epochs() {
            pipe.cmd("SETRANGE").arg(k).arg(0).arg("");
        }
        self.query_pipe::<Vec<i64>>(&pipe)
            .await
            .map(drop)
            .map_err(store_err)
    }
}

/// Sets `key` to `value` unless it exists; answers the value it holds.
pub(crate) async fn set_nx_get<C: redis::aio::ConnectionLike + Send>(
    con: &mut C,
    key: &str,
    value: &str,
) -> Result<String, StoreError> {
    let (got,): (String,) = redis::pipe()
        .cmd("SET")
        .arg(key)
        .arg(value)
        .arg("NX")
        .ignore()
        .get(key)
        .query_async(con)
        .await
        .map_err(store_err)?;
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_tells_a_lost_redis_from_a_new_site() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(reconcile(s("a"), s("a")), Reconciled::Same("a".into()));
        assert_eq!(reconcile(None, None), Reconciled::New);
        assert_eq!(reconcile(None, s("a")), Reconciled::Lost("a".into()));
        assert_eq!(reconcile(s("b"), None), Reconciled::OnlyMain("b".into()));
        assert_eq!(
            reconcile(s("b"), s("a")),
            Reconciled::Differ {
                main: "b".into(),
                known: "a".into()
            }
        );
    }
}
