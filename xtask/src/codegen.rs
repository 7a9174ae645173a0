//! `cargo xtask codegen [--check]`: the Rust code generated from `proto/`.
//!
//! `protox` compiles the `.proto` files into a descriptor set in pure Rust and
//! `prost_build::Config::compile_fds` turns that into Rust, so no `protoc` is
//! needed (or downloaded). The result is checked in under
//! `crates/outbox-proto/src/generated/`, the one crate that both `outbox-http` and
//! `outbox-workers` take the messages from; `--check` (and the test below, which
//! `cargo test --workspace` runs) fails when it differs from a fresh run.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The `.proto` files to compile, relative to `proto/`.
const PROTOS: &[&str] = &["outbox/v1/event.proto"];
/// Where the generated Rust is checked in, relative to the workspace root.
const OUTPUT: &str = "crates/outbox-proto/src/generated";

pub(crate) fn run(check: bool) -> anyhow::Result<()> {
    let root = workspace_root();
    let generated = generate(&root)?;
    let output = root.join(OUTPUT);
    let mut stale = Vec::new();
    for (name, code) in &generated {
        let path = output.join(name);
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == *code {
            continue;
        }
        if check {
            stale.push(path.display().to_string());
        } else {
            std::fs::write(&path, code).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("xtask: wrote {}", path.display());
        }
    }
    if !stale.is_empty() {
        bail!("generated code is stale; run `cargo xtask codegen`:\n  {}", stale.join("\n  "));
    }
    Ok(())
}

/// Each generated file's name and contents, compiled from `proto/` under `root`.
fn generate(root: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let descriptors = protox::compile(PROTOS, [root.join("proto")]).context("compiling proto/ with protox")?;
    let scratch = scratch_dir()?;
    let result = prost_build::Config::new()
        .out_dir(&scratch)
        .compile_fds(descriptors)
        .context("generating Rust with prost-build")
        .and_then(|()| read_all(&scratch));
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn read_all(dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).context("a generated file without a name")?.to_owned();
        files.push((name, std::fs::read_to_string(&path)?));
    }
    files.sort();
    Ok(files)
}

/// A fresh, empty directory for prost-build's output.
fn scratch_dir() -> anyhow::Result<PathBuf> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos();
    let dir = std::env::temp_dir().join(format!("outbox-codegen-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    #[test]
    fn generated_code_is_fresh() {
        if let Err(error) = super::run(true) {
            panic!("{error:#}");
        }
    }
}
