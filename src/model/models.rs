//! The ranking models' vocabulary: their names ([`ModelKind`]), the
//! parameters a query gives them beyond the configuration ([`ModelParams`]:
//! rising's window, baseline and minimum, the half-life decay, the
//! category scale), what a
//! rising score is made of ([`Trend`]), and a score's terms ([`Explain`]).

use serde::{Deserialize, Serialize};

use super::{RangeSpec, Timestamp, hour_of};

/// The ranking models hotrank serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelKind {
    /// Seed 000: `(α·pv + β·uv) / (hours_since_pub + base)^γ`.
    Gravity,
    /// Seed 001: weighted PV, UV, dwell, likes, comments minus an age penalty.
    Weighted,
    /// Seed 003: `publishedAt + 432·votes`.
    Votes,
    /// Seed 004: weighted sum of signals over the buckets in the range.
    Window,
    /// Reddit's hot formula over up- and down-votes, rounded as Reddit does.
    Reddit,
    /// Reddit's controversy sort: many votes, evenly split.
    Controversy,
    /// Reddit's "best": the Wilson lower bound of the share of up-votes.
    Confidence,
    /// The Hacker News front page: votes decayed by age.
    Hn,
    /// Lemmy's hot rank: votes decayed by age, for a week.
    Lemmy,
    /// What is taking off now: views in the last hours against the
    /// article's own rate before them ([`RisingSpec`]).
    Rising,
}

impl ModelKind {
    pub const ALL: [ModelKind; 10] = [
        ModelKind::Gravity,
        ModelKind::Weighted,
        ModelKind::Votes,
        ModelKind::Window,
        ModelKind::Reddit,
        ModelKind::Controversy,
        ModelKind::Confidence,
        ModelKind::Hn,
        ModelKind::Lemmy,
        ModelKind::Rising,
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ModelKind::Gravity => "gravity",
            ModelKind::Weighted => "weighted",
            ModelKind::Votes => "votes",
            ModelKind::Window => "window",
            ModelKind::Reddit => "reddit",
            ModelKind::Controversy => "controversy",
            ModelKind::Confidence => "confidence",
            ModelKind::Hn => "hn",
            ModelKind::Lemmy => "lemmy",
            ModelKind::Rising => "rising",
        }
    }

    /// Whether the score depends on `now` at all. Vote scores fold the
    /// publication time into the score once (seed 003, Reddit) or ignore
    /// it (controversy, confidence): a stored score never goes stale, so
    /// their rankings are never re-scored for time, only when votes arrive.
    pub fn time_invariant(self) -> bool {
        matches!(
            self,
            ModelKind::Votes | ModelKind::Reddit | ModelKind::Controversy | ModelKind::Confidence
        )
    }

    /// Vote models rank every live article by its lifetime votes; `range`
    /// does not apply to them (seed 003 lists all articles).
    pub fn lists_every_live_article(self) -> bool {
        self.time_invariant() || matches!(self, ModelKind::Hn | ModelKind::Lemmy)
    }

    /// The range each model uses when none is asked for in
    /// `GET /api/articles/{id}`'s `scores` (seed 001 recomputes over 24 h).
    pub fn default_range(self) -> RangeSpec {
        match self {
            ModelKind::Weighted => RangeSpec::Hours(24),
            ModelKind::Votes
            | ModelKind::Reddit
            | ModelKind::Controversy
            | ModelKind::Confidence
            | ModelKind::Hn
            | ModelKind::Lemmy => RangeSpec::All,
            ModelKind::Gravity | ModelKind::Window => RangeSpec::Hours(72),
            ModelKind::Rising => RangeSpec::Hours(RisingSpec::default().window),
        }
    }

    /// Whether `decay` and `halfLife` apply (`gravity` and `weighted`).
    pub fn takes_decay(self) -> bool {
        matches!(self, ModelKind::Gravity | ModelKind::Weighted)
    }
}

/// `model=rising`: `o` = counted views in the last `window` hour buckets
/// (the current one included), `e` = counted views in the `baseline`
/// buckets before those × window / baseline; listed while `o >= min`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RisingSpec {
    pub window: u32,
    pub baseline: u32,
    pub min: u64,
}

impl Default for RisingSpec {
    fn default() -> Self {
        RisingSpec {
            window: 1,
            baseline: 24,
            min: 5,
        }
    }
}

impl RisingSpec {
    /// The largest `min` accepted.
    pub const MAX_MIN: u64 = 1_000_000;

    /// Hour buckets the score reads: the window and the baseline before it.
    pub fn span(self) -> u32 {
        self.window + self.baseline
    }

    /// The hours the score reads at `now`, oldest first.
    pub fn hours(self, now: Timestamp) -> std::ops::RangeInclusive<i64> {
        crate::time::last_hours(hour_of(now), self.span())
    }
}

/// How `gravity` and `weighted` discount age.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Decay {
    /// The model's own (gravity's power of age, weighted's linear penalty).
    #[default]
    Model,
    /// Divided by 2^(ageHours / N): the score halves every N hours.
    HalfLife(u32),
}

/// `scale`: whether scores are divided by their category's activity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Scale {
    /// The model's score as it is.
    #[default]
    None,
    /// `scale=category` (Lemmy's scaled rank): the score divided by
    /// log10(2 + counted events of the article's category in the last 30
    /// days), [`crate::score::CategoryScale`].
    Category,
}

/// Days `scale=category` counts: the current UTC day and the 29 before it.
pub const CATEGORY_DAYS: i64 = 30;

/// The hours whose counted events `scale=category` sums for a ranking of
/// UTC day `day` at `at`: from the first hour of the 29th day before
/// `day` to `at`'s hour, never past `day`'s last hour. Within one day the
/// window only grows, so a category's count, and its divisor, never
/// decrease; a new day drops a day and is a ranking of its own
/// ([`crate::rank::RankingId`]).
pub fn category_hours(day: i64, at: Timestamp) -> std::ops::RangeInclusive<i64> {
    let first = (day - CATEGORY_DAYS + 1) * 24;
    first..=hour_of(at).min((day + 1) * 24 - 1)
}

/// A ranking's model parameters beyond the `[models.*]` configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ModelParams {
    pub rising: RisingSpec,
    pub decay: Decay,
    /// Every model takes it.
    pub scale: Scale,
}

impl ModelParams {
    /// Only what `model` reads (the rest at its default): a ranking's
    /// identity is its model and these.
    pub fn of(self, model: ModelKind) -> ModelParams {
        ModelParams {
            rising: if model == ModelKind::Rising {
                self.rising
            } else {
                RisingSpec::default()
            },
            decay: if model.takes_decay() {
                self.decay
            } else {
                Decay::Model
            },
            scale: self.scale,
        }
    }

    /// The parameters `model` reads as a name suffix: empty at the
    /// defaults of gravity and weighted, `.hl<N>h` with a half-life,
    /// `.b<baseline>h.m<min>` for rising (its window is the range); then
    /// `.cat` when scaled by category.
    pub fn suffix(self, model: ModelKind) -> String {
        let p = self.of(model);
        let mut s = match (model, p.decay) {
            (ModelKind::Rising, _) => format!(".b{}h.m{}", p.rising.baseline, p.rising.min),
            (_, Decay::HalfLife(n)) => format!(".hl{n}h"),
            (_, Decay::Model) => String::new(),
        };
        if p.scale == Scale::Category {
            s.push_str(".cat");
        }
        s
    }
}

/// What a rising score is made of: views observed in the window and the
/// views its baseline rate expects there.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Trend {
    pub observed: u64,
    #[serde(with = "f64_bits")]
    pub expected: f64,
}

/// A float as `f64::to_bits` for serde: JSON floats need not round-trip.
pub mod f64_bits {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(v.to_bits())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(f64::from_bits(u64::deserialize(d)?))
    }
}

/// The terms of one score, in the order a reader would add them up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explain(pub Vec<(&'static str, f64)>);

impl Explain {
    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }
}
