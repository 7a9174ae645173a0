-- The database clock. Every timestamp the outbox writes comes from compute_now(),
-- so that tests can move time forward without sleeping.
CREATE TABLE compute_clock (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    offset_interval interval NOT NULL DEFAULT interval '0'
);
INSERT INTO compute_clock DEFAULT VALUES;

-- The one place that calls now(), which is the transaction's start time: every
-- row a transaction writes gets the same timestamp.
CREATE FUNCTION compute_now() RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT now() + (SELECT offset_interval FROM compute_clock) $$;
