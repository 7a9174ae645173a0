//! One module per command of the `outbox` binary.

pub mod dev;
pub mod doctor;
pub mod events;
pub mod migrate;
pub mod serve;
pub mod sinks;
pub mod token;
pub mod webhooks;

/// Serves until SIGINT or SIGTERM, then lets the server drain; fails only when the signals
/// could not be listened for.
pub async fn serve_until_signal(server: crate::server::Server) -> anyhow::Result<()> {
    let mut failed = None;
    server
        .run(async {
            if let Err(error) = shutdown_signal().await {
                failed = Some(error);
            }
        })
        .await;
    failed.map_or(Ok(()), Err)
}

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
