//! Output that is safe to print on a terminal.
//!
//! Text from the database or a remote peer (an event's `data`, a sink's error) is whatever
//! somebody wrote, so it can hold `ESC [2J` (clear the screen), a line break that forges a
//! second line, or a right-to-left override that reorders what is shown. serde_json already
//! writes the C0 controls as escapes (`\n`, `\u001b`); [`terminal_safe`] also escapes what
//! JSON allows raw but a terminal acts on: DEL, the C1 controls (`U+009B` is a one-character
//! CSI), the line and paragraph separators and the bidirectional formatting characters.
//! Every one of them can only occur inside a JSON string, so escaped JSON is still the same
//! JSON; in plain text (a table cell) the escape is shown as written.

use std::fmt::Write as _;

use serde::Serialize;

/// `value` as one terminal-safe line of JSON (no line break at the end).
pub fn json_line(value: &impl Serialize) -> String {
    let json = serde_json::to_string(value).unwrap_or_else(|e| format!("{{\"error\":\"unprintable: {e}\"}}"));
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

/// Prints `rows` under `header` in columns two spaces apart (cells must be terminal-safe).
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
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

    #[test]
    fn plain_text_stays_on_one_line() {
        assert_eq!(terminal_safe("a\u{1b}[2J\nb"), "a\\u001b[2J\\u000ab");
    }
}
