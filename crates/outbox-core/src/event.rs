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
    use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

    const FORMAT: &[time::format_description::BorrowedFormatItem<'static>] =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

    /// The length of the event shape's form, `2026-09-24T10:15:02.114Z`.
    const LEN: usize = 24;

    /// Formats `time` in the event shape's form.
    pub fn format(time: OffsetDateTime) -> String {
        match digits(time) {
            Some(text) => std::str::from_utf8(&text).unwrap_or_default().to_owned(),
            None => time.to_offset(UtcOffset::UTC).format(FORMAT).expect("every UTC time in range formats"),
        }
    }

    /// The event shape's form of `time`, written digit by digit: each event's time is written
    /// for every page served and every delivery, and the format description's general code
    /// stood out in profiles of the sinks. `None` for a year outside 0 to 9999, which the
    /// format description writes instead.
    fn digits(time: OffsetDateTime) -> Option<[u8; LEN]> {
        let time = time.to_offset(UtcOffset::UTC);
        let year = u32::try_from(time.year()).ok().filter(|year| *year <= 9999)?;
        let mut text = *b"0000-00-00T00:00:00.000Z";
        let mut put = |at: usize, width: usize, mut value: u32| {
            for slot in text[at..at + width].iter_mut().rev() {
                *slot = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, 4, year);
        put(5, 2, u32::from(u8::from(time.month())));
        put(8, 2, u32::from(time.day()));
        put(11, 2, u32::from(time.hour()));
        put(14, 2, u32::from(time.minute()));
        put(17, 2, u32::from(time.second()));
        put(20, 3, u32::from(time.millisecond()));
        Some(text)
    }

    /// `time` in UTC, cut to whole milliseconds: what the event shape's form keeps of it.
    pub fn truncate(time: OffsetDateTime) -> OffsetDateTime {
        let time = time.to_offset(UtcOffset::UTC);
        time.replace_nanosecond(time.nanosecond() / 1_000_000 * 1_000_000).unwrap_or(time)
    }

    /// Parses any RFC 3339 time.
    pub fn parse(text: &str) -> Result<OffsetDateTime, time::error::Parse> {
        match parse_shape(text.as_bytes()) {
            Some(time) => Ok(time),
            None => OffsetDateTime::parse(text, &Rfc3339),
        }
    }

    /// The event shape's own form (how the outbox stores every time), read without the
    /// general RFC 3339 parser; `None` for any other text, valid or not.
    fn parse_shape(text: &[u8]) -> Option<OffsetDateTime> {
        let shape = b"0000-00-00T00:00:00.000Z";
        let fits = text.len() == LEN
            && text
                .iter()
                .zip(shape)
                .all(|(byte, form)| if *form == b'0' { byte.is_ascii_digit() } else { byte == form });
        if !fits {
            return None;
        }
        let number =
            |at: usize, width: usize| text[at..at + width].iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
        let month = Month::try_from(u8::try_from(number(5, 2)).ok()?).ok()?;
        let date = Date::from_calendar_date(i32::try_from(number(0, 4)).ok()?, month, number(8, 2) as u8).ok()?;
        let time =
            Time::from_hms_milli(number(11, 2) as u8, number(14, 2) as u8, number(17, 2) as u8, number(20, 3) as u16)
                .ok()?;
        Some(PrimitiveDateTime::new(date, time).assume_utc())
    }

    /// Serializes in the event shape's form.
    pub fn serialize<S: Serializer>(time: &OffsetDateTime, serializer: S) -> Result<S::Ok, S::Error> {
        match digits(*time) {
            Some(text) => serializer.serialize_str(std::str::from_utf8(&text).unwrap_or_default()),
            None => serializer.serialize_str(&format(*time)),
        }
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
    fn the_shapes_own_form_reads_and_writes_as_the_general_rfc3339_code_does() {
        use time::format_description::well_known::Rfc3339;
        let start = datetime!(1969-12-31 23:59:58.999 UTC);
        // Steps of a prime number of milliseconds, across days, months, leap years and centuries.
        for n in 0..20_000i64 {
            let time = start + time::Duration::milliseconds(n * 7_919_993_017);
            let general = time.format(&time::macros::format_description!(
                "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
            ));
            let text = millis::format(time);
            assert_eq!(text, general.unwrap(), "{time}");
            assert_eq!(millis::parse(&text).unwrap(), OffsetDateTime::parse(&text, &Rfc3339).unwrap(), "{text}");
        }
        // Out of the shape's range or form, the general code answers.
        assert_eq!(millis::format(datetime!(-0001-06-01 00:00:00 UTC)), "-0001-06-01T00:00:00.000Z");
        assert_eq!(millis::parse("2026-09-24T12:15:02.114+02:00").unwrap(), datetime!(2026-09-24 10:15:02.114 UTC));
        assert_eq!(millis::parse("2026-09-24T10:15:02Z").unwrap(), datetime!(2026-09-24 10:15:02 UTC));
        for bad in [
            "2026-02-30T10:15:02.114Z",
            "2026-13-01T10:15:02.114Z",
            "2026-09-24T24:15:02.114Z",
            "2026-09-24T10:15:02.114",
        ] {
            assert!(millis::parse(bad).is_err(), "{bad}");
        }
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
