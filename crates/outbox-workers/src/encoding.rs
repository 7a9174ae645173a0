//! How a sink writes an event: `json` (SPEC §3.3), `cloudevents` (structured JSON
//! CloudEvents 1.0) or `protobuf` (`proto/outbox/v1/event.proto`).
//!
//! The protobuf message is [`ProtoEvent`], the `outbox.v1.Event` generated into
//! `outbox-proto`: the same type `GET /events` answers in, without this crate knowing
//! `outbox-http`.

use outbox_core::{Data, Event, millis};
use serde::{Deserialize, Serialize};

/// `outbox.v1.Event` (`proto/outbox/v1/event.proto`), the message the `protobuf` encoding writes.
pub use outbox_proto::Event as ProtoEvent;

/// The encoding a sink writes events in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// The event shape of SPEC §3.3 (`application/json`).
    #[default]
    Json,
    /// A CloudEvents 1.0 event in structured JSON mode (`application/cloudevents+json`).
    CloudEvents,
    /// `outbox.v1.Event` in protobuf (`application/x-protobuf`).
    Protobuf,
}

impl Encoding {
    /// The media type of one encoded event.
    pub fn content_type(self) -> &'static str {
        match self {
            Encoding::Json => "application/json",
            Encoding::CloudEvents => "application/cloudevents+json",
            Encoding::Protobuf => "application/x-protobuf",
        }
    }

    /// Whether the encoding is text (one line of JSON).
    pub fn is_text(self) -> bool {
        !matches!(self, Encoding::Protobuf)
    }
}

/// The CloudEvents `source` when a sink names none.
pub const DEFAULT_SOURCE: &str = "/outbox";

/// Encodes events for one sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoder {
    encoding: Encoding,
    source: String,
}

impl Encoder {
    /// An encoder for `encoding`; `source` is the CloudEvents `source` attribute.
    pub fn new(encoding: Encoding, source: impl Into<String>) -> Encoder {
        Encoder { encoding, source: source.into() }
    }

    /// The encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The media type of one encoded event.
    pub fn content_type(&self) -> &'static str {
        self.encoding.content_type()
    }

    /// One event, encoded.
    pub fn encode(&self, event: &Event) -> Vec<u8> {
        match self.encoding {
            Encoding::Json => json(event, event),
            Encoding::CloudEvents => json(&CloudEvent::new(event, &self.source), event),
            Encoding::Protobuf => prost::Message::encode_to_vec(&ProtoEvent::from(event)),
        }
    }
}

/// `value` (`event` or a shape of it) as JSON, into a buffer sized for it from the start.
fn json(value: &impl Serialize, event: &Event) -> Vec<u8> {
    // The event shape's field names, time, position and punctuation fit in 192 bytes; a
    // CloudEvents source longer than about 50 bytes grows the buffer once.
    let texts = [&event.id, &event.event_type, &event.tenant_id, &event.subject].map(|text| text.len());
    let mut out = Vec::with_capacity(192 + texts.iter().sum::<usize>() + event.data.get().len());
    // An Event always serializes: its fields are strings, a position and a JSON value.
    if serde_json::to_writer(&mut out, value).is_err() {
        out.clear();
    }
    out
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new(Encoding::Json, DEFAULT_SOURCE)
    }
}

/// A CloudEvents 1.0 event in structured JSON mode.
#[derive(Debug, Serialize)]
struct CloudEvent<'a> {
    specversion: &'static str,
    id: &'a str,
    source: &'a str,
    #[serde(rename = "type")]
    event_type: &'a str,
    subject: &'a str,
    time: String,
    datacontenttype: &'static str,
    data: &'a Data,
    tenantid: &'a str,
    sequence: String,
}

impl<'a> CloudEvent<'a> {
    fn new(event: &'a Event, source: &'a str) -> CloudEvent<'a> {
        CloudEvent {
            specversion: "1.0",
            id: &event.id,
            source,
            event_type: &event.event_type,
            subject: &event.subject,
            time: millis::format(event.time),
            datacontenttype: "application/json",
            data: &event.data,
            tenantid: &event.tenant_id,
            sequence: event.sequence.dotted(),
        }
    }
}

#[cfg(test)]
mod tests {
    use outbox_core::Position;
    use prost::Message;
    use serde_json::{Value, json};
    use time::macros::datetime;

    use super::*;

    fn event() -> Event {
        Event {
            id: "evt_01k5y3v0m6y8x7w5t4s3r2p1n0".into(),
            event_type: "reservation.active".into(),
            tenant_id: "acme".into(),
            subject: "reservation/rsv_01".into(),
            time: datetime!(2026-09-24 10:15:02.114 UTC),
            sequence: Position::new(88213, 51120),
            data: json!({"state": "active"}).into(),
        }
    }

    #[test]
    fn json_is_the_event_shape() {
        let text = String::from_utf8(Encoder::default().encode(&event())).unwrap();
        assert_eq!(
            text,
            r#"{"id":"evt_01k5y3v0m6y8x7w5t4s3r2p1n0","type":"reservation.active","tenantId":"acme","subject":"reservation/rsv_01","time":"2026-09-24T10:15:02.114Z","sequence":"88213.51120","data":{"state":"active"}}"#
        );
    }

    #[test]
    fn cloudevents_is_structured_json_with_the_tenant_and_sequence_extensions() {
        let encoder = Encoder::new(Encoding::CloudEvents, "https://billing.example.com/outbox");
        let value: Value = serde_json::from_slice(&encoder.encode(&event())).unwrap();
        assert_eq!(
            value,
            json!({
                "specversion": "1.0",
                "id": "evt_01k5y3v0m6y8x7w5t4s3r2p1n0",
                "source": "https://billing.example.com/outbox",
                "type": "reservation.active",
                "subject": "reservation/rsv_01",
                "time": "2026-09-24T10:15:02.114Z",
                "datacontenttype": "application/json",
                "data": {"state": "active"},
                "tenantid": "acme",
                "sequence": "88213.51120"
            })
        );
        assert_eq!(encoder.content_type(), "application/cloudevents+json");
    }

    #[test]
    fn protobuf_is_outbox_v1_event_field_by_field() {
        let bytes = Encoder::new(Encoding::Protobuf, DEFAULT_SOURCE).encode(&event());
        let back = ProtoEvent::decode(bytes.as_slice()).unwrap();
        assert_eq!(back.id, "evt_01k5y3v0m6y8x7w5t4s3r2p1n0");
        assert_eq!(back.r#type, "reservation.active");
        assert_eq!((back.tenant_id.as_str(), back.subject.as_str()), ("acme", "reservation/rsv_01"));
        assert_eq!((back.time.as_str(), back.sequence.as_str()), ("2026-09-24T10:15:02.114Z", "88213.51120"));
        assert_eq!(back.data_json, r#"{"state":"active"}"#);
        // Field 1 (id) is the first thing on the wire: tag 1, wire type 2 (length-delimited).
        assert_eq!(bytes[0], 0x0a);
    }
}
