//! KAFKA TOPIC ingestors and emitters through a real node against librdkafka's mock cluster
//! (the Kafka protocol on loopback ports): records flow topic → filter/map → topic in every
//! delivery mode with count parity, keys and headers; positions are committed only after the
//! downstream acknowledgement; a rejected record is sought back to and delivered again; two
//! instances share the partitions without loss; kill -9 mid-stream in ACK PARALLEL and a restart
//! deliver every record at least once.

mod support;

#[path = "support/kafka.rs"]
mod kafka;

use std::collections::{BTreeMap, BTreeSet};

use support::dataplane::define;
use support::Node;

const PARTITIONS: i32 = 4;

/// `n` JSON records `{"id": i, "value": …}`; every third value contains an `x`.
fn records(n: usize) -> Vec<String> {
    records_from(0, n)
}

/// Records with ids `start..start + n`.
fn records_from(start: usize, n: usize) -> Vec<String> {
    (start..start + n)
        .map(|i| {
            let value = if i % 3 == 0 {
                format!("box-{i}")
            } else {
                format!("item-{i}")
            };
            format!(r#"{{"id": {i}, "value": "{value}"}}"#)
        })
        .collect()
}

fn matching(n: usize) -> BTreeSet<i64> {
    (0..n as i64).filter(|i| i % 3 == 0).collect()
}

/// A graph reading `input` in `mode` and writing the matching records, uppercased, to `output`.
fn graph(
    domain: &str,
    bootstrap: &str,
    input: &str,
    output: &str,
    group: &str,
    body: &str,
) -> String {
    format!(
        "
CREATE DOMAIN {domain};
USE {domain};
CREATE SCHEMA rec (id I64, value STRING);
CREATE WIRE JSON SCHEMA rec_wire MODE STRICT (id integer, value string);
CREATE CODEC rec_codec FROM WIRE JSON SCHEMA rec_wire TO SCHEMA rec;
CREATE RELAY recs SCHEMA rec UNBRANCHED;
CREATE CLIENT kafka_main TYPE KAFKA
  CONFIG {{'bootstrap.servers' = '{bootstrap}', 'auto.offset.reset' = 'earliest',
          'session.timeout.ms' = '6000', 'heartbeat.interval.ms' = '1000'}};
CREATE KAFKA TOPIC INGESTOR rec_in
  FROM kafka_main
  TOPIC '{input}'
  OFFSET BY CONSUMER GROUP '{group}'
  {body}
  ON QUIESCE SUSPEND
  DECODE USING rec_codec
  FILTER WHERE contains(input.value, 'x')
  TO recs
    INHERIT ALL
    SET value = upper(input.value)
    UNBRANCHED
    FLUSH EACH 10ms MAX BATCH SIZE 8MiB
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE KAFKA TOPIC EMITTER rec_out
  FROM recs
  TO kafka_main TOPIC '{output}' KEY input.id
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 20s
    RETRY POLICY BACKOFF 10ms MAX 100ms
    ENCODE USING rec_codec
  INVOKE write_header('source', 'nervix'), write_header('kind', lower(output.value))
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
"
    )
}

/// A mock cluster with topics `in` and `out` of `partitions` partitions, and its bootstrap.
fn in_and_out(partitions: i32) -> (nervix_connectors::kafka::MockKafka, String) {
    let cluster = kafka::cluster(partitions);
    let bootstrap = cluster.bootstrap_servers();
    for topic in ["in", "out"] {
        cluster.create_topic(topic, partitions).expect("topic");
    }
    (cluster, bootstrap)
}

/// `n` records through domain `name` (group `name`) in a graph paced by an ACK window of 8
/// records and 10 ms flushes (~800 records/s), so that a stop lands mid-stream; returns once
/// the first output exists.
fn paced_stream(name: &str, n: usize) -> (nervix_connectors::kafka::MockKafka, String, Node) {
    let (cluster, bootstrap) = in_and_out(PARTITIONS);
    kafka::produce(&bootstrap, "in", &records(n));
    let node = Node::start(&support::scratch_dir(&format!("ingest_kafka_{name}")));
    let body = "MODE ACK PARALLEL MAX 8 BATCH TIMEOUT 5ms ACK TIMEOUT 10s\n    \
                RETRY POLICY BACKOFF 10ms MAX 100ms";
    define(
        &mut node.admin(),
        &graph(name, &bootstrap, "in", "out", name, body),
    );
    let before = kafka::read_until(&bootstrap, "out", 60, |read| !read.is_empty());
    assert!(!before.is_empty(), "output started");
    (cluster, bootstrap, node)
}

/// Records of `in` that `group` has committed, over every partition.
fn committed_total(bootstrap: &str, group: &str) -> i64 {
    kafka::committed(bootstrap, "in", group, PARTITIONS)
        .iter()
        .filter_map(|(_, next)| *next)
        .sum()
}

/// The ids in `read`, with how often each came.
fn ids(read: &[kafka::ReadRecord]) -> BTreeMap<i64, usize> {
    let mut ids = BTreeMap::new();
    for record in read {
        let value: serde_json::Value = serde_json::from_str(&record.value).expect("JSON");
        *ids.entry(value["id"].as_i64().expect("id")).or_default() += 1;
    }
    ids
}

fn distinct(read: &[kafka::ReadRecord]) -> usize {
    ids(read).len()
}

#[test]
fn every_mode_moves_the_matching_records_with_keys_and_headers() {
    let cluster = kafka::cluster(PARTITIONS);
    let bootstrap = cluster.bootstrap_servers();
    let modes = [
        ("noack", "MODE NO ACK"),
        (
            "sequential",
            "MODE ACK SEQUENTIAL ACK TIMEOUT 10s RETRY POLICY BACKOFF 10ms MAX 100ms",
        ),
        (
            "parallel",
            "MODE ACK PARALLEL MAX 256 BATCH TIMEOUT 5ms ACK TIMEOUT 10s\n    \
             RETRY POLICY BACKOFF 10ms MAX 100ms",
        ),
    ];
    let n = 300;
    let dir = support::scratch_dir("ingest_kafka_modes");
    let node = Node::start(&dir);
    let mut admin = node.admin();
    for (name, body) in modes {
        let (input, output, group) = (
            format!("in-{name}"),
            format!("out-{name}"),
            format!("g-{name}"),
        );
        cluster.create_topic(&input, PARTITIONS).expect("topic");
        cluster.create_topic(&output, PARTITIONS).expect("topic");
        kafka::produce(&bootstrap, &input, &records(n));
        define(
            &mut admin,
            &graph(name, &bootstrap, &input, &output, &group, body),
        );
        let want = matching(n);
        let read = kafka::read_until(&bootstrap, &output, 60, |read| distinct(read) >= want.len());
        let got = ids(&read);
        assert_eq!(
            got.keys().copied().collect::<BTreeSet<_>>(),
            want,
            "{name}: exactly the matching records arrive"
        );
        for record in &read {
            let value: serde_json::Value = serde_json::from_str(&record.value).expect("JSON");
            let id = value["id"].as_i64().expect("id");
            assert_eq!(value["value"], format!("BOX-{id}"), "{name}: uppercased");
            assert_eq!(
                record.key.as_deref(),
                Some(id.to_string().as_str()),
                "{name}: KEY"
            );
            assert_eq!(
                record.headers,
                vec![
                    ("source".to_string(), "nervix".to_string()),
                    ("kind".to_string(), format!("box-{id}")),
                ],
                "{name}: write_header"
            );
        }
        if name != "noack" {
            // Commit after acknowledgement: every position ends up committed.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            loop {
                let committed = kafka::committed(&bootstrap, &input, &group, PARTITIONS);
                let total: i64 = committed.iter().filter_map(|(_, next)| *next).sum();
                if total == n as i64 {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{name}: committed {committed:?}, want {n} records in all"
                );
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}

#[test]
fn two_instances_share_the_partitions_without_loss() {
    let (_cluster, bootstrap) = in_and_out(PARTITIONS);
    let n = 2_000;
    kafka::produce(&bootstrap, "in", &records(n));
    let dir = support::scratch_dir("ingest_kafka_instances");
    let node = Node::start(&dir);
    let body = "INSTANCES 2\n  MODE ACK PARALLEL MAX 64 BATCH TIMEOUT 5ms ACK TIMEOUT 10s\n    \
                RETRY POLICY BACKOFF 10ms MAX 100ms";
    define(
        &mut node.admin(),
        &graph("pair", &bootstrap, "in", "out", "pair", body),
    );
    let want = matching(n);
    let read = kafka::read_until(&bootstrap, "out", 60, |read| distinct(read) >= want.len());
    let got = ids(&read);
    assert_eq!(got.keys().copied().collect::<BTreeSet<_>>(), want);
    let duplicates: usize = got.values().map(|count| count - 1).sum();
    eprintln!(
        "two instances: {} records, {duplicates} duplicates",
        read.len()
    );
}

#[path = "support/http_server.rs"]
mod http_server;

#[test]
fn a_rejected_record_is_sought_back_to_and_delivered_again() {
    // The HTTP sink refuses record 3 once (400: ON MESSAGE ERROR LOG rejects its payload).
    let server = http_server::ScriptedServer::start(|request| {
        let status = if request.path == "/rec/3" && request.attempt == 1 {
            400
        } else {
            200
        };
        (status, Vec::new(), Vec::new())
    });
    let cluster = kafka::cluster(1);
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("in", 1).expect("topic");
    let n = 10;
    kafka::produce(&bootstrap, "in", &records(n));
    let dir = support::scratch_dir("ingest_kafka_reject");
    let node = Node::start(&dir);
    let script = format!(
        "
CREATE DOMAIN rej;
USE rej;
CREATE SCHEMA rec (id I64, value STRING);
CREATE WIRE JSON SCHEMA rec_wire MODE STRICT (id integer, value string);
CREATE CODEC rec_codec FROM WIRE JSON SCHEMA rec_wire TO SCHEMA rec;
CREATE RELAY recs SCHEMA rec UNBRANCHED;
CREATE CLIENT kafka_main TYPE KAFKA
  CONFIG {{'bootstrap.servers' = '{bootstrap}', 'auto.offset.reset' = 'earliest'}};
CREATE CLIENT api TYPE HTTP CONFIG {{'endpoint' = '{url}', 'timeout_ms' = 5000}};
CREATE KAFKA TOPIC INGESTOR rec_in
  FROM kafka_main
  TOPIC 'in'
  OFFSET BY CONSUMER GROUP 'rej'
  MODE ACK PARALLEL MAX 4 BATCH TIMEOUT 5ms ACK TIMEOUT 10s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  ON QUIESCE SUSPEND
  DECODE USING rec_codec
  TO recs
    INHERIT ALL
    UNBRANCHED
    FLUSH IMMEDIATE
    ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE HTTP REQUEST EMITTER rec_http
  FROM recs
  TO api METHOD 'POST' PATH '/rec/' || (input.id AS STRING)
    MODE ACK PARALLEL MAX 4 ACK TIMEOUT 10s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
START;
",
        url = server.url()
    );
    define(&mut node.admin(), &script);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let committed = kafka::committed(&bootstrap, "in", "rej", 1);
        if committed == vec![(0, Some(n as i64))] {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "committed {committed:?}; requests {:?}",
            server
                .requests()
                .iter()
                .map(|r| r.path.clone())
                .collect::<Vec<_>>()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let requests = server.requests();
    let to = |path: &str| requests.iter().filter(|r| r.path == path).count();
    assert_eq!(
        to("/rec/3"),
        2,
        "refused once, sought back to and sent again"
    );
    for id in 0..n {
        assert!(to(&format!("/rec/{id}")) >= 1, "record {id} delivered");
    }
    let metrics = support::dataplane::http_get(node.metrics, "/metrics");
    let at = "{domain=\"rej\",ingestor=\"rec_in\",instance=\"0\"}";
    let seeks = support::dataplane::metric(&metrics, &format!("nervix_kafka_seeks_total{at}"));
    assert!(seeks >= Some(1), "a seek back is counted: {seeks:?}");
    let records = support::dataplane::metric(&metrics, &format!("nervix_kafka_records_total{at}"));
    assert!(
        records > Some(n as u64),
        "the rejected record and those after it were read again: {records:?}"
    );
}

#[test]
fn kill_minus_nine_mid_stream_then_restart_delivers_every_record_at_least_once() {
    let n = 1_500;
    let (_cluster, bootstrap, mut node) = paced_stream("crash", n);
    let want = matching(n);
    node.kill();
    let committed_at_kill: i64 = committed_total(&bootstrap, "crash");
    assert!(
        committed_at_kill < n as i64,
        "killed mid-stream: {committed_at_kill} of {n} committed"
    );
    node.restart();
    let read = kafka::read_until(&bootstrap, "out", 120, |read| distinct(read) >= want.len());
    let got = ids(&read);
    assert_eq!(
        got.keys().copied().collect::<BTreeSet<_>>(),
        want,
        "every matching record reached the sink at least once"
    );
    let duplicates: usize = got.values().map(|count| count - 1).sum();
    eprintln!(
        "kill -9: {committed_at_kill} of {n} input records committed at the kill; {} output \
         records for {} matching; {duplicates} duplicates",
        read.len(),
        want.len()
    );
}

#[test]
fn offset_by_domain_survives_a_restart() {
    let (_cluster, bootstrap) = in_and_out(PARTITIONS);
    let n = 300;
    kafka::produce(&bootstrap, "in", &records(n));
    let dir = support::scratch_dir("ingest_kafka_domain");
    let mut node = Node::start(&dir);
    let script = graph("dom", &bootstrap, "in", "out", "unused", "INSTANCES 2\n  MODE ACK PARALLEL MAX 64 BATCH TIMEOUT 5ms ACK TIMEOUT 10s\n    RETRY POLICY BACKOFF 10ms MAX 100ms")
        .replace("OFFSET BY CONSUMER GROUP 'unused'", "OFFSET BY DOMAIN");
    define(&mut node.admin(), &script);
    let first = matching(n);
    let read = kafka::read_until(&bootstrap, "out", 60, |read| distinct(read) >= first.len());
    assert_eq!(ids(&read).keys().copied().collect::<BTreeSet<_>>(), first);
    // Past one runtime-state snapshot interval, the positions are on disk; kill -9.
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    node.restart();
    kafka::produce(&bootstrap, "in", &records_from(n, n));
    let both = matching(2 * n);
    let read = kafka::read_until(&bootstrap, "out", 60, |read| distinct(read) >= both.len());
    assert_eq!(ids(&read).keys().copied().collect::<BTreeSet<_>>(), both);
    // Nothing read before the restart is read again: the stored offsets were restored.
    let all = kafka::read_until(&bootstrap, "out", 30, |read| read.len() >= both.len());
    assert_eq!(all.len(), both.len());
    assert_eq!(
        distinct(&all),
        all.len(),
        "each record once: {:?}",
        ids(&all)
            .into_iter()
            .filter(|(_, count)| *count > 1)
            .collect::<Vec<_>>()
    );
}

#[test]
fn record_headers_and_metadata_reach_filters_and_routes() {
    let (_cluster, bootstrap) = in_and_out(PARTITIONS);
    // Even ids carry tenant 'a' (twice: read_header takes the first), odd ones 'b'.
    let n = 40;
    let produced: Vec<(String, Vec<(String, String)>)> = records(n)
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            let headers = if i % 2 == 0 {
                vec![
                    ("tenant".to_string(), "a".to_string()),
                    ("tenant".to_string(), "z".to_string()),
                ]
            } else {
                vec![("tenant".to_string(), "b".to_string())]
            };
            (value, headers)
        })
        .collect();
    kafka::produce_with_headers(&bootstrap, "in", &produced);
    let dir = support::scratch_dir("ingest_kafka_headers");
    let node = Node::start(&dir);
    let script = graph(
        "hdr",
        &bootstrap,
        "in",
        "out",
        "hdr",
        "MODE ACK PARALLEL MAX 64 BATCH TIMEOUT 5ms ACK TIMEOUT 10s\n    \
         RETRY POLICY BACKOFF 10ms MAX 100ms",
    )
    .replace(
        "FILTER WHERE contains(input.value, 'x')",
        "FILTER WHERE read_header('tenant') = 'a'",
    )
    .replace(
        "SET value = upper(input.value)",
        "SET value = metadata.topic || ':' || (metadata.partition AS STRING) || ':' || \
         (metadata.offset AS STRING) || ':' || \
         coalesce(read_header('tenant'), '-')",
    );
    define(&mut node.admin(), &script);
    let want: BTreeSet<i64> = (0..n as i64).filter(|i| i % 2 == 0).collect();
    let read = kafka::read_until(&bootstrap, "out", 60, |read| distinct(read) >= want.len());
    assert_eq!(ids(&read).keys().copied().collect::<BTreeSet<_>>(), want);
    for record in &read {
        let value: serde_json::Value = serde_json::from_str(&record.value).expect("JSON");
        let text = value["value"].as_str().expect("value");
        let parts: Vec<&str> = text.split(':').collect();
        assert_eq!(parts.len(), 4, "{text}");
        assert_eq!(parts[0], "in", "metadata.topic");
        let partition: i32 = parts[1].parse().expect("metadata.partition");
        assert!((0..PARTITIONS).contains(&partition), "{text}");
        let offset: i64 = parts[2].parse().expect("metadata.offset");
        assert!(offset >= 0, "{text}");
        assert_eq!(
            parts[3], "a",
            "read_header takes the first value in record order"
        );
    }
}

#[test]
fn sigterm_drains_and_commits_so_a_restart_repeats_nothing() {
    let n = 1_500;
    let (_cluster, bootstrap, mut node) = paced_stream("term", n);
    node.terminate();
    let committed: i64 = committed_total(&bootstrap, "term");
    assert!(
        committed > 0 && committed < n as i64,
        "stopped mid-stream: {committed} of {n} committed"
    );
    node.restart();
    let want = matching(n);
    let read = kafka::read_until(&bootstrap, "out", 120, |read| distinct(read) >= want.len());
    assert_eq!(ids(&read).keys().copied().collect::<BTreeSet<_>>(), want);
    let all = kafka::read_until(&bootstrap, "out", 30, |read| read.len() >= want.len());
    assert_eq!(
        distinct(&all),
        all.len(),
        "a graceful stop committed every delivered record: {:?}",
        ids(&all)
            .into_iter()
            .filter(|(_, count)| *count > 1)
            .take(10)
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_record_the_producer_refuses_becomes_an_error_record_under_send_to() {
    let cluster = kafka::cluster(1);
    let bootstrap = cluster.bootstrap_servers();
    for topic in ["in", "out", "refused"] {
        cluster.create_topic(topic, 1).expect("topic");
    }
    // Record 1's value is over the emitting client's message.max.bytes (1,000).
    let long = "x".repeat(1_500);
    let values = vec![
        r#"{"id": 0, "value": "box"}"#.to_string(),
        format!(r#"{{"id": 1, "value": "{long}"}}"#),
        r#"{"id": 2, "value": "xylophone"}"#.to_string(),
    ];
    kafka::produce(&bootstrap, "in", &values);
    let dir = support::scratch_dir("ingest_kafka_send_to");
    let node = Node::start(&dir);
    let script = graph(
        "refuse",
        &bootstrap,
        "in",
        "out",
        "refuse",
        "MODE ACK PARALLEL MAX 64 BATCH TIMEOUT 5ms ACK TIMEOUT 10s\n    \
         RETRY POLICY BACKOFF 10ms MAX 100ms",
    )
    .replace(
        "CREATE KAFKA TOPIC EMITTER rec_out\n  FROM recs\n  TO kafka_main",
        &format!(
            "CREATE SCHEMA refusal (id I64, reason STRING);
CREATE RELAY refusals SCHEMA refusal UNBRANCHED;
CREATE CLIENT kafka_small TYPE KAFKA
  CONFIG {{'bootstrap.servers' = '{bootstrap}', 'message.max.bytes' = '1000'}};
CREATE KAFKA TOPIC EMITTER refusals_out
  FROM refusals
  TO kafka_main TOPIC 'refused'
    MODE ACK PARALLEL MAX 8 ACK TIMEOUT 20s
    RETRY POLICY BACKOFF 10ms MAX 100ms
  FLUSH IMMEDIATE
  ON MESSAGE ERROR LOG
  ON GENERAL ERROR LOG;
CREATE KAFKA TOPIC EMITTER rec_out\n  FROM recs\n  TO kafka_small"
        ),
    )
    .replace(
        "  FLUSH IMMEDIATE\n  ON MESSAGE ERROR LOG\n  ON GENERAL ERROR LOG;\nSTART;",
        "  FLUSH IMMEDIATE\n  ON MESSAGE ERROR SEND TO refusals\n    SET id = input.id, \
         reason = error.message\n  ON GENERAL ERROR LOG;\nSTART;",
    );
    assert!(script.contains("SEND TO refusals"), "{script}");
    define(&mut node.admin(), &script);
    let refused = kafka::read_until(&bootstrap, "refused", 60, |read| !read.is_empty());
    assert_eq!(refused.len(), 1, "{refused:?}");
    let record: serde_json::Value = serde_json::from_str(&refused[0].value).expect("JSON");
    assert_eq!(record["id"], 1);
    let reason = record["reason"].as_str().expect("reason");
    assert!(
        reason.to_lowercase().contains("size"),
        "the producer's cause: {reason}"
    );
    let out = kafka::read_until(&bootstrap, "out", 30, |read| distinct(read) >= 2);
    assert_eq!(ids(&out).keys().copied().collect::<Vec<_>>(), vec![0, 2]);
    // The refused record went to its error relay, so every input position is committed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while kafka::committed(&bootstrap, "in", "refuse", 1) != vec![(0, Some(3))] {
        assert!(std::time::Instant::now() < deadline, "not committed");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
