-- Webhook subscriptions (SPEC §7.6): a tenant's own endpoints, each an ordered, durable
-- consumer of that tenant's events. Its cursor is the row ('webhooks', id) of
-- outbox_cursors and its dead letters are those of sink 'webhook:<id>', as a sink's are.
--
-- `sealed` holds what must not be read at rest, sealed with the server's seal key
-- (ChaCha20-Poly1305, bound to the row's id): the signing secrets (the
-- current one and those still in their grace period) and the extra headers' values.
-- `header_names` lists the headers' names, which answers show beside redacted values.
-- `shard` is the subscription's shard (a stated hash of its id), whose lease a process
-- holds to deliver it.
CREATE TABLE outbox_webhooks (
    id text PRIMARY KEY,
    tenant_id text NOT NULL,
    url text NOT NULL,
    types text[] NOT NULL,
    description text NOT NULL DEFAULT '',
    header_names text[] NOT NULL DEFAULT '{}',
    metadata jsonb NOT NULL DEFAULT '{}',
    sealed bytea NOT NULL,
    enabled boolean NOT NULL DEFAULT true,
    disabled_reason text CHECK (disabled_reason IN ('manual', 'failing', 'gone')),
    failing_since timestamptz,
    shard integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT compute_now(),
    updated_at timestamptz NOT NULL DEFAULT compute_now(),
    CHECK (enabled = (disabled_reason IS NULL))
);
CREATE INDEX outbox_webhooks_tenant ON outbox_webhooks (tenant_id, id);
CREATE INDEX outbox_webhooks_shard ON outbox_webhooks (shard, id) WHERE enabled;

-- Each delivery attempt and ping of a subscription; the newest 100 are kept.
CREATE TABLE outbox_webhook_attempts (
    webhook_id text NOT NULL REFERENCES outbox_webhooks (id) ON DELETE CASCADE,
    id bigserial NOT NULL,
    at timestamptz NOT NULL DEFAULT compute_now(),
    event_id text,
    status integer,
    duration_ms integer NOT NULL,
    error text,
    response text,
    PRIMARY KEY (webhook_id, id)
);
