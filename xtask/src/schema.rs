//! `cargo xtask schema [--check]`: the schema as it stands, in one file.
//!
//! `migrations/CURRENT.sql` holds every table, index, constraint and function that the
//! migrations leave behind (owner `core`, `outbox_pg::Migrator::new()`, then every other owner
//! under `migrations/`, the `outbox` binary's `server`), read
//! back from the catalog of a freshly migrated database, so that a reviewer sees what a new
//! migration changes as a diff of that file and nobody has to replay the migrations in their
//! head to know the current shape of a table.
//!
//! How it is made: a scratch database on the PostgreSQL of [`postgres`] (`DATABASE_URL`,
//! else 127.0.0.1:5432, else a throwaway cluster), migrated by the runner, then dumped with
//! `pg_dump --schema-only --no-owner --no-privileges --no-comments`. The `pg_dump` must be of
//! the server's major version (its output differs between majors); it is looked for next to
//! the server binaries (`outbox_pg::embedded::find_bindir`, which honours
//! `OUTBOX_PG_BINDIR`), in `/usr/lib/postgresql/<major>/bin`, then on `PATH`, and the run
//! fails naming both versions when none matches. [`render`] then drops what differs from
//! one run or one minor version to the next and says nothing about the schema: the lines
//! naming the server's and pg_dump's versions, the random `\restrict` key of recent
//! pg_dumps, the session's `SET` and `set_config` lines, the dump's banner, and runs of
//! blank lines. What lies inside a quoted literal (a function's body) is kept as it is.
//! A header names the generator and the migrations the file reflects.
//!
//! The dump is of the schema only, so the rows of the ledger `compute_migrations` (and of
//! `compute_clock`) are not in it; their tables are. pg_dump orders objects by kind, then
//! by name, so two runs print the same file.
//!
//! Without `--check` the file is written. With it, nothing is written: the run fails with a
//! line diff when the checked-in file differs from a fresh one. `cargo xtask ci` runs the
//! check.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use outbox_pg::{Migration, Migrator};

use outbox_services::{ScratchDatabase, postgres};

/// The generated file, relative to the workspace root.
const OUTPUT: &str = "migrations/CURRENT.sql";
/// The scratch database's name prefix (the process id follows).
const DATABASE_PREFIX: &str = "outbox_schema";
/// Unchanged lines shown around each change of a diff.
const CONTEXT: usize = 3;

/// Writes `migrations/CURRENT.sql`, or with `check` compares it with a fresh one and fails
/// with the difference.
pub(crate) fn run(check: bool) -> anyhow::Result<()> {
    let path = workspace_root().join(OUTPUT);
    let fresh = generate()?;
    let current = std::fs::read_to_string(&path).ok();
    if check {
        compare(current.as_deref(), &fresh)?;
        eprintln!("xtask: {OUTPUT} is current");
        return Ok(());
    }
    if current.as_deref() != Some(fresh.as_str()) {
        std::fs::write(&path, &fresh).with_context(|| format!("writing {}", path.display()))?;
    }
    eprintln!("xtask: wrote {}", path.display());
    Ok(())
}

/// `Ok` when the checked-in file (`None`: missing) is the fresh one; otherwise what to do,
/// with the difference.
fn compare(current: Option<&str>, fresh: &str) -> anyhow::Result<()> {
    let Some(current) = current else {
        bail!("{OUTPUT} is missing: run `cargo xtask schema` and commit the file it writes");
    };
    if current != fresh {
        bail!(
            "{OUTPUT} differs from the schema the migrations make: run `cargo xtask schema` and commit the \
             result\n{}",
            diff(current, fresh, &format!("{OUTPUT} (checked in)"), &format!("{OUTPUT} (from the migrations)"))
        );
    }
    Ok(())
}

/// The file's text, from a scratch database migrated by the runner.
fn generate() -> anyhow::Result<String> {
    let server = postgres()?;
    let migrator = Migrator::new().register(other_owners()?);
    let names: Vec<String> = migrator.migrations().iter().map(|m| m.name.to_string()).collect();
    let runtime = outbox_services::runtime()?;
    let db = runtime.block_on(ScratchDatabase::create_unmigrated(&server.url(), DATABASE_PREFIX))?;
    let dumped = runtime.block_on(migrate(&migrator, &db)).and_then(|(major, database)| {
        let pg_dump = pg_dump_of_major(major)?;
        Ok((major, dump(&pg_dump, &database_url(&server.url(), &database))?))
    });
    let dropped = runtime.block_on(db.drop_now());
    let (major, dump) = dumped?;
    dropped.context("dropping the scratch database")?;
    Ok(render(&dump, &names, major))
}

/// The migrations of every owner but `core` (`migrations/<owner>/*.sql`, the `outbox`
/// binary's `server` among them), named as their owners' runners name them, in file order.
fn other_owners() -> anyhow::Result<Vec<Migration>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    let mut migrations = Vec::new();
    let mut owners: Vec<PathBuf> =
        std::fs::read_dir(&root)?.map(|entry| entry.map(|e| e.path())).collect::<Result<_, _>>()?;
    owners.sort();
    for owner in owners.iter().filter(|path| path.is_dir() && !path.ends_with("core")) {
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(owner)?.map(|entry| entry.map(|e| e.path())).collect::<Result<_, _>>()?;
        files.retain(|path| path.extension().is_some_and(|ext| ext == "sql"));
        files.sort();
        for file in files {
            let (Some(owner), Some(stem)) = (owner.file_name(), file.file_stem()) else { continue };
            let name = format!("{}/{}", owner.to_string_lossy(), stem.to_string_lossy());
            migrations.push(Migration::new(name, std::fs::read_to_string(&file)?));
        }
    }
    Ok(migrations)
}

/// Migrates the scratch database; returns the server's major version and the database's name.
async fn migrate(migrator: &Migrator, db: &ScratchDatabase) -> anyhow::Result<(u32, String)> {
    migrator.run(&db.pool).await.context("migrating the scratch database")?;
    let version: i32 =
        sqlx::query_scalar("SELECT current_setting('server_version_num')::int").fetch_one(&db.pool).await?;
    let database = db.pool.connect_options().get_database().context("the scratch pool names no database")?.to_owned();
    Ok((u32::try_from(version / 10_000)?, database))
}

/// `server_url` with its database replaced by `database`, for libpq (a `dbname` parameter
/// overrides the URL's path).
fn database_url(server_url: &str, database: &str) -> String {
    let separator = if server_url.contains('?') { '&' } else { '?' };
    format!("{server_url}{separator}dbname={database}")
}

/// A `pg_dump` of PostgreSQL `major`: next to the server binaries, in Debian's directory of
/// that version, or on `PATH`.
fn pg_dump_of_major(major: u32) -> anyhow::Result<PathBuf> {
    let mut candidates = Vec::new();
    if let Ok(bindir) = outbox_pg::embedded::find_bindir() {
        candidates.push(bindir.join("pg_dump"));
    }
    candidates.push(PathBuf::from(format!("/usr/lib/postgresql/{major}/bin/pg_dump")));
    candidates.push(PathBuf::from("pg_dump"));
    let mut found = Vec::new();
    for candidate in candidates {
        let Some(version) = pg_dump_major(&candidate) else { continue };
        if version == major {
            return Ok(candidate);
        }
        found.push(format!("{} is of PostgreSQL {version}", candidate.display()));
    }
    if found.is_empty() {
        bail!(
            "pg_dump not found (looked next to the server binaries, in /usr/lib/postgresql/{major}/bin and on \
             PATH): install the PostgreSQL {major} client (Debian: postgresql-client-{major})"
        );
    }
    bail!(
        "pg_dump's major version differs from the server's, which is PostgreSQL {major} ({}): install the \
         PostgreSQL {major} client (Debian: postgresql-client-{major}) or set OUTBOX_PG_BINDIR to its bin directory",
        found.join("; ")
    )
}

/// The major version `pg_dump --version` reports ("pg_dump (PostgreSQL) 15.20 (Debian …)"),
/// `None` when it does not run.
fn pg_dump_major(pg_dump: &Path) -> Option<u32> {
    let output = Command::new(pg_dump).arg("--version").stdin(Stdio::null()).output().ok()?;
    if !output.status.success() {
        return None;
    }
    parse_major(&String::from_utf8_lossy(&output.stdout))
}

/// The leading number of the first word that starts with a digit: `15` of "… 15.20 (…)".
fn parse_major(version: &str) -> Option<u32> {
    let word = version.split_whitespace().find(|word| word.starts_with(|c: char| c.is_ascii_digit()))?;
    word.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// The schema of the database at `url`, as `pg_dump --schema-only` prints it.
fn dump(pg_dump: &Path, url: &str) -> anyhow::Result<String> {
    let output = Command::new(pg_dump)
        .args(["--schema-only", "--no-owner", "--no-privileges", "--no-comments", "--dbname"])
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", pg_dump.display()))?;
    if !output.status.success() {
        bail!("{} failed ({}): {}", pg_dump.display(), output.status, String::from_utf8_lossy(&output.stderr).trim());
    }
    String::from_utf8(output.stdout).context("pg_dump printed something that is not UTF-8")
}

/// The text of `migrations/CURRENT.sql` from a `pg_dump --schema-only` of a database that
/// `migrations` (in order) made, on PostgreSQL `major`: a header, then the dump without
/// what varies between runs and versions (see the module's documentation).
fn render(dump: &str, migrations: &[String], major: u32) -> String {
    let mut out = String::new();
    out.push_str("-- The schema after every migration, in one file: each table, index, constraint and\n");
    out.push_str("-- function as the catalog of a freshly migrated database holds it (pg_dump --schema-only\n");
    out.push_str(&format!("-- of PostgreSQL {major}, normalised).\n"));
    out.push_str("--\n");
    out.push_str("-- GENERATED by `cargo xtask schema`: do not edit. `cargo xtask ci` regenerates it and\n");
    out.push_str("-- fails when it differs; after adding a migration, run `cargo xtask schema` and commit\n");
    out.push_str("-- the result with it. Migrations that change the schema go in migrations/<owner>/.\n");
    out.push_str("--\n");
    out.push_str("-- It reflects these migrations, in the order the `outbox` binary's runner applies them\n");
    out.push_str("-- (outbox_pg::Migrator::new(), then the other owners of migrations/):\n");
    for name in migrations {
        out.push_str(&format!("--   {name}\n"));
    }
    out.push('\n');
    for line in normalise(dump) {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The dump's lines without version lines, the `\restrict` key, session settings, the
/// banner and runs of blank lines; lines inside a quoted literal are kept as they are.
fn normalise(dump: &str) -> Vec<&str> {
    let lines: Vec<&str> = dump.lines().collect();
    let quoted = starts_quoted(&lines);
    let banner = |i: usize| {
        !quoted[i] && matches!(lines[i], "-- PostgreSQL database dump" | "-- PostgreSQL database dump complete")
    };
    let mut kept: Vec<&str> = Vec::new();
    // Whether the last kept line is a blank one outside any literal.
    let mut after_blank = true;
    for (i, &line) in lines.iter().enumerate() {
        if quoted[i] {
            kept.push(line);
            after_blank = false;
            continue;
        }
        let frames_banner = line == "--" && ((i > 0 && banner(i - 1)) || (i + 1 < lines.len() && banner(i + 1)));
        let dropped = banner(i)
            || frames_banner
            || line.starts_with("-- Dumped from database version")
            || line.starts_with("-- Dumped by pg_dump version")
            || line.starts_with("\\restrict ")
            || line.starts_with("\\unrestrict ")
            || (line.starts_with("SET ") && line.ends_with(';'))
            || line.starts_with("SELECT pg_catalog.set_config(");
        if dropped {
            continue;
        }
        let blank = line.trim().is_empty();
        if blank && after_blank {
            continue;
        }
        kept.push(if blank { "" } else { line });
        after_blank = blank;
    }
    while kept.last().is_some_and(|line| line.is_empty()) {
        kept.pop();
    }
    kept
}

/// For each line, whether it begins inside a quoted literal: a dollar-quoted body (`$$`,
/// `$_$`, `$tag$`) or a string spanning lines. `--` comments and `$1` parameters outside
/// literals are not quotes.
fn starts_quoted(lines: &[&str]) -> Vec<bool> {
    enum State {
        Code,
        String,
        Dollar(Vec<u8>),
    }
    let mut state = State::Code;
    let mut quoted = Vec::with_capacity(lines.len());
    for line in lines {
        quoted.push(!matches!(state, State::Code));
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match &state {
                State::Code if bytes[i..].starts_with(b"--") => break,
                State::Code if bytes[i] == b'\'' => state = State::String,
                State::Code if bytes[i] == b'$' && (i == 0 || !is_identifier_byte(bytes[i - 1])) => {
                    if let Some(tag) = dollar_tag(&bytes[i..]) {
                        i += tag.len();
                        state = State::Dollar(tag.to_vec());
                        continue;
                    }
                }
                State::Code => {}
                State::String if bytes[i] == b'\'' => state = State::Code,
                State::String => {}
                State::Dollar(tag) if bytes[i..].starts_with(tag) => {
                    i += tag.len();
                    state = State::Code;
                    continue;
                }
                State::Dollar(_) => {}
            }
            i += 1;
        }
    }
    quoted
}

/// The dollar-quote tag (`$$`, `$name$`) that `text` starts with, if any.
fn dollar_tag(text: &[u8]) -> Option<&[u8]> {
    let rest = text.strip_prefix(b"$")?;
    if rest.first().is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let name = rest.iter().take_while(|&&b| is_identifier_byte(b)).count();
    (rest.get(name) == Some(&b'$')).then(|| &text[..name + 2])
}

fn is_identifier_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte >= 0x80
}

/// A unified-style line diff of `old` and `new` with [`CONTEXT`] lines around each change;
/// empty when they are equal.
fn diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::udiff::unified_diff(similar::Algorithm::Myers, old, new, CONTEXT, Some((old_name, new_name)))
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The start and end of a real `pg_dump --schema-only` of PostgreSQL 15.20, a function
    /// whose body holds what the normaliser drops elsewhere.
    const DUMP: &str = r#"--
-- PostgreSQL database dump
--

\restrict xb7YmlKfsos9tb2lEAfhx4xLKcFZ5IJ9aYhrVaxlVbCvgejMf0uCGRSsexQekA6

-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;

--
-- Name: compute_now(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.compute_now() RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $_$
BEGIN
SET lock_timeout = 0;


-- Dumped by pg_dump version 1
    RETURN now() + (SELECT offset_interval FROM compute_clock) + $1 * interval '1 second';
END
$_$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: compute_clock; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.compute_clock (
    id boolean DEFAULT true NOT NULL,
    note text DEFAULT 'it''s
SET x = 1;' NOT NULL
);


--
-- PostgreSQL database dump complete
--

\unrestrict xb7YmlKfsos9tb2lEAfhx4xLKcFZ5IJ9aYhrVaxlVbCvgejMf0uCGRSsexQekA6

"#;

    const NORMALISED: &str = r#"--
-- Name: compute_now(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.compute_now() RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $_$
BEGIN
SET lock_timeout = 0;


-- Dumped by pg_dump version 1
    RETURN now() + (SELECT offset_interval FROM compute_clock) + $1 * interval '1 second';
END
$_$;

--
-- Name: compute_clock; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.compute_clock (
    id boolean DEFAULT true NOT NULL,
    note text DEFAULT 'it''s
SET x = 1;' NOT NULL
);
"#;

    #[test]
    fn schema_normaliser_drops_versions_settings_banner_and_blank_runs_but_not_literals() {
        let names = vec!["core/0001_clock".to_owned(), "core/0002_base".to_owned()];
        let text = render(DUMP, &names, 15);
        let (header, body) = text.split_once("\n\n").unwrap();
        assert_eq!(body, NORMALISED);
        assert!(header.lines().all(|line| line.starts_with("--")), "{header}");
        assert!(header.contains("`cargo xtask schema`") && header.contains("do not edit"), "{header}");
        assert!(header.contains("PostgreSQL 15"), "{header}");
        assert!(
            header.ends_with("then the other owners of migrations/):\n--   core/0001_clock\n--   core/0002_base"),
            "{header}"
        );
        assert!(!text.contains("restrict") && !text.contains("15.20"), "{text}");
    }

    #[test]
    fn schema_render_is_stable_and_idempotent_on_its_input() {
        let names = vec!["core/0001_clock".to_owned()];
        assert_eq!(render(DUMP, &names, 15), render(DUMP, &names, 15));
        // Another random \restrict key and another minor version change nothing.
        let other = DUMP.replace("xb7YmlKf", "Q2ae81Zz").replace("15.20", "15.21");
        assert_eq!(render(&other, &names, 15), render(DUMP, &names, 15));
    }

    #[test]
    fn schema_quotes_are_tracked_across_lines() {
        let lines = ["AS $$", "SET a = 1;", "$$;", "SELECT $1, 'x", "y', $tag$ $$ ", "$tag$;", "-- it's", "done"];
        assert_eq!(starts_quoted(&lines), [false, true, true, false, true, true, false, false]);
    }

    #[test]
    fn schema_pg_dump_versions_are_parsed() {
        assert_eq!(parse_major("pg_dump (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)\n"), Some(15));
        assert_eq!(parse_major("pg_dump (PostgreSQL) 17beta1"), Some(17));
        assert_eq!(parse_major("pg_dump (PostgreSQL) 9.6.24"), Some(9));
        assert_eq!(parse_major("no version"), None);
    }

    #[test]
    fn schema_diff_shows_changed_lines_with_context() {
        assert_eq!(diff("a\nb\n", "a\nb\n", "old", "new"), "");
        let old: String = (1..=20).map(|n| format!("line {n}\n")).collect();
        let new = old.replace("line 5\n", "line five\n").replace("line 18\n", "") + "line 21\n";
        let shown = diff(&old, &new, "old", "new");
        assert!(shown.starts_with("--- old\n+++ new\n"), "{shown}");
        for line in ["@@ -2,7 +2,7 @@", " line 4", "-line 5", "+line five", " line 8", "-line 18", "+line 21"] {
            assert!(shown.lines().any(|shown| shown == line), "{line:?} is not in\n{shown}");
        }
        assert!(!shown.contains(" line 10\n"), "only three lines of context around a change:\n{shown}");
    }

    #[test]
    fn schema_a_stale_or_missing_file_fails_the_check_with_the_diff() {
        let fresh = "CREATE TABLE public.outbox (\n    seq bigint NOT NULL\n);\n";
        compare(Some(fresh), fresh).unwrap();
        let stale = fresh.replace("bigint", "integer");
        let error = compare(Some(&stale), fresh).unwrap_err().to_string();
        assert!(error.contains("differs from the schema the migrations make"), "{error}");
        assert!(error.contains("-    seq integer NOT NULL\n+    seq bigint NOT NULL"), "{error}");
        let missing = compare(None, fresh).unwrap_err().to_string();
        assert!(missing.contains("is missing"), "{missing}");
    }

    #[test]
    fn schema_pg_dump_of_another_major_is_refused_naming_both_versions() {
        let error = pg_dump_of_major(99).unwrap_err().to_string();
        assert!(error.contains("PostgreSQL 99"), "{error}");
        if let Some(found) = pg_dump_major(Path::new("pg_dump")) {
            assert!(error.contains(&format!("pg_dump is of PostgreSQL {found}")), "{error}");
        }
    }

    #[test]
    fn schema_database_url_overrides_the_database() {
        assert_eq!(
            database_url("postgres://postgres@127.0.0.1:5432/postgres", "outbox_schema_1"),
            "postgres://postgres@127.0.0.1:5432/postgres?dbname=outbox_schema_1"
        );
        assert_eq!(
            database_url("postgres://u@h/db?sslmode=disable", "x"),
            "postgres://u@h/db?sslmode=disable&dbname=x"
        );
    }
}
