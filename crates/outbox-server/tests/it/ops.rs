//! Operating the server: `/metrics` (parsed strictly), the `retention` role, and readers
//! resuming from a pruned position on `GET /events` and `GET /watch`.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use outbox_core::{Event, NewEvent, Position};
use outbox_e2e::client::{get, watch};
use outbox_e2e::wait::until;
use outbox_pg::internal::clock;
use outbox_pg::sqlx::PgPool;
use outbox_pg::testkit::TestDb;
use outbox_pg::{ReadRequest, read_page};
use outbox_workers::retention::{RetentionConfig, pass};
use serde_json::json;

use crate::support::{TestServer, config, database, token};

const TWO_HOURS: Duration = Duration::from_secs(7200);

/// One sample: the metric name, its labels, its value.
type Sample = (String, BTreeMap<String, String>, f64);

/// A strict parser of the Prometheus text format 0.0.4: every line is a `# HELP`, a
/// `# TYPE` (once per family, before its samples, with a known type) or a sample of a
/// declared family (`_count`/`_sum` for summaries) with well-formed labels and a float.
fn parse(text: &str) -> Vec<Sample> {
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = Vec::new();
    assert!(text.ends_with('\n'), "the exposition ends with a line break");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP has a name and a text");
            assert!(valid_name(name) && !help.is_empty(), "{line}");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE has a name and a type");
            assert!(valid_name(name), "{line}");
            assert!(["counter", "gauge", "summary", "histogram", "untyped"].contains(&kind), "{line}");
            assert!(types.insert(name.into(), kind.into()).is_none(), "TYPE given twice: {line}");
        } else {
            assert!(!line.starts_with('#') && !line.is_empty(), "unexpected line {line:?}");
            samples.push(sample(line, &types));
        }
    }
    let mut seen = HashSet::new();
    for (name, labels, _) in &samples {
        assert!(seen.insert((name.clone(), labels.clone())), "a sample repeats: {name} {labels:?}");
    }
    samples
}

fn sample(line: &str, types: &BTreeMap<String, String>) -> Sample {
    let name_end = line.find(['{', ' ']).expect("a sample has a value");
    let name = &line[..name_end];
    assert!(valid_name(name), "{line}");
    let family = types.get(name).map(|_| name).or_else(|| {
        let base = name.strip_suffix("_count").or_else(|| name.strip_suffix("_sum"))?;
        (types.get(base)? == "summary").then_some(base)
    });
    assert!(family.is_some(), "sample of an undeclared family: {line}");
    if types.get(name).is_some_and(|kind| kind == "counter") {
        assert!(name.ends_with("_total"), "a counter's name ends in _total: {line}");
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let close = inner.find("} ").expect("labels close before the value");
        for pair in split_labels(&inner[..close]) {
            let (key, value) = pair.split_once('=').expect("label=value");
            assert!(valid_name(key), "{line}");
            let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).expect("a quoted label value");
            assert!(labels.insert(key.to_owned(), value.replace("\\\"", "\"")).is_none(), "label twice: {line}");
        }
        rest = &inner[close + 1..];
    }
    let value = rest.strip_prefix(' ').expect("one space before the value");
    let value: f64 = value.parse().unwrap_or_else(|_| panic!("a float value: {line}"));
    (name.to_owned(), labels, value)
}

fn split_labels(text: &str) -> Vec<&str> {
    let (mut parts, mut start, mut quoted, mut escaped) = (Vec::new(), 0, false, false);
    for (i, ch) in text.char_indices() {
        match ch {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    assert!(!quoted, "an unterminated label value: {text}");
    parts.push(&text[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z' | 'A'..='Z' | '_' | ':'))
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v)))
        .map(|(_, _, v)| *v)
}

async fn scrape(server: &TestServer) -> Vec<Sample> {
    let reply = get(server.addr, "/metrics", None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.headers["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
    parse(&reply.body)
}

async fn publish(pool: &PgPool, n: usize) -> Vec<Event> {
    let events: Vec<NewEvent> =
        (0..n).map(|i| NewEvent::new("node.joined", "acme", format!("node/n{i}"), json!({ "n": i }))).collect();
    let mut tx = pool.begin().await.unwrap();
    outbox_pg::publish_many(&mut *tx, &events).await.unwrap();
    tx.commit().await.unwrap();
    let visible = || async { read_page(pool, &ReadRequest::all().limit(1000)).await.unwrap().events };
    until("the events to become visible", Duration::from_secs(30), || async { visible().await.len() >= n }).await;
    visible().await
}

async fn set_cursor(pool: &PgPool, name: &str, at: Position) {
    outbox_pg::testkit::set_cursor(pool, name, at).await.expect("set cursor");
}

#[tokio::test]
async fn metrics_parse_and_move_when_events_flow() {
    let db = database().await;
    let mut settings = config();
    settings.metrics.tenant_classes.insert("acme".into(), "enterprise".into());
    let server = TestServer::start(&db, settings).await;
    let before = scrape(&server).await;
    assert_eq!(value(&before, "outbox_streams_open", &[]), Some(0.0));
    assert_eq!(value(&before, "outbox_events_sent_total", &[("tenant_class", "enterprise")]), None);
    assert!(value(&before, "outbox_xmin_horizon_age_seconds", &[]).is_some());
    assert_eq!(value(&before, "outbox_metrics_database_up", &[]), Some(1.0));
    assert!(value(&before, "outbox_retention_passes_total", &[]).is_some(), "role all runs retention");
    assert_eq!(value(&before, "outbox_tail_poll_duration_seconds_count", &[]), Some(0.0), "no stream, no poll");

    let reader = token("acme", "events:read", None);
    let mut stream = watch(server.addr, "/watch?cursor=0.0", Some(&reader)).await.expect("a stream");
    publish(&db.pool, 3).await;
    stream.until(Duration::from_secs(30), |frame| frame.json()["data"]["n"] == 2).await;
    assert_eq!(get(server.addr, "/events", Some(&reader)).await.status, 200);

    let after = scrape(&server).await;
    assert_eq!(value(&after, "outbox_streams_open", &[]), Some(1.0));
    assert_eq!(value(&after, "outbox_streams_opened_total", &[]), Some(1.0));
    assert_eq!(value(&after, "outbox_events_sent_total", &[("tenant_class", "enterprise")]), Some(3.0));
    assert_eq!(value(&after, "outbox_list_requests_total", &[]), Some(1.0));

    // The open stream is on the shared tail, which polls for it.
    let polls = |samples: &[Sample]| value(samples, "outbox_tail_poll_duration_seconds_count", &[]).unwrap_or_default();
    until("the tail to poll for the open stream", Duration::from_secs(30), || async {
        polls(&scrape(&server).await) > 0.0
    })
    .await;
    let now = scrape(&server).await;
    assert!(value(&now, "outbox_tail_poll_duration_seconds_sum", &[]).is_some_and(|sum| sum > 0.0));
    drop(stream);
}

/// A list cursor and a `Last-Event-ID` older than what retention pruned continue with the
/// oldest row still stored, without an error.
#[tokio::test]
async fn readers_resume_from_a_pruned_position_at_the_oldest_row() {
    let db = database().await;
    let events = publish(&db.pool, 10).await;
    set_cursor(&db.pool, "reports", events[5].sequence).await;
    clock::advance(&db.pool, TWO_HOURS).await.unwrap();
    assert_eq!(pass(&db.pool, &RetentionConfig::default()).await.unwrap().deleted, 6);

    let server = TestServer::start(&db, config()).await;
    let reader = token("acme", "events:read", None);
    let pruned = events[2].sequence;
    let page =
        get(server.addr, &format!("/events?cursor={}", pruned.to_string().replace('.', ":")), Some(&reader)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let items = page.json()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 4);
    assert_eq!(items[0]["id"], events[6].id, "the oldest row still stored comes first");

    let mut stream = watch(server.addr, &format!("/watch?cursor={pruned}"), Some(&reader)).await.expect("a stream");
    let first = stream.until(Duration::from_secs(30), |frame| frame.id.is_some()).await;
    assert_eq!(first.id.as_deref(), Some(events[6].sequence.to_string().as_str()));
}

/// The `retention` role prunes on its own, and says so in `/metrics`.
#[tokio::test]
async fn the_retention_role_prunes_and_counts() {
    let db: TestDb = database().await;
    let events = publish(&db.pool, 8).await;
    set_cursor(&db.pool, "reports", events[7].sequence).await;
    clock::advance(&db.pool, TWO_HOURS).await.unwrap();
    let mut settings = config();
    settings.roles = outbox_server::config::Roles::parse("retention", "test").unwrap();
    let server = TestServer::start(&db, settings).await;
    until("retention to prune", Duration::from_secs(30), || async {
        read_page(&db.pool, &ReadRequest::all()).await.unwrap().events.is_empty()
    })
    .await;
    // The pass's count lands after its DELETE commits, so the table empties first.
    until("the pass to be counted", Duration::from_secs(30), || async {
        value(&scrape(&server).await, "outbox_retention_rows_deleted_total", &[]).is_some_and(|n| n >= 8.0)
    })
    .await;
    let samples = scrape(&server).await;
    assert_eq!(value(&samples, "outbox_retention_rows_deleted_total", &[]), Some(8.0));
    assert_eq!(get(server.addr, "/readyz", None).await.status, 200);
    assert_eq!(get(server.addr, "/events", None).await.status, 404, "no http role");
}

/// A sink of four lanes (SPEC §7.7): `GET /sinks/{id}` and `/metrics` show each lane's lag
/// and the slowest lane, and every lane's cursor reaches its last event.
#[tokio::test]
async fn a_laned_sink_shows_each_lanes_lag_and_the_slowest_lane() {
    let db = database().await;
    let path = std::env::temp_dir().join(format!("outbox-lanes-{}-{}.jsonl", std::process::id(), rand_suffix()));
    let mut settings = config();
    let sink = json!({"id": "archive", "kind": "jsonl", "path": path, "lanes": 4});
    settings.sinks.push(serde_json::from_value(sink).expect("a jsonl sink"));
    settings.validate().expect("the configuration");
    let admin = token("acme", "admin", None);
    let events = publish(&db.pool, 40).await;
    let server = TestServer::start(&db, settings).await;

    let status = || async { get(server.addr, "/sinks/archive", Some(&admin)).await.json() };
    until("every lane caught up", Duration::from_secs(30), || async {
        let status = status().await;
        status["lanes"].as_array().is_some_and(|lanes| lanes.len() == 4 && lanes.iter().all(|l| l["lag"] == 0))
    })
    .await;
    let status = status().await;
    let lanes = status["lanes"].as_array().unwrap();
    for (index, lane) in lanes.iter().enumerate() {
        assert_eq!(lane["lane"], index);
        let last = events.iter().rfind(|e| outbox_pg::subject_lane(&e.subject, 4) == Some(index as u32)).unwrap();
        let at: Position = lane["position"].as_str().unwrap().parse().unwrap();
        assert!(at >= last.sequence, "lane {index} at {at}, its last event at {}", last.sequence);
    }
    // The slowest lane has the most lag, the lowest index among equals: all level here.
    let slowest = status["slowestLane"].as_u64().expect("the slowest lane") as usize;
    assert_eq!(slowest, 0);

    let samples = scrape(&server).await;
    for lane in 0..4 {
        let lane = lane.to_string();
        assert_eq!(value(&samples, "outbox_sink_lane_lag", &[("sink", "archive"), ("lane", &lane)]), Some(0.0));
    }
    assert_eq!(value(&samples, "outbox_sink_slowest_lane", &[("sink", "archive")]), Some(slowest as f64));
    let written = std::fs::read_to_string(&path).expect("the sink's file");
    assert_eq!(written.lines().count(), 40, "every event once");
    let _ = std::fs::remove_file(&path);
}

fn rand_suffix() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}
