-- What a sink's loop last reported (SPEC §5.7 GET /sinks, `outbox sinks list`): its last
-- error and, while it backs off, until when. Written by the process holding the sink's
-- lease when a delivery fails and when it recovers, so any process can show it.
CREATE TABLE outbox_sink_health (
    sink text PRIMARY KEY,
    backing_off_until timestamptz,
    last_error text,
    last_error_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT compute_now()
);
