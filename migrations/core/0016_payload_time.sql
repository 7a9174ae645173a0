-- The payload no longer repeats the time: an event's `time` is its row's created_at, which
-- the same statement stamps from one reading of compute_now(), cut to milliseconds when
-- read (as the payload's copy was). Every row pays about 40 bytes less in the table and in
-- the write-ahead log. Rows written before keep their copy, and readers prefer it.
--
-- Nothing is rewritten: only the two SQL publishing functions change, to write what the
-- Rust publisher writes. outbox_publish_many draws its ids once (it drew them twice: for
-- the rows and for its result), and the quick test of a batch counts the brackets of the
-- data's text with replace() rather than translate(), a third of the cost, same result.

CREATE OR REPLACE FUNCTION outbox_event_valid(event jsonb, max_depth integer, max_bytes integer) RETURNS boolean
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
        AND (octet_length(event ->> 'data') - octet_length(replace(replace(event ->> 'data', '{', ''), '[', '')) <= max_depth
             OR outbox_json_depth(event -> 'data') <= max_depth)
        AND (octet_length(event ->> 'data') <= max_bytes
             OR outbox_json_compact_len(event -> 'data') <= max_bytes),
        false)
$$;

CREATE OR REPLACE FUNCTION outbox_publish_many(events jsonb) RETURNS SETOF text
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
    ids text[];
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
    ids := ARRAY(SELECT outbox_event_id(draw.ms, draw.high, draw.low, k) FROM generate_series(0, n - 1) k);
    INSERT INTO outbox (topic, payload, created_at)
    SELECT e.value ->> 'type',
           jsonb_build_object('id', ids[e.ord],
                              'tenantId', e.value -> 'tenantId', 'subject', e.value -> 'subject',
                              'data', e.value -> 'data'),
           clock.now
    FROM jsonb_array_elements(events) WITH ORDINALITY AS e(value, ord)
    CROSS JOIN (SELECT compute_now() AS now) clock
    ORDER BY e.ord;
    RETURN QUERY SELECT unnest(ids);
END
$$;

-- Writes one event into the caller's transaction; returns its id.
CREATE OR REPLACE FUNCTION outbox_publish(type text, tenant_id text, subject text, data jsonb) RETURNS text
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    id text;
BEGIN
    PERFORM outbox_check_event(0, to_jsonb(type), to_jsonb(tenant_id), to_jsonb(subject), data);
    SELECT outbox_event_id(d.ms, d.high, d.low, 0) INTO id FROM outbox_id_draw() d;
    INSERT INTO outbox (topic, payload, created_at)
    VALUES (type, jsonb_build_object('id', id, 'tenantId', tenant_id, 'subject', subject, 'data', data),
            compute_now());
    RETURN id;
END
$$;
