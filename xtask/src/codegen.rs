//! `cargo xtask codegen [--check]`: the Rust code generated from `proto/`.

pub fn run(_check: bool) -> anyhow::Result<()> {
    anyhow::bail!("codegen is not built yet")
}
