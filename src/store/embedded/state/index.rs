//! The id → handle index over the articles. It holds handles only (4 bytes
//! a slot): each id is stored once, in its article, and a lookup compares
//! the id stored there, so a hash collision never matches another article.

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

use super::article::{Article, Idx};
use crate::model::ArticleId;

/// Article handles by their id's hash (SipHash with a random key: ids come
/// from clients).
#[derive(Debug, Clone, Default)]
pub struct Index {
    table: HashTable<Idx>,
    hasher: RandomState,
}

impl Index {
    fn hash(&self, id: &ArticleId) -> u64 {
        self.hasher.hash_one(id)
    }

    /// The handle of the article with this id.
    pub fn get(&self, articles: &[Article], id: &ArticleId) -> Option<Idx> {
        (self.table)
            .find(self.hash(id), |&i| articles[i as usize].id == *id)
            .copied()
    }

    /// Adds `articles[idx]`, whose id the index does not hold yet.
    pub fn insert(&mut self, articles: &[Article], idx: Idx) {
        let hash = self.hash(&articles[idx as usize].id);
        let hasher = &self.hasher;
        (self.table).insert_unique(hash, idx, |&i| hasher.hash_one(&articles[i as usize].id));
    }

    /// The index of every article, in one pass sized once.
    pub fn build(articles: &[Article]) -> Self {
        let mut index = Index::default();
        index.table.reserve(articles.len(), |_| 0);
        for idx in 0..articles.len() {
            index.insert(articles, idx as Idx);
        }
        index
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreSettings;
    use crate::store::embedded::state::Data;

    /// Every article is found by its id, built at once or one by one, and
    /// an id no article has is found nowhere.
    #[test]
    fn finds_each_article_by_its_id_and_nothing_else() {
        let mut d = Data::new(&StoreSettings::default());
        for n in 1..=5_000u64 {
            let (idx, created) = d.put(&ArticleId::from_number(n), Default::default());
            assert!(created);
            assert_eq!(idx as u64, n - 1);
        }
        let built = Index::build(&d.articles);
        for n in 1..=5_000u64 {
            let id = ArticleId::from_number(n);
            assert_eq!(d.lookup(&id), Some((n - 1) as Idx), "{id}");
            assert_eq!(built.get(&d.articles, &id), Some((n - 1) as Idx), "{id}");
        }
        for absent in ["0", "5001", "a1", "1-"] {
            let id = ArticleId::parse(absent).unwrap();
            assert_eq!(d.lookup(&id), None);
            assert_eq!(built.get(&d.articles, &id), None);
        }
        assert_eq!(
            d.put(&ArticleId::from_number(7), Default::default()),
            (6, false)
        );
    }
}
