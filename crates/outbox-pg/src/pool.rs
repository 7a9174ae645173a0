//! The pool settings every outbox process uses: [`options`].
//!
//! sqlx tests each connection with a ping, a round trip of its own, every time it leaves the
//! pool (`test_before_acquire`). A busy outbox takes connections out constantly (each page
//! read, each cursor save, each history request), so the ping doubles their round trips
//! while it almost never finds anything: a connection used a moment ago is alive. These
//! options ping only a connection that sat idle for [`PING_AFTER_IDLE`] or longer, where a
//! restarted server or a dropped link could have broken it unnoticed. Under load a
//! connection comes back within milliseconds and is never pinged; a lightly used pool pings
//! as before; and after a database restart longer than a second, every connection left from
//! before it is pinged and replaced before use. A connection that breaks while in use fails
//! its statement, and the caller's own retry (a sink's backoff, a client's retried request)
//! gets a fresh one; sqlx never returns a broken connection to the pool.

use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::PgPoolOptions;

/// How long a connection may sit idle before it is pinged on its way out of the pool.
pub const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// Pool options that ping only connections idle for [`PING_AFTER_IDLE`] or longer; set the
/// size and timeouts on top.
///
/// ```no_run
/// # async fn demo() -> Result<(), sqlx::Error> {
/// let pool = outbox_pg::pool::options().max_connections(20).connect("postgres://localhost/app").await?;
/// # Ok(()) }
/// ```
pub fn options() -> PgPoolOptions {
    options_pinging_after(PING_AFTER_IDLE)
}

/// Pool options that ping a connection on its way out of the pool only when it sat idle for
/// `idle` or longer (`Duration::ZERO`: every time, as sqlx does by default).
pub fn options_pinging_after(idle: Duration) -> PgPoolOptions {
    PgPoolOptions::new().test_before_acquire(false).before_acquire(move |connection, meta| {
        Box::pin(async move {
            if meta.idle_for >= idle {
                connection.ping().await?;
            }
            Ok(true)
        })
    })
}
