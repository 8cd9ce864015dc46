//! `hotrank top` and `hotrank stats`: a running server's hot list and
//! totals in the terminal, read from its public API (`/api/overview`,
//! `/api/stats`) with the load generator's small client, over plain HTTP
//! or https (rustls on ring; Mozilla's roots, and `--ca` for a private CA
//! or a self-signed certificate).
//!
//! The tables are five number columns and the title last, so a title of
//! any width never shifts a column: plain `format!` padding does, and no
//! table crate is needed.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;

use serde_json::Value;

use crate::loadgen::wire::Http;

#[derive(clap::Args, Debug, Clone)]
pub struct ServerArg {
    /// The running hotrank server: http://host[:port] or https://host[:port].
    #[arg(long, env = "HOTRANK_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// For an https --url: a PEM file of certificates to trust besides the
    /// built-in roots (a private CA, or a self-signed certificate).
    #[arg(long, env = "HOTRANK_CA_FILE")]
    pub ca: Option<PathBuf>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct TopArgs {
    #[command(flatten)]
    pub server: ServerArg,
    /// Ranking model (gravity, weighted, votes, window, reddit, controversy,
    /// confidence, hn, lemmy, rising).
    #[arg(long, default_value = "gravity")]
    pub model: String,
    /// Time range: 1h..2160h, 1d..90d or all [default: 24h; rising takes
    /// --window instead].
    #[arg(long)]
    pub range: Option<String>,
    /// With --model rising: the hours whose views are observed (default 1h).
    #[arg(long)]
    pub window: Option<String>,
    /// With --model rising: the hours before the window that set the
    /// usual rate (default 24h).
    #[arg(long)]
    pub baseline: Option<String>,
    /// With --model rising: the fewest views in the window to be listed
    /// (default 5).
    #[arg(long)]
    pub min: Option<u64>,
    /// With gravity or weighted: divide by 2^(age / N) instead of the
    /// model's own age term (e.g. 6h).
    #[arg(long)]
    pub half_life: Option<String>,
    /// `category`: each score divided by log10(2 + its category's counted
    /// events in the last 30 days), any model.
    #[arg(long)]
    pub scale: Option<String>,
    /// Only this category.
    #[arg(long)]
    pub category: Option<String>,
    /// How many rows (1..100).
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
    /// Refresh until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// Seconds between refreshes with --watch (e.g. 5s, 1m).
    #[arg(long, default_value = "5s", value_parser = super::parse_duration)]
    pub interval: i64,
    /// With --watch: stop after this many refreshes.
    #[arg(long)]
    pub count: Option<u32>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct StatsArgs {
    #[command(flatten)]
    pub server: ServerArg,
    /// The window the "range" column covers: 1h..2160h, 1d..90d or all.
    #[arg(long, default_value = "24h")]
    pub range: String,
}

/// A server's address and, for https, how to speak TLS to it.
pub struct Target {
    /// The URL as given, without a trailing slash (for messages).
    url: String,
    /// `host:port`.
    addr: String,
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

impl Target {
    pub fn new(server: &ServerArg) -> Result<Self, String> {
        let url = server.url.trim_end_matches('/').to_string();
        let (addr, https) = authority(&url)?;
        let tls = if https {
            let host = host_of(&addr);
            let name = ServerName::try_from(host.to_string())
                .map_err(|e| format!("--url: {host:?} is not a host name ({e})"))?;
            Some((
                TlsConnector::from(crate::tls::client_config(server.ca.as_deref())?),
                name,
            ))
        } else {
            if server.ca.is_some() {
                return Err("--ca is for an https:// --url".into());
            }
            None
        };
        Ok(Target { url, addr, tls })
    }
}

/// `http://host:port[/]` → (`host:port`, false); `https://…` → (…, true);
/// the port defaults to 80 or 443.
fn authority(url: &str) -> Result<(String, bool), String> {
    let (rest, https) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (rest, false),
        (_, Some(rest)) => (rest, true),
        _ => {
            return Err(format!(
                "--url must be http://host[:port] or https://host[:port], got {url:?}"
            ));
        }
    };
    let host = rest.trim_end_matches('/');
    if host.is_empty() || host.contains('/') {
        return Err(format!(
            "--url must be http://host[:port] or https://host[:port], got {url:?}"
        ));
    }
    let has_port = match host.rsplit_once(']') {
        Some((_, after)) => after.starts_with(':'),
        None => host.contains(':'),
    };
    let addr = if has_port {
        host.to_string()
    } else {
        format!("{host}:{}", if https { 443 } else { 80 })
    };
    Ok((addr, https))
}

/// `host:port` → `host` (`[::1]:443` → `::1`).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// `GET path` as JSON; a non-2xx answer becomes its error message.
pub(super) async fn get_json(target: &Target, path: &str) -> Result<Value, String> {
    call_json(target, "GET", path, &[], b"").await
}

/// `method path` with `headers` and `body`, answered in JSON; a non-2xx
/// answer becomes its error message (`hotrank review` sends its token and
/// decisions through it).
pub(super) async fn call_json(
    target: &Target,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Value, String> {
    let url = &target.url;
    let mut all = vec![("accept", "application/json")];
    all.extend_from_slice(headers);
    let (status, body) = match &target.tls {
        None => {
            let mut http = Http::connect(&target.addr)
                .await
                .map_err(|e| format!("cannot reach {url}: {e}"))?;
            http.request(method, path, &all, body).await
        }
        Some((tls, name)) => {
            let tcp = tokio::net::TcpStream::connect(&target.addr)
                .await
                .map_err(|e| format!("cannot reach {url}: {e}"))?;
            let stream = tls
                .connect(name.clone(), tcp)
                .await
                .map_err(|e| format!("cannot reach {url}: TLS: {e}"))?;
            let mut http = Http::over(stream, &target.addr);
            http.request(method, path, &all, body).await
        }
    }
    .map_err(|e| format!("{url}{path}: {e}"))?;
    let v: Value = serde_json::from_slice(&body)
        .map_err(|e| format!("{url}{path}: answer is not JSON ({e})"))?;
    if !(200..300).contains(&status) {
        let code = v["error"]["code"].as_str().unwrap_or("error");
        let msg = v["error"]["message"].as_str().unwrap_or("");
        return Err(format!("{url}{path}: {status} {code}: {msg}"));
    }
    Ok(v)
}

fn query(pairs: &[(&str, Option<&str>)]) -> String {
    let present: Vec<(&str, &str)> = pairs
        .iter()
        .filter_map(|(k, v)| v.map(|v| (*k, v)))
        .collect();
    serde_urlencoded::to_string(present).unwrap_or_default()
}

/// `1234567` → `1,234,567`.
pub fn fmt_count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub(super) fn count(v: &Value) -> String {
    v.as_u64().map(fmt_count).unwrap_or_else(|| "–".into())
}

/// `▲2`, `▼1`, `=`, `new`, or `–` when there is nothing to compare with.
fn movement(it: &Value) -> String {
    let places = match (it["previousRank"].as_u64(), it["rank"].as_u64()) {
        (Some(p), Some(r)) => p.abs_diff(r),
        _ => 0,
    };
    match it["movement"].as_str() {
        Some("up") => format!("▲{places}"),
        Some("down") => format!("▼{places}"),
        Some("same") => "=".into(),
        Some("new") => "new".into(),
        _ => "–".into(),
    }
}

/// Pads to `width` display columns (movement arrows are one column).
pub(super) fn pad_left(s: &str, width: usize) -> String {
    let n = s.chars().count();
    format!("{}{s}", " ".repeat(width.saturating_sub(n)))
}

/// Titles longer than this are cut (with `…`), to keep rows on one line.
const TITLE_CHARS: usize = 72;

/// The item's title (else its id) as one printable line.
fn title(it: &Value) -> String {
    let t: Vec<char> = it["title"]
        .as_str()
        .or(it["articleId"].as_str())
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    if t.len() > TITLE_CHARS {
        t[..TITLE_CHARS - 1].iter().chain(['…'].iter()).collect()
    } else {
        t.into_iter().collect()
    }
}

/// The hot list as a table, with a header line.
pub fn render_top(o: &Value, url: &str) -> String {
    let mut out = String::new();
    let since = o["movementSince"]
        .as_i64()
        .map(|t| format!("moves since {} UTC", &super::fmt_utc(t)[11..16]))
        .unwrap_or_else(|| "no earlier list seen yet".into());
    let t = &o["totals"];
    out.push_str(&format!(
        "hotrank top · {url} · {} · {} · {} UTC · {since}\n",
        o["model"].as_str().unwrap_or("?"),
        o["range"].as_str().unwrap_or("?"),
        o["generatedAt"]
            .as_i64()
            .map(super::fmt_utc)
            .unwrap_or_default(),
    ));
    out.push_str(&format!(
        "{} page views · {} events counted · {} held back\n\n",
        count(&t["pv"]),
        count(&t["counted"]),
        count(&t["quarantinedTotal"]),
    ));
    let rows: Vec<[String; 6]> = o["items"]
        .as_array()
        .map(|a| a.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|it| {
            [
                it["rank"].to_string(),
                movement(it),
                it["score"]
                    .as_f64()
                    .map(|s| format!("{s:.3}"))
                    .unwrap_or_default(),
                count(&it["pv"]),
                count(&it["uv"]),
                title(it),
            ]
        })
        .collect();
    let head = ["#", "move", "score", "PV", "UV", "title"];
    let widths: Vec<usize> = (0..5)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([head[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: [&str; 6]| {
        let mut l = String::new();
        for (i, w) in widths.iter().enumerate() {
            l.push_str(&pad_left(cells[i], *w));
            l.push_str("  ");
        }
        l.push_str(cells[5]);
        l.push('\n');
        l
    };
    out.push_str(&line(head));
    for r in &rows {
        out.push_str(&line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]]));
    }
    if rows.is_empty() {
        out.push_str("(nothing has traffic in this range yet)\n");
    }
    out
}

/// The `/api/overview` query `hotrank top` asks.
pub fn top_path(args: &TopArgs) -> Result<String, String> {
    let rising = args.model == "rising";
    if rising && args.range.is_some() {
        return Err("--model rising ranks over --window, not --range".into());
    }
    let range = (!rising).then(|| args.range.as_deref().unwrap_or("24h"));
    let min = args.min.map(|m| m.to_string());
    let decay = args.half_life.as_ref().map(|_| "halflife");
    Ok(format!(
        "/api/overview?{}",
        query(&[
            ("model", Some(&args.model)),
            ("range", range),
            ("window", args.window.as_deref()),
            ("baseline", args.baseline.as_deref()),
            ("min", min.as_deref()),
            ("decay", decay),
            ("halfLife", args.half_life.as_deref()),
            ("scale", args.scale.as_deref()),
            ("category", args.category.as_deref()),
            ("limit", Some(&args.limit.to_string())),
        ])
    ))
}

pub fn run_top(args: TopArgs) -> Result<(), String> {
    let path = top_path(&args)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let target = Target::new(&args.server)?;
    let url = target.url.clone();
    let tty = std::io::stdout().is_terminal();
    let mut shown = 0u32;
    loop {
        let fetched = rt.block_on(get_json(&target, &path));
        let mut out = std::io::stdout().lock();
        if args.watch && tty {
            // Home and clear: each refresh replaces the last.
            let _ = write!(out, "\x1b[H\x1b[2J");
        } else if shown > 0 {
            let _ = writeln!(out);
        }
        match fetched {
            Ok(o) => {
                let _ = write!(out, "{}", render_top(&o, &url));
            }
            // Watching rides out a restart; a single look fails.
            Err(e) if args.watch => {
                let _ = writeln!(out, "hotrank top: {e} (retrying)");
            }
            Err(e) => return Err(e),
        }
        let _ = out.flush();
        drop(out);
        shown += 1;
        if !args.watch || args.count.is_some_and(|c| shown >= c) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs(args.interval as u64));
    }
}

/// Totals for the range beside lifetime totals, and quarantine by reason.
pub fn render_stats(o: &Value, s: &Value, url: &str) -> String {
    let range = o["range"].as_str().unwrap_or("?");
    let t = &o["totals"];
    let mut rows: Vec<(String, String, String)> = vec![
        (
            "articles".into(),
            count(&t["articles"]),
            count(&s["articles"]),
        ),
        ("page views".into(), count(&t["pv"]), "–".into()),
        (
            "visitors (Σ per article)".into(),
            count(&t["uvSum"]),
            "–".into(),
        ),
        (
            "events counted".into(),
            count(&t["counted"]),
            count(&s["counted"]),
        ),
        (
            "held back".into(),
            count(&t["quarantinedTotal"]),
            count(&s["quarantinedTotal"]),
        ),
    ];
    if let Some(reasons) = t["quarantined"].as_object() {
        for (reason, n) in reasons {
            rows.push((
                format!("  {reason}"),
                count(n),
                count(&s["quarantined"][reason]),
            ));
        }
    }
    let w0 = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let col = format!("last {range}");
    let w1 = rows
        .iter()
        .map(|r| r.1.len())
        .chain([col.len()])
        .max()
        .unwrap_or(0);
    let w2 = rows
        .iter()
        .map(|r| r.2.len())
        .chain(["lifetime".len()])
        .max()
        .unwrap_or(0);
    let mut out = format!(
        "hotrank stats · {url} · {} UTC\n\n",
        o["generatedAt"]
            .as_i64()
            .map(super::fmt_utc)
            .unwrap_or_default()
    );
    let pad_right = |s: &str| format!("{s}{}", " ".repeat(w0 - s.chars().count()));
    out.push_str(&format!(
        "{}  {}  {}\n",
        pad_right(""),
        pad_left(&col, w1),
        pad_left("lifetime", w2)
    ));
    for (k, a, b) in &rows {
        out.push_str(&format!(
            "{}  {}  {}\n",
            pad_right(k),
            pad_left(a, w1),
            pad_left(b, w2)
        ));
    }
    if t["complete"] == false {
        out.push_str("\n(range totals add up the ranked articles only: retention.ranking_cap)\n");
    }
    out
}

pub fn run_stats(args: StatsArgs) -> Result<(), String> {
    let target = Target::new(&args.server)?;
    let url = target.url.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (o, s) = rt.block_on(async {
        let o = get_json(
            &target,
            &format!(
                "/api/overview?{}",
                query(&[("range", Some(&args.range)), ("limit", Some("1"))])
            ),
        )
        .await?;
        let s = get_json(&target, "/api/stats?hours=1").await?;
        Ok::<_, String>((o, s))
    })?;
    print!("{}", render_stats(&o, &s, &url));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_one_short_line() {
        let long = "x".repeat(100);
        let t = title(&serde_json::json!({"title": format!("a\nb{long}")}));
        assert_eq!(t.chars().count(), TITLE_CHARS);
        assert!(t.starts_with("ab") && t.ends_with('…'));
        assert_eq!(
            title(&serde_json::json!({"articleId": "x1", "title": null})),
            "x1"
        );
    }

    #[test]
    fn counts_and_urls() {
        assert_eq!(fmt_count(0), "0");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_count(1000), "1,000");
        assert_eq!(fmt_count(1_234_567), "1,234,567");
        let a = |u: &str| authority(u.trim_end_matches('/'));
        assert_eq!(
            a("http://127.0.0.1:8080/").unwrap(),
            ("127.0.0.1:8080".into(), false)
        );
        assert_eq!(
            a("http://example.org").unwrap(),
            ("example.org:80".into(), false)
        );
        assert_eq!(
            a("https://example.org").unwrap(),
            ("example.org:443".into(), true)
        );
        assert_eq!(a("https://[::1]").unwrap(), ("[::1]:443".into(), true));
        assert_eq!(
            a("https://[::1]:8443").unwrap(),
            ("[::1]:8443".into(), true)
        );
        assert_eq!(host_of("[::1]:8443"), "::1");
        assert_eq!(host_of("example.org:443"), "example.org");
        assert!(a("ftp://example.org").is_err());
        assert!(a("http://example.org/base/path").is_err());
    }
}
