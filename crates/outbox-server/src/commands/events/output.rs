//! Printing events so that a terminal shows them and nothing else.
//!
//! An event's `data` is whatever a producer wrote, so it can hold `ESC [2J` (clear the
//! screen), a line break that forges a second line, or a right-to-left override that
//! reorders what is shown. serde_json already writes the C0 controls as escapes (`\n`,
//! `\u001b`); [`terminal_safe`] also escapes what JSON allows raw but a terminal acts on:
//! DEL, the C1 controls (`U+009B` is a one-character CSI), the line and paragraph separators
//! and the bidirectional formatting characters. Every one of them can only occur inside a
//! JSON string, so the escaped text is still the same JSON.

use std::fmt::Write as _;
use std::io::{self, Write};

use outbox_core::Event;

/// The event as one terminal-safe line of JSON (no line break at the end).
pub fn json_line(event: &Event) -> String {
    let json = serde_json::to_string(event).expect("an event always serializes");
    terminal_safe(&json)
}

/// `text` with every character a terminal would act on written as `\uXXXX`.
pub fn terminal_safe(text: &str) -> String {
    let mut safe = String::with_capacity(text.len());
    for ch in text.chars() {
        if acts_on_terminal(ch) {
            let _ = write!(safe, "\\u{:04x}", u32::from(ch));
        } else {
            safe.push(ch);
        }
    }
    safe
}

fn acts_on_terminal(ch: char) -> bool {
    ch.is_control() // C0, DEL and C1
        || matches!(ch, '\u{2028}' | '\u{2029}' | '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{feff}')
        || ('\u{202a}'..='\u{202e}').contains(&ch)
        || ('\u{2066}'..='\u{2069}').contains(&ch)
}

/// Standard output, line by line, flushed per line so a pipe sees each event at once.
pub(super) struct Lines {
    out: io::Stdout,
}

impl Lines {
    pub(super) fn stdout() -> Lines {
        Lines { out: io::stdout() }
    }

    /// Writes `line` and a line break. `Ok(false)` when the reader went away (a closed
    /// pipe): the command should stop, successfully.
    pub(super) fn print(&mut self, line: &str) -> anyhow::Result<bool> {
        let mut out = self.out.lock();
        match writeln!(out, "{line}").and_then(|()| out.flush()) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(false),
            Err(error) => Err(anyhow::Error::new(error).context("writing to standard output")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(input: &str, expect: &str) {
        let json = serde_json::to_string(input).unwrap();
        let safe = terminal_safe(&json);
        assert_eq!(safe, expect);
        assert_eq!(serde_json::from_str::<String>(&safe).unwrap(), input, "still the same JSON");
        assert!(!safe.chars().any(acts_on_terminal), "{safe:?}");
    }

    #[test]
    fn escapes_what_a_terminal_would_act_on() {
        check("plain", r#""plain""#);
        check("\u{1b}[2J", r#""\u001b[2J""#);
        check("two\nlines\r\n", r#""two\nlines\r\n""#);
        check("bell\u{7}tab\t", r#""bell\u0007tab\t""#);
        check("del\u{7f}", r#""del\u007f""#);
        check("csi\u{9b}2J", r#""csi\u009b2J""#);
        check("sep\u{2028}par\u{2029}", r#""sep\u2028par\u2029""#);
        check("rtl\u{202e}txt.exe", r#""rtl\u202etxt.exe""#);
        check("isolate\u{2066}x\u{2069}", r#""isolate\u2066x\u2069""#);
        check("ünïcödé ✓ 日本", "\"ünïcödé ✓ 日本\"");
    }
}
