//! Bisection, poison events and dead letters (SPEC §7.4); the backoff schedule (SPEC §7.3).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outbox_core::Event;
use outbox_pg::internal::dead_letter::{self, ListRequest};
use outbox_workers::{Activity, BackoffPolicy, Clock, Dispatcher, DispatcherConfig, Error, SinkError, SinkSpec};

use crate::support::{
    ManualClock, ScriptedSink, cursor_of, cursor_writes, db, fast_config, history, numbered, publish_and_read,
    record_history, wait_for,
};

/// A sink that refuses (retryably) every batch holding the event `poison`.
fn refusing(id: &str, poison: &str) -> ScriptedSink {
    let poison = poison.to_owned();
    ScriptedSink::new(id, move |batch: &[Event]| {
        if batch.iter().any(|e| e.id == poison) {
            Err(SinkError::retryable("HTTP 500: cannot process"))
        } else {
            Ok(())
        }
    })
}

/// 1,000 events in one batch with the one at `poison` always refused: the other 999 arrive in
/// order, the poison is dead-lettered after 5 attempts, progress is recorded as parts succeed,
/// and the number of delivery calls stays within 2·log2(1000) + max_attempts + 3.
async fn check_poison(poison: usize) {
    let db = db().await;
    record_history(&db.pool, "poison").await;
    let events = publish_and_read(&db.pool, &numbered(1_000)).await;
    let sink = refusing("poison", &events[poison].id);
    let spec = SinkSpec::new(sink.clone()).batch(1_000);
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![spec]).unwrap();
    let last = events.last().unwrap().sequence;
    wait_for("the cursor to pass the batch", || async { cursor_of(&db.pool, "poison").await == Some(last) }).await;
    dispatcher.shutdown().await;

    let mut expected = events.clone();
    let dead = expected.remove(poison);
    assert_eq!(sink.delivered(), expected, "poison at {poison}: the other 999 in order, once each");
    let letters = dead_letter::list(&db.pool, &ListRequest::pending("poison")).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!((&letters[0].event, letters[0].attempts), (&dead, 5));
    assert_eq!(letters[0].error, "HTTP 500: cannot process");

    let calls = sink.calls().len();
    let bound = 2.0 * 1_000f64.log2() + 5.0 + 3.0;
    assert!(calls as f64 <= bound, "poison at {poison}: {calls} delivery calls, more than {bound:.1}");

    let writes = cursor_writes(&history(&db.pool).await);
    assert!(writes.windows(2).all(|w| w[0] < w[1]), "the cursor moved backwards or stood still: {writes:?}");
    if poison > 0 {
        assert!(
            writes.contains(&events[poison - 1].sequence),
            "the part before the poison was not recorded before the poison was tried alone: {writes:?}"
        );
    }
}

#[tokio::test]
async fn a_poison_event_first_in_the_batch_is_dead_lettered_and_the_rest_delivered() {
    check_poison(0).await;
}

#[tokio::test]
async fn a_poison_event_in_the_middle_is_isolated_within_the_call_bound() {
    check_poison(637).await;
}

#[tokio::test]
async fn a_poison_event_next_to_the_end_is_isolated_within_the_call_bound() {
    check_poison(998).await;
}

/// A poison event in the third batch of a page that holds four: the batches before it are
/// delivered and saved whole, the part of its batch before it is recorded before it is tried
/// alone, and no call ever holds more than one batch.
#[tokio::test]
async fn a_poison_event_in_a_later_batch_of_a_page_is_isolated_after_the_batches_before_it() {
    let db = db().await;
    record_history(&db.pool, "later").await;
    let events = publish_and_read(&db.pool, &numbered(100)).await;
    let sink = refusing("later", &events[60].id);
    let dispatcher =
        Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(sink.clone()).batch(25)]).unwrap();
    let last = events.last().unwrap().sequence;
    wait_for("the cursor to pass every event", || async { cursor_of(&db.pool, "later").await == Some(last) }).await;
    dispatcher.shutdown().await;

    let mut expected = events.clone();
    let dead = expected.remove(60);
    assert_eq!(sink.delivered(), expected, "the other 99 in order, once each");
    let letters = dead_letter::list(&db.pool, &ListRequest::pending("later")).await.unwrap();
    assert_eq!(letters.iter().map(|letter| &letter.event).collect::<Vec<_>>(), [&dead]);

    let calls = sink.calls();
    assert!(calls.iter().all(|call| call.positions.len() <= 25), "a call held more than one batch");
    let first_two: Vec<Vec<_>> = calls.iter().take(2).map(|call| call.positions.clone()).collect();
    let batches: Vec<Vec<_>> = events[..50].chunks(25).map(|b| b.iter().map(|e| e.sequence).collect()).collect();
    assert_eq!(first_two, batches, "the first two batches went as they were");
    let writes = cursor_writes(&history(&db.pool).await);
    assert!(writes.windows(2).all(|w| w[0] < w[1]), "the cursor moved backwards or stood still: {writes:?}");
    for (before, what) in [(24, "the first batch"), (49, "the second batch"), (59, "the part before the poison")] {
        assert!(writes.contains(&events[before].sequence), "{what} was not recorded: {writes:?}");
    }
}

#[tokio::test]
async fn a_poison_event_at_the_head_waits_for_a_later_event_to_judge_it() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(10)).await;
    let sink = refusing("tail", &events[9].id);
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(sink.clone())]).unwrap();
    wait_for("nine events", || async { cursor_of(&db.pool, "tail").await == Some(events[8].sequence) }).await;
    wait_for("the tail event to fail its attempts", || async {
        sink.calls().iter().filter(|c| c.positions == [events[9].sequence]).count() >= 5
    })
    .await;
    assert!(dead_letter::list(&db.pool, &ListRequest::pending("tail")).await.unwrap().is_empty());

    let all = publish_and_read(&db.pool, &numbered(1)).await;
    let last = all.last().unwrap().sequence;
    wait_for("the neighbour to judge it", || async { cursor_of(&db.pool, "tail").await == Some(last) }).await;
    let letters = dead_letter::list(&db.pool, &ListRequest::pending("tail")).await.unwrap();
    assert_eq!(letters.iter().map(|l| l.position).collect::<Vec<_>>(), [events[9].sequence]);
    dispatcher.shutdown().await;
}

#[tokio::test]
async fn a_refusal_that_is_not_retryable_uses_up_the_attempts_at_once() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(3)).await;
    let poison = events[1].id.clone();
    let sink = ScriptedSink::new("strict", move |batch: &[Event]| {
        if batch.iter().any(|e| e.id == poison) { Err(SinkError::refused("HTTP 422: unknown account")) } else { Ok(()) }
    });
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(sink.clone())]).unwrap();
    wait_for("the batch", || async { cursor_of(&db.pool, "strict").await == Some(events[2].sequence) }).await;
    let alone = sink.calls().iter().filter(|c| c.positions == [events[1].sequence]).count();
    assert_eq!(alone, 1, "a refused event was retried");
    let letters = dead_letter::list(&db.pool, &ListRequest::pending("strict")).await.unwrap();
    assert_eq!((letters.len(), letters[0].attempts, letters[0].error.as_str()), (1, 5, "HTTP 422: unknown account"));
    dispatcher.shutdown().await;
}

#[tokio::test]
async fn a_sink_that_names_the_failing_event_is_not_bisected_and_nothing_is_delivered_twice() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(50)).await;
    let poison = events[20].id.clone();
    let sink =
        ScriptedSink::new("sequential", move |batch: &[Event]| match batch.iter().position(|e| e.id == poison) {
            Some(index) => Err(SinkError::refused("HTTP 400").at(index)),
            None => Ok(()),
        });
    let spec = SinkSpec::new(sink.clone()).batch(50);
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![spec]).unwrap();
    let last = events.last().unwrap().sequence;
    wait_for("the batch", || async { cursor_of(&db.pool, "sequential").await == Some(last) }).await;
    let calls: Vec<Vec<_>> = sink.calls().into_iter().map(|c| c.positions).collect();
    let position = |i: usize| events[i].sequence;
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[0].len(), 50, "the whole batch, failing at index 20");
    assert_eq!(calls[1], [position(21)], "then the neighbour alone");
    assert_eq!(calls[2], (22..50).map(position).collect::<Vec<_>>(), "then the rest");
    dispatcher.shutdown().await;
}

#[tokio::test]
async fn a_sink_that_refuses_everything_dead_letters_nothing_and_backs_off_1_2_4_seconds_up_to_5_minutes() {
    let db = db().await;
    publish_and_read(&db.pool, &numbered(16)).await;
    let (clock, mut sleeps) = ManualClock::new();
    let sink = ScriptedSink::new("down", |_| Err(SinkError::retryable("HTTP 503"))).with_clock(clock.clone());
    let config = DispatcherConfig { clock: clock.clone(), backoff: BackoffPolicy::default(), ..fast_config() };
    let dispatcher = Dispatcher::start(db.pool.clone(), config, vec![SinkSpec::new(sink.clone()).batch(16)]).unwrap();

    let mut schedule = Vec::new();
    for _ in 0..12 {
        let sleep = sleeps.next().await;
        let until = clock.now() + sleep.duration;
        assert_eq!(dispatcher.local_state("down").unwrap().activity, Activity::BackingOff { until });
        schedule.push(sleep.duration.as_secs());
        sleep.wake();
    }
    assert_eq!(schedule, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);

    // Each round of calls happened when the previous wait ended: 0, 1, 3, 7, … seconds.
    let start = sink.calls()[0].at;
    let mut rounds: Vec<i64> = sink.calls().iter().map(|c| (c.at - start).whole_seconds()).collect();
    rounds.dedup();
    assert_eq!(rounds[..12], [0, 1, 3, 7, 15, 31, 63, 127, 255, 511, 811, 1111]);
    assert!(dead_letter::list(&db.pool, &ListRequest::pending("down")).await.unwrap().is_empty());
    assert_eq!(cursor_of(&db.pool, "down").await, None);
    let state = dispatcher.local_state("down").unwrap();
    assert_eq!(state.last_error.as_deref(), Some("HTTP 503"));
    drop(dispatcher);
}

#[tokio::test]
async fn a_success_resets_the_backoff() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(2)).await;
    let (clock, mut sleeps) = ManualClock::new();
    let up = Arc::new(AtomicBool::new(false));
    let switch = up.clone();
    let sink = ScriptedSink::new("flappy", move |_| {
        if switch.load(Ordering::SeqCst) { Ok(()) } else { Err(SinkError::retryable("HTTP 502")) }
    });
    let config = DispatcherConfig { clock: clock.clone(), backoff: BackoffPolicy::default(), ..fast_config() };
    let dispatcher = Dispatcher::start(db.pool.clone(), config, vec![SinkSpec::new(sink.clone())]).unwrap();
    let mut waits = Vec::new();
    for _ in 0..3 {
        let sleep = sleeps.next().await;
        waits.push(sleep.duration.as_secs());
        sleep.wake();
    }
    let sleep = sleeps.next().await;
    waits.push(sleep.duration.as_secs());
    up.store(true, Ordering::SeqCst);
    sleep.wake();
    wait_for("the recovery", || async { cursor_of(&db.pool, "flappy").await == Some(events[1].sequence) }).await;

    up.store(false, Ordering::SeqCst);
    publish_and_read(&db.pool, &numbered(1)).await;
    let sleep = sleeps.next().await;
    waits.push(sleep.duration.as_secs());
    assert_eq!(waits, [1, 2, 4, 8, 1]);
    drop(dispatcher);
}

#[tokio::test]
async fn retry_after_is_honoured_before_the_next_attempt() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(1)).await;
    let (clock, mut sleeps) = ManualClock::new();
    let failed_once = Arc::new(AtomicBool::new(false));
    let sink = ScriptedSink::new("busy", move |_| {
        if failed_once.swap(true, Ordering::SeqCst) {
            Ok(())
        } else {
            Err(SinkError::retryable("HTTP 429").with_retry_after(Duration::from_secs(7)))
        }
    })
    .with_clock(clock.clone());
    let config = DispatcherConfig { clock: clock.clone(), backoff: BackoffPolicy::default(), ..fast_config() };
    let dispatcher = Dispatcher::start(db.pool.clone(), config, vec![SinkSpec::new(sink.clone())]).unwrap();
    let sleep = sleeps.next().await;
    assert_eq!(sleep.duration, Duration::from_secs(7));
    sleep.wake();
    wait_for("the delivery", || async { cursor_of(&db.pool, "busy").await == Some(events[0].sequence) }).await;
    let calls = sink.calls();
    assert_eq!((calls.len(), (calls[1].at - calls[0].at).whole_seconds()), (2, 7));
    dispatcher.shutdown().await;
}

#[tokio::test]
async fn a_dead_letter_is_replayed_then_marked_or_discarded() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(3)).await;
    let fixed = Arc::new(AtomicBool::new(false));
    let (poison, switch) = (events[1].id.clone(), fixed.clone());
    let sink = ScriptedSink::new("replay", move |batch: &[Event]| {
        if !switch.load(Ordering::SeqCst) && batch.iter().any(|e| e.id == poison) {
            Err(SinkError::refused("HTTP 400"))
        } else {
            Ok(())
        }
    });
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::new(sink.clone())]).unwrap();
    wait_for("the batch", || async { cursor_of(&db.pool, "replay").await == Some(events[2].sequence) }).await;
    let letter = dead_letter::list(&db.pool, &ListRequest::pending("replay")).await.unwrap().remove(0);
    assert_eq!(dispatcher.status().await.unwrap()[0].dead_letters, 1);

    let refused = dispatcher.replay("replay", letter.id).await.unwrap_err();
    assert!(matches!(refused, Error::Delivery { .. }), "{refused}");
    assert!(dead_letter::get(&db.pool, "replay", letter.id).await.unwrap().unwrap().replayed_at.is_none());

    fixed.store(true, Ordering::SeqCst);
    dispatcher.replay("replay", letter.id).await.unwrap();
    assert_eq!(sink.delivered().last(), Some(&events[1]), "the replay delivered the event again");
    assert!(dead_letter::get(&db.pool, "replay", letter.id).await.unwrap().unwrap().replayed_at.is_some());
    assert_eq!(dispatcher.status().await.unwrap()[0].dead_letters, 0);

    outbox_workers::discard(&db.pool, "replay", letter.id).await.unwrap();
    let gone = outbox_workers::discard(&db.pool, "replay", letter.id).await.unwrap_err();
    assert_eq!(gone.to_string(), format!("sink \"replay\" has no dead letter {}", letter.id));
    assert!(matches!(dispatcher.replay("nope", 1).await, Err(Error::UnknownSink(_))));
    dispatcher.shutdown().await;
}
