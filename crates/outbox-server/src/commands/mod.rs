//! One module per command of the `outbox` binary.

pub mod dev;
pub mod migrate;
pub mod serve;
pub mod token;

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() -> anyhow::Result<()> {
    use anyhow::Context;
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    tokio::select! {
        interrupted = tokio::signal::ctrl_c() => interrupted.context("listening for Ctrl-C"),
        _ = terminate.recv() => Ok(()),
    }
}
