//! `outbox dev [--demo] [--listen ADDR] [--data-dir DIR]`: everything on one machine.
//!
//! Without `DATABASE_URL`, a PostgreSQL of its own runs in `--data-dir` (`.outbox/pg`),
//! started from the machine's binaries and stopped with the process. The database is
//! migrated, every role is served on `--listen` (`127.0.0.1:8080`), and an admin token is
//! printed, signed with an HS256 secret generated once and kept in `<data-dir>/../dev-secret`
//! (so tokens survive restarts). `OUTBOX_JWT_SECRET` replaces that secret when set. Webhook
//! secrets are sealed with a key made once and kept beside it in
//! `<data-dir>/../dev-seal-key` (so subscriptions survive restarts), unless
//! `OUTBOX_WEBHOOK_SEAL_KEY` names one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use outbox_pg::embedded::{EmbeddedOptions, EmbeddedPostgres};
use outbox_pg::internal::seal::SealKey;

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

/// Every role, the given address, the dev secret and seal key, private webhook targets allowed.
fn config(args: &DevArgs, url: String) -> anyhow::Result<Config> {
    let from_env = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    let secret = match from_env("OUTBOX_JWT_SECRET") {
        Some(secret) => secret,
        None => kept(&beside(&args.data_dir, "dev-secret"), "the dev secret", is_jwt_secret, || {
            Ok(hex::encode(rand::random::<[u8; 32]>()))
        })?,
    };
    let seal_key = match from_env("OUTBOX_WEBHOOK_SEAL_KEY") {
        Some(key) => key,
        None => kept(&beside(&args.data_dir, "dev-seal-key"), "the dev seal key", is_seal_key, || {
            SealKey::generate().context("making a seal key")
        })?,
    };
    let mut config =
        Config { database_url: Some(url), listen: args.listen, roles: Roles::default(), ..Config::default() };
    config.auth.jwt_secret = Some(secret);
    config.webhooks.seal_key = Some(seal_key);
    config.allow_private_targets = true;
    config.validate()?;
    Ok(config)
}

/// `<data-dir>/../<name>`: next to the cluster, outside the directory initdb owns.
fn beside(data_dir: &Path, name: &str) -> PathBuf {
    let parent = data_dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    parent.join(name)
}

fn is_jwt_secret(text: &str) -> bool {
    text.len() >= crate::config::MIN_SECRET_BYTES
}

fn is_seal_key(text: &str) -> bool {
    SealKey::parse(text).is_ok()
}

/// The secret kept at `path` when it is `valid`, or a new one from `make`, stored there
/// (readable by the owner only).
fn kept(
    path: &Path,
    what: &str,
    valid: fn(&str) -> bool,
    make: impl FnOnce() -> anyhow::Result<String>,
) -> anyhow::Result<String> {
    if let Ok(kept) = std::fs::read_to_string(path) {
        let kept = kept.trim().to_owned();
        if valid(&kept) {
            return Ok(kept);
        }
    }
    let secret = make()?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    write_private(path, &secret).with_context(|| format!("writing {what} to {}", path.display()))?;
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
