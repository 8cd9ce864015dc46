//! Calls by Redis Cluster slot. A cluster refuses a command whose keys
//! hash to more than one slot (`CROSSSLOT`) and sends a pipeline to the
//! node of its first key. So a site spread over several slots (article
//! shards on a cluster, docs/redis-keys.md) runs a pipeline as one
//! pipeline per slot, concurrently ([`query_by_slot`]); and with a
//! cluster's key names on one redis-server (`RedisOptions::cluster_names`,
//! tests only), which refuses neither, [`SlotLog`] records each call that
//! a cluster would not run as one slot: tests keep it empty
//! (docs/redis-keys.md, "One site over many primaries").

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use redis::{Cmd, Pipeline, RedisError, Value};

use super::Con;

/// The cluster slot of `key`: CRC16 (XMODEM) of the key, or of its hash
/// tag (the bytes between the first `{` and the next `}` after it, when
/// not empty), mod 16384, as Redis Cluster computes it.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|b| *b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|b| *b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) % 16384
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for b in data {
        crc ^= u16::from(*b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The key arguments of one command (its name upper-cased first): the
/// commands the store sends. Commands without keys (`SCAN`, `TIME`,
/// `WAIT`, `SCRIPT`, `INFO`, ...) have none.
fn keys_of<'a>(args: &[&'a [u8]]) -> Vec<&'a [u8]> {
    let Some(name) = args.first() else {
        return Vec::new();
    };
    let name = name.to_ascii_uppercase();
    let rest = &args[1..];
    match name.as_slice() {
        b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" => {
            let n = rest
                .get(1)
                .and_then(|n| std::str::from_utf8(n).ok())
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            rest.iter().skip(2).take(n).copied().collect()
        }
        b"MGET" | b"DEL" | b"UNLINK" | b"EXISTS" | b"PFCOUNT" | b"PFMERGE" | b"SUNIONSTORE"
        | b"SINTER" | b"SUNION" | b"RENAME" | b"RENAMENX" | b"SMOVE" | b"TOUCH" => {
            if name.as_slice() == b"SMOVE" {
                rest.iter().take(2).copied().collect()
            } else {
                rest.to_vec()
            }
        }
        b"MSET" => rest.iter().step_by(2).copied().collect(),
        b"ZUNIONSTORE" | b"ZINTERSTORE" => {
            let n = rest
                .get(1)
                .and_then(|n| std::str::from_utf8(n).ok())
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            rest.iter()
                .take(1)
                .chain(rest.iter().skip(2).take(n))
                .copied()
                .collect()
        }
        b"SCAN" | b"TIME" | b"WAIT" | b"SCRIPT" | b"INFO" | b"PING" | b"CLUSTER" | b"MULTI"
        | b"EXEC" | b"ROLE" | b"CONFIG" | b"FLUSHALL" | b"FLUSHDB" | b"DBSIZE" | b"CLIENT"
        | b"HELLO" | b"SELECT" => Vec::new(),
        _ => rest.iter().take(1).copied().collect(),
    }
}

fn args_of(cmd: &Cmd) -> Vec<&[u8]> {
    cmd.args_iter()
        .filter_map(|a| match a {
            redis::Arg::Simple(b) => Some(b),
            _ => None,
        })
        .collect()
}

/// `pipeline` as one pipeline per slot (of each command's first key; a
/// command without keys goes with the one before it), run concurrently
/// on clones of `con`: the replies in command order. A pipeline of one
/// slot runs as it is. Not for pipelines with ignored commands or
/// `atomic()` ones (their replies do not map one to one).
pub(super) async fn query_by_slot(
    con: &Con,
    pipeline: &Pipeline,
) -> redis::RedisResult<Vec<Value>> {
    let mut slots: Vec<u16> = Vec::new();
    let mut at: Vec<usize> = Vec::new();
    let mut pipes: Vec<Pipeline> = Vec::new();
    for cmd in pipeline.cmd_iter() {
        let args = args_of(cmd);
        let slot = keys_of(&args).first().map(|k| key_slot(k));
        let i = match slot {
            Some(s) => match slots.iter().position(|x| *x == s) {
                Some(i) => i,
                None => {
                    slots.push(s);
                    pipes.push(redis::pipe());
                    slots.len() - 1
                }
            },
            None if pipes.is_empty() => {
                slots.push(u16::MAX);
                pipes.push(redis::pipe());
                0
            }
            None => *at.last().unwrap_or(&0),
        };
        pipes[i].add_command(cmd.clone());
        at.push(i);
    }
    let mut con = con.clone();
    if pipes.len() <= 1 {
        return pipeline.query_async(&mut con).await;
    }
    let tasks: Vec<_> = pipes
        .into_iter()
        .map(|p| {
            let mut con = con.clone();
            tokio::spawn(async move { p.query_async::<Vec<Value>>(&mut con).await })
        })
        .collect();
    let mut replies = Vec::with_capacity(tasks.len());
    for t in tasks {
        let got = t.await.map_err(|e| {
            RedisError::from((redis::ErrorKind::Io, "pipeline task", e.to_string()))
        })??;
        replies.push(got.into_iter());
    }
    at.into_iter()
        .map(|i| {
            replies[i].next().ok_or_else(|| {
                RedisError::from((
                    redis::ErrorKind::Parse,
                    "pipeline",
                    "too few replies".to_string(),
                ))
            })
        })
        .collect()
}

/// Calls a cluster would refuse or misroute, by what they were.
#[derive(Debug, Default)]
pub struct SlotLog {
    /// Script names by SHA1, to name `EVALSHA` calls.
    names: Mutex<HashMap<String, &'static str>>,
    crossed: Mutex<BTreeSet<String>>,
}

impl SlotLog {
    /// Names the script whose SHA1 is `sha` in what the log records.
    pub fn name_script(&self, sha: &str, name: &'static str) {
        self.names
            .lock()
            .expect("slot log")
            .insert(sha.to_string(), name);
    }

    fn label(&self, args: &[&[u8]]) -> String {
        let name = args
            .first()
            .map(|n| String::from_utf8_lossy(n).to_ascii_uppercase())
            .unwrap_or_default();
        if name == "EVALSHA" {
            let sha = args
                .get(1)
                .map(|s| String::from_utf8_lossy(s).to_string())
                .unwrap_or_default();
            if let Some(n) = self.names.lock().expect("slot log").get(&sha) {
                return format!("script {n}");
            }
        }
        name
    }

    /// Records `cmd` if its keys span more than one slot.
    pub fn check(&self, cmd: &Cmd) {
        let args = args_of(cmd);
        let slots: BTreeSet<u16> = keys_of(&args).into_iter().map(key_slot).collect();
        if slots.len() > 1 {
            let label = self.label(&args);
            self.crossed.lock().expect("slot log").insert(label);
        }
    }

    /// Records each command of `pipeline` whose keys span more than one
    /// slot, and the pipeline when its commands (two or more) do together.
    pub fn check_pipeline(&self, pipeline: &Pipeline) {
        let mut all = BTreeSet::new();
        let mut labels = BTreeSet::new();
        let mut n = 0;
        for cmd in pipeline.cmd_iter() {
            self.check(cmd);
            let args = args_of(cmd);
            all.extend(keys_of(&args).into_iter().map(key_slot));
            labels.insert(self.label(&args));
            n += 1;
        }
        if n > 1 && all.len() > 1 {
            let labels: Vec<String> = labels.into_iter().collect();
            self.crossed
                .lock()
                .expect("slot log")
                .insert(format!("pipeline of {}", labels.join(", ")));
        }
    }

    /// What crossed slots so far, sorted.
    pub fn crossed(&self) -> Vec<String> {
        self.crossed
            .lock()
            .expect("slot log")
            .iter()
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slots Redis Cluster documents and `CLUSTER KEYSLOT` answers.
    #[test]
    fn slots_as_redis_computes_them() {
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"{hotrank:s0}x"), 6386);
    }

    #[test]
    fn cross_slot_calls_are_recorded() {
        let log = SlotLog::default();
        let mut one = redis::cmd("EVALSHA");
        one.arg("abc").arg(2).arg("{a}x").arg("{a}y").arg("z");
        log.check(&one);
        assert!(log.crossed().is_empty());
        log.name_script("abc", "put");
        let mut two = redis::cmd("EVALSHA");
        two.arg("abc").arg(2).arg("{a}x").arg("{b}y");
        log.check(&two);
        assert_eq!(log.crossed(), ["script put"]);
        let mut p = redis::pipe();
        p.get("{a}1").get("{a}2");
        log.check_pipeline(&p);
        assert_eq!(log.crossed().len(), 1);
        p.get("{b}3");
        log.check_pipeline(&p);
        assert_eq!(log.crossed(), ["pipeline of GET", "script put"]);
    }
}
