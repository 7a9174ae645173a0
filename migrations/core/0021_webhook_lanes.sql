-- Ordered lanes for webhook subscriptions (SPEC §7.7): how many lanes a subscription
-- delivers in, 1 (one ordered line, as before) to 256. Each lane keeps its own cursor in
-- stream 'webhooks', named '<id>#<lane>/<lanes>' (a subscription of one lane keeps '<id>').
--
-- A column with a constant default: PostgreSQL 11+ adds it without rewriting the table.

ALTER TABLE outbox_webhooks
    ADD COLUMN lanes integer NOT NULL DEFAULT 1 CONSTRAINT outbox_webhooks_lanes CHECK (lanes BETWEEN 1 AND 256);
