//! `hotrank review`: the review queue of a running server in the
//! terminal (`GET /api/review`), and an editor's decision on one article
//! (`--allow ID`, `--deny ID`: `POST /api/review/{id}`), over the same
//! small HTTP client as `hotrank top`. The admin token comes from
//! `--token` or `HOTRANK_ADMIN_TOKEN`.

use serde_json::{Value, json};

use super::top::{ServerArg, Target, call_json, count, pad_left};

#[derive(clap::Args, Debug, Clone)]
pub struct ReviewArgs {
    #[command(flatten)]
    pub server: ServerArg,
    /// The server's admin token.
    #[arg(long, env = "HOTRANK_ADMIN_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Allow this article into the public rankings.
    #[arg(long, value_name = "ID", conflicts_with = "deny")]
    pub allow: Option<String>,
    /// Keep this article out of the public rankings.
    #[arg(long, value_name = "ID")]
    pub deny: Option<String>,
    /// Which entries to list: held, allowed, denied or all.
    #[arg(long, default_value = "held")]
    pub status: String,
}

/// The queue as a table: article, status, when held, the query and rank it
/// would have had, its PV and UV then, the network evidence of a
/// `suspicious` hold ([`network`]), its title.
pub fn render(v: &Value) -> String {
    let items = v["items"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let mut out = format!(
        "review mode: {}; {} article(s)\n",
        v["mode"].as_str().unwrap_or("?"),
        items.len()
    );
    if items.is_empty() {
        return out;
    }
    out.push_str(&format!(
        "{:<20} {:<8} {:<20} {:>5} {:<24} {:>9} {:>9}  {:<38} title\n",
        "article", "status", "held at (UTC)", "rank", "query", "pv", "uv", "network"
    ));
    for it in items {
        let e = &it["evidence"];
        let held = it["heldAt"]
            .as_i64()
            .map_or_else(|| "-".to_string(), super::fmt_utc);
        let q = &e["query"];
        let query = if e.is_null() {
            "-".to_string()
        } else {
            let mut s = format!(
                "{} {} {}",
                e["list"].as_str().unwrap_or("?"),
                q["model"].as_str().unwrap_or("?"),
                q["range"].as_str().unwrap_or("?")
            );
            for f in ["category", "kind", "group"] {
                if let Some(x) = q[f].as_str() {
                    s.push_str(&format!(" {f}={x}"));
                }
            }
            s
        };
        let title: String = e["title"]
            .as_str()
            .unwrap_or("")
            .chars()
            .filter(|c| !c.is_control())
            .take(60)
            .collect();
        out.push_str(&format!(
            "{:<20} {:<8} {:<20} {} {:<24} {} {}  {:<38} {title}\n",
            it["articleId"].as_str().unwrap_or("?"),
            it["status"].as_str().unwrap_or("?"),
            held,
            pad_left(&e["rank"].as_u64().map_or("-".into(), |r| r.to_string()), 5),
            query,
            pad_left(&count(&e["counters"]["pv"]), 9),
            pad_left(&count(&e["counters"]["uv"]), 9),
            network(&e["network"]),
        ));
    }
    out
}

/// A `suspicious` hold's evidence in one cell: the rule, blocks / visitors,
/// the held-back share, the hours (`-` for a `new_entries` hold).
fn network(n: &Value) -> String {
    if n.is_null() {
        return "-".into();
    }
    let pct = |x: &Value| {
        x.as_f64()
            .map_or("?".into(), |x| format!("{:.0}%", x * 100.0))
    };
    let hour = |x: &Value| {
        x.as_i64()
            .map_or("?".into(), |t| super::fmt_utc(t)[11..16].to_string())
    };
    format!(
        "{} {}/{}uv held {} {}-{}",
        n["rule"].as_str().unwrap_or("?"),
        count(&n["blocks"]),
        count(&n["uv"]),
        pct(&n["heldShare"]),
        hour(&n["from"]),
        hour(&n["until"]),
    )
}

pub fn run(args: ReviewArgs) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let target = Target::new(&args.server)?;
    let auth = format!("Bearer {}", args.token);
    let headers = [("authorization", auth.as_str())];
    let decision = match (&args.allow, &args.deny) {
        (Some(id), _) => Some((id, "allow")),
        (_, Some(id)) => Some((id, "deny")),
        _ => None,
    };
    if let Some((id, d)) = decision {
        if crate::model::ArticleId::parse(id).is_err() {
            return Err(format!("{id:?} is not an article id"));
        }
        let body = json!({ "decision": d }).to_string();
        let v = rt.block_on(call_json(
            &target,
            "POST",
            &format!("/api/review/{id}"),
            &[headers[0], ("content-type", "application/json")],
            body.as_bytes(),
        ))?;
        println!("{id}: {}", v["status"].as_str().unwrap_or("?"));
        return Ok(());
    }
    let path = format!(
        "/api/review?{}",
        serde_urlencoded::to_string([("status", &args.status)]).unwrap_or_default()
    );
    let v = rt.block_on(call_json(&target, "GET", &path, &headers, b""))?;
    print!("{}", render(&v));
    Ok(())
}
