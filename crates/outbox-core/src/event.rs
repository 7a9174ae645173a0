//! The event as an application writes it ([`NewEvent`]) and as every reader
//! returns it ([`Event`], the JSON shape of SPEC §3.3).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::{Data, Position};

/// An event to publish. The outbox adds its `id` and `time` when it writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewEvent {
    /// The event type, e.g. `reservation.active` (SPEC §3.2).
    #[serde(rename = "type")]
    pub event_type: String,
    /// The tenant the event belongs to; only this tenant's readers see it.
    pub tenant_id: String,
    /// What the event is about, `<kind>/<id>`, e.g. `reservation/rsv_01`.
    pub subject: String,
    /// The event's own fields: a JSON object.
    pub data: Value,
}

impl NewEvent {
    /// An event of `event_type` about `subject` in `tenant_id`, carrying `data`.
    pub fn new(
        event_type: impl Into<String>,
        tenant_id: impl Into<String>,
        subject: impl Into<String>,
        data: Value,
    ) -> NewEvent {
        NewEvent { event_type: event_type.into(), tenant_id: tenant_id.into(), subject: subject.into(), data }
    }
}

/// A committed event, as list, watch, subscribers and sinks return it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// `evt_` followed by a lowercase ULID.
    pub id: String,
    /// The event type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// The tenant the event belongs to.
    pub tenant_id: String,
    /// What the event is about, `<kind>/<id>`.
    pub subject: String,
    /// When the outbox wrote it, by the database clock; RFC 3339 UTC with milliseconds.
    #[serde(with = "millis")]
    pub time: OffsetDateTime,
    /// Its position, written dotted.
    pub sequence: Position,
    /// The event's own fields, as compact JSON text; see [`Data`].
    pub data: Data,
}

/// `time` as RFC 3339 in UTC with exactly three fraction digits and `Z`,
/// e.g. `2026-09-24T10:15:02.114Z`. Any RFC 3339 text is accepted on input.
pub mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use time::format_description::well_known::Rfc3339;
    use time::macros::format_description;
    use time::{OffsetDateTime, UtcOffset};

    const FORMAT: &[time::format_description::BorrowedFormatItem<'static>] =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

    /// Formats `time` in the event shape's form.
    pub fn format(time: OffsetDateTime) -> String {
        time.to_offset(UtcOffset::UTC).format(FORMAT).expect("every UTC time in range formats")
    }

    /// Parses any RFC 3339 time.
    pub fn parse(text: &str) -> Result<OffsetDateTime, time::error::Parse> {
        OffsetDateTime::parse(text, &Rfc3339)
    }

    /// Serializes in the event shape's form.
    pub fn serialize<S: Serializer>(time: &OffsetDateTime, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format(*time))
    }

    /// Deserializes any RFC 3339 time.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<OffsetDateTime, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use time::macros::datetime;

    #[test]
    fn serializes_in_the_spec_shape_and_order() {
        let event = Event {
            id: "evt_01k5y3v0m6y8x7w5t4s3r2p1n0".into(),
            event_type: "reservation.active".into(),
            tenant_id: "acme".into(),
            subject: "reservation/rsv_01".into(),
            time: datetime!(2026-09-24 12:15:02.114_9 +02:00),
            sequence: Position::new(88213, 51120),
            data: json!({"state": "active"}).into(),
        };
        let text = serde_json::to_string(&event).unwrap();
        assert_eq!(
            text,
            r#"{"id":"evt_01k5y3v0m6y8x7w5t4s3r2p1n0","type":"reservation.active","tenantId":"acme","subject":"reservation/rsv_01","time":"2026-09-24T10:15:02.114Z","sequence":"88213.51120","data":{"state":"active"}}"#
        );
        let back: Event = serde_json::from_str(&text).unwrap();
        assert_eq!(back.time, datetime!(2026-09-24 10:15:02.114 UTC));
        assert_eq!(back.sequence, event.sequence);
    }

    #[test]
    fn whole_seconds_still_print_three_digits() {
        assert_eq!(millis::format(datetime!(2026-01-02 03:04:05 UTC)), "2026-01-02T03:04:05.000Z");
    }

    #[test]
    fn new_event_reads_the_wire_shape_and_refuses_unknown_fields() {
        let event: NewEvent = serde_json::from_value(json!({
            "type": "node.joined", "tenantId": "acme", "subject": "node/n1", "data": {}
        }))
        .unwrap();
        assert_eq!(event.event_type, "node.joined");
        let unknown = serde_json::from_value::<NewEvent>(json!({
            "type": "node.joined", "tenantId": "acme", "subject": "node/n1", "data": {}, "tenant": "x"
        }));
        assert!(unknown.is_err());
    }
}
