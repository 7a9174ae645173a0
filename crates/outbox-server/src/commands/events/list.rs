//! `outbox events list`: one page of history, or every page with `--all`.

use anyhow::Context;
use outbox_client::{Client, ListQuery, Page};
use outbox_core::Event;

use super::output::{Lines, json_line, terminal_safe};
use crate::cli::{EventsListArgs, Format};

/// Prints the page(s); without `--all`, names the next cursor on standard error.
pub(super) async fn run(args: EventsListArgs) -> anyhow::Result<()> {
    let client = super::client(&args.server)?;
    let mut query = ListQuery {
        tenant_id: args.tenant,
        types: args.types,
        subject: args.subject,
        cursor: args.cursor,
        limit: args.limit,
    };
    let mut printer = Printer { format: args.format, lines: Lines::stdout(), table: Table::default() };
    loop {
        let page = page(&client, &query, super::url(&args.server)).await?;
        if !printer.page(&page.items)? {
            return Ok(());
        }
        let Some(cursor) = page.cursor else { return Ok(()) };
        if !args.all {
            eprintln!("outbox events list: more events follow; next page: --cursor {}", cursor.colon());
            return Ok(());
        }
        query.cursor = Some(cursor);
    }
}

async fn page(client: &Client, query: &ListQuery, url: &str) -> anyhow::Result<Page> {
    client.list(query).await.with_context(|| format!("listing events from {url}"))
}

struct Printer {
    format: Format,
    lines: Lines,
    table: Table,
}

impl Printer {
    /// Prints one page; `Ok(false)` when standard output was closed.
    fn page(&mut self, events: &[Event]) -> anyhow::Result<bool> {
        let lines = match self.format {
            Format::Json => events.iter().map(json_line).collect(),
            Format::Table => self.table.lines(events),
        };
        for line in lines {
            if !self.lines.print(&line)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Aligned columns. The widths only grow, page by page, and the header prints once, so
/// `--all` streams pages instead of holding the whole history.
#[derive(Default)]
struct Table {
    widths: [usize; COLUMNS],
    header_printed: bool,
}

const COLUMNS: usize = 6;
const HEADER: [&str; COLUMNS] = ["SEQUENCE", "TIME", "TENANT", "TYPE", "SUBJECT", "DATA"];
/// The longest data cell, in characters; longer data ends with `…`.
const DATA_WIDTH: usize = 60;

impl Table {
    fn lines(&mut self, events: &[Event]) -> Vec<String> {
        let rows: Vec<[String; COLUMNS]> = events.iter().map(row).collect();
        for (i, width) in self.widths.iter_mut().enumerate() {
            let longest = rows.iter().map(|row| row[i].chars().count()).max().unwrap_or(0);
            *width = (*width).max(longest).max(HEADER[i].len());
        }
        let mut lines = Vec::with_capacity(rows.len() + 1);
        if !self.header_printed && !rows.is_empty() {
            self.header_printed = true;
            lines.push(self.format(&HEADER.map(str::to_owned)));
        }
        lines.extend(rows.iter().map(|row| self.format(row)));
        lines
    }

    fn format(&self, cells: &[String; COLUMNS]) -> String {
        let padded: Vec<String> =
            cells.iter().zip(self.widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        padded.join("  ").trim_end().to_owned()
    }
}

fn row(event: &Event) -> [String; COLUMNS] {
    let data = terminal_safe(&event.data.to_string());
    let data = if data.chars().count() > DATA_WIDTH {
        format!("{}…", data.chars().take(DATA_WIDTH - 1).collect::<String>())
    } else {
        data
    };
    [
        event.sequence.to_string(),
        outbox_core::millis::format(event.time),
        terminal_safe(&event.tenant_id),
        terminal_safe(&event.event_type),
        terminal_safe(&event.subject),
        data,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use outbox_core::Position;
    use serde_json::json;

    fn event(seq: u64, event_type: &str, data: serde_json::Value) -> Event {
        Event {
            id: format!("evt_{seq}"),
            event_type: event_type.into(),
            tenant_id: "acme".into(),
            subject: "node/n1".into(),
            time: outbox_core::millis::parse("2026-09-24T10:15:02.114Z").unwrap(),
            sequence: Position::new(7, seq),
            data: data.into(),
        }
    }

    #[test]
    fn a_table_aligns_its_columns_and_prints_the_header_once() {
        let mut table = Table::default();
        let first = table.lines(&[event(1, "node.joined", json!({"gpus": 8}))]);
        let second = table.lines(&[event(10, "reservation.active", json!({"note": "\u{1b}[2J".repeat(20)}))]);
        let text = [first, second].concat().join("\n");
        let expected = "\
SEQUENCE  TIME                      TENANT  TYPE         SUBJECT  DATA
7.1       2026-09-24T10:15:02.114Z  acme    node.joined  node/n1  {\"gpus\":8}
7.10      2026-09-24T10:15:02.114Z  acme    reservation.active  node/n1  {\"note\":\"\\u001b[2J\\u001b[2J\\u001b[2J\\u001b[2J\\u001b[2J\\u001…";
        assert_eq!(text, expected);
    }
}
