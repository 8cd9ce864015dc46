//! Compact forms of the per-article fields most articles leave empty: an
//! article created by a view has no metadata but its publication time, no
//! voters and no quarantined events. Each is boxed only when present, so an
//! empty one costs its 8–16 inline bytes and no heap block.
//!
//! Both serialize exactly as the plain type they stand for (the default
//! when absent), so snapshots and logs keep their bytes.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::{ArticleMeta, Timestamp};

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
}
