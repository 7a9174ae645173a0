//! `outbox dev` on its embedded default: a PostgreSQL of its own, migrated, stopped with the process.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sqlx::Connection;

use crate::support::outbox_binary;

/// Starts `outbox dev --data-dir dir` without DATABASE_URL; returns it and the URL it printed.
fn start_dev(dir: &Path) -> (Child, String) {
    let mut child = Command::new(outbox_binary())
        .args(["dev", "--data-dir"])
        .arg(dir)
        .env_remove("DATABASE_URL")
        .env("OUTBOX_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting outbox dev");
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || stdout.lines().map_while(Result::ok).for_each(|line| drop(lines.send(line))));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = received.recv_timeout(left) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("outbox dev did not print its database URL within 60 s");
        };
        if let Some(rest) = line.strip_prefix("outbox dev: database ready at ") {
            let url = rest.split_whitespace().next().unwrap().to_owned();
            return (child, url);
        }
    }
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
    std::env::temp_dir().join(format!("outbox-e2e-{name}-{}", std::process::id()))
}

#[tokio::test]
async fn dev_runs_a_migrated_database_and_stops_it_on_ctrl_c() {
    let dir = data_dir("dev");
    let (mut child, url) = start_dev(&dir);
    let mut conn = sqlx::PgConnection::connect(&url).await.expect("the printed URL connects");
    let applied: i64 =
        sqlx::query_scalar("SELECT count(*) FROM compute_migrations").fetch_one(&mut conn).await.unwrap();
    assert_eq!(applied, 3);
    conn.close().await.unwrap();

    let interrupted = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(interrupted.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "outbox dev exits 0 on Ctrl-C ({status})");
    assert!(!answers(port_of(&url)), "the embedded PostgreSQL stopped with outbox dev");

    // The data stays: a second start reuses the cluster and applies nothing.
    let (mut again, url) = start_dev(&dir);
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let applied: i64 =
        sqlx::query_scalar("SELECT count(*) FROM compute_migrations").fetch_one(&mut conn).await.unwrap();
    assert_eq!(applied, 3);
    conn.close().await.unwrap();
    again.kill().unwrap();
    again.wait().unwrap();
    wait_until_closed(port_of(&url));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_killed_dev_leaves_no_server_behind() {
    let dir = data_dir("killed");
    let (mut child, url) = start_dev(&dir);
    assert!(answers(port_of(&url)));
    child.kill().unwrap(); // SIGKILL: no destructor runs, the watchdog must stop the server
    child.wait().unwrap();
    wait_until_closed(port_of(&url));
    assert!(!dir.join("postmaster.pid").exists(), "the server shut down cleanly");
    std::fs::remove_dir_all(&dir).unwrap();
}
