//! A list of user-agent patterns compiled for one question: does any of
//! them match? Patterns are matched ASCII-case-insensitively anywhere in the
//! user agent, as the published crawler lists (written for JavaScript's
//! `RegExp(.., "i")`) expect.
//!
//! Most patterns are plain regular expressions and all of them go into one
//! automaton, so a user agent is scanned once whatever the list's length.
//! The few with look-around (`(?<!lib)http`), which that automaton cannot
//! express, are checked with `fancy-regex`, and only when the same pattern
//! with its look-arounds removed (a necessary condition) already matched.

use regex::bytes::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};

/// Compiled program size allowed for the combined automaton.
const SIZE_LIMIT: usize = 64 << 20;

/// The patterns of a list file: one a line, trimmed; blank lines and lines
/// starting with `#` are skipped.
pub fn parse_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

#[derive(Debug)]
pub struct PatternSet {
    /// Every plain pattern and every prefilter as one alternation: when it
    /// does not match (most browsers), nothing else needs to run.
    any: Option<Regex>,
    /// Every plain pattern as one alternation.
    plain: Option<Regex>,
    /// The look-around patterns, index for index with `prefilter`.
    lookaround: Vec<fancy_regex::Regex>,
    /// Each look-around pattern without its look-arounds.
    prefilter: Option<RegexSet>,
    len: usize,
}

/// Why a list of patterns does not compile.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PatternError {
    #[error("{pattern:?} is not a valid regex: {source}")]
    Invalid {
        pattern: String,
        #[source]
        source: regex::Error,
    },
    #[error("the patterns together are too large: {0}")]
    TooLarge(#[source] regex::Error),
    #[error("the look-around patterns are too large: {0}")]
    LookaroundTooLarge(#[source] regex::Error),
}

fn plain_builder(pattern: &str) -> RegexBuilder {
    let mut b = RegexBuilder::new(pattern);
    b.unicode(false)
        .case_insensitive(true)
        .size_limit(SIZE_LIMIT)
        .dfa_size_limit(SIZE_LIMIT);
    b
}

impl PatternSet {
    /// An empty set matches nothing.
    pub fn empty() -> Self {
        PatternSet {
            any: None,
            plain: None,
            lookaround: Vec::new(),
            prefilter: None,
            len: 0,
        }
    }

    /// `Err` names the first pattern that is not a valid regular expression.
    pub fn compile(patterns: &[String]) -> Result<Self, PatternError> {
        let mut plain = Vec::new();
        let mut lookaround = Vec::new();
        let mut prefilter = Vec::new();
        for p in patterns {
            match plain_builder(p).build() {
                Ok(_) => plain.push(format!("(?:{p})")),
                Err(plain_err) => {
                    // Look-around is the one extension worth supporting;
                    // anything else reports the plain regex error.
                    let fancy = fancy_regex::Regex::new(&format!("(?i){p}")).map_err(|_| {
                        PatternError::Invalid {
                            pattern: p.clone(),
                            source: plain_err,
                        }
                    })?;
                    let necessary = strip_lookaround(p);
                    // The stripped form only has to be a superset; if it
                    // does not compile, match everything and let the full
                    // pattern decide.
                    let necessary = if plain_builder(&necessary).build().is_ok() {
                        necessary
                    } else {
                        String::new()
                    };
                    lookaround.push(fancy);
                    prefilter.push(necessary);
                }
            }
        }
        let alternation = |parts: &[String]| -> Result<Option<Regex>, PatternError> {
            if parts.is_empty() {
                return Ok(None);
            }
            plain_builder(&parts.join("|"))
                .build()
                .map(Some)
                .map_err(PatternError::TooLarge)
        };
        let mut all = plain.clone();
        all.extend(prefilter.iter().map(|p| format!("(?:{p})")));
        let any = alternation(&all)?;
        let plain = alternation(&plain)?;
        let prefilter = if prefilter.is_empty() {
            None
        } else {
            Some(
                RegexSetBuilder::new(&prefilter)
                    .unicode(false)
                    .case_insensitive(true)
                    .size_limit(SIZE_LIMIT)
                    .dfa_size_limit(SIZE_LIMIT)
                    .build()
                    .map_err(PatternError::LookaroundTooLarge)?,
            )
        };
        Ok(PatternSet {
            any,
            plain,
            lookaround,
            prefilter,
            len: patterns.len(),
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_match(&self, user_agent: &str) -> bool {
        if !self
            .any
            .as_ref()
            .is_some_and(|r| r.is_match(user_agent.as_bytes()))
        {
            return false;
        }
        if self
            .plain
            .as_ref()
            .is_some_and(|r| r.is_match(user_agent.as_bytes()))
        {
            return true;
        }
        let Some(prefilter) = &self.prefilter else {
            return false;
        };
        let candidates = prefilter.matches(user_agent.as_bytes());
        candidates
            .iter()
            // A look-around too costly to decide counts as no match: the
            // verdict then rests on the other patterns.
            .any(|i| self.lookaround[i].is_match(user_agent).unwrap_or(false))
    }
}

/// `pattern` with every look-around group (`(?=`, `(?!`, `(?<=`, `(?<!`)
/// removed: a zero-width condition dropped, so it matches a superset.
fn strip_lookaround(pattern: &str) -> String {
    let b = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len());
    let mut i = 0;
    let mut in_class = false;
    while i < b.len() {
        let rest = &pattern[i..];
        if !in_class
            && ["(?=", "(?!", "(?<=", "(?<!"]
                .iter()
                .any(|s| rest.starts_with(s))
        {
            i = group_end(b, i);
            continue;
        }
        match b[i] {
            b'[' => in_class = true,
            b']' => in_class = false,
            _ => {}
        }
        let step = if b[i] == b'\\' { 2 } else { 1 };
        let end = (i + step).min(b.len());
        // Escapes and ASCII are whole characters; copy a multi-byte
        // character whole too.
        let end = (end..=b.len())
            .find(|&e| pattern.is_char_boundary(e))
            .unwrap_or(b.len());
        out.push_str(&pattern[i..end]);
        i = end;
    }
    out
}

/// The index just past the group opening at `start` (escapes and
/// character classes skipped), or the end of the pattern.
fn group_end(b: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut in_class = false;
    let mut i = start;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'[' if !in_class => in_class = true,
            b']' if in_class => in_class = false,
            b'(' if !in_class => depth += 1,
            b')' if !in_class => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(p: &[&str]) -> PatternSet {
        PatternSet::compile(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn strips_lookaround_only() {
        assert_eq!(strip_lookaround("(?<!lib)http"), "http");
        assert_eq!(
            strip_lookaround("(?<! channel/|google/)google(?!(?:wv|app|/google| pixel))"),
            "google"
        );
        assert_eq!(strip_lookaround(r"java(?!;)"), "java");
        assert_eq!(strip_lookaround(r"a[(?!]b\(?!c"), r"a[(?!]b\(?!c");
        assert_eq!(strip_lookaround(r"(?:^|[^g])news(?!x)"), r"(?:^|[^g])news");
    }

    #[test]
    fn plain_and_lookaround_patterns() {
        let s = set(&["^acme", "(?<!lib)http", r"\bperl\b"]);
        assert_eq!(s.len(), 3);
        assert!(s.is_match("ACME-Crawler/1.0"));
        assert!(s.is_match("fetcher (+http://example.com)"));
        assert!(!s.is_match("libhttp/1.0"));
        assert!(s.is_match("libwww-perl/6.0"));
        assert!(!s.is_match("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Firefox/128.0"));
        assert!(!PatternSet::empty().is_match("anything"));
    }

    #[test]
    fn invalid_pattern_is_named() {
        let e = PatternSet::compile(&["ok".into(), "(".into()]).unwrap_err();
        assert!(matches!(&e, PatternError::Invalid { pattern, .. } if pattern == "("));
        assert!(e.to_string().contains("\"(\""), "{e}");
    }

    #[test]
    fn list_lines() {
        let text = "# comment\n\n  ^acme \r\nfoo\n   # indented comment\n";
        assert_eq!(parse_lines(text), vec!["^acme", "foo"]);
    }
}
