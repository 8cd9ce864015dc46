//! What `deploy/` ships, checked as an operator's tools check it:
//! Prometheus's `promtool` on the alerting rules (syntax and the rules' own
//! unit tests) and on every query of the Grafana dashboard, each metric
//! they name against the families hotrank exports, and systemd's analyzer
//! on the unit file.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use hotrank::metrics::{FAMILIES, Kind};
use serde_json::Value;

use common::tools::tool;

fn deploy(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(path)
}

/// Runs a command; panics with its output unless it succeeds.
fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("command runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// Every `hotrank_*` name in a PromQL expression, and whether each is a
/// family hotrank exports with a matching type (`_bucket`, `_sum`,
/// `_count` of a histogram).
fn unknown_metrics(expr: &str) -> Vec<String> {
    let mut unknown = Vec::new();
    let names: BTreeSet<&str> = expr
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("hotrank_"))
        .collect();
    for name in names {
        let known = FAMILIES.iter().any(|f| {
            f.name == name
                || (f.kind == Kind::Histogram
                    && ["_bucket", "_sum", "_count"]
                        .iter()
                        .any(|s| name.strip_suffix(s) == Some(f.name)))
        });
        if !known {
            unknown.push(name.to_string());
        }
    }
    unknown
}

#[test]
fn alerting_rules_pass_promtool_and_their_unit_tests() {
    let Some(promtool) = tool("promtool", "Debian: apt-get install prometheus") else {
        return;
    };
    let rules = deploy("prometheus/hotrank-alerts.yml");
    let out = run(Command::new(&promtool)
        .arg("check")
        .arg("rules")
        .arg(&rules));
    assert!(out.contains("SUCCESS"), "{out}");
    let out = run(Command::new(&promtool)
        .arg("test")
        .arg("rules")
        .arg("hotrank-alerts.test.yml")
        .current_dir(deploy("prometheus")));
    assert!(out.contains("SUCCESS"), "{out}");
    // Every alert is exercised by a unit test.
    let text = std::fs::read_to_string(&rules).unwrap();
    let tests = std::fs::read_to_string(deploy("prometheus/hotrank-alerts.test.yml")).unwrap();
    for line in text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
    {
        assert!(
            tests.contains(&format!("alertname: {line}")),
            "alert {line} has no unit test"
        );
    }
    let unknown = unknown_metrics(&text);
    assert!(
        unknown.is_empty(),
        "alerts name metrics hotrank does not export: {unknown:?}"
    );
}

#[test]
fn every_dashboard_query_parses_and_names_exported_metrics() {
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(deploy("grafana/hotrank.json")).unwrap())
            .expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().expect("every panel has a title");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            exprs.push((
                title.to_string(),
                t["expr"].as_str().expect("expr").to_string(),
            ));
        }
    }
    assert!(exprs.len() >= 10, "{} queries", exprs.len());
    for (title, expr) in &exprs {
        let unknown = unknown_metrics(expr);
        assert!(
            unknown.is_empty(),
            "{title}: unknown metrics {unknown:?} in {expr}"
        );
    }
    let Some(promtool) = tool("promtool", "Debian: apt-get install prometheus") else {
        return;
    };
    // promtool parses PromQL inside rule files: one recording rule per
    // query, with Grafana's variables given values a query could take.
    let dir = tempfile::tempdir().unwrap();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, (_, expr)) in exprs.iter().enumerate() {
        let expr = expr
            .replace("$__rate_interval", "5m")
            .replace("$instance", ".*");
        rules.push_str(&format!(
            "      - record: hotrank:dashboard_query_{i}\n        expr: {}\n",
            serde_json::to_string(&expr).unwrap()
        ));
    }
    let file = dir.path().join("dashboard-queries.yml");
    std::fs::write(&file, rules).unwrap();
    let out = run(Command::new(&promtool).arg("check").arg("rules").arg(&file));
    assert!(
        out.contains(&format!("SUCCESS: {} rules found", exprs.len())),
        "{out}"
    );
}

#[test]
fn the_systemd_unit_verifies_and_its_command_line_parses() {
    let unit = std::fs::read_to_string(deploy("systemd/hotrank.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    let mut words = exec.split_whitespace();
    assert_eq!(words.next(), Some("/usr/local/bin/hotrank"));
    let args: Vec<&str> = words.collect();
    assert_eq!(args.first(), Some(&"serve"));
    // The same flags, given to check-config (which takes serve's), parse.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let check: Vec<String> = args[1..]
        .iter()
        .map(|a| a.replace("/var/lib/hotrank", data.to_str().unwrap()))
        .collect();
    run(Command::new(env!("CARGO_BIN_EXE_hotrank"))
        .arg("check-config")
        .args(&check)
        .env_remove("HOTRANK_CONFIG"));
    let Some(analyze) = tool("systemd-analyze", "Debian: apt-get install systemd") else {
        return;
    };
    // The unit as installed, pointing at this build's binary.
    let file = dir.path().join("hotrank.service");
    std::fs::write(
        &file,
        unit.replace("/usr/local/bin/hotrank", env!("CARGO_BIN_EXE_hotrank")),
    )
    .unwrap();
    let out = Command::new(analyze)
        .arg("verify")
        .arg(&file)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    // A verifying unit prints nothing; lines about the host's own units
    // (none on a container) would name other files.
    let ours: Vec<&str> = text.lines().filter(|l| l.contains("hotrank")).collect();
    assert!(
        out.status.success() && ours.is_empty(),
        "systemd-analyze verify:\n{text}"
    );
}

#[test]
fn logs_written_to_a_file_are_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("hotrank.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hotrank"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env_remove("NO_COLOR")
        .env_remove("HOTRANK_CONFIG")
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("listening") || started.elapsed().as_secs() > 60 {
            break text;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(text.contains("listening"), "no start-up line in {text:?}");
    assert!(
        !text.contains('\u{1b}'),
        "colour codes in a log file: {text:?}"
    );
}
