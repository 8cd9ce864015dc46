//! Article operations (PUT, seed 003 posts and votes, deletes) on a
//! pipeline node with a journal (docs/design.md, "Disaster recovery"):
//! they are applied synchronously, as on the direct store, but each one
//! that changes an article is numbered in the article's own sequence
//! (`ops` in `meta:article:<id>`, in the same script call) and journaled
//! with that number before it is acknowledged. The archive records each
//! article's number with its state, so a restore replays exactly the
//! operations after it, in the article's order.
//!
//! The scripts are `put.lua`, `post.lua`, `vote.lua` and `delete.lua`
//! behind `op_plain.lua` (no journal: nothing numbered) or between
//! `op_journal.lua` and `op_journal_end.lua`.

use redis::Script;

use super::{Keys, RedisStore, Scripts, StoreError, sharded};

/// One kind of article operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Put,
    Post,
    Vote,
    Delete,
}

impl OpKind {
    /// Its code in the journal (field `o`).
    pub fn code(self) -> &'static str {
        match self {
            OpKind::Put => "u",
            OpKind::Post => "p",
            OpKind::Vote => "v",
            OpKind::Delete => "d",
        }
    }

    pub fn of_code(code: &str) -> Option<OpKind> {
        [OpKind::Put, OpKind::Post, OpKind::Vote, OpKind::Delete]
            .into_iter()
            .find(|k| k.code() == code)
    }

    fn body(self) -> &'static str {
        match self {
            OpKind::Put => concat!(include_str!("facets.lua"), include_str!("put.lua")),
            OpKind::Post => concat!(
                include_str!("facets.lua"),
                include_str!("post.lua"),
                include_str!("post_make.lua"),
                include_str!("post_end.lua")
            ),
            OpKind::Vote => include_str!("vote.lua"),
            OpKind::Delete => concat!(include_str!("facets.lua"), include_str!("delete.lua")),
        }
    }
}

/// The script of `kind` without a journal, for the site `keys` names.
pub(super) fn plain(keys: &Keys, kind: OpKind) -> Script {
    sharded(
        keys,
        &[
            super::EPOCH_CHECK,
            include_str!("op_plain.lua"),
            kind.body(),
        ],
    )
}

/// The four operations as a node with a journal runs them.
pub(super) struct OpScripts {
    pub put: Script,
    pub post: Script,
    pub vote: Script,
    pub delete: Script,
}

impl OpScripts {
    /// For the site `keys` names.
    pub fn new(keys: &Keys) -> Self {
        let j = |k: OpKind| {
            sharded(
                keys,
                &[
                    super::EPOCH_CHECK,
                    include_str!("op_journal.lua"),
                    k.body(),
                    include_str!("op_journal_end.lua"),
                ],
            )
        };
        OpScripts {
            put: j(OpKind::Put),
            post: j(OpKind::Post),
            vote: j(OpKind::Vote),
            delete: j(OpKind::Delete),
        }
    }
}

impl Scripts {
    fn op(&self, kind: OpKind, journaled: bool) -> &Script {
        let j = &self.journaled;
        match (kind, journaled) {
            (OpKind::Put, false) => &self.put,
            (OpKind::Post, false) => &self.post,
            (OpKind::Vote, false) => &self.vote,
            (OpKind::Delete, false) => &self.delete,
            (OpKind::Put, true) => &j.put,
            (OpKind::Post, true) => &j.post,
            (OpKind::Vote, true) => &j.vote,
            (OpKind::Delete, true) => &j.delete,
        }
    }
}

/// How an operation runs.
#[derive(Debug, Clone, Copy)]
pub enum OpRun<'a> {
    /// The direct store, or a pipeline without a journal.
    Plain,
    /// On a pipeline node with a journal: only while Redis holds `epoch`,
    /// and numbered.
    Journaled { epoch: &'a str },
}

/// What a journaled operation that changed its article answers besides
/// its reply: its number in the article's sequence, Redis's time (ms) and
/// the script's arguments, which a replay passes again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpStamp {
    pub seq: u64,
    pub t_ms: u64,
    pub args: Vec<Vec<u8>>,
}

/// One journaled operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpEntry {
    /// Its place among raw entries (`<t_ms>-0`): the replay merges
    /// operations and events by it.
    pub x: String,
    pub kind: OpKind,
    pub article: String,
    pub seq: u64,
    pub args: Vec<Vec<u8>>,
}

impl OpEntry {
    pub fn new(kind: OpKind, article: &str, stamp: OpStamp) -> Self {
        OpEntry {
            x: format!("{}-0", stamp.t_ms),
            kind,
            article: article.to_string(),
            seq: stamp.seq,
            args: stamp.args,
        }
    }

    /// Its stream fields: `x`, `o` (kind), `a`, `s`, then `g0`, `g1`, ...
    pub fn fields(&self) -> Vec<(String, Vec<u8>)> {
        let mut f = vec![
            ("x".to_string(), self.x.as_bytes().to_vec()),
            ("o".to_string(), self.kind.code().as_bytes().to_vec()),
            ("a".to_string(), self.article.as_bytes().to_vec()),
            ("s".to_string(), self.seq.to_string().into_bytes()),
        ];
        for (i, a) in self.args.iter().enumerate() {
            f.push((format!("g{i}"), a.clone()));
        }
        f
    }

    /// The entry of stream values in [`fields`](Self::fields)' order.
    pub fn parse(values: Vec<Vec<u8>>) -> Option<OpEntry> {
        let mut it = values.into_iter();
        let mut text = || String::from_utf8(it.next()?).ok();
        let x = text()?;
        let kind = OpKind::of_code(&text()?)?;
        let article = text()?;
        let seq = text()?.parse().ok()?;
        Some(OpEntry {
            x,
            kind,
            article,
            seq,
            args: it.collect(),
        })
    }
}

impl RedisStore {
    /// Runs operation `kind` (its declared `keys` and own `args`) as `run`
    /// says. Journaled, answers its stamp when it changed its article;
    /// `Unavailable` (nothing written) when Redis lost the epoch.
    pub(super) async fn op_eval<T: redis::FromRedisValue>(
        &self,
        kind: OpKind,
        keys: &[String],
        args: &[&[u8]],
        run: &OpRun<'_>,
    ) -> Result<(T, Option<OpStamp>), StoreError> {
        let OpRun::Journaled { epoch } = run else {
            // The direct store's epoch (marker.rs; '' on a pipeline's).
            let (epoch_key, epoch) = self.script_epoch().await?;
            let mut keys = keys.to_vec();
            if !epoch.is_empty() {
                keys.push(epoch_key.clone());
            }
            let mut all = args.to_vec();
            all.extend([epoch_key.as_bytes(), epoch.as_bytes()]);
            let r = self.eval(self.scripts.op(kind, false), &keys, &all).await?;
            return Ok((r, None));
        };
        let epoch_key = self.keys.epoch();
        let mut keys = keys.to_vec();
        keys.push(epoch_key.clone());
        let mut all = args.to_vec();
        all.extend([epoch_key.as_bytes(), epoch.as_bytes(), b""]);
        let (r, seq, t_ms) = self.op_call(kind, &keys, &all).await?;
        let stamp = (seq > 0).then(|| OpStamp {
            seq,
            t_ms,
            args: args.iter().map(|a| a.to_vec()).collect(),
        });
        Ok((
            redis::from_redis_value(r).map_err(|_| super::bad_reply(kind.code()))?,
            stamp,
        ))
    }

    /// The journaled script of `kind` with its full arguments: (reply,
    /// number, time).
    async fn op_call(
        &self,
        kind: OpKind,
        keys: &[String],
        args: &[&[u8]],
    ) -> Result<(redis::Value, u64, u64), StoreError> {
        // A Redis that lost the epoch answers EPOCH: `Unavailable` (store_err).
        let (r, seq, t): (redis::Value, u64, String) =
            self.eval(self.scripts.op(kind, true), keys, args).await?;
        Ok((r, seq, t.parse().map_err(|_| super::bad_reply("op time"))?))
    }

    /// Applies journaled operations again, in order, in one round trip
    /// (a restore's replay: no epoch check, a post at the id it had).
    /// Answers the number each got in its article's sequence (0: it changed
    /// nothing).
    pub(crate) async fn replay_ops(&self, ops: &[OpEntry]) -> Result<Vec<u64>, StoreError> {
        let got: Vec<(redis::Value, u64, String)> = self
            .eval_pipe(|p| {
                for op in ops {
                    let c = p
                        .cmd("EVALSHA")
                        .arg(self.scripts.op(op.kind, true).get_hash())
                        .arg(0);
                    for a in &op.args {
                        c.arg(&a[..]);
                    }
                    let at = if op.kind == OpKind::Post {
                        op.article.as_str()
                    } else {
                        ""
                    };
                    c.arg("").arg("").arg(at);
                }
            })
            .await?;
        Ok(got.into_iter().map(|(_, seq, _)| seq).collect())
    }
}
