//! The checker: a recorded history against the ground truth read from the table.
//!
//! The truth is every row of `outbox` in `(txid, seq)` order, read once everything was
//! drained. Writers say what they attempted and how it ended (committed, rolled back, or
//! unknown when the connection died during `COMMIT`; an unknown outcome is resolved from
//! the table). Consumers say what they received, session by session.
//!
//! What is checked:
//! - the table holds every acknowledged commit, nothing rolled back, nothing never written;
//! - per consumer, nothing unexpected: every event received is in the table and matches
//!   the consumer's tenant and type patterns;
//! - positions strictly increase within every session (out of order otherwise);
//! - an exact session (an SSE stream resumed with `Last-Event-ID`, a pager) starts at
//!   exactly the successor of the position it was opened after and continues with no gap
//!   and no duplicate: it is a contiguous run of the matching truth;
//! - a redelivering session (a sink's output, whose sessions are told apart by a position
//!   that does not increase) is such a run too, and starts no later than just after what
//!   was delivered before it, so that its duplicates lie between a saved cursor and the
//!   last delivery before the fault; those duplicates are counted, and allowed;
//! - nothing lost: every matching committed event after a durable consumer's start
//!   reached it.
//!
//! Pure: no I/O. Its tests feed it bad histories and watch it catch each.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use outbox_core::{Pattern, Position};
use serde::{Deserialize, Serialize};

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Row {
    pub(crate) id: String,
    pub(crate) position: Position,
    pub(crate) tenant: String,
    #[serde(rename = "type")]
    pub(crate) event_type: String,
}

/// What the writers attempted, by outcome.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Writes {
    /// Ids whose transaction's `COMMIT` was acknowledged.
    pub(crate) committed: HashSet<String>,
    /// Ids whose transaction was rolled back (on purpose or by a failure before `COMMIT`).
    pub(crate) rolled_back: HashSet<String>,
    /// Ids whose transaction's outcome could not be learnt (the connection died during `COMMIT`).
    pub(crate) unknown: HashSet<String>,
    /// Transactions whose writer dropped its connection mid-commit on purpose.
    pub(crate) killed: usize,
}

/// An event as a consumer received it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Received {
    pub(crate) id: String,
    pub(crate) position: Position,
}

/// One connection, stream or run of a consumer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Session {
    /// The position it was opened after (`Last-Event-ID`, a cursor); `None` for the
    /// sessions of a redelivering consumer, which are inferred.
    pub(crate) after: Option<Position>,
    pub(crate) received: Vec<Received>,
}

/// How a consumer may repeat itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Delivery {
    /// Every session starts exactly after its position: no duplicate, no gap.
    Exact,
    /// Redelivers from a saved cursor after a fault: duplicates allowed, gaps not.
    Redelivering,
    /// A sink's output kept per process (each process appends to its own file while it
    /// holds the lease): sessions split where a position does not increase; duplicates
    /// allowed; a session may jump forward only over events another session delivered
    /// (the other process held the lease meanwhile).
    Interleaved,
}

/// A consumer's record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Consumer {
    pub(crate) name: String,
    pub(crate) tenant: Option<String>,
    /// Type patterns; empty means every type.
    pub(crate) types: Vec<String>,
    pub(crate) delivery: Delivery,
    /// Whether it must receive every matching event after its first session's start.
    pub(crate) durable: bool,
    /// For a consumer that starts "from now" (a subscription): the position it started
    /// after, which [`Consumer::anchor`] infers; no earlier event is owed to it.
    #[serde(default)]
    pub(crate) since: Option<Position>,
    pub(crate) sessions: Vec<Session>,
}

impl Consumer {
    /// The durable record of a consumer of every tenant that redelivers from a saved cursor
    /// (a sink's output), cut into sessions by [`Consumer::split_redeliveries`].
    pub(crate) fn redelivered(name: &str, received: Vec<Received>) -> Consumer {
        let mut consumer = Consumer {
            name: name.to_owned(),
            tenant: None,
            types: Vec::new(),
            delivery: Delivery::Redelivering,
            durable: true,
            since: None,
            sessions: vec![Session { after: None, received }],
        };
        consumer.split_redeliveries();
        consumer
    }

    /// For a consumer that starts at the head of the moment it was made, whose start the
    /// run cannot know: takes it to have started just before the first event it received
    /// (or after the last row, when it received nothing), so that everything from there on
    /// is checked: no gap, no loss. Its first session's `after`, when unset, becomes that
    /// start too.
    pub(crate) fn anchor(&mut self, truth: &[Row]) {
        let expected = Expected::new(truth, self);
        let first = self.sessions.iter().flat_map(|session| &session.received).next();
        let at = match first.and_then(|first| expected.index.get(first.id.as_str())) {
            Some(&at) => at,
            None => expected.rows.len(),
        };
        let since = at.checked_sub(1).map_or(Position::START, |before| expected.rows[before].position);
        self.since = Some(since);
        if let Some(session) = self.sessions.first_mut()
            && session.after.is_none()
        {
            session.after = Some(since);
        }
    }

    /// A redelivering consumer's single record (a file, a stream read back) cut into
    /// sessions wherever the position does not increase.
    pub(crate) fn split_redeliveries(&mut self) {
        let all: Vec<Received> = self.sessions.drain(..).flat_map(|session| session.received).collect();
        let mut current = Session::default();
        for received in all {
            if current.received.last().is_some_and(|last| received.position <= last.position) {
                self.sessions.push(std::mem::take(&mut current));
            }
            current.received.push(received);
        }
        if !current.received.is_empty() || self.sessions.is_empty() {
            self.sessions.push(current);
        }
    }
}

/// One consumer's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) name: String,
    pub(crate) sessions: usize,
    pub(crate) received: usize,
    pub(crate) lost: usize,
    pub(crate) unexpected: usize,
    pub(crate) duplicated: usize,
    pub(crate) duplicates_allowed: bool,
    pub(crate) out_of_order: usize,
    /// Sessions that did not continue at exactly their successor, or skipped an event.
    pub(crate) gaps: usize,
}

impl Tally {
    fn violations(&self) -> usize {
        let duplicates = if self.duplicates_allowed { 0 } else { self.duplicated };
        self.lost + self.unexpected + self.out_of_order + self.gaps + duplicates
    }

    /// `ok name: n sessions, received n, lost 0, unexpected 0, duplicated n (allowed), out of order 0, gaps 0`.
    pub(crate) fn line(&self) -> String {
        let allowed = if self.duplicates_allowed { " (allowed)" } else { "" };
        let verdict = if self.violations() == 0 { "ok" } else { "FAILED" };
        format!(
            "{verdict} {}: {} sessions, received {}, lost {}, unexpected {}, duplicated {}{allowed}, out of order {}, gaps {}",
            self.name,
            self.sessions,
            self.received,
            self.lost,
            self.unexpected,
            self.duplicated,
            self.out_of_order,
            self.gaps
        )
    }
}

/// The checker's answer.
#[derive(Debug, Clone, Default)]
pub(crate) struct Report {
    /// The writers' line.
    pub(crate) writes: String,
    pub(crate) tallies: Vec<Tally>,
    /// Every violation, described.
    pub(crate) violations: Vec<String>,
}

impl Report {
    pub(crate) fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// One line for the writers, one per consumer, then the violations (at most `shown`).
    pub(crate) fn summary(&self, shown: usize) -> String {
        let mut text = format!("writers: {}\n", self.writes);
        for tally in &self.tallies {
            let _ = writeln!(text, "{}", tally.line());
        }
        for violation in self.violations.iter().take(shown) {
            let _ = writeln!(text, "VIOLATION {violation}");
        }
        if self.violations.len() > shown {
            let _ = writeln!(text, "… and {} more violations", self.violations.len() - shown);
        }
        text
    }
}

/// Checks `consumers` and `writes` against `truth` (the table in `(txid, seq)` order).
pub(crate) fn check(truth: &[Row], writes: &Writes, consumers: &[Consumer]) -> Report {
    let mut report = Report::default();
    check_writes(truth, writes, &mut report);
    for consumer in consumers {
        let tally = check_consumer(truth, writes, consumer, &mut report.violations);
        report.tallies.push(tally);
    }
    report
}

/// Checks a partitioned, at-least-once record (the Kafka sink's topic, read back) against
/// `truth`: every stored event is there, nothing else is, each subject (the record's key)
/// stays in one partition, and within it each event's first copy comes after the first copies
/// of the subject's earlier events. Copies after the first (a batch produced again after a
/// fault) are duplicates, allowed.
pub(crate) fn check_partitioned(
    name: &str,
    truth: &[Row],
    writes: &Writes,
    records: &[crate::brokers::Keyed],
) -> (Tally, Vec<String>) {
    let all: HashMap<&str, &Row> = truth.iter().map(|row| (row.id.as_str(), row)).collect();
    let mut violations = Vec::new();
    let partitions: HashSet<i32> = records.iter().map(|record| record.partition).collect();
    let mut tally = Tally {
        name: name.to_owned(),
        sessions: partitions.len(),
        received: records.len(),
        duplicates_allowed: true,
        ..Tally::default()
    };
    let mut seen: HashSet<&str> = HashSet::new();
    let mut partition_of: HashMap<&str, i32> = HashMap::new();
    let mut newest: HashMap<(i32, &str), Position> = HashMap::new();
    for record in records {
        let received = &record.received;
        if !seen.insert(&received.id) {
            tally.duplicated += 1;
            continue;
        }
        match all.get(received.id.as_str()) {
            Some(row) if row.position == received.position => {}
            Some(row) => {
                tally.unexpected += 1;
                violations
                    .push(format!("{name}: {} at {}, stored at {}", received.id, received.position, row.position));
            }
            None => {
                tally.unexpected += 1;
                violations.push(format!("{name}: unexpected {}", why_unexpected(received, &all, writes)));
            }
        }
        let key = record.key.as_str();
        if *partition_of.entry(key).or_insert(record.partition) != record.partition {
            tally.out_of_order += 1;
            violations
                .push(format!("{name}: subject {key} in partitions {} and {}", partition_of[key], record.partition));
        }
        let last = newest.entry((record.partition, key)).or_insert(Position::START);
        if received.position <= *last {
            tally.out_of_order += 1;
            violations.push(format!(
                "{name}: partition {}: subject {key}: first copy of {} at {} after {}",
                record.partition, received.id, received.position, last
            ));
        }
        *last = received.position.max(*last);
    }
    tally.lost = count_lost(name, truth.iter(), &seen, &mut violations);
    (tally, violations)
}

/// The table against what the writers attempted.
fn check_writes(truth: &[Row], writes: &Writes, report: &mut Report) {
    let mut stored: HashSet<&str> = HashSet::with_capacity(truth.len());
    for (index, row) in truth.iter().enumerate() {
        if !stored.insert(&row.id) {
            report.violations.push(format!("table: event {} stored twice", row.id));
        }
        if index > 0 && truth[index - 1].position >= row.position {
            report.violations.push(format!("table: position {} does not increase", row.position));
        }
        if writes.rolled_back.contains(&row.id) {
            report.violations.push(format!("table: event {} of a rolled-back transaction is stored", row.id));
        } else if !writes.committed.contains(&row.id) && !writes.unknown.contains(&row.id) {
            report.violations.push(format!("table: event {} was never written", row.id));
        }
    }
    let mut missing: Vec<&String> = writes.committed.iter().filter(|id| !stored.contains(id.as_str())).collect();
    missing.sort();
    for id in missing {
        report.violations.push(format!("table: event {id} of an acknowledged commit is missing"));
    }
    let resolved_in = writes.unknown.iter().filter(|id| stored.contains(id.as_str())).count();
    report.writes = format!(
        "{} stored, committed {}, rolled back {}, unknown {} (resolved from the table: {} committed, {} not)",
        truth.len(),
        writes.committed.len(),
        writes.rolled_back.len(),
        writes.unknown.len(),
        resolved_in,
        writes.unknown.len() - resolved_in,
    );
}

/// Which rows a consumer should see, in order.
struct Expected<'a> {
    rows: Vec<&'a Row>,
    index: HashMap<&'a str, usize>,
}

impl<'a> Expected<'a> {
    fn new(truth: &'a [Row], consumer: &Consumer) -> Expected<'a> {
        let patterns: Vec<Pattern> = consumer.types.iter().filter_map(|text| Pattern::parse(text).ok()).collect();
        let rows: Vec<&Row> = truth
            .iter()
            .filter(|row| consumer.tenant.as_ref().is_none_or(|tenant| *tenant == row.tenant))
            .filter(|row| patterns.is_empty() || patterns.iter().any(|pattern| pattern.matches(&row.event_type)))
            .collect();
        let index = rows.iter().enumerate().map(|(i, row)| (row.id.as_str(), i)).collect();
        Expected { rows, index }
    }

    /// The index of the first expected row after `position`.
    fn successor(&self, position: Option<Position>) -> usize {
        match position {
            None => 0,
            Some(position) => self.rows.partition_point(|row| row.position <= position),
        }
    }
}

fn check_consumer(truth: &[Row], writes: &Writes, consumer: &Consumer, violations: &mut Vec<String>) -> Tally {
    let expected = Expected::new(truth, consumer);
    let all: HashMap<&str, &Row> = truth.iter().map(|row| (row.id.as_str(), row)).collect();
    let name = consumer.name.as_str();
    let mut tally = Tally {
        name: name.to_owned(),
        sessions: consumer.sessions.len(),
        duplicates_allowed: consumer.delivery != Delivery::Exact,
        ..Tally::default()
    };
    let delivered_anywhere: HashSet<&str> =
        consumer.sessions.iter().flat_map(|session| &session.received).map(|received| received.id.as_str()).collect();
    let mut seen: HashSet<&str> = HashSet::new();
    // The furthest expected index delivered so far, plus one.
    let mut reached = 0usize;
    for (number, session) in consumer.sessions.iter().enumerate() {
        let start = match consumer.delivery {
            Delivery::Exact => expected.successor(session.after),
            Delivery::Redelivering | Delivery::Interleaved => reached.min(expected.rows.len()),
        };
        // Where the next event of this session should be in the expected rows.
        let mut next: Option<usize> = None;
        let mut last: Option<Position> = None;
        for received in &session.received {
            tally.received += 1;
            if last.is_some_and(|last| received.position <= last) {
                tally.out_of_order += 1;
                violations.push(format!(
                    "{name}: session {number}: position {} after {} (not increasing)",
                    received.position,
                    last.unwrap_or(Position::START)
                ));
            }
            last = Some(received.position);
            if !seen.insert(&received.id) {
                tally.duplicated += 1;
                if consumer.delivery == Delivery::Exact {
                    violations.push(format!("{name}: session {number}: {} received again", received.id));
                }
            }
            let Some(&at) = expected.index.get(received.id.as_str()) else {
                tally.unexpected += 1;
                violations
                    .push(format!("{name}: session {number}: unexpected {}", why_unexpected(received, &all, writes)));
                continue;
            };
            if expected.rows[at].position != received.position {
                tally.unexpected += 1;
                violations.push(format!(
                    "{name}: session {number}: {} at {}, stored at {}",
                    received.id, received.position, expected.rows[at].position
                ));
            }
            let wanted = next.unwrap_or(match consumer.delivery {
                Delivery::Exact => start,
                // A redelivering session may start anywhere up to just after what was delivered.
                Delivery::Redelivering if at <= start => at,
                Delivery::Redelivering => start,
                Delivery::Interleaved => at,
            });
            let skipped_elsewhere = consumer.delivery == Delivery::Interleaved
                && at > wanted
                && expected.rows[wanted..at].iter().all(|row| delivered_anywhere.contains(row.id.as_str()));
            if at != wanted && !skipped_elsewhere {
                tally.gaps += 1;
                let expected_id = expected.rows.get(wanted).map_or("nothing", |row| row.id.as_str());
                violations.push(format!(
                    "{name}: session {number}: {} at {} where {expected_id} should come (a gap or a bad resume)",
                    received.id, received.position
                ));
            }
            // A step back (a duplicate) does not move where the session must continue.
            next = Some(next.map_or(at + 1, |next| next.max(at + 1)));
            reached = reached.max(at + 1);
        }
    }
    if consumer.durable {
        let from = match consumer.delivery {
            Delivery::Exact => expected.successor(consumer.sessions.first().and_then(|session| session.after)),
            Delivery::Redelivering | Delivery::Interleaved => 0,
        };
        let from = from.max(consumer.since.map_or(0, |since| expected.successor(Some(since))));
        let owed = expected.rows[from.min(expected.rows.len())..].iter().copied();
        tally.lost = count_lost(name, owed, &seen, violations);
    }
    tally
}

/// How many of the `owed` rows are not in `seen`; the first 20 named in `violations`, then
/// the count.
fn count_lost<'a>(
    name: &str,
    owed: impl Iterator<Item = &'a Row>,
    seen: &HashSet<&str>,
    violations: &mut Vec<String>,
) -> usize {
    let mut lost = 0;
    for row in owed.filter(|row| !seen.contains(row.id.as_str())) {
        lost += 1;
        if lost <= 20 {
            violations.push(format!("{name}: lost {} at {}", row.id, row.position));
        }
    }
    if lost > 20 {
        violations.push(format!("{name}: lost {lost} events in all"));
    }
    lost
}

/// Why a received event is not one the consumer should have: rolled back, never written,
/// or stored but not matching its tenant or types.
fn why_unexpected(received: &Received, all: &HashMap<&str, &Row>, writes: &Writes) -> String {
    let id = &received.id;
    match all.get(id.as_str()) {
        Some(row) => format!("{id} of tenant {} type {} (does not match)", row.tenant, row.event_type),
        None if writes.rolled_back.contains(id) => format!("{id} (rolled back)"),
        None if writes.unknown.contains(id) => format!("{id} (its commit never took)"),
        None => format!("{id} (never written)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(txid: u64, seq: u64) -> Position {
        Position { txid, seq }
    }

    /// Ten rows of tenant `t` (even ones `a.x`, odd ones `b.x`) and one of tenant `u`.
    fn truth() -> Vec<Row> {
        let mut rows: Vec<Row> = (0..10)
            .map(|n| Row {
                id: format!("e{n}"),
                position: pos(100 + n / 3, n + 1),
                tenant: "t".into(),
                event_type: if n % 2 == 0 { "a.x".into() } else { "b.x".into() },
            })
            .collect();
        rows.push(Row { id: "u0".into(), position: pos(200, 50), tenant: "u".into(), event_type: "a.x".into() });
        rows
    }

    fn writes(truth: &[Row]) -> Writes {
        Writes {
            committed: truth.iter().map(|row| row.id.clone()).collect(),
            rolled_back: ["r0".to_owned()].into(),
            unknown: HashSet::new(),
            killed: 0,
        }
    }

    fn got(truth: &[Row], ids: &[&str]) -> Vec<Received> {
        ids.iter()
            .map(|id| {
                let position = truth.iter().find(|row| row.id == *id).map_or(pos(999, 999), |row| row.position);
                Received { id: (*id).to_owned(), position }
            })
            .collect()
    }

    fn sse(sessions: Vec<Session>) -> Consumer {
        Consumer {
            name: "sse".into(),
            tenant: Some("t".into()),
            types: Vec::new(),
            delivery: Delivery::Exact,
            durable: true,
            since: None,
            sessions,
        }
    }

    fn session(truth: &[Row], after: Option<Position>, ids: &[&str]) -> Session {
        Session { after, received: got(truth, ids) }
    }

    const ALL: [&str; 10] = ["e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8", "e9"];

    #[track_caller]
    fn check_one(consumer: Consumer, expect: (usize, usize, usize, usize, usize)) -> Report {
        let truth = truth();
        let report = check(&truth, &writes(&truth), &[consumer]);
        let t = &report.tallies[0];
        assert_eq!((t.lost, t.unexpected, t.duplicated, t.out_of_order, t.gaps), expect, "{}", report.summary(20));
        report
    }

    #[test]
    fn a_clean_history_passes() {
        let truth = truth();
        let first = session(&truth, None, &ALL[..4]);
        let second = session(&truth, Some(truth[3].position), &ALL[4..]);
        let report = check_one(sse(vec![first, second]), (0, 0, 0, 0, 0));
        assert!(report.passed(), "{}", report.summary(20));
    }

    #[test]
    fn a_lost_event_is_caught() {
        let truth = truth();
        let ids: Vec<&str> = ALL.iter().copied().filter(|id| *id != "e9").collect();
        let report = check_one(sse(vec![session(&truth, None, &ids)]), (1, 0, 0, 0, 0));
        assert!(!report.passed());
        assert!(report.violations[0].contains("lost e9"), "{:?}", report.violations);
    }

    #[test]
    fn a_skipped_event_in_the_middle_is_a_gap_and_lost() {
        let truth = truth();
        let ids: Vec<&str> = ALL.iter().copied().filter(|id| *id != "e4").collect();
        check_one(sse(vec![session(&truth, None, &ids)]), (1, 0, 0, 0, 1));
    }

    #[test]
    fn a_rolled_back_event_is_unexpected() {
        let truth = truth();
        let mut ids = ALL.to_vec();
        ids.insert(5, "r0");
        let report = check_one(sse(vec![session(&truth, None, &ids)]), (0, 1, 0, 1, 0));
        assert!(report.violations.iter().any(|v| v.contains("r0 (rolled back)")), "{:?}", report.violations);
    }

    #[test]
    fn another_tenants_event_is_unexpected() {
        let truth = truth();
        let mut ids = ALL.to_vec();
        ids.push("u0");
        check_one(sse(vec![session(&truth, None, &ids)]), (0, 1, 0, 0, 0));
    }

    #[test]
    fn a_duplicate_out_of_order_is_caught_in_an_exact_session() {
        let truth = truth();
        let mut ids = ALL.to_vec();
        ids.insert(6, "e2");
        let report = check_one(sse(vec![session(&truth, None, &ids)]), (0, 0, 1, 1, 1));
        assert!(!report.passed());
    }

    #[test]
    fn positions_that_do_not_increase_are_out_of_order() {
        let truth = truth();
        let mut ids = ALL.to_vec();
        ids.swap(3, 4);
        let report = check_one(sse(vec![session(&truth, None, &ids)]), (0, 0, 0, 1, 2));
        assert!(report.violations.iter().any(|v| v.contains("not increasing")), "{:?}", report.violations);
    }

    #[test]
    fn a_resume_that_repeats_its_last_event_is_a_duplicate() {
        let truth = truth();
        let first = session(&truth, None, &ALL[..4]);
        let second = session(&truth, Some(truth[3].position), &ALL[3..]);
        check_one(sse(vec![first, second]), (0, 0, 1, 0, 1));
    }

    #[test]
    fn a_resume_that_skips_the_successor_is_a_gap() {
        let truth = truth();
        let first = session(&truth, None, &ALL[..4]);
        let second = session(&truth, Some(truth[3].position), &ALL[5..]);
        check_one(sse(vec![first, second]), (1, 0, 0, 0, 1));
    }

    #[test]
    fn a_filtered_stream_expects_only_its_types() {
        let truth = truth();
        let mut consumer = sse(vec![session(&truth, None, &["e0", "e2", "e4", "e6", "e8"])]);
        consumer.types = vec!["a.*".into()];
        check_one(consumer.clone(), (0, 0, 0, 0, 0));
        consumer.sessions = vec![session(&truth, None, &["e0", "e1", "e2", "e4", "e6", "e8"])];
        check_one(consumer, (0, 1, 0, 0, 0));
    }

    fn sink(received: Vec<Received>) -> Consumer {
        Consumer::redelivered("sink", received)
    }

    #[test]
    fn a_sink_may_redeliver_from_its_cursor() {
        let truth = truth();
        let mut ids = ALL[..7].to_vec();
        ids.extend_from_slice(&ALL[4..]);
        ids.push("u0");
        let consumer = sink(got(&truth, &ids));
        assert_eq!(consumer.sessions.len(), 2);
        let report = check_one(consumer, (0, 0, 3, 0, 0));
        assert!(report.passed(), "{}", report.summary(20));
        assert!(report.tallies[0].line().contains("duplicated 3 (allowed)"));
    }

    #[test]
    fn a_sink_that_resumes_past_what_it_delivered_leaves_a_gap() {
        let truth = truth();
        let mut ids = ALL[..5].to_vec();
        ids.extend_from_slice(&["e4", "e7", "e8", "e9", "u0"]);
        let report = check_one(sink(got(&truth, &ids)), (2, 0, 1, 0, 1));
        assert!(!report.passed());
    }

    #[test]
    fn a_sink_that_reorders_is_caught() {
        let truth = truth();
        // e5 delivered before e4 (a later publish stored, an earlier one lost then retried).
        let ids = ["e0", "e1", "e2", "e3", "e5", "e4", "e6", "e7", "e8", "e9", "u0"];
        let report = check_one(sink(got(&truth, &ids)), (0, 0, 0, 0, 2));
        assert!(!report.passed());
    }

    fn per_process(files: Vec<Vec<Received>>) -> Consumer {
        let mut sessions = Vec::new();
        for received in files {
            let mut file = sink(received);
            sessions.append(&mut file.sessions);
        }
        Consumer { name: "files".into(), delivery: Delivery::Interleaved, ..sink(Vec::new()) }.with(sessions)
    }

    impl Consumer {
        fn with(mut self, sessions: Vec<Session>) -> Consumer {
            self.sessions = sessions;
            self
        }
    }

    #[test]
    fn per_process_files_may_jump_over_what_the_other_process_delivered() {
        let truth = truth();
        // Process a delivered e0..e4, then, after b held the lease (e3..e7), took it back at e7.
        let a = got(&truth, &["e0", "e1", "e2", "e3", "e4", "e7", "e8", "e9", "u0"]);
        let b = got(&truth, &["e3", "e4", "e5", "e6", "e7"]);
        let report = check_one(per_process(vec![a, b]), (0, 0, 3, 0, 0));
        assert!(report.passed(), "{}", report.summary(20));
    }

    #[test]
    fn per_process_files_still_show_a_jump_over_what_nobody_delivered() {
        let truth = truth();
        let a = got(&truth, &["e0", "e1", "e2", "e3", "e4", "e7", "e8", "e9", "u0"]);
        let b = got(&truth, &["e3", "e4", "e6", "e7"]);
        let report = check_one(per_process(vec![a, b]), (1, 0, 3, 0, 2));
        assert!(report.violations.iter().any(|v| v.contains("lost e5")), "{:?}", report.violations);
    }

    #[test]
    fn a_subscription_from_now_is_checked_from_its_first_event() {
        let truth = truth();
        let mut consumer = sse(vec![session(&truth, None, &ALL[4..])]);
        consumer.anchor(&truth);
        assert_eq!(consumer.since, Some(truth[3].position));
        assert_eq!(consumer.sessions[0].after, Some(truth[3].position));
        check_one(consumer, (0, 0, 0, 0, 0));
    }

    #[test]
    fn a_subscription_from_now_that_skips_an_event_later_is_caught() {
        let truth = truth();
        let mut consumer = sse(vec![session(&truth, None, &["e4", "e5", "e7", "e8", "e9"])]);
        consumer.anchor(&truth);
        check_one(consumer, (1, 0, 0, 0, 1));
    }

    #[test]
    fn a_redelivering_subscription_owes_nothing_before_its_start_and_everything_after() {
        let truth = truth();
        let mut whole = sink(got(&truth, &["e5", "e6", "e7", "e6", "e7", "e8", "e9", "u0"]));
        whole.delivery = Delivery::Interleaved;
        whole.anchor(&truth);
        check_one(whole, (0, 0, 2, 0, 0));
        let mut missing = sink(got(&truth, &["e5", "e6", "e8"]));
        missing.delivery = Delivery::Interleaved;
        missing.anchor(&truth);
        check_one(missing, (3, 0, 0, 0, 1));
    }

    #[test]
    fn the_table_is_checked_against_the_writers() {
        let truth = truth();
        let mut writes = writes(&truth);
        writes.committed.insert("c9".into());
        writes.committed.remove("e3");
        writes.rolled_back.insert("e3".into());
        writes.committed.remove("e4");
        let report = check(&truth, &writes, &[]);
        let text = report.violations.join("\n");
        assert!(text.contains("c9 of an acknowledged commit is missing"), "{text}");
        assert!(text.contains("e3 of a rolled-back transaction is stored"), "{text}");
        assert!(text.contains("e4 was never written"), "{text}");
    }

    #[test]
    fn an_unknown_outcome_is_resolved_from_the_table() {
        let truth = truth();
        let mut writes = writes(&truth);
        writes.committed.remove("e3");
        writes.unknown.insert("e3".into());
        writes.unknown.insert("x1".into());
        let report = check(&truth, &writes, &[]);
        assert!(report.passed(), "{:?}", report.violations);
        assert!(report.writes.contains("unknown 2 (resolved from the table: 1 committed, 1 not)"), "{}", report.writes);
    }

    /// The truth as a Kafka topic of two partitions: subjects `s0`..`s2`, `s0` and `s2` in
    /// partition 0, `s1` in partition 1; the n-th row's subject is `s{n % 3}`.
    fn partitioned(truth: &[Row]) -> Vec<crate::brokers::Keyed> {
        truth
            .iter()
            .enumerate()
            .map(|(n, row)| crate::brokers::Keyed {
                partition: i32::from(n % 3 == 1),
                key: format!("s{}", n % 3),
                received: Received { id: row.id.clone(), position: row.position },
            })
            .collect()
    }

    #[test]
    fn a_partitioned_record_allows_redelivered_copies_and_nothing_else() {
        let truth = truth();
        let mut records = partitioned(&truth);
        // A batch of partition 0 produced again after a fault: copies of earlier events.
        let again: Vec<_> = partitioned(&truth).into_iter().filter(|r| r.partition == 0).take(3).collect();
        records.extend(again);
        records.sort_by_key(|record| record.partition);
        let (tally, violations) = check_partitioned("kafka", &truth, &writes(&truth), &records);
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!((tally.sessions, tally.duplicated, tally.lost), (2, 3, 0));
        assert!(tally.line().starts_with("ok kafka: 2 sessions"), "{}", tally.line());
    }

    #[test]
    fn a_partitioned_record_catches_loss_reorder_and_a_subject_in_two_partitions() {
        let truth = truth();
        let writes = writes(&truth);
        let mut lost = partitioned(&truth);
        lost.remove(4);
        let (tally, violations) = check_partitioned("kafka", &truth, &writes, &lost);
        assert_eq!(tally.lost, 1, "{violations:?}");

        // Within partition 0, subject s0's events 0 and 3 swapped.
        let mut swapped = partitioned(&truth);
        swapped.swap(0, 3);
        let (tally, _) = check_partitioned("kafka", &truth, &writes, &swapped);
        assert_eq!(tally.out_of_order, 1);

        let mut moved = partitioned(&truth);
        moved[3].partition = 1;
        let (tally, violations) = check_partitioned("kafka", &truth, &writes, &moved);
        assert_eq!(tally.out_of_order, 1, "{violations:?}");
        assert!(violations[0].contains("subject s0 in partitions 0 and 1"), "{violations:?}");

        let mut stray = partitioned(&truth);
        stray[0].received.id = "r0".into();
        let (tally, _) = check_partitioned("kafka", &truth, &writes, &stray);
        assert_eq!((tally.unexpected, tally.lost), (1, 1));
    }
}
