//! `outbox events watch | list | publish`: the HTTP API from the command line (SPEC §8.1).
//!
//! These commands are clients: they talk to any Outbox server over HTTP through
//! `outbox-client`, never to the database. Events print as one terminal-safe JSON line
//! each ([`output`]), so the output pipes into `jq` and a hostile payload cannot take over
//! the terminal. A closed standard output (`| head`) ends a command quietly with exit 0.

mod list;
pub(crate) mod output;
mod publish;
mod watch;

use anyhow::Context;
use http::{HeaderName, HeaderValue};
use outbox_client::Client;

use crate::cli::{DEFAULT_URL, EventsCommand, ServerArgs};
use crate::config::ConfigError;

pub use output::{json_line, terminal_safe};

/// Runs the command.
pub async fn run(command: EventsCommand) -> anyhow::Result<()> {
    match command {
        EventsCommand::Watch(args) => watch::run(args).await,
        EventsCommand::List(args) => list::run(args).await,
        EventsCommand::Publish(args) => publish::run(args).await,
    }
}

/// A client of `--url` with `--token`, `--header`s and `--path-prefix`. What cannot be
/// used is a command-line mistake (exit code 2).
pub(crate) fn client(args: &ServerArgs) -> anyhow::Result<Client> {
    let bad = |flag: &str, error: &dyn std::fmt::Display| ConfigError(format!("{flag}: {error}"));
    let mut client = Client::new(url(args)).map_err(|e| bad("--url", &e))?;
    if let Some(token) = args.token.as_deref().filter(|t| !t.is_empty()) {
        client = client.with_token(token).map_err(|e| bad("--token (or OUTBOX_TOKEN)", &e))?;
    }
    if let Some(prefix) = &args.path_prefix {
        client = client.with_path_prefix(prefix).map_err(|e| bad("--path-prefix", &e))?;
    }
    for header in &args.headers {
        let (name, value) = parse_header(header).map_err(|e| bad("--header", &e))?;
        client = client.with_header(name, value);
    }
    Ok(client)
}

/// `--url`; an empty `OUTBOX_URL` counts as unset, as every other variable of the binary does.
pub(crate) fn url(args: &ServerArgs) -> &str {
    if args.url.trim().is_empty() { DEFAULT_URL } else { &args.url }
}

fn parse_header(text: &str) -> anyhow::Result<(HeaderName, HeaderValue)> {
    let (name, value) = text.split_once(':').with_context(|| format!("{text:?} is not \"Name: value\""))?;
    let name =
        HeaderName::from_bytes(name.trim().as_bytes()).with_context(|| format!("{name:?} is not a header name"))?;
    let mut value =
        HeaderValue::from_str(value.trim()).with_context(|| format!("the value of {name} is not a header value"))?;
    value.set_sensitive(true);
    Ok((name, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_name_colon_value() {
        let (name, value) = parse_header("X-Tenant-Route:  eu-1 ").unwrap();
        assert_eq!((name.as_str(), value.to_str().unwrap()), ("x-tenant-route", "eu-1"));
        for bad in ["no colon", "bad name: x", "X-A: line\nbreak"] {
            assert!(parse_header(bad).is_err(), "{bad:?}");
        }
    }
}
