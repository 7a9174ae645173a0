//! The lane of a subject (SPEC §7.7): one stated hash, the same number from Rust and SQL.

use outbox_pg::testkit::TestDb;
use outbox_pg::{MAX_LANES, subject_lane};

/// 2,000 subjects of a few kinds, non-ASCII ones among them.
fn subjects() -> Vec<String> {
    (0..2000).map(|n| format!("{}/{n}{}", ["order", "node", "k"][n % 3], if n % 7 == 0 { "é" } else { "" })).collect()
}

#[tokio::test]
async fn rust_and_sql_give_every_subject_the_same_lane() {
    let db = TestDb::new().await;
    let subjects = subjects();
    for lanes in [1_u32, 2, 3, 7, 16, 255, 256] {
        let sql: Vec<i32> = sqlx::query_scalar("SELECT outbox_subject_lane(s, $2) FROM unnest($1::text[]) s")
            .bind(&subjects)
            .bind(lanes as i32)
            .fetch_all(&db.pool)
            .await
            .unwrap();
        for (subject, sql) in subjects.iter().zip(sql) {
            let rust = subject_lane(subject, lanes).expect("a lane count in range");
            assert_eq!(i64::from(sql), i64::from(rust), "{subject} among {lanes}");
            assert!(rust < lanes);
        }
    }
}

#[tokio::test]
async fn a_count_outside_one_to_256_has_no_lane_on_either_side() {
    let db = TestDb::new().await;
    for lanes in [0_i32, -1, 257, i32::MAX] {
        let sql: Option<i32> = sqlx::query_scalar("SELECT outbox_subject_lane('order/o1', $1)")
            .bind(lanes)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(sql, None, "{lanes}");
        assert_eq!(subject_lane("order/o1", u32::try_from(lanes).unwrap_or(u32::MAX)), None, "{lanes}");
    }
    assert_eq!(subject_lane("order/o1", MAX_LANES + 1), None);
}

#[test]
fn subjects_spread_over_the_lanes() {
    let mut counts = [0_u32; 16];
    for subject in subjects() {
        counts[subject_lane(&subject, 16).unwrap() as usize] += 1;
    }
    // 125 a lane on average; a stated hash gives these counts every run.
    assert!(counts.iter().all(|&count| (90..=160).contains(&count)), "{counts:?}");
}

// ---- Lane cursors ------------------------------------------------------------------------------

mod cursors {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use outbox_core::Position;
    use outbox_pg::internal::cursor::{self, Durability, OUTBOX_STREAM, Saved, lane_name, prepare_lanes};
    use outbox_pg::internal::lease::acquire;
    use outbox_pg::sqlx::PgPool;
    use outbox_pg::testkit::TestDb;
    use outbox_pg::{Lane, ReadRequest, read_page};

    use outbox_core::NewEvent;

    async fn positions(pool: &PgPool, name: &str) -> BTreeMap<String, Position> {
        let marks = cursor::lane_marks(pool, OUTBOX_STREAM, name).await.unwrap();
        marks.into_iter().map(|(name, mark)| (name, mark.position)).collect()
    }

    fn lane(index: u32, of: u32) -> Lane {
        Lane::new(index, of).unwrap()
    }

    /// Saves cursor `name` at `to` under a lease of its own.
    async fn save(pool: &PgPool, name: &str, to: Position) -> Saved {
        static LEASES: AtomicU32 = AtomicU32::new(0);
        let lease_name = format!("test:{}", LEASES.fetch_add(1, Ordering::Relaxed));
        let lease = acquire(pool, &lease_name, "a", Duration::from_secs(30)).await.unwrap().unwrap();
        cursor::save(pool, &lease, OUTBOX_STREAM, name, to, Durability::Flushed).await.unwrap()
    }

    #[tokio::test]
    async fn new_lanes_start_at_the_slowest_cursor_of_any_count_and_the_old_count_goes() {
        let db = TestDb::new().await;
        let name = "sink:billing";
        // A consumer of one lane keeps no cursor until it saves one; lanes start at the start.
        prepare_lanes(&db.pool, OUTBOX_STREAM, name, 1).await.unwrap();
        assert!(positions(&db.pool, name).await.is_empty());
        prepare_lanes(&db.pool, OUTBOX_STREAM, name, 2).await.unwrap();
        let two: Vec<Position> = positions(&db.pool, name).await.into_values().collect();
        assert_eq!(two, vec![Position::START; 2]);

        // One lane at (10, 5): four lanes all start there, and the single cursor goes.
        sqlx::query("DELETE FROM outbox_cursors").execute(&db.pool).await.unwrap();
        assert_eq!(save(&db.pool, name, Position::new(10, 5)).await, Saved::Moved);
        prepare_lanes(&db.pool, OUTBOX_STREAM, name, 4).await.unwrap();
        let four = positions(&db.pool, name).await;
        let expected: BTreeMap<String, Position> =
            (0..4).map(|i| (lane_name(name, lane(i, 4)), Position::new(10, 5))).collect();
        assert_eq!(four, expected);

        // The four lanes go their own ways; sixteen start at the slowest of them.
        for (i, to) in [(0, Position::new(12, 1)), (1, Position::new(11, 3)), (2, Position::new(14, 0))] {
            assert_eq!(save(&db.pool, &lane_name(name, lane(i, 4)), to).await, Saved::Moved);
        }
        prepare_lanes(&db.pool, OUTBOX_STREAM, name, 16).await.unwrap();
        let sixteen = positions(&db.pool, name).await;
        assert_eq!(sixteen.len(), 16, "{sixteen:?}");
        assert!(sixteen.iter().all(|(n, at)| n.ends_with("/16") && *at == Position::new(10, 5)), "{sixteen:?}");

        // Prepared again, nothing moves: a lane's own progress is kept.
        let moved = lane_name(name, lane(3, 16));
        assert_eq!(save(&db.pool, &moved, Position::new(20, 0)).await, Saved::Moved);
        prepare_lanes(&db.pool, OUTBOX_STREAM, name, 16).await.unwrap();
        assert_eq!(positions(&db.pool, name).await[&moved], Position::new(20, 0));
        // Another consumer's cursors are not its: `sink:billing-eu` stays.
        assert_eq!(save(&db.pool, "sink:billing-eu", Position::new(1, 1)).await, Saved::Moved);
        prepare_lanes(&db.pool, OUTBOX_STREAM, name, 2).await.unwrap();
        assert_eq!(cursor::load(&db.pool, OUTBOX_STREAM, "sink:billing-eu").await.unwrap(), Some(Position::new(1, 1)));
    }

    #[tokio::test]
    async fn a_save_never_brings_back_a_replaced_lane_cursor() {
        let db = TestDb::new().await;
        let name = "sink:billing";
        prepare_lanes(&db.pool, OUTBOX_STREAM, name, 4).await.unwrap();
        let old = lane_name(name, lane(1, 4));
        assert_eq!(save(&db.pool, &old, Position::new(5, 0)).await, Saved::Moved);
        prepare_lanes(&db.pool, OUTBOX_STREAM, name, 8).await.unwrap();
        assert_eq!(save(&db.pool, &old, Position::new(6, 0)).await, Saved::Replaced);
        let names: Vec<String> = positions(&db.pool, name).await.into_keys().collect();
        assert!(names.iter().all(|n| n.ends_with("/8")), "{names:?}");
        // A consumer's own cursor (no `#`) is created by its first save, as always.
        assert_eq!(save(&db.pool, "sink:other", Position::new(6, 0)).await, Saved::Moved);
    }

    #[tokio::test]
    async fn prepared_at_once_by_many_the_lanes_end_up_one_layout() {
        let db = TestDb::new().await;
        let name = "sink:race";
        assert_eq!(save(&db.pool, name, Position::new(7, 0)).await, Saved::Moved);
        let racers = (0..8).map(|_| {
            let pool = db.pool.clone();
            tokio::spawn(async move { prepare_lanes(&pool, OUTBOX_STREAM, name, 16).await.unwrap() })
        });
        for racer in racers {
            racer.await.unwrap();
        }
        let lanes = positions(&db.pool, name).await;
        assert_eq!(lanes.len(), 16);
        assert!(lanes.values().all(|at| *at == Position::new(7, 0)));
    }

    #[tokio::test]
    async fn a_lane_read_returns_its_subjects_only_and_pages_like_the_whole() {
        let db = TestDb::new().await;
        let events: Vec<NewEvent> = (0..300)
            .map(|n| NewEvent::new("node.joined", "acme", format!("node/{}", n % 37), serde_json::json!({ "n": n })))
            .collect();
        outbox_pg::publish_many(&db.pool, &events).await.unwrap();
        let all = crate::support::read_until(&db.pool, ReadRequest::all().limit(1000), 300).await;
        for index in 0..4 {
            let lane = lane(index, 4);
            let mut request = ReadRequest::all().lane(lane).limit(17);
            let mut got = Vec::new();
            loop {
                let page = read_page(&db.pool, &request).await.unwrap();
                got.extend(page.events.iter().map(|e| e.id.clone()));
                if !page.more {
                    break;
                }
                request.after = Some(page.next_after);
            }
            let want: Vec<String> = all.iter().filter(|e| lane.holds(&e.subject)).map(|e| e.id.clone()).collect();
            assert_eq!(got, want, "lane {index}");
        }
    }
}
