//! A sink of several ordered lanes in one process (SPEC §7.7).
//!
//! Lane `i` of sink `id` is a loop of its own under lease `singleton:outbox-dispatch:<id>#<i>`
//! with cursor `sink:<id>#<i>/<lanes>`. The lanes are spread over the processes that run the
//! sink ([`Balancer`], member leases `singleton:outbox-dispatch-member:<id>:<holder>`): every
//! `lease_retry` this process gives back the lanes it holds above its fair share and takes
//! free ones up to it, and starts a lane's loop under each lease it takes. A lane's loop
//! stops when its lease is lost (the loop notices it at once; its next wait or delivery call
//! ends the work) or given back (gracefully, first). The lanes' loops here read through one
//! [`Feed`].

use std::collections::HashMap;
use std::sync::Arc;

use outbox_pg::Lane;
use outbox_pg::sqlx::PgPool;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::runner::{self, raised};
use super::{Balancer, DispatcherConfig, Feed, SinkSpec};
use crate::state::LocalState;

/// The prefix of sink `id`'s member leases.
fn member_prefix(id: &str) -> String {
    format!("singleton:outbox-dispatch-member:{id}:")
}

/// The lease of lane `index` of a sink whose own lease is `lease`.
pub(crate) fn lane_lease(lease: &str, index: u32) -> String {
    format!("{lease}#{index}")
}

/// One laned sink's loops in this process.
pub(super) struct Lanes {
    pool: PgPool,
    spec: SinkSpec,
    config: Arc<DispatcherConfig>,
    states: Vec<watch::Sender<LocalState>>,
    feed: Arc<Feed>,
    leases: Balancer,
    /// Every lane's lease name, lane 0 first.
    set: Vec<String>,
    running: HashMap<u32, (watch::Sender<bool>, JoinHandle<()>)>,
}

impl Lanes {
    pub(super) fn new(
        pool: PgPool,
        spec: SinkSpec,
        config: Arc<DispatcherConfig>,
        states: Vec<watch::Sender<LocalState>>,
    ) -> Lanes {
        let set = (0..spec.lanes).map(|index| lane_lease(&spec.names.lease, index)).collect();
        Lanes {
            feed: Arc::new(Feed::new(pool.clone(), spec.read_request())),
            leases: Balancer::new(pool.clone(), config.clone(), member_prefix(spec.sink.id())),
            pool,
            spec,
            config,
            states,
            set,
            running: HashMap::new(),
        }
    }

    /// Balances the lanes and runs the loops of those held here until shutdown; then stops
    /// them gracefully and gives every lease back.
    pub(super) async fn run(mut self, shutdown: watch::Receiver<bool>) {
        while !*shutdown.borrow() {
            for name in self.leases.forget_lost() {
                self.stop(self.lane_of(&name)).await;
            }
            if let Err(error) = self.balance(&shutdown).await {
                tracing::warn!(sink = self.spec.sink.id(), %error, "taking the sink's lanes failed; trying again");
            }
            tokio::select! {
                () = tokio::time::sleep(self.config.lease_retry) => {}
                () = raised(shutdown.clone()) => {}
            }
        }
        let lanes: Vec<u32> = self.running.keys().copied().collect();
        for lane in lanes {
            self.stop(lane).await;
        }
        self.leases.release_all().await;
    }

    /// Gives back the lanes above this process's share, takes free ones up to it, and
    /// starts a loop for each lane held whose loop does not run.
    async fn balance(&mut self, shutdown: &watch::Receiver<bool>) -> crate::Result<()> {
        let fair = self.leases.fair_share(self.set.len()).await?;
        for name in self.leases.above_share(&self.set, fair) {
            self.stop(self.lane_of(&name)).await;
            self.leases.release(&name).await;
        }
        self.leases.take_share(&self.set, fair).await?;
        for (index, name) in self.set.iter().enumerate() {
            let index = u32::try_from(index).expect("at most 256 lanes");
            let Some(held) = self.leases.held(name) else { continue };
            if self.running.get(&index).is_some_and(|(_, task)| !task.is_finished()) {
                continue;
            }
            let (stop, signal) = watch::channel(false);
            let signal = either_raised(signal, shutdown.clone());
            let lane = (Lane { index, of: self.spec.lanes }, Some(self.feed.clone()));
            let state = self.states[index as usize].clone();
            let runner = runner::Runner::new(
                self.pool.clone(),
                &self.spec,
                self.config.clone(),
                state,
                signal,
                Some(held.published.clone()),
                lane,
            );
            self.running.insert(index, (stop, tokio::spawn(runner.run())));
        }
        Ok(())
    }

    /// Stops lane `index`'s loop gracefully and waits for it.
    async fn stop(&mut self, index: u32) {
        if let Some((stop, task)) = self.running.remove(&index) {
            let _ = stop.send(true);
            let _ = task.await;
        }
    }

    fn lane_of(&self, name: &str) -> u32 {
        self.set.iter().position(|lane| lane == name).and_then(|index| u32::try_from(index).ok()).unwrap_or(u32::MAX)
    }
}

impl Drop for Lanes {
    /// Aborts the loops, like a crash: their leases expire.
    fn drop(&mut self) {
        for (_, task) in self.running.values() {
            task.abort();
        }
    }
}

/// A flag raised when either `own` or `shutdown` is.
fn either_raised(own: watch::Receiver<bool>, shutdown: watch::Receiver<bool>) -> watch::Receiver<bool> {
    let (raise, flag) = watch::channel(*shutdown.borrow());
    tokio::spawn(async move {
        tokio::select! {
            () = raised(own) => {}
            () = raised(shutdown) => {}
            () = raise.closed() => return,
        }
        raise.send_replace(true);
    });
    flag
}
