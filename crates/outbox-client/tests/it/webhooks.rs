//! The client's webhook operations against the real server wiring.

use outbox_client::Error;
use outbox_client::webhooks::{NewWebhook, WebhookPatch};
use outbox_server::server::Server;

use crate::support::{client, config, database, token};

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_manages_its_subscriptions_through_the_client() {
    let db = database().await;
    let mut config = config();
    let seal_key = outbox_pg::internal::seal::SealKey::generate().unwrap();
    config.webhooks.seal_key = Some(std::sync::Arc::new(outbox_pg::internal::seal::SealKey::parse(&seal_key).unwrap()));
    config.allow_private_targets = true;
    let server = Server::start(&config, db.pool.clone()).await.expect("starting the server");
    let addr = server.local_addr();
    tokio::spawn(server.run(std::future::pending::<()>()));
    let hooks = client(&format!("http://{addr}"), &token("acme", "webhooks:write", None));

    let new = NewWebhook {
        url: "http://127.0.0.1:9/hook".into(),
        types: Some(vec!["node.*".into()]),
        description: Some("ops".into()),
        ..NewWebhook::default()
    };
    let created = hooks.create_webhook(&new).await.unwrap();
    assert!(created.secret.as_deref().is_some_and(|secret| secret.starts_with("whsec_")));
    assert_eq!((created.tenant_id.as_str(), created.types.clone()), ("acme", vec!["node.*".to_owned()]));
    let shown = hooks.webhook(&created.id).await.unwrap();
    assert_eq!(shown.secret, None, "only creation and rotation show the secret");
    assert_eq!(hooks.list_webhooks(None, None).await.unwrap().items.len(), 1);

    let patch = WebhookPatch { enabled: Some(false), description: Some("paused".into()), ..WebhookPatch::default() };
    let paused = hooks.update_webhook(&created.id, &patch).await.unwrap();
    assert_eq!(
        (paused.enabled, paused.disabled_reason.as_deref(), paused.description.as_str()),
        (false, Some("manual"), "paused")
    );

    let outcome = hooks.ping_webhook(&created.id).await.unwrap();
    assert!(
        !outcome.delivered && outcome.status.is_none() && outcome.error.is_some(),
        "nothing listens there: {outcome:?}"
    );
    let attempts = hooks.webhook_attempts(&created.id).await.unwrap();
    assert_eq!(attempts.len(), 1, "the ping is recorded");
    let rotated = hooks.rotate_webhook_secret(&created.id, Some(60)).await.unwrap();
    assert_ne!(rotated.secret, created.secret);

    let refused =
        hooks.create_webhook(&NewWebhook { url: "ftp://x".into(), ..NewWebhook::default() }).await.unwrap_err();
    assert!(refused.to_string().contains("url"), "{refused}");
    let other = client(&format!("http://{addr}"), &token("globex", "webhooks:write", None));
    assert!(
        matches!(other.webhook(&created.id).await, Err(Error::Refused { status: 404, .. })),
        "another tenant's is not found"
    );
    hooks.delete_webhook(&created.id).await.unwrap();
    assert!(hooks.list_webhooks(None, None).await.unwrap().items.is_empty());
}
