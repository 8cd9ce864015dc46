//! `hotrank bench`: a load generator that drives a running hotrank over
//! HTTP — or seed 000's Lua script on a `redis-server` — with the same
//! realistic stream, and reports events/s and latency percentiles (HDR
//! histogram), with progress on stderr and a JSON result.

pub mod stream;
pub mod wire;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use stream::{Gen, Kind, Popularity, Stream, StreamSpec};
use wire::{Http, Reply, Resp};

const BROWSER_UA: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
const BOT_UA: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
const FLOOD_IP: &str = "203.0.113.7";

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// The hotrank to drive (host:port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub target: String,
    /// Drive seed 000's Lua script on this redis-server (host:port) instead.
    #[arg(long)]
    pub seed_redis: Option<String>,
    /// Seed 000's script (`bench/seed/seed_view.lua`).
    #[arg(long, default_value = "bench/seed/seed_view.lua")]
    pub seed_script: PathBuf,
    /// With --seed-redis: seed 000's dedupe step first (`SET dedup:V:A 1 NX
    /// EX 900`), and the script only for new pairs.
    #[arg(long)]
    pub seed_dedupe: bool,
    /// With --seed-redis: commands pipelined per round trip.
    #[arg(long, default_value_t = 16)]
    pub pipeline: usize,
    /// GET this path in a loop instead of sending events.
    #[arg(long)]
    pub query: Option<String>,
    /// Events per request: 1 sends `POST /api/views`, more `POST /api/events`.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// Connections kept open to the target, each with one request in flight.
    #[arg(long, default_value_t = 16)]
    pub connections: usize,
    /// How long to drive the target: 30s, 10m, 1h.
    #[arg(long = "duration", alias = "duration-secs", default_value = "10s",
          value_parser = crate::time::parse_duration)]
    pub duration_secs: i64,
    /// Open loop: events (or queries) per second in all; 0 = closed loop,
    /// as fast as the target answers.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Ingest token: events then carry each reader's own `ip` and
    /// `userAgent`, so limits and bot checks apply per reader.
    #[arg(long, env = "HOTRANK_INGEST_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Articles the events are spread over.
    #[arg(long, default_value_t = 10_000)]
    pub articles: u64,
    /// Zipf exponent of article popularity (0 = uniform).
    #[arg(long, default_value_t = 1.0)]
    pub zipf: f64,
    /// Distinct visitors the events come from.
    #[arg(long, default_value_t = 1_000_000)]
    pub visitors: u64,
    /// Share of events repeating the previous (visitor, article) pair.
    #[arg(long, default_value_t = 0.1)]
    pub repeat_rate: f64,
    /// Share of events sent with a crawler's user agent.
    #[arg(long, default_value_t = 0.02)]
    pub bot_share: f64,
    /// Share of events sent as from one flooding IP address.
    #[arg(long, default_value_t = 0.01)]
    pub flood_share: f64,
    /// Weights of view,dwell,like,comment.
    #[arg(long, default_value = "1,0,0,0")]
    pub mix: String,
    /// Spread event times over this span before now, e.g. 72h (needs
    /// --token for rate limits to follow them) [default: none].
    #[arg(long = "spread", alias = "spread-secs", value_parser = crate::time::parse_duration)]
    pub spread_secs: Option<i64>,
    /// Send one view to each article once, in order, then stop.
    #[arg(long)]
    pub preload: bool,
    /// With --preload: views per article, each from a visitor of its own
    /// (article `a` gets visitors `a * N .. a * N + N`).
    #[arg(long, default_value_t = 1)]
    pub preload_visitors: u64,
    /// Seed of the event stream: the same seed sends the same events.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the result as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// A name for the run in the JSON result.
    #[arg(long, default_value = "")]
    pub label: String,
}

/// The result of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub label: String,
    pub mode: String,
    pub seconds: f64,
    pub requests: u64,
    pub events: u64,
    pub errors: u64,
    pub events_per_sec: f64,
    pub requests_per_sec: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// HTTP status (or "ok"/"error" for Redis) → count.
    pub statuses: Statuses,
}

/// HTTP status (or "ok"/"error" for Redis) → count.
pub type Statuses = std::collections::BTreeMap<String, u64>;

#[derive(Default)]
struct Shared {
    events: AtomicU64,
    requests: AtomicU64,
    errors: AtomicU64,
}

struct Worker {
    hist: Histogram<u64>,
    statuses: std::collections::BTreeMap<String, u64>,
}

impl Worker {
    fn new() -> Self {
        Worker {
            hist: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
            statuses: Default::default(),
        }
    }

    fn record(&mut self, started: Instant, status: String) {
        let us = started.elapsed().as_micros().clamp(1, 60_000_000) as u64;
        let _ = self.hist.record(us);
        *self.statuses.entry(status).or_default() += 1;
    }
}

fn parse_mix(s: &str) -> Result<[f64; 4], String> {
    let parts: Vec<f64> = s
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<f64>()
                .map_err(|_| format!("--mix: {p:?} is not a number"))
        })
        .collect::<Result<_, _>>()?;
    match parts.as_slice() {
        [a, b, c, d] if parts.iter().all(|x| x.is_finite() && *x >= 0.0) && a + b + c + d > 0.0 => {
            Ok([*a, *b, *c, *d])
        }
        _ => Err("--mix takes four non-negative weights: view,dwell,like,comment".into()),
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The `k`-th preload view as (article, visitor): `--preload-visitors`
/// views per article in article order, every one from a new visitor;
/// `None` past the last.
fn preload_view(args: &BenchArgs, k: u64) -> Option<(u64, u64)> {
    let per = args.preload_visitors.max(1);
    (k < args.articles * per).then_some((k / per, k))
}

/// Writes one event as `POST /api/events` JSON.
fn event_json(out: &mut String, g: &Gen, trusted: bool, now: i64) {
    use std::fmt::Write;
    let _ = write!(
        out,
        "{{\"type\":\"{}\",\"articleId\":\"a{}\",\"visitorId\":\"v{}\"",
        g.kind.as_str(),
        g.article,
        g.visitor
    );
    if g.kind == Kind::Dwell {
        let _ = write!(out, ",\"seconds\":{}", g.seconds);
    }
    if g.age > 0 {
        let _ = write!(out, ",\"ts\":{}", now - g.age as i64);
    }
    if trusted {
        let ua = if g.bot { BOT_UA } else { BROWSER_UA };
        if g.flood {
            let _ = write!(out, ",\"ip\":\"{FLOOD_IP}\"");
        } else {
            let v = g.visitor;
            let _ = write!(
                out,
                ",\"ip\":\"10.{}.{}.{}\"",
                (v >> 16) & 255,
                (v >> 8) & 255,
                v & 255
            );
        }
        let _ = write!(out, ",\"userAgent\":\"{ua}\"");
    }
    out.push('}');
}

/// Runs the load described by `args` until its duration is over.
pub async fn run(args: BenchArgs) -> Result<Report, String> {
    let mix = parse_mix(&args.mix)?;
    if args.connections == 0 || args.batch == 0 || args.pipeline == 0 {
        return Err("--connections, --batch and --pipeline must be at least 1".into());
    }
    let spec = Arc::new(StreamSpec {
        articles: args.articles.max(1),
        zipf: args.zipf,
        visitors: args.visitors.max(1),
        repeat_rate: args.repeat_rate,
        bot_share: args.bot_share,
        flood_share: args.flood_share,
        mix,
        spread_secs: args.spread_secs.unwrap_or(0) as u64,
    });
    let pop = Arc::new(Popularity::new(spec.articles, spec.zipf));
    let sha = match &args.seed_redis {
        Some(addr) => Some(load_seed_script(addr, &args.seed_script).await?),
        None => None,
    };
    let mode = mode(&args);
    let shared = Arc::new(Shared::default());
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.duration_secs as u64);
    let load = Load {
        args: Arc::new(args),
        spec,
        pop,
        shared: shared.clone(),
        sha: Arc::new(sha),
        deadline,
    };
    let tasks: Vec<_> = (0..load.args.connections)
        .map(|conn| load.spawn_connection(conn))
        .collect();
    let progress = spawn_progress(shared.clone(), started);
    let (hist, statuses) = join(tasks).await?;
    progress.abort();
    let report = Report::new(
        load.args.label.clone(),
        mode,
        started.elapsed().as_secs_f64(),
        &shared,
        &hist,
        statuses,
    );
    if let Some(path) = &load.args.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(report)
}

/// Loads seed 000's script into the redis-server at `addr`; its SHA1.
async fn load_seed_script(addr: &str, path: &std::path::Path) -> Result<String, String> {
    let script = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut c = Resp::connect(addr)
        .await
        .map_err(|e| format!("redis {addr}: {e}"))?;
    match c
        .command(&[b"SCRIPT", b"LOAD", &script])
        .await
        .map_err(|e| e.to_string())?
    {
        Reply::Bulk(Some(sha)) => Ok(String::from_utf8_lossy(&sha).into_owned()),
        other => Err(format!("SCRIPT LOAD answered {other:?}")),
    }
}

/// What the run drives, as its report names it.
fn mode(args: &BenchArgs) -> String {
    match (&args.seed_redis, &args.query) {
        (Some(_), _) => format!(
            "seed-script{} P={}",
            if args.seed_dedupe { "+dedupe" } else { "" },
            args.pipeline
        ),
        (None, Some(q)) => format!("query {q}"),
        (None, None) if args.batch == 1 => "POST /api/views".to_string(),
        (None, None) => format!("POST /api/events batch={}", args.batch),
    }
}

/// What every connection of a run shares.
struct Load {
    args: Arc<BenchArgs>,
    spec: Arc<StreamSpec>,
    pop: Arc<Popularity>,
    shared: Arc<Shared>,
    /// The seed script's SHA1 with `--seed-redis`.
    sha: Arc<Option<String>>,
    deadline: Instant,
}

impl Load {
    /// Connection `conn`: its own event stream, to hotrank or to the seed
    /// script, until the deadline; its latencies and statuses.
    fn spawn_connection(&self, conn: usize) -> tokio::task::JoinHandle<Worker> {
        let (args, spec, pop, shared, sha) = (
            self.args.clone(),
            self.spec.clone(),
            self.pop.clone(),
            self.shared.clone(),
            self.sha.clone(),
        );
        let deadline = self.deadline;
        tokio::spawn(async move {
            let mut stream = Stream::new(
                &spec,
                &pop,
                args.seed.wrapping_mul(1_000_003).wrapping_add(conn as u64),
            );
            let mut w = Worker::new();
            let result = match (&args.seed_redis, sha.as_ref()) {
                (Some(addr), Some(sha)) => {
                    seed_worker(
                        &args,
                        addr,
                        sha,
                        &mut stream,
                        &mut w,
                        &shared,
                        deadline,
                        conn,
                    )
                    .await
                }
                _ => http_worker(&args, &mut stream, &mut w, &shared, deadline, conn).await,
            };
            if let Err(e) = result {
                eprintln!("connection {conn}: {e}");
                shared.errors.fetch_add(1, Ordering::Relaxed);
            }
            w
        })
    }
}

/// Prints the totals so far once a second, on stderr, until aborted.
fn spawn_progress(shared: Arc<Shared>, started: Instant) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last = (0u64, Instant::now());
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let ev = shared.events.load(Ordering::Relaxed);
            let dt = last.1.elapsed().as_secs_f64();
            eprintln!(
                "[{:>5.1}s] {:>10} events  {:>10.0} events/s  {:>8} requests  {} errors",
                started.elapsed().as_secs_f64(),
                ev,
                (ev - last.0) as f64 / dt,
                shared.requests.load(Ordering::Relaxed),
                shared.errors.load(Ordering::Relaxed)
            );
            last = (ev, Instant::now());
        }
    })
}

/// Waits for every connection; their latencies and statuses added up.
async fn join(
    tasks: Vec<tokio::task::JoinHandle<Worker>>,
) -> Result<(Histogram<u64>, Statuses), String> {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
    let mut statuses = Statuses::new();
    for t in tasks {
        let w = t.await.map_err(|e| e.to_string())?;
        hist.add(&w.hist).map_err(|e| e.to_string())?;
        for (k, v) in w.statuses {
            *statuses.entry(k).or_default() += v;
        }
    }
    Ok((hist, statuses))
}

impl Report {
    fn new(
        label: String,
        mode: String,
        seconds: f64,
        shared: &Shared,
        hist: &Histogram<u64>,
        statuses: Statuses,
    ) -> Report {
        let events = shared.events.load(Ordering::Relaxed);
        let requests = shared.requests.load(Ordering::Relaxed);
        Report {
            label,
            mode,
            seconds,
            requests,
            events,
            errors: shared.errors.load(Ordering::Relaxed),
            events_per_sec: events as f64 / seconds,
            requests_per_sec: requests as f64 / seconds,
            p50_us: hist.value_at_quantile(0.50),
            p90_us: hist.value_at_quantile(0.90),
            p99_us: hist.value_at_quantile(0.99),
            p999_us: hist.value_at_quantile(0.999),
            max_us: hist.max(),
            statuses,
        }
    }
}

/// Paces an open-loop worker: the scheduled start of its next request.
struct Pace {
    next: Instant,
    every: Option<Duration>,
}

impl Pace {
    fn new(args: &BenchArgs, per_request: usize) -> Self {
        let every = (args.rate > 0.0).then(|| {
            let per_conn = args.rate / args.connections as f64;
            Duration::from_secs_f64(per_request as f64 / per_conn)
        });
        Pace {
            next: Instant::now(),
            every,
        }
    }

    /// Waits for the next slot; returns the time latency is measured from
    /// (the scheduled time, so a slow answer is not hidden by waiting).
    async fn wait(&mut self) -> Instant {
        match self.every {
            None => Instant::now(),
            Some(every) => {
                let at = self.next;
                self.next += every;
                tokio::time::sleep_until(at.into()).await;
                at
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn http_worker(
    args: &BenchArgs,
    stream: &mut Stream<'_>,
    w: &mut Worker,
    shared: &Shared,
    deadline: Instant,
    conn: usize,
) -> Result<(), String> {
    let mut http = Http::connect(&args.target)
        .await
        .map_err(|e| format!("{}: {e}", args.target))?;
    let auth = args.token.as_ref().map(|t| format!("Bearer {t}"));
    let trusted = auth.is_some();
    let per_request = if args.query.is_some() { 1 } else { args.batch };
    let mut pace = Pace::new(args, per_request);
    let mut preload_next = conn as u64;
    let mut body = String::with_capacity(per_request * 120);
    while Instant::now() < deadline {
        let t0 = pace.wait().await;
        let now = unix_now();
        let mut first_bot = false;
        body.clear();
        let (method, path, n) = if let Some(q) = &args.query {
            ("GET", q.as_str(), 0)
        } else {
            let mut n = 0;
            if per_request > 1 {
                body.push_str("{\"events\":[");
            }
            for i in 0..per_request {
                let mut g = stream.next_event();
                if args.preload {
                    let Some((article, visitor)) = preload_view(args, preload_next) else {
                        break;
                    };
                    g = Gen {
                        kind: Kind::View,
                        article,
                        visitor,
                        bot: false,
                        flood: false,
                        ..g
                    };
                    preload_next += args.connections as u64;
                }
                if per_request == 1 {
                    g.kind = Kind::View;
                }
                if i == 0 {
                    first_bot = g.bot;
                }
                if i > 0 {
                    body.push(',');
                }
                event_json(&mut body, &g, trusted, now);
                n += 1;
            }
            if per_request > 1 {
                body.push_str("]}");
            }
            if n == 0 {
                break;
            }
            if per_request == 1 {
                ("POST", "/api/views", n)
            } else {
                ("POST", "/api/events", n)
            }
        };
        let ua = if first_bot && !trusted {
            BOT_UA
        } else {
            BROWSER_UA
        };
        let mut headers = vec![("content-type", "application/json"), ("user-agent", ua)];
        if let Some(a) = &auth {
            headers.push(("authorization", a.as_str()));
        }
        match http.request(method, path, &headers, body.as_bytes()).await {
            Ok((status, _)) => {
                w.record(t0, status.to_string());
                shared.requests.fetch_add(1, Ordering::Relaxed);
                if (200..300).contains(&status) {
                    shared.events.fetch_add(n.max(1) as u64, Ordering::Relaxed);
                } else {
                    shared.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => {
                shared.errors.fetch_add(1, Ordering::Relaxed);
                return Err(e.to_string());
            }
        }
    }
    Ok(())
}

/// Seed 000 as its authors run it: one `EVALSHA` per view (optionally after
/// the dedupe `SET … NX EX 900`), pipelined.
#[allow(clippy::too_many_arguments)]
async fn seed_worker(
    args: &BenchArgs,
    addr: &str,
    sha: &str,
    stream: &mut Stream<'_>,
    w: &mut Worker,
    shared: &Shared,
    deadline: Instant,
    conn: usize,
) -> Result<(), String> {
    let mut redis = Resp::connect(addr)
        .await
        .map_err(|e| format!("redis {addr}: {e}"))?;
    let p = args.pipeline;
    let mut pace = Pace::new(args, p);
    let mut preload_next = conn as u64;
    while Instant::now() < deadline {
        let t0 = pace.wait().await;
        let events: Vec<Gen> = if args.preload {
            let events = preload_views(args, &mut preload_next, p);
            if events.is_empty() {
                break;
            }
            events
        } else {
            (0..p).map(|_| stream.next_event()).collect()
        };
        let p = events.len();
        let fresh: Vec<&Gen> = if args.seed_dedupe {
            seed_dedupe(&mut redis, &events).await?
        } else {
            events.iter().collect()
        };
        let replies = seed_views(&mut redis, sha, &fresh).await?;
        let errors = replies
            .iter()
            .filter(|r| matches!(r, Reply::Error(_)))
            .count() as u64;
        w.record(
            t0,
            if errors > 0 {
                "error".into()
            } else {
                "ok".into()
            },
        );
        shared.requests.fetch_add(1, Ordering::Relaxed);
        shared.events.fetch_add(p as u64, Ordering::Relaxed);
        shared.errors.fetch_add(errors, Ordering::Relaxed);
    }
    Ok(())
}

/// Up to `n` preload views, from the `next`-th on (every `--connections`-th,
/// so that connections share the preload without overlap).
fn preload_views(args: &BenchArgs, next: &mut u64, n: usize) -> Vec<Gen> {
    let mut events = Vec::with_capacity(n);
    while events.len() < n
        && let Some((article, visitor)) = preload_view(args, *next)
    {
        events.push(Gen {
            kind: Kind::View,
            article,
            visitor,
            bot: false,
            flood: false,
            seconds: 0,
            age: 0,
        });
        *next += args.connections as u64;
    }
    events
}

/// Seed 000's dedupe step, pipelined: the events whose (visitor, article)
/// pair was not seen in the last 900 s.
async fn seed_dedupe<'a>(redis: &mut Resp, events: &'a [Gen]) -> Result<Vec<&'a Gen>, String> {
    let mut enc = Vec::new();
    for g in events {
        let key = format!("dedup:v{}:a{}", g.visitor, g.article);
        Resp::encode(
            &mut enc,
            &[b"SET", key.as_bytes(), b"1", b"NX", b"EX", b"900"],
        );
    }
    let replies = redis
        .pipeline(&enc, events.len())
        .await
        .map_err(|e| e.to_string())?;
    Ok(events
        .iter()
        .zip(replies)
        .filter(|(_, r)| matches!(r, Reply::Status(s) if s == "OK"))
        .map(|(g, _)| g)
        .collect())
}

/// One `EVALSHA` of seed 000's view script per event, pipelined; the
/// replies.
async fn seed_views(redis: &mut Resp, sha: &str, fresh: &[&Gen]) -> Result<Vec<Reply>, String> {
    if fresh.is_empty() {
        return Ok(vec![]);
    }
    let mut enc = Vec::new();
    for g in fresh {
        let a = format!("a{}", g.article);
        let v = format!("v{}", g.visitor);
        let (k1, k2, k4) = (
            format!("counter:views:{a}"),
            format!("hll:uv:{a}"),
            format!("meta:article:{a}"),
        );
        Resp::encode(
            &mut enc,
            &[
                b"EVALSHA",
                sha.as_bytes(),
                b"4",
                k1.as_bytes(),
                k2.as_bytes(),
                b"hot:score",
                k4.as_bytes(),
                a.as_bytes(),
                v.as_bytes(),
                b"1.0",
                b"1.2",
                b"2",
                b"1.5",
            ],
        );
    }
    redis
        .pipeline(&enc, fresh.len())
        .await
        .map_err(|e| e.to_string())
}

/// The HTTP floor: an axum server whose `POST /api/views` and
/// `POST /api/events` read the body and answer a fixed 202, doing nothing
/// else. hotrank's single-view rate is compared with it in the same run.
pub async fn serve_floor(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    use axum::routing::post;
    async fn accept(
        body: axum::body::Bytes,
    ) -> (axum::http::StatusCode, axum::Json<serde_json::Value>) {
        let _ = body.len();
        (
            axum::http::StatusCode::ACCEPTED,
            axum::Json(serde_json::json!({"verdict": "counted", "pv": 0, "uv": 0})),
        )
    }
    let app = axum::Router::new()
        .route("/api/views", post(accept))
        .route("/api/events", post(accept));
    axum::serve(listener, app).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes() {
        assert_eq!(parse_mix("1,0,0,0").unwrap(), [1.0, 0.0, 0.0, 0.0]);
        assert!(parse_mix("1,2").is_err());
        assert!(parse_mix("0,0,0,0").is_err());
        assert!(parse_mix("-1,1,1,1").is_err());
    }

    #[test]
    fn event_json_is_valid() {
        let g = Gen {
            kind: Kind::Dwell,
            article: 3,
            visitor: 70_000,
            bot: true,
            flood: false,
            seconds: 9,
            age: 100,
        };
        let mut s = String::new();
        event_json(&mut s, &g, true, 1000);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["seconds"], 9);
        assert_eq!(v["ts"], 900);
        assert_eq!(v["userAgent"], BOT_UA);
        assert_eq!(v["ip"], "10.1.17.112");
    }
}
