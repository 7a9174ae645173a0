//! `cargo xtask migrate [--dry-run]`.

use anyhow::Context;
use outbox_pg::Migrator;

pub(crate) fn run(dry_run: bool) -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL").context("DATABASE_URL is not set: point it at the database to migrate")?;
    outbox_services::runtime()?.block_on(async {
        let pool = sqlx::PgPool::connect(&url)
            .await
            .with_context(|| format!("connecting to {}", outbox_services::redact(&url)))?;
        let migrator = Migrator::new();
        if dry_run {
            let pending = migrator.pending(&pool).await?;
            if pending.is_empty() {
                println!("nothing to apply: the database is current");
            }
            for name in pending {
                println!("would apply {name}");
            }
            return Ok(());
        }
        let report = migrator.run(&pool).await?;
        for name in &report.applied {
            println!("applied {name}");
        }
        println!("{} applied, {} already current", report.applied.len(), report.skipped);
        Ok(())
    })
}
