//! `outbox sinks list` and `outbox dead-letters list|replay|discard` (SPEC §8.1): operations
//! on the configuration's `[[sinks]]`, straight against the database (no running server
//! needed). A replay delivers through this process's own instance of the sink.

use anyhow::{Context, bail};
use outbox_core::millis;
use outbox_workers::SinkStatus;

use crate::cli::{DeadLettersActArgs, DeadLettersListArgs, Format, SinksListArgs};
use crate::config::{Config, ConfigError, Overrides};
use crate::sinks::{MAX_PAGE, Sinks};
use crate::terminal::{json_line, print_table, terminal_safe as escape};
use outbox_http::{DeadLetterPage, DeadLetterView};
use outbox_pg::internal::dead_letter::DeadLetter;

/// `outbox sinks list`.
pub async fn list(args: SinksListArgs) -> anyhow::Result<()> {
    let sinks = open(args.config.as_deref()).await?;
    if sinks.ids().is_empty() {
        eprintln!("outbox: no [[sinks]] in the configuration (--config FILE or OUTBOX_CONFIG)");
    }
    let statuses = sinks.statuses().await.context("reading the sinks' state")?;
    match args.format {
        Format::Json => statuses.iter().for_each(|status| println!("{}", json_line(status))),
        Format::Table => print_table(
            &["ID", "STATE", "POSITION", "LAG", "DEAD LETTERS", "LEASE HOLDER", "LAST ERROR"],
            &statuses.iter().map(status_row).collect::<Vec<_>>(),
        ),
    }
    Ok(())
}

fn status_row(status: &SinkStatus) -> Vec<String> {
    let state = serde_json::to_value(status.state).ok().and_then(|v| v.as_str().map(str::to_owned));
    let mut state = state.unwrap_or_default();
    if let Some(until) = status.backing_off_until {
        state = format!("{state} until {}", millis::format(until));
    }
    let error = match (&status.last_error, status.last_error_at) {
        (Some(error), Some(at)) => format!("{} ({})", escape(error), millis::format(at)),
        (Some(error), None) => escape(error),
        _ => "-".into(),
    };
    vec![
        escape(&status.id),
        state,
        status.position.map_or_else(|| "-".into(), |p| p.to_string()),
        status.lag.to_string(),
        status.dead_letters.to_string(),
        status.lease_holder.as_deref().map_or_else(|| "-".into(), escape),
        error,
    ]
}

/// `outbox dead-letters list`.
pub async fn list_dead_letters(args: DeadLettersListArgs) -> anyhow::Result<()> {
    let sinks = open(args.config.as_deref()).await?;
    let page = DeadLetterPage { after: None, limit: args.limit, include_replayed: args.replayed };
    let (letters, more) = sinks.dead_letters(&args.sink, page).await?;
    match args.format {
        Format::Json => letters.iter().for_each(|letter| println!("{}", json_line(&DeadLetterView::from(letter)))),
        Format::Table => print_table(
            &["ID", "POSITION", "TYPE", "TENANT", "ATTEMPTS", "LAST FAILED", "REPLAYED", "ERROR"],
            &letters.iter().map(letter_row).collect::<Vec<_>>(),
        ),
    }
    if more {
        eprintln!("outbox: more dead letters follow; raise --limit (at most {MAX_PAGE}) or discard some");
    }
    Ok(())
}

fn letter_row(letter: &DeadLetter) -> Vec<String> {
    vec![
        letter.id.to_string(),
        letter.position.to_string(),
        escape(&letter.event.event_type),
        escape(&letter.event.tenant_id),
        letter.attempts.to_string(),
        millis::format(letter.last_failed_at),
        letter.replayed_at.map_or_else(|| "-".into(), millis::format),
        escape(&letter.error),
    ]
}

/// `outbox dead-letters replay`: each letter in turn; a refusal is reported and the others
/// still go, and the command fails at the end if any was refused.
pub async fn replay(args: DeadLettersActArgs) -> anyhow::Result<()> {
    let sinks = open(args.config.as_deref()).await?;
    let ids = chosen(&sinks, &args).await?;
    let mut refused = 0;
    for id in &ids {
        match sinks.replay(&args.sink, *id).await {
            Ok(()) => println!("replayed {id}"),
            Err(error) => {
                refused += 1;
                eprintln!("outbox: dead letter {id}: {}", escape(&error.to_string()));
            }
        }
    }
    if refused > 0 {
        bail!("{refused} of {} dead letters were not replayed", ids.len());
    }
    Ok(())
}

/// `outbox dead-letters discard`.
pub async fn discard(args: DeadLettersActArgs) -> anyhow::Result<()> {
    let sinks = open(args.config.as_deref()).await?;
    let ids = chosen(&sinks, &args).await?;
    for id in &ids {
        sinks.discard(&args.sink, *id).await.with_context(|| format!("discarding dead letter {id}"))?;
        println!("discarded {id}");
    }
    Ok(())
}

/// The ids given, or with `--all` every pending letter of the sink.
async fn chosen(sinks: &Sinks, args: &DeadLettersActArgs) -> anyhow::Result<Vec<i64>> {
    if !args.all {
        return Ok(args.ids.clone());
    }
    let mut ids = Vec::new();
    let mut next = DeadLetterPage::pending(MAX_PAGE);
    loop {
        let (page, more) = sinks.dead_letters(&args.sink, next).await?;
        next.after = page.last().map(|letter| letter.id);
        ids.extend(page.iter().map(|letter| letter.id));
        if !more {
            break;
        }
    }
    if ids.is_empty() {
        println!("sink {} has no pending dead letters", args.sink);
    }
    Ok(ids)
}

/// The configuration's sinks over its database, not run.
async fn open(config: Option<&std::path::Path>) -> anyhow::Result<Sinks> {
    let config = Config::load(config, &Overrides::default())?;
    let url = config.database_url.clone().ok_or_else(|| {
        ConfigError("database_url is not set: set DATABASE_URL or database_url in the configuration".into())
    })?;
    let pool = super::serve::connect(&url).await?;
    Ok(Sinks::new(pool, &config.sinks, false)?)
}
