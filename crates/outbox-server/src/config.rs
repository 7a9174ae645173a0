//! The server's configuration (SPEC §8.1): a TOML file, overridden by environment
//! variables, overridden by command-line flags.
//!
//! Every table refuses keys it does not know (`deny_unknown_fields`), so a typo stops
//! start-up with a message naming the key instead of being ignored. Values that parse
//! but break a rule (a short secret, an unknown scope, a malformed hash) are refused the
//! same way by [`Config::validate`], naming the key.
//!
//! **One home per default, one parse per value.** A table that a library type describes
//! is that type (`[watch]` is `outbox_http::WatchOptions`, `[doctor]` is
//! `outbox_workers::doctor::Thresholds`, `[[sinks]]` is `outbox_workers::config::SinkConfig`);
//! a table in the file's own units (`[retention]`, `[webhooks]`) takes its defaults from
//! the library types' `Default`s. What needs parsing is parsed once, while loading, by the
//! type that owns it, and kept typed: the seal key (`SealKey`), the allowed ranges
//! (`Cidr`, which with `allow_private_targets` make the [`TargetPolicy`]), the catalog
//! (`Catalog`). The wiring reads these values and never parses again.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use outbox_core::Catalog;
use outbox_core::target::{Cidr, TargetPolicy};
use outbox_http::{WatchOptions, scope};
use outbox_pg::internal::seal::SealKey;
use outbox_pg::tail::TailOptions;
use outbox_workers::WebhookDeliveryConfig;
use outbox_workers::config::SinkConfig;
use outbox_workers::doctor::Thresholds;

/// The address `outbox serve` listens on when nothing says otherwise.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:8080";

/// An HS256 secret shorter than this is refused: HMAC-SHA256 wants at least its output size.
pub const MIN_SECRET_BYTES: usize = 32;

/// Configuration that cannot be used; the message names the key (or variable, or flag).
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn bad(message: impl Into<String>) -> ConfigError {
    ConfigError(message.into())
}

/// The whole configuration; every field has a default, so an empty file is valid.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The database (env `DATABASE_URL`).
    pub database_url: Option<String>,
    /// The HTTP listen address (env `OUTBOX_LISTEN`, flag `--listen`).
    pub listen: SocketAddr,
    /// What this process does (env `OUTBOX_ROLES`, flag `--roles`).
    pub roles: Roles,
    /// Authentication of HTTP callers.
    pub auth: AuthConfig,
    /// Options of the live stream (SPEC §5.4).
    pub watch: WatchOptions,
    /// Retention (SPEC §9), run by the `retention` role.
    pub retention: RetentionConfig,
    /// The doctor's thresholds (SPEC §9).
    pub doctor: Thresholds,
    /// What `GET /metrics` shows.
    pub metrics: MetricsConfig,
    /// The event catalog `GET /event-types` answers (SPEC §3.4), read from `[catalog]`.
    #[serde(deserialize_with = "catalog_table")]
    pub catalog: Catalog,
    /// Webhook subscriptions (SPEC §7.6).
    pub webhooks: WebhooksConfig,
    /// Sinks (SPEC §7.5), run by the `sinks` role.
    pub sinks: Vec<SinkConfig>,
    /// Whether webhook targets on loopback and private addresses are allowed (SPEC §7.6).
    pub allow_private_targets: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            database_url: None,
            listen: DEFAULT_LISTEN.parse().expect("a valid default address"),
            roles: Roles::default(),
            auth: AuthConfig::default(),
            watch: WatchOptions::default(),
            retention: RetentionConfig::default(),
            doctor: Thresholds::default(),
            metrics: MetricsConfig::default(),
            catalog: CatalogConfig::default().catalog().expect("the default catalog table is valid"),
            webhooks: WebhooksConfig::default(),
            sinks: Vec::new(),
            allow_private_targets: false,
        }
    }
}

/// `[auth]`: who may call the HTTP routes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// HS256 secret for JWTs (env `OUTBOX_JWT_SECRET`); also what `outbox token issue` signs with.
    pub jwt_secret: Option<String>,
    /// PEM files of RS256 / ES256 public keys that JWTs may be signed with.
    pub jwt_public_keys: Vec<PathBuf>,
    /// When set, a JWT must carry this `aud`; when unset, `aud` is not checked.
    pub jwt_audience: Option<String>,
    /// When set, a JWT must carry this `iss`; when unset, `iss` is not checked.
    pub jwt_issuer: Option<String>,
    /// Static API keys, stored as their SHA-256.
    pub api_keys: Vec<ApiKeyConfig>,
}

/// `[[auth.api_keys]]`: one static key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// A name for logs and for revocation (`identityId = "api-key:<id>"`).
    pub id: String,
    /// Hex SHA-256 of the key.
    pub sha256: String,
    /// The tenant the key reads and writes.
    pub tenant: String,
    /// Its scopes (SPEC §5.2).
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// `[retention]` (SPEC §9), with the SPEC's defaults.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionConfig {
    /// Seconds between passes.
    pub every_seconds: u64,
    /// Rows per delete statement.
    pub batch: u64,
    /// Statements per pass at most.
    pub max_rounds: u64,
    /// Milliseconds a pass rests after each statement.
    pub pause_ms: u64,
    /// Rows younger than this are kept.
    pub min_age_seconds: u64,
}

impl Default for RetentionConfig {
    /// The retention loop's own defaults, in the file's units.
    fn default() -> RetentionConfig {
        let defaults = outbox_workers::retention::RetentionConfig::default();
        RetentionConfig {
            every_seconds: defaults.every.as_secs(),
            batch: defaults.batch,
            max_rounds: defaults.max_rounds,
            pause_ms: u64::try_from(defaults.pause.as_millis()).unwrap_or(u64::MAX),
            min_age_seconds: defaults.min_age.as_secs(),
        }
    }
}

/// `[metrics]`: what `GET /metrics` shows.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Tenant id → class, the `tenant_class` label of events sent; other tenants are `default`.
    /// Tenant ids themselves never become labels (there can be millions).
    pub tenant_classes: BTreeMap<String, String>,
}

/// `[webhooks]`: tenants' webhook subscriptions (SPEC §7.6).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhooksConfig {
    /// The key that seals secrets at rest, written as the base64 of 32 random bytes (env
    /// `OUTBOX_WEBHOOK_SEAL_KEY`); without it the webhook routes answer `UNAVAILABLE`.
    #[serde(deserialize_with = "seal_key")]
    pub seal_key: Option<Arc<SealKey>>,
    /// Private ranges that targets may be in anyway (`10.20.0.0/16`).
    #[serde(deserialize_with = "cidrs")]
    pub allowed_cidrs: Vec<Cidr>,
    /// A subscription whose every attempt failed this long is disabled.
    pub disable_after_seconds: u64,
    /// The most subscriptions one tenant may have.
    pub max_per_tenant: u32,
    /// How long one delivery may take.
    pub timeout_ms: u64,
}

impl Default for WebhooksConfig {
    /// The routes' and the deliveries' own defaults, in the file's units.
    fn default() -> WebhooksConfig {
        let routes = outbox_http::WebhookConfig::default();
        let deliveries = WebhookDeliveryConfig::default();
        WebhooksConfig {
            seal_key: None,
            allowed_cidrs: Vec::new(),
            disable_after_seconds: deliveries.disable_after.as_secs(),
            max_per_tenant: routes.max_per_tenant,
            timeout_ms: u64::try_from(deliveries.timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

impl WebhooksConfig {
    /// What the webhook routes take, reaching `targets`.
    pub fn routes(&self, targets: TargetPolicy) -> outbox_http::WebhookConfig {
        outbox_http::WebhookConfig {
            seal_key: self.seal_key.clone(),
            max_per_tenant: self.max_per_tenant,
            targets,
            ..outbox_http::WebhookConfig::default()
        }
    }

    /// How the deliveries (and the pings) run, reaching `targets`.
    pub fn deliveries(&self, targets: TargetPolicy) -> WebhookDeliveryConfig {
        WebhookDeliveryConfig {
            targets,
            timeout: Duration::from_millis(self.timeout_ms),
            disable_after: Duration::from_secs(self.disable_after_seconds),
            ..WebhookDeliveryConfig::default()
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.max_per_tenant == 0 {
            return Err(bad("webhooks.max_per_tenant must be at least 1"));
        }
        if self.timeout_ms == 0 {
            return Err(bad("webhooks.timeout_ms must be at least 1"));
        }
        if self.disable_after_seconds == 0 {
            return Err(bad("webhooks.disable_after_seconds must be at least 1"));
        }
        Ok(())
    }
}

/// `webhooks.seal_key`, parsed by [`SealKey::parse`].
fn seal_key<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Arc<SealKey>>, D::Error> {
    let text = String::deserialize(deserializer)?;
    let key = SealKey::parse(&text).map_err(|error| serde::de::Error::custom(format!("webhooks.seal_key: {error}")))?;
    Ok(Some(Arc::new(key)))
}

/// `webhooks.allowed_cidrs`, each parsed as a [`Cidr`] and named by its index when it is not one.
fn cidrs<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Cidr>, D::Error> {
    let texts = Vec::<String>::deserialize(deserializer)?;
    let parse = |(index, text): (usize, &String)| {
        text.parse().map_err(|error| serde::de::Error::custom(format!("webhooks.allowed_cidrs[{index}]: {error}")))
    };
    texts.iter().enumerate().map(parse).collect()
}

/// `[catalog]`, read as a [`CatalogConfig`] and turned into the [`Catalog`] it describes.
fn catalog_table<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Catalog, D::Error> {
    let table = CatalogConfig::deserialize(deserializer)?;
    table.catalog().map_err(|error| serde::de::Error::custom(error.0))
}

/// `[catalog]`: the event families of this deployment (SPEC §3.4).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct CatalogConfig {
    /// Where the catalog starts: `control-plane` (the default) or `none`.
    pub preset: CatalogPreset,
    /// The deployment's own families, after the preset's.
    pub families: Vec<FamilyConfig>,
}

/// `[catalog] preset`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CatalogPreset {
    /// The 31 families of the control plane whose events subsystem Outbox re-creates.
    #[default]
    ControlPlane,
    /// No preset: the families declared here, and Outbox's own.
    None,
}

/// `[[catalog.families]]`: one family of events.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FamilyConfig {
    /// An exact type (`order.created`) or a family pattern (`order.*`), SPEC §3.5.
    #[serde(rename = "type")]
    pub pattern: String,
    /// The form of its events' subject (`order/{id}`).
    pub subject: String,
    /// The module that publishes it.
    pub module: String,
    /// What its events mean, in a sentence.
    pub description: String,
}

impl CatalogConfig {
    /// The catalog this table describes: the preset's families, then the declared ones,
    /// then Outbox's own. A pattern that breaks SPEC §3.5 is refused, naming its key.
    pub fn catalog(&self) -> Result<Catalog, ConfigError> {
        let mut families = Vec::with_capacity(self.families.len());
        for (index, family) in self.families.iter().enumerate() {
            let pattern = outbox_core::Pattern::parse(&family.pattern).map_err(|error| {
                bad(format!("catalog.families[{index}].type: {:?}: {}", family.pattern, error.rule()))
            })?;
            let entry = outbox_core::CatalogEntry::new(pattern, &family.subject, &family.module, &family.description);
            families.push(entry);
        }
        let preset = match self.preset {
            CatalogPreset::ControlPlane => outbox_core::Catalog::control_plane(),
            CatalogPreset::None => outbox_core::Catalog::empty(),
        };
        Ok(preset.with_extra(families))
    }
}

/// One thing a server process does (SPEC §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Serve the HTTP routes.
    Http,
    /// Run sink and webhook loops.
    Sinks,
    /// Run retention.
    Retention,
    /// Feed in-process subscribers.
    Subscribers,
    /// Every role.
    All,
}

impl Role {
    fn parse(text: &str) -> Option<Role> {
        Some(match text {
            "http" => Role::Http,
            "sinks" => Role::Sinks,
            "retention" => Role::Retention,
            "subscribers" => Role::Subscribers,
            "all" => Role::All,
            _ => return None,
        })
    }
}

/// The roles of a process; `all` by default.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Vec<Role>")]
pub struct Roles(BTreeSet<Role>);

impl Default for Roles {
    fn default() -> Roles {
        Roles(BTreeSet::from([Role::All]))
    }
}

impl TryFrom<Vec<Role>> for Roles {
    type Error = String;

    fn try_from(roles: Vec<Role>) -> Result<Roles, String> {
        if roles.is_empty() {
            return Err("roles must name at least one of http, sinks, retention, subscribers, all".into());
        }
        Ok(Roles(roles.into_iter().collect()))
    }
}

impl Roles {
    /// Parses a comma-separated list (`http,sinks`), as the variable and the flag take it.
    pub fn parse(text: &str, source: &str) -> Result<Roles, ConfigError> {
        let roles = text.split(',').map(str::trim).filter(|r| !r.is_empty()).map(|name| {
            Role::parse(name).ok_or_else(|| {
                bad(format!("{source}: unknown role {name:?} (expected http, sinks, retention, subscribers or all)"))
            })
        });
        let roles = roles.collect::<Result<Vec<_>, _>>()?;
        Roles::try_from(roles).map_err(|message| bad(format!("{source}: {message}")))
    }

    /// Whether this process has `role` (`all` has every role).
    pub fn has(&self, role: Role) -> bool {
        self.0.contains(&role) || self.0.contains(&Role::All)
    }
}

impl std::fmt::Display for Roles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.0.iter().map(|r| format!("{r:?}").to_lowercase()).collect();
        f.write_str(&names.join(","))
    }
}

/// The flags that override the file and the environment.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--listen`.
    pub listen: Option<SocketAddr>,
    /// `--roles`.
    pub roles: Option<String>,
}

impl Config {
    /// Reads `path` (or the file named by `OUTBOX_CONFIG`, or nothing), applies the
    /// environment, then `overrides`, then validates.
    pub fn load(path: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
        Config::load_with(path, overrides, |name| std::env::var(name).ok())
    }

    /// [`Config::load`] with the environment as a function, for tests.
    pub fn load_with(
        path: Option<&Path>,
        overrides: &Overrides,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let path = path.map(Path::to_path_buf).or_else(|| env("OUTBOX_CONFIG").map(PathBuf::from));
        let mut config = match &path {
            Some(path) => Config::read(path)?,
            None => Config::default(),
        };
        config.apply_env(&env)?;
        config.apply_overrides(overrides)?;
        config.validate()?;
        Ok(config)
    }

    /// Parses one file.
    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| bad(format!("cannot read the configuration file {}: {e}", path.display())))?;
        Config::parse(&text).map_err(|e| bad(format!("bad configuration in {}: {e}", path.display())))
    }

    /// Parses TOML text; the error names the key and shows its line.
    pub fn parse(text: &str) -> Result<Config, toml::de::Error> {
        toml::from_str(text)
    }

    fn apply_env(&mut self, env: &impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let set = |name: &str| env(name).filter(|value| !value.is_empty());
        if let Some(url) = set("DATABASE_URL") {
            self.database_url = Some(url);
        }
        if let Some(listen) = set("OUTBOX_LISTEN") {
            self.listen =
                listen.parse().map_err(|e| bad(format!("OUTBOX_LISTEN: {listen:?} is not an address: {e}")))?;
        }
        if let Some(roles) = set("OUTBOX_ROLES") {
            self.roles = Roles::parse(&roles, "OUTBOX_ROLES")?;
        }
        if let Some(secret) = set("OUTBOX_JWT_SECRET") {
            self.auth.jwt_secret = Some(secret);
        }
        if let Some(key) = set("OUTBOX_WEBHOOK_SEAL_KEY") {
            let key = SealKey::parse(&key).map_err(|error| bad(format!("OUTBOX_WEBHOOK_SEAL_KEY: {error}")))?;
            self.webhooks.seal_key = Some(Arc::new(key));
        }
        if let Some(seconds) = set("OUTBOX_DOCTOR_LONG_TX_SECONDS") {
            let seconds = seconds.trim().parse().map_err(|_| {
                bad(format!("OUTBOX_DOCTOR_LONG_TX_SECONDS: {seconds:?} is not a whole number of seconds"))
            })?;
            self.doctor.long_transaction = Duration::from_secs(seconds);
        }
        Ok(())
    }

    fn apply_overrides(&mut self, overrides: &Overrides) -> Result<(), ConfigError> {
        if let Some(listen) = overrides.listen {
            self.listen = listen;
        }
        if let Some(roles) = &overrides.roles {
            self.roles = Roles::parse(roles, "--roles")?;
        }
        Ok(())
    }

    /// Checks the rules the types alone do not, naming the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(secret) = &self.auth.jwt_secret
            && secret.len() < MIN_SECRET_BYTES
        {
            return Err(bad(format!(
                "auth.jwt_secret (or OUTBOX_JWT_SECRET) must be at least {MIN_SECRET_BYTES} bytes, it has {}",
                secret.len()
            )));
        }
        let mut ids = BTreeSet::new();
        for (index, key) in self.auth.api_keys.iter().enumerate() {
            key.validate(&format!("auth.api_keys[{index}]"))?;
            if !ids.insert(&key.id) {
                return Err(bad(format!("auth.api_keys[{index}].id: {:?} is used twice", key.id)));
            }
        }
        let mut sink_ids = BTreeSet::new();
        for sink in &self.sinks {
            sink.validate().map_err(|error| bad(error.to_string()))?;
            if !sink_ids.insert(&sink.id) {
                return Err(bad(format!("sinks[{}].id: {:?} is used twice", sink.id, sink.id)));
            }
        }
        self.webhooks.validate()?;
        self.validate_retention()?;
        self.validate_watch()
    }

    /// Which targets webhook deliveries may reach: `allow_private_targets` and
    /// `[webhooks] allowed_cidrs`.
    pub fn targets(&self) -> TargetPolicy {
        TargetPolicy { allow_private: self.allow_private_targets, allowed: self.webhooks.allowed_cidrs.clone() }
    }

    /// How the process's shared tail reads: every `[watch] poll_ms`, the tail's own batch.
    pub fn tail(&self) -> TailOptions {
        self.watch.tail()
    }

    /// `[retention]`, checked by the retention loop's own rules.
    fn validate_retention(&self) -> Result<(), ConfigError> {
        crate::ops::retention_config(self).validate().map_err(|error| bad(error.to_string()))
    }

    /// `[watch]`, checked by the stream options' own rules.
    fn validate_watch(&self) -> Result<(), ConfigError> {
        self.watch.validate().map_err(|rule| bad(format!("watch.{rule}")))
    }
}

impl ApiKeyConfig {
    fn validate(&self, key: &str) -> Result<(), ConfigError> {
        if self.id.is_empty() {
            return Err(bad(format!("{key}.id must not be empty")));
        }
        let hex_ok = self.sha256.len() == 64 && self.sha256.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex_ok {
            return Err(bad(format!("{key}.sha256 must be the 64 hex digits of the key's SHA-256")));
        }
        if !outbox_core::validate::is_valid_tenant_id(&self.tenant) {
            return Err(bad(format!(
                "{key}.tenant: {:?} is not a tenant id (^[A-Za-z0-9._:-]{{1,128}}$)",
                self.tenant
            )));
        }
        match self.scopes.iter().find(|s| !KNOWN_SCOPES.contains(&s.as_str())) {
            Some(unknown) => Err(bad(format!("{key}.scopes: unknown scope {unknown:?} (expected {KNOWN_SCOPES:?})"))),
            None => Ok(()),
        }
    }
}

/// The scopes of SPEC §5.2.
pub const KNOWN_SCOPES: [&str; 4] = [scope::EVENTS_READ, scope::EVENTS_WRITE, scope::WEBHOOKS_WRITE, scope::ADMIN];

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn load(text: &str, env: &[(&str, &str)], overrides: &Overrides) -> Result<Config, String> {
        let dir = std::env::temp_dir().join(format!("outbox-config-{}-{}", std::process::id(), rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("outbox.toml");
        std::fs::write(&path, text).unwrap();
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let result = Config::load_with(Some(&path), overrides, lookup).map_err(|e| e.to_string());
        std::fs::remove_dir_all(&dir).unwrap();
        result
    }

    #[track_caller]
    fn refused(text: &str, fragment: &str) {
        let message = load(text, &[], &Overrides::default()).expect_err("expected a refusal");
        assert!(message.contains(fragment), "{message:?} lacks {fragment:?}");
    }

    #[test]
    fn an_empty_file_gives_the_defaults() {
        let config = load("", &[], &Overrides::default()).unwrap();
        assert_eq!(config.listen.to_string(), DEFAULT_LISTEN);
        assert!(config.roles.has(Role::Http) && config.roles.has(Role::Sinks));
        assert_eq!(config.watch.heartbeat_ms, 15000);
        assert_eq!(config.retention, RetentionConfig::default());
        assert!(config.auth.jwt_secret.is_none() && !config.allow_private_targets);
    }

    #[test]
    fn the_tables_default_to_the_library_types_defaults() {
        let config = load("", &[], &Overrides::default()).unwrap();
        let deliveries = config.webhooks.deliveries(config.targets());
        let library = WebhookDeliveryConfig::default();
        assert_eq!((deliveries.timeout, deliveries.disable_after), (library.timeout, library.disable_after));
        assert_eq!(deliveries.max_attempts, library.max_attempts);
        let routes = config.webhooks.routes(config.targets());
        assert_eq!(routes.max_per_tenant, outbox_http::WebhookConfig::default().max_per_tenant);
        assert_eq!(routes.default_grace, outbox_http::WebhookConfig::default().default_grace);
        assert_eq!(config.doctor, Thresholds::default());
        assert_eq!(config.tail(), TailOptions::default());
        assert_eq!(config.targets(), TargetPolicy::default());
        let retention = crate::ops::retention_config(&config);
        let library = outbox_workers::retention::RetentionConfig::default();
        assert_eq!((retention.every, retention.batch, retention.pause), (library.every, library.batch, library.pause));
        assert_eq!((retention.max_rounds, retention.min_age), (library.max_rounds, library.min_age));
    }

    #[test]
    fn the_catalog_starts_from_its_preset_and_adds_the_declared_families() {
        let patterns = |config: &Config| -> Vec<String> {
            config.catalog.entries().iter().map(|entry| entry.pattern.as_str().to_owned()).collect()
        };
        let default = load("", &[], &Overrides::default()).unwrap();
        assert_eq!(patterns(&default).len(), 33, "the control-plane preset by default, then Outbox's own");
        assert_eq!(patterns(&default)[0], "site.*");

        let shop = r#"
            [catalog]
            preset = "none"
            [[catalog.families]]
            type = "order.*"
            subject = "order/{id}"
            module = "shop"
            description = "Orders placed, paid and shipped"
        "#;
        let config = load(shop, &[], &Overrides::default()).unwrap();
        assert_eq!(patterns(&config), ["order.*", "webhook.ping", "webhook.disabled"]);
        let beside = shop.replace(r#"preset = "none""#, r#"preset = "control-plane""#);
        let config = load(&beside, &[], &Overrides::default()).unwrap();
        assert_eq!(patterns(&config)[31], "order.*", "declared families come after the preset's");

        refused(&shop.replace("order.*", "Order.*"), r#"catalog.families[0].type: "Order.*""#);
        refused(&shop.replace(r#""none""#, r#""empty""#), "unknown variant `empty`");
        refused(&shop.replace("module = \"shop\"", "module = \"shop\"\nowner = \"me\""), "unknown field `owner`");
    }

    #[test]
    fn webhooks_take_a_seal_key_from_the_file_or_the_environment_and_refuse_a_bad_one() {
        let key = outbox_pg::internal::seal::SealKey::generate().unwrap();
        let file =
            format!("[webhooks]\nseal_key = \"{key}\"\nallowed_cidrs = [\"10.20.0.0/16\"]\nmax_per_tenant = 5\n");
        let config = load(&file, &[], &Overrides::default()).unwrap();
        assert!(config.webhooks.seal_key.is_some());
        assert_eq!(config.webhooks.max_per_tenant, 5);
        assert_eq!(config.targets().allowed, ["10.20.0.0/16".parse().unwrap()]);
        assert!(!config.targets().allow_private);
        let from_env = load("", &[("OUTBOX_WEBHOOK_SEAL_KEY", &key)], &Overrides::default()).unwrap();
        assert!(from_env.webhooks.seal_key.is_some());
        assert!(load("", &[], &Overrides::default()).unwrap().webhooks.seal_key.is_none());

        refused("[webhooks]\nseal_key = \"c2hvcnQ=\"\n", "webhooks.seal_key: a seal key is the base64 of 32");
        refused("[webhooks]\nallowed_cidrs = [\"10.20.0.1/16\"]\n", "webhooks.allowed_cidrs[0]");
        refused("[webhooks]\nmax_per_tenant = 0\n", "webhooks.max_per_tenant");
        refused("[webhooks]\nseal = \"x\"\n", "unknown field `seal`");
        let message = load("", &[("OUTBOX_WEBHOOK_SEAL_KEY", "nope")], &Overrides::default()).unwrap_err();
        assert!(message.contains("OUTBOX_WEBHOOK_SEAL_KEY"), "{message}");
    }

    #[test]
    fn the_spec_example_parses() {
        let text = format!(
            r#"
            database_url = "postgres://outbox@db/outbox"
            listen = "0.0.0.0:9090"
            roles = ["http", "sinks"]
            allow_private_targets = true
            [auth]
            jwt_secret = "{SECRET}"
            jwt_public_keys = ["/etc/outbox/issuer.pem"]
            [[auth.api_keys]]
            id = "ops"
            sha256 = "{}"
            tenant = "acme"
            scopes = ["events:read"]
            [watch]
            heartbeat_ms = 5000
            [retention]
            min_age_seconds = 60
            pause_ms = 0
            [[sinks]]
            id = "billing"
            kind = "webhook"
            types = ["reservation.*"]
            url = "https://billing.example.com/hooks/outbox"
            secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
            [[sinks]]
            id = "bus"
            kind = "nats"
            url = "nats://127.0.0.1:4222"
            stream = "OUTBOX"
            "#,
            "ab".repeat(32)
        );
        let config = load(&text, &[], &Overrides::default()).unwrap();
        assert_eq!(config.database_url.as_deref(), Some("postgres://outbox@db/outbox"));
        assert_eq!(config.listen.port(), 9090);
        assert!(config.roles.has(Role::Sinks) && !config.roles.has(Role::Retention));
        assert_eq!(config.auth.api_keys[0].scopes, ["events:read"]);
        assert_eq!(config.watch.heartbeat_ms, 5000);
        assert_eq!(config.watch.poll_ms, 100);
        assert_eq!(config.retention.min_age_seconds, 60);
        assert_eq!(config.retention.batch, 5000);
        assert_eq!((config.retention.pause_ms, RetentionConfig::default().pause_ms), (0, 250));
        assert_eq!(config.sinks.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["billing", "bus"]);
        assert_eq!(config.sinks[0].types, [outbox_core::Pattern::parse("reservation.*").unwrap()]);
        assert!(config.allow_private_targets);
    }

    #[test]
    fn unknown_keys_are_named() {
        refused("listen_addr = \"0.0.0.0:1\"", "listen_addr");
        refused("[auth]\njwt_secrett = \"x\"", "jwt_secrett");
        refused("[watch]\nheartbeat = 1", "heartbeat");
        refused("[retention]\nmin_age = 1", "min_age");
        refused("[[auth.api_keys]]\nid = \"a\"\nsha256 = \"\"\ntenant = \"t\"\nkeyy = 1", "keyy");
        refused("[metrics]\nport = 1\n", "unknown field `port`");
    }

    #[test]
    fn bad_values_are_named() {
        refused("listen = \"nowhere\"", "listen");
        refused("roles = [\"web\"]", "web");
        refused("roles = []", "roles must name");
        refused("[auth]\njwt_secret = \"short\"", "auth.jwt_secret");
        refused("[watch]\npoll_ms = 0", "watch.poll_ms");
        refused("[watch]\nbatch = 5000", "watch.batch must be 1 to 1000");
        refused("[retention]\nbatch = 0", "retention.batch");
        refused("[retention]\nevery_seconds = 0", "retention.every_seconds");
        refused("[retention]\nevery_seconds = 18446744073709551615", "retention.every_seconds: must be 1 to 604800");
        let key = |sha: &str, tenant: &str, scope: &str| {
            format!(
                "[[auth.api_keys]]\nid = \"ops\"\nsha256 = \"{sha}\"\ntenant = \"{tenant}\"\nscopes = [\"{scope}\"]"
            )
        };
        let sha = "ab".repeat(32);
        refused(&key("abc", "acme", "admin"), "auth.api_keys[0].sha256");
        refused(&key(&sha, "a b", "admin"), "auth.api_keys[0].tenant");
        refused(&key(&sha, "acme", "everything"), "auth.api_keys[0].scopes");
        refused(&format!("{}\n{}", key(&sha, "acme", "admin"), key(&sha, "acme", "admin")), "api_keys[1].id");
        refused("[[sinks]]\nid = \"a\"\nkind = \"redis\"", "sinks[a].url");
        refused("[[sinks]]\nid = \"a\"\nkind = \"pigeon\"", "pigeon");
        refused("[[sinks]]\nid = \"a\"\nkind = \"jsonl\"\npath = \"/tmp/x\"\nurl = \"x\"", "sinks[a].url");
        refused("[[sinks]]\nid = \"a\"\nkind = \"jsonl\"\npath = \"/tmp/x\"\nbatch = 0", "sinks[a].batch");
        let jsonl = |id: &str| format!("[[sinks]]\nid = \"{id}\"\nkind = \"jsonl\"\npath = \"/tmp/x\"\n");
        refused(&format!("{}{}", jsonl("a"), jsonl("a")), "sinks[a].id");
        refused(&jsonl("Not An Id"), "Not An Id");
    }

    #[test]
    fn environment_overrides_the_file_and_flags_override_both() {
        let text = format!("listen = \"127.0.0.1:1000\"\nroles = [\"sinks\"]\n[auth]\njwt_secret = \"{SECRET}\"");
        let other_secret = "z".repeat(40);
        let env = [
            ("DATABASE_URL", "postgres://env/db"),
            ("OUTBOX_LISTEN", "127.0.0.1:2000"),
            ("OUTBOX_ROLES", "http, retention"),
            ("OUTBOX_JWT_SECRET", other_secret.as_str()),
        ];
        let config = load(&text, &env, &Overrides::default()).unwrap();
        assert_eq!(config.database_url.as_deref(), Some("postgres://env/db"));
        assert_eq!(config.listen.port(), 2000);
        assert!(config.roles.has(Role::Retention) && !config.roles.has(Role::Sinks));
        assert_eq!(config.auth.jwt_secret.as_deref(), Some(other_secret.as_str()));

        let flags = Overrides { listen: Some("127.0.0.1:3000".parse().unwrap()), roles: Some("subscribers".into()) };
        let config = load(&text, &env, &flags).unwrap();
        assert_eq!(config.listen.port(), 3000);
        assert!(config.roles.has(Role::Subscribers) && !config.roles.has(Role::Http));
    }

    #[test]
    fn doctor_retention_and_metrics_tables() {
        let text = "[doctor]\nlong_transaction_seconds = 5\n[retention]\nevery_seconds = 10\n[metrics]\ntenant_classes = { acme = \"enterprise\" }\n";
        let config = load(text, &[], &Overrides::default()).unwrap();
        assert_eq!(config.doctor, Thresholds { long_transaction: Duration::from_secs(5), sink_lag: 10_000 });
        assert_eq!(config.retention.every_seconds, 10);
        assert_eq!(config.metrics.tenant_classes["acme"], "enterprise");
        let config = load(text, &[("OUTBOX_DOCTOR_LONG_TX_SECONDS", "7")], &Overrides::default()).unwrap();
        assert_eq!(config.doctor.long_transaction, Duration::from_secs(7));
        let err = load("", &[("OUTBOX_DOCTOR_LONG_TX_SECONDS", "soon")], &Overrides::default()).unwrap_err();
        assert!(err.contains("OUTBOX_DOCTOR_LONG_TX_SECONDS"), "{err}");
        refused("[retention]\nbatch = 0\n", "retention.batch: must be at least 1");
        refused("[doctor]\nlong_tx = 1\n", "unknown field `long_tx`");
    }

    #[test]
    fn bad_environment_and_flags_are_named() {
        let err = load("", &[("OUTBOX_LISTEN", "x")], &Overrides::default()).unwrap_err();
        assert!(err.contains("OUTBOX_LISTEN"), "{err}");
        let err = load("", &[("OUTBOX_ROLES", "http,web")], &Overrides::default()).unwrap_err();
        assert!(err.contains("OUTBOX_ROLES") && err.contains("web"), "{err}");
        let err = load("", &[], &Overrides { roles: Some("nope".into()), ..Overrides::default() }).unwrap_err();
        assert!(err.contains("--roles"), "{err}");
        let err = load("", &[("OUTBOX_JWT_SECRET", "short")], &Overrides::default()).unwrap_err();
        assert!(err.contains("OUTBOX_JWT_SECRET"), "{err}");
    }

    #[test]
    fn outbox_config_names_the_file() {
        let err = Config::load_with(None, &Overrides::default(), |name| {
            (name == "OUTBOX_CONFIG").then(|| "/nonexistent/outbox.toml".to_owned())
        })
        .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/outbox.toml"), "{err}");
    }
}
