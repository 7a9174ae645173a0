//! `cargo xtask bench http`: SSE delivery and `/events` pages against the bare xmin query.

pub fn run() -> anyhow::Result<()> {
    anyhow::bail!("bench http is not built yet")
}
