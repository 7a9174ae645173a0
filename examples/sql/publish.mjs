// Publishing to Outbox from Node.js with pg: change a row and publish the event that
// describes it in one transaction.
//
//   npm ci --prefix examples/sql
//   node examples/sql/publish.mjs "$DATABASE_URL"
import pg from "pg";

const client = new pg.Client({ connectionString: process.argv[2] });
await client.connect();
try {
  await client.query("CREATE TABLE IF NOT EXISTS reservations (id text PRIMARY KEY, state text NOT NULL)");
  await client.query(
    "INSERT INTO reservations VALUES ('rsv_node', 'pending') ON CONFLICT (id) DO UPDATE SET state = 'pending'",
  );

  // One transaction: the change and its event commit together, or neither does.
  await client.query("BEGIN");
  try {
    await client.query("UPDATE reservations SET state = 'active' WHERE id = $1", ["rsv_node"]);
    const { rows } = await client.query("SELECT outbox_publish($1, $2, $3, $4) AS id", [
      "reservation.active", "acme", "reservation/rsv_node", { state: "active" },
    ]);
    await client.query("COMMIT");
    console.log(rows[0].id);
  } catch (error) {
    await client.query("ROLLBACK");
    throw error;
  }

  // An ordered transaction and a batch.
  await client.query("BEGIN");
  try {
    await client.query("SELECT outbox_lock_subjects($1)", [["reservation/rsv_node"]]);
    await client.query("UPDATE reservations SET state = 'closed' WHERE id = $1", ["rsv_node"]);
    const events = [
      { type: "reservation.closed", tenantId: "acme", subject: "reservation/rsv_node", data: { state: "closed" } },
      { type: "reservation.archived", tenantId: "acme", subject: "reservation/rsv_node", data: {} },
    ];
    const { rows } = await client.query("SELECT id FROM outbox_publish_many($1) AS id", [JSON.stringify(events)]);
    await client.query("COMMIT");
    for (const row of rows) console.log(row.id);
  } catch (error) {
    await client.query("ROLLBACK");
    throw error;
  }

  // A refused event: SQLSTATE 22023, the field in `column`; nothing was written.
  await client.query("BEGIN");
  try {
    await client.query("SELECT outbox_publish($1, $2, $3, $4)", ["Bad Type", "acme", "reservation/x", {}]);
  } catch (error) {
    console.error(`refused: ${error.code} ${error.column}: ${error.message}`);
  } finally {
    await client.query("ROLLBACK");
  }
} finally {
  await client.end();
}
