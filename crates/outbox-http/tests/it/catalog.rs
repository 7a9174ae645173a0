//! `GET /event-types`: the catalog.

use outbox_core::{Catalog, CatalogEntry, Pattern};

use crate::support::TestServer;

#[tokio::test]
async fn answers_the_catalog_to_readers() {
    let server = TestServer::with(|service| service.with_catalog(Catalog::control_plane())).await;
    let reply = server.get("/event-types", Some("acme:read")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["content-type"], "application/json");
    let items = reply.json()["items"].as_array().expect("items").clone();
    assert_eq!(items.len(), Catalog::control_plane().entries().len());
    for item in &items {
        let fields: Vec<&str> = item.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(fields.len(), 4, "{item}");
        for field in ["type", "subject", "module", "description"] {
            assert!(item[field].as_str().is_some_and(|v| !v.is_empty()), "{field} in {item}");
        }
    }
    assert!(items.iter().any(|item| item["type"] == "node.*"));
}

#[tokio::test]
async fn answers_a_hosts_own_families_then_outboxs() {
    let server = TestServer::start().await;
    let items = server.get("/event-types", Some("acme:read")).await.json()["items"].as_array().unwrap().clone();
    let types: Vec<&str> = items.iter().map(|item| item["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["webhook.ping", "webhook.disabled"], "a service starts from the empty catalog");

    let extra = CatalogEntry::new(Pattern::parse("billing.*").unwrap(), "invoice/{id}", "billing", "Invoices.");
    let order = CatalogEntry::new(Pattern::parse("order.*").unwrap(), "order/{id}", "shop", "Orders.");
    let catalog = Catalog::new([order]).with_extra([extra]);
    let server = TestServer::with(|service| service.with_catalog(catalog)).await;
    let items = server.get("/event-types", Some("acme:read")).await.json()["items"].as_array().unwrap().clone();
    let types: Vec<&str> = items.iter().map(|item| item["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["order.*", "billing.*", "webhook.ping", "webhook.disabled"]);
    assert_eq!(items[1]["module"], "billing");
}
