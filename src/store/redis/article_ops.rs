//! The article operations (PUT, post, vote, delete) as script calls, run
//! plainly or journaled (ops.rs).

use super::{RedisStore, bad_reply, meta_pairs, ops, store_err};
use crate::model::{ArticleId, ArticleMeta, Counters, Timestamp, VoteDirection, VoteOutcome};
use crate::store::{PutOutcome, StoreError, Voter};

/// The article operations, run plainly or journaled (ops.rs).
impl RedisStore {
    /// `delete.lua` on article `id`, run as `run` says (ops.rs).
    pub(crate) async fn delete_run(
        &self,
        id: &ArticleId,
        run: &ops::OpRun<'_>,
    ) -> Result<(bool, Option<ops::OpStamp>), StoreError> {
        let (k, sk) = (&self.keys, self.keys.of(id));
        let keys = [
            k.meta(id),
            sk.newest(),
            sk.newest_by(),
            sk.changes_seq(),
            sk.changes(),
            k.ledger(id, "archive:dirty"),
        ];
        let (done, stamp): (i64, _) = self
            .op_eval(
                ops::OpKind::Delete,
                &keys,
                &[self.keys.prefix.as_bytes(), id.as_str().as_bytes()],
                run,
            )
            .await?;
        Ok((done == 1, stamp))
    }

    /// `put.lua`, run as `run` says (ops.rs).
    pub(crate) async fn put_run(
        &self,
        id: &ArticleId,
        meta: &ArticleMeta,
        run: &ops::OpRun<'_>,
    ) -> Result<(PutOutcome, Option<ops::OpStamp>), StoreError> {
        let published = meta.published_at.to_string();
        let pairs = meta_pairs(meta);
        let mut args: Vec<&[u8]> = vec![
            self.keys.prefix.as_bytes(),
            id.as_str().as_bytes(),
            published.as_bytes(),
        ];
        for (k, v) in &pairs {
            args.push(k.as_bytes());
            args.push(v.as_bytes());
        }
        let (k, sk) = (&self.keys, self.keys.of(id));
        let keys = [
            k.meta(id),
            k.ledger(id, "stats:articles"),
            sk.newest(),
            sk.newest_by(),
            sk.changes_seq(),
            sk.changes(),
            k.ledger(id, "archive:dirty"),
        ];
        self.seed_claim(id).await?;
        let before = self.seed_groups_before(id).await?;
        let (created, stamp): (i64, _) = self.op_eval(ops::OpKind::Put, &keys, &args, run).await?;
        self.seed_groups_after(id, before, &meta.groups).await?;
        Ok((
            if created == 1 {
                PutOutcome::Created
            } else {
                PutOutcome::Updated
            },
            stamp,
        ))
    }

    /// `post.lua` (not for the seed layout), run as `run` says (ops.rs).
    pub(crate) async fn post_run(
        &self,
        mut meta: ArticleMeta,
        poster: Voter<'_>,
        now: Timestamp,
        run: &ops::OpRun<'_>,
    ) -> Result<(ArticleId, Option<ops::OpStamp>), StoreError> {
        let poster = poster.hash;
        meta.published_at = now;
        let pairs = meta_pairs(&meta);
        let published = now.to_string();
        let poster = format!("{poster:032x}");
        let window = self.settings.models.votes.window_secs().to_string();
        // A call the cluster client re-sends answers the first one's id.
        let request = format!("{:032x}", rand::random::<u128>());
        let per = self.settings.models.votes.per_vote.to_string();
        let mut args: Vec<&[u8]> = vec![
            self.keys.prefix.as_bytes(),
            published.as_bytes(),
            poster.as_bytes(),
            window.as_bytes(),
            request.as_bytes(),
            per.as_bytes(),
        ];
        for (k, v) in &pairs {
            args.push(k.as_bytes());
            args.push(v.as_bytes());
        }
        if self.keys.spans_slots() {
            self.script_epoch().await?;
            return self.post_over_slots(&args, &request).await;
        }
        // The script picks the id after the counter's, skipping ids taken
        // otherwise; it may only touch the candidates declared here, and
        // answers '' (writing nothing) when all of them are taken.
        let k = &self.keys;
        let mut candidates = 8;
        for _ in 0..6 {
            let mut con = self.con();
            let cur: Option<i64> = redis::cmd("GET")
                .arg(k.post_counter())
                .query_async(&mut con)
                .await
                .map_err(store_err)?;
            let cur = cur.unwrap_or(0);
            let mut keys = vec![k.post_request(&request), k.post_counter()];
            let mut shards = std::collections::BTreeSet::new();
            for n in cur + 1..=cur + candidates {
                let id = ArticleId::parse(&n.to_string()).map_err(|_| bad_reply("post"))?;
                keys.push(k.meta(&id));
                keys.push(k.voted(&id));
                keys.push(k.counters(&id));
                for name in ["stats:articles", "time:", "score:", "archive:dirty"] {
                    keys.push(k.ledger(&id, name));
                }
                shards.insert(k.shard_index(&id));
            }
            keys.sort();
            keys.dedup();
            // The shard keys of every candidate's shard.
            for sk in shards.into_iter().map(|i| k.shard(i)) {
                keys.extend([sk.newest(), sk.newest_by(), sk.changes_seq(), sk.changes()]);
            }
            let (id, stamp): (String, _) =
                self.op_eval(ops::OpKind::Post, &keys, &args, run).await?;
            if !id.is_empty() {
                let id = ArticleId::parse(&id).map_err(|_| bad_reply("post"))?;
                return Ok((id, stamp));
            }
            candidates *= 8;
        }
        Err(StoreError::Unavailable(
            "redis: post ids kept being taken; try again".into(),
        ))
    }

    /// A post over a site spread over slots (no journal: config refuses
    /// a pipeline with shards): `post_id.lua` reserves the next id in the
    /// site's slot, `post_at.lua` creates the article in its shard's slot
    /// unless that id is taken (then the next one). Each call is one slot
    /// and answers a re-sent call as the first one (by `request`); a
    /// request whose second call never ran leaves its id unused.
    async fn post_over_slots(
        &self,
        args: &[&[u8]],
        request: &str,
    ) -> Result<(ArticleId, Option<ops::OpStamp>), StoreError> {
        let k = &self.keys;
        let reserve_keys = [k.post_reserved(request), k.post_counter()];
        let mut taken = String::new();
        for _ in 0..1000 {
            let id: String = self
                .eval(&self.scripts.post_id, &reserve_keys, &[taken.as_bytes()])
                .await?;
            let aid = ArticleId::parse(&id).map_err(|_| bad_reply("post"))?;
            let keys = k.post_at_keys(&aid, request);
            let mut all: Vec<&[u8]> = args[..6].to_vec();
            all.push(id.as_bytes());
            all.extend_from_slice(&args[6..]);
            let made: String = self.eval(&self.scripts.post_at, &keys, &all).await?;
            if !made.is_empty() {
                return Ok((aid, None));
            }
            taken = id;
        }
        Err(StoreError::Unavailable(
            "redis: post ids kept being taken; try again".into(),
        ))
    }

    /// `vote.lua` (not for the seed layout), run as `run` says (ops.rs).
    pub(crate) async fn vote_run(
        &self,
        id: &ArticleId,
        user: Voter<'_>,
        direction: VoteDirection,
        now: Timestamp,
        run: &ops::OpRun<'_>,
    ) -> Result<(VoteOutcome, Option<ops::OpStamp>), StoreError> {
        let user = user.hash;
        let votes = &self.settings.models.votes;
        let user = format!("{user:032x}");
        let (now_s, window, per) = (
            now.to_string(),
            votes.window_secs().to_string(),
            votes.per_vote.to_string(),
        );
        let dir: &[u8] = match direction {
            VoteDirection::Up => b"u",
            VoteDirection::Down => b"d",
        };
        let allow: &[u8] = if votes.allow_down_votes { b"1" } else { b"0" };
        let args: Vec<&[u8]> = vec![
            self.keys.prefix.as_bytes(),
            id.as_str().as_bytes(),
            user.as_bytes(),
            dir,
            now_s.as_bytes(),
            window.as_bytes(),
            allow,
            per.as_bytes(),
        ];
        let (k, sk) = (&self.keys, self.keys.of(id));
        let keys = [
            k.meta(id),
            k.voted(id),
            k.counters(id),
            k.ledger(id, "time:"),
            k.ledger(id, "score:"),
            sk.changes_seq(),
            sk.changes(),
            k.ledger(id, "archive:dirty"),
            k.ledger(id, "archive:evicted"),
        ];
        let (mut r, mut stamp): (Vec<i64>, _) =
            self.op_eval(ops::OpKind::Vote, &keys, &args, run).await?;
        if r.as_slice() == [-5] {
            // Evicted: back from the archive first (vote.lua wrote nothing).
            self.restore(std::slice::from_ref(id), now).await?;
            (r, stamp) = self.op_eval(ops::OpKind::Vote, &keys, &args, run).await?;
        }
        let outcome = match r.as_slice() {
            [-1] => VoteOutcome::UnknownArticle,
            [-2] => VoteOutcome::DownVotesDisabled,
            [-3] => VoteOutcome::Closed,
            [-4] => VoteOutcome::AlreadyVoted,
            &[ups, downs, published] => {
                let c = Counters {
                    ups: ups.max(0) as u64,
                    downs: downs.max(0) as u64,
                    ..Counters::default()
                };
                VoteOutcome::Counted {
                    ups: c.ups,
                    downs: c.downs,
                    score: votes.score(&c, published),
                }
            }
            _ => return Err(bad_reply("vote")),
        };
        Ok((outcome, stamp))
    }
}
