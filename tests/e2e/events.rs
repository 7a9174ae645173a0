//! `outbox events watch | list | publish`: the command line as a client of a real server.

use std::time::{Duration, Instant};

use outbox_pg::testkit::TestDb;

use crate::support::{Process, issue_token, run, run_with_input, serve, text};

const WITHIN: Duration = Duration::from_secs(60);

/// Runs `outbox events …` against `url` with `token`; answers standard output, standard
/// error and whether it exited 0.
fn events(url: &str, token: &str, args: &[&str], input: &str) -> (String, String, bool) {
    let mut all = vec!["events"];
    all.extend_from_slice(args);
    let output = run_with_input(&all, &[("OUTBOX_URL", url), ("OUTBOX_TOKEN", token)], input, WITHIN);
    let (out, err) = text(&output);
    (out, err, output.status.success())
}

fn lines(out: &str) -> Vec<serde_json::Value> {
    out.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}"))).collect()
}

/// Runs `list --all` until it prints at least `count` events: under the xmin rule an event
/// becomes visible once every older transaction of the cluster has ended.
fn list_until(url: &str, token: &str, count: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + WITHIN;
    loop {
        let (out, err, ok) = events(url, token, &["list", "--all"], "");
        assert!(ok, "events list failed: {err}");
        let listed = lines(&out);
        if listed.len() >= count {
            return listed;
        }
        assert!(Instant::now() < deadline, "{count} events never became visible: {out}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_count_5_against_dev_demo_prints_5_lines_and_exits_0() {
    let db = TestDb::empty().await;
    let dir = std::env::temp_dir().join(format!("outbox-e2e-events-{}", std::process::id())).join("pg");
    let args = ["dev", "--demo", "--listen", "127.0.0.1:0", "--data-dir", dir.to_str().unwrap()];
    let mut dev = Process::spawn(&args, &[("DATABASE_URL", &db.url)]);
    let addr = dev.line_after("  outbox dev is ready: every role on http://", WITHIN).trim().to_owned();
    let token = dev.line_after("  token    ", Duration::from_secs(5));

    let (out, err, ok) = events(&format!("http://{addr}"), &token, &["watch", "--count", "5"], "");
    assert!(ok, "events watch --count 5 exits 0: {err}");
    let printed = lines(&out);
    assert_eq!(printed.len(), 5, "{out}");
    for event in &printed {
        assert_eq!(event["tenantId"], "acme", "the token's tenant: {event}");
        assert!(event["id"].as_str().unwrap().starts_with("evt_"), "{event}");
    }
    let positions: Vec<(u64, u64)> = printed.iter().map(|event| position(&event["sequence"])).collect();
    assert!(positions.windows(2).all(|pair| pair[0] < pair[1]), "in (txid, seq) order: {positions:?}");
    drop(dev);
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// A dotted position as numbers, to compare.
fn position(sequence: &serde_json::Value) -> (u64, u64) {
    let (txid, seq) = sequence.as_str().and_then(|s| s.split_once('.')).expect("a dotted sequence");
    (txid.parse().unwrap(), seq.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_payload_prints_escaped_on_one_line() {
    let db = TestDb::empty().await;
    let (_server, addr) = serve(&db.url, &[]);
    let url = format!("http://{addr}");
    let token = issue_token(&["--tenant", "acme", "--scopes", "events:read events:write"]);
    let hostile = "\u{1b}[2J\u{1b}]0;owned\u{7}\nforged line\r\n\u{9b}31m\u{202e}";
    let data = serde_json::json!({ "note": hostile }).to_string();
    let publish = ["publish", "--type", "node.joined", "--tenant", "acme", "--subject", "node/n1", "--data", &data];
    let (id, err, ok) = events(&url, &token, &publish, "");
    assert!(ok, "publish: {err}");
    assert!(id.trim().starts_with("evt_") && id.lines().count() == 1, "one id: {id}");

    let (out, err, ok) = events(&url, &token, &["watch", "--since", "0.0", "--count", "1"], "");
    assert!(ok, "watch: {err}");
    assert_eq!(out.matches('\n').count(), 1, "one line: {out:?}");
    assert!(!out.bytes().any(|b| b == 0x1b || b == b'\r' || b == 0x07), "no raw control byte: {out:?}");
    assert!(!out.contains(['\u{9b}', '\u{202e}']), "no raw C1 or bidi control: {out:?}");
    for escaped in [r"\u001b[2J", r"\u001b]0;owned\u0007", r"\nforged line\r\n", r"\u009b31m", r"\u202e"] {
        assert!(out.contains(escaped), "{escaped} in {out}");
    }
    let event: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(event["data"]["note"], hostile, "the escaped line is still the event's JSON");
    assert_eq!(event["id"], id.trim());

    let (table, err, ok) = events(&url, &token, &["list", "--format", "table"], "");
    assert!(ok, "list --format table: {err}");
    assert_eq!(table.lines().count(), 2, "a header and one row: {table}");
    assert!(!table.bytes().any(|b| b == 0x1b || b == b'\r'), "{table:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn publish_a_batch_from_stdin_then_list_it_page_by_page() {
    let db = TestDb::empty().await;
    let (_server, addr) = serve(&db.url, &[]);
    let url = format!("http://{addr}");
    let token = issue_token(&["--tenant", "acme", "--scopes", "events:read events:write"]);
    let batch: String = (0..5)
        .map(|n| {
            format!(
                "{{\"type\":\"node.joined\",\"tenantId\":\"acme\",\"subject\":\"node/n{n}\",\"data\":{{\"n\":{n}}}}}\n"
            )
        })
        .collect();
    let (out, err, ok) = events(&url, &token, &["publish", "--file", "-", "--batch-size", "2"], &batch);
    assert!(ok, "publish --file -: {err}");
    let ids: Vec<&str> = out.lines().collect();
    assert_eq!(ids.len(), 5, "{out}");

    let all = list_until(&url, &token, 5);
    let listed: Vec<&str> = all.iter().map(|event| event["id"].as_str().unwrap()).collect();
    assert_eq!(listed, ids, "every page, in publishing order");
    let (page, err, ok) = events(&url, &token, &["list", "--limit", "2", "--types", "node.*"], "");
    assert!(ok, "{err}");
    assert_eq!(lines(&page).len(), 2);
    let cursor = err.split("--cursor ").nth(1).expect("the next cursor on standard error").trim().to_owned();
    let (rest, err, ok) = events(&url, &token, &["list", "--cursor", &cursor, "--limit", "10"], "");
    assert!(ok && !err.contains("--cursor"), "the last page: {err}");
    assert_eq!(lines(&rest).len(), 3);

    let bad =
        "{\"type\":\"node.joined\",\"tenantId\":\"acme\",\"subject\":\"node/n1\",\"data\":{}}\n{\"type\":\"Bad\"}\n";
    let (out, err, ok) = events(&url, &token, &["publish", "--file", "-"], bad);
    assert!(!ok && out.is_empty(), "nothing published: {out}");
    assert!(err.contains("line 2"), "names the line: {err}");
}

#[test]
fn refusals_and_mistakes_exit_non_zero_with_a_message() {
    // Mistakes on the command line exit 2 before any request; a refusal is the next test.
    let output = run(&["events", "watch", "--url", "not a url"], &[]);
    assert_eq!(output.status.code(), Some(2), "{:?}", text(&output));
    assert!(text(&output).1.contains("--url"), "{:?}", text(&output));
    let output = run(&["events", "list", "--cursor", "12"], &[]);
    assert_eq!(output.status.code(), Some(2), "a bad cursor is a usage error");
    for command in ["watch", "list", "publish"] {
        let output = run(&["events", command, "--help"], &[]);
        let (out, _) = text(&output);
        assert!(output.status.success() && out.contains("Examples:\n  outbox events"), "{command}: {out}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_with_a_bad_token_exits_1_at_once() {
    let db = TestDb::empty().await;
    let (_server, addr) = serve(&db.url, &[]);
    let (out, err, ok) = events(&format!("http://{addr}"), "not-a-token", &["watch"], "");
    assert!(!ok && out.is_empty(), "{out}");
    assert!(err.contains("unauthenticated: "), "{err}");
}
