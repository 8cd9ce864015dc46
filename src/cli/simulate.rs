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

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use serde_json::{Value, json};

use super::metrics::{mean, mean_abs_rank_change, overlap};
use super::{
    Progress, build_config, fmt_offset, fmt_span, parse_duration, parse_kv, runtime, write_json,
};
use crate::gate::{BotDetector, Identity};
use crate::model::{
    ArticleId, ArticleMeta, Counters, Event, EventType, HotQuery, RangeSpec, Timestamp, Verdict,
};
use crate::score::{ModelKind, Models};
use crate::store::embedded::EmbeddedStore;
use crate::store::{Store, StoreSettings};

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

/// SplitMix64: small, fast and stable across versions, so a seed means the
/// same run forever.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `lo..=hi`.
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    ProbeBurst,
    ProbeSteady,
    Burst,
    Steady,
    LongDwell,
    Old,
    Late,
    Tail,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::ProbeBurst => "probe-burst",
            Kind::ProbeSteady => "probe-steady",
            Kind::Burst => "burst",
            Kind::Steady => "steady",
            Kind::LongDwell => "dwell",
            Kind::Old => "old",
            Kind::Late => "late",
            Kind::Tail => "tail",
        }
    }
}

struct Article {
    id: ArticleId,
    kind: Kind,
    /// Seconds from the start of the run (negative: before it).
    published: i64,
    /// View requests sent by readers (before the gate).
    view_requests: u64,
    /// Offset of the last reader event.
    last_event: Option<i64>,
}

/// Where simulated traffic comes from, for the verdict tallies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Source {
    Reader,
    Bot,
    Flood,
}

/// One simulated request, before the HTTP layer's hashing.
struct RawEvent {
    arrival_ms: i64,
    kind: EventType,
    article: ArticleId,
    visitor_id: Option<String>,
    ip: IpAddr,
    user_agent: &'static str,
    seconds: u32,
    source: Source,
}

const BROWSERS: [&str; 4] = [
    "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
];

const BOTS: [&str; 3] = [
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "python-requests/2.32.3",
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
];

/// How one kind of article is read.
struct Mix {
    readers: (i64, i64),
    /// Reads happen in `[published, published + span]`, `None`: until the end.
    span: Option<i64>,
    /// Reads cluster right after publication (`u²` instead of `u`).
    front_loaded: bool,
    reloads: (i64, i64),
    dwell: (i64, i64),
    like: f64,
    comment: f64,
}

fn mix(kind: Kind, duration: i64) -> Mix {
    let quarter = (duration / 4).max(1);
    let m = |readers, span, reloads, dwell, like, comment| Mix {
        readers,
        span,
        front_loaded: kind == Kind::Late,
        reloads,
        dwell,
        like,
        comment,
    };
    match kind {
        Kind::ProbeBurst => m((60, 60), Some(quarter.min(90)), (4, 6), (3, 8), 0.03, 0.0),
        Kind::ProbeSteady => m((75, 75), None, (1, 1), (150, 280), 0.15, 0.05),
        Kind::Burst => m((30, 70), Some(quarter.min(120)), (2, 6), (2, 10), 0.02, 0.0),
        Kind::Steady => m((20, 60), None, (1, 1), (60, 240), 0.10, 0.03),
        Kind::LongDwell => m((14, 22), None, (1, 1), (3000, 6000), 0.10, 0.0),
        Kind::Old => m(
            (40, 60),
            Some(quarter.min(120)),
            (1, 2),
            (60, 150),
            0.10,
            0.02,
        ),
        Kind::Late => m((35, 90), None, (1, 1), (60, 240), 0.12, 0.04),
        Kind::Tail => m((1, 15), None, (1, 2), (10, 120), 0.05, 0.01),
    }
}

/// The article list: the two probes, then each kind by share.
fn plan_articles(n: usize, duration: i64, rng: &mut Rng) -> Result<Vec<Article>, String> {
    if n < 8 {
        return Err("--articles must be at least 8".into());
    }
    let share = |pct: usize| (n * pct / 100).max(1);
    let mut kinds = vec![Kind::ProbeBurst, Kind::ProbeSteady];
    for (kind, count) in [
        (Kind::LongDwell, share(3)),
        (Kind::Old, share(3)),
        (Kind::Burst, share(10)),
        (Kind::Steady, share(15)),
        (Kind::Late, share(15)),
    ] {
        kinds.extend(std::iter::repeat_n(kind, count));
    }
    kinds.truncate(n);
    kinds.resize(n, Kind::Tail);
    Ok(kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| {
            let published = match kind {
                Kind::Old => -30 * 3600,
                Kind::Late => rng.int(duration / 4, duration * 3 / 4),
                Kind::Burst => rng.int(0, duration / 3),
                Kind::Tail => -rng.int(0, 20 * 3600),
                _ => 0,
            };
            let id = match kind {
                Kind::ProbeBurst | Kind::ProbeSteady => kind.as_str().to_string(),
                _ => format!("{}-{i:03}", kind.as_str()),
            };
            Article {
                id: ArticleId::parse(&id).expect("valid id"),
                kind,
                published,
                view_requests: 0,
                last_event: None,
            }
        })
        .collect())
}

fn reader(k: u32) -> (Option<String>, IpAddr, &'static str) {
    // One reader in five has no visitor id (identified by IP + user agent).
    let id = (!k.is_multiple_of(5)).then(|| format!("r{k}"));
    let ip = IpAddr::V4(Ipv4Addr::new(10, (k >> 16) as u8, (k >> 8) as u8, k as u8));
    (id, ip, BROWSERS[k as usize % BROWSERS.len()])
}

/// Every request of the run, in arrival order (offsets from the start, ms).
fn generate(articles: &mut [Article], duration: i64, rng: &mut Rng) -> Vec<RawEvent> {
    let end_ms = duration * 1000;
    let pool = (articles.len() as u32 * 40).max(2000);
    let mut out = Vec::new();
    let push = |out: &mut Vec<RawEvent>, ms: i64, ev: RawEvent| {
        if (0..end_ms).contains(&ms) {
            out.push(RawEvent {
                arrival_ms: ms,
                ..ev
            });
        }
    };
    for a in articles.iter_mut() {
        let m = mix(a.kind, duration);
        let start = a.published.max(0);
        let until = m.span.map_or(duration, |s| (start + s).min(duration));
        if until <= start {
            continue;
        }
        for _ in 0..rng.int(m.readers.0, m.readers.1) {
            let u = rng.unit();
            let u = if m.front_loaded { u * u } else { u };
            let t_ms = start * 1000 + (u * ((until - start) * 1000) as f64) as i64;
            let k = rng.int(0, i64::from(pool) - 1) as u32;
            let (visitor_id, ip, ua) = reader(k);
            let ev = |kind, seconds| RawEvent {
                arrival_ms: 0,
                kind,
                article: a.id.clone(),
                visitor_id: visitor_id.clone(),
                ip,
                user_agent: ua,
                seconds,
                source: Source::Reader,
            };
            let mut t = t_ms;
            for _ in 0..rng.int(m.reloads.0, m.reloads.1) {
                if t < end_ms {
                    a.view_requests += 1;
                    a.last_event = Some(a.last_event.unwrap_or(0).max(t / 1000));
                }
                push(&mut out, t, ev(EventType::View, 0));
                t += rng.int(3_000, 10_000);
            }
            let dwell = rng.int(m.dwell.0, m.dwell.1);
            // One dwell report per visit, sent on leaving (or after 45 s).
            let report = t_ms + dwell.min(45) * 1000 + 500;
            push(&mut out, report, ev(EventType::Dwell, dwell as u32));
            if rng.chance(m.like) {
                push(&mut out, report - 250, ev(EventType::Like, 0));
            }
            if rng.chance(m.comment) {
                push(&mut out, report - 100, ev(EventType::Comment, 0));
            }
            if report < end_ms {
                a.last_event = Some(a.last_event.unwrap_or(0).max(report / 1000));
            }
        }
    }
    // Crawlers read every article once a minute; one hammers `bot-target`.
    let bot_target = ArticleId::parse("bot-target").expect("valid id");
    for (b, &ua) in BOTS.iter().enumerate() {
        let ip = IpAddr::V4(Ipv4Addr::new(66, 249, 66, b as u8 + 1));
        let bot_ev = |article: ArticleId| RawEvent {
            arrival_ms: 0,
            kind: EventType::View,
            article,
            visitor_id: None,
            ip,
            user_agent: ua,
            seconds: 0,
            source: Source::Bot,
        };
        let mut t = rng.int(0, 59_999);
        while t < end_ms {
            for (i, a) in articles.iter().enumerate() {
                push(&mut out, t + i as i64 * 50, bot_ev(a.id.clone()));
            }
            t += 60_000;
        }
        if b == 0 {
            for ms in (0..end_ms).step_by(500) {
                push(&mut out, ms, bot_ev(bot_target.clone()));
            }
        }
    }
    // Floods: a script behind one IP without a visitor id (10/s), and one
    // visitor id replayed from one IP (5/s), on two tail articles.
    let tails: Vec<ArticleId> = articles
        .iter()
        .filter(|a| a.kind == Kind::Tail)
        .map(|a| a.id.clone())
        .chain(articles.iter().rev().map(|a| a.id.clone()))
        .take(2)
        .collect();
    let floods = [
        (None, Ipv4Addr::new(203, 0, 113, 7), 100),
        (Some("flood-cookie"), Ipv4Addr::new(198, 51, 100, 9), 200),
    ];
    for ((visitor, ip, every_ms), target) in floods.into_iter().zip(tails) {
        for ms in (0..end_ms).step_by(every_ms) {
            push(
                &mut out,
                ms + rng.int(0, 20),
                RawEvent {
                    arrival_ms: 0,
                    kind: EventType::View,
                    article: target.clone(),
                    visitor_id: visitor.map(str::to_string),
                    ip: IpAddr::V4(ip),
                    user_agent: BROWSERS[0],
                    seconds: 0,
                    source: Source::Flood,
                },
            );
        }
    }
    out.sort_by_key(|e| e.arrival_ms);
    out
}

/// What the HTTP layer makes of a request (an untrusted browser client).
fn to_event(raw: &RawEvent, identity: &Identity, bots: &BotDetector) -> Event {
    let arrival_ms = SIM_START * 1000 + raw.arrival_ms;
    let now = arrival_ms.div_euclid(1000);
    let visitor = match &raw.visitor_id {
        Some(v) => identity.visitor(v),
        None => identity.anonymous_visitor(raw.ip, raw.user_agent, now),
    };
    Event {
        kind: raw.kind,
        article: raw.article.clone(),
        visitor,
        ip: identity.ip(raw.ip),
        ts: now,
        arrival_ms,
        event_id: None,
        seconds: raw.seconds,
        bot: bots.is_bot(raw.user_agent),
        trusted: false,
    }
}

/// One look at the ranking: every ranked article with its score, best first.
struct Look {
    offset: i64,
    ranked: Vec<(usize, f64, Counters)>,
}

impl Look {
    fn top(&self, n: usize) -> Vec<usize> {
        self.ranked.iter().take(n).map(|r| r.0).collect()
    }
    /// 1-based rank of an article, if ranked.
    fn rank(&self, a: usize) -> Option<usize> {
        self.ranked.iter().position(|r| r.0 == a).map(|p| p + 1)
    }
    fn score(&self, a: usize) -> Option<f64> {
        self.ranked.iter().find(|r| r.0 == a).map(|r| r.1)
    }
    fn counters(&self, a: usize) -> Option<Counters> {
        self.ranked.iter().find(|r| r.0 == a).map(|r| r.2)
    }
}

struct Check {
    name: &'static str,
    pass: bool,
    detail: String,
}

fn rank_text(r: Option<usize>) -> String {
    r.map_or("unranked".into(), |r| format!("rank {r}"))
}

pub fn run(args: SimulateArgs) -> Result<bool, String> {
    if args.top == 0 {
        return Err("--top must be at least 1".into());
    }
    let config = build_config(args.config.as_deref(), &args.set)?;
    let settings = StoreSettings::from_config(&config);
    let models = settings.models.clone();
    let range = args.range.unwrap_or(args.model.default_range());
    let duration = args.duration;
    let mut rng = Rng(args.seed ^ 0x5eed_0001);
    let mut articles = plan_articles(args.articles, duration, &mut rng)?;
    let raw = generate(&mut articles, duration, &mut rng);
    let index: HashMap<ArticleId, usize> = articles
        .iter()
        .enumerate()
        .map(|(i, a)| (a.id.clone(), i))
        .collect();

    let mut secret = [0u8; 16];
    secret[..8].copy_from_slice(&args.seed.to_le_bytes());
    let identity = Identity::new(secret);
    let bots = BotDetector::new(
        &config.gate.bot_patterns,
        config.gate.empty_user_agent_is_bot,
    )
    .map_err(|e| format!("gate.bot_patterns: {e}"))?;
    let store = EmbeddedStore::in_memory(settings.clone());
    let rt = runtime()?;
    let query = HotQuery::top(args.model, range, settings.ranking_cap);
    let look = |offset: i64| -> Result<Look, String> {
        let page = rt
            .block_on(store.hot(&query, SIM_START + offset))
            .map_err(|e| e.to_string())?;
        Ok(Look {
            offset,
            ranked: page
                .items
                .iter()
                .filter_map(|it| index.get(&it.id).map(|&i| (i, it.score, it.counters)))
                .collect(),
        })
    };

    // Publications, in time order; those before the run happen at its start.
    let mut pubs: Vec<(i64, usize)> = articles
        .iter()
        .enumerate()
        .map(|(i, a)| (a.published.max(0), i))
        .collect();
    pubs.sort();
    let mut pubs = pubs.into_iter().peekable();

    let mut verdicts: HashMap<(Source, Verdict), u64> = HashMap::new();
    let mut looks: Vec<Look> = Vec::new();
    let mut progress = Progress::new();
    let mut next = 0usize;
    let mut t = 0i64;
    while t < duration {
        t = (t + args.step).min(duration);
        let mut batch = Vec::new();
        let mut sources = Vec::new();
        let mut flush = |batch: &mut Vec<Event>, sources: &mut Vec<Source>| -> Result<(), String> {
            if batch.is_empty() {
                return Ok(());
            }
            let now = batch.last().map_or(SIM_START, |e: &Event| e.ts);
            let outcomes = rt
                .block_on(store.ingest(std::mem::take(batch), now))
                .map_err(|e| e.to_string())?;
            for (o, s) in outcomes.into_iter().zip(sources.drain(..)) {
                if let Ok(o) = o {
                    *verdicts.entry((s, o.verdict)).or_default() += 1;
                }
            }
            Ok(())
        };
        while next < raw.len() && raw[next].arrival_ms < t * 1000 {
            let r = &raw[next];
            // Publish (PUT the article) before its first event.
            while let Some(&(p, i)) = pubs.peek() {
                if p * 1000 > r.arrival_ms {
                    break;
                }
                flush(&mut batch, &mut sources)?;
                put(&rt, &store, &articles[i])?;
                pubs.next();
            }
            batch.push(to_event(r, &identity, &bots));
            sources.push(r.source);
            if batch.len() >= 1000 {
                flush(&mut batch, &mut sources)?;
            }
            next += 1;
        }
        flush(&mut batch, &mut sources)?;
        while let Some(&(p, i)) = pubs.peek() {
            if p >= t {
                break;
            }
            put(&rt, &store, &articles[i])?;
            pubs.next();
        }
        looks.push(look(t)?);
        progress.tick(|secs| {
            format!(
                "simulate: {} / {} simulated, {next} / {} events, {:.0} events/s",
                fmt_offset(t),
                fmt_offset(duration),
                raw.len(),
                next as f64 / secs.max(1e-9)
            )
        });
    }
    progress.finish();
    // After the run, with no new events at all.
    let after: Vec<Look> = [24, 48, 72]
        .into_iter()
        .map(|h| look(duration + h * 3600))
        .collect::<Result<_, _>>()?;

    let n = args.top;
    let tops: Vec<Vec<usize>> = looks.iter().map(|l| l.top(n)).collect();

    // Stability between consecutive looks.
    let pairs: Vec<(f64, Option<f64>)> = tops
        .windows(2)
        .map(|w| (overlap(&w[0], &w[1]), mean_abs_rank_change(&w[0], &w[1])))
        .collect();
    let mean_overlap = mean(pairs.iter().map(|p| p.0));
    let mean_rank_change = mean(pairs.iter().filter_map(|p| p.1));
    let entries = mean(
        tops.windows(2)
            .map(|w| w[1].iter().filter(|a| !w[0].contains(a)).count() as f64),
    );

    // New articles: publication to first look with them in the top N.
    let mut new_articles = Vec::new();
    for (i, a) in articles.iter().enumerate() {
        if a.published <= 0 {
            continue;
        }
        let entered = looks
            .iter()
            .zip(&tops)
            .find(|(l, top)| l.offset >= a.published && top.contains(&i))
            .map(|(l, _)| l.offset);
        new_articles.push((i, a.published, entered));
    }
    let mut latencies: Vec<i64> = new_articles
        .iter()
        .filter_map(|&(_, p, e)| e.map(|e| e - p))
        .collect();
    latencies.sort_unstable();
    let median = (!latencies.is_empty()).then(|| latencies[latencies.len() / 2]);
    let mean_latency = mean(latencies.iter().map(|&l| l as f64));

    let last = looks.last().expect("at least one step");
    let checks = vec![
        check_long_dwell(&articles, &looks, &models, args.model),
        check_old_drifts(&articles, &looks, &after),
        check_uv_beats_pv(&articles, &looks),
        check_quarantine(&articles, &tops, &verdicts, &rt, &store, duration)?,
    ];

    let name = |i: usize| articles[i].id.as_str().to_string();
    let total = |s: Source| -> u64 {
        verdicts
            .iter()
            .filter(|((src, _), _)| *src == s)
            .map(|(_, n)| n)
            .sum()
    };
    let verdict_json = |s: Source| -> Value {
        Verdict::ALL
            .iter()
            .map(|v| {
                (
                    v.as_str().to_string(),
                    json!(verdicts.get(&(s, *v)).copied().unwrap_or(0)),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let summary = json!({
        "config": {
            "articles": args.articles, "durationSecs": duration, "seed": args.seed,
            "model": args.model.as_str(), "range": range.to_string(), "top": n,
            "stepSecs": args.step, "start": SIM_START,
        },
        "events": {
            "total": raw.len(),
            "reader": total(Source::Reader), "bot": total(Source::Bot), "flood": total(Source::Flood),
        },
        "verdicts": {
            "reader": verdict_json(Source::Reader),
            "bot": verdict_json(Source::Bot),
            "flood": verdict_json(Source::Flood),
        },
        "steps": looks.iter().zip(&tops).map(|(l, top)| json!({
            "t": l.offset,
            "top": top.iter().map(|&i| json!({"id": name(i), "score": l.score(i)})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "stability": {
            "pairs": pairs.len(),
            "meanOverlap": mean_overlap,
            "meanAbsRankChange": mean_rank_change,
            "meanEntriesPerStep": entries,
        },
        "newArticles": {
            "published": new_articles.len(),
            "entered": latencies.len(),
            "medianSecs": median,
            "meanSecs": mean_latency,
            "maxSecs": latencies.last(),
            "items": new_articles.iter().map(|&(i, p, e)| json!({
                "id": name(i), "publishedAt": p, "enteredAt": e, "secs": e.map(|e| e - p),
            })).collect::<Vec<_>>(),
        },
        "checks": checks.iter().map(|c| json!({
            "name": c.name, "pass": c.pass, "detail": c.detail,
        })).collect::<Vec<_>>(),
        "articles": articles.iter().enumerate().map(|(i, a)| json!({
            "id": name(i), "kind": a.kind.as_str(), "publishedAt": a.published,
            "viewRequests": a.view_requests,
            "finalRank": last.rank(i), "finalScore": last.score(i),
        })).collect::<Vec<_>>(),
    });
    let all_pass = checks.iter().all(|c| c.pass);
    if let Some(path) = &args.json {
        write_json(path, &summary)?;
        if path.as_os_str() == "-" {
            return Ok(all_pass || !args.strict);
        }
    }

    // The text report.
    println!(
        "hotrank simulate: {} articles over {}, seed {}, model {}, range {}, top {}, step {}",
        args.articles,
        fmt_span(duration),
        args.seed,
        args.model.as_str(),
        range,
        n,
        fmt_span(args.step)
    );
    let vtext = |s: Source| {
        Verdict::ALL
            .iter()
            .filter_map(|v| {
                verdicts
                    .get(&(s, *v))
                    .map(|c| format!("{} {c}", v.as_str()))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "events: {} (readers {}: {}; bots {}: {}; floods {}: {})",
        raw.len(),
        total(Source::Reader),
        vtext(Source::Reader),
        total(Source::Bot),
        vtext(Source::Bot),
        total(Source::Flood),
        vtext(Source::Flood)
    );
    println!("\ntop {n} by step:");
    for (l, top) in looks.iter().zip(&tops) {
        let ids: Vec<String> = top.iter().map(|&i| name(i)).collect();
        println!("  {}  {}", fmt_offset(l.offset), ids.join(" "));
    }
    let f2 = |x: Option<f64>| x.map_or("n/a".into(), |x| format!("{x:.2}"));
    println!(
        "\nstability: mean overlap@{n} between consecutive steps {}, mean |rank change| {}, mean entries per step {}",
        f2(mean_overlap),
        f2(mean_rank_change),
        f2(entries)
    );
    let secs = |x: Option<i64>| x.map_or("n/a".into(), |x| fmt_offset(x)[1..].to_string());
    println!(
        "new articles: {} published during the run, {} entered the top {n}; time to enter: median {}, mean {}, max {} (resolution: one step)",
        new_articles.len(),
        latencies.len(),
        secs(median),
        secs(mean_latency.map(|x| x.round() as i64)),
        secs(latencies.last().copied())
    );
    for &(i, p, e) in &new_articles {
        match e {
            Some(e) => println!(
                "  {:<12} published {}  entered {}  after {}",
                name(i),
                fmt_offset(p),
                fmt_offset(e),
                secs(Some(e - p))
            ),
            None => println!(
                "  {:<12} published {}  never entered ({} at the end)",
                name(i),
                fmt_offset(p),
                rank_text(last.rank(i))
            ),
        }
    }
    println!("\nedge checks (seed 001):");
    for c in &checks {
        println!(
            "{}  {}: {}",
            if c.pass { "PASS" } else { "FAIL" },
            c.name,
            c.detail
        );
    }
    Ok(all_pass || !args.strict)
}

fn put(rt: &tokio::runtime::Runtime, store: &EmbeddedStore, a: &Article) -> Result<(), String> {
    let meta = ArticleMeta {
        title: Some(format!("{} article", a.kind.as_str())),
        published_at: SIM_START + a.published,
        ..ArticleMeta::default()
    };
    rt.block_on(store.put_article(a.id.clone(), meta, SIM_START + a.published.max(0)))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn first_of(articles: &[Article], kind: Kind) -> usize {
    articles
        .iter()
        .position(|a| a.kind == kind)
        .expect("every kind is planned")
}

/// Seed 001: a dwell outlier (> 300 s) must not take over the list.
fn check_long_dwell(
    articles: &[Article],
    looks: &[Look],
    models: &Models,
    model: ModelKind,
) -> Check {
    let dwellers: Vec<usize> = (0..articles.len())
        .filter(|&i| articles[i].kind == Kind::LongDwell)
        .collect();
    let best = |i: usize| looks.iter().filter_map(|l| l.rank(i)).min();
    let took_over: Vec<usize> = dwellers
        .iter()
        .copied()
        .filter(|&i| best(i) == Some(1))
        .collect();
    let i = dwellers[0];
    let last = looks.last().expect("looks");
    let mut detail = format!(
        "{} dwell outlier(s) never ranked #1 (best rank: {})",
        dwellers.len(),
        dwellers
            .iter()
            .take(5)
            .map(|&i| format!(
                "{} {}",
                articles[i].id,
                best(i).map_or("-".into(), |r| r.to_string())
            ))
            .collect::<Vec<_>>()
            .join(", ")
            + if dwellers.len() > 5 { ", ..." } else { "" }
    );
    if !took_over.is_empty() {
        detail = format!(
            "ranked #1: {}",
            took_over
                .iter()
                .map(|&i| articles[i].id.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(c) = last.counters(i) {
        let w = &models.weighted;
        detail += &format!(
            "; {} avg dwell {:.0} s counts as {:.0} s",
            articles[i].id,
            c.avg_dwell_seconds(),
            c.avg_dwell_seconds().min(w.dwell_cap_secs)
        );
        if model == ModelKind::Weighted {
            let meta = ArticleMeta {
                published_at: SIM_START + articles[i].published,
                ..ArticleMeta::default()
            };
            let mut uncapped = models.clone();
            uncapped.weighted.dwell_cap_secs = 86_400.0;
            let now = SIM_START + last.offset;
            let s = uncapped.score(ModelKind::Weighted, &c, &meta, now);
            let rank = 1 + last.ranked.iter().filter(|r| r.0 != i && r.1 > s).count();
            detail += &format!(
                " (score {:.2}; without the cap it would score {s:.2}, rank {rank})",
                last.score(i).unwrap_or(f64::NAN)
            );
        }
    }
    Check {
        name: "dwell outliers do not take over",
        pass: took_over.is_empty(),
        detail,
    }
}

/// Seed 001: an old article with no new activity drifts down.
fn check_old_drifts(articles: &[Article], looks: &[Look], after: &[Look]) -> Check {
    let i = first_of(articles, Kind::Old);
    let a = &articles[i];
    let quiet_from = a.last_event.unwrap_or(0);
    let ranks: Vec<Option<usize>> = looks.iter().map(|l| l.rank(i)).collect();
    let best = ranks.iter().flatten().min().copied();
    let last = looks.last().expect("looks");
    let idle: Vec<f64> = looks
        .iter()
        .filter(|l| l.offset > quiet_from)
        .filter_map(|l| l.score(i))
        .collect();
    let never_rises = idle.windows(2).all(|w| w[1] <= w[0] + 1e-12);
    let end_score = last.score(i);
    let later: Vec<Option<f64>> = after.iter().map(|l| l.score(i)).collect();
    let keeps_falling = match (end_score, later.last()) {
        (Some(e), Some(Some(l))) => *l < e,
        // Dropped out of the range entirely: it fell off the list.
        (Some(_), Some(None)) => true,
        _ => false,
    };
    let slid = matches!((best, last.rank(i)), (Some(b), Some(r)) if r > b)
        || (best.is_some() && last.rank(i).is_none());
    let fmt = |s: Option<f64>| s.map_or("off the list".into(), |s| format!("{s:.2}"));
    Check {
        name: "an old article with no new activity drifts down",
        pass: never_rises && keeps_falling && slid && !idle.is_empty(),
        detail: format!(
            "{} (published {} h before the run, no reader after {}): best rank {}, {} at the end; score {} over {} idle steps; then with no events at all, score {} at the end, {} at +24h, {} at +48h, {} at +72h",
            a.id,
            -a.published / 3600,
            fmt_offset(quiet_from),
            best.map_or("-".into(), |b| b.to_string()),
            rank_text(last.rank(i)),
            if never_rises { "never rose" } else { "rose" },
            idle.len(),
            fmt(end_score),
            fmt(later[0]),
            fmt(later[1]),
            fmt(later[2]),
        ),
    }
}

/// Seed 001: high UV with long dwell beats high early PV with short dwell.
fn check_uv_beats_pv(articles: &[Article], looks: &[Look]) -> Check {
    let b = first_of(articles, Kind::ProbeBurst);
    let s = first_of(articles, Kind::ProbeSteady);
    let last = looks.last().expect("looks");
    let led_until = looks
        .iter()
        .filter(|l| match (l.score(b), l.score(s)) {
            (Some(sb), Some(ss)) => sb > ss,
            (Some(_), None) => true,
            _ => false,
        })
        .map(|l| l.offset)
        .max();
    let describe = |i: usize| {
        let c = last.counters(i).unwrap_or_default();
        format!(
            "{} ({} view requests, PV {}, UV {}, avg dwell {:.0} s) {} score {}",
            articles[i].id,
            articles[i].view_requests,
            c.pv,
            c.uv,
            c.avg_dwell_seconds(),
            rank_text(last.rank(i)),
            last.score(i).map_or("-".into(), |x| format!("{x:.2}"))
        )
    };
    let pass = match (last.score(s), last.score(b)) {
        (Some(ss), Some(sb)) => ss > sb,
        (Some(_), None) => true,
        _ => false,
    };
    Check {
        name: "high UV + long dwell beats high early PV + short dwell",
        pass,
        detail: format!(
            "{} {} {}{}",
            describe(s),
            if pass { "beats" } else { "does not beat" },
            describe(b),
            led_until.map_or(String::new(), |t| format!(
                "; the burst led until {}",
                fmt_offset(t)
            ))
        ),
    }
}

/// Bot and flood traffic is quarantined and never reaches the top N.
fn check_quarantine(
    articles: &[Article],
    tops: &[Vec<usize>],
    verdicts: &HashMap<(Source, Verdict), u64>,
    rt: &tokio::runtime::Runtime,
    store: &EmbeddedStore,
    duration: i64,
) -> Result<Check, String> {
    let get = |s, v| verdicts.get(&(s, v)).copied().unwrap_or(0);
    let bot_total: u64 = Verdict::ALL.iter().map(|&v| get(Source::Bot, v)).sum();
    let flood_total: u64 = Verdict::ALL.iter().map(|&v| get(Source::Flood, v)).sum();
    let flood_counted = get(Source::Flood, Verdict::Counted);
    let bot_target = ArticleId::parse("bot-target").expect("valid id");
    let exists = rt
        .block_on(store.article(&bot_target, SIM_START + duration))
        .map_err(|e| e.to_string())?
        .is_some();
    // The two flood targets: the articles the floods hit.
    let targets: Vec<usize> = articles
        .iter()
        .enumerate()
        .filter(|(_, a)| a.kind == Kind::Tail)
        .map(|(i, _)| i)
        .chain((0..articles.len()).rev())
        .take(2)
        .collect();
    let in_top: Vec<usize> = targets
        .iter()
        .copied()
        .filter(|t| articles[*t].kind == Kind::Tail && tops.iter().any(|top| top.contains(t)))
        .collect();
    // Each flood source is one visitor: at most one counted view per
    // dedupe window, i.e. a handful over the run.
    let pass = get(Source::Bot, Verdict::Bot) == bot_total
        && bot_total > 0
        && !exists
        && flood_counted * 100 <= flood_total.max(1)
        && in_top.is_empty();
    Ok(Check {
        name: "bots and floods are quarantined",
        pass,
        detail: format!(
            "bots: {} of {bot_total} events quarantined as bot, bot-only article {}; floods: {flood_counted} of {flood_total} events counted (rate_limited {}, duplicate {}), flood targets {} the top list",
            get(Source::Bot, Verdict::Bot),
            if exists {
                "was created"
            } else {
                "never created"
            },
            get(Source::Flood, Verdict::RateLimited),
            get(Source::Flood, Verdict::Duplicate),
            if in_top.is_empty() {
                "never in"
            } else {
                "reached"
            },
        ),
    })
}
