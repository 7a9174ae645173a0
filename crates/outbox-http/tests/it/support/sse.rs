//! A Server-Sent-Events parser written from the HTML standard's
//! "Interpreting an event stream": lines end with CRLF, LF or CR; a blank line
//! dispatches the event; `:` starts a comment; one space after the colon is
//! dropped; `data` lines join with LF; `id` persists across events as the last
//! event id; `retry` takes digits only; unknown fields are ignored.
//!
//! Comments and `retry` are reported too (a browser drops them), because the
//! tests check the keep-alive comments and the opening `retry:`.

/// Something the stream said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseItem {
    /// A dispatched event.
    Event { id: Option<String>, event: String, data: String },
    /// A comment line, without its colon and one leading space.
    Comment(String),
    /// A `retry:` field with a valid number.
    Retry(u64),
}

/// The parser's state between chunks.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    after_cr: bool,
    data: String,
    event: String,
    last_id: Option<String>,
}

impl SseParser {
    /// Feeds a chunk of the stream; returns what completed in it.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Vec<SseItem> {
        let mut items = Vec::new();
        for &byte in chunk {
            let after_cr = std::mem::replace(&mut self.after_cr, false);
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
                    items.extend(self.process(&line));
                }
                _ => self.line.push(byte),
            }
        }
        items
    }

    fn process(&mut self, line: &str) -> Option<SseItem> {
        if line.is_empty() {
            return self.dispatch();
        }
        if let Some(comment) = line.strip_prefix(':') {
            return Some(SseItem::Comment(comment.strip_prefix(' ').unwrap_or(comment).to_owned()));
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "id" if !value.contains('\0') => self.last_id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                return value.parse().ok().map(SseItem::Retry);
            }
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseItem> {
        let event = std::mem::take(&mut self.event);
        if self.data.is_empty() {
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        let event = if event.is_empty() { "message".to_owned() } else { event };
        Some(SseItem::Event { id: self.last_id.clone(), event, data })
    }
}

#[test]
fn the_parser_follows_the_standard() {
    let mut parser = SseParser::default();
    let mut items = parser.feed(b"retry: 2000\n\n: keep-alive 1.2\n\nid: 1.3\nevent: a.b\ndata: {\"x\":1}\r");
    items.extend(parser.feed(b"\n\r\ndata:two\ndata: lines\n\nid\ndata\n\nevent: lonely\n\n"));
    assert_eq!(
        items,
        [
            SseItem::Retry(2000),
            SseItem::Comment("keep-alive 1.2".into()),
            SseItem::Event { id: Some("1.3".into()), event: "a.b".into(), data: "{\"x\":1}".into() },
            SseItem::Event { id: Some("1.3".into()), event: "message".into(), data: "two\nlines".into() },
            SseItem::Event { id: Some(String::new()), event: "message".into(), data: String::new() },
        ]
    );
}
