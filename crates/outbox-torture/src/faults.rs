//! The faults: a schedule drawn from the run's seed, printed as it goes, each fault healed
//! before the next one starts.
//!
//! Kinds: a server killed with SIGKILL and started again; a server stopped with SIGSTOP
//! (sometimes past the sinks' 30 s lease, so another takes its leases over) and continued;
//! random backends of the run's database ended with `pg_terminate_backend`; every
//! connection through the proxy cut (reset); the proxy stalled for a few seconds, or
//! delaying every chunk for a while; the NATS, Redis or RabbitMQ server stopped for up to
//! 25 s and started again, or the Kafka mock's broker taken down and up again; the webhook receiver answering 500 for up to 15 s; PostgreSQL
//! stopped as by a crash (`pg_ctl stop -m immediate`) and started again.

use std::fmt;
use std::time::{Duration, Instant};

use outbox_pg::embedded::EmbeddedPostgres;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::proxy::Proxy;
use super::receiver::Receiver;
use super::services::{Ports, Server};
use outbox_services::Broker;

/// One fault.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fault {
    Kill {
        server: usize,
        down: Duration,
    },
    Pause {
        server: usize,
        stopped: Duration,
    },
    TerminateBackends {
        count: u32,
    },
    Cut,
    Stall {
        stalled: Duration,
    },
    Delay {
        delay: Duration,
        lasting: Duration,
    },
    /// A broker (by its index in the run's brokers) stopped and started again.
    Broker {
        broker: usize,
        down: Duration,
    },
    /// The webhook receiver answering 500 for a while.
    ReceiverFailing {
        lasting: Duration,
    },
    /// PostgreSQL stopped as a crash would stop it and started again at once.
    Restart,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Kill { server, down } => write!(f, "SIGKILL server {server}, restarted after {down:.1?}"),
            Fault::Pause { server, stopped } => write!(f, "SIGSTOP server {server} for {stopped:.1?}, then SIGCONT"),
            Fault::TerminateBackends { count } => write!(f, "pg_terminate_backend of {count} random backends"),
            Fault::Cut => write!(f, "cut every connection through the proxy"),
            Fault::Stall { stalled } => write!(f, "stall the proxy for {stalled:.1?}"),
            Fault::Delay { delay, lasting } => {
                write!(f, "delay every chunk through the proxy by {delay:?} for {lasting:.1?}")
            }
            Fault::ReceiverFailing { lasting } => write!(f, "the webhook receiver answers 500 for {lasting:.1?}"),
            Fault::Restart => write!(f, "restart PostgreSQL immediately (crash recovery)"),
            Fault::Broker { broker, down } => {
                let name = ["NATS", "Redis", "Kafka", "RabbitMQ"].get(*broker).unwrap_or(&"a broker");
                write!(f, "stop the {name} server, started again after {down:.1?}")
            }
        }
    }
}

impl Fault {
    /// The name each kind is counted under.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Fault::Kill { .. } => "kill",
            Fault::Pause { .. } => "pause",
            Fault::TerminateBackends { .. } => "terminate",
            Fault::Cut => "cut",
            Fault::Stall { .. } => "stall",
            Fault::Delay { .. } => "delay",
            Fault::Broker { .. } => "broker",
            Fault::ReceiverFailing { .. } => "receiver",
            Fault::Restart => "restart",
        }
    }
}

/// The faults of a run of `length`, with the quiet time before each, drawn from `seed`.
///
/// The first faults are one of every kind (each broker's stop counted as a kind of its
/// own, and a kill of each server, so that every sink's lease changes hands at least once
/// and its successor resumes from what was saved) in a shuffled order, so that a short run
/// still injects each; the rest are drawn by weight.
pub(crate) fn schedule(seed: u64, length: Duration, servers: usize, brokers: usize) -> Vec<(Duration, Fault)> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_fa17);
    let mut first: Vec<Kind> = [Kind::Pause, Kind::Terminate, Kind::Cut, Kind::Stall, Kind::Delay]
        .into_iter()
        .chain([Kind::Receiver, Kind::Restart])
        .chain((0..servers).map(|server| Kind::Kill(Some(server))))
        .chain((0..brokers).map(Kind::Broker))
        .collect();
    first.shuffle(&mut rng);
    first.reverse();
    let mut planned = Vec::new();
    let mut total = Duration::ZERO;
    loop {
        // The first round closer together, so that three minutes hold it.
        let gap = Duration::from_millis(if first.is_empty() {
            rng.random_range(2_000..6_000)
        } else {
            rng.random_range(1_000..3_000)
        });
        let kind = first.pop().unwrap_or_else(|| Kind::weighted(&mut rng, brokers));
        let fault = kind.draw(&mut rng, servers);
        total += gap + fault.length();
        if total > length {
            return planned;
        }
        planned.push((gap, fault));
    }
}

/// A kind of fault, before its details are drawn.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Of the server given, or of one drawn.
    Kill(Option<usize>),
    Pause,
    Terminate,
    Cut,
    Stall,
    Delay,
    Receiver,
    Restart,
    Broker(usize),
}

impl Kind {
    fn weighted(rng: &mut StdRng, brokers: usize) -> Kind {
        match rng.random_range(0..13) {
            12 => Kind::Restart,
            11 => Kind::Receiver,
            10 if brokers > 0 => Kind::Broker(rng.random_range(0..brokers)),
            0 | 1 => Kind::Kill(None),
            2 => Kind::Pause,
            3 | 4 => Kind::Terminate,
            5 | 6 => Kind::Cut,
            7 => Kind::Delay,
            _ => Kind::Stall,
        }
    }

    fn draw(self, rng: &mut StdRng, servers: usize) -> Fault {
        match self {
            Kind::Receiver => Fault::ReceiverFailing { lasting: millis(rng, 2_000..15_000) },
            Kind::Broker(broker) => Fault::Broker { broker, down: millis(rng, 5_000..25_000) },
            Kind::Kill(server) => Fault::Kill {
                server: server.unwrap_or_else(|| rng.random_range(0..servers)),
                down: millis(rng, 500..5_000),
            },
            Kind::Pause => {
                // One pause in three outlasts the sinks' 30 s lease.
                let stopped = if rng.random_bool(0.33) { 31_000..40_000 } else { 1_000..10_000 };
                Fault::Pause { server: rng.random_range(0..servers), stopped: millis(rng, stopped) }
            }
            Kind::Terminate => Fault::TerminateBackends { count: rng.random_range(1..6) },
            Kind::Cut => Fault::Cut,
            Kind::Delay => Fault::Delay { delay: millis(rng, 5..200), lasting: millis(rng, 1_000..8_000) },
            Kind::Stall => Fault::Stall { stalled: millis(rng, 500..4_000) },
            Kind::Restart => Fault::Restart,
        }
    }
}

fn millis(rng: &mut StdRng, range: std::ops::Range<u64>) -> Duration {
    Duration::from_millis(rng.random_range(range))
}

impl Fault {
    fn length(&self) -> Duration {
        match self {
            Fault::Kill { down, .. } => *down,
            Fault::Pause { stopped, .. } => *stopped,
            Fault::Stall { stalled } => *stalled,
            Fault::Delay { lasting, .. } => *lasting,
            Fault::Broker { down, .. } => *down,
            Fault::ReceiverFailing { lasting } => *lasting,
            Fault::TerminateBackends { .. } | Fault::Cut | Fault::Restart => Duration::ZERO,
        }
    }
}

/// What the faults act on.
pub(crate) struct Targets<'a> {
    pub(crate) servers: &'a mut [Server],
    pub(crate) brokers: &'a mut [Broker],
    pub(crate) receiver: &'a Receiver,
    pub(crate) ports: &'a Ports,
    pub(crate) proxy: &'a Proxy,
    /// A connection straight to the database (not through the proxy).
    pub(crate) admin: &'a sqlx::PgPool,
    pub(crate) database: &'a str,
    /// The run's own cluster, which [`Fault::Restart`] restarts.
    pub(crate) postgres: &'a mut EmbeddedPostgres,
    pub(crate) started: Instant,
}

impl Targets<'_> {
    /// Injects `fault` and heals it.
    pub(crate) async fn inject(&mut self, fault: &Fault) -> anyhow::Result<()> {
        println!("torture: t={:>6.1}s fault: {fault}", self.started.elapsed().as_secs_f64());
        match fault {
            Fault::Kill { server, down } => {
                self.servers[*server].kill();
                self.publish_ports();
                tokio::time::sleep(*down).await;
                let restarting = &mut self.servers[*server];
                tokio::task::block_in_place(|| restarting.restart())?;
                self.publish_ports();
            }
            Fault::Pause { server, stopped } => {
                self.servers[*server].pause();
                tokio::time::sleep(*stopped).await;
                self.servers[*server].resume();
            }
            Fault::TerminateBackends { count } => {
                let ended: Vec<bool> = sqlx::query_scalar(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                     WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'
                     ORDER BY random() LIMIT $2",
                )
                .bind(self.database)
                .bind(i64::from(*count))
                .fetch_all(self.admin)
                .await?;
                println!("torture:           ended {} backends", ended.iter().filter(|ended| **ended).count());
            }
            Fault::Restart => {
                let postgres = &mut *self.postgres;
                let took = Instant::now();
                tokio::task::block_in_place(|| postgres.restart_immediately())?;
                println!("torture:           PostgreSQL accepts connections again after {:.1?}", took.elapsed());
            }
            Fault::Cut => self.proxy.cut(),
            Fault::Stall { stalled } => self.proxy.stall(*stalled).await,
            Fault::ReceiverFailing { lasting } => self.receiver.fail_for(*lasting).await,
            Fault::Broker { broker, down } => {
                tokio::task::block_in_place(|| self.brokers[*broker].stop());
                tokio::time::sleep(*down).await;
                tokio::task::block_in_place(|| self.brokers[*broker].run())?;
            }
            Fault::Delay { delay, lasting } => {
                self.proxy.delay(*delay);
                tokio::time::sleep(*lasting).await;
                self.proxy.delay(Duration::ZERO);
            }
        }
        Ok(())
    }

    /// Every server running and continued.
    pub(crate) fn heal(&mut self) -> anyhow::Result<()> {
        for broker in self.brokers.iter_mut() {
            if !broker.is_running() {
                broker.run()?;
            }
        }
        for server in self.servers.iter_mut() {
            if server.is_stopped() {
                server.resume();
            }
            if server.port().is_none() {
                server.restart()?;
            }
        }
        self.publish_ports();
        Ok(())
    }

    fn publish_ports(&self) {
        *self.ports.lock() = self.servers.iter().map(Server::port).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_schedule_that_fits_the_run() {
        let length = Duration::from_secs(600);
        let first = schedule(7, length, 2, 2);
        assert_eq!(first, schedule(7, length, 2, 2), "the same seed, the same faults");
        assert_ne!(first, schedule(8, length, 2, 2));
        let total: Duration = first.iter().map(|(gap, fault)| *gap + fault.length()).sum();
        assert!(total <= length);
        let kinds: std::collections::HashSet<&str> = first.iter().map(|(_, fault)| fault.kind()).collect();
        assert_eq!(kinds.len(), 9, "ten minutes draw every kind: {kinds:?}");
    }

    #[test]
    fn the_ci_profile_injects_every_kind_stops_each_broker_and_kills_each_server() {
        for seed in 0..200 {
            let faults = schedule(seed, Duration::from_secs(180), 2, 4);
            let kinds: std::collections::HashSet<&str> = faults.iter().map(|(_, fault)| fault.kind()).collect();
            assert_eq!(kinds.len(), 9, "seed {seed}: {kinds:?}");
            for broker in 0..4 {
                let stopped =
                    faults.iter().any(|(_, fault)| matches!(fault, Fault::Broker { broker: b, .. } if *b == broker));
                assert!(stopped, "seed {seed}: broker {broker} never stopped");
            }
            for server in 0..2 {
                let killed =
                    faults.iter().any(|(_, fault)| matches!(fault, Fault::Kill { server: s, .. } if *s == server));
                assert!(killed, "seed {seed}: server {server} never killed");
            }
        }
    }
}
