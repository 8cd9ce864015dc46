//! The site's figures beyond its totals, as totals.lua keeps them
//! (docs/redis-keys.md, "Counters"): quarantine by article and crawler
//! family by hour, counted views by minute, and site-wide visitors by hour
//! (one sketch an hour, counted over a range with one multi-key PFCOUNT:
//! the site's keys share one slot).

use redis::Value;

use super::{RedisStore, bad_reply, store_err, v_i64, v_str};
use crate::crawler::Crawler;
use crate::model::{ArticleId, Quarantine, Timestamp, Verdict, hour_of};
use crate::store::{
    SiteFigures, SiteTraffic, StoreError, TRAFFIC_MINUTES, crawler_counts, top_quarantined,
};

/// Members read from each hour's most quarantined articles.
const ARTICLES_PER_HOUR: isize = 100;

/// The tally slot of a reason as totals.lua names it (`q_dup` ...).
fn reason_slot(name: &str) -> Option<usize> {
    let v = match name {
        "q_dup" => Verdict::Duplicate,
        "q_rl" => Verdict::RateLimited,
        "q_bot" => Verdict::Bot,
        "q_rep" => Verdict::Replayed,
        _ => return None,
    };
    v.quarantine_slot()
}

/// A reply's (field, integer) pairs: HGETALL or ZRANGE .. WITHSCORES,
/// RESP2 or RESP3.
fn pairs(v: &Value) -> Vec<(String, i64)> {
    let num = |v: &Value| match v {
        Value::Double(d) => Some(*d as i64),
        other => v_i64(other),
    };
    match v {
        Value::Array(a) if a.iter().all(|x| matches!(x, Value::Array(_))) => a
            .iter()
            .filter_map(|kv| match kv {
                Value::Array(p) if p.len() == 2 => Some((v_str(&p[0])?.to_string(), num(&p[1])?)),
                _ => None,
            })
            .collect(),
        Value::Array(a) => a
            .chunks(2)
            .filter_map(|kv| Some((v_str(&kv[0])?.to_string(), num(kv.get(1)?)?)))
            .collect(),
        Value::Map(m) => m
            .iter()
            .filter_map(|(k, v)| Some((v_str(k)?.to_string(), num(v)?)))
            .collect(),
        _ => Vec::new(),
    }
}

impl RedisStore {
    /// Quarantine by article and crawler family of hours `first..=last`.
    pub(crate) async fn site_figures(
        &self,
        first: i64,
        last: i64,
    ) -> Result<SiteFigures, StoreError> {
        let k = &self.keys;
        let mut pipe = redis::pipe();
        for h in first..=last {
            pipe.zrevrange_withscores(k.quarantine_articles_h(h), 0, ARTICLES_PER_HOUR - 1)
                .hgetall(k.crawlers_h(h));
        }
        let got: Vec<Value> = self.query_pipe(&pipe).await.map_err(store_err)?;
        if got.len() != 2 * (last - first + 1) as usize {
            return Err(bad_reply("stats"));
        }
        let mut arts: crate::gate::KeyedMap<String, Quarantine> = Default::default();
        let mut fams: crate::gate::KeyedMap<&'static str, u64> = Default::default();
        for pair in got.chunks(2) {
            for (member, n) in pairs(&pair[0]) {
                let Some((reason, id)) = member.split_once(':') else {
                    continue;
                };
                if let Some(slot) = reason_slot(reason) {
                    arts.entry(id.to_string()).or_default().0[slot] += n.max(0) as u64;
                }
            }
            for (fam, n) in pairs(&pair[1]) {
                let name = Crawler::names().find(|&f| f == fam).unwrap_or("other");
                *fams.entry(name).or_default() += n.max(0) as u64;
            }
        }
        Ok(SiteFigures {
            by_article: top_quarantined(
                arts.into_iter()
                    .filter_map(|(id, q)| Some((ArticleId::parse(&id).ok()?, q))),
            ),
            by_crawler: crawler_counts(fams),
        })
    }

    /// Views by minute to `now`'s, and visitors of the last `hours` hours
    /// (one multi-key `PFCOUNT`: one register merge per hour with a sketch).
    pub(crate) async fn traffic(
        &self,
        now: Timestamp,
        hours: u32,
    ) -> Result<SiteTraffic, StoreError> {
        let k = &self.keys;
        let last = hour_of(now) + 1;
        let first = *crate::time::last_hours(hour_of(now), hours).start();
        let last_min = now.div_euclid(60);
        let minutes: Vec<String> = (last_min - TRAFFIC_MINUTES as i64 + 1..=last_min)
            .map(|m| k.views_m(m))
            .collect();
        let sketches: Vec<String> = (first..=last).map(|h| k.visitors_h(h)).collect();
        let mut pipe = redis::pipe();
        pipe.mget(&minutes).cmd("PFCOUNT").arg(&sketches);
        let got: Vec<Value> = self.query_pipe(&pipe).await.map_err(store_err)?;
        let [views, visitors] = got.as_slice() else {
            return Err(bad_reply("site traffic"));
        };
        let views_by_minute = match views {
            Value::Array(a) => a
                .iter()
                .map(|v| v_i64(v).unwrap_or(0).max(0) as u64)
                .collect(),
            _ => return Err(bad_reply("site traffic")),
        };
        Ok(SiteTraffic {
            views_by_minute,
            visitors: v_i64(visitors).unwrap_or(0).max(0) as u64,
        })
    }
}
