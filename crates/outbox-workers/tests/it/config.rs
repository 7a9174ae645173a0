//! `[[sinks]]` tables: the SPEC's example builds, and every mistake names its key.

use outbox_workers::config::{SinkConfig, SinkKind, build_sink, build_spec};
use outbox_workers::encoding::Encoding;
use serde::Deserialize;

#[derive(Deserialize)]
struct File {
    sinks: Vec<SinkConfig>,
}

/// The `[[sinks]]` example of SPEC §7.5, verbatim.
const SPEC_EXAMPLE: &str = r#"
[[sinks]]
id = "billing"                      # ^[a-z0-9][a-z0-9_-]{0,63}$, unique
kind = "webhook"                    # webhook | nats | redis | jsonl
types = ["reservation.*"]           # patterns (§3.5); default ["*"]
tenant = "acme"                     # optional: one tenant's events only
batch = 100                         # events per delivery call
encoding = "json"                   # json | cloudevents | protobuf
url = "https://billing.example.com/hooks/outbox"   # webhook target
secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"   # webhook: Standard Webhooks secret

[[sinks]]
id = "bus"
kind = "nats"
url = "nats://127.0.0.1:4222"
subject = "outbox.{tenantId}.{type}"
stream = "OUTBOX"                   # created when absent, capturing the template's fixed prefix ("outbox.>")

[[sinks]]
id = "feed"
kind = "redis"
url = "redis://127.0.0.1:6379"
key = "outbox:{tenantId}"
maxlen = 1000000                    # optional, XADD MAXLEN ~

[[sinks]]
id = "archive"
kind = "jsonl"
path = "/var/lib/outbox/events.jsonl"

[[sinks]]
id = "log"
kind = "kafka"
brokers = "127.0.0.1:9092"
topic = "outbox.{tenantId}"         # placeholders as for nats
[sinks.properties]                  # optional: librdkafka properties
"compression.type" = "zstd"

[[sinks]]
id = "stream"
kind = "rabbitmq"
url = "rabbitmq-stream://guest:guest@127.0.0.1:5552/%2f"
stream = "outbox"                   # created when absent
"#;

#[test]
fn the_spec_example_parses_and_builds_every_sink() {
    let file: File = toml::from_str(SPEC_EXAMPLE).unwrap();
    let kinds: Vec<SinkKind> = file.sinks.iter().map(|s| s.kind).collect();
    let all =
        [SinkKind::Webhook, SinkKind::Nats, SinkKind::Redis, SinkKind::Jsonl, SinkKind::Kafka, SinkKind::Rabbitmq];
    assert_eq!(kinds, all);
    let billing = &file.sinks[0];
    assert_eq!((billing.tenant.as_deref(), billing.batch, billing.encoding), (Some("acme"), 100, Encoding::Json));
    assert_eq!(billing.filter().types[0].as_str(), "reservation.*");
    assert_eq!(file.sinks[1].types[0].as_str(), "*", "types default to every type");
    for config in &file.sinks {
        let sink = build_sink(config).unwrap_or_else(|e| panic!("{}: {e}", config.id));
        assert_eq!(sink.id(), config.id);
    }
    let spec = build_spec(billing).unwrap();
    assert_eq!((spec.batch, spec.max_attempts, spec.filter.tenant.as_deref()), (100, 5, Some("acme")));
}

#[track_caller]
fn check(table: &str, expect: &str) {
    let parsed = toml::from_str::<File>(&format!("[[sinks]]\n{table}"));
    let message = match parsed {
        Err(error) => error.to_string(),
        Ok(file) => match build_sink(&file.sinks[0]) {
            Ok(_) => "ok".to_owned(),
            Err(error) => error.to_string(),
        },
    };
    assert!(message.contains(expect), "{table}\n=> {message}\n(expected {expect:?})");
}

#[test]
fn every_mistake_names_its_key() {
    let webhook =
        "kind = \"webhook\"\nurl = \"http://127.0.0.1:9/h\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"";
    check(&format!("id = \"ok\"\n{webhook}"), "ok");
    check(&format!("id = \"Billing\"\n{webhook}"), "sinks[Billing].id");
    check(&format!("id = \"-x\"\n{webhook}"), "sinks[-x].id");
    check(&format!("id = \"{}\"\n{webhook}", "a".repeat(65)), "must match ^[a-z0-9][a-z0-9_-]{0,63}$");
    check(&format!("id = \"{}\"\n{webhook}", "a".repeat(64)), "ok");
    check(&format!("id = \"x\"\n{webhook}\ncolour = \"red\""), "unknown field `colour`");
    check(&format!("id = \"x\"\n{webhook}\nkey = \"k\""), "sinks[x].key: belongs to kind redis");
    check(&format!("id = \"x\"\n{webhook}\nbatch = 0"), "sinks[x].batch: must be 1 to 1000");
    check(&format!("id = \"x\"\n{webhook}\nbatch = 1001"), "sinks[x].batch");
    check(&format!("id = \"x\"\n{webhook}\ntypes = []"), "sinks[x].types");
    check(&format!("id = \"x\"\n{webhook}\ntypes = [\"Bad\"]"), "invalid");
    check(&format!("id = \"x\"\n{webhook}\ntenant = \"a b\""), "sinks[x].tenant");
    check(&format!("id = \"x\"\n{webhook}\nencoding = \"xml\""), "unknown variant `xml`");
    check(&format!("id = \"x\"\n{webhook}\nsource = \"/s\""), "sinks[x].source: belongs to encoding \"cloudevents\"");
    check("id = \"x\"\nkind = \"webhook\"\nurl = \"http://h/\"", "sinks[x].secret: is required");
    check(
        "id = \"x\"\nkind = \"webhook\"\nurl = \"ftp://h/\"\nsecret = \"whsec_AAAA\"",
        "sinks[x].url: must be an http",
    );
    check(
        "id = \"x\"\nkind = \"webhook\"\nurl = \"http://h/\"\nsecret = \"AAAA\"",
        "sinks[x].secret: must start with whsec_",
    );
    check("id = \"x\"\nkind = \"kafka\"", "sinks[x].brokers: is required");
    check("id = \"x\"\nkind = \"mqtt\"", "unknown variant `mqtt`");
    check("id = \"x\"\nkind = \"nats\"", "sinks[x].url: is required");
    check(
        "id = \"x\"\nkind = \"nats\"\nurl = \"nats://h\"\nsubject = \"a.{tenant}\"",
        "sinks[x].subject: unknown placeholder",
    );
    check("id = \"x\"\nkind = \"nats\"\nurl = \"nats://h\"\nsubject = \"{type}\"\nstream = \"S\"", "sinks[x].subject");
    check("id = \"x\"\nkind = \"nats\"\nurl = \"nats://h\"\nstream = \"a.b\"", "sinks[x].stream");
    check("id = \"x\"\nkind = \"redis\"\nurl = \"nats://h\"", "sinks[x].url");
    check("id = \"x\"\nkind = \"redis\"\nurl = \"redis://h\"\nmaxlen = 0", "sinks[x].maxlen");
    check(
        "id = \"x\"\nkind = \"redis\"\nurl = \"redis://h\"\npath = \"/tmp/x\"",
        "sinks[x].path: belongs to kind jsonl",
    );
    check("id = \"x\"\nkind = \"jsonl\"", "sinks[x].path: is required");
    check("id = \"x\"\nkind = \"jsonl\"\npath = \"/tmp/x\"\nencoding = \"protobuf\"", "sinks[x].encoding");
}

#[test]
fn kafka_and_rabbitmq_mistakes_name_their_keys() {
    let kafka = "id = \"x\"\nkind = \"kafka\"\nbrokers = \"127.0.0.1:9092\"";
    check(kafka, "ok");
    check(&format!("{kafka}\ntopic = \"t.{{tenantId}}.{{type}}\"\ntimeout_ms = 500"), "ok");
    check(&format!("{kafka}\ntopic = \"t.{{tenant}}\""), "sinks[x].topic: unknown placeholder");
    check(&format!("{kafka}\nurl = \"kafka://h\""), "sinks[x].url: belongs to kind");
    check("id = \"x\"\nkind = \"kafka\"\nbrokers = \" \"", "sinks[x].brokers");
    let properties = |table: &str| format!("{kafka}\n[sinks.properties]\n{table}");
    check(
        &properties("\"compression.type\" = \"zstd\"\n\"linger.ms\" = 20\n\"enable.gapless.guarantee\" = true"),
        "ok",
    );
    check(
        &properties("\"no.such.property\" = \"1\""),
        "sinks[x].properties.\"no.such.property\": librdkafka refuses it",
    );
    check(
        &properties("\"compression.type\" = \"brotli\""),
        "sinks[x].properties.\"compression.type\": librdkafka refuses it",
    );
    check(&properties("\"acks\" = \"1\""), "sinks[x].properties.\"acks\": is set by the sink itself");
    check(&properties("\"bootstrap.servers\" = \"h:1\""), "sinks[x].properties.\"bootstrap.servers\"");
    check(
        "id = \"x\"\nkind = \"nats\"\nurl = \"nats://h\"\n[sinks.properties]\n\"a\" = \"b\"",
        "sinks[x].properties: belongs to kind kafka",
    );

    let rabbitmq = "id = \"x\"\nkind = \"rabbitmq\"\nurl = \"rabbitmq-stream://guest:guest@127.0.0.1:5552/%2f\"";
    check(rabbitmq, "ok");
    check(&format!("{rabbitmq}\nstream = \"events\""), "ok");
    check("id = \"x\"\nkind = \"rabbitmq\"", "sinks[x].url: is required");
    check(
        "id = \"x\"\nkind = \"rabbitmq\"\nurl = \"amqp://h\"",
        "sinks[x].url: \"amqp://h\" must start with rabbitmq-stream://",
    );
    check(&format!("{rabbitmq}\nstream = \"\""), "sinks[x].stream");
    check(&format!("{rabbitmq}\ntopic = \"t\""), "sinks[x].topic: belongs to kind kafka");
}

#[track_caller]
fn check_spec(table: &str, expect: &str) {
    let file: File = toml::from_str(&format!("[[sinks]]\n{table}")).expect("a table");
    let message = match build_spec(&file.sinks[0]) {
        Ok(spec) => format!("ok {}", spec.lanes),
        Err(error) => error.to_string(),
    };
    assert!(message.contains(expect), "{table}\n=> {message}\n(expected {expect:?})");
}

#[test]
fn lanes_are_one_to_256_and_refused_by_sinks_whose_ids_must_grow() {
    let webhook = "id = \"w\"\nkind = \"webhook\"\nurl = \"http://127.0.0.1:9/h\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"";
    check_spec(webhook, "ok 1");
    check_spec(&format!("{webhook}\nlanes = 16"), "ok 16");
    check_spec(&format!("{webhook}\nlanes = 256"), "ok 256");
    check_spec(&format!("{webhook}\nlanes = 0"), "sinks[w].lanes: must be 1 to 256");
    check_spec(&format!("{webhook}\nlanes = 257"), "sinks[w].lanes: must be 1 to 256");
    let redis = "id = \"r\"\nkind = \"redis\"\nurl = \"redis://127.0.0.1:6379\"\nlanes = 4";
    check_spec(redis, "sinks[r].lanes: must be 1: a redis sink's entry ids are positions");
    let rabbit = "id = \"q\"\nkind = \"rabbitmq\"\nurl = \"rabbitmq-stream://guest:guest@127.0.0.1:5552/%2f\"\nstream = \"s\"\nlanes = 2";
    check_spec(rabbit, "sinks[q].lanes: must be 1: a rabbitmq sink's publishing ids");
    check_spec("id = \"j\"\nkind = \"jsonl\"\npath = \"/tmp/x.jsonl\"\nlanes = 8", "ok 8");
}
