//! `cargo run -p outbox-example-reservations`: the example host on 127.0.0.1:3000.

use anyhow::Context;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL").context("DATABASE_URL is not set")?;
    let pool = outbox_pg::sqlx::PgPool::connect(&url).await.context("connecting to DATABASE_URL")?;
    outbox_example_reservations::migrator().run(&pool).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("reservations example on http://127.0.0.1:3000");
    println!("  curl -X POST -H 'Authorization: Bearer acme-token' http://127.0.0.1:3000/reservations/rsv_1/activate");
    println!("  curl -N -H 'Authorization: Bearer acme-token' 'http://127.0.0.1:3000/watch?cursor=0.0'");
    outbox_example_reservations::serve(outbox_example_reservations::App::new(pool), listener).await?;
    Ok(())
}
