//! Streams, groups and entries as Redis answers them: the pieces the
//! workers, the journal and the positions share.

use redis::Value;

use crate::store::StoreError;
use crate::store::redis::v_str;

/// The consumer group of filter workers (on raw streams).
pub const FILTER_GROUP: &str = "filter";

/// The consumer group of count workers (on flagged streams).
pub const COUNT_GROUP: &str = "count";

/// What a process of the pipeline does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Gates raw entries (consumer group `filter`).
    Filter,
    /// Applies flagged entries (consumer group `count`).
    Count,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Filter => FILTER_GROUP,
            Role::Count => COUNT_GROUP,
        }
    }
}

/// Helpers on stream entry ids and groups (`pipe_ids.lua`).
pub(crate) const IDS: &str = include_str!("pipe_ids.lua");

/// One stream entry: its id and its field values, in order.
pub type Entry = (String, Vec<Vec<u8>>);

/// Key/value pairs of a RESP2 array of pairs or a RESP3 map.
pub(super) fn pairs(v: &Value) -> Vec<(&Value, &Value)> {
    match v {
        Value::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
        Value::Array(a) => a
            .iter()
            .filter_map(|p| match p {
                Value::Array(kv) if kv.len() == 2 => Some((&kv[0], &kv[1])),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Stream entries (`[[id, [f, v, ...]], ...]`) as ids and values.
pub(crate) fn parse_entries(v: &Value) -> Result<Vec<Entry>, StoreError> {
    let Value::Array(list) = v else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(list.len());
    for e in list {
        let Value::Array(e) = e else { continue };
        let [id, fields] = e.as_slice() else { continue };
        let Some(id) = v_str(id) else { continue };
        let values: Vec<Vec<u8>> = match fields {
            Value::Array(f) => f
                .iter()
                .skip(1)
                .step_by(2)
                .map(|v| match v {
                    Value::BulkString(b) => b.clone(),
                    Value::SimpleString(s) => s.as_bytes().to_vec(),
                    _ => Vec::new(),
                })
                .collect(),
            Value::Map(m) => m
                .iter()
                .map(|(_, v)| match v {
                    Value::BulkString(b) => b.clone(),
                    _ => Vec::new(),
                })
                .collect(),
            // An entry deleted while pending (XREADGROUP of a trimmed id).
            _ => continue,
        };
        out.push((id.to_string(), values));
    }
    Ok(out)
}

/// One field of one group in an `XINFO GROUPS` reply.
pub(super) fn group_field<'a>(groups: &'a Value, group: &str, field: &str) -> Option<&'a Value> {
    let Value::Array(list) = groups else {
        return None;
    };
    list.iter().find_map(|g| {
        let fields: Vec<(&Value, &Value)> = match g {
            Value::Array(a) => a
                .chunks(2)
                .filter_map(|c| Some((c.first()?, c.get(1)?)))
                .collect(),
            Value::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
            _ => return None,
        };
        let name = fields.iter().find(|(k, _)| v_str(k) == Some("name"))?;
        if v_str(name.1) != Some(group) {
            return None;
        }
        fields
            .iter()
            .find(|(k, _)| v_str(k) == Some(field))
            .map(|(_, v)| *v)
    })
}

/// A stream entry id (`ms-seq`) as numbers, for ordering.
pub fn stream_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}
