//! The webhook subscription routes over a real database: a tenant's own subscriptions,
//! refusals that name the field and the rule, private targets refused at creation, and no
//! route without a seal key.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use outbox_core::target::TargetPolicy;
use outbox_core::{Catalog, CatalogEntry, Pattern};
use outbox_http::{WebhookConfig, WebhookRoutes};
use outbox_pg::internal::seal::SealKey;
use outbox_pg::testkit::TestDb;
use serde_json::{Value, json};

use crate::support::TestAuthorizer;

/// A public address written out, so that creation needs no name service.
const TARGET: &str = "https://93.184.215.14/hooks/outbox";

struct Routes {
    routes: WebhookRoutes,
    _db: TestDb,
}

impl Routes {
    async fn with(configure: impl FnOnce(&mut WebhookConfig)) -> Routes {
        let db = TestDb::new().await;
        let key = SealKey::parse(&SealKey::generate().unwrap()).unwrap();
        let mut config = WebhookConfig { seal_key: Some(Arc::new(key)), max_per_tenant: 3, ..WebhookConfig::default() };
        configure(&mut config);
        let orders = CatalogEntry::new(Pattern::parse("order.*").unwrap(), "order/{id}", "shop", "Orders");
        let catalog = Catalog::new([orders]);
        let routes = WebhookRoutes::new(db.pool.clone(), Arc::new(TestAuthorizer::default()), catalog, config);
        Routes { routes, _db: db }
    }

    async fn new() -> Routes {
        Routes::with(|_| {}).await
    }

    /// The status and JSON body of `method path` with `token` and `body`.
    async fn send(&self, method: Method, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
        let request = Request::builder().method(method).uri(path).header("authorization", format!("Bearer {token}"));
        let body = body.map_or_else(Bytes::new, |body| Bytes::from(body.to_string()));
        let response = self.routes.handle(request.body(Full::new(body)).unwrap()).await;
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let json =
            serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes)));
        (status, json)
    }

    async fn create(&self, token: &str, body: Value) -> (u16, Value) {
        self.send(Method::POST, "/webhooks", token, Some(body)).await
    }
}

#[track_caller]
fn refused(reply: &(u16, Value), status: u16, code: &str, fragment: &str) {
    let (got, body) = reply;
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert_eq!((*got, body["error"]["code"].as_str().unwrap_or_default()), (status, code), "{body}");
    assert!(message.contains(fragment), "{message:?} lacks {fragment:?}");
}

#[tokio::test]
async fn a_tenant_manages_its_own_subscriptions_and_never_sees_anothers() {
    let routes = Routes::new().await;
    let body = json!({"url": TARGET, "types": ["order.*"], "headers": {"Authorization": "Bearer receiver"}, "metadata": {"team": "billing"}});
    let (status, created) = routes.create("acme:hooks", body).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("wh_"));
    assert!(created["secret"].as_str().unwrap().starts_with("whsec_"), "the secret is shown at creation");
    assert_eq!(created["tenantId"], "acme");
    assert_eq!(created["headers"], json!({"Authorization": "<redacted>"}));
    assert_eq!((created["enabled"].as_bool(), created["lag"].as_u64()), (Some(true), Some(0)));
    assert!(created["position"].as_str().unwrap().contains('.'));

    let (status, shown) = routes.send(Method::GET, &format!("/webhooks/{id}"), "acme:hooks", None).await;
    assert_eq!(status, 200);
    assert!(shown.get("secret").is_none(), "no other answer carries the secret: {shown}");
    assert!(!shown.to_string().contains("Bearer receiver"), "header values never show");

    let (status, page) = routes.send(Method::GET, "/webhooks", "acme:hooks", None).await;
    assert_eq!((status, page["items"].as_array().unwrap().len()), (200, 1));
    assert!(page.get("cursor").is_none());

    let (_, other) = routes.create("globex:hooks", json!({"url": TARGET})).await;
    let other_id = other["id"].as_str().unwrap().to_owned();
    assert_eq!(other["types"], json!(["*"]), "every type by default");
    for (method, path) in [
        (Method::GET, format!("/webhooks/{other_id}")),
        (Method::PATCH, format!("/webhooks/{other_id}")),
        (Method::DELETE, format!("/webhooks/{other_id}")),
        (Method::POST, format!("/webhooks/{other_id}/rotate-secret")),
        (Method::GET, format!("/webhooks/{other_id}/attempts")),
    ] {
        let reply = routes.send(method.clone(), &path, "acme:hooks", Some(json!({}))).await;
        refused(&reply, 404, "NOT_FOUND", "no webhook subscription");
    }
    let (status, _) = routes.send(Method::GET, &format!("/webhooks/{other_id}"), "ops:admin", None).await;
    assert_eq!(status, 200, "an administrator reaches any tenant's");
    let listed = routes.send(Method::GET, "/webhooks?tenantId=globex", "ops:admin", None).await;
    assert_eq!(listed.1["items"][0]["id"], other_id.as_str());
    refused(
        &routes.send(Method::GET, "/webhooks?tenantId=globex", "acme:hooks", None).await,
        403,
        "ACCESS_DENIED",
        "administrator",
    );
    refused(&routes.send(Method::GET, "/webhooks", "acme:read", None).await, 403, "ACCESS_DENIED", "webhooks:write");

    let change = json!({"description": "billing's", "enabled": false});
    let (status, changed) = routes.send(Method::PATCH, &format!("/webhooks/{id}"), "acme:hooks", Some(change)).await;
    assert_eq!(
        (status, changed["description"].as_str(), changed["disabledReason"].as_str()),
        (200, Some("billing's"), Some("manual"))
    );
    let again = json!({"enabled": true, "resume": "now"});
    let (_, enabled) = routes.send(Method::PATCH, &format!("/webhooks/{id}"), "acme:hooks", Some(again)).await;
    assert_eq!(enabled["enabled"], true);

    let (status, rotated) =
        routes.send(Method::POST, &format!("/webhooks/{id}/rotate-secret"), "acme:hooks", None).await;
    assert_eq!(status, 200, "{rotated}");
    assert_ne!(rotated["secret"], created["secret"]);
    let (status, attempts) = routes.send(Method::GET, &format!("/webhooks/{id}/attempts"), "acme:hooks", None).await;
    assert_eq!((status, attempts), (200, json!({"items": []})));

    let (status, deleted) = routes.send(Method::DELETE, &format!("/webhooks/{id}"), "acme:hooks", None).await;
    assert_eq!((status, deleted), (200, json!({"deleted": id})));
    refused(&routes.send(Method::GET, &format!("/webhooks/{id}"), "acme:hooks", None).await, 404, "NOT_FOUND", &id);
}

#[tokio::test]
async fn every_refusal_names_the_field_and_its_rule() {
    let routes = Routes::new().await;
    let cases = [
        (json!({"url": "http://93.184.215.14/"}), "url: must be https://"),
        (json!({"url": "https://u:p@93.184.215.14/"}), "url: must not carry a user name"),
        (json!({"url": TARGET, "types": ["order.*", "node.*"]}), "types[1]: \"node.*\" can match no event type"),
        (json!({"url": TARGET, "types": []}), "types: 1 to 20 patterns"),
        (
            json!({"url": TARGET, "headers": {"webhook-signature": "v1,x"}}),
            "headers.webhook-signature: is set by the delivery",
        ),
        (json!({"url": TARGET, "metadata": {"x": "y".repeat(5000)}}), "metadata: at most 4096 bytes"),
        (json!({"url": TARGET, "description": "d".repeat(257)}), "description: at most 256 characters"),
        (json!({"url": TARGET, "secret": "whsec_c2hvcnQ="}), "secret: the key must be 24 to 64 bytes"),
        (json!({"url": TARGET, "colour": "red"}), "unknown field `colour`"),
        (json!({"types": ["*"]}), "missing field `url`"),
    ];
    for (body, fragment) in cases {
        refused(&routes.create("acme:hooks", body).await, 400, "INVALID_INPUT", fragment);
    }
    for n in 0..3 {
        assert_eq!(routes.create("acme:hooks", json!({"url": format!("{TARGET}/{n}")})).await.0, 201);
    }
    refused(
        &routes.create("acme:hooks", json!({"url": TARGET})).await,
        400,
        "INVALID_INPUT",
        "the most it may have (3)",
    );
    let reply = routes.send(Method::PUT, "/webhooks", "acme:hooks", None).await;
    refused(&reply, 405, "METHOD_NOT_ALLOWED", "GET, POST");
    refused(&routes.send(Method::GET, "/webhooks/wh_1/other", "acme:hooks", None).await, 404, "NOT_FOUND", "no route");
}

#[tokio::test]
async fn private_targets_are_refused_at_creation_unless_allowed() {
    let routes = Routes::new().await;
    let private = [
        ("https://127.0.0.1/", "loopback"),
        ("https://10.1.2.3/", "private"),
        ("https://172.16.0.1/", "private"),
        ("https://192.168.1.1/", "private"),
        ("https://169.254.169.254/latest/meta-data", "link-local"),
        ("https://100.64.0.1/", "carrier-grade NAT"),
        ("https://[fd00::1]/", "unique-local"),
        ("https://0.0.0.0/", "unspecified"),
        ("https://[::]/", "unspecified"),
        ("https://[::ffff:127.0.0.1]/", "IPv4-mapped"),
        ("https://2130706433/", "loopback"),
        ("https://localhost/", "localhost resolves to"),
    ];
    for (url, why) in private {
        refused(&routes.create("acme:hooks", json!({"url": url})).await, 400, "INVALID_INPUT", why);
    }
    let ranged = Routes::with(|config| {
        config.max_per_tenant = 100;
        config.targets = TargetPolicy { allow_private: false, allowed: vec!["10.20.0.0/16".parse().unwrap()] };
    })
    .await;
    assert_eq!(ranged.create("acme:hooks", json!({"url": "https://10.20.1.1/"})).await.0, 201, "an allowed range");
    refused(&ranged.create("acme:hooks", json!({"url": "https://10.21.1.1/"})).await, 400, "INVALID_INPUT", "private");
    let open = Routes::with(|config| config.targets = TargetPolicy { allow_private: true, allowed: Vec::new() }).await;
    assert_eq!(open.create("acme:hooks", json!({"url": "http://127.0.0.1:9/hook"})).await.0, 201, "outbox dev");
}

#[tokio::test]
async fn without_a_seal_key_every_route_is_unavailable_naming_it() {
    let routes = Routes::with(|config| config.seal_key = None).await;
    for (method, path) in [(Method::GET, "/webhooks"), (Method::POST, "/webhooks"), (Method::GET, "/webhooks/wh_1")] {
        let reply = routes.send(method, path, "acme:hooks", Some(json!({"url": TARGET}))).await;
        refused(&reply, 503, "UNAVAILABLE", "OUTBOX_WEBHOOK_SEAL_KEY");
    }
}

#[tokio::test]
async fn every_route_refuses_another_method_with_the_allow_it_serves() {
    let routes = Routes::new().await;
    for (path, allow) in [
        ("/webhooks", "GET, POST"),
        ("/webhooks/wh_1", "GET, PATCH, DELETE"),
        ("/webhooks/wh_1/rotate-secret", "POST"),
        ("/webhooks/wh_1/attempts", "GET"),
        ("/webhooks/wh_1/ping", "POST"),
        ("/webhooks/wh_1/dead-letters", "GET"),
        ("/webhooks/wh_1/dead-letters/replay", "POST"),
        ("/webhooks/wh_1/dead-letters/7/replay", "POST"),
        ("/webhooks/wh_1/dead-letters/7", "DELETE"),
    ] {
        let method = if allow.contains("GET") { Method::PUT } else { Method::GET };
        let request = Request::builder().method(method.clone()).uri(path).header("authorization", "Bearer acme:hooks");
        let response = routes.routes.handle(request.body(Full::new(Bytes::new())).unwrap()).await;
        assert_eq!(response.status().as_u16(), 405, "{method} {path}");
        assert_eq!(response.headers()["allow"], allow, "{method} {path}");
    }
}

#[tokio::test]
async fn a_view_shows_its_lag_and_says_capped_only_at_the_cap() {
    let routes = Routes::new().await;
    let (_, created) = routes.create("acme:hooks", json!({ "url": TARGET, "types": ["order.*"] })).await;
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["lag"], 0);
    let orders = (0..3).map(|n| outbox_core::NewEvent::new("order.placed", "acme", format!("order/{n}"), json!({})));
    let others = [
        outbox_core::NewEvent::new("order.placed", "globex", "order/9", json!({})),
        outbox_core::NewEvent::new("shipment.sent", "acme", "shipment/1", json!({})),
    ];
    let pool = routes._db.pool.clone();
    outbox_pg::publish_many(&pool, &orders.chain(others).collect::<Vec<_>>()).await.unwrap();
    outbox_pg::testkit::settle(&pool, std::time::Duration::from_secs(20)).await;
    let (_, shown) = routes.send(Method::GET, &format!("/webhooks/{id}"), "acme:hooks", None).await;
    assert_eq!(shown["lag"], 3, "its tenant's events of its types: {shown}");
    assert!(shown.get("lagCapped").is_none(), "below the cap the field is absent: {shown}");
    let (_, page) = routes.send(Method::GET, "/webhooks", "acme:hooks", None).await;
    assert_eq!(page["items"][0]["lag"], 3);
    assert!(page["items"][0].get("lagCapped").is_none());
}
