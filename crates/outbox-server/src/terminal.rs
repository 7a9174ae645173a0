//! Output that is safe to print on a terminal: text from the database or a remote peer (an
//! event's data, a sink's error) may hold escape sequences that would move the cursor or
//! change the terminal, so every control character is printed escaped.

use serde::Serialize;

/// `text` with every control character (C0, DEL, C1) and the line and paragraph separators
/// written as a `\u{…}` escape, so it stays on one line and cannot drive the terminal.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if needs_escape(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// `value` as one line of JSON in which no control character appears raw: serde_json escapes
/// C0 characters inside strings, and DEL, C1 and the separators are escaped here as `\uXXXX`
/// (characters that can only occur inside strings, so the line stays valid JSON).
pub fn json_line(value: &impl Serialize) -> String {
    let json = serde_json::to_string(value).unwrap_or_else(|e| format!("{{\"error\":\"unprintable: {e}\"}}"));
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if needs_escape(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// Prints `rows` under `header` in columns two spaces apart.
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

    #[test]
    fn control_characters_are_escaped_and_the_json_stays_valid() {
        let hostile = "a\u{1b}[2J\nb\r\u{7f}\u{9b}31m\u{2028}z";
        assert_eq!(escape(hostile), "a\\u{1b}[2J\\u{a}b\\u{d}\\u{7f}\\u{9b}31m\\u{2028}z");
        let line = json_line(&serde_json::json!({ "data": hostile }));
        assert!(!line.chars().any(needs_escape), "{line:?}");
        let back: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(back["data"], hostile);
    }
}
