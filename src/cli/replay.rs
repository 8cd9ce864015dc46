//! `hotrank replay`: a recorded event log under two parameter sets.
//!
//! The log is an embedded store's data directory (its write-ahead log,
//! read without modifying anything) or a JSON-lines file. Every record goes
//! to two in-memory embedded stores, A and B, each with its own model,
//! range and configuration; event times are the clock. At the end of each
//! interval (`--every`, an hour by default, aligned to UTC) both top-N
//! lists are taken and compared (overlap@N, Jaccard, only-in-A/B, rank
//! moves, Kendall's tau on the common items).
//!
//! # JSON-lines format
//!
//! One JSON object per line, in the shape of one element of
//! `POST /api/events`'s `events` array, with `ts` required:
//!
//! ```text
//! {"type":"view","articleId":"a1","ts":1763708400,"visitorId":"v1","ip":"10.0.0.1","userAgent":"Mozilla/5.0 ..."}
//! {"type":"dwell","articleId":"a1","ts":1763708460,"visitorId":"v1","seconds":42}
//! {"type":"article","articleId":"a1","ts":1763708000,"publishedAt":1763708000,"title":"..."}
//! ```
//!
//! - `type`: view, dwell, like, comment, favorite, share — or `article`,
//!   which sets metadata like `PUT /api/articles/{id}` (`publishedAt`
//!   defaults to `ts`; `title`, `author`, `category` optional). An article
//!   first seen in an event is published at that event's `ts`.
//! - `articleId`: string or non-negative integer; `ts`: Unix seconds.
//! - optional `visitorId` (or `userId`), `ip`, `userAgent`, `eventId`,
//!   `seconds` (dwell only, required there).
//!
//! Events are judged as if sent by a trusted backend: rate limits follow
//! `ts`, and the bot check applies to `userAgent` (none: not a bot). Without
//! a visitor id the visitor is IP + user agent, as over HTTP. Without `ip`
//! the per-IP rate limit is keyed by the visitor, so unrelated readers are
//! not lumped under one address. Blank lines and lines starting with `#`
//! are skipped; invalid lines are counted and reported, then skipped.
//!
//! # Order and time
//!
//! Records are applied in file (or log) order. An interval is closed when
//! the first event at or after its end arrives; its rankings are taken as
//! of its last second. An event older than the interval being filled is
//! still applied (and counted as out of order in the summary).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

use super::metrics::{jaccard, kendall_tau, mean, only_in, overlap, rank_moves};
use super::simulate::{parse_model, parse_range};
use super::{
    Progress, build_config, fmt_span, fmt_utc, parse_duration, parse_kv, runtime, write_json,
};
use crate::gate::{BotDetector, Identity};
use crate::model::{ArticleId, ArticleMeta, Event, EventType, HotQuery, RangeSpec, Timestamp};
use crate::score::ModelKind;
use crate::store::embedded::{EmbeddedStore, LogRecord};
use crate::store::{Lifecycle, Store, StoreSettings};

#[derive(clap::Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["data_dir", "events"])))]
pub struct ReplayArgs {
    /// Data directory of an embedded store: replays its write-ahead log
    /// (read-only; safe while the server runs).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// JSON-lines event file (format: README, "hotrank replay").
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
    /// Parameter set A, one KEY=VALUE per flag: `model=gravity`,
    /// `range=24h`, or any configuration key (`models.gravity.gamma=1.8`,
    /// `gate.dedupe_window_secs=600`). Defaults: model=gravity, range=72h.
    #[arg(long = "a", value_name = "KEY=VALUE", value_parser = parse_kv)]
    pub a: Vec<(String, String)>,
    /// Parameter set B, as for --a.
    #[arg(long = "b", value_name = "KEY=VALUE", value_parser = parse_kv)]
    pub b: Vec<(String, String)>,
    /// TOML configuration for A (the --a keys apply on top).
    #[arg(long, value_name = "FILE")]
    pub a_config: Option<PathBuf>,
    /// TOML configuration for B (the --b keys apply on top).
    #[arg(long, value_name = "FILE")]
    pub b_config: Option<PathBuf>,
    /// Size of the compared top lists.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Comparison interval, aligned to UTC: 1h, 6h, 1d...
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub every: i64,
    /// Data dir only: judge logged events again under each side's gate
    /// settings, instead of applying the verdicts the server logged.
    #[arg(long)]
    pub rejudge: bool,
    /// Write a JSON report to this file (`-`: stdout, instead of the text report).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

struct Side {
    label: String,
    model: ModelKind,
    range: RangeSpec,
    store: EmbeddedStore,
    bots: BotDetector,
    pending: Vec<Event>,
}

impl Side {
    fn new(file: Option<&Path>, kvs: &[(String, String)]) -> Result<Side, String> {
        let mut model = ModelKind::Gravity;
        let mut range = None;
        let mut overrides = Vec::new();
        let mut label_parts = Vec::new();
        for (k, v) in kvs {
            match k.as_str() {
                "model" => model = parse_model(v)?,
                "range" => range = Some(parse_range(v)?),
                _ => {
                    overrides.push((k.clone(), v.clone()));
                    label_parts.push(format!("{k}={v}"));
                }
            }
        }
        let config = build_config(file, &overrides)?;
        let range = range.unwrap_or(RangeSpec::Hours(72));
        let mut label = format!("{}/{range}", model.as_str());
        if let Some(f) = file {
            label += &format!(" {}", f.display());
        }
        for p in label_parts {
            label += &format!(" {p}");
        }
        let bots = BotDetector::new(
            &config.gate.bot_patterns,
            config.gate.empty_user_agent_is_bot,
        )
        .map_err(|e| format!("gate.bot_patterns: {e}"))?;
        Ok(Side {
            label,
            model,
            range,
            store: EmbeddedStore::in_memory(StoreSettings::from_config(&config)),
            bots,
            pending: Vec::new(),
        })
    }

    fn query(&self, top: usize) -> HotQuery {
        HotQuery::top(self.model, self.range, top)
    }
}

/// One closed interval.
struct Checkpoint {
    start: Timestamp,
    end: Timestamp,
    events: u64,
    a: Vec<String>,
    b: Vec<String>,
    overlap: f64,
    jaccard: f64,
    tau: Option<f64>,
}

impl Checkpoint {
    fn json(&self) -> Value {
        json!({
            "start": self.start, "end": self.end, "asOf": self.end - 1,
            "startUtc": fmt_utc(self.start),
            "events": self.events,
            "a": self.a, "b": self.b,
            "overlap": self.overlap, "jaccard": self.jaccard, "kendallTau": self.tau,
            "onlyA": only_in(&self.a, &self.b), "onlyB": only_in(&self.b, &self.a),
            "moves": rank_moves(&self.a, &self.b).iter().map(|m| json!({
                "id": m.id, "a": m.rank_a, "b": m.rank_b, "delta": m.delta(),
            })).collect::<Vec<_>>(),
        })
    }

    fn print(&self, n: usize) {
        println!(
            "\n{} .. {} UTC  events {}",
            fmt_utc(self.start),
            &fmt_utc(self.end)[11..16],
            self.events
        );
        println!("  A  {}", self.a.join(" "));
        println!("  B  {}", self.b.join(" "));
        let common = rank_moves(&self.a, &self.b);
        println!(
            "  overlap@{n} {:.2}  jaccard {:.2}  kendall tau {} ({} in both)",
            self.overlap,
            self.jaccard,
            self.tau.map_or("n/a".into(), |t| format!("{t:.2}")),
            common.len()
        );
        let list = |v: Vec<String>| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.join(" ")
            }
        };
        println!(
            "  only in A: {}   only in B: {}",
            list(only_in(&self.a, &self.b)),
            list(only_in(&self.b, &self.a))
        );
        let moves: Vec<String> = common
            .iter()
            .filter(|m| m.delta() != 0)
            .map(|m| format!("{} {}→{} ({:+})", m.id, m.rank_a, m.rank_b, m.delta()))
            .collect();
        println!("  moves A→B: {}", list(moves));
    }
}

struct Replayer {
    rt: tokio::runtime::Runtime,
    a: Side,
    b: Side,
    top: usize,
    every: i64,
    rejudge: bool,
    print: bool,
    next_boundary: Option<Timestamp>,
    interval_events: u64,
    events: u64,
    out_of_order: u64,
    checkpoints: Vec<Checkpoint>,
}

impl Replayer {
    /// Closes every interval that ends at or before `ts`.
    fn advance(&mut self, ts: Timestamp) -> Result<(), String> {
        let every = self.every;
        let mut b = match self.next_boundary {
            None => ts.div_euclid(every) * every + every,
            Some(b) => b,
        };
        while ts >= b {
            self.checkpoint(b)?;
            b += every;
        }
        if ts < b - every {
            self.out_of_order += 1;
        }
        self.next_boundary = Some(b);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), String> {
        for side in [&mut self.a, &mut self.b] {
            if side.pending.is_empty() {
                continue;
            }
            let batch = std::mem::take(&mut side.pending);
            let now = batch.iter().map(|e| e.ts).max().unwrap_or(0);
            self.rt
                .block_on(side.store.ingest(batch, now))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn event(&mut self, ev_a: Event, ev_b: Event) -> Result<(), String> {
        self.advance(ev_a.ts)?;
        self.events += 1;
        self.interval_events += 1;
        self.a.pending.push(ev_a);
        self.b.pending.push(ev_b);
        if self.a.pending.len() >= 1000 {
            self.flush()?;
        }
        Ok(())
    }

    /// A record read from a data directory.
    fn record(&mut self, rec: LogRecord) -> Result<(), String> {
        match rec {
            LogRecord::Event { ev, .. } if self.rejudge => self.event(ev.clone(), ev),
            LogRecord::Event { ref ev, .. } => {
                self.advance(ev.ts)?;
                self.events += 1;
                self.interval_events += 1;
                self.apply(&rec)
            }
            other => {
                self.flush()?;
                self.apply(&other)
            }
        }
    }

    fn apply(&mut self, rec: &LogRecord) -> Result<(), String> {
        for side in [&self.a, &self.b] {
            side.store.apply_logged(rec).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn put(&mut self, id: ArticleId, meta: ArticleMeta, now: Timestamp) -> Result<(), String> {
        self.flush()?;
        for side in [&self.a, &self.b] {
            self.rt
                .block_on(side.store.put_article(id.clone(), meta.clone(), now))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn checkpoint(&mut self, end: Timestamp) -> Result<(), String> {
        self.flush()?;
        let as_of = end - 1;
        let mut lists = Vec::new();
        for side in [&self.a, &self.b] {
            let page = self
                .rt
                .block_on(side.store.hot(&side.query(self.top), as_of))
                .map_err(|e| e.to_string())?;
            lists.push(
                page.items
                    .iter()
                    .map(|it| it.id.as_str().to_string())
                    .collect::<Vec<_>>(),
            );
            // Expire gate state and idle rankings as the server would.
            self.rt
                .block_on(side.store.maintain(as_of))
                .map_err(|e| e.to_string())?;
        }
        let b = lists.pop().unwrap_or_default();
        let a = lists.pop().unwrap_or_default();
        let cp = Checkpoint {
            start: end - self.every,
            end,
            events: self.interval_events,
            overlap: overlap(&a, &b),
            jaccard: jaccard(&a, &b),
            tau: kendall_tau(&a, &b),
            a,
            b,
        };
        if self.print {
            cp.print(self.top);
        }
        self.checkpoints.push(cp);
        self.interval_events = 0;
        Ok(())
    }

    fn finish(&mut self) -> Result<(), String> {
        match self.next_boundary {
            Some(b) => self.checkpoint(b),
            None => Ok(()),
        }
    }
}

/// One line of a JSON-lines log.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    article_id: Value,
    ts: i64,
    visitor_id: Option<String>,
    user_id: Option<String>,
    ip: Option<String>,
    user_agent: Option<String>,
    event_id: Option<String>,
    seconds: Option<f64>,
    published_at: Option<i64>,
    title: Option<String>,
    author: Option<String>,
    category: Option<String>,
}

enum Parsed {
    Article(ArticleId, ArticleMeta, Timestamp),
    Event(Box<Event>, Option<String>),
}

fn parse_line(text: &str, identity: &Identity) -> Result<Parsed, String> {
    let line: Line = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let article = match &line.article_id {
        Value::String(s) => ArticleId::parse(s).map_err(|e| e.to_string())?,
        Value::Number(n) => ArticleId::from_number(
            n.as_u64()
                .ok_or("articleId must be a string or a non-negative integer")?,
        ),
        _ => return Err("articleId must be a string or a non-negative integer".into()),
    };
    if line.ts < 0 {
        return Err("ts must be a non-negative integer (Unix seconds)".into());
    }
    if line.kind == "article" {
        let meta = ArticleMeta {
            title: line.title,
            author: line.author,
            category: line.category,
            published_at: line.published_at.unwrap_or(line.ts),
            ..ArticleMeta::default()
        };
        return Ok(Parsed::Article(article, meta, line.ts));
    }
    let kind = EventType::parse(&line.kind).ok_or_else(|| {
        format!(
            "type {:?} is not one of view, dwell, like, comment, favorite, share, article",
            line.kind
        )
    })?;
    let seconds = match (kind, line.seconds) {
        (EventType::Dwell, Some(s)) if s.is_finite() && s > 0.0 && s <= 86_400.0 => {
            (s.round() as u32).max(1)
        }
        (EventType::Dwell, _) => return Err("a dwell event needs seconds in (0, 86400]".into()),
        _ => 0,
    };
    let ip = match &line.ip {
        Some(s) => Some(
            s.trim()
                .parse::<IpAddr>()
                .map_err(|_| "ip must be an IPv4 or IPv6 address")?,
        ),
        None => None,
    };
    let ua = line.user_agent.as_deref();
    let visitor = match line.visitor_id.as_deref().or(line.user_id.as_deref()) {
        Some(v) => identity.visitor(v),
        None => identity.anonymous_visitor(
            ip.unwrap_or(IpAddr::from([0, 0, 0, 0])),
            ua.unwrap_or(""),
            line.ts,
        ),
    };
    let ev = Event {
        kind,
        article,
        visitor,
        ip: ip.map_or(visitor as u64, |ip| identity.ip(ip)),
        ts: line.ts,
        arrival_ms: line.ts.saturating_mul(1000),
        event_id: line.event_id.as_deref().map(|e| identity.event_id(e)),
        seconds,
        bot: crate::crawler::Crawler::NONE,
        net: ip.map_or(0, |ip| identity.net_block(ip)),
        trusted: true,
    };
    Ok(Parsed::Event(Box::new(ev), line.user_agent))
}

pub fn run(args: ReplayArgs) -> Result<(), String> {
    if args.top == 0 {
        return Err("--top must be at least 1".into());
    }
    if args.rejudge && args.data_dir.is_none() {
        return Err(
            "--rejudge applies to --data-dir only (JSON-lines events are always judged)".into(),
        );
    }
    let a = Side::new(args.a_config.as_deref(), &args.a)?;
    let b = Side::new(args.b_config.as_deref(), &args.b)?;
    let to_stdout_json = args.json.as_deref().is_some_and(|p| p.as_os_str() == "-");
    let mut r = Replayer {
        rt: runtime()?,
        a,
        b,
        top: args.top,
        every: args.every,
        rejudge: args.rejudge,
        print: !to_stdout_json,
        next_boundary: None,
        interval_events: 0,
        events: 0,
        out_of_order: 0,
        checkpoints: Vec::new(),
    };
    let source_name = args
        .data_dir
        .as_ref()
        .or(args.events.as_ref())
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    if r.print {
        println!("hotrank replay: {source_name}");
        println!("A: {}", r.a.label);
        println!("B: {}", r.b.label);
        println!("top {}, every {}", r.top, fmt_span(r.every));
    }
    let mut progress = Progress::new();
    let mut notes: Vec<String> = Vec::new();
    let source = if let Some(dir) = &args.data_dir {
        replay_data_dir(&mut r, dir, &mut progress, &mut notes)?
    } else if let Some(file) = &args.events {
        replay_jsonl(&mut r, file, &mut progress, &mut notes)?
    } else {
        return Err("give --data-dir DIR or --events FILE".into());
    };
    r.finish()?;
    progress.finish();

    let cps = &r.checkpoints;
    let mean_overlap = mean(cps.iter().map(|c| c.overlap));
    let mean_jaccard = mean(cps.iter().map(|c| c.jaccard));
    let mean_tau = mean(cps.iter().filter_map(|c| c.tau));
    let identical = cps.iter().filter(|c| c.a == c.b).count();
    let worst = cps.iter().min_by(|x, y| x.overlap.total_cmp(&y.overlap));
    let f2 = |x: Option<f64>| x.map_or("n/a".into(), |x| format!("{x:.3}"));
    if r.print {
        println!(
            "\nsummary: {} intervals, {} events ({} out of order); mean overlap@{} {}, mean jaccard {}, mean Kendall tau {} (over {} intervals with 2+ common items); identical top {} in {}/{} intervals{}",
            cps.len(),
            r.events,
            r.out_of_order,
            r.top,
            f2(mean_overlap),
            f2(mean_jaccard),
            f2(mean_tau),
            cps.iter().filter(|c| c.tau.is_some()).count(),
            r.top,
            identical,
            cps.len(),
            worst.map_or(String::new(), |w| format!(
                "; lowest overlap {:.2} at {}",
                w.overlap,
                fmt_utc(w.start)
            ))
        );
        for n in &notes {
            println!("note: {n}");
        }
    }
    // What readers clicked, where the widget counted in this data dir.
    let ctr = args
        .data_dir
        .as_deref()
        .and_then(|dir| super::ctr::replay_lines(dir, [r.a.model.as_str(), r.b.model.as_str()]));
    if r.print
        && let Some((text, _)) = &ctr
    {
        print!("{text}");
    }
    if let Some(path) = &args.json {
        let report = json!({
            "source": source,
            "a": {"label": r.a.label, "model": r.a.model.as_str(), "range": r.a.range.to_string()},
            "b": {"label": r.b.label, "model": r.b.model.as_str(), "range": r.b.range.to_string()},
            "top": r.top,
            "everySecs": r.every,
            "checkpoints": cps.iter().map(Checkpoint::json).collect::<Vec<_>>(),
            "summary": {
                "intervals": cps.len(),
                "events": r.events,
                "outOfOrder": r.out_of_order,
                "meanOverlap": mean_overlap,
                "meanJaccard": mean_jaccard,
                "meanKendallTau": mean_tau,
                "identical": identical,
            },
            "notes": notes,
            "ctr": ctr.map(|(_, rows)| rows),
        });
        write_json(path, &report)?;
    }
    Ok(())
}

fn replay_jsonl(
    r: &mut Replayer,
    path: &Path,
    progress: &mut Progress,
    notes: &mut Vec<String>,
) -> Result<Value, String> {
    let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let total = file.metadata().map(|m| m.len()).unwrap_or(0).max(1);
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let identity = Identity::new([0; 16]);
    let (mut line_no, mut read, mut invalid) = (0u64, 0u64, 0u64);
    let mut first_errors = Vec::new();
    let mut buf = String::new();
    loop {
        buf.clear();
        let n = reader
            .read_line(&mut buf)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        read += n as u64;
        let text = buf.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        match parse_line(text, &identity) {
            Ok(Parsed::Article(id, meta, ts)) => {
                r.advance(ts)?;
                r.put(id, meta, ts)?;
            }
            Ok(Parsed::Event(ev, ua)) => {
                let mut ev_a = *ev;
                let mut ev_b = ev_a.clone();
                if let Some(ua) = &ua {
                    ev_a.bot = r.a.bots.classify(ua);
                    ev_b.bot = r.b.bots.classify(ua);
                }
                r.event(ev_a, ev_b)?;
            }
            Err(e) => {
                invalid += 1;
                if first_errors.len() < 5 {
                    first_errors.push(format!("line {line_no}: {e}"));
                }
            }
        }
        let events = r.events;
        progress.tick(|secs| {
            format!(
                "replay: {:.1}% of {}, {events} events, {:.0} events/s",
                read as f64 * 100.0 / total as f64,
                path.display(),
                events as f64 / secs.max(1e-9)
            )
        });
    }
    if invalid > 0 {
        notes.push(format!(
            "{invalid} invalid line(s) skipped; first: {}",
            first_errors.join("; ")
        ));
    }
    Ok(json!({
        "kind": "events", "path": path.display().to_string(),
        "lines": line_no, "invalidLines": invalid, "errors": first_errors,
    }))
}

fn replay_data_dir(
    r: &mut Replayer,
    dir: &Path,
    progress: &mut Progress,
    notes: &mut Vec<String>,
) -> Result<Value, String> {
    let wal_dir = dir.join("wal");
    if !wal_dir.is_dir() {
        return Err(format!(
            "{} has no wal/ directory: not an embedded store's data dir",
            dir.display()
        ));
    }
    let snapshots = crate::store::snapshot::list_snapshots(
        &crate::store::storage::Disk,
        &dir.join("snapshots"),
    )
    .unwrap_or_default();
    let snapshot_seq = snapshots.iter().map(|s| s.0).max();
    let total: u64 = std::fs::read_dir(&wal_dir)
        .map_err(|e| format!("cannot read {}: {e}", wal_dir.display()))?
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum::<u64>()
        .max(1);
    let mut read = 0u64;
    let mut error = None;
    let disk = crate::store::storage::Disk;
    let stats = crate::store::wal::read_records(&disk, &wal_dir, 0, |_, version, payload| {
        read += payload.len() as u64 + crate::store::wal::RECORD_HEADER_LEN as u64;
        let rec: LogRecord = crate::store::embedded::persist::decode_record(version, payload)?;
        if let Err(e) = r.record(rec) {
            error = Some(e.clone());
            return Err(e.into());
        }
        let events = r.events;
        progress.tick(|secs| {
            format!(
                "replay: {:.1}% of the log, {events} events, {:.0} events/s",
                read as f64 * 100.0 / total as f64,
                events as f64 / secs.max(1e-9)
            )
        });
        Ok(())
    });
    let stats = match (stats, error) {
        (_, Some(e)) => return Err(e),
        (Ok(s), None) => s,
        (Err(e), None) => return Err(format!("reading the log in {}: {e}", wal_dir.display())),
    };
    if let Some(seq) = snapshot_seq {
        match stats.first_seq {
            Some(first) if first > 1 => notes.push(format!(
                "a snapshot exists (seq {seq}); the log starts at seq {first}: records before it were trimmed after a snapshot and are not replayed"
            )),
            Some(_) => notes.push(format!(
                "a snapshot exists (seq {seq}) but the log still holds every record from seq 1: nothing is missing"
            )),
            None => notes.push(format!(
                "a snapshot exists (seq {seq}) and the log is empty: every event before it is only in the snapshot and is not replayed"
            )),
        }
    }
    if stats.torn_tail_bytes > 0 {
        notes.push(format!(
            "{} bytes at the end of the log are not complete records (torn write or live server) and were skipped",
            stats.torn_tail_bytes
        ));
    }
    if !r.rejudge {
        notes.push("logged verdicts were applied as recorded (use --rejudge to judge events again under each side's gate settings)".into());
    }
    Ok(json!({
        "kind": "dataDir", "path": dir.display().to_string(),
        "records": stats.records, "firstSeq": stats.first_seq, "lastSeq": stats.last_seq,
        "segments": stats.segments, "tornTailBytes": stats.torn_tail_bytes,
        "snapshotSeq": snapshot_seq,
    }))
}
