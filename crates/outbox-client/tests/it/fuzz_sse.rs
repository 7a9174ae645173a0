//! Fuzzing the client's `text/event-stream` parser ([`Parser`]) with `fuzz/corpus/sse`.
//!
//! Whatever the bytes, nothing panics, and:
//! - fed in chunks cut anywhere (inside `\r\n`, inside a UTF-8 character) the stream gives
//!   the frames it gives when fed whole;
//! - its lines ended with `\n`, `\r\n` or `\r`, mixed at random, give the same frames;
//! - the frames are those of a second parser written here from the standard's
//!   "interpreting an event stream" (HTML §9.2.6) over the whole text at once, with the one
//!   deviation the parser documents: an `id:` belongs to its own block only.

use outbox_client::__fuzz::{Frame, Parser};
use proptest::prelude::*;
use proptest::sample::Index;

use crate::mutate;

const TARGET: &str = "sse";

/// Pieces of event streams, for the mutations.
const DICTIONARY: &[&str] = &[
    "data:",
    "data: ",
    "id:",
    "id: 1.2",
    "event:",
    "event: node.joined",
    "retry:",
    "retry: 2000",
    ":",
    ": keep-alive",
    "\n\n",
    "\r\r",
    "\r\n\r\n",
    "\u{feff}",
    "data",
    "\0",
    "{\"a\":1}",
];

/// The frames of `chunks` fed in order to one parser.
fn parse(chunks: &[&[u8]]) -> Vec<Frame> {
    let mut parser = Parser::default();
    let mut frames = Vec::new();
    for chunk in chunks {
        parser.push(chunk, &mut frames).expect("no line in these inputs reaches the limit");
    }
    frames
}

/// The standard's algorithm over the whole stream: decode, drop one leading BOM, split lines
/// at CRLF, LF or CR; what follows the last line end is not a line yet.
fn reference(stream: &[u8]) -> Vec<Frame> {
    let text = String::from_utf8_lossy(stream);
    let mut rest = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut block = Block::default();
    let mut frames = Vec::new();
    while let Some(end) = rest.find(['\r', '\n']) {
        block.line(&rest[..end], &mut frames);
        let width = if rest[end..].starts_with("\r\n") { 2 } else { 1 };
        rest = &rest[end + width..];
    }
    frames
}

/// The buffers of the block being read.
#[derive(Default)]
struct Block {
    event: String,
    data: String,
    id: Option<String>,
}

impl Block {
    fn line(&mut self, line: &str, frames: &mut Vec<Frame>) {
        if line.is_empty() {
            return self.dispatch(frames);
        }
        let (field, value) = match line.find(':') {
            Some(colon) => (&line[..colon], &line[colon + 1..]),
            None => (line, ""),
        };
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "" => frames.push(Frame::Comment(value.to_owned())),
            "event" => self.event = value.to_owned(),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
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
        let Block { event, mut data, id } = std::mem::take(self);
        if data.is_empty() {
            return;
        }
        data.pop(); // the line feed after the last data line
        let event = if event.is_empty() { "message".to_owned() } else { event };
        frames.push(Frame::Event { event, id, data });
    }
}

/// `stream` cut at `places` (each from 0 to its length, in any order).
fn cut<'a>(stream: &'a [u8], places: &[usize]) -> Vec<&'a [u8]> {
    let mut places = places.to_vec();
    places.sort_unstable();
    let mut chunks = Vec::with_capacity(places.len() + 1);
    let mut start = 0;
    for place in places {
        chunks.push(&stream[start..place]);
        start = place;
    }
    chunks.push(&stream[start..]);
    chunks
}

/// `stream`'s lines ended again with endings chosen by `choices` (`\n`, `\r\n`, `\r`), its
/// unfinished tail kept. A `\r` before an empty line ended with `\n` would read as one
/// `\r\n`, so there the choice falls on `\r`.
fn reterminated(stream: &[u8], choices: &[u8]) -> Vec<u8> {
    const ENDINGS: [&[u8]; 3] = [b"\n", b"\r\n", b"\r"];
    let mut out = Vec::with_capacity(stream.len() + stream.len() / 8);
    let mut rest = stream;
    let mut previous_was_cr = false;
    let mut index = 0;
    while let Some(end) = rest.iter().position(|&b| b == b'\r' || b == b'\n') {
        let line = &rest[..end];
        let mut ending = ENDINGS[usize::from(choices.get(index).copied().unwrap_or(0) % 3)];
        if previous_was_cr && line.is_empty() && ending[0] == b'\n' {
            ending = b"\r";
        }
        out.extend_from_slice(line);
        out.extend_from_slice(ending);
        previous_was_cr = ending == b"\r";
        let width = if rest[end..].starts_with(b"\r\n") { 2 } else { 1 };
        rest = &rest[end + width..];
        index += 1;
    }
    out.extend_from_slice(rest);
    out
}

fn check(stream: &[u8], places: &[usize], endings: &[u8]) -> Result<(), String> {
    let whole = parse(&[stream]);
    let expected = reference(stream);
    if whole != expected {
        return Err(format!("{:?}: parsed {whole:?}, the standard says {expected:?}", mutate::text(stream)));
    }
    let chunks = cut(stream, places);
    let chunked = parse(&chunks);
    if chunked != whole {
        let chunks: Vec<String> = chunks.iter().map(|chunk| mutate::text(chunk)).collect();
        return Err(format!("{chunks:?}: in chunks {chunked:?}, whole {whole:?}"));
    }
    let other_endings = reterminated(stream, endings);
    let reread = parse(&[&other_endings]);
    if reread != whole {
        return Err(format!("{:?} reads {reread:?}, but with other line ends {whole:?}", mutate::text(&other_endings)));
    }
    Ok(())
}

/// Every corpus entry, also cut at every byte and with each line ending everywhere.
fn check_thoroughly(stream: &[u8]) -> Result<(), String> {
    let every_byte: Vec<usize> = (0..=stream.len()).collect();
    for ending in 0..3 {
        check(stream, &every_byte, &vec![ending; stream.len() + 1])?;
    }
    Ok(())
}

#[test]
fn fuzz_sse_corpus() {
    mutate::check_corpus(TARGET, check_thoroughly);
}

proptest! {
    #![proptest_config(mutate::config(mutate::DEFAULT_CASES * 5))]

    #[test]
    fn fuzz_sse_mutations(
        stream in mutate::input(&mutate::corpus(TARGET), DICTIONARY),
        cuts in prop::collection::vec(any::<Index>(), 0..8),
        endings in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let places: Vec<usize> = cuts.iter().map(|cut| cut.index(stream.len() + 1)).collect();
        check(&stream, &places, &endings).map_err(TestCaseError::fail)?;
    }
}
