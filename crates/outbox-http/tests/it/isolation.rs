//! Tenant isolation on every route: a tenant's token never sees another's events.

use crate::support::{TestServer, events, numbers};

#[tokio::test]
async fn history_shows_only_the_callers_tenant() {
    let server = TestServer::start().await;
    server.publish(&[events("node.joined", "acme", 0, 5), events("node.joined", "globex", 100, 5)].concat()).await;
    let acme = server.get("/events", Some("acme:read")).await.events();
    assert_eq!(numbers(&acme), [0, 1, 2, 3, 4]);
    let globex = server.get("/events?types=*&limit=1000", Some("globex:read")).await.events();
    assert_eq!(numbers(&globex), [100, 101, 102, 103, 104]);
    assert!(globex.iter().all(|e| e.tenant_id == "globex"));
}

#[tokio::test]
async fn naming_another_tenant_needs_admin() {
    let server = TestServer::start().await;
    server.publish(&events("node.joined", "globex", 0, 3)).await;
    server.get("/events?tenantId=globex", Some("acme:read")).await.assert_refused(403, "ACCESS_DENIED");
    server.get("/watch?tenantId=globex", Some("acme:read")).await.assert_refused(403, "ACCESS_DENIED");
    server.get("/events?tenantId=globex", Some("acme:write+read")).await.assert_refused(403, "ACCESS_DENIED");
    // Naming one's own tenant is fine.
    assert_eq!(server.get("/events?tenantId=acme", Some("acme:read")).await.status, 200);
    // An administrator reads any tenant, and its own by default.
    let admin = server.get("/events?tenantId=globex", Some("ops:admin")).await.events();
    assert_eq!(numbers(&admin), [0, 1, 2]);
    assert!(server.get("/events", Some("ops:admin")).await.events().is_empty());
}

#[tokio::test]
async fn a_stream_carries_only_its_tenants_events() {
    let server = TestServer::start().await;
    let mut acme = server.watch("?cursor=0.0", "acme:read", &[]).await;
    let mut globex = server.watch("?cursor=0.0", "globex:read", &[]).await;
    let mut admin_on_globex = server.watch("?cursor=0.0&tenantId=globex", "ops:admin", &[]).await;
    for round in 0..3 {
        let mixed = [events("node.joined", "globex", 100 + round * 2, 2), events("node.joined", "acme", round * 2, 2)];
        server.publish(&mixed.concat()).await;
    }
    assert_eq!(numbers(&acme.events(6).await), [0, 1, 2, 3, 4, 5]);
    assert_eq!(numbers(&globex.events(6).await), [100, 101, 102, 103, 104, 105]);
    assert_eq!(numbers(&admin_on_globex.events(6).await), [100, 101, 102, 103, 104, 105]);
    // Nothing of the other tenant arrives afterwards either: the next event is acme's own.
    server.publish(&events("node.joined", "globex", 200, 3)).await;
    server.publish(&events("node.joined", "acme", 6, 1)).await;
    assert_eq!(numbers(&acme.events(1).await), [6]);
}
