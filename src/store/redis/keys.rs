//! Key names. docs/redis-keys.md lists every key with its type, TTL and
//! writer; the Lua scripts build the same names from the same prefix.
//!
//! Article ids are validated (`[A-Za-z0-9_-]{1,64}`) before they reach a
//! key, and free-text filter labels only ever appear hashed, so no input
//! can forge a key.

use crate::model::{ArticleId, HOUR, RangeSpec, Timestamp, hour_of};
use crate::score::ModelKind;
use crate::sketch::murmur64a;

pub const DAY: i64 = 86_400;

/// The day bucket (days since the epoch) of a timestamp.
pub fn day_of(ts: Timestamp) -> i64 {
    ts.div_euclid(DAY)
}

/// Builds key names under one prefix.
#[derive(Debug, Clone)]
pub struct Keys {
    pub prefix: String,
}

impl Keys {
    pub fn new(prefix: &str) -> Self {
        Keys {
            prefix: prefix.to_string(),
        }
    }

    fn k(&self, rest: std::fmt::Arguments<'_>) -> String {
        format!("{}{}", self.prefix, rest)
    }

    pub fn views(&self, id: &ArticleId) -> String {
        self.k(format_args!("counter:views:{id}"))
    }
    pub fn uv(&self, id: &ArticleId) -> String {
        self.k(format_args!("hll:uv:{id}"))
    }
    pub fn meta(&self, id: &ArticleId) -> String {
        self.k(format_args!("meta:article:{id}"))
    }
    pub fn counters(&self, id: &ArticleId) -> String {
        self.k(format_args!("counter:article:{id}"))
    }
    pub fn bucket_h(&self, id: &ArticleId, hour: i64) -> String {
        self.k(format_args!("bucket:h:{id}:{hour}"))
    }
    pub fn uv_h(&self, id: &ArticleId, hour: i64) -> String {
        self.k(format_args!("hll:uv:h:{id}:{hour}"))
    }
    pub fn bucket_d(&self, id: &ArticleId, day: i64) -> String {
        self.k(format_args!("bucket:d:{id}:{day}"))
    }
    pub fn uv_d(&self, id: &ArticleId, day: i64) -> String {
        self.k(format_args!("hll:uv:d:{id}:{day}"))
    }
    pub fn active_h(&self, hour: i64) -> String {
        self.k(format_args!("active:h:{hour}"))
    }
    pub fn active_d(&self, day: i64) -> String {
        self.k(format_args!("active:d:{day}"))
    }
    pub fn newest(&self) -> String {
        self.k(format_args!("articles:new"))
    }
    pub fn counted(&self) -> String {
        self.k(format_args!("stats:counted"))
    }
    pub fn quarantine(&self) -> String {
        self.k(format_args!("stats:quarantine"))
    }
    pub fn quarantine_h(&self, hour: i64) -> String {
        self.k(format_args!("stats:quarantine:h:{hour}"))
    }
    pub fn changes(&self) -> String {
        self.k(format_args!("changes"))
    }
    pub fn changes_seq(&self) -> String {
        self.k(format_args!("changes:seq"))
    }
    pub fn changes_floor(&self) -> String {
        self.k(format_args!("changes:floor"))
    }
    pub fn ranking_index(&self) -> String {
        self.k(format_args!("hot:index"))
    }
    pub fn cursor(&self, id: u64) -> String {
        self.k(format_args!("cursor:{id:016x}"))
    }
    pub fn dedupe(&self, id: &ArticleId, kind: char, visitor: u128) -> String {
        self.k(format_args!("gate:dd:{id}:{kind}:{visitor:032x}"))
    }
    pub fn event_id(&self, key: u128) -> String {
        self.k(format_args!("gate:eid:{key:032x}"))
    }
    pub fn rate_visitor(&self, visitor: u128) -> String {
        self.k(format_args!("gate:rl:v:{visitor:032x}"))
    }
    pub fn rate_ip(&self, ip: u64) -> String {
        self.k(format_args!("gate:rl:ip:{ip:016x}"))
    }

    /// Seed 003's voter set of an article.
    pub fn voted(&self, id: &ArticleId) -> String {
        self.k(format_args!("voted:{id}"))
    }

    /// Seed 000's `hot:score`.
    pub fn ranking_default(&self) -> String {
        self.k(format_args!("hot:score"))
    }

    /// The sorted set of one ranking. Seed 000's `hot:score` is the default
    /// one: gravity over 72 h, no filter.
    pub fn ranking(
        &self,
        model: ModelKind,
        range: RangeSpec,
        category: Option<&str>,
        kind: Option<&str>,
        group: Option<&str>,
    ) -> String {
        if model == ModelKind::Gravity
            && range == RangeSpec::Hours(72)
            && category.is_none()
            && kind.is_none()
            && group.is_none()
        {
            return self.k(format_args!("hot:score"));
        }
        let filter = match (category, kind, group) {
            (None, None, None) => "all".to_string(),
            _ => {
                // Labels are free text: only their hash reaches the key.
                let text = format!(
                    "c={}\u{0}k={}\u{0}g={}",
                    category.unwrap_or("\u{1}"),
                    kind.unwrap_or("\u{1}"),
                    group.unwrap_or("\u{1}")
                );
                format!("{:016x}", murmur64a(text.as_bytes(), 0x686f_7472))
            }
        };
        self.k(format_args!("hot:{}:{range}:{filter}", model.as_str()))
    }
}

/// The state hash beside a ranking's sorted set.
pub fn ranking_state(zkey: &str) -> String {
    format!("{zkey}:state")
}

/// Which buckets hold a window: hourly buckets back to the hourly horizon,
/// daily buckets before it (the oldest day whole).
#[derive(Debug, Clone, PartialEq)]
pub struct WindowPlan {
    pub hours: std::ops::RangeInclusive<i64>,
    pub days: std::ops::RangeInclusive<i64>,
}

/// `hourly_days`: how many whole days before today hourly buckets are
/// kept (they live until their day is that old, plus one day).
pub fn window_plan(range: RangeSpec, now: Timestamp, hourly_days: u32) -> Option<WindowPlan> {
    let RangeSpec::Hours(n) = range else {
        return None;
    };
    let last = hour_of(now);
    let first = last - i64::from(n) + 1;
    let horizon = (day_of(now) - i64::from(hourly_days)) * 24;
    if first >= horizon {
        return Some(WindowPlan {
            hours: first..=last,
            #[allow(clippy::reversed_empty_ranges)]
            days: 1..=0,
        });
    }
    let first_day = day_of(first * HOUR);
    Some(WindowPlan {
        hours: horizon..=last,
        days: first_day..=(horizon / 24 - 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans() {
        let now = 1_763_760_000; // 21:20 UTC
        let p = window_plan(RangeSpec::Hours(72), now, 7).unwrap();
        assert_eq!(p.hours.clone().count(), 72);
        assert!(p.days.is_empty());
        let p = window_plan(RangeSpec::Hours(24 * 30), now, 7).unwrap();
        assert_eq!(*p.hours.start(), (day_of(now) - 7) * 24);
        assert_eq!(*p.days.end(), day_of(now) - 8);
        assert_eq!(*p.days.start(), day_of((hour_of(now) - 719) * HOUR));
        assert!(window_plan(RangeSpec::All, now, 7).is_none());
    }

    #[test]
    fn default_ranking_is_seed_key() {
        let k = Keys::new("");
        assert_eq!(
            k.ranking(ModelKind::Gravity, RangeSpec::Hours(72), None, None, None),
            "hot:score"
        );
        let other = Keys::new("site1:").ranking(
            ModelKind::Gravity,
            RangeSpec::Hours(24),
            Some("x"),
            None,
            None,
        );
        assert!(other.starts_with("site1:hot:gravity:24h:"));
    }
}
