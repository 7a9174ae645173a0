//! Webhook subscriptions' rows: tenant isolation, the per-tenant limit under concurrency,
//! secrets sealed at rest and rotated with a grace period, the cursor from the head, and
//! the kept attempts.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use outbox_core::Position;
use outbox_core::webhook::Secret;
use outbox_pg::internal::seal::SealKey;
use outbox_pg::internal::webhook::{self, CURSOR_STREAM, NewAttempt, NewWebhook, Patch};
use outbox_pg::internal::{clock, cursor};
use outbox_pg::testkit::TestDb;
use time::OffsetDateTime;

use crate::support::numbered;

fn key() -> SealKey {
    SealKey::parse(&SealKey::generate().unwrap()).unwrap()
}

fn new_webhook(url: &str) -> NewWebhook {
    NewWebhook {
        url: url.into(),
        types: vec!["node.*".into()],
        description: "ops".into(),
        headers: BTreeMap::from([("Authorization".to_owned(), "Bearer receiver-token".to_owned())]),
        metadata: serde_json::json!({"team": "ops"}),
        secret: None,
        lanes: None,
    }
}

#[tokio::test]
async fn a_tenant_sees_and_changes_only_its_own_subscriptions() {
    let db = TestDb::new().await;
    let key = key();
    let (acme, secret) =
        webhook::create(&db.pool, &key, "acme", &new_webhook("https://a.example/h"), 100).await.unwrap();
    let (globex, _) =
        webhook::create(&db.pool, &key, "globex", &new_webhook("https://g.example/h"), 100).await.unwrap();
    assert!(acme.id.starts_with("wh_") && acme.id.len() == 29, "{}", acme.id);
    assert_eq!(secret.bytes().len(), 24, "a generated secret");
    assert_eq!(acme.header_names, ["Authorization"]);
    assert!(acme.enabled && acme.disabled_reason.is_none());

    assert_eq!(webhook::get(&db.pool, Some("acme"), &acme.id).await.unwrap().as_ref(), Some(&acme));
    assert_eq!(webhook::get(&db.pool, Some("acme"), &globex.id).await.unwrap(), None, "another tenant's is not found");
    assert!(webhook::get(&db.pool, None, &globex.id).await.unwrap().is_some(), "an administrator finds any");
    let listed = webhook::list(&db.pool, "acme", None, 100).await.unwrap();
    assert_eq!(listed.iter().map(|o| o.webhook.id.as_str()).collect::<Vec<_>>(), [acme.id.as_str()]);

    let patch = Patch { enabled: Some(false), ..Patch::default() };
    assert_eq!(webhook::update(&db.pool, &key, Some("acme"), &globex.id, &patch).await.unwrap(), None);
    assert!(!webhook::delete(&db.pool, Some("acme"), &globex.id).await.unwrap());
    assert!(webhook::rotate(&db.pool, &key, Some("acme"), &globex.id, None, Duration::ZERO).await.unwrap().is_none());
    assert!(webhook::attempts(&db.pool, Some("acme"), &globex.id).await.unwrap().is_none());
    assert!(webhook::get(&db.pool, None, &globex.id).await.unwrap().unwrap().enabled, "untouched");
}

#[tokio::test]
async fn the_limit_per_tenant_holds_under_concurrent_creation() {
    let db = TestDb::new().await;
    let key = std::sync::Arc::new(key());
    let mut creations = tokio::task::JoinSet::new();
    for n in 0..12 {
        let (pool, key) = (db.pool.clone(), key.clone());
        let new = new_webhook(&format!("https://a.example/{n}"));
        creations.spawn(async move { webhook::create(&pool, &key, "acme", &new, 5).await });
    }
    let results = creations.join_all().await;
    let created = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(created, 5, "exactly the limit");
    let refusal = results.into_iter().find_map(Result::err).unwrap();
    assert_eq!(refusal.code(), outbox_core::ErrorCode::InvalidInput);
    assert!(refusal.to_string().contains("the most it may have (5)"), "{refusal}");
    assert_eq!(webhook::list(&db.pool, "acme", None, 100).await.unwrap().len(), 5);
    webhook::create(&db.pool, &key, "globex", &new_webhook("https://g.example/"), 5)
        .await
        .expect("another tenant's own count");
}

#[tokio::test]
async fn secrets_and_header_values_are_sealed_and_rotate_with_a_grace_period() {
    let db = TestDb::new().await;
    let key = key();
    let given = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let new = NewWebhook { secret: Some(given.clone()), ..new_webhook("https://a.example/h") };
    let (created, secret) = webhook::create(&db.pool, &key, "acme", &new, 100).await.unwrap();
    assert_eq!(secret, given);

    let (sealed,): (Vec<u8>,) = sqlx::query_as("SELECT sealed FROM outbox_webhooks WHERE id = $1")
        .bind(&created.id)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let raw = String::from_utf8_lossy(&sealed);
    assert!(!raw.contains("MfKQ9r8G") && !raw.contains("receiver-token"), "nothing readable at rest");
    let keys = webhook::keys(&db.pool, &key, &created.id).await.unwrap().unwrap();
    assert_eq!(keys.signing, std::slice::from_ref(&given));
    assert_eq!(keys.headers["Authorization"], "Bearer receiver-token");
    let wrong = webhook::keys(&db.pool, &self::key(), &created.id).await.unwrap_err();
    assert!(wrong.to_string().contains("does not open"), "{wrong}");

    let (_, rotated) = webhook::rotate(&db.pool, &key, Some("acme"), &created.id, None, Duration::from_secs(3600))
        .await
        .unwrap()
        .unwrap();
    assert_ne!(rotated, given);
    let keys = webhook::keys(&db.pool, &key, &created.id).await.unwrap().unwrap();
    assert_eq!(keys.signing, [rotated.clone(), given.clone()], "the new one first, the old one in its grace period");
    assert_eq!(keys.headers["Authorization"], "Bearer receiver-token", "rotation keeps the headers");

    outbox_pg::internal::clock::advance(&db.pool, Duration::from_secs(3601)).await.unwrap();
    let keys = webhook::keys(&db.pool, &key, &created.id).await.unwrap().unwrap();
    assert_eq!(keys.signing, std::slice::from_ref(&rotated), "the grace period ended");

    for _ in 0..webhook::MAX_OLD_SECRETS {
        webhook::rotate(&db.pool, &key, None, &created.id, None, Duration::from_secs(600)).await.unwrap().unwrap();
    }
    let refused = webhook::rotate(&db.pool, &key, None, &created.id, None, Duration::from_secs(600)).await.unwrap_err();
    assert!(refused.to_string().contains("still in their grace period"), "{refused}");
    let too_long = webhook::rotate(&db.pool, &key, None, &created.id, None, webhook::MAX_GRACE * 2).await.unwrap_err();
    assert!(too_long.to_string().contains("7 days"), "{too_long}");
    assert_eq!(webhook::keys(&db.pool, &key, &created.id).await.unwrap().unwrap().signing.len(), 11);
}

#[tokio::test]
async fn a_subscription_starts_at_the_head_and_resumes_from_its_cursor_or_from_now() {
    let db = TestDb::new().await;
    let key = key();
    outbox_pg::publish_many(&db.pool, &[numbered(1), numbered(2)]).await.unwrap();
    let head = outbox_pg::testkit::settle(&db.pool, Duration::from_secs(20)).await;
    let (created, _) = webhook::create(&db.pool, &key, "acme", &new_webhook("https://a.example/h"), 100).await.unwrap();
    let cursor = cursor::load(&db.pool, CURSOR_STREAM, &created.id).await.unwrap();
    assert_eq!(cursor, Some(head), "what was visible before creation is behind the cursor");
    assert_eq!(created.position, head);

    let off = Patch { enabled: Some(false), ..Patch::default() };
    let disabled = webhook::update(&db.pool, &key, Some("acme"), &created.id, &off).await.unwrap().unwrap();
    assert_eq!((disabled.enabled, disabled.disabled_reason.as_deref()), (false, Some("manual")));
    outbox_pg::publish(&db.pool, &numbered(3)).await.unwrap();
    let later = outbox_pg::testkit::settle(&db.pool, Duration::from_secs(20)).await;
    assert!(later > head);

    let on = Patch { enabled: Some(true), ..Patch::default() };
    let enabled = webhook::update(&db.pool, &key, Some("acme"), &created.id, &on).await.unwrap().unwrap();
    assert!(enabled.enabled && enabled.disabled_reason.is_none());
    assert_eq!(enabled.position, head, "enabled again: from the cursor, so event 3 is still ahead");

    let now = Patch { enabled: Some(true), resume_now: true, ..Patch::default() };
    let from_now = webhook::update(&db.pool, &key, Some("acme"), &created.id, &now).await.unwrap().unwrap();
    assert_eq!(from_now.position, later, "resume from now skips to the head");

    let headers = Patch { headers: Some(BTreeMap::from([("X-Key".to_owned(), "k2".to_owned())])), ..Patch::default() };
    let changed = webhook::update(&db.pool, &key, None, &created.id, &headers).await.unwrap().unwrap();
    assert_eq!(changed.header_names, ["X-Key"]);
    let keys = webhook::keys(&db.pool, &key, &created.id).await.unwrap().unwrap();
    assert_eq!(keys.headers, BTreeMap::from([("X-Key".to_owned(), "k2".to_owned())]));
    assert_eq!(keys.signing.len(), 1, "the secret survives a change of headers");

    assert!(webhook::delete(&db.pool, Some("acme"), &created.id).await.unwrap());
    assert_eq!(cursor::load(&db.pool, CURSOR_STREAM, &created.id).await.unwrap(), None, "the cursor goes with it");
    assert!(webhook::get(&db.pool, None, &created.id).await.unwrap().is_none());
}

#[tokio::test]
async fn the_newest_hundred_attempts_are_kept_newest_first() {
    let db = TestDb::new().await;
    let (created, _) =
        webhook::create(&db.pool, &key(), "acme", &new_webhook("https://a.example/h"), 100).await.unwrap();
    for n in 0..105u16 {
        let attempt = NewAttempt {
            started: Instant::now(),
            event_id: Some(format!("evt_{n}")),
            status: Some(200 + n % 2),
            duration_ms: u32::from(n),
            error: (n % 2 == 1).then(|| "refused".to_owned()),
            response: Some("ok".into()),
        };
        webhook::record_attempt(&db.pool, &created.id, &attempt).await.unwrap();
    }
    let kept = webhook::attempts(&db.pool, Some("acme"), &created.id).await.unwrap().unwrap();
    assert_eq!(kept.len(), 100);
    assert_eq!(kept[0].event_id.as_deref(), Some("evt_104"), "newest first");
    assert_eq!(kept[99].event_id.as_deref(), Some("evt_5"), "the five oldest are gone");
    assert_eq!((kept[0].status, kept[0].duration_ms, kept[0].error.as_deref()), (Some(200), 104, None));
    assert_eq!(kept[1].error.as_deref(), Some("refused"));
}

/// A failed attempt made `ago` before `now`.
fn failed(now: Instant, ago: Duration, n: u32) -> NewAttempt {
    NewAttempt {
        started: now.checked_sub(ago).expect("the monotonic clock is older than the test's offsets"),
        event_id: Some(format!("evt_{n}")),
        status: Some(503),
        duration_ms: 10,
        error: Some("unavailable".into()),
        response: None,
    }
}

#[tokio::test]
async fn attempt_times_and_failing_since_follow_the_database_clock_keeping_a_batchs_spacing() {
    const DAY: Duration = Duration::from_secs(86_400);
    let db = TestDb::new().await;
    let (created, _) =
        webhook::create(&db.pool, &key(), "acme", &new_webhook("https://a.example/h"), 100).await.unwrap();
    clock::advance(&db.pool, DAY).await.unwrap();
    let made = Instant::now();
    let batch = [failed(made, Duration::from_secs(20), 0), failed(made, Duration::from_secs(10), 1)];
    let outcome = webhook::record_outcome(&db.pool, &created.id, &batch, false, false, 2 * DAY).await.unwrap();
    assert_eq!(outcome, webhook::Outcome::Recorded);
    let database_now = clock::now(&db.pool).await.unwrap();
    assert!(database_now - OffsetDateTime::now_utc() > time::Duration::hours(23), "the database clock is a day ahead");

    let failing_since = webhook::get(&db.pool, None, &created.id).await.unwrap().unwrap().failing_since.unwrap();
    let before_now = database_now - failing_since;
    assert!(time::Duration::ZERO <= before_now && before_now < time::Duration::minutes(1), "{before_now}");
    let kept = webhook::attempts(&db.pool, None, &created.id).await.unwrap().unwrap();
    let ids: Vec<_> = kept.iter().map(|a| a.event_id.as_deref().unwrap()).collect();
    assert_eq!(ids, ["evt_1", "evt_0"], "newest first, in the batch's order");
    let spacing = kept[0].time - kept[1].time;
    assert!((spacing - time::Duration::seconds(10)).abs() < time::Duration::seconds(1), "spaced {spacing}");
    // The newer attempt started 10 s before the recording, whose clock was `failing_since`.
    let newest_before = failing_since - kept[0].time;
    assert!((newest_before - time::Duration::seconds(10)).abs() < time::Duration::seconds(5), "{newest_before}");

    webhook::record_attempt(&db.pool, &created.id, &failed(Instant::now(), Duration::ZERO, 2)).await.unwrap();
    let ping = webhook::last_attempt(&db.pool, &created.id).await.unwrap().unwrap();
    let ping_before = clock::now(&db.pool).await.unwrap() - ping.time;
    assert!(time::Duration::ZERO <= ping_before && ping_before < time::Duration::minutes(1), "{ping_before}");
}

#[tokio::test]
async fn an_enabled_subscription_holds_retention_back_and_a_disabled_one_does_not() {
    use outbox_pg::internal::retention::{Holders, holding_cursors};
    let db = TestDb::new().await;
    let key = key();
    let (created, _) = webhook::create(&db.pool, &key, "acme", &new_webhook("https://a.example/h"), 100).await.unwrap();
    let names = |cursors: Vec<outbox_pg::internal::retention::HoldingCursor>| -> Vec<String> {
        cursors.into_iter().map(|cursor| cursor.name).collect()
    };
    let holding = names(holding_cursors(&db.pool, &Holders::Every).await.unwrap());
    assert_eq!(holding, [format!("webhook:{}", created.id)]);
    let off = Patch { enabled: Some(false), ..Patch::default() };
    webhook::update(&db.pool, &key, None, &created.id, &off).await.unwrap();
    assert!(holding_cursors(&db.pool, &Holders::Every).await.unwrap().is_empty(), "a disabled one holds nothing back");
}

#[tokio::test]
async fn a_subscription_disabled_while_retention_pruned_past_its_cursor_has_a_gap() {
    use outbox_pg::internal::retention;
    let db = TestDb::new().await;
    let key = key();
    let (kept, _) = webhook::create(&db.pool, &key, "acme", &new_webhook("https://a.example/h"), 100).await.unwrap();
    let off = Patch { enabled: Some(false), ..Patch::default() };
    webhook::update(&db.pool, &key, None, &kept.id, &off).await.unwrap();
    outbox_pg::publish_many(&db.pool, &[numbered(1), numbered(2)]).await.unwrap();
    let head = outbox_pg::testkit::settle(&db.pool, Duration::from_secs(20)).await;
    assert!(!webhook::get(&db.pool, None, &kept.id).await.unwrap().unwrap().gap, "nothing pruned yet");

    let pruned = retention::prune_batch(&db.pool, None, head, 100, Duration::ZERO).await.unwrap();
    assert_eq!(pruned.deleted, 2);
    retention::record_pruned(&db.pool, pruned.last.unwrap()).await.unwrap();
    let on = Patch { enabled: Some(true), ..Patch::default() };
    let enabled = webhook::update(&db.pool, &key, None, &kept.id, &on).await.unwrap().unwrap();
    assert!(enabled.gap, "the two events it was owed are gone");
    retention::record_pruned(&db.pool, Position::START).await.unwrap();
    assert!(webhook::get(&db.pool, None, &kept.id).await.unwrap().unwrap().gap, "the pruned position never goes back");
    let (fresh, _) = webhook::create(&db.pool, &key, "acme", &new_webhook("https://a.example/2"), 100).await.unwrap();
    assert!(!fresh.gap, "a subscription created after the pruning starts after it");
    let now = Patch { enabled: Some(true), resume_now: true, ..Patch::default() };
    assert!(!webhook::update(&db.pool, &key, None, &kept.id, &now).await.unwrap().unwrap().gap, "resumed from now");
}

#[tokio::test]
async fn a_page_of_subscriptions_carries_each_ones_lag_and_newest_attempt_from_one_statement() {
    use outbox_core::{NewEvent, Pattern};
    use outbox_pg::ReadRequest;

    let db = TestDb::new().await;
    let key = key();
    let mut ids = Vec::new();
    for types in [vec!["node.*"], vec!["*"], vec!["reservation.active", "node.left"]] {
        let new =
            NewWebhook { types: types.into_iter().map(str::to_owned).collect(), ..new_webhook("https://a.example/h") };
        ids.push(webhook::create(&db.pool, &key, "acme", &new, 100).await.unwrap().0.id);
    }
    let events: Vec<NewEvent> = [("node.joined", "acme"), ("node.left", "acme"), ("reservation.active", "acme")]
        .iter()
        .chain(&[("reservation.ended", "acme"), ("node.joined", "globex")])
        .map(|(event_type, tenant)| NewEvent::new(*event_type, *tenant, "node/n1", serde_json::json!({})))
        .collect();
    outbox_pg::publish_many(&db.pool, &events).await.unwrap();
    outbox_pg::testkit::settle(&db.pool, Duration::from_secs(20)).await;
    webhook::record_attempt(&db.pool, &ids[1], &failed(Instant::now(), Duration::ZERO, 7)).await.unwrap();

    let page = webhook::list(&db.pool, "acme", None, 10).await.unwrap();
    assert_eq!(page.iter().map(|o| o.webhook.id.clone()).collect::<Vec<_>>(), ids);
    assert_eq!(page.iter().map(|o| o.lag).collect::<Vec<_>>(), [2, 4, 2]);
    for overview in &page {
        let patterns = overview.webhook.types.iter().map(|p| Pattern::parse(p).unwrap());
        let request = ReadRequest::tenant("acme").types(patterns).after(overview.webhook.position);
        let lag = cursor::lag(&db.pool, &request, cursor::LAG_CAP).await.unwrap();
        assert_eq!(overview.lag, lag, "counted as the sinks' lag is: {:?}", overview.webhook.types);
        assert!(!overview.lag_capped());
        let last = webhook::last_attempt(&db.pool, &overview.webhook.id).await.unwrap();
        assert_eq!(overview.last_attempt, last);
    }
    assert_eq!(page[1].last_attempt.as_ref().and_then(|a| a.event_id.as_deref()), Some("evt_7"));
    let one = webhook::overview(&db.pool, Some("acme"), &ids[1]).await.unwrap().unwrap();
    assert_eq!(one, page[1]);
    assert_eq!(webhook::overview(&db.pool, Some("globex"), &ids[1]).await.unwrap(), None);
}
