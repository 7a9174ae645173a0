-- Ordered lanes (SPEC §7.7): the lane of an event among `lanes` is the top 63 bits of its
-- subject's key (outbox_subject_key, §3.7: the first 8 bytes of SHA-256 of
-- 'outbox:subject:' || subject) modulo `lanes`, the same number as Rust's
-- outbox_pg::subject_lane. Lanes are 1 to 256; for any other count there is no lane (NULL).
-- A plain SQL function the planner inlines, like the key it reads: not STRICT, because a
-- CASE is not, and PostgreSQL inlines a strict function only when its body is strict too
-- (a NULL subject or count still gives NULL).
--
-- Functions only, no table: instant on a table of any size.

CREATE FUNCTION outbox_subject_lane(subject text, lanes integer) RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN lanes BETWEEN 1 AND 256
        THEN (((outbox_subject_key(subject) >> 1) & 9223372036854775807) % lanes)::integer
    END
$$;
