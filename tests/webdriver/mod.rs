//! A headless Chromium driven by `chromedriver` over the WebDriver
//! protocol (plain JSON over HTTP, spoken with reqwest), shared by the
//! browser test binaries.
#![allow(dead_code)]

use std::net::TcpListener as StdListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// Browser tests run one at a time: they measure real time, and the
/// machine may be busy.
pub static SERIAL: Mutex<()> = Mutex::const_new(());

/// Headless Chrome says "HeadlessChrome" in its user agent, which the gate
/// rightly counts as a bot; the tests browse as an ordinary Chrome.
pub const CHROME_UA: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 \
     (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";

fn find_in_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]) {
        for n in names {
            let p = dir.join(n);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// `(chromium, chromedriver)`, or `None` after printing why the test is
/// skipped. Panics under CI.
pub fn tools() -> Option<(PathBuf, PathBuf)> {
    let chromium = find_in_path(&["chromium", "chromium-browser", "google-chrome"]);
    let driver = find_in_path(&["chromedriver"]);
    match (chromium, driver) {
        (Some(c), Some(d)) => Some((c, d)),
        (c, d) => {
            let msg = format!(
                "browser tests need chromium and chromedriver (Debian: apt-get install chromium \
                 chromium-driver); found chromium: {c:?}, chromedriver: {d:?}"
            );
            if std::env::var_os("CI").is_some() {
                panic!("{msg} (CI is set, so this is a failure)");
            }
            eprintln!("SKIPPED: {msg}");
            None
        }
    }
}

pub fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// A chromedriver process with one browser session.
pub struct Browser {
    pub http: reqwest::Client,
    driver: Child,
    port: u16,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start(chromium: &Path, chromedriver: &Path) -> Browser {
        let port = free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client");
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(r) = http.get(format!("{base}/status")).send().await
                && let Ok(v) = r.json::<Value>().await
                && v["value"]["ready"] == true
            {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().expect("profile dir");
        let args = [
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1100,800".into(),
            format!("--user-agent={CHROME_UA}"),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        }}});
        let r: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await
            .expect("new session")
            .json()
            .await
            .expect("session JSON");
        let session = r["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {r}"))
            .to_string();
        let b = Browser {
            http,
            driver,
            port,
            session,
            _profile: profile,
        };
        b.cmd(
            "POST",
            "timeouts",
            json!({"script": 15000, "pageLoad": 15000}),
        )
        .await;
        b
    }

    pub async fn cmd(&self, method: &str, path: &str, body: Value) -> Value {
        let url = format!(
            "http://127.0.0.1:{}/session/{}/{path}",
            self.port, self.session
        );
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body),
        };
        let r: Value = req
            .send()
            .await
            .expect("webdriver request")
            .json()
            .await
            .expect("webdriver JSON");
        if let Some(err) = r["value"]["error"].as_str() {
            panic!("webdriver {path}: {err}: {}", r["value"]["message"]);
        }
        r["value"].clone()
    }

    /// The WebDriver id of the element a CSS selector finds.
    pub async fn element(&self, css: &str) -> String {
        let v = self
            .cmd(
                "POST",
                "element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        let id = v.as_object().and_then(|o| o.values().next());
        id.and_then(Value::as_str)
            .expect("an element id")
            .to_string()
    }

    /// Clicks the element a CSS selector finds, as a user would.
    pub async fn click(&self, css: &str) {
        let e = self.element(css).await;
        self.cmd("POST", &format!("element/{e}/click"), json!({}))
            .await;
    }

    pub async fn goto(&self, url: &str) {
        self.cmd("POST", "url", json!({"url": url})).await;
    }

    pub async fn js(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "execute/sync",
            json!({"script": script, "args": []}),
        )
        .await
    }

    pub async fn window(&self) -> String {
        self.cmd("GET", "window", Value::Null)
            .await
            .as_str()
            .expect("handle")
            .to_string()
    }

    /// Opens a new tab and switches to it: the previous tab is now in the
    /// background, and its `document.visibilityState` is `hidden`.
    pub async fn new_tab(&self) -> String {
        let v = self.cmd("POST", "window/new", json!({"type": "tab"})).await;
        let handle = v["handle"].as_str().expect("handle").to_string();
        self.switch(&handle).await;
        handle
    }

    pub async fn switch(&self, handle: &str) {
        self.cmd("POST", "window", json!({"handle": handle})).await;
    }

    pub async fn screenshot(&self, path: &Path) {
        let b64 = self.cmd("GET", "screenshot", Value::Null).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().expect("base64"))
            .expect("PNG");
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        std::fs::write(path, png).expect("write screenshot");
    }

    pub async fn resize(&self, width: u32, height: u32) {
        self.cmd(
            "POST",
            "window/rect",
            json!({"width": width, "height": height}),
        )
        .await;
    }

    /// Nothing on the page is wider than the window.
    pub async fn assert_fits_width(&self) {
        let overflow = self
            .js("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
            .await;
        assert!(
            overflow.as_i64().unwrap() <= 0,
            "horizontal overflow {overflow}px"
        );
    }

    /// Every text matching `selector` has WCAG AA contrast (4.5:1).
    pub async fn assert_contrast(&self, selector: &str) {
        let worst = self
            .cmd(
                "POST",
                "execute/sync",
                json!({"script": CONTRAST_JS, "args": [selector]}),
            )
            .await;
        assert!(worst[0].as_f64().unwrap() >= 4.5, "low contrast: {worst}");
    }

    /// Polls `script` until it returns something truthy.
    pub async fn wait_js(&self, script: &str, what: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let v = self.js(script).await;
            if !(v.is_null() || v == false || v == 0 || v == "") {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Browser {
    /// Ends the session (chromium quits), then chromedriver.
    pub async fn quit(mut self) {
        let url = format!("http://127.0.0.1:{}/session/{}", self.port, self.session);
        let _ = self.http.delete(url).send().await;
        self.session.clear();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // After a failure (no quit): end the session the blocking way, as
        // Drop cannot await. Then stop chromedriver, which this test started.
        use std::io::{Read, Write};
        if !self.session.is_empty()
            && let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port))
        {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = write!(
                s,
                "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                self.session
            );
            let _ = s.read_to_end(&mut Vec::new());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// WCAG contrast of every element matching `selector` against the
/// background it sits on (the nearest ancestor with one, else white);
/// returns the lowest, with the element's text.
pub const CONTRAST_JS: &str = r#"
const lum = (c) => {
  const [r, g, b] = c.match(/[\d.]+/g).slice(0, 3).map(Number).map((v) => {
    v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
};
const bg = (e) => {
  for (; e; e = e.parentElement) {
    const c = getComputedStyle(e).backgroundColor;
    if (c && !c.startsWith("rgba(0, 0, 0, 0") && c !== "transparent") return c;
  }
  return "rgb(255, 255, 255)";
};
let worst = [99, ""];
for (const e of document.querySelectorAll(arguments[0])) {
  if (!e.textContent.trim() || e.offsetParent === null) continue;
  const a = lum(getComputedStyle(e).color), b = lum(bg(e));
  const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  if (ratio < worst[0]) worst = [ratio, e.textContent.trim().slice(0, 40)];
}
return worst;
"#;
