-- Revocations recorded by POST /admin/streams/close (SPEC §5.5).
--
-- Every server process polls this table every second: a new row closes the matching open
-- streams it serves, and a revoked session or identity is refused on its next request.
-- Rows of kind 'agent', 'delegation' and 'tenant_any_agent' only close the streams open
-- when they are recorded; 'session' and 'identity' also refuse those tokens afterwards.
CREATE TABLE outbox_revocations (
    id bigserial PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('session', 'identity', 'agent', 'delegation', 'tenant_any_agent')),
    value text NOT NULL,
    reason text NOT NULL DEFAULT '',
    revoked_at timestamptz NOT NULL DEFAULT compute_now()
);

-- The poller re-reads the last minute each second (a row can commit after a higher id).
CREATE INDEX outbox_revocations_revoked_at ON outbox_revocations (revoked_at);
