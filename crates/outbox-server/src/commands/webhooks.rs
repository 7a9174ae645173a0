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
    match command {
        WebhooksCommand::List(args) => {
            let client = client(&args.server)?;
            let mut cursor = None;
            loop {
                let page = client
                    .list_webhooks(cursor.as_deref(), None)
                    .await
                    .with_context(|| doing(&args.server, "listing webhooks"))?;
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
        WebhooksCommand::Create(args) => {
            let mut headers = std::collections::BTreeMap::new();
            for header in &args.request_headers {
                let (name, value) = header
                    .split_once(':')
                    .with_context(|| format!("--request-header {header:?} is not \"Name: value\""))?;
                headers.insert(name.trim().to_owned(), value.trim().to_owned());
            }
            let new = NewWebhook {
                url: args.endpoint,
                types: (!args.types.is_empty()).then_some(args.types),
                description: args.description,
                headers: (!headers.is_empty()).then_some(headers),
                metadata: None,
                secret: args.secret,
            };
            let created = client(&args.server)?
                .create_webhook(&new)
                .await
                .with_context(|| doing(&args.server, "creating a webhook"))?;
            print(&mut lines, &created)
        }
        WebhooksCommand::Show(args) => {
            let webhook = client(&args.server)?
                .webhook(&args.id)
                .await
                .with_context(|| doing(&args.server, "reading a webhook"))?;
            print(&mut lines, &webhook)
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
            let changed = client(&args.server)?
                .update_webhook(&args.id, &patch)
                .await
                .with_context(|| doing(&args.server, "changing a webhook"))?;
            print(&mut lines, &changed)
        }
        WebhooksCommand::Delete(args) => {
            client(&args.server)?
                .delete_webhook(&args.id)
                .await
                .with_context(|| doing(&args.server, "deleting a webhook"))?;
            print(&mut lines, &serde_json::json!({ "deleted": args.id }))
        }
        WebhooksCommand::Ping(args) => {
            let outcome = client(&args.server)?
                .ping_webhook(&args.id)
                .await
                .with_context(|| doing(&args.server, "pinging a webhook"))?;
            print(&mut lines, &outcome)
        }
        WebhooksCommand::RotateSecret(args) => {
            let rotated = client(&args.server)?
                .rotate_webhook_secret(&args.id, args.grace)
                .await
                .with_context(|| doing(&args.server, "rotating a webhook's secret"))?;
            print(&mut lines, &rotated)
        }
        WebhooksCommand::Attempts(args) => {
            let attempts = client(&args.server)?
                .webhook_attempts(&args.id)
                .await
                .with_context(|| doing(&args.server, "reading attempts"))?;
            for attempt in &attempts {
                if !lines.print(&json_line(attempt))? {
                    break;
                }
            }
            Ok(())
        }
    }
}

fn print(lines: &mut Lines, value: &impl Serialize) -> anyhow::Result<()> {
    lines.print(&json_line(value))?;
    Ok(())
}

fn doing(server: &ServerArgs, what: &str) -> String {
    format!("{what} at {}", url(server))
}
