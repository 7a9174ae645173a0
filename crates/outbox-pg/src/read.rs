//! The xmin read: how every reader takes rows from the outbox (SPEC §4).
//!
//! `seq` is drawn when a row is inserted, not when its transaction commits, so
//! a reader that walks `seq` can hand out 42 and then never see 41, committed a
//! moment later by a slower transaction. [`read`] therefore takes only rows of
//! transactions older than its snapshot's xmin
//! (`txid < pg_snapshot_xmin(pg_current_snapshot())`), all of which have
//! finished, and orders them by `(txid, seq)`: nothing can ever commit behind a
//! position once it was handed out. The price is latency: a row becomes visible
//! only when every older transaction has finished.
//!
//! The tenant is part of the query (the `outbox_tenant_cursor` index); type
//! patterns and the subject filter the scanned rows. A filtered read examines
//! at most [`ReadRequest::scan_limit`] rows and reports how far it got in
//! [`ReadPage::next_after`], so a reader whose filter matches nothing still
//! advances instead of re-scanning the same rows forever.

use outbox_core::{Data, Event, Pattern, Position, millis};
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgRow, PgValueFormat, PgValueRef};
use sqlx::{AssertSqlSafe, Decode, PgExecutor, PgPool, Postgres, Row as _};
use time::OffsetDateTime;

use crate::Lane;
use crate::xid8::{Xid8, position, seq_column};
use crate::{Error, Result};

/// The most events one read returns (the history API's own maximum).
pub const MAX_LIMIT: usize = 1_000;
/// The most rows one read examines. `cargo xtask explain` checks that reads of this size
/// still walk the index in order instead of collecting and sorting a tenant's rows.
pub const MAX_SCAN: usize = 1_001;
/// The default number of rows a filtered read examines.
pub const DEFAULT_SCAN_LIMIT: usize = 1_000;

/// What to read: whose events, which, after where, and how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest {
    /// Only this tenant's events; `None` reads every tenant.
    pub tenant_id: Option<String>,
    /// Only types matching one of these; empty (or containing `*`) means every type.
    pub patterns: Vec<Pattern>,
    /// Only events about this exact subject.
    pub subject: Option<String>,
    /// Read strictly after this position (strictly before it when `descending`); `None`
    /// starts at the oldest row still stored (at the newest visible one when `descending`).
    pub after: Option<Position>,
    /// The most events to return, 1 to [`MAX_LIMIT`].
    pub limit: usize,
    /// The most rows a filtered read examines before it reports how far it got
    /// (kept within `limit + 1 ..= MAX_SCAN`).
    pub scan_limit: usize,
    /// Newest first: the page holds the newest visible events before `after`, and
    /// [`ReadPage::next_after`] is where the next, older, page starts.
    pub descending: bool,
    /// Only events of this ordered lane (SPEC §7.7): `outbox_subject_lane(subject, of) = index`.
    pub lane: Option<Lane>,
}

impl Default for ReadRequest {
    fn default() -> ReadRequest {
        ReadRequest {
            tenant_id: None,
            patterns: Vec::new(),
            subject: None,
            after: None,
            limit: 100,
            scan_limit: DEFAULT_SCAN_LIMIT,
            descending: false,
            lane: None,
        }
    }
}

impl ReadRequest {
    /// Every tenant's events, from the oldest, 100 at a time.
    pub fn all() -> ReadRequest {
        ReadRequest::default()
    }

    /// One tenant's events, from the oldest, 100 at a time.
    pub fn tenant(tenant_id: impl Into<String>) -> ReadRequest {
        ReadRequest { tenant_id: Some(tenant_id.into()), ..ReadRequest::default() }
    }

    /// Only types matching one of `patterns`.
    pub fn types(mut self, patterns: impl IntoIterator<Item = Pattern>) -> ReadRequest {
        self.patterns = patterns.into_iter().collect();
        self
    }

    /// Only events about `subject`.
    pub fn subject(mut self, subject: impl Into<String>) -> ReadRequest {
        self.subject = Some(subject.into());
        self
    }

    /// Only events of `lane` (`None`: every lane).
    pub fn lane(mut self, lane: impl Into<Option<Lane>>) -> ReadRequest {
        self.lane = lane.into();
        self
    }

    /// Strictly after `position` (`None`: from the oldest row).
    pub fn after(mut self, position: impl Into<Option<Position>>) -> ReadRequest {
        self.after = position.into();
        self
    }

    /// At most `limit` events.
    pub fn limit(mut self, limit: usize) -> ReadRequest {
        self.limit = limit;
        self
    }

    /// Newest first (`true`): see [`ReadRequest::descending`].
    pub fn descending(mut self, descending: bool) -> ReadRequest {
        self.descending = descending;
        self
    }

    /// The position the read starts from, exclusive (`$1`, `$2` of [`statement`]): `after`,
    /// or the start (the end when descending) when it is `None`.
    pub fn bound(&self) -> Position {
        match (self.after, self.descending) {
            (Some(after), _) => after,
            (None, false) => Position::START,
            (None, true) => Position::new(u64::MAX, i64::MAX as u64),
        }
    }

    fn type_filter(&self) -> Option<Vec<String>> {
        let filtered = !self.patterns.is_empty() && !self.patterns.iter().any(Pattern::is_all);
        filtered.then(|| self.patterns.iter().map(Pattern::to_sql_like).collect())
    }

    fn is_filtered(&self) -> bool {
        self.subject.is_some() || self.type_filter().is_some() || self.lane.is_some()
    }

    /// The lane's index and count (`$8`, `$9` of [`statement`]).
    pub fn lane_binds(&self) -> (Option<i32>, Option<i32>) {
        let bind = |n: u32| i32::try_from(n).ok();
        (self.lane.and_then(|lane| bind(lane.index)), self.lane.and_then(|lane| bind(lane.of)))
    }

    /// How many rows the read examines (`$3` of [`statement`]): one more than `limit`
    /// without a filter; with one, `scan_limit` within `limit + 1 ..= MAX_SCAN`.
    pub fn rows_to_scan(&self) -> usize {
        if self.is_filtered() { self.scan_limit.clamp(self.limit + 1, MAX_SCAN) } else { self.limit + 1 }
    }

    /// The LIKE patterns of the type filter (`$6` of [`statement`]); `None` when every type matches.
    pub fn like_patterns(&self) -> Option<Vec<String>> {
        self.type_filter()
    }
}

/// One read's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadPage {
    /// The matching events, in `(txid, seq)` order.
    pub events: Vec<Event>,
    /// Where the next read continues: the last event returned, or the last row
    /// examined when the filter skipped rows after it. Never behind `after`.
    pub next_after: Position,
    /// Whether rows after `next_after` were already visible: read again at once.
    /// `false` means the read reached the visible end of the outbox.
    pub more: bool,
    /// How far the reader now has everything it will ever be given: `next_after` while
    /// `more`, and at the visible end `(xmin, 0)`, the start of the transactions the read's
    /// snapshot still waited for (never behind `next_after`). Every row before it has
    /// committed or never will, so a reader may resume after it (or join a reader that is
    /// there) without a gap. See [`complete_through`].
    pub complete_through: Position,
    /// The xmin of the read's snapshot: every transaction below it had finished, so
    /// `(snapshot_xmin, 0)` is complete for every tenant, not only the one read.
    pub snapshot_xmin: u64,
}

/// How far a read that stopped at `next_after` has everything, given its snapshot's `xmin`:
/// `next_after` when rows after it were already visible (`more`), else `(xmin, 0)` when that is
/// further. No row is at `(xmin, 0)` (`seq` starts at 1), and every transaction below `xmin`
/// had finished when the read ran, so no row can ever appear at or before that position
/// that the read did not see.
pub fn complete_through(next_after: Position, more: bool, xmin: u64) -> Position {
    if more { next_after } else { next_after.max(Position::new(xmin, 0)) }
}

/// One page of committed events after `request`'s position, with the xmin rule (SPEC §4).
///
/// It takes only rows of transactions older than its snapshot's xmin, all of which have
/// finished, ordered by `(txid, seq)`: no event can ever commit at or before a position
/// once a page handed it out, so resuming after [`ReadPage::next_after`] skips nothing.
/// The price is latency: a row becomes visible only when every older transaction has
/// finished. A filtered read examines at most [`ReadRequest::scan_limit`] rows and still
/// advances [`ReadPage::next_after`] past the rows its filter skipped.
pub async fn read_page<'e>(executor: impl PgExecutor<'e>, request: &ReadRequest) -> Result<ReadPage> {
    if !(1..=MAX_LIMIT).contains(&request.limit) {
        return Err(Error::InvalidRequest(format!("limit must be 1 to {MAX_LIMIT} (got {})", request.limit)));
    }
    let scan_limit = request.rows_to_scan();
    let after = request.bound();
    let rows: Vec<Row> = sqlx::query(AssertSqlSafe(statement(request)))
        .bind(Xid8(after.txid))
        .bind(seq_column(after))
        .bind(i64::try_from(scan_limit).unwrap_or(i64::MAX))
        .bind(i64::try_from(request.limit + 1).unwrap_or(i64::MAX))
        .bind(&request.tenant_id)
        .bind(request.type_filter())
        .bind(&request.subject)
        .bind(request.lane_binds().0)
        .bind(request.lane_binds().1)
        .try_map(decode_row)
        .fetch_all(executor)
        .await?;
    let order = Order { after, descending: request.descending };
    if request.is_filtered() {
        page_from_rows(rows, order, request.limit, scan_limit)
    } else {
        page_from_plain_rows(rows, order, request.limit)
    }
}

/// Reads like [`read_page`], and a page that reaches the visible end without an event also moves
/// [`ReadPage::next_after`] up to the [`head`]: a consumer that follows one tenant need not
/// walk the other tenants' rows to keep up.
///
/// A read without a tenant already ends at the last row it examined, so it is [`read_page`]
/// itself. A tenant's read walks `outbox_tenant_cursor` and sees only that tenant's rows, so
/// its page ends at the tenant's last row; this one then takes the head in the same
/// snapshot, and every row up to it was visible to the page's read and none was the
/// tenant's, so passing them all skips nothing.
///
/// # Snapshot and locks
///
/// With a tenant, a `REPEATABLE READ, READ ONLY` transaction on a connection of `pool`: the
/// page and the head read one snapshot (the xmin of both is the same). It takes no row lock,
/// only the `ACCESS SHARE` lock on `outbox` that any read takes, and keeps its snapshot from
/// the page's read to the head's, two short statements: it holds the xmin horizon back about
/// as long as a single read.
///
/// # Cancel safety
///
/// Not cancel safe: dropped between `BEGIN` and its answer, sqlx 0.9 may return the
/// connection to the pool inside the open transaction. Run it to completion (in a task of
/// its own when the caller may go away).
pub async fn read_to_head(pool: &PgPool, request: &ReadRequest) -> Result<ReadPage> {
    if request.tenant_id.is_none() {
        return read_page(pool, request).await;
    }
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY").execute(&mut *tx).await?;
    let mut page = read_page(&mut *tx, request).await?;
    if page.events.is_empty() && !page.more {
        page.next_after = page.next_after.max(head(&mut *tx).await?);
    }
    tx.commit().await?;
    Ok(page)
}

/// The statement of [`head`] (public for `EXPLAIN`): a backward walk of `outbox_txid_seq`.
pub const HEAD_STATEMENT: &str = "SELECT txid, seq FROM outbox WHERE txid < pg_snapshot_xmin(pg_current_snapshot())
     ORDER BY txid DESC, seq DESC LIMIT 1";

/// The newest position visible under the xmin rule: where a stream "from now" starts.
pub async fn head<'e>(executor: impl PgExecutor<'e>) -> Result<Position> {
    let row: Option<(Xid8, i64)> = sqlx::query_as(HEAD_STATEMENT).fetch_optional(executor).await?;
    Ok(row.map_or(Position::START, |(txid, seq)| position(txid, seq)))
}

/// The statement [`read_page`] runs for this request's shape (public for `EXPLAIN`).
///
/// Binds: `$1` after txid (`xid8`), `$2` after seq, `$3` rows to scan, `$4` events to
/// return plus one, `$5` tenant, `$6` LIKE patterns, `$7` subject, `$8` and `$9` the lane's
/// index and count. Only fixed fragments
/// are interpolated; every value is bound. Each shape is its own statement, so the planner
/// picks the tenant index or the global one rather than one generic plan for both.
///
/// A read without a type or subject filter returns every row it scans, so it needs no scan
/// count and no summary row: it is one index walk, each row carrying the snapshot's xmin
/// (one row of NULLs, but the xmin, when nothing is visible). It is the shape of the shared
/// tail, of unfiltered sinks and history pages, and costs about half the planning and
/// executing of the general one.
///
/// A descending read is the same statement walked the other way: rows strictly before
/// `($1, $2)`, newest first, with the same xmin rule, so that no row can ever commit
/// between two of its pages either.
pub fn statement(request: &ReadRequest) -> String {
    let (beyond, order, reverse) = if request.descending {
        ("<", "txid DESC, seq DESC", "txid, seq")
    } else {
        (">", "txid, seq", "txid DESC, seq DESC")
    };
    let tenant = if request.tenant_id.is_some() { "AND payload->>'tenantId' = $5" } else { "AND $5::text IS NULL" };
    if !request.is_filtered() {
        return format!(
            "SELECT o.txid, o.seq, o.topic, {FIELDS}, NULL::bigint AS scanned, s.xmin
            FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) s
            LEFT JOIN LATERAL (
                SELECT txid, seq, topic, payload, created_at FROM outbox
                WHERE txid < s.xmin AND (txid, seq) {beyond} ($1, $2) {tenant}
                    -- always true here: every shape takes the same nine binds
                    AND $3::bigint = $4 AND $6::text[] IS NULL AND $7::text IS NULL
                    AND $8::int IS NULL AND $9::int IS NULL
                ORDER BY {order} LIMIT $4
            ) o ON true"
        );
    }
    let types = if request.type_filter().is_some() { "AND topic LIKE ANY($6)" } else { "AND $6::text[] IS NULL" };
    let subject = if request.subject.is_some() { "AND payload->>'subject' = $7" } else { "AND $7::text IS NULL" };
    let lane = if request.lane.is_some() {
        "AND outbox_subject_lane(payload->>'subject', $9) = $8"
    } else {
        "AND $8::int IS NULL AND $9::int IS NULL"
    };
    format!(
        "WITH scan AS (
            SELECT txid, seq, topic, payload, created_at FROM outbox
            WHERE txid < pg_snapshot_xmin(pg_current_snapshot()) AND (txid, seq) {beyond} ($1, $2) {tenant}
            ORDER BY {order} LIMIT $3
        ), hits AS (
            SELECT txid, seq, topic, payload, created_at FROM scan WHERE true {types} {subject} {lane}
            ORDER BY {order} LIMIT $4
        )
        SELECT txid, seq, topic, {FIELDS}, NULL::bigint AS scanned, NULL::xid8 AS xmin FROM hits
        UNION ALL
        SELECT last.txid, last.seq, NULL, NULL, NULL, NULL, NULL, NULL, NULL, counted.n, pg_snapshot_xmin(pg_current_snapshot())
        FROM (SELECT count(*) AS n FROM scan) counted
        LEFT JOIN LATERAL (SELECT txid, seq FROM scan ORDER BY {reverse} LIMIT 1) last ON true"
    )
}

/// The payload's fields each read takes as columns, in [`Fields`]' order. PostgreSQL writes a
/// string field as its text, unescaped, and only `data` as JSON: on pages of small events
/// that costs the server 1.1 µs a row against 1.4 for writing the whole `jsonb` out, and
/// spares the reader parsing it. The time is `created_at`; rows written before
/// `core/0016_payload_time` carry it in the payload too, and that copy wins.
const FIELDS: &str =
    "payload->>'id', payload->>'tenantId', payload->>'subject', payload->>'time', created_at, payload->'data'";

/// A row of either statement: an event (its position and [`Fields`]), or (with `scanned` set)
/// the scan's last row and the snapshot's xmin.
struct Row {
    txid: Option<Xid8>,
    seq: Option<i64>,
    fields: Fields,
    scanned: Option<i64>,
    xmin: Option<Xid8>,
}

/// A row of either statement, its columns decoded by position (`txid, seq, topic`, the
/// [`FIELDS`], `scanned, xmin`): both statements fix their types, so sqlx's check of each
/// column's type against the Rust one would only ever pass. Paging 20,000 small events, this
/// and [`FIELDS`] take 10,500 instructions a row in this process, against 13,000 for the whole
/// payload decoded with those checks (callgrind).
fn decode_row(row: PgRow) -> std::result::Result<Row, sqlx::Error> {
    Ok(Row {
        txid: row.try_get_unchecked(0)?,
        seq: row.try_get_unchecked(1)?,
        fields: Fields {
            event_type: row.try_get_unchecked(2)?,
            id: row.try_get_unchecked(3)?,
            tenant_id: row.try_get_unchecked(4)?,
            subject: row.try_get_unchecked(5)?,
            time: row.try_get_unchecked(6)?,
            created_at: row.try_get_unchecked(7)?,
            data: row.try_get_unchecked(8)?,
        },
        scanned: row.try_get_unchecked(9)?,
        xmin: row.try_get_unchecked(10)?,
    })
}

/// A `jsonb` column as [`Data`]: its text made compact and checked once.
struct DataText(Data);

impl Decode<'_, Postgres> for DataText {
    fn decode(value: PgValueRef<'_>) -> std::result::Result<DataText, BoxDynError> {
        let text = match (value.format(), value.as_bytes()?) {
            // Binary `jsonb` is its format version (1, the only one) and then its text; binary
            // `json` is the text itself, which never starts with that byte.
            (PgValueFormat::Binary, [1, text @ ..]) => text,
            (_, text) => text,
        };
        Ok(DataText(Data::from_json(std::str::from_utf8(text)?)?))
    }
}

/// Where a read started (exclusive) and which way it walked.
#[derive(Clone, Copy)]
struct Order {
    after: Position,
    descending: bool,
}

impl Order {
    /// Puts `events` in the read's order (a join or `UNION ALL` keeps its branches' order in
    /// practice, not by contract).
    fn sort(self, events: &mut [Event]) {
        events.sort_by_key(|event: &Event| event.sequence);
        if self.descending {
            events.reverse();
        }
    }

    /// How far a read that stopped at `next_after` has everything ([`complete_through`]); a
    /// descending read has what lies between `next_after` and where it started.
    fn complete_through(self, next_after: Position, more: bool, xmin: u64) -> Position {
        if self.descending { next_after } else { complete_through(next_after, more, xmin) }
    }
}

fn page_from_rows(rows: Vec<Row>, order: Order, limit: usize, scan_limit: usize) -> Result<ReadPage> {
    let after = order.after;
    let mut events = Vec::with_capacity(rows.len().min(limit + 1));
    let mut last_scanned = None;
    let mut scanned = 0;
    let mut xmin = 0;
    for Row { txid, seq, fields, scanned: scan_count, xmin: snapshot_xmin } in rows {
        match (scan_count, txid, seq) {
            (Some(n), txid, seq) => {
                scanned = usize::try_from(n).unwrap_or(0);
                xmin = snapshot_xmin.map_or(0, |x| x.0);
                last_scanned = txid.zip(seq).map(|(txid, seq)| position(txid, seq));
            }
            (None, Some(txid), Some(seq)) => events.push(event_from_row(position(txid, seq), fields)?),
            (None, _, _) => {
                let reason = "a row without a position".into();
                return Err(Error::MalformedRow { position: after, reason });
            }
        }
    }
    order.sort(&mut events);
    if events.len() > limit {
        events.truncate(limit);
        let next_after = events.last().map_or(after, |e| e.sequence);
        return Ok(ReadPage { events, next_after, more: true, complete_through: next_after, snapshot_xmin: xmin });
    }
    let next_after = last_scanned.unwrap_or(after);
    let more = scanned >= scan_limit;
    let complete_through = order.complete_through(next_after, more, xmin);
    Ok(ReadPage { events, next_after, more, complete_through, snapshot_xmin: xmin })
}

/// The rows of an unfiltered read: every row scanned is an event, each carrying the xmin.
fn page_from_plain_rows(rows: Vec<Row>, order: Order, limit: usize) -> Result<ReadPage> {
    let after = order.after;
    let xmin = rows.first().and_then(|row| row.xmin.as_ref()).map_or(0, |x| x.0);
    let mut events = Vec::with_capacity(rows.len().min(limit + 1));
    for Row { txid, seq, fields, .. } in rows {
        if let (Some(txid), Some(seq)) = (txid, seq) {
            events.push(event_from_row(position(txid, seq), fields)?);
        }
    }
    order.sort(&mut events);
    let more = events.len() > limit;
    events.truncate(limit);
    let next_after = events.last().map_or(after, |e| e.sequence);
    let complete_through = order.complete_through(next_after, more, xmin);
    Ok(ReadPage { events, next_after, more, complete_through, snapshot_xmin: xmin })
}

/// An event row's columns after its position: `topic` and the payload's [`FIELDS`].
struct Fields {
    event_type: Option<String>,
    id: Option<String>,
    tenant_id: Option<String>,
    subject: Option<String>,
    time: Option<String>,
    created_at: Option<OffsetDateTime>,
    data: Option<DataText>,
}

fn event_from_row(position: Position, fields: Fields) -> Result<Event> {
    let malformed = |reason: String| Error::MalformedRow { position, reason };
    let Fields { event_type, id, tenant_id, subject, time, created_at, data } = fields;
    let Some(event_type) = event_type else { return Err(malformed("topic is null".into())) };
    let (Some(id), Some(tenant_id), Some(subject)) = (id, tenant_id, subject) else {
        return Err(malformed("the payload lacks id, tenantId or subject".into()));
    };
    let time = match (time, created_at) {
        (Some(time), _) => millis::parse(&time).map_err(|e| malformed(format!("time {time:?}: {e}")))?,
        (None, Some(created_at)) => millis::truncate(created_at),
        (None, None) => return Err(malformed("neither the payload nor created_at holds a time".into())),
    };
    let data = data.map(|DataText(data)| data).unwrap_or_default();
    Ok(Event { id, event_type, tenant_id, subject, time, sequence: position, data })
}
