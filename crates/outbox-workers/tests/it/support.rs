//! Helpers shared by the tests: events, dispatcher settings, a scriptable sink, a manual
//! clock, condition waits with deadlines, and the broker URLs.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use outbox_core::{Event, NewEvent, Position};
use outbox_pg::internal::cursor::{self, OUTBOX_STREAM, sink_name};
use outbox_pg::sqlx::PgPool;
use outbox_pg::testkit::TestDb;
use outbox_pg::{ReadRequest, read_page};
use outbox_workers::{BackoffPolicy, Clock, DispatcherConfig, Sink, SinkError};
use parking_lot::Mutex;
use serde_json::json;
use time::OffsetDateTime;
use tokio::sync::{mpsc, oneshot};

/// How long a test waits for a condition before it fails.
pub(crate) const DEADLINE: Duration = Duration::from_secs(30);

/// `n` events `node.joined` of tenant `acme`, numbered in `data.n`.
pub(crate) fn numbered(n: usize) -> Vec<NewEvent> {
    (0..n).map(|i| NewEvent::new("node.joined", "acme", format!("node/n{i}"), json!({ "n": i }))).collect()
}

/// Publishes `events` in one transaction.
pub(crate) async fn publish(pool: &PgPool, events: &[NewEvent]) {
    let mut tx = pool.begin().await.expect("begin");
    for chunk in events.chunks(10_000) {
        outbox_pg::publish_many(&mut *tx, chunk).await.expect("publish");
    }
    tx.commit().await.expect("commit");
}

/// Publishes `events`, then waits until all of them are visible and returns every visible event.
pub(crate) async fn publish_and_read(pool: &PgPool, events: &[NewEvent]) -> Vec<Event> {
    let before = all_events(pool).await.len();
    publish(pool, events).await;
    let want = before + events.len();
    wait_for("the events to become visible", || async { all_events(pool).await.len() >= want }).await;
    all_events(pool).await
}

/// Every visible event, oldest first.
pub(crate) async fn all_events(pool: &PgPool) -> Vec<Event> {
    let mut request = ReadRequest::all().limit(1_000);
    let mut events = Vec::new();
    loop {
        let page = read_page(pool, &request).await.expect("read");
        events.extend(page.events);
        if !page.more {
            return events;
        }
        request.after = Some(page.next_after);
    }
}

/// The durable cursor of sink `id`.
pub(crate) async fn cursor_of(pool: &PgPool, id: &str) -> Option<Position> {
    cursor::load(pool, OUTBOX_STREAM, &sink_name(id)).await.expect("load cursor")
}

/// Polls `condition` until it holds; panics naming `what` after [`DEADLINE`].
pub(crate) async fn wait_for<F, Fut>(what: &str, condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    outbox_e2e::wait::until(what, DEADLINE, condition).await;
}

/// Dispatcher settings for tests: a unique holder, short leases and polls, fast backoff.
pub(crate) fn fast_config() -> DispatcherConfig {
    DispatcherConfig {
        holder: outbox_workers::default_holder(),
        lease_ttl: Duration::from_secs(5),
        lease_renew: Duration::from_millis(500),
        lease_retry: Duration::from_millis(50),
        poll_interval: Duration::from_millis(10),
        backoff: BackoffPolicy { initial: Duration::from_millis(10), max: Duration::from_millis(100) },
        delivery_timeout: Duration::from_secs(20),
        shutdown_grace: Duration::from_secs(5),
        ..DispatcherConfig::default()
    }
}

/// A fresh database.
pub(crate) async fn db() -> TestDb {
    TestDb::new().await
}

/// A pool of its own on `db`, for a dispatcher the test kills by dropping it: closing this
/// pool afterwards closes whatever connection the abort cut mid-call.
pub(crate) async fn own_pool(db: &TestDb) -> PgPool {
    outbox_pg::sqlx::postgres::PgPoolOptions::new().max_connections(4).connect(&db.url).await.expect("own pool")
}

/// What a [`ScriptedSink`] answers for a batch.
pub(crate) type Script = dyn Fn(&[Event]) -> Result<(), SinkError> + Send + Sync;

/// One call a [`ScriptedSink`] received.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub positions: Vec<Position>,
    pub ok: bool,
    pub at: OffsetDateTime,
}

/// A sink that answers with a script and records every call.
#[derive(Clone)]
pub(crate) struct ScriptedSink {
    id: String,
    script: Arc<Script>,
    calls: Arc<Mutex<Vec<Call>>>,
    delivered: Arc<Mutex<Vec<Event>>>,
    clock: Option<Arc<dyn Clock>>,
}

impl ScriptedSink {
    /// A sink named `id` answering with `script`.
    pub(crate) fn new(
        id: &str,
        script: impl Fn(&[Event]) -> Result<(), SinkError> + Send + Sync + 'static,
    ) -> ScriptedSink {
        ScriptedSink {
            id: id.into(),
            script: Arc::new(script),
            calls: Arc::default(),
            delivered: Arc::default(),
            clock: None,
        }
    }

    /// A sink that takes everything.
    pub(crate) fn accepting(id: &str) -> ScriptedSink {
        ScriptedSink::new(id, |_| Ok(()))
    }

    /// Stamps calls with `clock` instead of the wall clock.
    pub(crate) fn with_clock(mut self, clock: Arc<dyn Clock>) -> ScriptedSink {
        self.clock = Some(clock);
        self
    }

    /// Every call so far.
    pub(crate) fn calls(&self) -> Vec<Call> {
        self.calls.lock().clone()
    }

    /// Every event of every successful call, in delivery order.
    pub(crate) fn delivered(&self) -> Vec<Event> {
        self.delivered.lock().clone()
    }
}

impl Sink for ScriptedSink {
    fn id(&self) -> &str {
        &self.id
    }

    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), SinkError>> {
        let result = (self.script)(batch);
        let at = self.clock.as_ref().map_or_else(OffsetDateTime::now_utc, |clock| clock.now());
        let positions = batch.iter().map(|e| e.sequence).collect();
        self.calls.lock().push(Call { positions, ok: result.is_ok(), at });
        if result.is_ok() {
            self.delivered.lock().extend_from_slice(batch);
        }
        Box::pin(async move { result })
    }
}

/// A clock whose sleeps wait until the test lets them end; time moves only then.
pub(crate) struct ManualClock {
    start: OffsetDateTime,
    elapsed: Mutex<Duration>,
    requests: mpsc::UnboundedSender<(Duration, oneshot::Sender<()>)>,
}

/// The sleeps a [`ManualClock`] was asked for, in order.
pub(crate) struct Sleeps {
    clock: Arc<ManualClock>,
    requests: mpsc::UnboundedReceiver<(Duration, oneshot::Sender<()>)>,
}

/// One sleep in progress.
pub(crate) struct Sleep {
    pub duration: Duration,
    clock: Arc<ManualClock>,
    wake: oneshot::Sender<()>,
}

impl ManualClock {
    pub(crate) fn new() -> (Arc<ManualClock>, Sleeps) {
        let (sender, requests) = mpsc::unbounded_channel();
        let clock = Arc::new(ManualClock {
            start: OffsetDateTime::now_utc(),
            elapsed: Mutex::new(Duration::ZERO),
            requests: sender,
        });
        (clock.clone(), Sleeps { clock, requests })
    }
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        self.start + *self.elapsed.lock()
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        let (wake, woken) = oneshot::channel();
        let _ = self.requests.send((duration, wake));
        Box::pin(async move {
            if woken.await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

impl Sleeps {
    /// The next sleep the dispatcher asks for; panics after [`DEADLINE`].
    pub(crate) async fn next(&mut self) -> Sleep {
        let (duration, wake) = tokio::time::timeout(DEADLINE, self.requests.recv())
            .await
            .expect("timed out waiting for the dispatcher to sleep")
            .expect("the clock is gone");
        Sleep { duration, clock: self.clock.clone(), wake }
    }
}

impl Sleep {
    /// Moves the clock forward by the sleep's duration and ends it.
    pub(crate) fn wake(self) {
        *self.clock.elapsed.lock() += self.duration;
        let _ = self.wake.send(());
    }
}

pub(crate) use outbox_e2e::services::{kafka_bootstrap, nats_url, rabbitmq_stream_url, redis_url};

/// A short random suffix for names shared on a broker (streams, keys, subjects).
pub(crate) fn unique(prefix: &str) -> String {
    format!("{prefix}{}", ulid::Ulid::generate().to_string().to_lowercase())
}

/// One row of the history [`record_history`] keeps: a cursor write or a lease acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Written {
    /// A cursor moved to `position`, written by a connection whose `application_name` is
    /// `writer`, while the lease row named `holder` at `epoch`.
    Cursor { position: Position, writer: String, holder: String, epoch: i64 },
    /// `holder` acquired the lease, getting `epoch`.
    Lease { holder: String, epoch: i64 },
}

/// Installs triggers that record, in commit order, every cursor write (with the writing
/// connection's `application_name` and the lease row it saw) and every lease acquisition,
/// for the sink `id`. Writes to one cursor row and acquisitions of the lease are serialized
/// by row locks (the fence holds the lease row `FOR SHARE`), so the order of `id` is the
/// order in which they committed.
pub(crate) async fn record_history(pool: &PgPool, id: &str) {
    let sql = format!(
        "CREATE TABLE test_history (id bigserial PRIMARY KEY, kind text, txid xid8, seq bigint, writer text, holder text, epoch bigint);
         CREATE FUNCTION test_record_cursor() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
            INSERT INTO test_history (kind, txid, seq, writer, holder, epoch)
            SELECT 'cursor', NEW.txid, NEW.seq, current_setting('application_name'), l.holder, l.epoch
            FROM outbox_leases l
            WHERE l.name = 'singleton:outbox-dispatch:{id}';
            RETURN NEW;
         END $$;
         CREATE TRIGGER test_record_cursor AFTER INSERT OR UPDATE ON outbox_cursors
            FOR EACH ROW WHEN (NEW.name = 'sink:{id}') EXECUTE FUNCTION test_record_cursor();
         CREATE FUNCTION test_record_lease() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
            IF TG_OP = 'INSERT' OR NEW.epoch <> OLD.epoch THEN
                INSERT INTO test_history (kind, holder, epoch) VALUES ('lease', NEW.holder, NEW.epoch);
            END IF;
            RETURN NEW;
         END $$;
         CREATE TRIGGER test_record_lease AFTER INSERT OR UPDATE ON outbox_leases
            FOR EACH ROW EXECUTE FUNCTION test_record_lease();"
    );
    outbox_pg::sqlx::raw_sql(outbox_pg::sqlx::AssertSqlSafe(sql)).execute(pool).await.expect("history triggers");
}

/// The history [`record_history`] kept, in order.
pub(crate) async fn history(pool: &PgPool) -> Vec<Written> {
    type Row = (String, Option<String>, Option<i64>, Option<String>, String, i64);
    let rows: Vec<Row> =
        outbox_pg::sqlx::query_as("SELECT kind, txid::text, seq, writer, holder, epoch FROM test_history ORDER BY id")
            .fetch_all(pool)
            .await
            .expect("reading the history");
    rows.into_iter()
        .map(|(kind, txid, seq, writer, holder, epoch)| match kind.as_str() {
            "cursor" => {
                let txid = txid.and_then(|t| t.parse().ok()).unwrap_or(0);
                let position = Position::new(txid, seq.and_then(|s| u64::try_from(s).ok()).unwrap_or(0));
                Written::Cursor { position, writer: writer.unwrap_or_default(), holder, epoch }
            }
            _ => Written::Lease { holder, epoch },
        })
        .collect()
}

/// The positions of the cursor writes in `history`.
pub(crate) fn cursor_writes(history: &[Written]) -> Vec<Position> {
    history
        .iter()
        .filter_map(|w| match w {
            Written::Cursor { position, .. } => Some(*position),
            Written::Lease { .. } => None,
        })
        .collect()
}

/// Wraps a sink; on call number `on_call` (0-based) it delivers only the first half of the
/// batch, says so, and never returns: the moment to kill the dispatcher "mid-batch".
pub(crate) struct Interrupting {
    inner: Box<dyn Sink>,
    on_call: usize,
    calls: std::sync::atomic::AtomicUsize,
    /// Notified once the half batch went through.
    pub interrupted: Arc<tokio::sync::Notify>,
}

impl Interrupting {
    pub(crate) fn new(inner: Box<dyn Sink>, on_call: usize) -> Interrupting {
        Interrupting { inner, on_call, calls: Default::default(), interrupted: Arc::default() }
    }
}

impl Sink for Interrupting {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) != self.on_call {
                return self.inner.deliver(batch).await;
            }
            self.inner.deliver(&batch[..batch.len() / 2]).await?;
            self.interrupted.notify_one();
            std::future::pending().await
        })
    }

    fn deliver_numbered<'a>(&'a self, batch: &'a [Event], first: u64) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) != self.on_call {
                return self.inner.deliver_numbered(batch, first).await;
            }
            self.inner.deliver_numbered(&batch[..batch.len() / 2], first).await?;
            self.interrupted.notify_one();
            std::future::pending().await
        })
    }
}

/// Runs `config`'s sink under a dispatcher on a pool of its own, batches of 50, and kills the
/// dispatcher (and its pool) in the middle of the third batch: a crash after two delivered batches.
pub(crate) async fn kill_during_third_batch(db: &TestDb, config: &outbox_workers::config::SinkConfig) {
    let first = Interrupting::new(outbox_workers::config::build_sink(config).unwrap(), 2);
    let interrupted = first.interrupted.clone();
    let doomed = own_pool(db).await;
    let spec = outbox_workers::SinkSpec::new(first).batch(50);
    let dispatcher = outbox_workers::Dispatcher::start(doomed.clone(), fast_config(), vec![spec]).unwrap();
    tokio::time::timeout(Duration::from_secs(30), interrupted.notified()).await.expect("the third batch");
    drop(dispatcher);
    doomed.close().await;
}
