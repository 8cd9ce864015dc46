//! What a run measured (how stable the top N was, how fast new articles
//! got in) and the two ways it is reported: a JSON summary and a text
//! report.

use serde_json::{Value, json};

use super::checks::{Check, rank_text};
use super::drive::{Look, Verdicts};
use super::traffic::{Article, Source};
use super::{SIM_START, SimulateArgs};
use crate::cli::metrics::{mean, mean_abs_rank_change, overlap};
use crate::cli::{fmt_offset, fmt_span};
use crate::model::{RangeSpec, Verdict};

/// Stability of the top N between consecutive looks.
pub(super) struct Stability {
    /// Consecutive pairs compared.
    pairs: usize,
    mean_overlap: Option<f64>,
    mean_rank_change: Option<f64>,
    /// Mean number of articles new in the top N per step.
    entries: Option<f64>,
}

impl Stability {
    pub(super) fn of(tops: &[Vec<usize>]) -> Stability {
        let pairs: Vec<(f64, Option<f64>)> = tops
            .windows(2)
            .map(|w| (overlap(&w[0], &w[1]), mean_abs_rank_change(&w[0], &w[1])))
            .collect();
        Stability {
            pairs: pairs.len(),
            mean_overlap: mean(pairs.iter().map(|p| p.0)),
            mean_rank_change: mean(pairs.iter().filter_map(|p| p.1)),
            entries: mean(
                tops.windows(2)
                    .map(|w| w[1].iter().filter(|a| !w[0].contains(a)).count() as f64),
            ),
        }
    }
}

/// Articles published during the run: from publication to the first look
/// with them in the top N.
pub(super) struct NewArticles {
    /// (article, published, entered), in article order.
    items: Vec<(usize, i64, Option<i64>)>,
    /// Seconds to enter, of those that entered, shortest first.
    latencies: Vec<i64>,
    median: Option<i64>,
    mean: Option<f64>,
}

impl NewArticles {
    pub(super) fn of(articles: &[Article], looks: &[Look], tops: &[Vec<usize>]) -> NewArticles {
        let mut items = Vec::new();
        for (i, a) in articles.iter().enumerate() {
            if a.published <= 0 {
                continue;
            }
            let entered = looks
                .iter()
                .zip(tops)
                .find(|(l, top)| l.offset >= a.published && top.contains(&i))
                .map(|(l, _)| l.offset);
            items.push((i, a.published, entered));
        }
        let mut latencies: Vec<i64> = items
            .iter()
            .filter_map(|&(_, p, e)| e.map(|e| e - p))
            .collect();
        latencies.sort_unstable();
        let median = (!latencies.is_empty()).then(|| latencies[latencies.len() / 2]);
        let mean = mean(latencies.iter().map(|&l| l as f64));
        NewArticles {
            items,
            latencies,
            median,
            mean,
        }
    }
}

/// Everything a run's report shows.
pub(super) struct Report<'a> {
    pub(super) args: &'a SimulateArgs,
    pub(super) range: RangeSpec,
    /// Requests sent in the run.
    pub(super) events: usize,
    pub(super) articles: &'a [Article],
    pub(super) verdicts: &'a Verdicts,
    pub(super) looks: &'a [Look],
    pub(super) tops: &'a [Vec<usize>],
    /// The last look.
    pub(super) last: &'a Look,
    pub(super) stability: Stability,
    pub(super) new: NewArticles,
    pub(super) checks: Vec<Check>,
}

impl Report<'_> {
    pub(super) fn all_pass(&self) -> bool {
        self.checks.iter().all(|c| c.pass)
    }

    fn name(&self, i: usize) -> String {
        self.articles[i].id.as_str().to_string()
    }

    /// Events from `s`, whatever their verdict.
    fn total(&self, s: Source) -> u64 {
        self.verdicts
            .iter()
            .filter(|((src, _), _)| *src == s)
            .map(|(_, n)| n)
            .sum()
    }

    fn verdict_json(&self, s: Source) -> Value {
        Verdict::ALL
            .iter()
            .map(|v| {
                (
                    v.as_str().to_string(),
                    json!(self.verdicts.get(&(s, *v)).copied().unwrap_or(0)),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// The JSON summary (`--json`).
    pub(super) fn json(&self) -> Value {
        let args = self.args;
        let (st, new) = (&self.stability, &self.new);
        json!({
            "config": {
                "articles": args.articles, "durationSecs": args.duration, "seed": args.seed,
                "model": args.model.as_str(), "range": self.range.to_string(), "top": args.top,
                "stepSecs": args.step, "start": SIM_START,
            },
            "events": {
                "total": self.events,
                "reader": self.total(Source::Reader), "bot": self.total(Source::Bot), "flood": self.total(Source::Flood),
            },
            "verdicts": {
                "reader": self.verdict_json(Source::Reader),
                "bot": self.verdict_json(Source::Bot),
                "flood": self.verdict_json(Source::Flood),
            },
            "steps": self.looks.iter().zip(self.tops).map(|(l, top)| json!({
                "t": l.offset,
                "top": top.iter().map(|&i| json!({"id": self.name(i), "score": l.score(i)})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "stability": {
                "pairs": st.pairs,
                "meanOverlap": st.mean_overlap,
                "meanAbsRankChange": st.mean_rank_change,
                "meanEntriesPerStep": st.entries,
            },
            "newArticles": {
                "published": new.items.len(),
                "entered": new.latencies.len(),
                "medianSecs": new.median,
                "meanSecs": new.mean,
                "maxSecs": new.latencies.last(),
                "items": new.items.iter().map(|&(i, p, e)| json!({
                    "id": self.name(i), "publishedAt": p, "enteredAt": e, "secs": e.map(|e| e - p),
                })).collect::<Vec<_>>(),
            },
            "checks": self.checks.iter().map(|c| json!({
                "name": c.name, "pass": c.pass, "detail": c.detail,
            })).collect::<Vec<_>>(),
            "articles": self.articles.iter().enumerate().map(|(i, a)| json!({
                "id": self.name(i), "kind": a.kind.as_str(), "publishedAt": a.published,
                "viewRequests": a.view_requests,
                "finalRank": self.last.rank(i), "finalScore": self.last.score(i),
            })).collect::<Vec<_>>(),
        })
    }

    /// The text report, on stdout.
    pub(super) fn print(&self) {
        self.print_traffic();
        self.print_tops();
        self.print_new_articles();
        println!("\nedge checks (seed 001):");
        for c in &self.checks {
            println!(
                "{}  {}: {}",
                if c.pass { "PASS" } else { "FAIL" },
                c.name,
                c.detail
            );
        }
    }

    /// The run's settings and its events by source and verdict.
    fn print_traffic(&self) {
        let args = self.args;
        println!(
            "hotrank simulate: {} articles over {}, seed {}, model {}, range {}, top {}, step {}",
            args.articles,
            fmt_span(args.duration),
            args.seed,
            args.model.as_str(),
            self.range,
            args.top,
            fmt_span(args.step)
        );
        let vtext = |s: Source| {
            Verdict::ALL
                .iter()
                .filter_map(|v| {
                    self.verdicts
                        .get(&(s, *v))
                        .map(|c| format!("{} {c}", v.as_str()))
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "events: {} (readers {}: {}; bots {}: {}; floods {}: {})",
            self.events,
            self.total(Source::Reader),
            vtext(Source::Reader),
            self.total(Source::Bot),
            vtext(Source::Bot),
            self.total(Source::Flood),
            vtext(Source::Flood)
        );
    }

    /// The top N at each step, and how stable it was.
    fn print_tops(&self) {
        let n = self.args.top;
        println!("\ntop {n} by step:");
        for (l, top) in self.looks.iter().zip(self.tops) {
            let ids: Vec<String> = top.iter().map(|&i| self.name(i)).collect();
            println!("  {}  {}", fmt_offset(l.offset), ids.join(" "));
        }
        let f2 = |x: Option<f64>| x.map_or("n/a".into(), |x| format!("{x:.2}"));
        let st = &self.stability;
        println!(
            "\nstability: mean overlap@{n} between consecutive steps {}, mean |rank change| {}, mean entries per step {}",
            f2(st.mean_overlap),
            f2(st.mean_rank_change),
            f2(st.entries)
        );
    }

    /// How fast the articles published during the run entered the top N.
    fn print_new_articles(&self) {
        let n = self.args.top;
        let new = &self.new;
        let secs = |x: Option<i64>| x.map_or("n/a".into(), |x| fmt_offset(x)[1..].to_string());
        println!(
            "new articles: {} published during the run, {} entered the top {n}; time to enter: median {}, mean {}, max {} (resolution: one step)",
            new.items.len(),
            new.latencies.len(),
            secs(new.median),
            secs(new.mean.map(|x| x.round() as i64)),
            secs(new.latencies.last().copied())
        );
        for &(i, p, e) in &new.items {
            match e {
                Some(e) => println!(
                    "  {:<12} published {}  entered {}  after {}",
                    self.name(i),
                    fmt_offset(p),
                    fmt_offset(e),
                    secs(Some(e - p))
                ),
                None => println!(
                    "  {:<12} published {}  never entered ({} at the end)",
                    self.name(i),
                    fmt_offset(p),
                    rank_text(self.last.rank(i))
                ),
            }
        }
    }
}
