//! The JSON the webhook routes answer: a subscription ([`WebhookView`]) and an attempt
//! ([`AttemptView`]), made from `outbox-pg`'s rows, which carry no serialization of their own.

use std::collections::BTreeMap;

use outbox_core::webhook::Secret;
use outbox_pg::internal::webhook::{Attempt, LaneLag, Overview};
use serde::Serialize;
use time::OffsetDateTime;

/// A subscription as every answer shows it: its fields, its headers' names (values
/// redacted), its position and lag, its newest attempt and, once, its secret.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebhookView {
    id: String,
    tenant_id: String,
    url: String,
    types: Vec<String>,
    description: String,
    header_names: Vec<String>,
    metadata: serde_json::Value,
    enabled: bool,
    disabled_reason: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    failing_since: Option<OffsetDateTime>,
    gap: bool,
    lanes: u32,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    updated_at: OffsetDateTime,
    headers: BTreeMap<String, &'static str>,
    position: String,
    lag: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    lag_capped: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_attempt: Option<LastAttempt>,
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
    /// Each lane's cursor and lag, in a single subscription's answer when it has lanes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    lane_lags: Vec<LaneView>,
    /// The lane furthest behind, with `lane_lags`.
    #[serde(skip_serializing_if = "Option::is_none")]
    slowest_lane: Option<u32>,
    /// What a change of `lanes` does, in the answer that made one.
    #[serde(skip_serializing_if = "Option::is_none")]
    notice: Option<&'static str>,
}

/// What an answer that changed `lanes` says.
pub(crate) const LANES_CHANGED: &str = "lanes changed: every new lane starts at the slowest old lane's cursor, \
     so events after it that faster lanes had delivered are delivered again (at least once, never a gap)";

/// One ordered lane in a subscription's answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LaneView {
    lane: u32,
    position: String,
    lag: u64,
}

impl WebhookView {
    /// The view of `overview`, showing `secret` when the answer is the one that made it.
    pub(crate) fn new(overview: Overview, secret: Option<Secret>) -> WebhookView {
        let lag_capped = overview.lag_capped();
        let Overview { webhook, lag, last_attempt } = overview;
        WebhookView {
            headers: webhook.header_names.iter().map(|name| (name.clone(), "<redacted>")).collect(),
            position: webhook.position.dotted(),
            id: webhook.id,
            tenant_id: webhook.tenant_id,
            url: webhook.url,
            types: webhook.types,
            description: webhook.description,
            header_names: webhook.header_names,
            metadata: webhook.metadata,
            enabled: webhook.enabled,
            disabled_reason: webhook.disabled_reason,
            failing_since: webhook.failing_since,
            gap: webhook.gap,
            lanes: webhook.lanes,
            created_at: webhook.created_at,
            updated_at: webhook.updated_at,
            lag,
            lag_capped,
            last_attempt: last_attempt.map(|attempt| LastAttempt {
                time: attempt.time,
                status: attempt.status,
                duration_ms: attempt.duration_ms,
            }),
            secret: secret.map(|secret| secret.expose()),
            lane_lags: Vec::new(),
            slowest_lane: None,
            notice: None,
        }
    }

    /// The view with each lane's cursor and lag, and the slowest lane: the one with the most
    /// lag, the lowest index among equals (as a sink's status says it).
    pub(crate) fn with_lanes(mut self, lanes: Vec<LaneLag>) -> WebhookView {
        let slowest = lanes.iter().max_by_key(|lane| (lane.lag, std::cmp::Reverse(lane.lane)));
        self.slowest_lane = slowest.map(|lane| lane.lane);
        self.lane_lags = lanes
            .into_iter()
            .map(|lane| LaneView { lane: lane.lane, position: lane.position.dotted(), lag: lane.lag })
            .collect();
        self
    }

    /// The view saying what a change of `lanes` does.
    pub(crate) fn with_notice(mut self, notice: &'static str) -> WebhookView {
        self.notice = Some(notice);
        self
    }
}

/// The newest attempt, as a subscription's view sums it up.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LastAttempt {
    #[serde(with = "time::serde::rfc3339")]
    time: OffsetDateTime,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    duration_ms: u32,
}

/// One delivery attempt or ping, as `GET /webhooks/{id}/attempts` lists it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AttemptView {
    #[serde(with = "time::serde::rfc3339")]
    time: OffsetDateTime,
    event_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    duration_ms: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response: Option<String>,
}

impl From<Attempt> for AttemptView {
    fn from(attempt: Attempt) -> AttemptView {
        let Attempt { time, event_id, status, duration_ms, error, response } = attempt;
        AttemptView { time, event_id, status, duration_ms, error, response }
    }
}
