//! Compact forms of the per-article fields most articles leave empty: an
//! article created by a view has no metadata but its publication time, no
//! voters and no quarantined events. Each is boxed only when present, so an
//! empty one costs its 8–16 inline bytes and no heap block.
//!
//! [`Lifetime`] packs an article's lifetime counters into u32s.
//!
//! Each serializes exactly as the plain type it stands for (the default
//! when absent), so snapshots and logs keep their bytes.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::{ArticleMeta, Counters, Timestamp};

/// A `T` that is usually `T::default()`: absent (8 bytes, no allocation)
/// until it holds something else.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sparse<T>(Option<Box<T>>);

impl<T: Default + PartialEq> Sparse<T> {
    /// The value, `None` when it is the default.
    pub fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }

    /// The value to change, boxed on first use.
    pub fn get_mut(&mut self) -> &mut T {
        self.0.get_or_insert_with(Box::default)
    }

    /// The value, a copy of the default when absent.
    pub fn value(&self) -> T
    where
        T: Copy,
    {
        self.get().copied().unwrap_or_default()
    }
}

impl<T: Default + PartialEq> From<T> for Sparse<T> {
    fn from(v: T) -> Self {
        Sparse((v != T::default()).then(|| Box::new(v)))
    }
}

impl<T: Default + Serialize> Serialize for Sparse<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(v) => v.serialize(s),
            None => T::default().serialize(s),
        }
    }
}

impl<'de, T: Default + PartialEq + Deserialize<'de>> Deserialize<'de> for Sparse<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Sparse::from)
    }
}

/// An article's metadata: its publication time alone (what an article
/// created by an event has) inline, anything more boxed.
#[derive(Debug, Clone, PartialEq)]
pub enum Meta {
    Bare(Timestamp),
    Full(Box<ArticleMeta>),
}

impl Meta {
    pub fn published_at(&self) -> Timestamp {
        match self {
            Meta::Bare(t) => *t,
            Meta::Full(m) => m.published_at,
        }
    }

    pub fn author(&self) -> Option<&str> {
        match self {
            Meta::Bare(_) => None,
            Meta::Full(m) => m.author.as_deref(),
        }
    }

    pub fn category(&self) -> Option<&str> {
        match self {
            Meta::Bare(_) => None,
            Meta::Full(m) => m.category.as_deref(),
        }
    }

    /// The full metadata (built on the spot, without allocating, when bare).
    pub fn get(&self) -> Cow<'_, ArticleMeta> {
        match self {
            Meta::Bare(t) => Cow::Owned(ArticleMeta {
                published_at: *t,
                ..ArticleMeta::default()
            }),
            Meta::Full(m) => Cow::Borrowed(m),
        }
    }
}

impl From<ArticleMeta> for Meta {
    fn from(m: ArticleMeta) -> Self {
        let bare = ArticleMeta {
            published_at: m.published_at,
            ..ArticleMeta::default()
        };
        if m == bare {
            Meta::Bare(m.published_at)
        } else {
            Meta::Full(Box::new(m))
        }
    }
}

impl Serialize for Meta {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Meta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ArticleMeta::deserialize(d).map(Meta::from)
    }
}

/// An article's lifetime counters: [`Counters`] without `uv` (the
/// article's lifetime sketch counts it), nine `u32` inline (40 bytes
/// where `Counters` takes 80), all moved to a boxed `Counters` (u64) once
/// one of them would pass `u32::MAX`. Never moved back: counters only grow.
///
/// Serializes as the `Counters` it stands for with `uv` 0, which is what
/// snapshots always held there, so snapshots keep their bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum Lifetime {
    Small([u32; 9]),
    Big(Box<Counters>),
}

impl Default for Lifetime {
    fn default() -> Self {
        Lifetime::Small([0; 9])
    }
}

impl Lifetime {
    /// The counters, `uv` 0.
    pub fn get(&self) -> Counters {
        match self {
            Lifetime::Small(s) => {
                let [
                    pv,
                    likes,
                    comments,
                    favorites,
                    shares,
                    dwell_seconds,
                    dwell_reports,
                    ups,
                    downs,
                ] = s.map(u64::from);
                Counters {
                    pv,
                    uv: 0,
                    likes,
                    comments,
                    favorites,
                    shares,
                    dwell_seconds,
                    dwell_reports,
                    ups,
                    downs,
                }
            }
            Lifetime::Big(c) => **c,
        }
    }

    /// Changes the counters through `f` (its `uv` is dropped), promoting
    /// them to u64 if one passes `u32::MAX`.
    pub fn update<R>(&mut self, f: impl FnOnce(&mut Counters) -> R) -> R {
        if let Lifetime::Big(c) = self {
            let r = f(c);
            c.uv = 0;
            return r;
        }
        let mut c = self.get();
        let r = f(&mut c);
        *self = Lifetime::from(c);
        r
    }
}

impl From<Counters> for Lifetime {
    fn from(c: Counters) -> Self {
        let all = [
            c.pv,
            c.likes,
            c.comments,
            c.favorites,
            c.shares,
            c.dwell_seconds,
            c.dwell_reports,
            c.ups,
            c.downs,
        ];
        if all.iter().all(|&v| v <= u64::from(u32::MAX)) {
            Lifetime::Small(all.map(|v| v as u32))
        } else {
            Lifetime::Big(Box::new(Counters { uv: 0, ..c }))
        }
    }
}

impl Serialize for Lifetime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Lifetime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Counters::deserialize(d).map(Lifetime::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::KeyedSet;
    use crate::model::Quarantine;

    fn bytes<T: Serialize>(v: &T) -> Vec<u8> {
        postcard::to_stdvec(v).unwrap()
    }

    /// The compact forms write the bytes of the plain types and read them
    /// back absent when empty, present otherwise.
    #[test]
    fn compact_forms_serialize_as_the_plain_types() {
        for m in [
            ArticleMeta {
                published_at: 1_700_000_000,
                ..ArticleMeta::default()
            },
            ArticleMeta {
                published_at: 5,
                author: Some("ann".into()),
                groups: vec!["g".into()],
                ..ArticleMeta::default()
            },
        ] {
            let compact = Meta::from(m.clone());
            assert_eq!(bytes(&compact), bytes(&m));
            let back: Meta = postcard::from_bytes(&bytes(&m)).unwrap();
            assert_eq!(back, compact);
            assert_eq!(back.get().into_owned(), m);
            assert_eq!(back.published_at(), m.published_at);
            assert_eq!(back.author(), m.author.as_deref());
        }
        assert!(matches!(Meta::from(ArticleMeta::default()), Meta::Bare(0)));

        let mut q: Sparse<Quarantine> = Sparse::default();
        assert_eq!(bytes(&q), bytes(&Quarantine::default()));
        q.get_mut().0[2] = 3;
        assert_eq!(bytes(&q), bytes(&Quarantine([0, 0, 3, 0])));
        let back: Sparse<Quarantine> = postcard::from_bytes(&bytes(&q)).unwrap();
        assert_eq!(back.value(), Quarantine([0, 0, 3, 0]));
        let zero: Sparse<Quarantine> =
            postcard::from_bytes(&bytes(&Quarantine::default())).unwrap();
        assert!(zero.get().is_none(), "an all-zero tally reads back absent");

        let mut voters: Sparse<KeyedSet<u128>> = Sparse::default();
        assert_eq!(bytes(&voters), bytes(&KeyedSet::<u128>::default()));
        voters.get_mut().insert(7);
        let back: Sparse<KeyedSet<u128>> = postcard::from_bytes(&bytes(&voters)).unwrap();
        assert!(back.get().is_some_and(|s| s.contains(&7)));
    }

    /// Lifetime counters write the bytes of `Counters` (`uv` 0), stay
    /// inline while every one fits a u32, and move to u64 without losing
    /// a count when one passes it.
    #[test]
    fn lifetime_counters_pack_and_promote_past_u32() {
        let c = Counters {
            pv: 7,
            likes: 1,
            dwell_seconds: 90,
            dwell_reports: 2,
            ups: 3,
            downs: 4,
            ..Counters::default()
        };
        let mut l = Lifetime::from(c);
        assert!(matches!(l, Lifetime::Small(_)));
        assert_eq!(l.get(), c);
        assert_eq!(bytes(&l), bytes(&c));
        assert_eq!(postcard::from_bytes::<Lifetime>(&bytes(&c)).unwrap(), l);
        // One count past u32::MAX: promoted, every other count kept.
        l.update(|c| c.dwell_seconds = u64::from(u32::MAX));
        assert!(matches!(l, Lifetime::Small(_)));
        l.update(|c| c.dwell_seconds += 1);
        assert!(matches!(l, Lifetime::Big(_)));
        let big = Counters {
            dwell_seconds: u64::from(u32::MAX) + 1,
            ..c
        };
        assert_eq!(l.get(), big);
        l.update(|c| c.pv += 1);
        assert_eq!(l.get().pv, 8);
        assert_eq!(l.get().dwell_seconds, u64::from(u32::MAX) + 1);
        let read: Lifetime = postcard::from_bytes(&bytes(&l)).unwrap();
        assert_eq!(read.get(), l.get());
        assert_eq!(bytes(&read), bytes(&Counters { pv: 8, ..big }));
    }
}
