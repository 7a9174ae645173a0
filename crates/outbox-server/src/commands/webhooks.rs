//! `outbox webhooks …`: a tenant's webhook subscriptions from the command line (SPEC §7.6),
//! over HTTP through `outbox-client`, like `outbox events`. Every answer prints as one
//! terminal-safe JSON line.

use anyhow::Context;
use outbox_client::webhooks::{NewWebhook, WebhookPatch};
use serde::Serialize;

use super::events::output::Lines;
use super::events::{client, json_line, url};
use crate::cli::{ServerArgs, WebhooksCommand};

/// Runs the command.
pub async fn run(command: WebhooksCommand) -> anyhow::Result<()> {
    let mut lines = Lines::stdout();
    let lines = &mut lines;
    match command {
        WebhooksCommand::List(args) => list(lines, &args.server).await,
        WebhooksCommand::Create(args) => {
            let new = new_webhook(args.endpoint, args.types, args.description, &args.request_headers, args.secret)?;
            let client = client(&args.server)?;
            answer(lines, &args.server, "creating a webhook", client.create_webhook(&new)).await
        }
        WebhooksCommand::Show(args) => {
            let client = client(&args.server)?;
            answer(lines, &args.server, "reading a webhook", client.webhook(&args.id)).await
        }
        WebhooksCommand::Update(args) => {
            let patch = WebhookPatch {
                url: args.endpoint,
                types: args.types,
                description: args.description,
                enabled: args.enabled,
                resume: args.resume,
                ..WebhookPatch::default()
            };
            let client = client(&args.server)?;
            answer(lines, &args.server, "changing a webhook", client.update_webhook(&args.id, &patch)).await
        }
        WebhooksCommand::Delete(args) => {
            let client = client(&args.server)?;
            client.delete_webhook(&args.id).await.with_context(|| doing(&args.server, "deleting a webhook"))?;
            print(lines, &serde_json::json!({ "deleted": args.id }))
        }
        WebhooksCommand::Ping(args) => {
            let client = client(&args.server)?;
            answer(lines, &args.server, "pinging a webhook", client.ping_webhook(&args.id)).await
        }
        WebhooksCommand::RotateSecret(args) => {
            let client = client(&args.server)?;
            let rotated = client.rotate_webhook_secret(&args.id, args.grace);
            answer(lines, &args.server, "rotating a webhook's secret", rotated).await
        }
        WebhooksCommand::Attempts(args) => {
            let client = client(&args.server)?;
            let attempts =
                client.webhook_attempts(&args.id).await.with_context(|| doing(&args.server, "reading attempts"))?;
            for attempt in &attempts {
                if !lines.print(&json_line(attempt))? {
                    break;
                }
            }
            Ok(())
        }
    }
}

/// Awaits `request` and prints its answer as one line; a failure says what was being done where.
async fn answer<T: Serialize, E: std::error::Error + Send + Sync + 'static>(
    lines: &mut Lines,
    server: &ServerArgs,
    what: &str,
    request: impl std::future::Future<Output = Result<T, E>>,
) -> anyhow::Result<()> {
    let answer = request.await.with_context(|| doing(server, what))?;
    print(lines, &answer)
}

/// Every subscription, page after page, one line each, until the reader stops reading.
async fn list(lines: &mut Lines, server: &ServerArgs) -> anyhow::Result<()> {
    let client = client(server)?;
    let mut cursor = None;
    loop {
        let page =
            client.list_webhooks(cursor.as_deref(), None).await.with_context(|| doing(server, "listing webhooks"))?;
        for webhook in &page.items {
            if !lines.print(&json_line(webhook))? {
                return Ok(());
            }
        }
        match page.cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(()),
        }
    }
}

/// The subscription `create` asks for; each `--request-header` is `Name: value`.
fn new_webhook(
    url: String,
    types: Vec<String>,
    description: Option<String>,
    request_headers: &[String],
    secret: Option<String>,
) -> anyhow::Result<NewWebhook> {
    let mut headers = std::collections::BTreeMap::new();
    for header in request_headers {
        let (name, value) =
            header.split_once(':').with_context(|| format!("--request-header {header:?} is not \"Name: value\""))?;
        headers.insert(name.trim().to_owned(), value.trim().to_owned());
    }
    Ok(NewWebhook {
        url,
        types: (!types.is_empty()).then_some(types),
        description,
        headers: (!headers.is_empty()).then_some(headers),
        metadata: None,
        secret,
    })
}

fn print(lines: &mut Lines, value: &impl Serialize) -> anyhow::Result<()> {
    lines.print(&json_line(value))?;
    Ok(())
}

fn doing(server: &ServerArgs, what: &str) -> String {
    format!("{what} at {}", url(server))
}
