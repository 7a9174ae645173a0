//! `outbox serve [--config FILE] [--roles …] [--listen ADDR]`: production (SPEC §8.1).

use std::time::Duration;

use anyhow::Context;
use outbox_pg::sqlx::PgPool;

use crate::cli::ServeArgs;
use crate::config::{Config, ConfigError, Overrides, Role};
use crate::revocation::migrator;
use crate::server::Server;

/// Runs the command until SIGTERM or SIGINT.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let overrides = Overrides { listen: args.listen, roles: args.roles };
    let config = Config::load(args.config.as_deref(), &overrides)?;
    let url = config.database_url.clone().ok_or_else(|| {
        ConfigError("database_url is not set: set DATABASE_URL or database_url in the configuration".into())
    })?;
    let pool = connect(&url).await?;
    let report = migrator().run(&pool).await.context("migrating the database")?;
    tracing::info!(applied = report.applied.len(), current = report.skipped, "database migrated");
    log_idle_roles(&config);
    let server = Server::start(&config, pool.clone()).await?;
    println!("outbox serve: listening on http://{} (roles {})", server.local_addr(), config.roles);
    let served = super::serve_until_signal(server).await;
    pool.close().await;
    served?;
    println!("outbox serve: stopped");
    Ok(())
}

/// A pool that gives up on an unreachable database in seconds, not minutes, and pings only
/// connections that sat idle (`outbox_pg::pool`).
pub async fn connect(url: &str) -> anyhow::Result<PgPool> {
    outbox_pg::pool::options()
        .max_connections(20)
        .acquire_timeout(Duration::from_secs(5))
        .connect(url)
        .await
        .context("connecting to the database")
}

/// A role with nothing to do says so, instead of silently doing nothing.
fn log_idle_roles(config: &Config) {
    if config.roles.has(Role::Sinks) && config.sinks.is_empty() {
        tracing::info!("role sinks: no [[sinks]] are configured");
    }
}
