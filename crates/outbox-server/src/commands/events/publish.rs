//! `outbox events publish`: one event from flags, or a batch from a JSON-lines file.
//!
//! Every event is checked against the publishing rules (SPEC §3.2) before anything is
//! sent, so a mistake on line 900 names line 900 and publishes nothing. A file goes out in
//! requests of `--batch-size` events; each request is one transaction on the server.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{Context, bail};
use outbox_client::Client;
use outbox_core::NewEvent;
use outbox_core::validate::{Limits, validate_event};

use super::output::Lines;
use crate::cli::EventsPublishArgs;

/// Publishes and prints the new ids, one per line.
pub(super) async fn run(args: EventsPublishArgs) -> anyhow::Result<()> {
    let client = super::client(&args.server)?;
    let events = match &args.file {
        Some(path) => read_events(path)?,
        None => vec![flag_event(&args)?],
    };
    if events.is_empty() {
        eprintln!("outbox events publish: no events to publish");
        return Ok(());
    }
    publish(&client, &events, args.batch_size as usize, super::url(&args.server)).await
}

/// The event of `--type`, `--tenant`, `--subject` and `--data`.
fn flag_event(args: &EventsPublishArgs) -> anyhow::Result<NewEvent> {
    let data = serde_json::from_str(&args.data).context("--data is not JSON")?;
    let event = NewEvent::new(
        args.event_type.clone().unwrap_or_default(),
        args.tenant.clone().unwrap_or_default(),
        args.subject.clone().unwrap_or_default(),
        data,
    );
    validate_event(0, &event, &Limits::default()).map_err(|e| anyhow::anyhow!("--{} {}", flag(e.field), e.rule))?;
    Ok(event)
}

/// The flag that sets a field of the wire shape.
fn flag(field: &str) -> &str {
    match field {
        "tenantId" => "tenant",
        other => other,
    }
}

/// Every line of `path` (`-` for standard input) as an event, checked.
fn read_events(path: &Path) -> anyhow::Result<Vec<NewEvent>> {
    let name = path.display().to_string();
    let reader: Box<dyn Read> = if name == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(path).with_context(|| format!("opening {name}"))?)
    };
    parse_lines(BufReader::new(reader), &name)
}

fn parse_lines(reader: impl BufRead, name: &str) -> anyhow::Result<Vec<NewEvent>> {
    let limits = Limits::default();
    let mut events = Vec::new();
    for (index, line) in reader.lines().enumerate() {
        let number = index + 1;
        let line = line.with_context(|| format!("reading {name}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let event: NewEvent =
            serde_json::from_str(&line).with_context(|| format!("{name}, line {number}: not an event"))?;
        if let Err(error) = validate_event(0, &event, &limits) {
            bail!("{name}, line {number}: {} {}", error.field, error.rule);
        }
        events.push(event);
    }
    Ok(events)
}

/// Sends `events` in requests of `batch` and prints each request's ids as they come.
async fn publish(client: &Client, events: &[NewEvent], batch: usize, url: &str) -> anyhow::Result<()> {
    let mut lines = Lines::stdout();
    let mut published = 0;
    for chunk in events.chunks(batch.max(1)) {
        let ids = client.publish_many(chunk).await.with_context(|| {
            let done = if published == 0 {
                "nothing was published".to_owned()
            } else {
                format!("the first {published} events were published (their ids are above)")
            };
            format!("publishing events {}–{} to {url} ({done})", published + 1, published + chunk.len())
        })?;
        published += chunk.len();
        for id in ids {
            if !lines.print(&id)? {
                return Ok(());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_file_names_the_line_of_a_mistake() {
        let good = r#"{"type":"node.joined","tenantId":"acme","subject":"node/n1","data":{}}"#;
        let text = format!("{good}\n\n{good}\n");
        assert_eq!(parse_lines(text.as_bytes(), "f").unwrap().len(), 2, "blank lines are skipped");

        let bad_type = r#"{"type":"Node","tenantId":"acme","subject":"node/n1","data":{}}"#;
        let error = parse_lines(format!("{good}\n{bad_type}\n").as_bytes(), "f").unwrap_err();
        assert!(format!("{error:#}").starts_with("f, line 2: type must match"), "{error:#}");

        let unknown = r#"{"type":"node.joined","tenant":"acme","subject":"node/n1","data":{}}"#;
        let error = parse_lines(format!("{unknown}\n").as_bytes(), "f").unwrap_err();
        assert!(format!("{error:#}").contains("f, line 1: not an event: unknown field `tenant`"), "{error:#}");
    }
}
