//! The doctor (SPEC §9): [`self_check`] reads the database and returns [`Finding`]s an
//! operator can act on. It only reads; it needs the database, not a running server.
//!
//! | check | severity | when |
//! |---|---|---|
//! | `migrations.drifted` | error | an applied migration's SQL changed |
//! | `migrations.pending` | error | the code has migrations the database lacks |
//! | `migrations.unknown` | warning | the ledger names migrations the code does not know |
//! | `transactions.long` | warning | a transaction holding a transaction id is open longer than the threshold: every stream is held back |
//! | `transactions.snapshot` | info | a snapshot (no transaction id) is that old: vacuum is held back |
//! | `sinks.dead-letters` | error | a sink has pending dead letters (count) |
//! | `sinks.lagging` | warning | a sink is more events behind than the threshold (count) |
//! | `sinks.backing-off` | warning | a sink backs off after failures |
//! | `sinks.not-running` | warning | a sink has lag and no process holds its lease |
//! | `retention.backlog` | warning | rows older than `min_age` are kept by a cursor (named; count) |
//! | `retention.idle` | info | no durable cursor holds the outbox, so nothing is pruned |
//! | `leases.expired` | warning | a lease still names a holder that let it expire |
//!
//! Checks that cannot run (the database refused) become one `doctor.<check>` error finding
//! each instead of failing the whole report.

use std::time::Duration;

use outbox_pg::Migrator;
use outbox_pg::internal::{dead_letter, inspect, retention};
use outbox_pg::sqlx::PgPool;
use serde::{Deserialize, Serialize};

use crate::{SinkFilter, SinkState, sink_status};

/// How bad a finding is. Any `Error` makes `outbox doctor` exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Needs attention soon.
    Warning,
    /// Broken: events are not flowing, or will not.
    Error,
}

/// One thing the doctor found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What was checked, e.g. `sinks.dead-letters`.
    pub check: String,
    /// How bad it is.
    pub severity: Severity,
    /// What was found.
    pub message: String,
    /// What to do about it.
    pub fix: String,
    /// How many, when counting makes sense.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

impl Finding {
    fn new(check: &str, severity: Severity, message: String, fix: impl Into<String>) -> Finding {
        Finding { check: check.into(), severity, message, fix: fix.into(), count: None }
    }

    fn count(mut self, count: u64) -> Finding {
        self.count = Some(count);
        self
    }
}

/// The thresholds of the checks. The server's `[doctor]` table is this type, read with the
/// keys `long_transaction_seconds` and `sink_lag_events`; a key left out keeps its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// A transaction open longer than this is reported (default 60 s).
    #[serde(rename = "long_transaction_seconds", deserialize_with = "seconds")]
    pub long_transaction: Duration,
    /// A sink further behind than this many events is reported (default 10,000).
    #[serde(rename = "sink_lag_events")]
    pub sink_lag: u64,
}

/// A duration written as whole seconds.
fn seconds<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    u64::deserialize(deserializer).map(Duration::from_secs)
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds { long_transaction: Duration::from_secs(60), sink_lag: 10_000 }
    }
}

/// What [`self_check`] looks at.
#[derive(Debug, Clone)]
pub struct DoctorConfig {
    /// The migrations the code knows (core and every registered owner).
    pub migrator: Migrator,
    /// The configured sinks, their filters and their lanes.
    pub sinks: Vec<(String, SinkFilter, u32)>,
    /// Retention's settings: its minimum age and which cursors hold it.
    pub min_age: Duration,
    /// Which cursors hold retention back.
    pub holders: retention::Holders,
    /// The thresholds.
    pub thresholds: Thresholds,
}

/// Counted up to this many rows, a retention backlog shows this number.
pub const BACKLOG_CAP: u64 = 1_000_000;

/// Runs every check; findings come most severe first.
pub async fn self_check(pool: &PgPool, config: &DoctorConfig) -> Vec<Finding> {
    let mut findings = Vec::new();
    let checks = [
        ("migrations", migrations(pool, config).await),
        ("transactions", transactions(pool, config).await),
        ("sinks", sinks(pool, config).await),
        ("retention", retention_backlog(pool, config).await),
        ("leases", leases(pool).await),
    ];
    for (check, result) in checks {
        match result {
            Ok(found) => findings.extend(found),
            Err(error) => findings.push(Finding::new(
                &format!("doctor.{check}"),
                Severity::Error,
                format!("the {check} check could not run: {error}"),
                "check that DATABASE_URL points at the outbox's database and that it answers",
            )),
        }
    }
    findings.sort_by_key(|finding| std::cmp::Reverse(finding.severity));
    findings
}

type Found = outbox_pg::Result<Vec<Finding>>;

async fn migrations(pool: &PgPool, config: &DoctorConfig) -> Found {
    let status = config.migrator.status(pool).await?;
    let mut found = Vec::new();
    if !status.drifted.is_empty() {
        found.push(
            Finding::new(
                "migrations.drifted",
                Severity::Error,
                format!("applied migrations changed after they were applied: {}", status.drifted.join(", ")),
                "never edit an applied migration: restore its SQL as it was applied and add a new migration",
            )
            .count(status.drifted.len() as u64),
        );
    }
    if !status.pending.is_empty() {
        found.push(
            Finding::new(
                "migrations.pending",
                Severity::Error,
                format!("migrations not applied yet: {}", status.pending.join(", ")),
                "run `outbox migrate` (every `outbox serve` also migrates at start)",
            )
            .count(status.pending.len() as u64),
        );
    }
    if !status.unknown.is_empty() {
        found.push(
            Finding::new(
                "migrations.unknown",
                Severity::Warning,
                format!("the ledger holds migrations this binary does not know: {}", status.unknown.join(", ")),
                "run a binary that registers these owners, or check that this is the right database",
            )
            .count(status.unknown.len() as u64),
        );
    }
    Ok(found)
}

async fn transactions(pool: &PgPool, config: &DoctorConfig) -> Found {
    let open = inspect::open_transactions(pool, config.thresholds.long_transaction).await?;
    Ok(open.iter().map(transaction_finding).collect())
}

fn transaction_finding(tx: &inspect::OpenTransaction) -> Finding {
    let query_start = tx.query_start.map_or_else(|| "-".into(), outbox_core::millis::format);
    let who = format!(
        "pid {} (application {:?}, database {}, {}) open for {}s, query started {query_start}: {:?}",
        tx.pid,
        tx.application_name,
        tx.database.as_deref().unwrap_or("-"),
        tx.state.as_deref().unwrap_or("-"),
        tx.age.as_secs(),
        tx.query,
    );
    if tx.holds_streams {
        Finding::new(
            "transactions.long",
            Severity::Warning,
            format!("streams are held back: {who}; no event written after it started reaches any reader until it ends"),
            format!(
                "end that transaction (commit it, or SELECT pg_terminate_backend({})) and keep transactions short",
                tx.pid
            ),
        )
    } else {
        Finding::new(
            "transactions.snapshot",
            Severity::Info,
            format!("a long snapshot holds vacuum back: {who}"),
            "end it; it does not stop streams, but rows retention deleted stay on disk until it ends",
        )
    }
}

async fn sinks(pool: &PgPool, config: &DoctorConfig) -> Found {
    let mut found = Vec::new();
    let pending = dead_letter::count_pending(pool).await?;
    for (sink, count) in pending.into_iter().filter(|(_, count)| *count > 0) {
        found.push(
            Finding::new(
                "sinks.dead-letters",
                Severity::Error,
                format!("sink {sink} has {count} pending dead letters: events it refused and skipped"),
                format!("look at them with `outbox dead-letters list --sink {sink}`, then replay or discard them"),
            )
            .count(count),
        );
    }
    for (id, filter, lanes) in &config.sinks {
        let status = sink_status(pool, id, filter, *lanes, None).await.map_err(|error| match error {
            crate::Error::Database(error) => error,
            other => outbox_pg::Error::InvalidRequest(other.to_string()),
        })?;
        found.extend(sink_findings(&status, &config.thresholds));
    }
    Ok(found)
}

fn sink_findings(status: &crate::SinkStatus, thresholds: &Thresholds) -> Vec<Finding> {
    let id = &status.id;
    let mut found = Vec::new();
    let error = status.last_error.as_deref().unwrap_or("-");
    if status.state == SinkState::BackingOff {
        let until = status.backing_off_until.map_or_else(|| "-".into(), outbox_core::millis::format);
        found.push(Finding::new(
            "sinks.backing-off",
            Severity::Warning,
            format!("sink {id} backs off until {until} after failures; last error: {error}"),
            format!("fix what the error names; `outbox sinks list` shows sink {id}'s state"),
        ));
    }
    if status.state == SinkState::NotRunning && status.lag > 0 {
        found.push(
            Finding::new(
                "sinks.not-running",
                Severity::Warning,
                format!("sink {id} is {} events behind and no process holds its lease", status.lag),
                "start a process with the sinks role (`outbox serve --roles sinks`) that configures it",
            )
            .count(status.lag),
        );
    }
    if status.lag > thresholds.sink_lag {
        found.push(
            Finding::new(
                "sinks.lagging",
                Severity::Warning,
                format!(
                    "sink {id} is {} events behind (threshold {}){}; last error: {error}",
                    status.lag,
                    thresholds.sink_lag,
                    slowest_lane(status)
                ),
                "check the sink's target and its errors; a slow target needs a larger batch",
            )
            .count(status.lag),
        );
    }
    found
}

/// `, the slowest of its N lanes is lane L, M behind` for a sink with lanes.
fn slowest_lane(status: &crate::SinkStatus) -> String {
    let Some(slowest) = status.slowest_lane else { return String::new() };
    let lag = status.lanes.iter().find(|lane| lane.lane == slowest).map_or(0, |lane| lane.lag);
    format!(", the slowest of its {} lanes is lane {slowest}, {lag} behind", status.lanes.len())
}

async fn retention_backlog(pool: &PgPool, config: &DoctorConfig) -> Found {
    let cursors = retention::holding_cursors(pool, &config.holders).await?;
    let Some(lowest) = cursors.first() else {
        return Ok(vec![Finding::new(
            "retention.idle",
            Severity::Info,
            "no durable cursor holds the outbox, so retention prunes nothing and the table grows".into(),
            "configure a sink (its cursor lets retention prune what it has passed)",
        )]);
    };
    let pinned = retention::backlog(pool, lowest.position, config.min_age, BACKLOG_CAP).await?;
    if pinned == 0 {
        return Ok(Vec::new());
    }
    Ok(vec![
        Finding::new(
            "retention.backlog",
            Severity::Warning,
            format!(
                "cursor {} (at {}) keeps {pinned} rows older than {}s from being pruned",
                lowest.name,
                lowest.position,
                config.min_age.as_secs()
            ),
            format!(
                "let {} catch up (see `outbox sinks list`), or remove its sink from [[sinks]] so it no longer holds retention",
                lowest.name
            ),
        )
        .count(pinned),
    ])
}

async fn leases(pool: &PgPool) -> Found {
    let expired = inspect::expired_leases(pool).await?;
    Ok(expired
        .into_iter()
        .map(|lease| {
            Finding::new(
                "leases.expired",
                Severity::Warning,
                format!(
                    "lease {} expired at {} still naming {}: that process stopped without releasing it",
                    lease.name,
                    outbox_core::millis::format(lease.expired_at),
                    lease.holder
                ),
                "nothing, if another process takes it over soon; otherwise start a process with the role that runs it",
            )
        })
        .collect())
}
