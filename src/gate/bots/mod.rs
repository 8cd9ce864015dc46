//! Bot detection by user agent: a maintained public crawler list built in
//! (`patterns.txt`: the isbot project's pattern list; why that one is in the
//! README, "Bots"), plus the operator's own patterns from the config
//! (`gate.bot_patterns`) and from a list file (`gate.bot_patterns_file`)
//! that [`BotDetector::reload`] re-reads without a restart (on `SIGHUP`,
//! see [`reload_on_sighup`]). Verdicts are cached, because the same handful
//! of user agents make up most traffic; the cache is bounded.

mod patterns;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use parking_lot::{Mutex, RwLock};

use crate::crawler::Crawler;

pub use patterns::{PatternError, PatternSet, parse_lines};

/// Why the operator's bot patterns cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum BotsError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("bot patterns ({}): {source}", path.display())]
    File {
        path: PathBuf,
        #[source]
        source: PatternError,
    },
    #[error("bot patterns: {0}")]
    Inline(#[source] PatternError),
}

use crate::gate::config::GateConfig;

/// Most cached verdicts; a full cache is emptied and refilled.
pub const CACHE_CAP: usize = 16_384;
/// User agents longer than this are not cached (nor likely real browsers).
pub const CACHE_MAX_UA: usize = 512;

/// Reloads of the operator's list, by `result` (`ok` or `error`).
pub const METRIC_RELOADS: &str = "hotrank_bot_pattern_reloads_total";
/// Patterns the operator's list holds now (config and file).
pub const METRIC_OPERATOR_PATTERNS: &str = "hotrank_bot_operator_patterns";

/// The built-in list's text.
pub const BUILTIN_LIST: &str = include_str!("patterns.txt");

static BUILTIN: LazyLock<PatternSet> = LazyLock::new(|| {
    PatternSet::compile(&parse_lines(BUILTIN_LIST)).expect("the built-in bot patterns compile")
});

/// The built-in crawler patterns, compiled once per process.
pub fn builtin() -> &'static PatternSet {
    &BUILTIN
}

/// The patterns of an operator list file (see [`parse_lines`]).
pub fn read_pattern_file(path: &Path) -> Result<Vec<String>, BotsError> {
    std::fs::read_to_string(path)
        .map(|t| parse_lines(&t))
        .map_err(|e| BotsError::Read {
            path: path.to_path_buf(),
            source: e,
        })
}

pub struct BotDetector {
    /// Patterns from the config, kept for every reload.
    inline: Vec<String>,
    file: Option<PathBuf>,
    operator: RwLock<PatternSet>,
    empty_is_bot: bool,
    cache: Mutex<HashMap<Box<str>, Crawler>>,
}

impl std::fmt::Debug for BotDetector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotDetector")
            .field("inline", &self.inline)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl BotDetector {
    /// `extra` are regular expressions matched case-insensitively, on top
    /// of the built-in list.
    pub fn new(extra: &[String], empty_is_bot: bool) -> Result<Self, BotsError> {
        Self::with_file(extra, None, empty_is_bot)
    }

    /// The detector `[gate]` describes.
    pub fn from_config(gate: &GateConfig) -> Result<Self, BotsError> {
        Self::with_file(
            &gate.bot_patterns,
            gate.bot_patterns_file.as_deref(),
            gate.empty_user_agent_is_bot,
        )
    }

    /// `extra` plus the patterns of the list file `file`, which
    /// [`BotDetector::reload`] re-reads.
    pub fn with_file(
        extra: &[String],
        file: Option<&Path>,
        empty_is_bot: bool,
    ) -> Result<Self, BotsError> {
        let d = BotDetector {
            inline: extra.to_vec(),
            file: file.map(Path::to_path_buf),
            operator: RwLock::new(PatternSet::empty()),
            empty_is_bot,
            cache: Mutex::new(HashMap::new()),
        };
        let set = d.compile_operator()?;
        metrics::gauge!(METRIC_OPERATOR_PATTERNS).set(set.len() as f64);
        *d.operator.write() = set;
        Ok(d)
    }

    fn compile_operator(&self) -> Result<PatternSet, BotsError> {
        let mut all = self.inline.clone();
        if let Some(path) = &self.file {
            all.extend(read_pattern_file(path)?);
        }
        PatternSet::compile(&all).map_err(|source| match &self.file {
            Some(path) => BotsError::File {
                path: path.clone(),
                source,
            },
            None => BotsError::Inline(source),
        })
    }

    /// Re-reads the operator's list file and swaps it in; cached verdicts
    /// are dropped. On `Err` (unreadable file, bad pattern) the list in use
    /// stays. Returns how many operator patterns are in force.
    pub fn reload(&self) -> Result<usize, BotsError> {
        match self.compile_operator() {
            Ok(set) => {
                let n = set.len();
                // Lock order: operator, then cache (as in `is_bot`), so no
                // verdict computed with the old list survives the swap.
                let mut op = self.operator.write();
                *op = set;
                self.cache.lock().clear();
                drop(op);
                metrics::counter!(METRIC_RELOADS, "result" => "ok").increment(1);
                metrics::gauge!(METRIC_OPERATOR_PATTERNS).set(n as f64);
                Ok(n)
            }
            Err(e) => {
                metrics::counter!(METRIC_RELOADS, "result" => "error").increment(1);
                Err(e)
            }
        }
    }

    pub fn is_bot(&self, user_agent: &str) -> bool {
        self.classify(user_agent).is_bot()
    }

    /// The crawler family of `user_agent`, [`Crawler::NONE`] for a
    /// browser: [`Crawler::EMPTY`] for no user agent (when that is a bot),
    /// a named family (or [`Crawler::OTHER`]) when the built-in list
    /// matches, [`Crawler::OPERATOR`] when only the operator's does.
    pub fn classify(&self, user_agent: &str) -> Crawler {
        let ua = user_agent.trim();
        if ua.is_empty() {
            return if self.empty_is_bot {
                Crawler::EMPTY
            } else {
                Crawler::NONE
            };
        }
        let cacheable = ua.len() <= CACHE_MAX_UA;
        if cacheable && let Some(&hit) = self.cache.lock().get(ua) {
            return hit;
        }
        let operator = self.operator.read();
        let verdict = if builtin().is_match(ua) {
            Crawler::of_user_agent(ua)
        } else if operator.is_match(ua) {
            Crawler::OPERATOR
        } else {
            Crawler::NONE
        };
        if cacheable {
            let mut cache = self.cache.lock();
            if cache.len() >= CACHE_CAP {
                cache.clear();
            }
            cache.insert(ua.into(), verdict);
        }
        verdict
    }

    /// Verdicts in the cache now (at most [`CACHE_CAP`]).
    pub fn cached_verdicts(&self) -> usize {
        self.cache.lock().len()
    }
}

/// Reloads `bots`' operator list on every `SIGHUP` until the process ends
/// (does nothing where there are no Unix signals). The signal handler is
/// installed when this is called (inside the runtime), before the returned
/// future is first polled, so a `SIGHUP` sent once the server answers can
/// no longer end the process.
pub fn reload_on_sighup(bots: Arc<BotDetector>) -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
    async move {
        #[cfg(unix)]
        {
            let mut hup = match hup {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for SIGHUP: bot patterns reload only on restart");
                    return;
                }
            };
            while hup.recv().await.is_some() {
                match bots.reload() {
                    Ok(n) => tracing::info!(operator_patterns = n, "bot patterns reloaded"),
                    Err(e) => {
                        tracing::error!(error = %e, "bot patterns not reloaded; the previous list stays")
                    }
                }
            }
        }
        #[cfg(not(unix))]
        drop(bots);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

    #[test]
    fn known_and_extra_patterns() {
        let d = BotDetector::new(&["zqxwidget/".to_string()], true).unwrap();
        assert!(d.is_bot("Googlebot/2.1 (+http://www.google.com/bot.html)"));
        assert!(d.is_bot("curl/8.5.0"));
        assert!(d.is_bot(&format!("{FIREFOX} ZqxWidget/1.0")));
        assert!(d.is_bot(""));
        assert!(!d.is_bot(FIREFOX));
        assert!(!d.is_bot(FIREFOX), "cached answer agrees");
        assert_eq!(d.classify("curl/8.5.0").name(), "tool");
        assert_eq!(
            d.classify(&format!("{FIREFOX} ZqxWidget/1.0")),
            Crawler::OPERATOR
        );
        assert_eq!(d.classify(""), Crawler::EMPTY);
        assert_eq!(d.classify(FIREFOX), Crawler::NONE);
        let lenient = BotDetector::new(&[], false).unwrap();
        assert!(!lenient.is_bot(""));
    }

    #[test]
    fn builtin_list_compiles_whole() {
        assert_eq!(builtin().len(), parse_lines(BUILTIN_LIST).len());
        assert!(builtin().len() > 100);
    }

    #[test]
    fn cache_stays_bounded() {
        let d = BotDetector::new(&[], true).unwrap();
        for i in 0..CACHE_CAP + 100 {
            d.is_bot(&format!("{FIREFOX} r{i}"));
            assert!(d.cached_verdicts() <= CACHE_CAP);
        }
        assert!(d.cached_verdicts() > 0);
        d.is_bot(&format!("{FIREFOX} {}", "x".repeat(CACHE_MAX_UA)));
        assert!(d.cached_verdicts() <= CACHE_CAP);
    }

    #[test]
    fn reload_swaps_the_file_and_keeps_config_patterns() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bots.txt");
        std::fs::write(&file, "# mine\nzqxfirst/\n").unwrap();
        let d = BotDetector::with_file(&["zqxinline/".into()], Some(&file), true).unwrap();
        let (first, second) = (
            format!("{FIREFOX} ZqxFirst/1"),
            format!("{FIREFOX} ZqxSecond/1"),
        );
        assert!(d.is_bot(&first));
        assert!(!d.is_bot(&second));
        std::fs::write(&file, "zqxsecond/\n").unwrap();
        assert_eq!(d.reload().unwrap(), 2);
        assert!(!d.is_bot(&first), "old verdict not served from the cache");
        assert!(d.is_bot(&second));
        assert!(d.is_bot(&format!("{FIREFOX} zqxinline/2")));
        std::fs::write(&file, "(\n").unwrap();
        let e = d.reload().unwrap_err();
        assert!(matches!(e, BotsError::File { .. }), "{e}");
        assert!(e.to_string().contains("bots.txt"), "{e}");
        assert!(d.is_bot(&second), "a bad file keeps the old list");
        std::fs::remove_file(&file).unwrap();
        assert!(d.reload().is_err());
        assert!(d.is_bot(&second));
    }
}
