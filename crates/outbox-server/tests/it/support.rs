//! A server of the real wiring (`Server::start`) on a port of its own, over a fresh database.

use std::net::SocketAddr;
use std::time::Duration;

use outbox_pg::testkit::TestDb;
use outbox_server::config::{ApiKeyConfig, Config};
use outbox_server::revocation::migrator;
use outbox_server::server::Server;
use outbox_server::token::{TokenRequest, issue};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The HS256 secret every test server accepts.
pub(crate) const SECRET: &str = "it-secret-0123456789abcdef0123456789";

/// The API key configured on every test server (tenant acme, events:read).
pub(crate) const API_KEY: &str = "obx_it-api-key";

/// A database migrated with the server's migrations.
pub(crate) async fn database() -> TestDb {
    TestDb::with_migrator(&migrator()).await
}

/// The configuration of a test server: port 0, the secret, one API key.
pub(crate) fn config() -> Config {
    let mut config = Config { listen: "127.0.0.1:0".parse().unwrap(), ..Config::default() };
    config.auth.jwt_secret = Some(SECRET.into());
    config.auth.api_keys.push(ApiKeyConfig {
        id: "it".into(),
        sha256: hex_sha256(API_KEY),
        tenant: "acme".into(),
        scopes: vec!["events:read".into()],
    });
    config.validate().unwrap();
    config
}

fn hex_sha256(text: &str) -> String {
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(text.as_bytes()))
}

/// A running server; stopped (gracefully) when dropped or by [`TestServer::stop`].
pub(crate) struct TestServer {
    pub addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl TestServer {
    /// Starts the real wiring over `db` with `config`.
    pub(crate) async fn start(db: &TestDb, config: Config) -> TestServer {
        let server = Server::start(&config, db.pool.clone()).await.expect("starting the server");
        let addr = server.local_addr();
        let (shutdown, signal) = oneshot::channel();
        let task = tokio::spawn(server.run(async {
            let _ = signal.await;
        }));
        TestServer { addr, shutdown: Some(shutdown), task: Some(task) }
    }

    /// Signals shutdown and waits until the server has stopped.
    pub(crate) async fn stop(mut self) -> Duration {
        let started = std::time::Instant::now();
        let _ = self.shutdown.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap();
        started.elapsed()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// A token signed with [`SECRET`].
pub(crate) fn token(tenant: &str, scopes: &str, sid: Option<&str>) -> String {
    let request = TokenRequest {
        tenant: tenant.into(),
        scopes: scopes.into(),
        ttl: Duration::from_secs(600),
        sub: Some("usr_it".into()),
        sid: sid.map(Into::into),
    };
    issue(SECRET, &request).unwrap()
}

/// A new seal key for a test server's webhook subscriptions.
pub(crate) fn seal_key() -> outbox_pg::internal::seal::SealKey {
    let text = outbox_pg::internal::seal::SealKey::generate().expect("a seal key");
    outbox_pg::internal::seal::SealKey::parse(&text).expect("a generated key parses")
}
