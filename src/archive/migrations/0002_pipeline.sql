-- hotrank archive, version 2: the pipeline's disaster recovery
-- (docs/design.md, "Disaster recovery"). One row: the pipeline epoch the
-- archived positions belong to (Redis `pipe:epoch`, the journal's
-- `pipe:journal:epoch`), and per partition the journal floor: the oldest
-- raw entry id a restore may still need replayed (a JSON array, one id
-- per partition). The journal is never trimmed past it.
CREATE TABLE pipeline (
    id            SMALLINT PRIMARY KEY CHECK (id = 1),
    epoch         TEXT NOT NULL,
    journal_floor TEXT NOT NULL,
    updated_at    BIGINT NOT NULL
);
