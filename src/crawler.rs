//! Crawler families: which kind of bot an event quarantined as `bot` came
//! from, for the quarantine report (`GET /api/stats`, `byCrawler`). A
//! fixed list, so tallies per hour stay small whatever the traffic.
//!
//! The user-agent check (`src/gate/bots`) names the family of a user agent
//! it calls a bot ([`Crawler::of_user_agent`] on top of its patterns); the
//! stores name [`Crawler::BEHAVIOUR`] for visitors quarantined by the
//! behaviour rule (`gate.bot_articles_per_minute`).
//!
//! On the wire of an [`crate::model::Event`] (the write-ahead log, the
//! Redis scripts' arguments) a family is one byte, 0 for "not a bot":
//! the byte a `bool` was before, so a `true` in an older log reads as
//! [`Crawler::OTHER`].

use serde::{Deserialize, Serialize};

/// A crawler family, or none (not a bot).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Crawler(u8);

/// Family names by code (code 0, not a bot, has no name).
const NAMES: [&str; 17] = [
    "",
    "other",
    "google",
    "bing",
    "yandex",
    "baidu",
    "duckduckgo",
    "apple",
    "meta",
    "twitter",
    "seo",
    "ai",
    "monitor",
    "tool",
    "headless",
    "operator",
    "empty",
];

/// Tokens (lower case) a bot's user agent carries, by family, checked in
/// this order (the more specific families first).
const MARKERS: &[(Crawler, &[&str])] = &[
    (
        Crawler(11),
        &[
            "gptbot",
            "chatgpt-user",
            "oai-searchbot",
            "claudebot",
            "claude-web",
            "anthropic-ai",
            "perplexitybot",
            "ccbot",
            "bytespider",
            "amazonbot",
            "cohere-ai",
            "diffbot",
        ],
    ),
    (
        Crawler(10),
        &[
            "ahrefsbot",
            "semrushbot",
            "mj12bot",
            "dotbot",
            "rogerbot",
            "screaming frog",
            "blexbot",
            "dataforseobot",
            "serpstatbot",
        ],
    ),
    (
        Crawler(12),
        &[
            "uptimerobot",
            "pingdom",
            "statuscake",
            "site24x7",
            "newrelicpinger",
            "datadog",
        ],
    ),
    (
        Crawler(14),
        &[
            "headlesschrome",
            "phantomjs",
            "puppeteer",
            "playwright",
            "selenium",
            "lighthouse",
        ],
    ),
    (Crawler(2), &["google"]),
    (
        Crawler(3),
        &["bingbot", "bingpreview", "msnbot", "adidxbot"],
    ),
    (Crawler(4), &["yandex"]),
    (Crawler(5), &["baidu"]),
    (Crawler(6), &["duckduckbot", "duckassistbot"]),
    (Crawler(7), &["applebot"]),
    (
        Crawler(8),
        &[
            "facebookexternalhit",
            "facebookbot",
            "facebookcatalog",
            "meta-externalagent",
        ],
    ),
    (Crawler(9), &["twitterbot"]),
    (
        Crawler(13),
        &[
            "curl/",
            "wget/",
            "python-requests",
            "python-urllib",
            "python-httpx",
            "aiohttp",
            "go-http-client",
            "java/",
            "okhttp",
            "axios/",
            "node-fetch",
            "libwww-perl",
            "httpie",
            "postmanruntime",
            "scrapy",
        ],
    ),
];

/// Slots of a tally by family: a family's code, and `behaviour` last.
pub const SLOTS: usize = NAMES.len() + 1;
/// The slot of `behaviour` in a tally.
pub const BEHAVIOUR_SLOT: usize = NAMES.len();

/// The family name of tally slot `i` (`""` for slot 0, never tallied).
pub fn slot_name(i: usize) -> &'static str {
    if i == BEHAVIOUR_SLOT {
        Crawler::BEHAVIOUR_NAME
    } else {
        NAMES.get(i).copied().unwrap_or("other")
    }
}

impl Crawler {
    /// Not a bot.
    pub const NONE: Crawler = Crawler(0);
    /// A bot of the built-in list outside the named families (and a bot
    /// flag of an older log).
    pub const OTHER: Crawler = Crawler(1);
    /// Matched only by the operator's patterns (`gate.bot_patterns`,
    /// `gate.bot_patterns_file`).
    pub const OPERATOR: Crawler = Crawler(15);
    /// No user agent (`gate.empty_user_agent_is_bot`).
    pub const EMPTY: Crawler = Crawler(16);
    /// Quarantined by the behaviour rule, not by its user agent. Never
    /// carried by an event: the stores name it for what they quarantine.
    pub const BEHAVIOUR_NAME: &'static str = "behaviour";

    /// Every family name, in report order, `behaviour` last.
    pub fn names() -> impl Iterator<Item = &'static str> {
        NAMES[1..].iter().copied().chain([Self::BEHAVIOUR_NAME])
    }

    /// This family's tally slot.
    pub fn slot(self) -> usize {
        usize::from(self.0)
    }

    pub fn is_bot(self) -> bool {
        self.0 != 0
    }

    /// `bot` as the flag it was: [`Crawler::OTHER`] or [`Crawler::NONE`].
    pub fn from_flag(bot: bool) -> Crawler {
        if bot { Crawler::OTHER } else { Crawler::NONE }
    }

    /// The family's name (`""` for none).
    pub fn name(self) -> &'static str {
        NAMES.get(usize::from(self.0)).copied().unwrap_or("other")
    }

    /// The family a name stands for (not `behaviour`, which no event carries).
    pub fn from_name(name: &str) -> Option<Crawler> {
        (1..NAMES.len())
            .find(|&i| NAMES[i] == name)
            .map(|i| Crawler(i as u8))
    }

    /// The family of a user agent the built-in list calls a bot: the
    /// first family whose token it carries, else [`Crawler::OTHER`].
    pub fn of_user_agent(ua: &str) -> Crawler {
        let lower = ua.to_ascii_lowercase();
        MARKERS
            .iter()
            .find(|(_, tokens)| tokens.iter().any(|t| lower.contains(t)))
            .map_or(Crawler::OTHER, |(c, _)| *c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_by_user_agent() {
        let cases = [
            (
                "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
                "google",
            ),
            (
                "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
                "bing",
            ),
            (
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2)",
                "ai",
            ),
            (
                "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
                "seo",
            ),
            ("curl/8.5.0", "tool"),
            (
                "Mozilla/5.0 (X11; Linux x86_64) HeadlessChrome/120.0 Safari/537.36",
                "headless",
            ),
            ("SomethingCrawler/1.0", "other"),
        ];
        for (ua, want) in cases {
            assert_eq!(Crawler::of_user_agent(ua).name(), want, "{ua}");
        }
    }

    #[test]
    fn names_round_trip_and_flag_compat() {
        for name in Crawler::names().filter(|&n| n != Crawler::BEHAVIOUR_NAME) {
            assert_eq!(Crawler::from_name(name).unwrap().name(), name);
        }
        assert_eq!(Crawler::from_flag(true), Crawler::OTHER);
        assert!(!Crawler::from_flag(false).is_bot());
        // The byte a `true` bool was in postcard.
        assert_eq!(postcard::to_allocvec(&Crawler::OTHER).unwrap(), [1]);
        assert_eq!(
            postcard::from_bytes::<Crawler>(&[1]).unwrap(),
            Crawler::OTHER
        );
        assert_eq!(Crawler::names().count(), NAMES.len());
    }
}
