//! The jsonl sink: one line per event, appended, nothing repeated across a restart.

use outbox_core::Event;
use outbox_workers::config::{SinkConfig, SinkKind, build_spec};
use outbox_workers::encoding::Encoding;
use outbox_workers::{Dispatcher, SinkSpec};

use crate::support::{cursor_of, db, fast_config, numbered, publish_and_read, unique, wait_for};

fn jsonl(id: &str, path: &std::path::Path) -> SinkConfig {
    let mut config = SinkConfig::new(id, SinkKind::Jsonl);
    config.path = Some(path.to_owned());
    config.batch = 50;
    config
}

#[tokio::test]
async fn appends_one_json_line_per_event_and_a_restart_continues_the_file() {
    let db = db().await;
    let path = std::env::temp_dir().join(format!("{}.jsonl", unique("outbox-")));
    let first = publish_and_read(&db.pool, &numbered(120)).await;
    let spec = build_spec(&jsonl("archive", &path)).unwrap();
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![spec]).unwrap();
    let mid = first.last().unwrap().sequence;
    wait_for("the first events", || async { cursor_of(&db.pool, "archive").await == Some(mid) }).await;
    dispatcher.shutdown().await;

    let all = publish_and_read(&db.pool, &numbered(30)).await;
    let dispatcher =
        Dispatcher::start(db.pool.clone(), fast_config(), vec![build_spec(&jsonl("archive", &path)).unwrap()]).unwrap();
    let last = all.last().unwrap().sequence;
    wait_for("the rest", || async { cursor_of(&db.pool, "archive").await == Some(last) }).await;
    dispatcher.shutdown().await;

    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<Event> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines, all);
    assert!(text.ends_with('\n'));
    std::fs::remove_file(&path).unwrap();
}

#[tokio::test]
async fn writes_cloudevents_lines_when_asked() {
    let db = db().await;
    let path = std::env::temp_dir().join(format!("{}.jsonl", unique("outbox-")));
    let events = publish_and_read(&db.pool, &numbered(3)).await;
    let mut config = jsonl("cloud", &path);
    config.encoding = Encoding::CloudEvents;
    let sink = outbox_workers::config::build_sink(&config).unwrap();
    let dispatcher = Dispatcher::start(db.pool.clone(), fast_config(), vec![SinkSpec::shared(sink.into())]).unwrap();
    let last = events.last().unwrap().sequence;
    wait_for("the events", || async { cursor_of(&db.pool, "cloud").await == Some(last) }).await;
    dispatcher.shutdown().await;
    let text = std::fs::read_to_string(&path).unwrap();
    let ids: Vec<String> = text
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .inspect(|value| assert_eq!(value["specversion"], "1.0"))
        .map(|value| value["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, events.iter().map(|e| e.id.clone()).collect::<Vec<_>>());
    std::fs::remove_file(&path).unwrap();
}

#[tokio::test]
async fn an_unwritable_path_is_a_retryable_failure() {
    let db = db().await;
    let events = publish_and_read(&db.pool, &numbered(1)).await;
    let sink = outbox_workers::config::build_sink(&jsonl("nowhere", std::path::Path::new("/nonexistent/dir/x.jsonl")))
        .unwrap();
    let error = sink.deliver(&events).await.unwrap_err();
    assert!(error.is_retryable() && error.message().contains("/nonexistent/dir/x.jsonl"), "{error}");
}
