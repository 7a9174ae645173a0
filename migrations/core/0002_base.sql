-- The outbox. txid is the writing transaction; readers take only rows of
-- transactions older than their snapshot's xmin, in (txid, seq) order (SPEC §4).
CREATE TABLE outbox (
    seq bigserial PRIMARY KEY,
    txid xid8 NOT NULL DEFAULT pg_current_xact_id(),
    topic text NOT NULL,
    payload jsonb NOT NULL
);

-- The global read: WHERE (txid, seq) > cursor ORDER BY txid, seq.
CREATE INDEX outbox_txid_seq ON outbox (txid, seq);
