//! Bot detection by user agent: the `isbot` crate's maintained pattern
//! list plus the operator's own patterns, with a small cache because the
//! same handful of user agents make up most traffic.

use std::collections::HashMap;

use parking_lot::Mutex;
use regex::RegexSet;

/// Most cached verdicts before the cache is cleared.
const CACHE_CAP: usize = 16_384;
/// User agents longer than this are not cached (nor likely real browsers).
const CACHE_MAX_UA: usize = 512;

pub struct BotDetector {
    known: isbot::Bots,
    extra: Option<RegexSet>,
    empty_is_bot: bool,
    cache: Mutex<HashMap<Box<str>, bool>>,
}

impl std::fmt::Debug for BotDetector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotDetector")
            .field("extra", &self.extra)
            .finish_non_exhaustive()
    }
}

impl BotDetector {
    /// `extra` are regular expressions matched case-insensitively.
    pub fn new(extra: &[String], empty_is_bot: bool) -> Result<Self, regex::Error> {
        let extra = if extra.is_empty() {
            None
        } else {
            Some(
                regex::RegexSetBuilder::new(extra)
                    .case_insensitive(true)
                    .build()?,
            )
        };
        Ok(BotDetector {
            known: isbot::Bots::default(),
            extra,
            empty_is_bot,
            cache: Mutex::new(HashMap::new()),
        })
    }

    pub fn is_bot(&self, user_agent: &str) -> bool {
        let ua = user_agent.trim();
        if ua.is_empty() {
            return self.empty_is_bot;
        }
        if ua.len() <= CACHE_MAX_UA
            && let Some(&hit) = self.cache.lock().get(ua)
        {
            return hit;
        }
        let verdict = self.known.is_bot(ua) || self.extra.as_ref().is_some_and(|s| s.is_match(ua));
        if ua.len() <= CACHE_MAX_UA {
            let mut cache = self.cache.lock();
            if cache.len() >= CACHE_CAP {
                cache.clear();
            }
            cache.insert(ua.into(), verdict);
        }
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_extra_patterns() {
        let d = BotDetector::new(&["^acme-crawler".to_string()], true).unwrap();
        assert!(d.is_bot("Googlebot/2.1 (+http://www.google.com/bot.html)"));
        assert!(d.is_bot("curl/8.5.0"));
        assert!(d.is_bot("ACME-Crawler/1.0"));
        assert!(d.is_bot(""));
        let firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
        assert!(!d.is_bot(firefox));
        assert!(!d.is_bot(firefox), "cached answer agrees");
        let lenient = BotDetector::new(&[], false).unwrap();
        assert!(!lenient.is_bot(""));
    }
}
