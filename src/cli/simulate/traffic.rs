//! The simulated site's traffic: which articles there are, who reads them
//! and how (the mixes in the module's documentation), the crawlers and
//! floods, and what the HTTP layer makes of each request.

use std::net::{IpAddr, Ipv4Addr};

use super::SIM_START;
use crate::gate::{BotDetector, Identity};
pub(super) use crate::loadgen::stream::Rng;
use crate::model::{ArticleId, Event, EventType};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Kind {
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
    pub(super) fn as_str(self) -> &'static str {
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

pub(super) struct Article {
    pub(super) id: ArticleId,
    pub(super) kind: Kind,
    /// Seconds from the start of the run (negative: before it).
    pub(super) published: i64,
    /// View requests sent by readers (before the gate).
    pub(super) view_requests: u64,
    /// Offset of the last reader event.
    pub(super) last_event: Option<i64>,
}

/// Where simulated traffic comes from, for the verdict tallies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Source {
    Reader,
    Bot,
    Flood,
}

/// One simulated request, before the HTTP layer's hashing.
pub(super) struct RawEvent {
    pub(super) arrival_ms: i64,
    kind: EventType,
    article: ArticleId,
    visitor_id: Option<String>,
    ip: IpAddr,
    user_agent: &'static str,
    seconds: u32,
    pub(super) source: Source,
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
pub(super) fn plan_articles(
    n: usize,
    duration: i64,
    rng: &mut Rng,
) -> Result<Vec<Article>, String> {
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
pub(super) fn generate(articles: &mut [Article], duration: i64, rng: &mut Rng) -> Vec<RawEvent> {
    let pool = (articles.len() as u32 * 40).max(2000);
    let mut out = Requests {
        end_ms: duration * 1000,
        out: Vec::new(),
    };
    for a in articles.iter_mut() {
        read(&mut out, a, duration, pool, rng);
    }
    crawl(&mut out, articles, rng);
    flood(&mut out, articles, rng);
    let mut out = out.out;
    out.sort_by_key(|e| e.arrival_ms);
    out
}

/// The requests of the run so far; one sent outside it is dropped.
struct Requests {
    end_ms: i64,
    out: Vec<RawEvent>,
}

impl Requests {
    fn push(&mut self, ms: i64, ev: RawEvent) {
        if (0..self.end_ms).contains(&ms) {
            self.out.push(RawEvent {
                arrival_ms: ms,
                ..ev
            });
        }
    }
}

/// An article's readers (from a pool of `pool`), as its kind's mix says:
/// views with reloads, one dwell report per visit, sometimes a like or a
/// comment.
fn read(out: &mut Requests, a: &mut Article, duration: i64, pool: u32, rng: &mut Rng) {
    let end_ms = out.end_ms;
    let m = mix(a.kind, duration);
    let start = a.published.max(0);
    let until = m.span.map_or(duration, |s| (start + s).min(duration));
    if until <= start {
        return;
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
            out.push(t, ev(EventType::View, 0));
            t += rng.int(3_000, 10_000);
        }
        let dwell = rng.int(m.dwell.0, m.dwell.1);
        // One dwell report per visit, sent on leaving (or after 45 s).
        let report = t_ms + dwell.min(45) * 1000 + 500;
        out.push(report, ev(EventType::Dwell, dwell as u32));
        if rng.chance(m.like) {
            out.push(report - 250, ev(EventType::Like, 0));
        }
        if rng.chance(m.comment) {
            out.push(report - 100, ev(EventType::Comment, 0));
        }
        if report < end_ms {
            a.last_event = Some(a.last_event.unwrap_or(0).max(report / 1000));
        }
    }
}

/// Crawlers read every article once a minute; one hammers `bot-target`.
fn crawl(out: &mut Requests, articles: &[Article], rng: &mut Rng) {
    let end_ms = out.end_ms;
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
                out.push(t + i as i64 * 50, bot_ev(a.id.clone()));
            }
            t += 60_000;
        }
        if b == 0 {
            for ms in (0..end_ms).step_by(500) {
                out.push(ms, bot_ev(bot_target.clone()));
            }
        }
    }
}

/// Floods: a script behind one IP without a visitor id (10/s), and one
/// visitor id replayed from one IP (5/s), on two tail articles.
fn flood(out: &mut Requests, articles: &[Article], rng: &mut Rng) {
    let end_ms = out.end_ms;
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
            out.push(
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
}

/// What the HTTP layer makes of a request (an untrusted browser client).
pub(super) fn to_event(raw: &RawEvent, identity: &Identity, bots: &BotDetector) -> Event {
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
        bot: bots.classify(raw.user_agent),
        trusted: false,
        net: identity.net_block(raw.ip),
    }
}
