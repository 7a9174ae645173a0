//! A parser of the `text/event-stream` format (the HTML standard's "Server-sent events",
//! §9.2.6), fed with body chunks as they arrive.
//!
//! It knows nothing of Outbox: it turns bytes into [`Frame`]s. Lines end with `\n`, `\r\n`
//! or `\r`, also when a chunk boundary splits `\r\n`; a leading byte-order mark is skipped;
//! a field line without a colon is a field with an empty value; one space after the colon
//! is dropped; a block is dispatched at a blank line only when it carried `data:`.

/// One thing the stream said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A block with data.
    Event {
        /// `event:`, or `message` when the block set none.
        event: String,
        /// `id:`, when the block set one.
        id: Option<String>,
        /// The `data:` lines joined with `\n`.
        data: String,
    },
    /// `retry: <ms>`: the reconnection delay.
    Retry(u64),
    /// A `: comment` line, without the colon and one leading space.
    Comment(String),
}

/// The longest line the parser buffers; a longer one is a protocol violation, not a
/// reason to grow without bound.
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;

/// The parser's state between chunks.
#[derive(Debug, Default)]
pub struct Parser {
    line: Vec<u8>,
    after_cr: bool,
    started: bool,
    event: String,
    id: Option<String>,
    data: String,
    has_data: bool,
}

/// A line longer than `MAX_LINE` (16 MiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineTooLong;

impl Parser {
    /// Parses `chunk`, appending every completed frame to `frames`.
    pub fn push(&mut self, chunk: &[u8], frames: &mut Vec<Frame>) -> Result<(), LineTooLong> {
        for &byte in chunk {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    self.line_ended(&String::from_utf8_lossy(&line), frames);
                }
                _ => {
                    self.after_cr = false;
                    if self.line.len() >= MAX_LINE {
                        return Err(LineTooLong);
                    }
                    self.line.push(byte);
                }
            }
        }
        Ok(())
    }

    fn line_ended(&mut self, mut line: &str, frames: &mut Vec<Frame>) {
        if !self.started {
            self.started = true;
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.is_empty() {
            return self.dispatch(frames);
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "" => frames.push(Frame::Comment(value.to_owned())),
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                if let Ok(ms) = value.parse() {
                    frames.push(Frame::Retry(ms));
                }
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, frames: &mut Vec<Frame>) {
        let event = std::mem::take(&mut self.event);
        let id = self.id.take();
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        let event = if event.is_empty() { "message".to_owned() } else { event };
        frames.push(Frame::Event { event, id, data: std::mem::take(&mut self.data) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event: &str, id: Option<&str>, data: &str) -> Frame {
        Frame::Event { event: event.into(), id: id.map(Into::into), data: data.into() }
    }

    /// Parses `input` whole, and again split at every byte boundary: both give `expect`.
    #[track_caller]
    fn check(input: &str, expect: &[Frame]) {
        let mut frames = Vec::new();
        Parser::default().push(input.as_bytes(), &mut frames).unwrap();
        assert_eq!(frames, expect, "whole: {input:?}");
        for split in 0..=input.len() {
            let (a, b) = input.as_bytes().split_at(split);
            let mut parser = Parser::default();
            let mut frames = Vec::new();
            parser.push(a, &mut frames).unwrap();
            parser.push(b, &mut frames).unwrap();
            assert_eq!(frames, expect, "split at {split}: {input:?}");
        }
    }

    #[test]
    fn parses_the_outbox_frames() {
        check("retry: 2000\n\n", &[Frame::Retry(2000)]);
        check("id: 1.2\nevent: node.joined\ndata: {\"a\":1}\n\n", &[event("node.joined", Some("1.2"), "{\"a\":1}")]);
        check(": keep-alive 7.9\n\n", &[Frame::Comment("keep-alive 7.9".into())]);
        check(
            "event: error\ndata: {\"code\":\"ACCESS_DENIED\",\"message\":\"x\"}\n\n",
            &[event("error", None, "{\"code\":\"ACCESS_DENIED\",\"message\":\"x\"}")],
        );
        check(
            "id: 1.1\nevent: a.b\ndata: 1\n\nid: 1.2\nevent: a.c\ndata: 2\n\n",
            &[event("a.b", Some("1.1"), "1"), event("a.c", Some("1.2"), "2")],
        );
    }

    #[test]
    fn follows_the_standard_on_the_edges() {
        check("data: a\r\ndata: b\r\n\r\n", &[event("message", None, "a\nb")]);
        check("data: a\rdata: b\r\r", &[event("message", None, "a\nb")]);
        check("\u{feff}data: x\n\n", &[event("message", None, "x")]);
        check("data\n\n", &[event("message", None, "")]);
        check("data:  two spaces\n\n", &[event("message", None, " two spaces")]);
        check("event: a.b\nid: 1.1\n\n", &[]); // no data: nothing dispatched
        check("data: x\n", &[]); // not finished: no blank line yet
        check("retry: soon\nretry: 1x\nretry:\n\n", &[]);
        check("id: a\0b\ndata: x\n\n", &[event("message", None, "x")]);
        check("unknown: field\ndata: x\n\n", &[event("message", None, "x")]);
        check(":\n\n", &[Frame::Comment(String::new())]);
    }

    #[test]
    fn a_line_without_end_is_bounded() {
        let mut parser = Parser::default();
        let chunk = vec![b'x'; MAX_LINE];
        parser.push(&chunk, &mut Vec::new()).unwrap();
        assert_eq!(parser.push(b"y", &mut Vec::new()), Err(LineTooLong));
    }
}
