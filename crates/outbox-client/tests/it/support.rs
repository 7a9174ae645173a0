//! A real server on a port of its own, a proxy in front of it, and publishing helpers.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use outbox_client::Client;
use outbox_core::NewEvent;
use outbox_pg::sqlx::PgPool;
use outbox_pg::testkit::TestDb;
use outbox_server::config::Config;
use outbox_server::revocation::migrator;
use outbox_server::server::Server;
use outbox_server::token::{TokenRequest, issue};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The HS256 secret every test server accepts.
pub(crate) const SECRET: &str = "client-it-secret-0123456789abcdef0123";

/// A database migrated with the server's migrations.
pub(crate) async fn database() -> TestDb {
    TestDb::with_migrator(&migrator()).await
}

/// Port 0, the secret, a 10 ms `retry:` and frequent keep-alives, so reconnects are quick.
pub(crate) fn config() -> Config {
    let mut config = Config { listen: "127.0.0.1:0".parse().unwrap(), ..Config::default() };
    config.auth.jwt_secret = Some(SECRET.into());
    config.watch.retry_ms = 10;
    config.watch.heartbeat_ms = 200;
    config.validate().unwrap();
    config
}

/// A token signed with [`SECRET`].
pub(crate) fn token(tenant: &str, scopes: &str, sid: Option<&str>) -> String {
    let request = TokenRequest {
        tenant: tenant.into(),
        scopes: scopes.into(),
        ttl: Duration::from_secs(600),
        sub: Some("usr_client".into()),
        sid: sid.map(Into::into),
    };
    issue(SECRET, &request).unwrap()
}

/// A running server; stopped gracefully by [`TestServer::stop`] or when dropped.
pub(crate) struct TestServer {
    pub addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl TestServer {
    pub(crate) async fn start(pool: &PgPool) -> TestServer {
        let server = Server::start(&config(), pool.clone()).await.expect("starting the server");
        let addr = server.local_addr();
        let (shutdown, signal) = oneshot::channel();
        let task = tokio::spawn(server.run(async {
            let _ = signal.await;
        }));
        TestServer { addr, shutdown: Some(shutdown), task: Some(task) }
    }

    /// Signals shutdown (open streams end) and waits until the server has stopped.
    pub(crate) async fn stop(mut self) {
        let _ = self.shutdown.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// A loopback TCP proxy: forwards each connection to the current upstream, counts the
/// requests it carries, and can cut every open connection at once.
pub(crate) struct Proxy {
    pub addr: SocketAddr,
    upstream: Arc<Mutex<SocketAddr>>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    requests: Arc<Mutex<Vec<String>>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    pub(crate) async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let upstream = Arc::new(Mutex::new(upstream));
        let connections = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let accept = tokio::spawn(accept_loop(listener, upstream.clone(), connections.clone(), requests.clone()));
        Proxy { addr, upstream, connections, requests, accept }
    }

    /// `http://<proxy>`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub(crate) fn set_upstream(&self, addr: SocketAddr) {
        *self.upstream.lock().unwrap() = addr;
    }

    /// Cuts every open connection (both sockets dropped mid-stream); answers how many.
    pub(crate) fn cut(&self) -> usize {
        let all: Vec<JoinHandle<()>> = self.connections.lock().unwrap().drain(..).collect();
        let open: Vec<JoinHandle<()>> = all.into_iter().filter(|task| !task.is_finished()).collect();
        open.iter().for_each(JoinHandle::abort);
        open.len()
    }

    /// How many connections are still open.
    pub(crate) fn open_connections(&self) -> usize {
        self.connections.lock().unwrap().iter().filter(|task| !task.is_finished()).count()
    }

    /// How many requests started with `start` (e.g. `GET /watch`).
    pub(crate) fn requests(&self, start: &str) -> usize {
        self.requests.lock().unwrap().iter().filter(|line| line.starts_with(start)).count()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: Arc<Mutex<SocketAddr>>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    requests: Arc<Mutex<Vec<String>>>,
) {
    while let Ok((client, _)) = listener.accept().await {
        let target = *upstream.lock().unwrap();
        let task = tokio::spawn(forward(client, target, requests.clone()));
        connections.lock().unwrap().push(task);
    }
}

/// Copies both ways until either side closes; a refused upstream closes the client's side.
async fn forward(client: TcpStream, target: SocketAddr, requests: Arc<Mutex<Vec<String>>>) {
    let Ok(server) = TcpStream::connect(target).await else { return };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upstream = async {
        let mut buffer = vec![0; 16 * 1024];
        let mut head = Vec::new();
        while let Ok(n) = client_read.read(&mut buffer).await {
            if n == 0 || server_write.write_all(&buffer[..n]).await.is_err() {
                break;
            }
            record_requests(&mut head, &buffer[..n], &requests);
        }
        let _ = server_write.shutdown().await;
    };
    let downstream = async {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(upstream, downstream);
}

/// Records the request line of every request the client sent (bodies here never hold one).
fn record_requests(head: &mut Vec<u8>, bytes: &[u8], requests: &Mutex<Vec<String>>) {
    head.extend_from_slice(bytes);
    let text = String::from_utf8_lossy(head).into_owned();
    let mut consumed = 0;
    for (at, _) in text.match_indices("HTTP/1.1\r\n") {
        let line_start = text[..at].rfind("\r\n").map_or(0, |i| i + 2);
        requests.lock().unwrap().push(text[line_start..at].trim().to_owned());
        consumed = at + "HTTP/1.1\r\n".len();
    }
    head.drain(..consumed.min(head.len()));
    if head.len() > 4096 {
        let keep = head.len() - 64;
        head.drain(..keep);
    }
}

/// Publishes `event` in a transaction of its own; answers its id.
pub(crate) async fn publish(pool: &PgPool, event: &NewEvent) -> String {
    outbox_pg::publish(pool, event).await.expect("publishing")
}

/// `node.joined` in `tenant` carrying `n`.
pub(crate) fn node_event(tenant: &str, n: usize) -> NewEvent {
    NewEvent::new("node.joined", tenant, format!("node/n{n}"), serde_json::json!({ "n": n }))
}

/// Publishes acme events (and, every third time, a globex one the acme streams must not
/// see) one transaction at a time until stopped; answers the acme ids in order.
pub(crate) struct Publisher {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Vec<String>>,
}

impl Publisher {
    pub(crate) fn start(pool: PgPool, every: Duration) -> Publisher {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut ids = Vec::new();
            let mut tick = tokio::time::interval(every);
            for n in 0.. {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                tick.tick().await;
                if n % 3 == 2 {
                    publish(&pool, &node_event("globex", n)).await;
                    continue;
                }
                ids.push(publish(&pool, &node_event("acme", n)).await);
            }
            ids
        });
        Publisher { stop, task }
    }

    /// Stops publishing; answers every acme id published, in order.
    pub(crate) async fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap()
    }
}

/// Polls `condition` every 10 ms until it holds; panics naming `what` after `within`.
pub(crate) async fn eventually(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    while !condition() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tick.tick().await;
    }
}

/// A client of `url` with `token`.
pub(crate) fn client(url: &str, token: &str) -> Client {
    Client::new(url).unwrap().with_token(token).unwrap()
}

/// Waits until `reader` sees at least `count` events of its tenant: under the xmin rule a
/// committed event becomes visible only once every older transaction of the cluster has
/// ended, and other tests are writing.
pub(crate) async fn until_visible(reader: &Client, count: usize) -> Vec<outbox_core::Event> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    loop {
        let query = outbox_client::ListQuery { limit: Some(1000), ..Default::default() };
        let page = reader.list(&query).await.expect("listing");
        if page.items.len() >= count {
            return page.items;
        }
        assert!(Instant::now() < deadline, "{count} events never became visible (saw {})", page.items.len());
        tick.tick().await;
    }
}
