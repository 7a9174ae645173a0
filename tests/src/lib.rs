//! End-to-end tests of the `outbox` binary live in `e2e/`; this library holds what they and
//! the crates' own integration tests share: a small HTTP/1 client over loopback that can
//! also read a Server-Sent-Events stream frame by frame, the addresses of the real
//! brokers the sink tests need, and a real headless Chromium over WebDriver ([`browser`])
//! for the console's tests and its benchmark.

pub mod browser;

pub mod wait {
    //! Waiting for a condition with a deadline, never for a fixed time; and watching over a
    //! stated window that something does not happen.

    use std::future::Future;
    use std::time::{Duration, Instant};

    /// Polls `check` every 10 ms until it holds; panics naming `what` after `within`.
    pub async fn until<F, Fut>(what: &str, within: Duration, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let deadline = Instant::now() + within;
        while !check().await {
            assert!(Instant::now() < deadline, "timed out after {within:?} waiting for {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// For a claim that something does not happen: polls `check` every 10 ms for `window`
    /// and panics naming `what` as soon as it holds. The window must be long enough for a
    /// faulty implementation to do what it must not (a test says why it is); a correct one
    /// waits it out, a faulty one fails at once.
    pub async fn never<F, Fut>(what: &str, window: Duration, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let deadline = Instant::now() + window;
        while Instant::now() < deadline {
            assert!(!check().await, "{what} happened within {window:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

pub mod standard_webhooks {
    //! A Standard Webhooks verifier written from the specification, for the receivers of
    //! the tests: nothing is shared with the signer's code.
    //!
    //! signed content = `"<webhook-id>.<webhook-timestamp>.<body>"`; signature =
    //! base64(HMAC-SHA256(key, signed content)); key = base64-decode(the secret without its
    //! `whsec_` prefix); `webhook-signature` is a space-separated list of
    //! `"<version>,<signature>"`; a request is valid when one `v1` signature matches
    //! (compared in constant time) and the timestamp is within 5 minutes of now. HMAC is
    //! computed here from SHA-256 alone (RFC 2104).

    use base64::Engine;
    use base64::engine::general_purpose::STANDARD as BASE64;
    use http::HeaderMap;
    use sha2::{Digest, Sha256};

    /// HMAC-SHA256 of `message` under `key` (RFC 2104).
    pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
        const BLOCK: usize = 64;
        let mut block_key = [0u8; BLOCK];
        if key.len() > BLOCK {
            block_key[..32].copy_from_slice(&Sha256::digest(key));
        } else {
            block_key[..key.len()].copy_from_slice(key);
        }
        let inner_pad: Vec<u8> = block_key.iter().map(|b| b ^ 0x36).collect();
        let outer_pad: Vec<u8> = block_key.iter().map(|b| b ^ 0x5c).collect();
        let inner = Sha256::new().chain_update(&inner_pad).chain_update(message).finalize();
        Sha256::new().chain_update(&outer_pad).chain_update(inner).finalize().into()
    }

    fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// `Ok` when `headers` and `body` carry a valid `v1` signature by `secret` at `now`
    /// (Unix seconds); else what is wrong.
    pub fn verify(secret: &str, headers: &HeaderMap, body: &[u8], now: i64) -> Result<(), String> {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).ok_or(format!("missing {name}"));
        let (id, timestamp, signatures) =
            (header("webhook-id")?, header("webhook-timestamp")?, header("webhook-signature")?);
        let seconds: i64 = timestamp.parse().map_err(|_| "webhook-timestamp is not a number".to_owned())?;
        if (now - seconds).abs() > 5 * 60 {
            return Err("timestamp outside the tolerance".into());
        }
        let key = BASE64.decode(secret.strip_prefix("whsec_").unwrap_or(secret)).map_err(|e| e.to_string())?;
        let mut signed = format!("{id}.{timestamp}.").into_bytes();
        signed.extend_from_slice(body);
        let expected = BASE64.encode(hmac_sha256(&key, &signed));
        let matches = signatures
            .split(' ')
            .filter_map(|s| s.split_once(','))
            .any(|(version, signature)| version == "v1" && constant_time_eq(signature.as_bytes(), expected.as_bytes()));
        if matches { Ok(()) } else { Err("no v1 signature matches".into()) }
    }
}

pub mod services {
    //! The real NATS, Redis, RabbitMQ (stream protocol) and Kafka-protocol brokers the tests
    //! use. A test that needs one that does not answer panics naming it: a broker test never
    //! passes without its broker.

    use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
    use std::time::Duration;

    /// `NATS_URL`, default `nats://127.0.0.1:4222`; panics naming the service when nothing answers.
    pub fn nats_url() -> String {
        let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
        require("NATS (with JetStream)", "NATS_URL", &url);
        url
    }

    /// `REDIS_URL`, default `redis://127.0.0.1:6379`; see [`nats_url`].
    pub fn redis_url() -> String {
        let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
        require("Redis", "REDIS_URL", &url);
        url
    }

    /// `RABBITMQ_STREAM_URL`, default `rabbitmq-stream://guest:guest@127.0.0.1:5552/%2f` (RabbitMQ
    /// with its `rabbitmq_stream` plugin); see [`nats_url`].
    pub fn rabbitmq_stream_url() -> String {
        let url = std::env::var("RABBITMQ_STREAM_URL")
            .unwrap_or_else(|_| "rabbitmq-stream://guest:guest@127.0.0.1:5552/%2f".into());
        require("RabbitMQ streams (the rabbitmq_stream plugin)", "RABBITMQ_STREAM_URL", &url);
        url
    }

    /// Where `cargo xtask services kafka` writes the bootstrap address of the broker it keeps
    /// running (the same path as `xtask/src/services.rs`'s).
    pub fn kafka_state_file() -> std::path::PathBuf {
        std::env::temp_dir().join("outbox-services").join("kafka-bootstrap")
    }

    /// `KAFKA_BOOTSTRAP`, else the address `cargo xtask services kafka` wrote
    /// ([`kafka_state_file`]); panics naming the service when no broker answers there.
    pub fn kafka_bootstrap() -> String {
        let bootstrap = std::env::var("KAFKA_BOOTSTRAP")
            .ok()
            .or_else(|| std::fs::read_to_string(kafka_state_file()).ok().map(|text| text.trim().to_owned()));
        let Some(bootstrap) = bootstrap.filter(|b| !b.is_empty()) else {
            panic!(
                "Kafka is not running: this test needs a Kafka-protocol broker. Start one (`cargo xtask services kafka` \
                 or `cargo xtask test` does) or set KAFKA_BOOTSTRAP."
            );
        };
        let first = bootstrap.split(',').next().unwrap_or_default().to_owned();
        require("Kafka", "KAFKA_BOOTSTRAP", &format!("kafka://{first}"));
        bootstrap
    }

    fn require(service: &str, variable: &str, url: &str) {
        let authority = url.split("://").nth(1).unwrap_or(url);
        let authority = authority.rsplit('@').next().unwrap_or(authority);
        let host_port = authority.split('/').next().unwrap_or(authority);
        let addrs: Vec<SocketAddr> = host_port.to_socket_addrs().map(Iterator::collect).unwrap_or_default();
        let answers = addrs.iter().any(|addr| TcpStream::connect_timeout(addr, Duration::from_secs(2)).is_ok());
        assert!(
            answers,
            "{service} is not running at {url}: this test needs it. Start one (`cargo xtask test` does) or set {variable}."
        );
    }
}

pub mod client {
    //! One connection per request, HTTP/1.1, no pooling: each call sees the server fresh.

    use std::net::SocketAddr;
    use std::time::{Duration, Instant};

    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper::body::Incoming;
    use hyper_util::rt::TokioIo;

    /// A whole response.
    #[derive(Debug)]
    pub struct Reply {
        /// The status code.
        pub status: u16,
        /// The headers.
        pub headers: http::HeaderMap,
        /// The body as text.
        pub body: String,
    }

    impl Reply {
        /// The body as JSON (panics naming the body when it is not).
        pub fn json(&self) -> serde_json::Value {
            serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
        }

        /// The `error.code` of a JSON refusal.
        pub fn error_code(&self) -> String {
            self.json()["error"]["code"].as_str().unwrap_or_default().to_owned()
        }
    }

    async fn send(addr: SocketAddr, request: http::Request<Full<Bytes>>) -> http::Response<Incoming> {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("an HTTP/1 handshake");
        tokio::spawn(connection);
        sender.send_request(request).await.expect("a response")
    }

    fn build(
        method: &str,
        addr: SocketAddr,
        path: &str,
        token: Option<&str>,
        body: &str,
    ) -> http::Request<Full<Bytes>> {
        let mut builder = http::Request::builder()
            .method(method)
            .uri(format!("http://{addr}{path}"))
            .header(http::header::HOST, addr.to_string());
        if let Some(token) = token {
            builder = builder.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if !body.is_empty() {
            builder = builder.header(http::header::CONTENT_TYPE, "application/json");
        }
        builder.body(Full::new(Bytes::from(body.to_owned()))).expect("a valid request")
    }

    /// Sends `method path` with an optional bearer token and body; reads the whole answer.
    pub async fn request(method: &str, addr: SocketAddr, path: &str, token: Option<&str>, body: &str) -> Reply {
        let response = send(addr, build(method, addr, path, token, body)).await;
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.expect("a whole body").to_bytes();
        Reply {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    /// `GET path`.
    pub async fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> Reply {
        request("GET", addr, path, token, "").await
    }

    /// `POST path` with a JSON body.
    pub async fn post(addr: SocketAddr, path: &str, token: Option<&str>, json: &serde_json::Value) -> Reply {
        request("POST", addr, path, token, &json.to_string()).await
    }

    /// One SSE block: its fields, or a comment line.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct Frame {
        /// `id:`.
        pub id: Option<String>,
        /// `event:`.
        pub event: Option<String>,
        /// `data:` (lines joined with `\n`).
        pub data: Option<String>,
        /// `retry:`.
        pub retry: Option<String>,
        /// A `: comment` line.
        pub comment: Option<String>,
    }

    impl Frame {
        /// The data as JSON.
        pub fn json(&self) -> serde_json::Value {
            serde_json::from_str(self.data.as_deref().unwrap_or("null")).expect("JSON data")
        }
    }

    /// An open `text/event-stream` response, read frame by frame.
    pub struct EventStream {
        body: Incoming,
        buffer: String,
        ended: bool,
    }

    /// Opens `GET path` as a stream; a non-200 answer comes back whole as `Err`.
    pub async fn watch(addr: SocketAddr, path: &str, token: Option<&str>) -> Result<EventStream, Reply> {
        let response = send(addr, build("GET", addr, path, token, "")).await;
        let (parts, body) = response.into_parts();
        if parts.status != http::StatusCode::OK {
            let bytes = body.collect().await.expect("a whole body").to_bytes();
            let body = String::from_utf8_lossy(&bytes).into_owned();
            return Err(Reply { status: parts.status.as_u16(), headers: parts.headers, body });
        }
        Ok(EventStream { body, buffer: String::new(), ended: false })
    }

    impl EventStream {
        /// The next frame, `None` when the stream ended or `within` passed first.
        pub async fn next(&mut self, within: Duration) -> Option<Frame> {
            let deadline = tokio::time::Instant::now() + within;
            loop {
                if let Some(frame) = self.take_frame() {
                    return Some(frame);
                }
                if self.ended {
                    return None;
                }
                match tokio::time::timeout_at(deadline, self.body.frame()).await {
                    Err(_) => return None,
                    Ok(None) | Ok(Some(Err(_))) => self.ended = true,
                    Ok(Some(Ok(frame))) => {
                        if let Ok(data) = frame.into_data() {
                            self.buffer.push_str(&String::from_utf8_lossy(&data));
                        }
                    }
                }
            }
        }

        /// Reads until a frame satisfies `wanted`; panics naming what came when `within` passes.
        pub async fn until(&mut self, within: Duration, wanted: impl Fn(&Frame) -> bool) -> Frame {
            let started = Instant::now();
            let mut seen = Vec::new();
            loop {
                let left = within.saturating_sub(started.elapsed());
                match self.next(left).await {
                    Some(frame) if wanted(&frame) => return frame,
                    Some(frame) => seen.push(frame),
                    None => panic!("no wanted frame within {within:?} (ended: {}); saw {seen:?}", self.ended),
                }
            }
        }

        /// Whether the server ended the stream (reads until the end, at most `within`).
        pub async fn ends_within(&mut self, within: Duration) -> bool {
            let deadline = Instant::now() + within;
            while Instant::now() < deadline {
                if self.next(deadline - Instant::now()).await.is_none() && self.ended {
                    return true;
                }
            }
            self.ended
        }

        fn take_frame(&mut self) -> Option<Frame> {
            let end = self.buffer.find("\n\n")?;
            let block: String = self.buffer.drain(..end + 2).collect();
            let mut frame = Frame::default();
            for line in block.lines().filter(|line| !line.is_empty()) {
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value).to_owned();
                match field {
                    "" => frame.comment = Some(value),
                    "id" => frame.id = Some(value),
                    "event" => frame.event = Some(value),
                    "retry" => frame.retry = Some(value),
                    "data" => {
                        frame.data = Some(match frame.data.take() {
                            Some(before) => format!("{before}\n{value}"),
                            None => value,
                        })
                    }
                    _ => {}
                }
            }
            Some(frame)
        }
    }
}
