//! The metadata codec: an article's `meta:article:<id>` hash to and from
//! [`ArticleMeta`].

use std::collections::HashMap;

use crate::model::ArticleMeta;

/// An article's metadata as stored in `meta:article:<id>`.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaRec {
    pub meta: ArticleMeta,
    pub known: bool,
    pub deleted: bool,
}

const META_FIELDS: [&str; 7] = [
    "title", "url", "author", "category", "kind", "summary", "cover",
];

/// Parses an `HGETALL meta:article:<id>` reply; `None` if the hash is
/// missing.
pub(crate) fn parse_meta(fields: &HashMap<String, String>) -> Option<MetaRec> {
    let published_at = fields.get("publishedAt")?.parse().ok()?;
    let s = |k: &str| fields.get(k).cloned();
    let groups = fields
        .get("groups")
        .and_then(|g| serde_json::from_str::<Vec<String>>(g).ok())
        .unwrap_or_default();
    Some(MetaRec {
        meta: ArticleMeta {
            title: s("title"),
            url: s("url"),
            author: s("author"),
            category: s("category"),
            kind: s("kind"),
            groups,
            published_at,
            summary: s("summary"),
            cover: s("cover"),
        },
        known: fields.get("known").is_some_and(|v| v == "1"),
        deleted: fields.get("deleted").is_some_and(|v| v == "1"),
    })
}

/// Field/value pairs of a metadata hash, `publishedAt`, `known` and
/// `deleted` excluded.
pub(crate) fn meta_pairs(meta: &ArticleMeta) -> Vec<(String, String)> {
    let vals = [
        &meta.title,
        &meta.url,
        &meta.author,
        &meta.category,
        &meta.kind,
        &meta.summary,
        &meta.cover,
    ];
    let mut out: Vec<(String, String)> = META_FIELDS
        .iter()
        .zip(vals)
        .filter_map(|(k, v)| v.as_ref().map(|v| (k.to_string(), v.clone())))
        .collect();
    if !meta.groups.is_empty() {
        out.push((
            "groups".into(),
            serde_json::to_string(&meta.groups).unwrap_or_else(|_| "[]".into()),
        ));
    }
    out
}
