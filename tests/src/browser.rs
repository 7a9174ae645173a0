//! A real headless Chromium driven over WebDriver (`chromedriver` and the `fantoccini`
//! client), for the console's tests and `cargo xtask bench console`.
//!
//! [`Browser::start`] finds Debian's `chromium` and `chromium-driver` (or the binaries named
//! by `CHROME` and `CHROMEDRIVER`), starts `chromedriver` on a free loopback port and opens a
//! session in a fresh profile with the flags Chromium needs on a machine without a display
//! or a sandbox. When either binary is missing it panics naming the packages to install
//! (`cargo xtask test` installs them): a browser test never passes without a browser.
//! Dropping it ends the session's processes and removes the profile.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// What the tests need installed, and how.
const INSTALL: &str = "install the Debian packages `chromium` and `chromium-driver` \
                       (`apt-get install chromium chromium-driver`; `cargo xtask test` does it when run as root)";

/// The flags Chromium needs here: no display, no sandbox as root, no calls home.
const FLAGS: &[&str] = &[
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--window-size=1280,900",
];

/// The Chromium binary: `CHROME`, else `chromium` (or another Chrome) on PATH.
pub fn chromium() -> Result<PathBuf, String> {
    find("CHROME", &["chromium", "chromium-browser", "google-chrome"])
        .ok_or_else(|| format!("Chromium was not found (no `chromium` on PATH, CHROME unset): {INSTALL}"))
}

/// The chromedriver binary: `CHROMEDRIVER`, else `chromedriver` on PATH.
pub fn chromedriver() -> Result<PathBuf, String> {
    find("CHROMEDRIVER", &["chromedriver"])
        .ok_or_else(|| format!("chromedriver was not found (not on PATH, CHROMEDRIVER unset): {INSTALL}"))
}

fn find(variable: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(variable).filter(|path| !path.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    dirs.push(PathBuf::from("/usr/bin"));
    names.iter().flat_map(|name| dirs.iter().map(move |dir| dir.join(name))).find(|candidate| candidate.is_file())
}

/// One entry of the browser's console log.
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// `SEVERE`, `WARNING`, `INFO`, …
    pub level: String,
    /// What was logged, with its source (a CSP violation, an uncaught error, a failed load).
    pub message: String,
}

/// A headless Chromium session and the chromedriver that runs it.
pub struct Browser {
    /// The WebDriver session.
    pub client: Client,
    _driver: Driver,
}

/// chromedriver and the profile directory of its session, ended and removed when dropped.
struct Driver {
    child: Child,
    profile: PathBuf,
}

/// One request the page made, from Chromium's network log: what it asked and what came of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// `GET`, `POST`, …
    pub method: String,
    /// The whole URL.
    pub url: String,
    /// The answer's status, once one came.
    pub status: Option<u16>,
    /// Why the request failed without an answer (`net::ERR_…`), when it did.
    pub failure: Option<String>,
    /// Whether the page itself abandoned it (an `AbortController`, a closed stream).
    pub canceled: bool,
}

impl PageRequest {
    /// Whether it failed: no answer although the page waited for one, or a 4xx or 5xx answer.
    pub fn failed(&self) -> bool {
        (self.failure.is_some() && !self.canceled) || self.status.is_some_and(|status| status >= 400)
    }
}

impl Browser {
    /// Starts chromedriver and a Chromium session; panics naming what is missing.
    pub async fn start() -> Browser {
        Browser::launch(false).await
    }

    /// [`Browser::start`], with the page's requests recorded for [`Browser::requests`].
    pub async fn start_recording_requests() -> Browser {
        Browser::launch(true).await
    }

    async fn launch(record_requests: bool) -> Browser {
        let chrome = chromium().unwrap_or_else(|missing| panic!("{missing}"));
        let driver_binary = chromedriver().unwrap_or_else(|missing| panic!("{missing}"));
        let port = free_port();
        let driver = Command::new(&driver_binary)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", driver_binary.display()));
        let profile = std::env::temp_dir().join(format!("outbox-chromium-{}-{port}", std::process::id()));
        let mut driver = Driver { child: driver, profile };
        wait_for_port(port, &mut driver.child);
        let mut args: Vec<String> = FLAGS.iter().map(|flag| (*flag).to_owned()).collect();
        args.push(format!("--user-data-dir={}", driver.profile.display()));
        let mut capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": chrome, "args": args },
            "goog:loggingPrefs": { "browser": "ALL" },
        });
        if record_requests {
            // The network part of the performance log: every request, its answer or its failure.
            capabilities["goog:loggingPrefs"]["performance"] = json!("ALL");
            capabilities["goog:chromeOptions"]["perfLoggingPrefs"] =
                json!({ "enableNetwork": true, "enablePage": false });
        }
        let Value::Object(capabilities) = capabilities else { unreachable!("an object literal") };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|e| panic!("opening a Chromium session through chromedriver: {e}"));
        Browser { client, _driver: driver }
    }

    /// Ends the session (Chromium exits), then chromedriver.
    pub async fn close(self) {
        let Browser { client, _driver } = self;
        let _ = client.close().await;
    }

    /// The console log entries since the last call (Chromium hands each entry out once).
    pub async fn log(&self) -> Vec<LogEntry> {
        self.read_log("browser").await
    }

    /// The requests the page made since the last call, in the order it made them (a
    /// browser from [`Browser::start_recording_requests`]; another records none).
    pub async fn requests(&self) -> Vec<PageRequest> {
        let mut requests: Vec<(String, PageRequest)> = Vec::new();
        for entry in self.read_log("performance").await {
            let message: Value = serde_json::from_str(&entry.message).unwrap_or_default();
            record(&mut requests, &message["message"]["method"], &message["message"]["params"]);
        }
        requests.into_iter().map(|(_, request)| request).collect()
    }

    async fn read_log(&self, kind: &'static str) -> Vec<LogEntry> {
        let entries =
            self.client.issue_cmd(ReadLog(kind)).await.unwrap_or_else(|e| panic!("reading the {kind} log: {e}"));
        entries
            .as_array()
            .map(|entries| {
                entries
                    .iter()
                    .map(|entry| LogEntry {
                        level: entry["level"].as_str().unwrap_or_default().to_owned(),
                        message: entry["message"].as_str().unwrap_or_default().to_owned(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Runs `script` in the page and returns what it returns.
    pub async fn run(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.unwrap_or_else(|e| panic!("running {script:?}: {e}"))
    }

    /// The text of the element with id `id`, or an empty string when there is none.
    pub async fn text(&self, id: &str) -> String {
        let script = format!("const e = document.getElementById({id:?}); return e ? e.textContent : '';");
        self.run(&script).await.as_str().unwrap_or_default().to_owned()
    }

    /// Clicks the element `css` selects. A table the page re-renders (its refresh every few
    /// seconds) can replace the element between finding and clicking it: then it is found
    /// again.
    pub async fn click(&self, css: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let element = self.client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("finding {css}: {e}"));
            match element.click().await {
                Ok(()) => return,
                Err(e) if e.to_string().contains("stale element") && Instant::now() < deadline => continue,
                Err(e) => panic!("clicking {css}: {e}"),
            }
        }
    }

    /// Focuses the element `css` selects and presses Enter on it.
    pub async fn press_enter(&self, css: &str) {
        let element = self.client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("finding {css}: {e}"));
        let enter = fantoccini::key::Key::Enter.to_string();
        element.send_keys(&enter).await.unwrap_or_else(|e| panic!("pressing Enter on {css}: {e}"));
    }

    /// Replaces the value of the input `css` selects with `text`, typed.
    pub async fn fill(&self, css: &str, text: &str) {
        let element = self.client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("finding {css}: {e}"));
        element.clear().await.unwrap_or_else(|e| panic!("clearing {css}: {e}"));
        element.send_keys(text).await.unwrap_or_else(|e| panic!("typing into {css}: {e}"));
    }

    /// Waits until `script` (a function body) returns `true`; panics naming `what` after `within`.
    pub async fn until(&self, what: &str, within: Duration, script: &str) {
        let deadline = Instant::now() + within;
        loop {
            if self.run(script).await == Value::Bool(true) {
                return;
            }
            if Instant::now() > deadline {
                let status = self.text("status").await;
                let badge = self.text("badge").await;
                panic!("timed out after {within:?} waiting for {what} (badge {badge:?}, status {status:?})");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the element `id`'s text contains `wanted`; the failure says what it held.
    pub async fn until_text(&self, id: &str, wanted: &str, within: Duration) {
        let script =
            format!("const e = document.getElementById({id:?}); return !!e && e.textContent.includes({wanted:?});");
        let deadline = Instant::now() + within;
        while self.run(&script).await != Value::Bool(true) {
            if Instant::now() > deadline {
                let held = self.text(id).await;
                let status = self.text("status").await;
                panic!(
                    "timed out after {within:?} waiting for #{id} to say {wanted:?}: it says {held:?} (status {status:?})"
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A PNG of the page as it is now.
    pub async fn screenshot(&self) -> Vec<u8> {
        self.client.screenshot().await.expect("taking a screenshot")
    }
}

impl Drop for Driver {
    /// Ends the Chromium that chromedriver started (its child: the browser's own children
    /// end with it), then chromedriver, and removes the profile.
    fn drop(&mut self) {
        for pid in children_of(self.child.id()) {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// The processes whose parent is `parent`, from `/proc`.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // "<pid> (<name>) <state> <ppid> …": the name may hold spaces, so read after its ')'.
            let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            after_name.split_whitespace().nth(1).and_then(|ppid| ppid.parse::<u32>().ok()) == Some(parent)
        })
        .collect()
}

/// Adds one DevTools network event (`method`, `params`) to `requests`, keyed by request id.
fn record(requests: &mut Vec<(String, PageRequest)>, method: &Value, params: &Value) {
    let id = params["requestId"].as_str().unwrap_or_default();
    let known = requests.iter_mut().rev().find(|(known, _)| known == id).map(|(_, request)| request);
    match (method.as_str().unwrap_or_default(), known) {
        ("Network.requestWillBeSent", _) => {
            let text = |key: &str| params["request"][key].as_str().unwrap_or_default().to_owned();
            let made =
                PageRequest { method: text("method"), url: text("url"), status: None, failure: None, canceled: false };
            requests.push((id.to_owned(), made));
        }
        ("Network.responseReceived", Some(request)) => {
            request.status = params["response"]["status"].as_u64().and_then(|status| u16::try_from(status).ok());
        }
        ("Network.loadingFailed", Some(request)) => {
            request.failure = Some(params["errorText"].as_str().unwrap_or("failed").to_owned());
            request.canceled = params["canceled"].as_bool() == Some(true);
        }
        _ => {}
    }
}

/// `POST /session/{id}/se/log {"type":"<kind>"}`: one of Chromium's logs since the last read
/// (`browser`, the console; `performance`, the DevTools events, the network's among them).
#[derive(Debug)]
struct ReadLog(&'static str);

impl WebDriverCompatibleCommand for ReadLog {
    fn endpoint(&self, base: &url::Url, session: Option<&str>) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _url: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(json!({ "type": self.0 }).to_string()))
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).map(|addr| addr.port()).unwrap()
}

fn wait_for_port(port: u16, driver: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Ok(Some(status)) = driver.try_wait() {
            panic!("chromedriver exited before it listened ({status})");
        }
        assert!(Instant::now() < deadline, "chromedriver did not listen on port {port} within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}
