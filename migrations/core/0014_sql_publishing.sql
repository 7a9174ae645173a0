-- Publishing from any language (SPEC §3.8) and ordered transactions (SPEC §3.7).
--
-- outbox_publish and outbox_publish_many write events into the caller's transaction with
-- the rules of SPEC §3.2, checked here as outbox_core::validate checks them in Rust, with
-- the same messages ("event <index>: <field> <rule>"). A refusal raises SQLSTATE 22023
-- (invalid_parameter_value) with the field in the error's COLUMN and
-- {"index", "field", "rule"} as JSON in its DETAIL; nothing is written.
-- The limits are the Rust defaults, changed per session or transaction with
-- SET outbox.max_data_bytes / outbox.max_data_depth / outbox.max_batch.

-- A quoted string for a refusal, as Rust's {:?} writes one: at most 64 characters,
-- '"' and '\' escaped, \t \r \n \0 as such and other control characters as \u{hex}.
CREATE FUNCTION outbox_quoted(value text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    shown text := '';
    c text;
BEGIN
    FOREACH c IN ARRAY regexp_split_to_array(left(value, 64), '') LOOP
        shown := shown || CASE
            WHEN c = '' THEN ''
            WHEN c = '"' THEN '\"'
            WHEN c = '\' THEN '\\'
            WHEN c = E'\t' THEN '\t'
            WHEN c = E'\r' THEN '\r'
            WHEN c = E'\n' THEN '\n'
            WHEN ascii(c) < 32 OR ascii(c) = 127 THEN '\u{' || to_hex(ascii(c)) || '}'
            ELSE c
        END;
    END LOOP;
    RETURN '"' || shown || '"';
END
$$;

-- What a refusal shows of a field given as JSON: a string quoted as Rust quotes it, any
-- other value as its JSON text, a missing one as null.
CREATE FUNCTION outbox_shown(value jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN value IS NULL THEN 'null'
        WHEN jsonb_typeof(value) = 'string' THEN outbox_quoted(value #>> '{}')
        ELSE left(value::text, 64)
    END
$$;

-- How a refusal names the kind of a JSON value, as outbox_core does.
CREATE FUNCTION outbox_json_kind(value jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE jsonb_typeof(value)
        WHEN 'boolean' THEN 'a boolean' WHEN 'number' THEN 'a number' WHEN 'string' THEN 'a string'
        WHEN 'array' THEN 'an array' WHEN 'object' THEN 'an object' ELSE 'null'
    END
$$;

-- Raises the refusal of event `index` (NULL: the batch), field `field`, rule `rule`.
CREATE FUNCTION outbox_refuse(index integer, field text, rule text) RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = '22023',
        MESSAGE = CASE WHEN index IS NULL THEN '' ELSE 'event ' || index || ': ' END || field || ' ' || rule,
        COLUMN = field,
        DETAIL = jsonb_build_object('index', index, 'field', field, 'rule', rule)::text;
END
$$;

-- A limit: the setting outbox.<name> when set, else the Rust default.
CREATE FUNCTION outbox_limit(name text, default_value integer) RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT COALESCE(NULLIF(current_setting('outbox.' || name, true), '')::integer, default_value)
$$;

-- The nesting depth of a JSON value: a scalar is 0, an empty object or array 1.
CREATE FUNCTION outbox_json_depth(value jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    WITH RECURSIVE walk(v, depth) AS (
        SELECT value, 0
        UNION ALL
        SELECT child.v, walk.depth + 1
        FROM walk
        CROSS JOIN LATERAL (
            SELECT e.value AS v FROM jsonb_each(CASE WHEN jsonb_typeof(walk.v) = 'object' THEN walk.v END) e
            UNION ALL
            SELECT a AS v FROM jsonb_array_elements(CASE WHEN jsonb_typeof(walk.v) = 'array' THEN walk.v END) a
        ) child
    )
    SELECT max(depth + CASE WHEN jsonb_typeof(v) IN ('object', 'array') THEN 1 ELSE 0 END) FROM walk
$$;

-- The length in bytes of the compact JSON text of a value (no whitespace outside strings),
-- as serde_json writes it: PostgreSQL writes jsonb with a space after every ':' and ','
-- that separates members or elements, and this takes them off.
CREATE FUNCTION outbox_json_compact_len(value jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    WITH RECURSIVE walk(v) AS (
        SELECT value
        UNION ALL
        SELECT child.v
        FROM walk
        CROSS JOIN LATERAL (
            SELECT e.value AS v FROM jsonb_each(CASE WHEN jsonb_typeof(walk.v) = 'object' THEN walk.v END) e
            UNION ALL
            SELECT a AS v FROM jsonb_array_elements(CASE WHEN jsonb_typeof(walk.v) = 'array' THEN walk.v END) a
        ) child
    )
    SELECT octet_length(value::text) - COALESCE(sum(CASE
        WHEN jsonb_typeof(v) = 'object' THEN 2 * (SELECT count(*) FROM jsonb_object_keys(v)) - 1
        WHEN jsonb_typeof(v) = 'array' THEN jsonb_array_length(v) - 1
        ELSE 0
    END) FILTER (WHERE jsonb_typeof(v) IN ('object', 'array') AND v NOT IN ('{}', '[]')), 0)::integer
    FROM walk
$$;

-- Whether `subject` is `<kind>/<id>` by SPEC §3.2: kind ^[a-z][a-z0-9-]{0,63}$ (at most 64
-- characters, so the first '/' is at most the 65th), id ^[A-Za-z0-9._:@-]{1,256}$.
CREATE FUNCTION outbox_subject_valid(subject text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT subject ~ '^[a-z][a-z0-9-]*/[A-Za-z0-9._:@-]+$'
        AND position('/' IN subject) <= 65
        AND length(subject) - position('/' IN subject) <= 256
$$;

-- Checks event `index` against SPEC §3.2, raising the refusal of its first broken rule.
-- Each field is given as JSON (`NULL` when missing), as outbox_publish_many reads them.
CREATE FUNCTION outbox_check_event(index integer, type jsonb, tenant_id jsonb, subject jsonb, data jsonb)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
    max_depth integer := outbox_limit('max_data_depth', 32);
    max_bytes integer := outbox_limit('max_data_bytes', 65536);
    serialized text;
    depth integer;
    size integer;
BEGIN
    IF jsonb_typeof(type) IS DISTINCT FROM 'string'
       OR length(type #>> '{}') > 128
       OR (type #>> '{}') !~ '^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+$' THEN
        PERFORM outbox_refuse(index, 'type',
            'must match ^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+$ with at most 128 characters (got '
            || outbox_shown(type) || ')');
    END IF;
    IF jsonb_typeof(tenant_id) IS DISTINCT FROM 'string'
       OR (tenant_id #>> '{}') !~ '^[A-Za-z0-9._:-]{1,128}$' THEN
        PERFORM outbox_refuse(index, 'tenantId',
            'must match ^[A-Za-z0-9._:-]{1,128}$ (got ' || outbox_shown(tenant_id) || ')');
    END IF;
    IF jsonb_typeof(subject) IS DISTINCT FROM 'string' OR NOT outbox_subject_valid(subject #>> '{}') THEN
        PERFORM outbox_refuse(index, 'subject',
            'must be <kind>/<id> with kind ^[a-z][a-z0-9-]{0,63}$ and id ^[A-Za-z0-9._:@-]{1,256}$ (got '
            || outbox_shown(subject) || ')');
    END IF;
    IF jsonb_typeof(data) IS DISTINCT FROM 'object' THEN
        PERFORM outbox_refuse(index, 'data', 'must be a JSON object (got ' || outbox_json_kind(data) || ')');
    END IF;
    -- Fast paths: a text with no more brackets than the deepest nesting allowed cannot nest
    -- deeper, and a text no longer than the limit is no longer compact.
    serialized := data::text;
    IF length(serialized) - length(translate(serialized, '{[', '')) > max_depth THEN
        depth := outbox_json_depth(data);
        IF depth > max_depth THEN
            PERFORM outbox_refuse(index, 'data',
                'must nest at most ' || max_depth || ' levels deep (got ' || depth || ')');
        END IF;
    END IF;
    IF octet_length(serialized) > max_bytes THEN
        size := outbox_json_compact_len(data);
        IF size > max_bytes THEN
            PERFORM outbox_refuse(index, 'data',
                'must serialize to at most ' || max_bytes || ' bytes (got ' || size || ')');
        END IF;
    END IF;
END
$$;

-- Crockford's base-32 digits of the low 50 bits of `value` (10 digits) and of the low 40
-- bits (8 digits), most significant first: one expression each, so the planner inlines them.
CREATE FUNCTION outbox_base32_8(value bigint) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT substr('0123456789abcdefghjkmnpqrstvwxyz', ((value >> 35) & 31)::integer + 1, 1)
        || substr('0123456789abcdefghjkmnpqrstvwxyz', ((value >> 30) & 31)::integer + 1, 1)
        || substr('0123456789abcdefghjkmnpqrstvwxyz', ((value >> 25) & 31)::integer + 1, 1)
        || substr('0123456789abcdefghjkmnpqrstvwxyz', ((value >> 20) & 31)::integer + 1, 1)
        || substr('0123456789abcdefghjkmnpqrstvwxyz', ((value >> 15) & 31)::integer + 1, 1)
        || substr('0123456789abcdefghjkmnpqrstvwxyz', ((value >> 10) & 31)::integer + 1, 1)
        || substr('0123456789abcdefghjkmnpqrstvwxyz', ((value >> 5) & 31)::integer + 1, 1)
        || substr('0123456789abcdefghjkmnpqrstvwxyz', ((value >> 0) & 31)::integer + 1, 1)
$$;

CREATE FUNCTION outbox_base32_10(value bigint) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT substr('0123456789abcdefghjkmnpqrstvwxyz', ((value >> 45) & 31)::integer + 1, 1)
        || substr('0123456789abcdefghjkmnpqrstvwxyz', ((value >> 40) & 31)::integer + 1, 1)
        || outbox_base32_8(value)
$$;

-- The id of the `k`-th event (from 0) written with one ULID draw: `evt_` + a lowercase
-- ULID of 48 bits of milliseconds `ms` and the 80 random bits `high`·`low` (40 bits each)
-- plus `k`, so the ids of one call increase (as outbox_pg's do within a batch).
CREATE FUNCTION outbox_event_id(ms bigint, high bigint, low bigint, k bigint) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT 'evt_' || outbox_base32_10(ms)
        || outbox_base32_8((high + (low + k) / 1099511627776) & 1099511627775)
        || outbox_base32_8((low + k) & 1099511627775)
$$;

-- One ULID draw for outbox_event_id: compute_now() in milliseconds and 80 random bits,
-- taken from bytes of a version-4 UUID that are all random.
CREATE FUNCTION outbox_id_draw(OUT ms bigint, OUT high bigint, OUT low bigint)
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$
    SELECT floor(extract(epoch FROM compute_now()) * 1000)::bigint,
           ('x' || encode(substr(r, 1, 5), 'hex'))::bit(40)::bigint,
           ('x' || encode(substr(r, 11, 5), 'hex'))::bit(40)::bigint
    FROM (SELECT uuid_send(gen_random_uuid()) AS r) random
$$;

-- Whether an event given as JSON keeps every rule of SPEC §3.2: the quick test of a whole
-- batch in one statement, before outbox_check_event names the first rule one breaks.
-- Lengths are checked apart from the patterns, which PostgreSQL matches faster unbounded.
CREATE FUNCTION outbox_event_valid(event jsonb, max_depth integer, max_bytes integer) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT COALESCE(
        jsonb_typeof(event -> 'type') = 'string'
        AND length(event ->> 'type') <= 128
        AND (event ->> 'type') ~ '^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+$'
        AND jsonb_typeof(event -> 'tenantId') = 'string'
        AND (event ->> 'tenantId') ~ '^[A-Za-z0-9._:-]+$'
        AND length(event ->> 'tenantId') <= 128
        AND jsonb_typeof(event -> 'subject') = 'string'
        AND outbox_subject_valid(event ->> 'subject')
        AND jsonb_typeof(event -> 'data') = 'object'
        AND (length(event ->> 'data') - length(translate(event ->> 'data', '{[', '')) <= max_depth
             OR outbox_json_depth(event -> 'data') <= max_depth)
        AND (octet_length(event ->> 'data') <= max_bytes
             OR outbox_json_compact_len(event -> 'data') <= max_bytes),
        false)
$$;

-- Writes `events`, a JSON array of {type, tenantId, subject, data}, into the caller's
-- transaction in one statement, `seq` in array order; returns their ids in that order.
-- Every event is checked before anything is written; an empty array writes nothing.
CREATE FUNCTION outbox_publish_many(events jsonb) RETURNS SETOF text
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    n integer;
    max_batch integer := outbox_limit('max_batch', 10000);
    max_depth integer := outbox_limit('max_data_depth', 32);
    max_bytes integer := outbox_limit('max_data_bytes', 65536);
    first_bad bigint;
    event jsonb;
    draw record;
BEGIN
    IF jsonb_typeof(events) IS DISTINCT FROM 'array' THEN
        PERFORM outbox_refuse(NULL, 'events', 'must be a JSON array of events (got '
            || outbox_json_kind(events) || ')');
    END IF;
    n := jsonb_array_length(events);
    IF n > max_batch THEN
        PERFORM outbox_refuse(NULL, 'events', 'must hold at most ' || max_batch || ' events (got ' || n || ')');
    END IF;
    IF n = 0 THEN
        RETURN;
    END IF;
    SELECT min(e.ord) INTO first_bad
    FROM jsonb_array_elements(events) WITH ORDINALITY AS e(value, ord)
    WHERE NOT outbox_event_valid(e.value, max_depth, max_bytes);
    IF first_bad IS NOT NULL THEN
        event := events -> (first_bad - 1)::integer;
        PERFORM outbox_check_event((first_bad - 1)::integer, event -> 'type', event -> 'tenantId',
                                   event -> 'subject', event -> 'data');
        PERFORM outbox_refuse((first_bad - 1)::integer, 'event', 'breaks a rule of SPEC §3.2');
    END IF;
    draw := outbox_id_draw();
    INSERT INTO outbox (topic, payload, created_at)
    SELECT e.value ->> 'type',
           jsonb_build_object('id', outbox_event_id(draw.ms, draw.high, draw.low, e.ord - 1),
                              'time', clock.time, 'tenantId', e.value -> 'tenantId',
                              'subject', e.value -> 'subject', 'data', e.value -> 'data'),
           clock.now
    FROM jsonb_array_elements(events) WITH ORDINALITY AS e(value, ord)
    CROSS JOIN (SELECT now, to_char(now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS time
                FROM (SELECT compute_now() AS now) n) clock
    ORDER BY e.ord;
    RETURN QUERY SELECT outbox_event_id(draw.ms, draw.high, draw.low, k) FROM generate_series(0, n - 1) k;
END
$$;

-- Writes one event into the caller's transaction; returns its id.
CREATE FUNCTION outbox_publish(type text, tenant_id text, subject text, data jsonb) RETURNS text
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    id text;
BEGIN
    PERFORM outbox_check_event(0, to_jsonb(type), to_jsonb(tenant_id), to_jsonb(subject), data);
    SELECT outbox_event_id(d.ms, d.high, d.low, 0) INTO id FROM outbox_id_draw() d;
    INSERT INTO outbox (topic, payload, created_at)
    SELECT type,
           jsonb_build_object('id', id, 'time', clock.time, 'tenantId', tenant_id, 'subject', subject,
                              'data', data),
           clock.now
    FROM (SELECT now, to_char(now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS time
          FROM (SELECT compute_now() AS now) n) clock;
    RETURN id;
END
$$;

-- The advisory lock key of a subject for ordered transactions: the first 8 bytes of
-- SHA-256('outbox:subject:' || subject), big-endian, as a signed 64-bit integer.
CREATE FUNCTION outbox_subject_key(subject text) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT ('x' || encode(substr(sha256(convert_to('outbox:subject:' || subject, 'UTF8')), 1, 8), 'hex'))::bit(64)::bigint
$$;

-- Begins an ordered transaction (SPEC §3.7): takes a transaction-scoped advisory lock on
-- each subject, in ascending key order (so two callers never wait on each other in a
-- cycle), each held until the transaction ends. Refused when the transaction already holds
-- a transaction id: its events could then still be read before those of a writer that
-- commits first.
CREATE FUNCTION outbox_lock_subjects(subjects text[]) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    key bigint;
    i integer := 0;
    subject text;
BEGIN
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = 'an ordered transaction must lock its subjects before it writes anything '
                || '(this one already holds transaction id ' || pg_current_xact_id_if_assigned()::text || ')',
            HINT = 'call outbox_lock_subjects first in the transaction';
    END IF;
    FOREACH subject IN ARRAY COALESCE(subjects, '{}') LOOP
        IF NOT COALESCE(outbox_subject_valid(subject), false) THEN
            PERFORM outbox_refuse(NULL, 'subjects[' || i || ']',
                'must be <kind>/<id> with kind ^[a-z][a-z0-9-]{0,63}$ and id ^[A-Za-z0-9._:@-]{1,256}$ (got '
                || CASE WHEN subject IS NULL THEN 'null' ELSE outbox_quoted(subject) END || ')');
        END IF;
        i := i + 1;
    END LOOP;
    FOR key IN SELECT DISTINCT outbox_subject_key(s) AS k FROM unnest(subjects) s ORDER BY k LOOP
        PERFORM pg_advisory_xact_lock(key);
    END LOOP;
END
$$;
