//! The frames of a Server-Sent-Events stream, as the HTML standard's
//! `text/event-stream` format writes them. Each frame is one body chunk that
//! ends with a blank line, so that every frame is complete on its own.
//!
//! Event data is compact JSON: a JSON string cannot hold a raw line break, so
//! one `data:` line always carries the whole object.

use bytes::Bytes;
use outbox_core::{ErrorCode, Event, Position};
use serde::Serialize;

/// `retry: <ms>`: how long a client waits before it reconnects.
pub(crate) fn retry(retry_ms: u64) -> Bytes {
    Bytes::from(format!("retry: {retry_ms}\n\n"))
}

/// One event: `id:` its dotted position, `event:` its type, `data:` its JSON.
pub(crate) fn event(event: &Event) -> Result<Bytes, serde_json::Error> {
    let data = serde_json::to_string(event)?;
    Ok(Bytes::from(format!("id: {}\nevent: {}\ndata: {data}\n\n", event.sequence, event.event_type)))
}

/// `: keep-alive <position>`: a comment clients ignore, which keeps proxies from timing out
/// and tells a reader how far the stream has looked.
pub(crate) fn keep_alive(position: Position) -> Bytes {
    Bytes::from(format!(": keep-alive {position}\n\n"))
}

/// `event: error` with `{"message"}`: the stream failed and closes; the client resumes.
pub(crate) fn failure(message: &str) -> Bytes {
    error_frame(&ErrorData { code: None, message })
}

/// `event: error` with `{"code","message"}`: the stream closes for `code`'s reason.
pub(crate) fn refusal(code: ErrorCode, message: &str) -> Bytes {
    error_frame(&ErrorData { code: Some(code), message })
}

#[derive(Serialize)]
struct ErrorData<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<ErrorCode>,
    message: &'a str,
}

fn error_frame(data: &ErrorData<'_>) -> Bytes {
    // Serializing a code and a string cannot fail; keep a fixed frame should it ever.
    let json = serde_json::to_string(data).unwrap_or_else(|_| r#"{"message":"the stream failed"}"#.to_owned());
    Bytes::from(format!("event: error\ndata: {json}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use time::macros::datetime;

    #[test]
    fn frames_follow_the_event_stream_format() {
        let event = Event {
            id: "evt_01".into(),
            event_type: "reservation.active".into(),
            tenant_id: "acme".into(),
            subject: "reservation/r1".into(),
            time: datetime!(2026-09-24 10:15:02.114 UTC),
            sequence: Position::new(88213, 51120),
            data: json!({"note": "two\nlines"}).into(),
        };
        assert_eq!(
            event_frame_text(&event),
            "id: 88213.51120\nevent: reservation.active\ndata: {\"id\":\"evt_01\",\"type\":\"reservation.active\",\
             \"tenantId\":\"acme\",\"subject\":\"reservation/r1\",\"time\":\"2026-09-24T10:15:02.114Z\",\
             \"sequence\":\"88213.51120\",\"data\":{\"note\":\"two\\nlines\"}}\n\n"
        );
        assert_eq!(retry(2000), "retry: 2000\n\n");
        assert_eq!(keep_alive(Position::new(1, 2)), ": keep-alive 1.2\n\n");
        assert_eq!(failure("reading failed"), "event: error\ndata: {\"message\":\"reading failed\"}\n\n");
        assert_eq!(
            refusal(ErrorCode::AccessDenied, "signed out"),
            "event: error\ndata: {\"code\":\"ACCESS_DENIED\",\"message\":\"signed out\"}\n\n"
        );
    }

    fn event_frame_text(sent: &Event) -> String {
        String::from_utf8(super::event(sent).unwrap().to_vec()).unwrap()
    }
}
