//! `outbox serve` running `[[sinks]]`: killed with SIGKILL after delivering a batch and before
//! recording it, then restarted, against the real NATS JetStream and Redis; sink state and dead
//! letters over HTTP and the command line, with a real webhook receiver on loopback.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use outbox_core::{Event, NewEvent, Position};
use outbox_e2e::client::{get, post, request};
use outbox_e2e::services::{nats_url, redis_url};
use outbox_e2e::wait::until as wait_for;
use outbox_pg::testkit::TestDb;
use outbox_pg::{ReadRequest, read_page};
use serde_json::{Value, json};

use crate::support::{Process, SECRET, issue_token, run, text};

/// Publishes `events` in one transaction and returns them as the outbox reads them.
pub(crate) async fn publish(db: &TestDb, events: &[NewEvent]) -> Vec<Event> {
    let mut tx = db.pool.begin().await.unwrap();
    outbox_pg::publish_many(&mut *tx, events).await.unwrap();
    tx.commit().await.unwrap();
    // Visible once every older transaction of the cluster has finished (the xmin rule).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut read_back = Vec::new();
    let mut request = ReadRequest::all().limit(1000);
    while read_back.len() < events.len() {
        let page = read_page(&db.pool, &request).await.unwrap();
        request.after = Some(page.next_after);
        read_back.extend(page.events);
        if !page.more && read_back.len() < events.len() {
            assert!(Instant::now() < deadline, "only {} of {} events became visible", read_back.len(), events.len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    read_back
}

fn mixed(n: usize) -> Vec<NewEvent> {
    (0..n)
        .map(|i| {
            let kind = ["reservation.active", "node.joined"][i % 2];
            NewEvent::new(kind, ["acme", "globex"][i % 3 % 2], format!("node/n{i}"), json!({ "n": i }))
        })
        .collect()
}

pub(crate) fn unique(prefix: &str) -> String {
    format!("{prefix}{}", ulid_like())
}

fn ulid_like() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("{}x{:x}", std::process::id(), nanos)
}

/// A configuration file with `sinks` (TOML tables), removed on drop.
pub(crate) struct ConfigFile(PathBuf);

impl ConfigFile {
    pub(crate) fn new(sinks: &str) -> ConfigFile {
        let path = std::env::temp_dir().join(format!("outbox-e2e-sinks-{}.toml", ulid_like()));
        std::fs::write(&path, sinks).unwrap();
        ConfigFile(path)
    }

    pub(crate) fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `outbox serve --roles R --config F` on `db`, and the address it listens on.
pub(crate) fn serve(db: &TestDb, roles: &str, config: &ConfigFile) -> (Process, SocketAddr) {
    let args = ["serve", "--listen", "127.0.0.1:0", "--roles", roles, "--config", config.path()];
    let mut process = Process::spawn(&args, &[("DATABASE_URL", &db.url), ("OUTBOX_JWT_SECRET", SECRET)]);
    let rest = process.line_after("outbox serve: listening on http://", Duration::from_secs(60));
    (process, rest.split_whitespace().next().unwrap().parse().expect("a printed address"))
}

pub(crate) async fn cursor_of(db: &TestDb, sink: &str) -> Option<Position> {
    outbox_pg::internal::cursor::load(&db.pool, "outbox", &format!("sink:{sink}")).await.unwrap()
}

/// Runs sink `id` of `config` in a server process until it has delivered at least `batch`
/// events, with the cursor table locked against writes so that the batch cannot be recorded;
/// kills the process with SIGKILL there, releases the lock and expires the dead process's lease
/// (by the database clock). The batch was delivered, never recorded: the restarted process
/// delivers it again. (A table lock takes no transaction id, so it holds no reader back.)
pub(crate) async fn kill_between_delivery_and_record<F: Future<Output = usize>>(
    db: &TestDb,
    config: &ConfigFile,
    id: &str,
    batch: usize,
    delivered: impl Fn() -> F,
) {
    let name = format!("sink:{id}");
    sqlx::query("INSERT INTO outbox_cursors (stream, name) VALUES ('outbox', $1)")
        .bind(&name)
        .execute(&db.pool)
        .await
        .unwrap();
    let mut lock = db.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE outbox_cursors IN EXCLUSIVE MODE").execute(&mut *lock).await.unwrap();
    let (mut doomed, _) = serve(db, "sinks", config);
    wait_for("the first batch to be delivered", Duration::from_secs(60), || async { delivered().await >= batch }).await;
    assert_eq!(cursor_of(db, id).await, Some(Position::START), "the delivered batch is not recorded yet");
    let status = doomed.signal_and_wait("KILL", Duration::from_secs(10));
    assert!(!status.success(), "SIGKILL ends the process ({status})");
    lock.rollback().await.unwrap();
    outbox_pg::internal::clock::advance(&db.pool, Duration::from_secs(120)).await.unwrap();
}

/// Restarts the sinks and waits until sink `id` recorded `last`; then stops the process with
/// SIGTERM, which exits 0 and releases the lease.
pub(crate) async fn restart_until_recorded(db: &TestDb, config: &ConfigFile, id: &str, last: Position) {
    let (mut again, _) = serve(db, "sinks", config);
    wait_for("the restarted process to record the last event", Duration::from_secs(60), || async {
        cursor_of(db, id).await == Some(last)
    })
    .await;
    let status = again.signal_and_wait("TERM", Duration::from_secs(30));
    assert!(status.success(), "SIGTERM exits 0 ({status})");
    let lease =
        outbox_pg::internal::lease::get(&db.pool, &format!("singleton:outbox-dispatch:{id}")).await.unwrap().unwrap();
    assert!(!lease.held, "the lease is released on SIGTERM: {lease:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn nats_jetstream_gets_every_event_once_in_order_across_a_sigkill_and_restart() {
    let url = nats_url();
    let db = TestDb::new().await;
    let events = publish(&db, &mixed(1500)).await;
    let (prefix, stream) = (unique("e2e"), unique("E2E_OUTBOX").to_uppercase());
    let config = ConfigFile::new(&format!(
        "[[sinks]]\nid = \"bus\"\nkind = \"nats\"\nurl = \"{url}\"\nsubject = \"{prefix}.{{tenantId}}.{{type}}\"\n\
         stream = \"{stream}\"\nbatch = 500\n"
    ));
    let context = jetstream::new(async_nats::connect(&url).await.expect("connecting to NATS"));
    let count = || async {
        match context.get_stream(&stream).await {
            Ok(mut found) => found.info().await.map_or(0, |info| info.state.messages as usize),
            Err(_) => 0,
        }
    };
    kill_between_delivery_and_record(&db, &config, "bus", 500, count).await;
    restart_until_recorded(&db, &config, "bus", events.last().unwrap().sequence).await;

    let mut found = context.get_stream(&stream).await.unwrap();
    let info = found.info().await.unwrap();
    assert_eq!(info.state.messages as usize, events.len(), "the redelivered batch was dropped as duplicates");
    let mut received = Vec::with_capacity(events.len());
    for sequence in 1..=info.state.last_sequence {
        let message = found.get_raw_message(sequence).await.unwrap();
        let id = message.headers.get("Nats-Msg-Id").map(|v| v.to_string()).unwrap_or_default();
        let event: Event = serde_json::from_slice(&message.payload).unwrap();
        assert_eq!(id, event.id, "Nats-Msg-Id is the event id");
        assert_eq!(message.subject.to_string(), format!("{prefix}.{}.{}", event.tenant_id, event.event_type));
        received.push(event);
    }
    assert_eq!(received, events, "every event once, in order");
    let _ = context.delete_stream(&stream).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_holds_every_event_once_with_ids_equal_to_positions_across_a_sigkill_and_restart() {
    let url = redis_url();
    let db = TestDb::new().await;
    let events = publish(&db, &mixed(1500)).await;
    let prefix = unique("e2e");
    let config = ConfigFile::new(&format!(
        "[[sinks]]\nid = \"feed\"\nkind = \"redis\"\nurl = \"{url}\"\nkey = \"{prefix}:{{tenantId}}\"\nbatch = 500\n"
    ));
    let client = redis::Client::open(url.as_str()).unwrap();
    let connection = client.get_multiplexed_async_connection().await.expect("connecting to Redis");
    let keys = [format!("{prefix}:acme"), format!("{prefix}:globex")];
    let length = || {
        let (mut connection, keys) = (connection.clone(), keys.clone());
        async move {
            let mut total = 0;
            for key in &keys {
                let n: usize = redis::cmd("XLEN").arg(key).query_async(&mut connection).await.unwrap();
                total += n;
            }
            total
        }
    };
    kill_between_delivery_and_record(&db, &config, "feed", 500, &length).await;
    restart_until_recorded(&db, &config, "feed", events.last().unwrap().sequence).await;

    assert_eq!(length().await, events.len(), "the redelivered batch was recognised, not duplicated");
    let mut connection = connection.clone();
    for key in &keys {
        let tenant = key.rsplit(':').next().unwrap();
        let entries: Vec<(String, Vec<(String, String)>)> =
            redis::cmd("XRANGE").arg(key).arg("-").arg("+").query_async(&mut connection).await.unwrap();
        let expected: Vec<&Event> = events.iter().filter(|e| e.tenant_id == tenant).collect();
        assert_eq!(entries.len(), expected.len(), "{key}");
        for ((entry_id, fields), event) in entries.iter().zip(expected) {
            assert_eq!(*entry_id, format!("{}-{}", event.sequence.txid, event.sequence.seq), "ids are positions");
            let fields: std::collections::HashMap<&str, &str> =
                fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            assert_eq!(fields["id"], event.id);
            assert_eq!(serde_json::from_str::<Event>(fields["event"]).unwrap(), *event);
        }
    }
    let _: Result<(), _> = redis::cmd("DEL").arg(&keys).query_async(&mut connection).await;
}

/// A webhook receiver on loopback: answers 400 to events whose data has `"poison": true` while
/// `refusing`, 200 to everything else, and keeps what it accepted.
pub(crate) struct Receiver {
    pub(crate) addr: SocketAddr,
    pub(crate) accepted: Arc<parking_lot::Mutex<Vec<Event>>>,
    pub(crate) refusing: Arc<AtomicBool>,
}

impl Receiver {
    pub(crate) async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let refusing = Arc::new(AtomicBool::new(true));
        let (keep, refuse) = (accepted.clone(), refusing.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (keep, refuse) = (keep.clone(), refuse.clone());
                let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let (keep, refuse) = (keep.clone(), refuse.clone());
                    async move {
                        let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        let event: Event = serde_json::from_slice(&body).expect("a JSON event");
                        let poison = event.data.value()["poison"] == json!(true);
                        let status = if poison && refuse.load(Ordering::SeqCst) {
                            400
                        } else {
                            keep.lock().push(event);
                            200
                        };
                        let response = hyper::Response::builder().status(status).body(Full::new(Bytes::new()));
                        Ok::<_, std::convert::Infallible>(response.unwrap())
                    }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(io, service));
            }
        });
        Receiver { addr, accepted, refusing }
    }
}

/// Sink `hook`: a webhook to `receiver`, two attempts an event.
fn hook_config(receiver: &Receiver) -> ConfigFile {
    ConfigFile::new(&format!(
        "[[sinks]]\nid = \"hook\"\nkind = \"webhook\"\nurl = \"http://{}/hook\"\n\
         secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\nbatch = 10\nmax_attempts = 2\n",
        receiver.addr
    ))
}

/// Waits until sink `hook` has `letters` dead letters and its cursor stands at `last`.
async fn dead_lettered(addr: SocketAddr, admin: &str, letters: u64, last: Position) {
    wait_for("the poison events to be dead-lettered", Duration::from_secs(30), || async {
        let status = get(addr, "/sinks/hook", Some(admin)).await.json();
        status["deadLetters"] == letters && status["position"] == json!(last.to_string())
    })
    .await;
}

fn cli(db: &TestDb, args: &[&str]) -> (bool, String, String) {
    let output = run(args, &[("DATABASE_URL", &db.url)]);
    let (out, err) = text(&output);
    (output.status.success(), out, err)
}

#[tokio::test(flavor = "multi_thread")]
async fn sink_state_and_dead_letters_over_http_and_the_command_line() {
    let db = TestDb::new().await;
    let receiver = Receiver::start().await;
    let mut batch = mixed(5);
    batch[2].data = json!({ "poison": true });
    let events = publish(&db, &batch).await;
    let poison = &events[2];
    let config = hook_config(&receiver);
    let (mut server, addr) = serve(&db, "all", &config);
    let admin = issue_token(&["--tenant", "acme", "--scopes", "admin"]);
    let last = events.last().unwrap().sequence;
    dead_lettered(addr, &admin, 1, last).await;
    let others: Vec<Event> = events.iter().filter(|e| e.id != poison.id).cloned().collect();
    assert_eq!(*receiver.accepted.lock(), others, "the other four, in order");

    let all = get(addr, "/sinks", Some(&admin)).await;
    assert_eq!(all.status, 200, "{}", all.body);
    let status = &all.json()["items"][0];
    assert_eq!((status["id"].as_str(), status["lag"].as_u64()), (Some("hook"), Some(0)));
    assert!(status["state"] == "idle" || status["state"] == "delivering", "{status}");
    assert!(status["leaseHolder"].as_str().is_some_and(|h| !h.is_empty()), "{status}");

    let reader = issue_token(&["--tenant", "acme", "--scopes", "events:read"]);
    for (token, path, code) in [
        (None, "/sinks", 401),
        (Some(reader.as_str()), "/sinks", 403),
        (Some(admin.as_str()), "/sinks/nope", 404),
        (Some(admin.as_str()), "/sinks/nope/dead-letters", 404),
        (Some(admin.as_str()), "/sinks/hook/dead-letters?limit=0", 400),
    ] {
        let reply = get(addr, path, token).await;
        assert_eq!(reply.status, code, "{path}: {}", reply.body);
    }
    let wrong = post(addr, "/sinks/hook", Some(&admin), &json!({})).await;
    assert_eq!((wrong.status, wrong.headers["allow"].to_str().unwrap()), (405, "GET"));

    let letters = get(addr, "/sinks/hook/dead-letters", Some(&admin)).await.json();
    let letter = &letters["items"][0];
    assert_eq!(letters["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(letter["event"]["id"], json!(poison.id));
    assert_eq!(letter["position"], json!(poison.sequence.to_string()));
    assert_eq!(letter["attempts"], 2);
    assert!(letter["error"].as_str().unwrap().contains("400"), "{letter}");
    let letter_id = letter["id"].as_i64().unwrap();

    // A replay the sink still refuses leaves the letter as it was.
    let replay_path = format!("/sinks/hook/dead-letters/{letter_id}/replay");
    let refused = post(addr, &replay_path, Some(&admin), &json!({})).await;
    assert_eq!((refused.status, refused.error_code().as_str()), (503, "UNAVAILABLE"), "{}", refused.body);
    let (ok, out, err) =
        cli(&db, &["dead-letters", "list", "--sink", "hook", "--config", config.path(), "--format", "json"]);
    assert!(ok, "{out}{err}");
    let listed: Vec<Value> = out.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(listed.len(), 1, "{out}");
    assert_eq!(
        (listed[0]["id"].as_i64(), listed[0]["event"]["id"].as_str()),
        (Some(letter_id), Some(poison.id.as_str()))
    );

    // Replayed from the command line once the receiver takes it.
    receiver.refusing.store(false, Ordering::SeqCst);
    let letter_arg = letter_id.to_string();
    let (ok, out, err) =
        cli(&db, &["dead-letters", "replay", "--sink", "hook", "--config", config.path(), &letter_arg]);
    assert!(ok && out.contains(&format!("replayed {letter_id}")), "{out}{err}");
    assert_eq!(receiver.accepted.lock().last().map(|e| e.id.clone()), Some(poison.id.clone()));
    let (ok, out, err) = cli(&db, &["dead-letters", "list", "--sink", "hook", "--config", config.path()]);
    assert!(ok && !out.contains(&poison.id), "a replayed letter is no longer pending: {out}{err}");
    let (ok, out, err) = cli(
        &db,
        &["dead-letters", "list", "--sink", "hook", "--replayed", "--config", config.path(), "--format", "json"],
    );
    assert!(ok, "{err}");
    let shown: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert!(shown["replayedAt"].as_str().is_some_and(|t| t.ends_with('Z')), "{shown}");

    let (ok, out, err) = cli(&db, &["sinks", "list", "--config", config.path()]);
    assert!(ok, "{out}{err}");
    let row = out.lines().find(|line| line.starts_with("hook ")).unwrap_or_else(|| panic!("no row for hook: {out}"));
    assert!(row.contains(&last.to_string()) && row.contains("400"), "position and last error: {row}");
    assert!(out.lines().next().unwrap().starts_with("ID"), "a header: {out}");

    let discard_path = format!("/sinks/hook/dead-letters/{letter_id}");
    let discarded = request("DELETE", addr, &discard_path, Some(&admin), "").await;
    assert_eq!((discarded.status, discarded.json()), (200, json!({ "discarded": letter_id })));
    assert_eq!(request("DELETE", addr, &discard_path, Some(&admin), "").await.status, 404);
    let (ok, _, err) = cli(&db, &["dead-letters", "discard", "--sink", "hook", "--config", config.path(), &letter_arg]);
    assert!(!ok && err.contains(&format!("no dead letter {letter_id}")), "{err}");
    let (ok, _, err) = cli(&db, &["dead-letters", "list", "--sink", "nope", "--config", config.path()]);
    assert!(!ok && err.contains("nope"), "{err}");

    let status = server.signal_and_wait("TERM", Duration::from_secs(30));
    assert!(status.success(), "{status}");
    let (ok, out, err) = cli(&db, &["sinks", "list", "--config", config.path(), "--format", "json"]);
    assert!(ok, "{err}");
    let shown: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!((shown["state"].as_str(), shown["deadLetters"].as_u64()), (Some("notRunning"), Some(0)), "{shown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bulk_replay_replays_a_sinks_pending_letters_since_a_time_or_all() {
    let db = TestDb::new().await;
    let receiver = Receiver::start().await;
    // A poison event is judged by a later one going through: neither is the last.
    let mut batch = mixed(5);
    batch[1].data = json!({ "poison": true });
    batch[3].data = json!({ "poison": true });
    let events = publish(&db, &batch).await;
    let config = hook_config(&receiver);
    let (mut server, addr) = serve(&db, "all", &config);
    let admin = issue_token(&["--tenant", "acme", "--scopes", "admin"]);
    let last = events.last().unwrap().sequence;
    dead_lettered(addr, &admin, 2, last).await;
    let letters = get(addr, "/sinks/hook/dead-letters", Some(&admin)).await.json();
    let ids: Vec<i64> = letters["items"].as_array().unwrap().iter().map(|l| l["id"].as_i64().unwrap()).collect();
    assert_eq!(ids.len(), 2, "{letters}");

    let path = "/sinks/hook/dead-letters/replay";
    let refused = post(addr, path, Some(&admin), &json!({})).await;
    assert_eq!(refused.status, 200, "{}", refused.body);
    let refused = refused.json();
    assert_eq!(refused["replayed"], json!([]));
    let refused_ids: Vec<i64> =
        refused["refused"].as_array().unwrap().iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(refused_ids, ids, "each refusal named: {refused}");
    assert!(refused["refused"][0]["error"].as_str().unwrap().contains("400"), "{refused}");

    let future = post(addr, path, Some(&admin), &json!({ "since": "2999-01-01T00:00:00Z" })).await;
    assert_eq!(future.json(), json!({ "replayed": [], "refused": [] }), "none failed since then");

    receiver.refusing.store(false, Ordering::SeqCst);
    let since = post(addr, path, Some(&admin), &json!({ "since": "2000-01-01T00:00:00Z" })).await;
    assert_eq!(since.json(), json!({ "replayed": ids, "refused": [] }));
    let accepted: Vec<String> = receiver.accepted.lock().iter().map(|e| e.id.clone()).collect();
    assert!(accepted.contains(&events[1].id) && accepted.contains(&events[3].id), "{accepted:?}");
    let again = post(addr, path, Some(&admin), &json!({})).await;
    assert_eq!(again.json(), json!({ "replayed": [], "refused": [] }), "nothing is pending any more");

    let reader = issue_token(&["--tenant", "acme", "--scopes", "events:read"]);
    assert_eq!(post(addr, path, Some(&reader), &json!({})).await.status, 403);
    let wrong = get(addr, path, Some(&admin)).await;
    assert_eq!((wrong.status, wrong.headers["allow"].to_str().unwrap()), (405, "POST"));
    let status = server.signal_and_wait("TERM", Duration::from_secs(30));
    assert!(status.success(), "{status}");
}
