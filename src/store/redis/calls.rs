//! Sending calls: pipelines (split by slot when the site spans slots,
//! retried while a slot moves) and `EVALSHA` calls that load the scripts
//! again on `NOSCRIPT`.

use std::time::Duration;

use redis::{Script, Value};

use super::errors::{is_noscript, slot_moving};
use super::{RedisStore, bad_reply, slots, store_err};
use crate::store::StoreError;

/// How long (ms) a pipeline may wait for a slot being moved
/// (`RedisStore::query_pipe`).
pub(super) const SLOT_MOVE_WAIT_MS: u64 = 3000;

impl RedisStore {
    /// Runs a pipeline of `EVALSHA` calls built by `build`; loads the
    /// scripts and retries once on `NOSCRIPT` (a restarted or flushed
    /// server: nothing ran).
    pub(crate) async fn eval_pipe<T: redis::FromRedisValue>(
        &self,
        build: impl Fn(&mut redis::Pipeline),
    ) -> Result<T, StoreError> {
        let mut pipe = redis::pipe();
        build(&mut pipe);
        match self.query_pipe::<T>(&pipe).await {
            Ok(v) => Ok(v),
            Err(e) if is_noscript(&e) => {
                self.load_scripts().await?;
                self.query_pipe::<T>(&pipe).await.map_err(store_err)
            }
            Err(e) => Err(store_err(e)),
        }
    }

    /// `pipe`'s replies: one pipeline, or, when the site's keys span
    /// slots (shards on a cluster), one pipeline per slot run
    /// concurrently (slots.rs), the replies in command order. On a
    /// cluster, a pipeline that still meets a slot being moved after the
    /// client's own retries (`ASK`, `MOVED`, `TRYAGAIN`: a slot with many
    /// keys stays half-moved for seconds, and the client's `ASKING` covers
    /// only a pipeline's first command) is sent again every 100 ms for up
    /// to [`SLOT_MOVE_WAIT_MS`]: the slot has a primary, so this is no
    /// time to answer 503. Nothing in such a reply ran past the refused
    /// command, and every pipeline here may run twice (the client already
    /// re-sends whole pipelines: batch ids, markers, idempotent writes).
    pub(crate) async fn query_pipe<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> redis::RedisResult<T> {
        let mut waited = 0;
        loop {
            match self.query_pipe_once(pipe).await {
                Err(e) if self.opts.cluster && slot_moving(&e) && waited < SLOT_MOVE_WAIT_MS => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    waited += 100;
                }
                r => return r,
            }
        }
    }

    /// One try of [`query_pipe`](Self::query_pipe).
    pub(crate) async fn query_pipe_once<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> redis::RedisResult<T> {
        let mut con = self.con();
        if !self.keys.spans_slots() {
            return pipe.query_async::<T>(&mut con).await;
        }
        let got = slots::query_by_slot(&con, pipe).await?;
        Ok(T::from_redis_value(Value::Array(got))?)
    }

    /// One `EVALSHA` declaring `keys` (every key the script touches: on a
    /// cluster they route the call and keep it right while a slot moves).
    pub(crate) async fn eval<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        keys: &[String],
        args: &[&[u8]],
    ) -> Result<T, StoreError> {
        let mut v: Vec<T> = self
            .eval_pipe(|p| {
                let c = p.cmd("EVALSHA").arg(script.get_hash()).arg(keys.len());
                for k in keys {
                    c.arg(k.as_str());
                }
                for a in args {
                    c.arg(*a);
                }
            })
            .await?;
        v.pop().ok_or_else(|| bad_reply("EVALSHA"))
    }

    /// [`eval`](Self::eval) of `script` once per call (its keys and
    /// arguments), all in one pipeline: one reply per call, in order.
    pub(crate) async fn eval_each<T: redis::FromRedisValue, B: AsRef<[u8]>>(
        &self,
        script: &Script,
        calls: &[(Vec<B>, Vec<B>)],
    ) -> Result<Vec<T>, StoreError> {
        let got: Vec<T> = self
            .eval_pipe(|p| {
                for (keys, args) in calls {
                    let c = p.cmd("EVALSHA").arg(script.get_hash()).arg(keys.len());
                    for k in keys {
                        c.arg(k.as_ref());
                    }
                    for a in args {
                        c.arg(a.as_ref());
                    }
                }
            })
            .await?;
        if got.len() != calls.len() {
            return Err(bad_reply("EVALSHA"));
        }
        Ok(got)
    }
}

/// Most articles one call (or pipeline) of a query reads or writes back:
/// a ranking's rebuild over every article of a shard, or a catch-up after
/// many changes, goes in many calls, so none runs into the response
/// timeout and Redis serves other clients between them.
pub(super) const CHUNK: usize = 1000;

/// A sorted-set score as a command argument (`inf`, `-inf` for the
/// infinite ones).
pub(super) fn score_arg(s: f64) -> String {
    if s.is_finite() {
        format!("{s}")
    } else if s > 0.0 {
        "inf".into()
    } else {
        "-inf".into()
    }
}
