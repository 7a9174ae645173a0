-- Ordinals beside cursors (SPEC §7.5 `rabbitmq`): how many of a consumer's events lie at or
-- before its position, counted by the consumer itself and saved by the same fenced statement
-- that saves the position. Rows after a position never change (the xmin rule), so numbering
-- them from the saved ordinal gives every event the same number on every delivery: a sink can
-- hand the broker a dense, repeatable publishing id (a RabbitMQ named producer's), and the
-- broker drops what a restarted process sends again. 0 for a cursor saved without one.
ALTER TABLE outbox_cursors ADD COLUMN ordinal bigint NOT NULL DEFAULT 0;
