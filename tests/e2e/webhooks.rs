//! Webhook subscriptions through the real `outbox serve`: created over HTTP, delivered to a
//! receiver on loopback that checks every signature with the test's own verifier, in the
//! history's order, nothing of another tenant, across a SIGKILL and a restart.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use outbox_core::{Event, NewEvent};
use outbox_e2e::client::post;
use outbox_e2e::standard_webhooks::verify;
use outbox_e2e::wait::until as wait_for;
use outbox_pg::testkit::TestDb;
use outbox_pg::{ReadRequest, read_page};
use serde_json::json;

use crate::support::{Process, SECRET, issue_token};

/// A receiver that answers 200 after 20 ms (so that a run of deliveries takes a while), or
/// 422 to an event whose data has `"poison": true` while `refusing`, and keeps each
/// request's headers and body.
struct Receiver {
    addr: SocketAddr,
    received: Arc<parking_lot::Mutex<Vec<(http::HeaderMap, Bytes)>>>,
    refusing: Arc<std::sync::atomic::AtomicBool>,
}

impl Receiver {
    async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let refusing = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (keep, refuse) = (received.clone(), refusing.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (keep, refuse) = (keep.clone(), refuse.clone());
                let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let (keep, refuse) = (keep.clone(), refuse.clone());
                    async move {
                        let headers = request.headers().clone();
                        let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        let event: Event = serde_json::from_slice(&body).expect("a JSON event");
                        let poison = event.data.value()["poison"] == json!(true);
                        if poison && refuse.load(std::sync::atomic::Ordering::SeqCst) {
                            let refused = hyper::Response::builder().status(422).body(Full::new(Bytes::new()));
                            return Ok::<_, std::convert::Infallible>(refused.unwrap());
                        }
                        keep.lock().push((headers, body));
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Ok(hyper::Response::new(Full::new(Bytes::new())))
                    }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(io, service));
            }
        });
        Receiver { addr, received, refusing }
    }

    /// The events received, in arrival order, each signature checked with `secret`.
    fn events(&self, secret: &str) -> Vec<Event> {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        self.received
            .lock()
            .iter()
            .map(|(headers, body)| {
                verify(secret, headers, body, now).expect("every delivery is signed with the subscription's secret");
                let event: Event = serde_json::from_slice(body).expect("a JSON event");
                assert_eq!(headers["webhook-id"].to_str().unwrap(), event.id);
                event
            })
            .collect()
    }
}

/// `outbox serve` with every role, a seal key and private targets allowed.
fn serve(db: &TestDb, key: &str, config: &std::path::Path) -> (Process, SocketAddr) {
    let config = config.to_str().unwrap();
    let args = ["serve", "--listen", "127.0.0.1:0", "--config", config];
    let env = [("DATABASE_URL", db.url.as_str()), ("OUTBOX_JWT_SECRET", SECRET), ("OUTBOX_WEBHOOK_SEAL_KEY", key)];
    let mut process = Process::spawn(&args, &env);
    let rest = process.line_after("outbox serve: listening on http://", Duration::from_secs(60));
    (process, rest.split_whitespace().next().unwrap().parse().expect("a printed address"))
}

/// Every acme `node.*` event of the history, in its order.
async fn acme_nodes(db: &TestDb) -> Vec<Event> {
    let mut all = Vec::new();
    let mut request = ReadRequest::all().limit(1000);
    loop {
        let page = read_page(&db.pool, &request).await.unwrap();
        request.after = Some(page.next_after);
        all.extend(page.events);
        if !page.more {
            break;
        }
    }
    all.into_iter().filter(|e| e.tenant_id == "acme" && e.event_type.starts_with("node.")).collect()
}

fn batch(from: usize, to: usize) -> serde_json::Value {
    let events: Vec<NewEvent> = (from..to)
        .flat_map(|n| {
            [
                NewEvent::new("node.joined", "acme", format!("node/n{n}"), json!({ "n": n })),
                NewEvent::new("node.joined", "globex", format!("node/n{n}"), json!({ "n": n })),
                NewEvent::new("pool.created", "acme", format!("pool/p{n}"), json!({ "n": n })),
            ]
        })
        .collect();
    json!({ "events": events })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscription_gets_its_tenants_events_signed_and_in_order_across_a_sigkill() {
    let db = TestDb::new().await;
    let key = outbox_pg::internal::seal::SealKey::generate().unwrap();
    let config = std::env::temp_dir().join(format!("outbox-e2e-webhooks-{}.toml", std::process::id()));
    std::fs::write(&config, "allow_private_targets = true\n").unwrap();
    let receiver = Receiver::start().await;
    let (mut first, addr) = serve(&db, &key, &config);

    let acme = issue_token(&["--tenant", "acme", "--scopes", "webhooks:write events:write"]);
    let globex = issue_token(&["--tenant", "globex", "--scopes", "events:write"]);
    let body = json!({"url": format!("http://{}/hooks", receiver.addr), "types": ["node.*"]});
    let created = post(addr, "/webhooks", Some(&acme), &body).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let secret = created.json()["secret"].as_str().unwrap().to_owned();

    let acme_batch = |from, to| {
        let all = batch(from, to);
        let mine: Vec<_> =
            all["events"].as_array().unwrap().iter().filter(|e| e["tenantId"] == "acme").cloned().collect();
        json!({ "events": mine })
    };
    let theirs = |from, to| {
        let all = batch(from, to);
        let other: Vec<_> =
            all["events"].as_array().unwrap().iter().filter(|e| e["tenantId"] == "globex").cloned().collect();
        json!({ "events": other })
    };
    assert_eq!(post(addr, "/events", Some(&acme), &acme_batch(0, 20)).await.status, 201);
    assert_eq!(post(addr, "/events", Some(&globex), &theirs(0, 20)).await.status, 201);
    wait_for("20 deliveries", Duration::from_secs(60), || async { receiver.received.lock().len() >= 20 }).await;

    // More events, then SIGKILL while they are being delivered.
    assert_eq!(post(addr, "/events", Some(&acme), &acme_batch(20, 60)).await.status, 201);
    wait_for("a few more deliveries", Duration::from_secs(60), || async { receiver.received.lock().len() >= 22 }).await;
    let status = first.signal_and_wait("KILL", Duration::from_secs(10));
    assert!(!status.success(), "SIGKILL ends the process ({status})");
    let before_kill = receiver.received.lock().len();
    assert!(before_kill < 60, "the kill came in the middle of the run ({before_kill} of 60 delivered)");
    // The dead process's lease expires (by the database clock) and the restarted one resumes.
    outbox_pg::internal::clock::advance(&db.pool, Duration::from_secs(120)).await.unwrap();
    let (mut second, _) = serve(&db, &key, &config);

    wait_for("the 60 acme node events visible", Duration::from_secs(60), || async {
        acme_nodes(&db).await.len() == 60
    })
    .await;
    let expected = acme_nodes(&db).await;
    wait_for("every acme node event delivered", Duration::from_secs(60), || async {
        let ids: std::collections::HashSet<String> = receiver.events(&secret).into_iter().map(|e| e.id).collect();
        ids.len() >= expected.len()
    })
    .await;
    let received = receiver.events(&secret);
    assert!(received.iter().all(|e| e.tenant_id == "acme" && e.event_type == "node.joined"), "nothing else arrives");
    let ids = |events: &[Event]| events.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&received[..before_kill]), ids(&expected[..before_kill]), "before the kill: in order, once");
    // After the restart the subscription resumes after its saved cursor: a suffix of the
    // history that starts at or before where the killed process got to, so what repeats is
    // only what it delivered after its last save, and nothing is skipped.
    let after = &received[before_kill..];
    let resumed_at = expected.len() - after.len();
    assert!(resumed_at <= before_kill, "no gap: resumed at {resumed_at}, {before_kill} had arrived");
    assert_eq!(ids(after), ids(&expected[resumed_at..]), "after the restart: the rest, in order");
    let status = second.signal_and_wait("TERM", Duration::from_secs(30));
    assert!(status.success(), "SIGTERM exits 0 ({status})");
    let _ = std::fs::remove_file(&config);
}

#[tokio::test(flavor = "multi_thread")]
async fn ping_dead_letters_and_their_replay_over_http() {
    let db = TestDb::new().await;
    let key = outbox_pg::internal::seal::SealKey::generate().unwrap();
    let config = std::env::temp_dir().join(format!("outbox-e2e-webhooks-ping-{}.toml", std::process::id()));
    std::fs::write(&config, "allow_private_targets = true\n").unwrap();
    let receiver = Receiver::start().await;
    let (mut server, addr) = serve(&db, &key, &config);
    let acme = issue_token(&["--tenant", "acme", "--scopes", "webhooks:write events:write"]);
    let body = json!({"url": format!("http://{}/hooks", receiver.addr), "types": ["node.*"]});
    let created = post(addr, "/webhooks", Some(&acme), &body).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let (id, secret) =
        (created.json()["id"].as_str().unwrap().to_owned(), created.json()["secret"].as_str().unwrap().to_owned());

    let ping = post(addr, &format!("/webhooks/{id}/ping"), Some(&acme), &json!({})).await;
    assert_eq!(
        (ping.status, ping.json()["delivered"].as_bool(), ping.json()["status"].as_u64()),
        (200, Some(true), Some(200)),
        "{}",
        ping.body
    );
    let pinged = receiver.events(&secret);
    assert_eq!(
        (pinged[0].event_type.as_str(), pinged[0].data.value()["webhookId"].as_str()),
        ("webhook.ping", Some(id.as_str()))
    );

    let events: Vec<NewEvent> = (0..3)
        .map(|n| NewEvent::new("node.joined", "acme", format!("node/n{n}"), json!({ "n": n, "poison": n == 1 })))
        .collect();
    assert_eq!(post(addr, "/events", Some(&acme), &json!({ "events": events })).await.status, 201);
    let letters_path = format!("/webhooks/{id}/dead-letters");
    wait_for("the poison event dead-lettered after its attempts", Duration::from_secs(90), || async {
        let page = outbox_e2e::client::get(addr, &letters_path, Some(&acme)).await;
        page.json()["items"].as_array().is_some_and(|items| items.len() == 1)
    })
    .await;
    let page = outbox_e2e::client::get(addr, &letters_path, Some(&acme)).await;
    let letter = page.json()["items"][0].clone();
    assert_eq!(letter["event"]["subject"], "node/n1");
    let delivered: Vec<String> = receiver.events(&secret).iter().map(|e| e.subject.clone()).collect();
    assert_eq!(
        delivered,
        ["webhook/".to_owned() + &id, "node/n0".into(), "node/n2".into()],
        "its neighbours went through"
    );

    receiver.refusing.store(false, std::sync::atomic::Ordering::SeqCst);
    let dl = letter["id"].as_i64().unwrap();
    let replayed = post(addr, &format!("{letters_path}/{dl}/replay"), Some(&acme), &json!({})).await;
    assert_eq!((replayed.status, replayed.json()), (200, json!({ "replayed": dl })), "{}", replayed.body);
    assert_eq!(receiver.events(&secret).last().unwrap().subject, "node/n1", "the replay reached the endpoint");
    let pending = outbox_e2e::client::get(addr, &letters_path, Some(&acme)).await;
    assert_eq!(pending.json()["items"], json!([]), "a replayed letter is no longer pending");
    let since =
        post(addr, &format!("{letters_path}/replay"), Some(&acme), &json!({"since": "2020-01-01T00:00:00Z"})).await;
    assert_eq!((since.status, since.json()), (200, json!({"replayed": [], "refused": []})));
    let globex = issue_token(&["--tenant", "globex", "--scopes", "webhooks:write"]);
    assert_eq!(post(addr, &format!("/webhooks/{id}/ping"), Some(&globex), &json!({})).await.status, 404);
    let status = server.signal_and_wait("TERM", Duration::from_secs(30));
    assert!(status.success(), "SIGTERM exits 0 ({status})");
    let _ = std::fs::remove_file(&config);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_command_line_manages_subscriptions() {
    let db = TestDb::new().await;
    let key = outbox_pg::internal::seal::SealKey::generate().unwrap();
    let config = std::env::temp_dir().join(format!("outbox-e2e-webhooks-cli-{}.toml", std::process::id()));
    std::fs::write(&config, "allow_private_targets = true\n").unwrap();
    let (mut server, addr) = serve(&db, &key, &config);
    let token = issue_token(&["--tenant", "acme", "--scopes", "webhooks:write"]);
    let url = format!("http://{addr}");
    let env = [("OUTBOX_URL", url.as_str()), ("OUTBOX_TOKEN", token.as_str())];
    let cli = |args: &[&str]| {
        let output = crate::support::run(args, &env);
        let (out, err) = crate::support::text(&output);
        assert!(output.status.success(), "outbox {args:?} failed: {out}{err}");
        out.lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("a JSON line"))
            .collect::<Vec<_>>()
    };

    let created = cli(&["webhooks", "create", "--endpoint", "http://127.0.0.1:9/hook", "--types", "node.*,pool.*"]);
    let id = created[0]["id"].as_str().unwrap().to_owned();
    assert!(created[0]["secret"].as_str().unwrap().starts_with("whsec_"));
    assert_eq!(created[0]["types"], json!(["node.*", "pool.*"]));
    assert_eq!(cli(&["webhooks", "list"]).len(), 1);
    assert_eq!(cli(&["webhooks", "show", &id])[0]["id"], id.as_str());
    let paused = cli(&["webhooks", "update", &id, "--enabled", "false"]);
    assert_eq!(paused[0]["disabledReason"], "manual");
    let ping = cli(&["webhooks", "ping", &id]);
    assert_eq!(ping[0]["delivered"], false, "nothing listens on port 9");
    assert_eq!(cli(&["webhooks", "attempts", &id]).len(), 1);
    assert!(cli(&["webhooks", "rotate-secret", &id, "--grace", "60"])[0]["secret"].is_string());
    assert_eq!(cli(&["webhooks", "delete", &id])[0], json!({ "deleted": id }));

    let refused = crate::support::run(&["webhooks", "create", "--endpoint", "ftp://x"], &env);
    let (_, err) = crate::support::text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(err.contains("url: must be an https:// URL"), "{err}");
    let status = server.signal_and_wait("TERM", Duration::from_secs(30));
    assert!(status.success(), "SIGTERM exits 0 ({status})");
    let _ = std::fs::remove_file(&config);
}
