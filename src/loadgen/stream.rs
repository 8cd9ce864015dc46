//! A realistic, reproducible event stream: Zipf-like article popularity, a
//! pool of visitors who come back, a share of bot user agents, floods from a
//! single IP, and a mix of event types.

/// A small, fast, seedable generator (SplitMix64): the stream must be the
/// same for hotrank and for the seed script, and cheap to draw from.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// Uniform in `lo..=hi` (the same draw as `below`).
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// Event types the generator can mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    View,
    Dwell,
    Like,
    Comment,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::View => "view",
            Kind::Dwell => "dwell",
            Kind::Like => "like",
            Kind::Comment => "comment",
        }
    }
}

/// What the stream looks like.
#[derive(Debug, Clone)]
pub struct StreamSpec {
    pub articles: u64,
    /// Zipf exponent of article popularity (0: uniform).
    pub zipf: f64,
    pub visitors: u64,
    /// Probability that an event repeats the previous (visitor, article)
    /// pair of this stream: a reload inside the dedupe window.
    pub repeat_rate: f64,
    /// Share of events sent with a crawler's user agent.
    pub bot_share: f64,
    /// Share of events sent from one flooding IP.
    pub flood_share: f64,
    /// Weights of view, dwell, like, comment.
    pub mix: [f64; 4],
    /// Spread event times over this many seconds before "now" (0: now).
    pub spread_secs: u64,
}

impl Default for StreamSpec {
    fn default() -> Self {
        StreamSpec {
            articles: 10_000,
            zipf: 1.0,
            visitors: 1_000_000,
            repeat_rate: 0.1,
            bot_share: 0.02,
            flood_share: 0.01,
            mix: [1.0, 0.0, 0.0, 0.0],
            spread_secs: 0,
        }
    }
}

/// One generated event.
#[derive(Debug, Clone, PartialEq)]
pub struct Gen {
    pub kind: Kind,
    pub article: u64,
    pub visitor: u64,
    pub bot: bool,
    /// The flooding IP rather than the visitor's own.
    pub flood: bool,
    pub seconds: u32,
    /// Seconds before now (for spread streams).
    pub age: u64,
}

/// Cumulative popularity of articles, for sampling by binary search.
pub struct Popularity {
    cdf: Vec<f64>,
}

impl Popularity {
    pub fn new(articles: u64, zipf: f64) -> Self {
        let mut cdf = Vec::with_capacity(articles as usize);
        let mut total = 0.0;
        for rank in 1..=articles.max(1) {
            total += 1.0 / (rank as f64).powf(zipf);
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        Popularity { cdf }
    }

    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1) as u64
    }
}

/// An endless stream for one connection.
pub struct Stream<'a> {
    spec: &'a StreamSpec,
    pop: &'a Popularity,
    rng: Rng,
    last: Option<(u64, u64)>,
}

impl<'a> Stream<'a> {
    pub fn new(spec: &'a StreamSpec, pop: &'a Popularity, seed: u64) -> Self {
        Stream {
            spec,
            pop,
            rng: Rng::new(seed),
            last: None,
        }
    }

    pub fn next_event(&mut self) -> Gen {
        let s = self.spec;
        let (article, visitor) = match self.last {
            Some(pair) if self.rng.unit() < s.repeat_rate => pair,
            _ => (
                self.pop.sample(&mut self.rng),
                self.rng.below(s.visitors.max(1)),
            ),
        };
        self.last = Some((article, visitor));
        let total: f64 = s.mix.iter().sum();
        let mut pick = self.rng.unit() * total;
        let mut kind = Kind::View;
        for (i, k) in [Kind::View, Kind::Dwell, Kind::Like, Kind::Comment]
            .into_iter()
            .enumerate()
        {
            if pick < s.mix[i] {
                kind = k;
                break;
            }
            pick -= s.mix[i];
        }
        Gen {
            kind,
            article,
            visitor,
            bot: self.rng.unit() < s.bot_share,
            flood: self.rng.unit() < s.flood_share,
            seconds: if kind == Kind::Dwell {
                5 + self.rng.below(120) as u32
            } else {
                0
            },
            age: if s.spread_secs > 0 {
                self.rng.below(s.spread_secs)
            } else {
                0
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_skewed() {
        let spec = StreamSpec {
            articles: 1000,
            zipf: 1.1,
            ..StreamSpec::default()
        };
        let pop = Popularity::new(spec.articles, spec.zipf);
        let a: Vec<Gen> = {
            let mut s = Stream::new(&spec, &pop, 7);
            (0..100).map(|_| s.next_event()).collect()
        };
        let b: Vec<Gen> = {
            let mut s = Stream::new(&spec, &pop, 7);
            (0..100).map(|_| s.next_event()).collect()
        };
        assert_eq!(a, b);
        let mut s = Stream::new(&spec, &pop, 8);
        let top = (0..10_000).filter(|_| s.next_event().article < 10).count();
        assert!(
            top > 2_000,
            "the top 1% of articles get a large share: {top}"
        );
    }
}
