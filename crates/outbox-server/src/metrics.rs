//! `GET /metrics`: the Prometheus text format (version 0.0.4), rendered from the library
//! crates' plain counters and a few database reads.
//!
//! | metric | type | what |
//! |---|---|---|
//! | `outbox_streams_open` | gauge | live `/watch` streams open in this process |
//! | `outbox_streams_opened_total` | counter | streams opened |
//! | `outbox_list_requests_total` | counter | `GET /events` pages served |
//! | `outbox_events_sent_total{tenant_class}` | counter | events sent on live streams, by `[metrics] tenant_classes` |
//! | `outbox_sink_delivered_total{sink}` | counter | events delivered and recorded by this process |
//! | `outbox_sink_delivery_calls_total{sink}` | counter | delivery calls made by this process |
//! | `outbox_sink_delivery_failures_total{sink}` | counter | of those, the calls that failed |
//! | `outbox_sink_dead_lettered_total{sink}` | counter | events this process dead-lettered |
//! | `outbox_sink_dead_letters{sink}` | gauge | pending dead letters (database) |
//! | `outbox_sink_lag{sink}` | gauge | matching events behind the head (database, capped at 1,000,000) |
//! | `outbox_sink_backing_off{sink}` | gauge | 1 while the sink backs off |
//! | `outbox_retention_passes_total` | counter | retention passes run by this process |
//! | `outbox_retention_rows_deleted_total` | counter | rows retention deleted in this process |
//! | `outbox_retention_failures_total` | counter | passes that failed |
//! | `outbox_xmin_horizon_age_seconds` | gauge | how long the oldest transaction holding an id has been open: how far every reader is held back |
//! | `outbox_tail_poll_duration_seconds` | summary | the shared tail's polls (count, sum), when the process runs one |
//!
//! Counters count since the process started. The database reads run on every scrape; a
//! read that fails leaves its metrics out and sets `outbox_metrics_database_up` to 0.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use outbox_workers::{SinkState, SinkStatus};

use crate::state::AppState;

/// The media type of the answer.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A text-format writer: one `# HELP` and `# TYPE` per family, then its samples.
#[derive(Default)]
struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
            let _ = write!(self.0, "{{{}}}", labels.join(","));
        }
        let _ = writeln!(self.0, " {value}");
    }

    fn one(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }
}

/// A label value with `\`, `"` and line breaks escaped.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// A per-sink metric read from what this process's loop knows: name, help, value.
type LocalMetric = (&'static str, &'static str, fn(&outbox_workers::LocalState) -> u64);

/// A per-sink metric read from the database: name, help, value.
type StatusMetric = (&'static str, &'static str, fn(&outbox_workers::SinkStatus) -> f64);

/// The whole exposition for this process.
pub async fn render(state: &AppState) -> String {
    let mut out = Exposition::default();
    http(state, &mut out);
    let database_up = sinks(state, &mut out).await & xmin(state, &mut out).await;
    retention(state, &mut out);
    tail(state, &mut out);
    out.one(
        "outbox_metrics_database_up",
        "gauge",
        "1 when every database read of this scrape succeeded",
        f64::from(u8::from(database_up)),
    );
    out.0
}

fn http(state: &AppState, out: &mut Exposition) {
    let stats = state.service.stats();
    out.one(
        "outbox_streams_open",
        "gauge",
        "Live /watch streams open in this process.",
        state.service.registry().len() as f64,
    );
    out.one("outbox_streams_opened_total", "counter", "Live /watch streams opened.", stats.streams_opened() as f64);
    out.one("outbox_list_requests_total", "counter", "GET /events pages served.", stats.list_requests() as f64);
    let mut by_class: BTreeMap<&str, u64> = BTreeMap::from([("default", 0)]);
    let sent = stats.events_sent();
    for (tenant, count) in &sent {
        *by_class.entry(state.ops.tenant_class(tenant)).or_default() += count;
    }
    out.family("outbox_events_sent_total", "counter", "Events sent on live streams, by tenant class.");
    for (class, count) in by_class {
        out.sample("outbox_events_sent_total", &[("tenant_class", class)], count as f64);
    }
}

/// Sink metrics; false when the database could not be read.
async fn sinks(state: &AppState, out: &mut Exposition) -> bool {
    let ids = state.sinks.ids();
    let locals: Vec<_> = ids.iter().map(|id| (*id, state.sinks.local_state(id).unwrap_or_default())).collect();
    let counters: [LocalMetric; 4] = [
        ("outbox_sink_delivered_total", "Events delivered and recorded by this process.", |l| l.delivered),
        ("outbox_sink_delivery_calls_total", "Delivery calls made by this process.", |l| l.delivery_calls),
        ("outbox_sink_delivery_failures_total", "Delivery calls that failed in this process.", |l| l.failed_calls),
        ("outbox_sink_dead_lettered_total", "Events this process dead-lettered.", |l| l.dead_lettered),
    ];
    for (name, help, value) in counters {
        out.family(name, "counter", help);
        for (id, local) in &locals {
            out.sample(name, &[("sink", id)], value(local) as f64);
        }
    }
    let statuses = match state.sinks.statuses().await {
        Ok(statuses) => statuses,
        Err(error) => {
            tracing::warn!(%error, "metrics: reading the sinks' state failed");
            return false;
        }
    };
    let gauges: [StatusMetric; 3] = [
        ("outbox_sink_dead_letters", "Pending dead letters.", |s| s.dead_letters as f64),
        ("outbox_sink_lag", "Matching events behind the head (capped at 1000000).", |s| s.lag as f64),
        ("outbox_sink_backing_off", "1 while the sink backs off after failures.", |s| {
            f64::from(u8::from(s.state == SinkState::BackingOff))
        }),
    ];
    for (name, help, value) in gauges {
        out.family(name, "gauge", help);
        for status in &statuses {
            out.sample(name, &[("sink", &status.id)], value(status));
        }
    }
    lanes(&statuses, out);
    true
}

/// Each lane's lag of the sinks that have lanes (SPEC §7.7), and which lane is the slowest.
fn lanes(statuses: &[SinkStatus], out: &mut Exposition) {
    let laned: Vec<&SinkStatus> = statuses.iter().filter(|status| !status.lanes.is_empty()).collect();
    if laned.is_empty() {
        return;
    }
    out.family("outbox_sink_lane_lag", "gauge", "A lane's matching events behind the head (capped at 1000000).");
    for status in &laned {
        for lane in &status.lanes {
            out.sample(
                "outbox_sink_lane_lag",
                &[("sink", &status.id), ("lane", &lane.lane.to_string())],
                lane.lag as f64,
            );
        }
    }
    out.family("outbox_sink_slowest_lane", "gauge", "The lane whose cursor is furthest behind.");
    for status in &laned {
        if let Some(slowest) = status.slowest_lane {
            out.sample("outbox_sink_slowest_lane", &[("sink", &status.id)], f64::from(slowest));
        }
    }
}

fn retention(state: &AppState, out: &mut Exposition) {
    let Some(retention) = &state.ops.retention else { return };
    let stats = retention.stats();
    let load = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed) as f64;
    out.one("outbox_retention_passes_total", "counter", "Retention passes run by this process.", load(&stats.passes));
    out.one(
        "outbox_retention_rows_deleted_total",
        "counter",
        "Outbox rows retention deleted in this process.",
        load(&stats.rows_deleted),
    );
    out.one("outbox_retention_failures_total", "counter", "Retention passes that failed.", load(&stats.failures));
}

async fn xmin(state: &AppState, out: &mut Exposition) -> bool {
    match outbox_pg::internal::inspect::xmin_horizon_age(&state.pool).await {
        Ok(age) => {
            out.one(
                "outbox_xmin_horizon_age_seconds",
                "gauge",
                "How long the oldest transaction holding an id has been open: how far every reader is held back.",
                age.as_secs_f64(),
            );
            true
        }
        Err(error) => {
            tracing::warn!(%error, "metrics: reading the xmin horizon failed");
            false
        }
    }
}

fn tail(state: &AppState, out: &mut Exposition) {
    let Some(tail) = &state.ops.tail else { return };
    let (count, total) = tail.polls();
    let name = "outbox_tail_poll_duration_seconds";
    out.family(name, "summary", "The shared tail's polls of the outbox.");
    out.sample(&format!("{name}_count"), &[], count as f64);
    out.sample(&format!("{name}_sum"), &[], total.as_secs_f64());
}
