//! The embedded store's `GET /api/new` indexes: live articles by
//! publication time, newest first (then by id), all of them and, per
//! filter value, those with that category, that kind or in that group.
//!
//! A filtered page walks the index of one of its filter's values, so it
//! looks only at articles that match that value: a category no article
//! has costs as little as a common one, where walking every article and
//! skipping the others cost a scan of the whole store per query. A filter
//! on several dimensions walks the smallest of its values' indexes and
//! skips the articles the others rule out.
//!
//! Kept on every change of an article's publication time, filter values
//! or deletion ([`Newest::track`]); the memory is one entry (~45 bytes)
//! per article and per filter value it has.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::model::{ArticleId, ArticleMeta, Timestamp};
use crate::rank::Filter;

use super::state::article::{Article, Idx, IdxMap};

/// An entry: publication time descending, then id ascending (the order
/// of the list and of its cursor).
pub type Key = (Reverse<Timestamp>, ArticleId);

/// One filter value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Facet {
    Category(Arc<str>),
    Kind(Arc<str>),
    Group(Arc<str>),
}

/// The facets of a filter or of an article's metadata.
fn facets(category: Option<&str>, kind: Option<&str>, groups: &[String]) -> Vec<Facet> {
    let mut out = Vec::with_capacity(2 + groups.len());
    out.extend(category.map(|c| Facet::Category(c.into())));
    out.extend(kind.map(|k| Facet::Kind(k.into())));
    out.extend(groups.iter().map(|g| Facet::Group(g.as_str().into())));
    out.sort();
    out.dedup();
    out
}

fn meta_facets(m: &ArticleMeta) -> Vec<Facet> {
    facets(m.category.as_deref(), m.kind.as_deref(), &m.groups)
}

/// What an article is indexed under.
#[derive(Debug, Clone)]
struct Tracked {
    published: Timestamp,
    facets: Box<[Facet]>,
}

static EMPTY: BTreeSet<Key> = BTreeSet::new();

/// The indexes (see the module docs).
#[derive(Debug, Default)]
pub struct Newest {
    all: BTreeSet<Key>,
    by: HashMap<Facet, BTreeSet<Key>>,
    tracked: IdxMap<Tracked>,
}

impl Newest {
    /// The indexes of every live article, built in bulk (a restart of
    /// millions of articles would spend seconds inserting one by one).
    pub fn build(articles: &[Article]) -> Self {
        let mut n = Newest::default();
        n.tracked.reserve(articles.len());
        let mut all = Vec::new();
        let mut by: HashMap<Facet, Vec<Key>> = HashMap::new();
        for (i, a) in articles.iter().enumerate().filter(|(_, a)| !a.deleted) {
            let key = (Reverse(a.meta.published_at()), a.id.clone());
            let fs = meta_facets(&a.meta.get());
            let fs: Box<[Facet]> = fs.into_iter().map(|f| n.share(&by, f)).collect();
            for f in fs.iter() {
                by.entry(f.clone()).or_default().push(key.clone());
            }
            all.push(key.clone());
            let published = key.0.0;
            n.tracked.insert(
                i as Idx,
                Tracked {
                    published,
                    facets: fs,
                },
            );
        }
        n.all = BTreeSet::from_iter(all);
        n.by = by
            .into_iter()
            .map(|(f, v)| (f, BTreeSet::from_iter(v)))
            .collect();
        n
    }

    /// The facet `f` with the string an index key already holds, if any
    /// (each value is stored once however many articles have it).
    fn share<V>(&self, map: &HashMap<Facet, V>, f: Facet) -> Facet {
        map.get_key_value(&f).map_or(f, |(k, _)| k.clone())
    }

    /// Follows a change of `articles[idx]`'s counters (a counted event, a
    /// vote), which moves neither its publication time, nor its filter
    /// values, nor its deletion: only an article not indexed yet (the
    /// event created it) has anything to follow. Every counted event comes
    /// through here: one lookup, where [`Self::track`] builds and compares
    /// the article's filter values.
    pub fn counted(&mut self, idx: Idx, a: &Article) {
        if !self.tracked.contains_key(&idx) {
            self.track(idx, a);
        }
    }

    /// Follows a change of `articles[idx]`: indexed while live, under its
    /// publication time and filter values as they are now.
    pub fn track(&mut self, idx: Idx, a: &Article) {
        let want = (!a.deleted).then(|| (a.meta.published_at(), meta_facets(&a.meta.get())));
        let had = self.tracked.get(&idx);
        let same = match (had, &want) {
            (None, None) => true,
            (Some(t), Some((p, fs))) => t.published == *p && *t.facets == **fs,
            _ => false,
        };
        if same {
            return;
        }
        if let Some(t) = self.tracked.remove(&idx) {
            let key = (Reverse(t.published), a.id.clone());
            self.all.remove(&key);
            for f in t.facets.iter() {
                if let Some(set) = self.by.get_mut(f) {
                    set.remove(&key);
                    if set.is_empty() {
                        self.by.remove(f);
                    }
                }
            }
        }
        if let Some((published, fs)) = want {
            let key = (Reverse(published), a.id.clone());
            let fs: Box<[Facet]> = fs.into_iter().map(|f| self.share(&self.by, f)).collect();
            for f in fs.iter() {
                self.by.entry(f.clone()).or_default().insert(key.clone());
            }
            self.all.insert(key);
            self.tracked.insert(
                idx,
                Tracked {
                    published,
                    facets: fs,
                },
            );
        }
    }

    /// The index a page with `filter` walks: every live article without a
    /// filter, else the smallest index of the filter's values (empty when
    /// no article has one of them). Its articles may still fail the rest
    /// of a filter on several dimensions.
    pub fn candidates(&self, filter: &Filter) -> &BTreeSet<Key> {
        let wanted = facets(
            filter.category.as_deref(),
            filter.kind.as_deref(),
            filter.group.as_slice(),
        );
        wanted
            .iter()
            .map(|f| self.by.get(f).unwrap_or(&EMPTY))
            .min_by_key(|s| s.len())
            .unwrap_or(&self.all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreSettings;
    use crate::store::embedded::state::Data;

    fn meta(p: Timestamp, cat: &str, group: Option<&str>) -> ArticleMeta {
        ArticleMeta {
            published_at: p,
            category: Some(cat.into()),
            groups: group.into_iter().map(str::to_owned).collect(),
            ..ArticleMeta::default()
        }
    }

    fn ids(set: &BTreeSet<Key>) -> Vec<String> {
        set.iter().map(|k| k.1.to_string()).collect()
    }

    fn filter(cat: Option<&str>, group: Option<&str>) -> Filter {
        Filter {
            category: cat.map(str::to_owned),
            kind: None,
            group: group.map(str::to_owned),
        }
    }

    /// Built in bulk or followed change by change, the indexes hold the
    /// same; a changed category moves an article, a deletion drops it.
    #[test]
    fn follows_changes_as_a_bulk_build_would() {
        let mut d = Data::new(&StoreSettings::default());
        let mut n = Newest::default();
        for i in 1..=6u64 {
            let cat = if i % 2 == 0 { "even" } else { "odd" };
            let (idx, _) = d.put(&ArticleId::from_number(i), meta(100 + i as i64, cat, None));
            n.track(idx, d.article(idx));
        }
        let (idx, _) = d.put(&ArticleId::from_number(3), meta(103, "even", Some("g")));
        n.track(idx, d.article(idx));
        assert_eq!(
            ids(n.candidates(&filter(Some("even"), None))),
            ["6", "4", "3", "2"]
        );
        assert_eq!(ids(n.candidates(&filter(Some("odd"), None))), ["5", "1"]);
        assert_eq!(ids(n.candidates(&filter(Some("even"), Some("g")))), ["3"]);
        assert!(n.candidates(&filter(Some("none"), None)).is_empty());
        assert_eq!(n.candidates(&filter(None, None)).len(), 6);
        let bulk = Newest::build(&d.articles);
        for f in [
            filter(Some("even"), None),
            filter(Some("odd"), None),
            filter(None, Some("g")),
        ] {
            assert_eq!(ids(bulk.candidates(&f)), ids(n.candidates(&f)));
        }
        let all = filter(None, None);
        assert_eq!(ids(bulk.candidates(&all)), ids(n.candidates(&all)));
    }
}
