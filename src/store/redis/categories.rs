//! `scale=category` on Redis: the counted events of categories in a
//! ranking's window ([`crate::model::category_hours`]), read from the
//! hashes apply.lua keeps (`stats:cat:h:<hour>` and `stats:cat:d:<day>`,
//! field = category, `""` for none; one copy per shard when the site
//! spans slots, [`super::Keys::ledgers`]): the window's whole days from
//! the day hashes and its last day's hours from the hour hashes, one
//! `HMGET` each in one pipeline, for the categories a query has not read
//! yet ([`Scales`]: one read per category and query, however many chunks
//! its walk scores).

use std::collections::HashMap;

use redis::Value;

use super::{RedisStore, bad_reply, store_err, v_i64};
use crate::model::{Timestamp, category_hours};
use crate::score::CategoryScale;
use crate::store::StoreError;
use crate::time::split_days;

/// The category scales one query reads: the day of its ranking when it
/// is scaled by category (`None`: unscaled, nothing to read), and each
/// category's scale as first read. A count read once serves the rest of
/// the query: a later event only raises it, so a bound written with the
/// earlier count still holds.
#[derive(Debug, Default)]
pub(super) struct Scales {
    pub day: Option<i64>,
    known: HashMap<String, CategoryScale>,
}

impl Scales {
    pub fn new(day: Option<i64>) -> Self {
        Scales {
            day,
            known: HashMap::new(),
        }
    }

    /// The scale of `category` (`None`: no category), once read; `None`
    /// when the query is not scaled.
    pub fn of(&self, category: Option<&str>) -> Option<CategoryScale> {
        self.day?;
        Some(self.known[category.unwrap_or("")])
    }
}

impl RedisStore {
    /// Reads into `scales` the scale of each of `categories` (`None`: no
    /// category) it does not hold yet, in a ranking of its day at `at`.
    pub(super) async fn read_scales<'a>(
        &self,
        scales: &mut Scales,
        categories: impl IntoIterator<Item = Option<&'a str>>,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let Some(day) = scales.day else {
            return Ok(());
        };
        let mut missing: Vec<String> = (categories.into_iter())
            .map(|c| c.unwrap_or("").to_string())
            .filter(|c| !scales.known.contains_key(c))
            .collect();
        missing.sort();
        missing.dedup();
        let read = self.category_scales(&missing, day, at).await?;
        scales.known.extend(read);
        Ok(())
    }

    /// The scale of each of `categories` (`""`: no category) in a ranking
    /// of UTC day `day` at `at`.
    async fn category_scales(
        &self,
        categories: &[String],
        day: i64,
        at: Timestamp,
    ) -> Result<HashMap<String, CategoryScale>, StoreError> {
        let mut out: HashMap<String, CategoryScale> = categories
            .iter()
            .map(|c| (c.clone(), CategoryScale { events: 0 }))
            .collect();
        if categories.is_empty() {
            return Ok(out);
        }
        let k = &self.keys;
        let (days, ends) = split_days(&category_hours(day, at));
        let mut keys: Vec<String> = days.flat_map(|d| k.categories_d(d)).collect();
        for r in ends {
            keys.extend(r.flat_map(|h| k.categories_h(h)));
        }
        let mut pipe = redis::pipe();
        for key in &keys {
            pipe.cmd("HMGET").arg(key).arg(categories);
        }
        let got: Vec<Value> = self.query_pipe(&pipe).await.map_err(store_err)?;
        if got.len() != keys.len() {
            return Err(bad_reply("category counts"));
        }
        for reply in got {
            let Value::Array(counts) = reply else {
                return Err(bad_reply("category counts"));
            };
            for (c, n) in categories.iter().zip(counts) {
                let n = v_i64(&n).unwrap_or(0).max(0) as u64;
                if let Some(s) = out.get_mut(c) {
                    s.events += n;
                }
            }
        }
        Ok(out)
    }
}
