//! `cargo xtask bench publish`: what a published event costs, against the floor.
//!
//! The floor is the same rows written into a bare table with the same columns and one
//! ordered key (`outbox_floor`, primary key `(txid, seq)`, nothing else), by the same
//! statement shape (`INSERT … SELECT FROM unnest` of the finished rows) in transactions of
//! the same sizes: what an ordered log must pay. Every contender runs on the same database,
//! interleaved round by round (every other round in reverse) so that the tables' growth and
//! the machine's noise fall on each alike, over TCP and, beside it, the Unix socket. Each
//! transport has one connection, so its server process is the one whose CPU is counted:
//! besides events/s, each contender prints that process's CPU per event (user + system, from
//! `/proc`) and the write-ahead log per event (`pg_current_wal_lsn()` before and after:
//! the whole server's, so run it on a quiet one).
//!
//! Contenders:
//! - `publish_many` in transactions of 1, 100 and 1000 events, beside the floor's;
//! - the alternative statements for a batch into the outbox itself: `COPY … FROM STDIN` and
//!   multi-row `VALUES` of the finished rows (`publish_many` binds one array per column);
//! - SQL `outbox_publish_many` (batch 1000) beside `publish_many` from Rust;
//! - one `publish` + commit beside the floor's single `INSERT` + commit, and an ordered
//!   transaction (`outbox_pg::ordered` on the event's subject) + `publish` + commit beside
//!   plain `publish` + commit, each event of its own subject.
//!
//! Targets over TCP: `publish_many` ≥ 0.9 × the floor at 100 and 1000, with WAL per event ≤
//! 1.2 × the floor's; `publish` ≥ 0.95 × the floor's single insert; `publish_many` ≥ 0.7 ×
//! `COPY` at 100 and ≥ 0.8 at 1000; SQL `outbox_publish_many` ≥ 0.8 × `publish_many`;
//! ordered ≥ 0.9 × plain; `publish_many` over TCP ≥ 0.9 × the same through the socket.

use std::time::{Duration, Instant};

use outbox_core::NewEvent;
use serde_json::json;
use sqlx::PgPool;

use outbox_services::Transport;

#[derive(Clone, Copy)]
pub(crate) struct Sizes {
    pub(crate) rows: usize,
    pub(crate) rounds: usize,
    pub(crate) singles: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Contender {
    PublishMany(usize),
    Floor(usize),
    Copy(usize),
    Values(usize),
    SqlMany(usize),
    Publish,
    FloorInsert,
    Ordered,
}

impl Contender {
    const ALL: [Contender; 14] = [
        Contender::PublishMany(1),
        Contender::Floor(1),
        Contender::PublishMany(100),
        Contender::Floor(100),
        Contender::Copy(100),
        Contender::Values(100),
        Contender::PublishMany(1000),
        Contender::Floor(1000),
        Contender::Copy(1000),
        Contender::Values(1000),
        Contender::SqlMany(1000),
        Contender::Publish,
        Contender::FloorInsert,
        Contender::Ordered,
    ];

    fn label(self) -> String {
        match self {
            Contender::PublishMany(batch) => format!("publish_many batch={batch}"),
            Contender::Floor(batch) => format!("floor batch={batch}"),
            Contender::Copy(batch) => format!("COPY batch={batch}"),
            Contender::Values(batch) => format!("VALUES batch={batch}"),
            Contender::SqlMany(batch) => format!("SQL outbox_publish_many batch={batch}"),
            Contender::Publish => "publish + commit".into(),
            Contender::FloorInsert => "floor INSERT + commit".into(),
            Contender::Ordered => "ordered + publish + commit".into(),
        }
    }

    /// Events per round: single-event transactions measure commits, and take longer each.
    fn events(self, sizes: Sizes) -> usize {
        match self {
            Contender::PublishMany(1) | Contender::Floor(1) => sizes.singles,
            Contender::Publish | Contender::FloorInsert | Contender::Ordered => sizes.singles,
            _ => sizes.rows,
        }
    }
}

/// The bare table of the floor: the outbox's columns and one ordered key, nothing else.
const FLOOR_TABLE: &str = "CREATE TABLE outbox_floor (
    seq bigserial,
    txid xid8 NOT NULL DEFAULT pg_current_xact_id(),
    topic text NOT NULL,
    payload jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (txid, seq)
)";

/// The floor's batch: the statement shape of `publish_many`, without the clock function.
const FLOOR_MANY: &str = "INSERT INTO outbox_floor (topic, payload, created_at)
    SELECT e.topic, e.payload::jsonb, now()
    FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS e(topic, payload, ord)
    ORDER BY e.ord";

/// What one contender cost over one transport, summed over the rounds.
#[derive(Clone, Copy, Default)]
struct Cost {
    events: usize,
    elapsed: Duration,
    /// CPU of the connection's server process, when `/proc` shows it.
    cpu: Option<Duration>,
    wal_bytes: i64,
}

impl Cost {
    fn rate(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64()
    }

    fn cpu_per_event(&self) -> Option<f64> {
        self.cpu.map(|cpu| cpu.as_secs_f64() * 1e6 / self.events as f64)
    }

    fn wal_per_event(&self) -> f64 {
        self.wal_bytes as f64 / self.events as f64
    }

    /// Adds one measurement; the CPU is known only while every measurement knew it.
    fn add(&mut self, one: Cost) {
        self.events += one.events;
        self.elapsed += one.elapsed;
        self.wal_bytes += one.wal_bytes;
        self.cpu = self.cpu.zip(one.cpu).map(|(total, more)| total + more);
    }
}

/// Every contender over every transport, interleaved round by round on one database.
pub(crate) async fn run(pools: &[(Transport, PgPool)], sizes: Sizes) -> anyhow::Result<()> {
    sqlx::query(FLOOR_TABLE).execute(&pools[0].1).await?;
    let measured = measure(pools, sizes).await?;
    print_table(pools, sizes, &measured);
    print_ratios(pools, &measured);
    Ok(())
}

/// What every contender cost over every transport.
struct Measured {
    runs: Vec<(Contender, usize)>,
    costs: Vec<Cost>,
}

impl Measured {
    /// `contender`'s cost over the transport of `pools[pool]`.
    fn cost(&self, contender: Contender, pool: usize) -> Cost {
        let slot = self.runs.iter().position(|&run| run == (contender, pool)).expect("every contender ran");
        self.costs[slot]
    }
}

/// Every contender over every transport, `sizes.rounds` times, alternating the order.
async fn measure(pools: &[(Transport, PgPool)], sizes: Sizes) -> anyhow::Result<Measured> {
    let runs: Vec<(Contender, usize)> =
        Contender::ALL.into_iter().flat_map(|c| (0..pools.len()).map(move |p| (c, p))).collect();
    let mut costs = vec![Cost { cpu: Some(Duration::ZERO), ..Cost::default() }; runs.len()];
    for round in 0..sizes.rounds {
        let mut order: Vec<usize> = (0..runs.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for slot in order {
            let (contender, pool) = runs[slot];
            let n = contender.events(sizes);
            let events: Vec<NewEvent> = (0..n).map(|k| sample_event(round * n + k)).collect();
            costs[slot].add(measure_one(&pools[pool].1, contender, &events).await?);
        }
        eprintln!("bench publish: round {}/{} done", round + 1, sizes.rounds);
    }
    Ok(Measured { runs, costs })
}

/// One contender publishing `events` once: its time, PostgreSQL's CPU and the WAL written.
async fn measure_one(pool: &PgPool, contender: Contender, events: &[NewEvent]) -> anyhow::Result<Cost> {
    let (cpu_before, wal_before) = (backend_cpu(pool).await?, wal_lsn(pool).await?);
    let started = Instant::now();
    run_contender(pool, contender, events).await?;
    let elapsed = started.elapsed();
    let (cpu_after, wal_after) = (backend_cpu(pool).await?, wal_lsn(pool).await?);
    Ok(Cost {
        events: events.len(),
        elapsed,
        wal_bytes: wal_bytes_between(pool, &wal_before, &wal_after).await?,
        cpu: cpu_before.zip(cpu_after).map(|(before, after)| after.saturating_sub(before)),
    })
}

/// The rates over every transport, and the primary's CPU and WAL per event.
fn print_table(pools: &[(Transport, PgPool)], sizes: Sizes, measured: &Measured) {
    let primary = pools[0].0.label();
    println!(
        "bench publish: {} rounds, {} events per batched contender and {} per single one per round; PostgreSQL over {}",
        sizes.rounds,
        sizes.rows,
        sizes.singles,
        pools.iter().map(|(t, _)| t.label()).collect::<Vec<_>>().join(" and, beside it, "),
    );
    let header: String = pools.iter().map(|(t, _)| format!("{:>12}", t.label())).collect();
    println!("  {:<40}{header}   events/s   PostgreSQL CPU µs/event, WAL B/event ({primary})", "");
    for contender in Contender::ALL {
        let figures: String =
            (0..pools.len()).map(|p| format!("{:>12.0}", measured.cost(contender, p).rate())).collect();
        let own = measured.cost(contender, 0);
        let cpu = own.cpu_per_event().map_or("n/a".to_owned(), |us| format!("{us:.1}"));
        println!("  {:<40}{figures}   {cpu:>8} {:>8.0}", contender.label(), own.wal_per_event());
    }
}

/// One line per ratio, against its target.
fn print_ratios(pools: &[(Transport, PgPool)], measured: &Measured) {
    let primary = pools[0].0.label();
    let cost = |contender: Contender, pool: usize| measured.cost(contender, pool);
    let at_least = |target: f64| Ok((target, true));
    let against = |ours: Contender, other: Contender, target: Result<(f64, bool), &str>| {
        let what = format!("{} / {}, {primary}", ours.label(), other.label());
        ratio_line(what, cost(ours, 0).rate() / cost(other, 0).rate(), target);
    };
    let wal_against = |ours: Contender, other: Contender| {
        let what = format!("WAL per event {} / {}", ours.label(), other.label());
        ratio_line(what, cost(ours, 0).wal_per_event() / cost(other, 0).wal_per_event(), Ok((1.2, false)));
    };
    against(Contender::PublishMany(1), Contender::Floor(1), Err("no target: one-row transactions measure commits"));
    against(Contender::PublishMany(100), Contender::Floor(100), at_least(0.9));
    against(Contender::PublishMany(1000), Contender::Floor(1000), at_least(0.9));
    wal_against(Contender::PublishMany(100), Contender::Floor(100));
    wal_against(Contender::PublishMany(1000), Contender::Floor(1000));
    against(Contender::Publish, Contender::FloorInsert, at_least(0.95));
    against(Contender::PublishMany(100), Contender::Copy(100), at_least(0.7));
    against(Contender::PublishMany(1000), Contender::Copy(1000), at_least(0.8));
    against(
        Contender::PublishMany(1000),
        Contender::Values(1000),
        Err("the statement: arrays against multi-row VALUES"),
    );
    against(Contender::SqlMany(1000), Contender::PublishMany(1000), at_least(0.8));
    against(Contender::Ordered, Contender::Publish, at_least(0.9));
    if let [(first, _), (second, _)] = pools {
        for contender in [Contender::PublishMany(100), Contender::PublishMany(1000), Contender::Floor(1000)] {
            let what = format!("{} {} / {}", contender.label(), first.label(), second.label());
            let target = match contender {
                Contender::PublishMany(_) => at_least(0.9),
                _ => Err("reference: what the transport costs the floor"),
            };
            ratio_line(what, cost(contender, 0).rate() / cost(contender, 1).rate(), target);
        }
    }
}

/// `ratio <what> = <ratio> (<verdict against target, or the note>)`; a target is `(value,
/// true)` for at least, `(value, false)` for at most.
fn ratio_line(what: String, ratio: f64, target: Result<(f64, bool), &str>) {
    let verdict = match target {
        Ok((target, true)) if ratio >= target => format!("meets target >= {target:.2}"),
        Ok((target, true)) => format!("MISSES target >= {target:.2}"),
        Ok((target, false)) if ratio <= target => format!("meets target <= {target:.2}"),
        Ok((target, false)) => format!("MISSES target <= {target:.2}"),
        Err(note) => note.to_owned(),
    };
    println!("  ratio {what} = {ratio:.2} ({verdict})");
}

async fn run_contender(pool: &PgPool, contender: Contender, events: &[NewEvent]) -> anyhow::Result<()> {
    match contender {
        Contender::PublishMany(batch) => {
            for chunk in events.chunks(batch) {
                let mut tx = pool.begin().await?;
                outbox_pg::publish_many(&mut *tx, chunk).await?;
                tx.commit().await?;
            }
        }
        Contender::Floor(batch) => {
            for chunk in events.chunks(batch) {
                let (topics, payloads) = finished_rows(chunk);
                let mut tx = pool.begin().await?;
                sqlx::query(FLOOR_MANY).bind(&topics).bind(&payloads).execute(&mut *tx).await?;
                tx.commit().await?;
            }
        }
        Contender::Copy(batch) => {
            for chunk in events.chunks(batch) {
                copy_batch(pool, chunk).await?;
            }
        }
        Contender::Values(batch) => {
            for chunk in events.chunks(batch) {
                values_batch(pool, chunk).await?;
            }
        }
        Contender::SqlMany(batch) => {
            for chunk in events.chunks(batch) {
                let mut tx = pool.begin().await?;
                sqlx::query("SELECT count(*) FROM outbox_publish_many($1)")
                    .bind(serde_json::to_value(chunk)?)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
            }
        }
        Contender::Publish => {
            for event in events {
                let mut tx = pool.begin().await?;
                outbox_pg::publish(&mut *tx, event).await?;
                tx.commit().await?;
            }
        }
        Contender::FloorInsert => {
            for event in events {
                let (topics, payloads) = finished_rows(std::slice::from_ref(event));
                let mut tx = pool.begin().await?;
                sqlx::query("INSERT INTO outbox_floor (topic, payload) VALUES ($1, $2::jsonb)")
                    .bind(&topics[0])
                    .bind(&payloads[0])
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
            }
        }
        Contender::Ordered => {
            for event in events {
                let mut tx = outbox_pg::ordered(pool, &[&event.subject]).await?;
                outbox_pg::publish(&mut *tx, event).await?;
                tx.commit().await?;
            }
        }
    }
    Ok(())
}

/// `chunk`'s finished rows in one transaction through `COPY … FROM STDIN`.
async fn copy_batch(pool: &PgPool, chunk: &[NewEvent]) -> anyhow::Result<()> {
    let (topics, payloads) = finished_rows(chunk);
    let mut text = String::with_capacity(chunk.len() * 256);
    for (topic, payload) in topics.iter().zip(&payloads) {
        text.push_str(&copy_escape(topic));
        text.push('\t');
        text.push_str(&copy_escape(payload));
        text.push('\n');
    }
    let mut tx = pool.begin().await?;
    let mut copy = tx.copy_in_raw("COPY outbox (topic, payload) FROM STDIN").await?;
    copy.send(text.into_bytes()).await?;
    copy.finish().await?;
    tx.commit().await?;
    Ok(())
}

/// `chunk`'s finished rows in one transaction through one multi-row `INSERT … VALUES`.
async fn values_batch(pool: &PgPool, chunk: &[NewEvent]) -> anyhow::Result<()> {
    let (topics, payloads) = finished_rows(chunk);
    let rows: Vec<String> =
        (0..chunk.len()).map(|k| format!("(${}, ${}::jsonb, c.now)", 2 * k + 1, 2 * k + 2)).collect();
    let sql = format!(
        "INSERT INTO outbox (topic, payload, created_at) SELECT v.* FROM (SELECT compute_now() AS now) c, \
         LATERAL (VALUES {}) v",
        rows.join(", ")
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for (topic, payload) in topics.iter().zip(&payloads) {
        query = query.bind(topic).bind(payload);
    }
    let mut tx = pool.begin().await?;
    query.execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}

/// The rows a raw writer would store: what `publish_many` stores (`topic`, and the payload
/// `{id, tenantId, subject, data}` with a fresh id), encoded here as publishing encodes them.
fn finished_rows(events: &[NewEvent]) -> (Vec<String>, Vec<String>) {
    let topics = events.iter().map(|e| e.event_type.clone()).collect();
    let payloads = events
        .iter()
        .map(|event| {
            json!({
                "id": format!("evt_{}", ulid::Ulid::generate().to_string().to_ascii_lowercase()),
                "tenantId": event.tenant_id,
                "subject": event.subject,
                "data": event.data,
            })
            .to_string()
        })
        .collect();
    (topics, payloads)
}

/// COPY's text format: backslash, tab, newline and carriage return are escaped.
fn copy_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

/// A realistic event: a reservation change of one of three tenants, in turn, about 200
/// bytes of data, each of its own subject.
pub(crate) fn sample_event(n: usize) -> NewEvent {
    let tenant = ["acme", "globex", "initech"][n % 3];
    NewEvent::new("reservation.active", tenant, format!("reservation/rsv_{n:08}"), sample_data())
}

/// The data of every benchmark's reservation change: about 200 bytes.
pub(crate) fn sample_data() -> serde_json::Value {
    json!({
        "state": "active",
        "previous": "placed",
        "poolId": "pool_01k5y1z2x3w4v5t6s7r8q9p0n1",
        "gpus": 8,
        "gpuModel": "h100-sxm",
        "startsAt": "2026-11-29T10:00:00Z",
        "endsAt": "2026-11-30T10:00:00Z",
    })
}

/// The CPU time (user + system) of the pool's one server process so far, or `None` when its
/// `/proc` entry cannot be read (a server on another machine, another user's process).
async fn backend_cpu(pool: &PgPool) -> anyhow::Result<Option<Duration>> {
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(pool).await?;
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return Ok(None) };
    // Fields after the command's closing parenthesis: state is the 3rd field, utime the 14th.
    let Some((_, rest)) = stat.rsplit_once(')') else { return Ok(None) };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |index: usize| fields.get(index - 3).and_then(|f| f.parse::<u64>().ok());
    let (Some(user), Some(system)) = (ticks(14), ticks(15)) else { return Ok(None) };
    Ok(Some(Duration::from_micros((user + system) * 1_000_000 / clock_ticks())))
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`), 100 when it cannot be asked.
fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(100)
    })
}

async fn wal_lsn(pool: &PgPool) -> anyhow::Result<String> {
    Ok(sqlx::query_scalar("SELECT pg_current_wal_lsn()::text").fetch_one(pool).await?)
}

async fn wal_bytes_between(pool: &PgPool, before: &str, after: &str) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar("SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::bigint")
        .bind(before)
        .bind(after)
        .fetch_one(pool)
        .await?)
}

/// `cargo xtask bench storage`: `events` events published in batches of 1000 into the schema
/// as it stood at `core/0014_sql_publishing` and into today's, each in a database of its own;
/// prints the table's and each index's size, and the write-ahead log, per event.
pub(crate) async fn storage(server_url: &str, events: usize) -> anyhow::Result<()> {
    println!("bench storage: {events} events published with publish_many in batches of 1000, PostgreSQL over TCP");
    for (label, through) in [("before (through core/0014)", Some("core/0014_sql_publishing")), ("now", None)] {
        let db = outbox_services::ScratchDatabase::create_unmigrated(server_url, "outbox_storage").await?;
        let pool = db.pool_on(server_url, 1).await?;
        let migrator = match through {
            Some(name) => outbox_pg::Migrator::through(name).ok_or_else(|| anyhow::anyhow!("no migration {name}"))?,
            None => outbox_pg::Migrator::new(),
        };
        migrator.run(&pool).await?;
        let wal_before = wal_lsn(&pool).await?;
        let started = Instant::now();
        let batch: Vec<NewEvent> = (0..1000).map(sample_event).collect();
        let mut written = 0;
        while written < events {
            let n = (events - written).min(batch.len());
            if through.is_some() {
                // The old schema's own publishing: its SQL function writes what publish_many wrote then.
                sqlx::query("SELECT count(*) FROM outbox_publish_many($1)")
                    .bind(serde_json::to_value(&batch[..n])?)
                    .execute(&pool)
                    .await?;
            } else {
                outbox_pg::publish_many(&pool, &batch[..n]).await?;
            }
            written += n;
            if written % 200_000 == 0 {
                eprintln!("bench storage: {label}: {written} of {events}");
            }
        }
        let elapsed = started.elapsed();
        let wal = wal_bytes_between(&pool, &wal_before, &wal_lsn(&pool).await?).await?;
        sqlx::query("VACUUM ANALYZE outbox").execute(&pool).await?;
        let sizes: Vec<(String, i64)> = sqlx::query_as(
            "SELECT c.relname::text, pg_relation_size(c.oid) FROM pg_class c
             WHERE c.oid = 'outbox'::regclass
                OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'outbox'::regclass)
             ORDER BY c.relkind DESC, c.relname",
        )
        .fetch_all(&pool)
        .await?;
        let total: i64 = sqlx::query_scalar("SELECT pg_total_relation_size('outbox')").fetch_one(&pool).await?;
        let mb = |bytes: i64| bytes as f64 / 1e6;
        let parts: Vec<String> = sizes.iter().map(|(name, bytes)| format!("{name} {:.1} MB", mb(*bytes))).collect();
        println!(
            "  {label:<28} total {:.1} MB ({}); WAL {:.0} B/event; {:.0} events/s",
            mb(total),
            parts.join(", "),
            wal as f64 / events as f64,
            events as f64 / elapsed.as_secs_f64()
        );
        if through.is_some() {
            // What the write path's migrations cost on a table that already holds the events.
            let started = Instant::now();
            let report = outbox_pg::Migrator::new().run(&pool).await?;
            println!(
                "  {:<28} {} on {events} events in {:.1} s",
                "migrating to now",
                report.applied.join(", "),
                started.elapsed().as_secs_f64()
            );
        }
        drop(pool);
        db.drop_now().await?;
    }
    Ok(())
}
