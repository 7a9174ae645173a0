//! A `reqwest` client built by the application before any `outbox_client::Client` exists,
//! then handed to one: in a test binary of its own, so that nothing else in the process
//! has installed a TLS provider first.

use std::time::Duration;

use outbox_client::{Client, ListQuery};
use outbox_core::NewEvent;
use outbox_pg::testkit::TestDb;
use outbox_server::config::Config;
use outbox_server::revocation::migrator;
use outbox_server::server::Server;
use outbox_server::token::{TokenRequest, issue};

const SECRET: &str = "own-http-client-secret-0123456789abcdef";

#[tokio::test(flavor = "multi_thread")]
async fn a_reqwest_client_built_first_serves_an_outbox_client() {
    // First thing in the process: the application's own HTTP client, for an https:// and an
    // http:// server alike. `reqwest::Client::builder().build()` would panic here.
    let http = outbox_client::http_client_builder().user_agent("billing/1.4").build().expect("an HTTP client");
    let plain_after = outbox_client::reqwest::Client::builder().build();
    assert!(plain_after.is_ok(), "once the builder ran, the process has a provider for any reqwest client");

    let db = TestDb::with_migrator(&migrator()).await;
    let mut config = Config { listen: "127.0.0.1:0".parse().unwrap(), ..Config::default() };
    config.auth.jwt_secret = Some(SECRET.into());
    config.validate().unwrap();
    let server = Server::start(&config, db.pool.clone()).await.expect("starting the server");
    let addr = server.local_addr();
    tokio::spawn(server.run(std::future::pending::<()>()));

    let request = TokenRequest {
        tenant: "acme".into(),
        scopes: "events:read events:write".into(),
        ttl: Duration::from_secs(600),
        sub: None,
        sid: None,
    };
    let token = issue(SECRET, &request).unwrap();
    let client =
        Client::new(&format!("http://{addr}")).unwrap().with_http_client(http.clone()).with_token(&token).unwrap();
    let id = client.publish(&NewEvent::new("node.joined", "acme", "node/n1", serde_json::json!({}))).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let page = client.list(&ListQuery::default()).await.expect("a page through the application's client");
        if let Some(event) = page.items.first() {
            assert_eq!(event.id, id);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the published event became visible");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // An https:// server gets a TLS handshake from the same client, not a panic: nothing
    // listens there, so the answer is a connection error.
    let tls = Client::new("https://127.0.0.1:9").unwrap().with_http_client(http);
    let refused = tls.list(&ListQuery::default()).await;
    assert!(matches!(refused, Err(outbox_client::Error::Connection(_))), "{refused:?}");
}
