//! The browser side of `outbox-bench console`, in a process of its own (`measure-console`,
//! started by `console.rs`, which starts the server and brings up Chromium): opens the console of the `outbox serve` at `OUTBOX_URL`
//! with the token `OUTBOX_TOKEN` in a headless Chromium, reads the page's long tasks during
//! 10 idle seconds, then while 1,000 events a second are published for 10 s (batches of 100
//! every 100 ms through `POST /events`), and prints both side by side with the target.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use outbox_e2e::browser::Browser;
use outbox_e2e::client::post;
use serde_json::json;

/// The rate and how long it lasts.
const PER_SECOND: usize = 1000;
const SECONDS: u64 = 10;
const BATCH: usize = 100;
/// The longest long task the page may have (the target).
const TARGET_MS: f64 = 200.0;

/// Starts collecting the page's long tasks afresh.
const OBSERVE: &str = "
    window.__longTasks = [];
    if (!window.__observer) {
        window.__observer = new PerformanceObserver((list) => {
            for (const entry of list.getEntries()) window.__longTasks.push(entry.duration);
        });
        window.__observer.observe({ type: 'longtask' });
    }
    return true;";

/// The long tasks since [`OBSERVE`], in milliseconds.
const COLLECT: &str = "return window.__longTasks.slice();";

/// The measurement, in the process `outbox-bench console` starts (`measure-console`).
pub(crate) async fn run() {
    let url = std::env::var("OUTBOX_URL").expect("OUTBOX_URL: the server's address (run cargo xtask bench console)");
    let token = std::env::var("OUTBOX_TOKEN").expect("OUTBOX_TOKEN: a token with events:read events:write");
    let addr: SocketAddr = url.trim_start_matches("http://").parse().expect("OUTBOX_URL is http://<ip>:<port>");
    let browser = Browser::start().await;
    browser.client.goto(&format!("{url}/#token={token}")).await.expect("opening the console");
    browser
        .until(
            "the badge to say live",
            Duration::from_secs(30),
            "return document.getElementById('badge').textContent === 'live';",
        )
        .await;

    browser.run(OBSERVE).await;
    tokio::time::sleep(Duration::from_secs(SECONDS)).await;
    let idle = tasks(&browser).await;

    browser.run(OBSERVE).await;
    let started = Instant::now();
    publish(addr, &token).await;
    let published = PER_SECOND * SECONDS as usize;
    let shown = format!("{} events received", thousands(published));
    let script = format!("return document.getElementById('live-count').textContent.startsWith({shown:?});");
    browser.until("every event to reach the page", Duration::from_secs(60), &script).await;
    let took = started.elapsed();
    let busy = tasks(&browser).await;
    browser.close().await;

    println!(
        "bench console: the console in headless Chromium (outbox serve, release, role http), \
         {PER_SECOND} events/s for {SECONDS} s on its live stream, long tasks from the performance timeline"
    );
    println!("  idle {SECONDS} s                    {}", describe(&idle));
    println!("  {PER_SECOND} events/s for {SECONDS} s     {}", describe(&busy));
    println!("  all {} events on the page {:.1} s after publishing began", thousands(published), took.as_secs_f64());
    let longest = longest(&busy);
    let verdict = if longest <= TARGET_MS { "meets" } else { "MISSES" };
    println!(
        "  longest long task under load {longest:.0} ms: ratio to the target {:.2} ({verdict} target <= {TARGET_MS:.0} ms)",
        longest / TARGET_MS
    );
}

/// Publishes `PER_SECOND` events a second for `SECONDS`, in batches every 100 ms.
async fn publish(addr: SocketAddr, token: &str) {
    let batches = PER_SECOND * SECONDS as usize / BATCH;
    let mut tick = tokio::time::interval(Duration::from_secs(1) * BATCH as u32 / PER_SECOND as u32);
    for batch in 0..batches {
        tick.tick().await;
        let events: Vec<_> = (0..BATCH)
            .map(|i| {
                let n = batch * BATCH + i;
                json!({"type": "node.status", "tenantId": "bench", "subject": format!("node/n{}", n % 500),
                       "data": {"n": n, "gpus": [{"id": 0, "util": 0.5}], "note": "a status report of a usual size"}})
            })
            .collect();
        let reply = post(addr, "/events", Some(token), &json!({ "events": events })).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
    }
}

async fn tasks(browser: &Browser) -> Vec<f64> {
    let value = browser.run(COLLECT).await;
    value.as_array().map(|all| all.iter().filter_map(serde_json::Value::as_f64).collect()).unwrap_or_default()
}

fn longest(tasks: &[f64]) -> f64 {
    tasks.iter().copied().fold(0.0, f64::max)
}

fn describe(tasks: &[f64]) -> String {
    let total = tasks.iter().sum::<f64>() + 0.0; // an empty sum is -0.0
    format!("{} long tasks, longest {:.0} ms, {:.0} ms in all", tasks.len(), longest(tasks), total)
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}
