//! The dispatcher: one loop per sink, each under its lease (SPEC §7.1–7.4).
//!
//! [`Dispatcher::start`] spawns one task per [`SinkSpec`]. Each task tries for the
//! sink's lease `singleton:outbox-dispatch:<sink id>`; while it holds the lease it
//! reads after the sink's durable cursor (with the sink's tenant and type filters),
//! delivers batches in `(txid, seq)` order, and records each delivered batch with
//! a fenced cursor save. A second task renews the lease; when a renewal or a fenced save
//! finds the lease lost, the delivery in flight is dropped and nothing more is recorded or
//! delivered under that lease.
//!
//! Failures back off per sink (1 s doubling to 5 min, reset by a success) in that
//! sink's own task, so one sink's failures never delay another. A failing batch is
//! bisected down to single events; a poison event is dead-lettered only when the
//! event after it goes through (see [`deliver`](self) and SPEC §7.4).
//!
//! # Shutdown
//!
//! [`Dispatcher::shutdown`] starts no new delivery, lets the one in flight finish
//! for up to [`DispatcherConfig::shutdown_grace`] (recording it if it succeeded),
//! else abandons it without moving the cursor, then releases every lease it holds.
//! Dropping a [`Dispatcher`] instead aborts its tasks at once, like a crash: the
//! leases stay until they expire. An abort can cut a database call mid-way, and sqlx
//! 0.9 may then return that connection to the pool inside an open transaction (its
//! `begin` is not cancel safe), which holds every outbox reader back: drop a
//! dispatcher only with its own pool, and close that pool after it.
//!
//! A lost lease never cuts a database call: the loop notices it at its next wait or
//! delivery call, and a delivery in flight is dropped at once.

mod balance;
mod feed;
mod lanes;
mod runner;

pub(crate) use balance::Balancer;
pub(crate) use feed::Feed;
pub(crate) use lanes::lane_lease;
pub(crate) use runner::lease::SharedLease;
pub(crate) use runner::lease::keep_shared;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use outbox_core::Pattern;
use outbox_pg::sqlx::PgPool;
use outbox_pg::{Lane, MAX_LANES, MAX_LIMIT, ReadRequest};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::backoff::BackoffPolicy;
use crate::clock::{Clock, SystemClock};
use crate::state::{LocalState, SinkStatus, sink_status};
use crate::{Error, Result, Sink};

/// Which events a sink receives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkFilter {
    /// Only this tenant's events; `None` for every tenant.
    pub tenant: Option<String>,
    /// Only types matching one of these; empty means every type.
    pub types: Vec<Pattern>,
}

/// Where a loop keeps its lease, its cursor, its dead letters and its health: a
/// configured sink's own names by default ([`ConsumerNames::sink`]); a webhook
/// subscription's are its own (SPEC §7.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerNames {
    /// The lease the loop holds while it delivers.
    pub lease: String,
    /// The cursor's stream in `outbox_cursors`.
    pub cursor_stream: String,
    /// The cursor's name.
    pub cursor_name: String,
    /// The name its dead letters and health reports are kept under.
    pub records: String,
}

impl ConsumerNames {
    /// Sink `id`'s: lease `singleton:outbox-dispatch:<id>`, cursor `('outbox', 'sink:<id>')`,
    /// dead letters and health under `<id>`.
    pub fn sink(id: &str) -> ConsumerNames {
        ConsumerNames {
            lease: outbox_pg::internal::lease::dispatch_name(id),
            cursor_stream: outbox_pg::internal::cursor::OUTBOX_STREAM.to_owned(),
            cursor_name: outbox_pg::internal::cursor::sink_name(id),
            records: id.to_owned(),
        }
    }
}

/// A sink and how the dispatcher feeds it.
#[derive(Clone)]
pub struct SinkSpec {
    /// The sink.
    pub sink: Arc<dyn Sink>,
    /// Which events it receives.
    pub filter: SinkFilter,
    /// Events per delivery call, 1 to 1,000.
    pub batch: usize,
    /// How many times one event may fail before it can be dead-lettered (SPEC §7.4).
    pub max_attempts: u32,
    /// Where its lease, cursor, dead letters and health are kept.
    pub names: ConsumerNames,
    /// How many ordered lanes it delivers in, 1 to 256 (SPEC §7.7).
    pub lanes: u32,
}

impl SinkSpec {
    /// Every event for `sink`, 100 per call, 5 attempts.
    pub fn new(sink: impl Sink) -> SinkSpec {
        SinkSpec::shared(Arc::new(sink))
    }

    /// Like [`SinkSpec::new`] for a sink that is already shared.
    pub fn shared(sink: Arc<dyn Sink>) -> SinkSpec {
        let names = ConsumerNames::sink(sink.id());
        SinkSpec { sink, filter: SinkFilter::default(), batch: 100, max_attempts: 5, names, lanes: 1 }
    }

    /// Only `tenant`'s events.
    pub fn tenant(mut self, tenant: impl Into<String>) -> SinkSpec {
        self.filter.tenant = Some(tenant.into());
        self
    }

    /// Only types matching one of `types`.
    pub fn types(mut self, types: impl IntoIterator<Item = Pattern>) -> SinkSpec {
        self.filter.types = types.into_iter().collect();
        self
    }

    /// `batch` events per delivery call.
    pub fn batch(mut self, batch: usize) -> SinkSpec {
        self.batch = batch;
        self
    }

    /// `max_attempts` failures of one event before it can be dead-lettered.
    pub fn max_attempts(mut self, max_attempts: u32) -> SinkSpec {
        self.max_attempts = max_attempts;
        self
    }

    /// Delivers in `lanes` ordered lanes (SPEC §7.7): one loop per lane, each with its own
    /// cursor, lease, backoff and dead letters, in `(txid, seq)` order per subject.
    pub fn lanes(mut self, lanes: u32) -> SinkSpec {
        self.lanes = lanes;
        self
    }

    /// What reads its events: its tenant and types, every lane.
    pub(crate) fn read_request(&self) -> ReadRequest {
        ReadRequest { tenant_id: self.filter.tenant.clone(), patterns: self.filter.types.clone(), ..ReadRequest::all() }
    }

    /// Keeps the lease, cursor, dead letters and health under `names`.
    pub fn names(mut self, names: ConsumerNames) -> SinkSpec {
        self.names = names;
        self
    }

    pub(crate) fn check(&self) -> Result<()> {
        let id = self.sink.id();
        crate::sink::check_id(id)?;
        if !(1..=MAX_LIMIT).contains(&self.batch) {
            return Err(Error::config(format!("sinks[{id}].batch"), format!("must be 1 to {MAX_LIMIT}")));
        }
        if self.max_attempts == 0 {
            return Err(Error::config(format!("sinks[{id}].max_attempts"), "must be at least 1"));
        }
        if !(1..=MAX_LANES).contains(&self.lanes) {
            return Err(Error::config(format!("sinks[{id}].lanes"), format!("must be 1 to {MAX_LANES}")));
        }
        if self.lanes > 1
            && let Some(why) = self.sink.one_lane()
        {
            return Err(Error::config(format!("sinks[{id}].lanes"), format!("must be 1: {why}")));
        }
        Ok(())
    }
}

/// How the dispatcher runs every sink.
#[derive(Clone)]
pub struct DispatcherConfig {
    /// This worker's name in the lease table; unique per running dispatcher.
    pub holder: String,
    /// How long a lease lasts without renewal (default 30 s).
    pub lease_ttl: Duration,
    /// How often a held lease is renewed (default 10 s, a third of the TTL).
    pub lease_renew: Duration,
    /// How often a worker without the lease tries to take it (default 5 s).
    pub lease_retry: Duration,
    /// How long a caught-up sink waits before reading again (default 250 ms).
    pub poll_interval: Duration,
    /// The backoff schedule (default 1 s doubling to 5 min).
    pub backoff: BackoffPolicy,
    /// The longest one delivery call may take before it counts as failed (default 60 s).
    pub delivery_timeout: Duration,
    /// How long shutdown lets a delivery in flight finish (default 10 s).
    pub shutdown_grace: Duration,
    /// What backoff and `Retry-After` waits use, and what "until" is measured by.
    pub clock: Arc<dyn Clock>,
    /// The process's shared tail: with it, a caught-up loop waits until the tail hands it a
    /// matching event instead of reading every `poll_interval`, so idle loops run no
    /// queries of their own (default none).
    pub tail: Option<outbox_pg::Tail>,
    /// With a tail: the longest a caught-up loop waits without a word from it before it
    /// reads anyway (default 5 min).
    pub tail_fallback: Duration,
}

impl Default for DispatcherConfig {
    fn default() -> DispatcherConfig {
        DispatcherConfig {
            holder: default_holder(),
            lease_ttl: Duration::from_secs(30),
            lease_renew: Duration::from_secs(10),
            lease_retry: Duration::from_secs(5),
            poll_interval: Duration::from_millis(250),
            backoff: BackoffPolicy::default(),
            delivery_timeout: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(10),
            clock: Arc::new(SystemClock),
            tail: None,
            tail_fallback: Duration::from_secs(300),
        }
    }
}

/// A holder name unique to this dispatcher: `<host>:<pid>:<random>`.
pub fn default_holder() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|host| host.trim().to_owned())
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "localhost".into());
    let random = ulid::Ulid::generate().to_string().to_lowercase();
    format!("{host}:{}:{}", std::process::id(), &random[16..])
}

/// Spawns the loop of `spec` alone, stopping gracefully when `shutdown` turns true, under
/// its own lease or, with `shared`, under the one a keeper holds: what the webhook
/// deliveries run, one per subscription, each with its own shutdown, under its shard's lease.
#[cfg_attr(not(feature = "webhook"), allow(dead_code))]
pub(crate) fn spawn_loop(
    pool: PgPool,
    spec: &SinkSpec,
    config: Arc<DispatcherConfig>,
    shutdown: watch::Receiver<bool>,
    shared: Option<SharedLease>,
    lane: (Lane, Option<Arc<Feed>>),
) -> Result<(JoinHandle<()>, watch::Receiver<LocalState>)> {
    spec.check()?;
    let state = watch::Sender::new(LocalState::default());
    let receiver = state.subscribe();
    let runner = runner::Runner::new(pool, spec, config, state, shutdown, shared, lane);
    Ok((tokio::spawn(runner.run()), receiver))
}

/// One sink as the dispatcher keeps it.
struct Running {
    sink: Arc<dyn Sink>,
    filter: SinkFilter,
    /// Each lane's state, as the lane's loop here last left it.
    states: Vec<watch::Sender<LocalState>>,
}

/// The running sink loops of one process.
pub struct Dispatcher {
    pool: PgPool,
    holder: String,
    shutdown: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    sinks: Vec<Running>,
}

impl Dispatcher {
    /// Checks every spec (valid and unique ids, batch 1 to 1,000, at least one attempt),
    /// then spawns one loop per sink on the current tokio runtime.
    pub fn start(pool: PgPool, config: DispatcherConfig, specs: Vec<SinkSpec>) -> Result<Dispatcher> {
        let mut seen = HashSet::new();
        for spec in &specs {
            spec.check()?;
            if !seen.insert(spec.sink.id().to_owned()) {
                return Err(Error::config(format!("sinks[{}].id", spec.sink.id()), "is not unique"));
            }
        }
        if config.holder.is_empty() {
            return Err(Error::config("holder", "must not be empty"));
        }
        let config = Arc::new(config);
        let (shutdown, signal) = watch::channel(false);
        let mut dispatcher = Dispatcher {
            pool: pool.clone(),
            holder: config.holder.clone(),
            shutdown,
            tasks: Mutex::new(Vec::new()),
            sinks: Vec::new(),
        };
        for spec in specs {
            let states: Vec<_> = (0..spec.lanes).map(|_| watch::Sender::new(LocalState::default())).collect();
            let task = if spec.lanes == 1 {
                let lane = (Lane { index: 0, of: 1 }, None);
                let state = states[0].clone();
                let runner =
                    runner::Runner::new(pool.clone(), &spec, config.clone(), state, signal.clone(), None, lane);
                tokio::spawn(runner.run())
            } else {
                let lanes = lanes::Lanes::new(pool.clone(), spec.clone(), config.clone(), states.clone());
                tokio::spawn(lanes.run(signal.clone()))
            };
            dispatcher.tasks.get_mut().push(task);
            dispatcher.sinks.push(Running { sink: spec.sink, filter: spec.filter, states });
        }
        Ok(dispatcher)
    }

    /// This dispatcher's holder name.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The ids of its sinks, in the order they were given.
    pub fn sink_ids(&self) -> Vec<&str> {
        self.sinks.iter().map(|running| running.sink.id()).collect()
    }

    /// What this process knows of sink `id`'s loop; of a sink with lanes, its lanes' taken
    /// together ([`LocalState::merged`]).
    pub fn local_state(&self, id: &str) -> Option<LocalState> {
        let running = self.find(id).ok()?;
        let states: Vec<LocalState> = running.states.iter().map(|state| state.borrow().clone()).collect();
        Some(LocalState::merged(&states))
    }

    /// What this process knows of each lane of sink `id`, lane 0 first.
    pub fn lane_states(&self, id: &str) -> Option<Vec<LocalState>> {
        let running = self.find(id).ok()?;
        Some(running.states.iter().map(|state| state.borrow().clone()).collect())
    }

    /// Sink `id`'s local state (its lane 0's, for a sink with lanes) as it changes: a
    /// receiver that wakes on every change, to wait for a position or a state without polling.
    pub fn watch(&self, id: &str) -> Option<watch::Receiver<LocalState>> {
        self.find(id).ok().map(|running| running.states[0].subscribe())
    }

    /// The status of every sink (position, lag, state, last error, lease holder).
    pub async fn status(&self) -> Result<Vec<SinkStatus>> {
        let mut all = Vec::with_capacity(self.sinks.len());
        for running in &self.sinks {
            let local = self.local_state(running.sink.id());
            let lanes = u32::try_from(running.states.len()).unwrap_or(1);
            all.push(sink_status(&self.pool, running.sink.id(), &running.filter, lanes, local.as_ref()).await?);
        }
        Ok(all)
    }

    /// Delivers dead letter `id` of sink `sink_id` again and marks it replayed ([`crate::replay`]).
    pub async fn replay(&self, sink_id: &str, id: i64) -> Result<()> {
        crate::replay(&self.pool, self.find(sink_id)?.sink.as_ref(), id).await
    }

    /// The ids of the sinks whose loop ended without a shutdown (a panic in a sink, say):
    /// empty while every loop runs.
    pub fn ended_loops(&self) -> Vec<&str> {
        if *self.shutdown.borrow() {
            return Vec::new();
        }
        let tasks = self.tasks.lock();
        tasks.iter().zip(&self.sinks).filter(|(task, _)| task.is_finished()).map(|(_, r)| r.sink.id()).collect()
    }

    /// Whether sink `id` runs here.
    pub fn runs(&self, id: &str) -> bool {
        self.find(id).is_ok()
    }

    /// Stops every loop gracefully (see the module documentation) and waits for them. A second
    /// call returns at once.
    pub async fn shutdown(&self) {
        let _ = self.shutdown.send(true);
        let tasks = std::mem::take(&mut *self.tasks.lock());
        for task in tasks {
            let _ = task.await;
        }
    }

    fn find(&self, id: &str) -> Result<&Running> {
        self.sinks.iter().find(|running| running.sink.id() == id).ok_or_else(|| Error::UnknownSink(id.to_owned()))
    }
}

impl Drop for Dispatcher {
    /// Aborts whatever still runs, like a crash: nothing more is recorded, leases expire.
    fn drop(&mut self) {
        for task in self.tasks.get_mut().iter() {
            task.abort();
        }
    }
}
