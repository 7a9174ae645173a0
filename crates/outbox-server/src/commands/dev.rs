//! `outbox dev [--demo] [--listen ADDR] [--data-dir DIR]`: everything on one machine.
//!
//! Without `DATABASE_URL`, a PostgreSQL of its own runs in `--data-dir` (`.outbox/pg`),
//! started from the machine's binaries and stopped with the process. The database is
//! migrated, every role is served on `--listen` (`127.0.0.1:8080`), and an admin token is
//! printed, signed with an HS256 secret generated once and kept in `<data-dir>/../dev-secret`
//! (so tokens survive restarts). `OUTBOX_JWT_SECRET` replaces that secret when set.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use outbox_pg::embedded::{EmbeddedOptions, EmbeddedPostgres};

use crate::cli::DevArgs;
use crate::config::{Config, Roles};
use crate::demo;
use crate::revocation::migrator;
use crate::server::Server;
use crate::token::{self, TokenRequest};

/// The tenant of the printed admin token; the demo publishes into it among others.
pub const DEV_TENANT: &str = "acme";

/// How long the printed admin token lives.
const DEV_TOKEN_TTL: Duration = Duration::from_secs(30 * 86400);

/// Runs the command until Ctrl-C or SIGTERM.
pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    let (url, embedded) = database(&args.data_dir).await?;
    let pool = super::serve::connect(&url).await?;
    let report = migrator().run(&pool).await.context("migrating the database")?;
    println!(
        "outbox dev: database ready at {url} ({} migrations applied, {} current)",
        report.applied.len(),
        report.skipped
    );
    let config = config(&args, url)?;
    let secret = config.auth.jwt_secret.clone().unwrap_or_default();
    let server = Server::start(&config, pool.clone()).await?;
    let addr = server.local_addr();
    print_welcome(addr, &secret)?;
    let demo = args.demo.then(|| tokio::spawn(demo::run(pool.clone())));
    let served = super::serve_until_signal(server).await;
    if let Some(demo) = demo {
        demo.abort();
    }
    pool.close().await;
    if let Some(embedded) = embedded {
        tokio::task::spawn_blocking(move || embedded.stop()).await?.context("stopping PostgreSQL")?;
    }
    println!("outbox dev: stopped");
    served
}

/// `DATABASE_URL`, or an embedded PostgreSQL in `data_dir`.
async fn database(data_dir: &Path) -> anyhow::Result<(String, Option<EmbeddedPostgres>)> {
    if let Some(url) = std::env::var("DATABASE_URL").ok().filter(|url| !url.is_empty()) {
        return Ok((url, None));
    }
    let dir = std::path::absolute(data_dir).context("resolving the data directory")?;
    eprintln!("outbox dev: starting PostgreSQL in {}", dir.display());
    let options = EmbeddedOptions::persistent(dir).stop_with_process();
    let embedded = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(options))
        .await?
        .context("starting the embedded PostgreSQL")?;
    Ok((embedded.url(), Some(embedded)))
}

/// Every role, the given address, the dev secret, private webhook targets allowed.
fn config(args: &DevArgs, url: String) -> anyhow::Result<Config> {
    let secret = match std::env::var("OUTBOX_JWT_SECRET").ok().filter(|s| !s.is_empty()) {
        Some(secret) => secret,
        None => dev_secret(&secret_path(&args.data_dir))?,
    };
    let mut config =
        Config { database_url: Some(url), listen: args.listen, roles: Roles::default(), ..Config::default() };
    config.auth.jwt_secret = Some(secret);
    config.allow_private_targets = true;
    config.validate()?;
    Ok(config)
}

/// `<data-dir>/../dev-secret`: next to the cluster, outside the directory initdb owns.
fn secret_path(data_dir: &Path) -> PathBuf {
    let parent = data_dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    parent.join("dev-secret")
}

/// Reads the dev secret, or generates and stores one (readable by the owner only).
fn dev_secret(path: &Path) -> anyhow::Result<String> {
    if let Ok(secret) = std::fs::read_to_string(path) {
        let secret = secret.trim().to_owned();
        if secret.len() >= crate::config::MIN_SECRET_BYTES {
            return Ok(secret);
        }
    }
    let secret = hex::encode(rand::random::<[u8; 32]>());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    write_private(path, &secret).with_context(|| format!("writing the dev secret to {}", path.display()))?;
    Ok(secret)
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.write_all(text.as_bytes())
}

fn print_welcome(addr: std::net::SocketAddr, secret: &str) -> anyhow::Result<()> {
    let request = TokenRequest {
        tenant: DEV_TENANT.into(),
        scopes: "events:read events:write webhooks:write admin".into(),
        ttl: DEV_TOKEN_TTL,
        sub: Some("dev".into()),
        sid: Some(format!("dev-{}", hex::encode(rand::random::<[u8; 4]>()))),
    };
    let token = token::issue(secret, &request)?;
    println!("outbox dev: serving every role on http://{addr}");
    println!("outbox dev: admin token (tenant {DEV_TENANT}, 30 days): {token}");
    println!("outbox dev: console http://{addr}/#token={token}");
    println!("outbox dev: try curl -N -H \"Authorization: Bearer {token}\" http://{addr}/watch");
    println!("outbox dev: press Ctrl-C to stop");
    Ok(())
}
