//! The key table: one row ([`KeySpec`]) for every key the Redis store
//! writes.

use super::key_spec::{KeySpec, Slot, Ttl};

macro_rules! key_spec {
    ($section:expr, $pattern:expr, $regex:expr, $kind:expr, $holds:expr, $ttl:expr, $ttl_text:expr, $writer:expr) => {
        KeySpec {
            section: $section,
            pattern: $pattern,
            regex: $regex,
            kind: $kind,
            holds: $holds,
            ttl: $ttl,
            ttl_text: $ttl_text,
            writer: $writer,
        }
    };
}

/// Every key the Redis store writes.
pub const KEY_TABLE: &[KeySpec] = &[
    key_spec!(
        "seed000",
        "counter:views:<id>",
        r"^counter:views:[A-Za-z0-9_-]{1,64}$",
        "string",
        "lifetime PV (counted views only), `INCRBY`",
        Ttl::None,
        "none",
        "ingest.lua"
    ),
    key_spec!(
        "seed000",
        "hll:uv:<id>",
        r"^hll:uv:[A-Za-z0-9_-]{1,64}$",
        "string",
        "lifetime UV sketch (HLL); `PFADD` of exactly the 16 bytes `Event::visitor_element()`, so its byte image equals the embedded store's sketch",
        Ttl::None,
        "none",
        "ingest.lua"
    ),
    key_spec!(
        "seed000",
        "meta:article:<id>",
        r"^meta:article:[A-Za-z0-9_-]{1,64}$",
        "hash",
        "`publishedAt` (Unix s), `known` (1 = created by `PUT`), `deleted` (1/0), and when set `title`, `url`, `author`, `category`, `kind`, `summary`, `cover`, `groups` (JSON array); with a pipeline journal, `ops`: how many article operations (PUT, post, vote, delete) changed it, the number the journal and the archive's position record (docs/design.md, \"Disaster recovery\")",
        Ttl::None,
        "none",
        "put.lua, post.lua, delete.lua, ingest.lua (first counted event); vote.lua (`ops`)"
    ),
    key_spec!(
        "seed000",
        "hot:score",
        r"^hot:score$",
        "zset",
        "the default ranking (gravity, `range=72h`, no filter): member = article id, score = gravity score (an upper bound, see Freshness); seed layout: the exact lifetime gravity scores of the top 1000, rewritten every `seed_refresh_secs` (hotrank's ranking is then `hot:gravity:72h:all`)",
        Ttl::None,
        "none",
        "writeback.lua; seed.rs (seed layout)"
    ),
    key_spec!(
        "seed003",
        "article:",
        r"^article:$",
        "string",
        "the post counter (`INCR`); ids already taken are skipped; seed layout: kept at or past every numeric id hotrank creates (`PUT`, a first event), so the site's `INCR` never takes one",
        Ttl::None,
        "none",
        "post.lua; seed_post.lua, seed_claim.lua (seed layout)"
    ),
    key_spec!(
        "seed003",
        "post:req:<hex>",
        r"^post:req:[0-9a-f]{32}$",
        "string",
        "the id one post.lua call created, so a call re-sent after a lost reply creates nothing twice (over a split site: `post_at.lua`'s, per shard)",
        Ttl::Expires,
        "2 min",
        "post.lua, post_at.lua"
    ),
    key_spec!(
        "seed003",
        "post:id:<hex>",
        r"^post:id:[0-9a-f]{32}$",
        "string",
        "over a split site only: the id the first stage of one post reserved (`post_id.lua`), so a re-sent call reserves nothing twice",
        Ttl::Expires,
        "2 min",
        "post_id.lua"
    ),
    key_spec!(
        "seed003",
        "voted:<id>",
        r"^voted:[A-Za-z0-9_-]{1,64}$",
        "set",
        "who voted (32 hex digits of the keyed user hash; seed layout: `user:<userId>` as sent), the poster included",
        Ttl::Expires,
        "until voting closes",
        "post.lua, vote.lua"
    ),
    key_spec!(
        "seed003",
        "time:",
        r"^time:$",
        "zset",
        "posted or voted articles (seed layout: member `article:<id>`), score = `publishedAt`",
        Ttl::None,
        "none",
        "post.lua, vote.lua"
    ),
    key_spec!(
        "seed003",
        "score:",
        r"^score:$",
        "zset",
        "the seed's vote score `publishedAt + 432·(ups − downs)` (seed layout: member `article:<id>`, and the votes ranking itself)",
        Ttl::None,
        "none",
        "post.lua, vote.lua"
    ),
    key_spec!(
        "layouts",
        "article:<id>",
        r"^article:[A-Za-z0-9_-]{1,64}$",
        "hash",
        "seed layout only: seed 003's `title`, `link`, `poster` (`user:<userId>`), `time` (publishedAt), `votes` (the poster's included)",
        Ttl::None,
        "none",
        "seed_post.lua, seed_vote.lua (an article hotrank knows, on its first vote)"
    ),
    key_spec!(
        "layouts",
        "group:<name>",
        r"^group:.+$",
        "set",
        "seed layout only: members `article:<id>` of the group (the name as given)",
        Ttl::None,
        "none",
        "seed_post.lua, seed.rs (`PUT` and group changes move the member, DELETE removes it)"
    ),
    key_spec!(
        "layouts",
        r"cnt:pv\|uv\|dur\|like\|cmt:<id>:<yyyyMMddHH>",
        r"^cnt:(pv|uv|dur|like|cmt):[A-Za-z0-9_-]{1,64}:[0-9]{10}$",
        "string",
        "seed layout only: seed 001's hourly counts (UTC hour of the event): PV, UV (the hour's `PFCOUNT`), dwell seconds, likes, comments",
        Ttl::Expires,
        "hour end + 7 days",
        "seed_apply.lua (ingest)"
    ),
    key_spec!(
        "layouts",
        "hot:articles",
        r"^hot:articles$",
        "zset",
        "seed layout only: seed 001's ranking, member = id, score = the weighted score over the last 24 h, for every live article active in them",
        Ttl::None,
        "none",
        "seed.rs (every `seed_refresh_secs`)"
    ),
    key_spec!(
        "layouts",
        "hot:articles:<category>",
        r"^hot:articles:.+$",
        "zset",
        "seed layout only: the same for one category (as given)",
        Ttl::None,
        "none",
        "seed.rs (every `seed_refresh_secs`)"
    ),
    key_spec!(
        "layouts",
        "seed:hot:categories",
        r"^seed:hot:categories$",
        "set",
        "seed layout only: the categories whose `hot:articles:<category>` the last refresh wrote (the next refresh deletes those it no longer writes)",
        Ttl::None,
        "none",
        "seed.rs (every `seed_refresh_secs`)"
    ),
    key_spec!(
        "layouts",
        "<yyyy-MM-dd>",
        r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
        "zset",
        "seed layout only: seed 004's clicks of one UTC day, member = id, score = counted views",
        Ttl::Expires,
        "day end + `retention.hourly_days` + 1 day",
        "seed_apply.lua (ingest)"
    ),
    key_spec!(
        "counters",
        "counter:article:<id>",
        r"^counter:article:[A-Za-z0-9_-]{1,64}$",
        "hash",
        "lifetime `likes`, `comments`, `favorites`, `shares`, `dwell_s`, `dwell_n`, votes `ups`, `downs`, quarantine tallies `q_dup`, `q_rl`, `q_bot`, `q_rep`",
        Ttl::None,
        "none",
        "ingest.lua, vote.lua, post.lua (the poster's vote)"
    ),
    key_spec!(
        "counters",
        "bucket:h:<id>:<hour>",
        r"^bucket:h:[A-Za-z0-9_-]{1,64}:-?[0-9]+$",
        "hash",
        "the hour's `pv`, `likes`, `comments`, `favorites`, `shares`, `dwell_s`, `dwell_n`, `q_dup`, `q_rl`, `q_bot`, `q_rep`",
        Ttl::Expires,
        "hour end + `redis.hourly_days` + 1 day",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "hll:uv:h:<id>:<hour>",
        r"^hll:uv:h:[A-Za-z0-9_-]{1,64}:-?[0-9]+$",
        "string",
        "the hour's UV sketch",
        Ttl::Expires,
        "as its bucket (set after the `PFADD` that creates it)",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "hll:net:h:<id>:<hour>",
        r"^hll:net:h:[A-Za-z0-9_-]{1,64}:-?[0-9]+$",
        "string",
        "only under `[review] mode = \"suspicious\"`: the hour's sketch (HLL) of the network blocks (/24, /64) of its counted views whose block is known; `PFADD` of the block's keyed hash as 16 hex digits (no address is stored)",
        Ttl::Expires,
        "as its hourly bucket (`EXPIRE` after each `PFADD`)",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "hll:netuv:h:<id>:<hour>",
        r"^hll:netuv:h:[A-Za-z0-9_-]{1,64}:-?[0-9]+$",
        "string",
        "only under `[review] mode = \"suspicious\"`: the hour's sketch of the visitors of those views (the same 16 bytes as `hll:uv:h`)",
        Ttl::Expires,
        "as its hourly bucket (`EXPIRE` after each `PFADD`)",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "bucket:d:<id>:<day>",
        r"^bucket:d:[A-Za-z0-9_-]{1,64}:-?[0-9]+$",
        "hash",
        "the day's counters (no quarantine)",
        Ttl::Expires,
        "day end + `retention.hourly_days` + 1 day",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "hll:uv:d:<id>:<day>",
        r"^hll:uv:d:[A-Za-z0-9_-]{1,64}:-?[0-9]+$",
        "string",
        "the day's UV sketch",
        Ttl::Expires,
        "as its bucket (set after the `PFADD` that creates it)",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "active:h:<hour>",
        r"^active:h:-?[0-9]+$",
        "set",
        "ids with a counted event in the hour (ranking builds)",
        Ttl::Expires,
        "as hourly buckets",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "active:d:<day>",
        r"^active:d:-?[0-9]+$",
        "set",
        "ids with a counted event in the day",
        Ttl::Expires,
        "as daily buckets",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "articles:new",
        r"^articles:new$",
        "zset",
        "live (not deleted) articles, score = `publishedAt` (`GET /api/new`; `ZCARD` = live articles)",
        Ttl::None,
        "none",
        "put/post/delete/ingest.lua"
    ),
    key_spec!(
        "counters",
        "articles:new:by",
        r"^articles:new:by$",
        "zset",
        "live articles with a category, kind or group, one member per value: `c`/`k`/`g`, the value's byte length, `:`, the value, 9999999999999 − `publishedAt` (13 digits), the id; score 0 (`GET /api/new` with a filter reads one value's range, facets.lua); the member `~filled` marks it filled for articles written before it existed",
        Ttl::None,
        "none",
        "put/post/delete.lua"
    ),
    key_spec!(
        "counters",
        "stats:articles",
        r"^stats:articles$",
        "string",
        "articles ever registered (deleted ones included): what `max_articles` bounds",
        Ttl::None,
        "none",
        "put/post/ingest.lua, import"
    ),
    key_spec!(
        "counters",
        "stats:counted",
        r"^stats:counted$",
        "string",
        "counted events, all articles",
        Ttl::None,
        "none",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "stats:quarantine",
        r"^stats:quarantine$",
        "hash",
        "`q_dup`, `q_rl`, `q_bot`, `q_rep` totals",
        Ttl::None,
        "none",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "stats:quarantine:h:<hour>",
        r"^stats:quarantine:h:-?[0-9]+$",
        "hash",
        "the same per hour",
        Ttl::Expires,
        "hour end + retention + 1 day",
        "ingest.lua"
    ),
    key_spec!(
        "counters",
        "stats:quarantine:a:h:<hour>",
        r"^stats:quarantine:a:h:-?[0-9]+$",
        "zset",
        "the hour's most quarantined articles: member = `<reason>:<id>` (`q_dup`, `q_rl`, `q_bot`, `q_rep`), score = events; at most 400 members (the fewest dropped), written only for quarantined events on existing articles",
        Ttl::Expires,
        "hour end + retention + 1 day",
        "totals.lua"
    ),
    key_spec!(
        "counters",
        "stats:crawler:h:<hour>",
        r"^stats:crawler:h:-?[0-9]+$",
        "hash",
        "the hour's `bot` verdicts by crawler family (field = family, src/crawler.rs; `behaviour` for the behaviour rule's)",
        Ttl::Expires,
        "hour end + retention + 1 day",
        "totals.lua"
    ),
    key_spec!(
        "counters",
        "stats:views:m:<minute>",
        r"^stats:views:m:-?[0-9]+$",
        "string",
        "counted views in the minute (minute = ts ÷ 60): the dashboard's realtime panel",
        Ttl::Expires,
        "minute end + 1 hour",
        "totals.lua"
    ),
    key_spec!(
        "counters",
        "hll:site:h:<hour>",
        r"^hll:site:h:-?[0-9]+$",
        "string",
        "the hour's site-wide visitors sketch (counted views); a range's visitors are one `PFCOUNT` over its hours",
        Ttl::Expires,
        "hour end + retention + 1 day",
        "totals.lua"
    ),
    key_spec!(
        "counters",
        "stats:cat:h:<hour>",
        r"^stats:cat:h:-?[0-9]+$",
        "hash",
        "counted events in the hour by the article's category when counted (field = category, `\"\"` for none): `scale=category` reads the hours of the window's last UTC day; one copy per shard when the site spans slots (as `archive:dirty`)",
        Ttl::Expires,
        "end of the next UTC day",
        "apply.lua"
    ),
    key_spec!(
        "counters",
        "stats:cat:d:<day>",
        r"^stats:cat:d:-?[0-9]+$",
        "hash",
        "counted events in the UTC day by the article's category when counted (as `stats:cat:h:<hour>`): `scale=category` reads the window's 29 whole days from these",
        Ttl::Expires,
        "day end + 30 days",
        "apply.lua"
    ),
    key_spec!(
        "gate",
        "gate:eid:<slot>",
        r"^gate:eid:-?[0-9]+$",
        "hash",
        "field = eventId hash (32 hex digits), value = arrival second (gate clock), for **counted** events only (refused ones leave nothing); slot = gate clock ÷ `gate.event_id_ttl_secs`",
        Ttl::Expires,
        "end of the next slot",
        "ingest.lua"
    ),
    key_spec!(
        "gate",
        "gate:dd:<id>:<k>:<vhex>",
        r"^gate:dd:[A-Za-z0-9_-]{1,64}:[vlfs]:[0-9a-f]{32}$",
        "string",
        "last counted event time of (article, visitor, kind `v`/`l`/`f`/`s`): the dedupe window",
        Ttl::Expires,
        "window + 1 h",
        "ingest.lua"
    ),
    key_spec!(
        "gate",
        "gate:rl:v:<slot>",
        r"^gate:rl:v:-?[0-9]+$",
        "hash",
        "field = visitor (32 hex digits), value = its sliding rate log (its last N admission times in ms, 15-digit fixed width, oldest first), then a bar (`\\|`) and `<ms>,<id>;` per article it viewed in the last 60 s (the behaviour rule); slot = gate clock ÷ 120 s",
        Ttl::Expires,
        "end of the next slot",
        "ingest.lua"
    ),
    key_spec!(
        "gate",
        "gate:rl:ip:<slot>",
        r"^gate:rl:ip:-?[0-9]+$",
        "hash",
        "field = client IP hash (16 hex digits), value = its rate log; slot = gate clock ÷ 120 s",
        Ttl::Expires,
        "end of the next slot",
        "ingest.lua"
    ),
    key_spec!(
        "gate",
        "gate:bot:<slot>",
        r"^gate:bot:-?[0-9]+$",
        "hash",
        "field = visitor quarantined by the behaviour rule, value = until when (rate clock, ms); slot = gate clock ÷ `gate.bot_quarantine_secs`",
        Ttl::Expires,
        "end of the next slot",
        "ingest.lua"
    ),
    key_spec!(
        "gate",
        "gate:time",
        r"^gate:time$",
        "hash",
        "the site's gate clock, which arrival (rate limits, the behaviour rule, eventIds) and the gate's slots follow: `wall` = Redis's `TIME` at the last gate call (ms), `at` = the gate time it gave (ms; advanced by the wall's progress, never back); `source` = `node` only where tests that simulate time make the gate follow the nodes' clocks",
        Ttl::None,
        "none",
        "ingest.lua, pipe_filter.lua (gate_clock.lua)"
    ),
    key_spec!(
        "gate",
        "gate:batch:<hex>",
        r"^gate:batch:[0-9a-f]{32}$",
        "string",
        "the answer of one ingest.lua call (verdicts), so a call retried after a lost reply applies nothing twice",
        Ttl::Expires,
        "2 min",
        "ingest.lua"
    ),
    key_spec!(
        "gate",
        "gate:out:<k>:<hex>",
        r"^gate:out:[0-9]{1,3}:[0-9a-f]{32}$",
        "string",
        "over a split site only: shard `k`'s outbox entry of one batch (its counted events, quarantine tallies and new articles, MessagePack), written by the gate stage, removed once the shard's count stage ran",
        Ttl::None,
        "none (removed after the count stage, or by the sweeper)",
        "gate_stage.lua; split.rs removes it"
    ),
    key_spec!(
        "gate",
        "gate:outbox",
        r"^gate:outbox$",
        "zset",
        "over a split site only: pending outbox entries, member `<k>:<batch>`, score = the gate stage's `now`; the sweeper applies those older than 5 s",
        Ttl::None,
        "none",
        "gate_stage.lua; split.rs"
    ),
    key_spec!(
        "gate",
        "gate:done:<hex>",
        r"^gate:done:[0-9a-f]{32}$",
        "string",
        "over a split site only, in each shard's slot: the batch's count stage ran there (it runs once)",
        Ttl::Expires,
        "1 day",
        "count_stage.lua"
    ),
    key_spec!(
        "rankings",
        "hot:<model>:<range>:<filter>",
        r"^hot:[a-z]+(\.[0-9a-z]+)*:[0-9a-z]+:(all|[0-9a-f]{16})$",
        "zset",
        "one ranking: member = id, score = an upper bound of its score (exact for the entries the last query visited); `<model>` = the model's name and its parameters (`gravity.hl6h`: `decay=halflife&halfLife=6h`; `rising.b24h.m5`: `baseline=24h&min=5`, its `window` the `<range>`; `.cat.d<day>` after them: `scale=category`, the ranking of that UTC day); `<filter>` = `all` or a 64-bit hash of category/kind/group",
        Ttl::Expires,
        "1 h unused",
        "writeback.lua"
    ),
    key_spec!(
        "rankings",
        "hot:score:state",
        r"^hot:score:state$",
        "hash",
        "`seq` (change seq the ranking has taken in), `now` (time of its newest scores)",
        Ttl::None,
        "none",
        "writeback.lua"
    ),
    key_spec!(
        "rankings",
        "hot:<model>:<range>:<filter>:state",
        r"^hot:[a-z]+(\.[0-9a-z]+)*:[0-9a-z]+:(all|[0-9a-f]{16}):state$",
        "hash",
        "the same for another ranking",
        Ttl::Expires,
        "as its ranking",
        "writeback.lua"
    ),
    key_spec!(
        "rankings",
        "<ranking>:build:<hex>",
        r"^hot:(score|[a-z]+(\.[0-9a-z]+)*:[0-9a-z]+:(all|[0-9a-f]{16})):build:[0-9a-f]{16}$",
        "zset",
        "a rebuild of the ranking `<ranking>` in progress (one per rebuild): its entries gathered over several calls, renamed over the ranking by the last",
        Ttl::Expires,
        "10 min (an abandoned rebuild)",
        "writeback.lua"
    ),
    key_spec!(
        "rankings",
        "<ranking>:rebuilding",
        r"^hot:(score|[a-z]+(\.[0-9a-z]+)*:[0-9a-z]+:(all|[0-9a-f]{16})):rebuilding$",
        "string",
        "a token of the node rebuilding the ranking `<ranking>` (`SET NX`): other nodes' queries that need the same rebuild wait for it (at most 2 min), then walk what it built",
        Ttl::Expires,
        "10 s, renewed every 3 s while the rebuild runs; given back by its node when the rebuild ends (or at its next claim or shutdown, if Redis was away)",
        "rank.rs (`Claim`)"
    ),
    key_spec!(
        "rankings",
        "hot:index",
        r"^hot:index$",
        "set",
        "names of live rankings (at most `rankings.max_live`; the least recently used is dropped)",
        Ttl::None,
        "none",
        "writeback.lua, maintenance"
    ),
    key_spec!(
        "rankings",
        "changes",
        r"^changes$",
        "zset",
        "member = article id, score = seq of its latest change (counted event, `PUT`, delete, vote)",
        Ttl::None,
        "none (entries older than every ranking's `seq` are removed each minute)",
        "ingest/put/post/vote/delete.lua"
    ),
    key_spec!(
        "rankings",
        "archive:dirty",
        r"^archive:dirty$",
        "set",
        "article ids changed (counted event, vote, `PUT`, post, delete) since the archive writer last took the set (at most one member per article, also without a writer)",
        Ttl::None,
        "none (renamed to `archive:taking` by each flush)",
        "apply.lua, vote/put/post/delete.lua; seed_vote/seed_post/seed_delete.lua (seed layout)"
    ),
    key_spec!(
        "rankings",
        "archive:taking",
        r"^archive:taking$",
        "set",
        "the ids a flush took, deleted once they are in the archive, merged back into `archive:dirty` when the write failed",
        Ttl::None,
        "none",
        "archive writer (src/pipeline/archiver.rs)"
    ),
    key_spec!(
        "rankings",
        "pipe:epoch",
        r"^pipe:epoch$",
        "string",
        "the site's epoch: which lifetime of its data this Redis holds, created by the first node on a new site (or one written before epochs). A node learns it once and every write it sends carries it: a Redis that lost its data (restarted empty, FLUSHALL, a lost disk) refuses them, and `/readyz` answers 503, until `hotrank archive restore` or `hotrank redis-ack-loss` sets it again. With a journal (`pipeline.log_url`) it equals the journal's `pipe:journal:epoch` and the archive's `pipeline.epoch`, and only `hotrank archive restore --replay` sets it again (docs/design.md, \"Disaster recovery\")",
        Ttl::None,
        "none",
        "marker.rs (a new site; `redis-ack-loss`, `archive import`/`restore`); src/pipeline/journal.rs (`Journal::attach`); src/pipeline/replay.rs (last step of a restore)"
    ),
    key_spec!(
        "rankings",
        "archive:flushed",
        r"^archive:flushed$",
        "string",
        "wall-clock time (Unix s) of the last successful archive flush (`archiveAgeSeconds` in `/api/stats`)",
        Ttl::None,
        "none",
        "archive writer (src/pipeline/archiver.rs)"
    ),
    key_spec!(
        "rankings",
        "archive:lock",
        r"^archive:lock$",
        "string",
        "token of the node flushing to the archive",
        Ttl::Expires,
        "3 × `archive.flush_secs` (at least 30 s), deleted by its holder after the flush",
        "archive writer (src/pipeline/archiver.rs)"
    ),
    key_spec!(
        "rankings",
        "archive:written",
        r"^archive:written$",
        "zset",
        "member = article id, score = data time (Unix s) of the flush that last archived it or of its last restore: eviction takes those older than `archive.evict_after_secs`",
        Ttl::None,
        "none",
        "archive writer, restore.lua"
    ),
    key_spec!(
        "rankings",
        "archive:evicted",
        r"^archive:evicted$",
        "set",
        "tombstones: ids of articles evicted from Redis (their meta and `articles:new` entry stay); an event, vote, read or ranking that needs one restores it from the archive first",
        Ttl::None,
        "none",
        "evict.lua, restore.lua"
    ),
    key_spec!(
        "rankings",
        "changes:seq",
        r"^changes:seq$",
        "string",
        "the change sequence",
        Ttl::None,
        "none",
        "ingest/put/post/vote/delete.lua"
    ),
    key_spec!(
        "rankings",
        "clock",
        r"^clock$",
        "string",
        "the newest arrival time (s) any ingest call carried: queries never run before it",
        Ttl::None,
        "none",
        "ingest.lua"
    ),
    key_spec!(
        "rankings",
        "changes:floor",
        r"^changes:floor$",
        "string",
        "entries at or below were collected",
        Ttl::None,
        "none",
        "maintenance"
    ),
    key_spec!(
        "rankings",
        "cursor:<16 hex>",
        r"^cursor:[0-9a-f]{16}$",
        "string",
        "a cursor's snapshot (ids, exact scores, counters, `generatedAt`)",
        Ttl::Expires,
        "10 min unused",
        "any node"
    ),
    key_spec!(
        "shards",
        "shards",
        r"^shards$",
        "string",
        "the site's shard count N when more than 1, set by its first node's readiness check: a node with another N is not ready (`/readyz` answers 503)",
        Ttl::None,
        "none",
        "any node (`ready()`)"
    ),
    key_spec!(
        "shards",
        "epoch",
        r"^epoch$",
        "string",
        "on a cluster with more than one shard: each shard's copy of `pipe:epoch`, under the shard's tag (`{<site>:s<k>}epoch`), so a primary that lost its shards' data is found too",
        Ttl::None,
        "none",
        "marker.rs"
    ),
    key_spec!(
        "shards",
        "s<k>:changes",
        r"^s[0-9]{1,3}:changes$",
        "zset",
        "shard `k`'s change log: as `changes`, for the articles of the shard only",
        Ttl::None,
        "none (collected as `changes`)",
        "ingest/put/post/vote/delete.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:changes:seq",
        r"^s[0-9]{1,3}:changes:seq$",
        "string",
        "shard `k`'s change sequence",
        Ttl::None,
        "none",
        "ingest/put/post/vote/delete.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:changes:floor",
        r"^s[0-9]{1,3}:changes:floor$",
        "string",
        "entries of `s<k>:changes` at or below were collected",
        Ttl::None,
        "none",
        "maintenance"
    ),
    key_spec!(
        "shards",
        "s<k>:active:h:<hour>",
        r"^s[0-9]{1,3}:active:h:-?[0-9]+$",
        "set",
        "the shard's ids with a counted event in the hour",
        Ttl::Expires,
        "as hourly buckets",
        "ingest.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:active:d:<day>",
        r"^s[0-9]{1,3}:active:d:-?[0-9]+$",
        "set",
        "the shard's ids with a counted event in the day",
        Ttl::Expires,
        "as daily buckets",
        "ingest.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:articles:new",
        r"^s[0-9]{1,3}:articles:new$",
        "zset",
        "the shard's live articles, score = `publishedAt` (`GET /api/new` merges every shard's; `/api/stats` sums their `ZCARD`)",
        Ttl::None,
        "none",
        "put/post/delete/ingest.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:articles:new:by",
        r"^s[0-9]{1,3}:articles:new:by$",
        "zset",
        "the shard's `articles:new:by` (`GET /api/new` with a filter merges every shard's range of one value)",
        Ttl::None,
        "none",
        "put/post/delete.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:hot:score",
        r"^s[0-9]{1,3}:hot:score$",
        "zset",
        "the default ranking's bounds of the shard's articles (a query walks every shard's)",
        Ttl::None,
        "none",
        "writeback.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:hot:score:state",
        r"^s[0-9]{1,3}:hot:score:state$",
        "hash",
        "`seq` (of `s<k>:changes:seq`) and `now` of `s<k>:hot:score`",
        Ttl::None,
        "none",
        "writeback.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:hot:<model>:<range>:<filter>",
        r"^s[0-9]{1,3}:hot:[a-z]+(\.[0-9a-z]+)*:[0-9a-z]+:(all|[0-9a-f]{16})$",
        "zset",
        "another ranking's bounds of the shard's articles",
        Ttl::Expires,
        "1 h unused",
        "writeback.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:hot:<model>:<range>:<filter>:state",
        r"^s[0-9]{1,3}:hot:[a-z]+(\.[0-9a-z]+)*:[0-9a-z]+:(all|[0-9a-f]{16}):state$",
        "hash",
        "its state",
        Ttl::Expires,
        "as its ranking",
        "writeback.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:<ranking>:build:<hex>",
        r"^s[0-9]{1,3}:hot:(score|[a-z]+(\.[0-9a-z]+)*:[0-9a-z]+:(all|[0-9a-f]{16})):build:[0-9a-f]{16}$",
        "zset",
        "a rebuild of one of the shard's rankings in progress",
        Ttl::Expires,
        "10 min (an abandoned rebuild)",
        "writeback.lua"
    ),
    key_spec!(
        "shards",
        "s<k>:<ranking>:rebuilding",
        r"^s[0-9]{1,3}:hot:(score|[a-z]+(\.[0-9a-z]+)*:[0-9a-z]+:(all|[0-9a-f]{16})):rebuilding$",
        "string",
        "a node's claim to rebuild a ranking over every shard (shard 0's name stands for all)",
        Ttl::Expires,
        "10 s, renewed every 3 s while the rebuild runs; given back when it ends",
        "rank.rs (`Claim`)"
    ),
    key_spec!(
        "shards",
        "s<k>:hot:index",
        r"^s[0-9]{1,3}:hot:index$",
        "set",
        "names of the shard's live rankings (at most `rankings.max_live` per shard)",
        Ttl::None,
        "none",
        "writeback.lua, maintenance"
    ),
    key_spec!(
        "pipeline",
        "pipe:raw:<n>",
        r"^pipe:raw:[0-9]{1,4}$",
        "stream",
        "partition `n` of events queued by API nodes (`hash(article) % pipeline.partitions`): fields `n` (the node's now), then ingest.lua's 12 event fields; consumer group `filter`",
        Ttl::None,
        "none; trimmed (`XTRIM MINID`) to the oldest entry group `filter` has not acknowledged, every `pipeline.trim_every_ms`",
        "pipe_append.lua; pipe_filter.lua acknowledges"
    ),
    key_spec!(
        "pipeline",
        "pipe:flagged:<n>",
        r"^pipe:flagged:[0-9]{1,4}$",
        "stream",
        "partition `n`'s gated events: fields `v` (verdict code), `k`, `a`, `b`, `t`, `s`, `g` (tally), `n` (now), `r` (raw entry id); consumer group `count`",
        Ttl::None,
        "none; trimmed like `pipe:raw:<n>`, for group `count`",
        "pipe_flag.lua (filter worker); pipe_count.lua acknowledges"
    ),
    key_spec!(
        "pipeline",
        "pipe:verdict:<ehex>",
        r"^pipe:verdict:[0-9a-f]{32}$",
        "string",
        "the verdict code of the events carrying one eventId (counted if any copy counted, else the latest copy's), for `GET /api/events/{eventId}`",
        Ttl::Expires,
        "`gate.event_id_ttl_secs` (at least 60 s) after the latest copy was gated",
        "pipe_flag.lua"
    ),
    key_spec!(
        "pipeline",
        "pipe:waiters:<n>",
        r"^pipe:waiters:[0-9]{1,4}$",
        "zset",
        "callers of `PipelineStore::ingest` (the tools' path) waiting for verdicts on flagged partition `n`: member `<token> <mark>`, score = deadline (ms); the count group's trim keeps every entry after a live mark",
        Ttl::None,
        "none (members removed by their caller, or by the trim past their deadline)",
        "src/pipeline/wait.rs (`ingest_and_wait`); pipe_trim.lua"
    ),
    key_spec!(
        "pipeline",
        "pipe:refused",
        r"^pipe:refused$",
        "hash",
        "events the filter stage refused, by reason: `unknown_article` (`require_known_articles`), `too_many_articles` (`max_articles`); `pipeline.refused` in `/api/stats`",
        Ttl::None,
        "none",
        "pipe_flag.lua"
    ),
    key_spec!(
        "webhooks",
        "webhooks:subs",
        r"^webhooks:subs$",
        "hash",
        "webhook subscriptions: id → JSON (`url`, `secret`, `events`, `query`, `top`, `createdAt`)",
        Ttl::None,
        "none",
        "src/webhooks/redis_outbox.rs (`POST`/`DELETE /api/webhooks`)"
    ),
    key_spec!(
        "webhooks",
        "webhooks:state",
        r"^webhooks:state$",
        "hash",
        "per subscription: JSON of its list (`members`: article → rank and rising flag), `seq` (transitions decided: the next delivery id's number)",
        Ttl::None,
        "none",
        "webhooks commit script (with the stream and `pending`, while holding the lease)"
    ),
    key_spec!(
        "webhooks",
        "webhooks:outbox",
        r"^webhooks:outbox$",
        "stream",
        "every decided transition: fields `delivery` (id) and `entry` (JSON: `subscription`, `event`, `articleId`, `rank`, `at`, `decidedMs`)",
        Ttl::None,
        "none; `XADD MAXLEN ~ 10000`",
        "webhooks commit script"
    ),
    key_spec!(
        "webhooks",
        "webhooks:pending",
        r"^webhooks:pending$",
        "hash",
        "transitions not yet delivered or given up: delivery id → entry JSON; removed by the attempt that ends it (the delivered marker)",
        Ttl::None,
        "none",
        "webhooks commit script; webhooks record script (HDEL)"
    ),
    key_spec!(
        "webhooks",
        "webhooks:attempts:<wid>",
        r"^webhooks:attempts:[A-Za-z0-9_-]{1,64}$",
        "list",
        "a subscription's last 100 delivery attempts, newest first (JSON)",
        Ttl::None,
        "none; `LTRIM` to 100",
        "webhooks record script; deleted with the subscription"
    ),
    key_spec!(
        "webhooks",
        "webhooks:lease",
        r"^webhooks:lease$",
        "string",
        "the node that decides and sends webhooks (a random token)",
        Ttl::Expires,
        "`PX` 3 × `webhooks.interval_ms` (at least 3 s), renewed every interval",
        "webhooks lease script (`SET PX` when free, `PEXPIRE` by its holder)"
    ),
    key_spec!(
        "curation",
        "curation",
        r"^curation$",
        "hash",
        "an editor's entries (src/curation): field `pin:<id>`, `exclude:<id>` or `review:<id>`, value the entry as JSON (position, query and `until`; reason and `until`; status, hold time and evidence)",
        Ttl::None,
        "none (an entry past its `until` is ignored, and replaced or removed by the editor)",
        "src/curation/redis.rs (`HSET`, `HDEL`; `HSETNX` for a first hold)"
    ),
    key_spec!(
        "ctr",
        "ctr:lists",
        r"^ctr:lists$",
        "set",
        "the widget's list names counted (`list` of `impression` and `click` events, e.g. `gravity:24h`), at most `ctr.max_lists`",
        Ttl::None,
        "none",
        "src/ctr/redis.rs (`RECORD`)"
    ),
    key_spec!(
        "ctr",
        "ctr:list:<list>",
        r"^ctr:list:[A-Za-z0-9_.:=-]{1,64}$",
        "hash",
        "one list's impressions (`i<position>`) and clicks (`c<position>`), positions 1-100, `HINCRBY`; apart from every article counter",
        Ttl::None,
        "none",
        "src/ctr/redis.rs (`RECORD`)"
    ),
];

/// The markdown table of one docs section, as docs/redis-keys.md holds it
/// between `<!-- keys:<section> -->` and `<!-- /keys -->`.
pub fn render_key_table(section: &str) -> String {
    let mut out = String::from(
        "| key | type | holds | TTL | written by | tag on a cluster, shards > 1 |\n|---|---|---|---|---|---|\n",
    );
    for k in KEY_TABLE.iter().filter(|k| k.section == section) {
        let tag = match k.slot() {
            Slot::Site => "`{<site>}`",
            Slot::Shard => "`{<site>:s<k>}`",
            Slot::Article => "`{<site>:s<k>}`, k = the article's shard",
            Slot::Ledger => "`{<site>:s<k>}`: a copy per shard, of its articles",
            Slot::OneShard => "(one shard only)",
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {tag} |\n",
            k.pattern, k.kind, k.holds, k.ttl_text, k.writer
        ));
    }
    out
}

/// The row a key (without its prefix) belongs to.
pub fn key_spec_of(key: &str) -> Option<&'static KeySpec> {
    KEY_TABLE.iter().find(|k| {
        regex::Regex::new(k.regex)
            .map(|r| r.is_match(key))
            .unwrap_or(false)
    })
}
