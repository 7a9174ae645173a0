//! The pool options: a connection that broke is replaced, at the cost of at most one failed
//! statement when it was used a moment ago (and so not pinged).

use std::time::Duration;

use outbox_pg::pool::{options, options_pinging_after};
use outbox_pg::testkit::TestDb;
use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;

async fn backend_pid(pool: &PgPool) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(pool).await
}

/// Ends the server process behind `pid`, waiting until it is gone.
async fn terminate(db: &TestDb, pid: i32) {
    let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1, 10000)")
        .bind(pid)
        .fetch_one(&db.pool)
        .await
        .expect("pg_terminate_backend");
    assert!(ended, "backend {pid} did not end");
}

#[tokio::test]
async fn a_connection_pinged_on_checkout_is_replaced_when_it_broke_while_idle() {
    let db = TestDb::new().await;
    let pool = options_pinging_after(Duration::ZERO).max_connections(1).connect(&db.url).await.expect("pool");
    let first = backend_pid(&pool).await.expect("first statement");
    terminate(&db, first).await;
    let second = backend_pid(&pool).await.expect("the ping found the broken connection and the pool opened another");
    assert_ne!(second, first);
}

#[tokio::test]
async fn a_connection_that_broke_right_after_use_costs_at_most_one_failed_statement() {
    let db = TestDb::new().await;
    let pool = options().max_connections(1).connect(&db.url).await.expect("pool");
    let first = backend_pid(&pool).await.expect("first statement");
    terminate(&db, first).await;
    // Used a moment ago, so not pinged: the next statement may meet the broken connection
    // and fail; the pool drops it then, and the statement after runs on a fresh one.
    let (second, failures) = match backend_pid(&pool).await {
        Ok(pid) => (pid, 0),
        Err(_) => (backend_pid(&pool).await.expect("a fresh connection after one failure"), 1),
    };
    assert_ne!(second, first, "the broken connection was used again ({failures} failures before)");
}

/// Every connection the project's pool opens over TCP sets `TCP_NODELAY`, so that a message
/// written in several pieces (a `publish_many` of 100 events) never waits for the server's
/// delayed ACK. sqlx 0.9.0 does not set it; the workspace's patched sqlx-core does
/// (`patches/sqlx-core`), and this test says when a newer sqlx makes the patch unnecessary
/// or an update drops it.
#[tokio::test]
async fn every_connection_of_the_pool_over_tcp_has_nodelay_set() {
    let db = TestDb::new().await;
    let tcp: PgConnectOptions = db.url.parse().expect("test database URL");
    assert!(
        tcp.get_host().parse::<std::net::IpAddr>().is_ok(),
        "the test database is not reached over TCP: {}",
        db.url
    );
    let pool = options().max_connections(3).connect_with(tcp).await.expect("pool");
    let mut held = Vec::new();
    let mut ports = Vec::new();
    for _ in 0..3 {
        let mut connection = pool.acquire().await.expect("a connection");
        let port: i32 = sqlx::query_scalar("SELECT inet_client_port()").fetch_one(&mut *connection).await.unwrap();
        ports.push(u16::try_from(port).expect("a TCP port"));
        held.push(connection);
    }
    let sockets = own_tcp_sockets();
    for port in ports {
        let nodelay = sockets.iter().find(|(local, _)| local.port() == port).map(|(_, nodelay)| *nodelay);
        assert_eq!(nodelay, Some(true), "the pool's connection from local port {port}: TCP_NODELAY");
    }
}

/// The check itself: a socket opened without the option reads as such.
#[tokio::test]
async fn a_tcp_socket_opened_without_nodelay_is_seen_without_it() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let plain = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    let port = plain.local_addr().unwrap().port();
    let nodelay = |sockets: Vec<(std::net::SocketAddr, bool)>| {
        sockets.into_iter().find(|(local, _)| local.port() == port).map(|(_, nodelay)| nodelay)
    };
    assert_eq!(nodelay(own_tcp_sockets()), Some(false));
    plain.set_nodelay(true).unwrap();
    assert_eq!(nodelay(own_tcp_sockets()), Some(true));
}

/// This process's TCP sockets: each one's local address and whether `TCP_NODELAY` is set,
/// read from a duplicate of its descriptor (`pidfd_getfd` on the process itself).
fn own_tcp_sockets() -> Vec<(std::net::SocketAddr, bool)> {
    use rustix::process::{PidfdFlags, PidfdGetfdFlags, getpid, pidfd_getfd, pidfd_open};
    let pidfd = pidfd_open(getpid(), PidfdFlags::empty()).expect("pidfd_open on this process");
    let mut sockets = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd").flatten() {
        let is_socket =
            std::fs::read_link(entry.path()).is_ok_and(|target| target.to_string_lossy().starts_with("socket:"));
        let Some(fd) = entry.file_name().to_str().and_then(|name| name.parse().ok()) else { continue };
        // A descriptor closed since the listing is simply gone.
        let Ok(copy) = (if is_socket { pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty()) } else { continue }) else {
            continue;
        };
        let Ok(local) = rustix::net::getsockname(&copy).map(std::net::SocketAddr::try_from) else { continue };
        let (Ok(local), Ok(nodelay)) = (local, rustix::net::sockopt::tcp_nodelay(&copy)) else { continue };
        sockets.push((local, nodelay));
    }
    sockets
}
