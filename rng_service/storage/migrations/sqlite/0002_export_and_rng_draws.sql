-- Fairshoe schema v2: signed records listed by time (the audit export) and certified RNG draws.
-- Never edit 0001: a database that applied it keeps it; changes come as new numbered files.

-- The export pages through each table in (operator, created_at, id) order.
CREATE INDEX records_by_time ON records (operator, created_at, round_id);
CREATE INDEX reveals_by_time ON reveals (operator, created_at, shoe_id);

-- One certified draw (RngService): its signed record and the signed reveal of its seed, written
-- together in the transaction that answers the request. The seed appears only inside `reveal`.
CREATE TABLE rng_draws (
    operator    TEXT NOT NULL REFERENCES operators (operator),
    draw_id     TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('integers', 'shuffle')),
    commitment  TEXT NOT NULL UNIQUE,      -- a seed serves one draw
    record      BLOB NOT NULL,             -- signed fairshoe.rng/v1, canonical JSON bytes
    reveal      BLOB NOT NULL,             -- signed fairshoe.rng-reveal/v1
    created_at  TEXT NOT NULL,
    PRIMARY KEY (operator, draw_id)
);
CREATE INDEX rng_draws_by_time ON rng_draws (operator, created_at, draw_id);
