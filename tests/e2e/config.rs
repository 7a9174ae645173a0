//! Bad configuration stops start-up, naming the key.

use crate::support::{run, text};

fn write(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("outbox-e2e-{name}-{}.toml", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[track_caller]
fn refused(args: &[&str], env: &[(&str, &str)], fragment: &str) {
    let output = run(args, env);
    let (out, err) = text(&output);
    assert_eq!(output.status.code(), Some(2), "exit code 2 for bad configuration: {out}{err}");
    assert!(err.contains(fragment), "{err:?} lacks {fragment:?}");
}

#[test]
fn an_unknown_key_stops_serve_naming_it() {
    let path = write("unknown-key", "database_url = \"postgres://x@127.0.0.1:1/x\"\n[watch]\nheartbeat_msec = 100\n");
    let path = path.to_str().unwrap();
    refused(&["serve", "--config", path], &[], "heartbeat_msec");
    refused(&["serve"], &[("OUTBOX_CONFIG", path)], "heartbeat_msec");
}

#[test]
fn bad_values_name_their_key_variable_or_flag() {
    let path = write("bad-values", "roles = [\"http\", \"web\"]\n");
    refused(&["serve", "--config", path.to_str().unwrap()], &[], "web");
    refused(&["serve"], &[("OUTBOX_LISTEN", "nowhere")], "OUTBOX_LISTEN");
    refused(&["serve", "--roles", "http,cron"], &[], "--roles");
    refused(&["serve"], &[], "DATABASE_URL");
    refused(&["serve", "--config", "/nonexistent/outbox.toml"], &[], "/nonexistent/outbox.toml");
}

#[test]
fn an_out_of_range_option_stops_serve_naming_it() {
    let path = write("out-of-range", "database_url = \"postgres://x@127.0.0.1:1/x\"\n[watch]\nbatch = 5000\n");
    refused(&["serve", "--config", path.to_str().unwrap()], &[], "watch.batch must be 1 to 1000 (got 5000)");
    let path = write("retention-zero", "database_url = \"postgres://x@127.0.0.1:1/x\"\n[retention]\nmax_rounds = 0\n");
    refused(&["serve", "--config", path.to_str().unwrap()], &[], "retention.max_rounds");
}

#[test]
fn a_value_parsed_while_loading_stops_serve_naming_its_key() {
    let url = "database_url = \"postgres://x@127.0.0.1:1/x\"\n";
    let seal_key = write("bad-seal-key", &format!("{url}[webhooks]\nseal_key = \"c2hvcnQ=\"\n"));
    refused(
        &["serve", "--config", seal_key.to_str().unwrap()],
        &[],
        "webhooks.seal_key: a seal key is the base64 of 32",
    );
    let cidrs = write("bad-cidrs", &format!("{url}[webhooks]\nallowed_cidrs = [\"10.0.0.0/8\", \"10.20.0.1/16\"]\n"));
    refused(&["serve", "--config", cidrs.to_str().unwrap()], &[], "webhooks.allowed_cidrs[1]");
    let catalog = write(
        "bad-catalog",
        &format!(
            "{url}[[catalog.families]]\ntype = \"Order.*\"\nsubject = \"order/{{id}}\"\nmodule = \"shop\"\ndescription = \"Orders\"\n"
        ),
    );
    refused(&["serve", "--config", catalog.to_str().unwrap()], &[], "catalog.families[0].type");
    let doctor = write("bad-doctor", &format!("{url}[doctor]\nlong_transaction = 5\n"));
    refused(&["doctor", "--config", doctor.to_str().unwrap()], &[], "long_transaction");
    refused(
        &["serve", "--config", seal_key.to_str().unwrap()],
        &[("OUTBOX_WEBHOOK_SEAL_KEY", "nope")],
        "webhooks.seal_key",
    );
    let good = write("env-seal-key", url);
    refused(
        &["serve", "--config", good.to_str().unwrap()],
        &[("OUTBOX_WEBHOOK_SEAL_KEY", "nope")],
        "OUTBOX_WEBHOOK_SEAL_KEY",
    );
}
