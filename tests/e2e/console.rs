//! The console (SPEC §8.3) in a real headless Chromium, against the real `outbox serve`: signing
//! in from `#token=`, the live list (pause, filter, hostile data), reconnecting across a
//! restart of the server, the history's pages, the sinks, webhook subscriptions and dead
//! letters. Each test ends with the browser's console free of errors and CSP violations.
//!
//! Each view's screenshot is taken on the way; with `OUTBOX_UPDATE_SCREENSHOTS=1` they are
//! written to `docs/console/` (what `docs/console.md` shows), otherwise to a scratch folder.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use outbox_core::NewEvent;
use outbox_e2e::browser::{Browser, LogEntry};
use outbox_e2e::client::{get, post};
use outbox_pg::testkit::TestDb;
use serde_json::{Value, json};

use crate::sinks::{ConfigFile, Receiver, publish};
use crate::support::{Process, SECRET, issue_token};

/// How long a condition the page should reach soon may take.
const SOON: Duration = Duration::from_secs(15);

/// A server on a fresh database, its configuration, and an administrator's token.
struct Setup {
    db: TestDb,
    config: ConfigFile,
    seal_key: String,
    server: Process,
    addr: SocketAddr,
    admin: String,
}

impl Setup {
    /// `outbox serve` with every role, a seal key, private webhook targets allowed, a short
    /// `retry:` and `extra` configuration.
    async fn start(extra: &str) -> Setup {
        let db = TestDb::new().await;
        let config = ConfigFile::new(&format!("allow_private_targets = true\n{extra}\n[watch]\nretry_ms = 300\n"));
        let seal_key = outbox_pg::internal::seal::SealKey::generate().unwrap();
        let (server, addr) = serve(&db, &config, &seal_key, "127.0.0.1:0");
        let admin = issue_token(&["--tenant", "acme", "--scopes", "events:read events:write webhooks:write admin"]);
        Setup { db, config, seal_key, server, addr, admin }
    }

    /// Publishes `events` through `POST /events`.
    async fn publish(&self, events: &[NewEvent]) {
        let reply = post(self.addr, "/events", Some(&self.admin), &json!({ "events": events })).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
    }

    /// Opens the console with the administrator's token in the address, as `outbox dev` prints it.
    async fn open(&self, browser: &Browser) {
        self.open_as(browser, &self.admin).await;
    }

    /// Opens the console with `token` in the address.
    async fn open_as(&self, browser: &Browser, token: &str) {
        let url = format!("http://{}/#token={token}", self.addr);
        browser.client.goto(&url).await.expect("opening the console");
        live(browser).await;
    }
}

fn serve(db: &TestDb, config: &ConfigFile, seal_key: &str, listen: &str) -> (Process, SocketAddr) {
    let args = ["serve", "--listen", listen, "--config", config.path()];
    let env = [("DATABASE_URL", db.url.as_str()), ("OUTBOX_JWT_SECRET", SECRET), ("OUTBOX_WEBHOOK_SEAL_KEY", seal_key)];
    let mut process = Process::spawn(&args, &env);
    let rest = process.line_after("outbox serve: listening on http://", Duration::from_secs(60));
    (process, rest.split_whitespace().next().unwrap().parse().expect("a printed address"))
}

fn event(kind: &str, subject: &str, data: Value) -> NewEvent {
    NewEvent::new(kind, "acme", subject, data)
}

/// Waits for the badge to say "live": the stream is open and has said where it starts.
async fn live(browser: &Browser) {
    let script = "return document.getElementById('badge').textContent === 'live';";
    browser.until("the badge to say live", SOON, script).await;
}

/// The subjects of the live list, top (newest) first.
async fn live_subjects(browser: &Browser) -> Vec<String> {
    let script = "return Array.from(document.querySelectorAll('#live-list .subject')).map(e => e.textContent);";
    strings(browser.run(script).await)
}

async fn history_subjects(browser: &Browser) -> Vec<String> {
    let script = "return Array.from(document.querySelectorAll('#history-list .subject')).map(e => e.textContent);";
    strings(browser.run(script).await)
}

fn strings(value: Value) -> Vec<String> {
    value.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
}

/// Waits until the live list shows `subject`.
async fn until_listed(browser: &Browser, subject: &str) {
    let script = format!(
        "return Array.from(document.querySelectorAll('#live-list .subject')).some(e => e.textContent === {subject:?});"
    );
    browser.until(&format!("{subject} in the live list"), SOON, &script).await;
}

/// Asserts that the browser's console holds nothing but what `expected` accepts.
async fn no_console_errors(browser: &Browser, expected: impl Fn(&LogEntry) -> bool) {
    let unexpected: Vec<LogEntry> =
        browser.log().await.into_iter().filter(|entry| entry.level == "SEVERE" && !expected(entry)).collect();
    assert!(unexpected.is_empty(), "errors in the browser's console: {unexpected:#?}");
}

/// Keeps a screenshot of the page as `docs/console/<name>.png` (with
/// `OUTBOX_UPDATE_SCREENSHOTS=1`) or in a scratch folder.
async fn screenshot(browser: &Browser, name: &str) {
    let png = browser.screenshot().await;
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let dir = if std::env::var_os("OUTBOX_UPDATE_SCREENSHOTS").is_some_and(|v| v == "1") {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("docs").join("console")
    } else {
        std::env::temp_dir().join("outbox-console-screenshots")
    };
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

async fn show_view(browser: &Browser, view: &str) {
    browser.click(&format!("a[data-view='{view}']")).await;
    let script = format!("return !document.getElementById('{view}-view').hidden;");
    browser.until(&format!("the {view} view"), SOON, &script).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn signing_in_watching_live_pausing_filtering_and_hostile_data() {
    let setup = Setup::start("").await;
    let browser = Browser::start().await;
    setup.open(&browser).await;

    let address = browser.client.current_url().await.unwrap().to_string();
    assert!(!address.contains("token") && !address.contains(&setup.admin), "the token left the address: {address}");
    let stored = browser.run("return sessionStorage.getItem('outbox.console.token');").await;
    assert_eq!(stored, json!(setup.admin), "the token is kept in session storage");
    assert!(browser.text("identity").await.contains("tenant acme, administrator"));

    // An event published after opening appears.
    setup.publish(&[event("node.joined", "node/first", json!({ "n": 1 }))]).await;
    until_listed(&browser, "node/first").await;

    // Hostile data shows as text and runs nothing.
    let hostile = json!({
        "html": "<img src=x onerror=\"window.__pwned = 1\">",
        "script": "</script><script>window.__pwned = 2</script>",
    });
    setup.publish(&[event("node.status", "node/hostile", hostile)]).await;
    until_listed(&browser, "node/hostile").await;
    browser.click("#live-list button[data-sequence]").await;
    browser.until_text("live-detail-json", "node/hostile", SOON).await;
    let detail = browser.text("live-detail-json").await;
    assert!(detail.contains(r#"<img src=x onerror=\"window.__pwned = 1\">"#), "{detail}");
    assert!(detail.contains("</script><script>window.__pwned = 2</script>"), "{detail}");
    let preview = browser.run("return document.querySelector('#live-list .preview').textContent;").await;
    assert!(preview.as_str().unwrap().contains("<img src=x onerror="), "{preview}");
    assert_eq!(browser.run("return typeof window.__pwned;").await, json!("undefined"), "the payload ran");
    assert_eq!(browser.run("return document.querySelectorAll('img, main script').length;").await, json!(0));
    screenshot(&browser, "live").await;

    // Pause keeps receiving and counts; resume shows what came.
    browser.click("#live-pause").await;
    browser.until_text("live-new", "0 new", SOON).await;
    let three: Vec<NewEvent> = (1..=3).map(|n| event("node.joined", &format!("node/paused-{n}"), json!({}))).collect();
    setup.publish(&three).await;
    browser.until_text("live-new", "3 new", SOON).await;
    assert!(!live_subjects(&browser).await.iter().any(|s| s.starts_with("node/paused-")), "shown while paused");
    assert_eq!(browser.text("live-pause").await, "Resume");
    browser.press_enter("#live-pause").await; // the keyboard works as the mouse does
    until_listed(&browser, "node/paused-3").await;
    let subjects = live_subjects(&browser).await;
    assert_eq!(subjects[..3], ["node/paused-3", "node/paused-2", "node/paused-1"], "newest first: {subjects:?}");
    assert_eq!(browser.text("live-new").await, "");

    // A pattern filter: only matching events from then on.
    browser.fill("#live-types", "reservation.*").await;
    browser.click("#live-filter button[type=submit]").await;
    live(&browser).await;
    let mixed = [
        event("node.joined", "node/filtered-out", json!({})),
        event("reservation.active", "reservation/kept", json!({})),
    ];
    setup.publish(&mixed).await;
    until_listed(&browser, "reservation/kept").await;
    assert_eq!(live_subjects(&browser).await, ["reservation/kept"], "the list restarts with the filter");

    // An administrator switches to another tenant's stream.
    browser.fill("#live-types", "*").await;
    browser.fill("#tenant-input", "globex").await;
    browser.click("#tenant-form button[type=submit]").await;
    live(&browser).await;
    let other = [
        event("node.joined", "node/acme-only", json!({})),
        NewEvent::new("node.joined", "globex", "node/globex-1", json!({})),
    ];
    setup.publish(&other).await;
    until_listed(&browser, "node/globex-1").await;
    assert_eq!(live_subjects(&browser).await, ["node/globex-1"], "only the chosen tenant's events");
    no_console_errors(&browser, |_| false).await;

    // Signing out forgets the token; a refused token says so; a pasted one signs in.
    browser.click("#sign-out").await;
    browser.until("the sign-in form", SOON, "return !document.getElementById('sign-in-view').hidden;").await;
    assert_eq!(browser.run("return sessionStorage.length;").await, json!(0));
    assert_eq!(browser.text("badge").await, "offline");
    screenshot(&browser, "sign-in").await;
    browser.fill("#token-input", "not-a-token").await;
    browser.click("#sign-in-form button[type=submit]").await;
    browser.until_text("sign-in-message", "The server refused this token", SOON).await;
    no_console_errors(&browser, |entry| entry.message.contains("/whoami") && entry.message.contains("401")).await;
    browser.fill("#token-input", &setup.admin).await;
    browser.click("#sign-in-form button[type=submit]").await;
    live(&browser).await;
    no_console_errors(&browser, |_| false).await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_live_list_continues_across_a_restart_with_no_gap_and_no_duplicate() {
    let mut setup = Setup::start("").await;
    let browser = Browser::start().await;
    setup.open(&browser).await;
    setup.publish(&[event("node.joined", "node/before", json!({}))]).await;
    until_listed(&browser, "node/before").await;

    let status = setup.server.signal_and_wait("TERM", Duration::from_secs(30));
    assert!(status.success(), "{status}");
    browser.until_text("badge", "reconnecting", SOON).await;
    // Published while no server runs: the page must get them once it is back.
    let during: Vec<NewEvent> = (1..=5).map(|n| event("node.joined", &format!("node/during-{n}"), json!({}))).collect();
    publish(&setup.db, &during).await;

    let (server, addr) = serve(&setup.db, &setup.config, &setup.seal_key, &setup.addr.to_string());
    assert_eq!(addr, setup.addr);
    setup.server = server;
    // The page's next try comes after a backoff that doubled while the server was away.
    let script = "return document.getElementById('badge').textContent === 'live';";
    browser.until("the badge to say live again", Duration::from_secs(60), script).await;
    let after: Vec<NewEvent> = (1..=5).map(|n| event("node.joined", &format!("node/after-{n}"), json!({}))).collect();
    setup.publish(&after).await;
    until_listed(&browser, "node/after-5").await;

    let mut expected: Vec<String> = vec!["node/before".into()];
    expected.extend((1..=5).map(|n| format!("node/during-{n}")));
    expected.extend((1..=5).map(|n| format!("node/after-{n}")));
    expected.reverse();
    assert_eq!(live_subjects(&browser).await, expected, "every event once, in order, newest first");
    // While the server was away the page's requests were refused, as expected.
    no_console_errors(&browser, |entry| entry.message.contains("ERR_CONNECTION_REFUSED")).await;
    browser.close().await;
}

/// `node/hNN` for each `n` of `numbers`, in that order.
fn history_names(numbers: impl IntoIterator<Item = usize>) -> Vec<String> {
    numbers.into_iter().map(|n| format!("node/h{n:02}")).collect()
}

async fn per_page(browser: &Browser, limit: &str) {
    let select = browser.client.find(fantoccini::Locator::Css("#history-limit")).await.unwrap();
    select.select_by_value(limit).await.unwrap();
}

async fn order(browser: &Browser, order: &str) {
    let select = browser.client.find(fantoccini::Locator::Css("#history-order")).await.unwrap();
    select.select_by_value(order).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_history_pages_newest_first_and_from_a_position_and_filters() {
    let setup = Setup::start("").await;
    let events: Vec<NewEvent> = (0..45)
        .map(|n| {
            let kind = if n % 3 == 0 { "reservation.active" } else { "node.joined" };
            event(kind, &format!("node/h{n:02}"), json!({ "n": n }))
        })
        .collect();
    publish(&setup.db, &events).await;
    let browser = Browser::start().await;
    setup.open(&browser).await;
    show_view(&browser, "history").await;

    // Newest first, the default: the newest event at the top, Next goes to older pages.
    browser.until_text("history-page", "Page 1: 45 events, the oldest event", SOON).await;
    assert_eq!(history_subjects(&browser).await, history_names((0..45).rev()));
    per_page(&browser, "20").await;
    browser.click("#history-form button[type=submit]").await;
    browser.until_text("history-page", "Page 1: 20 events, older events follow", SOON).await;
    assert_eq!(history_subjects(&browser).await, history_names((25..45).rev()), "the newest 20, newest first");
    browser.click("#history-list li:nth-child(3) button").await;
    browser.until_text("history-detail-json", "\"n\": 42", SOON).await;
    screenshot(&browser, "history").await;
    browser.click("#history-next").await;
    browser.until_text("history-page", "Page 2: 20 events, older events follow", SOON).await;
    assert_eq!(history_subjects(&browser).await, history_names((5..25).rev()));
    browser.click("#history-next").await;
    browser.until_text("history-page", "Page 3: 5 events, the oldest event", SOON).await;
    assert_eq!(history_subjects(&browser).await, history_names((0..5).rev()));
    assert_eq!(browser.run("return document.getElementById('history-next').disabled;").await, json!(true));
    browser.click("#history-prev").await;
    browser.until_text("history-page", "Page 2: 20 events", SOON).await;
    assert_eq!(history_subjects(&browser).await, history_names((5..25).rev()));

    // From a position: oldest first, from the start.
    order(&browser, "asc").await;
    assert_eq!(browser.text("history-cursor-label").await, "After position");
    browser.click("#history-form button[type=submit]").await;
    browser.until_text("history-page", "Page 1: 20 events, more follow", SOON).await;
    assert_eq!(history_subjects(&browser).await, history_names(0..20));
    browser.click("#history-next").await;
    browser.until_text("history-page", "Page 2: 20 events", SOON).await;
    assert_eq!(history_subjects(&browser).await, history_names(20..40));
    browser.click("#history-next").await;
    browser.until_text("history-page", "Page 3: 5 events, the end of the history", SOON).await;

    // Filters, by types and by subject.
    per_page(&browser, "50").await;
    browser.fill("#history-types", "reservation.*").await;
    browser.click("#history-form button[type=submit]").await;
    browser.until_text("history-page", "Page 1: 15 events, the end", SOON).await;
    assert_eq!(history_subjects(&browser).await, history_names((0..45).step_by(3)));
    browser.fill("#history-types", "").await;
    browser.fill("#history-subject", "node/h07").await;
    browser.click("#history-form button[type=submit]").await;
    browser.until_text("history-page", "Page 1: 1 event, the end", SOON).await;
    assert_eq!(history_subjects(&browser).await, ["node/h07"]);
    browser.click("#history-list button").await;
    browser.until_text("history-detail-json", "\"n\": 7", SOON).await;
    no_console_errors(&browser, |_| false).await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_signs_in_and_browses_without_a_request_that_fails() {
    let setup = Setup::start("").await;
    let tenant = issue_token(&["--tenant", "acme", "--scopes", "events:read webhooks:write"]);
    let browser = Browser::start_recording_requests().await;
    setup.open_as(&browser, &tenant).await;
    let identity = browser.text("identity").await;
    assert!(identity.contains("tenant acme") && !identity.contains("administrator"), "{identity}");
    // What the grant does not allow is not offered: the sinks and the tenant selector.
    let offered = "return [document.getElementById('tenant-form').hidden, \
                   document.querySelector(\"a[data-view='sinks']\").parentElement.hidden];";
    assert_eq!(browser.run(offered).await, json!([true, true]));

    setup.publish(&[event("node.joined", "node/tenant", json!({}))]).await;
    until_listed(&browser, "node/tenant").await;
    show_view(&browser, "history").await;
    browser.until_text("history-page", "Page 1: 1 event", SOON).await;
    show_view(&browser, "webhooks").await;
    browser.until_text("webhooks-refreshed", "0 subscriptions, refreshed", SOON).await;
    show_view(&browser, "dead-letters").await;
    browser.until_text("dl-summary", "There is no sink or subscription", SOON).await;

    let requests = browser.requests().await;
    let asked = |path: &str| requests.iter().any(|r| r.url.contains(&format!("{}{path}", setup.addr)));
    assert!(asked("/whoami") && asked("/watch") && asked("/events") && asked("/webhooks"), "{requests:#?}");
    assert!(!asked("/sinks"), "a tenant's page never asks for the sinks: {requests:#?}");
    let failed: Vec<_> = requests.iter().filter(|r| r.failed()).collect();
    assert!(failed.is_empty(), "requests that failed: {failed:#?}");
    no_console_errors(&browser, |_| false).await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sinks_webhooks_and_dead_letters_are_repaired_from_the_page() {
    let receiver = Receiver::start().await;
    let sink = format!(
        "[[sinks]]\nid = \"hook\"\nkind = \"webhook\"\nurl = \"http://{}/hook\"\n\
         secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\nbatch = 10\nmax_attempts = 2\n",
        receiver.addr
    );
    let setup = Setup::start(&sink).await;
    // Poison events apart: two in a row would look like the receiver being down.
    let mut batch: Vec<NewEvent> =
        (0..7).map(|n| event("node.joined", &format!("node/d{n}"), json!({ "n": n }))).collect();
    for n in [1, 3, 5] {
        batch[n].data = json!({ "poison": true, "n": n });
    }
    setup.publish(&batch).await;
    let browser = Browser::start_recording_requests().await;
    setup.open(&browser).await;

    // The sink's state, with its three dead letters once the poison events were refused.
    show_view(&browser, "sinks").await;
    browser.until_text("sinks-body", "3 dead letters", Duration::from_secs(60)).await;
    let row = browser.text("sinks-body").await;
    let holder = format!(":{}:", setup.server.child.id());
    assert!(row.contains("hook") && row.contains(&holder), "state and lease holder: {row}");
    screenshot(&browser, "sinks").await;

    // Dead letters: detail, replay one (it leaves the list), replay all with the count asked.
    receiver.refusing.store(false, Ordering::SeqCst);
    browser.click("#sinks-body button").await;
    browser.until_text("dl-summary", "3 pending dead letters of sink hook", SOON).await;
    browser.click("#dl-body tr:first-child button[data-key^='details']").await;
    browser.until_text("dl-detail-json", "\"poison\": true", SOON).await;
    screenshot(&browser, "dead-letters").await;
    let first = browser.run("return document.querySelector('#dl-body tr').dataset.letter;").await;
    let first = first.as_str().unwrap().to_owned();
    browser.click("#dl-body tr:first-child button[data-key^='replay']").await;
    browser.until_text("dl-summary", "2 pending dead letters", SOON).await;
    let rows =
        browser.run("return Array.from(document.querySelectorAll('#dl-body tr')).map(r => r.dataset.letter);").await;
    assert!(!strings(rows).contains(&first), "the replayed letter left the list");
    // Replay all: the count asked, then one request to the bulk route replays them all.
    browser.requests().await;
    browser.click("#dl-replay-all").await;
    browser.until_text("confirm-message", "Replay all 2 dead letters of sink hook", SOON).await;
    browser.click("#confirm-yes").await;
    browser.until_text("status", "Replayed 2 of 2 dead letters", SOON).await;
    browser.until_text("dl-summary", "0 pending dead letters", SOON).await;
    let replays: Vec<String> = browser
        .requests()
        .await
        .into_iter()
        .filter(|r| r.method == "POST" && r.url.contains("/replay"))
        .map(|r| format!("{} {}", r.url, r.status.unwrap_or_default()))
        .collect();
    assert_eq!(replays, [format!("http://{}/sinks/hook/dead-letters/replay 200", setup.addr)], "one bulk request");
    let left = get(setup.addr, "/sinks/hook/dead-letters", Some(&setup.admin)).await;
    assert_eq!(left.json()["items"], json!([]), "the server has no pending letter left: {}", left.body);
    let poison_accepted = receiver.accepted.lock().iter().filter(|e| e.data.value()["poison"] == json!(true)).count();
    assert_eq!(poison_accepted, 3, "the receiver got the three replayed events");

    // A webhook subscription: created with its secret shown once, pinged, disabled.
    show_view(&browser, "webhooks").await;
    browser.fill("#webhook-url", &format!("http://{}/tenant-hook", receiver.addr)).await;
    browser.fill("#webhook-types", "node.*").await;
    browser.fill("#webhook-description", "billing <b>receiver</b>").await;
    browser.click("#webhook-form button[type=submit]").await;
    browser.until_text("secret-value", "whsec_", SOON).await;
    let secret = browser.text("secret-value").await;
    browser.until_text("webhooks-body", "billing <b>receiver</b>", SOON).await;
    screenshot(&browser, "webhooks").await;
    browser.click("#secret-done").await;
    assert_eq!(browser.run("return document.getElementById('secret-panel').hidden;").await, json!(true));
    browser.until_text("webhooks-refreshed", "1 subscription, refreshed", SOON).await;
    let page = browser.run("return document.body.textContent;").await;
    assert!(!page.as_str().unwrap().contains(&secret), "the secret is shown once only");

    browser.click("#webhooks-body button[data-key^='ping']").await;
    browser.until_text("status", "delivered, HTTP 200", SOON).await;
    browser.click("#webhooks-body button[data-key^='toggle']").await;
    browser.until_text("webhooks-body", "disabled by hand", SOON).await;
    browser.click("#webhooks-body button[data-key^='attempts']").await;
    browser.until_text("attempts-title", "1 attempt", SOON).await;
    no_console_errors(&browser, |_| false).await;
    browser.close().await;
}
