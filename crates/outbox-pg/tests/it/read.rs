//! The xmin read: the commit-order gap, filters, paging, retention.

use std::time::Duration;

use outbox_core::{Event, Pattern, Position};
use outbox_pg::internal::read::{head, read_to_head};
use outbox_pg::testkit::{TestDb, settle};
use outbox_pg::{ReadRequest, read_page};
use outbox_pg::{publish, publish_many};
use serde_json::json;
use sqlx::PgPool;

use crate::support::{event, numbered, positions, read_until};

/// What a naive outbox reader does: walk `seq` past a cursor.
async fn naive_read(pool: &PgPool, after_seq: i64) -> Vec<(i64, serde_json::Value)> {
    sqlx::query_as("SELECT seq, payload->'data' FROM outbox WHERE seq > $1 ORDER BY seq")
        .bind(after_seq)
        .fetch_all(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_commit_order_gap_loses_events_for_seq_readers_but_not_for_the_xmin_read() {
    let db = TestDb::new().await;
    // A inserts first (smaller txid and seq) and stays open; B inserts after it and commits.
    let mut a = db.pool.begin().await.unwrap();
    publish(&mut *a, &event("node.joined", "acme", json!({"who": "A"}))).await.unwrap();
    let mut b = db.pool.begin().await.unwrap();
    publish(&mut *b, &event("node.joined", "acme", json!({"who": "B"}))).await.unwrap();
    b.commit().await.unwrap();

    // The naive reader hands out B and moves its cursor past A's seq.
    let naive_first = naive_read(&db.pool, 0).await;
    assert_eq!(naive_first.len(), 1);
    assert_eq!(naive_first[0].1, json!({"who": "B"}));
    let naive_cursor = naive_first[0].0;

    // The xmin reader shows neither while A is open.
    let while_open = read_page(&db.pool, &ReadRequest::all()).await.unwrap();
    assert!(while_open.events.is_empty(), "xmin read showed {:?} while A was open", while_open.events);
    assert_eq!(head(&db.pool).await.unwrap(), Position::START);

    a.commit().await.unwrap();

    // The naive reader never sees A: it is behind its cursor.
    let naive_after = naive_read(&db.pool, naive_cursor).await;
    assert!(naive_after.is_empty(), "the naive reader lost A's event");

    // The xmin reader now gives both, in (txid, seq) order: A, then B.
    let events = read_until(&db.pool, ReadRequest::all(), 2).await;
    let who: Vec<serde_json::Value> = events.iter().map(|e| e.data.value()["who"].clone()).collect();
    assert_eq!(who, [json!("A"), json!("B")]);
    assert!(events[0].sequence < events[1].sequence);
    assert!(events[0].sequence.txid < events[1].sequence.txid);
}

/// PostgreSQL writes `jsonb` as `{"a": 1, ...}`; a read hands `data` on as compact text,
/// with the spaces inside its strings kept, equal to what was published.
#[tokio::test]
async fn data_comes_back_as_compact_json_equal_to_what_was_published() {
    let db = TestDb::new().await;
    let data = json!({"a": 1, "list": [1, 2.5, {"k": "x, y: z"}], "note": "two  spaces \"quoted\"", "none": null});
    publish(&db.pool, &event("node.joined", "acme", data.clone())).await.unwrap();
    let events = read_until(&db.pool, ReadRequest::all(), 1).await;
    assert_eq!(events[0].data, data);
    assert_eq!(events[0].data.get(), serde_json::to_string(&data).unwrap());
    assert_eq!(events[0].data.parse::<serde_json::Value>().unwrap(), data);
}

/// Rows written around the outbox, by hand: each field is read on its own, strings come back
/// unescaped, any RFC 3339 time is accepted, a missing `data` is `null`, and a row missing a
/// field is an error naming its position, for both statement shapes (plain and filtered).
#[tokio::test]
async fn hand_written_rows_read_field_by_field_and_a_broken_one_is_named() {
    let db = TestDb::new().await;
    let insert =
        "INSERT INTO outbox (topic, payload) VALUES ('node.joined', $1::jsonb) RETURNING txid::text::bigint, seq";
    let good = json!({
        "id": "evt_01k5y3v0m6y8x7w5t4s3r2p1n0", "tenantId": "acme", "subject": "node/\"n1\" é\n",
        "time": "2026-09-24T12:15:02.114+02:00"
    });
    let (txid, seq): (i64, i64) = sqlx::query_as(insert).bind(good.to_string()).fetch_one(&db.pool).await.unwrap();
    let good_at = Position::new(txid as u64, seq as u64);
    settle(&db.pool, Duration::from_secs(20)).await;
    let requests = [ReadRequest::all(), ReadRequest::all().types([Pattern::parse("node.*").unwrap()])];
    for request in &requests {
        let page = read_page(&db.pool, request).await.unwrap();
        let [event] = &page.events[..] else { panic!("read {:?}", page.events) };
        assert_eq!(event.sequence, good_at);
        assert_eq!(event.id, "evt_01k5y3v0m6y8x7w5t4s3r2p1n0");
        assert_eq!(event.subject, "node/\"n1\" é\n");
        assert_eq!(outbox_core::millis::format(event.time), "2026-09-24T10:15:02.114Z");
        assert_eq!(event.data.get(), "null");
    }

    let broken = json!({"tenantId": "acme", "subject": "node/n2", "time": "2026-09-24T10:15:02.114Z", "data": {}});
    let (txid, seq): (i64, i64) = sqlx::query_as(insert).bind(broken.to_string()).fetch_one(&db.pool).await.unwrap();
    let broken_at = Position::new(txid as u64, seq as u64);
    settle(&db.pool, Duration::from_secs(20)).await;
    for request in requests {
        match read_page(&db.pool, &request.after(good_at)).await {
            Err(outbox_pg::Error::MalformedRow { position, reason }) => {
                assert_eq!(position, broken_at);
                assert!(reason.contains("lacks id"), "{reason}");
            }
            other => panic!("a row without an id read as {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_tenant_is_part_of_the_query() {
    let db = TestDb::new().await;
    let batch: Vec<_> =
        (0..30).map(|n| event("node.joined", ["acme", "globex", "initech"][n % 3], json!({"n": n}))).collect();
    publish_many(&db.pool, &batch).await.unwrap();
    let all = read_until(&db.pool, ReadRequest::all(), 30).await;
    // A limit smaller than the tenant's rows: a filter applied after the query would return
    // fewer than 3 (the first 3 rows hold one acme event), the query filter returns 3.
    let acme = read_page(&db.pool, &ReadRequest::tenant("acme").limit(3)).await.unwrap();
    let ns: Vec<u64> = acme.events.iter().map(|e| e.data.value()["n"].as_u64().unwrap()).collect();
    assert_eq!(ns, [0, 3, 6]);
    assert!(acme.more);
    assert_eq!(acme.next_after, all[6].sequence);
    let rest = read_page(&db.pool, &ReadRequest::tenant("acme").after(acme.next_after).limit(100)).await.unwrap();
    assert_eq!(rest.events.len(), 7);
    assert!(rest.events.iter().all(|e| e.tenant_id == "acme"));
    assert!(!rest.more);
    let nobody = read_page(&db.pool, &ReadRequest::tenant("nobody")).await.unwrap();
    assert!(nobody.events.is_empty() && !nobody.more);
}

#[tokio::test]
async fn a_tenant_read_to_the_head_passes_the_other_tenants_rows_after_its_last() {
    let db = TestDb::new().await;
    let batch: Vec<_> = ["acme", "globex", "globex"].iter().map(|t| event("node.joined", t, json!({}))).collect();
    publish_many(&db.pool, &batch).await.unwrap();
    let all = read_until(&db.pool, ReadRequest::all(), 3).await;

    let acme = read_to_head(&db.pool, &ReadRequest::tenant("acme")).await.unwrap();
    assert_eq!(positions(&acme.events), [all[0].sequence]);
    assert_eq!(acme.next_after, all[0].sequence, "a page with an event ends at it");
    let past = read_to_head(&db.pool, &ReadRequest::tenant("acme").after(acme.next_after)).await.unwrap();
    assert!(past.events.is_empty() && !past.more);
    assert_eq!(past.next_after, all[2].sequence, "an empty page at the end moves to the head");
    let plain = read_page(&db.pool, &ReadRequest::tenant("acme").after(acme.next_after)).await.unwrap();
    assert_eq!(plain.next_after, all[0].sequence, "the plain read stays at the tenant's last row");
    // Without a tenant both reads return the same page; their snapshots may differ (other
    // tests' transactions move the server's xmin between them), so those are not compared.
    let every = read_to_head(&db.pool, &ReadRequest::all().after(all[0].sequence)).await.unwrap();
    let plain = read_page(&db.pool, &ReadRequest::all().after(all[0].sequence)).await.unwrap();
    assert_eq!((&every.events, every.next_after, every.more), (&plain.events, plain.next_after, plain.more));
}

#[tokio::test]
async fn pages_follow_each_other_without_gap_or_repeat() {
    let db = TestDb::new().await;
    let batch: Vec<_> = (0..250).map(numbered).collect();
    publish_many(&db.pool, &batch).await.unwrap();
    read_until(&db.pool, ReadRequest::all(), 250).await;
    let mut request = ReadRequest::all().limit(100);
    let mut sizes = Vec::new();
    let mut seen: Vec<Event> = Vec::new();
    loop {
        let page = read_page(&db.pool, &request).await.unwrap();
        sizes.push((page.events.len(), page.more));
        seen.extend(page.events.clone());
        if !page.more {
            break;
        }
        request.after = Some(page.next_after);
    }
    assert_eq!(sizes, [(100, true), (100, true), (50, false)]);
    let ns: Vec<u64> = seen.iter().map(|e| e.data.value()["n"].as_u64().unwrap()).collect();
    assert_eq!(ns, (0..250).collect::<Vec<u64>>());
    let mut sorted = positions(&seen);
    sorted.sort();
    assert_eq!(sorted, positions(&seen));
}

#[tokio::test]
async fn a_filter_that_matches_nothing_still_advances() {
    let db = TestDb::new().await;
    let batch: Vec<_> = (0..120).map(numbered).collect();
    publish_many(&db.pool, &batch).await.unwrap();
    let all = read_until(&db.pool, ReadRequest::all(), 120).await;
    let end = all.last().unwrap().sequence;
    let mut request = ReadRequest::all().types([Pattern::parse("reservation.*").unwrap()]).limit(10);
    request.scan_limit = 50;
    let mut steps = Vec::new();
    loop {
        let page = read_page(&db.pool, &request).await.unwrap();
        assert!(page.events.is_empty());
        assert!(page.next_after > request.after.unwrap_or(Position::START) || !page.more);
        steps.push(page.next_after);
        request.after = Some(page.next_after);
        if !page.more {
            break;
        }
    }
    assert_eq!(steps, [all[49].sequence, all[99].sequence, end], "scans 50, 50, then the last 20");
}

#[tokio::test]
async fn patterns_and_subject_filter_after_the_tenant() {
    let db = TestDb::new().await;
    let mut batch = Vec::new();
    for n in 0..40 {
        let kind = ["reservation.active", "node.joined", "node.gpu.missing", "pool.created"][n % 4];
        let mut e = event(kind, if n % 2 == 0 { "acme" } else { "globex" }, json!({"n": n}));
        e.subject = format!("thing/t{}", n % 5);
        batch.push(e);
    }
    publish_many(&db.pool, &batch).await.unwrap();
    read_until(&db.pool, ReadRequest::all(), 40).await;
    let patterns = [Pattern::parse("reservation.*").unwrap(), Pattern::parse("node.gpu.*").unwrap()];
    let page = read_page(&db.pool, &ReadRequest::tenant("acme").types(patterns).limit(100)).await.unwrap();
    let types: Vec<&str> = page.events.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(types.len(), 20);
    assert!(types.iter().all(|t| *t == "reservation.active" || *t == "node.gpu.missing"), "{types:?}");
    let subject = read_page(&db.pool, &ReadRequest::tenant("acme").subject("thing/t0")).await.unwrap();
    let ns: Vec<u64> = subject.events.iter().map(|e| e.data.value()["n"].as_u64().unwrap()).collect();
    assert_eq!(ns, [0, 10, 20, 30]);
    let star = read_page(&db.pool, &ReadRequest::all().types([Pattern::all()]).limit(100)).await.unwrap();
    assert_eq!(star.events.len(), 40);
}

#[tokio::test]
async fn patterns_in_sql_select_exactly_what_pattern_matches_selects() {
    let db = TestDb::new().await;
    let types = ["node.a-b", "node.axb", "node.a", "node.gpu.missing", "nodes.a", "reservation.node.a", "a.b"];
    publish_many(&db.pool, &types.map(|t| event(t, "acme", json!({})))).await.unwrap();
    read_until(&db.pool, ReadRequest::all(), types.len()).await;
    for pattern in ["node.a-b", "node.*", "node*", "*.a", "*node*", "node.a*b", "*", "a.b", "node.*.missing", "x.*"] {
        let pattern = Pattern::parse(pattern).unwrap();
        let page = read_page(&db.pool, &ReadRequest::all().types([pattern.clone()]).limit(100)).await.unwrap();
        let got: Vec<&str> = page.events.iter().map(|e| e.event_type.as_str()).collect();
        let expected: Vec<&str> = types.iter().copied().filter(|t| pattern.matches(t)).collect();
        assert_eq!(got, expected, "pattern {pattern}");
    }
}

#[tokio::test]
async fn a_filtered_read_that_fills_its_limit_continues_after_its_last_event() {
    let db = TestDb::new().await;
    let batch: Vec<_> = (0..60)
        .map(|n| event(if n % 2 == 0 { "reservation.active" } else { "node.joined" }, "acme", json!({"n": n})))
        .collect();
    publish_many(&db.pool, &batch).await.unwrap();
    read_until(&db.pool, ReadRequest::all(), 60).await;
    let mut request = ReadRequest::all().types([Pattern::parse("reservation.*").unwrap()]).limit(10);
    let mut pages = Vec::new();
    loop {
        let page = read_page(&db.pool, &request).await.unwrap();
        let ns: Vec<u64> = page.events.iter().map(|e| e.data.value()["n"].as_u64().unwrap()).collect();
        if let Some(last) = page.events.last() {
            assert!(page.next_after >= last.sequence);
        }
        pages.push((ns, page.more));
        request.after = Some(page.next_after);
        if !page.more {
            break;
        }
    }
    let first: Vec<u64> = (0..20).step_by(2).collect();
    assert_eq!(pages[0], (first, true), "a full page ends at its last event");
    let all: Vec<u64> = pages.iter().flat_map(|(ns, _)| ns.clone()).collect();
    assert_eq!(all, (0..60).step_by(2).collect::<Vec<u64>>());
}

#[tokio::test]
async fn a_pruned_position_continues_with_the_oldest_row_still_there() {
    let db = TestDb::new().await;
    publish_many(&db.pool, &(0..10).map(numbered).collect::<Vec<_>>()).await.unwrap();
    let all = read_until(&db.pool, ReadRequest::all(), 10).await;
    sqlx::query("DELETE FROM outbox WHERE (payload->'data'->>'n')::int < 6").execute(&db.pool).await.unwrap();
    let page = read_page(&db.pool, &ReadRequest::all().after(all[2].sequence)).await.unwrap();
    assert_eq!(positions(&page.events), positions(&all[6..]));
}

#[tokio::test]
async fn the_limit_is_checked() {
    let db = TestDb::new().await;
    for limit in [0, outbox_pg::MAX_LIMIT + 1] {
        let error = read_page(&db.pool, &ReadRequest::all().limit(limit)).await.unwrap_err();
        assert_eq!(error.code(), outbox_core::ErrorCode::InvalidInput, "{limit}");
    }
}

#[tokio::test]
async fn head_is_the_newest_visible_position() {
    let db = TestDb::new().await;
    assert_eq!(head(&db.pool).await.unwrap(), Position::START);
    publish_many(&db.pool, &(0..5).map(numbered).collect::<Vec<_>>()).await.unwrap();
    let all = read_until(&db.pool, ReadRequest::all(), 5).await;
    assert_eq!(head(&db.pool).await.unwrap(), all[4].sequence);
}
