//! `outbox events watch`: the live stream, one JSON line per event.

use std::time::Duration;

use anyhow::Context;
use outbox_client::WatchQuery;

use super::output::{Lines, json_line};
use crate::cli::EventsWatchArgs;

/// Prints events until `--count` is reached, the stream is refused, or the process is
/// stopped. Disconnects are retried by the client and do not show, beyond a log line.
pub(super) async fn run(args: EventsWatchArgs) -> anyhow::Result<()> {
    let client = super::client(&args.server)?;
    let query = WatchQuery {
        types: args.types,
        tenant_id: args.tenant,
        last_event_id: args.since,
        max_backoff: Duration::from_secs(args.max_backoff.max(1)),
        ..WatchQuery::default()
    };
    let watching = || format!("watching {}", super::url(&args.server));
    let mut events = client.watch(query).await.with_context(watching)?;
    let mut lines = Lines::stdout();
    let mut printed = 0;
    while args.count.is_none_or(|count| printed < count) {
        let Some(event) = events.next().await else { break };
        let event = event.with_context(watching)?;
        if !lines.print(&json_line(&event))? {
            break;
        }
        printed += 1;
    }
    Ok(())
}
