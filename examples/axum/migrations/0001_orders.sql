-- The application's own table, migrated by the same runner as Outbox's schema.
CREATE TABLE shop_orders (
    id         text PRIMARY KEY,
    tenant_id  text NOT NULL,
    item       text NOT NULL,
    quantity   integer NOT NULL CHECK (quantity > 0),
    placed_at  timestamptz NOT NULL DEFAULT now()
);
