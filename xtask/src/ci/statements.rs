//! The source scan of the layer check: SQL runs in `outbox-pg` only (SPEC §1).
//!
//! Every other library crate and the server call named `outbox-pg` functions whose
//! documentation says what the statement locks and which snapshot it reads. So in the `src/`
//! of every workspace package but [`STATEMENT_OWNERS`], this scan fails on:
//!
//! - a statement built with sqlx: `query`, `query_as`, `query_scalar`, `raw_sql` and their
//!   `_with`/`_unchecked`/`_file` forms, called through a path (`sqlx::query(`,
//!   `outbox_pg::sqlx::query_as::<…>(`, `query!(`), or imported by a `use` that names sqlx;
//! - an executor call: `.execute(`, `.execute_many(`, `.fetch(`, `.fetch_many(`,
//!   `.fetch_one(`, `.fetch_all(`, `.fetch_optional(`.
//!
//! Comments, strings and character literals are blanked first, so documentation may name
//! these freely. Transaction control (`pool.begin()`, `commit`) is not a statement of one's
//! own: `publish` writes in the caller's transaction (SPEC §3.1).
//!
//! A package's `tests/`, `examples/` and `benches/` are not scanned: a crate's own tests may
//! set rows up and read them back with SQL, and its benchmarks measure against bare SQL.
//! Unit tests inside `src/` are scanned like the code beside them.
//!
//! The scan is textual: it finds the ways Rust code runs sqlx statements, not every way it
//! could be disguised (a renamed import of the crate). It is a guard against drift, with
//! cargo-deny's `wrappers` and the direct-dependency check beside it.

use std::ops::Range;
use std::path::{Path, PathBuf};

/// Workspace packages that run statements of their own: the SQL crate; the tools that
/// migrate, explain, measure and test the database (`xtask`, the services launcher, the
/// benchmarks, the torture run, the end-to-end tests); and the
/// example hosts, applications whose own tables' SQL stands beside `publish` in their
/// transactions, as every host's does.
pub(super) const STATEMENT_OWNERS: &[&str] = &[
    "outbox-pg",
    "xtask",
    "outbox-e2e",
    "outbox-services",
    "outbox-bench",
    "outbox-torture",
    "outbox-example-reservations",
    "outbox-example-axum",
];

/// Sources that still run statements of their own, each with the change that ends it. An
/// entry that no longer excuses anything fails the check as well, so the list only shrinks.
pub(super) const STATEMENTS_ALLOWED: &[(&str, &str)] = &[];

/// The sqlx functions and macros that build a statement.
const STATEMENT_BUILDERS: &[&str] = &[
    "query",
    "query_as",
    "query_scalar",
    "query_with",
    "query_as_with",
    "query_scalar_with",
    "query_unchecked",
    "query_as_unchecked",
    "query_scalar_unchecked",
    "query_file",
    "query_file_as",
    "query_file_scalar",
    "raw_sql",
];

/// The sqlx `Executor` and `Query` methods that send a statement.
const EXECUTOR_CALLS: &[&str] =
    &["execute", "execute_many", "fetch", "fetch_many", "fetch_one", "fetch_all", "fetch_optional"];

/// A workspace package as the scan sees it.
pub(super) struct Package {
    pub name: String,
    /// The directory of its `Cargo.toml`.
    pub dir: PathBuf,
}

/// Every statement run outside [`STATEMENT_OWNERS`] and not excused by [`STATEMENTS_ALLOWED`],
/// and every excuse that found nothing, as `path:line: what` (paths relative to `root`).
pub(super) fn outside_pg(root: &Path, packages: &[Package]) -> anyhow::Result<Vec<String>> {
    let mut broken = Vec::new();
    let mut excused = Vec::new();
    for package in packages.iter().filter(|p| !STATEMENT_OWNERS.contains(&p.name.as_str())) {
        for file in rust_files(&package.dir.join("src"))? {
            let relative = file.strip_prefix(root).unwrap_or(&file).to_string_lossy().replace('\\', "/");
            let findings = statements(&std::fs::read_to_string(&file)?);
            if findings.is_empty() {
                continue;
            }
            if STATEMENTS_ALLOWED.iter().any(|(path, _)| *path == relative) {
                excused.push(relative);
                continue;
            }
            let why = format!("{} runs SQL outside outbox-pg: call an outbox-pg function", package.name);
            broken.extend(findings.iter().map(|(line, what)| format!("{relative}:{line}: {what} ({why})")));
        }
    }
    for (path, change) in STATEMENTS_ALLOWED.iter().filter(|(path, _)| !excused.iter().any(|e| e == path)) {
        broken.push(format!("{path}: allowed to run SQL until it would {change}, but runs none: drop the entry"));
    }
    Ok(broken)
}

/// The `.rs` files under `dir`, sorted; none when it does not exist.
fn rust_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Each statement `source` runs, as (line, what): see the module documentation.
pub(super) fn statements(source: &str) -> Vec<(usize, String)> {
    let code = code_only(source);
    let imports = sqlx_imports(&code);
    let mut found = Vec::new();
    for (start, word) in words(&code) {
        let (before, after) = (code[..start].trim_end(), code[start + word.len()..].trim_start());
        let call = if EXECUTOR_CALLS.contains(&word) && before.ends_with('.') && after.starts_with('(') {
            format!(".{word}(: an executor call")
        } else if STATEMENT_BUILDERS.contains(&word) && before.ends_with("::") && builds(after) {
            format!("{word}: a sqlx statement")
        } else if STATEMENT_BUILDERS.contains(&word) && imports.iter().any(|item| item.contains(&start)) {
            format!("{word}: imports a sqlx statement")
        } else {
            continue;
        };
        found.push((code[..start].matches('\n').count() + 1, call));
    }
    found
}

/// Whether what follows a builder's name calls it: `(`, a turbofish, or `!` for a macro.
fn builds(after: &str) -> bool {
    after.starts_with('(') || after.starts_with("::<") || after.starts_with('!')
}

/// The byte ranges of the `use` items of `code` that name sqlx (`use` is a keyword: every
/// such word begins an item, which ends at the next `;`).
fn sqlx_imports(code: &str) -> Vec<Range<usize>> {
    words(code)
        .filter(|(_, word)| *word == "use")
        .map(|(start, _)| start..code[start..].find(';').map_or(code.len(), |end| start + end))
        .filter(|item| words(&code[item.clone()]).any(|(_, word)| word == "sqlx"))
        .collect()
}

/// The identifiers of `code` with their byte offsets.
fn words(code: &str) -> impl Iterator<Item = (usize, &str)> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut rest = code.char_indices().peekable();
    std::iter::from_fn(move || {
        while let Some((start, c)) = rest.next() {
            if !ident(c) {
                continue;
            }
            let mut end = start + c.len_utf8();
            while let Some(&(i, c)) = rest.peek() {
                if !ident(c) {
                    break;
                }
                end = i + c.len_utf8();
                rest.next();
            }
            return Some((start, &code[start..end]));
        }
        None
    })
}

/// `source` with its comments and the contents of its string and character literals replaced
/// by spaces (newlines kept, so lines still count), leaving only code to match.
pub(super) fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < chars.len() {
        let skipped = match (chars[i], chars.get(i + 1).copied()) {
            ('/', Some('/')) => line_comment(&chars, i),
            ('/', Some('*')) => block_comment(&chars, i),
            ('"', _) => string_end(&chars, i + 1),
            ('r', Some('"' | '#')) if starts_token(&chars, i) => raw_string_end(&chars, i + 1),
            ('b' | 'c', Some('r')) if starts_token(&chars, i) && matches!(chars.get(i + 2), Some('"' | '#')) => {
                raw_string_end(&chars, i + 2)
            }
            ('\'', _) => char_literal_end(&chars, i),
            _ => None,
        };
        match skipped {
            Some(end) => {
                out.extend(chars[i..end].iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
                i = end;
            }
            None => {
                out.push(chars[i]);
                i += 1;
            }
        }
    }
    out
}

/// Whether `chars[i]` begins a token (a raw string's `r` is not the end of an identifier).
fn starts_token(chars: &[char], i: usize) -> bool {
    i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

fn line_comment(chars: &[char], start: usize) -> Option<usize> {
    Some(chars[start..].iter().position(|&c| c == '\n').map_or(chars.len(), |n| start + n))
}

/// The end of a (nested) block comment starting at `start`.
fn block_comment(chars: &[char], start: usize) -> Option<usize> {
    let (mut depth, mut i) = (0, start);
    while i < chars.len() {
        match (chars[i], chars.get(i + 1)) {
            ('/', Some('*')) => (depth, i) = (depth + 1, i + 2),
            ('*', Some('/')) => {
                (depth, i) = (depth - 1, i + 2);
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    Some(chars.len())
}

/// The end of a string whose contents start at `from` (after its opening quote).
fn string_end(chars: &[char], from: usize) -> Option<usize> {
    let mut i = from;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    Some(chars.len())
}

/// The end of a raw string whose hashes or quote start at `from` (after its `r`).
fn raw_string_end(chars: &[char], from: usize) -> Option<usize> {
    let hashes = chars[from..].iter().take_while(|&&c| c == '#').count();
    if chars.get(from + hashes) != Some(&'"') {
        return None;
    }
    let closing: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
    let body = from + hashes + 1;
    let end = (body..chars.len()).find(|&i| chars[i..].starts_with(&closing));
    Some(end.map_or(chars.len(), |i| i + closing.len()))
}

/// The end of a character literal at `start`; `None` for a lifetime or a label (`'a`).
fn char_literal_end(chars: &[char], start: usize) -> Option<usize> {
    match chars.get(start + 1) {
        Some('\\') => (start + 2..chars.len()).find(|&i| chars[i] == '\'').map(|i| i + 1),
        Some(_) if chars.get(start + 2) == Some(&'\'') => Some(start + 3),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(source: &str, expect: &[(usize, &str)]) {
        let found = statements(source);
        let found: Vec<(usize, &str)> = found.iter().map(|(line, what)| (*line, what.as_str())).collect();
        assert_eq!(found, expect, "in {source:?}");
    }

    #[test]
    fn statements_and_executor_calls_are_found() {
        check(
            "sqlx::query(\"SET LOCAL synchronous_commit = off\").execute(&mut *tx).await?;",
            &[(1, "query: a sqlx statement"), (1, ".execute(: an executor call")],
        );
        check("let n: i64 = outbox_pg::sqlx::query_scalar::<_, i64>(sql)", &[(1, "query_scalar: a sqlx statement")]);
        check("\n\nlet rows = sqlx::query_as!(Row, \"SELECT 1\")", &[(3, "query_as: a sqlx statement")]);
        check("outbox_pg::sqlx::raw_sql(AssertSqlSafe(sql))", &[(1, "raw_sql: a sqlx statement")]);
        check("statement.bind(1)\n    .fetch_optional(&self.pool)", &[(2, ".fetch_optional(: an executor call")]);
        check("q . fetch_all (pool)", &[(1, ".fetch_all(: an executor call")]);
    }

    #[test]
    fn imports_of_statement_builders_from_sqlx_are_found() {
        check("use outbox_pg::sqlx::{PgPool, query};\n", &[(1, "query: imports a sqlx statement")]);
        check("use sqlx::query_as;", &[(1, "query_as: imports a sqlx statement")]);
        check("pub use outbox_pg::sqlx::{self, raw_sql};", &[(1, "raw_sql: imports a sqlx statement")]);
        check("use crate::query::{Query, query};", &[]);
    }

    #[test]
    fn code_that_only_resembles_a_statement_is_not() {
        check("use outbox_pg::sqlx::PgPool;\nlet mut tx = pool.begin().await?;\ntx.commit().await?;", &[]);
        check("let query = Query::parse(parts.uri.query(), PARAMETERS)?;", &[]);
        check("mod query;\nuse crate::query::Query;\nfn query(x: u8) {}\nquery(1);", &[]);
        check("redis::cmd(\"XADD\").query_async(&mut connection)", &[]);
        check("self.sink.prepare().await; executor.fetch; fetch_one(x)", &[]);
    }

    #[test]
    fn comments_strings_and_characters_are_not_code() {
        check("// sqlx::query(\"x\").execute(&pool)\n/// `.fetch_one(` is an executor call", &[]);
        check("/* outer /* sqlx::query( */ .execute( */ let a = 1;", &[]);
        check("let s = \"sqlx::query(\\\"x\\\")\"; let t = r#\"a \" .fetch_all(\"#;", &[]);
        check("let b = br\"sqlx::raw_sql(\"; let c = '\"'; let d = '\\'';", &[]);
        check(
            "fn f<'a>(x: &'a str) -> char { 'q' }\n'outer: loop { sqlx::query(x) }",
            &[(2, "query: a sqlx statement")],
        );
    }

    #[test]
    fn blanking_keeps_lines_and_code() {
        let source = "a /* b\nc */ d \"e\nf\" g // h\ni";
        let code = code_only(source);
        assert_eq!(code.lines().count(), source.lines().count());
        assert_eq!(code.split_whitespace().collect::<Vec<_>>(), ["a", "d", "g", "i"]);
    }

    /// The scan over a package's files: a deliberate violation in a crate's `src/` fails it,
    /// the same statement in its `tests/` does not.
    #[test]
    fn a_statement_in_a_library_fails_the_scan_and_one_in_its_tests_does_not() {
        let root = std::env::temp_dir().join(format!("outbox-layer-scan-{}", std::process::id()));
        let write = |path: &str, text: &str| {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        let statement =
            "pub async fn f(pool: &PgPool) {\n    sqlx::query(\"SELECT 1\").execute(pool).await.unwrap();\n}\n";
        write("crates/outbox-lower/src/lib.rs", "//! Calls `sqlx::query(` nowhere.\npub mod inner;\n");
        write("crates/outbox-lower/src/inner/mod.rs", statement);
        write("crates/outbox-lower/tests/it/main.rs", statement);
        write("crates/outbox-pg/src/lib.rs", statement);
        let package = |name: &str| Package { name: name.into(), dir: root.join("crates").join(name) };
        let found = outside_pg(&root, &[package("outbox-lower"), package("outbox-pg")]).unwrap();
        let _ = std::fs::remove_dir_all(&root);
        let why = "(outbox-lower runs SQL outside outbox-pg: call an outbox-pg function)";
        let stale = STATEMENTS_ALLOWED.iter().map(|(path, change)| {
            format!("{path}: allowed to run SQL until it would {change}, but runs none: drop the entry")
        });
        let expect: Vec<String> = [
            format!("crates/outbox-lower/src/inner/mod.rs:2: query: a sqlx statement {why}"),
            format!("crates/outbox-lower/src/inner/mod.rs:2: .execute(: an executor call {why}"),
        ]
        .into_iter()
        .chain(stale)
        .collect();
        assert_eq!(found, expect);
    }
}
