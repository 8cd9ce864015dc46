//! The Redis store's outbox: keys beside the store's, under the site's
//! prefix (on a cluster its hash tag, so every webhook key shares the
//! site's slot and each script below runs on one node, atomically).
//! docs/redis-keys.md, "Webhooks", lists them:
//!
//! - `webhooks:subs` (hash): subscription id → JSON;
//! - `webhooks:state` (hash): subscription id → JSON membership and count;
//! - `webhooks:outbox` (stream): every decided transition (`delivery`,
//!   `entry`), capped at ~10 000 entries — the log of decisions;
//! - `webhooks:pending` (hash): delivery id → entry, for each transition
//!   not yet delivered or given up: the "delivered" marker is its removal;
//! - `webhooks:attempts:<id>` (list): a subscription's last 100 attempts;
//! - `webhooks:lease` (string, `PX`): the node that decides and sends.
//!
//! `commit.lua` (inline below) writes the state, `XADD`s and `HSET`s the
//! entries in one script, and only while the caller holds the lease: two
//! nodes never both decide a transition.

use async_trait::async_trait;
use redis::Script;

use super::model::{ATTEMPTS_KEPT, Attempt, Entry, SubState, Subscription};
use super::outbox::Outbox;
use crate::store::StoreError;
use crate::store::redis::Con;

/// Writes a subscription's state and its new entries while `node` holds
/// the lease (or `lease` is `0`).
const COMMIT: &str = r"
if ARGV[2] == '1' and redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
for i = 5, #ARGV, 2 do
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', 10000, '*', 'delivery', ARGV[i], 'entry', ARGV[i + 1])
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
end
return 1
";

/// Takes the lease if free, renews it if held by `node`.
const LEASE: &str = r"
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0
";

const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
";

/// Logs an attempt (not a `dropped` one: its subscription's log went
/// with it); a final one removes the entry from `pending`.
const RECORD: &str = r"
if ARGV[3] ~= 'dropped' then
  redis.call('LPUSH', KEYS[1], ARGV[1])
  redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[4]) - 1)
end
if ARGV[3] ~= 'retry' then redis.call('HDEL', KEYS[2], ARGV[2]) end
return 1
";

const DELETE: &str = r"
local n = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[3])
return n
";

/// The Redis outbox ([`Outbox`] in the site's keys).
pub struct RedisOutbox {
    con: Con,
    prefix: String,
    /// This node's lease token.
    node: String,
}

impl RedisOutbox {
    /// Over the store's connection, under its key prefix (on a cluster the
    /// prefix is the site's hash tag, `{site}`).
    pub fn new(con: Con, prefix: &str) -> Self {
        RedisOutbox {
            con,
            prefix: prefix.to_string(),
            node: crate::secrets::random_hex(12),
        }
    }

    fn key(&self, name: &str) -> String {
        format!("{}webhooks:{name}", self.prefix)
    }

    fn attempts_key(&self, id: &str) -> String {
        format!("{}webhooks:attempts:{id}", self.prefix)
    }
}

fn err(e: redis::RedisError) -> StoreError {
    StoreError::Unavailable(format!("redis (webhooks): {e}"))
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("webhook records serialize")
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Internal(format!("webhooks {what}: {e}")))
}

#[async_trait]
impl Outbox for RedisOutbox {
    async fn put_subscription(&self, s: &Subscription) -> Result<(), StoreError> {
        redis::cmd("HSET")
            .arg(self.key("subs"))
            .arg(&s.id)
            .arg(json(s))
            .query_async::<i64>(&mut self.con.clone())
            .await
            .map(drop)
            .map_err(err)
    }

    async fn delete_subscription(&self, id: &str) -> Result<bool, StoreError> {
        let n: i64 = Script::new(DELETE)
            .key(self.key("subs"))
            .key(self.key("state"))
            .key(self.attempts_key(id))
            .arg(id)
            .invoke_async(&mut self.con.clone())
            .await
            .map_err(err)?;
        Ok(n > 0)
    }

    async fn subscriptions(&self) -> Result<Vec<Subscription>, StoreError> {
        let all: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(self.key("subs"))
            .query_async(&mut self.con.clone())
            .await
            .map_err(err)?;
        let mut subs = all
            .iter()
            .map(|(_, v)| parse::<Subscription>("subscription", v))
            .collect::<Result<Vec<_>, _>>()?;
        subs.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(subs)
    }

    async fn state(&self, id: &str) -> Result<SubState, StoreError> {
        let v: Option<String> = redis::cmd("HGET")
            .arg(self.key("state"))
            .arg(id)
            .query_async(&mut self.con.clone())
            .await
            .map_err(err)?;
        v.map_or(Ok(SubState::default()), |v| parse("state", &v))
    }

    async fn commit(
        &self,
        id: &str,
        state: &SubState,
        entries: &[Entry],
        lease: bool,
    ) -> Result<bool, StoreError> {
        let script = Script::new(COMMIT);
        let mut call = script.key(self.key("lease"));
        call.key(self.key("state"))
            .key(self.key("outbox"))
            .key(self.key("pending"))
            .arg(&self.node)
            .arg(if lease { "1" } else { "0" })
            .arg(id)
            .arg(json(state));
        for e in entries {
            call.arg(&e.delivery).arg(json(e));
        }
        let done: i64 = call
            .invoke_async(&mut self.con.clone())
            .await
            .map_err(err)?;
        Ok(done == 1)
    }

    async fn pending(&self) -> Result<Vec<Entry>, StoreError> {
        let all: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(self.key("pending"))
            .query_async(&mut self.con.clone())
            .await
            .map_err(err)?;
        let mut out = all
            .iter()
            .map(|(_, v)| parse::<Entry>("entry", v))
            .collect::<Result<Vec<_>, _>>()?;
        out.sort_by(|a, b| (a.decided_ms, &a.delivery).cmp(&(b.decided_ms, &b.delivery)));
        Ok(out)
    }

    async fn record(&self, a: &Attempt) -> Result<(), StoreError> {
        Script::new(RECORD)
            .key(self.attempts_key(&a.subscription))
            .key(self.key("pending"))
            .arg(json(a))
            .arg(&a.delivery)
            .arg(&a.outcome)
            .arg(ATTEMPTS_KEPT)
            .invoke_async::<i64>(&mut self.con.clone())
            .await
            .map(drop)
            .map_err(err)
    }

    async fn attempts(&self, id: &str) -> Result<Vec<Attempt>, StoreError> {
        let all: Vec<String> = redis::cmd("LRANGE")
            .arg(self.attempts_key(id))
            .arg(0)
            .arg(-1)
            .query_async(&mut self.con.clone())
            .await
            .map_err(err)?;
        all.iter().map(|v| parse("attempt", v)).collect()
    }

    async fn lease(&self, ttl_ms: u64) -> Result<bool, StoreError> {
        let held: i64 = Script::new(LEASE)
            .key(self.key("lease"))
            .arg(&self.node)
            .arg(ttl_ms)
            .invoke_async(&mut self.con.clone())
            .await
            .map_err(err)?;
        Ok(held == 1)
    }

    async fn release(&self) {
        let released = Script::new(RELEASE)
            .key(self.key("lease"))
            .arg(&self.node)
            .invoke_async::<i64>(&mut self.con.clone())
            .await;
        if let Err(e) = released {
            tracing::debug!(error = %e, "webhooks: lease not released");
        }
    }
}
