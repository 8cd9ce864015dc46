//! The site's figures (`Stats` beyond its totals) against an oracle of
//! what the test sent: quarantine by article and crawler family for a
//! range, counted views by minute, and site-wide visitors (a HyperLogLog
//! union over the range's hours) within the sketch's error of the exact
//! distinct count.

use std::collections::{BTreeMap, HashSet};

use hotrank::crawler::Crawler;
use hotrank::model::Quarantine;

use super::*;

/// A small deterministic generator (no crate needed).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// What the test sent, summed as each figure should be.
#[derive(Default)]
struct Oracle {
    /// (hour, article) -> quarantine tallies.
    articles: BTreeMap<(i64, String), Quarantine>,
    /// (hour, family) -> bot events.
    crawlers: BTreeMap<(i64, &'static str), u64>,
    /// Counted views by minute.
    minutes: BTreeMap<i64, u64>,
    /// Visitors of counted views, by hour.
    visitors: BTreeMap<i64, HashSet<u128>>,
}

impl Oracle {
    fn record(&mut self, ev: &Event, v: Verdict) {
        let hour = ev.ts.div_euclid(3600);
        if v == Verdict::Counted {
            if ev.kind == EventType::View {
                *self.minutes.entry(ev.ts.div_euclid(60)).or_default() += 1;
                self.visitors.entry(hour).or_default().insert(ev.visitor);
            }
            return;
        }
        // Every article is published: quarantine is tallied on each.
        (self.articles.entry((hour, ev.article.as_str().to_string())))
            .or_default()
            .add(v, 1);
        if v == Verdict::Bot {
            let family = if ev.bot.is_bot() {
                ev.bot.name()
            } else {
                "behaviour"
            };
            *self.crawlers.entry((hour, family)).or_default() += 1;
        }
    }

    fn by_article(&self, first_hour: i64) -> Vec<(String, Quarantine)> {
        let mut sum: BTreeMap<String, Quarantine> = BTreeMap::new();
        for ((_, a), q) in self.articles.range((first_hour, String::new())..) {
            sum.entry(a.clone()).or_default().merge(q);
        }
        let mut all: Vec<_> = sum.into_iter().collect();
        all.sort_by(|(a, qa), (b, qb)| qb.total().cmp(&qa.total()).then_with(|| a.cmp(b)));
        all
    }

    fn by_crawler(&self, first_hour: i64) -> BTreeMap<&'static str, u64> {
        let mut sum = BTreeMap::new();
        for ((_, f), n) in self.crawlers.range((first_hour, "")..) {
            *sum.entry(*f).or_default() += n;
        }
        sum
    }

    fn visitors(&self, first_hour: i64) -> usize {
        let all: HashSet<u128> = (self.visitors.range(first_hour..))
            .flat_map(|(_, s)| s.iter().copied())
            .collect();
        all.len()
    }
}

pub async fn site_figures<F, Fut>(make: F)
where
    F: Fn(StoreSettings) -> Fut,
    Fut: Future<Output = Harness>,
{
    let h = make(StoreSettings {
        bot_articles_per_minute: 4,
        bot_quarantine_secs: 120,
        ..StoreSettings::default()
    })
    .await;
    let s = &*h.store;
    let arts: Vec<String> = (0..6).map(|i| format!("art{i}")).collect();
    for a in &arts {
        publish(s, a, T0 - 4 * 3600).await;
    }
    let families = [
        Crawler::of_user_agent("Googlebot/2.1"),
        Crawler::of_user_agent("curl/8"),
        Crawler::OTHER,
    ];
    let mut rnd = Lcg(7);
    let mut oracle = Oracle::default();
    // Three hours of traffic to T0, in batches of 40 events in time order.
    let (start, now) = (T0 - 3 * 3600 + 1, T0);
    let mut ts = start;
    let mut replay_key = 0u128;
    let mut n = 0u128;
    while ts <= now {
        let mut batch = Vec::new();
        n += 1;
        if n.is_multiple_of(10) {
            // A crawler reading every article from one id: the behaviour rule.
            batch.extend(arts.iter().map(|a| view(a, 5_000_000 + n, ts)));
        }
        for _ in 0..40 {
            let art = &arts[rnd.next(arts.len() as u64) as usize];
            // Visitors from a pool large enough for the sketch to estimate.
            let visitor = 1 + u128::from(rnd.next(2500));
            let mut ev = view(art, visitor, ts.min(now));
            match rnd.next(20) {
                0 => ev.bot = families[rnd.next(3) as usize],
                1 => ev.kind = EventType::Like,
                2 if replay_key > 0 => ev.event_id = Some(replay_key),
                3 => {
                    replay_key += 1;
                    ev.event_id = Some(replay_key);
                }
                _ => {}
            }
            batch.push(ev);
            ts += 3;
        }
        let at = batch.last().map(|e| e.ts).unwrap_or(now);
        let v = verdicts(s, batch.clone(), at).await;
        for (ev, v) in batch.iter().zip(v) {
            oracle.record(ev, v);
        }
    }
    let last_hour = now.div_euclid(3600);
    for hours in [2u32, 24] {
        let first = last_hour - i64::from(hours) + 1;
        let stats = s.stats(now, hours).await.expect("stats");
        let want = oracle.by_article(first);
        // Every article has held-back events, of every reason but rate limits.
        assert_eq!(want.len(), arts.len(), "{want:?}");
        let mut all = Quarantine::default();
        want.iter().for_each(|(_, q)| all.merge(q));
        assert!(all.0[0] > 0 && all.0[2] > 0 && all.0[3] > 0, "{all:?}");
        let got: Vec<(String, Quarantine)> = (stats.quarantine_by_article.iter())
            .map(|(id, q)| (id.as_str().to_string(), *q))
            .collect();
        assert_eq!(got, want, "quarantine by article over {hours} h");
        let crawlers: BTreeMap<&str, u64> = stats.quarantine_by_crawler.iter().copied().collect();
        let want = oracle.by_crawler(first);
        assert_eq!(want.len(), 4, "every family sent, and behaviour: {want:?}");
        assert_eq!(crawlers, want, "quarantine by crawler over {hours} h");
        let exact = oracle.visitors(first) as f64;
        let est = s.site_traffic(now, hours).await.expect("traffic").visitors as f64;
        // Redis's sketch: 16384 registers, standard error 0.81%; 3 sigma.
        let err = 3.0 * 0.0081 * exact;
        assert!(
            (est - exact).abs() <= err,
            "visitors {est} against exactly {exact} over {hours} h"
        );
    }
    // The last hour's views, minute by minute.
    let traffic = s.site_traffic(now, 1).await.expect("traffic");
    let last_min = now.div_euclid(60);
    let want: Vec<u64> = (last_min - 59..=last_min)
        .map(|m| oracle.minutes.get(&m).copied().unwrap_or(0))
        .collect();
    assert!(want.iter().filter(|&&n| n > 0).count() > 50, "{want:?}");
    assert_eq!(traffic.views_by_minute, want);
    // A minute later the window slides by one.
    let later = s.site_traffic(now + 60, 1).await.expect("traffic");
    assert_eq!(later.views_by_minute[..59], want[1..]);
    assert_eq!(later.views_by_minute[59], 0);
}

/// The embedded store keeps the site's figures over a restart: crawler
/// tallies and visitor sketches in its snapshot, the articles of each
/// hour rebuilt from theirs; the minutes hold what the log replays (the
/// events after the snapshot), as docs/api.md says.
#[tokio::test]
async fn embedded_site_figures_survive_a_restart() {
    use hotrank::store::embedded::{Durability, EmbeddedStore};
    use hotrank::store::wal::FsyncPolicy;

    let dir = tempfile::tempdir().unwrap();
    let d = Durability {
        dir: dir.path().to_path_buf(),
        fsync: FsyncPolicy::Always,
        segment_bytes: 1 << 20,
        snapshot_interval_secs: 3600,
        snapshot_every_records: 1 << 40,
        storage: hotrank::store::storage::Disk::shared(),
    };
    let s = StoreSettings::default();
    let (store, _) = EmbeddedStore::open(d.clone(), s.clone()).unwrap();
    publish(&store, "a", T0 - 3600).await;
    let google = Crawler::of_user_agent("Googlebot/2.1");
    let batch = |from: u128, at: Timestamp| -> Vec<Event> {
        (from..from + 300)
            .flat_map(|v| {
                let mut bot = view("a", v, at);
                bot.bot = google;
                [view("a", v, at), view("a", v, at), bot]
            })
            .collect()
    };
    // An hour before (its quarantine only in the snapshot), two minutes
    // before, the snapshot, one minute before (replayed from the log).
    verdicts(&store, batch(1, T0 - 3600), T0 - 3600).await;
    verdicts(&store, batch(1000, T0 - 120), T0 - 120).await;
    store.snapshot().await.unwrap();
    verdicts(&store, batch(2000, T0 - 60), T0 - 60).await;
    let before = store.stats(T0, 24).await.unwrap();
    let traffic = store.site_traffic(T0, 24).await.unwrap();
    assert_eq!(before.quarantine_by_crawler, [("google", 900)]);
    assert_eq!(before.quarantine_by_article[0].1.total(), 1800);
    assert_eq!(traffic.views_by_minute[57..], [300, 300, 0]);
    drop(store);
    let (store, report) = EmbeddedStore::open(d, s).unwrap();
    assert!(report.snapshot_seq.is_some());
    let after = store.stats(T0, 24).await.unwrap();
    let traffic_after = store.site_traffic(T0, 24).await.unwrap();
    assert_eq!(after.quarantine_by_article, before.quarantine_by_article);
    assert_eq!(after.quarantine_by_crawler, before.quarantine_by_crawler);
    assert_eq!(traffic_after.visitors, traffic.visitors);
    assert!(
        (880..=920).contains(&traffic.visitors),
        "{}",
        traffic.visitors
    );
    // Before the snapshot: gone; after it: replayed.
    assert_eq!(traffic_after.views_by_minute[57..], [0, 300, 0]);
}
