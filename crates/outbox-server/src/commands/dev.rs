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
//!
//! What a newcomer needs is printed last, between two rules, once everything has started
//! (with `--demo`, once the demo's subscription exists): the address, the console link and
//! the token. The operational log lines (leases and shards taken, roles started) are at
//! the `info` level, which `outbox dev` leaves out unless `--verbose` or `OUTBOX_LOG` asks
//! for it (see `main.rs`); warnings and errors always show.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use outbox_pg::embedded::{EmbeddedOptions, EmbeddedPostgres};
use outbox_pg::internal::seal::SealKey;

use crate::cli::DevArgs;
use crate::config::{Config, ConfigError, Roles};
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
    let token = admin_token(config.auth.jwt_secret.as_deref().unwrap_or_default())?;
    let server = Server::start(&config, pool.clone()).await?;
    let addr = server.local_addr();
    let serving = tokio::spawn(super::serve_until_signal(server));
    let demo = match args.demo {
        true => Some(demo::Demo::start(pool.clone(), addr, &token, demo_sink_file(&args)).await?),
        false => None,
    };
    print!("{}", welcome(addr, &token, demo.as_ref()));
    let served = serving.await.context("serving")?;
    if let Some(demo) = demo {
        demo.stop();
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
        None => kept(&beside(&args.data_dir, "dev-secret"), "the dev secret", jwt_secret, || {
            Ok(hex::encode(rand::random::<[u8; 32]>()))
        })?,
    };
    let seal_key = match from_env("OUTBOX_WEBHOOK_SEAL_KEY") {
        Some(key) => SealKey::parse(&key).map_err(|error| ConfigError(format!("OUTBOX_WEBHOOK_SEAL_KEY: {error}")))?,
        None => kept(
            &beside(&args.data_dir, "dev-seal-key"),
            "the dev seal key",
            |text| SealKey::parse(text).ok(),
            || SealKey::generate().context("making a seal key"),
        )?,
    };
    let mut config =
        Config { database_url: Some(url), listen: args.listen, roles: Roles::default(), ..Config::default() };
    config.auth.jwt_secret = Some(secret);
    config.webhooks.seal_key = Some(Arc::new(seal_key));
    config.allow_private_targets = true;
    if args.demo {
        config.sinks.push(demo::jsonl_sink(&demo_sink_file(args)));
    }
    config.validate()?;
    Ok(config)
}

/// Where the demo's sink writes: beside the cluster, like the secrets.
fn demo_sink_file(args: &DevArgs) -> PathBuf {
    let file = beside(&args.data_dir, demo::SINK_FILE);
    std::path::absolute(&file).unwrap_or(file)
}

/// `<data-dir>/../<name>`: next to the cluster, outside the directory initdb owns.
fn beside(data_dir: &Path, name: &str) -> PathBuf {
    let parent = data_dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    parent.join(name)
}

fn jwt_secret(text: &str) -> Option<String> {
    (text.len() >= crate::config::MIN_SECRET_BYTES).then(|| text.to_owned())
}

/// The secret kept at `path` when `parse` accepts it, or a new one from `make`, stored
/// there (readable by the owner only); parsed once either way.
fn kept<T>(
    path: &Path,
    what: &str,
    parse: impl Fn(&str) -> Option<T>,
    make: impl FnOnce() -> anyhow::Result<String>,
) -> anyhow::Result<T> {
    if let Some(kept) = std::fs::read_to_string(path).ok().and_then(|text| parse(text.trim())) {
        return Ok(kept);
    }
    let secret = make()?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    write_private(path, &secret).with_context(|| format!("writing {what} to {}", path.display()))?;
    parse(&secret).with_context(|| format!("{what} just made does not parse"))
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.write_all(text.as_bytes())
}

/// An admin token of [`DEV_TENANT`] signed with the dev `secret`.
fn admin_token(secret: &str) -> anyhow::Result<String> {
    let request = TokenRequest {
        tenant: DEV_TENANT.into(),
        scopes: "events:read events:write webhooks:write admin".into(),
        ttl: DEV_TOKEN_TTL,
        sub: Some("dev".into()),
        sid: Some(format!("dev-{}", hex::encode(rand::random::<[u8; 4]>()))),
    };
    token::issue(secret, &request)
}

/// The rule above and below the welcome: plain characters, no colour needed.
pub const RULE: &str = "────────────────────────────────────────────────────────────────────────────";

/// What `outbox dev` prints last, between two [`RULE`]s: where it serves, the console link,
/// the token, the demo's parts, how to see the logs and how to stop.
fn welcome(addr: SocketAddr, token: &str, demo: Option<&demo::Demo>) -> String {
    let mut rows = vec![
        ("console", format!("http://{addr}/#token={token}")),
        ("token", token.to_owned()),
        ("", format!("admin, tenant {DEV_TENANT}, valid 30 days; export OUTBOX_TOKEN=… for the CLI")),
        ("watch", format!("curl -N -H \"Authorization: Bearer $OUTBOX_TOKEN\" http://{addr}/watch")),
    ];
    if let Some(demo) = demo {
        let mut lines = demo.describe().into_iter();
        rows.extend(lines.next().map(|first| ("demo", first)));
        rows.extend(lines.map(|line| ("", line)));
    }
    rows.push(("logs", "warnings only; --verbose (or OUTBOX_LOG=info) shows what the server does".into()));
    rows.push(("stop", "Ctrl-C".into()));
    let mut text = format!("{RULE}\n  outbox dev is ready: every role on http://{addr}\n\n");
    for (label, value) in rows {
        text.push_str(&format!("  {label:<8} {value}\n"));
    }
    text.push_str(RULE);
    text.push('\n');
    text
}
