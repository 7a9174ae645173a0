-- One ordered key instead of two. The primary key on seq and the index on (txid, seq) were
-- two btrees every insert paid for; the primary key on (txid, seq) alone serves the global
-- read's order (SPEC §4), uniqueness (seq stays unique: it is drawn from its sequence) and
-- retention. It keeps the name outbox_txid_seq, so plans read as before.
--
-- On a table that already holds rows, the new index is built first, under CREATE INDEX's
-- SHARE lock (readers go on, writers wait); the two old ones are dropped and the key is
-- attached after it, under an exclusive lock held only for those catalog changes.
CREATE UNIQUE INDEX outbox_position ON outbox (txid, seq);
ALTER TABLE outbox DROP CONSTRAINT outbox_pkey;
DROP INDEX outbox_txid_seq;
ALTER TABLE outbox ADD CONSTRAINT outbox_txid_seq PRIMARY KEY USING INDEX outbox_position;
