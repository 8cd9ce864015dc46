//! Offline tools behind `hotrank simulate` and `hotrank replay`: both drive
//! in-memory embedded stores with a simulated clock (time is an argument of
//! every store method), so they run the real gate, counters and rankings.
//!
//! - [`simulate`]: generated articles and traffic; how the top N evolves,
//!   and seed 001's edge checks.
//! - [`replay`]: a recorded event log under two parameter sets; the top-N
//!   differences per interval.
//! - [`metrics`]: the pure list comparisons both use (and `/api/compare`).
//! - [`top`]: `hotrank top` and `hotrank stats`, a running server's hot
//!   list and totals in the terminal.
//! - [`review`]: `hotrank review`, the review queue and an editor's
//!   decisions in the terminal.
//! - [`ctr`]: `hotrank ctr`, the widget's click-through per model.

pub mod ctr;
pub mod metrics;
pub mod replay;
pub mod review;
pub mod seed_import;
pub mod simulate;
pub mod top;
pub mod transfer;

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::model::Timestamp;

pub use crate::time::parse_duration;

/// `+MM:SS` (or `+H:MM:SS`) relative time, for simulation steps.
pub fn fmt_offset(secs: i64) -> String {
    let sign = if secs < 0 { "-" } else { "+" };
    let s = secs.abs();
    if s >= 3600 {
        format!("{sign}{}:{:02}:{:02}", s / 3600, s % 3600 / 60, s % 60)
    } else {
        format!("{sign}{:02}:{:02}", s / 60, s % 60)
    }
}

/// A span of seconds, short: `30s`, `10m`, `1h`, `2m30s`.
pub fn fmt_span(secs: i64) -> String {
    match secs {
        s if s > 0 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s > 0 && s % 60 == 0 => format!("{}m", s / 60),
        s if s > 60 => format!("{}m{}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

/// `YYYY-MM-DD HH:MM:SS` in UTC.
pub fn fmt_utc(ts: Timestamp) -> String {
    let days = ts.div_euclid(86_400);
    let secs = ts.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Splits `key=value`.
pub fn parse_kv(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

/// A configuration: `file` (TOML, every key optional) if given, then each
/// `key.path=value` override on top (a TOML value: `1.8`, `true`,
/// `"text"`; anything that is not valid TOML is taken as a string).
/// Unknown keys and invalid values are refused with the key's name.
pub fn build_config(file: Option<&Path>, overrides: &[(String, String)]) -> Result<Config, String> {
    let mut table: toml::Table = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => toml::Table::new(),
    };
    for (key, value) in overrides {
        let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.clone()));
        let mut parts: Vec<&str> = key.split('.').collect();
        let leaf = parts.pop().unwrap_or_default();
        let mut t = &mut table;
        for p in parts {
            let entry = t
                .entry(p.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            t = entry
                .as_table_mut()
                .ok_or_else(|| format!("{key}: {p} is not a table"))?;
        }
        t.insert(leaf.to_string(), parsed);
    }
    let config: Config = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| format!("invalid configuration: {}", e.message()))?;
    for w in config.validate()? {
        eprintln!("warning: {w}");
    }
    Ok(config)
}

/// A current-thread runtime: in-memory stores never wait on anything.
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// Writes `value` as pretty JSON to `path`, or to stdout for `-`.
pub fn write_json(path: &Path, value: &serde_json::Value) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())? + "\n";
    if path.as_os_str() == "-" {
        std::io::stdout()
            .write_all(text.as_bytes())
            .map_err(|e| e.to_string())
    } else {
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// Progress on stderr, at most once a second and only once a run has
/// lasted a second (short runs print nothing). On a terminal the line is
/// rewritten in place; otherwise one line per update.
pub struct Progress {
    started: Instant,
    last: Instant,
    printed: bool,
    tty: bool,
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress {
    pub fn new() -> Self {
        let now = Instant::now();
        Progress {
            started: now,
            last: now,
            printed: false,
            tty: std::io::stderr().is_terminal(),
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Calls `msg` with the elapsed seconds and prints its line, if due.
    pub fn tick(&mut self, msg: impl FnOnce(f64) -> String) {
        if self.last.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last = Instant::now();
        let line = msg(self.started.elapsed().as_secs_f64());
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r{line}\x1b[K");
        } else {
            let _ = writeln!(err, "{line}");
        }
        self.printed = true;
    }

    /// Ends the progress line.
    pub fn finish(&mut self) {
        if self.printed && self.tty {
            eprintln!();
        }
        self.printed = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(fmt_utc(0), "1970-01-01 00:00:00");
        assert_eq!(fmt_utc(1_763_708_400), "2025-11-21 07:00:00");
        assert_eq!(fmt_utc(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(fmt_offset(90), "+01:30");
        assert_eq!(fmt_offset(3725), "+1:02:05");
        assert_eq!(fmt_span(30), "30s");
        assert_eq!(fmt_span(600), "10m");
        assert_eq!(fmt_span(7200), "2h");
        assert_eq!(fmt_span(150), "2m30s");
    }

    #[test]
    fn config_overrides() {
        let o = |k: &str, v: &str| (k.to_string(), v.to_string());
        let c = build_config(
            None,
            &[
                o("models.gravity.gamma", "1.8"),
                o("gate.dedupe_window_secs", "600"),
                o("log_format", "json"),
            ],
        )
        .unwrap();
        assert_eq!(c.models.gravity.gamma, 1.8);
        assert_eq!(c.gate.dedupe_window_secs, 600);
        let err = build_config(None, &[o("models.gravity.gamm", "1.8")]).unwrap_err();
        assert!(err.contains("gamm"), "{err}");
        let err = build_config(None, &[o("models.gravity.gamma", "-1")]).unwrap_err();
        assert!(err.contains("models.gravity.gamma"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        std::fs::write(&path, "[models.weighted]\nuv = 0.5\n").unwrap();
        let c = build_config(Some(&path), &[o("models.weighted.pv", "0.1")]).unwrap();
        assert_eq!((c.models.weighted.uv, c.models.weighted.pv), (0.5, 0.1));
    }
}
