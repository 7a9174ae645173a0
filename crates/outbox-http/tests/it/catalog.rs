//! `GET /event-types`: the catalog.

use outbox_core::{Catalog, CatalogEntry, Pattern};

use crate::support::TestServer;

#[tokio::test]
async fn answers_the_catalog_to_readers() {
    let server = TestServer::start().await;
    let reply = server.get("/event-types", Some("acme:read")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["content-type"], "application/json");
    let items = reply.json()["items"].as_array().expect("items").clone();
    assert_eq!(items.len(), Catalog::builtin().entries().len());
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
async fn answers_extra_families_after_the_built_in_ones() {
    let extra = CatalogEntry::new(Pattern::parse("billing.*").unwrap(), "invoice/{id}", "billing", "Invoices.");
    let catalog = Catalog::builtin().with_extra([extra]);
    let server = TestServer::with(|service| service.with_catalog(catalog)).await;
    let items = server.get("/event-types", Some("acme:read")).await.json()["items"].as_array().unwrap().clone();
    let last = items.last().unwrap();
    assert_eq!(last["type"], "billing.*");
    assert_eq!(last["module"], "billing");
}
