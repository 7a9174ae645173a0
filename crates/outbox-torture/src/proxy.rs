//! A TCP relay on loopback that can cut, stall and delay its connections on command: what
//! stands between every process of the torture run and PostgreSQL.
//!
//! [`Proxy::start`] listens on `127.0.0.1:0` and relays each connection it accepts to the
//! upstream address. [`Proxy::cut`] resets every connection open now (both sides get a TCP
//! RST, as when a middlebox or a host dies); [`Proxy::stall`] holds every byte in both
//! directions for a while (a partition that heals: nothing is lost, it arrives late);
//! [`Proxy::delay`] adds latency to every chunk relayed. New connections keep being
//! accepted throughout.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the relay does to its connections now.
struct State {
    upstream: SocketAddr,
    /// Bumped by every cut: each connection ends when it changes.
    cuts: watch::Sender<u64>,
    /// True while every byte is held.
    stalled: watch::Sender<bool>,
    /// Milliseconds added to every chunk relayed.
    delay_ms: AtomicU64,
    /// Connections accepted so far.
    accepted: AtomicU64,
}

/// A running relay; it stops with the runtime it was started on.
#[derive(Clone)]
pub(crate) struct Proxy {
    addr: SocketAddr,
    state: Arc<State>,
}

impl Proxy {
    /// Listens on `127.0.0.1:0` and relays to `upstream`.
    pub(crate) async fn start(upstream: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            upstream,
            cuts: watch::Sender::new(0),
            stalled: watch::Sender::new(false),
            delay_ms: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
        });
        let accepting = state.clone();
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                accepting.accepted.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(relay(inbound, accepting.clone()));
            }
        });
        Ok(Proxy { addr, state })
    }

    /// Where clients connect.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Resets every connection open now.
    pub(crate) fn cut(&self) {
        self.state.cuts.send_modify(|cuts| *cuts += 1);
    }

    /// Holds every byte in both directions for `duration`, then lets them through.
    pub(crate) async fn stall(&self, duration: Duration) {
        self.hold(true);
        tokio::time::sleep(duration).await;
        self.hold(false);
    }

    /// Holds every byte in both directions from now on (`true`), or lets them through again.
    fn hold(&self, held: bool) {
        self.state.stalled.send_replace(held);
    }

    /// Adds `delay` to every chunk relayed from now on (zero: none).
    pub(crate) fn delay(&self, delay: Duration) {
        self.state.delay_ms.store(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Connections accepted so far.
    pub(crate) fn accepted(&self) -> u64 {
        self.state.accepted.load(Ordering::Relaxed)
    }
}

/// Relays one connection until either side closes it or a cut resets it.
async fn relay(inbound: TcpStream, state: Arc<State>) {
    let mut cuts = state.cuts.subscribe();
    let Ok(upstream) = TcpStream::connect(state.upstream).await else { return };
    let _ = (inbound.set_nodelay(true), upstream.set_nodelay(true));
    let (mut from_client, mut to_client) = inbound.into_split();
    let (mut from_server, mut to_server) = upstream.into_split();
    let cut = {
        let both = async {
            tokio::join!(pump(&mut from_client, &mut to_server, &state), pump(&mut from_server, &mut to_client, &state))
        };
        tokio::select! {
            _ = both => false,
            _ = cuts.changed() => true,
        }
    };
    if cut {
        // Dropped with a zero linger: an RST to each side, whatever is in flight discarded.
        let _ = from_client.as_ref().set_zero_linger();
        let _ = from_server.as_ref().set_zero_linger();
    }
}

/// Copies `from` to `to` chunk by chunk, holding each while stalled and after the delay.
async fn pump(from: &mut OwnedReadHalf, to: &mut OwnedWriteHalf, state: &State) {
    let mut buffer = vec![0u8; 16 * 1024];
    let mut stalled = state.stalled.subscribe();
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let _ = stalled.wait_for(|stalled| !*stalled).await;
        let delay = state.delay_ms.load(Ordering::Relaxed);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buffer = [0u8; 1024];
                    while let Ok(n) = stream.read(&mut buffer).await {
                        if n == 0 || stream.write_all(&buffer[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn round_trip(stream: &mut TcpStream, text: &[u8]) -> std::io::Result<Vec<u8>> {
        stream.write_all(text).await?;
        let mut answer = vec![0u8; text.len()];
        stream.read_exact(&mut answer).await?;
        Ok(answer)
    }

    #[tokio::test]
    async fn relays_stalls_and_cuts() {
        let proxy = Proxy::start(echo_server().await).await.unwrap();
        let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(round_trip(&mut client, b"hello").await.unwrap(), b"hello");

        proxy.hold(true);
        let mut trip = tokio::spawn(async move {
            let answer = round_trip(&mut client, b"late").await;
            (client, answer)
        });
        // A proxy that did not hold would echo within a millisecond or two.
        let held = tokio::time::timeout(Duration::from_millis(200), &mut trip).await;
        assert!(held.is_err(), "nothing comes back while the proxy holds");
        proxy.hold(false);
        let (mut client, answer) = trip.await.unwrap();
        assert_eq!(answer.unwrap(), b"late", "a stall loses nothing");

        proxy.cut();
        let mut buffer = [0u8; 8];
        let after_cut = tokio::time::timeout(Duration::from_secs(5), client.read(&mut buffer)).await.unwrap();
        assert!(matches!(after_cut, Ok(0) | Err(_)), "the cut connection ended: {after_cut:?}");
        let mut again = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(round_trip(&mut again, b"again").await.unwrap(), b"again", "new connections still relayed");
        assert_eq!(proxy.accepted(), 2);
    }
}
