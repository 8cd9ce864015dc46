//! `hotrank simulate`: seed 001's local load test, offline.
//!
//! Generates articles with different traffic mixes, turns the traffic into
//! events the way the HTTP layer does (keyed identity hashes, the bot
//! check on user agents, arrival times for rate limits), runs them through
//! an in-memory embedded store with a simulated clock, and reports how the
//! top N evolved, how stable it was, how fast new articles got in, and
//! seed 001's edge checks as PASS/FAIL lines.
//!
//! The article mixes (ids say which is which):
//! - `probe-burst`: 60 readers in the first 90 s who reload 4–6 times and
//!   leave after a few seconds (high early PV, short dwell);
//! - `probe-steady`: 75 readers spread over the run who stay 150–280 s
//!   (steady UV, long dwell);
//! - `burst-*`, `steady-*`: more of the same kinds, with random sizes;
//! - `dwell-*`: a few readers with 3000–6000 s dwell reports (outliers far
//!   above the 300 s cap);
//! - `old-*`: published 30 h before the run, read only in its first minutes;
//! - `late-*`: published mid-run, read mostly right after publication;
//! - `tail-*`: the long tail, published up to 20 h before, a few readers;
//! - bots (crawler user agents) crawling every article and hammering
//!   `bot-target`, which nobody else reads; two floods: one IP without a
//!   visitor id, and one visitor id, each sending several views a second.

mod checks;
mod drive;
mod report;
mod traffic;

use std::path::PathBuf;

use super::{build_config, parse_duration, parse_kv, write_json};
use crate::model::{RangeSpec, Timestamp};
use crate::score::ModelKind;
use checks::{check_long_dwell, check_old_drifts, check_quarantine, check_uv_beats_pv};
use drive::{Look, Sim};
use report::{NewArticles, Report, Stability};

/// Simulated start: 2025-11-21 07:00:00 UTC, on an hour boundary.
pub const SIM_START: Timestamp = 1_763_708_400;

#[derive(clap::Args, Debug, Clone)]
pub struct SimulateArgs {
    /// Number of articles (at least 8).
    #[arg(long, default_value_t = 100)]
    pub articles: usize,
    /// Simulated duration: 90s, 10m, 1h...
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub duration: i64,
    /// Random seed; the same seed gives the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Ranking model: gravity, weighted, votes, window, reddit, controversy,
    /// confidence, hn or lemmy.
    #[arg(long, default_value = "weighted", value_parser = parse_model)]
    pub model: ModelKind,
    /// Ranking range: 1h..2160h, 1d..90d or all [default: the model's own,
    /// 24h for weighted, 72h for gravity and window].
    #[arg(long, value_parser = parse_range)]
    pub range: Option<RangeSpec>,
    /// Size of the top list followed.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Simulated time between two looks at the top N.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub step: i64,
    /// TOML configuration (model parameters, gate settings).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override one configuration key, e.g. `--set models.weighted.uv=0.3`
    /// (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_kv)]
    pub set: Vec<(String, String)>,
    /// Write a JSON summary to this file (`-`: stdout, instead of the text report).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Exit with status 1 if an edge check fails.
    #[arg(long)]
    pub strict: bool,
}

pub fn parse_model(s: &str) -> Result<ModelKind, String> {
    ModelKind::parse(s).ok_or_else(|| {
        let known: Vec<&str> = ModelKind::ALL.iter().map(|m| m.as_str()).collect();
        format!("unknown model {s:?}; one of {}", known.join(", "))
    })
}

pub fn parse_range(s: &str) -> Result<RangeSpec, String> {
    RangeSpec::parse(s).ok_or_else(|| format!("range must be 1h..2160h, 1d..90d or all, got {s:?}"))
}

/// Runs the simulation and reports it; `Ok(false)` when an edge check
/// failed under `--strict`.
pub fn run(args: SimulateArgs) -> Result<bool, String> {
    if args.top == 0 {
        return Err("--top must be at least 1".into());
    }
    let config = build_config(args.config.as_deref(), &args.set)?;
    let range = args.range.unwrap_or(args.model.default_range());
    let duration = args.duration;
    let sim = Sim::new(&args, &config, range)?;
    let (looks, verdicts) = sim.drive(args.step, duration)?;
    // After the run, with no new events at all.
    let after: Vec<Look> = [24, 48, 72]
        .into_iter()
        .map(|h| sim.look(duration + h * 3600))
        .collect::<Result<_, _>>()?;

    let tops: Vec<Vec<usize>> = looks.iter().map(|l| l.top(args.top)).collect();
    let stability = Stability::of(&tops);
    let new = NewArticles::of(&sim.articles, &looks, &tops);
    let last = looks.last().expect("at least one step");
    let articles = &sim.articles;
    let checks = vec![
        check_long_dwell(articles, &looks, &sim.models, args.model),
        check_old_drifts(articles, &looks, &after),
        check_uv_beats_pv(articles, &looks),
        check_quarantine(articles, &tops, &verdicts, &sim.rt, &sim.store, duration)?,
    ];
    let report = Report {
        args: &args,
        range,
        events: sim.raw.len(),
        articles,
        verdicts: &verdicts,
        looks: &looks,
        tops: &tops,
        last,
        stability,
        new,
        checks,
    };
    let all_pass = report.all_pass();
    if let Some(path) = &args.json {
        write_json(path, &report.json())?;
        if path.as_os_str() == "-" {
            return Ok(all_pass || !args.strict);
        }
    }
    report.print();
    Ok(all_pass || !args.strict)
}
