//! `outbox migrate [--dry-run]`: apply owner `core`'s and `server`'s migrations (SPEC §2.1).

use anyhow::Context;
use outbox_pg::sqlx;

use crate::cli::MigrateArgs;
use crate::config::{Config, Overrides};
use crate::revocation::migrator;

/// Runs the command.
pub async fn run(args: MigrateArgs) -> anyhow::Result<()> {
    let config = Config::load(args.config.as_deref(), &Overrides::default())?;
    let url = config.database_url.context(
        "DATABASE_URL is not set: point it (or database_url in the configuration) at the database to migrate",
    )?;
    let pool = sqlx::PgPool::connect(&url).await.context("connecting to the database")?;
    let migrator = migrator();
    if args.dry_run {
        let pending = migrator.pending(&pool).await?;
        if pending.is_empty() {
            println!("nothing to apply: the database is current");
        }
        pending.iter().for_each(|name| println!("would apply {name}"));
        return Ok(());
    }
    let report = migrator.run(&pool).await?;
    report.applied.iter().for_each(|name| println!("applied {name}"));
    println!("{} applied, {} already current", report.applied.len(), report.skipped);
    Ok(())
}
