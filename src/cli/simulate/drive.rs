//! The run itself: the simulated site's traffic played into an in-memory
//! embedded store on a simulated clock, with a look at the ranking after
//! every step.

use std::collections::HashMap;
use std::iter::Peekable;

use super::traffic::{Article, RawEvent, Rng, Source, generate, plan_articles, to_event};
use super::{SIM_START, SimulateArgs};
use crate::cli::{Progress, fmt_offset, runtime};
use crate::config::Config;
use crate::gate::{BotDetector, Identity};
use crate::model::{ArticleId, ArticleMeta, Counters, Event, HotQuery, RangeSpec, Verdict};
use crate::score::Models;
use crate::store::embedded::EmbeddedStore;
use crate::store::{Store, StoreSettings};

/// Events by where they came from and what the gate made of them.
pub(super) type Verdicts = HashMap<(Source, Verdict), u64>;

/// Articles still to publish: (offset, article), in time order.
type Publications = Peekable<std::vec::IntoIter<(i64, usize)>>;

/// One look at the ranking: every ranked article with its score, best first.
pub(super) struct Look {
    pub(super) offset: i64,
    pub(super) ranked: Vec<(usize, f64, Counters)>,
}

impl Look {
    pub(super) fn top(&self, n: usize) -> Vec<usize> {
        self.ranked.iter().take(n).map(|r| r.0).collect()
    }
    /// 1-based rank of an article, if ranked.
    pub(super) fn rank(&self, a: usize) -> Option<usize> {
        self.ranked.iter().position(|r| r.0 == a).map(|p| p + 1)
    }
    pub(super) fn score(&self, a: usize) -> Option<f64> {
        self.ranked.iter().find(|r| r.0 == a).map(|r| r.1)
    }
    pub(super) fn counters(&self, a: usize) -> Option<Counters> {
        self.ranked.iter().find(|r| r.0 == a).map(|r| r.2)
    }
}

/// The simulated site: its articles, every request of the run, and the
/// store and gate pieces the requests go through.
pub(super) struct Sim {
    pub(super) models: Models,
    pub(super) articles: Vec<Article>,
    pub(super) raw: Vec<RawEvent>,
    index: HashMap<ArticleId, usize>,
    identity: Identity,
    bots: BotDetector,
    pub(super) store: EmbeddedStore,
    pub(super) rt: tokio::runtime::Runtime,
    query: HotQuery,
}

impl Sim {
    /// Plans the articles and their traffic from the seed, and opens the
    /// store the configuration describes.
    pub(super) fn new(
        args: &SimulateArgs,
        config: &Config,
        range: RangeSpec,
    ) -> Result<Sim, String> {
        let settings = StoreSettings::from_config(config);
        let models = settings.models.clone();
        let duration = args.duration;
        let mut rng = Rng::new(args.seed ^ 0x5eed_0001);
        let mut articles = plan_articles(args.articles, duration, &mut rng)?;
        let raw = generate(&mut articles, duration, &mut rng);
        let index: HashMap<ArticleId, usize> = articles
            .iter()
            .enumerate()
            .map(|(i, a)| (a.id.clone(), i))
            .collect();

        let mut secret = [0u8; 16];
        secret[..8].copy_from_slice(&args.seed.to_le_bytes());
        let identity = Identity::new(secret);
        let bots = BotDetector::new(
            &config.gate.bot_patterns,
            config.gate.empty_user_agent_is_bot,
        )
        .map_err(|e| format!("gate.bot_patterns: {e}"))?;
        let store = EmbeddedStore::in_memory(settings.clone());
        let rt = runtime()?;
        let query = HotQuery::top(args.model, range, settings.ranking_cap);
        Ok(Sim {
            models,
            articles,
            raw,
            index,
            identity,
            bots,
            store,
            rt,
            query,
        })
    }

    /// The ranking `offset` seconds into the run.
    pub(super) fn look(&self, offset: i64) -> Result<Look, String> {
        let page = self
            .rt
            .block_on(self.store.hot(&self.query, SIM_START + offset))
            .map_err(|e| e.to_string())?;
        Ok(Look {
            offset,
            ranked: page
                .items
                .iter()
                .filter_map(|it| self.index.get(&it.id).map(|&i| (i, it.score, it.counters)))
                .collect(),
        })
    }

    /// Plays the whole run, `step` seconds at a time, and looks at the
    /// ranking after each step.
    pub(super) fn drive(&self, step: i64, duration: i64) -> Result<(Vec<Look>, Verdicts), String> {
        let mut pubs = self.publications();
        let mut verdicts = Verdicts::new();
        let mut looks: Vec<Look> = Vec::new();
        let mut progress = Progress::new();
        let mut next = 0usize;
        let mut t = 0i64;
        while t < duration {
            t = (t + step).min(duration);
            next = self.play_until(t, next, &mut pubs, &mut verdicts)?;
            looks.push(self.look(t)?);
            progress.tick(|secs| {
                format!(
                    "simulate: {} / {} simulated, {next} / {} events, {:.0} events/s",
                    fmt_offset(t),
                    fmt_offset(duration),
                    self.raw.len(),
                    next as f64 / secs.max(1e-9)
                )
            });
        }
        progress.finish();
        Ok((looks, verdicts))
    }

    /// Publications, in time order; those before the run happen at its start.
    fn publications(&self) -> Publications {
        let mut pubs: Vec<(i64, usize)> = self
            .articles
            .iter()
            .enumerate()
            .map(|(i, a)| (a.published.max(0), i))
            .collect();
        pubs.sort();
        pubs.into_iter().peekable()
    }

    /// Ingests the requests from `next` on that arrive before `t` seconds
    /// (publishing each article before its first event), then publishes
    /// the articles due before `t`. Returns the first request not sent.
    fn play_until(
        &self,
        t: i64,
        mut next: usize,
        pubs: &mut Publications,
        verdicts: &mut Verdicts,
    ) -> Result<usize, String> {
        let mut batch = Vec::new();
        let mut sources = Vec::new();
        while next < self.raw.len() && self.raw[next].arrival_ms < t * 1000 {
            let r = &self.raw[next];
            // Publish (PUT the article) before its first event.
            while let Some(&(p, i)) = pubs.peek() {
                if p * 1000 > r.arrival_ms {
                    break;
                }
                self.flush(&mut batch, &mut sources, verdicts)?;
                self.put(&self.articles[i])?;
                pubs.next();
            }
            batch.push(to_event(r, &self.identity, &self.bots));
            sources.push(r.source);
            if batch.len() >= 1000 {
                self.flush(&mut batch, &mut sources, verdicts)?;
            }
            next += 1;
        }
        self.flush(&mut batch, &mut sources, verdicts)?;
        while let Some(&(p, i)) = pubs.peek() {
            if p >= t {
                break;
            }
            self.put(&self.articles[i])?;
            pubs.next();
        }
        Ok(next)
    }

    /// Ingests `batch` and tallies the verdicts by source.
    fn flush(
        &self,
        batch: &mut Vec<Event>,
        sources: &mut Vec<Source>,
        verdicts: &mut Verdicts,
    ) -> Result<(), String> {
        if batch.is_empty() {
            return Ok(());
        }
        let now = batch.last().map_or(SIM_START, |e: &Event| e.ts);
        let outcomes = self
            .rt
            .block_on(self.store.ingest(std::mem::take(batch), now))
            .map_err(|e| e.to_string())?;
        for (o, s) in outcomes.into_iter().zip(sources.drain(..)) {
            if let Ok(o) = o {
                *verdicts.entry((s, o.verdict)).or_default() += 1;
            }
        }
        Ok(())
    }

    /// `PUT`s an article, as its site would on publishing it.
    fn put(&self, a: &Article) -> Result<(), String> {
        let meta = ArticleMeta {
            title: Some(format!("{} article", a.kind.as_str())),
            published_at: SIM_START + a.published,
            ..ArticleMeta::default()
        };
        self.rt
            .block_on(
                self.store
                    .put_article(a.id.clone(), meta, SIM_START + a.published.max(0)),
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
