//! `outbox doctor [--config FILE] [--format table|json]` (SPEC §8.1, §9): the findings of
//! `outbox_workers::doctor::self_check` over the configuration's database, sinks and
//! thresholds. Exits 1 when any finding is an error.

use anyhow::bail;
use outbox_workers::doctor::{Finding, Severity, self_check};

use crate::cli::{DoctorArgs, Format};
use crate::config::{Config, ConfigError, Overrides};
use crate::ops::doctor_config;
use crate::terminal::{json_line, print_table, terminal_safe as escape};

/// Runs the command.
pub async fn run(args: DoctorArgs) -> anyhow::Result<()> {
    let config = Config::load(args.config.as_deref(), &Overrides::default())?;
    let url = config.database_url.clone().ok_or_else(|| {
        ConfigError("database_url is not set: set DATABASE_URL or database_url in the configuration".into())
    })?;
    let doctor = doctor_config(&config)?;
    let pool = super::serve::connect(&url).await?;
    let findings = self_check(&pool, &doctor).await;
    pool.close().await;
    match args.format {
        Format::Json => findings.iter().for_each(|finding| println!("{}", json_line(finding))),
        Format::Table if findings.is_empty() => println!("no findings: events can flow"),
        Format::Table => print_table(
            &["SEVERITY", "CHECK", "COUNT", "MESSAGE", "FIX"],
            &findings.iter().map(row).collect::<Vec<_>>(),
        ),
    }
    let errors = findings.iter().filter(|finding| finding.severity == Severity::Error).count();
    if errors > 0 {
        bail!("doctor: {errors} error finding(s)");
    }
    Ok(())
}

fn row(finding: &Finding) -> Vec<String> {
    let severity = serde_json::to_value(finding.severity).ok().and_then(|v| v.as_str().map(str::to_owned));
    vec![
        severity.unwrap_or_default(),
        escape(&finding.check),
        finding.count.map_or_else(|| "-".into(), |count| count.to_string()),
        escape(&finding.message),
        escape(&finding.fix),
    ]
}
