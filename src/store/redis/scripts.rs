//! The script registry: each Lua script assembled from its chunks (after
//! `declared.lua`'s key check) once per store, and loaded by SHA into Redis.

use redis::Script;

use super::{Keys, RedisStore, archive, ops, store_err};
use crate::store::StoreError;

pub(crate) struct Scripts {
    pub(super) ingest: Script,
    pub(super) window: Script,
    pub(super) sync: Script,
    pub(super) writeback: Script,
    pub(super) put: Script,
    pub(super) delete: Script,
    pub(super) post: Script,
    pub(super) vote: Script,
    /// A post over a site spread over slots: the id (site slot), then the
    /// article (its shard's slot).
    pub(super) post_id: Script,
    pub(super) post_at: Script,
    /// Ingest over a split site: the gate stage (site slot) and a count
    /// stage (a shard's slot), split.rs.
    pub(super) gate_stage: Script,
    pub(super) count_stage: Script,
    /// The same four on a pipeline node with a journal (ops.rs).
    pub(super) journaled: ops::OpScripts,
}

/// A script with the key check (`declared.lua`) in front.
pub(crate) fn script(body: &str) -> Script {
    chunks(&[body])
}

/// [`chunks`] after the shard helpers of the site `keys` names (its
/// article shards and, on a cluster, its tag: `shard.lua`,
/// [`Keys::lua_chunk`]).
pub(crate) fn sharded(keys: &Keys, parts: &[&str]) -> Script {
    let head = keys.lua_chunk();
    let mut all = vec![head.as_str()];
    all.extend_from_slice(parts);
    chunks(&all)
}

/// One script from Lua chunks, concatenated in order after `declared.lua`:
/// a later chunk sees the locals of the earlier ones.
pub(crate) fn chunks(parts: &[&str]) -> Script {
    let mut src = String::from(include_str!("declared.lua"));
    for p in parts {
        src.push_str(p);
    }
    Script::new(&src)
}

/// The direct store's ingest script (one shard): its head (`ingest.lua`),
/// the gate, the counters and its reply, in one atomic call.
pub fn ingest_script() -> Script {
    ingest_script_with(&Keys::new(""), &[])
}

/// [`ingest_script`] for the site `keys` names (its shards and tag), with
/// more counter writes (`extra` chunks) after `apply.lua`: seed layout's
/// keys (seed.rs).
pub(crate) fn ingest_script_with(keys: &Keys, extra: &[&str]) -> Script {
    let mut parts = vec![
        EPOCH_CHECK,
        include_str!("ingest_epoch.lua"),
        "local GATE_STAGE = false\n",
        EVENT,
        include_str!("ingest.lua"),
        EVICTED,
        COMMON,
        GATE,
        APPLY,
        TOTALS,
    ];
    parts.extend_from_slice(extra);
    parts.push(include_str!("reply.lua"));
    sharded(keys, &parts)
}

/// One event from script arguments (`event.lua`).
pub(crate) const EVENT: &str = include_str!("event.lua");
/// The gate: reads, decides and writes gate state (`gate.lua`), on the
/// site's gate clock (`gate_clock.lua`).
pub(crate) const GATE: &str = concat!(include_str!("gate_clock.lua"), include_str!("gate.lua"));
/// The counters of gated events (`apply.lua`).
pub(crate) const APPLY: &str = include_str!("apply.lua");
/// The site's totals of gated events (`totals.lua`).
pub(crate) const TOTALS: &str = include_str!("totals.lua");
/// Refuses, before any write, a batch touching an evicted article
/// (`evicted.lua`).
pub(crate) const EVICTED: &str = include_str!("evicted.lua");
/// Helpers `GATE` and `APPLY` share (`common.lua`).
pub(crate) const COMMON: &str = include_str!("common.lua");
/// The epoch check of every write a node sends (`epoch.lua`, marker.rs).
pub(crate) const EPOCH_CHECK: &str = include_str!("epoch.lua");

impl Scripts {
    /// The scripts of the site `keys` names.
    pub(super) fn new(keys: &Keys) -> Self {
        Scripts {
            ingest: ingest_script_with(keys, &[]),
            window: script(include_str!("window.lua")),
            sync: script(include_str!("sync.lua")),
            writeback: script(include_str!("writeback.lua")),
            put: ops::plain(keys, ops::OpKind::Put),
            post: ops::plain(keys, ops::OpKind::Post),
            vote: ops::plain(keys, ops::OpKind::Vote),
            delete: ops::plain(keys, ops::OpKind::Delete),
            post_id: script(include_str!("post_id.lua")),
            gate_stage: sharded(
                keys,
                &[
                    include_str!("gate_stage_pre.lua"),
                    EVENT,
                    include_str!("ingest.lua"),
                    COMMON,
                    GATE,
                    TOTALS,
                    include_str!("gate_stage.lua"),
                ],
            ),
            count_stage: sharded(
                keys,
                &[
                    include_str!("count_stage.lua"),
                    COMMON,
                    APPLY,
                    include_str!("count_stage_end.lua"),
                ],
            ),
            post_at: sharded(
                keys,
                &[
                    include_str!("facets.lua"),
                    include_str!("post_at.lua"),
                    include_str!("post_make.lua"),
                    include_str!("post_at_end.lua"),
                ],
            ),
            journaled: ops::OpScripts::new(keys),
        }
    }

    /// The names of [`Scripts::all`], in its order.
    pub(super) const NAMES: [&'static str; 16] = [
        "ingest",
        "window",
        "sync",
        "writeback",
        "put",
        "delete",
        "post",
        "vote",
        "put (journaled)",
        "delete (journaled)",
        "post (journaled)",
        "vote (journaled)",
        "post: id",
        "post: article",
        "ingest: gate stage",
        "ingest: count stage",
    ];

    pub(super) fn all(&self) -> [&Script; 16] {
        let j = &self.journaled;
        [
            &self.ingest,
            &self.window,
            &self.sync,
            &self.writeback,
            &self.put,
            &self.delete,
            &self.post,
            &self.vote,
            &j.put,
            &j.delete,
            &j.post,
            &j.vote,
            &self.post_id,
            &self.post_at,
            &self.gate_stage,
            &self.count_stage,
        ]
    }
}

impl RedisStore {
    pub(crate) async fn load_scripts(&self) -> Result<(), StoreError> {
        let mut con = self.con();
        for s in self.scripts.all().into_iter().chain(archive::scripts()) {
            s.prepare_invoke()
                .load_async(&mut con)
                .await
                .map_err(store_err)?;
        }
        Ok(())
    }
}
