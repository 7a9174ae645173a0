//! `cargo xtask bench sinks`: the nats and redis sinks against bare publish loops.

pub fn run() -> anyhow::Result<()> {
    anyhow::bail!("bench sinks is not built yet")
}
