//! `outbox dev` on its embedded default: a PostgreSQL of its own, migrated, served, stopped
//! with the process.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use outbox_e2e::client::{get, watch};
use outbox_e2e::wait::until;
use sqlx::Connection;

use crate::support::{Process, server_migration_count};

/// What `outbox dev` printed.
struct Dev {
    process: Process,
    url: String,
    addr: SocketAddr,
    token: String,
    console: String,
}

/// Starts `outbox dev --listen 127.0.0.1:0 --data-dir dir extra…` without DATABASE_URL.
fn start_dev(dir: &Path, extra: &[&str]) -> Dev {
    let mut args = vec!["dev", "--listen", "127.0.0.1:0", "--data-dir", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let mut process = Process::spawn(&args, &[]);
    let ready = process.line_after("outbox dev: database ready at ", Duration::from_secs(60));
    let url = ready.split_whitespace().next().unwrap().to_owned();
    let serving = process.line_after(READY, Duration::from_secs(60));
    let addr = serving.trim().parse().expect("a printed address");
    let console = process.line_after("  console  ", Duration::from_secs(5));
    let token = process.line_after("  token    ", Duration::from_secs(5));
    Dev { process, url, addr, token, console }
}

/// The first line of the welcome, between the rules, before the address.
const READY: &str = "  outbox dev is ready: every role on http://";

/// Whether `line` is one of the rules around the welcome.
fn is_rule(line: &str) -> bool {
    line.len() > 40 && line.chars().all(|c| c == '─')
}

/// The line of the welcome labelled `label`, without the label.
fn labelled<'a>(lines: &'a [String], label: &str) -> &'a str {
    let prefix = format!("  {label:<8} ");
    let line = lines.iter().find_map(|line| line.strip_prefix(&prefix));
    line.unwrap_or_else(|| panic!("no {label:?} line in {lines:#?}"))
}

fn port_of(url: &str) -> u16 {
    let after_host = url.rsplit_once(':').unwrap().1;
    after_host.split('/').next().unwrap().parse().unwrap()
}

fn answers(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

fn wait_until_closed(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while answers(port) {
        assert!(Instant::now() < deadline, "PostgreSQL on port {port} outlived outbox dev");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn data_dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("outbox-e2e-{name}-{}", std::process::id())).join("pg")
}

async fn applied(url: &str) -> i64 {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("the printed URL connects");
    let applied = sqlx::query_scalar("SELECT count(*) FROM compute_migrations").fetch_one(&mut conn).await.unwrap();
    conn.close().await.unwrap();
    applied
}

#[tokio::test(flavor = "multi_thread")]
async fn dev_runs_a_migrated_database_serves_it_and_stops_it_on_ctrl_c() {
    let dir = data_dir("dev");
    let mut dev = start_dev(&dir, &[]);
    assert_eq!(applied(&dev.url).await, server_migration_count());
    assert_eq!(get(dev.addr, "/readyz", None).await.status, 200);
    assert_eq!(get(dev.addr, "/events", Some(&dev.token)).await.status, 200, "the printed admin token works");
    // The printed console address serves the console; the token rides in the fragment.
    assert_eq!(dev.console, format!("http://{}/#token={}", dev.addr, dev.token));
    let page = get(dev.addr, "/", None).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("<title>Outbox console</title>"), "{}", page.body);
    let first_token = dev.token.clone();

    let status = dev.process.signal_and_wait("INT", Duration::from_secs(30));
    assert!(status.success(), "outbox dev exits 0 on Ctrl-C ({status})");
    assert!(!answers(port_of(&dev.url)), "the embedded PostgreSQL stopped with outbox dev");
    assert!(dir.parent().unwrap().join("dev-secret").exists(), "the dev secret is kept next to the cluster");

    // The data and the secret stay: a second start reuses the cluster, applies nothing, and
    // accepts the first run's token.
    let mut again = start_dev(&dir, &[]);
    assert_eq!(applied(&again.url).await, server_migration_count());
    assert_eq!(get(again.addr, "/events", Some(&first_token)).await.status, 200, "tokens survive a restart");
    again.process.child.kill().unwrap();
    again.process.child.wait().unwrap();
    wait_until_closed(port_of(&again.url));
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_dev_leaves_no_server_behind() {
    let dir = data_dir("killed");
    let mut dev = start_dev(&dir, &[]);
    assert!(answers(port_of(&dev.url)));
    dev.process.child.kill().unwrap(); // SIGKILL: no destructor runs, the watchdog must stop the server
    dev.process.child.wait().unwrap();
    wait_until_closed(port_of(&dev.url));
    // PostgreSQL closes its socket first and removes its pid file last, on a clean shutdown only.
    let deadline = Instant::now() + Duration::from_secs(30);
    while dir.join("postmaster.pid").exists() {
        assert!(Instant::now() < deadline, "the server did not shut down cleanly: postmaster.pid stays");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn dev_demo_shows_events_on_watch_within_seconds() {
    let dir = data_dir("demo");
    let mut dev = start_dev(&dir, &["--demo"]);
    for (path, tenant) in [("/watch", "acme"), ("/watch?tenantId=globex", "globex")] {
        let mut stream = watch(dev.addr, path, Some(&dev.token)).await.unwrap_or_else(|reply| panic!("{reply:?}"));
        let frame = stream.until(Duration::from_secs(10), |frame| frame.id.is_some()).await;
        let event = frame.json();
        assert_eq!(event["tenantId"], tenant, "{event}");
        assert_eq!(frame.event.as_deref(), event["type"].as_str());
        let family = event["type"].as_str().unwrap().split('.').next().unwrap().to_owned();
        assert!(["reservation", "node", "pool"].contains(&family.as_str()), "{event}");
        assert!(event["subject"].as_str().unwrap().starts_with(&format!("{family}/")), "{event}");
    }
    let status = dev.process.signal_and_wait("TERM", Duration::from_secs(30));
    assert!(status.success(), "outbox dev --demo exits 0 on SIGTERM ({status})");
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn dev_demo_prints_its_welcome_last_and_fills_the_sink_the_webhook_and_the_dead_letters() {
    let dir = data_dir("demo-views");
    let data_dir = dir.to_str().unwrap();
    let args = ["dev", "--demo", "--listen", "127.0.0.1:0", "--data-dir", data_dir];
    // The default log level: an empty OUTBOX_LOG is no filter.
    let mut dev = Process::spawn_with_stderr(&args, &[("OUTBOX_LOG", "")]);
    let mut rules = 0;
    let printed = dev.lines_until(
        |line| {
            rules += usize::from(is_rule(line));
            rules == 2
        },
        Duration::from_secs(90),
    );
    let welcome = &printed[printed.iter().position(|line| is_rule(line)).unwrap()..];
    let addr: SocketAddr = welcome[1].strip_prefix(READY).expect("the address first").parse().unwrap();
    let token = labelled(welcome, "token");
    assert_eq!(labelled(welcome, "console"), format!("http://{addr}/#token={token}"));
    assert!(labelled(welcome, "logs").contains("--verbose"), "{welcome:#?}");
    assert!(!printed.iter().any(|line| line.contains("shard taken")), "{printed:#?}");

    let sink_file = dir.parent().unwrap().join("demo-sink.jsonl");
    let demo = labelled(welcome, "demo");
    assert!(welcome.iter().any(|line| line.contains(&sink_file.display().to_string())), "{welcome:#?} {demo}");
    until("the demo sink's file to receive events", Duration::from_secs(60), || async {
        let text = std::fs::read_to_string(&sink_file).unwrap_or_default();
        text.lines().next().is_some_and(|line| serde_json::from_str::<serde_json::Value>(line).is_ok())
    })
    .await;

    let webhooks = get(addr, "/webhooks", Some(token)).await.json();
    let id = webhooks["items"][0]["id"].as_str().expect("the demo's subscription").to_owned();
    assert!(welcome.iter().any(|line| line.contains(&id)), "{welcome:#?}");
    until("a delivered attempt of the demo's subscription", Duration::from_secs(60), || async {
        let attempts = get(addr, &format!("/webhooks/{id}/attempts"), Some(token)).await.json();
        attempts["items"].as_array().unwrap().iter().any(|attempt| attempt["status"] == 204)
    })
    .await;
    until("the refused reservation.placed to be a dead letter", Duration::from_secs(90), || async {
        let letters = get(addr, &format!("/webhooks/{id}/dead-letters"), Some(token)).await.json();
        letters["items"].as_array().unwrap().iter().any(|letter| letter["event"]["type"] == "reservation.placed")
    })
    .await;

    // Deliveries, a refusal and a dead letter later, nothing was printed after the welcome.
    let after = dev.printed_since();
    assert!(after.is_empty(), "printed after the welcome: {after:#?}");
    let status = dev.signal_and_wait("TERM", Duration::from_secs(30));
    assert!(status.success(), "outbox dev --demo exits 0 on SIGTERM ({status})");
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}
