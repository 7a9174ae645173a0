//! `GET /events`: pages, cursors, filters, and the protobuf answer (SPEC §5.3).

use bytes::Bytes;
use http::Method;
use outbox_core::{Event, Position};
use outbox_http::proto;
use prost::Message;

use crate::support::{Reply, TestServer, event, events, numbers, publish};

const READER: Option<&str> = Some("acme:read");

/// Reads every page of `query` (without `cursor`) to the end; returns the events and each page's size.
async fn all_pages(server: &TestServer, query: &str) -> (Vec<Event>, Vec<usize>) {
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let separator = if query.is_empty() { "?" } else { "&" };
        let path = match &cursor {
            Some(cursor) => format!("/events{query}{separator}cursor={cursor}"),
            None => format!("/events{query}"),
        };
        let reply = server.get(&path, READER).await;
        assert_eq!(reply.status, 200, "{path}: {}", String::from_utf8_lossy(&reply.body));
        let page = reply.events();
        sizes.push(page.len());
        seen.extend(page);
        match reply.json()["cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (seen, sizes),
        }
    }
}

#[tokio::test]
async fn pages_run_oldest_first_with_a_cursor_only_while_more_follow() {
    let server = TestServer::start().await;
    server.publish(&events("node.joined", "acme", 0, 120)).await;
    server.publish(&events("node.joined", "globex", 0, 10)).await;
    server.publish(&events("node.joined", "acme", 120, 130)).await;

    let first = server.get("/events?limit=100", READER).await;
    let first_events = first.events();
    assert_eq!(numbers(&first_events), (0..100).collect::<Vec<_>>());
    let cursor = first.json()["cursor"].as_str().expect("more follow").to_owned();
    assert_eq!(cursor, first_events[99].sequence.colon(), "the cursor is the last item's position, colon form");

    let (rest, sizes) = all_pages(&server, "?limit=100").await;
    assert_eq!(numbers(&rest), (0..250).collect::<Vec<_>>());
    assert_eq!(sizes, [100, 100, 50], "the last page has no cursor");
    assert!(rest.iter().all(|e| e.tenant_id == "acme"));
    assert!(rest.windows(2).all(|pair| pair[0].sequence < pair[1].sequence));

    // Tailing: the last item's sequence, in either form, continues after it.
    let last = rest.last().unwrap().sequence;
    for cursor in [last.dotted(), last.colon()] {
        let reply = server.get(&format!("/events?cursor={cursor}"), READER).await;
        assert!(reply.events().is_empty());
        assert!(reply.json().get("cursor").is_none());
    }
    server.publish(&events("node.joined", "acme", 250, 1)).await;
    let tail = wait_for_items(&server, &format!("/events?cursor={}", last.dotted()), 1).await;
    assert_eq!(numbers(&tail.events()), [250]);
}

/// Polls `path` until its page holds `want` items: rows become visible only when every
/// older transaction on the server (other tests' too) has finished.
async fn wait_for_items(server: &TestServer, path: &str, want: usize) -> Reply {
    let deadline = tokio::time::Instant::now() + crate::support::PATIENCE;
    loop {
        let reply = server.get(path, READER).await;
        if reply.events().len() >= want {
            return reply;
        }
        assert!(tokio::time::Instant::now() < deadline, "{path} never held {want} items");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_default_page_is_100_and_the_maximum_1000() {
    let server = TestServer::start().await;
    server.publish(&events("node.joined", "acme", 0, 1_200)).await;
    assert_eq!(server.get("/events", READER).await.events().len(), 100);
    let big = server.get("/events?limit=1000", READER).await;
    assert_eq!(big.events().len(), 1_000);
    assert!(big.json()["cursor"].is_string());
}

#[tokio::test]
async fn filters_by_types_family_and_subject() {
    let server = TestServer::start().await;
    let mut batch = Vec::new();
    for n in 0..60 {
        let kind = ["reservation.active", "node.joined", "node.gpu.added"][n % 3];
        batch.push(event(kind, "acme", n));
    }
    server.publish(&batch).await;
    let check = |query: &'static str, expect: Vec<u64>| {
        let server = &server;
        async move {
            let (seen, _) = all_pages(server, query).await;
            assert_eq!(numbers(&seen), expect, "{query}");
        }
    };
    let every =
        |modulo: usize, rests: &[usize]| (0..60u64).filter(|n| rests.contains(&((*n as usize) % modulo))).collect();
    check("?types=reservation.*", every(3, &[0])).await;
    check("?types=node.gpu.*,reservation.active&limit=7", every(3, &[0, 2])).await;
    check("?type=node.", every(3, &[1, 2])).await;
    check("?type=node.joined", every(3, &[1])).await;
    check("?types=*.added", every(3, &[2])).await;
    check("?types=nothing.here", vec![]).await;
    check("?subject=node/n3&limit=200", every(7, &[3])).await;
    check("?subject=node/n3&type=node.&limit=2", (0..60).filter(|n| n % 7 == 3 && n % 3 != 0).collect()).await;
}

#[tokio::test]
async fn a_sparse_filter_fills_the_page_across_reads() {
    let server = TestServer::start().await;
    // Ten matches, 400 rows apart: one read (about 1,000 rows) finds two or three.
    let mut batch = Vec::new();
    for n in 0..4_000 {
        let kind = if n % 400 == 399 { "reservation.active" } else { "node.joined" };
        batch.push(event(kind, "acme", n));
    }
    server.publish(&batch).await;
    let reply = server.get("/events?types=reservation.*&limit=5", READER).await;
    assert_eq!(numbers(&reply.events()), [399, 799, 1199, 1599, 1999], "the page is full");
    assert_eq!(reply.json()["cursor"], reply.events()[4].sequence.colon(), "it ended on an item");
    let (all, _) = all_pages(&server, "?types=reservation.*&limit=5").await;
    assert_eq!(all.len(), 10);
}

#[tokio::test]
async fn a_page_that_ends_on_skipped_rows_continues_from_the_scan_position() {
    let server = TestServer::start().await;
    server.publish(&events("node.joined", "acme", 0, 7_000)).await;
    server.publish(&events("reservation.active", "acme", 7_000, 1)).await;
    let first = server.get("/events?types=reservation.*", READER).await;
    assert!(first.events().is_empty(), "the scan budget ran out before the match");
    let cursor = Position::parse(first.json()["cursor"].as_str().expect("more rows follow")).unwrap();
    assert!(cursor.seq >= 5_000, "the cursor is where the scan stopped: {cursor}");
    let second = server.get(&format!("/events?types=reservation.*&cursor={}", cursor.colon()), READER).await;
    assert_eq!(numbers(&second.events()), [7_000]);
    assert!(second.json().get("cursor").is_none());
}

#[tokio::test]
async fn protobuf_is_the_same_page() {
    let server = TestServer::start().await;
    server.publish(&events("node.joined", "acme", 0, 30)).await;
    let json = server.get("/events?limit=20", READER).await;
    let headers =
        vec![("authorization", "Bearer acme:read".to_owned()), ("accept", "application/x-protobuf".to_owned())];
    let reply = server.send(Method::GET, "/events?limit=20", &headers, Bytes::new()).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["content-type"], "application/x-protobuf");
    let page = proto::EventPage::decode(reply.body.clone()).expect("an EventPage");
    assert_eq!(page.cursor, json.json()["cursor"].as_str().unwrap());
    let expected: Vec<proto::Event> = json.events().iter().map(proto::Event::from).collect();
    assert_eq!(page.items, expected);
    let first = &page.items[0];
    assert_eq!(first.r#type, "node.joined");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&first.data_json).unwrap(), serde_json::json!({"n": 0}));
    assert_eq!(first.time.len(), "2026-09-24T10:15:02.114Z".len());

    let last = server.send(Method::GET, &format!("/events?cursor={}", page.cursor), &headers, Bytes::new()).await;
    let last = proto::EventPage::decode(last.body).unwrap();
    assert_eq!(last.items.len(), 10);
    assert_eq!(last.cursor, "", "no more rows: an empty cursor");
}

#[tokio::test]
async fn newest_first_pages_stay_below_an_open_transaction_and_page_back_through_everything_once() {
    let server = TestServer::start().await;
    server.publish(&events("node.joined", "acme", 0, 120)).await;
    server.publish(&events("node.joined", "globex", 0, 10)).await;
    server.publish(&events("node.joined", "acme", 120, 60)).await;

    // A transaction that stays open while writers commit after it and the history is paged.
    let mut open = server.pool().begin().await.unwrap();
    outbox_pg::publish(&mut *open, &event("node.joined", "acme", 1000)).await.unwrap();
    let (open_txid,): (String,) = outbox_pg::sqlx::query_as("SELECT pg_current_xact_id()::text").fetch_one(&mut *open).await.unwrap();
    let open_txid: u64 = open_txid.parse().unwrap();
    let pool = server.pool().clone();
    let writers = tokio::spawn(async move {
        for batch in 0..10 {
            publish(&pool, &events("node.joined", "acme", 2000 + batch * 5, 5)).await;
        }
    });
    let (seen, sizes) = all_pages(&server, "?order=desc&limit=50").await;
    writers.await.unwrap();
    assert!(seen.iter().all(|e| e.sequence.txid < open_txid), "nothing at or after the open transaction's position");
    assert_eq!(numbers(&seen), (0..180).rev().collect::<Vec<_>>(), "every committed event once, newest first");
    assert_eq!(sizes, [50, 50, 50, 30]);

    open.commit().await.unwrap();
    server.settle().await;
    let (all, _) = all_pages(&server, "?order=desc&limit=7").await;
    let writes = (0..10).rev().flat_map(|batch| (2000 + batch * 5..2005 + batch * 5).rev());
    let expected: Vec<u64> = writes.chain([1000]).chain((0..180).rev()).map(|n| n as u64).collect();
    assert_eq!(numbers(&all), expected, "once committed, each transaction's events in their place");

    let cursor = all[49].sequence.colon();
    let older = server.get(&format!("/events?order=desc&limit=3&cursor={cursor}"), READER).await;
    assert_eq!(numbers(&older.events()), [1000, 179, 178], "strictly before the cursor (event 2000)");
    let reply = server.get("/events?order=newest", READER).await;
    reply.assert_refused(400, "INVALID_INPUT");
}

#[tokio::test]
async fn newest_first_with_a_filter_and_as_protobuf() {
    let server = TestServer::start().await;
    server.publish(&events("node.joined", "acme", 0, 30)).await;
    server.publish(&events("reservation.active", "acme", 30, 30)).await;
    server.publish(&events("node.joined", "acme", 60, 30)).await;
    let (nodes, _) = all_pages(&server, "?order=desc&type=node.&limit=20").await;
    assert_eq!(numbers(&nodes), (60..90).rev().chain((0..30).rev()).map(|n| n as u64).collect::<Vec<_>>());

    let headers = [("authorization", "Bearer acme:read".to_owned()), ("accept", "application/x-protobuf".to_owned())];
    let reply = server.send(Method::GET, "/events?order=desc&limit=2", &headers, Bytes::new()).await;
    assert_eq!(reply.status, 200);
    let page = proto::EventPage::decode(reply.body.as_ref()).unwrap();
    assert_eq!(page.items.len(), 2);
    let newest: Vec<&str> = page.items.iter().map(|item| item.id.as_str()).collect();
    let (json, _) = all_pages(&server, "?order=desc&limit=2").await;
    assert_eq!(newest, [json[0].id.as_str(), json[1].id.as_str()]);
    assert!(!page.cursor.is_empty(), "older events follow");
}
