"""Publishing to Outbox from Python with psycopg 3: change a row and publish the event that
describes it in one transaction.

    pip install -r examples/sql/requirements.txt
    python3 examples/sql/publish.py "$DATABASE_URL"
"""

import sys

import psycopg
from psycopg.types.json import Jsonb


def main(url: str) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS reservations (id text PRIMARY KEY, state text NOT NULL)")
        conn.execute(
            "INSERT INTO reservations VALUES ('rsv_python', 'pending') "
            "ON CONFLICT (id) DO UPDATE SET state = 'pending'"
        )
        conn.commit()

        # One transaction: the change and its event commit together, or neither does.
        with conn.transaction():
            conn.execute("UPDATE reservations SET state = 'active' WHERE id = %s", ("rsv_python",))
            (event_id,) = conn.execute(
                "SELECT outbox_publish(%s, %s, %s, %s)",
                ("reservation.active", "acme", "reservation/rsv_python", Jsonb({"state": "active"})),
            ).fetchone()
        print(event_id)

        # An ordered transaction and a batch; a refused event raises before anything is written.
        with conn.transaction():
            conn.execute("SELECT outbox_lock_subjects(%s)", (["reservation/rsv_python"],))
            conn.execute("UPDATE reservations SET state = 'closed' WHERE id = %s", ("rsv_python",))
            events = [
                {"type": "reservation.closed", "tenantId": "acme", "subject": "reservation/rsv_python",
                 "data": {"state": "closed"}},
                {"type": "reservation.archived", "tenantId": "acme", "subject": "reservation/rsv_python", "data": {}},
            ]
            for (event_id,) in conn.execute("SELECT * FROM outbox_publish_many(%s)", (Jsonb(events),)):
                print(event_id)

        try:
            with conn.transaction():
                conn.execute("SELECT outbox_publish(%s, %s, %s, %s)", ("Bad Type", "acme", "reservation/x", Jsonb({})))
        except psycopg.errors.InvalidParameterValue as refused:
            # SQLSTATE 22023; the field is in the error's column name.
            print(f"refused: {refused.diag.column_name}: {refused.diag.message_primary}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])
