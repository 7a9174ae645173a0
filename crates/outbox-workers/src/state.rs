//! What each sink is doing: its position, lag, state, last error and lease holder
//! (SPEC §5.7 `GET /sinks`, `outbox sinks list`).
//!
//! Everything comes from the database, so any process (another server, the CLI) can
//! show any sink: position, lag, lease holder and dead letters, and the last error and
//! backoff that the lease holder reports in `outbox_sink_health` when a delivery fails
//! and when it recovers. The process whose dispatcher runs the sink completes it with
//! what it knows at once ([`LocalState`]): whether it is delivering or idle right now.

use outbox_core::{Position, millis};
use outbox_pg::internal::cursor::{self, OUTBOX_STREAM, sink_name};
use outbox_pg::internal::{dead_letter, lease, sink_health};
use outbox_pg::sqlx::PgPool;
use outbox_pg::{Lane, ReadRequest};
use serde::Serialize;
use time::OffsetDateTime;

use crate::{Result, SinkFilter};

/// Lag is counted up to this many events; a sink further behind shows this number.
pub const LAG_CAP: u64 = cursor::LAG_CAP;

/// What a sink's loop is doing in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    /// Started, not yet holding its lease.
    Starting,
    /// Another worker holds the lease; this one waits to take over.
    Standby,
    /// Holding the lease, caught up, polling for new events.
    Idle,
    /// Holding the lease, delivering.
    Delivering,
    /// Holding the lease, waiting after a failure.
    BackingOff {
        /// When the next attempt starts.
        until: OffsetDateTime,
    },
    /// The dispatcher shut down.
    Stopped,
}

/// A sink's state as its dispatcher in this process knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalState {
    /// What the loop is doing.
    pub activity: Activity,
    /// The cursor as this process last read or saved it.
    pub position: Option<Position>,
    /// The lease epoch while this process holds the lease.
    pub lease_epoch: Option<i64>,
    /// The last failure (delivery or database), kept after recovery.
    pub last_error: Option<String>,
    /// When it happened, by the dispatcher's clock.
    pub last_error_at: Option<OffsetDateTime>,
    /// Events delivered and recorded by this process.
    pub delivered: u64,
    /// Events this process dead-lettered.
    pub dead_lettered: u64,
    /// Calls to the sink's `deliver` made by this process.
    pub delivery_calls: u64,
    /// Of those, the calls that failed.
    pub failed_calls: u64,
    /// Times this process lost the lease while holding it.
    pub leases_lost: u64,
    /// Progress writes the fence refused because the lease was gone (nothing was written).
    pub fenced_out: u64,
}

impl Default for LocalState {
    fn default() -> LocalState {
        LocalState {
            activity: Activity::Starting,
            position: None,
            lease_epoch: None,
            last_error: None,
            last_error_at: None,
            delivered: 0,
            dead_lettered: 0,
            delivery_calls: 0,
            failed_calls: 0,
            leases_lost: 0,
            fenced_out: 0,
        }
    }
}

impl LocalState {
    /// The lanes of one sink taken together: the slowest lane's position, the counts added
    /// up, the last error of any, a lease epoch while any lane is held, and the busiest
    /// activity (delivering, then backing off, idle, standby, starting, stopped).
    pub fn merged(lanes: &[LocalState]) -> LocalState {
        let Some(first) = lanes.first() else { return LocalState::default() };
        let rank = |activity: &Activity| match activity {
            Activity::Delivering => 0,
            Activity::BackingOff { .. } => 1,
            Activity::Idle => 2,
            Activity::Standby => 3,
            Activity::Starting => 4,
            Activity::Stopped => 5,
        };
        let last_error = lanes.iter().filter(|lane| lane.last_error_at.is_some()).max_by_key(|lane| lane.last_error_at);
        LocalState {
            activity: lanes
                .iter()
                .map(|lane| &lane.activity)
                .min_by_key(|a| rank(a))
                .unwrap_or(&first.activity)
                .clone(),
            position: lanes.iter().map(|lane| lane.position).min().flatten(),
            lease_epoch: lanes.iter().find_map(|lane| lane.lease_epoch),
            last_error: last_error.and_then(|lane| lane.last_error.clone()),
            last_error_at: last_error.and_then(|lane| lane.last_error_at),
            delivered: lanes.iter().map(|lane| lane.delivered).sum(),
            dead_lettered: lanes.iter().map(|lane| lane.dead_lettered).sum(),
            delivery_calls: lanes.iter().map(|lane| lane.delivery_calls).sum(),
            failed_calls: lanes.iter().map(|lane| lane.failed_calls).sum(),
            leases_lost: lanes.iter().map(|lane| lane.leases_lost).sum(),
            fenced_out: lanes.iter().map(|lane| lane.fenced_out).sum(),
        }
    }
}

/// The state shown for a sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SinkState {
    /// Delivering events (held elsewhere: its lease is held and it has lag).
    Delivering,
    /// Waiting after a failure, until `backingOffUntil`.
    BackingOff,
    /// Caught up.
    Idle,
    /// No process holds its lease.
    NotRunning,
}

/// A sink's status (the JSON of `GET /sinks/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SinkStatus {
    /// The sink's id.
    pub id: String,
    /// Its durable cursor; `None` before its first save.
    pub position: Option<Position>,
    /// Events matching its filter behind the head (at most [`LAG_CAP`]).
    pub lag: u64,
    /// Whether the count of `lag` stopped at [`LAG_CAP`]: "at least this many" (shown only when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lag_capped: bool,
    /// What it is doing.
    pub state: SinkState,
    /// When the next attempt starts, while backing off.
    #[serde(with = "optional_millis", skip_serializing_if = "Option::is_none")]
    pub backing_off_until: Option<OffsetDateTime>,
    /// The last failure this process saw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When it happened.
    #[serde(with = "optional_millis", skip_serializing_if = "Option::is_none")]
    pub last_error_at: Option<OffsetDateTime>,
    /// Who holds the lease now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_holder: Option<String>,
    /// Dead letters not replayed yet.
    pub dead_letters: u64,
    /// With ordered lanes (SPEC §7.7), each lane's cursor, lag and lease holder (`position`
    /// above is then the slowest lane's, `lag` their sum); omitted for one lane.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<LaneStatus>,
    /// With ordered lanes, the lane of the most lag (the lowest such lane).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowest_lane: Option<u32>,
}

/// One lane of a sink or subscription (SPEC §7.7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LaneStatus {
    /// Its index, from 0.
    pub lane: u32,
    /// Its cursor; `None` before the lane's first save.
    pub position: Option<Position>,
    /// Its events behind the head (at most [`LAG_CAP`]).
    pub lag: u64,
    /// Whether `lag` stopped at [`LAG_CAP`] (shown only when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lag_capped: bool,
    /// Who holds its lease now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_holder: Option<String>,
}

/// Each lane's cursor and lag of the consumer whose cursor is `(stream, name)` and whose
/// events `request` reads, and the slowest lane (the most lag, the lowest such index).
pub async fn lane_lags(
    pool: &PgPool,
    (stream, name): (&str, &str),
    request: &ReadRequest,
    lanes: u32,
) -> Result<(Vec<(Lane, Option<Position>, u64)>, Option<u32>)> {
    let marks = cursor::lane_marks(pool, stream, name).await?;
    let mut all = Vec::new();
    for lane in (0..lanes).filter_map(|index| Lane::new(index, lanes)) {
        let lane_cursor = cursor::lane_name(name, lane);
        let position = marks.iter().find(|(stored, _)| *stored == lane_cursor).map(|(_, mark)| mark.position);
        let lanes_request = request.clone().lane((lanes > 1).then_some(lane)).after(position);
        let lag = cursor::lag(pool, &lanes_request, LAG_CAP).await?;
        all.push((lane, position, lag));
    }
    let slowest = all.iter().max_by_key(|(lane, _, lag)| (*lag, std::cmp::Reverse(lane.index))).map(|(l, ..)| l.index);
    Ok((all, slowest))
}

/// A sink's status from the database, completed by `local` when this process runs it.
///
/// Run elsewhere, a sink whose lease is held is backing off while its holder's last report
/// says so, else delivering while it has lag, else idle.
pub async fn sink_status(
    pool: &PgPool,
    id: &str,
    filter: &SinkFilter,
    lanes: u32,
    local: Option<&LocalState>,
) -> Result<SinkStatus> {
    let behind = ReadRequest { tenant_id: filter.tenant.clone(), patterns: filter.types.clone(), ..ReadRequest::all() };
    let (lane_lags, slowest) = lane_lags(pool, (OUTBOX_STREAM, &sink_name(id)), &behind, lanes).await?;
    let position = lane_lags.iter().map(|(_, position, _)| *position).min().flatten();
    let lag = lane_lags.iter().map(|(_, _, lag)| lag).sum::<u64>();
    let lag_capped = lane_lags.iter().any(|(_, _, lag)| *lag >= LAG_CAP);
    let mut lane_statuses = Vec::new();
    let mut lease = None;
    for (lane, position, lag) in lane_lags {
        let name = match lanes {
            1 => lease::dispatch_name(id),
            _ => crate::dispatcher::lane_lease(&lease::dispatch_name(id), lane.index),
        };
        let held = lease::get(pool, &name).await?.filter(|lease| lease.held);
        if lanes > 1 {
            let lease_holder = held.as_ref().and_then(|lease| lease.holder.clone());
            lane_statuses.push(LaneStatus {
                lane: lane.index,
                position,
                lag,
                lag_capped: lag >= LAG_CAP,
                lease_holder,
            });
        }
        lease = lease.or(held);
    }
    let health = sink_health::get(pool, id).await?;
    let dead_letters = dead_letter::count_pending(pool).await?;
    let dead_letters = dead_letters.into_iter().find(|(sink, _)| sink == id).map_or(0, |(_, n)| n);
    let running_here = local.filter(|local| local.lease_epoch.is_some());
    let reported_backoff = health.as_ref().filter(|health| health.backing_off).and_then(|h| h.backing_off_until);
    let (state, until) = match (running_here.map(|local| &local.activity), &lease, reported_backoff) {
        (Some(Activity::BackingOff { until }), _, _) => (SinkState::BackingOff, Some(*until)),
        (Some(Activity::Delivering), _, _) => (SinkState::Delivering, None),
        (Some(_), _, _) => (SinkState::Idle, None),
        (None, Some(_), Some(until)) => (SinkState::BackingOff, Some(until)),
        (None, Some(_), None) if lag > 0 => (SinkState::Delivering, None),
        (None, Some(_), None) => (SinkState::Idle, None),
        (None, None, _) => (SinkState::NotRunning, None),
    };
    let (last_error, last_error_at) = match (local.and_then(|local| local.last_error.clone()), health) {
        (Some(error), _) => (Some(error), local.and_then(|local| local.last_error_at)),
        (None, Some(health)) => (health.last_error, health.last_error_at),
        (None, None) => (None, None),
    };
    Ok(SinkStatus {
        id: id.to_owned(),
        position,
        lag,
        lag_capped,
        state,
        backing_off_until: until,
        last_error,
        last_error_at,
        lease_holder: lease.and_then(|lease| lease.holder),
        dead_letters,
        lanes: lane_statuses,
        slowest_lane: (lanes > 1).then_some(slowest).flatten(),
    })
}

mod optional_millis {
    use serde::Serializer;
    use time::OffsetDateTime;

    pub(super) fn serialize<S: Serializer>(time: &Option<OffsetDateTime>, serializer: S) -> Result<S::Ok, S::Error> {
        match time {
            Some(time) => serializer.serialize_str(&super::millis::format(*time)),
            None => serializer.serialize_none(),
        }
    }
}
