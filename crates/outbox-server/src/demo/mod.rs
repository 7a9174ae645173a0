//! `outbox dev --demo`: something in every view of the console within seconds.
//!
//! - [`world`] publishes sample events across three tenants, a few a second (live, history);
//! - a JSONL sink, [`SINK_ID`], appends every event to [`SINK_FILE`] beside the dev data
//!   directory (sinks);
//! - a webhook subscription of the dev tenant posts its events to a [`receiver`] that runs
//!   inside the process on loopback and verifies their signatures (webhooks); it refuses the
//!   first [`REFUSED_TYPE`] with 400, so after its attempts that event becomes a dead
//!   letter (dead letters).
//!
//! The subscription is made through the server's own HTTP API with the printed admin
//! token, as a user would make one. The receiver's port changes with every start, so a
//! start deletes the subscriptions an earlier start made (known by their description)
//! before it makes its own.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use outbox_client::Client;
use outbox_client::webhooks::NewWebhook;
use outbox_pg::sqlx::PgPool;
use outbox_workers::config::{SinkConfig, SinkKind};
use outbox_workers::sinks::WebhookSecret;
use tokio::task::JoinHandle;

pub mod receiver;
pub mod world;

pub use receiver::REFUSED_TYPE;
pub use world::TENANTS;

/// The id of the demo's JSONL sink.
pub const SINK_ID: &str = "demo";

/// The file the demo's sink appends to, beside the dev data directory.
pub const SINK_FILE: &str = "demo-sink.jsonl";

/// The description that marks the demo's subscription.
const WEBHOOK_DESCRIPTION: &str = "outbox dev --demo: the receiver inside outbox dev";

/// The demo's sink: every event, one JSON line each, appended to `path`.
pub fn jsonl_sink(path: &Path) -> SinkConfig {
    SinkConfig { path: Some(path.to_path_buf()), ..SinkConfig::new(SINK_ID, SinkKind::Jsonl) }
}

/// The running demo: the publisher, the receiver and what the welcome says of them.
pub struct Demo {
    publisher: JoinHandle<()>,
    receiver: receiver::Receiver,
    /// The demo subscription's id.
    pub webhook: String,
    /// The file the demo's sink appends to.
    pub sink_file: PathBuf,
}

impl Demo {
    /// Starts the receiver, makes the subscription through the server at `addr` with the
    /// admin `token`, and starts publishing.
    pub async fn start(pool: PgPool, addr: SocketAddr, token: &str, sink_file: PathBuf) -> anyhow::Result<Demo> {
        let receiver = receiver::Receiver::start().await.context("starting the demo's webhook receiver")?;
        let client = Client::new(&format!("http://{addr}"))?.with_token(token)?;
        remove_earlier_subscriptions(&client).await?;
        let new =
            NewWebhook { url: receiver.url(), description: Some(WEBHOOK_DESCRIPTION.into()), ..NewWebhook::default() };
        let created = client.create_webhook(&new).await.context("creating the demo's webhook subscription")?;
        let secret = created.secret.as_deref().context("the created subscription came without its secret")?;
        receiver.verify_with(WebhookSecret::parse(secret).map_err(anyhow::Error::msg)?);
        let publisher = tokio::spawn(world::run(pool));
        Ok(Demo { publisher, receiver, webhook: created.id, sink_file })
    }

    /// The lines the welcome prints about the demo.
    pub fn describe(&self) -> Vec<String> {
        let attempts = outbox_workers::WebhookDeliveryConfig::default().max_attempts;
        vec![
            format!("events of {}, a few a second", TENANTS.join(", ")),
            format!("sink {SINK_ID:?} appends them to {}", self.sink_file.display()),
            format!("webhook {} posts {}'s events to a receiver inside outbox dev", self.webhook, TENANTS[0]),
            format!("({}) that verifies their signatures;", self.receiver.url()),
            format!("it refuses the first {REFUSED_TYPE} with 400, so after {attempts} attempts"),
            "that event shows under dead letters".into(),
        ]
    }

    /// Stops publishing and receiving.
    pub fn stop(self) {
        self.publisher.abort();
        drop(self.receiver);
    }
}

/// Deletes the subscriptions an earlier `outbox dev --demo` made: their receiver is gone.
async fn remove_earlier_subscriptions(client: &Client) -> anyhow::Result<()> {
    let mut cursor = None;
    let mut earlier = Vec::new();
    loop {
        let page = client.list_webhooks(cursor.as_deref(), None).await.context("listing webhook subscriptions")?;
        earlier.extend(page.items.into_iter().filter(|w| w.description == WEBHOOK_DESCRIPTION).map(|w| w.id));
        match page.cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    for id in earlier {
        client.delete_webhook(&id).await.with_context(|| format!("deleting the earlier demo subscription {id}"))?;
    }
    Ok(())
}
