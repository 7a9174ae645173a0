//! Webhook subscriptions delivered by `WebhookDeliveries` to a real receiver on loopback,
//! every request checked by the test's own Standard Webhooks verifier: order, tenant
//! isolation, rotation, 410, resuming after a pause with no gap, poison events, and
//! disabling after a run of failures.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use outbox_core::target::TargetPolicy;
use outbox_core::webhook::Secret;
use outbox_core::{Event, NewEvent};
use outbox_pg::internal::dead_letter::{self, ListRequest};
use outbox_pg::internal::seal::SealKey;
use outbox_pg::internal::webhook::{self as store, NewWebhook, Patch};
use outbox_pg::internal::{clock, cursor, lease};
use outbox_pg::sqlx::PgPool;
use outbox_workers::{DispatcherConfig, WebhookClient, WebhookDeliveries, WebhookDeliveryConfig};
use serde_json::json;
use time::OffsetDateTime;

use crate::support::{all_events, db, fast_config, wait_for};
use crate::webhook::{Received, Receiver, delayed, secret, status, verify};

fn key() -> Arc<SealKey> {
    Arc::new(SealKey::parse(&SealKey::generate().unwrap()).unwrap())
}

/// Fast deliveries that may reach the loopback receiver.
fn delivery_config() -> WebhookDeliveryConfig {
    WebhookDeliveryConfig {
        targets: TargetPolicy { allow_private: true, allowed: Vec::new() },
        refresh: Duration::from_millis(50),
        max_attempts: 2,
        timeout: Duration::from_secs(5),
        dispatcher: fast_config(),
        ..WebhookDeliveryConfig::default()
    }
}

fn deliveries(pool: &PgPool, key: &Arc<SealKey>) -> WebhookDeliveries {
    WebhookDeliveries::start(pool.clone(), key.clone(), delivery_config()).expect("starting the deliveries")
}

async fn subscribe(pool: &PgPool, key: &SealKey, tenant: &str, url: &str, secret: &str) -> String {
    let new = NewWebhook {
        url: url.into(),
        types: vec!["node.*".into()],
        headers: BTreeMap::from([("X-Receiver-Key".to_owned(), "k1".to_owned())]),
        metadata: json!({}),
        secret: Some(Secret::parse(secret).unwrap()),
        ..NewWebhook::default()
    };
    store::create(pool, key, tenant, &new, 100).await.unwrap().0.id
}

fn node(tenant: &str, n: usize) -> NewEvent {
    NewEvent::new("node.joined", tenant, format!("node/n{n}"), json!({ "n": n }))
}

async fn publish(pool: &PgPool, events: &[NewEvent]) {
    outbox_pg::publish_many(pool, events).await.unwrap();
}

fn ids(requests: &[Received]) -> Vec<String> {
    requests.iter().map(|r| r.id().to_owned()).collect()
}

/// The ids of the history's acme `node.*` events, in the history's order.
async fn acme_nodes(pool: &PgPool) -> Vec<String> {
    let all: Vec<Event> = all_events(pool).await;
    all.into_iter().filter(|e| e.tenant_id == "acme" && e.event_type.starts_with("node.")).map(|e| e.id).collect()
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscription_receives_its_tenants_matching_events_in_order_signed_by_every_valid_secret() {
    let db = db().await;
    let key = key();
    let receiver = Receiver::start(|_, _| status(200)).await;
    let first = secret();
    let id = subscribe(&db.pool, &key, "acme", &receiver.url, &first).await;
    let running = deliveries(&db.pool, &key);

    let mut events = Vec::new();
    for n in 0..10 {
        events.push(node("acme", n));
        events.push(node("globex", n));
        events.push(NewEvent::new("pool.created", "acme", format!("pool/p{n}"), json!({})));
    }
    publish(&db.pool, &events).await;
    wait_for("ten deliveries", || async { receiver.requests().len() >= 10 }).await;
    let received = receiver.requests();
    assert_eq!(ids(&received), acme_nodes(&db.pool).await, "acme's node events once, in the history's order");
    for request in &received {
        verify(&first, &request.headers, &request.body, now()).expect("signed with the secret");
        assert_eq!(request.headers["x-receiver-key"], "k1", "the subscription's own header");
        let event: Event = serde_json::from_slice(&request.body).unwrap();
        assert_eq!((event.tenant_id.as_str(), event.event_type.as_str()), ("acme", "node.joined"));
    }

    // A loop started after the rotation signs with both secrets (restarting a changed
    // subscription's loop is what the other tests' enabling exercises).
    running.shutdown().await;
    let (_, second) = store::rotate(&db.pool, &key, None, &id, None, Duration::from_secs(3600)).await.unwrap().unwrap();
    let running = deliveries(&db.pool, &key);
    publish(&db.pool, &[node("acme", 100), node("acme", 101)]).await;
    wait_for("two more deliveries", || async { receiver.requests().len() >= 12 }).await;
    for request in &receiver.requests()[10..] {
        verify(&second.expose(), &request.headers, &request.body, now()).expect("the new secret verifies");
        verify(&first, &request.headers, &request.body, now()).expect("the old one, in its grace period, too");
        assert_eq!(request.headers["webhook-signature"].to_str().unwrap().split(' ').count(), 2);
    }
    assert_eq!(ids(&receiver.requests()), acme_nodes(&db.pool).await);
    // A batch's attempts are recorded once its last POST has been answered.
    let attempts = || async { store::attempts(&db.pool, None, &id).await.unwrap().unwrap() };
    wait_for("twelve attempts recorded", || async { attempts().await.len() >= 12 }).await;
    let attempts = attempts().await;
    assert_eq!(attempts.len(), 12);
    assert_eq!(attempts[0].status, Some(200));
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_410_disables_at_once_and_enabling_again_delivers_everything_since_once_in_order() {
    let db = db().await;
    let key = key();
    let gone = Arc::new(AtomicBool::new(true));
    let answer = gone.clone();
    let receiver = Receiver::start(move |_, _| status(if answer.load(Ordering::SeqCst) { 410 } else { 204 })).await;
    let id = subscribe(&db.pool, &key, "acme", &receiver.url, &secret()).await;
    let running = deliveries(&db.pool, &key);

    publish(&db.pool, &[node("acme", 0)]).await;
    wait_for("the subscription disabled as gone", || async {
        let webhook = store::get(&db.pool, None, &id).await.unwrap().unwrap();
        webhook.disabled_reason.as_deref() == Some("gone")
    })
    .await;
    let disabled_events = || async {
        all_events(&db.pool).await.into_iter().filter(|e| e.event_type == "webhook.disabled").collect::<Vec<Event>>()
    };
    // Visible once every older transaction of the cluster has finished (the xmin rule).
    wait_for("the webhook.disabled event", || async { !disabled_events().await.is_empty() }).await;
    let disabled = disabled_events().await;
    assert_eq!(disabled.len(), 1, "one webhook.disabled event");
    assert_eq!((disabled[0].tenant_id.as_str(), disabled[0].subject.clone()), ("acme", format!("webhook/{id}")));

    publish(&db.pool, &(1..6).map(|n| node("acme", n)).collect::<Vec<_>>()).await;
    // Once the five are visible to the xmin read, a loop that still delivered would read them.
    wait_for("the five visible", || async { acme_nodes(&db.pool).await.len() == 6 }).await;
    assert_eq!(receiver.requests().len(), 1, "a disabled subscription receives nothing");

    gone.store(false, Ordering::SeqCst);
    let on = Patch { enabled: Some(true), ..Patch::default() };
    store::update(&db.pool, &key, Some("acme"), &id, &on).await.unwrap().unwrap();
    wait_for("the refused event and the five since", || async { receiver.requests().len() >= 7 }).await;
    let received = receiver.requests();
    let expected = acme_nodes(&db.pool).await;
    assert_eq!(ids(&received[1..]), expected, "from its cursor: every event once, in order, none skipped");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_poison_event_is_dead_lettered_while_its_neighbours_go_through() {
    let db = db().await;
    let key = key();
    let receiver = Receiver::start(|request, _| {
        let event: Event = serde_json::from_slice(&request.body).unwrap();
        status(if event.subject == "node/n2" { 422 } else { 200 })
    })
    .await;
    let id = subscribe(&db.pool, &key, "acme", &receiver.url, &secret()).await;
    let running = deliveries(&db.pool, &key);
    publish(&db.pool, &(0..5).map(|n| node("acme", n)).collect::<Vec<_>>()).await;

    let sink = store::dead_letter_sink(&id);
    wait_for("the poison event dead-lettered", || async {
        !dead_letter::list(&db.pool, &ListRequest::pending(sink.clone())).await.unwrap().is_empty()
    })
    .await;
    wait_for("its neighbours delivered", || async {
        receiver.requests().iter().map(|r| r.id().to_owned()).collect::<std::collections::HashSet<_>>().len() == 5
    })
    .await;
    let letters = dead_letter::list(&db.pool, &ListRequest::pending(sink)).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].event.subject, "node/n2");
    let delivered: Vec<String> = acme_nodes(&db.pool).await;
    let accepted: Vec<String> = receiver
        .requests()
        .iter()
        .filter(|r| serde_json::from_slice::<Event>(&r.body).unwrap().subject != "node/n2")
        .map(|r| r.id().to_owned())
        .collect();
    let mut without_poison = delivered.clone();
    without_poison.remove(2);
    assert_eq!(accepted, without_poison, "the others once each, in order");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_of_failures_longer_than_disable_after_disables_the_subscription() {
    let db = db().await;
    let key = key();
    let receiver = Receiver::start(|_, _| status(503)).await;
    let id = subscribe(&db.pool, &key, "acme", &receiver.url, &secret()).await;
    let config = WebhookDeliveryConfig {
        targets: TargetPolicy { allow_private: true, allowed: Vec::new() },
        refresh: Duration::from_millis(50),
        disable_after: Duration::from_secs(1),
        dispatcher: fast_config(),
        ..WebhookDeliveryConfig::default()
    };
    let running = WebhookDeliveries::start(db.pool.clone(), key.clone(), config).unwrap();
    publish(&db.pool, &[node("acme", 0)]).await;

    wait_for("disabled as failing", || async {
        store::get(&db.pool, None, &id).await.unwrap().unwrap().disabled_reason.as_deref() == Some("failing")
    })
    .await;
    let webhook = store::get(&db.pool, None, &id).await.unwrap().unwrap();
    assert!(webhook.failing_since.is_some() && !webhook.enabled);
    assert!(receiver.requests().len() >= 2, "it kept trying until then");
    let attempts = store::attempts(&db.pool, None, &id).await.unwrap().unwrap();
    assert!(attempts.iter().all(|a| a.status == Some(503) && a.error.is_some()));
    running.shutdown().await;
}

/// Every time the outbox writes is the database clock's, `compute_now()`: the attempts of a
/// delivery and of a ping, and `failing_since`, all follow it a day ahead of the wall clock.
#[tokio::test(flavor = "multi_thread")]
async fn webhook_attempt_times_and_failing_since_follow_the_database_clock() {
    const DAY: Duration = Duration::from_secs(86_400);
    let db = db().await;
    let key = key();
    let receiver = Receiver::start(|_, _| status(503)).await;
    let id = subscribe(&db.pool, &key, "acme", &receiver.url, &secret()).await;
    clock::advance(&db.pool, DAY).await.unwrap();
    let running = deliveries(&db.pool, &key);
    publish(&db.pool, &[node("acme", 0)]).await;
    wait_for("a failed delivery recorded", || async {
        store::get(&db.pool, None, &id).await.unwrap().unwrap().failing_since.is_some()
    })
    .await;
    running.shutdown().await;
    let client = WebhookClient::new(db.pool.clone(), key.clone(), &delivery_config()).unwrap();
    let ping = client.ping(&id).await.unwrap().expect("the subscription pinged");
    assert_eq!(ping.status, Some(503));

    let database_now = clock::now(&db.pool).await.unwrap();
    let ahead = database_now - OffsetDateTime::now_utc();
    assert!(ahead > time::Duration::hours(23), "the database clock is {ahead} ahead of the wall clock");
    let by_the_database_clock = |what: &str, at: OffsetDateTime| {
        let before = database_now - at;
        assert!(
            time::Duration::ZERO <= before && before < time::Duration::minutes(1),
            "{what} is {at}, {before} before the database clock's {database_now}"
        );
    };
    let webhook = store::get(&db.pool, None, &id).await.unwrap().unwrap();
    by_the_database_clock("failing_since", webhook.failing_since.unwrap());
    let attempts = store::attempts(&db.pool, None, &id).await.unwrap().unwrap();
    assert!(attempts.len() >= 2, "the delivery's attempts and the ping's: {attempts:?}");
    for attempt in &attempts {
        by_the_database_clock(&format!("the attempt of {:?}", attempt.event_id), attempt.time);
    }
    assert!(attempts.windows(2).all(|pair| pair[0].time >= pair[1].time), "newest first: {attempts:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_target_that_resolves_to_a_refused_address_is_never_connected() {
    let db = db().await;
    let key = key();
    let receiver = Receiver::start(|_, _| status(200)).await;
    // `localhost` resolves to loopback; the policy refuses it at connect time.
    let url = receiver.url.replace("127.0.0.1", "localhost");
    let id = subscribe(&db.pool, &key, "acme", &url, &secret()).await;
    let config = WebhookDeliveryConfig {
        refresh: Duration::from_millis(50),
        dispatcher: fast_config(),
        ..WebhookDeliveryConfig::default()
    };
    let running = WebhookDeliveries::start(db.pool.clone(), key.clone(), config).unwrap();
    publish(&db.pool, &[node("acme", 0)]).await;

    wait_for("a failed attempt recorded", || async {
        !store::attempts(&db.pool, None, &id).await.unwrap().unwrap().is_empty()
    })
    .await;
    let attempt = store::attempts(&db.pool, None, &id).await.unwrap().unwrap().remove(0);
    assert_eq!(attempt.status, None);
    assert!(attempt.error.as_deref().unwrap_or_default().contains("loopback"), "{attempt:?}");
    assert!(receiver.requests().is_empty(), "nothing reached the receiver");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_processes_split_the_shards_and_one_takes_the_others_over_when_it_dies() {
    let db = db().await;
    let key = key();
    let receiver = Receiver::start(|_, _| status(200)).await;
    let mut subscriptions = Vec::new();
    for n in 0..12 {
        let new = NewWebhook {
            url: receiver.url.clone(),
            types: vec!["node.*".into()],
            headers: BTreeMap::from([("X-Subscription".to_owned(), n.to_string())]),
            metadata: json!({}),
            ..NewWebhook::default()
        };
        subscriptions.push(store::create(&db.pool, &key, "acme", &new, 100).await.unwrap().0.id);
    }
    let first = deliveries(&db.pool, &key);
    let second = deliveries(&db.pool, &key);
    let holders = || async {
        let rows: Vec<(String, i64)> = outbox_pg::sqlx::query_as(
            "SELECT holder, count(*) FROM outbox_leases
             WHERE name LIKE 'singleton:outbox-webhooks:shard:%' AND holder <> '' AND expires_at > compute_now()
             GROUP BY holder ORDER BY holder",
        )
        .fetch_all(&db.pool)
        .await
        .unwrap();
        rows
    };
    wait_for("the shards split between the two", || async {
        let rows = holders().await;
        rows.len() == 2 && rows.iter().map(|(_, n)| n).sum::<i64>() == 32 && rows.iter().all(|(_, n)| *n == 16)
    })
    .await;

    publish(&db.pool, &(0..5).map(|n| node("acme", n)).collect::<Vec<_>>()).await;
    wait_for("every subscription got the five", || async { receiver.requests().len() >= 12 * 5 }).await;

    drop(first); // like a crash: its leases stay until they expire
    outbox_pg::internal::clock::advance(&db.pool, Duration::from_secs(30)).await.unwrap();
    wait_for("the survivor holding every shard", || async {
        let rows = holders().await;
        rows.len() == 1 && rows[0].1 == 32
    })
    .await;
    publish(&db.pool, &(5..10).map(|n| node("acme", n)).collect::<Vec<_>>()).await;
    let per_subscription = |n: usize| -> Vec<String> {
        let mut seen: Vec<String> = Vec::new();
        for request in receiver.requests() {
            let id = request.id().to_owned();
            if request.headers["x-subscription"] == n.to_string().as_str() && !seen.contains(&id) {
                seen.push(id);
            }
        }
        seen
    };
    wait_for("every subscription got all ten", || async { (0..12).all(|n| per_subscription(n).len() == 10) }).await;
    // Read once every event is visible to the xmin read (other tests' transactions can hold it).
    wait_for("the ten events visible", || async { acme_nodes(&db.pool).await.len() == 10 }).await;
    let expected = acme_nodes(&db.pool).await;
    for n in 0..12 {
        assert_eq!(per_subscription(n), expected, "subscription {n}: every event, in order, none lost");
    }
    second.shutdown().await;
    assert!(holders().await.is_empty(), "a shutdown gives every shard back");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caught_up_subscription_is_woken_by_the_shared_tail_instead_of_polling() {
    let db = db().await;
    let key = key();
    let receiver = Receiver::start(|_, _| status(200)).await;
    subscribe(&db.pool, &key, "acme", &receiver.url, &secret()).await;
    let tail = outbox_pg::Tail::new(db.pool.clone(), outbox_pg::TailOptions::default());
    let mut config = WebhookDeliveryConfig {
        targets: TargetPolicy { allow_private: true, allowed: Vec::new() },
        refresh: Duration::from_millis(50),
        ..WebhookDeliveryConfig::default()
    };
    // A loop that polled would read again only after an hour.
    config.dispatcher = outbox_workers::DispatcherConfig {
        poll_interval: Duration::from_secs(3600),
        tail: Some(tail.clone()),
        ..fast_config()
    };
    let running = WebhookDeliveries::start(db.pool.clone(), key.clone(), config).unwrap();
    wait_for("the loop waiting on the tail", || async { tail.members() == 1 }).await;
    for round in 0..3 {
        publish(&db.pool, &[node("acme", round), node("globex", round)]).await;
        wait_for("the tail's event delivered", || async { receiver.requests().len() > round }).await;
    }
    assert_eq!(
        ids(&receiver.requests()),
        acme_nodes(&db.pool).await,
        "each woken read delivered acme's event, in order"
    );
    running.shutdown().await;
}

/// Another process takes a shard whose holder stood still past the lease's TTL; the holder's
/// keeper renews only much later, so it still publishes the lease. The save beside the
/// second page's delivery finds the lease lost: that delivery stops at once, and the loop
/// posts nothing more under the lease, its cursor unmoved.
#[tokio::test(flavor = "multi_thread")]
async fn a_loop_whose_fenced_save_finds_the_shard_lease_lost_stops_delivering_before_its_keeper_notices() {
    let db = db().await;
    let key = key();
    // The first request waits long enough for the theft; the rest of the first page (100
    // events) is answered at once, every later request slowly.
    let answered = Arc::new(AtomicUsize::new(0));
    let count = answered.clone();
    let receiver = Receiver::start(move |_, _| {
        let delay = match count.fetch_add(1, Ordering::SeqCst) {
            0 => Duration::from_millis(1500),
            1..100 => Duration::ZERO,
            _ => Duration::from_millis(300),
        };
        delayed(200, delay)
    })
    .await;
    let id = subscribe(&db.pool, &key, "acme", &receiver.url, &secret()).await;
    let created_at = cursor::load(&db.pool, store::CURSOR_STREAM, &id).await.unwrap();
    publish(&db.pool, &(0..150).map(|n| node("acme", n)).collect::<Vec<_>>()).await;
    wait_for("the 150 events visible", || async { acme_nodes(&db.pool).await.len() == 150 }).await;

    // The keepers renew after an hour: they do not notice the theft during the test.
    let ttl = Duration::from_secs(30);
    let config = WebhookDeliveryConfig {
        targets: TargetPolicy { allow_private: true, allowed: Vec::new() },
        refresh: Duration::from_millis(50),
        dispatcher: DispatcherConfig { lease_ttl: ttl, lease_renew: Duration::from_secs(3600), ..fast_config() },
        ..WebhookDeliveryConfig::default()
    };
    let running = WebhookDeliveries::start(db.pool.clone(), key.clone(), config).unwrap();
    wait_for("the first POST", || async { !receiver.requests().is_empty() }).await;

    clock::advance(&db.pool, ttl + Duration::from_secs(1)).await.unwrap();
    let shard = format!("singleton:outbox-webhooks:shard:{}", store::shard_of(&id));
    let thief = lease::acquire(&db.pool, &shard, "thief", ttl).await.unwrap().expect("the expired shard taken");

    wait_for("the first page delivered", || async { receiver.requests().len() >= 100 }).await;
    // The second page stops when the save beside its first POST finds the lease lost: at most
    // that one POST. A loop that went on under the lost lease would post one event every
    // 300 ms (the receiver's delay from the 101st on): ten of them in the window.
    outbox_e2e::wait::never(
        "a second POST of the second page under the lost lease",
        Duration::from_secs(3),
        || async { receiver.requests().len() > 101 },
    )
    .await;
    let cursor = cursor::load(&db.pool, store::CURSOR_STREAM, &id).await.unwrap();
    assert_eq!(cursor, created_at, "the fence kept the cursor where it was");
    running.shutdown().await;
    assert!(lease::renew(&db.pool, &thief, ttl).await.unwrap().is_some(), "the thief still holds the shard");
}

/// Deliveries whose supervisor never compares on its own within a test: whatever a change
/// does to a running loop, the loop's own check did.
fn deliveries_without_refresh(pool: &PgPool, key: &Arc<SealKey>) -> WebhookDeliveries {
    let config = WebhookDeliveryConfig { refresh: Duration::from_secs(3600), ..delivery_config() };
    WebhookDeliveries::start(pool.clone(), key.clone(), config).expect("starting the deliveries")
}

/// A subscription of acme's `node.*` events to `receiver`, its loop running
/// ([`deliveries_without_refresh`]) and past its first delivery.
async fn delivering_to(pool: &PgPool, key: &Arc<SealKey>, receiver: &Receiver) -> (String, WebhookDeliveries) {
    let id = subscribe(pool, key, "acme", &receiver.url, &secret()).await;
    let running = deliveries_without_refresh(pool, key);
    publish(pool, &[node("acme", 0)]).await;
    wait_for("the loop delivering", || async { receiver.requests().len() == 1 }).await;
    (id, running)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotated_secret_signs_every_delivery_after_the_answer() {
    let db = db().await;
    let key = key();
    let receiver = Receiver::start(|_, _| status(200)).await;
    let (id, running) = delivering_to(&db.pool, &key, &receiver).await;

    for round in 1..=50 {
        // No grace period: a delivery signed with the set before the answer has no entry
        // the new secret verifies.
        let rotated = store::rotate(&db.pool, &key, None, &id, None, Duration::ZERO).await.unwrap();
        let (_, new) = rotated.expect("the subscription exists");
        publish(&db.pool, &[node("acme", 2 * round), node("acme", 2 * round + 1)]).await;
        let delivered = 1 + 2 * round;
        wait_for("both events of the round", || async { receiver.requests().len() >= delivered }).await;
        for request in &receiver.requests()[delivered - 2..] {
            verify(&new.expose(), &request.headers, &request.body, now()).unwrap_or_else(|error| {
                panic!("round {round}: {} not signed by the new secret: {error}", request.id())
            });
        }
    }
    assert_eq!(ids(&receiver.requests()), acme_nodes(&db.pool).await, "every event once, in order");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscription_disabled_or_repointed_receives_nothing_after_the_answer() {
    let db = db().await;
    let key = key();
    let (first, second) = (Receiver::start(|_, _| status(200)).await, Receiver::start(|_, _| status(200)).await);
    let (id, running) = delivering_to(&db.pool, &key, &first).await;

    let repoint = Patch { url: Some(second.url.clone()), ..Patch::default() };
    store::update(&db.pool, &key, None, &id, &repoint).await.unwrap().expect("the subscription exists");
    publish(&db.pool, &[node("acme", 1)]).await;
    wait_for("the event at the new URL", || async { second.requests().len() == 1 }).await;
    assert_eq!(first.requests().len(), 1, "nothing more at the old URL");

    let disable = Patch { enabled: Some(false), ..Patch::default() };
    store::update(&db.pool, &key, None, &id, &disable).await.unwrap().expect("the subscription exists");
    publish(&db.pool, &[node("acme", 2)]).await;
    let position_before = cursor::load(&db.pool, store::CURSOR_STREAM, &id).await.unwrap();
    // The supervisor never compares on its own here: the loop ends only when it reads the
    // event and finds the subscription disabled, and then it has sent nothing more.
    wait_for("the loop to end", || async { !running.delivering().contains(&id) }).await;
    assert_eq!((first.requests().len(), second.requests().len()), (1, 1), "nothing while disabled");
    assert_eq!(cursor::load(&db.pool, store::CURSOR_STREAM, &id).await.unwrap(), position_before, "the cursor stays");

    // Enabled again (the supervisor compares now and then; here it is told by a restart),
    // the event published while disabled arrives: nothing was passed.
    running.shutdown().await;
    let enable = Patch { enabled: Some(true), ..Patch::default() };
    store::update(&db.pool, &key, None, &id, &enable).await.unwrap().expect("the subscription exists");
    let running = deliveries_without_refresh(&db.pool, &key);
    wait_for("the event kept back", || async { second.requests().len() == 2 }).await;
    let delivered: Vec<String> = ids(&first.requests()).into_iter().chain(ids(&second.requests())).collect();
    assert_eq!(delivered, acme_nodes(&db.pool).await, "every event once, in order");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn new_types_are_in_force_for_events_published_after_the_answer() {
    let db = db().await;
    let key = key();
    let receiver = Receiver::start(|_, _| status(200)).await;
    let (id, running) = delivering_to(&db.pool, &key, &receiver).await;

    let pools = Patch { types: Some(vec!["pool.*".into()]), ..Patch::default() };
    store::update(&db.pool, &key, None, &id, &pools).await.unwrap().expect("the subscription exists");
    // The running loop reads with the old types: it skips the pool event, and would pass it
    // with its next save of skipped rows if it did not check the subscription first.
    let pool = |n: usize| NewEvent::new("pool.created", "acme", format!("pool/p{n}"), json!({}));
    publish(&db.pool, &[pool(1)]).await;
    wait_for("the pool event", || async { receiver.requests().len() == 2 }).await;
    publish(&db.pool, &[node("acme", 1), pool(2)]).await;
    wait_for("the second pool event", || async { receiver.requests().len() == 3 }).await;
    running.shutdown().await;
    let types: Vec<String> = receiver.requests()[1..]
        .iter()
        .map(|request| serde_json::from_slice::<Event>(&request.body).unwrap().event_type)
        .collect();
    assert_eq!(types, ["pool.created", "pool.created"], "no node event after the answer");
}
