//! `cargo run -p outbox-example-axum`: the shop on 127.0.0.1:3001 (needs `DATABASE_URL`).

use anyhow::Context;
use outbox_core::Pattern;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL").context("DATABASE_URL is not set")?;
    let pool = outbox_example_axum::connect(&url).await.context("connecting to DATABASE_URL")?;
    outbox_example_axum::migrator().run(&pool).await.context("migrating")?;
    let (router, subscribers) = outbox_example_axum::app(pool);
    let _log = subscribers
        .subscribe(Pattern::parse("order.*")?, |event| async move {
            println!("subscriber: {} {} {}", event.sequence, event.event_type, event.subject);
            Ok::<(), std::convert::Infallible>(())
        })
        .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3001").await?;
    println!("shop on http://127.0.0.1:3001");
    println!(
        "  curl -H 'Authorization: Bearer acme-token' -H 'Content-Type: application/json' -d '{{\"id\":\"o1\",\"item\":\"tea\",\"quantity\":2}}' http://127.0.0.1:3001/orders"
    );
    println!("  curl -N -H 'Authorization: Bearer acme-token' 'http://127.0.0.1:3001/outbox/watch?cursor=0.0'");
    outbox_example_axum::serve(router, listener).await?;
    Ok(())
}
