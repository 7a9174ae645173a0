//! What an operator runs and watches besides the routes: the `retention` role, the
//! doctor's configuration, and what `/readyz` asks of the roles (SPEC §8.2, §9).
//!
//! The work itself lives in `outbox-workers` (`retention`, `doctor`); this module turns the
//! `[retention]` and `[doctor]` tables into their configurations and keeps the retention
//! loop of this process.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use outbox_pg::sqlx::PgPool;
use outbox_workers::config::build_spec;
use outbox_workers::doctor::DoctorConfig;
use outbox_workers::retention::{Holders, Retention, RetentionConfig};

use crate::config::{Config, Role};
use crate::revocation::migrator;

/// A source of the shared tail's poll timings, rendered by `GET /metrics` as
/// `outbox_tail_poll_duration_seconds` once a process runs a shared tail.
pub trait TailPolls: Send + Sync {
    /// Polls so far and their total duration.
    fn polls(&self) -> (u64, Duration);
}

impl TailPolls for outbox_pg::tail::Tail {
    fn polls(&self) -> (u64, Duration) {
        (self.reads(), self.read_time())
    }
}

/// The operational parts of a server process.
pub struct Ops {
    /// This process's retention loop, when it has the `retention` role.
    pub retention: Option<Retention>,
    /// Tenant id → class for the `tenant_class` label.
    pub tenant_classes: std::collections::BTreeMap<String, String>,
    /// The shared tail's poll timings, when the process runs one.
    pub tail: Option<Arc<dyn TailPolls>>,
}

impl Ops {
    /// Starts the retention loop when `config` gives this process the `retention` role.
    pub fn start(config: &Config, pool: &PgPool) -> anyhow::Result<Ops> {
        let retention = match config.roles.has(Role::Retention) {
            true => {
                let retention = Retention::start(pool.clone(), retention_config(config)).context("retention")?;
                tracing::info!(every_seconds = config.retention.every_seconds, "role retention: running retention");
                Some(retention)
            }
            false => None,
        };
        Ok(Ops { retention, tenant_classes: config.metrics.tenant_classes.clone(), tail: None })
    }

    /// Why a started role is not running, if one is not.
    pub fn roles_not_running(&self) -> Option<String> {
        match &self.retention {
            Some(retention) if !retention.is_running() => Some("the retention loop stopped".into()),
            _ => None,
        }
    }

    /// The `tenant_class` label of `tenant`.
    pub fn tenant_class(&self, tenant: &str) -> &str {
        self.tenant_classes.get(tenant).map_or("default", String::as_str)
    }

    /// Stops the retention loop, releasing its lease.
    pub async fn shutdown(&self) {
        if let Some(retention) = &self.retention {
            retention.shutdown().await;
        }
    }
}

/// Which cursors hold retention: a `sink:<id>` cursor only when `<id>` is one of the
/// configured `[[sinks]]` (a sink removed from the configuration is disabled); any other
/// cursor always.
pub fn holders(config: &Config) -> Holders {
    Holders::EnabledSinks(config.sinks.iter().map(|sink| sink.id.clone()).collect())
}

/// `[retention]` as the retention loop takes it.
pub fn retention_config(config: &Config) -> RetentionConfig {
    let retention = &config.retention;
    RetentionConfig {
        every: Duration::from_secs(retention.every_seconds),
        batch: retention.batch,
        max_rounds: retention.max_rounds,
        pause: Duration::from_millis(retention.pause_ms),
        min_age: Duration::from_secs(retention.min_age_seconds),
        holders: holders(config),
        ..RetentionConfig::default()
    }
}

/// `[doctor]`, `[retention]` and `[[sinks]]` as the doctor takes them.
pub fn doctor_config(config: &Config) -> anyhow::Result<DoctorConfig> {
    let sinks = config
        .sinks
        .iter()
        .map(|sink| Ok((sink.id.clone(), build_spec(sink)?.filter, sink.lanes)))
        .collect::<outbox_workers::Result<Vec<_>>>()
        .context("the sinks")?;
    Ok(DoctorConfig {
        migrator: migrator(),
        sinks,
        min_age: Duration::from_secs(config.retention.min_age_seconds),
        holders: holders(config),
        thresholds: config.doctor,
    })
}
