-- Publishing from psql: change a row and publish the event that describes it, in one
-- transaction. Run against a database that Outbox has migrated:
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f examples/sql/publish.sql
\set ON_ERROR_STOP on

CREATE TABLE IF NOT EXISTS reservations (id text PRIMARY KEY, state text NOT NULL);
INSERT INTO reservations VALUES ('rsv_psql', 'pending') ON CONFLICT (id) DO UPDATE SET state = 'pending';

BEGIN;
UPDATE reservations SET state = 'active' WHERE id = 'rsv_psql';
SELECT outbox_publish('reservation.active', 'acme', 'reservation/rsv_psql', '{"state": "active"}');
COMMIT;

-- A batch, and an ordered transaction: its subject's events are read in commit order
-- among writers that lock it the same way (docs/publishing.md).
BEGIN;
SELECT outbox_lock_subjects(ARRAY['reservation/rsv_psql']);
UPDATE reservations SET state = 'closed' WHERE id = 'rsv_psql';
SELECT * FROM outbox_publish_many('[
  {"type": "reservation.closed", "tenantId": "acme", "subject": "reservation/rsv_psql", "data": {"state": "closed"}},
  {"type": "reservation.archived", "tenantId": "acme", "subject": "reservation/rsv_psql", "data": {}}
]');
COMMIT;
