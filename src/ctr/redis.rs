//! The click-through counts of a Redis site (docs/redis-keys.md,
//! "Click-through"): `<prefix>ctr:lists`, the set of list names counted
//! (at most `ctr.max_lists`), and per list the hash
//! `<prefix>ctr:list:<list>` with fields `i<position>` (impressions) and
//! `c<position>` (clicks), raised by `HINCRBY`. Both under the site's
//! prefix, so on a Redis Cluster they carry its hash tag and one call
//! touches one slot. List names are validated ([`super::parse_list`]:
//! no `{`, `}` or spaces) before they reach a key.

use std::collections::BTreeMap;

use super::{Counts, CtrError, Hit, Kind, MAX_POSITION, Refused, Tally};
use crate::config::Config;
use crate::store::StoreSettings;
use crate::store::redis::{Con, RedisOptions, RedisStore};

/// Adds a list's increments, unless it is new and the set is full.
/// KEYS: the list set, the list's hash. ARGV: the cap, the list name,
/// then field and increment pairs. Returns 1 if counted, 0 if refused.
const RECORD: &str = r"
if redis.call('SISMEMBER', KEYS[1], ARGV[2]) == 0 then
  if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
  redis.call('SADD', KEYS[1], ARGV[2])
end
for i = 3, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1])
end
return 1
";

pub struct RedisCtr {
    con: Con,
    prefix: String,
    script: redis::Script,
}

fn err(e: redis::RedisError) -> CtrError {
    CtrError(format!("redis: {e}"))
}

impl RedisCtr {
    /// The configured Redis (or cluster), with the store's key names.
    pub fn connect(config: &Config) -> Result<RedisCtr, CtrError> {
        let store = RedisStore::connect(
            RedisOptions::from_config(config),
            StoreSettings::from_config(config),
        )
        .map_err(|e| CtrError(e.to_string()))?;
        Ok(RedisCtr {
            con: store.con(),
            prefix: store.keys().prefix.clone(),
            script: redis::Script::new(RECORD),
        })
    }

    fn lists_key(&self) -> String {
        format!("{}ctr:lists", self.prefix)
    }

    fn list_key(&self, list: &str) -> String {
        format!("{}ctr:list:{list}", self.prefix)
    }

    pub async fn record(
        &self,
        hits: &[Hit],
        max_lists: usize,
    ) -> Result<Vec<Result<(), Refused>>, CtrError> {
        // One call per list, its increments summed.
        let mut by_list: BTreeMap<&str, BTreeMap<String, u64>> = BTreeMap::new();
        for h in hits {
            let field = match h.kind {
                Kind::Impression => format!("i{}", h.position),
                Kind::Click => format!("c{}", h.position),
            };
            *by_list
                .entry(&h.list)
                .or_default()
                .entry(field)
                .or_default() += 1;
        }
        let mut con = self.con.clone();
        let mut refused = Vec::new();
        for (list, fields) in by_list {
            let mut call = self.script.key(self.lists_key());
            call.key(self.list_key(list)).arg(max_lists).arg(list);
            for (f, n) in fields {
                call.arg(f).arg(n);
            }
            let counted: i64 = call.invoke_async(&mut con).await.map_err(err)?;
            if counted == 0 {
                refused.push(list);
            }
        }
        Ok(hits
            .iter()
            .map(|h| {
                if refused.contains(&h.list.as_str()) {
                    Err(Refused::TooManyLists(max_lists))
                } else {
                    Ok(())
                }
            })
            .collect())
    }

    pub async fn counts(&self) -> Result<Counts, CtrError> {
        let mut con = self.con.clone();
        let lists: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.lists_key())
            .query_async(&mut con)
            .await
            .map_err(err)?;
        let mut out = Counts::new();
        if lists.is_empty() {
            return Ok(out);
        }
        let mut pipe = redis::pipe();
        for l in &lists {
            pipe.cmd("HGETALL").arg(self.list_key(l));
        }
        let rows: Vec<Vec<(String, u64)>> = pipe.query_async(&mut con).await.map_err(err)?;
        for (list, fields) in lists.into_iter().zip(rows) {
            let row = out.entry(list).or_default();
            for (f, n) in fields {
                let (kind, p) = f.split_at(1.min(f.len()));
                let Some(p) = p.parse::<u32>().ok().filter(|p| *p <= MAX_POSITION) else {
                    continue;
                };
                let t: &mut Tally = row.entry(p).or_default();
                match kind {
                    "i" => t.impressions = n,
                    "c" => t.clicks = n,
                    _ => {}
                }
            }
        }
        Ok(out)
    }
}
