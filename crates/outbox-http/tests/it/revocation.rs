//! Revocation (SPEC §5.5): the registry closes matching streams at once, and
//! `reauthorize` closes a stream whose grant no longer holds or whose authority
//! stays unreachable.

use std::time::Duration;

use outbox_http::{Selector, WatchOptions};
use serde_json::json;
use tokio::time::Instant;

use crate::support::{SseItem, TestServer, events, numbers};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_session_ends_with_access_denied_and_sends_nothing_read_after() {
    let server = TestServer::start().await;
    let mut revoked = server.watch("?cursor=0.0", "acme:read:s1", &[]).await;
    let mut kept = server.watch("?cursor=0.0", "acme:read:s2", &[]).await;
    server.publish(&events("node.joined", "acme", 0, 2)).await;
    assert_eq!(numbers(&revoked.events(2).await), [0, 1]);
    assert_eq!(numbers(&kept.events(2).await), [0, 1]);

    // An open transaction holds the xmin back: what commits after it stays invisible until it ends.
    let mut held = server.pool().begin().await.unwrap();
    outbox_pg::publish_many(&mut *held, &events("node.joined", "acme", 2, 1)).await.unwrap();
    crate::support::publish(server.pool(), &events("node.joined", "acme", 3, 2)).await;

    let revoked_at = Instant::now();
    let closed = server.service.registry().close_where(&Selector::Session("s1".into()), "signed out");
    assert_eq!(closed, 1);
    assert_eq!(server.service.registry().len(), 1);
    held.commit().await.unwrap();

    let (after, error) = revoked.rest().await;
    assert!(revoked_at.elapsed() < Duration::from_secs(5), "closed after {:?}", revoked_at.elapsed());
    assert!(after.is_empty(), "nothing read after the revocation is sent: {after:?}");
    assert_eq!(error, Some(json!({"code": "ACCESS_DENIED", "message": "signed out"})));
    assert_eq!(numbers(&kept.events(3).await), [2, 3, 4], "the other session's stream goes on");
}

#[tokio::test]
async fn each_selector_closes_only_its_streams() {
    let server = TestServer::start().await;
    let registry = server.service.registry().clone();
    let tokens = ["acme:read:s1:agent-1", "acme:read:s2", "acme:read:s3:agent-2", "globex:read:s4:agent-1"];
    let mut streams = Vec::new();
    for token in tokens {
        let mut stream = server.watch("", token, &[]).await;
        assert_eq!(stream.next().await, Some(SseItem::Retry(2000)));
        streams.push(stream);
    }
    assert_eq!(registry.close_where(&Selector::Delegation("nope".into()), "x"), 0);
    assert_eq!(registry.close_where(&Selector::TenantAnyAgent("acme".into()), "agents suspended"), 2);
    assert_eq!(registry.close_where(&Selector::Agent("agent-1".into()), "agent suspended"), 1, "globex's agent");
    assert_eq!(registry.close_where(&Selector::Identity("user-acme".into()), "offboarded"), 1, "the person");
    assert!(registry.is_empty());
    let mut reasons = Vec::new();
    for stream in &mut streams {
        let (_, error) = stream.rest().await;
        reasons.push(error.expect("an error event")["message"].as_str().unwrap().to_owned());
    }
    assert_eq!(reasons, ["agents suspended", "offboarded", "agents suspended", "agent suspended"]);
}

#[test]
fn a_tenant_alone_is_refused_as_a_selector() {
    let refused = Selector::from_fields(None, None, None, None, Some("acme".into()), false);
    assert!(refused.is_err());
    let accepted = Selector::from_fields(None, None, None, None, Some("acme".into()), true);
    assert_eq!(accepted, Ok(Selector::TenantAnyAgent("acme".into())));
}

#[tokio::test]
async fn reauthorize_false_closes_the_stream() {
    let options = WatchOptions { reauthorize_ms: 20, ..WatchOptions::default() };
    let server = TestServer::with_options(options).await;
    let mut revoked = server.watch("", "acme:read:s9", &[]).await;
    let mut kept = server.watch("", "acme:read:s8", &[]).await;
    let before = server.auth.reauthorized();
    server.wait_until("streams were reauthorized", || server.auth.reauthorized() >= before + 4).await;
    server.auth.revoke_session("s9");
    let (_, error) = revoked.rest().await;
    assert_eq!(error.unwrap()["code"], "ACCESS_DENIED");
    server.publish(&events("node.joined", "acme", 0, 1)).await;
    assert_eq!(numbers(&kept.events(1).await), [0]);
}

#[tokio::test]
async fn a_short_outage_of_the_authority_is_tolerated() {
    let options = WatchOptions { reauthorize_ms: 10, iam_outage_ms: 60_000, ..WatchOptions::default() };
    let server = TestServer::with_options(options).await;
    let mut stream = server.watch("", "acme:read:s1", &[]).await;
    server.auth.set_outage(true);
    let before = server.auth.reauthorized();
    server.wait_until("failed reauthorizations", || server.auth.reauthorized() >= before + 3).await;
    server.auth.set_outage(false);
    server.publish(&events("node.joined", "acme", 0, 1)).await;
    assert_eq!(numbers(&stream.events(1).await), [0]);
}

#[tokio::test]
async fn a_long_outage_of_the_authority_closes_the_stream() {
    let options = WatchOptions { reauthorize_ms: 10, iam_outage_ms: 200, ..WatchOptions::default() };
    let server = TestServer::with_options(options).await;
    let mut stream = server.watch("", "acme:read:s1", &[]).await;
    let outage_from = Instant::now();
    server.auth.set_outage(true);
    let (_, error) = stream.rest().await;
    assert!(outage_from.elapsed() >= Duration::from_millis(200), "closed after {:?}", outage_from.elapsed());
    assert_eq!(error.unwrap()["code"], "UNAVAILABLE");
}
