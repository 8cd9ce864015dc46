//! `hotrank ctr`: the widget's click-through per model (`GET /api/ctr`),
//! from a running server or from an embedded data directory's
//! `ctr.json`; and the lines `hotrank replay --data-dir` adds for its two
//! models.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::top::{ServerArg, Target, get_json};
use crate::ctr::report::report;

#[derive(clap::Args, Debug, Clone)]
pub struct CtrArgs {
    #[command(flatten)]
    pub server: ServerArg,
    /// Read an embedded data directory's `ctr.json` instead of asking a
    /// server (safe while the server runs: the file is replaced whole).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Only this model.
    #[arg(long)]
    pub model: Option<String>,
}

pub fn run(args: CtrArgs) -> Result<(), String> {
    let r = match &args.data_dir {
        Some(dir) => from_data_dir(dir, args.model.as_deref())?,
        None => {
            let target = Target::new(&args.server)?;
            let path = match &args.model {
                Some(m) => format!("/api/ctr?model={}", urlencode(m)),
                None => "/api/ctr".to_string(),
            };
            super::runtime()?.block_on(get_json(&target, &path))?
        }
    };
    print!("{}", render(&r));
    Ok(())
}

fn urlencode(s: &str) -> String {
    serde_urlencoded::to_string([("m", s)])
        .unwrap_or_default()
        .trim_start_matches("m=")
        .to_string()
}

/// `GET /api/ctr`'s report from the counts in `dir/ctr.json`.
pub fn from_data_dir(dir: &Path, model: Option<&str>) -> Result<Value, String> {
    let counts = crate::ctr::load_file(dir).map_err(|e| e.to_string())?;
    Ok(report(&counts, model))
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn pct(v: &Value) -> String {
    v.as_f64()
        .map_or_else(|| "–".into(), |x| format!("{:.2}%", x * 100.0))
}

/// One model's row: `gravity  1800  121  6.72%  9.02%  gravity:24h`.
fn row(m: &Value) -> String {
    let lists: Vec<&str> = m["lists"]
        .as_array()
        .map(|l| l.iter().filter_map(|x| x["list"].as_str()).collect())
        .unwrap_or_default();
    format!(
        "{:<11} {:>11} {:>7} {:>7} {:>8}  {}\n",
        m["model"].as_str().unwrap_or("?"),
        n(&m["impressions"]),
        n(&m["clicks"]),
        pct(&m["ctr"]),
        pct(&m["ipwCtr"]),
        lists.join(", ")
    )
}

/// The report as a table, then the propensities by position.
pub fn render(r: &Value) -> String {
    let models = r["models"].as_array().cloned().unwrap_or_default();
    if models.is_empty() {
        return "no impressions or clicks counted yet\n".into();
    }
    let mut out = format!(
        "{:<11} {:>11} {:>7} {:>7} {:>8}  lists\n",
        "model", "impressions", "clicks", "CTR", "IPW CTR"
    );
    for m in &models {
        out.push_str(&row(m));
    }
    out.push_str("\nposition  impressions  clicks     CTR  propensity\n");
    for p in r["positions"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{:>8} {:>12} {:>7} {:>7} {:>11.3}\n",
            n(&p["position"]),
            n(&p["impressions"]),
            n(&p["clicks"]),
            pct(&p["ctr"]),
            p["propensity"].as_f64().unwrap_or(1.0)
        ));
    }
    out
}

/// `hotrank replay --data-dir`: the rows of its two models from the data
/// dir's `ctr.json`, if the widget counted any there.
pub fn replay_lines(dir: &Path, models: [&str; 2]) -> Option<(String, Value)> {
    let r = from_data_dir(dir, None).ok()?;
    let rows: Vec<Value> = r["models"]
        .as_array()?
        .iter()
        .filter(|m| models.contains(&m["model"].as_str().unwrap_or("")))
        .cloned()
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut text = String::from(
        "\nclick-through of the widget's lists (ctr.json; CTR and position-bias corrected IPW CTR):\n",
    );
    for m in &rows {
        text.push_str("  ");
        text.push_str(&row(m));
    }
    Some((text, Value::Array(rows)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_of_models_and_positions() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("ctr.json"),
            r#"{"version":1,"lists":{"gravity:24h":{"1":[100,10],"2":[100,5]},"hn:all":{"1":[50,5]}}}"#,
        )
        .unwrap();
        let text = render(&from_data_dir(dir.path(), None).unwrap());
        assert!(
            text.contains("gravity             200      15   7.50%   10.00%  gravity:24h"),
            "{text}"
        );
        assert!(
            text.contains("hn                   50       5  10.00%   10.00%  hn:all"),
            "{text}"
        );
        let (lines, rows) = replay_lines(dir.path(), ["hn", "votes"]).unwrap();
        assert_eq!(rows.as_array().unwrap().len(), 1);
        assert!(lines.contains("hn:all"), "{lines}");
        assert!(replay_lines(dir.path(), ["votes", "lemmy"]).is_none());
    }
}
