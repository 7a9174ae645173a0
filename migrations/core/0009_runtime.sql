-- When a row was written, by the database clock (retention's age test).
ALTER TABLE outbox ADD COLUMN created_at timestamptz NOT NULL DEFAULT compute_now();

-- The tenant read: WHERE tenantId = $1 AND (txid, seq) > cursor ORDER BY txid, seq.
CREATE INDEX outbox_tenant_cursor ON outbox ((payload->>'tenantId'), txid, seq);

-- Durable cursors (SPEC §7.2): one position per (stream, name), e.g. ('outbox', 'sink:billing').
-- The position is (txid, seq) of the last row the consumer is done with.
CREATE TABLE outbox_cursors (
    stream text NOT NULL,
    name text NOT NULL,
    txid xid8 NOT NULL DEFAULT '0',
    seq bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT compute_now(),
    PRIMARY KEY (stream, name)
);

-- Leases (SPEC §7.1): a named singleton held by one worker until expires_at, by the
-- database clock. epoch grows with every new holder, so a stale holder can be fenced.
CREATE TABLE outbox_leases (
    name text PRIMARY KEY,
    holder text NOT NULL,
    epoch bigint NOT NULL DEFAULT 1,
    expires_at timestamptz NOT NULL
);

-- Dead letters (SPEC §7.4): an event a sink refused on every attempt while its
-- neighbour went through.
CREATE TABLE outbox_dead_letters (
    id bigserial PRIMARY KEY,
    sink text NOT NULL,
    txid xid8 NOT NULL,
    seq bigint NOT NULL,
    event jsonb NOT NULL,
    error text NOT NULL,
    attempts integer NOT NULL,
    first_failed_at timestamptz NOT NULL,
    last_failed_at timestamptz NOT NULL,
    replayed_at timestamptz,
    UNIQUE (sink, txid, seq)
);
CREATE INDEX outbox_dead_letters_pending ON outbox_dead_letters (sink, id) WHERE replayed_at IS NULL;
