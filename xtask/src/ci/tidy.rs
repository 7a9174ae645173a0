//! The tidy checks (rust-analyzer's `xtask/src/tidy.rs` is the model): what a reader of the
//! tree relies on, checked so that it stays true.
//!
//! - Every workspace member is named in `docs/ARCHITECTURE.md` (by its package name).
//! - Every subcommand of every workspace binary is named there too, inside backticks
//!   ([`undocumented_subcommands`], run after the tests' build made the binaries).
//! - Every `.rs` file under a member's `src/` opens with a `//!` comment (generated files
//!   excepted).
//! - No library keeps fuzz targets in `src/`: a `#[cfg(test)]` module that reads the fuzz
//!   corpora belongs to the crate's integration tests.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::Workspace;

/// The map the checks hold the tree to, relative to the workspace root.
const ARCHITECTURE: &str = "docs/ARCHITECTURE.md";

/// The source checks, before anything is built.
pub(super) fn run() -> anyhow::Result<()> {
    let workspace = Workspace::load()?;
    let map = std::fs::read_to_string(workspace.root.join(ARCHITECTURE)).context("reading ARCHITECTURE.md")?;
    let mut broken = Vec::new();
    let names: Vec<&str> = workspace.members.iter().map(|m| m.package.name.as_str()).collect();
    broken.extend(unnamed_members(&map, &names));
    for member in &workspace.members {
        let src = member.package.dir.join("src");
        for file in rust_files(&src)? {
            let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            let shown = file.strip_prefix(&workspace.root).unwrap_or(&file).display().to_string();
            broken.extend(file_problems(&shown, &text, member.is_library));
        }
    }
    if !broken.is_empty() {
        bail!("tidy:\n  {}", broken.join("\n  "));
    }
    eprintln!("xtask: tidy: every member is on the map, every source file says what it is for");
    Ok(())
}

/// The members whose package name `map` never mentions.
fn unnamed_members(map: &str, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .filter(|name| !map.contains(*name))
        .map(|name| format!("{ARCHITECTURE} does not name the workspace member {name}"))
        .collect()
}

/// What is wrong with one source file: no `//!` opening, or fuzz targets in a library's `src/`.
fn file_problems(shown: &str, text: &str, library: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let first = text.lines().find(|line| !line.trim().is_empty()).unwrap_or("");
    let generated = text.lines().take(3).any(|line| line.contains("@generated"));
    if !generated && !first.starts_with("//!") {
        problems.push(format!("{shown} does not open with a //! comment saying what it is for"));
    }
    let fuzzes = text.contains("fuzz/corpus") || text.contains("fuzz/mutate.rs");
    if library && fuzzes {
        problems.push(format!("{shown} holds fuzz targets in a library's src/: move them to its tests/"));
    }
    problems
}

/// Every `.rs` file under `dir`, in a stable order.
fn rust_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(files) };
    let mut entries: Vec<_> = entries.collect::<Result<_, _>>()?;
    entries.sort_by_key(|entry| entry.path());
    for entry in entries {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path)?);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    Ok(files)
}

/// The subcommands of every binary of the workspace (built in `bin_dir`) that
/// `docs/ARCHITECTURE.md` does not name inside backticks.
pub(super) fn undocumented_subcommands(bin_dir: &Path) -> anyhow::Result<()> {
    let workspace = Workspace::load()?;
    let map = std::fs::read_to_string(workspace.root.join(ARCHITECTURE)).context("reading ARCHITECTURE.md")?;
    let named = backticked_words(&map);
    let mut broken = Vec::new();
    // The example hosts are applications, not commands: run, they serve.
    let examples = workspace.root.join("examples");
    let tools = workspace.members.iter().filter(|member| !member.package.dir.starts_with(&examples));
    for binary in tools.flat_map(|member| &member.binaries) {
        let path = bin_dir.join(binary);
        if !path.is_file() {
            bail!("tidy: the binary {binary} is not at {}; build the workspace first", path.display());
        }
        for command in subcommands(&help_of(&path)?) {
            if !named.contains(&command) {
                broken.push(format!("{ARCHITECTURE} does not name `{binary} {command}`"));
            }
        }
    }
    if !broken.is_empty() {
        bail!("tidy:\n  {}", broken.join("\n  "));
    }
    eprintln!("xtask: tidy: every subcommand of every binary is on the map");
    Ok(())
}

/// What `binary --help` prints, with nothing to connect to; a binary that does not exit
/// within 10 s is not a command line (and is stopped).
fn help_of(binary: &Path) -> anyhow::Result<String> {
    let mut child = Command::new(binary)
        .arg("--help")
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("running {} --help", binary.display()))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(String::new());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut help = String::new();
    child.stdout.take().context("the help's output")?.read_to_string(&mut help)?;
    Ok(help)
}

/// The subcommands a clap `--help` lists under `Commands:` (`help` left out).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| line.trim() != "Commands:")
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Every word inside a backticked span of `text`.
fn backticked_words(text: &str) -> BTreeSet<String> {
    let separators = |c: char| c.is_whitespace() || "|[]{},()<>=".contains(c);
    text.split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|span| span.split(separators))
        .filter(|word| !word.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_missing_from_the_map_is_named() {
        let map = "### `crates/outbox-core`\n\n### `crates/outbox-pg`\n";
        assert_eq!(
            unnamed_members(map, &["outbox-core", "outbox-pg", "outbox-lanes"]),
            ["docs/ARCHITECTURE.md does not name the workspace member outbox-lanes"]
        );
        assert!(unnamed_members(map, &["outbox-core", "outbox-pg"]).is_empty());
    }

    #[test]
    fn a_source_file_opens_with_its_purpose() {
        assert!(file_problems("a.rs", "//! What it is.\nfn f() {}\n", true).is_empty());
        assert!(file_problems("g.rs", "// This file is @generated by prost-build.\npub struct E;\n", true).is_empty());
        assert_eq!(
            file_problems("b.rs", "use std::io;\n//! Too late.\n", false),
            ["b.rs does not open with a //! comment saying what it is for"]
        );
    }

    #[test]
    fn fuzz_targets_in_a_library_are_refused_and_in_a_binary_allowed() {
        let fuzz = "//! Fuzzing.\nconst CORPUS: &str = \"fuzz/corpus/query\";\n";
        assert_eq!(
            file_problems("src/fuzz_query.rs", fuzz, true),
            ["src/fuzz_query.rs holds fuzz targets in a library's src/: move them to its tests/"]
        );
        assert!(file_problems("src/fuzz_query.rs", fuzz, false).is_empty());
    }

    #[test]
    fn subcommands_come_from_the_help_and_must_be_backticked() {
        let help =
            "Usage: outbox <COMMAND>\n\nCommands:\n  dev    Run\n  serve  Serve\n  help   Print\n\nOptions:\n  -h\n";
        assert_eq!(subcommands(help), ["dev", "serve"]);
        let named = backticked_words("the `outbox dev [--demo]` command, and serve without backticks");
        assert!(named.contains("dev") && named.contains("--demo"));
        assert!(!named.contains("serve"));
    }
}
