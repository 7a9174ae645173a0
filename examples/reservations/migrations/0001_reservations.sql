-- The example application's own table: its change and its event commit together.
CREATE TABLE example_reservations (
    id text PRIMARY KEY,
    tenant_id text NOT NULL,
    state text NOT NULL,
    version bigint NOT NULL DEFAULT 1
);
