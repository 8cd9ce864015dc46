//! Deciding transitions: a subscription's persisted list against the
//! ranking it reads now. Pure functions; the evaluator ([`super`]) reads
//! the ranking and commits what these return.
//!
//! - `entered`: an article at rank <= `top` that was not in the list;
//! - `left`: a listed article now below `top + hysteresis`, or out of the
//!   ranking (so an item moving around rank `top` does not flap);
//! - `rising`: a listed article whose spike check ([`super::rising`])
//!   turned true; sent once per spike (the flag clears when it ends);
//! - `held`: an article held for review since the subscription was
//!   created that it was not yet told of; sent once per hold.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::model::{Entry, EventKind, Member, SubState, Subscription};

/// A transition before it gets its delivery id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub event: EventKind,
    pub article: String,
    pub rank: Option<u32>,
}

/// The new list and the `entered`/`left` changes, from the previous
/// state and the ranking now (`(article, rank)`, ranks from 1, at least
/// `top + hysteresis` deep where the ranking has that many).
pub fn membership(
    prev: &SubState,
    ranking: &[(String, u32)],
    top: u32,
    hysteresis: u32,
) -> (BTreeMap<String, Member>, Vec<Change>) {
    let now: HashMap<&str, u32> = ranking.iter().map(|(a, r)| (a.as_str(), *r)).collect();
    let mut members = BTreeMap::new();
    let mut changes = Vec::new();
    for (article, m) in &prev.members {
        match now.get(article.as_str()) {
            Some(&rank) if rank <= top.saturating_add(hysteresis) => {
                members.insert(article.clone(), Member { rank, ..m.clone() });
            }
            rank => changes.push(Change {
                event: EventKind::Left,
                article: article.clone(),
                rank: rank.copied(),
            }),
        }
    }
    for (article, rank) in ranking {
        if *rank <= top && !prev.members.contains_key(article) {
            members.insert(
                article.clone(),
                Member {
                    rank: *rank,
                    rising: false,
                },
            );
            changes.push(Change {
                event: EventKind::Entered,
                article: article.clone(),
                rank: Some(*rank),
            });
        }
    }
    (members, changes)
}

/// Sets each member's rising flag from `rising` (articles not in it keep
/// theirs) and returns a `rising` change for each flag that turned on.
pub fn rising(
    members: &mut BTreeMap<String, Member>,
    rising: &HashMap<String, bool>,
) -> Vec<Change> {
    let mut out = Vec::new();
    for (article, m) in members.iter_mut() {
        let Some(&now) = rising.get(article) else {
            continue;
        };
        if now && !m.rising {
            out.push(Change {
                event: EventKind::Rising,
                article: article.clone(),
                rank: Some(m.rank),
            });
        }
        m.rising = now;
    }
    out
}

/// The `held` changes of a subscription created at `since` that was told
/// of `told`, with `now_held` the articles held now and when each was
/// held: one for each article held since `since` it was not told of (at
/// its rank in `members`, if listed). Returns the told set to keep: the
/// articles still held that it was told of, so one released and held
/// again is told again.
pub fn held(
    told: &BTreeSet<String>,
    now_held: &BTreeMap<String, i64>,
    since: i64,
    members: &BTreeMap<String, Member>,
) -> (BTreeSet<String>, Vec<Change>) {
    let mut keep = BTreeSet::new();
    let mut changes = Vec::new();
    for (article, &at) in now_held {
        if told.contains(article) {
            keep.insert(article.clone());
        } else if at >= since {
            keep.insert(article.clone());
            changes.push(Change {
                event: EventKind::Held,
                article: article.clone(),
                rank: members.get(article).map(|m| m.rank),
            });
        }
    }
    (keep, changes)
}

/// The outbox entries of the changes `sub` asked for, numbered on from
/// `state.seq` (which is advanced): the ids are a function of the state
/// they are committed with, so deciding again after a crash before the
/// commit gives the same ids.
pub fn entries(
    sub: &Subscription,
    state: &mut SubState,
    changes: Vec<Change>,
    at: i64,
    decided_ms: i64,
) -> Vec<Entry> {
    changes
        .into_iter()
        .filter(|c| sub.wants(c.event))
        .map(|c| {
            state.seq += 1;
            Entry {
                delivery: Entry::delivery_id(&sub.id, state.seq),
                subscription: sub.id.clone(),
                event: c.event,
                article_id: c.article,
                rank: c.rank,
                at,
                decided_ms,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranking(ids: &[&str]) -> Vec<(String, u32)> {
        ids.iter()
            .enumerate()
            .map(|(i, a)| (a.to_string(), i as u32 + 1))
            .collect()
    }

    fn step(prev: &SubState, ids: &[&str]) -> (SubState, Vec<(EventKind, String)>) {
        let (members, changes) = membership(prev, &ranking(ids), 2, 1);
        let next = SubState {
            members,
            ..prev.clone()
        };
        (
            next,
            changes.into_iter().map(|c| (c.event, c.article)).collect(),
        )
    }

    #[test]
    fn enters_at_top_leaves_below_the_band() {
        let s0 = SubState::default();
        let (s1, ch) = step(&s0, &["a", "b", "c"]);
        assert_eq!(
            ch,
            [
                (EventKind::Entered, "a".into()),
                (EventKind::Entered, "b".into())
            ]
        );
        // b drops to 3 = top + hysteresis: still in; c rises to 2: enters.
        let (s2, ch) = step(&s1, &["a", "c", "b"]);
        assert_eq!(ch, [(EventKind::Entered, "c".into())]);
        // b and c swap across the border again: nothing.
        let (s3, ch) = step(&s2, &["a", "b", "c"]);
        assert!(ch.is_empty(), "{ch:?}");
        // c falls to 4: leaves; then out of the ranking entirely: b leaves.
        let (s4, ch) = step(&s3, &["a", "b", "d", "c"]);
        assert_eq!(ch, [(EventKind::Left, "c".into())]);
        let (_, ch) = step(&s4, &["a"]);
        assert_eq!(ch, [(EventKind::Left, "b".into())]);
    }

    #[test]
    fn held_once_per_hold_and_only_since_the_subscription() {
        let members = BTreeMap::from([(
            "a".to_string(),
            Member {
                rank: 2,
                rising: false,
            },
        )]);
        let now = |v: &[(&str, i64)]| -> BTreeMap<String, i64> {
            v.iter().map(|(a, t)| (a.to_string(), *t)).collect()
        };
        // "old" was held before the subscription (at 100) existed: never told.
        let (told, ch) = held(
            &BTreeSet::new(),
            &now(&[("a", 150), ("old", 50)]),
            100,
            &members,
        );
        assert_eq!(
            ch,
            [Change {
                event: EventKind::Held,
                article: "a".into(),
                rank: Some(2)
            }]
        );
        assert_eq!(told, BTreeSet::from(["a".to_string()]));
        // Read again (a crash before the commit re-decides; after it, this):
        // nothing new.
        let (told, ch) = held(&told, &now(&[("a", 150), ("b", 160)]), 100, &members);
        assert_eq!(ch.len(), 1);
        assert_eq!((ch[0].article.as_str(), ch[0].rank), ("b", None));
        // "a" allowed, later held again: told again.
        let (told, ch) = held(&told, &now(&[("b", 160)]), 100, &members);
        assert!(ch.is_empty());
        assert_eq!(told, BTreeSet::from(["b".to_string()]));
        let (_, ch) = held(&told, &now(&[("a", 300), ("b", 160)]), 100, &members);
        assert_eq!(ch.len(), 1);
        assert_eq!(ch[0].article, "a");
    }

    #[test]
    fn rising_once_per_spike_and_ids_follow_the_state() {
        let sub = Subscription {
            id: "w1".into(),
            url: String::new(),
            secret: String::new(),
            events: vec![EventKind::Rising, EventKind::Entered],
            query: BTreeMap::new(),
            top: 2,
            created_at: 0,
        };
        let mut st = SubState::default();
        let (mut members, _) = membership(&st, &ranking(&["a"]), 2, 0);
        let on = HashMap::from([("a".to_string(), true)]);
        assert_eq!(rising(&mut members, &on).len(), 1);
        assert_eq!(rising(&mut members, &on).len(), 0);
        let off = HashMap::from([("a".to_string(), false)]);
        assert_eq!(rising(&mut members, &off).len(), 0);
        let ch = rising(&mut members, &on);
        let e = entries(&sub, &mut st, ch, 0, 0);
        assert_eq!(e[0].delivery, "w1-1");
        // Left is not asked for: no entry, no number used.
        let left = vec![Change {
            event: EventKind::Left,
            article: "a".into(),
            rank: None,
        }];
        assert!(entries(&sub, &mut st, left, 0, 0).is_empty());
        assert_eq!(st.seq, 1);
    }
}
