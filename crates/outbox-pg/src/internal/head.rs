//! The head for many callers at once: one read serves every caller that asked before it began.
//!
//! A live stream "from now" starts at the head at open time (SPEC §5.4), which costs a query
//! per stream. When ten thousand streams open together, those queries queue for the pool,
//! and every opening stream waits with its request in memory. [`SharedHead`] reads the head
//! once for all of them: a caller waits for the first read that *begins after* it asked (so
//! the head it gets is at least the head at its own call, as a read of its own would be),
//! and reads run one after the other for as long as callers keep arriving: one in flight,
//! at most one more wanted.
//!
//! The read runs in a task of its own, so a caller that goes away (its client disconnected)
//! cuts nothing: the read completes and serves the others. A read that fails is not shared:
//! each caller it would have served reads the head on its own, and gets its own error.

use std::sync::{Arc, Mutex, PoisonError};

use outbox_core::Position;
use sqlx::PgPool;
use tokio::sync::watch;

use crate::Result;
use crate::read::head;

/// Reads the head once for every caller waiting on it (see the module documentation).
#[derive(Clone)]
pub struct SharedHead {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    rounds: Mutex<Rounds>,
    /// The last read to finish: its number and the head it found (`None`: it failed).
    finished: watch::Sender<(u64, Option<Position>)>,
}

/// Numbers the reads: the `n`-th read to begin is read `n`.
#[derive(Default)]
struct Rounds {
    /// How many reads have begun.
    begun: u64,
    /// The highest read number a caller waits for.
    wanted: u64,
    /// Whether a reading task is running.
    running: bool,
}

impl SharedHead {
    /// Shares head reads on `pool`.
    pub fn new(pool: PgPool) -> SharedHead {
        let inner = Inner { pool, rounds: Mutex::default(), finished: watch::channel((0, None)).0 };
        SharedHead { inner: Arc::new(inner) }
    }

    /// The newest position visible under the xmin rule, read after this call began: what
    /// [`head`] would return here, shared with every caller waiting at the same time.
    pub async fn head(&self) -> Result<Position> {
        let mut finished = self.inner.finished.subscribe();
        let wanted = {
            let mut rounds = self.inner.rounds.lock().unwrap_or_else(PoisonError::into_inner);
            let wanted = rounds.begun + 1;
            rounds.wanted = rounds.wanted.max(wanted);
            if !rounds.running {
                rounds.running = true;
                tokio::spawn(self.inner.clone().read_while_wanted());
            }
            wanted
        };
        let found = match finished.wait_for(|(number, _)| *number >= wanted).await {
            Ok(reading) => reading.1,
            Err(_) => None,
        };
        match found {
            Some(position) => Ok(position),
            None => head(&self.inner.pool).await,
        }
    }

    /// How many head reads have begun so far.
    pub fn reads(&self) -> u64 {
        self.inner.rounds.lock().unwrap_or_else(PoisonError::into_inner).begun
    }
}

impl Inner {
    /// Reads the head until no caller waits for a later read.
    async fn read_while_wanted(self: Arc<Inner>) {
        loop {
            let number = {
                let mut rounds = self.rounds.lock().unwrap_or_else(PoisonError::into_inner);
                rounds.begun += 1;
                rounds.begun
            };
            let found = head(&self.pool).await.ok();
            self.finished.send_replace((number, found));
            let mut rounds = self.rounds.lock().unwrap_or_else(PoisonError::into_inner);
            if rounds.wanted <= number {
                rounds.running = false;
                return;
            }
        }
    }
}

impl std::fmt::Debug for SharedHead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedHead").field("reads", &self.reads()).finish()
    }
}
