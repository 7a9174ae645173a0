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
