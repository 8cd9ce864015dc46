//! Feeds (`/feeds/hot.rss`, `.atom`, `.json`) and the live stream
//! (`/api/stream`) over loopback: the RSS and Atom read back by Python's
//! feedparser, the JSON Feed against JSON Feed 1.1's rules, revalidation
//! (`ETag`, `304`), escaping, the same 400s as `/api/hot`, and the stream
//! read by a streaming HTTP client, its changes and its cap.
//!
//! feedparser comes from `.ci/feeds-requirements.txt` (`.ci/run` installs
//! it in `target/feeds-venv` and names the interpreter in `FEEDS_PYTHON`;
//! without that variable, that venv if it exists, else `python3`).
//! Without it the feed tests fail, saying so.

mod common;

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use serde_json::{Value, json};

use common::{T0, TestServer, page_ids};

/// A title with every character XML and HTML treat specially, and some
/// beyond ASCII.
const TRICKY_TITLE: &str =
    "Cats & \"dogs\" <3 'quotes' </title> \u{2014} na\u{ef}ve caf\u{e9} \u{65e5}\u{672c} \u{1F600}";
const TRICKY_SUMMARY: &str = "1 < 2 && <b>not bold</b> ]]> \u{201c}curly\u{201d}";
const TRICKY_URL: &str = "https://example.com/a?x=1&y=\"2\"";

/// Three articles with views, the first with [`TRICKY_TITLE`]; the last
/// has no title, link or summary.
async fn seeded(edit: impl FnOnce(&mut hotrank::config::Config)) -> TestServer {
    let s = TestServer::start_with(edit).await;
    for (id, body) in [
        (
            "a1",
            json!({"title": TRICKY_TITLE, "url": TRICKY_URL, "summary": TRICKY_SUMMARY,
                   "author": "Zo\u{eb} <z@example.com>", "category": "pets & cats",
                   "publishedAt": T0 - 3600}),
        ),
        (
            "a2",
            json!({"title": "Plain", "url": "https://example.com/b", "category": "news",
                   "publishedAt": T0 - 7200}),
        ),
        ("a3", json!({"publishedAt": T0 - 1800})),
    ] {
        let (status, b) = s.admin_put(&format!("/api/articles/{id}"), &body).await;
        assert!(status.is_success(), "{status} {b}");
    }
    for (id, n) in [("a1", 6), ("a2", 3), ("a3", 1)] {
        for v in 0..n {
            assert_eq!(s.view(id, &format!("{id}-v{v}")).await, "counted");
        }
    }
    s
}

/// The interpreter that has feedparser; panics, saying how to get it,
/// when there is none.
fn feed_python() -> String {
    // `.ci/run`'s venv, when it was made in this checkout's target dir.
    let ci_venv = concat!(env!("CARGO_MANIFEST_DIR"), "/target/feeds-venv/bin/python");
    let python = std::env::var("FEEDS_PYTHON").unwrap_or_else(|_| {
        let found = std::path::Path::new(ci_venv).is_file();
        (if found { ci_venv } else { "python3" }).to_string()
    });
    let ok = std::process::Command::new(&python)
        .args(["-c", "import feedparser"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "these tests read the feeds with Python's feedparser, which `{python} -c 'import feedparser'` \
         did not find: `pip install -r .ci/feeds-requirements.txt`, or set FEEDS_PYTHON to an \
         interpreter that has it"
    );
    python
}

/// What feedparser makes of a feed: the fields the tests compare.
const PARSE: &str = r#"
import calendar, json, sys, feedparser
d = feedparser.parse(sys.stdin.buffer.read())
def detail(e, k):
    return (e.get(k + "_detail") or {}).get("type")
print(json.dumps({
    "bozo": bool(d.bozo),
    "bozo_exception": repr(d.get("bozo_exception")),
    "version": d.version,
    "title": d.feed.get("title"),
    "self": [l.get("href") for l in d.feed.get("links", []) if l.get("rel") == "self"],
    "entries": [{
        "title": e.get("title"),
        "title_type": detail(e, "title"),
        "link": e.get("link"),
        "summary": e.get("summary"),
        "summary_type": detail(e, "summary"),
        "id": e.get("id"),
        "published": calendar.timegm(e.published_parsed) if e.get("published_parsed") else None,
        "author": e.get("author"),
        "tags": [t.get("term") for t in e.get("tags", [])],
    } for e in d.entries],
}))
"#;

fn feedparser(python: &str, body: &[u8]) -> Value {
    use std::io::Write;
    let mut child = std::process::Command::new(python)
        .args(["-c", PARSE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run python");
    child.stdin.take().unwrap().write_all(body).unwrap();
    let out = child.wait_with_output().expect("feedparser output");
    assert!(
        out.status.success(),
        "feedparser failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("feedparser's JSON")
}

async fn fetch(s: &TestServer, path: &str) -> reqwest::Response {
    s.client.get(s.url(path)).send().await.expect("GET")
}

fn header(r: &reqwest::Response, name: reqwest::header::HeaderName) -> String {
    r.headers()
        .get(&name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
        .to_string()
}

/// `/api/hot`'s article ids for `query`.
async fn hot_ids(s: &TestServer, query: &str) -> Vec<String> {
    let (status, page) = s.get(&format!("/api/hot?{query}")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page_ids(&page).into_iter().map(String::from).collect()
}

fn entry_ids(parsed: &Value) -> Vec<String> {
    parsed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let id = e["id"].as_str().expect("an entry id");
            id.rsplit('/').next().unwrap().to_string()
        })
        .collect()
}

#[tokio::test]
async fn rss_and_atom_read_back_with_feedparser() {
    let python = feed_python();
    let s = seeded(|_| {}).await;
    let want = hot_ids(&s, "").await;
    assert_eq!(want.len(), 3);
    for (path, version, ctype) in [
        ("/feeds/hot.rss", "rss20", "application/rss+xml"),
        ("/feeds/hot.atom", "atom10", "application/atom+xml"),
    ] {
        let r = fetch(&s, path).await;
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert!(header(&r, CONTENT_TYPE).starts_with(ctype), "{path}");
        let body = r.bytes().await.unwrap();
        let d = feedparser(&python, &body);
        assert_eq!(d["bozo"], false, "{path}: {d}");
        assert_eq!(d["version"], version, "{path}");
        assert_eq!(d["title"], "Hot: gravity, 72h", "{path}");
        assert_eq!(d["self"][0], s.url(path), "{path}");
        assert_eq!(entry_ids(&d), want, "{path}: the ranking's order");
        let e = &d["entries"][0];
        assert_eq!(e["id"], s.url("/api/articles/a1"), "{path}");
        assert_eq!(e["title"], TRICKY_TITLE, "{path}: {e}");
        assert_eq!(e["link"], TRICKY_URL, "{path}: {e}");
        assert_eq!(e["published"], T0 - 3600, "{path}: {e}");
        assert_eq!(e["author"], "Zo\u{eb} <z@example.com>", "{path}: {e}");
        assert_eq!(e["tags"], json!(["pets & cats"]), "{path}: {e}");
        // Plain text stays plain text: RSS's description is HTML, so the
        // summary arrives as HTML whose text is the summary; Atom's is
        // declared text.
        match version {
            "rss20" => {
                assert_eq!(e["summary_type"], "text/html", "{e}");
                let text = e["summary"].as_str().unwrap();
                assert!(!text.contains("<b>"), "markup leaked: {text}");
                assert_eq!(html_text(text), TRICKY_SUMMARY, "{e}");
            }
            _ => {
                assert_eq!(e["summary_type"], "text/plain", "{e}");
                assert_eq!(e["summary"], TRICKY_SUMMARY, "{e}");
            }
        }
        // No title, link or summary: a title made from the id.
        let bare = d["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == s.url("/api/articles/a3"))
            .unwrap();
        assert_eq!(bare["title"], "Article a3", "{path}");
        assert_eq!(bare["published"], T0 - 1800, "{path}");
    }
}

/// The text of a small HTML fragment with no elements (entities only).
fn html_text(html: &str) -> String {
    html.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[tokio::test]
async fn json_feed_follows_json_feed_1_1() {
    let s = seeded(|_| {}).await;
    let r = fetch(&s, "/feeds/hot.json").await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(header(&r, CONTENT_TYPE).starts_with("application/feed+json"));
    let feed: Value = r.json().await.unwrap();
    // JSON Feed 1.1's required fields: version (the URL), title, items;
    // each item an id (a string) and content_text or content_html.
    assert_eq!(feed["version"], "https://jsonfeed.org/version/1.1");
    assert_eq!(feed["title"], "Hot: gravity, 72h");
    assert_eq!(feed["feed_url"], s.url("/feeds/hot.json"));
    let items = feed["items"].as_array().expect("items is an array");
    for it in items {
        assert!(it["id"].as_str().is_some_and(|id| !id.is_empty()), "{it}");
        assert!(
            it["content_text"].is_string() || it["content_html"].is_string(),
            "{it}"
        );
        let date = it["date_published"].as_str().expect("date_published");
        assert!(is_rfc3339_utc(date), "{date}");
        if let Some(authors) = it.get("authors") {
            assert!(authors[0]["name"].is_string(), "{it}");
        }
    }
    let ids: Vec<&str> = items
        .iter()
        .map(|i| i["_hotrank"]["articleId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, hot_ids(&s, "").await);
    let first = &items[0];
    assert_eq!(first["title"], TRICKY_TITLE);
    assert_eq!(first["url"], TRICKY_URL);
    assert_eq!(first["summary"], TRICKY_SUMMARY);
    assert_eq!(first["date_published"], "2025-11-21T20:20:00Z");
    assert_eq!(first["_hotrank"]["rank"], 1);
}

fn is_rfc3339_utc(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// Every format lists what `/api/hot` lists for the same parameters.
#[tokio::test]
async fn feeds_take_the_ranking_parameters() {
    let python = feed_python();
    let s = seeded(|_| {}).await;
    for query in [
        "limit=2",
        "limit=1&offset=1",
        "page=2&pageSize=1",
        "category=news",
        "range=24h&model=weighted",
        "model=window&range=2h&perAuthor=1",
    ] {
        let want = hot_ids(&s, query).await;
        for path in ["/feeds/hot.rss", "/feeds/hot.atom"] {
            let body = fetch(&s, &format!("{path}?{query}"))
                .await
                .bytes()
                .await
                .unwrap();
            assert_eq!(
                entry_ids(&feedparser(&python, &body)),
                want,
                "{path}?{query}"
            );
        }
        let feed: Value = fetch(&s, &format!("/feeds/hot.json?{query}"))
            .await
            .json()
            .await
            .unwrap();
        let ids: Vec<&str> = feed["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["_hotrank"]["articleId"].as_str().unwrap())
            .collect();
        assert_eq!(ids, want, "json?{query}");
    }
}

#[tokio::test]
async fn bad_parameters_get_the_same_errors_as_api_hot() {
    let s = seeded(|_| {}).await;
    for query in [
        "model=nope",
        "range=0h",
        "limit=0",
        "limit=101",
        "page=0",
        "perAuthor=x",
        "category=",
        "color=red",
        "limit=1&limit=2",
        "cursor=",
        "%zz",
    ] {
        let (status, want) = s.get(&format!("/api/hot?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {want}");
        for path in ["/feeds/hot.rss", "/feeds/hot.atom", "/feeds/hot.json"] {
            let r = fetch(&s, &format!("{path}?{query}")).await;
            assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{path}?{query}");
            assert!(header(&r, CONTENT_TYPE).starts_with("application/json"));
            let got: Value = r.json().await.unwrap();
            assert_eq!(got, want, "{path}?{query}");
        }
    }
}

#[tokio::test]
async fn revalidation_gets_304_until_the_ranking_changes() {
    let s = seeded(|c| c.feeds.max_age_secs = 30).await;
    for path in ["/feeds/hot.rss", "/feeds/hot.atom", "/feeds/hot.json"] {
        let r = fetch(&s, path).await;
        assert_eq!(r.status(), StatusCode::OK);
        let etag = header(&r, ETAG);
        assert!(
            etag.starts_with('"') && etag.ends_with('"'),
            "a strong tag: {etag}"
        );
        assert_eq!(header(&r, CACHE_CONTROL), "public, max-age=30");

        let again = |tag: String| s.client.get(s.url(path)).header(IF_NONE_MATCH, tag).send();
        let r = again(etag.clone()).await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_MODIFIED, "{path}");
        assert_eq!(header(&r, ETAG), etag);
        assert_eq!(header(&r, CACHE_CONTROL), "public, max-age=30");
        assert!(r.bytes().await.unwrap().is_empty());
        // A list of tags, a weak one among them, and `*`.
        for tag in [format!("\"other\", W/{etag}"), "*".to_string()] {
            let r = again(tag.clone()).await.unwrap();
            assert_eq!(r.status(), StatusCode::NOT_MODIFIED, "{path} {tag}");
        }
        let r = again("\"other\"".into()).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");

        // Time alone does not change the feed: a cache's copy stays good.
        s.clock.advance(30);
        let r = again(etag.clone()).await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_MODIFIED, "{path} later");
    }

    // Views that reorder the list change every feed's tag.
    let before_ids = hot_ids(&s, "").await;
    let before = etags(&s).await;
    for v in 0..12 {
        s.view("a3", &format!("later-{v}")).await;
    }
    let after_ids = hot_ids(&s, "").await;
    assert_ne!(after_ids, before_ids, "the views reorder the list");
    let after = etags(&s).await;
    for (b, a) in before.iter().zip(&after) {
        assert_ne!(a, b);
    }
    for (path, old) in ["/feeds/hot.rss", "/feeds/hot.atom", "/feeds/hot.json"]
        .iter()
        .zip(&before)
    {
        let r = s
            .client
            .get(s.url(path))
            .header(IF_NONE_MATCH, old)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path} with the old tag");
    }
}

/// Each feed's current `ETag`.
async fn etags(s: &TestServer) -> Vec<String> {
    let mut out = Vec::new();
    for path in ["/feeds/hot.rss", "/feeds/hot.atom", "/feeds/hot.json"] {
        out.push(header(&fetch(s, path).await, ETAG));
    }
    out
}

/// One Server-Sent Event, or a comment (`name` "comment").
#[derive(Debug)]
struct Sse {
    name: String,
    data: String,
}

/// Reads events off a streaming response.
struct SseReader {
    resp: reqwest::Response,
    buf: String,
}

impl SseReader {
    /// The next event or comment; panics if none comes within `secs` (a
    /// bound on a stuck stream, not a measured time).
    async fn next(&mut self, secs: u64) -> Sse {
        let read = async {
            loop {
                if let Some(end) = self.buf.find("\n\n") {
                    let block: String = self.buf.drain(..end + 2).collect();
                    let mut ev = Sse {
                        name: "message".into(),
                        data: String::new(),
                    };
                    let mut only_fields = true;
                    for line in block.lines() {
                        if let Some(c) = line.strip_prefix(':') {
                            ev = Sse {
                                name: "comment".into(),
                                data: c.trim().into(),
                            };
                        } else if let Some(v) = line.strip_prefix("event: ") {
                            ev.name = v.into();
                            only_fields = false;
                        } else if let Some(v) = line.strip_prefix("data: ") {
                            ev.data.push_str(v);
                            only_fields = false;
                        }
                    }
                    if ev.name == "message" && only_fields {
                        continue; // `retry:` alone
                    }
                    return ev;
                }
                let chunk = self
                    .resp
                    .chunk()
                    .await
                    .expect("read the stream")
                    .expect("the stream ended");
                self.buf.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        };
        tokio::time::timeout(Duration::from_secs(secs), read)
            .await
            .unwrap_or_else(|_| panic!("nothing on the stream within {secs} s"))
    }

    /// The next `ranking` event's data, skipping keep-alives.
    async fn ranking(&mut self, secs: u64) -> Value {
        loop {
            let ev = self.next(secs).await;
            if ev.name == "ranking" {
                return serde_json::from_str(&ev.data).expect("JSON data");
            }
            assert_eq!(ev.name, "comment", "{ev:?}");
        }
    }

    /// Reads `ranking` events until one lists `want` (a change made by
    /// several requests may show in between).
    async fn ranking_until(&mut self, want: &[impl AsRef<str>], secs: u64) -> Value {
        let want: Vec<&str> = want.iter().map(AsRef::as_ref).collect();
        let read = async {
            loop {
                let page = self.ranking(secs).await;
                if page_ids(&page) == want {
                    return page;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(secs), read)
            .await
            .unwrap_or_else(|_| panic!("no ranking event listing {want:?} within {secs} s"))
    }
}

async fn open_stream(s: &TestServer, query: &str) -> reqwest::Response {
    s.client
        .get(s.url(&format!("/api/stream?{query}")))
        .send()
        .await
        .expect("GET /api/stream")
}

fn fast_streams(c: &mut hotrank::config::Config) {
    c.feeds.stream_poll_ms = 50;
    c.feeds.stream_keepalive_secs = 1;
}

#[tokio::test]
async fn the_stream_sends_the_list_and_each_change() {
    let s = seeded(fast_streams).await;
    let r = open_stream(&s, "top=2").await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(header(&r, CONTENT_TYPE).starts_with("text/event-stream"));
    assert_eq!(header(&r, CACHE_CONTROL), "no-cache");
    let mut sse = SseReader {
        resp: r,
        buf: String::new(),
    };
    let first = sse.ranking(20).await;
    let want = hot_ids(&s, "limit=2").await;
    assert_eq!(page_ids(&first), want, "{first}");
    assert_eq!(first["model"], "gravity");
    assert_eq!(first["items"][0]["title"], TRICKY_TITLE);
    assert!(first.get("cursor").is_none(), "{first}");

    // Nothing changes: only keep-alives.
    let ev = sse.next(20).await;
    assert_eq!(
        (ev.name.as_str(), ev.data.as_str()),
        ("comment", "keep-alive")
    );

    // /metrics counts it, with HELP.
    let metrics = s.text("/metrics").await;
    assert!(
        metrics.contains("# HELP hotrank_streams_open "),
        "{metrics}"
    );
    let open = metrics
        .lines()
        .find_map(|l| l.strip_prefix("hotrank_streams_open "))
        .and_then(|v| v.parse::<f64>().ok())
        .expect("hotrank_streams_open");
    assert!(open >= 1.0, "{open}");

    // Views that bring a3 into the top 2 bring a new event.
    for v in 0..12 {
        s.view("a3", &format!("later-{v}")).await;
    }
    let want = hot_ids(&s, "limit=2").await;
    assert!(want.contains(&"a3".to_string()), "{want:?}");
    let next = sse.ranking_until(&want, 20).await;
    assert_eq!(next["items"][0]["rank"], 1, "{next}");

    // A second stream of the same query starts with the current list.
    let mut other = SseReader {
        resp: open_stream(&s, "top=2").await,
        buf: String::new(),
    };
    assert_eq!(page_ids(&other.ranking(20).await), want);

    // Another query, filtered.
    let mut news = SseReader {
        resp: open_stream(&s, "top=5&category=news&range=24h").await,
        buf: String::new(),
    };
    assert_eq!(
        page_ids(&news.ranking(20).await),
        hot_ids(&s, "limit=5&category=news&range=24h").await
    );
}

/// A shutdown ends the open streams at once: they do not hold it for the
/// server's 30 s grace (the bound below is far under it and far over a
/// shutdown's own work; it measures nothing).
#[tokio::test]
async fn a_shutdown_ends_the_open_streams() {
    let s = seeded(fast_streams).await;
    let mut sse = SseReader {
        resp: open_stream(&s, "top=2").await,
        buf: String::new(),
    };
    sse.ranking(20).await;
    let stopped = tokio::time::timeout(Duration::from_secs(15), s.stop()).await;
    assert!(stopped.is_ok(), "the shutdown waited for the open stream");
    // The client sees the stream end (and would reconnect after `retry`).
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match sse.resp.chunk().await {
                Ok(Some(_)) => continue,
                other => return other.map(|_| ()),
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the stream did not end");
}

#[tokio::test]
async fn the_stream_is_capped() {
    let s = seeded(|c| {
        fast_streams(c);
        c.feeds.max_streams = 2;
    })
    .await;
    let a = open_stream(&s, "top=1").await;
    let b = open_stream(&s, "top=3&model=weighted").await;
    assert_eq!((a.status(), b.status()), (StatusCode::OK, StatusCode::OK));
    let refused = open_stream(&s, "top=1").await;
    assert_eq!(header(&refused, reqwest::header::RETRY_AFTER), "5");
    let body =
        common::expect_error(refused, StatusCode::SERVICE_UNAVAILABLE, "too_many_streams").await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("feeds.max_streams"),
        "{body}"
    );
    let metrics = s.text("/metrics").await;
    assert!(
        metrics.contains("# HELP hotrank_streams_refused_total "),
        "{metrics}"
    );

    // A closed stream frees its place (noticed at its next write, a
    // keep-alive at the latest).
    drop(a);
    let admitted = async {
        loop {
            let r = open_stream(&s, "top=1").await;
            if r.status() == StatusCode::OK {
                return r;
            }
            assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let mut again = SseReader {
        resp: tokio::time::timeout(Duration::from_secs(20), admitted)
            .await
            .expect("a place freed after a stream closed"),
        buf: String::new(),
    };
    assert_eq!(
        page_ids(&again.ranking(20).await),
        hot_ids(&s, "limit=1").await
    );
    drop(b);
}

#[tokio::test]
async fn streams_off_and_bad_stream_parameters() {
    let s = seeded(|c| c.feeds.max_streams = 0).await;
    for (query, code) in [
        ("top=0", "invalid_parameter"),
        ("top=101", "invalid_parameter"),
        ("model=nope", "invalid_parameter"),
        ("limit=5", "invalid_parameter"),
        ("cursor=abc", "invalid_parameter"),
        ("range=1y", "invalid_parameter"),
    ] {
        common::expect_error(open_stream(&s, query).await, StatusCode::BAD_REQUEST, code).await;
    }
    common::expect_error(
        open_stream(&s, "top=3").await,
        StatusCode::SERVICE_UNAVAILABLE,
        "too_many_streams",
    )
    .await;
}

/// The Redis store serves the same feeds and stream.
#[tokio::test]
async fn feeds_and_stream_on_redis() {
    let python = feed_python();
    let redis = common::redis::RedisServer::start();
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let s = TestServer::start_redis(dir, &redis.url(), fast_streams).await;
    s.until_ready(30, "redis").await;
    for (id, views) in [("r1", 2), ("r2", 4)] {
        let (status, b) = s
            .admin_put(
                &format!("/api/articles/{id}"),
                &json!({"title": format!("{id} & co"), "url": format!("https://example.com/{id}"),
                        "publishedAt": T0 - 600}),
            )
            .await;
        assert!(status.is_success(), "{status} {b}");
        for v in 0..views {
            s.view(id, &format!("{id}-{v}")).await;
        }
    }
    let want = hot_ids(&s, "").await;
    assert_eq!(want, ["r2", "r1"]);
    let rss = fetch(&s, "/feeds/hot.rss").await.bytes().await.unwrap();
    let d = feedparser(&python, &rss);
    assert_eq!(d["bozo"], false, "{d}");
    assert_eq!(entry_ids(&d), want);
    assert_eq!(d["entries"][0]["title"], "r2 & co");

    let mut sse = SseReader {
        resp: open_stream(&s, "top=2").await,
        buf: String::new(),
    };
    assert_eq!(page_ids(&sse.ranking(20).await), want);
    for v in 0..6 {
        s.view("r1", &format!("r1-more-{v}")).await;
    }
    sse.ranking_until(&["r1", "r2"], 20).await;
}
