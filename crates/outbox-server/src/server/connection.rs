//! One accepted connection, served in the protocol its first bytes name: HTTP/1, or HTTP/2
//! with prior knowledge (RFC 9113 §3.3), as hyper-util's `auto::Builder` serves them.
//!
//! # Why not the `auto::Builder` for every connection
//!
//! It tells the two apart by reading up to 24 bytes (the length of the HTTP/2 preface) into
//! a buffer of its own and handing them back through a rewinding reader. hyper's HTTP/1
//! connection then gets those bytes alone in its first read, into its 8 KiB read buffer,
//! finds the request head unfinished, and reserves 8 KiB more for the rest: the buffer is
//! reallocated to 16 KiB, the first 8 KiB copied across. A connection that then sits idle
//! on a `/watch` stream keeps that buffer for its life. Measured from outside with `cargo
//! xtask bench fanout` (10,000 idle streams, jemalloc), hyper's HTTP/1 connection held 16.4
//! KiB per stream when its first read had the whole request, and 27.6 KiB when it had 24
//! bytes first, the same as behind the `auto::Builder` (27.4).
//!
//! So the first bytes are *peeked* ([`TcpStream::peek`] leaves them in the socket): the whole
//! preface is HTTP/2, bytes that depart from it are HTTP/1, and the connection goes to
//! hyper's builder for that protocol, whose first read then takes the request whole. Only
//! bytes that are so far a proper prefix of the preface (a client whose first segment was
//! shorter than 24 bytes) leave it undecided; such a connection goes to the `auto::Builder`,
//! which reads on until it knows. Each protocol's connection is also a future of its own, so
//! an HTTP/1 connection's task is not sized for HTTP/2's state.
//!
//! # Shutdown
//!
//! The connection is watched by the server's [`GracefulShutdown`] from the moment it is
//! accepted; one that has sent nothing yet when the shutdown begins is closed at once, as
//! the `auto::Builder` closes one it is still reading the version of.

use std::sync::Arc;

use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::Watcher;
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::app::App;

/// What an HTTP/2 client with prior knowledge sends first.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The protocol a connection's first bytes name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Http1,
    Http2,
    /// Every byte so far matches the HTTP/2 preface, but it is not whole yet.
    Undecided,
}

/// What the connection's first bytes say; no bytes at all (the peer closed) is HTTP/1,
/// whose connection then ends at once.
fn protocol_of(first: &[u8]) -> Protocol {
    let first = &first[..first.len().min(H2_PREFACE.len())];
    if first.is_empty() || !H2_PREFACE.starts_with(first) {
        Protocol::Http1
    } else if first.len() == H2_PREFACE.len() {
        Protocol::Http2
    } else {
        Protocol::Undecided
    }
}

/// The connection builders, made once and shared by every connection.
pub(super) struct Builders {
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
    auto: auto::Builder<TokioExecutor>,
}

impl Builders {
    /// hyper's defaults, with tokio's timer (for HTTP/1's header read timeout and HTTP/2's
    /// keep-alive).
    pub(super) fn new() -> Builders {
        let mut http1 = http1::Builder::new();
        http1.timer(TokioTimer::new());
        let mut http2 = http2::Builder::new(TokioExecutor::new());
        http2.timer(TokioTimer::new());
        let mut auto = auto::Builder::new(TokioExecutor::new());
        auto.http1().timer(TokioTimer::new());
        auto.http2().timer(TokioTimer::new());
        Builders { http1, http2, auto }
    }
}

/// Serves `stream` for `app` until it ends, watched by `watcher`; `stopping` changes when the
/// shutdown begins.
pub(super) async fn serve(
    stream: TcpStream,
    app: App,
    builders: Arc<Builders>,
    watcher: Watcher,
    mut stopping: watch::Receiver<()>,
) {
    let mut first = [0; H2_PREFACE.len()];
    let peeked = tokio::select! {
        peeked = stream.peek(&mut first) => peeked,
        _ = stopping.changed() => return,
    };
    drop(stopping);
    let protocol = match peeked {
        Ok(n) => protocol_of(&first[..n]),
        Err(error) => {
            tracing::debug!(%error, "reading a connection's first bytes failed");
            return;
        }
    };
    let io = TokioIo::new(stream);
    // A task of its own for the connection, sized for its protocol's future alone; this one,
    // which held the peek, ends here. Each connection is made inside its task's future, not
    // moved into it: a future moved into an `async` block and awaited there takes its size
    // twice (measured: 1,656 bytes instead of 824 for HTTP/1).
    match protocol {
        Protocol::Http1 => tokio::spawn(async move {
            log_end(watcher.watch(builders.http1.serve_connection(io, app)).await);
        }),
        Protocol::Http2 => tokio::spawn(async move {
            log_end(watcher.watch(builders.http2.serve_connection(io, app)).await);
        }),
        Protocol::Undecided => tokio::spawn(async move {
            log_end(watcher.watch(builders.auto.serve_connection(io, app)).await);
        }),
    };
}

fn log_end<E: std::fmt::Display>(served: Result<(), E>) {
    if let Err(error) = served {
        tracing::debug!(%error, "connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(first: &[u8], expect: Protocol) {
        assert_eq!(protocol_of(first), expect, "{:?}", String::from_utf8_lossy(first));
    }

    #[test]
    fn the_first_bytes_name_the_protocol() {
        check(b"GET /watch HTTP/1.1\r\nhost: x\r\n\r\n", Protocol::Http1);
        check(b"POST /events HTTP/1.1\r\n", Protocol::Http1);
        check(b"PUT", Protocol::Http1);
        check(b"PRI * HTTP/1.1\r\n", Protocol::Http1);
        check(b"", Protocol::Http1);
        check(H2_PREFACE, Protocol::Http2);
        check(&[H2_PREFACE, b"\0\0\x12\x04\0\0\0\0\0"].concat(), Protocol::Http2);
        check(b"P", Protocol::Undecided);
        check(b"PRI * HTTP/2.0\r\n", Protocol::Undecided);
        check(&H2_PREFACE[..23], Protocol::Undecided);
    }
}
