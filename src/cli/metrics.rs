//! Comparing two top-N lists: overlap, Jaccard, set differences, rank
//! moves and Kendall's tau. Pure functions over lists of ids, best first.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// `|A ∩ B| / max(|A|, |B|)`: `overlap@N` when both lists are N long. Two
/// empty lists agree (1.0).
pub fn overlap<T: Eq + Hash>(a: &[T], b: &[T]) -> f64 {
    let n = a.len().max(b.len());
    if n == 0 {
        return 1.0;
    }
    common_count(a, b) as f64 / n as f64
}

/// `|A ∩ B| / |A ∪ B|`; two empty lists agree (1.0).
pub fn jaccard<T: Eq + Hash>(a: &[T], b: &[T]) -> f64 {
    let common = common_count(a, b);
    let union = set(a).len() + set(b).len() - common;
    if union == 0 {
        1.0
    } else {
        common as f64 / union as f64
    }
}

fn set<T: Eq + Hash>(xs: &[T]) -> HashSet<&T> {
    xs.iter().collect()
}

/// How many items the two lists share.
pub fn common_count<T: Eq + Hash>(a: &[T], b: &[T]) -> usize {
    let sb = set(b);
    set(a).into_iter().filter(|x| sb.contains(x)).count()
}

/// Items of `a` not in `b`, in `a`'s order.
pub fn only_in<T: Eq + Hash + Clone>(a: &[T], b: &[T]) -> Vec<T> {
    let sb = set(b);
    a.iter().filter(|x| !sb.contains(x)).cloned().collect()
}

/// An item present in both lists, with its 1-based rank in each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankMove<T> {
    pub id: T,
    pub rank_a: usize,
    pub rank_b: usize,
}

impl<T> RankMove<T> {
    /// Positive when the item ranks higher (closer to 1) in B.
    pub fn delta(&self) -> i64 {
        self.rank_a as i64 - self.rank_b as i64
    }
}

/// Every item in both lists with its rank in each, in `a`'s order.
pub fn rank_moves<T: Eq + Hash + Clone>(a: &[T], b: &[T]) -> Vec<RankMove<T>> {
    let pos_b: HashMap<&T, usize> = b.iter().enumerate().map(|(i, x)| (x, i + 1)).collect();
    a.iter()
        .enumerate()
        .filter_map(|(i, x)| {
            pos_b.get(x).map(|&rb| RankMove {
                id: x.clone(),
                rank_a: i + 1,
                rank_b: rb,
            })
        })
        .collect()
}

/// Mean of `|rank_a − rank_b|` over the items in both lists; `None` if
/// they have none in common.
pub fn mean_abs_rank_change<T: Eq + Hash + Clone>(a: &[T], b: &[T]) -> Option<f64> {
    let moves = rank_moves(a, b);
    if moves.is_empty() {
        return None;
    }
    let total: i64 = moves.iter().map(|m| m.delta().abs()).sum();
    Some(total as f64 / moves.len() as f64)
}

/// Kendall's tau between the two orders of the items both lists hold:
/// `(concordant − discordant) / (n(n−1)/2)`, from −1 (reversed) to 1
/// (same order). Ranks in a list are distinct, so there are no ties.
/// `None` with fewer than two common items.
pub fn kendall_tau<T: Eq + Hash + Clone>(a: &[T], b: &[T]) -> Option<f64> {
    let moves = rank_moves(a, b);
    let n = moves.len();
    if n < 2 {
        return None;
    }
    // `moves` is in A's order, so a pair is concordant when B agrees.
    let mut score = 0i64;
    for i in 0..n {
        for j in i + 1..n {
            score += if moves[i].rank_b < moves[j].rank_b {
                1
            } else {
                -1
            };
        }
    }
    let pairs = (n * (n - 1) / 2) as f64;
    Some(score as f64 / pairs)
}

/// Mean of the values, `None` if there are none.
pub fn mean(xs: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (sum, n) = xs
        .into_iter()
        .fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| sum / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn overlap_and_jaccard() {
        let a = v("a b c d");
        let b = v("b a e f");
        assert_eq!(overlap(&a, &b), 0.5);
        assert_eq!(jaccard(&a, &b), 2.0 / 6.0);
        assert_eq!(overlap(&a, &a), 1.0);
        assert_eq!(jaccard(&a, &a), 1.0);
        assert_eq!(overlap(&a, &v("x y z w")), 0.0);
        let empty: Vec<String> = vec![];
        assert_eq!(overlap(&empty, &empty), 1.0);
        assert_eq!(jaccard(&empty, &empty), 1.0);
        assert_eq!(overlap(&a, &empty), 0.0);
        // Shorter lists: the longer one is the denominator.
        assert_eq!(overlap(&v("a b"), &v("a b c d")), 0.5);
    }

    #[test]
    fn differences_and_moves() {
        let a = v("a b c d");
        let b = v("d a x");
        assert_eq!(only_in(&a, &b), v("b c"));
        assert_eq!(only_in(&b, &a), v("x"));
        let m = rank_moves(&a, &b);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].id.as_str(), m[0].rank_a, m[0].rank_b), ("a", 1, 2));
        assert_eq!(m[0].delta(), -1);
        assert_eq!((m[1].id.as_str(), m[1].rank_a, m[1].rank_b), ("d", 4, 1));
        assert_eq!(m[1].delta(), 3);
        assert_eq!(mean_abs_rank_change(&a, &b), Some(2.0));
        assert_eq!(mean_abs_rank_change(&a, &v("x")), None);
        assert_eq!(mean_abs_rank_change(&a, &a), Some(0.0));
    }

    #[test]
    fn kendall() {
        let a = v("a b c d");
        assert_eq!(kendall_tau(&a, &a), Some(1.0));
        assert_eq!(kendall_tau(&a, &v("d c b a")), Some(-1.0));
        // One adjacent swap among 4: 5 concordant, 1 discordant.
        assert_eq!(kendall_tau(&a, &v("b a c d")), Some(4.0 / 6.0));
        // Only common items count: x and y are ignored.
        assert_eq!(kendall_tau(&v("a x b c"), &v("a b y c")), Some(1.0));
        assert_eq!(kendall_tau(&v("a b"), &v("b x")), None);
        assert_eq!(kendall_tau(&v("a"), &v("a")), None);
    }

    #[test]
    fn means() {
        assert_eq!(mean([1.0, 2.0, 6.0]), Some(3.0));
        assert_eq!(mean(std::iter::empty()), None);
    }
}
