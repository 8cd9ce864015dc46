-- hotrank archive, version 1. Every table lives in the configured schema
-- (archive.schema, on the connection's search_path). Counts are BIGINT
-- (a store's u64 counts, refused past 2^63-1); sketches are the exact
-- byte images Redis holds for the key (crate::sketch), NULL when none.

-- One row per article: what PUT /api/articles set, whether the store knew
-- it, whether it is deleted, and where its archived state stands in its
-- source: as_of (unix seconds of the source state the row was written
-- from) and source_position (opaque to the archive; the pipeline records
-- the stream entry ids its writer had applied).
CREATE TABLE articles (
    id              TEXT COLLATE "C" PRIMARY KEY,
    published_at    BIGINT NOT NULL,
    meta            JSONB NOT NULL,
    known           BOOLEAN NOT NULL,
    deleted         BOOLEAN NOT NULL,
    as_of           BIGINT NOT NULL,
    source_position TEXT
);

-- Counters of an article: span 'l' is its lifetime (at = 0), 'h' an hour
-- bucket (at = hours since the epoch), 'd' a day bucket (days since the
-- epoch). uv is the span's HyperLogLog, byte for byte.
CREATE TABLE counters (
    article   TEXT COLLATE "C" NOT NULL REFERENCES articles (id) ON DELETE CASCADE,
    span      CHAR(1) NOT NULL CHECK (span IN ('l', 'h', 'd')),
    at        BIGINT NOT NULL,
    pv        BIGINT NOT NULL,
    likes     BIGINT NOT NULL,
    comments  BIGINT NOT NULL,
    favorites BIGINT NOT NULL,
    shares    BIGINT NOT NULL,
    dwell_s   BIGINT NOT NULL,
    dwell_n   BIGINT NOT NULL,
    q_dup     BIGINT NOT NULL,
    q_rl      BIGINT NOT NULL,
    q_bot     BIGINT NOT NULL,
    q_rep     BIGINT NOT NULL,
    uv        BYTEA,
    PRIMARY KEY (article, span, at)
);

-- Seed 003 votes and, while voting is open, who voted (32 hex digits each).
CREATE TABLE votes (
    article TEXT COLLATE "C" PRIMARY KEY REFERENCES articles (id) ON DELETE CASCADE,
    ups     BIGINT NOT NULL,
    downs   BIGINT NOT NULL,
    voters  TEXT[] NOT NULL
);

-- Store-wide totals (one row) and quarantine by hour.
CREATE TABLE totals (
    id      SMALLINT PRIMARY KEY CHECK (id = 1),
    counted BIGINT NOT NULL,
    q_dup   BIGINT NOT NULL,
    q_rl    BIGINT NOT NULL,
    q_bot   BIGINT NOT NULL,
    q_rep   BIGINT NOT NULL,
    as_of   BIGINT NOT NULL
);

CREATE TABLE quarantine_hours (
    hour  BIGINT PRIMARY KEY,
    q_dup BIGINT NOT NULL,
    q_rl  BIGINT NOT NULL,
    q_bot BIGINT NOT NULL,
    q_rep BIGINT NOT NULL
);

-- The gate's short-lived state as of the last full export (dedupe times,
-- eventIds, rate-limit logs), each entry one dump record as JSON; a full
-- export replaces the table.
CREATE TABLE gate (
    kind   TEXT NOT NULL,
    key    TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (kind, key)
);
