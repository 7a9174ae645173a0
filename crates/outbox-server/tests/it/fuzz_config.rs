//! Fuzzing the configuration file (SPEC §8.1) with `fuzz/corpus/config`: `Config::parse`
//! on any text, then `Config::validate` on what parses, as `outbox serve` reads a file.
//!
//! Nothing panics. A file that does not parse is refused with a message, and the message
//! shows the line whenever the parser knows where the error is. A file that parses but
//! breaks a rule is refused naming the key (`auth.jwt_secret`, `sinks[a].url`, …). The same
//! text given as a role list (`OUTBOX_ROLES`, `--roles`) is refused naming its source, or
//! accepted as roles that print and parse back to themselves.

use outbox_server::config::{Config, Roles};
use proptest::prelude::*;

use crate::mutate;

const TARGET: &str = "config";

/// Pieces of configuration files, for the mutations.
const DICTIONARY: &[&str] = &[
    "\n",
    "[auth]\n",
    "[watch]\n",
    "[retention]\n",
    "[webhooks]\n",
    "[catalog]\n",
    "[[catalog.families]]\n",
    "[[sinks]]\n",
    "[[auth.api_keys]]\n",
    "listen = ",
    "roles = ",
    "id = ",
    "kind = ",
    "type = ",
    "batch = ",
    "\"jsonl\"",
    "\"webhook\"",
    "\"127.0.0.1:8080\"",
    "[\"http\", \"sinks\"]",
    "\"\"\"",
    "'''",
    "0",
    "-1",
    "1.5",
    "true",
    "{ }",
    "[ ]",
    "1979-05-27T07:32:00Z",
    "nan",
    "inf",
    "0x10",
    "1_000",
];

/// Where a validation refusal may start: a key of the file (or its variable).
const KEYS: &[&str] = &[
    "database_url",
    "listen",
    "roles",
    "auth.",
    "watch.",
    "retention.",
    "doctor.",
    "metrics.",
    "catalog.",
    "webhooks.",
    "sinks[",
    "allow_private_targets",
];

fn check_file(text: &str) -> Result<(), String> {
    let config = match Config::parse(text) {
        Ok(config) => config,
        Err(error) => {
            let message = error.to_string();
            if message.trim().is_empty() || (error.span().is_some() && !message.contains("line ")) {
                return Err(format!("{text:?}: the refusal {message:?} does not say where"));
            }
            return Ok(());
        }
    };
    match config.validate() {
        Ok(()) => Ok(()),
        Err(error) => {
            let message = error.to_string();
            let key = message.strip_prefix("invalid configuration: ").unwrap_or(&message);
            if !KEYS.iter().any(|name| key.starts_with(name)) {
                return Err(format!("{text:?}: the refusal {message:?} does not name the key"));
            }
            Ok(())
        }
    }
}

fn check_roles(text: &str) -> Result<(), String> {
    match Roles::parse(text, "OUTBOX_ROLES") {
        Ok(roles) => match Roles::parse(&roles.to_string(), "OUTBOX_ROLES") {
            Ok(again) if again == roles => Ok(()),
            again => Err(format!("{text:?} gave {roles}, which parses back as {again:?}")),
        },
        Err(error) if error.to_string().starts_with("OUTBOX_ROLES: ") => Ok(()),
        Err(error) => Err(format!("{text:?}: the refusal {error:?} does not name OUTBOX_ROLES")),
    }
}

fn check(bytes: &[u8]) -> Result<(), String> {
    let text = mutate::text(bytes);
    check_file(&text)?;
    check_roles(&text)
}

#[test]
fn fuzz_config_corpus() {
    mutate::check_corpus(TARGET, check);
}

proptest! {
    #![proptest_config(mutate::config(mutate::DEFAULT_CASES * 5))]

    #[test]
    fn fuzz_config_mutations(bytes in mutate::input(&mutate::corpus(TARGET), DICTIONARY)) {
        check(&bytes).map_err(TestCaseError::fail)?;
    }
}
