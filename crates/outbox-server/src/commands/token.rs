//! `outbox token issue --tenant T --scopes "…" [--ttl 1h] [--sub ID] [--sid ID]` (SPEC §5.2).

use anyhow::Context;

use crate::cli::IssueArgs;
use crate::config::{Config, ConfigError, KNOWN_SCOPES, Overrides};
use crate::token::{TokenRequest, issue as sign, parse_ttl};

/// Prints a JWT signed with the configured HS256 secret.
pub fn issue(args: IssueArgs) -> anyhow::Result<()> {
    let config = Config::load(args.config.as_deref(), &Overrides::default())?;
    let secret = config.auth.jwt_secret.ok_or_else(|| {
        ConfigError(
            "auth.jwt_secret is not configured (set it, or OUTBOX_JWT_SECRET): tokens are signed with it".into(),
        )
    })?;
    let request = request(&args)?;
    println!("{}", sign(&secret, &request).context("signing the token")?);
    Ok(())
}

fn request(args: &IssueArgs) -> anyhow::Result<TokenRequest> {
    anyhow::ensure!(
        outbox_core::validate::is_valid_tenant_id(&args.tenant),
        "--tenant {:?} is not a tenant id",
        args.tenant
    );
    if let Some(unknown) = args.scopes.split_whitespace().find(|s| !KNOWN_SCOPES.contains(s)) {
        anyhow::bail!("--scopes: unknown scope {unknown:?} (expected {KNOWN_SCOPES:?})");
    }
    let ttl = parse_ttl(&args.ttl).map_err(|e| anyhow::anyhow!("--ttl: {e}"))?;
    Ok(TokenRequest {
        tenant: args.tenant.clone(),
        scopes: args.scopes.clone(),
        ttl,
        sub: args.sub.clone(),
        sid: args.sid.clone(),
    })
}
