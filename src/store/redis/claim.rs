//! A node's claim to rebuild a ranking: a lease in Redis, renewed while
//! held and given back when dropped, that other nodes' queries wait on.

use std::sync::Arc;

use super::changes::Synced;
use super::keys::ranking_claim;
use super::{RedisStore, store_err};
use crate::store::StoreError;

/// The longest a node waits on another's claim to rebuild a ranking
/// before it rebuilds the ranking itself (a holder alive but stuck).
const REBUILD_CLAIM: std::time::Duration = std::time::Duration::from_secs(120);
/// How long a claim lasts unless its node renews it: a node that died
/// mid-rebuild holds the others up this long at most.
const CLAIM_LEASE: std::time::Duration = std::time::Duration::from_secs(10);
/// How often a node renews the claims it holds.
const CLAIM_RENEW: std::time::Duration = std::time::Duration::from_secs(3);
/// How often a node waiting on another's rebuild looks again.
const REBUILD_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Deletes a claim (KEYS[1]) only if it still holds this token (ARGV[1]).
static GIVE_BACK: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    )
});

/// Extends a claim (KEYS[1]) by ARGV[2] ms only if it still holds this
/// token (ARGV[1]).
static RENEW: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0",
    )
});

/// Claims (key, token) this node has dropped and not yet given back: a
/// task gives each back at once; one Redis did not take (away) is given
/// back before the node next waits on a claim, so it never waits on one
/// of its own, and at shutdown (the task may not run once the runtime
/// stops).
pub(super) type Orphans = Arc<parking_lot::Mutex<Vec<(String, String)>>>;

/// A node's claim to rebuild a ranking (`<ranking>:rebuilding`, holding a
/// token of its own, in the ranking's slot): queries of other nodes that
/// need the same rebuild wait while it stands, then walk what it built.
/// A lease: it lasts [`CLAIM_LEASE`], renewed every [`CLAIM_RENEW`] by a
/// task while the claim lives. Given back when dropped (a task deletes it
/// if it still holds this token; if Redis is away, into `orphans`).
pub(super) struct Claim {
    con: super::Con,
    key: String,
    token: String,
    renew: tokio::task::JoinHandle<()>,
    orphans: Orphans,
}

impl Claim {
    /// Claims the rebuild of the ranking `zkey` unless another node holds
    /// the claim (`None`).
    async fn take(
        mut con: super::Con,
        zkey: &str,
        orphans: &Orphans,
    ) -> Result<Option<Claim>, StoreError> {
        let key = ranking_claim(zkey);
        let token = format!("{:016x}", rand::random::<u64>());
        let lease = CLAIM_LEASE.as_millis() as u64;
        let got: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(lease)
            .query_async(&mut con)
            .await
            .map_err(store_err)?;
        if got.is_none() {
            return Ok(None);
        }
        let renew = {
            let (mut con, key, token) = (con.clone(), key.clone(), token.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(CLAIM_RENEW).await;
                    let held: redis::RedisResult<i64> = RENEW
                        .key(&key)
                        .arg(&token)
                        .arg(lease)
                        .invoke_async(&mut con)
                        .await;
                    if let Ok(0) = held {
                        return;
                    }
                }
            })
        };
        let orphans = orphans.clone();
        Ok(Some(Claim {
            con,
            key,
            token,
            renew,
            orphans,
        }))
    }

    /// Gives back the claims this node dropped (`orphans`); those Redis
    /// does not take stay for the next call.
    pub(super) async fn give_back_orphans(mut con: super::Con, orphans: &Orphans) {
        let held = std::mem::take(&mut *orphans.lock());
        for (key, token) in held {
            let gone: redis::RedisResult<i64> =
                GIVE_BACK.key(&key).arg(&token).invoke_async(&mut con).await;
            if let Err(e) = gone {
                tracing::warn!(%key, error = %e, "could not give back a rebuild claim; trying again later (it expires by itself)");
                orphans.lock().push((key, token));
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.renew.abort();
        let key = std::mem::take(&mut self.key);
        let token = std::mem::take(&mut self.token);
        self.orphans.lock().push((key, token));
        let (con, orphans) = (self.con.clone(), self.orphans.clone());
        tokio::spawn(async move { Claim::give_back_orphans(con, &orphans).await });
    }
}

impl RedisStore {
    /// When a shard of the ranking `zkeys` needs a rebuild: claims it, or,
    /// while another query (of any node) holds the claim, looks again
    /// (`synced` anew) until the ranking is built, the claim is gone, or
    /// [`REBUILD_CLAIM`] has passed. The claim, if this query is to
    /// rebuild; `None` once nothing is stale (or after the wait).
    pub(super) async fn claim_rebuild(
        &self,
        zkeys: &[String],
        synced: &mut Vec<Synced>,
    ) -> Result<Option<Claim>, StoreError> {
        let waited = std::time::Instant::now();
        if !self.orphans.lock().is_empty() {
            Claim::give_back_orphans(self.con(), &self.orphans).await;
        }
        while synced.iter().any(Synced::stale) {
            if let Some(claim) = Claim::take(self.con(), &zkeys[0], &self.orphans).await? {
                // The claim's last holder may have finished just before.
                *synced = self.sync(Some(zkeys)).await?;
                return Ok(synced.iter().any(Synced::stale).then_some(claim));
            }
            if waited.elapsed() >= REBUILD_CLAIM {
                break;
            }
            tokio::time::sleep(REBUILD_POLL).await;
            *synced = self.sync(Some(zkeys)).await?;
        }
        Ok(None)
    }
}
